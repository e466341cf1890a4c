-- Two independent ways to the current version must end with the same objects, defined
-- the same way: CREATE EXTENSION runs the version's own full install script
-- (lakehouse--X.sql), and ALTER EXTENSION UPDATE runs the chain of upgrade scripts from
-- 0.1.0. Here the upgraded database also holds a stream with offsets, batches and dead
-- letters written at 0.2.0, which must come through the upgrade untouched and usable.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS lakehouse CASCADE;
RESET client_min_messages;

-- Every member of the extension and, per member, each part of its definition: owner,
-- columns in order (type, default, NOT NULL, collation, storage, statistics target),
-- constraints, indexes, triggers, rules, row security and its policies,
-- sequences and what owns them, whole function definitions (body, settings, security,
-- volatility), composite types' attributes, privileges (and the initial privileges pg_dump
-- goes by), comments (on constraints, indexes and triggers too). ACL entries are sorted:
-- the order GRANTs ran in is not part of the definition.
CREATE FUNCTION pg_temp.acl(a aclitem[]) RETURNS text LANGUAGE sql AS
  $$ SELECT coalesce(string_agg(x::text, ',' ORDER BY x::text), '-') FROM unnest(a) x $$;
CREATE FUNCTION pg_temp.definitions()
RETURNS TABLE (object text, part text, definition text) LANGUAGE sql AS $$
  WITH m AS (SELECT d.classid, d.objid, pg_describe_object(d.classid, d.objid, 0) AS object
               FROM pg_depend d
              WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'lakehouse')),
       rel AS (SELECT m.object, c.* FROM m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid)
  SELECT m.object, 'member', m.classid::regclass::text FROM m
  UNION ALL
  SELECT m.object, 'initial privileges ' || i.objsubid, i.privtype::text || ' ' || pg_temp.acl(i.initprivs)
    FROM m JOIN pg_init_privs i ON i.classoid = m.classid AND i.objoid = m.objid
  UNION ALL
  SELECT r.object, 'relation', format('kind %s, persistence %s, access method %s, options %s, row security %s/%s, replica identity %s, owner %s, acl %s, comment %s',
                                      r.relkind, r.relpersistence, (SELECT a.amname FROM pg_am a WHERE a.oid = r.relam), r.reloptions,
                                      r.relrowsecurity, r.relforcerowsecurity, r.relreplident, r.relowner::regrole,
                                      pg_temp.acl(r.relacl), obj_description(r.oid, 'pg_class'))
    FROM rel r
  UNION ALL
  SELECT r.object, format('column %s: %s', row_number() OVER (PARTITION BY r.oid ORDER BY a.attnum), a.attname),
         format('%s, not null %s, default %s, collation %s, identity "%s", generated "%s", storage %s, compression "%s", statistics %s, acl %s, comment %s',
                format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid),
                CASE WHEN a.attcollation <> 0 THEN a.attcollation::regcollation::text END, a.attidentity, a.attgenerated,
                a.attstorage, a.attcompression, a.attstattarget,
                pg_temp.acl(a.attacl), col_description(r.oid, a.attnum))
    FROM rel r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
  UNION ALL
  SELECT r.object, 'constraint ' || k.conname, pg_get_constraintdef(k.oid) || ', comment ' || coalesce(obj_description(k.oid, 'pg_constraint'), '-')
    FROM rel r JOIN pg_constraint k ON k.conrelid = r.oid AND k.contype <> 'n'   -- NOT NULL (PostgreSQL 18's constraints): with the columns
  UNION ALL
  SELECT r.object, 'index ' || i.relname, pg_get_indexdef(i.oid) || ', comment ' || coalesce(obj_description(i.oid, 'pg_class'), '-')
    FROM rel r JOIN pg_index x ON x.indrelid = r.oid JOIN pg_class i ON i.oid = x.indexrelid
  UNION ALL
  SELECT r.object, 'trigger ' || t.tgname, pg_get_triggerdef(t.oid) || ', comment ' || coalesce(obj_description(t.oid, 'pg_trigger'), '-')
    FROM rel r JOIN pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
  UNION ALL
  SELECT r.object, 'rule ' || w.rulename, pg_get_ruledef(w.oid)
    FROM rel r JOIN pg_rewrite w ON w.ev_class = r.oid AND w.rulename <> '_RETURN'
  UNION ALL
  SELECT r.object, 'policy ' || p.polname, format('%s %s to %s using %s check %s', p.polcmd, p.polpermissive, p.polroles::regrole[],
                                                   pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
    FROM rel r JOIN pg_policy p ON p.polrelid = r.oid
  UNION ALL
  SELECT r.object, 'view', pg_get_viewdef(r.oid) FROM rel r WHERE r.relkind IN ('v', 'm')
  UNION ALL
  SELECT r.object, 'sequence', format('%s start %s increment %s min %s max %s cache %s cycle %s, owned by %s', s.seqtypid::regtype,
                                      s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle,
                                      (SELECT pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) FROM pg_depend d
                                        WHERE d.classid = 'pg_class'::regclass AND d.objid = r.oid AND d.deptype IN ('a', 'i')
                                          AND d.refclassid = 'pg_class'::regclass))
    FROM rel r JOIN pg_sequence s ON s.seqrelid = r.oid
  UNION ALL
  SELECT m.object, 'function', format('%s owner %s, acl %s, comment %s', pg_get_functiondef(p.oid), p.proowner::regrole,
                                      pg_temp.acl(p.proacl), obj_description(p.oid, 'pg_proc'))
    FROM m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
  UNION ALL
  SELECT m.object, 'type', format('%s (%s) owner %s, acl %s, comment %s', t.typtype,
                                  (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                                     || coalesce(' collate ' || nullif(a.attcollation, 0)::regcollation::text, ''), ', ' ORDER BY a.attnum)
                                     FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped),
                                  t.typowner::regrole, pg_temp.acl(t.typacl), obj_description(t.oid, 'pg_type'))
    FROM m JOIN pg_type t ON m.classid = 'pg_type'::regclass AND t.oid = m.objid
  UNION ALL
  SELECT m.object, 'schema', format('owner %s, acl %s, comment %s', n.nspowner::regrole, pg_temp.acl(n.nspacl), obj_description(n.oid, 'pg_namespace'))
    FROM m JOIN pg_namespace n ON m.classid = 'pg_namespace'::regclass AND n.oid = m.objid
  UNION ALL
  SELECT 'extension lakehouse', 'configuration table ' || c.relname, coalesce(e.extcondition[i], '')
    FROM pg_extension e, generate_subscripts(e.extconfig, 1) i, pg_class c
   WHERE e.extname = 'lakehouse' AND c.oid = e.extconfig[i]
