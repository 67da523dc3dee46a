/* SPDX-License-Identifier: MIT */
/*
 * One connection's transport (see transport.h).  The bytes and descriptors
 * go through proto/wire-frame.c (wire_send_fds, wire_recv_fds, wire_in); this
 * file adds the queue, who closes each descriptor, the marks and the
 * events.
 */

#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/time.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "transport.h"
#include "wire-frame.h"
#include "xmalloc.h"

_Static_assert(TRANSPORT_MAX_FDS == WIRE_MAX_FDS,
    "transport.h and wire-frame.h disagree on descriptors a message");

/* A message, or what is left of it, that the socket did not take yet. */
#define TRANSPORT_SENDV	16	/* queued messages in one sendmsg, at most */

struct tmsg {
	TAILQ_ENTRY(tmsg)	 entry;
	int			 fds[WIRE_MAX_FDS];	/* ours; go with byte 0 */
	size_t			 nfds;
	size_t			 len;
	size_t			 off;		/* sent already */
	uint8_t			 buf[];
};
TAILQ_HEAD(tmsg_list, tmsg);

struct transport {
	struct event_base	*base;		/* NULL: blocking, no events */
	int			 fd;
	struct transport_conf	 conf;
	struct event		*rev;
	struct event		*wev;		/* armed while queue not empty */
	struct wire_in		 in;		/* STREAM: read, not yet cut */
	struct tmsg_list	 queue;
	size_t			 queued_bytes;
	size_t			 queued;
	bool			 want_read;	/* transport_read_on() */
	bool			 has_timeout;
	bool			 armed_timeout;	/* rev added with one */
	struct timeval		 timeout;
	bool			 paused;	/* over the high mark */
	bool			 corked;	/* transport_cork() */
	int			 broken;	/* the failed send's errno */
	bool			 told;		/* ... and the owner heard */
};

static void	transport_read_cb(evutil_socket_t, short, void *);
static void	transport_write_cb(evutil_socket_t, short, void *);

static const struct transport_events transport_no_events;

/* Close @n descriptors of @fds. */
static void
transport_close_all(const int *fds, size_t n)
{
	while (n > 0)
		close(fds[--n]);
}

/* Drop what waits, closing its descriptors. */
static void
transport_drop_queue(struct transport *t)
{
	struct tmsg	*m;

	while ((m = TAILQ_FIRST(&t->queue)) != NULL) {
		TAILQ_REMOVE(&t->queue, m, entry);
		transport_close_all(m->fds, m->nfds);
		free(m);
	}
	t->queued_bytes = 0;
	t->queued = 0;
}

/* A new transport over @fd. */
struct transport *
transport_new(struct event_base *base, int fd,
    const struct transport_conf *conf)
{
	struct transport	*t;
	int			 flags;

	t = xcalloc(1, sizeof(*t));
	t->base = base;
	t->fd = fd;
	t->conf = *conf;
	if (conf->events == NULL)
		t->conf.events = &transport_no_events;
	TAILQ_INIT(&t->queue);
	if (conf->kind == TRANSPORT_STREAM)
		wire_in_init(&t->in, conf->max_frame);
	if (base == NULL)
		return (t);
	/* The loop never waits on one connection. */
	if ((flags = fcntl(fd, F_GETFL)) == -1 ||
	    fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1)
		fatal("O_NONBLOCK on a connection");
	t->rev = event_new(base, fd, EV_READ | EV_PERSIST, transport_read_cb,
	    t);
	t->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, transport_write_cb,
	    t);
	if (t->rev == NULL || t->wev == NULL)
		fatalx("event_new for a connection");
	return (t);
}

/* Close everything and free the transport. */
void
transport_free(struct transport *t)
{
	if (t == NULL)
		return;
	if (t->rev != NULL)
		event_free(t->rev);
	if (t->wev != NULL)
		event_free(t->wev);
	transport_close_fds(t);
	free(t);
}

