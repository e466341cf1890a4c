/*
 * generate.h: --generate N --out FILE, a synthetic recentchange recording shaped like
 * the real stream, for tests and the demo (which must not depend on captured data).
 */
#ifndef LAKEHOUSE_GENERATE_H
#define LAKEHOUSE_GENERATE_H

#include <stdint.h>

#include "producer.h"

typedef struct gen_state
{
	uint64_t	rng;
	long long	t_ms;			/* event time of the last event */
	long long	offset;			/* meta.offset, past 2^32 like the real topic */
	long long	rcid;
	long long	revision;
	char		request_id[37]; /* shared by an edit and the categorize events it causes */
	const char *last_wiki;
	char		last_title[256];
} gen_state;

/* Same seed, same events: tests rely on it. */
void		gen_init(gen_state *g, unsigned long seed);

/* The next event as compact JSON text (caller frees). */
char	   *gen_event(gen_state *g);

/* Writes o->generate events to o->out_file; returns the process exit code. */
int			generate_run(const producer_options *o);

#endif							/* LAKEHOUSE_GENERATE_H */
