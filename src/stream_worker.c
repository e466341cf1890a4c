/*
 * stream_worker.c: the background worker of one stream, Kafka to bronze, exactly once.
 *
 * Each micro-batch commits in ONE transaction: its good rows (COPY into bronze.<stream>),
 * its dead letters, the next offset of every partition it read (compare-and-set against
 * what this worker last committed), and its stream_progress row. Offsets are read from
 * Postgres at start and nowhere else: the consumer is assigned partitions at those offsets,
 * never at a consumer group's, and messages below them are never inserted again.
 *
 * Waiting happens on the latch: librdkafka signals a pipe when its queue becomes non-empty
 * and the worker sleeps in WaitLatchOrSocket() on that pipe, so SIGTERM, SIGHUP and
 * postmaster death are seen at once. SIGTERM goes through die(): an open batch transaction
 * aborts as a whole.
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "access/xact.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/pmsignal.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "guc.h"
#include "launcher.h"
#include "kafka_client.h"
#include "batch_ledger.h"
#include "stream_catalog.h"
#include "worker_tx.h"
#include "batch_writer.h"
#include "stream_worker.h"

/* Longest sleep between checks when no message arrives. */
#define IDLE_WAKE_MS 1000
/* Backoff bounds while the brokers cannot be reached at start. */
#define BROKER_RETRY_MIN_MS 500
#define BROKER_RETRY_MAX_MS 10000
/* How often a running worker looks for partitions added to its topic. */
#define PARTITION_CHECK_MS 10000

static StreamState st;
static LhKafka *kc;
static int	kc_prefetch_kb;		/* the lakehouse.prefetch_memory kc was built with */
static int	wake_pipe[2] = {-1, -1};
static MemoryContext batch_cxt;
static MemoryContext loop_cxt;

/*
 * Messages polled but not yet committed. librdkafka's destroy waits until every message
 * that references the handle is released, so the exit path must release these first.
 */
static rd_kafka_message_t **inflight;
static int	ninflight;
static bool in_batch;			/* inside commit_batch's transaction: an error there is the batch's */

/* ---------------------------------------------------------------------------------- */

/* Runs on every exit path (ERROR, FATAL from SIGTERM, normal exit): no handle outlives us. */
static void
close_kafka(int code, Datum arg)
{
	for (int i = 0; i < ninflight; i++)
		rd_kafka_message_destroy(inflight[i]);
	ninflight = 0;
	if (kc != NULL)
	{
		LhKafka    *k = kc;

		kc = NULL;
		/*
		 * Without a postmaster the process is about to vanish: the kernel closes the
		 * sockets, and a clean destroy could only delay the exit that frees shared memory.
		 */
		if (PostmasterIsAlive())
			lh_kafka_close(k);
	}
}

/*
 * Looked at while waiting and between batches (and while paused by lakehouse.test_fault):
 * during a backlog the worker never waits, and would otherwise miss a reload and go on
 * committing after the postmaster died.
 */
static void
between_batches(void)
{
	if (!PostmasterIsAlive())
		proc_exit(1);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/* Waits for a Kafka message, the latch, or the timeout; exits on postmaster death. */
static void
wait_for_messages(long timeout_ms)
{
	int			rc;

	rc = WaitLatchOrSocket(MyLatch,
						   WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						   wake_pipe[0], timeout_ms, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	if (rc & WL_SOCKET_READABLE)
	{
		char		drain[64];

		while (read(wake_pipe[0], drain, sizeof(drain)) > 0)
			;
	}
	between_batches();
}

static void
open_consumer(void)
{
	char		group[256];
	char		prefetch_kb[16];
	rd_kafka_queue_t *q;

	/*
	 * Offsets come from Postgres only: no auto commit, no offset store, and a stored offset
	 * that left the broker's retention is an error, never a silent jump. The group id only
	 * names the stream to outside lag tools. Reading committed data only keeps aborted
	 * transactional messages out of bronze.
	 */
	const char *const settings[] = {
		"group.id", group,
		"enable.auto.commit", "false",
		"enable.auto.offset.store", "false",
		"auto.offset.reset", "error",
		"isolation.level", "read_committed",
		"enable.partition.eof", "false",
		/* Bounds the prefetch buffer, and so most of the worker's memory. */
		"queued.max.messages.kbytes", prefetch_kb,
		NULL
	};

	snprintf(group, sizeof(group), "lakehouse.%s.%s", lakehouse_database, st.name);
	snprintf(prefetch_kb, sizeof(prefetch_kb), "%d", lakehouse_prefetch_memory_kb);
	kc = lh_kafka_open(RD_KAFKA_CONSUMER, st.brokers, "lakehouse-stream", settings);
	kc_prefetch_kb = lakehouse_prefetch_memory_kb;
	rd_kafka_poll_set_consumer(kc->rk);

	/* The pipe outlives a consumer rebuilt by apply_prefetch_memory(). */
	if (wake_pipe[0] < 0 &&
		(pipe(wake_pipe) != 0 ||
		 fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK) != 0 ||
		 fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK) != 0))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create wake-up pipe: %m")));
	q = rd_kafka_queue_get_consumer(kc->rk);
	rd_kafka_queue_io_event_enable(q, wake_pipe[1], "1", 1);
	rd_kafka_queue_destroy(q);
}

