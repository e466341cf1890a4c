-- lakehouse 0.12.0 -> 0.13.0:
-- - Two more asset checks, for what gold_reconciles does not compare:
--   sessions_reconcile:edits, the sessions starting since the hour before the newest event's
--   against gaps and islands recomputed from silver.edits (and no session left open behind
--   the watermark); daily_marts_reconcile:edits, each complete day once, the editors of
--   gold.editor_activity_daily and the session lengths of gold.session_stats_daily against
--   silver.edits and silver.editor_sessions. The recentchange checks run only for the
--   pipeline's own declaration of silver.edits.
-- - drop_silver() drops only what a role of the caller declared (any lakehouse_admin member
--   could drop any silver table, its data included); the work is in _drop_silver(), which
--   drop_recentchange_pipeline() calls.
-- - A silver pass without a late row is told so from its partitions' extremes: the window
--   over the whole pass (a sort) that finds late rows runs only when one can be late.
--   Every silver table's extract and admit functions are written again, by the new
--   lakehouse._silver_regenerate_all() (the 0.10.0 to 0.12.0 updates each held a copy of
--   it): an object of your own that depends on them makes the update fail (drop it first).
-- The same definitions as in lakehouse--0.13.0.sql (the regress test `upgrade` compares them).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.13.0'" to load this file. \quit

CREATE FUNCTION lakehouse._check_sessions(OUT passed boolean, OUT detail text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  t lakehouse.silver_tables;
  since timestamptz;
  n_sessions bigint;
  bad_sessions bigint;
  left_open bigint;
BEGIN
  SELECT * INTO t FROM lakehouse.silver_tables s WHERE s.name = 'edits';
  since := pg_catalog.date_trunc('hour', t.max_event_time, 'UTC') - interval '1 hour';
  IF since IS NULL THEN
    passed := true;
    detail := 'silver.edits is empty';
    RETURN;
  END IF;
  -- The sessions starting since the window's start, recomputed from silver.edits (gaps and
  -- islands over the edits from one gap before it: an island found to start inside the
  -- window is exact, since any edit within the gap before its first one is read too), and
  -- compared with silver.editor_sessions in both directions, every column. The stored
  -- sessions are found through the editors of the window (their primary key), not by a
  -- scan of the whole table: a session starts with one of its editor's edits.
  WITH e AS (SELECT x.wiki, x.user_name, x.event_time AS t,
                    pg_catalog.abs(coalesce(x.length_new, 0) - coalesce(x.length_old, 0)) AS b
               FROM silver.edits x
              WHERE x.event_time >= since - t.session_gap AND x.wiki IS NOT NULL AND x.user_name IS NOT NULL),
       m AS (SELECT e.*, CASE WHEN e.t > pg_catalog.lag(e.t) OVER w + t.session_gap THEN 1 ELSE 0 END AS brk
               FROM e WINDOW w AS (PARTITION BY e.wiki, e.user_name ORDER BY e.t)),
       g AS (SELECT m.*, pg_catalog.sum(m.brk) OVER (PARTITION BY m.wiki, m.user_name ORDER BY m.t ROWS UNBOUNDED PRECEDING) AS grp
               FROM m),
       want AS (SELECT g.wiki, g.user_name, pg_catalog.min(g.t) AS session_start, pg_catalog.max(g.t) AS session_end,
                       pg_catalog.count(*) AS edits, pg_catalog.sum(g.b) AS bytes_changed
                  FROM g GROUP BY g.wiki, g.user_name, g.grp HAVING pg_catalog.min(g.t) >= since),
       have AS (SELECT s.wiki, s.user_name, s.session_start, s.session_end, s.edits, s.bytes_changed
                  FROM (SELECT DISTINCT e.wiki, e.user_name FROM e WHERE e.t >= since) u
                  JOIN silver.editor_sessions s ON s.wiki = u.wiki AND s.user_name = u.user_name AND s.session_start >= since)
  SELECT (SELECT pg_catalog.count(*) FROM have),
         (SELECT pg_catalog.count(*)
            FROM want w FULL JOIN have h
              ON h.wiki = w.wiki AND h.user_name = w.user_name AND h.session_start = w.session_start
           WHERE (w.session_end, w.edits, w.bytes_changed) IS DISTINCT FROM (h.session_end, h.edits::bigint, h.bytes_changed::bigint))
    INTO n_sessions, bad_sessions;
  -- A session is closed once the low watermark has passed its end plus the gap; the pass
  -- that moves the watermark closes them in its transaction.
  SELECT pg_catalog.count(*) INTO left_open
    FROM silver.editor_sessions s, lakehouse.silver_tables x
   WHERE x.name = 'edits' AND NOT s.closed AND s.session_end < x.low_watermark - x.session_gap;
  passed := bad_sessions = 0 AND left_open = 0;
  detail := CASE WHEN passed THEN pg_catalog.format('%s sessions starting since %s match silver.edits (gap %s); none left open behind the watermark',
                                                    n_sessions, since, t.session_gap)
                 ELSE pg_catalog.format('since %s: %s sessions differ from silver.edits (gap %s); %s sessions still open though the watermark passed their end plus the gap',
                                        since, bad_sessions, t.session_gap, left_open) END;
