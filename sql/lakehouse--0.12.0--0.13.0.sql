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
