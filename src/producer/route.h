/*
 * route.h: one event in, one decision out: publish it to the topic, send it to the
 * dead-letter topic with the contract's reason, or drop it as a canary. Both modes
 * (replay and live) hand every event to route_event.
 */
#ifndef LAKEHOUSE_ROUTE_H
#define LAKEHOUSE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "contract.h"
#include "kafka_out.h"
#include "ordered_pool.h"

/*
 * Routes the event text (len bytes; data NULL means an SSE frame too large to keep,
 * which becomes a dead letter with reason "too_large"). sse_id may be NULL. Returns
 * false only when the producer failed fatally. The same as route_check, then
 * route_deliver.
 */
bool		route_event(kafka_out *k, producer_counts *counts,
						const char *data, size_t len, const char *sse_id);

/*
 * true: route_check parses every event with jansson's json_loadb. false (the default):
 * with the fast reader (json_fast.h) first, jansson for whatever it declines. Both give
 * the same decisions (test_json_fast, t/060); call before any routing starts.
 */
void		route_use_jansson_reader(bool jansson_only);

/* What route_check decided about one event. */
typedef struct route_decision
{
	rc_verdict	verdict;
	char	   *key;			/* the wiki, malloc'd; NULL: no key */
	size_t		keylen;
	bool		out_of_memory;
} route_decision;

/*
 * Parses and judges one event. Touches nothing shared, so validation threads may run it
 * side by side. Free with route_deliver or route_release.
 */
void		route_check(const char *data, size_t len, route_decision *d);

/* Publishes, dead-letters or drops the event as decided, and releases d. */
bool		route_deliver(kafka_out *k, producer_counts *counts, const char *data, size_t len,
						  const char *sse_id, route_decision *d);

void		route_release(route_decision *d);

/*
 * Validation threads for replay: route_check runs in the pool's threads, route_deliver
 * in the thread that submits, in submission order (pool_submit with the SSE id as label,
 * then pool_finish). t must outlive the pool.
 */
typedef struct route_target
{
	kafka_out  *k;
	producer_counts *counts;
} route_target;

#define ROUTE_POOL_SLOTS 1024

ordered_pool *route_pool_start(route_target *t, int threads, char *err, size_t errlen);

#endif							/* LAKEHOUSE_ROUTE_H */
