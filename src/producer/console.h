/*
 * console.h: what lakehouse-producer says on stderr and how it is told to stop: say()
 * for progress and warnings, the stop flag set by SIGINT/SIGTERM, and their setup. Its own
 * module so that the parts (and their unit tests) link it without main.c.
 */
#ifndef LAKEHOUSE_PRODUCER_CONSOLE_H
#define LAKEHOUSE_PRODUCER_CONSOLE_H

#include <signal.h>

#include "producer.h"

/* Set by SIGINT/SIGTERM (console_catch_signals); every loop checks it. */
extern volatile sig_atomic_t producer_stop;

/* Progress and warnings to stderr, silenced by --quiet (errors are never silenced). */
void		say(const producer_options *o, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));

/*
 * SIGINT and SIGTERM set producer_stop (no SA_RESTART: a blocking read returns so that
 * the loops see the flag); SIGPIPE is ignored (a closed pipe is an error return).
 */
void		console_catch_signals(void);

#endif							/* LAKEHOUSE_PRODUCER_CONSOLE_H */
