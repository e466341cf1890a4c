-- create_stream refuses a name under which an earlier stream left data it would resume
-- from: a worker starts each partition after the last offset stored under its name
-- (bronze rows and dead letters are the checkpoint), so a new stream over another topic
-- would skip everything below an old dead letter. No broker is reached: the refusals come
-- first (127.0.0.1:1 would fail to connect otherwise).
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS lakehouse CASCADE;
RESET client_min_messages;
CREATE EXTENSION lakehouse;
SET lakehouse.request_timeout = '300ms';

-- A dropped stream "old" kept its dead letters (drop_stream without drop_data).
INSERT INTO lakehouse.dead_letters (stream, topic, kafka_partition, kafka_offset, reason, batch_id)
VALUES ('old', 'old.topic', 0, 10, 'not JSON', 1);
SELECT lakehouse.create_stream('old', 'another.topic', '127.0.0.1:1');
SELECT count(*) AS streams, (SELECT count(*) FROM lakehouse.offsets) AS offsets FROM lakehouse.streams;
-- With them gone, the name is free again (the call now reaches for the broker).
DELETE FROM lakehouse.dead_letters WHERE stream = 'old';
\set VERBOSITY terse
SELECT lakehouse.create_stream('old', 'another.topic', '127.0.0.1:1');
\set VERBOSITY default

-- A silver table still declared over a dropped stream "s" would read the new one as if
-- it were the old one.
INSERT INTO lakehouse.streams (name, topic, enabled) VALUES ('s', 'no.such.topic', false);
CREATE TABLE bronze.s (kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL,
  kafka_timestamp timestamptz, kafka_key text, payload jsonb NOT NULL, batch_id bigint NOT NULL,
  ingested_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (kafka_partition, kafka_offset));
SELECT lakehouse.create_silver('s_rows', 's', ARRAY[lakehouse.silver_column('n', 'int', $e$(payload->>'n')::int$e$),
                                                    lakehouse.silver_column('t', 'timestamptz', 'kafka_timestamp')],
                               ARRAY['n'], 't', continuous => false);
DELETE FROM lakehouse.streams WHERE name = 's';
DROP TABLE bronze.s;
SELECT lakehouse.create_stream('s', 'another.topic', '127.0.0.1:1');
SELECT lakehouse.drop_silver('s_rows', true);
\set VERBOSITY terse
SELECT lakehouse.create_stream('s', 'another.topic', '127.0.0.1:1');
\set VERBOSITY default

-- reset_offsets: a reset below the stream's own data would be undone by the worker
-- (it resumes after its data): refused. A stream stopped on purpose stays stopped.
INSERT INTO lakehouse.streams (name, topic, enabled) VALUES ('r', 'no.such.topic', false);
INSERT INTO lakehouse.offsets (stream, kafka_partition, next_offset) VALUES ('r', 0, 5), ('r', 1, 0);
CREATE TABLE bronze.r (kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL,
  kafka_timestamp timestamptz, kafka_key text, payload jsonb NOT NULL, batch_id bigint NOT NULL,
  ingested_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (kafka_partition, kafka_offset));
INSERT INTO bronze.r (kafka_partition, kafka_offset, payload, batch_id) SELECT 0, o, '{}', 1 FROM generate_series(0, 4) o;
INSERT INTO lakehouse.dead_letters (stream, topic, kafka_partition, kafka_offset, reason, batch_id)
VALUES ('r', 'no.such.topic', 1, 3, 'not JSON', 1);
SELECT lakehouse.reset_offsets('r', 0, 2);
SELECT lakehouse.reset_offsets('r', 1, 3);
SELECT lakehouse.reset_offsets('r', 0, 7);
SELECT lakehouse.reset_offsets('r', 1, 4);
SELECT kafka_partition, next_offset FROM lakehouse.offsets WHERE stream = 'r' ORDER BY 1;
SELECT enabled AS restarted FROM lakehouse.streams WHERE name = 'r';
SELECT detail->>'partition' AS partition, detail->>'from' AS "from", detail->>'to' AS "to", detail->>'restarted' AS restarted
  FROM lakehouse.stream_log WHERE stream = 'r' AND event = 'offsets_reset' ORDER BY 1;
-- An enabled stream is restarted, and stays enabled.
UPDATE lakehouse.streams SET enabled = true WHERE name = 'r';
SELECT lakehouse.reset_offsets('r', 0, 8);
SELECT enabled FROM lakehouse.streams WHERE name = 'r';

-- The offsets check of a stream re-created under an old name does not count the old
-- stream's resets as its own skipped offsets (they are logged before its 'created').
INSERT INTO lakehouse.stream_log (stream, event, detail)
VALUES ('q', 'created', '{}'), ('q', 'offsets_reset', '{"partition": 0, "from": 0, "to": 100}'), ('q', 'dropped', '{}'),
       ('q', 'created', '{}');
INSERT INTO lakehouse.streams (name, topic, enabled) VALUES ('q', 'no.such.topic', false);
INSERT INTO lakehouse.offsets (stream, kafka_partition, next_offset) VALUES ('q', 0, 10);
CREATE TABLE bronze.q (kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL,
  kafka_timestamp timestamptz, kafka_key text, payload jsonb NOT NULL, batch_id bigint NOT NULL,
  ingested_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (kafka_partition, kafka_offset));
