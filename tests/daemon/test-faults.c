/* SPDX-License-Identifier: MIT */
/*
 * Faults from outside the daemon's control, against the real infeedd on a
 * private socket: workers killed by an operator or the OOM killer, workers
 * stopped (SIGSTOP, or stuck in I/O), shutdown with a stuck worker, and
 * clients that flood requests without reading, forge log lines or fill
 * the log.  None of them may cost a trainer its session, blame healthy
 * data, freeze the daemon or grow it without bound (issue 14).
 *
 * $INFEEDD names the daemon binary (meson sets it).
 */

#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "image-bombs.h"
#include "infeed.h"
#include "remote-shards.h"
#include "sampler.h"

/* A synthetic set whose rows (64 MiB) take a worker tens of ms each. */
#define BIG_SECTION \
	"[dataset big]\n" \
	"type = synthetic\n" \
	"samples = 64\n" \
	"shape = 16,1024,1024\n" \
	"dtype = float32\n" \
	"classes = 10\n"

/* Restart the daemon with @extra in its configuration and @workers. */
static void
restart(const char *extra, const char *workers)
{
	infeedd_stop();
	make_config(extra);
	infeedd_start(workers);
}

/* In a child: take @steps steps of @dataset; exit 0 only if all came. */
static pid_t
trainer(const char *dataset, unsigned steps, unsigned buffer_size)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	unsigned		 i;
	pid_t			 pid;

	ck_assert_int_ne(pid = fork(), -1);
	if (pid != 0)
		return (pid);
	f = infeed_new();
	infeed_options_init(&o);
	o.buffer_size = buffer_size;
	if (infeed_connect(f, sock_path, "faults") != INFEED_OK ||
	    infeed_attach(f, dataset, &o, NULL) != INFEED_OK) {
		fprintf(stderr, "trainer: %s\n", infeed_error(f));
		_exit(2);
	}
	for (i = 0; i < steps; i++) {
		if (infeed_next(f, &st) != INFEED_OK) {
			fprintf(stderr, "trainer: step %u: %s\n", i,
			    infeed_error(f));
			_exit(1);
		}
		infeed_release(f, &st);
	}
	infeed_free(f);
	_exit(0);
}

/* Wait up to @ms for child @pid; its status, or -1 on a time-out. */
static int
wait_ms(pid_t pid, unsigned ms)
{
	uint64_t	deadline = now_ms() + ms;
	int		status;

	while (now_ms() < deadline) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return (status);
		usleep(10000);
	}
	return (-1);
}

/* A trainer process takes 3 steps of @dataset within 10 s. */
static void
trainer_ok(const char *dataset)
{
	pid_t	t = trainer(dataset, 3, 2);
	int	status = wait_ms(t, 10000);

	if (status == -1) {
		kill(t, SIGKILL);
		waitpid(t, NULL, 0);
	}
	ck_assert_msg(status != -1 && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0, "a trainer failed or waited 10 s");
}

/*
 * Workers killed with SIGKILL from outside, over and over while they read
 * large rows, cost the trainer nothing: a death the data did not cause
 * blames no sample (it used to end the session with "workers crashed 3
 * times reading sample N", even on the synthetic reader).
 */
START_TEST(test_killed_workers_blame_no_sample)
{
	pid_t	 t, w[4];
	int	 status = -1, kills = 0, n, i;

	restart(BIG_SECTION, "1");
	t = trainer("big", 12, 2);
	while (kills < 8 && waitpid(t, &status, WNOHANG) == 0) {
		usleep(20000);
		n = daemon_worker_pids(w, 4);
		for (i = 0; i < n; i++)
			kills += kill(w[i], SIGKILL) == 0;
	}
	if (status == -1 && (status = wait_ms(t, 30000)) == -1) {
		kill(t, SIGKILL);
		waitpid(t, NULL, 0);
		ck_abort_msg("the trainer did not finish 30 s after the kills");
	}
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the trainer failed after %d worker kills (status %d); see %s/"
	    "infeedd.log", kills, status, dir);
	ck_assert_int_ge(kills, 6);
}
END_TEST

/* The name of process @pid (its comm, as ps and top show it), or "". */
static void
comm_of(pid_t pid, char *buf, size_t len)
{
	char	 path[64];
	FILE	*fp;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return;
	if (fgets(buf, (int)len, fp) == NULL)
		buf[0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	fclose(fp);
}

/* Operators tell workers from the fork server in ps, top and perf. */
START_TEST(test_workers_named_for_operators)
{
	pid_t	 w[4];
	char	 name[32];
	int	 n, i, tries;

	restart("", "2");
	n = daemon_worker_pids(w, 4);
	ck_assert_int_eq(n, 2);
	for (i = 0; i < n; i++) {
		/* A worker names itself just after its fork: give it time. */
		for (tries = 0; tries < 100; tries++) {
			comm_of(w[i], name, sizeof(name));
			if (strcmp(name, "infeedd-worker") == 0)
				break;
			usleep(20000);
		}
		ck_assert_msg(strcmp(name, "infeedd-worker") == 0,
		    "worker %d is named '%s', not infeedd-worker", (int)w[i],
		    name);
	}
	comm_of(parent_of(w[0]), name, sizeof(name));
	ck_assert_str_eq(name, "infeedd-forker");
}
END_TEST

/*
 * A worker that crashes is replaced and its job done again, so the test
 * that caused it might pass: the harness finds the crash in the daemon's
 * log (infeedd_log_crash(), which teardown() asks) and fails the test.
 * SIGKILL, as the other tests send, is no crash.
 */
START_TEST(test_worker_crash_fails_the_test)
{
	char	line[4096], log[400];
	pid_t	w[4];
	int	i;

	ck_assert_int_ge(daemon_worker_pids(w, 4), 1);
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	trainer_ok("raw");
	ck_assert_msg(!infeedd_log_crash(line, sizeof(line)), "%s", line);
	ck_assert_int_ge(daemon_worker_pids(w, 4), 1);
	ck_assert_int_eq(kill(w[0], SIGSEGV), 0);
	for (i = 0; i < 500 && !infeedd_log_crash(line, sizeof(line)); i++)
		usleep(10000);
	/* Under ASan its handler reports the signal, and the worker exits. */
	ck_assert_msg(strstr(line, "was killed by signal 11 (SEGV)") != NULL ||
	    strstr(line, "AddressSanitizer") != NULL,
	    "no worker crash in the log: '%s'", line);
	trainer_ok("raw");
	/* The crash was this test's: teardown() must not fail for it. */
	snprintf(log, sizeof(log), "%s/infeedd.log", dir);
	ck_assert_int_eq(truncate(log, 0), 0);
}
END_TEST

/* Fail the test with @what, the daemon's log printed first (stderr). */
static void
abort_with_log(const char *what)
{
	static char	log[65536];

	read_log(log, sizeof(log));
	fprintf(stderr, "the daemon's log:\n%s\n", log);
	ck_abort_msg("%s (the daemon's log is above)", what);
}

/*
 * A stopped worker holding a job is found by the job's deadline, killed,
 * replaced, and its job re-issued: the trainer gets its step, the log says
 * what happened, and status counts the stuck worker.
 */
START_TEST(test_stopped_worker_replaced)
{
	Infeed__Frame	*r;
	pid_t		 t, w[4];
	char		 log[65536];
	uint64_t	 t0;
	int		 n, status;

	restart("job_timeout = 300ms", "1");
	ck_assert_int_eq(daemon_worker_pids(w, 4), 1);
	ck_assert_int_eq(kill(w[0], SIGSTOP), 0);
	t0 = now_ms();
	t = trainer("raw", 3, 2);
	status = wait_ms(t, 10000);
	if (status == -1) {
		kill(t, SIGKILL);
		waitpid(t, NULL, 0);
		kill(w[0], SIGKILL);
		abort_with_log("the trainer waited 10 s behind a stopped "
		    "worker");
	}
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_lt(now_ms() - t0, 5000);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "read no row of its job for 300 ms") !=
	    NULL, "%s", log);
	/* The replacement is a new process; the stopped one is gone. */
	n = daemon_worker_pids(w + 1, 3);
	ck_assert_int_eq(n, 1);
	ck_assert_int_ne(w[1], w[0]);
	r = raw_stats();
	ck_assert_uint_eq(r->stats->n_workers, 1);
	ck_assert_uint_ge(r->stats->workers[0]->restarts, 1);
	ck_assert_uint_ge(r->stats->workers[0]->stuck, 1);
	infeed__frame__free_unpacked(r, NULL);
}
END_TEST

/*
 * Kill worker @w and hold its replacement from its birth: fork server
 * @forker is traced until it forks it (a ptrace stop, let go with its
 * signal, SIGCHLD, otherwise), then let go.  The child, auto-attached,
 * stays in its first stop and runs not a line: a worker stopped in its
 * start, before it says it is ready.  Its pid.
 */
static pid_t
replacement_held_at_birth(pid_t forker, pid_t w)
{
	unsigned long	child = 0;
	int		st, sig;

	ck_assert_msg(ptrace(PTRACE_SEIZE, forker, 0, PTRACE_O_TRACEFORK) ==
	    0, "ptrace: %s", strerror(errno));
	ck_assert_int_eq(kill(w, SIGKILL), 0);
	for (;;) {
		ck_assert_int_eq(waitpid(forker, &st, __WALL), forker);
		ck_assert(WIFSTOPPED(st));
		if (st >> 8 == (SIGTRAP | (PTRACE_EVENT_FORK << 8)))
			break;
		sig = st >> 16 == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(st);
		ck_assert_int_eq(ptrace(PTRACE_CONT, forker, 0, sig), 0);
	}
	ck_assert_int_eq(ptrace(PTRACE_GETEVENTMSG, forker, 0, &child), 0);
	ck_assert_int_eq(ptrace(PTRACE_DETACH, forker, 0, 0), 0);
	return ((pid_t)child);
}

