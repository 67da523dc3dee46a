/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/ring-memory.c on its own, without a ring: memory
 * taken is charged with what comes with it, released kept (and said kept
 * by ring_budget_keeps(), the one question the pool asks) or given up,
 * taken back by the same owner, destroyed at once; a refusal is a clause
 * naming the budget and its file for the caller to finish; held memory
 * stays charged until its process exits (or the last of those it is
 * held for).  test-ring.c covers the rest
 * (zeroing, punching, pidfds on a loop) through ring_new().
 */

#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "log.h"
#include "ring-memory.h"
#include "runner.h"

#define KiB	(UINT64_C(1) << 10)
#define MiB	(UINT64_C(1) << 20)

static const struct ring_owner	 owner = { 1000, 100, 7, 0 };
static struct ring_budget	 budget;
static char			*cause;

/* A budget of 4 MiB that keeps memory a minute. */
static void
setup(void)
{
	ring_budget_init(&budget, 4 * MiB, "/etc/infeed/test.conf", 60000);
	cause = NULL;
}

static void
teardown(void)
{
	ring_budget_clear(&budget);
	free(cause);
}

/* @bytes for @o with @extra, which must be given. */
static struct ring_mem *
take(uint64_t bytes, uint64_t extra, const struct ring_owner *o)
{
	struct ring_mem	*m;
	bool		 over;

	m = ring_mem_take(&budget, bytes, extra, o, &over, &cause);
	ck_assert_msg(m != NULL, "%s", cause != NULL ? cause : "?");
	return (m);
}

/* Taken, charged with its extra; kept and said so; taken back; destroyed. */
START_TEST(test_taken_kept_taken_back_destroyed)
{
	struct ring_mem	*m;
	uint64_t	 id;

	m = take(256 * KiB, 4 * KiB, &owner);
	id = m->id;
	ck_assert_uint_eq(m->bytes, 256 * KiB);
	ck_assert_uint_eq(budget.used, 260 * KiB);
	ck_assert(!ring_budget_keeps(&budget, id));	/* in use */
	ring_mem_release(m, 4 * KiB, false, true);
	ck_assert_uint_eq(budget.used, 256 * KiB);
	ck_assert_uint_eq(budget.kept_bytes, 256 * KiB);
	ck_assert(ring_budget_keeps(&budget, id));
	m = take(256 * KiB, 8 * KiB, &owner);
	ck_assert_uint_eq(m->id, id);
	ck_assert_uint_eq(budget.reused, 1);
	ck_assert_uint_eq(budget.used, 264 * KiB);
	ck_assert(!ring_budget_keeps(&budget, id));
	ring_mem_destroy(m, 8 * KiB);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

/* Released not to keep, memory is given up: punched, then uncharged. */
START_TEST(test_given_up_not_kept_then_uncharged)
{
	struct ring_mem	*m;
	uint64_t	 id;

	m = take(256 * KiB, 0, &owner);
	id = m->id;
	ring_mem_release(m, 0, false, false);
	ck_assert(!ring_budget_keeps(&budget, id));
	ring_budget_settle(&budget);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

/* Over the budget: NULL, *over, and a clause naming the budget's file. */
START_TEST(test_refusal_is_a_clause_naming_the_budget)
{
	struct ring_mem	*m;
	bool		 over = false;

	m = ring_mem_take(&budget, 4 * MiB, 1, &owner, &over, &cause);
	ck_assert_ptr_null(m);
	ck_assert(over);
	ck_assert_msg(strcmp(cause, "only 4 MiB of the daemon's memory "
	    "budget (4 MiB, memory_budget in /etc/infeed/test.conf) is "
	    "free") == 0, "%s", cause);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

/* Held for a process, memory stays charged until the process exits. */
START_TEST(test_held_until_its_process_exits)
{
	struct ring_owner	 o = owner;
	struct ring_mem		*m;
	pid_t			 pid;

	ck_assert_int_ne(pid = fork(), -1);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	o.pid = pid;
	m = take(256 * KiB, 0, &o);
	ring_mem_release(m, 0, true, true);
	ck_assert_uint_eq(budget.held_bytes, 256 * KiB);
	ck_assert_uint_eq(ring_budget_held_by(&budget, o.uid, NULL), 256 * KiB);
	ck_assert(!ring_budget_keeps(&budget, m->id));
	ring_budget_reap(&budget);
	ck_assert_uint_eq(budget.held_bytes, 256 * KiB);	/* still there */
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	ring_budget_reap(&budget);
	ck_assert_uint_eq(budget.held_bytes, 0);
	ring_budget_settle(&budget);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

/* A child that waits to be killed. */
static pid_t
sleeper(void)
{
	pid_t	pid;

	ck_assert_int_ne(pid = fork(), -1);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	return (pid);
}

/*
 * Held for several processes (ring_mem_hold_for(), a group's members),
 * memory stays charged, attributed to each in turn, until the last one
 * exits, whichever order they exit in; one gone already, and its owner
 * (the group's creator, not named), hold nothing.
 */
START_TEST(test_held_until_the_last_of_its_processes_exits)
{
	struct ring_owner	 o = owner;
	struct ring_mem		*m;
	pid_t			 pids[3], gone, who;

	ck_assert_int_ne(gone = fork(), -1);
	if (gone == 0)
		_exit(0);
	ck_assert_int_eq(waitpid(gone, NULL, 0), gone);
	pids[0] = gone;
	pids[1] = sleeper();
	pids[2] = sleeper();
	o.pid = getpid();	/* the creator lives on, holding nothing */
	m = take(256 * KiB, 0, &o);
	ring_mem_hold_for(m, pids, 3);
	ring_mem_release(m, 0, true, true);
	ck_assert_uint_eq(budget.held_bytes, 256 * KiB);
	ck_assert_uint_eq(ring_budget_held_by(&budget, o.uid, &who), 256 * KiB);
	ck_assert_int_eq(who, pids[1]);
	kill(pids[1], SIGKILL);
	ck_assert_int_eq(waitpid(pids[1], NULL, 0), pids[1]);
	ring_budget_reap(&budget);
	ck_assert_uint_eq(ring_budget_held_by(&budget, o.uid, &who), 256 * KiB);
	ck_assert_int_eq(who, pids[2]);
	kill(pids[2], SIGKILL);
	ck_assert_int_eq(waitpid(pids[2], NULL, 0), pids[2]);
	ring_budget_reap(&budget);
	ck_assert_uint_eq(budget.held_bytes, 0);
	ring_budget_settle(&budget);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

static Suite *
ring_memory_suite(void)
{
	Suite	*s = suite_create("ring-memory");
	TCase	*tc = tcase_create("budget");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_taken_kept_taken_back_destroyed);
	tcase_add_test(tc, test_given_up_not_kept_then_uncharged);
	tcase_add_test(tc, test_refusal_is_a_clause_naming_the_budget);
	tcase_add_test(tc, test_held_until_its_process_exits);
	tcase_add_test(tc, test_held_until_the_last_of_its_processes_exits);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	log_init("test-ring-memory", getenv("TEST_VERBOSE") != NULL ? 1 : -1);
	return (run_suite(ring_memory_suite()));
}
