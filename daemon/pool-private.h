/* SPDX-License-Identifier: MIT */
/*
 * The worker pool's own header: what its files share, and no other file
 * includes (tests/check-layers).  The pool is one layer (pool.h is its
 * contract); its files are one module and one unit, and call each other
 * freely, for the three subsystems are one another's callers: a worker's DONE ends a
 * job, which may finish a removed ring, which tells the workers to unmap
 * its memory; a job taken over kills a worker, and a worker's end
 * requeues its job.  The files, by subsystem:
 *
 *	pool.c	the pool made and freed, a reload, and dispatch: which
 *		idle worker runs which queued job, or takes over which
 *		stalled one
 *	pool-jobs.c	the jobs queued (each ring's in the order they
 *		go) and the pick, least depth first; a job's end and report,
 *		blame and requeue after a death, takeover twins and their fence
 *	pool-rings.c	the ring registry: rings added, removed and
 *		drained; MAP, UNMAP and FORGET; which ring memory workers
 *		keep mapped (pool_let_go())
 *	pool-workers.c	worker supervision: starting workers (through the
 *		fork server), sending to them, reading their answers,
 *		deadlines and liveness, their ends, respawn backoff, resizing;
 *		the fork server's lifecycle (its death, restart and reaping)
 *
 * Jobs name their ring by id, so a job still running when its ring goes
 * is simply dropped when it comes back.
 */
#ifndef INFEED_POOL_PRIVATE_H
#define INFEED_POOL_PRIVATE_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <event2/util.h>

#include "pool.h"
#include "transport.h"
#include "worker.h"

struct event;

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
	unsigned		 inflight;	/* sent to workers, not ended */
	unsigned		 behind;	/* ... of them queued on a worker
						   behind another (pool_dispatch()) */
	struct job_list		 jobs;		/* queued, in the order they go */
	bool			 removed;	/* draining: nothing is reported */
	struct ring		*ring;		/* removed: to release when done */
	bool			 keep;		/* ... keeping its memory */
	uint64_t		 delivered;	/* steps the client has had */
	uint64_t		 delivered_at;	/* pool->events when it changed */
	uint64_t		 blocked_ms;	/* a worker of it seen blocked in
						   its storage; 0: never */
	bool			*mapped;	/* per worker */
	pool_done_cb		*done;
	void			*arg;
	/*
	 * Indices of later steps to read ahead (pool_read_ahead()), a FIFO
	 * of POOL_AHEAD_MAX; they go with the next jobs (WORKER_MAX_JOB_AHEAD a
	 * job) for the worker to ask the kernel for, not to read itself.
	 */
	uint64_t		*ahead;
	unsigned		 ahead_head, ahead_n;
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
	struct job	*job;		/* running */
	struct job	*next;		/* sent, waiting behind it in its
					   socket: it begins as job ends */
	uint64_t	 next_id;	/* ... its job_id */
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
	bool		 spare;		/* a spare's slot (pool_spare_cb()) */
	uint64_t	 idle_ms;	/* a spare's last job's end */
	uint64_t	 charged;	/* a spare's, to memory_budget */
};

struct pool {
	struct event_base	*base;
	const struct catalogue	*cat;
	struct ring_budget	*budget;	/* what it keeps; or NULL */
	struct forker		*forker;	/* NULL: none up */
	/* pool_prepare()'s: called when the fork server has it open. */
	void			(*prepared_cb)(void *);
	void			*prepared_arg;
	bool			 prepared;	/* pool_reload() switches to it */
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
	unsigned		 n;		/* slots, the spares' too */
	unsigned		 max;		/* slots [0, max): the most it may
						   grow to; [max, n): spares */
	unsigned		 size;		/* slots [0, size) in use */
	struct event		*spare_ev;	/* pool_spare_cb() */
	uint64_t		 spares_started;
	char			 spare_why[192]; /* the last start's reason */
	bool			 spare_refused;	/* no room: logged, this spell */
	unsigned		 queued;	/* jobs in the rings' queues */
	struct pool_ring_list	 rings;
	uint64_t		 next_ring_id;
	uint64_t		 next_job_id;
	uint64_t		 oom_kills;	/* the kernel's count, last read */
	uint32_t		 job_timeout_ms;	/* per row */
	uint32_t		 ahead_steps;	/* read_ahead (config.h) */
	uint64_t		 ahead_bytes;
	uint64_t		 image_memory_max;
	struct worker_beat	*beats;		/* shared, one per worker */
	struct event		*retry_ev;	/* pool_dispatch() again */
	struct event		*behind_ev;	/* pool_dispatch_behind() */
	struct worker_msg_job	*jobmsg;	/* a JOB and its indices */
	struct worker_msg_done	*donemsg;	/* a DONE read */
	bool			 stopping;
	uint64_t		 rows_reissued;	/* after worker deaths */
	uint64_t		 events;	/* jobs queued and steps delivered */
};