/*
 * A worker stopped in its start, before it says it is ready (the pool's
 * only one), gets no job, so no job's deadline found it: every session
 * waited for it for good (test_stopped_worker_replaced's SIGSTOP landed
 * there once in a loaded run).  Now it is killed job_timeout after its
 * start and replaced: the trainer gets its steps, the log says why.
 */
START_TEST(test_worker_stopped_in_its_start_replaced)
{
	Infeed__Frame	*r;
	pid_t		 t, w[4], held;
	char		 log[65536];
	uint64_t	 t0, deadline;
	int		 status = -1, st;
	bool		 reaped = false;

	restart("job_timeout = 300ms", "1");
	ck_assert_int_eq(daemon_worker_pids(w, 4), 1);
	held = replacement_held_at_birth(parent_of(w[0]), w[0]);
	t0 = now_ms();
	t = trainer("raw", 3, 2);
	/* Its fork server sees its end once this, its tracer, reaps it. */
	for (deadline = t0 + 10000; now_ms() < deadline; usleep(10000)) {
		if (!reaped && waitpid(held, &st, __WALL | WNOHANG) == held &&
		    (WIFEXITED(st) || WIFSIGNALED(st)))
			reaped = true;
		if (waitpid(t, &status, WNOHANG) == t)
			break;
		status = -1;
	}
	if (status == -1) {
		kill(t, SIGKILL);
		waitpid(t, NULL, 0);
		kill(held, SIGKILL);
		abort_with_log("the trainer waited 10 s behind a worker "
		    "stopped in its start");
	}
	ck_assert(reaped);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("a worker stopped in its start: the trainer's 3 steps in "
	    "%llu ms\n", (unsigned long long)(now_ms() - t0));
	ck_assert_uint_lt(now_ms() - t0, 5000);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "did not say it was ready within 300 ms "
	    "of its start") != NULL, "%s", log);
	ck_assert_int_eq(daemon_worker_pids(w + 1, 3), 1);
	ck_assert_int_ne(w[1], held);
	r = raw_stats();
	ck_assert_uint_ge(r->stats->workers[0]->stuck, 1);
	infeed__frame__free_unpacked(r, NULL);
}
END_TEST

/*
 * The main process never blocks on a worker's socket: with a worker
 * stopped while sessions it served end (each sends it an UNMAP), the
 * daemon goes on answering, and treats the worker as stuck.
 */
#define SESSIONS	300
START_TEST(test_unread_worker_socket_does_not_freeze)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f[SESSIONS];
	pid_t			 w[4];
	uint64_t		 t0;
	int			 i, j, n;

	restart("max_clients = 1000", "2");
	infeed_options_init(&o);
	o.batch_size = 50;
	o.buffer_size = 1;
	for (i = 0; i < SESSIONS; i++) {
		f[i] = client();
		ck_assert_int_eq(infeed_attach(f[i], "raw", &o, NULL),
		    INFEED_OK);
		/* Enough steps that both workers map this session's ring. */
		for (j = 0; j < 4; j++) {
			ck_assert_int_eq(infeed_next(f[i], &st), INFEED_OK);
			infeed_release(f[i], &st);
		}
	}
	n = daemon_worker_pids(w, 4);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(kill(w[0], SIGSTOP), 0);
	for (i = 0; i < SESSIONS; i++)
		infeed_free(f[i]);
	t0 = now_ms();
	infeed__frame__free_unpacked(raw_stats(), NULL);
	ck_assert_uint_lt(now_ms() - t0, 1000);
	kill(w[0], SIGKILL);
	kill(w[0], SIGCONT);
}
END_TEST

/*
 * SIGTERM with a worker that cannot die of it (stuck in the kernel; here a
 * worker held in a ptrace stop, where SIGTERM waits for its tracer): the
 * daemon waits a bounded time, kills the worker, says so, and exits
 * cleanly instead of waiting for ever.
 */
START_TEST(test_sigterm_with_stuck_worker)
{
	pid_t		 w[4], d = infeedd_pid;
	char		 log[65536];
	uint64_t	 deadline;
	int		 status = -1, st;
	bool		 done = false;

	ck_assert_int_eq(daemon_worker_pids(w, 4), 2);
	ck_assert_msg(ptrace(PTRACE_SEIZE, w[0], 0, 0) == 0 &&
	    ptrace(PTRACE_INTERRUPT, w[0], 0, 0) == 0, "ptrace: %s",
	    strerror(errno));
	ck_assert_int_eq(waitpid(w[0], &st, __WALL), w[0]);
	ck_assert_int_eq(kill(d, SIGTERM), 0);
	/* Take the tracee's stops (never resuming it) and its end. */
	for (deadline = now_ms() + 8000; now_ms() < deadline && !done;) {
		(void)waitpid(w[0], &st, WNOHANG | __WALL);
		done = waitpid(d, &status, WNOHANG) == d;
		usleep(10000);
	}
	if (!done) {
		kill(w[0], SIGKILL);
		kill(d, SIGKILL);
		waitpid(d, NULL, 0);
		infeedd_pid = -1;
		ck_abort_msg("infeedd did not stop within 8 s of SIGTERM with "
		    "a stuck worker");
	}
	infeedd_pid = -1;
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "did not stop within 2000 ms of SIGTERM; "
	    "killing it") != NULL, "%s", log);
}
END_TEST

/*
 * Workers come from a fork server that the daemon started before its
 * first client, not from the daemon: with a client attached (its socket
 * and its ring in the daemon), the fork server holds no more sockets than
 * before and no ring, and a worker forked then (a replacement) holds as
 * many sockets as one forked before any client, and no ring before it is
 * sent one.
 */
START_TEST(test_workers_forked_from_a_process_without_clients)
{
	struct infeed_options	 o;
	struct infeed		*f;
	pid_t			 w[4], now[4], forker, fresh;
	uint64_t		 deadline;
	int			 n, sockets, rings, forker_sockets;
	int			 worker_sockets;

	ck_assert_int_eq(daemon_worker_pids(w, 4), 2);
	forker = (pid_t)parent_of(w[0]);
	ck_assert_int_ne(forker, infeedd_pid);
	ck_assert_int_eq(parent_of(forker), infeedd_pid);
	holds(forker, &forker_sockets, &rings);
	holds(w[0], &worker_sockets, &rings);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 8;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	holds(infeedd_pid, &sockets, &rings);
	ck_assert_int_ge(rings, 1);	/* the daemon maps the client's ring */
	holds(forker, &sockets, &rings);
	ck_assert_int_eq(sockets, forker_sockets);
	ck_assert_int_eq(rings, 0);
	ck_assert_int_eq(kill(w[0], SIGKILL), 0);
	deadline = now_ms() + 5000;
	do {
		usleep(20000);
		n = daemon_worker_pids(now, 4);
	} while ((n != 2 || now[0] == w[0] || now[1] == w[0]) &&
	    now_ms() < deadline);
	ck_assert_int_eq(n, 2);
	fresh = now[0] == w[1] ? now[1] : now[0];
	ck_assert_int_eq(parent_of(fresh), forker);
	holds(fresh, &sockets, &rings);
	ck_assert_int_eq(sockets, worker_sockets);
	ck_assert_int_eq(rings, 0);
	infeed_free(f);
}
END_TEST

/*
 * The fork server killed: infeedd goes on, says so and starts a new one;
 * the workers do not go with it (they are infeedd's children now) and
 * serve a trainer.  test-forker-death.c has the rest: a trainer's steps,
 * a bystander, the new fork server's descriptors, a stopped fork server,
 * one that keeps dying.
 */
START_TEST(test_fork_server_death_is_survived_and_said)
{
	pid_t		 w[4], forker;
	char		 log[65536], want[128];
	uint64_t	 deadline;
	int		 i;

	ck_assert_int_eq(daemon_worker_pids(w, 4), 2);
	forker = (pid_t)parent_of(w[0]);
	ck_assert_int_eq(kill(forker, SIGKILL), 0);
	snprintf(want, sizeof(want), "the fork server (pid %d) was killed by "
	    "signal 9 (KILL); a new one", (int)forker);
	deadline = now_ms() + 5000;
	do {
		usleep(10000);
		read_log(log, sizeof(log));
	} while (strstr(log, want) == NULL && now_ms() < deadline);
	ck_assert_msg(strstr(log, want) != NULL, "%s", log);
	ck_assert_msg(waitpid(infeedd_pid, NULL, WNOHANG) == 0, "infeedd "
	    "died with its fork server");
	for (i = 0; i < 2; i++)
		ck_assert_int_eq(parent_of(w[i]), infeedd_pid);
	trainer_ok("raw");
}
END_TEST

/* The daemon's resident memory in KiB. */
static long
daemon_rss_kib(void)
{
	char	path[64], line[256];
	FILE	*fp;
	long	kib = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)infeedd_pid);
	ck_assert_ptr_nonnull(fp = fopen(path, "r"));
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	}
	fclose(fp);
	return (kib);
}

/* A raw connection past Hello, sending without reading. */
static int
raw_greeted(void)
{
	struct wire_in	in;
	int		fd = raw_connect();

	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(fd, &in, WIRE_PROTOCOL_VERSION);
	wire_in_clear(&in);
	return (fd);
}

/*
 * Clients that pipeline GetStats and never read cannot grow the daemon's
 * memory: it stops handling a client's requests while that client's
 * replies are over the limit (three such clients once took it from 7 MB
 * to 430 MB), and it goes on answering everyone else.
 */
