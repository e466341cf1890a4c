/*
 * contract.c: checks one recentchange event against the contract lakehouse relies on
 * downstream (silver.edits reads these fields; bronze keeps whatever passed).
 *
 * Two layers in one table: the recentchange schema's own rules (it requires $schema,
 * meta, meta.dt and meta.stream, and gives a type to each field it names, checked when
 * the field is present), and what the pipeline needs on top (meta.id a UUID, meta.dt a
 * UTC time PostgreSQL reads, the fields silver uses present, 64-bit integer lengths and
 * revisions for edit and new). Checked against real captured events: every event in
 * the reference sample passes. Fields the schema does not name are free, as in the
 * schema (additionalProperties: true).
 */
#include "contract.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* What a field must hold. */
typedef enum rc_kind
{
	KIND_OBJECT,
	KIND_STRING,
	KIND_INTEGER,				/* a JSON integer, any 64-bit value (ids pass 2^32) */
	KIND_BOOLEAN,
	KIND_STRING_OR_NULL,
	KIND_INTEGER_OR_NULL,
	KIND_LOG_PARAMS,			/* an array, an object or a string */
	KIND_URI,					/* string of at most URI_MAX_CHARS characters */
	KIND_UUID,					/* string, 8-4-4-4-12 hex digits, either case */
	KIND_UTC_TIME,				/* string, YYYY-MM-DDTHH:MM:SS[.mmm] then Z or +00:00 */
	KIND_CHANGE_TYPE			/* string, one of change_types[] */
} rc_kind;

/* Which events a rule applies to. */
typedef enum rc_scope
{
	EVERY_EVENT,				/* required in every event */
	EDIT_AND_NEW,				/* required when type is edit or new */
	EDIT_ONLY_NEW_OPTIONAL,		/* required for edit; for new it may be absent or null
								 * (a page creation has no previous length or revision),
								 * and is checked when it holds a value */
	IF_PRESENT,					/* any event; checked only when the field is there */
	OTHER_TYPES_IF_PRESENT		/* like IF_PRESENT, for events other than edit and new
								 * (which the stricter rules above already cover) */
} rc_scope;

/* The schema's maxLength for meta.uri, in characters. */
#define URI_MAX_CHARS 8192

typedef struct rc_rule
{
	const char *path;			/* dotted path from the top-level object */
	rc_kind		kind;
	rc_scope	scope;
} rc_rule;

/*
 * THE CONTRACT. Rules run top to bottom and the first failure is the verdict, so a
 * parent comes before its children and `type` before the rules that depend on it.
 *
 * A field that is absent fails with missing_field:<path>; present with the wrong JSON
 * type (null included, unless the rule allows it) with bad_type:<path>; a string of the
 * wrong shape with bad_uuid:, bad_time:, bad_enum: or too_long:<path>.
 */
