/*
 * silver_worker.h: the background worker that keeps continuous silver tables fresh.
 */
#ifndef LAKEHOUSE_SILVER_WORKER_H
#define LAKEHOUSE_SILVER_WORKER_H

#include "postgres.h"
#include "fmgr.h"

/* The launcher's name for this worker's entry: never a stream name (those are identifiers). */
#define LH_SILVER_WORKER_ENTRY "*silver"

extern PGDLLEXPORT void lakehouse_silver_main(Datum main_arg);

#endif
