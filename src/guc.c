/*
 * guc.c: defines the lakehouse.* settings (names and defaults are part of the design
 * contract, see README "Settings").
 *
 * Intervals (watermark, session_gap) are integer settings in seconds with GUC_UNIT_S so
 * that users write them as intervals ('10min', '1h') and SQL can read them back with
 * current_setting(...)::interval, while the server validates them without parsing
 * interval text inside the postmaster.
 */
#include "postgres.h"

#include <limits.h>

#include "utils/guc.h"

#include "guc.h"
#include "kafka_client.h"

char	   *lakehouse_brokers = NULL;
char	   *lakehouse_allowed_brokers = NULL;
char	   *lakehouse_database = NULL;
int			lakehouse_max_batch_messages = 10000;
int			lakehouse_max_batch_ms = 100;
int			lakehouse_batch_linger_ms = 0;
int			lakehouse_max_batch_bytes_kb = 64 * 1024;
char	   *lakehouse_kafka_config = NULL;
int			lakehouse_watermark_s = 600;
int			lakehouse_session_gap_s = 1800;
int			lakehouse_request_timeout_ms = 10000;
int			lakehouse_max_message_bytes = 16 * 1024 * 1024;
bool		lakehouse_commit_to_kafka = false;
int			lakehouse_prefetch_memory_kb = 128 * 1024;
int			lakehouse_silver_naptime_ms = 100;
bool		lakehouse_silver_synchronous_commit = false;
bool		lakehouse_bronze_writeback = true;
int			lakehouse_test_fault = LH_FAULT_NONE;

static const struct config_enum_entry test_fault_options[] = {
	{"none", LH_FAULT_NONE, false},
	{"pause_before_commit", LH_FAULT_PAUSE_BEFORE_COMMIT, false},
	{"ignore_data_checkpoint", LH_FAULT_IGNORE_DATA_CHECKPOINT, false},
	{NULL, 0, false}
};

/* Syntax-only check; unknown librdkafka properties are reported when a client is built. */
static bool
check_kafka_config(char **newval, void **extra, GucSource source)
{
	char		problem[256];

	if (!lh_kafka_config_syntax_ok(*newval, problem, sizeof(problem)))
	{
		GUC_check_errdetail("%s", problem);
		GUC_check_errhint("Write key=value pairs separated by semicolons or new lines, "
						  "for example 'security.protocol=SSL; ssl.ca.location=/etc/ca.pem'.");
		return false;
	}
	return true;
}

