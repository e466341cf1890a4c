#!/usr/bin/env bash
# benchmarks/t/peers_tiny.t: keeps benchmarks/peers from rotting (issue 12). It asserts
# nothing about speed: the driver's flags, the process meter's arithmetic, the report's
# ratios and verdicts on figures made up here, the delivery check on sink output broken on
# purpose, and a tiny run (3,000 events, two slow rates) of every sink and both producers
# (and kcat, their ceiling) on a real Kafka and Postgres, each of which must deliver every
# event exactly once. Run by scripts/test as root (the peers' venvs and jars are
# cached system-wide there).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/deploy/tap.sh"
peers=$top/benchmarks/peers
kit=$top/benchmarks/peers-lib
# contains PATTERN TEXT: grep -E for PATTERN in TEXT (for check, which reports instead of exiting)
contains() { grep -qE -- "$1" <<<"$2"; }
scratch=$(mktemp -d /tmp/lakehouse-peers-test.XXXXXX)
chmod 755 "$scratch"   # the scratch Postgres runs as the server user
trap '"$top/scripts/pg" stop "$scratch/pg" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT

# --- flags
check "--help exits 0" "$peers" --help
out=$("$peers" --help || true)
check "--help names --tiny" contains '--tiny' "$out"
set +e
out=$("$peers" --bogus 2>&1); rc=$?
set -e
check "an unknown flag is refused by name" contains "unknown option '--bogus'" "$rc $out"
is "$([ "$rc" -ne 0 ] && echo refused)" refused "an unknown flag fails the run"
set +e
out=$("$peers" --rates 1000,fast 2>&1); rc=$?
set -e
check "a bad --rates is refused before anything starts" contains "rates must be whole numbers" "$out"
is "$([ "$rc" -ne 0 ] && echo refused)" refused "a bad --rates fails the run"
set +e
out=$("$peers" --spark-fast-trigger soon 2>&1); rc=$?
set -e
check "a bad --spark-fast-trigger is refused before anything starts" contains "spark-fast-trigger must be seconds .* or auto, not 'soon'" "$rc $out"
set +e
out=$("$peers" --sinks none --no-producers 2>&1); rc=$?
set -e
check "--sinks none with --no-producers is refused: nothing to measure" contains "leaves nothing to measure" "$rc $out"
set +e
out=$("$peers" --sinks lakehouse,flink 2>&1); rc=$?
set -e
check "an unknown sink is refused" contains "unknown sink 'flink'" "$out"
set +e
out=$("$peers" --dir "$scratch/inside" --perf "$scratch/inside/perf" 2>&1); rc=$?
set -e
check "--perf inside --dir is refused before anything starts" contains "lies inside --dir" "$rc $out"
check "... and leaves no profile folder behind" test ! -e "$scratch/inside/perf"
is "$([ "$rc" -ne 0 ] && echo refused)" refused "an unknown sink fails the run"

# --- the meter counts a child's CPU: a process that spins until it has used 1 s of CPU
# (100 ticks, whatever else the machine does) shows 100 ticks, plus its start-up, less what it used after the
# meter's last sample of it (at most one 0.1 s interval).
"$kit/proc_meter" --interval 0.1 "spin=$$:spin-marker" >"$scratch/meter" &
meter=$!
perl -e '$0 = "spin-marker"; 1 while (times)[0] + (times)[1] < 1.0'
sleep 0.3
kill "$meter"; wait "$meter" 2>/dev/null || true
ticks=$(awk '$2 == "spin" {t = $3} END {print t + 0}' "$scratch/meter")
check "proc_meter counts a child's CPU: $ticks ticks of the 100 it used" test "$ticks" -ge 80 -a "$ticks" -le 120
check "proc_meter sees the child while it runs" test -n "$(awk '$2 == "spin" && $6 > 0 {print; exit}' "$scratch/meter")"

