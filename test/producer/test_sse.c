/*
 * test_sse.c: unit tests for the SSE parser (src/producer/sse.c), printed as TAP.
 *
 * The central check cuts one stream that exercises every rule at every pair of byte
 * positions and demands the same events as parsing it whole: libcurl may hand over a
 * chunk ending anywhere, including between the CR and LF of one line end.
 */
#include <stdlib.h>

#include "sse_recorder.h"
#include "tap.h"

#define S(lit) (lit), (sizeof(lit) - 1)

/* One stream touching every rule; the expected events are spelled out below. */
static const char mixed[] =
	"\xEF\xBB\xBF:ok\r\n\r\n"		/* BOM, the server's opening comment */
	"event: message\r\nid: [{\"p\":0}]\r\ndata: {\"a\":1}\r\n\r\n"
	": comment\rdata: line1\rdata:line2\r\r"	/* lone CR, no space after colon */
	"data\nid\n\n"					/* fields without a colon */
	"retry: 250\nevent: error\ndata:  two spaces\n\n"
	"id: 7\n\n"						/* id only: no event, but the last id moves */
	"data: after\n\n"
	"id: 8\ndata: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"
	"data: small\n\n"				/* oversized for a bound of 64 */
	"data: ok again\r\n\r\n"
	"data: tail";					/* unfinished, discarded by sse_finish */

#define MIXED_MAX 64

static void
check_event(const recorder *r, int i, const char *type, const char *id,
			const char *last_id, const char *data, const char *what)
{
	char		name[128];
	const rec_event *e = &r->ev[i];

	snprintf(name, sizeof(name), "%s: type", what);
	tap_is_str(e->type, type, name);
	snprintf(name, sizeof(name), "%s: own id", what);
	tap_is_str(e->has_id ? e->id : NULL, id, name);
	snprintf(name, sizeof(name), "%s: last id", what);
	tap_is_str(e->last_id, last_id, name);
	snprintf(name, sizeof(name), "%s: data", what);
	tap_is_str(e->has_data ? e->data : NULL, data, name);
}

static void
test_mixed_whole(void)
{
	recorder	r;

	rec_parse_whole(&r, S(mixed), MIXED_MAX);
	if (!tap_is_int(r.n, 7, "mixed stream: 7 events"))
		return;
	check_event(&r, 0, "message", "[{\"p\":0}]", "[{\"p\":0}]", "{\"a\":1}", "CRLF frame");
	check_event(&r, 1, "message", NULL, "[{\"p\":0}]", "line1\nline2", "lone CR frame");
	check_event(&r, 2, "message", "", "", "", "bare data and id fields");
	check_event(&r, 3, "error", NULL, "", " two spaces", "event type, one space stripped");
	check_event(&r, 4, "message", NULL, "7", "after", "id from a frame without data");
	check_event(&r, 5, "message", "8", "8", NULL, "oversized frame");
	tap_ok(r.ev[5].oversized, "oversized frame is flagged");
	tap_ok(!r.ev[4].oversized && !r.ev[6].oversized, "neighbours are not flagged");
	check_event(&r, 6, "message", NULL, "8", "ok again", "frame after the oversized one");
	tap_is_int((long long) r.discarded, 10, "finish discards the unfinished frame");
	tap_is_int(r.retry_ms, 250, "retry field read");
	tap_is_str(r.last_id, "8", "last id at the end");
}

static void
test_mixed_splits(void)
{
	recorder	whole;
	recorder	cut;
	size_t		len = sizeof(mixed) - 1;
	size_t		splits[2];
	size_t		i;
	size_t		j;
	long		bad = 0;
	long		runs = 0;

	rec_parse_whole(&whole, S(mixed), MIXED_MAX);
	for (i = 0; i <= len; i++)
	{
		splits[0] = i;
		rec_parse(&cut, mixed, len, MIXED_MAX, splits, 1);
		runs++;
		if (!rec_same(&whole, &cut) && bad++ == 0)
			tap_diag("differs when cut at %zu", i);
		for (j = i; j <= len; j++)
		{
			splits[1] = j;
			rec_parse(&cut, mixed, len, MIXED_MAX, splits, 2);
			runs++;
			if (!rec_same(&whole, &cut) && bad++ == 0)
				tap_diag("differs when cut at %zu and %zu", i, j);
		}
	}
	tap_ok(bad == 0, "same events for every cut and pair of cuts (%ld runs)", runs);
}

