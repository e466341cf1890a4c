-- lakehouse 0.3.0 -> 0.4.0: silver's watermark runs per Kafka partition.
--
-- Until 0.3.0 a silver table had one watermark: the newest event time seen in bronze
-- commit order, over all partitions, minus the table's watermark. When the stream worker
-- catches up a backlog, one partition's batches can run hours ahead of another's (each
-- partition is read in its own order), and the lagging partition's on-time events were
-- judged against the leading one and dropped as late. Now each partition keeps its own
-- newest event time, and a row is late only when it is behind its own partition's
-- watermark. The table's low watermark (the lowest of its active partitions') closes
-- editor sessions. How and why: README.md, "Bronze to silver".
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.4.0'" to load this file. \quit

-- Per silver table and Kafka partition: that partition's watermark state. Moved only by a
-- pass, in the pass's own transaction.
CREATE TABLE lakehouse.silver_partitions (
    silver          text NOT NULL,
    kafka_partition integer NOT NULL,
    max_event_time  timestamptz,            -- newest event time of a valid row; NULL: none yet
    last_batch_id   bigint NOT NULL,        -- the newest bronze batch that held this partition
    last_batch_committed_at timestamptz NOT NULL,
    PRIMARY KEY (silver, kafka_partition)
);
SELECT pg_catalog.pg_extension_config_dump('lakehouse.silver_partitions', '');
GRANT SELECT ON lakehouse.silver_partitions TO lakehouse_admin;
COMMENT ON TABLE lakehouse.silver_partitions IS
  'per silver table and Kafka partition: the newest event time seen (the partition''s watermark is it minus the table''s watermark)';

-- The low watermark: the lowest watermark of the partitions active in the last
-- <watermark> of bronze commit time; it never goes back. It closes editor sessions.
ALTER TABLE lakehouse.silver_tables ADD COLUMN low_watermark timestamptz;
COMMENT ON COLUMN lakehouse.silver_tables.max_event_time IS 'newest event time seen on time, over all partitions';
COMMENT ON COLUMN lakehouse.silver_tables.low_watermark IS
  'lowest watermark of the partitions that had bronze rows in the last <watermark> of commit time; never goes back';

-- Per pass, each partition's watermark at the start and the oldest event time admitted
-- from it ({"partition": time}): the silver_passes check compares the two.
ALTER TABLE lakehouse.silver_progress ADD COLUMN partition_watermarks jsonb,
                                      ADD COLUMN partition_min_admitted jsonb;
COMMENT ON COLUMN lakehouse.silver_progress.watermark_before IS 'the table''s low watermark at the start of the pass';
COMMENT ON COLUMN lakehouse.silver_progress.watermark IS 'the table''s low watermark after the pass';

-- Tables declared under 0.3.0: each partition starts at the newest event time silver holds
-- from it (looked up in the last day before the table's newest, through silver's primary
-- key); a partition with nothing there starts without history, like a new one.
DO $upgrade$
DECLARE
  t lakehouse.silver_tables;
BEGIN
  FOR t IN SELECT * FROM lakehouse.silver_tables WHERE max_event_time IS NOT NULL ORDER BY name LOOP
    CONTINUE WHEN pg_catalog.to_regclass(pg_catalog.format('silver.%I', t.name)) IS NULL;
    EXECUTE pg_catalog.format($q$
      INSERT INTO lakehouse.silver_partitions (silver, kafka_partition, max_event_time, last_batch_id, last_batch_committed_at)
      SELECT $1, s.kafka_partition, pg_catalog.max(s.%1$I), $2, $3
        FROM silver.%2$I s WHERE s.%1$I >= $4 - interval '1 day' AND s.%1$I <= $4
       GROUP BY s.kafka_partition$q$, t.event_time, t.name)
      USING t.name, t.last_batch_id, coalesce(t.last_batch_committed_at, pg_catalog.now()), t.max_event_time;
  END LOOP;
END $upgrade$;
UPDATE lakehouse.silver_tables SET low_watermark = max_event_time - watermark;

