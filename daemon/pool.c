/* SPDX-License-Identifier: MIT */
/*
 * The worker pool, the daemon's side (see pool.h).  Jobs name their ring by
 * id, so a job still running when its ring goes is simply dropped when it
 * comes back.
 */

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "forker.h"
#include "log.h"
#include "pool.h"
#include "transport.h"
#include "worker.h"
#include "xmalloc.h"

#define POOL_MAX_ATTEMPTS	3	/* deaths or deadlines before blaming a row */
#define POOL_MAX_KILLS		10	/* kills from outside, unexplained */
#define POOL_RESPAWN_MS		1000	/* retry a failed fork after this */
#define POOL_BACKOFF_MIN_MS	10	/* a dead worker's first respawn waits */
#define POOL_BACKOFF_MAX_MS	1000	/* ... doubling to this, till a job is done */
#define POOL_RETRY_MS		100	/* a job that could not be sent, again */
#define POOL_MAX_QUEUED		1024	/* messages a worker may leave unread */
#define POOL_START_MS		30000	/* the first workers, at most */
#define POOL_FORKER_HEALTHY_MS	10000	/* up so long: restarted at once */
#define POOL_FORKER_ANSWER_MS	500	/* a worker waits: is it stopped? */

struct job {
	TAILQ_ENTRY(job)	 entry;
	uint64_t		 ring_id;
	uint32_t		 slot;
	uint64_t		 epoch;
	uint64_t		 seq;		/* its step's, in the ring's order */
	uint64_t		 queued;	/* pool->events when it was */
	uint64_t		 row_begin;
	uint64_t		 row_end;
	unsigned		 attempts;	/* deaths that blame it */
	unsigned		 kills;		/* kills from outside, unexplained */
	enum pool_job_result	 why;		/* the last: CRASHED or STUCK */
	int			 signal;	/* the last death's signal, or 0 */
	int			 status;	/* ... its exit status (signal 0) */
	uint64_t		*indices;	/* row_end - row_begin of them */
	/*
	 * A takeover: the same job runs on two workers, each copy the
	 * other's twin, until the first DONE; a job is taken over once.
	 */
	struct job		*twin;
	bool			 taken;
	/*
	 * The copy that lost, on a worker being killed: the winner's DONE,
	 * reported once this copy's worker is quiet (its DONE or its end).
	 */
	struct worker_msg_done	*won;
};
TAILQ_HEAD(job_list, job);

struct pool_ring {
	TAILQ_ENTRY(pool_ring)	 entry;
	struct pool		*pool;
	struct worker_ring	 desc;
	int			 memfd;
	int			 files[2];	/* desc.nfiles of them */
	unsigned		 max_jobs;
	unsigned		 inflight;
	bool			 removed;	/* draining: nothing is reported */
	struct ring		*ring;		/* removed: to release when done */
	bool			 keep;		/* ... keeping its memory */
	uint64_t		 delivered;	/* steps the client has had */
	uint64_t		 delivered_at;	/* pool->events when it changed */
	bool			*mapped;	/* per worker */
	pool_done_cb		*done;
	void			*arg;
};
TAILQ_HEAD(pool_ring_list, pool_ring);

struct worker {
	struct pool	*pool;
	unsigned	 idx;
	pid_t		 pid;
	struct transport *t;		/* its socket; NULL while none */
	struct event	*deadline_ev;	/* the running job's */
	struct event	*respawn_ev;	/* its restart, after a backoff */
	struct worker_beat *beat;	/* its progress, shared with it */
	uint64_t	*mems;		/* ring memory it maps, by id */
	unsigned	 nmems;
	struct job	*job;
	uint64_t	 rows_done;
	uint64_t	 job_start_us;	/* of the running job */
	uint64_t	 beat_rows;	/* its beat's count, last seen */
	uint64_t	 beat_ms;	/* ... changing, or the job's start */
	uint64_t	 job_id;	/* the running job's, in its beat */
	clockid_t	 cpu_clock;	/* its CPU time: a heartbeat */
	pid_t		 cpu_pid;	/* ... of this process; -1: none */
	uint64_t	 cpu_ns;	/* ... last seen */
	uint64_t	 live_ms;	/* a row begun or CPU used, last seen */
	uint64_t	 busy_us;	/* in jobs done */
	unsigned	 restarts;
	unsigned	 stuck_kills;
	unsigned	 taken_over;	/* jobs another worker took from it */
	unsigned	 backoff_ms;	/* its next respawn's wait; 0: healthy */
	bool		 stuck;		/* killed for its deadline or socket */
	bool		 ready;		/* said READY: it may take jobs */
	bool		 retiring;	/* reload: replace once idle */
	bool		 parking;	/* pool_shrink(): goes once idle, for good */
	bool		 spawning;	/* asked of the fork server */
	bool		 adopted;	/* its fork server died: ours */
	bool		 closed;	/* its socket: its end is awaited */
};

struct pool {
	struct event_base	*base;
	const struct catalogue	*cat;
	struct ring_budget	*budget;	/* what it keeps; or NULL */
	struct forker		*forker;	/* NULL: none up */
	struct event		*forker_restart_ev;
	struct event		*forker_check_ev; /* is it stopped? */
	struct event		*chld_ev;	/* SIGCHLD: adopted workers, */
	pid_t			*forkers_gone;	/* ... dead fork servers */
	size_t			 nforkers_gone;
	int			 exe_fd;	/* infeedd's; -1: no restart */
	int			 beats_fd;	/* for a new fork server */
	unsigned		 forker_restarts;
	unsigned		 forker_backoff_ms;
	uint64_t		 forker_started_ms;
	bool			 starting;	/* pool_new(): failures are fatal */
	struct worker		*workers;
	unsigned		 n;		/* slots: the most it may grow to */
	unsigned		 size;		/* slots [0, size) in use */
	struct job_list		 jobs;
	struct pool_ring_list	 rings;
	uint64_t		 next_ring_id;
	uint64_t		 next_job_id;
	uint64_t		 oom_kills;	/* the kernel's count, last read */
	uint32_t		 job_timeout_ms;	/* per row */
	uint64_t		 image_memory_max;
	struct worker_beat	*beats;		/* shared, one per worker */
	struct event		*retry_ev;	/* pool_dispatch() again */
	struct worker_msg_job	*jobmsg;	/* a JOB and its indices */
	struct worker_msg_done	*donemsg;	/* a DONE read */
	bool			 stopping;
	uint64_t		 rows_reissued;	/* after worker deaths */
	uint64_t		 events;	/* jobs queued and steps delivered */
};

static void	pool_dispatch(struct pool *);
static void	pool_ring_free(struct pool_ring *);
static void	pool_ring_finish(struct pool_ring *);
static void	job_free(struct job *);
static struct job *job_part(const struct job *, uint64_t, uint64_t);
static void	pool_job_end(struct pool *, struct job *,
		    const struct worker_msg_done *);
static void	pool_fence(struct pool *, struct job *,
		    const struct worker_msg_done *);
static void	pool_worker_read_cb(void *);
static void	pool_worker_broken_cb(void *, int);
static void	pool_deadline_cb(evutil_socket_t, short, void *);
static void	pool_worker_respawn_cb(evutil_socket_t, short, void *);
static void	pool_respawn(struct pool *, struct worker *);
static void	pool_worker_maps(struct worker *, uint64_t);
static void	pool_respawn_failed(struct worker *);
static void	pool_forker_cb(void *);
static void	pool_forker_later(struct pool *);
static void	pool_forker_check_later(struct pool *);

static const struct transport_events pool_forker_events = {
	.read = pool_forker_cb,
};

static const struct transport_events pool_transport_events = {
	.read = pool_worker_read_cb,
	.broken = pool_worker_broken_cb,
};

/* A job, its indices and all; NULL is a no-op. */
static void
job_free(struct job *job)
{
	if (job == NULL)
		return;
	if (job->twin != NULL)
		job->twin->twin = NULL;
	free(job->won);
	free(job->indices);
	free(job);
}

/* Kill a worker that stopped doing its job; its end replaces it. */
static void
pool_kill_stuck(struct worker *w, const char *why)
{
	if (w->stuck || w->pid == -1)
		return;
	log_warnx("worker %u (pid %d) %s; killing it, starting a "
	    "replacement and re-issuing its job", w->idx, (int)w->pid, why);
	w->stuck = true;
	w->stuck_kills++;
	event_del(w->deadline_ev);
	kill(w->pid, SIGKILL);
}

/*
 * Send a message (and @nfds fds, which stay the caller's) to a worker
 * without ever blocking: what its socket does not take waits in its
 * transport, in order.  A worker that leaves POOL_MAX_QUEUED messages
 * unread is stuck, and killed.  -1 when the message cannot go (the worker
 * is gone or stuck, or no descriptor is left to queue it with).
 */
