/* SPDX-License-Identifier: MIT */
/*
 * Shared pipelines on the real infeedd (issue 25, item 3): trainers that
 * attach with the same data share one group, whose ring holds each step
 * once (docs/protocol.md, "Shared pipelines").
 *
 * Checked, with libinfeed clients taking steps in turn: four members of
 * one group (the stats say 1 group of 4) each get every index of each
 * epoch exactly once, in the order of a lone client of the same options
 * (the sampler), while the workers read each step once (rows read and the
 * group's steps filled are 1x, not 4x); a member that stops taking steps
 * for longer than the slack leaves, the others go on, and it then
 * finishes its epochs from its own ring with nothing lost or repeated; a
 * late member joins at a step the group still has, and one at another
 * position runs alone; the group counts its members' leaves by reason,
 * and rejoins, in the Stats frame and infeedctl status; share = false, different options and another user
 * never share; a group's ring that a member's process holds steps of
 * after its session ended stays charged until that process exits, not
 * the group's creator's.  Issue 39: a slower or pausing member does not
 * keep the others to its pace (item 9); one catching up while holding a
 * step of its own ring never freezes, and one with no room for a ring of
 * its own is ended rather than freeze the others (10); a step kept after
 * its session ended never changes while the group goes on (11).  The
 * slack and freeze cases run with no window, and again with one of 1G
 * (61 slots, counted from Stats), with and without a lingering store.
 */

#include <sys/wait.h>

#include <grp.h>
#include <signal.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "infeed-limits.h"
#include "sampler.h"

#define GR_SEED		5
#define GR_BATCH	10
#define GR_DI		2	/* combined batch 20: 50 steps an epoch */
#define GR_SLOTS	3	/* buffer_size; a window adds slots */
#define GR_KEPT		64	/* slots a member can keep (Step.slot < 64) */
#define GR_MAX		8	/* members in one test */
#define GR_WAIT_MS	20000	/* a step later than this: frozen */

/* The daemon's groups keep a store (group_linger): the setup's. */
static bool	gr_lingers;

/* One trainer: its handle, the sampler of its options, where it is. */
struct gr_member {
	struct infeed	*f;
	struct sampler	 oracle;
	uint64_t	 epoch;		/* the step it takes next */
	uint64_t	 step;
	uint64_t	 bad;		/* rows not the oracle's, or twice */
	uint8_t		 seen[RAW_N];	/* in the current epoch */
	bool		 whole;		/* ... taken from its first step */
	struct infeed_step held;	/* a step kept, when holding */
	bool		 holding;
	struct infeed_step kept[GR_KEPT];	/* gr_keep()'s */
	unsigned	 nkept;
	uint32_t	 last_slot;	/* of the last step taken */
	bool		 scribble;	/* copy_on_write: write over each step */
};

/* The shared options: shuffled, seed 5, B 10 x DI 2, 3 slots. */
static void
gr_options(struct infeed_options *o)
{
	infeed_options_init(o);
	o->batch_size = GR_BATCH;
	o->device_iterations = GR_DI;
	o->shuffle = true;
	o->seed = GR_SEED;
	o->buffer_size = GR_SLOTS;
	o->share = true;
}

/* Attach @m to "raw" with @o, and set up its oracle. */
static void
gr_attach(struct gr_member *m, const struct infeed_options *o)
{
	memset(m, 0, sizeof(*m));
	m->f = client();
	ck_assert_msg(infeed_attach(m->f, "raw", o, NULL) == INFEED_OK, "%s",
	    infeed_error(m->f));
	raw_oracle(&m->oracle, o);
	m->epoch = o->start_epoch;
	m->step = o->start_step;
}

/*
 * @n members of the shared options, with copy_on_write rings that each
 * writes over when @copy_on_write; calloc'd.
 */
static struct gr_member *
gr_attach_all(unsigned n, bool copy_on_write)
{
	struct gr_member	*m = calloc(n, sizeof(*m));
	struct infeed_options	 o;
	unsigned		 i;

	ck_assert_ptr_nonnull(m);
	gr_options(&o);
	o.copy_on_write = copy_on_write;
	for (i = 0; i < n; i++) {
		gr_attach(&m[i], &o);
		m[i].scribble = copy_on_write;
	}
	return (m);
}

/*
 * Take @m's next step and check it against the oracle: its position,
 * its indices, its bytes and labels, no index twice in the epoch.  With
 * @hold, keep it (released by the next call); else release it now.
 */
static void
gr_take(struct gr_member *m, bool hold)
{
	struct infeed_step	 st;
	uint64_t		 expect[RAW_N], r, n;
	const uint8_t		*row;
	unsigned		 j;

	ck_assert_msg(infeed_next_timeout(m->f, &st, GR_WAIT_MS) == INFEED_OK,
	    "epoch %llu step %llu: %s", (unsigned long long)m->epoch,
	    (unsigned long long)m->step, infeed_error(m->f));
	ck_assert_uint_eq(st.epoch, m->epoch);
	ck_assert_uint_eq(st.step, m->step);
	m->last_slot = st.slot;
	if (m->step == 0) {
		memset(m->seen, 0, sizeof(m->seen));
		m->whole = true;
	}
	n = sampler_step_indices(&m->oracle, st.epoch, st.step, expect);
	ck_assert_uint_eq(st.rows, n);
	for (r = 0; r < st.rows; r++) {
		if (st.indices[r] != expect[r] || st.indices[r] >= RAW_N ||
		    m->seen[st.indices[r]]++) {
			m->bad++;
			continue;
		}
		row = (const uint8_t *)st.data + r * RAW_BYTES;
		for (j = 0; j < RAW_BYTES; j++)
			m->bad += row[j] != raw_byte(st.indices[r], j);
		m->bad += st.labels[r] !=
		    (int32_t)((st.indices[r] * 3) % RAW_CLASSES);
	}
	/* A trainer's writes, which the ring must drop before the slot's
	 * next step (the bytes above would not be the sample's). */
	if (m->scribble)
		memset((void *)(uintptr_t)st.data, 0xa5, st.rows * RAW_BYTES);
	if (m->holding)
		ck_assert_msg(infeed_release(m->f, &m->held) == INFEED_OK,
		    "%s", infeed_error(m->f));
	m->holding = false;
	if (hold) {
		m->held = st;
		m->holding = true;
	} else
		ck_assert_msg(infeed_release(m->f, &st) == INFEED_OK, "%s",
		    infeed_error(m->f));
	if (++m->step == m->oracle.steps_per_epoch) {
		/* The epoch is over: every index came once. */
		for (r = 0; m->whole && r < RAW_N; r++)
			m->bad += m->seen[r] != 1;
		m->epoch++;
		m->step = 0;
	}
}

/* Take @m's next step as gr_take() does, and keep it with those kept. */
static void
gr_keep(struct gr_member *m)
{
	ck_assert_uint_lt(m->nkept, GR_KEPT);
	gr_take(m, true);
	m->kept[m->nkept++] = m->held;
	m->holding = false;
}

/* Release the steps gr_keep() kept. */
static void
gr_release_kept(struct gr_member *m)
{
	while (m->nkept > 0)
		ck_assert_msg(infeed_release(m->f, &m->kept[--m->nkept]) ==
		    INFEED_OK, "%s", infeed_error(m->f));
}

/* Release what @m holds, check it saw nothing wrong, and free it. */
static void
gr_done(struct gr_member *m)
{
	gr_release_kept(m);
	if (m->holding)
		ck_assert_int_eq(infeed_release(m->f, &m->held), INFEED_OK);
	ck_assert_msg(m->bad == 0, "%llu rows wrong, missing or repeated",
	    (unsigned long long)m->bad);
	sampler_clear(&m->oracle);
	infeed_free(m->f);
}

/* The stats' session of @m (by its handle's session id). */
static const Infeed__SessionStats *
gr_session(const Infeed__Frame *st, const struct gr_member *m)
{
	struct infeed_state	s;
	size_t			i;

	ck_assert_int_eq(infeed_get_state(m->f, &s), INFEED_OK);
	for (i = 0; i < st->stats->n_sessions; i++) {
		if (st->stats->sessions[i]->session_id == s.session_id)
			return (st->stats->sessions[i]);
	}
	ck_abort_msg("session %llu is not in the stats",
	    (unsigned long long)s.session_id);
	return (NULL);
}

/* The group of @m now (0: none). */
static uint64_t
gr_group(const struct gr_member *m)
{
	Infeed__Frame	*st = raw_stats();
	uint64_t	 g = gr_session(st, m)->group_id;

	infeed__frame__free_unpacked(st, NULL);
	return (g);
}

/*
 * The slots of @m's ring, the group's while it is in one, as the Stats
 * frame says: buffer_size, more with a window (group_window).
 */
static uint32_t
gr_slots(const struct gr_member *m)
{
	Infeed__Frame	*st = raw_stats();
	uint32_t	 n = gr_session(st, m)->slots;

	infeed__frame__free_unpacked(st, NULL);
	ck_assert_uint_ge(n, GR_SLOTS);
	return (n);
}

/*
 * What the Stats frame's entry @ss says of its group's members: @held_back
 * and @waited leaves, none that stayed, and @rejoins.
 */
static void
gr_counts(const Infeed__SessionStats *ss, uint64_t held_back,
    uint64_t waited, uint64_t rejoins)
{
	ck_assert_uint_ne(ss->group_id, 0);
	ck_assert_uint_eq(ss->group_leaves_held_back, held_back);
	ck_assert_uint_eq(ss->group_leaves_waited, waited);
	ck_assert_uint_eq(ss->group_stays, 0);
	ck_assert_uint_eq(ss->group_rejoins, rejoins);
}

/* Rows the workers read since the daemon started. */
static uint64_t
gr_rows_read(const Infeed__Frame *st)
{
	uint64_t	n = 0;
	size_t		i;

	for (i = 0; i < st->stats->n_workers; i++)
		n += st->stats->workers[i]->rows_done;
	return (n);
}

/*
 * Four trainers, one group: each gets two epochs exactly once in the
 * sampler's order, and the workers read each step once for all four.
 */