START_TEST(test_unread_replies_bound_memory)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT;
	Infeed__GetStats gs = INFEED__GET_STATS__INIT;
	uint8_t		*one, *burst;
	size_t		 len, i, n;
	long		 before, after;
	uint64_t	 t0;
	struct infeed	*g[50];
	char		 name[INFEED_MAX_CLIENT_NAME + 1];
	int		 fds[3], c, flags;

	/* 50 sessions with long names make every Stats reply a few KiB. */
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	for (c = 0; c < 50; c++) {
		ck_assert_ptr_nonnull(g[c] = infeed_new());
		ck_assert_int_eq(infeed_connect(g[c], sock_path, name),
		    INFEED_OK);
		ck_assert_int_eq(infeed_attach(g[c], "raw", NULL, NULL),
		    INFEED_OK);
	}
	f.msg_case = INFEED__FRAME__MSG_GET_STATS;
	f.get_stats = &gs;
	ck_assert_ptr_nonnull(one = wire_pack(&f, INFEED_DEFAULT_MAX_FRAME,
	    &len));
	n = 256 * 1024 / len;
	burst = malloc(n * len);
	for (i = 0; i < n; i++)
		memcpy(burst + i * len, one, len);
	before = daemon_rss_kib();
	for (c = 0; c < 3; c++) {
		fds[c] = raw_greeted();
		flags = fcntl(fds[c], F_GETFL);
		fcntl(fds[c], F_SETFL, flags | O_NONBLOCK);
		/* As much as the socket takes; the daemon may stop reading. */
		for (i = 0; i < n * len;) {
			ssize_t	w = write(fds[c], burst + i, n * len - i);

			if (w <= 0)
				break;
			i += (size_t)w;
		}
	}
	usleep(500000);
	t0 = now_ms();
	infeed__frame__free_unpacked(raw_stats(), NULL);
	ck_assert_uint_lt(now_ms() - t0, 1000);
	after = daemon_rss_kib();
	ck_assert_msg(after - before < 32 * 1024, "the daemon grew from %ld "
	    "to %ld KiB", before, after);
	for (c = 0; c < 3; c++)
		close(fds[c]);
	for (c = 0; c < 50; c++)
		infeed_free(g[c]);
	free(burst);
	free(one);
}
END_TEST

/*
 * A client's strings cannot forge log lines: a newline or escape in its
 * name or in a dataset name it asks for comes out as '?', on one line.
 */
START_TEST(test_log_injection)
{
	struct infeed	*f = infeed_new();
	char		 log[65536];

	ck_assert_int_eq(infeed_connect(f, sock_path, "x\n2026-01-01T00:00:00Z "
	    "infeedd[1]: warning: forged name\x1b[2J"), INFEED_OK);
	ck_assert_int_eq(infeed_attach(f, "raw\n<3>warning: forged dataset",
	    NULL, NULL), INFEED_ERR_DAEMON);
	infeed_free(f);
	usleep(100000);
	read_log(log, sizeof(log));
	ck_assert_ptr_nonnull(strstr(log, "forged name"));
	ck_assert_ptr_nonnull(strstr(log, "forged dataset"));
	ck_assert_ptr_null(strstr(log, "\n2026-01-01T00:00:00Z"));
	ck_assert_ptr_null(strstr(log, "\n<3>"));
	ck_assert_ptr_null(strchr(log, '\x1b'));
}
END_TEST

/* Remove @rel under the test's directory, symlinks unfollowed. */
static void
rm_tree(const char *rel)
{
	char	path[600];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	remove_tree(path);
}

/* Copy fixture @name of tests/images to @rel under the test's directory. */
static void
copy_fixture(const char *name, const char *rel)
{
	const char	*fixtures = getenv("IMAGE_FIXTURES");
	static char	 buf[1 << 16];
	char		 path[600];
	ssize_t		 n;
	int		 fd;

	ck_assert_msg(fixtures != NULL, "set IMAGE_FIXTURES to tests/images");
	snprintf(path, sizeof(path), "%s/%s", fixtures, name);
	ck_assert_int_ne(fd = open(path, O_RDONLY), -1);
	ck_assert_int_gt(n = read(fd, buf, sizeof(buf)), 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	write_file(path, buf, (size_t)n);
}

/* mkdir under the test's directory. */
static void
mkdir_rel(const char *rel)
{
	char	path[600];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	ck_assert(mkdir(path, 0755) == 0 || errno == EEXIST);
}

/* symlink @rel (under the test's directory) to @to. */
static void
symlink_rel(const char *to, const char *rel)
{
	char	path[600];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	ck_assert_int_eq(symlink(to, path), 0);
}

/*
 * Whoever can write into an imagefolder tree cannot make infeedd read
 * outside it: a dataset with a link out of its root is refused at start
 * with a log line naming the link; an image swapped for such a link after
 * indexing fails its session, telling the client why; a link inside the
 * root works.  A diamond of directory links 30 levels deep (2^30 paths)
 * added by a reload is refused at once, and a bystander is served
 * throughout.
 */
START_TEST(test_imagefolder_links_stay_inside_root)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct bystander	 b;
	struct bystander_report	 r;
	struct infeed		*f;
	char			 extra[2048], log[65536], rel[64], to[64];
	uint64_t		 t0;
	int			 i, rc;

	/* imgs: a real tree with a link inside; leaky: a link out. */
	mkdir_rel("imgs");
	mkdir_rel("imgs/a");
	mkdir_rel("imgs/b");
	copy_fixture("j420-odd.jpg", "imgs/a/0.jpg");
	copy_fixture("j444-odd.jpg", "imgs/a/1.jpg");
	copy_fixture("j420-even.jpg", "imgs/b/0.jpg");
	symlink_rel("../a/0.jpg", "imgs/b/1.jpg");
	mkdir_rel("closed");
	copy_fixture("jgrey-odd.jpg", "closed/secret.jpg");
	mkdir_rel("leaky");
	mkdir_rel("leaky/a");
	copy_fixture("j420-odd.jpg", "leaky/a/0.jpg");
	symlink_rel("../../closed/secret.jpg", "leaky/a/1.jpg");
	snprintf(extra, sizeof(extra),
	    "[dataset imgs]\ntype = imagefolder\nroot = %s/imgs\n\n"
	    "[dataset leaky]\ntype = imagefolder\nroot = %s/leaky\n\n"
	    "[dataset closed]\ntype = imagefolder\nroot = %s/closed\n"
	    "allow_groups = root\n\n", dir, dir, dir);
	infeedd_stop();
	make_config(extra);
	infeedd_start(NULL);
	usleep(100000);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "dataset 'leaky' refused") != NULL &&
	    strstr(log, "leaky/a/1.jpg' is a symlink that leads out of root") !=
	    NULL, "no refusal naming the link in the log:\n%s", log);

	f = client();
	ck_assert_int_eq(infeed_attach(f, "leaky", NULL, NULL),
	    INFEED_ERR_DAEMON);
	infeed_options_init(&o);
	o.batch_size = 4;
	o.buffer_size = 1;
	o.transform = "Resize((8, 8)), ToTensor()";
	/* No group: its store would serve the second attach's step as
	 * decoded before the swap, never reading the link. */
	o.share = false;
	ck_assert_msg(infeed_attach(f, "imgs", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);

	/* Swapped for a link out after indexing: refused when read. */
	rm_tree("imgs/a/1.jpg");
	symlink_rel("../../closed/secret.jpg", "imgs/a/1.jpg");
	ck_assert_int_eq(infeed_attach(f, "imgs", &o, NULL), INFEED_OK);
	rc = infeed_next(f, &st);
	ck_assert_int_ne(rc, INFEED_OK);
	ck_assert_msg(strstr(infeed_error(f), "imgs/a/1.jpg") != NULL &&
	    strstr(infeed_error(f), "symlink that the dataset's "
	    "follow_symlinks refuses") != NULL, "%s", infeed_error(f));
	infeed_free(f);

	/* A diamond added by a reload: refused at once, others served. */
	mkdir_rel("diamond");
	mkdir_rel("diamond/c");
	copy_fixture("j420-odd.jpg", "diamond/c/x.jpg");
	for (i = 0; i <= 30; i++) {
		snprintf(rel, sizeof(rel), "diamond/c/L%d", i);
		mkdir_rel(rel);
	}
	for (i = 0; i < 30; i++) {
		snprintf(to, sizeof(to), "../L%d", i + 1);
		snprintf(rel, sizeof(rel), "diamond/c/L%d/a", i);
		symlink_rel(to, rel);
		snprintf(rel, sizeof(rel), "diamond/c/L%d/b", i);
		symlink_rel(to, rel);
	}
	snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
	    "[dataset diamond]\ntype = imagefolder\nroot = %s/diamond\n"
	    "follow_symlinks = all\n\n", dir);
	make_config(extra);
	bystander_start(&b);
	usleep(200000);
	t0 = now_ms();
	kill(infeedd_pid, SIGHUP);
	for (;;) {
		read_log(log, sizeof(log));
		if (strstr(log, "dataset 'diamond' refused") != NULL)
			break;
		ck_assert_msg(now_ms() - t0 < 5000, "no word on the diamond "
		    "5 s after the reload");
		usleep(20000);
	}
	usleep(300000);
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	ck_assert_ptr_nonnull(strstr(log, "again, reached twice under one "
	    "class through symlinks"));
	ck_assert_int_eq(kill(infeedd_pid, 0), 0);
	rm_tree("imgs");
	rm_tree("leaky");
	rm_tree("closed");
	rm_tree("diamond");
}
END_TEST

/* A TCP connection to 127.0.0.1:@port, non-blocking. */
static int
tcp_connect(uint16_t port)
{
	struct sockaddr_in	sin;
	int			fd;

	ck_assert_int_ne(fd = socket(AF_INET, SOCK_STREAM, 0), -1);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return (fd);
}

/* Whether the server closed connection @fd (EOF or reset). */
static bool
tcp_closed(int fd)
{
	char	buf[4096];
	ssize_t	n;

	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		;
	return (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK));
}

