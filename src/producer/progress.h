/*
 * progress.h: a live progress line for people watching lakehouse-producer on a terminal.
 */
#ifndef LAKEHOUSE_PROGRESS_H
#define LAKEHOUSE_PROGRESS_H

#include <stdbool.h>

#include "producer.h"

/* Shows progress only when stderr is a terminal and --quiet was not given. */
void		progress_init(const producer_options *o);
/* Cheap to call per event: redraws at most once a second. */
void		progress_tick(const producer_counts *c);
/* Ends the line, so the summary starts on a fresh one. */
void		progress_done(const producer_counts *c);

#endif							/* LAKEHOUSE_PROGRESS_H */
