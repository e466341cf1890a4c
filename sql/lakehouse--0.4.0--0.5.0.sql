-- lakehouse 0.4.0 -> 0.5.0: a silver table declared over a stream whose oldest
-- stream_progress rows were pruned can run its first pass; a stream created under the
-- name of a dropped one starts without that stream's stream_progress rows (below).
--
-- create_silver() starts a table's cursor just before the oldest batch stream_progress
-- still holds. When maintain() had pruned the stream's first batches (bronze retention),
-- that batch no longer existed, and the pass's guard against a cut history ("cannot find
-- bronze batch N, where its cursor stands") stopped every pass of the new table, forever.
-- A cursor that no pass has moved yet (last_batch_committed_at is NULL) is now checked
-- by the batch after it instead: batch ids have no gaps, so that batch must be there as
-- soon as any later one is (maintain() prunes only below the oldest silver cursor; a
-- batch missing there was deleted by hand).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.5.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION lakehouse._silver_pass(p_name text)
RETURNS lakehouse.silver_pass_result LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $$
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
  -- The recentchange pipeline's sessions close as soon as the low watermark passes them.
  IF t.session_gap IS NOT NULL AND low IS NOT NULL THEN
    PERFORM lakehouse._recentchange_close_sessions(low, t.session_gap);
  END IF;
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
END $$;
REVOKE ALL ON FUNCTION lakehouse._silver_pass(text) FROM PUBLIC;

-- create_stream (0.5.0): the stream_progress rows an earlier stream of this name left go.
-- They described batches of bronze rows that are gone (a new stream's worker numbered its
-- batches after them, and a silver table over it read the old batches' offset ranges
-- first: empty passes). Silver tables over the name are refused, as in 0.4.0, so nothing
-- still reads them. The rest is 0.4.0's create_stream.
CREATE OR REPLACE FUNCTION lakehouse.create_stream(name text, topic text, brokers text DEFAULT NULL,
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
  -- An earlier stream of this name may have left its checks' positions: this stream's
  -- checks start from its own beginning.
  DELETE FROM lakehouse.check_state c WHERE c.check_name OPERATOR(pg_catalog.=) ('bronze_offsets_once:' || name);
  DELETE FROM lakehouse.stream_progress p WHERE p.stream OPERATOR(pg_catalog.=) create_stream.name;

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