/*
 * Partitions of the topic, asked of the brokers until they answer. While they do not,
 * the stream shows 'waiting for broker' with librdkafka's reason.
 */
static void
discover_partitions(int32 **ids, int *count)
{
	long		backoff = BROKER_RETRY_MIN_MS;
	bool		reported = false;

	for (;;)
	{
		rd_kafka_resp_err_t err = lh_kafka_topic_partitions(kc, st.topic, 2000, ids, count);

		if (err == RD_KAFKA_RESP_ERR_NO_ERROR && *count > 0)
		{
			if (reported)
				lh_stream_set_state(&st, LH_STATE_STARTING, NULL);
			return;
		}
		if (!reported)
		{
			char	   *why = psprintf("%s%s%s", rd_kafka_err2str(err),
									   kc->last_error[0] ? ": " : "", kc->last_error);

			ereport(LOG,
					(errmsg("lakehouse stream \"%s\" is waiting for Kafka topic \"%s\" on \"%s\"",
							st.name, st.topic, st.brokers),
					 errdetail("%s", why)));
			lh_stream_set_state(&st, LH_STATE_WAITING_FOR_BROKER, why);
			reported = true;
		}
		wait_for_messages(backoff);
		backoff = Min(backoff * 2, BROKER_RETRY_MAX_MS);
	}
}

static void
assign_partitions(void)
{
	rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(Max(st.nparts, 1));
	rd_kafka_resp_err_t err;

	for (int i = 0; i < st.nparts; i++)
	{
		if (st.parts[i].stopped)
			continue;
		rd_kafka_topic_partition_list_add(list, st.topic, st.parts[i].partition)->offset =
			st.parts[i].next_offset;
	}
	err = rd_kafka_assign(kc->rk, list);
	rd_kafka_topic_partition_list_destroy(list);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("could not assign Kafka partitions to stream \"%s\"", st.name),
				 errdetail("librdkafka said: %s.", rd_kafka_err2str(err))));
}

static StreamPartition *
find_partition(int32 partition)
{
	for (int i = 0; i < st.nparts; i++)
		if (st.parts[i].partition == partition)
			return &st.parts[i];
	return NULL;
}

/*
 * Pauses a partition at once and marks it for a stop recorded after the batch under way
 * (stop_pending_partitions): why, and the offset of a record that could not be read or -1.
 */
static void
pause_for_stop(StreamPartition *p, const char *why, int64 unreadable_offset)
{
	rd_kafka_topic_partition_list_t *list;

	if (p == NULL || p->stopped)
		return;
	list = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(list, st.topic, p->partition);
	rd_kafka_pause_partitions(kc->rk, list);
	rd_kafka_topic_partition_list_destroy(list);
	p->stopped = true;
	p->stop_pending = true;
	p->unreadable_offset = unreadable_offset;
	strlcpy(p->stop_reason, why, sizeof(p->stop_reason));
}

/*
 * A message that carries an error instead of data. A partition whose next offset is no
 * longer on the broker stops, loudly and durably; it resumes only after reset_offsets().
 * The stop is recorded once the batch under way has committed (stop_pending_partitions):
 * the messages it already holds from that partition were read before the gap.
 */
