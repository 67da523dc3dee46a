/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/transport.c over socketpairs: messages framed
 * whole and in order (wire frames on a stream, records on SOCK_SEQPACKET),
 * partial writes through a small SO_SNDBUF finished by the write event,
 * the high and low marks pausing and resuming reading, every descriptor
 * closed exactly once on every path (sent, queued then freed, broken,
 * forked), and a receive that refuses cut ancillary data (MSG_CTRUNC),
 * surplus descriptors and cut records, closing what came.
 */

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>

#include "transport.h"
#include "wire.h"
#include "runner.h"

#define BIG		(1024 * 1024)
#define HIGH		(64 * 1024)
#define LOW		(16 * 1024)

/* What the owner of a transport heard. */
struct heard {
	unsigned	reads;
	unsigned	timeouts;
	unsigned	drained;
	unsigned	broken;
	int		error;
};

static struct event_base	*base;
static int			 sv[2] = { -1, -1 };	/* [0]: the transport's */
static int			 pipe_fds[2] = { -1, -1 };	/* to pass */
static struct heard		 heard;

/* Whether @fd is an open descriptor. */
static int
is_open(int fd)
{
	return (fcntl(fd, F_GETFD) != -1);
}

static void
read_cb(void *arg)
{
	((struct heard *)arg)->reads++;
}

static void
timeout_cb(void *arg)
{
	((struct heard *)arg)->timeouts++;
}

static void
drained_cb(void *arg)
{
	((struct heard *)arg)->drained++;
}

static void
broken_cb(void *arg, int error)
{
	((struct heard *)arg)->broken++;
	((struct heard *)arg)->error = error;
}

static const struct transport_events events = {
	.read = read_cb,
	.read_timeout = timeout_cb,
	.drained = drained_cb,
	.broken = broken_cb,
};

/* A transport of @kind on sv[0], with marks @high and @low, on the loop. */
static struct transport *
make(enum transport_kind kind, size_t high, size_t low)
{
	struct transport_conf	tc = {
		.kind = kind,
		.max_frame = INFEED_DEFAULT_MAX_FRAME,
		.high = high,
		.low = low,
		.events = &events,
		.arg = &heard,
	};
	struct transport	*t;

	ck_assert_ptr_nonnull(t = transport_new(base, sv[0], &tc));
	sv[0] = -1;		/* the transport's now */
	return (t);
}

/* A fresh loop and stream socketpair for every test. */
static void
setup(void)
{
	ck_assert_ptr_nonnull(base = event_base_new());
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
	    sv), 0);
	ck_assert_int_eq(pipe2(pipe_fds, O_CLOEXEC), 0);
	memset(&heard, 0, sizeof(heard));
}

/* ... a SOCK_SEQPACKET pair in place of the stream. */
static void
setup_packet(void)
{
	setup();
	close(sv[0]);
	close(sv[1]);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
	    sv), 0);
}

static void
teardown(void)
{
	if (sv[0] != -1)
		close(sv[0]);
	if (sv[1] != -1)
		close(sv[1]);
	sv[0] = sv[1] = -1;
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	event_base_free(base);
}

/* Shrink the transport's send buffer, so its messages must wait. */
static void
small_sndbuf(void)
{
	int	sndbuf = 4096;

	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf,
	    sizeof(sndbuf)), 0);
}

/* One pass of the loop, not waiting. */
static void
pass(void)
{
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

/* Byte @i of a recognisable message @tag. */
static uint8_t
pattern(unsigned tag, size_t i)
{
	return ((uint8_t)(i * 7 + tag * 31 + (i >> 12)));
}

/* A malloc'd message of @len pattern bytes. */
static uint8_t *
message(unsigned tag, size_t len)
{
	uint8_t	*m;
	size_t	 i;

	ck_assert_ptr_nonnull(m = malloc(len));
	for (i = 0; i < len; i++)
		m[i] = pattern(tag, i);
	return (m);
}

/* A packed Hello naming @name. */
static uint8_t *
pack_hello(const char *name, size_t *len)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT;
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	uint8_t		*buf;

	h.protocol_version = WIRE_PROTOCOL_VERSION;
	h.client_name = (char *)name;
	f.msg_case = INFEED__FRAME__MSG_HELLO;
	f.hello = &h;
	ck_assert_ptr_nonnull(buf = wire_pack(&f, INFEED_DEFAULT_MAX_FRAME,
	    len));
	return (buf);
}

