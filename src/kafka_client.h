/*
 * kafka_client.h: building and tearing down librdkafka handles the same way everywhere
 * (brokers, lakehouse.kafka_config, logs routed to a queue that the Postgres process drains).
 */
#ifndef LAKEHOUSE_KAFKA_CLIENT_H
#define LAKEHOUSE_KAFKA_CLIENT_H

#include <librdkafka/rdkafka.h>

/* Oldest librdkafka whose API and semantics lakehouse relies on. */
#define LAKEHOUSE_MIN_RDKAFKA_VERSION 0x020000ff	/* 2.0.0 */
_Static_assert(RD_KAFKA_VERSION >= LAKEHOUSE_MIN_RDKAFKA_VERSION,
			   "lakehouse needs librdkafka 2.0.0 or newer");

/*
 * One client handle plus the queue its logs land on. librdkafka threads never call into
 * Postgres: they only enqueue log events, which lh_kafka_drain_logs() turns into elog()
 * calls on the Postgres process's own thread.
 */
typedef struct LhKafka
{
	rd_kafka_t *rk;
	rd_kafka_queue_t *logq;
	char		brokers[1024];
	char		last_error[512];	/* newest warning-or-worse log line, for errdetail */
} LhKafka;

/* Longest topic name Kafka accepts. */
#define LH_KAFKA_TOPIC_MAX 249

/* librdkafka's upper bound for queued.max.messages.kbytes. */
#define LH_KAFKA_MAX_QUEUE_KB 2097151

extern void lh_kafka_check_topic_name(const char *topic);
/*
 * The newest client-level error (broker down, authentication, fatal), written by
 * librdkafka's error callback. That callback is served by rd_kafka_poll() and the consumer
 * poll on the calling thread; it only copies into this static buffer and never calls
 * Postgres. The worker reads and clears it after polling.
 */
typedef struct LhKafkaClientError
{
	volatile int code;			/* rd_kafka_resp_err_t; 0 when none is pending */
	char		reason[512];
} LhKafkaClientError;

extern LhKafkaClientError lh_kafka_client_error;

extern bool lh_kafka_config_syntax_ok(const char *config, char *problem, size_t problem_len);
extern LhKafka *lh_kafka_open(rd_kafka_type_t type, const char *brokers, const char *client_id,
							  const char *const *settings);
extern void lh_kafka_drain_logs(LhKafka *kc);
extern rd_kafka_resp_err_t lh_kafka_topic_partitions(LhKafka *kc, const char *topic, int timeout_ms,
													 int32 **ids, int *count);
extern void lh_kafka_close(LhKafka *kc);
extern const char *lh_kafka_resolve_brokers(const char *brokers);
extern bool lh_kafka_brokers_approved(const char *brokers);

#endif