static const rc_rule contract[] = {
	{"$schema", KIND_STRING, EVERY_EVENT},	/* schema: required */
	{"meta", KIND_OBJECT, EVERY_EVENT},
	{"meta.id", KIND_UUID, EVERY_EVENT},	/* the dedup key in silver */
	{"meta.dt", KIND_UTC_TIME, EVERY_EVENT},	/* event time, drives the watermark */
	{"meta.stream", KIND_STRING, EVERY_EVENT},	/* schema: required */
	{"meta.domain", KIND_STRING, EVERY_EVENT},	/* "canary" marks monitoring events */
	{"meta.uri", KIND_URI, IF_PRESENT},
	{"meta.request_id", KIND_STRING, IF_PRESENT},
	{"type", KIND_CHANGE_TYPE, EVERY_EVENT},
	{"wiki", KIND_STRING, EVERY_EVENT},
	{"title", KIND_STRING, EVERY_EVENT},
	{"user", KIND_STRING, EVERY_EVENT},
	{"namespace", KIND_INTEGER, EVERY_EVENT},	/* of the target page, for log events too */
	{"timestamp", KIND_INTEGER, EVERY_EVENT},	/* Unix seconds; may lag meta.dt */
	{"bot", KIND_BOOLEAN, EVERY_EVENT},
	{"length", KIND_OBJECT, EDIT_AND_NEW},
	{"length.new", KIND_INTEGER, EDIT_AND_NEW},
	{"length.old", KIND_INTEGER, EDIT_ONLY_NEW_OPTIONAL},
	{"revision", KIND_OBJECT, EDIT_AND_NEW},
	{"revision.new", KIND_INTEGER, EDIT_AND_NEW},
	{"revision.old", KIND_INTEGER, EDIT_ONLY_NEW_OPTIONAL},
	/* The schema's types for the other fields it names. */
	{"length", KIND_OBJECT, OTHER_TYPES_IF_PRESENT},
	{"length.new", KIND_INTEGER_OR_NULL, OTHER_TYPES_IF_PRESENT},
	{"length.old", KIND_INTEGER_OR_NULL, OTHER_TYPES_IF_PRESENT},
	{"revision", KIND_OBJECT, OTHER_TYPES_IF_PRESENT},
	{"revision.new", KIND_INTEGER_OR_NULL, OTHER_TYPES_IF_PRESENT},
	{"revision.old", KIND_INTEGER_OR_NULL, OTHER_TYPES_IF_PRESENT},
	{"id", KIND_INTEGER_OR_NULL, IF_PRESENT},
	{"comment", KIND_STRING, IF_PRESENT},
	{"parsedcomment", KIND_STRING, IF_PRESENT},
	{"minor", KIND_BOOLEAN, IF_PRESENT},
	{"patrolled", KIND_BOOLEAN, IF_PRESENT},
	{"log_id", KIND_INTEGER_OR_NULL, IF_PRESENT},
	{"log_type", KIND_STRING_OR_NULL, IF_PRESENT},
	{"log_action", KIND_STRING, IF_PRESENT},
	{"log_action_comment", KIND_STRING_OR_NULL, IF_PRESENT},
	{"log_params", KIND_LOG_PARAMS, IF_PRESENT},
	{"server_name", KIND_STRING, IF_PRESENT},
	{"server_url", KIND_STRING, IF_PRESENT},
	{"server_script_path", KIND_STRING, IF_PRESENT},
};

/* rc_type values MediaWiki emits as strings (the schema also allows numbers; none seen). */
static const char *const change_types[] = {"edit", "new", "log", "categorize", "external"};

#define LENGTH_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Longest path segment in the table, with room to spare. */
#define PATH_SEGMENT_MAX 32

static void
verdict_fail(rc_verdict *out, const char *problem, const char *path, const char *fmt,...)
{
	va_list		ap;

	out->valid = false;
	if (path)
		snprintf(out->reason, sizeof(out->reason), "%s:%s", problem, path);
	else
		snprintf(out->reason, sizeof(out->reason), "%s", problem);
	va_start(ap, fmt);
	vsnprintf(out->message, sizeof(out->message), fmt, ap);
	va_end(ap);
}

/*
 * A short printable rendering of a bad value for the message, which may end up in a
 * Kafka header or a log line: non-printable and non-ASCII bytes become '?'.
 */
static void
quote_value(char *dst, size_t dst_size, const char *s, size_t len)
{
	const size_t shown_max = 40;
	size_t		shown = len < shown_max ? len : shown_max;
	size_t		n = 0;
	size_t		i;

	if (dst_size < shown + 6)
		shown = dst_size > 6 ? dst_size - 6 : 0;
	dst[n++] = '"';
	for (i = 0; i < shown; i++)
		dst[n++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	dst[n++] = '"';
	if (shown < len)
	{
		memcpy(dst + n, "...", 3);
		n += 3;
	}
	dst[n] = '\0';
}

static const char *
json_kind_name(const json_t *v)
{
	switch (json_typeof(v))
	{
		case JSON_OBJECT:
			return "an object";
		case JSON_ARRAY:
			return "an array";
		case JSON_STRING:
			return "a string";
		case JSON_INTEGER:
			return "an integer";
		case JSON_REAL:
			return "a non-integer number";
		case JSON_TRUE:
		case JSON_FALSE:
			return "a boolean";
		case JSON_NULL:
			return "null";
	}
	return "unknown";
}

/* Characters in valid UTF-8 text (jansson only hands out valid UTF-8): non-continuation bytes. */
static size_t
utf8_chars(const char *s, size_t len)
{
	size_t		n = 0;

	for (size_t i = 0; i < len; i++)
		n += ((unsigned char) s[i] & 0xC0) != 0x80;
	return n;
}

static bool
is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool
valid_uuid(const char *s, size_t len)
{
	size_t		i;

	if (len != 36)
		return false;
	for (i = 0; i < len; i++)
	{
		bool		hyphen_here = (i == 8 || i == 13 || i == 18 || i == 23);

		if (hyphen_here ? s[i] != '-' : !is_hex(s[i]))
			return false;
	}
	return true;
}

/* Reads n digits at s (already known to be digits). */
static int
digits_value(const char *s, int n)
{
	int			v = 0;

	while (n-- > 0)
		v = v * 10 + (*s++ - '0');
	return v;
}

static int
days_in_month(int year, int month)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool		leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

	return (month == 2 && leap) ? 29 : days[month - 1];
}

