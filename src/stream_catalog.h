/*
 * stream_catalog.h: a stream worker's catalog rows outside its batches (see stream_catalog.c).
 */
#ifndef LAKEHOUSE_STREAM_CATALOG_H
#define LAKEHOUSE_STREAM_CATALOG_H

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

extern void lh_stream_load(StreamState *st);
extern void lh_stream_set_state(StreamState *st, LhStreamState state, const char *error);
extern void lh_offsets_reconcile(StreamState *st, LhKafka *kc, int32 *ids, int count);
extern void lh_offsets_stop_partition(StreamState *st, StreamPartition *p, const char *why);
extern int	lh_offsets_stop_behind_data(StreamState *st);
extern void lh_offsets_stop_unreadable(StreamState *st, StreamPartition *p, int64 offset, const char *why);

#endif