static void
test_byte_at_a_time(void)
{
	recorder	whole;
	recorder	cut;
	size_t		len = sizeof(mixed) - 1;
	size_t	   *splits = malloc(len * sizeof(size_t));
	size_t		i;

	for (i = 0; i < len; i++)
		splits[i] = i;
	rec_parse_whole(&whole, S(mixed), MIXED_MAX);
	rec_parse(&cut, mixed, len, MIXED_MAX, splits, (int) len);
	tap_ok(rec_same(&whole, &cut), "same events fed one byte at a time");
	free(splits);
}

static void
test_line_endings(void)
{
	recorder	lf;
	recorder	crlf;
	recorder	cr;
	size_t		cut_in_crlf[] = {8};

	rec_parse_whole(&lf, S("id: 1\ndata: a\ndata: b\n\ndata: c\n\n"), 0);
	rec_parse_whole(&crlf, S("id: 1\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n"), 0);
	rec_parse_whole(&cr, S("id: 1\rdata: a\rdata: b\r\rdata: c\r\r"), 0);
	tap_ok(lf.n == 2 && strcmp(lf.ev[0].data, "a\nb") == 0 && strcmp(lf.ev[1].data, "c") == 0,
		   "LF: two events, data lines joined by LF");
	tap_ok(rec_same(&lf, &crlf), "CRLF gives the same events as LF");
	tap_ok(rec_same(&lf, &cr), "lone CR gives the same events as LF");

	/* The LF of a CRLF arriving in the next chunk must not count as a blank line. */
	rec_parse(&crlf, S("data: a\r\ndata: b\r\n\r\n"), 0, cut_in_crlf, 1);
	tap_ok(crlf.n == 1 && strcmp(crlf.ev[0].data, "a\nb") == 0, "CRLF split between chunks");
	rec_parse_whole(&cr, S("data: a\r\n\rdata: b\n\n"), 0);
	tap_ok(cr.n == 2 && strcmp(cr.ev[1].data, "b") == 0, "CRLF then lone CR is two line ends");
}

static void
test_fields(void)
{
	recorder	r;

	rec_parse_whole(&r, S("data: YHOO\ndata: +2\ndata: 10\n\n"), 0);
	tap_ok(r.n == 1 && strcmp(r.ev[0].data, "YHOO\n+2\n10") == 0, "multi-line data");
	rec_parse_whole(&r, S("data:test\n\ndata: test\n\ndata:  test\n\n"), 0);
	tap_ok(r.n == 3 && strcmp(r.ev[0].data, "test") == 0 && strcmp(r.ev[1].data, "test") == 0 &&
		   strcmp(r.ev[2].data, " test") == 0, "only one space after the colon is stripped");
	rec_parse_whole(&r, S("data\n\ndata\ndata\n\ndata:"), 0);
	tap_ok(r.n == 2 && r.ev[0].data_len == 0 && strcmp(r.ev[1].data, "\n") == 0,
		   "empty data lines dispatch \"\" and \"\\n\"; an unfinished frame does not");
	rec_parse_whole(&r, S("\n\nevent: x\nid: 1\n\n\n"), 0);
	tap_ok(r.n == 0, "frames without data lines are not dispatched");
	tap_is_str(r.last_id, "1", "but their id still becomes the last id");
	rec_parse_whole(&r, S("event: x\n\ndata: y\n\n"), 0);
	tap_ok(r.n == 1 && strcmp(r.ev[0].type, "message") == 0,
		   "event type does not leak into the next frame");
	rec_parse_whole(&r, S("event\ndata: y\n\n"), 0);
	tap_ok(r.n == 1 && strcmp(r.ev[0].type, "message") == 0, "empty event type means message");
	rec_parse_whole(&r, S("foo: bar\nData: no\ndata : no\ndata: yes\n\n"), 0);
	tap_ok(r.n == 1 && strcmp(r.ev[0].data, "yes") == 0,
		   "unknown fields are ignored, names are exact");
	rec_parse_whole(&r, S(":\n: note\ndata: a\n:another\ndata: b\n\n"), 0);
	tap_ok(r.n == 1 && strcmp(r.ev[0].data, "a\nb") == 0, "comment lines are skipped");
	rec_parse_whole(&r, S("data: a\0b\n\n"), 0);
	tap_ok(r.n == 1 && r.ev[0].data_len == 3 && memcmp(r.ev[0].data, "a\0b", 3) == 0,
		   "NUL bytes in data pass through with the length");
}

