#!/usr/bin/env bash
# make install makes lakehouse-producer reachable on a user's PATH: a link in
# PRODUCER_LINK_DIR (/usr/local/bin) to the binary in pg_config's bindir, which Debian keeps
# off PATH. Checked in a DESTDIR (a file there that is not a link is left alone, with a
# warning; PRODUCER_LINK_DIR= makes none; uninstall removes only our link), then on this
# machine as scripts/test installed it, through a login PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/tap.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/lakehouse-link-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
bindir=$(pg_config --bindir)
login_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

make -s -C "$top" install DESTDIR="$work/a" >"$work/a.log" 2>&1
is "$(readlink "$work/a/usr/local/bin/lakehouse-producer" || true)" "$bindir/lakehouse-producer" \
  "make install links /usr/local/bin/lakehouse-producer to pg_config's bindir"
check "the binary it points to is installed" test -x "$work/a$bindir/lakehouse-producer"

make -s -C "$top" install DESTDIR="$work/b" PRODUCER_LINK_DIR= >"$work/b.log" 2>&1
check "PRODUCER_LINK_DIR= makes no link" test ! -e "$work/b/usr/local/bin/lakehouse-producer"

mkdir -p "$work/c/usr/local/bin"
echo 'somebody else' >"$work/c/usr/local/bin/lakehouse-producer"
make -s -C "$top" install DESTDIR="$work/c" >"$work/c.log" 2>&1
is "$(cat "$work/c/usr/local/bin/lakehouse-producer")" "somebody else" "a file there that is not a link is left alone"
check "with a warning that says how to run the producer" \
  grep -q "is not a link: left as it is; run lakehouse-producer as $bindir/lakehouse-producer" "$work/c.log"

make -s -C "$top" uninstall DESTDIR="$work/a" >/dev/null 2>&1
check "make uninstall removes the link" test ! -L "$work/a/usr/local/bin/lakehouse-producer"
make -s -C "$top" uninstall DESTDIR="$work/c" >/dev/null 2>&1
is "$(cat "$work/c/usr/local/bin/lakehouse-producer")" "somebody else" "and leaves somebody else's file"

# This machine, as scripts/test's make install left it.
found=$(env -i PATH="$login_path" bash -c 'command -v lakehouse-producer' || true)
is "$found" /usr/local/bin/lakehouse-producer "on this machine a login PATH finds lakehouse-producer in /usr/local/bin"
check "and it runs" env -i PATH="$login_path" lakehouse-producer --help

done_testing
