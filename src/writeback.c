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
#include "storage/bufmgr.h"
#include "storage/smgr.h"
#include "utils/rel.h"

#include "writeback.h"

/* The table's size in blocks (main fork); the caller holds a lock on it. */
BlockNumber
lh_relation_blocks(Oid relid)
{
	Relation	rel = relation_open(relid, NoLock);
	BlockNumber n = RelationGetNumberOfBlocks(rel);

	relation_close(rel, NoLock);
	return n;
}

/* Starts the writeback of the table's blocks from `from` to its end; the caller holds a lock. */
void
lh_writeback_grown(Oid relid, BlockNumber from)
{
	Relation	rel = relation_open(relid, NoLock);
	BlockNumber to = RelationGetNumberOfBlocks(rel);

	if (to > from)
		smgrwriteback(RelationGetSmgr(rel), MAIN_FORKNUM, from, to - from);
	relation_close(rel, NoLock);
}
