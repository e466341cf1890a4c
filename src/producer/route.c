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

#include <string.h>

#include "contract.h"
#include "progress.h"

size_t
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

bool
route_event(kafka_out *k, producer_counts *counts,
			const char *data, size_t len, const char *sse_id)
{
	rc_verdict	verdict;
	json_t	   *event;
	json_error_t error;
	dlq_info	dlq = {NULL, sse_id};
	const char *key = NULL;
	size_t		keylen = 0;
	bool		ok;

	progress_tick(counts);
	if (data == NULL)
	{
		dlq.reason = "too_large";
		return kout_publish(k, NULL, 0, NULL, 0, &dlq);
	}

	/* Parsed once here with the contract's own flags, then checked as a value. */
	event = len > 0 ? json_loadb(data, len, JSON_DECODE_ANY, &error) : NULL;
	if (event == NULL)
		rc_validate(data, len, &verdict);	/* not_json, with its message */
	else
		rc_validate_value(event, &verdict);

	if (verdict.canary)
	{
		/* Wikimedia's monitoring events: never data, valid or not. */
		counts->canary++;
		json_decref(event);
		return true;
	}
	if (!verdict.valid)
	{
		dlq.reason = verdict.reason;
		ok = kout_publish(k, NULL, 0, data, len, &dlq);
	}
	else
	{
		keylen = route_key(event, &key);
		ok = kout_publish(k, key, keylen, data, len, NULL);
	}
	json_decref(event);
	return ok;
}
