/*
 * writeback.c: starts the kernel's writeback of the blocks a table grew by.
 *
 * PostgreSQL 15 extends a table one block at a time by writing a page of zeros into the
 * kernel's page cache, and nothing asks for those pages to reach the disk: the
 * *_flush_after settings cover pages the bgwriter, the checkpointer or a backend write out
 * of shared buffers, not this. At the stream worker's rates (tens of MB of bronze a second)
 * Linux's defaults then hold the new pages dirty for dirty_expire_centisecs (30 s) and
 * write them in one go: 0.5 GB at once was measured here, and every WAL flush queued
 * behind it (commits stalled for 1 to 2 s; benchmarks/results.md, 2026-12-02). Asking for
 * the writeback of each batch's new blocks right away spreads the same writes out. It is a
 * hint (sync_file_range's SYNC_FILE_RANGE_WRITE through smgrwriteback): nothing waits for
 * the disk, durability is unchanged (the WAL still carries it), and PostgreSQL skips it
 * when fsync is off.
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class_d.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/rel.h"

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

/* The table's size in blocks (main fork), 0 for a table without heap blocks; the caller
 * holds a lock on it. */
BlockNumber
lh_relation_blocks(Oid relid)
{
	Relation	rel = relation_open(relid, NoLock);
	BlockNumber n = has_heap_blocks(rel) ? RelationGetNumberOfBlocks(rel) : 0;

	relation_close(rel, NoLock);
	return n;
}

/* Starts the writeback of the table's blocks from `from` to its end; the caller holds a lock. */
void
lh_writeback_grown(Oid relid, BlockNumber from)
{
	Relation	rel = relation_open(relid, NoLock);

	if (has_heap_blocks(rel))
	{
		BlockNumber to = RelationGetNumberOfBlocks(rel);

		if (to > from)
			smgrwriteback(RelationGetSmgr(rel), MAIN_FORKNUM, from, to - from);
	}
	relation_close(rel, NoLock);
}