/*
 * Frames sent through one stream transport come out of another whole, in
 * order, each with the descriptors sent with it and no other's.
 */
START_TEST(test_stream_frames_whole_with_their_fds)
{
	static const char *const names[] = { "one", "two", "three" };
	struct transport	*a, *b;
	struct transport_conf	 tc = {
		.kind = TRANSPORT_STREAM,
		.max_frame = INFEED_DEFAULT_MAX_FRAME,
		.events = &events,
		.arg = &heard,
	};
	struct wire_in		*in;
	Infeed__Frame		*f;
	uint8_t			*buf;
	size_t			 len;
	char			*cause = NULL;
	int			 fd, before, got = 0;
	unsigned		 i;

	a = make(TRANSPORT_STREAM, 0, 0);
	ck_assert_ptr_nonnull(b = transport_new(base, sv[1], &tc));
	sv[1] = -1;
	transport_read_on(b, NULL);
	before = count_fds(0, NULL);
	for (i = 0; i < 3; i++) {
		buf = pack_hello(names[i], &len);
		fd = i == 1 ? dup(pipe_fds[0]) : -1;
		ck_assert_int_eq(transport_send_consume(a, buf, len, &fd,
		    fd != -1), 0);
		free(buf);
	}
	/* Sent at once: the one descriptor went, and is closed here. */
	ck_assert_uint_eq(transport_queued(a), 0);
	ck_assert_int_eq(count_fds(0, NULL), before);
	pass();
	ck_assert_uint_ge(heard.reads, 1);
	while (transport_recv(b) > 0)
		;
	in = transport_in(b);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(wire_in_frame(in, &f, &cause), WIRE_OK);
		ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_HELLO);
		ck_assert_str_eq(f->hello->client_name, names[i]);
		ck_assert_uint_eq(wire_in_frame_fds(in), i == 1);
		if (i == 1) {
			fd = wire_in_take_fd(in);
			ck_assert(is_open(fd));
			close(fd);
			got++;
		}
		infeed__frame__free_unpacked(f, NULL);
	}
	ck_assert_int_eq(got, 1);
	ck_assert_int_eq(wire_in_frame(in, &f, &cause), WIRE_AGAIN);
	transport_free(a);
	transport_free(b);
}
END_TEST

/*
 * Through a 4 KiB SO_SNDBUF a 1 MiB message goes in pieces: what the
 * socket did not take waits (and a second message behind it), the write
 * event sends the rest as the other end reads, every byte arrives once
 * and in order, and the descriptor with the first byte only.
 */
