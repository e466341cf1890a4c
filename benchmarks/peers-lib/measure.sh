# benchmarks/peers-lib/measure.sh: how benchmarks/peers measures (sourced by it, not run):
# SQL on the scratch cluster, the process meter (proc_meter) around each sink, CPU between two
# instants, peaks of memory, throughput and freshness of a Postgres sink table from commit
# timestamps. Every sink is judged by the same definitions:
#   rows/s     rows after the sink's first commit / (last commit - first commit): start-up
#              (a JVM, a first poll) is left out, as it would be in a long-running service;
#   freshness  commit time of the row (track_commit_timestamp) minus its Kafka timestamp;
#   CPU        user + system seconds of the sink's processes and of the Postgres instance
#              between its first and last commit, per million rows committed in between.

sql() { "$PG" psql "$dir/pg" -Atq -v ON_ERROR_STOP=1 -c "$1"; }
now() { date +%s.%N; }
calc() { awk "BEGIN{ printf \"$1\", $2 }"; }

# meter_start FILE GROUP=PID[:REGEX]...: samples the groups every 0.25 s into FILE.
meter_pid=
meter_start() {
  local file=$1; shift
  "$KIT/proc_meter" --interval 0.25 "$@" >"$file" &
  meter_pid=$!
}
meter_stop() {
  if [ -n "$meter_pid" ]; then
    kill "$meter_pid" 2>/dev/null || true
    wait "$meter_pid" 2>/dev/null || true
    meter_pid=
  fi
}

# settle_freed_memory: waits until memory freed by dropping tables or files is a minute old.
# On the machine this kit was written on (a Firecracker guest), a page the guest kernel freed
# seconds ago is cheap to use again and one freed longer ago is not: writing 2 GB to a file
# took 1.3 to 4.6 s within seconds of deleting another, 11.8 s 15 s after, 18 to 21 s from 30 s
# on. A sink's heap grows through the page cache (PostgreSQL 15 writes every new block of a
# table as zeros first), so the sink that happened to start right after another's tables
# were dropped grew its table at about half the cost (perf, 2026-12-03: the Python sink's
# backend, third after COPY's drops, 5.7 to 8.0 s per million rows in heap extension, the
# stream worker and COPY 11.7 to 15.5 s; run first, the Python sink took 13.6 s). Every
# phase that writes a table now starts at least settle_seconds after the last drop, in the
# state the machine is in most of the time. note_freed marks a drop.
settle_seconds=60
freed_at=0
note_freed() { freed_at=$(now); }
settle_freed_memory() {
  local left
  left=$(calc '%.1f' "$freed_at + $settle_seconds - $(now)")
  if [ "$(calc '%d' "($left > 0)")" = 1 ]; then
    lh_say "waiting ${left}s: memory freed by the last drop must be ${settle_seconds}s old (measure.sh)"
    sleep "$left"
  fi
}

# perf_start NAME / perf_stop / perf_report: with --perf DIR, a system-wide `perf record -g`
# from start to stop into DIR/NAME.data; perf_report, once the sink and the meter have
# stopped (it takes CPU), writes DIR/NAME.md: CPU per process, what the stream worker and
# the backends did, and a JVM's thread groups (perf_breakdown.py). Without --perf all three
# do nothing.
perf_hz=299
perf_pid= perf_name=
perf_start() {
  [ -n "${perf_dir:-}" ] || return 0
  perf_name=$1
  perf record -a -g -F "$perf_hz" -o "$perf_dir/$1.data" >"$perf_dir/$1.log" 2>&1 &
  perf_pid=$!
  sleep 0.5   # perf opens its counters on every core before the sink starts
  if ! kill -0 "$perf_pid" 2>/dev/null; then
    perf_pid=
    lh_die "perf record stopped at once: $(tail -n 3 "$perf_dir/$1.log" | tr '\n' ' ')"
  fi
}
perf_stop() {
  [ -n "$perf_pid" ] || return 0
  kill -INT "$perf_pid" 2>/dev/null || true
  wait "$perf_pid" 2>/dev/null || true
  perf_pid=
}
perf_report() {
  [ -n "$perf_name" ] || return 0
  if perf script -i "$perf_dir/$perf_name.data" -F comm,pid,tid,ip,sym 2>>"$perf_dir/$perf_name.log" \
      | python3 "$KIT/perf_breakdown.py" --freq "$perf_hz" >"$perf_dir/$perf_name.md" 2>>"$perf_dir/$perf_name.log"; then
    lh_say "perf: $perf_name: $perf_dir/$perf_name.md"
  else
    rm -f "$perf_dir/$perf_name.md"
    lh_say "perf: $perf_name: no breakdown (see $perf_dir/$perf_name.log)"
  fi
  perf_name=
  note_freed   # perf script and python freed what they held
}

