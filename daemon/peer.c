/* SPDX-License-Identifier: MIT */
/*
 * Client connections (see peer.h).  Each peer's socket is a transport
 * (transport.h), which reads into a wire_in, queues the replies the socket
 * does not take and owns the descriptors they carry; this file cuts the
 * frames, dispatches them and answers.  Requests are handled in order by
 * one switch on the frame's oneof case; every reply copies the request's
 * request_id.  A client that stops reading has its output bounded: past
 * PEER_OUTQ_HIGH queued bytes the transport pauses and we handle none of
 * its requests, buffered or not, until it drains to PEER_OUTQ_LOW, so one
 * reply (at most max_frame_size) is the most it can add.  Its refused
 * requests are logged at most PEER_LOG_PER_S times a second, with a count
 * of the rest.  A burst of requests is handled PEER_BATCH at a time, with
 * every other ready client served in between.
 */

#include <sys/ioctl.h>
#include <sys/socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "attach-check.h"
#include "clock.h"
#include "log.h"
#include "peer.h"
#include "session.h"
#include "stats-frame.h"
#include "transport.h"
#include "utf8.h"
#include "version.h"
#include "wire.h"
#include "xmalloc.h"

#define PEER_OUTQ_HIGH		(256 * 1024)	/* queued replies: pause */
#define PEER_OUTQ_LOW		(64 * 1024)	/* ... and read again */
#define PEER_LOG_PER_S		10	/* error lines logged per client */
#define PEER_BATCH		64	/* requests before the others' turn */
#define PEER_HELLO_WAIT_S	10	/* for a new client's Hello */

/*
 * The protocol ends here: the layers below take and give plain C, which
 * numbers error codes, dtypes (checked in wire.c) and file formats as
 * infeed.proto does.
 */
_Static_assert((int)ERRCODE_VERSION_MISMATCH ==
    (int)INFEED__ERROR_CODE__ERROR_VERSION_MISMATCH &&
    (int)ERRCODE_BAD_FRAME ==
    (int)INFEED__ERROR_CODE__ERROR_BAD_FRAME &&
    (int)ERRCODE_UNEXPECTED ==
    (int)INFEED__ERROR_CODE__ERROR_UNEXPECTED &&
    (int)ERRCODE_INVALID_ARGUMENT ==
    (int)INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT &&
    (int)ERRCODE_NOT_FOUND ==
    (int)INFEED__ERROR_CODE__ERROR_NOT_FOUND &&
    (int)ERRCODE_RESOURCE_EXHAUSTED ==
    (int)INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED &&
    (int)ERRCODE_PERMISSION_DENIED ==
    (int)INFEED__ERROR_CODE__ERROR_PERMISSION_DENIED &&
    (int)ERRCODE_DATA ==
    (int)INFEED__ERROR_CODE__ERROR_DATA &&
    (int)ERRCODE_INTERNAL ==
    (int)INFEED__ERROR_CODE__ERROR_INTERNAL,
    "errcode.h and infeed.proto disagree on error codes");
_Static_assert((int)DATASET_FORMAT_NONE ==
    (int)INFEED__FILE_FORMAT__FILE_FORMAT_NONE &&
    (int)DATASET_FORMAT_RAW == (int)INFEED__FILE_FORMAT__FILE_FORMAT_RAW &&
    (int)DATASET_FORMAT_NPY == (int)INFEED__FILE_FORMAT__FILE_FORMAT_NPY,
    "dataset.h and infeed.proto disagree on file formats");

enum peer_state {
	PEER_HELLO,
	PEER_REFUSED,
	PEER_READY,
	PEER_ATTACHED,
	PEER_ENDED,
};

