/*
 * batch_ledger.h: one micro-batch's bookkeeping in its own transaction (see batch_ledger.c).
 */
#ifndef LAKEHOUSE_BATCH_LEDGER_H
#define LAKEHOUSE_BATCH_LEDGER_H

#include "stream_worker.h"

/*
 * Per partition a batch moves: the one it received messages from, or whose consumer
 * position passed offsets that carry no message (skipped ranges below).
 */
typedef struct LhBatchPartition
{
	int32		partition;
	int			messages;		/* 0: only offsets without a message were passed */
	int64		first_offset;	/* of its first message, when messages > 0 */
	int64		last_offset;	/* of its last message, when messages > 0 */
	int64		next_offset;	/* where the partition stands after the batch */
} LhBatchPartition;

/*
 * Offsets [from, to) of a partition that the consumer passed without a message: a
 * transactional producer's commit and abort markers and its aborted records (the worker
 * reads committed data only), or records a compacted topic removed. Recorded in
 * lakehouse.skipped_offsets so that every offset is accounted for exactly once.
 */
typedef struct LhSkippedRange
{
	int32		partition;
	int64		from_offset;
	int64		to_offset;
} LhSkippedRange;

typedef struct LhBatch
{
	StreamState *st;
	int64		batch_id;
	TimestampTz started_at;		/* arrival of the batch's first message */
	int			messages;
	int64		bytes;
	int			dead_letters;
	LhBatchPartition *touched;
	int			ntouched;
	LhSkippedRange *skipped;
	int			nskipped;
	int			skipped_capacity;
} LhBatch;

extern void lh_batch_begin(LhBatch *b, StreamState *st, TimestampTz first_message_at);
extern void lh_batch_note(LhBatch *b, int32 partition, int64 offset, size_t bytes);
extern void lh_batch_position(LhBatch *b, int32 partition, int64 position);
extern void lh_batch_dead_letter(LhBatch *b, int32 partition, int64 offset, bool has_ts,
								 TimestampTz ts, const char *key, size_t key_len,
								 const char *value, size_t value_len, const char *reason);
extern void lh_batch_finish(LhBatch *b);
extern void lh_batch_committed(LhBatch *b, StreamState *st);

#endif
