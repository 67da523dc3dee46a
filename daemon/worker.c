/* SPDX-License-Identifier: MIT */
/*
 * A worker process: takes each row's dataset index from the job, reads the
 * sample through the dataset (whose mappings it inherited at fork),
 * transforms it if the session asked, writes data and label into the slot,
 * and answers DONE.  It keeps one mapping per ring it was sent, and for a
 * ring that reads a client's files, the dataset it opened from the
 * descriptors that came with the ring (refused, every job of that ring
 * fails as unreadable: the client changed the files since the daemon
 * checked them).
 */

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "worker.h"
#include "xmalloc.h"

/* Datasets are populated when they take at most this share of RAM. */
#define WORKER_POPULATE_SHARE	4

/* A ring memory mapped in this worker, kept until FORGET. */
struct wmem {
	uint64_t		 id;
	uint64_t		 bytes;
	uint8_t			*map;
};

/* A ring this worker fills, on one of its memories. */
struct wring {
	struct worker_ring	 desc;
	uint8_t			*map;		/* its memory's */
	uint8_t			*tmp;		/* one input sample */
	float			*lut;		/* uint8 -> float, per channel */
	struct dataset		*files;		/* a client's, or NULL */
};

/*
 * Read the rows of JOB @m, whose dataset indices are @indices (from the
 * pool, never from the ring), into its slot.  Return: WORKER_OK, or
 * WORKER_READ_ERROR with m->bad_index (and m->reason for an image), or
 * WORKER_LABEL_RANGE with m->bad_index and m->bad_label (a label that is
 * no class number, or outside int32 when the ring's labels are int32).
 */
static int
worker_rows(struct wring *w, struct transform_work *tw,
    const struct dataset *ds, struct worker_msg *m, const uint64_t *indices)
{
	const struct ring_layout *l = &w->desc.layout;
	const struct transform	*tf = &w->desc.transform;
	uint8_t			*base = w->map + (uint64_t)m->slot *
				    l->slot_bytes;
	int32_t			*labels;
	int64_t			*labels64 = NULL;
	uint8_t			*dst;
	int64_t			 label;
	uint64_t		 r, idx;
	int			 rc;

	labels = (int32_t *)(void *)(base + l->labels_offset);
	if (l->label_dtype == INFEED_DTYPE_INT64)
		labels64 = (int64_t *)(void *)(base + l->labels_offset);
	memcpy(base + l->indices_offset + m->row_begin * sizeof(uint64_t),
	    indices, (m->row_end - m->row_begin) * sizeof(uint64_t));
	m->bytes = 0;
	m->replaced = 0;
	m->reason[0] = '\0';
	for (r = m->row_begin; r < m->row_end; r++) {
		idx = indices[r - m->row_begin];
		dst = base + l->data_offset + r * tf->out_sample_bytes;
		m->bad_index = idx;
		if (idx >= ds->samples)
			return (WORKER_READ_ERROR);
		if (tf->image) {
			rc = transform_image_row(tf, tw, ds, m->epoch, idx, dst,
			    &label, &m->bytes, &m->replaced, m->reason,
			    sizeof(m->reason));
			if (rc == -1)
				return (WORKER_READ_ERROR);
		} else {
			if (dataset_read(ds, idx, tf->to_float32 ? w->tmp :
			    dst, &label) == -1)
				return (WORKER_READ_ERROR);
			if (tf->to_float32)
				transform_row(tf, w->lut, w->tmp,
				    (float *)(void *)dst);
			m->bytes += ds->sample_bytes;
		}
		/*
		 * A client's labels are checked here, row by row, not at
		 * Attach: no class number is negative or past uint32.
		 */
		if (label < 0 || label >= UINT32_MAX) {
			m->bad_label = label;
			return (WORKER_LABEL_RANGE);
		}
		if (labels64 != NULL)
			labels64[r] = label;
		else if (label > INT32_MAX) {
			/* Never wrapped into another class. */
			m->bad_label = label;
			return (WORKER_LABEL_RANGE);
		} else
			labels[r] = (int32_t)label;
	}
	return (WORKER_OK);
}

/*
 * Fill the rows of JOB @m; an enum worker_result, as worker_rows().  The
 * files' sizes are checked once before the rows and once after: if a file
 * shrank meanwhile, the rows are read again, so a row it cut off fails
 * instead of going out as the zeros of a truncated page.
 */
static int
worker_fill(struct wring *w, struct transform_work *tw,
    const struct dataset *ds, struct worker_msg *m, const uint64_t *indices)
{
	int	rc;

	dataset_job_begin();
	rc = worker_rows(w, tw, ds, m, indices);
	if (dataset_job_end() && rc == WORKER_OK) {
		dataset_job_begin();
		rc = worker_rows(w, tw, ds, m, indices);
		(void)dataset_job_end();
	}
	return (rc);
}

