/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/peer.c: an in-process daemon (daemon_start()
 * without a listener, one worker) is handed one end of a socketpair, as
 * listen.c hands it a connection, and the test is the client on the other
 * end, writing frames and reading the replies while it turns the daemon's
 * loop.  Hello is answered with Welcome and its request_id; a frame
 * before Hello, an oversized frame, descriptors with a request that takes
 * none and more descriptors than a frame carries each get an Error and
 * the peer closed, with no descriptor left behind; a client over
 * max_clients is refused; a client that does not read its replies stops
 * being served past the high mark (its requests wait) and is served
 * again, every request answered in order, once it reads.
 */

#include <sys/socket.h>

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

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "wire.h"
#include "runner.h"

#define DEADLINE_MS	10000
#define FLOOD		30000	/* requests of the client that won't read */

/* The client's end of one connection. */
struct client {
	int		fd;
	uint64_t	id;		/* the daemon's peer id */
	struct wire_in	in;
};

static char		 rundir[PATH_MAX];	/* the run's, made by the runner */
static char		 tmpdir[PATH_MAX];
static char		 conf_path[PATH_MAX];
static struct daemon	*d;

/* A daemon on a configuration of one synthetic dataset and @extra. */
static void
start(const char *extra)
{
	struct daemon_args	 args = { NULL, NULL, 0, false, false, false };
	FILE			*f;

	/* One directory a test, in the run's (run_suite_in_dir()). */
	make_test_dir(rundir, tmpdir, sizeof(tmpdir));
	ck_assert_int_lt(snprintf(conf_path, sizeof(conf_path),
	    "%s/infeedd.conf", tmpdir), (int)sizeof(conf_path));
	ck_assert_ptr_nonnull(f = fopen(conf_path, "w"));
	fprintf(f, "[infeedd]\nworkers = 1\nmemory_budget = 16M\n%s"
	    "[dataset u8]\ntype = synthetic\nsamples = 37\nshape = 3,2\n"
	    "dtype = uint8\nclasses = 5\n", extra);
	ck_assert_int_eq(fclose(f), 0);
	log_init("test-peer", -1);
	signal(SIGPIPE, SIG_IGN);
	args.config_path = conf_path;
	ck_assert_ptr_nonnull(d = daemon_start(&args));
}

static void
setup(void)
{
	start("");
}

static void
teardown(void)
{
	daemon_free(d);
	d = NULL;
	unlink(conf_path);
	rmdir(tmpdir);
}

/* One turn of the daemon's loop, not waiting. */
static void
pass(void)
{
	event_base_loop(d->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

/* A connection to the daemon; its end gets a send buffer of @sndbuf. */
static void
connect_client(struct client *c, int sndbuf)
{
	int	sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0, sv), 0);
	if (sndbuf > 0)
		ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF,
		    &sndbuf, sizeof(sndbuf)), 0);
	c->fd = sv[1];
	c->id = peers_accept(d->peers, sv[0]);
	wire_in_init(&c->in, d->conf->max_frame_size);
}

static void
client_close(struct client *c)
{
	close(c->fd);
	wire_in_clear(&c->in);
}

/* Send @len bytes (and @nfds descriptors with the first), turning the loop. */
static void
client_write(struct client *c, const void *buf, size_t len, const int *fds,
    size_t nfds)
{
	const uint8_t	*p = buf;
	uint64_t	 deadline = clock_now_ms() + DEADLINE_MS;
	ssize_t		 n;

	while (len > 0) {
		ck_assert_msg(clock_now_ms() < deadline, "the daemon read nothing "
		    "for %d ms", DEADLINE_MS);
		n = wire_send_fds(c->fd, p, len, fds, nfds);
		if (n == -1) {
			ck_assert_int_eq(errno, EAGAIN);
			pass();
			continue;
		}
		nfds = 0;
		p += n;
		len -= (size_t)n;
	}
}

