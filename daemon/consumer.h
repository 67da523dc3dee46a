/* SPDX-License-Identifier: MIT */
/*
 * Consumers: one reader of a stream of steps (producer.h).  A consumer
 * keeps a session's queued Next requests and answers them in order,
 * through the events its session registered, from the producer it reads:
 * its own (a lone session's, or a group member's that left) or its
 * group's (group.h).  It keeps its position, the slots it holds, and what
 * it was answered, for the stats.  It calls producers and rings, never
 * the pool: a producer tells the pool what its readers took.
 *
 * What it reads from moves through consumer_set_state(), and only so:
 *
 *   ALONE (its own ring) --attach, shares--> MEMBER (its group's ring)
 *   MEMBER --falls behind, or attached behind the group and asks for
 *     its first step--> LEFT (catching up on a ring of its own; a
 *     freed group's stays LEFT) --caught up--> REJOINED (the group's ring
 *     again, holding steps of its own) --holds none--> MEMBER
 *   MEMBER --falls behind, no room for a ring--> ENDED (Nexts get why)
 */
#ifndef INFEED_CONSUMER_H
#define INFEED_CONSUMER_H

#include <stdbool.h>
#include <stdint.h>

#include "errcode.h"
#include "infeed-limits.h"
#include "producer.h"

#define CONSUMER_MAX_WAITING	INFEED_MAX_SLOTS	/* Next requests */

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
	/*
	 * The first step in the session's own ring after it left its group:
	 * the Step carries that ring (session_ring_fd()), whose slots are
	 * numbered from first_slot.
	 */
	bool		new_ring;
	uint32_t	first_slot;
	uint32_t	ring_slots;
	uint64_t	slot_bytes;
	uint64_t	ring_bytes;
};

/*
 * How a session answers Next requests (session.h's API, which names
 * them); called from any session_* call.
 */
struct session_events {
	void	(*step)(void *arg, struct session_req,
		    const struct session_step *);
	void	(*end_of_data)(void *arg, struct session_req, uint64_t epoch);
	void	(*error)(void *arg, struct session_req, enum errcode,
		    const char *message);
};

/* Buckets of the per-Next wait histogram: the bounds, then +Inf. */
#define CONSUMER_WAIT_BUCKETS	9
extern const double	consumer_wait_bounds[CONSUMER_WAIT_BUCKETS - 1];

enum consumer_state {
	CONSUMER_ALONE,
	CONSUMER_MEMBER,
	CONSUMER_LEFT,
	CONSUMER_REJOINED,
	CONSUMER_ENDED,
};

struct consumer {
	uint64_t		 id;	/* its session's, for the log */
	struct session_events	 ev;
	void			*arg;
	enum consumer_state	 state;
	/* The producer it reads: its own, or its group's while in it. */
	struct producer		*from;
	struct producer		*own;	/* its own stream, or NULL */
	/*
	 * In a group: its view of the group's stream (its own epoch's end;
	 * FAILED once ended), carried to its own producer when it leaves.
	 */
	enum producer_state	 seen;
	bool			 load_indefinitely;
	char			*failure;	/* ended: why */
	enum errcode		 failure_code;

	uint64_t		 deliver_seq;	/* in from's sequence */
	/*
	 * A late group member catching up: its Nexts wait at its own
	 * producer's stop, where its group takes over (group.h).
	 */
	void			(*at_stop)(void *arg);
	void			*at_stop_arg;
	struct session_req	 waiting[CONSUMER_MAX_WAITING];	/* FIFO */
	uint64_t		 waiting_us[CONSUMER_MAX_WAITING]; /* since */
	unsigned		 waiting_first;
	unsigned		 nwaiting;
	/* The group ring's slots it holds, a bit each (the ring counts). */
	uint64_t		 shared_held;
	uint64_t		 pos_epoch;	/* a member's next step */
	uint64_t		 pos_step;
	uint32_t		 first_slot;	/* Step.slot of own slot 0 */
	bool			 new_ring;	/* the next Step carries its ring */

