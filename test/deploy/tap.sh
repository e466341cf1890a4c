# test/deploy/tap.sh: a few TAP helpers for the deployment tests (sourced, not run).
# These tests are bash because what they check is shell: packages, files, commands.
# Each test counts its assertions and prints the plan at the end (done_testing style).
lh_tap_n=0 lh_tap_failed=0

ok() { # ok CONDITION_EXIT_CODE DESCRIPTION
  lh_tap_n=$((lh_tap_n + 1))
  if [ "$1" -eq 0 ]; then
    echo "ok $lh_tap_n - $2"
  else
    echo "not ok $lh_tap_n - $2"
    lh_tap_failed=$((lh_tap_failed + 1))
  fi
}

# check DESCRIPTION COMMAND...: runs COMMAND, passes when it exits 0; its output is shown
# as TAP comments when it fails.
check() {
  local what=$1 out rc; shift
  set +e
  out=$("$@" 2>&1)
  rc=$?
  set -e
  ok "$rc" "$what"
  if [ "$rc" -ne 0 ]; then printf '%s\n' "$out" | tail -n 30 | sed 's/^/# /'; fi
  return 0
}

# is GOT WANT DESCRIPTION
is() {
  if [ "$1" = "$2" ]; then ok 0 "$3"; else ok 1 "$3"; echo "#   got: '$1'"; echo "#  want: '$2'"; fi
}

skip_all() { echo "1..0 # SKIP $*"; exit 0; }
# Stops this test with a failure (not prove's "Bail out!", which would stop the others too).
give_up() { ok 1 "$*"; echo "1..$lh_tap_n"; exit 1; }

done_testing() {
  echo "1..$lh_tap_n"
  [ "$lh_tap_failed" -eq 0 ]
}

# lh_free_port (free ports) and lh_copy_source (a copy of the source) come from here.
LH_PROG=${LH_PROG:-deploy-test}
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
