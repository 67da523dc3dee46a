/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/forker.c, the fork server, driven as the pool
 * drives it: a worker asked for comes back as its pid and a socket on
 * which it says READY, is the fork server's child (not ours), and its
 * death is reported with how it ended; after a reload of the catalogue
 * (its sections sent), workers still come; a message that is not a whole
 * one of its type ends the fork server rather than being misread; forker_stop() ends the fork server
 * and the workers it left; the fork server killed, forker_recv() says it
 * is gone, and its workers serve on as the daemon's children when the
 * daemon is a child subreaper (infeedd is), or exit when it is not.
 */

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "catalogue.h"
#include "config.h"
#include "forker.h"
#include "log.h"
#include "runner.h"

#define DEADLINE_MS	10000

static char			 rundir[PATH_MAX - 64];
static char			 conf_path[PATH_MAX];
static struct config		*conf;
static struct catalogue		*cat;
static struct worker_beat	*beats;
static struct forker		*forker;

/* A catalogue of one synthetic dataset, beats, and a fork server. */
static void
setup(void)
{
	static const char	 text[] = "[infeedd]\nworkers = 2\n"
	    "[dataset small]\ntype = synthetic\nsamples = 12\nshape = 2\n"
	    "dtype = uint8\n";
	char			*cause = NULL;
	FILE			*fp;

	snprintf(conf_path, sizeof(conf_path), "%s/infeedd.conf", rundir);
	ck_assert_ptr_nonnull(fp = fopen(conf_path, "w"));
	ck_assert_uint_eq(fwrite(text, 1, sizeof(text) - 1, fp),
	    sizeof(text) - 1);
	fclose(fp);
	conf = config_load(conf_path, &cause);
	ck_assert_msg(conf != NULL, "%s", cause);
	cat = catalogue_open(conf, NULL, UINT64_MAX);
	ck_assert_uint_eq(cat->ndatasets, 1);
	beats = mmap(NULL, 2 * sizeof(*beats), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(beats, MAP_FAILED);
	forker = forker_start(NULL, cat, beats, NULL, NULL);
}

static void
teardown(void)
{
	forker_stop(forker);
	forker = NULL;
	munmap(beats, 2 * sizeof(*beats));
	catalogue_free(cat);
	config_free(conf);
}

/* The fork server's next message, waiting for it. */
static void
next_msg(union forker_reply *m, int *fd)
{
	ck_assert_msg(forker_wait(forker, DEADLINE_MS), "the fork server "
	    "said nothing in %d ms", DEADLINE_MS);
	ck_assert_int_eq(forker_recv(forker, m, fd), 1);
}

/* Worker @idx, its pid, and its socket in *@fd once it said READY. */
static pid_t
spawn(unsigned idx, int *fd)
{
	union forker_reply	m;
	struct worker_msg_ready	w;

	ck_assert_int_eq(forker_spawn(forker, idx, 64 << 20), 0);
	next_msg(&m, fd);
	ck_assert_int_eq(m.hdr.type, FORKER_MSG_SPAWNED);
	ck_assert_uint_eq(m.spawned.idx, idx);
	ck_assert_int_gt(m.spawned.pid, 0);
	ck_assert_int_ne(*fd, -1);
	ck_assert_int_eq(recv(*fd, &w, sizeof(w), 0), (ssize_t)sizeof(w));
	ck_assert_int_eq(w.hdr.type, WORKER_MSG_READY);
	return ((pid_t)m.spawned.pid);
}

/* Process @pid's state letter and parent; '-' and -1 when it is gone. */
static char
state_of(pid_t pid, int *ppid)
{
	char	 path[64], buf[512], *p, st = '-';
	FILE	*fp;

	*ppid = -1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return ('-');
	if (fgets(buf, sizeof(buf), fp) == NULL ||
	    (p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%c %d", &st, ppid) != 2)
		st = '-';
	fclose(fp);
	return (st);
}

/* The parent of process @pid, or -1. */
static int
parent_of(pid_t pid)
{
	int	ppid;

	(void)state_of(pid, &ppid);
	return (ppid);
}

/* Whether process @pid is gone (or dead, not reaped) within the deadline. */
static bool
gone(pid_t pid)
{
	uint64_t	deadline = now_ms() + DEADLINE_MS;
	char		st;
	int		ppid;

	while (now_ms() < deadline) {
		if ((st = state_of(pid, &ppid)) == '-' || st == 'Z' ||
		    st == 'X')
			return (true);
		usleep(10000);
	}
	return (false);
}

/*
 * A worker comes with its socket, is the fork server's child, and its
 * death is reported with its pid and how it ended.
 */
START_TEST(test_spawned_worker_and_its_death_reported)
{
	union forker_reply	m;
	pid_t			pid;
	int			fd, extra;

	pid = spawn(1, &fd);
	ck_assert_int_eq(parent_of(pid), forker_pid(forker));
	ck_assert_int_ne(forker_pid(forker), getpid());
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	next_msg(&m, &extra);
	ck_assert_int_eq(extra, -1);
	ck_assert_int_eq(m.hdr.type, FORKER_MSG_EXITED);
	ck_assert_int_eq(m.exited.pid, pid);
	ck_assert_uint_eq(m.exited.idx, 1);
	ck_assert(WIFSIGNALED(m.exited.status) &&
	    WTERMSIG(m.exited.status) == SIGKILL);
	close(fd);
}
END_TEST

/* A worker whose socket the daemon closes exits 0, and that is said. */
START_TEST(test_worker_that_loses_its_socket_exits_cleanly)
{
	union forker_reply	m;
	pid_t			pid;
	int			fd, extra;

	pid = spawn(0, &fd);
	close(fd);
	next_msg(&m, &extra);
	ck_assert_int_eq(m.hdr.type, FORKER_MSG_EXITED);
	ck_assert_int_eq(m.exited.pid, pid);
	ck_assert(WIFEXITED(m.exited.status) &&
	    WEXITSTATUS(m.exited.status) == 0);
}
END_TEST

/* After a reload of the configuration, workers still come. */
START_TEST(test_workers_come_after_a_reload)
{
	pid_t	pid;
	int	fd;

	ck_assert_int_eq(forker_reload(forker, cat), 0);
	pid = spawn(0, &fd);
	ck_assert_int_eq(parent_of(pid), forker_pid(forker));
	close(fd);
}
END_TEST

/*
 * A DATASET whose strings are fewer than its count of keys says is no
 * message: the fork server goes (EOF), having opened nothing from it.
 */
START_TEST(test_malformed_dataset_ends_the_fork_server)
{
	struct {
		struct forker_msg_dataset	m;
		char				strings[8];
	} bad;
	union forker_reply	m;
	int			extra, rc;

	memset(&bad, 0, sizeof(bad));
	bad.m.hdr.type = FORKER_MSG_DATASET;
	bad.m.hdr.len = sizeof(bad);
	bad.m.nkv = 1;			/* a key and a value that never come */
	memcpy(bad.strings, "raw\0src", 8);
	ck_assert_int_eq(send(forker_fd(forker), &bad, sizeof(bad), 0),
	    (ssize_t)sizeof(bad));
	ck_assert(forker_wait(forker, DEADLINE_MS));
	while ((rc = forker_recv(forker, &m, &extra)) == 1)
		;
	ck_assert_int_eq(rc, -1);
}
END_TEST

/* forker_stop() ends the fork server and the workers it still had. */
START_TEST(test_stop_ends_the_fork_server_and_its_workers)
{
	pid_t	pid, fs = forker_pid(forker);
	int	fd;

	pid = spawn(0, &fd);
	forker_stop(forker);	/* the worker holds on: it has its socket */
	forker = NULL;
	ck_assert(gone(pid));
	ck_assert_int_eq(kill(fs, 0), -1);	/* reaped by forker_stop() */
	ck_assert_int_eq(errno, ESRCH);
	close(fd);
}
END_TEST

/*
 * The fork server killed: it is gone for forker_recv().  Its worker,
 * whose daemon (this process) is no child subreaper, is nobody's child
 * of ours then, and exits though its socket is still open: a worker
 * never outlives its daemon.
 */
START_TEST(test_killed_fork_server_is_seen_and_orphans_exit)
{
	union forker_reply	m;
	pid_t			pid;
	int			fd, extra, rc;

	pid = spawn(0, &fd);
	ck_assert_int_eq(kill(forker_pid(forker), SIGKILL), 0);
	ck_assert(forker_wait(forker, DEADLINE_MS));
	while ((rc = forker_recv(forker, &m, &extra)) == 1)
		;
	ck_assert_int_eq(rc, -1);
	ck_assert(gone(pid));
	close(fd);
}
END_TEST

/*
 * The fork server killed under a daemon that is a child subreaper, as
 * infeedd is: its worker serves on, the daemon's child now, until its
 * socket closes.
 */
START_TEST(test_worker_outlives_its_fork_server_with_the_daemon)
{
	union forker_reply	m;
	pid_t			pid;
	int			fd, extra, rc, status;

	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	pid = spawn(0, &fd);
	ck_assert_int_eq(kill(forker_pid(forker), SIGKILL), 0);
	ck_assert(forker_wait(forker, DEADLINE_MS));
	while ((rc = forker_recv(forker, &m, &extra)) == 1)
		;
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(waitpid(forker_pid(forker), NULL, 0),
	    forker_pid(forker));
	forker_free(forker);
	forker = NULL;
	usleep(200000);		/* its parent-death signal came and went */
	ck_assert_int_eq(parent_of(pid), getpid());
	ck_assert_int_eq(waitpid(pid, &status, WNOHANG), 0);
	close(fd);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

static Suite *
forker_suite(void)
{
	Suite	*s = suite_create("forker");
	TCase	*tc = tcase_create("forker");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_spawned_worker_and_its_death_reported);
	tcase_add_test(tc, test_worker_that_loses_its_socket_exits_cleanly);
	tcase_add_test(tc, test_workers_come_after_a_reload);
	tcase_add_test(tc, test_malformed_dataset_ends_the_fork_server);
	tcase_add_test(tc, test_stop_ends_the_fork_server_and_its_workers);
	tcase_add_test(tc, test_killed_fork_server_is_seen_and_orphans_exit);
	tcase_add_test(tc, test_worker_outlives_its_fork_server_with_the_daemon);
	suite_add_tcase(s, tc);
	return (s);
}


int
main(void)
{
	log_init("test-forker", getenv("TEST_VERBOSE") != NULL ? 1 : -1);
	return (run_suite_in_dir(forker_suite(), "test-forker", rundir,
	    sizeof(rundir)));
}