END $$;

REVOKE ALL ON FUNCTION lakehouse._check_sessions(OUT passed boolean, OUT detail text) FROM PUBLIC;

CREATE FUNCTION lakehouse._check_daily_marts(OUT passed boolean, OUT detail text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  cname constant text := 'daily_marts_reconcile:edits';
  t lakehouse.silver_tables;
  last_done integer;
  newest_done date;
  first_day date;
  d date;
  n_days integer := 0;
  bad_editors bigint;
  bad_lengths bigint;
  problem text;
BEGIN
  SELECT * INTO t FROM lakehouse.silver_tables s WHERE s.name = 'edits';
  -- A day is complete once the low watermark has passed its end by the session gap: the
  -- partitions the watermark follows send no more on-time edits of it, and no session of
  -- theirs starts on it any more. Each complete day is compared once (a scan of that day of
  -- silver.edits), a few days a run at most; the first run takes the newest complete day.
  newest_done := ((t.low_watermark - t.session_gap) AT TIME ZONE 'UTC')::date - 1;
  IF newest_done IS NULL THEN
    passed := true;
    detail := 'no complete day yet';
    RETURN;
  END IF;
  SELECT c.position INTO last_done FROM lakehouse.check_state c WHERE c.check_name = cname AND c.kafka_partition = -1;
  -- (a position past the newest complete day: the watermark went back; start from it again)
  IF last_done IS NULL OR date '2000-01-01' + last_done > newest_done THEN
    first_day := newest_done;
  ELSE
    first_day := date '2000-01-01' + last_done + 1;
  END IF;
  d := first_day;
  WHILE d <= newest_done AND n_days < 3 LOOP
    -- Editors of the day: edits and the bot flag from silver.edits, sessions from
    -- silver.editor_sessions (those starting that day: each starts with one of the day's
    -- edits, so its editor is among the day's), against gold_editor_day; and the day's
    -- session lengths against gold_session_length_day. One statement: one snapshot.
    WITH e AS (SELECT x.wiki, x.user_name, x.is_bot FROM silver.edits x
                WHERE x.event_time >= (d::timestamp AT TIME ZONE 'UTC') AND x.event_time < ((d + 1)::timestamp AT TIME ZONE 'UTC')
                  AND x.wiki IS NOT NULL AND x.user_name IS NOT NULL),
         u AS (SELECT e.wiki, e.user_name, pg_catalog.count(*) AS edits, pg_catalog.bool_or(coalesce(e.is_bot, false)) AS is_bot
                 FROM e GROUP BY 1, 2),
         s AS (SELECT x.wiki, x.user_name, x.session_start, x.session_end, x.edits FROM u
                 JOIN silver.editor_sessions x ON x.wiki = u.wiki AND x.user_name = u.user_name
                  AND x.session_start >= (d::timestamp AT TIME ZONE 'UTC') AND x.session_start < ((d + 1)::timestamp AT TIME ZONE 'UTC')),
         sc AS (SELECT s.wiki, s.user_name, pg_catalog.count(*) AS sessions FROM s GROUP BY 1, 2),
         want AS (SELECT u.wiki, u.user_name, u.edits, coalesce(sc.sessions, 0) AS sessions, u.is_bot
                    FROM u LEFT JOIN sc ON sc.wiki = u.wiki AND sc.user_name = u.user_name),
         have AS (SELECT g.wiki, g.user_name, g.edits, g.sessions, g.is_bot FROM lakehouse.gold_editor_day g WHERE g.day = d),
         lw AS (SELECT pg_catalog.floor(pg_catalog.date_part('epoch', s.session_end - s.session_start))::bigint AS length_s,
                       pg_catalog.count(*) AS sessions, pg_catalog.sum(s.edits) AS edits
                  FROM s GROUP BY 1),
         lh AS (SELECT l.length_s, l.sessions, l.edits FROM lakehouse.gold_session_length_day l
                 WHERE l.day = d AND (l.sessions <> 0 OR l.edits <> 0))
    SELECT (SELECT pg_catalog.count(*) FROM want w FULL JOIN have h ON h.wiki = w.wiki AND h.user_name = w.user_name
             WHERE (w.edits, w.sessions, w.is_bot) IS DISTINCT FROM (h.edits, h.sessions, h.is_bot)),
           (SELECT pg_catalog.count(*) FROM lw FULL JOIN lh ON lh.length_s = lw.length_s
             WHERE (lw.sessions, lw.edits) IS DISTINCT FROM (lh.sessions, lh.edits))
      INTO bad_editors, bad_lengths;
    n_days := n_days + 1;
    IF bad_editors > 0 OR bad_lengths > 0 THEN
      problem := pg_catalog.format('%s: %s editors differ in gold.editor_activity_daily, %s session lengths in gold.session_stats_daily',
                                   d, bad_editors, bad_lengths);
      EXIT;
    END IF;
    d := d + 1;
  END LOOP;
  -- The position is the last day that passed: a day that fails is compared again next run
  -- (and the days after it wait for it).
  IF n_days > 0 THEN
    INSERT INTO lakehouse.check_state (check_name, kafka_partition, position) VALUES (cname, -1, (d - 1) - date '2000-01-01')
    ON CONFLICT (check_name, kafka_partition) DO UPDATE SET position = excluded.position;
  END IF;
  passed := problem IS NULL;
  detail := CASE WHEN NOT passed THEN problem
                 WHEN n_days = 0 THEN pg_catalog.format('no new complete day (compared up to %s)', date '2000-01-01' + last_done)
                 ELSE pg_catalog.format('%s complete days (%s to %s): editors per day and session lengths match silver.edits and silver.editor_sessions%s',
                                        n_days, first_day, d - 1,
                                        CASE WHEN d <= newest_done THEN pg_catalog.format('; %s more to compare in the next runs', newest_done - d + 1)
                                             ELSE '' END) END;
END $$;

REVOKE ALL ON FUNCTION lakehouse._check_daily_marts(OUT passed boolean, OUT detail text) FROM PUBLIC;

CREATE FUNCTION lakehouse._drop_silver(name text, drop_data boolean) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  t lakehouse.silver_tables;
BEGIN
  SELECT * INTO t FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) _drop_silver.name FOR UPDATE;
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
  DELETE FROM lakehouse.check_state c
   WHERE c.check_name OPERATOR(pg_catalog.=) ANY (ARRAY['silver_passes:' || t.name, 'daily_marts_reconcile:' || t.name]);
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

REVOKE ALL ON FUNCTION lakehouse._drop_silver(name text, drop_data boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION lakehouse.run_checks(freshness_bound interval DEFAULT '00:05:00'::interval) RETURNS TABLE(check_name text, passed boolean, detail text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  run bigint := pg_catalog.nextval('lakehouse.check_runs');
  s lakehouse.streams;
  t lakehouse.silver_tables;
  names text[] := '{}';
  results lakehouse.check_outcome[] := '{}';
  r record;
BEGIN
  -- One run at a time: the incremental checks move their positions.
  PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('lakehouse.run_checks'));
  FOR s IN SELECT * FROM lakehouse.streams x WHERE pg_catalog.to_regclass(pg_catalog.format('bronze.%I', x.name)) IS NOT NULL
            ORDER BY x.name LOOP
    names := names || ('bronze_offsets_once:' || s.name);
    r := lakehouse._check_bronze_offsets(s);
    results := results || ROW(r.passed, r.detail)::lakehouse.check_outcome;
    names := names || ('bronze_matches_broker:' || s.name);
    r := lakehouse._check_bronze_broker(s);
    results := results || ROW(r.passed, r.detail)::lakehouse.check_outcome;
  END LOOP;
  FOR t IN SELECT * FROM lakehouse.silver_tables x ORDER BY x.name LOOP
    names := names || ('silver_keys_once:' || t.name);
    r := lakehouse._check_silver_keys(t);
    results := results || ROW(r.passed, r.detail)::lakehouse.check_outcome;
    names := names || ('silver_passes:' || t.name);
    r := lakehouse._check_silver_passes(t);
    results := results || ROW(r.passed, r.detail)::lakehouse.check_outcome;
    names := names || ('silver_freshness:' || t.name);
    r := lakehouse._check_silver_freshness(t, freshness_bound);
    results := results || ROW(r.passed, r.detail)::lakehouse.check_outcome;
  END LOOP;
  -- The recentchange pipeline's checks, for its own declaration of silver.edits only (the
  -- one create_recentchange_pipeline() made: it alone has a session gap): they compare its
  -- columns with the pipeline's types.
  IF pg_catalog.to_regclass('lakehouse.gold_minute') IS NOT NULL
     AND EXISTS (SELECT 1 FROM lakehouse.silver_tables x WHERE x.name = 'edits' AND x.session_gap IS NOT NULL) THEN
    names := names || 'gold_reconciles:edits'::text;
    r := lakehouse._check_gold();
    results := results || ROW(r.passed, r.detail)::lakehouse.check_outcome;
    names := names || 'sessions_reconcile:edits'::text;
    r := lakehouse._check_sessions();
    results := results || ROW(r.passed, r.detail)::lakehouse.check_outcome;
    names := names || 'daily_marts_reconcile:edits'::text;
    r := lakehouse._check_daily_marts();
    results := results || ROW(r.passed, r.detail)::lakehouse.check_outcome;
  END IF;
  FOR i IN 1 .. pg_catalog.cardinality(names) LOOP
    r := results[i];
    INSERT INTO lakehouse.check_results (run_id, check_name, passed, detail) VALUES (run, names[i], r.passed, r.detail);
    check_name := names[i];
    passed := r.passed;
    detail := r.detail;
    RETURN NEXT;
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION lakehouse.drop_silver(name text, drop_data boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
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
  -- Operators (lakehouse_admin) drop only what a role of theirs declared: with drop_data the
  -- silver rows go too, and those belong to the declaring role. (The recentchange pipeline,
  -- declared by the extension, goes with drop_recentchange_pipeline().)
  IF NOT pg_catalog.pg_has_role(session_user, t.owner, 'MEMBER') THEN
    RAISE EXCEPTION 'permission denied to drop silver table "%"', t.name
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = pg_catalog.format('It was declared by role %s.', t.owner),
            HINT = CASE WHEN t.session_gap IS NOT NULL THEN 'It is the recentchange pipeline''s: drop it with lakehouse.drop_recentchange_pipeline().'
                        ELSE 'Ask a member of that role, or a superuser, to drop it.' END;
  END IF;
  PERFORM lakehouse._drop_silver(name, drop_data);
END $$;

CREATE OR REPLACE FUNCTION lakehouse.drop_recentchange_pipeline() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  -- The registry row first, as a pass takes it first: a running pass finishes before this.
  PERFORM 1 FROM lakehouse.silver_tables s WHERE s.name = 'edits' FOR UPDATE;
  DROP VIEW IF EXISTS gold.edits_per_minute, gold.top_pages_hourly, gold.editor_activity_daily, gold.session_stats_daily;
  DROP TABLE IF EXISTS lakehouse.gold_minute, lakehouse.gold_page_hour, lakehouse.gold_hour_wiki,
                       lakehouse.gold_editor_day, lakehouse.gold_session_length_day, silver.editor_sessions;
  IF EXISTS (SELECT 1 FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) 'edits') THEN
    PERFORM lakehouse._drop_silver('edits', true);
  END IF;
END $$;

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
      -- A pass without a late row (most: a pass spans seconds, the watermark minutes) is
      -- told from its partitions' extremes, without the window below, which sorts the whole
      -- pass: a row can only be late if its partition's earliest event time lies a
      -- watermark behind the newest the partition reached (in this pass, or before it).
      IF NOT lh_check_late OR NOT EXISTS (
           SELECT 1
             FROM (SELECT s.lh_partition, min(s.%4$s) AS lh_lo, max(s.%4$s) AS lh_hi
                     FROM unnest(lh_rows) AS s(%10$s)
                    WHERE s.lh_taken AND s.lh_reject IS NULL GROUP BY s.lh_partition) m
             LEFT JOIN (SELECT e.key::integer AS lh_p, e.value::timestamptz AS lh_m0
                          FROM jsonb_each_text(coalesce(lh_part_max, '{}')) e) b ON b.lh_p = m.lh_partition
            WHERE m.lh_lo < greatest(m.lh_hi, b.lh_m0) - lh_delay) THEN
        lh_late := array_fill(false, ARRAY[coalesce(cardinality(lh_rows), 0)]);
      ELSE
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
      END IF;

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

CREATE FUNCTION lakehouse._silver_regenerate_all() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  t lakehouse.silver_tables;
  fn text;
BEGIN
  -- What an update that changes _silver_generate runs (0.13.0 on; the 0.10.0 to 0.12.0
  -- updates each held a copy): every silver table gets its extract and admit functions and
  -- their row type written again. They are the tables' own objects, not the extension's,
  -- so they are taken out of it again. The registry rows are locked first, as a pass locks
  -- its own: a running pass finishes with the old functions, the next waits for the commit.
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
END $$;

REVOKE ALL ON FUNCTION lakehouse._silver_regenerate_all() FROM PUBLIC;

SELECT lakehouse._silver_regenerate_all();
