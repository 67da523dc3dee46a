/* SPDX-License-Identifier: MIT */
/*
 * Client connections (see peer.h).  Each peer is a non-blocking Unix
 * socket with a read event, a write event armed only while its output
 * queue is non-empty, and a wire_in that cuts what it reads into frames.
 * Requests are handled in order by one switch on the frame's oneof case;
 * every reply copies the request's request_id.  A client that stops
 * reading has its output bounded: past PEER_OUTQ_HIGH queued bytes we
 * handle none of its requests, buffered or not, until it drains, so one
 * reply (at most max_frame_size) is the most it can add.  Its refused
 * requests are logged at most PEER_LOG_PER_S times a second, with a count
 * of the rest.  A burst of requests is handled PEER_BATCH at a time, with
 * every other ready client served in between.
 */

#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "peer.h"
#include "procmem.h"
#include "session.h"
#include "utf8.h"
#include "version.h"
#include "wire.h"
#include "xmalloc.h"

#define PEER_OUTQ_HIGH		(256 * 1024)
#define PEER_LOG_PER_S		10	/* error lines logged per client */
#define PEER_BATCH		64	/* requests before the others' turn */
#define PEER_HELLO_WAIT_S	10	/* for a new client's Hello */

enum peer_state {
	PEER_HELLO,
	PEER_REFUSED,
	PEER_READY,
	PEER_ATTACHED,
	PEER_ENDED,
};

struct outframe {
	TAILQ_ENTRY(outframe)	 entry;
	uint8_t			*buf;
	size_t			 len;
	size_t			 off;
	int			 fd;	/* sent with byte 0, closed after */
};
TAILQ_HEAD(outframe_list, outframe);

struct peer {
	TAILQ_ENTRY(peer)	 entry;
	struct peers		*ps;
	uint64_t		 id;
	enum peer_state		 state;
	int			 fd;
	struct event		*rev;
	struct event		*wev;
	struct event		*more_ev;	/* buffered requests wait */
	struct wire_in		 in;
	struct outframe_list	 outq;
	size_t			 outq_bytes;
	pid_t			 pid;
	uid_t			 uid;
	gid_t			 gid;
	char			*name;		/* clean UTF-8, one line */
	struct session		*session;
	uint64_t		 session_errors;	/* sent during it */
	/* An Attach whose checks go on: no request is read meanwhile. */
	struct session_pending	*pending;
	struct session_req	 attach_req;	/* ... and its request */
	struct event		*closed_ev;	/* ... and a hang-up */
	char			*ended_why;	/* ENDED: what a reload did */
	char			*refused_why;	/* REFUSED: not max_clients */
	struct session_req	 req;		/* the request being handled */
	int			 req_fds[WIRE_MAX_FDS];	/* came with it */
	size_t			 req_nfds;
	bool			 paused;	/* output over PEER_OUTQ_HIGH */
	uint64_t		 log_second;	/* when its log window began */
	unsigned		 log_lines;	/* error lines in that window */
	unsigned		 log_dropped;	/* not logged in it */
};
TAILQ_HEAD(peer_list, peer);

struct peers {
	struct peers_host	 host;
	struct peer_list	 list;
	unsigned		 n;
	uint64_t		 next_id;
	/* Ended sessions, folded per dataset, so metrics stay bounded. */
	struct peers_ended	*ended;
	size_t			 nended;
	uint64_t		 errors[PEERS_ERROR_CODES];	/* sent */
	struct session_checks	*checks;	/* pending Attaches */
};

static void	peer_read_cb(evutil_socket_t, short, void *);
static void	peer_more_cb(evutil_socket_t, short, void *);
static void	peer_write_cb(evutil_socket_t, short, void *);
static void	peer_dispatch(struct peer *, Infeed__Frame *);
static void	peer_process(struct peer *);
static void	peer_free(struct peer *);
static void	peer_drop_fds(struct peer *);
static void	peer_closed_cb(evutil_socket_t, short, void *);

/* Move to state @st; the allowed transitions are all here. */
static void
peer_set_state(struct peer *p, enum peer_state st)
{
	bool	ok;

	switch (st) {
	case PEER_READY:
		ok = p->state == PEER_HELLO || p->state == PEER_ATTACHED ||
		    p->state == PEER_ENDED;
		break;
	case PEER_ATTACHED:
		ok = p->state == PEER_READY;
		break;
	case PEER_ENDED:
		ok = p->state == PEER_ATTACHED;
		break;
	default:		/* HELLO and REFUSED are where peers start */
		ok = false;
		break;
	}
	if (!ok)
		fatalx("client %llu: no transition from state %d to %d",
		    (unsigned long long)p->id, (int)p->state, (int)st);
	p->state = st;
}

/*
 * Read the client's requests.  Until its Hello (or while it is refused) a
 * client has PEER_HELLO_WAIT_S of silence; then it is dropped, so silent
 * connections cannot hold max_clients or the spare descriptor.
 */
static void
peer_read_on(struct peer *p)
{
	struct timeval	tv = { PEER_HELLO_WAIT_S, 0 };

	if (p->pending != NULL)		/* its Attach comes first */
		return;
	event_add(p->rev, p->state == PEER_HELLO || p->state == PEER_REFUSED ?
	    &tv : NULL);
}

