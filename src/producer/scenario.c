/*
 * scenario.c: deterministic rewrites of events for the replay scenarios (see
 * scenario.h for the id scheme). Times are computed by hand (days from civil dates)
 * rather than with timegm, which is not in C99 or POSIX.
 */
#include "scenario.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * The id of (loop, position) made from an original id of len characters (the one rule
 * both rewrites follow): false when the original is not UUID-shaped.
 */
static bool
loop_id(const char *id, size_t len, unsigned loop, unsigned long position, char out[37])
{
	if (len != 36 || id[23] != '-')
		return false;
	memcpy(out, id, 24);
	snprintf(out + 24, 13, "%04x%08lx", loop & 0xffffu, position & 0xffffffffUL);
	return true;
}

bool
scenario_rewrite_id(json_t *event, unsigned loop, unsigned long position)
{
	json_t	   *meta = json_object_get(event, "meta");
	const char *id = json_string_value(json_object_get(meta, "id"));
	char		out[37];

	if (id == NULL || !loop_id(id, strlen(id), loop, position, out))
		return false;
	json_object_set_new(meta, "id", json_string(out));
	return true;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm). */
static long long
days_from_civil(long long y, unsigned m, unsigned d)
{
	long long	era;
	unsigned	yoe,
				doy,
				doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned) (y - era * 400);
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (long long) doe - 719468;
}

static void
civil_from_days(long long z, int *y, unsigned *m, unsigned *d)
{
	long long	era;
	unsigned	doe,
				yoe,
				doy,
				mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned) (z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int) (yoe + era * 400 + (*m <= 2));
}

void
scenario_format_time(long long epoch_ms, char *buf, size_t buflen)
{
	long long	days = epoch_ms >= 0 ? epoch_ms / 86400000 : -((-epoch_ms + 86399999) / 86400000);
	long long	rest = epoch_ms - days * 86400000;
	int			y;
	unsigned	m,
				d;

	civil_from_days(days, &y, &m, &d);
	snprintf(buf, buflen, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", y, m, d,
			 (int) (rest / 3600000), (int) (rest / 60000 % 60), (int) (rest / 1000 % 60),
			 (int) (rest % 1000));
}

bool
scenario_parse_time(const char *s, long long *epoch_ms)
{
	int			y,
				mo,
				d,
				h,
				mi,
				sec,
				n = 0;
	long long	ms = 0;
	const char *p;

	if (s == NULL || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
		n != 19 || mo < 1 || mo > 12 || d < 1 || d > 31)
		return false;
	p = s + n;
	if (*p == '.')
	{
		int			digits = 0;

		for (p++; isdigit((unsigned char) *p); p++, digits++)
			if (digits < 3)
				ms = ms * 10 + (*p - '0');
		if (digits == 0)
			return false;
		for (; digits < 3; digits++)
			ms *= 10;
	}
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
		return false;
	*epoch_ms = ((days_from_civil(y, (unsigned) mo, (unsigned) d) * 24 + h) * 60 + mi) * 60000LL
		+ sec * 1000LL + ms;
	return true;
}

void
scenario_set_time(json_t *event, long long epoch_ms)
{
	char		buf[40];
	json_t	   *meta = json_object_get(event, "meta");

	scenario_format_time(epoch_ms, buf, sizeof(buf));
	if (json_is_object(meta))
		json_object_set_new(meta, "dt", json_string(buf));
	json_object_set_new(event, "timestamp", json_integer(epoch_ms / 1000));
}

/* ---- the rewrites on text ---------------------------------------------------------- */

/* A member's value in an event's text: [start, end), a string's quotes included. */
typedef struct text_span
{
	const char *start;
	const char *end;
} text_span;

/* A value's replacement. */
typedef struct text_edit
{
	text_span	at;
	char		with[48];
} text_edit;

