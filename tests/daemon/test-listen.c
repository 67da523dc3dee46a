/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/listen.c, on a real event base and peers (over
 * unit-daemon.c's pool of one worker): a socket of its own at a path,
 * mode 0660, removed at listen_free(); every waiting connection accepted
 * into the peers; a connection over max_clients accepted only to be
 * refused with RESOURCE_EXHAUSTED naming the cap; and, out of file
 * descriptors, the spare given up so that one waiting client hears why
 * (RESOURCE_EXHAUSTED naming LimitNOFILE=), then accepting paused for
 * LISTEN_RETRY_MS (not a second) and resumed.
 */

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>

#include "config.h"
#include "listen.h"
#include "log.h"
#include "peers.h"
#include "unit-daemon.h"
#include "wire.h"
#include "runner.h"

#define MAX_CLIENTS	2
#define DEADLINE_MS	5000

static char		 rundir[PATH_MAX];
static char		 tmpdir[PATH_MAX];
static char		 sock_path[PATH_MAX];
static struct peers	*peers;
static struct listener	*listener;

/* A configuration of one dataset, max_clients 2; peers; a listener. */
static void
setup(void)
{
	char			 path[PATH_MAX], text[512];

	make_test_dir(rundir, tmpdir, sizeof(tmpdir));
	unit_fmt(text, sizeof(text),
	    "[infeedd]\n"
	    "workers = 1\n"
	    "max_clients = %d\n"
	    "[dataset small]\n"
	    "type = synthetic\n"
	    "samples = 12\n"
	    "shape = 2\n"
	    "dtype = uint8\n", MAX_CLIENTS);
	unit_fmt(path, sizeof(path), "%s/infeedd.conf", tmpdir);
	write_file(path, text, strlen(text));
	unit_daemon_start(path, 1, 1);
	peers = unit_peers_new();
	unit_fmt(sock_path, sizeof(sock_path), "%s/s", tmpdir);
	ck_assert_ptr_nonnull(listener = listen_open(base, sock_path, peers));
}

static void
teardown(void)
{
	listen_free(listener);
	listener = NULL;
	peers_free(peers);
	peers = NULL;
	unit_daemon_stop();
}

/* A non-blocking client connected to the listener. */
static int
client(void)
{
	struct sockaddr_un	sun;
	int			fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	ck_assert_uint_lt(strlen(sock_path), sizeof(sun.sun_path));
	strcpy(sun.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ne(fd, -1);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0,
	    "connect %s: %s", sock_path, strerror(errno));
	ck_assert_int_ne(fcntl(fd, F_SETFL, O_NONBLOCK), -1);
	return (fd);
}

/* Turn the loop until the peers hold @n connections; false at the deadline. */
static bool
run_until_peers(unsigned n)
{
	uint64_t	deadline = now_ms() + DEADLINE_MS;

	while (peers_count(peers) != n) {
		if (now_ms() > deadline)
			return (false);
		event_base_loop(base, EVLOOP_ONCE);
	}
	return (true);
}

/* Send a Hello on @fd, turn the loop until an answer comes; return it. */
static Infeed__Frame *
hello(int fd)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r = NULL;
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	struct wire_in	 in;
	uint64_t	 deadline = now_ms() + DEADLINE_MS;
	uint8_t		*buf;
	size_t		 len;
	char		*cause = NULL;

	h.protocol_version = WIRE_PROTOCOL_VERSION;
	f.msg_case = INFEED__FRAME__MSG_HELLO;
	f.hello = &h;
	ck_assert_ptr_nonnull(buf = wire_pack(&f, INFEED_DEFAULT_MAX_FRAME,
	    &len));
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	free(buf);
	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	while (wire_in_frame(&in, &r, &cause) != WIRE_OK) {
		ck_assert_msg(now_ms() < deadline, "no answer to Hello");
		event_base_loop(base, EVLOOP_ONCE);
		(void)wire_in_recv(&in, fd);
	}
	wire_in_clear(&in);
	return (r);
}

