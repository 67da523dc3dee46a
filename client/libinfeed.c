/* SPDX-License-Identifier: MIT */
/*
 * libinfeed: see infeed.h for the contract.
 *
 * The connection is a blocking Unix socket; every request is answered by
 * exactly one reply, in order.  Release is not waited for: its reply is
 * consumed before the reply of the next request, and a refused release is
 * reported by that next call.
 *
 * Resume: the handle remembers where it is (the next epoch and step) and
 * how it attached, so when the daemon goes away infeed_next can reconnect
 * and attach again with start_epoch/start_step, and the trainer sees the
 * same steps it would have seen without the interruption.
 *
 * Size-carrying structs (docs/libinfeed.md): inside the library every
 * struct is this header's whole struct.  What comes in is widened to it
 * (defaults for what the caller's struct lacks), what goes out is cut to
 * the caller's size (infeed_put); only those two places look at sizes.
 */

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/param.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "infeed.h"
#include "libinfeed-private.h"
#include "wire.h"

struct infeed {
	int		 fd;
	struct wire_in	 in;
	uint32_t	 max_frame;
	char		 error[1024];
	int		 daemon_code;
	unsigned	 releases_unanswered;
	bool		 next_pending;	/* a Next waits for its reply */
	Infeed__Frame	*stashed;	/* its reply, held back by an error */
	bool		 reply_unread;	/* recv2 returned before the reply */
	int		 pagemap;	/* /proc/self/pagemap, or -1 */
	bool		 no_pagemap_scan; /* the kernel lacks the ioctl */

	bool		 attached;
	uint8_t		*ring;
	size_t		 ring_bytes;
	uint64_t	 held;		/* slots of this ring not released */
	bool		 eod_owed;	/* the epoch's last step went out */
	/* Rings of ended sessions whose steps the caller still holds. */
	struct infeed_old_ring {
		uint8_t		*ring;
		size_t		 ring_bytes;
		uint64_t	 session_id;
		uint64_t	 held;		/* a bit per slot */
	}		*old;
	size_t		 nold;
	uint64_t	 slot_bytes;
	uint64_t	 data_offset;
	uint64_t	 labels_offset;
	uint64_t	 indices_offset;
	int		 label_dtype;	/* of the ring: INT32 or INT64 */

	/* What it takes to reconnect and resume. */
	char			*path;
	char			*name;
	char			*dataset;
	struct infeed_options	 opts;		/* its transform: ours */
	char			*transform;	/* opts.transform's copy */
	struct infeed_files	 files;		/* with nfiles */
	int			 files_fd[2];	/* our duplicates */
	size_t			 nfiles;	/* 0: a catalogue dataset */
	uint64_t		 session_id;
	uint64_t		 steps_per_epoch;
	uint64_t		 next_epoch;
	uint64_t		 next_step;
};

#define INFEED_HANDSHAKE_MS	10000	/* connect and Hello, by default */

/*
 * Request ids (docs/protocol.md, pipelining): a Release's reply may come
 * before or after the Step of a Next sent earlier, so every reply is told
 * apart by the id its request carried.
 */
#define INFEED_ID_RELEASE	1
#define INFEED_ID_NEXT		2
#define INFEED_ID_CALL		3

/* The end of @field in @type: a struct of that size holds it wholly. */
#define FIELD_END(type, field)						\
	(offsetof(type, field) + sizeof(((type *)0)->field))

/*
 * No struct may end in padding: a field added later would start inside an
 * older struct's size, and an older caller's padding would be read as it.
 */
_Static_assert(sizeof(struct infeed_options) ==
    FIELD_END(struct infeed_options, transform),
    "infeed_options has tail padding");
_Static_assert(sizeof(struct infeed_session_info) ==
    FIELD_END(struct infeed_session_info, reserved0),
    "infeed_session_info has tail padding");
_Static_assert(sizeof(struct infeed_step) ==
    FIELD_END(struct infeed_step, reserved0), "infeed_step has tail padding");
_Static_assert(sizeof(struct infeed_dataset) ==
    FIELD_END(struct infeed_dataset, reserved0),
    "infeed_dataset has tail padding");
_Static_assert(sizeof(struct infeed_stats) ==
    FIELD_END(struct infeed_stats, memory_held),
    "infeed_stats has tail padding");
_Static_assert(sizeof(struct infeed_session_stats) ==
    FIELD_END(struct infeed_session_stats, errors_sent),
    "infeed_session_stats has tail padding");
_Static_assert(sizeof(struct infeed_files) ==
    FIELD_END(struct infeed_files, shape), "infeed_files has tail padding");
_Static_assert(sizeof(struct infeed_worker_stats) ==
    FIELD_END(struct infeed_worker_stats, reserved),
    "infeed_worker_stats has tail padding");

/* A struct_size above this is not one any infeed.h ever had. */
#define INFEED_MAX_STRUCT_SIZE	4096

/* Record an error message and return @code. */
static int __attribute__((format(printf, 3, 4)))
infeed_fail(struct infeed *f, int code, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(f->error, sizeof(f->error), fmt, ap);
	va_end(ap);
	return (code);
}

/* A fresh handle. */
struct infeed *
infeed_new(void)
{
	struct infeed	*f;

	if ((f = calloc(1, sizeof(*f))) == NULL)
		return (NULL);
	f->fd = -1;
	f->pagemap = -1;
	f->max_frame = INFEED_DEFAULT_MAX_FRAME;
	wire_in_init(&f->in, f->max_frame);
	return (f);
}

/*
 * Write the library's @have bytes at @src to the caller's @size bytes at
 * @dst: what fits, then zeros.  Return: the bytes copied.
 */
static size_t
infeed_put(void *dst, size_t size, const void *src, size_t have)
{
	size_t	n = size < have ? size : have;

	memcpy(dst, src, n);
	if (size > n)
		memset((uint8_t *)dst + n, 0, size - n);
	return (n);
}

/* Whether bytes @from to @to of @p are all zero. */
static bool
infeed_zero(const void *p, size_t from, size_t to)
{
	const uint8_t	*b = p;

	for (; from < to; from++) {
		if (b[from] != 0)
			return (false);
	}
	return (true);
}

/* Refuse an output struct too small to hold its struct_size. */
static int
infeed_check_out_size(struct infeed *f, const char *what, size_t size)
{
	if (size < sizeof(uint32_t) || size > INFEED_MAX_STRUCT_SIZE)
		return (infeed_fail(f, INFEED_ERR_USAGE, "%s of %zu bytes: "
		    "pass the struct as infeed.h declares it", what, size));
	return (INFEED_OK);
}

/*
 * The session ended (a daemon restart, a reload, a detach): unmap its
 * ring, unless the caller still holds steps in it; then keep the mapping
 * until they are released, so that a held step stays readable and
 * unchanged (a new ring is mapped elsewhere).
 */
static void
infeed_unmap(struct infeed *f)
{
	struct infeed_old_ring	*o;

	if (f->ring != NULL && f->held > 0 && (o = reallocarray(f->old,
	    f->nold + 1, sizeof(*f->old))) != NULL) {
		f->old = o;
		o[f->nold].ring = f->ring;
		o[f->nold].ring_bytes = f->ring_bytes;
		o[f->nold].session_id = f->session_id;
		o[f->nold].held = f->held;
		f->nold++;
	} else if (f->ring != NULL)
		munmap(f->ring, f->ring_bytes);
	f->ring = NULL;
	f->held = 0;
	f->attached = false;
	/* A new session owes nothing (infeed_resume keeps what was owed). */
	f->eod_owed = false;
}

/* The bit of @slot in a held mask (slots are fewer than 64). */
static uint64_t
infeed_slot_bit(uint32_t slot)
{
	return (slot < 64 ? UINT64_C(1) << slot : 0);
}

/*
 * A step of an ended session was released: unmap its ring after the
 * last.  Returns whether @session_id was such a session.
 */