static int
pool_send(struct worker *w, void *m, size_t len, uint32_t type,
    const int *fds, size_t nfds)
{
	if (w->stuck || w->t == NULL)
		return (-1);
	if (transport_queued(w->t) >= POOL_MAX_QUEUED) {
		pool_kill_stuck(w, "leaves its socket unread");
		return (-1);
	}
	/* The ring's descriptors may be closed before a queued MAP goes. */
	if (transport_send_typed(w->t, m, len, type, fds, nfds) == -1) {
		if (errno != EPIPE)	/* pool_worker_broken_cb says why */
			log_warn("worker %u (pid %d): send", w->idx,
			    (int)w->pid);
		return (-1);
	}
	return (0);
}

/*
 * A message did not go, nor will any after it: a worker that closed its
 * end is gone (the fork server reports its exit, and it is replaced); one
 * that is still there but cannot be sent to is killed, so that its
 * replacement gets what it missed.
 */
static void
pool_worker_broken_cb(void *arg, int error)
{
	struct worker	*w = arg;
	char		 why[128];

	if (error == EPIPE || error == ECONNRESET) {
		log_warnx("worker %u (pid %d): send: %s", w->idx, (int)w->pid,
		    strerror(error));
		return;
	}
	snprintf(why, sizeof(why), "cannot be sent to (%s)", strerror(error));
	pool_kill_stuck(w, why);
}

/* The pool's record of a ring. */
static struct pool_ring *
pool_find(struct pool *pool, uint64_t id)
{
	struct pool_ring	*pr;

	TAILQ_FOREACH(pr, &pool->rings, entry) {
		if (pr->desc.ring_id == id)
			return (pr);
	}
	return (NULL);
}

/*
 * Start (or restart) one worker: ask the fork server, whose SPAWNED
 * brings its socket (pool_spawned()).  While none is up, or when the one
 * up has just died, the next one is asked (pool_forker_restart()).
 * Returns -1 (logged) when the request could not be sent otherwise.
 */
static int
pool_spawn(struct pool *pool, struct worker *w)
{
	w->spawning = true;
	if (pool->forker == NULL)
		return (0);
	if (forker_spawn(pool->forker, w->idx, pool->image_memory_max) ==
	    -1 && errno != EPIPE && errno != ECONNRESET) {
		log_warn("worker %u: asking the fork server", w->idx);
		w->spawning = false;
		return (-1);
	}
	pool_forker_check_later(pool);
	return (0);
}

/* The fork server forked worker @w as @pid: watch its socket @fd. */
static void
pool_spawned(struct pool *pool, struct worker *w, pid_t pid, int fd)
{
	struct pool_ring	*pr;
	struct transport_conf	 tc = {
		.kind = TRANSPORT_PACKET,
		.events = &pool_transport_events,
		.arg = w,
	};

	/* The main process never blocks on a worker. */
	w->t = transport_new(pool->base, fd, &tc);
	transport_read_on(w->t, NULL);
	w->spawning = false;
	w->adopted = false;
	w->closed = false;
	w->pid = pid;
	w->job = NULL;
	w->stuck = false;
	w->ready = false;
	w->nmems = 0;		/* a new process maps nothing */
	TAILQ_FOREACH(pr, &pool->rings, entry)
		pr->mapped[w->idx] = false;
	if (w->deadline_ev == NULL)
		w->deadline_ev = evtimer_new(pool->base, pool_deadline_cb, w);
	if (w->deadline_ev == NULL || w->respawn_ev == NULL)
		fatalx("cannot watch worker %u", w->idx);
	log_debug("worker %u started, pid %d", w->idx, (int)pid);
}

/* Wake the deadline check in @ms. */
static void
pool_deadline_in(struct worker *w, uint64_t ms)
{
	struct timeval	tv;

	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(w->deadline_ev, &tv);
}

/*
 * How often a busy worker's beat is looked at: a quarter of job_timeout,
 * and of POOL_TAKEOVER_MS.
 */
static uint64_t
pool_beat_every(const struct pool *pool)
{
	uint64_t	ms = pool->job_timeout_ms / 4;

	if (ms > POOL_TAKEOVER_MS / 4)
		ms = POOL_TAKEOVER_MS / 4;
	return (ms > 25 ? ms : 25);
}

/*
 * Process @pid's state letter in /proc/PID/stat (R running or runnable, S
 * sleeping, D in an uninterruptible wait, T stopped, ...), a read that
 * never blocks on disk; '?' when it cannot be read.
 */
static char
pool_proc_state(pid_t pid)
{
	char	 path[64], buf[512], *p;
	ssize_t	 n;
	int	 fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return ('?');
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return ('?');
	buf[n] = '\0';
	return ((p = strrchr(buf, ')')) != NULL && p[1] == ' ' && p[2] != '\0' ?
	    p[2] : '?');
}

/* Whether process @pid is stopped (SIGSTOP, or under a debugger). */
static bool
pool_stopped(pid_t pid)
{
	char	st = pool_proc_state(pid);

	return (st == 'T' || st == 't');
}

/* Worker @w's CPU time in ns, or 0 when it cannot be read. */
static uint64_t
pool_worker_cpu_ns(struct worker *w)
{
	struct timespec	ts;

	if (w->pid == -1)
		return (0);
	if (w->cpu_pid != w->pid) {
		w->cpu_pid = -1;
		if (clock_getcpuclockid(w->pid, &w->cpu_clock) != 0)
			return (0);
		w->cpu_pid = w->pid;
	}
	if (clock_gettime(w->cpu_clock, &ts) == -1)
		return (0);
	return ((uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec);
}

/*
 * Look at a busy worker's progress at @now: a row begun (its beat's
 * count: job_timeout's clock) or CPU time used since the last look (its
 * heartbeat: a worker that is stopped, or waits in the kernel for its
 * storage, uses none) keeps it live, and so does being runnable: on a
 * loaded machine a worker may wait a second for a CPU, and a copy of its
 * job would only wait beside it.
 */
static void
pool_worker_look(struct worker *w, uint64_t now)
{
	uint64_t	rows, cpu;

	rows = __atomic_load_n(&w->beat->rows, __ATOMIC_RELAXED);
	if (rows != w->beat_rows) {
		w->beat_rows = rows;
		w->beat_ms = now;
		w->live_ms = now;
	}
	cpu = pool_worker_cpu_ns(w);
	if (cpu != w->cpu_ns) {
		w->cpu_ns = cpu;
		w->live_ms = now;
	}
	if (w->pid != -1 && pool_proc_state(w->pid) == 'R')
		w->live_ms = now;
}

/*
 * Whether worker @w's job may be taken over at @now: it did nothing for
 * POOL_TAKEOVER_MS (looked at again if it seems so), the job was not
 * taken over before, and job_timeout would not kill the worker first.
 */
static bool
pool_takeover_due(struct worker *w, uint64_t now)
{
	if (w->job == NULL || w->job->taken || w->stuck || w->t == NULL ||
	    w->pool->job_timeout_ms <= POOL_TAKEOVER_MS ||
	    now < w->live_ms + POOL_TAKEOVER_MS)
		return (false);
	pool_worker_look(w, now);
	return (now >= w->live_ms + POOL_TAKEOVER_MS);
}

/*
 * A worker's deadline check: job_timeout is per row, so a job of many
 * slow rows is not stuck while its rows keep coming.  The worker counts
 * the rows it begins in its beat (a store, no clock, per row); looked at
 * every quarter of job_timeout (POOL_TAKEOVER_MS at most), the job is
 * stuck when the count has not moved for job_timeout (found within a
 * quarter more).  Before that, a worker that did nothing for
 * POOL_TAKEOVER_MS has its job taken over by an idle one, if any
 * (pool_dispatch()).
 */
static void
pool_deadline_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct worker	*w = arg;
	uint64_t	 now, left;
	char		 why[128];

	(void)fd;
	(void)ev;
	if (w->retiring && w->job == NULL) {
		snprintf(why, sizeof(why), "did not exit within %d ms of "
		    "being retired", POOL_STOP_MS);
		pool_kill_stuck(w, why);
		return;
	}
	now = clock_now_ms();
	pool_worker_look(w, now);
	if (w->job != NULL && now < w->beat_ms + w->pool->job_timeout_ms) {
		left = w->beat_ms + w->pool->job_timeout_ms - now;
		pool_deadline_in(w, left < pool_beat_every(w->pool) ? left :
		    pool_beat_every(w->pool));
		if (pool_takeover_due(w, now))
			pool_dispatch(w->pool);
		return;
	}
	snprintf(why, sizeof(why), "read no row of its job for %u ms "
	    "(job_timeout, per row)", w->pool->job_timeout_ms);
	pool_kill_stuck(w, why);
}

/* Let an idle worker go: it exits on EOF and its end replaces it. */
static void
pool_retire(struct worker *w)
{
	struct timeval	tv = { POOL_STOP_MS / 1000,
			    (POOL_STOP_MS % 1000) * 1000 };

	transport_free(w->t);
	w->t = NULL;
	/* One that does not go (stopped, stuck) is killed, then replaced. */
	evtimer_add(w->deadline_ev, &tv);
}

