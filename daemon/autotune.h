/* SPDX-License-Identifier: MIT */
/*
 * workers = auto: the pool sizes itself.  Every AUTOTUNE_TICK_MS the
 * daemon hands over what its trainers did (their time waiting for data
 * and their active time, totals since it started); autotune reads the
 * rest itself (the workers' time in jobs and their CPU time, the idle
 * time of the CPUs the daemon may run on, MemAvailable), turns the
 * interval's differences into an autotune_input and asks
 * autotune_decide(), a pure function, whether to grow or shrink the pool
 * by one worker, and why; it applies the answer with pool_grow() or
 * pool_shrink(), which lose nothing (pool.h).
 *
 * Grow: trainers waited at least AUTOTUNE_WAIT_GROW of their time, the
 * workers were busy at least AUTOTUNE_BUSY_GROW of theirs (the workers are
 * what they wait for), half a CPU the daemon may use was idle (or the
 * workers spent most of their jobs' time waiting for storage, not on a
 * CPU), and memory holds one more worker.  Shrink: the workers' work would have fitted in
 * one worker fewer at half load, and trainers did not wait, for
 * AUTOTUNE_SHRINK_MS on end.  Between the two, hold: the gap is the
 * hysteresis.  Never above the CPUs the daemon may use (config_ncpus():
 * affinity, cgroup cpu.max), never below one worker.  Each decision and
 * its reason are kept for status, top and /metrics (autotune_report()).
 */
#ifndef INFEED_AUTOTUNE_H
#define INFEED_AUTOTUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pool.h"

#define AUTOTUNE_TICK_MS	500	/* how often it decides */
#define AUTOTUNE_WAIT_GROW	0.10	/* trainers' share waiting, to grow */
#define AUTOTUNE_BUSY_GROW	0.75	/* workers' share in jobs, to grow */
#define AUTOTUNE_CPU_FREE	0.5	/* idle CPUs it may use, to grow */
#define AUTOTUNE_COMPUTING	0.5	/* ... unless jobs wait more than this */
#define AUTOTUNE_SHRINK_MS	3000	/* workers idle this long: one goes */
#define AUTOTUNE_MIN_WORKER	(16ULL << 20)	/* a worker's memory, at least */

enum autotune_action {
	AUTOTUNE_HOLD,
	AUTOTUNE_GROW,
	AUTOTUNE_SHRINK,
};

/* What one interval looked like: all a decision reads. */
struct autotune_input {
	unsigned	workers;	/* in use */
	unsigned	max;		/* the CPUs the daemon may use */
	bool		resizing;	/* a worker starting or retiring */
	bool		trainers;	/* a trainer was active */
	double		waited;		/* trainers' share of time waiting, 0-1 */
	double		busy;		/* workers' share of time in jobs, 0-1 */
	double		cpu_free;	/* idle CPUs the daemon may use */
	double		computing;	/* workers' CPU time / their job time */
	uint64_t	worker_bytes;	/* one more worker's memory */
	uint64_t	memory_room;	/* what MemAvailable and the budget leave */
	uint64_t	interval_ms;
};

/* What a decision remembers: how long the workers have been idle. */
struct autotune_state {
	uint64_t	idle_ms;
};

/* For status, top and /metrics. */
struct autotune_report {
	unsigned	 max;
	const char	*max_why;	/* "cgroup cpu.max 2.0 CPUs, affinity 2" */
	const char	*last;		/* "grew at 12:00:01 because ...", or "" */
	const char	*now;		/* the latest decision and why */
	uint64_t	 grows;		/* reason: trainers waited */
	uint64_t	 shrinks;	/* reason: workers idle */
};

struct autotune;

/**
 * autotune_decide() - grow, shrink or hold a pool that looked like @in
 * over its last interval; @st carries the idle time from one call to the
 * next.  Writes the reason, a sentence, to @why (@len bytes).
 */
enum autotune_action autotune_decide(struct autotune_state *st,
		    const struct autotune_input *in, char *why, size_t len);

/**
 * autotune_new() - size @pool (started with one worker, room for
 * @cpus->n) from now on; @cpus says why that many.
 */
struct autotune	*autotune_new(struct pool *pool,
		    const struct config_cpus *cpus);

/**
 * autotune_free() - free @at; NULL is a no-op.
 */
void		 autotune_free(struct autotune *at);

/**
 * autotune_tick() - decide and act: trainers have waited @wait_us of
 * their @active_us (totals since the daemon started); the daemon's
 * processes hold @memory_private bytes of their own and the ring budget
 * leaves @budget_room.
 */
void		 autotune_tick(struct autotune *at, uint64_t wait_us,
		    uint64_t active_us, uint64_t memory_private,
		    uint64_t budget_room);

/**
 * autotune_report() - the bound, the latest decisions and their counts;
 * the strings are @at's, valid until its next tick.
 */
void		 autotune_report(const struct autotune *at,
		    struct autotune_report *r);

#endif /* INFEED_AUTOTUNE_H */
