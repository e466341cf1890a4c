/*
 * batch_writer.h: turns one micro-batch of Kafka messages into bronze rows and dead
 * letters, inside the batch's transaction.
 */
#ifndef LAKEHOUSE_BATCH_WRITER_H
#define LAKEHOUSE_BATCH_WRITER_H

#include <librdkafka/rdkafka.h>

#include "batch_ledger.h"

extern void lh_write_batch(LhBatch *batch, rd_kafka_message_t **msgs, int n, size_t max_bytes);

#endif
