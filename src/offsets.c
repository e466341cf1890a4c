/*
 * offsets.c: everything a stream worker reads or writes in Postgres besides bronze rows.
 *
 * The checkpoint is lakehouse.offsets, moved by compare-and-set inside each batch's
 * transaction, so that a second worker that somehow reads the same partition cannot commit.
 * The data is a second checkpoint: at start, if bronze or the dead letters hold offsets at
 * or past a partition's stored next_offset (the offsets table lost or rolled back by hand),
 * the worker resumes from the data and says so in lakehouse.stream_log.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "kafka_client.h"
#include "offsets.h"

/* ---------------------------------------------------------------------------------- */
/* Small SPI helpers */

/* The caller's memory context, current again after commit_tx (the commit leaves TopMemoryContext). */
static MemoryContext tx_caller_cxt;

static void
begin_tx(const char *activity)
{
	tx_caller_cxt = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

static void
commit_tx(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(tx_caller_cxt);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Runs a statement with parameters; raises on SPI failure. nulls uses ' ' and 'n'. */
static uint64
run(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);

	if (rc < 0)
		elog(ERROR, "lakehouse: SPI failed (%s) on: %s", SPI_result_code_string(rc), sql);
	return SPI_processed;
}

static int64
get_int64(int row, int col, bool *isnull)
{
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);

	return *isnull ? 0 : DatumGetInt64(d);
}

static char *
get_text_top(int row, int col)
{
	char	   *v = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);

	return v ? MemoryContextStrdup(TopMemoryContext, v) : NULL;
}

static Datum
bytea_datum(const char *bytes, size_t len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), bytes, len);
	return PointerGetDatum(b);
}

static void
log_event(const char *stream, const char *event, const char *detail_json)
{
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3] = {CStringGetTextDatum(stream), CStringGetTextDatum(event),
	CStringGetTextDatum(detail_json)};

	run("INSERT INTO lakehouse.stream_log (stream, event, detail) VALUES ($1, $2, $3::jsonb)",
		3, types, values, NULL);
}

/* ---------------------------------------------------------------------------------- */

/* Set once this worker holds its stream's lock (see lh_stream_load). */
bool		lh_stream_lock_held = false;

void
lh_stream_load(StreamState *st)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(st->name)};
	bool		isnull;
	Oid			bronze;
	LOCKTAG		tag;

	begin_tx("lakehouse: loading stream");
	run("SELECT topic, coalesce(brokers, pg_catalog.current_setting('lakehouse.brokers')), start_from, enabled, state"
		"  FROM lakehouse.streams WHERE name OPERATOR(pg_catalog.=) $1",
		1, types, values, NULL);
	if (SPI_processed == 0)
	{
		commit_tx();
		ereport(LOG, (errmsg("lakehouse stream \"%s\" no longer exists; worker exits", st->name)));
		proc_exit(0);
	}
	st->topic = get_text_top(0, 1);
	st->brokers = get_text_top(0, 2);
	st->start_from = get_text_top(0, 3);
	st->enabled = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	strlcpy(st->state, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5), sizeof(st->state));

	/*
	 * One worker per stream, enforced by the database rather than by the launcher's
	 * memory: a launcher that dies leaves its workers running, and the next one starts
	 * another per stream. Each worker holds, for its whole life, a session lock on its
	 * stream's bronze table (one per stream incarnation): an advisory lock tag whose
	 * objsubid (LH_STREAM_LOCK_SUBID) the pg_advisory_* functions never use, so no role
	 * can take it from SQL and keep a stream's worker out. A second worker finds it taken
	 * and exits before writing anything, so worker_pid stays the first one's and
	 * stop_stream() still reaches it.
	 */
	run("SELECT pg_catalog.to_regclass(pg_catalog.format('bronze.%I', $1))::pg_catalog.oid", 1, types, values, NULL);
	bronze = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table bronze.%s of lakehouse stream \"%s\" does not exist", st->name, st->name),
				 errhint("Drop the stream with lakehouse.drop_stream() and create it again.")));
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, LH_STREAM_LOCK_CLASS, bronze, LH_STREAM_LOCK_SUBID);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
	{
		Oid			argtypes[2] = {OIDOID, OIDOID};
		Datum		args[2] = {ObjectIdGetDatum(MyDatabaseId), ObjectIdGetDatum(bronze)};
		char		holder[32] = "unknown";

		run("SELECT l.pid FROM pg_catalog.pg_locks l"
			" WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted"
			"   AND l.database OPERATOR(pg_catalog.=) $1 AND l.objid OPERATOR(pg_catalog.=) $2"
			"   AND l.classid OPERATOR(pg_catalog.=) " CppAsString2(LH_STREAM_LOCK_CLASS) "::pg_catalog.oid"
			"   AND l.objsubid OPERATOR(pg_catalog.=) " CppAsString2(LH_STREAM_LOCK_SUBID) " LIMIT 1",
			2, argtypes, args, NULL);
		if (SPI_processed == 1)
		{
			Datum		pid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

			if (!isnull)
				snprintf(holder, sizeof(holder), "%d", DatumGetInt32(pid));
		}
		commit_tx();
		ereport(LOG,
				(errmsg("lakehouse stream \"%s\" already has a worker (PID %s); this one exits",
						st->name, holder),
				 errdetail("A launcher that stopped left its workers running; one worker per stream is enforced by a lock."),
				 errhint("lakehouse.stop_stream() stops the running worker.")));
		proc_exit(0);
	}
	lh_stream_lock_held = true;

	run("SELECT coalesce(pg_catalog.max(batch_id), 0) + 1 FROM lakehouse.stream_progress"
		" WHERE stream OPERATOR(pg_catalog.=) $1", 1, types, values, NULL);
	st->next_batch_id = get_int64(0, 1, &isnull);
	commit_tx();
}

