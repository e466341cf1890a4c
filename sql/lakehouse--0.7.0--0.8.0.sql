-- lakehouse 0.7.0 -> 0.8.0: a silver pass whose cost no longer grows with
-- silver.editor_sessions, and gold queries over a day read from indexes.
-- The pass found the sessions a new edit may merge with by joining on (wiki, user) alone:
-- every past session of the user matched, and as the table grew the planner hashed all of
-- it in every pass (2,600,000 sessions: 45,000,000 rows read in 37 passes). Edits at or
-- after the low watermark now look among the open sessions only, read once per pass
-- through the partial index editor_sessions_open; edits behind it take two short reads of
-- the primary key; the sessions found are deleted by row address. gold_editor_day_top
-- (day, edits DESC) serves gold.editor_activity_daily's ORDER BY edits DESC LIMIT n for a
-- day without sorting all of its editors; gold_minute's primary key carries every column,
-- so that a day of gold.edits_per_minute is an index-only scan.
-- The same definitions as in lakehouse--0.8.0.sql (the regress test `upgrade` compares them).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.8.0'" to load this file. \quit

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
  -- The (hour, wiki) pairs of gold_page_hour: gold.top_pages_hourly ranks the pages of
  -- each pair apart, so that a top-N query over a day reads N entries per pair.
  CREATE TABLE lakehouse.gold_hour_wiki (hour timestamptz NOT NULL, wiki text NOT NULL, PRIMARY KEY (hour, wiki));
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
  wm timestamptz;
  olds silver.editor_sessions[];
  open_from timestamptz;
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
  -- list of editor names (nearly every page-hour is new in a pass: one insert). The edits
  -- are grouped by page-hour and editor first, so that each page-hour's editors come
  -- distinct without a sort per page-hour (what count(DISTINCT) and array_agg(DISTINCT)
  -- would do). date_bin on UTC hours and minutes is date_trunc(..., 'UTC'), cheaper; its
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
         (editors, editor_names) = (SELECT pg_catalog.count(*), coalesce(pg_catalog.array_agg(u.name), '{}')
                                      FROM (SELECT DISTINCT x.name
                                              FROM unnest(g.editor_names || excluded.editor_names) AS x(name)) u);
  INSERT INTO lakehouse.gold_hour_wiki (hour, wiki)
  SELECT DISTINCT pg_catalog.date_bin('1 hour', n.event_time, '4714-11-24 00:00:00+00 BC'), n.wiki
    FROM new_rows n WHERE n.wiki IS NOT NULL AND n.title IS NOT NULL
  ON CONFLICT DO NOTHING;

  -- Sessions. Every session of a touched (wiki, user) that lies within the gap of a new
  -- edit is taken out and merged again with the new edits (gaps and islands: a new
  -- session starts where an edit starts more than the gap after everything before it). A
  -- late edit replayed into a closed session, or one that bridges two sessions, merges
  -- them. Sessions farther than the gap from every new edit cannot change.
  -- What that costs must not grow with the table's history. A closed session ended more
  -- than the gap before the low watermark that closed it (wm or older), so a (wiki, user)
  -- whose new edits are all at or after wm can reach open sessions only: those are read
  -- once per pass through editor_sessions_open (a partial index: as many entries as
  -- sessions are open, whatever the table keeps) and joined to the edits' (wiki, user)s.
  -- open_from, a bound at or below every such (wiki, user)'s reach, is computed first so
  -- that the plan sees it as a value (its histogram says few sessions end after it).
  -- A (wiki, user) with an edit behind wm (a late edit replayed, an on-time edit of a
  -- partition that was quiet or is new) takes two short reads of the primary key: the
  -- sessions of one (wiki, user) never overlap, so the ones reaching into [lo, hi] are
  -- those starting within it and at most one starting before lo, the latest such, if it
  -- ends at lo or after. What is found is deleted by row address. (A join on (wiki, user) alone read
  -- every past session of the user: the planner hashed the whole table in every pass.)
  SELECT pg_catalog.min(n.event_time) - gap INTO open_from
    FROM new_rows n WHERE n.wiki IS NOT NULL AND n.user_name IS NOT NULL AND (wm IS NULL OR n.event_time >= wm);
  WITH keys AS (SELECT n.wiki, n.user_name,
                       pg_catalog.min(n.event_time) - gap AS lo,
                       pg_catalog.max(n.event_time) + gap AS hi,
                       (wm IS NULL OR pg_catalog.min(n.event_time) >= wm) AS open_only
                  FROM new_rows n WHERE n.wiki IS NOT NULL AND n.user_name IS NOT NULL GROUP BY 1, 2),
       open AS MATERIALIZED (SELECT s.ctid AS id, s.wiki, s.user_name, s.session_start, s.session_end
                               FROM silver.editor_sessions s
                              WHERE NOT s.closed
                                AND s.session_end >= open_from),
       hit AS (SELECT o.id FROM keys k JOIN open o ON o.wiki = k.wiki AND o.user_name = k.user_name
                WHERE k.open_only AND o.session_start <= k.hi AND o.session_end >= k.lo
               UNION ALL
               SELECT x.id FROM keys k CROSS JOIN LATERAL (
                 SELECT s.ctid AS id FROM silver.editor_sessions s
                  WHERE s.wiki = k.wiki AND s.user_name = k.user_name
                    AND s.session_start >= k.lo AND s.session_start <= k.hi
                 UNION ALL
                 SELECT p.id FROM (SELECT s.ctid AS id, s.session_end FROM silver.editor_sessions s
                                    WHERE s.wiki = k.wiki AND s.user_name = k.user_name AND s.session_start < k.lo
                                    ORDER BY s.session_start DESC LIMIT 1) p
                  WHERE p.session_end >= k.lo) x
                WHERE NOT k.open_only),
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

-- A pipeline declared before 0.8.0 gets the new index now, and gold_minute's primary key
-- is rebuilt (a row per minute and wiki; an operator may have renamed it: it is found by
-- its kind). The pipeline's registry row is locked first, as a pass locks it first: a
-- running pass finishes before this, and the next one waits for the update to commit
-- (taking the tables' locks in another order than the pass does could deadlock with it).
-- Readers of gold.editor_activity_daily go on while its index is built; readers of
-- gold.edits_per_minute wait for the new key. An index of the same name already on the
-- table is kept; a relation of that name elsewhere in the schema is an error.
DO $upgrade$
DECLARE
  pk name;
BEGIN
  PERFORM 1 FROM lakehouse.silver_tables s WHERE s.name = 'edits' FOR UPDATE;
  IF pg_catalog.to_regclass('lakehouse.gold_editor_day') IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
                      WHERE i.indrelid = pg_catalog.to_regclass('lakehouse.gold_editor_day') AND c.relname = 'gold_editor_day_top') THEN
    CREATE INDEX gold_editor_day_top ON lakehouse.gold_editor_day (day, edits DESC);
  END IF;
  IF pg_catalog.to_regclass('lakehouse.gold_minute') IS NOT NULL THEN
    SELECT c.conname INTO pk FROM pg_catalog.pg_constraint c
     WHERE c.conrelid = 'lakehouse.gold_minute'::regclass AND c.contype = 'p';
    IF pk IS NOT NULL THEN
      EXECUTE pg_catalog.format('ALTER TABLE lakehouse.gold_minute DROP CONSTRAINT %I', pk);
    END IF;
    ALTER TABLE lakehouse.gold_minute
      ADD PRIMARY KEY (minute, wiki) INCLUDE (edits, new_pages, bot_edits, human_edits, bytes_added, bytes_removed);
  END IF;
END $upgrade$;
