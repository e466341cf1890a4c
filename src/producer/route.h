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

#include "kafka_out.h"

/*
 * Routes the event text (len bytes; data NULL means an SSE frame too large to keep,
 * which becomes a dead letter with reason "too_large"). sse_id may be NULL. Returns
 * false only when the producer failed fatally.
 */
bool		route_event(kafka_out *k, producer_counts *counts,
						const char *data, size_t len, const char *sse_id);

/*
 * The message key for a valid event: its wiki name ("enwiki"). Returns the length, 0
 * when the event has no string wiki (then the message has no key).
 */
size_t		route_key(const json_t *event, const char **key);

#endif							/* LAKEHOUSE_ROUTE_H */
