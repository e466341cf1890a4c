/*
 * test_json_fast.c: unit tests for the fast JSON reader (src/producer/json_fast.c),
 * printed as TAP, always against jansson itself.
 *
 * The reader may decline anything, but what it accepts must be accepted by json_loadb
 * (JSON_DECODE_ANY, the flags the contract uses) and be json_equal to jansson's value.
 * Checked on hand-made cases (each one says what the reader must do with it), on
 * generated events and the real sample (argv[1], when present), all of which the reader
 * must take itself so that the fast path is really the one used, and on 300,000
 * deterministic mutants of those events (bytes replaced, dropped, inserted, spans
 * repeated, cut short).
 */
#include <stdint.h>
#include <stdlib.h>

#include "generate.h"
#include "json_fast.h"
#include "tap.h"

/* What the reader must do with a case. */
typedef enum
{
	TAKE,						/* read it, equal to jansson's value */
	DECLINE_VALID,				/* leave it to jansson, which accepts it */
	DECLINE_INVALID				/* leave it to jansson, which refuses it */
} expectation;

typedef struct hand_case
{
	const char *name;
	const char *text;
	size_t		len;			/* 0: strlen(text) */
	expectation want;
} hand_case;

#define NUL_LEN(s) (sizeof(s) - 1)

static const hand_case cases[] = {
	{"empty object", "{}", 0, TAKE},
	{"whitespace of every kind around", " \t\r\n{ \t\r\n} \t\r\n", 0, TAKE},
	{"scalars of every kind", "{\"a\":1,\"b\":-0,\"c\":true,\"d\":false,\"e\":null,\"f\":\"\"}", 0, TAKE},
	{"nested arrays and objects", "{\"a\":[1,[],{},[{\"b\":[null]}]],\"c\":{\"d\":{}}}", 0, TAKE},
	{"18-digit integers", "{\"a\":999999999999999999,\"b\":-999999999999999999}", 0, TAKE},
	{"every short escape", "{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", 0, TAKE},
	{"\\u escapes of 1, 2 and 3 UTF-8 bytes, either case", "{\"a\":\"\\u0041\\u00e9\\u00E9\\u20ac\\uFFFF\"}", 0, TAKE},
	{"a surrogate pair", "{\"a\":\"\\ud83d\\ude00 \\uD834\\uDD1E\"}", 0, TAKE},
	{"raw UTF-8 of 2, 3 and 4 bytes at their limits",
	 "{\"a\":\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"}", 0, TAKE},
	{"DEL is a plain byte", "{\"a\":\"\x7f\"}", 0, TAKE},
	{"escaped key, escaped value (one decoding buffer)", "{\"k\\u00e9y\":\"v\\\"w\",\"x\\ny\":{\"\\t\":\"\\\\\"}}", 0, TAKE},
	{"duplicate keys: the last wins, as in jansson", "{\"a\":1,\"b\":2,\"a\":{\"c\":3}}", 0, TAKE},
	{"empty key", "{\"\":\"\"}", 0, TAKE},
	{"an escape after 300 plain bytes (the buffer grows)",
	 "{\"a\":\"0123456789012345678901234567890123456789012345678901234567890123456789"
	 "0123456789012345678901234567890123456789012345678901234567890123456789"
	 "0123456789012345678901234567890123456789012345678901234567890123456789"
	 "0123456789012345678901234567890123456789012345678901234567890123456789"
	 "01234567890123456789\\n0123456789\\u00e9\"}", 0, TAKE},

	{"a real number", "{\"a\":1.5}", 0, DECLINE_VALID},
	{"an exponent", "{\"a\":1e3}", 0, DECLINE_VALID},
	{"a 19-digit integer", "{\"a\":1234567890123456789}", 0, DECLINE_VALID},
	{"a 19-digit negative integer", "{\"a\":-1234567890123456789}", 0, DECLINE_VALID},
	{"a top-level array", "[1,2]", 0, DECLINE_VALID},
	{"a top-level string", "\"x\"", 0, DECLINE_VALID},
	{"a top-level number", "42", 0, DECLINE_VALID},

	{"an integer beyond 64 bits", "{\"a\":12345678901234567890}", 0, DECLINE_INVALID},
	{"empty input", "", 0, DECLINE_INVALID},
	{"only whitespace", "  \n", 0, DECLINE_INVALID},
	{"leading zero", "{\"a\":01}", 0, DECLINE_INVALID},
	{"minus alone", "{\"a\":-}", 0, DECLINE_INVALID},
	{"minus then space", "{\"a\":- 1}", 0, DECLINE_INVALID},
	{"plus sign", "{\"a\":+1}", 0, DECLINE_INVALID},
	{"trailing comma in object", "{\"a\":1,}", 0, DECLINE_INVALID},
	{"trailing comma in array", "{\"a\":[1,]}", 0, DECLINE_INVALID},
	{"missing colon", "{\"a\" 1}", 0, DECLINE_INVALID},
	{"missing comma", "{\"a\":1 \"b\":2}", 0, DECLINE_INVALID},
	{"unquoted key", "{a:1}", 0, DECLINE_INVALID},
	{"single quotes", "{'a':1}", 0, DECLINE_INVALID},
	{"cut-off literal", "{\"a\":tru}", 0, DECLINE_INVALID},
	{"literal with a tail", "{\"a\":truex}", 0, DECLINE_INVALID},
	{"number with a tail", "{\"a\":12x}", 0, DECLINE_INVALID},
	{"unterminated string", "{\"a\":\"b", 0, DECLINE_INVALID},
	{"unclosed array", "{\"a\":[1,2}", 0, DECLINE_INVALID},
	{"unclosed object", "{\"a\":1", 0, DECLINE_INVALID},
	{"trailing text", "{} x", 0, DECLINE_INVALID},
	{"two documents", "{}{}", 0, DECLINE_INVALID},
	{"a NUL byte after the document", "{}\0", NUL_LEN("{}\0"), DECLINE_INVALID},
	{"a raw NUL byte in a string", "{\"a\":\"\0\"}", NUL_LEN("{\"a\":\"\0\"}"), DECLINE_INVALID},
	{"\\u0000", "{\"a\":\"\\u0000\"}", 0, DECLINE_INVALID},
	{"a lone high surrogate", "{\"a\":\"\\ud800\"}", 0, DECLINE_INVALID},
	{"a lone low surrogate", "{\"a\":\"\\udc00\"}", 0, DECLINE_INVALID},
	{"a high surrogate before a non-surrogate", "{\"a\":\"\\ud800\\u0041\"}", 0, DECLINE_INVALID},
	{"unknown escape", "{\"a\":\"\\x\"}", 0, DECLINE_INVALID},
	{"bad hex digit", "{\"a\":\"\\u12g4\"}", 0, DECLINE_INVALID},
	{"short \\u escape at the end", "{\"a\":\"\\u12\"}", 0, DECLINE_INVALID},
	{"a raw control character", "{\"a\":\"\x01\"}", 0, DECLINE_INVALID},
	{"a raw newline in a string", "{\"a\":\"x\ny\"}", 0, DECLINE_INVALID},
	{"overlong 2-byte form", "{\"a\":\"\xc0\xaf\"}", 0, DECLINE_INVALID},
	{"overlong 3-byte form", "{\"a\":\"\xe0\x80\xaf\"}", 0, DECLINE_INVALID},
	{"overlong 4-byte form", "{\"a\":\"\xf0\x80\x80\xaf\"}", 0, DECLINE_INVALID},
	{"an encoded surrogate", "{\"a\":\"\xed\xa0\x80\"}", 0, DECLINE_INVALID},
	{"above U+10FFFF", "{\"a\":\"\xf4\x90\x80\x80\"}", 0, DECLINE_INVALID},
	{"byte 0xF5", "{\"a\":\"\xf5\x80\x80\x80\"}", 0, DECLINE_INVALID},
	{"byte 0xFF", "{\"a\":\"\xff\"}", 0, DECLINE_INVALID},
	{"a lone continuation byte", "{\"a\":\"\x80\"}", 0, DECLINE_INVALID},
	{"a sequence cut by the quote", "{\"a\":\"\xe2\x82\"}", 0, DECLINE_INVALID},
	{"a bad second continuation byte", "{\"a\":\"\xe2\x82\x41\"}", 0, DECLINE_INVALID},
	{"invalid UTF-8 in a key", "{\"\xc3\":1}", 0, DECLINE_INVALID},
	{"a byte-order mark", "\xef\xbb\xbf{}", 0, DECLINE_INVALID},
};

