/*
 * launcher.c: the lakehouse launcher, one static background worker per server.
 *
 * It starts one dynamic worker per enabled stream of lakehouse.streams (in the database
 * named by lakehouse.database) and one silver worker while a continuous silver table exists, restarts a worker that exited (backing off when it keeps
 * failing), and stops workers of streams that were disabled or dropped. Signals follow worker_spi: SIGHUP reloads settings, SIGTERM ends the
 * worker through die() and CHECK_FOR_INTERRUPTS(), and every wait exits on postmaster
 * death, so shutdown and DROP DATABASE never wait on it.
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
#include "tcop/tcopprot.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "guc.h"
#include "launcher.h"
#include "silver_worker.h"
#include "stream_worker.h"
#include "worker_tx.h"

/* Seconds before the postmaster restarts a launcher that exited with an error. */
#define LAUNCHER_RESTART_S 10
/* How often enabled streams are compared with running workers; a worker's start or exit
 * (bgw_notify_pid) wakes the launcher sooner. */
#define LAUNCHER_NAP_MS 1000

/* What every lakehouse worker shares: a database connection once recovery is over. */
static void
describe_worker(BackgroundWorker *worker, const char *function, const char *type, int restart_s)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = restart_s;
	strlcpy(worker->bgw_library_name, "lakehouse", BGW_MAXLEN);
	strlcpy(worker->bgw_function_name, function, BGW_MAXLEN);
	strlcpy(worker->bgw_name, type, BGW_MAXLEN);
	strlcpy(worker->bgw_type, type, BGW_MAXLEN);
}

void
lakehouse_register_launcher(void)
{
	BackgroundWorker worker;

	describe_worker(&worker, "lakehouse_launcher_main", "lakehouse launcher", LAUNCHER_RESTART_S);
	RegisterBackgroundWorker(&worker);
}

/* One entry per stream the launcher has started a worker for. */
typedef struct LaunchedWorker
{
	char		name[LH_STREAM_NAME_MAX];
	BackgroundWorkerHandle *handle;
	TimestampTz started_at;
	TimestampTz next_start;		/* backoff after a quick exit */
	int			quick_exits;
	bool		seen;			/* still enabled in this round */
} LaunchedWorker;

static LaunchedWorker *workers;
static int	nworkers;
static int	workers_capacity;
static TimestampTz slots_warned_at;

static LaunchedWorker *
worker_entry(const char *name)
{
	for (int i = 0; i < nworkers; i++)
		if (strcmp(workers[i].name, name) == 0)
			return &workers[i];
	if (nworkers == workers_capacity)
	{
		workers_capacity = Max(8, workers_capacity * 2);
		workers = workers ? repalloc(workers, sizeof(LaunchedWorker) * workers_capacity)
			: MemoryContextAlloc(TopMemoryContext, sizeof(LaunchedWorker) * workers_capacity);
	}
	memset(&workers[nworkers], 0, sizeof(LaunchedWorker));
	strlcpy(workers[nworkers].name, name, LH_STREAM_NAME_MAX);
	return &workers[nworkers++];
}

static bool
worker_alive(LaunchedWorker *w)
{
	pid_t		pid;

	if (w->handle == NULL)
		return false;
	switch (GetBackgroundWorkerPid(w->handle, &pid))
	{
		case BGWH_STARTED:
		case BGWH_NOT_YET_STARTED:
			return true;
		default:
			return false;
	}
}

static void
start_worker(LaunchedWorker *w)
{
	BackgroundWorker worker;
	TimestampTz now = GetCurrentTimestamp();
	MemoryContext oldcxt;
	bool		registered;

	if (now < w->next_start)
		return;
	/* The launcher decides about restarts (with backoff), not the postmaster. */
	if (strcmp(w->name, LH_SILVER_WORKER_ENTRY) == 0)
		describe_worker(&worker, "lakehouse_silver_main", "lakehouse silver", BGW_NEVER_RESTART);
	else
	{
		describe_worker(&worker, "lakehouse_stream_main", "lakehouse stream", BGW_NEVER_RESTART);
		snprintf(worker.bgw_name, BGW_MAXLEN, "lakehouse stream %s", w->name);
		strlcpy(worker.bgw_extra, w->name, BGW_EXTRALEN);
	}
	worker.bgw_notify_pid = MyProcPid;

	/* The handle lives as long as its entry in workers[], whatever context is current. */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	registered = RegisterDynamicBackgroundWorker(&worker, &w->handle);
	MemoryContextSwitchTo(oldcxt);
	if (!registered)
	{
		w->handle = NULL;
		if (TimestampDifferenceExceeds(slots_warned_at, now, 60000))
		{
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("could not start the worker of lakehouse stream \"%s\": no free background worker slot", w->name),
					 errhint("Raise max_worker_processes (each enabled stream needs one worker, plus one for the launcher) and restart the server.")));
			slots_warned_at = now;
		}
		return;
	}
	w->started_at = now;
}