-- Writes the row type and the two functions behind one silver table (see README, "Bronze
-- to silver"); 0.4.0 changes the admit function (late is judged per partition). Both plan
-- every statement for its own rows (plan_cache_mode): after five calls PL/pgSQL may keep a
-- generic plan, which guesses 10 rows for unnest() of a pass's array and joins the pass
-- with itself in a nested loop (a pass of the silver worker, one session, went from 0.2 s
-- to 3 s; quadratic in the pass's rows).
--   lakehouse.silver_<name>_extract: evaluates the declaration over a range of bronze rows.
--     Owned by the extension and SECURITY INVOKER; passes call it through
--     lakehouse._select_array_as with the declaring role's rights, never the superuser's. A
--     row whose expressions raise a data error (a failed cast, a wrong type) becomes a
--     reject with the error text instead of failing the pass: the whole range is tried at
--     once, and only if that fails, in chunks, then row by row.
--   lakehouse.silver_<name>_admit: judges the extracted rows (late, duplicate, new),
--     inserts the new ones and records late rows and rejects, in one statement.
CREATE OR REPLACE FUNCTION lakehouse._silver_generate(t lakehouse.silver_tables)
RETURNS void LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $gen$
DECLARE
  rowtype text := pg_catalog.format('lakehouse.%I', 'silver_' || t.name || '_row');
  extract_fn text := pg_catalog.format('lakehouse.%I', 'silver_' || t.name || '_extract');
  admit_fn text := pg_catalog.format('lakehouse.%I', 'silver_' || t.name || '_admit');
  col lakehouse.silver_column;
  k text;
  type_cols text := '';      -- "c" type, ...
  calc_cols text := '';      -- CASE WHEN taken THEN (expr)::type END AS "c", ...
  x_cols text := '';         -- x."c", ...
  null_cols text := '';      -- NULL, ...
  j_cols text := '';         -- j."c", ...
  ins_cols text := '';       -- "c", ...
  key_match_s text := '';    -- s."k" = j."k" AND ...
  key_match_o text := '';    -- o."k" = j."k" AND ...
  rejects text := '';
  tcol text := pg_catalog.format('%I', t.event_time);
  query text;
BEGIN
  FOREACH col IN ARRAY t.columns LOOP
    type_cols := type_cols || pg_catalog.format(', %I %s', col.name, col.type);
    calc_cols := calc_cols || pg_catalog.format('%sCASE WHEN f.lh_taken THEN (%s)::%s END AS %I',
                                                CASE WHEN calc_cols = '' THEN '' ELSE ', ' END,
                                                col.expr, col.type, col.name);
    x_cols := x_cols || pg_catalog.format(', x.%I', col.name);
    null_cols := null_cols || ', NULL';
    j_cols := j_cols || pg_catalog.format('j.%I, ', col.name);
    ins_cols := ins_cols || pg_catalog.format('%I, ', col.name);
  END LOOP;
  FOREACH k IN ARRAY t.key LOOP
    rejects := rejects || pg_catalog.format(' WHEN x.%I IS NULL THEN %L', k, 'key column ' || k || ' is null');
    key_match_s := key_match_s || pg_catalog.format(' AND s.%I = j.%I', k, k);
    key_match_o := key_match_o || pg_catalog.format(' AND o.%I = j.%I', k, k);
  END LOOP;
  rejects := rejects || pg_catalog.format(' WHEN x.%s IS NULL THEN %L', tcol, 'event time column ' || t.event_time || ' is null')
             || pg_catalog.format(' WHEN NOT pg_catalog.isfinite(x.%s) THEN ''event time '' || x.%s::text || '' is not a finite time''', tcol, tcol)
             || pg_catalog.format(' WHEN x.%s > lh_max_time THEN ''event time '' || x.%s::text || '' is past the future limit '' || lh_max_time::text', tcol, tcol);

  EXECUTE pg_catalog.format('CREATE TYPE %s AS (lh_partition integer, lh_offset bigint, lh_batch bigint, lh_taken boolean, lh_reject text%s)',
                            rowtype, type_cols);

  -- One query text for every range size; @PARTS@ @LOS@ @HIS@ are filled in per use. Each
  -- level is kept apart (OFFSET 0) so that the filter and every expression are evaluated
  -- once per row, not once per reference. No ORDER BY: the admit function orders the rows
  -- itself (bronze commit order), once.
  query := pg_catalog.format($q$
      SELECT ROW(x.kafka_partition, x.kafka_offset, x.batch_id, x.lh_taken,
                 CASE WHEN NOT x.lh_taken THEN NULL %s END%s)::%s
        FROM (SELECT f.kafka_partition, f.kafka_offset, f.batch_id, f.lh_taken, %s
                FROM (SELECT b.*, ((%s) IS TRUE) AS lh_taken
                        FROM unnest(@PARTS@, @LOS@, @HIS@) AS lh_r(lh_rp, lh_rlo, lh_rhi)
                        -- One range scan of bronze's primary key per partition, never all of bronze.
                        CROSS JOIN LATERAL (SELECT * FROM bronze.%I b0
                                             WHERE b0.kafka_partition = lh_r.lh_rp
                                               AND b0.kafka_offset BETWEEN lh_r.lh_rlo AND lh_r.lh_rhi
                                               AND (lh_after IS NULL OR b0.batch_id > lh_after)
                                               AND (lh_upto IS NULL OR b0.batch_id <= lh_upto)
                                             OFFSET 0) b
                      OFFSET 0) f
              OFFSET 0) x$q$,
    rejects, x_cols, rowtype, calc_cols, t.filter, t.stream);

  -- The body is passed as a quoted literal (%L): nothing in an expression can end it.
  -- Owned by the extension's owner and SECURITY INVOKER; passes call it through
  -- lakehouse._select_array_as with the declaring role's rights.
  EXECUTE pg_catalog.format($f$
    CREATE FUNCTION %1$s(lh_after bigint, lh_upto bigint, lh_parts integer[], lh_los bigint[],
                         lh_his bigint[], lh_max_time timestamptz)
    RETURNS %2$s[] LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan
    AS %3$L$f$, extract_fn, rowtype, pg_catalog.format($body$
    #variable_conflict use_column
    DECLARE
      lh_all %2$s[] := '{}';
      lh_i integer;
      lh_lo bigint;
      lh_hi bigint;
      lh_one record;
      lh_chunk constant integer := 1000;
    BEGIN
      -- A data error (a failed cast, a wrong type, a domain's check) is the row's fault: the
      -- row becomes a reject. Any other error (a privilege, a missing table) stops the pass.
      BEGIN
        RETURN ARRAY(%3$s);
      EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
        NULL;   -- some row does not fit the declaration: find it below
      END;
      FOR lh_i IN 1 .. coalesce(array_length(lh_parts, 1), 0) LOOP
        lh_lo := lh_los[lh_i];
        WHILE lh_lo <= lh_his[lh_i] LOOP
          lh_hi := least(lh_lo + lh_chunk - 1, lh_his[lh_i]);
          BEGIN
            lh_all := lh_all || ARRAY(%4$s);
          EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
            FOR lh_one IN SELECT b.kafka_offset, b.batch_id FROM bronze.%5$I b
                           WHERE b.kafka_partition = lh_parts[lh_i] AND b.kafka_offset BETWEEN lh_lo AND lh_hi
                             AND (lh_after IS NULL OR b.batch_id > lh_after) AND (lh_upto IS NULL OR b.batch_id <= lh_upto)
                           ORDER BY b.kafka_offset LOOP
              BEGIN
                lh_all := lh_all || ARRAY(%6$s);
              EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
                lh_all := lh_all || ROW(lh_parts[lh_i], lh_one.kafka_offset, lh_one.batch_id, true, SQLERRM%7$s)::%2$s;
              END;
            END LOOP;
          END;
          lh_lo := lh_hi + 1;
        END LOOP;
      END LOOP;
      RETURN lh_all;
    END $body$,
    extract_fn, rowtype,
    pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(query, '@PARTS@', 'lh_parts'), '@LOS@', 'lh_los'), '@HIS@', 'lh_his'),
    pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(query, '@PARTS@', 'ARRAY[lh_parts[lh_i]]'), '@LOS@', 'ARRAY[lh_lo]'), '@HIS@', 'ARRAY[lh_hi]'),
    t.stream,
    pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(query, '@PARTS@', 'ARRAY[lh_parts[lh_i]]'), '@LOS@', 'ARRAY[lh_one.kafka_offset]'), '@HIS@', 'ARRAY[lh_one.kafka_offset]'),
    null_cols));
  EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s(bigint, bigint, integer[], bigint[], bigint[], timestamptz) FROM PUBLIC',
                            extract_fn);
  EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s(bigint, bigint, integer[], bigint[], bigint[], timestamptz) TO %s',
                            extract_fn, t.owner);

  -- Late: behind its partition's watermark, the newest event time seen so far in that
  -- partition (in offset order, including the row itself, starting from lh_part_max)
  -- minus the table's watermark. A row exactly at the watermark is on time. Partitions are
  -- judged apart: how the stream worker interleaves them in batches (a backlog read
  -- partition by partition) cannot make a row late. A late row whose key is in silver (or
  -- admitted by this pass) is a duplicate, not late.
  EXECUTE pg_catalog.format($f$
    CREATE FUNCTION %1$s(lh_rows %2$s[], lh_part_max jsonb, lh_delay interval, lh_check_late boolean,
                         lh_pass bigint, OUT n_in bigint, OUT n_filtered bigint, OUT n_invalid bigint,
                         OUT n_out bigint, OUT n_dup bigint, OUT n_late bigint, OUT part_max jsonb,
                         OUT part_min_admitted jsonb, OUT min_admitted timestamptz)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan
    AS $body$
    #variable_conflict use_column
    DECLARE
      lh_b timestamptz;
    BEGIN
      -- The partitions the rows need (a late row's too: at worst one empty partition more).
      FOR lh_b IN
        SELECT DISTINCT lakehouse._silver_bucket(r.%4$s, %3$L)
          FROM unnest(lh_rows) r WHERE r.lh_taken AND r.lh_reject IS NULL
      LOOP
        PERFORM lakehouse._silver_ensure_partition(%5$L, lh_b, %3$L);
      END LOOP;

      WITH src AS (SELECT * FROM unnest(lh_rows)),
      lh_before AS (SELECT e.key::integer AS lh_p, e.value::timestamptz AS lh_m0
                   FROM jsonb_each_text(coalesce(lh_part_max, '{}')) e),
      valid AS (SELECT s.*, max(s.%4$s) OVER (PARTITION BY s.lh_partition ORDER BY s.lh_batch, s.lh_offset
                                              ROWS UNBOUNDED PRECEDING) AS lh_m
                  FROM src s WHERE s.lh_taken AND s.lh_reject IS NULL),
      judged AS (SELECT v.*, (lh_check_late AND v.%4$s < greatest(v.lh_m, b.lh_m0) - lh_delay) AS lh_late
                   FROM valid v LEFT JOIN lh_before b ON b.lh_p = v.lh_partition),
      -- Of copies within the pass, the first in bronze commit order is the one admitted
      -- (an anti-join on the key, cheaper than sorting the pass).
      ins AS (INSERT INTO silver.%5$I (%6$s kafka_partition, kafka_offset)
              SELECT %7$s j.lh_partition, j.lh_offset FROM judged j
               WHERE NOT j.lh_late
                 AND NOT EXISTS (SELECT 1 FROM judged o
                                  WHERE NOT o.lh_late AND o.%4$s = j.%4$s %9$s
                                    AND (o.lh_batch, o.lh_partition, o.lh_offset) < (j.lh_batch, j.lh_partition, j.lh_offset))
              ON CONFLICT DO NOTHING RETURNING %4$s AS t, kafka_partition AS p),
      late AS (SELECT j.* FROM judged j
                WHERE j.lh_late
                  AND NOT EXISTS (SELECT 1 FROM silver.%5$I s WHERE s.%4$s = j.%4$s %8$s)
                  AND NOT EXISTS (SELECT 1 FROM judged o WHERE NOT o.lh_late AND o.%4$s = j.%4$s %9$s)),
      rec_late AS (INSERT INTO lakehouse.silver_late (silver, kafka_partition, kafka_offset, event_time, pass_id)
                   SELECT %5$L, l.lh_partition, l.lh_offset, l.%4$s, lh_pass FROM late l RETURNING 1),
      rec_rej AS (INSERT INTO lakehouse.silver_rejects (silver, kafka_partition, kafka_offset, reason, pass_id)
                  SELECT %5$L, s.lh_partition, s.lh_offset, s.lh_reject, lh_pass FROM src s
                   WHERE s.lh_taken AND s.lh_reject IS NOT NULL RETURNING 1)
      SELECT (SELECT count(*) FROM src), (SELECT count(*) FROM src WHERE NOT src.lh_taken),
             (SELECT count(*) FROM rec_rej), (SELECT count(*) FROM ins),
             (SELECT count(*) FROM judged) - (SELECT count(*) FROM ins) - (SELECT count(*) FROM rec_late),
             (SELECT count(*) FROM rec_late),
             (SELECT jsonb_object_agg(m.lh_partition, m.t) FROM (SELECT valid.lh_partition, max(valid.%4$s) AS t
                                                                   FROM valid GROUP BY 1) m),
             (SELECT jsonb_object_agg(m.p, m.t) FROM (SELECT ins.p, min(ins.t) AS t FROM ins GROUP BY 1) m),
             (SELECT min(ins.t) FROM ins)
        INTO n_in, n_filtered, n_invalid, n_out, n_dup, n_late, part_max, part_min_admitted, min_admitted;
    END $body$ $f$,
    admit_fn, rowtype, t.partition_interval, tcol, t.name, ins_cols, j_cols,
    key_match_s, key_match_o);
  EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s(%s[], jsonb, interval, boolean, bigint) FROM PUBLIC',
                            admit_fn, rowtype);
END $gen$;
REVOKE ALL ON FUNCTION lakehouse._silver_generate(lakehouse.silver_tables) FROM PUBLIC;

-- Closes the editor sessions whose end + gap the low watermark has passed: no on-time edit
-- of an active partition can reach them any more. Called by the pass of silver.edits.
CREATE FUNCTION lakehouse._recentchange_close_sessions(low timestamptz, gap interval)
RETURNS void LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
  UPDATE silver.editor_sessions s SET closed = true
   WHERE NOT s.closed AND s.session_end < $1 - $2
$$;
REVOKE ALL ON FUNCTION lakehouse._recentchange_close_sessions(timestamptz, interval) FROM PUBLIC;

CREATE OR REPLACE FUNCTION lakehouse._silver_pass(p_name text)
RETURNS lakehouse.silver_pass_result LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
  t lakehouse.silver_tables;
  started timestamptz := pg_catalog.clock_timestamp();
  first_b bigint;
  upto bigint;
  upto_at timestamptz;
  parts integer[];
  los bigint[];
  his bigint[];
  delay interval;
  pass bigint;
  c record;
  newest timestamptz;
  part_max jsonb;
  low timestamptz;
  res lakehouse.silver_pass_result;