static const char *const want_name[] = {"read", "declined (jansson accepts)", "declined (jansson refuses)"};

static void
test_hand_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		const hand_case *c = &cases[i];
		size_t		len = c->len ? c->len : strlen(c->text);
		json_t	   *fast = jf_load_object(c->text, len);
		json_t	   *ref = json_loadb(c->text, len, JSON_DECODE_ANY, NULL);
		bool		ok;

		if (c->want == TAKE)
			ok = fast != NULL && ref != NULL && json_equal(fast, ref);
		else
			ok = fast == NULL && (ref != NULL) == (c->want == DECLINE_VALID);
		tap_ok(ok, "%s: %s", c->name, want_name[c->want]);
		json_decref(fast);
		json_decref(ref);
	}
}

/* Deep nesting is declined, also at the depth jansson itself still reads. */
static void
test_depth(void)
{
	char		text[2 * JF_MAX_DEPTH + 16];
	int			n;
	json_t	   *fast;

	for (int depth = JF_MAX_DEPTH; depth <= JF_MAX_DEPTH + 1; depth++)
	{
		/* {"a":[[...]]}: the object and depth - 1 arrays */
		n = sprintf(text, "{\"a\":");
		for (int i = 1; i < depth; i++)
			text[n++] = '[';
		for (int i = 1; i < depth; i++)
			text[n++] = ']';
		text[n++] = '}';
		fast = jf_load_object(text, (size_t) n);
		tap_ok((fast != NULL) == (depth <= JF_MAX_DEPTH),
			   "nesting %d deep is %s", depth, depth <= JF_MAX_DEPTH ? "read" : "declined");
		json_decref(fast);
	}
}

