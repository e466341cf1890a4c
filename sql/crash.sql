-- Crash tests a user can read: a stream worker SIGKILLed mid-backlog inside a batch, then
-- a silver pass SIGKILLed before its commit, on the scratch Kafka. The helper
-- test/tools/regress_crash (through psql's \!) publishes and kills, each worker held at
-- its transaction's last write by a lock another session holds, and prints one line
-- that says the kill landed where intended; a SIGKILLed backend makes PostgreSQL restart
-- every backend, so psql reconnects with \c.
-- Afterwards bronze holds each offset the broker holds exactly once, the checkpoint is the
-- broker's end offsets, and silver holds each edit/new event of bronze once. The workers
-- run in lakehouse.database ('postgres' here), so the test runs there.
\c postgres
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS lakehouse CASCADE;
RESET client_min_messages;
CREATE EXTENSION lakehouse;
-- Small batches: the backlog takes at least forty commits.
ALTER SYSTEM SET lakehouse.max_batch_messages = 1000;
SELECT pg_reload_conf();
SELECT 'regress.crash.' || (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS topic \gset
\setenv LH_CRASH_TOPIC :topic
\! "$PG_ABS_SRCDIR/test/tools/regress_crash" publish 40000
SELECT lakehouse.create_stream('crash', :'topic', current_setting('regress.brokers'));
SELECT lakehouse.create_recentchange_pipeline('crash');
-- Silver waits: once bronze is complete, its first pass reads the whole backlog.
SELECT lakehouse.set_silver_continuous('edits', false);
\! "$PG_ABS_SRCDIR/test/tools/regress_crash" kill-stream-worker crash
\c postgres
-- Waits (bounded) until what the query returns is true.
CREATE FUNCTION crash_wait(q text, what text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  ok boolean;
BEGIN
  FOR i IN 1 .. 1200 LOOP
    EXECUTE q INTO ok;
    IF ok THEN
      RETURN what || ': yes';
    ELSIF ok IS NULL THEN
      RETURN what || ': nothing to wait for';
    END IF;
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN what || ': not within 120 s';
END $$;
SELECT crash_wait(format($q$SELECT count(*) = 4 FROM lakehouse.offsets o
                              JOIN lakehouse.kafka_watermarks(%L, current_setting('regress.brokers')) w
                                ON w.partition = o.kafka_partition
                             WHERE o.stream = 'crash' AND o.next_offset = w.high$q$, :'topic'),
                  'bronze caught up with the broker');
SELECT (SELECT count(*) FROM bronze.crash) AS bronze_rows,
       (SELECT count(*) FROM lakehouse.dead_letters WHERE stream = 'crash') AS dead_letters,
       (SELECT count(DISTINCT (kafka_partition, kafka_offset)) FROM bronze.crash) AS distinct_offsets,
       (SELECT sum(high - low) FROM lakehouse.kafka_watermarks(:'topic', current_setting('regress.brokers'))) AS broker_messages;
SELECT sum(messages) AS messages_in_the_batches FROM lakehouse.stream_progress WHERE stream = 'crash';
-- The helper turns continuous silver on again and kills the pass that follows.
\! "$PG_ABS_SRCDIR/test/tools/regress_crash" kill-silver-pass edits
\c postgres
SELECT crash_wait($q$SELECT t.last_batch_id = (SELECT max(p.batch_id) FROM lakehouse.stream_progress p WHERE p.stream = 'crash')
                      FROM lakehouse.silver_tables t WHERE t.name = 'edits'$q$, 'silver caught up with bronze');
SELECT count(*) = (SELECT count(DISTINCT payload->'meta'->>'id') FROM bronze.crash WHERE payload->>'type' IN ('edit', 'new'))
         AS each_edit_once,
       count(*) = count(DISTINCT event_id) AS no_id_twice
  FROM silver.edits;
SELECT sum(rows_in) = (SELECT count(*) FROM bronze.crash) AS passes_read_bronze_once,
       sum(duplicates_dropped) AS duplicates, sum(late_dropped) AS late, sum(invalid) AS invalid
  FROM lakehouse.silver_progress WHERE silver = 'edits';
SELECT check_name, passed FROM lakehouse.run_checks() ORDER BY 1;
-- Leave the database as it was.
SELECT lakehouse.drop_recentchange_pipeline();
SELECT lakehouse.drop_stream('crash', true);
SELECT crash_wait($q$SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type IN ('lakehouse stream', 'lakehouse silver')$q$,
                  'the workers are gone');
DROP FUNCTION crash_wait(text, text);
SET client_min_messages = warning;
DROP EXTENSION lakehouse CASCADE;
RESET client_min_messages;
ALTER SYSTEM RESET lakehouse.max_batch_messages;
SELECT pg_reload_conf();
