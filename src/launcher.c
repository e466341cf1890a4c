/*
 * launcher.c: the lakehouse launcher, one static background worker per server.
 *
 * It will start one dynamic worker per enabled stream; for now it announces itself, then
 * idles on its latch. Signals follow worker_spi: SIGHUP reloads settings, SIGTERM ends the
 * worker through die() and CHECK_FOR_INTERRUPTS(), and every wait exits on postmaster
 * death, so shutdown and DROP DATABASE never wait on it.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "guc.h"
#include "launcher.h"

/* Seconds before the postmaster restarts a launcher that exited with an error. */
#define LAUNCHER_RESTART_S 10
/* Idle wake-up; the latch wakes the launcher sooner when there is work. */
#define LAUNCHER_NAP_MS 10000

void
lakehouse_register_launcher(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = LAUNCHER_RESTART_S;
	strlcpy(worker.bgw_library_name, "lakehouse", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "lakehouse_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "lakehouse launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "lakehouse launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

void
lakehouse_launcher_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/*
	 * Connect so that the launcher shows in pg_stat_activity and can later read the stream
	 * registry. A missing database ends the worker with PostgreSQL's own FATAL, and the
	 * postmaster retries after LAUNCHER_RESTART_S.
	 */
	BackgroundWorkerInitializeConnection(lakehouse_database, NULL, 0);

	ereport(LOG,
			(errmsg("lakehouse launcher started"),
			 errdetail("Connected to database \"%s\".", lakehouse_database)));
	pgstat_report_activity(STATE_IDLE, NULL);

	for (;;)
	{
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
