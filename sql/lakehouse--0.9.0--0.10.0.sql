-- lakehouse 0.9.0 -> 0.10.0: a silver pass costs what its rows cost, also when small.
-- - Copies within a pass are found by one sort of the pass by key (a window), not by an
--   anti-join of the pass with itself, which the planner ran as a nested loop over every
--   pair (its estimate of a filtered array is a handful of rows): 0.1 s of a 1,000-row
--   pass. Every silver table's admit function is written again.
-- - The recentchange pass: a page-hour met again by one editor is updated without a
--   subquery, and the sessions a pass touches are found per (wiki, user) through the
--   primary key instead of reading every open session.
-- The same definitions as in lakehouse--0.10.0.sql (the regress test `upgrade` compares them).
-- The update drops and writes again each silver table's lakehouse.silver_<name>_extract,
-- _admit and _row: an object of your own that depends on them makes it fail (drop it first).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.10.0'" to load this file. \quit

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
  key_list_j text := '';     -- , j."k", ...
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
    key_list_j := key_list_j || pg_catalog.format(', j.%I', k);
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
      -- Copies within the pass, by key: of the on-time ones the first in bronze commit
      -- order is the one admitted, and a late row whose key has an on-time row in the pass
      -- is a duplicate. One sort of the pass by key, whatever the row estimates say. (Up
      -- to 0.9.0 an anti-join of the pass with itself: planned for the two rows its
      -- estimate over an array's filtered rows gave, it compared every pair, 0.1 s for a
      -- pass of 1,000 rows, most of a small pass's time.)
      ranked AS (SELECT j.*,
                        row_number() OVER (PARTITION BY j.%4$s %9$s, j.lh_late
                                           ORDER BY j.lh_batch, j.lh_partition, j.lh_offset) AS lh_nth,
                        bool_or(NOT j.lh_late) OVER (PARTITION BY j.%4$s %9$s) AS lh_key_on_time
                   FROM judged j),
      ins AS (INSERT INTO silver.%5$I (%6$s kafka_partition, kafka_offset)
              SELECT %7$s j.lh_partition, j.lh_offset FROM ranked j
               WHERE NOT j.lh_late AND j.lh_nth = 1
              ON CONFLICT DO NOTHING RETURNING %4$s AS t, kafka_partition AS p),
      late AS (SELECT j.* FROM ranked j
                WHERE j.lh_late AND NOT j.lh_key_on_time
                  AND NOT EXISTS (SELECT 1 FROM silver.%5$I s WHERE s.%4$s = j.%4$s %8$s)),
      rec_late AS (INSERT INTO lakehouse.silver_late (silver, kafka_partition, kafka_offset, event_time, pass_id)
                   SELECT %5$L, l.lh_partition, l.lh_offset, l.%4$s, lh_pass FROM late l RETURNING 1),
      rec_rej AS (INSERT INTO lakehouse.silver_rejects (silver, kafka_partition, kafka_offset, reason, pass_id)
                  SELECT %5$L, s.lh_partition, s.lh_offset, s.lh_reject, lh_pass FROM src s
                   WHERE s.lh_taken AND s.lh_reject IS NOT NULL RETURNING 1)
      SELECT (SELECT count(*) FROM src), (SELECT count(*) FROM src WHERE NOT src.lh_taken),
             (SELECT count(*) FROM rec_rej), (SELECT count(*) FROM ins),
             (SELECT count(*) FROM ranked) - (SELECT count(*) FROM ins) - (SELECT count(*) FROM rec_late),
             (SELECT count(*) FROM rec_late),
             (SELECT jsonb_object_agg(m.lh_partition, m.t) FROM (SELECT valid.lh_partition, max(valid.%4$s) AS t
                                                                   FROM valid GROUP BY 1) m),
             (SELECT jsonb_object_agg(m.p, m.t) FROM (SELECT ins.p, min(ins.t) AS t FROM ins GROUP BY 1) m),
             (SELECT min(ins.t) FROM ins)
        INTO n_in, n_filtered, n_invalid, n_out, n_dup, n_late, part_max, part_min_admitted, min_admitted;
    END $body$ $f$,
    admit_fn, rowtype, t.partition_interval, tcol, t.name, ins_cols, j_cols,
    key_match_s, key_list_j);
  EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s(%s[], jsonb, interval, boolean, bigint) FROM PUBLIC',
                            admit_fn, rowtype);
END $_$;

-- Every silver table gets the new admit function (with its extract function and row type,
-- which are written together). They are the tables' own objects, not the extension's:
-- made here, they are taken out of it again. The registry rows are locked first, as a pass
-- locks its own: a running pass finishes with the old functions, the next waits until
-- ALTER EXTENSION commits (never one half old, half new).
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

