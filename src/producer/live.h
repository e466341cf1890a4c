/*
 * live.h: --url mode, following an EventStreams SSE endpoint with libcurl and
 * publishing every event, resumable through the state file.
 */
#ifndef LAKEHOUSE_LIVE_H
#define LAKEHOUSE_LIVE_H

#include "kafka_out.h"

/* Runs until --limit, a signal or a permanent HTTP error; flushes Kafka and saves the
 * state before it returns the process exit code. */
int			live_run(const producer_options *o, kafka_out *k, producer_counts *c);

#endif							/* LAKEHOUSE_LIVE_H */
