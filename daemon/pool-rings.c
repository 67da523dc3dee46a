/* SPDX-License-Identifier: MIT */
/*
 * The pool's rings (see pool.h, pool-private.h): the registry of rings
 * added, removed and draining until their running jobs end; the MAP a
 * worker gets before its first job of a ring, UNMAP when the ring goes,
 * FORGET for ring memory no ring is on and the budget does not keep.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pool-private.h"
#include "xmalloc.h"

/* The pool's record of a ring. */
struct pool_ring *
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

/* Close and free what the pool keeps of a ring. */
void
pool_ring_free(struct pool_ring *pr)
{
	uint32_t	i;

	close(pr->memfd);
	for (i = 0; i < pr->desc.nfiles; i++)
		close(pr->files[i]);
	free(pr->mapped);
	free(pr->ahead);
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
	TAILQ_INIT(&pr->jobs);
	pr->done = done;
	pr->arg = arg;
	TAILQ_INSERT_TAIL(&pool->rings, pr, entry);
	/* The ring may have made room by giving kept memory up. */
	pool_let_go(pool);
	return (pr);
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

/* A ring's dataset moved to another catalogue index. */
void
pool_ring_set_dataset(struct pool_ring *pr, uint32_t dataset_index)
{
	pr->desc.dataset_index = dataset_index;
}

/*
 * Send worker @w ring @pr's MAP, its memory and files, unless it has had
 * it.  Return: 0, or -1 when it could not go.
 */
int
pool_map_ring(struct pool *pool, struct worker *w, struct pool_ring *pr)
{
	struct worker_msg_map	m;
	unsigned		j;
	int			fds[WORKER_MAX_FDS];

	if (pr->mapped[w->idx])
		return (0);
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
	return (0);
}

/* A removed ring's last job is done: release its memory, forget it. */
void
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
		if (w->t == NULL)
			continue;
		if (w->job != NULL && (pr = pool_find(pool,
		    w->job->ring_id)) != NULL && pr->removed)
			return (true);
		if (w->next != NULL && (pr = pool_find(pool,
		    w->next->ring_id)) != NULL && pr->removed)
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

/*
 * The steps of @step_bytes that @pr's producer reads ahead: read_ahead's
 * steps, within its bytes and an eighth of memory_budget (the pages are
 * the page cache's, but the host's memory all the same), and what the
 * FIFO holds.
 */
uint64_t
pool_read_ahead_steps(const struct pool_ring *pr, uint64_t step_rows,
    uint64_t step_bytes)
{
	const struct pool	*pool = pr->pool;
	uint64_t		 steps = pool->ahead_steps, bytes;

	if (step_rows == 0 || step_bytes == 0)
		return (0);
	bytes = pool->ahead_bytes;
	if (pool->budget != NULL && pool->budget->limit / 8 < bytes)
		bytes = pool->budget->limit / 8;
	if (bytes / step_bytes < steps)
		steps = bytes / step_bytes;
	if (POOL_AHEAD_MAX / step_rows < steps)
		steps = POOL_AHEAD_MAX / step_rows;
	return (steps);
}

/*
 * Queue the @n indices @idx (a later step's) to be read ahead with @pr's
 * next jobs; false, queuing none, when the FIFO has no room for them.
 */
bool
pool_read_ahead(struct pool_ring *pr, const uint64_t *idx, uint64_t n)
{
	uint64_t	i;

	if (pr->ahead_n + n > POOL_AHEAD_MAX)
		return (false);
	if (pr->ahead == NULL)
		pr->ahead = xcalloc(POOL_AHEAD_MAX, sizeof(*pr->ahead));
	for (i = 0; i < n; i++)
		pr->ahead[(pr->ahead_head + pr->ahead_n++) % POOL_AHEAD_MAX] =
		    idx[i];
	return (true);
}

/* Take up to @max indices to read ahead into @out; how many. */
unsigned
pool_read_ahead_take(struct pool_ring *pr, uint64_t *out, unsigned max)
{
	unsigned	n = 0;

	while (n < max && pr->ahead_n > 0) {
		out[n++] = pr->ahead[pr->ahead_head];
		pr->ahead_head = (pr->ahead_head + 1) % POOL_AHEAD_MAX;
		pr->ahead_n--;
	}
	return (n);
}

/* read_ahead's steps and bytes (config.h), from the next step on. */
void
pool_set_read_ahead(struct pool *pool, uint32_t steps, uint64_t bytes)
{
	pool->ahead_steps = steps;
	pool->ahead_bytes = bytes;
}
