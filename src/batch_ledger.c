/*
 * batch_ledger.c: the bookkeeping of one micro-batch, written in the batch's own
 * transaction beside its bronze rows: per partition the messages and offsets it moved
 * (lh_batch_note, lh_batch_position), its dead letters, then at the end the offsets
 * compare-and-set, the ranges passed without a message (lakehouse.skipped_offsets) and the
 * batch's lakehouse.stream_progress row (lh_batch_finish). The rows and the checkpoint
 * commit together or not at all.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "batch_ledger.h"
#include "worker_tx.h"

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
	values[5] = key ? lh_bytea_datum(key, key_len) : (Datum) 0;
	values[6] = value ? lh_bytea_datum(value, value_len) : (Datum) 0;
	values[7] = CStringGetTextDatum(reason);
	values[8] = Int64GetDatum(b->batch_id);
	lh_spi_run("INSERT INTO lakehouse.dead_letters (stream, topic, kafka_partition, kafka_offset, kafka_timestamp,"
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
		if (lh_spi_run("UPDATE lakehouse.offsets SET next_offset = $3, updated_at = pg_catalog.now()"
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
		lh_spi_run("INSERT INTO lakehouse.skipped_offsets (stream, kafka_partition, from_offset, to_offset, batch_id)"
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
	lh_spi_run("INSERT INTO lakehouse.stream_progress (stream, batch_id, messages, bytes, dead_letters,"
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
