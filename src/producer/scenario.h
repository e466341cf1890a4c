/*
 * scenario.h: the deterministic event rewrites the replay mode's test scenarios use
 * (--loops, --violations, --late, --restamp), kept free of I/O so unit tests can pin
 * them down.
 *
 * Event ids. With --loops, meta.id in loop L (0-based) at position P of the file
 * (0-based, counting events, not bytes) becomes the original's first 24 characters
 * (8-4-4-4 hex groups and dashes) followed by 12 hex digits "%04x%08x" of (L, P). So
 * every (loop, position) pair has its own id, whatever the original ids were, and
 * --resend-loop K repeats loop K's ids exactly. Loop numbers SCENARIO_LOOP_VIOLATION
 * and SCENARIO_LOOP_LATE are reserved for the extra events of --violations and --late.
 */
#ifndef LAKEHOUSE_SCENARIO_H
#define LAKEHOUSE_SCENARIO_H

#include <stdbool.h>

#include <jansson.h>

#define SCENARIO_MAX_LOOPS 0xfffd
#define SCENARIO_LOOP_VIOLATION 0xfffd
#define SCENARIO_LOOP_LATE 0xfffe
#define SCENARIO_VIOLATION_KINDS 5

/* Rewrites meta.id as described above. False when meta.id is not UUID-shaped. */
bool		scenario_rewrite_id(json_t *event, unsigned loop, unsigned long position);

/* Sets meta.dt to epoch_ms (millisecond precision, "Z") and timestamp to its seconds. */
void		scenario_set_time(json_t *event, long long epoch_ms);

/*
 * The same rewrites done on an event's text, for the replay hot path: jansson parsing
 * and printing every event took most of a core at 10,000 events/s. With loop >= 0,
 * meta.id as scenario_rewrite_id would set it; with epoch_ms >= 0, meta.dt and timestamp
 * as scenario_set_time would. Every other byte stays as it was, so the result parses to
 * the value those functions give. text must be one valid JSON object (the caller checked
 * it); NULL when its layout is not the plain one this handles (a member missing or
 * repeated, an escaped key, an id that is not UUID-shaped, a timestamp that is not a
 * number): then use the json_t functions. Returns a new string (caller frees).
 */
char	   *scenario_rewrite_text(const char *text, size_t len, long loop, unsigned long position,
								  long long epoch_ms, size_t *out_len);

/* Parses an ISO-8601 UTC time as the contract accepts it; false if it cannot. */
bool		scenario_parse_time(const char *s, long long *epoch_ms);

/* Formats epoch_ms as "YYYY-MM-DDTHH:MM:SS.mmmZ" into buf (at least 32 bytes). */
void		scenario_format_time(long long epoch_ms, char *buf, size_t buflen);

/*
 * The i-th contract violation made from a valid base event: kind i % 5 is text that
 * is not JSON, no meta.id, a string namespace, a meta.dt that is not a time, and an
 * unknown type. Returns a new string (caller frees).
 */
char	   *scenario_violation(const json_t *base, long i);

/* The current time in Unix milliseconds. */
long long	scenario_now_ms(void);

#endif							/* LAKEHOUSE_SCENARIO_H */
