/* SPDX-License-Identifier: MIT */
/*
 * The fork server killed, stopped, or dying over and over, against the
 * real infeedd on a private socket while a trainer runs (issue 39, item
 * 1): the daemon stays up, the trainer gets its steps with no gap of more
 * than 2 s, a bystander's round trip stays under 250 ms (where it shares
 * the only worker, its steps within the trainer's 2 s), a new fork server
 * (holding no client's socket or ring) replaces the dead one and replaces
 * the workers that die from then on; the log and the Stats say so.
 *
 * $INFEEDD names the daemon binary (meson sets it).
 */

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"

#define GAP_MAX_MS	2000	/* the longest a trainer may wait for a step */
#define WAIT_MS		10000	/* for what the daemon does at once */

/* Whether process @pid is named @name (its comm) and not a zombie. */
static bool
is_named(pid_t pid, const char *name)
{
	char	 path[64], buf[512], *p;
	FILE	*fp;
	bool	 yes = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return (false);
	if (fgets(buf, sizeof(buf), fp) != NULL &&
	    (p = strrchr(buf, ')')) != NULL && p[2] != 'Z') {
		*p = '\0';
		yes = (p = strchr(buf, '(')) != NULL &&
		    strcmp(p + 1, name) == 0;
	}
	fclose(fp);
	return (yes);
}

/*
 * infeedd's processes named @name, at most @max: its children, and its
 * children's children (the workers of its fork server).
 */
static int
daemon_procs(const char *name, pid_t *out, int max)
{
	DIR		*d;
	struct dirent	*de;
	pid_t		 pid, ppid;
	int		 n = 0;

	ck_assert_ptr_nonnull(d = opendir("/proc"));
	while ((de = readdir(d)) != NULL && n < max) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (!is_named(pid, name) || (ppid = parent_of(pid)) <= 0)
			continue;
		if (ppid == infeedd_pid || parent_of(ppid) == infeedd_pid)
			out[n++] = pid;
	}
	closedir(d);
	return (n);
}

/* The Stats' fork server: its pid, and how often it was started again. */
static void
stats_fork_server(pid_t *pid, unsigned *restarts)
{
	Infeed__Frame	*r = raw_stats();

	ck_assert(r->stats->has_fork_server_pid);
	ck_assert(r->stats->has_fork_server_restarts);
	*pid = r->stats->fork_server_pid;
	*restarts = r->stats->fork_server_restarts;
	infeed__frame__free_unpacked(r, NULL);
}

/*
 * The fork server now, as infeedd's Stats name it (not by its name: a
 * worker carries its fork server's name until it renames itself, later
 * under valgrind), while it is infeedd's child; -1 when none is.
 */
static pid_t
fork_server(void)
{
	pid_t		pid;
	unsigned	restarts;

	stats_fork_server(&pid, &restarts);
	return (pid > 0 && parent_of(pid) == infeedd_pid ? pid : -1);
}

/* Wait up to @ms for a fork server other than @old; it, or -1. */
static pid_t
new_fork_server(pid_t old, unsigned ms)
{
	uint64_t	deadline = now_ms() + ms;
	pid_t		pid;

	do {
		if ((pid = fork_server()) != -1 && pid != old)
			return (pid);
		usleep(10000);
	} while (now_ms() < deadline);
	return (-1);
}

/*
 * Wait up to WAIT_MS for @n workers that have named themselves (under
 * valgrind one starts well after infeedd counts it); how many, in @w.
 */
static int
workers_named(pid_t *w, int n)
{
	uint64_t	deadline = now_ms() + WAIT_MS;
	int		m;

	while ((m = daemon_procs("infeedd-worker", w, 8)) != n &&
	    now_ms() < deadline)
		usleep(10000);
	return (m);
}

/* A trainer in a child process, taking steps until told to stop. */
struct trainer {
	pid_t	pid;
	int	stop_fd;	/* closed to stop it */
	int	report_fd;	/* its figures come back on it */
};
struct trainer_report {
	uint64_t	steps;
	uint64_t	worst_gap_ms;	/* the longest infeed_next() */
	int		failed;		/* 1: a call failed (see stderr) */
};

