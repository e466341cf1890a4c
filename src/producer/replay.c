/*
 * replay.c: --file mode. Reads a recording and publishes it, as a live run would have,
 * so tests and the demo get real traffic without the internet.
 *
 * The scenario options shape what is sent, deterministically, so a test can compute
 * what the topic must hold:
 *   --loops N        the file N times, ids rewritten per loop (scenario.h)
 *   --resend-loop K  loop K once more, right after it, with the same ids (a resume)
 *   --violations N   N contract violations spread evenly through the run
 *   --late N --late-minutes M
 *                    at the end, N more events timed M minutes before the newest
 *                    meta.dt of the file (or before now with --restamp)
 *   --restamp        meta.dt and timestamp set to the time of sending
 *   --rate N         N events per second, steady; --limit N stops after N events
 *
 * A pre-pass counts the events and finds the newest time, so violations can be
 * spread over the run and late events placed relative to it.
 */
#include "console.h"
#include "replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json_fast.h"
#include "route.h"
#include "scenario.h"
#include "sse.h"

/* ---- reading a recording -------------------------------------------------------- */

/*
 * An event of the file as a value, for the scenarios that rewrite or copy events. The
 * fast reader builds what json_loadb would, several times faster (this runs on the main
 * thread, once per event sent: at 10,000 events/s jansson's lexer alone took most of a
 * core), or declines, and then jansson decides; --json-reader jansson asks jansson alone.
 */
static json_t *
load_event(const char *data, size_t len, bool jansson_only)
{
	json_t	   *ev = jansson_only ? NULL : jf_load_object(data, len);

	return ev != NULL ? ev : json_loadb(data, len, JSON_DECODE_ANY, NULL);
}

typedef struct sse_reader
{
	replay_fn	fn;
	void	   *arg;
} sse_reader;

static int
on_sse_event(const sse_event *e, void *arg)
{
	sse_reader *r = arg;

	if (strcmp(e->type, "message") != 0)
		return 0;				/* e.g. an `error` frame the server sent */
	return r->fn(e->data, e->data_len, e->last_id[0] ? e->last_id : NULL, r->arg);
}

/* A recorded SSE stream starts with a field or comment line, JSONL with '{'. */
static bool
looks_like_sse(const char *line)
{
	return line[0] == ':' || strncmp(line, "data:", 5) == 0 || strncmp(line, "id:", 3) == 0 ||
		strncmp(line, "event:", 6) == 0 || strncmp(line, "retry:", 6) == 0;
}

