/* SPDX-License-Identifier: MIT */
/*
 * workers = auto (see autotune.h): the decision, a pure function, and the
 * readings it decides on, taken every AUTOTUNE_TICK_MS on the event loop
 * (a few small /proc files: nothing on a step's path).
 */

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "autotune.h"
#include "clock.h"
#include "infeed-limits.h"
#include "log.h"
#include "xmalloc.h"

struct autotune {
	struct pool		*pool;
	struct config_cpus	 cpus;
	struct autotune_state	 state;
	bool			 primed;	/* the fields below are read */
	uint64_t		 at_ms;		/* the last tick */
	uint64_t		 wait_us;	/* trainers' totals, then */
	uint64_t		 active_us;
	uint64_t		 busy_us;	/* the workers' time in jobs */
	uint64_t		 cpu_us;	/* the workers' CPU time */
	uint64_t		 run_us;	/* ... from schedstat */
	uint64_t		 runnable_us;	/* ... waiting for a CPU */
	bool			 sched_known;
	unsigned		 limit;		/* pool_max() */
	char			 max_why[256];
	uint64_t		 main_cpu_us;	/* the main process's */
	uint64_t		 idle_us;	/* its CPUs' idle time */
	bool			 idle_known;
	char			 last[256];	/* the latest resize, and why */
	char			 now[256];	/* the latest decision, and why */
	uint64_t		 grows;
	uint64_t		 shrinks;
	uint64_t		 grows_storage;	/* past the CPUs */
	uint64_t		 shrinks_cpu;	/* ... given back */
};

