-- lakehouse 0.13.0 -> 0.14.0:
-- - The recentchange pipeline's sessions move into lakehouse.editor_sessions, and
--   silver.editor_sessions becomes a view of it whose closed column is worked out from
--   silver.edits' low watermark as it stands: a pass no longer writes every session a
--   second time to close it (lakehouse._recentchange_close_sessions is gone, with the
--   partial index editor_sessions_open).
-- - A pass changes the sessions its edits extend in place (HOT: no indexed column changes,
--   fillfactor 75 leaves the room) instead of deleting and inserting every session it
--   touches.
-- - The sessions_reconcile check no longer counts sessions left open behind the watermark
--   (none can be); maintain() analyzes the gold tables as its step always said.
-- A declared pipeline is moved here, under the registry row's lock and then the table's
-- exclusive lock (readers of the sessions hold the update back; passes wait for it; a
-- refresh_silver() that had started before and waited fails once: the silver worker skips
-- a held table instead of waiting): the table keeps its rows,
-- owner and privileges (fillfactor 75 applies to pages written from now on); the view gets
-- the table's owner and SELECT for whoever could read the table. A view of your own that
-- reads silver.editor_sessions' closed column makes the update fail with its name (drop it
-- first and create it again afterwards); one that reads the other columns goes on reading
-- them from lakehouse.editor_sessions.
-- gold.top_pages_hourly's privileges, recorded by the 0.7.0 and 0.11.0 updates as initial
-- ones (so that pg_dump left them out), are forgotten as such.
-- The same definitions as in lakehouse--0.14.0.sql (the regress test `upgrade` compares them).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.14.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION lakehouse._check_sessions(OUT passed boolean, OUT detail text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  t lakehouse.silver_tables;
  since timestamptz;
  n_sessions bigint;
  bad_sessions bigint;
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
  -- compared with the stored sessions (lakehouse.editor_sessions) in both directions, every column. The stored
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
                  JOIN lakehouse.editor_sessions s ON s.wiki = u.wiki AND s.user_name = u.user_name AND s.session_start >= since)
  SELECT (SELECT pg_catalog.count(*) FROM have),
         (SELECT pg_catalog.count(*)
            FROM want w FULL JOIN have h
              ON h.wiki = w.wiki AND h.user_name = w.user_name AND h.session_start = w.session_start
           WHERE (w.session_end, w.edits, w.bytes_changed) IS DISTINCT FROM (h.session_end, h.edits::bigint, h.bytes_changed::bigint))
    INTO n_sessions, bad_sessions;
  passed := bad_sessions = 0;
  detail := CASE WHEN passed THEN pg_catalog.format('%s sessions starting since %s match silver.edits (gap %s)',
                                                    n_sessions, since, t.session_gap)
                 ELSE pg_catalog.format('since %s: %s sessions differ from silver.edits (gap %s)',
                                        since, bad_sessions, t.session_gap) END;
END $$;

CREATE OR REPLACE FUNCTION lakehouse._check_daily_marts(OUT passed boolean, OUT detail text) RETURNS record
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
                 JOIN lakehouse.editor_sessions x ON x.wiki = u.wiki AND x.user_name = u.user_name
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

CREATE OR REPLACE FUNCTION lakehouse._recentchange_create_gold() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  -- The sessions live in lakehouse.editor_sessions; silver.editor_sessions shows them with
  -- closed worked out from the low watermark as it stands, so that nothing has to write a
  -- session again when the watermark passes it. A pass changes the sessions its edits
  -- extend in place: no indexed column changes (the key holds the start, which stays), so
  -- the update is HOT when the page has room, which the fillfactor keeps for it.
  CREATE TABLE lakehouse.editor_sessions (
      wiki          text NOT NULL,
      user_name     text NOT NULL,
      session_start timestamptz NOT NULL,
      session_end   timestamptz NOT NULL,
      edits         integer NOT NULL,
      bytes_changed bigint NOT NULL,
      PRIMARY KEY (wiki, user_name, session_start)) WITH (fillfactor = 75);
  COMMENT ON TABLE lakehouse.editor_sessions IS 'behind silver.editor_sessions; kept by the silver pass';
  PERFORM lakehouse._recentchange_sessions_view();

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

