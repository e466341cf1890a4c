/*
 * stream_worker.h: what one stream worker knows about its stream, shared by the worker loop
 * (stream_worker.c) and the transactional parts (stream_catalog.c, batch_ledger.c).
 */
#ifndef LAKEHOUSE_STREAM_WORKER_H
#define LAKEHOUSE_STREAM_WORKER_H

#include "postgres.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/timestamp.h"

#define LH_STREAM_NAME_MAX 64

typedef struct StreamPartition
{
	int32		partition;
	int64		next_offset;	/* as committed in lakehouse.offsets */
	bool		stopped;		/* offsets.error is set: not consumed until reset */
	/*
	 * A retention gap found while a batch was being collected: the partition is paused at
	 * once and stopped after the batch commits (which holds its messages before the gap),
	 * so that the stop names the first missing offset.
	 */
	bool		stop_pending;
	char		stop_reason[256];
	int64		unreadable_offset;	/* with stop_pending: -1, or a message that could not be read */
} StreamPartition;

/*
 * What a stream worker says it is doing, in lakehouse.streams.state (stream_status() shows
 * it). LH_STATE_OTHER: a state the worker did not write (the column's default, 'created').
 * LH_STATE_KEEP is no state: lh_stream_set_state records only last_error.
 */
typedef enum LhStreamState
{
	LH_STATE_KEEP,
	LH_STATE_OTHER,
	LH_STATE_STARTING,
	LH_STATE_WAITING_FOR_BROKER,
	LH_STATE_RUNNING,
	LH_STATE_ERROR,
	LH_STATE_COUNT				/* not a state: how many there are */
} LhStreamState;

/* The names written to lakehouse.streams.state, by LhStreamState (NULL: none written). */
extern const char *const lh_stream_state_names[];

typedef struct StreamState
{
	char		name[LH_STREAM_NAME_MAX];
	char	   *topic;
	char	   *brokers;		/* resolved: the stream's own or lakehouse.brokers */
	char	   *start_from;
	bool		enabled;
	LhStreamState state;		/* as last read from or written to lakehouse.streams.state */
	StreamPartition *parts;
	int			nparts;
	int64		next_batch_id;
	int			msgs_capacity;
} StreamState;

extern PGDLLEXPORT void lakehouse_stream_main(Datum main_arg);

#endif
