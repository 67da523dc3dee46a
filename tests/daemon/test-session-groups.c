/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for shared groups, daemon/group.c with the readers and the
 * producer it moves (the integration test test-groups drives them
 * through infeedd; these drive sessions made with
 * session_new() over a real catalogue and pool of two workers, on an
 * event base, so that sharing is on).  Members of the same options share
 * one ring and each takes every step from its own position; options that
 * differ, or share off, make another group or none; a slot is refilled
 * only once every member is past it and none holds it; a slot that a
 * member held when its session ended is never refilled while its process
 * lives (the ring counts its holders), and is once it exits; a member
 * that holds the group back past INFEED_GROUP_SLACK_MS leaves with a ring
 * of its own, and the others go on.
 */

#include <sys/wait.h>

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>

#include "config.h"
#include "infeed-limits.h"
#include "log.h"
#include "pool.h"
#include "ring.h"
#include "runner.h"
#include "session.h"
#include "unit-daemon.h"

#define WORKERS		2
#define DEADLINE_MS	15000		/* slow under valgrind */
#define MAX_EVENTS	64

/* One member: its session and the answers it got. */
struct member {
	struct session		*s;
	struct session_client	 client;
	struct session_info	 info;
	struct session_step	 steps[MAX_EVENTS];
	unsigned		 nsteps;
	unsigned		 nerrors;
	unsigned		 nends;
	char			 error[512];
};

static char			 rundir[PATH_MAX];	/* made by main() */
static char			 tmpdir[PATH_MAX];	/* made per test */
static struct session_host	 host;
static struct session_options	 opts;
static struct member		 ma, mb, mc;
static uint64_t			 next_id;

/* A fresh catalogue ("f32": 100 samples), pool and options per test. */
static void
setup(void)
{
	static const struct session_options defaults = {
		.batch_size = 4, .device_iterations = 1,
		.replication_factor = 1, .gradient_accumulation = 1,
		.drop_last = true, .buffer_size = 2,
		.load_indefinitely = true, .process_count = 1,
		.label_dtype = INFEED_DTYPE_INT32, .share = true,
	};
	char	path[PATH_MAX], text[512];

	unit_fmt(tmpdir, sizeof(tmpdir), "%s/t.XXXXXX", rundir);
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	unit_fmt(text, sizeof(text),
	    "[infeedd]\n"
	    "workers = %d\n"
	    "memory_budget = 16M\n"
	    "[dataset f32]\n"
	    "type = synthetic\n"
	    "samples = 100\n"
	    "shape = 4\n"
	    "dtype = float32\n"
	    "seed = 3\n", WORKERS);
	unit_fmt(path, sizeof(path), "%s/infeedd.conf", tmpdir);
	write_file(path, text, strlen(text));
	unit_daemon_start(path, 1, WORKERS);
	host.cat = cat;
	host.pool = pool;
	host.budget = &budget;
	host.config_path = conf->path;
	host.base = base;	/* sharing needs the loop */
	opts = defaults;
	memset(&ma, 0, sizeof(ma));
	memset(&mb, 0, sizeof(mb));
	memset(&mc, 0, sizeof(mc));
	next_id = 1;
}

/*
 * End the sessions; every byte of the budget comes back (each test
 * releases its steps first: a held step stays charged while its process,
 * this one, lives).
 */