/* Report a finished job to its ring's owner. */
static void
pool_report(struct pool_ring *pr, const struct job *job, uint64_t rows,
    enum pool_job_result result, uint64_t bad, int64_t label,
    const struct worker_msg_done *done)
{
	struct pool_report	r;

	memset(&r, 0, sizeof(r));
	r.reason = "";
	r.where = "";
	if (done != NULL) {
		r.reason = done->text;
		r.where = worker_done_where(done);
		r.replaced = done->replaced;
		r.bytes = done->bytes;
	}
	r.slot = job->slot;
	r.rows = rows;
	r.result = result;
	r.bad = bad;
	r.signal = job->signal;
	r.status = job->status;
	r.deaths = job->attempts;
	r.label = label;
	pr->done(pr->arg, &r);
}

/* What a worker's DONE says about its job. */
static enum pool_job_result
pool_done_result(const struct worker_msg_done *m)
{
	switch (m->error) {
	case WORKER_OK:
		return (POOL_JOB_DONE);
	case WORKER_LABEL_RANGE:
		return (POOL_JOB_LABEL_RANGE);
	case WORKER_INTERNAL:
		return (POOL_JOB_INTERNAL);
	default:
		return (POOL_JOB_READ_ERROR);
	}
}

/*
 * A running job ended on its worker: reported with @done (a DONE; NULL:
 * not reported), unless its ring was removed, which is released when its
 * last job ends; then freed.
 */
static void
pool_job_end(struct pool *pool, struct job *job,
    const struct worker_msg_done *done)
{
	struct pool_ring	*pr;

	if ((pr = pool_find(pool, job->ring_id)) != NULL) {
		pr->inflight--;
		if (!pr->removed && done != NULL)
			pool_report(pr, job, job->row_end - job->row_begin,
			    pool_done_result(done), done->bad_index,
			    done->bad_label, done);
		else if (pr->removed && pr->inflight == 0)
			pool_ring_finish(pr);
	}
	job_free(job);
}

/* The worker running @job, or NULL. */
static struct worker *
pool_job_worker(struct pool *pool, const struct job *job)
{
	unsigned	i;

	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].job == job)
			return (&pool->workers[i]);
	}
	return (NULL);
}

/*
 * The twin of @loser reported first (@won): @loser's worker may still
 * write the slot, so it is killed, and the result is reported only when
 * that worker is quiet: its DONE (sent after its last row) or its end,
 * which the fork server reports once it has reaped it.  A killed process
 * writes nothing more, and a reaped one has no mapping left: no row of
 * it can land in the slot once a client may see it.  Meanwhile the job
 * counts as running, so its ring's memory is not released either.
 */
static void
pool_fence(struct pool *pool, struct job *loser,
    const struct worker_msg_done *won)
{
	struct worker	*w = pool_job_worker(pool, loser);

	loser->twin->twin = NULL;
	loser->twin = NULL;
	loser->won = xmalloc(won->hdr.len);
	memcpy(loser->won, won, won->hdr.len);
	if (w == NULL || w->stuck)	/* being killed already */
		return;
	log_info("worker %u (pid %d) lost its job to the copy that finished "
	    "first; killing it before the rows go out", w->idx, (int)w->pid);
	w->stuck = true;
	event_del(w->deadline_ev);
	kill(w->pid, SIGKILL);
}

/*
 * Read a worker's answer: its job is done.  Return: 1 when it was, 0 when
 * there was nothing to read, -1 when the worker died or said nonsense
 * (killed; its end, which the fork server reports, does the rest).
 */
static int
pool_worker_read(struct worker *w)
{
	struct pool		*pool = w->pool;
	struct worker_msg_done	*m = pool->donemsg;
	struct job		*job;
	ssize_t			 n;
	size_t			 nfds;

	/* A worker sends no descriptor, nor more than one message's bytes. */
	n = transport_recv_typed(w->t, m, WORKER_MAX_DONE, NULL, 0, &nfds);
	if (n == -1 && errno == EAGAIN)
		return (0);
	if (n == sizeof(struct worker_msg_ready) &&
	    m->hdr.type == WORKER_MSG_READY && !w->ready) {
		w->ready = true;
		return (1);
	}
	if (n <= 0 || m->hdr.type != WORKER_MSG_DONE ||
	    !worker_done_whole(m, (size_t)n) || w->job == NULL) {
		transport_read_off(w->t);
		if (n > 0 || (n == -1 && (errno == EPROTO ||
		    errno == EMSGSIZE || errno == EBADMSG)))
			kill(w->pid, SIGKILL);
		return (-1);
	}
	job = w->job;
	w->job = NULL;
	event_del(w->deadline_ev);
	w->rows_done += job->row_end - job->row_begin;
	w->busy_us += clock_now_us() - w->job_start_us;
	w->backoff_ms = 0;	/* it works: a later death respawns at once */
	if (job->won != NULL) {
		/* It lost, and wrote its last row: the winner's result goes. */
		pool_job_end(pool, job, job->won);
	} else if (job->twin != NULL) {
		/* The first result: it goes once the other copy is fenced. */
		pool_fence(pool, job->twin, m);
		pool_job_end(pool, job, NULL);
	} else
		pool_job_end(pool, job, m);
	if (w->retiring)
		pool_retire(w);
	return (1);
}

/* A worker answered: a job is done; give out the next. */
static void
pool_worker_read_cb(void *arg)
{
	struct worker	*w = arg;
	int		 rc;

	if ((rc = pool_worker_read(w)) == 1)
		pool_dispatch(w->pool);
	else if (rc == -1) {
		/* Its end comes from its fork server: is that one stopped? */
		w->closed = true;
		pool_forker_check_later(w->pool);
	}
}

/* Start the running job's clock: its first row is due in job_timeout. */
static void
pool_arm_deadline(struct worker *w)
{
	pool_deadline_in(w, pool_beat_every(w->pool));
	w->job_start_us = clock_now_us();
	w->beat_ms = clock_now_ms();
	w->live_ms = w->beat_ms;
	w->beat_rows = __atomic_load_n(&w->beat->rows, __ATOMIC_RELAXED);
}

/* How many steps @pr's client takes before @job's. */
static uint64_t
pool_job_depth(const struct pool_ring *pr, const struct job *job)
{
	return (job->seq > pr->delivered ? job->seq - pr->delivered : 0);
}

/*
 * The queued job that may start (its ring under its cap) of the least
 * depth (steps its client takes before its own), and among those the one
 * that has been at that depth longest (a next step since its client took
 * the one before, or since it was queued); or NULL.  So every client's
 * next step comes first, in the order they became next: a session's
 * first step goes before another's second.
 */
static struct job *
pool_next_job(struct pool *pool, struct pool_ring **prp)
{
	struct pool_ring	*pr;
	struct job		*job, *next, *best = NULL;
	uint64_t		 depth, since, best_depth = 0, best_since = 0;

	for (job = TAILQ_FIRST(&pool->jobs); job != NULL; job = next) {
		next = TAILQ_NEXT(job, entry);
		if ((pr = pool_find(pool, job->ring_id)) == NULL) {
			TAILQ_REMOVE(&pool->jobs, job, entry);
			job_free(job);
			continue;
		}
		if (pr->inflight >= pr->max_jobs)
			continue;
		depth = pool_job_depth(pr, job);
		since = depth == 0 && pr->delivered_at > job->queued ?
		    pr->delivered_at : job->queued;
		if (best == NULL || depth < best_depth || (depth ==
		    best_depth && since < best_since)) {
			best = job;
			best_depth = depth;
			best_since = since;
			*prp = pr;
		}
	}
	return (best);
}

/*
 * A message to an idle worker that is still there did not go (no
 * descriptor for a queued copy, say): nothing else may wake the queue, so
 * try again in POOL_RETRY_MS.
 */
static void
pool_retry_later(struct pool *pool, struct worker *w)
{
	struct timeval	tv = { 0, POOL_RETRY_MS * 1000 };

	if (w->pid != -1 && w->t != NULL && !w->stuck &&
	    !evtimer_pending(pool->retry_ev, NULL))
		evtimer_add(pool->retry_ev, &tv);
}

/* Try again what could not be sent. */
static void
pool_retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	pool_dispatch(arg);
}

/*
 * Name a ring's catalogue dataset for the workers, with its samples and
 * their size: a worker checks that its dataset of that name is the same
 * (the fork server opens the catalogue itself at a reload).
 */
static void
pool_ring_describe(const struct pool *pool, struct pool_ring *pr)
{
	const struct dataset	*ds;

	if (pr->desc.nfiles > 0 || pr->desc.dataset_index >=
	    pool->cat->ndatasets ||
	    (ds = pool->cat->datasets[pr->desc.dataset_index]) == NULL)
		return;
	snprintf(pr->desc.dataset, sizeof(pr->desc.dataset), "%s", ds->name);
	pr->desc.samples = ds->samples;
	pr->desc.sample_bytes = ds->sample_bytes;
}

/*
 * Send @job of ring @pr to idle worker @w (its ring first, if @w does not
 * have it) and start its clock.  Return: 0, or -1 when it could not go.
 */
static int
pool_start_job(struct pool *pool, struct worker *w, struct pool_ring *pr,
    struct job *job)
{
	struct worker_msg_map	 m;
	struct worker_msg_job	*jm = pool->jobmsg;
	uint64_t		 rows;
	unsigned		 j;
	int			 fds[WORKER_MAX_FDS];

