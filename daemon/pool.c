/* SPDX-License-Identifier: MIT */
/*
 * The worker pool (see pool.h): made and freed, reloaded, and its
 * dispatch, which gives idle workers the queued jobs nearest their
 * clients, or a stalled job to take over.  The subsystems it ties
 * together have a file each (pool-private.h lists them).
 */

#include <sys/mman.h>
#include <sys/prctl.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "forker.h"
#include "log.h"
#include "pool-private.h"
#include "procmem.h"
#include "ring-memory.h"
#include "xmalloc.h"

#define POOL_RETRY_MS		100	/* a job that could not be sent, again */
#define POOL_START_MS		30000	/* the first workers, at most */

static void	pool_spare_later(struct pool *);
static void	pool_spare_cb(evutil_socket_t, short, void *);

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
 * Send @job of ring @pr to worker @w (its ring first, if @w does not have
 * it), its job_id in *@id.  Return: 0, or -1 when it could not go.
 */
static int
pool_send_job(struct pool *pool, struct worker *w, struct pool_ring *pr,
    struct job *job, uint64_t *id)
{
	struct worker_msg_job	*jm = pool->jobmsg;
	uint64_t		 rows;

	if (pool_map_ring(pool, w, pr) == -1)
		return (-1);
	rows = job->row_end - job->row_begin;
	memset(jm, 0, sizeof(*jm));
	jm->ring_id = job->ring_id;
	jm->slot = job->slot;
	jm->epoch = job->epoch;
	jm->row_begin = job->row_begin;
	jm->row_end = job->row_end;
	jm->job_id = ++pool->next_job_id;
	memcpy(jm->indices, job->indices, rows * sizeof(uint64_t));
	/* Later steps' rows to read ahead ride along (pool_read_ahead()). */
	jm->ahead = pool_read_ahead_take(pr, jm->indices + rows,
	    WORKER_MAX_JOB_AHEAD);
	if (pool_send(w, jm, sizeof(*jm) + (rows + jm->ahead) *
	    sizeof(uint64_t), WORKER_MSG_JOB, NULL, 0) == -1)
		return (-1);
	*id = jm->job_id;
	pr->inflight++;
	return (0);
}

/*
 * Send @job of ring @pr to idle worker @w and start its clock.  Return: 0,
 * or -1 when it could not go.
 */
int
pool_start_job(struct pool *pool, struct worker *w, struct pool_ring *pr,
    struct job *job)
{
	if (pool_send_job(pool, w, pr, job, &w->job_id) == -1)
		return (-1);
	w->job = job;
	pool_arm_deadline(w);
	return (0);
}

/*
 * The worker to queue a job of ring @pr behind: one running a job of it
 * that is well (not blocked in its storage, not taken over, not going)
 * with none behind, the one that began it first; or NULL unless every
 * worker up or due (a spare up too) runs a job of @pr: so no other
 * session's job waits behind one of it, and no worker that is idle, or
 * ready soon (a replacement), waits while a job of @pr waits behind a
 * running one.
 */
static struct worker *
pool_behind_worker(struct pool *pool, const struct pool_ring *pr)
{
	struct worker	*w, *best = NULL;
	uint64_t	 now = clock_now_ms();
	unsigned	 i;

	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if ((i >= pool->size && i < pool->max) || (w->spare &&
		    w->pid == -1 && !w->spawning))
			continue;	/* a slot not in use */
		if (w->job == NULL || w->job->ring_id != pr->desc.ring_id)
			return (NULL);
	}
	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->job == NULL || w->next != NULL || w->t == NULL ||
		    w->closed || w->stuck ||
		    w->retiring || w->spare || w->job->taken ||
		    w->job->twin != NULL)
			continue;
		if (now >= w->live_ms + POOL_SPARE_MS)
			pool_worker_look(w, now);
		if (now >= w->live_ms + POOL_SPARE_MS)
			continue;
		if (best == NULL || w->job_start_us < best->job_start_us)
			best = w;
	}
	return (best);
}

/*
 * With no worker idle, the next job goes behind a running job of its ring
 * (pool_behind_worker()), in that worker's socket: the worker begins it as
 * soon as it sends the DONE before, not a round trip through the event
 * loop later (a small job's whole cost: a token step), and a worker that
 * reads in flight has the next job's reads to send.  One a worker, and
 * only while the workers serve one ring (pool_behind_worker()); the pick
 * is the same as an idle worker's, and stops at a job that waits for an
 * idle worker, so none goes ahead of it.  Run once the loop has run what
 * it was running, not from pool_submit(): a step's jobs and the rows read
 * ahead after them (pool_read_ahead(), which ride with the jobs sent) are
 * all queued by then, and a session attaching in the same turn of the
 * loop is picked among them.  A session's first job that comes later
 * waits for the first worker done with both of its jobs: one job more, at
 * most.
 */