struct peer {
	struct peer_shared	*sh;
	uint64_t		 id;
	enum peer_state		 state;
	struct transport	*t;
	struct event		*more_ev;	/* buffered requests wait */
	pid_t			 pid;
	uid_t			 uid;
	gid_t			 gid;
	char			*name;		/* clean UTF-8, one line */
	struct session		*session;
	uint64_t		 session_errors;	/* sent during it */
	/* An Attach whose checks go on: no request is read meanwhile. */
	struct attach_pending	*pending;
	struct session_req	 attach_req;	/* ... and its request */
	struct event		*closed_ev;	/* ... and a hang-up */
	char			*ended_why;	/* ENDED: what a reload did */
	char			*refused_why;	/* REFUSED: not max_clients */
	struct session_req	 req;		/* the request being handled */
	int			 req_fds[WIRE_MAX_FDS];	/* came with it */
	size_t			 req_nfds;
	uint64_t		 log_second;	/* when its log window began */
	unsigned		 log_lines;	/* error lines in that window */
	unsigned		 log_dropped;	/* not logged in it */
};
static void	peer_read_cb(void *);
static void	peer_hello_timeout_cb(void *);
static void	peer_drained_cb(void *);
static void	peer_broken_cb(void *, int);
static void	peer_more_cb(evutil_socket_t, short, void *);
static void	peer_dispatch(struct peer *, Infeed__Frame *);
static void	peer_process(struct peer *);
static void	peer_drop_fds(struct peer *);
static void	peer_closed_cb(evutil_socket_t, short, void *);

static const struct transport_events peer_transport_events = {
	.read = peer_read_cb,
	.read_timeout = peer_hello_timeout_cb,
	.drained = peer_drained_cb,
	.broken = peer_broken_cb,
};

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

/* PEER_HELLO_WAIT_S, or fewer where INFEED_HELLO_WAIT_S says (the tests). */
static long
peer_hello_wait_s(void)
{
	return (clock_wait_s("INFEED_HELLO_WAIT_S", PEER_HELLO_WAIT_S));
}

/*
 * Read the client's requests.  Until its Hello (or while it is refused) a
 * client has PEER_HELLO_WAIT_S of silence; then it is dropped, so silent
 * connections cannot hold max_clients or the spare descriptor.
 */
static void
peer_read_on(struct peer *p)
{
	struct timeval	tv = { 0, 0 };
	bool		waited = p->state == PEER_HELLO ||
			    p->state == PEER_REFUSED;

	if (p->pending != NULL)		/* its Attach comes first */
		return;
	/* Only a client before its Hello is waited for: no getenv() else. */
	if (waited)
		tv.tv_sec = peer_hello_wait_s();
	/* Paused, the transport reads again once its replies drain. */
	transport_read_on(p->t, waited ? &tv : NULL);
}

/* Send queued output; returns -1 when the peer is gone. */
static int
peer_flush(struct peer *p)
{
	if (transport_flush(p->t) == -1) {
		log_debug("client %llu: send: %s", (unsigned long long)p->id,
		    strerror(errno));
		return (-1);
	}
	peer_read_on(p);
	return (0);
}

/*
 * Pack a reply to @req and send it, with @fd (the transport's now, or
 * closed) if not -1.  A failed send is heard later, from the loop.
 */
static void
peer_send(struct peer *p, struct session_req req, Infeed__Frame *f, int fd)
{
	const struct config	*conf = p->sh->host.conf;
	Infeed__Frame		 ef = INFEED__FRAME__INIT;
	Infeed__Error		 e = INFEED__ERROR__INIT;
	char			 msg[512];
	uint8_t			*buf;
	size_t			 len;

	f->has_request_id = req.has_id;
	f->request_id = req.id;
	buf = wire_pack(f, conf->max_frame_size, &len);
	if (buf == NULL && errno == EMSGSIZE) {
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
		buf = wire_pack(&ef, conf->max_frame_size, &len);
	}
	if (buf == NULL)
		fatal("cannot pack a %s reply", wire_case_name(f->msg_case));
	(void)transport_send_consume(p->t, buf, len, &fd, fd != -1);
	free(buf);
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
    enum errcode code, const char *msg)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT;
	Infeed__Error	 e = INFEED__ERROR__INIT;
	char		*clean;

	if ((clean = utf8_clean(msg, 2047)) == NULL)
		fatal("utf8_clean");
	e.code = (Infeed__ErrorCode)code;
	e.message = clean;
	stats_history_error(&p->sh->history, code);
	if (p->session != NULL)
		p->session_errors++;
	f.msg_case = INFEED__FRAME__MSG_ERROR;
	f.error = &e;
	peer_log_error(p, clean);
	peer_send(p, req, &f, -1);
	free(clean);
}

/* Answer the current request with an Error made of @fmt and @ap. */
static void
peer_verror(struct peer *p, enum errcode code, const char *fmt, va_list ap)
{
	char	 msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	peer_send_error(p, p->req, code, msg);
}

/* Answer the current request with an Error; the connection stays up. */
static void PRINTFLIKE(3, 4)
peer_error(struct peer *p, enum errcode code, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	peer_verror(p, code, fmt, ap);
	va_end(ap);
}

