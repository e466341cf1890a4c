/*
 * live.c: --url mode. One libcurl connection at a time to the SSE endpoint; the body
 * goes through the SSE parser, each `message` frame to route_event.
 *
 * Reconnects: EventStreams closes every connection after 15 minutes and sends no
 * heartbeat, so a disconnect, a read timeout (no byte for --read-timeout seconds),
 * HTTP 429 and 5xx all lead to a new connection with Last-Event-ID set to the last
 * id seen, after an exponential backoff (doubling from --backoff-min-ms up to
 * --backoff-max-ms, back to the minimum once a connection delivered events; a
 * Retry-After header is honoured when longer). Any other 4xx is permanent (bad stream
 * name, bad Last-Event-ID, 403 for a missing User-Agent) and ends the run.
 *
 * State: the last id is saved only once Kafka acknowledged every message before it,
 * so a crash can resend events (silver dedups on meta.id) but never skip one. A FIFO
 * of checkpoints (the sequence number after an event's message, and its SSE id) is
 * popped as acknowledgements arrive.
 */
#include "console.h"
#include "live.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "route.h"
#include "sse.h"
#include "state.h"

/* Header names, Retry-After parsing and CURLOPT_XFERINFOFUNCTION need 7.32. */
_Static_assert(LIBCURL_VERSION_NUM >= 0x072000, "lakehouse-producer needs libcurl 7.32 or newer");

/* At most one state file write per second: each one is an fsync. */
#define STATE_SAVE_INTERVAL_MS 1000
#define ERROR_BODY_MAX 300

typedef struct checkpoint
{
	unsigned long long seq_end; /* every message below this seq belongs to the event or before */
	char	   *id;
	struct checkpoint *next;
} checkpoint;

typedef struct live
{
	const producer_options *o;
	kafka_out  *k;
	producer_counts *c;
	CURL	   *curl;
	sse_parser	parser;
	FILE	   *record;

	checkpoint *head;
	checkpoint *tail;
	char	   *safe_id;		/* newest id with everything before it acknowledged */
	char	   *saved_id;		/* what the state file holds */

	/*
	 * The id to resume from: the last id of the last frame actually dispatched. The
	 * parser's own last id also takes the id line of a frame the disconnect tore in
	 * half, and resuming after that would skip the torn event.
	 */
	char	   *resume_id;
	long long	last_save_ms;

	long		status;			/* HTTP status of the current response, 0 before */
	long		retry_after_s;	/* from a Retry-After header, -1 if none */
	char		error_body[ERROR_BODY_MAX + 1];
	size_t		error_len;
	unsigned long long conn_events; /* events on the current connection */
	bool		limit_reached;
	bool		fatal;
} live;

static long long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Moves safe_id forward over acknowledged checkpoints; saves it when due or forced. */
static void
save_state(live *l, bool force)
{
	unsigned long long acked = kout_acked_below(l->k);
	char		err[512];

	while (l->head && l->head->seq_end <= acked)
	{
		checkpoint *cp = l->head;

		free(l->safe_id);
		l->safe_id = cp->id;
		l->head = cp->next;
		if (l->head == NULL)
			l->tail = NULL;
		free(cp);
	}
	if (l->o->state_file == NULL || l->safe_id == NULL ||
		(l->saved_id && strcmp(l->saved_id, l->safe_id) == 0))
		return;
	if (!force && mono_ms() - l->last_save_ms < STATE_SAVE_INTERVAL_MS)
		return;
	if (state_save(l->o->state_file, l->safe_id, err, sizeof(err)) != 0)
	{
		fprintf(stderr, "lakehouse-producer: %s\n", err);
		return;
	}
	l->last_save_ms = mono_ms();
	free(l->saved_id);
	l->saved_id = strdup(l->safe_id);
}

static void
push_checkpoint(live *l, const char *id)
{
	checkpoint *cp = malloc(sizeof(*cp));

	cp->seq_end = kout_next_seq(l->k);
	cp->id = strdup(id);
	cp->next = NULL;
	if (l->tail)
		l->tail->next = cp;
	else
		l->head = cp;
	l->tail = cp;
}