/* Send queued output; returns -1 when the peer is gone. */
static int
peer_flush(struct peer *p)
{
	struct outframe	*of;
	ssize_t		 n;

	while ((of = TAILQ_FIRST(&p->outq)) != NULL) {
		n = wire_send_some(p->fd, of->buf + of->off, of->len - of->off,
		    of->off == 0 ? of->fd : -1);
		if (n == -1) {
			if (errno == EAGAIN)
				break;
			log_debug("client %llu: send: %s",
			    (unsigned long long)p->id, strerror(errno));
			return (-1);
		}
		of->off += (size_t)n;
		p->outq_bytes -= (size_t)n;
		if (of->fd != -1) {
			close(of->fd);
			of->fd = -1;
		}
		if (of->off < of->len)
			break;
		TAILQ_REMOVE(&p->outq, of, entry);
		free(of->buf);
		free(of);
	}
	if (TAILQ_EMPTY(&p->outq))
		event_del(p->wev);
	else
		event_add(p->wev, NULL);
	/* Backpressure: read requests again only once replies drain. */
	if (p->outq_bytes > PEER_OUTQ_HIGH) {
		event_del(p->rev);
		p->paused = true;
	} else if (!p->paused)
		peer_read_on(p);
	return (0);
}

/* Pack a reply to @req (and an fd, which the queue now owns) and queue it. */
static void
peer_send(struct peer *p, struct session_req req, Infeed__Frame *f, int fd)
{
	const struct config	*conf = p->ps->host.conf;
	struct outframe		*of;
	Infeed__Frame		 ef = INFEED__FRAME__INIT;
	Infeed__Error		 e = INFEED__ERROR__INIT;
	char			 msg[512];

	f->has_request_id = req.has_id;
	f->request_id = req.id;
	of = xcalloc(1, sizeof(*of));
	of->buf = wire_pack(f, conf->max_frame_size, &of->len);
	if (of->buf == NULL && errno == EMSGSIZE) {
		/* Too large a reply (Stats of many sessions) fails this one. */
		snprintf(msg, sizeof(msg), "the %s reply needs %zu bytes, more "
		    "than the largest frame (max_frame_size = %u in %s); ask "
		    "the operator to raise it", wire_case_name(f->msg_case),
		    infeed__frame__get_packed_size(f), conf->max_frame_size,
		    conf->path);
		log_warnx("client %llu (pid %d): %s", (unsigned long long)p->id,
		    (int)p->pid, msg);
		e.code = INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED;
		e.message = msg;
		ef.msg_case = INFEED__FRAME__MSG_ERROR;
		ef.error = &e;
		ef.has_request_id = req.has_id;
		ef.request_id = req.id;
		if (fd != -1)
			close(fd);
		fd = -1;
		of->buf = wire_pack(&ef, conf->max_frame_size, &of->len);
	}
	if (of->buf == NULL)
		fatal("cannot pack a %s reply", wire_case_name(f->msg_case));
	of->fd = fd;
	TAILQ_INSERT_TAIL(&p->outq, of, entry);
	p->outq_bytes += of->len;
	event_add(p->wev, NULL);
}

/* Say how many of the client's errors went unlogged, if any. */
static void
peer_log_dropped(struct peer *p)
{
	if (p->log_dropped > 0)
		log_info("client %llu (pid %d): %u more errors in a second "
		    "were not logged", (unsigned long long)p->id, (int)p->pid,
		    p->log_dropped);
	p->log_dropped = 0;
}

/* Log a refused request, at most PEER_LOG_PER_S a second per client. */
static void
peer_log_error(struct peer *p, const char *msg)
{
	uint64_t	now = clock_now_ms();

	if (now - p->log_second >= 1000) {
		peer_log_dropped(p);
		p->log_second = now;
		p->log_lines = 0;
	}
	if (p->log_lines >= PEER_LOG_PER_S) {
		p->log_dropped++;
		return;
	}
	p->log_lines++;
	log_info("client %llu (pid %d): %s", (unsigned long long)p->id,
	    (int)p->pid, msg);
}

/*
 * Queue an Error answering @req.  The message is made valid UTF-8 on one
 * line (cut on a character), for strict decoders and for the log.
 */
static void
peer_send_error(struct peer *p, struct session_req req,
    Infeed__ErrorCode code, const char *msg)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT;
	Infeed__Error	 e = INFEED__ERROR__INIT;
	char		*clean;

	if ((clean = utf8_clean(msg, 2047)) == NULL)
		fatal("utf8_clean");
	e.code = code;
	e.message = clean;
	if ((unsigned)code < PEERS_ERROR_CODES)
		p->ps->errors[code]++;
	if (p->session != NULL)
		p->session_errors++;
	f.msg_case = INFEED__FRAME__MSG_ERROR;
	f.error = &e;
	peer_log_error(p, clean);
	peer_send(p, req, &f, -1);
	free(clean);
}

/* Answer the current request with an Error; the connection stays up. */
static void PRINTFLIKE(3, 4)
peer_error(struct peer *p, Infeed__ErrorCode code, const char *fmt, ...)
{
	va_list	 ap;
	char	 msg[2048];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	peer_send_error(p, p->req, code, msg);
}

