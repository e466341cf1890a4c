/*
 * test_ordered_pool.c: unit tests for the producer's validation threads
 * (src/producer/ordered_pool.c), printed as TAP: results come back in submission order
 * although the checks finish out of order, on several threads; a ring smaller than the
 * work wraps and waits without losing or reordering anything; items are copied in (the
 * caller reuses its buffer at once), NULL data and labels pass through; a failed
 * delivery stops deliveries, releases the rest, and is reported by submit and finish.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ordered_pool.h"
#include "tap.h"

typedef struct check_result
{
	unsigned long value;		/* parsed from the item's text */
	bool		was_null;
	pthread_t	thread;
} check_result;

/* Parses "item <n>" and takes a pseudo-random short while, so checks finish out of order. */
static void
check_item(const char *data, size_t len, void *result)
{
	check_result *r = result;
	unsigned long n = 0;
	struct timespec pause = {0, 0};

	r->thread = pthread_self();
	if (data == NULL)
	{
		r->was_null = true;
		return;
	}
	if (len > 5 && strncmp(data, "item ", 5) == 0)
		n = strtoul(data + 5, NULL, 10);
	r->value = n;
	pause.tv_nsec = (long) ((n * 2654435761UL) % 50) * 1000;	/* 0 to 49 us */
	nanosleep(&pause, NULL);
}

typedef struct delivery_log
{
	unsigned long delivered;
	unsigned long out_of_order;
	unsigned long wrong_value;
	unsigned long wrong_label;
	unsigned long nulls;
	unsigned long fail_at;		/* deliver returns false for this item; 0: never */
	unsigned long released;
	pthread_t	threads[16];
	int			nthreads;
} delivery_log;

static void
note_thread(delivery_log *log, pthread_t t)
{
	for (int i = 0; i < log->nthreads; i++)
		if (pthread_equal(log->threads[i], t))
			return;
	if (log->nthreads < 16)
		log->threads[log->nthreads++] = t;
}

static bool
deliver_item(void *arg, const char *data, size_t len, const char *label, void *result)
{
	delivery_log *log = arg;
	check_result *r = result;
	unsigned long expected = log->delivered + 1;	/* items are numbered from 1 */
	char		want_label[32];

	(void) len;
	note_thread(log, r->thread);
	if (data == NULL)
	{
		log->nulls++;
		log->delivered++;
		return true;
	}
	if (r->value != expected)
		log->out_of_order++;
	if (strtoul(data + 5, NULL, 10) != r->value)
		log->wrong_value++;
	snprintf(want_label, sizeof(want_label), "id-%lu", expected);
	if (label == NULL || strcmp(label, want_label) != 0)
		log->wrong_label++;
	log->delivered++;
	return log->fail_at == 0 || expected != log->fail_at;
}

static void
release_item(void *result)
{
	(void) result;
}

static delivery_log *release_log;

static void
count_release(void *result)
{
	(void) result;
	release_log->released++;
}

/* Submits items 1..n through one reused buffer; returns how many submits succeeded. */
static unsigned long
submit_items(ordered_pool *p, unsigned long n)
{
	char		buf[64];
	char		label[32];
	unsigned long ok = 0;

	for (unsigned long i = 1; i <= n; i++)
	{
		int			len = snprintf(buf, sizeof(buf), "item %lu", i);

		snprintf(label, sizeof(label), "id-%lu", i);
		if (!pool_submit(p, buf, (size_t) len, label))
			break;
		ok++;
		memset(buf, 'x', sizeof(buf));	/* the pool must have its own copy */
	}
	return ok;
}

int
main(void)
{
	char		err[256];
	delivery_log log;
	ordered_pool *p;
	unsigned long n = 20000;
	unsigned long submitted;

	/* Many items, four threads, a roomy ring. */
	memset(&log, 0, sizeof(log));
	p = pool_start(4, 256, sizeof(check_result), check_item, deliver_item, release_item, &log,
				   err, sizeof(err));
	tap_ok(p != NULL, "a pool of 4 threads starts");
	submitted = submit_items(p, n);
	tap_ok(pool_finish(p), "finish reports success");
	tap_is_int((long long) submitted, (long long) n, "every submit succeeded");
	tap_is_int((long long) log.delivered, (long long) n, "every item was delivered once");
	tap_is_int((long long) log.out_of_order, 0, "in submission order");
	tap_is_int((long long) log.wrong_value, 0, "each with the result of its own check");
	tap_is_int((long long) log.wrong_label, 0, "and its own label");
	tap_ok(log.nthreads > 1, "checks ran on more than one thread (%d)", log.nthreads);

	/* A ring of 3 slots for 2,000 items: wraps and waits, loses and reorders nothing. */
	memset(&log, 0, sizeof(log));
	p = pool_start(3, 3, sizeof(check_result), check_item, deliver_item, release_item, &log,
				   err, sizeof(err));
	submitted = submit_items(p, 2000);
	tap_ok(pool_finish(p) && submitted == 2000 && log.delivered == 2000 && log.out_of_order == 0 &&
		   log.wrong_value == 0 && log.wrong_label == 0,
		   "a 3-slot ring delivers 2,000 items whole and in order");

	/* NULL data passes through as NULL. */
	memset(&log, 0, sizeof(log));
	p = pool_start(2, 8, sizeof(check_result), check_item, deliver_item, release_item, &log,
				   err, sizeof(err));
	pool_submit(p, NULL, 0, NULL);
	tap_ok(pool_finish(p) && log.nulls == 1 && log.delivered == 1, "a NULL item is delivered as NULL");

	/* A delivery fails at item 500: nothing after it is delivered, the rest is released. */
	memset(&log, 0, sizeof(log));
	log.fail_at = 500;
	release_log = &log;
	p = pool_start(4, 64, sizeof(check_result), check_item, deliver_item, count_release, &log,
				   err, sizeof(err));
	submitted = submit_items(p, 5000);
	tap_ok(!pool_finish(p), "finish reports the failed delivery");
	tap_ok(submitted < 5000, "submit refused items after the failure (%lu accepted)", submitted);
	tap_is_int((long long) log.delivered, 500, "no item was delivered after the failing one");
	tap_is_int((long long) (log.delivered + log.released), (long long) submitted,
			   "every accepted item was delivered or released");
	tap_is_int((long long) log.out_of_order, 0, "what was delivered was in order");

	/* Bad sizes are refused with a message. */
	p = pool_start(0, 8, sizeof(check_result), check_item, deliver_item, release_item, &log,
				   err, sizeof(err));
	tap_ok(p == NULL && strstr(err, "cannot start") != NULL, "a pool of 0 threads is refused: %s", err);

	return tap_done();
}