# --- perf_breakdown.py on `perf script` text made up here (sampled at 1 Hz, so a sample is
# a second): samples go to their process by pid (a Postgres process is the worker or a
# backend when any of its samples says so, so an un-unwound sample of the worker stays the
# worker's), other processes are named by pid and thread names, and each sample of the
# worker and backends goes to the first category that holds on its stack; perf's header
# lines and the idle loop are left out. A process other than Postgres with a tenth of the
# samples or more is broken down by thread group (the name without its number), with the
# share of each taken in the kernel (a first stack address of 0xffff...).
printf '%b' \
  '# captured on: today\n' \
  'postgres 100/100\n\t1 jsonb_recv+0x10\n\t2 CopyFrom\n\t3 lakehouse_stream_main\n\n' \
  'postgres 100/100\n\t1 json_lex\n\t2 jsonb_recv\n\t3 CopyFrom\n\t4 lakehouse_stream_main\n\n' \
  'postgres 100/100\n\t1 clear_page_erms\n\t2 shmem_fault\n\t3 mdextend\n\t4 CopyFrom\n\t5 lakehouse_stream_main\n\n' \
  'postgres 100/100\n\t1 rd_kafka_q_serve\n\t2 [unknown]\n\n' \
  'postgres 200/200\n\t1 pq_getbytes\n\t2 CopyFrom\n\t3 PostgresMain\n\n' \
  'postgres 200/200\n\t1 filemap_fault\n\t2 shmem_fault\n\t3 PostgresMain\n\n' \
  'postgres 300/300\n\t1 XLogFlush\n\t2 CheckpointerMain\n\n' \
  'python 400/400\n\t1 [unknown]\n\n' 'python 400/400\n\t1 [unknown]\n\n' \
  'rdk:broker1 100/101\n\t1 LZ4_decompress_safe\n\n' \
  'data-plane-kafk 500/502\n\t1 [unknown]\n\n' 'data-plane-kafk 500/503\n\t1 [unknown]\n\n' \
  'C1 CompilerThre 500/501\n\t1 [unknown]\n\n' \
  'GC Thread#0 600/601\n\tffffffff81000000 clear_page_erms\n\t7f0000000000 [unknown]\n\n' \
  'GC Thread#1 600/602\n\t7f0000000001 [unknown]\n\n' \
  'Executor task l 600/603\n\t7f0000000002 [unknown]\n\n' \
  'tiny 700/700\n\t7f0000000003 [unknown]\n\n' \
  'swapper 0/0\n\t1 default_idle\n\n' 'swapper 0/0\n\t1 default_idle\n\n' >"$scratch/perf.txt"
breakdown=$(python3 "$kit/perf_breakdown.py" --freq 1 "$scratch/perf.txt" 2>&1 || true)
for row in '| lakehouse stream worker | 4.00 |' '| pid 400 (python) | 2.00 |' \
    '| Postgres backend (a client'"'"'s session) | 2.00 |' \
    '| Postgres helpers (checkpointer, WAL writer, background writer, ...) | 1.00 |' \
    '| librdkafka threads (the worker'"'"'s or a client'"'"'s) | 1.00 |' \
    '| pid 500 (data-plane-kafk, C1 CompilerThre) | 3.00 |' \
    '| pid 600 (GC Thread#0, GC Thread#1, Executor task l) | 3.00 |' \
    'pid 600 (GC Thread#0, GC Thread#1, Executor task l) by thread group, 3.00 CPU s:' \
    '| GC Thread | 66.7 % | 2.00 | 50 % |' '| Executor task l | 33.3 % | 1.00 | 0 % |' \
    '| data-plane-kafk | 66.7 % | 2.00 | 0 % |' \
    '| jsonb input (parse, build, sort keys) | 50.0 % | 2.00 |' \
    '| first touch of shared_buffers pages (kernel zeroing them) | 25.0 % | 1.00 |' \
    '| librdkafka calls on the worker'"'"'s thread | 25.0 % | 1.00 |' \
    '| client protocol (reading COPY data from the socket) | 50.0 % | 1.00 |' '| other | 50.0 % | 1.00 |'; do
  check "perf_breakdown: $row" grep -qF -- "$row" <<<"$breakdown"
