/*
 * stream_catalog.c: a stream worker's own rows in the lakehouse catalog, outside its
 * batches: loading the stream (registry row, bronze table, its lock), recording its state,
 * reconciling the stored offsets with the data at start, stopping a partition.
 *
 * The checkpoint is lakehouse.offsets, moved by compare-and-set inside each batch's
 * transaction (batch_ledger.c), so that a second worker that somehow reads the same
 * partition cannot commit. The data is a second checkpoint: at start, if bronze, the dead
 * letters or the skipped ranges hold offsets at or past a partition's stored next_offset
 * (the offsets table lost or rolled back by hand), the worker resumes from the data and
 * says so in lakehouse.stream_log.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "guc.h"
#include "kafka_client.h"
#include "stream_catalog.h"
#include "worker_tx.h"

static void
log_event(const char *stream, const char *event, const char *detail_json)
{
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3] = {CStringGetTextDatum(stream), CStringGetTextDatum(event),
	CStringGetTextDatum(detail_json)};

	lh_spi_run("INSERT INTO lakehouse.stream_log (stream, event, detail) VALUES ($1, $2, $3::jsonb)",
		3, types, values, NULL);
}

/* ---------------------------------------------------------------------------------- */

/* The state a worker wrote, by its name; any other (or NULL) is LH_STATE_OTHER. */
static LhStreamState
state_by_name(const char *name)
{
	for (int s = LH_STATE_STARTING; s < LH_STATE_COUNT; s++)
		if (name != NULL && strcmp(name, lh_stream_state_names[s]) == 0)
			return (LhStreamState) s;
	return LH_STATE_OTHER;
}

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

	lh_tx_begin("lakehouse: loading stream");
	lh_spi_run("SELECT topic, coalesce(brokers, pg_catalog.current_setting('lakehouse.brokers')), start_from, enabled, state"
		"  FROM lakehouse.streams WHERE name OPERATOR(pg_catalog.=) $1",
		1, types, values, NULL);
	if (SPI_processed == 0)
	{
		lh_tx_commit();
		ereport(LOG, (errmsg("lakehouse stream \"%s\" no longer exists; worker exits", st->name)));
		proc_exit(0);
	}
	st->topic = lh_spi_text_top(0, 1);
	st->brokers = lh_spi_text_top(0, 2);
	st->start_from = lh_spi_text_top(0, 3);
	st->enabled = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	st->state = state_by_name(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5));

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
	lh_spi_run("SELECT pg_catalog.to_regclass(pg_catalog.format('bronze.%I', $1))::pg_catalog.oid", 1, types, values, NULL);
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

		lh_spi_run("SELECT l.pid FROM pg_catalog.pg_locks l"
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
		lh_tx_commit();
		ereport(LOG,
				(errmsg("lakehouse stream \"%s\" already has a worker (PID %s); this one exits",
						st->name, holder),
				 errdetail("A launcher that stopped left its workers running; one worker per stream is enforced by a lock."),
				 errhint("lakehouse.stop_stream() stops the running worker.")));
		proc_exit(0);
	}
	lh_stream_lock_held = true;

	lh_spi_run("SELECT coalesce(pg_catalog.max(batch_id), 0) + 1 FROM lakehouse.stream_progress"
		" WHERE stream OPERATOR(pg_catalog.=) $1", 1, types, values, NULL);
	st->next_batch_id = lh_spi_int64(0, 1, &isnull);
	lh_tx_commit();
}

const char *const lh_stream_state_names[] = {
	[LH_STATE_KEEP] = NULL,
	[LH_STATE_OTHER] = NULL,
	[LH_STATE_STARTING] = "starting",
	[LH_STATE_WAITING_FOR_BROKER] = "waiting for broker",
	[LH_STATE_RUNNING] = "running",
	[LH_STATE_ERROR] = "error",
};
StaticAssertDecl(lengthof(lh_stream_state_names) == LH_STATE_COUNT, "a name for every LhStreamState");

/*
 * Records the worker's state where stream_status() reads it; its own short transaction.
 * LH_STATE_KEEP records only last_error: a worker that does not hold its stream's lock (it
 * failed before taking it) leaves state and worker_pid to the worker that may hold it.
 */