/* Answer with a final Error if the socket takes it, then close the peer. */
static void PRINTFLIKE(3, 4)
peer_fail(struct peer *p, enum errcode code, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	peer_verror(p, code, fmt, ap);
	va_end(ap);
	(void)peer_flush(p);
	shutdown(transport_fd(p->t), SHUT_RDWR);
	peer_free(p);
}

/* The session has a step for a Next. */
static void
peer_step_cb(void *arg, struct session_req req, const struct session_step *s)
{
	struct peer	*p = arg;
	Infeed__Frame	 f = INFEED__FRAME__INIT;
	Infeed__Step	 st = INFEED__STEP__INIT;
	Infeed__Ring	 ring = INFEED__RING__INIT;
	int		 fd = -1;

	st.slot = s->slot;
	st.epoch = s->epoch;
	st.step = s->step;
	st.rows = s->rows;
	/* The session left its group: its own ring goes with this Step. */
	if (s->new_ring) {
		if ((fd = session_ring_fd(p->session)) == -1) {
			peer_send_error(p, req, ERRCODE_INTERNAL, "the session "
			    "left its shared group, and the daemon cannot "
			    "duplicate its new ring's descriptor; see the "
			    "daemon's log");
			log_warn("session %llu: its new ring's descriptor",
			    (unsigned long long)session_id(p->session));
			return;
		}
		ring.slots = s->ring_slots;
		ring.slot_bytes = s->slot_bytes;
		ring.ring_bytes = s->ring_bytes;
		ring.first_slot = s->first_slot;
		st.ring = &ring;
	}
	f.msg_case = INFEED__FRAME__MSG_STEP;
	f.step = &st;
	peer_send(p, req, &f, fd);
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
    enum errcode code, const char *msg)
{
	peer_send_error(arg, req, code, msg);
}

static const struct session_events peer_session_events = {
	.step = peer_step_cb,
	.end_of_data = peer_end_of_data_cb,
	.error = peer_session_error_cb,
};


/* Serve a new connection, or take it only to refuse it. */
struct peer *
peer_new(struct peer_shared *sh, uint64_t id, int fd, bool refused)
{
	struct peer		*p;
	struct ucred		 cred;
	socklen_t		 len = sizeof(cred);
	struct transport_conf	 tc = {
		.kind = TRANSPORT_STREAM,
		.max_frame = sh->host.conf->max_frame_size,
		.high = PEER_OUTQ_HIGH,
		.low = PEER_OUTQ_LOW,
		.events = &peer_transport_events,
	};

	p = xcalloc(1, sizeof(*p));
	p->sh = sh;
	p->id = id;
	p->pid = -1;
	p->uid = (uid_t)-1;
	p->gid = (gid_t)-1;
	tc.arg = p;
	p->t = transport_new(sh->host.base, fd, &tc);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		p->pid = cred.pid;
		p->uid = cred.uid;
		p->gid = cred.gid;
	}
	p->more_ev = event_new(sh->host.base, -1, 0, peer_more_cb, p);
	if (p->more_ev == NULL)
		fatalx("event_new for a client");
	/* While an Attach is checked, a hang-up is noticed (epoll's RDHUP). */
	if ((event_base_get_features(sh->host.base) &
	    EV_FEATURE_EARLY_CLOSE) != 0 && (p->closed_ev = event_new(
	    sh->host.base, fd, EV_CLOSED, peer_closed_cb, p)) == NULL)
		fatalx("event_new for a client");
	log_debug("client %llu connected (pid %d, uid %u, gid %u)",
	    (unsigned long long)p->id, (int)p->pid, (unsigned)p->uid,
	    (unsigned)p->gid);
	p->state = refused ? PEER_REFUSED : PEER_HELLO;
	/* The Hello is read (and answered, or refused), or it times out. */
	peer_read_on(p);
	return (p);
}

/* Refuse a peer not yet heard, saying @why. */
void
peer_refuse(struct peer *p, const char *why)
{
	p->state = PEER_REFUSED;
	free(p->refused_why);
	p->refused_why = xstrdup(why);
	peer_read_on(p);
}

/* End @p's session: add what it did to the history, then free it. */
static void
peer_end_session(struct peer *p)
{
	if (p->session == NULL)
		return;
	stats_history_end(&p->sh->history, p->session);
	session_free(p->session);
	p->session = NULL;
}

