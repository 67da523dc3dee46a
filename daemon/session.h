/* SPDX-License-Identifier: MIT */
/*
 * Sessions: one attached trainer's view of a dataset, the front that
 * peer.c calls.  A session judges its Attach (session-check.h) and is one
 * reader (consumer.h) of one stream (producer.h): its own, a lone
 * session's, or its shared group's (group.h), one producer read by
 * several sessions.  It answers Next requests in order as steps become
 * ready.
 *
 * A session never sends anything: it reports each answer (a step, the end
 * of an epoch, an error) through the events its owner registered, tagged
 * with the request it answers.  Its stream's states and their
 * transitions:
 *
 *   IDLE --Next or early_preload--> FILLING --last step of the epoch
 *   queued, load_indefinitely off--> EPOCH_END --EndOfData sent--> IDLE
 *   any --a sample could not be read--> FAILED (every Next gets the error)
 *
 * Shared groups (LoaderOptions.share): see group.h.  A member that falls
 * behind its group leaves it for a ring of its own (Step.new_ring), or is
 * ended when the budget has no room for one; it rejoins once it caught up.
 */
#ifndef INFEED_SESSION_H
#define INFEED_SESSION_H

#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>

#include "consumer.h"
#include "errcode.h"
#include "session-check.h"

struct session;

/**
 * session_new() - attach to a dataset: judge the Attach (session_check():
 * @fds, @nfds and @chk as it takes them; @chk NULL when no helper thread
 * looked at it), then make the sampler, the ring and its pool
 * registration, or join a shared group; with @host as it is now (a reload
 * may have come while a helper thread checked).  Client files' dataset,
 * and with it every copy of their descriptors, goes with the session.
 * Return: the session, or NULL with *@code and *@cause (malloc'd) set.
 */
struct session	*session_new(const struct session_host *host,
		    const struct session_client *client,
		    const struct session_attach *a, int *fds, size_t nfds,
		    struct session_checked *chk,
		    const struct session_events *ev, void *arg,
		    enum errcode *code, char **cause);

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
		    enum errcode *code, char **cause);

/**
 * session_release() - the client gave slot @slot back.
 * Return: 0, or -1 with *@cause when the slot is not held.
 */
int		 session_release(struct session *s, uint32_t slot,
		    char **cause);

/**
 * session_detaching() - the client detaches having read @received Steps
 * of this session: the one sent past those, if any, is released.
 */
void		 session_detaching(struct session *s, uint64_t received);

/**
 * session_cancel() - answer every waiting Next with an error @code and
 * @message through the error event.
 */
void		 session_cancel(struct session *s, enum errcode code,
		    const char *message);

/**
 * session_reload() - after a reload: find our dataset in @cat.
 * Return: 0 to go on, -1 when the dataset changed or went.
 */
int		 session_reload(struct session *s, const struct catalogue *cat);

/* What the Attached reply says of a new session. */
struct session_info {
	uint64_t		 id;
	uint64_t		 combined_batch_size;
	uint64_t		 steps_per_epoch;
	uint64_t		 last_step_rows;
	uint64_t		 start_epoch_steps;	/* elastic: its own */
	uint64_t		 start_epoch_last_step_rows;
	struct ring_layout	 layout;
	uint32_t		 sample_dims;
	const uint64_t		*sample_shape;	/* borrowed */
	enum infeed_dtype	 data_dtype;
	uint64_t		 sample_bytes;
	uint64_t		 group_id;	/* 0: not in a shared group */
};

/**
 * session_describe() - the Attached reply's facts; pointers borrow from @s.
 */
void		 session_describe(const struct session *s,
		    struct session_info *info);

/**
 * session_ring_fd() - a new read-only descriptor of the step ring, for the
 * client; -1 with errno set on failure.
 */
int		 session_ring_fd(const struct session *s);

uint64_t	 session_id(const struct session *s);
const char	*session_dataset_name(const struct session *s);

/* Buckets of the per-Next wait histogram (consumer_wait_bounds, +Inf). */
#define SESSION_WAIT_BUCKETS	CONSUMER_WAIT_BUCKETS

/*
 * Why a member left its shared group (session_report's group_leaves; as
 * group.h's group_leave).
 */
enum session_leave {
	SESSION_LEAVE_HELD_BACK,	/* it held the group back past the slack */
	SESSION_LEAVE_WAITED,	/* it waited on slots that leavers hold */
	SESSION_LEAVE_REASONS
};
extern const char *const session_leave_names[SESSION_LEAVE_REASONS];

/* What a session is and did so far, for the stats (stats.h). */
struct session_report {
	uint64_t	 id;
	const char	*dataset;	/* borrowed */
	bool		 own_files;	/* the client's files, not the catalogue */
	const struct session_options *options;	/* borrowed: as asked */
	pid_t		 client_pid;
	uid_t		 client_uid;
	uint64_t	 epoch;		/* of the last step delivered */
	uint64_t	 step;
	uint32_t	 slots_ready;
	uint32_t	 slots_held;
	uint32_t	 slots;
	uint64_t	 steps;		/* delivered */
	uint64_t	 rows;
	uint64_t	 bytes_read;	/* from the dataset, by the workers */
	uint64_t	 samples_replaced; /* bad ones, by others (bad_samples) */
	double		 items_per_s;	/* rows since the first Next */
	uint64_t	 data_wait_us;	/* in Next with no step ready */
	uint64_t	 active_us;	/* since the first Next */
	uint64_t	 wait_counts[SESSION_WAIT_BUCKETS];
	/* Its shared group, if any (then bytes_read counts none). */
	uint64_t	 group_id;
	uint32_t	 group_members;
	uint64_t	 group_steps_filled;
	uint64_t	 group_bytes_read;
	bool		 group_left;	/* left one for falling behind */
	/* Its group's members that left it, by why, stayed, and rejoined. */
	uint64_t	 group_leaves[SESSION_LEAVE_REASONS];
	uint64_t	 group_stays;
	uint64_t	 group_rejoins;
};

/**
 * session_report() - what @s is and did so far; pointers borrow from @s.
 */
void		 session_report(const struct session *s,
		    struct session_report *r);

#endif /* INFEED_SESSION_H */
