/* SPDX-License-Identifier: MIT */
/*
 * Sessions: one attached trainer's view of a dataset.  A session owns a
 * sampler (which index goes in which row of which step), a step ring and
 * its registration with the worker pool, and answers Next requests in
 * order as steps become ready.
 *
 * A session never sends anything: it reports each answer (a step, the end
 * of an epoch, an error) through the events its owner registered, tagged
 * with the request it answers.  Its states and their transitions:
 *
 *   IDLE --Next or early_preload--> FILLING --last step of the epoch
 *   queued, load_indefinitely off--> EPOCH_END --EndOfData sent--> IDLE
 *   any --a sample could not be read--> FAILED (every Next gets the error)
 */
#ifndef INFEED_SESSION_H
#define INFEED_SESSION_H

#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>

#include "catalogue.h"
#include "pool.h"
#include "ring.h"
#include "wire.h"

struct session;

/* The request a Next answer belongs to (the client's request_id). */
struct session_req {
	uint64_t	id;
	bool		has_id;
};

/* A delivered step: the slot now belongs to the client. */
struct session_step {
	uint32_t	slot;
	uint64_t	epoch;
	uint64_t	step;
	uint64_t	rows;
};

/* How a session answers Next requests; called from any session_* call. */
struct session_events {
	void	(*step)(void *arg, struct session_req,
		    const struct session_step *);
	void	(*end_of_data)(void *arg, struct session_req, uint64_t epoch);
	void	(*error)(void *arg, struct session_req, Infeed__ErrorCode,
		    const char *message);
};

/* What a session needs from the daemon. */
struct session_host {
	const struct catalogue	*cat;
	struct pool		*pool;
	struct ring_budget	*budget;
	const char		*config_path;	/* for messages */
};

/* Who attaches, for access control and logs. */
struct session_client {
	uint64_t	 peer_id;
	pid_t		 pid;
	uid_t		 uid;
	gid_t		 gid;
};

/**
 * session_new() - attach to a dataset: check the client's access and
 * options, make the sampler, the ring and its pool registration.
 * Return: the session, or NULL with *@code and *@cause (malloc'd) set.
 */
struct session	*session_new(const struct session_host *host,
		    const struct session_client *client,
		    const Infeed__Attach *a, const struct session_events *ev,
		    void *arg, Infeed__ErrorCode *code, char **cause);

/**
 * session_new_files() - session_new() for an Attach with files: the
 * client's files, whose @nfds descriptors @fds came with the frame (data,
 * then labels), are the session's own dataset; a->dataset only names it.
 * The descriptors are taken over (closed on failure too); the dataset,
 * and with it every copy of them, goes with the session.
 */
struct session	*session_new_files(const struct session_host *host,
		    const struct session_client *client,
		    const Infeed__Attach *a, int *fds, size_t nfds,
		    const struct session_events *ev, void *arg,
		    Infeed__ErrorCode *code, char **cause);

/*
 * Attach as infeedd does it, never blocking its event loop: the checks of
 * what the client controls (its files' fstat and headers, its groups for
 * allow_groups) run on helper threads, bounded in number and in time
 * (common/infeed-limits.h), and a ring that wants memory a removed ring
 * still holds waits for it on a timer (POOL_SETTLE_MS at most).
 */
struct event_base;
struct session_checks;
struct session_pending;

/* A pending Attach's checks ended: call session_attach_end() now. */
typedef void	session_checked_cb(void *arg);

/**
 * session_checks_new() - the helper threads' state, on @base; @pool is
 * asked whether removed rings still settle.  session_checks_free() gives
 * up every pending Attach (no callback) and frees what it can; threads
 * that have not returned free their own jobs when they do.
 */
struct session_checks *session_checks_new(struct event_base *base,
		    struct pool *pool);
void		 session_checks_free(struct session_checks *sc);

/*
 * Attach requests that wait for their checks or for ring memory, and
 * given-up checks whose threads have not returned yet.
 */
unsigned	 session_checks_pending(const struct session_checks *sc);

/**
 * session_attach_begin() - begin Attach @a, with the @nfds descriptors
 * @fds of its frame.
 * Return: 0 when nothing needs waiting for: make the session now with
 * session_new_files() (the descriptors are still the caller's); 1 when
 * they were taken over and the checks go on: @cb(@arg) comes later from
 * the loop (never from within this call), then call session_attach_end()
 * with *@out; or -1, refused at once (too many checks out), with *@code
 * and *@cause set and the descriptors closed.
 */
