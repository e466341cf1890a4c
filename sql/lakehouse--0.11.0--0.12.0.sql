-- lakehouse 0.11.0 -> 0.12.0 (after a review of the silver engine):
-- - A silver pass makes partitions only for its on-time rows. Late rows with scattered event
--   times (years of them, one a day) each made a partition, every one locked until the
--   commit, until the lock table ran out and the pass failed for good.
-- - A pass over rows that do not fit the declaration appends its rows one at a time: it
--   appended arrays, which copied the whole result so far each time (a bad row in every
--   chunk of 1,000 made a pass quadratic: 18 s for 20,000 rows).
-- - The silver_passes check does not compare passes with bronze batches that bronze
--   retention removed (maintain() records how far it removed; the check failed for good).
-- - The gold_reconciles check compares every column of gold_minute with silver (it compared
--   edits, new pages and bot edits only).
-- Every silver table's extract and admit functions are written again.
-- The same definitions as in lakehouse--0.12.0.sql (the regress test `upgrade` compares them).
-- The update drops and writes again each silver table's lakehouse.silver_<name>_extract,
-- _admit and _row: an object of your own that depends on them makes it fail (drop it first).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.12.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION lakehouse._silver_generate(t lakehouse.silver_tables) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
  late_cols text := '';      -- , j."c", ...
  row_cols text := 'lh_partition, lh_offset, lh_batch, lh_taken, lh_reject';  -- the row type's columns, in order
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
    late_cols := late_cols || pg_catalog.format(', j.%I', col.name);
    row_cols := row_cols || pg_catalog.format(', %I', col.name);
    null_cols := null_cols || ', NULL';
    j_cols := j_cols || pg_catalog.format('j.%I, ', col.name);
    ins_cols := ins_cols || pg_catalog.format('%I, ', col.name);
  END LOOP;
  FOREACH k IN ARRAY t.key LOOP
    rejects := rejects || pg_catalog.format(' WHEN x.%I IS NULL THEN %L', k, 'key column ' || k || ' is null');
    key_match_s := key_match_s || pg_catalog.format(' AND s.%I = j.%I', k, k);
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
      lh_elem %2$s;
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
          -- Rows are appended one at a time (array_append on the variable itself extends it
          -- in place): appending arrays copied the whole result so far each time, which
          -- made a pass with a bad row in every chunk quadratic (18 s for 20,000 rows).
          BEGIN
            FOREACH lh_elem IN ARRAY ARRAY(%4$s) LOOP
              lh_all := array_append(lh_all, lh_elem);
            END LOOP;
          EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
            FOR lh_one IN SELECT b.kafka_offset, b.batch_id FROM bronze.%5$I b
                           WHERE b.kafka_partition = lh_parts[lh_i] AND b.kafka_offset BETWEEN lh_lo AND lh_hi
                             AND (lh_after IS NULL OR b.batch_id > lh_after) AND (lh_upto IS NULL OR b.batch_id <= lh_upto)
                           ORDER BY b.kafka_offset LOOP
              BEGIN
                FOREACH lh_elem IN ARRAY ARRAY(%6$s) LOOP
                  lh_all := array_append(lh_all, lh_elem);
                END LOOP;
              EXCEPTION WHEN data_exception OR integrity_constraint_violation THEN
                lh_all := array_append(lh_all, ROW(lh_parts[lh_i], lh_one.kafka_offset, lh_one.batch_id, true, SQLERRM%7$s)::%2$s);
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
  -- The on-time rows go in in bronze commit order (batch, partition, offset) with ON
  -- CONFLICT DO NOTHING: of copies within the pass the first is admitted, as a copy of a
  -- row already in silver is dropped (an insert skips a row whose key the same statement
  -- inserted before). The late rows are judged after that, in a statement of their own,
  -- so that silver then holds this pass's rows too. Up to 0.10.0 a window over the pass
  -- sorted by key numbered the copies and found the keys with an on-time row (a sort and
  -- two more passes over every row: 0.45 of 3.7 s in one instrumented pass of 100,000
  -- rows, about 5 % of the passes' time in a comparison without instrumentation); up to
  -- 0.9.0 an anti-join of the pass with itself (planned as a nested loop over every
  -- pair: 0.1 s for 1,000 rows).
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
      lh_valid bigint;
      lh_late_rows %2$s[];
      lh_late boolean[];
    BEGIN
      -- Each row's late flag, in lh_rows' order: the rows the filter takes, valid (no
      -- reject) or not; a reject has no time and does not move its partition's watermark.
      WITH lh_before AS (SELECT e.key::integer AS lh_p, e.value::timestamptz AS lh_m0
                           FROM jsonb_each_text(coalesce(lh_part_max, '{}')) e)
      SELECT array_agg(f.lh_late ORDER BY f.lh_ord) INTO lh_late
        FROM (SELECT s.lh_ord,
                     (s.lh_taken AND s.lh_reject IS NULL AND lh_check_late
                      AND s.%4$s < greatest(max(CASE WHEN s.lh_taken AND s.lh_reject IS NULL THEN s.%4$s END)
                                              OVER (PARTITION BY s.lh_partition ORDER BY s.lh_batch, s.lh_offset
                                                    ROWS UNBOUNDED PRECEDING),
                                            b.lh_m0) - lh_delay) IS TRUE AS lh_late
                -- The row's columns named in full, so that the ordinality's name (lh_, which
                -- no column name may begin with) cannot meet one of them.
                FROM unnest(lh_rows) WITH ORDINALITY AS s(%10$s, lh_ord)
                LEFT JOIN lh_before b ON b.lh_p = s.lh_partition) f;

      -- The partitions the on-time rows need. Not a late row's: late rows with scattered
      -- event times (years of them) would each make a partition, every one of them locked
      -- until the commit, until the lock table ran out and the pass failed for good.
      FOR lh_b IN
        SELECT DISTINCT lakehouse._silver_bucket(u.%4$s, %3$L)
          FROM unnest(lh_rows, lh_late) AS u(%10$s, lh_late) WHERE u.lh_taken AND u.lh_reject IS NULL AND NOT u.lh_late
      LOOP
        PERFORM lakehouse._silver_ensure_partition(%5$L, lh_b, %3$L);
      END LOOP;

      WITH taken AS (SELECT u.* FROM unnest(lh_rows, lh_late) AS u(%10$s, lh_late) WHERE u.lh_taken),
      ins AS (INSERT INTO silver.%5$I (%6$s kafka_partition, kafka_offset)
              SELECT %7$s j.lh_partition, j.lh_offset FROM taken j
               WHERE j.lh_reject IS NULL AND NOT j.lh_late
               ORDER BY j.lh_batch, j.lh_partition, j.lh_offset
              ON CONFLICT DO NOTHING RETURNING %4$s AS t, kafka_partition AS p),
      rec_rej AS (INSERT INTO lakehouse.silver_rejects (silver, kafka_partition, kafka_offset, reason, pass_id)
                  SELECT %5$L, s.lh_partition, s.lh_offset, s.lh_reject, lh_pass FROM taken s
                   WHERE s.lh_reject IS NOT NULL RETURNING 1)
      SELECT (SELECT count(*) FROM unnest(lh_rows) s WHERE NOT s.lh_taken),
             (SELECT count(*) FROM taken v WHERE v.lh_reject IS NULL), (SELECT count(*) FROM rec_rej),
             (SELECT count(*) FROM ins),
             (SELECT array_agg(ROW(j.lh_partition, j.lh_offset, j.lh_batch, j.lh_taken, j.lh_reject%9$s)::%2$s)
                FROM taken j WHERE j.lh_late),
             (SELECT jsonb_object_agg(m.lh_partition, m.t) FROM (SELECT v.lh_partition, max(v.%4$s) AS t
                                                                   FROM taken v WHERE v.lh_reject IS NULL GROUP BY 1) m),
             (SELECT jsonb_object_agg(m.p, m.t) FROM (SELECT ins.p, min(ins.t) AS t FROM ins GROUP BY 1) m),
             (SELECT min(ins.t) FROM ins)
        INTO n_filtered, lh_valid, n_invalid, n_out, lh_late_rows, part_max, part_min_admitted, min_admitted;
      -- Counted apart from the others, so that silver_progress's balance (rows_in =
      -- filtered + invalid + rows_out + duplicates + late) still says something.
      n_in := coalesce(pg_catalog.cardinality(lh_rows), 0);

      -- A late row is recorded unless its key is in silver now (this pass's rows included).
      n_late := 0;
      IF lh_late_rows IS NOT NULL THEN
        WITH rec_late AS (INSERT INTO lakehouse.silver_late (silver, kafka_partition, kafka_offset, event_time, pass_id)
                          SELECT %5$L, j.lh_partition, j.lh_offset, j.%4$s, lh_pass FROM unnest(lh_late_rows) j
                           WHERE NOT EXISTS (SELECT 1 FROM silver.%5$I s WHERE s.%4$s = j.%4$s %8$s)
                          RETURNING 1)
        SELECT count(*) INTO n_late FROM rec_late;
      END IF;
      n_dup := lh_valid - n_out - n_late;
    END $body$ $f$,
    admit_fn, rowtype, t.partition_interval, tcol, t.name, ins_cols, j_cols,
    key_match_s, late_cols, row_cols);
  EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s(%s[], jsonb, interval, boolean, bigint) FROM PUBLIC',
                            admit_fn, rowtype);