CREATE OR REPLACE FUNCTION lakehouse._recentchange_on_admit() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $$
DECLARE
  gap interval;
  t lakehouse.silver_tables;
BEGIN
  SELECT * INTO t FROM lakehouse.silver_tables s WHERE s.name = 'edits';
  -- The gap was fixed when the pipeline was declared.
  gap := t.session_gap;

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
  -- edit is merged again with the new edits (gaps and islands: a new session starts where
  -- an edit starts more than the gap after everything before it). A late edit replayed
  -- into a closed session, or one that bridges two sessions, merges them. Sessions farther
  -- than the gap from every new edit cannot change.
  -- What that costs must follow the pass's size, not the table's: per (wiki, user) of the
  -- pass, two short reads of the primary key. The sessions of one (wiki, user) never
  -- overlap, so the ones reaching into [lo, hi] are those starting within it and at most
  -- one starting before lo, the latest such, if it ends at lo or after. (0.9.0 read every
  -- open session once per pass for editors whose edits were at or after the low
  -- watermark: a pass of a few edits read as many sessions as editors had been active
  -- within the gap. A join on (wiki, user) alone read every past session of the user: the
  -- planner hashed the whole table in every pass.)
  -- A merged session that starts where an old one did is that session, changed in place
  -- (the usual case: new edits extend the editor's latest session) or left alone when
  -- nothing changed; one with a new start is inserted; an old session whose start no
  -- merged one has was merged into another and is deleted. Old sessions are found and
  -- changed by row address. (Up to 0.13.0 every old session found was deleted and
  -- inserted again: a heap row and an index entry per session and pass.)
  WITH keys AS (SELECT n.wiki, n.user_name,
                       pg_catalog.min(n.event_time) - gap AS lo,
                       pg_catalog.max(n.event_time) + gap AS hi
                  FROM new_rows n WHERE n.wiki IS NOT NULL AND n.user_name IS NOT NULL GROUP BY 1, 2),
       old AS (SELECT x.* FROM keys k CROSS JOIN LATERAL (
                 SELECT s.ctid AS id, s.wiki, s.user_name, s.session_start, s.session_end, s.edits, s.bytes_changed
                   FROM lakehouse.editor_sessions s
                  WHERE s.wiki = k.wiki AND s.user_name = k.user_name
                    AND s.session_start >= k.lo AND s.session_start <= k.hi
                 UNION ALL
                 SELECT p.* FROM (SELECT s.ctid AS id, s.wiki, s.user_name, s.session_start, s.session_end, s.edits, s.bytes_changed
                                    FROM lakehouse.editor_sessions s
                                   WHERE s.wiki = k.wiki AND s.user_name = k.user_name AND s.session_start < k.lo
                                   ORDER BY s.session_start DESC LIMIT 1) p
                  WHERE p.session_end >= k.lo) x),
       items AS (SELECT o.wiki, o.user_name, o.session_start AS s, o.session_end AS e, o.edits AS n, o.bytes_changed AS b FROM old o
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
       -- Each merged session with the old one that starts where it does, if any.
       pair AS (SELECT m.*, o.id, coalesce((o.session_end, o.edits, o.bytes_changed) = (m.e, m.n, m.b), false) AS same
                  FROM merged m LEFT JOIN old o ON o.wiki = m.wiki AND o.user_name = m.user_name AND o.session_start = m.s),
       -- By row address, as the delete: the ANY list makes it a TID scan whatever the
       -- planner guesses of the pass's size (a join on ctid alone may hash the table).
       upd AS (UPDATE lakehouse.editor_sessions s SET session_end = p.e, edits = p.n, bytes_changed = p.b
                 FROM pair p
                WHERE s.ctid = ANY (ARRAY(SELECT q.id FROM pair q WHERE q.id IS NOT NULL AND NOT q.same))
                  AND s.ctid = p.id AND NOT p.same
               RETURNING 1),
       del AS (DELETE FROM lakehouse.editor_sessions s
                WHERE s.ctid = ANY (ARRAY(SELECT o.id FROM old o WHERE NOT EXISTS (SELECT 1 FROM pair p WHERE p.id = o.id)))
               RETURNING 1),
       ins AS (INSERT INTO lakehouse.editor_sessions (wiki, user_name, session_start, session_end, edits, bytes_changed)
               SELECT p.wiki, p.user_name, p.s, p.e, p.n, p.b FROM pair p WHERE p.id IS NULL
               RETURNING 1),
       -- What changed: each old session that did not stay as it was goes out of the daily
       -- marts, each merged one that is not such a session comes in.
       delta AS (SELECT (o.session_start AT TIME ZONE 'UTC')::date AS day, o.wiki, o.user_name, -1 AS k,
                        pg_catalog.floor(pg_catalog.date_part('epoch', o.session_end - o.session_start))::bigint AS len,
                        o.edits::bigint AS n
                   FROM old o WHERE NOT EXISTS (SELECT 1 FROM pair p WHERE p.id = o.id AND p.same)
                 UNION ALL
                 SELECT (p.s AT TIME ZONE 'UTC')::date, p.wiki, p.user_name, 1,
                        pg_catalog.floor(pg_catalog.date_part('epoch', p.e - p.s))::bigint,
                        p.n
                   FROM pair p WHERE NOT p.same),
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

  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION lakehouse._silver_pass(p_name text) RETURNS lakehouse.silver_pass_result
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_custom_plan'
    AS $_$
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
  -- The batch under the cursor must still be the one the last pass read.
  IF t.last_batch_committed_at IS NOT NULL AND NOT EXISTS (
       SELECT 1 FROM lakehouse.stream_progress p
        WHERE p.stream OPERATOR(pg_catalog.=) t.stream AND p.batch_id OPERATOR(pg_catalog.=) t.last_batch_id
          AND p.committed_at OPERATOR(pg_catalog.=) t.last_batch_committed_at) THEN
    RAISE EXCEPTION 'silver table "%" cannot find bronze batch % of stream "%", where its cursor stands', t.name, t.last_batch_id, t.stream
      USING ERRCODE = 'object_not_in_prerequisite_state',
            DETAIL = 'lakehouse.stream_progress no longer holds that batch as it was read, so the batches after the cursor cannot be told from the ones before it.',
            HINT = 'Keep stream_progress rows from the oldest silver cursor on. To start this table again from the beginning of bronze, drop and declare it again.';
  END IF;
  -- A cursor no pass has set yet stands just before the oldest batch create_silver() saw
  -- (see the top of this file): batch ids have no gaps, so the batch after it must be there
  -- as soon as any later one is (otherwise history after the cursor was pruned by hand).
  IF t.last_batch_committed_at IS NULL AND t.last_batch_id OPERATOR(pg_catalog.>) 0
     AND EXISTS (SELECT 1 FROM lakehouse.stream_progress p
                  WHERE p.stream OPERATOR(pg_catalog.=) t.stream AND p.batch_id OPERATOR(pg_catalog.>) t.last_batch_id)
     AND NOT EXISTS (SELECT 1 FROM lakehouse.stream_progress p
                      WHERE p.stream OPERATOR(pg_catalog.=) t.stream
                        AND p.batch_id OPERATOR(pg_catalog.=) (t.last_batch_id OPERATOR(pg_catalog.+) 1)) THEN
    RAISE EXCEPTION 'silver table "%" cannot find bronze batch % of stream "%", the first after its cursor', t.name, t.last_batch_id OPERATOR(pg_catalog.+) 1, t.stream
      USING ERRCODE = 'object_not_in_prerequisite_state',
            DETAIL = 'The table has not read any batch yet, and lakehouse.stream_progress lacks the one it starts with while it holds later ones: history was pruned after the table was declared.',
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
END $_$;

CREATE OR REPLACE FUNCTION lakehouse.create_recentchange_pipeline(stream text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  existing text;
BEGIN
  IF stream IS NULL THEN
    RAISE EXCEPTION 'stream must not be null' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  SELECT s.stream INTO existing FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) 'edits';
  IF existing IS NOT NULL THEN
    IF existing OPERATOR(pg_catalog.<>) stream THEN
      RAISE EXCEPTION 'silver.edits already belongs to stream "%"', existing
        USING ERRCODE = 'duplicate_object',
              HINT = 'One database holds one recentchange pipeline; drop it with lakehouse.drop_silver(''edits'') first.';
    END IF;
    RETURN;
  END IF;
  IF pg_catalog.to_regclass('silver.editor_sessions') IS NOT NULL OR pg_catalog.to_regclass('lakehouse.editor_sessions') IS NOT NULL
     OR pg_catalog.to_regclass('gold.edits_per_minute') IS NOT NULL THEN
    RAISE EXCEPTION 'silver.editor_sessions or the gold views exist from an earlier pipeline'
      USING ERRCODE = 'duplicate_table', HINT = 'Remove it with lakehouse.drop_recentchange_pipeline() first.';
  END IF;
  PERFORM lakehouse._declare_silver('edits', stream,
    ARRAY[lakehouse.silver_column('event_id', 'uuid', $e$(payload->'meta'->>'id')::uuid$e$),
          lakehouse.silver_column('event_time', 'timestamptz', $e$(payload->'meta'->>'dt')::timestamptz$e$),
          lakehouse.silver_column('wiki', 'text', $e$payload->>'wiki'$e$),
          lakehouse.silver_column('type', 'text', $e$payload->>'type'$e$),
          lakehouse.silver_column('namespace', 'integer', $e$(payload->>'namespace')::integer$e$),
          lakehouse.silver_column('title', 'text', $e$payload->>'title'$e$),
          lakehouse.silver_column('user_name', 'text', $e$payload->>'user'$e$),
          lakehouse.silver_column('is_bot', 'boolean', $e$(payload->>'bot')::boolean$e$),
          lakehouse.silver_column('is_minor', 'boolean', $e$coalesce((payload->>'minor')::boolean, false)$e$),
          lakehouse.silver_column('length_old', 'integer', $e$(payload->'length'->>'old')::integer$e$),
          lakehouse.silver_column('length_new', 'integer', $e$(payload->'length'->>'new')::integer$e$),
          lakehouse.silver_column('revision_old', 'bigint', $e$(payload->'revision'->>'old')::bigint$e$),
          lakehouse.silver_column('revision_new', 'bigint', $e$(payload->'revision'->>'new')::bigint$e$),
          lakehouse.silver_column('comment', 'text', $e$payload->>'comment'$e$)],
    ARRAY['event_id'], 'event_time', $e$payload->>'type' IN ('edit', 'new')$e$,
    NULL, '1 day', 100000, '5 minutes', true, current_user::regrole);
  -- The session gap is fixed now, like the watermark: sessions must not change meaning later.
  UPDATE lakehouse.silver_tables s SET session_gap = pg_catalog.current_setting('lakehouse.session_gap')::interval
   WHERE s.name = 'edits';
  COMMENT ON TABLE silver.edits IS
    'Wikimedia recentchange edit and new-page events, each once (dedup on meta.id), on time by the watermark';
  COMMENT ON COLUMN silver.edits.event_id IS 'meta.id: the event''s UUID, the dedup key';
  COMMENT ON COLUMN silver.edits.event_time IS 'meta.dt: when the change happened (UTC)';
  COMMENT ON COLUMN silver.edits.wiki IS 'wiki database name, such as enwiki';
  COMMENT ON COLUMN silver.edits.type IS 'edit or new (a page creation)';
  COMMENT ON COLUMN silver.edits.length_old IS 'page length in bytes before the change (NULL for new pages)';
  COMMENT ON COLUMN silver.edits.length_new IS 'page length in bytes after the change';
  COMMENT ON COLUMN silver.edits.kafka_partition IS 'where the admitted copy sits in bronze: partition';
  COMMENT ON COLUMN silver.edits.kafka_offset IS 'where the admitted copy sits in bronze: offset';
  PERFORM lakehouse._recentchange_create_gold();
END $_$;

CREATE OR REPLACE FUNCTION lakehouse.drop_recentchange_pipeline() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  -- The registry row first, as a pass takes it first: a running pass finishes before this.
  PERFORM 1 FROM lakehouse.silver_tables s WHERE s.name = 'edits' FOR UPDATE;
  DROP VIEW IF EXISTS gold.edits_per_minute, gold.top_pages_hourly, gold.editor_activity_daily, gold.session_stats_daily,
                      silver.editor_sessions;
  DROP TABLE IF EXISTS lakehouse.gold_minute, lakehouse.gold_page_hour, lakehouse.gold_hour_wiki,
                       lakehouse.gold_editor_day, lakehouse.gold_session_length_day, lakehouse.editor_sessions;
  IF EXISTS (SELECT 1 FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) 'edits') THEN
    PERFORM lakehouse._drop_silver('edits', true);
  END IF;
END $$;

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
  -- The recentchange pipeline's sessions and gold tables (up to 0.13.0 only the sessions,
  -- though the step said both).
  IF pg_catalog.to_regclass('lakehouse.editor_sessions') IS NOT NULL THEN
    ANALYZE lakehouse.editor_sessions, lakehouse.gold_minute, lakehouse.gold_page_hour, lakehouse.gold_hour_wiki,
            lakehouse.gold_editor_day, lakehouse.gold_session_length_day;
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