static void
test_ids(void)
{
	recorder	r;

	rec_parse_whole(&r, S("id: a\ndata: 1\n\ndata: 2\n\nid: b\ndata: 3\n\n"), 0);
	if (tap_is_int(r.n, 3, "three frames"))
	{
		check_event(&r, 0, "message", "a", "a", "1", "frame with id");
		check_event(&r, 1, "message", NULL, "a", "2", "frame without id keeps the last id");
		check_event(&r, 2, "message", "b", "b", "3", "new id replaces it");
	}
	rec_parse_whole(&r, S("id: a\ndata: 1\n\nid\ndata: 2\n\n"), 0);
	tap_ok(r.n == 2 && r.ev[1].has_id && r.ev[1].id[0] == '\0' && r.last_id[0] == '\0',
		   "an empty id resets the last id to \"\"");
	rec_parse_whole(&r, S("id: a\ndata: 1\n\nid: b\0c\ndata: 2\n\n"), 0);
	tap_ok(r.n == 2 && !r.ev[1].has_id && strcmp(r.ev[1].last_id, "a") == 0,
		   "an id containing NUL is ignored");
	rec_parse_whole(&r, S("id: 1\nid: 2\ndata: x\n\n"), 0);
	tap_ok(r.n == 1 && strcmp(r.ev[0].id, "2") == 0, "the frame's last id line wins");
}

static void
test_retry(void)
{
	recorder	r;

	rec_parse_whole(&r, S("data: x\n\n"), 0);
	tap_is_int(r.retry_ms, -1, "no retry field: -1");
	rec_parse_whole(&r, S("retry: 3000\n\n"), 0);
	tap_ok(r.n == 0 && r.retry_ms == 3000, "retry sets the delay and dispatches nothing");
	rec_parse_whole(&r, S("retry: 3000\nretry: 3s\nretry:\nretry: -1\nretry: 1 \n\n"), 0);
	tap_is_int(r.retry_ms, 3000, "retry values that are not all digits are ignored");
	rec_parse_whole(&r, S("retry: 5\nretry: 99999999999999999999999\n\n"), 0);
	tap_is_int(r.retry_ms, 5, "a retry value that overflows is ignored");
}

static void
test_oversized(void)
{
	recorder	r;
	sse_parser	p;
	char		big[4096];
	const char	exact[] = "id: 1\ndata: 0123456789\n\n";	/* field lines take 6 + 17 */

	rec_parse_whole(&r, S("data: 0123456789\ndata: 0123456789\ndata: 0123456789\n"
						  "id: late\n\ndata: fine\n\n"), 32);
	tap_ok(r.n == 2 && r.ev[0].oversized && !r.ev[0].has_data && r.ev[0].frame_bytes == 60,
		   "many small data lines past the bound: one oversized report");
	tap_is_str(r.ev[0].id, "late", "id lines after the bound still count");
	tap_ok(!r.ev[1].oversized && strcmp(r.ev[1].data, "fine") == 0, "the next frame is fine");

	rec_parse_whole(&r, exact, sizeof(exact) - 1, 23);
	tap_ok(r.n == 1 && !r.ev[0].oversized, "a frame exactly at the bound passes");
	rec_parse_whole(&r, exact, sizeof(exact) - 1, 22);
	tap_ok(r.n == 1 && r.ev[0].oversized, "one byte more is oversized");

	rec_parse_whole(&r, S(": a comment far longer than the thirty-two byte bound\ndata: x\n\n"), 32);
	tap_ok(r.n == 1 && !r.ev[0].oversized, "comment lines do not count against the bound");

	/* Memory stays bounded while one line runs on and on. */
	memset(big, 'x', sizeof(big));
	memcpy(big, "data: ", 6);
	sse_init(&p, 32, rec_on_event, &r);
	memset(&r, 0, sizeof(r));
	for (int i = 0; i < 256; i++)
		sse_feed(&p, big, sizeof(big));
	tap_ok(p.line.cap <= 128 && p.data.cap <= 128, "buffers stay bounded on a 1 MiB line");
	sse_feed(&p, S("\n\n"));
	tap_ok(r.n == 1 && r.ev[0].oversized && r.ev[0].frame_bytes == 256 * 4096 + 1,
		   "the 1 MiB line is reported once, with its size");
	sse_free(&p);
}