/* Whether a JOB fits its ring: a slot, rows and indices that exist. */
static int
worker_job_ok(const struct wring *w, const struct worker_msg *m, size_t n)
{
	const struct ring_layout *l = &w->desc.layout;
	uint64_t		 rows;

	if (m->slot >= l->slots || m->row_begin >= m->row_end ||
	    m->row_end - m->row_begin > WORKER_MAX_JOB_ROWS)
		return (0);
	rows = m->row_end - m->row_begin;
	return (n == sizeof(*m) + rows * sizeof(uint64_t) &&
	    m->row_end * w->desc.transform.out_sample_bytes <=
	    l->labels_offset);
}

/* Receive one message (at most @len bytes) and up to WORKER_MAX_FDS fds. */
static ssize_t
worker_recv(int sock, void *m, size_t len, int *fds, size_t *nfds)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * WORKER_MAX_FDS)];
	} cbuf;
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*cmsg;
	ssize_t		 n;
	size_t		 i, k;

	*nfds = 0;
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = m;
	iov.iov_len = len;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	do {
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	} while (n == -1 && errno == EINTR);
	if (n <= 0)
		return (n);
	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
	    cmsg = CMSG_NXTHDR(&msg, cmsg)) {
		if (cmsg->cmsg_level != SOL_SOCKET ||
		    cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k && *nfds < WORKER_MAX_FDS; i++)
			memcpy(&fds[(*nfds)++], CMSG_DATA(cmsg) +
			    i * sizeof(int), sizeof(int));
	}
	return (n);
}

/* Find a mapped ring. */
static struct wring *
worker_find(struct wring *w, size_t n, uint64_t id)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (w[i].map != NULL && w[i].desc.ring_id == id)
			return (&w[i]);
	}
	return (NULL);
}

/*
 * Open the client's files that came with a ring: the same checks as the
 * daemon made, and the dataset must still be the one it checked (the
 * sizes the ring was laid out for).  NULL when not: its jobs then fail.
 */
static struct dataset *
worker_files(const struct worker_ring *desc, const int *fds, size_t nfds)
{
	const struct transform	*tf = &desc->transform;
	struct dataset		*ds;
	char			*cause = NULL;
	size_t			 i;

	if (nfds != desc->nfiles) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		log_warnx("ring %llu: %zu file descriptors where %u were "
		    "expected", (unsigned long long)desc->ring_id, nfds,
		    desc->nfiles);
		return (NULL);
	}
	ds = dataset_open_files("client files", &desc->files, fds[0],
	    nfds > 1 ? fds[1] : -1, true, NULL, &cause);
	if (ds == NULL) {
		log_warnx("ring %llu: %s", (unsigned long long)desc->ring_id,
		    cause ? cause : "cannot open the client's files");
		free(cause);
		return (NULL);
	}
	if (ds->sample_bytes != tf->in_sample_bytes ||
	    (uint32_t)ds->dtype != tf->in_dtype) {
		log_warnx("ring %llu: the client's files changed since they "
		    "were checked", (unsigned long long)desc->ring_id);
		dataset_free(ds);
		return (NULL);
	}
	return (ds);
}

/*
 * The mapping of memory @id of @bytes from @fd (closed), made the first
 * time only and kept: its pages are mapped once for all the rings the
 * daemon makes on it.
 */
static uint8_t *
worker_mem(struct wmem **mems, size_t *n, uint64_t id, uint64_t bytes, int fd)
{
	struct wmem	*m;
	size_t		 i;

	for (i = 0; i < *n; i++) {
		if ((*mems)[i].map != NULL && (*mems)[i].id == id &&
		    (*mems)[i].bytes == bytes) {
			close(fd);
			return ((*mems)[i].map);
		}
	}
	for (i = 0; i < *n && (*mems)[i].map != NULL; i++)
		;
	if (i == *n)
		*mems = xreallocarray(*mems, ++*n, sizeof(**mems));
	m = &(*mems)[i];
	m->id = id;
	m->bytes = bytes;
	m->map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m->map == MAP_FAILED)
		fatal("worker: mmap of a ring");
	ring_map_advise(m->map, bytes);
	return (m->map);
}

/* FORGET: the daemon freed memory @id; a ring on it is gone already. */
static void
worker_forget(struct wmem *mems, size_t n, uint64_t id)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (mems[i].map != NULL && mems[i].id == id) {
			munmap(mems[i].map, mems[i].bytes);
			mems[i].map = NULL;
		}
	}
}