	if (!pr->mapped[w->idx]) {
		memset(&m, 0, sizeof(m));
		pool_ring_describe(pool, pr);
		m.ring = pr->desc;
		fds[0] = pr->memfd;
		for (j = 0; j < pr->desc.nfiles; j++)
			fds[1 + j] = pr->files[j];
		if (pool_send(w, &m, sizeof(m), WORKER_MSG_MAP, fds,
		    1 + pr->desc.nfiles) == -1)
			return (-1);
		pr->mapped[w->idx] = true;
		pool_worker_maps(w, pr->desc.mem_id);
	}
	rows = job->row_end - job->row_begin;
	memset(jm, 0, sizeof(*jm));
	jm->ring_id = job->ring_id;
	jm->slot = job->slot;
	jm->epoch = job->epoch;
	jm->row_begin = job->row_begin;
	jm->row_end = job->row_end;
	jm->job_id = w->job_id = ++pool->next_job_id;
	memcpy(jm->indices, job->indices, rows * sizeof(uint64_t));
	if (pool_send(w, jm, sizeof(*jm) + rows * sizeof(uint64_t),
	    WORKER_MSG_JOB, NULL, 0) == -1)
		return (-1);
	w->job = job;
	pr->inflight++;
	pool_arm_deadline(w);
	return (0);
}

/*
 * The running job of the least depth that may be taken over now
 * (pool_takeover_due()), on a ring that is not removed; or NULL.
 */
static struct worker *
pool_stalled(struct pool *pool, struct pool_ring **prp)
{
	struct pool_ring	*pr;
	struct worker		*w, *best = NULL;
	uint64_t		 now = clock_now_ms(), depth, best_depth = 0;
	unsigned		 i;

	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (!pool_takeover_due(w, now) ||
		    (pr = pool_find(pool, w->job->ring_id)) == NULL ||
		    pr->removed)
			continue;
		depth = pool_job_depth(pr, w->job);
		if (best == NULL || depth < best_depth) {
			best = w;
			best_depth = depth;
			*prp = pr;
		}
	}
	return (best);
}

/*
 * Idle worker @w takes over the job of @from, which did nothing for
 * POOL_TAKEOVER_MS: a copy runs on @w, and the first DONE of the two is
 * the job's (pool_fence()).  Return: 0, or -1 when it could not go.
 */
static int
pool_takeover(struct pool *pool, struct worker *w, struct pool_ring *pr,
    struct worker *from)
{
	struct job	*job = from->job, *copy;

	copy = job_part(job, job->row_begin, job->row_end);
	copy->attempts = job->attempts;
	copy->kills = job->kills;
	if (pool_start_job(pool, w, pr, copy) == -1) {
		job_free(copy);
		return (-1);
	}
	copy->taken = job->taken = true;
	copy->twin = job;
	job->twin = copy;
	from->taken_over++;
	log_warnx("worker %u (pid %d) began no row and used no CPU for %d ms "
	    "(stopped, or waiting on its storage); worker %u takes its job "
	    "over, and the first to finish it gives the rows", from->idx,
	    (int)from->pid, POOL_TAKEOVER_MS, w->idx);
	return (0);
}

/*
 * Give queued jobs to idle workers, within each ring's cap; an idle
 * worker takes over a stalled job first when no queued job is as near
 * its client.
 */
static void
pool_dispatch(struct pool *pool)
{
	struct pool_ring	*pr = NULL, *spr = NULL;
	struct worker		*w, *from;
	struct job		*job;
	unsigned		 i;

	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->job != NULL || w->pid == -1 || w->t == NULL ||
		    !w->ready || w->retiring || w->stuck)
			continue;
		job = pool_next_job(pool, &pr);
		from = pool_stalled(pool, &spr);
		if (from != NULL && (job == NULL || pool_job_depth(spr,
		    from->job) <= pool_job_depth(pr, job))) {
			if (pool_takeover(pool, w, spr, from) == -1)
				pool_retry_later(pool, w);
			continue;
		}
		if (job == NULL)
			return;
		if (pool_start_job(pool, w, pr, job) == -1) {
			pool_retry_later(pool, w);
			continue;
		}
		TAILQ_REMOVE(&pool->jobs, job, entry);
	}
}

/* A job of rows [@begin, @end) of @job, with their indices. */
static struct job *
job_part(const struct job *job, uint64_t begin, uint64_t end)
{
	struct job	*part;

	part = xcalloc(1, sizeof(*part));
	*part = *job;
	part->row_begin = begin;
	part->row_end = end;
	part->attempts = 0;
	part->kills = 0;
	part->twin = NULL;
	part->taken = false;
	part->won = NULL;
	part->indices = xreallocarray(NULL, end - begin, sizeof(uint64_t));
	memcpy(part->indices, job->indices + (begin - job->row_begin),
	    (end - begin) * sizeof(uint64_t));
	return (part);
}

/*
 * Requeue the job of a dead worker.  @why is CRASHED (with @sig, or exit
 * @status) or STUCK; @counts says whether the death counts against the
 * row in full (POOL_MAX_ATTEMPTS) or is a kill from outside that nothing
 * explains (POOL_MAX_KILLS).  The row the worker was reading, @row (from
 * its beat; UINT64_MAX when unknown), is carved out and retried alone, the
 * rows around it go back as they were; with no row known, the job is
 * split into single rows.  A row out of tries is reported.
 */
static void
pool_requeue(struct pool *pool, struct job *job, enum pool_job_result why,
    int sig, int status, bool counts, uint64_t row)
{
	struct pool_ring	*pr;
	struct job		*one, *before = NULL, *after = NULL;
	uint64_t		 r;
	bool			 retry;

	if ((pr = pool_find(pool, job->ring_id)) == NULL) {
		job_free(job);
		return;
	}
	pr->inflight--;
	if (pr->removed) {
		job_free(job);
		if (pr->inflight == 0)
			pool_ring_finish(pr);
		return;
	}
	pool->rows_reissued += job->row_end - job->row_begin;
	job->why = why;
	job->signal = sig;
	job->status = status;
	if (job->row_end - job->row_begin > 1 && (row < job->row_begin ||
	    row >= job->row_end)) {
		/* Find the row that kills workers: retry one row at a time. */
		for (r = job->row_end; r > job->row_begin; r--) {
			one = job_part(job, r - 1, r);
			one->attempts = counts;
			one->kills = !counts;
			TAILQ_INSERT_HEAD(&pool->jobs, one, entry);
		}
		job_free(job);
		return;
	}
	if (job->row_end - job->row_begin > 1) {
		/* Queued in order: the rows before it, it, those after. */
		before = row > job->row_begin ? job_part(job, job->row_begin,
		    row) : NULL;
		after = row + 1 < job->row_end ? job_part(job, row + 1,
		    job->row_end) : NULL;
		one = job_part(job, row, row + 1);
		job_free(job);
		job = one;
	}
	retry = counts ? ++job->attempts < POOL_MAX_ATTEMPTS :
	    ++job->kills < POOL_MAX_KILLS;
	if (after != NULL)
		TAILQ_INSERT_HEAD(&pool->jobs, after, entry);
	if (retry)
		TAILQ_INSERT_HEAD(&pool->jobs, job, entry);
	if (before != NULL)
		TAILQ_INSERT_HEAD(&pool->jobs, before, entry);
	if (retry)
		return;
	/* Reported last: its owner may drop the ring's jobs. */
	job->attempts = counts ? job->attempts : job->kills;
	pool_report(pr, job, 1, job->why, job->row_begin, 0, NULL);
	job_free(job);
}

/*
 * The kernel's count of OOM kills so far, its own or a cgroup's
 * (oom_kill in /proc/vmstat, Linux 4.13), or UINT64_MAX when unknown.
 */
