/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's connection to infeedd: a blocking Unix socket carrying
 * frames (wire.h).  A bounded wait for a reply is the socket's receive
 * timeout (SO_RCVTIMEO, changed only when the bound does), not a poll
 * before the read; a wait for ever has the handshake's bound, then none.
 * Every request is answered by exactly one reply, in order.  A Release is not waited for: its reply is taken on the way to
 * the reply of a later request, and a refused Release is reported by that
 * later call; to a daemon that said Attached.quiet_release, a Release is
 * quiet and only a refusal comes back.  Replies are told apart by the
 * request ids below.
 *
 * The Next's reply is read into a plain struct infeed_next_reply here, so
 * no frame goes above the protocol's edge (this file and
 * libinfeed-proto.c, which builds the other requests).
 *
 * The outstanding Next has a state of its own (enum infeed_next_state):
 * pending while its reply is unread (a wait that timed out, a refused
 * Release reported first), held when its reply was read but a refused
 * Release was reported first; the next infeed_conn_next collects it.
 *
 * A descriptor belongs to the frame it came with (a ring's, with Attached
 * or a Step that moves the session to a new ring): each frame read takes
 * its own off the queue, and one nobody takes is closed, so a frame never
 * gets another's.  A Next whose reply nobody will collect (the session
 * ends) gives its Step's slot back at once: the daemon would otherwise
 * charge that slot's ring to the process until it exits.
 */

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libinfeed-conn.h"
#include "number.h"

#define INFEED_HANDSHAKE_MS	10000	/* connect and Hello, by default */

/* Not connected, nothing outstanding. */
void
infeed_conn_init(struct infeed_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->max_frame = INFEED_DEFAULT_MAX_FRAME;
	c->reply_fd = c->held_fd = -1;
	wire_in_init(&c->in, c->max_frame);
}

/* Close *@fd if it is open, and forget it. */
static void
infeed_conn_fd_close(int *fd)
{
	if (*fd != -1)
		close(*fd);
	*fd = -1;
}

/* The descriptor of the last reply read, now the caller's; -1: none. */
int
infeed_conn_take_fd(struct infeed_conn *c)
{
	int	fd = c->reply_fd;

	c->reply_fd = -1;
	return (fd);
}

/* Forget the outstanding Next and its reply, if any. */
static void
infeed_conn_next_clear(struct infeed_conn *c)
{
	infeed_conn_fd_close(&c->held_fd);
	c->next = INFEED_NEXT_NONE;
}

/* Close the socket and forget what was outstanding; connectable again. */
void
infeed_conn_close(struct infeed_conn *c)
{
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	wire_in_clear(&c->in);
	wire_in_init(&c->in, c->max_frame);
	c->releases_unanswered = 0;
	c->quiet_release = false;
	infeed_conn_fd_close(&c->reply_fd);
	infeed_conn_next_clear(c);
}

/* Send one frame with @nfds descriptors on its first byte. */
static int
infeed_conn_send_fds(struct infeed *f, const Infeed__Frame *frame,
    const int *fds, size_t nfds)
{
	uint8_t	*buf;
	size_t	 len;
	int	 r;

	if (f->conn.fd == -1)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not connected; call "
		    "infeed_connect first"));
	if ((buf = wire_pack(frame, f->conn.max_frame, &len)) == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "cannot pack a %s "
		    "request: %s", wire_case_name(frame->msg_case),
		    strerror(errno)));
	r = wire_send_all_fds(f->conn.fd, buf, len, fds, nfds);
	free(buf);
	if (r == -1 && (errno == EPIPE || errno == ECONNRESET))
		return (infeed_fail(f, INFEED_ERR_CLOSED, "infeedd closed the "
		    "connection (did it stop or restart?) while sending %s",
		    wire_case_name(frame->msg_case)));
	if (r == -1)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "sending %s to "
		    "infeedd: %s", wire_case_name(frame->msg_case),
		    strerror(errno)));
	return (INFEED_OK);
}