/* In a forked process: close what the transport holds, touch no event. */
void
transport_close_fds(struct transport *t)
{
	transport_drop_queue(t);
	if (t->conf.kind == TRANSPORT_STREAM)
		wire_in_clear(&t->in);	/* its received descriptors too */
	if (t->fd != -1)
		close(t->fd);
	t->fd = -1;
}

/* The socket. */
int
transport_fd(const struct transport *t)
{
	return (t->fd);
}

/* Arm the read event as wanted, unless paused. */
static void
transport_arm_read(struct transport *t)
{
	if (t->base == NULL || !t->want_read || t->paused)
		return;
	/*
	 * libevent keeps a persistent event's timeout through event_del()
	 * and event_add(..., NULL), and puts it back at the next read: only
	 * assigning the event again forgets it.
	 */
	if (t->armed_timeout && !t->has_timeout) {
		event_del(t->rev);
		event_assign(t->rev, t->base, t->fd, EV_READ | EV_PERSIST,
		    transport_read_cb, t);
	}
	t->armed_timeout = t->has_timeout;
	event_add(t->rev, t->has_timeout ? &t->timeout : NULL);
}

/* Read when the socket has something (or say it stayed silent). */
void
transport_read_on(struct transport *t, const struct timeval *timeout)
{
	t->want_read = true;
	t->has_timeout = timeout != NULL;
	if (timeout != NULL)
		t->timeout = *timeout;
	transport_arm_read(t);
}

/* Read nothing until asked again. */
void
transport_read_off(struct transport *t)
{
	t->want_read = false;
	if (t->rev != NULL)
		event_del(t->rev);
}

/* Whether the read event is armed. */
bool
transport_reading(const struct transport *t)
{
	return (t->rev != NULL && event_pending(t->rev, EV_READ, NULL) != 0);
}

/* Whether the queue is over the high mark. */
bool
transport_paused(const struct transport *t)
{
	return (t->paused);
}

/* Bytes waiting. */
size_t
transport_queued_bytes(const struct transport *t)
{
	return (t->queued_bytes);
}

/* Messages waiting. */
size_t
transport_queued(const struct transport *t)
{
	return (t->queued);
}

/*
 * A send failed for good: drop the queue and tell the owner from the loop
 * (through the write event), not from inside its own call.
 */
static void
transport_break(struct transport *t, int error)
{
	t->broken = error;
	transport_drop_queue(t);
	if (t->wev != NULL) {
		event_del(t->wev);
		event_active(t->wev, EV_WRITE, 1);
	}
}

/*
 * STREAM: the queued messages from the first on that carry no descriptor
 * (TRANSPORT_SENDV of them at most), in one sendmsg; *@want gets their
 * bytes.
 */
static ssize_t
transport_send_run(struct transport *t, size_t *want)
{
	struct iovec	 iov[TRANSPORT_SENDV];
	struct msghdr	 msg;
	struct tmsg	*m;
	ssize_t		 n;
	int		 i = 0;

	*want = 0;
	for (m = TAILQ_FIRST(&t->queue); m != NULL && m->nfds == 0 &&
	    i < TRANSPORT_SENDV; m = TAILQ_NEXT(m, entry), i++) {
		iov[i].iov_base = m->buf + m->off;
		iov[i].iov_len = m->len - m->off;
		*want += iov[i].iov_len;
	}
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = (size_t)i;
	do {
		n = sendmsg(t->fd, &msg, MSG_NOSIGNAL);
	} while (n == -1 && errno == EINTR);
	return (n);
}