static const char *
skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* p at a string's opening quote: just past its closing quote, or NULL. */
static const char *
skip_string(const char *p, const char *end)
{
	for (p++; p < end; p++)
	{
		if (*p == '\\')
		{
			if (++p >= end)
				return NULL;
		}
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* p at a value: just past it, or NULL when the text ends inside it. */
static const char *
skip_value(const char *p, const char *end)
{
	int			depth = 0;

	if (p >= end)
		return NULL;
	if (*p == '"')
		return skip_string(p, end);
	if (*p != '{' && *p != '[')
	{
		while (p < end && *p != ',' && *p != '}' && *p != ']' &&
			   *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			p++;
		return p;
	}
	while (p < end)
	{
		if (*p == '"')
		{
			p = skip_string(p, end);
			if (p == NULL)
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
		p++;
	}
	return NULL;
}

/*
 * The object at p: records where the values of the members named in names lie (found[i]
 * for names[i]) and returns just past the object. NULL when a named member occurs twice
 * or a key holds an escape (it could spell a name), or the text ends early.
 */
static const char *
find_members(const char *p, const char *end, const char *const *names, int n, text_span *found)
{
	p = skip_ws(p, end);
	if (p >= end || *p != '{')
		return NULL;
	p = skip_ws(p + 1, end);
	if (p < end && *p == '}')
		return p + 1;
	while (p < end)
	{
		const char *key = p + 1,
				   *key_end,
				   *value;

		if (*p != '"' || (p = skip_string(p, end)) == NULL)
			return NULL;
		key_end = p - 1;
		if (memchr(key, '\\', (size_t) (key_end - key)) != NULL)
			return NULL;
		p = skip_ws(p, end);
		if (p >= end || *p != ':')
			return NULL;
		p = skip_ws(p + 1, end);
		for (int i = 0; i < n; i++)
		{
			if ((size_t) (key_end - key) == strlen(names[i]) && memcmp(key, names[i], (size_t) (key_end - key)) == 0)
			{
				if (found[i].start != NULL)
					return NULL;
				found[i].start = p;
			}
		}
		value = p;
		if ((p = skip_value(p, end)) == NULL)
			return NULL;
		for (int i = 0; i < n; i++)
			if (found[i].start == value)
				found[i].end = p;
		p = skip_ws(p, end);
		if (p < end && *p == ',')
			p = skip_ws(p + 1, end);
		else if (p < end && *p == '}')
			return p + 1;
		else
			return NULL;
	}
	return NULL;
}

char *
scenario_rewrite_text(const char *text, size_t len, long loop, unsigned long position,
					  long long epoch_ms, size_t *out_len)
{
	static const char *const top_names[] = {"meta", "timestamp"};
	static const char *const meta_names[] = {"id", "dt"};
	text_span	top[2] = {{0}},
				meta[2] = {{0}};
	const char *end = text + len;
	text_edit	rep[3];			/* at most three, put in text order below */
	int			nrep = 0;
	char	   *out,
			   *o;
	const char *from;
	size_t		size;

	if (find_members(text, end, top_names, 2, top) == NULL || top[0].start == NULL ||
		*top[0].start != '{' || find_members(top[0].start, top[0].end, meta_names, 2, meta) == NULL)
		return NULL;
	if (loop >= 0)
	{
		const char *id = meta[0].start;
		char		new_id[37];

		/* A string without escapes, as the value's text is then the string itself. */
		if (id == NULL || *id != '"' || meta[0].end - id < 2 ||
			memchr(id + 1, '\\', (size_t) (meta[0].end - id - 2)) != NULL ||
			!loop_id(id + 1, (size_t) (meta[0].end - id - 2), (unsigned) loop, position, new_id))
			return NULL;
		rep[nrep].at = meta[0];
		snprintf(rep[nrep].with, sizeof(rep[nrep].with), "\"%s\"", new_id);
		nrep++;
	}
	if (epoch_ms >= 0)
	{
		char		when[40];

		if (meta[1].start == NULL || *meta[1].start != '"' || top[1].start == NULL ||
			(*top[1].start != '-' && (*top[1].start < '0' || *top[1].start > '9')))
			return NULL;
		scenario_format_time(epoch_ms, when, sizeof(when));
		rep[nrep].at = meta[1];
		snprintf(rep[nrep].with, sizeof(rep[nrep].with), "\"%s\"", when);
		nrep++;
		rep[nrep].at = top[1];
		snprintf(rep[nrep].with, sizeof(rep[nrep].with), "%lld", epoch_ms / 1000);
		nrep++;
	}
	/* In text order (at most three: a few swaps). */
	for (int i = 1; i < nrep; i++)
		for (int j = i; j > 0 && rep[j].at.start < rep[j - 1].at.start; j--)
		{
			text_edit	t = rep[j];

			rep[j] = rep[j - 1];
			rep[j - 1] = t;
		}
	size = len + 1;
	for (int i = 0; i < nrep; i++)
		size += strlen(rep[i].with);
	out = malloc(size);
	if (out == NULL)
		return NULL;
	o = out;
	from = text;
	for (int i = 0; i < nrep; i++)
	{
		size_t		w = strlen(rep[i].with);

		memcpy(o, from, (size_t) (rep[i].at.start - from));
		o += rep[i].at.start - from;
		memcpy(o, rep[i].with, w);
		o += w;
		from = rep[i].at.end;
	}
	memcpy(o, from, (size_t) (end - from));
	o += end - from;
	*o = '\0';
	*out_len = (size_t) (o - out);
	return out;
}

char *
scenario_violation(const json_t *base, long i)
{
	json_t	   *ev = json_deep_copy(base);
	char	   *text;

	scenario_rewrite_id(ev, SCENARIO_LOOP_VIOLATION, (unsigned long) i);
	switch (i % SCENARIO_VIOLATION_KINDS)
	{
		case 0:
			{
				/* Cut in the middle: what a truncated write or a proxy error page looks like. */
				char	   *full = json_dumps(ev, JSON_COMPACT);
				size_t		half = strlen(full) / 2;

				full[half] = '\0';
				json_decref(ev);
				return full;
			}
		case 1:
			json_object_del(json_object_get(ev, "meta"), "id");
			break;
		case 2:
			json_object_set_new(ev, "namespace", json_string("zero"));
			break;
		case 3:
			json_object_set_new(json_object_get(ev, "meta"), "dt", json_string("yesterday"));
			break;
		default:
			json_object_set_new(ev, "type", json_string("bogus"));
			break;
	}
	text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	return text;
}

long long
scenario_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
