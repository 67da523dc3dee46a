/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/attach-check.c, on a real event base and pool
 * (unit-daemon.c), with a file that never answers (fuse-file.c: a FUSE
 * file whose reads wait until released; it needs root, and without it
 * each test says so and passes).  The thread accounting: one uid's
 * checks, INFEED_MAX_ATTACH_CHECKS running and INFEED_MAX_ATTACH_QUEUE
 * waiting, refuse only that uid's next Attach while another uid's is
 * answered at once; checks given up (their client hung up) count as
 * stuck against their uid until their threads return, and past
 * INFEED_MAX_STUCK_CHECKS refuse that uid's Attach requests only;
 * however many uids, at most INFEED_MAX_ATTACH_THREADS threads, running
 * and stuck together, a check beyond that waiting for one to return.  A
 * check not done in INFEED_ATTACH_CHECK_S is given up and its Attach told
 * why.  A cancelled Attach never calls back, and every descriptor that
 * came with one is closed once its thread returns.
 */

#include <sys/types.h>

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>

#include "attach-check.h"
#include "config.h"
#include "fuse-file.h"
#include "infeed-dtype.h"
#include "infeed-limits.h"
#include "log.h"
#include "unit-daemon.h"

#define UID_A		1000	/* the user whose files never answer */
#define UID_B		1001	/* a user with a good file */
#define BYSTANDER_MS	250	/* how long another uid's Attach may take */
#define SETTLE_MS	5000	/* the threads return, the callbacks come */
#define NCHECKS		(INFEED_MAX_ATTACH_THREADS + 8)

/* One Attach through attach_check_begin(), and how it ended. */
struct check {
	struct attach_pending	*p;
	uint64_t		 began_ms;
	bool			 done;		/* its callback came */
	uint64_t		 ms;		/* ... after this long */
	bool			 session;	/* a session was made */
	enum errcode		 code;
	char			*cause;
};

static char			 rundir[PATH_MAX];
static char			 tmpdir[PATH_MAX];
static char			 good_path[PATH_MAX];
static struct attach_checks	*sc;
static struct session_host	 host;
static struct fusefs		 fs;
static bool			 fuse_up;
static int			 fuse_fd = -1;	/* the FUSE file, opened */
static struct check		 checks[NCHECKS];
/* More, for a test's own: a callback may come after a failed test ends. */
static struct check		 more[3];
static unsigned			 callbacks;

/* A session's events: none is looked at. */
static void
ev_step(void *arg, struct session_req req, const struct session_step *st)
{
	(void)arg;
	(void)req;
	(void)st;
}

static void
ev_end(void *arg, struct session_req req, uint64_t epoch)
{
	(void)arg;
	(void)req;
	(void)epoch;
}

static void
ev_error(void *arg, struct session_req req, enum errcode code,
    const char *message)
{
	(void)arg;
	(void)req;
	(void)code;
	(void)message;
}

static const struct session_events	events = { ev_step, ev_end, ev_error };

/* A configuration of one dataset, the pool, the checks' state. */
static void
setup(void)
{
	static const uint8_t	good[40];
	char			path[PATH_MAX];
	static const char	text[] = "[infeedd]\nworkers = 1\n"
	    "[dataset small]\ntype = synthetic\nsamples = 12\nshape = 2\n"
	    "dtype = uint8\n";

	make_test_dir(rundir, tmpdir, sizeof(tmpdir));
	unit_fmt(path, sizeof(path), "%s/infeedd.conf", tmpdir);
	write_file(path, text, strlen(text));
	unit_fmt(good_path, sizeof(good_path), "%s/good.bin", tmpdir);
	write_file(good_path, good, sizeof(good));
	unit_daemon_start(path, 1, 1);
	host.cat = cat;
	host.pool = pool;
	host.budget = &budget;
	host.config_path = conf->path;
	ck_assert_ptr_nonnull(sc = attach_check_new(base, pool));
	memset(checks, 0, sizeof(checks));
	memset(more, 0, sizeof(more));
	callbacks = 0;
	fuse_up = false;
	fuse_fd = -1;
}