done
check "perf_breakdown: a process under a tenth of the samples is not broken down by thread" \
  bash -c '! grep -qF "pid 700 (tiny) by thread group" <<<"$1" && grep -qF "| pid 700 (tiny) | 1.00 |" <<<"$1"' _ "$breakdown"
check "perf_breakdown: neither the idle loop nor perf's header is a process" \
  bash -c '! grep -qE "swapper|pid 0|captured" <<<"$1"' _ "$breakdown"
set +e
out=$(python3 "$kit/perf_breakdown.py" --freq 0 "$scratch/perf.txt" 2>&1); rc=$?
set -e
check "perf_breakdown: --freq 0 is refused" contains "freq must be positive" "$rc $out"
set +e
out=$(python3 "$kit/perf_breakdown.py" --freq 1 /dev/null 2>&1); rc=$?
set -e
is "$rc $out" "1 perf_breakdown: no samples in the input" "perf_breakdown: no samples is an error, not an empty table"

# --- settle_freed_memory waits until the last drop is settle_seconds old, and only then.
settle_took() {  # settle_took MARK(0/1): seconds settle_freed_memory took, settle_seconds 1
  ( lh_say() { :; }; KIT=$kit; . "$kit/measure.sh"; settle_seconds=1
    [ "$1" = 0 ] || note_freed
    t0=$(now); settle_freed_memory; calc '%.2f' "$(now) - $t0" )
}
took=$(settle_took 1)
check "settle_freed_memory waits after a drop (${took}s of 1 s)" awk -v t="$took" 'BEGIN { exit !(t >= 0.9 && t < 3) }'
took=$(settle_took 0)
check "settle_freed_memory does not wait without a drop (${took}s)" awk -v t="$took" 'BEGIN { exit !(t < 0.5) }'

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
check "report: a figure is given as its range over the runs" contains '\| lakehouse \(stream worker\) \| 30,000 to 36,000 \|' "$report"
check "report: lakehouse / COPY is taken per run (0.75 and 1.00) and one run under 0.9 misses the target" \
  contains '^- \*\*missed\*\*: lakehouse >= 0.9x the COPY ceiling in every run \(lakehouse / COPY 0.75 to 1.00\)' "$report"
check "report: a target met in every run says met" contains '^- met: throughput above Python sink' "$report"
check "report: CPU ratios are the peer's over lakehouse's, per run" \
  contains '^- met: CPU per million rows lower than Python sink .*its CPU / lakehouse.s 1.50\)' "$report"
# run, system, measure, value: the highest-rate window, kept up in run 1, not in run 2
printf '%s\t%s\t%s\t%s\n' 1 lakehouse max_rate 40000 1 lakehouse fresh_max_p50 0.01 1 lakehouse fresh_max_p95 0.02 \
  1 lakehouse fresh_max_p99 0.03 1 lakehouse max_kept_up 1 2 lakehouse max_rate 42000 2 lakehouse fresh_max_p50 0.5 \
  2 lakehouse fresh_max_p95 2.0 2 lakehouse fresh_max_p99 3.0 2 lakehouse max_kept_up 0 >"$scratch/max.tsv"
check "report: the highest-rate window says whether the sink kept up in every run" \
  contains '\| at 40,000 to 42,000/s \(fell behind in 1 of 2 runs\): ' "$("$venv/bin/python" "$kit/report.py" "$scratch/max.tsv")"
printf '1\tlakehouse-producer\tevents_per_s\t100\n1\tpython-producer\tevents_per_s\t50\n1\tkcat\tevents_per_s\t120\n' >"$scratch/prod.tsv"
check "report: the producers' verdict gives the ceiling, kcat over the Python producer" \
  contains '^- \*\*missed\*\*: lakehouse-producer >= 4x .*\(ratio 2.00; the ceiling, kcat publishing the same file unvalidated, was 2.40x the Python producer\)' \
  "$("$venv/bin/python" "$kit/report.py" "$scratch/prod.tsv")"