static bool
infeed_release_old(struct infeed *f, uint64_t session_id, uint32_t slot)
{
	size_t	i;

	for (i = 0; i < f->nold; i++) {
		if (f->old[i].session_id != session_id)
			continue;
		/* Releasing a step twice does not free another's ring. */
		f->old[i].held &= ~infeed_slot_bit(slot);
		if (f->old[i].held == 0) {
			munmap(f->old[i].ring, f->old[i].ring_bytes);
			f->old[i] = f->old[--f->nold];
		}
		return (true);
	}
	return (false);
}

/* Close the duplicates of the files of the last attach, if any. */
static void
infeed_files_close(struct infeed *f)
{
	while (f->nfiles > 0)
		close(f->files_fd[--f->nfiles]);
}

/* Close, unmap, free. */
void
infeed_free(struct infeed *f)
{
	if (f == NULL)
		return;
	infeed_files_close(f);
	f->held = 0;
	infeed_unmap(f);
	while (f->nold > 0) {
		f->nold--;
		munmap(f->old[f->nold].ring, f->old[f->nold].ring_bytes);
	}
	free(f->old);
	if (f->fd != -1)
		close(f->fd);
	if (f->pagemap != -1)
		close(f->pagemap);
	if (f->stashed != NULL)
		infeed__frame__free_unpacked(f->stashed, NULL);
	wire_in_clear(&f->in);
	free(f->path);
	free(f->name);
	free(f->dataset);
	free(f->transform);
	free(f);
}

/* The last error's text. */
const char *
infeed_error(const struct infeed *f)
{
	return (f->error[0] ? f->error : "no error");
}

/* The daemon's ErrorCode behind the last INFEED_ERR_DAEMON. */
int
infeed_daemon_code(const struct infeed *f)
{
	return (f->daemon_code);
}

static int	infeed_send_fds(struct infeed *, const Infeed__Frame *,
		    const int *, size_t);

/* Send one frame. */
static int
infeed_send(struct infeed *f, const Infeed__Frame *frame)
{
	return (infeed_send_fds(f, frame, NULL, 0));
}

/* Send one frame with @nfds descriptors on its first byte. */
static int
infeed_send_fds(struct infeed *f, const Infeed__Frame *frame, const int *fds,
    size_t nfds)
{
	uint8_t	*buf;
	size_t	 len;
	int	 r;

	if (f->fd == -1)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not connected; call "
		    "infeed_connect first"));
	if ((buf = wire_pack(frame, f->max_frame, &len)) == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "cannot pack a %s "
		    "request: %s", wire_case_name(frame->msg_case),
		    strerror(errno)));
	r = wire_send_all_fds(f->fd, buf, len, fds, nfds);
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

/*
 * How long connect and the Hello may take: a daemon that does not accept
 * or answer (stopped, or out of descriptors) is an error, not a hang.
 * $INFEED_CONNECT_TIMEOUT_MS changes it.
 */
static unsigned
infeed_handshake_ms(void)
{
	const char	*e = getenv("INFEED_CONNECT_TIMEOUT_MS");
	char		*end;
	unsigned long	 v;

	if (e != NULL) {
		v = strtoul(e, &end, 10);
		if (*e != '\0' && *end == '\0' && v > 0 && v < 3600000)
			return ((unsigned)v);
	}
	return (INFEED_HANDSHAKE_MS);
}

