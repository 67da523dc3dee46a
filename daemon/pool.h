/* SPDX-License-Identifier: MIT */
/*
 * The worker pool, the daemon's side: worker processes, forked by the
 * fork server (forker.h) that it starts before the daemon takes any
 * client, a queue of jobs (a range of rows of one slot of one ring), and
 * restarts.
 *
 * A session registers its ring with pool_add_ring() and a callback; every
 * job it submits is reported back through that callback when its rows are
 * written, could not be read (or had a label too large for int32 labels),
 * or killed workers three times.  The pool
 * never looks a session up and knows nothing of clients.
 *
 * A worker that dies is replaced and its job re-issued.  Every death while
 * running a job counts against it: a crash signal, an exit with a status
 * (fatal()), a SIGKILL from outside (the OOM killer), or no row done
 * within job_timeout (the worker is then killed and replaced: the
 * deadline is per row, so a long job of slow rows is not stuck).  Such a
 * job is split into single rows, and a row that fails so three times is
 * reported as POOL_JOB_CRASHED or POOL_JOB_STUCK: the session ends with
 * an answer, never a retry for ever.  A dead worker is started again
 * after a backoff, 10 ms doubling to 1 s with each death until it
 * finishes a job, so that a crash loop does not spin.  No send to a
 * worker blocks: a worker whose socket is full is stuck and killed.
 *
 * The fork server dying costs no worker: its workers, reparented to the
 * daemon (a child subreaper), serve on and are reaped by the pool, and a
 * new fork server is started (pool_forker_restarts()), at once, or
 * after the same backoff when they keep dying; workers to start meanwhile
 * are asked of it.
 *
 * Takeover: a worker that begins no row of its job, uses no CPU and is
 * not waiting for one for POOL_TAKEOVER_MS (1 s; stopped, or waiting in
 * the kernel for a store that hiccups; one that is only runnable on a
 * loaded machine is not taken over) holds its client for no longer when another worker is
 * idle: that one runs the same job again, and the first DONE of the two
 * is the job's result.  Exactly once: the two copies are linked, and the
 * job is reported once, with the first DONE; the other copy's DONE or
 * death is dropped, blaming nothing.  The fence: the copy that lost is
 * killed (SIGKILL) at once, and the first DONE is reported only once that
 * copy's worker is quiet: its own DONE (sent after its last write) or its
 * end, known once it is reaped (by the fork server, or by the pool for a
 * worker whose fork server died).  A killed process runs no more of its
 * code and a reaped one has no mapping left, so no row of the loser, even
 * one half written when it stopped, lands in the slot after it is handed
 * out (the client sees the slot only after the report) and refilled;
 * until then the job counts as running, so the ring's memory is not
 * released or reused either.  A stopped process
 * dies of SIGKILL at once; one in an uninterruptible wait dies when the
 * wait ends, and the report waits for that (as job_timeout's kill does).
 * A job is taken over once (a copy that dies leaves the other running,
 * under job_timeout); with no idle worker it waits for one, before queued
 * jobs further from their client; a pool of one worker cannot take over,
 * and a stopped worker holds its job until job_timeout kills it.  Nor
 * does a job_timeout of POOL_TAKEOVER_MS or less, which kills first.
 *
 * Spares: a worker that begins no row, uses no CPU and is not runnable
 * for POOL_SPARE_MS is blocked in its storage (a store that stopped
 * answering, or one worker stopped).  While such workers leave none idle
 * and another session's job waits, the pool starts spare workers (one
 * for each ring with a job waiting that a spare may take, together, and
 * one for each blocked worker, POOL_SPARES_MAX at most, in slots beside
 * pool_max()'s, so the descriptors and memory they cost are bounded
 * too), which take only jobs of rings that no blocked worker serves and
 * no job runs of (a ring's jobs one at a time: a ring whose remote
 * server fails, not yet seen blocked, holds one spare at most), never a
 * takeover: the other sessions are served within a worker's
 * start, not a job_timeout, and the blocked session's jobs wait for
 * job_timeout as before.  A spare runs only queued jobs, which no other
 * worker holds, so exactly once is untouched.  Spares are not started
 * again when they end, and go once idle for POOL_SPARE_KEEP_MS with no
 * worker blocked.  Status lists them (state "spare"), /metrics counts
 * them and the log says why each started.  A spare is charged to
 * memory_budget before it starts, as much as the workers up take on
 * average (POOL_WORKER_MIN_BYTES at least), and given back when it ends;
 * with no room for it none starts, and the log says so.
 */
#ifndef INFEED_POOL_H
#define INFEED_POOL_H