$$;

-- The parts that differ between the fresh install (the temporary table fresh) and another
-- set of definitions, each labelled with the side it is found on.
CREATE FUNCTION pg_temp.differences(other regclass, other_side text)
RETURNS TABLE (side text, object text, part text, definition text) LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
    '(SELECT %1$L, f.object, f.part, f.definition FROM fresh f
      EXCEPT SELECT %1$L, o.object, o.part, o.definition FROM %2$s o)
     UNION ALL
     (SELECT %3$L, o.object, o.part, o.definition FROM %2$s o
      EXCEPT SELECT %3$L, f.object, f.part, f.definition FROM fresh f)
     ORDER BY 2, 3, 1', 'only after install', other, other_side);
END $$;

-- The current version ships its own install script (without it CREATE EXTENSION would run
-- the chain too, and the comparison below would be of a path with itself).
SELECT (pg_stat_file(format('%s/extension/lakehouse--%s.sql', c.setting, e.default_version))).size > 0 AS full_script_shipped
  FROM pg_config c, pg_available_extensions e WHERE c.name = 'SHAREDIR' AND e.name = 'lakehouse';
CREATE EXTENSION lakehouse;
CREATE TEMP TABLE fresh AS SELECT * FROM pg_temp.definitions();
DROP EXTENSION lakehouse;