/* Grow, shrink or hold, and why. */
enum autotune_action
autotune_decide(struct autotune_state *st, const struct autotune_input *in,
    char *why, size_t len)
{
	double		pct_wait = in->waited * 100, pct_busy = in->busy * 100;
	double		blocked = 1 - in->computing - in->runnable;
	bool		waiting = in->trainers &&
			    in->waited >= AUTOTUNE_WAIT_GROW;
	bool		storage;
	unsigned	limit = in->limit > in->max ? in->limit : in->max;

	/* Jobs' time neither on a CPU nor waiting for one: blocked. */
	blocked = blocked < 0 ? 0 : blocked;
	storage = in->sched_known && blocked >= AUTOTUNE_STORAGE_GROW &&
	    in->runnable < AUTOTUNE_RUNNABLE_MAX;

	if (in->resizing) {
		st->idle_ms = st->over_ms = 0;
		snprintf(why, len, "a worker is starting or retiring");
		return (AUTOTUNE_HOLD);
	}
	if (in->workers > in->max && in->sched_known &&
	    in->busy >= AUTOTUNE_BUSY_GROW && blocked < AUTOTUNE_OVER_BLOCKED &&
	    in->runnable >= AUTOTUNE_OVER_RUNNABLE) {
		st->idle_ms = 0;
		st->over_ms += in->interval_ms;
		if (st->over_ms >= AUTOTUNE_OVER_MS) {
			snprintf(why, len, "%u workers on %u CPUs waited for a "
			    "CPU %.0f%% of their jobs' time and for storage "
			    "%.0f%%", in->workers, in->max,
			    in->runnable * 100, blocked * 100);
			st->over_ms = 0;
			st->cause = AUTOTUNE_CPU_WAITING;
			return (AUTOTUNE_SHRINK);
		}
		snprintf(why, len, "%u workers on %u CPUs waited for a CPU "
		    "%.0f%% of their jobs' time (one goes after %.0f s of "
		    "that)", in->workers, in->max, in->runnable * 100,
		    (double)AUTOTUNE_OVER_MS / 1000);
		return (AUTOTUNE_HOLD);
	}
	st->over_ms = 0;
	if (waiting && in->busy >= AUTOTUNE_BUSY_GROW) {
		st->idle_ms = 0;
		if (in->workers >= limit) {
			snprintf(why, len, "trainers waited %.0f%% of their "
			    "time and workers were %.0f%% busy, but the pool "
			    "is at its max of %u", pct_wait, pct_busy, limit);
			return (AUTOTUNE_HOLD);
		}
		/* Past the CPUs only for workers that wait for storage. */
		if (in->workers >= in->max && !storage) {
			if (!in->sched_known)
				snprintf(why, len, "trainers waited %.0f%% of "
				    "their time and workers were %.0f%% busy, "
				    "but the pool is at its %u CPUs and how "
				    "long workers wait for one is unknown "
				    "(/proc/PID/schedstat)", pct_wait,
				    pct_busy, in->max);
			else
				snprintf(why, len, "trainers waited %.0f%% of "
				    "their time and workers were %.0f%% busy, "
				    "but the pool is at its %u CPUs and "
				    "workers waited for storage %.0f%% of their "
				    "jobs' time, for a CPU %.0f%%", pct_wait,
				    pct_busy, in->max, blocked * 100,
				    in->runnable * 100);
			return (AUTOTUNE_HOLD);
		}
		/* A worker that waits for storage needs no CPU of its own. */
		if (in->cpu_free < AUTOTUNE_CPU_FREE &&
		    in->computing >= AUTOTUNE_COMPUTING) {
			snprintf(why, len, "trainers waited %.0f%% of their "
			    "time and workers were %.0f%% busy, but no CPU was "
			    "free (%.1f idle)", pct_wait, pct_busy,
			    in->cpu_free);
			return (AUTOTUNE_HOLD);
		}
		if (in->memory_room < in->worker_bytes) {
			snprintf(why, len, "trainers waited %.0f%% of their "
			    "time and workers were %.0f%% busy, but memory "
			    "would not hold another worker (%llu MiB left, it "
			    "takes %llu MiB)", pct_wait, pct_busy,
			    (unsigned long long)(in->memory_room >> 20),
			    (unsigned long long)(in->worker_bytes >> 20));
			return (AUTOTUNE_HOLD);
		}
		st->grow = 1;
		if (in->workers >= in->max) {
			snprintf(why, len, "trainers waited %.0f%% of their "
			    "time and workers were %.0f%% busy, waiting for "
			    "storage %.0f%% of their jobs' time (past the %u "
			    "CPUs, up to %u)", pct_wait, pct_busy,
			    blocked * 100, in->max, limit);
			st->cause = AUTOTUNE_STORAGE_WAITING;
			/* Reads bound them, not CPUs: double, within memory. */
			if (in->waited >= AUTOTUNE_WAIT_DOUBLE) {
				st->grow = in->workers;
				if (st->grow > limit - in->workers)
					st->grow = limit - in->workers;
				if (in->worker_bytes > 0 && st->grow >
				    in->memory_room / in->worker_bytes)
					st->grow = (unsigned)(in->memory_room /
					    in->worker_bytes);
			}
		} else {
			snprintf(why, len, "trainers waited %.0f%% of their "
			    "time and workers were %.0f%% busy", pct_wait,
			    pct_busy);
			st->cause = AUTOTUNE_TRAINERS_WAITING;
		}
		return (AUTOTUNE_GROW);
	}
	/* What one worker fewer could do at half load. */
	if (!waiting && in->workers > 1 &&
	    in->busy * in->workers <= (in->workers - 1) * 0.5) {
		st->idle_ms += in->interval_ms;
		if (st->idle_ms >= AUTOTUNE_SHRINK_MS) {
			snprintf(why, len, "workers were %.0f%% busy and "
			    "trainers waited %.0f%% of their time for %.1f s",
			    pct_busy, pct_wait, (double)st->idle_ms / 1000);
			st->idle_ms = 0;
			st->cause = AUTOTUNE_WORKERS_IDLE;
			return (AUTOTUNE_SHRINK);
		}
		snprintf(why, len, "workers were %.0f%% busy (one goes after "
		    "%.0f s of that)", pct_busy,
		    (double)AUTOTUNE_SHRINK_MS / 1000);
		return (AUTOTUNE_HOLD);
	}
	st->idle_ms = 0;
	if (!in->trainers)
		snprintf(why, len, "no trainer is taking steps");
	else
		snprintf(why, len, "trainers waited %.0f%% of their time, "
		    "workers were %.0f%% busy", pct_wait, pct_busy);
	return (AUTOTUNE_HOLD);
}