/* GET /metrics on @port: the whole answer in @buf, within 3 s. */
static void
scrape(uint16_t port, char *buf, size_t len)
{
	static const char	 req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	struct pollfd		 pfd;
	uint64_t		 t0 = now_ms();
	size_t			 got = 0;
	ssize_t			 n;
	int			 fd = tcp_connect(port);

	ck_assert_int_eq(send(fd, req, sizeof(req) - 1, 0),
	    (ssize_t)sizeof(req) - 1);
	buf[0] = '\0';
	while (got + 1 < len && now_ms() - t0 < 3000) {
		pfd.fd = fd;
		pfd.events = POLLIN;
		poll(&pfd, 1, 100);
		n = recv(fd, buf + got, len - 1 - got, 0);
		if (n == 0)
			break;
		if (n > 0)
			got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
}

/*
 * The metrics endpoint cannot take the daemon's descriptors: 64
 * connections that trickle a byte a second (each byte restarted libevent's
 * 5 s timeout, so they stayed for ever) hold at most 16 descriptors, each
 * is closed at most 10 s after its accept (5 here, through
 * INFEED_METRICS_DEADLINE_S), a real scrape is answered, a
 * client attaches and gets its ring, and a bystander is served on time.
 */
START_TEST(test_metrics_tricklers_bounded)
{
	struct bystander	 b;
	struct bystander_report	 r;
	struct infeed_step	 st;
	struct infeed		*f;
	char			 log[65536], *p, *resp;
	int			 fds[64], base, worst = 0, n, i, open;
	uint64_t		 t0, last = 0;
	uint16_t		 port;
	bool			 scraped = false, attached = false;

	infeedd_stop();
	make_config("metrics_listen = 127.0.0.1:0");
	ck_assert_int_eq(setenv("INFEED_METRICS_DEADLINE_S", "5", 1), 0);
	infeedd_start(NULL);
	ck_assert_int_eq(unsetenv("INFEED_METRICS_DEADLINE_S"), 0);
	usleep(100000);
	read_log(log, sizeof(log));
	ck_assert_ptr_nonnull(p = strstr(log, "metrics on http://127.0.0.1:"));
	port = (uint16_t)atoi(p + strlen("metrics on http://127.0.0.1:"));
	ck_assert_uint_ne(port, 0);
	resp = malloc(1 << 20);
	scrape(port, resp, 1 << 20);
	ck_assert_msg(strstr(resp, " 200 ") != NULL, "%s", resp);
	base = count_fds(infeedd_pid, NULL);

	bystander_start(&b);
	for (i = 0; i < 64; i++) {
		fds[i] = tcp_connect(port);
		ck_assert_int_eq(send(fds[i], "GET /metrics HTTP/1.1\r\nX: ",
		    27, 0), 27);
	}
	t0 = now_ms();
	for (;;) {
		open = 0;
		for (i = 0; i < 64; i++) {
			if (fds[i] == -1)
				continue;
			if (tcp_closed(fds[i])) {
				close(fds[i]);
				fds[i] = -1;
				continue;
			}
			open++;
			if (now_ms() - last >= 1000)
				(void)send(fds[i], "x", 1, MSG_NOSIGNAL);
		}
		if (now_ms() - last >= 1000)
			last = now_ms();
		if ((n = count_fds(infeedd_pid, NULL)) > worst)
			worst = n;
		if (!scraped && now_ms() - t0 > 2000) {
			scrape(port, resp, 1 << 20);
			ck_assert_msg(strstr(resp, " 200 ") != NULL &&
			    strstr(resp, "infeed_uptime_seconds") != NULL,
			    "a scrape among the tricklers: '%.200s'", resp);
			scraped = true;
		}
		if (!attached && now_ms() - t0 > 3000) {
			f = client();
			ck_assert_msg(infeed_attach(f, "raw", NULL, NULL) ==
			    INFEED_OK, "%s", infeed_error(f));
			ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
			ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
			infeed_free(f);
			attached = true;
		}
		if (open == 0 || now_ms() - t0 > 9000)
			break;
		usleep(50000);
	}
	bystander_stop(&b, &r);
	for (i = 0; i < 64; i++)
		if (fds[i] != -1)
			close(fds[i]);
	free(resp);
	fprintf(stderr, "metrics tricklers: %d still open after %llu ms; the "
	    "daemon held at most %d descriptors (%d before)\n", open,
	    (unsigned long long)(now_ms() - t0), worst, base);
	ck_assert_msg(open == 0, "%d trickling connections still open %llu ms "
	    "after they connected", open, (unsigned long long)(now_ms() - t0));
	/*
	 * 16 connections at most, plus slack for the trainer, the bystander
	 * and their rings, and for connections evhttp frees a turn late
	 * under ASan (52 for a base of 20 was seen): uncapped, the 64
	 * tricklers alone go past it.
	 */
	ck_assert_msg(worst <= base + 16 + 24, "the daemon held %d descriptors "
	    "with 64 trickling metrics connections, %d before", worst, base);
	ck_assert(scraped && attached);
	bystander_assert(&r, 250);
	ck_assert_int_eq(kill(infeedd_pid, 0), 0);
}
END_TEST

/*
 * Out of descriptors, the metrics listener pauses instead of spinning:
 * one warning, not one per turn of the event loop, and a connection
 * waiting meanwhile is served once descriptors are free again.
 */
START_TEST(test_metrics_out_of_descriptors_pauses)
{
	const char	*bin = getenv("INFEEDD");
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	struct wire_in	 in;
	char		*log, *p, *resp;
	int		 fds[60], i, n, lines = 0, mfd, first;
	uint16_t	 port;
	uint64_t	 t0;
	ssize_t		 got;
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";

	infeedd_stop();
	make_config("max_clients = 1000\nmetrics_listen = 127.0.0.1:0");
	infeedd_spawn((char *const []){ (char *)"prlimit", (char *)"--nofile=40",
	    (char *)bin, (char *)"--config", conf_path, (char *)"--socket",
	    sock_path, (char *)"--workers", (char *)"2", NULL });
	for (i = 0; i < 500 && access(sock_path, F_OK) != 0; i++)
		usleep(10000);
	usleep(200000);
	log = malloc(1 << 20);
	resp = malloc(1 << 20);
	read_log(log, 1 << 20);
	ck_assert_ptr_nonnull(p = strstr(log, "metrics on http://127.0.0.1:"));
	port = (uint16_t)atoi(p + strlen("metrics on http://127.0.0.1:"));
	/* Take every descriptor with clients. */
	h.protocol_version = WIRE_PROTOCOL_VERSION;
	f.msg_case = INFEED__FRAME__MSG_HELLO;
	f.hello = &h;
	for (n = 0; n < 60; n++) {
		fds[n] = raw_connect();
		raw_send(fds[n], &f);
		wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
		r = raw_recv(fds[n], &in);
		wire_in_clear(&in);
		if (r != NULL && r->msg_case == INFEED__FRAME__MSG_ERROR) {
			infeed__frame__free_unpacked(r, NULL);
			n++;
			break;
		}
		if (r != NULL)
			infeed__frame__free_unpacked(r, NULL);
	}
	/*
	 * The first scrape may take the last descriptor (the listener takes
	 * one connection a turn); the one after it finds none, and waits.
	 */
	first = tcp_connect(port);
	ck_assert_int_eq(send(first, req, sizeof(req) - 1, 0),
	    (ssize_t)sizeof(req) - 1);
	usleep(200000);
	mfd = tcp_connect(port);
	ck_assert_int_eq(send(mfd, req, sizeof(req) - 1, 0),
	    (ssize_t)sizeof(req) - 1);
	usleep(1500000);
	read_log(log, 1 << 20);
	for (p = log; (p = strstr(p, "accept")) != NULL; p++)
		lines++;
	fprintf(stderr, "metrics out of descriptors: %d log lines about "
	    "accept in 1.5 s\n", lines);
	ck_assert_msg(lines >= 1 && lines <= 3, "%d log lines about accept "
	    "failures in 1.5 s out of descriptors", lines);
	ck_assert_ptr_nonnull(strstr(log, "metrics: cannot accept a "
	    "connection (Too many open files)"));
	for (i = 0; i < n; i++)
		close(fds[i]);
	close(first);
	/* The waiting scrape is answered within the pause. */
	t0 = now_ms();
	got = 0;
	while (now_ms() - t0 < 3000) {
		ssize_t	k = recv(mfd, resp + got, (1 << 20) - 1 - (size_t)got,
		    0);

		if (k == 0)
			break;
		if (k > 0)
			got += k;
		else
			usleep(20000);
	}
	resp[got] = '\0';
	close(mfd);
	read_log(log, 1 << 20);
	if (strstr(resp, " 200 ") == NULL)
		fprintf(stderr, "LOG: %s\n", log);
	ck_assert_msg(strstr(resp, " 200 ") != NULL, "the waiting scrape got "
	    "'%.200s' (%zd bytes)", resp, got);
	free(log);
	free(resp);
}
END_TEST

/*
 * The name of a session on a client's own files is a client string too: it
 * reaches the log (the session's line, its failures) and other clients'
 * Stats on one line, with its newline and escape shown as '?'.
 */
START_TEST(test_log_injection_files_session_name)
{
	struct infeed		*f = infeed_new();
	struct infeed_files	 fl;
	struct infeed_options	 o;
	char			 log[65536], path[400];
	int			 dfd;

	snprintf(path, sizeof(path), "%s/raw.bin", dir);
	ck_assert_int_ne(dfd = open(path, O_RDONLY), -1);
	infeed_files_init(&fl);
	fl.data_fd = dfd;
	fl.data_format = INFEED_FILE_RAW;
	fl.dtype = INFEED_DTYPE_UINT8;
	fl.ndim = 1;
	fl.shape[0] = RAW_BYTES;
	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_connect(f, sock_path, "files-name"),
	    INFEED_OK);
	ck_assert_msg(infeed_attach_files(f, "x\n<3>warning: forged files"
	    "\x1b[2J\x1b]0;title\x07", &fl, &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	infeed_free(f);
	close(dfd);
	usleep(100000);
	read_log(log, sizeof(log));
	ck_assert_ptr_nonnull(strstr(log, "forged files"));
	ck_assert_ptr_null(strstr(log, "\n<3>"));
	ck_assert_ptr_null(strchr(log, '\x1b'));
	ck_assert_ptr_null(strchr(log, '\x07'));
}
END_TEST

/*
 * One client's refused requests cannot fill the log: at most 10 lines a
 * second are logged for it, then a count of the rest.
 */
START_TEST(test_log_rate_limited_per_client)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT;
	Infeed__Next	 nx = INFEED__NEXT__INIT;
	struct wire_in	 in;
	Infeed__Frame	*r;
	char		*log, *p;
	int		 fd = raw_greeted(), i, lines = 0;

	f.msg_case = INFEED__FRAME__MSG_NEXT;
	f.next = &nx;
	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	for (i = 0; i < 2000; i++) {
		raw_send(fd, &f);
		ck_assert_ptr_nonnull(r = raw_recv(fd, &in));
		ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
		infeed__frame__free_unpacked(r, NULL);
	}
	close(fd);
	wire_in_clear(&in);
	usleep(200000);
	log = malloc(1 << 20);
	read_log(log, 1 << 20);
	for (p = log; (p = strstr(p, "Next without a session")) != NULL; p++)
		lines++;
	ck_assert_int_ge(lines, 10);
	ck_assert_msg(lines <= 40, "%d lines for one client's 2000 errors",
	    lines);
	ck_assert_ptr_nonnull(strstr(log, "more errors in a second were not "
	    "logged"));
	free(log);
}
END_TEST

/*
 * Out of file descriptors, every client gets an answer (a Welcome, or a
 * clear RESOURCE_EXHAUSTED naming the limit) instead of hanging, and once
 * they leave the daemon serves again.
 */
START_TEST(test_out_of_descriptors_clients_refused)
{
	const char	*bin = getenv("INFEEDD");
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	struct wire_in	 in;
	int		 fds[60], i, welcomed = 0, refused = 0;
	uint64_t	 t0;

	infeedd_stop();
	make_config("max_clients = 1000");
	/* prlimit sets the limit, then execs infeedd in the same process. */
	infeedd_spawn((char *const []){ (char *)"prlimit", (char *)"--nofile=40",
	    (char *)bin, (char *)"--config", conf_path, (char *)"--socket",
	    sock_path, (char *)"--workers", (char *)"2", NULL });
	for (i = 0; i < 500 && access(sock_path, F_OK) != 0; i++)
		usleep(10000);
	usleep(100000);
	h.protocol_version = WIRE_PROTOCOL_VERSION;
	f.msg_case = INFEED__FRAME__MSG_HELLO;
	f.hello = &h;
	for (i = 0; i < 60; i++) {
		fds[i] = raw_connect();
		raw_send(fds[i], &f);
		wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
		/* raw_recv fails the test when no answer comes in 2 s. */
		r = raw_recv(fds[i], &in);
		if (r != NULL && r->msg_case == INFEED__FRAME__MSG_WELCOME)
			welcomed++;
		else if (r != NULL && r->msg_case == INFEED__FRAME__MSG_ERROR &&
		    r->error->code ==
		    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED &&
		    strstr(r->error->message, "file descriptors") != NULL)
			refused++;
		if (r != NULL)
			infeed__frame__free_unpacked(r, NULL);
		wire_in_clear(&in);
	}
	ck_assert_int_ge(welcomed, 10);
	ck_assert_int_ge(refused, 1);
	ck_assert_int_eq(welcomed + refused, 60);
	for (i = 0; i < 60; i++)
		close(fds[i]);
	usleep(300000);		/* accepting resumes within 100 ms */
	t0 = now_ms();
	infeed__frame__free_unpacked(raw_stats(), NULL);
	ck_assert_uint_lt(now_ms() - t0, 1000);
}
END_TEST

/* Send one request with no fields (Next) or a Release on a raw socket. */
static Infeed__Frame *
raw_ask(int fd, struct wire_in *in, Infeed__Frame__MsgCase c, uint32_t slot)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	Infeed__Next	 nx = INFEED__NEXT__INIT;
	Infeed__Release	 rl = INFEED__RELEASE__INIT;

	f.msg_case = c;
	if (c == INFEED__FRAME__MSG_NEXT)
		f.next = &nx;
	else {
		rl.slot = slot;
		f.release = &rl;
	}
	raw_send(fd, &f);
	ck_assert_ptr_nonnull(r = raw_recv(fd, in));
	return (r);
}

