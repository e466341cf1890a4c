/*
 * console.c: lakehouse-producer's stderr messages and stop flag (see console.h).
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "console.h"

volatile sig_atomic_t producer_stop = 0;

void
say(const producer_options *o, const char *fmt,...)
{
	va_list		ap;

	if (o && o->quiet)
		return;
	fputs("lakehouse-producer: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void
on_signal(int sig)
{
	(void) sig;
	producer_stop = 1;
}

void
console_catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}