static void
handle_consumer_error(rd_kafka_message_t *rkm)
{
	const char *what = rd_kafka_message_errstr(rkm);

	if (rkm->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
		return;
	if ((rkm->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
		 rkm->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) && rkm->rkt != NULL)
	{
		pause_for_stop(find_partition(rkm->partition), what, -1);
		return;
	}
	/*
	 * A record librdkafka could not decode (corrupt, or compressed in a way it cannot
	 * read) comes as an error in its place: the partition stops before it, loudly, rather
	 * than letting the next message's offset pass over it as if it held no message.
	 */
	if ((rkm->err == RD_KAFKA_RESP_ERR__BAD_MSG || rkm->err == RD_KAFKA_RESP_ERR__BAD_COMPRESSION ||
		 rkm->err == RD_KAFKA_RESP_ERR_INVALID_MSG ||
		 rkm->err == RD_KAFKA_RESP_ERR_UNSUPPORTED_COMPRESSION_TYPE) && rkm->rkt != NULL)
	{
		pause_for_stop(find_partition(rkm->partition), what, rkm->offset);
		return;
	}
	if (rd_kafka_fatal_error(kc->rk, NULL, 0) != RD_KAFKA_RESP_ERR_NO_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("fatal Kafka client error in stream \"%s\"", st.name),
				 errdetail("librdkafka said: %s.", what),
				 errhint("The worker restarts with a new client.")));
	/* Transient (broker down, restarting): librdkafka retries by itself. */
	if (st.state != LH_STATE_WAITING_FOR_BROKER)
	{
		ereport(LOG,
				(errmsg("lakehouse stream \"%s\": Kafka client error, retrying", st.name),
				 errdetail("%s", what)));
		lh_stream_set_state(&st, LH_STATE_WAITING_FOR_BROKER, what);
	}
}

/*
 * Records the stops found while the last batch was collected, now that it has committed
 * (or, with no batch, at once): each names the partition's next offset, the first one the
 * broker no longer holds.
 */
static void
stop_pending_partitions(void)
{
	for (int i = 0; i < st.nparts; i++)
	{
		StreamPartition *p = &st.parts[i];

		if (!p->stop_pending)
			continue;
		p->stop_pending = false;
		if (p->unreadable_offset >= 0)
			lh_offsets_stop_unreadable(&st, p, p->unreadable_offset, p->stop_reason);
		else
			lh_offsets_stop_partition(&st, p, p->stop_reason);
	}
}

/* Turns a client-level error reported by librdkafka (broker down, ...) into stream state. */
static void
note_client_error(void)
{
	int			code = lh_kafka_client_error.code;

	if (code == 0)
		return;
	lh_kafka_client_error.code = 0;
	if (code == RD_KAFKA_RESP_ERR__FATAL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("fatal Kafka client error in stream \"%s\"", st.name),
				 errdetail("librdkafka said: %s.", lh_kafka_client_error.reason),
				 errhint("The worker restarts with a new client.")));
	if (st.state != LH_STATE_WAITING_FOR_BROKER)
	{
		ereport(LOG,
				(errmsg("lakehouse stream \"%s\" lost its Kafka brokers; librdkafka keeps retrying", st.name),
				 errdetail("%s", lh_kafka_client_error.reason)));
		lh_stream_set_state(&st, LH_STATE_WAITING_FOR_BROKER, lh_kafka_client_error.reason);
	}
}

/*
 * While the stream shows 'waiting for broker' and no message arrives, asks the brokers
 * for metadata now and then: once they answer, the state goes back to running.
 */
static void
recheck_brokers(void)
{
	int32	   *ids;
	int			count;

	if (st.state != LH_STATE_WAITING_FOR_BROKER)
		return;
	if (lh_kafka_topic_partitions(kc, st.topic, 500, &ids, &count) == RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		ereport(LOG, (errmsg("lakehouse stream \"%s\" reached its Kafka brokers again", st.name)));
		lh_stream_set_state(&st, LH_STATE_RUNNING, NULL);
	}
	note_client_error();
}

/* Milliseconds since the batch's first message. */
static long
batch_age_ms(TimestampTz first_at)
{
	long		secs;
	int			usecs;

	TimestampDifference(first_at, GetCurrentTimestamp(), &secs, &usecs);
	return secs * 1000 + usecs / 1000;
}

/*
 * Collects a micro-batch: what librdkafka has handed over, up to max_batch_messages or
 * max_batch_bytes. The batch closes when the consumer's queue runs dry once it is
 * batch_linger_ms old: everything fetched so far is in it, and waiting longer would only
 * add latency (a steady stream commits what came, and what arrives during that commit
 * makes the next batch). A linger (0 by default: it costs freshness) keeps a trickle over
 * many partitions, which arrives in many small fetch responses, from costing a commit
 * each. While the queue holds
 * messages (a backlog) batches fill up to their limits; max_batch_ms bounds a batch that
 * keeps receiving without the queue running dry. Returns the count; 0 after an idle
 * wake-up.
 */
