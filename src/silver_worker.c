/*
 * silver_worker.c: one background worker per server that keeps every continuous silver
 * table fresh without a scheduler tick.
 *
 * It looks for continuous silver tables whose stream has committed bronze batches past
 * the table's cursor (a read-only query: an idle server costs no transaction ids), and runs
 * lakehouse.refresh_silver(name) for each, every pass in its own transaction: exactly the
 * pass a person or pg_cron would run, with the same lock, so they can never admit a row
 * twice. While a table has more to read it loops at once; otherwise it sleeps
 * lakehouse.silver_naptime. A table whose pass fails is reported and retried with backoff,
 * without holding up the others. Unless lakehouse.silver_synchronous_commit is on, a pass
 * does not wait for its commit's WAL flush (see run_pass). The launcher starts this worker
 * while any continuous silver table exists.
 *
 * It runs as the bootstrap superuser in a database others own, so search_path is pinned to
 * pg_catalog, pg_temp and every object is qualified; the declaration's expressions run in a
 * function owned by the role that declared the table, never with this worker's rights.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "guc.h"
#include "launcher.h"
#include "silver_worker.h"
#include "worker_tx.h"

#define SILVER_MAX_BACKOFF_MS 30000

/* A table whose last pass failed, and when to try it again. */
typedef struct FailingTable
{
	char		name[NAMEDATALEN];
	int			failures;
	TimestampTz retry_at;
} FailingTable;

static FailingTable *failing;
static int	nfailing;

static FailingTable *
failing_entry(const char *name, bool create)
{
	for (int i = 0; i < nfailing; i++)
		if (strcmp(failing[i].name, name) == 0)
			return &failing[i];
	if (!create)
		return NULL;
	failing = failing ? repalloc(failing, sizeof(FailingTable) * (nfailing + 1))
		: MemoryContextAlloc(TopMemoryContext, sizeof(FailingTable));
	memset(&failing[nfailing], 0, sizeof(FailingTable));
	strlcpy(failing[nfailing].name, name, NAMEDATALEN);
	return &failing[nfailing++];
}

static void
forget_failure(const char *name)
{
	FailingTable *f = failing_entry(name, false);

	if (f != NULL)
	{
		*f = failing[nfailing - 1];
		nfailing--;
	}
}

/*
 * The continuous tables with committed bronze batches past their cursor, in name order.
 * Returns palloc'd names in the caller's context; *installed says whether lakehouse 0.3.0
 * or later is installed in this database, *any_continuous whether it has such a table.
 */
static List *
tables_with_work(bool *installed, bool *any_continuous)
{
	List	   *names = NIL;
	MemoryContext caller = CurrentMemoryContext;

	lh_tx_begin("lakehouse: looking for new bronze batches");

	*installed = lakehouse_owns_relation("lakehouse.silver_tables");
	*any_continuous = false;
	if (*installed)
	{
		if (SPI_execute("SELECT t.name, EXISTS (SELECT 1 FROM lakehouse.stream_progress p"
						"  WHERE p.stream OPERATOR(pg_catalog.=) t.stream"
						"    AND p.batch_id OPERATOR(pg_catalog.>) t.last_batch_id)"
						" FROM lakehouse.silver_tables t WHERE t.continuous ORDER BY t.name",
						true, 0) != SPI_OK_SELECT)
			elog(ERROR, "lakehouse silver worker: could not read lakehouse.silver_tables");
		*any_continuous = SPI_processed > 0;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			char	   *has_work = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2);

			if (strcmp(has_work, "t") == 0)
			{
				MemoryContext old = MemoryContextSwitchTo(caller);

				names = lappend(names, pstrdup(SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1)));
				MemoryContextSwitchTo(old);
			}
		}
	}

	lh_tx_commit();
	return names;
}

/*
 * One pass over one table in its own transaction. Returns true when it read bronze rows
 * (there may be more). An error is logged, the transaction rolled back, and the table
 * backed off; the worker goes on with the others.
 */