/* Whether no Attach waits and no given-up check is out. */
static bool
pred_none_pending(const void *arg)
{
	(void)arg;
	return (attach_check_pending(sc) == 0);
}

/* Let every thread return, then free it all. */
static void
teardown(void)
{
	size_t	i;

	if (fuse_up) {
		fuse_release(&fs);
		ck_assert(unit_run_until(pred_none_pending, NULL, SETTLE_MS));
		close(fuse_fd);
		fuse_stop(&fs);
	}
	attach_check_free(sc);
	for (i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		free(checks[i].cause);
	for (i = 0; i < sizeof(more) / sizeof(more[0]); i++)
		free(more[i].cause);
	unit_daemon_stop();
	remove_tree(tmpdir);
}

/* Mount the FUSE file and open it; false (the test passes) without. */
static bool
fuse_file(void)
{
	static const uint8_t	junk[4096];

	if (!fuse_start(&fs, tmpdir, junk, sizeof(junk)))
		return (false);
	fuse_up = true;
	ck_assert_int_ne(fuse_fd = open(fs.path, O_RDONLY | O_CLOEXEC), -1);
	return (true);
}

/* @c's checks ended: make its session (then free it) or note why not. */
static void
checked_cb(void *arg)
{
	struct check	*c = arg;
	struct session	*s;

	ck_assert(!c->done);
	c->done = true;
	c->ms = now_ms() - c->began_ms;
	callbacks++;
	s = attach_check_end(c->p, &host, &events, NULL, &c->code, &c->cause);
	c->p = NULL;
	c->session = s != NULL;
	session_free(s);
}

/*
 * Begin @c, an Attach of @uid with a copy of @fd as its data file: npy
 * (whose header the check reads) for the FUSE file, else raw uint8 rows
 * of 4 bytes.  Return attach_check_begin()'s answer.
 */
static int
begin(struct check *c, uid_t uid, int fd)
{
	struct session_attach	a;
	struct session_client	client = { .peer_id = uid, .pid = 1,
				    .uid = uid, .gid = uid };
	int			fds[1], rc;

	memset(&a, 0, sizeof(a));
	a.dataset = (char *)"own files";
	a.options.batch_size = 1;
	a.options.device_iterations = 1;
	a.options.replication_factor = 1;
	a.options.gradient_accumulation = 1;
	a.options.buffer_size = 2;
	a.options.process_count = 1;
	a.options.label_dtype = INFEED_DTYPE_INT32;
	a.has_files = true;
	if (fd == fuse_fd)
		a.files.data_format = DATASET_FORMAT_NPY;
	else {
		a.files.data_format = DATASET_FORMAT_RAW;
		a.files.has_dtype = true;
		a.files.dtype = INFEED_DTYPE_UINT8;
		a.files.ndim = 1;
		a.files.shape[0] = 4;
	}
	ck_assert_int_ne(fds[0] = fcntl(fd, F_DUPFD_CLOEXEC, 0), -1);
	free(c->cause);
	memset(c, 0, sizeof(*c));
	c->began_ms = now_ms();
	rc = attach_check_begin(sc, &host, &client, &a, fds, 1, checked_cb, c,
	    &c->p, &c->code, &c->cause);
	if (rc == 0)
		close(fds[0]);
	return (rc);
}

/* Whether the callback of the check at @arg came. */
static bool
pred_done(const void *arg)
{
	return (((const struct check *)arg)->done);
}

/*
 * An Attach of uid @uid with the good file, begun now, is answered with a
 * session within BYSTANDER_MS, whatever the others' checks do.
 */
static void
good_attach_served(struct check *c, uid_t uid, const char *when)
{
	int	fd;

	ck_assert_int_ne(fd = open(good_path, O_RDONLY | O_CLOEXEC), -1);
	ck_assert_int_eq(begin(c, uid, fd), 1);
	close(fd);
	ck_assert_msg(unit_run_until(pred_done, c, SETTLE_MS), "uid %u's "
	    "Attach %s not answered in %d ms", (unsigned)uid, when,
	    SETTLE_MS);
	printf("uid %u's Attach with files %s: answered in %llu ms\n",
	    (unsigned)uid, when, (unsigned long long)c->ms);
	ck_assert_msg(c->session, "uid %u: %s", (unsigned)uid, c->cause);
	ck_assert_msg(c->ms < BYSTANDER_MS, "uid %u's Attach %s took %llu "
	    "ms", (unsigned)uid, when, (unsigned long long)c->ms);
}

/* Begin @n Attach requests of @uid on the FUSE file, from checks[@from]. */
static void
begin_stuck(unsigned from, unsigned n, uid_t uid)
{
	unsigned	i;

	for (i = from; i < from + n; i++)
		ck_assert_int_eq(begin(&checks[i], uid, fuse_fd), 1);
}

/* Whether checks[0] to checks[@n - 1] have all called back. */
static bool
pred_all_done(const void *arg)
{
	unsigned	n = *(const unsigned *)arg, i;

	for (i = 0; i < n; i++)
		if (!checks[i].done)
			return (false);
	return (true);
}

/*
 * Issue 39, item 6: one uid's checks stuck in a read, INFEED_MAX_ATTACH_
 * CHECKS of them running and INFEED_MAX_ATTACH_QUEUE waiting, refuse at
 * once that uid's next Attach (saying how many run and wait), and only
 * that uid's: another uid's is answered within BYSTANDER_MS.  Released,
 * every waiting check runs and calls back.
 */
START_TEST(one_uids_checks_hold_only_that_uid)
{
	struct check	*c = &more[0], *b = &more[1];
	unsigned	 n = INFEED_MAX_ATTACH_CHECKS + INFEED_MAX_ATTACH_QUEUE;
	char		 want[160];

	if (!fuse_file())
		return;
	begin_stuck(0, n, UID_A);
	unit_run_for(200);
	ck_assert_uint_eq(callbacks, 0);
	ck_assert_uint_eq(attach_check_pending(sc), n);
	ck_assert_int_eq(begin(c, UID_A, fuse_fd), -1);
	ck_assert_int_eq(c->code, ERRCODE_RESOURCE_EXHAUSTED);
	unit_fmt(want, sizeof(want), "checking %d other Attach requests' "
	    "files or groups of uid %d and %d more wait",
	    INFEED_MAX_ATTACH_CHECKS, UID_A, INFEED_MAX_ATTACH_QUEUE);
	ck_assert_msg(strstr(c->cause, want) != NULL, "%s", c->cause);
	good_attach_served(b, UID_B, "beside uid 1000's full queue");
	fuse_release(&fs);
	ck_assert_msg(unit_run_until(pred_all_done, &n, SETTLE_MS), "%u of "
	    "%u checks called back", callbacks - 1, n);
	ck_assert(unit_run_until(pred_none_pending, NULL, SETTLE_MS));
}
END_TEST

/*
 * Hung-up clients' checks (attach_check_cancel()) never call back: a
 * queued one goes at once with its descriptor, a running one is given up
 * and counts as stuck against its uid, holding its descriptor until its
 * thread returns.  INFEED_MAX_STUCK_CHECKS of them refuse that uid's next
 * Attach at once, naming it, while another uid is answered; once the
 * threads return, nothing is pending, every descriptor is closed, and the
 * uid attaches again.
 */
START_TEST(hung_up_clients_checks_count_as_stuck_until_they_return)
{
	struct check	*c = &more[0], *b = &more[1], *a2 = &more[2];
	unsigned	 run = INFEED_MAX_ATTACH_CHECKS, i;
	int		 fds;
	char		 want[160];

	if (!fuse_file())
		return;
	fds = count_fds(0, RING_MEMFD);
	begin_stuck(0, 2 * run, UID_A);		/* run, then as many queue */
	unit_run_for(200);			/* the threads are in the read */
	ck_assert_int_eq(count_fds(0, RING_MEMFD), fds + (int)(2 * run));
	for (i = run; i < 2 * run; i++)
		attach_check_cancel(checks[i].p);
	ck_assert_uint_eq(attach_check_pending(sc), run);
	ck_assert_int_eq(count_fds(0, RING_MEMFD), fds + (int)run);
	for (i = 0; i < run; i++)
		attach_check_cancel(checks[i].p);
	ck_assert_uint_eq(attach_check_pending(sc), run);	/* stuck */
	ck_assert_int_eq(count_fds(0, RING_MEMFD), fds + (int)run);
	/* Not yet too many stuck: the uid's checks still run. */
	begin_stuck(run, INFEED_MAX_STUCK_CHECKS - run, UID_A);
	unit_run_for(200);
	for (i = run; i < INFEED_MAX_STUCK_CHECKS; i++)
		attach_check_cancel(checks[i].p);
	ck_assert_uint_eq(attach_check_pending(sc), INFEED_MAX_STUCK_CHECKS);
	ck_assert_int_eq(begin(c, UID_A, fuse_fd), -1);
	ck_assert_int_eq(c->code, ERRCODE_RESOURCE_EXHAUSTED);
	unit_fmt(want, sizeof(want), "%d checks of files or groups for "
	    "Attach requests of uid %d were given up and have not returned",
	    INFEED_MAX_STUCK_CHECKS, UID_A);
	ck_assert_msg(strstr(c->cause, want) != NULL, "%s", c->cause);
	ck_assert_int_eq(count_fds(0, RING_MEMFD), fds + INFEED_MAX_STUCK_CHECKS);
	good_attach_served(b, UID_B, "beside uid 1000's stuck checks");
	fuse_release(&fs);
	ck_assert(unit_run_until(pred_none_pending, NULL, SETTLE_MS));
	ck_assert_int_eq(count_fds(0, RING_MEMFD), fds);
	ck_assert_uint_eq(callbacks, 1);	/* uid 1001's alone */
	good_attach_served(a2, UID_A, "once its threads returned");
}
END_TEST

/*
 * However many uids, at most INFEED_MAX_ATTACH_THREADS threads, running
 * and stuck together: with every one taken, another uid's check waits for
 * one to return (then is answered); with every one stuck, the next Attach
 * that needs one is refused at once.
 */
START_TEST(threads_bounded_across_uids)
{
	struct check	*w = &more[0], *r = &more[1];
	unsigned	 per = INFEED_MAX_ATTACH_CHECKS, uids, u, i;
	int		 fd;
	char		 want[160];

	if (!fuse_file())
		return;
	uids = INFEED_MAX_ATTACH_THREADS / per;
	for (u = 0; u < uids; u++)
		begin_stuck(u * per, per, 2000 + u);
	unit_run_for(300);
	/* All but the last uid's hang up: stuck, the last uid's running. */
	for (i = 0; i < (uids - 1) * per; i++)
		attach_check_cancel(checks[i].p);
	ck_assert_uint_eq(attach_check_pending(sc), INFEED_MAX_ATTACH_THREADS);
	ck_assert_int_ne(fd = open(good_path, O_RDONLY | O_CLOEXEC), -1);
	ck_assert_int_eq(begin(w, UID_B, fd), 1);
	unit_run_for(300);
	ck_assert_msg(!w->done, "a check started beyond %d threads",
	    INFEED_MAX_ATTACH_THREADS);
	for (; i < uids * per; i++)
		attach_check_cancel(checks[i].p);
	ck_assert_int_eq(begin(r, 3000, fd), -1);
	ck_assert_int_eq(r->code, ERRCODE_RESOURCE_EXHAUSTED);
	unit_fmt(want, sizeof(want), "%d checks of clients' files or groups "
	    "were given up", INFEED_MAX_ATTACH_THREADS);
	ck_assert_msg(strstr(r->cause, want) != NULL, "%s", r->cause);
	close(fd);
	ck_assert(!w->done);
	fuse_release(&fs);
	ck_assert(unit_run_until(pred_done, w, SETTLE_MS));
	ck_assert_msg(w->session, "%s", w->cause);
	ck_assert(unit_run_until(pred_none_pending, NULL, SETTLE_MS));
}
END_TEST

/*
 * A check not done in INFEED_ATTACH_CHECK_S is given up: a running one's
 * Attach gets ERROR_DATA naming the file that did not answer, and its
 * thread counts as stuck (pending) until it returns; one that never got a
 * thread (every one taken: the others' given up, uid 1000's in the read)
 * gets RESOURCE_EXHAUSTED saying how busy infeedd is.  Both at the
 * deadline, not before.
 */
START_TEST(checks_past_the_deadline_are_given_up)
{
	struct check	*b = &more[0];
	unsigned	 per = INFEED_MAX_ATTACH_CHECKS, uids, i;
	uint64_t	 s = INFEED_ATTACH_CHECK_S * 1000;
	char		 late[80], busy[240];
	int		 fd;

	if (!fuse_file())
		return;
	uids = INFEED_MAX_ATTACH_THREADS / per;
	for (i = 0; i < uids - 1; i++)
		begin_stuck(i * per, per, 2000 + i);
	for (i = 0; i < (uids - 1) * per; i++)
		attach_check_cancel(checks[i].p);
	memset(checks, 0, sizeof(checks));
	begin_stuck(0, per, UID_A);
	ck_assert_int_ne(fd = open(good_path, O_RDONLY | O_CLOEXEC), -1);
	ck_assert_int_eq(begin(b, UID_B, fd), 1);
	close(fd);
	ck_assert(unit_run_until(pred_done, b, s + SETTLE_MS));
	ck_assert(unit_run_until(pred_all_done, &per, SETTLE_MS));
	unit_fmt(late, sizeof(late), "the data file did not answer in %d s",
	    INFEED_ATTACH_CHECK_S);
	for (i = 0; i < per; i++) {
		printf("uid 1000's check %u: %llu ms: %s\n", i,
		    (unsigned long long)checks[i].ms, checks[i].cause);
		ck_assert_int_eq(checks[i].code, ERRCODE_DATA);
		ck_assert_msg(strstr(checks[i].cause, late) != NULL, "%s",
		    checks[i].cause);
		ck_assert_msg(checks[i].ms >= s - 100 && checks[i].ms < s +
		    3000, "check %u answered after %llu ms", i,
		    (unsigned long long)checks[i].ms);
	}
	printf("uid 1001's check: %llu ms: %s\n", (unsigned long long)b->ms,
	    b->cause);
	ck_assert(!b->session);
	ck_assert_int_eq(b->code, ERRCODE_RESOURCE_EXHAUSTED);
	unit_fmt(busy, sizeof(busy), "busy checking other Attach requests "
	    "(of uid %d: 0 running, 0 waiting, 0 that never returned; of all "
	    "users: %d threads of at most %d) and did not get to this one in "
	    "%d s", UID_B, INFEED_MAX_ATTACH_THREADS, INFEED_MAX_ATTACH_THREADS,
	    INFEED_ATTACH_CHECK_S);
	ck_assert_msg(strstr(b->cause, busy) != NULL, "%s", b->cause);
	ck_assert_msg(b->ms >= s - 100 && b->ms < s + 3000, "answered after "
	    "%llu ms", (unsigned long long)b->ms);
	ck_assert_uint_eq(attach_check_pending(sc), INFEED_MAX_ATTACH_THREADS);
}
END_TEST

static Suite *
attach_check_suite(void)
{
	Suite	*s = suite_create("attach-check");
	TCase	*tc;

	tc = tcase_create("accounting");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, one_uids_checks_hold_only_that_uid);
	tcase_add_test(tc,
	    hung_up_clients_checks_count_as_stuck_until_they_return);
	tcase_add_test(tc, threads_bounded_across_uids);
	suite_add_tcase(s, tc);

	tc = tcase_create("deadline");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, checks_past_the_deadline_are_given_up);
	suite_add_tcase(s, tc);

	return (s);
}

/* Run every test in a directory of its own, then remove it. */
int
main(void)
{
	log_init("test-attach-check", getenv("TEST_VERBOSE") != NULL ? 1 :
	    -1);
	return (run_suite_in_dir(attach_check_suite(), "test-attach-check",
	    rundir, sizeof(rundir)));
}