/* The most workers: the CPUs, more for storage, within descriptors. */
unsigned
autotune_limit(const struct config_cpus *cpus, uint64_t nofile,
    unsigned max_clients)
{
	uint64_t	n = (uint64_t)cpus->n * AUTOTUNE_STORAGE_PER_CPU;
	/* The clients', 32 more, and the spares' (pool.h). */
	uint64_t	reserved = (uint64_t)max_clients * 3 + 32 +
			    POOL_SPARES_MAX * AUTOTUNE_WORKER_FDS;
	uint64_t	fds;

	if (n < AUTOTUNE_STORAGE_MIN)
		n = AUTOTUNE_STORAGE_MIN;
	if (n > INFEED_MAX_WORKERS)
		n = INFEED_MAX_WORKERS;
	/* What the clients leave of the descriptors (daemon.c's count). */
	fds = nofile > reserved ? (nofile - reserved) / AUTOTUNE_WORKER_FDS :
	    0;
	if (n > fds)
		n = fds;
	return (n > cpus->n ? (unsigned)n : cpus->n);
}

/* Start sizing the pool. */
struct autotune *
autotune_new(struct pool *pool, const struct config_cpus *cpus)
{
	struct autotune	*at = xcalloc(1, sizeof(*at));

	at->pool = pool;
	at->cpus = *cpus;
	at->limit = pool_max(pool) > cpus->n ? pool_max(pool) : cpus->n;
	if (at->limit > cpus->n)
		snprintf(at->max_why, sizeof(at->max_why), "%u CPU%s (%s) "
		    "for workers that compute, up to %u for workers that wait "
		    "for storage", cpus->n, cpus->n == 1 ? "" : "s", cpus->why,
		    at->limit);
	else
		snprintf(at->max_why, sizeof(at->max_why), "%s", cpus->why);
	snprintf(at->now, sizeof(at->now), "started with %u",
	    pool_size(pool));
	log_info("workers = auto: from %u up to %u (%s)", pool_size(pool),
	    at->limit, at->max_why);
	return (at);
}

/* Free it; NULL is a no-op. */
void
autotune_free(struct autotune *at)
{
	free(at);
}

/* Read a small /proc file into @buf; its length, or 0. */
static size_t
autotune_read(const char *path, char *buf, size_t len)
{
	FILE	*fp;
	size_t	 n;

	if ((fp = fopen(path, "re")) == NULL)
		return (0);
	n = fread(buf, 1, len - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	return (n);
}

/* Microseconds of @ticks clock ticks (USER_HZ). */
static uint64_t
autotune_ticks_us(unsigned long long ticks)
{
	long	hz = sysconf(_SC_CLK_TCK);

	return (ticks * 1000000ULL / (uint64_t)(hz > 0 ? hz : 100));
}

/* Process @pid's CPU time (utime + stime in /proc/PID/stat), or 0. */
static uint64_t
autotune_pid_cpu_us(pid_t pid)
{
	char			 path[64], buf[1024], *p;
	unsigned long long	 utime, stime;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (autotune_read(path, buf, sizeof(buf)) == 0 ||
	    (p = strrchr(buf, ')')) == NULL)
		return (0);
	/* After the name: state, then fields 4 to 13, then utime, stime. */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
	    "%llu %llu", &utime, &stime) != 2)
		return (0);
	return (autotune_ticks_us(utime + stime));
}