static void
test_bom(void)
{
	recorder	a;
	recorder	b;
	size_t		cuts[] = {1, 2};

	rec_parse(&a, S("\xEF\xBB\xBF" "data: x\n\n"), 0, cuts, 2);
	tap_ok(a.n == 1 && strcmp(a.ev[0].data, "x") == 0, "a BOM split over chunks is skipped");
	rec_parse_whole(&a, S("\xEF\xBB\xBF\xEF\xBB\xBF" "data: x\n\n"), 0);
	tap_ok(a.n == 0, "only one BOM is skipped (the second one is part of a field name)");
	rec_parse(&b, S("\xEF\n" "data: y\n\n"), 0, cuts, 1);
	tap_ok(b.n == 1 && strcmp(b.ev[0].data, "y") == 0, "bytes held back as a BOM are parsed");
}

static int
stop_at_first(const sse_event *e, void *arg)
{
	(void) e;
	(*(int *) arg)++;
	return 7;
}

static void
test_finish_and_stop(void)
{
	sse_parser	p;
	recorder	r;
	int			calls = 0;

	sse_init(&p, 0, rec_on_event, &r);
	memset(&r, 0, sizeof(r));
	tap_is_str(sse_last_id(&p), "", "no last id at first");
	tap_ok(sse_set_last_id(&p, S("[{\"offset\":5}]")), "last id restored from a state file");
	tap_ok(!sse_set_last_id(&p, S("a\0b")), "an id with NUL is refused");
	sse_feed(&p, S("retry: 10\ndata: cut off"));
	tap_is_int((long long) sse_finish(&p), 23, "finish reports the discarded bytes");
	sse_feed(&p, S("\xEF\xBB\xBF" "data: next connection\n\n"));
	tap_ok(r.n == 1 && strcmp(r.ev[0].data, "next connection") == 0,
		   "after finish a new stream starts clean, BOM and all");
	tap_ok(strcmp(r.ev[0].last_id, "[{\"offset\":5}]") == 0 && sse_retry_ms(&p) == 10,
		   "the last id and retry survive finish");
	sse_free(&p);

	/* A disconnect mid-frame: the cut-off frame's id goes with it. */
	sse_init(&p, 0, rec_on_event, &r);
	memset(&r, 0, sizeof(r));
	sse_feed(&p, S("id: 1\ndata: a\n\nid: 2\ndata: b"));
	tap_is_str(sse_last_id(&p), "2", "mid-frame the last id is the frame's own (the spec's buffer)");
	sse_finish(&p);
	tap_is_str(sse_last_id(&p), "1", "after finish it is back to the last dispatched id: frame 2 is resent");
	sse_feed(&p, S("id: 3\n\nid: 4\ndata: c"));
	sse_finish(&p);
	tap_is_str(sse_last_id(&p), "3", "an id settles at its blank line even without data, as the rules say");
	sse_feed(&p, S("data: d\n\n"));
	tap_ok(r.n == 2 && strcmp(r.ev[1].data, "d") == 0 && strcmp(r.ev[1].last_id, "3") == 0,
		   "the next connection's events carry the settled id");
	sse_feed(&p, S("id: 5"));
	sse_finish(&p);
	tap_is_str(sse_last_id(&p), "3", "an id line cut off before its terminator is forgotten too");
	sse_free(&p);

	sse_init(&p, 0, stop_at_first, &calls);
	tap_is_int(sse_feed(&p, S("data: 1\n\ndata: 2\n\n")), 7, "a callback's nonzero return stops feed");
	tap_is_int(calls, 1, "no event after the stop");
	sse_free(&p);
}

static void
test_wikimedia_frame(void)
{
	recorder	r;

	rec_parse_whole(&r, S(":ok\n\nevent: message\nid: [{\"topic\":\"eqiad.mediawiki.recentchange\","
						  "\"partition\":0,\"offset\":-1},{\"topic\":\"codfw.mediawiki.recentchange\","
						  "\"partition\":0,\"timestamp\":1772536525049}]\n"
						  "data: {\"$schema\":\"/mediawiki/recentchange/1.0.0\"}\n\n"), 0);
	tap_ok(r.n == 1 && strcmp(r.ev[0].type, "message") == 0 &&
		   strncmp(r.ev[0].id, "[{\"topic\":\"eqiad", 16) == 0 &&
		   strcmp(r.ev[0].data, "{\"$schema\":\"/mediawiki/recentchange/1.0.0\"}") == 0,
		   "an EventStreams frame as the service sends it");
}

int
main(void)
{
	test_mixed_whole();
	test_mixed_splits();
	test_byte_at_a_time();
	test_line_endings();
	test_fields();
	test_ids();
	test_retry();
	test_oversized();
	test_bom();
	test_finish_and_stop();
	test_wikimedia_frame();
	return tap_done();
}
