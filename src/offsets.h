/*
 * offsets.h: the transactional side of a stream worker: loading the stream, reconciling
 * the stored offsets with the data, and committing a micro-batch's bookkeeping (offsets
 * compare-and-set, dead letters, progress) inside the batch's transaction.
 */
#ifndef LAKEHOUSE_OFFSETS_H
#define LAKEHOUSE_OFFSETS_H

#include "kafka_client.h"
#include "stream_worker.h"

/*
 * The session lock each stream worker holds on its stream, in pg_locks: locktype
 * advisory, classid LH_STREAM_LOCK_CLASS ("LKHS"), objid the bronze table's oid, objsubid
 * LH_STREAM_LOCK_SUBID, which the SQL advisory lock functions (1 and 2) never use.
 */
#define LH_STREAM_LOCK_CLASS 1279936595
#define LH_STREAM_LOCK_SUBID 3

extern bool lh_stream_lock_held;

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

extern void lh_stream_load(StreamState *st);
extern void lh_stream_set_state(StreamState *st, const char *state, const char *error);
extern void lh_offsets_reconcile(StreamState *st, LhKafka *kc, int32 *ids, int count);
extern void lh_offsets_stop_partition(StreamState *st, StreamPartition *p, const char *why);
extern void lh_offsets_stop_unreadable(StreamState *st, StreamPartition *p, int64 offset, const char *why);

extern void lh_batch_begin(LhBatch *b, StreamState *st, TimestampTz first_message_at);
extern void lh_batch_note(LhBatch *b, int32 partition, int64 offset, size_t bytes);
extern void lh_batch_position(LhBatch *b, int32 partition, int64 position);
extern void lh_batch_dead_letter(LhBatch *b, int32 partition, int64 offset, bool has_ts,
								 TimestampTz ts, const char *key, size_t key_len,
								 const char *value, size_t value_len, const char *reason);
extern void lh_batch_finish(LhBatch *b);
extern void lh_batch_committed(LhBatch *b, StreamState *st);

#endif
