/*
 * kafka_queries.c: SQL functions that ask a broker about a topic.
 *
 * lakehouse.kafka_watermarks(topic, brokers): per partition the low watermark (oldest
 * retained offset) and the high watermark (next offset to be written). Verifiers compare
 * bronze with this, so it asks the partition leaders directly and never a cache.
 * lakehouse.kafka_offsets_for_time(topic, at, brokers): per partition the first offset whose
 * timestamp is at or after `at` (the high watermark when there is none), for start_from.
 *
 * Every broker call is bounded by lakehouse.request_timeout and made in short slices so a
 * cancel request (Ctrl-C, statement_timeout) is honoured while a broker is down.
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/latch.h"
#include "utils/wait_event.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "datatype/timestamp.h"
#include "utils/tuplestore.h"

#include "guc.h"
#include "kafka_client.h"

PG_FUNCTION_INFO_V1(lakehouse_kafka_watermarks);
PG_FUNCTION_INFO_V1(lakehouse_kafka_offsets_for_time);

/* Longest single blocking librdkafka call, so interrupts are checked this often. */
#define SLICE_MS 250

typedef struct Deadline
{
	instr_time	start;
	int			timeout_ms;
} Deadline;

static int
remaining_ms(const Deadline *d)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, d->start);
	return d->timeout_ms - (int) INSTR_TIME_GET_MILLISEC(now);
}

static int
slice_ms(const Deadline *d)
{
	int			left = remaining_ms(d);

	return left < SLICE_MS ? (left > 0 ? left : 1) : SLICE_MS;
}

/* Pauses one slice on the latch, so cancel and postmaster death are seen at once. */
static void
wait_slice(void)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 SLICE_MS, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

static void
raise_unreachable(LhKafka *kc, rd_kafka_resp_err_t err, int timeout_ms)
{
	/* Pick up the connection error that explains the timeout, if it just arrived. */
	lh_kafka_drain_logs(kc);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not get metadata from Kafka brokers \"%s\" within %d ms",
					kc->brokers, timeout_ms),
			 kc->last_error[0] ?
			 errdetail("librdkafka said: %s (last log line: %s).", rd_kafka_err2str(err), kc->last_error) :
			 errdetail("librdkafka said: %s.", rd_kafka_err2str(err)),
			 errhint("Check that the brokers are running and that lakehouse.brokers or the brokers argument names them; "
					 "raise lakehouse.request_timeout for a slow network.")));
}

static void
query_partition(LhKafka *kc, const char *topic, int32 partition, const Deadline *dl,
				int64 *low, int64 *high)
{
	for (;;)
	{
		rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(kc->rk, topic, partition,
																   low, high, slice_ms(dl));

		lh_kafka_drain_logs(kc);
		if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
			return;
		CHECK_FOR_INTERRUPTS();
		if (remaining_ms(dl) <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not read watermarks of Kafka topic \"%s\" partition %d", topic, partition),
					 errdetail("librdkafka said: %s.", rd_kafka_err2str(err)),
					 errhint("Check that the partition has a leader; raise lakehouse.request_timeout for a slow broker.")));
	}
}

/*
 * The topic's partition ids in ascending order (palloc'd), retrying transient failures
 * (broker not reachable yet, leader election after a restart) until the deadline.
 */
static int32 *
topic_partitions(LhKafka *kc, const char *topic, const Deadline *dl, int *npart)
{
	for (;;)
	{
		int32	   *ids;
		rd_kafka_resp_err_t err = lh_kafka_topic_partitions(kc, topic, slice_ms(dl), &ids, npart);

		switch (err)
		{
			case RD_KAFKA_RESP_ERR_NO_ERROR:
				return ids;
			case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("Kafka topic \"%s\" does not exist", topic),
						 errdetail("Brokers \"%s\" know no topic of that name.", kc->brokers),
						 errhint("Create the topic first, or check its spelling and the brokers.")));
				break;
			case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
				/* Leader elections right after a broker restart heal by themselves. */
				if (remaining_ms(dl) <= 0)
					raise_unreachable(kc, err, dl->timeout_ms);
				wait_slice();
				break;
			default:
				/* Negative codes are librdkafka's own (timeouts, transport): retry. */
				if (err > 0)
					ereport(ERROR,
							(errcode(ERRCODE_CONNECTION_EXCEPTION),
							 errmsg("could not read metadata of Kafka topic \"%s\"", topic),
							 errdetail("The broker answered: %s.", rd_kafka_err2str(err))));
				CHECK_FOR_INTERRUPTS();
				if (remaining_ms(dl) <= 0)
					raise_unreachable(kc, err, dl->timeout_ms);
				break;
		}
	}
}

/* Common argument handling: topic (validated), brokers (resolved), and the deadline. */
static char *
topic_arg(FunctionCallInfo fcinfo, int argno)
{
	char	   *topic;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topic must not be null"),
				 errhint("Name the Kafka topic, such as wiki.recentchange.")));
	topic = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	lh_kafka_check_topic_name(topic);
	return topic;
}

