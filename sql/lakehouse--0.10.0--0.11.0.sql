-- lakehouse 0.10.0 -> 0.11.0: a day's gold.top_pages_hourly top list is planned as what it
-- reads. Each of the view's three runs gets a limit of unknown value that limits nothing
-- (the planner then costs the run as a tenth of its rows instead of all of them: the
-- window's run condition, which stops the read, is not costed by PostgreSQL 15); the third
-- run (pages edited once by no named editor) its own small index; gold_hour_wiki ndistinct
-- statistics on (hour, wiki). Before, a day's top list was costed as every page-hour of the
-- day, past jit_above_cost, with a Memoize that never hit.
-- The same definitions as in lakehouse--0.11.0.sql (the regress test `upgrade` compares them).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.11.0'" to load this file. \quit

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
