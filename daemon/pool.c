/* SPDX-License-Identifier: MIT */
/*
 * The worker pool: processes forked by infeedd at start-up that read
 * samples and write them straight into step slots in shared memory.
 *
 * The main process computes which dataset index goes in each row (the
 * sampler writes them into the slot's index table) and hands out jobs: a
 * range of rows of one slot.  A worker reads each row's index from the
 * slot, reads the sample through the dataset (whose mappings it inherited at
 * fork), converts it if the session asked, writes data and label into the
 * slot, and answers DONE.  So the main process never copies sample bytes
 * and its event loop never waits on disk.
 *
 * Main and workers talk over one SOCK_SEQPACKET socketpair per worker, in
 * fixed-size messages: MAP (with the session's ring memfd, sent the first
 * time a worker gets a job of that session), UNMAP, JOB and DONE.  Each
 * worker has at most one job at a time; a session's num_workers caps how
 * many of its jobs run at once.
 *
 * A worker that dies is replaced and its job re-issued; a job that kills
 * workers is split into single rows, and a row that kills a worker three
 * times is reported to its session as a data error.
 */

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon.h"

#define POOL_MAX_ATTEMPTS	3

enum pool_msg_type {
	POOL_MSG_MAP = 1,
	POOL_MSG_UNMAP,
	POOL_MSG_JOB,
	POOL_MSG_DONE,
};

struct pool_msg {
	uint32_t	type;
	uint32_t	slot;
	uint64_t	session_id;
	uint64_t	row_begin;
	uint64_t	row_end;
	int32_t		error;		/* DONE: 0, or -1 if a row failed */
	uint32_t	pad;
	uint64_t	bad_index;	/* DONE: the dataset index that failed */
	struct ring_desc desc;		/* MAP */
};

struct job {
	TAILQ_ENTRY(job)	 entry;
	uint64_t		 session_id;
	uint32_t		 slot;
	uint64_t		 row_begin;
	uint64_t		 row_end;
	unsigned		 attempts;
};
TAILQ_HEAD(job_list, job);

struct pool_session {
	TAILQ_ENTRY(pool_session) entry;
	struct ring_desc	 desc;
	int			 memfd;
	unsigned		 max_jobs;
	unsigned		 inflight;
	bool			*mapped;	/* per worker */
};
TAILQ_HEAD(pool_session_list, pool_session);

struct worker {
	struct pool	*pool;
	unsigned	 idx;
	pid_t		 pid;
	int		 fd;
	struct event	*ev;
	struct job	*job;
	uint64_t	 rows_done;
	unsigned	 restarts;
	bool		 retiring;	/* reload: replace once idle */
};

struct pool {
	struct daemon		*d;
	struct worker		*workers;
	unsigned		 n;
	struct job_list		 jobs;
	struct pool_session_list sessions;
	struct event		*sigchld_ev;
	bool			 stopping;
};

static void	pool_spawn(struct pool *, struct worker *);
static void	pool_retire(struct worker *);
static void	pool_dispatch(struct pool *);

/* A session mapped in a worker process. */
struct wsession {
	struct ring_desc	 desc;
	uint8_t			*map;
	uint8_t			*tmp;		/* one input sample */
	float			*lut;		/* uint8 -> float, per channel */
};

/* Make the per-channel lookup table for uint8 -> float32. */
static float *
worker_make_lut(const struct ring_desc *rd)
{
	float		*lut;
	unsigned	 c, v, nch = rd->nchannels ? rd->nchannels : 1;
	float		 mean, std;

	if ((lut = malloc(sizeof(float) * 256 * nch)) == NULL)
		return (NULL);
	for (c = 0; c < nch; c++) {
		mean = rd->nchannels ? rd->mean[c] : 0.0f;
		std = rd->nchannels ? rd->std[c] : 1.0f;
		for (v = 0; v < 256; v++)
			lut[c * 256 + v] = ((float)v * rd->scale - mean) / std;
	}
	return (lut);
}

