/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/stats-frame.c: a stats snapshot made in the test
 * becomes the Stats message.  Every counter of proto/stats-schema.h's
 * tables arrives, marked present, under its proto name (a session's
 * microseconds as seconds); a group's counters only for a session in a
 * group; every option of proto/options-schema.h in a session's
 * LoaderOptions; the message packs and unpacks to the same figures.  The
 * option table's defaults are infeed.proto's.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "log.h"
#include "options-schema.h"
#include "session.h"
#include "stats-frame.h"
#include "stats.h"
#include "runner.h"

/* A snapshot of two sessions (one in a group), two workers, memory. */
static void
snapshot(struct stats *st, struct stats_session *ss,
    struct pool_worker_info *w, struct session_options *o,
    struct stats_history *h)
{
	uint64_t	k = 0;

	memset(st, 0, sizeof(*st));
	memset(ss, 0, 2 * sizeof(*ss));
	memset(w, 0, 2 * sizeof(*w));
	memset(o, 0, sizeof(*o));
	memset(h, 0, sizeof(*h));
	/* Each option a value of its own: 1 for a bool, else by its place. */
#define SET_OPTION(name, field, type, ...)				\
	o->field = (type)(++k * 1000 + 1);
	INFEED_LOADER_OPTIONS(SET_OPTION)
#undef SET_OPTION
	ss[0].report.id = 42;
	ss[0].report.dataset = "mnist";
	ss[0].report.options = o;
	ss[0].report.steps = 7;
	ss[0].report.rows = 700;
	ss[0].report.bytes_read = 5488;
	ss[0].report.samples_replaced = 1;
	ss[0].report.data_wait_us = 250000;
	ss[0].report.active_us = 2000000;
	ss[0].report.group_id = 9;
	ss[0].report.group_members = 4;
	ss[0].report.group_steps_filled = 11;
	ss[0].report.group_bytes_read = 12;
	ss[0].report.group_leaves[SESSION_LEAVE_HELD_BACK] = 3;
	ss[0].report.group_leaves[SESSION_LEAVE_WAITED] = 2;
	ss[0].report.group_stays = 1;
	ss[0].report.group_rejoins = 5;
	ss[0].client_name = "job";
	ss[0].errors_sent = 6;
	ss[1].report.id = 43;
	ss[1].report.dataset = "mnist";
	ss[1].report.options = o;
	ss[1].report.steps = 3;
	w[0].pid = 100;
	w[0].state = "busy";
	w[0].busy_s = 1.5;
	w[0].rows_done = 300;
	w[1].pid = -1;
	w[1].state = "restarting";
	w[1].restarts = 2;
	w[1].stuck = 1;
	w[1].taken_over = 3;
	st->sessions = ss;
	st->nsessions = 2;
	st->workers = w;
	st->nworkers = 2;
	st->memory_used = 4096;
	st->memory_kept = 1024;
	st->memory_held = 512;
	st->memory_budget = 1 << 20;
	st->memory_private = 777;
	st->rings_reused = 1;
	st->rings_made = 3;
	st->fork_server_pid = -1;
	st->history = h;
}

