/*
 * main.c: lakehouse-producer's command line: options, usage, and the
 * one-line summary every run ends with. The work is in replay.c (--file), live.c
 * (--url), generate.c (--generate), route.c and kafka_out.c.
 *
 * Exit codes: 0 every event was delivered (or routed as designed); 1 a delivery
 * failed, the stream refused us for good, or an I/O error; 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console.h"
#include "generate.h"
#include "kafka_out.h"
#include "live.h"
#include "producer.h"
#include "progress.h"
#include "replay.h"
#include "route.h"
#include "scenario.h"

/* More validation threads than this only contend for the one publishing thread. */
#define MAX_THREADS 64


static void
usage(FILE *out)
{
	fprintf(out,
			"lakehouse-producer " PRODUCER_VERSION ": publishes Wikimedia recentchange events to Kafka,\n"
			"checking each against the event contract; violations go to a dead-letter topic.\n"
			"\n"
			"Usage:\n"
			"  lakehouse-producer --brokers HOST:PORT --topic TOPIC [--dlq-topic TOPIC]\n"
			"                     (--url URL | --file FILE) [--state FILE] [--limit N] [--rate N]\n"
			"                     [--quiet] [more options below]\n"
			"  lakehouse-producer --generate N --out FILE [--seed N]\n"
			"\n"
			"Kafka:\n"
			"  --brokers HOST:PORT      bootstrap servers, comma-separated (required)\n"
			"  --topic TOPIC            topic for valid events (required)\n"
			"  --dlq-topic TOPIC        topic for contract violations (default: TOPIC.dlq); each\n"
			"                           carries headers lakehouse.reason and lakehouse.sse_id\n"
			"  --message-timeout-ms N   how long one message is retried while Kafka is down or\n"
			"                           refuses it, before it counts as failed (default 120000)\n"
			"  --kafka-config K=V,...   extra librdkafka properties\n"
			"\n"
			"Live mode (the default when --file is not given):\n"
			"  --url URL                SSE endpoint (default " DEFAULT_URL ")\n"
			"  --user-agent UA          User-Agent to send (default \"" DEFAULT_USER_AGENT "\");\n"
			"                           Wikimedia refuses generic ones: include contact details\n"
			"  --state FILE             resume from the SSE id saved in FILE and keep it there,\n"
			"                           saved only once Kafka acknowledged every earlier event\n"
			"  --record FILE            also write the SSE frames received to FILE\n"
			"  --read-timeout S         reconnect after S seconds without data (default 60)\n"
			"  --backoff-min-ms N       first reconnect delay, doubled per failure (default 1000)\n"
			"  --backoff-max-ms N       longest reconnect delay (default 60000)\n"
			"\n"
			"Replay mode:\n"
			"  --file FILE              JSONL (one event per line) or recorded SSE (data:/id: lines)\n"
			"  --loops N                send the file N times; meta.id in loop L at position P\n"
			"                           becomes its first 24 characters + hex %%04x(L)%%08x(P), so\n"
			"                           ids are unique per loop (without --loops ids pass unchanged)\n"
			"  --resend-loop K          send loop K (0-based) twice, same ids, as a resume would\n"
			"  --violations N           also send N contract violations, spread over the run\n"
			"  --late N                 at the end, N more events with meta.dt --late-minutes\n"
			"  --late-minutes M         before the file's newest meta.dt (or now with --restamp);\n"
			"                           default 60\n"
			"  --restamp                set meta.dt (and timestamp) to the time of sending\n"
			"  --rate N                 send N events per second (default: as fast as possible)\n"
			"  --threads N              validate in N threads, publishing in file order (default:\n"
			"                           CPUs + 1; 0 validates in the main thread)\n"
			"\n"
			"Both modes:\n"
			"  --json-reader R          how event text becomes a JSON value for the contract:\n"
			"                           fast (default; the producer's own reader, which leaves\n"
			"                           anything unusual to jansson) or jansson (json_loadb for\n"
			"                           every event); both give the same verdicts\n"
			"  --limit N                stop after N events\n"
			"  --quiet                  no progress messages (errors and the summary remain)\n"
			"  --help                   this text\n"
			"\n"
			"Generating a synthetic recording:\n"
			"  --generate N --out FILE  write N recentchange-shaped events as JSONL (\"-\" = stdout)\n"
			"  --seed N                 random seed (default 1); same seed, same file\n"
			"\n"
			"Every run that talks to Kafka ends with one line on stdout:\n"
			"  events=N sent=N dlq=N canary=N failed=N reconnects=N\n"
			"(sent and dlq count acknowledged messages; canary events are dropped). SIGINT or\n"
			"SIGTERM stops reading, waits for Kafka, saves the state and prints it.\n"
			"Exit status: 0 all delivered, 1 a delivery or the stream failed, 2 bad usage.\n");
}