BEGIN
  SELECT * INTO t FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) p_name FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'silver table "%" does not exist', p_name
      USING ERRCODE = 'undefined_object', HINT = 'See SELECT name FROM lakehouse.silver_tables.';
  END IF;
  IF t.last_batch_id > 0 AND NOT EXISTS (
       SELECT 1 FROM lakehouse.stream_progress p
        WHERE p.stream OPERATOR(pg_catalog.=) t.stream AND p.batch_id OPERATOR(pg_catalog.=) t.last_batch_id
          AND p.committed_at OPERATOR(pg_catalog.=) t.last_batch_committed_at) THEN
    RAISE EXCEPTION 'silver table "%" cannot find bronze batch % of stream "%", where its cursor stands', t.name, t.last_batch_id, t.stream
      USING ERRCODE = 'object_not_in_prerequisite_state',
            DETAIL = 'lakehouse.stream_progress no longer holds that batch as it was read, so the batches after the cursor cannot be told from the ones before it.',
            HINT = 'Keep stream_progress rows from the oldest silver cursor on. To start this table again from the beginning of bronze, drop and declare it again.';
  END IF;

  SELECT pg_catalog.min(b.batch_id), pg_catalog.max(b.batch_id) INTO first_b, upto
    FROM (SELECT p.batch_id,
                 pg_catalog.sum(p.messages) OVER (ORDER BY p.batch_id) OPERATOR(pg_catalog.-) p.messages AS before
            FROM lakehouse.stream_progress p
           WHERE p.stream OPERATOR(pg_catalog.=) t.stream AND p.batch_id OPERATOR(pg_catalog.>) t.last_batch_id) b
   WHERE b.before OPERATOR(pg_catalog.<) t.max_rows_per_pass;
  delay := t.watermark;
  IF upto IS NULL THEN
    res := ROW(t.name, NULL, 'pass', 0, 0, 0, 0, 0, 0, t.low_watermark, NULL);
    RETURN res;
  END IF;
  SELECT p.committed_at INTO upto_at FROM lakehouse.stream_progress p
   WHERE p.stream OPERATOR(pg_catalog.=) t.stream AND p.batch_id OPERATOR(pg_catalog.=) upto;

  WITH b AS (SELECT p.first_offsets, p.last_offsets FROM lakehouse.stream_progress p
              WHERE p.stream OPERATOR(pg_catalog.=) t.stream
                AND p.batch_id OPERATOR(pg_catalog.>) t.last_batch_id AND p.batch_id OPERATOR(pg_catalog.<=) upto),
       f AS (SELECT e.key::integer AS k, pg_catalog.min(e.value::bigint) AS v
               FROM b, pg_catalog.jsonb_each_text(b.first_offsets) e GROUP BY 1),
       l AS (SELECT e.key::integer AS k, pg_catalog.max(e.value::bigint) AS v
               FROM b, pg_catalog.jsonb_each_text(b.last_offsets) e GROUP BY 1)
  SELECT pg_catalog.array_agg(f.k ORDER BY f.k), pg_catalog.array_agg(f.v ORDER BY f.k),
         pg_catalog.array_agg(l.v ORDER BY f.k)
    INTO parts, los, his
    FROM f JOIN l ON l.k OPERATOR(pg_catalog.=) f.k;

  -- Each partition's newest event time so far: the admit function judges every row by
  -- its own partition's watermark.
  SELECT pg_catalog.jsonb_object_agg(sp.kafka_partition, sp.max_event_time) INTO part_max
    FROM lakehouse.silver_partitions sp
   WHERE sp.silver OPERATOR(pg_catalog.=) t.name AND sp.max_event_time IS NOT NULL;

  pass := t.last_pass_id OPERATOR(pg_catalog.+) 1;
  -- The declaration's expressions run with its owner's rights (lakehouse._select_array_as).
  EXECUTE pg_catalog.format('SELECT * FROM lakehouse.%I(lakehouse._select_array_as($10, $11, NULL::lakehouse.%I[], $1, $2, $3, $4, $5, $6), $7, $8, true, $9)',
                            'silver_' || t.name || '_admit', 'silver_' || t.name || '_row')
    INTO c
    USING t.last_batch_id, upto, coalesce(parts, '{}'), coalesce(los, '{}'), coalesce(his, '{}'),
          started OPERATOR(pg_catalog.+) t.future_limit, part_max, delay, pass, t.owner::oid,
          pg_catalog.format('SELECT lakehouse.%I($1, $2, $3, $4, $5, $6)', 'silver_' || t.name || '_extract');

  -- Every partition that brought valid rows (an event time): its newest event time, and
  -- the last batch of the pass that held it. A partition whose rows were all filtered out,
  -- invalid or dead letters does not count as active (it says nothing about event time).
  INSERT INTO lakehouse.silver_partitions AS sp (silver, kafka_partition, max_event_time, last_batch_id, last_batch_committed_at)
  SELECT t.name, x.k, (c.part_max OPERATOR(pg_catalog.->>) x.k::text)::timestamptz, x.b, x.at
    FROM (SELECT DISTINCT ON (e.key::integer) e.key::integer AS k, p.batch_id AS b, p.committed_at AS at
            FROM lakehouse.stream_progress p, pg_catalog.jsonb_object_keys(p.first_offsets) e(key)
           WHERE p.stream OPERATOR(pg_catalog.=) t.stream
             AND p.batch_id OPERATOR(pg_catalog.>) t.last_batch_id AND p.batch_id OPERATOR(pg_catalog.<=) upto
           ORDER BY e.key::integer, p.batch_id DESC) x
   WHERE c.part_max OPERATOR(pg_catalog.?) x.k::text
  ON CONFLICT (silver, kafka_partition) DO UPDATE
     SET max_event_time = GREATEST(sp.max_event_time, excluded.max_event_time),
         last_batch_id = excluded.last_batch_id, last_batch_committed_at = excluded.last_batch_committed_at;

  -- The low watermark: the lowest watermark of the partitions that brought valid rows
  -- within one watermark (of bronze commit time) of the newest batch. A partition that has
  -- gone quiet stops holding it back; it never goes back.
  SELECT pg_catalog.min(sp.max_event_time) OPERATOR(pg_catalog.-) delay INTO low
    FROM lakehouse.silver_partitions sp
   WHERE sp.silver OPERATOR(pg_catalog.=) t.name AND sp.max_event_time IS NOT NULL
     AND sp.last_batch_committed_at OPERATOR(pg_catalog.>=) (upto_at OPERATOR(pg_catalog.-) delay);
  low := GREATEST(t.low_watermark, low);
  -- The recentchange pipeline's sessions close as soon as the low watermark passes them.
  IF t.session_gap IS NOT NULL AND low IS NOT NULL THEN
    PERFORM lakehouse._recentchange_close_sessions(low, t.session_gap);
  END IF;
  newest := GREATEST(t.max_event_time, (SELECT pg_catalog.max(v.value::timestamptz)
                                          FROM pg_catalog.jsonb_each_text(c.part_max) v));
  UPDATE lakehouse.silver_tables s
     SET last_batch_id = upto, last_batch_committed_at = upto_at, max_event_time = newest, low_watermark = low,
         last_pass_id = pass
   WHERE s.name OPERATOR(pg_catalog.=) t.name;
  INSERT INTO lakehouse.silver_progress (silver, pass_id, kind, first_batch_id, last_batch_id, rows_in, rows_out,
                                         duplicates_dropped, late_dropped, invalid, filtered, watermark_before,
                                         watermark, min_admitted, partition_watermarks, partition_min_admitted,
                                         started_at, committed_at)
  VALUES (t.name, pass, 'pass', first_b, upto, c.n_in, c.n_out, c.n_dup, c.n_late, c.n_invalid, c.n_filtered,
          t.low_watermark, low, c.min_admitted,
          (SELECT pg_catalog.jsonb_object_agg(e.key, e.value::timestamptz OPERATOR(pg_catalog.-) delay)
             FROM pg_catalog.jsonb_each_text(part_max) e),
          c.part_min_admitted, started, pg_catalog.clock_timestamp());
  res := ROW(t.name, pass, 'pass', c.n_in, c.n_out, c.n_dup, c.n_late, c.n_invalid, c.n_filtered, low, NULL);
  RETURN res;
END $$;
REVOKE ALL ON FUNCTION lakehouse._silver_pass(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION lakehouse.replay_late(name text, from_time timestamptz, to_time timestamptz)
RETURNS lakehouse.silver_pass_result LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  t lakehouse.silver_tables;
  started timestamptz := pg_catalog.clock_timestamp();
  parts integer[];
  offs bigint[];
  gone bigint;
  delay interval;
  pass bigint;
  c record;
  res lakehouse.silver_pass_result;
BEGIN
  IF name IS NULL OR from_time IS NULL OR to_time IS NULL THEN
    RAISE EXCEPTION 'name, from_time and to_time must not be null' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF from_time >= to_time THEN
    RAISE EXCEPTION 'from_time must be before to_time' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT * INTO t FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) replay_late.name FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'silver table "%" does not exist', name
      USING ERRCODE = 'undefined_object', HINT = 'See SELECT name FROM lakehouse.silver_tables.';
  END IF;
  delay := t.watermark;
  -- Late rows whose bronze row is gone (bronze retention) cannot be replayed: said, left as they are.
  EXECUTE pg_catalog.format($q$
    SELECT pg_catalog.array_agg(l.kafka_partition ORDER BY l.kafka_partition, l.kafka_offset) FILTER (WHERE b.kafka_offset IS NOT NULL),
           pg_catalog.array_agg(l.kafka_offset ORDER BY l.kafka_partition, l.kafka_offset) FILTER (WHERE b.kafka_offset IS NOT NULL),
           pg_catalog.count(*) FILTER (WHERE b.kafka_offset IS NULL)
      FROM lakehouse.silver_late l
      LEFT JOIN bronze.%I b ON b.kafka_partition = l.kafka_partition AND b.kafka_offset = l.kafka_offset
     WHERE l.silver = $1 AND l.replayed_in IS NULL AND l.event_time >= $2 AND l.event_time < $3$q$, t.stream)
    INTO parts, offs, gone USING t.name, from_time, to_time;
  IF gone > 0 THEN
    RAISE WARNING '% late rows of silver table "%" in that range are no longer in bronze.% and cannot be replayed', gone, t.name, t.stream
      USING HINT = 'Bronze retention removed them; they stay listed in lakehouse.silver_late.';
  END IF;
  IF parts IS NULL THEN
    res := ROW(t.name, NULL, 'replay', 0, 0, 0, 0, 0, 0, t.low_watermark, NULL);
    RETURN res;
  END IF;
  pass := t.last_pass_id OPERATOR(pg_catalog.+) 1;
  -- Each late row is a range of one offset; no watermark this time, the key still decides.
  EXECUTE pg_catalog.format('SELECT * FROM lakehouse.%I(lakehouse._select_array_as($6, $7, NULL::lakehouse.%I[], NULL, NULL, $1, $2, $2, $3), NULL, $4, false, $5)',
                            'silver_' || t.name || '_admit', 'silver_' || t.name || '_row')
    INTO c
    USING parts, offs, 'infinity'::timestamptz, delay, pass, t.owner::oid,
          pg_catalog.format('SELECT lakehouse.%I($1, $2, $3, $4, $5, $6)', 'silver_' || t.name || '_extract');
  UPDATE lakehouse.silver_late l SET replayed_in = pass
    FROM unnest(parts, offs) AS r(p, o)
   WHERE l.silver OPERATOR(pg_catalog.=) t.name AND l.kafka_partition OPERATOR(pg_catalog.=) r.p
     AND l.kafka_offset OPERATOR(pg_catalog.=) r.o;
  UPDATE lakehouse.silver_tables s SET last_pass_id = pass WHERE s.name OPERATOR(pg_catalog.=) t.name;
  INSERT INTO lakehouse.silver_progress (silver, pass_id, kind, rows_in, rows_out, duplicates_dropped,
                                         late_dropped, invalid, filtered, watermark_before, watermark, min_admitted,
                                         started_at, committed_at)
  VALUES (t.name, pass, 'replay', c.n_in, c.n_out, c.n_dup, c.n_late, c.n_invalid, c.n_filtered,
          t.low_watermark, t.low_watermark, c.min_admitted, started, pg_catalog.clock_timestamp());
  res := ROW(t.name, pass, 'replay', c.n_in, c.n_out, c.n_dup, c.n_late, c.n_invalid, c.n_filtered,
             t.low_watermark, NULL);
  RETURN res;
