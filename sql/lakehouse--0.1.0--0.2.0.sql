-- lakehouse 0.1.0 -> 0.2.0: streams from Kafka into bronze, exactly once.
-- The registry, the offsets that are the checkpoint, dead letters, per-batch progress,
-- and the SQL calls that drive the stream workers.
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.2.0'" to load this file. \quit

-- One row per stream. name doubles as the bronze table's name, so it is restricted to
-- plain lower-case identifiers: no quoting surprises anywhere downstream.
CREATE TABLE lakehouse.streams (
    name        text PRIMARY KEY
                CONSTRAINT stream_name_is_plain CHECK (name ~ '^[a-z_][a-z0-9_]{0,62}$'),
    topic       text NOT NULL,
    brokers     text,                       -- NULL: lakehouse.brokers
    start_from  text NOT NULL DEFAULT 'earliest',
    enabled     boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- Written by the stream worker on state changes only (not per batch).
    worker_pid  integer,
    state       text NOT NULL DEFAULT 'created',
    last_error  text,
    state_at    timestamptz NOT NULL DEFAULT now()
);

-- The checkpoint: the next offset to read per partition. Moves only in the transaction
-- that commits the rows before it. error is set when a partition stopped (for example,
-- its next offset fell out of the broker's retention) and cleared by reset_offsets().
CREATE TABLE lakehouse.offsets (
    stream          text NOT NULL REFERENCES lakehouse.streams (name) ON UPDATE CASCADE,
    kafka_partition integer NOT NULL CHECK (kafka_partition >= 0),
    next_offset     bigint NOT NULL CHECK (next_offset >= 0),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    error           text,
    PRIMARY KEY (stream, kafka_partition)
);

-- Messages that could not become bronze rows, kept byte for byte with the reason.
CREATE TABLE lakehouse.dead_letters (
    stream          text NOT NULL,
    topic           text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset    bigint NOT NULL,
    kafka_timestamp timestamptz,
    kafka_key       bytea,
    raw_value       bytea,
    reason          text NOT NULL,
    batch_id        bigint NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stream, kafka_partition, kafka_offset)
);

-- One row per committed micro-batch (kind 'batch'); silver passes will add kind 'silver'.
CREATE TABLE lakehouse.stream_progress (
    stream          text NOT NULL,
    batch_id        bigint NOT NULL,
    kind            text NOT NULL DEFAULT 'batch',
    messages        integer NOT NULL,
    bytes           bigint NOT NULL,
    dead_letters    integer NOT NULL,
    first_offsets   jsonb NOT NULL,         -- {"partition": first offset in batch}
    last_offsets    jsonb NOT NULL,         -- {"partition": last offset in batch}
    started_at      timestamptz NOT NULL,
    committed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stream, batch_id)
);

-- What happened to a stream besides batches: resumes from the data, offset resets,
-- partitions that stopped. Nothing about offsets changes without a row here.
CREATE TABLE lakehouse.stream_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stream      text NOT NULL,
    logged_at   timestamptz NOT NULL DEFAULT now(),
    event       text NOT NULL,
    detail      jsonb
);

SELECT pg_catalog.pg_extension_config_dump('lakehouse.streams', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.offsets', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.dead_letters', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.stream_progress', '');
SELECT pg_catalog.pg_extension_config_dump('lakehouse.stream_log', '');

-- Administration goes through these functions; the role can be granted to operators.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'lakehouse_admin') THEN
    CREATE ROLE lakehouse_admin NOLOGIN;
  END IF;
END $$;

-- Offsets for a point in time, per partition, from the broker (start_from => timestamp).
CREATE FUNCTION lakehouse.kafka_offsets_for_time(topic text, at timestamptz, brokers text DEFAULT NULL)
RETURNS TABLE (partition integer, next_offset bigint)
LANGUAGE C VOLATILE
AS 'MODULE_PATHNAME', 'lakehouse_kafka_offsets_for_time';
REVOKE ALL ON FUNCTION lakehouse.kafka_offsets_for_time(text, timestamptz, text) FROM PUBLIC;

