#!/usr/bin/env bash
# The Docker images' build and init steps, run as shell scripts outside Docker (no engine
# here), with the same commands in the same order as docker/Dockerfile and
# docker/docker-compose.yml: docker/steps/build in a scratch copy of the source (the
# builder stage), docker/steps/conf-snippet into a scratch cluster's configuration (the
# postgres stage), docker/steps/init-kafka against a scratch Kafka (kafka-init),
# docker/steps/init-pipeline against the scratch cluster (lakehouse-init), twice, as
# every `compose up` does, and docker/steps/run-producer with the staged producer against
# a local stand-in for Wikimedia's stream (producer). Then the events must reach bronze,
# silver and gold, and every asset check must pass.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/tap.sh"

[ "$(id -u)" -eq 0 ] || skip_all "builds as root and runs the scratch servers as the postgres user"

work=$(mktemp -d "${TMPDIR:-/tmp}/lakehouse-docker-steps.XXXXXX")
chmod 755 "$work"
sse_pid=
cleanup() {
  [ -z "$sse_pid" ] || kill "$sse_pid" 2>/dev/null || true
  "$top/scripts/pg" remove "$work/pg" >/dev/null 2>&1 || true
  "$top/scripts/kafka" remove "$work/kafka" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$top/lakehouse.control")
pkglib=$(pg_config --pkglibdir)
share=$(pg_config --sharedir)

# ---- builder stage: COPY . . then docker/steps/build /staging ---------------------------
mkdir -p "$work/src"
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) |
  tar -xf - -C "$work/src"
rc=0
(cd "$work/src" && docker/steps/build "$work/staging") >"$work/build.log" 2>&1 || rc=$?
ok $rc "docker/steps/build builds and stages"
[ $rc -eq 0 ] || { sed 's/^/# /' "$work/build.log" | tail -n 30; bail "nothing staged"; }
stage=$work/staging
check "staged lakehouse.so" test -f "$stage$pkglib/lakehouse.so"
check "staged lakehouse.so finds every shared library" \
  bash -c '! ldd "$1" | grep -q "not found"' _ "$stage$pkglib/lakehouse.so"
missing=()
for f in "$top"/lakehouse.control "$top"/sql/lakehouse--*.sql; do
  cmp -s "$f" "$stage$share/extension/$(basename "$f")" || missing+=("$(basename "$f")")
done
is "${missing[*]-}" "" "every control and SQL script staged, byte for byte"
# The scratch cluster below loads what make install put in place: the same module? Code
# and data compared section by section (debug information names the build folder).
same_code() {
  local s
  for s in .text .rodata .data; do
    objcopy -O binary --only-section=$s "$1" "$work/a$s" && objcopy -O binary --only-section=$s "$2" "$work/b$s" &&
      cmp "$work/a$s" "$work/b$s" || return 1
  done
}
check "staged lakehouse.so has the code and data of the module the scratch cluster loads" \
  same_code "$stage$pkglib/lakehouse.so" "$pkglib/lakehouse.so"
check "producer staged in /usr/bin and runs" "$stage/usr/bin/lakehouse-producer" --help
check "no producer left in pg_config's bindir" test ! -e "$stage$(pg_config --bindir)/lakehouse-producer"

# ---- kafka and kafka-init -------------------------------------------------------------------
kport=$(free_tcp_port 21500)
brokers=$("$top/scripts/kafka" start "$work/kafka" --port "$kport" 2>"$work/kafka-start.log" | tail -n 1)
[ -n "$brokers" ] || { sed 's/^/# /' "$work/kafka-start.log"; bail "scratch Kafka did not start"; }
cat >"$work/kafka-topics.sh" <<SH
#!/usr/bin/env bash
# kafka-topics.sh as the apache/kafka image has it: the same tool class, from our jars.
exec "$top/scripts/kafka" tool "$work/kafka" org.apache.kafka.tools.TopicCommand "\$@"
SH
chmod +x "$work/kafka-topics.sh"
export LAKEHOUSE_BROKERS=$brokers LAKEHOUSE_TOPIC=wikimedia.recentchange KAFKA_TOPICS=$work/kafka-topics.sh
for run in first second; do
  rc=0
  LAKEHOUSE_PARTITIONS=3 "$top/docker/steps/init-kafka" >"$work/init-kafka-$run.log" 2>&1 || rc=$?
  ok $rc "init-kafka, $run run"
  [ $rc -eq 0 ] || sed 's/^/# /' "$work/init-kafka-$run.log" | tail -n 20
done
meta=$(kcat -b "$brokers" -L 2>/dev/null)
is "$(grep -c 'partition [0-9]*, leader' <<<"$(grep -A4 'topic "wikimedia.recentchange" with' <<<"$meta")")" 3 \
  "topic wikimedia.recentchange has 3 partitions"
check "dead-letter topic created" grep -q 'topic "wikimedia.recentchange.dlq" with 1 partitions' <<<"$meta"