/* Bound every send and receive on the socket to @ms (0: no bound). */
static void
infeed_set_timeout(int fd, unsigned ms)
{
	struct timeval	tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/*
 * Wait up to @timeout_ms (-1: for ever) for bytes from the daemon:
 * INFEED_OK, INFEED_TIMEOUT (also when a signal interrupted), or an error.
 */
static int
infeed_poll(struct infeed *f, int timeout_ms)
{
	struct pollfd	pfd = { .fd = f->fd, .events = POLLIN };
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

/* Read the next frame, waiting up to @timeout_ms (-1: for ever). */
static int
infeed_recv_any(struct infeed *f, Infeed__Frame **out, int timeout_ms)
{
	char		*cause = NULL;
	ssize_t		 n;
	int		 r;

	for (;;) {
		switch (wire_in_frame(&f->in, out, &cause)) {
		case WIRE_OK:
			return (INFEED_OK);
		case WIRE_BAD:
			infeed_fail(f, INFEED_ERR_PROTOCOL, "bad frame from "
			    "infeedd: %s", cause ? cause : "out of memory");
			free(cause);
			return (INFEED_ERR_PROTOCOL);
		case WIRE_AGAIN:
			break;
		}
		if ((r = infeed_poll(f, timeout_ms)) != INFEED_OK)
			return (r);
		n = wire_in_recv(&f->in, f->fd);
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
	return (f->releases_unanswered > 0);
}

/*
 * Read the reply of the last request (or of the outstanding Next), taking
 * release acknowledgements on the way; wait up to @timeout_ms.
 */
static int
infeed_recv2(struct infeed *f, Infeed__Frame__MsgCase want,
    Infeed__Frame__MsgCase also, Infeed__Frame **out, int timeout_ms)
{
	Infeed__Frame	*fr;
	int		 r, release_error = 0;

	f->daemon_code = 0;
	f->reply_unread = true;
	for (;;) {
		if ((r = infeed_recv_any(f, &fr, timeout_ms)) != INFEED_OK)
			return (r);
		if (infeed_is_release_reply(f, fr)) {
			if (f->releases_unanswered > 0)
				f->releases_unanswered--;
			if (fr->msg_case == INFEED__FRAME__MSG_ERROR) {
				infeed_daemon_error(f, fr->error);
				release_error = 1;
			}
			infeed__frame__free_unpacked(fr, NULL);
			/* Report it now, before waiting for more. */
			if (release_error && timeout_ms >= 0)
				return (INFEED_ERR_DAEMON);
			continue;
		}
		break;
	}
	f->reply_unread = false;
	if (release_error && want == INFEED__FRAME__MSG_STEP &&
	    fr->msg_case != INFEED__FRAME__MSG_ERROR) {
		/* Keep the step for the next call; report the release. */
		f->stashed = fr;
		f->reply_unread = true;
		return (INFEED_ERR_DAEMON);
	}
	if (fr->msg_case == INFEED__FRAME__MSG_ERROR) {
		r = infeed_daemon_error(f, fr->error);
		infeed__frame__free_unpacked(fr, NULL);
		return (r);
	}
	if (fr->msg_case != want && fr->msg_case != also) {
		r = infeed_fail(f, INFEED_ERR_PROTOCOL, "infeedd answered %s "
		    "where %s was expected", wire_case_name(fr->msg_case),
		    wire_case_name(want));
		infeed__frame__free_unpacked(fr, NULL);
		return (r);
	}
	if (release_error) {
		/* The reply is fine, but an earlier release was refused. */
		infeed__frame__free_unpacked(fr, NULL);
		return (INFEED_ERR_DAEMON);
	}
	*out = fr;
	return (INFEED_OK);
}

/* Read the reply of the last request, which must be @want. */
static int
infeed_recv(struct infeed *f, Infeed__Frame__MsgCase want,
    Infeed__Frame **out)
{
	return (infeed_recv2(f, want, want, out, -1));
}

/* Connect and exchange Hello/Welcome. */
int
infeed_connect(struct infeed *f, const char *path, const char *name)
{
	struct sockaddr_un	 sun;
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *reply;
	Infeed__Hello		 h = INFEED__HELLO__INIT;
	int			 r;

	if (f->fd != -1)
		return (infeed_fail(f, INFEED_ERR_USAGE, "already connected"));
	if (path == NULL && (path = getenv("INFEED_SOCKET")) == NULL)
		path = INFEED_DEFAULT_SOCKET;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		return (infeed_fail(f, INFEED_ERR_USAGE, "socket path %s is "
		    "longer than %zu bytes", path, sizeof(sun.sun_path) - 1));
	strcpy(sun.sun_path, path);
	if ((f->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "socket: %s",
		    strerror(errno)));
	infeed_set_timeout(f->fd, infeed_handshake_ms());
	if (connect(f->fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		r = infeed_fail(f, INFEED_ERR_SYSTEM, "cannot connect to "
		    "infeedd at %s: %s (is infeedd running? set --socket or "
		    "INFEED_SOCKET)", path, errno == EAGAIN ? "it accepts no "
		    "connection (stopped, or its backlog is full)" :
		    strerror(errno));
		close(f->fd);
		f->fd = -1;
		return (r);
	}
	h.protocol_version = WIRE_PROTOCOL_VERSION;
	h.client_name = (char *)(name != NULL ? name : "libinfeed");
	fr.msg_case = INFEED__FRAME__MSG_HELLO;
	fr.hello = &h;
	if ((r = infeed_send(f, &fr)) != INFEED_OK ||
	    (r = infeed_recv(f, INFEED__FRAME__MSG_WELCOME, &reply)) !=
	    INFEED_OK) {
		close(f->fd);
		f->fd = -1;
		return (r);
	}
	/* Past the handshake, a step may take as long as its data. */
	infeed_set_timeout(f->fd, 0);
	if (reply->welcome->has_max_frame_size &&
	    reply->welcome->max_frame_size >= INFEED_MIN_MAX_FRAME) {
		f->max_frame = reply->welcome->max_frame_size;
		f->in.max_frame = f->max_frame;
	}
	infeed__frame__free_unpacked(reply, NULL);
	if (f->path == NULL || strcmp(f->path, path) != 0) {
		free(f->path);
		f->path = strdup(path);
	}
	if (name != NULL && f->name != name) {
		free(f->name);
		f->name = strdup(name);
	}
	return (INFEED_OK);
}

/* Send a request with no fields and read its reply. */
static int
infeed_call(struct infeed *f, Infeed__Frame *fr, Infeed__Frame__MsgCase want,
    Infeed__Frame **reply)
{
	int	r;

	fr->has_request_id = 1;
	fr->request_id = INFEED_ID_CALL;
	if ((r = infeed_send(f, fr)) != INFEED_OK)
		return (r);
	return (infeed_recv(f, want, reply));
}

/* Free the strings of a catalogue entry that the caller's @size holds. */
static void
infeed_dataset_clear(struct infeed_dataset *d, size_t size)
{
	if (size >= FIELD_END(struct infeed_dataset, name))
		free(d->name);
	if (size >= FIELD_END(struct infeed_dataset, type))
		free(d->type);
}

/* One catalogue entry from its DatasetInfo; -1 without memory. */
static int
infeed_dataset_from(struct infeed_dataset *d, const Infeed__DatasetInfo *di)
{
	size_t	j;

	memset(d, 0, sizeof(*d));
	d->struct_size = sizeof(*d);
	d->name = strdup(di->name);
	d->type = strdup(di->type ? di->type : "");
	d->samples = di->samples;
	d->ndim = di->n_shape < INFEED_MAX_DIMS ? (uint32_t)di->n_shape :
	    INFEED_MAX_DIMS;
	for (j = 0; j < d->ndim; j++)
		d->shape[j] = di->shape[j];
	d->dtype = di->dtype;
	d->label_dtype = di->label_dtype;
	d->classes = di->classes;
	if (d->name == NULL || d->type == NULL) {
		infeed_dataset_clear(d, sizeof(*d));
		return (-1);
	}
	return (0);
}

/* Fetch the catalogue as an array of the caller's @size per entry. */
int
infeed_list_datasets_size(struct infeed *f, struct infeed_dataset **list,
    size_t *n, size_t size)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *reply;
	Infeed__ListDatasets	 ld = INFEED__LIST_DATASETS__INIT;
	Infeed__DatasetList	*dl;
	struct infeed_dataset	 d, *e;
	uint8_t			*out;
	size_t			 i, k;
	int			 r;

	if ((r = infeed_check_out_size(f, "struct infeed_dataset", size)) !=
	    INFEED_OK)
		return (r);
	fr.msg_case = INFEED__FRAME__MSG_LIST_DATASETS;
	fr.list_datasets = &ld;
	if ((r = infeed_call(f, &fr, INFEED__FRAME__MSG_DATASET_LIST,
	    &reply)) != INFEED_OK)
		return (r);
	dl = reply->dataset_list;
	if ((out = calloc(dl->n_datasets + 1, size)) == NULL) {
		infeed__frame__free_unpacked(reply, NULL);
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	}
	for (i = 0; i < dl->n_datasets; i++) {
		if (infeed_dataset_from(&d, dl->datasets[i]) == -1) {
			infeed_datasets_free_size((struct infeed_dataset *)
			    (void *)out, i, size);
			infeed__frame__free_unpacked(reply, NULL);
			return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of "
			    "memory"));
		}
		e = (struct infeed_dataset *)(void *)(out + i * size);
		k = infeed_put(e, size, &d, sizeof(d));
		e->struct_size = (uint32_t)k;
		/* Strings past the caller's struct were not handed over. */
		if (k < FIELD_END(struct infeed_dataset, name))
			free(d.name);
		if (k < FIELD_END(struct infeed_dataset, type))
			free(d.type);
	}
	*n = dl->n_datasets;
	*list = (struct infeed_dataset *)(void *)out;
	infeed__frame__free_unpacked(reply, NULL);
	return (INFEED_OK);
}

/* Free a catalogue listing of @size bytes an entry. */
void
infeed_datasets_free_size(struct infeed_dataset *list, size_t n,
    size_t size)
{
	size_t	i;

	if (list == NULL)
		return;
	for (i = 0; i < n; i++)
		infeed_dataset_clear((struct infeed_dataset *)(void *)
		    ((uint8_t *)list + i * size), size);
	free(list);
}

/* Read a non-negative decimal from the environment. */
static int
infeed_env_uint(const char *name, uint32_t *out)
{
	const char	*s = getenv(name);
	char		*end;
	unsigned long	 v;

	if (s == NULL || *s == '\0')
		return (-1);
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v > UINT32_MAX)
		return (-1);
	*out = (uint32_t)v;
	return (0);
}

/* poptorch's defaults, and mpirun's rank and size, in a whole struct. */
static void
infeed_options_defaults(struct infeed_options *o)
{
	uint32_t	rank, size;

	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	o->batch_size = 1;
	o->device_iterations = 1;
	o->replication_factor = 1;
	o->gradient_accumulation = 1;
	o->drop_last = true;
	o->buffer_size = 3;
	o->load_indefinitely = true;
	o->distributed_process_count = 1;
	o->scale = 1.0f;
	o->reconnect_timeout_ms = 60000;
	if (infeed_env_uint("OMPI_COMM_WORLD_RANK", &rank) == 0 &&
	    infeed_env_uint("OMPI_COMM_WORLD_SIZE", &size) == 0) {
		o->distributed_process_id = rank;
		o->distributed_process_count = size;
	}
}

/* The defaults in the caller's struct of @size bytes, which it records. */
void
infeed_options_init_size(struct infeed_options *o, size_t size)
{
	struct infeed_options	d;

	if (size < sizeof(o->struct_size) || size > INFEED_MAX_STRUCT_SIZE)
		return;		/* infeed_attach refuses it */
	infeed_options_defaults(&d);
	infeed_put(o, size, &d, sizeof(d));
	o->struct_size = (uint32_t)size;
}

/*
 * The caller's options @o (NULL: the defaults) as a whole struct in @out:
 * its fields, and the defaults for those past its struct_size.
 */
static int
infeed_options_take(struct infeed *f, const struct infeed_options *o,
    struct infeed_options *out)
{
	size_t	size;

