/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/stats.c, the one statistics model that the Stats
 * frame, /metrics and STATUS= render, over a real pool: a snapshot holds
 * the pool's workers and queue, the ring budget's memory split into used,
 * kept and held, the uptime and the clients; each live session added with
 * what it delivered, its options as asked, its client's name and errors;
 * the history folds ended sessions per dataset (every client's own files
 * as one "(files)") and counts errors sent per code, ignoring codes past
 * the last.
 */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "clock.h"
#include "log.h"
#include "session.h"
#include "stats.h"
#include "unit-daemon.h"
#include "runner.h"

#define WORKERS		2
#define DEADLINE_MS	10000

static char			 rundir[PATH_MAX];	/* made by main() */
static char			 tmpdir[PATH_MAX];	/* made per test */
static struct session_host	 host;
static unsigned			 nsteps;	/* steps the sessions gave */

/* LoaderOptions' defaults (infeed.proto), batches of 2. */
static const struct session_options	opts = {
	.batch_size = 2, .device_iterations = 1, .replication_factor = 1,
	.gradient_accumulation = 1, .drop_last = true, .buffer_size = 2,
	.load_indefinitely = true, .process_count = 1,
	.label_dtype = INFEED_DTYPE_INT32,
};

/* A configuration of two synthetic datasets, and a pool on it. */
static void
setup(void)
{
	char	path[PATH_MAX], text[1024];

	make_test_dir(rundir, tmpdir, sizeof(tmpdir));
	unit_fmt(text, sizeof(text),
	    "[infeedd]\nworkers = %d\nmemory_budget = 16M\n"
	    "[dataset a]\ntype = synthetic\nsamples = 40\nshape = 4\n"
	    "dtype = uint8\n"
	    "[dataset b]\ntype = synthetic\nsamples = 40\nshape = 2\n"
	    "dtype = float32\n", WORKERS);
	unit_fmt(path, sizeof(path), "%s/infeedd.conf", tmpdir);
	write_file(path, text, strlen(text));
	unit_daemon_start(path, 2, WORKERS);
	host.cat = cat;
	host.pool = pool;
	host.budget = &budget;
	host.config_path = conf->path;
	nsteps = 0;
}


