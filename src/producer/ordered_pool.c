/*
 * ordered_pool.c: runs a check on items in several threads and hands the results back
 * in submission order.
 *
 * Why: validating an event means parsing it (about 3 us for a 1.3 KB event on the
 * benchmark machine with the fast reader, 18 us with jansson's), the largest part of the
 * producer's time; one thread caps the rate however fast Kafka is (benchmarks/results.md).
 * Parsing is independent per event, publishing is not: Kafka keeps order per partition, and events of one wiki must
 * stay in the order they came. So threads check, and the submitting thread delivers, in
 * order, from a ring of slots:
 *
 *   tail <= claim <= head:  [tail, claim) claimed by a thread, done or not;
 *                           [claim, head) waiting for a thread.
 *
 * Only the submitting thread writes head and tail and touches a slot outside [tail,
 * head); a thread owns a slot's result from its claim until it marks it done. The
 * mutex orders those hand-overs. Items are copied in, so the caller may reuse its
 * buffer at once.
 */

#include "ordered_pool.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pool_slot
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		null_data;
	char	   *label;
	size_t		label_cap;
	bool		has_label;
	void	   *result;
	bool		done;			/* check finished (under the mutex) */
} pool_slot;

struct ordered_pool
{
	pthread_mutex_t mu;
	pthread_cond_t work;		/* an item waits for a thread, or the pool stops */
	pthread_cond_t done;		/* the item at tail finished its check */
	pool_slot  *slots;
	size_t		nslots;
	size_t		result_size;
	unsigned long long head;	/* next to submit */
	unsigned long long claim;	/* next to check */
	unsigned long long tail;	/* next to deliver */
	bool		stopping;
	bool		failed;
	pool_check_fn check;
	pool_deliver_fn deliver;
	pool_release_fn release;
	void	   *arg;
	int			nthreads;
	pthread_t  *threads;
};

static void *
pool_thread(void *arg)
{
	ordered_pool *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;)
	{
		unsigned long long seq;
		pool_slot  *s;

		while (p->claim == p->head && !p->stopping)
			pthread_cond_wait(&p->work, &p->mu);
		if (p->claim == p->head)
			break;				/* stopping, and nothing left to check */
		seq = p->claim++;
		s = &p->slots[seq % p->nslots];
		pthread_mutex_unlock(&p->mu);

		memset(s->result, 0, p->result_size);
		p->check(s->null_data ? NULL : s->data, s->len, s->result);

		pthread_mutex_lock(&p->mu);
		s->done = true;
		if (seq == p->tail)
			pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/*
 * Delivers the finished items from tail on, in order; with wait, first waits until the
 * item at tail has finished. After a failed delivery the items are released instead.
 */
static void
deliver_ready(ordered_pool *p, bool wait)
{
	unsigned long long from,
				to;

	pthread_mutex_lock(&p->mu);
	if (wait)
		while (p->tail < p->head && !p->slots[p->tail % p->nslots].done)
			pthread_cond_wait(&p->done, &p->mu);
	from = p->tail;
	to = from;
	while (to < p->head && p->slots[to % p->nslots].done)
		to++;
	pthread_mutex_unlock(&p->mu);

	/* [from, to) is finished: no thread touches these slots until they are reused. */
	for (unsigned long long seq = from; seq < to; seq++)
	{
		pool_slot  *s = &p->slots[seq % p->nslots];

		if (p->failed)
		{
			if (p->release)
				p->release(s->result);
		}
		else if (!p->deliver(p->arg, s->null_data ? NULL : s->data, s->len,
							 s->has_label ? s->label : NULL, s->result))
			p->failed = true;
		s->done = false;
	}

	pthread_mutex_lock(&p->mu);
	p->tail = to;
	pthread_mutex_unlock(&p->mu);
}

/* Copies len bytes into a slot buffer, growing it; false when memory runs out. */
static bool
copy_in(char **buf, size_t *cap, const char *src, size_t len)
{
	if (len + 1 > *cap)
	{
		size_t		want = len + 1 > 2 * *cap ? len + 1 : 2 * *cap;
		char	   *grown = realloc(*buf, want);

		if (grown == NULL)
			return false;
		*buf = grown;
		*cap = want;
	}
	if (len > 0)
		memcpy(*buf, src, len);
	(*buf)[len] = '\0';
	return true;
}

static void
pool_free(ordered_pool *p)
{
	for (size_t i = 0; i < p->nslots; i++)
	{
		free(p->slots[i].data);
		free(p->slots[i].label);
		free(p->slots[i].result);
	}
	free(p->slots);
	free(p->threads);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	free(p);
}

/* Tells the threads to finish what was submitted and waits for them. */
static void
stop_threads(ordered_pool *p, int started)
{
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < started; i++)
		pthread_join(p->threads[i], NULL);
}

