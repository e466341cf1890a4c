# benchmarks/peers-lib/sinks.sh: the sinks of benchmarks/peers (sourced by it, not run): how
# each is prepared (venvs and jars, cached), started on a topic, counted, judged and stopped,
# and the two phases every sink goes through (a preloaded backlog, then steady rates), and
# the producer comparison. Uses the driver's globals (dir, brokers, pgport, postmaster, run,
# events, partitions, rate_list, seconds, fast_trigger, max_rate) and measure.sh.

PYENV= SPARKENV= sink_pid= sink_name=

sinks_prepare() {
  local s need_py=$producers need_spark=0 need_connect=0
  for s in "${sink_list[@]}"; do
    case "$s" in
      python) need_py=1 ;;
      connect) need_connect=1 ;;
      spark*) need_spark=1 ;;
    esac
  done
  # The plots need matplotlib, which lives in the Python peers' venv.
  [ "$record" = 1 ] && need_py=1
  if [ "$need_py" = 1 ]; then
    lh_say "Python peers' venv (cached)"
    PYENV=$("$KIT/python-env" | tail -n 1)
  fi
  if [ "$need_spark" = 1 ]; then
    lh_say "Spark's venv and jars (cached)"
    SPARKENV=$("$KIT/spark/spark-env" | tail -n 1)
  fi
  if [ "$need_connect" = 1 ]; then
    lh_say "Kafka Connect and the Debezium JDBC sink (cached)"
    "$KIT/connect/connect-fetch" >/dev/null
  fi
}

# The peers' pinned versions, for the results: read from the files that pin them.
pom_prop() { sed -n "s:.*<$2>\(.*\)</$2>.*:\1:p" "$1" | head -n 1; }
pins() { grep -vE '^(#|$)' "$1" | tr '\n' ' ' | sed 's/ $//'; }
sinks_versions() {
  local v=() s
  [ -n "$PYENV" ] && v+=("Python $("$PYENV/bin/python" -c 'import sys; print(sys.version.split()[0])'): $(pins "$KIT/requirements-python.txt")")
  [ "$producers" = 1 ] && v+=("kcat $(kcat -V 2>/dev/null | sed -n 's/^Version \([^ ]*\) .*librdkafka \([^ ]*\) .*/\1 with librdkafka \2 (Debian'"'"'s, as lakehouse-producer)/p')")
  [ -n "$SPARKENV" ] && v+=("Spark: $(pins "$KIT/spark/requirements.txt"), spark-sql-kafka-0-10_2.13 $(pom_prop "$KIT/spark/pom.xml" spark.version), kafka-clients $(pom_prop "$KIT/spark/pom.xml" kafka-clients.version), local[2], maxOffsetsPerTrigger 100000")
  for s in "${sink_list[@]}"; do
    [ "$s" = connect ] && v+=("Kafka Connect $(pom_prop "$KIT/connect/pom.xml" connect.version) standalone, debezium-connector-jdbc $(pom_prop "$KIT/connect/pom.xml" debezium.version), batch 2000, 1 task, upsert")
  done
  local IFS=';'; echo "${v[*]}"
}

# Per sink: the table of a Postgres sink for a tag. Every one has the columns
# kafka_partition, kafka_offset, kafka_timestamp and payload, keyed on the first two.
sink_uses_pg() { case "$1" in spark*) return 1 ;; *) return 0 ;; esac; }
sink_table() { case "$1" in lakehouse) echo "bronze.$2" ;; *) echo "public.$2" ;; esac; }
sink_trigger() { case "$1" in spark10) echo 10 ;; sparkfast) echo "$fast_trigger" ;; *) echo 0 ;; esac; }