/* Close a connection and free everything it owned. */
void
peer_free(struct peer *p)
{
	if (p == NULL)
		return;
	if (p->pending != NULL)
		attach_check_cancel(p->pending);
	p->pending = NULL;
	/* What a corked reply left waits no longer (the client may be gone). */
	(void)transport_flush(p->t);
	peer_end_session(p);
	peer_drop_fds(p);
	peer_log_dropped(p);
	p->sh->owner->closed(p->sh->owner_arg, p);
	event_free(p->more_ev);
	if (p->closed_ev != NULL)
		event_free(p->closed_ev);
	transport_free(p->t);
	log_debug("client %llu closed", (unsigned long long)p->id);
	free(p->ended_why);
	free(p->refused_why);
	free(p->name);
	free(p);
}

/* The client read its replies down to the low mark: requests go on. */
static void
peer_drained_cb(void *arg)
{
	peer_process(arg);
}

/* A reply could not be sent: the client is gone. */
static void
peer_broken_cb(void *arg, int error)
{
	struct peer	*p = arg;

	log_debug("client %llu: send: %s", (unsigned long long)p->id,
	    strerror(error));
	peer_free(p);
}


/*
 * No Hello in PEER_HELLO_WAIT_S.  Only a client before its Hello (or
 * refused) is waited for so; one past it may be silent for as long as it
 * likes (a trainer at a checkpoint), whatever timer fired.
 */
static void
peer_hello_timeout_cb(void *arg)
{
	struct peer	*p = arg;

	if (p->state != PEER_HELLO && p->state != PEER_REFUSED) {
		peer_read_on(p);
		return;
	}
	log_debug("client %llu: no Hello within %ld s; closing",
	    (unsigned long long)p->id, peer_hello_wait_s());
	peer_free(p);
}

