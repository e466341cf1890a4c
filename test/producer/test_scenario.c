/*
 * test_scenario.c: unit tests for the replay scenario rewrites
 * (src/producer/scenario.c), printed as TAP: the per-loop id scheme, time parsing and
 * formatting, that each kind of violation breaks the contract the way it claims, and that
 * the rewrites on text give the value the json_t rewrites give (generated events, hand-made
 * layouts, and the real sample as argv[1] when present).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "generate.h"
#include "scenario.h"
#include "tap.h"

static const char *const base_text =
	"{\"$schema\":\"/mediawiki/recentchange/1.0.0\","
	"\"meta\":{\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\",\"dt\":\"2026-11-01T10:00:00.123Z\","
	"\"domain\":\"en.wikipedia.org\",\"stream\":\"mediawiki.recentchange\"},"
	"\"type\":\"edit\",\"namespace\":0,\"title\":\"K\\u00f6ln\",\"timestamp\":1793527200,"
	"\"user\":\"Example\",\"bot\":false,\"length\":{\"old\":1,\"new\":2},"
	"\"revision\":{\"old\":3,\"new\":4},\"wiki\":\"enwiki\"}";

static const char *
meta_id(const json_t *ev)
{
	return json_string_value(json_object_get(json_object_get(ev, "meta"), "id"));
}

/*
 * 1 when scenario_rewrite_text(text, loop, position, ms) parses to what the json_t
 * rewrites make of the same text; 0 when it differs; -1 when it declined (NULL).
 */
static int
text_matches_value(const char *text, long loop, unsigned long position, long long ms)
{
	size_t		n,
				len = strlen(text);
	char	   *copy = malloc(len > 0 ? len : 1);	/* no NUL after it: a read past len shows under ASan */
	char	   *out;
	json_t	   *want = json_loads(text, JSON_DECODE_ANY, NULL);
	json_t	   *got;
	int			same;

	memcpy(copy, text, len);
	out = scenario_rewrite_text(copy, len, loop, position, ms, &n);
	free(copy);

	if (out == NULL)
	{
		json_decref(want);
		return -1;
	}
	if (loop >= 0)
		scenario_rewrite_id(want, (unsigned) loop, position);
	if (ms >= 0)
		scenario_set_time(want, ms);
	got = json_loadb(out, n, JSON_DECODE_ANY, NULL);
	same = got != NULL && json_equal(got, want) && strlen(out) == n;
	json_decref(got);
	json_decref(want);
	free(out);
	return same;
}

/* Each line of a JSONL file through text_matches_value; counts by result. */
static void
sample_matches(const char *path, long *same, long *differ, long *declined)
{
	FILE	   *f = path ? fopen(path, "r") : NULL;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;
	unsigned long i = 0;

	*same = *differ = *declined = 0;
	if (f == NULL)
		return;
	while ((len = getline(&line, &cap, f)) != -1)
	{
		int			r;

		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		r = text_matches_value(line, (long) (i % 3), i, 1793527200123LL + (long long) i);
		*(r == 1 ? same : r == 0 ? differ : declined) += 1;
		i++;
	}
	free(line);
	fclose(f);
}

