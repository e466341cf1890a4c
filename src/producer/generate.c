/*
 * generate.c: synthetic recentchange events that look like the real stream, so tests
 * exercise what real traffic exercises. What is imitated, from captured events:
 *   - the type mix of an unfiltered run: about 45% categorize, 45% edit, 6% log,
 *     4% new;
 *   - field presence by type: edit has minor, length{old,new}, revision{old,new},
 *     notify_url (patrolled on some wikis); new has only the `new` halves; categorize
 *     has none of these but a notify_url and a `timestamp` a few seconds behind
 *     meta.dt, and shares meta.request_id with the edit before it; log has
 *     log_id/log_type/log_action/log_params (object or array)/log_action_comment and
 *     no notify_url;
 *   - meta.dt with millisecond precision (2026 style) or whole seconds (2023 style);
 *   - rcid, revision ids and meta.offset beyond 32 bits;
 *   - non-ASCII titles, HTML in parsedcomment, entities in log_action_comment, about
 *     1 KB per event.
 * The random numbers come from splitmix64 with a fixed seed, so a recording is
 * reproducible byte for byte.
 */
#include "console.h"
#include "generate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "scenario.h"

typedef struct wiki
{
	const char *name;
	const char *host;
	int			weight;
	bool		patrolled;		/* wikis with patrolling enabled show the flag */
} wiki;

static const wiki wikis[] = {
	{"commonswiki", "commons.wikimedia.org", 24, true},
	{"enwiki", "en.wikipedia.org", 22, true},
	{"wikidatawiki", "www.wikidata.org", 16, true},
	{"dewiki", "de.wikipedia.org", 8, false},
	{"frwiki", "fr.wikipedia.org", 6, false},
	{"idwiki", "id.wikipedia.org", 5, false},
	{"jawiki", "ja.wikipedia.org", 5, false},
	{"ruwiki", "ru.wikipedia.org", 5, false},
	{"mswiktionary", "ms.wiktionary.org", 4, false},
	{"cewiki", "ce.wikipedia.org", 3, false},
	{"elwiki", "el.wikipedia.org", 2, false},
};

static const char *const subjects[] = {
	"Köln", "São Paulo", "Zürich", "Łódź", "Москва", "東京都", "Ελλάδα", "Montréal",
	"Þingvellir", "Kraków", "Διόνυσος", "Bahasa Melayu", "El Niño", "Århus", "Beyoncé",
	"Hà Nội", "Ἀθῆναι", "Ĉeĥio", "Citroën", "Dvořák",
};

static const char *const things[] = {
	"railway station", "history", "list of mayors", "cathedral", "football club",
	"1998 election", "river", "university", "airport", "(album)",
};

static const char *const users[] = {
	"Orgelputzer", "Masquer11", "Jaybikam", "InternetArchiveBot", "Ser Amantio di Nicolao",
	"Gråbergs Gråa Sång", "Шуфель", "ウィキ太郎", "Ζαλμοξις", "CommonsDelinker",
	"2a02:810d:4b3f:e200:1c9d:5f6e:8a21:33c1", "87.12.215.232",
};

