#!/usr/bin/env bash
# The Docker images' build and init steps, run as shell scripts outside Docker (no engine
# here), with the same step scripts in compose's order: docker/steps/build in a scratch
# copy of the source (the builder stage); docker/steps/init-kafka against a scratch Kafka
# with the same topic tool class, twice (kafka-init); docker/steps/run-producer with the
# staged producer against a local stand-in for Wikimedia's stream, started before Postgres
# is up (producer); initdb reading a sample configuration with docker/steps/conf-snippet's
# lines appended, as the image's initdb does, and password logins over TCP as the official
# image sets them up (postgres); docker/steps/init-pipeline over TCP with the password,
# twice (lakehouse-init). Then the events must reach bronze, silver and gold, and every
# asset check must pass. Not the same: the cluster loads the lakehouse.so that make install
# put in place (its code and data are compared with the staged one), and the image's
# entrypoint (its temporary init server) is not run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/tap.sh"

[ "$(id -u)" -eq 0 ] || skip_all "builds as root and runs the scratch servers as the postgres user"

work=$(mktemp -d "${TMPDIR:-/tmp}/lakehouse-docker-steps.XXXXXX")
chmod 755 "$work"
sse_pid= producer_pid=
cleanup() {
  [ -z "$sse_pid" ] || kill "$sse_pid" 2>/dev/null || true
  [ -z "$producer_pid" ] || kill "$producer_pid" 2>/dev/null || true
  if [ -f "$work/pg/data/postmaster.pid" ]; then
    runuser -u postgres -- "$(pg_config --bindir)/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true
  fi
  "$top/scripts/kafka" remove "$work/kafka" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

version=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$top/lakehouse.control")
pkglib=$(pg_config --pkglibdir)
share=$(pg_config --sharedir)

# ---- builder stage: COPY . . then docker/steps/build /staging ---------------------------
lh_copy_source "$work/src" || give_up "could not copy the source tree"
rc=0
(cd "$work/src" && docker/steps/build "$work/staging") >"$work/build.log" 2>&1 || rc=$?
ok $rc "docker/steps/build builds and stages"
[ $rc -eq 0 ] || { sed 's/^/# /' "$work/build.log" | tail -n 30; give_up "nothing staged"; }
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
kport=$(lh_free_port 21500 2)   # the broker and its controller
brokers=$("$top/scripts/kafka" start "$work/kafka" --port "$kport" 2>"$work/kafka-start.log" | tail -n 1)
[ -n "$brokers" ] || { sed 's/^/# /' "$work/kafka-start.log"; give_up "scratch Kafka did not start"; }
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
is "$(kcat -b "$brokers" -L -t wikimedia.recentchange 2>/dev/null | grep -c 'partition [0-9]*, leader')" 3 \
  "topic wikimedia.recentchange has 3 partitions"
is "$(kcat -b "$brokers" -L -t wikimedia.recentchange.dlq 2>/dev/null | grep -c 'partition [0-9]*, leader')" 1 \
  "dead-letter topic created, one partition"

# ---- producer: starts once kafka-init is done, before Postgres is up (as compose starts it) --
# The staged binary through run-producer, against a local stand-in for Wikimedia's stream.
"$stage/usr/bin/lakehouse-producer" --generate 2000 --seed 11 --out "$work/events.jsonl" >/dev/null
python3 "$top/test/producer/sse_server.py" --file "$work/events.jsonl" >"$work/sse.port" 2>"$work/sse.log" &
sse_pid=$!
for _ in $(seq 1 50); do [ -s "$work/sse.port" ] && break; sleep 0.1; done
sse_port=$(head -n 1 "$work/sse.port")
mkdir -p "$work/state"
WIKIMEDIA_USER_AGENT="lakehouse-test/1 (test@example.invalid)" WIKIMEDIA_URL="http://127.0.0.1:$sse_port/v2/stream/recentchange" \
  LAKEHOUSE_STATE_DIR=$work/state LAKEHOUSE_PRODUCER=$stage/usr/bin/lakehouse-producer \
  timeout 120 "$top/docker/steps/run-producer" --limit 2000 --quiet >"$work/producer.out" 2>"$work/producer.err" &
producer_pid=$!

# ---- postgres: initdb with the image's sample configuration, password logins over TCP ------
# The image appends the snippet to the sample postgresql.conf that initdb copies; here
# initdb reads a copy of the server's share folder whose sample has the same lines (-L). The
# official image's entrypoint gives the superuser a password and asks for it over TCP
# (scram-sha-256), as lakehouse-init connects.
pgbin=$(pg_config --bindir)
share_copy=$work/share
cp -r "$(pg_config --sharedir)" "$share_copy"
"$top/docker/steps/conf-snippet" --brokers "$brokers" >>"$share_copy/postgresql.conf.sample"
pport=$(lh_free_port 26200)
mkdir -p "$work/pg"
chown postgres "$work/pg"
pw=test-password-$RANDOM
echo "$pw" >"$work/pwfile"
chown postgres "$work/pwfile"
rc=0
runuser -u postgres -- "$pgbin/initdb" -D "$work/pg/data" -L "$share_copy" -U postgres --pwfile="$work/pwfile" \
  --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$work/initdb.log" 2>&1 || rc=$?
ok $rc "initdb with the sample configuration the image makes"
runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg/data" -l "$work/pg/postgres.log" -w -t 60 \
  -o "-p $pport -k $work/pg -c listen_addresses=127.0.0.1" start >>"$work/initdb.log" 2>&1 || rc=$?
ok $rc "the cluster starts with nothing but port and socket given on the command line"
[ $rc -eq 0 ] || { sed 's/^/# /' "$work/initdb.log" | tail -n 20; give_up "no cluster"; }
psql_() { "$pgbin/psql" -X -h "$work/pg" -p "$pport" -U postgres -d postgres -qtA -v ON_ERROR_STOP=1 "$@"; }
is "$(psql_ -c 'SHOW shared_preload_libraries')" "lakehouse,pg_cron" "the snippet preloads lakehouse and pg_cron"
is "$(psql_ -c 'SHOW lakehouse.brokers')" "$brokers" "the snippet's brokers"
is "$(psql_ -c 'SHOW track_commit_timestamp')" "on" "the snippet turns commit timestamps on"

# ---- lakehouse-init, as every `docker compose up` runs it: over TCP with the password ------
export PGHOST=127.0.0.1 PGPORT=$pport PGUSER=postgres PGDATABASE=postgres PGPASSWORD=$pw LAKEHOUSE_STREAM=wiki
rc=0
PGPASSWORD=wrong "$top/docker/steps/init-pipeline" >"$work/init-pipeline-wrong.log" 2>&1 || rc=$?
check "a wrong password is refused (the TCP login asks for it)" \
  bash -c '[ "$1" -ne 0 ] && grep -q "password authentication failed" "$2"' _ "$rc" "$work/init-pipeline-wrong.log"
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

# ---- the producer's events through bronze, silver and gold ----------------------------------
rc=0
wait "$producer_pid" || rc=$?
ok $rc "run-producer published the stream"
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
failed=$(psql_ -c "SELECT string_agg(check_name || ': ' || detail, '; ') FROM lakehouse.run_checks()
                    WHERE passed IS DISTINCT FROM true AND passed IS NOT NULL" 2>&1 || echo "run_checks() failed")
is "$failed" "" "every asset check passes (skips aside)"

done_testing
