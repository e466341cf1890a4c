/*
 * message_check.c: the gate between Kafka bytes and bronze.payload (jsonb).
 *
 * lh_message_problem() runs on every message before the batch's COPY, without raising an
 * error: the cheap checks (null, empty, size, UTF-8, NUL bytes, nesting depth, which also
 * keeps jsonb's recursive parser far from the stack limit). The full JSON check,
 * lh_json_problem(), runs only when a batch's COPY was refused (see batch_writer.c): jsonb
 * input parses every payload anyway, so parsing twice on the common path would be waste.
 * It uses PostgreSQL's own JSON parser with escape processing on, as jsonb input does, so
 * what passes it also loads as jsonb (including the jsonb-only refusal of \u0000).
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "message_check.h"

/* Deepest nesting of {} and [] outside strings, stopping early past the limit. */
static int
json_depth_exceeds(const char *s, size_t len, int limit)
{
	int			depth = 0;
	bool		in_string = false;

	for (size_t i = 0; i < len; i++)
	{
		char		c = s[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if (c == '{' || c == '[')
		{
			if (++depth > limit)
				return true;
		}
		else if (c == '}' || c == ']')
			depth--;
	}
	return false;
}

static bool
valid_utf8_text(const char *s, size_t len)
{
	return pg_verify_mbstr(PG_UTF8, s, (int) len, true);
}

char *
lh_message_problem(const char *value, size_t value_len,
				   const char *key, size_t key_len, size_t max_bytes)
{
	if (value == NULL)
		return pstrdup("null value (tombstone)");
	if (value_len == 0)
		return pstrdup("empty value");
	if (value_len > max_bytes)
		return psprintf("value of %zu bytes exceeds lakehouse.max_message_bytes (%zu)",
						value_len, max_bytes);
	if (key != NULL && (memchr(key, '\0', key_len) != NULL || !valid_utf8_text(key, key_len)))
		return pstrdup("key is not valid UTF-8 text");
	if (memchr(value, '\0', value_len) != NULL)
		return pstrdup("value contains a NUL byte");
	if (!valid_utf8_text(value, value_len))
		return pstrdup("value is not valid UTF-8");
	if (json_depth_exceeds(value, value_len, LH_MAX_JSON_DEPTH))
		return psprintf("JSON nested deeper than %d levels", LH_MAX_JSON_DEPTH);
	return NULL;
}

char *
lh_json_problem(const char *value, size_t value_len)
{
	JsonLexContext *lex;
	JsonParseErrorType err;

	lex = makeJsonLexContextCstringLen((char *) value, (int) value_len, PG_UTF8, true);
	err = pg_parse_json(lex, &nullSemAction);
	if (err != JSON_SUCCESS)
		return psprintf("not valid JSON: %s", json_errdetail(err, lex));
	return NULL;
}