-- Watermarks, or no rows when the broker cannot be asked within 2 s (for status views
-- that must not fail, or hang, because Kafka is down).
CREATE FUNCTION lakehouse._watermarks_or_nothing(topic text, brokers text)
RETURNS TABLE (partition integer, low bigint, high bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET lakehouse.request_timeout = '2s'
AS $$
BEGIN
  RETURN QUERY SELECT * FROM lakehouse.kafka_watermarks(topic, brokers);
EXCEPTION WHEN OTHERS THEN
  RETURN;
END $$;
REVOKE ALL ON FUNCTION lakehouse._watermarks_or_nothing(text, text) FROM PUBLIC;

CREATE FUNCTION lakehouse.create_stream(name text, topic text, brokers text DEFAULT NULL,
                                        start_from text DEFAULT 'earliest')
RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  start_at timestamptz;
BEGIN
  IF name IS NULL OR topic IS NULL OR start_from IS NULL THEN
    RAISE EXCEPTION 'name, topic and start_from must not be null'
      USING ERRCODE = 'null_value_not_allowed';
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
END $$;

CREATE FUNCTION lakehouse.start_stream(name text)
RETURNS void LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  UPDATE lakehouse.streams s SET enabled = true
   WHERE s.name OPERATOR(pg_catalog.=) start_stream.name;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'stream "%" does not exist', name
      USING ERRCODE = 'undefined_object', HINT = 'See SELECT name FROM lakehouse.streams.';
  END IF;
END $$;

CREATE FUNCTION lakehouse.stop_stream(name text)
RETURNS void LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  worker integer;
BEGIN
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

CREATE FUNCTION lakehouse.drop_stream(name text, drop_data boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM lakehouse.stop_stream(name);
  DELETE FROM lakehouse.offsets o WHERE o.stream OPERATOR(pg_catalog.=) drop_stream.name;
  DELETE FROM lakehouse.streams s WHERE s.name OPERATOR(pg_catalog.=) drop_stream.name;
  IF drop_data THEN
    EXECUTE format('DROP TABLE IF EXISTS bronze.%I', name);
    DELETE FROM lakehouse.dead_letters d WHERE d.stream OPERATOR(pg_catalog.=) drop_stream.name;
  END IF;
  INSERT INTO lakehouse.stream_log (stream, event, detail)
  VALUES (name, 'dropped', jsonb_build_object('drop_data', drop_data));
END $$;

CREATE FUNCTION lakehouse.reset_offsets(name text, kafka_partition integer, next_offset bigint)
RETURNS void LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  old record;
BEGIN
  SELECT o.next_offset, o.error INTO old FROM lakehouse.offsets o
   WHERE o.stream OPERATOR(pg_catalog.=) reset_offsets.name
     AND o.kafka_partition OPERATOR(pg_catalog.=) reset_offsets.kafka_partition
   FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'stream "%" has no partition %', name, kafka_partition
      USING ERRCODE = 'undefined_object';
  END IF;
  IF next_offset < 0 THEN
    RAISE EXCEPTION 'next_offset must not be negative' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  UPDATE lakehouse.offsets o SET next_offset = reset_offsets.next_offset, error = NULL, updated_at = now()
   WHERE o.stream OPERATOR(pg_catalog.=) reset_offsets.name
     AND o.kafka_partition OPERATOR(pg_catalog.=) reset_offsets.kafka_partition;
  INSERT INTO lakehouse.stream_log (stream, event, detail)
  VALUES (name, 'offsets_reset', jsonb_build_object('partition', kafka_partition,
          'from', old.next_offset, 'to', next_offset, 'error_cleared', old.error));
  -- The worker re-reads its offsets on restart.
  PERFORM lakehouse.stop_stream(name);
  PERFORM lakehouse.start_stream(name);
END $$;

CREATE FUNCTION lakehouse.stream_status()
RETURNS TABLE (stream text, kafka_partition integer, next_offset bigint, high_watermark bigint,
               lag bigint, worker_pid integer, state text, last_commit timestamptz,
               last_error text)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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
              WHEN a.pid IS NULL THEN 'starting'
              ELSE s.state END,
         (SELECT max(p.committed_at) FROM lakehouse.stream_progress p
           WHERE p.stream OPERATOR(pg_catalog.=) s.name),
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

REVOKE ALL ON FUNCTION lakehouse.create_stream(text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION lakehouse.start_stream(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION lakehouse.stop_stream(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION lakehouse.drop_stream(text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION lakehouse.reset_offsets(text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION lakehouse.stream_status() FROM PUBLIC;
GRANT USAGE ON SCHEMA lakehouse TO lakehouse_admin;
GRANT EXECUTE ON FUNCTION lakehouse.create_stream(text, text, text, text),
                          lakehouse.start_stream(text), lakehouse.stop_stream(text),
                          lakehouse.drop_stream(text, boolean),
                          lakehouse.reset_offsets(text, integer, bigint),
                          lakehouse.stream_status()
   TO lakehouse_admin;
GRANT SELECT ON ALL TABLES IN SCHEMA lakehouse TO lakehouse_admin;
