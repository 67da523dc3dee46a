/* SPDX-License-Identifier: MIT */
/*
 * Reads in flight (io-batch.h): a table of requests, each a read of one
 * buffer, put in flight through an io_uring or handed to a pool of
 * threads, and taken back one completion at a time.  Both backends read
 * again after a partial read, so a caller sees a read whole, short only
 * where the file ended.
 *
 * io_uring punts a read of pages not in the page cache (and every read of
 * a FUSE file) to its io-wq threads, which it bounds by default to four a
 * CPU: the batch raises that bound to its depth, so that depth reads are
 * really in flight on a two-CPU host.
 */

#include <sys/utsname.h>

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io-batch.h"
#include "log.h"
#include "xmalloc.h"

/* A thread's stack: a pread loop needs little. */
#define IO_THREAD_STACK		(64u << 10)

/* One read: @len bytes at @off of @fd into @buf, @got of them so far. */
struct io_req {
	int		 fd;
	uint8_t		*buf;
	size_t		 len;
	size_t		 got;
	uint64_t	 off;
	uint64_t	 tag;
	ssize_t		 res;	/* threads: the result */
};

struct io_batch {
	enum io_backend	 backend;
	unsigned	 depth;
	unsigned	 inflight;	/* queued, in flight or done, not taken */
	struct io_req	*req;		/* depth of them */
	unsigned	*free;		/* indices of unused requests */
	unsigned	 nfree;

	/* io_uring */
	struct io_uring	 ring;
	unsigned	 unsubmitted;

	/* threads: a queue of requests to read and one of reads done */
	pthread_t	*th;
	unsigned	 nth;
	pthread_mutex_t	 mu;
	pthread_cond_t	 todo_cv;
	pthread_cond_t	 done_cv;
	unsigned	*todo, todo_head, ntodo;
	unsigned	*done, done_head, ndone;
	bool		 stop;
};

/* The choice, made once at start and inherited by the workers. */
static enum io_backend	io_chosen = IO_BACKEND_AUTO;
static char		io_chosen_why[256];

/* Parse the configuration's word. */
int
io_backend_parse(const char *s, enum io_backend *out)
{
	if (strcmp(s, "auto") == 0)
		*out = IO_BACKEND_AUTO;
	else if (strcmp(s, "io_uring") == 0)
		*out = IO_BACKEND_URING;
	else if (strcmp(s, "threads") == 0)
		*out = IO_BACKEND_THREADS;
	else
		return (-1);
	return (0);
}

/* The backend's name, for the log, the Stats frame and /metrics. */
const char *
io_backend_name(enum io_backend b)
{
	switch (b) {
	case IO_BACKEND_URING:
		return ("io_uring");
	case IO_BACKEND_THREADS:
		return ("threads");
	default:
		return ("auto");
	}
}

/* kernel.io_uring_disabled, -1 when the kernel has no such sysctl. */
static int
io_uring_disabled_sysctl(void)
{
	FILE	*f;
	int	 v = -1;

	if ((f = fopen("/proc/sys/kernel/io_uring_disabled", "re")) == NULL)
		return (-1);
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return (v);
}

/*
 * Whether this process may use io_uring: a ring set up, and a request
 * through it completed (seccomp may allow the one and not the other).
 * Return: 0, or -errno.
 */
static int
io_uring_probe(void)
{
	struct io_uring		 ring;
	struct io_uring_sqe	*sqe;
	struct io_uring_cqe	*cqe;
	int			 rc;

	if ((rc = io_uring_queue_init(2, &ring, 0)) < 0)
		return (rc);
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_nop(sqe);
	if ((rc = io_uring_submit_and_wait(&ring, 1)) >= 0 &&
	    (rc = io_uring_peek_cqe(&ring, &cqe)) == 0) {
		rc = cqe->res < 0 ? cqe->res : 0;
		io_uring_cqe_seen(&ring, cqe);
	}
	io_uring_queue_exit(&ring);
	return (rc);
}

/* Choose the backend, once, at start. */
enum io_backend
io_backend_choose(enum io_backend want, char *why, size_t len)
{
	struct utsname	 u;
	const char	*env = getenv("INFEED_IO_BACKEND");
	enum io_backend	 b;
	int		 rc, off;

	if (env != NULL && *env != '\0' && io_backend_parse(env, &b) == 0)
		want = b;
	if (want == IO_BACKEND_THREADS) {
		snprintf(why, len, "threads, as configured");
		goto chosen;
	}
	if (uname(&u) == -1)
		snprintf(u.release, sizeof(u.release), "?");
	if ((rc = io_uring_probe()) == 0) {
		snprintf(why, len, "io_uring, kernel %s", u.release);
		io_chosen = IO_BACKEND_URING;
		goto out;
	}
	off = io_uring_disabled_sysctl();
	snprintf(why, len, "threads: io_uring refused (%s%s%s%s), kernel %s",
	    strerror(-rc), off > 0 ? "; kernel.io_uring_disabled = " : "",
	    off > 0 ? (off == 1 ? "1" : "2") : "",
	    rc == -ENOSYS ? "; no io_uring in this kernel, or seccomp" : "",
	    u.release);
	if (want == IO_BACKEND_URING)
		fatalx("io_backend = io_uring, but %s; set io_backend = auto "
		    "or threads", why);
chosen:
	io_chosen = IO_BACKEND_THREADS;
out:
	snprintf(io_chosen_why, sizeof(io_chosen_why), "%s", why);
	/* A fork server started again is exec'd: it chooses the same. */
	(void)setenv("INFEED_IO_BACKEND", io_backend_name(io_chosen), 1);
	return (io_chosen);
}