/*
 * ISO-8601 in UTC as EventStreams writes it: second precision in 2023 captures,
 * millisecond precision since. Calendar ranges are checked so that PostgreSQL will
 * accept the value as timestamptz later.
 */
static bool
valid_utc_time(const char *s, size_t len)
{
	/* "YYYY-MM-DDTHH:MM:SS": '#' stands for a digit. */
	static const char shape[] = "####-##-##T##:##:##";
	const size_t base = sizeof(shape) - 1;
	const char *zone;
	size_t		zone_len;
	size_t		i;
	int			year,
				month,
				day;

	if (len < base + 1)
		return false;
	for (i = 0; i < base; i++)
	{
		if (shape[i] == '#' ? !is_digit(s[i]) : s[i] != shape[i])
			return false;
	}
	zone = s + base;
	zone_len = len - base;
	if (zone[0] == '.')
	{
		if (zone_len < 4 || !is_digit(zone[1]) || !is_digit(zone[2]) || !is_digit(zone[3]))
			return false;
		zone += 4;
		zone_len -= 4;
	}
	if (!((zone_len == 1 && zone[0] == 'Z') ||
		  (zone_len == 6 && memcmp(zone, "+00:00", 6) == 0)))
		return false;

	year = digits_value(s, 4);
	month = digits_value(s + 5, 2);
	day = digits_value(s + 8, 2);
	return year >= 1 && month >= 1 && month <= 12 &&
		day >= 1 && day <= days_in_month(year, month) &&
		digits_value(s + 11, 2) <= 23 &&
		digits_value(s + 14, 2) <= 59 &&
		digits_value(s + 17, 2) <= 59;
}

/*
 * Follows a dotted path. NULL when a step is absent or its parent is not an object;
 * the table's order makes the latter impossible for the contract's own paths.
 */
static json_t *
lookup(const json_t *root, const char *path)
{
	json_t	   *node = (json_t *) root;

	while (node != NULL)
	{
		const char *dot = strchr(path, '.');
		char		key[PATH_SEGMENT_MAX];
		size_t		key_len;

		if (!json_is_object(node))
			return NULL;
		if (dot == NULL)
			return json_object_get(node, path);	/* the last segment: no copy needed */
		key_len = (size_t) (dot - path);
		if (key_len >= sizeof(key))
			return NULL;
		memcpy(key, path, key_len);
		key[key_len] = '\0';
		node = json_object_get(node, key);
		path = dot + 1;
	}
	return NULL;
}

static bool
type_is(const json_t *event, const char *wanted)
{
	const char *type = json_string_value(json_object_get(event, "type"));

	return type != NULL && strcmp(type, wanted) == 0;
}

/*
 * Checks one rule; returns false after filling out when it fails. edit and new_page say
 * what the event's type is (worked out once per event, not once per rule).
 */
