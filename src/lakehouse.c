/*
 * lakehouse.c: module entry point. Defines the settings, refuses to run unless preloaded
 * (the workers need shared_preload_libraries), and registers the launcher.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "guc.h"
#include "kafka_client.h"
#include "launcher.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	/* pg_upgrade loads libraries to check them; start nothing then. */
	if (IsBinaryUpgrade)
		return;

	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lakehouse must be loaded via shared_preload_libraries"),
				 errdetail("Its background workers can only be registered when the server starts."),
				 errhint("Add lakehouse to shared_preload_libraries in postgresql.conf and restart the server.")));

	lakehouse_define_gucs();
	lakehouse_register_launcher();
}