/* The choice made, or made now. */
enum io_backend
io_backend_chosen(void)
{
	char	why[256];

	if (io_chosen == IO_BACKEND_AUTO)
		(void)io_backend_choose(IO_BACKEND_AUTO, why, sizeof(why));
	return (io_chosen);
}

/* Why. */
const char *
io_backend_why(void)
{
	(void)io_backend_chosen();
	return (io_chosen_why);
}

/* A thread of the threads backend: read whole requests until stopped. */
static void *
io_thread(void *arg)
{
	struct io_batch	*io = arg;
	struct io_req	*r;
	unsigned	 i;
	ssize_t		 n;

	for (;;) {
		pthread_mutex_lock(&io->mu);
		while (io->ntodo == 0 && !io->stop)
			pthread_cond_wait(&io->todo_cv, &io->mu);
		if (io->stop) {
			pthread_mutex_unlock(&io->mu);
			return (NULL);
		}
		i = io->todo[io->todo_head];
		io->todo_head = (io->todo_head + 1) % io->depth;
		io->ntodo--;
		pthread_mutex_unlock(&io->mu);

		r = &io->req[i];
		r->res = 0;
		while (r->got < r->len) {
			n = pread(r->fd, r->buf + r->got, r->len - r->got,
			    (off_t)(r->off + r->got));
			if (n == -1 && errno == EINTR)
				continue;
			if (n == -1) {
				r->res = -errno;
				break;
			}
			if (n == 0)
				break;
			r->got += (size_t)n;
		}
		if (r->res == 0)
			r->res = (ssize_t)r->got;

		pthread_mutex_lock(&io->mu);
		io->done[(io->done_head + io->ndone) % io->depth] = i;
		io->ndone++;
		pthread_cond_signal(&io->done_cv);
		pthread_mutex_unlock(&io->mu);
	}
}