END $$;

CREATE OR REPLACE FUNCTION lakehouse.drop_silver(name text, drop_data boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  t lakehouse.silver_tables;
BEGIN
  IF name IS NULL OR drop_data IS NULL THEN
    RAISE EXCEPTION 'name and drop_data must not be null' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  SELECT * INTO t FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) drop_silver.name FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'silver table "%" does not exist', name
      USING ERRCODE = 'undefined_object', HINT = 'See SELECT name FROM lakehouse.silver_tables.';
  END IF;
  EXECUTE pg_catalog.format('DROP FUNCTION IF EXISTS lakehouse.%I', 'silver_' || t.name || '_admit');
  EXECUTE pg_catalog.format('DROP FUNCTION IF EXISTS lakehouse.%I', 'silver_' || t.name || '_extract');
  EXECUTE pg_catalog.format('DROP TYPE IF EXISTS lakehouse.%I', 'silver_' || t.name || '_row');
  DELETE FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) t.name;
  DELETE FROM lakehouse.silver_late l WHERE l.silver OPERATOR(pg_catalog.=) t.name;
  DELETE FROM lakehouse.silver_rejects r WHERE r.silver OPERATOR(pg_catalog.=) t.name;
  DELETE FROM lakehouse.silver_progress p WHERE p.silver OPERATOR(pg_catalog.=) t.name;
  DELETE FROM lakehouse.silver_partitions p WHERE p.silver OPERATOR(pg_catalog.=) t.name;
  DELETE FROM lakehouse.check_state c WHERE c.check_name OPERATOR(pg_catalog.=) ('silver_passes:' || t.name);
  -- The bronze read access granted for this declaration, unless another one of the same
  -- owner over the same stream still needs it.
  IF t.granted_select AND NOT EXISTS (SELECT 1 FROM lakehouse.silver_tables o
                                       WHERE o.stream = t.stream AND o.owner = t.owner) THEN
    EXECUTE pg_catalog.format('REVOKE SELECT ON bronze.%I FROM %s', t.stream, t.owner);
  END IF;
  IF drop_data THEN
    EXECUTE pg_catalog.format('DROP TABLE IF EXISTS silver.%I', t.name);
  END IF;
END $$;

