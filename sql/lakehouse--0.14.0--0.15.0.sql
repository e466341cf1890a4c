-- lakehouse 0.14.0 -> 0.15.0:
-- - A row that fits a silver table's declaration but cannot be written (a key over a
--   unique index's size limit, a number that overflows in the recentchange pipeline's
--   gold trigger, a check constraint) no longer fails every pass for good: the admit finds
--   the rows that fail alone and admits the pass again with them as rejects
--   (silver_rejects, counted invalid, a WARNING). Each table's admit gains a last
--   parameter, lh_probe. A table named like a silver partition that is not attached to it
--   stops the pass with a clear error.
-- - The extract and admit functions pin TimeZone to UTC: a zone-less time in an
--   expression means the same whoever runs the pass. A table declared in a database whose
--   TimeZone is not UTC, with expressions that read zone-less times, gets other event
--   times for rows admitted from now on (copies of rows admitted before may then be
--   admitted again).
-- - A declaration's expressions are checked where the extract evaluates them: a
--   set-returning function, an aggregate or the bronze table's own name is refused with
--   the column's name (it used to pass the check and fail the declaration unnamed).
-- - create_recentchange_pipeline() refuses a silver.edits declared with create_silver()
--   instead of returning as if it were the pipeline's.
-- - silver.edits gets a comment on every column (a declared pipeline too).
-- Every silver table's extract and admit functions are written again, under the registry
-- rows' locks (a running pass finishes with the old functions, the next waits for this
-- update): an object of your own that depends on them makes the update fail.
-- The same definitions as in lakehouse--0.15.0.sql (the regress test `upgrade` compares them).

CREATE OR REPLACE FUNCTION lakehouse._silver_check_expression(owner regrole, stream text, what text, expr text, type text) RETURNS void
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

CREATE OR REPLACE FUNCTION lakehouse._silver_ensure_partition(name text, bucket timestamp with time zone, step interval) RETURNS void
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

REVOKE ALL ON FUNCTION lakehouse._recentchange_comment_edits() FROM PUBLIC;

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

DO $upgrade$
BEGIN
  IF EXISTS (SELECT 1 FROM lakehouse.silver_tables s WHERE s.name = 'edits' AND s.session_gap IS NOT NULL)
     AND pg_catalog.to_regclass('silver.edits') IS NOT NULL THEN
    PERFORM lakehouse._recentchange_comment_edits();
  END IF;
END $upgrade$;

SELECT lakehouse._silver_regenerate_all();
