/*
 * tap.h: the smallest TAP emitter the producer's unit tests need, so that `prove`
 * can run them: "ok N - name" / "not ok N - name", "# ..." diagnostics, and the
 * "1..N" plan at the end. The exit status is the number of failures (capped), so the
 * binaries also work without prove.
 */
#ifndef LAKEHOUSE_TEST_TAP_H
#define LAKEHOUSE_TEST_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int	tap_run;
static int	tap_failed;

/* Records one test; returns cond so callers can add diagnostics on failure. */
static inline bool
tap_ok(bool cond, const char *fmt,...)
{
	va_list		ap;

	tap_run++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return cond;
}

static inline void
tap_diag(const char *fmt,...)
{
	va_list		ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static inline void
tap_skip(const char *name, const char *why)
{
	tap_run++;
	printf("ok %d - %s # SKIP %s\n", tap_run, name, why);
}

/* Equal NUL-terminated strings, or both NULL. */
static inline bool
tap_is_str(const char *got, const char *want, const char *name)
{
	bool		same = (got == NULL || want == NULL) ? got == want : strcmp(got, want) == 0;

	if (!tap_ok(same, "%s", name))
		tap_diag("  got: %s%s%s, expected: %s%s%s",
				 got ? "\"" : "", got ? got : "NULL", got ? "\"" : "",
				 want ? "\"" : "", want ? want : "NULL", want ? "\"" : "");
	return same;
}

static inline bool
tap_is_int(long long got, long long want, const char *name)
{
	bool		same = got == want;

	if (!tap_ok(same, "%s", name))
		tap_diag("  got: %lld, expected: %lld", got, want);
	return same;
}

/* Prints the plan; returns the exit status for main. */
static inline int
tap_done(void)
{
	printf("1..%d\n", tap_run);
	return tap_failed > 254 ? 254 : tap_failed;
}

#endif							/* LAKEHOUSE_TEST_TAP_H */