/* Send request @f with @id (and descriptors). */
static void
client_send(struct client *c, Infeed__Frame *f, uint64_t id, const int *fds,
    size_t nfds)
{
	uint8_t	*buf;
	size_t	 len;

	f->has_request_id = 1;
	f->request_id = id;
	ck_assert_ptr_nonnull(buf = wire_pack(f, INFEED_DEFAULT_MAX_FRAME,
	    &len));
	client_write(c, buf, len, fds, nfds);
	free(buf);
}

static void
send_hello(struct client *c, uint64_t id)
{
	Infeed__Frame	f = INFEED__FRAME__INIT;
	Infeed__Hello	h = INFEED__HELLO__INIT;

	h.protocol_version = WIRE_PROTOCOL_VERSION;
	h.client_name = (char *)"test-peer";
	f.msg_case = INFEED__FRAME__MSG_HELLO;
	f.hello = &h;
	client_send(c, &f, id, NULL, 0);
}

static void
send_list(struct client *c, uint64_t id, const int *fds, size_t nfds)
{
	Infeed__Frame		f = INFEED__FRAME__INIT;
	Infeed__ListDatasets	l = INFEED__LIST_DATASETS__INIT;

	f.msg_case = INFEED__FRAME__MSG_LIST_DATASETS;
	f.list_datasets = &l;
	client_send(c, &f, id, fds, nfds);
}

/*
 * The next reply, turning the loop until it comes; NULL at the end of
 * the stream.  Free with infeed__frame__free_unpacked().
 */
static Infeed__Frame *
client_recv(struct client *c)
{
	uint64_t	 deadline = clock_now_ms() + DEADLINE_MS;
	Infeed__Frame	*f;
	char		*cause = NULL;
	ssize_t		 n;

	for (;;) {
		switch (wire_in_frame(&c->in, &f, &cause)) {
		case WIRE_OK:
			return (f);
		case WIRE_BAD:
			ck_abort_msg("bad reply: %s", cause);
			break;
		case WIRE_AGAIN:
			break;
		}
		ck_assert_msg(clock_now_ms() < deadline, "no reply in %d ms",
		    DEADLINE_MS);
		n = wire_in_recv(&c->in, c->fd);
		if (n == 0)
			return (NULL);
		if (n == -1) {
			ck_assert_int_eq(errno, EAGAIN);
			pass();
		}
	}
}

/* The next reply is an Error with @code to request @id; returns it. */
static void
expect_error(struct client *c, uint64_t id, Infeed__ErrorCode code,
    const char *says)
{
	Infeed__Frame	*f;

	ck_assert_ptr_nonnull(f = client_recv(c));
	ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_ERROR);
	ck_assert_int_eq(f->error->code, code);
	ck_assert_msg(strstr(f->error->message, says) != NULL,
	    "'%s' does not say '%s'", f->error->message, says);
	ck_assert(f->has_request_id == (id != 0));
	ck_assert_uint_eq(f->request_id, id);
	infeed__frame__free_unpacked(f, NULL);
}

/* The daemon closed the connection and forgot the peer. */
static void
expect_closed(struct client *c)
{
	ck_assert_ptr_null(client_recv(c));
	ck_assert(!peers_has(d->peers, c->id));
}

/* Hello: a Welcome with the protocol, the frame limit and the request_id. */
START_TEST(test_hello_welcomed)
{
	struct client	 c;
	Infeed__Frame	*f;

	connect_client(&c, 0);
	send_hello(&c, 41);
	ck_assert_ptr_nonnull(f = client_recv(&c));
	ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_WELCOME);
	ck_assert_uint_eq(f->welcome->protocol_version,
	    WIRE_PROTOCOL_VERSION);
	ck_assert_uint_eq(f->welcome->max_frame_size, d->conf->max_frame_size);
	ck_assert(f->has_request_id);
	ck_assert_uint_eq(f->request_id, 41);
	infeed__frame__free_unpacked(f, NULL);
	send_list(&c, 42, NULL, 0);
	ck_assert_ptr_nonnull(f = client_recv(&c));
	ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_DATASET_LIST);
	ck_assert_uint_eq(f->dataset_list->n_datasets, 1);
	ck_assert_str_eq(f->dataset_list->datasets[0]->name, "u8");
	ck_assert_uint_eq(f->request_id, 42);
	infeed__frame__free_unpacked(f, NULL);
	ck_assert_uint_eq(peers_count(d->peers), 1);
	client_close(&c);
	/* The hang-up is read, and the peer freed. */
	while (peers_has(d->peers, c.id))
		pass();
	ck_assert_uint_eq(peers_count(d->peers), 0);
}
END_TEST

