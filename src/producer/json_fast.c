/*
 * json_fast.c: reads a JSON object into jansson values without jansson's lexer.
 *
 * Why: jansson's parser reads one byte at a time through a stream layer and saves each
 * byte separately; a 1.3 KB recentchange event costs about 18 us on the benchmark
 * machine, nearly all of the producer's work (benchmarks/results.md). This reader scans
 * the same grammar with a table lookup per byte and hands jansson only the finished
 * values (json_object, json_stringn_nocheck, json_integer, ...), so the document the
 * contract checks is still a jansson document, built the way json_loadb builds it.
 *
 * It is an accelerator, not a second judge. It accepts only what it is sure jansson
 * accepts and builds the same value: RFC 8259 syntax, strict UTF-8 (no overlong forms,
 * no surrogates, nothing above U+10FFFF), escapes decoded as jansson decodes them,
 * duplicate keys resolved the way json_object_set resolves them (the last wins).
 * Everything else, including what jansson might accept but this reader leaves alone
 * (real numbers, integers of 19 digits or more, \u0000, deep nesting, a top-level
 * scalar), returns NULL, and the caller parses with jansson, whose verdict and error
 * text are the ones that count. test/producer/test_json_fast.c checks both directions
 * on real, generated and mutated events.
 */
#include "json_fast.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct jf_reader
{
	const unsigned char *p;
	const unsigned char *end;
	int			depth;
	char	   *buf;			/* decoded text of a string with escapes */
	size_t		cap;
} jf_reader;

/*
 * A byte that stands for itself inside a string: printable ASCII other than the quote
 * and the backslash. Control characters (< 0x20) are errors; bytes >= 0x80 start UTF-8
 * sequences, checked one by one.
 */