/*
 * Records the worker's state where stream_status() reads it; its own short transaction.
 * state NULL records only last_error: a worker that does not hold its stream's lock (it
 * failed before taking it) leaves state and worker_pid to the worker that may hold it.
 */
void
lh_stream_set_state(StreamState *st, const char *state, const char *error)
{
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTOID, INT4OID};
	Datum		values[4];
	char		nulls[4] = {' ', state ? ' ' : 'n', error ? ' ' : 'n', ' '};

	values[0] = CStringGetTextDatum(st->name);
	values[1] = state ? CStringGetTextDatum(state) : (Datum) 0;
	values[2] = error ? CStringGetTextDatum(error) : (Datum) 0;
	values[3] = Int32GetDatum(MyProcPid);
	begin_tx("lakehouse: recording stream state");
	run("UPDATE lakehouse.streams SET state = coalesce($2, state), last_error = $3,"
		" worker_pid = CASE WHEN $2 IS NULL THEN worker_pid ELSE $4 END, state_at = pg_catalog.now()"
		" WHERE name OPERATOR(pg_catalog.=) $1", 4, types, values, nulls);
	commit_tx();
	if (state != NULL)
		strlcpy(st->state, state, sizeof(st->state));
}

/*
 * Where a partition's data ends: its highest offset in bronze or dead letters + 1, or the
 * end of the last range of offsets it passed without a message; -1 when none.
 */
static int64
next_offset_from_data(StreamState *st, int32 partition)
{
	Oid			types[2] = {TEXTOID, INT4OID};
	Datum		values[2] = {CStringGetTextDatum(st->name), Int32GetDatum(partition)};
	char	   *sql;
	int64		best = -1;
	bool		isnull;

	/* Both lookups are index range scans on the primary keys. */
	sql = psprintf("SELECT pg_catalog.max(kafka_offset) FROM bronze.%s WHERE kafka_partition = $2",
				   quote_identifier(st->name));
	run(sql, 2, types, values, NULL);
	if (SPI_processed == 1)
	{
		int64		v = get_int64(0, 1, &isnull);

		if (!isnull)
			best = v + 1;
	}
	run("SELECT pg_catalog.max(kafka_offset) FROM lakehouse.dead_letters"
		" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2",
		2, types, values, NULL);
	if (SPI_processed == 1)
	{
		int64		v = get_int64(0, 1, &isnull);

		if (!isnull && v + 1 > best)
			best = v + 1;
	}
	/* Ranges do not overlap: the last one by its primary key ends highest. */
	run("SELECT to_offset FROM lakehouse.skipped_offsets"
		" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2"
		" ORDER BY from_offset DESC LIMIT 1",
		2, types, values, NULL);
	if (SPI_processed == 1)
	{
		int64		v = get_int64(0, 1, &isnull);

		if (!isnull && v > best)
			best = v;
	}
	return best;
}

