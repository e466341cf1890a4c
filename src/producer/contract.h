/*
 * contract.h: the recentchange event contract lakehouse-producer enforces before
 * publishing. An event that passes goes to the topic; one that fails goes to the
 * dead-letter topic with the verdict's reason code in a header.
 *
 * The rules themselves are one table in contract.c.
 */
#ifndef LAKEHOUSE_CONTRACT_H
#define LAKEHOUSE_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* JSON_DECODE_ANY came with jansson 2.3; revision ids need a 64-bit json_int_t. */
#if !defined(JANSSON_VERSION_HEX) || JANSSON_VERSION_HEX < 0x020300
#error "lakehouse-producer needs jansson 2.3 or newer"
#endif
#if !JSON_INTEGER_IS_LONG_LONG
#error "lakehouse-producer needs a jansson built with long long integers"
#endif

#define RC_REASON_MAX 64
#define RC_MESSAGE_MAX 256

typedef struct rc_verdict
{
	bool		valid;

	/*
	 * meta.domain is "canary": a synthetic event Wikimedia injects to monitor the
	 * stream, to be dropped. Set whenever the input is an object, valid or not,
	 * since canaries copy the schema's example and need not pass the contract.
	 */
	bool		canary;

	/*
	 * Machine-readable and stable, "" when valid: not_json, not_object, or
	 * <problem>:<field path> with problem one of missing_field, bad_type, bad_uuid,
	 * bad_time, bad_enum, too_long (e.g. "missing_field:meta.id", "bad_type:namespace").
	 */
	char		reason[RC_REASON_MAX];

	/* For people: what was wrong, in one line, "" when valid. */
	char		message[RC_MESSAGE_MAX];
} rc_verdict;

/*
 * Validates one event given as JSON text (len bytes, NUL not required). Returns
 * out->valid. Text jansson cannot load is not_json, which includes empty input,
 * invalid UTF-8, \u0000 in a string (PostgreSQL's jsonb rejects it too), trailing
 * garbage and integers beyond 64 bits.
 */
bool		rc_validate(const char *json, size_t len, rc_verdict *out);

/* The same for an event the caller has already parsed. */
bool		rc_validate_value(const json_t *event, rc_verdict *out);

/* True when event is an object whose meta.domain is the string "canary". */
bool		rc_is_canary(const json_t *event);

#endif							/* LAKEHOUSE_CONTRACT_H */