/*
 * Brokers a superuser did not approve (lakehouse.brokers, lakehouse.allowed_brokers) are
 * for superusers only: otherwise an operator could have the server connect anywhere. The
 * caller is the outer user, not the owner of a SECURITY DEFINER function such as
 * create_stream() that calls this.
 */
static const char *
brokers_arg(FunctionCallInfo fcinfo, int argno)
{
	const char *brokers = lh_kafka_resolve_brokers(PG_ARGISNULL(argno) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(argno)));

	if (!lh_kafka_brokers_approved(brokers) && !superuser_arg(GetOuterUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("Kafka brokers \"%s\" are not approved", brokers),
				 errdetail("Only superusers may name brokers that neither lakehouse.brokers nor lakehouse.allowed_brokers lists."),
				 errhint("Ask a superuser to add them to lakehouse.allowed_brokers.")));
	return brokers;
}

static void
start_deadline(Deadline *dl)
{
	INSTR_TIME_SET_CURRENT(dl->start);
	dl->timeout_ms = lakehouse_request_timeout_ms;
}

Datum
lakehouse_kafka_watermarks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *topic = topic_arg(fcinfo, 0);
	const char *brokers = brokers_arg(fcinfo, 1);
	LhKafka    *volatile kc = NULL;
	Deadline	dl;

	InitMaterializedSRF(fcinfo, 0);
	start_deadline(&dl);

	kc = lh_kafka_open(RD_KAFKA_CONSUMER, brokers, "lakehouse-watermarks", NULL);
	PG_TRY();
	{
		int			npart;
		int32	   *parts = topic_partitions(kc, topic, &dl, &npart);

		for (int i = 0; i < npart; i++)
		{
			int64		low = 0;
			int64		high = 0;
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			query_partition(kc, topic, parts[i], &dl, &low, &high);
			values[0] = Int32GetDatum(parts[i]);
			values[1] = Int64GetDatum(low);
			values[2] = Int64GetDatum(high);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_FINALLY();
	{
		lh_kafka_close(kc);
	}
	PG_END_TRY();

	return (Datum) 0;
}

Datum
lakehouse_kafka_offsets_for_time(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *topic = topic_arg(fcinfo, 0);
	TimestampTz at;
	const char *brokers = brokers_arg(fcinfo, 2);
	LhKafka    *volatile kc = NULL;
	/* librdkafka's, not palloc'd: destroyed on every path, errors included. */
	rd_kafka_topic_partition_list_t *volatile list = NULL;
	Deadline	dl;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("time must not be null"),
				 errhint("Pass the timestamp to look up, such as now() - interval '1 hour'.")));
	at = PG_GETARG_TIMESTAMPTZ(1);

	InitMaterializedSRF(fcinfo, 0);
	start_deadline(&dl);

	kc = lh_kafka_open(RD_KAFKA_CONSUMER, brokers, "lakehouse-offsets-for-time", NULL);
	PG_TRY();
	{
		int			npart;
		int32	   *parts = topic_partitions(kc, topic, &dl, &npart);
		rd_kafka_resp_err_t err;
		/* Kafka timestamps are milliseconds since the Unix epoch; negative ones are
		 * Kafka's special values (-1 is "the end"), so a time before 1970 asks for 0. */
		int64		at_ms = Max((at / 1000) +
								(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000, 0);

		list = rd_kafka_topic_partition_list_new(Max(npart, 1));
		for (int i = 0; i < npart; i++)
			rd_kafka_topic_partition_list_add(list, topic, parts[i])->offset = at_ms;
		err = rd_kafka_offsets_for_times(kc->rk, list, Max(remaining_ms(&dl), 1));
		lh_kafka_drain_logs(kc);
		if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		{
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not look up offsets by time in Kafka topic \"%s\"", topic),
					 errdetail("librdkafka said: %s.", rd_kafka_err2str(err))));
		}
		for (int i = 0; i < list->cnt; i++)
		{
			rd_kafka_topic_partition_t *tp = &list->elems[i];
			int64		next = tp->offset;
			Datum		values[2];
			bool		nulls[2] = {false, false};

			/*
			 * Only "no error and offset -1" means no message at or after the time (start at
			 * the end of the partition); any error of the partition's own is an error, not
			 * a reason to skip to its end.
			 */
			if (tp->err != RD_KAFKA_RESP_ERR_NO_ERROR)
			{
				rd_kafka_resp_err_t perr = tp->err;
				int32		partition = tp->partition;

				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not look up offsets by time in partition %d of Kafka topic \"%s\"",
								partition, topic),
						 errdetail("librdkafka said: %s.", rd_kafka_err2str(perr)),
						 errhint("Try again once the partition is available (it may have no leader right now).")));
			}
			if (next < 0)
			{
				int64		low = 0;

				query_partition(kc, topic, tp->partition, &dl, &low, &next);
			}
			values[0] = Int32GetDatum(tp->partition);
			values[1] = Int64GetDatum(next);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_FINALLY();
	{
		if (list != NULL)
			rd_kafka_topic_partition_list_destroy(list);
		lh_kafka_close(kc);
	}
	PG_END_TRY();

	return (Datum) 0;
}
