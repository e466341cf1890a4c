-- lakehouse 0.5.0 -> 0.6.0: bad calls to the stream functions are refused, each with an
-- errcode, a message and a hint. start_stream, stop_stream and reset_offsets were STRICT, so
-- a NULL argument did nothing without a word; drop_stream(NULL) failed inside with a
-- not-null violation of stream_log, and drop_data => NULL dropped the stream and kept its
-- data; reset_offsets named a partition when the stream itself did not exist.
-- stream_status() shows 'error' for a stream whose worker failed and waits out its backoff
-- (it said 'starting'), and finds the last commit through stream_progress's primary key
-- (batches may now be many: they close when librdkafka's queue runs dry).
-- Offsets passed without a message (transaction markers, aborted records) are recorded in
-- lakehouse.skipped_offsets; the offsets check, reset_offsets() and a re-created stream
-- know them.
-- The same definitions as in lakehouse--0.6.0.sql (the regress test `upgrade` compares them).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.6.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION lakehouse.start_stream(name text) RETURNS void
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

CREATE OR REPLACE FUNCTION lakehouse.stop_stream(name text) RETURNS void
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

CREATE OR REPLACE FUNCTION lakehouse.drop_stream(name text, drop_data boolean DEFAULT false) RETURNS void
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
  DELETE FROM lakehouse.check_state c WHERE c.check_name OPERATOR(pg_catalog.=) ('bronze_offsets_once:' || name);
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

CREATE OR REPLACE FUNCTION lakehouse.reset_offsets(name text, kafka_partition integer, next_offset bigint) RETURNS void
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

CREATE OR REPLACE FUNCTION lakehouse.stream_status() RETURNS TABLE(stream text, kafka_partition integer, next_offset bigint, high_watermark bigint, lag bigint, worker_pid integer, state text, last_commit timestamp with time zone, last_error text)
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

-- Offsets a worker passes without a message (a transactional producer's markers and
-- aborted records, a compacted topic's removed records) are recorded with the batch that
-- passed them, and the partition's next offset moves past them: lag reaches 0, and the
-- offsets check counts them as explained.
CREATE TABLE lakehouse.skipped_offsets (
    stream text NOT NULL,
    kafka_partition integer NOT NULL,
    from_offset bigint NOT NULL,
    to_offset bigint NOT NULL,
    batch_id bigint NOT NULL,
    CONSTRAINT skipped_offsets_check CHECK ((to_offset > from_offset))
);
COMMENT ON TABLE lakehouse.skipped_offsets IS 'offsets [from_offset, to_offset) of a partition that a stream''s worker passed without a message: a transactional producer''s commit and abort markers and aborted records, or records a compacted topic removed; committed with the batch that passed them';
ALTER TABLE ONLY lakehouse.skipped_offsets
    ADD CONSTRAINT skipped_offsets_pkey PRIMARY KEY (stream, kafka_partition, from_offset);
GRANT SELECT ON TABLE lakehouse.skipped_offsets TO lakehouse_admin;
SELECT pg_catalog.pg_extension_config_dump('lakehouse.skipped_offsets', '');

CREATE OR REPLACE FUNCTION lakehouse._check_bronze_offsets(s lakehouse.streams, OUT passed boolean, OUT detail text) RETURNS record
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

-- maintain() prunes the ranges the offsets check has gone past.
CREATE OR REPLACE FUNCTION lakehouse.maintain(keep interval DEFAULT '7 days'::interval, bronze_retention interval DEFAULT NULL::interval) RETURNS TABLE(step text, detail text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
  s lakehouse.streams;
  t lakehouse.silver_tables;
  n bigint;
  cursor_batch bigint;
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
        DELETE FROM bronze.%I b
         WHERE b.ingested_at < pg_catalog.now() - $1 AND b.batch_id <= $2
           AND NOT EXISTS (SELECT 1 FROM lakehouse.silver_late l JOIN lakehouse.silver_tables x ON x.name = l.silver
                            WHERE x.stream = $3 AND l.kafka_partition = b.kafka_partition
                              AND l.kafka_offset = b.kafka_offset AND l.replayed_in IS NULL)$q$, s.name)
        USING bronze_retention, coalesce(cursor_batch, 9223372036854775807), s.name;
      GET DIAGNOSTICS n = ROW_COUNT;
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