CREATE EXTENSION lakehouse VERSION '0.1.0';
ALTER EXTENSION lakehouse UPDATE TO '0.2.0';
-- A stream as a 0.2.0 worker left it: two partitions' offsets, a batch, bronze rows and a
-- dead letter with its raw key and value bytes.
INSERT INTO lakehouse.streams (name, topic, brokers, enabled) VALUES ('old', 'upgrade.old', NULL, false);
CREATE TABLE bronze.old (kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL,
  kafka_timestamp timestamptz, kafka_key text, payload jsonb NOT NULL, batch_id bigint NOT NULL,
  ingested_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (kafka_partition, kafka_offset));
INSERT INTO bronze.old (kafka_partition, kafka_offset, payload, batch_id) VALUES (0, 0, '{"n": 1}', 1), (1, 0, '{"n": 2}', 1);
INSERT INTO lakehouse.dead_letters (stream, topic, kafka_partition, kafka_offset, kafka_key, raw_value, reason, batch_id)
VALUES ('old', 'upgrade.old', 0, 1, '\xff00'::bytea, '\x7b6e'::bytea, 'not valid JSON', 1);
INSERT INTO lakehouse.offsets (stream, kafka_partition, next_offset) VALUES ('old', 0, 2), ('old', 1, 1);
INSERT INTO lakehouse.stream_progress (stream, batch_id, messages, bytes, dead_letters, first_offsets, last_offsets, started_at)
VALUES ('old', 1, 3, 20, 1, '{"0": 0, "1": 0}', '{"0": 1, "1": 0}', now());
CREATE TEMP TABLE before_data AS
  SELECT 'offsets' AS t, to_jsonb(o) - 'updated_at' AS r FROM lakehouse.offsets o
  UNION ALL SELECT 'dead_letters', to_jsonb(d) - 'created_at' FROM lakehouse.dead_letters d
  UNION ALL SELECT 'stream_progress', to_jsonb(p) - 'started_at' - 'committed_at' FROM lakehouse.stream_progress p
  UNION ALL SELECT 'bronze', to_jsonb(b) - 'ingested_at' FROM bronze.old b;

ALTER EXTENSION lakehouse UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'lakehouse') AS at_default_version
  FROM pg_extension WHERE extname = 'lakehouse';
CREATE TEMP TABLE upgraded AS SELECT * FROM pg_temp.definitions();

-- Enough compared that a miss would show: members of every kind, and many parts.
SELECT part, count(*) > 0 AS compared
  FROM (SELECT CASE WHEN part LIKE 'column%' THEN 'column' WHEN part LIKE 'constraint%' THEN 'constraint'
                    WHEN part LIKE 'index%' THEN 'index' WHEN part LIKE 'configuration%' THEN 'configuration table'
                    ELSE part END AS part FROM fresh) f
 WHERE part IN ('function', 'column', 'constraint', 'index', 'type', 'schema', 'sequence', 'configuration table')
 GROUP BY 1 ORDER BY 1;
-- Members of a kind pg_temp.definitions() does not describe would only be compared by name.
SELECT object, definition AS catalog FROM fresh
 WHERE part = 'member' AND definition NOT IN ('pg_class', 'pg_proc', 'pg_type', 'pg_namespace');
SELECT (SELECT count(*) FROM fresh) > 250 AS many_parts, (SELECT count(*) FROM fresh) = (SELECT count(*) FROM upgraded) AS same_count;
-- The differences: none.
SELECT * FROM pg_temp.differences('upgraded', 'only after upgrade');

-- The 0.2.0 stream's data came through, and the current functions see it.
SELECT t, count(*) AS rows_changed_or_lost FROM (
  SELECT t, r FROM before_data
  EXCEPT
  (SELECT 'offsets', to_jsonb(o) - 'updated_at' FROM lakehouse.offsets o
   UNION ALL SELECT 'dead_letters', to_jsonb(d) - 'created_at' FROM lakehouse.dead_letters d
   UNION ALL SELECT 'stream_progress', to_jsonb(p) - 'started_at' - 'committed_at' FROM lakehouse.stream_progress p
   UNION ALL SELECT 'bronze', to_jsonb(b) - 'ingested_at' FROM bronze.old b)) x GROUP BY 1 ORDER BY 1;