CREATE OR REPLACE FUNCTION lakehouse._check_silver_passes(t lakehouse.silver_tables, OUT passed boolean, OUT detail text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  cname text := 'silver_passes:' || t.name;
  from_pass bigint;
  upto_pass bigint;
  n_passes bigint;
  unbalanced bigint;
  behind bigint;
  read_rows bigint;
  first_b bigint;
  last_b bigint;
  bronze_rows bigint;
  problems text[] := '{}';
BEGIN
  SELECT c.position INTO from_pass FROM lakehouse.check_state c WHERE c.check_name = cname AND c.kafka_partition = -1;
  from_pass := coalesce(from_pass, 0);
  SELECT pg_catalog.max(p.pass_id), pg_catalog.count(*),
         pg_catalog.count(*) FILTER (WHERE p.rows_in <> p.filtered + p.invalid + p.rows_out + p.duplicates_dropped + p.late_dropped),
         pg_catalog.count(*) FILTER (WHERE p.kind = 'pass' AND EXISTS (
           SELECT 1 FROM pg_catalog.jsonb_each_text(p.partition_min_admitted) a
             JOIN pg_catalog.jsonb_each_text(p.partition_watermarks) w ON w.key = a.key
            WHERE a.value::timestamptz < w.value::timestamptz)),
         coalesce(pg_catalog.sum(p.rows_in) FILTER (WHERE p.kind = 'pass'), 0),
         pg_catalog.min(p.first_batch_id), pg_catalog.max(p.last_batch_id)
    INTO upto_pass, n_passes, unbalanced, behind, read_rows, first_b, last_b
    FROM lakehouse.silver_progress p WHERE p.silver = t.name AND p.pass_id > from_pass;
  IF unbalanced > 0 THEN
    problems := problems || pg_catalog.format('%s passes whose counts do not add up to rows_in', unbalanced);
  END IF;
  IF behind > 0 THEN
    problems := problems || pg_catalog.format('%s passes admitted an event time behind the watermark its partition had when they started', behind);
  END IF;
  IF first_b IS NOT NULL THEN
    EXECUTE pg_catalog.format($q$
      WITH b AS (SELECT p.first_offsets, p.last_offsets FROM lakehouse.stream_progress p
                  WHERE p.stream = $1 AND p.batch_id BETWEEN $2 AND $3),
           f AS (SELECT e.key::integer AS k, pg_catalog.min(e.value::bigint) AS v FROM b, pg_catalog.jsonb_each_text(b.first_offsets) e GROUP BY 1),
           l AS (SELECT e.key::integer AS k, pg_catalog.max(e.value::bigint) AS v FROM b, pg_catalog.jsonb_each_text(b.last_offsets) e GROUP BY 1)
      SELECT coalesce(pg_catalog.sum((SELECT count(*) FROM bronze.%I x
                                       WHERE x.kafka_partition = f.k AND x.kafka_offset BETWEEN f.v AND l.v
                                         AND x.batch_id BETWEEN $2 AND $3)), 0)
        FROM f JOIN l ON l.k = f.k$q$, t.stream)
      INTO bronze_rows USING t.stream, first_b, last_b;
    IF bronze_rows <> read_rows THEN
      problems := problems || pg_catalog.format('bronze batches %s to %s hold %s rows; the passes read %s', first_b, last_b, bronze_rows, read_rows);
    END IF;
  END IF;
  passed := pg_catalog.cardinality(problems) = 0;
  IF passed AND upto_pass IS NOT NULL THEN
    INSERT INTO lakehouse.check_state (check_name, kafka_partition, position) VALUES (cname, -1, upto_pass)
    ON CONFLICT (check_name, kafka_partition) DO UPDATE SET position = excluded.position;
  END IF;
  detail := CASE WHEN passed THEN pg_catalog.format('%s new passes: counts balance, %s bronze rows read once, none admitted behind the watermark',
                                                    n_passes, read_rows)
                 ELSE pg_catalog.array_to_string(problems, '; ') END;
END $$;

CREATE OR REPLACE FUNCTION lakehouse._recentchange_on_admit()
RETURNS trigger LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
DECLARE
  gap interval;
  t lakehouse.silver_tables;
  wm timestamptz;
  olds silver.editor_sessions[];
BEGIN
  SELECT * INTO t FROM lakehouse.silver_tables s WHERE s.name = 'edits';
  -- The gap and the watermark were fixed when the pipeline was declared. Sessions close by
  -- the table's low watermark as this pass found it (the lowest of its active partitions'
  -- watermarks): no on-time row of an active partition is behind it.
  gap := t.session_gap;
  wm := t.low_watermark;

  -- Edits per minute and wiki.
  INSERT INTO lakehouse.gold_minute AS g (minute, wiki, edits, new_pages, bot_edits, human_edits, bytes_added, bytes_removed)
  SELECT pg_catalog.date_trunc('minute', n.event_time, 'UTC'), n.wiki, pg_catalog.count(*),
         pg_catalog.count(*) FILTER (WHERE n.type = 'new'),
         pg_catalog.count(*) FILTER (WHERE n.is_bot), pg_catalog.count(*) FILTER (WHERE NOT coalesce(n.is_bot, false)),
         coalesce(pg_catalog.sum(GREATEST(n.d, 0)), 0), coalesce(pg_catalog.sum(GREATEST(-n.d, 0)), 0)
    FROM (SELECT r.*, coalesce(r.length_new, 0) - coalesce(r.length_old, 0) AS d FROM new_rows r) n
   WHERE n.wiki IS NOT NULL
   GROUP BY 1, 2
  ON CONFLICT (minute, wiki) DO UPDATE
     SET edits = g.edits + excluded.edits,
         new_pages = g.new_pages + excluded.new_pages,
         bot_edits = g.bot_edits + excluded.bot_edits,
         human_edits = g.human_edits + excluded.human_edits,
         bytes_added = g.bytes_added + excluded.bytes_added,
         bytes_removed = g.bytes_removed + excluded.bytes_removed;

  -- Pages per hour: edits, and distinct editors counted exactly through the page-hour's
  -- sorted list of editor names (nearly every page-hour is new in a pass: one insert).
  INSERT INTO lakehouse.gold_page_hour AS g (hour, wiki, title, edits, editors, editor_names)
  SELECT pg_catalog.date_trunc('hour', n.event_time, 'UTC'), n.wiki, n.title, pg_catalog.count(*),
         pg_catalog.count(DISTINCT n.user_name),
         coalesce(pg_catalog.array_agg(DISTINCT n.user_name) FILTER (WHERE n.user_name IS NOT NULL), '{}')
    FROM new_rows n WHERE n.wiki IS NOT NULL AND n.title IS NOT NULL
   GROUP BY 1, 2, 3
  ON CONFLICT (hour, wiki, title) DO UPDATE
     SET edits = g.edits + excluded.edits,
         (editors, editor_names) = (SELECT pg_catalog.count(*), coalesce(pg_catalog.array_agg(u.name ORDER BY u.name), '{}')
                                      FROM (SELECT DISTINCT x.name
                                              FROM unnest(g.editor_names || excluded.editor_names) AS x(name)) u);
  INSERT INTO lakehouse.gold_hour_wiki (hour, wiki)
  SELECT DISTINCT pg_catalog.date_trunc('hour', n.event_time, 'UTC'), n.wiki
    FROM new_rows n WHERE n.wiki IS NOT NULL AND n.title IS NOT NULL
  ON CONFLICT DO NOTHING;

  -- Sessions. Every session of a touched (wiki, user) that lies within the gap of a new
  -- edit is taken out and merged again with the new edits (gaps and islands: a new
  -- session starts where an edit starts more than the gap after everything before it). A
  -- late edit replayed into a closed session, or one that bridges two sessions, merges
  -- them. Sessions farther than the gap from every new edit cannot change.
  WITH keys AS (SELECT n.wiki, n.user_name,
                       pg_catalog.min(n.event_time) - gap AS lo,
                       pg_catalog.max(n.event_time) + gap AS hi
                  FROM new_rows n WHERE n.wiki IS NOT NULL AND n.user_name IS NOT NULL GROUP BY 1, 2),
       gone AS (DELETE FROM silver.editor_sessions s USING keys k
                WHERE s.wiki = k.wiki AND s.user_name = k.user_name
                  AND s.session_start <= k.hi AND s.session_end >= k.lo
               RETURNING s.*)
  SELECT pg_catalog.array_agg(gone) INTO olds FROM gone;

  WITH gone AS (SELECT * FROM unnest(coalesce(olds, '{}'))),
       items AS (SELECT o.wiki, o.user_name, o.session_start AS s, o.session_end AS e, o.edits AS n, o.bytes_changed AS b FROM gone o
                 UNION ALL
                 SELECT n.wiki, n.user_name, n.event_time, n.event_time, 1,
                        pg_catalog.abs(coalesce(n.length_new, 0) - coalesce(n.length_old, 0))
                   FROM new_rows n WHERE n.wiki IS NOT NULL AND n.user_name IS NOT NULL),
       marked AS (SELECT i.*, CASE WHEN i.s >
                                        (pg_catalog.max(i.e) OVER (PARTITION BY i.wiki, i.user_name ORDER BY i.s, i.e
                                                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                                         + gap)
                                   THEN 1 ELSE 0 END AS brk
                    FROM items i),
       grouped AS (SELECT m.*, pg_catalog.sum(m.brk) OVER (PARTITION BY m.wiki, m.user_name ORDER BY m.s, m.e
                                                           ROWS UNBOUNDED PRECEDING) AS grp
                     FROM marked m),
       merged AS (SELECT g.wiki, g.user_name, pg_catalog.min(g.s) AS s, pg_catalog.max(g.e) AS e,
                         pg_catalog.sum(g.n) AS n, pg_catalog.sum(g.b) AS b
                    FROM grouped g GROUP BY g.wiki, g.user_name, g.grp),
       ins AS (INSERT INTO silver.editor_sessions (wiki, user_name, session_start, session_end, edits, bytes_changed, closed)
               SELECT m.wiki, m.user_name, m.s, m.e, m.n, m.b, coalesce((m.e + gap) < wm, false)
                 FROM merged m
               RETURNING *),
       delta AS (SELECT (o.session_start AT TIME ZONE 'UTC')::date AS day, o.wiki, o.user_name, -1 AS k,
                        pg_catalog.floor(pg_catalog.date_part('epoch', o.session_end - o.session_start))::bigint AS len,
                        o.edits AS n
                   FROM gone o
                 UNION ALL
                 SELECT (i.session_start AT TIME ZONE 'UTC')::date, i.wiki, i.user_name, 1,
                        pg_catalog.floor(pg_catalog.date_part('epoch', i.session_end - i.session_start))::bigint,
                        i.edits
                   FROM ins i),
       -- Editors per day: the new edits, the bot flag and the sessions' change, in one upsert.
       per_editor AS (INSERT INTO lakehouse.gold_editor_day AS g (day, wiki, user_name, edits, sessions, is_bot)
                      SELECT e.day, e.wiki, e.user_name, pg_catalog.sum(e.edits), pg_catalog.sum(e.sessions),
                             pg_catalog.bool_or(e.is_bot)
                        FROM (SELECT d.day, d.wiki, d.user_name, 0 AS edits, d.k AS sessions, false AS is_bot FROM delta d
                              UNION ALL
                              SELECT (n.event_time AT TIME ZONE 'UTC')::date, n.wiki, n.user_name, 1, 0, coalesce(n.is_bot, false)
                                FROM new_rows n WHERE n.wiki IS NOT NULL AND n.user_name IS NOT NULL) e
                       GROUP BY 1, 2, 3
                      ON CONFLICT (day, wiki, user_name) DO UPDATE
                         SET edits = g.edits + excluded.edits, sessions = g.sessions + excluded.sessions,
                             is_bot = g.is_bot OR excluded.is_bot
                      RETURNING 1)
  INSERT INTO lakehouse.gold_session_length_day AS g (day, length_s, sessions, edits)
  SELECT d.day, d.len, pg_catalog.sum(d.k), pg_catalog.sum(d.k * d.n) FROM delta d GROUP BY 1, 2
  ON CONFLICT (day, length_s) DO UPDATE
     SET sessions = g.sessions + excluded.sessions,
         edits = g.edits + excluded.edits;

  -- Sessions that the low watermark passes are closed by the pass once it has moved it
  -- (lakehouse._recentchange_close_sessions).
  RETURN NULL;
END $$;

-- Removes what create_recentchange_pipeline() made, data included.
CREATE OR REPLACE FUNCTION lakehouse.drop_recentchange_pipeline()
RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  -- The registry row first, as a pass takes it first: a running pass finishes before this.
  PERFORM 1 FROM lakehouse.silver_tables s WHERE s.name = 'edits' FOR UPDATE;
  DROP VIEW IF EXISTS gold.edits_per_minute, gold.top_pages_hourly, gold.editor_activity_daily, gold.session_stats_daily;
  DROP TABLE IF EXISTS lakehouse.gold_minute, lakehouse.gold_page_hour, lakehouse.gold_hour_wiki,
                       lakehouse.gold_editor_day, lakehouse.gold_session_length_day, silver.editor_sessions;
  IF EXISTS (SELECT 1 FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) 'edits') THEN
    PERFORM lakehouse.drop_silver('edits', true);
  END IF;
END $$;



-- gold.top_pages_hourly: for each (hour, wiki) the pages in rank order, ranked apart (a
-- LATERAL subquery per pair, no PARTITION BY), so that a filter rank <= N becomes the
-- window's run condition and each pair's index scan stops after N entries: a top-10 over
-- a day reads 10 entries per hour and wiki, not every page of the day.
CREATE FUNCTION lakehouse._recentchange_top_pages_view()
RETURNS void LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  CREATE VIEW gold.top_pages_hourly AS
    SELECT w.hour, w.wiki, p.title, p.edits, p.distinct_editors, p.rank
      FROM lakehouse.gold_hour_wiki w
     CROSS JOIN LATERAL (
       SELECT g.title, g.edits, g.editors AS distinct_editors,
              pg_catalog.row_number() OVER (ORDER BY g.edits DESC, g.editors DESC, g.title) AS rank
         FROM lakehouse.gold_page_hour g
        WHERE g.hour OPERATOR(pg_catalog.=) w.hour AND g.wiki OPERATOR(pg_catalog.=) w.wiki) p;
  COMMENT ON VIEW gold.top_pages_hourly IS 'per hour (UTC) and wiki: pages by edits; filter on hour (and rank) for a top list';
  COMMENT ON COLUMN gold.top_pages_hourly.hour IS 'start of the hour, by event time';
  COMMENT ON COLUMN gold.top_pages_hourly.wiki IS 'wiki database name';
  COMMENT ON COLUMN gold.top_pages_hourly.title IS 'page title';
  COMMENT ON COLUMN gold.top_pages_hourly.edits IS 'edits and creations of the page in the hour';
  COMMENT ON COLUMN gold.top_pages_hourly.distinct_editors IS 'distinct users who edited it in the hour (exact)';
  COMMENT ON COLUMN gold.top_pages_hourly.rank IS '1 = most edited page of that wiki in that hour; ties broken by distinct editors, then title';
  GRANT SELECT ON gold.top_pages_hourly TO PUBLIC;
END $$;
REVOKE ALL ON FUNCTION lakehouse._recentchange_top_pages_view() FROM PUBLIC;