START_TEST(four_members_share_one_stream_exactly_once)
{
	struct gr_member		*m = calloc(4, sizeof(*m));
	const Infeed__SessionStats	*ss;
	struct infeed_options		 o;
	Infeed__Frame			*st;
	uint64_t			 steps = 0, rows;
	unsigned			 i, k;
	char				 out[8192], want[128];

	gr_options(&o);
	for (i = 0; i < 4; i++)
		gr_attach(&m[i], &o);
	st = raw_stats();
	for (i = 0; i < 4; i++) {
		ss = gr_session(st, &m[i]);
		ck_assert_msg(ss->has_group_id && ss->group_id != 0,
		    "member %u is in no group", i);
		ck_assert_uint_eq(ss->group_id, gr_session(st, &m[0])->group_id);
		ck_assert_uint_eq(ss->group_members, 4);
	}
	/* The operator sees one group of four, in words and in JSON. */
	snprintf(want, sizeof(want), "group %llu: 4 members",
	    (unsigned long long)gr_session(st, &m[0])->group_id);
	infeed__frame__free_unpacked(st, NULL);
	infeedctl_run("status", out, sizeof(out));
	ck_assert_msg(strstr(out, want) != NULL, "no '%s' in:\n%s", want,
	    out);
	infeedctl_run("status --json", out, sizeof(out));
	ck_assert_msg(strstr(out, "\"group_members\":4") != NULL, "%s", out);
	/* Two epochs, the members in turn; some hold a step while taking. */
	for (k = 0; k < 2 * m[0].oracle.steps_per_epoch; k++) {
		for (i = 0; i < 4; i++)
			gr_take(&m[i], i % 2 == 1);
		steps++;
	}
	st = raw_stats();
	ss = gr_session(st, &m[0]);
	rows = gr_rows_read(st);
	fprintf(stderr, "4 members, %llu steps each: the group filled %llu "
	    "steps, the workers read %llu rows (1 member's steps: %llu)\n",
	    (unsigned long long)steps,
	    (unsigned long long)ss->group_steps_filled,
	    (unsigned long long)rows,
	    (unsigned long long)(steps * m[0].oracle.cbs));
	ck_assert_uint_eq(ss->group_members, 4);
	ck_assert_uint_ge(ss->group_steps_filled, steps);
	ck_assert_uint_le(ss->group_steps_filled, steps + GR_SLOTS);
	ck_assert_uint_le(rows, (steps + GR_SLOTS) * m[0].oracle.cbs);
	ck_assert_uint_ge(ss->group_bytes_read, steps * m[0].oracle.cbs *
	    RAW_BYTES);
	/* Counted once, on the oldest member. */
	ck_assert_uint_eq(ss->bytes_read, ss->group_bytes_read);
	for (i = 1; i < 4; i++)
		ck_assert_uint_eq(gr_session(st, &m[i])->bytes_read, 0);
	infeed__frame__free_unpacked(st, NULL);
	for (i = 0; i < 4; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * A member stops taking steps, holding one: the others wait at most the
 * slack, it leaves the group, and later finishes its epochs from its own
 * ring with nothing lost or repeated.  Again with copy_on_write rings
 * that every member writes over: each slot, the group's and the leaver's
 * own (whose slots are numbered after the group's), comes back with the
 * daemon's bytes.
 */
START_TEST(a_stopped_member_leaves_and_finishes_alone)
{
	struct gr_member		*m = gr_attach_all(3, _i == 1);
	const Infeed__SessionStats	*ss;
	Infeed__Frame			*st;
	uint64_t			 t0, worst = 0, per_epoch, slots;
	unsigned			 i, k;
	char				 out[8192], want[128];
	const char			*want_text;

	per_epoch = m[0].oracle.steps_per_epoch;
	slots = gr_slots(&m[0]);
	for (k = 0; k < 5; k++) {
		for (i = 0; i < 3; i++)
			gr_take(&m[i], true);
	}
	/*
	 * m[2] stops, holding its step; the others go on for an epoch past
	 * the ring's slots (a window's too), which they fill.
	 */
	for (k = 0; k < per_epoch + slots; k++) {
		for (i = 0; i < 2; i++) {
			t0 = now_ms();
			gr_take(&m[i], true);
			if (now_ms() - t0 > worst)
				worst = now_ms() - t0;
		}
	}
	fprintf(stderr, "the others' longest wait while one member stopped: "
	    "%llu ms (slack %d ms, %llu slots)\n", (unsigned long long)worst,
	    INFEED_GROUP_SLACK_MS, (unsigned long long)slots);
	ck_assert_uint_ge(worst, INFEED_GROUP_SLACK_MS - 100);
	ck_assert_uint_le(worst, 5000);
	st = raw_stats();
	ck_assert_uint_eq(gr_session(st, &m[0])->group_members, 2);
	ck_assert_uint_eq(gr_session(st, &m[0])->group_left, 0);
	gr_counts(gr_session(st, &m[0]), 1, 0, 0);
	ss = gr_session(st, &m[2]);
	ck_assert_uint_eq(ss->group_left, 1);
	snprintf(want, sizeof(want), "session %llu left its group",
	    (unsigned long long)ss->session_id);
	infeed__frame__free_unpacked(st, NULL);
	infeedctl_run("status", out, sizeof(out));
	ck_assert_msg(strstr(out, want) != NULL, "no '%s' in:\n%s", want,
	    out);
	want_text = "; 1 left (1 held it back, 0 waited on leavers' slots), "
	    "0 stayed, 0 rejoined\n";
	ck_assert_msg(strstr(out, want_text) != NULL, "no '%s' in:\n%s",
	    want_text, out);
	infeedctl_run("status --json", out, sizeof(out));
	want_text = "\"group_leaves_held_back\":1,\"group_leaves_waited\":0,"
	    "\"group_stays\":0,\"group_rejoins\":0";
	ck_assert_msg(strstr(out, want_text) != NULL, "no '%s' in:\n%s",
	    want_text, out);
	/*
	 * It goes on: the rest of its epoch, every index once (still behind
	 * the group, which it would rejoin on catching up).
	 */
	for (k = 5; k < per_epoch; k++)
		gr_take(&m[2], k % 3 == 0);
	for (k = 0; k < per_epoch; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], false);
	}
	ck_assert_uint_eq(m[2].epoch, 1);
	ck_assert_uint_eq(m[2].step, 0);
	st = raw_stats();
	ck_assert_uint_eq(gr_session(st, &m[2])->group_id, 0);
	/* Its steps from the dataset, or the group's store that lingers. */
	if (!gr_lingers)
		ck_assert_uint_gt(gr_session(st, &m[2])->bytes_read, 0);
	infeed__frame__free_unpacked(st, NULL);
	for (i = 0; i < 3; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * A member keeps buffer_size steps, every slot of the group's ring, and
 * stops (a trainer holding its prefetched steps, or two loaders zipped in
 * one process): the other waits the slack, then goes on alone from its
 * own ring; the stopped one later finishes from its position.  Both get
 * every index once.  Its Next while it holds them all is refused
 * (ERROR_UNEXPECTED, its session unchanged) while it is in its group,
 * and answered from a ring of its own once the group moved it out.
 */
START_TEST(a_member_holding_every_slot_freezes_no_one)
{
	struct gr_member		*m = gr_attach_all(2, _i == 1);
	const Infeed__SessionStats	*ss;
	Infeed__Frame			*st;
	struct infeed_step		 own;
	struct infeed_state		 state;
	uint64_t			 t0, worst = 0, per_epoch, slots, n;
	unsigned			 i, k;

	per_epoch = m[0].oracle.steps_per_epoch;
	slots = gr_slots(&m[0]);
	for (k = 0; k < 2; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], false);
	}
	for (k = 0; k < slots; k++)
		gr_keep(&m[1]);
	/*
	 * In its group still (no other waits), it asks all the same, as the
	 * Python binding does: refused, its session goes on unchanged.
	 */
	ck_assert_int_eq(infeed_next(m[1].f, &own), INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(m[1].f), 3);   /* UNEXPECTED */
	ck_assert_msg(strstr(infeed_error(m[1].f), "slots are held") != NULL,
	    "%s", infeed_error(m[1].f));
	ck_assert_int_eq(infeed_get_state(m[1].f, &state), INFEED_OK);
	ck_assert(state.attached && state.group_id != 0 && !state.own_ring);
	ck_assert_uint_eq(state.slots_held, state.slots);
	ck_assert_uint_eq(state.slots, slots);
	for (k = 0; k < per_epoch + slots; k++) {
		t0 = now_ms();
		gr_take(&m[0], k % 2 == 0);
		if (now_ms() - t0 > worst)
			worst = now_ms() - t0;
	}
	fprintf(stderr, "the other's longest wait while one member held "
	    "every slot: %llu ms (slack %d ms)\n", (unsigned long long)worst,
	    INFEED_GROUP_SLACK_MS);
	ck_assert_uint_ge(worst, INFEED_GROUP_SLACK_MS - 100);
	ck_assert_uint_le(worst, 5000);
	st = raw_stats();
	for (i = 0; i < 2; i++) {
		ss = gr_session(st, &m[i]);
		ck_assert_uint_eq(ss->group_left, 1);
	}
	/* The one that keeps the group's slots shows it: one leave each. */
	gr_counts(gr_session(st, &m[1]), 1, 1, 0);
	infeed__frame__free_unpacked(st, NULL);
	/*
	 * Moved out of the group, holding every slot of its ring still: its
	 * Next is answered by a Step that brings a ring of its own.
	 */
	gr_take(&m[1], false);
	ck_assert_int_eq(infeed_get_state(m[1].f, &state), INFEED_OK);
	ck_assert(state.own_ring && state.first_slot == slots);
	/* The stopped one goes on from its own position. */
	gr_release_kept(&m[1]);
	for (k = 0; k < per_epoch; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], k % 3 == 0);
	}
	n = 3 + slots + per_epoch;	/* the steps it took */
	ck_assert_uint_eq(m[1].epoch, n / per_epoch);
	ck_assert_uint_eq(m[1].step, n % per_epoch);
	for (i = 0; i < 2; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/* Whether @m is a member of its group now (not one that left). */
static bool
gr_in_group(const struct gr_member *m)
{
	Infeed__Frame			*st = raw_stats();
	const Infeed__SessionStats	*ss = gr_session(st, m);
	bool				 in = ss->group_id != 0 &&
					    !ss->group_left;

	infeed__frame__free_unpacked(st, NULL);
	return (in);
}

/*
 * A member that left rejoins when it catches up: it stops (holding a
 * step) until it leaves, then takes steps alone, faster than the group,
 * until the step it takes next is one the group still holds; from there
 * its steps come from the group's ring again (slot numbers below
 * buffer_size), while it still holds a step of its own ring across the
 * switch.  It leaves again when it stops again.  Every member gets every
 * index once through both transitions, with copy_on_write rings written
 * over by every member too (_i 1).
 */
START_TEST(a_member_that_left_rejoins_when_it_catches_up)
{
	struct gr_member	*m = gr_attach_all(3, _i == 1);
	Infeed__Frame		*st;
	uint64_t		 per_epoch, at;
	unsigned		 i, k;

	per_epoch = m[0].oracle.steps_per_epoch;
	for (k = 0; k < 5; k++) {
		for (i = 0; i < 3; i++)
			gr_take(&m[i], true);
	}
	/* m[2] stops, holding step 4, and leaves. */
	for (k = 0; k < 10; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], false);
	}
	ck_assert(!gr_in_group(&m[2]));
	ck_assert(gr_in_group(&m[0]));
	/* Alone, from its own ring, until it is where the group is. */
	for (k = 0; k < 10; k++) {
		gr_take(&m[2], k % 2 == 0);
		ck_assert_uint_ge(m[2].last_slot, GR_SLOTS);
	}
	ck_assert(!gr_in_group(&m[2]));
	at = m[2].step;
	gr_take(&m[2], true);
	ck_assert_msg(m[2].last_slot < GR_SLOTS, "step %llu came in slot "
	    "%u, not the group's ring", (unsigned long long)at,
	    m[2].last_slot);
	ck_assert(gr_in_group(&m[2]));
	st = raw_stats();
	ck_assert_uint_eq(gr_session(st, &m[2])->group_members, 3);
	gr_counts(gr_session(st, &m[2]), 1, 0, 1);
	infeed__frame__free_unpacked(st, NULL);
	/* Together again, for more than an epoch. */
	for (k = 0; k < per_epoch + 5; k++) {
		for (i = 0; i < 3; i++) {
			gr_take(&m[i], i == k % 3);
			ck_assert_uint_lt(m[i].last_slot, GR_SLOTS);
		}
	}
	/* It stops again: it leaves again, and goes on alone again. */
	for (k = 0; k < 10; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], false);
	}
	ck_assert(!gr_in_group(&m[2]));
	st = raw_stats();
	gr_counts(gr_session(st, &m[0]), 2, 0, 1);
	infeed__frame__free_unpacked(st, NULL);
	for (k = 0; k < 5; k++) {
		gr_take(&m[2], k % 2 == 0);
		ck_assert_uint_ge(m[2].last_slot, GR_SLOTS);
	}
	for (i = 0; i < 3; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * A worker killed while the group's members take steps loses nothing:
 * its rows are read again, and every member still gets every index once.
 */
START_TEST(a_worker_killed_mid_run_loses_nothing_for_any_member)
{
	struct gr_member	*m = calloc(3, sizeof(*m));
	struct infeed_options	 o;
	Infeed__Frame		*st;
	uint32_t		 restarts = 0;
	unsigned		 i, k, tries;
	size_t			 w;

	gr_options(&o);
	for (i = 0; i < 3; i++)
		gr_attach(&m[i], &o);
	for (k = 0; k < 10; k++) {
		for (i = 0; i < 3; i++)
			gr_take(&m[i], false);
	}
	st = raw_stats();
	ck_assert_int_eq(kill(st->stats->workers[0]->pid, SIGKILL), 0);
	infeed__frame__free_unpacked(st, NULL);
	for (k = 0; k < m[0].oracle.steps_per_epoch + 10; k++) {
		for (i = 0; i < 3; i++)
			gr_take(&m[i], i == 2);
	}
	/* The pool restarts the worker on its own time: wait for it. */
	for (tries = 0; ; tries++) {
		st = raw_stats();
		for (restarts = 0, w = 0; w < st->stats->n_workers; w++)
			restarts += st->stats->workers[w]->restarts;
		if (restarts >= 1 || tries == 100)
			break;
		infeed__frame__free_unpacked(st, NULL);
		usleep(50000);
	}
	ck_assert_uint_ge(restarts, 1);
	ck_assert_uint_eq(gr_session(st, &m[0])->group_members, 3);
	infeed__frame__free_unpacked(st, NULL);
	for (i = 0; i < 3; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * A late trainer at a step the group still has joins it; one at another
 * epoch starts a group of its own; both get their epochs exactly once.
 */
START_TEST(a_late_member_joins_only_at_a_step_the_group_has)
{
	struct gr_member	*m = calloc(3, sizeof(*m));
	struct infeed_options	 o;
	unsigned		 i, k;

	gr_options(&o);
	gr_attach(&m[0], &o);
	for (k = 0; k < 10; k++)
		gr_take(&m[0], false);
	/* Its next step is one the group has filled or fills next. */
	o.start_step = 10;
	gr_attach(&m[1], &o);
	o.start_epoch = 3;
	o.start_step = 0;
	gr_attach(&m[2], &o);
	ck_assert_uint_ne(gr_group(&m[0]), 0);
	ck_assert_uint_eq(gr_group(&m[1]), gr_group(&m[0]));
	ck_assert_uint_ne(gr_group(&m[2]), 0);
	ck_assert_uint_ne(gr_group(&m[2]), gr_group(&m[0]));
	for (k = 0; k < m[0].oracle.steps_per_epoch + 7; k++) {
		for (i = 0; i < 3; i++)
			gr_take(&m[i], i == 1);
	}
	for (i = 0; i < 3; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * Issue 35: a trainer that attaches at epoch 0 step 0 after the group's
 * first steps (which it no longer has) joins it all the same and, from
 * its first Next (the group having gone on meanwhile), catches up: its first steps come from a ring of its own (slots numbered after
 * the group's), the group's earlier steps in the same order, up to the
 * oldest step the group still had; from there it takes the group's steps
 * (its ring), and the workers read each step once for both (the rows read
 * are two epochs' and the catch-up's, not four epochs').  Both get every
 * index of each epoch once, in the sampler's order.  With _i 1 the
 * members ahead keep one step each, as trainers do.
 */
START_TEST(a_late_member_catches_up_and_shares)
{
	struct gr_member	*m = calloc(3, sizeof(*m));
	struct infeed_options	 o;
	Infeed__Frame		*st;
	uint64_t		 per_epoch, rows, ahead = 12;
	unsigned		 i, k;

	gr_options(&o);
	for (i = 0; i < 2; i++)
		gr_attach(&m[i], &o);
	per_epoch = m[0].oracle.steps_per_epoch;
	for (k = 0; k < ahead; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], _i == 1);
	}
	gr_attach(&m[2], &o);
	ck_assert_uint_ne(gr_group(&m[0]), 0);
	ck_assert_uint_eq(gr_group(&m[2]), gr_group(&m[0]));
	/*
	 * Before its first Next it keeps nothing: the others go on, and
	 * their steps of then are refilled.
	 */
	for (k = 0; k < GR_SLOTS + 1; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], _i == 1);
	}
	ahead += GR_SLOTS + 1;
	/* Its catch-up: the group's earlier steps, from its own ring. */
	for (k = 0; k < ahead; k++) {
		gr_take(&m[2], k % 2 == 0);
		ck_assert_uint_ge(m[2].last_slot, GR_SLOTS);
		/* The members ahead draw on the group's ring meanwhile. */
		if (k % 6 == 0)
			for (i = 0; i < 2; i++)
				gr_take(&m[i], _i == 1);
	}
	/* At the group's oldest step it takes the group's ring. */
	gr_take(&m[2], false);
	ck_assert_msg(m[2].last_slot < GR_SLOTS, "step %llu came in slot %u, "
	    "not the group's ring", (unsigned long long)ahead,
	    m[2].last_slot);
	ck_assert(gr_in_group(&m[2]));
	st = raw_stats();
	ck_assert_uint_eq(gr_session(st, &m[2])->group_members, 3);
	gr_counts(gr_session(st, &m[0]), 0, 0, 1);
	infeed__frame__free_unpacked(st, NULL);
	/* Together for the rest of two epochs, the late one ahead or not. */
	while (m[2].epoch < 2 || m[0].epoch < 2) {
		for (i = 0; i < 3; i++) {
			if (m[i].epoch < 2) {
				gr_take(&m[i], _i == 1 && i != 2);
				ck_assert_uint_lt(m[i].last_slot, GR_SLOTS);
			}
		}
	}
	st = raw_stats();
	rows = gr_rows_read(st);
	fprintf(stderr, "rows read for 3 members of 2 epochs, one %llu steps "
	    "late: %llu (2 epochs: %llu)\n", (unsigned long long)ahead,
	    (unsigned long long)rows,
	    (unsigned long long)(2 * per_epoch * GR_BATCH * GR_DI));
	/* 2 epochs, the catch-up, and what the ring read ahead. */
	ck_assert_uint_le(rows, (2 * per_epoch + ahead + 2 * GR_SLOTS) *
	    GR_BATCH * GR_DI);
	ck_assert_uint_eq(gr_session(st, &m[2])->group_members, 3);
	gr_counts(gr_session(st, &m[2]), 0, 0, 1);
	infeed__frame__free_unpacked(st, NULL);
	for (i = 0; i < 3; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * Issue 35: a late member that stops while it catches up (its client
 * hangs) keeps the others waiting for the slack at most: the group waits
 * for its meeting point only while it asks for steps.  It then goes on
 * alone, from its own ring, every index once; the others carry on
 * together.
 */
START_TEST(a_late_member_stopped_while_catching_up_leaves_within_the_slack)
{
	struct gr_member	*m = calloc(3, sizeof(*m));
	struct infeed_options	 o;
	Infeed__Frame		*st;
	uint64_t		 per_epoch, t0, worst = 0, ahead = 12;
	unsigned		 i, k;

	gr_options(&o);
	for (i = 0; i < 2; i++)
		gr_attach(&m[i], &o);
	per_epoch = m[0].oracle.steps_per_epoch;
	for (k = 0; k < ahead; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], false);
	}
	gr_attach(&m[2], &o);
	ck_assert_uint_eq(gr_group(&m[2]), gr_group(&m[0]));
	for (k = 0; k < 4; k++)
		gr_take(&m[2], true);
	ck_assert_uint_ge(m[2].last_slot, GR_SLOTS);
	/* It stops, holding a step; the others go on for an epoch. */
	for (k = 0; k < per_epoch; k++) {
		for (i = 0; i < 2; i++) {
			t0 = now_ms();
			gr_take(&m[i], k % 2 == 0);
			if (now_ms() - t0 > worst)
				worst = now_ms() - t0;
		}
	}
	fprintf(stderr, "the others' longest wait while a late member "
	    "stopped catching up: %llu ms (slack %d ms)\n",
	    (unsigned long long)worst, INFEED_GROUP_SLACK_MS);
	ck_assert_uint_ge(worst, INFEED_GROUP_SLACK_MS - 100);
	ck_assert_uint_le(worst, 5000);
	st = raw_stats();
	ck_assert_uint_eq(gr_session(st, &m[0])->group_members, 2);
	gr_counts(gr_session(st, &m[0]), 1, 0, 0);
	infeed__frame__free_unpacked(st, NULL);
	ck_assert(!gr_in_group(&m[2]));
	/* It goes on alone, past where it would have met the group. */
	while (m[2].epoch < 2)
		gr_take(&m[2], m[2].step % 3 == 0);
	for (k = 0; k < 5; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], false);
	}
	for (i = 0; i < 3; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * Without load_indefinitely, every member gets EndOfData after each epoch,
 * and the group reads nothing of the next until a member asks for it.
 */
START_TEST(epochs_end_for_every_member_without_load_indefinitely)
{
	struct gr_member	*m = calloc(2, sizeof(*m));
	struct infeed_options	 o;
	struct infeed_step	 st;
	Infeed__Frame		*stats;
	unsigned		 e, i, k;

	gr_options(&o);
	o.load_indefinitely = false;
	gr_attach(&m[0], &o);
	gr_attach(&m[1], &o);
	ck_assert_uint_eq(gr_group(&m[1]), gr_group(&m[0]));
	for (e = 0; e < 2; e++) {
		for (k = 0; k < m[0].oracle.steps_per_epoch; k++) {
			for (i = 0; i < 2; i++)
				gr_take(&m[i], false);
		}
		stats = raw_stats();
		ck_assert_uint_eq(gr_session(stats, &m[0])->group_steps_filled,
		    (e + 1) * m[0].oracle.steps_per_epoch);
		infeed__frame__free_unpacked(stats, NULL);
		for (i = 0; i < 2; i++)
			ck_assert_int_eq(infeed_next(m[i].f, &st),
			    INFEED_END_OF_DATA);
	}
	for (i = 0; i < 2; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/* share = false, and options that change the bytes, never share. */
START_TEST(opt_out_and_other_options_never_share)
{
	struct gr_member	*m = calloc(5, sizeof(*m));
	struct infeed_options	 o;
	unsigned		 i, k;

	gr_options(&o);
	gr_attach(&m[0], &o);
	o.share = false;
	gr_attach(&m[1], &o);
	gr_options(&o);
	o.seed = GR_SEED + 1;
	gr_attach(&m[2], &o);
	gr_options(&o);
	o.drop_last = false;
	gr_attach(&m[3], &o);
	gr_options(&o);
	o.distributed_process_count = 2;
	gr_attach(&m[4], &o);
	ck_assert_uint_ne(gr_group(&m[0]), 0);
	ck_assert_uint_eq(gr_group(&m[1]), 0);
	for (i = 2; i < 5; i++) {
		ck_assert_uint_ne(gr_group(&m[i]), 0);
		ck_assert_uint_ne(gr_group(&m[i]), gr_group(&m[0]));
	}
	for (k = 0; k < 12; k++) {
		for (i = 0; i < 5; i++)
			gr_take(&m[i], false);
	}
	for (i = 0; i < 5; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/* Another user's trainer with the same options gets a group of its own. */
START_TEST(another_user_never_shares)
{
	struct gr_member	 m;
	struct infeed_options	 o;
	struct infeed		*f;
	Infeed__Frame		*st;
	uint64_t		 mine, theirs = 0;
	pid_t			 pid;
	size_t			 i;
	int			 go[2], done[2], status;
	char			 c;

	if (geteuid() != 0) {
		fprintf(stderr, "another_user_never_shares: skipped (needs "
		    "root to run a client as another user)\n");
		return;
	}
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(chmod(sock_path, 0666), 0);
	gr_options(&o);
	gr_attach(&m, &o);
	mine = gr_group(&m);
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(done), 0);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		close(go[0]);
		close(done[1]);
		if (setgroups(0, NULL) == -1 || setgid(4242) == -1 ||
		    setuid(4242) == -1)
			_exit(100);
		f = infeed_new();
		if (infeed_connect(f, sock_path, "other-user") != INFEED_OK ||
		    infeed_attach(f, "raw", &o, NULL) != INFEED_OK) {
			fprintf(stderr, "other user: %s\n", infeed_error(f));
			_exit(101);
		}
		(void)write(go[1], "a", 1);
		(void)read(done[0], &c, 1);
		infeed_free(f);
		_exit(0);
	}
	close(go[1]);
	close(done[0]);
	ck_assert_int_eq(read(go[0], &c, 1), 1);
	st = raw_stats();
	for (i = 0; i < st->stats->n_sessions; i++) {
		if (st->stats->sessions[i]->client_uid == 4242)
			theirs = st->stats->sessions[i]->group_id;
	}
	infeed__frame__free_unpacked(st, NULL);
	close(done[1]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the other user's client failed (status %d)", status);
	ck_assert_uint_ne(mine, 0);
	ck_assert_uint_ne(theirs, 0);
	ck_assert_uint_ne(theirs, mine);
	close(go[0]);
	gr_done(&m);
}
END_TEST

/*
 * A trainer in its own process for gr_holder_test: attaches to the group
 * and says so on @say ('a'), waits for a byte on @go, takes step 0 (kept
 * when @hold, else released) and ends its session (a kept step stays
 * mapped: libinfeed reads it on), says so ('d'), then lives on until
 * killed.  Exits 1 with a message on any failure.
 */
static void
gr_holder_child(const char *name, bool hold, int say, int go)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f = infeed_new();
	char			 c;

	gr_options(&o);
	if (infeed_connect(f, sock_path, name) != INFEED_OK ||
	    infeed_attach(f, "raw", &o, NULL) != INFEED_OK ||
	    write(say, "a", 1) != 1 || read(go, &c, 1) != 1 ||
	    infeed_next(f, &st) != INFEED_OK || st.step != 0 ||
	    (!hold && infeed_release(f, &st) != INFEED_OK) ||
	    infeed_detach(f) != INFEED_OK || write(say, "d", 1) != 1) {
		fprintf(stderr, "%s: %s\n", name, infeed_error(f));
		_exit(1);
	}
	for (;;)
		pause();
}

/* Fork gr_holder_child(); its pipes in @say (read end) and @go (write). */
static pid_t
gr_holder_fork(const char *name, bool hold, int *say, int *go)
{
	int	s[2], g[2];
	pid_t	pid;

	ck_assert_int_eq(pipe(s), 0);
	ck_assert_int_eq(pipe(g), 0);
	ck_assert_int_ne(pid = fork(), -1);
	if (pid == 0) {
		close(s[0]);
		close(g[1]);
		gr_holder_child(name, hold, s[1], g[0]);
	}
	close(s[1]);
	close(g[0]);
	*say = s[0];
	*go = g[1];
	return (pid);
}

/* Wait for @c from a gr_holder_child() (its pipe @say). */
static void
gr_holder_wait(int say, char c)
{
	char	got = 0;

	ck_assert_int_eq(read(say, &got, 1), 1);
	ck_assert_int_eq(got, c);
}

/* The daemon's figure of held memory (Stats.memory_held). */
static uint64_t
gr_memory_held(void)
{
	Infeed__Frame	*st = raw_stats();
	uint64_t	 v = st->stats->memory_held;

	infeed__frame__free_unpacked(st, NULL);
	return (v);
}

/* Poll gr_memory_held() for up to @ms until it is (not) zero: its value. */
static uint64_t
gr_memory_held_until(bool zero, uint64_t ms)
{
	uint64_t	deadline = now_ms() + ms, v;

	while ((v = gr_memory_held()) != 0 && zero && now_ms() < deadline)
		usleep(20000);
	while ((v = gr_memory_held()) == 0 && !zero && now_ms() < deadline)
		usleep(20000);
	return (v);
}

/*
 * A group's ring that a member's process still maps, holding a step of
 * its ended session, stays charged to the budget until that process
 * exits, whoever made the group: the creator ends its session first,
 * holding nothing, and lives on; the other member ends keeping step 0.
 * The ring is held while the holder lives, whether the creator exits
 * first (_i 0: that changes nothing) or lives on (_i 1), and the holder's
 * exit gives the memory back.
 */
START_TEST(a_group_ring_stays_held_for_the_member_that_holds_it)
{
	Infeed__Frame	*st;
	uint64_t	 group = 0, held;
	pid_t		 creator, holder;
	size_t		 i, n = 0;
	int		 c_say, c_go, h_say, h_go;

	creator = gr_holder_fork("creator", false, &c_say, &c_go);
	gr_holder_wait(c_say, 'a');
	holder = gr_holder_fork("holder", true, &h_say, &h_go);
	gr_holder_wait(h_say, 'a');
	st = raw_stats();
	for (i = 0; i < st->stats->n_sessions; i++) {
		if (st->stats->sessions[i]->group_id == 0)
			continue;
		ck_assert(group == 0 ||
		    st->stats->sessions[i]->group_id == group);
		group = st->stats->sessions[i]->group_id;
		n++;
	}
	infeed__frame__free_unpacked(st, NULL);
	ck_assert_msg(n == 2, "%zu sessions in a group, not the 2", n);
	ck_assert_int_eq(write(c_go, "g", 1), 1);
	gr_holder_wait(c_say, 'd');
	ck_assert_int_eq(write(h_go, "g", 1), 1);
	gr_holder_wait(h_say, 'd');
	held = gr_memory_held_until(false, 5000);
	ck_assert_msg(held > 0, "the group's ring is not held, though a "
	    "member's process still holds step 0 of it");
	if (_i == 0) {
		/* The creator's exit is not the holder's. */
		ck_assert_int_eq(kill(creator, SIGKILL), 0);
		ck_assert_int_eq(waitpid(creator, NULL, 0), creator);
		usleep(1500000);	/* past a pidfd-less poll (valgrind) */
		ck_assert_msg(gr_memory_held() == held, "%llu bytes held "
		    "after the creator exited, not the %llu its member still "
		    "holds", (unsigned long long)gr_memory_held(),
		    (unsigned long long)held);
	}
	ck_assert_int_eq(kill(holder, SIGKILL), 0);
	ck_assert_int_eq(waitpid(holder, NULL, 0), holder);
	held = gr_memory_held_until(true, 3000);
	ck_assert_msg(held == 0, "%llu bytes still held 3 s after the "
	    "holder exited (the creator %s)", (unsigned long long)held,
	    _i == 0 ? "exited before" : "lives on");
	if (_i == 1) {
		ck_assert_int_eq(kill(creator, SIGKILL), 0);
		ck_assert_int_eq(waitpid(creator, NULL, 0), creator);
	}
	close(c_say);
	close(c_go);
	close(h_say);
	close(h_go);
}
END_TEST

/*
 * A member that left, taking steps alone as a for-loop does (its last
 * step kept while it asks for the next), catches up with the group while
 * the other member stops holding every slot: its next step is the one the
 * group would fill next, which it cannot.  It gets that step within the
 * slack (with margin), not at its timeout, and goes on; both get every
 * index once.
 */
START_TEST(a_member_catching_up_holding_its_own_step_never_freezes)
{
	struct gr_member	*m = gr_attach_all(2, false);
	struct bystander	 b;
	struct bystander_report	 br;
	uint64_t		 t0, worst = 0, slots, at;
	unsigned		 i, k;

	slots = gr_slots(&m[0]);
	at = 5 + slots + 7;	/* m[0]'s step once m[1] left: 15, no window */
	bystander_start(&b);
	for (k = 0; k < 5; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], false);
	}
	/* m[1] stops holding step 5 and leaves; m[0] goes on to step @at. */
	gr_take(&m[1], true);
	while (m[0].epoch * m[0].oracle.steps_per_epoch + m[0].step < at)
		gr_take(&m[0], false);
	ck_assert(!gr_in_group(&m[1]));
	/* m[1] takes step 6 from its own ring: it holds none of the group's. */
	gr_take(&m[1], true);
	/* m[0] keeps the next steps, every slot, and stops. */
	for (k = 0; k < slots; k++)
		gr_keep(&m[0]);
	/* m[1], alone, to the group's next step, which it cannot fill. */
	while (m[1].epoch * m[1].oracle.steps_per_epoch + m[1].step <
	    at + slots)
		gr_take(&m[1], true);
	for (k = 0; k < 5; k++) {
		t0 = now_ms();
		ck_assert_msg(infeed_next_timeout(m[1].f, &m[1].kept[0],
		    8000) == INFEED_OK, "step %llu: %s",
		    (unsigned long long)m[1].step, infeed_error(m[1].f));
		if (now_ms() - t0 > worst)
			worst = now_ms() - t0;
		ck_assert_uint_eq(m[1].kept[0].step, m[1].step);
		ck_assert_int_eq(infeed_release(m[1].f, &m[1].held), INFEED_OK);
		m[1].held = m[1].kept[0];
		m[1].step++;
	}
	fprintf(stderr, "the member that caught up, holding a step of its "
	    "own, waited %llu ms at most for its next (slack %d ms)\n",
	    (unsigned long long)worst, INFEED_GROUP_SLACK_MS);
	ck_assert_uint_le(worst, INFEED_GROUP_SLACK_MS + 1500);
	bystander_stop(&b, &br);
	bystander_assert(&br, 250);
	/* m[0] goes on too; both finish the epoch with every index once. */
	gr_release_kept(&m[0]);
	m[1].whole = false;
	while (m[0].epoch == 0 || m[1].epoch == 0) {
		for (i = 0; i < 2; i++)
			if (m[i].epoch == 0)
				gr_take(&m[i], i == 1);
	}
	for (i = 0; i < 2; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * A member keeps a step and ends its session (a tensor kept after
 * close()): while the group goes on for epochs, the kept step's indices,
 * bytes never change.
 */
START_TEST(a_step_kept_after_its_session_ended_never_changes)
{
	struct gr_member	*m = gr_attach_all(2, false);
	struct infeed_step	 kept;
	uint8_t			*copy;
	uint64_t		 idx[RAW_N], bad = 0, r;
	size_t			 bytes;
	unsigned		 i, k;

	for (k = 0; k < 3; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], false);
	}
	ck_assert_int_eq(infeed_next(m[1].f, &kept), INFEED_OK);
	ck_assert_uint_eq(kept.step, 3);
	bytes = kept.rows * RAW_BYTES;
	ck_assert_ptr_nonnull(copy = malloc(bytes));
	memcpy(copy, kept.data, bytes);
	memcpy(idx, kept.indices, kept.rows * sizeof(idx[0]));
	ck_assert_int_eq(infeed_detach(m[1].f), INFEED_OK);
	for (k = 0; k < 2 * m[0].oracle.steps_per_epoch; k++)
		gr_take(&m[0], k % 2 == 0);
	for (r = 0; r < kept.rows; r++)
		bad += kept.indices[r] != idx[r];
	bad += memcmp(kept.data, copy, bytes) != 0;
	fprintf(stderr, "a step kept after its session ended, %llu steps of "
	    "the group later: row 0 holds sample %llu (%llu when taken)%s\n",
	    (unsigned long long)k, (unsigned long long)kept.indices[0],
	    (unsigned long long)idx[0], bad ? ", its bytes changed" : "");
	ck_assert_msg(bad == 0, "the kept step changed while the group went "
	    "on");
	free(copy);
	sampler_clear(&m[1].oracle);
	infeed_free(m[1].f);
	gr_done(&m[0]);
	free(m);
}
END_TEST

/*
 * A trainer in its own process for gr_rate_test: attaches to the group
 * and says so ('a'), then takes steps as a for-loop does (the last kept
 * while it asks for the next), sleeping @step_ms after each and @pause_ms
 * more after every fifth, until killed.  Exits 1 with a message on any
 * failure.
 */
static void
gr_pacer_child(unsigned step_ms, unsigned pause_ms, int say)
{
	struct infeed_options	 o;
	struct infeed_step	 st, prev;
	struct infeed		*f = infeed_new();
	bool			 holding = false;
	unsigned		 n;

	gr_options(&o);
	if (infeed_connect(f, sock_path, "pacer") != INFEED_OK ||
	    infeed_attach(f, "raw", &o, NULL) != INFEED_OK ||
	    write(say, "a", 1) != 1)
		goto fail;
	for (n = 1;; n++) {
		if (infeed_next(f, &st) != INFEED_OK ||
		    (holding && infeed_release(f, &prev) != INFEED_OK))
			goto fail;
		prev = st;
		holding = true;
		usleep(step_ms * 1000);
		if (n % 5 == 0)
			usleep(pause_ms * 1000);
	}
fail:
	fprintf(stderr, "pacer: %s\n", infeed_error(f));
	_exit(1);
}

/* @m takes @n steps as a for-loop of @step_ms a step: the time taken. */
static uint64_t
gr_pace(struct gr_member *m, unsigned n, unsigned step_ms)
{
	uint64_t	t0 = now_ms();
	unsigned	k;

	for (k = 0; k < n; k++) {
		gr_take(m, true);
		usleep(step_ms * 1000);
	}
	return (now_ms() - t0);
}

/*
 * A group runs at its fastest member's pace, not its slowest's: a trainer
 * of 10 ms a step beside one of 100 ms a step (_i 0), or beside one of
 * 10 ms that pauses 450 ms every 5 steps (_i 1), each continuous block
 * shorter than the slack, keeps 0.8 of its pace alone (measured first, in
 * the same test, by the same trainer with share = false; asserted with
 * margin for a loaded machine): the slower one leaves once it has cost
 * the other the slack within the window, and goes on alone.
 */
START_TEST(a_slow_or_pausing_member_keeps_no_one_to_its_pace)
{
	struct gr_member		*m = calloc(2, sizeof(*m));
	struct infeed_options		 o;
	struct bystander		 b;
	struct bystander_report		 br;
	Infeed__Frame			*st;
	const Infeed__SessionStats	*ss;
	uint64_t			 alone, shared;
	double				 ratio;
	unsigned			 n = 250;
	pid_t				 pid;
	int				 say[2], status;
	char				 c;

	/* Alone: the same trainer with steps of its own. */
	gr_options(&o);
	o.share = false;
	gr_attach(&m[1], &o);
	alone = gr_pace(&m[1], n, 10);
	gr_done(&m[1]);
	gr_options(&o);
	gr_attach(&m[0], &o);
	ck_assert_int_eq(pipe(say), 0);
	ck_assert_int_ne(pid = fork(), -1);
	if (pid == 0) {
		close(say[0]);
		gr_pacer_child(_i == 0 ? 100 : 10, _i == 0 ? 0 : 450, say[1]);
	}
	close(say[1]);
	ck_assert_int_eq(read(say[0], &c, 1), 1);
	ck_assert_msg(gr_in_group(&m[0]), "the pacer did not join the group");
	bystander_start(&b);
	shared = gr_pace(&m[0], n, 10);
	bystander_stop(&b, &br);
	ratio = (double)alone / (double)shared;
	fprintf(stderr, "%u steps of 10 ms: %llu ms alone, %llu ms beside one "
	    "%s: %.2f of the pace alone\n", n, (unsigned long long)alone,
	    (unsigned long long)shared, _i == 0 ? "of 100 ms a step" :
	    "that pauses 450 ms every 5 steps", ratio);
	st = raw_stats();
	ss = gr_session(st, &m[0]);
	ck_assert_uint_eq(ss->group_leaves_held_back, 1);
	ck_assert_uint_eq(ss->group_left, 0);
	infeed__frame__free_unpacked(st, NULL);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status), "the pacer failed (status %d)",
	    status);
	close(say[0]);
	ck_assert_msg(ratio >= 0.5, "beside a slower member the trainer kept "
	    "%.2f of its pace alone; expected 0.8 (0.5 with margin for a "
	    "loaded machine)", ratio);
	bystander_assert(&br, 250);
	gr_done(&m[0]);
	free(m);
}
END_TEST

/* The group's slots ready for @m now, polled for up to @ms until @want. */
static uint32_t
gr_ready_until(const struct gr_member *m, uint32_t want, uint64_t ms)
{
	uint64_t	 deadline = now_ms() + ms;
	Infeed__Frame	*st;
	uint32_t	 v;

	for (;;) {
		st = raw_stats();
		v = gr_session(st, m)->slots_ready;
		infeed__frame__free_unpacked(st, NULL);
		if (v == want || now_ms() >= deadline)
			return (v);
		usleep(20000);
	}
}

/*
 * The slot of a step kept by a member's process after its session ended
 * is not refilled while that process lives (the group goes on with the
 * others), and is once it exits.
 */
START_TEST(a_kept_slot_comes_back_when_its_process_exits)
{
	struct gr_member	*m = calloc(1, sizeof(*m));
	struct infeed_options	 o;
	pid_t			 holder;
	int			 say, go;
	unsigned		 k;

	holder = gr_holder_fork("holder", true, &say, &go);
	gr_holder_wait(say, 'a');
	gr_options(&o);
	gr_attach(&m[0], &o);
	ck_assert(gr_in_group(&m[0]));
	ck_assert_int_eq(write(go, "g", 1), 1);
	gr_holder_wait(say, 'd');
	for (k = 0; k < 10; k++)
		gr_take(&m[0], false);
	ck_assert_uint_eq(gr_ready_until(&m[0], GR_SLOTS - 1, 3000),
	    GR_SLOTS - 1);
	usleep(300000);
	ck_assert_uint_eq(gr_ready_until(&m[0], GR_SLOTS, 0), GR_SLOTS - 1);
	ck_assert_int_eq(kill(holder, SIGKILL), 0);
	ck_assert_int_eq(waitpid(holder, NULL, 0), holder);
	/* Without a pidfd (valgrind) the group sees it as it settles. */
	gr_take(&m[0], false);
	ck_assert_uint_eq(gr_ready_until(&m[0], GR_SLOTS, 3000), GR_SLOTS);
	for (k = 0; k < m[0].oracle.steps_per_epoch; k++)
		gr_take(&m[0], k % 2 == 0);
	close(say);
	close(go);
	gr_done(&m[0]);
	free(m);
}
END_TEST

/*
 * Members @m[0] and @m[1] of the shared options take @ahead steps each
 * (@m[1] holding each till its next when @hold), then @m[2] attaches
 * behind them: the late-member set-up of the window and store cases.
 */
static void
gr_late(struct gr_member *m, uint64_t ahead, bool hold)
{
	struct infeed_options	o;
	uint64_t		k;
	unsigned		i;

	gr_options(&o);
	for (i = 0; i < 2; i++)
		gr_attach(&m[i], &o);
	for (k = 0; k < ahead; k++) {
		for (i = 0; i < 2; i++)
			gr_take(&m[i], hold && i == 1);
	}
	gr_attach(&m[2], &o);
}

/* Members @m, @n of them, each take steps to the end of epoch 1. */
static void
gr_finish(struct gr_member *m, unsigned n)
{
	unsigned	i;
	bool		left = true;

	while (left) {
		left = false;
		for (i = 0; i < n; i++) {
			if (m[i].epoch < 2) {
				gr_take(&m[i], false);
				left = true;
			}
		}
	}
}

/*
 * Issue 35: the group keeps a window of its past steps (group_window) in
 * more slots of its ring.  A trainer that attaches at epoch 0 step 0
 * while the others are 12 steps on joins at once and reads those steps
 * from the window, in the group's ring, rather than decode them again:
 * every index of each epoch once, in the sampler's order, and the rows
 * the workers read are two epochs' and what the ring read ahead, fewer
 * than with a catch-up (a_late_member_catches_up_and_shares: 12 steps
 * more).
 */
START_TEST(a_late_member_reads_the_groups_window)
{
	struct gr_member	*m = calloc(3, sizeof(*m));
	Infeed__Frame		*st;
	uint64_t		 per_epoch, rows, ahead = 12;
	uint32_t		 slots;
	unsigned		 i, k;

	gr_late(m, ahead, true);
	per_epoch = m[0].oracle.steps_per_epoch;
	ck_assert_uint_ne(gr_group(&m[0]), 0);
	ck_assert_uint_eq(gr_group(&m[2]), gr_group(&m[0]));
	ck_assert(gr_in_group(&m[2]));
	/* buffer_size slots, and the window: 64 less twice buffer_size. */
	st = raw_stats();
	slots = gr_session(st, &m[0])->slots;
	ck_assert_uint_eq(slots, INFEED_MAX_SLOTS - GR_SLOTS);
	infeed__frame__free_unpacked(st, NULL);
	/* Its first steps: the window's, in the group's ring. */
	for (k = 0; k < ahead; k++) {
		gr_take(&m[2], k % 2 == 0);
		ck_assert_uint_lt(m[2].last_slot, slots);
		if (k % 6 == 0)
			for (i = 0; i < 2; i++)
				gr_take(&m[i], i == 1);
	}
	while (m[2].epoch < 2 || m[0].epoch < 2) {
		for (i = 0; i < 3; i++) {
			if (m[i].epoch < 2) {
				gr_take(&m[i], i == 1);
				ck_assert_uint_lt(m[i].last_slot, slots);
			}
		}
	}
	st = raw_stats();
	rows = gr_rows_read(st);
	fprintf(stderr, "rows read for 3 members of 2 epochs, one %llu steps "
	    "late, from the window: %llu (2 epochs: %llu)\n",
	    (unsigned long long)ahead, (unsigned long long)rows,
	    (unsigned long long)(2 * per_epoch * GR_BATCH * GR_DI));
	ck_assert_uint_le(rows, (2 * per_epoch + GR_SLOTS) * GR_BATCH * GR_DI);
	/* No catch-up: it never left nor rejoined. */
	gr_counts(gr_session(st, &m[2]), 0, 0, 0);
	ck_assert_uint_eq(gr_session(st, &m[2])->group_members, 3);
	infeed__frame__free_unpacked(st, NULL);
	for (i = 0; i < 3; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * The window is what group_window holds, 3K here: 4 steps of 640 bytes
 * (20 rows of 16 bytes, with their labels and indices), so the ring has
 * 7 slots, charged with it.  A trainer 8 steps behind catches up on a
 * ring of its own for the 4 the window no longer has (the rows read show
 * them, once), then reads the window's 4 from the group's ring: every
 * index once, in order, for every member.
 */
START_TEST(a_window_holds_what_group_window_says)
{
	struct gr_member	*m = calloc(3, sizeof(*m));
	Infeed__Frame		*st;
	uint64_t		 per_epoch, rows, ahead = 8, window = 4;
	unsigned		 i, k;

	gr_late(m, ahead, false);
	per_epoch = m[0].oracle.steps_per_epoch;
	st = raw_stats();
	ck_assert_uint_eq(gr_session(st, &m[0])->slots, GR_SLOTS + window);
	infeed__frame__free_unpacked(st, NULL);
	ck_assert_uint_eq(gr_group(&m[2]), gr_group(&m[0]));
	/* The steps the window has not: its own ring's. */
	for (k = 0; k < ahead - window; k++) {
		gr_take(&m[2], false);
		ck_assert_uint_ge(m[2].last_slot, GR_SLOTS + window);
	}
	/* The window's, then the group's, in the group's ring. */
	for (k = 0; k < window + 2; k++) {
		gr_take(&m[2], false);
		ck_assert_uint_lt(m[2].last_slot, GR_SLOTS + window);
	}
	while (m[2].epoch < 2 || m[0].epoch < 2) {
		for (i = 0; i < 3; i++) {
			if (m[i].epoch < 2)
				gr_take(&m[i], false);
		}
	}
	st = raw_stats();
	rows = gr_rows_read(st);
	fprintf(stderr, "rows read, one member %llu steps late, a window of "
	    "%llu: %llu (2 epochs: %llu)\n", (unsigned long long)ahead,
	    (unsigned long long)window, (unsigned long long)rows,
	    (unsigned long long)(2 * per_epoch * GR_BATCH * GR_DI));
	ck_assert_uint_ge(rows, (2 * per_epoch + ahead - window) * GR_BATCH *
	    GR_DI);
	ck_assert_uint_le(rows, (2 * per_epoch + ahead - window +
	    2 * GR_SLOTS) * GR_BATCH * GR_DI);
	gr_counts(gr_session(st, &m[2]), 0, 0, 1);
	infeed__frame__free_unpacked(st, NULL);
	for (i = 0; i < 3; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/* Wait until the daemon has no session (those freed have detached). */
static void
gr_wait_no_session(void)
{
	Infeed__Frame	*st;
	size_t		 n;
	int		 tries;

	for (tries = 0; tries < 200; tries++) {
		st = raw_stats();
		n = st->stats->n_sessions;
		infeed__frame__free_unpacked(st, NULL);
		if (n == 0)
			return;
		usleep(20000);
	}
	ck_abort_msg("sessions are left 4 s after their clients went");
}

/* Rows the workers read now. */
static uint64_t
gr_rows_now(void)
{
	Infeed__Frame	*st = raw_stats();
	uint64_t	 rows = gr_rows_read(st);

	infeed__frame__free_unpacked(st, NULL);
	return (rows);
}

/*
 * Rows the workers read once they are still: the jobs an ended group had
 * under way finish (on a loaded machine, after its session is gone), so
 * that what is read next is the next trainer's.  3 s at most.
 */
static uint64_t
gr_rows_still(void)
{
	uint64_t	rows = gr_rows_now(), again;
	int		tries;

	for (tries = 0; tries < 30; tries++) {
		usleep(100000);
		if ((again = gr_rows_now()) == rows)
			break;
		rows = again;
	}
	return (rows);
}

/*
 * Issue 35, a store that lingers: a group keeps its past steps in a store
 * of its own (group_window's bytes, daemon memory), beyond the 64 slot
 * numbers of its ring.  A trainer that attaches 2 epochs (100 steps)
 * behind the group, 58 of them in the ring's window, catches up on a
 * ring of its own for the other 42 by copies from the store, not decodes:
 * the workers read the 2 epochs once (and no more than the ring's
 * read-ahead besides), where the catch-up alone read the 42 again; every
 * member gets each index once, in the sampler's order.
 */
START_TEST(a_late_member_reads_the_store_beyond_the_ring)
{
	struct gr_member	*m = calloc(3, sizeof(*m));
	uint64_t		 rows, steps = 2 * RAW_N / (GR_BATCH * GR_DI);
	unsigned		 i;

	gr_late(m, steps, false);
	ck_assert_uint_eq(gr_group(&m[2]), gr_group(&m[0]));
	gr_finish(m, 3);
	rows = gr_rows_now();
	fprintf(stderr, "rows read for 3 members of 2 epochs, one %llu steps "
	    "late: %llu (2 epochs: %llu; without the store, the 42 steps the "
	    "ring's window lacks again)\n", (unsigned long long)steps,
	    (unsigned long long)rows,
	    (unsigned long long)(steps * GR_BATCH * GR_DI));
	/* Margin for copies not done in time under ASan or valgrind. */
	ck_assert_uint_le(rows, (steps + 4 * GR_SLOTS) * GR_BATCH * GR_DI);
	for (i = 0; i < 3; i++)
		gr_done(&m[i]);
	free(m);
}
END_TEST

/*
 * A trainer that attaches after its group ended (its last member gone),
 * within group_linger, starts a group on the store that lingers: its 2
 * epochs are copies, a quarter of their rows read at most (copies still
 * queued as the first group ended are dropped), each index once in
 * order; the log says the group started on a store.
 */
START_TEST(a_member_after_its_group_ended_reads_the_lingering_store)
{
	struct gr_member	*m = calloc(2, sizeof(*m));
	struct infeed_options	 o;
	char			 log[65536];
	uint64_t		 rows, steps = 2 * RAW_N / (GR_BATCH * GR_DI);

	gr_options(&o);
	gr_attach(&m[0], &o);
	gr_finish(m, 1);
	gr_done(&m[0]);
	gr_wait_no_session();
	rows = gr_rows_still();
	gr_attach(&m[1], &o);
	gr_finish(&m[1], 1);
	rows = gr_rows_now() - rows;
	fprintf(stderr, "rows read for a trainer after its group ended: %llu "
	    "(2 epochs: %llu)\n", (unsigned long long)rows,
	    (unsigned long long)(steps * GR_BATCH * GR_DI));
	/* Copies still queued as the group ended are dropped (ASan, valgrind:
	 * a few steps); the whole 2 epochs without the store. */
	ck_assert_uint_le(rows, steps / 4 * GR_BATCH * GR_DI);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "starts on a store") != NULL, "%s", log);
	gr_done(&m[1]);
	free(m);
}
END_TEST

/*
 * The store takes what is free of memory_budget (4M here) and gives it
 * back as a ring needs it: a session of its own attaches while a store
 * that lingers holds all that was free (its ring is larger than the
 * group's, whose memory the budget kept), and the log says the store gave
 * back steps for it.
 */
START_TEST(a_lingering_store_gives_way_to_a_ring)
{
	struct gr_member	*m = calloc(2, sizeof(*m));
	struct infeed_options	 o;
	char			 log[65536];

	gr_options(&o);
	gr_attach(&m[0], &o);
	gr_finish(m, 1);
	gr_done(&m[0]);
	gr_wait_no_session();
	/* 48 slots of 8K: more than the group's ring, kept, gives back. */
	o.share = false;
	o.batch_size = 100;
	o.buffer_size = 48;
	gr_attach(&m[1], &o);	/* refused if the store keeps the budget */
	gr_finish(&m[1], 1);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "gives back") != NULL, "%s", log);
	gr_done(&m[1]);
	free(m);
}
END_TEST

/* Rings made on kept memory so far. */
static uint64_t
gr_rings_reused(void)
{
	Infeed__Frame	*st = raw_stats();
	uint64_t	 n = st->stats->rings_reused;

	infeed__frame__free_unpacked(st, NULL);
	return (n);
}

/*
 * A trainer after a group that ended, on the same data in another order
 * (another seed: the lingering store is not its), gets the window the
 * first one got, so its ring is made on the first ring's kept memory, not
 * new memory whose pages the workers fault in: the store that lingers
 * (and the kept ring) count as free, as they give way to a ring.  With
 * them counted as used, the 4M budget left the second window smaller and
 * its ring new (benchmarks/shared-pipeline-python's lone trainer with
 * group_linger set: 0.84 of its speed with the store never written).
 */
START_TEST(a_group_after_a_lingering_store_reuses_the_kept_ring)
{
	struct gr_member	*m = calloc(2, sizeof(*m));
	struct infeed_options	 o;
	uint64_t		 reused;

	gr_options(&o);
	gr_attach(&m[0], &o);
	gr_finish(m, 1);
	gr_done(&m[0]);
	gr_wait_no_session();
	reused = gr_rings_reused();
	o.seed = GR_SEED + 1;
	gr_attach(&m[1], &o);
	fprintf(stderr, "rings made on kept memory: %llu before the second "
	    "trainer, %llu after\n", (unsigned long long)reused,
	    (unsigned long long)gr_rings_reused());
	ck_assert_uint_eq(gr_rings_reused(), reused + 1);
	gr_finish(&m[1], 1);
	gr_done(&m[1]);
	free(m);
}
END_TEST

/*
 * A store given back to make room for a new group's (4M: not both fit)
 * hands the new store its memory, pages made and mapped, instead of
 * freeing them and making new ones (issue 35, round six: the pages of a
 * lone trainer's store cost more than the copies into them); the log
 * says so, and a third trainer of the second's options reads its 2
 * epochs from that store, copies into those pages: each index once, in
 * order, its bytes the dataset's, a quarter of the rows read at most.
 */
START_TEST(a_new_store_is_made_on_the_pages_of_one_given_back)
{
	struct gr_member	*m = calloc(3, sizeof(*m));
	struct infeed_options	 o;
	char			 log[65536];
	uint64_t		 rows, steps = 2 * RAW_N / (GR_BATCH * GR_DI);
	unsigned		 i;

	gr_options(&o);
	for (i = 0; i < 3; i++) {
		gr_attach(&m[i], &o);
		rows = gr_rows_now();
		gr_finish(&m[i], 1);
		rows = gr_rows_now() - rows;
		gr_done(&m[i]);
		gr_wait_no_session();
		o.seed = GR_SEED + 1;
	}
	fprintf(stderr, "rows read for the third trainer, from the store on "
	    "handed pages: %llu (2 epochs: %llu)\n", (unsigned long long)rows,
	    (unsigned long long)(steps * GR_BATCH * GR_DI));
	ck_assert_uint_le(rows, steps / 4 * GR_BATCH * GR_DI);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "on the pages of a store given back for "
	    "it") != NULL, "%s", log);
	free(m);
}
END_TEST

