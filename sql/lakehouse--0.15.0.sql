-- lakehouse 0.13.0, full install script: what CREATE EXTENSION lakehouse runs for 0.13.0
-- (PostgreSQL takes a version's own install script over the chain of upgrades).
--
-- A copy of lakehouse--0.12.0.sql (of 0.11.0's, of 0.10.0's, of 0.9.0's, of 0.8.0's, of 0.7.0's, of 0.6.0's, of 0.5.0's, made once from the
-- upgrade chain with pg_dump --schema-only, plus the parts pg_dump does not write: the role,
-- the configuration tables' registration, MODULE_PATHNAME) with 0.13.0's functions edited
-- in, as lakehouse--0.12.0--0.13.0.sql writes them. Kept by hand: a new version copies it to
-- lakehouse--X.sql and edits it, and writes the upgrade script beside it. Never regenerate it from the chain: the regress test
-- `upgrade` installs from this file and from 0.1.0 upgraded step by step and compares the
-- two object by object (column types, defaults, constraints, indexes, triggers, function
-- definitions, privileges, comments); two independent paths are what lets it fail.
--
-- What each object is for is said in its COMMENT and in the upgrade script that added it.
\echo Use "CREATE EXTENSION lakehouse" to load this file. \quit

-- schema bronze

CREATE SCHEMA bronze;

-- schema gold

CREATE SCHEMA gold;

-- schema lakehouse

CREATE SCHEMA lakehouse;

-- schema silver

CREATE SCHEMA silver;

-- role lakehouse_admin: may manage streams and silver tables without being a superuser
-- (a cluster-wide role: created once, kept when the extension is dropped).
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'lakehouse_admin') THEN
    CREATE ROLE lakehouse_admin NOLOGIN;
  END IF;
END $$;

-- type lakehouse.check_outcome

CREATE TYPE lakehouse.check_outcome AS (
	passed boolean,
	detail text
);

-- type lakehouse.silver_column

CREATE TYPE lakehouse.silver_column AS (
	name text,
	type text,
	expr text
);

-- type lakehouse.silver_pass_result

CREATE TYPE lakehouse.silver_pass_result AS (
	silver text,
	pass_id bigint,
	kind text,
	rows_in bigint,
	rows_out bigint,
	duplicates_dropped bigint,
	late_dropped bigint,
	invalid bigint,
	filtered bigint,
	watermark timestamp with time zone,
	error text
);

-- table lakehouse.streams

CREATE TABLE lakehouse.streams (
    name text NOT NULL,
    topic text NOT NULL,
    brokers text,
    start_from text DEFAULT 'earliest'::text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    worker_pid integer,
    state text DEFAULT 'created'::text NOT NULL,
    last_error text,
    state_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT stream_name_is_plain CHECK ((name ~ '^[a-z_][a-z0-9_]{0,62}$'::text))
);

-- function lakehouse._check_bronze_broker(lakehouse.streams)

CREATE FUNCTION lakehouse._check_bronze_broker(s lakehouse.streams, OUT passed boolean, OUT detail text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  w record;
  answered boolean := false;
  problems text[] := '{}';
  lag bigint := 0;
  o lakehouse.offsets;
BEGIN
  FOR w IN SELECT * FROM lakehouse._watermarks_or_nothing(s.topic, s.brokers) ORDER BY 1 LOOP
    answered := true;
    SELECT * INTO o FROM lakehouse.offsets f WHERE f.stream = s.name AND f.kafka_partition = w.partition;
    IF NOT FOUND THEN
      problems := problems || pg_catalog.format('partition %s is not tracked', w.partition);
    ELSIF o.next_offset > w.high THEN
      problems := problems || pg_catalog.format('partition %s: next_offset %s is past the broker''s high watermark %s',
                                                w.partition, o.next_offset, w.high);
    ELSIF o.next_offset < w.low AND o.error IS NULL THEN
      problems := problems || pg_catalog.format('partition %s: next_offset %s is below the broker''s low watermark %s (records gone before they were read)',
                                                w.partition, o.next_offset, w.low);
    ELSE
      lag := lag + (w.high - o.next_offset);
    END IF;
  END LOOP;
  IF NOT answered THEN
    passed := NULL;
    detail := pg_catalog.format('skipped: the brokers gave no watermarks for topic %s within 2 s (down, unreachable, or no such topic)', s.topic);
    RETURN;
  END IF;
  passed := pg_catalog.cardinality(problems) = 0;
  detail := CASE WHEN passed THEN pg_catalog.format('every partition within the broker''s offsets; %s messages not yet in bronze', lag)
                 ELSE pg_catalog.array_to_string(problems, '; ') END;
END $$;

-- function lakehouse._check_bronze_offsets(lakehouse.streams)

CREATE FUNCTION lakehouse._check_bronze_offsets(s lakehouse.streams, OUT passed boolean, OUT detail text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  cname text := 'bronze_offsets_once:' || s.name;
  o record;
  from_off bigint;
  n_rows bigint;
  n_dead bigint;
  beyond bigint;
  skipped bigint;
  passed_by bigint;
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
                                                WHERE d.stream = $2 AND d.kafka_partition = $1),
                                              (SELECT min(k.from_offset) FROM lakehouse.skipped_offsets k
                                                WHERE k.stream = $2 AND k.kafka_partition = $1))', s.name)
        INTO from_off USING o.kafka_partition, s.name;
      from_off := coalesce(from_off, o.next_offset);
    END IF;
    -- An offsets row moved back behind what is counted already: the stream would read
    -- those offsets again (bronze's key refuses them), and the count below has no range.
    IF o.next_offset < from_off THEN
      problems := problems || pg_catalog.format('partition %s: next_offset %s is behind offset %s, from which this check counts the partition (the offsets row moved back)',
                                                o.kafka_partition, o.next_offset, from_off);
      CONTINUE;
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
    -- Offsets the worker passed without a message (transaction markers, aborted records,
    -- compacted records) are explained.
    SELECT coalesce(pg_catalog.sum(LEAST(k.to_offset, o.next_offset) - GREATEST(k.from_offset, from_off)), 0)
      INTO passed_by
      FROM lakehouse.skipped_offsets k
     WHERE k.stream = s.name AND k.kafka_partition = o.kafka_partition
       -- Ranges never overlap: from the one that holds from_off on (an index range scan).
       AND k.from_offset >= coalesce((SELECT m.from_offset FROM lakehouse.skipped_offsets m
                                       WHERE m.stream = s.name AND m.kafka_partition = o.kafka_partition
                                         AND m.from_offset <= from_off
                                       ORDER BY m.from_offset DESC LIMIT 1), from_off)
       AND k.to_offset > from_off AND k.from_offset < o.next_offset;
    checked := checked + (o.next_offset - from_off);
    IF n_rows + n_dead + skipped + passed_by <> o.next_offset - from_off THEN
      problems := problems || pg_catalog.format('partition %s: offsets %s to %s hold %s rows and %s dead letters (%s skipped by reset_offsets, %s passed without a message), not %s',
                                                o.kafka_partition, from_off, o.next_offset - 1, n_rows, n_dead, skipped, passed_by, o.next_offset - from_off);
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
  detail := CASE WHEN passed THEN pg_catalog.format('%s new offsets checked, each a row, a dead letter or passed without a message once', checked)
                 ELSE pg_catalog.array_to_string(problems, '; ') END;
END $_$;

-- function lakehouse._check_gold()

CREATE FUNCTION lakehouse._check_gold(OUT passed boolean, OUT detail text) RETURNS record
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

-- function lakehouse._check_sessions()

CREATE FUNCTION lakehouse._check_sessions(OUT passed boolean, OUT detail text) RETURNS record
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

-- function lakehouse._check_daily_marts()

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

-- table lakehouse.silver_tables

CREATE TABLE lakehouse.silver_tables (
    name text NOT NULL,
    stream text NOT NULL,
    columns lakehouse.silver_column[] NOT NULL,
    key text[] NOT NULL,
    event_time text NOT NULL,
    filter text NOT NULL,
    watermark interval NOT NULL,
    partition_interval interval NOT NULL,
    max_rows_per_pass integer NOT NULL,
    future_limit interval NOT NULL,
    continuous boolean NOT NULL,
    owner regrole NOT NULL,
    granted_select boolean NOT NULL,
    session_gap interval,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_batch_id bigint DEFAULT 0 NOT NULL,
    last_batch_committed_at timestamp with time zone,
    max_event_time timestamp with time zone,
    last_pass_id bigint DEFAULT 0 NOT NULL,
    low_watermark timestamp with time zone,
    CONSTRAINT silver_name_is_plain CHECK ((name ~ '^[a-z_][a-z0-9_]{0,39}$'::text)),
    CONSTRAINT silver_tables_max_rows_per_pass_check CHECK ((max_rows_per_pass > 0))
);

-- comment lakehouse.COLUMN silver_tables.max_event_time

COMMENT ON COLUMN lakehouse.silver_tables.max_event_time IS 'newest event time seen on time, over all partitions';

-- comment lakehouse.COLUMN silver_tables.low_watermark

COMMENT ON COLUMN lakehouse.silver_tables.low_watermark IS 'lowest watermark of the partitions that had bronze rows in the last <watermark> of commit time; never goes back';

-- function lakehouse._check_silver_freshness(lakehouse.silver_tables, interval)

CREATE FUNCTION lakehouse._check_silver_freshness(t lakehouse.silver_tables, bound interval, OUT passed boolean, OUT detail text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  oldest timestamptz;
  waiting bigint;
BEGIN
  SELECT pg_catalog.min(p.committed_at), pg_catalog.count(*) INTO oldest, waiting
    FROM lakehouse.stream_progress p WHERE p.stream = t.stream AND p.batch_id > t.last_batch_id;
  passed := oldest IS NULL OR pg_catalog.clock_timestamp() - oldest <= bound;
  detail := CASE WHEN oldest IS NULL THEN 'caught up with bronze'
                 ELSE pg_catalog.format('%s bronze batches waiting, the oldest committed %s ago (bound %s)%s', waiting,
                                        pg_catalog.date_trunc('second', pg_catalog.clock_timestamp() - oldest), bound,
                                        CASE WHEN NOT t.continuous THEN '; continuous refresh is off' ELSE '' END) END;
END $$;

-- function lakehouse._check_silver_keys(lakehouse.silver_tables)

CREATE FUNCTION lakehouse._check_silver_keys(t lakehouse.silver_tables, OUT passed boolean, OUT detail text) RETURNS record
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  bad_indexes bigint;
  dups bigint;
  since timestamptz;
BEGIN
  SELECT pg_catalog.count(*) INTO bad_indexes
    FROM pg_catalog.pg_partition_tree(pg_catalog.format('silver.%I', t.name)::regclass) p
    LEFT JOIN pg_catalog.pg_index i ON i.indrelid = p.relid AND i.indisprimary
   WHERE i.indexrelid IS NULL OR NOT (i.indisunique AND i.indisvalid);
  since := t.max_event_time - t.watermark - interval '1 hour';
  EXECUTE pg_catalog.format('SELECT count(*) FROM (SELECT 1 FROM silver.%I WHERE %I >= $1 GROUP BY %s HAVING count(*) > 1) d',
                            t.name, t.event_time,
                            (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(k), ', ') FROM unnest(t.key) k))
    INTO dups USING since;
  passed := bad_indexes = 0 AND dups = 0;
  detail := CASE WHEN bad_indexes > 0 THEN pg_catalog.format('%s tables of silver.%s lack a valid unique key', bad_indexes, t.name)
                 WHEN dups > 0 THEN pg_catalog.format('%s keys appear more than once in silver.%s since %s', dups, t.name, since)
                 ELSE pg_catalog.format('unique key valid on every partition; no key twice since %s', since) END;
END $_$;

-- function lakehouse._check_silver_passes(lakehouse.silver_tables)

CREATE FUNCTION lakehouse._check_silver_passes(t lakehouse.silver_tables, OUT passed boolean, OUT detail text) RETURNS record
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

-- function lakehouse._create_silver(text, text, lakehouse.silver_column[], text[], text, text, interval, interval, integer, interval, boolean, regrole)

CREATE FUNCTION lakehouse._create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean, owner regrole) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF owner IS NULL OR NOT pg_catalog.pg_has_role(session_user, owner, 'MEMBER') THEN
    RAISE EXCEPTION 'role "%" cannot declare a silver table for role "%"', session_user, owner
      USING ERRCODE = 'insufficient_privilege',
            HINT = 'Call lakehouse.create_silver(), which declares it for the current role.';
  END IF;
  PERFORM lakehouse._declare_silver(name, stream, columns, key, event_time, filter, watermark, partition_interval,
                                    max_rows_per_pass, future_limit, continuous, owner);
END $$;

-- function lakehouse._cron_checks(interval)

CREATE FUNCTION lakehouse._cron_checks(freshness_bound interval) RETURNS bigint
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT count(*) FILTER (WHERE NOT c.passed) FROM lakehouse.run_checks(freshness_bound) c $$;

-- function lakehouse._cron_maintain(interval, interval)

CREATE FUNCTION lakehouse._cron_maintain(keep interval, bronze_retention interval) RETURNS bigint
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT count(*) FROM lakehouse.maintain(keep, bronze_retention) $$;

-- function lakehouse._cron_refresh()

CREATE FUNCTION lakehouse._cron_refresh() RETURNS bigint
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT coalesce(sum(r.rows_in), 0)::bigint FROM lakehouse.refresh_silver() r $$;

-- function lakehouse._declare_silver(text, text, lakehouse.silver_column[], text[], text, text, interval, interval, integer, interval, boolean, regrole)

CREATE FUNCTION lakehouse._declare_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean, owner regrole) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  col lakehouse.silver_column;
  cols lakehouse.silver_column[] := '{}';
  seen text[] := '{}';
  k text;
  typ regtype;
  time_type text;
  t lakehouse.silver_tables;
  ddl text := '';
  granted boolean;
  stale boolean;
  oldest bigint;
