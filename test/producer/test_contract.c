/*
 * test_contract.c: unit tests for the recentchange contract (src/producer/contract.c),
 * printed as TAP.
 *
 * Broken events are made by changing one field of a valid one, so each case shows
 * which rule it hits. With a path to the reference sample as argv[1], every real
 * event in it must pass; without one (users do not have ../shared) that is skipped.
 */
#include <stdlib.h>

#include "contract.h"
#include "tap.h"

static const char *const edit_event =
	"{\"$schema\":\"/mediawiki/recentchange/1.0.0\","
	"\"meta\":{\"uri\":\"https://en.wikipedia.org/wiki/Example\","
	"\"request_id\":\"5f1c2e1b-8a61-4c8e-9a43-0d7a2f1e9b10\","
	"\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\",\"dt\":\"2026-11-01T10:00:00.123Z\","
	"\"domain\":\"en.wikipedia.org\",\"stream\":\"mediawiki.recentchange\","
	"\"topic\":\"eqiad.mediawiki.recentchange\",\"partition\":0,\"offset\":6524211441},"
	"\"id\":3468178745,\"type\":\"edit\",\"namespace\":0,\"title\":\"K\\u00f6ln\","
	"\"comment\":\"copyedit\",\"timestamp\":1793527200,\"user\":\"Example\",\"bot\":false,"
	"\"minor\":true,\"length\":{\"old\":1200,\"new\":1234},"
	"\"revision\":{\"old\":2546877100,\"new\":2546877183},"
	"\"server_url\":\"https://en.wikipedia.org\",\"wiki\":\"enwiki\"}";

/* One change to edit_event: set path to a JSON value, or delete it when value is NULL. */
typedef struct mutation
{
	const char *name;
	const char *path;
	const char *value;
	const char *path2;			/* an optional second change, e.g. the type with a field */
	const char *value2;
	const char *reason;			/* expected reason code, "" for a valid event */
} mutation;

#define DEL NULL