static const char *const log_kinds[][2] = {
	{"review", "approve"}, {"patrol", "patrol"}, {"thanks", "thank"}, {"newusers", "create"},
	{"upload", "upload"}, {"delete", "delete"}, {"move", "move"}, {"protect", "protect"},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t
next_u64(gen_state *g)
{
	uint64_t	z = (g->rng += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static long
below(gen_state *g, long n)
{
	return (long) (next_u64(g) % (uint64_t) n);
}

static void
uuid4(gen_state *g, char out[37])
{
	uint64_t	a = next_u64(g);
	uint64_t	b = next_u64(g);

	snprintf(out, 37, "%08x-%04x-4%03x-%04x-%012llx",
			 (unsigned) (a >> 32), (unsigned) (a >> 16) & 0xffff, (unsigned) a & 0xfff,
			 (unsigned) (0x8000 | ((b >> 48) & 0x3fff)),
			 (unsigned long long) (b & 0xffffffffffffULL));
}

/* Title to URL path as MediaWiki does: spaces to underscores, the rest percent-encoded. */
static void
title_path(const char *title, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t		n = 0;

	for (const unsigned char *p = (const unsigned char *) title; *p && n + 4 < outlen; p++)
	{
		if (*p == ' ')
			out[n++] = '_';
		else if (*p < 0x80 && *p != '%' && *p != '?' && *p != '&' && *p != '"')
			out[n++] = (char) *p;
		else
		{
			out[n++] = '%';
			out[n++] = hex[*p >> 4];
			out[n++] = hex[*p & 15];
		}
	}
	out[n] = '\0';
}

static const wiki *
pick_wiki(gen_state *g)
{
	int			total = 0;
	long		r;

	for (size_t i = 0; i < COUNT(wikis); i++)
		total += wikis[i].weight;
	r = below(g, total);
	for (size_t i = 0; i < COUNT(wikis); i++)
	{
		if (r < wikis[i].weight)
			return &wikis[i];
		r -= wikis[i].weight;
	}
	return &wikis[0];
}

void
gen_init(gen_state *g, unsigned long seed)
{
	memset(g, 0, sizeof(*g));
	g->rng = 0x1a4e5eedULL ^ ((uint64_t) seed << 17) ^ seed;
	/* 2026-03-01T12:00:00.000Z, the era of millisecond meta.dt */
	g->t_ms = 1772366400000LL;
	g->offset = 6524211441LL;
	g->rcid = 3468178745LL;
	g->revision = 2546877183LL;
}

char *
gen_event(gen_state *g)
{
	long		roll = below(g, 100);
	const char *type = roll < 45 ? "categorize" : roll < 90 ? "edit" : roll < 96 ? "log" : "new";
	const wiki *w;
	json_t	   *ev = json_object();
	json_t	   *meta = json_object();
	char		id[37],
				title[256],
				path[768],
				buf[2048],
				dt[40];
	const char *user = users[below(g, COUNT(users))];
	bool		ms_precision = below(g, 10) < 7;
	int			ns;
	long long	ts;
	char	   *text;
	long		words;

	/* Events arrive tens per second: 0-200 ms apart. */
	g->t_ms += below(g, 200);
	g->offset += 1 + below(g, 3);

	if (strcmp(type, "categorize") == 0 && g->last_wiki && below(g, 2) == 0)
	{
		/* A category change caused by the edit just before: same request, same wiki. */
		w = NULL;
		for (size_t i = 0; i < COUNT(wikis); i++)
			if (wikis[i].name == g->last_wiki)
				w = &wikis[i];
	}
	else
	{
		w = pick_wiki(g);
		uuid4(g, g->request_id);
	}
	if (w == NULL)
		w = pick_wiki(g);

	if (strcmp(type, "categorize") == 0)
	{
		ns = 14;
		snprintf(title, sizeof(title), "Category:%s %s", subjects[below(g, COUNT(subjects))],
				 things[below(g, COUNT(things))]);
	}
	else
	{
		static const int spaces[] = {0, 0, 0, 0, 1, 2, 3, 4, 6, 10};

		ns = spaces[below(g, COUNT(spaces))];
		snprintf(title, sizeof(title), "%s%s %s %ld", ns == 2 ? "User:" : ns == 4 ? "Project:" : "",
				 subjects[below(g, COUNT(subjects))], things[below(g, COUNT(things))],
				 below(g, 2000));
	}
	title_path(title, path, sizeof(path));

	uuid4(g, id);
	if (ms_precision)
		scenario_format_time(g->t_ms, dt, sizeof(dt));
	else
	{
		scenario_format_time(g->t_ms / 1000 * 1000, dt, sizeof(dt));
		strcpy(dt + 19, "Z");
	}
	snprintf(buf, sizeof(buf), "https://%s/wiki/%s", w->host, path);
	json_object_set_new(meta, "uri", json_string(buf));
	json_object_set_new(meta, "request_id", json_string(g->request_id));
	json_object_set_new(meta, "id", json_string(id));
	json_object_set_new(meta, "domain", json_string(w->host));
	json_object_set_new(meta, "stream", json_string("mediawiki.recentchange"));
	json_object_set_new(meta, "dt", json_string(dt));
	json_object_set_new(meta, "topic", json_string(below(g, 2) ? "eqiad.mediawiki.recentchange"
												   : "codfw.mediawiki.recentchange"));
	json_object_set_new(meta, "partition", json_integer(0));
	json_object_set_new(meta, "offset", json_integer(g->offset));

	json_object_set_new(ev, "$schema", json_string("/mediawiki/recentchange/1.0.0"));
	json_object_set_new(ev, "meta", meta);
	g->rcid += 1 + below(g, 40);
	/* Some log events have no RC row, hence no id (e.g. dewiki review/approve). */
	if (!(strcmp(type, "log") == 0 && below(g, 3) == 0))
		json_object_set_new(ev, "id", json_integer(g->rcid));
	json_object_set_new(ev, "type", json_string(type));
	json_object_set_new(ev, "namespace", json_integer(ns));
	json_object_set_new(ev, "title", json_string(title));
	snprintf(buf, sizeof(buf), "https://%s/wiki/%s", w->host, path);
	json_object_set_new(ev, "title_url", json_string(buf));

	/* Comments of varying length bring events to about 1 KB on average. */
	words = 3 + below(g, 40);
	{
		size_t		n = (size_t) snprintf(buf, sizeof(buf), "/* %s */ ", things[below(g, COUNT(things))]);

		for (long i = 0; i < words && n + 40 < sizeof(buf); i++)
			n += (size_t) snprintf(buf + n, sizeof(buf) - n, "%s ", i % 7 == 3 ? subjects[below(g, COUNT(subjects))] : "copyedit");
		buf[n - 1] = '\0';
	}
	json_object_set_new(ev, "comment", json_string(strcmp(type, "log") == 0 && below(g, 2) ? "" : buf));
	ts = g->t_ms / 1000 - (strcmp(type, "categorize") == 0 ? below(g, 12) : 0);
	json_object_set_new(ev, "timestamp", json_integer(ts));
	json_object_set_new(ev, "user", json_string(user));
	json_object_set_new(ev, "bot", json_boolean(strstr(user, "Bot") != NULL || strcmp(user, "CommonsDelinker") == 0));

	if (strcmp(type, "edit") == 0 || strcmp(type, "new") == 0)
	{
		json_t	   *length = json_object();
		json_t	   *revision = json_object();
		long long	newlen = 200 + below(g, 120000);
		long long	oldrev = g->revision;

		g->revision += 1 + below(g, 50);
		if (strcmp(type, "edit") == 0)
		{
			snprintf(buf, sizeof(buf), "https://%s/w/index.php?diff=%lld&oldid=%lld", w->host, g->revision, oldrev);
			json_object_set_new(length, "old", json_integer(newlen - 500 + below(g, 1000)));
			json_object_set_new(revision, "old", json_integer(oldrev));
		}
		else
			snprintf(buf, sizeof(buf), "https://%s/w/index.php?oldid=%lld&rcid=%lld", w->host, g->revision, g->rcid);
		json_object_set_new(length, "new", json_integer(newlen));
		json_object_set_new(revision, "new", json_integer(g->revision));
		json_object_set_new(ev, "notify_url", json_string(buf));
		json_object_set_new(ev, "minor", json_boolean(below(g, 4) == 0));
		if (w->patrolled)
			json_object_set_new(ev, "patrolled", json_boolean(below(g, 2) == 0));
		json_object_set_new(ev, "length", length);
		json_object_set_new(ev, "revision", revision);
	}
	else if (strcmp(type, "categorize") == 0)
	{
		snprintf(buf, sizeof(buf), "https://%s/w/index.php?diff=%lld&oldid=0", w->host, g->revision);
		json_object_set_new(ev, "notify_url", json_string(buf));
	}
	else
	{
		long		k = below(g, COUNT(log_kinds));

		json_object_set_new(ev, "log_id", json_integer(140909580 + g->offset % 100000));
		json_object_set_new(ev, "log_type", json_string(log_kinds[k][0]));
		json_object_set_new(ev, "log_action", json_string(log_kinds[k][1]));
		if (k % 2 == 0)
			json_object_set_new(ev, "log_params",
								json_pack("[I,I,s]", g->revision, g->revision - 7, "20260301120000"));
		else
			json_object_set_new(ev, "log_params",
								json_pack("{s:s,s:I}", "target", title, "revid", g->revision));
		snprintf(buf, sizeof(buf), "%s %s &quot;[[%s]]&quot;", user, log_kinds[k][1], title);
		json_object_set_new(ev, "log_action_comment", json_string(buf));
	}

	snprintf(buf, sizeof(buf), "https://%s", w->host);
	json_object_set_new(ev, "server_url", json_string(buf));
	json_object_set_new(ev, "server_name", json_string(w->host));
	json_object_set_new(ev, "server_script_path", json_string("/w"));
	json_object_set_new(ev, "wiki", json_string(w->name));
	snprintf(buf, sizeof(buf),
			 "<span dir=\"auto\"><span class=\"autocomment\"><a href=\"/wiki/%s\" title=\"%s\">"
			 "\xe2\x86\x92\xe2\x80\x8e%s</a></span></span> edited &#039;%s&#039;",
			 path, title, things[below(g, COUNT(things))], title);
	json_object_set_new(ev, "parsedcomment", json_string(strcmp(type, "log") == 0 ? "" : buf));

	g->last_wiki = w->name;
	snprintf(g->last_title, sizeof(g->last_title), "%s", title);
	text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	return text;
}

int
generate_run(const producer_options *o)
{
	gen_state	g;
	FILE	   *f = strcmp(o->out_file, "-") == 0 ? stdout : fopen(o->out_file, "wb");

	if (f == NULL)
	{
		fprintf(stderr, "lakehouse-producer: cannot create %s: %s\n", o->out_file, strerror(errno));
		return 1;
	}
	gen_init(&g, o->seed);
	for (long long i = 0; i < o->generate && !producer_stop; i++)
	{
		char	   *text = gen_event(&g);

		fputs(text, f);
		fputc('\n', f);
		free(text);
	}
	if ((f == stdout ? fflush(f) : fclose(f)) != 0)
	{
		fprintf(stderr, "lakehouse-producer: cannot write %s: %s\n", o->out_file, strerror(errno));
		return 1;
	}
	say(o, "wrote %lld events to %s", o->generate, o->out_file);
	return 0;
}
