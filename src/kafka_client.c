/*
 * kafka_client.c: one place that turns lakehouse settings into a librdkafka client.
 *
 * Every handle gets the same treatment: bootstrap servers, the user's extra properties from
 * lakehouse.kafka_config, and log.queue=true so that librdkafka's own threads never call
 * elog() or palloc(); the Postgres thread drains that queue instead. Handles are created
 * only in the backend or worker that uses them (never in the postmaster: their threads do
 * not survive fork()).
 */
#include "postgres.h"

#include <ctype.h>

#include "utils/memutils.h"

#include "guc.h"
#include "kafka_client.h"

/* How long rd_kafka_destroy may take before we stop waiting for in-flight requests. */
#define LH_KAFKA_CLOSE_TIMEOUT_MS 2000

LhKafkaClientError lh_kafka_client_error;

static void
on_client_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	strlcpy(lh_kafka_client_error.reason, reason ? reason : "", sizeof(lh_kafka_client_error.reason));
	lh_kafka_client_error.code = err;
}

/* Trim spaces in place; returns the first non-space character. */
static char *
trim(char *s)
{
	char	   *end;

	while (*s && isspace((unsigned char) *s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char) end[-1]))
		*--end = '\0';
	return s;
}

/*
 * Walks "k=v; k2=v2\nk3=v3" and calls visit(key, value) for each pair. Returns false and
 * fills problem on a malformed pair. The value text is never copied into problem, since it
 * may be a secret.
 */
static bool
walk_config(const char *config, char *problem, size_t problem_len,
			void (*visit) (const char *key, const char *value, void *arg), void *arg)
{
	char	   *copy;
	char	   *pair;
	char	   *save = NULL;
	int			n = 0;
	bool		ok = true;

	if (config == NULL)
		return true;
	copy = strdup(config);
	if (copy == NULL)
	{
		snprintf(problem, problem_len, "out of memory");
		return false;
	}
	for (pair = strtok_r(copy, ";\n", &save); pair != NULL; pair = strtok_r(NULL, ";\n", &save))
	{
		char	   *eq;
		char	   *key;

		n++;
		pair = trim(pair);
		if (*pair == '\0')
			continue;
		eq = strchr(pair, '=');
		if (eq == NULL)
		{
			snprintf(problem, problem_len, "Entry %d has no \"=\" between key and value.", n);
			ok = false;
			break;
		}
		*eq = '\0';
		key = trim(pair);
		if (*key == '\0')
		{
			snprintf(problem, problem_len, "Entry %d has an empty key.", n);
			ok = false;
			break;
		}
		if (visit)
			visit(key, trim(eq + 1), arg);
	}
	free(copy);
	return ok;
}

bool
lh_kafka_config_syntax_ok(const char *config, char *problem, size_t problem_len)
{
	return walk_config(config, problem, problem_len, NULL, NULL);
}

typedef struct ApplyState
{
	rd_kafka_conf_t *conf;
	char		bad_key[256];
	char		errstr[512];
} ApplyState;

static void
apply_pair(const char *key, const char *value, void *arg)
{
	ApplyState *st = (ApplyState *) arg;

	if (st->bad_key[0] != '\0')
		return;
	if (rd_kafka_conf_set(st->conf, key, value, st->errstr, sizeof(st->errstr)) != RD_KAFKA_CONF_OK)
		strlcpy(st->bad_key, key, sizeof(st->bad_key));
}

/* Sets one property we control; failure here is a bug, not a user error. */
static void
set_or_fail(rd_kafka_conf_t *conf, const char *key, const char *value)
{
	char		errstr[512];

	if (rd_kafka_conf_set(conf, key, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
	{
		rd_kafka_conf_destroy(conf);
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not set Kafka client property \"%s\"", key),
				 errdetail("%s", errstr)));
	}
}

/*
 * Kafka's own rule for topic names (checked here so that the user hears about a typo
 * before any network round trip, and in the same words every time).
 */
void
lh_kafka_check_topic_name(const char *topic)
{
	size_t		len = strlen(topic);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("topic must not be empty"),
				 errhint("Name the Kafka topic, such as wiki.recentchange.")));
	if (len > LH_KAFKA_TOPIC_MAX || strcmp(topic, ".") == 0 || strcmp(topic, "..") == 0 ||
		strspn(topic, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid Kafka topic name \"%.*s%s\"", 64, topic, len > 64 ? "..." : ""),
				 errdetail("Kafka topic names are 1 to %d ASCII letters, digits, '.', '_' or '-', and not \".\" or \"..\".",
						   LH_KAFKA_TOPIC_MAX),
				 errhint("Check the topic's spelling; kafka-topics.sh --list shows the broker's topics.")));
}