static void
usage_error(const char *fmt,...)
{
	va_list		ap;

	fputs("lakehouse-producer: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry \"lakehouse-producer --help\" for more information.\n", stderr);
	exit(2);
}

/* A whole non-negative integer within [min, max], or a usage error naming the option. */
static long long
number(const char *opt, const char *arg, long long min, long long max)
{
	char	   *end;
	long long	v;

	errno = 0;
	v = strtoll(arg, &end, 10);
	if (errno != 0 || end == arg || *end != '\0' || v < min || v > max)
		usage_error("invalid value \"%s\" for --%s: expected an integer from %lld to %lld",
					arg, opt, min, max);
	return v;
}

enum
{
	OPT_BROKERS = 256, OPT_TOPIC, OPT_DLQ, OPT_URL, OPT_FILE, OPT_STATE, OPT_RECORD,
	OPT_UA, OPT_KAFKA_CONFIG, OPT_LIMIT, OPT_RATE, OPT_QUIET, OPT_HELP, OPT_TIMEOUT,
	OPT_READ_TIMEOUT, OPT_BACKOFF_MIN, OPT_BACKOFF_MAX, OPT_LOOPS, OPT_RESEND, OPT_VIOL,
	OPT_LATE, OPT_LATE_MIN, OPT_RESTAMP, OPT_GENERATE, OPT_OUT, OPT_SEED, OPT_THREADS, OPT_JSON_READER
};

static const struct option long_options[] = {
	{"brokers", required_argument, NULL, OPT_BROKERS},
	{"topic", required_argument, NULL, OPT_TOPIC},
	{"dlq-topic", required_argument, NULL, OPT_DLQ},
	{"url", required_argument, NULL, OPT_URL},
	{"file", required_argument, NULL, OPT_FILE},
	{"state", required_argument, NULL, OPT_STATE},
	{"record", required_argument, NULL, OPT_RECORD},
	{"user-agent", required_argument, NULL, OPT_UA},
	{"kafka-config", required_argument, NULL, OPT_KAFKA_CONFIG},
	{"limit", required_argument, NULL, OPT_LIMIT},
	{"rate", required_argument, NULL, OPT_RATE},
	{"quiet", no_argument, NULL, OPT_QUIET},
	{"help", no_argument, NULL, OPT_HELP},
	{"message-timeout-ms", required_argument, NULL, OPT_TIMEOUT},
	{"read-timeout", required_argument, NULL, OPT_READ_TIMEOUT},
	{"backoff-min-ms", required_argument, NULL, OPT_BACKOFF_MIN},
	{"backoff-max-ms", required_argument, NULL, OPT_BACKOFF_MAX},
	{"loops", required_argument, NULL, OPT_LOOPS},
	{"resend-loop", required_argument, NULL, OPT_RESEND},
	{"violations", required_argument, NULL, OPT_VIOL},
	{"late", required_argument, NULL, OPT_LATE},
	{"late-minutes", required_argument, NULL, OPT_LATE_MIN},
	{"restamp", no_argument, NULL, OPT_RESTAMP},
	{"generate", required_argument, NULL, OPT_GENERATE},
	{"out", required_argument, NULL, OPT_OUT},
	{"seed", required_argument, NULL, OPT_SEED},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"json-reader", required_argument, NULL, OPT_JSON_READER},
	{NULL, 0, NULL, 0}
};