BEGIN
  IF name IS NULL OR stream IS NULL OR columns IS NULL OR key IS NULL OR event_time IS NULL
     OR partition_interval IS NULL OR max_rows_per_pass IS NULL OR future_limit IS NULL
     OR continuous IS NULL OR owner IS NULL THEN
    RAISE EXCEPTION 'only filter and watermark may be null' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF name !~ '^[a-z_][a-z0-9_]{0,39}$' THEN
    RAISE EXCEPTION 'invalid silver table name "%"', name
      USING ERRCODE = 'invalid_name',
            DETAIL = 'A silver name becomes the table silver.<name>: 1 to 40 lower-case letters, digits or underscores, not starting with a digit.',
            HINT = 'Choose a name such as edits.';
  END IF;
  IF EXISTS (SELECT 1 FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) _declare_silver.name) THEN
    RAISE EXCEPTION 'silver table "%" is already declared', name
      USING ERRCODE = 'duplicate_object', HINT = 'Drop it first with lakehouse.drop_silver(), or pick another name.';
  END IF;
  IF pg_catalog.to_regclass(pg_catalog.format('silver.%I', name)) IS NOT NULL THEN
    RAISE EXCEPTION 'table silver.% already exists', name
      USING ERRCODE = 'duplicate_table', HINT = 'A dropped silver table keeps its data; drop or rename that table, or pick another name.';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM lakehouse.streams s WHERE s.name OPERATOR(pg_catalog.=) stream)
     OR pg_catalog.to_regclass(pg_catalog.format('bronze.%I', stream)) IS NULL THEN
    RAISE EXCEPTION 'stream "%" does not exist', stream
      USING ERRCODE = 'undefined_object', HINT = 'Create it with lakehouse.create_stream(); see SELECT name FROM lakehouse.streams.';
  END IF;
  IF pg_catalog.cardinality(columns) = 0 THEN
    RAISE EXCEPTION 'a silver table needs at least one column' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOREACH col IN ARRAY columns LOOP
    IF col.name IS NULL OR col.name !~ '^[a-z_][a-z0-9_]{0,62}$' OR col.name ~ '^lh_'
       OR col.name IN ('kafka_partition', 'kafka_offset') THEN
      RAISE EXCEPTION 'invalid column name "%"', col.name
        USING ERRCODE = 'invalid_name',
              DETAIL = 'Column names are 1 to 63 lower-case letters, digits or underscores; kafka_partition and kafka_offset are added by lakehouse, and lh_ is reserved.';
    END IF;
    IF col.name OPERATOR(pg_catalog.=) ANY (seen) THEN
      RAISE EXCEPTION 'column "%" is declared twice', col.name USING ERRCODE = 'duplicate_column';
    END IF;
    seen := seen || col.name;
    IF col.expr IS NULL OR pg_catalog.btrim(col.expr) = '' THEN
      RAISE EXCEPTION 'column "%" has no expression', col.name USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF col.type ~ '[()]' THEN
      RAISE EXCEPTION 'column "%" has a type with a modifier, "%"', col.name, col.type
        USING ERRCODE = 'feature_not_supported', HINT = 'Use the type without its modifier (text instead of varchar(3), numeric instead of numeric(5,1)).';
    END IF;
    BEGIN
      typ := pg_catalog.to_regtype(col.type);
    EXCEPTION WHEN OTHERS THEN
      typ := NULL;
    END;
    IF typ IS NULL THEN
      RAISE EXCEPTION 'column "%" has an unknown type "%"', col.name, col.type
        USING ERRCODE = 'undefined_object', HINT = 'Use a type name such as text, integer, bigint, boolean, uuid or timestamptz.';
    END IF;
    cols := cols || ROW(col.name, pg_catalog.format_type(typ, NULL), col.expr)::lakehouse.silver_column;
  END LOOP;
  IF pg_catalog.cardinality(key) = 0 THEN
    RAISE EXCEPTION 'the dedup key needs at least one column' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  FOREACH k IN ARRAY key LOOP
    IF k IS NULL OR NOT k OPERATOR(pg_catalog.=) ANY (seen) THEN
      RAISE EXCEPTION 'key column "%" is not a declared column', k
        USING ERRCODE = 'undefined_column', HINT = 'The key names columns of the declaration, such as ARRAY[''event_id''].';
    END IF;
    IF k OPERATOR(pg_catalog.=) event_time THEN
      RAISE EXCEPTION 'the event time column "%" cannot also be a key column', k
        USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Silver''s unique key is (event time, key); the event time is in it already.';
    END IF;
  END LOOP;
  SELECT c.type INTO time_type FROM pg_catalog.unnest(cols) c WHERE c.name OPERATOR(pg_catalog.=) event_time;
  IF time_type IS NULL THEN
    RAISE EXCEPTION 'event time column "%" is not a declared column', event_time USING ERRCODE = 'undefined_column';
  END IF;
  IF time_type <> 'timestamp with time zone' THEN
    RAISE EXCEPTION 'event time column "%" must be timestamptz, not %', event_time, time_type
      USING ERRCODE = 'datatype_mismatch';
  END IF;
  IF watermark IS NOT NULL AND watermark <= '0'::interval THEN
    RAISE EXCEPTION 'watermark must be positive' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF partition_interval OPERATOR(pg_catalog.<>) '1 month'::interval
     AND (pg_catalog.date_part('month', partition_interval) <> 0 OR pg_catalog.date_part('year', partition_interval) <> 0
          OR partition_interval < '1 hour'::interval) THEN
    RAISE EXCEPTION 'invalid partition_interval %', partition_interval
      USING ERRCODE = 'invalid_parameter_value', HINT = 'Use ''1 month'' or a fixed length of at least an hour, such as ''1 day'' or ''7 days''.';
  END IF;
  IF max_rows_per_pass < 1 THEN
    RAISE EXCEPTION 'max_rows_per_pass must be at least 1' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF future_limit < '0'::interval THEN
    RAISE EXCEPTION 'future_limit must not be negative' USING ERRCODE = 'invalid_parameter_value';
  END IF;

  -- A new table reads bronze from its first batch, which needs that batch's
  -- stream_progress row: refuse if maintain() pruned rows whose bronze rows are still
  -- there (they would be skipped). Serialised with maintain() by this lock.
  PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('lakehouse.stream_progress:' || stream));
  SELECT pg_catalog.min(p.batch_id) INTO oldest FROM lakehouse.stream_progress p WHERE p.stream = _declare_silver.stream;
  IF oldest IS NOT NULL AND oldest > 1 THEN
    EXECUTE pg_catalog.format('SELECT EXISTS (SELECT 1 FROM bronze.%I b WHERE b.batch_id < $1)', stream) INTO stale USING oldest;
    IF stale THEN
      RAISE EXCEPTION 'bronze.% holds batches older than its oldest stream_progress row (batch %)', stream, oldest
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = 'Silver reads bronze batch by batch through lakehouse.stream_progress; the rows of pruned batches would be skipped.',
              HINT = 'Declare silver tables before maintain() prunes stream_progress, or remove those bronze rows first (maintain(bronze_retention => ...)).';
    END IF;
  END IF;
  -- The owner reads the stream's bronze rows (rolled back with the rest if a check fails).
  granted := NOT pg_catalog.has_table_privilege(owner, pg_catalog.format('bronze.%I', stream), 'SELECT');
  EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA bronze, silver TO %s', owner);
  IF granted THEN
    EXECUTE pg_catalog.format('GRANT SELECT ON bronze.%I TO %s', stream, owner);
  END IF;
  -- Each expression planned with the owner's rights, so a mistake is named.
  FOREACH col IN ARRAY cols LOOP
    PERFORM lakehouse._silver_check_expression(owner, stream, pg_catalog.format('column "%s"', col.name), col.expr, col.type);
  END LOOP;
  PERFORM lakehouse._silver_check_expression(owner, stream, 'filter', coalesce(filter, 'true'), 'boolean');

  INSERT INTO lakehouse.silver_tables (name, stream, columns, key, event_time, filter, watermark,
                                       partition_interval, max_rows_per_pass, future_limit, continuous, owner,
                                       granted_select, last_batch_id)
  VALUES (name, stream, cols, key, event_time, coalesce(filter, 'true'),
          coalesce(watermark, pg_catalog.current_setting('lakehouse.watermark')::interval),
          partition_interval, max_rows_per_pass, future_limit, continuous, owner, granted,
          GREATEST(coalesce(oldest, 1) - 1, 0))
  RETURNING * INTO t;

  -- Partitioned by event time; unique on (event time, key). See README for why.
  FOREACH col IN ARRAY cols LOOP
    ddl := ddl || pg_catalog.format('%I %s%s, ', col.name, col.type,
                                    CASE WHEN col.name OPERATOR(pg_catalog.=) ANY (key || event_time) THEN ' NOT NULL' ELSE '' END);
  END LOOP;
  EXECUTE pg_catalog.format('CREATE TABLE silver.%I (%s kafka_partition integer NOT NULL, kafka_offset bigint NOT NULL, PRIMARY KEY (%I, %s)) PARTITION BY RANGE (%I)',
                            name, ddl, event_time,
                            (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(x), ', ') FROM pg_catalog.unnest(key) x),
                            event_time);
  EXECUTE pg_catalog.format('COMMENT ON TABLE silver.%I IS %L', name,
                            pg_catalog.format('deduplicated events of stream %s: one row per key, kept by lakehouse (declared with lakehouse.create_silver)', stream));
  EXECUTE pg_catalog.format('GRANT SELECT ON silver.%I TO lakehouse_admin, %s', name, owner);

  PERFORM lakehouse._silver_generate(t);
  -- The whole extraction once over no rows, with the owner's rights.
  PERFORM lakehouse._exec_as(owner::oid, pg_catalog.format(
    'SELECT lakehouse.%I(0, 0, ''{}'', ''{}'', ''{}'', pg_catalog.now())', 'silver_' || name || '_extract'));