# ---- postgres: initdb's sample configuration plus the snippet ------------------------------
pport=$(free_tcp_port 56200)
"$top/scripts/pg" create "$work/pg" --port "$pport" >"$work/pg.log" 2>&1
"$top/docker/steps/conf-snippet" --brokers "$brokers" >>"$work/pg/data/postgresql.conf"
rc=0
"$top/scripts/pg" start "$work/pg" >>"$work/pg.log" 2>&1 || rc=$?
ok $rc "scratch cluster starts with the image's configuration snippet"
[ $rc -eq 0 ] || { sed 's/^/# /' "$work/pg.log" | tail -n 20; bail "no cluster"; }
psql_() { "$top/scripts/pg" psql "$work/pg" -qtA -v ON_ERROR_STOP=1 "$@"; }
is "$(psql_ -c 'SHOW shared_preload_libraries')" "lakehouse,pg_cron" "snippet preloads lakehouse and pg_cron"
is "$(psql_ -c 'SHOW lakehouse.database')" "postgres" "snippet names the database"

# ---- lakehouse-init, as every `docker compose up` runs it --------------------------------
export PGHOST=$work/pg PGPORT=$pport PGUSER=postgres PGDATABASE=postgres LAKEHOUSE_STREAM=wiki
for run in first second; do
  rc=0
  "$top/docker/steps/init-pipeline" >"$work/init-pipeline-$run.log" 2>&1 || rc=$?
  ok $rc "init-pipeline, $run run"
  [ $rc -eq 0 ] || sed 's/^/# /' "$work/init-pipeline-$run.log" | tail -n 20
done
is "$(psql_ -c "SELECT extversion FROM pg_extension WHERE extname = 'lakehouse'")" "$version" "lakehouse $version created"
is "$(psql_ -c "SELECT string_agg(name || ':' || topic || ':' || brokers, ',') FROM lakehouse.streams")" \
  "wiki:wikimedia.recentchange:$brokers" "one stream, on the topic and brokers given"
is "$(psql_ -c "SELECT string_agg(name, ',' ORDER BY name) FROM lakehouse.silver_tables")" "edits" \
  "the recentchange pipeline declared once"
is "$(psql_ -c "SELECT string_agg(jobname, ',' ORDER BY jobname) FROM cron.job")" \
  "lakehouse-checks,lakehouse-maintenance" "pg_cron schedule: checks and maintenance"

# ---- producer: the staged binary through run-producer, against a stand-in stream ------------
"$stage/usr/bin/lakehouse-producer" --generate 2000 --seed 11 --out "$work/events.jsonl" >/dev/null
python3 "$top/test/producer/sse_server.py" --file "$work/events.jsonl" >"$work/sse.port" 2>"$work/sse.log" &
sse_pid=$!
for _ in $(seq 1 50); do [ -s "$work/sse.port" ] && break; sleep 0.1; done
sse_port=$(head -n 1 "$work/sse.port")
mkdir -p "$work/state"
rc=0
WIKIMEDIA_USER_AGENT="lakehouse-test/1 (test@example.invalid)" WIKIMEDIA_URL="http://127.0.0.1:$sse_port/v2/stream/recentchange" \
  LAKEHOUSE_STATE_DIR=$work/state LAKEHOUSE_PRODUCER=$stage/usr/bin/lakehouse-producer \
  timeout 120 "$top/docker/steps/run-producer" --limit 2000 --quiet >"$work/producer.out" 2>"$work/producer.err" || rc=$?
ok $rc "run-producer publishes the stream"
[ $rc -eq 0 ] || sed 's/^/# /' "$work/producer.err" | tail -n 20
summary=$(tail -n 1 "$work/producer.out")
echo "# producer: $summary"
sent=$(sed -n 's/.* sent=\([0-9]*\) .*/\1/p' <<<"$summary")
check "producer kept its SSE position in the state folder" test -s "$work/state/sse-position"
check "producer sent events" test "${sent:-0}" -gt 0

caught_up() {
  [ "$(psql_ -c "SELECT count(*) FROM bronze.wiki")" = "$sent" ] &&
    [ "$(psql_ -c "SELECT count(*) FROM lakehouse.stream_progress p, lakehouse.silver_tables t
                    WHERE t.name = 'edits' AND p.stream = t.stream AND p.batch_id > t.last_batch_id")" = 0 ]
}
rc=0
for _ in $(seq 1 300); do caught_up && break; sleep 0.2; done
caught_up || rc=1
ok $rc "bronze holds every sent event and silver has read every batch"
is "$(psql_ -c "SELECT count(*) FROM bronze.wiki")" "$sent" "bronze rows = the producer's sent count"
is "$(psql_ -c "SELECT (SELECT count(*) FROM silver.edits) > 0 AND
                       (SELECT count(*) FROM silver.edits) =
                       (SELECT coalesce(sum(edits), 0) FROM gold.edits_per_minute)")" t \
  "silver.edits filled, and gold.edits_per_minute sums to it"
failed=$(psql_ -c "SELECT string_agg(check_name || ': ' || detail, '; ') FROM lakehouse.run_checks() WHERE passed IS DISTINCT FROM true AND passed IS NOT NULL")
is "$failed" "" "every asset check passes (skips aside)"

done_testing