/*
 * A client that reopens its ring's descriptor writable (possible as root
 * or the daemon's user; anyone else is kept out by the memfd's mode) and
 * scribbles over every slot's index table, step after step, still gets
 * the sampler's rows: the workers take the indices from their jobs, never
 * from the ring.
 */
START_TEST(test_writable_ring_steers_nothing)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT, *r;
	Infeed__Attach		 a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	 lo = INFEED__LOADER_OPTIONS__INIT;
	struct wire_in		 in;
	struct sampler		 sm;
	struct sampler_opts	 so;
	struct stat		 sb;
	char			 path[64], *cause = NULL;
	uint8_t			*ring;
	const uint8_t		*slot;
	uint64_t		 want[16], i, k, ring_bytes, slot_bytes, idx_off;
	uint32_t		 nslots;
	int			 fd = raw_greeted(), rofd, rw, step;

	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	lo.has_batch_size = lo.has_buffer_size = lo.has_shuffle = 1;
	lo.has_seed = 1;
	lo.batch_size = 16;
	lo.buffer_size = 3;
	lo.shuffle = 1;
	lo.seed = 5;
	a.dataset = (char *)"raw";
	a.options = &lo;
	f.msg_case = INFEED__FRAME__MSG_ATTACH;
	f.attach = &a;
	raw_send(fd, &f);
	ck_assert_ptr_nonnull(r = raw_recv(fd, &in));
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ATTACHED);
	ring_bytes = r->attached->ring_bytes;
	slot_bytes = r->attached->slot_bytes;
	idx_off = r->attached->indices_offset;
	nslots = r->attached->slots;
	infeed__frame__free_unpacked(r, NULL);
	ck_assert_int_ne(rofd = wire_in_take_fd(&in), -1);
	ck_assert_int_eq(fstat(rofd, &sb), 0);
	ck_assert_uint_eq(sb.st_mode & 0777, 0400);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", rofd);
	if ((rw = open(path, O_RDWR)) == -1) {
		/* Not root nor the daemon's user: the mode keeps us out. */
		ck_assert_int_eq(errno, EACCES);
		goto out;
	}
	ring = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, rw,
	    0);
	ck_assert_ptr_ne(ring, MAP_FAILED);
	memset(&so, 0, sizeof(so));
	so.samples = RAW_N;
	so.batch_size = 16;
	so.device_iterations = so.replication_factor = 1;
	so.gradient_accumulation = so.process_count = 1;
	so.shuffle = true;
	so.seed = 5;
	so.drop_last = true;
	ck_assert_int_eq(sampler_init(&sm, &so, &cause), 0);
	for (step = 0; step < 150; step++) {
		/* Junk over every index table: the next fills must not care. */
		for (k = 0; k < nslots; k++)
			memset(ring + k * slot_bytes + idx_off, 0x7f, 16 * 8);
		r = raw_ask(fd, &in, INFEED__FRAME__MSG_NEXT, 0);
		ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_STEP);
		sampler_step_indices(&sm, r->step->epoch, r->step->step, want);
		/*
		 * The rows are the sampler's (the index table itself may show
		 * our junk: a slot filled before we wrote it is ours to spoil).
		 */
		slot = ring + r->step->slot * slot_bytes;
		ck_assert_uint_eq(r->step->rows, 16);
		for (i = 0; i < r->step->rows; i++)
			ck_assert_uint_eq(slot[i * RAW_BYTES + 5],
			    raw_byte(want[i], 5));
		k = r->step->slot;
		infeed__frame__free_unpacked(r, NULL);
		r = raw_ask(fd, &in, INFEED__FRAME__MSG_RELEASE, (uint32_t)k);
		ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_RELEASED);
		infeed__frame__free_unpacked(r, NULL);
	}
	sampler_clear(&sm);
	munmap(ring, ring_bytes);
	close(rw);
out:
	close(rofd);
	close(fd);
	wire_in_clear(&in);
}
END_TEST

/*
 * Session ids never repeat across daemon instances, so a client resuming
 * after a restart can tell its old steps from the new session's.
 */
START_TEST(test_session_ids_unique_across_restarts)
{
	struct infeed_session_info	info;
	struct infeed			*f;
	uint64_t			ids[4];
	int				i, j;

	for (i = 0; i < 4; i++) {
		if (i > 0) {
			infeedd_stop();
			infeedd_start(NULL);
		}
		f = client();
		ck_assert_int_eq(infeed_attach(f, "raw", NULL, &info),
		    INFEED_OK);
		ids[i] = info.session_id;
		ck_assert_uint_lt(ids[i], UINT64_C(1) << 53);
		for (j = 0; j < i; j++)
			ck_assert_uint_ne(ids[i], ids[j]);
		infeed_free(f);
	}
}
END_TEST

/*
 * A dataset file replaced (renamed over, not truncated) under a live
 * session: the session goes on serving the file it opened, unharmed.
 */
START_TEST(test_file_replaced_under_session_keeps_serving)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f = client();
	char			 path[400], tmp[400];
	uint8_t			*junk;
	const uint8_t		*row;
	uint64_t		 i;
	int			 s;

	infeed_options_init(&o);
	o.batch_size = 100;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	snprintf(path, sizeof(path), "%s/raw.bin", dir);
	snprintf(tmp, sizeof(tmp), "%s/raw.new", dir);
	ck_assert_ptr_nonnull(junk = malloc(RAW_N * RAW_BYTES));
	memset(junk, 0xee, RAW_N * RAW_BYTES);
	write_file(tmp, junk, RAW_N / 2 * RAW_BYTES);
	ck_assert_int_eq(rename(tmp, path), 0);
	for (s = 0; s < 12; s++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		for (i = 0; i < st.rows; i++) {
			row = (const uint8_t *)st.data + i * RAW_BYTES;
			ck_assert_uint_eq(row[3], raw_byte(st.indices[i], 3));
		}
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	free(junk);
	infeed_free(f);
}
END_TEST

/*
 * SIGTERM while a client holds a step and waits on a Next: the daemon
 * exits cleanly and promptly, and the client sees the connection close.
 */