static const mutation cases[] = {
	/* valid variants */
	{"the base edit event", "type", "\"edit\"", NULL, NULL, ""},
	{"second-precision time", "meta.dt", "\"2023-07-29T07:51:39Z\"", NULL, NULL, ""},
	{"+00:00 offset", "meta.dt", "\"2023-07-29T07:51:39+00:00\"", NULL, NULL, ""},
	{"ms time with +00:00", "meta.dt", "\"2023-07-29T07:51:39.001+00:00\"", NULL, NULL, ""},
	{"leap day", "meta.dt", "\"2024-02-29T23:59:59Z\"", NULL, NULL, ""},
	{"upper-case UUID", "meta.id", "\"0B6A3C2E-4F5D-4E7A-8B9C-1D2E3F4A5B6C\"", NULL, NULL, ""},
	{"new page without old length", "type", "\"new\"", "length", "{\"new\":5}", ""},
	{"new page without old revision", "type", "\"new\"", "revision", "{\"new\":5}", ""},
	{"new page with null old length", "type", "\"new\"", "length.old", "null", ""},
	{"log event without length", "type", "\"log\"", "length", DEL, ""},
	{"categorize event without revision", "type", "\"categorize\"", "revision", DEL, ""},
	{"external event with null lengths", "type", "\"external\"", "length", "{\"new\":null,\"old\":null}", ""},
	{"log event with every schema field", "type", "\"log\"", "log_params", "{\"target\":\"X\"}", ""},
	{"log_params as a string", "log_params", "\"\"", "log_type", "null", ""},
	{"null id and log fields", "id", "null", "log_action_comment", "null", ""},
	{"negative namespace", "namespace", "-1", NULL, NULL, ""},
	{"64-bit integers", "revision.new", "9007199254740993", "length.new", "4294967296", ""},
	{"empty title and user are strings", "title", "\"\"", "user", "\"\"", ""},
	{"extra fields are free", "log_params", "[1,2]", "meta.key", "null", ""},

	/* missing fields */
	{"no $schema", "$schema", DEL, NULL, NULL, "missing_field:$schema"},
	{"no meta", "meta", DEL, NULL, NULL, "missing_field:meta"},
	{"no meta.stream", "meta.stream", DEL, NULL, NULL, "missing_field:meta.stream"},
	{"no meta.id", "meta.id", DEL, NULL, NULL, "missing_field:meta.id"},
	{"no meta.dt", "meta.dt", DEL, NULL, NULL, "missing_field:meta.dt"},
	{"no meta.domain", "meta.domain", DEL, NULL, NULL, "missing_field:meta.domain"},
	{"no type", "type", DEL, NULL, NULL, "missing_field:type"},
	{"no wiki", "wiki", DEL, NULL, NULL, "missing_field:wiki"},
	{"no title", "title", DEL, NULL, NULL, "missing_field:title"},
	{"no user", "user", DEL, NULL, NULL, "missing_field:user"},
	{"no namespace", "namespace", DEL, NULL, NULL, "missing_field:namespace"},
	{"no timestamp", "timestamp", DEL, NULL, NULL, "missing_field:timestamp"},
	{"no bot", "bot", DEL, NULL, NULL, "missing_field:bot"},
	{"edit without length", "length", DEL, NULL, NULL, "missing_field:length"},
	{"edit without length.new", "length.new", DEL, NULL, NULL, "missing_field:length.new"},
	{"edit without length.old", "length.old", DEL, NULL, NULL, "missing_field:length.old"},
	{"edit without revision", "revision", DEL, NULL, NULL, "missing_field:revision"},
	{"edit without revision.new", "revision.new", DEL, NULL, NULL, "missing_field:revision.new"},
	{"edit without revision.old", "revision.old", DEL, NULL, NULL, "missing_field:revision.old"},
	{"new without revision", "type", "\"new\"", "revision", DEL, "missing_field:revision"},
	{"new without length.new", "type", "\"new\"", "length", "{\"old\":1}", "missing_field:length.new"},

	/* wrong JSON types */
	{"meta is a string", "meta", "\"meta\"", NULL, NULL, "bad_type:meta"},
	{"meta.id is a number", "meta.id", "42", NULL, NULL, "bad_type:meta.id"},
	{"meta.dt is epoch ms", "meta.dt", "1690617099000", NULL, NULL, "bad_type:meta.dt"},
	{"meta.domain is null", "meta.domain", "null", NULL, NULL, "bad_type:meta.domain"},
	{"type is a number", "type", "0", NULL, NULL, "bad_type:type"},
	{"wiki is null", "wiki", "null", NULL, NULL, "bad_type:wiki"},
	{"title is a number", "title", "123", NULL, NULL, "bad_type:title"},
	{"user is an object", "user", "{}", NULL, NULL, "bad_type:user"},
	{"namespace is a string", "namespace", "\"0\"", NULL, NULL, "bad_type:namespace"},
	{"namespace is a real", "namespace", "0.0", NULL, NULL, "bad_type:namespace"},
	{"timestamp is a string", "timestamp", "\"1690617099\"", NULL, NULL, "bad_type:timestamp"},
	{"bot is a number", "bot", "0", NULL, NULL, "bad_type:bot"},
	{"bot is a string", "bot", "\"false\"", NULL, NULL, "bad_type:bot"},
	{"length is an array", "length", "[1,2]", NULL, NULL, "bad_type:length"},
	{"length.new is a string", "length.new", "\"1234\"", NULL, NULL, "bad_type:length.new"},
	{"edit with null length.old", "length.old", "null", NULL, NULL, "bad_type:length.old"},
	{"revision.new is a real", "revision.new", "2.5e9", NULL, NULL, "bad_type:revision.new"},
	{"revision.old is a string", "revision.old", "\"1\"", NULL, NULL, "bad_type:revision.old"},
	{"new with a string old length", "type", "\"new\"", "length.old", "\"1\"", "bad_type:length.old"},
	/* the schema's own types, for fields it names but does not require */
	{"$schema is a number", "$schema", "1", NULL, NULL, "bad_type:$schema"},
	{"meta.stream is null", "meta.stream", "null", NULL, NULL, "bad_type:meta.stream"},
	{"meta.uri is a number", "meta.uri", "7", NULL, NULL, "bad_type:meta.uri"},
	{"meta.request_id is null", "meta.request_id", "null", NULL, NULL, "bad_type:meta.request_id"},
	{"a log event with a string length", "type", "\"log\"", "length", "\"whatever\"", "bad_type:length"},
	{"a categorize event with a string new revision", "type", "\"categorize\"", "revision.new", "\"5\"", "bad_type:revision.new"},
	{"id is a string", "id", "\"3468178745\"", NULL, NULL, "bad_type:id"},
	{"comment is a number", "comment", "1", NULL, NULL, "bad_type:comment"},
	{"comment is null", "comment", "null", NULL, NULL, "bad_type:comment"},
	{"parsedcomment is an array", "parsedcomment", "[]", NULL, NULL, "bad_type:parsedcomment"},
	{"minor is a string", "minor", "\"yes\"", NULL, NULL, "bad_type:minor"},
	{"patrolled is a number", "patrolled", "1", NULL, NULL, "bad_type:patrolled"},
	{"log_id is a real", "log_id", "1.5", NULL, NULL, "bad_type:log_id"},
	{"log_type is a boolean", "log_type", "true", NULL, NULL, "bad_type:log_type"},
	{"log_action is null", "log_action", "null", NULL, NULL, "bad_type:log_action"},
	{"log_action_comment is a number", "log_action_comment", "2", NULL, NULL, "bad_type:log_action_comment"},
	{"log_params is a number", "log_params", "3", NULL, NULL, "bad_type:log_params"},
	{"server_name is a number", "server_name", "4", NULL, NULL, "bad_type:server_name"},
	{"server_url is an object", "server_url", "{}", NULL, NULL, "bad_type:server_url"},
	{"server_script_path is null", "server_script_path", "null", NULL, NULL, "bad_type:server_script_path"},

	/* wrong shapes */
	{"meta.id too short", "meta.id", "\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6\"", NULL, NULL, "bad_uuid:meta.id"},
	{"meta.id not hex", "meta.id", "\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6g\"", NULL, NULL, "bad_uuid:meta.id"},
	{"meta.id hyphens moved", "meta.id", "\"0b6a3c2e4-f5d-4e7a-8b9c-1d2e3f4a5b6c\"", NULL, NULL, "bad_uuid:meta.id"},
	{"meta.id without hyphens", "meta.id", "\"0b6a3c2e4f5d4e7a8b9c1d2e3f4a5b6c\"", NULL, NULL, "bad_uuid:meta.id"},
	{"meta.id in braces", "meta.id", "\"{0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c}\"", NULL, NULL, "bad_uuid:meta.id"},
	{"meta.dt without zone", "meta.dt", "\"2023-07-29T07:51:39\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt with a space", "meta.dt", "\"2023-07-29 07:51:39Z\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt not UTC", "meta.dt", "\"2023-07-29T07:51:39+02:00\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt microseconds", "meta.dt", "\"2023-07-29T07:51:39.123456Z\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt two fraction digits", "meta.dt", "\"2023-07-29T07:51:39.12Z\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt month 13", "meta.dt", "\"2023-13-29T07:51:39Z\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt Feb 29 of 2023", "meta.dt", "\"2023-02-29T07:51:39Z\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt Feb 29 of 1900", "meta.dt", "\"1900-02-29T07:51:39Z\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt hour 24", "meta.dt", "\"2023-07-29T24:00:00Z\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt second 60", "meta.dt", "\"2023-07-29T07:51:60Z\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt date only", "meta.dt", "\"2023-07-29\"", NULL, NULL, "bad_time:meta.dt"},
	{"meta.dt trailing text", "meta.dt", "\"2023-07-29T07:51:39Zjunk\"", NULL, NULL, "bad_time:meta.dt"},
	{"unknown type", "type", "\"delete\"", NULL, NULL, "bad_enum:type"},
	{"type in upper case", "type", "\"EDIT\"", NULL, NULL, "bad_enum:type"},
	{"type empty", "type", "\"\"", NULL, NULL, "bad_enum:type"},

	/* the first failing rule decides */
	{"meta.id checked before type", "meta.id", DEL, "type", "\"x\"", "missing_field:meta.id"},
};

