#!/usr/bin/env bash
# First-start init script for the lakehouse Docker image (docker/Dockerfile): the official
# postgres entrypoint runs it once, on an empty data directory, while its temporary server
# runs with the image's settings (lakehouse and pg_cron preloaded). It creates both
# extensions in the database named by lakehouse.database and cron.database_name (postgres).
set -euo pipefail

psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --no-password --no-psqlrc \
     --dbname postgres <<'SQL'
CREATE EXTENSION lakehouse;
CREATE EXTENSION pg_cron;
SQL