START_TEST(test_partial_writes_finished_in_order)
{
	struct transport	*t;
	uint8_t			*big, *small, *got;
	size_t			 have = 0, total = BIG + 100;
	ssize_t			 n;
	int			 fd, nfds = 0;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 4)];
	} cbuf;
	struct msghdr		 msg;
	struct iovec		 iov;
	struct cmsghdr		*cmsg;

	small_sndbuf();
	t = make(TRANSPORT_STREAM, 0, 0);
	big = message(1, BIG);
	small = message(2, 100);
	ck_assert_ptr_nonnull(got = malloc(total));
	fd = dup(pipe_fds[0]);
	ck_assert_int_eq(transport_send_consume(t, big, BIG, &fd, 1), 0);
	/* Some went, with the descriptor, which is closed here now. */
	ck_assert_uint_eq(transport_queued(t), 1);
	ck_assert_uint_gt(transport_queued_bytes(t), 0);
	ck_assert_uint_lt(transport_queued_bytes(t), BIG);
	ck_assert(!is_open(fd));
	ck_assert_int_eq(transport_send_consume(t, small, 100, NULL, 0), 0);
	ck_assert_uint_eq(transport_queued(t), 2);
	ck_assert_uint_gt(transport_queued_bytes(t), 100);

	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	while (have < total) {
		memset(&msg, 0, sizeof(msg));
		iov.iov_base = got + have;
		iov.iov_len = total - have;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = sizeof(cbuf.buf);
		n = recvmsg(sv[1], &msg, MSG_CMSG_CLOEXEC);
		if (n == -1 && errno == EAGAIN) {
			pass();		/* the write event sends more */
			continue;
		}
		ck_assert_int_gt(n, 0);
		for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
		    cmsg = CMSG_NXTHDR(&msg, cmsg)) {
			ck_assert_uint_eq(have, 0);	/* the first byte's */
			memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
			close(fd);
			nfds++;
		}
		have += (size_t)n;
	}
	ck_assert_int_eq(nfds, 1);
	ck_assert_int_eq(memcmp(got, big, BIG), 0);
	ck_assert_int_eq(memcmp(got + BIG, small, 100), 0);
	ck_assert_uint_eq(transport_queued(t), 0);
	ck_assert_uint_eq(transport_queued_bytes(t), 0);
	transport_free(t);
	free(big);
	free(small);
	free(got);
}
END_TEST

/*
 * Corked (a client's pipelined requests being answered), what is sent
 * waits for the flush, not the loop, and then goes whole and in order,
 * the descriptors with their message; the flush uncorks, so
 * the next send goes at once.  A PACKET transport is never corked.
 */
START_TEST(test_corked_sends_wait_for_the_flush)
{
	struct transport	*t;
	uint8_t			*a, *b, *c, got[1024];
	size_t			 have = 0;
	ssize_t			 n;
	int			 fd, nfds = 0;
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * 4)];
	} cbuf;
	struct msghdr		 msg;
	struct iovec		 iov;
	struct cmsghdr		*cmsg;

	t = make(TRANSPORT_STREAM, 0, 0);
	a = message(1, 100);
	b = message(2, 200);
	c = message(3, 50);
	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	transport_cork(t);
	ck_assert_int_eq(transport_send_consume(t, a, 100, NULL, 0), 0);
	fd = dup(pipe_fds[0]);
	ck_assert_int_eq(transport_send_consume(t, b, 200, &fd, 1), 0);
	ck_assert_int_eq(transport_send_consume(t, c, 50, NULL, 0), 0);
	ck_assert_uint_eq(transport_queued(t), 3);
	pass();
	ck_assert_int_eq(recv(sv[1], got, sizeof(got), MSG_PEEK), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_eq(transport_flush(t), 0);
	ck_assert_uint_eq(transport_queued(t), 0);
	while (have < 350) {
		memset(&msg, 0, sizeof(msg));
		iov.iov_base = got + have;
		iov.iov_len = sizeof(got) - have;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = sizeof(cbuf.buf);
		ck_assert_int_gt(n = recvmsg(sv[1], &msg, MSG_CMSG_CLOEXEC), 0);
		/* With b's first byte (a read may take a's bytes too). */
		for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
		    cmsg = CMSG_NXTHDR(&msg, cmsg)) {
			ck_assert_uint_le(have, 100);
			memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
			close(fd);
			nfds++;
		}
		have += (size_t)n;
	}
	ck_assert_uint_eq(have, 350);
	ck_assert_int_eq(nfds, 1);
	ck_assert_int_eq(memcmp(got, a, 100), 0);
	ck_assert_int_eq(memcmp(got + 100, b, 200), 0);
	ck_assert_int_eq(memcmp(got + 300, c, 50), 0);
	/* Uncorked: the next goes now. */
	ck_assert_int_eq(transport_send_consume(t, a, 100, NULL, 0), 0);
	ck_assert_int_eq(recv(sv[1], got, sizeof(got), 0), 100);
	transport_free(t);
	free(a);
	free(b);
	free(c);
}
END_TEST