#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>

#include "catalogue.h"
#include "forker.h"
#include "ring.h"
#include "stats-schema.h"
#include "transform.h"

#define POOL_STOP_MS		FORKER_STOP_MS	/* SIGTERM to SIGKILL */
#define POOL_SETTLE_MS		100	/* an Attach waits for removed rings' jobs */
#define POOL_TAKEOVER_MS	1000	/* a job that long without progress */
#define POOL_SPARE_MS		50	/* blocked in storage: a spare may start */
#define POOL_SPARE_KEEP_MS	1000	/* a spare idle that long goes */
#define POOL_SPARES_MAX		2	/* beside the workers */
#define POOL_WORKER_MIN_BYTES	(16ULL << 20)	/* a worker's memory, at least */
#define POOL_AHEAD_MAX		16384	/* indices a ring reads ahead, queued */

struct event_base;
struct pool;
struct pool_ring;

enum pool_job_result {
	POOL_JOB_DONE,		/* every row written */
	POOL_JOB_READ_ERROR,	/* dataset index @bad could not be read */
	POOL_JOB_CRASHED,	/* row @bad killed workers three times */
	POOL_JOB_STUCK,		/* row @bad missed the deadline three times */
	POOL_JOB_LABEL_RANGE,	/* index @bad's @label does not fit in int32 */
	POOL_JOB_INTERNAL,	/* the worker failed, not the data: @reason */
};

/* A job of a ring finished: @rows rows of @slot are accounted for. */
struct pool_report {
	uint32_t		slot;
	uint64_t		rows;
	enum pool_job_result	result;
	uint64_t		bad;	/* the index, or the row for CRASHED */
	int			signal;	/* CRASHED: the last death's signal */
	int			status;	/* CRASHED, signal 0: its exit status */
	unsigned		deaths;	/* CRASHED, STUCK: how many */
	int64_t			label;	/* LABEL_RANGE: the label */
	const char		*reason; /* READ_ERROR, INTERNAL: why, or "" */
	const char		*where;	/* READ_ERROR: the sample's file, or "" */
	uint32_t		replaced; /* bad samples replaced by others */
	uint64_t		bytes;	/* read from the dataset */
};
typedef void	pool_done_cb(void *arg, const struct pool_report *report);

/* One worker, for status. */
struct pool_worker_info {
	pid_t		 pid;		/* -1 while restarting */
	const char	*state;		/* starting, idle, busy, stuck,
					   taken-over (being killed: its job
					   was done first by another), retiring,
					   restarting */
	/* busy_s, rows_done, restarts, stuck, taken_over (stats-schema.h) */
#define POOL_WORKER_FIELD(name, type, ...)	type name;
	INFEED_WORKER_STATS_DAEMON(POOL_WORKER_FIELD)
	INFEED_WORKER_STATS(POOL_WORKER_FIELD)
#undef POOL_WORKER_FIELD
};

/**
 * pool_new() - start the fork server, which holds @cat (and no client),
 * and have it fork @workers processes that read from @cat; they are up
 * when it returns (fatal when they cannot be).  The pool may grow to
 * @max_workers (pool_grow(); less than @workers: it stays at @workers).  Workers keep their
 * mappings of ring memory that @budget keeps (may be NULL: none) for the
 * next ring on it (see pool_let_go()).  A worker that does no row of its
 * job within @job_timeout_ms is killed and replaced.  Workers refuse an
 * image that needs more than @image_memory_max bytes to decode.
 */
struct pool	*pool_new(struct event_base *base, const struct catalogue *cat,
		    struct ring_budget *budget, unsigned workers,
		    unsigned max_workers, uint32_t job_timeout_ms,
		    uint64_t image_memory_max);

/**
 * pool_free() - stop the workers (SIGTERM, then SIGKILL from the fork
 * server for any still there after POOL_STOP_MS), and the fork server,
 * and free the pool; NULL is a no-op.
 */
void		 pool_free(struct pool *pool);

/**
 * pool_add_ring() - register a ring on @mem whose slots the workers fill
 * from dataset @dataset_index through @tf; the pool keeps its own copy of
 * the memfd.  At most @max_jobs of its jobs run at once (0: the whole
 * pool).
 * Return: the registration, or NULL with *@cause set.
 */
struct pool_ring *pool_add_ring(struct pool *pool, uint32_t dataset_index,
		    const struct ring_layout *layout,
		    const struct transform *tf, const struct ring_mem *mem,
		    unsigned max_jobs, pool_done_cb *done, void *arg,
		    char **cause);