/* A daemon with a 4M budget, and groups that keep 1G of past steps. */
static void
setup_store_4m(void)
{
	gr_lingers = true;
	make_files("memory_budget = 4M\ngroup_window = 1G\n"
	    "group_linger = auto\n");
	infeedd_start(NULL);
}

/* A daemon whose groups keep no window (the catch-up alone). */
static void
setup_no_window(void)
{
	gr_lingers = false;
	make_files("group_window = 0\n");
	infeedd_start(NULL);
}

/*
 * A daemon whose groups keep 1G of past steps, raw arrays' too, in the
 * ring's window and in a store that lingers.
 */
static void
setup_window_1g(void)
{
	gr_lingers = true;
	make_files("group_window = 1G\ngroup_linger = auto\n");
	infeedd_start(NULL);
}

/* A daemon whose groups keep 1G of past steps in the ring, no store. */
static void
setup_window_1g_only(void)
{
	gr_lingers = false;
	make_files("group_window = 1G\ngroup_linger = off\n");
	infeedd_start(NULL);
}

/*
 * group_window = auto, the default, keeps no window for a group that
 * decodes nothing (test_images.py checks the images' window): its ring
 * has buffer_size slots.
 */
START_TEST(a_raw_group_keeps_no_window_by_default)
{
	struct gr_member	 m[2];
	struct infeed_options	 o;
	Infeed__Frame		*st;
	unsigned		 i;

	memset(m, 0, sizeof(m));
	gr_options(&o);
	for (i = 0; i < 2; i++)
		gr_attach(&m[i], &o);
	for (i = 0; i < 2; i++)
		gr_take(&m[i], false);
	ck_assert_uint_ne(gr_group(&m[0]), 0);
	st = raw_stats();
	ck_assert_uint_eq(gr_session(st, &m[0])->slots, GR_SLOTS);
	infeed__frame__free_unpacked(st, NULL);
	for (i = 0; i < 2; i++)
		gr_done(&m[i]);
}
END_TEST