	infeed_options_defaults(out);
	if (o == NULL)
		return (INFEED_OK);
	size = o->struct_size;
	if (size < sizeof(o->struct_size) || size > INFEED_MAX_STRUCT_SIZE)
		return (infeed_fail(f, INFEED_ERR_USAGE, "the options' "
		    "struct_size is %zu: set them up with infeed_options_init "
		    "first", size));
	if (size > sizeof(*out) && !infeed_zero(o, sizeof(*out), size))
		return (infeed_fail(f, INFEED_ERR_USAGE, "the options set "
		    "fields past the %zu bytes this libinfeed knows (the "
		    "trainer's are %zu): it needs a newer libinfeed",
		    sizeof(*out), size));
	memcpy(out, o, size < sizeof(*out) ? size : sizeof(*out));
	out->struct_size = sizeof(*out);
	if (out->nchannels > INFEED_MAX_CHANNELS)
		return (infeed_fail(f, INFEED_ERR_USAGE, "nchannels is %u; at "
		    "most %d", out->nchannels, INFEED_MAX_CHANNELS));
	return (INFEED_OK);
}

/* LoaderOptions (and its Transform @t) from whole options. */
static void
infeed_loader_options(Infeed__LoaderOptions *lo, Infeed__Transform *t,
    const struct infeed_options *o)
{
	lo->has_batch_size = lo->has_device_iterations = 1;
	lo->batch_size = o->batch_size;
	lo->device_iterations = o->device_iterations;
	lo->has_replication_factor = lo->has_gradient_accumulation = 1;
	lo->replication_factor = o->replication_factor;
	lo->gradient_accumulation = o->gradient_accumulation;
	lo->has_shuffle = lo->has_seed = lo->has_drop_last = 1;
	lo->shuffle = o->shuffle;
	lo->seed = o->seed;
	lo->drop_last = o->drop_last;
	lo->has_num_workers = lo->has_buffer_size = 1;
	lo->num_workers = o->num_workers;
	lo->buffer_size = o->buffer_size;
	lo->has_load_indefinitely = lo->has_early_preload = 1;
	lo->load_indefinitely = o->load_indefinitely;
	lo->early_preload = o->early_preload;
	lo->has_distributed_process_id = 1;
	lo->has_distributed_process_count = 1;
	lo->distributed_process_id = o->distributed_process_id;
	lo->distributed_process_count = o->distributed_process_count;
	lo->has_start_epoch = lo->has_start_step = 1;
	lo->start_epoch = o->start_epoch;
	lo->start_step = o->start_step;
	/* 0 is the default; anything else goes as it is, for the daemon. */
	if (o->label_dtype != 0) {
		lo->has_label_dtype = 1;
		lo->label_dtype = (Infeed__DType)o->label_dtype;
	}
	if (o->to_float32) {
		t->has_to_float32 = t->has_scale = 1;
		t->to_float32 = 1;
		t->scale = o->scale;
		t->n_mean = t->n_std = o->nchannels;
		t->mean = (float *)(uintptr_t)o->mean;
		t->std = (float *)(uintptr_t)o->std;
		lo->transform = t;
	}
	if (o->transform != NULL) {
		t->pipeline = (char *)(uintptr_t)o->transform;
		lo->transform = t;
	}
}

/* The labels' dtype in the ring @at describes; int32 when it does not say. */
static int
infeed_ring_label_dtype(const Infeed__Attached *at)
{
	return (at->has_label_dtype ? (int)at->label_dtype :
	    INFEED_DTYPE_INT32);
}

/* Map the ring whose descriptor came with @at. */
static int
infeed_map_ring(struct infeed *f, const Infeed__Attached *at,
    bool copy_on_write)
{
	int	fd, label_dtype = infeed_ring_label_dtype(at);

	if ((fd = wire_in_take_fd(&f->in)) == -1)
		return (infeed_fail(f, INFEED_ERR_PROTOCOL, "Attached came "
		    "without the ring's file descriptor"));
	if (label_dtype != INFEED_DTYPE_INT32 &&
	    label_dtype != INFEED_DTYPE_INT64) {
		close(fd);
		return (infeed_fail(f, INFEED_ERR_PROTOCOL, "Attached says "
		    "the ring's labels are of dtype %d; this libinfeed reads "
		    "int32 (%d) and int64 (%d)", label_dtype,
		    INFEED_DTYPE_INT32, INFEED_DTYPE_INT64));
	}
	f->ring_bytes = at->ring_bytes;
	/*
	 * Copy-on-write: the descriptor stays read-only, so the trainer's
	 * writes land in private pages and never reach the daemon.
	 */
	if (copy_on_write)
		f->ring = mmap(NULL, f->ring_bytes, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE, fd, 0);
	else
		f->ring = mmap(NULL, f->ring_bytes, PROT_READ, MAP_SHARED, fd,
		    0);
	close(fd);
	if (f->ring == MAP_FAILED) {
		f->ring = NULL;
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "cannot map the step "
		    "ring (%zu bytes): %s", f->ring_bytes, strerror(errno)));
	}
#ifdef MADV_HUGEPAGE
	/*
	 * Where the daemon's pages are huge, map them so: fewer faults.  Not
	 * copy-on-write, where a write would copy 2 MiB instead of 4 KiB.
	 */
	if (!copy_on_write)
		(void)madvise(f->ring, f->ring_bytes, MADV_HUGEPAGE);
#endif
	f->slot_bytes = at->slot_bytes;
	f->data_offset = at->data_offset;
	f->labels_offset = at->labels_offset;
	f->indices_offset = at->indices_offset;
	f->label_dtype = label_dtype;
	return (INFEED_OK);
}

/* The whole session info from Attached. */
static void
infeed_info_from(struct infeed_session_info *info, const Infeed__Attached *at)
{
	size_t	i;

	memset(info, 0, sizeof(*info));
	info->struct_size = sizeof(*info);
	info->session_id = at->session_id;
	info->combined_batch_size = at->combined_batch_size;
	info->steps_per_epoch = at->steps_per_epoch;
	info->last_step_rows = at->last_step_rows;
	info->slots = at->slots;
	info->ndim = at->n_sample_shape < INFEED_MAX_DIMS ?
	    (uint32_t)at->n_sample_shape : INFEED_MAX_DIMS;
	for (i = 0; i < info->ndim; i++)
		info->sample_shape[i] = at->sample_shape[i];
	info->data_dtype = at->data_dtype;
	info->sample_bytes = at->sample_bytes;
	info->label_dtype = infeed_ring_label_dtype(at);
}

/* The Files message of whole files @in; pointers borrow from @in. */
static void
infeed_files_message(Infeed__Files *out, const struct infeed_files *in)
{
	out->has_data_format = 1;
	out->data_format = (Infeed__FileFormat)in->data_format;
	out->has_labels_format = 1;
	out->labels_format = (Infeed__FileFormat)in->labels_format;
	if (in->data_format == INFEED_FILE_RAW) {
		out->n_shape = in->ndim;
		out->shape = (uint64_t *)(uintptr_t)in->shape;
		out->has_dtype = 1;
		out->dtype = (Infeed__DType)in->dtype;
	}
	if (in->labels_format == INFEED_FILE_RAW && in->label_dtype != 0) {
		out->has_label_dtype = 1;
		out->label_dtype = (Infeed__DType)in->label_dtype;
	}
}

/*
 * Attach with whole options @o and map the ring; remember how, to resume.
 * With f->nfiles, the dataset is the files of infeed_attach_files.
 * @info: the whole session info, or NULL.
 */
