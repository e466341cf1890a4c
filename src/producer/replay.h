/*
 * replay.h: --file mode, replaying a recording (JSONL or recorded SSE) into Kafka,
 * optionally shaped into a test scenario.
 */
#ifndef LAKEHOUSE_REPLAY_H
#define LAKEHOUSE_REPLAY_H

#include <stddef.h>

#include "kafka_out.h"

/*
 * Calls fn once per event in the file, in order: each JSONL line (blank lines
 * skipped) or each SSE `message` frame. sse_id is the frame's last event id, NULL
 * for JSONL; data NULL means an SSE frame too large to keep. fn returns nonzero to
 * stop. Returns 0, fn's nonzero value, or -1 with a message in err.
 */
typedef int (*replay_fn) (const char *data, size_t len, const char *sse_id, void *arg);
int			replay_read(const char *path, replay_fn fn, void *arg, char *err, size_t errlen);

/* Runs the replay; returns the process exit code (before the final flush). */
int			replay_run(const producer_options *o, kafka_out *k, producer_counts *c);

#endif							/* LAKEHOUSE_REPLAY_H */