/* pool-rings.c */
unsigned	 pool_read_ahead_take(struct pool_ring *pr, uint64_t *out,
		    unsigned max);

/* pool.c */
void		 pool_dispatch(struct pool *pool);
bool		 pool_ring_blocked(const struct pool_ring *pr);
int		 pool_start_job(struct pool *pool, struct worker *w,
		    struct pool_ring *pr, struct job *job);
void		 pool_worker_next(struct worker *w);

/* pool-jobs.c */
void		 pool_job_free(struct job *job);
void		 pool_job_unqueue(struct pool *pool, struct pool_ring *pr,
		    struct job *job);
uint64_t	 pool_job_depth(const struct pool_ring *pr,
		    const struct job *job);
struct job	*pool_next_job(struct pool *pool, struct pool_ring **prp,
		    bool spare, bool behind);
void		 pool_job_end(struct pool *pool, struct job *job,
		    const struct worker_msg_done *done);
void		 pool_job_return(struct pool *pool, struct job *job);
void		 pool_requeue(struct pool *pool, struct job *job,
		    enum pool_job_result why, int sig, int status, bool counts,
		    uint64_t row);
uint64_t	 pool_oom_kills(void);
enum pool_job_result pool_blame(struct pool *pool, const struct worker *w,
		    int status, int *sig, int *code, bool *counts);
void		 pool_fence(struct pool *pool, struct job *loser,
		    const struct worker_msg_done *won);
struct worker	*pool_stalled(struct pool *pool, struct pool_ring **prp);
int		 pool_takeover(struct pool *pool, struct worker *w,
		    struct pool_ring *pr, struct worker *from);

/* pool.c */
void		 pool_spare_uncharge(struct worker *w);

/* pool-rings.c */
struct pool_ring *pool_find(struct pool *pool, uint64_t id);
int		 pool_map_ring(struct pool *pool, struct worker *w,
		    struct pool_ring *pr);
void		 pool_ring_finish(struct pool_ring *pr);
void		 pool_ring_free(struct pool_ring *pr);

/* pool-workers.c */
extern const struct transport_events pool_forker_events;
int		 pool_send(struct worker *w, void *m, size_t len,
		    uint32_t type, const int *fds, size_t nfds);
int		 pool_spawn(struct pool *pool, struct worker *w);
void		 pool_arm_deadline(struct worker *w);
bool		 pool_takeover_due(struct worker *w, uint64_t now);
void		 pool_worker_look(struct worker *w, uint64_t now);
void		 pool_retire(struct worker *w);
void		 pool_worker_respawn_cb(evutil_socket_t fd, short ev,
		    void *arg);
void		 pool_forker_read(struct pool *pool);
/* The fork server has pool_prepare()'s catalogue open (@open) or died. */
void		 pool_prepared(struct pool *pool, bool open);
void		 pool_forker_watch(struct pool *pool);
void		 pool_forker_check_cb(evutil_socket_t fd, short ev, void *arg);
void		 pool_forker_restart_cb(evutil_socket_t fd, short ev,
		    void *arg);
void		 pool_chld_cb(evutil_socket_t sig, short ev, void *arg);
void		 pool_stop_adopted(struct pool *pool, uint64_t stop_ms);

#endif /* INFEED_POOL_PRIVATE_H */