const char *
lh_kafka_resolve_brokers(const char *brokers)
{
	if (brokers == NULL)
		brokers = lakehouse_brokers;
	if (brokers == NULL || brokers[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no Kafka brokers given"),
				 errhint("Pass brokers explicitly or set lakehouse.brokers, for example 'localhost:9092'.")));
	return brokers;
}

/*
 * Steps through a comma-separated list: returns the next entry (spaces and tabs around it
 * trimmed, *len its length, possibly 0) and moves *cursor past it; NULL at the end.
 */
static const char *
next_list_entry(const char **cursor, size_t *len)
{
	const char *p = *cursor;
	const char *end;
	size_t		n;

	if (p == NULL || *p == '\0')
		return NULL;
	while (*p == ' ' || *p == '\t')
		p++;
	end = strchr(p, ',');
	n = end ? (size_t) (end - p) : strlen(p);
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	*cursor = end ? end + 1 : NULL;
	*len = n;
	return p;
}

/* True when entry (len bytes) is one of list's entries, case aside. */
static bool
broker_listed(const char *entry, size_t len, const char *list)
{
	const char *cursor = list;
	const char *e;
	size_t		n;

	while ((e = next_list_entry(&cursor, &n)) != NULL)
		if (n == len && pg_strncasecmp(e, entry, len) == 0)
			return true;
	return false;
}

/*
 * True when every broker of the comma-separated list is one a superuser approved: listed
 * in lakehouse.brokers or lakehouse.allowed_brokers (host:port as written there, case
 * aside). Only those receive lakehouse.kafka_config, which may hold credentials, and only
 * superusers may name others from SQL (kafka_queries.c).
 */
bool
lh_kafka_brokers_approved(const char *brokers)
{
	const char *cursor = brokers;
	const char *e;
	size_t		n;
	bool		any = false;

	while ((e = next_list_entry(&cursor, &n)) != NULL)
	{
		if (n == 0)
			continue;
		if (!broker_listed(e, n, lakehouse_brokers) && !broker_listed(e, n, lakehouse_allowed_brokers))
			return false;
		any = true;
	}
	return any;
}

/*
 * Builds a handle; settings is NULL or a NULL-terminated list of key, value, key, value
 * that the caller's correctness depends on (applied last). Raises ERROR (with nothing left allocated) when the configuration is
 * invalid; the caller owns the result and must lh_kafka_close() it on every path.
 */
LhKafka *
lh_kafka_open(rd_kafka_type_t type, const char *brokers, const char *client_id,
			  const char *const *settings)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	ApplyState	st;
	char		problem[256];
	char		errstr[512];
	LhKafka    *kc;

	brokers = lh_kafka_resolve_brokers(brokers);

	/*
	 * User's properties first, so that the ones lakehouse depends on win; and only for
	 * approved brokers: lakehouse.kafka_config may hold a password.
	 */
	memset(&st, 0, sizeof(st));
	st.conf = conf;
	if (!lh_kafka_brokers_approved(brokers))
	{
		if (lakehouse_kafka_config != NULL && lakehouse_kafka_config[0] != '\0')
			ereport(LOG,
					(errmsg("lakehouse.kafka_config is not applied to Kafka brokers \"%s\"", brokers),
					 errdetail("Neither lakehouse.brokers nor lakehouse.allowed_brokers lists them."),
					 errhint("A superuser can add them to lakehouse.allowed_brokers.")));
	}
	else if (!walk_config(lakehouse_kafka_config, problem, sizeof(problem), apply_pair, &st))
	{
		rd_kafka_conf_destroy(conf);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid lakehouse.kafka_config"),
				 errdetail("%s", problem)));
	}
	if (st.bad_key[0] != '\0')
	{
		rd_kafka_conf_destroy(conf);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid Kafka client property \"%s\" in lakehouse.kafka_config", st.bad_key),
				 errdetail("librdkafka said: %s", st.errstr),
				 errhint("See librdkafka's CONFIGURATION.md for property names and values.")));
	}

	set_or_fail(conf, "bootstrap.servers", brokers);
	set_or_fail(conf, "client.id", client_id);
	set_or_fail(conf, "log.queue", "true");
	/* Consumers must never create topics by asking about them. */
	if (type == RD_KAFKA_CONSUMER)
		set_or_fail(conf, "allow.auto.create.topics", "false");
	for (int i = 0; settings != NULL && settings[i] != NULL; i += 2)
		set_or_fail(conf, settings[i], settings[i + 1]);
	rd_kafka_conf_set_error_cb(conf, on_client_error);

	kc = MemoryContextAllocZero(TopMemoryContext, sizeof(LhKafka));
	strlcpy(kc->brokers, brokers, sizeof(kc->brokers));

	/* rd_kafka_new takes ownership of conf on success only. */
	kc->rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
	if (kc->rk == NULL)
	{
		rd_kafka_conf_destroy(conf);
		pfree(kc);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("could not create Kafka client for brokers \"%s\"", brokers),
				 errdetail("librdkafka said: %s", errstr)));
	}
	kc->logq = rd_kafka_queue_new(kc->rk);
	rd_kafka_set_log_queue(kc->rk, kc->logq);
	return kc;
}

