-- Silver: declaring a table, one pass at a time, dedup, the watermark, rejects, replay.
-- Bronze is written here the way the stream worker writes it (rows and their
-- stream_progress row in one transaction), so no broker is needed.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS lakehouse CASCADE;
RESET client_min_messages;
CREATE EXTENSION lakehouse;
SET lakehouse.watermark = '10min';
INSERT INTO lakehouse.streams (name, topic, enabled) VALUES ('s', 'no.such.topic', false);
CREATE TABLE bronze.s (kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL,
  kafka_timestamp timestamptz, kafka_key text, payload jsonb NOT NULL, batch_id bigint NOT NULL,
  ingested_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (kafka_partition, kafka_offset));
-- One bronze batch: events[i] goes to partition parts[i], at the partition's next offset.
CREATE FUNCTION fake_batch(events jsonb[], parts integer[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  b bigint;
BEGIN
  SELECT coalesce(max(batch_id), 0) + 1 INTO b FROM lakehouse.stream_progress WHERE stream = 's';
  INSERT INTO bronze.s (kafka_partition, kafka_offset, payload, batch_id)
  SELECT e.p, coalesce((SELECT max(kafka_offset) + 1 FROM bronze.s x WHERE x.kafka_partition = e.p), 0)
              + row_number() OVER (PARTITION BY e.p ORDER BY e.i) - 1, e.ev, b
    FROM unnest(events, parts) WITH ORDINALITY AS e(ev, p, i);
  INSERT INTO lakehouse.stream_progress (stream, batch_id, messages, bytes, dead_letters,
                                         first_offsets, last_offsets, started_at)
  SELECT 's', b, sum(n), 0, 0, jsonb_object_agg(p, lo), jsonb_object_agg(p, hi), now()
    FROM (SELECT kafka_partition p, min(kafka_offset) lo, max(kafka_offset) hi, count(*) n
            FROM bronze.s WHERE batch_id = b GROUP BY 1) x;
  RETURN b;
END $$;
-- An event with id number n and event time t (minutes after 10:00 UTC).
CREATE FUNCTION ev(n integer, minute integer, typ text DEFAULT 'edit') RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('meta', jsonb_build_object('id', format('00000000-0000-0000-0000-%s', lpad(n::text, 12, '0')),
                                                       'dt', to_char((timestamptz '2020-01-01 10:00+00' + minute * interval '1 min') AT TIME ZONE 'UTC',
                                                                     'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
                            'type', typ, 'n', n)
$$;
CREATE FUNCTION declare_ev(name text, max_rows integer DEFAULT 100000) RETURNS void LANGUAGE sql AS $$
  SELECT lakehouse.create_silver(name, 's',
    ARRAY[lakehouse.silver_column('event_id', 'uuid', $e$(payload->'meta'->>'id')::uuid$e$),
          lakehouse.silver_column('event_time', 'timestamptz', $e$(payload->'meta'->>'dt')::timestamptz$e$),
          lakehouse.silver_column('n', 'int', $e$payload->>'n'$e$)],
    ARRAY['event_id'], 'event_time', filter => $e$payload->>'type' IN ('edit', 'new')$e$,
    max_rows_per_pass => max_rows, continuous => false)
$$;
-- What a pass returned, without its timing.
CREATE VIEW passes AS
  SELECT silver, pass_id, kind, first_batch_id, last_batch_id, rows_in, rows_out, duplicates_dropped,
         late_dropped, invalid, filtered, watermark,
         rows_in = filtered + invalid + rows_out + duplicates_dropped + late_dropped AS balanced
    FROM lakehouse.silver_progress;

-- A declaration is checked before anything is created; each mistake is named.
\set VERBOSITY terse
SELECT lakehouse.create_silver('Bad-Name', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a''')], ARRAY['a'], 'a');
SELECT lakehouse.create_silver('x', 'nostream', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a''')], ARRAY['a'], 'a');
SELECT lakehouse.create_silver('x', 's', ARRAY[]::lakehouse.silver_column[], ARRAY['a'], 'a');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'texte', 'payload->>''a''')], ARRAY['a'], 'a');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('kafka_offset', 'text', 'payload->>''a''')], ARRAY['a'], 'a');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a'''),
                                               lakehouse.silver_column('a', 'text', 'payload->>''b''')], ARRAY['a'], 'a');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a'''),
                                               lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['b'], 't');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a''')], ARRAY['a'], 'a');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a'''),
                                               lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['a'], 't',
                               watermark => '-1 min');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a'''),
                                               lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['a'], 't',
                               partition_interval => '2 months');