/* Send what waits while the socket takes it; -1 when it broke. */
static int
transport_send_queue(struct transport *t)
{
	struct tmsg	*m;
	ssize_t		 n;
	size_t		 want, took;

	t->corked = false;
	while ((m = TAILQ_FIRST(&t->queue)) != NULL) {
		if (m->nfds == 0 && t->conf.kind == TRANSPORT_STREAM)
			n = transport_send_run(t, &want);
		else {
			want = m->len - m->off;
			n = wire_send_fds(t->fd, m->buf + m->off, want,
			    m->fds, m->nfds);
		}
		if (n == -1 && errno == EAGAIN)
			break;
		if (n == -1) {
			transport_break(t, errno);
			return (-1);
		}
		/* The descriptors went with the first byte: ours no more. */
		transport_close_all(m->fds, m->nfds);
		m->nfds = 0;
		t->queued_bytes -= (size_t)n;
		for (took = (size_t)n; (m = TAILQ_FIRST(&t->queue)) != NULL &&
		    took >= m->len - m->off; ) {
			took -= m->len - m->off;
			TAILQ_REMOVE(&t->queue, m, entry);
			t->queued--;
			free(m);
		}
		if (m != NULL)
			m->off += took;
		if ((size_t)n < want)
			break;		/* the socket is full */
	}
	if (TAILQ_EMPTY(&t->queue))
		event_del(t->wev);
	else
		event_add(t->wev, NULL);
	return (0);
}

/* Hold what is sent until the owner's next flush (transport.h). */
void
transport_cork(struct transport *t)
{
	if (t->base != NULL && t->conf.kind == TRANSPORT_STREAM &&
	    t->broken == 0)
		t->corked = true;
}

/* Send what waits. */
int
transport_flush(struct transport *t)
{
	if (t->broken != 0) {
		errno = EPIPE;
		return (-1);
	}
	if (t->base == NULL)
		return (0);	/* a blocking send waits for nothing */
	if (transport_send_queue(t) == -1) {
		errno = EPIPE;
		return (-1);
	}
	/* Drained: the owner hears it from the loop, as from the socket. */
	if (t->paused && t->queued_bytes <= t->conf.low)
		event_active(t->wev, EV_WRITE, 1);
	return (0);
}

/*
 * Send @buf, queueing what the socket does not take; @consume says whether
 * @fds are the transport's now (else they are duplicated if they wait).
 */
static int
transport_send(struct transport *t, const void *buf, size_t len,
    const int *fds, size_t nfds, bool consume)
{
	struct tmsg	*m;
	ssize_t		 n = 0;
	int		 saved;

	if (nfds > WIRE_MAX_FDS || t->broken != 0 || t->fd == -1) {
		if (consume)
			transport_close_all(fds, nfds);
		errno = nfds > WIRE_MAX_FDS ? EINVAL : EPIPE;
		return (-1);
	}
	if (t->base == NULL) {
		n = wire_send_all_fds(t->fd, buf, len, fds, nfds);
		saved = errno;
		if (consume)
			transport_close_all(fds, nfds);
		errno = saved;
		return (n == -1 ? -1 : 0);
	}
	/* Behind queued messages, it waits its turn; corked, it waits. */
	if (TAILQ_EMPTY(&t->queue) && !t->corked) {
		n = wire_send_fds(t->fd, buf, len, fds, nfds);
		if (n == -1 && errno != EAGAIN) {
			transport_break(t, errno);
			if (consume)
				transport_close_all(fds, nfds);
			errno = EPIPE;
			return (-1);
		}
		if (n == -1)
			n = 0;
		else {
			if (consume)
				transport_close_all(fds, nfds);
			nfds = 0;	/* they went with the first byte */
			if ((size_t)n == len)
				return (0);
		}
	}
	m = xmalloc(sizeof(*m) + len - (size_t)n);
	memcpy(m->buf, (const uint8_t *)buf + n, len - (size_t)n);
	m->len = len - (size_t)n;
	m->off = 0;
	for (m->nfds = 0; m->nfds < nfds; m->nfds++) {
		if (consume)
			m->fds[m->nfds] = fds[m->nfds];
		else if ((m->fds[m->nfds] = fcntl(fds[m->nfds],
		    F_DUPFD_CLOEXEC, 0)) == -1) {
			saved = errno;
			transport_close_all(m->fds, m->nfds);
			free(m);
			errno = saved;
			return (-1);
		}
	}
	TAILQ_INSERT_TAIL(&t->queue, m, entry);
	t->queued_bytes += m->len;
	t->queued++;
	/* Corked, the owner's flush sends it (no epoll change a reply). */
	if (!t->corked)
		event_add(t->wev, NULL);
	/* Backpressure: read nothing more until the other end drains it. */
	if (t->conf.high > 0 && t->queued_bytes > t->conf.high &&
	    !t->paused) {
		t->paused = true;
		event_del(t->rev);
		event_add(t->wev, NULL);
	}
	return (0);
}