/* Answer with a final Error if the socket takes it, then close the peer. */
static void PRINTFLIKE(3, 4)
peer_fail(struct peer *p, Infeed__ErrorCode code, const char *fmt, ...)
{
	va_list	 ap;
	char	 msg[2048];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	peer_send_error(p, p->req, code, msg);
	(void)peer_flush(p);
	shutdown(p->fd, SHUT_RDWR);
	peer_free(p);
}

/* The session has a step for a Next. */
static void
peer_step_cb(void *arg, struct session_req req, const struct session_step *s)
{
	struct peer	*p = arg;
	Infeed__Frame	 f = INFEED__FRAME__INIT;
	Infeed__Step	 st = INFEED__STEP__INIT;

	st.slot = s->slot;
	st.epoch = s->epoch;
	st.step = s->step;
	st.rows = s->rows;
	f.msg_case = INFEED__FRAME__MSG_STEP;
	f.step = &st;
	peer_send(p, req, &f, -1);
}

/* The session ended an epoch for a Next. */
static void
peer_end_of_data_cb(void *arg, struct session_req req, uint64_t epoch)
{
	struct peer		*p = arg;
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__EndOfData	 eod = INFEED__END_OF_DATA__INIT;

	eod.epoch = epoch;
	f.msg_case = INFEED__FRAME__MSG_END_OF_DATA;
	f.end_of_data = &eod;
	peer_send(p, req, &f, -1);
}

/* The session answers a Next with an error. */
static void
peer_session_error_cb(void *arg, struct session_req req,
    Infeed__ErrorCode code, const char *msg)
{
	peer_send_error(arg, req, code, msg);
}

static const struct session_events peer_session_events = {
	.step = peer_step_cb,
	.end_of_data = peer_end_of_data_cb,
	.error = peer_session_error_cb,
};

/* A new set of connections. */
struct peers *
peers_new(const struct peers_host *host)
{
	struct peers	*ps;

	ps = xcalloc(1, sizeof(*ps));
	ps->host = *host;
	TAILQ_INIT(&ps->list);
	ps->checks = session_checks_new(host->base, host->pool);
	return (ps);
}

/* Close every peer and free the set. */
void
peers_free(struct peers *ps)
{
	struct peer	*p;

	if (ps == NULL)
		return;
	while ((p = TAILQ_FIRST(&ps->list)) != NULL)
		peer_free(p);
	session_checks_free(ps->checks);
	while (ps->nended > 0)
		free(ps->ended[--ps->nended].dataset);
	free(ps->ended);
	free(ps);
}

/* Take a connection only to refuse it. */
void
peers_refuse(struct peers *ps, int fd, const char *why)
{
	struct peer	*p;
	uint64_t	 id = peers_accept(ps, fd);

	TAILQ_FOREACH(p, &ps->list, entry) {
		if (p->id == id) {
			p->state = PEER_REFUSED;
			p->refused_why = xstrdup(why);
			peer_read_on(p);
		}
	}
}

/* Take a new connection; over the client limit, only to refuse it. */
uint64_t
peers_accept(struct peers *ps, int fd)
{
	struct peer	*p;
	struct ucred	 cred;
	socklen_t	 len = sizeof(cred);

	p = xcalloc(1, sizeof(*p));
	p->ps = ps;
	p->fd = fd;
	p->id = ++ps->next_id;
	p->pid = -1;
	p->uid = (uid_t)-1;
	p->gid = (gid_t)-1;
	TAILQ_INIT(&p->outq);
	wire_in_init(&p->in, ps->host.conf->max_frame_size);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		p->pid = cred.pid;
		p->uid = cred.uid;
		p->gid = cred.gid;
	}
	p->rev = event_new(ps->host.base, fd, EV_READ | EV_PERSIST,
	    peer_read_cb, p);
	p->wev = event_new(ps->host.base, fd, EV_WRITE | EV_PERSIST,
	    peer_write_cb, p);
	p->more_ev = event_new(ps->host.base, -1, 0, peer_more_cb, p);
	if (p->rev == NULL || p->wev == NULL || p->more_ev == NULL)
		fatalx("event_new for a client");
	/* While an Attach is checked, a hang-up is noticed (epoll's RDHUP). */
	if ((event_base_get_features(ps->host.base) &
	    EV_FEATURE_EARLY_CLOSE) != 0 && (p->closed_ev = event_new(
	    ps->host.base, fd, EV_CLOSED, peer_closed_cb, p)) == NULL)
		fatalx("event_new for a client");
	TAILQ_INSERT_TAIL(&ps->list, p, entry);
	ps->n++;
	log_debug("client %llu connected (pid %d, uid %u, gid %u)",
	    (unsigned long long)p->id, (int)p->pid, (unsigned)p->uid,
	    (unsigned)p->gid);
	p->state = ps->n > ps->host.conf->max_clients ? PEER_REFUSED :
	    PEER_HELLO;
	/* The Hello is read (and answered, or refused), or it times out. */
	peer_read_on(p);
	return (p->id);
}

/*
 * End @p's session: add what it delivered to its dataset's totals (the
 * client's own files all count as "(files)", whatever they are called),
 * then free it.
 */
