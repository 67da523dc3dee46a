/* SPDX-License-Identifier: MIT */
/*
 * workers = auto's decision (daemon/autotune.c), a pure function of one
 * interval's numbers: it grows while trainers wait and the workers are
 * what they wait for, only with a CPU free (or workers that wait for
 * storage) and memory for a worker, past the CPUs the daemon may use only
 * for workers that wait for storage and not for a CPU, up to its limit
 * (autotune_limit()); it shrinks after AUTOTUNE_SHRINK_MS of idle
 * workers, never below one, and past the CPUs after AUTOTUNE_OVER_MS of
 * workers that wait for CPUs; and it says why each time.
 */

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <check.h>

#include "autotune.h"
#include "runner.h"

static char	rundir[PATH_MAX];	/* made by main() */

/* An interval where trainers waited 40% and one of two workers ran flat out. */
static struct autotune_input
waiting(void)
{
	struct autotune_input	in;

	memset(&in, 0, sizeof(in));
	in.workers = 1;
	in.max = 2;
	in.trainers = true;
	in.waited = 0.40;
	in.busy = 0.95;
	in.cpu_free = 1.0;
	in.computing = 0.9;
	in.worker_bytes = 16 << 20;
	in.memory_room = 1ULL << 30;
	in.interval_ms = AUTOTUNE_TICK_MS;
	return (in);
}

/* Trainers that wait for busy workers, with a CPU free: grow, saying why. */
START_TEST(autotune_grows_while_trainers_wait_for_busy_workers)
{
	struct autotune_state	st = { 0 };
	struct autotune_input	in = waiting();
	char			why[256];

	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_GROW);
	ck_assert_str_eq(why, "trainers waited 40% of their time and workers "
	    "were 95% busy");

	/* Storage-bound workers need no CPU of their own to add one. */
	in.cpu_free = 0.1;
	in.computing = 0.05;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_GROW);
}
END_TEST

/* No growth past the max, onto busy CPUs, beyond memory, or mid-resize. */
START_TEST(autotune_holds_at_its_bounds)
{
	struct autotune_state	st = { 0 };
	struct autotune_input	in = waiting();
	char			why[256];

	in.workers = 2;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "trainers waited 40% of their time and workers "
	    "were 95% busy, but the pool is at its max of 2");
	in.max = 1;
	in.workers = 1;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);

	in = waiting();
	in.cpu_free = 0.3;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "trainers waited 40% of their time and workers "
	    "were 95% busy, but no CPU was free (0.3 idle)");

	in = waiting();
	in.memory_room = 8 << 20;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "trainers waited 40% of their time and workers "
	    "were 95% busy, but memory would not hold another worker (8 MiB "
	    "left, it takes 16 MiB)");

	in = waiting();
	in.resizing = true;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "a worker is starting or retiring");

	/* Trainers that wait for something other than the workers. */
	in = waiting();
	in.busy = 0.5;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	/* Trainers that do not wait (or none at all). */
	in = waiting();
	in.waited = 0.05;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "trainers waited 5% of their time, workers "
	    "were 95% busy");
	in.trainers = false;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "no trainer is taking steps");
}
END_TEST

/*
 * Idle workers: one goes after AUTOTUNE_SHRINK_MS of idle intervals in a
 * row (a busy one starts the count again), then the count starts over;
 * never below one worker.
 */
START_TEST(autotune_shrinks_after_workers_idle_a_while)
{
	struct autotune_state	st = { 0 };
	struct autotune_input	in = waiting(), busy;
	char			why[256];
	unsigned		ticks = AUTOTUNE_SHRINK_MS / AUTOTUNE_TICK_MS, i;

	in.workers = 3;
	in.max = 4;
	in.trainers = false;
	in.waited = 0;
	in.busy = 0.2;
	busy = in;
	busy.busy = 0.9;
	for (i = 0; i + 1 < ticks; i++)
		ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
		    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "workers were 20% busy (one goes after 3 s of "
	    "that)");
	ck_assert_int_eq(autotune_decide(&st, &busy, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	for (i = 0; i + 1 < ticks; i++)
		ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
		    AUTOTUNE_HOLD);
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_SHRINK);
	ck_assert_str_eq(why, "workers were 20% busy and trainers waited 0% "
	    "of their time for 3.0 s");
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);

	/* Work that needs every worker but one at more than half: hold. */
	memset(&st, 0, sizeof(st));
	in.busy = 0.4;		/* 1.2 workers' worth > 2 x 0.5 */
	for (i = 0; i < 2 * ticks; i++)
		ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
		    AUTOTUNE_HOLD);

	/* One worker stays, idle or not. */
	in.workers = 1;
	in.busy = 0;
	for (i = 0; i < 2 * ticks; i++)
		ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
		    AUTOTUNE_HOLD);
}
END_TEST

