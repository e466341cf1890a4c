/*
 * launcher.h: the static background worker that owns the per-stream workers.
 */
#ifndef LAKEHOUSE_LAUNCHER_H
#define LAKEHOUSE_LAUNCHER_H

#include "postgres.h"
#include "fmgr.h"

extern void lakehouse_register_launcher(void);
extern void lakehouse_connect_as_superuser(void);
extern bool lakehouse_owns_relation(const char *relname);
extern PGDLLEXPORT void lakehouse_launcher_main(Datum main_arg);

#endif