static int
compare_int32(const void *a, const void *b)
{
	int32		pa = *(const int32 *) a;
	int32		pb = *(const int32 *) b;

	return (pa > pb) - (pa < pb);
}

/*
 * Asks for a topic's partitions once, without raising errors: returns the broker's or
 * librdkafka's error code, and on success a palloc'd ascending array of partition ids.
 * RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART means the brokers answered and know no such topic.
 */
rd_kafka_resp_err_t
lh_kafka_topic_partitions(LhKafka *kc, const char *topic, int timeout_ms,
						  int32 **ids, int *count)
{
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(kc->rk, topic, NULL);
	const rd_kafka_metadata_t *md = NULL;
	rd_kafka_resp_err_t err;

	*ids = NULL;
	*count = 0;
	if (rkt == NULL)
		return rd_kafka_last_error();
	err = rd_kafka_metadata(kc->rk, 0, rkt, &md, timeout_ms);
	rd_kafka_topic_destroy(rkt);
	lh_kafka_drain_logs(kc);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		return err;
	if (md->topic_cnt != 1)
		err = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
	else if (md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR)
		err = md->topics[0].err;
	else
	{
		int			n = md->topics[0].partition_cnt;

		*ids = palloc(sizeof(int32) * Max(n, 1));
		for (int i = 0; i < n; i++)
			(*ids)[i] = md->topics[0].partitions[i].id;
		qsort(*ids, n, sizeof(int32), compare_int32);
		*count = n;
	}
	rd_kafka_metadata_destroy(md);
	return err;
}

/*
 * Moves queued librdkafka log lines into the server log. Warnings and worse are LOG (the
 * server log, not the client), the rest DEBUG1. Remembers the newest warning for errdetail.
 */
void
lh_kafka_drain_logs(LhKafka *kc)
{
	rd_kafka_event_t *ev;

	if (kc == NULL || kc->logq == NULL)
		return;
	while ((ev = rd_kafka_queue_poll(kc->logq, 0)) != NULL)
	{
		if (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_LOG)
		{
			const char *fac = NULL;
			const char *str = NULL;
			int			level = 7;

			if (rd_kafka_event_log(ev, &fac, &str, &level) == 0 && str != NULL)
			{
				/* syslog levels: 0 emergency .. 4 warning .. 7 debug */
				if (level <= 4)
				{
					strlcpy(kc->last_error, str, sizeof(kc->last_error));
					elog(LOG, "librdkafka %s: %s", fac ? fac : "", str);
				}
				else
					elog(DEBUG1, "librdkafka %s: %s", fac ? fac : "", str);
			}
		}
		rd_kafka_event_destroy(ev);
	}
}

/*
 * Destroys the handle without waiting on a consumer group or a dead broker longer than
 * needed. Safe to call with NULL and from PG_FINALLY blocks.
 */
void
lh_kafka_close(LhKafka *kc)
{
	if (kc == NULL)
		return;
	if (kc->logq != NULL)
	{
		rd_kafka_event_t *ev;

		/* Detach the log queue first so nothing enqueues onto a queue being freed. */
		rd_kafka_set_log_queue(kc->rk, NULL);
		while ((ev = rd_kafka_queue_poll(kc->logq, 0)) != NULL)
			rd_kafka_event_destroy(ev);
		rd_kafka_queue_destroy(kc->logq);
		kc->logq = NULL;
	}
	if (kc->rk != NULL)
	{
		if (rd_kafka_type(kc->rk) == RD_KAFKA_PRODUCER)
			rd_kafka_flush(kc->rk, LH_KAFKA_CLOSE_TIMEOUT_MS);
		rd_kafka_destroy_flags(kc->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
		kc->rk = NULL;
	}
	pfree(kc);
}