SELECT count(*) AS rows_kept FROM before_data;
SELECT stream, kafka_partition, next_offset, state FROM lakehouse.stream_status() ORDER BY 1, 2;
SELECT kafka_key, raw_value, reason FROM lakehouse.dead_letters WHERE stream = 'old';
-- It is still registered: its name cannot be taken by a new stream until it is dropped.
SELECT lakehouse.create_stream('old', 'upgrade.other');
SELECT lakehouse.drop_stream('old', true);
SELECT count(*) AS left_behind FROM lakehouse.offsets WHERE stream = 'old';
SELECT to_regclass('bronze.old') AS bronze_table;

-- An installation from an earlier version's own full install script (0.5.0, the first to
-- ship one), updated, ends the same as a fresh install too.
DROP EXTENSION lakehouse;
CREATE EXTENSION lakehouse VERSION '0.5.0';
ALTER EXTENSION lakehouse UPDATE;
CREATE TEMP TABLE upgraded_from_full AS SELECT * FROM pg_temp.definitions();
SELECT * FROM pg_temp.differences('upgraded_from_full', 'only after 0.5.0 and update');

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
-- The pipeline's own tables and view as the update left them, to compare with a fresh
-- pipeline's below (gold_page_hour's indexes and constraints changed in 0.7.0, the view in
-- 0.4.0, 0.7.0 and 0.11.0, editor_sessions', gold_editor_day's and gold_minute's indexes in
-- 0.8.0, gold_page_hour_unnamed and gold_hour_wiki's statistics came in 0.11.0). A
-- statistics object is compared with its owner and whether it is the extension's (it must
-- not be: the pipeline's objects are its own).
CREATE FUNCTION pg_temp.statistics_object(stx oid) RETURNS text LANGUAGE sql AS $$
  SELECT format('%s, owner %s, owner of its table %s, in the extension %s', pg_get_statisticsobjdef(x.oid), x.stxowner::regrole,
                c.relowner::regrole, EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_statistic_ext'::regclass
                                                                    AND d.objid = x.oid AND d.deptype = 'e'))
    FROM pg_statistic_ext x JOIN pg_class c ON c.oid = x.stxrelid WHERE x.oid = stx
