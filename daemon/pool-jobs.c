/* SPDX-License-Identifier: MIT */
/*
 * The pool's jobs (see pool.h, pool-private.h): a step cut into jobs
 * (pool_job_rows()); a queue a ring, in the
 * order its jobs go, and the pick among the rings' heads, least depth
 * first, then longest at that depth; a job's end and its report to
 * its ring's owner; after a worker's death, what it blames and the job
 * requeued, split down to the row that kills; takeover twins, the first
 * DONE of two, and the fence that kills the copy that lost.
 */

#include <sys/wait.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "pool-private.h"
#include "xmalloc.h"

#define POOL_MAX_ATTEMPTS	3	/* deaths or deadlines before blaming a row */
#define POOL_MAX_KILLS		10	/* kills from outside, unexplained */
/* A step's jobs (pool_job_rows()): images, a worker's; arrays' bytes. */
#define POOL_IMAGE_JOBS_PER_WORKER	4
#define POOL_JOB_MIN_BYTES	(4 * 1024 * 1024)

/* A job, its indices and all; NULL is a no-op. */
void
pool_job_free(struct job *job)
{
	if (job == NULL)
		return;
	if (job->twin != NULL)
		job->twin->twin = NULL;
	free(job->won);
	free(job->indices);
	free(job);
}

/* A job of rows [@begin, @end) of @job, with their indices. */
static struct job *
pool_job_part(const struct job *job, uint64_t begin, uint64_t end)
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
 * Whether @a goes before @b: an earlier step, or queued earlier, or (the
 * parts of one job) earlier rows.
 */
static bool
pool_job_before(const struct job *a, const struct job *b)
{
	return (a->seq < b->seq || (a->seq == b->seq && (a->queued <
	    b->queued || (a->queued == b->queued &&
	    a->row_begin < b->row_begin))));
}

/*
 * Queue @job in its ring's list, which is kept in the order its jobs go
 * out: by step (seq), then by the time queued, then by row, so that the
 * head is the ring's next (pool_next_job()).  A new job is placed from
 * the tail, a job requeued after a death (@again) from the head; each
 * walks past few, since a ring's steps are queued in order.  The parts of
 * a job go in row order, whichever death put them back: a row tried
 * before goes before the rows carved after it later (pool_requeue()), so
 * the row every try begins with is the one retried first, and a store
 * that stops answering is reported after POOL_MAX_ATTEMPTS job_timeouts,
 * not one a row.
 */
static void
pool_job_queue(struct pool *pool, struct pool_ring *pr, struct job *job,
    bool again)
{
	struct job	*q;

	if (again) {
		TAILQ_FOREACH(q, &pr->jobs, entry) {
			if (!pool_job_before(q, job))
				break;
		}
		if (q != NULL)
			TAILQ_INSERT_BEFORE(q, job, entry);
		else
			TAILQ_INSERT_TAIL(&pr->jobs, job, entry);
	} else {
		TAILQ_FOREACH_REVERSE(q, &pr->jobs, job_list, entry) {
			if (!pool_job_before(job, q))
				break;
		}
		if (q != NULL)
			TAILQ_INSERT_AFTER(&pr->jobs, q, job, entry);
		else
			TAILQ_INSERT_HEAD(&pr->jobs, job, entry);
	}
	pool->queued++;
}

/* Take a queued @job of ring @pr out of its queue. */
void
pool_job_unqueue(struct pool *pool, struct pool_ring *pr, struct job *job)
{
	TAILQ_REMOVE(&pr->jobs, job, entry);
	pool->queued--;
}

uint64_t
pool_job_rows(const struct pool *pool, uint64_t rows, uint64_t row_bytes,
    bool image)
{
	uint64_t	njobs = pool_size(pool);

	if (image)
		njobs *= POOL_IMAGE_JOBS_PER_WORKER;
	else if (rows * row_bytes / POOL_JOB_MIN_BYTES < njobs)
		njobs = rows * row_bytes / POOL_JOB_MIN_BYTES;
	if (njobs == 0)
		njobs = 1;
	return ((rows + njobs - 1) / njobs);
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
	pool_job_queue(pr->pool, pr, job, false);
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
	struct job	*job;

	while ((job = TAILQ_FIRST(&pr->jobs)) != NULL) {
		pool_job_unqueue(pr->pool, pr, job);
		pool_job_free(job);
	}
}

/* How many steps @pr's client takes before @job's. */
uint64_t
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
 * first step goes before another's second.  Each ring's queue is in that
 * order (pool_job_queue()): only its head is looked at, so a pick costs
 * the rings, not the queued jobs (16k for a 64 Mi-row step).  A job
 * tried before (its worker died or timed out: a store that stopped
 * answering) goes after the others of its depth, so one session's dead
 * store holds the other sessions' steps for one job_timeout, not one a
 * try.  A @spare worker takes no job of a ring whose store is blocked
 * (pool_ring_blocked()): it is there for the other sessions.
 * For a worker's queue (@behind, pool_dispatch()) a ring at its cap may
 * also go, while a running job of it has none behind.
 */