static void
peer_end_session(struct peer *p)
{
	struct peers		*ps = p->ps;
	struct session_totals	 t;
	struct peers_ended	*e = NULL;
	const char		*name;
	size_t			 i;
	unsigned		 b;

	if (p->session == NULL)
		return;
	session_totals(p->session, &t);
	name = t.own_files ? "(files)" : t.dataset;
	for (i = 0; i < ps->nended && e == NULL; i++)
		if (strcmp(ps->ended[i].dataset, name) == 0)
			e = &ps->ended[i];
	if (e == NULL) {
		ps->ended = xreallocarray(ps->ended, ps->nended + 1,
		    sizeof(*ps->ended));
		e = &ps->ended[ps->nended++];
		memset(e, 0, sizeof(*e));
		e->dataset = xstrdup(name);
	}
	e->sessions++;
	e->steps += t.steps;
	e->rows += t.rows;
	e->bytes_read += t.bytes_read;
	e->samples_replaced += t.samples_replaced;
	e->data_wait_us += t.data_wait_us;
	e->active_us += t.active_us;
	for (b = 0; b < SESSION_WAIT_BUCKETS; b++)
		e->wait_counts[b] += t.wait_counts[b];
	session_free(p->session);
	p->session = NULL;
}

/* Close a connection and free everything it owned. */
static void
peer_free(struct peer *p)
{
	struct outframe	*of;

	if (p == NULL)
		return;
	if (p->pending != NULL)
		session_attach_cancel(p->pending);
	p->pending = NULL;
	peer_end_session(p);
	peer_drop_fds(p);
	while ((of = TAILQ_FIRST(&p->outq)) != NULL) {
		TAILQ_REMOVE(&p->outq, of, entry);
		if (of->fd != -1)
			close(of->fd);
		free(of->buf);
		free(of);
	}
	peer_log_dropped(p);
	TAILQ_REMOVE(&p->ps->list, p, entry);
	p->ps->n--;
	event_free(p->rev);
	event_free(p->wev);
	event_free(p->more_ev);
	if (p->closed_ev != NULL)
		event_free(p->closed_ev);
	wire_in_clear(&p->in);
	close(p->fd);
	log_debug("client %llu closed", (unsigned long long)p->id);
	free(p->ended_why);
	free(p->refused_why);
	free(p->name);
	free(p);
}

/* The socket can take more output; below the limit, requests go on. */
static void
peer_write_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct peer	*p = arg;

	(void)fd;
	(void)ev;
	if (peer_flush(p) == -1) {
		peer_free(p);
		return;
	}
	if (p->paused && p->outq_bytes <= PEER_OUTQ_HIGH) {
		p->paused = false;
		peer_process(p);
	}
}

/* Whether peer @id is still connected. */
bool
peers_has(const struct peers *ps, uint64_t id)
{
	const struct peer	*p;

	TAILQ_FOREACH(p, &ps->list, entry) {
		if (p->id == id)
			return (true);
	}
	return (false);
}

/* Read what arrived and handle every whole frame. */
static void
peer_read_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct peer	*p = arg;
	ssize_t		 n;

	(void)fd;
	if (ev & EV_TIMEOUT) {		/* no Hello in PEER_HELLO_WAIT_S */
		log_debug("client %llu: no Hello within %d s; closing",
		    (unsigned long long)p->id, PEER_HELLO_WAIT_S);
		peer_free(p);
		return;
	}
	n = wire_in_recv(&p->in, p->fd);
	if (n == 0) {
		peer_free(p);
		return;
	}
	if (n == -1 && errno == EAGAIN)
		return;
	/* More descriptors than any frame carries, or lost ones. */
	if (n == -1 && errno == EPROTO) {
		peer_fail(p, INFEED__ERROR_CODE__ERROR_BAD_FRAME,
		    "unexpected file descriptors from the client: more than "
		    "%d, or cut off; only an Attach with files carries any, "
		    "at most 2 (docs/protocol.md)", WIRE_MAX_FDS);
		return;
	}
	if (n == -1) {
		peer_free(p);
		return;
	}
	peer_process(p);
}

/* The client's buffered requests have their turn again. */
static void
peer_more_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct peer	*p = arg;

	(void)fd;
	(void)ev;
	if (!p->paused)
		peer_process(p);
}

/*
 * Handle the whole frames buffered, while the client's replies stay under
 * PEER_OUTQ_HIGH; the rest wait (in the buffer, then the socket) until it
 * reads.  A request may close the peer, so look it up again each round.
 */