INSERT INTO bronze.q (kafka_partition, kafka_offset, payload, batch_id) SELECT 0, o, '{}', 1 FROM generate_series(0, 9) o;
SELECT check_name, passed, detail FROM lakehouse.run_checks() WHERE check_name = 'bronze_offsets_once:q';
-- Its own resets still count: offsets 10 to 14 skipped on purpose, then rows from 15.
INSERT INTO lakehouse.stream_log (stream, event, detail) VALUES ('q', 'offsets_reset', '{"partition": 0, "from": 10, "to": 15}');
INSERT INTO bronze.q (kafka_partition, kafka_offset, payload, batch_id) SELECT 0, o, '{}', 2 FROM generate_series(15, 19) o;
UPDATE lakehouse.offsets SET next_offset = 20 WHERE stream = 'q';
SELECT check_name, passed, detail FROM lakehouse.run_checks() WHERE check_name = 'bronze_offsets_once:q';

-- Every stream function called with bad arguments (NULLs, unknown streams, negative
-- partitions and offsets, empty and invalid names): the SQLSTATE, the message and the
-- hint of each refusal (none may be XX000, an error without an errcode), or "no error"
-- with the call's result. stream_status() takes no argument. No broker is reached (the
-- refusals come first; 127.0.0.1:1 would fail to connect otherwise). Afterwards nothing
-- has changed.
CREATE TEMP TABLE bad_calls (n serial, call text);
INSERT INTO bad_calls (call) VALUES
  ($$lakehouse.create_stream(NULL, 't', '127.0.0.1:1')$$),
  ($$lakehouse.create_stream('x', NULL, '127.0.0.1:1')$$),
  ($$lakehouse.create_stream('x', 't', '127.0.0.1:1', start_from => NULL)$$),
  ($$lakehouse.create_stream('', 't', '127.0.0.1:1')$$),
  ($$lakehouse.create_stream('q', 't', '127.0.0.1:1')$$),
  ($$lakehouse.create_stream('x', '', '127.0.0.1:1')$$),
  ($$lakehouse.create_stream('x', 'no spaces', '127.0.0.1:1')$$),
  ($$lakehouse.create_stream('x', 't', '')$$),
  ($$lakehouse.start_stream(NULL)$$),
  ($$lakehouse.start_stream('nope')$$),
  ($$lakehouse.stop_stream(NULL)$$),
  ($$lakehouse.stop_stream('nope')$$),
  ($$lakehouse.drop_stream(NULL)$$),
  ($$lakehouse.drop_stream('nope')$$),
  ($$lakehouse.drop_stream('nope', NULL)$$),
  ($$lakehouse.reset_offsets(NULL, 0, 0)$$),
  ($$lakehouse.reset_offsets('q', NULL, 20)$$),
  ($$lakehouse.reset_offsets('q', 0, NULL)$$),
  ($$lakehouse.reset_offsets('nope', 0, 0)$$),
  ($$lakehouse.reset_offsets('q', -1, 20)$$),
  ($$lakehouse.reset_offsets('q', 7, 20)$$),
  ($$lakehouse.reset_offsets('q', 0, -5)$$),
  ($$lakehouse.kafka_watermarks(NULL, '127.0.0.1:1')$$),
  ($$lakehouse.kafka_watermarks('no spaces', '127.0.0.1:1')$$),
  ($$lakehouse.kafka_offsets_for_time(NULL, now(), '127.0.0.1:1')$$),
  ($$lakehouse.kafka_offsets_for_time('t', NULL, '127.0.0.1:1')$$),
  ($$lakehouse.kafka_offsets_for_time('', now(), '127.0.0.1:1')$$),
  ($$lakehouse.kafka_offsets_for_time('no spaces', now(), '127.0.0.1:1')$$),
  ($$lakehouse.kafka_offsets_for_time('t', now(), '')$$);
CREATE TEMP TABLE before_bad_calls AS
SELECT (SELECT string_agg(s::text, ';' ORDER BY s.name) FROM lakehouse.streams s) AS streams,
       (SELECT string_agg(o::text, ';' ORDER BY o.stream, o.kafka_partition) FROM lakehouse.offsets o) AS offsets,
       (SELECT count(*) FROM lakehouse.stream_log) AS log_rows,
       (SELECT count(*) FROM lakehouse.dead_letters) AS dead_letters,
       (SELECT count(*) FROM pg_tables WHERE schemaname = 'bronze') AS bronze_tables;
DO $$
DECLARE
  c record; result text; state text; msg text; hint text;
BEGIN
  FOR c IN SELECT * FROM bad_calls ORDER BY n LOOP
    BEGIN
      EXECUTE 'SELECT count(*) || '' row(s): '' || coalesce(string_agg(coalesce(r::text, ''NULL''), '', ''), '''') FROM ' || c.call || ' r' INTO result;
      RAISE NOTICE '%: no error, %', c.call, result;
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
      RAISE NOTICE '%: % %', c.call, state, msg;
      RAISE NOTICE '  hint: %', coalesce(nullif(hint, ''), '(none)');
    END;
  END LOOP;
END $$;
SELECT b.streams IS NOT DISTINCT FROM a.streams AS streams_unchanged,
       b.offsets IS NOT DISTINCT FROM a.offsets AS offsets_unchanged,
       a.log_rows - b.log_rows AS new_log_rows,
       a.dead_letters - b.dead_letters AS new_dead_letters,
       a.bronze_tables - b.bronze_tables AS new_bronze_tables
  FROM before_bad_calls b,
       (SELECT (SELECT string_agg(s::text, ';' ORDER BY s.name) FROM lakehouse.streams s) AS streams,
               (SELECT string_agg(o::text, ';' ORDER BY o.stream, o.kafka_partition) FROM lakehouse.offsets o) AS offsets,
               (SELECT count(*) FROM lakehouse.stream_log) AS log_rows,
               (SELECT count(*) FROM lakehouse.dead_letters) AS dead_letters,
               (SELECT count(*) FROM pg_tables WHERE schemaname = 'bronze') AS bronze_tables) a;
DROP EXTENSION lakehouse CASCADE;
