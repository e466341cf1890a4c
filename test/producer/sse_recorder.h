/*
 * sse_recorder.h: test helper that runs the SSE parser over a byte string, cut into
 * chunks at chosen positions, and keeps a copy of every event it dispatched, so tests
 * can compare what different chunkings produce.
 */
#ifndef LAKEHOUSE_TEST_SSE_RECORDER_H
#define LAKEHOUSE_TEST_SSE_RECORDER_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sse.h"

#define REC_MAX_EVENTS 32
#define REC_TEXT_MAX 512

typedef struct rec_event
{
	char		type[REC_TEXT_MAX];
	bool		has_id;
	char		id[REC_TEXT_MAX];
	char		last_id[REC_TEXT_MAX];
	bool		has_data;
	char		data[REC_TEXT_MAX];
	size_t		data_len;
	bool		oversized;
	size_t		frame_bytes;
} rec_event;

typedef struct recorder
{
	rec_event	ev[REC_MAX_EVENTS];
	int			n;
	int			feed_rc;		/* first nonzero sse_feed result */
	size_t		discarded;		/* sse_finish result */
	long long	retry_ms;
	char		last_id[REC_TEXT_MAX];
} recorder;

static inline void
rec_copy(char *dst, const char *src, size_t len)
{
	if (len >= REC_TEXT_MAX)
		len = REC_TEXT_MAX - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

static inline int
rec_on_event(const sse_event *e, void *arg)
{
	recorder   *r = arg;
	rec_event  *out;

	if (r->n >= REC_MAX_EVENTS)
		return 99;
	out = &r->ev[r->n++];
	memset(out, 0, sizeof(*out));
	rec_copy(out->type, e->type, strlen(e->type));
	out->has_id = e->id != NULL;
	if (e->id)
		rec_copy(out->id, e->id, strlen(e->id));
	rec_copy(out->last_id, e->last_id, strlen(e->last_id));
	out->has_data = e->data != NULL;
	if (e->data)
		rec_copy(out->data, e->data, e->data_len);
	out->data_len = e->data_len;
	out->oversized = e->oversized;
	out->frame_bytes = e->frame_bytes;
	return 0;
}

/*
 * Parses len bytes cut at the given ascending positions (nsplits of them), then
 * finishes the stream. max 0 means the parser's default bound.
 */
static inline void
rec_parse(recorder *r, const char *bytes, size_t len, size_t max,
		  const size_t *splits, int nsplits)
{
	sse_parser	p;
	size_t		from = 0;
	int			i;

	memset(r, 0, sizeof(*r));
	sse_init(&p, max, rec_on_event, r);
	for (i = 0; i <= nsplits; i++)
	{
		size_t		to = (i < nsplits) ? splits[i] : len;
		int			rc = sse_feed(&p, bytes + from, to - from);

		if (rc != 0 && r->feed_rc == 0)
			r->feed_rc = rc;
		from = to;
	}
	r->discarded = sse_finish(&p);
	r->retry_ms = sse_retry_ms(&p);
	rec_copy(r->last_id, sse_last_id(&p), strlen(sse_last_id(&p)));
	sse_free(&p);
}

static inline void
rec_parse_whole(recorder *r, const char *bytes, size_t len, size_t max)
{
	rec_parse(r, bytes, len, max, NULL, 0);
}

/* Same events in the same order, and the same end state. */
static inline bool
rec_same(const recorder *a, const recorder *b)
{
	int			i;

	if (a->n != b->n || a->discarded != b->discarded || a->retry_ms != b->retry_ms ||
		strcmp(a->last_id, b->last_id) != 0)
		return false;
	for (i = 0; i < a->n; i++)
	{
		const rec_event *x = &a->ev[i];
		const rec_event *y = &b->ev[i];

		if (strcmp(x->type, y->type) != 0 || x->has_id != y->has_id ||
			strcmp(x->id, y->id) != 0 || strcmp(x->last_id, y->last_id) != 0 ||
			x->has_data != y->has_data || x->data_len != y->data_len ||
			memcmp(x->data, y->data, x->data_len < REC_TEXT_MAX ? x->data_len : REC_TEXT_MAX) != 0 ||
			x->oversized != y->oversized || x->frame_bytes != y->frame_bytes)
			return false;
	}
	return true;
}

#endif							/* LAKEHOUSE_TEST_SSE_RECORDER_H */
