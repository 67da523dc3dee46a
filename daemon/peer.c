/* SPDX-License-Identifier: MIT */
/*
 * Client connections.  Each peer is a non-blocking Unix socket with a read
 * event, a write event armed only while its output queue is non-empty, and
 * a wire_in that cuts what it reads into frames.  Requests are handled in
 * order by one switch on the frame's oneof case.
 *
 * Whatever one client does is that client's problem: a malformed, oversized
 * or out-of-place frame gets an Error frame (where the socket still takes
 * it) and that peer alone is closed.  A client that stops reading has its
 * output bounded: past PEER_OUTQ_HIGH queued bytes we stop reading its
 * requests until it drains.
 */

#include <sys/socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon.h"
#include "version.h"

#define PEER_OUTQ_HIGH	(256 * 1024)

static void	peer_read_cb(evutil_socket_t, short, void *);
static void	peer_write_cb(evutil_socket_t, short, void *);
static void	peer_dispatch(struct peer *, Infeed__Frame *);

/* Take a new connection, unless the client limit is reached. */
void
peer_accept(struct daemon *d, int fd)
{
	struct peer	*p;
	struct ucred	 cred;
	socklen_t	 len = sizeof(cred);

	p = xcalloc(1, sizeof(*p));
	p->d = d;
	p->fd = fd;
	p->id = ++d->next_peer_id;
	p->pid = -1;
	p->uid = (uid_t)-1;
	p->gid = (gid_t)-1;
	TAILQ_INIT(&p->outq);
	wire_in_init(&p->in, d->conf->max_frame_size);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		p->pid = cred.pid;
		p->uid = cred.uid;
		p->gid = cred.gid;
	}
	p->rev = event_new(d->base, fd, EV_READ | EV_PERSIST, peer_read_cb, p);
	p->wev = event_new(d->base, fd, EV_WRITE | EV_PERSIST, peer_write_cb,
	    p);
	if (p->rev == NULL || p->wev == NULL)
		fatalx("event_new for a client");
	TAILQ_INSERT_TAIL(&d->peers, p, entry);
	d->npeers++;
	log_debug("client %llu connected (pid %d, uid %u, gid %u)",
	    (unsigned long long)p->id, (int)p->pid, (unsigned)p->uid,
	    (unsigned)p->gid);
	if (d->npeers > d->conf->max_clients) {
		peer_fail(p, INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED,
		    "infeedd already serves %u clients (max_clients in %s); "
		    "try again later or raise the limit", d->conf->max_clients,
		    d->conf->path);
		return;
	}
	event_add(p->rev, NULL);
}

/* Close a connection and free everything it owned. */
void
peer_free(struct peer *p)
{
	struct outframe	*of;

	if (p == NULL)
		return;
	if (p->session != NULL)
		session_free(p->session);
	while ((of = TAILQ_FIRST(&p->outq)) != NULL) {
		TAILQ_REMOVE(&p->outq, of, entry);
		if (of->fd != -1)
			close(of->fd);
		free(of->buf);
		free(of);
	}
	TAILQ_REMOVE(&p->d->peers, p, entry);
	p->d->npeers--;
	event_free(p->rev);
	event_free(p->wev);
	wire_in_clear(&p->in);
	close(p->fd);
	log_debug("client %llu closed", (unsigned long long)p->id);
	free(p->detached_why);
	free(p->name);
	free(p);
}

/* Close every peer, at shutdown. */
void
peer_free_all(struct daemon *d)
{
	struct peer	*p;

	while ((p = TAILQ_FIRST(&d->peers)) != NULL)
		peer_free(p);
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
	if (p->outq_bytes > PEER_OUTQ_HIGH)
		event_del(p->rev);
	else
		event_add(p->rev, NULL);
	return (0);
}