/* The main process's CPU time. */
static uint64_t
autotune_main_cpu_us(void)
{
	struct timespec	ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == -1)
		return (0);
	return ((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
}

/*
 * Add process @pid's time on a CPU and waiting for one (runnable, not
 * running) to @run_us and @wait_us, from /proc/PID/schedstat (in ns, finer
 * than stat's clock ticks); false when the kernel does not say (no
 * CONFIG_SCHED_INFO) or the process is gone.
 */
static bool
autotune_pid_sched_us(pid_t pid, uint64_t *run_us, uint64_t *wait_us)
{
	char			 path[64], buf[256];
	unsigned long long	 run_ns, wait_ns;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	if (autotune_read(path, buf, sizeof(buf)) == 0 ||
	    sscanf(buf, "%llu %llu", &run_ns, &wait_ns) != 2)
		return (false);
	*run_us += run_ns / 1000;
	*wait_us += wait_ns / 1000;
	return (true);
}

/*
 * The workers' CPU time; from schedstat, when every worker's could be
 * read (@sched_known), their time running and waiting for a CPU.
 */
static uint64_t
autotune_cpu_us(const struct pool *pool, uint64_t *run_us,
    uint64_t *runnable_us, bool *sched_known)
{
	struct pool_worker_info	info;
	uint64_t		us = 0;
	unsigned		i;

	*run_us = *runnable_us = 0;
	*sched_known = true;
	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		if (info.pid <= 0)
			continue;
		us += autotune_pid_cpu_us(info.pid);
		if (!autotune_pid_sched_us(info.pid, run_us, runnable_us))
			*sched_known = false;
	}
	return (us);
}

/*
 * Idle time (idle and iowait in /proc/stat) of the CPUs in this process's
 * affinity mask, the host's count; -1 when it cannot be read.
 */
static int
autotune_idle_us(uint64_t *us)
{
	static char		 buf[65536];
	cpu_set_t		 mask;
	unsigned long long	 v[5];
	char			*line, *next;
	unsigned		 cpu;

	if (sched_getaffinity(0, sizeof(mask), &mask) == -1 ||
	    autotune_read("/proc/stat", buf, sizeof(buf)) == 0)
		return (-1);
	*us = 0;
	for (line = buf; line != NULL && *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (sscanf(line, "cpu%u %llu %llu %llu %llu %llu", &cpu, &v[0],
		    &v[1], &v[2], &v[3], &v[4]) != 6 || cpu >= CPU_SETSIZE ||
		    !CPU_ISSET(cpu, &mask))
			continue;
		*us += autotune_ticks_us(v[3] + v[4]);
	}
	return (0);
}

/* MemAvailable from /proc/meminfo, or UINT64_MAX when unknown. */
static uint64_t
autotune_mem_available(void)
{
	char			 buf[8192], *p;
	unsigned long long	 kib;

	if (autotune_read("/proc/meminfo", buf, sizeof(buf)) == 0 ||
	    (p = strstr(buf, "MemAvailable:")) == NULL ||
	    sscanf(p + 13, "%llu", &kib) != 1)
		return (UINT64_MAX);
	return ((uint64_t)kib << 10);
}

/* @now - @then, or 0 when it went down (a worker's CPU time went with it). */
static uint64_t
autotune_delta(uint64_t now, uint64_t then)
{
	return (now > then ? now - then : 0);
}

/* Note a resize to @workers and why: "grew at 12:00:01 because ...". */
static void
autotune_note(struct autotune *at, const char *verb, unsigned workers,
    const char *why)
{
	struct tm	tm;
	time_t		t = time(NULL);
	char		hms[16];

	localtime_r(&t, &tm);
	strftime(hms, sizeof(hms), "%H:%M:%S", &tm);
	snprintf(at->last, sizeof(at->last), "%s at %s because %s", verb, hms,
	    why);
	log_info("workers = auto: %s to %u workers because %s", verb, workers,
	    why);
}

