/*
 * worker_tx.c: the transactions of lakehouse's background workers (launcher, stream
 * worker, silver worker's scan) and the small SPI calls they make inside them. One
 * transaction at a time: lh_tx_begin starts a transaction with a snapshot and SPI, and
 * lh_tx_commit ends it and makes the caller's memory context current again (a commit
 * leaves TopMemoryContext current, where a worker's loop would otherwise allocate for good).
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "worker_tx.h"

/* The caller's memory context, current again after lh_tx_commit (the commit leaves TopMemoryContext). */
static MemoryContext tx_caller_cxt;

void
lh_tx_begin(const char *activity)
{
	Assert(!IsTransactionOrTransactionBlock());	/* one at a time: the saved context is one */
	tx_caller_cxt = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

void
lh_tx_commit(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(tx_caller_cxt);
	tx_caller_cxt = NULL;
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Runs a statement with parameters; raises on SPI failure. nulls uses ' ' and 'n'. */
uint64
lh_spi_run(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);

	if (rc < 0)
		elog(ERROR, "lakehouse: SPI failed (%s) on: %s", SPI_result_code_string(rc), sql);
	return SPI_processed;
}

int64
lh_spi_int64(int row, int col, bool *isnull)
{
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);

	return *isnull ? 0 : DatumGetInt64(d);
}

char *
lh_spi_text_top(int row, int col)
{
	char	   *v = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);

	return v ? MemoryContextStrdup(TopMemoryContext, v) : NULL;
}

Datum
lh_bytea_datum(const char *bytes, size_t len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), bytes, len);
	return PointerGetDatum(b);
}
