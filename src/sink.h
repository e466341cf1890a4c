/*
 * sink.h: writes one micro-batch of Kafka messages into bronze.<stream> with PostgreSQL's
 * COPY machinery (multi-insert buffers, index and constraint handling), from C.
 */
#ifndef LAKEHOUSE_SINK_H
#define LAKEHOUSE_SINK_H

#include "postgres.h"
#include "lib/stringinfo.h"
#include "utils/timestamp.h"

typedef struct LhSinkBuffer
{
	StringInfoData data;		/* binary COPY stream being built */
	int64		rows;
} LhSinkBuffer;

/* A buffer larger than this and four times the last batch is given back (lh_sink_begin). */
#define LH_SINK_KEEP_BYTES (8 * 1024 * 1024)

extern void lh_sink_begin(LhSinkBuffer *buf);
extern void lh_sink_add(LhSinkBuffer *buf, int32 partition, int64 offset, bool has_timestamp,
						TimestampTz timestamp, const char *key, size_t key_len,
						const char *value, size_t value_len, int64 batch_id);
extern uint64 lh_sink_copy(LhSinkBuffer *buf, const char *schema, const char *table);

#endif
