#!/usr/bin/env bash
# benchmarks/t/peers_tiny.t: keeps benchmarks/peers from rotting (issue 12). It asserts
# nothing about speed: the driver's flags, the process meter's arithmetic, the report's
# ratios and verdicts on figures made up here, and a tiny run (3,000 events, two slow rates)
# of every sink and both producers on a real Kafka and Postgres, each of which must deliver
# every event exactly once. Run by scripts/test as root (the peers' venvs and jars are
# cached system-wide there).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/deploy/tap.sh"
peers=$top/benchmarks/peers
kit=$top/benchmarks/peers-lib
scratch=$(mktemp -d /tmp/lakehouse-peers-test.XXXXXX)
chmod 755 "$scratch"   # the scratch Postgres runs as the server user
trap 'rm -rf "$scratch"' EXIT

# --- flags
out=$("$peers" --help); ok $? "--help exits 0"
grep -q -- '--tiny' <<<"$out"; ok $? "--help names --tiny"
set +e
out=$("$peers" --bogus 2>&1); rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "unknown option '--bogus'" <<<"$out"; ok $? "an unknown flag is refused by name"
set +e
out=$("$peers" --rates 1000,fast 2>&1); rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "rates must be whole numbers" <<<"$out"; ok $? "a bad --rates is refused before anything starts"
set +e
out=$("$peers" --sinks lakehouse,flink 2>&1); rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "unknown sink 'flink'" <<<"$out"; ok $? "an unknown sink is refused"

# --- the meter counts a child's CPU: a process that spins until it has used 1 s of CPU
# (100 ticks, whatever else the machine does) shows 100 ticks, plus its start-up, less what it used after the
# meter's last sample of it (at most one 0.1 s interval).
"$kit/proc_meter" --interval 0.1 "spin=$$:spin-marker" >"$scratch/meter" &
meter=$!
perl -e '$0 = "spin-marker"; 1 while (times)[0] + (times)[1] < 1.0'
sleep 0.3
kill "$meter"; wait "$meter" 2>/dev/null || true
ticks=$(awk '$2 == "spin" {t = $3} END {print t + 0}' "$scratch/meter")
[ "$ticks" -ge 80 ] && [ "$ticks" -le 120 ]; ok $? "proc_meter counts a child's CPU: $ticks ticks of the 100 it used"
[ -n "$(awk '$2 == "spin" && $6 > 0 {print; exit}' "$scratch/meter")" ]; ok $? "proc_meter sees the child while it runs"

# --- the report: ratios within a run, ranges across runs, verdicts that can say missed
cat >"$scratch/figures.tsv" <<'TSV'
1	lakehouse	rows_per_s	30000
1	copy	rows_per_s	40000
1	python	rows_per_s	15000
1	lakehouse	cpu_s_per_m	20
1	python	cpu_s_per_m	30
2	lakehouse	rows_per_s	36000
2	copy	rows_per_s	36000
2	python	rows_per_s	18000
2	lakehouse	cpu_s_per_m	22
2	python	cpu_s_per_m	33
TSV
venv=$("$kit/python-env" | tail -n 1)
report=$("$venv/bin/python" "$kit/report.py" "$scratch/figures.tsv")
grep -q '| lakehouse (stream worker) | 30,000 to 36,000 |' <<<"$report"; ok $? "report: a figure is given as its range over the runs"
grep -q -- '- \*\*missed\*\*: lakehouse >= 0.9x the COPY ceiling in every run (lakehouse / COPY 0.75 to 1.00)' <<<"$report"
ok $? "report: lakehouse / COPY is taken per run (0.75 and 1.00) and one run under 0.9 misses the target"
grep -q -- '- met: throughput above Python sink' <<<"$report"; ok $? "report: a target met in every run says met"
grep -q -- '- met: CPU per million rows at least 1x lower than Python sink .*its CPU / lakehouse.s 1.50)' <<<"$report"
ok $? "report: CPU ratios are the peer's over lakehouse's, per run"

# --- a tiny run of everything
set +e
"$peers" --tiny --dir "$scratch/run" >"$scratch/run.log" 2>&1
rc=$?
set -e
ok "$rc" "benchmarks/peers --tiny runs every sink and both producers"
if [ "$rc" -ne 0 ]; then tail -n 40 "$scratch/run.log" | sed 's/^/# /'; fi
for s in ${PEERS_TEST_SINKS:-lakehouse python connect spark10 sparkfast}; do
  n=$(grep -cE "^peers: $s at (200|500) events/s: freshness .* over (1000|2500) rows" "$scratch/run.log" || true)
  is "$n" 2 "$s: a freshness figure at both rates, over every event of each window"
done
grep -q '^peers: copy: 3000 rows' "$scratch/run.log"; ok $? "copy: the ceiling copied lakehouse's 3000 rows"
for p in lakehouse-producer python-producer; do
  grep -qE "^peers: $p: [0-9]+ events/s" "$scratch/run.log"; ok $? "$p: published every event"
done
grep -q '^peers: done: every sink and producer delivered every event exactly once' "$scratch/run.log"
ok $? "every sink and producer delivered every event exactly once"
done_testing