int
main(int argc, char **argv)
{
	json_t	   *base = json_loads(base_text, 0, NULL);
	json_t	   *ev;
	long long	ms;
	char		buf[40];
	rc_verdict	v;
	static const char *const reasons[SCENARIO_VIOLATION_KINDS] = {
		"not_json", "missing_field:meta.id", "bad_type:namespace", "bad_time:meta.dt", "bad_enum:type"
	};

	tap_ok(rc_validate(base_text, strlen(base_text), &v), "the base event is valid");

	ev = json_deep_copy(base);
	tap_ok(scenario_rewrite_id(ev, 3, 17), "a UUID id is rewritten");
	tap_is_str(meta_id(ev), "0b6a3c2e-4f5d-4e7a-8b9c-000300000011", "loop 3, position 17");
	{
		char	   *t = json_dumps(ev, JSON_COMPACT);

		tap_ok(rc_validate(t, strlen(t), &v), "the rewritten event is still valid");
		free(t);
	}
	scenario_rewrite_id(ev, 3, 17);
	tap_is_str(meta_id(ev), "0b6a3c2e-4f5d-4e7a-8b9c-000300000011", "rewriting is idempotent: a resend gets the same id");
	json_decref(ev);
	ev = json_deep_copy(base);
	scenario_rewrite_id(ev, 4, 17);
	tap_is_str(meta_id(ev), "0b6a3c2e-4f5d-4e7a-8b9c-000400000011", "another loop, another id");
	json_object_set_new(json_object_get(ev, "meta"), "id", json_string("not-a-uuid"));
	tap_ok(!scenario_rewrite_id(ev, 1, 1), "an id that is not a UUID is left alone");
	tap_is_str(meta_id(ev), "not-a-uuid", "and unchanged");
	json_decref(ev);

	tap_ok(scenario_parse_time("1970-01-01T00:00:00Z", &ms) && ms == 0, "the epoch");
	tap_ok(scenario_parse_time("2026-03-03T11:15:25.048Z", &ms) && ms == 1772536525048LL,
		   "EventStreams' example time (1772536525049 - 1 ms)");
	tap_ok(scenario_parse_time("2024-02-29T23:59:59+00:00", &ms) && ms == 1709251199000LL, "leap day, +00:00");
	tap_ok(!scenario_parse_time("yesterday", &ms), "not a time");
	tap_ok(!scenario_parse_time("2026-03-03T11:15:25+02:00", &ms), "only UTC");
	scenario_format_time(1772536525048LL, buf, sizeof(buf));
	tap_is_str(buf, "2026-03-03T11:15:25.048Z", "formats with milliseconds");
	scenario_format_time(951782400000LL - 1, buf, sizeof(buf));
	tap_is_str(buf, "2000-02-28T23:59:59.999Z", "formats around a leap day");
	{
		long		bad = 0;

		for (long long t = 0; t < 4102444800000LL; t += 86400000LL * 37 + 12345)
		{
			long long	back;

			scenario_format_time(t, buf, sizeof(buf));
			if (!scenario_parse_time(buf, &back) || back != t)
				bad++;
		}
		tap_is_int(bad, 0, "format and parse round-trip from 1970 to 2100");
	}

	ev = json_deep_copy(base);
	scenario_set_time(ev, 1772536525048LL);
	tap_is_str(json_string_value(json_object_get(json_object_get(ev, "meta"), "dt")),
			   "2026-03-03T11:15:25.048Z", "set_time sets meta.dt");
	tap_is_int(json_integer_value(json_object_get(ev, "timestamp")), 1772536525LL, "and timestamp in seconds");
	json_decref(ev);

	for (long i = 0; i < 2 * SCENARIO_VIOLATION_KINDS; i++)
	{
		char	   *t = scenario_violation(base, i);
		json_t	   *parsed;

		rc_validate(t, strlen(t), &v);
		tap_ok(!v.valid && strcmp(v.reason, reasons[i % SCENARIO_VIOLATION_KINDS]) == 0,
			   "violation %ld is %s (got %s)", i, reasons[i % SCENARIO_VIOLATION_KINDS], v.reason);
		parsed = json_loads(t, 0, NULL);
		if (parsed && meta_id(parsed))
			tap_ok(strncmp(meta_id(parsed) + 24, "fffd", 4) == 0, "violation %ld has a reserved-loop id", i);
		json_decref(parsed);
		free(t);
	}

	/* The rewrites on text. */
	tap_is_int(text_matches_value(base_text, 3, 17, -1), 1, "text: the id of loop 3, position 17");
	tap_is_int(text_matches_value(base_text, -1, 0, 1793527200123LL), 1, "text: the time");
	tap_is_int(text_matches_value(base_text, 0xfffe, 99, 0), 1, "text: both, the epoch, the late loop");
	{
		static const char *const same_cases[] = {
			/* an "id" elsewhere (a number at the top, a string in another object) */
			"{\"id\":5,\"x\":{\"id\":\"aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa\",\"dt\":\"x\"},"
			"\"meta\":{\"dt\":\"2026-01-01T00:00:00Z\",\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\"},\"timestamp\":-1}",
			/* whitespace everywhere, timestamp before meta */
			" { \"timestamp\" : 1 ,\n \"meta\" :\t{ \"id\" : \"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\" , "
			"\"dt\" : \"2026-01-01T00:00:00Z\" } }\n",
			/* quotes, braces and backslashes inside strings before and inside meta */
			"{\"comment\":\"a \\\"}{\\\" [\\\\\",\"meta\":{\"q\":\"\\\"id\\\":\\\"\",\"a\":[{\"id\":1}],"
			"\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\",\"dt\":\"2026-01-01T00:00:00Z\"},\"timestamp\":2e3}",
		};
		static const char *const declined_cases[] = {
			"{\"meta\":{\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\",\"dt\":\"d\"},\"meta\":{},\"timestamp\":1}",
			"{\"m\\u0065ta\":{\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\",\"dt\":\"d\"},\"timestamp\":1}",
			"{\"meta\":{\"id\":\"not-a-uuid\",\"dt\":\"d\"},\"timestamp\":1}",
			"{\"meta\":{\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\",\"dt\":\"d\"},\"timestamp\":\"1\"}",
			"{\"meta\":{\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\"},\"timestamp\":1}",
			"{\"meta\":{\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\",\"dt\":\"d\"}}",
			"{\"meta\":[],\"timestamp\":1}",
			"{\"meta\":{\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c\\u002d1d2e3f4a5b6c\",\"dt\":\"d\"},\"timestamp\":1}",
		};

		for (size_t i = 0; i < sizeof(same_cases) / sizeof(same_cases[0]); i++)
			tap_ok(text_matches_value(same_cases[i], 7, 8, 1000) == 1, "text: layout case %zu gives the same value", i);
		for (size_t i = 0; i < sizeof(declined_cases) / sizeof(declined_cases[0]); i++)
			tap_ok(text_matches_value(declined_cases[i], 7, 8, 1000) == -1,
				   "text: layout case %zu is left to the json_t rewrites", i);
	}
	{
		/* Every byte outside the three values stays as it was. */
		static const char in[] =
			"{ \"meta\" : {\"dt\":\"2026-01-01T00:00:00Z\" , \"x\":\"K\\u00f6ln \\\"\",\n"
			"\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\"},\"timestamp\":  17 ,\"id\":1}";
		static const char want[] =
			"{ \"meta\" : {\"dt\":\"1970-01-01T00:00:01.234Z\" , \"x\":\"K\\u00f6ln \\\"\",\n"
			"\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-00020000000a\"},\"timestamp\":  1 ,\"id\":1}";
		size_t		n;
		char	   *out = scenario_rewrite_text(in, strlen(in), 2, 10, 1234, &n);

		tap_is_str(out, want, "text: only the three values change, byte for byte");
		tap_ok(out != NULL && n == strlen(want), "text: and the length it reports is the text's");
		free(out);
	}
	{
		gen_state	g;
		long		same = 0,
					differ = 0,
					declined = 0;

		gen_init(&g, 42);
		for (unsigned long i = 0; i < 20000; i++)
		{
			char	   *t = gen_event(&g);
			int			r = text_matches_value(t, (long) (i % 4) - 1, i, i % 5 == 0 ? -1 : 1793527200000LL + (long long) i);

			*(r == 1 ? &same : r == 0 ? &differ : &declined) += 1;
			free(t);
		}
		tap_ok(same == 20000 && differ == 0 && declined == 0,
			   "text: 20,000 generated events rewritten on text give the json_t result (%ld same, %ld differ, %ld declined)",
			   same, differ, declined);
	}
	{
		long		same,
					differ,
					declined;

		sample_matches(argc > 1 ? argv[1] : NULL, &same, &differ, &declined);
		if (same + differ + declined == 0)
			tap_skip("text: real sample events rewritten", "no sample file given as argv[1] or not readable");
		else
			tap_ok(differ == 0 && declined == 0 && same > 0,
				   "text: %ld real sample events rewritten on text give the json_t result (%ld differ, %ld declined)",
				   same, differ, declined);
	}
	json_decref(base);
	return tap_done();
}
