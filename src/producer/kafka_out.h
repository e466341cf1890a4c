/*
 * kafka_out.h: the idempotent Kafka producer behind lakehouse-producer, for the topic
 * and its dead-letter topic, with delivery tracking precise enough to say "every
 * message up to here is acknowledged" (what the live mode's state file needs).
 */
#ifndef LAKEHOUSE_KAFKA_OUT_H
#define LAKEHOUSE_KAFKA_OUT_H

#include <stdbool.h>
#include <stddef.h>

#include "producer.h"

typedef struct kafka_out kafka_out;

/* What kout_publish attaches to a dead letter (both may be NULL). */
typedef struct dlq_info
{
	const char *reason;			/* header lakehouse.reason: the contract's reason code */
	const char *sse_id;			/* header lakehouse.sse_id: the SSE id of the frame */
} dlq_info;

/*
 * Creates the producer. Returns NULL with a message in err when the configuration is
 * refused. An unreachable broker is not an error here: it is reported on stderr and
 * librdkafka keeps every message queued and retries until message.timeout.ms.
 */
kafka_out  *kout_open(const producer_options *o, producer_counts *counts,
					  char *err, size_t errlen);

/*
 * Queues one message: to the topic when dlq is NULL, else to the dead-letter topic
 * with dlq's headers. Blocks (polling, not spinning) while librdkafka's queue is full.
 * Returns false only on a fatal producer error.
 */
bool		kout_publish(kafka_out *k, const char *key, size_t keylen,
						 const char *value, size_t len, const dlq_info *dlq);

/* Serves delivery reports for up to timeout_ms. */
void		kout_poll(kafka_out *k, int timeout_ms);

/*
 * Sequence numbers: every queued message gets the next one, from 0. acked_below is
 * the first sequence number not yet acknowledged (or failed): everything before it is
 * safely in Kafka. It never passes a failed message.
 */
unsigned long long kout_next_seq(const kafka_out *k);
unsigned long long kout_acked_below(const kafka_out *k);

/*
 * Waits until every queued message is delivered or has failed for good. Returns true
 * when none failed during the whole run.
 */
bool		kout_flush(kafka_out *k);

/* A fatal error (e.g. of the idempotent producer) ends the run; NULL when none. */
const char *kout_fatal(kafka_out *k, char *buf, size_t buflen);

void		kout_close(kafka_out *k);

#endif							/* LAKEHOUSE_KAFKA_OUT_H */