/* --record: the frame as an SSE client would have seen it, one data line per line. */
static void
record_frame(live *l, const sse_event *e)
{
	const char *p = e->data;
	const char *end = e->data + e->data_len;

	if (strcmp(e->type, "message") != 0)
		fprintf(l->record, "event: %s\n", e->type);
	if (e->id)
		fprintf(l->record, "id: %s\n", e->id);
	for (;;)
	{
		const char *nl = memchr(p, '\n', (size_t) (end - p));
		size_t		n = nl ? (size_t) (nl - p) : (size_t) (end - p);

		fputs("data: ", l->record);
		fwrite(p, 1, n, l->record);
		fputc('\n', l->record);
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	fputc('\n', l->record);
}

static int
on_event(const sse_event *e, void *arg)
{
	live	   *l = arg;

	if (l->resume_id == NULL || strcmp(l->resume_id, e->last_id) != 0)
	{
		free(l->resume_id);
		l->resume_id = strdup(e->last_id);
	}

	if (strcmp(e->type, "error") == 0)
	{
		/* The server's own error after the stream started; it will close or go on. */
		fprintf(stderr, "lakehouse-producer: the stream sent an error: %.*s\n",
				(int) (e->data_len > 300 ? 300 : e->data_len), e->data ? e->data : "");
		return 0;
	}
	if (strcmp(e->type, "message") != 0)
		return 0;
	l->c->events++;
	l->conn_events++;
	if (l->record && e->data)
		record_frame(l, e);
	if (!route_event(l->k, l->c, e->data, e->data_len, e->last_id[0] ? e->last_id : NULL))
	{
		l->fatal = true;
		return 1;
	}
	if (e->last_id[0])
		push_checkpoint(l, e->last_id);
	if (l->o->limit >= 0 && (long long) l->c->events >= l->o->limit)
	{
		l->limit_reached = true;
		return 1;
	}
	return 0;
}

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
	live	   *l = arg;
	size_t		n = size * nmemb;
	int			rc;

	if (l->status == 0)
		curl_easy_getinfo(l->curl, CURLINFO_RESPONSE_CODE, &l->status);
	if (l->status != 200)
	{
		/* Keep the start of an error body for the message. */
		size_t		take = n < ERROR_BODY_MAX - l->error_len ? n : ERROR_BODY_MAX - l->error_len;

		memcpy(l->error_body + l->error_len, ptr, take);
		l->error_len += take;
		l->error_body[l->error_len] = '\0';
		return n;
	}
	rc = sse_feed(&l->parser, ptr, n);
	if (rc == SSE_ERR_NOMEM)
	{
		fprintf(stderr, "lakehouse-producer: out of memory parsing the stream\n");
		l->fatal = true;
	}
	if (rc != 0)
		return 0;				/* makes curl stop with CURLE_WRITE_ERROR */
	if (producer_stop)
		return 0;
	return n;
}

static size_t
on_header(char *ptr, size_t size, size_t nmemb, void *arg)
{
	live	   *l = arg;
	size_t		n = size * nmemb;

	if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0)
	{
		/* A new response (after a redirect, say): forget the previous one's headers. */
		l->retry_after_s = -1;
		l->status = 0;
	}
	else if (n > 12 && strncasecmp(ptr, "Retry-After:", 12) == 0)
	{
		char	   *end;
		long		v = strtol(ptr + 12, &end, 10);

		if (end != ptr + 12 && v >= 0)
			l->retry_after_s = v;
	}
	return n;
}

/* Called by curl about once a second even when nothing arrives. */
static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	live	   *l = arg;

	(void) dltotal;
	(void) dlnow;
	(void) ultotal;
	(void) ulnow;
	kout_poll(l->k, 0);
	save_state(l, false);
	return producer_stop ? 1 : 0;
}