# meter_ticks FILE GROUP T: the group's cumulative CPU ticks at unix time T, interpolated
# between the samples around it.
meter_ticks() {
  awk -v g="$2" -v t="$3" '
    $2 != g { next }
    $1 <= t { t0 = $1; c0 = $3; have0 = 1; next }
    !have1 { t1 = $1; c1 = $3; have1 = 1 }
    END {
      if (!have0 && !have1) { print 0; exit }
      if (!have0) { print c1; exit }
      if (!have1 || t1 == t0) { print c0; exit }
      printf "%.1f\n", c0 + (c1 - c0) * (t - t0) / (t1 - t0)
    }' "$1"
}

# meter_cpu_seconds FILE T0 T1 GROUP...: CPU seconds the groups used between T0 and T1.
meter_cpu_seconds() {
  local file=$1 t0=$2 t1=$3 total=0 g; shift 3
  for g in "$@"; do
    total=$(calc '%.1f' "$total + $(meter_ticks "$file" "$g" "$t1") - $(meter_ticks "$file" "$g" "$t0")")
  done
  calc '%.2f' "$total / 100"   # USER_HZ ticks
}

# meter_peak FILE anon|system GROUP...: the groups' highest memory at one sample, in MiB:
# anon, their private memory (RssAnon) summed; system, that plus the shared memory
# (Postgres's shared_buffers) once.
meter_peak() {
  local file=$1 what=$2; shift 2
  awk -v gs="$*" -v shared="$([ "$what" = system ] && echo 1 || echo 0)" '
    BEGIN { n = split(gs, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1 }
    want[$2] { sum[$1] += $4; if ($5 > sh[$1]) sh[$1] = $5 }
    END { m = 0; for (t in sum) if (sum[t] + shared * sh[t] > m) m = sum[t] + shared * sh[t]
          printf "%.0f\n", m / 1024 }' "$file"
}

# pg_table_stats TABLE: "rows first_commit_rows t_first t_last" for a Postgres sink table
# (commit times as unix seconds). Every such table has its primary key on (kafka_partition,
# kafka_offset), so its rows are distinct offsets: no count of distinct keys is needed.
pg_table_stats() {
  sql "WITH r AS (SELECT pg_xact_commit_timestamp(xmin) AS ct FROM $1),
            f AS (SELECT min(ct) AS first, max(ct) AS last FROM r)
       SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM r, f WHERE r.ct = f.first),
              extract(epoch FROM f.first), extract(epoch FROM f.last) FROM f" | tr '|' ' '
}

# pg_table_freshness TABLE T0 T1: "p50 p95 p99 max rows" of commit time minus Kafka
# timestamp over the rows whose Kafka timestamp lies in [T0, T1).
pg_table_freshness() {
  sql "SELECT coalesce(round(x[1]::numeric, 3), 0), coalesce(round(x[2]::numeric, 3), 0),
              coalesce(round(x[3]::numeric, 3), 0), coalesce(round(x[4]::numeric, 3), 0), n
         FROM (SELECT percentile_cont(ARRAY[0.5, 0.95, 0.99, 1.0]) WITHIN GROUP
                        (ORDER BY extract(epoch FROM pg_xact_commit_timestamp(xmin) - kafka_timestamp)) AS x,
                      count(*) AS n
                 FROM $1 WHERE kafka_timestamp >= to_timestamp($2) AND kafka_timestamp < to_timestamp($3)) s" | tr '|' ' '
}

# wait_count DESCRIPTION TARGET SECONDS COMMAND...: polls COMMAND (which prints a count)
# every 0.5 s until it prints at least TARGET, showing progress on a terminal. Fails when the
# count has not moved for SECONDS, when the sink's own process (sink_pid, if any) has
# exited, or after an hour in all.
wait_count() {
  local what=$1 target=$2 patience=$3 got=0 last=-1 still=0 deadline=$((SECONDS + 3600)); shift 3
  while :; do
    got=$("$@" 2>/dev/null || echo 0); got=${got:-0}
    if [ -t 2 ]; then printf '\r%s: %s / %s' "$what" "$got" "$target" >&2; fi
    [ "$got" -ge "$target" ] && break
    if [ "$got" = "$last" ]; then still=$((still + 1)); else still=0; last=$got; fi
    if [ -n "${sink_pid:-}" ] && ! kill -0 "$sink_pid" 2>/dev/null; then
      if [ -t 2 ]; then printf '\n' >&2; fi
      lh_say "$what: the sink exited at $got of $target (its log: $dir/logs/)"
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      lh_say "$what: still at $got of $target after an hour"
      return 1
    fi
    if [ $((still / 2)) -ge "$patience" ]; then
      if [ -t 2 ]; then printf '\n' >&2; fi
      lh_say "$what: stuck at $got of $target for ${patience}s"
      return 1
    fi
    sleep 0.5
  done
  if [ -t 2 ]; then printf '\n' >&2; fi
  lh_say "$what: $got / $target"
}