END $_$;

CREATE OR REPLACE FUNCTION lakehouse._check_gold(OUT passed boolean, OUT detail text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  since timestamptz;
  bad_minutes bigint;
  bad_pages bigint;
  missing_pairs bigint;
  bad_ranks bigint;
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
                            pg_catalog.count(*) FILTER (WHERE e.is_bot) AS bot_edits,
                            pg_catalog.count(*) FILTER (WHERE NOT coalesce(e.is_bot, false)) AS human_edits,
                            coalesce(pg_catalog.sum(GREATEST(e.d, 0)), 0) AS bytes_added,
                            coalesce(pg_catalog.sum(GREATEST(-e.d, 0)), 0) AS bytes_removed
                       FROM (SELECT x.*, coalesce(x.length_new, 0) - coalesce(x.length_old, 0) AS d
                               FROM silver.edits x WHERE x.event_time >= since AND x.wiki IS NOT NULL) e GROUP BY 1, 2) s
    FULL JOIN (SELECT g.minute, g.wiki, g.edits, g.new_pages, g.bot_edits, g.human_edits, g.bytes_added, g.bytes_removed
                 FROM lakehouse.gold_minute g WHERE g.minute >= since) g
      ON g.minute = s.minute AND g.wiki = s.wiki
   WHERE (s.edits, s.new_pages, s.bot_edits, s.human_edits, s.bytes_added, s.bytes_removed)
         IS DISTINCT FROM (g.edits, g.new_pages, g.bot_edits, g.human_edits, g.bytes_added, g.bytes_removed)) d;
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
  -- The view's top 10 per hour and wiki against a window over the page-hours (the view
  -- gets its order from how PostgreSQL runs its plan; see _recentchange_top_pages_view).
  -- A view the user dropped is not checked.
  bad_ranks := 0;
  IF pg_catalog.to_regclass('gold.top_pages_hourly') IS NOT NULL THEN
    -- Each side is computed once (a CTE named twice is materialized) and compared both ways.
    WITH v AS (SELECT t.hour, t.wiki, t.title, t.rank FROM gold.top_pages_hourly t WHERE t.hour >= since AND t.rank <= 10),
         r AS (SELECT x.hour, x.wiki, x.title, x.rank
                 FROM (SELECT g.hour, g.wiki, g.title,
                              pg_catalog.row_number() OVER (PARTITION BY g.hour, g.wiki ORDER BY g.edits DESC, g.editors DESC, g.title) AS rank
                         FROM lakehouse.gold_page_hour g WHERE g.hour >= since) x WHERE x.rank <= 10)
    SELECT pg_catalog.count(*) INTO bad_ranks
      FROM ((SELECT * FROM v EXCEPT SELECT * FROM r) UNION ALL (SELECT * FROM r EXCEPT SELECT * FROM v)) d;
  END IF;
  passed := bad_minutes = 0 AND bad_pages = 0 AND missing_pairs = 0 AND bad_ranks = 0;
  detail := CASE WHEN passed THEN pg_catalog.format('edits per minute (every column) and per page-hour match silver.edits since %s', since)
                 ELSE pg_catalog.format('since %s: %s (minute, wiki) and %s (hour, page) aggregates differ from silver.edits; %s (hour, wiki) pairs missing from gold_hour_wiki; %s top-10 rows of gold.top_pages_hourly differ from a window over gold_page_hour',
                                        since, bad_minutes, bad_pages, missing_pairs, bad_ranks) END;