check "report: a target without figures in every run is not judged" \
  contains '^- not measured in every run: throughput above Kafka Connect' "$(printf '1\tlakehouse\trows_per_s\t5\n1\tconnect\trows_per_s\t4\n2\tlakehouse\trows_per_s\t5\n' >"$scratch/two.tsv"; "$venv/bin/python" "$kit/report.py" "$scratch/two.tsv" --runs 2)"

# --- the delivery check fails on a sink that lost, repeated or garbled an event: a table
# shaped like a Postgres sink's and a Spark final report, each right and then broken, judged
# by the same check_delivered the driver runs on every sink.
pgdir=$scratch/pg
"$top/scripts/pg" create "$pgdir" --port "$(. "$top/scripts/lib.sh"; lh_free_port 21300)" >/dev/null
"$top/scripts/pg" start "$pgdir" >/dev/null
delivered() { # delivered SINK TAG N: check_delivered with the driver's globals, in a subshell
  (
    set +e
    LH_PROG=peers dir=$scratch PG=$top/scripts/pg KIT=$kit
    . "$top/scripts/lib.sh"; . "$kit/measure.sh"; . "$kit/sinks.sh"
    SPARKENV=$venv   # (sinks.sh clears it; the Python peers' venv reads JSON as well)
    check_delivered "$@"
  )
}
sqlc() { "$top/scripts/pg" psql "$pgdir" -Atq -v ON_ERROR_STOP=1 -c "$1"; }
n=50
sqlc "CREATE TABLE public.python_t (kafka_partition int NOT NULL, kafka_offset bigint NOT NULL, kafka_timestamp timestamptz,
        payload jsonb, PRIMARY KEY (kafka_partition, kafka_offset));
      INSERT INTO public.python_t SELECT i % 4, i / 4, now(), jsonb_build_object('seq', i) FROM generate_series(0, $n - 1) i"
check "delivery check: a sink table with every event once passes" delivered python python_t $n
judge() { # judge WHAT SAYS SQL_TO_BREAK SQL_TO_MEND: the check fails and says SAYS
  sqlc "$3"
  set +e; out=$(delivered python python_t $n 2>&1); rc=$?; set -e
  is "$([ "$rc" -ne 0 ] && echo failed)" failed "delivery check: $1 fails it"
  check "delivery check: $1 is named" contains "$2" "$out"
  sqlc "$4"
}
judge "an event lost" "holds 49 rows \\(49 distinct offsets, 0 without .*summing to 1218\\)" "DELETE FROM public.python_t WHERE payload->>'seq' = '7'" \
  "INSERT INTO public.python_t VALUES (7 % 4, 7 / 4, now(), '{\"seq\": 7}')"
judge "an event written twice (at another offset)" "holds 51 rows" "INSERT INTO public.python_t VALUES (9, 0, now(), '{\"seq\": 3}')" \
  "DELETE FROM public.python_t WHERE kafka_partition = 9"
judge "an event in place of another (the count right)" "holds 50 rows .*summing to 1224\\)" "UPDATE public.python_t SET payload = '{\"seq\": 3}' WHERE payload->>'seq' = '4'" \
  "UPDATE public.python_t SET payload = '{\"seq\": 4}' WHERE kafka_partition = 0 AND kafka_offset = 1"
judge "a row without its Kafka timestamp" "1 without timestamp or payload" "UPDATE public.python_t SET kafka_timestamp = NULL WHERE payload->>'seq' = '5'" \
  "UPDATE public.python_t SET kafka_timestamp = now() WHERE kafka_timestamp IS NULL"
