/*
 * writeback.c: starts the kernel's writeback of the blocks a table grew by.
 *
 * PostgreSQL 15 extends a table one block at a time by writing a page of zeros into the
 * kernel's page cache, and nothing asks for those pages to reach the disk: the
 * *_flush_after settings cover pages the bgwriter, the checkpointer or a backend write out
 * of shared buffers, not this. At the stream worker's rates (over 15 MB of bronze a second)
 * Linux's defaults then hold the new pages dirty for dirty_expire_centisecs (30 s) and
 * write them in one go: 0.5 GB at once was measured here, and the WAL flushes queued
 * behind it stalled the stream worker's commits, and silver after them, for 1 to 2 s
 * (benchmarks/results.md, 2026-12-02, "bronze's new pages"). Asking for the writeback of
 * each batch's new blocks right away spreads the same writes out. It is a request, through
 * smgrwriteback and pg_flush_data (sync_file_range's SYNC_FILE_RANGE_WRITE): it does not
 * wait for the pages to be written, durability is unchanged (the WAL carries it), and
 * PostgreSQL skips it when fsync is off. Like PostgreSQL's own *_flush_after writes it can
 * wait while the disk's queue is full (the commit after it waits for that disk anyway) and
 * an I/O error it reports follows data_sync_retry (off: a PANIC, as for those writes).
 * Not covered: bronze's TOAST table (payloads over about 2 kB compressed) and its index,
 * both far smaller than its heap for events of the recentchange kind.
 * lakehouse.bronze_writeback turns it off.
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class_d.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/rel.h"

#include "guc.h"
#include "writeback.h"

/*
 * Only a plain heap table has blocks of its own to count and write back: a bronze that a
 * user turned into a partitioned or foreign table (or a table of another access method,
 * whose blocks need not be where md.c keeps them) is left to the kernel as before.
 */
static bool
has_heap_blocks(Relation rel)
{
	return rel->rd_rel->relkind == RELKIND_RELATION && rel->rd_rel->relam == HEAP_TABLE_AM_OID;
}

/*
 * Before a batch writes: the table's size in blocks, where its new blocks will start, or
 * InvalidBlockNumber when there is nothing to ask for (lakehouse.bronze_writeback off, or
 * no heap blocks). The caller holds a lock on the table until lh_writeback_grown().
 */
BlockNumber
lh_writeback_mark(Oid relid)
{
	Relation	rel;
	BlockNumber n = InvalidBlockNumber;

	if (!lakehouse_bronze_writeback)
		return InvalidBlockNumber;
	rel = relation_open(relid, NoLock);
	if (has_heap_blocks(rel))
		n = RelationGetNumberOfBlocks(rel);
	relation_close(rel, NoLock);
	return n;
}

/* After it: starts the writeback of the table's blocks from `from` (the mark) to its end. */
void
lh_writeback_grown(Oid relid, BlockNumber from)
{
	Relation	rel;
	BlockNumber to;

	if (from == InvalidBlockNumber)
		return;
	rel = relation_open(relid, NoLock);
	to = RelationGetNumberOfBlocks(rel);
	if (to > from)
		smgrwriteback(RelationGetSmgr(rel), MAIN_FORKNUM, from, to - from);
	relation_close(rel, NoLock);
}