/* Send one frame. */
static int
infeed_conn_send(struct infeed *f, const Infeed__Frame *frame)
{
	return (infeed_conn_send_fds(f, frame, NULL, 0));
}

/*
 * How long connect and the Hello may take: a daemon that does not accept
 * or answer (stopped, or out of descriptors) is an error, not a hang.
 * $INFEED_CONNECT_TIMEOUT_MS changes it.
 */
static unsigned
infeed_handshake_ms(void)
{
	const char	*e = getenv("INFEED_CONNECT_TIMEOUT_MS");
	uint64_t	 v;

	if (e != NULL && number_parse_u64(e, 1, 3599999, &v, NULL) == 0)
		return ((unsigned)v);
	return (INFEED_HANDSHAKE_MS);
}

/* @ms as a struct timeval. */
static struct timeval
infeed_timeval(unsigned ms)
{
	struct timeval	tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	return (tv);
}

/*
 * Bound every send and receive on the socket to @ms (0: no bound), and
 * the receives of a wait for ever from now on.
 */
static void
infeed_set_timeout(struct infeed_conn *c, unsigned ms)
{
	struct timeval	tv = infeed_timeval(ms);

	(void)setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->rcv_ms = c->wait_ms = ms;
}

/*
 * Bound the socket's receives to @ms (0: none) unless they are already:
 * whether they are.
 */
static bool
infeed_rcv_timeout(struct infeed_conn *c, unsigned ms)
{
	struct timeval	tv = infeed_timeval(ms);

	if (c->rcv_ms != ms) {
		if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
		    sizeof(tv)) == -1)
			return (false);
		c->rcv_ms = ms;
	}
	return (true);
}

/*
 * Wait up to @timeout_ms (-1: for ever) for bytes from the daemon:
 * INFEED_OK, INFEED_TIMEOUT (also when a signal interrupted), or an error.
 */
static int
infeed_poll(struct infeed *f, int timeout_ms)
{
	struct pollfd	pfd = { .fd = f->conn.fd, .events = POLLIN };
	int		n;

	if (timeout_ms < 0)
		return (INFEED_OK);
	if ((n = poll(&pfd, 1, timeout_ms)) == 0 ||
	    (n == -1 && errno == EINTR))
		return (INFEED_TIMEOUT);
	if (n == -1)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "waiting for "
		    "infeedd: %s", strerror(errno)));
	return (INFEED_OK);
}

/*
 * Take the descriptors that came with the frame just cut: the first is
 * its own (-1: none), any more are closed (no reply carries two).
 */
static int
infeed_frame_fd(struct wire_in *in)
{
	int	fd = -1;

	while (wire_in_frame_fds(in) > 0) {
		if (fd == -1)
			fd = wire_in_take_fd(in);
		else
			close(wire_in_take_fd(in));
	}
	return (fd);
}

/*
 * Read from the socket, waiting up to @timeout_ms (-1: for ever; 0: only
 * what is there).  A bounded wait is the receive's own (SO_RCVTIMEO), not
 * a poll before it: one system call a step fewer (issue 35); its end or a
 * signal is INFEED_TIMEOUT (*@n -1).  Else *@n is wire_in_recv()'s.
 */
static int
infeed_recv_some(struct infeed *f, int timeout_ms, ssize_t *n)
{
	struct infeed_conn	*c = &f->conn;
	bool			 own;
	int			 r;

	*n = -1;
	own = timeout_ms > 0 && infeed_rcv_timeout(c, (unsigned)timeout_ms);
	if (timeout_ms < 0 && !infeed_rcv_timeout(c, c->wait_ms))
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "setting the wait "
		    "for infeedd: %s", strerror(errno)));
	if (!own && (r = infeed_poll(f, timeout_ms)) != INFEED_OK)
		return (r);
	if (!own) {
		*n = wire_in_recv(&c->in, c->fd);
		return (INFEED_OK);
	}
	*n = wire_in_recv_intr(&c->in, c->fd);
	if (*n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR))
		return (INFEED_TIMEOUT);
	return (INFEED_OK);
}