END $_$;

-- function lakehouse._drop_silver(text, boolean)

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

-- function lakehouse._exec_as(oid, text)

CREATE FUNCTION lakehouse._exec_as(role oid, sql text) RETURNS void
    LANGUAGE c STRICT
    AS 'MODULE_PATHNAME', 'lakehouse_exec_as';

-- function lakehouse._recentchange_comment_edits()

CREATE FUNCTION lakehouse._recentchange_comment_edits() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  -- The columns of silver.edits that 0.14.0 left without a comment; made by
  -- create_recentchange_pipeline and by the 0.15.0 update for a pipeline declared before.
  COMMENT ON COLUMN silver.edits.namespace IS 'namespace number of the page (0 articles, 1 talk, 2 user pages, ...)';
  COMMENT ON COLUMN silver.edits.title IS 'page title, with its namespace prefix';
  COMMENT ON COLUMN silver.edits.user_name IS 'who made the change: user name, or IP address for an anonymous edit';
  COMMENT ON COLUMN silver.edits.is_bot IS 'whether the editor is flagged as a bot';
  COMMENT ON COLUMN silver.edits.is_minor IS 'whether the editor marked the edit minor (false when absent)';
  COMMENT ON COLUMN silver.edits.revision_old IS 'revision id before the change (NULL for new pages)';
  COMMENT ON COLUMN silver.edits.revision_new IS 'revision id the change created';
  COMMENT ON COLUMN silver.edits.comment IS 'the edit summary the editor wrote';
END $$;

-- function lakehouse._recentchange_create_gold()

CREATE FUNCTION lakehouse._recentchange_create_gold() RETURNS void
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

-- function lakehouse._recentchange_on_admit()

CREATE FUNCTION lakehouse._recentchange_on_admit() RETURNS trigger
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

-- function lakehouse._recentchange_sessions_view()

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

-- function lakehouse._recentchange_top_pages_view()

CREATE FUNCTION lakehouse._recentchange_top_pages_view() RETURNS void
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

-- function lakehouse._require_pg_cron()

CREATE FUNCTION lakehouse._require_pg_cron() RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
    RAISE EXCEPTION 'pg_cron is not installed in database "%"', pg_catalog.current_database()
      USING ERRCODE = 'object_not_in_prerequisite_state',
            DETAIL = 'lakehouse.schedule() creates pg_cron jobs; continuous silver needs no scheduler.',
            HINT = pg_catalog.format('Install pg_cron (Debian: apt-get install postgresql-15-cron), add pg_cron to shared_preload_libraries, set cron.database_name = ''%s'', restart the server, then run CREATE EXTENSION pg_cron in this database.',
                                     pg_catalog.current_database());
  END IF;
END $$;

-- function lakehouse._select_array_as(oid, text, anyarray, bigint, bigint, integer[], bigint[], bigint[], timestamp with time zone)

CREATE FUNCTION lakehouse._select_array_as(role oid, sql text, template anyarray, p1 bigint, p2 bigint, p3 integer[], p4 bigint[], p5 bigint[], p6 timestamp with time zone) RETURNS anyarray
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'lakehouse_select_array_as';

-- function lakehouse._silver_bucket(timestamp with time zone, interval)

CREATE FUNCTION lakehouse._silver_bucket(t timestamp with time zone, step interval) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
  SELECT CASE WHEN step OPERATOR(pg_catalog.=) '1 month'::interval
              THEN pg_catalog.date_trunc('month', t, 'UTC')
              ELSE pg_catalog.date_bin(step, t, '2000-01-03 00:00:00+00'::timestamptz) END
$$;

-- function lakehouse._silver_check_expression(regrole, text, text, text, text)

