-- lakehouse 0.10.0 -> 0.11.0:
-- - A silver pass admits its on-time rows in bronze commit order with ON CONFLICT DO
--   NOTHING and judges its late rows afterwards, instead of sorting the pass by key in a
--   window first. Every silver table's admit function is written again.
-- - A day's gold.top_pages_hourly top list is costed below what it could read: each of the
--   view's three runs gets a limit of unknown value that limits nothing (the planner then
--   costs the run as a tenth of its rows instead of all of them: the window's run
--   condition, which stops the read, is not costed by PostgreSQL 15); the third run (pages
--   edited once by no named editor) its own small index; gold_hour_wiki ndistinct
--   statistics on (hour, wiki). Before, a day's top list was costed as every page-hour of
--   the day, past jit_above_cost, with a Memoize that never hit.
-- The same definitions as in lakehouse--0.11.0.sql (the regress test `upgrade` compares them).
-- The update drops and writes again each silver table's lakehouse.silver_<name>_extract,
-- _admit and _row: an object of your own that depends on them makes it fail (drop it first).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.11.0'" to load this file. \quit

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
    BEGIN
      -- The partitions the rows need (a late row's too: at worst one empty partition more).
      FOR lh_b IN
        SELECT DISTINCT lakehouse._silver_bucket(r.%4$s, %3$L)
          FROM unnest(lh_rows) r WHERE r.lh_taken AND r.lh_reject IS NULL
      LOOP
        PERFORM lakehouse._silver_ensure_partition(%5$L, lh_b, %3$L);
      END LOOP;

      -- taken: the rows the filter takes, valid (no reject) or not; a reject has no time
      -- and does not move its partition's watermark.
      WITH lh_before AS (SELECT e.key::integer AS lh_p, e.value::timestamptz AS lh_m0
                           FROM jsonb_each_text(coalesce(lh_part_max, '{}')) e),
      taken AS (SELECT s.*,
                       (s.lh_reject IS NULL AND lh_check_late
                        AND s.%4$s < greatest(max(CASE WHEN s.lh_reject IS NULL THEN s.%4$s END)
                                                OVER (PARTITION BY s.lh_partition ORDER BY s.lh_batch, s.lh_offset
                                                      ROWS UNBOUNDED PRECEDING),
                                              b.lh_m0) - lh_delay) AS lh_late
                  FROM unnest(lh_rows) s LEFT JOIN lh_before b ON b.lh_p = s.lh_partition
                 WHERE s.lh_taken),
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
    key_match_s, late_cols);
  EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s(%s[], jsonb, interval, boolean, bigint) FROM PUBLIC',
                            admit_fn, rowtype);
END $_$;