/* The partition's oldest retained offset, for partitions that have no stored offset yet. */
static int64
earliest_offset(LhKafka *kc, StreamState *st, int32 partition)
{
	int64		low = 0;
	int64		high = 0;
	rd_kafka_resp_err_t err;

	err = rd_kafka_query_watermark_offsets(kc->rk, st->topic, partition, &low, &high, 10000);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not read the low watermark of topic \"%s\" partition %d", st->topic, partition),
				 errdetail("librdkafka said: %s.", rd_kafka_err2str(err))));
	return low;
}

/*
 * A stopped partition: its offsets row carries the error (the worker skips it until
 * reset_offsets() clears it) and stream_log records why. Inside a transaction.
 */
static void
record_partition_stop(StreamState *st, int32 partition, const char *error)
{
	Oid			types[3] = {TEXTOID, INT4OID, TEXTOID};
	Datum		values[3];

	values[0] = CStringGetTextDatum(st->name);
	values[1] = Int32GetDatum(partition);
	values[2] = CStringGetTextDatum(error);
	run("UPDATE lakehouse.offsets SET error = $3, updated_at = pg_catalog.now()"
		" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2",
		3, types, values, NULL);
	run("INSERT INTO lakehouse.stream_log (stream, event, detail)"
		" SELECT $1, 'partition_stopped', pg_catalog.jsonb_build_object('partition', $2, 'reason', $3)",
		3, types, values, NULL);
}

/* The server log's WARNING for a stopped partition; hint takes the stream and partition. */
static void
warn_partition_stop(StreamState *st, int32 partition, const char *error, const char *detail,
					const char *hint)
{
	ereport(WARNING,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("lakehouse stream \"%s\" stopped partition %d: %s", st->name, partition, error),
			 errdetail_internal("%s", detail),
			 errhint(hint, st->name, partition)));
}