/* Start the threads backend's threads, every signal blocked in them. */
static int
io_threads_start(struct io_batch *io)
{
	pthread_attr_t	attr;
	sigset_t	all, old;
	unsigned	i;

	io->th = xcalloc(io->depth, sizeof(*io->th));
	io->todo = xcalloc(io->depth, sizeof(*io->todo));
	io->done = xcalloc(io->depth, sizeof(*io->done));
	pthread_mutex_init(&io->mu, NULL);
	pthread_cond_init(&io->todo_cv, NULL);
	pthread_cond_init(&io->done_cv, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, IO_THREAD_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < io->depth; i++) {
		if (pthread_create(&io->th[i], &attr, io_thread, io) != 0)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	io->nth = i;
	return (i > 0 ? 0 : -1);
}

/* Make a worker's batch. */
struct io_batch *
io_batch_new(enum io_backend b, unsigned depth)
{
	struct io_batch		*io;
	unsigned		 i, workers[2];
	int			 rc;

	io = xcalloc(1, sizeof(*io));
	io->depth = depth;
	io->req = xcalloc(depth, sizeof(*io->req));
	io->free = xcalloc(depth, sizeof(*io->free));
	for (i = 0; i < depth; i++)
		io->free[i] = depth - 1 - i;
	io->nfree = depth;
	io->backend = b;
	if (b == IO_BACKEND_URING) {
		if ((rc = io_uring_queue_init(depth, &io->ring, 0)) == 0) {
			/* Bounded (regular files) and unbounded io-wq threads. */
			workers[0] = depth;
			workers[1] = depth;
			(void)io_uring_register_iowq_max_workers(&io->ring,
			    workers);
			return (io);
		}
		log_warnx("worker: no io_uring here (%s): reading with "
		    "threads", strerror(-rc));
		io->backend = IO_BACKEND_THREADS;
	}
	if (io_threads_start(io) == -1)
		fatalx("worker: cannot start the threads that read");
	return (io);
}

/* Free a batch once what it has in flight is done. */
void
io_batch_free(struct io_batch *io)
{
	unsigned	i;

	if (io == NULL)
		return;
	io_batch_drain(io);
	if (io->backend == IO_BACKEND_URING)
		io_uring_queue_exit(&io->ring);
	else {
		pthread_mutex_lock(&io->mu);
		io->stop = true;
		pthread_cond_broadcast(&io->todo_cv);
		pthread_mutex_unlock(&io->mu);
		for (i = 0; i < io->nth; i++)
			pthread_join(io->th[i], NULL);
		pthread_mutex_destroy(&io->mu);
		pthread_cond_destroy(&io->todo_cv);
		pthread_cond_destroy(&io->done_cv);
		free(io->th);
		free(io->todo);
		free(io->done);
	}
	free(io->req);
	free(io->free);
	free(io);
}

/* Room for more reads. */
unsigned
io_batch_room(const struct io_batch *io)
{
	return (io->nfree);
}

/* Reads not taken yet. */
unsigned
io_batch_inflight(const struct io_batch *io)
{
	return (io->inflight);
}

/* Put the rest of request @i in the ring (submitted later, together). */
static void
io_uring_queue_req(struct io_batch *io, unsigned i)
{
	struct io_req		*r = &io->req[i];
	struct io_uring_sqe	*sqe;

	if ((sqe = io_uring_get_sqe(&io->ring)) == NULL) {
		/* Full of requests not yet submitted: submit them. */
		(void)io_uring_submit(&io->ring);
		io->unsubmitted = 0;
		sqe = io_uring_get_sqe(&io->ring);
	}
	io_uring_prep_read(sqe, r->fd, r->buf + r->got,
	    (unsigned)(r->len - r->got), r->off + r->got);
	io_uring_sqe_set_data64(sqe, i);
	io->unsubmitted++;
}

/* Queue a read. */
void
io_batch_read(struct io_batch *io, int fd, void *buf, size_t len,
    uint64_t off, uint64_t tag)
{
	struct io_req	*r;
	unsigned	 i;

	if (io->nfree == 0)
		fatalx("io_batch_read: more reads than the batch's depth");
	i = io->free[--io->nfree];
	r = &io->req[i];
	r->fd = fd;
	r->buf = buf;
	r->len = len;
	r->got = 0;
	r->off = off;
	r->tag = tag;
	r->res = 0;
	io->inflight++;
	if (io->backend == IO_BACKEND_URING) {
		io_uring_queue_req(io, i);
		return;
	}
	pthread_mutex_lock(&io->mu);
	io->todo[(io->todo_head + io->ntodo) % io->depth] = i;
	io->ntodo++;
	pthread_cond_signal(&io->todo_cv);
	pthread_mutex_unlock(&io->mu);
}

/*
 * The rest of request @r read here, blocking: io_uring answers EAGAIN for
 * a file opened O_NONBLOCK whose pages are not cached, which a resubmit
 * would only spin on.  Return: as a completion's res, for the rest.
 */
static int
io_read_rest(struct io_req *r)
{
	size_t	got = 0;
	ssize_t	n;

	while (r->got + got < r->len) {
		n = pread(r->fd, r->buf + r->got + got, r->len - r->got - got,
		    (off_t)(r->off + r->got + got));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return (-errno);
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return ((int)got);
}

/* io_uring: the next whole (or finally short) read; its request index. */
static unsigned
io_uring_next(struct io_batch *io, ssize_t *res)
{
	struct io_uring_cqe	*cqe;
	struct io_req		*r;
	unsigned		 i;
	int			 rc, n;

	for (;;) {
		if (io->unsubmitted > 0) {
			rc = io_uring_submit_and_wait(&io->ring, 1);
			if (rc >= 0)
				io->unsubmitted = 0;
		}
		rc = io_uring_wait_cqe(&io->ring, &cqe);
		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc < 0)
			fatalx("worker: io_uring_wait_cqe: %s", strerror(-rc));
		i = (unsigned)io_uring_cqe_get_data64(cqe);
		n = cqe->res;
		io_uring_cqe_seen(&io->ring, cqe);
		r = &io->req[i];
		if (n == -EAGAIN)
			n = io_read_rest(r);	/* O_NONBLOCK: not spun on */
		if (n == -EINTR || (n > 0 && r->got + (size_t)n < r->len)) {
			if (n > 0)
				r->got += (size_t)n;
			io_uring_queue_req(io, i);	/* the rest */
			continue;
		}
		*res = n < 0 ? n : (ssize_t)(r->got + (size_t)n);
		return (i);
	}
}

/* Take one completed read. */
int
io_batch_wait(struct io_batch *io, uint64_t *tag, ssize_t *res)
{
	unsigned	i;

	if (io->inflight == 0)
		return (-1);
	if (io->backend == IO_BACKEND_URING)
		i = io_uring_next(io, res);
	else {
		pthread_mutex_lock(&io->mu);
		while (io->ndone == 0)
			pthread_cond_wait(&io->done_cv, &io->mu);
		i = io->done[io->done_head];
		io->done_head = (io->done_head + 1) % io->depth;
		io->ndone--;
		pthread_mutex_unlock(&io->mu);
		*res = io->req[i].res;
	}
	*tag = io->req[i].tag;
	io->free[io->nfree++] = i;
	io->inflight--;
	return (0);
}

/* Wait out everything in flight. */
void
io_batch_drain(struct io_batch *io)
{
	uint64_t	tag;
	ssize_t		res;

	while (io_batch_wait(io, &tag, &res) == 0)
		;
}
