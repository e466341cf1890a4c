/*
 * kafka_out.c: the idempotent Kafka producer of lakehouse-producer.
 *
 * enable.idempotence=true (which implies acks=all, set anyway to be explicit) means a
 * retry after a lost acknowledgement cannot write a message twice, and messages of one
 * partition stay in order across retries. Duplicates the producer cannot prevent (a
 * resume that resends events already acknowledged) are left to silver's dedup on
 * meta.id.
 *
 * Deliveries are tracked per message in a ring of sequence numbers, so the live mode
 * can save its resume point only once Kafka holds every event before it.
 */
#include "kafka_out.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

/* Built and tested against Debian 12's librdkafka 2.0.2; idempotence needs >= 1.0. */
_Static_assert(RD_KAFKA_VERSION >= 0x010000ff, "lakehouse-producer needs librdkafka 1.0 or newer");

/*
 * Ring of delivery states. It must hold every message in flight; librdkafka holds at
 * most queue.buffering.max.messages (set below RING_SIZE), and kout_publish also
 * waits when the ring is full.
 */
#define RING_SIZE ((unsigned long long) 1 << 20)
#define MAX_QUEUED_MESSAGES 500000

enum
{
	PENDING = 0,
	DELIVERED = 1,
	FAILED = 2
};

struct kafka_out
{
	rd_kafka_t *rk;
	const producer_options *opts;
	producer_counts *counts;
	unsigned char *ring;
	unsigned long long next_seq;
	unsigned long long done_below;	/* every seq below is DELIVERED or FAILED */
	unsigned long long first_failed;	/* smallest FAILED seq, or ULLONG_MAX */
	time_t		last_down_report;
};

static void
on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	kafka_out  *k = opaque;
	uintptr_t	tag = (uintptr_t) m->_private;
	unsigned long long seq = (unsigned long long) (tag >> 1);
	bool		dlq = (tag & 1) != 0;

	(void) rk;
	if (m->err)
	{
		/*
		 * Only after message.timeout.ms of retries: this event did not make it. The first
		 * few are named; a dead broker would otherwise print one line per queued event.
		 */
		k->counts->failed++;
		if (k->counts->failed <= 5)
			fprintf(stderr, "lakehouse-producer: delivery to %s failed: %s\n",
					rd_kafka_topic_name(m->rkt), rd_kafka_err2str(m->err));
		else if (k->counts->failed == 6)
			fprintf(stderr, "lakehouse-producer: more deliveries failed; the summary counts them all\n");
		k->ring[seq % RING_SIZE] = FAILED;
		if (seq < k->first_failed)
			k->first_failed = seq;
	}
	else
	{
		if (dlq)
			k->counts->dlq++;
		else
			k->counts->sent++;
		k->ring[seq % RING_SIZE] = DELIVERED;
	}
	while (k->done_below < k->next_seq && k->ring[k->done_below % RING_SIZE] != PENDING)
	{
		k->ring[k->done_below % RING_SIZE] = PENDING;
		k->done_below++;
	}
}

/* librdkafka reports trouble here; say it once per 30 s, not once per retry. */
static void
on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	kafka_out  *k = opaque;
	time_t		now = time(NULL);

	(void) rk;
	if (err == RD_KAFKA_RESP_ERR__FATAL)
	{
		fprintf(stderr, "lakehouse-producer: fatal Kafka error: %s\n", reason);
		return;
	}
	if (now - k->last_down_report < 30)
		return;
	k->last_down_report = now;
	fprintf(stderr, "lakehouse-producer: Kafka: %s (%s); messages stay queued and are retried "
			"for up to %d ms\n", reason, rd_kafka_err2name(err), k->opts->message_timeout_ms);
}

/*
 * librdkafka's own log lines, in the producer's voice: warnings and worse only, and none
 * with --quiet (on_error above already reports outages). Called from librdkafka's
 * threads; stdio is thread-safe, and nothing else is touched.
 */
static void
on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	const kafka_out *k = rd_kafka_opaque(rk);

	if (level > 4 || (k != NULL && k->opts->quiet))
		return;
	fprintf(stderr, "lakehouse-producer: librdkafka %s: %s\n", fac, buf);
}

static bool
set(rd_kafka_conf_t *conf, const char *name, const char *value, char *err, size_t errlen)
{
	char		why[512];

	if (rd_kafka_conf_set(conf, name, value, why, sizeof(why)) != RD_KAFKA_CONF_OK)
	{
		snprintf(err, errlen, "Kafka setting %s=%s refused: %s", name, value, why);
		return false;
	}
	return true;
}

/* --kafka-config "a=b,c=d": extra librdkafka properties, applied last. */
static bool
set_extra(rd_kafka_conf_t *conf, const char *list, char *err, size_t errlen)
{
	char	   *copy = strdup(list);
	char	   *save = NULL;
	bool		ok = true;

	for (char *item = strtok_r(copy, ",", &save); ok && item; item = strtok_r(NULL, ",", &save))
	{
		char	   *eq = strchr(item, '=');

		if (eq == NULL)
		{
			snprintf(err, errlen, "--kafka-config: \"%s\" is not key=value", item);
			ok = false;
			break;
		}
		*eq = '\0';
		ok = set(conf, item, eq + 1, err, errlen);
	}
	free(copy);
	return ok;
}