END $$;

CREATE OR REPLACE FUNCTION lakehouse._check_silver_passes(t lakehouse.silver_tables, OUT passed boolean, OUT detail text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
  horizon bigint;
  n_removed bigint;
  problems text[] := '{}';
BEGIN
  SELECT c.position INTO from_pass FROM lakehouse.check_state c WHERE c.check_name = cname AND c.kafka_partition = -1;
  from_pass := coalesce(from_pass, 0);
  -- Bronze retention (maintain) removed the stream's rows up to this batch: passes over
  -- those batches cannot be compared with bronze any more (their other checks still run).
  SELECT c.position INTO horizon FROM lakehouse.check_state c
   WHERE c.check_name = 'bronze_retention:' || t.stream AND c.kafka_partition = -1;
  horizon := coalesce(horizon, 0);
  SELECT pg_catalog.max(p.pass_id), pg_catalog.count(*),
         pg_catalog.count(*) FILTER (WHERE p.rows_in <> p.filtered + p.invalid + p.rows_out + p.duplicates_dropped + p.late_dropped),
         pg_catalog.count(*) FILTER (WHERE p.kind = 'pass' AND EXISTS (
           SELECT 1 FROM pg_catalog.jsonb_each_text(p.partition_min_admitted) a
             JOIN pg_catalog.jsonb_each_text(p.partition_watermarks) w ON w.key = a.key
            WHERE a.value::timestamptz < w.value::timestamptz)),
         coalesce(pg_catalog.sum(p.rows_in) FILTER (WHERE p.kind = 'pass' AND p.first_batch_id > horizon), 0),
         pg_catalog.min(p.first_batch_id) FILTER (WHERE p.first_batch_id > horizon),
         pg_catalog.max(p.last_batch_id) FILTER (WHERE p.first_batch_id > horizon),
         pg_catalog.count(*) FILTER (WHERE p.kind = 'pass' AND p.first_batch_id <= horizon)
    INTO upto_pass, n_passes, unbalanced, behind, read_rows, first_b, last_b, n_removed
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
  detail := CASE WHEN passed THEN pg_catalog.format('%s new passes: counts balance, %s bronze rows read once, none admitted behind the watermark%s',
                                                    n_passes, read_rows,
                                                    CASE WHEN n_removed > 0
                                                         THEN pg_catalog.format(' (%s passes over bronze batches that retention removed not compared with bronze)', n_removed)
                                                         ELSE '' END)
                 ELSE pg_catalog.array_to_string(problems, '; ') END;
END $_$;

CREATE OR REPLACE FUNCTION lakehouse.maintain(keep interval DEFAULT '7 days'::interval, bronze_retention interval DEFAULT NULL::interval) RETURNS TABLE(step text, detail text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  s lakehouse.streams;
  t lakehouse.silver_tables;
  n bigint;
  cursor_batch bigint;
  removed_upto bigint;
BEGIN
  IF keep IS NULL OR keep < interval '1 hour' THEN
    RAISE EXCEPTION 'keep must be at least one hour' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF bronze_retention IS NOT NULL AND bronze_retention < interval '1 hour' THEN
    RAISE EXCEPTION 'bronze_retention must be at least one hour, or NULL to keep bronze' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOR s IN SELECT * FROM lakehouse.streams x WHERE pg_catalog.to_regclass(pg_catalog.format('bronze.%I', x.name)) IS NOT NULL
            ORDER BY x.name LOOP
    EXECUTE pg_catalog.format('ANALYZE bronze.%I', s.name);
    step := 'analyze'; detail := 'bronze.' || s.name; RETURN NEXT;
    -- Serialised with silver declarations, which read where stream_progress begins.
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('lakehouse.stream_progress:' || s.name));
    SELECT pg_catalog.min(x.last_batch_id) INTO cursor_batch FROM lakehouse.silver_tables x WHERE x.stream = s.name;
    IF bronze_retention IS NOT NULL THEN
      EXECUTE pg_catalog.format($q$
        WITH d AS (DELETE FROM bronze.%I b
                    WHERE b.ingested_at < pg_catalog.now() - $1 AND b.batch_id <= $2
                      AND NOT EXISTS (SELECT 1 FROM lakehouse.silver_late l JOIN lakehouse.silver_tables x ON x.name = l.silver
                                       WHERE x.stream = $3 AND l.kafka_partition = b.kafka_partition
                                         AND l.kafka_offset = b.kafka_offset AND l.replayed_in IS NULL)
                   RETURNING b.batch_id)
        SELECT pg_catalog.count(*), pg_catalog.max(d.batch_id) FROM d$q$, s.name)
        INTO n, removed_upto USING bronze_retention, coalesce(cursor_batch, 9223372036854775807), s.name;
      -- The silver_passes check compares passes with bronze's rows: it skips the batches
      -- removed here (the position only moves forward).
      IF removed_upto IS NOT NULL THEN
        INSERT INTO lakehouse.check_state AS c (check_name, kafka_partition, position)
        VALUES ('bronze_retention:' || s.name, -1, removed_upto)
        ON CONFLICT (check_name, kafka_partition) DO UPDATE SET position = GREATEST(c.position, excluded.position);
      END IF;
      step := 'bronze retention'; detail := pg_catalog.format('bronze.%s: %s rows older than %s removed', s.name, n, bronze_retention);
      RETURN NEXT;
    END IF;
    DELETE FROM lakehouse.stream_progress p
     WHERE p.stream = s.name AND p.committed_at < pg_catalog.now() - keep
       AND CASE WHEN cursor_batch IS NOT NULL THEN p.batch_id < cursor_batch
                ELSE bronze_retention IS NOT NULL AND p.committed_at < pg_catalog.now() - bronze_retention END
       AND p.batch_id < (SELECT pg_catalog.max(q.batch_id) FROM lakehouse.stream_progress q WHERE q.stream = s.name);
    GET DIAGNOSTICS n = ROW_COUNT;
    step := 'prune'; detail := pg_catalog.format('stream_progress of %s: %s rows', s.name, n); RETURN NEXT;
    -- Ranges passed without a message that the offsets check has gone past, but the last
    -- of each partition (a worker whose offsets row is lost resumes after it).
    DELETE FROM lakehouse.skipped_offsets k
     USING lakehouse.check_state c
     WHERE k.stream = s.name AND c.check_name = ('bronze_offsets_once:' || s.name)
       AND c.kafka_partition = k.kafka_partition AND k.to_offset <= c.position
       AND k.from_offset < (SELECT pg_catalog.max(l.from_offset) FROM lakehouse.skipped_offsets l
                             WHERE l.stream = k.stream AND l.kafka_partition = k.kafka_partition);
    GET DIAGNOSTICS n = ROW_COUNT;
    step := 'prune'; detail := pg_catalog.format('skipped_offsets of %s: %s ranges', s.name, n); RETURN NEXT;
  END LOOP;
  FOR t IN SELECT * FROM lakehouse.silver_tables x ORDER BY x.name LOOP
    EXECUTE pg_catalog.format('ANALYZE silver.%I', t.name);
    step := 'analyze'; detail := 'silver.' || t.name; RETURN NEXT;
  END LOOP;
  IF pg_catalog.to_regclass('silver.editor_sessions') IS NOT NULL THEN
    ANALYZE silver.editor_sessions;
    step := 'analyze'; detail := 'silver.editor_sessions and the gold tables'; RETURN NEXT;
  END IF;
  DELETE FROM lakehouse.silver_progress p WHERE p.committed_at < pg_catalog.now() - keep;
  GET DIAGNOSTICS n = ROW_COUNT;
  step := 'prune'; detail := pg_catalog.format('silver_progress: %s rows', n); RETURN NEXT;
  DELETE FROM lakehouse.silver_late l WHERE l.replayed_in IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM lakehouse.silver_progress p WHERE p.silver = l.silver AND p.pass_id = l.replayed_in);
  GET DIAGNOSTICS n = ROW_COUNT;
  step := 'prune'; detail := pg_catalog.format('replayed silver_late rows: %s', n); RETURN NEXT;
  DELETE FROM lakehouse.check_results c WHERE c.checked_at < pg_catalog.now() - keep;
  GET DIAGNOSTICS n = ROW_COUNT;
  step := 'prune'; detail := pg_catalog.format('check_results: %s rows', n); RETURN NEXT;