/* A growing set of texts the reader must take: generated events, then the sample's. */
typedef struct corpus
{
	char	  **text;
	size_t	   *len;
	size_t		n;
	size_t		cap;
} corpus;

static void
corpus_add(corpus *c, const char *text, size_t len)
{
	if (c->n == c->cap)
	{
		c->cap = c->cap ? c->cap * 2 : 256;
		c->text = realloc(c->text, c->cap * sizeof(*c->text));
		c->len = realloc(c->len, c->cap * sizeof(*c->len));
		if (c->text == NULL || c->len == NULL)
			abort();
	}
	c->text[c->n] = malloc(len ? len : 1);
	if (c->text[c->n] == NULL)
		abort();
	memcpy(c->text[c->n], text, len);
	c->len[c->n++] = len;
}

/* Every text of c from first on is read, and equals jansson's value. */
static void
check_all_read(const corpus *c, size_t first, const char *what)
{
	long		declined = 0,
				differ = 0;

	for (size_t i = first; i < c->n; i++)
	{
		json_t	   *fast = jf_load_object(c->text[i], c->len[i]);
		json_t	   *ref = json_loadb(c->text[i], c->len[i], JSON_DECODE_ANY, NULL);

		if (fast == NULL)
			declined++;
		else if (ref == NULL || !json_equal(fast, ref))
			differ++;
		json_decref(fast);
		json_decref(ref);
	}
	tap_ok(c->n > first, "%s: %zu events", what, c->n - first);
	tap_ok(declined == 0, "%s: the reader takes every one (%ld declined)", what, declined);
	tap_ok(differ == 0, "%s: each equals jansson's value (%ld differ)", what, differ);
}

static void
add_generated(corpus *c, int n)
{
	gen_state	g;

	gen_init(&g, 11);
	for (int i = 0; i < n; i++)
	{
		char	   *ev = gen_event(&g);

		corpus_add(c, ev, strlen(ev));
		free(ev);
	}
}

/* Adds the sample's lines (newline left out); false when there is no sample. */
static bool
add_sample(corpus *c, const char *path)
{
	FILE	   *f = path ? fopen(path, "r") : NULL;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;

	if (f == NULL)
		return false;
	while ((len = getline(&line, &cap, f)) != -1)
	{
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		corpus_add(c, line, (size_t) len);
	}
	free(line);
	fclose(f);
	return true;
}