static void
peer_process(struct peer *p)
{
	struct peers	*ps = p->ps;
	Infeed__Frame	*f;
	char		*cause = NULL;
	struct timeval	 zero = { 0, 0 };
	uint64_t	 id = p->id;
	unsigned	 handled;

	for (handled = 0;; handled++) {
		p->req.has_id = false;
		p->req.id = 0;
		/* An Attach is being checked: the rest wait for its reply. */
		if (p->pending != NULL) {
			if (peer_flush(p) == -1)
				peer_free(p);
			return;
		}
		if (p->outq_bytes > PEER_OUTQ_HIGH) {
			event_del(p->rev);
			p->paused = true;
			return;
		}
		/* A burst yields to the other clients now and then. */
		if (handled == PEER_BATCH) {
			/* A zero timer runs after the next poll, not before. */
			evtimer_add(p->more_ev, &zero);
			if (peer_flush(p) == -1)
				peer_free(p);
			return;
		}
		switch (wire_in_frame(&p->in, &f, &cause)) {
		case WIRE_AGAIN:
			if (peer_flush(p) == -1)
				peer_free(p);
			return;
		case WIRE_BAD:
			peer_fail(p, INFEED__ERROR_CODE__ERROR_BAD_FRAME,
			    "bad frame: %s; a frame is a 4-byte little-endian "
			    "length and one infeed.Frame (docs/protocol.md)",
			    cause ? cause : "out of memory");
			free(cause);
			return;
		case WIRE_OK:
			break;
		}
		p->req.has_id = f->has_request_id;
		p->req.id = f->request_id;
		/* The descriptors that came with this frame are its own. */
		while (wire_in_frame_fds(&p->in) > 0)
			p->req_fds[p->req_nfds++] = wire_in_take_fd(&p->in);
		if (p->req_nfds > 0 && f->msg_case != INFEED__FRAME__MSG_ATTACH) {
			peer_drop_fds(p);
			peer_fail(p, INFEED__ERROR_CODE__ERROR_BAD_FRAME,
			    "%s came with file descriptors; only an Attach "
			    "with files carries any (docs/protocol.md)",
			    wire_case_name(f->msg_case));
			infeed__frame__free_unpacked(f, NULL);
			return;
		}
		peer_dispatch(p, f);
		infeed__frame__free_unpacked(f, NULL);
		if (!peers_has(ps, id))
			return;
		peer_drop_fds(p);
		if (p->pending != NULL)
			event_del(p->rev);
	}
}

/* Close the descriptors of the request that nothing took. */
static void
peer_drop_fds(struct peer *p)
{
	while (p->req_nfds > 0)
		close(p->req_fds[--p->req_nfds]);
}

/* Hello: check the version, answer Welcome. */
static void
peer_hello(struct peer *p, const Infeed__Hello *h)
{
	Infeed__Frame	f = INFEED__FRAME__INIT;
	Infeed__Welcome	w = INFEED__WELCOME__INIT;

	if (h->protocol_version != WIRE_PROTOCOL_VERSION) {
		peer_fail(p, INFEED__ERROR_CODE__ERROR_VERSION_MISMATCH,
		    "protocol version mismatch: the client speaks version %u, "
		    "infeedd %s speaks version %u; use a libinfeed of the same "
		    "release as the daemon", h->protocol_version,
		    INFEED_VERSION, WIRE_PROTOCOL_VERSION);
		return;
	}
	peer_set_state(p, PEER_READY);
	if (h->client_name != NULL && p->name == NULL &&
	    (p->name = utf8_clean(h->client_name, INFEED_MAX_CLIENT_NAME)) ==
	    NULL)
		fatal("utf8_clean");
	w.protocol_version = WIRE_PROTOCOL_VERSION;
	w.daemon_version = (char *)INFEED_VERSION;
	w.has_max_frame_size = 1;
	w.max_frame_size = p->ps->host.conf->max_frame_size;
	f.msg_case = INFEED__FRAME__MSG_WELCOME;
	f.welcome = &w;
	log_info("client %llu: hello from %s (pid %d, uid %u, gid %u)",
	    (unsigned long long)p->id, p->name ? p->name : "unnamed",
	    (int)p->pid, (unsigned)p->uid, (unsigned)p->gid);
	peer_send(p, p->req, &f, -1);
}

/* ListDatasets: describe the catalogue. */
static void
peer_list_datasets(struct peer *p)
{
	const struct catalogue	 *cat = p->ps->host.cat;
	Infeed__Frame		  f = INFEED__FRAME__INIT;
	Infeed__DatasetList	  dl = INFEED__DATASET_LIST__INIT;
	Infeed__DatasetInfo	 *infos, **ptrs;
	struct dataset		 *ds;
	size_t			  i;

	infos = xcalloc(cat->ndatasets + 1, sizeof(*infos));
	ptrs = xcalloc(cat->ndatasets + 1, sizeof(*ptrs));
	for (i = 0; i < cat->ndatasets; i++) {
		ds = cat->datasets[i];
		infeed__dataset_info__init(&infos[i]);
		infos[i].name = ds->name;
		infos[i].type = (char *)ds->type;
		infos[i].has_samples = 1;
		infos[i].samples = ds->samples;
		infos[i].n_shape = ds->ndim;
		infos[i].shape = ds->shape;
		infos[i].has_dtype = 1;
		infos[i].dtype = (Infeed__DType)ds->dtype;
		infos[i].has_label_dtype = 1;
		infos[i].label_dtype = (Infeed__DType)ds->label_dtype;
		infos[i].has_classes = 1;
		infos[i].classes = ds->classes;
		ptrs[i] = &infos[i];
	}
	dl.n_datasets = cat->ndatasets;
	dl.datasets = ptrs;
	f.msg_case = INFEED__FRAME__MSG_DATASET_LIST;
	f.dataset_list = &dl;
	peer_send(p, p->req, &f, -1);
	free(ptrs);
	free(infos);
}

/* What a session needs of the daemon, as it is now. */
static void
peer_session_host(const struct peer *p, struct session_host *sh)
{
	const struct peers_host	*h = &p->ps->host;

	sh->cat = h->cat;
	sh->pool = h->pool;
	sh->budget = h->budget;
	sh->config_path = h->conf->path;
}