static int
infeed_attach_whole(struct infeed *f, const char *dataset,
    const struct infeed_options *o, struct infeed_session_info *info)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *reply;
	Infeed__Attach		 a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	 lo = INFEED__LOADER_OPTIONS__INIT;
	Infeed__Transform	 t = INFEED__TRANSFORM__INIT;
	Infeed__Files		 fl = INFEED__FILES__INIT;
	Infeed__Attached	*at;
	char			*transform = NULL;
	int			 r;

	/* Our own copy of the transform's text, kept for resuming. */
	if (&f->opts != o && o->transform != NULL &&
	    (transform = strdup(o->transform)) == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	infeed_loader_options(&lo, &t, o);
	a.dataset = (char *)(uintptr_t)dataset;
	a.options = &lo;
	/* The files of infeed_attach_files, again when resuming. */
	if (f->nfiles > 0) {
		infeed_files_message(&fl, &f->files);
		a.files = &fl;
	}
	fr.msg_case = INFEED__FRAME__MSG_ATTACH;
	fr.attach = &a;
	if ((r = infeed_send_fds(f, &fr, f->files_fd, f->nfiles)) !=
	    INFEED_OK || (r = infeed_recv(f, INFEED__FRAME__MSG_ATTACHED,
	    &reply)) != INFEED_OK) {
		free(transform);
		return (r);
	}
	at = reply->attached;
	if ((r = infeed_map_ring(f, at, o->copy_on_write)) != INFEED_OK) {
		infeed__frame__free_unpacked(reply, NULL);
		free(transform);
		return (r);
	}
	f->attached = true;
	f->session_id = at->session_id;
	f->steps_per_epoch = at->steps_per_epoch;
	f->next_epoch = o->start_epoch;
	f->next_step = o->start_step;
	if (f->dataset != dataset) {
		free(f->dataset);
		f->dataset = strdup(dataset);
	}
	if (&f->opts != o) {
		f->opts = *o;
		free(f->transform);
		f->transform = transform;
		f->opts.transform = transform;
	}
	if (info != NULL)
		infeed_info_from(info, at);
	infeed__frame__free_unpacked(reply, NULL);
	return (INFEED_OK);
}

/* Attach to a dataset with the caller's options and session info sizes. */
int
infeed_attach_size(struct infeed *f, const char *dataset,
    const struct infeed_options *o, struct infeed_session_info *info,
    size_t info_size)
{
	struct infeed_options		opts;
	struct infeed_session_info	whole;
	int				r;

	if (f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "already attached; "
		    "call infeed_detach first"));
	if (dataset == NULL)
		return (infeed_fail(f, INFEED_ERR_USAGE, "no dataset named"));
	if (info != NULL && (r = infeed_check_out_size(f,
	    "struct infeed_session_info", info_size)) != INFEED_OK)
		return (r);
	if ((r = infeed_options_take(f, o, &opts)) != INFEED_OK)
		return (r);
	f->eod_owed = false;	/* a new session owes nothing */
	infeed_files_close(f);
	r = infeed_attach_whole(f, dataset, &opts, info ? &whole : NULL);
	if (r == INFEED_OK && info != NULL)
		info->struct_size = (uint32_t)infeed_put(info, info_size,
		    &whole, sizeof(whole));
	return (r);
}

/* No files yet, and the caller's size. */
void
infeed_files_init_size(struct infeed_files *fl, size_t size)
{
	struct infeed_files	d;

	if (size < sizeof(fl->struct_size) || size > INFEED_MAX_STRUCT_SIZE)
		return;		/* infeed_attach_files refuses it */
	memset(&d, 0, sizeof(d));
	d.data_fd = d.labels_fd = -1;
	infeed_put(fl, size, &d, sizeof(d));
	fl->struct_size = (uint32_t)size;
}

/*
 * The caller's files @fl as whole files in @out: its fields, and the
 * defaults for those past its struct_size; checked as far as the library
 * can (the daemon checks the rest).
 */
static int
infeed_files_take(struct infeed *f, const struct infeed_files *fl,
    struct infeed_files *out)
{
	size_t	size;

	if (fl == NULL)
		return (infeed_fail(f, INFEED_ERR_USAGE, "no files given"));
	size = fl->struct_size;
	if (size < FIELD_END(struct infeed_files, data_fd) ||
	    size > INFEED_MAX_STRUCT_SIZE)
		return (infeed_fail(f, INFEED_ERR_USAGE, "the files' "
		    "struct_size is %zu: set them up with infeed_files_init "
		    "first", size));
	if (size > sizeof(*out) && !infeed_zero(fl, sizeof(*out), size))
		return (infeed_fail(f, INFEED_ERR_USAGE, "the files set "
		    "fields past the %zu bytes this libinfeed knows (the "
		    "trainer's are %zu): it needs a newer libinfeed",
		    sizeof(*out), size));
	memset(out, 0, sizeof(*out));
	out->labels_fd = -1;
	memcpy(out, fl, size < sizeof(*out) ? size : sizeof(*out));
	out->struct_size = sizeof(*out);
	if (out->data_fd < 0)
		return (infeed_fail(f, INFEED_ERR_USAGE, "data_fd is %d; open "
		    "the data file for reading first", out->data_fd));
	if ((out->labels_format == INFEED_FILE_NONE) != (out->labels_fd < 0))
		return (infeed_fail(f, INFEED_ERR_USAGE, "labels_fd is %d with "
		    "labels_format %d: a labels file needs labels_format "
		    "INFEED_FILE_RAW or INFEED_FILE_NPY, and no labels file "
		    "INFEED_FILE_NONE and labels_fd -1", out->labels_fd,
		    out->labels_format));
	if (out->ndim > INFEED_MAX_DIMS)
		return (infeed_fail(f, INFEED_ERR_USAGE, "ndim is %u; at most "
		    "%d", out->ndim, INFEED_MAX_DIMS));
	return (INFEED_OK);
}

/* Attach to the caller's own files, passed by descriptor. */
int
infeed_attach_files_size(struct infeed *f, const char *name,
    const struct infeed_files *fl, const struct infeed_options *o,
    struct infeed_session_info *info, size_t info_size)
{
	struct infeed_options		opts;
	struct infeed_session_info	whole;
	struct infeed_files		files;
	int				r, fd;

	if (f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "already attached; "
		    "call infeed_detach first"));
	if (info != NULL && (r = infeed_check_out_size(f,
	    "struct infeed_session_info", info_size)) != INFEED_OK)
		return (r);
	if ((r = infeed_options_take(f, o, &opts)) != INFEED_OK ||
	    (r = infeed_files_take(f, fl, &files)) != INFEED_OK)
		return (r);
	infeed_files_close(f);
	/* Our own copies: the caller may close theirs; a resume needs them. */
	fd = files.data_fd;
	while (fd != -1) {
		if ((f->files_fd[f->nfiles] = fcntl(fd, F_DUPFD_CLOEXEC,
		    0)) == -1) {
			r = infeed_fail(f, INFEED_ERR_SYSTEM, "cannot "
			    "duplicate descriptor %d: %s", fd,
			    strerror(errno));
			infeed_files_close(f);
			return (r);
		}
		fd = f->nfiles++ == 0 ? files.labels_fd : -1;
	}
	f->files = files;
	f->eod_owed = false;	/* a new session owes nothing */
	r = infeed_attach_whole(f, name != NULL ? name : "files", &opts,
	    info ? &whole : NULL);
	if (r != INFEED_OK) {
		infeed_files_close(f);
		return (r);
	}
	if (info != NULL)
		info->struct_size = (uint32_t)infeed_put(info, info_size,
		    &whole, sizeof(whole));
	return (INFEED_OK);
}

/* Milliseconds on the monotonic clock. */
static uint64_t
infeed_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