\set VERBOSITY default
-- A bad expression names its column and says what is wrong.
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a'''),
                                               lakehouse.silver_column('t', 'timestamptz', 'paylod->>''dt''')], ARRAY['a'], 't');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a'''),
                                               lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['a'], 't',
                               filter => 'payload->>''type''');
-- What the extract cannot evaluate per row is refused here too, naming its column (up to
-- 0.14.0 these passed the check and the declaration failed without naming one): a
-- set-returning function, an aggregate, the bronze table named by its own name.
\set VERBOSITY terse
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 'jsonb_array_elements_text(payload->''a'')'),
                                               lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['a'], 't');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a'''),
                                               lakehouse.silver_column('n', 'bigint', 'count(*)'),
                                               lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['a'], 't');
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'text', 's.payload->>''a'''),
                                               lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['a'], 't');
\set VERBOSITY default
-- Nothing was created by the refused declarations.
SELECT count(*) AS declared FROM lakehouse.silver_tables;
SELECT count(*) AS silver_relations FROM pg_class WHERE relnamespace = 'silver'::regnamespace;

-- A first batch: a copy of event 1, event 3 ahead of the others, 5 exactly at the
-- watermark, 6 not a time, 7 a type the filter does not take.
SELECT declare_ev('ev');
-- Every statement of a pass is planned for its own rows: with PL/pgSQL's generic plans
-- (from a session's sixth pass on) a pass was joined with itself in a nested loop.
SELECT p.proname, 'plan_cache_mode=force_custom_plan' = ANY (p.proconfig) AS planned_per_pass
  FROM pg_proc p WHERE p.proname IN ('silver_ev_admit', 'silver_ev_extract', '_silver_pass', '_recentchange_on_admit') ORDER BY 1;
SELECT fake_batch(ARRAY[ev(1, 0), ev(2, 5), ev(1, 0), ev(3, 20), ev(4, 9), ev(5, 10),
                        jsonb_set(ev(6, 0), '{meta,dt}', '"x"'), ev(7, 11, 'log')],
                  ARRAY[0, 1, 0, 1, 0, 1, 0, 0]);
SELECT * FROM lakehouse.refresh_silver('ev');
SELECT n, event_time, kafka_partition, kafka_offset FROM silver.ev ORDER BY n;
SELECT kafka_partition, kafka_offset, reason FROM lakehouse.silver_rejects;
-- Nothing new: no pass row.
SELECT * FROM lakehouse.refresh_silver('ev');
-- Each partition has its own watermark: partition 0 stands at 10:09 - 10 min, partition 1
-- at 10:20 - 10 min. Next: copies of 4 and 2 (behind the watermark, but in silver:
-- duplicates) and a new event 8 that moves partition 1's watermark to 10:30; then in the
-- next batch event 9 in partition 0 (on time there) and again in partition 1 (behind
-- 10:30, but admitted from partition 0: a duplicate), event 10, a copy of 8, and event 13
-- twice in partition 1 (late, twice). Within a batch, rows count in (partition, offset)
-- order. The low watermark follows the partition that is behind.
SELECT fake_batch(ARRAY[ev(4, 9), ev(2, 5), ev(8, 40)], ARRAY[0, 1, 1]);
SELECT fake_batch(ARRAY[ev(9, 29), ev(10, 31), ev(9, 29), ev(8, 40), ev(13, 15), ev(13, 15)], ARRAY[0, 0, 1, 1, 1, 1]);
SELECT * FROM lakehouse.refresh_silver();
SELECT kafka_partition, kafka_offset, event_time, pass_id, replayed_in FROM lakehouse.silver_late ORDER BY 1, 2;
SELECT silver, kafka_partition, max_event_time, last_batch_id FROM lakehouse.silver_partitions ORDER BY 1, 2;
-- A backlog: partition 0's batches run five hours ahead of partition 1's (the worker reads
-- each partition in its own order). Partition 1's next events are judged by partition 1
-- alone: event 14 is on time, event 15 is late by partition 1's own watermark.
SELECT fake_batch(ARRAY[ev(16, 300)], ARRAY[0]);
SELECT fake_batch(ARRAY[ev(14, 41), ev(15, 12)], ARRAY[1, 1]);
SELECT * FROM lakehouse.refresh_silver('ev');
SELECT n, kafka_partition FROM silver.ev WHERE n IN (14, 15, 16) ORDER BY n;
-- Partition 1 goes quiet (its last rows committed an hour ago, longer than the
-- watermark): it stops holding the low watermark back, which moves up to partition 0's.
UPDATE lakehouse.silver_partitions SET last_batch_committed_at = last_batch_committed_at - interval '1 hour'
 WHERE silver = 'ev' AND kafka_partition = 1;
SELECT fake_batch(ARRAY[ev(17, 301)], ARRAY[0]);
SELECT rows_out, watermark FROM lakehouse.refresh_silver('ev');
-- A copy resent much later (partition 0's watermark days ahead; the copies come in
-- partition 1, behind its own watermark too) is still a duplicate, not late.
SELECT fake_batch(ARRAY[ev(11, 60 * 24 * 3)], ARRAY[0]);
SELECT fake_batch(ARRAY[ev(3, 20), ev(1, 0)], ARRAY[1, 1]);
SELECT * FROM lakehouse.refresh_silver('ev');
SELECT * FROM lakehouse.refresh_silver('ev');
-- The same bronze read one row per pass gives the same silver and the same counts: the
-- watermark runs in bronze commit order, not per pass.
SELECT declare_ev('ev_small', 1);
SELECT count(*) AS passes FROM (SELECT lakehouse.refresh_silver('ev_small') FROM generate_series(1, 10)) x;
SELECT (SELECT array_agg(n ORDER BY n) FROM silver.ev_small) = (SELECT array_agg(n ORDER BY n) FROM silver.ev) AS same_rows,
       (SELECT array_agg(n ORDER BY n) FROM silver.ev_small) AS rows_small;
SELECT silver, sum(rows_in) rows_in, sum(rows_out) rows_out, sum(duplicates_dropped) dups, sum(late_dropped) late,
       sum(invalid) invalid, sum(filtered) filtered, bool_and(balanced) balanced
  FROM passes WHERE kind = 'pass' GROUP BY 1 ORDER BY 1;

-- Replay takes the late rows of a time range again; the key still decides: the two
-- copies of 13 give one row, 15 another.
SELECT count(*) AS late_rows_to_replay FROM lakehouse.silver_late
 WHERE silver = 'ev' AND event_time >= '2020-01-01 10:00+00' AND event_time < '2020-01-01 11:00+00';
SELECT * FROM lakehouse.replay_late('ev', '2020-01-01 10:00+00', '2020-01-01 11:00+00');
SELECT kafka_partition, kafka_offset, replayed_in FROM lakehouse.silver_late WHERE silver = 'ev' ORDER BY 1, 2;
SELECT * FROM lakehouse.replay_late('ev', '2020-01-01 10:00+00', '2020-01-01 11:00+00');
SELECT n FROM silver.ev ORDER BY n;
SELECT * FROM passes ORDER BY pass_id, silver;
-- Partitions follow event time (one day each by default).
SELECT c.relname, count(*) FROM silver.ev e JOIN pg_class c ON c.oid = e.tableoid GROUP BY 1 ORDER BY 1;

-- A partition whose rows are all filtered out says nothing about event time: it does not
-- count as active (its last batch stays), so once quiet for a watermark it stops holding
-- the low watermark back (as the quiet partition 1 above did).
SELECT fake_batch(ARRAY[ev(18, 0, 'log')], ARRAY[1]);
SELECT rows_in, filtered FROM lakehouse.refresh_silver('ev');
SELECT kafka_partition, last_batch_id FROM lakehouse.silver_partitions WHERE silver = 'ev' ORDER BY 1;
-- An event time past the future limit would drag the watermark ahead: a reject.
SELECT fake_batch(ARRAY[jsonb_set(ev(12, 0), '{meta,dt}', '"2999-01-01T00:00:00Z"')], ARRAY[0]);
SELECT rows_in, rows_out, invalid FROM lakehouse.refresh_silver('ev');
SELECT reason ~ 'past the future limit' AS future_reject FROM lakehouse.silver_rejects WHERE kafka_offset = (SELECT max(kafka_offset) FROM bronze.s WHERE kafka_partition = 0) AND silver = 'ev';

-- Copies within a pass are admitted in bronze commit order, batch before partition: event
-- 20 comes in partition 1 of one batch, then in partition 0 of the next, on time in both;
-- the pass over both keeps partition 1's copy (in partition order, or in the order the
-- pass reads the rows, partition 0's would win).
SELECT fake_batch(ARRAY[ev(20, 4400)], ARRAY[1]);
SELECT fake_batch(ARRAY[ev(20, 4400)], ARRAY[0]);
SELECT rows_in, rows_out, duplicates_dropped, late_dropped FROM lakehouse.refresh_silver('ev');
SELECT n, kafka_partition FROM silver.ev WHERE n = 20;

-- A cut history (the batch under the cursor gone from stream_progress) stops the pass.
BEGIN;
DELETE FROM lakehouse.stream_progress WHERE batch_id = (SELECT last_batch_id FROM lakehouse.silver_tables WHERE name = 'ev');
SELECT * FROM lakehouse.refresh_silver('ev');
ROLLBACK;
\set VERBOSITY terse
SELECT * FROM lakehouse.refresh_silver('nosuch');
SELECT * FROM lakehouse.replay_late('ev', '2026-12-01', '2026-11-30');
SELECT * FROM lakehouse.replay_late('nosuch', '2026-11-30', '2026-12-01');

-- Privileges: expressions run with the declaring role's rights, never the superuser's.
CREATE ROLE regress_operator LOGIN;
GRANT lakehouse_admin TO regress_operator;
\c - regress_operator
SET lakehouse.watermark = '10min';
SELECT lakehouse.create_silver('sneaky', 's', ARRAY[lakehouse.silver_column('a', 'text', '(SELECT rolpassword FROM pg_authid LIMIT 1)'),
                                                    lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['a'], 't');
SELECT lakehouse._create_silver('sneaky', 's', ARRAY[lakehouse.silver_column('a', 'text', 'payload->>''a'''),
                                                    lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['a'], 't',
                                NULL, NULL, '1 day', 10, '1 day', false, 'postgres');
SELECT declare_ev('ops');
SELECT rows_in, rows_out FROM lakehouse.refresh_silver('ops');
SELECT p.proname, pg_get_userbyid(p.proowner) AS owner, p.prosecdef
  FROM pg_proc p WHERE p.proname LIKE 'silver_ops_%' ORDER BY 1;
\c - postgres
CREATE ROLE regress_nobody;
SET ROLE regress_nobody;
SELECT * FROM lakehouse.refresh_silver('ev');
RESET ROLE;
\set VERBOSITY default

-- The owner cannot change the functions that hold its expressions (the extension owns
-- them), and expressions that try to escape their place in the generated code fail.
\c - regress_operator
\set VERBOSITY terse
ALTER FUNCTION lakehouse.silver_ops_extract(bigint, bigint, integer[], bigint[], bigint[], timestamptz) SECURITY DEFINER;
SELECT lakehouse.create_silver('escape', 's',
  ARRAY[lakehouse.silver_column('id', 'text', $e$payload->>'n'$e$),
        lakehouse.silver_column('t', 'timestamptz', $e$now()); END $body$; ALTER ROLE regress_operator SUPERUSER; SELECT $body$$e$)],
  ARRAY['id'], 't');
-- (the refusal's wording differs between PostgreSQL versions: the start of the message,
-- whether a privilege refused it, and the role afterwards; the expression is made to end
-- the check's statement, which runs with the operator's rights, so a privilege refuses it)
DO $do$
BEGIN
  PERFORM lakehouse.create_silver('escape', 's',
    ARRAY[lakehouse.silver_column('id', 'text', $e$payload->>'n'$e$),
          lakehouse.silver_column('t', 'timestamptz', $e$now()))::timestamptz IS NULL; ALTER ROLE regress_operator SUPERUSER; SELECT 1 WHERE ((now()$e$)],
    ARRAY['id'], 't');
  RAISE NOTICE 'accepted';
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE '%: refused by a privilege check: %', split_part(SQLERRM, ':', 1),
    SQLERRM ~ ': (must be superuser to alter superuser roles|permission denied to alter role)';
END $do$;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_operator';
\set VERBOSITY default
-- Expressions run as their owner: current_user is the declaring role, even in a pass run
-- by the superuser.
SELECT lakehouse.create_silver('whoami', 's',
  ARRAY[lakehouse.silver_column('id', 'text', $e$payload->>'n'$e$),
        lakehouse.silver_column('t', 'timestamptz', $e$(payload->'meta'->>'dt')::timestamptz$e$),
        lakehouse.silver_column('who', 'text', 'current_user')],
  ARRAY['id'], 't', continuous => false);
\c - postgres
SET lakehouse.watermark = '10min';
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_operator';
SELECT rows_out > 0 AS admitted FROM lakehouse.refresh_silver('whoami');
SELECT DISTINCT who FROM silver.whoami;
-- Nor can they leave a setting behind for the rest of the pass, which runs as the
-- superuser: a search_path set inside is undone when the role switch ends.
\c - regress_operator
SELECT lakehouse.create_silver('sticky', 's',
  ARRAY[lakehouse.silver_column('id', 'text', $e$payload->>'n'$e$),
        lakehouse.silver_column('t', 'timestamptz', $e$(payload->'meta'->>'dt')::timestamptz$e$),
        lakehouse.silver_column('sp', 'text', $e$pg_catalog.set_config('search_path', 'public, pg_catalog', false)$e$)],
  ARRAY['id'], 't', continuous => false);
SHOW search_path;
\c - postgres
SET search_path = pg_catalog;
SELECT rows_out > 0 AS admitted FROM lakehouse.refresh_silver('sticky');
SHOW search_path;
SELECT count(*) > 0 AS expression_ran FROM silver.sticky WHERE sp = 'public, pg_catalog';
RESET search_path;
SELECT lakehouse.drop_silver('sticky', true);
SET lakehouse.watermark = '10min';
-- A table whose pass fails (its owner lost the right to read bronze) does not hold up the
-- others in refresh_silver() for all tables: its row carries the error.
REVOKE SELECT ON bronze.s FROM regress_operator;
SELECT fake_batch(ARRAY[ev(20, 0)], ARRAY[0]);
SELECT silver, rows_in, error FROM lakehouse.refresh_silver() ORDER BY silver;
GRANT SELECT ON bronze.s TO regress_operator;
SELECT silver, rows_in, error FROM lakehouse.refresh_silver() ORDER BY silver;
SELECT lakehouse.drop_silver('whoami', true);
-- Rows that do not fit in other ways: a time that is not finite, a domain's check.
CREATE DOMAIN positive_int AS integer CHECK (VALUE > 0);
SELECT lakehouse.create_silver('fits', 's',
  ARRAY[lakehouse.silver_column('id', 'uuid', $e$(payload->'meta'->>'id')::uuid$e$),
        lakehouse.silver_column('t', 'timestamptz', $e$(payload->'meta'->>'dt')::timestamptz$e$),
        lakehouse.silver_column('n', 'public.positive_int', $e$(payload->>'n')::integer$e$)],
  ARRAY['id'], 't', continuous => false);
SELECT fake_batch(ARRAY[jsonb_set(ev(21, 0), '{meta,dt}', '"-infinity"'), jsonb_set(ev(22, 0), '{n}', '-2'), ev(23, 0)], ARRAY[0, 0, 0]);
SELECT rows_out, invalid FROM lakehouse.refresh_silver('fits');
SELECT reason FROM lakehouse.silver_rejects WHERE silver = 'fits' ORDER BY kafka_offset DESC LIMIT 2;
SELECT lakehouse.drop_silver('fits', true);
DROP DOMAIN positive_int;
\set VERBOSITY terse
SELECT lakehouse.create_silver('x', 's', ARRAY[lakehouse.silver_column('a', 'varchar(3)', 'payload->>''a'''),
                                               lakehouse.silver_column('t', 'timestamptz', 'now()')], ARRAY['a'], 't');
SELECT lakehouse.drop_silver(NULL);
SELECT lakehouse.set_silver_continuous('ev', NULL);
SELECT lakehouse.create_recentchange_pipeline(NULL);
\set VERBOSITY default
-- A silver.edits declared with create_silver() is not the pipeline: refused, not taken
-- for it (up to 0.14.0 the call returned as if the pipeline were there).
SELECT declare_ev('edits');
SELECT lakehouse.create_recentchange_pipeline('s');
SELECT to_regclass('silver.editor_sessions') AS sessions;
SELECT lakehouse.drop_silver('edits', true);

-- The shipped recentchange declaration, by an operator: idempotent for its stream,
-- refused for another.
\c - regress_operator
SELECT lakehouse.create_recentchange_pipeline('s');
SELECT lakehouse.create_recentchange_pipeline('s');
\c - postgres
INSERT INTO lakehouse.streams (name, topic, enabled) VALUES ('s2', 'no.such.topic', false);
SELECT lakehouse.create_recentchange_pipeline('s2');
SELECT name, stream, key, event_time, filter, continuous FROM lakehouse.silver_tables WHERE name = 'edits';
SELECT lakehouse.set_silver_continuous('edits', false);
SELECT continuous FROM lakehouse.silver_tables WHERE name = 'edits';
SELECT lakehouse.set_silver_continuous('nosuch', false);
SELECT rows_in, rows_out, filtered FROM lakehouse.refresh_silver('edits');
-- The pipeline's silver.edits is the extension's, whoever declared the pipeline: an
-- operator drops it with drop_recentchange_pipeline(), not drop_silver().
\c - regress_operator
SELECT lakehouse.drop_silver('edits', true);
SELECT lakehouse.drop_recentchange_pipeline();
\c - postgres
SELECT count(*) AS declared, to_regclass('silver.edits') AS edits, to_regclass('silver.editor_sessions') AS sessions
  FROM lakehouse.silver_tables WHERE name = 'edits';
DELETE FROM lakehouse.streams WHERE name = 's2';

-- Late rows make no partitions: an event, then 40 more on each of the 40 days before it,
-- in one pass. Up to 0.11.0 each late row got a partition of its own (late rows with years
-- of scattered event times ran the lock table out, and the pass failed for good).
SELECT declare_ev('scatter');
SELECT fake_batch(ARRAY[ev(9000, 0)] || array_agg(ev(9000 + d, -d * 1440) ORDER BY d), array_fill(0, ARRAY[41])) > 0 AS written
  FROM generate_series(1, 40) d;
SELECT rows_in > 40 AS read_them, late_dropped >= 40 AS forty_late FROM lakehouse.refresh_silver('scatter');
SELECT (SELECT count(*) FROM pg_partition_tree('silver.scatter') WHERE isleaf) AS partitions,
       (SELECT count(DISTINCT date_trunc('day', event_time, 'UTC')) FROM silver.scatter) AS days_with_rows;
SELECT lakehouse.drop_silver('scatter', true);

-- drop_silver forgets the declaration; the data stays unless asked.
SELECT lakehouse.drop_silver('ev_small');
SELECT to_regclass('silver.ev_small') IS NOT NULL AS data_kept, count(*) AS declared FROM lakehouse.silver_tables WHERE name = 'ev_small';
-- Only a member of the declaring role (or a superuser) drops a declaration: another
-- operator is refused, for the superuser's table and for regress_operator's, and nothing
-- goes (up to 0.12.0 any lakehouse_admin member dropped any of them, data included).
CREATE ROLE regress_other_operator LOGIN;
GRANT lakehouse_admin TO regress_other_operator;
\c - regress_other_operator
SELECT lakehouse.drop_silver('ops', drop_data => true);
SELECT lakehouse.drop_silver('ev', true);
\c - postgres
SELECT to_regclass('silver.ops') IS NOT NULL AND to_regclass('silver.ev') IS NOT NULL AS data_kept,
       count(*) AS still_declared FROM lakehouse.silver_tables WHERE name IN ('ops', 'ev');
DROP ROLE regress_other_operator;
\c - regress_operator
SELECT lakehouse.drop_silver('ops', drop_data => true);
\c - postgres
SELECT to_regclass('silver.ops') IS NULL AS data_dropped;
DROP TABLE silver.ev_small;
SELECT lakehouse.drop_silver('ev', true);

-- A row that fits the declaration but cannot be written becomes a reject with the
-- insert's error, and the rest of its pass is admitted (up to 0.14.0 every pass failed on
-- it for good): a key over the unique index's size limit, a check constraint of the table.
SELECT lakehouse.create_silver('big', 's',
  ARRAY[lakehouse.silver_column('k', 'text', $e$payload->>'k'$e$),
        lakehouse.silver_column('t', 'timestamptz', $e$(payload->'meta'->>'dt')::timestamptz$e$)],
  ARRAY['k'], 't', filter => $e$payload ? 'k'$e$, continuous => false);
ALTER TABLE silver.big ADD CONSTRAINT big_k_not_bad CHECK (k NOT LIKE 'bad%');
SELECT fake_batch(ARRAY[jsonb_set(ev(9100, 0), '{k}', '"a"'),
                        jsonb_set(ev(9101, 0), '{k}', (SELECT to_jsonb(string_agg(md5(i::text), '')) FROM generate_series(1, 200) i)),
                        jsonb_set(ev(9102, 0), '{k}', '"bad"'), jsonb_set(ev(9103, 0), '{k}', '"b"')], ARRAY[0, 0, 0, 0]) > 0 AS written;
SELECT rows_in - filtered AS taken, rows_out, invalid FROM lakehouse.refresh_silver('big');
SELECT pass_id, balanced FROM passes WHERE silver = 'big';
SELECT k FROM silver.big ORDER BY k;
SELECT b.payload->'meta'->>'id' AS id, r.reason
  FROM lakehouse.silver_rejects r JOIN bronze.s b USING (kafka_partition, kafka_offset) WHERE r.silver = 'big' ORDER BY 1;
-- Rows that fail only together are not set aside: the pass fails with their error and
-- nothing of it stays (three rows that together break a check of a trigger's table; any
-- two of them do not).
CREATE TABLE big_total (total integer CHECK (total < 3));
INSERT INTO big_total VALUES (0);
CREATE FUNCTION big_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE public.big_total SET total = (SELECT count(*) FROM new_rows);
  RETURN NULL;
END $$;
CREATE TRIGGER big_count AFTER INSERT ON silver.big REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION big_count();
SELECT fake_batch(ARRAY[jsonb_set(ev(9104, 0), '{k}', '"c"'), jsonb_set(ev(9105, 0), '{k}', '"d"'), jsonb_set(ev(9106, 0), '{k}', '"e"')], ARRAY[0, 0, 0]) > 0 AS written;
\set VERBOSITY terse
SELECT rows_out FROM lakehouse.refresh_silver('big');
\set VERBOSITY default
SELECT count(*) AS rows, (SELECT last_pass_id FROM lakehouse.silver_tables WHERE name = 'big') AS passes FROM silver.big;
DROP TRIGGER big_count ON silver.big;
DROP TABLE big_total;
DROP FUNCTION big_count();
SELECT rows_out FROM lakehouse.refresh_silver('big');
-- The search sees the pass as it was judged: a late row with a key over the limit, in a
-- pass with a failing on-time row, is late (silver_late, replayable), not a reject, and
-- makes no partition for its old day (the watermark is 10 minutes; 0 and 100 minutes
-- after 2020-01-01 10:00, then a row of 2019).
SELECT fake_batch(ARRAY[jsonb_set(ev(9107, 100), '{k}', '"f"'), jsonb_set(ev(9108, 100), '{k}', '"bad 2"'),
                        jsonb_set(jsonb_set(ev(9109, 0), '{k}', (SELECT to_jsonb(string_agg(md5(i::text), '')) FROM generate_series(1, 200) i)),
                                  '{meta,dt}', '"2019-06-01T00:00:00Z"')], ARRAY[0, 0, 0]) > 0 AS written;
SELECT rows_in - filtered AS taken, rows_out, invalid, late_dropped FROM lakehouse.refresh_silver('big');
SELECT (SELECT count(*) FROM lakehouse.silver_late WHERE silver = 'big') AS late_rows,
       (SELECT count(*) FROM lakehouse.silver_rejects WHERE silver = 'big') AS rejects,
       (SELECT count(*) FROM pg_partition_tree('silver.big') WHERE isleaf) AS partitions;
-- Ten rows of a pass that all fail alone are an error of the table, not of its rows: the
-- pass fails with it, and nothing is set aside.
SELECT fake_batch(array_agg(jsonb_set(ev(9110 + i, 100), '{k}', to_jsonb('bad ' || i))), array_fill(0, ARRAY[10])) > 0 AS written
  FROM generate_series(1, 10) i;
\set VERBOSITY terse
SELECT rows_out FROM lakehouse.refresh_silver('big');
\set VERBOSITY default
SELECT count(*) AS rejects FROM lakehouse.silver_rejects WHERE silver = 'big';
ALTER TABLE silver.big DROP CONSTRAINT big_k_not_bad;
SELECT rows_out, invalid FROM lakehouse.refresh_silver('big');
-- A partition detached by hand and kept stops a pass that needs its day, with a clear
-- error (its rows are not taken for rejects); attached again, the pass goes on.
ALTER TABLE silver.big DETACH PARTITION silver."big_p20200101T0000";
SELECT fake_batch(ARRAY[jsonb_set(ev(9121, 101), '{k}', '"g"')], ARRAY[0]) > 0 AS written;
\set VERBOSITY terse
SELECT rows_out FROM lakehouse.refresh_silver('big');
\set VERBOSITY default
ALTER TABLE silver.big ATTACH PARTITION silver."big_p20200101T0000" FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00');
SELECT rows_out, invalid FROM lakehouse.refresh_silver('big');
-- A foreign-key violation is not taken for the row's fault (its parent may come later):
-- the pass fails with it and sets nothing aside; once the parent is there, it goes in.
CREATE TABLE big_parent (k text PRIMARY KEY);
INSERT INTO big_parent SELECT k FROM silver.big;
ALTER TABLE silver.big ADD CONSTRAINT big_k_known FOREIGN KEY (k) REFERENCES big_parent (k);
SELECT fake_batch(ARRAY[jsonb_set(ev(9122, 102), '{k}', '"h"')], ARRAY[0]) > 0 AS written;
SELECT count(*) AS rejects_before FROM lakehouse.silver_rejects WHERE silver = 'big' \gset
\set VERBOSITY terse
SELECT rows_out FROM lakehouse.refresh_silver('big');
\set VERBOSITY default
SELECT count(*) = :rejects_before AS nothing_set_aside FROM lakehouse.silver_rejects WHERE silver = 'big';
INSERT INTO big_parent VALUES ('h');
SELECT rows_out, invalid FROM lakehouse.refresh_silver('big');
ALTER TABLE silver.big DROP CONSTRAINT big_k_known;
DROP TABLE big_parent;
SELECT lakehouse.drop_silver('big', true);

-- A zone-less time means UTC whoever runs the pass (the generated functions pin TimeZone;
-- up to 0.14.0 the session's applied): a copy read by a session in another zone gets its
-- original's event time and key, and is dropped.
SELECT lakehouse.create_silver('tz', 's',
  ARRAY[lakehouse.silver_column('event_id', 'uuid', $e$(payload->'meta'->>'id')::uuid$e$),
        lakehouse.silver_column('event_time', 'timestamptz', $e$(payload->'meta'->>'dt')::timestamptz$e$)],
  ARRAY['event_id'], 'event_time', filter => $e$(payload->>'n')::integer >= 9200$e$, continuous => false);
SET TimeZone = 'America/New_York';
SELECT fake_batch(ARRAY[jsonb_set(ev(9200, 0), '{meta,dt}', '"2020-01-01 10:00:00"')], ARRAY[0]) > 0 AS written;
SELECT rows_out, duplicates_dropped FROM lakehouse.refresh_silver('tz');
SET TimeZone = 'Asia/Tokyo';
SELECT fake_batch(ARRAY[jsonb_set(ev(9200, 0), '{meta,dt}', '"2020-01-01 10:00:00"')], ARRAY[0]) > 0 AS written;
SELECT rows_out, duplicates_dropped FROM lakehouse.refresh_silver('tz');
RESET TimeZone;
SELECT event_time AT TIME ZONE 'UTC' AS event_time_utc FROM silver.tz;
SELECT lakehouse.drop_silver('tz', true);
DROP OWNED BY regress_operator;
DROP ROLE regress_operator;
DROP ROLE regress_nobody;
DROP VIEW passes;
DROP FUNCTION fake_batch(jsonb[], integer[]), ev(integer, integer, text), declare_ev(text, integer);
DROP EXTENSION lakehouse CASCADE;