/* Sets or deletes a dotted path (two levels at most) in a parsed event. */
static void
apply(json_t *event, const char *path, const char *value)
{
	char		parent[32];
	const char *dot = strchr(path, '.');
	json_t	   *target = event;
	const char *key = path;

	if (dot)
	{
		snprintf(parent, sizeof(parent), "%.*s", (int) (dot - path), path);
		target = json_object_get(event, parent);
		key = dot + 1;
	}
	if (value == NULL)
		json_object_del(target, key);
	else
		json_object_set_new(target, key, json_loads(value, JSON_DECODE_ANY, NULL));
}

static void
test_mutations(void)
{
	size_t		i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		const mutation *m = &cases[i];
		json_t	   *event = json_loads(edit_event, 0, NULL);
		char	   *text;
		rc_verdict	v;
		bool		want_valid = m->reason[0] == '\0';

		apply(event, m->path, m->value);
		if (m->path2)
			apply(event, m->path2, m->value2);
		text = json_dumps(event, JSON_COMPACT);
		rc_validate(text, strlen(text), &v);
		if (!tap_ok(v.valid == want_valid && strcmp(v.reason, m->reason) == 0,
					"%s: %s", m->name, want_valid ? "valid" : m->reason))
			tap_diag("  got valid=%d reason \"%s\" (%s)", v.valid, v.reason, v.message);
		if (!want_valid && v.message[0] == '\0')
			tap_ok(false, "%s: has a message", m->name);
		free(text);
		json_decref(event);
	}
}