struct job *
pool_next_job(struct pool *pool, struct pool_ring **prp, bool spare,
    bool behind)
{
	struct pool_ring	*pr;
	struct job		*job, *best = NULL;
	uint64_t		 depth, since, best_depth = 0, best_since = 0;
	unsigned		 running;
	bool			 again, best_again = false;

	TAILQ_FOREACH(pr, &pool->rings, entry) {
		running = pr->inflight - pr->behind;
		if ((job = TAILQ_FIRST(&pr->jobs)) == NULL ||
		    (running >= pr->max_jobs && (!behind ||
		    pr->behind >= running)) ||
		    (spare && pool_ring_blocked(pr)))
			continue;
		depth = pool_job_depth(pr, job);
		again = job->attempts > 0 || job->kills > 0;
		since = depth == 0 && pr->delivered_at > job->queued ?
		    pr->delivered_at : job->queued;
		if (best == NULL || depth < best_depth || (depth ==
		    best_depth && (again < best_again || (again ==
		    best_again && since < best_since)))) {
			best = job;
			best_depth = depth;
			best_again = again;
			best_since = since;
			*prp = pr;
		}
	}
	return (best);
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
void
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
	pool_job_free(job);
}

/*
 * @job, sent to a worker that ended, is back: its ring, no longer
 * counting it in flight, with its rows counted as reissued; or NULL when
 * it goes no further (freed: its ring is gone, or removed and released
 * once its last job is back).
 */
static struct pool_ring *
pool_job_back(struct pool *pool, struct job *job)
{
	struct pool_ring	*pr;

	if ((pr = pool_find(pool, job->ring_id)) == NULL) {
		pool_job_free(job);
		return (NULL);
	}
	pr->inflight--;
	if (pr->removed) {
		pool_job_free(job);
		if (pr->inflight == 0)
			pool_ring_finish(pr);
		return (NULL);
	}
	pool->rows_reissued += job->row_end - job->row_begin;
	return (pr);
}

/*
 * Put back @job, sent to a worker that ended before it began it (queued
 * behind its running one): first of its step and depth, blaming nothing.
 */
void
pool_job_return(struct pool *pool, struct job *job)
{
	struct pool_ring	*pr;

	if ((pr = pool_job_back(pool, job)) != NULL)
		pool_job_queue(pool, pr, job, true);
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
void
pool_requeue(struct pool *pool, struct job *job, enum pool_job_result why,
    int sig, int status, bool counts, uint64_t row)
{
	struct pool_ring	*pr;
	struct job		*one, *before = NULL, *after = NULL;
	uint64_t		 r;
	bool			 retry;

	if ((pr = pool_job_back(pool, job)) == NULL)
		return;
	job->why = why;
	job->signal = sig;
	job->status = status;
	if (job->row_end - job->row_begin > 1 && (row < job->row_begin ||
	    row >= job->row_end)) {
		/* Find the row that kills workers: retry one row at a time. */
		for (r = job->row_end; r > job->row_begin; r--) {
			one = pool_job_part(job, r - 1, r);
			one->attempts = counts;
			one->kills = !counts;
			pool_job_queue(pool, pr, one, true);
		}
		pool_job_free(job);
		return;
	}
	if (job->row_end - job->row_begin > 1) {
		/* Queued in order: the rows before it, it, those after. */
		before = row > job->row_begin ? pool_job_part(job, job->row_begin,
		    row) : NULL;
		after = row + 1 < job->row_end ? pool_job_part(job, row + 1,
		    job->row_end) : NULL;
		one = pool_job_part(job, row, row + 1);
		pool_job_free(job);
		job = one;
	}
	retry = counts ? ++job->attempts < POOL_MAX_ATTEMPTS :
	    ++job->kills < POOL_MAX_KILLS;
	if (after != NULL)
		pool_job_queue(pool, pr, after, true);
	if (retry)
		pool_job_queue(pool, pr, job, true);
	if (before != NULL)
		pool_job_queue(pool, pr, before, true);
	if (retry)
		return;
	/* Reported last: its owner may drop the ring's jobs. */
	job->attempts = counts ? job->attempts : job->kills;
	pool_report(pr, job, 1, job->why, job->row_begin, 0, NULL);
	pool_job_free(job);
}

/*
 * The kernel's count of OOM kills so far, its own or a cgroup's
 * (oom_kill in /proc/vmstat, Linux 4.13), or UINT64_MAX when unknown.
 */
uint64_t
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
enum pool_job_result
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
void
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
 * The running job of the least depth that may be taken over now
 * (pool_takeover_due()), on a ring that is not removed; or NULL.
 */
struct worker *
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
int
pool_takeover(struct pool *pool, struct worker *w, struct pool_ring *pr,
    struct worker *from)
{
	struct job	*job = from->job, *copy;

	copy = pool_job_part(job, job->row_begin, job->row_end);
	copy->attempts = job->attempts;
	copy->kills = job->kills;
	if (pool_start_job(pool, w, pr, copy) == -1) {
		pool_job_free(copy);
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

/* Jobs waiting for a worker. */
unsigned
pool_jobs_queued(const struct pool *pool)
{
	return (pool->queued);
}

/* Rows handed to a worker again after the one reading them died. */
uint64_t
pool_rows_reissued(const struct pool *pool)
{
	return (pool->rows_reissued);
}