static void
teardown(void)
{
	uint64_t	deadline;

	session_free(ma.s);
	session_free(mb.s);
	session_free(mc.s);
	deadline = now_ms() + DEADLINE_MS;
	while (!pool_idle(pool) && now_ms() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	ring_budget_settle(&budget);
	ck_assert_uint_eq(budget.used, 0);
	unit_daemon_stop();
	remove_tree(tmpdir);
}

static void
ev_step_cb(void *arg, struct session_req req, const struct session_step *st)
{
	struct member	*m = arg;

	(void)req;
	ck_assert_uint_lt(m->nsteps, MAX_EVENTS);
	m->steps[m->nsteps++] = *st;
}

static void
ev_end_cb(void *arg, struct session_req req, uint64_t epoch)
{
	struct member	*m = arg;

	(void)req, (void)epoch;
	m->nends++;
}

static void
ev_error_cb(void *arg, struct session_req req, enum errcode code,
    const char *message)
{
	struct member	*m = arg;

	(void)req, (void)code;
	m->nerrors++;
	unit_fmt(m->error, sizeof(m->error), "%s", message);
}

static const struct session_events events = {
	.step = ev_step_cb,
	.end_of_data = ev_end_cb,
	.error = ev_error_cb,
};

/* Attach member @m (of process @pid) to "f32" with the options. */
static void
join(struct member *m, pid_t pid)
{
	struct session_attach	 a = { .options = opts };
	enum errcode		 code;
	char			*cause = NULL;

	a.dataset = (char *)(uintptr_t)"f32";
	m->client.peer_id = next_id++;
	m->client.pid = pid;
	m->client.uid = 1000;
	m->client.gid = 1000;
	m->s = session_new(&host, &m->client, &a, NULL, 0, NULL, &events, m,
	    &code, &cause);
	ck_assert_msg(m->s != NULL, "attach: %s", cause);
	session_describe(m->s, &m->info);
}

/* A Next of @m that must be taken. */
static void
next(struct member *m)
{
	struct session_req	 req = { next_id++, true };
	enum errcode		 code;
	char			*cause = NULL;

	ck_assert_msg(session_next(m->s, req, &code, &cause) == 0,
	    "Next refused: %s", cause);
}

/* A Release of @m that must be taken. */
static void
release(struct member *m, uint32_t slot)
{
	char	*cause = NULL;

	ck_assert_msg(session_release(m->s, slot, &cause) == 0,
	    "Release %u refused: %s", slot, cause);
}

/* Run the loop until @m has @n steps; fail at the deadline. */
static void
wait_steps(struct member *m, unsigned n)
{
	uint64_t	deadline = now_ms() + DEADLINE_MS;

	while (m->nsteps < n) {
		ck_assert_msg(m->nerrors == 0, "an error: %s", m->error);
		ck_assert_msg(now_ms() < deadline, "%u steps, not %u, by "
		    "the deadline", m->nsteps, n);
		event_base_loop(base, EVLOOP_ONCE);
	}
}

/* Run the loop for @ms. */
static void
run_for(uint64_t ms)
{
	uint64_t	end = now_ms() + ms;

	while (now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
}

/* @m's last step must be (@epoch, @step); its slot. */
static uint32_t
last_step(const struct member *m, uint64_t epoch, uint64_t step)
{
	const struct session_step	*st = &m->steps[m->nsteps - 1];

	ck_assert_uint_eq(st->epoch, epoch);
	ck_assert_uint_eq(st->step, step);
	ck_assert_uint_eq(st->rows, 4);
	return (st->slot);
}

START_TEST(test_members_of_the_same_options_share_one_ring)
{
	struct session_report	r;
	uint32_t		slot_a, slot_b;
	uint64_t		k;

	join(&ma, getpid());
	join(&mb, getpid());
	ck_assert_uint_ne(ma.info.group_id, 0);
	ck_assert_uint_eq(ma.info.group_id, mb.info.group_id);
	ck_assert_uint_eq(ma.info.layout.ring_bytes,
	    mb.info.layout.ring_bytes);
	/* Each takes every step from its own position, in the same slot. */
	for (k = 0; k < 6; k++) {
		next(&ma);
		wait_steps(&ma, (unsigned)k + 1);
		slot_a = last_step(&ma, 0, k);
		next(&mb);
		wait_steps(&mb, (unsigned)k + 1);
		slot_b = last_step(&mb, 0, k);
		ck_assert_uint_eq(slot_a, slot_b);
		release(&ma, slot_a);
		release(&mb, slot_b);
	}
	session_report(ma.s, &r);
	ck_assert_uint_eq(r.group_id, ma.info.group_id);
	ck_assert_uint_eq(r.group_members, 2);
	ck_assert_uint_eq(r.steps, 6);
	/* One ring's reads, counted on the oldest member only. */
	ck_assert_uint_eq(r.group_bytes_read, r.bytes_read);
	session_report(mb.s, &r);
	ck_assert_uint_eq(r.bytes_read, 0);
	ck_assert(!r.group_left);
	/* A seed of its own makes another group; share off, none. */
	opts.seed = 7;
	join(&mc, getpid());
	ck_assert_uint_ne(mc.info.group_id, 0);
	ck_assert_uint_ne(mc.info.group_id, ma.info.group_id);
	session_free(mc.s);
	opts.seed = 0;
	opts.share = false;
	join(&mc, getpid());
	ck_assert_uint_eq(mc.info.group_id, 0);
}
END_TEST

/*
 * With two slots, a member two steps ahead waits until the other is past
 * the oldest step and released it: no slot is refilled before that.
 */
START_TEST(test_slot_refilled_once_every_member_is_past_it)
{
	uint32_t	slot0, slot1;

	join(&ma, getpid());
	join(&mb, getpid());
	next(&ma);
	wait_steps(&ma, 1);
	slot0 = last_step(&ma, 0, 0);
	release(&ma, slot0);
	next(&ma);
	wait_steps(&ma, 2);
	slot1 = last_step(&ma, 0, 1);
	release(&ma, slot1);
	next(&ma);
	/* Well within the slack: b is not to blame yet. */
	run_for(INFEED_GROUP_SLACK_MS / 5);
	ck_assert_uint_eq(ma.nsteps, 2);
	next(&mb);
	wait_steps(&mb, 1);
	ck_assert_uint_eq(last_step(&mb, 0, 0), slot0);
	run_for(INFEED_GROUP_SLACK_MS / 10);
	ck_assert_uint_eq(ma.nsteps, 2);	/* b holds it */
	release(&mb, slot0);
	wait_steps(&ma, 3);
	ck_assert_uint_eq(last_step(&ma, 0, 2), slot0);
	release(&ma, slot0);
}
END_TEST

/*
 * A member whose session ends holding a step keeps it for its process:
 * the slot is never refilled while that process lives, and is once it
 * exits (its pidfd tells the loop).
 */
START_TEST(test_ended_member_slot_kept_until_its_process_exits)
{
	uint32_t	kept, other;
	pid_t		child;
	int		status;
	unsigned	k;

	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	join(&ma, child);
	join(&mb, getpid());
	next(&ma);
	wait_steps(&ma, 1);
	kept = last_step(&ma, 0, 0);
	session_free(ma.s);	/* holding step 0 */
	ma.s = NULL;
	next(&mb);
	wait_steps(&mb, 1);
	ck_assert_uint_eq(last_step(&mb, 0, 0), kept);
	release(&mb, kept);
	/* Every later step goes through the other slot. */
	for (k = 1; k < 4; k++) {
		next(&mb);
		wait_steps(&mb, k + 1);
		other = last_step(&mb, 0, k);
		ck_assert_uint_ne(other, kept);
		release(&mb, other);
	}
	next(&mb);
	wait_steps(&mb, 5);
	other = last_step(&mb, 0, 4);
	next(&mb);		/* only the kept slot could take step 5 */
	run_for(INFEED_GROUP_SLACK_MS / 5);
	ck_assert_uint_eq(mb.nsteps, 5);
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	wait_steps(&mb, 6);
	ck_assert_uint_eq(last_step(&mb, 0, 5), kept);
	release(&mb, other);
	release(&mb, kept);
}
END_TEST

/*
 * A member whose pid is not known (a client in another pid namespace:
 * SO_PEERCRED says 0) cannot be watched: its session ending holding a
 * step lets the slot go, as ring memory does, rather than pin it for the
 * group's life.
 */
START_TEST(test_ended_member_of_unknown_pid_pins_no_slot)
{
	uint32_t	kept, other;

	join(&ma, 0);
	join(&mb, getpid());
	next(&ma);
	wait_steps(&ma, 1);
	kept = last_step(&ma, 0, 0);
	session_free(ma.s);	/* holding step 0 */
	ma.s = NULL;
	next(&mb);
	wait_steps(&mb, 1);
	ck_assert_uint_eq(last_step(&mb, 0, 0), kept);
	release(&mb, kept);
	next(&mb);
	wait_steps(&mb, 2);
	other = last_step(&mb, 0, 1);
	release(&mb, other);
	/* Step 2 may go in the slot the ended member held. */
	next(&mb);
	wait_steps(&mb, 3);
	ck_assert_uint_eq(last_step(&mb, 0, 2), kept);
	release(&mb, kept);
}
END_TEST

/*
 * A member that stops holds the group back: after the slack it leaves
 * with a ring of its own (its next Step brings it, numbered after the
 * group's slots), and the other member goes on.
 */
START_TEST(test_member_holding_the_group_back_leaves_with_its_own_ring)
{
	struct session_report	 r;
	const struct session_step *st;
	uint32_t		 slot0, slot1;
	uint64_t		 t0, waited;

	join(&ma, getpid());
	join(&mb, getpid());
	next(&mb);
	wait_steps(&mb, 1);
	slot0 = last_step(&mb, 0, 0);	/* held, and b asks no more */
	next(&ma);
	wait_steps(&ma, 1);
	release(&ma, last_step(&ma, 0, 0));
	next(&ma);
	wait_steps(&ma, 2);
	slot1 = last_step(&ma, 0, 1);
	release(&ma, slot1);
	t0 = now_ms();
	next(&ma);
	wait_steps(&ma, 3);
	waited = now_ms() - t0;
	release(&ma, ma.steps[2].slot);
	printf("the member waited %llu ms on the one that stopped (slack "
	    "%d ms)\n", (unsigned long long)waited, INFEED_GROUP_SLACK_MS);
	ck_assert_uint_ge(waited, INFEED_GROUP_SLACK_MS / 2);
	last_step(&ma, 0, 2);
	session_report(mb.s, &r);
	ck_assert(r.group_left);
	session_report(ma.s, &r);
	ck_assert_uint_eq(r.group_leaves[SESSION_LEAVE_HELD_BACK], 1);
	ck_assert_uint_eq(r.group_members, 1);
	/* b goes on alone from step 1, on its own ring. */
	release(&mb, slot0);
	next(&mb);
	wait_steps(&mb, 2);
	st = &mb.steps[1];
	ck_assert_uint_eq(st->step, 1);
	ck_assert(st->new_ring);
	ck_assert_uint_eq(st->first_slot, opts.buffer_size);
	ck_assert_uint_ge(st->slot, st->first_slot);
	release(&mb, st->slot);
}
END_TEST

static Suite *
groups_suite(void)
{
	Suite	*s = suite_create("session-groups");
	TCase	*tc = tcase_create("groups");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_members_of_the_same_options_share_one_ring);
	tcase_add_test(tc, test_slot_refilled_once_every_member_is_past_it);
	tcase_add_test(tc, test_ended_member_slot_kept_until_its_process_exits);
	tcase_add_test(tc, test_ended_member_of_unknown_pid_pins_no_slot);
	tcase_add_test(tc,
	    test_member_holding_the_group_back_leaves_with_its_own_ring);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	log_init("test-session-groups", getenv("TEST_VERBOSE") != NULL ? 1 :
	    -1);
	return (run_suite_in_dir(groups_suite(), "test-session-groups", rundir,
	    sizeof(rundir)));
}
