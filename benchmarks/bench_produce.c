/*
 * bench_produce.c: load generator for the benchmarks. Publishes recentchange-shaped JSON
 * events of about 1.2 KB (unique meta.id per event) to a topic, as fast as possible or at
 * a steady rate, and waits for every acknowledgement. Kafka stamps each message with its
 * creation time, which the freshness benchmark compares with the commit time in Postgres.
 *
 * usage: bench_produce --brokers HOST:PORT --topic TOPIC --count N [--rate EVENTS_PER_S]
 *                      [--start SEQ]
 */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

static long failed;

static void
on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void) rk;
	(void) opaque;
	if (m->err)
		failed++;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
make_event(char *buf, size_t cap, long i)
{
	static const char filler[] =
		"lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet "
		"lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet "
		"lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet "
		"lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet "
		"lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet "
		"lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet "
		"lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet "
		"lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet "
		"lorem ipsum dolor sit amet lorem ipsum dolor sit amet lorem ipsum dolor sit amet";

	return snprintf(buf, cap,
					"{\"$schema\":\"/mediawiki/recentchange/1.0.0\",\"meta\":{\"uri\":\"https://en.wikipedia.org/wiki/P%ld\","
					"\"id\":\"%08lx-%04lx-4%03lx-8%03lx-%012lx\",\"dt\":\"2026-11-29T08:%02ld:%02ldZ\","
					"\"domain\":\"en.wikipedia.org\",\"stream\":\"mediawiki.recentchange\"},"
					"\"id\":%ld,\"type\":\"edit\",\"namespace\":0,\"title\":\"Page %ld \xc3\xa9t\xc3\xa9\","
					"\"comment\":\"edit %ld: %s\",\"timestamp\":%ld,\"user\":\"User%ld\",\"bot\":false,"
					"\"minor\":false,\"length\":{\"old\":%ld,\"new\":%ld},\"revision\":{\"old\":%ld,\"new\":%ld},"
					"\"server_name\":\"en.wikipedia.org\",\"wiki\":\"enwiki\",\"seq\":%ld}",
					i, i & 0xffffffffL, (i >> 32) & 0xffffL, i % 4096, i % 4096, i,
					(i / 60) % 60, i % 60, 1000000 + i, i % 97, i, filler, 1795900000 + i, i % 50,
					1000 + i, 1100 + i, 4000000000L + i, 4000000001L + i, i);
}

static void
usage(FILE *to)
{
	fprintf(to, "usage: bench_produce --brokers HOST:PORT --topic TOPIC --count N [--rate EVENTS_PER_S] [--start SEQ]\n");
}

int
main(int argc, char **argv)
{
	const char *brokers = NULL;
	const char *topic = NULL;
	long		count = 0;
	long		rate = 0;
	long		start = 0;
	char		errstr[512];
	char		buf[4096];
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	double		t0;
	double		elapsed;
	static struct option opts[] = {
		{"brokers", required_argument, NULL, 'b'},
		{"topic", required_argument, NULL, 't'},
		{"count", required_argument, NULL, 'n'},
		{"rate", required_argument, NULL, 'r'},
		{"start", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	int			c;

	while ((c = getopt_long(argc, argv, "b:t:n:r:s:h", opts, NULL)) != -1)
	{
		switch (c)
		{
			case 'b': brokers = optarg; break;
			case 't': topic = optarg; break;
			case 'n': count = atol(optarg); break;
			case 'r': rate = atol(optarg); break;
			case 's': start = atol(optarg); break;
			case 'h': usage(stdout); return 0;
			default: usage(stderr); return 2;
		}
	}
	if (brokers == NULL || topic == NULL || count <= 0)
	{
		usage(stderr);
		return 2;
	}

	conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr, sizeof(errstr)) ||
		rd_kafka_conf_set(conf, "acks", "all", errstr, sizeof(errstr)) ||
		rd_kafka_conf_set(conf, "linger.ms", rate ? "1" : "20", errstr, sizeof(errstr)) ||
		rd_kafka_conf_set(conf, "batch.size", "1000000", errstr, sizeof(errstr)) ||
		rd_kafka_conf_set(conf, "compression.type", "lz4", errstr, sizeof(errstr)))
	{
		fprintf(stderr, "bench_produce: %s\n", errstr);
		return 2;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (rk == NULL)
	{
		fprintf(stderr, "bench_produce: %s\n", errstr);
		return 2;
	}

	t0 = now_s();
	for (long i = 0; i < count; i++)
	{
		int			len = make_event(buf, sizeof(buf), start + i);
		rd_kafka_resp_err_t err;

		/*
		 * Steady rate: event i goes out at t0 + i / rate, never early. Sleep until
		 * then rather than spin: on two cores a spinning generator took a whole core
		 * from the broker, Postgres and the sink under test.
		 */
		if (rate > 0)
		{
			double		wait = t0 + (double) i / rate - now_s();

			rd_kafka_poll(rk, 0);
			if (wait > 0)
			{
				struct timespec ts;

				ts.tv_sec = (time_t) wait;
				ts.tv_nsec = (long) ((wait - (double) ts.tv_sec) * 1e9);
				nanosleep(&ts, NULL);
			}
		}
		do
		{
			err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
									RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
									RD_KAFKA_V_VALUE(buf, (size_t) len), RD_KAFKA_V_END);
			if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
				rd_kafka_poll(rk, 50);
		} while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
		if (err)
		{
			fprintf(stderr, "bench_produce: %s\n", rd_kafka_err2str(err));
			return 1;
		}
		rd_kafka_poll(rk, 0);
		if (!rate && i % 100000 == 99999)
			fprintf(stderr, "bench_produce: %ld queued\n", i + 1);
	}
	rd_kafka_flush(rk, 120000);
	elapsed = now_s() - t0;
	rd_kafka_destroy(rk);
	printf("%ld events in %.2f s (%.0f events/s), %ld failed\n", count, elapsed, count / elapsed, failed);
	return failed ? 1 : 0;
}