/*
 * Past the high mark the transport stops reading; it reads again (and
 * says so, once) only when the queue has drained to the low mark, not as
 * soon as it is back under the high one.
 */
START_TEST(test_high_and_low_marks_pause_and_resume)
{
	struct transport	*t;
	uint8_t			*m, sink[4096];
	bool			 between = false;
	unsigned		 sent = 0;

	small_sndbuf();
	t = make(TRANSPORT_STREAM, HIGH, LOW);
	transport_read_on(t, NULL);
	ck_assert(transport_reading(t));
	m = message(3, 8192);
	while (!transport_paused(t)) {
		ck_assert_uint_le(transport_queued_bytes(t), HIGH);
		ck_assert(transport_reading(t));
		ck_assert_int_eq(transport_send_consume(t, m, 8192, NULL, 0),
		    0);
		sent++;
	}
	ck_assert_uint_gt(transport_queued_bytes(t), HIGH);
	ck_assert(!transport_reading(t));
	/* Asked to read while paused: it waits for the drain. */
	transport_read_on(t, NULL);
	ck_assert(!transport_reading(t));

	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	while (heard.drained == 0) {
		if (read(sv[1], sink, sizeof(sink)) <= 0)
			ck_assert_int_eq(errno, EAGAIN);
		pass();
		if (heard.drained == 0) {
			ck_assert(transport_paused(t));
			ck_assert(!transport_reading(t));
			if (transport_queued_bytes(t) <= HIGH &&
			    transport_queued_bytes(t) > LOW)
				between = true;
		}
	}
	ck_assert_msg(between, "never seen paused between the marks");
	ck_assert_uint_le(transport_queued_bytes(t), LOW);
	ck_assert(!transport_paused(t));
	ck_assert(transport_reading(t));
	/* The rest goes; no second drain is heard. */
	while (read(sv[1], sink, sizeof(sink)) > 0 ||
	    transport_queued_bytes(t) > 0)
		pass();
	ck_assert_uint_eq(heard.drained, 1);
	ck_assert_uint_gt(sent, HIGH / 8192);
	transport_free(t);
	free(m);
}
END_TEST

/*
 * A drain that the owner's own transport_flush() finds is told from the
 * loop, not from inside the call (the owner may be in the middle of a
 * request then).
 */