check "delivery check: the mended table passes again" delivered python python_t $n
mkdir -p "$scratch/spark/spark_t"
printf '{"total_rows": %d, "distinct_partition_offsets": %d}\n' $n $n >"$scratch/spark/spark_t/final.json"
check "delivery check: a Spark output with every offset once passes" delivered spark10 spark_t $n
printf '{"total_rows": %d, "distinct_partition_offsets": %d}\n' $n $((n - 1)) >"$scratch/spark/spark_t/final.json"
set +e; out=$(delivered spark10 spark_t $n 2>&1); rc=$?; set -e
is "$([ "$rc" -ne 0 ] && echo failed)" failed "delivery check: a Spark output with an offset twice fails it"
check "delivery check: the Spark output's repeat is named" contains "holds 50 rows \\(49 distinct offsets" "$out"
"$top/scripts/pg" stop "$pgdir" >/dev/null

# --- the sinks' order in each run: turned by (run - 1) * n / runs of its n places, copy kept
# right after lakehouse, every sink in every run once.
order() { (LH_PROG=peers dir=$scratch KIT=$kit; . "$top/scripts/lib.sh"; . "$kit/measure.sh"; . "$kit/sinks.sh"; run_order "$@"); }
all="lakehouse copy python connect spark10 sparkfast"
is "$(order 1 3 $all)" "lakehouse copy python connect spark10 sparkfast " "run order: run 1 takes the list as given"
is "$(order 2 3 $all)" "python connect spark10 sparkfast lakehouse copy " "run order: run 2 of 3 turned by one place, copy still after lakehouse"
is "$(order 3 3 $all)" "spark10 sparkfast lakehouse copy python connect " "run order: run 3 of 3 turned by three places (the places spread out)"
is "$(order 6 5 $all)" "lakehouse copy python connect spark10 sparkfast " "run order: back to the start after as many runs as sinks"
is "$(order 2 2)" "" "run order: no sinks, nothing"
set +e
out=$("$peers" --sinks lakehouse,python,copy 2>&1); rc=$?
set -e
check "copy anywhere but right after lakehouse is refused" contains "copy must come right after lakehouse" "$out"
is "$([ "$rc" -ne 0 ] && echo refused)" refused "... and fails the run"
# sparkfast's trigger: seconds with up to three decimals or auto; checked before anything starts
set +e
out=$("$peers" --spark-fast-trigger 0.5 --sinks none --no-producers 2>&1); rc=$?
set -e
check "--spark-fast-trigger 0.5 is taken (the run stops later, for want of anything to measure)" contains "leaves nothing to measure" "$out"
set +e
out=$("$peers" --spark-fast-trigger 0.0001 2>&1); rc=$?
set -e
check "--spark-fast-trigger finer than a millisecond is refused" contains "milliseconds at most" "$out"
is "$([ "$rc" -ne 0 ] && echo refused)" refused "... and fails the run"
# A search where no trigger can be sustained (1 ms: every batch outruns it) says so, leaves
# sparkfast out, and fails the run (nothing is recorded from a run that lost a sink).
set +e
LH_PEERS_SPARK_TRIGGERS=0.001 "$peers" --tiny --sinks lakehouse,sparkfast --no-producers --dir "$scratch/nosearch" >"$scratch/nosearch.log" 2>&1
rc=$?
set -e
is "$([ "$rc" -ne 0 ] && echo failed)" failed "a trigger search that finds nothing fails the run"
check "... naming the trigger that did not sustain the rate" grep -qE '^peers: sparkfast: a trigger of 0.001 s does not sustain 500 events/s \(([0-9]+) of ([0-9]+) batches outran it\)' "$scratch/nosearch.log"
check "... and leaving sparkfast out" grep -qF 'sparkfast left out' "$scratch/nosearch.log"
check "... while the other sinks still ran" grep -qF 'peers: --- lakehouse: backlog of 3000 events' "$scratch/nosearch.log"
if ! grep -q 'sparkfast left out' "$scratch/nosearch.log"; then tail -n 20 "$scratch/nosearch.log" | sed 's/^/# /'; fi

