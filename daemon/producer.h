/* SPDX-License-Identifier: MIT */
/*
 * Producers: one stream of steps.  A producer owns a step ring, its index
 * tables and its registration with the worker pool, and fills the ring's
 * free slots with the next steps in order, each step once, from a source
 * (the dataset, sampler and transform of session-check.h) it borrows.  It
 * answers no request and holds no slot: its readers (consumer.h) take its
 * ready slots, and it tells its owner through a callback when rows are
 * done.  A lone session is one producer read by one consumer; a shared
 * group (group.h) is one producer read by several.  Its states:
 *
 *   IDLE --producer_start()--> FILLING --last step of the epoch queued,
 *   load_indefinitely off--> EPOCH_END --producer_next_epoch()--> IDLE
 *   any --a sample could not be read--> FAILED (readers get the failure)
 *
 * A group member's view of its group's stream moves through the same
 * states (consumer.h), by producer_state_move() too.
 */
#ifndef INFEED_PRODUCER_H
#define INFEED_PRODUCER_H

#include <stdbool.h>
#include <stdint.h>

#include "errcode.h"
#include "infeed-limits.h"
#include "ring.h"

struct catalogue;
struct event;
struct event_base;
struct pool;
struct pool_ring;
struct session_client;
struct session_host;
struct session_options;
struct session_source;

enum producer_state {
	PRODUCER_IDLE,		/* nothing asked for yet, or after EndOfData */
	PRODUCER_FILLING,	/* steps are being filled and delivered */
	PRODUCER_EPOCH_END,	/* the epoch's last step is queued */
	PRODUCER_FAILED,	/* a sample could not be read */
};

/* What a producer is made of; its pointers are borrowed. */
struct producer_spec {
	struct pool		*pool;
	struct ring_budget	*budget;
	struct event_base	*base;	/* NULL: rows prepared at once (tests) */
	struct session_source	*src;
	/*
	 * The charge of the source's shuffle table, kept by the source's
	 * owner: the table lives as long as the source, not the producer.
	 */
	uint64_t		*table_charged;
	struct ring_owner	 owner;
	uint32_t		 slots;
	uint32_t		 num_workers;	/* 0: the whole pool */
	bool			 load_indefinitely;
};

/*
 * Rows of a slot are done (ready, or failed): @bytes read from the
 * dataset, @replaced bad samples replaced.  The owner credits them and
 * hands the ready steps to its readers.
 */
typedef void	producer_done_cb(void *arg, uint64_t bytes, uint64_t replaced);

struct producer {
	uint64_t		 id;	/* its session's or group's, for the log */
	const char		*kind;	/* "session" or "group", for the log */
	struct producer_spec	 spec;
	producer_done_cb	*done;
	void			*arg;
	enum producer_state	 state;
	struct ring		*ring;
	uint64_t		*indices;	/* per slot, our own copy */
	struct pool_ring	*pool_ring;
	/* A reader back in its group keeps it for the steps it holds. */
	bool			 retired;
	/*
	 * A late group member's catch-up stream fills no step from
	 * (stop_epoch, stop_step) on: its group has those (group.h).
	 */
	bool			 stops;
	uint64_t		 stop_epoch;
	uint64_t		 stop_step;
	char			*failure;
	enum errcode		 failure_code;	/* DATA, or INTERNAL */
	uint64_t		 failed_seq;	/* the first step that failed */
	bool			 jobs_dropped;	/* ... and the rest dropped */

	uint64_t		 fill_epoch;
	uint64_t		 fill_step;
	uint64_t		 fill_seq;
	/*
	 * Slots it may still start filling (UINT32_MAX: every free one): a
	 * group's ring keeps a window of past steps in slots beyond its
	 * members' buffer_size (group.c), which the group sets.
	 */
	uint32_t		 room;
	/* Rows of each filling slot whose jobs are queued (producer_prepare). */
	uint64_t		 prepared[INFEED_MAX_SLOTS];
	struct event		*ev_prepare;	/* the next rows, or NULL */
	/*
	 * Read ahead (pool_read_ahead()): the next step of ahead_epoch whose
	 * rows go to the pool to be read ahead of its slot, and a step's
	 * indices to compute them in.
	 */
	uint64_t		 ahead_epoch;
	uint64_t		 ahead_step;
	uint64_t		*ahead;
	uint64_t		 bytes_read;	/* from the dataset, by workers */
	void			*order;	/* dataset_order_new()'s, or NULL */
	/*
	 * A group's store of past steps (group-store.h), referenced: the
	 * steps it has are copied into their slots, not decoded; with
	 * store_adds (the group's own producer) each step filled is added.
	 */
	struct group_store	*store;
	bool			 store_adds;
	/* Bad samples replaced in each filling slot, for the store's copy. */
	uint64_t		 replaced[INFEED_MAX_SLOTS];
};