void
lh_stream_set_state(StreamState *st, LhStreamState which, const char *error)
{
	const char *state = lh_stream_state_names[which];
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTOID, INT4OID};
	Datum		values[4];
	char		nulls[4] = {' ', state ? ' ' : 'n', error ? ' ' : 'n', ' '};

	Assert(which != LH_STATE_OTHER && which < LH_STATE_COUNT);
	values[0] = CStringGetTextDatum(st->name);
	values[1] = state ? CStringGetTextDatum(state) : (Datum) 0;
	values[2] = error ? CStringGetTextDatum(error) : (Datum) 0;
	values[3] = Int32GetDatum(MyProcPid);
	lh_tx_begin("lakehouse: recording stream state");
	lh_spi_run("UPDATE lakehouse.streams SET state = coalesce($2, state), last_error = $3,"
		" worker_pid = CASE WHEN $2 IS NULL THEN worker_pid ELSE $4 END, state_at = pg_catalog.now()"
		" WHERE name OPERATOR(pg_catalog.=) $1", 4, types, values, nulls);
	lh_tx_commit();
	if (state != NULL)
		st->state = which;
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
	lh_spi_run(sql, 2, types, values, NULL);
	if (SPI_processed == 1)
	{
		int64		v = lh_spi_int64(0, 1, &isnull);

		if (!isnull)
			best = v + 1;
	}
	lh_spi_run("SELECT pg_catalog.max(kafka_offset) FROM lakehouse.dead_letters"
		" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2",
		2, types, values, NULL);
	if (SPI_processed == 1)
	{
		int64		v = lh_spi_int64(0, 1, &isnull);

		if (!isnull && v + 1 > best)
			best = v + 1;
	}
	/* Ranges do not overlap: the last one by its primary key ends highest. */
	lh_spi_run("SELECT to_offset FROM lakehouse.skipped_offsets"
		" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2"
		" ORDER BY from_offset DESC LIMIT 1",
		2, types, values, NULL);
	if (SPI_processed == 1)
	{
		int64		v = lh_spi_int64(0, 1, &isnull);

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
	lh_spi_run("UPDATE lakehouse.offsets SET error = $3, updated_at = pg_catalog.now()"
		" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2",
		3, types, values, NULL);
	lh_spi_run("INSERT INTO lakehouse.stream_log (stream, event, detail)"
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

	lh_tx_begin("lakehouse: reconciling offsets");
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
		lh_spi_run("SELECT next_offset, error IS NOT NULL FROM lakehouse.offsets"
			" WHERE stream OPERATOR(pg_catalog.=) $1 AND kafka_partition OPERATOR(pg_catalog.=) $2"
			" FOR UPDATE", 2, types, values, NULL);
		found = SPI_processed == 1;
		if (found)
		{
			stored = lh_spi_int64(0, 1, &isnull);
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
				lh_spi_run("INSERT INTO lakehouse.offsets (stream, kafka_partition, next_offset) VALUES ($1, $2, $3)",
					3, types, values, NULL);
				record_partition_stop(st, ids[i], error);
				warn_partition_stop(st, ids[i], error,
									"The stream has no offsets row and no data for this partition: either it was added and its first records were deleted (retention) before the stream read them, or the stream's offsets row was lost while the partition held no data.",
									"Decide where to resume (the stream's start is in its 'created' record in lakehouse.stream_log), then call lakehouse.reset_offsets('%s', %d, <next offset>).");
				continue;
			}
			p->next_offset = from_data >= 0 ? from_data : low;
			values[2] = Int64GetDatum(p->next_offset);
			lh_spi_run("INSERT INTO lakehouse.offsets (stream, kafka_partition, next_offset) VALUES ($1, $2, $3)",
				3, types, values, NULL);
			log_event(st->name, why,
					  psprintf("{\"partition\": %d, \"next_offset\": " INT64_FORMAT "}", ids[i], p->next_offset));
			ereport(LOG,
					(errmsg("lakehouse stream \"%s\" partition %d starts at offset " INT64_FORMAT " (%s)",
							st->name, ids[i], p->next_offset, why)));
		}
		else if (from_data > stored && p->stopped)
		{
			/*
			 * A stopped partition stays where it stopped: reset_offsets() says where it
			 * resumes (and refuses a place behind the data), so that rows written ahead
			 * of the stream by something else do not make it skip the offsets between.
			 */
			p->next_offset = stored;
		}
		else if (from_data > stored && lakehouse_test_fault == LH_FAULT_IGNORE_DATA_CHECKPOINT)
		{
			/* A crash test's fault: the bronze key is left as the only guard. */
			p->next_offset = stored;
			ereport(LOG,
					(errmsg("lakehouse stream \"%s\" partition %d resumes at its stored offset " INT64_FORMAT
							", behind its data at " INT64_FORMAT " (lakehouse.test_fault = ignore_data_checkpoint)",
							st->name, ids[i], stored, from_data)));
		}
		else if (from_data > stored)
		{
			p->next_offset = from_data;
			values[2] = Int64GetDatum(from_data);
			values[3] = Int64GetDatum(stored);
			lh_spi_run("UPDATE lakehouse.offsets SET next_offset = $3, updated_at = pg_catalog.now()"
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
	lh_tx_commit();
}

void
lh_offsets_stop_partition(StreamState *st, StreamPartition *p, const char *why)
{
	char	   *error = psprintf("offset " INT64_FORMAT " is no longer available on the broker (%s)",
								 p->next_offset, why);

	lh_tx_begin("lakehouse: stopping a partition");
	record_partition_stop(st, p->partition, error);
	lh_tx_commit();
	warn_partition_stop(st, p->partition, error,
						"Messages before the broker's low watermark were deleted (retention) before they reached bronze.",
						"Decide where to resume, then call lakehouse.reset_offsets('%s', %d, <next offset>).");
}

/*
 * After a batch failed on a unique violation: the partitions whose data (bronze rows, dead
 * letters, passed ranges) already reaches past where this worker was reading. The stored
 * offsets were behind the data (rows written into bronze ahead of the stream by something
 * else, or a start that did not resume from the data): a key refused the rows again, and
 * the partition stops, rather than a restart resuming after rows the stream did not write
 * (skipping the offsets in between) or failing on the same batch again. Returns how many
 * partitions stopped. Outside a transaction.
 */
int
lh_offsets_stop_behind_data(StreamState *st)
{
	int			stopped = 0;

	lh_tx_begin("lakehouse: stopping a partition");
	for (int i = 0; i < st->nparts; i++)
	{
		StreamPartition *p = &st->parts[i];
		int64		from_data;
		char	   *error;

		if (p->stopped)
			continue;
		from_data = next_offset_from_data(st, p->partition);
		if (from_data <= p->next_offset)
			continue;
		error = psprintf("the stream's data already reaches offset " INT64_FORMAT ", past the stored next offset " INT64_FORMAT,
						 from_data - 1, p->next_offset);
		record_partition_stop(st, p->partition, error);
		warn_partition_stop(st, p->partition, error,
							"The batch read offsets that bronze rows, dead letters or passed ranges already hold, and a key refused them: lakehouse.offsets was behind the data, or something other than the stream wrote rows ahead of it. Nothing of the batch was committed.",
							"If the rows from the stored next offset on are the stream's own, call lakehouse.reset_offsets('%s', %d, <offset after them>); if something else wrote them, delete them first and reset to the stored next offset, so that no offset in between is skipped.");
		p->stopped = true;
		stopped++;
	}
	lh_tx_commit();
	return stopped;
}

/* A partition stopped before a record librdkafka could not decode (never skipped silently). */
void
lh_offsets_stop_unreadable(StreamState *st, StreamPartition *p, int64 offset, const char *why)
{
	char	   *error = psprintf("the record at offset " INT64_FORMAT " could not be read (%s)", offset, why);

	lh_tx_begin("lakehouse: stopping a partition");
	record_partition_stop(st, p->partition, error);
	lh_tx_commit();
	warn_partition_stop(st, p->partition, error,
						"librdkafka could not decode the record (corrupt, or compressed in a way it cannot read); nothing from it on was committed.",
						"Look at the record with a Kafka tool, then call lakehouse.reset_offsets('%s', %d, <next offset>) to resume past it.");
}