CREATE FUNCTION lakehouse._silver_check_expression(owner regrole, stream text, what text, expr text, type text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  -- Planned where the extract evaluates it, per row: in a WHERE clause, which refuses what
  -- a select list would take and the extract cannot (an aggregate, a set-returning or a
  -- window function), over bronze under an alias no expression can name (the extract's
  -- own aliases are not the table's name). Up to 0.14.0 a select list over bronze.<stream>
  -- let those through, and the first pass failed without naming the column.
  PERFORM lakehouse._exec_as(owner::oid, pg_catalog.format('SELECT 1 FROM bronze.%I AS lh_bronze WHERE (%s) IS NULL LIMIT 0',
    stream,
    CASE WHEN type = 'boolean' THEN pg_catalog.format('(%s) IS TRUE', expr)   -- a filter: boolean, no cast
         ELSE pg_catalog.format('(%s)::%s', expr, type) END));
EXCEPTION WHEN OTHERS THEN
  DECLARE
    msg text; code text;
  BEGIN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, code = RETURNED_SQLSTATE;
    RAISE EXCEPTION 'invalid % expression: %', what, msg
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = pg_catalog.format('The expression was: %s (as %s, over bronze.%s, with the rights of role %s). SQLSTATE %s.',
                                       expr, type, stream, owner, code),
            HINT = 'Expressions see the bronze row''s columns (payload, kafka_partition, kafka_offset, kafka_timestamp, kafka_key); qualify functions outside pg_catalog with their schema.';
  END;
END $$;

-- function lakehouse._silver_ensure_partition(text, timestamp with time zone, interval)

CREATE FUNCTION lakehouse._silver_ensure_partition(name text, bucket timestamp with time zone, step interval) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  part text := name OPERATOR(pg_catalog.||) '_p' OPERATOR(pg_catalog.||)
               pg_catalog.to_char(bucket AT TIME ZONE 'UTC', 'YYYYMMDD"T"HH24MI');
  upper timestamptz;
BEGIN
  IF pg_catalog.to_regclass(pg_catalog.format('silver.%I', part)) IS NOT NULL THEN
    -- A table of that name that is not a partition of the silver table (one detached by
    -- hand, say) would make the insert fail with a check violation, which a pass would
    -- take for its rows' fault (0.15.0): say what is wrong instead, and stop the pass.
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i
                    WHERE i.inhrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(pg_catalog.format('silver.%I', part))
                      AND i.inhparent OPERATOR(pg_catalog.=) pg_catalog.to_regclass(pg_catalog.format('silver.%I', name))) THEN
      RAISE EXCEPTION 'silver.% exists but is not a partition of silver.%', part, name
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = pg_catalog.format('A pass needs it for event times from %s on.', bucket),
              HINT = 'Attach it again (ALTER TABLE ... ATTACH PARTITION), or rename or drop it so that the pass can make a new one.';
    END IF;
    RETURN;
  END IF;
  upper := CASE WHEN step OPERATOR(pg_catalog.=) '1 month'::interval
                THEN (pg_catalog.date_trunc('month', bucket, 'UTC') AT TIME ZONE 'UTC'
                      OPERATOR(pg_catalog.+) '1 month'::interval) AT TIME ZONE 'UTC'
                ELSE bucket OPERATOR(pg_catalog.+) step END;
  -- CREATE TABLE ... PARTITION OF would lock the parent against readers (ACCESS
  -- EXCLUSIVE); ATTACH PARTITION of a new, empty table takes only SHARE UPDATE EXCLUSIVE.
  EXECUTE pg_catalog.format('CREATE TABLE silver.%I (LIKE silver.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, name);
  EXECUTE pg_catalog.format('ALTER TABLE silver.%I ATTACH PARTITION silver.%I FOR VALUES FROM (%L) TO (%L)',
                            name, part, bucket, upper);
END $$;

-- function lakehouse._silver_generate(lakehouse.silver_tables)

CREATE FUNCTION lakehouse._silver_generate(t lakehouse.silver_tables) RETURNS void
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
  s_cols text := '';         -- , s."c", ...
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
    s_cols := s_cols || pg_catalog.format(', s.%I', col.name);
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
  -- lakehouse._select_array_as with the declaring role's rights. TimeZone is pinned
  -- (0.15.0; before, the session's own applied, and clients such as JDBC set their own): a
  -- zone-less time is UTC whoever runs the pass (the silver worker, a client's
  -- refresh_silver() or replay_late()), so a copy gets its original's key.
  EXECUTE pg_catalog.format($f$
    CREATE FUNCTION %1$s(lh_after bigint, lh_upto bigint, lh_parts integer[], lh_los bigint[],
                         lh_his bigint[], lh_max_time timestamptz)
    RETURNS %2$s[] LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    SET TimeZone = 'UTC'
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
                         lh_pass bigint, lh_probe boolean DEFAULT false,
                         OUT n_in bigint, OUT n_filtered bigint, OUT n_invalid bigint,
                         OUT n_out bigint, OUT n_dup bigint, OUT n_late bigint, OUT part_max jsonb,
                         OUT part_min_admitted jsonb, OUT min_admitted timestamptz)
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, pg_temp
    SET TimeZone = 'UTC'
    SET work_mem = '64MB'
    SET plan_cache_mode = force_custom_plan
    AS $body$
    #variable_conflict use_column
    DECLARE
      lh_b timestamptz;
      lh_valid bigint;
      lh_late_rows %2$s[];
      lh_late boolean[];
      lh_state text;
      lh_msg text;
      lh_err text;
      lh_los integer[];
      lh_his integer[];
      lh_lo integer;
      lh_hi integer;
      lh_n integer;
      lh_detail text;
      lh_tried %2$s[];
      lh_candidates bigint;
      lh_bad integer[] := '{}';
      lh_why text[] := '{}';
    BEGIN
    -- A row can fit the declaration and still not be writable: a value over a unique
    -- index's size limit, a number that overflows in the table's triggers (the
    -- recentchange pipeline's gold), a check constraint. Up to 0.14.0 such a row failed
    -- every pass for good. Its error, of the classes that are the row's fault, is caught
    -- here; the rows that fail alone are found below and the pass is done again with them
    -- as rejects (silver_rejects, counted invalid) and the others admitted. Any other
    -- error (a lock, a privilege, out of memory) still stops the pass.
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
      RETURN;
    EXCEPTION
      WHEN foreign_key_violation THEN
        RAISE;   -- the row may fit once what it refers to is there: the pass waits for it
      WHEN data_exception OR integrity_constraint_violation OR program_limit_exceeded THEN
        IF lh_probe THEN
          RAISE;
        END IF;
        GET STACKED DIAGNOSTICS lh_state = RETURNED_SQLSTATE, lh_msg = MESSAGE_TEXT, lh_detail = PG_EXCEPTION_DETAIL;
    END;

    -- Which rows fail alone. The trials see the pass as it was judged: its late rows not
    -- taken (they go to silver_late, not into silver, and need no partition), the other
    -- rows as they are, none judged late again (lh_probe: and errors not caught). Halves
    -- of a failing range are tried, each trial undone, down to single rows: about two
    -- trials per level of halving and failing row. An error that no single row has, or
    -- that more rows have than a row's fault explains (over 100 in one pass, or every row
    -- of a pass of 10 or more: an error of the table, not of its rows), stops the pass as
    -- before, as does one raised before the rows were judged late or not.
    lh_n := coalesce(cardinality(lh_rows), 0);
    IF lh_late IS NULL OR coalesce(cardinality(lh_late), 0) <> lh_n THEN
      RAISE EXCEPTION '%%', lh_msg USING ERRCODE = lh_state, DETAIL = coalesce(lh_detail, '');
    END IF;
    SELECT array_agg(CASE WHEN s.lh_l THEN ROW(s.lh_partition, s.lh_offset, s.lh_batch, false, NULL%12$s)::%2$s
                          ELSE ROW(s.lh_partition, s.lh_offset, s.lh_batch, s.lh_taken, s.lh_reject%11$s)::%2$s END
                     ORDER BY s.lh_ord),
           count(*) FILTER (WHERE s.lh_taken AND s.lh_reject IS NULL AND NOT s.lh_l)
      INTO lh_tried, lh_candidates
      FROM unnest(lh_rows, lh_late) WITH ORDINALITY AS s(%10$s, lh_l, lh_ord);
    lh_los := ARRAY[1];
    lh_his := ARRAY[lh_n];
    WHILE cardinality(lh_los) > 0 AND cardinality(lh_bad) <= 100 LOOP
      lh_lo := lh_los[cardinality(lh_los)];
      lh_hi := lh_his[cardinality(lh_his)];
      lh_los := lh_los[1:cardinality(lh_los) - 1];
      lh_his := lh_his[1:cardinality(lh_his) - 1];
      lh_err := NULL;
      BEGIN
        PERFORM %1$s(lh_tried[lh_lo:lh_hi], lh_part_max, lh_delay, false, lh_pass, true);
        RAISE EXCEPTION 'undo the trial' USING ERRCODE = 'LH001';
      EXCEPTION
        WHEN SQLSTATE 'LH001' THEN
          NULL;
        WHEN foreign_key_violation THEN
          RAISE;
        WHEN data_exception OR integrity_constraint_violation OR program_limit_exceeded THEN
          lh_err := SQLERRM;
      END;
      CONTINUE WHEN lh_err IS NULL;
      IF lh_lo = lh_hi THEN
        lh_bad := lh_bad || lh_lo;
        lh_why := lh_why || ('the row could not be admitted: ' || lh_err);
      ELSE
        lh_los := lh_los || ARRAY[(lh_lo + lh_hi) / 2 + 1, lh_lo];
        lh_his := lh_his || ARRAY[lh_hi, (lh_lo + lh_hi) / 2];
      END IF;
    END LOOP;
    IF cardinality(lh_bad) = 0 THEN
      RAISE EXCEPTION '%%', lh_msg USING ERRCODE = lh_state,
        DETAIL = concat_ws(' ', lh_detail, 'The pass''s rows fail together but none fails alone, so no row can be set aside as the cause.'),
        HINT = 'See the error; the pass is tried again until it is fixed.';
    END IF;
    IF cardinality(lh_bad) > 100 OR (lh_candidates >= 10 AND cardinality(lh_bad) >= lh_candidates) THEN
      RAISE EXCEPTION '%%', lh_msg USING ERRCODE = lh_state,
        DETAIL = concat_ws(' ', lh_detail, pg_catalog.format('%%s of the pass''s %%s rows fail alone: that is taken for an error of the table, not of its rows, and no row is set aside.',
                                                              CASE WHEN cardinality(lh_bad) > 100 THEN 'Over 100' ELSE 'All' END, lh_candidates)),
        HINT = 'See the error; the pass is tried again until it is fixed.';
    END IF;
    RAISE WARNING 'silver table %%: %% row(s) of pass %% could not be written and are set aside as rejects (lakehouse.silver_rejects); the first: %%',
      %5$L, cardinality(lh_bad), lh_pass, lh_why[1];
    SELECT * INTO n_in, n_filtered, n_invalid, n_out, n_dup, n_late, part_max, part_min_admitted, min_admitted
      FROM %1$s((SELECT array_agg(CASE WHEN w.lh_bad_why IS NULL
                                       THEN ROW(s.lh_partition, s.lh_offset, s.lh_batch, s.lh_taken, s.lh_reject%11$s)::%2$s
                                       ELSE ROW(s.lh_partition, s.lh_offset, s.lh_batch, true, w.lh_bad_why%12$s)::%2$s END
                                  ORDER BY s.lh_ord)
                   FROM unnest(lh_rows) WITH ORDINALITY AS s(%10$s, lh_ord)
                   LEFT JOIN unnest(lh_bad, lh_why) AS w(lh_bad_ord, lh_bad_why) ON w.lh_bad_ord = s.lh_ord),
                lh_part_max, lh_delay, lh_check_late, lh_pass, true);
    END $body$ $f$,
    admit_fn, rowtype, t.partition_interval, tcol, t.name, ins_cols, j_cols,
    key_match_s, late_cols, row_cols, s_cols, null_cols);
  EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s(%s[], jsonb, interval, boolean, bigint, boolean) FROM PUBLIC',
                            admit_fn, rowtype);
END $_$;

-- function lakehouse._silver_regenerate_all()

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

-- function lakehouse._silver_pass(text)

CREATE FUNCTION lakehouse._silver_pass(p_name text) RETURNS lakehouse.silver_pass_result
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

-- function lakehouse._watermarks_or_nothing(text, text)

CREATE FUNCTION lakehouse._watermarks_or_nothing(topic text, brokers text) RETURNS TABLE(partition integer, low bigint, high bigint)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "lakehouse.request_timeout" TO '2s'
    AS $$
BEGIN
  RETURN QUERY SELECT * FROM lakehouse.kafka_watermarks(topic, brokers);
EXCEPTION WHEN OTHERS THEN
  RETURN;
END $$;

-- function lakehouse.create_recentchange_pipeline(text)

CREATE FUNCTION lakehouse.create_recentchange_pipeline(stream text) RETURNS void
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
    -- Only the pipeline's own silver.edits has a session gap: a table of that name declared
    -- with create_silver() is not the pipeline (up to 0.14.0 this returned as if it were).
    IF (SELECT s.session_gap FROM lakehouse.silver_tables s WHERE s.name OPERATOR(pg_catalog.=) 'edits') IS NULL THEN
      RAISE EXCEPTION 'silver.edits exists and was declared with create_silver(), not as the recentchange pipeline'
        USING ERRCODE = 'duplicate_object',
              HINT = 'Drop it with lakehouse.drop_silver(''edits'') (its rows stay unless drop_data), then declare the pipeline.';
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
  PERFORM lakehouse._recentchange_comment_edits();
  COMMENT ON COLUMN silver.edits.kafka_partition IS 'where the admitted copy sits in bronze: partition';
  COMMENT ON COLUMN silver.edits.kafka_offset IS 'where the admitted copy sits in bronze: offset';
  PERFORM lakehouse._recentchange_create_gold();
END $_$;

-- comment lakehouse.FUNCTION create_recentchange_pipeline(stream text)

COMMENT ON FUNCTION lakehouse.create_recentchange_pipeline(stream text) IS 'declares the shipped Wikimedia recentchange pipeline over bronze.<stream>: silver.edits, silver.editor_sessions, the gold views (idempotent)';

-- function lakehouse.create_silver(text, text, lakehouse.silver_column[], text[], text, text, interval, interval, integer, interval, boolean)

CREATE FUNCTION lakehouse.create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text DEFAULT NULL::text, watermark interval DEFAULT NULL::interval, partition_interval interval DEFAULT '1 day'::interval, max_rows_per_pass integer DEFAULT 100000, future_limit interval DEFAULT '00:05:00'::interval, continuous boolean DEFAULT true) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  SELECT lakehouse._create_silver(name, stream, columns, key, event_time, filter, watermark,
                                  partition_interval, max_rows_per_pass, future_limit, continuous,
                                  current_user::regrole)