kafka_out *
kout_open(const producer_options *o, producer_counts *counts, char *err, size_t errlen)
{
	kafka_out  *k = calloc(1, sizeof(*k));
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char		num[32];
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_resp_err_t merr;

	k->opts = o;
	k->counts = counts;
	k->first_failed = ULLONG_MAX;
	k->ring = calloc(RING_SIZE, 1);
	snprintf(num, sizeof(num), "%d", o->message_timeout_ms);
	if (k->ring == NULL ||
		!set(conf, "bootstrap.servers", o->brokers, err, errlen) ||
		!set(conf, "client.id", "lakehouse-producer", err, errlen) ||
		!set(conf, "enable.idempotence", "true", err, errlen) ||
		!set(conf, "acks", "all", err, errlen) ||
		!set(conf, "message.timeout.ms", num, err, errlen) ||
		!set(conf, "linger.ms", "20", err, errlen) ||
		!set(conf, "compression.codec", "lz4", err, errlen) ||
		!set(conf, "queue.buffering.max.messages", "500000", err, errlen) ||
		(o->kafka_config && !set_extra(conf, o->kafka_config, err, errlen)))
	{
		rd_kafka_conf_destroy(conf);
		free(k->ring);
		free(k);
		return NULL;
	}
	rd_kafka_conf_set_opaque(conf, k);
	rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
	rd_kafka_conf_set_error_cb(conf, on_error);
	rd_kafka_conf_set_log_cb(conf, on_log);

	k->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, errlen);
	if (k->rk == NULL)
	{
		free(k->ring);
		free(k);
		return NULL;
	}

	/*
	 * Ask for metadata once so a broker that is down is named at start rather than
	 * after message.timeout.ms. Not fatal: events are read and queued meanwhile.
	 */
	merr = rd_kafka_metadata(k->rk, 0, NULL, &md, 5000);
	if (merr != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		fprintf(stderr, "lakehouse-producer: cannot reach Kafka at %s yet (%s); events are "
				"queued and retried for up to %d ms (--message-timeout-ms) before they count "
				"as failed\n", o->brokers, rd_kafka_err2str(merr), o->message_timeout_ms);
		k->last_down_report = time(NULL);
	}
	else
		rd_kafka_metadata_destroy(md);
	return k;
}

bool
kout_publish(kafka_out *k, const char *key, size_t keylen,
			 const char *value, size_t len, const dlq_info *dlq)
{
	const char *topic = dlq ? k->opts->dlq_topic : k->opts->topic;
	uintptr_t	tag;
	rd_kafka_headers_t *hdrs = NULL;
	rd_kafka_resp_err_t err;
	char		fatal[256];

	/* The ring must not wrap onto a message still in flight. */
	while (k->next_seq - k->done_below >= RING_SIZE - 1)
		rd_kafka_poll(k->rk, 100);

	tag = ((uintptr_t) k->next_seq << 1) | (dlq ? 1 : 0);
	if (dlq)
	{
		hdrs = rd_kafka_headers_new(2);
		if (dlq->reason)
			rd_kafka_header_add(hdrs, "lakehouse.reason", -1, dlq->reason, -1);
		if (dlq->sse_id && dlq->sse_id[0])
			rd_kafka_header_add(hdrs, "lakehouse.sse_id", -1, dlq->sse_id, -1);
	}
	for (;;)
	{
		err = rd_kafka_producev(k->rk,
								RD_KAFKA_V_TOPIC(topic),
								RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
								RD_KAFKA_V_KEY(key, key ? keylen : 0),
								RD_KAFKA_V_VALUE((void *) value, value ? len : 0),
								RD_KAFKA_V_HEADERS(hdrs),
								RD_KAFKA_V_OPAQUE((void *) tag),
								RD_KAFKA_V_END);
		if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		/* The broker is slow or down: wait for deliveries instead of spinning. */
		rd_kafka_poll(k->rk, 100);
	}
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		if (hdrs)
			rd_kafka_headers_destroy(hdrs);
		fprintf(stderr, "lakehouse-producer: cannot queue a message for %s: %s%s%s\n", topic,
				rd_kafka_err2str(err), kout_fatal(k, fatal, sizeof(fatal)) ? ": " : "",
				kout_fatal(k, fatal, sizeof(fatal)) ? fatal : "");
		return false;
	}
	/* On success the message owns the headers. */
	k->next_seq++;
	rd_kafka_poll(k->rk, 0);
	return true;
}

void
kout_poll(kafka_out *k, int timeout_ms)
{
	rd_kafka_poll(k->rk, timeout_ms);
}

unsigned long long
kout_next_seq(const kafka_out *k)
{
	return k->next_seq;
}

unsigned long long
kout_acked_below(const kafka_out *k)
{
	return k->done_below < k->first_failed ? k->done_below : k->first_failed;
}

bool
kout_flush(kafka_out *k)
{
	/*
	 * Every message either gets its acknowledgement or fails after
	 * message.timeout.ms, so this ends; a signal does not cut it short, since the
	 * point of stopping cleanly is to lose nothing.
	 */
	while (k->done_below < k->next_seq)
	{
		rd_kafka_flush(k->rk, 1000);
		if (rd_kafka_fatal_error(k->rk, NULL, 0))
			break;
	}
	return k->counts->failed == 0 && k->done_below == k->next_seq;
}

const char *
kout_fatal(kafka_out *k, char *buf, size_t buflen)
{
	if (rd_kafka_fatal_error(k->rk, buf, buflen) == RD_KAFKA_RESP_ERR_NO_ERROR)
		return NULL;
	return buf;
}

void
kout_close(kafka_out *k)
{
	if (k == NULL)
		return;
	/* kout_flush ran before; this only bounds the wait if it was skipped. */
	rd_kafka_flush(k->rk, 2000);
	rd_kafka_destroy(k->rk);
	free(k->ring);
	free(k);
}