$$;
-- What the update made of the statistics (the comparison below says only "same").
SELECT x.stxname, pg_temp.statistics_object(x.oid) FROM pg_statistic_ext x WHERE x.stxnamespace = 'lakehouse'::regnamespace;
-- The sessions (0.14.0): a table in lakehouse (its columns, options, owner) behind a view
-- in silver, which is not the extension's.
CREATE FUNCTION pg_temp.pipeline_definitions() RETURNS TABLE (kind text, name text, definition text) LANGUAGE sql AS $$
  SELECT 'index' AS kind, i.indexname::text AS name, i.indexdef AS definition FROM pg_indexes i
   WHERE (i.schemaname, i.tablename) IN (('lakehouse', 'gold_page_hour'), ('lakehouse', 'gold_hour_wiki'), ('lakehouse', 'gold_editor_day'), ('lakehouse', 'gold_minute'), ('lakehouse', 'editor_sessions'))
  UNION ALL SELECT 'view', 'gold.top_pages_hourly', pg_get_viewdef('gold.top_pages_hourly'::regclass)
  UNION ALL SELECT 'view', 'silver.editor_sessions', pg_get_viewdef(to_regclass('silver.editor_sessions'))
  UNION ALL SELECT 'relation', c.oid::regclass::text,
                   format('kind %s, options %s, owner %s, columns %s, comment %s, in the extension %s', c.relkind, c.reloptions, c.relowner::regrole,
                          (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || coalesce(col_description(c.oid, a.attnum), '-'), ', ' ORDER BY a.attnum)
                             FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                          obj_description(c.oid, 'pg_class'),
                          EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'))
     FROM pg_class c WHERE c.oid IN (to_regclass('lakehouse.editor_sessions'), to_regclass('silver.editor_sessions'))
  UNION ALL SELECT 'constraint', k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k
   WHERE k.conrelid IN ('lakehouse.gold_page_hour'::regclass, 'lakehouse.gold_minute'::regclass, to_regclass('lakehouse.editor_sessions')) AND k.contype <> 'n'
  UNION ALL SELECT 'statistics', x.stxname, pg_temp.statistics_object(x.oid) FROM pg_statistic_ext x
   WHERE x.stxnamespace IN ('lakehouse'::regnamespace, 'silver'::regnamespace, 'gold'::regnamespace)
$$;
CREATE TEMP TABLE pipeline_upgraded AS SELECT * FROM pg_temp.pipeline_definitions();
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
-- A pipeline declared now has the same indexes and view as the upgraded one had.
SELECT lakehouse.create_recentchange_pipeline('u');
SELECT p.kind, p.name, p.definition = f.definition AS same_after_upgrade
  FROM pipeline_upgraded p FULL JOIN pg_temp.pipeline_definitions() f
    ON f.kind = p.kind AND f.name = p.name
 ORDER BY 1, 2;
SELECT lakehouse.drop_recentchange_pipeline();
SELECT lakehouse.drop_silver('u', true);
SELECT count(*) AS left_behind FROM pg_proc WHERE proname ~ '^silver_(u|edits)_';

-- A pipeline declared under 0.6.0 whose primary key an operator renamed, with a view of the
-- user's own over gold.top_pages_hourly and narrowed privileges: the 0.7.0 update rebuilds
-- gold_page_hour's keys and replaces the view in place, so the user's view, the owner and
-- the privileges stay, and the ranks are what they were.
SET client_min_messages = warning;
DROP EXTENSION lakehouse CASCADE;
RESET client_min_messages;
CREATE EXTENSION lakehouse VERSION '0.6.0';
INSERT INTO lakehouse.streams (name, topic, enabled) VALUES ('u', 'no.such.topic', false);
CREATE TABLE bronze.u (kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL,
  kafka_timestamp timestamptz, kafka_key text, payload jsonb NOT NULL, batch_id bigint NOT NULL,
  ingested_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (kafka_partition, kafka_offset));
CREATE FUNCTION rc_page_batch(b bigint, o bigint, n integer, usr text, title text) RETURNS void LANGUAGE sql AS $$
  SELECT one_row_batch(b, 0, o, jsonb_build_object('meta', jsonb_build_object('id', format('00000000-0000-4000-8000-%s', lpad(n::text, 12, '0')),
                                                                              'dt', '2020-01-01T10:30:00Z'),
                                                   'type', 'edit', 'wiki', 'enwiki', 'title', title, 'user', usr))
$$;
SELECT rc_page_batch(1, 0, 1, 'alice', 'Once'), rc_page_batch(2, 1, 2, 'bob', 'Thrice'), rc_page_batch(3, 2, 3, 'carol', 'Thrice'),
       rc_page_batch(4, 3, 4, 'bob', 'Thrice'), rc_page_batch(5, 4, 5, 'dan', 'Another once'), rc_page_batch(6, 5, 6, NULL, 'By nobody');
SELECT lakehouse.create_recentchange_pipeline('u');
SELECT lakehouse.set_silver_continuous('edits', false);
SELECT rows_out FROM lakehouse.refresh_silver('edits');
ALTER TABLE lakehouse.gold_page_hour RENAME CONSTRAINT gold_page_hour_pkey TO page_hour_key;
CREATE VIEW public.my_top_two AS SELECT title, edits, rank FROM gold.top_pages_hourly WHERE rank <= 2;
REVOKE SELECT ON gold.top_pages_hourly FROM PUBLIC;
GRANT SELECT ON gold.top_pages_hourly TO lakehouse_admin;
CREATE TEMP TABLE view_before AS
  SELECT c.relowner, (SELECT array_agg(title || ' ' || rank ORDER BY rank) FROM gold.top_pages_hourly) AS ranks
    FROM pg_class c WHERE c.oid = 'gold.top_pages_hourly'::regclass;
ALTER EXTENSION lakehouse UPDATE TO '0.7.0';
SELECT title, edits, rank FROM public.my_top_two ORDER BY rank;
SELECT c.relowner = b.relowner AS same_owner,
       (SELECT array_agg(title || ' ' || rank ORDER BY rank) FROM gold.top_pages_hourly) = b.ranks AS same_ranks,
       has_table_privilege('public', 'gold.top_pages_hourly', 'SELECT') AS public_reads,
       has_table_privilege('lakehouse_admin', 'gold.top_pages_hourly', 'SELECT') AS admin_reads,
       NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e') AS not_in_extension
  FROM pg_class c, view_before b WHERE c.oid = 'gold.top_pages_hourly'::regclass;
SELECT k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k WHERE k.conrelid = 'lakehouse.gold_page_hour'::regclass AND k.contype <> 'n' ORDER BY 1;
SELECT indexdef FROM pg_indexes WHERE schemaname = 'lakehouse' AND tablename = 'gold_page_hour' ORDER BY 1;
-- The pass and the check go on with the new keys.
SELECT rc_page_batch(7, 6, 7, 'erin', 'Once'), rc_page_batch(8, 7, 8, 'fay', 'Once'), rc_page_batch(9, 8, 9, 'gus', 'Once');
SELECT rows_out FROM lakehouse.refresh_silver('edits');
SELECT title, edits, rank FROM public.my_top_two ORDER BY rank;
SELECT check_name, passed FROM lakehouse.run_checks() WHERE check_name = 'gold_reconciles:edits';
-- Then to 0.8.0, gold_minute's primary key renamed too: it is rebuilt carrying every column,
-- the sessions and editor-day indexes are added, and passes and checks go on.
ALTER TABLE lakehouse.gold_minute RENAME CONSTRAINT gold_minute_pkey TO minute_key;
ALTER EXTENSION lakehouse UPDATE TO '0.8.0';
SELECT k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k WHERE k.conrelid = 'lakehouse.gold_minute'::regclass AND k.contype <> 'n' ORDER BY 1;
SELECT indexname FROM pg_indexes WHERE (schemaname, tablename) IN (('silver', 'editor_sessions'), ('lakehouse', 'gold_editor_day')) ORDER BY 1;
SELECT rc_page_batch(10, 9, 10, 'erin', 'Thrice'), rc_page_batch(11, 10, 11, 'hal', 'Once');
SELECT rows_out FROM lakehouse.refresh_silver('edits');
SELECT title, edits, rank FROM public.my_top_two ORDER BY rank;
SELECT user_name, edits, sessions FROM gold.editor_activity_daily ORDER BY edits DESC, user_name LIMIT 3;
SELECT check_name, passed FROM lakehouse.run_checks() WHERE check_name = 'gold_reconciles:edits';
-- Then to the current version, gold_hour_wiki owned by another role: the 0.11.0 update
-- gives the statistics it adds the table's owner, and replaces gold.top_pages_hourly in
-- place again (the user's view, the privileges and the ranks stay).
-- The 0.14.0 update moves the sessions behind a view: they stay as they were, closed
-- included (ivy's edit at 12:00, without a title so that the top pages stay, moves the
-- watermark past the 10:30 sessions), and a role the operator let read them still can.
ALTER TABLE lakehouse.gold_hour_wiki OWNER TO lakehouse_admin;
SELECT one_row_batch(12, 0, 11, jsonb_build_object('meta', jsonb_build_object('id', '00000000-0000-4000-8000-000000000012', 'dt', '2020-01-01T12:00:00Z'),
                                                   'type', 'edit', 'wiki', 'enwiki', 'user', 'ivy'));
SELECT rows_out FROM lakehouse.refresh_silver('edits');
-- The sessions table belongs to lakehouse_admin, and two views of the user's own read it:
-- one reads closed, which makes the update fail with its name; once it is dropped, the
-- update goes through and the other view reads on.
CREATE ROLE regress_session_reader;
GRANT SELECT ON silver.editor_sessions TO regress_session_reader;
ALTER TABLE silver.editor_sessions OWNER TO lakehouse_admin;
CREATE VIEW public.my_open_sessions AS SELECT user_name FROM silver.editor_sessions WHERE NOT closed;
CREATE VIEW public.my_session_edits AS SELECT user_name, edits FROM silver.editor_sessions;
CREATE TEMP TABLE sessions_before AS SELECT * FROM silver.editor_sessions;
SELECT count(*) FILTER (WHERE closed) AS closed, count(*) AS sessions FROM sessions_before;
CREATE TEMP TABLE ranks_before AS SELECT array_agg(title || ' ' || rank ORDER BY rank) AS ranks FROM gold.top_pages_hourly;
-- The 0.7.0 update recorded the view's privileges as initial ones (pg_dump leaves those out).
SELECT count(*) AS top_pages_initial_privileges FROM pg_init_privs
 WHERE classoid = 'pg_class'::regclass AND objoid = 'gold.top_pages_hourly'::regclass;
\set VERBOSITY terse
ALTER EXTENSION lakehouse UPDATE;
\set VERBOSITY default
SELECT extversion FROM pg_extension WHERE extname = 'lakehouse';
DROP VIEW public.my_open_sessions;
ALTER EXTENSION lakehouse UPDATE;
SELECT c.relkind, (SELECT count(*) FROM ((TABLE sessions_before EXCEPT SELECT * FROM silver.editor_sessions)
                                         UNION ALL (SELECT * FROM silver.editor_sessions EXCEPT TABLE sessions_before)) d) AS differences,
       has_table_privilege('regress_session_reader', 'silver.editor_sessions', 'SELECT') AS reader_reads,
       c.relowner::regrole AS owner,
       NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e') AS not_in_extension
  FROM pg_class c WHERE c.oid = 'silver.editor_sessions'::regclass;
SELECT (SELECT count(*) FROM public.my_session_edits) = (SELECT count(*) FROM sessions_before) AS own_view_reads_on,
       (SELECT count(*) FROM pg_init_privs WHERE classoid = 'pg_class'::regclass
           AND objoid IN ('silver.editor_sessions'::regclass, 'gold.top_pages_hourly'::regclass)) AS initial_privileges;
-- What regress_session_reader reads, as itself (with the schema's usage, as an operator
-- would grant it).
GRANT USAGE ON SCHEMA silver TO regress_session_reader;
SET ROLE regress_session_reader;
SELECT count(*) FILTER (WHERE closed) AS closed, count(*) AS sessions FROM silver.editor_sessions;
RESET ROLE;
-- Passes go on: ivy edits again at 12:10, which extends her session in place.
SELECT one_row_batch(13, 0, 12, jsonb_build_object('meta', jsonb_build_object('id', '00000000-0000-4000-8000-000000000013', 'dt', '2020-01-01T12:10:00Z'),
                                                   'type', 'edit', 'wiki', 'enwiki', 'user', 'ivy'));
SELECT rows_out FROM lakehouse.refresh_silver('edits');
SELECT session_start, session_end, edits, closed FROM silver.editor_sessions WHERE user_name = 'ivy';
SELECT check_name, passed FROM lakehouse.run_checks() WHERE check_name IN ('gold_reconciles:edits', 'sessions_reconcile:edits') ORDER BY 1;
SELECT x.stxname, x.stxowner::regrole AS owner FROM pg_statistic_ext x WHERE x.stxnamespace = 'lakehouse'::regnamespace;
SELECT title, edits, rank FROM public.my_top_two ORDER BY rank;
SELECT (SELECT array_agg(title || ' ' || rank ORDER BY rank) FROM gold.top_pages_hourly) = b.ranks AS same_ranks,
       has_table_privilege('public', 'gold.top_pages_hourly', 'SELECT') AS public_reads,
       has_table_privilege('lakehouse_admin', 'gold.top_pages_hourly', 'SELECT') AS admin_reads,
       pg_get_viewdef('gold.top_pages_hourly'::regclass) LIKE '%LIMIT ( SELECT NULL::bigint AS int8)%' AS new_definition
  FROM ranks_before b;
DROP VIEW public.my_top_two, public.my_session_edits;
SELECT lakehouse.drop_recentchange_pipeline();
REVOKE USAGE ON SCHEMA silver FROM regress_session_reader;
DROP ROLE regress_session_reader;
DROP FUNCTION rc_page_batch(bigint, bigint, integer, text, text);
DROP FUNCTION u_batch(bigint, integer, bigint, integer, integer), rc_batch(bigint, bigint, integer, text),
              one_row_batch(bigint, integer, bigint, jsonb);