/* Queue a frame (and an fd, which the queue now owns) and try to send. */
void
peer_send(struct peer *p, const Infeed__Frame *f, int fd)
{
	struct config	*conf = p->d->conf;
	struct outframe	*of;
	Infeed__Frame	 ef = INFEED__FRAME__INIT;
	Infeed__Error	 e = INFEED__ERROR__INIT;
	char		 msg[512];

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

/* Build an Error frame and queue it. */
static void
peer_queue_error(struct peer *p, Infeed__ErrorCode code, const char *fmt,
    va_list ap)
{
	Infeed__Frame	f = INFEED__FRAME__INIT;
	Infeed__Error	e = INFEED__ERROR__INIT;
	char		msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	e.code = code;
	e.message = msg;
	f.msg_case = INFEED__FRAME__MSG_ERROR;
	f.error = &e;
	log_info("client %llu (pid %d): %s", (unsigned long long)p->id,
	    (int)p->pid, msg);
	peer_send(p, &f, -1);
}

/* Answer a request with an Error; the connection stays up. */
void
peer_send_error(struct peer *p, Infeed__ErrorCode code, const char *fmt,
    ...)
{
	va_list	ap;

	va_start(ap, fmt);
	peer_queue_error(p, code, fmt, ap);
	va_end(ap);
}

/* Send a final Error if the socket takes it, then close the peer. */
void
peer_fail(struct peer *p, Infeed__ErrorCode code, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	peer_queue_error(p, code, fmt, ap);
	va_end(ap);
	(void)peer_flush(p);
	shutdown(p->fd, SHUT_RDWR);
	peer_free(p);
}

/* The socket can take more output. */
static void
peer_write_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct peer	*p = arg;

	(void)fd;
	(void)ev;
	if (peer_flush(p) == -1)
		peer_free(p);
}

/* Read what arrived and handle every whole frame. */
static void
peer_read_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct peer	*p = arg;
	struct daemon	*d = p->d;
	Infeed__Frame	*f;
	char		*cause = NULL;
	ssize_t		 n;
	uint64_t	 id = p->id;

	(void)fd;
	(void)ev;
	n = wire_in_recv(&p->in, p->fd);
	if (n == 0) {
		peer_free(p);
		return;
	}
	if (n == -1 && errno == EAGAIN)
		return;
	/* Clients never send descriptors: one is as bad as too many. */
	if ((n == -1 && errno == EPROTO) || p->in.nfds > 0) {
		peer_fail(p, INFEED__ERROR_CODE__ERROR_BAD_FRAME,
		    "unexpected file descriptors from the client; clients "
		    "never send any (docs/protocol.md)");
		return;
	}
	if (n == -1) {
		peer_free(p);
		return;
	}
	/* A request may close the peer, so look it up again each round. */
	for (;;) {
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
		peer_dispatch(p, f);
		infeed__frame__free_unpacked(f, NULL);
		TAILQ_FOREACH(p, &d->peers, entry) {
			if (p->id == id)
				break;
		}
		if (p == NULL)
			return;
	}
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
	p->greeted = true;
	if (h->client_name != NULL && p->name == NULL)
		p->name = strndup(h->client_name, INFEED_MAX_CLIENT_NAME);
	w.protocol_version = WIRE_PROTOCOL_VERSION;
	w.daemon_version = (char *)INFEED_VERSION;
	w.has_max_frame_size = 1;
	w.max_frame_size = p->d->conf->max_frame_size;
	f.msg_case = INFEED__FRAME__MSG_WELCOME;
	f.welcome = &w;
	log_info("client %llu: hello from %s (pid %d, uid %u, gid %u)",
	    (unsigned long long)p->id, p->name ? p->name : "unnamed",
	    (int)p->pid, (unsigned)p->uid, (unsigned)p->gid);
	peer_send(p, &f, -1);
}

/* ListDatasets: describe the catalogue. */
static void
peer_list_datasets(struct peer *p)
{
	struct catalogue	 *cat = p->d->cat;
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
	peer_send(p, &f, -1);
	free(ptrs);
	free(infos);
}

/* Attach: start a session on a dataset. */
static void
peer_attach(struct peer *p, const Infeed__Attach *a)
{
	Infeed__ErrorCode	 code = INFEED__ERROR_CODE__ERROR_INTERNAL;
	char			*cause = NULL;

	if (p->session != NULL) {
		peer_send_error(p, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
		    "this connection is already attached to a dataset; detach "
		    "first or open another connection");
		return;
	}
	free(p->detached_why);
	p->detached_why = NULL;
	p->session = session_attach(p, a, &code, &cause);
	if (p->session == NULL) {
		peer_send_error(p, code, "cannot attach to '%s': %s",
		    a->dataset, cause ? cause : "unknown error");
		free(cause);
	}
}