static uint64_t
pool_oom_kills(void)
{
	char		 buf[16384], *p;
	ssize_t		 n;
	size_t		 len = 0;
	int		 fd;

	if ((fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC)) == -1)
		return (UINT64_MAX);
	while (len < sizeof(buf) - 1 && (n = read(fd, buf + len,
	    sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	if ((p = strstr(buf, "\noom_kill ")) == NULL)
		return (UINT64_MAX);
	return (strtoull(p + 10, NULL, 10));
}

/*
 * What a worker's end says about its job: STUCK when the pool killed it
 * for its deadline, else CRASHED, whatever ended it.  *@counts: whether
 * it counts in full against the row (a crash signal, an exit through
 * fatal(), SIGKILL when the kernel's OOM kills went up), or is a signal
 * from outside that nothing explains (an operator's kill), which counts
 * only up to POOL_MAX_KILLS: none is retried for ever.
 */
static enum pool_job_result
pool_blame(struct pool *pool, const struct worker *w, int status, int *sig,
    int *code, bool *counts)
{
	uint64_t	oom;

	*sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	*code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
	*counts = true;
	if (w->stuck)
		return (POOL_JOB_STUCK);
	switch (*sig) {
	case SIGKILL:
		oom = pool_oom_kills();
		*counts = oom == UINT64_MAX || oom > pool->oom_kills;
		pool->oom_kills = oom;
		break;
	case SIGTERM:
	case SIGINT:
	case SIGHUP:
	case SIGQUIT:
	case SIGUSR1:
	case SIGUSR2:
		*counts = false;
		break;
	default:
		break;
	}
	return (POOL_JOB_CRASHED);
}

/* Log how a worker ended. */
static void
pool_log_exit(const struct worker *w, pid_t pid, int status)
{
	if (w->retiring && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		log_debug("worker %u (pid %d) retired", w->idx, (int)pid);
	else if (w->stuck)
		log_debug("worker %u (pid %d), stuck, is gone", w->idx,
		    (int)pid);
	else if (WIFSIGNALED(status))
		log_warnx("worker %u (pid %d) was killed by signal %d (%s); "
		    "starting a replacement", w->idx, (int)pid,
		    WTERMSIG(status), sigabbrev_np(WTERMSIG(status)) ?
		    sigabbrev_np(WTERMSIG(status)) : "?");
	else
		log_warnx("worker %u (pid %d) exited with status %d; "
		    "starting a replacement", w->idx, (int)pid,
		    WEXITSTATUS(status));
}

/*
 * A worker died: start it again after its backoff (none for one a reload
 * retired), which doubles from POOL_BACKOFF_MIN_MS to POOL_BACKOFF_MAX_MS
 * with each death until it finishes a job, so a crash loop does not spin.
 */
static void
pool_respawn_later(struct pool *pool, struct worker *w, bool died)
{
	struct timeval	tv;

	if (!died) {
		pool_respawn(pool, w);
		return;
	}
	w->backoff_ms = w->backoff_ms == 0 ? POOL_BACKOFF_MIN_MS :
	    w->backoff_ms * 2 > POOL_BACKOFF_MAX_MS ? POOL_BACKOFF_MAX_MS :
	    w->backoff_ms * 2;
	tv.tv_sec = w->backoff_ms / 1000;
	tv.tv_usec = (suseconds_t)(w->backoff_ms % 1000) * 1000;
	evtimer_add(w->respawn_ev, &tv);
}

/* A dead worker's backoff is over. */
static void
pool_worker_respawn_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct worker	*w = arg;

	(void)fd;
	(void)ev;
	if (w->pool->stopping || w->pid != -1 || w->spawning)
		return;
	pool_respawn(w->pool, w);
	pool_dispatch(w->pool);
}

/* A worker could not be started: try again in POOL_RESPAWN_MS. */
static void
pool_respawn_failed(struct worker *w)
{
	struct timeval	tv = { POOL_RESPAWN_MS / 1000,
			    (POOL_RESPAWN_MS % 1000) * 1000 };

	log_warnx("worker %u: trying again in %d ms; the other workers go on "
	    "serving", w->idx, POOL_RESPAWN_MS);
	evtimer_add(w->respawn_ev, &tv);
}

/* Start a worker again, or try later when the system has no room. */
static void
pool_respawn(struct pool *pool, struct worker *w)
{
	if (pool_spawn(pool, w) == -1)
		pool_respawn_failed(w);
}

/* Worker @pid ended (the fork server reaped it): restart it, re-issue its work. */
static void
pool_worker_exited(struct pool *pool, pid_t pid, int status)
{
	struct worker		*w;
	struct job		*job;
	enum pool_job_result	 why;
	unsigned		 i;
	int			 csig, code;
	bool			 died, counts;
	uint64_t		 row;

	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].pid == pid)
			break;
	}
	if (i == pool->n)
		return;
	w = &pool->workers[i];
	pool_log_exit(w, pid, status);
	why = pool_blame(pool, w, status, &csig, &code, &counts);
	row = w->beat->job == w->job_id ? w->beat->row : UINT64_MAX;
	died = !(w->retiring && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0);
	event_del(w->deadline_ev);
	transport_free(w->t);
	w->t = NULL;
	w->pid = -1;
	job = w->job;
	w->job = NULL;
	if (job != NULL && job->won != NULL) {
		/* The copy that lost, gone: the winner's result goes. */
		died = false;	/* the pool killed it: no backoff */
		pool_job_end(pool, job, job->won);
	} else if (job != NULL && job->twin != NULL) {
		/* Its twin goes on alone; this end blames nothing. */
		pool_job_end(pool, job, NULL);
	} else if (job != NULL)
		pool_requeue(pool, job, why, csig, code, counts, row);
	if (pool->stopping)
		return;
	if (w->parking) {
		/* pool_shrink(): the slot stays empty; its job went back. */
		w->parking = false;
		w->retiring = false;
		w->stuck = false;
		pool->size--;
		return;
	}
	if (!w->retiring)
		w->restarts++;
	w->retiring = false;
	w->stuck = false;
	pool_respawn_later(pool, w, died);
}

/* How a fork server ended, as the log says: "was killed by signal 9 (KILL)". */
static void
pool_forker_how(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)",
		    WTERMSIG(status), sigabbrev_np(WTERMSIG(status)) ?
		    sigabbrev_np(WTERMSIG(status)) : "?");
	else
		snprintf(buf, len, "exited with status %d",
		    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* The fork server died while the pool started: start-up fails. */
static void __attribute__((noreturn))
pool_forker_died_starting(struct pool *pool)
{
	pid_t	pid = forker_pid(pool->forker);
	char	how[96];
	int	status = 0;

	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	pool_forker_how(status, how, sizeof(how));
	fatalx("the fork server (pid %d) %s while infeedd started", (int)pid,
	    how);
}

/*
 * A fork server is up again: ask it for the workers still to start (those
 * the dead one was asked for, or that died meanwhile).
 */
static void
pool_forker_ask_again(struct pool *pool)
{
	struct worker	*w;
	unsigned	 i;

	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->spawning && forker_spawn(pool->forker, w->idx,
		    pool->image_memory_max) == -1 && errno != EPIPE &&
		    errno != ECONNRESET) {
			log_warn("worker %u: asking the fork server", w->idx);
			w->spawning = false;
			pool_respawn_failed(w);
		}
	}
	pool_forker_check_later(pool);
}

/* Look at the fork server in POOL_FORKER_ANSWER_MS, unless due to. */
static void
pool_forker_check_later(struct pool *pool)
{
	struct timeval	tv = { POOL_FORKER_ANSWER_MS / 1000,
			    (POOL_FORKER_ANSWER_MS % 1000) * 1000 };

	if (!evtimer_pending(pool->forker_check_ev, NULL))
		evtimer_add(pool->forker_check_ev, &tv);
}

/*
 * A worker was asked for, or one closed its socket and its end was not
 * reported, POOL_FORKER_ANSWER_MS ago or more: a fork server that is
 * stopped would hold up the replacement for as long as it stays so, so
 * it is killed, and a new one starts (its death is handled as any other;
 * the dead worker, reparented to the daemon, is reaped by it).  One that
 * is slow (opening a large catalogue) is left alone.
 */
static void
pool_forker_check_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct pool	*pool = arg;
	struct worker	*w;
	unsigned	 i;

	(void)fd;
	(void)ev;
	if (pool->forker == NULL || pool->stopping)
		return;
	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->spawning || (w->closed && !w->adopted && w->pid != -1))
			break;
	}
	if (i == pool->n)
		return;
	if (!pool_stopped(forker_pid(pool->forker))) {
		pool_forker_check_later(pool);
		return;
	}
	log_warnx("the fork server (pid %d) is stopped and worker %u's "
	    "replacement waits for it; killing it and starting a new one",
	    (int)forker_pid(pool->forker), i);
	kill(forker_pid(pool->forker), SIGKILL);
}

/* A fork server is up (its transport heard on the loop): since when. */
static void
pool_forker_watch(struct pool *pool)
{
	pool->forker_started_ms = clock_now_ms();
}

/*
 * Start a new fork server, from infeedd's own binary, so that it inherits
 * nothing of the daemon's (forker_exec()); one that cannot be forked is
 * tried again after the backoff.
 */
static void
pool_forker_restart(struct pool *pool)
{
	if (pool->stopping || pool->forker != NULL)
		return;
	if (pool->exe_fd == -1) {
		log_warnx("no fork server: this process cannot start one "
		    "again; workers that die are not replaced");
		return;
	}
	if ((pool->forker = forker_exec(pool->base, pool->exe_fd,
	    pool->cat, pool->beats_fd, &pool_forker_events,
	    pool)) == NULL) {
		log_warn("cannot start a new fork server");
		pool_forker_later(pool);
		return;
	}
	pool->forker_restarts++;
	pool_forker_watch(pool);
	log_info("fork server started again, pid %d (restart %u)",
	    (int)forker_pid(pool->forker), pool->forker_restarts);
	pool_forker_ask_again(pool);
}

/* The restart's backoff is over. */
static void
pool_forker_restart_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct pool	*pool = arg;

	(void)fd;
	(void)ev;
	pool_forker_restart(pool);
	pool_dispatch(pool);
}