# sink_start SINK TOPIC TAG: starts the sink on TOPIC, writing to what TAG names; sets
# sink_pid to its root process (for the meter) when it has one of its own.
sink_start() {
  local s=$1 topic=$2 tag=$3 log="$dir/logs/$3.log"
  mkdir -p "$dir/logs"
  sink_name=$s sink_pid=
  case "$s" in
    lakehouse)
      sql "SELECT lakehouse.create_stream('$tag', '$topic')" >/dev/null ;;
    python)
      setsid "$PYENV/bin/python" "$KIT/python_sink.py" --brokers "$brokers" --topic "$topic" \
        --dsn "host=$dir/pg port=$pgport user=postgres dbname=postgres" --table "$tag" \
        --group "$tag" >"$log" 2>&1 &
      sink_pid=$! ;;
    connect)
      "$PG" psql "$dir/pg" -q -v ON_ERROR_STOP=1 -v "table=$tag" -f "$KIT/connect/create-table.sql"
      setsid "$KIT/connect/connect-run" --brokers "$brokers" --topic "$topic" \
        --jdbc-url "jdbc:postgresql://127.0.0.1:$pgport/postgres?reWriteBatchedInserts=true" --user postgres \
        --table "$tag" --dir "$dir/connect/$tag" --rest-port "$(lh_free_port 21200)" >"$log" 2>&1 &
      sink_pid=$! ;;
    spark10|sparkfast)
      mkdir -p "$dir/spark/$tag"
      setsid "$SPARKENV/bin/python" "$KIT/spark/spark_sink.py" --brokers "$brokers" --topic "$topic" \
        --out "$dir/spark/$tag/out" --checkpoint "$dir/spark/$tag/checkpoint" \
        --trigger-seconds "$(sink_trigger "$s")" --progress "$dir/spark/$tag/progress" >"$log" 2>&1 &
      sink_pid=$! ;;
  esac
}

# The meter's groups for the running sink: "sink" (its own processes) and "pg" (the
# Postgres instance, which also holds lakehouse's worker).
sink_meter_groups() {
  case "$sink_name" in
    lakehouse) echo "sink=$postmaster:^postgres:.lakehouse.stream pg=$postmaster" ;;
    spark*) echo "sink=$sink_pid" ;;
    *) echo "sink=$sink_pid pg=$postmaster" ;;
  esac
}
# Groups whose CPU and memory count as the system's (lakehouse's worker is inside pg).
sink_system_groups() {
  case "$1" in lakehouse) echo pg ;; spark*) echo sink ;; *) echo "sink pg" ;; esac
}

sink_stop() {
  local s=$sink_name tag=$1
  case "$s" in
    lakehouse) sql "SELECT lakehouse.stop_stream('$tag')" >/dev/null ;;
    *)
      if [ -n "$sink_pid" ] && kill -0 "$sink_pid" 2>/dev/null; then
        # Spark: the Python driver only (it stops the query, then its JVM); a signal to the
        # whole group would stop the JVM mid-batch. Others: the whole group.
        case "$s" in spark*) kill -TERM "$sink_pid" 2>/dev/null || true ;;
                     *) kill -TERM -- "-$sink_pid" 2>/dev/null || true ;; esac
        local i
        for i in $(seq 1 60); do kill -0 "$sink_pid" 2>/dev/null || break; sleep 0.5; done
      fi
      # Whatever of its group is left (a JVM whose driver died), in any case.
      if [ -n "$sink_pid" ]; then
        kill -KILL -- "-$sink_pid" 2>/dev/null || true
        wait "$sink_pid" 2>/dev/null || true
      fi ;;
  esac
  sink_pid= sink_name=
  note_freed   # the sink's processes (or the stream worker) gave their memory back
}
peer_stop_all() { meter_stop; perf_stop; if [ -n "$sink_name" ]; then sink_stop "${sink_tag:-}" 2>/dev/null; fi; return 0; }

# sink_rows SINK TAG: rows visible so far, cheaply (it is polled while the sink works, on
# the same cores): a Postgres table's highest offset per partition through its primary key
# (offsets start at 0; the exactly-once check counts every row once the sink has stopped),
# Spark's row count from its progress reports.
sink_rows() {
  case "$1" in
    spark*) cat "$dir/spark/$2/progress" 2>/dev/null || echo 0 ;;
    *) sql "SELECT coalesce(sum(m + 1), 0) FROM (SELECT (SELECT max(kafka_offset) FROM $(sink_table "$1" "$2")
              WHERE kafka_partition = p) AS m FROM generate_series(0, $((partitions - 1))) AS p) s" ;;
  esac
}