# --- a tiny run of everything
set +e
"$peers" --tiny --dir "$scratch/run" --figures "$scratch/tiny.tsv" --perf "$scratch/perf" >"$scratch/run.log" 2>&1
rc=$?
set -e
ok "$rc" "benchmarks/peers --tiny runs every sink, both producers and kcat"
if [ "$rc" -ne 0 ]; then tail -n 40 "$scratch/run.log" | sed 's/^/# /'; fi
for s in lakehouse python connect spark10 sparkfast; do
  n=$(grep -cE "^peers: $s at (200|500) events/s .*: freshness .* over (1000|2500) rows" "$scratch/run.log" || true)
  is "$n" 2 "$s: a freshness figure at both rates, over every event of each window"
done
# sparkfast's trigger: searched before the runs, the shortest first, and the one found used.
check "sparkfast: its trigger searched from the shortest (0.5 s) at the highest rate" \
  grep -qF 'peers: --- sparkfast: does a trigger of 0.5 s sustain 500 events/s?' "$scratch/run.log"
found=$(sed -n 's/^peers: sparkfast: the runs use a trigger of \([0-9.]*\) s$/\1/p' "$scratch/run.log")
check "sparkfast: a trigger found (${found:-none}), judged on its batches" \
  grep -qE "^peers: sparkfast: a trigger of ${found:-none} s sustains 500 events/s \\([0-9]+ of [1-9][0-9]* batches outran it\\)" "$scratch/run.log"
check "sparkfast: Spark itself ran the runs with it" grep -qF "peers: sparkfast: Spark's trigger ${found:-none} s, maxOffsetsPerTrigger" "$scratch/run.log"
check "copy: the ceiling copied lakehouse's 3000 rows" grep -q '^peers: copy: 3000 rows' "$scratch/run.log"
# --perf: a profile of each sink's backlog and of the COPY, each turned into its table, with
# the process that did the work in it.
check "--perf: lakehouse's backlog profiled, the stream worker in it" grep -qF '| lakehouse stream worker |' "$scratch/perf/lakehouse-run1.md"
check "--perf: the COPY profiled, its backend in it" grep -qF '| Postgres backend' "$scratch/perf/copy-run1.md"
check "--perf: python's backlog profiled, its backend in it" grep -qF '| Postgres backend' "$scratch/perf/python-run1.md"
for s in connect spark10 sparkfast; do
  check "--perf: $s's backlog profiled" grep -qE '^\| pid [0-9]+ ' "$scratch/perf/$s-run1.md"
  # The JVM (a tenth of the samples and more) by thread group, from real perf output, with
  # some of its time found in the kernel (a JVM's threads make system calls).
  check "--perf: $s's JVM by thread group, with a kernel share" \
    grep -qE '^\| [^|]+ \| [0-9.]+ % \| [0-9.]+ \| ([1-9][0-9]*) % \|$' "$scratch/perf/$s-run1.md"
done
for p in lakehouse-producer python-producer kcat; do
  check "$p: published every event" grep -qE "^peers: $p: [0-9]+ events/s" "$scratch/run.log"
done
check "every sink and producer delivered every event exactly once" \
  grep -q '^peers: done: every sink and producer delivered every event exactly once' "$scratch/run.log"
# The report and the plots on the tiny run's real figures (the tiny run itself records nothing).
set +e
report=$("$venv/bin/python" "$kit/report.py" "$scratch/tiny.tsv" --runs 1 --plots "$scratch" 2>&1)
rc=$?
set -e
ok "$rc" "report.py reads the tiny run's figures and draws its plots"
printf '%s\n' "$report" >"$scratch/report.md"
for s in 'lakehouse (stream worker)' 'Python sink' 'Kafka Connect' 'Spark Structured Streaming, trigger 10 s' "Spark Structured Streaming, trigger ${found:-none} s" 'lakehouse-producer' 'Python producer' 'kcat -P'; do
  check "the report has a row for $s" grep -qF -- "| $s" "$scratch/report.md"
done
for f in throughput freshness cpu; do
  check "plot $f.png drawn" test "$(head -c 4 "$scratch/$f.png" 2>/dev/null | od -An -c | tr -d ' ')" = '211PNG'
done
done_testing
