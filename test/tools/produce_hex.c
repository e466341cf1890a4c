/*
 * produce_hex.c: test helper that publishes exactly the bytes a test asks for, including
 * what kcat cannot send (empty values, null values/tombstones, NUL bytes, invalid UTF-8
 * keys, message timestamps of any value). Reads lines "PARTITION<TAB>KEY<TAB>VALUE" with an
 * optional "<TAB>TIMESTAMP" (milliseconds since the Unix epoch; without it, the time of
 * sending) from stdin, where KEY and VALUE are hex ("" for empty) or "-" for null,
 * publishes them with acks=all and waits for every delivery.
 * Exits non-zero if any message was not acknowledged.
 *
 * With --transactional ID it publishes through Kafka transactions: a transaction begins
 * before the first record, and a line "COMMIT" or "ABORT" ends it (records after the last
 * such line are committed), so that tests can leave commit markers and aborted records in a
 * partition. The count printed is of every record sent, aborted ones included.
 *
 * usage: produce_hex [--transactional ID] BROKERS TOPIC < records.tsv
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

static int	failed;

/* Fails the run on a transaction API error. */
static void
check_txn(rd_kafka_error_t *error, const char *what)
{
	if (error == NULL)
		return;
	fprintf(stderr, "produce_hex: %s: %s\n", what, rd_kafka_error_string(error));
	rd_kafka_error_destroy(error);
	exit(1);
}

static void
on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void) rk;
	(void) opaque;
	if (m->err)
	{
		fprintf(stderr, "produce_hex: delivery failed: %s\n", rd_kafka_err2str(m->err));
		failed++;
	}
}

/* Decodes hex in place; returns the byte count, or -1 on bad input. */
static long
unhex(char *s)
{
	size_t		n = strlen(s);
	long		out = 0;

	if (n % 2 != 0)
		return -1;
	for (size_t i = 0; i < n; i += 2)
	{
		unsigned int b;

		if (sscanf(s + i, "%2x", &b) != 1)
			return -1;
		s[out++] = (char) b;
	}
	return out;
}

int
main(int argc, char **argv)
{
	char		errstr[512];
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;
	long		sent = 0;
	const char *txn_id = NULL;
	int			in_txn = 0;

	if (argc == 5 && strcmp(argv[1], "--transactional") == 0)
	{
		txn_id = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc != 3)
	{
		fprintf(stderr, "usage: produce_hex [--transactional ID] BROKERS TOPIC < records.tsv\n");
		return 2;
	}
	conf = rd_kafka_conf_new();
	if (txn_id != NULL &&
		rd_kafka_conf_set(conf, "transactional.id", txn_id, errstr, sizeof(errstr)))
	{
		fprintf(stderr, "produce_hex: %s\n", errstr);
		return 2;
	}
	if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], errstr, sizeof(errstr)) ||
		rd_kafka_conf_set(conf, "acks", "all", errstr, sizeof(errstr)) ||
		rd_kafka_conf_set(conf, "enable.idempotence", "true", errstr, sizeof(errstr)) ||
		rd_kafka_conf_set(conf, "message.max.bytes", "10000000", errstr, sizeof(errstr)))
	{
		fprintf(stderr, "produce_hex: %s\n", errstr);
		return 2;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (rk == NULL)
	{
		fprintf(stderr, "produce_hex: %s\n", errstr);
		return 2;
	}
	if (txn_id != NULL)
		check_txn(rd_kafka_init_transactions(rk, 30000), "init_transactions");

	while ((len = getline(&line, &cap, stdin)) > 0)
	{
		char	   *part;
		char	   *key;
		char	   *value;
		char	   *stamp;
		long long	ts = 0;
		long		klen;
		long		vlen;
		rd_kafka_resp_err_t err;

		if (line[len - 1] == '\n')
			line[--len] = '\0';
		if (txn_id != NULL && (strcmp(line, "COMMIT") == 0 || strcmp(line, "ABORT") == 0))
		{
			if (in_txn && line[0] == 'C')
				check_txn(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
			else if (in_txn)
			{
				/* Delivered first, so that the aborted records take offsets in the log. */
				if (rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR)
					failed++;
				check_txn(rd_kafka_abort_transaction(rk, 60000), "abort_transaction");
			}
			in_txn = 0;
			continue;
		}
		if (txn_id != NULL && !in_txn)
		{
			check_txn(rd_kafka_begin_transaction(rk), "begin_transaction");
			in_txn = 1;
		}
		part = strtok(line, "\t");
		key = part ? strtok(NULL, "\t") : NULL;
		value = key ? strtok(NULL, "\t") : NULL;
		stamp = value ? strtok(NULL, "\t") : NULL;
		if (stamp != NULL)
			ts = strtoll(stamp, NULL, 10);
		if (value == NULL)
		{
			fprintf(stderr, "produce_hex: bad line %ld (want PARTITION<TAB>KEY<TAB>VALUE)\n", sent + 1);
			return 2;
		}
		/* strtok skips empty fields, so empty is written as "=" by the caller. */
		if (strcmp(key, "=") == 0)
			key[0] = '\0';
		if (strcmp(value, "=") == 0)
			value[0] = '\0';
		klen = strcmp(key, "-") == 0 ? -1 : unhex(key);
		vlen = strcmp(value, "-") == 0 ? -1 : unhex(value);
		if ((klen < 0 && strcmp(key, "-") != 0) || (vlen < 0 && strcmp(value, "-") != 0))
		{
			fprintf(stderr, "produce_hex: bad hex on line %ld\n", sent + 1);
			return 2;
		}
		{
			void	   *kptr = klen < 0 ? NULL : key;
			void	   *vptr = vlen < 0 ? NULL : value;
			size_t		ksize = klen < 0 ? 0 : (size_t) klen;
			size_t		vsize = vlen < 0 ? 0 : (size_t) vlen;

		do
		{
			err = rd_kafka_producev(rk,
									RD_KAFKA_V_TOPIC(argv[2]),
									RD_KAFKA_V_PARTITION(atoi(part)),
									RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
									RD_KAFKA_V_KEY(kptr, ksize),
									RD_KAFKA_V_VALUE(vptr, vsize),
									RD_KAFKA_V_TIMESTAMP((int64_t) ts),
									RD_KAFKA_V_END);
			if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
				rd_kafka_poll(rk, 100);
		} while (err == RD_KAFKA_RESP_ERR__QUEUE_FULL);
		}
		if (err)
		{
			fprintf(stderr, "produce_hex: %s\n", rd_kafka_err2str(err));
			return 1;
		}
		sent++;
		rd_kafka_poll(rk, 0);
	}
	free(line);
	if (in_txn)
		check_txn(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
	if (rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		fprintf(stderr, "produce_hex: %d messages not delivered within 60 s\n", rd_kafka_outq_len(rk));
		failed++;
	}
	rd_kafka_destroy(rk);
	if (failed)
		return 1;
	printf("%ld\n", sent);
	return 0;
}