# spark_json TAG [ARGS]: spark_measure.py's report on a Spark sink's output folder.
spark_json() {
  local tag=$1; shift
  "$SPARKENV/bin/python" "$KIT/spark/spark_measure.py" "$dir/spark/$tag/out" "$@"
}
# spark_final TAG: spark_measure.py's whole report on a stopped Spark sink's output, read
# once (the delivery check and the throughput both need it) and kept beside the output.
spark_final() {
  local f="$dir/spark/$1/final.json"
  [ -s "$f" ] || spark_json "$1" >"$f"
  cat "$f"
}
# json_get EXPRESSION: reads JSON on stdin and prints the Python expression over it (j).
json_get() { "$SPARKENV/bin/python" -c "import json, sys; j = json.load(sys.stdin); print($1)"; }

# sink_stats SINK TAG: "rows first_commit_rows t_first t_last".
sink_stats() {
  case "$1" in
    spark*) spark_final "$2" | json_get '" ".join(str(x) for x in (j["total_rows"], j["batches"][0]["rows"] if j["batches"] else 0, j.get("first_commit", 0), j.get("last_commit", 0)))' ;;
    *) pg_table_stats "$(sink_table "$1" "$2")" ;;
  esac
}

# check_delivered SINK TAG N: the sink, stopped, holds the generator's events 0..N-1 once
# each: N rows of N distinct offsets (Postgres: the primary key; Spark: spark_measure's
# count), and in Postgres every payload whole with its Kafka timestamp (the payloads' "seq"
# sum to 0 + 1 + ... + N-1).
check_delivered() {
  local s=$1 tag=$2 n=$3 rows distinct bad seqsum
  if sink_uses_pg "$s"; then
    read -r rows bad seqsum <<<"$(sql "SELECT count(*), count(*) FILTER (WHERE kafka_timestamp IS NULL OR payload IS NULL),
                                              coalesce(sum((payload->>'seq')::bigint), 0) FROM $(sink_table "$s" "$tag")" | tr '|' ' ')"
    distinct=$rows
  else
    read -r rows distinct <<<"$(spark_final "$tag" | json_get '"%d %d" % (j["total_rows"], j["distinct_partition_offsets"])')"
    bad=0 seqsum=$((n * (n - 1) / 2))
  fi
  if [ "$rows" != "$n" ] || [ "$distinct" != "$n" ] || [ "$bad" != 0 ] || [ "$seqsum" != $((n * (n - 1) / 2)) ]; then
    lh_say "$s holds $rows rows ($distinct distinct offsets, $bad without timestamp or payload, payload seq summing to $seqsum) of $n events"
    return 1
  fi
}

# sink_freshness SINK TAG T0 T1: "p50 p95 p99 max rows" for rows stamped by Kafka in [T0, T1).
sink_freshness() {
  case "$1" in
    spark*) spark_json "$2" --from "$3" --to "$4" --no-batches |
              json_get '" ".join("%.3f" % (j["freshness_s"][k] or 0) for k in ("p50", "p95", "p99", "max")) + " " + str(j["freshness_s"]["rows"])' ;;
    *) pg_table_freshness "$(sink_table "$1" "$2")" "$3" "$4" ;;
  esac
}

sink_drop() {
  case "$1" in
    lakehouse) sql "SELECT lakehouse.drop_stream('$2', drop_data => true)" >/dev/null ;;
    spark*) rm -rf "$dir/spark/$2" ;;
    *) sql "SET client_min_messages = warning; DROP TABLE IF EXISTS $(sink_table "$1" "$2") CASCADE; DROP TABLE IF EXISTS $(sink_table "$1" "$2")_offsets" ;;
  esac
  # The memory counts as freed once the checkpoint has made every backend let go of the
  # dropped files (settle_freed_memory).
  sql "CHECKPOINT"; note_freed
}

# How long a sink may show no progress before it counts as stuck (a JVM's start included).
patience() { [ "$tiny" = 1 ] && echo 120 || echo 180; }

