#!/usr/bin/env bash
# docker/ checked as far as possible without a Docker engine: the compose file validated and
# resolved by Docker Compose itself (`docker-compose config`, built from its Go module by
# scripts/docker-tools), its shape checked against what docker/README.md promises (only
# Postgres published, on loopback; named volumes; health checks and start order; passwords
# from .env), the Dockerfile linted by hadolint, the step scripts by shellcheck, and the
# Dockerfile and compose file shown to call the step scripts that 030_docker_steps.t runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/tap.sh"

compose=$("$top/scripts/docker-tools" compose 2>/dev/null) || give_up "could not get Docker Compose (scripts/docker-tools compose)"
hadolint=$("$top/scripts/docker-tools" hadolint 2>/dev/null) || give_up "could not get hadolint (scripts/docker-tools hadolint)"
work=$(mktemp -d "${TMPDIR:-/tmp}/lakehouse-docker-files.XXXXXX")
trap 'rm -rf "$work"' EXIT
file=$top/docker/docker-compose.yml
# .env.example as a user fills it in: its two empty values given.
{ sed -e 's/^POSTGRES_PASSWORD=$/POSTGRES_PASSWORD=s3cret-test/' \
      -e 's/^WIKIMEDIA_USER_AGENT=$/WIKIMEDIA_USER_AGENT=lakehouse-test\/1 (test@example.invalid)/' \
      "$top/docker/.env.example"; } >"$work/filled.env"
dc() { env -u POSTGRES_PASSWORD -u WIKIMEDIA_USER_AGENT "$compose" -f "$file" --env-file "$work/filled.env" "$@"; }

check "compose config accepts docker-compose.yml with .env.example filled in" dc config --quiet
check "compose config accepts it with --profile redpanda" dc --profile redpanda config --quiet
# The password and the User-Agent are nowhere in the compose file, and .env.example leaves
# them empty: config must refuse it unedited, and with no .env at all.
for envfile in "$top/docker/.env.example" /dev/null; do
  rc=0
  (cd "$work" && env -u POSTGRES_PASSWORD -u WIKIMEDIA_USER_AGENT "$compose" -f "$file" --env-file "$envfile" config --quiet) \
    >"$work/noenv.log" 2>&1 || rc=$?
  check "with $(basename "$envfile") as .env, config refuses and names a variable to set" \
    bash -c '[ "$1" -ne 0 ] && grep -qE "(POSTGRES_PASSWORD|WIKIMEDIA_USER_AGENT) in docker/.env" "$2"' _ "$rc" "$work/noenv.log"
done
check "no password written in the compose file" \
  bash -c '! grep -nE "^ *[A-Z_]*PASSWORD: *[^$ ]" "$1"' _ "$file"

