/*
 * mock_broker.c: test helper that runs librdkafka's mock cluster (one broker, in this
 * process, on a loopback port) with one topic, for fault injection only: it answers the
 * requests a test pushes errors for with those errors, which a real broker cannot be made
 * to do on demand. It keeps only a few MiB per partition, so it never stands in for Kafka
 * where data matters.
 *
 * Prints the bootstrap address on the first line of stdout, then reads commands from
 * stdin, one a line, and answers each with "ok" (or "error: ..." on stderr and exit 1):
 *   push APIKEY ERRCODE COUNT   the next COUNT requests of Kafka API APIKEY (2 is
 *                               ListOffsets, 3 Metadata) fail with broker error ERRCODE
 * It stops at the end of stdin.
 *
 * usage: mock_broker TOPIC PARTITIONS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define MAX_PUSH 64

int
main(int argc, char **argv)
{
	char		errstr[512];
	char		line[256];
	rd_kafka_t *rk;
	rd_kafka_mock_cluster_t *mc;
	int			partitions = argc == 3 ? atoi(argv[2]) : 0;

	if (partitions < 1)
	{
		fprintf(stderr, "usage: mock_broker TOPIC PARTITIONS\n");
		return 2;
	}
	/* The mock cluster belongs to a client instance; this one only hosts it. */
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), errstr, sizeof(errstr));
	if (rk == NULL)
	{
		fprintf(stderr, "mock_broker: %s\n", errstr);
		return 1;
	}
	mc = rd_kafka_mock_cluster_new(rk, 1);
	if (mc == NULL || rd_kafka_mock_topic_create(mc, argv[1], partitions, 1) != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		fprintf(stderr, "mock_broker: could not start the mock cluster with topic %s\n", argv[1]);
		return 1;
	}
	printf("%s\n", rd_kafka_mock_cluster_bootstraps(mc));
	fflush(stdout);

	while (fgets(line, sizeof(line), stdin) != NULL)
	{
		int			api, code, count;
		rd_kafka_resp_err_t errs[MAX_PUSH];

		if (sscanf(line, "push %d %d %d", &api, &code, &count) != 3 || count < 1 || count > MAX_PUSH)
		{
			fprintf(stderr, "mock_broker: cannot read command: %s", line);
			return 1;
		}
		for (int i = 0; i < count; i++)
			errs[i] = (rd_kafka_resp_err_t) code;
		rd_kafka_mock_push_request_errors_array(mc, (int16_t) api, (size_t) count, errs);
		printf("ok\n");
		fflush(stdout);
	}
	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(rk);
	return 0;
}