/* Convert one sample into the slot's float32 row. */
static void
worker_convert(const struct wsession *ws, const uint8_t *in, float *out)
{
	const struct ring_desc	*rd = &ws->desc;
	uint64_t		 e, n, c, per;
	const float		*fin = (const float *)(const void *)in;
	const float		*lut;
	float			 mean, std;

	n = rd->out_sample_bytes / sizeof(float);
	per = rd->channel_elems ? rd->channel_elems : n;
	for (e = 0; e < n; e++) {
		c = rd->nchannels > 1 ? e / per : 0;
		if (rd->in_dtype == INFEED_DTYPE_UINT8) {
			lut = ws->lut + c * 256;
			out[e] = lut[in[e]];
		} else {
			mean = rd->nchannels ? rd->mean[c] : 0.0f;
			std = rd->nchannels ? rd->std[c] : 1.0f;
			out[e] = (fin[e] * rd->scale - mean) / std;
		}
	}
}

/* Fill rows [begin, end) of one slot; returns -1 with *bad on failure. */
static int
worker_fill(struct wsession *ws, const struct dataset *ds, uint32_t slot,
    uint64_t begin, uint64_t end, uint64_t *bad)
{
	const struct ring_desc	*rd = &ws->desc;
	uint8_t			*base = ws->map + (uint64_t)slot * rd->slot_bytes;
	const uint64_t		*indices;
	int32_t			*labels;
	uint8_t			*dst;
	int64_t			 label;
	uint64_t		 r, idx;

	indices = (const uint64_t *)(const void *)(base + rd->indices_offset);
	labels = (int32_t *)(void *)(base + rd->labels_offset);
	for (r = begin; r < end; r++) {
		idx = indices[r];
		dst = base + rd->data_offset + r * rd->out_sample_bytes;
		if (idx >= ds->samples) {
			*bad = idx;
			return (-1);
		}
		if (rd->to_float32) {
			if (dataset_read(ds, idx, ws->tmp, &label) == -1) {
				*bad = idx;
				return (-1);
			}
			worker_convert(ws, ws->tmp, (float *)(void *)dst);
		} else if (dataset_read(ds, idx, dst, &label) == -1) {
			*bad = idx;
			return (-1);
		}
		labels[r] = (int32_t)label;
	}
	return (0);
}

/* Receive one message and maybe an fd from the main process. */
static ssize_t
worker_recv(int sock, struct pool_msg *m, int *fd)
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

/* Find a mapped session in the worker. */
static struct wsession *
worker_find(struct wsession *ws, size_t n, uint64_t id)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (ws[i].map != NULL && ws[i].desc.session_id == id)
			return (&ws[i]);
	}
	return (NULL);
}

/* Drop a worker-side session mapping. */
static void
worker_unmap(struct wsession *w)
{
	munmap(w->map, w->desc.ring_bytes);
	free(w->tmp);
	free(w->lut);
	memset(w, 0, sizeof(*w));
}

/* The worker process: serve jobs until the main process goes away. */
static void __attribute__((noreturn))
worker_main(struct daemon *d, int sock)
{
	struct wsession		*ws = NULL, *w;
	size_t			 nws = 0, i;
	struct pool_msg		 m;
	struct dataset		*ds;
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
		case POOL_MSG_MAP:
			for (i = 0; i < nws && ws[i].map != NULL; i++)
				;
			if (i == nws) {
				ws = xreallocarray(ws, ++nws, sizeof(*ws));
				memset(&ws[i], 0, sizeof(ws[i]));
			}
			w = &ws[i];
			w->desc = m.desc;
			w->map = mmap(NULL, m.desc.ring_bytes,
			    PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			close(fd);
			if (w->map == MAP_FAILED)
				fatal("worker: mmap of a ring");
			w->tmp = xmalloc(m.desc.in_sample_bytes);
			if (m.desc.to_float32 && m.desc.in_dtype ==
			    INFEED_DTYPE_UINT8 && (w->lut = worker_make_lut(&m.desc))
			    == NULL)
				fatal("worker: lookup table");
			break;
		case POOL_MSG_UNMAP:
			if ((w = worker_find(ws, nws, m.session_id)) != NULL)
				worker_unmap(w);
			break;
		case POOL_MSG_JOB:
			w = worker_find(ws, nws, m.session_id);
			m.type = POOL_MSG_DONE;
			m.error = 0;
			if (w == NULL)
				m.error = -1;
			else {
				ds = d->cat->datasets[w->desc.dataset_index];
				m.error = worker_fill(w, ds, m.slot,
				    m.row_begin, m.row_end, &m.bad_index);
			}
			if (send(sock, &m, sizeof(m), MSG_NOSIGNAL) == -1)
				_exit(0);
			break;
		default:
			break;
		}
	}
}

