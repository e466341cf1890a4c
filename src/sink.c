/*
 * sink.c: bronze writer. A batch is encoded as a binary COPY stream in memory and handed to
 * CopyFrom() through a data-source callback: the same code path as COPY FROM STDIN, with
 * its multi-insert buffering, without SQL text, quoting or a client round trip. The batch's
 * messages were screened by message_check.c first; a row COPY still refuses raises an
 * error here. batch_writer.c runs each attempt in a subtransaction: after a data error it
 * checks every payload with the JSON parser, then splits the batch until the message at
 * fault stands alone and becomes a dead letter; any other error aborts the batch's
 * transaction.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "commands/copy.h"
#include "nodes/makefuncs.h"
#include "port/pg_bswap.h"
#include "parser/parse_node.h"
#include "parser/parse_relation.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "sink.h"

/* Columns of bronze.<stream> that the sink fills; ingested_at takes its default. */
static const char *const sink_columns[] = {
	"kafka_partition", "kafka_offset", "kafka_timestamp", "kafka_key", "payload", "batch_id"
};
#define SINK_NCOLUMNS lengthof(sink_columns)

/* jsonb's binary input format: one version byte, then the JSON text. */
#define JSONB_BINARY_VERSION 1

static const char copy_signature[11] = "PGCOPY\n\377\r\n\0";

/* CopyFrom's callback takes no context argument, hence one static reader position. */
static LhSinkBuffer *reading;
static int	read_pos;

static void
put_int16(StringInfo s, int16 v)
{
	uint16		n = pg_hton16((uint16) v);

	appendBinaryStringInfo(s, (char *) &n, 2);
}

static void
put_int32(StringInfo s, int32 v)
{
	uint32		n = pg_hton32((uint32) v);

	appendBinaryStringInfo(s, (char *) &n, 4);
}

static void
put_int64(StringInfo s, int64 v)
{
	uint64		n = pg_hton64((uint64) v);

	appendBinaryStringInfo(s, (char *) &n, 8);
}

/*
 * Starts a batch in buf. The buffer lives in TopMemoryContext and is reused batch after
 * batch: a fresh multi-megabyte allocation per batch would be handed out by the kernel as
 * zeroed pages every time, which showed up as a tenth of the worker's time. But a buffer
 * that one huge batch (or one huge message) grew is not kept for the small batches after
 * it: past LH_SINK_KEEP_BYTES and four times what the last batch used, it is freed and
 * grows again from small.
 */
void
lh_sink_begin(LhSinkBuffer *buf)
{
	if (buf->data.data != NULL && buf->data.maxlen > LH_SINK_KEEP_BYTES &&
		(int64) buf->data.len * 4 < (int64) buf->data.maxlen)
	{
		pfree(buf->data.data);
		buf->data.data = NULL;
	}
	if (buf->data.data == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		initStringInfo(&buf->data);
		MemoryContextSwitchTo(old);
	}
	else
		resetStringInfo(&buf->data);
	appendBinaryStringInfo(&buf->data, copy_signature, sizeof(copy_signature));
	put_int32(&buf->data, 0);	/* flags */
	put_int32(&buf->data, 0);	/* header extension length */
	buf->rows = 0;
}

void
lh_sink_add(LhSinkBuffer *buf, int32 partition, int64 offset, bool has_timestamp,
			TimestampTz timestamp, const char *key, size_t key_len,
			const char *value, size_t value_len, int64 batch_id)
{
	StringInfo	s = &buf->data;

	put_int16(s, SINK_NCOLUMNS);
	put_int32(s, 4);
	put_int32(s, partition);
	put_int32(s, 8);
	put_int64(s, offset);
	if (has_timestamp)
	{
		put_int32(s, 8);
		put_int64(s, timestamp);
	}
	else
		put_int32(s, -1);
	if (key != NULL)
	{
		put_int32(s, (int32) key_len);
		appendBinaryStringInfo(s, key, (int) key_len);
	}
	else
		put_int32(s, -1);
	put_int32(s, (int32) value_len + 1);
	appendStringInfoChar(s, JSONB_BINARY_VERSION);
	appendBinaryStringInfo(s, value, (int) value_len);
	put_int32(s, 8);
	put_int64(s, batch_id);
	buf->rows++;
}

static int
read_batch(void *outbuf, int minread, int maxread)
{
	int			n = Min(maxread, reading->data.len - read_pos);

	memcpy(outbuf, reading->data.data + read_pos, n);
	read_pos += n;
	return n;
}

/*
 * COPYs the batch into schema.table; the caller holds an open transaction and an active
 * snapshot. Returns the number of rows inserted.
 */
uint64
lh_sink_copy(LhSinkBuffer *buf, const char *schema, const char *table)
{
	Relation	rel;
	ParseState *pstate;
	CopyFromState cstate;
	List	   *columns = NIL;
	List	   *options;
	uint64		inserted;

	if (buf->rows == 0)
		return 0;
	put_int16(&buf->data, -1);	/* trailer */

	for (int i = 0; i < (int) SINK_NCOLUMNS; i++)
		columns = lappend(columns, makeString(pstrdup(sink_columns[i])));
	options = list_make1(makeDefElem("format", (Node *) makeString("binary"), -1));

	rel = table_openrv(makeRangeVar((char *) schema, (char *) table, -1), RowExclusiveLock);
	/* CopyFrom() sets up its result relation from range table entry 1, as COPY does. */
	pstate = make_parsestate(NULL);
	(void) addRangeTableEntryForRelation(pstate, rel, RowExclusiveLock, NULL, false, false);
	reading = buf;
	read_pos = 0;
	cstate = BeginCopyFrom(pstate, rel, NULL, NULL, false, read_batch, columns, options);
	inserted = CopyFrom(cstate);
	EndCopyFrom(cstate);
	free_parsestate(pstate);
	table_close(rel, NoLock);
	reading = NULL;
	return inserted;
}