ordered_pool *
pool_start(int threads, size_t slots, size_t result_size,
		   pool_check_fn check, pool_deliver_fn deliver,
		   pool_release_fn release, void *arg,
		   char *err, size_t errlen)
{
	ordered_pool *p = calloc(1, sizeof(*p));
	sigset_t	all,
				old;
	int			started = 0;
	int			rc = 0;

	if (p == NULL || threads < 1 || slots < 1 || result_size < 1)
	{
		snprintf(err, errlen, "cannot start %d validation thread(s): %s", threads,
				 p == NULL ? "out of memory" : "bad pool size");
		free(p);
		return NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->nslots = slots;
	p->result_size = result_size;
	p->check = check;
	p->deliver = deliver;
	p->release = release;
	p->arg = arg;
	p->slots = calloc(slots, sizeof(pool_slot));
	p->threads = calloc((size_t) threads, sizeof(pthread_t));
	for (size_t i = 0; p->slots != NULL && i < slots; i++)
		if ((p->slots[i].result = malloc(result_size)) == NULL)
			break;
	if (p->slots == NULL || p->threads == NULL || p->slots[slots - 1].result == NULL)
	{
		snprintf(err, errlen, "cannot start %d validation thread(s): out of memory", threads);
		if (p->slots == NULL)
			p->nslots = 0;
		pool_free(p);
		return NULL;
	}

	/* Signals stay with the main thread, whose loops check the stop flag. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (; started < threads; started++)
		if ((rc = pthread_create(&p->threads[started], NULL, pool_thread, p)) != 0)
			break;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (started < threads)
	{
		snprintf(err, errlen, "cannot start validation thread %d of %d: %s",
				 started + 1, threads, strerror(rc));
		stop_threads(p, started);
		pool_free(p);
		return NULL;
	}
	p->nthreads = threads;
	return p;
}

bool
pool_submit(ordered_pool *p, const char *data, size_t len, const char *label)
{
	pool_slot  *s;

	deliver_ready(p, false);
	while (!p->failed && p->head - p->tail >= p->nslots)
		deliver_ready(p, true);
	if (p->failed)
		return false;

	s = &p->slots[p->head % p->nslots];
	s->null_data = (data == NULL);
	s->len = data ? len : 0;
	s->has_label = (label != NULL);
	if (!copy_in(&s->data, &s->cap, data ? data : "", s->len) ||
		(label && !copy_in(&s->label, &s->label_cap, label, strlen(label))))
	{
		fprintf(stderr, "lakehouse-producer: out of memory copying an event of %zu bytes\n", len);
		p->failed = true;
		return false;
	}

	pthread_mutex_lock(&p->mu);
	p->head++;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->mu);
	return true;
}

bool
pool_finish(ordered_pool *p)
{
	bool		ok;

	/* Every item in flight is delivered, or released after a failure. */
	while (p->tail < p->head)
		deliver_ready(p, true);
	ok = !p->failed;
	stop_threads(p, p->nthreads);
	pool_free(p);
	return ok;
}