# kept_up SINK TAG RATE T_START T_END: 1 if the sink kept up with a window sent over
# [T_START, T_END), 0 if it fell behind; fails when the window's quarters have no figure. A
# sink slower than the rate lags more and more, so the median freshness of the window's last
# quarter exceeds its first quarter's (by more than 1 s plus its trigger: with a trigger
# longer than a quarter, where its batches fall moves each quarter's median by up to one).
kept_up() {
  local s=$1 tag=$2 r=$3 t0=$4 t1=$5 q q1 q4 kept
  q=$(calc '%.3f' "($t1 - $t0) / 4")
  read -r q1 _ <<<"$(sink_freshness "$s" "$tag" "$t0" "$(calc '%.3f' "$t0 + $q")")"
  read -r q4 _ <<<"$(sink_freshness "$s" "$tag" "$(calc '%.3f' "$t1 - $q")" "$(calc '%.3f' "$t1 + 1")")"
  if ! [[ $q1 =~ ^[0-9]+(\.[0-9]+)?$ && $q4 =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    lh_say "$s: no freshness for the quarters of the $r/s window ('$q1', '$q4')" >&2; return 1
  fi
  kept=$(awk -v a="$q1" -v b="$q4" -v t="$(sink_trigger "$s")" 'BEGIN {print (b + 0 <= a + 1 + t) ? 1 : 0}')
  lh_say "$s at $r events/s: median freshness ${q1}s in the window's first quarter, ${q4}s in its last: $([ "$kept" = 1 ] && echo 'kept up' || echo 'fell behind')" >&2
  echo "$kept"
}

# top_rate: the highest of the --rates.
top_rate() { printf '%s\n' "${rate_list[@]}" | sort -n | tail -n 1; }

# warm_up SINK TOPIC: the warm-up of a sink just started on TOPIC, not measured: 10 s at the
# first rate (a JVM's class loading and JIT land here, not in the first window; 200 events in
# a tiny run), until the sink shows every one. Sets warm_events (the next sequence number).
warm_up() {
  warm_events=200
  [ "$tiny" = 1 ] || warm_events=$((rate_list[0] * 10))
  "$PRODUCE" --brokers "$brokers" --topic "$2" --count "$warm_events" --rate "${rate_list[0]}" --start 0 >/dev/null &&
    wait_count "$1 warm-up" "$warm_events" "$(patience)" sink_rows "$1" "$2"
}

# produce_window TOPIC RATE START: one steady window, RATE events/s for --seconds, numbered
# from START. Sets window_start and window_end (epoch seconds) and window_achieved, the rate
# the generator reached (it shares the cores: a window short of its rate says so).
produce_window() {
  local out
  window_start=$(now)
  out=$("$PRODUCE" --brokers "$brokers" --topic "$1" --count $(($2 * seconds)) --rate "$2" --start "$3") || return 1
  window_end=$(now)
  window_achieved=$(sed -n 's/.*(\([0-9]*\) events\/s).*/\1/p' <<<"$out")
}

# run_order RUN RUNS SINK...: the sinks in the order run RUN of RUNS takes them: the list
# turned by (RUN - 1) * n / RUNS of its n places, so that over the runs the sinks' places
# spread out (three runs of five: turned by 0, 1 and 3) and a machine that speeds up or slows
# down over a run favours no sink every time. copy moves with lakehouse (it copies
# lakehouse's rows right after lakehouse wrote them: the driver refuses any other place).
run_order() {
  local run=$1 runs=$2 s units=() n k i; shift 2
  for s in "$@"; do
    if [ "$s" = copy ] && [ "${#units[@]}" -gt 0 ]; then units[-1]+=" copy"; else units+=("$s"); fi
  done
  n=${#units[@]}
  [ "$n" -gt 0 ] || return 0
  k=$(((run - 1) * n / runs % n))
  for ((i = 0; i < n; i++)); do printf '%s ' ${units[$(((i + k) % n))]}; done
  echo
}

# The trigger intervals spark_trigger_search tries, shortest first (LH_PEERS_SPARK_TRIGGERS,
# space-separated, replaces them: the tests use it to see a search fail). Not 0, Spark's
# default (the next batch as soon as the previous one ends): it has no interval, so "falling
# behind" means nothing for it, and its freshness was worse than 1 s's when tried by hand
# while the kit was written (not recorded); --spark-fast-trigger 0 runs it.
read -r -a SPARK_TRIGGERS <<<"${LH_PEERS_SPARK_TRIGGERS:-0.5 1 2 5}"

# spark_trigger_try T I: one candidate of the search on a topic of its own (sparktrigger_I):
# Spark started with trigger T and warmed up as in the freshness phase, then one --seconds
# window at the highest --rates rate. Returns 0 when T sustains it: Spark kept up (kept_up:
# its lag did not grow) and at most a tenth of its batches from the window's start to the
# last row outran T (Spark's "falling behind" warning; its file sink compacts its log every
# tenth batch, and a GC pause can make one batch long); 1 when it does not; 2 when the try
# gave no verdict (the sink stuck, the generator short of the rate).
spark_trigger_try() {
  local t=$1 tag="sparktrigger_$2" top kept late0 late1 batches rc=2
  local log="$dir/logs/sparktrigger_$2.log"
  top=$(top_rate)
  fast_trigger=$t
  lh_say "--- sparkfast: does a trigger of $t s sustain $top events/s? (${seconds}s window)"
  "$KAFKA" create-topic "$dir/kafka" "$tag" "$partitions" >/dev/null || return 2
  sink_tag=$tag
  settle_freed_memory
  sink_start sparkfast "$tag" "$tag"
  # (set -e is off in a function called from a condition: each step is checked here)
  if warm_up sparkfast "$tag"; then
    # The warm-up's last batch logs its warning after its rows show: one interval and a second.
    sleep "$(calc '%.3f' "$t + 1")"
    late0=$(grep -c 'is falling behind' "$log" || true)
    if produce_window "$tag" "$top" "$warm_events" &&
       wait_count "sparkfast at $top/s" $((warm_events + top * seconds)) 60 sink_rows sparkfast "$tag" &&
       kept=$(kept_up sparkfast "$tag" "$top" "$window_start" "$window_end") &&
       batches=$(spark_json "$tag" | json_get "sum(1 for b in j['batches'] if b['commit_time'] >= $window_start)"); then
      late1=$(grep -c 'is falling behind' "$log" || true)
      if [ "${window_achieved:-0}" -lt $((top * 95 / 100)) ]; then
        lh_say "sparkfast: the generator reached ${window_achieved:-?} of $top events/s: no verdict on $t s"
      elif [ "$kept" = 1 ] && [ $(((late1 - late0) * 10)) -le "$batches" ]; then
        lh_say "sparkfast: a trigger of $t s sustains $top events/s ($((late1 - late0)) of $batches batches outran it)"
        rc=0
      else
        lh_say "sparkfast: a trigger of $t s does not sustain $top events/s ($([ "$kept" = 1 ] || echo 'its lag grew; ')$((late1 - late0)) of $batches batches outran it)"
        rc=1
      fi
    fi
  fi
  sink_stop "$tag"
  sink_drop sparkfast "$tag"
  return "$rc"
}

# spark_trigger_search: sets fast_trigger to the shortest of SPARK_TRIGGERS that sustains the
# highest --rates rate (spark_trigger_try), and trigger_how to how it was found; fails when
# none does. A try without a verdict moves on to the next.
spark_trigger_search() {
  local t i=0 rc
  for t in "${SPARK_TRIGGERS[@]}"; do
    i=$((i + 1))
    rc=0; spark_trigger_try "$t" "$i" || rc=$?
    if [ "$rc" = 0 ]; then
      trigger_how="the shortest of ${SPARK_TRIGGERS[*]} s that sustained $(top_rate) events/s in a ${seconds} s window before the runs"
      lh_say "sparkfast: the runs use a trigger of $t s"
      return 0
    fi
  done
  return 1
}

# sink_benchmark SINK: both phases for one sink in the current run; records its figures.
sink_benchmark() {
  local s=$1 tag="${1}_b$run" ftag="${1}_f$run" m="$dir/meter-$1-$run" rows first t0 t1
  local rate cpu sys seq r t_start t_end p50 p95 p99 pmax n top
  # A failed phase stops the sink and the meter before the failure is reported.
  abandon() { perf_stop; sink_stop "$1"; meter_stop; return 1; }
  lh_say "--- $s: backlog of $events events"
  sink_tag=$tag
  settle_freed_memory
  perf_start "$s-run$run"
  sink_start "$s" backlog "$tag"
  # shellcheck disable=SC2046
  meter_start "$m" $(sink_meter_groups)
  wait_count "$s backlog" "$events" "$(patience)" sink_rows "$s" "$tag" || abandon "$tag" || return 1
  perf_stop; sink_stop "$tag"; meter_stop; perf_report
  # What Spark itself says it ran with (its trigger: the tests hold the driver to it).
  case "$s" in spark*) lh_say "$s: Spark's $(grep -o 'trigger [0-9.]* s, maxOffsetsPerTrigger [0-9a-z]*' "$dir/logs/$tag.log" | head -n 1)" ;; esac
  check_delivered "$s" "$tag" "$events" || return 1
  read -r rows first t0 t1 <<<"$(sink_stats "$s" "$tag")"
  read -r -a sys <<<"$(sink_system_groups "$s")"
  rate=0
  if [ "$rows" -gt "$first" ]; then
    rate=$(calc '%.0f' "($rows - $first) / ($t1 - $t0)")
    cpu=$(meter_cpu_seconds "$m" "$t0" "$t1" "${sys[@]}")
    fig "$s" rows_per_s "$rate"
    fig "$s" cpu_s_per_m "$(calc '%.1f' "$cpu / (($rows - $first) / 1000000)")"
    lh_say "$s: $rate rows/s, CPU $cpu s over $((rows - first)) rows"
  else
    lh_say "$s: the whole backlog went in one commit (no rate between commits to give)"
  fi
  fig "$s" own_anon_mib "$(meter_peak "$m" anon sink)"
  fig "$s" system_mib "$(meter_peak "$m" system "${sys[@]}")"
  # copy_ceiling copies lakehouse's rows, then drops them.
  if [ "$s" = lakehouse ]; then lakehouse_tag=$tag; sql "CHECKPOINT"; else sink_drop "$s" "$tag"; fi

  # Freshness: one sink instance, a warm-up, then each steady rate in turn on one topic;
  # each rate's rows are those Kafka stamped during its window.
  lh_say "--- $s: freshness at ${rate_list[*]} events/s for ${seconds}s each"
  "$KAFKA" create-topic "$dir/kafka" "$ftag" "$partitions" >/dev/null
  sink_tag=$ftag
  settle_freed_memory
  sink_start "$s" "$ftag" "$ftag"
  # shellcheck disable=SC2046
  meter_start "$m.f" $(sink_meter_groups)
  warm_up "$s" "$ftag" || abandon "$ftag" || return 1
  seq=$warm_events
  local all_rates=("${rate_list[@]}") achieved i=0 tries=1 next
  top=$(top_rate)
  r=$(calc '%.0f' "int($rate * 0.8 / 1000) * 1000")
  if [ "$max_rate" = 1 ] && [ "$r" -gt "$top" ]; then all_rates+=("max:$r"); fi
  # (an index, not a for loop over the list: the search below appends to it)
  while [ "$i" -lt "${#all_rates[@]}" ]; do
    r=${all_rates[$i]}; i=$((i + 1))
    local label=$r
    r=${r#max:}
    produce_window "$ftag" "$r" "$seq" || abandon "$ftag" || return 1
    t_start=$window_start t_end=$window_end achieved=$window_achieved
    seq=$((seq + r * seconds))
    wait_count "$s at $r/s" "$seq" 60 sink_rows "$s" "$ftag" || abandon "$ftag" || return 1
    read -r p50 p95 p99 pmax n <<<"$(sink_freshness "$s" "$ftag" "$t_start" "$(calc '%.3f' "$t_end + 1")")"
    lh_say "$s at $r events/s (generator achieved ${achieved:-?}/s): freshness p50 ${p50}s p95 ${p95}s p99 ${p99}s max ${pmax}s over $n rows"
    if [ "$n" != $((r * seconds)) ]; then
      lh_say "$s: the $r/s window holds $n rows, expected $((r * seconds))"; abandon "$ftag" || return 1
    fi
    case "$label" in
      max:*)
        label=max
        local kept
        kept=$(kept_up "$s" "$ftag" "$r" "$t_start" "$t_end") || abandon "$ftag" || return 1
        # The search for the highest rate it sustains: fell behind, so 0.8x that rate in a
        # window of its own (the sink has caught up: every row arrived), three tries at most
        # and never down to the fixed rates. Only the last try's figures are recorded.
        # (0.8x what the generator reached, when it fell short of the rate asked)
        next=$(calc '%.0f' "int(($r < ${achieved:-$r} ? $r : ${achieved:-$r}) * 0.8 / 1000) * 1000")
        if [ "$kept" = 0 ] && [ "$tries" -lt 3 ] && [ "$next" -gt "$top" ]; then
          lh_say "$s: trying $next events/s"
          all_rates+=("max:$next"); tries=$((tries + 1))
          sleep 1; continue
        fi
        fig "$s" max_rate "${achieved:-$r}"; fig "$s" max_kept_up "$kept" ;;
      *) if [ "${achieved:-0}" -lt $((r * 95 / 100)) ]; then
           lh_say "$s: the generator reached ${achieved:-?} of $r events/s: this window is inconclusive"
           abandon "$ftag" || return 1
         fi ;;
    esac
    fig "$s" "fresh_${label}_p50" "$p50"; fig "$s" "fresh_${label}_p95" "$p95"
    fig "$s" "fresh_${label}_p99" "$p99"; fig "$s" "fresh_${label}_max" "$pmax"
    sleep 1
  done
  sink_stop "$ftag"; meter_stop
  check_delivered "$s" "$ftag" "$seq" || return 1
  # Memory over both phases: the higher peak.
  fig "$s" own_anon_mib "$(meter_peak "$m.f" anon sink)"
  fig "$s" system_mib "$(meter_peak "$m.f" system "${sys[@]}")"
  sink_drop "$s" "$ftag"
}

# The ceiling: lakehouse's bronze rows of this run, COPY (binary) into an identical table.
copy_ceiling() {
  local src=bronze.${lakehouse_tag:-} t0 t1 rows m="$dir/meter-copy-$run"
  [ -n "${lakehouse_tag:-}" ] || { fail "copy needs the lakehouse sink earlier in --sinks"; return 0; }
  lh_say "--- copy: binary COPY of lakehouse's $events bronze rows into an identical table"
  sql "COPY $src (kafka_partition, kafka_offset, kafka_timestamp, kafka_key, payload, batch_id) TO '$dir/bronze.bin' (FORMAT binary)"
  sql "CREATE TABLE public.copy_ceiling (LIKE $src INCLUDING ALL)"
  sql "CHECKPOINT"
  settle_freed_memory
  perf_start "copy-run$run"
  meter_start "$m" "pg=$postmaster"
  t0=$(now)
  sql "COPY public.copy_ceiling (kafka_partition, kafka_offset, kafka_timestamp, kafka_key, payload, batch_id) FROM '$dir/bronze.bin' (FORMAT binary)"
  t1=$(now)
  sleep 0.3; meter_stop; perf_stop; perf_report
  rows=$(sql "SELECT count(*) FROM public.copy_ceiling")
  fig copy rows_per_s "$(calc '%.0f' "$rows / ($t1 - $t0)")"
  fig copy cpu_s_per_m "$(calc '%.1f' "$(meter_cpu_seconds "$m" "$t0" "$t1" pg) / ($rows / 1000000)")"
  lh_say "copy: $rows rows in $(calc '%.2f' "$t1 - $t0") s"
  sql "DROP TABLE public.copy_ceiling"
  rm -f "$dir/bronze.bin"
  sink_drop lakehouse "$lakehouse_tag"; lakehouse_tag=
}

# topic_messages TOPIC: messages in a topic (the sum of its partitions' end offsets).
topic_messages() {
  "$KAFKA" tool "$dir/kafka" org.apache.kafka.tools.GetOffsetShell --bootstrap-server "$brokers" \
    --topic "$1" 2>/dev/null | awk -F: '$1 == t {s += $NF} END {print s + 0}' t="$1"
}

# The producers: the same generated file, each into its own topic (4 partitions, a DLQ),
# and kcat publishing the file's lines as they are, keyed by wiki as the producers key them,
# with their Kafka settings and no validation: what the broker takes from one client on this
# machine, the ceiling the producers' ratio is bounded by.
producer_benchmark() {
  local file="$dir/events.jsonl" keyed="$dir/events.keyed" t cpu who n dead wall user system maxrss cmd
  mkdir -p "$dir/logs"
  if [ ! -f "$file" ]; then
    lh_say "generating $events recentchange events for the producers"
    "$PRODUCER" --generate "$events" --out "$file" --seed 7 >/dev/null
  fi
  if [ ! -f "$keyed" ]; then
    # "wiki<TAB>event" per line for kcat -K (a JSON line holds no raw tab); made before the
    # timed part. Every generated event has a top-level "wiki".
    sed -E 's/^(.*"wiki":"([^"]*)".*)$/\2\t\1/' "$file" >"$keyed"
    [ "$(grep -c $'\t' "$keyed")" = "$events" ] || { lh_say "could not key every event of $file by wiki"; return 1; }
  fi
  for who in lakehouse-producer python-producer kcat; do
    settle_freed_memory
    t="prod_${who%%-*}_$run"
    "$KAFKA" create-topic "$dir/kafka" "$t" "$partitions" >/dev/null
    "$KAFKA" create-topic "$dir/kafka" "$t.dlq" 1 >/dev/null
    case "$who" in
      lakehouse-producer)
        cmd=("$PRODUCER" --brokers "$brokers" --topic "$t" --dlq-topic "$t.dlq" --file "$file" --quiet) ;;
      python-producer)
        cmd=("$PYENV/bin/python" "$KIT/python_producer.py" --brokers "$brokers" --topic "$t"
             --dlq-topic "$t.dlq" --file "$file") ;;
      kcat)
        # (the producers' settings: src/producer/kafka_out.c, python_producer.py)
        cmd=(kcat -b "$brokers" -t "$t" -P -K $'\t' -X acks=all -X enable.idempotence=true
             -X compression.codec=lz4 -X linger.ms=20 -X queue.buffering.max.messages=500000 -l "$keyed") ;;
    esac
    lh_say "--- $who: $events events from a file, $([ "$who" = kcat ] && echo 'keyed by wiki, not validated (the ceiling)' || echo validated)"
    # GNU time: the process's own user + system time and peak RSS, exactly (no sampling).
    if ! /usr/bin/time -f '%e %U %S %M' -o "$dir/logs/$who-$run.time" "${cmd[@]}" >"$dir/logs/$who-$run.log" 2>&1; then
      lh_say "$who failed: $(tail -n 5 "$dir/logs/$who-$run.log")"; return 1
    fi
    note_freed   # the producer exited
    read -r wall user system maxrss <"$dir/logs/$who-$run.time"
    cpu=$(calc '%.2f' "$user + $system")
    # Every event is either published or dead-lettered, once.
    n=$(topic_messages "$t"); dead=$(topic_messages "$t.dlq")
    if [ $((n + dead)) != "$events" ]; then
      lh_say "$who: topics $t and $t.dlq hold $n + $dead messages, expected $events"; return 1
    fi
    fig "$who" dead_lettered "$dead"
    fig "$who" events_per_s "$(calc '%.0f' "$events / $wall")"
    fig "$who" cpu_s_per_m "$(calc '%.1f' "$cpu / ($events / 1000000)")"
    fig "$who" peak_rss_mib "$(calc '%.0f' "$maxrss / 1024")"
    lh_say "$who: $(calc '%.0f' "$events / $wall") events/s, CPU $cpu s, peak RSS $(calc '%.0f' "$maxrss / 1024") MiB"
  done
}