-- Sessions, the aggregate tables and the four gold views; called once by
-- create_recentchange_pipeline() after silver.edits exists.
CREATE OR REPLACE FUNCTION lakehouse._recentchange_create_gold()
RETURNS void LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  CREATE TABLE silver.editor_sessions (
      wiki          text NOT NULL,
      user_name     text NOT NULL,
      session_start timestamptz NOT NULL,
      session_end   timestamptz NOT NULL,
      edits         integer NOT NULL,
      bytes_changed bigint NOT NULL,
      closed        boolean NOT NULL,
      PRIMARY KEY (wiki, user_name, session_start));
  CREATE INDEX editor_sessions_open ON silver.editor_sessions (session_end) WHERE NOT closed;
  COMMENT ON TABLE silver.editor_sessions IS
    'per wiki and user, consecutive edits with gaps of at most lakehouse.session_gap; kept by each silver pass over silver.edits';
  COMMENT ON COLUMN silver.editor_sessions.session_start IS 'event time of the first edit';
  COMMENT ON COLUMN silver.editor_sessions.session_end IS 'event time of the last edit';
  COMMENT ON COLUMN silver.editor_sessions.edits IS 'edits (and page creations) in the session';
  COMMENT ON COLUMN silver.editor_sessions.bytes_changed IS 'sum over its edits of |length_new - length_old|';
  COMMENT ON COLUMN silver.editor_sessions.closed IS 'the watermark has passed session_end + session_gap: no on-time edit can extend it';

  CREATE TABLE lakehouse.gold_minute (
      minute timestamptz NOT NULL, wiki text NOT NULL, edits bigint NOT NULL, new_pages bigint NOT NULL,
      bot_edits bigint NOT NULL, human_edits bigint NOT NULL, bytes_added bigint NOT NULL, bytes_removed bigint NOT NULL,
      PRIMARY KEY (minute, wiki));
  -- editor_names: who edited the page in the hour (sorted, distinct), so that distinct
  -- editors stay exact as passes add edits; editors is its length.
  CREATE TABLE lakehouse.gold_page_hour (
      hour timestamptz NOT NULL, wiki text NOT NULL, title text NOT NULL, edits bigint NOT NULL, editors bigint NOT NULL,
      editor_names text[] NOT NULL, PRIMARY KEY (hour, wiki, title));
  -- The order of gold.top_pages_hourly's rank: a top-N query reads the first N entries
  -- of each (hour, wiki) and stops (PostgreSQL 15 ends a row_number() <= N scan early).
  CREATE INDEX gold_page_hour_top ON lakehouse.gold_page_hour (hour, wiki, edits DESC, editors DESC, title);
  -- The (hour, wiki) pairs of gold_page_hour: gold.top_pages_hourly ranks the pages of
  -- each pair apart, so that a top-N query over a day reads N entries per pair.
  CREATE TABLE lakehouse.gold_hour_wiki (hour timestamptz NOT NULL, wiki text NOT NULL, PRIMARY KEY (hour, wiki));
  CREATE TABLE lakehouse.gold_editor_day (
      day date NOT NULL, wiki text NOT NULL, user_name text NOT NULL, edits bigint NOT NULL, sessions bigint NOT NULL,
      is_bot boolean NOT NULL, PRIMARY KEY (day, wiki, user_name));
  CREATE TABLE lakehouse.gold_session_length_day (
      day date NOT NULL, length_s bigint NOT NULL, sessions bigint NOT NULL, edits bigint NOT NULL,
      PRIMARY KEY (day, length_s));
  COMMENT ON TABLE lakehouse.gold_minute IS 'behind gold.edits_per_minute; kept by the silver pass';
  COMMENT ON TABLE lakehouse.gold_page_hour IS 'behind gold.top_pages_hourly; kept by the silver pass';
  COMMENT ON TABLE lakehouse.gold_hour_wiki IS 'the (hour, wiki) pairs of gold_page_hour, behind gold.top_pages_hourly';
  COMMENT ON TABLE lakehouse.gold_editor_day IS 'behind gold.editor_activity_daily; kept by the silver pass';
  COMMENT ON TABLE lakehouse.gold_session_length_day IS 'sessions per day and length in seconds, behind gold.session_stats_daily';

  CREATE TRIGGER recentchange_gold AFTER INSERT ON silver.edits
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION lakehouse._recentchange_on_admit();

  CREATE VIEW gold.edits_per_minute AS
    SELECT g.minute, g.wiki, g.edits, g.new_pages, g.bot_edits, g.human_edits, g.bytes_added, g.bytes_removed
      FROM lakehouse.gold_minute g;
  COMMENT ON VIEW gold.edits_per_minute IS 'per minute (UTC) and wiki: edits and page creations in silver.edits';
  COMMENT ON COLUMN gold.edits_per_minute.minute IS 'start of the minute, by event time';
  COMMENT ON COLUMN gold.edits_per_minute.wiki IS 'wiki database name, such as enwiki';
  COMMENT ON COLUMN gold.edits_per_minute.edits IS 'edits and page creations';
  COMMENT ON COLUMN gold.edits_per_minute.new_pages IS 'page creations (type new)';
  COMMENT ON COLUMN gold.edits_per_minute.bot_edits IS 'edits by accounts flagged as bots';
  COMMENT ON COLUMN gold.edits_per_minute.human_edits IS 'edits by everyone else';
  COMMENT ON COLUMN gold.edits_per_minute.bytes_added IS 'sum of length_new - length_old over edits that grew a page';
  COMMENT ON COLUMN gold.edits_per_minute.bytes_removed IS 'sum of length_old - length_new over edits that shrank a page';

  PERFORM lakehouse._recentchange_top_pages_view();

  CREATE VIEW gold.editor_activity_daily AS
    SELECT g.day, g.wiki, g.user_name, g.edits, g.sessions, g.is_bot FROM lakehouse.gold_editor_day g;
  COMMENT ON VIEW gold.editor_activity_daily IS 'per day (UTC), wiki and user: edits, sessions started, bot flag';
  COMMENT ON COLUMN gold.editor_activity_daily.day IS 'UTC day, by event time';
  COMMENT ON COLUMN gold.editor_activity_daily.wiki IS 'wiki database name';
  COMMENT ON COLUMN gold.editor_activity_daily.user_name IS 'user name (or IP address for anonymous edits)';
  COMMENT ON COLUMN gold.editor_activity_daily.edits IS 'edits and page creations that day';
  COMMENT ON COLUMN gold.editor_activity_daily.sessions IS 'editor sessions that started that day (open ones included)';
  COMMENT ON COLUMN gold.editor_activity_daily.is_bot IS 'any edit that day came from a bot-flagged account';

  CREATE VIEW gold.session_stats_daily AS
    SELECT d.day, d.sessions, d.edits_per_session,
           (SELECT l.length_s FROM (SELECT x.length_s, pg_catalog.sum(x.sessions) OVER (ORDER BY x.length_s) AS cum
                                      FROM lakehouse.gold_session_length_day x
                                     WHERE x.day = d.day AND x.sessions > 0) l
             WHERE l.cum >= (0.5 * d.sessions) ORDER BY l.length_s LIMIT 1) AS median_length_s,
           (SELECT l.length_s FROM (SELECT x.length_s, pg_catalog.sum(x.sessions) OVER (ORDER BY x.length_s) AS cum
                                      FROM lakehouse.gold_session_length_day x
                                     WHERE x.day = d.day AND x.sessions > 0) l
             WHERE l.cum >= (0.9 * d.sessions) ORDER BY l.length_s LIMIT 1) AS p90_length_s
      FROM (SELECT x.day, pg_catalog.sum(x.sessions) AS sessions,
                   pg_catalog.round(pg_catalog.sum(x.edits)::numeric / NULLIF(pg_catalog.sum(x.sessions), 0), 2) AS edits_per_session
              FROM lakehouse.gold_session_length_day x GROUP BY x.day) d
     WHERE d.sessions > 0;
  COMMENT ON VIEW gold.session_stats_daily IS 'per day (UTC): editor sessions started that day and their lengths (open sessions at their current length)';
  COMMENT ON COLUMN gold.session_stats_daily.day IS 'UTC day of the sessions'' first edits';
  COMMENT ON COLUMN gold.session_stats_daily.sessions IS 'sessions started that day';
  COMMENT ON COLUMN gold.session_stats_daily.edits_per_session IS 'mean edits per session';
  COMMENT ON COLUMN gold.session_stats_daily.median_length_s IS 'median session length in seconds (last edit - first edit; 0 for one edit), exact';
  COMMENT ON COLUMN gold.session_stats_daily.p90_length_s IS '90th percentile of session length in seconds, exact';

  GRANT SELECT ON gold.edits_per_minute, gold.top_pages_hourly, gold.editor_activity_daily,
                  gold.session_stats_daily TO PUBLIC;
  GRANT SELECT ON silver.editor_sessions TO lakehouse_admin;
END $$;
REVOKE ALL ON FUNCTION lakehouse._recentchange_create_gold() FROM PUBLIC;

