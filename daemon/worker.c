/* SPDX-License-Identifier: MIT */
/*
 * A worker process: reads each row's dataset index from the slot, reads the
 * sample through the dataset (whose mappings it inherited at fork),
 * transforms it if the session asked, writes data and label into the slot,
 * and answers DONE.  It keeps one mapping per ring it was sent.
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

/* A ring mapped in this worker. */
struct wring {
	struct worker_ring	 desc;
	uint8_t			*map;
	uint8_t			*tmp;		/* one input sample */
	float			*lut;		/* uint8 -> float, per channel */
};

/* Read rows [begin, end) of one slot; returns -1 with *bad on failure. */
static int
worker_rows(struct wring *w, const struct dataset *ds, uint32_t slot,
    uint64_t begin, uint64_t end, uint64_t *bad)
{
	const struct ring_layout *l = &w->desc.layout;
	const struct transform	*tf = &w->desc.transform;
	uint8_t			*base = w->map + (uint64_t)slot * l->slot_bytes;
	const uint64_t		*indices;
	int32_t			*labels;
	uint8_t			*dst;
	int64_t			 label;
	uint64_t		 r, idx;

	indices = (const uint64_t *)(const void *)(base + l->indices_offset);
	labels = (int32_t *)(void *)(base + l->labels_offset);
	for (r = begin; r < end; r++) {
		idx = indices[r];
		dst = base + l->data_offset + r * tf->out_sample_bytes;
		if (idx >= ds->samples) {
			*bad = idx;
			return (-1);
		}
		if (tf->to_float32) {
			if (dataset_read(ds, idx, w->tmp, &label) == -1) {
				*bad = idx;
				return (-1);
			}
			transform_row(tf, w->lut, w->tmp,
			    (float *)(void *)dst);
		} else if (dataset_read(ds, idx, dst, &label) == -1) {
			*bad = idx;
			return (-1);
		}
		labels[r] = (int32_t)label;
	}
	return (0);
}

/*
 * Fill rows [begin, end) of one slot; -1 with *bad on failure.  The files'
 * sizes are checked once before the rows and once after: if a file shrank
 * meanwhile, the rows are read again, so a row it cut off fails instead of
 * going out as the zeros of a truncated page.
 */
static int
worker_fill(struct wring *w, const struct dataset *ds, uint32_t slot,
    uint64_t begin, uint64_t end, uint64_t *bad)
{
	int	rc;

	dataset_job_begin();
	rc = worker_rows(w, ds, slot, begin, end, bad);
	if (dataset_job_end() && rc == 0) {
		dataset_job_begin();
		rc = worker_rows(w, ds, slot, begin, end, bad);
		(void)dataset_job_end();
	}
	return (rc);
}

/* Receive one message and maybe an fd from the pool. */
static ssize_t
worker_recv(int sock, struct worker_msg *m, int *fd)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int))];
	} cbuf;
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*cmsg;
	ssize_t		 n;

	*fd = -1;
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = m;
	iov.iov_len = sizeof(*m);
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
		if (cmsg->cmsg_level == SOL_SOCKET &&
		    cmsg->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(cmsg), sizeof(int));
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

/* Map a ring the pool sent, in a free entry of *@w. */
static void
worker_map(struct wring **w, size_t *n, const struct worker_msg *m, int fd)
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
	r->map = mmap(NULL, m->ring.layout.ring_bytes, PROT_READ | PROT_WRITE,
	    MAP_SHARED, fd, 0);
	close(fd);
	if (r->map == MAP_FAILED)
		fatal("worker: mmap of a ring");
	r->tmp = xmalloc(m->ring.transform.in_sample_bytes);
	if (transform_needs_lut(&m->ring.transform) &&
	    (r->lut = transform_lut_new(&m->ring.transform)) == NULL)
		fatal("worker: lookup table");
}

/* Drop a ring's mapping. */
static void
worker_unmap(struct wring *w)
{
	munmap(w->map, w->desc.layout.ring_bytes);
	free(w->tmp);
	free(w->lut);
	memset(w, 0, sizeof(*w));
}

/* The worker process: serve jobs until the pool goes away. */
void
worker_main(const struct catalogue *cat, int sock)
{
	struct wring		*rings = NULL, *w;
	size_t			 nrings = 0;
	struct worker_msg	 m;
	ssize_t			 n;
	int			 fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	log_init("infeedd-worker", 0);
	for (;;) {
		n = worker_recv(sock, &m, &fd);
		if (n <= 0)
			_exit(0);
		if ((size_t)n != sizeof(m)) {
			if (fd != -1)
				close(fd);
			continue;
		}
		switch (m.type) {
		case WORKER_MSG_MAP:
			worker_map(&rings, &nrings, &m, fd);
			break;
		case WORKER_MSG_UNMAP:
			if ((w = worker_find(rings, nrings, m.ring_id)) != NULL)
				worker_unmap(w);
			break;
		case WORKER_MSG_JOB:
			w = worker_find(rings, nrings, m.ring_id);
			m.type = WORKER_MSG_DONE;
			m.error = WORKER_READ_ERROR;
			if (w != NULL && w->desc.dataset_index <
			    cat->ndatasets)
				m.error = worker_fill(w,
				    cat->datasets[w->desc.dataset_index],
				    m.slot, m.row_begin, m.row_end,
				    &m.bad_index);
			if (send(sock, &m, sizeof(m), MSG_NOSIGNAL) == -1)
				_exit(0);
			break;
		default:
			break;
		}
	}
}