/* Start a trainer on "raw", a step every 5 ms. */
static void
trainer_start(struct trainer *t)
{
	struct trainer_report	 r = { 0, 0, 0 };
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	struct pollfd		 pfd;
	uint64_t		 t0, gap;
	int			 stop[2], rep[2];

	ck_assert_int_eq(pipe2(stop, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(rep, O_CLOEXEC), 0);
	ck_assert_int_ne(t->pid = fork(), -1);
	if (t->pid != 0) {
		close(stop[0]);
		close(rep[1]);
		t->stop_fd = stop[1];
		t->report_fd = rep[0];
		return;
	}
	close(stop[1]);
	close(rep[0]);
	f = infeed_new();
	infeed_options_init(&o);
	o.batch_size = 8;
	o.buffer_size = 2;
	o.reconnect_timeout_ms = 0;	/* a daemon that went fails it */
	if (infeed_connect(f, sock_path, "trainer") != INFEED_OK ||
	    infeed_attach(f, "raw", &o, NULL) != INFEED_OK) {
		fprintf(stderr, "trainer: %s\n", infeed_error(f));
		r.failed = 1;
	}
	pfd.fd = stop[0];
	pfd.events = POLLIN;
	while (!r.failed && poll(&pfd, 1, 5) == 0) {
		t0 = now_ms();
		if (infeed_next(f, &st) != INFEED_OK) {
			fprintf(stderr, "trainer: step %llu: %s\n",
			    (unsigned long long)r.steps, infeed_error(f));
			r.failed = 1;
			break;
		}
		gap = now_ms() - t0;
		if (r.steps > 0 && gap > r.worst_gap_ms)
			r.worst_gap_ms = gap;
		r.steps++;
		infeed_release(f, &st);
	}
	infeed_free(f);
	if (write(rep[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(1);
	_exit(0);
}

/* Stop the trainer, print its figures and assert them. */
static void
trainer_stop(struct trainer *t, const char *test)
{
	struct trainer_report	r;

	close(t->stop_fd);
	ck_assert_int_eq(read(t->report_fd, &r, sizeof(r)), sizeof(r));
	close(t->report_fd);
	ck_assert_int_eq(waitpid(t->pid, NULL, 0), t->pid);
	printf("%s: trainer: %llu steps, longest wait for one %llu ms\n",
	    test, (unsigned long long)r.steps,
	    (unsigned long long)r.worst_gap_ms);
	ck_assert_msg(!r.failed, "the trainer failed; see its stderr and "
	    "%s/infeedd.log", dir);
	ck_assert_uint_gt(r.steps, 10);
	ck_assert_msg(r.worst_gap_ms < GAP_MAX_MS, "the trainer waited %llu "
	    "ms for a step", (unsigned long long)r.worst_gap_ms);
}

/* Whether infeedd still runs. */
static bool
daemon_up(void)
{
	return (waitpid(infeedd_pid, NULL, WNOHANG) == 0);
}

/*
 * Kill one of infeedd's workers and wait for its replacement, a child of
 * fork server @forker; a trainer then takes steps.
 */
static void
worker_replaced_by(pid_t forker)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	uint64_t		 deadline;
	pid_t			 w[8], now[8], fresh = -1;
	int			 n, m, i, j;

	n = workers_named(w, 2);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	deadline = now_ms() + WAIT_MS;
	while (fresh == -1 && now_ms() < deadline) {
		usleep(10000);
		m = daemon_procs("infeedd-worker", now, 8);
		for (i = 0; i < m; i++) {
			for (j = 0; j < n && now[i] != w[j]; j++)
				;
			if (j == n)
				fresh = now[i];
		}
	}
	ck_assert_msg(fresh != -1, "worker %d was not replaced within %d ms",
	    (int)w[0], WAIT_MS);
	ck_assert_int_eq(parent_of(fresh), forker);
	f = client();
	infeed_options_init(&o);
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		infeed_release(f, &st);
	}
	infeed_free(f);
}

/*
 * kill -9 of the fork server while a trainer runs: the trainer never
 * waits 2 s for a step, a bystander is served within 250 ms, infeedd
 * stays up and says so, and a new fork server, holding no more sockets
 * than the first one and no ring, replaces the workers that die after.
 */
START_TEST(test_killed_fork_server_is_replaced)
{
	struct bystander	 b;
	struct bystander_report	 br;
	struct trainer		 t;
	char			 log[65536], want[160];
	pid_t			 old, fresh, spid;
	unsigned		 restarts;
	int			 sockets, rings, first_sockets;

	ck_assert_int_ne(old = fork_server(), -1);
	holds(old, &first_sockets, &rings);
	stats_fork_server(&spid, &restarts);
	ck_assert_int_eq(spid, old);
	ck_assert_uint_eq(restarts, 0);
	bystander_start(&b);
	trainer_start(&t);
	usleep(500000);
	ck_assert_int_eq(kill(old, SIGKILL), 0);
	fresh = new_fork_server(old, WAIT_MS);
	ck_assert_msg(fresh != -1, "no new fork server within %d ms",
	    WAIT_MS);
	usleep(1500000);
	trainer_stop(&t, __func__);
	bystander_stop(&b, &br);
	bystander_assert(&br, 250);
	ck_assert_msg(daemon_up(), "infeedd died with its fork server");
	/* It inherited nothing of a client's, though two were attached. */
	holds(fresh, &sockets, &rings);
	ck_assert_int_eq(sockets, first_sockets);
	ck_assert_int_eq(rings, 0);
	read_log(log, sizeof(log));
	snprintf(want, sizeof(want), "the fork server (pid %d) was killed by "
	    "signal 9 (KILL); a new one", (int)old);
	ck_assert_msg(strstr(log, want) != NULL, "%s", log);
	stats_fork_server(&spid, &restarts);
	ck_assert_int_eq(spid, fresh);
	ck_assert_uint_eq(restarts, 1);
	infeedctl_run("status", log, sizeof(log));
	snprintf(want, sizeof(want), "\nfork server: pid %d, started again 1 "
	    "times\n", (int)fresh);
	ck_assert_msg(strstr(log, want) != NULL, "%s", log);
	worker_replaced_by(fresh);
	worker_replaced_by(fresh);	/* the other first worker */
}
END_TEST

/*
 * SIGSTOP of the fork server for a second under a trainer, then SIGCONT:
 * nothing the trainer or a bystander sees; the same fork server then
 * replaces a worker.
 */
START_TEST(test_stopped_fork_server_hurts_nothing)
{
	struct bystander	 b;
	struct bystander_report	 br;
	struct trainer		 t;
	pid_t			 forker;

	ck_assert_int_ne(forker = fork_server(), -1);
	bystander_start(&b);
	trainer_start(&t);
	usleep(300000);
	ck_assert_int_eq(kill(forker, SIGSTOP), 0);
	usleep(1000000);
	ck_assert_int_eq(kill(forker, SIGCONT), 0);
	usleep(300000);
	trainer_stop(&t, __func__);
	bystander_stop(&b, &br);
	bystander_assert(&br, 250);
	ck_assert(daemon_up());
	ck_assert_int_eq(fork_server(), forker);
	worker_replaced_by(forker);
}
END_TEST

/*
 * A worker killed (the only one) while the fork server is stopped: the
 * stopped fork server, which cannot report its end nor fork its
 * replacement, is killed and replaced, so the trainer waits less than
 * 2 s, and a bystander is served: its ListDatasets (the loop) at once,
 * its steps, which the same one worker makes, within the trainer's bound
 * (it waits out the replacement less what its ring holds: 145-170 ms in
 * quiet runs, so 250 ms failed a loaded run of the ASan build).
 */
START_TEST(test_stopped_fork_server_replaced_when_a_worker_waits)
{
	struct bystander	 b;
	struct bystander_report	 br;
	struct trainer		 t;
	char			 log[65536], want[160];
	pid_t			 forker, fresh, w[8];
	uint64_t		 deadline;

	infeedd_stop();
	infeedd_start("1");
	ck_assert_int_ne(forker = fork_server(), -1);
	ck_assert_int_eq(workers_named(w, 1), 1);
	bystander_start(&b);
	trainer_start(&t);
	usleep(300000);
	ck_assert_int_eq(kill(forker, SIGSTOP), 0);
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	fresh = new_fork_server(forker, WAIT_MS);
	ck_assert_msg(fresh != -1, "no new fork server within %d ms",
	    WAIT_MS);
	deadline = now_ms() + WAIT_MS;
	while ((daemon_procs("infeedd-worker", w, 4) != 1 ||
	    parent_of(w[0]) != fresh) && now_ms() < deadline)
		usleep(10000);
	usleep(500000);
	trainer_stop(&t, __func__);
	bystander_stop(&b, &br);
	bystander_assert(&br, GAP_MAX_MS);
	ck_assert_msg(br.worst_list_ms < 250, "a bystander's ListDatasets "
	    "took %llu ms", (unsigned long long)br.worst_list_ms);
	ck_assert(daemon_up());
	ck_assert_int_eq(parent_of(w[0]), fresh);
	read_log(log, sizeof(log));
	snprintf(want, sizeof(want), "the fork server (pid %d) is stopped "
	    "and worker 0's replacement waits for it", (int)forker);
	ck_assert_msg(strstr(log, want) != NULL, "%s", log);
}
END_TEST

/*
 * infeedd stopped while its fork server is stopped (SIGSTOP), so that it
 * never reads its closed socket (as one in the middle of a reload's
 * catalogue open does not): infeedd kills it a second after the workers'
 * FORKER_STOP_MS and exits with status 0, where it waited for ever.
 */
START_TEST(test_stop_with_a_stopped_fork_server_ends)
{
	char		 log[65536];
	pid_t		 forker, pid;
	uint64_t	 t0, ms;
	int		 status = -1;

	ck_assert_int_ne(forker = fork_server(), -1);
	ck_assert_int_eq(kill(forker, SIGSTOP), 0);
	t0 = now_ms();
	ck_assert_int_eq(kill(infeedd_pid, SIGTERM), 0);
	while ((pid = waitpid(infeedd_pid, &status, WNOHANG)) == 0 &&
	    now_ms() - t0 < 3 * WAIT_MS / 2)
		usleep(10000);
	ms = now_ms() - t0;
	if (pid == 0) {		/* hung: clean up, then fail */
		kill(forker, SIGKILL);
		kill(infeedd_pid, SIGKILL);
		waitpid(infeedd_pid, &status, 0);
	}
	infeedd_pid = -1;
	printf("forker-death: infeedd stopped with its fork server stopped: "
	    "%s in %llu ms\n", pid == 0 ? "still there" : "exited",
	    (unsigned long long)ms);
	ck_assert_msg(pid != 0, "infeedd did not exit within %d ms of SIGTERM "
	    "with its fork server stopped", 3 * WAIT_MS / 2);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "infeedd's exit status: %#x", status);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "did not go within") != NULL, "%s", log);
}
END_TEST