/*
 * Start a new fork server after a backoff: none for one that was up
 * POOL_FORKER_HEALTHY_MS, else doubling as for workers, so that a fork
 * server that keeps dying does not make the daemon spin.
 */
static void
pool_forker_later(struct pool *pool)
{
	struct timeval	tv;

	if (clock_now_ms() - pool->forker_started_ms >= POOL_FORKER_HEALTHY_MS)
		pool->forker_backoff_ms = 0;
	else
		pool->forker_backoff_ms = pool->forker_backoff_ms == 0 ?
		    POOL_BACKOFF_MIN_MS : pool->forker_backoff_ms * 2 >
		    POOL_BACKOFF_MAX_MS ? POOL_BACKOFF_MAX_MS :
		    pool->forker_backoff_ms * 2;
	tv.tv_sec = pool->forker_backoff_ms / 1000;
	tv.tv_usec = (suseconds_t)(pool->forker_backoff_ms % 1000) * 1000;
	evtimer_add(pool->forker_restart_ev, &tv);
}

/* Whether @pid is a process the pool knows: a fork server or a worker. */
static bool
pool_knows(const struct pool *pool, pid_t pid)
{
	size_t	i;

	if (pool->forker != NULL && forker_pid(pool->forker) == pid)
		return (true);
	for (i = 0; i < pool->nforkers_gone; i++) {
		if (pool->forkers_gone[i] == pid)
			return (true);
	}
	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].pid == pid)
			return (true);
	}
	return (false);
}

/*
 * In infeedd, whose every child is the pool's: reap the ended children
 * the pool does not know, workers a fork server forked as it died, before
 * it could say so.  Stops at the first known one, which is its own path's
 * (pool_reap() and pool_forker_died() come back here).
 */
static void
pool_reap_strays(struct pool *pool)
{
	siginfo_t	si;

	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == -1 ||
		    si.si_pid == 0 || pool_knows(pool, si.si_pid))
			return;
		log_debug("process %d, a worker whose fork server died as it "
		    "forked it, ended", (int)si.si_pid);
		while (waitpid(si.si_pid, NULL, 0) == -1 && errno == EINTR)
			;
	}
}

/*
 * Reap what is the daemon's to reap: dead fork servers (their end said in
 * the log), and adopted workers, whose ends count as the EXITED a fork
 * server would have sent.  Only known pids, but in infeedd itself (which
 * starts fork servers again: every child is the pool's).
 */
static void
pool_reap(struct pool *pool)
{
	struct worker	*w;
	char		 how[96];
	size_t		 i;
	pid_t		 pid, rc;
	int		 status;

	for (i = 0; i < pool->nforkers_gone; ) {
		pid = pool->forkers_gone[i];
		if ((rc = waitpid(pid, &status, WNOHANG)) == 0 ||
		    (rc == -1 && errno == EINTR)) {
			i++;
			continue;
		}
		pool->forkers_gone[i] =
		    pool->forkers_gone[--pool->nforkers_gone];
		if (pool->stopping || rc == -1)
			continue;
		pool_forker_how(status, how, sizeof(how));
		if (pool->forker != NULL)
			log_warnx("the fork server (pid %d) %s; a new one (pid "
			    "%d) starts workers from now on, and the workers "
			    "go on serving", (int)pid, how,
			    (int)forker_pid(pool->forker));
		else
			log_warnx("the fork server (pid %d) %s; a new one "
			    "starts within %u ms, and the workers go on "
			    "serving", (int)pid, how, pool->forker_backoff_ms);
	}
	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->adopted && w->pid != -1 &&
		    waitpid(w->pid, &status, WNOHANG) == w->pid) {
			w->adopted = false;
			pool_worker_exited(pool, w->pid, status);
		}
	}
	if (pool->exe_fd != -1)
		pool_reap_strays(pool);
}

/* SIGCHLD: an adopted worker or a fork server ended. */
static void
pool_chld_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct pool	*pool = arg;

	(void)sig;
	(void)ev;
	pool_reap(pool);
	pool_dispatch(pool);
}

/*
 * The fork server's socket closed: it died.  Its workers serve on, the
 * daemon's children now (a child subreaper), reaped by pool_reap(); a new
 * fork server starts (after a backoff when they keep dying) and is asked
 * for the workers still to start.
 */
static void
pool_forker_died(struct pool *pool)
{
	unsigned	i;

	if (pool->starting)
		pool_forker_died_starting(pool);
	pool->forkers_gone = xreallocarray(pool->forkers_gone,
	    pool->nforkers_gone + 1, sizeof(*pool->forkers_gone));
	pool->forkers_gone[pool->nforkers_gone++] = forker_pid(pool->forker);
	forker_free(pool->forker);
	pool->forker = NULL;
	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].pid != -1)
			pool->workers[i].adopted = true;
	}
	pool_forker_later(pool);
	pool_reap(pool);
}

/*
 * What the fork server says: a worker forked (its socket with it), one
 * that could not be, one that ended.  Its EOF: it died (pool_forker_died()).
 */
static void
pool_forker_read(struct pool *pool)
{
	union forker_reply	 m;
	struct worker		*w;
	uint32_t		 idx;
	int			 rc, fd;

	while ((rc = forker_recv(pool->forker, &m, &fd)) == 1) {
		/* SPAWNED, FAILED and EXITED each name the worker first. */
		idx = m.hdr.type == FORKER_MSG_EXITED ? m.exited.idx :
		    m.hdr.type == FORKER_MSG_FAILED ? m.failed.idx :
		    m.spawned.idx;
		w = idx < pool->n ? &pool->workers[idx] : NULL;
		if (m.hdr.type == FORKER_MSG_EXITED) {
			pool_worker_exited(pool, m.exited.pid,
			    m.exited.status);
		} else if (m.hdr.type == FORKER_MSG_SPAWNED && w != NULL &&
		    w->spawning && fd != -1) {
			pool_spawned(pool, w, m.spawned.pid, fd);
			fd = -1;
		} else if (w != NULL && w->spawning) {
			/* A SPAWNED without its socket: that one exits. */
			w->spawning = false;
			errno = m.hdr.type == FORKER_MSG_FAILED ?
			    m.failed.error : EBADF;
			if (pool->starting)
				fatal("cannot start worker %u", w->idx);
			log_warn("worker %u: fork", w->idx);
			pool_respawn_failed(w);
		}
		if (fd != -1)
			close(fd);
	}
	if (rc == -1)
		pool_forker_died(pool);
}

/* The fork server spoke. */
static void
pool_forker_cb(void *arg)
{
	struct pool	*pool = arg;

	pool_forker_read(pool);
	pool_dispatch(pool);
}

/* Start the pool's worker processes. */
struct pool *
pool_new(struct event_base *base, const struct catalogue *cat,
    struct ring_budget *budget, unsigned workers, unsigned max_workers,
    uint32_t job_timeout_ms, uint64_t image_memory_max)
{
	struct pool	*pool;
	void		*beats;
	unsigned	 i, slots = max_workers > workers ? max_workers : workers;

	pool = xcalloc(1, sizeof(*pool));
	pool->base = base;
	pool->cat = cat;
	pool->budget = budget;
	pool->job_timeout_ms = job_timeout_ms;
	pool->image_memory_max = image_memory_max;
	pool->oom_kills = pool_oom_kills();
	pool->exe_fd = -1;
	/*
	 * Shared with every worker, and with the fork server: a memfd, which
	 * a fork server started again maps from its descriptor.
	 */
	if ((pool->beats_fd = memfd_create("infeedd-beats", MFD_CLOEXEC)) ==
	    -1 || ftruncate(pool->beats_fd, (off_t)(slots *
	    sizeof(*pool->beats))) == -1)
		fatal("worker progress memory");
	beats = mmap(NULL, slots * sizeof(*pool->beats), PROT_READ |
	    PROT_WRITE, MAP_SHARED, pool->beats_fd, 0);
	if (beats == MAP_FAILED)
		fatal("worker progress memory");
	pool->beats = beats;
	/* The workers of a fork server that died become ours (pool_reap()). */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
		fatal("PR_SET_CHILD_SUBREAPER");
	pool->chld_ev = evsignal_new(base, SIGCHLD, pool_chld_cb, pool);
	pool->forker_restart_ev = evtimer_new(base, pool_forker_restart_cb,
	    pool);
	pool->forker_check_ev = evtimer_new(base, pool_forker_check_cb, pool);
	if (pool->chld_ev == NULL || pool->forker_restart_ev == NULL ||
	    pool->forker_check_ev == NULL ||
	    event_add(pool->chld_ev, NULL) == -1)
		fatalx("cannot watch the fork server");
	pool->jobmsg = xmalloc(sizeof(*pool->jobmsg) +
	    WORKER_MAX_JOB_ROWS * sizeof(uint64_t));
	pool->donemsg = xmalloc(WORKER_MAX_DONE);
	pool->n = slots;
	pool->size = workers;
	pool->workers = xcalloc(slots, sizeof(*pool->workers));
	TAILQ_INIT(&pool->jobs);
	TAILQ_INIT(&pool->rings);
	for (i = 0; i < slots; i++) {
		pool->workers[i].pool = pool;
		pool->workers[i].idx = i;
		pool->workers[i].pid = -1;
		pool->workers[i].beat = &pool->beats[i];
		if ((pool->workers[i].respawn_ev = evtimer_new(base,
		    pool_worker_respawn_cb, &pool->workers[i])) == NULL)
			fatalx("evtimer_new");
	}
	/* Before any client: it holds nothing of one, nor do its workers. */
	pool->forker = forker_start(base, cat, pool->beats,
	    &pool_forker_events, pool);
	/* One at a time: the requests never fill the socket. */
	pool->starting = true;
	for (i = 0; i < workers; i++) {
		if (pool_spawn(pool, &pool->workers[i]) == -1)
			fatalx("cannot start worker %u", i);
		while (pool->workers[i].spawning) {
			if (!forker_wait(pool->forker, POOL_START_MS))
				fatalx("the fork server did not start worker "
				    "%u within %d ms", i, POOL_START_MS);
			pool_forker_read(pool);
		}
	}
	pool->starting = false;
	pool_forker_watch(pool);
	if ((pool->retry_ev = evtimer_new(base, pool_retry_cb, pool)) == NULL)
		fatalx("evtimer_new");
	log_info("%u worker processes started by the fork server (pid %d)",
	    workers, (int)forker_pid(pool->forker));
	return (pool);
}