int
replay_read(const char *path, replay_fn fn, void *arg, char *err, size_t errlen)
{
	FILE	   *f = fopen(path, "rb");
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		n;
	int			rc = 0;
	bool		sse = false;
	bool		decided = false;
	sse_parser	parser;
	sse_reader	reader = {fn, arg};

	if (f == NULL)
	{
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	sse_init(&parser, 0, on_sse_event, &reader);
	while (rc == 0 && (n = getline(&line, &cap, f)) != -1)
	{
		if (!decided)
		{
			const char *p = line;

			/* A UTF-8 BOM may precede either format. */
			if ((unsigned char) p[0] == 0xEF && (unsigned char) p[1] == 0xBB &&
				(unsigned char) p[2] == 0xBF)
				p += 3;
			if (*p == '\n' || *p == '\r')
				continue;		/* blank lines before the first event */
			sse = looks_like_sse(p);
			decided = true;
		}
		if (sse)
		{
			rc = sse_feed(&parser, line, (size_t) n);
			if (rc == SSE_ERR_NOMEM)
			{
				snprintf(err, errlen, "out of memory reading %s", path);
				rc = -1;
			}
			continue;
		}
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			n--;
		if (n == 0)
			continue;
		rc = fn(line, (size_t) n, NULL, arg);
	}
	if (rc == 0 && ferror(f))
	{
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		rc = -1;
	}
	if (sse && rc == 0 && sse_finish(&parser) > 0)
		fprintf(stderr, "lakehouse-producer: %s ends inside an SSE frame; that frame is "
				"ignored\n", path);
	sse_free(&parser);
	free(line);
	fclose(f);
	return rc;
}

/* ---- the pre-pass ---------------------------------------------------------------- */

typedef struct survey
{
	unsigned long events;
	long long	newest_ms;		/* newest meta.dt among valid events, or -1 */
	json_t	   *bases;			/* array: the first valid events, for violations and late */
	size_t		bases_wanted;	/* 0: no survey at all (the common case) */
	bool		jansson_only;	/* --json-reader jansson */
} survey;

static int
on_survey(const char *data, size_t len, const char *sse_id, void *arg)
{
	survey	   *s = arg;
	json_t	   *ev;
	long long	ms;

	(void) sse_id;
	s->events++;
	/* Parsing is most of the producer's cost: only scenarios that copy events pay for it. */
	if (data == NULL || s->bases_wanted == 0)
		return 0;
	ev = load_event(data, len, s->jansson_only);
	if (ev && scenario_parse_time(json_string_value(json_object_get(json_object_get(ev, "meta"), "dt")), &ms))
	{
		const char *domain = json_string_value(json_object_get(json_object_get(ev, "meta"), "domain"));

		if (ms > s->newest_ms)
			s->newest_ms = ms;
		/* Canaries are dropped whatever they hold, so they make no base. */
		if (json_array_size(s->bases) < s->bases_wanted && domain && strcmp(domain, "canary") != 0)
			json_array_append(s->bases, ev);
	}
	json_decref(ev);
	return 0;
}

/* ---- sending --------------------------------------------------------------------- */

typedef struct replay
{
	const producer_options *o;
	kafka_out  *k;
	producer_counts *c;
	survey		s;
	unsigned	loop;			/* the loop being sent */
	unsigned long position;		/* event position within the file */
	unsigned long long main_total;	/* events of all loops, resend included */
	unsigned long long main_sent;
	long		violations_sent;
	long long	routed;			/* every event handed to route, for --limit and --rate */
	struct timespec start;
	bool		stopped;		/* --limit reached or a signal came */
	bool		fatal;
	ordered_pool *pool;			/* validation threads (--threads), or NULL */
	route_target target;		/* where the pool delivers */
} replay;

/* Sleeps until the next event is due under --rate; a signal cuts the wait short. */
static void
pace(replay *r)
{
	struct timespec due;
	double		at;

	if (r->o->rate <= 0)
		return;
	at = (double) r->routed / r->o->rate;
	due.tv_sec = r->start.tv_sec + (time_t) at;
	due.tv_nsec = r->start.tv_nsec + (long) ((at - (double) (time_t) at) * 1e9);
	if (due.tv_nsec >= 1000000000L)
	{
		due.tv_sec++;
		due.tv_nsec -= 1000000000L;
	}
	for (;;)
	{
		struct timespec now;
		long long	wait_ms;

		clock_gettime(CLOCK_MONOTONIC, &now);
		wait_ms = (long long) (due.tv_sec - now.tv_sec) * 1000 + (due.tv_nsec - now.tv_nsec) / 1000000;
		if (wait_ms <= 0 || producer_stop)
			break;
		/* Serving delivery reports is the wait. */
		kout_poll(r->k, wait_ms > 100 ? 100 : (int) wait_ms);
	}
}

/* Routes one event text; false when the run must end. */
static bool
send_text(replay *r, const char *data, size_t len, const char *sse_id)
{
	if (producer_stop || (r->o->limit >= 0 && r->routed >= r->o->limit))
	{
		r->stopped = true;
		return false;
	}
	pace(r);
	r->c->events++;
	r->routed++;
	if (r->pool ? !pool_submit(r->pool, data, len, sse_id) : !route_event(r->k, r->c, data, len, sse_id))
	{
		r->fatal = true;
		return false;
	}
	return true;
}

/* Violation i is due once this share of the main events has gone out. */
static bool
send_due_violations(replay *r)
{
	while (r->violations_sent < r->o->violations &&
		   r->main_sent >= (unsigned long long) (r->violations_sent + 1) * r->main_total /
		   (unsigned long long) (r->o->violations + 1))
	{
		json_t	   *base = json_array_get(r->s.bases, (size_t) r->violations_sent % json_array_size(r->s.bases));
		char	   *text = scenario_violation(base, r->violations_sent);
		bool		ok = send_text(r, text, strlen(text), NULL);

		free(text);
		if (!ok)
			return false;
		r->violations_sent++;
	}
	return true;
}

/*
 * Sends an event of the file (ev: its value) as the scenario rewrites it: on its text
 * when the layout allows (every other byte as it was), else through the value.
 */
static bool
send_rewritten(replay *r, json_t *ev, const char *data, size_t len, unsigned long position,
			   const char *sse_id)
{
	long		loop = r->o->loops >= 0 ? (long) r->loop : -1;
	long long	now_ms = r->o->restamp ? scenario_now_ms() : -1;
	size_t		text_len;
	char	   *text = scenario_rewrite_text(data, len, loop, position, now_ms, &text_len);
	bool		ok;

	if (text == NULL)
	{
		if (loop >= 0)
			scenario_rewrite_id(ev, r->loop, position);
		if (now_ms >= 0)
			scenario_set_time(ev, now_ms);
		text = json_dumps(ev, JSON_COMPACT);
		text_len = text != NULL ? strlen(text) : 0;
	}
	if (text == NULL)
	{
		fprintf(stderr, "lakehouse-producer: out of memory rewriting an event\n");
		r->fatal = true;
		return false;
	}
	ok = send_text(r, text, text_len, sse_id);
	free(text);
	return ok;
}

static int
on_replay_event(const char *data, size_t len, const char *sse_id, void *arg)
{
	replay	   *r = arg;
	unsigned long position = r->position++;
	bool		rewrite = r->o->loops >= 0 || r->o->restamp;
	json_t	   *ev = NULL;
	bool		ok;

	if (data != NULL && rewrite)
		ev = load_event(data, len, r->o->jansson_reader);
	if (json_is_object(ev))
		ok = send_rewritten(r, ev, data, len, position, sse_id);
	else
		ok = send_text(r, data, len, sse_id);	/* as it came: not JSON goes to the DLQ */
	json_decref(ev);
	if (!ok)
		return 1;
	r->main_sent++;
	return send_due_violations(r) ? 0 : 1;
}

static int
send_loop(replay *r, unsigned loop, char *err, size_t errlen)
{
	int			rc;

	r->loop = loop;
	r->position = 0;
	rc = replay_read(r->o->file, on_replay_event, r, err, errlen);
	return rc < 0 ? -1 : (r->stopped || r->fatal) ? 1 : 0;
}

static bool
send_late(replay *r)
{
	long long	ref = r->o->restamp ? scenario_now_ms() : r->s.newest_ms;

	for (long i = 0; i < r->o->late; i++)
	{
		json_t	   *ev = json_deep_copy(json_array_get(r->s.bases, (size_t) i % json_array_size(r->s.bases)));
		char	   *text;
		bool		ok;

		scenario_rewrite_id(ev, SCENARIO_LOOP_LATE, (unsigned long) i);
		scenario_set_time(ev, ref - r->o->late_minutes * 60000LL);
		text = json_dumps(ev, JSON_COMPACT);
		json_decref(ev);
		ok = send_text(r, text, strlen(text), NULL);
		free(text);
		if (!ok)
			return false;
	}
	return true;
}

int
replay_run(const producer_options *o, kafka_out *k, producer_counts *c)
{
	replay		r;
	char		err[512] = "";
	long		loops = o->loops >= 0 ? o->loops : 1;
	int			rc = 0;

	memset(&r, 0, sizeof(r));
	r.o = o;
	r.k = k;
	r.c = c;
	r.s.newest_ms = -1;
	r.s.bases = json_array();
	r.s.jansson_only = o->jansson_reader;
	r.s.bases_wanted = (size_t) (o->violations > o->late ? o->violations : o->late);
	if (r.s.bases_wanted > 1000)
		r.s.bases_wanted = 1000;	/* reused round robin beyond that */

	/*
	 * The survey (a first pass over the file) is needed only to spread violations and to
	 * copy events for violations and late events; a plain replay skips it and reads the
	 * file once.
	 */
	if (r.s.bases_wanted > 0 && replay_read(o->file, on_survey, &r.s, err, sizeof(err)) < 0)
	{
		fprintf(stderr, "lakehouse-producer: %s\n", err);
		json_decref(r.s.bases);
		return 1;
	}
	if ((o->violations > 0 || o->late > 0) && json_array_size(r.s.bases) == 0)
	{
		fprintf(stderr, "lakehouse-producer: --violations and --late copy valid events of "
				"the file, and %s has none\n", o->file);
		json_decref(r.s.bases);
		return 2;
	}
	r.main_total = (unsigned long long) r.s.events * (unsigned long long) (loops + (o->resend_loop >= 0 ? 1 : 0));
	if (r.s.bases_wanted > 0)
		say(o, "replaying %lu events of %s, %ld loop(s)%s, %ld violation(s), %ld late event(s)",
			r.s.events, o->file, loops, o->resend_loop >= 0 ? " plus one resent" : "",
			o->violations, o->late);
	else
		say(o, "replaying %s, %ld loop(s)%s", o->file, loops,
			o->resend_loop >= 0 ? " plus one resent" : "");
	if (o->threads > 0)
	{
		r.target.k = k;
		r.target.counts = c;
		r.pool = route_pool_start(&r.target, o->threads, err, sizeof(err));
		if (r.pool == NULL)
		{
			fprintf(stderr, "lakehouse-producer: %s\n", err);
			json_decref(r.s.bases);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &r.start);

	for (long l = 0; rc == 0 && l < loops; l++)
	{
		rc = send_loop(&r, (unsigned) l, err, sizeof(err));
		if (rc == 0 && l == o->resend_loop)
		{
			say(o, "resending loop %ld with the same ids, as a producer resume would", l);
			rc = send_loop(&r, (unsigned) l, err, sizeof(err));
		}
	}
	/* Violations still due (e.g. an empty file), then the late events. */
	if (rc == 0)
	{
		r.main_total = r.main_sent;
		if (!send_due_violations(&r) || !send_late(&r))
			rc = 1;
	}
	/* Whatever was submitted is delivered in order before the run ends. */
	if (r.pool && !pool_finish(r.pool))
		r.fatal = true;
	json_decref(r.s.bases);
	if (rc < 0)
	{
		fprintf(stderr, "lakehouse-producer: %s\n", err);
		return 1;
	}
	if (r.fatal)
		return 1;
	if (producer_stop)
		say(o, "stopped by a signal");
	return 0;
}