/* Send a message (and an fd) to a worker; -1 if it is gone. */
static int
pool_send(struct worker *w, const struct pool_msg *m, int fd)
{
	if (wire_send_some(w->fd, m, sizeof(*m), fd) == -1) {
		log_warn("worker %u (pid %d): send", w->idx, (int)w->pid);
		return (-1);
	}
	return (0);
}

/* Look up the pool's record of a session. */
static struct pool_session *
pool_find(struct pool *pool, uint64_t id)
{
	struct pool_session	*ps;

	TAILQ_FOREACH(ps, &pool->sessions, entry) {
		if (ps->desc.session_id == id)
			return (ps);
	}
	return (NULL);
}

/* In a new worker: close what belongs to the main process. */
static void
pool_child_close(struct pool *pool, struct worker *self)
{
	struct daemon		*d = pool->d;
	struct peer		*p;
	struct pool_session	*ps;
	unsigned		 i;

	if (d->listen_fd != -1)
		close(d->listen_fd);
	TAILQ_FOREACH(p, &d->peers, entry)
		close(p->fd);
	TAILQ_FOREACH(ps, &pool->sessions, entry)
		close(ps->memfd);
	for (i = 0; i < pool->n; i++) {
		if (&pool->workers[i] != self && pool->workers[i].fd != -1)
			close(pool->workers[i].fd);
	}
}

/* Start (or restart) one worker process. */
static void
pool_spawn(struct pool *pool, struct worker *w)
{
	struct pool_session	*ps;
	int			 sv[2];
	pid_t			 pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		fatal("socketpair for a worker");
	switch ((pid = fork())) {
	case -1:
		fatal("fork a worker");
	case 0:
		close(sv[0]);
		w->fd = -1;
		pool_child_close(pool, w);
		worker_main(pool->d, sv[1]);
	default:
		break;
	}
	close(sv[1]);
	w->pid = pid;
	w->fd = sv[0];
	w->job = NULL;
	TAILQ_FOREACH(ps, &pool->sessions, entry)
		ps->mapped[w->idx] = false;
	if (w->ev != NULL)
		event_free(w->ev);
	w->ev = event_new(pool->d->base, w->fd, EV_READ | EV_PERSIST,
	    NULL, NULL);
	log_debug("worker %u started, pid %d", w->idx, (int)pid);
}

/* Let an idle worker go: it exits on EOF and SIGCHLD replaces it. */
static void
pool_retire(struct worker *w)
{
	event_del(w->ev);
	close(w->fd);
	w->fd = -1;
}

/* A worker answered: a job is done. */
static void
pool_worker_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct worker		*w = arg;
	struct pool		*pool = w->pool;
	struct pool_session	*ps;
	struct session		*s;
	struct pool_msg		 m;
	struct job		*job;
	ssize_t			 n;

	(void)ev;
	n = recv(fd, &m, sizeof(m), MSG_DONTWAIT);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n != sizeof(m) || m.type != POOL_MSG_DONE || w->job == NULL) {
		/* It died, or said nonsense: SIGCHLD does the rest. */
		event_del(w->ev);
		if (n > 0)
			kill(w->pid, SIGKILL);
		return;
	}
	job = w->job;
	w->job = NULL;
	w->rows_done += job->row_end - job->row_begin;
	if ((ps = pool_find(pool, job->session_id)) != NULL)
		ps->inflight--;
	if ((s = session_find(pool->d, job->session_id)) != NULL)
		session_job_done(s, job->slot,
		    (uint32_t)(job->row_end - job->row_begin), m.error,
		    m.bad_index);
	free(job);
	if (w->retiring)
		pool_retire(w);
	pool_dispatch(pool);
}