/* A daemon whose groups keep 3K of past steps. */
static void
setup_window_3k(void)
{
	gr_lingers = false;
	make_files("group_window = 3K\ngroup_linger = off\n");
	infeedd_start(NULL);
}

/*
 * "big": 300000 samples of 64 bytes; a ring of one step of all of them
 * (3 slots, 65 MiB with its tables 79 MiB) fits in 100 MiB once, not
 * twice, nor with a window of past steps (the group keeps none).
 */
static void
setup_big(void)
{
	make_files("memory_budget = 100M\n\n[dataset big]\ntype = synthetic\n"
	    "samples = 300000\nshape = 1,8,8\ndtype = uint8\nclasses = 10\n"
	    "seed = 3\n");
	infeedd_start(NULL);
}

/* Take a step of "big" from @f, checking its position; keep it in @st. */
static void
gr_big_take(struct infeed *f, struct infeed_step *st, uint64_t step)
{
	ck_assert_msg(infeed_next(f, st) == INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_eq(st->epoch, step);
	ck_assert_uint_eq(st->step, 0);
	ck_assert_uint_eq(st->rows, 300000);
}

/*
 * The group's ring is charged once: the second member attaches where a
 * second ring would not fit.  A member that stops, holding a step, when
 * the budget cannot hold a ring of its own is ended rather than freeze
 * the others: the other gets its next step within the slack (with
 * margin), not at its timeout; the log says why and the stats count it
 * in group_stays; the ended member's Next gets an error that says why and
 * what to do, and the step it kept never changes while the group goes on.
 */
START_TEST(a_member_without_room_for_its_own_ring_is_ended)
{
	struct infeed_options	 o;
	struct infeed		*f[2];
	struct infeed_step	 st[2], next;
	Infeed__Frame		*stats;
	char			 log[16384];
	uint64_t		*idx, t0, waited;
	uint8_t			*head;
	unsigned		 i;
	int			 rc;

	infeed_options_init(&o);
	o.batch_size = 300000;
	o.share = true;
	for (i = 0; i < 2; i++) {
		f[i] = client();
		ck_assert_msg(infeed_attach(f[i], "big", &o, NULL) ==
		    INFEED_OK, "%s", infeed_error(f[i]));
	}
	for (i = 0; i < 2; i++)
		gr_big_take(f[i], &st[i], 0);
	ck_assert_ptr_nonnull(idx = malloc(300000 * sizeof(*idx)));
	ck_assert_ptr_nonnull(head = malloc(65536));
	memcpy(idx, st[1].indices, 300000 * sizeof(*idx));
	memcpy(head, st[1].data, 65536);
	/* f[1] keeps step 0 and stops; f[0] takes the next two, then waits. */
	ck_assert_int_eq(infeed_release(f[0], &st[0]), INFEED_OK);
	gr_big_take(f[0], &st[0], 1);
	ck_assert_int_eq(infeed_release(f[0], &st[0]), INFEED_OK);
	gr_big_take(f[0], &st[0], 2);
	ck_assert_int_eq(infeed_release(f[0], &st[0]), INFEED_OK);
	t0 = now_ms();
	rc = infeed_next_timeout(f[0], &next, 6000);
	waited = now_ms() - t0;
	fprintf(stderr, "the other member, with no room for a ring for the "
	    "stopped one: its next step after %llu ms (slack %d ms)\n",
	    (unsigned long long)waited, INFEED_GROUP_SLACK_MS);
	ck_assert_msg(rc == INFEED_OK, "%s", infeed_error(f[0]));
	ck_assert_uint_le(waited, INFEED_GROUP_SLACK_MS + 1500);
	ck_assert_uint_eq(next.epoch, 3);
	ck_assert_int_eq(infeed_release(f[0], &next), INFEED_OK);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "is ended") != NULL &&
	    strstr(log, "memory_budget") != NULL, "%s", log);
	stats = raw_stats();
	for (i = 0; i < stats->stats->n_sessions; i++) {
		/* Counted as stays (no room), not as leaves. */
		ck_assert_uint_eq(stats->stats->sessions[i]->group_stays, 1);
		ck_assert_uint_eq(
		    stats->stats->sessions[i]->group_leaves_held_back, 0);
		ck_assert_uint_eq(stats->stats->sessions[i]->group_members, 1);
		/* No room for a window either: buffer_size slots (or none:
		 * the ended one). */
		ck_assert_uint_le(stats->stats->sessions[i]->slots, 3);
	}
	infeed__frame__free_unpacked(stats, NULL);
	/* The group goes on; the step f[1] kept stays as it was. */
	for (i = 4; i < 8; i++) {
		gr_big_take(f[0], &next, i);
		ck_assert_int_eq(infeed_release(f[0], &next), INFEED_OK);
	}
	ck_assert_msg(memcmp(idx, st[1].indices, 300000 * sizeof(*idx)) == 0 &&
	    memcmp(head, st[1].data, 65536) == 0, "the step the ended member "
	    "kept changed while the group went on");
	/* f[1] hears why at its next Next, and gives its step back. */
	ck_assert_int_eq(infeed_next(f[1], &next), INFEED_ERR_DAEMON);
	ck_assert_msg(strstr(infeed_error(f[1]), "memory_budget") != NULL &&
	    strstr(infeed_error(f[1]), "attach again") != NULL, "%s",
	    infeed_error(f[1]));
	ck_assert_int_eq(infeed_release(f[1], &st[1]), INFEED_OK);
	free(idx);
	free(head);
	for (i = 0; i < 2; i++)
		infeed_free(f[i]);
}
END_TEST