/*
 * A new fork server reads the configuration infeedd last loaded: after a
 * reload that adds a dataset, the fork server killed, and both workers
 * replaced by the new one, a trainer reads the new dataset (a worker
 * whose catalogue lacked it would fail its jobs).
 */
START_TEST(test_new_fork_server_reads_the_reloaded_catalogue)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	char			 log[65536];
	uint64_t		 deadline;
	pid_t			 old, fresh;
	int			 i;

	make_config("[dataset late]\ntype = synthetic\nsamples = 64\n"
	    "shape = 8\ndtype = uint8\n");
	ck_assert_int_eq(kill(infeedd_pid, SIGHUP), 0);
	deadline = now_ms() + WAIT_MS;
	do {
		usleep(10000);
		read_log(log, sizeof(log));
	} while (strstr(log, "reloaded:") == NULL && now_ms() < deadline);
	ck_assert_msg(strstr(log, "reloaded:") != NULL, "%s", log);
	ck_assert_int_ne(old = fork_server(), -1);
	ck_assert_int_eq(kill(old, SIGKILL), 0);
	ck_assert_int_ne(fresh = new_fork_server(old, WAIT_MS), -1);
	worker_replaced_by(fresh);
	worker_replaced_by(fresh);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 4;
	ck_assert_int_eq(infeed_attach(f, "late", &o, NULL), INFEED_OK);
	for (i = 0; i < 20; i++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		infeed_release(f, &st);
	}
	infeed_free(f);
}
END_TEST