static void
pool_dispatch_behind(evutil_socket_t fd, short ev, void *arg)
{
	struct pool		*pool = arg;
	struct pool_ring	*pr = NULL;
	struct worker		*w;
	struct job		*job;

	(void)fd;
	(void)ev;
	if (pool->stopping)
		return;
	/* A job tried before goes to a worker that is free (spares too). */
	while ((job = pool_next_job(pool, &pr, false, true)) != NULL &&
	    job->attempts == 0 && job->kills == 0 &&
	    (w = pool_behind_worker(pool, pr)) != NULL) {
		if (pool_send_job(pool, w, pr, job, &w->next_id) == -1) {
			pool_retry_later(pool, w);
			return;
		}
		pool_job_unqueue(pool, pr, job);
		w->next = job;
		pr->behind++;
	}
}

/*
 * The job behind @w's running one runs now: the worker began it when it
 * sent the DONE of the one before.
 */
void
pool_worker_next(struct worker *w)
{
	struct pool_ring	*pr;

	if (w->next == NULL)
		return;
	w->job = w->next;
	w->job_id = w->next_id;
	w->next = NULL;
	if ((pr = pool_find(w->pool, w->job->ring_id)) != NULL)
		pr->behind--;
	pool_arm_deadline(w);
}

/*
 * Give queued jobs to idle workers, within each ring's cap; an idle
 * worker takes over a stalled job first when no queued job is as near
 * its client.
 */
void
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
		if (w->spare) {
			/* Another session's job, never a takeover. */
			if ((job = pool_next_job(pool, &pr, true, false)) ==
			    NULL)
				continue;
			if (pool_start_job(pool, w, pr, job) == -1)
				pool_retry_later(pool, w);
			else
				pool_job_unqueue(pool, pr, job);
			continue;
		}
		job = pool_next_job(pool, &pr, false, false);
		from = pool_stalled(pool, &spr);
		if (from != NULL && (job == NULL || pool_job_depth(spr,
		    from->job) <= pool_job_depth(pr, job))) {
			if (pool_takeover(pool, w, spr, from) == -1)
				pool_retry_later(pool, w);
			continue;
		}
		if (job == NULL)
			break;
		if (pool_start_job(pool, w, pr, job) == -1) {
			pool_retry_later(pool, w);
			continue;
		}
		pool_job_unqueue(pool, pr, job);
	}
	/* Once the loop has run what it is running (pool_dispatch_behind()). */
	if (pool->queued > 0 && !pool->stopping && pool->behind_ev != NULL)
		event_active(pool->behind_ev, 0, 0);
	pool_spare_later(pool);
}

/*
 * Whether busy worker @w is blocked in its storage: it began no row, used
 * no CPU and was not runnable for POOL_SPARE_MS (as its last look saw).
 */
static bool
pool_blocked(const struct worker *w, uint64_t now)
{
	return (w->job != NULL && !w->stuck && w->t != NULL &&
	    now >= w->live_ms + POOL_SPARE_MS);
}

/*
 * Whether ring @pr is blocked, for a spare: a job of it runs, or one ran
 * on a worker seen blocked in its storage within POOL_SPARE_KEEP_MS
 * (pool_spare_cb(); that worker may have been killed since, and its job
 * be queued again), or its next job was tried before.  A spare takes a
 * ring's jobs one at a time: a job just begun on another worker may be
 * one that fails (a fetch's tries: 1-2 s, or 10 s a stalled try, using
 * CPU at each try, so seen blocked only after some hundred ms), and a
 * second spare would wait beside it while the other sessions wait.
 */
bool
pool_ring_blocked(const struct pool_ring *pr)
{
	const struct job	*head = TAILQ_FIRST(&pr->jobs);

	return (pr->inflight > 0 ||
	    (head != NULL && (head->attempts > 0 || head->kills > 0)) ||
	    (pr->blocked_ms != 0 && clock_now_ms() < pr->blocked_ms +
	    POOL_SPARE_KEEP_MS));
}

/* Look again in POOL_SPARE_MS while a job waits or a spare is up. */
static void
pool_spare_later(struct pool *pool)
{
	struct timeval	tv = { 0, POOL_SPARE_MS * 1000 };
	unsigned	i;
	bool		wanted = pool->queued > 0;

	for (i = pool->max; i < pool->n && !wanted; i++)
		wanted = pool->workers[i].pid != -1 ||
		    pool->workers[i].spawning;
	if (wanted && !pool->stopping && pool->spare_ev != NULL &&
	    !evtimer_pending(pool->spare_ev, NULL))
		evtimer_add(pool->spare_ev, &tv);
}