/**
 * pool_set_read_ahead() - read_ahead (config.h): the steps past the ring
 * a producer reads ahead, and their bytes at most.
 */
void		 pool_set_read_ahead(struct pool *pool, uint32_t steps,
		    uint64_t bytes);

/**
 * pool_read_ahead_steps() - how many steps of @step_rows rows and
 * @step_bytes bytes @pr's producer may read ahead of its ring: read_ahead
 * within its bytes, an eighth of memory_budget and POOL_AHEAD_MAX rows.
 */
uint64_t	 pool_read_ahead_steps(const struct pool_ring *pr,
		    uint64_t step_rows, uint64_t step_bytes);

/**
 * pool_read_ahead() - the dataset indices @idx of a later step, to be
 * read ahead: they go with @pr's next jobs, and the worker asks the
 * kernel for their bytes (posix_fadvise WILLNEED: into the page cache,
 * not the ring) before it waits for its job's own reads.
 * Return: false, queuing none, when POOL_AHEAD_MAX would be passed.
 */
bool		 pool_read_ahead(struct pool_ring *pr, const uint64_t *idx,
		    uint64_t n);

/**
 * pool_ring_files() - the ring's dataset is @ds, a client's files opened
 * by dataset_open_files() from @spec: the pool keeps its own copies of
 * their descriptors and sends them with the ring to every worker (a
 * restarted one too), which opens the dataset from them; they are closed
 * with the ring.  Call it before the ring's first pool_submit().
 * Return: 0, or -1 with *@cause set.
 */
int		 pool_ring_files(struct pool_ring *pr,
		    const struct dataset_files *spec, const struct dataset *ds,
		    char **cause);

/**
 * pool_remove_ring() - drop the ring's queued jobs, tell the workers and
 * forget it once the jobs they are running are done (unreported), without
 * waiting for them: then ring_release(@r, @keep), which the pool takes
 * over (a worker may write @r's memory until then, so it is not given to
 * another ring before).  The workers keep their mappings of the memory
 * while the budget keeps it (pool_let_go()).  A NULL @pr releases @r at
 * once.
 */
void		 pool_remove_ring(struct pool_ring *pr, struct ring *r,
		    bool keep);

/**
 * pool_settling() - whether a worker runs a job of a removed ring, whose
 * memory is released (and kept for reuse) once it ends: an Attach waits
 * for that on the loop (POOL_SETTLE_MS at most), so that a trainer
 * started again finds its warm memory.
 */
bool		 pool_settling(struct pool *pool);

/**
 * pool_let_go() - every worker unmaps the ring memory it maps that no
 * ring of the pool is on and the budget does not keep (given up, held
 * for a client, or freed).  The pool does so itself whenever a ring is
 * added or released; the daemon after ring_budget_trim().  The budget
 * calls nobody: this asks it.
 */
void		 pool_let_go(struct pool *pool);

/**
 * pool_forget_mem() - every worker unmaps ring memory @mem_id now.
 */
void		 pool_forget_mem(struct pool *pool, uint64_t mem_id);

/**
 * pool_job_rows() - rows a job at most of a step of @rows rows of
 * @row_bytes each (@image: decoded images): a step is cut so that every
 * worker gets some.  Each job costs a JOB and a DONE, a wake-up on each
 * side, so arrays go in one job a worker, each of 4 MiB at least (a
 * worker done first takes the next step's job, so the step's halves need
 * not be finer to keep both busy); images, whose rows cost their decoding
 * whatever their size and vary, in 4 a worker, so that the workers even
 * out within a step.
 */
uint64_t	 pool_job_rows(const struct pool *pool, uint64_t rows,
		    uint64_t row_bytes, bool image);

/**
 * pool_submit() - queue rows [@begin, @end) of slot @slot, a step of
 * @epoch (random transforms draw from it) that is the ring's @seq-th in
 * the order its client takes them; @indices are their dataset indices
 * (copied: the workers get them from the pool, never from the ring,
 * which the client can see).  Workers take first the queued jobs of the
 * least depth, how many steps the client takes before theirs (@seq less
 * what pool_ring_delivered() last said), and among those the one that has
 * been at that depth longest: with many sessions, every client's next
 * step comes before any client's steps further ahead, in the order they
 * became next (every first step before a second), and none waits for
 * ever.  A job sent behind a busy worker's running one while one ring
 * was served (pool_dispatch_behind()) is the exception: a session's job
 * that comes later waits for that worker's two, one job more at most.
 */
void		 pool_submit(struct pool_ring *pr, uint32_t slot,
		    uint64_t epoch, uint64_t seq, uint64_t begin,
		    uint64_t end, const uint64_t *indices);