CREATE FUNCTION lakehouse._recentchange_sessions_view() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  -- silver.editor_sessions over lakehouse.editor_sessions, closed worked out from the low
  -- watermark of silver.edits as it stands; made by _recentchange_create_gold and by the
  -- 0.14.0 update (which gives it the owner and readers of the table it replaces).
  CREATE VIEW silver.editor_sessions AS
    SELECT s.wiki, s.user_name, s.session_start, s.session_end, s.edits, s.bytes_changed,
           coalesce(s.session_end < (SELECT t.low_watermark - t.session_gap FROM lakehouse.silver_tables t
                                      WHERE t.name = 'edits'), false) AS closed
      FROM lakehouse.editor_sessions s;
  COMMENT ON VIEW silver.editor_sessions IS
    'per wiki and user, consecutive edits with gaps of at most lakehouse.session_gap; kept by each silver pass over silver.edits';
  COMMENT ON COLUMN silver.editor_sessions.wiki IS 'wiki database name';
  COMMENT ON COLUMN silver.editor_sessions.user_name IS 'user name (or IP address for anonymous edits)';
  COMMENT ON COLUMN silver.editor_sessions.session_start IS 'event time of the first edit';
  COMMENT ON COLUMN silver.editor_sessions.session_end IS 'event time of the last edit';
  COMMENT ON COLUMN silver.editor_sessions.edits IS 'edits (and page creations) in the session';
  COMMENT ON COLUMN silver.editor_sessions.bytes_changed IS 'sum over its edits of |length_new - length_old|';
  COMMENT ON COLUMN silver.editor_sessions.closed IS 'the low watermark of silver.edits has passed session_end + session_gap: no on-time edit can extend it';