/*
 * Answer Attach @req (of dataset @name) now that p->session is made, or
 * with why not (@code, @cause, freed here).
 */
static void
peer_attached(struct peer *p, struct session_req req, const char *name,
    Infeed__ErrorCode code, char *cause)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__Attached	 at = INFEED__ATTACHED__INIT;
	char			*msg;
	int			 fd = -1;

	if (p->session != NULL && (fd = session_ring_fd(p->session)) == -1) {
		code = INFEED__ERROR_CODE__ERROR_INTERNAL;
		cause = xasprintf("cannot duplicate the ring descriptor: %s",
		    strerror(errno));
		peer_end_session(p);
	}
	if (p->session == NULL) {
		msg = xasprintf("cannot attach to '%s': %s", name,
		    cause ? cause : "unknown error");
		peer_send_error(p, req, code, msg);
		free(msg);
		free(cause);
		return;
	}
	peer_set_state(p, PEER_ATTACHED);
	session_fill_attached(p->session, &at);
	f.msg_case = INFEED__FRAME__MSG_ATTACHED;
	f.attached = &at;
	peer_send(p, req, &f, fd);
}

/*
 * The checks of a pending Attach ended: answer it, then read the client's
 * next requests (those already buffered on the next loop pass).
 */
static void
peer_attach_checked_cb(void *arg)
{
	struct peer		*p = arg;
	struct session_pending	*pending = p->pending;
	struct session_host	 sh;
	Infeed__ErrorCode	 code = INFEED__ERROR_CODE__ERROR_INTERNAL;
	struct timeval		 zero = { 0, 0 };
	char			*cause = NULL, *name;

	p->pending = NULL;
	if (p->closed_ev != NULL)
		event_del(p->closed_ev);
	peer_session_host(p, &sh);
	name = xstrdup(session_pending_name(pending));
	p->session_errors = 0;
	p->session = session_attach_end(pending, &sh, &peer_session_events, p,
	    &code, &cause);
	peer_attached(p, p->attach_req, name, code, cause);
	free(name);
	peer_read_on(p);
	evtimer_add(p->more_ev, &zero);
}

/* The client hung up while its Attach was checked. */
static void
peer_closed_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct peer	*p = arg;

	(void)fd;
	(void)ev;
	log_debug("client %llu hung up while its Attach was checked",
	    (unsigned long long)p->id);
	peer_free(p);
}

/* Attach: start a session on a dataset and send its ring. */
static void
peer_attach(struct peer *p, const Infeed__Attach *a)
{
	struct session_host	 sh;
	struct session_client	 sc;
	Infeed__ErrorCode	 code = INFEED__ERROR_CODE__ERROR_INTERNAL;
	char			*cause = NULL, *name;

	if (p->state == PEER_ATTACHED) {
		peer_drop_fds(p);
		peer_error(p, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
		    "this connection is already attached to a dataset; detach "
		    "first or open another connection");
		return;
	}
	if (p->state == PEER_ENDED) {
		free(p->ended_why);
		p->ended_why = NULL;
		peer_set_state(p, PEER_READY);
	}
	if (strlen(a->dataset) > INFEED_MAX_DATASET_NAME) {
		if ((name = utf8_clean(a->dataset, 32)) == NULL)
			fatal("utf8_clean");
		peer_error(p, INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT,
		    "cannot attach to '%s...': a dataset name has at most %d "
		    "bytes; 'infeedctl datasets' lists the catalogue", name,
		    INFEED_MAX_DATASET_NAME);
		free(name);
		return;
	}
	peer_session_host(p, &sh);
	sc.peer_id = p->id;
	sc.pid = p->pid;
	sc.uid = p->uid;
	sc.gid = p->gid;
	/* What the client controls is checked off the loop, if need be. */
	switch (session_attach_begin(p->ps->checks, &sh, &sc, a, p->req_fds,
	    p->req_nfds, peer_attach_checked_cb, p, &p->pending, &code,
	    &cause)) {
	case -1:
		p->req_nfds = 0;
		peer_error(p, code, "cannot attach to '%s': %s", a->dataset,
		    cause);
		free(cause);
		return;
	case 1:
		p->req_nfds = 0;
		p->attach_req = p->req;
		event_del(p->rev);
		if (p->closed_ev != NULL)
			event_add(p->closed_ev, NULL);
		return;
	default:
		break;
	}
	/* The session takes the descriptors over, whatever comes of it. */
	p->session_errors = 0;
	p->session = session_new_files(&sh, &sc, a, p->req_fds, p->req_nfds,
	    &peer_session_events, p, &code, &cause);
	p->req_nfds = 0;
	peer_attached(p, p->req, a->dataset, code, cause);
}

/* Detach: answer the Next requests still waiting, end the session. */
static void
peer_detach(struct peer *p)
{
	Infeed__Frame		f = INFEED__FRAME__INIT;
	Infeed__Detached	dd = INFEED__DETACHED__INIT;

	session_cancel(p->session, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
	    "Next: the client detached before the step was ready");
	peer_end_session(p);
	peer_set_state(p, PEER_READY);
	f.msg_case = INFEED__FRAME__MSG_DETACHED;
	f.detached = &dd;
	peer_send(p, p->req, &f, -1);
}

