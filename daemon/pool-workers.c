/* SPDX-License-Identifier: MIT */
/*
 * The pool's workers (see pool.h, pool-private.h): each started by the
 * fork server and watched over its transport, sent to without blocking;
 * its answers read; its deadline and liveness (the beat, its CPU time,
 * its state); its end, a respawn after a backoff, retiring and resizing;
 * and the fork server's lifecycle: its death survived, the workers it
 * leaves reaped by the daemon, a new one started.
 */

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
#include "pool-private.h"
#include "xmalloc.h"

#define POOL_RESPAWN_MS		1000	/* retry a failed fork after this */
#define POOL_BACKOFF_MIN_MS	10	/* a dead worker's first respawn waits */
#define POOL_BACKOFF_MAX_MS	1000	/* ... doubling to this, till a job is done */
#define POOL_MAX_QUEUED		1024	/* messages a worker may leave unread */
#define POOL_FORKER_HEALTHY_MS	10000	/* up so long: restarted at once */
#define POOL_FORKER_ANSWER_MS	500	/* a worker waits: is it stopped? */

static void	pool_worker_read_cb(void *);
static void	pool_worker_broken_cb(void *, int);
static void	pool_deadline_cb(evutil_socket_t, short, void *);
static void	pool_respawn(struct pool *, struct worker *);
static void	pool_forker_cb(void *);
static void	pool_forker_later(struct pool *);
static void	pool_forker_check_later(struct pool *);
static void	pool_deadline_in(struct worker *, uint64_t);
static uint64_t	pool_beat_every(const struct pool *);

const struct transport_events pool_forker_events = {
	.read = pool_forker_cb,
};

static const struct transport_events pool_transport_events = {
	.read = pool_worker_read_cb,
	.broken = pool_worker_broken_cb,
};

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
int
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

/*
 * Start (or restart) one worker: ask the fork server, whose SPAWNED
 * brings its socket (pool_spawned()).  While none is up, or when the one
 * up has just died, the next one is asked (pool_forker_restart()).
 * Returns -1 (logged) when the request could not be sent otherwise.
 */
int
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
	/* Until it says it is ready (pool_deadline_cb()). */
	w->live_ms = clock_now_ms();
	pool_deadline_in(w, pool_beat_every(pool));
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
void
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
bool
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
	/*
	 * Not ready yet: no job comes to it, so nothing else would find it
	 * stopped or stuck in its start (the pool's only worker held every
	 * session); one that runs or uses CPU is starting, however slowly.
	 */
	if (!w->ready) {
		if (now < w->live_ms + w->pool->job_timeout_ms) {
			pool_deadline_in(w, pool_beat_every(w->pool));
			return;
		}
		snprintf(why, sizeof(why), "did not say it was ready within "
		    "%u ms of its start (job_timeout)",
		    w->pool->job_timeout_ms);
		pool_kill_stuck(w, why);
		return;
	}
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

/* Start the running job's clock: its first row is due in job_timeout. */
void
pool_arm_deadline(struct worker *w)
{
	pool_deadline_in(w, pool_beat_every(w->pool));
	w->job_start_us = clock_now_us();
	w->beat_ms = clock_now_ms();
	w->live_ms = w->beat_ms;
	w->beat_rows = __atomic_load_n(&w->beat->rows, __ATOMIC_RELAXED);
}