/* Send, the descriptors now the transport's. */
int
transport_send_consume(struct transport *t, const void *buf, size_t len,
    const int *fds, size_t nfds)
{
	return (transport_send(t, buf, len, fds, nfds, true));
}

/* Send, the descriptors still the caller's. */
int
transport_send_dup(struct transport *t, const void *buf, size_t len,
    const int *fds, size_t nfds)
{
	return (transport_send(t, buf, len, fds, nfds, false));
}

/* STREAM: read into the frame buffer. */
ssize_t
transport_recv(struct transport *t)
{
	return (wire_in_recv(&t->in, t->fd));
}

/* STREAM: what was read. */
struct wire_in *
transport_in(struct transport *t)
{
	return (&t->in);
}

/* PACKET: one record and its descriptors. */
ssize_t
transport_recv_msg(struct transport *t, void *buf, size_t len, int *fds,
    size_t maxfds, size_t *nfds)
{
	return (wire_recv_fds(t->fd, buf, len, fds, maxfds, nfds));
}

/* PACKET: one typed message, its header's length its record's. */
ssize_t
transport_recv_typed(struct transport *t, void *buf, size_t len, int *fds,
    size_t maxfds, size_t *nfds)
{
	const struct transport_hdr	*h = buf;
	ssize_t				 n;

	n = transport_recv_msg(t, buf, len, fds, maxfds, nfds);
	if (n > 0 && ((size_t)n < sizeof(*h) || h->len != (size_t)n)) {
		transport_close_all(fds, *nfds);
		*nfds = 0;
		errno = EBADMSG;
		return (-1);
	}
	return (n);
}

/* PACKET: a typed message, its header set here. */
int
transport_send_typed(struct transport *t, void *m, size_t len, uint32_t type,
    const int *fds, size_t nfds)
{
	struct transport_hdr	*h = m;

	h->type = type;
	h->len = (uint32_t)len;
	return (transport_send_dup(t, m, len, fds, nfds));
}

/* The socket has something, or stayed silent past the timeout. */
static void
transport_read_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct transport	*t = arg;
	const struct transport_events *e = t->conf.events;

	(void)fd;
	if ((ev & EV_TIMEOUT) != 0) {
		if (e->read_timeout != NULL)
			e->read_timeout(t->conf.arg);
		return;
	}
	if (e->read != NULL)
		e->read(t->conf.arg);
}

/*
 * The socket takes more (or the owner must hear of a drain or a break):
 * send, and below the low mark read again.  The owner's callback comes
 * last, as it may free the transport.
 */
static void
transport_write_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct transport	*t = arg;
	const struct transport_events *e = t->conf.events;

	(void)fd;
	(void)ev;
	if (t->broken == 0)
		(void)transport_send_queue(t);
	if (t->broken != 0) {
		if (!t->told) {
			t->told = true;
			if (e->broken != NULL)
				e->broken(t->conf.arg, t->broken);
		}
		return;
	}
	if (t->paused && t->queued_bytes <= t->conf.low) {
		t->paused = false;
		transport_arm_read(t);
		if (e->drained != NULL)
			e->drained(t->conf.arg);
	}
}