/* Next: the session answers, now or when the step is ready. */
static void
peer_next(struct peer *p)
{
	Infeed__ErrorCode	 code;
	char			*cause = NULL;

	if (session_next(p->session, p->req, &code, &cause) == -1) {
		peer_error(p, code, "%s", cause);
		free(cause);
	}
}

/* Release: give a slot back. */
static void
peer_release(struct peer *p, const Infeed__Release *r)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__Released	 rd = INFEED__RELEASED__INIT;
	char			*cause = NULL;

	if (session_release(p->session, r->slot, &cause) == -1) {
		peer_error(p, INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT, "%s",
		    cause);
		free(cause);
		return;
	}
	rd.slot = r->slot;
	f.msg_case = INFEED__FRAME__MSG_RELEASED;
	f.released = &rd;
	peer_send(p, p->req, &f, -1);
}

/* The pool's workers, for GetStats; free with peer_free_workers(). */
static void
peer_fill_workers(const struct pool *pool, Infeed__Stats *st)
{
	struct pool_worker_info	 wi;
	Infeed__WorkerStats	*ws;
	unsigned		 i;

	st->has_jobs_queued = 1;
	st->jobs_queued = pool_jobs_queued(pool);
	st->has_rows_reissued = 1;
	st->rows_reissued = pool_rows_reissued(pool);
	st->n_workers = pool_size(pool);
	st->workers = xcalloc(st->n_workers, sizeof(*st->workers));
	for (i = 0; i < st->n_workers; i++) {
		pool_worker_info(pool, i, &wi);
		ws = xcalloc(1, sizeof(*ws));
		infeed__worker_stats__init(ws);
		ws->pid = wi.pid;
		ws->state = (char *)wi.state;
		ws->has_rows_done = ws->has_restarts = 1;
		ws->rows_done = wi.rows_done;
		ws->restarts = wi.restarts;
		ws->has_stuck = 1;
		ws->stuck = wi.stuck;
		ws->has_busy_s = 1;
		ws->busy_s = wi.busy_s;
		st->workers[i] = ws;
	}
}

/* The daemon, its sessions and its workers now; free with peers_stats_clear. */
void
peers_stats(const struct peers *ps, Infeed__Stats *st_out)
{
	Infeed__Stats		  st = INFEED__STATS__INIT;
	Infeed__SessionStats	 *ss, **ssp;
	const struct peer	 *q;
	size_t			  n = 0, i;

	ss = xcalloc(ps->n + 1, sizeof(*ss));
	ssp = xcalloc(ps->n + 1, sizeof(*ssp));
	TAILQ_FOREACH(q, &ps->list, entry) {
		if (q->session == NULL)
			continue;
		infeed__session_stats__init(&ss[n]);
		session_fill_stats(q->session, &ss[n]);
		ss[n].client_name = q->name;
		ss[n].has_errors_sent = 1;
		ss[n].errors_sent = q->session_errors;
		ssp[n] = &ss[n];
		n++;
	}
	if (n == 0)
		free(ss);	/* peers_stats_clear frees sessions[0] */
	st.daemon_version = (char *)INFEED_VERSION;
	st.has_uptime_ms = 1;
	st.uptime_ms = clock_now_ms() - ps->host.started_ms;
	st.has_clients = 1;
	st.clients = ps->n;
	st.n_sessions = n;
	st.sessions = ssp;
	st.has_memory_used = st.has_memory_budget = 1;
	st.memory_used = ps->host.budget->used - ps->host.budget->kept_bytes -
	    ps->host.budget->held_bytes - ps->host.budget->freeing_bytes;
	st.has_memory_kept = st.has_rings_reused = st.has_rings_made = 1;
	st.memory_kept = ps->host.budget->kept_bytes;
	st.has_memory_held = 1;
	st.memory_held = ps->host.budget->held_bytes;
	st.rings_reused = ps->host.budget->reused;
	st.rings_made = ps->host.budget->made;
	st.memory_budget = ps->host.budget->limit;
	peer_fill_workers(ps->host.pool, &st);
	st.huge_pages = (char *)ring_mem_huge_pages();
	st.has_memory_private = 1;
	st.memory_private = procmem_private(getpid());
	for (i = 0; i < st.n_workers; i++) {
		if (st.workers[i]->pid > 0)
			st.memory_private += procmem_private(
			    st.workers[i]->pid);
	}
	*st_out = st;
}

/* Free what peers_stats allocated (the strings are borrowed). */
void
peers_stats_clear(Infeed__Stats *st)
{
	size_t	i;

	for (i = 0; i < st->n_workers; i++)
		free(st->workers[i]);
	free(st->workers);
	if (st->n_sessions > 0)
		free(st->sessions[0]);	/* the array of them all */
	free(st->sessions);
}

/* GetStats: the daemon, its sessions and its workers. */
static void
peer_stats(struct peer *p)
{
	Infeed__Frame	f = INFEED__FRAME__INIT;
	Infeed__Stats	st;

	peers_stats(p->ps, &st);
	f.msg_case = INFEED__FRAME__MSG_STATS;
	f.stats = &st;
	peer_send(p, p->req, &f, -1);
	peers_stats_clear(&st);
}

/* Ended sessions' totals per dataset: *@n entries. */
const struct peers_ended *
peers_ended(const struct peers *ps, size_t *n)
{
	*n = ps->nended;
	return (ps->ended);
}