/* A request before Hello: an Error, then the connection closes. */
START_TEST(test_request_before_hello_refused_and_closed)
{
	struct client	c;

	connect_client(&c, 0);
	send_list(&c, 7, NULL, 0);
	expect_error(&c, 7, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
	    "ListDatasets before Hello");
	expect_closed(&c);
	client_close(&c);
}
END_TEST

/*
 * A frame longer than max_frame_size: BAD_FRAME saying so (before the
 * daemon buffers it), then the connection closes.
 */
START_TEST(test_oversized_frame_refused_and_closed)
{
	struct client	c;
	uint8_t		hdr[4] = { 0xff, 0xff, 0xff, 0x7f };

	connect_client(&c, 0);
	send_hello(&c, 1);
	infeed__frame__free_unpacked(client_recv(&c), NULL);
	client_write(&c, hdr, sizeof(hdr), NULL, 0);
	expect_error(&c, 0, INFEED__ERROR_CODE__ERROR_BAD_FRAME,
	    "larger than the maximum");
	expect_closed(&c);
	client_close(&c);
}
END_TEST

/*
 * A request that takes no descriptor comes with one: BAD_FRAME, the
 * connection closed and the descriptor closed in the daemon.
 */
START_TEST(test_fds_with_a_request_closed_with_the_peer)
{
	struct client	c;
	int		p[2], before;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	connect_client(&c, 0);
	send_hello(&c, 1);
	infeed__frame__free_unpacked(client_recv(&c), NULL);
	before = count_fds(0, NULL);
	send_list(&c, 2, p, 2);
	expect_error(&c, 2, INFEED__ERROR_CODE__ERROR_BAD_FRAME,
	    "came with file descriptors");
	expect_closed(&c);
	/* The daemon's end and both descriptors it received are closed. */
	ck_assert_int_eq(count_fds(0, NULL), before - 1);
	client_close(&c);
	close(p[0]);
	close(p[1]);
}
END_TEST

/*
 * More descriptors than a frame carries (cut by the kernel, MSG_CTRUNC):
 * BAD_FRAME, closed, none of them kept.
 */
START_TEST(test_too_many_fds_refused_and_closed)
{
	struct client	c;
	int		devnull, before;

	ck_assert_int_ge(devnull = open("/dev/null", O_RDONLY | O_CLOEXEC),
	    0);
	connect_client(&c, 0);
	send_hello(&c, 1);
	infeed__frame__free_unpacked(client_recv(&c), NULL);
	before = count_fds(0, NULL);
	send_fds(c.fd, devnull, 8);
	expect_error(&c, 0, INFEED__ERROR_CODE__ERROR_BAD_FRAME,
	    "unexpected file descriptors");
	expect_closed(&c);
	ck_assert_int_eq(count_fds(0, NULL), before - 1);
	client_close(&c);
	close(devnull);
}
END_TEST

/* Over max_clients: the Hello gets RESOURCE_EXHAUSTED, then it closes. */
START_TEST(test_client_over_max_clients_refused)
{
	struct client	 a, b;
	Infeed__Frame	*f;

	teardown();
	start("max_clients = 1\n");
	connect_client(&a, 0);
	connect_client(&b, 0);
	send_hello(&b, 5);
	expect_error(&b, 5, INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED,
	    "max_clients");
	expect_closed(&b);
	send_hello(&a, 6);
	ck_assert_ptr_nonnull(f = client_recv(&a));
	ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_WELCOME);
	infeed__frame__free_unpacked(f, NULL);
	client_close(&a);
	client_close(&b);
}
END_TEST