END $_$;

CREATE OR REPLACE FUNCTION lakehouse.create_stream(name text, topic text, brokers text DEFAULT NULL::text, start_from text DEFAULT 'earliest'::text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  start_at timestamptz;
BEGIN
  IF name IS NULL OR topic IS NULL OR start_from IS NULL THEN
    RAISE EXCEPTION 'name, topic and start_from must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Leave start_from out for ''earliest''; brokers may be NULL (lakehouse.brokers).';
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
  -- An earlier stream of this name may have left its checks' positions, batches and the
  -- offsets it passed without a message: this stream starts from its own beginning.
  DELETE FROM lakehouse.check_state c
   WHERE c.check_name OPERATOR(pg_catalog.=) ANY (ARRAY['bronze_offsets_once:' || name, 'bronze_retention:' || name]);
  DELETE FROM lakehouse.stream_progress p WHERE p.stream OPERATOR(pg_catalog.=) create_stream.name;
  DELETE FROM lakehouse.skipped_offsets k WHERE k.stream OPERATOR(pg_catalog.=) create_stream.name;

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
END $_$;

-- Every silver table gets the new extract and admit functions (with their row type, which
-- are written together), as in the 0.10.0 and 0.11.0 updates: they are the tables' own
-- objects, not the extension's, so they are taken out of it again. The registry rows are
-- locked first, as a pass locks its own: a running pass finishes with the old functions,
-- the next waits until ALTER EXTENSION commits.
DO $upgrade$
DECLARE
  t lakehouse.silver_tables;
  fn text;
BEGIN
  PERFORM 1 FROM lakehouse.silver_tables s ORDER BY s.name FOR UPDATE;
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