static void
test_raw(void)
{
#define RAW(text, reason) {text, sizeof(text) - 1, reason}
	static const struct
	{
		const char *text;
		size_t		len;
		const char *reason;
	}			raw[] = {
		RAW("", "not_json"),
		RAW("   \n", "not_json"),
		RAW("{\"meta\":", "not_json"),
		RAW("{} trailing", "not_json"),
		RAW("{\"title\":\"\xff\"}", "not_json"),
		RAW("{\"title\":\"a\\u0000b\"}", "not_json"),
		RAW("{\"n\":99999999999999999999}", "not_json"),
		RAW("{\"a\":1}\0{\"b\":2}", "not_json"),
		RAW("null", "not_object"),
		RAW("[]", "not_object"),
		RAW("42", "not_object"),
		RAW("\"edit\"", "not_object"),
		RAW("{}", "missing_field:$schema"),
	};
#undef RAW
	const char *bad_id = "{\"$schema\":\"x\",\"meta\":{\"id\":\"x\\n\\u00e9\"}}";
	size_t		i;
	rc_verdict	v;

	for (i = 0; i < sizeof(raw) / sizeof(raw[0]); i++)
	{
		rc_validate(raw[i].text, raw[i].len, &v);
		if (!tap_ok(!v.valid && strcmp(v.reason, raw[i].reason) == 0,
					"raw input %zu: %s", i, raw[i].reason))
			tap_diag("  got valid=%d reason \"%s\" (%s)", v.valid, v.reason, v.message);
	}
	rc_validate(edit_event, strlen(edit_event), &v);
	tap_ok(v.valid && v.reason[0] == '\0' && v.message[0] == '\0' && !v.canary,
		   "a valid event has an empty reason and message");
	rc_validate(bad_id, strlen(bad_id), &v);
	tap_is_str(v.message, "meta.id must be a UUID (8-4-4-4-12 hex digits), got \"x???\"",
			   "messages show bad values in printable ASCII only");
}