/*
 * At shutdown, the workers of dead fork servers (told to stop) and the
 * dead fork servers: wait until @stop_ms for the workers, kill those
 * left, and reap them all.
 */
static void
pool_stop_adopted(struct pool *pool, uint64_t stop_ms)
{
	struct timespec	 pause = { 0, 10 * 1000 * 1000 };
	struct worker	*w;
	unsigned	 i, left;

	for (;;) {
		for (left = i = 0; i < pool->n; i++) {
			w = &pool->workers[i];
			if (!w->adopted || w->pid == -1)
				continue;
			if (waitpid(w->pid, NULL, WNOHANG) == 0)
				left++;
			else
				w->pid = -1;
		}
		if (left == 0 || clock_now_ms() >= stop_ms)
			break;
		nanosleep(&pause, NULL);
	}
	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (!w->adopted || w->pid == -1)
			continue;
		log_warnx("worker %u (pid %d) did not stop within %d ms of "
		    "SIGTERM; killing it", w->idx, (int)w->pid, POOL_STOP_MS);
		kill(w->pid, SIGKILL);
		while (waitpid(w->pid, NULL, 0) == -1 && errno == EINTR)
			;
		w->pid = -1;
	}
	while (pool->nforkers_gone > 0) {
		while (waitpid(pool->forkers_gone[--pool->nforkers_gone], NULL,
		    0) == -1 && errno == EINTR)
			;
	}
}

/* Stop the workers and free the pool. */
void
pool_free(struct pool *pool)
{
	struct pool_ring	*pr;
	struct job		*job;
	uint64_t		 stop_ms;
	unsigned		 i;

	if (pool == NULL)
		return;
	pool->stopping = true;
	/* Rings still draining: their memory is not kept at exit. */
	TAILQ_FOREACH(pr, &pool->rings, entry) {
		if (pr->removed) {
			ring_free(pr->ring);
			pr->ring = NULL;
		}
	}
	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].pid != -1)
			kill(pool->workers[i].pid, SIGTERM);
		transport_free(pool->workers[i].t);
		pool->workers[i].t = NULL;
	}
	/* It waits for them (POOL_STOP_MS), kills those left, and goes. */
	stop_ms = clock_now_ms() + POOL_STOP_MS;
	forker_stop(pool->forker);
	pool_stop_adopted(pool, stop_ms);
	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].deadline_ev != NULL)
			event_free(pool->workers[i].deadline_ev);
		if (pool->workers[i].respawn_ev != NULL)
			event_free(pool->workers[i].respawn_ev);
		job_free(pool->workers[i].job);
		free(pool->workers[i].mems);
	}
	while ((job = TAILQ_FIRST(&pool->jobs)) != NULL) {
		TAILQ_REMOVE(&pool->jobs, job, entry);
		job_free(job);
	}
	while ((pr = TAILQ_FIRST(&pool->rings)) != NULL) {
		TAILQ_REMOVE(&pool->rings, pr, entry);
		pool_ring_free(pr);
	}
	if (pool->retry_ev != NULL)
		event_free(pool->retry_ev);
	event_free(pool->chld_ev);
	event_free(pool->forker_restart_ev);
	event_free(pool->forker_check_ev);
	free(pool->forkers_gone);
	if (pool->exe_fd != -1)
		close(pool->exe_fd);
	close(pool->beats_fd);
	munmap(pool->beats, pool->n * sizeof(*pool->beats));
	free(pool->jobmsg);
	free(pool->donemsg);
	free(pool->workers);
	free(pool);
}

/* Close and free what the pool keeps of a ring. */
static void
pool_ring_free(struct pool_ring *pr)
{
	uint32_t	i;

	close(pr->memfd);
	for (i = 0; i < pr->desc.nfiles; i++)
		close(pr->files[i]);
	free(pr->mapped);
	free(pr);
}

/* Register a ring; the pool keeps its own copy of its memory's memfd. */
struct pool_ring *
pool_add_ring(struct pool *pool, uint32_t dataset_index,
    const struct ring_layout *layout, const struct transform *tf,
    const struct ring_mem *mem, unsigned max_jobs, pool_done_cb *done,
    void *arg, char **cause)
{
	struct pool_ring	*pr;

	pr = xcalloc(1, sizeof(*pr));
	if ((pr->memfd = fcntl(mem->memfd, F_DUPFD_CLOEXEC, 0)) == -1) {
		*cause = xasprintf("cannot hand the step ring to the workers: "
		    "%s", strerror(errno));
		free(pr);
		return (NULL);
	}
	pr->pool = pool;
	pr->desc.ring_id = ++pool->next_ring_id;
	pr->desc.mem_id = mem->id;
	pr->desc.mem_bytes = mem->bytes;
	pr->desc.dataset_index = dataset_index;
	pr->desc.layout = *layout;
	pr->desc.transform = *tf;
	pr->max_jobs = max_jobs == 0 || max_jobs > pool->n ? pool->n :
	    max_jobs;
	pr->mapped = xcalloc(pool->n, sizeof(*pr->mapped));
	pr->done = done;
	pr->arg = arg;
	TAILQ_INSERT_TAIL(&pool->rings, pr, entry);
	/* The ring may have made room by giving kept memory up. */
	pool_let_go(pool);
	return (pr);
}

/* A removed ring's last job is done: release its memory, forget it. */
static void
pool_ring_finish(struct pool_ring *pr)
{
	struct pool	*pool = pr->pool;

	ring_release(pr->ring, pr->keep);
	TAILQ_REMOVE(&pool->rings, pr, entry);
	pool_ring_free(pr);
	/* Kept, its mappings stay; held or given up, they go. */
	pool_let_go(pool);
}

/* Does a worker run a job of a removed ring (whose memory is not free yet)? */
bool
pool_settling(struct pool *pool)
{
	struct worker		*w;
	struct pool_ring	*pr;
	unsigned		 i;

	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->job != NULL && w->t != NULL &&
		    (pr = pool_find(pool, w->job->ring_id)) != NULL &&
		    pr->removed)
			return (true);
	}
	return (false);
}

/* Forget a ring: drop its queued jobs; its running ones finish first. */
void
pool_remove_ring(struct pool_ring *pr, struct ring *r, bool keep)
{
	struct pool		*pool;
	struct worker_msg_unmap	 m;
	unsigned		 i;

	if (pr == NULL) {
		ring_release(r, keep);
		return;
	}
	pool = pr->pool;
	pool_drop_jobs(pr);
	pr->removed = true;
	pr->ring = r;
	pr->keep = keep;
	/* A worker reads it after the job it may be running. */
	memset(&m, 0, sizeof(m));
	m.ring_id = pr->desc.ring_id;
	for (i = 0; i < pool->n; i++) {
		if (pr->mapped[i] && pool->workers[i].t != NULL)
			(void)pool_send(&pool->workers[i], &m, sizeof(m),
			    WORKER_MSG_UNMAP, NULL, 0);
	}
	if (pr->inflight == 0)
		pool_ring_finish(pr);
}

/* Tell worker @w to unmap memory @mem_id. */
static void
pool_worker_forget(struct worker *w, uint64_t mem_id)
{
	struct worker_msg_forget	m;

	if (w->t == NULL)
		return;
	memset(&m, 0, sizeof(m));
	m.mem_id = mem_id;
	(void)pool_send(w, &m, sizeof(m), WORKER_MSG_FORGET, NULL, 0);
}

/* Every worker unmaps memory @mem_id. */
void
pool_forget_mem(struct pool *pool, uint64_t mem_id)
{
	unsigned	i;

	for (i = 0; i < pool->n; i++)
		pool_worker_forget(&pool->workers[i], mem_id);
}