/* The daemon went away: reconnect and attach again where we were. */
static int
infeed_resume(struct infeed *f, int why)
{
	struct infeed_options	 o = f->opts;
	char			*path, *name, *dataset, saved[sizeof(f->error)];
	uint64_t		 deadline;
	bool			 owed;
	int			 r;

	if (f->opts.reconnect_timeout_ms == 0 || f->path == NULL ||
	    f->dataset == NULL)
		return (why);
	snprintf(saved, sizeof(saved), "%s", f->error);
	deadline = infeed_now_ms() + f->opts.reconnect_timeout_ms;
	path = strdup(f->path);
	name = f->name != NULL ? strdup(f->name) : NULL;
	dataset = strdup(f->dataset);
	o.start_epoch = f->next_epoch;
	o.start_step = f->next_step;
	owed = f->eod_owed;
	infeed_unmap(f);
	f->eod_owed = owed;
	r = why;
	while (path != NULL && dataset != NULL) {
		if (f->fd != -1)
			close(f->fd);
		f->fd = -1;
		wire_in_clear(&f->in);
		wire_in_init(&f->in, f->max_frame);
		f->releases_unanswered = 0;
		f->next_pending = false;
		if (f->stashed != NULL)
			infeed__frame__free_unpacked(f->stashed, NULL);
		f->stashed = NULL;
		if ((r = infeed_connect(f, path, name)) == INFEED_OK) {
			r = infeed_attach_whole(f, dataset, &o, NULL);
			break;
		}
		if (infeed_now_ms() >= deadline)
			break;
		usleep(100000);
	}
	free(path);
	free(name);
	free(dataset);
	if (r != INFEED_OK)
		return (infeed_fail(f, r, "%s; reconnecting for %u ms did not "
		    "work either: %s", saved, o.reconnect_timeout_ms,
		    infeed_error(f)));
	return (INFEED_OK);
}

static int	infeed_next_once(struct infeed *, struct infeed_step *, int);

/* Wait for the next step, resuming after a daemon restart. */
static int
infeed_next_whole(struct infeed *f, struct infeed_step *step, int timeout_ms)
{
	int	r;

	r = infeed_next_once(f, step, timeout_ms);
	if ((r == INFEED_ERR_CLOSED || r == INFEED_ERR_SYSTEM) && f->attached &&
	    infeed_resume(f, r) == INFEED_OK) {
		/*
		 * The daemon went away owing this epoch's EndOfData: the new
		 * session starts at the next epoch, so say it here.
		 */
		if (f->eod_owed) {
			f->eod_owed = false;
			return (INFEED_END_OF_DATA);
		}
		r = infeed_next_once(f, step, timeout_ms);
	}
	return (r);
}

/* The next step within @timeout_ms, in the caller's struct of @size bytes. */
int
infeed_next_timeout_size(struct infeed *f, struct infeed_step *step,
    size_t size, int timeout_ms)
{
	struct infeed_step	whole;
	int			r;

	/* The hot path: this header's struct (or a newer one). */
	if (size >= sizeof(whole) && size <= INFEED_MAX_STRUCT_SIZE) {
		r = infeed_next_whole(f, step, timeout_ms);
		if (r == INFEED_OK && size > sizeof(whole))
			memset((uint8_t *)step + sizeof(whole), 0,
			    size - sizeof(whole));
		return (r);
	}
	if ((r = infeed_check_out_size(f, "struct infeed_step", size)) !=
	    INFEED_OK)
		return (r);
	if ((r = infeed_next_whole(f, &whole, timeout_ms)) == INFEED_OK) {
		memcpy(step, &whole, size);
		step->struct_size = (uint32_t)size;
	}
	return (r);
}

/* The next step, waiting for it. */
int
infeed_next_size(struct infeed *f, struct infeed_step *step, size_t size)
{
	return (infeed_next_timeout_size(f, step, size, -1));
}

/*
 * The reply to the outstanding Next: one held back by a release's error,
 * or one read within @timeout_ms.
 */
static int
infeed_next_reply(struct infeed *f, Infeed__Frame **reply, int timeout_ms)
{
	int	r;

	if (f->stashed != NULL) {
		*reply = f->stashed;
		f->stashed = NULL;
		f->next_pending = false;
		return (INFEED_OK);
	}
	r = infeed_recv2(f, INFEED__FRAME__MSG_STEP,
	    INFEED__FRAME__MSG_END_OF_DATA, reply, timeout_ms);
	/*
	 * Still outstanding after a timeout, or a release's error reported
	 * first; a closed connection is resumed with a new Next.
	 */
	if (!f->reply_unread || (r != INFEED_TIMEOUT &&
	    r != INFEED_ERR_DAEMON))
		f->next_pending = false;
	return (r);
}

/* Ask for the next step once (or collect the one asked for). */
static int
infeed_next_once(struct infeed *f, struct infeed_step *step, int timeout_ms)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *reply;
	Infeed__Next	 nx = INFEED__NEXT__INIT;
	const uint8_t	*base;
	int		 r;

	if (!f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not attached; call "
		    "infeed_attach first"));
	if (!f->next_pending) {
		fr.msg_case = INFEED__FRAME__MSG_NEXT;
		fr.next = &nx;
		fr.has_request_id = 1;
		fr.request_id = INFEED_ID_NEXT;
		if ((r = infeed_send(f, &fr)) != INFEED_OK)
			return (r);
		f->next_pending = true;
	}
	if ((r = infeed_next_reply(f, &reply, timeout_ms)) != INFEED_OK) {
		/* The daemon ended the session (a reload): attach again. */
		if (r == INFEED_ERR_DAEMON &&
		    f->daemon_code == INFEED__ERROR_CODE__ERROR_NOT_FOUND)
			infeed_unmap(f);
		return (r);
	}
	if (reply->msg_case == INFEED__FRAME__MSG_END_OF_DATA) {
		f->next_epoch = reply->end_of_data->epoch + 1;
		f->next_step = 0;
		f->eod_owed = false;
		infeed__frame__free_unpacked(reply, NULL);
		return (INFEED_END_OF_DATA);
	}
	if ((uint64_t)reply->step->slot * f->slot_bytes >= f->ring_bytes) {
		infeed__frame__free_unpacked(reply, NULL);
		return (infeed_fail(f, INFEED_ERR_PROTOCOL, "step in slot %u "
		    "is outside the ring", reply->step->slot));
	}
	base = f->ring + (uint64_t)reply->step->slot * f->slot_bytes;
	step->struct_size = sizeof(*step);
	step->slot = reply->step->slot;
	step->epoch = reply->step->epoch;
	step->step = reply->step->step;
	step->rows = reply->step->rows;
	step->data = base + f->data_offset;
	step->labels = NULL;
	step->labels64 = NULL;
	if (f->label_dtype == INFEED_DTYPE_INT64)
		step->labels64 = (const int64_t *)(const void *)(base +
		    f->labels_offset);
	else
		step->labels = (const int32_t *)(const void *)(base +
		    f->labels_offset);
	step->label_dtype = f->label_dtype;
	step->reserved0 = 0;
	step->indices = (const uint64_t *)(const void *)(base +
	    f->indices_offset);
	step->session = f->session_id;
	f->held |= infeed_slot_bit(step->slot);
	f->next_epoch = step->epoch;
	f->next_step = step->step + 1;
	if (f->next_step == f->steps_per_epoch) {
		f->next_epoch++;
		f->next_step = 0;
		/* Without load_indefinitely, an EndOfData comes next. */
		f->eod_owed = !f->opts.load_indefinitely;
	}
	infeed__frame__free_unpacked(reply, NULL);
	return (INFEED_OK);
}

/*
 * The PAGEMAP_SCAN ioctl of /proc/self/pagemap (Linux 6.7), for headers
 * older than it (Debian 12's are 6.1): it returns the ranges of pages
 * that match, so finding a slot's written pages costs a page-table walk
 * in the kernel instead of reading 8 bytes per page.
 */
#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t	start;
	uint64_t	end;
	uint64_t	categories;
};

struct pm_scan_arg {
	uint64_t	size;
	uint64_t	flags;
	uint64_t	start;
	uint64_t	end;
	uint64_t	walk_end;
	uint64_t	vec;
	uint64_t	vec_len;
	uint64_t	max_pages;
	uint64_t	category_inverted;
	uint64_t	category_mask;
	uint64_t	category_anyof_mask;
	uint64_t	return_mask;
};