$$;

-- comment lakehouse.FUNCTION create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean)

COMMENT ON FUNCTION lakehouse.create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean) IS 'declares a silver table: a deduplicated, watermarked view of a stream kept exactly once by lakehouse';

-- function lakehouse.create_stream(text, text, text, text)

CREATE FUNCTION lakehouse.create_stream(name text, topic text, brokers text DEFAULT NULL::text, start_from text DEFAULT 'earliest'::text) RETURNS void
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

-- function lakehouse.drop_recentchange_pipeline()

CREATE FUNCTION lakehouse.drop_recentchange_pipeline() RETURNS void
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

-- comment lakehouse.FUNCTION drop_recentchange_pipeline()

COMMENT ON FUNCTION lakehouse.drop_recentchange_pipeline() IS 'drops silver.edits, silver.editor_sessions, the gold views and their tables';

-- function lakehouse.drop_silver(text, boolean)

CREATE FUNCTION lakehouse.drop_silver(name text, drop_data boolean DEFAULT false) RETURNS void
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

-- comment lakehouse.FUNCTION drop_silver(name text, drop_data boolean)

COMMENT ON FUNCTION lakehouse.drop_silver(name text, drop_data boolean) IS 'forgets a silver declaration (its cursor, progress, late rows and rejects); drops silver.<name> too when drop_data';

-- function lakehouse.drop_stream(text, boolean)

CREATE FUNCTION lakehouse.drop_stream(name text, drop_data boolean DEFAULT false) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF name IS NULL OR drop_data IS NULL THEN
    RAISE EXCEPTION 'name and drop_data must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            HINT = 'Pass a stream name, and drop_data => true to drop its bronze table and dead letters too (false keeps them).';
  END IF;
  PERFORM lakehouse.stop_stream(name);
  DELETE FROM lakehouse.offsets o WHERE o.stream OPERATOR(pg_catalog.=) drop_stream.name;
  DELETE FROM lakehouse.streams s WHERE s.name OPERATOR(pg_catalog.=) drop_stream.name;
  IF drop_data THEN
    EXECUTE format('DROP TABLE IF EXISTS bronze.%I', name);
    DELETE FROM lakehouse.dead_letters d WHERE d.stream OPERATOR(pg_catalog.=) drop_stream.name;
    DELETE FROM lakehouse.skipped_offsets k WHERE k.stream OPERATOR(pg_catalog.=) drop_stream.name;
  END IF;
  INSERT INTO lakehouse.stream_log (stream, event, detail)
  VALUES (name, 'dropped', jsonb_build_object('drop_data', drop_data));
END $$;

-- function lakehouse.kafka_offsets_for_time(text, timestamp with time zone, text)

CREATE FUNCTION lakehouse.kafka_offsets_for_time(topic text, at timestamp with time zone, brokers text DEFAULT NULL::text) RETURNS TABLE(partition integer, next_offset bigint)
    LANGUAGE c
    AS 'MODULE_PATHNAME', 'lakehouse_kafka_offsets_for_time';

-- function lakehouse.kafka_watermarks(text, text)

CREATE FUNCTION lakehouse.kafka_watermarks(topic text, brokers text DEFAULT NULL::text) RETURNS TABLE(partition integer, low bigint, high bigint)
    LANGUAGE c PARALLEL RESTRICTED
    AS 'MODULE_PATHNAME', 'lakehouse_kafka_watermarks';

-- comment lakehouse.FUNCTION kafka_watermarks(topic text, brokers text)

COMMENT ON FUNCTION lakehouse.kafka_watermarks(topic text, brokers text) IS 'per partition of a Kafka topic: low and high watermark offsets, read from the broker';

-- function lakehouse.maintain(interval, interval)

CREATE FUNCTION lakehouse.maintain(keep interval DEFAULT '7 days'::interval, bronze_retention interval DEFAULT NULL::interval) RETURNS TABLE(step text, detail text)
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

-- comment lakehouse.FUNCTION maintain(keep interval, bronze_retention interval)

COMMENT ON FUNCTION lakehouse.maintain(keep interval, bronze_retention interval) IS 'ANALYZE, history pruning (older than keep) and optional bronze retention; run hourly by lakehouse.schedule()';

-- function lakehouse.refresh_silver(text)

CREATE FUNCTION lakehouse.refresh_silver(name text DEFAULT NULL::text) RETURNS SETOF lakehouse.silver_pass_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  n text;
  r lakehouse.silver_pass_result;
  msg text;
BEGIN
  IF name IS NOT NULL THEN
    RETURN NEXT lakehouse._silver_pass(name);
    RETURN;
  END IF;
  -- Always the same order, so that two callers lock tables in the same order. One table's
  -- failure (rolled back to its own savepoint) does not hold up the others.
  FOR n IN SELECT s.name FROM lakehouse.silver_tables s ORDER BY s.name LOOP
    BEGIN
      r := lakehouse._silver_pass(n);
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
      RAISE WARNING 'lakehouse silver pass of "%" failed: %', n, msg
        USING HINT = pg_catalog.format('Run lakehouse.refresh_silver(%L) to see the whole error.', n);
      r := ROW(n, NULL, 'pass', 0, 0, 0, 0, 0, 0, NULL, msg);
    END;
    RETURN NEXT r;
  END LOOP;
END $$;

-- comment lakehouse.FUNCTION refresh_silver(name text)

COMMENT ON FUNCTION lakehouse.refresh_silver(name text) IS 'one incremental, exactly-once pass for one silver table or (NULL) all of them; returns what each pass did';

-- function lakehouse.replay_late(text, timestamp with time zone, timestamp with time zone)

CREATE FUNCTION lakehouse.replay_late(name text, from_time timestamp with time zone, to_time timestamp with time zone) RETURNS lakehouse.silver_pass_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
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
END $_$;

-- comment lakehouse.FUNCTION replay_late(name text, from_time timestamp with time zone, to_time timestamp with time zone)

COMMENT ON FUNCTION lakehouse.replay_late(name text, from_time timestamp with time zone, to_time timestamp with time zone) IS 're-admits the late events of a silver table whose event time is in [from_time, to_time); dedup still applies; recorded in silver_progress';

-- function lakehouse.reset_offsets(text, integer, bigint)

CREATE FUNCTION lakehouse.reset_offsets(name text, kafka_partition integer, next_offset bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  old record;
  data_next bigint;
  was_enabled boolean;
BEGIN
  IF name IS NULL OR kafka_partition IS NULL OR next_offset IS NULL THEN
    RAISE EXCEPTION 'name, kafka_partition and next_offset must not be null'
      USING ERRCODE = 'null_value_not_allowed',
            HINT = 'SELECT * FROM lakehouse.stream_status() shows each partition''s next offset.';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM lakehouse.streams s WHERE s.name OPERATOR(pg_catalog.=) reset_offsets.name) THEN
    RAISE EXCEPTION 'stream "%" does not exist', name
      USING ERRCODE = 'undefined_object', HINT = 'SELECT name FROM lakehouse.streams lists them.';
  END IF;
  SELECT o.next_offset, o.error INTO old FROM lakehouse.offsets o
   WHERE o.stream OPERATOR(pg_catalog.=) reset_offsets.name
     AND o.kafka_partition OPERATOR(pg_catalog.=) reset_offsets.kafka_partition
   FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'stream "%" has no partition %', name, kafka_partition
      USING ERRCODE = 'undefined_object',
            HINT = pg_catalog.format('SELECT kafka_partition FROM lakehouse.offsets WHERE stream = %L lists its partitions.', name);
  END IF;
  IF next_offset < 0 THEN
    RAISE EXCEPTION 'next_offset must not be negative' USING ERRCODE = 'invalid_parameter_value',
      HINT = 'Kafka offsets start at 0; lakehouse.kafka_watermarks() gives where the broker begins.';
  END IF;
  -- What the worker would resume from: after the partition's last bronze row or dead letter.
  IF pg_catalog.to_regclass(pg_catalog.format('bronze.%I', name)) IS NOT NULL THEN
    EXECUTE pg_catalog.format('SELECT pg_catalog.max(b.kafka_offset) + 1 FROM bronze.%I b WHERE b.kafka_partition = $1', name)
      INTO data_next USING kafka_partition;
  END IF;
  data_next := GREATEST(data_next, (SELECT pg_catalog.max(d.kafka_offset) + 1 FROM lakehouse.dead_letters d
                                     WHERE d.stream OPERATOR(pg_catalog.=) reset_offsets.name
                                       AND d.kafka_partition OPERATOR(pg_catalog.=) reset_offsets.kafka_partition));
  -- and after the offsets it passed without a message (transaction markers, aborted records).
  data_next := GREATEST(data_next, (SELECT k.to_offset FROM lakehouse.skipped_offsets k
                                     WHERE k.stream OPERATOR(pg_catalog.=) reset_offsets.name
                                       AND k.kafka_partition OPERATOR(pg_catalog.=) reset_offsets.kafka_partition
                                     ORDER BY k.from_offset DESC LIMIT 1));
  IF next_offset < data_next THEN
    RAISE EXCEPTION 'partition % of stream "%" already holds offsets up to %', kafka_partition, name, data_next - 1
      USING ERRCODE = 'invalid_parameter_value',
            DETAIL = pg_catalog.format('A worker resumes after its own data (bronze rows, dead letters and the offsets it passed without a message, in lakehouse.skipped_offsets), so a reset to %s would be undone.', next_offset),
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
END $_$;

-- function lakehouse.run_checks(interval)

CREATE FUNCTION lakehouse.run_checks(freshness_bound interval DEFAULT '00:05:00'::interval) RETURNS TABLE(check_name text, passed boolean, detail text)
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