/* Workers that die within this long after starting count as failing; restarts back off. */
#define QUICK_EXIT_MS 10000
#define MAX_BACKOFF_MS 60000

static void
reconcile_workers(void)
{
	bool		have_streams;

	lh_tx_begin("lakehouse: checking streams");

	for (int i = 0; i < nworkers; i++)
		workers[i].seen = false;

	/* Nothing to do until CREATE EXTENSION (0.2.0 or later) has run in this database. */
	have_streams = lakehouse_owns_relation("lakehouse.streams");
	if (have_streams)
	{
		if (SPI_execute("SELECT name FROM lakehouse.streams WHERE enabled ORDER BY name", true, 0) != SPI_OK_SELECT)
			elog(ERROR, "lakehouse launcher: could not read lakehouse.streams");
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			LaunchedWorker *w = worker_entry(SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1));

			w->seen = true;
		}
	}
	/* One silver worker while any continuous silver table exists (lakehouse 0.3.0 on). */
	if (lakehouse_owns_relation("lakehouse.silver_tables"))
	{
		if (SPI_execute("SELECT 1 FROM lakehouse.silver_tables WHERE continuous LIMIT 1", true, 1) != SPI_OK_SELECT)
			elog(ERROR, "lakehouse launcher: could not read lakehouse.silver_tables");
		if (SPI_processed > 0)
			worker_entry(LH_SILVER_WORKER_ENTRY)->seen = true;
	}

	lh_tx_commit();

	for (int i = 0; i < nworkers; i++)
	{
		LaunchedWorker *w = &workers[i];
		bool		alive = worker_alive(w);

		if (!w->seen)
		{
			/* Disabled or dropped: stop_stream() signalled it; make sure. */
			if (alive)
				TerminateBackgroundWorker(w->handle);
			continue;
		}
		if (alive)
			continue;
		if (w->handle != NULL)
		{
			/* It exited. A quick exit (error at start) backs off: 1 s, 2 s, 4 s ... 60 s. */
			TimestampTz now = GetCurrentTimestamp();

			if (!TimestampDifferenceExceeds(w->started_at, now, QUICK_EXIT_MS))
				w->quick_exits++;
			else
				w->quick_exits = 0;
			w->next_start = TimestampTzPlusMilliseconds(now,
														Min(MAX_BACKOFF_MS, 1000L << Min(w->quick_exits, 6)));
			if (w->quick_exits == 0)
				w->next_start = now;
			pfree(w->handle);
			w->handle = NULL;
		}
		start_worker(w);
	}
}

/*
 * Connects a lakehouse background worker to lakehouse.database as the bootstrap superuser.
 * The database is someone else's: its owner can set its search_path (ALTER DATABASE ...
 * SET) to a schema holding functions, aggregates or operators that shadow what the worker
 * calls. search_path is pinned to pg_catalog, pg_temp over the database's setting
 * (PGC_S_OVERRIDE outranks it; a function's own SET clause still applies), so nothing a
 * database owner creates runs with the worker's rights. Shared by the launcher, the stream
 * workers and the silver worker.
 */
void
lakehouse_connect_as_superuser(void)
{
	BackgroundWorkerInitializeConnection(lakehouse_database, NULL, 0);
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	/* The workers' transactions read what committed before each statement (a new worker
	 * reads the batch id after its predecessor's last commit), whatever the database sets. */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * True when relname (schema-qualified) exists and belongs to the lakehouse extension. The
 * workers read the extension's tables as the superuser: before CREATE EXTENSION, or after
 * DROP EXTENSION, a database owner could make a schema lakehouse of their own whose
 * "streams" is a view calling their functions, which the worker's read would run with its
 * rights. Inside a transaction, with SPI connected.
 */
bool
lakehouse_owns_relation(const char *relname)
{
	Oid			argtype = TEXTOID;
	Datum		arg = CStringGetTextDatum(relname);
	bool		isnull;

	if (SPI_execute_with_args("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d"
							  " JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid"
							  " WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
							  "   AND d.objid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)"
							  "   AND d.deptype OPERATOR(pg_catalog.=) 'e'"
							  "   AND e.extname OPERATOR(pg_catalog.=) 'lakehouse')",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "lakehouse: could not look for %s", relname);
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

void
lakehouse_launcher_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/*
	 * Connect so that the launcher shows in pg_stat_activity and can read the stream
	 * registry. A missing database ends the worker with PostgreSQL's own FATAL, and the
	 * postmaster retries after LAUNCHER_RESTART_S.
	 */
	lakehouse_connect_as_superuser();

	ereport(LOG,
			(errmsg("lakehouse launcher started"),
			 errdetail("Connected to database \"%s\".", lakehouse_database)));
	pgstat_report_activity(STATE_IDLE, NULL);

	for (;;)
	{
		reconcile_workers();

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 LAUNCHER_NAP_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			ereport(LOG,
					(errmsg("lakehouse launcher reloaded its configuration")));
		}
	}
}
