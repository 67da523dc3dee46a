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
 * CPU), and memory holds one more worker.  Shrink: the workers' work
 * would have fitted in one worker fewer at half load, and trainers did not
 * wait, for AUTOTUNE_SHRINK_MS on end.  Between the two, hold: the gap is
 * the hysteresis.  Never below one worker.
 *
 * Up to the CPUs the daemon may use (config_ncpus(): affinity, cgroup
 * cpu.max) for workers that compute.  Past them only for workers that
 * wait for storage (issue 36, item 3): a worker's job time is split, from
 * /proc/PID/schedstat and its CPU time, into running, waiting for a CPU
 * (runnable) and the rest, blocked (a read, a page fault on a slow
 * store); the pool grows past the CPUs while at least
 * AUTOTUNE_STORAGE_GROW of it was blocked and less than
 * AUTOTUNE_RUNNABLE_MAX waited for a CPU, up to autotune_limit() (memory
 * for each worker is checked as it grows; it doubles while trainers wait
 * at least AUTOTUNE_WAIT_DOUBLE of their time), and gives back one worker past
 * the CPUs every AUTOTUNE_OVER_MS while they wait for CPUs instead
 * (the store became fast, the pages are cached): no oversubscription.
 * Each decision and its reason are kept for status, top and /metrics
 * (autotune_report()).
 */
#ifndef INFEED_AUTOTUNE_H
#define INFEED_AUTOTUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pool.h"

#define AUTOTUNE_TICK_MS	250	/* how often it decides */
#define AUTOTUNE_WAIT_GROW	0.10	/* trainers' share waiting, to grow */
#define AUTOTUNE_BUSY_GROW	0.75	/* workers' share in jobs, to grow */
#define AUTOTUNE_CPU_FREE	0.5	/* idle CPUs it may use, to grow */
#define AUTOTUNE_COMPUTING	0.5	/* ... unless jobs wait more than this */
#define AUTOTUNE_SHRINK_MS	3000	/* workers idle this long: one goes */
#define AUTOTUNE_MIN_WORKER	POOL_WORKER_MIN_BYTES
/* Past the CPUs: */
#define AUTOTUNE_STORAGE_GROW	0.5	/* jobs' share blocked, to grow */
#define AUTOTUNE_RUNNABLE_MAX	0.25	/* ... and waiting for a CPU, under */
#define AUTOTUNE_OVER_BLOCKED	0.25	/* blocked under this, and */
#define AUTOTUNE_OVER_RUNNABLE	0.25	/* runnable over this: one goes */
#define AUTOTUNE_OVER_MS	1000	/* ... after this long */
#define AUTOTUNE_WAIT_DOUBLE	0.5	/* trainers' share waiting to double */
#define AUTOTUNE_STORAGE_PER_CPU 8	/* the most workers a CPU, */
#define AUTOTUNE_STORAGE_MIN	16	/* ... and at least this many */
/* A worker's descriptors in the main process (daemon_raise_nofile()). */
#define AUTOTUNE_WORKER_FDS	2

enum autotune_action {
	AUTOTUNE_HOLD,
	AUTOTUNE_GROW,
	AUTOTUNE_SHRINK,
};

/* What one interval looked like: all a decision reads. */
struct autotune_input {
	unsigned	workers;	/* in use */
	unsigned	max;		/* the CPUs the daemon may use */
	unsigned	limit;		/* the most for storage (<= max: max) */
	bool		resizing;	/* a worker starting or retiring */
	bool		trainers;	/* a trainer was active */
	double		waited;		/* trainers' share of time waiting, 0-1 */
	double		busy;		/* workers' share of time in jobs, 0-1 */
	double		cpu_free;	/* idle CPUs the daemon may use */
	double		computing;	/* workers' CPU time / their job time */
	bool		sched_known;	/* runnable was read (schedstat) */
	double		runnable;	/* time waiting for a CPU / job time */
	uint64_t	worker_bytes;	/* one more worker's memory */
	uint64_t	memory_room;	/* what MemAvailable and the budget leave */
	uint64_t	interval_ms;
};

/* Why a resize, for /metrics' reason label. */
enum autotune_cause {
	AUTOTUNE_TRAINERS_WAITING,	/* grow, within the CPUs */
	AUTOTUNE_STORAGE_WAITING,	/* grow past the CPUs */
	AUTOTUNE_WORKERS_IDLE,		/* shrink */
	AUTOTUNE_CPU_WAITING,		/* shrink, past the CPUs */
};

/*
 * What a decision remembers: how long the workers have been idle (or
 * past the CPUs waiting for them), and the cause of its last resize.
 */
struct autotune_state {
	uint64_t		idle_ms;
	uint64_t		over_ms;
	enum autotune_cause	cause;
	unsigned		grow;		/* workers to add on GROW */
};

/* For status, top and /metrics. */
struct autotune_report {
	unsigned	 max;		/* autotune_limit() */
	const char	*max_why;	/* "2 CPUs (affinity 2) for workers that
					   compute, up to 16 for storage" */
	const char	*last;		/* "grew at 12:00:01 because ...", or "" */
	const char	*now;		/* the latest decision and why */
	uint64_t	 grows;		/* workers added: trainers waited */
	uint64_t	 shrinks;	/* workers retired: idle */
	uint64_t	 grows_storage;	/* ... of them past the CPUs */
	uint64_t	 shrinks_cpu;	/* ... past the CPUs, waiting for one */
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
 * autotune_limit() - the most workers = auto may start: the CPUs of @cpus
 * for workers that compute, and for workers that wait for storage
 * AUTOTUNE_STORAGE_PER_CPU a CPU (at least AUTOTUNE_STORAGE_MIN), within
 * INFEED_MAX_WORKERS and the descriptors that @nofile (RLIMIT_NOFILE)
 * leaves after @max_clients clients.  The pool is made with room for it.
 */
unsigned	 autotune_limit(const struct config_cpus *cpus, uint64_t nofile,
		    unsigned max_clients);

/**
 * autotune_new() - size @pool (started with one worker, room for
 * pool_max(), autotune_limit()) from now on; @cpus says how many CPUs.
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