/*
 * Read the next frame and its descriptor (*@fd, -1: none), waiting up to
 * @timeout_ms (-1: for ever).
 */
static int
infeed_recv_any(struct infeed *f, Infeed__Frame **out, int *fd,
    int timeout_ms)
{
	char		*cause = NULL;
	ssize_t		 n;
	int		 r;

	*fd = -1;
	for (;;) {
		switch (wire_in_frame(&f->conn.in, out, &cause)) {
		case WIRE_OK:
			*fd = infeed_frame_fd(&f->conn.in);
			/* Counted for the Detach (infeed_proto_detach). */
			if ((*out)->msg_case == INFEED__FRAME__MSG_ATTACHED)
				f->conn.steps_read = 0;
			else if ((*out)->msg_case == INFEED__FRAME__MSG_STEP)
				f->conn.steps_read++;
			return (INFEED_OK);
		case WIRE_BAD:
			infeed_fail(f, INFEED_ERR_PROTOCOL, "bad frame from "
			    "infeedd: %s", cause ? cause : "out of memory");
			free(cause);
			return (INFEED_ERR_PROTOCOL);
		case WIRE_AGAIN:
			break;
		}
		if ((r = infeed_recv_some(f, timeout_ms, &n)) != INFEED_OK)
			return (r);
		if (n == 0)
			return (infeed_fail(f, INFEED_ERR_CLOSED, "infeedd "
			    "closed the connection (did it stop or restart?)"));
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return (infeed_fail(f, INFEED_ERR_SYSTEM, "infeedd did "
			    "not answer within %u ms (is it stopped or out of "
			    "file descriptors? see its log; "
			    "INFEED_CONNECT_TIMEOUT_MS sets the wait)",
			    infeed_handshake_ms()));
		if (n == -1)
			return (infeed_fail(f, INFEED_ERR_SYSTEM, "reading "
			    "from infeedd: %s", strerror(errno)));
	}
}

/* Turn an Error frame into our error state. */
static int
infeed_daemon_error(struct infeed *f, const Infeed__Error *e)
{
	f->daemon_code = e->code;
	return (infeed_fail(f, INFEED_ERR_DAEMON, "infeedd: %s", e->message));
}

/* Whether @fr answers a Release (by its id; by count from older daemons). */
static bool
infeed_is_release_reply(const struct infeed *f, const Infeed__Frame *fr)
{
	if (fr->has_request_id)
		return (fr->request_id == INFEED_ID_RELEASE);
	return (f->conn.releases_unanswered > 0);
}

/*
 * Read the reply to the request outstanding (the last call, or the Next),
 * taking Release acknowledgements on the way; wait up to @timeout_ms (-1:
 * for ever).  *@answered says whether the reply itself was read: not when
 * the wait ran out, the connection failed, or (with a bounded wait) a
 * refused Release is reported first.  A reply read is *@out, or an Error
 * (INFEED_ERR_DAEMON) or neither @want nor @also (INFEED_ERR_PROTOCOL),
 * freed; *@refused says a Release was refused on the way.  The reply's
 * descriptor is f->conn.reply_fd until taken (infeed_conn_take_fd); the
 * last reply's that nobody took is closed now.
 */
