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

/*
 * Deepest nesting of {} and [] outside strings, stopping early past the limit. Runs on
 * every message, so string contents (most of an event's bytes) are skipped with memchr
 * to the next quote rather than looked at byte by byte: a quote ends the string unless
 * an odd number of backslashes precede it.
 */
static bool
json_depth_exceeds(const char *s, size_t len, int limit)
{
	const char *p = s;
	const char *end = s + len;
	int			depth = 0;

	while (p < end)
	{
		char		c = *p++;

		if (c == '"')
		{
			for (;;)
			{
				const char *quote = memchr(p, '"', end - p);
				const char *b;

				if (quote == NULL)
					return false;	/* unterminated: the JSON parser will say so */
				for (b = quote; b > p && b[-1] == '\\'; b--)
					;
				p = quote + 1;
				if ((quote - b) % 2 == 0)
					break;
			}
		}
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
	char	   *problem = NULL;

#if PG_VERSION_NUM >= 170000
	/* PostgreSQL 17 takes the context to fill and owns the error text in it. */
	JsonLexContext lex_buf;

	lex = makeJsonLexContextCstringLen(&lex_buf, value, value_len, PG_UTF8, true);
#else
	lex = makeJsonLexContextCstringLen((char *) value, (int) value_len, PG_UTF8, true);
#endif
	err = pg_parse_json(lex, &nullSemAction);
	if (err != JSON_SUCCESS)
		problem = psprintf("not valid JSON: %s", json_errdetail(err, lex));
#if PG_VERSION_NUM >= 170000
	freeJsonLexContext(lex);
#endif
	return problem;
}