/**
 * producer_set_store() - fill from store @s (a reference taken; NULL:
 * none) and, with @adds, add to it each step decoded.
 */
void		 producer_set_store(struct producer *p, struct group_store *s,
		    bool adds);


/* What a reader's waiting Next gets from a (failed) producer's slot. */
enum producer_gate {
	PRODUCER_GATE_STEP,	/* the step, if it is ready */
	PRODUCER_GATE_WAIT,	/* a step before the failed one, filling */
	PRODUCER_GATE_ERROR,	/* the failure */
};

/**
 * producer_spec_init() - @spec of a producer of @client's options @o on
 * @host, from source @src whose table's charge @table_charged keeps.
 */
void		 producer_spec_init(struct producer_spec *spec,
		    const struct session_host *host,
		    const struct session_client *client,
		    const struct session_options *o,
		    struct session_source *src, uint64_t *table_charged);

/**
 * producer_new() - charge the source's shuffle table (once per source),
 * make the ring and its index tables and register it with the pool; it
 * fills from (@epoch, @step) once started, and tells @done of done rows.
 * Return: the producer, or NULL with *@code and *@cause (malloc'd) set.
 */
struct producer	*producer_new(const struct producer_spec *spec,
		    uint64_t epoch, uint64_t step, producer_done_cb *done,
		    void *arg, enum errcode *code, char **cause);

/**
 * producer_free() - unregister the ring; its memory is kept for the next
 * ring only when no reader holds a slot of it (ring_release()).  NULL is
 * a no-op.
 */
void		 producer_free(struct producer *p);

/**
 * producer_state_move() - move @st (a producer's, or a member's view of
 * its group's) to @to; the allowed transitions are all there, any other
 * is fatal.  @id names the owner in that message.
 */
void		 producer_state_move(enum producer_state *st,
		    enum producer_state to, uint64_t id);

/**
 * producer_start() - IDLE to FILLING, and fill the free slots.
 */
void		 producer_start(struct producer *p);

/**
 * producer_fill() - start filling free slots with the next steps in
 * order; their indices and jobs follow a bounded amount at a time.
 */
void		 producer_fill(struct producer *p);

/**
 * producer_next_epoch() - EPOCH_END to IDLE: the next fill starts the
 * next epoch.  Return: the epoch that ended.
 */
uint64_t	 producer_next_epoch(struct producer *p);

/**
 * producer_handover() - a fresh producer goes on from a reader's stream:
 * from (@epoch, @step), in state @st (an epoch's end that is still owed
 * its EndOfData stays owed).
 */
void		 producer_handover(struct producer *p, uint64_t epoch,
		    uint64_t step, enum producer_state st);

/**
 * producer_stop_at() - fill no step from (@epoch, @step) on, or, with
 * @stops false, go on past it (and fill).  producer_at_stop() - whether
 * it filled every step before its stop.
 */
void		 producer_stop_at(struct producer *p, bool stops,
		    uint64_t epoch, uint64_t step);
bool		 producer_at_stop(const struct producer *p);

/**
 * producer_retire() - fill no more: queued jobs are dropped, rows still
 * running are ignored; the ring stays for the steps readers hold.
 */
void		 producer_retire(struct producer *p);

/**
 * producer_delivered() - every step before the @next_seq-th went to its
 * readers: the pool serves the nearer ones first.
 */
void		 producer_delivered(struct producer *p, uint64_t next_seq);

/**
 * producer_find_seq() - the slot that holds step @seq (its index in
 * *@index), or NULL.
 */
struct ring_slot *producer_find_seq(const struct producer *p, uint64_t seq,
		    uint32_t *index);

/**
 * producer_gate() - what a waiting Next gets from slot @sl (NULL: the
 * step is in no slot).
 */
enum producer_gate producer_gate(const struct producer *p,
		    const struct ring_slot *sl);

/**
 * producer_reload() - after a reload, find source @src's dataset in @cat
 * and tell the pool where it moved, for @p if any (NULL: @src only).
 * Return: 0, or -1 when the dataset changed or went.
 */
int		 producer_reload(struct session_source *src,
		    struct producer *p, const struct catalogue *cat);

#endif /* INFEED_PRODUCER_H */