static Suite *
groups_suite(void)
{
	Suite	*s = suite_create("groups");
	TCase	*tc;

	tc = tcase_create("shared");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, four_members_share_one_stream_exactly_once);
	tcase_add_test(tc, a_late_member_joins_only_at_a_step_the_group_has);
	tcase_add_test(tc, a_raw_group_keeps_no_window_by_default);
	tcase_add_test(tc, a_worker_killed_mid_run_loses_nothing_for_any_member);
	tcase_add_test(tc, epochs_end_for_every_member_without_load_indefinitely);
	tcase_add_test(tc, opt_out_and_other_options_never_share);
	tcase_add_test(tc, another_user_never_shares);
	tcase_add_loop_test(tc,
	    a_group_ring_stays_held_for_the_member_that_holds_it, 0, 2);
	tcase_add_test(tc, a_step_kept_after_its_session_ended_never_changes);
	suite_add_tcase(s, tc);

	/* The ring of buffer_size slots these count on: no window. */
	tc = tcase_create("no window");
	tcase_add_checked_fixture(tc, setup_no_window, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, a_stopped_member_leaves_and_finishes_alone, 0,
	    2);
	tcase_add_test(tc, a_kept_slot_comes_back_when_its_process_exits);
	tcase_add_loop_test(tc, a_member_holding_every_slot_freezes_no_one, 0,
	    2);
	tcase_add_loop_test(tc, a_member_that_left_rejoins_when_it_catches_up,
	    0, 2);
	tcase_add_loop_test(tc, a_late_member_catches_up_and_shares, 0, 2);
	tcase_add_test(tc,
	    a_late_member_stopped_while_catching_up_leaves_within_the_slack);
	tcase_add_loop_test(tc,
	    a_slow_or_pausing_member_keeps_no_one_to_its_pace, 0, 2);
	tcase_add_test(tc,
	    a_member_catching_up_holding_its_own_step_never_freezes);
	suite_add_tcase(s, tc);

	tc = tcase_create("window 1G");
	tcase_add_checked_fixture(tc, setup_window_1g, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_late_member_reads_the_groups_window);
	tcase_add_test(tc, a_late_member_reads_the_store_beyond_the_ring);
	tcase_add_test(tc,
	    a_member_after_its_group_ended_reads_the_lingering_store);
	suite_add_tcase(s, tc);

	/*
	 * The slack and freeze cases again with a window, the ring's slots
	 * from Stats (issue 35): image groups get one by default.  The
	 * pacing case (6 s) once, the cheapest pick for CI.
	 */
	tc = tcase_create("slack, window 1G");
	tcase_add_checked_fixture(tc, setup_window_1g_only, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, a_stopped_member_leaves_and_finishes_alone, 0,
	    2);
	tcase_add_loop_test(tc, a_member_holding_every_slot_freezes_no_one, 0,
	    2);
	tcase_add_test(tc,
	    a_member_catching_up_holding_its_own_step_never_freezes);
	suite_add_tcase(s, tc);

	tc = tcase_create("slack, window 1G, linger");
	tcase_add_checked_fixture(tc, setup_window_1g, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, a_stopped_member_leaves_and_finishes_alone, 1,
	    2);
	tcase_add_loop_test(tc, a_member_holding_every_slot_freezes_no_one, 0,
	    1);
	tcase_add_loop_test(tc,
	    a_slow_or_pausing_member_keeps_no_one_to_its_pace, 1, 2);
	tcase_add_test(tc,
	    a_member_catching_up_holding_its_own_step_never_freezes);
	suite_add_tcase(s, tc);

	tc = tcase_create("store 4M");
	tcase_add_checked_fixture(tc, setup_store_4m, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_lingering_store_gives_way_to_a_ring);
	tcase_add_test(tc, a_group_after_a_lingering_store_reuses_the_kept_ring);
	tcase_add_test(tc, a_new_store_is_made_on_the_pages_of_one_given_back);
	suite_add_tcase(s, tc);

	tc = tcase_create("window");
	tcase_add_checked_fixture(tc, setup_window_3k, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_window_holds_what_group_window_says);
	/* The others wait the slack once the window is full too. */
	tcase_add_loop_test(tc, a_stopped_member_leaves_and_finishes_alone, 0,
	    2);
	suite_add_tcase(s, tc);

	tc = tcase_create("budget");
	tcase_add_checked_fixture(tc, setup_big, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_member_without_room_for_its_own_ring_is_ended);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(groups_suite()));
}