/*
 * A client that sends requests and reads no reply: once its replies pass
 * the high mark (the daemon's end has a 4 KiB send buffer, so they wait
 * in the daemon) the daemon stops reading and handling them, and the
 * queue stops growing with most still unanswered; when the client reads,
 * every request is answered, in order, and the daemon reads again.
 */
START_TEST(test_backpressure_pauses_then_serves_in_order)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__ListDatasets	 l = INFEED__LIST_DATASETS__INIT;
	struct client		 c;
	struct peer_probe	 pp;
	Infeed__Frame		*r;
	uint8_t			*buf, *all;
	size_t			 len, one, reply;
	uint64_t		 id, deadline;
	unsigned		 i;

	connect_client(&c, 4096);
	send_hello(&c, 1);
	infeed__frame__free_unpacked(client_recv(&c), NULL);
	/* How long one reply is. */
	send_list(&c, 2, NULL, 0);
	ck_assert_ptr_nonnull(r = client_recv(&c));
	reply = WIRE_HEADER_SIZE + infeed__frame__get_packed_size(r);
	infeed__frame__free_unpacked(r, NULL);
	/*
	 * FLOOD ListDatasets, more than the daemon reads at once, as a
	 * pipelining client sends them.
	 */
	f.msg_case = INFEED__FRAME__MSG_LIST_DATASETS;
	f.list_datasets = &l;
	f.has_request_id = 1;
	f.request_id = UINT32_MAX;	/* the longest id sent */
	ck_assert_ptr_nonnull(buf = wire_pack(&f, INFEED_DEFAULT_MAX_FRAME,
	    &one));
	free(buf);
	ck_assert_ptr_nonnull(all = malloc(FLOOD * one));
	for (i = len = 0; i < FLOOD; i++) {
		f.request_id = 100 + i;
		buf = wire_pack(&f, INFEED_DEFAULT_MAX_FRAME, &one);
		memcpy(all + len, buf, one);
		len += one;
		free(buf);
	}
	ck_assert_uint_gt(len, 64 * 1024);
	client_write(&c, all, len, NULL, 0);
	free(all);
	deadline = clock_now_ms() + DEADLINE_MS;
	do {
		pass();
		ck_assert_int_eq(peers_probe(d->peers, c.id, &pp), 0);
		ck_assert_msg(clock_now_ms() < deadline, "never paused");
	} while (pp.reading);
	ck_assert_uint_gt(pp.queued, 256 * 1024);
	/* Paused: the loop turns, nothing more is handled or read. */
	len = pp.queued;
	for (i = 0; i < 50; i++)
		pass();
	ck_assert_int_eq(peers_probe(d->peers, c.id, &pp), 0);
	ck_assert(!pp.reading);
	ck_assert_uint_eq(pp.queued, len);
	/* ... with most requests still unanswered, waiting. */
	ck_assert_uint_lt(pp.queued, FLOOD / 2 * reply);
	/* The client reads: every request answered, in order. */
	for (id = 100; id < 100 + FLOOD; id++) {
		ck_assert_ptr_nonnull(r = client_recv(&c));
		ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_DATASET_LIST);
		ck_assert_uint_eq(r->request_id, id);
		infeed__frame__free_unpacked(r, NULL);
	}
	ck_assert_int_eq(peers_probe(d->peers, c.id, &pp), 0);
	ck_assert(pp.reading);
	ck_assert_uint_eq(pp.queued, 0);
	client_close(&c);
}
END_TEST

static Suite *
peer_suite(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("peer");

	tc = tcase_create("frames");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_hello_welcomed);
	tcase_add_test(tc, test_request_before_hello_refused_and_closed);
	tcase_add_test(tc, test_oversized_frame_refused_and_closed);
	tcase_add_test(tc, test_fds_with_a_request_closed_with_the_peer);
	tcase_add_test(tc, test_too_many_fds_refused_and_closed);
	tcase_add_test(tc, test_client_over_max_clients_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("backpressure");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_backpressure_pauses_then_serves_in_order);
	suite_add_tcase(s, tc);

	return (s);
}

int
main(void)
{
	return (run_suite_in_dir(peer_suite(), "test-peer", rundir,
	    sizeof(rundir)));
}