START_TEST(test_sigterm_with_held_step_and_waiting_next)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT, *r;
	Infeed__Attach		 a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	 lo = INFEED__LOADER_OPTIONS__INIT;
	Infeed__Next		 nx = INFEED__NEXT__INIT;
	struct wire_in		 in;
	pid_t			 d;
	int			 fd, status;

	restart(BIG_SECTION, "1");
	d = infeedd_pid;
	fd = raw_greeted();
	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	lo.has_buffer_size = 1;
	lo.buffer_size = 2;
	a.dataset = (char *)"big";
	a.options = &lo;
	f.msg_case = INFEED__FRAME__MSG_ATTACH;
	f.attach = &a;
	raw_send(fd, &f);
	ck_assert_ptr_nonnull(r = raw_recv(fd, &in));
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ATTACHED);
	infeed__frame__free_unpacked(r, NULL);
	f.msg_case = INFEED__FRAME__MSG_NEXT;
	f.next = &nx;
	raw_send(fd, &f);
	ck_assert_ptr_nonnull(r = raw_recv(fd, &in));	/* held */
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_STEP);
	infeed__frame__free_unpacked(r, NULL);
	raw_send(fd, &f);			/* waits: 64 MiB rows */
	ck_assert_int_eq(kill(d, SIGTERM), 0);
	status = wait_ms(d, 5000);
	infeedd_pid = -1;
	ck_assert_msg(status != -1, "infeedd did not stop within 5 s");
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert(raw_closed(fd));
	close(fd);
	wire_in_clear(&in);
}
END_TEST

/*
 * reconnect_timeout_ms running out: the call fails with an error that
 * says so, in about that time, and the handle keeps failing cleanly.
 */
START_TEST(test_reconnect_timeout_runs_out)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f = client();
	uint64_t		 t0, ms;
	int			 r;

	infeed_options_init(&o);
	o.reconnect_timeout_ms = 500;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeedd_stop();
	t0 = now_ms();
	r = infeed_next(f, &st);
	ms = now_ms() - t0;
	ck_assert_msg(r == INFEED_ERR_CLOSED || r == INFEED_ERR_SYSTEM,
	    "infeed_next gave %d: %s", r, infeed_error(f));
	ck_assert_msg(strstr(infeed_error(f), "reconnecting for 500 ms") !=
	    NULL, "%s", infeed_error(f));
	ck_assert_uint_ge(ms, 400);
	ck_assert_uint_lt(ms, 3000);
	t0 = now_ms();
	ck_assert_int_ne(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_lt(now_ms() - t0, 3000);
	infeed_free(f);
}
END_TEST

/*
 * Reload storms racing attaches and detaches: every attach, step and
 * detach of an unchanged dataset goes through, and status answers.
 */
START_TEST(test_reload_storm_during_attach_and_detach)
{
	struct infeed_step	 st;
	struct infeed		*f;
	uint64_t		 t0;
	pid_t			 hup;
	int			 i, status;

	ck_assert_int_ne(hup = fork(), -1);
	if (hup == 0) {
		for (i = 0; i < 40; i++) {
			kill(infeedd_pid, SIGHUP);
			usleep(5000);
		}
		_exit(0);
	}
	for (i = 0; i < 40; i++) {
		f = client();
		ck_assert_msg(infeed_attach(f, "raw", NULL, NULL) == INFEED_OK,
		    "%s", infeed_error(f));
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
		ck_assert_int_eq(infeed_detach(f), INFEED_OK);
		infeed_free(f);
	}
	ck_assert_int_eq(waitpid(hup, &status, 0), hup);
	t0 = now_ms();
	infeed__frame__free_unpacked(raw_stats(), NULL);
	ck_assert_uint_lt(now_ms() - t0, 1000);
}
END_TEST

/*
 * Exactly once across distributed processes through a daemon restart:
 * two processes' shares of an epoch, with the daemon restarted halfway,
 * cover every sample once (drop_last off).
 */
START_TEST(test_distributed_exactly_once_through_a_restart)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f[2];
	unsigned		 seen[RAW_N], p, s, steps;
	uint64_t		 i;

	memset(seen, 0, sizeof(seen));
	for (p = 0; p < 2; p++) {
		infeed_options_init(&o);
		o.batch_size = 30;
		o.shuffle = true;
		o.seed = 3;
		o.drop_last = false;
		o.load_indefinitely = false;
		o.distributed_process_id = p;
		o.distributed_process_count = 2;
		o.reconnect_timeout_ms = 10000;
		f[p] = client();
		ck_assert_int_eq(infeed_attach(f[p], "raw", &o, NULL),
		    INFEED_OK);
	}
	steps = (RAW_N / 2 + 29) / 30;
	for (s = 0; s < steps; s++) {
		if (s == steps / 2) {
			infeedd_stop();
			infeedd_start(NULL);
		}
		for (p = 0; p < 2; p++) {
			ck_assert_msg(infeed_next(f[p], &st) == INFEED_OK,
			    "%s", infeed_error(f[p]));
			for (i = 0; i < st.rows; i++)
				seen[st.indices[i]]++;
			ck_assert_int_eq(infeed_release(f[p], &st), INFEED_OK);
		}
	}
	for (p = 0; p < 2; p++) {
		ck_assert_int_eq(infeed_next(f[p], &st), INFEED_END_OF_DATA);
		infeed_free(f[p]);
	}
	for (i = 0; i < RAW_N; i++)
		ck_assert_msg(seen[i] == 1, "sample %llu seen %u times",
		    (unsigned long long)i, seen[i]);
}
END_TEST

/*
 * A daemon that accepts no connection or never answers the Hello (stopped,
 * or out of descriptors) makes infeed_connect fail with a clear error in
 * bounded time, not hang.
 */
START_TEST(test_connect_times_out_on_a_silent_daemon)
{
	struct sockaddr_un	 sun;
	struct infeed		*f = infeed_new();
	char			 path[400];
	uint64_t		 t0, ms;
	int			 lfd, r;

	snprintf(path, sizeof(path), "%s/silent.sock", dir);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, path);
	ck_assert_int_ne(lfd = socket(AF_UNIX, SOCK_STREAM, 0), -1);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	ck_assert_int_eq(listen(lfd, 8), 0);	/* and never accept */
	setenv("INFEED_CONNECT_TIMEOUT_MS", "500", 1);
	t0 = now_ms();
	r = infeed_connect(f, path, "patient");
	ms = now_ms() - t0;
	unsetenv("INFEED_CONNECT_TIMEOUT_MS");
	ck_assert_int_eq(r, INFEED_ERR_SYSTEM);
	ck_assert_msg(strstr(infeed_error(f), "did not answer within 500 "
	    "ms") != NULL, "%s", infeed_error(f));
	ck_assert_uint_ge(ms, 400);
	ck_assert_uint_lt(ms, 3000);
	infeed_free(f);
	close(lfd);
	unlink(path);
}
END_TEST

/*
 * Fairness: one client's burst of pipelined requests adds only a bounded
 * delay to another client's Next (a client's requests are handled while
 * its replies stay under the limit, a chunk at a time).
 */
START_TEST(test_burst_from_one_client_bounds_anothers_delay)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__ListDatasets	 ld = INFEED__LIST_DATASETS__INIT;
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*g = client();
	uint8_t			*one, *burst, sink[65536];
	size_t			 len, n = 20000, i;
	uint64_t		 t0, worst = 0, ms;
	pid_t			 flood;
	int			 fd, s;

	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(g, "raw", &o, NULL), INFEED_OK);
	f.msg_case = INFEED__FRAME__MSG_LIST_DATASETS;
	f.list_datasets = &ld;
	ck_assert_ptr_nonnull(one = wire_pack(&f, INFEED_DEFAULT_MAX_FRAME,
	    &len));
	burst = malloc(n * len);
	for (i = 0; i < n; i++)
		memcpy(burst + i * len, one, len);
	fd = raw_greeted();
	ck_assert_int_ne(flood = fork(), -1);
	if (flood == 0) {
		/* Send the burst, five times over, reading replies as it goes. */
		struct pollfd	pfd = { fd, POLLIN | POLLOUT, 0 };
		size_t		off = 0, total = 5 * n * len;

		while (off < total) {
			if (poll(&pfd, 1, 2000) <= 0)
				_exit(1);
			if (pfd.revents & POLLIN)
				(void)read(fd, sink, sizeof(sink));
			if (pfd.revents & POLLOUT) {
				ssize_t	w = write(fd, burst + off % (n * len),
				    n * len - off % (n * len));

				if (w > 0)
					off += (size_t)w;
			}
		}
		_exit(0);
	}
	for (s = 0; s < 100; s++) {
		t0 = now_ms();
		ck_assert_int_eq(infeed_next(g, &st), INFEED_OK);
		ms = now_ms() - t0;
		worst = ms > worst ? ms : worst;
		ck_assert_int_eq(infeed_release(g, &st), INFEED_OK);
	}
	kill(flood, SIGKILL);
	waitpid(flood, NULL, 0);
	ck_assert_msg(worst < 250, "a Next waited %llu ms behind another "
	    "client's burst", (unsigned long long)worst);
	close(fd);
	free(burst);
	free(one);
	infeed_free(g);
}
END_TEST

/* Rings mapped in the daemon's worker processes. */
static int
worker_rings(void)
{
	pid_t	 w[8];
	char	 path[64], line[512];
	FILE	*fp;
	int	 i, n, rings = 0;

	n = daemon_worker_pids(w, 8);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)w[i]);
		if ((fp = fopen(path, "r")) == NULL)
			continue;
		while (fgets(line, sizeof(line), fp) != NULL)
			rings += strstr(line, "infeed-ring") != NULL;
		fclose(fp);
	}
	return (rings);
}

/*
 * Workers forked while a session lives (after a reload, a crash) keep
 * nothing of its ring once it ends, when the daemon keeps no ring memory:
 * its memory goes back, as the budget says.
 */