void
lakehouse_define_gucs(void)
{
	DefineCustomStringVariable("lakehouse.brokers",
							   "Kafka bootstrap servers used when a stream names none",
							   "A comma-separated host:port list.",
							   &lakehouse_brokers,
							   "localhost:9092",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	/*
	 * lakehouse.kafka_config may hold credentials. Operators (lakehouse_admin) name
	 * brokers in SQL calls, so only brokers a superuser approved get it: those of
	 * lakehouse.brokers and of this list (kafka_client.c).
	 */
	DefineCustomStringVariable("lakehouse.allowed_brokers",
							   "Kafka brokers, besides lakehouse.brokers, that streams and SQL calls may name",
							   "A comma-separated host:port list. Only these brokers and lakehouse.brokers receive lakehouse.kafka_config; only superusers may name others.",
							   &lakehouse_allowed_brokers,
							   "",
							   PGC_SUSET, 0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("lakehouse.database",
							   "Database the lakehouse background workers connect to",
							   NULL,
							   &lakehouse_database,
							   "postgres",
							   PGC_POSTMASTER, 0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("lakehouse.max_batch_messages",
							"Most Kafka messages committed in one micro-batch",
							NULL,
							&lakehouse_max_batch_messages,
							10000, 1, 1000000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);

	/*
	 * 100 ms: a backlog fills batches to max_batch_messages long before this, so it only
	 * bounds how long a trickle of events waits for its commit (freshness).
	 */
	/*
	 * The silver worker looks for new bronze batches this often when idle; a pass that
	 * read rows is followed by the next one at once.
	 */
	DefineCustomIntVariable("lakehouse.silver_naptime",
							"How long the silver worker sleeps when no continuous silver table has new bronze batches",
							NULL,
							&lakehouse_silver_naptime_ms,
							100, 10, 60000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * A silver pass holds its rows and its cursor in one transaction, so a pass whose
	 * commit a server crash loses is simply run again from bronze: the worker need not
	 * wait for the commit's WAL flush (about a tenth of a pass, benchmarks/results.md).
	 */
	DefineCustomBoolVariable("lakehouse.silver_synchronous_commit",
							 "Whether the silver worker waits for each pass's commit to be flushed",
							 "Off: a server crash may undo the newest passes (rows and cursor together); the worker runs them again.",
							 &lakehouse_silver_synchronous_commit,
							 false,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	/*
	 * On: the blocks a batch adds to bronze are handed to the kernel's writeback before the
	 * batch commits (writeback.c). Off only to compare, or where that costs more than the
	 * bursts it avoids.
	 */
	DefineCustomBoolVariable("lakehouse.bronze_writeback",
							 "Whether the stream worker asks the kernel to start writing the blocks each batch adds to bronze",
							 "Off: Linux writes them when they are dirty_expire_centisecs old, all at once.",
							 &lakehouse_bronze_writeback,
							 true,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("lakehouse.max_batch_ms",
							"Longest time a micro-batch stays open after its first message",
							"A batch closes earlier, as soon as librdkafka's queue runs dry; this bounds one that keeps receiving.",
							&lakehouse_max_batch_ms,
							100, 1, 600000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * A batch closes when librdkafka's queue runs dry, but not before it is this old. A
	 * trickle spread over many partitions arrives in many small fetch responses, and a
	 * commit for each (a WAL flush, an offsets update, a stream_progress row) may cost more
	 * than a few milliseconds of latency; the default is 0 because at 10,000 events/s even
	 * 20 ms made freshness p95 about 1 s instead of 0.25 s (benchmarks/results.md).
	 */
	DefineCustomIntVariable("lakehouse.batch_linger_ms",
							"Shortest time a micro-batch stays open after its first message when the queue runs dry",
							"Bounds the commits per second of a trickle of messages; 0 commits as soon as the queue is empty.",
							&lakehouse_batch_linger_ms,
							0, 0, 10000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * Message counts alone do not bound a batch's memory: 10,000 messages of 1 MB would
	 * be 10 GB in hand. With this, a worker holds at most about prefetch_memory plus
	 * max_batch_bytes of messages. The batch's rows travel to COPY in one buffer that
	 * PostgreSQL caps at 1 GB: a batch ends at the first message that reaches this bound,
	 * so the buffer holds up to this plus one message (at most max_message_bytes, 256 MB)
	 * plus a few bytes per row. A batch past 1 GB would fail on every retry and wedge the
	 * stream, hence 512 MB at most.
	 */
	DefineCustomIntVariable("lakehouse.max_batch_bytes",
							"Most bytes of Kafka messages (values and keys) committed in one micro-batch",
							"A single larger message still makes a batch of its own.",
							&lakehouse_max_batch_bytes_kb,
							64 * 1024, 64, 512 * 1024,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomStringVariable("lakehouse.kafka_config",
							   "Extra librdkafka properties for every Kafka client of lakehouse",
							   "key=value pairs separated by semicolons or new lines; may hold secrets.",
							   &lakehouse_kafka_config,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   check_kafka_config, NULL, NULL);

	DefineCustomIntVariable("lakehouse.watermark",
							"How far behind the newest event time silver still admits events",
							"Events older than the newest event time minus this stay in bronze only.",
							&lakehouse_watermark_s,
							600, 0, INT_MAX,
							PGC_USERSET, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("lakehouse.session_gap",
							"Inactivity that ends an editor session",
							NULL,
							&lakehouse_session_gap_s,
							1800, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("lakehouse.request_timeout",
							"Longest wait for a Kafka broker to answer one request from SQL",
							"Bounds lakehouse.kafka_watermarks() and similar calls when a broker is down.",
							&lakehouse_request_timeout_ms,
							10000, 100, 600000,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("lakehouse.max_message_bytes",
							"Largest Kafka message value stored in bronze",
							"Larger messages go to lakehouse.dead_letters with the reason.",
							&lakehouse_max_message_bytes,
							16 * 1024 * 1024, 1, 256 * 1024 * 1024,
							PGC_SIGHUP, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("lakehouse.commit_to_kafka",
							 "Also report committed offsets to the Kafka consumer group, for lag tools",
							 "Informational only: stream workers read offsets from lakehouse.offsets, never from Kafka.",
							 &lakehouse_commit_to_kafka,
							 false,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	/*
	 * librdkafka stops fetching when its queue is full and, in the versions lakehouse
	 * supports, looks again only about once a second: the queue must hold more than a
	 * second of ingest or the worker idles. 128MB is about 1.7 s of 1.2 KB events at the
	 * rate COPY reaches on the benchmark machine (benchmarks/results.md).
	 */
	DefineCustomIntVariable("lakehouse.prefetch_memory",
							"Memory each stream worker may fill with messages fetched ahead from Kafka",
							"On reload, running stream workers reconnect to Kafka to apply it. Below about one second of ingest, the worker waits for Kafka.",
							&lakehouse_prefetch_memory_kb,
							128 * 1024, 1024, LH_KAFKA_MAX_QUEUE_KB,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);

	/*
	 * For the crash tests only: a fault they cannot place from outside. A reload setting
	 * (postgresql.conf or ALTER SYSTEM), so no session can SET it: only a superuser, or
	 * a role a superuser granted ALTER SYSTEM on it, turns it on. Kept out of the sample
	 * file.
	 */
	DefineCustomEnumVariable("lakehouse.test_fault",
							 "A fault the crash tests place on purpose; leave it at none",
							 "pause_before_commit: a stream worker, with its batch written and its offsets moved, waits before committing until the setting changes (or it is killed). "
							 "ignore_data_checkpoint: a stream worker reconciling its offsets trusts lakehouse.offsets even where its data reaches further.",
							 &lakehouse_test_fault,
							 LH_FAULT_NONE, test_fault_options,
							 PGC_SIGHUP, GUC_NOT_IN_SAMPLE,
							 NULL, NULL, NULL);

	MarkGUCPrefixReserved("lakehouse");
}
