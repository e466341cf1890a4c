/*
 * bench_json_reader.c: how fast each of lakehouse-producer's JSON readers turns event
 * text into a jansson value, with no Kafka and no threads: jansson's json_loadb (the
 * baseline) and the producer's fast reader (src/producer/json_fast.c), over the same
 * lines held in memory, one after the other in the same run. Every line must be read by
 * both into equal values, or the run fails: a figure for a reader that declined or
 * differed would mean nothing.
 *
 * usage: bench_json_reader FILE.jsonl [--rounds N] [--limit N]
 * prints: one line per reader (events/s, us per event, ns per byte), then the ratio.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "json_fast.h"

typedef struct lines
{
	char	  **text;
	size_t	   *len;
	size_t		n;
	size_t		bytes;
} lines;

static void
usage(FILE *out)
{
	fprintf(out, "usage: bench_json_reader FILE.jsonl [--rounds N] [--limit N]\n"
			"Reads every line of FILE (or its first --limit lines) with jansson's json_loadb\n"
			"and with lakehouse-producer's fast reader, N rounds each (default 3), and prints\n"
			"events/s for both.\n");
}

static int
load(const char *path, long limit, lines *l)
{
	FILE	   *f = fopen(path, "r");
	char	   *line = NULL;
	size_t		cap = 0,
				room = 0;
	ssize_t		len;

	if (f == NULL)
	{
		perror(path);
		return -1;
	}
	memset(l, 0, sizeof(*l));
	while ((limit < 0 || (long) l->n < limit) && (len = getline(&line, &cap, f)) != -1)
	{
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		if (len == 0)
			continue;
		if (l->n == room)
		{
			room = room ? room * 2 : 4096;
			l->text = realloc(l->text, room * sizeof(*l->text));
			l->len = realloc(l->len, room * sizeof(*l->len));
			if (l->text == NULL || l->len == NULL)
				return -1;
		}
		if ((l->text[l->n] = malloc((size_t) len)) == NULL)
			return -1;
		memcpy(l->text[l->n], line, (size_t) len);
		l->len[l->n++] = (size_t) len;
		l->bytes += (size_t) len;
	}
	free(line);
	fclose(f);
	return 0;
}

static json_t *
read_jansson(const char *text, size_t len)
{
	return json_loadb(text, len, JSON_DECODE_ANY, NULL);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Seconds for rounds passes of reader over every line; -1 when a line is not read. */
static double
time_reader(const lines *l, int rounds, json_t *(*reader) (const char *, size_t))
{
	double		t0 = now();

	for (int r = 0; r < rounds; r++)
		for (size_t i = 0; i < l->n; i++)
		{
			json_t	   *v = reader(l->text[i], l->len[i]);

			if (v == NULL)
				return -1;
			json_decref(v);
		}
	return now() - t0;
}

int
main(int argc, char **argv)
{
	lines		l;
	int			rounds = 3;
	long		limit = -1;
	const char *path = NULL;
	double		t_jansson,
				t_fast;
	double		events;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
		{
			usage(stdout);
			return 0;
		}
		else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
		{
			rounds = atoi(argv[++i]);
			if (rounds < 1)
			{
				fprintf(stderr, "bench_json_reader: --rounds needs a positive integer\n");
				return 2;
			}
		}
		else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc)
		{
			limit = atol(argv[++i]);
			if (limit < 1)
			{
				fprintf(stderr, "bench_json_reader: --limit needs a positive integer\n");
				return 2;
			}
		}
		else if (path == NULL && argv[i][0] != '-')
			path = argv[i];
		else
		{
			usage(stderr);
			return 2;
		}
	}
	if (path == NULL)
	{
		usage(stderr);
		return 2;
	}
	if (load(path, limit, &l) != 0 || l.n == 0)
	{
		fprintf(stderr, "bench_json_reader: no events read from %s\n", path);
		return 1;
	}

	/* Both readers must agree on every line before either is timed. */
	json_object_seed(0);
	for (size_t i = 0; i < l.n; i++)
	{
		json_t	   *a = jf_load_object(l.text[i], l.len[i]);
		json_t	   *b = read_jansson(l.text[i], l.len[i]);
		int			same = a != NULL && b != NULL && json_equal(a, b);

		json_decref(a);
		json_decref(b);
		if (!same)
		{
			fprintf(stderr, "bench_json_reader: line %zu is not read into equal values by both readers\n", i + 1);
			return 1;
		}
	}

	t_jansson = time_reader(&l, rounds, read_jansson);
	t_fast = time_reader(&l, rounds, jf_load_object);
	if (t_jansson < 0 || t_fast < 0)
	{
		fprintf(stderr, "bench_json_reader: a reader failed on a line it read before\n");
		return 1;
	}
	events = (double) l.n * rounds;
	printf("events %zu, bytes %zu (%.0f per event), rounds %d\n",
		   l.n, l.bytes, (double) l.bytes / l.n, rounds);
	printf("jansson json_loadb: %.0f events/s, %.2f us per event, %.2f ns per byte\n",
		   events / t_jansson, t_jansson / events * 1e6, t_jansson / (events / l.n * l.bytes) * 1e9);
	printf("fast reader:        %.0f events/s, %.2f us per event, %.2f ns per byte\n",
		   events / t_fast, t_fast / events * 1e6, t_fast / (events / l.n * l.bytes) * 1e9);
	printf("fast / jansson: %.2f\n", t_jansson / t_fast);
	return 0;
}