#define PAGEMAP_SCAN	_IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_FILE	(1 << 2)
#define PAGE_IS_PRESENT	(1 << 3)
#define PAGE_IS_SWAPPED	(1 << 4)
#endif

/*
 * Whether /proc/self/pagemap entry @ent, of the copy-on-write ring, is a
 * page the trainer wrote: a private (anonymous) copy, in memory (bit 63)
 * or swapped out (bit 62).  File pages (bit 61: the daemon's shared
 * memory, or one of its pages being migrated) are not.
 */
bool
infeed_pagemap_written(uint64_t ent)
{
	return (((ent >> 63 & 1) || (ent >> 62 & 1)) && !(ent >> 61 & 1));
}

/* Drop the private copies of pages in [@p, @p + @len). */
static void
infeed_drop_pages(uint8_t *p, size_t len)
{
	(void)madvise(p, len, MADV_DONTNEED);
}

/*
 * Drop the private pages in [@lo, @hi) found by PAGEMAP_SCAN: not
 * file-backed, and present or swapped (a written page that went to swap
 * would come back from it when the slot is refilled); -1 when the kernel
 * has no such ioctl (then never again).
 */
static int
infeed_restore_scan(struct infeed *f, uintptr_t lo, uintptr_t hi)
{
	struct page_region	reg[32];
	struct pm_scan_arg	arg;
	long			n, i;

	while (lo < hi) {
		memset(&arg, 0, sizeof(arg));
		arg.size = sizeof(arg);
		arg.start = lo;
		arg.end = hi;
		arg.vec = (uintptr_t)reg;
		arg.vec_len = sizeof(reg) / sizeof(reg[0]);
		arg.category_mask = PAGE_IS_FILE;
		arg.category_inverted = PAGE_IS_FILE;
		arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		arg.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		if ((n = ioctl(f->pagemap, PAGEMAP_SCAN, &arg)) == -1) {
			f->no_pagemap_scan = true;
			return (-1);
		}
		for (i = 0; i < n; i++)
			infeed_drop_pages((uint8_t *)(uintptr_t)reg[i].start,
			    reg[i].end - reg[i].start);
		if (arg.walk_end <= lo)
			break;
		lo = arg.walk_end;
	}
	return (0);
}

/*
 * Copy-on-write ring: drop the private pages the trainer wrote in @slot,
 * so that the slot shows the daemon's bytes again when it is refilled.
 * /proc/self/pagemap says which pages are private copies (present or
 * swapped, and not file-backed): dropping only those costs far less than
 * dropping the whole slot, and nothing when nothing was written.
 * MADV_DONTNEED on the private mapping frees a swapped copy's swap entry
 * too.
 */
static void
infeed_restore_slot(struct infeed *f, uint32_t slot)
{
	uint64_t	 ent[512];
	size_t		 page = (size_t)sysconf(_SC_PAGESIZE), npages, i, j, n;
	size_t		 run = SIZE_MAX;
	uintptr_t	 lo, hi;
	uint8_t		*first;

	lo = (uintptr_t)(f->ring + (uint64_t)slot * f->slot_bytes);
	hi = lo + f->slot_bytes;
	lo -= lo % page;
	hi = (hi + page - 1) / page * page;
	first = (uint8_t *)lo;
	npages = (hi - lo) / page;
	if (f->pagemap == -1 && (f->pagemap = open("/proc/self/pagemap",
	    O_RDONLY | O_CLOEXEC)) == -1) {
		infeed_drop_pages(first, hi - lo);
		return;
	}
	if (!f->no_pagemap_scan && infeed_restore_scan(f, lo, hi) == 0)
		return;
	for (i = 0; i < npages; i += n) {
		n = MIN(npages - i, sizeof(ent) / sizeof(ent[0]));
		if (pread(f->pagemap, ent, n * sizeof(*ent),
		    (off_t)((lo / page + i) * sizeof(*ent))) !=
		    (ssize_t)(n * sizeof(*ent))) {
			infeed_drop_pages(first + i * page, (npages - i) * page);
			return;
		}
		for (j = 0; j < n; j++) {
			if (infeed_pagemap_written(ent[j])) {
				if (run == SIZE_MAX)
					run = i + j;
			} else if (run != SIZE_MAX) {
				infeed_drop_pages(first + run * page,
				    (i + j - run) * page);
				run = SIZE_MAX;
			}
		}
	}
	if (run != SIZE_MAX)
		infeed_drop_pages(first + run * page, (npages - run) * page);
}

