/*
 * state.h: the live mode's resume point, the last SSE id whose event (and every event
 * before it) Kafka has acknowledged, kept in a small file.
 */
#ifndef LAKEHOUSE_STATE_H
#define LAKEHOUSE_STATE_H

#include <stddef.h>

/*
 * Reads the id saved in path into a new string (caller frees). Returns NULL with
 * *missing set when the file does not exist (a first run), NULL with *missing clear
 * and a message in err when it cannot be read or holds no valid id.
 */
char	   *state_load(const char *path, int *missing, char *err, size_t errlen);

/*
 * Saves id atomically: writes path.tmp, fsyncs it, renames it over path and fsyncs
 * the folder, so a crash leaves either the old id or the new one, never a torn file.
 * Returns 0, or -1 with a message in err.
 */
int			state_save(const char *path, const char *id, char *err, size_t errlen);

#endif							/* LAKEHOUSE_STATE_H */