static int
infeed_conn_read_reply(struct infeed *f, Infeed__Frame__MsgCase want,
    Infeed__Frame__MsgCase also, Infeed__Frame **out, int timeout_ms,
    bool *answered, bool *refused)
{
	Infeed__Frame	*fr;
	int		 r, fd;

	f->daemon_code = 0;
	*answered = *refused = false;
	infeed_conn_fd_close(&f->conn.reply_fd);
	for (;;) {
		if ((r = infeed_recv_any(f, &fr, &fd, timeout_ms)) !=
		    INFEED_OK)
			return (r);
		if (!infeed_is_release_reply(f, fr))
			break;
		infeed_conn_fd_close(&fd);
		if (f->conn.releases_unanswered > 0)
			f->conn.releases_unanswered--;
		if (fr->msg_case == INFEED__FRAME__MSG_ERROR) {
			infeed_daemon_error(f, fr->error);
			*refused = true;
		}
		infeed__frame__free_unpacked(fr, NULL);
		/* Report it now, before waiting for more. */
		if (*refused && timeout_ms >= 0)
			return (INFEED_ERR_DAEMON);
	}
	*answered = true;
	f->conn.reply_fd = fd;
	if (fr->msg_case == INFEED__FRAME__MSG_ERROR) {
		infeed_conn_fd_close(&f->conn.reply_fd);
		r = infeed_daemon_error(f, fr->error);
		infeed__frame__free_unpacked(fr, NULL);
		return (r);
	}
	if (fr->msg_case != want && fr->msg_case != also) {
		r = infeed_fail(f, INFEED_ERR_PROTOCOL, "infeedd answered %s "
		    "where %s was expected", wire_case_name(fr->msg_case),
		    wire_case_name(want));
		infeed_conn_fd_close(&f->conn.reply_fd);
		infeed__frame__free_unpacked(fr, NULL);
		return (r);
	}
	*out = fr;
	return (INFEED_OK);
}

/*
 * Read the reply of the last call, which must be @want; a Release refused
 * on the way fails it (the reply is fine, but the caller hears of the
 * refusal now).
 */
static int
infeed_conn_recv(struct infeed *f, Infeed__Frame__MsgCase want,
    Infeed__Frame **reply)
{
	bool	answered, refused;
	int	r;

	if ((r = infeed_conn_read_reply(f, want, want, reply, -1, &answered,
	    &refused)) != INFEED_OK)
		return (r);
	if (refused) {
		infeed__frame__free_unpacked(*reply, NULL);
		return (INFEED_ERR_DAEMON);
	}
	return (INFEED_OK);
}

/* Send @fr with @nfds descriptors and read its reply, which must be @want. */
int
infeed_conn_request(struct infeed *f, Infeed__Frame *fr, const int *fds,
    size_t nfds, Infeed__Frame__MsgCase want, Infeed__Frame **reply)
{
	int	r;

	if ((r = infeed_conn_send_fds(f, fr, fds, nfds)) != INFEED_OK)
		return (r);
	return (infeed_conn_recv(f, want, reply));
}

/* A request that carries the id of calls, and its reply. */
int
infeed_conn_call(struct infeed *f, Infeed__Frame *fr,
    Infeed__Frame__MsgCase want, Infeed__Frame **reply)
{
	fr->has_request_id = 1;
	fr->request_id = INFEED_ID_CALL;
	return (infeed_conn_request(f, fr, NULL, 0, want, reply));
}