/* Give a slot back; the acknowledgement is read with the next reply. */
int
infeed_release(struct infeed *f, const struct infeed_step *step)
{
	Infeed__Frame	fr = INFEED__FRAME__INIT;
	Infeed__Release	rl = INFEED__RELEASE__INIT;
	int		r;

	if (step->struct_size < FIELD_END(struct infeed_step, slot))
		return (infeed_fail(f, INFEED_ERR_USAGE, "a step of %u bytes "
		    "holds no slot: pass the step infeed_next filled",
		    step->struct_size));
	/*
	 * From an ended session (a daemon restart, a reload): nothing to tell
	 * the daemon; its ring is unmapped after its last step.  A step
	 * without a session is current.
	 */
	if (step->struct_size >= FIELD_END(struct infeed_step, session) &&
	    (step->session != f->session_id || !f->attached) &&
	    infeed_release_old(f, step->session, step->slot))
		return (INFEED_OK);
	if (!f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not attached"));
	if (step->struct_size >= FIELD_END(struct infeed_step, session) &&
	    step->session != f->session_id)
		return (INFEED_OK);
	if (f->opts.copy_on_write && (f->held & infeed_slot_bit(step->slot)))
		infeed_restore_slot(f, step->slot);
	f->held &= ~infeed_slot_bit(step->slot);
	rl.slot = step->slot;
	fr.msg_case = INFEED__FRAME__MSG_RELEASE;
	fr.release = &rl;
	fr.has_request_id = 1;
	fr.request_id = INFEED_ID_RELEASE;
	r = infeed_send(f, &fr);
	/* The daemon went away with the slot; infeed_next will resume. */
	if ((r == INFEED_ERR_CLOSED || r == INFEED_ERR_SYSTEM) &&
	    f->opts.reconnect_timeout_ms > 0)
		return (INFEED_OK);
	if (r != INFEED_OK)
		return (r);
	f->releases_unanswered++;
	return (INFEED_OK);
}

/* End the session and unmap its ring. */
int
infeed_detach(struct infeed *f)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *reply;
	Infeed__Detach	 dt = INFEED__DETACH__INIT;
	int		 r;

	if (!f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not attached"));
	fr.msg_case = INFEED__FRAME__MSG_DETACH;
	fr.detach = &dt;
	fr.has_request_id = 1;
	fr.request_id = INFEED_ID_CALL;
	r = infeed_send(f, &fr);
	/*
	 * A Next still outstanding is answered first (a Step, or an Error
	 * since the session ends); neither matters now.
	 */
	if (f->stashed != NULL)
		infeed__frame__free_unpacked(f->stashed, NULL);
	f->stashed = NULL;
	if (r == INFEED_OK && f->next_pending) {
		r = infeed_recv2(f, INFEED__FRAME__MSG_STEP,
		    INFEED__FRAME__MSG_END_OF_DATA, &reply, -1);
		if (r == INFEED_OK)
			infeed__frame__free_unpacked(reply, NULL);
		if (r == INFEED_OK || r == INFEED_ERR_DAEMON)
			r = INFEED_OK;
	}
	f->next_pending = false;
	if (r == INFEED_OK)
		r = infeed_recv(f, INFEED__FRAME__MSG_DETACHED, &reply);
	infeed_unmap(f);
	infeed_files_close(f);
	if (r == INFEED_OK)
		infeed__frame__free_unpacked(reply, NULL);
	return (r);
}

/* A zeroed object of the larger of the caller's @size and ours, @have. */
static void *
infeed_alloc_out(size_t size, size_t have)
{
	return (calloc(1, size > have ? size : have));
}

/* A copy of a string that may be absent; false when out of memory. */
static bool
infeed_strdup_opt(char **out, const char *s)
{
	*out = s != NULL ? strdup(s) : NULL;
	return (s == NULL || *out != NULL);
}

/* One session's stats; NULL without memory. */
static struct infeed_session_stats *
infeed_session_stats_from(const Infeed__SessionStats *in, size_t size)
{
	struct infeed_session_stats	*ss;
	const Infeed__LoaderOptions	*lo = in->options;

	if ((ss = infeed_alloc_out(size, sizeof(*ss))) == NULL)
		return (NULL);
	ss->struct_size = sizeof(*ss);
	ss->session_id = in->session_id;
	ss->client_pid = in->client_pid;
	ss->client_uid = in->client_uid;
	ss->epoch = in->epoch;
	ss->step = in->step;
	ss->slots = in->slots;
	ss->slots_ready = in->slots_ready;
	ss->slots_held = in->slots_held;
	ss->steps_delivered = in->steps_delivered;
	ss->items_per_s = in->items_per_s;
	if (lo != NULL) {
		ss->has_options = true;
		ss->batch_size = lo->batch_size;
		ss->device_iterations = lo->device_iterations;
		ss->replication_factor = lo->replication_factor;
		ss->gradient_accumulation = lo->gradient_accumulation;
		ss->shuffle = lo->shuffle;
		ss->seed = lo->seed;
		ss->drop_last = lo->drop_last;
		ss->num_workers = lo->num_workers;
		ss->buffer_size = lo->buffer_size;
		ss->distributed_process_id = lo->distributed_process_id;
		ss->distributed_process_count = lo->distributed_process_count;
	}
	ss->data_wait_s = in->has_data_wait_s ? in->data_wait_s : 0;
	ss->active_s = in->has_active_s ? in->active_s : 0;
	ss->samples_replaced = in->samples_replaced;
	ss->errors_sent = in->errors_sent;
	if (!infeed_strdup_opt(&ss->dataset, in->dataset) ||
	    !infeed_strdup_opt(&ss->client_name, in->client_name) ||
	    !infeed_strdup_opt(&ss->transform, lo != NULL &&
	    lo->transform != NULL ? lo->transform->pipeline : NULL)) {
		free(ss->dataset);
		free(ss->client_name);
		free(ss);
		return (NULL);
	}
	return (ss);
}

/* One worker's stats; NULL without memory. */
static struct infeed_worker_stats *
infeed_worker_stats_from(const Infeed__WorkerStats *in, size_t size)
{
	struct infeed_worker_stats	*ws;

	if ((ws = infeed_alloc_out(size, sizeof(*ws))) == NULL)
		return (NULL);
	ws->struct_size = sizeof(*ws);
	ws->pid = in->pid;
	ws->rows_done = in->rows_done;
	ws->restarts = in->restarts;
	ws->stuck = in->has_stuck ? in->stuck : 0;
	if (!infeed_strdup_opt(&ws->state, in->state)) {
		free(ws);
		return (NULL);
	}
	return (ws);
}

/* The daemon-wide part of Stats and its arrays; NULL without memory. */
static struct infeed_stats *
infeed_stats_from(const Infeed__Stats *in, size_t size, size_t session_size,
    size_t worker_size)
{
	struct infeed_stats	*st;
	size_t			 i;

	if ((st = infeed_alloc_out(size, sizeof(*st))) == NULL)
		return (NULL);
	st->struct_size = sizeof(*st);
	st->uptime_ms = in->uptime_ms;
	st->clients = in->clients;
	st->memory_used = in->memory_used;
	st->memory_budget = in->memory_budget;
	st->memory_kept = in->memory_kept;
	st->rings_reused = in->rings_reused;
	st->rings_made = in->rings_made;
	st->memory_private = in->memory_private;
	st->memory_held = in->memory_held;
	st->jobs_queued = in->jobs_queued;
	st->sessions = calloc(in->n_sessions + 1, sizeof(*st->sessions));
	st->workers = calloc(in->n_workers + 1, sizeof(*st->workers));
	if (st->sessions == NULL || st->workers == NULL ||
	    !infeed_strdup_opt(&st->daemon_version, in->daemon_version) ||
	    !infeed_strdup_opt(&st->huge_pages, in->huge_pages))
		goto fail;
	for (; st->nsessions < in->n_sessions; st->nsessions++) {
		i = st->nsessions;
		if ((st->sessions[i] = infeed_session_stats_from(
		    in->sessions[i], session_size)) == NULL)
			goto fail;
	}
	for (; st->nworkers < in->n_workers; st->nworkers++) {
		i = st->nworkers;
		if ((st->workers[i] = infeed_worker_stats_from(in->workers[i],
		    worker_size)) == NULL)
			goto fail;
	}
	return (st);
fail:
	infeed_stats_free(st);
	return (NULL);
}

/* The daemon's Stats, decoded; objects at least the caller's sizes. */
int
infeed_get_stats_size(struct infeed *f, struct infeed_stats **out,
    size_t size, size_t session_size, size_t worker_size)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *reply;
	Infeed__GetStats gs = INFEED__GET_STATS__INIT;
	int		 r;

	if ((r = infeed_check_out_size(f, "struct infeed_stats", size)) !=
	    INFEED_OK || (r = infeed_check_out_size(f,
	    "struct infeed_session_stats", session_size)) != INFEED_OK ||
	    (r = infeed_check_out_size(f, "struct infeed_worker_stats",
	    worker_size)) != INFEED_OK)
		return (r);
	fr.msg_case = INFEED__FRAME__MSG_GET_STATS;
	fr.get_stats = &gs;
	if ((r = infeed_call(f, &fr, INFEED__FRAME__MSG_STATS, &reply)) !=
	    INFEED_OK)
		return (r);
	*out = infeed_stats_from(reply->stats, size, session_size,
	    worker_size);
	infeed__frame__free_unpacked(reply, NULL);
	if (*out == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	return (INFEED_OK);
}

/* Free decoded Stats. */
void
infeed_stats_free(struct infeed_stats *st)
{
	size_t	i;

	if (st == NULL)
		return;
	for (i = 0; i < st->nsessions; i++) {
		free(st->sessions[i]->dataset);
		free(st->sessions[i]->client_name);
		free(st->sessions[i]->transform);
		free(st->sessions[i]);
	}
	for (i = 0; i < st->nworkers; i++) {
		free(st->workers[i]->state);
		free(st->workers[i]);
	}
	free(st->sessions);
	free(st->workers);
	free(st->daemon_version);
	free(st->huge_pages);
	free(st);
}

/* The daemon's Stats reply, packed, for tools that decode it. */
int
infeed_stats_frame(struct infeed *f, uint8_t **buf, size_t *len)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *reply;
	Infeed__GetStats gs = INFEED__GET_STATS__INIT;
	int		 r;

	fr.msg_case = INFEED__FRAME__MSG_GET_STATS;
	fr.get_stats = &gs;
	if ((r = infeed_call(f, &fr, INFEED__FRAME__MSG_STATS, &reply)) !=
	    INFEED_OK)
		return (r);
	*len = infeed__frame__get_packed_size(reply);
	if ((*buf = malloc(*len ? *len : 1)) == NULL) {
		infeed__frame__free_unpacked(reply, NULL);
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	}
	infeed__frame__pack(reply, *buf);
	infeed__frame__free_unpacked(reply, NULL);
	return (INFEED_OK);
}

/* Name an element type. */
const char *
infeed_dtype_name(int dtype)
{
	return (dtype_name((enum infeed_dtype)dtype));
}

/* Bytes per element of a type. */
size_t
infeed_dtype_size(int dtype)
{
	return (dtype_size((enum infeed_dtype)dtype));
}