/* Take this interval's readings, decide, act. */
void
autotune_tick(struct autotune *at, uint64_t wait_us, uint64_t active_us,
    uint64_t memory_private, uint64_t budget_room)
{
	struct autotune_input	 in;
	enum autotune_action	 act;
	uint64_t		 now = clock_now_ms(), busy, cpu, idle = 0;
	uint64_t		 avail, active, interval_us, main_cpu, busy_d;
	uint64_t		 run, runnable;
	bool			 idle_known, sched_known;
	unsigned		 n;
	char			 why[224];

	busy = pool_busy_us(at->pool);
	cpu = autotune_cpu_us(at->pool, &run, &runnable, &sched_known);
	main_cpu = autotune_main_cpu_us();
	idle_known = autotune_idle_us(&idle) == 0;
	memset(&in, 0, sizeof(in));
	in.workers = pool_size(at->pool);
	in.max = at->cpus.n;
	in.limit = at->limit;
	in.resizing = pool_resizing(at->pool);
	in.interval_ms = now - at->at_ms;
	interval_us = in.interval_ms * 1000;
	if (at->primed && interval_us > 0) {
		active = autotune_delta(active_us, at->active_us);
		in.trainers = active > 0;
		in.waited = active > 0 ? (double)autotune_delta(wait_us,
		    at->wait_us) / (double)active : 0;
		busy_d = autotune_delta(busy, at->busy_us);
		in.busy = (double)busy_d / ((double)interval_us * in.workers);
		in.computing = busy_d > 0 ? (double)autotune_delta(cpu,
		    at->cpu_us) / (double)busy_d : 0;
		/* Known for this interval where it was at both ends. */
		in.sched_known = sched_known && at->sched_known;
		if (in.sched_known && busy_d > 0) {
			in.computing = (double)autotune_delta(run, at->run_us) /
			    (double)busy_d;
			in.runnable = (double)autotune_delta(runnable,
			    at->runnable_us) / (double)busy_d;
		}
		in.computing = in.computing > 1 ? 1 : in.computing;
		in.runnable = in.runnable > 1 ? 1 : in.runnable;
		in.cpu_free = in.max - (double)(autotune_delta(cpu,
		    at->cpu_us) + autotune_delta(main_cpu, at->main_cpu_us)) /
		    (double)interval_us;
		if (idle_known && at->idle_known &&
		    (double)autotune_delta(idle, at->idle_us) /
		    (double)interval_us < in.cpu_free)
			in.cpu_free = (double)autotune_delta(idle,
			    at->idle_us) / (double)interval_us;
		in.waited = in.waited > 1 ? 1 : in.waited;
		in.busy = in.busy > 1 ? 1 : in.busy;
		/* A worker takes what the others take on average. */
		in.worker_bytes = memory_private / (in.workers + 1);
		if (in.worker_bytes < AUTOTUNE_MIN_WORKER)
			in.worker_bytes = AUTOTUNE_MIN_WORKER;
		avail = autotune_mem_available();
		in.memory_room = avail < budget_room ? avail : budget_room;
		act = autotune_decide(&at->state, &in, why, sizeof(why));
		for (n = 0; act == AUTOTUNE_GROW && n < at->state.grow &&
		    pool_grow(at->pool) == 0; n++) {
			at->grows++;
			at->grows_storage += at->state.cause ==
			    AUTOTUNE_STORAGE_WAITING;
		}
		if (act == AUTOTUNE_GROW && n > 0)
			autotune_note(at, "grew", in.workers + n, why);
		else if (act == AUTOTUNE_SHRINK &&
		    pool_shrink(at->pool) == 0) {
			at->shrinks++;
			at->shrinks_cpu += at->state.cause ==
			    AUTOTUNE_CPU_WAITING;
			autotune_note(at, "shrank", in.workers - 1, why);
		}
		snprintf(at->now, sizeof(at->now), "%s: %s", act ==
		    AUTOTUNE_GROW ? "growing" : act == AUTOTUNE_SHRINK ?
		    "shrinking" : "holding", why);
	}
	at->primed = true;
	at->at_ms = now;
	at->wait_us = wait_us;
	at->active_us = active_us;
	at->busy_us = busy;
	at->cpu_us = cpu;
	at->run_us = run;
	at->runnable_us = runnable;
	at->sched_known = sched_known;
	at->main_cpu_us = main_cpu;
	at->idle_us = idle;
	at->idle_known = idle_known;
}

/* What status, top and /metrics show. */
void
autotune_report(const struct autotune *at, struct autotune_report *r)
{
	r->max = at->limit;
	r->max_why = at->max_why;
	r->last = at->last;
	r->now = at->now;
	r->grows = at->grows;
	r->shrinks = at->shrinks;
	r->grows_storage = at->grows_storage;
	r->shrinks_cpu = at->shrinks_cpu;
}
