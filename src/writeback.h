/*
 * writeback.h: asks the kernel to start writing the pages a table grew by, now rather than
 * in one burst later (see writeback.c).
 */
#ifndef LAKEHOUSE_WRITEBACK_H
#define LAKEHOUSE_WRITEBACK_H

#include "postgres.h"
#include "storage/block.h"

extern BlockNumber lh_writeback_mark(Oid relid);
extern void lh_writeback_grown(Oid relid, BlockNumber from);

#endif