-- Gold reconciles with silver (as in 0.3.0), and since 0.4.0 also: every (hour, wiki) of
-- gold_page_hour in the window is in gold_hour_wiki, without which gold.top_pages_hourly
-- would leave that hour's pages out.
CREATE OR REPLACE FUNCTION lakehouse._check_gold(OUT passed boolean, OUT detail text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  since timestamptz;
  bad_minutes bigint;
  bad_pages bigint;
  missing_pairs bigint;
BEGIN
  SELECT pg_catalog.date_trunc('hour', t.max_event_time, 'UTC') - interval '1 hour' INTO since
    FROM lakehouse.silver_tables t WHERE t.name = 'edits';
  IF since IS NULL THEN
    passed := true;
    detail := 'silver.edits is empty';
    RETURN;
  END IF;
  SELECT pg_catalog.count(*) INTO bad_minutes FROM (
    SELECT s.* FROM (SELECT pg_catalog.date_trunc('minute', e.event_time, 'UTC') AS minute, e.wiki, pg_catalog.count(*) AS edits,
                            pg_catalog.count(*) FILTER (WHERE e.type = 'new') AS new_pages,
                            pg_catalog.count(*) FILTER (WHERE e.is_bot) AS bot_edits
                       FROM silver.edits e WHERE e.event_time >= since AND e.wiki IS NOT NULL GROUP BY 1, 2) s
    FULL JOIN (SELECT g.minute, g.wiki, g.edits, g.new_pages, g.bot_edits FROM lakehouse.gold_minute g WHERE g.minute >= since) g
      ON g.minute = s.minute AND g.wiki = s.wiki
   WHERE (s.edits, s.new_pages, s.bot_edits) IS DISTINCT FROM (g.edits, g.new_pages, g.bot_edits)) d;
  SELECT pg_catalog.count(*) INTO bad_pages FROM (
    SELECT 1 FROM (SELECT pg_catalog.date_trunc('hour', e.event_time, 'UTC') AS hour, e.wiki, e.title, pg_catalog.count(*) AS edits,
                          pg_catalog.count(DISTINCT e.user_name) AS editors
                     FROM silver.edits e WHERE e.event_time >= since AND e.wiki IS NOT NULL AND e.title IS NOT NULL GROUP BY 1, 2, 3) s
    FULL JOIN (SELECT g.hour, g.wiki, g.title, g.edits, g.editors FROM lakehouse.gold_page_hour g WHERE g.hour >= since) g
      ON g.hour = s.hour AND g.wiki = s.wiki AND g.title = s.title
   WHERE (s.edits, s.editors) IS DISTINCT FROM (g.edits, g.editors)) d;
  SELECT pg_catalog.count(*) INTO missing_pairs
    FROM (SELECT DISTINCT g.hour, g.wiki FROM lakehouse.gold_page_hour g WHERE g.hour >= since) p
   WHERE NOT EXISTS (SELECT 1 FROM lakehouse.gold_hour_wiki w WHERE w.hour = p.hour AND w.wiki = p.wiki);
  passed := bad_minutes = 0 AND bad_pages = 0 AND missing_pairs = 0;
  detail := CASE WHEN passed THEN pg_catalog.format('edits per minute and per page-hour match silver.edits since %s', since)
                 ELSE pg_catalog.format('since %s: %s (minute, wiki) and %s (hour, page) aggregates differ from silver.edits; %s (hour, wiki) pairs missing from gold_hour_wiki',
                                        since, bad_minutes, bad_pages, missing_pairs) END;
END $$;


-- create_stream (0.4.0): a name whose earlier stream left dead letters, or that silver tables
-- still read, is refused: the worker resumes from the data under its name (bronze rows
-- and dead letters are the checkpoint), so only data of this stream may be there.
CREATE OR REPLACE FUNCTION lakehouse.create_stream(name text, topic text, brokers text DEFAULT NULL,
                                        start_from text DEFAULT 'earliest')
RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  start_at timestamptz;
BEGIN
  IF name IS NULL OR topic IS NULL OR start_from IS NULL THEN
    RAISE EXCEPTION 'name, topic and start_from must not be null'
      USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF name !~ '^[a-z_][a-z0-9_]{0,62}$' THEN
    RAISE EXCEPTION 'invalid stream name "%"', name
      USING ERRCODE = 'invalid_name',
            DETAIL = 'A stream name becomes the table bronze.<name>: 1 to 63 lower-case letters, digits or underscores, not starting with a digit.',
            HINT = 'Choose a name such as wiki_recentchange.';
  END IF;
  IF EXISTS (SELECT 1 FROM lakehouse.streams s WHERE s.name OPERATOR(pg_catalog.=) create_stream.name) THEN
    RAISE EXCEPTION 'stream "%" already exists', name
      USING ERRCODE = 'duplicate_object',
            HINT = 'Drop it first with lakehouse.drop_stream(), or pick another name.';
  END IF;
  IF to_regclass(format('bronze.%I', name)) IS NOT NULL THEN
    RAISE EXCEPTION 'table bronze.% already exists', name
      USING ERRCODE = 'duplicate_table',
            HINT = 'A dropped stream keeps its data; rename or drop that table, or pick another name.';
  END IF;
  IF EXISTS (SELECT 1 FROM lakehouse.dead_letters d WHERE d.stream OPERATOR(pg_catalog.=) create_stream.name) THEN
    RAISE EXCEPTION 'lakehouse.dead_letters still holds dead letters of an earlier stream "%"', name
      USING ERRCODE = 'duplicate_object',
            DETAIL = 'A stream resumes after the last offset it stored, bronze rows and dead letters alike: a new stream of that name would skip the offsets below them.',
            HINT = pg_catalog.format('Keep them elsewhere and have a superuser DELETE FROM lakehouse.dead_letters WHERE stream = %L, or pick another name.', name);
  END IF;
  IF EXISTS (SELECT 1 FROM lakehouse.silver_tables t WHERE t.stream OPERATOR(pg_catalog.=) create_stream.name) THEN
    RAISE EXCEPTION 'silver tables are still declared over an earlier stream "%"', name
      USING ERRCODE = 'dependent_objects_still_exist',
            DETAIL = pg_catalog.format('%s would go on reading the new stream as if it were the old one.',
                                       (SELECT pg_catalog.string_agg('silver.' || t.name, ', ' ORDER BY t.name)
                                          FROM lakehouse.silver_tables t WHERE t.stream OPERATOR(pg_catalog.=) create_stream.name)),
            HINT = 'Drop them first with lakehouse.drop_silver() (the recentchange pipeline with lakehouse.drop_recentchange_pipeline()), or pick another name.';
  END IF;
  IF start_from NOT IN ('earliest', 'latest') THEN
    BEGIN
      start_at := start_from::timestamptz;
    EXCEPTION WHEN OTHERS THEN
      RAISE EXCEPTION 'invalid start_from "%"', start_from
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Use ''earliest'', ''latest'' or a timestamp such as ''2026-11-29 08:00:00+00''.';
    END;
  END IF;

  INSERT INTO lakehouse.streams (name, topic, brokers, start_from)
  VALUES (name, topic, brokers, start_from);
  -- An earlier stream of this name may have left its checks' positions: this stream's
  -- checks start from its own beginning.
  DELETE FROM lakehouse.check_state c WHERE c.check_name OPERATOR(pg_catalog.=) ('bronze_offsets_once:' || name);

  -- Resolve the start to concrete offsets now, so a crash before the first commit cannot
  -- move it (a 'latest' resolved again later would skip what arrived in between). This
  -- also proves the topic exists and the brokers answer.
  IF start_at IS NULL THEN
    INSERT INTO lakehouse.offsets (stream, kafka_partition, next_offset)
    SELECT name, w.partition, CASE WHEN start_from = 'earliest' THEN w.low ELSE w.high END
      FROM lakehouse.kafka_watermarks(topic, brokers) w;
  ELSE
    INSERT INTO lakehouse.offsets (stream, kafka_partition, next_offset)
    SELECT name, t.partition, t.next_offset
      FROM lakehouse.kafka_offsets_for_time(topic, start_at, brokers) t;
  END IF;

  EXECUTE format($t$
    CREATE TABLE bronze.%I (
        kafka_partition integer NOT NULL,
        kafka_offset    bigint NOT NULL,
        kafka_timestamp timestamptz,
        kafka_key       text,
        payload         jsonb NOT NULL,
        batch_id        bigint NOT NULL,
        ingested_at     timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (kafka_partition, kafka_offset)
    )$t$, name);
  EXECUTE format('COMMENT ON TABLE bronze.%I IS %L', name,
                 format('raw messages of Kafka topic %s, written by lakehouse stream %s', topic, name));

  INSERT INTO lakehouse.stream_log (stream, event, detail)
  VALUES (name, 'created', jsonb_build_object('topic', topic, 'brokers', brokers, 'start_from', start_from,
          'offsets', (SELECT jsonb_object_agg(o.kafka_partition, o.next_offset) FROM lakehouse.offsets o
                       WHERE o.stream OPERATOR(pg_catalog.=) create_stream.name)));
END $$;


-- reset_offsets (0.4.0): a reset below what the stream's own data holds is refused (the
-- worker resumes after its data, so it would be undone without a word), and a stream
-- stopped on purpose stays stopped (the new offset applies when it is started).
CREATE OR REPLACE FUNCTION lakehouse.reset_offsets(name text, kafka_partition integer, next_offset bigint)
RETURNS void LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  old record;
  data_next bigint;
  was_enabled boolean;
BEGIN
  SELECT o.next_offset, o.error INTO old FROM lakehouse.offsets o
   WHERE o.stream OPERATOR(pg_catalog.=) reset_offsets.name
     AND o.kafka_partition OPERATOR(pg_catalog.=) reset_offsets.kafka_partition
   FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'stream "%" has no partition %', name, kafka_partition
      USING ERRCODE = 'undefined_object';
  END IF;
  IF next_offset < 0 THEN
    RAISE EXCEPTION 'next_offset must not be negative' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- What the worker would resume from: after the partition's last bronze row or dead letter.
  IF pg_catalog.to_regclass(pg_catalog.format('bronze.%I', name)) IS NOT NULL THEN
    EXECUTE pg_catalog.format('SELECT pg_catalog.max(b.kafka_offset) + 1 FROM bronze.%I b WHERE b.kafka_partition = $1', name)
      INTO data_next USING kafka_partition;
  END IF;
  data_next := GREATEST(data_next, (SELECT pg_catalog.max(d.kafka_offset) + 1 FROM lakehouse.dead_letters d
                                     WHERE d.stream OPERATOR(pg_catalog.=) reset_offsets.name
                                       AND d.kafka_partition OPERATOR(pg_catalog.=) reset_offsets.kafka_partition));
  IF next_offset < data_next THEN
    RAISE EXCEPTION 'partition % of stream "%" already holds offsets up to %', kafka_partition, name, data_next - 1
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = pg_catalog.format('A worker resumes after its own data (bronze rows and dead letters), so a reset to %s would be undone.', next_offset),
            HINT = pg_catalog.format('To read offsets from %s again, delete the partition''s bronze rows and dead letters from there on first (or drop the stream and create it again).', next_offset);
  END IF;
  UPDATE lakehouse.offsets o SET next_offset = reset_offsets.next_offset, error = NULL, updated_at = pg_catalog.now()
   WHERE o.stream OPERATOR(pg_catalog.=) reset_offsets.name
     AND o.kafka_partition OPERATOR(pg_catalog.=) reset_offsets.kafka_partition;
  SELECT s.enabled INTO was_enabled FROM lakehouse.streams s WHERE s.name OPERATOR(pg_catalog.=) reset_offsets.name;
  INSERT INTO lakehouse.stream_log (stream, event, detail)
  -- "from" is where the worker would have resumed: after its data when the data is ahead
  -- of the stored offset, so that the offsets check counts the skipped offsets once.
  VALUES (name, 'offsets_reset', pg_catalog.jsonb_build_object('partition', kafka_partition,
          'from', GREATEST(old.next_offset, data_next), 'to', next_offset, 'error_cleared', old.error,
          'restarted', was_enabled));
  -- A running worker re-reads its offsets on restart; a stopped stream stays stopped.
  IF was_enabled THEN
    PERFORM lakehouse.stop_stream(name);
    PERFORM lakehouse.start_stream(name);
  END IF;
