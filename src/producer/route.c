/*
 * route.c: validates each event against the recentchange contract and sends it where
 * it belongs.
 *
 * Message key: the wiki name (e.g. "enwiki"). Kafka keeps order only within a
 * partition, and the consumers downstream work per wiki: editor sessions are per
 * (wiki, user), and a page's edits follow each other. Keying by wiki keeps one wiki's
 * events in one partition, in the order the stream sent them, and a resent copy of
 * an event lands in the same partition as its original. meta.id would spread load
 * more evenly but scatter a wiki over every partition and buy nothing for dedup,
 * which runs on meta.id in silver whatever the partition. The cost is skew: the
 * biggest wikis (commonswiki, wikidatawiki, enwiki) make their partitions hotter.
 *
 * Dead letters have no key: they may have no wiki at all, and order does not matter
 * for them. Their value is the event's bytes as received.
 */
#include "route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "json_fast.h"
#include "progress.h"

/* Set once before routing starts (threads only read it). */
static bool jansson_reader_only = false;

void
route_use_jansson_reader(bool jansson_only)
{
	jansson_reader_only = jansson_only;
}

/*
 * The message key for a valid event: its wiki name ("enwiki"). Returns the length, 0
 * when the event has no string wiki (then the message has no key).
 */
static size_t
route_key(const json_t *event, const char **key)
{
	const json_t *wiki = json_object_get(event, "wiki");

	if (!json_is_string(wiki) || json_string_length(wiki) == 0)
	{
		*key = NULL;
		return 0;
	}
	*key = json_string_value(wiki);
	return json_string_length(wiki);
}

void
route_check(const char *data, size_t len, route_decision *d)
{
	json_t	   *event;
	json_error_t error;
	const char *key = NULL;
	size_t		keylen;

	memset(d, 0, sizeof(*d));
	if (data == NULL)
		return;					/* too large to keep: route_deliver dead-letters it */

	/*
	 * Parsed once here, then checked as a value. The fast reader builds the value
	 * json_loadb would build, about six times faster, or declines; jansson parses what it
	 * declines, with the contract's own flags, so every verdict and not_json message is
	 * jansson's.
	 */
	event = jansson_reader_only ? NULL : jf_load_object(data, len);
	if (event == NULL && len > 0)
		event = json_loadb(data, len, JSON_DECODE_ANY, &error);
	if (event == NULL)
		rc_validate(data, len, &d->verdict);	/* not_json, with its message */
	else
		rc_validate_value(event, &d->verdict);

	if (d->verdict.valid && !d->verdict.canary && (keylen = route_key(event, &key)) > 0)
	{
		/* The key outlives the document, which goes now. */
		d->key = malloc(keylen);
		if (d->key != NULL)
		{
			memcpy(d->key, key, keylen);
			d->keylen = keylen;
		}
		else
			d->out_of_memory = true;
	}
	json_decref(event);
}

void
route_release(route_decision *d)
{
	free(d->key);
	d->key = NULL;
	d->keylen = 0;
}

bool
route_deliver(kafka_out *k, producer_counts *counts, const char *data, size_t len,
			  const char *sse_id, route_decision *d)
{
	dlq_info	dlq = {NULL, sse_id};
	bool		ok;

	progress_tick(counts);
	if (data == NULL)
	{
		dlq.reason = "too_large";
		return kout_publish(k, NULL, 0, NULL, 0, &dlq);
	}
	if (d->out_of_memory)
	{
		fprintf(stderr, "lakehouse-producer: out of memory routing an event\n");
		return false;
	}
	if (d->verdict.canary)
	{
		/* Wikimedia's monitoring events: never data, valid or not. */
		counts->canary++;
		ok = true;
	}
	else if (!d->verdict.valid)
	{
		dlq.reason = d->verdict.reason;
		ok = kout_publish(k, NULL, 0, data, len, &dlq);
	}
	else
		ok = kout_publish(k, d->key, d->keylen, data, len, NULL);
	route_release(d);
	return ok;
}

bool
route_event(kafka_out *k, producer_counts *counts,
			const char *data, size_t len, const char *sse_id)
{
	route_decision d;

	route_check(data, len, &d);
	return route_deliver(k, counts, data, len, sse_id, &d);
}

/* ---- the same through validation threads (ordered_pool.c) ---- */

static void
pool_check(const char *data, size_t len, void *result)
{
	route_check(data, len, result);
}

static bool
pool_deliver(void *arg, const char *data, size_t len, const char *label, void *result)
{
	route_target *t = arg;

	return route_deliver(t->k, t->counts, data, len, label, result);
}

static void
pool_release(void *result)
{
	route_release(result);
}

ordered_pool *
route_pool_start(route_target *t, int threads, char *err, size_t errlen)
{
	/* jansson seeds its hash function on first use; do it before there are threads. */
	json_object_seed(0);
	return pool_start(threads, ROUTE_POOL_SLOTS, sizeof(route_decision),
					  pool_check, pool_deliver, pool_release, t, err, errlen);
}