/* Connect to @path and exchange Hello/Welcome as @name. */
int
infeed_conn_open(struct infeed *f, const char *path, const char *name)
{
	struct sockaddr_un	 sun;
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *reply;
	Infeed__Hello		 h = INFEED__HELLO__INIT;
	int			 r;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		return (infeed_fail(f, INFEED_ERR_USAGE, "socket path %s is "
		    "longer than %zu bytes", path, sizeof(sun.sun_path) - 1));
	strcpy(sun.sun_path, path);
	if ((f->conn.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "socket: %s",
		    strerror(errno)));
	infeed_set_timeout(&f->conn, infeed_handshake_ms());
	if (connect(f->conn.fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		r = infeed_fail(f, INFEED_ERR_SYSTEM, "cannot connect to "
		    "infeedd at %s: %s (is infeedd running? set --socket or "
		    "INFEED_SOCKET)", path, errno == EAGAIN ? "it accepts no "
		    "connection (stopped, or its backlog is full)" :
		    strerror(errno));
		close(f->conn.fd);
		f->conn.fd = -1;
		return (r);
	}
	h.protocol_version = WIRE_PROTOCOL_VERSION;
	h.client_name = (char *)(name != NULL ? name : "libinfeed");
	fr.msg_case = INFEED__FRAME__MSG_HELLO;
	fr.hello = &h;
	if ((r = infeed_conn_request(f, &fr, NULL, 0,
	    INFEED__FRAME__MSG_WELCOME, &reply)) != INFEED_OK) {
		close(f->conn.fd);
		f->conn.fd = -1;
		return (r);
	}
	/* Past the handshake, a step may take as long as its data. */
	infeed_set_timeout(&f->conn, 0);
	if (reply->welcome->has_max_frame_size &&
	    reply->welcome->max_frame_size >= INFEED_MIN_MAX_FRAME) {
		f->conn.max_frame = reply->welcome->max_frame_size;
		f->conn.in.max_frame = f->conn.max_frame;
	}
	infeed__frame__free_unpacked(reply, NULL);
	return (INFEED_OK);
}

/* The Step or EndOfData @fr, read into *@out. */
static void
infeed_next_reply_from(struct infeed_next_reply *out, const Infeed__Frame *fr)
{
	const Infeed__Ring	*ring;

	memset(out, 0, sizeof(*out));
	if (fr->msg_case == INFEED__FRAME__MSG_END_OF_DATA) {
		out->end_of_data = true;
		out->epoch = fr->end_of_data->epoch;
		return;
	}
	out->slot = fr->step->slot;
	out->epoch = fr->step->epoch;
	out->step = fr->step->step;
	out->rows = fr->step->rows;
	/* The session left its shared group (or rejoined): a ring comes. */
	if ((ring = fr->step->ring) != NULL) {
		out->new_ring = true;
		out->ring.ring_bytes = ring->ring_bytes;
		out->ring.slot_bytes = ring->slot_bytes;
		out->ring.slots = ring->slots;
		out->ring.first_slot = ring->first_slot;
	}
}

/*
 * The reply to the Next, sending one unless one is outstanding; wait up
 * to @timeout_ms.  The Next stays outstanding after INFEED_TIMEOUT and
 * after a refused Release reported first (its reply then held back when
 * it had come); a failed connection forgets it (a resume asks again).
 */
int
infeed_conn_next(struct infeed *f, struct infeed_next_reply *reply,
    int timeout_ms)
{
	Infeed__Frame	fr = INFEED__FRAME__INIT, *got;
	Infeed__Next	nx = INFEED__NEXT__INIT;
	bool		answered, refused;
	int		r;

	switch (f->conn.next) {
	case INFEED_NEXT_HELD:
		*reply = f->conn.held;
		infeed_conn_fd_close(&f->conn.reply_fd);
		f->conn.reply_fd = f->conn.held_fd;
		f->conn.held_fd = -1;
		f->conn.next = INFEED_NEXT_NONE;
		return (INFEED_OK);
	case INFEED_NEXT_NONE:
		fr.msg_case = INFEED__FRAME__MSG_NEXT;
		fr.next = &nx;
		fr.has_request_id = 1;
		fr.request_id = INFEED_ID_NEXT;
		if ((r = infeed_conn_send(f, &fr)) != INFEED_OK)
			return (r);
		f->conn.next = INFEED_NEXT_PENDING;
		break;
	case INFEED_NEXT_PENDING:
		break;
	}
	r = infeed_conn_read_reply(f, INFEED__FRAME__MSG_STEP,
	    INFEED__FRAME__MSG_END_OF_DATA, &got, timeout_ms, &answered,
	    &refused);
	if (answered || (r != INFEED_TIMEOUT && r != INFEED_ERR_DAEMON))
		f->conn.next = INFEED_NEXT_NONE;
	if (r != INFEED_OK)
		return (r);
	infeed_next_reply_from(reply, got);
	infeed__frame__free_unpacked(got, NULL);
	if (refused) {
		/* Keep the step for the next call; report the release. */
		f->conn.held = *reply;
		f->conn.held_fd = infeed_conn_take_fd(&f->conn);
		f->conn.next = INFEED_NEXT_HELD;
		return (INFEED_ERR_DAEMON);
	}
	return (INFEED_OK);
}

/*
 * A Next nobody will collect (the session ends): its reply, if it has come
 * (without waiting), is dropped with its descriptor, and a Step's slot is
 * released now, before the session ends holding it.  A Next still waiting
 * stays outstanding.
 */
void
infeed_conn_next_give_back(struct infeed *f)
{
	struct infeed_next_reply reply;
	Infeed__Frame		*got;
	bool			 answered = false, refused;
	int			 r = INFEED_ERR_CLOSED;

	if (f->conn.next == INFEED_NEXT_HELD) {
		reply = f->conn.held;
		answered = true;
		r = INFEED_OK;
	} else if (f->conn.next == INFEED_NEXT_PENDING) {
		/* A refused Release on the way matters no more. */
		do
			r = infeed_conn_read_reply(f, INFEED__FRAME__MSG_STEP,
			    INFEED__FRAME__MSG_END_OF_DATA, &got, 0,
			    &answered, &refused);
		while (r == INFEED_ERR_DAEMON && !answered);
		if (r == INFEED_OK) {
			infeed_next_reply_from(&reply, got);
			infeed__frame__free_unpacked(got, NULL);
		}
	}
	if (!answered)
		return;
	infeed_conn_next_clear(&f->conn);
	infeed_conn_fd_close(&f->conn.reply_fd);
	if (r == INFEED_OK && !reply.end_of_data)
		(void)infeed_conn_release(f, reply.slot);
}

/*
 * The session has ended (Detach sent): drop the outstanding Next's reply,
 * still to come (an Error, since the session ends, or a Step sent before
 * the daemon read the Detach; neither matters now), and its descriptor.
 */
static int
infeed_conn_next_forget(struct infeed *f)
{
	Infeed__Frame	*reply;
	bool		 answered, refused;
	int		 r = INFEED_OK;

	if (f->conn.next == INFEED_NEXT_PENDING) {
		r = infeed_conn_read_reply(f, INFEED__FRAME__MSG_STEP,
		    INFEED__FRAME__MSG_END_OF_DATA, &reply, -1, &answered,
		    &refused);
		if (r == INFEED_OK)
			infeed__frame__free_unpacked(reply, NULL);
		if (r == INFEED_OK || r == INFEED_ERR_DAEMON)
			r = INFEED_OK;
	}
	infeed_conn_fd_close(&f->conn.reply_fd);
	infeed_conn_next_clear(&f->conn);
	return (r);
}

/*
 * A call that ends the session (Detach) while a Next may be outstanding:
 * a Step already come is given back first; a reply still to come comes
 * before the call's, and is dropped.
 */
int
infeed_conn_call_after_next(struct infeed *f, Infeed__Frame *fr,
    Infeed__Frame__MsgCase want, Infeed__Frame **reply)
{
	int	r;

	infeed_conn_next_give_back(f);
	fr->has_request_id = 1;
	fr->request_id = INFEED_ID_CALL;
	if ((r = infeed_conn_send(f, fr)) != INFEED_OK) {
		infeed_conn_next_clear(&f->conn);
		return (r);
	}
	if ((r = infeed_conn_next_forget(f)) != INFEED_OK)
		return (r);
	return (infeed_conn_recv(f, want, reply));
}

/*
 * Send the Release of @slot; its acknowledgement is read on the way to a
 * later reply.  To a daemon that said quiet_release, a quiet one: only a
 * refusal comes back (by its id), so nothing is counted.
 */
int
infeed_conn_release(struct infeed *f, uint32_t slot)
{
	Infeed__Frame	fr = INFEED__FRAME__INIT;
	Infeed__Release	rl = INFEED__RELEASE__INIT;
	int		r;

	rl.slot = slot;
	fr.msg_case = INFEED__FRAME__MSG_RELEASE;
	fr.release = &rl;
	fr.has_request_id = 1;
	fr.request_id = INFEED_ID_RELEASE;
	rl.has_quiet = rl.quiet = f->conn.quiet_release;
	if ((r = infeed_conn_send(f, &fr)) == INFEED_OK && !rl.quiet)
		f->conn.releases_unanswered++;
	return (r);
}