void
lh_offsets_reconcile(StreamState *st, LhKafka *kc, int32 *ids, int count)
{
	Oid			types[4] = {TEXTOID, INT4OID, INT8OID, INT8OID};
	Datum		values[4];
	MemoryContext old;

	begin_tx("lakehouse: reconciling offsets");
	old = MemoryContextSwitchTo(TopMemoryContext);
	if (st->parts)
		pfree(st->parts);
	st->parts = palloc0(sizeof(StreamPartition) * Max(count, 1));
	st->nparts = count;
	MemoryContextSwitchTo(old);

	for (int i = 0; i < count; i++)
	{
		StreamPartition *p = &st->parts[i];
		bool		isnull;
		bool		found;
		int64		stored = -1;
		int64		from_data;

		p->partition = ids[i];
		values[0] = CStringGetTextDatum(st->name);
		values[1] = Int32GetDatum(ids[i]);
		run("SELECT next_offset, error IS NOT NULL FROM lakehouse.offsets"
			" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2"
			" FOR UPDATE", 2, types, values, NULL);
		found = SPI_processed == 1;
		if (found)
		{
			stored = get_int64(0, 1, &isnull);
			p->stopped = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		}
		from_data = next_offset_from_data(st, ids[i]);

		if (!found)
		{
			const char *why = from_data >= 0 ? "offsets_restored_from_data" : "partition_added";
			int64		low = from_data >= 0 ? 0 : earliest_offset(kc, st, ids[i]);

			if (from_data < 0 && low > 0)
			{
				/*
				 * A partition this stream never read (added while it was stopped, or its
				 * offsets row and data both gone) whose first records are already deleted:
				 * starting at the broker's low watermark would skip them without a word.
				 * It starts stopped at offset 0, like a retention gap, until
				 * reset_offsets() says where to resume.
				 */
				char	   *error = psprintf("offset 0 is no longer available on the broker (a partition this stream never read starts at offset " INT64_FORMAT ")",
											 low);

				p->next_offset = 0;
				p->stopped = true;
				values[2] = Int64GetDatum(0);
				run("INSERT INTO lakehouse.offsets (stream, kafka_partition, next_offset) VALUES ($1, $2, $3)",
					3, types, values, NULL);
				record_partition_stop(st, ids[i], error);
				warn_partition_stop(st, ids[i], error,
									"The stream has no offsets row and no data for this partition: either it was added and its first records were deleted (retention) before the stream read them, or the stream's offsets row was lost while the partition held no data.",
									"Decide where to resume (the stream's start is in its 'created' record in lakehouse.stream_log), then call lakehouse.reset_offsets('%s', %d, <next offset>).");
				continue;
			}
			p->next_offset = from_data >= 0 ? from_data : low;
			values[2] = Int64GetDatum(p->next_offset);
			run("INSERT INTO lakehouse.offsets (stream, kafka_partition, next_offset) VALUES ($1, $2, $3)",
				3, types, values, NULL);
			log_event(st->name, why,
					  psprintf("{\"partition\": %d, \"next_offset\": " INT64_FORMAT "}", ids[i], p->next_offset));
			ereport(LOG,
					(errmsg("lakehouse stream \"%s\" partition %d starts at offset " INT64_FORMAT " (%s)",
							st->name, ids[i], p->next_offset, why)));
		}
		else if (from_data > stored)
		{
			p->next_offset = from_data;
			values[2] = Int64GetDatum(from_data);
			values[3] = Int64GetDatum(stored);
			run("UPDATE lakehouse.offsets SET next_offset = $3, updated_at = pg_catalog.now()"
				" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2"
				"   AND next_offset OPERATOR(pg_catalog.=) $4", 4, types, values, NULL);
			log_event(st->name, "resumed_from_data",
					  psprintf("{\"partition\": %d, \"stored_next_offset\": " INT64_FORMAT
							   ", \"data_next_offset\": " INT64_FORMAT "}", ids[i], stored, from_data));
			ereport(LOG,
					(errmsg("lakehouse stream \"%s\" partition %d resumes from its data at offset " INT64_FORMAT,
							st->name, ids[i], from_data),
					 errdetail("lakehouse.offsets said " INT64_FORMAT ", behind the rows already committed.", stored)));
		}
		else
			p->next_offset = stored;
	}
	commit_tx();
}

void
lh_offsets_stop_partition(StreamState *st, StreamPartition *p, const char *why)
{
	char	   *error = psprintf("offset " INT64_FORMAT " is no longer available on the broker (%s)",
								 p->next_offset, why);

	begin_tx("lakehouse: stopping a partition");
	record_partition_stop(st, p->partition, error);
	commit_tx();
	warn_partition_stop(st, p->partition, error,
						"Messages before the broker's low watermark were deleted (retention) before they reached bronze.",
						"Decide where to resume, then call lakehouse.reset_offsets('%s', %d, <next offset>).");
}

/* A partition stopped before a record librdkafka could not decode (never skipped silently). */
void
lh_offsets_stop_unreadable(StreamState *st, StreamPartition *p, int64 offset, const char *why)
{
	char	   *error = psprintf("the record at offset " INT64_FORMAT " could not be read (%s)", offset, why);

	begin_tx("lakehouse: stopping a partition");
	record_partition_stop(st, p->partition, error);
	commit_tx();
	warn_partition_stop(st, p->partition, error,
						"librdkafka could not decode the record (corrupt, or compressed in a way it cannot read); nothing from it on was committed.",
						"Look at the record with a Kafka tool, then call lakehouse.reset_offsets('%s', %d, <next offset>) to resume past it.");
}

/* ---------------------------------------------------------------------------------- */
/* Inside the batch's transaction */

/*
 * Call before the batch's transaction starts, in a memory context that outlives it: the
 * list of touched partitions is read again after the commit (lh_batch_committed).
 */