/* Worker @w maps memory @mem_id (a MAP went), until it is told to forget. */
static void
pool_worker_maps(struct worker *w, uint64_t mem_id)
{
	unsigned	i;

	for (i = 0; i < w->nmems; i++) {
		if (w->mems[i] == mem_id)
			return;
	}
	w->mems = xreallocarray(w->mems, w->nmems + 1, sizeof(*w->mems));
	w->mems[w->nmems++] = mem_id;
}

/* Whether a ring of the pool, draining or not, is on memory @mem_id. */
static bool
pool_mem_in_use(const struct pool *pool, uint64_t mem_id)
{
	const struct pool_ring	*pr;

	TAILQ_FOREACH(pr, &pool->rings, entry) {
		if (pr->desc.mem_id == mem_id)
			return (true);
	}
	return (false);
}

/*
 * Workers unmap the memory no ring is on that the budget does not keep.
 * Memory given up is punched first, so a mapping that lingers until the
 * pool looks holds no page, only address space.
 */
void
pool_let_go(struct pool *pool)
{
	struct worker	*w;
	uint64_t	 id;
	unsigned	 i, k;

	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		for (k = 0; k < w->nmems;) {
			id = w->mems[k];
			if (pool_mem_in_use(pool, id) || (pool->budget !=
			    NULL && ring_budget_keeps(pool->budget, id))) {
				k++;
				continue;
			}
			pool_worker_forget(w, id);
			w->mems[k] = w->mems[--w->nmems];
		}
	}
}

/* The ring reads a client's files: keep their descriptors for the workers. */
int
pool_ring_files(struct pool_ring *pr, const struct dataset_files *spec,
    const struct dataset *ds, char **cause)
{
	int		fds[2];
	unsigned	n, i;

	n = dataset_files_fds(ds, fds);
	for (i = 0; i < n; i++) {
		if ((pr->files[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 0)) == -1) {
			*cause = xasprintf("cannot hand the files to the "
			    "workers: %s", strerror(errno));
			while (i > 0)
				close(pr->files[--i]);
			return (-1);
		}
	}
	pr->desc.files = *spec;
	pr->desc.nfiles = n;
	return (0);
}

/*
 * Queue rows [begin, end) of a slot, whose dataset indices are @indices,
 * in jobs of at most WORKER_MAX_JOB_ROWS rows, and start what can start.
 */
void
pool_submit(struct pool_ring *pr, uint32_t slot, uint64_t epoch,
    uint64_t seq, uint64_t begin, uint64_t end, const uint64_t *indices)
{
	struct job	*job;
	uint64_t	 stop;

	for (; end - begin > WORKER_MAX_JOB_ROWS; begin = stop) {
		stop = begin + WORKER_MAX_JOB_ROWS;
		pool_submit(pr, slot, epoch, seq, begin, stop, indices);
		indices += WORKER_MAX_JOB_ROWS;
	}
	job = xcalloc(1, sizeof(*job));
	job->ring_id = pr->desc.ring_id;
	job->slot = slot;
	job->epoch = epoch;
	job->seq = seq;
	job->queued = ++pr->pool->events;
	job->row_begin = begin;
	job->row_end = end;
	job->indices = xreallocarray(NULL, end - begin, sizeof(uint64_t));
	memcpy(job->indices, indices, (end - begin) * sizeof(uint64_t));
	TAILQ_INSERT_TAIL(&pr->pool->jobs, job, entry);
	pool_dispatch(pr->pool);
}

/* The client has had steps up to @next_seq: its jobs move up. */
void
pool_ring_delivered(struct pool_ring *pr, uint64_t next_seq)
{
	pr->delivered = next_seq;
	pr->delivered_at = ++pr->pool->events;
}

/* Drop a ring's queued jobs; running ones finish. */
void
pool_drop_jobs(struct pool_ring *pr)
{
	struct job	*job, *next;

	for (job = TAILQ_FIRST(&pr->pool->jobs); job != NULL; job = next) {
		next = TAILQ_NEXT(job, entry);
		if (job->ring_id == pr->desc.ring_id) {
			TAILQ_REMOVE(&pr->pool->jobs, job, entry);
			job_free(job);
		}
	}
}

/* A ring's dataset moved to another catalogue index. */
void
pool_ring_set_dataset(struct pool_ring *pr, uint32_t dataset_index)
{
	pr->desc.dataset_index = dataset_index;
}

/* Reload: replace every worker, so new ones inherit the new catalogue. */
void
pool_reload(struct pool *pool, const struct catalogue *cat,
    uint32_t job_timeout_ms, uint64_t image_memory_max)
{
	struct worker	*w;
	unsigned	 i;

	/* Before any replacement is asked for: they read the new datasets. */
	if (pool->forker != NULL && forker_reload(pool->forker, cat) == -1)
		log_warn("reload: the fork server was not told; new workers "
		    "read the datasets as they were");
	/* A fork server started from now on is sent it too. */
	pool->cat = cat;
	pool->job_timeout_ms = job_timeout_ms;
	pool->image_memory_max = image_memory_max;
	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->pid == -1 || w->t == NULL)
			continue;
		w->retiring = true;
		if (w->job == NULL)
			pool_retire(w);
	}
}

/* A dead fork server is started again from infeedd's own binary. */
void
pool_forker_restarts(struct pool *pool)
{
	/* Now: the binary that runs, even once a package replaced it. */
	if ((pool->exe_fd = open("/proc/self/exe", O_PATH | O_CLOEXEC)) == -1)
		fatal("/proc/self/exe");
}

/* The fork server now, for status. */
void
pool_forker_info(const struct pool *pool, pid_t *pid, unsigned *restarts)
{
	*pid = pool->forker != NULL ? forker_pid(pool->forker) : -1;
	*restarts = pool->forker_restarts;
}

/* How many workers the pool has (one being retired by a shrink too). */
unsigned
pool_size(const struct pool *pool)
{
	return (pool->size);
}

/* The most it may grow to. */
unsigned
pool_max(const struct pool *pool)
{
	return (pool->n);
}

/* A worker being added or retired. */
bool
pool_resizing(const struct pool *pool)
{
	unsigned	i;

	for (i = 0; i < pool->size; i++) {
		if (pool->workers[i].parking || pool->workers[i].spawning)
			return (true);
	}
	return (false);
}

/* Add a worker in the next slot. */
int
pool_grow(struct pool *pool)
{
	struct worker	*w;

	if (pool->size == pool->n || pool_resizing(pool))
		return (-1);
	w = &pool->workers[pool->size++];
	w->backoff_ms = 0;
	pool_respawn(pool, w);
	return (0);
}

/* Retire the last slot's worker once its job (if any) is done. */
int
pool_shrink(struct pool *pool)
{
	struct worker	*w;

	if (pool->size <= 1 || pool_resizing(pool))
		return (-1);
	w = &pool->workers[pool->size - 1];
	if (w->pid == -1) {
		/* Waiting out a backoff: it is not started again. */
		event_del(w->respawn_ev);
		pool->size--;
		return (0);
	}
	w->parking = true;
	w->retiring = true;
	if (w->job == NULL && w->t != NULL)
		pool_retire(w);
	return (0);
}

/* Time in jobs of every worker there has been, the running ones too. */
uint64_t
pool_busy_us(const struct pool *pool)
{
	const struct worker	*w;
	uint64_t		 us = 0, now = clock_now_us();
	unsigned		 i;

	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		us += w->busy_us + (w->job != NULL ? now - w->job_start_us :
		    0);
	}
	return (us);
}

/* No job queued or running, and every worker up. */
bool
pool_idle(const struct pool *pool)
{
	unsigned	i;

	if (!TAILQ_EMPTY(&pool->jobs))
		return (false);
	for (i = 0; i < pool->size; i++) {
		if (pool->workers[i].job != NULL ||
		    pool->workers[i].pid == -1)
			return (false);
	}
	return (true);
}

/* Rows handed to a worker again after the one reading them died. */
uint64_t
pool_rows_reissued(const struct pool *pool)
{
	return (pool->rows_reissued);
}

/* Jobs waiting for a worker. */
unsigned
pool_jobs_queued(const struct pool *pool)
{
	struct job	*job;
	unsigned	 n = 0;

	TAILQ_FOREACH(job, &pool->jobs, entry)
		n++;
	return (n);
}

/* Describe worker @i. */
void
pool_worker_info(const struct pool *pool, unsigned i,
    struct pool_worker_info *info)
{
	const struct worker	*w = &pool->workers[i];

	info->pid = w->pid;
	info->state = w->pid == -1 ? "restarting" : w->stuck && w->job !=
	    NULL && w->job->won != NULL ? "taken-over" : w->stuck ? "stuck" :
	    w->job != NULL ? "busy" : w->retiring ? "retiring" : !w->ready ?
	    "starting" : "idle";
	info->rows_done = w->rows_done;
	info->busy_s = (double)(w->busy_us + (w->job != NULL ?
	    clock_now_us() - w->job_start_us : 0)) / 1e6;
	info->restarts = w->restarts;
	info->stuck = w->stuck_kills;
	info->taken_over = w->taken_over;
}
