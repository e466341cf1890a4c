/*
 * producer.h: what the parts of lakehouse-producer share: the parsed command line and
 * the run's counters (messages and the stop flag: console.h).
 *
 * Each mode (replay.c, live.c, generate.c) reads only the options it needs; main.c
 * fills this struct and picks the mode.
 */
#ifndef LAKEHOUSE_PRODUCER_H
#define LAKEHOUSE_PRODUCER_H

#include <stdbool.h>

#define PRODUCER_VERSION "0.2"
#define DEFAULT_URL "https://stream.wikimedia.org/v2/stream/recentchange"
#define DEFAULT_USER_AGENT \
	"lakehouse-producer/" PRODUCER_VERSION " (https://example.invalid/lakehouse; ops@example.invalid)"

typedef struct producer_options
{
	const char *brokers;
	const char *topic;
	const char *dlq_topic;		/* <topic>.dlq unless given */
	const char *url;			/* live mode when set */
	const char *file;			/* replay mode when set */
	const char *state_file;		/* live: resume point, saved after Kafka acks */
	const char *record_file;	/* live: copy of the SSE frames received */
	const char *user_agent;
	const char *kafka_config;	/* extra librdkafka key=value pairs, comma-separated */
	long long	limit;			/* stop after this many events; -1: no limit */
	double		rate;			/* replay: events per second; 0: as fast as possible */
	int			threads;		/* replay: validation threads; 0: validate in the main thread */
	bool		jansson_reader; /* --json-reader jansson: json_loadb for every event */
	bool		quiet;

	int			message_timeout_ms; /* how long librdkafka keeps retrying one message */
	int			read_timeout_s; /* live: reconnect after this long without a byte */
	int			backoff_min_ms; /* live: first reconnect delay, doubled up to max */
	int			backoff_max_ms;

	/* Replay scenario (see replay.c and scenario.h). */
	long		loops;			/* -1: --loops not given, ids pass through unchanged */
	long		resend_loop;	/* -1: none */
	long		violations;
	long		late;
	long		late_minutes;
	bool		restamp;

	/* --generate N --out FILE */
	long long	generate;		/* -1: not generating */
	const char *out_file;
	unsigned long seed;
} producer_options;

/* Counted over the whole run and printed as the one-line summary at exit. */
typedef struct producer_counts
{
	unsigned long long events;	/* events read (frames or lines), before routing */
	unsigned long long sent;	/* acknowledged by Kafka on the topic */
	unsigned long long dlq;		/* acknowledged by Kafka on the dead-letter topic */
	unsigned long long canary;	/* dropped: meta.domain == "canary" */
	unsigned long long failed;	/* delivery failed for good (message.timeout.ms passed) */
	unsigned long long reconnects;	/* live mode */
} producer_counts;

#endif							/* LAKEHOUSE_PRODUCER_H */