/* An interval at the CPUs where the workers wait: for @computing, @runnable. */
static struct autotune_input
at_the_cpus(double computing, double runnable)
{
	struct autotune_input	in = waiting();

	in.workers = 2;
	in.max = 2;
	in.limit = 16;
	in.cpu_free = 0.2;
	in.sched_known = true;
	in.computing = computing;
	in.runnable = runnable;
	return (in);
}

/*
 * Issue 36, item 3: workers that wait for storage, not for a CPU, grow
 * the pool past the CPUs up to its limit, saying so; workers that compute
 * or wait for a CPU hold it at the CPUs (no oversubscription), as do an
 * unknown runnable time and a lack of memory.
 */
START_TEST(autotune_grows_past_the_cpus_for_storage)
{
	struct autotune_state	st = { 0 };
	struct autotune_input	in = at_the_cpus(0.05, 0.02);
	char			why[320];

	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_GROW);
	ck_assert_str_eq(why, "trainers waited 40% of their time and workers "
	    "were 95% busy, waiting for storage 93% of their jobs' time (past "
	    "the 2 CPUs, up to 16)");
	ck_assert_int_eq(st.cause, AUTOTUNE_STORAGE_WAITING);
	ck_assert_uint_eq(st.grow, 1);
	/* Trainers waiting most of their time: it doubles, within bounds. */
	in.waited = 0.9;
	in.workers = 4;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_GROW);
	ck_assert_uint_eq(st.grow, 4);
	in.workers = 12;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_GROW);
	ck_assert_uint_eq(st.grow, 4);
	in.workers = 4;
	in.memory_room = 40 << 20;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_GROW);
	ck_assert_uint_eq(st.grow, 2);
	/* Within the CPUs, one at a time. */
	in = at_the_cpus(0.05, 0.02);
	in.waited = 0.9;
	in.workers = 1;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_GROW);
	ck_assert_uint_eq(st.grow, 1);
	ck_assert_int_eq(st.cause, AUTOTUNE_TRAINERS_WAITING);
	in = at_the_cpus(0.05, 0.02);
	in.workers = 15;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_GROW);
	in.workers = 16;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "trainers waited 40% of their time and workers "
	    "were 95% busy, but the pool is at its max of 16");

	/* The image pipeline's workers compute: stay at the CPUs. */
	in = at_the_cpus(0.9, 0.05);
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "trainers waited 40% of their time and workers "
	    "were 95% busy, but the pool is at its 2 CPUs and workers waited "
	    "for storage 5% of their jobs' time, for a CPU 5%");
	/* Waiting for storage, but also for CPUs taken by others. */
	in = at_the_cpus(0.1, 0.3);
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	/* Blocked less than half the time. */
	in = at_the_cpus(0.45, 0.1);
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	/* No schedstat: no telling runnable from blocked. */
	in = at_the_cpus(0.05, 0);
	in.sched_known = false;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "trainers waited 40% of their time and workers "
	    "were 95% busy, but the pool is at its 2 CPUs and how long "
	    "workers wait for one is unknown (/proc/PID/schedstat)");
	/* Memory first. */
	in = at_the_cpus(0.05, 0.02);
	in.memory_room = 8 << 20;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_msg(strstr(why, "but memory would not hold another worker")
	    != NULL, "%s", why);
	/* A limit at or below the CPUs is the CPUs (a fixed-size view). */
	in = at_the_cpus(0.05, 0.02);
	in.limit = 0;
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "trainers waited 40% of their time and workers "
	    "were 95% busy, but the pool is at its max of 2");
}
END_TEST