END $$;

-- _check_bronze_offsets (0.4.0): resets logged by an earlier stream of the same name no longer
-- count as this stream's offsets skipped on purpose (only those after its 'created' record).
CREATE OR REPLACE FUNCTION lakehouse._check_bronze_offsets(s lakehouse.streams, OUT passed boolean, OUT detail text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  cname text := 'bronze_offsets_once:' || s.name;
  o record;
  from_off bigint;
  n_rows bigint;
  n_dead bigint;
  beyond bigint;
  skipped bigint;
  problems text[] := '{}';
  checked bigint := 0;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i
                  WHERE i.indrelid = pg_catalog.to_regclass(pg_catalog.format('bronze.%I', s.name))
                    AND i.indisprimary AND i.indisunique AND i.indisvalid) THEN
    passed := false;
    detail := pg_catalog.format('bronze.%s has no valid primary key on (kafka_partition, kafka_offset)', s.name);
    RETURN;
  END IF;
  FOR o IN SELECT f.kafka_partition, f.next_offset, c.position
             FROM lakehouse.offsets f
             LEFT JOIN lakehouse.check_state c ON c.check_name = cname AND c.kafka_partition = f.kafka_partition
            WHERE f.stream = s.name ORDER BY f.kafka_partition LOOP
    from_off := o.position;
    IF from_off IS NULL THEN
      EXECUTE pg_catalog.format('SELECT LEAST((SELECT min(b.kafka_offset) FROM bronze.%I b WHERE b.kafka_partition = $1),
                                              (SELECT min(d.kafka_offset) FROM lakehouse.dead_letters d
                                                WHERE d.stream = $2 AND d.kafka_partition = $1))', s.name)
        INTO from_off USING o.kafka_partition, s.name;
      from_off := coalesce(from_off, o.next_offset);
    END IF;
    EXECUTE pg_catalog.format('SELECT (SELECT count(*) FROM bronze.%1$I b WHERE b.kafka_partition = $1 AND b.kafka_offset >= $2 AND b.kafka_offset < $3),
                                      (SELECT count(*) FROM lakehouse.dead_letters d WHERE d.stream = $4 AND d.kafka_partition = $1
                                          AND d.kafka_offset >= $2 AND d.kafka_offset < $3),
                                      (SELECT count(*) FROM bronze.%1$I b WHERE b.kafka_partition = $1 AND b.kafka_offset >= $3)', s.name)
      INTO n_rows, n_dead, beyond USING o.kafka_partition, from_off, o.next_offset, s.name;
    -- Offsets skipped on purpose by reset_offsets() (logged in stream_log) are explained.
    SELECT coalesce(pg_catalog.sum(GREATEST(0, LEAST((l.detail->>'to')::bigint, o.next_offset)
                                               - GREATEST((l.detail->>'from')::bigint, from_off))), 0)
      INTO skipped
      FROM lakehouse.stream_log l
     WHERE l.stream = s.name AND l.event = 'offsets_reset' AND (l.detail->>'partition')::integer = o.kafka_partition
       AND (l.detail->>'to')::bigint > (l.detail->>'from')::bigint
       AND l.id > (SELECT coalesce(pg_catalog.max(c.id), 0) FROM lakehouse.stream_log c
                    WHERE c.stream = s.name AND c.event = 'created');
    checked := checked + (o.next_offset - from_off);
    IF n_rows + n_dead + skipped <> o.next_offset - from_off THEN
      problems := problems || pg_catalog.format('partition %s: offsets %s to %s hold %s rows and %s dead letters (%s skipped by reset_offsets), not %s; a transactional producer''s markers or a compacted topic also leave such gaps',
                                                o.kafka_partition, from_off, o.next_offset - 1, n_rows, n_dead, skipped, o.next_offset - from_off);
    ELSIF beyond > 0 THEN
      problems := problems || pg_catalog.format('partition %s: %s rows at or past next_offset %s',
                                                o.kafka_partition, beyond, o.next_offset);
    ELSE
      INSERT INTO lakehouse.check_state AS c (check_name, kafka_partition, position)
      VALUES (cname, o.kafka_partition, o.next_offset)
      ON CONFLICT (check_name, kafka_partition) DO UPDATE SET position = excluded.position;
    END IF;
  END LOOP;
  passed := pg_catalog.cardinality(problems) = 0;
  detail := CASE WHEN passed THEN pg_catalog.format('%s new offsets checked, each a row or a dead letter once', checked)
                 ELSE pg_catalog.array_to_string(problems, '; ') END;
END $$;


-- A recentchange pipeline declared under 0.3.0: distinct editors per page and hour move
-- from the first-seen table into gold_page_hour itself (one insert per page-hour instead
-- of two, the larger part of a pass's time).
DO $upgrade$
DECLARE
  acl aclitem[];
  item record;
BEGIN
  IF pg_catalog.to_regclass('lakehouse.gold_page_hour_editor') IS NOT NULL THEN
    ALTER TABLE lakehouse.gold_page_hour ADD COLUMN editor_names text[];
    UPDATE lakehouse.gold_page_hour g SET editor_names = e.names
      FROM (SELECT x.hour, x.wiki, x.title, pg_catalog.array_agg(x.user_name ORDER BY x.user_name) AS names
              FROM lakehouse.gold_page_hour_editor x GROUP BY 1, 2, 3) e
     WHERE e.hour = g.hour AND e.wiki = g.wiki AND e.title = g.title;
    UPDATE lakehouse.gold_page_hour SET editor_names = '{}' WHERE editor_names IS NULL;
    ALTER TABLE lakehouse.gold_page_hour ALTER COLUMN editor_names SET NOT NULL;
    DROP TABLE lakehouse.gold_page_hour_editor;
    CREATE TABLE lakehouse.gold_hour_wiki (hour timestamptz NOT NULL, wiki text NOT NULL, PRIMARY KEY (hour, wiki));
    INSERT INTO lakehouse.gold_hour_wiki SELECT DISTINCT g.hour, g.wiki FROM lakehouse.gold_page_hour g;
    COMMENT ON TABLE lakehouse.gold_hour_wiki IS 'the (hour, wiki) pairs of gold_page_hour, behind gold.top_pages_hourly';
    -- The view is the pipeline's, not the extension's: dropped and made again (an extension
    -- script may not replace an object it does not own), then taken out of the extension,
    -- with the privileges it had (its comments are the stock ones again). A view the user
    -- dropped stays dropped.
    acl := (SELECT c.relacl FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass('gold.top_pages_hourly'));
    IF pg_catalog.to_regclass('gold.top_pages_hourly') IS NOT NULL THEN
      DROP VIEW gold.top_pages_hourly;
      PERFORM lakehouse._recentchange_top_pages_view();
      ALTER EXTENSION lakehouse DROP VIEW gold.top_pages_hourly;
      IF acl IS NOT NULL THEN
        REVOKE ALL ON gold.top_pages_hourly FROM PUBLIC;
        FOR item IN SELECT * FROM pg_catalog.aclexplode(acl) LOOP
          EXECUTE pg_catalog.format('GRANT %s ON gold.top_pages_hourly TO %s%s', item.privilege_type,
                                    CASE WHEN item.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(item.grantee)) END,
                                    CASE WHEN item.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
      END IF;
    END IF;
    ALTER EXTENSION lakehouse DROP TABLE lakehouse.gold_hour_wiki;
  END IF;
END $upgrade$;

-- Silver tables declared under 0.3.0 get the new admit function (and their extract
-- function and row type again, which are written together). They are the tables' own
-- objects, not the extension's: made here, they are taken out of it again.
DO $upgrade$
DECLARE
  t lakehouse.silver_tables;
  fn text;
BEGIN
  FOR t IN SELECT * FROM lakehouse.silver_tables ORDER BY name LOOP
    FOREACH fn IN ARRAY ARRAY['_admit', '_extract'] LOOP
      EXECUTE pg_catalog.format('DROP FUNCTION lakehouse.%I', 'silver_' || t.name || fn);
    END LOOP;
    EXECUTE pg_catalog.format('DROP TYPE lakehouse.%I', 'silver_' || t.name || '_row');
    PERFORM lakehouse._silver_generate(t);
    FOREACH fn IN ARRAY ARRAY['_admit', '_extract'] LOOP
      EXECUTE pg_catalog.format('ALTER EXTENSION lakehouse DROP FUNCTION lakehouse.%I', 'silver_' || t.name || fn);
    END LOOP;
    EXECUTE pg_catalog.format('ALTER EXTENSION lakehouse DROP TYPE lakehouse.%I', 'silver_' || t.name || '_row');
  END LOOP;
END $upgrade$;