static inline bool
plain_byte(unsigned char c)
{
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

static json_t *read_value(jf_reader *r);

static inline void
skip_space(jf_reader *r)
{
	while (r->p < r->end &&
		   (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
		r->p++;
}

/*
 * The length of the well-formed UTF-8 sequence at p (whose first byte is >= 0x80), or
 * 0. The ranges are Unicode's table of well-formed byte sequences, which is what
 * jansson's utf8_check_full accepts.
 */
static int
utf8_sequence(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0],
				lo = 0x80,
				hi = 0xBF;
	int			n;

	if (c >= 0xC2 && c <= 0xDF)
		n = 2;
	else if (c >= 0xE0 && c <= 0xEF)
	{
		n = 3;
		if (c == 0xE0)
			lo = 0xA0;			/* overlong */
		else if (c == 0xED)
			hi = 0x9F;			/* surrogates */
	}
	else if (c >= 0xF0 && c <= 0xF4)
	{
		n = 4;
		if (c == 0xF0)
			lo = 0x90;			/* overlong */
		else if (c == 0xF4)
			hi = 0x8F;			/* above U+10FFFF */
	}
	else
		return 0;
	if (end - p < n || p[1] < lo || p[1] > hi)
		return 0;
	for (int i = 2; i < n; i++)
		if ((p[i] & 0xC0) != 0x80)
			return 0;
	return n;
}

/* Makes room for need more bytes in the decoding buffer after used. */
static bool
reserve(jf_reader *r, size_t used, size_t need)
{
	size_t		cap = r->cap ? r->cap : 256;
	char	   *grown;

	if (used + need <= r->cap)
		return true;
	while (cap < used + need)
		cap *= 2;
	grown = realloc(r->buf, cap);
	if (grown == NULL)
		return false;
	r->buf = grown;
	r->cap = cap;
	return true;
}

static int
hex4(const unsigned char *p)
{
	int			v = 0;

	for (int i = 0; i < 4; i++)
	{
		unsigned char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/*
 * Decodes one escape at r->p (just after the backslash) into the buffer at *used.
 * Code points go out as UTF-8, a surrogate pair as one code point; a lone surrogate or
 * \u0000 (both refused by jansson) fail.
 */
static bool
decode_escape(jf_reader *r, size_t *used)
{
	const unsigned char *p = r->p;
	long		cp;
	char	   *o;

	if (p >= r->end || !reserve(r, *used, 4))
		return false;
	o = r->buf + *used;
	switch (*p)
	{
		case '"':
		case '\\':
		case '/':
			*o = (char) *p;
			break;
		case 'b':
			*o = '\b';
			break;
		case 'f':
			*o = '\f';
			break;
		case 'n':
			*o = '\n';
			break;
		case 'r':
			*o = '\r';
			break;
		case 't':
			*o = '\t';
			break;
		case 'u':
			if (r->end - p < 5 || (cp = hex4(p + 1)) <= 0)
				return false;
			p += 4;
			if (cp >= 0xDC00 && cp <= 0xDFFF)
				return false;
			if (cp >= 0xD800 && cp <= 0xDBFF)
			{
				long		low;

				if (r->end - p < 7 || p[1] != '\\' || p[2] != 'u' ||
					(low = hex4(p + 3)) < 0xDC00 || low > 0xDFFF)
					return false;
				cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
				p += 6;
			}
			if (cp < 0x80)
				o[0] = (char) cp;
			else if (cp < 0x800)
			{
				o[0] = (char) (0xC0 | (cp >> 6));
				o[1] = (char) (0x80 | (cp & 0x3F));
				*used += 1;
			}
			else if (cp < 0x10000)
			{
				o[0] = (char) (0xE0 | (cp >> 12));
				o[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
				o[2] = (char) (0x80 | (cp & 0x3F));
				*used += 2;
			}
			else
			{
				o[0] = (char) (0xF0 | (cp >> 18));
				o[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
				o[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
				o[3] = (char) (0x80 | (cp & 0x3F));
				*used += 3;
			}
			break;
		default:
			return false;
	}
	*used += 1;
	r->p = p + 1;
	return true;
}

/*
 * Skips plain bytes and well-formed UTF-8 from q. Returns where the next quote or
 * backslash is; NULL for a control character, bad UTF-8 or the end of the input.
 */
static const unsigned char *
scan_text(const unsigned char *q, const unsigned char *end)
{
	for (;;)
	{
		int			n;

		while (q < end && plain_byte(*q))
			q++;
		if (q >= end)
			return NULL;
		if (*q == '"' || *q == '\\')
			return q;
		if (*q < 0x80 || (n = utf8_sequence(q, end)) == 0)
			return NULL;
		q += n;
	}
}

/*
 * Reads a string whose opening quote r->p has passed. Without escapes the text is the
 * input itself (*s points into it); with escapes it is decoded into r->buf, valid until
 * the next string is read.
 */
static bool
read_string(jf_reader *r, const char **s, size_t *len)
{
	const unsigned char *q = scan_text(r->p, r->end);
	size_t		used;

	if (q == NULL)
		return false;
	if (*q == '"')
	{
		*s = (const char *) r->p;
		*len = (size_t) (q - r->p);
		r->p = q + 1;
		return true;
	}

	/* An escape: decode from here on, copying the plain runs between escapes. */
	used = (size_t) (q - r->p);
	if (!reserve(r, 0, used + 4))
		return false;
	memcpy(r->buf, r->p, used);
	r->p = q + 1;
	for (;;)
	{
		const unsigned char *run;

		if (!decode_escape(r, &used))
			return false;
		run = r->p;
		if ((q = scan_text(run, r->end)) == NULL ||
			!reserve(r, used, (size_t) (q - run)))
			return false;
		memcpy(r->buf + used, run, (size_t) (q - run));
		used += (size_t) (q - run);
		r->p = q + 1;
		if (*q == '"')
		{
			*s = r->buf;
			*len = used;
			return true;
		}
	}
}

/*
 * An integer of at most 18 digits (so it fits json_int_t); a real number, a longer
 * integer or a malformed number return NULL for jansson to judge.
 */
static json_t *
read_number(jf_reader *r)
{
	const unsigned char *p = r->p;
	bool		negative = false;
	long long	v = 0;
	int			digits = 0;

	if (*p == '-')
	{
		negative = true;
		p++;
	}
	if (p >= r->end || *p < '0' || *p > '9')
		return NULL;
	if (*p == '0')
		p++;					/* a leading zero stands alone: "01" is caught below */
	else
		while (p < r->end && *p >= '0' && *p <= '9')
		{
			if (++digits > 18)
				return NULL;
			v = v * 10 + (*p++ - '0');
		}
	if (p < r->end && (*p == '.' || *p == 'e' || *p == 'E' || (*p >= '0' && *p <= '9')))
		return NULL;
	r->p = p;
	return json_integer(negative ? -v : v);
}

static json_t *
read_literal(jf_reader *r, const char *word, size_t n, json_t *value)
{
	if ((size_t) (r->end - r->p) < n || memcmp(r->p, word, n) != 0)
		return NULL;
	r->p += n;
	return value;
}

/* The members of an object whose '{' r->p has passed. */
static json_t *
read_object(jf_reader *r)
{
	json_t	   *object = json_object();

	if (object == NULL)
		return NULL;
	skip_space(r);
	if (r->p < r->end && *r->p == '}')
	{
		r->p++;
		return object;
	}
	for (;;)
	{
		const char *key;
		size_t		keylen;
		char	   *decoded_key = NULL;
		json_t	   *value;

		skip_space(r);
		if (r->p >= r->end || *r->p != '"')
			break;
		r->p++;
		if (!read_string(r, &key, &keylen))
			break;
		if (key == r->buf)
		{
			/* The value may be decoded into the same buffer: keep the key apart. */
			if ((decoded_key = malloc(keylen ? keylen : 1)) == NULL)
				break;
			memcpy(decoded_key, key, keylen);
			key = decoded_key;
		}
		skip_space(r);
		if (r->p >= r->end || *r->p != ':')
		{
			free(decoded_key);
			break;
		}
		r->p++;
		value = read_value(r);
		/* jansson's own parser sets members this way: the last of two equal keys wins. */
		if (value == NULL || json_object_setn_new_nocheck(object, key, keylen, value) != 0)
		{
			free(decoded_key);
			break;
		}
		free(decoded_key);
		skip_space(r);
		if (r->p < r->end && *r->p == ',')
		{
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == '}')
		{
			r->p++;
			return object;
		}
		break;
	}
	json_decref(object);
	return NULL;
}

/* The elements of an array whose '[' r->p has passed. */
static json_t *
read_array(jf_reader *r)
{
	json_t	   *array = json_array();

	if (array == NULL)
		return NULL;
	skip_space(r);
	if (r->p < r->end && *r->p == ']')
	{
		r->p++;
		return array;
	}
	for (;;)
	{
		json_t	   *value = read_value(r);

		if (value == NULL || json_array_append_new(array, value) != 0)
			break;
		skip_space(r);
		if (r->p < r->end && *r->p == ',')
		{
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == ']')
		{
			r->p++;
			return array;
		}
		break;
	}
	json_decref(array);
	return NULL;
}

static json_t *
read_value(jf_reader *r)
{
	json_t	   *value = NULL;
	const char *s;
	size_t		len;

	skip_space(r);
	if (r->p >= r->end)
		return NULL;
	switch (*r->p)
	{
		case '{':
		case '[':
			if (r->depth >= JF_MAX_DEPTH)
				return NULL;
			r->depth++;
			value = *r->p++ == '{' ? read_object(r) : read_array(r);
			r->depth--;
			return value;
		case '"':
			r->p++;
			return read_string(r, &s, &len) ? json_stringn_nocheck(s, len) : NULL;
		case 't':
			return read_literal(r, "true", 4, json_true());
		case 'f':
			return read_literal(r, "false", 5, json_false());
		case 'n':
			return read_literal(r, "null", 4, json_null());
		default:
			return read_number(r);
	}
}

json_t *
jf_load_object(const char *buf, size_t len)
{
	jf_reader	r = {(const unsigned char *) buf, (const unsigned char *) buf + len, 0, NULL, 0};
	json_t	   *value;

	if (buf == NULL)
		return NULL;
	skip_space(&r);
	if (r.p >= r.end || *r.p != '{')
		return NULL;			/* scalars, arrays and errors: jansson's to judge */
	value = read_value(&r);
	skip_space(&r);
	if (value != NULL && r.p != r.end)
	{
		json_decref(value);		/* trailing text */
		value = NULL;
	}
	free(r.buf);
	return value;
}
