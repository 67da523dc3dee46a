/* SPDX-License-Identifier: MIT */
/*
 * progress.h - a one-line progress bar on stderr, like tqdm's: redrawn in
 * place on a terminal, a line every tenth of the way otherwise (logs).
 */
#ifndef INFEED_TRAIN_PROGRESS_H
#define INFEED_TRAIN_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct progress {
	FILE *fp;
	char title[32];
	uint64_t total;
	bool tty, quiet;
	int last_tenth;
	double start;
};

void progress_begin(struct progress *p, const char *title, uint64_t total,
    bool quiet);
/* @status is printed after the bar, e.g. "Loss: 0.41 | Accuracy: 85%". */
void progress_update(struct progress *p, uint64_t done, const char *status);
void progress_end(struct progress *p, uint64_t done, const char *status);

#endif