static int
collect_batch(rd_kafka_message_t **msgs, int max_msgs, TimestampTz *first_out)
{
	int			n = 0;
	size_t		bytes = 0;
	size_t		max_bytes = (size_t) lakehouse_max_batch_bytes_kb * 1024;
	TimestampTz first_at = 0;
	bool		idle_waited = false;
	uint32		polled = 0;

	for (;;)
	{
		rd_kafka_message_t *rkm = rd_kafka_consumer_poll(kc->rk, 0);

		if (rkm != NULL)
		{
			StreamPartition *p;

			polled++;
			if (rkm->err)
			{
				handle_consumer_error(rkm);
				rd_kafka_message_destroy(rkm);
			}
			else if ((p = find_partition(rkm->partition)) == NULL || p->stopped ||
					 rkm->offset < p->next_offset)
			{
				/* Below the committed offset: already in bronze (a re-delivery). */
				rd_kafka_message_destroy(rkm);
			}
			else
			{
				msgs[n++] = rkm;
				ninflight = n;
				bytes += rkm->len + rkm->key_len;
				if (n == 1)
					*first_out = first_at = GetCurrentTimestamp();
				if (n >= max_msgs || bytes >= max_bytes)
					return n;
			}
			/* The clock is read every 256 messages, re-deliveries included: cheap enough. */
			if (n > 0 && (polled & 255) == 0 && batch_age_ms(first_at) >= lakehouse_max_batch_ms)
				return n;
			continue;
		}

		lh_kafka_drain_logs(kc);
		note_client_error();
		if (n > 0)
		{
			/* The queue ran dry: commit what arrived, once the batch is old enough. */
			long		wait_ms = Min(lakehouse_batch_linger_ms, lakehouse_max_batch_ms) - batch_age_ms(first_at);

			if (wait_ms <= 0)
				return n;
			wait_for_messages(wait_ms);
			continue;
		}
		if (idle_waited)
			return 0;			/* nothing arrived: let the main loop do housekeeping */
		wait_for_messages(IDLE_WAKE_MS);
		idle_waited = true;
	}
}

/*
 * After COMMIT, tells the consumer group the same offsets, for outside lag tools (kcat,
 * Burrow, kafka-consumer-groups). Informational only: asynchronous, errors are just logged
 * by librdkafka, and the worker never reads offsets back from the group.
 */
static void
report_offsets_to_kafka(LhBatch *batch)
{
	rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(Max(batch->ntouched, 1));
	rd_kafka_resp_err_t err;

	for (int i = 0; i < batch->ntouched; i++)
		rd_kafka_topic_partition_list_add(list, st.topic, batch->touched[i].partition)->offset =
			batch->touched[i].next_offset;
	err = rd_kafka_commit(kc->rk, list, 1);
	rd_kafka_topic_partition_list_destroy(list);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		elog(DEBUG1, "lakehouse stream \"%s\": could not report offsets to Kafka: %s",
			 st.name, rd_kafka_err2str(err));
}

/*
 * The consumer's position in each partition it reads: the offset after the last message
 * polled, or after the commit markers and aborted records that librdkafka passes without
 * delivering them (it reads committed data only). Says whether any partition's position is
 * beyond where the stream stands, and hands each such position to the batch, if one is
 * given.
 */
static bool
positions_beyond(LhBatch *batch)
{
	rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(Max(st.nparts, 1));
	bool		beyond = false;

	for (int i = 0; i < st.nparts; i++)
		if (!st.parts[i].stopped)
			rd_kafka_topic_partition_list_add(list, st.topic, st.parts[i].partition);
	if (rd_kafka_position(kc->rk, list) == RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		for (int i = 0; i < list->cnt; i++)
		{
			StreamPartition *p = find_partition(list->elems[i].partition);

			if (list->elems[i].err || p == NULL || list->elems[i].offset <= p->next_offset)
				continue;
			beyond = true;
			if (batch != NULL)
				lh_batch_position(batch, p->partition, list->elems[i].offset);
		}
	}
	rd_kafka_topic_partition_list_destroy(list);
	return beyond;
}

/*
 * lakehouse.test_fault = pause_before_commit: with the batch's rows, dead letters and
 * offsets written (its WAL inserted, its commit record not), waits until the setting
 * changes, so that a crash test can SIGKILL the worker inside the transaction. Says so in
 * the server log and in pg_stat_activity, which the test reads as proof that the kill
 * landed there.
 */