/* Give queued jobs to idle workers, within each session's cap. */
static void
pool_dispatch(struct pool *pool)
{
	struct pool_session	*ps;
	struct pool_msg		 m;
	struct worker		*w;
	struct job		*job, *next;
	unsigned		 i;

	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->job != NULL || w->pid == -1 || w->fd == -1 ||
		    w->retiring)
			continue;
		for (job = TAILQ_FIRST(&pool->jobs); job != NULL; job = next) {
			next = TAILQ_NEXT(job, entry);
			ps = pool_find(pool, job->session_id);
			if (ps == NULL) {
				TAILQ_REMOVE(&pool->jobs, job, entry);
				free(job);
				continue;
			}
			if (ps->inflight < ps->max_jobs)
				break;
		}
		if (job == NULL)
			return;
		memset(&m, 0, sizeof(m));
		if (!ps->mapped[w->idx]) {
			m.type = POOL_MSG_MAP;
			m.desc = ps->desc;
			if (pool_send(w, &m, ps->memfd) == -1)
				continue;
			ps->mapped[w->idx] = true;
		}
		m.type = POOL_MSG_JOB;
		m.session_id = job->session_id;
		m.slot = job->slot;
		m.row_begin = job->row_begin;
		m.row_end = job->row_end;
		if (pool_send(w, &m, -1) == -1)
			continue;
		TAILQ_REMOVE(&pool->jobs, job, entry);
		w->job = job;
		ps->inflight++;
	}
}

/* Requeue the job of a dead worker, split or failed as needed. */
static void
pool_requeue(struct pool *pool, struct job *job)
{
	struct pool_session	*ps;
	struct session		*s;
	struct job		*one;
	uint64_t		 r;

	if ((ps = pool_find(pool, job->session_id)) != NULL)
		ps->inflight--;
	if (ps == NULL) {
		free(job);
		return;
	}
	if (job->row_end - job->row_begin > 1) {
		/* Find the row that kills workers: retry one row at a time. */
		for (r = job->row_end; r > job->row_begin; r--) {
			one = xcalloc(1, sizeof(*one));
			*one = *job;
			one->row_begin = r - 1;
			one->row_end = r;
			one->attempts = 1;
			TAILQ_INSERT_HEAD(&pool->jobs, one, entry);
		}
		free(job);
		return;
	}
	if (++job->attempts < POOL_MAX_ATTEMPTS) {
		TAILQ_INSERT_HEAD(&pool->jobs, job, entry);
		return;
	}
	if ((s = session_find(pool->d, job->session_id)) != NULL)
		session_job_done(s, job->slot, 1, -2, job->row_begin);
	free(job);
}

/* Reap dead workers, restart them and re-issue their work. */
static void
pool_sigchld_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct pool	*pool = arg;
	struct worker	*w;
	pid_t		 pid;
	unsigned	 i;
	int		 status;

	(void)sig;
	(void)ev;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (i = 0; i < pool->n; i++) {
			if (pool->workers[i].pid == pid)
				break;
		}
		if (i == pool->n)
			continue;
		w = &pool->workers[i];
		if (w->retiring && WIFEXITED(status) &&
		    WEXITSTATUS(status) == 0)
			log_debug("worker %u (pid %d) retired", i, (int)pid);
		else if (WIFSIGNALED(status))
			log_warnx("worker %u (pid %d) was killed by signal %d; "
			    "starting a replacement", i, (int)pid,
			    WTERMSIG(status));
		else
			log_warnx("worker %u (pid %d) exited with status %d; "
			    "starting a replacement", i, (int)pid,
			    WEXITSTATUS(status));
		event_del(w->ev);
		if (w->fd != -1)
			close(w->fd);
		w->fd = -1;
		w->pid = -1;
		if (w->job != NULL) {
			pool_requeue(pool, w->job);
			w->job = NULL;
		}
		if (pool->stopping)
			continue;
		if (!w->retiring)
			w->restarts++;
		w->retiring = false;
		pool_spawn(pool, w);
		event_assign(w->ev, pool->d->base, w->fd, EV_READ | EV_PERSIST,
		    pool_worker_cb, w);
		event_add(w->ev, NULL);
	}
	pool_dispatch(pool);
}