static bool
check_rule(const json_t *event, const rc_rule *rule, bool edit, bool new_page, rc_verdict *out)
{
	json_t	   *value;
	bool		ok = false;
	const char *wanted = "";
	const char *text;
	size_t		text_len;
	char		shown[64];
	size_t		i;

	if ((rule->scope == EDIT_AND_NEW || rule->scope == EDIT_ONLY_NEW_OPTIONAL) && !edit && !new_page)
		return true;
	if (rule->scope == OTHER_TYPES_IF_PRESENT && (edit || new_page))
		return true;
	value = lookup(event, rule->path);
	if (rule->scope == EDIT_ONLY_NEW_OPTIONAL && new_page && (value == NULL || json_is_null(value)))
		return true;
	if ((rule->scope == IF_PRESENT || rule->scope == OTHER_TYPES_IF_PRESENT) && value == NULL)
		return true;
	if (value == NULL)
	{
		verdict_fail(out, "missing_field", rule->path, "%s is missing", rule->path);
		return false;
	}

	switch (rule->kind)
	{
		case KIND_OBJECT:
			ok = json_is_object(value);
			wanted = "an object";
			break;
		case KIND_INTEGER:
			ok = json_is_integer(value);
			wanted = "an integer";
			break;
		case KIND_BOOLEAN:
			ok = json_is_boolean(value);
			wanted = "a boolean";
			break;
		case KIND_STRING_OR_NULL:
			ok = json_is_string(value) || json_is_null(value);
			wanted = "a string or null";
			break;
		case KIND_INTEGER_OR_NULL:
			ok = json_is_integer(value) || json_is_null(value);
			wanted = "an integer or null";
			break;
		case KIND_LOG_PARAMS:
			ok = json_is_array(value) || json_is_object(value) || json_is_string(value);
			wanted = "an array, an object or a string";
			break;
		case KIND_STRING:
		case KIND_URI:
		case KIND_UUID:
		case KIND_UTC_TIME:
		case KIND_CHANGE_TYPE:
			ok = json_is_string(value);
			wanted = "a string";
			break;
	}
	if (!ok)
	{
		verdict_fail(out, "bad_type", rule->path, "%s must be %s, got %s",
					 rule->path, wanted, json_kind_name(value));
		return false;
	}
	if (rule->kind != KIND_UUID && rule->kind != KIND_UTC_TIME &&
		rule->kind != KIND_CHANGE_TYPE && rule->kind != KIND_URI)
		return true;

	/* The remaining kinds are strings of a given shape; shown is for the failures only. */
	text = json_string_value(value);
	text_len = json_string_length(value);

	if (rule->kind == KIND_URI)
	{
		size_t		chars = utf8_chars(text, text_len);

		if (chars <= URI_MAX_CHARS)
			return true;
		verdict_fail(out, "too_long", rule->path, "%s must be at most %d characters, got %zu",
					 rule->path, URI_MAX_CHARS, chars);
		return false;
	}

	if (rule->kind == KIND_UUID)
	{
		if (valid_uuid(text, text_len))
			return true;
		quote_value(shown, sizeof(shown), text, text_len);
		verdict_fail(out, "bad_uuid", rule->path,
					 "%s must be a UUID (8-4-4-4-12 hex digits), got %s", rule->path, shown);
		return false;
	}
	if (rule->kind == KIND_UTC_TIME)
	{
		if (valid_utc_time(text, text_len))
			return true;
		quote_value(shown, sizeof(shown), text, text_len);
		verdict_fail(out, "bad_time", rule->path,
					 "%s must be a UTC time like 2026-11-01T10:00:00.123Z, got %s",
					 rule->path, shown);
		return false;
	}
	for (i = 0; i < LENGTH_OF(change_types); i++)
	{
		if (strlen(change_types[i]) == text_len && memcmp(change_types[i], text, text_len) == 0)
			return true;
	}
	quote_value(shown, sizeof(shown), text, text_len);
	verdict_fail(out, "bad_enum", rule->path,
				 "%s must be one of edit, new, log, categorize, external, got %s",
				 rule->path, shown);
	return false;
}

bool
rc_is_canary(const json_t *event)
{
	const char *domain = json_string_value(lookup(event, "meta.domain"));

	return domain != NULL && strcmp(domain, "canary") == 0;
}

bool
rc_validate_value(const json_t *event, rc_verdict *out)
{
	size_t		i;
	bool		edit;
	bool		new_page;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(event))
	{
		verdict_fail(out, "not_object", NULL, "the event must be a JSON object, got %s",
					 event ? json_kind_name(event) : "nothing");
		return false;
	}
	out->canary = rc_is_canary(event);
	edit = type_is(event, "edit");
	new_page = type_is(event, "new");
	for (i = 0; i < LENGTH_OF(contract); i++)
	{
		if (!check_rule(event, &contract[i], edit, new_page, out))
			return false;
	}
	out->valid = true;
	return true;
}

bool
rc_validate(const char *json, size_t len, rc_verdict *out)
{
	json_error_t error;
	json_t	   *event;
	bool		valid;

	memset(out, 0, sizeof(*out));
	if (json == NULL || len == 0)
	{
		verdict_fail(out, "not_json", NULL, "the event is empty");
		return false;
	}

	/* DECODE_ANY so that a bare scalar is reported as not_object rather than not_json. */
	event = json_loadb(json, len, JSON_DECODE_ANY, &error);
	if (event == NULL)
	{
		verdict_fail(out, "not_json", NULL, "invalid JSON at line %d column %d: %s",
					 error.line, error.column, error.text);
		return false;
	}
	valid = rc_validate_value(event, out);
	json_decref(event);
	return valid;
}
