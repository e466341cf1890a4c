# scripts/lib.sh: helpers shared by the harness scripts (sourced, not run).
# Who runs servers, where caches live, and how to wait for something with a bound.

lh_say() { printf '%s: %s\n' "${LH_PROG:-lakehouse}" "$*"; }
lh_die() { printf '%s: error: %s\n' "${LH_PROG:-lakehouse}" "$*" >&2; exit 1; }

# The repository's top folder, whatever the caller's working directory.
LH_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# initdb and postgres refuse to run as root, so root runs servers as this user.
LH_SERVER_USER=${LAKEHOUSE_SERVER_USER:-postgres}

# Cache of downloads (Kafka jars). Root shares one system-wide folder so that the test
# phase, which runs as LH_SERVER_USER, reads what root fetched.
if [ -n "${LAKEHOUSE_CACHE:-}" ]; then
  LH_CACHE=$LAKEHOUSE_CACHE
elif [ "$(id -u)" -eq 0 ]; then
  LH_CACHE=/var/cache/lakehouse
else
  LH_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/lakehouse
fi

# Runs a command as the server user when we are root, else as ourselves.
lh_as_server_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$LH_SERVER_USER" -- "$@"
  else
    "$@"
  fi
}

# Gives a folder to the server user when we are root.
lh_own_dir() {
  mkdir -p "$1"
  if [ "$(id -u)" -eq 0 ]; then
    chown "$LH_SERVER_USER" "$1"
  fi
}

# lh_wait_until SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s until it succeeds.
lh_wait_until() {
  local limit=$1 what=$2; shift 2
  local deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      return 1
    fi
    sleep 0.2
  done
}

# lh_free_port START [SPAN]: the first port from START up such that it and the SPAN - 1
# ports after it carry no socket at all (listening, connected or closing). Callers start
# below the kernel's ephemeral range (32768 and up on Linux), where any outgoing connection
# could take a port between this check and a server's bind.
lh_free_port() {
  local p=$1 span=${2:-1} i busy
  while :; do
    busy=
    for ((i = 0; i < span; i++)); do
      if [ -n "$(ss -Htan "sport = :$((p + i))" 2>/dev/null)" ]; then busy=1; break; fi
    done
    [ -n "$busy" ] || break
    p=$((p + 1))
  done
  echo "$p"
}

# lh_copy_source DEST: copies the source tree into DEST: the files git knows of (tracked, or
# new and not ignored) that exist, so no build output of the working tree (objects,
# lakehouse.so, results) comes along; where git cannot say (no .git, or a checkout git
# refuses to read as this user), the tree less build output.
lh_copy_source() {
  local dest=$1 list
  mkdir -p "$dest"
  list=$(mktemp)
  if (cd "$LH_TOP" && git ls-files -z --cached --others --exclude-standard) >"$list" 2>/dev/null; then
    (cd "$LH_TOP" && while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done <"$list" |
      tar --null -T - -cf -) | tar -xf - -C "$dest" || { rm -f "$list"; return 1; }
  else
    tar -C "$LH_TOP" --exclude='*.o' --exclude='*.so' --exclude='*.bc' --exclude=results-regress \
      --exclude=dist --exclude=.git -cf - . | tar -xf - -C "$dest" || { rm -f "$list"; return 1; }
  fi
  rm -f "$list"
}

# PostgreSQL 15's binaries, wherever Debian or a source build put them.
lh_pg_bindir() {
  local pgc
  pgc=${PG_CONFIG:-$(command -v pg_config || true)}
  if [ -n "$pgc" ] && [ -x "$("$pgc" --bindir)/initdb" ]; then
    "$pgc" --bindir
  elif [ -x /usr/lib/postgresql/15/bin/initdb ]; then
    echo /usr/lib/postgresql/15/bin
  else
    lh_die "PostgreSQL 15 server binaries not found; run scripts/install-deps"
  fi
}