static void
pause_before_commit(void)
{
	if (lakehouse_test_fault != LH_FAULT_PAUSE_BEFORE_COMMIT)
		return;
	ereport(LOG,
			(errmsg("lakehouse stream \"%s\": batch written, paused before its commit (lakehouse.test_fault)",
					st.name)));
	pgstat_report_activity(STATE_RUNNING, "lakehouse: paused before commit (lakehouse.test_fault)");
	while (lakehouse_test_fault == LH_FAULT_PAUSE_BEFORE_COMMIT)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		between_batches();
	}
	pgstat_report_activity(STATE_RUNNING, "lakehouse: committing micro-batch");
}

/*
 * One batch, one transaction: rows, dead letters, offsets (compare-and-set), the offsets
 * passed without a message, progress. n may be 0 when only such offsets were passed (an
 * aborted transaction at the end of a partition): its next offset still moves.
 */
static void
commit_batch(rd_kafka_message_t **msgs, int n, TimestampTz first_at)
{
	MemoryContext old = MemoryContextSwitchTo(batch_cxt);
	LhBatch		batch;

	/*
	 * Before the transaction: the batch's list of partitions is allocated in batch_cxt.
	 * StartTransactionCommand and SPI_connect switch to contexts that SPI_finish and the
	 * commit free, and the list is read after them (lh_batch_committed, the offsets report).
	 */
	lh_batch_begin(&batch, &st, first_at);

	lh_tx_begin("lakehouse: committing micro-batch");
	in_batch = true;

	lh_write_batch(&batch, msgs, n, (size_t) lakehouse_max_message_bytes);
	positions_beyond(&batch);
	lh_batch_finish(&batch);
	pause_before_commit();
	lh_tx_commit();
	in_batch = false;

	lh_batch_committed(&batch, &st);
	if (lakehouse_commit_to_kafka)
		report_offsets_to_kafka(&batch);
	ninflight = 0;
	for (int i = 0; i < n; i++)
		rd_kafka_message_destroy(msgs[i]);
	MemoryContextSwitchTo(old);
	MemoryContextReset(batch_cxt);
}

/*
 * Kafka topics can gain partitions while a stream runs. Every PARTITION_CHECK_MS the worker
 * asks for the count between batches; new partitions get an offsets row at their earliest
 * offset (recorded as partition_added in stream_log) and join the assignment.
 */
static void
watch_partitions(void)
{
	static TimestampTz checked_at;
	TimestampTz now = GetCurrentTimestamp();
	int32	   *ids;
	int			count;

	if (!TimestampDifferenceExceeds(checked_at, now, PARTITION_CHECK_MS))
		return;
	checked_at = now;
	if (lh_kafka_topic_partitions(kc, st.topic, 1000, &ids, &count) != RD_KAFKA_RESP_ERR_NO_ERROR ||
		count <= st.nparts)
		return;
	ereport(LOG,
			(errmsg("lakehouse stream \"%s\": topic \"%s\" now has %d partitions (was %d)",
					st.name, st.topic, count, st.nparts)));
	lh_offsets_reconcile(&st, kc, ids, count);
	assign_partitions();
}

/*
 * librdkafka reads its queue bound only when a client is built, so a reload that changes
 * lakehouse.prefetch_memory rebuilds the consumer between batches (nothing in flight) and
 * assigns it at the committed offsets, as at start.
 */
static void
apply_prefetch_memory(void)
{
	LhKafka    *old = kc;

	if (lakehouse_prefetch_memory_kb == kc_prefetch_kb)
		return;
	ereport(LOG,
			(errmsg("lakehouse stream \"%s\": lakehouse.prefetch_memory is now %dkB (was %dkB); reconnecting to Kafka",
					st.name, lakehouse_prefetch_memory_kb, kc_prefetch_kb)));
	kc = NULL;
	lh_kafka_close(old);
	open_consumer();
	assign_partitions();
}

