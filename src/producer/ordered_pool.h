/*
 * ordered_pool.h: runs a check on items in several threads and hands the results back
 * in submission order (see ordered_pool.c).
 */
#ifndef LAKEHOUSE_ORDERED_POOL_H
#define LAKEHOUSE_ORDERED_POOL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ordered_pool ordered_pool;

/*
 * Runs in a pool thread: looks at one item (data may be NULL, len then 0) and fills
 * result (result_size bytes, zeroed before the call). Must not touch shared state.
 */
typedef void (*pool_check_fn) (const char *data, size_t len, void *result);

/*
 * Runs in the submitting thread, once per item, in submission order. label is what was
 * submitted with the item (may be NULL). Returning false stops the pool: no later item
 * is delivered (each is released instead), and pool_submit/pool_finish return false.
 * The deliver function owns the result: it frees what the check put in it.
 */
typedef bool (*pool_deliver_fn) (void *arg, const char *data, size_t len, const char *label,
								 void *result);

/*
 * Runs in the submitting thread for each item whose result will not be delivered (after
 * a failed delivery), to free what the check put in it.
 */
typedef void (*pool_release_fn) (void *result);

/*
 * Starts threads workers with room for slots items in flight. Returns NULL with err
 * filled when threads cannot be started.
 */
ordered_pool *pool_start(int threads, size_t slots, size_t result_size,
						 pool_check_fn check, pool_deliver_fn deliver,
						 pool_release_fn release, void *arg,
						 char *err, size_t errlen);

/*
 * Copies the item in and delivers every item whose check is done, in order; waits
 * while all slots are in flight. Returns false once a delivery has failed.
 */
bool		pool_submit(ordered_pool *p, const char *data, size_t len, const char *label);

/*
 * Delivers everything still in flight (after a failed delivery: releases it), stops the
 * threads and frees the pool. Returns false when a delivery failed.
 */
bool		pool_finish(ordered_pool *p);

#endif							/* LAKEHOUSE_ORDERED_POOL_H */