void
lh_batch_begin(LhBatch *b, StreamState *st, TimestampTz first_message_at)
{
	memset(b, 0, sizeof(*b));
	b->st = st;
	b->batch_id = st->next_batch_id;
	b->started_at = first_message_at;
	b->touched = palloc0(sizeof(LhBatchPartition) * Max(st->nparts, 1));
	b->skipped_capacity = 8;
	b->skipped = palloc(sizeof(LhSkippedRange) * b->skipped_capacity);
}

static StreamPartition *
state_partition(StreamState *st, int32 partition)
{
	for (int i = 0; i < st->nparts; i++)
		if (st->parts[i].partition == partition)
			return &st->parts[i];
	elog(ERROR, "lakehouse: partition %d is not assigned to stream \"%s\"", partition, st->name);
	return NULL;
}

/* The batch's entry for a partition, made on first use: it starts where the stream stands. */
static LhBatchPartition *
batch_partition(LhBatch *b, int32 partition)
{
	LhBatchPartition *t;

	for (int i = 0; i < b->ntouched; i++)
		if (b->touched[i].partition == partition)
			return &b->touched[i];
	Assert(b->ntouched < b->st->nparts);
	t = &b->touched[b->ntouched++];
	t->partition = partition;
	t->next_offset = state_partition(b->st, partition)->next_offset;
	return t;
}

/* Offsets [t->next_offset, to) carried no message: recorded, and the partition moves on. */
static void
skip_to(LhBatch *b, LhBatchPartition *t, int64 to)
{
	LhSkippedRange *r;

	if (to <= t->next_offset)
		return;
	if (b->nskipped == b->skipped_capacity)
	{
		b->skipped_capacity *= 2;
		b->skipped = repalloc(b->skipped, sizeof(LhSkippedRange) * b->skipped_capacity);
	}
	r = &b->skipped[b->nskipped++];
	r->partition = t->partition;
	r->from_offset = t->next_offset;
	r->to_offset = to;
	t->next_offset = to;
}

void
lh_batch_note(LhBatch *b, int32 partition, int64 offset, size_t bytes)
{
	LhBatchPartition *t = batch_partition(b, partition);

	b->messages++;
	b->bytes += bytes;
	/* Messages of a partition arrive in offset order; a jump is offsets without one. */
	skip_to(b, t, offset);
	if (t->messages++ == 0)
		t->first_offset = offset;
	t->last_offset = offset;
	t->next_offset = offset + 1;
}

/*
 * The consumer's position after the batch's messages were polled: past the last one, and
 * past any commit marker or aborted records that followed it (which librdkafka passes
 * without delivering). Offsets between are skipped; a position not beyond where the
 * partition stands changes nothing.
 */
void
lh_batch_position(LhBatch *b, int32 partition, int64 position)
{
	LhBatchPartition *t;

	if (position <= state_partition(b->st, partition)->next_offset)
		return;
	t = batch_partition(b, partition);
	skip_to(b, t, position);
}

void
lh_batch_dead_letter(LhBatch *b, int32 partition, int64 offset, bool has_ts, TimestampTz ts,
					 const char *key, size_t key_len, const char *value, size_t value_len,
					 const char *reason)
{
	Oid			types[9] = {TEXTOID, TEXTOID, INT4OID, INT8OID, TIMESTAMPTZOID, BYTEAOID, BYTEAOID, TEXTOID, INT8OID};
	Datum		values[9];
	char		nulls[9] = {' ', ' ', ' ', ' ', has_ts ? ' ' : 'n', key ? ' ' : 'n', value ? ' ' : 'n', ' ', ' '};

	values[0] = CStringGetTextDatum(b->st->name);
	values[1] = CStringGetTextDatum(b->st->topic);
	values[2] = Int32GetDatum(partition);
	values[3] = Int64GetDatum(offset);
	values[4] = TimestampTzGetDatum(ts);
	values[5] = key ? bytea_datum(key, key_len) : (Datum) 0;
	values[6] = value ? bytea_datum(value, value_len) : (Datum) 0;
	values[7] = CStringGetTextDatum(reason);
	values[8] = Int64GetDatum(b->batch_id);
	run("INSERT INTO lakehouse.dead_letters (stream, topic, kafka_partition, kafka_offset, kafka_timestamp,"
		" kafka_key, raw_value, reason, batch_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
		9, types, values, nulls);
	b->dead_letters++;
}