START_TEST(test_workers_keep_no_ring_of_an_ended_session)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	uint64_t		 deadline;
	pid_t			 before[4], after[4];
	int			 n, rings;

	restart("keep_ring_memory = 0", NULL);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 100;
	ck_assert_int_eq(daemon_worker_pids(before, 4), 2);
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	/* A reload replaces the workers while the session lives. */
	ck_assert_int_eq(kill(infeedd_pid, SIGHUP), 0);
	deadline = now_ms() + 5000;
	do {
		usleep(20000);
		n = daemon_worker_pids(after, 4);
	} while ((n != 2 || after[0] == before[0] || after[0] == before[1] ||
	    after[1] == before[0] || after[1] == before[1]) &&
	    now_ms() < deadline);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	deadline = now_ms() + 2000;
	while ((rings = worker_rings()) != 0 && now_ms() < deadline)
		usleep(20000);
	ck_assert_msg(rings == 0, "%d ring mappings left in the workers after "
	    "the session ended", rings);
	infeed_free(f);
}
END_TEST

/*
 * With keep_ring_memory (the default), the workers keep their mappings of
 * an ended session's ring for the next session, and let go of them when
 * the daemon gives the memory up for a ring that needs the budget.
 */
START_TEST(test_workers_let_kept_ring_memory_go_with_the_daemon)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	uint64_t		 deadline;
	int			 i, rings;

	/*
	 * A ring of 1000 raw rows is 84 KiB and its index tables 47 KiB, of
	 * 600 rows 60 KiB and 28 KiB.
	 */
	restart("memory_budget = 135K", NULL);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 1000;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	usleep(100000);
	ck_assert_msg((rings = worker_rings()) > 0, "the workers dropped the "
	    "ring memory the daemon keeps (%d mappings)", rings);
	/* 84 + 88 KiB do not fit in 135: the kept memory goes. */
	o.batch_size = 600;
	ck_assert_msg(infeed_attach(f, "raw", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	deadline = now_ms() + 2000;
	while ((rings = worker_rings()) != 0 && now_ms() < deadline)
		usleep(20000);
	ck_assert_msg(rings == 0, "%d mappings of freed ring memory left in "
	    "the workers", rings);
	infeed_free(f);
}
END_TEST

/*
 * A worker that a reload retires but that does not go (stopped) is
 * killed and replaced after a bounded time, not left "idle" for ever.
 */
START_TEST(test_retired_stopped_worker_replaced)
{
	pid_t		 w[4], now[4];
	char		 log[65536];
	uint64_t	 deadline;
	int		 n, i, gone;

	ck_assert_int_eq(daemon_worker_pids(w, 4), 2);
	ck_assert_int_eq(kill(w[0], SIGSTOP), 0);
	ck_assert_int_eq(kill(infeedd_pid, SIGHUP), 0);
	deadline = now_ms() + 6000;
	do {
		usleep(50000);
		n = daemon_worker_pids(now, 4);
		for (gone = 1, i = 0; i < n; i++)
			gone &= now[i] != w[0];
	} while ((!gone || n != 2) && now_ms() < deadline);
	if (!gone) {
		kill(w[0], SIGKILL);
		ck_abort_msg("the stopped worker was still there 6 s after the "
		    "reload");
	}
	ck_assert_int_eq(n, 2);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "did not exit within 2000 ms of being "
	    "retired") != NULL, "%s", log);
	trainer_ok("raw");
}
END_TEST

/* The peak resident memory of process @pid, in KiB (VmHWM), or 0. */
static uint64_t
peak_rss_kib(pid_t pid)
{
	char		 path[64], line[256];
	unsigned long long kib = 0;
	FILE		*fp;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
			break;
	}
	fclose(fp);
	return (kib);
}

/* Write a one-image imagefolder, @name/a/@file, in the test's directory. */
static void
make_bomb_folder(const char *name, const char *file, const uint8_t *buf,
    size_t len)
{
	char	path[600];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s/a", dir, name);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s/a/%s", dir, name, file);
	write_file(path, buf, len);
}

/* A trainer's first step of image dataset @name fails: its message. */
static void
bomb_step_fails(const char *name, const char *file, char *msg, size_t len)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f = client();
	int			 rc;

	infeed_options_init(&o);
	o.transform = "Resize(32), CenterCrop(32), ToTensor()";
	ck_assert_msg(infeed_attach(f, name, &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	rc = infeed_next(f, &st);
	snprintf(msg, len, "%s", infeed_error(f));
	ck_assert_msg(rc == INFEED_ERR_DAEMON && infeed_daemon_code(f) == 8,
	    "%s: %d, code %d: %s", name, rc, infeed_daemon_code(f), msg);
	ck_assert_msg(strstr(msg, file) != NULL && strstr(msg, "above "
	    "image_memory_max (256 MiB)") != NULL, "%s", msg);
	infeed_free(f);
}

/*
 * Decompression bombs within IMAGE_MAX_PIXELS (issue 24, item 4): an
 * interlaced 16-bit RGBA PNG of 13376 x 13376 (1.43 GB decoded whole)
 * and a progressive JPEG that size (1.07 GB of coefficients), each a
 * file of about a hundred bytes.  Each session gets ERROR_DATA naming the
 * file and image_memory_max; no worker grows past 128 MiB (one used to
 * allocate and zero 1.43 GB, and with a few workers the OOM killer ran in
 * a loop) or dies; a bystander is served all along.
 */
START_TEST(test_image_bombs_refused_at_image_memory_max)
{
	struct bystander	 b;
	struct bystander_report	 rep;
	Infeed__Frame		*r;
	uint8_t			 buf[IMAGE_BOMB_MAX];
	char			 extra[2048], msg[1024];
	pid_t			 w[4];
	size_t			 i;
	int			 n;

	make_bomb_folder("pngbomb", "bomb.png", buf, image_bomb_png(buf));
	make_bomb_folder("jpgbomb", "bomb.jpg", buf, image_bomb_jpeg(buf));
	snprintf(extra, sizeof(extra), "[dataset pngbomb]\ntype = imagefolder\n"
	    "root = %s/pngbomb\n\n[dataset jpgbomb]\ntype = imagefolder\n"
	    "root = %s/jpgbomb\n", dir, dir);
	restart(extra, "2");
	bystander_start(&b);
	usleep(200000);
	bomb_step_fails("pngbomb", "bomb.png", msg, sizeof(msg));
	fprintf(stderr, "%s\n", msg);
	ck_assert_msg(strstr(msg, "interlaced PNG") != NULL, "%s", msg);
	bomb_step_fails("jpgbomb", "bomb.jpg", msg, sizeof(msg));
	fprintf(stderr, "%s\n", msg);
	ck_assert_msg(strstr(msg, "progressive JPEG") != NULL, "%s", msg);
	usleep(200000);
	bystander_stop(&b, &rep);
	n = daemon_worker_pids(w, 4);
	ck_assert_int_eq(n, 2);
	for (i = 0; i < (size_t)n; i++)
		ck_assert_msg(peak_rss_kib(w[i]) < 128 * 1024, "worker %d "
		    "peaked at %llu KiB", (int)w[i],
		    (unsigned long long)peak_rss_kib(w[i]));
	r = raw_stats();
	for (i = 0; i < r->stats->n_workers; i++)
		ck_assert_uint_eq(r->stats->workers[i]->restarts, 0);
	infeed__frame__free_unpacked(r, NULL);
	bystander_assert(&rep, 250);
}
END_TEST

/* Bytes process @pid has read (rchar in /proc/PID/io). */
static uint64_t
rchar_of(pid_t pid)
{
	char			 path[64], line[128];
	unsigned long long	 n = 0;
	FILE			*fp;

	snprintf(path, sizeof(path), "/proc/%d/io", (int)pid);
	ck_assert_ptr_nonnull(fp = fopen(path, "r"));
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (sscanf(line, "rchar: %llu", &n) == 1)
			break;
	}
	fclose(fp);
	return (n);
}

#define TAR_SAMPLES	2000

/*
 * A trainer aims at a known-bad member of a tar shard again and again
 * (start_step): every failure is named from what the worker already knows
 * ("member 'NAME' of shard 'PATH'"), and the daemon's main process reads
 * nothing of the shard for it (it used to walk the shard's headers up to
 * the member on every failure, on the event loop: 4 MB each here).
 */
START_TEST(test_bad_tar_member_named_without_reading_in_the_daemon)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	char			 path[600], name[64], extra[1024];
	uint64_t		 before, after;
	FILE			*fp;
	int			 i, rc;

	snprintf(path, sizeof(path), "%s/shard.tar", dir);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	for (i = 0; i < TAR_SAMPLES; i++) {
		snprintf(name, sizeof(name), "s%05d.cls", i);
		tar_member(fp, name, "1", 1);
		snprintf(name, sizeof(name), "s%05d.jpg", i);
		tar_member(fp, name, "not an image", 12);
	}
	memset(extra, 0, 1024);
	ck_assert_uint_eq(fwrite(extra, 1, 1024, fp), 1024);
	ck_assert_int_eq(fclose(fp), 0);
	snprintf(extra, sizeof(extra), "[dataset shards]\ntype = tar\n"
	    "shards = %s\n", path);
	restart(extra, "2");
	before = rchar_of(infeedd_pid);
	for (i = 0; i < 20; i++) {
		f = client();
		infeed_options_init(&o);
		o.transform = "Resize(32), CenterCrop(32), ToTensor()";
		o.start_step = TAR_SAMPLES - 1;
		ck_assert_msg(infeed_attach(f, "shards", &o, NULL) ==
		    INFEED_OK, "%s", infeed_error(f));
		rc = infeed_next(f, &st);
		ck_assert_int_eq(rc, INFEED_ERR_DAEMON);
		ck_assert_int_eq(infeed_daemon_code(f), 8);
		/* (Slots ahead may fail first: every member is bad.) */
		ck_assert_msg(strstr(infeed_error(f), "member 's0") != NULL &&
		    strstr(infeed_error(f), ".jpg' of shard") != NULL, "%s",
		    infeed_error(f));
		infeed_free(f);
	}
	after = rchar_of(infeedd_pid);
	ck_assert_msg(after - before < 512 * 1024, "the daemon's main "
	    "process read %llu bytes for 20 failures",
	    (unsigned long long)(after - before));
}
END_TEST