START_TEST(test_drain_found_by_flush_told_from_the_loop)
{
	struct transport	*t;
	uint8_t			*m, sink[65536];

	small_sndbuf();
	t = make(TRANSPORT_STREAM, HIGH, LOW);
	transport_read_on(t, NULL);
	m = message(4, 2 * HIGH);
	ck_assert_int_eq(transport_send_consume(t, m, 2 * HIGH, NULL, 0), 0);
	ck_assert(transport_paused(t));
	ck_assert_int_eq(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	while (transport_queued_bytes(t) > 0) {
		while (read(sv[1], sink, sizeof(sink)) > 0)
			;
		ck_assert_int_eq(transport_flush(t), 0);
		ck_assert_uint_eq(heard.drained, 0);
	}
	pass();
	ck_assert_uint_eq(heard.drained, 1);
	ck_assert(!transport_paused(t));
	ck_assert(transport_reading(t));
	transport_free(t);
	free(m);
}
END_TEST

/* Nothing to read within the timeout is heard; read_off stops it. */
START_TEST(test_read_timeout_and_read_off)
{
	struct transport	*t;
	struct timeval		 tv = { 0, 20000 }, wait = { 0, 60000 };

	t = make(TRANSPORT_STREAM, 0, 0);
	transport_read_on(t, &tv);
	event_base_loopexit(base, &wait);
	event_base_dispatch(base);
	ck_assert_uint_ge(heard.timeouts, 1);
	ck_assert_uint_eq(heard.reads, 0);
	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	pass();
	ck_assert_uint_eq(heard.reads, 1);
	transport_read_off(t);
	ck_assert(!transport_reading(t));
	heard.reads = 0;
	pass();
	ck_assert_uint_eq(heard.reads, 0);
	transport_free(t);
}
END_TEST

/*
 * Reading on again without a timeout drops the one it had: libevent keeps
 * an added event's timeout through event_add(..., NULL), and a client
 * past its Hello was closed 10 s after it connected (issue 25).
 */
START_TEST(test_read_on_without_timeout_drops_it)
{
	struct transport	*t;
	struct timeval		 tv = { 0, 20000 }, wait = { 0, 80000 };

	t = make(TRANSPORT_STREAM, 0, 0);
	transport_read_on(t, &tv);
	transport_read_on(t, NULL);
	event_base_loopexit(base, &wait);
	event_base_dispatch(base);
	ck_assert_uint_eq(heard.timeouts, 0);
	ck_assert(transport_reading(t));
	/* And after a read: the persistent event has no timeout either. */
	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	pass();
	ck_assert_uint_eq(heard.reads, 1);
	event_base_loopexit(base, &wait);
	event_base_dispatch(base);
	ck_assert_uint_eq(heard.timeouts, 0);
	transport_free(t);
}
END_TEST

/*
 * As a client goes on past its Hello: a request read with the timeout, the
 * read on again without it, more requests, then silence.  libevent keeps
 * a persistent event's timeout even through event_del() and puts it back
 * at its next read: an attached client silent for the Hello's wait was
 * closed.
 */
START_TEST(test_timeout_dropped_stays_dropped_after_reads)
{
	struct transport	*t;
	struct timeval		 tv = { 0, 20000 }, wait = { 0, 80000 };
	char			 c;
	int			 i;

	t = make(TRANSPORT_STREAM, 0, 0);
	transport_read_on(t, &tv);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(write(sv[1], "x", 1), 1);
		pass();
		ck_assert_int_eq(read(transport_fd(t), &c, 1), 1);	/* heard */
		transport_read_on(t, NULL);
	}
	ck_assert_uint_eq(heard.reads, 3);
	event_base_loopexit(base, &wait);
	event_base_dispatch(base);
	ck_assert_uint_eq(heard.timeouts, 0);
	ck_assert(transport_reading(t));
	transport_free(t);
}
END_TEST

/*
 * _dup leaves the caller's descriptors alone: none is duplicated for a
 * message that goes at once, and a waiting one holds a duplicate, closed
 * when the transport is freed.  _consume's are closed on every path.
 */
START_TEST(test_fds_owned_until_sent_or_freed)
{
	struct transport	*t;
	uint8_t			*m;
	int			 before, fd;

	small_sndbuf();
	t = make(TRANSPORT_STREAM, 0, 0);
	before = count_fds(0, NULL);
	/* Goes at once: no duplicate, the caller's still open. */
	ck_assert_int_eq(transport_send_dup(t, "hi", 2, &pipe_fds[0], 1), 0);
	ck_assert_uint_eq(transport_queued(t), 0);
	ck_assert(is_open(pipe_fds[0]));
	ck_assert_int_eq(count_fds(0, NULL), before);
	/* Fill the socket; then a message waits with a duplicate. */
	m = message(5, BIG);
	ck_assert_int_eq(transport_send_consume(t, m, BIG, NULL, 0), 0);
	ck_assert_int_eq(transport_send_dup(t, "hi", 2, &pipe_fds[0], 1), 0);
	ck_assert_int_eq(count_fds(0, NULL), before + 1);
	ck_assert(is_open(pipe_fds[0]));
	/* A consumed one waits too, then both are closed with the queue. */
	fd = dup(pipe_fds[1]);
	ck_assert_int_eq(transport_send_consume(t, "ho", 2, &fd, 1), 0);
	ck_assert_int_eq(count_fds(0, NULL), before + 2);
	ck_assert_uint_eq(transport_queued(t), 3);
	transport_free(t);
	/* ... and the socket itself. */
	ck_assert_int_eq(count_fds(0, NULL), before - 1);
	ck_assert(is_open(pipe_fds[0]) && is_open(pipe_fds[1]));
	free(m);
}
END_TEST