/*
 * Charge spare @w to memory_budget before it starts: what the workers up
 * take on average (their private memory), POOL_WORKER_MIN_BYTES at least.
 * 0, or -1 with the budget's reason in *@cause (to free).
 */
static int
pool_spare_charge(struct pool *pool, struct worker *w, char **cause)
{
	static const struct ring_owner	 daemon_owner = { .uid = (uid_t)-1 };
	uint64_t			 bytes = 0;
	unsigned			 i, up = 0;

	for (i = 0; i < pool->n; i++) {
		if (pool->workers[i].pid != -1) {
			bytes += procmem_private(pool->workers[i].pid);
			up++;
		}
	}
	bytes = up > 0 ? bytes / up : 0;
	if (bytes < POOL_WORKER_MIN_BYTES)
		bytes = POOL_WORKER_MIN_BYTES;
	if (pool->budget != NULL && ring_budget_charge(pool->budget, bytes,
	    &daemon_owner, cause) == -1)
		return (-1);
	w->charged = pool->budget != NULL ? bytes : 0;
	return (0);
}

/* Give back what spare @w was charged: it ended, or never started. */
void
pool_spare_uncharge(struct worker *w)
{
	if (w->charged > 0)
		ring_budget_uncharge(w->pool->budget, w->charged);
	w->charged = 0;
}

/*
 * How many spares the queued jobs want: one for each ring whose next job
 * a spare may take (pool_next_job()), less the spares starting.
 */
static unsigned
pool_spare_wanted(struct pool *pool)
{
	struct pool_ring	*pr;
	unsigned		 i, n = 0;

	TAILQ_FOREACH(pr, &pool->rings, entry)
		if (!TAILQ_EMPTY(&pr->jobs) && !pool_ring_blocked(pr))
			n++;
	for (i = pool->max; i < pool->n && n > 0; i++)
		if (pool->workers[i].spawning)
			n--;
	return (n);
}

/*
 * Spares: a worker blocked in a store that does not answer holds its
 * slot until job_timeout kills it, and with every worker so held the
 * other sessions' jobs would wait as long.  While jobs of rings a spare
 * may serve are queued and no worker is idle, spares are started for
 * them together (pool_spare_wanted()), one for each blocked worker,
 * POOL_SPARES_MAX at most; spares take no job of a blocked ring, nor of
 * one with a job running (pool_next_job(), pool_ring_blocked()), nor any
 * takeover, so they are not blocked in turn, and run no job another
 * worker still holds: exactly once is the queue's.  A spare idle for
 * POOL_SPARE_KEEP_MS with no worker blocked is let go.  Each is charged
 * to memory_budget first (pool_spare_charge()); none starts without room.
 */
static void
pool_spare_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct pool		*pool = arg;
	struct pool_ring	*pr;
	struct worker		*w;
	uint64_t		 now = clock_now_ms();
	unsigned		 i, blocked = 0, spares = 0, idle = 0, wanted;
	char			 why[sizeof(pool->spare_why)], *cause;

	(void)fd;
	(void)ev;
	for (i = 0; i < pool->n; i++) {
		w = &pool->workers[i];
		if (w->spare && w->pid == -1 && !w->spawning)
			continue;
		if (w->spare)
			spares++;
		if (w->job != NULL && now >= w->live_ms + POOL_SPARE_MS) {
			pool_worker_look(w, now);
			if (pool_blocked(w, now)) {
				blocked++;
				if ((pr = pool_find(pool, w->job->ring_id)) !=
				    NULL)
					pr->blocked_ms = now;
			}
		} else if (w->job == NULL && w->pid != -1 && w->ready &&
		    !w->retiring && !w->stuck)
			idle++;
	}
	for (i = pool->max; i < pool->n && blocked == 0; i++) {
		w = &pool->workers[i];
		if (w->pid != -1 && w->job == NULL && w->t != NULL &&
		    !w->retiring && now >= w->idle_ms + POOL_SPARE_KEEP_MS)
			pool_retire(w);
	}
	/* One for each session with a job waiting, together. */
	wanted = pool_spare_wanted(pool);
	if (blocked > spares && idle == 0 && wanted > 0) {
		snprintf(why, sizeof(why), "%u of %u workers blocked in their "
		    "storage for %d ms or more, none idle, and a job of "
		    "another session waiting", blocked, pool->size + spares,
		    POOL_SPARE_MS);
		for (i = pool->max; i < pool->n && blocked > spares &&
		    wanted > 0; i++) {
			w = &pool->workers[i];
			if (w->pid != -1 || w->spawning)
				continue;
			if (pool_spare_charge(pool, w, &cause) == -1) {
				/* Said once a blocked spell, not every tick. */
				if (!pool->spare_refused)
					log_warnx("no spare worker, though %s: "
					    "a worker's memory does not fit, "
					    "for %s", why, cause);
				pool->spare_refused = true;
				free(cause);
				break;
			}
			pool->spare_refused = false;
			memcpy(pool->spare_why, why, sizeof(why));
			log_warnx("starting spare worker %u: %s", w->idx,
			    pool->spare_why);
			w->idle_ms = now;
			if (pool_spawn(pool, w) == 0)
				pool->spares_started++;
			spares++;
			wanted--;
		}
	} else if (blocked == 0)
		pool->spare_refused = false;
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
	unsigned	 i, slots = (max_workers > workers ? max_workers :
			    workers) + POOL_SPARES_MAX;

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
	    (WORKER_MAX_JOB_ROWS + WORKER_MAX_JOB_AHEAD) * sizeof(uint64_t));
	pool->donemsg = xmalloc(WORKER_MAX_DONE);
	pool->n = slots;
	pool->max = slots - POOL_SPARES_MAX;
	pool->size = workers;
	pool->workers = xcalloc(slots, sizeof(*pool->workers));
	TAILQ_INIT(&pool->rings);
	for (i = 0; i < slots; i++) {
		pool->workers[i].pool = pool;
		pool->workers[i].idx = i;
		pool->workers[i].pid = -1;
		pool->workers[i].beat = &pool->beats[i];
		pool->workers[i].spare = i >= pool->max;
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
	if ((pool->behind_ev = event_new(base, -1, 0, pool_dispatch_behind,
	    pool)) == NULL)
		fatalx("cannot make the pool's events");
	if ((pool->retry_ev = evtimer_new(base, pool_retry_cb, pool)) ==
	    NULL || (pool->spare_ev = evtimer_new(base, pool_spare_cb,
	    pool)) == NULL)
		fatalx("evtimer_new");
	log_info("%u worker processes started by the fork server (pid %d)",
	    workers, (int)forker_pid(pool->forker));
	return (pool);
}