static void
teardown(void)
{
	uint64_t	deadline = now_ms() + DEADLINE_MS;

	while (!pool_idle(pool) && now_ms() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	unit_daemon_stop();
	remove_tree(tmpdir);
}

static void
step_cb(void *arg, struct session_req req, const struct session_step *st)
{
	(void)arg;
	(void)req;
	(void)st;
	nsteps++;
}

static void
end_cb(void *arg, struct session_req req, uint64_t epoch)
{
	(void)arg;
	(void)req;
	(void)epoch;
}

static void
error_cb(void *arg, struct session_req req, enum errcode code,
    const char *message)
{
	(void)arg;
	(void)req;
	ck_abort_msg("error %d: %s", (int)code, message);
}

static const struct session_events	events = { step_cb, end_cb, error_cb };
static const struct session_client	client = { 7, 4321, 1000, 1000 };

/* A session on catalogue dataset @name with @o. */
static struct session *
attach(const char *name, const struct session_options *o)
{
	struct session_attach	 a = { .options = *o };
	struct session		*s;
	enum errcode		 code;
	char			*cause = NULL;

	a.dataset = (char *)(uintptr_t)name;
	s = session_new(&host, &client, &a, NULL, 0, NULL, &events, NULL,
	    &code, &cause);
	ck_assert_msg(s != NULL, "attach to %s: %s", name, cause);
	return (s);
}

/* A session on the client's own raw file of 8 samples of 4 bytes. */
static struct session *
attach_files(const char *name)
{
	struct session_attach	 a = { .options = opts, .has_files = true };
	struct session		*s;
	enum errcode		 code;
	uint8_t			 data[32];
	char			 path[PATH_MAX], *cause = NULL;
	int			 fd;

	memset(data, 5, sizeof(data));
	unit_fmt(path, sizeof(path), "%s/%s.bin", tmpdir, name);
	write_file(path, data, sizeof(data));
	ck_assert_int_ge(fd = open(path, O_RDONLY | O_CLOEXEC), 0);
	a.dataset = (char *)(uintptr_t)name;
	a.files.data_format = DATASET_FORMAT_RAW;
	a.files.has_dtype = true;
	a.files.dtype = INFEED_DTYPE_UINT8;
	a.files.ndim = 1;
	a.files.shape[0] = 4;
	s = session_new(&host, &client, &a, &fd, 1, NULL, &events, NULL,
	    &code, &cause);
	ck_assert_msg(s != NULL, "attach to files %s: %s", name, cause);
	return (s);
}

/* Ask @s for @n steps and wait until they came. */
static void
take_steps(struct session *s, unsigned n)
{
	struct session_req	 req = { 0, false };
	uint64_t		 deadline = now_ms() + DEADLINE_MS;
	enum errcode		 code;
	unsigned		 want = nsteps + n, i;
	char			*cause = NULL;

	for (i = 0; i < n; i++)
		ck_assert_int_eq(session_next(s, req, &code, &cause), 0);
	while (nsteps < want && now_ms() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_uint_eq(nsteps, want);
}

START_TEST(snapshot_holds_the_pool_the_budget_and_the_clients)
{
	struct stats_history	h;
	struct stats		st;
	uint64_t		started = clock_now_ms() - 1500;
	unsigned		i;

	memset(&h, 0, sizeof(h));
	stats_take(&st, pool, &budget, NULL, started, 3, 0, &h);
	ck_assert_uint_ge(st.uptime_ms, 1500);
	ck_assert_uint_lt(st.uptime_ms, 1500 + DEADLINE_MS);
	ck_assert_uint_eq(st.clients, 3);
	ck_assert_uint_eq(st.nsessions, 0);
	ck_assert_uint_eq(st.nworkers, WORKERS);
	for (i = 0; i < WORKERS; i++) {
		ck_assert_int_gt(st.workers[i].pid, 0);
		ck_assert_ptr_nonnull(st.workers[i].state);
	}
	ck_assert_uint_eq(st.jobs_queued, 0);
	ck_assert_uint_eq(st.rows_reissued, 0);
	ck_assert_uint_eq(st.memory_used, 0);
	ck_assert_uint_eq(st.memory_budget, 16u << 20);
	ck_assert_ptr_nonnull(st.huge_pages);
	/* This process's own anonymous memory at least. */
	ck_assert_uint_gt(st.memory_private, 0);
	ck_assert_ptr_eq(st.history, &h);
	stats_clear(&st);

	/* Kept and held memory is the budget's, not the live rings'. */
	budget.used += 3000;
	budget.kept_bytes += 1000;
	budget.held_bytes += 500;
	stats_take(&st, pool, &budget, NULL, started, 0, 0, &h);
	ck_assert_uint_eq(st.memory_used, 1500);
	ck_assert_uint_eq(st.memory_kept, 1000);
	ck_assert_uint_eq(st.memory_held, 500);
	stats_clear(&st);
	budget.used -= 3000;
	budget.kept_bytes -= 1000;
	budget.held_bytes -= 500;
}
END_TEST

START_TEST(snapshot_holds_each_live_session)
{
	struct stats_history		 h;
	struct stats			 st;
	struct session_options		 o = opts;
	struct session			*a, *b;
	const struct session_report	*r;

	memset(&h, 0, sizeof(h));
	o.shuffle = true;
	o.seed = 11;
	o.has_transform = true;
	o.transform.scale = 1.0f;
	o.transform.to_float32 = true;
	a = attach("a", &o);
	b = attach("b", &opts);
	take_steps(a, 2);
	stats_take(&st, pool, &budget, NULL, clock_now_ms(), 2, 2, &h);
	stats_add_session(&st, a, "trainer", 3);
	stats_add_session(&st, b, NULL, 0);
	ck_assert_uint_eq(st.nsessions, 2);
	/* Both rings and their tables, and nothing else. */
	ck_assert_uint_eq(st.memory_used, budget.used);
	ck_assert_uint_gt(st.memory_used, 0);

	r = &st.sessions[0].report;
	ck_assert_uint_eq(r->id, session_id(a));
	ck_assert_str_eq(r->dataset, "a");
	ck_assert(!r->own_files);
	ck_assert_str_eq(st.sessions[0].client_name, "trainer");
	ck_assert_uint_eq(st.sessions[0].errors_sent, 3);
	ck_assert_int_eq(r->client_pid, 4321);
	ck_assert_uint_eq(r->client_uid, 1000);
	ck_assert_uint_eq(r->steps, 2);
	ck_assert_uint_eq(r->rows, 4);
	ck_assert_uint_eq(r->step, 1);
	ck_assert_uint_eq(r->epoch, 0);
	ck_assert_uint_eq(r->slots, 2);
	ck_assert_uint_eq(r->slots_held, 2);
	ck_assert_uint_ge(r->bytes_read, 4 * 4);
	/* The options as asked, with the transform. */
	ck_assert_uint_eq(r->options->batch_size, 2);
	ck_assert(r->options->shuffle);
	ck_assert_uint_eq(r->options->seed, 11);
	ck_assert(r->options->has_transform);
	ck_assert(r->options->transform.to_float32);
	/* Two Nexts answered, each counted in one bucket. */
	ck_assert_uint_eq(r->wait_counts[0] + r->wait_counts[1] +
	    r->wait_counts[2] + r->wait_counts[3] + r->wait_counts[4] +
	    r->wait_counts[5] + r->wait_counts[6] + r->wait_counts[7] +
	    r->wait_counts[8], 2);
	ck_assert_uint_le(r->data_wait_us, r->active_us);

	r = &st.sessions[1].report;
	ck_assert_str_eq(r->dataset, "b");
	ck_assert_ptr_null(st.sessions[1].client_name);
	ck_assert_uint_eq(r->steps, 0);
	ck_assert_uint_eq(r->active_us, 0);
	ck_assert(!r->options->has_transform);
	stats_clear(&st);
	session_free(a);
	session_free(b);
}
END_TEST

START_TEST(history_folds_ended_sessions_per_dataset)
{
	struct stats_history	 h;
	struct session		*s;

	memset(&h, 0, sizeof(h));
	s = attach("a", &opts);
	take_steps(s, 2);
	stats_history_end(&h, s);
	session_free(s);
	s = attach("b", &opts);
	take_steps(s, 1);
	stats_history_end(&h, s);
	session_free(s);
	s = attach("a", &opts);
	take_steps(s, 1);
	stats_history_end(&h, s);
	session_free(s);
	/* Clients' files fold into one, whatever each session is called. */
	s = attach_files("mine");
	take_steps(s, 1);
	stats_history_end(&h, s);
	session_free(s);
	s = attach_files("theirs");
	stats_history_end(&h, s);
	session_free(s);

	ck_assert_uint_eq(h.nended, 3);
	ck_assert_str_eq(h.ended[0].dataset, "a");
	ck_assert_uint_eq(h.ended[0].sessions, 2);
	ck_assert_uint_eq(h.ended[0].steps, 3);
	ck_assert_uint_eq(h.ended[0].rows, 6);
	ck_assert_uint_ge(h.ended[0].bytes_read, 6 * 4);
	ck_assert_str_eq(h.ended[1].dataset, "b");
	ck_assert_uint_eq(h.ended[1].sessions, 1);
	ck_assert_uint_eq(h.ended[1].rows, 2);
	ck_assert_str_eq(h.ended[2].dataset, "(files)");
	ck_assert_uint_eq(h.ended[2].sessions, 2);
	ck_assert_uint_eq(h.ended[2].steps, 1);
	ck_assert_uint_eq(h.ended[2].rows, 2);
	stats_history_clear(&h);
	ck_assert_uint_eq(h.nended, 0);
	ck_assert_ptr_null(h.ended);
}
END_TEST

START_TEST(history_counts_errors_by_code)
{
	struct stats_history	h;

	memset(&h, 0, sizeof(h));
	stats_history_error(&h, ERRCODE_NOT_FOUND);
	stats_history_error(&h, ERRCODE_NOT_FOUND);
	stats_history_error(&h, ERRCODE_INTERNAL);
	stats_history_error(&h, (enum errcode)ERRCODE_COUNT);	/* none */
	stats_history_error(&h, (enum errcode)1000);
	ck_assert_uint_eq(h.errors[ERRCODE_NOT_FOUND], 2);
	ck_assert_uint_eq(h.errors[ERRCODE_INTERNAL], 1);
	ck_assert_uint_eq(h.errors[ERRCODE_DATA], 0);
	stats_history_clear(&h);
	ck_assert_uint_eq(h.errors[ERRCODE_NOT_FOUND], 0);
}
END_TEST

static Suite *
stats_suite(void)
{
	Suite	*s = suite_create("stats");
	TCase	*tc = tcase_create("stats");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, snapshot_holds_the_pool_the_budget_and_the_clients);
	tcase_add_test(tc, snapshot_holds_each_live_session);
	tcase_add_test(tc, history_folds_ended_sessions_per_dataset);
	tcase_add_test(tc, history_counts_errors_by_code);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every test in a directory of its own, then remove it. */
int
main(void)
{
	log_init("test-stats", getenv("TEST_VERBOSE") != NULL ? 1 : -1);
	return (run_suite_in_dir(stats_suite(), "test-stats", rundir,
	    sizeof(rundir)));
}