dc config --format json >"$work/config.json"
dc --profile redpanda config --format json >"$work/config-redpanda.json"
shape() {
  python3 - "$work/config.json" "$1" "$work/config-redpanda.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); what = sys.argv[2]; s = d["services"]
rp = json.load(open(sys.argv[3]))["services"]
def fail(msg): print(msg); sys.exit(1)
if what == "ports":
    published = {n: v["ports"] for n, v in s.items() if v.get("ports")}
    if list(published) != ["postgres"]: fail(f"published: {list(published)}")
    for p in published["postgres"]:
        if p.get("host_ip") != "127.0.0.1" or p.get("target") != 5432: fail(f"postgres port {p}")
elif what == "volumes":
    want = {"postgres": ("pg-data", "/var/lib/postgresql/data"), "kafka": ("kafka-data", "/var/lib/kafka/data"),
            "producer": ("producer-state", "/var/lib/lakehouse-producer")}
    for n, (vol, target) in want.items():
        if not any(v.get("type") == "volume" and v.get("source") == vol and v.get("target") == target
                   for v in s[n].get("volumes", [])): fail(f"{n} lacks named volume {vol} at {target}")
        if vol not in d.get("volumes", {}): fail(f"volume {vol} not declared")
elif what == "order":
    want = {"postgres": {"kafka": "service_healthy"},
            "kafka-init": {"kafka": "service_healthy"},
            "lakehouse-init": {"postgres": "service_healthy", "kafka-init": "service_completed_successfully"},
            "producer": {"kafka-init": "service_completed_successfully"}}
    for n, deps in want.items():
        got = {k: v["condition"] for k, v in s[n].get("depends_on", {}).items() if v.get("required", True)}
        if got != deps: fail(f"{n} depends on {got}, want {deps}")
    for n in ("kafka", "postgres"):
        if "healthcheck" not in s[n]: fail(f"{n} has no healthcheck")
    # The entrypoint's temporary server listens on the socket only: the check goes by TCP.
    if "-h 127.0.0.1" not in " ".join(s["postgres"]["healthcheck"]["test"]): fail("postgres healthcheck not over TCP")
    if s["lakehouse-init"].get("restart") != "on-failure": fail("lakehouse-init is not run again after a failure")
elif what == "redpanda-order":
    # With the profile, the topics are created on Redpanda once it runs with auto-creation off.
    got = {k: v["condition"] for k, v in rp["kafka-init"].get("depends_on", {}).items()}
    want = {"kafka": "service_healthy", "redpanda": "service_healthy", "redpanda-setup": "service_completed_successfully"}
    if got != want: fail(f"kafka-init depends on {got} with --profile redpanda, want {want}")
    if "redpanda" not in rp or "redpanda-setup" not in rp: fail("the profile has no redpanda services")
elif what == "steps":
    if s["kafka-init"]["entrypoint"] != ["/usr/local/bin/init-kafka"]: fail("kafka-init entrypoint")
    if not any(v.get("target") == "/usr/local/bin/init-kafka" and v.get("source", "").endswith("docker/steps/init-kafka")
               for v in s["kafka-init"]["volumes"]): fail("kafka-init does not mount docker/steps/init-kafka")
    if s["lakehouse-init"]["entrypoint"] != ["/usr/local/bin/lakehouse-init-pipeline"]: fail("lakehouse-init entrypoint")
    if s["postgres"]["build"].get("target") != "postgres" or s["producer"]["build"].get("target") != "producer":
        fail("build targets")
    env = s["producer"]["environment"]
    if not env.get("WIKIMEDIA_USER_AGENT") or env.get("LAKEHOUSE_STATE_DIR") != "/var/lib/lakehouse-producer":
        fail(f"producer environment {env}")
PY
}
check "only postgres is published, on 127.0.0.1" shape ports
check "named volumes for Postgres data, Kafka data and producer state" shape volumes
check "health checks, and services start in order" shape order
check "with --profile redpanda, kafka-init waits for Redpanda and its setup" shape redpanda-order
check "services run the step scripts (kafka-init, lakehouse-init, targets)" shape steps

check "hadolint finds nothing in docker/Dockerfile" "$hadolint" "$top/docker/Dockerfile"
# The Dockerfile runs the same step scripts as 030_docker_steps.t, in the same order.
check "Dockerfile: the build step, conf-snippet into the sample configuration, the producer's entry point" \
  bash -c 'grep -q "^RUN docker/steps/build /staging$" "$1" &&
           tr -d "\\\\\n" <"$1" | grep -q "conf-snippet --brokers \"\${LAKEHOUSE_BROKERS}\" *>> /usr/share/postgresql/postgresql.conf.sample" &&
           grep -q "^ENTRYPOINT \[\"/usr/local/bin/run-producer\"\]$" "$1"' _ "$top/docker/Dockerfile"
check "every COPY source in the Dockerfile exists" bash -c '
  cd "$1" && sed -n "s/^COPY \(docker[^ ]*\( docker[^ ]*\)*\) .*/\1/p" docker/Dockerfile | tr " " "\n" |
  while read -r f; do [ -e "$f" ] || { echo "missing $f"; exit 1; }; done' _ "$top"

if command -v shellcheck >/dev/null; then
  check "shellcheck finds nothing in docker/steps/*" shellcheck "$top"/docker/steps/*
else
  echo "ok $((lh_tap_n + 1)) # SKIP shellcheck not installed"; lh_tap_n=$((lh_tap_n + 1))
fi
for s in "$top"/docker/steps/*; do
  check "$(basename "$s") --help" "$s" --help
done

done_testing