/*
 * A connection that never says Hello is closed after the Hello wait (10
 * s; 3 here, through INFEED_HELLO_WAIT_S), so silent connections cannot
 * hold max_clients (or the spare descriptor) for ever.
 */
START_TEST(test_silent_connection_closed)
{
	uint64_t	t0;
	int		fd, closed = 0;

	infeedd_stop();
	ck_assert_int_eq(setenv("INFEED_HELLO_WAIT_S", "3", 1), 0);
	infeedd_start(NULL);
	ck_assert_int_eq(unsetenv("INFEED_HELLO_WAIT_S"), 0);
	t0 = now_ms();
	fd = raw_connect();
	while (!closed && now_ms() - t0 < 8000)
		closed = raw_closed(fd);
	ck_assert_msg(closed, "a silent connection stayed open 8 s (the "
	    "Hello wait is 3 s here)");
	ck_assert_uint_ge(now_ms() - t0, 2500);
	close(fd);
}
END_TEST

/* Whether step @st of epoch 0 is @smp's step @step, with raw's bytes. */
static void
check_raw_step(struct sampler *smp, const struct infeed_step *st,
    uint64_t step)
{
	const uint8_t	*data = st->data;
	uint64_t	 want[8], k;
	unsigned	 j;

	ck_assert_uint_eq(st->epoch, 0);
	ck_assert_uint_eq(st->step, step);
	ck_assert_uint_le(st->rows, 8);
	ck_assert_uint_eq(sampler_step_indices(smp, 0, step, want), st->rows);
	for (k = 0; k < st->rows; k++) {
		ck_assert_msg(st->indices[k] == want[k], "step %llu row %llu: "
		    "index %llu where %llu was due", (unsigned long long)step,
		    (unsigned long long)k, (unsigned long long)st->indices[k],
		    (unsigned long long)want[k]);
		for (j = 0; j < RAW_BYTES; j++)
			ck_assert_msg(data[k * RAW_BYTES + j] ==
			    raw_byte(want[k], j), "step %llu row %llu: byte "
			    "%u is not sample %llu's", (unsigned long long)step,
			    (unsigned long long)k, j,
			    (unsigned long long)want[k]);
		ck_assert_int_eq(st->labels[k],
		    (int32_t)((want[k] * 3) % RAW_CLASSES));
	}
}

/* Worker @i's state in Stats is @state. */
static bool
worker_state_is(unsigned i, const char *state)
{
	Infeed__Frame	*r = raw_stats();
	bool		 is;

	is = r->stats->n_workers > i && r->stats->workers[i]->state != NULL &&
	    strcmp(r->stats->workers[i]->state, state) == 0;
	infeed__frame__free_unpacked(r, NULL);
	return (is);
}

#define TAKEOVER_STOP_MS	5000	/* the worker stays stopped */
#define TAKEOVER_HELD		4	/* steps held at the SIGCONT: every slot */

/*
 * A stopped worker does not hold its trainer for job_timeout (issue 39,
 * item 2): one of two workers is stopped (SIGSTOP) with a job of a
 * trainer taking a step every 10 ms; its job is taken over, so the
 * trainer's longest wait between steps stays under 2.5 s (job_timeout is
 * 10 s) and every step is the sampler's, in order, with raw's bytes; a
 * bystander is served within 250 ms meanwhile.  The stopped worker was
 * killed before the rows of its job went out: with a step held in every
 * slot, SIGCONT can make nothing of it write, and the held steps' bytes
 * stay as they were.  Stats count the takeover on the stopped worker.
 */
START_TEST(test_stopped_workers_job_taken_over)
{
	struct infeed_options	 o;
	struct infeed_step	 st, held[TAKEOVER_HELD];
	struct bystander	 b;
	struct bystander_report	 br;
	struct sampler		 smp;
	struct infeed		*f;
	Infeed__Frame		*r;
	uint8_t			 copy[TAKEOVER_HELD][8 * RAW_BYTES];
	uint64_t		 step = 0, t0, last, gap, worst = 0, stop_at;
	pid_t			 w[4], victim;
	unsigned		 i;
	bool			 started = false;

	restart("job_timeout = 10s", "2");
	ck_assert_int_eq(daemon_worker_pids(w, 4), 2);
	r = raw_stats();
	ck_assert_uint_eq(r->stats->n_workers, 2);
	victim = r->stats->workers[0]->pid;
	infeed__frame__free_unpacked(r, NULL);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 1;
	o.buffer_size = TAKEOVER_HELD;
	o.shuffle = true;
	o.seed = 39;
	raw_oracle(&smp, &o);
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	t0 = last = now_ms();
	stop_at = t0 + 1000;
	while (now_ms() < stop_at + TAKEOVER_STOP_MS) {
		if (victim > 0 && now_ms() >= stop_at) {
			/* Worker 0 takes the next job: the trainer's. */
			ck_assert_int_eq(kill(victim, SIGSTOP), 0);
			stop_at = now_ms();
			victim = -victim;
		}
		if (victim < 0 && !started && worker_state_is(0, "busy")) {
			/* Only now: none of its jobs goes to the stopped one. */
			bystander_start(&b);
			started = true;
		}
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		gap = now_ms() - last;
		worst = gap > worst ? gap : worst;
		check_raw_step(&smp, &st, step++);
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
		last = now_ms();
		usleep(10000);
	}
	ck_assert_msg(started, "the stopped worker was never given a job");
	victim = -victim;
	fprintf(stderr, "test_stopped_workers_job_taken_over: %llu steps, the "
	    "longest wait between two %llu ms, one of two workers stopped "
	    "for %d ms\n", (unsigned long long)step,
	    (unsigned long long)worst, TAKEOVER_STOP_MS);
	ck_assert_msg(worst < 2500, "the trainer waited %llu ms for a step "
	    "behind a stopped worker", (unsigned long long)worst);
	/* Every slot held, then the stopped worker let go on. */
	for (i = 0; i < TAKEOVER_HELD; i++) {
		ck_assert_int_eq(infeed_next(f, &held[i]), INFEED_OK);
		check_raw_step(&smp, &held[i], step++);
		memcpy(copy[i], held[i].data, held[i].rows * RAW_BYTES);
	}
	ck_assert_msg(kill(victim, 0) == -1 && errno == ESRCH, "the stopped "
	    "worker (pid %d) was not killed when its job was taken over",
	    (int)victim);
	(void)kill(victim, SIGCONT);
	usleep(300000);
	for (i = 0; i < TAKEOVER_HELD; i++) {
		ck_assert_msg(memcmp(copy[i], held[i].data, held[i].rows *
		    RAW_BYTES) == 0, "a held step changed after the SIGCONT");
		check_raw_step(&smp, &held[i], held[i].step);
		ck_assert_int_eq(infeed_release(f, &held[i]), INFEED_OK);
	}
	bystander_stop(&b, &br);
	bystander_assert(&br, 250);
	r = raw_stats();
	ck_assert_uint_eq(r->stats->workers[0]->taken_over, 1);
	ck_assert_uint_eq(r->stats->workers[0]->stuck, 0);
	ck_assert_uint_eq(r->stats->workers[0]->restarts, 1);
	ck_assert_uint_eq(r->stats->workers[1]->taken_over, 0);
	infeed__frame__free_unpacked(r, NULL);
	sampler_clear(&smp);
	infeed_free(f);
}
END_TEST

static Suite *
faults_suite(void)
{
	Suite	*s = suite_create("faults");
	TCase	*tc = tcase_create("daemon");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_killed_workers_blame_no_sample);
	tcase_add_test(tc, test_workers_named_for_operators);
	tcase_add_test(tc, test_worker_crash_fails_the_test);
	tcase_add_test(tc, test_stopped_worker_replaced);
	tcase_add_test(tc, test_worker_stopped_in_its_start_replaced);
	tcase_add_test(tc, test_unread_worker_socket_does_not_freeze);
	tcase_add_test(tc, test_sigterm_with_stuck_worker);
	tcase_add_test(tc, test_workers_forked_from_a_process_without_clients);
	tcase_add_test(tc, test_fork_server_death_is_survived_and_said);
	tcase_add_test(tc, test_unread_replies_bound_memory);
	tcase_add_test(tc, test_log_injection);
	tcase_add_test(tc, test_log_injection_files_session_name);
	tcase_add_test(tc, test_imagefolder_links_stay_inside_root);
	tcase_add_test(tc, test_metrics_tricklers_bounded);
	tcase_add_test(tc, test_metrics_out_of_descriptors_pauses);
	tcase_add_test(tc, test_log_rate_limited_per_client);
	tcase_add_test(tc, test_out_of_descriptors_clients_refused);
	tcase_add_test(tc, test_writable_ring_steers_nothing);
	tcase_add_test(tc, test_session_ids_unique_across_restarts);
	tcase_add_test(tc, test_file_replaced_under_session_keeps_serving);
	tcase_add_test(tc, test_sigterm_with_held_step_and_waiting_next);
	tcase_add_test(tc, test_reconnect_timeout_runs_out);
	tcase_add_test(tc, test_reload_storm_during_attach_and_detach);
	tcase_add_test(tc, test_distributed_exactly_once_through_a_restart);
	tcase_add_test(tc, test_connect_times_out_on_a_silent_daemon);
	tcase_add_test(tc, test_burst_from_one_client_bounds_anothers_delay);
	tcase_add_test(tc, test_workers_keep_no_ring_of_an_ended_session);
	tcase_add_test(tc, test_workers_let_kept_ring_memory_go_with_the_daemon);
	tcase_add_test(tc, test_retired_stopped_worker_replaced);
	tcase_add_test(tc, test_silent_connection_closed);
	tcase_add_test(tc, test_image_bombs_refused_at_image_memory_max);
	tcase_add_test(tc,
	    test_bad_tar_member_named_without_reading_in_the_daemon);
	suite_add_tcase(s, tc);

	/* A stopped worker's job taken over (issue 39, item 2). */
	tc = tcase_create("takeover");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_stopped_workers_job_taken_over);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(faults_suite()));
}