/* Stop the workers and free the pool. */
void
pool_free(struct pool *pool)
{
	struct pool_ring	*pr;
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
		pool_job_free(pool->workers[i].job);
		pool_job_free(pool->workers[i].next);
		pool_spare_uncharge(&pool->workers[i]);
		free(pool->workers[i].mems);
	}
	while ((pr = TAILQ_FIRST(&pool->rings)) != NULL) {
		pool_drop_jobs(pr);
		TAILQ_REMOVE(&pool->rings, pr, entry);
		pool_ring_free(pr);
	}
	if (pool->retry_ev != NULL)
		event_free(pool->retry_ev);
	if (pool->behind_ev != NULL)
		event_free(pool->behind_ev);
	if (pool->spare_ev != NULL)
		event_free(pool->spare_ev);
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

/* Reload: replace every worker, so new ones inherit the new catalogue. */
void
pool_reload(struct pool *pool, const struct catalogue *cat,
    uint32_t job_timeout_ms, uint64_t image_memory_max)
{
	struct worker	*w;
	unsigned	 i;

	/* Before any replacement is asked for: they read the new datasets. */
	if (pool->forker != NULL && (pool->prepared ?
	    forker_switch(pool->forker) : forker_reload(pool->forker, cat)) ==
	    -1)
		log_warn("reload: the fork server was not told; new workers "
		    "read the datasets as they were");
	pool->prepared = false;
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

/* The fork server opens @cat beside its own; @cb(@arg) once it has. */
void
pool_prepare(struct pool *pool, const struct catalogue *cat,
    void (*cb)(void *), void *arg)
{
	pool->prepared = false;
	if (pool->forker == NULL || forker_prepare(pool->forker, cat) == -1) {
		cb(arg);	/* pool_reload() sends it whole */
		return;
	}
	pool->prepared_cb = cb;
	pool->prepared_arg = arg;
}

/* pool_prepare()'s callback is not wanted any more: see pool.h. */
void
pool_prepare_cancel(struct pool *pool)
{
	pool->prepared_cb = NULL;
	pool->prepared = false;
}

/* The fork server has the catalogue open (or died): call pool_prepare()'s. */
void
pool_prepared(struct pool *pool, bool open)
{
	void	(*cb)(void *) = pool->prepared_cb;

	if (cb == NULL)
		return;
	pool->prepared_cb = NULL;
	pool->prepared = open;
	cb(pool->prepared_arg);
}

/* No job queued or running, and every worker up. */
bool
pool_idle(const struct pool *pool)
{
	unsigned	i;

	if (pool->queued > 0)
		return (false);
	for (i = 0; i < pool->size; i++) {
		if (pool->workers[i].job != NULL ||
		    pool->workers[i].pid == -1)
			return (false);
	}
	return (true);
}