/* Detach: answer the Next requests still waiting, end the session. */
static void
peer_detach(struct peer *p)
{
	Infeed__Frame		f = INFEED__FRAME__INIT;
	Infeed__Detached	dd = INFEED__DETACHED__INIT;
	unsigned		n;

	for (n = session_pending_next(p->session); n > 0; n--)
		peer_send_error(p, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
		    "Next: the client detached before the step was ready");
	session_free(p->session);
	p->session = NULL;
	f.msg_case = INFEED__FRAME__MSG_DETACHED;
	f.detached = &dd;
	peer_send(p, &f, -1);
}

/* Release: give a slot back. */
static void
peer_release(struct peer *p, const Infeed__Release *r)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__Released	 rd = INFEED__RELEASED__INIT;
	char			*cause = NULL;

	if (session_release(p->session, r->slot, &cause) == -1) {
		peer_send_error(p, INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT,
		    "%s", cause);
		free(cause);
		return;
	}
	rd.slot = r->slot;
	f.msg_case = INFEED__FRAME__MSG_RELEASED;
	f.released = &rd;
	peer_send(p, &f, -1);
}

/* GetStats: the daemon, its sessions and its workers. */
static void
peer_stats(struct peer *p)
{
	struct daemon		 *d = p->d;
	Infeed__Frame		  f = INFEED__FRAME__INIT;
	Infeed__Stats		  st = INFEED__STATS__INIT;
	Infeed__SessionStats	 *ss, **ssp;
	struct peer		 *q;
	size_t			  n = 0, i;

	ss = xcalloc(d->npeers + 1, sizeof(*ss));
	ssp = xcalloc(d->npeers + 1, sizeof(*ssp));
	TAILQ_FOREACH(q, &d->peers, entry) {
		if (q->session == NULL)
			continue;
		infeed__session_stats__init(&ss[n]);
		session_fill_stats(q->session, &ss[n]);
		ssp[n] = &ss[n];
		n++;
	}
	st.daemon_version = (char *)INFEED_VERSION;
	st.has_uptime_ms = 1;
	st.uptime_ms = daemon_now_ms() - d->started_ms;
	st.has_clients = 1;
	st.clients = d->npeers;
	st.n_sessions = n;
	st.sessions = ssp;
	st.has_memory_used = st.has_memory_budget = 1;
	st.memory_used = d->memory_used;
	st.memory_budget = d->conf->memory_budget;
	if (d->pool != NULL)
		pool_fill_stats(d->pool, &st);
	f.msg_case = INFEED__FRAME__MSG_STATS;
	f.stats = &st;
	peer_send(p, &f, -1);
	for (i = 0; i < st.n_workers; i++) {
		free(st.workers[i]->state);
		free(st.workers[i]);
	}
	free(st.workers);
	free(ssp);
	free(ss);
}

/* Handle one request frame. */
static void
peer_dispatch(struct peer *p, Infeed__Frame *f)
{
	Infeed__Frame__MsgCase	c = f->msg_case;

	if (!p->greeted && c != INFEED__FRAME__MSG_HELLO) {
		peer_fail(p, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
		    "%s before Hello; the first frame must be Hello with "
		    "protocol_version %u", wire_case_name(c),
		    WIRE_PROTOCOL_VERSION);
		return;
	}
	switch (c) {
	case INFEED__FRAME__MSG_HELLO:
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
		if (p->session == NULL && p->detached_why != NULL) {
			peer_send_error(p, INFEED__ERROR_CODE__ERROR_NOT_FOUND,
			    "%s", p->detached_why);
			break;
		}
		if (p->session == NULL) {
			peer_send_error(p,
			    INFEED__ERROR_CODE__ERROR_UNEXPECTED,
			    "%s without a session; send Attach first",
			    wire_case_name(c));
			break;
		}
		if (c == INFEED__FRAME__MSG_NEXT)
			session_next(p->session);
		else if (c == INFEED__FRAME__MSG_RELEASE)
			peer_release(p, f->release);
		else
			peer_detach(p);
		break;
	default:
		peer_fail(p, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
		    "%s is a reply, not a request; clients send Hello, "
		    "ListDatasets, Attach, Next, Release, GetStats or Detach",
		    wire_case_name(c));
		break;
	}
}
