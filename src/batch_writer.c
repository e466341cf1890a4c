/*
 * batch_writer.c: one micro-batch into bronze, never dropped whole.
 *
 * The common path parses each payload once, in COPY's jsonb input. Messages that fail the
 * cheap checks (message_check.c) become dead letters up front. If COPY still refuses the
 * batch with an error that a message's content can cause (see is_message_refusal), the
 * batch is retried inside subtransactions: first after checking every payload with the
 * JSON parser, then, if something is still refused, split in halves until each refused
 * message stands alone and becomes a dead letter with the error as its reason. Besides
 * data exceptions (class 22) that covers two refusals of a message's sheer size: jsonb's
 * own limits, and PostgreSQL's 1 GB allocation limit (a JSON array of over 2^24 elements).
 * A lone message refused with one of those two is blamed only if a stand-in row at its
 * offset goes in, since a broken table can raise them for any row. Any other error (a
 * dropped table, a duplicate offset, out of disk or memory, a cancel) is not the
 * message's fault: it aborts the batch, and the worker retries from the last commit.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "nodes/makefuncs.h"
#include "datatype/timestamp.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "batch_writer.h"
#include "message_check.h"
#include "sink.h"
#include "writeback.h"

typedef struct WriteState
{
	LhBatch    *batch;
	rd_kafka_message_t **msgs;
	ErrorData  *refusal;		/* the last COPY refusal */
} WriteState;

static void copy_or_split(WriteState *ws, const int *idx, int k);

/* The payload of a stand-in row: valid JSON that any jsonb column takes. */
static const char stand_in_payload[] = "{}";

static TimestampTz
kafka_time(rd_kafka_message_t *rkm, bool *has_ts)
{
	rd_kafka_timestamp_type_t tstype;
	int64		ms = rd_kafka_message_timestamp(rkm, &tstype);

	int64		ms_2000;

	/*
	 * Kafka: milliseconds since the Unix epoch (negative: none); Postgres: microseconds
	 * since 2000. A producer may send any 64-bit value (Long.MAX_VALUE as a sentinel, say):
	 * one that a timestamptz cannot hold is no timestamp (NULL), never an overflow or a
	 * value that later breaks pg_dump. The epoch moves first, in milliseconds, so that
	 * nothing a timestamptz can hold is lost to the multiplication.
	 */
	*has_ts = false;
	if (ms < 0)
		return 0;
	ms_2000 = ms - (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;
	if (ms_2000 >= END_TIMESTAMP / 1000)
		return 0;
	*has_ts = true;
	return (TimestampTz) ms_2000 * 1000;
}

static void
dead_letter(WriteState *ws, rd_kafka_message_t *rkm, const char *reason)
{
	bool		has_ts;
	TimestampTz ts = kafka_time(rkm, &has_ts);

	lh_batch_dead_letter(ws->batch, rkm->partition, rkm->offset, has_ts, ts,
						 (const char *) rkm->key, rkm->key_len,
						 (const char *) rkm->payload, rkm->len, reason);
}

/* PostgreSQL's message for an allocation over its 1 GB limit (utils/mmgr/mcxt.c). */
#define ALLOC_LIMIT_MESSAGE "invalid memory alloc request size"

/*
 * Whether an error COPY raised is one a message's content can cause: a data exception
 * (class 22), one of jsonb's size limits (54000 with a message about jsonb), or the 1 GB
 * allocation limit (XX000 "invalid memory alloc request size": jsonb input needs an array
 * of 2^25 32-byte entries for a JSON array of over 2^24 elements). The untranslated
 * message (message_id) is compared, so lc_messages does not matter. Out of memory (53200)
 * is not among them: it can be the server's state at that moment, and a batch retried
 * later may well fit.
 */
static bool
is_message_refusal(const ErrorData *edata)
{
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_DATA_EXCEPTION)
		return true;
	if (edata->message_id == NULL)
		return false;
	if (edata->sqlerrcode == ERRCODE_PROGRAM_LIMIT_EXCEEDED)
		return strstr(edata->message_id, "jsonb") != NULL;
	if (edata->sqlerrcode == ERRCODE_INTERNAL_ERROR)
		return strncmp(edata->message_id, ALLOC_LIMIT_MESSAGE, strlen(ALLOC_LIMIT_MESSAGE)) == 0;
	return false;
}

/*
 * COPYs the messages idx[0..k) in a subtransaction. Returns false, with the refusal in
 * ws->refusal, when COPY raised an error that a message's content can cause; re-raises
 * anything else. With stand_in, each row carries stand_in_payload instead of its
 * message's value, and the subtransaction is rolled back even when COPY succeeds: a probe
 * of whether bronze takes a row at those offsets at all.
 *
 * COPY runs in a memory context of its own, deleted after each attempt: a refused attempt
 * leaves its executor state and per-row memory behind (rolling back a subtransaction does
 * not free the caller's context), and a huge message parsed once per attempt, up to a
 * gigabyte each time, would otherwise pile up until the batch ends.
 */