/* Offsets compare-and-set and the progress row; still inside the batch's transaction. */
void
lh_batch_finish(LhBatch *b)
{
	StringInfoData first;
	StringInfoData last;
	Oid			otypes[4] = {TEXTOID, INT4OID, INT8OID, INT8OID};
	Oid			ptypes[8] = {TEXTOID, INT8OID, INT4OID, INT8OID, INT4OID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[8];

	initStringInfo(&first);
	initStringInfo(&last);
	appendStringInfoChar(&first, '{');
	appendStringInfoChar(&last, '{');
	for (int i = 0; i < b->ntouched; i++)
	{
		LhBatchPartition *t = &b->touched[i];
		StreamPartition *p = state_partition(b->st, t->partition);

		values[0] = CStringGetTextDatum(b->st->name);
		values[1] = Int32GetDatum(t->partition);
		values[2] = Int64GetDatum(t->next_offset);
		values[3] = Int64GetDatum(p->next_offset);
		if (run("UPDATE lakehouse.offsets SET next_offset = $3, updated_at = pg_catalog.now()"
				" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2"
				"   AND next_offset OPERATOR(pg_catalog.=) $4 AND error IS NULL",
				4, otypes, values, NULL) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("offsets of stream \"%s\" partition %d changed under its worker",
							b->st->name, t->partition),
					 errdetail("The worker expected next_offset " INT64_FORMAT "; the batch was rolled back.",
							   p->next_offset),
					 errhint("Another worker or a manual change moved them; the worker restarts and re-reads them.")));
		/* The progress row's ranges are of messages (silver reads bronze by them). */
		if (t->messages > 0)
		{
			appendStringInfo(&first, "%s\"%d\": " INT64_FORMAT, first.len > 1 ? ", " : "",
							 t->partition, t->first_offset);
			appendStringInfo(&last, "%s\"%d\": " INT64_FORMAT, last.len > 1 ? ", " : "",
							 t->partition, t->last_offset);
		}
	}
	appendStringInfoChar(&first, '}');
	appendStringInfoChar(&last, '}');
	for (int i = 0; i < b->nskipped; i++)
	{
		Oid			stypes[5] = {TEXTOID, INT4OID, INT8OID, INT8OID, INT8OID};

		values[0] = CStringGetTextDatum(b->st->name);
		values[1] = Int32GetDatum(b->skipped[i].partition);
		values[2] = Int64GetDatum(b->skipped[i].from_offset);
		values[3] = Int64GetDatum(b->skipped[i].to_offset);
		values[4] = Int64GetDatum(b->batch_id);
		run("INSERT INTO lakehouse.skipped_offsets (stream, kafka_partition, from_offset, to_offset, batch_id)"
			" VALUES ($1, $2, $3, $4, $5)", 5, stypes, values, NULL);
	}

	values[0] = CStringGetTextDatum(b->st->name);
	values[1] = Int64GetDatum(b->batch_id);
	values[2] = Int32GetDatum(b->messages);
	values[3] = Int64GetDatum(b->bytes);
	values[4] = Int32GetDatum(b->dead_letters);
	values[5] = CStringGetTextDatum(first.data);
	values[6] = CStringGetTextDatum(last.data);
	values[7] = TimestampTzGetDatum(b->started_at);
	/* committed_at is the clock at the end of the batch, not the transaction's start. */
	run("INSERT INTO lakehouse.stream_progress (stream, batch_id, messages, bytes, dead_letters,"
		" first_offsets, last_offsets, started_at, committed_at)"
		" VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, pg_catalog.clock_timestamp())",
		8, ptypes, values, NULL);
}

/* After COMMIT: the in-memory offsets follow what is now durable. */
void
lh_batch_committed(LhBatch *b, StreamState *st)
{
	for (int i = 0; i < b->ntouched; i++)
		state_partition(st, b->touched[i].partition)->next_offset = b->touched[i].next_offset;
	st->next_batch_id = b->batch_id + 1;
}