/* One connection. Returns the curl result; l->status holds the HTTP status. */
static CURLcode
connect_once(live *l, struct curl_slist **headers)
{
	const char *last = l->resume_id ? l->resume_id : "";
	struct curl_slist *h = NULL;
	char	   *line = NULL;

	h = curl_slist_append(h, "Accept: text/event-stream");
	h = curl_slist_append(h, "Cache-Control: no-cache");
	if (last[0])
	{
		size_t		len = strlen(last) + 32;

		line = malloc(len);
		snprintf(line, len, "Last-Event-ID: %s", last);
		h = curl_slist_append(h, line);
		free(line);
	}
	*headers = h;
	l->status = 0;
	l->retry_after_s = -1;
	l->error_len = 0;
	l->error_body[0] = '\0';
	l->conn_events = 0;

	curl_easy_reset(l->curl);
	curl_easy_setopt(l->curl, CURLOPT_URL, l->o->url);
	curl_easy_setopt(l->curl, CURLOPT_USERAGENT, l->o->user_agent);
	curl_easy_setopt(l->curl, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(l->curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(l->curl, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(l->curl, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(l->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(l->curl, CURLOPT_CONNECTTIMEOUT, 30L);
	/* No heartbeats on this stream: silence for this long means a dead connection. */
	curl_easy_setopt(l->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(l->curl, CURLOPT_LOW_SPEED_TIME, (long) l->o->read_timeout_s);
	curl_easy_setopt(l->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(l->curl, CURLOPT_WRITEDATA, l);
	curl_easy_setopt(l->curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(l->curl, CURLOPT_HEADERDATA, l);
	curl_easy_setopt(l->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(l->curl, CURLOPT_XFERINFODATA, l);
	curl_easy_setopt(l->curl, CURLOPT_NOPROGRESS, 0L);
	return curl_easy_perform(l->curl);
}

/* Waits ms, serving Kafka and the state file; a signal ends the wait. */
static void
backoff_sleep(live *l, long ms)
{
	long long	until = mono_ms() + ms;

	while (!producer_stop && mono_ms() < until)
	{
		kout_poll(l->k, 100);
		save_state(l, false);
	}
}

int
live_run(const producer_options *o, kafka_out *k, producer_counts *c)
{
	live		l;
	long		backoff = o->backoff_min_ms;
	int			exit_code = 0;
	char		err[512];

	memset(&l, 0, sizeof(l));
	l.o = o;
	l.k = k;
	l.c = c;
	sse_init(&l.parser, 0, on_event, &l);

	if (o->state_file)
	{
		int			missing;
		char	   *id = state_load(o->state_file, &missing, err, sizeof(err));

		if (id == NULL && !missing)
		{
			fprintf(stderr, "lakehouse-producer: %s\n", err);
			sse_free(&l.parser);
			return 1;
		}
		if (id && !sse_set_last_id(&l.parser, id, strlen(id)))
		{
			fprintf(stderr, "lakehouse-producer: the id in %s cannot be used\n", o->state_file);
			free(id);
			sse_free(&l.parser);
			return 1;
		}
		if (id)
		{
			say(o, "resuming after the id saved in %s", o->state_file);
			l.resume_id = strdup(id);
		}
		l.saved_id = id;
	}
	if (o->record_file && (l.record = fopen(o->record_file, "wb")) == NULL)
	{
		perror(o->record_file);
		sse_free(&l.parser);
		return 1;
	}

	curl_global_init(CURL_GLOBAL_DEFAULT);
	l.curl = curl_easy_init();
	while (!producer_stop && !l.limit_reached && !l.fatal)
	{
		struct curl_slist *headers = NULL;
		CURLcode	res = connect_once(&l, &headers);
		size_t		torn;
		long		wait;

		curl_slist_free_all(headers);
		torn = sse_finish(&l.parser);	/* a frame cut by the disconnect is not an event */
		if (l.resume_id)
			sse_set_last_id(&l.parser, l.resume_id, strlen(l.resume_id));
		if (l.status == 0)
			curl_easy_getinfo(l.curl, CURLINFO_RESPONSE_CODE, &l.status);
		if (producer_stop || l.limit_reached || l.fatal)
			break;

		if (l.status == 200)
		{
			say(o, "stream ended after %llu event(s) (%s%s); reconnecting",
				l.conn_events, res == CURLE_OK ? "closed by the server" : curl_easy_strerror(res),
				torn ? ", a partial frame dropped" : "");
			if (l.conn_events > 0)
				backoff = o->backoff_min_ms;
		}
		else if (l.status == 429 || l.status >= 500 || l.status == 0)
		{
			if (l.status == 0)
				fprintf(stderr, "lakehouse-producer: cannot connect to %s: %s\n", o->url,
						curl_easy_strerror(res));
			else
				fprintf(stderr, "lakehouse-producer: %s answered HTTP %ld%s; retrying\n", o->url,
						l.status, l.status == 429 ? " (too many requests)" : "");
		}
		else
		{
			fprintf(stderr, "lakehouse-producer: %s answered HTTP %ld, which retrying cannot "
					"fix%s%s\n", o->url, l.status, l.error_len ? ": " : "", l.error_body);
			if (l.status == 403)
				fprintf(stderr, "lakehouse-producer: Wikimedia refuses requests without a "
						"descriptive User-Agent with contact details: see --user-agent\n");
			exit_code = 1;
			break;
		}
		wait = backoff;
		if (l.retry_after_s >= 0 && l.retry_after_s * 1000 > wait)
			wait = l.retry_after_s * 1000 > o->backoff_max_ms ? o->backoff_max_ms : l.retry_after_s * 1000;
		say(o, "reconnecting in %ld ms%s", wait, l.resume_id && l.resume_id[0] ? " with Last-Event-ID" : "");
		backoff_sleep(&l, wait);
		backoff = backoff * 2 > o->backoff_max_ms ? o->backoff_max_ms : backoff * 2;
		c->reconnects++;
	}
	curl_easy_cleanup(l.curl);
	curl_global_cleanup();

	if (l.fatal)
		exit_code = 1;
	/* Stop reading, wait for every acknowledgement, then save how far Kafka has it all. */
	say(o, "waiting for Kafka to acknowledge every event");
	if (!kout_flush(k))
		exit_code = 1;
	save_state(&l, true);
	if (l.record && fclose(l.record) != 0)
	{
		perror(o->record_file);
		exit_code = 1;
	}
	while (l.head)
	{
		checkpoint *cp = l.head;

		l.head = cp->next;
		free(cp->id);
		free(cp);
	}
	free(l.safe_id);
	free(l.saved_id);
	free(l.resume_id);
	sse_free(&l.parser);
	return exit_code;
}