/* The Error @r must be RESOURCE_EXHAUSTED saying @what. */
static void
assert_refused(Infeed__Frame *r, const char *what)
{
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
	ck_assert_int_eq(r->error->code,
	    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(r->error->message, what) != NULL,
	    "'%s' does not say '%s'", r->error->message, what);
	infeed__frame__free_unpacked(r, NULL);
}

/*
 * The socket is infeedd's own, mode 0660, every waiting connection goes
 * to the peers (a Hello is welcomed), and listen_free() removes the file.
 */
START_TEST(test_accepts_every_waiting_connection)
{
	struct stat	 sb;
	Infeed__Frame	*r;
	int		 a, b;

	ck_assert_int_eq(stat(sock_path, &sb), 0);
	ck_assert(S_ISSOCK(sb.st_mode));
	ck_assert_int_eq(sb.st_mode & 0777, 0660);
	a = client();
	b = client();
	ck_assert(run_until_peers(2));
	r = hello(a);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_WELCOME);
	infeed__frame__free_unpacked(r, NULL);
	close(a);
	close(b);
	listen_free(listener);
	listener = NULL;
	ck_assert_int_eq(stat(sock_path, &sb), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

/* A connection over max_clients is accepted only to hear why it cannot stay. */
START_TEST(test_refuses_over_max_clients)
{
	int	fd[MAX_CLIENTS + 1], i;
	char	want[64];

	for (i = 0; i < MAX_CLIENTS + 1; i++)
		fd[i] = client();
	ck_assert(run_until_peers(MAX_CLIENTS + 1));
	snprintf(want, sizeof(want), "already serves %d clients (max_clients",
	    MAX_CLIENTS);
	assert_refused(hello(fd[MAX_CLIENTS]), want);
	for (i = 0; i < MAX_CLIENTS + 1; i++)
		close(fd[i]);
}
END_TEST

/*
 * Out of descriptors: the spare is given up to accept one waiting client,
 * which is refused naming LimitNOFILE=; accepting pauses LISTEN_RETRY_MS
 * (the other waiting client stays in the backlog meanwhile), then goes on.
 */
START_TEST(test_out_of_descriptors_refuses_one_and_pauses)
{
	struct rlimit	 rl, low;
	uint64_t	 t0, waited;
	int		 a, b, lowest;

	a = client();
	b = client();
	/* No descriptor above those open now: accept4() fails, EMFILE. */
	ck_assert_int_ne(lowest = open("/dev/null", O_RDONLY | O_CLOEXEC), -1);
	close(lowest);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	low = rl;
	low.rlim_cur = (rlim_t)lowest;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	ck_assert(run_until_peers(1));		/* the one the spare let in */
	t0 = now_ms();
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	/* Paused: b waits in the backlog, though descriptors are back. */
	while (now_ms() - t0 < LISTEN_RETRY_MS / 2)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_uint_eq(peers_count(peers), 1);
	ck_assert(run_until_peers(2));		/* the retry took b */
	waited = now_ms() - t0;
	ck_assert_msg(waited + 5 >= LISTEN_RETRY_MS && waited < 1000,
	    "accepting resumed after %llu ms, not %d",
	    (unsigned long long)waited, LISTEN_RETRY_MS);
	assert_refused(hello(a), "run out of file descriptors (the open "
	    "files limit, LimitNOFILE=)");
	close(a);
	close(b);
}
END_TEST

static Suite *
listen_suite(void)
{
	Suite	*s = suite_create("listen");
	TCase	*tc = tcase_create("accept");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_accepts_every_waiting_connection);
	tcase_add_test(tc, test_refuses_over_max_clients);
	tcase_add_test(tc, test_out_of_descriptors_refuses_one_and_pauses);
	suite_add_tcase(s, tc);
	return (s);
}


/* Run every test in a directory of its own, then remove it. */
int
main(void)
{
	log_init("test-listen", getenv("TEST_VERBOSE") != NULL ? 1 : -1);
	return (run_suite_in_dir(listen_suite(), "test-listen", rundir,
	    sizeof(rundir)));
}
