#!/usr/bin/env bash
# scripts/package builds the two Debian packages; installed with apt-get as a user would
# (after removing what make install put there, so that only the packages can provide the
# files), the extension is created in a fresh cluster and lakehouse-producer is on the
# default PATH. Afterwards the packages are purged and make install runs again, so the
# machine is as the test found it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/tap.sh"

[ "$(id -u)" -eq 0 ] || skip_all "installs packages: needs root"
command -v apt-get >/dev/null || skip_all "no apt-get"
# Packages someone installed are theirs: the test would purge them.
if dpkg-query -W -f='${db:Status-Status}\n' postgresql-15-lakehouse lakehouse-producer 2>/dev/null | grep -q '^installed'; then
  skip_all "postgresql-15-lakehouse or lakehouse-producer is installed on this machine: not touched"
fi

version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$top/lakehouse.control")
pkglib=$(pg_config --pkglibdir)
share=$(pg_config --sharedir)
work=$(mktemp -d "${TMPDIR:-/tmp}/lakehouse-deb-test.XXXXXX")
chmod 755 "$work"
pg=$work/pg
# While the test runs, the extension's files come from the packages only (make uninstall
# first): a cluster of this machine's PostgreSQL 15 other than the test's cannot load
# lakehouse meanwhile. Run by scripts/test, on a machine that is there for it. Whatever
# happens, the packages go and make install runs again (checked as the last test below
# when the test gets that far).
restore() {
  "$top/scripts/pg" remove "$pg" >/dev/null 2>&1 || true
  if dpkg-query -W -f='${db:Status-Status}\n' postgresql-15-lakehouse lakehouse-producer 2>/dev/null | grep -q '^installed'; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -q postgresql-15-lakehouse lakehouse-producer >/dev/null 2>&1 || true
  fi
  if [ ! -e "$pkglib/lakehouse.so" ]; then
    make -s -C "$top" install >/dev/null 2>&1 || echo "# could not run make install again: run it by hand" >&2
  fi
  rm -rf "$work"
}
trap restore EXIT


check "scripts/package --help" "$top/scripts/package" --help
rc=0
"$top/scripts/package" --out "$work/debs" >"$work/package.log" 2>&1 || rc=$?
ok $rc "scripts/package builds"
[ $rc -eq 0 ] || { sed 's/^/# /' "$work/package.log" | tail -n 30; give_up "no package to test"; }
server_deb=$work/debs/postgresql-15-lakehouse_${version}_$(dpkg --print-architecture).deb
producer_deb=$work/debs/lakehouse-producer_${version}_$(dpkg --print-architecture).deb
check "server package for $version built" test -f "$server_deb"
check "producer package for $version built" test -f "$producer_deb"

server_files=$(dpkg-deb -c "$server_deb" | awk '{print $6}')
producer_files=$(dpkg-deb -c "$producer_deb" | awk '{print $6}')
check "server package holds lakehouse.so" grep -qx "./${pkglib#/}/lakehouse.so" <<<"$server_files"
check "server package holds the control file and the $version script" \
  bash -c 'grep -qx "$1" <<<"$3" && grep -qx "$2" <<<"$3"' _ \
  "./${share#/}/extension/lakehouse.control" "./${share#/}/extension/lakehouse--$version.sql" "$server_files"
check "server package holds no producer" bash -c '! grep -q lakehouse-producer <<<"$1"' _ "$server_files"
check "producer package puts it in /usr/bin" grep -qx './usr/bin/lakehouse-producer' <<<"$producer_files"
check "server package depends on postgresql-15" \
  bash -c 'dpkg-deb -f "$1" Depends | grep -q "postgresql-15"' _ "$server_deb"

# Only the packages may provide the files from here on.
make -s -C "$top" uninstall >/dev/null
check "make uninstall removed lakehouse.so and the producer's link" \
  bash -c '[ ! -e "$1/lakehouse.so" ] && [ ! -e /usr/local/bin/lakehouse-producer ]' _ "$pkglib"

rc=0
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$server_deb" "$producer_deb" >"$work/apt.log" 2>&1 || rc=$?
ok $rc "apt-get install ./postgresql-15-lakehouse ./lakehouse-producer"
[ $rc -eq 0 ] || sed 's/^/# /' "$work/apt.log" | tail -n 20
is "$(dpkg-query -W -f='${Version}' postgresql-15-lakehouse 2>/dev/null)" "$version" "postgresql-15-lakehouse $version installed"
is "$(dpkg -S "$pkglib/lakehouse.so" 2>/dev/null | cut -d: -f1)" "postgresql-15-lakehouse" "lakehouse.so belongs to the package"

# A user's login PATH on Debian, without pg_config's bindir.
found=$(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash -c 'command -v lakehouse-producer' || true)
is "$found" /usr/bin/lakehouse-producer "lakehouse-producer found on the default PATH"
check "lakehouse-producer --help runs" bash -c '/usr/bin/lakehouse-producer --help | grep -q "^Usage"'

port=$(lh_free_port 26100)
rc=0
{ "$top/scripts/pg" create "$pg" --port "$port" && "$top/scripts/pg" start "$pg"; } >"$work/pg.log" 2>&1 || rc=$?
ok $rc "a fresh cluster starts with the packaged lakehouse preloaded"
[ $rc -eq 0 ] || sed 's/^/# /' "$work/pg.log" | tail -n 20
got=$("$top/scripts/pg" psql "$pg" -qtA -v ON_ERROR_STOP=1 \
  -c "CREATE EXTENSION lakehouse" \
  -c "SELECT extversion FROM pg_extension WHERE extname = 'lakehouse'" 2>&1 || true)
is "$got" "$version" "CREATE EXTENSION lakehouse from the package gives $version"
"$top/scripts/pg" remove "$pg" >/dev/null 2>&1 || true

rc=0
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q postgresql-15-lakehouse lakehouse-producer >"$work/purge.log" 2>&1 || rc=$?
ok $rc "apt-get purge removes both"
check "purge took the files away" \
  bash -c '[ ! -e "$1/lakehouse.so" ] && [ ! -e /usr/bin/lakehouse-producer ]' _ "$pkglib"
check "make install puts the extension back" make -s -C "$top" install
check "and lakehouse.so is there again" test -e "$pkglib/lakehouse.so"

done_testing