static uint64_t
next_random(uint64_t *s)
{
	/* splitmix64: fixed seed, same mutants on every run */
	uint64_t	z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Bytes that matter to the grammar, to UTF-8 or to escapes, and a few that do not. */
static const unsigned char interesting[] = {
	'"', '\\', '{', '}', '[', ']', ',', ':', ' ', '\n', '0', '1', '9', '-', '+', '.', 'e',
	'E', 'u', 'n', 't', 'f', 'a', 'd', 'D', 0x00, 0x01, 0x1f, 0x7f, 0x80, 0xbf, 0xc0, 0xc2,
	0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff,
};

/* One to three random edits of text into out; returns the new length. */
static size_t
mutate(uint64_t *rng, const char *text, size_t len, char *out)
{
	int			edits = 1 + (int) (next_random(rng) % 3);

	memcpy(out, text, len);
	for (int e = 0; e < edits && len > 0; e++)
	{
		size_t		at = (size_t) (next_random(rng) % len);
		unsigned char byte = (next_random(rng) & 1) ?
			interesting[next_random(rng) % sizeof(interesting)] :
			(unsigned char) next_random(rng);

		switch (next_random(rng) % 5)
		{
			case 0:				/* replace */
				out[at] = (char) byte;
				break;
			case 1:				/* drop */
				memmove(out + at, out + at + 1, len - at - 1);
				len--;
				break;
			case 2:				/* insert */
				memmove(out + at + 1, out + at, len - at);
				out[at] = (char) byte;
				len++;
				break;
			case 3:				/* repeat a span of up to 8 bytes */
				{
					size_t		span = 1 + (size_t) (next_random(rng) % 8);

					if (span > len - at)
						span = len - at;
					memmove(out + at + span, out + at, len - at);
					len += span;
				}
				break;
			default:			/* cut short */
				len = at;
				break;
		}
	}
	return len;
}

static void
test_mutants(const corpus *c, long count)
{
	uint64_t	rng = 20261129;
	long		wrong_accept = 0,
				differ = 0,
				both_read = 0,
				left_to_jansson_valid = 0,
				both_refuse = 0;
	size_t		longest = 0;
	char	   *out;

	for (size_t i = 0; i < c->n; i++)
		if (c->len[i] > longest)
			longest = c->len[i];
	out = malloc(longest + 3 * 8 + 3);	/* three edits, each at most 8 bytes longer */
	if (out == NULL)
		abort();

	for (long m = 0; m < count; m++)
	{
		size_t		i = (size_t) (next_random(&rng) % c->n);
		size_t		len = mutate(&rng, c->text[i], c->len[i], out);
		json_t	   *fast = jf_load_object(out, len);
		json_t	   *ref = json_loadb(out, len, JSON_DECODE_ANY, NULL);

		if (fast != NULL && ref == NULL)
		{
			if (wrong_accept++ < 5)
				tap_diag("  read what jansson refuses: %.*s", (int) (len > 200 ? 200 : len), out);
		}
		else if (fast != NULL && !json_equal(fast, ref))
		{
			if (differ++ < 5)
				tap_diag("  value differs from jansson's: %.*s", (int) (len > 200 ? 200 : len), out);
		}
		else if (fast != NULL)
			both_read++;
		else if (ref != NULL)
			left_to_jansson_valid++;
		else
			both_refuse++;
		json_decref(fast);
		json_decref(ref);
	}
	free(out);
	tap_ok(wrong_accept == 0, "%ld mutants: none read that jansson refuses (%ld)", count, wrong_accept);
	tap_ok(differ == 0, "%ld mutants: every one read equals jansson's value (%ld differ)", count, differ);
	/* Without both kinds the mutants would not test anything. */
	tap_ok(both_read > count / 20 && both_refuse > count / 20,
		   "mutants both read and refused: %ld read, %ld refused by both, %ld left to jansson (valid)",
		   both_read, both_refuse, left_to_jansson_valid);
}

int
main(int argc, char **argv)
{
	corpus		c = {0};
	size_t		generated;

	test_hand_cases();
	test_depth();

	add_generated(&c, 2000);
	check_all_read(&c, 0, "generated events");
	generated = c.n;
	if (add_sample(&c, argc > 1 ? argv[1] : NULL))
		check_all_read(&c, generated, "real sample events");
	else
		tap_skip("real sample events are read", "no sample file given as argv[1] or not readable");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (cases[i].want == TAKE)
			corpus_add(&c, cases[i].text, strlen(cases[i].text));

	test_mutants(&c, 300000);

	for (size_t i = 0; i < c.n; i++)
		free(c.text[i]);
	free(c.text);
	free(c.len);
	return tap_done();
}
