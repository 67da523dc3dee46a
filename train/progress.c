/* SPDX-License-Identifier: MIT */
/*
 * progress.c - a progress bar for long runs.
 */
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "progress.h"

/* Start a progress bar of @total steps. */
void
progress_begin(struct progress *p, const char *title, uint64_t total,
    bool quiet)
{
	p->fp = stderr;
	snprintf(p->title, sizeof(p->title), "%s", title);
	p->total = total ? total : 1;
	p->tty = isatty(fileno(stderr));
	p->quiet = quiet;
	p->last_tenth = -1;
	p->start = clock_now_s();
}

/* Draw "title 40%|########            | 6/15 [00:03] status". */
static void
draw(struct progress *p, uint64_t done, const char *status, const char *end)
{
	char bar[21];
	int fill = (int)(20 * done / p->total);
	double t = clock_now_s() - p->start;
	int i;

	for (i = 0; i < 20; i++)
		bar[i] = i < fill ? '#' : ' ';
	bar[20] = '\0';
	fprintf(p->fp, "%s%s %3d%%|%s| %llu/%llu [%02d:%02d] %s%s",
	    p->tty ? "\r" : "", p->title, (int)(100 * done / p->total),
	    bar, (unsigned long long)done, (unsigned long long)p->total,
	    (int)t / 60, (int)t % 60, status ? status : "", end);
	fflush(p->fp);
}

/* Show @done steps, at most every tenth on a non-terminal. */
void
progress_update(struct progress *p, uint64_t done, const char *status)
{
	int tenth = (int)(10 * done / p->total);

	if (p->quiet)
		return;
	if (p->tty) {
		draw(p, done, status, "\033[K");
	} else if (tenth != p->last_tenth) {
		p->last_tenth = tenth;
		draw(p, done, status, "\n");
	}
}

/* Finish the bar with its last state. */
void
progress_end(struct progress *p, uint64_t done, const char *status)
{
	if (p->quiet)
		return;
	if (p->tty)
		draw(p, done, status, "\033[K\n");
	else if (p->last_tenth != 10)
		draw(p, done, status, "\n");
}