/*
 * The other end goes: the send that finds it drops the queue and its
 * descriptors, the owner hears of it once, from the loop, and later sends
 * fail with EPIPE, still closing what they were given.
 */
START_TEST(test_broken_transport_closes_everything_tells_once)
{
	struct transport	*t;
	uint8_t			*m;
	int			 before, fds[2];

	small_sndbuf();
	t = make(TRANSPORT_STREAM, 0, 0);
	m = message(6, BIG);
	ck_assert_int_eq(transport_send_consume(t, m, BIG, NULL, 0), 0);
	before = count_fds(0, NULL);
	fds[0] = dup(pipe_fds[0]);
	fds[1] = dup(pipe_fds[1]);
	ck_assert_int_eq(transport_send_consume(t, "x", 1, fds, 2), 0);
	ck_assert_int_eq(count_fds(0, NULL), before + 2);
	close(sv[1]);
	sv[1] = -1;
	ck_assert_int_eq(transport_flush(t), -1);
	ck_assert_int_eq(errno, EPIPE);
	ck_assert_uint_eq(transport_queued(t), 0);
	ck_assert_int_eq(count_fds(0, NULL), before - 1);	/* sv[1] too */
	ck_assert_uint_eq(heard.broken, 0);	/* not inside the call */
	pass();
	ck_assert_uint_eq(heard.broken, 1);
	ck_assert(heard.error == EPIPE || heard.error == ECONNRESET);
	fds[0] = dup(pipe_fds[0]);
	ck_assert_int_eq(transport_send_consume(t, "y", 1, fds, 1), -1);
	ck_assert_int_eq(errno, EPIPE);
	ck_assert(!is_open(fds[0]));
	ck_assert_int_eq(transport_send_dup(t, "y", 1, pipe_fds, 1), -1);
	ck_assert(is_open(pipe_fds[0]));
	pass();
	ck_assert_uint_eq(heard.broken, 1);
	transport_free(t);
	free(m);
}
END_TEST