/* Errors sent to clients since start, by ErrorCode. */
const uint64_t *
peers_errors(const struct peers *ps)
{
	return (ps->errors);
}

/* Next, Release and Detach need a session. */
static void
peer_session_request(struct peer *p, Infeed__Frame *f)
{
	Infeed__Frame__MsgCase	c = f->msg_case;

	if (p->state == PEER_ENDED) {
		peer_error(p, INFEED__ERROR_CODE__ERROR_NOT_FOUND, "%s",
		    p->ended_why);
		return;
	}
	if (p->state != PEER_ATTACHED) {
		peer_error(p, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
		    "%s without a session; send Attach first",
		    wire_case_name(c));
		return;
	}
	if (c == INFEED__FRAME__MSG_NEXT)
		peer_next(p);
	else if (c == INFEED__FRAME__MSG_RELEASE)
		peer_release(p, f->release);
	else
		peer_detach(p);
}

/* Handle one request frame. */
static void
peer_dispatch(struct peer *p, Infeed__Frame *f)
{
	Infeed__Frame__MsgCase	c = f->msg_case;

	if (p->state == PEER_REFUSED && p->refused_why != NULL) {
		peer_fail(p, INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED, "%s",
		    p->refused_why);
		return;
	}
	if (p->state == PEER_REFUSED) {
		peer_fail(p, INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED,
		    "infeedd already serves %u clients (max_clients in %s); "
		    "try again later or ask the operator to raise the limit",
		    p->ps->host.conf->max_clients, p->ps->host.conf->path);
		return;
	}
	if (p->state == PEER_HELLO && c != INFEED__FRAME__MSG_HELLO) {
		peer_fail(p, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
		    "%s before Hello; the first frame must be Hello with "
		    "protocol_version %u", wire_case_name(c),
		    WIRE_PROTOCOL_VERSION);
		return;
	}
	switch (c) {
	case INFEED__FRAME__MSG_HELLO:
		if (p->state != PEER_HELLO) {
			peer_error(p, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
			    "Hello twice; it is the first frame only");
			break;
		}
		peer_hello(p, f->hello);
		break;
	case INFEED__FRAME__MSG_LIST_DATASETS:
		peer_list_datasets(p);
		break;
	case INFEED__FRAME__MSG_ATTACH:
		peer_attach(p, f->attach);
		break;
	case INFEED__FRAME__MSG_GET_STATS:
		peer_stats(p);
		break;
	case INFEED__FRAME__MSG_NEXT:
	case INFEED__FRAME__MSG_RELEASE:
	case INFEED__FRAME__MSG_DETACH:
		peer_session_request(p, f);
		break;
	default:
		peer_fail(p, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
		    "%s is a reply, not a request; clients send Hello, "
		    "ListDatasets, Attach, Next, Release, GetStats or Detach",
		    wire_case_name(c));
		break;
	}
}

/* After a reload: keep sessions whose dataset did not change. */
void
peers_reload(struct peers *ps, const struct config *conf,
    const struct catalogue *cat, unsigned *kept, unsigned *ended)
{
	struct peer	*p;

	ps->host.conf = conf;
	ps->host.cat = cat;
	*kept = *ended = 0;
	TAILQ_FOREACH(p, &ps->list, entry) {
		if (p->session == NULL)
			continue;
		if (session_reload(p->session, cat) == 0) {
			(*kept)++;
			continue;
		}
		/* Answer what waits; later requests get the same reason. */
		p->ended_why = xasprintf("the operator reloaded infeedd and "
		    "dataset '%s' changed or was removed; this session ended, "
		    "attach again", session_dataset_name(p->session));
		session_cancel(p->session, INFEED__ERROR_CODE__ERROR_NOT_FOUND,
		    p->ended_why);
		peer_end_session(p);
		peer_set_state(p, PEER_ENDED);
		(*ended)++;
	}
}

/* What a test may see of a peer. */
int
peers_probe(const struct peers *ps, uint64_t id, struct peer_probe *out)
{
	const struct peer	*p;

	TAILQ_FOREACH(p, &ps->list, entry) {
		if (p->id != id)
			continue;
		out->reading = event_pending(p->rev, EV_READ, NULL) != 0;
		out->unread = 0;
		if (ioctl(p->fd, FIONREAD, &out->unread) == -1)
			out->unread = 0;
		out->fds_kept = p->in.nfds;
		return (0);
	}
	return (-1);
}

/* Connections now. */
unsigned
peers_count(const struct peers *ps)
{
	return (ps->n);
}

/* Attach requests whose checks (or ring memory) are still awaited. */
unsigned
peers_attaching(const struct peers *ps)
{
	return (session_checks_pending(ps->checks));
}

/* Sessions now and the rows they delivered. */
void
peers_totals(const struct peers *ps, struct peers_totals *t)
{
	const struct peer	*p;
	uint64_t		 wait, active;

	memset(t, 0, sizeof(*t));
	TAILQ_FOREACH(p, &ps->list, entry) {
		if (p->session == NULL)
			continue;
		t->sessions++;
		t->rows += session_rows_delivered(p->session);
		session_data_wait(p->session, &wait, &active);
		t->data_wait_us += wait;
		t->active_us += active;
	}
}