/*
 * The configuration edited without a reload ("raw" another dataset in
 * the file now): a new fork server forks workers from infeedd's
 * catalogue, which infeedd sends it, not from the file, so its workers
 * read "raw" as infeedd serves it (a worker that opened the file's "raw"
 * would fail every job of infeedd's).
 */
START_TEST(test_new_fork_server_has_the_daemons_catalogue_not_the_files)
{
	static const char	 edited[] = "[dataset raw]\ntype = synthetic\n"
	    "samples = 7\nshape = 1\ndtype = uint8\n";
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	uint64_t		 deadline;
	pid_t			 old, fresh, w[8];
	int			 i, n;

	write_file(conf_path, edited, sizeof(edited) - 1);
	ck_assert_int_ne(old = fork_server(), -1);
	ck_assert_int_eq(kill(old, SIGKILL), 0);
	ck_assert_int_ne(fresh = new_fork_server(old, WAIT_MS), -1);
	/* Both workers the new fork server's. */
	n = workers_named(w, 2);
	ck_assert_int_eq(n, 2);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(kill(w[i], SIGKILL), 0);
	deadline = now_ms() + WAIT_MS;
	while ((daemon_procs("infeedd-worker", w, 8) != 2 ||
	    parent_of(w[0]) != fresh || parent_of(w[1]) != fresh) &&
	    now_ms() < deadline)
		usleep(10000);
	ck_assert_int_eq(daemon_procs("infeedd-worker", w, 8), 2);
	ck_assert_int_eq(parent_of(w[0]), fresh);
	ck_assert_int_eq(parent_of(w[1]), fresh);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 4;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	for (i = 0; i < 20; i++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "step %d: %s",
		    i, infeed_error(f));
		infeed_release(f, &st);
	}
	infeed_free(f);
}
END_TEST