static bool
copy_subset(WriteState *ws, const int *idx, int k, bool stand_in)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	MemoryContext attempt_cxt;
	static LhSinkBuffer sink;	/* reused across batches, see lh_sink_begin() */
	volatile bool ok = true;

	lh_sink_begin(&sink);
	for (int j = 0; j < k; j++)
	{
		rd_kafka_message_t *rkm = ws->msgs[idx[j]];
		bool		has_ts;
		TimestampTz ts = kafka_time(rkm, &has_ts);

		lh_sink_add(&sink, rkm->partition, rkm->offset, has_ts, ts,
					(const char *) rkm->key, rkm->key_len,
					stand_in ? stand_in_payload : (const char *) rkm->payload,
					stand_in ? strlen(stand_in_payload) : rkm->len, ws->batch->batch_id);
	}

	attempt_cxt = AllocSetContextCreate(oldcontext, "lakehouse COPY attempt", ALLOCSET_DEFAULT_SIZES);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(attempt_cxt);
	PG_TRY();
	{
		lh_sink_copy(&sink, "bronze", ws->batch->st->name);
		if (stand_in)
			RollbackAndReleaseCurrentSubTransaction();
		else
			ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		MemoryContextDelete(attempt_cxt);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		MemoryContextDelete(attempt_cxt);
		if (!is_message_refusal(edata))
			ReThrowError(edata);
		ws->refusal = edata;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/*
 * A lone message that COPY refused becomes a dead letter. A data exception is the
 * message's by definition; a size refusal only if a stand-in row at the same offset goes
 * in. If bronze refuses the stand-in with a size refusal too, the message's error is
 * re-raised (any other error of the stand-in is raised as it is): the batch aborts, and no
 * message is blamed for what the table did.
 */
static void
dead_letter_refused(WriteState *ws, int i)
{
	ErrorData  *refusal = ws->refusal;
	bool		data_error = ERRCODE_TO_CATEGORY(refusal->sqlerrcode) == ERRCODE_DATA_EXCEPTION;

	if (!data_error && !copy_subset(ws, &i, 1, true))
		ReThrowError(refusal);
	dead_letter(ws, ws->msgs[i],
				data_error ? psprintf("refused by bronze: %s", refusal->message)
				: psprintf("refused by bronze: %s (SQLSTATE %s)", refusal->message,
						   unpack_sql_state(refusal->sqlerrcode)));
}

/*
 * Splits a range COPY refused (with ws->refusal) in halves, each COPYed on its own, until
 * every refused message is alone and dead-lettered.
 */
static void
split_refused(WriteState *ws, const int *idx, int k)
{
	if (k == 1)
	{
		dead_letter_refused(ws, idx[0]);
		return;
	}
	copy_or_split(ws, idx, k / 2);
	copy_or_split(ws, idx + k / 2, k - k / 2);
}

/* COPYs a range; if it is refused, splits it (split_refused). */
static void
copy_or_split(WriteState *ws, const int *idx, int k)
{
	if (k == 0 || copy_subset(ws, idx, k, false))
		return;
	split_refused(ws, idx, k);
}

/* Writes the messages good[0..ngood) into bronze: one COPY, or the paths of a refusal. */
static void
write_good(WriteState *ws, int *good, int ngood)
{
	int			nparsed = 0;

	/* The common case: one COPY (in one subtransaction), one parse per payload. */
	if (copy_subset(ws, good, ngood, false))
		return;
	/* Refused: check every payload as JSON, dead-letter what fails, then retry the rest. */
	for (int j = 0; j < ngood; j++)
	{
		rd_kafka_message_t *rkm = ws->msgs[good[j]];
		char	   *problem = lh_json_problem((const char *) rkm->payload, rkm->len);

		if (problem != NULL)
			dead_letter(ws, rkm, problem);
		else
			good[nparsed++] = good[j];
	}
	/* Nothing removed: the same set would be refused again (and a huge message parsed
	 * again for nothing), so go straight to its halves. */
	if (nparsed == ngood)
		split_refused(ws, good, nparsed);
	else
		copy_or_split(ws, good, nparsed);
}

void
lh_write_batch(LhBatch *batch, rd_kafka_message_t **msgs, int n, size_t max_bytes)
{
	WriteState	ws = {batch, msgs, NULL};
	int		   *good = palloc(sizeof(int) * Max(n, 1));
	int			ngood = 0;
	Oid			bronze;
	BlockNumber new_blocks_from;

	for (int i = 0; i < n; i++)
	{
		rd_kafka_message_t *rkm = msgs[i];
		char	   *problem = lh_message_problem((const char *) rkm->payload, rkm->len,
												 (const char *) rkm->key, rkm->key_len, max_bytes);

		lh_batch_note(batch, rkm->partition, rkm->offset, rkm->len);
		if (problem != NULL)
			dead_letter(&ws, rkm, problem);
		else
			good[ngood++] = i;
	}
	if (ngood == 0)
		return;

	/*
	 * Locked in the batch's own transaction, not only inside each attempt: a subtransaction
	 * that rolls back gives up its locks, and a DROP TRIGGER or ALTER TABLE slipping in
	 * between a refused attempt and the stand-in's probe would have the probe judge a
	 * different table, and blame a message for what the old one did. (A trigger's function
	 * replaced by CREATE OR REPLACE takes no lock on the table: the lock narrows that
	 * window, it does not close it.)
	 */
	bronze = RangeVarGetRelid(makeRangeVar("bronze", ws.batch->st->name, -1), RowExclusiveLock, false);
	new_blocks_from = lh_writeback_mark(bronze);
	write_good(&ws, good, ngood);
	/* The blocks this batch added go to the disk now, not in a burst later (writeback.c). */
	lh_writeback_grown(bronze, new_blocks_from);
}