int		 session_attach_begin(struct session_checks *sc,
		    const struct session_host *host,
		    const struct session_client *client,
		    const Infeed__Attach *a, int *fds, size_t nfds,
		    session_checked_cb *cb, void *arg,
		    struct session_pending **out, Infeed__ErrorCode *code,
		    char **cause);

/**
 * session_attach_end() - once @p's callback came: make its session with
 * @host as it is now (a reload may have come meanwhile), or say why not,
 * as session_new() does.  @p is freed.
 */
struct session	*session_attach_end(struct session_pending *p,
		    const struct session_host *host,
		    const struct session_events *ev, void *arg,
		    Infeed__ErrorCode *code, char **cause);

/* The dataset name (or files session name) pending Attach @p asks for. */
const char	*session_pending_name(const struct session_pending *p);

/**
 * session_attach_cancel() - the client went away while @p waited: free it,
 * without a callback; a thread still checking its files is given up.
 */
void		 session_attach_cancel(struct session_pending *p);

/**
 * session_free() - end the session: unregister and free the ring.  Next
 * requests still waiting are dropped silently; use session_cancel()
 * first to answer them.  NULL is a no-op.
 */
void		 session_free(struct session *s);

/**
 * session_next() - a Next request: answered now or later through the
 * events.  Return: 0, or -1 with *@code and *@cause when refused at once
 * (every slot held, or too many Next requests waiting).
 */
int		 session_next(struct session *s, struct session_req req,
		    Infeed__ErrorCode *code, char **cause);

/**
 * session_release() - the client gave slot @slot back.
 * Return: 0, or -1 with *@cause when the slot is not held.
 */
int		 session_release(struct session *s, uint32_t slot,
		    char **cause);

/**
 * session_cancel() - answer every waiting Next with an error @code and
 * @message through the error event.
 */
void		 session_cancel(struct session *s, Infeed__ErrorCode code,
		    const char *message);

/**
 * session_reload() - after a reload: find our dataset in @cat.
 * Return: 0 to go on, -1 when the dataset changed or went.
 */
int		 session_reload(struct session *s, const struct catalogue *cat);

/**
 * session_fill_attached() - the Attached reply; pointers borrow from @s.
 */
void		 session_fill_attached(const struct session *s,
		    Infeed__Attached *at);

/**
 * session_fill_stats() - the session's part of GetStats; pointers borrow
 * from @s.
 */
void		 session_fill_stats(const struct session *s,
		    Infeed__SessionStats *ss);

/**
 * session_ring_fd() - a new read-only descriptor of the step ring, for the
 * client; -1 with errno set on failure.
 */
int		 session_ring_fd(const struct session *s);

uint64_t	 session_id(const struct session *s);
uint64_t	 session_rows_delivered(const struct session *s);

/* Buckets of the per-Next wait histogram: the bounds, then +Inf. */
#define SESSION_WAIT_BUCKETS	9
extern const double	session_wait_bounds[SESSION_WAIT_BUCKETS - 1];

/* What a session delivered and how long its client waited, for metrics. */
struct session_totals {
	const char	*dataset;
	bool		 own_files;	/* the client's files, not the catalogue */
	uint64_t	 steps;
	uint64_t	 rows;
	uint64_t	 bytes_read;	/* from the dataset, by the workers */
	uint64_t	 samples_replaced; /* bad ones, by others (bad_samples) */
	uint64_t	 data_wait_us;
	uint64_t	 active_us;
	uint64_t	 wait_counts[SESSION_WAIT_BUCKETS];
};

/**
 * session_totals() - what @s delivered so far, and its waits.
 */
void		 session_totals(const struct session *s,
		    struct session_totals *t);

/**
 * session_data_wait() - microseconds the client waited in Next with no
 * step ready (*@wait_us), and since its first Next (*@active_us).
 */
void		 session_data_wait(const struct session *s, uint64_t *wait_us,
		    uint64_t *active_us);
const char	*session_dataset_name(const struct session *s);

#endif /* INFEED_SESSION_H */