static void
parse_options(int argc, char **argv, producer_options *o)
{
	int			c;
	bool		replay_only = false;
	bool		live_only = false;
	const char *replay_flag = NULL;
	const char *live_flag = NULL;
	bool		threads_given = false;

	memset(o, 0, sizeof(*o));
	o->limit = -1;
	o->message_timeout_ms = 120000;
	o->read_timeout_s = 60;
	o->backoff_min_ms = 1000;
	o->backoff_max_ms = 60000;
	o->loops = -1;
	o->resend_loop = -1;
	o->late_minutes = 60;
	o->generate = -1;
	o->seed = 1;
	o->user_agent = DEFAULT_USER_AGENT;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1)
	{
		switch (c)
		{
			case OPT_BROKERS: o->brokers = optarg; break;
			case OPT_TOPIC: o->topic = optarg; break;
			case OPT_DLQ: o->dlq_topic = optarg; break;
			case OPT_URL: o->url = optarg; break;
			case OPT_FILE: o->file = optarg; break;
			case OPT_STATE: o->state_file = optarg; live_only = true; live_flag = "--state"; break;
			case OPT_RECORD: o->record_file = optarg; live_only = true; live_flag = "--record"; break;
			case OPT_UA: o->user_agent = optarg; live_only = true; live_flag = "--user-agent"; break;
			case OPT_KAFKA_CONFIG: o->kafka_config = optarg; break;
			case OPT_LIMIT: o->limit = number("limit", optarg, 0, LLONG_MAX); break;
			case OPT_RATE:
				o->rate = (double) number("rate", optarg, 1, 10000000);
				replay_only = true;
				replay_flag = "--rate";
				break;
			case OPT_QUIET: o->quiet = true; break;
			case OPT_HELP: usage(stdout); exit(0);
			case OPT_TIMEOUT: o->message_timeout_ms = (int) number("message-timeout-ms", optarg, 1000, INT_MAX); break;
			case OPT_READ_TIMEOUT:
				o->read_timeout_s = (int) number("read-timeout", optarg, 1, 86400);
				live_only = true;
				live_flag = "--read-timeout";
				break;
			case OPT_BACKOFF_MIN: o->backoff_min_ms = (int) number("backoff-min-ms", optarg, 1, 3600000); break;
			case OPT_BACKOFF_MAX: o->backoff_max_ms = (int) number("backoff-max-ms", optarg, 1, 3600000); break;
			case OPT_LOOPS:
				o->loops = (long) number("loops", optarg, 0, SCENARIO_MAX_LOOPS);
				replay_only = true;
				replay_flag = "--loops";
				break;
			case OPT_RESEND:
				o->resend_loop = (long) number("resend-loop", optarg, 0, SCENARIO_MAX_LOOPS - 1);
				replay_only = true;
				replay_flag = "--resend-loop";
				break;
			case OPT_VIOL:
				o->violations = (long) number("violations", optarg, 0, 0xffffffffL);
				replay_only = true;
				replay_flag = "--violations";
				break;
			case OPT_LATE:
				o->late = (long) number("late", optarg, 0, 0xffffffffL);
				replay_only = true;
				replay_flag = "--late";
				break;
			case OPT_LATE_MIN: o->late_minutes = (long) number("late-minutes", optarg, 0, 5256000); break;
			case OPT_RESTAMP: o->restamp = true; replay_only = true; replay_flag = "--restamp"; break;
			case OPT_GENERATE: o->generate = number("generate", optarg, 0, LLONG_MAX); break;
			case OPT_OUT: o->out_file = optarg; break;
			case OPT_SEED: o->seed = (unsigned long) number("seed", optarg, 0, LONG_MAX); break;
			case OPT_THREADS:
				o->threads = (int) number("threads", optarg, 0, MAX_THREADS);
				threads_given = true;
				replay_only = true;
				replay_flag = "--threads";
				break;
			case OPT_JSON_READER:
				if (strcmp(optarg, "fast") == 0)
					o->jansson_reader = false;
				else if (strcmp(optarg, "jansson") == 0)
					o->jansson_reader = true;
				else
					usage_error("invalid value \"%s\" for --json-reader: expected fast or jansson", optarg);
				break;
			case ':':
				usage_error("option %s needs a value", argv[optind - 1]);
				break;
			default:
				if (optopt >= OPT_BROKERS)
					usage_error("option %s needs a value", argv[optind - 1]);
				usage_error("unknown option \"%s\"", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument \"%s\"", argv[optind]);

	if (o->generate >= 0 || o->out_file)
	{
		if (o->generate < 0 || o->out_file == NULL)
			usage_error("--generate N and --out FILE go together");
		if (o->brokers || o->topic || o->file || o->url)
			usage_error("--generate only writes a file: it takes no --brokers, --topic, --file or --url");
		return;
	}
	if (o->brokers == NULL || o->brokers[0] == '\0')
		usage_error("--brokers is required");
	if (o->topic == NULL || o->topic[0] == '\0')
		usage_error("--topic is required");
	if (o->file && o->url)
		usage_error("--url and --file exclude each other: one run reads one source");
	if (o->file && live_only)
		usage_error("%s applies to live mode (--url), not to --file", live_flag);
	if (!o->file && replay_only)
		usage_error("%s applies to replay mode (--file) only", replay_flag);
	if (o->resend_loop >= 0 && o->resend_loop >= (o->loops >= 0 ? o->loops : 1))
		usage_error("--resend-loop %ld: there is no such loop (loops are numbered from 0)", o->resend_loop);
	if (o->backoff_min_ms > o->backoff_max_ms)
		usage_error("--backoff-min-ms is larger than --backoff-max-ms");
	if (!o->file && !o->url)
		o->url = DEFAULT_URL;
	/*
	 * One more thread than CPUs keeps every core busy while a thread waits for a free
	 * slot (on 2 CPUs, 300,000 events, fast reader: 0 threads 139,000-147,000 events/s,
	 * 1 thread 152,000-162,000, 2 threads 184,000-195,000, 3 threads 186,000-196,000).
	 */
	if (o->file && !threads_given)
	{
		long		cpus = sysconf(_SC_NPROCESSORS_ONLN);

		o->threads = cpus < 1 ? 2 : cpus >= MAX_THREADS ? MAX_THREADS : (int) cpus + 1;
	}
}

int
main(int argc, char **argv)
{
	producer_options o;
	producer_counts counts;
	kafka_out  *k;
	char		err[512];
	char	   *dlq = NULL;
	int			rc;

	parse_options(argc, argv, &o);
	console_catch_signals();

	if (o.generate >= 0)
		return generate_run(&o);

	if (o.dlq_topic == NULL)
	{
		size_t		n = strlen(o.topic) + 5;

		dlq = malloc(n);
		snprintf(dlq, n, "%s.dlq", o.topic);
		o.dlq_topic = dlq;
	}
	memset(&counts, 0, sizeof(counts));
	k = kout_open(&o, &counts, err, sizeof(err));
	if (k == NULL)
	{
		fprintf(stderr, "lakehouse-producer: %s\n", err);
		free(dlq);
		return 2;
	}

	route_use_jansson_reader(o.jansson_reader);
	progress_init(&o);
	rc = o.file ? replay_run(&o, k, &counts) : live_run(&o, k, &counts);

	/* Every queued message gets its answer before the summary. */
	if (!kout_flush(k))
	{
		fprintf(stderr, "lakehouse-producer: %llu message(s) were not delivered\n", counts.failed);
		if (rc == 0)
			rc = 1;
	}
	progress_done(&counts);
	printf("events=%llu sent=%llu dlq=%llu canary=%llu failed=%llu reconnects=%llu\n",
		   counts.events, counts.sent, counts.dlq, counts.canary, counts.failed, counts.reconnects);
	fflush(stdout);
	kout_close(k);
	free(dlq);
	return rc;
}
