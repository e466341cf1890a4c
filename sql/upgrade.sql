-- An existing 0.1.0 installation upgrades in place (ALTER EXTENSION UPDATE) and ends with
-- the same objects as CREATE EXTENSION of the current version.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS lakehouse CASCADE;
RESET client_min_messages;
CREATE EXTENSION lakehouse;
CREATE TEMP TABLE fresh AS
  SELECT pg_describe_object(classid, objid, 0) AS object
    FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'lakehouse');
DROP EXTENSION lakehouse;

CREATE EXTENSION lakehouse VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'lakehouse';
ALTER EXTENSION lakehouse UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'lakehouse';

CREATE TEMP TABLE upgraded AS
  SELECT pg_describe_object(classid, objid, 0) AS object
    FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'lakehouse');
SELECT (SELECT count(*) FROM fresh) > 0 AND (SELECT count(*) FROM upgraded) > 0 AS both_have_objects;
(SELECT 'only after install' AS diff, object FROM fresh EXCEPT SELECT 'only after install', object FROM upgraded)
UNION ALL
(SELECT 'only after upgrade', object FROM upgraded EXCEPT SELECT 'only after upgrade', object FROM fresh)
ORDER BY 1, 2;

-- A 0.3.0 installation with a silver table and the recentchange pipeline upgrades, and
-- both go on where they stood: the tables' functions are written anew (per-partition
-- watermark) and stay out of the extension, so drop_silver can still remove them.
DROP EXTENSION lakehouse;
CREATE EXTENSION lakehouse VERSION '0.3.0';
INSERT INTO lakehouse.streams (name, topic, enabled) VALUES ('u', 'no.such.topic', false);
CREATE TABLE bronze.u (kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL,
  kafka_timestamp timestamptz, kafka_key text, payload jsonb NOT NULL, batch_id bigint NOT NULL,
  ingested_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (kafka_partition, kafka_offset));
-- Batch b: one event at the partition's offset o. u_batch: event n at 10:00 + minute;
-- rc_batch: a recentchange edit of page "Page" at 10:00 by usr, in partition 2.
CREATE FUNCTION one_row_batch(b bigint, p integer, o bigint, payload jsonb) RETURNS void LANGUAGE sql AS $$
  INSERT INTO bronze.u (kafka_partition, kafka_offset, payload, batch_id) VALUES (p, o, payload, b);
  INSERT INTO lakehouse.stream_progress (stream, batch_id, messages, bytes, dead_letters, first_offsets, last_offsets, started_at)
  VALUES ('u', b, 1, 0, 0, jsonb_build_object(p::text, o), jsonb_build_object(p::text, o), now());
$$;
CREATE FUNCTION u_batch(b bigint, p integer, o bigint, n integer, minute integer) RETURNS void LANGUAGE sql AS $$
  SELECT one_row_batch(b, p, o, jsonb_build_object('n', n, 'dt', to_char((timestamptz '2020-01-01 10:00+00' + minute * interval '1 min') AT TIME ZONE 'UTC',
                                                                        'YYYY-MM-DD"T"HH24:MI:SS"Z"')))
$$;
CREATE FUNCTION rc_batch(b bigint, o bigint, n integer, usr text) RETURNS void LANGUAGE sql AS $$
  SELECT one_row_batch(b, 2, o, jsonb_build_object('meta', jsonb_build_object('id', format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0')),
                                                                              'dt', '2020-01-01T10:00:00Z'),
                                                   'type', 'edit', 'wiki', 'enwiki', 'title', 'Page', 'user', usr))
$$;
SELECT u_batch(1, 0, 0, 1, 60), u_batch(2, 1, 0, 2, 0), rc_batch(3, 0, 1, 'alice'), rc_batch(4, 1, 2, 'bob');
SELECT lakehouse.create_silver('u', 'u', ARRAY[lakehouse.silver_column('n', 'int', $e$(payload->>'n')::int$e$),
                                               lakehouse.silver_column('t', 'timestamptz', $e$(payload->>'dt')::timestamptz$e$)],
                               ARRAY['n'], 't', filter => $e$payload ? 'n'$e$, watermark => '10 min', continuous => false);
SELECT lakehouse.create_recentchange_pipeline('u');
SELECT lakehouse.set_silver_continuous('edits', false);
-- 0.3.0 judged partition 1's event 2 (10:00) by partition 0's 11:00: late.
SELECT rows_out, late_dropped FROM lakehouse.refresh_silver('u');
SELECT rows_out FROM lakehouse.refresh_silver('edits');
SELECT title, edits, distinct_editors FROM gold.top_pages_hourly;
-- An operator narrowed who may read the top pages; the update rebuilds the view with them.
REVOKE SELECT ON gold.top_pages_hourly FROM PUBLIC;
GRANT SELECT ON gold.top_pages_hourly TO lakehouse_admin;
ALTER EXTENSION lakehouse UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'lakehouse';
SELECT title, edits, distinct_editors FROM gold.top_pages_hourly;
SELECT has_table_privilege('public', 'gold.top_pages_hourly', 'SELECT') AS public_reads,
       has_table_privilege('lakehouse_admin', 'gold.top_pages_hourly', 'SELECT') AS admin_reads;
-- Each partition now has its own watermark, from the newest time silver holds from it:
-- partition 0 at 11:00; partition 1 had nothing admitted, so it starts without history:
-- its next event at 10:55 is on time and the one after, at 10:30, is late by 10:55.
SELECT silver, kafka_partition, max_event_time FROM lakehouse.silver_partitions ORDER BY 1, 2;
SELECT u_batch(5, 1, 1, 3, 55), u_batch(6, 1, 2, 4, 30);
SELECT rows_out, late_dropped FROM lakehouse.refresh_silver('u');
SELECT array_agg(n ORDER BY n) AS admitted FROM silver.u;
-- The page-hour's editors moved into gold_page_hour; alice again and carol add one editor.
SELECT to_regclass('lakehouse.gold_page_hour_editor') AS first_seen_table, editor_names FROM lakehouse.gold_page_hour;
SELECT rc_batch(7, 2, 3, 'alice'), rc_batch(8, 3, 4, 'carol');
SELECT rows_out FROM lakehouse.refresh_silver('edits');
SELECT title, edits, distinct_editors FROM gold.top_pages_hourly;
SELECT check_name, passed, detail FROM lakehouse.run_checks()
 WHERE check_name IN ('gold_reconciles:edits', 'silver_passes:edits', 'silver_passes:u') ORDER BY 1;
SELECT count(*) AS generated_in_extension FROM pg_depend d JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND p.proname ~ '^silver_(u|edits)_';
SELECT count(*) AS pipeline_relations_in_extension FROM pg_depend d JOIN pg_class c ON d.classid = 'pg_class'::regclass AND d.objid = c.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND (c.relname LIKE 'gold%' OR c.relname IN ('edits', 'editor_sessions', 'top_pages_hourly'));
SELECT lakehouse.drop_recentchange_pipeline();
SELECT lakehouse.drop_silver('u', true);
SELECT count(*) AS left_behind FROM pg_proc WHERE proname ~ '^silver_(u|edits)_';
DROP FUNCTION u_batch(bigint, integer, bigint, integer, integer), rc_batch(bigint, bigint, integer, text),
              one_row_batch(bigint, integer, bigint, jsonb);
