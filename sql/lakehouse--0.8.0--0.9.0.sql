-- lakehouse 0.8.0 -> 0.9.0: the bronze_offsets_once check names an offsets row moved
-- back behind the offsets it has already counted (it reported a negative range before).
-- The same definitions as in lakehouse--0.9.0.sql (the regress test `upgrade` compares them).
\echo Use "ALTER EXTENSION lakehouse UPDATE TO '0.9.0'" to load this file. \quit

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