CREATE OR REPLACE FUNCTION lakehouse._recentchange_on_admit() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
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
  SELECT pg_catalog.date_bin('1 minute', n.event_time, '4714-11-24 00:00:00+00 BC'), n.wiki, pg_catalog.count(*),
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
  -- list of editor names. The edits are grouped by page-hour and editor first, so that
  -- each page-hour's editors come distinct without a sort per page-hour (what
  -- count(DISTINCT) and array_agg(DISTINCT) would do). A page-hour already there usually
  -- meets one editor in a pass, one it has seen (the list stays) or a new one (appended):
  -- both without a subquery per row; only several new editors at once are merged through
  -- DISTINCT. date_bin on UTC hours and minutes is date_trunc(..., 'UTC'), cheaper; its
  -- origin is the earliest timestamptz, so that no event time lies before it (some 15.x
  -- minors binned times before the origin one step too early).
  INSERT INTO lakehouse.gold_page_hour AS g (hour, wiki, title, edits, editors, editor_names)
  SELECT u.hour, u.wiki, u.title, pg_catalog.sum(u.n), pg_catalog.count(u.user_name),
         coalesce(pg_catalog.array_agg(u.user_name) FILTER (WHERE u.user_name IS NOT NULL), '{}')
    FROM (SELECT pg_catalog.date_bin('1 hour', n.event_time, '4714-11-24 00:00:00+00 BC') AS hour, n.wiki, n.title,
                 n.user_name, pg_catalog.count(*)::integer AS n
            FROM new_rows n WHERE n.wiki IS NOT NULL AND n.title IS NOT NULL GROUP BY 1, 2, 3, 4) u
   GROUP BY 1, 2, 3
  ON CONFLICT (hour, wiki, title) DO UPDATE
     SET edits = g.edits + excluded.edits,
         editors = CASE WHEN excluded.editor_names <@ g.editor_names THEN g.editors
                        WHEN pg_catalog.cardinality(excluded.editor_names) = 1 THEN g.editors + 1
                        ELSE (SELECT pg_catalog.count(DISTINCT x.name)
                                FROM unnest(g.editor_names || excluded.editor_names) AS x(name)) END,
         editor_names = CASE WHEN excluded.editor_names <@ g.editor_names THEN g.editor_names
                             WHEN pg_catalog.cardinality(excluded.editor_names) = 1
                               THEN g.editor_names || excluded.editor_names
                             ELSE (SELECT coalesce(pg_catalog.array_agg(u.name), '{}')
                                     FROM (SELECT DISTINCT x.name
                                             FROM unnest(g.editor_names || excluded.editor_names) AS x(name)) u) END;
  INSERT INTO lakehouse.gold_hour_wiki (hour, wiki)
  SELECT DISTINCT pg_catalog.date_bin('1 hour', n.event_time, '4714-11-24 00:00:00+00 BC'), n.wiki
    FROM new_rows n WHERE n.wiki IS NOT NULL AND n.title IS NOT NULL
  ON CONFLICT DO NOTHING;

  -- Sessions. Every session of a touched (wiki, user) that lies within the gap of a new
  -- edit is taken out and merged again with the new edits (gaps and islands: a new
  -- session starts where an edit starts more than the gap after everything before it). A
  -- late edit replayed into a closed session, or one that bridges two sessions, merges
  -- them. Sessions farther than the gap from every new edit cannot change.
  -- What that costs must follow the pass's size, not the table's: per (wiki, user) of the
  -- pass, two short reads of the primary key. The sessions of one (wiki, user) never
  -- overlap, so the ones reaching into [lo, hi] are those starting within it and at most
  -- one starting before lo, the latest such, if it ends at lo or after. What is found is
  -- deleted by row address. (0.9.0 read every open session once per pass for editors
  -- whose edits were at or after the low watermark: a pass of a few edits read as many
  -- sessions as editors had been active within the gap. A join on (wiki, user) alone read
  -- every past session of the user: the planner hashed the whole table in every pass.)
  WITH keys AS (SELECT n.wiki, n.user_name,
                       pg_catalog.min(n.event_time) - gap AS lo,
                       pg_catalog.max(n.event_time) + gap AS hi
                  FROM new_rows n WHERE n.wiki IS NOT NULL AND n.user_name IS NOT NULL GROUP BY 1, 2),
       hit AS (SELECT x.id FROM keys k CROSS JOIN LATERAL (
                 SELECT s.ctid AS id FROM silver.editor_sessions s
                  WHERE s.wiki = k.wiki AND s.user_name = k.user_name
                    AND s.session_start >= k.lo AND s.session_start <= k.hi
                 UNION ALL
                 SELECT p.id FROM (SELECT s.ctid AS id, s.session_end FROM silver.editor_sessions s
                                    WHERE s.wiki = k.wiki AND s.user_name = k.user_name AND s.session_start < k.lo
                                    ORDER BY s.session_start DESC LIMIT 1) p
                  WHERE p.session_end >= k.lo) x),
       gone AS (DELETE FROM silver.editor_sessions s WHERE s.ctid = ANY (ARRAY(SELECT h.id FROM hit h))
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