/* Start the pool's worker processes. */
struct pool *
pool_new(struct daemon *d, unsigned workers)
{
	struct pool	*pool;
	struct worker	*w;
	unsigned	 i;

	pool = xcalloc(1, sizeof(*pool));
	pool->d = d;
	pool->n = workers;
	pool->workers = xcalloc(workers, sizeof(*pool->workers));
	TAILQ_INIT(&pool->jobs);
	TAILQ_INIT(&pool->sessions);
	for (i = 0; i < workers; i++) {
		pool->workers[i].fd = -1;
		pool->workers[i].pid = -1;
	}
	for (i = 0; i < workers; i++) {
		w = &pool->workers[i];
		w->pool = pool;
		w->idx = i;
		pool_spawn(pool, w);
		event_assign(w->ev, d->base, w->fd, EV_READ | EV_PERSIST,
		    pool_worker_cb, w);
		event_add(w->ev, NULL);
	}
	pool->sigchld_ev = evsignal_new(d->base, SIGCHLD, pool_sigchld_cb,
	    pool);
	if (pool->sigchld_ev == NULL || event_add(pool->sigchld_ev, NULL))
		fatalx("cannot watch SIGCHLD");
	log_info("%u worker processes started", workers);
	return (pool);
}

/* Stop the workers and free the pool; NULL is a no-op. */
void
pool_free(struct pool *pool)
{
	struct pool_session	*ps;
	struct job		*job;
	unsigned		 i;

	if (pool == NULL)
		return;
	pool->stopping = true;
	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].pid != -1)
			kill(pool->workers[i].pid, SIGTERM);
		if (pool->workers[i].fd != -1)
			close(pool->workers[i].fd);
	}
	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].pid != -1)
			waitpid(pool->workers[i].pid, NULL, 0);
		if (pool->workers[i].ev != NULL)
			event_free(pool->workers[i].ev);
		free(pool->workers[i].job);
	}
	while ((job = TAILQ_FIRST(&pool->jobs)) != NULL) {
		TAILQ_REMOVE(&pool->jobs, job, entry);
		free(job);
	}
	while ((ps = TAILQ_FIRST(&pool->sessions)) != NULL) {
		TAILQ_REMOVE(&pool->sessions, ps, entry);
		close(ps->memfd);
		free(ps->mapped);
		free(ps);
	}
	if (pool->sigchld_ev != NULL)
		event_free(pool->sigchld_ev);
	free(pool->workers);
	free(pool);
}

/* Register a session's ring; the pool keeps its own copy of @memfd. */
void
pool_map_session(struct pool *pool, const struct ring_desc *rd, int memfd,
    unsigned max_jobs)
{
	struct pool_session	*ps;

	ps = xcalloc(1, sizeof(*ps));
	ps->desc = *rd;
	if ((ps->memfd = fcntl(memfd, F_DUPFD_CLOEXEC, 0)) == -1)
		fatal("dup of a ring memfd");
	ps->max_jobs = max_jobs == 0 || max_jobs > pool->n ? pool->n : max_jobs;
	ps->mapped = xcalloc(pool->n, sizeof(*ps->mapped));
	TAILQ_INSERT_TAIL(&pool->sessions, ps, entry);
}

