/*
 * progress.c: one status line on stderr, redrawn in place every second while the
 * producer runs on a terminal: events read, the current rate, events acknowledged on
 * the topic and on the dead-letter topic, canaries dropped, reconnects. When stderr is
 * not a terminal (a service, a pipe, CI) nothing is drawn: the one-line summary on
 * stdout at exit is the machine-readable record.
 */
#define _POSIX_C_SOURCE 200809L
#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

static bool enabled;
static bool drawn;
static double started_at;
static double drawn_at;
static unsigned long long events_at_draw;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void
progress_init(const producer_options *o)
{
	enabled = !o->quiet && isatty(STDERR_FILENO);
	started_at = drawn_at = now_s();
	events_at_draw = 0;
}

static void
draw(const producer_counts *c, double now, double rate)
{
	fprintf(stderr, "\r%llu events, %.0f/s, %llu acknowledged, %llu dead-lettered, %llu canary, %llu reconnects  ",
			c->events, rate, c->sent, c->dlq, c->canary, c->reconnects);
	fflush(stderr);
	drawn = true;
	drawn_at = now;
	events_at_draw = c->events;
}

void
progress_tick(const producer_counts *c)
{
	double		now;

	if (!enabled)
		return;
	/* The clock is read once per 256 events, not per event. */
	if ((c->events & 255) != 0)
		return;
	now = now_s();
	if (now - drawn_at >= 1.0)
		draw(c, now, (c->events - events_at_draw) / (now - drawn_at));
}

void
progress_done(const producer_counts *c)
{
	double		now = now_s();

	if (!enabled)
		return;
	draw(c, now, now > started_at ? c->events / (now - started_at) : 0);
	if (drawn)
		fputc('\n', stderr);
}