static void
run_stream(void)
{
	int32	   *ids;
	int			count;
	rd_kafka_message_t **msgs;

	lh_stream_load(&st);
	if (!st.enabled)
	{
		ereport(LOG, (errmsg("lakehouse stream \"%s\" is disabled; worker exits", st.name)));
		proc_exit(0);
	}
	open_consumer();
	discover_partitions(&ids, &count);
	lh_offsets_reconcile(&st, kc, ids, count);
	lh_stream_set_state(&st, LH_STATE_RUNNING, NULL);
	assign_partitions();
	ereport(LOG,
			(errmsg("lakehouse stream \"%s\" consuming topic \"%s\" from %d partitions",
					st.name, st.topic, st.nparts)));

	/*
	 * The capacity is recorded with the allocation, from the same read of the setting: a
	 * reload while the partitions were discovered may have changed it since the worker
	 * started, and a capacity recorded earlier let a later reload write past the end.
	 */
	st.msgs_capacity = lakehouse_max_batch_messages;
	msgs = MemoryContextAlloc(TopMemoryContext, sizeof(*msgs) * st.msgs_capacity);
	inflight = msgs;

	/*
	 * Each turn of the loop allocates in a context reset at its end, as pg_cron's main loop
	 * does: partition lists, state texts and log lines would otherwise pile up in
	 * TopMemoryContext for the worker's whole life. What outlives a turn (the partitions,
	 * the message array, the Kafka handle, the COPY buffer) is allocated in
	 * TopMemoryContext on purpose, and the transaction helpers come back to this context.
	 */
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "lakehouse stream loop", ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		int			max_msgs;
		int			n;
		TimestampTz first_at = 0;

		MemoryContextSwitchTo(loop_cxt);
		between_batches();
		max_msgs = lakehouse_max_batch_messages;
		if (max_msgs > st.msgs_capacity)
		{
			msgs = repalloc(msgs, sizeof(*msgs) * max_msgs);
			inflight = msgs;
			st.msgs_capacity = max_msgs;
		}
		n = collect_batch(msgs, max_msgs, &first_at);
		if (n > 0)
			commit_batch(msgs, n, first_at);
		else if (positions_beyond(NULL))
			commit_batch(msgs, 0, GetCurrentTimestamp());
		else
			recheck_brokers();
		stop_pending_partitions();
		watch_partitions();
		apply_prefetch_memory();
		if (n > 0 && st.state != LH_STATE_RUNNING)
			lh_stream_set_state(&st, LH_STATE_RUNNING, NULL);
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(loop_cxt);
	}
}

/*
 * Stops the partitions whose offsets lag the data (lh_offsets_stop_behind_data); an error
 * doing so is reported and dropped, so that the caller still records the first one. A
 * function of its own rather than a PG_TRY nested in the caller's PG_CATCH, whose
 * variables the nested one would shadow (-Wshadow=compatible-local from PostgreSQL 16 on).
 */
static void
stop_behind_data_or_report(StreamState *st)
{
	PG_TRY();
	{
		lh_offsets_stop_behind_data(st);
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		RESUME_INTERRUPTS();
	}
	PG_END_TRY();
}

void
lakehouse_stream_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	memset(&st, 0, sizeof(st));
	strlcpy(st.name, MyBgworkerEntry->bgw_extra, sizeof(st.name));

	lakehouse_connect_as_superuser();
	pgstat_report_appname(psprintf("lakehouse stream %s", st.name));
	if (GetDatabaseEncoding() != PG_UTF8)
		ereport(FATAL,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("lakehouse streams need a UTF8 database"),
				 errhint("Point lakehouse.database at a database created with ENCODING 'UTF8'.")));

	batch_cxt = AllocSetContextCreate(TopMemoryContext, "lakehouse batch", ALLOCSET_DEFAULT_SIZES);
	before_shmem_exit(close_kafka, (Datum) 0);

	PG_TRY();
	{
		run_stream();
	}
	PG_CATCH();
	{
		/* Record why, where stream_status() shows it, then exit so the launcher restarts us. */
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(TopMemoryContext);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
		RESUME_INTERRUPTS();
		/*
		 * A batch refused by a key of the stream's data read offsets the data already
		 * holds: the partitions concerned stop (loudly, in stream_status()) rather than
		 * the restarted worker resuming after rows it did not write. Only for an error
		 * inside a batch's transaction, where st.parts is the committed position. First,
		 * as the write that matters most; if it fails, the state below still says why.
		 */
		if (edata->sqlerrcode == ERRCODE_UNIQUE_VIOLATION && in_batch && lh_stream_lock_held)
			stop_behind_data_or_report(&st);
		/*
		 * Without the stream's lock another worker may be running it: its worker_pid and
		 * state are that one's to write; the error still shows as last_error.
		 */
		lh_stream_set_state(&st, lh_stream_lock_held ? LH_STATE_ERROR : LH_STATE_KEEP, edata->message);
		proc_exit(1);
	}
	PG_END_TRY();
}