/* Take a ring the pool sent, in a free entry of *@w. */
static void
worker_map(struct wring **w, size_t *n, struct wmem **mems, size_t *nmems,
    const struct worker_msg *m, const int *fds, size_t nfds)
{
	struct wring	*r;
	size_t		 i;

	for (i = 0; i < *n && (*w)[i].map != NULL; i++)
		;
	if (i == *n) {
		*w = xreallocarray(*w, ++*n, sizeof(**w));
		memset(&(*w)[i], 0, sizeof((*w)[i]));
	}
	r = &(*w)[i];
	r->desc = m->ring;
	if (m->ring.layout.ring_bytes > m->ring.mem_bytes)
		fatalx("worker: a ring of %llu bytes on %llu bytes of memory",
		    (unsigned long long)m->ring.layout.ring_bytes,
		    (unsigned long long)m->ring.mem_bytes);
	r->map = worker_mem(mems, nmems, m->ring.mem_id, m->ring.mem_bytes,
	    fds[0]);
	if (m->ring.nfiles > 0)
		r->files = worker_files(&m->ring, fds + 1, nfds - 1);
	else {
		for (i = 1; i < nfds; i++)
			close(fds[i]);
	}
	if (m->ring.transform.to_float32)	/* arrays converted */
		r->tmp = xmalloc(m->ring.transform.in_sample_bytes);
	if (transform_needs_lut(&m->ring.transform) &&
	    (r->lut = transform_lut_new(&m->ring.transform)) == NULL)
		fatal("worker: lookup table");
}

/* Drop a ring; its memory stays mapped until FORGET. */
static void
worker_unmap(struct wring *w)
{
	dataset_free(w->files);
	free(w->tmp);
	free(w->lut);
	memset(w, 0, sizeof(*w));
}

/* The worker process: serve jobs until the pool goes away. */
void
worker_main(const struct catalogue *cat, int sock, const sigset_t *mask)
{
	struct wring		*rings = NULL, *w;
	struct wmem		*mems = NULL;
	struct transform_work	*tw;
	size_t			 nrings = 0, nmems = 0, len;
	const struct dataset	*ds;
	struct worker_msg	*mp;
	uint64_t		*indices;
	ssize_t			 n;
	size_t			 nfds, i;
	int			 fds[WORKER_MAX_FDS];

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	log_init("infeedd-worker", 0);
	/* The datasets' pages, mapped once here, never faulted per job. */
	(void)dataset_populate((uint64_t)sysconf(_SC_PHYS_PAGES) *
	    (uint64_t)sysconf(_SC_PAGESIZE) / WORKER_POPULATE_SHARE);
	len = sizeof(*mp) + WORKER_MAX_JOB_ROWS * sizeof(uint64_t);
	mp = xcalloc(1, len);
	mp->type = WORKER_MSG_READY;
	if (send(sock, mp, sizeof(*mp), MSG_NOSIGNAL) == -1)
		_exit(0);
	indices = (uint64_t *)(void *)(mp + 1);
	tw = transform_work_new();
	for (;;) {
		n = worker_recv(sock, mp, len, fds, &nfds);
		if (n <= 0)
			_exit(0);
		if ((size_t)n < sizeof(*mp) || (mp->type != WORKER_MSG_JOB &&
		    (size_t)n != sizeof(*mp)) || (mp->type == WORKER_MSG_MAP) !=
		    (nfds > 0)) {
			for (i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		switch (mp->type) {
		case WORKER_MSG_MAP:
			worker_map(&rings, &nrings, &mems, &nmems, mp, fds,
			    nfds);
			break;
		case WORKER_MSG_FORGET:
			worker_forget(mems, nmems, mp->ring.mem_id);
			break;
		case WORKER_MSG_UNMAP:
			if ((w = worker_find(rings, nrings, mp->ring_id)) !=
			    NULL)
				worker_unmap(w);
			break;
		case WORKER_MSG_JOB:
			w = worker_find(rings, nrings, mp->ring_id);
			mp->type = WORKER_MSG_DONE;
			mp->error = WORKER_READ_ERROR;
			mp->bad_index = indices[0];
			mp->reason[0] = '\0';
			ds = NULL;
			if (w != NULL && w->desc.nfiles > 0)
				ds = w->files;
			else if (w != NULL && w->desc.dataset_index <
			    cat->ndatasets)
				ds = cat->datasets[w->desc.dataset_index];
			if (ds != NULL && worker_job_ok(w, mp, (size_t)n))
				mp->error = worker_fill(w, tw, ds, mp, indices);
			if (send(sock, mp, sizeof(*mp), MSG_NOSIGNAL) == -1)
				_exit(0);
			break;
		default:
			break;
		}
	}
}