/* Forget a session: drop its queued jobs and unmap it in the workers. */
void
pool_unmap_session(struct pool *pool, uint64_t session_id)
{
	struct pool_session	*ps;
	struct pool_msg		 m;
	unsigned		 i;

	if ((ps = pool_find(pool, session_id)) == NULL)
		return;
	pool_drop_jobs(pool, session_id);
	memset(&m, 0, sizeof(m));
	m.type = POOL_MSG_UNMAP;
	m.session_id = session_id;
	for (i = 0; i < pool->n; i++) {
		if (ps->mapped[i] && pool->workers[i].fd != -1)
			(void)pool_send(&pool->workers[i], &m, -1);
	}
	TAILQ_REMOVE(&pool->sessions, ps, entry);
	close(ps->memfd);
	free(ps->mapped);
	free(ps);
}

/* Queue rows [row_begin, row_end) of a slot and start what can start. */
void
pool_submit(struct pool *pool, uint64_t session_id, uint32_t slot,
    uint64_t row_begin, uint64_t row_end)
{
	struct job	*job;

	job = xcalloc(1, sizeof(*job));
	job->session_id = session_id;
	job->slot = slot;
	job->row_begin = row_begin;
	job->row_end = row_end;
	TAILQ_INSERT_TAIL(&pool->jobs, job, entry);
	pool_dispatch(pool);
}

/* No job queued or running, and every worker up. */
bool
pool_idle(const struct pool *pool)
{
	unsigned	i;

	if (!TAILQ_EMPTY(&pool->jobs))
		return (false);
	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].job != NULL ||
		    pool->workers[i].pid == -1)
			return (false);
	}
	return (true);
}

/* How many workers the pool has. */
unsigned
pool_size(const struct pool *pool)
{
	return (pool->n);
}

/* Drop a session's queued jobs (it failed); running ones finish. */
void
pool_drop_jobs(struct pool *pool, uint64_t session_id)
{
	struct job	*job, *next;

	for (job = TAILQ_FIRST(&pool->jobs); job != NULL; job = next) {
		next = TAILQ_NEXT(job, entry);
		if (job->session_id == session_id) {
			TAILQ_REMOVE(&pool->jobs, job, entry);
			free(job);
		}
	}
}

/* Describe every worker for GetStats. */
void
pool_fill_stats(struct pool *pool, Infeed__Stats *st)
{
	Infeed__WorkerStats	*ws;
	struct job		*job;
	unsigned		 i;

	st->has_jobs_queued = 1;
	st->jobs_queued = 0;
	TAILQ_FOREACH(job, &pool->jobs, entry)
		st->jobs_queued++;

	st->workers = xcalloc(pool->n, sizeof(*st->workers));
	st->n_workers = pool->n;
	for (i = 0; i < pool->n; i++) {
		ws = xcalloc(1, sizeof(*ws));
		infeed__worker_stats__init(ws);
		ws->pid = pool->workers[i].pid;
		ws->state = xstrdup(pool->workers[i].pid == -1 ? "restarting" :
		    pool->workers[i].job != NULL ? "busy" : "idle");
		ws->has_rows_done = ws->has_restarts = 1;
		ws->rows_done = pool->workers[i].rows_done;
		ws->restarts = pool->workers[i].restarts;
		st->workers[i] = ws;
	}
}

/* Reload: replace every worker, so new ones inherit the new catalogue. */
void
pool_reload(struct pool *pool)
{
	struct worker	*w;
	unsigned	 i;

	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->pid == -1 || w->fd == -1)
			continue;
		w->retiring = true;
		if (w->job == NULL)
			pool_retire(w);
	}
}

/* A session's dataset moved to another catalogue index. */
void
pool_set_dataset(struct pool *pool, uint64_t session_id,
    uint32_t dataset_index)
{
	struct pool_session	*ps;

	if ((ps = pool_find(pool, session_id)) != NULL)
		ps->desc.dataset_index = dataset_index;
}