/* Let an idle worker go: it exits on EOF and its end replaces it. */
void
pool_retire(struct worker *w)
{
	struct timeval	tv = { POOL_STOP_MS / 1000,
			    (POOL_STOP_MS % 1000) * 1000 };

	transport_free(w->t);
	w->t = NULL;
	/* One that does not go (stopped, stuck) is killed, then replaced. */
	evtimer_add(w->deadline_ev, &tv);
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
		if (!w->retiring)	/* its start's deadline */
			event_del(w->deadline_ev);
		if (w->spare)
			log_info("spare worker %u (pid %d) ready, %llu ms after "
			    "it was asked for", w->idx, (int)w->pid,
			    (unsigned long long)(clock_now_ms() - w->idle_ms));
		return (1);
	}
	if (n <= 0 || m->hdr.type != WORKER_MSG_DONE ||
	    !worker_done_whole(m, (size_t)n) || w->job == NULL ||
	    m->job_id != w->job_id) {
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
	w->idle_ms = clock_now_ms();
	w->backoff_ms = 0;	/* it works: a later death respawns at once */
	/*
	 * Before the report, whose owner may queue more (pool_dispatch()).
	 * Not on a worker being killed: its end says whether it began the
	 * job behind (its beat), which goes back blamed only if it did.
	 */
	if (!w->stuck)
		pool_worker_next(w);
	if (job->won != NULL) {
		/* It lost, and wrote its last row: the winner's result goes. */
		pool_job_end(pool, job, job->won);
	} else if (job->twin != NULL) {
		/* The first result: it goes once the other copy is fenced. */
		pool_fence(pool, job->twin, m);
		pool_job_end(pool, job, NULL);
	} else
		pool_job_end(pool, job, m);
	if (w->retiring && w->job == NULL)
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
void
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

	if (w->spare) {		/* pool_spare_cb() tries again */
		pool_spare_uncharge(w);
		return;
	}
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

/*
 * A job of a worker that ended: the copy that lost a takeover reports its
 * winner's result, one whose twin goes on ends quietly, else @job goes
 * back to its queue, @blamed for the end (pool_requeue(), with @why,
 * @csig, @code, @counts and the @row the worker was reading) or not
 * (pool_job_return()).  Return: whether the pool killed it (no backoff).
 */
static bool
pool_worker_job_gone(struct pool *pool, struct job *job, bool blamed,
    enum pool_job_result why, int csig, int code, bool counts, uint64_t row)
{
	if (job->won != NULL) {
		/* The copy that lost, gone: the winner's result goes. */
		pool_job_end(pool, job, job->won);
		return (true);
	}
	if (job->twin != NULL)	/* its twin goes on alone */
		pool_job_end(pool, job, NULL);
	else if (blamed)
		pool_requeue(pool, job, why, csig, code, counts, row);
	else
		pool_job_return(pool, job);
	return (false);
}

/* Worker @pid ended (the fork server reaped it): restart it, re-issue its work. */
static void
pool_worker_exited(struct pool *pool, pid_t pid, int status)
{
	struct worker		*w;
	struct pool_ring	*pr;
	struct job		*job, *next;
	enum pool_job_result	 why;
	unsigned		 i;
	int			 csig, code;
	bool			 died, counts, began;
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
	/*
	 * The job its beat names is the one it was in: the running one, or
	 * the one behind it, begun after a DONE not yet read (the running
	 * one then goes back as it was: it ended, its result unread).
	 */
	began = w->next != NULL && w->beat->job == w->next_id;
	row = w->beat->job == (began ? w->next_id : w->job_id) ?
	    w->beat->row : UINT64_MAX;
	died = !(w->retiring && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0);
	event_del(w->deadline_ev);
	transport_free(w->t);
	w->t = NULL;
	w->pid = -1;
	job = w->job;
	next = w->next;
	w->job = w->next = NULL;
	if (next != NULL && (pr = pool_find(pool, next->ring_id)) != NULL)
		pr->behind--;
	if (job != NULL && pool_worker_job_gone(pool, job, !began, why, csig,
	    code, counts, row))
		died = false;	/* the pool killed it: no backoff */
	if (next != NULL)
		(void)pool_worker_job_gone(pool, next, began, why, csig, code,
		    counts, row);
	if (pool->stopping)
		return;
	if (w->spare) {
		/* Started again only when needed (pool_spare_cb()). */
		pool_spare_uncharge(w);
		w->retiring = false;
		w->stuck = false;
		pool_dispatch(pool);
		return;
	}
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
void
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
void
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
void
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
void
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
	/* A reload waiting for it goes on: its successor gets the new one. */
	pool_prepared(pool, false);
}

/*
 * What the fork server says: a worker forked (its socket with it), one
 * that could not be, one that ended.  Its EOF: it died (pool_forker_died()).
 */
void
pool_forker_read(struct pool *pool)
{
	union forker_reply	 m;
	struct worker		*w;
	uint32_t		 idx;
	int			 rc, fd;
	bool			 prepared = false;

	while ((rc = forker_recv(pool->forker, &m, &fd)) == 1) {
		if (m.hdr.type == FORKER_MSG_PREPARED) {
			prepared = true;	/* called once the rest is read */
			if (fd != -1)
				close(fd);
			continue;
		}
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
	else if (prepared)
		pool_prepared(pool, true);
}

/* The fork server spoke. */
static void
pool_forker_cb(void *arg)
{
	struct pool	*pool = arg;

	pool_forker_read(pool);
	pool_dispatch(pool);
}

/*
 * At shutdown, the workers of dead fork servers (told to stop) and the
 * dead fork servers: wait until @stop_ms for the workers, kill those
 * left, and reap them all.
 */
void
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
	return (pool->max);
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

/*
 * Add a worker in the next slot; others may still be starting (workers =
 * auto adds several at once for storage), but none retiring.
 */
int
pool_grow(struct pool *pool)
{
	struct worker	*w;
	unsigned	 i;

	if (pool->size == pool->max)
		return (-1);
	for (i = 0; i < pool->size; i++)
		if (pool->workers[i].parking)
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

/* Describe worker @i. */
void
pool_worker_info(const struct pool *pool, unsigned i,
    struct pool_worker_info *info)
{
	const struct worker	*w = &pool->workers[i];
	unsigned		 j;

	/* Past the pool's, the spares up, in their slots' order. */
	for (j = pool->max; i >= pool->size && j < pool->n; j++) {
		if (pool->workers[j].pid != -1 && i-- == pool->size) {
			w = &pool->workers[j];
			break;
		}
	}
	info->pid = w->pid;
	info->state = w->pid == -1 ? "restarting" : w->stuck && w->job !=
	    NULL && w->job->won != NULL ? "taken-over" : w->stuck ? "stuck" :
	    w->spare ? "spare" : w->job != NULL ? "busy" : w->retiring ?
	    "retiring" : !w->ready ? "starting" : "idle";
	info->rows_done = w->rows_done;
	info->busy_s = (double)(w->busy_us + (w->job != NULL ?
	    clock_now_us() - w->job_start_us : 0)) / 1e6;
	info->restarts = w->restarts;
	info->stuck = w->stuck_kills;
	info->taken_over = w->taken_over;
}

/* The spares up, how many were started, and why the last was. */
unsigned
pool_spares(const struct pool *pool, uint64_t *started, const char **why)
{
	unsigned	i, up = 0;

	for (i = pool->max; i < pool->n; i++)
		up += pool->workers[i].pid != -1;
	*started = pool->spares_started;
	*why = pool->spare_why;
	return (up);
}