/* A send of more descriptors than a message carries closes them all. */
START_TEST(test_too_many_fds_to_send_closed)
{
	struct transport	*t;
	int			 fds[TRANSPORT_MAX_FDS + 1], before;
	unsigned		 i;

	t = make(TRANSPORT_STREAM, 0, 0);
	before = count_fds(0, NULL);
	for (i = 0; i < TRANSPORT_MAX_FDS + 1; i++)
		fds[i] = dup(pipe_fds[0]);
	ck_assert_int_eq(transport_send_consume(t, "x", 1, fds,
	    TRANSPORT_MAX_FDS + 1), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(count_fds(0, NULL), before);
	transport_free(t);
}
END_TEST

/*
 * In a forked child, transport_close_fds() closes the socket and every
 * descriptor queued or received, touching none of the parent's events.
 */
START_TEST(test_close_fds_in_a_child)
{
	struct transport	*t;
	uint8_t			*m;
	int			 fd, status, before;
	pid_t			 pid;

	small_sndbuf();
	t = make(TRANSPORT_STREAM, 0, 0);
	m = message(7, BIG);
	ck_assert_int_eq(transport_send_consume(t, m, BIG, NULL, 0), 0);
	fd = dup(pipe_fds[0]);
	ck_assert_int_eq(transport_send_consume(t, "x", 1, &fd, 1), 0);
	send_fds(sv[1], pipe_fds[1], 1);
	ck_assert_int_eq(transport_recv(t), 1);
	ck_assert_uint_eq(transport_in(t)->nfds, 1);
	before = count_fds(0, NULL);
	if ((pid = fork()) == 0) {
		transport_close_fds(t);
		/* The socket, the queued and the received descriptors. */
		_exit(count_fds(0, NULL) == before - 3 && transport_fd(t) == -1 ?
		    0 : 1);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The parent's are all still there. */
	ck_assert_int_eq(count_fds(0, NULL), before);
	transport_free(t);
	ck_assert_int_eq(count_fds(0, NULL), before - 3);
	free(m);
}
END_TEST

/* Records come one a receive, whole, with their own descriptors. */
START_TEST(test_packet_records_whole_with_their_fds)
{
	struct transport	*a, *b;
	struct transport_conf	 tc = { .kind = TRANSPORT_PACKET };
	char			 buf[64];
	int			 fds[TRANSPORT_MAX_FDS], before;
	size_t			 nfds;

	a = make(TRANSPORT_PACKET, 0, 0);
	/* The worker's side: blocking, no loop. */
	ck_assert_ptr_nonnull(b = transport_new(NULL, sv[1], &tc));
	sv[1] = -1;
	before = count_fds(0, NULL);
	ck_assert_int_eq(transport_send_dup(a, "first", 5, pipe_fds, 2), 0);
	ck_assert_int_eq(transport_send_dup(a, "second", 6, NULL, 0), 0);
	ck_assert_int_eq(transport_recv_msg(b, buf, sizeof(buf), fds, 3,
	    &nfds), 5);
	ck_assert_int_eq(memcmp(buf, "first", 5), 0);
	ck_assert_uint_eq(nfds, 2);
	ck_assert_int_eq(count_fds(0, NULL), before + 2);
	close(fds[0]);
	close(fds[1]);
	ck_assert_int_eq(transport_recv_msg(b, buf, sizeof(buf), fds, 3,
	    &nfds), 6);
	ck_assert_int_eq(memcmp(buf, "second", 6), 0);
	ck_assert_uint_eq(nfds, 0);
	/* A blocking send goes whole. */
	ck_assert_int_eq(transport_send_consume(b, "back", 4, NULL, 0), 0);
	ck_assert_int_eq(transport_recv_msg(a, buf, sizeof(buf), fds, 0,
	    &nfds), 4);
	ck_assert_int_eq(memcmp(buf, "back", 4), 0);
	ck_assert_int_eq(transport_recv_msg(a, buf, sizeof(buf), fds, 0,
	    &nfds), -1);
	ck_assert_int_eq(errno, EAGAIN);
	transport_free(a);
	transport_free(b);
	ck_assert_int_eq(count_fds(0, NULL), before - 2);
}
END_TEST

/* A record longer than the buffer is refused, and its descriptors closed. */
START_TEST(test_packet_cut_record_refused)
{
	struct transport	*t;
	char			 big[100], buf[50];
	int			 fds[TRANSPORT_MAX_FDS], before;
	size_t			 nfds;

	t = make(TRANSPORT_PACKET, 0, 0);
	memset(big, 'b', sizeof(big));
	before = count_fds(0, NULL);
	ck_assert_int_eq(wire_send_fds(sv[1], big, sizeof(big), pipe_fds, 1),
	    (ssize_t)sizeof(big));
	ck_assert_int_eq(transport_recv_msg(t, buf, sizeof(buf), fds, 3,
	    &nfds), -1);
	ck_assert_int_eq(errno, EMSGSIZE);
	ck_assert_uint_eq(nfds, 0);
	ck_assert_int_eq(count_fds(0, NULL), before);
	transport_free(t);
}
END_TEST

/*
 * More descriptors than the receiver's control buffer holds: the kernel
 * cuts them (MSG_CTRUNC), and the receive is refused with every one that
 * came closed; more than the caller takes (but within the buffer) too.
 */
START_TEST(test_ctrunc_and_surplus_fds_refused)
{
	struct transport	*t;
	char			 buf[8];
	int			 fds[TRANSPORT_MAX_FDS], before;
	size_t			 nfds;

	t = make(TRANSPORT_PACKET, 0, 0);
	before = count_fds(0, NULL);
	send_fds(sv[1], pipe_fds[0], 12);
	ck_assert_int_eq(transport_recv_msg(t, buf, sizeof(buf), fds, 3,
	    &nfds), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_int_eq(count_fds(0, NULL), before);
	/* Four fit the buffer, but the caller takes three. */
	send_fds(sv[1], pipe_fds[0], 4);
	ck_assert_int_eq(transport_recv_msg(t, buf, sizeof(buf), fds, 3,
	    &nfds), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_int_eq(count_fds(0, NULL), before);
	/* One a caller takes none of. */
	send_fds(sv[1], pipe_fds[0], 1);
	ck_assert_int_eq(transport_recv_msg(t, buf, sizeof(buf), fds, 0,
	    &nfds), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_int_eq(count_fds(0, NULL), before);
	/* The next is whole again. */
	send_fds(sv[1], pipe_fds[0], 3);
	ck_assert_int_eq(transport_recv_msg(t, buf, sizeof(buf), fds, 3,
	    &nfds), 1);
	ck_assert_uint_eq(nfds, 3);
	while (nfds > 0)
		close(fds[--nfds]);
	ck_assert_int_eq(count_fds(0, NULL), before);
	transport_free(t);
}
END_TEST

/* On a stream, descriptors cut off break the stream and are closed. */
START_TEST(test_stream_ctrunc_refused)
{
	struct transport	*t;
	int			 before;

	t = make(TRANSPORT_STREAM, 0, 0);
	before = count_fds(0, NULL);
	send_fds(sv[1], pipe_fds[0], 12);
	ck_assert_int_eq(transport_recv(t), -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_uint_eq(transport_in(t)->nfds, 0);
	ck_assert_int_eq(count_fds(0, NULL), before);
	transport_free(t);
}
END_TEST

static Suite *
transport_suite(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("transport");

	tc = tcase_create("stream");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_stream_frames_whole_with_their_fds);
	tcase_add_test(tc, test_partial_writes_finished_in_order);
	tcase_add_test(tc, test_corked_sends_wait_for_the_flush);
	tcase_add_test(tc, test_read_timeout_and_read_off);
	tcase_add_test(tc, test_read_on_without_timeout_drops_it);
	tcase_add_test(tc, test_timeout_dropped_stays_dropped_after_reads);
	suite_add_tcase(s, tc);

	tc = tcase_create("marks");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_high_and_low_marks_pause_and_resume);
	tcase_add_test(tc, test_drain_found_by_flush_told_from_the_loop);
	suite_add_tcase(s, tc);

	tc = tcase_create("descriptors");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_fds_owned_until_sent_or_freed);
	tcase_add_test(tc, test_broken_transport_closes_everything_tells_once);
	tcase_add_test(tc, test_too_many_fds_to_send_closed);
	tcase_add_test(tc, test_close_fds_in_a_child);
	tcase_add_test(tc, test_stream_ctrunc_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("packet");
	tcase_add_checked_fixture(tc, setup_packet, teardown);
	tcase_add_test(tc, test_packet_records_whole_with_their_fds);
	tcase_add_test(tc, test_packet_cut_record_refused);
	tcase_add_test(tc, test_ctrunc_and_surplus_fds_refused);
	suite_add_tcase(s, tc);

	return (s);
}

int
main(void)
{
	return (run_suite(transport_suite()));
}