/**
 * pool_ring_delivered() - the ring's client has had every step before
 * the @next_seq-th: its queued jobs are that much nearer.
 */
void		 pool_ring_delivered(struct pool_ring *pr, uint64_t next_seq);

/**
 * pool_drop_jobs() - drop the ring's queued jobs; running ones finish.
 */
void		 pool_drop_jobs(struct pool_ring *pr);

/**
 * pool_ring_set_dataset() - the ring's dataset moved in the catalogue.
 */
void		 pool_ring_set_dataset(struct pool_ring *pr,
		    uint32_t dataset_index);

/**
 * pool_prepare() - before pool_reload(@cat): the fork server opens @cat's
 * datasets beside its own (forker_prepare()) while the workers serve the
 * old ones, and @cb(@arg) is called on the loop once it has (at once
 * without a fork server; also when the fork server dies meanwhile, whose
 * successor is sent the catalogue pool_reload() gives).  So a catalogue
 * that takes seconds to open (remote tar shards) holds no worker back.
 */
void		 pool_prepare(struct pool *pool, const struct catalogue *cat,
		    void (*cb)(void *), void *arg);

/**
 * pool_prepare_cancel() - infeedd stops with a pool_prepare() under way:
 * its callback is not called.
 */
void		 pool_prepare_cancel(struct pool *pool);

/**
 * pool_reload() - the daemon reloaded its configuration into @cat: the
 * fork server opens its datasets again (forker_reload(), which sends it
 * their sections; after pool_prepare(), forker_switch() to those open)
 * and every worker is replaced once idle, so that new ones inherit them;
 * a retired worker that has not gone after POOL_STOP_MS is killed.  Jobs
 * from now on have @job_timeout_ms, and new workers @image_memory_max.
 */
void		 pool_reload(struct pool *pool, const struct catalogue *cat,
		    uint32_t job_timeout_ms, uint64_t image_memory_max);

/**
 * pool_forker_restarts() - a fork server that dies is started again
 * (after a backoff when they keep dying) from infeedd's own binary
 * (/proc/self/exe, opened now) and sent the catalogue the pool has now
 * (pool_reload() changes it); the workers go on serving meanwhile.
 * Only infeedd calls it: in a process that does not, a dead fork server
 * is not replaced (and workers that die then are not either).
 */
void		 pool_forker_restarts(struct pool *pool);

/**
 * pool_forker_info() - the fork server's pid (-1 while none is up) and
 * how many times it was started again.
 */
void		 pool_forker_info(const struct pool *pool, pid_t *pid,
		    unsigned *restarts);

/*
 * Resizing (workers = auto, autotune.h decides): pool_grow() starts a
 * worker in the next slot, up to pool_max(); pool_shrink() retires the
 * last slot's worker once its running job is done (it takes no other
 * meanwhile, and a job it dies in goes back to the queue, so nothing is
 * lost or done twice), and does not replace it.  pool_shrink() refuses
 * (-1) while a worker starts or retires (pool_resizing()), pool_grow()
 * while one retires (several may start at once); both at the bounds
 * (pool_max(), 1 worker).
 */
int		 pool_grow(struct pool *pool);
int		 pool_shrink(struct pool *pool);
bool		 pool_resizing(const struct pool *pool);
unsigned	 pool_max(const struct pool *pool);
/* Workers' time in jobs since the pool started, the retired ones' too. */
uint64_t	 pool_busy_us(const struct pool *pool);

/* Workers in use, one that pool_shrink() retires too. */
unsigned	 pool_size(const struct pool *pool);
/* No job queued or running, and every worker up. */
bool		 pool_idle(const struct pool *pool);
unsigned	 pool_jobs_queued(const struct pool *pool);
/* Rows handed to a worker again after the one reading them died. */
uint64_t	 pool_rows_reissued(const struct pool *pool);
/*
 * Worker @i: [0, pool_size()) the pool's, then the spares up
 * (pool_spares()), whose state reads "spare" (idle or busy).
 */
void		 pool_worker_info(const struct pool *pool, unsigned i,
		    struct pool_worker_info *info);
/*
 * pool_spares() - the spare workers up: while every worker is blocked in
 * a store that does not answer, a spare serves the other sessions' jobs
 * (POOL_SPARES_MAX of them at most).  Sets how many were started in all,
 * and why the last one was ("" before any).
 */
unsigned	 pool_spares(const struct pool *pool, uint64_t *started,
		    const char **why);

#endif /* INFEED_POOL_H */