/* What the tests check of a Stats message, packed or not. */
static void
check_stats(const Infeed__Stats *m)
{
	const Infeed__SessionStats	*s0, *s1;
	const Infeed__WorkerStats	*w0, *w1;
	const Infeed__LoaderOptions	*lo;
	uint64_t			 k = 0;

	ck_assert_uint_eq(m->n_sessions, 2);
	ck_assert_uint_eq(m->n_workers, 2);
	s0 = m->sessions[0];
	s1 = m->sessions[1];
	ck_assert_uint_eq(s0->session_id, 42);
	ck_assert_str_eq(s0->client_name, "job");
	/* A session's counters, the microseconds as seconds. */
	ck_assert(s0->has_steps_delivered && s0->steps_delivered == 7);
	ck_assert(s0->has_rows_delivered && s0->rows_delivered == 700);
	ck_assert(s0->has_bytes_read && s0->bytes_read == 5488);
	ck_assert(s0->has_samples_replaced && s0->samples_replaced == 1);
	ck_assert(s0->has_data_wait_s);
	ck_assert_double_eq_tol(s0->data_wait_s, 0.25, 1e-12);
	ck_assert(s0->has_active_s);
	ck_assert_double_eq_tol(s0->active_s, 2.0, 1e-12);
	ck_assert(s0->has_errors_sent && s0->errors_sent == 6);
	/* The options it asked for, each marked present. */
	ck_assert_ptr_nonnull(lo = s0->options);
#define CHECK_OPTION(name, field, type, ...)				\
	k++;								\
	ck_assert_msg(lo->has_##name, #name " is not marked present");	\
	ck_assert_msg((uint64_t)lo->name == (uint64_t)(type)(k * 1000 + 1), \
	    #name " is %llu", (unsigned long long)lo->name);
	INFEED_LOADER_OPTIONS(CHECK_OPTION)
#undef CHECK_OPTION
	/* A group's, by their proto names; none outside a group. */
	ck_assert(s0->has_group_id && s0->group_id == 9);
	ck_assert_uint_eq(s0->group_members, 4);
	ck_assert(s0->has_group_steps_filled && s0->group_steps_filled == 11);
	ck_assert(s0->has_group_bytes_read && s0->group_bytes_read == 12);
	ck_assert(s0->has_group_leaves_held_back &&
	    s0->group_leaves_held_back == 3);
	ck_assert(s0->has_group_leaves_waited &&
	    s0->group_leaves_waited == 2);
	ck_assert(s0->has_group_stays && s0->group_stays == 1);
	ck_assert(s0->has_group_rejoins && s0->group_rejoins == 5);
	ck_assert(s1->has_steps_delivered && s1->steps_delivered == 3);
	ck_assert(!s1->has_group_id && !s1->has_group_steps_filled &&
	    !s1->has_group_leaves_held_back && !s1->has_group_rejoins);
	/* A worker's. */
	w0 = m->workers[0];
	w1 = m->workers[1];
	ck_assert_int_eq(w0->pid, 100);
	ck_assert_str_eq(w0->state, "busy");
	ck_assert(w0->has_busy_s);
	ck_assert_double_eq_tol(w0->busy_s, 1.5, 1e-12);
	ck_assert(w0->has_rows_done && w0->rows_done == 300);
	ck_assert(w1->has_restarts && w1->restarts == 2);
	ck_assert(w1->has_stuck && w1->stuck == 1);
	ck_assert(w1->has_taken_over && w1->taken_over == 3);
	/* The daemon's memory and rings. */
	ck_assert(m->has_memory_used && m->memory_used == 4096);
	ck_assert(m->has_memory_kept && m->memory_kept == 1024);
	ck_assert(m->has_memory_held && m->memory_held == 512);
	ck_assert(m->has_memory_budget && m->memory_budget == 1 << 20);
	ck_assert(m->has_memory_private && m->memory_private == 777);
	ck_assert(m->has_rings_reused && m->rings_reused == 1);
	ck_assert(m->has_rings_made && m->rings_made == 3);
	/* No fork server up: 0, not -1. */
	ck_assert(m->has_fork_server_pid && m->fork_server_pid == 0);
}

START_TEST(frame_carries_every_counter_of_the_schema)
{
	struct stats		 st;
	struct stats_session	 ss[2];
	struct pool_worker_info	 w[2];
	struct session_options	 o;
	struct stats_history	 h;
	struct stats_frame	 sf;
	Infeed__Stats		*back;
	uint8_t			*buf;
	size_t			 len;

	snapshot(&st, ss, w, &o, &h);
	stats_frame_fill(&sf, &st);
	check_stats(&sf.msg);
	/* The same figures after the wire. */
	len = infeed__stats__get_packed_size(&sf.msg);
	ck_assert_ptr_nonnull(buf = malloc(len));
	ck_assert_uint_eq(infeed__stats__pack(&sf.msg, buf), len);
	ck_assert_ptr_nonnull(back = infeed__stats__unpack(NULL, len, buf));
	check_stats(back);
	infeed__stats__free_unpacked(back, NULL);
	free(buf);
	stats_frame_clear(&sf);
}
END_TEST

/* The table's defaults are those infeed.proto gives an unset field. */
START_TEST(schema_defaults_are_the_protocols)
{
	const Infeed__LoaderOptions	lo = INFEED__LOADER_OPTIONS__INIT;

#define CHECK_DEFAULT(name, field, type, def, ...)			\
	ck_assert_msg((uint64_t)lo.name == (uint64_t)(def),		\
	    "infeed.proto's default of " #name " is %llu, not " #def	\
	    " as options-schema.h says", (unsigned long long)lo.name);
	INFEED_LOADER_OPTIONS(CHECK_DEFAULT)
#undef CHECK_DEFAULT
}
END_TEST

static Suite *
stats_frame_suite(void)
{
	Suite	*s = suite_create("stats-frame");
	TCase	*tc = tcase_create("stats-frame");

	tcase_add_test(tc, frame_carries_every_counter_of_the_schema);
	tcase_add_test(tc, schema_defaults_are_the_protocols);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	log_init("test-stats-frame", getenv("TEST_VERBOSE") != NULL ? 1 : -1);
	return (run_suite(stats_frame_suite()));
}