/* Read what arrived and handle every whole frame. */
static void
peer_read_cb(void *arg)
{
	struct peer	*p = arg;
	ssize_t		 n;

	n = transport_recv(p->t);
	if (n == 0) {
		peer_free(p);
		return;
	}
	if (n == -1 && errno == EAGAIN)
		return;
	/* More descriptors than any frame carries, or lost ones. */
	if (n == -1 && errno == EPROTO) {
		peer_fail(p, ERRCODE_BAD_FRAME,
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
	if (!transport_paused(p->t))
		peer_process(p);
}

/*
 * Handle the whole frames buffered while the transport is not paused (the
 * client's replies went past PEER_OUTQ_HIGH); the rest wait (in the
 * buffer, then the socket) until it has read them down to PEER_OUTQ_LOW.
 * A request may close the peer, so look it up again each round.
 */
static void
peer_process(struct peer *p)
{
	struct peer_shared *sh = p->sh;
	struct wire_in	*in = transport_in(p->t);
	Infeed__Frame	*f;
	char		*cause = NULL;
	struct timeval	 zero = { 0, 0 };
	uint64_t	 id = p->id;
	unsigned	 handled;

	/*
	 * The replies to the frames handled here go back in one send, at
	 * the flush below (a pipelined Release and Next: its answer and the
	 * Step, one wake-up of the trainer, not two).
	 */
	transport_cork(p->t);
	for (handled = 0;; handled++) {
		p->req.has_id = false;
		p->req.id = 0;
		/* An Attach is being checked: the rest wait for its reply. */
		if (p->pending != NULL) {
			if (peer_flush(p) == -1)
				peer_free(p);
			return;
		}
		/* Over the high mark: its requests wait until it reads. */
		if (transport_paused(p->t))
			return;
		/* A burst yields to the other clients now and then. */
		if (handled == PEER_BATCH) {
			/* A zero timer runs after the next poll, not before. */
			evtimer_add(p->more_ev, &zero);
			if (peer_flush(p) == -1)
				peer_free(p);
			return;
		}
		switch (wire_in_frame(in, &f, &cause)) {
		case WIRE_AGAIN:
			if (peer_flush(p) == -1)
				peer_free(p);
			return;
		case WIRE_BAD:
			peer_fail(p, ERRCODE_BAD_FRAME,
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
		while (wire_in_frame_fds(in) > 0)
			p->req_fds[p->req_nfds++] = wire_in_take_fd(in);
		if (p->req_nfds > 0 && f->msg_case != INFEED__FRAME__MSG_ATTACH) {
			peer_drop_fds(p);
			peer_fail(p, ERRCODE_BAD_FRAME,
			    "%s came with file descriptors; only an Attach "
			    "with files carries any (docs/protocol.md)",
			    wire_case_name(f->msg_case));
			infeed__frame__free_unpacked(f, NULL);
			return;
		}
		peer_dispatch(p, f);
		infeed__frame__free_unpacked(f, NULL);
		if (!sh->owner->has(sh->owner_arg, id))
			return;
		peer_drop_fds(p);
		if (p->pending != NULL)
			transport_read_off(p->t);
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
		peer_fail(p, ERRCODE_VERSION_MISMATCH,
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
	w.max_frame_size = p->sh->host.conf->max_frame_size;
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
	const struct catalogue	 *cat = p->sh->host.cat;
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
		infos[i].has_documents = infos[i].has_tokens =
		    ds->documents != 0;
		infos[i].documents = ds->documents;
		infos[i].tokens = ds->tokens;
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
	const struct peers_host	*h = &p->sh->host;

	sh->cat = h->cat;
	sh->pool = h->pool;
	sh->budget = h->budget;
	sh->config_path = h->conf->path;
	sh->group_window = h->conf->group_window;
	sh->group_linger_ms = h->conf->group_linger_ms;
	sh->base = h->base;
	sh->packs = h->packs;
}

/*
 * Answer Attach @req (of dataset @name) now that p->session is made, or
 * with why not (@code, @cause, freed here).
 */
static void
peer_attached(struct peer *p, struct session_req req, const char *name,
    enum errcode code, char *cause)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__Attached	 at = INFEED__ATTACHED__INIT;
	struct session_info	 info;
	char			*msg;
	int			 fd = -1;

	if (p->session != NULL && (fd = session_ring_fd(p->session)) == -1) {
		code = ERRCODE_INTERNAL;
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
	session_describe(p->session, &info);
	at.session_id = info.id;
	at.combined_batch_size = info.combined_batch_size;
	at.steps_per_epoch = info.steps_per_epoch;
	at.last_step_rows = info.last_step_rows;
	at.has_start_epoch_steps = at.has_start_epoch_last_step_rows = 1;
	at.start_epoch_steps = info.start_epoch_steps;
	at.start_epoch_last_step_rows = info.start_epoch_last_step_rows;
	at.slots = info.layout.slots;
	at.slot_bytes = info.layout.slot_bytes;
	at.ring_bytes = info.layout.ring_bytes;
	at.data_offset = info.layout.data_offset;
	at.labels_offset = info.layout.labels_offset;
	at.indices_offset = info.layout.indices_offset;
	at.n_sample_shape = info.sample_dims;
	at.sample_shape = (uint64_t *)(uintptr_t)info.sample_shape;
	at.data_dtype = (Infeed__DType)info.data_dtype;
	at.sample_bytes = info.sample_bytes;
	at.has_label_dtype = 1;
	at.label_dtype = (Infeed__DType)info.layout.label_dtype;
	if (info.group_id != 0) {
		at.has_group_id = 1;
		at.group_id = info.group_id;
	}
	at.has_quiet_release = at.quiet_release = 1;
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
	struct attach_pending	*pending = p->pending;
	struct session_host	 sh;
	enum errcode		 code = ERRCODE_INTERNAL;
	struct timeval		 zero = { 0, 0 };
	char			*cause = NULL, *name;

	p->pending = NULL;
	if (p->closed_ev != NULL)
		event_del(p->closed_ev);
	peer_session_host(p, &sh);
	name = xstrdup(attach_check_name(pending));
	p->session_errors = 0;
	p->session = attach_check_end(pending, &sh, &peer_session_events, p,
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

/*
 * An Attach frame's request in plain C, for the session: LoaderOptions'
 * values (the protocol's defaults for those not set; the client's own
 * Transform, Files as they are).  Strings are borrowed from @a; of
 * repeated fields beyond what a session takes, only the counts are kept,
 * for the session to refuse.
 */
static void
peer_attach_request(const Infeed__Attach *a, struct session_attach *out)
{
	static const Infeed__LoaderOptions defaults =
	    INFEED__LOADER_OPTIONS__INIT;
	const Infeed__LoaderOptions	*lo = a->options ? a->options :
					    &defaults;
	const Infeed__Transform		*t = lo->transform;
	const Infeed__Files		*f = a->files;
	const Infeed__ElasticStage	*es;
	struct session_options		*o = &out->options;
	size_t				 i;

	memset(out, 0, sizeof(*out));
	out->dataset = a->dataset;
#define PEER_OPTION(name, field, type, ...)				\
	o->field = (type)lo->name;
	INFEED_LOADER_OPTIONS(PEER_OPTION)
#undef PEER_OPTION
	o->nstages = lo->n_start_epoch_stages;
	for (i = 0; i < lo->n_start_epoch_stages &&
	    i < INFEED_MAX_ELASTIC_STAGES; i++) {
		es = lo->start_epoch_stages[i];
		o->stages[i].process_count = es->process_count;
		o->stages[i].cbs = es->combined_batch_size;
		o->stages[i].steps_done = es->steps_done;
	}
	if ((o->has_transform = t != NULL)) {
		o->transform.to_float32 = t->to_float32;
		o->transform.scale = t->scale;
		o->transform.nmean = t->n_mean;
		o->transform.nstd = t->n_std;
		for (i = 0; i < t->n_mean && i < INFEED_MAX_CHANNELS; i++)
			o->transform.mean[i] = t->mean[i];
		for (i = 0; i < t->n_std && i < INFEED_MAX_CHANNELS; i++)
			o->transform.std[i] = t->std[i];
		o->transform.pipeline = t->pipeline;
	}
	if ((out->has_files = f != NULL)) {
		out->files.data_format = f->has_data_format ?
		    (uint32_t)f->data_format : 0;
		out->files.labels_format = f->has_labels_format ?
		    (uint32_t)f->labels_format : 0;
		out->files.has_dtype = f->has_dtype;
		out->files.dtype = (uint32_t)f->dtype;
		out->files.has_label_dtype = f->has_label_dtype;
		out->files.label_dtype = (uint32_t)f->label_dtype;
		out->files.ndim = f->n_shape;
		for (i = 0; i < f->n_shape && i < INFEED_MAX_DIMS; i++)
			out->files.shape[i] = f->shape[i];
	}
}

/* Attach: start a session on a dataset and send its ring. */
static void
peer_attach(struct peer *p, const Infeed__Attach *frame)
{
	struct session_attach	 req, *a = &req;
	struct session_host	 sh;
	struct session_client	 sc;
	enum errcode		 code = ERRCODE_INTERNAL;
	char			*cause = NULL, *name;

	peer_attach_request(frame, &req);
	if (p->state == PEER_ATTACHED) {
		peer_drop_fds(p);
		peer_error(p, ERRCODE_UNEXPECTED,
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
		peer_error(p, ERRCODE_INVALID_ARGUMENT,
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
	switch (attach_check_begin(p->sh->checks, &sh, &sc, a, p->req_fds,
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
		transport_read_off(p->t);
		if (p->closed_ev != NULL)
			event_add(p->closed_ev, NULL);
		return;
	default:
		break;
	}
	/* The session takes the descriptors over, whatever comes of it. */
	p->session_errors = 0;
	p->session = session_new(&sh, &sc, a, p->req_fds, p->req_nfds, NULL,
	    &peer_session_events, p, &code, &cause);
	p->req_nfds = 0;
	peer_attached(p, p->req, a->dataset, code, cause);
}

/*
 * Detach: release a Step that crossed it unread, answer the Next requests
 * still waiting, end the session.
 */
static void
peer_detach(struct peer *p, const Infeed__Detach *d)
{
	Infeed__Frame		f = INFEED__FRAME__INIT;
	Infeed__Detached	dd = INFEED__DETACHED__INIT;

	if (d != NULL && d->has_steps_received)
		session_detaching(p->session, d->steps_received);
	session_cancel(p->session, ERRCODE_UNEXPECTED,
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
	enum errcode		 code;
	char			*cause = NULL;

	if (session_next(p->session, p->req, &code, &cause) == -1) {
		peer_error(p, code, "%s", cause);
		free(cause);
	}
}

/* Release: give a slot back; a quiet one is answered only if refused. */
static void
peer_release(struct peer *p, const Infeed__Release *r)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__Released	 rd = INFEED__RELEASED__INIT;
	char			*cause = NULL;

	if (session_release(p->session, r->slot, &cause) == -1) {
		peer_error(p, ERRCODE_INVALID_ARGUMENT, "%s",
		    cause);
		free(cause);
		return;
	}
	if (r->has_quiet && r->quiet)
		return;
	rd.slot = r->slot;
	f.msg_case = INFEED__FRAME__MSG_RELEASED;
	f.released = &rd;
	peer_send(p, p->req, &f, -1);
}

/* GetStats: the snapshot, as a Stats frame. */
static void
peer_stats(struct peer *p)
{
	Infeed__Frame		f = INFEED__FRAME__INIT;
	struct stats_frame	sf;
	struct stats		snap;

	p->sh->owner->snapshot(p->sh->owner_arg, &snap);
	stats_frame_fill(&sf, &snap);
	f.msg_case = INFEED__FRAME__MSG_STATS;
	f.stats = &sf.msg;
	peer_send(p, p->req, &f, -1);
	stats_frame_clear(&sf);
	stats_clear(&snap);
}

/* Next, Release and Detach need a session. */
static void
peer_session_request(struct peer *p, Infeed__Frame *f)
{
	Infeed__Frame__MsgCase	c = f->msg_case;

	if (p->state == PEER_ENDED) {
		peer_error(p, ERRCODE_NOT_FOUND, "%s",
		    p->ended_why);
		return;
	}
	if (p->state != PEER_ATTACHED) {
		peer_error(p, ERRCODE_UNEXPECTED,
		    "%s without a session; send Attach first",
		    wire_case_name(c));
		return;
	}
	if (c == INFEED__FRAME__MSG_NEXT)
		peer_next(p);
	else if (c == INFEED__FRAME__MSG_RELEASE)
		peer_release(p, f->release);
	else
		peer_detach(p, f->detach);
}

/* Handle one request frame. */
static void
peer_dispatch(struct peer *p, Infeed__Frame *f)
{
	Infeed__Frame__MsgCase	c = f->msg_case;

	if (p->state == PEER_REFUSED && p->refused_why != NULL) {
		peer_fail(p, ERRCODE_RESOURCE_EXHAUSTED, "%s",
		    p->refused_why);
		return;
	}
	if (p->state == PEER_REFUSED) {
		peer_fail(p, ERRCODE_RESOURCE_EXHAUSTED,
		    "infeedd already serves %u clients (max_clients in %s); "
		    "try again later or ask the operator to raise the limit",
		    p->sh->host.conf->max_clients, p->sh->host.conf->path);
		return;
	}
	if (p->state == PEER_HELLO && c != INFEED__FRAME__MSG_HELLO) {
		peer_fail(p, ERRCODE_UNEXPECTED,
		    "%s before Hello; the first frame must be Hello with "
		    "protocol_version %u", wire_case_name(c),
		    WIRE_PROTOCOL_VERSION);
		return;
	}
	switch (c) {
	case INFEED__FRAME__MSG_HELLO:
		if (p->state != PEER_HELLO) {
			peer_error(p, ERRCODE_UNEXPECTED,
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
		peer_fail(p, ERRCODE_UNEXPECTED,
		    "%s is a reply, not a request; clients send Hello, "
		    "ListDatasets, Attach, Next, Release, GetStats or Detach",
		    wire_case_name(c));
		break;
	}
}

/* Peer @p's id. */
uint64_t
peer_id(const struct peer *p)
{
	return (p->id);
}

/* Add @p's session, if any, to snapshot @st. */
void
peer_add_stats(const struct peer *p, struct stats *st)
{
	if (p->session != NULL)
		stats_add_session(st, p->session, p->name, p->session_errors);
}

/* After a reload: keep the session if its dataset did not change. */
enum peer_reloaded
peer_reload(struct peer *p, const struct catalogue *cat)
{
	if (p->session == NULL)
		return (PEER_NO_SESSION);
	if (session_reload(p->session, cat) == 0)
		return (PEER_KEPT);
	/* Answer what waits; later requests get the same reason. */
	p->ended_why = xasprintf("the operator reloaded infeedd and "
	    "dataset '%s' changed or was removed; this session ended, "
	    "attach again", session_dataset_name(p->session));
	session_cancel(p->session, ERRCODE_NOT_FOUND, p->ended_why);
	peer_end_session(p);
	peer_set_state(p, PEER_ENDED);
	return (PEER_ENDED_SESSION);
}

/* What a test may see of a peer. */
void
peer_probe(const struct peer *p, struct peer_probe *out)
{
	out->reading = transport_reading(p->t);
	out->unread = 0;
	if (ioctl(transport_fd(p->t), FIONREAD, &out->unread) == -1)
		out->unread = 0;
	out->fds_kept = transport_in(p->t)->nfds;
	out->queued = transport_queued_bytes(p->t);
}