static bool
run_pass(const char *name)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	FailingTable *f = failing_entry(name, false);
	bool		read_rows = false;

	if (f != NULL && GetCurrentTimestamp() < f->retry_at)
		return false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {CStringGetTextDatum(name)};
		bool		isnull;
		int64		rows_in;

		/*
		 * For this transaction only (its commit included): the pass's rows and cursor
		 * commit or vanish together, so a commit lost in a server crash is a pass to run
		 * again, not a row lost or doubled.
		 */
		if (!lakehouse_silver_synchronous_commit)
			(void) set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION,
									 GUC_ACTION_LOCAL, true, 0, false);
		SPI_connect();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "lakehouse: silver pass");

		/*
		 * The table's registry row first, without waiting: a session that holds it (a
		 * pass of its own, perhaps in a transaction left open, a replay, a drop) would
		 * otherwise hold up every other table's pass behind this one. Its table is
		 * skipped this round and tried again at the next; the pass takes the same lock.
		 */
		if (SPI_execute_with_args("SELECT 1 FROM lakehouse.silver_tables s"
								  " WHERE s.name OPERATOR(pg_catalog.=) $1 FOR UPDATE SKIP LOCKED",
								  1, types, values, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "lakehouse silver worker: could not lock the registry row of \"%s\"", name);
		if (SPI_processed == 1)
		{
			if (SPI_execute_with_args("SELECT rows_in FROM lakehouse.refresh_silver($1)",
									  1, types, values, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
				elog(ERROR, "lakehouse silver worker: refresh_silver(%s) returned no row", name);
			rows_in = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
			read_rows = !isnull && rows_in > 0;
		}
		else
			elog(DEBUG1, "lakehouse silver worker: \"%s\" is locked by another session; skipped this round", name);
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
		forget_failure(name);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* Report it as a WARNING, roll back, and keep the worker alive for other tables. */
		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		f = failing_entry(name, true);
		f->failures++;
		f->retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												  Min(SILVER_MAX_BACKOFF_MS, 500L << Min(f->failures, 8)));
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("lakehouse silver pass of \"%s\" failed: %s", name, edata->message),
				 edata->detail ? errdetail("%s", edata->detail) : 0,
				 errhint("The pass was rolled back; the worker tries again in %d ms. Fix the cause, or run lakehouse.refresh_silver('%s') to see the error.",
						 Min(SILVER_MAX_BACKOFF_MS, 500 << Min(f->failures, 8)), name)));
		FreeErrorData(edata);
		read_rows = false;
	}
	PG_END_TRY();
	pgstat_report_stat(false);
	return read_rows;
}

void
lakehouse_silver_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	lakehouse_connect_as_superuser();
	pgstat_report_appname("lakehouse silver");
	ereport(LOG, (errmsg("lakehouse silver worker started"),
				  errdetail("Connected to database \"%s\".", lakehouse_database)));

	for (;;)
	{
		bool		installed;
		bool		any_continuous;
		bool		more = false;
		List	   *names;
		ListCell   *lc;

		CHECK_FOR_INTERRUPTS();
		names = tables_with_work(&installed, &any_continuous);
		if (!installed || !any_continuous)
		{
			/* Nothing to keep fresh: exit 0 (not restarted); the launcher starts us again. */
			ereport(LOG, (errmsg("lakehouse silver worker exits: no continuous silver table")));
			proc_exit(0);
		}
		foreach(lc, names)
		{
			/* A backlog of passes never waits on the latch: look for the postmaster here. */
			if (!PostmasterIsAlive())
				proc_exit(1);
			CHECK_FOR_INTERRUPTS();
			if (run_pass((const char *) lfirst(lc)))
				more = true;
		}
		list_free_deep(names);
		pgstat_report_activity(STATE_IDLE, NULL);

		if (!more)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 lakehouse_silver_naptime_ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
}