/*
 * A fork server that dies as soon as it starts, over and over (killed
 * here the moment it shows): infeedd starts it again with a backoff (not
 * hundreds of times a second), serves on with the workers it has, and a
 * worker that dies meanwhile is replaced once a fork server lives again.
 */
START_TEST(test_fork_server_dying_over_and_over_is_backed_off)
{
	struct trainer	 t;
	char		 log[65536], *p;
	uint64_t	 start, deadline;
	pid_t		 old, last, pid, fresh, w[8];
	unsigned	 tries = 0;
	bool		 worker_killed = false;

	ck_assert_int_ne(old = fork_server(), -1);
	trainer_start(&t);
	usleep(200000);
	ck_assert_int_eq(kill(old, SIGKILL), 0);
	last = old;
	start = now_ms();
	while (now_ms() < start + 3000) {
		if ((pid = fork_server()) != -1 && pid != last) {
			ck_assert_int_eq(kill(pid, SIGKILL), 0);
			last = pid;
		}
		/* A worker dies while no fork server lives to start one. */
		if (!worker_killed && now_ms() >= start + 200) {
			ck_assert_int_eq(daemon_procs("infeedd-worker", w, 8),
			    2);
			ck_assert_int_eq(kill(w[0], SIGKILL), 0);
			worker_killed = true;
		}
		usleep(1000);
	}
	read_log(log, sizeof(log));
	for (p = log; (p = strstr(p, "fork server started again")) != NULL;
	    p++)
		tries++;
	printf("%s: %u fork servers started in 3 s\n", __func__, tries);
	ck_assert_uint_ge(tries, 3);
	ck_assert_uint_le(tries, 15);
	ck_assert(daemon_up());
	fresh = new_fork_server(last, WAIT_MS);
	ck_assert_int_ne(fresh, -1);
	/*
	 * The dead worker replaced: by the fork server that lives, or by
	 * one killed after it forked it (then infeedd's child).
	 */
	deadline = now_ms() + WAIT_MS;
	while (daemon_procs("infeedd-worker", w, 8) != 2 &&
	    now_ms() < deadline)
		usleep(10000);
	ck_assert_int_eq(daemon_procs("infeedd-worker", w, 8), 2);
	trainer_stop(&t, __func__);
}
END_TEST

static Suite *
forker_death_suite(void)
{
	Suite	*s = suite_create("forker-death");
	TCase	*tc = tcase_create("daemon");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_killed_fork_server_is_replaced);
	tcase_add_test(tc, test_stopped_fork_server_hurts_nothing);
	tcase_add_test(tc, test_stopped_fork_server_replaced_when_a_worker_waits);
	tcase_add_test(tc, test_stop_with_a_stopped_fork_server_ends);
	tcase_add_test(tc, test_new_fork_server_reads_the_reloaded_catalogue);
	tcase_add_test(tc,
	    test_new_fork_server_has_the_daemons_catalogue_not_the_files);
	tcase_add_test(tc, test_fork_server_dying_over_and_over_is_backed_off);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(forker_death_suite()));
}