	uint64_t		 epoch;		/* of the last step delivered */
	uint64_t		 step;
	uint64_t		 steps_delivered;
	uint32_t		 last_slot;	/* Step.slot of the last */
	uint64_t		 rows_delivered;
	uint64_t		 first_next_ms;
	uint64_t		 bytes_read;	/* from the dataset, by workers */
	uint64_t		 samples_replaced; /* bad ones, by others */
	/*
	 * Data wait: the time the client had a Next waiting with no step
	 * ready, the answer to "is this trainer input-bound?".
	 */
	uint64_t		 wait_since_us;	/* 0: no Next waits */
	uint64_t		 data_wait_us;
	/* Nexts answered, by how long each waited (consumer_wait_bounds). */
	uint64_t		 wait_counts[CONSUMER_WAIT_BUCKETS];
};

/**
 * consumer_init() - a reader answering through @ev, @arg, whose next step
 * is (@epoch, @step); it reads nothing yet.
 */
void		 consumer_init(struct consumer *c,
		    const struct session_events *ev, void *arg,
		    uint64_t epoch, uint64_t step, bool load_indefinitely);

/**
 * consumer_clear() - free its own producer and what it keeps.
 */
void		 consumer_clear(struct consumer *c);

/**
 * consumer_set_state() - move to @to; the allowed transitions are all
 * there (see above), any other is fatal.
 */
void		 consumer_set_state(struct consumer *c,
		    enum consumer_state to);

/**
 * consumer_in_group() - whether it takes its group's steps (a member, or
 * back in as one); consumer_left() - out of its group: fell behind, or
 * was ended.
 */
bool		 consumer_in_group(const struct consumer *c);
bool		 consumer_left(const struct consumer *c);

/**
 * consumer_go_alone() - make its own producer of @spec, filling from its
 * position; it reads from it from now on.
 * Return: 0, or -1 with *@code and *@cause (nothing made).
 */
int		 consumer_go_alone(struct consumer *c,
		    const struct producer_spec *spec, enum errcode *code,
		    char **cause);

/**
 * consumer_queue() - queue Next @req, or refuse it (every slot held, or
 * too many waiting): -1 with *@code and *@cause.
 */
int		 consumer_queue(struct consumer *c, struct session_req req,
		    enum errcode *code, char **cause);

/**
 * consumer_pop() - take the oldest waiting Next, counting its wait.
 */
struct session_req consumer_pop(struct consumer *c);

/**
 * consumer_send_step() - answer the oldest waiting Next with slot @i of
 * ring @r (held for it already), numbered from @first_slot; with its ring
 * when c->new_ring.
 */
void		 consumer_send_step(struct consumer *c, const struct ring *r,
		    uint32_t i, uint32_t first_slot);

/**
 * consumer_next() - after a Next queued on its own producer: start it if
 * idle, fill and answer what is ready.
 */
void		 consumer_next(struct consumer *c);

/**
 * consumer_deliver() - answer waiting Nexts with its own producer's ready
 * steps, in order, and an EndOfData at each epoch's end; Nexts left
 * waiting at the producer's stop go to c->at_stop.
 */
void		 consumer_deliver(struct consumer *c);

/**
 * consumer_release() - the client gave back slot @slot of its own ring.
 * Return: 0, or -1 with *@cause when it does not hold it.
 */
int		 consumer_release(struct consumer *c, uint32_t slot,
		    char **cause);

/**
 * consumer_own_drop() - back in its group, it gives up its own producer
 * once it holds none of its steps.
 */
void		 consumer_own_drop(struct consumer *c);

/**
 * consumer_cancel() - answer every waiting Next with an error.
 */
void		 consumer_cancel(struct consumer *c, enum errcode code,
		    const char *message);

/**
 * consumer_wait_end(), consumer_wait_begin() - no Next waits any more:
 * add the time one did to the data wait; or one waits unanswered: the
 * client waits for data from now.
 */
void		 consumer_wait_end(struct consumer *c);
void		 consumer_wait_begin(struct consumer *c);

/**
 * consumer_data_wait() - the data wait so far, counting one going on, and
 * the time since the first Next, in microseconds.
 */
void		 consumer_data_wait(const struct consumer *c,
		    uint64_t *wait_us, uint64_t *active_us);

#endif /* INFEED_CONSUMER_H */