/*
 * Workers past the CPUs that now wait for CPUs, not storage (the pages
 * got cached): one goes every AUTOTUNE_OVER_MS, down to the CPUs and no
 * further; an interval of storage waits starts the count again.
 */
START_TEST(autotune_gives_back_workers_past_the_cpus_that_compute)
{
	struct autotune_state	st = { 0 };
	struct autotune_input	in = at_the_cpus(0.3, 0.6), storage;
	char			why[320];
	unsigned		ticks = AUTOTUNE_OVER_MS / AUTOTUNE_TICK_MS, i;

	in.workers = 8;
	storage = at_the_cpus(0.05, 0.02);
	storage.workers = 8;
	for (i = 0; i + 1 < ticks; i++)
		ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
		    AUTOTUNE_HOLD);
	ck_assert_str_eq(why, "8 workers on 2 CPUs waited for a CPU 60% of "
	    "their jobs' time (one goes after 1 s of that)");
	ck_assert_int_eq(autotune_decide(&st, &storage, why, sizeof(why)),
	    AUTOTUNE_GROW);
	for (i = 0; i + 1 < ticks; i++)
		ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
		    AUTOTUNE_HOLD);
	ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
	    AUTOTUNE_SHRINK);
	ck_assert_str_eq(why, "8 workers on 2 CPUs waited for a CPU 60% of "
	    "their jobs' time and for storage 10%");
	ck_assert_int_eq(st.cause, AUTOTUNE_CPU_WAITING);
	/* At the CPUs it holds, however long they wait for one. */
	in.workers = 2;
	for (i = 0; i < 4 * ticks; i++)
		ck_assert_int_eq(autotune_decide(&st, &in, why, sizeof(why)),
		    AUTOTUNE_HOLD);
}
END_TEST

/*
 * The limit: 8 workers a CPU, at least 16, at most INFEED_MAX_WORKERS,
 * within the descriptors the clients leave, never below the CPUs.
 */
START_TEST(autotune_limit_bounds_workers_by_cpus_and_open_files)
{
	struct config_cpus	cpus = { .n = 2 };

	ck_assert_uint_eq(autotune_limit(&cpus, 1048576, 1024), 16);
	cpus.n = 1;
	ck_assert_uint_eq(autotune_limit(&cpus, 1048576, 1024), 16);
	cpus.n = 8;
	ck_assert_uint_eq(autotune_limit(&cpus, 1048576, 1024), 64);
	cpus.n = 64;
	ck_assert_uint_eq(autotune_limit(&cpus, UINT64_MAX, 1024), 256);
	/*
	 * 1024 descriptors less 64 clients' 3, 32 and the 2 spares' 2: 398
	 * workers' worth.
	 */
	cpus.n = 64;
	ck_assert_uint_eq(autotune_limit(&cpus, 1024, 64), 256);
	ck_assert_uint_eq(autotune_limit(&cpus, 300, 64), 64);
	cpus.n = 8;
	ck_assert_uint_eq(autotune_limit(&cpus, 300, 64), 36);
	ck_assert_uint_eq(autotune_limit(&cpus, 100, 64), 8);
}
END_TEST

static Suite *
autotune_suite(void)
{
	Suite	*s = suite_create("autotune");
	TCase	*tc = tcase_create("decide");

	tcase_add_test(tc, autotune_grows_while_trainers_wait_for_busy_workers);
	tcase_add_test(tc, autotune_holds_at_its_bounds);
	tcase_add_test(tc, autotune_shrinks_after_workers_idle_a_while);
	tcase_add_test(tc, autotune_grows_past_the_cpus_for_storage);
	tcase_add_test(tc, autotune_gives_back_workers_past_the_cpus_that_compute);
	tcase_add_test(tc, autotune_limit_bounds_workers_by_cpus_and_open_files);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every test in a directory of its own, then remove it. */
int
main(void)
{
	return (run_suite_in_dir(autotune_suite(), "test-autotune", rundir,
	    sizeof(rundir)));
}
