/*
 * kafka_watermarks.c: lakehouse.kafka_watermarks(topic, brokers), the broker's own view of a
 * topic: per partition the low watermark (oldest retained offset) and the high watermark
 * (next offset to be written). Verifiers compare bronze with this, so it asks the partition
 * leaders directly and never a cache.
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
#include "utils/tuplestore.h"

#include "guc.h"
#include "kafka_client.h"

PG_FUNCTION_INFO_V1(lakehouse_kafka_watermarks);

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

/*
 * Fetches metadata for one topic, retrying transient failures until the deadline. Returns
 * metadata the caller must free with rd_kafka_metadata_destroy().
 */
static const rd_kafka_metadata_t *
fetch_topic_metadata(LhKafka *kc, const char *topic, const Deadline *dl)
{
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(kc->rk, topic, NULL);
	const rd_kafka_metadata_t *md = NULL;
	rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR__TIMED_OUT;

	if (rkt == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid Kafka topic name \"%s\"", topic),
				 errdetail("librdkafka said: %s.", rd_kafka_err2str(rd_kafka_last_error()))));

	PG_TRY();
	{
		for (;;)
		{
			err = rd_kafka_metadata(kc->rk, 0, rkt, &md, slice_ms(dl));
			lh_kafka_drain_logs(kc);
			if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
			{
				rd_kafka_resp_err_t terr = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;

				/* Leader elections right after a broker restart heal by themselves. */
				if (terr == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE && remaining_ms(dl) > 0)
				{
					rd_kafka_metadata_destroy(md);
					md = NULL;
					wait_slice();
					continue;
				}
				if (terr != RD_KAFKA_RESP_ERR_NO_ERROR)
				{
					rd_kafka_metadata_destroy(md);
					md = NULL;
					if (terr == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
						ereport(ERROR,
								(errcode(ERRCODE_UNDEFINED_OBJECT),
								 errmsg("Kafka topic \"%s\" does not exist", topic),
								 errdetail("Brokers \"%s\" know no topic of that name.", kc->brokers),
								 errhint("Create the topic first, or check its spelling and the brokers.")));
					ereport(ERROR,
							(errcode(ERRCODE_CONNECTION_EXCEPTION),
							 errmsg("could not read metadata of Kafka topic \"%s\"", topic),
							 errdetail("The broker answered: %s.", rd_kafka_err2str(terr))));
				}
				break;
			}
			CHECK_FOR_INTERRUPTS();
			if (remaining_ms(dl) <= 0)
				raise_unreachable(kc, err, dl->timeout_ms);
		}
	}
	PG_FINALLY();
	{
		rd_kafka_topic_destroy(rkt);
	}
	PG_END_TRY();
	return md;
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

static int
compare_partition(const void *a, const void *b)
{
	int32		pa = ((const rd_kafka_metadata_partition_t *) a)->id;
	int32		pb = ((const rd_kafka_metadata_partition_t *) b)->id;

	return (pa > pb) - (pa < pb);
}

Datum
lakehouse_kafka_watermarks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *topic;
	const char *brokers;
	LhKafka    *volatile kc = NULL;
	Deadline	dl;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("topic must not be null")));
	topic = text_to_cstring(PG_GETARG_TEXT_PP(0));
	lh_kafka_check_topic_name(topic);
	brokers = lh_kafka_resolve_brokers(PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)));

	InitMaterializedSRF(fcinfo, 0);

	INSTR_TIME_SET_CURRENT(dl.start);
	dl.timeout_ms = lakehouse_request_timeout_ms;

	kc = lh_kafka_open(RD_KAFKA_CONSUMER, brokers, "lakehouse-watermarks");
	PG_TRY();
	{
		const rd_kafka_metadata_t *md = fetch_topic_metadata(kc, topic, &dl);
		int			npart = md->topics[0].partition_cnt;
		rd_kafka_metadata_partition_t *parts = palloc(sizeof(*parts) * Max(npart, 1));

		memcpy(parts, md->topics[0].partitions, sizeof(*parts) * npart);
		qsort(parts, npart, sizeof(*parts), compare_partition);
		/* md is freed before any further error can be raised below. */
		for (int i = 0; i < npart; i++)
			parts[i].replicas = parts[i].isrs = NULL;
		rd_kafka_metadata_destroy(md);

		for (int i = 0; i < npart; i++)
		{
			int64		low = 0;
			int64		high = 0;
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			query_partition(kc, topic, parts[i].id, &dl, &low, &high);
			values[0] = Int32GetDatum(parts[i].id);
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