-- comment lakehouse.FUNCTION run_checks(freshness_bound interval)

COMMENT ON FUNCTION lakehouse.run_checks(freshness_bound interval) IS 'asset checks of every stream, silver table and the gold marts: (check_name, passed, detail), also appended to lakehouse.check_results; passed is NULL when a check was skipped';

-- function lakehouse.schedule(text, text, text, interval, interval, interval)

CREATE FUNCTION lakehouse.schedule(checks text DEFAULT '* * * * *'::text, maintenance text DEFAULT '17 * * * *'::text, refresh text DEFAULT NULL::text, keep interval DEFAULT '7 days'::interval, bronze_retention interval DEFAULT NULL::interval, freshness_bound interval DEFAULT '00:05:00'::interval) RETURNS TABLE(job_name text, schedule text, command text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  jobs text[][] := '{}';
  i integer;
BEGIN
  PERFORM lakehouse._require_pg_cron();
  IF keep IS NULL OR keep < interval '1 hour' THEN
    RAISE EXCEPTION 'keep must be at least one hour' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF checks IS NOT NULL THEN
    jobs := jobs || ARRAY[['lakehouse-checks', checks,
                           pg_catalog.format('SELECT lakehouse._cron_checks(%L::pg_catalog.interval)', freshness_bound)]];
  END IF;
  IF maintenance IS NOT NULL THEN
    jobs := jobs || ARRAY[['lakehouse-maintenance', maintenance,
                           pg_catalog.format('SELECT lakehouse._cron_maintain(%L::pg_catalog.interval, %L::pg_catalog.interval)', keep, bronze_retention)]];
  END IF;
  IF refresh IS NOT NULL THEN
    jobs := jobs || ARRAY[['lakehouse-refresh', refresh, 'SELECT lakehouse._cron_refresh()']];
  END IF;
  -- Jobs no longer asked for go away, so that schedule() states the whole schedule.
  PERFORM lakehouse.unschedule();
  FOR i IN 1 .. coalesce(pg_catalog.array_length(jobs, 1), 0) LOOP
    BEGIN
      EXECUTE 'SELECT cron.schedule($1, $2, $3)' USING jobs[i][1], jobs[i][2], jobs[i][3];
    EXCEPTION WHEN OTHERS THEN
      DECLARE msg text;
      BEGIN
        GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT;
        RAISE EXCEPTION 'pg_cron refused job % (schedule "%"): %', jobs[i][1], jobs[i][2], msg
          USING ERRCODE = 'invalid_parameter_value',
                HINT = 'Schedules use cron syntax with pg_cron 1.4''s one-minute granularity, such as ''* * * * *'' or ''17 * * * *''.';
      END;
    END;
    job_name := jobs[i][1]; schedule := jobs[i][2]; command := jobs[i][3];
    RETURN NEXT;
  END LOOP;
END $_$;

-- comment lakehouse.FUNCTION schedule(checks text, maintenance text, refresh text, keep interval, bronze_retention interval, freshness_bound interval)

COMMENT ON FUNCTION lakehouse.schedule(checks text, maintenance text, refresh text, keep interval, bronze_retention interval, freshness_bound interval) IS 'creates the pg_cron jobs lakehouse-checks (run_checks), lakehouse-maintenance (maintain) and optionally lakehouse-refresh (refresh_silver)';

-- function lakehouse.set_silver_continuous(text, boolean)

CREATE FUNCTION lakehouse.set_silver_continuous(name text, continuous boolean) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF name IS NULL OR continuous IS NULL THEN
    RAISE EXCEPTION 'name and continuous must not be null' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  UPDATE lakehouse.silver_tables s SET continuous = set_silver_continuous.continuous
   WHERE s.name OPERATOR(pg_catalog.=) set_silver_continuous.name;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'silver table "%" does not exist', name
      USING ERRCODE = 'undefined_object', HINT = 'See SELECT name FROM lakehouse.silver_tables.';
  END IF;
END $$;

-- comment lakehouse.FUNCTION set_silver_continuous(name text, continuous boolean)

COMMENT ON FUNCTION lakehouse.set_silver_continuous(name text, continuous boolean) IS 'whether the silver worker keeps a silver table fresh by itself (on) or only refresh_silver() calls do (off)';

-- function lakehouse.silver_column(text, text, text)

CREATE FUNCTION lakehouse.silver_column(name text, type text, expr text) RETURNS lakehouse.silver_column
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$ SELECT ROW(name, type, expr)::lakehouse.silver_column $$;

-- comment lakehouse.FUNCTION silver_column(name text, type text, expr text)

COMMENT ON FUNCTION lakehouse.silver_column(name text, type text, expr text) IS 'one column of a silver declaration: name, SQL type, expression over the bronze row';

-- function lakehouse.start_stream(text)

CREATE FUNCTION lakehouse.start_stream(name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
  IF name IS NULL THEN
    RAISE EXCEPTION 'name must not be null'
      USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass a stream name; SELECT name FROM lakehouse.streams lists them.';
  END IF;
  UPDATE lakehouse.streams s SET enabled = true
   WHERE s.name OPERATOR(pg_catalog.=) start_stream.name;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'stream "%" does not exist', name
      USING ERRCODE = 'undefined_object', HINT = 'See SELECT name FROM lakehouse.streams.';
  END IF;
END $$;

-- function lakehouse.stop_stream(text)

CREATE FUNCTION lakehouse.stop_stream(name text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
  worker integer;
BEGIN
  IF name IS NULL THEN
    RAISE EXCEPTION 'name must not be null'
      USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass a stream name; SELECT name FROM lakehouse.streams lists them.';
  END IF;
  UPDATE lakehouse.streams s SET enabled = false
   WHERE s.name OPERATOR(pg_catalog.=) stop_stream.name
  RETURNING s.worker_pid INTO worker;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'stream "%" does not exist', name
      USING ERRCODE = 'undefined_object', HINT = 'See SELECT name FROM lakehouse.streams.';
  END IF;
  -- SIGTERM: the worker commits nothing half-done (its open batch transaction aborts).
  IF worker IS NOT NULL AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a
                                     WHERE a.pid OPERATOR(pg_catalog.=) worker
                                       AND a.backend_type OPERATOR(pg_catalog.=) 'lakehouse stream') THEN
    PERFORM pg_catalog.pg_terminate_backend(worker);
  END IF;
END $$;

-- function lakehouse.stream_status()

CREATE FUNCTION lakehouse.stream_status() RETURNS TABLE(stream text, kafka_partition integer, next_offset bigint, high_watermark bigint, lag bigint, worker_pid integer, state text, last_commit timestamp with time zone, last_error text)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
  -- One broker round trip per stream (MATERIALIZED: not one per partition row).
  WITH w AS MATERIALIZED (
    SELECT s.name, x.partition, x.high
      FROM lakehouse.streams s,
           LATERAL lakehouse._watermarks_or_nothing(s.topic, s.brokers) x
  )
  SELECT s.name, o.kafka_partition, o.next_offset, w.high, w.high - o.next_offset,
         a.pid,
         CASE WHEN NOT s.enabled THEN 'stopped'
              WHEN o.error IS NOT NULL THEN 'partition stopped'
              WHEN a.pid IS NULL AND (s.state OPERATOR(pg_catalog.=) 'error' OR s.last_error IS NOT NULL) THEN 'error'
              WHEN a.pid IS NULL THEN 'starting'
              ELSE s.state END,
         -- The newest batch by the primary key (batches commit in batch_id order), not
         -- a max() over every batch the stream kept.
         (SELECT p.committed_at FROM lakehouse.stream_progress p
           WHERE p.stream OPERATOR(pg_catalog.=) s.name ORDER BY p.batch_id DESC LIMIT 1),
         coalesce(o.error, s.last_error)
    FROM lakehouse.streams s
    JOIN lakehouse.offsets o ON o.stream OPERATOR(pg_catalog.=) s.name
    LEFT JOIN w ON w.name OPERATOR(pg_catalog.=) s.name
               AND w.partition OPERATOR(pg_catalog.=) o.kafka_partition
    LEFT JOIN pg_catalog.pg_stat_activity a
           ON a.pid OPERATOR(pg_catalog.=) s.worker_pid
          AND a.backend_type OPERATOR(pg_catalog.=) 'lakehouse stream'
   ORDER BY s.name, o.kafka_partition
$$;

-- function lakehouse.unschedule()

CREATE FUNCTION lakehouse.unschedule() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  n integer := 0;
  j text;
BEGIN
  PERFORM lakehouse._require_pg_cron();
  FOR j IN EXECUTE 'SELECT jobname FROM cron.job WHERE jobname IN (''lakehouse-checks'', ''lakehouse-maintenance'', ''lakehouse-refresh'')' LOOP
    EXECUTE 'SELECT cron.unschedule($1::text)' USING j;
    n := n + 1;
  END LOOP;
  RETURN n;
END $_$;

-- comment lakehouse.FUNCTION unschedule()

COMMENT ON FUNCTION lakehouse.unschedule() IS 'removes the pg_cron jobs that lakehouse.schedule() created; returns how many';

-- table lakehouse.check_results

CREATE TABLE lakehouse.check_results (
    run_id bigint NOT NULL,
    checked_at timestamp with time zone DEFAULT now() NOT NULL,
    check_name text NOT NULL,
    passed boolean,
    detail text
);

-- sequence lakehouse.check_runs

CREATE SEQUENCE lakehouse.check_runs
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

-- table lakehouse.check_state

CREATE TABLE lakehouse.check_state (
    check_name text NOT NULL,
    kafka_partition integer NOT NULL,
    "position" bigint NOT NULL
);

-- table lakehouse.dead_letters

CREATE TABLE lakehouse.dead_letters (
    stream text NOT NULL,
    topic text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset bigint NOT NULL,
    kafka_timestamp timestamp with time zone,
    kafka_key bytea,
    raw_value bytea,
    reason text NOT NULL,
    batch_id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table lakehouse.offsets

CREATE TABLE lakehouse.offsets (
    stream text NOT NULL,
    kafka_partition integer NOT NULL,
    next_offset bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    error text,
    CONSTRAINT offsets_kafka_partition_check CHECK ((kafka_partition >= 0)),
    CONSTRAINT offsets_next_offset_check CHECK ((next_offset >= 0))
);

-- table lakehouse.silver_late

CREATE TABLE lakehouse.silver_late (
    silver text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset bigint NOT NULL,
    event_time timestamp with time zone NOT NULL,
    pass_id bigint NOT NULL,
    replayed_in bigint
);

-- table lakehouse.silver_partitions

CREATE TABLE lakehouse.silver_partitions (
    silver text NOT NULL,
    kafka_partition integer NOT NULL,
    max_event_time timestamp with time zone,
    last_batch_id bigint NOT NULL,
    last_batch_committed_at timestamp with time zone NOT NULL
);

-- comment lakehouse.TABLE silver_partitions

COMMENT ON TABLE lakehouse.silver_partitions IS 'per silver table and Kafka partition: the newest event time seen (the partition''s watermark is it minus the table''s watermark)';

-- table lakehouse.silver_progress

CREATE TABLE lakehouse.silver_progress (
    silver text NOT NULL,
    pass_id bigint NOT NULL,
    kind text NOT NULL,
    first_batch_id bigint,
    last_batch_id bigint,
    rows_in bigint NOT NULL,
    rows_out bigint NOT NULL,
    duplicates_dropped bigint NOT NULL,
    late_dropped bigint NOT NULL,
    invalid bigint NOT NULL,
    filtered bigint NOT NULL,
    watermark_before timestamp with time zone,
    watermark timestamp with time zone,
    min_admitted timestamp with time zone,
    started_at timestamp with time zone NOT NULL,
    committed_at timestamp with time zone NOT NULL,
    partition_watermarks jsonb,
    partition_min_admitted jsonb,
    CONSTRAINT silver_progress_kind_check CHECK ((kind = ANY (ARRAY['pass'::text, 'replay'::text])))
);

-- comment lakehouse.COLUMN silver_progress.watermark_before

COMMENT ON COLUMN lakehouse.silver_progress.watermark_before IS 'the table''s low watermark at the start of the pass';

-- comment lakehouse.COLUMN silver_progress.watermark

COMMENT ON COLUMN lakehouse.silver_progress.watermark IS 'the table''s low watermark after the pass';

-- table lakehouse.silver_rejects

CREATE TABLE lakehouse.silver_rejects (
    silver text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset bigint NOT NULL,
    reason text NOT NULL,
    pass_id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

-- table lakehouse.skipped_offsets

CREATE TABLE lakehouse.skipped_offsets (
    stream text NOT NULL,
    kafka_partition integer NOT NULL,
    from_offset bigint NOT NULL,
    to_offset bigint NOT NULL,
    batch_id bigint NOT NULL,
    CONSTRAINT skipped_offsets_check CHECK ((to_offset > from_offset))
);

-- comment lakehouse.TABLE skipped_offsets

COMMENT ON TABLE lakehouse.skipped_offsets IS 'offsets [from_offset, to_offset) of a partition that a stream''s worker passed without a message: a transactional producer''s commit and abort markers and aborted records, or records a compacted topic removed; committed with the batch that passed them';

-- table lakehouse.stream_log

CREATE TABLE lakehouse.stream_log (
    id bigint NOT NULL,
    stream text NOT NULL,
    logged_at timestamp with time zone DEFAULT now() NOT NULL,
    event text NOT NULL,
    detail jsonb
);

-- sequence lakehouse.stream_log_id_seq

ALTER TABLE lakehouse.stream_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME lakehouse.stream_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table lakehouse.stream_progress

CREATE TABLE lakehouse.stream_progress (
    stream text NOT NULL,
    batch_id bigint NOT NULL,
    kind text DEFAULT 'batch'::text NOT NULL,
    messages integer NOT NULL,
    bytes bigint NOT NULL,
    dead_letters integer NOT NULL,
    first_offsets jsonb NOT NULL,
    last_offsets jsonb NOT NULL,
    started_at timestamp with time zone NOT NULL,
    committed_at timestamp with time zone DEFAULT now() NOT NULL
);

-- constraint lakehouse.check_results check_results_pkey

ALTER TABLE ONLY lakehouse.check_results
    ADD CONSTRAINT check_results_pkey PRIMARY KEY (run_id, check_name);

-- constraint lakehouse.check_state check_state_pkey

ALTER TABLE ONLY lakehouse.check_state
    ADD CONSTRAINT check_state_pkey PRIMARY KEY (check_name, kafka_partition);

-- constraint lakehouse.dead_letters dead_letters_pkey

ALTER TABLE ONLY lakehouse.dead_letters
    ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (stream, kafka_partition, kafka_offset);

-- constraint lakehouse.offsets offsets_pkey

ALTER TABLE ONLY lakehouse.offsets
    ADD CONSTRAINT offsets_pkey PRIMARY KEY (stream, kafka_partition);

-- constraint lakehouse.silver_late silver_late_pkey

ALTER TABLE ONLY lakehouse.silver_late
    ADD CONSTRAINT silver_late_pkey PRIMARY KEY (silver, kafka_partition, kafka_offset);

-- constraint lakehouse.silver_partitions silver_partitions_pkey

ALTER TABLE ONLY lakehouse.silver_partitions
    ADD CONSTRAINT silver_partitions_pkey PRIMARY KEY (silver, kafka_partition);

-- constraint lakehouse.silver_progress silver_progress_pkey

ALTER TABLE ONLY lakehouse.silver_progress
    ADD CONSTRAINT silver_progress_pkey PRIMARY KEY (silver, pass_id);

-- constraint lakehouse.silver_rejects silver_rejects_pkey

ALTER TABLE ONLY lakehouse.silver_rejects
    ADD CONSTRAINT silver_rejects_pkey PRIMARY KEY (silver, kafka_partition, kafka_offset);

-- constraint lakehouse.silver_tables silver_tables_pkey

ALTER TABLE ONLY lakehouse.silver_tables
    ADD CONSTRAINT silver_tables_pkey PRIMARY KEY (name);

-- constraint lakehouse.skipped_offsets skipped_offsets_pkey

ALTER TABLE ONLY lakehouse.skipped_offsets
    ADD CONSTRAINT skipped_offsets_pkey PRIMARY KEY (stream, kafka_partition, from_offset);

-- constraint lakehouse.stream_log stream_log_pkey

ALTER TABLE ONLY lakehouse.stream_log
    ADD CONSTRAINT stream_log_pkey PRIMARY KEY (id);

-- constraint lakehouse.stream_progress stream_progress_pkey

ALTER TABLE ONLY lakehouse.stream_progress
    ADD CONSTRAINT stream_progress_pkey PRIMARY KEY (stream, batch_id);

-- constraint lakehouse.streams streams_pkey

ALTER TABLE ONLY lakehouse.streams
    ADD CONSTRAINT streams_pkey PRIMARY KEY (name);

-- index lakehouse.check_results_by_time

CREATE INDEX check_results_by_time ON lakehouse.check_results USING btree (checked_at);

-- index lakehouse.silver_late_by_time

CREATE INDEX silver_late_by_time ON lakehouse.silver_late USING btree (silver, event_time);

-- fk constraint lakehouse.offsets offsets_stream_fkey

ALTER TABLE ONLY lakehouse.offsets
    ADD CONSTRAINT offsets_stream_fkey FOREIGN KEY (stream) REFERENCES lakehouse.streams(name) ON UPDATE CASCADE;

-- acl SCHEMA gold

GRANT USAGE ON SCHEMA gold TO PUBLIC;

-- acl SCHEMA lakehouse

GRANT USAGE ON SCHEMA lakehouse TO PUBLIC;
GRANT USAGE ON SCHEMA lakehouse TO lakehouse_admin;

-- acl SCHEMA silver

GRANT USAGE ON SCHEMA silver TO lakehouse_admin;

-- acl lakehouse.TABLE streams

GRANT SELECT ON TABLE lakehouse.streams TO lakehouse_admin;

-- acl lakehouse.FUNCTION _check_bronze_broker(s lakehouse.streams, OUT passed boolean, OUT detail text)

REVOKE ALL ON FUNCTION lakehouse._check_bronze_broker(s lakehouse.streams, OUT passed boolean, OUT detail text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _check_bronze_offsets(s lakehouse.streams, OUT passed boolean, OUT detail text)

REVOKE ALL ON FUNCTION lakehouse._check_bronze_offsets(s lakehouse.streams, OUT passed boolean, OUT detail text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _check_gold(OUT passed boolean, OUT detail text)

REVOKE ALL ON FUNCTION lakehouse._check_gold(OUT passed boolean, OUT detail text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _check_sessions(OUT passed boolean, OUT detail text)

REVOKE ALL ON FUNCTION lakehouse._check_sessions(OUT passed boolean, OUT detail text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _check_daily_marts(OUT passed boolean, OUT detail text)

REVOKE ALL ON FUNCTION lakehouse._check_daily_marts(OUT passed boolean, OUT detail text) FROM PUBLIC;

-- acl lakehouse.TABLE silver_tables

GRANT SELECT ON TABLE lakehouse.silver_tables TO lakehouse_admin;

-- acl lakehouse.FUNCTION _check_silver_freshness(t lakehouse.silver_tables, bound interval, OUT passed boolean, OUT detail text)

REVOKE ALL ON FUNCTION lakehouse._check_silver_freshness(t lakehouse.silver_tables, bound interval, OUT passed boolean, OUT detail text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _check_silver_keys(t lakehouse.silver_tables, OUT passed boolean, OUT detail text)

REVOKE ALL ON FUNCTION lakehouse._check_silver_keys(t lakehouse.silver_tables, OUT passed boolean, OUT detail text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _check_silver_passes(t lakehouse.silver_tables, OUT passed boolean, OUT detail text)

REVOKE ALL ON FUNCTION lakehouse._check_silver_passes(t lakehouse.silver_tables, OUT passed boolean, OUT detail text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean, owner regrole)

REVOKE ALL ON FUNCTION lakehouse._create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean, owner regrole) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse._create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean, owner regrole) TO lakehouse_admin;

-- acl lakehouse.FUNCTION _cron_checks(freshness_bound interval)

REVOKE ALL ON FUNCTION lakehouse._cron_checks(freshness_bound interval) FROM PUBLIC;

-- acl lakehouse.FUNCTION _cron_maintain(keep interval, bronze_retention interval)

REVOKE ALL ON FUNCTION lakehouse._cron_maintain(keep interval, bronze_retention interval) FROM PUBLIC;

-- acl lakehouse.FUNCTION _cron_refresh()

REVOKE ALL ON FUNCTION lakehouse._cron_refresh() FROM PUBLIC;

-- acl lakehouse.FUNCTION _declare_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean, owner regrole)

REVOKE ALL ON FUNCTION lakehouse._declare_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean, owner regrole) FROM PUBLIC;

-- acl lakehouse.FUNCTION _exec_as(role oid, sql text)

REVOKE ALL ON FUNCTION lakehouse._exec_as(role oid, sql text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _recentchange_comment_edits()

REVOKE ALL ON FUNCTION lakehouse._recentchange_comment_edits() FROM PUBLIC;

-- acl lakehouse.FUNCTION _recentchange_create_gold()

REVOKE ALL ON FUNCTION lakehouse._recentchange_create_gold() FROM PUBLIC;

-- acl lakehouse.FUNCTION _recentchange_on_admit()

REVOKE ALL ON FUNCTION lakehouse._recentchange_on_admit() FROM PUBLIC;

-- acl lakehouse.FUNCTION _recentchange_sessions_view()

REVOKE ALL ON FUNCTION lakehouse._recentchange_sessions_view() FROM PUBLIC;

-- acl lakehouse.FUNCTION _recentchange_top_pages_view()

REVOKE ALL ON FUNCTION lakehouse._recentchange_top_pages_view() FROM PUBLIC;

-- acl lakehouse.FUNCTION _require_pg_cron()

REVOKE ALL ON FUNCTION lakehouse._require_pg_cron() FROM PUBLIC;

-- acl lakehouse.FUNCTION _select_array_as(role oid, sql text, template anyarray, p1 bigint, p2 bigint, p3 integer[], p4 bigint[], p5 bigint[], p6 timestamp with time zone)

REVOKE ALL ON FUNCTION lakehouse._select_array_as(role oid, sql text, template anyarray, p1 bigint, p2 bigint, p3 integer[], p4 bigint[], p5 bigint[], p6 timestamp with time zone) FROM PUBLIC;

-- acl lakehouse.FUNCTION _silver_bucket(t timestamp with time zone, step interval)

REVOKE ALL ON FUNCTION lakehouse._silver_bucket(t timestamp with time zone, step interval) FROM PUBLIC;

-- acl lakehouse.FUNCTION _silver_check_expression(owner regrole, stream text, what text, expr text, type text)

REVOKE ALL ON FUNCTION lakehouse._silver_check_expression(owner regrole, stream text, what text, expr text, type text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _silver_ensure_partition(name text, bucket timestamp with time zone, step interval)

REVOKE ALL ON FUNCTION lakehouse._silver_ensure_partition(name text, bucket timestamp with time zone, step interval) FROM PUBLIC;

-- acl lakehouse.FUNCTION _silver_generate(t lakehouse.silver_tables)

REVOKE ALL ON FUNCTION lakehouse._silver_generate(t lakehouse.silver_tables) FROM PUBLIC;

-- acl lakehouse.FUNCTION _silver_pass(p_name text)

REVOKE ALL ON FUNCTION lakehouse._silver_pass(p_name text) FROM PUBLIC;

-- acl lakehouse.FUNCTION _watermarks_or_nothing(topic text, brokers text)

REVOKE ALL ON FUNCTION lakehouse._watermarks_or_nothing(topic text, brokers text) FROM PUBLIC;

-- acl lakehouse.FUNCTION create_recentchange_pipeline(stream text)

REVOKE ALL ON FUNCTION lakehouse.create_recentchange_pipeline(stream text) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.create_recentchange_pipeline(stream text) TO lakehouse_admin;

-- acl lakehouse.FUNCTION create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean)

REVOKE ALL ON FUNCTION lakehouse.create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.create_silver(name text, stream text, columns lakehouse.silver_column[], key text[], event_time text, filter text, watermark interval, partition_interval interval, max_rows_per_pass integer, future_limit interval, continuous boolean) TO lakehouse_admin;

-- acl lakehouse.FUNCTION create_stream(name text, topic text, brokers text, start_from text)

REVOKE ALL ON FUNCTION lakehouse.create_stream(name text, topic text, brokers text, start_from text) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.create_stream(name text, topic text, brokers text, start_from text) TO lakehouse_admin;

-- acl lakehouse.FUNCTION drop_recentchange_pipeline()

REVOKE ALL ON FUNCTION lakehouse.drop_recentchange_pipeline() FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.drop_recentchange_pipeline() TO lakehouse_admin;

-- acl lakehouse.FUNCTION _silver_regenerate_all()

REVOKE ALL ON FUNCTION lakehouse._silver_regenerate_all() FROM PUBLIC;

-- acl lakehouse.FUNCTION _drop_silver(name text, drop_data boolean)

REVOKE ALL ON FUNCTION lakehouse._drop_silver(name text, drop_data boolean) FROM PUBLIC;

-- acl lakehouse.FUNCTION drop_silver(name text, drop_data boolean)

REVOKE ALL ON FUNCTION lakehouse.drop_silver(name text, drop_data boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.drop_silver(name text, drop_data boolean) TO lakehouse_admin;

-- acl lakehouse.FUNCTION drop_stream(name text, drop_data boolean)

REVOKE ALL ON FUNCTION lakehouse.drop_stream(name text, drop_data boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.drop_stream(name text, drop_data boolean) TO lakehouse_admin;

-- acl lakehouse.FUNCTION kafka_offsets_for_time(topic text, at timestamp with time zone, brokers text)

REVOKE ALL ON FUNCTION lakehouse.kafka_offsets_for_time(topic text, at timestamp with time zone, brokers text) FROM PUBLIC;

-- acl lakehouse.FUNCTION kafka_watermarks(topic text, brokers text)

REVOKE ALL ON FUNCTION lakehouse.kafka_watermarks(topic text, brokers text) FROM PUBLIC;

-- acl lakehouse.FUNCTION maintain(keep interval, bronze_retention interval)

REVOKE ALL ON FUNCTION lakehouse.maintain(keep interval, bronze_retention interval) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.maintain(keep interval, bronze_retention interval) TO lakehouse_admin;

-- acl lakehouse.FUNCTION refresh_silver(name text)

REVOKE ALL ON FUNCTION lakehouse.refresh_silver(name text) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.refresh_silver(name text) TO lakehouse_admin;

-- acl lakehouse.FUNCTION replay_late(name text, from_time timestamp with time zone, to_time timestamp with time zone)

REVOKE ALL ON FUNCTION lakehouse.replay_late(name text, from_time timestamp with time zone, to_time timestamp with time zone) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.replay_late(name text, from_time timestamp with time zone, to_time timestamp with time zone) TO lakehouse_admin;

-- acl lakehouse.FUNCTION reset_offsets(name text, kafka_partition integer, next_offset bigint)

REVOKE ALL ON FUNCTION lakehouse.reset_offsets(name text, kafka_partition integer, next_offset bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.reset_offsets(name text, kafka_partition integer, next_offset bigint) TO lakehouse_admin;

-- acl lakehouse.FUNCTION run_checks(freshness_bound interval)

REVOKE ALL ON FUNCTION lakehouse.run_checks(freshness_bound interval) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.run_checks(freshness_bound interval) TO lakehouse_admin;

-- acl lakehouse.FUNCTION schedule(checks text, maintenance text, refresh text, keep interval, bronze_retention interval, freshness_bound interval)

REVOKE ALL ON FUNCTION lakehouse.schedule(checks text, maintenance text, refresh text, keep interval, bronze_retention interval, freshness_bound interval) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.schedule(checks text, maintenance text, refresh text, keep interval, bronze_retention interval, freshness_bound interval) TO lakehouse_admin;

-- acl lakehouse.FUNCTION set_silver_continuous(name text, continuous boolean)

REVOKE ALL ON FUNCTION lakehouse.set_silver_continuous(name text, continuous boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.set_silver_continuous(name text, continuous boolean) TO lakehouse_admin;

-- acl lakehouse.FUNCTION start_stream(name text)

REVOKE ALL ON FUNCTION lakehouse.start_stream(name text) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.start_stream(name text) TO lakehouse_admin;

-- acl lakehouse.FUNCTION stop_stream(name text)

REVOKE ALL ON FUNCTION lakehouse.stop_stream(name text) FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.stop_stream(name text) TO lakehouse_admin;

-- acl lakehouse.FUNCTION stream_status()

REVOKE ALL ON FUNCTION lakehouse.stream_status() FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.stream_status() TO lakehouse_admin;

-- acl lakehouse.FUNCTION unschedule()

REVOKE ALL ON FUNCTION lakehouse.unschedule() FROM PUBLIC;
GRANT ALL ON FUNCTION lakehouse.unschedule() TO lakehouse_admin;

-- acl lakehouse.TABLE check_results

GRANT SELECT ON TABLE lakehouse.check_results TO lakehouse_admin;

-- acl lakehouse.TABLE check_state

GRANT SELECT ON TABLE lakehouse.check_state TO lakehouse_admin;

-- acl lakehouse.TABLE dead_letters

GRANT SELECT ON TABLE lakehouse.dead_letters TO lakehouse_admin;

-- acl lakehouse.TABLE offsets

GRANT SELECT ON TABLE lakehouse.offsets TO lakehouse_admin;

-- acl lakehouse.TABLE silver_late

GRANT SELECT ON TABLE lakehouse.silver_late TO lakehouse_admin;

-- acl lakehouse.TABLE silver_partitions

GRANT SELECT ON TABLE lakehouse.silver_partitions TO lakehouse_admin;

-- acl lakehouse.TABLE silver_progress

GRANT SELECT ON TABLE lakehouse.silver_progress TO lakehouse_admin;

-- acl lakehouse.TABLE silver_rejects

GRANT SELECT ON TABLE lakehouse.silver_rejects TO lakehouse_admin;

-- acl lakehouse.TABLE skipped_offsets

GRANT SELECT ON TABLE lakehouse.skipped_offsets TO lakehouse_admin;

-- acl lakehouse.TABLE stream_log

GRANT SELECT ON TABLE lakehouse.stream_log TO lakehouse_admin;

-- acl lakehouse.TABLE stream_progress

GRANT SELECT ON TABLE lakehouse.stream_progress TO lakehouse_admin;

-- What pg_dump keeps of the extension's tables: all their rows (streams, offsets, dead
-- letters, the silver registry and the histories are the user's data).
SELECT pg_catalog.pg_extension_config_dump('lakehouse.streams', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.offsets', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.dead_letters', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.stream_progress', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.stream_log', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.silver_tables', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.silver_progress', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.silver_late', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.silver_rejects', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.check_results', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.check_state', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.check_runs', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.silver_partitions', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.skipped_offsets', '');