END $$;
REVOKE ALL ON FUNCTION lakehouse._recentchange_sessions_view() FROM PUBLIC;

-- A declared pipeline: its registry row first, as a pass takes it, so that a running pass
-- finishes with the old functions and the next waits for this update.
DO $upgrade$
DECLARE
  acl aclitem[];
  item record;
  owner regrole;
  readers text;
BEGIN
  PERFORM 1 FROM lakehouse.silver_tables s WHERE s.name = 'edits' FOR UPDATE;
  -- A table there is a pipeline's from before 0.14.0 (regclass text is resolved when
  -- planned, hence to_regclass throughout).
  IF (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass('silver.editor_sessions')) = 'r' THEN
    SELECT c.relacl, c.relowner::regrole INTO acl, owner FROM pg_catalog.pg_class c
     WHERE c.oid = pg_catalog.to_regclass('silver.editor_sessions');
    -- Views of the user's own that read closed would hold the column back: named here, with
    -- what to do, rather than by DROP COLUMN's own error.
    SELECT pg_catalog.string_agg(DISTINCT r.ev_class::regclass::text, ', ') INTO readers
      FROM pg_catalog.pg_depend d
      JOIN pg_catalog.pg_rewrite r ON d.classid = 'pg_catalog.pg_rewrite'::regclass AND d.objid = r.oid
      JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
     WHERE d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = pg_catalog.to_regclass('silver.editor_sessions')
       AND a.attname = 'closed';
    IF readers IS NOT NULL THEN
      RAISE EXCEPTION 'the update to 0.14.0 replaces column closed of silver.editor_sessions, which % read',
                      readers
        USING ERRCODE = 'dependent_objects_still_exist',
              DETAIL = 'silver.editor_sessions becomes a view that works closed out from the low watermark of silver.edits; the sessions move to lakehouse.editor_sessions.',
              HINT = 'Drop those views, run ALTER EXTENSION lakehouse UPDATE again, then create them again (silver.editor_sessions keeps its columns).';
    END IF;
    DROP INDEX IF EXISTS silver.editor_sessions_open;
    ALTER TABLE silver.editor_sessions SET SCHEMA lakehouse;
    ALTER TABLE lakehouse.editor_sessions DROP COLUMN closed;
    ALTER TABLE lakehouse.editor_sessions SET (fillfactor = 75);
    COMMENT ON TABLE lakehouse.editor_sessions IS 'behind silver.editor_sessions; kept by the silver pass';
    COMMENT ON COLUMN lakehouse.editor_sessions.session_start IS NULL;
    COMMENT ON COLUMN lakehouse.editor_sessions.session_end IS NULL;
    COMMENT ON COLUMN lakehouse.editor_sessions.edits IS NULL;
    COMMENT ON COLUMN lakehouse.editor_sessions.bytes_changed IS NULL;
    -- The view as _recentchange_create_gold makes it, with the table's owner and readers.
    -- Created inside this script, it is a member of the extension until the end of the
    -- block, and GRANTs here are recorded as initial privileges (pg_dump would then leave
    -- them out): leaving the extension last forgets them.
    PERFORM lakehouse._recentchange_sessions_view();
    EXECUTE pg_catalog.format('ALTER VIEW silver.editor_sessions OWNER TO %s', owner);
    FOR item IN SELECT * FROM pg_catalog.aclexplode(acl) x WHERE x.privilege_type = 'SELECT' AND x.grantee <> owner::oid LOOP
      EXECUTE pg_catalog.format('GRANT SELECT ON silver.editor_sessions TO %s%s',
                                CASE WHEN item.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(item.grantee)) END,
                                CASE WHEN item.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    ALTER EXTENSION lakehouse DROP VIEW silver.editor_sessions;
  END IF;
  -- The 0.7.0 and 0.11.0 updates granted on gold.top_pages_hourly after taking it out of the
  -- extension, which recorded those grants as its initial privileges: pg_dump left them out.
  -- In and out again forgets them.
  IF pg_catalog.to_regclass('gold.top_pages_hourly') IS NOT NULL
     AND EXISTS (SELECT 1 FROM pg_catalog.pg_init_privs i
                  WHERE i.classoid = 'pg_catalog.pg_class'::regclass AND i.objoid = pg_catalog.to_regclass('gold.top_pages_hourly')) THEN
    ALTER EXTENSION lakehouse ADD VIEW gold.top_pages_hourly;
    ALTER EXTENSION lakehouse DROP VIEW gold.top_pages_hourly;
  END IF;
END $upgrade$;

DROP FUNCTION lakehouse._recentchange_close_sessions(timestamp with time zone, interval);
