/*
 * json_fast.h: a strict JSON object reader that builds jansson values without going
 * through jansson's lexer, for the producer's per-event hot path.
 *
 * It never judges an event on its own: it either returns exactly the value json_loadb
 * (with JSON_DECODE_ANY) would return for the same bytes, or NULL, and then the caller
 * asks jansson, whose verdict and error text count.
 */
#ifndef LAKEHOUSE_JSON_FAST_H
#define LAKEHOUSE_JSON_FAST_H

#include <stddef.h>

#include <jansson.h>

/*
 * The object in buf (len bytes, NUL not required), as a new reference; NULL when the
 * text is not a JSON object this reader is sure of: invalid JSON, a top-level value
 * other than an object, a real number, an integer of 19 or more digits, \u0000, nesting
 * deeper than JF_MAX_DEPTH, or no memory. NULL says nothing about validity.
 */
json_t	   *jf_load_object(const char *buf, size_t len);

/* Deeper than this is left to jansson (which allows 2048); events nest 3 deep. */
#define JF_MAX_DEPTH 64

#endif							/* LAKEHOUSE_JSON_FAST_H */