CREATE OR REPLACE FUNCTION lakehouse._recentchange_create_gold() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
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
      PRIMARY KEY (minute, wiki) INCLUDE (edits, new_pages, bot_edits, human_edits, bytes_added, bytes_removed));
  -- The primary key carries every column: a day of gold.edits_per_minute (57,600 rows for 40
  -- wikis) is read from the index alone once autovacuum has seen the minutes, as fast as
  -- the same rows from a table of just them; a pass writes a few thousand minutes at most.
  -- editor_names: who edited the page in the hour (distinct, in no order), so that distinct
  -- editors stay exact as passes add edits; editors is its length.
  -- gold.top_pages_hourly ranks the pages of an hour and wiki in three runs, each read in
  -- rank order from an index (see lakehouse._recentchange_top_pages_view): pages edited
  -- more than once from gold_page_hour_top; pages edited once, by title, from the primary
  -- key, whose INCLUDE columns spare heap visits where the visibility map allows. Most
  -- page-hours are edited once, so the top index holds few entries and a pass inserts most
  -- page-hours into one index only. The runs are in rank order only while every page-hour
  -- has edits >= 1 and editors <= edits: gold_page_hour_counts holds them to it.
  CREATE TABLE lakehouse.gold_page_hour (
      hour timestamptz NOT NULL, wiki text NOT NULL, title text NOT NULL, edits bigint NOT NULL, editors bigint NOT NULL,
      editor_names text[] NOT NULL, PRIMARY KEY (hour, wiki, title) INCLUDE (edits, editors),
      CONSTRAINT gold_page_hour_counts CHECK (edits >= 1 AND editors >= 0 AND editors <= edits));
  CREATE INDEX gold_page_hour_top ON lakehouse.gold_page_hour (hour, wiki, edits DESC, editors DESC, title) WHERE edits > 1;
  -- The third run, pages edited once by no named editor: few or none, so that the planner
  -- costs that run as the few entries it is instead of a walk through the whole (hour,
  -- wiki) in search of them; the view reads it alone (its counts are the predicate's).
  CREATE INDEX gold_page_hour_unnamed ON lakehouse.gold_page_hour (hour, wiki, title) WHERE edits = 1 AND editors = 0;
  -- The (hour, wiki) pairs of gold_page_hour: gold.top_pages_hourly ranks the pages of
  -- each pair apart, so that a top-N query over a day reads N entries per pair.
  CREATE TABLE lakehouse.gold_hour_wiki (hour timestamptz NOT NULL, wiki text NOT NULL, PRIMARY KEY (hour, wiki));
  -- Every pair is there once (the primary key), which the planner learns only from these
  -- statistics: without them it expects pairs to repeat and caches the ranking of each
  -- (a Memoize that never hits, and whose expected hits made a day's top list look cheaper).
  CREATE STATISTICS lakehouse.gold_hour_wiki_pairs (ndistinct) ON hour, wiki FROM lakehouse.gold_hour_wiki;
  CREATE TABLE lakehouse.gold_editor_day (
      day date NOT NULL, wiki text NOT NULL, user_name text NOT NULL, edits bigint NOT NULL, sessions bigint NOT NULL,
      is_bot boolean NOT NULL, PRIMARY KEY (day, wiki, user_name));
  -- A day's most active editors (ORDER BY edits DESC LIMIT n) read in rank order, instead
  -- of sorting the day's hundreds of thousands of editors.
  CREATE INDEX gold_editor_day_top ON lakehouse.gold_editor_day (day, edits DESC);
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

CREATE OR REPLACE FUNCTION lakehouse._recentchange_top_pages_view() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  -- Rank order is edits DESC, editors DESC, title. Every page-hour has edits >= 1 and
  -- editors <= edits, so the pages of an (hour, wiki) come in three runs, each in rank
  -- order and each ranking after the one before: edited more than once (the partial index
  -- gold_page_hour_top), edited once by one editor (the primary key, by title), edited once
  -- by no named editor (rare; gold_page_hour_unnamed, by title, whose predicate fixes the
  -- counts, so that the run reads the index alone). gold_page_hour_counts leaves no other
  -- page-hour.
  -- row_number() OVER () numbers the rows as the runs produce them, one after the other:
  -- no window ORDER BY, so nothing sorts the whole (hour, wiki), and a rank <= N filter
  -- (the window's run condition) stops after N rows. This order is how PostgreSQL 15 runs the plan (a plain Append runs its branches
  -- in turn; a subquery's ORDER BY holds), not a promise of SQL: the regress test gold
  -- checks the plan's shape and compares every rank with a window over all page-hours, and
  -- the check gold_reconciles does the same for the top 10 of the last two hours.
  -- LIMIT (SELECT NULL::bigint) in each run limits nothing (a null limit is no limit), but
  -- its value is unknown when planning, so the planner costs the run as a tenth of its
  -- rows, as for any such limit: a flat discount, not the N rows a top list reads.
  -- PostgreSQL 15 does not cost the run condition's early stop at all: costed whole, a
  -- day's top list looked like reading every page-hour of the day (1.3 million estimated),
  -- past jit_above_cost, and JIT compilation made it slower (73.9 against 54.5 ms at 2
  -- million edits). Now, with 10 million edits over 8 days, a day's top list costs about
  -- 37,500: lists of up to about two and a half such days stay under jit_above_cost's
  -- default of 100,000. The price:
  -- the view's row estimates are a tenth of its rows where no rank filter applies, and
  -- no run is read in parallel (a subquery with a limit never is; that also keeps the
  -- Append plain). The regress test gold checks the discount and the Memoize.
  -- OR REPLACE: the 0.7.0 update replaces the view of a declared pipeline in place (same
  -- columns), keeping its owner, privileges and the views built on it.
  CREATE OR REPLACE VIEW gold.top_pages_hourly AS
    SELECT w.hour, w.wiki, p.title, p.edits, p.distinct_editors, p.rank
      FROM lakehouse.gold_hour_wiki w
     CROSS JOIN LATERAL (
       SELECT r.title, r.edits, r.distinct_editors, pg_catalog.row_number() OVER () AS rank
         FROM (SELECT m.title, m.edits, m.distinct_editors
                 FROM (SELECT g.title, g.edits, g.editors AS distinct_editors FROM lakehouse.gold_page_hour g
                        WHERE g.hour OPERATOR(pg_catalog.=) w.hour AND g.wiki OPERATOR(pg_catalog.=) w.wiki
                          AND g.edits OPERATOR(pg_catalog.>) 1
                        ORDER BY g.edits DESC, g.editors DESC, g.title LIMIT (SELECT NULL::bigint)) m
               UNION ALL
               SELECT s.title, s.edits, s.distinct_editors
                 FROM (SELECT g.title, g.edits, g.editors AS distinct_editors FROM lakehouse.gold_page_hour g
                        WHERE g.hour OPERATOR(pg_catalog.=) w.hour AND g.wiki OPERATOR(pg_catalog.=) w.wiki
                          AND g.edits OPERATOR(pg_catalog.=) 1 AND g.editors OPERATOR(pg_catalog.=) 1
                        ORDER BY g.title LIMIT (SELECT NULL::bigint)) s
               UNION ALL
               SELECT z.title, z.edits, z.distinct_editors
                 FROM (SELECT g.title, 1::bigint AS edits, 0::bigint AS distinct_editors FROM lakehouse.gold_page_hour g
                        WHERE g.hour OPERATOR(pg_catalog.=) w.hour AND g.wiki OPERATOR(pg_catalog.=) w.wiki
                          AND g.edits OPERATOR(pg_catalog.=) 1 AND g.editors OPERATOR(pg_catalog.=) 0
                        ORDER BY g.title LIMIT (SELECT NULL::bigint)) z) r) p;
  COMMENT ON VIEW gold.top_pages_hourly IS 'per hour (UTC) and wiki: pages by edits; filter on hour (and rank) for a top list';
  COMMENT ON COLUMN gold.top_pages_hourly.hour IS 'start of the hour, by event time';
  COMMENT ON COLUMN gold.top_pages_hourly.wiki IS 'wiki database name';
  COMMENT ON COLUMN gold.top_pages_hourly.title IS 'page title';
  COMMENT ON COLUMN gold.top_pages_hourly.edits IS 'edits and creations of the page in the hour';
  COMMENT ON COLUMN gold.top_pages_hourly.distinct_editors IS 'distinct users who edited it in the hour (exact)';
  COMMENT ON COLUMN gold.top_pages_hourly.rank IS '1 = most edited page of that wiki in that hour; ties broken by distinct editors, then title';
  GRANT SELECT ON gold.top_pages_hourly TO PUBLIC;
END $$;

-- A pipeline declared before 0.11.0 gets the index and the statistics now (owned by the
-- owner of its tables, as a pipeline declared now has them), gold_hour_wiki is analyzed so
-- that the statistics count at once, and gold.top_pages_hourly gets the new definition in
-- place: as in the 0.7.0 update, the view joins the extension for CREATE OR REPLACE and
-- leaves it again, and its owner, the views built on it and its privileges stay. The
-- pipeline's registry row is locked first, as a pass locks it first (a running pass
-- finishes before this; the next waits for the update to commit). The index is built under
-- a SHARE lock (1.3 s for 10 million page-hours here; the whole update 1.8 s); replacing
-- the view takes its ACCESS EXCLUSIVE lock until the update commits: readers of
-- gold.top_pages_hourly wait from then on, and a reader already running holds the update
-- (and so the next pass) back until it ends.
DO $upgrade$
DECLARE
  acl aclitem[];
  item record;
  owner regrole;
BEGIN
  PERFORM 1 FROM lakehouse.silver_tables s WHERE s.name = 'edits' FOR UPDATE;
  IF pg_catalog.to_regclass('lakehouse.gold_page_hour') IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
                      WHERE i.indrelid = pg_catalog.to_regclass('lakehouse.gold_page_hour') AND c.relname = 'gold_page_hour_unnamed') THEN
    CREATE INDEX gold_page_hour_unnamed ON lakehouse.gold_page_hour (hour, wiki, title) WHERE edits = 1 AND editors = 0;
  END IF;
  IF pg_catalog.to_regclass('lakehouse.gold_hour_wiki') IS NOT NULL THEN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_statistic_ext x
                    WHERE x.stxrelid = pg_catalog.to_regclass('lakehouse.gold_hour_wiki') AND x.stxname = 'gold_hour_wiki_pairs') THEN
      CREATE STATISTICS lakehouse.gold_hour_wiki_pairs (ndistinct) ON hour, wiki FROM lakehouse.gold_hour_wiki;
      owner := (SELECT c.relowner::regrole FROM pg_catalog.pg_class c WHERE c.oid = 'lakehouse.gold_hour_wiki'::regclass);
      EXECUTE pg_catalog.format('ALTER STATISTICS lakehouse.gold_hour_wiki_pairs OWNER TO %s', owner);
    END IF;
    ANALYZE lakehouse.gold_hour_wiki;
  END IF;
  IF pg_catalog.to_regclass('gold.top_pages_hourly') IS NOT NULL AND pg_catalog.to_regclass('lakehouse.gold_hour_wiki') IS NOT NULL THEN
    acl := (SELECT c.relacl FROM pg_catalog.pg_class c WHERE c.oid = 'gold.top_pages_hourly'::regclass);
    ALTER EXTENSION lakehouse ADD VIEW gold.top_pages_hourly;
    PERFORM lakehouse._recentchange_top_pages_view();
    ALTER EXTENSION lakehouse DROP VIEW gold.top_pages_hourly;
    REVOKE ALL ON gold.top_pages_hourly FROM PUBLIC;
    FOR item IN SELECT * FROM pg_catalog.aclexplode(acl) LOOP
      EXECUTE pg_catalog.format('GRANT %s ON gold.top_pages_hourly TO %s%s', item.privilege_type,
                                CASE WHEN item.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(item.grantee)) END,
                                CASE WHEN item.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
  END IF;
END $upgrade$;

-- Every silver table gets the new admit function (with its extract function and row type,
-- which are written together), as in the 0.10.0 update: they are the tables' own objects,
-- not the extension's, so they are taken out of it again. The registry rows are locked
-- first, as a pass locks its own: a running pass finishes with the old functions, the next
-- waits until ALTER EXTENSION commits. After the gold changes below, so that a reader of
-- gold.top_pages_hourly holding the view's replacement back holds back only the
-- recentchange pipeline's passes meanwhile, not every silver table's.
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