/* The schema's maxLength for meta.uri counts characters, not bytes. */
static void
test_uri_length(void)
{
	json_t	   *event = json_loads(edit_event, 0, NULL);
	json_t	   *meta = json_object_get(event, "meta");
	size_t		n = 8192;
	char	   *uri = malloc(2 * n + 2);
	char	   *text;
	rc_verdict	v;

	for (size_t i = 0; i < n; i++)
		memcpy(uri + 2 * i, "\xc3\xa9", 2);	/* U+00E9: 2 bytes, 1 character */
	uri[2 * n] = '\0';
	json_object_set_new(meta, "uri", json_string(uri));
	text = json_dumps(event, JSON_COMPACT);
	rc_validate(text, strlen(text), &v);
	tap_ok(v.valid, "meta.uri of 8192 two-byte characters (16384 bytes) passes");
	free(text);

	memset(uri, 'a', n + 1);
	uri[n + 1] = '\0';
	json_object_set_new(meta, "uri", json_string(uri));
	text = json_dumps(event, JSON_COMPACT);
	rc_validate(text, strlen(text), &v);
	tap_is_str(v.reason, "too_long:meta.uri", "meta.uri of 8193 characters is too long");
	free(text);
	free(uri);
	json_decref(event);
}

static void
test_canary(void)
{
	/* Canaries copy the schema's example, so they fail the contract but must be told. */
	const char *canary = "{\"$schema\":\"/mediawiki/recentchange/1.0.1\",\"meta\":{"
		"\"dt\":\"2020-07-01T00:00:00Z\",\"stream\":\"mediawiki.recentchange\","
		"\"domain\":\"canary\",\"id\":\"0b6a3c2e-4f5d-4e7a-8b9c-1d2e3f4a5b6c\"}}";
	json_t	   *event = json_loads(edit_event, 0, NULL);
	rc_verdict	v;

	rc_validate(canary, strlen(canary), &v);
	tap_ok(v.canary && !v.valid, "a schema-example canary is flagged even though it fails");
	tap_ok(!rc_is_canary(event), "a real event is no canary");
	json_object_set_new(json_object_get(event, "meta"), "domain", json_string("canary"));
	tap_ok(rc_is_canary(event), "rc_is_canary on a parsed event");
	tap_ok(rc_validate_value(event, &v) && v.canary, "a well-formed canary is valid and flagged");
	tap_ok(!rc_is_canary(json_object_get(event, "meta")) && !rc_is_canary(NULL),
		   "rc_is_canary is false for non-events");
	json_decref(event);
}

/* Every line of the real sample passes; a failure names the line and the reason. */
static void
test_sample(const char *path)
{
	FILE	   *f = path ? fopen(path, "r") : NULL;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;
	long		lines = 0;
	long		failed = 0;
	long		canaries = 0;

	if (f == NULL)
	{
		tap_skip("every real sample event passes",
				 path ? "sample file not readable" : "no sample path given as argv[1]");
		return;
	}
	while ((len = getline(&line, &cap, f)) != -1)
	{
		rc_verdict	v;

		lines++;
		if (!rc_validate(line, (size_t) len, &v))
		{
			if (failed++ < 20)
				tap_diag("  line %ld: %s (%s)", lines, v.reason, v.message);
		}
		canaries += v.canary;
	}
	free(line);
	fclose(f);
	tap_ok(lines > 0, "the sample has events (%ld)", lines);
	tap_ok(failed == 0, "every real sample event passes (%ld of %ld failed)", failed, lines);
	tap_diag("sample: %ld events, %ld canaries", lines, canaries);
}

int
main(int argc, char **argv)
{
	test_mutations();
	test_raw();
	test_uri_length();
	test_canary();
	test_sample(argc > 1 ? argv[1] : NULL);
	return tap_done();
}
