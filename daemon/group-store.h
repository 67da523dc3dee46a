/* SPDX-License-Identifier: MIT */
/*
 * A group's store of past steps (group.h): daemon-owned memory, a memfd
 * of its own that only infeedd maps (no client ever sees its pages), that keeps whole steps (a ring slot's
 * bytes: data, labels, indices) by (epoch, step) beyond the group's ring
 * and its 64 slot numbers, and after the group's last member leaves
 * (group_linger).  A group whose images end in ToTensor() [+ Normalize()]
 * keeps their bytes as uint8, a quarter of the floats (image_tail_*:
 * exact both ways, so a served step is the decoded one bit for bit);
 * other steps are kept as the slot holds them.  An entry's pages are
 * made once, by pwrite() (no zeroing; no memory is an error, not
 * SIGBUS), and kept for every step that lands there, written through
 * the mapping; a store given back to make room for a new one hands it
 * its memfd, pages and mapping.  A group's producer adds each step it fills; a producer
 * that fills a step the store has (a late member catching up, a group
 * that starts on a lingering store) gets it by a copy into its own slot,
 * not a decode.  Copies run on one thread of the store's own, never on
 * the event loop; the loop learns of their end through an eventfd.
 *
 * A store is keyed by what makes its steps the same bytes (struct
 * group_key, matched by group.c) and charged to memory_budget.  It gives
 * its memory back whenever a ring needs the budget (ring_budget's
 * give_back): lingering stores first, then those of groups that run; so
 * it never keeps a trainer from attaching.
 */
#ifndef INFEED_GROUP_STORE_H
#define INFEED_GROUP_STORE_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>

#include "image-transform.h"
#include "session-check.h"

struct event_base;
struct producer;
struct ring;
struct ring_budget;
struct ring_layout;

/* A store's steps at most (its entries' table is not charged). */
#define GROUP_STORE_MAX_STEPS	65536

/* What makes two groups' steps the same bytes (group.c's group_matches). */
struct group_key {
	struct pool		*pool;
	const struct dataset	*ds;
	uint64_t		 serial;	/* ds's: a reload's new one */
	uid_t			 uid;
	gid_t			 gid;
	struct session_options	 opts;		/* its own copy */
	enum infeed_dtype	 label_dtype;
};

/* How a ring slot's step is kept: its form in an entry. */
struct group_store_form {
	bool		 u8;		/* image rows as uint8 (tail) */
	uint64_t	 slot_bytes;	/* a ring slot's */
	uint64_t	 rows;		/* a slot's at most */
	uint64_t	 row_bytes;	/* a row's data in the slot */
	uint64_t	 rest_offset;	/* the slot's labels and indices on */
	uint64_t	 rest_at;	/* ... their place in an entry */
	uint64_t	 entry_bytes;	/* a kept step, whole pages */
	struct image_tail tail;		/* u8: ToTensor [+ Normalize] */
};

/*
 * A store's memory: its memfd, infeedd's mapping of it, and which
 * entries of @entry_bytes have their pages made and mapped (handed to
 * the next store with the memory).
 */
struct group_store_mem {
	int		 fd;		/* -1: none */
	uint8_t		*map;
	uint64_t	 bytes;		/* mapped */
	uint64_t	 entry_bytes;
	bool		*paged;		/* npaged of them */
	uint32_t	 npaged;
};

/* One kept step. */
struct group_store_entry {
	uint64_t	 epoch;
	uint64_t	 step;
	uint64_t	 rows;		/* the step's */
	uint64_t	 replaced;	/* bad samples replaced in it */
	uint32_t	 readers;	/* copies out of it under way */
	bool		 ready;		/* its bytes are all in */
	bool		 used;		/* holds (or is being given) a step */
};

struct group_store {
	struct group_key	 key;
	struct ring_budget	*budget;
	struct group_store_form	 form;
	uint64_t		 epoch_steps;	/* epoch 0's: a step's home */
	uint32_t		 nhome;		/* entries made (homes modulo) */
	uint32_t		 nentries;	/* not given back: the first */
	struct group_store_entry *entries;
	struct group_store_mem	 mem;		/* fd -1: given back */
	uint64_t		 charged;
	uint32_t		 refs;		/* groups and producers */
	bool			 handed;	/* made on a given-back store's memory */
	uint64_t		 linger_ms;	/* group_linger: kept with no refs */
	uint64_t		 linger_until_ms;	/* no refs: then it goes */
	TAILQ_ENTRY(group_store) entry;
};

/**
 * group_store_find() - a store whose key @match(key, @arg) accepts, with
 * a reference taken, or NULL.
 */
struct group_store *group_store_find(bool (*match)(const struct group_key *,
		    const void *), const void *arg);

/**
 * group_store_new() - a store of @bytes at most (whole steps of ring
 * slots of @layout, @rows rows each, kept as uint8 when @image, the
 * group's pipeline or NULL, has an exact uint8 route; at least 2 steps
 * and GROUP_STORE_MAX_STEPS at most;
 * epochs of @epoch_steps) for key @key (taken over), charged to @budget
 * as far as that is free now (it takes no one's room; lingering stores
 * give way to it), with one
 * reference, kept @linger_ms once it has none; its copies end on @base's
 * loop.  Return: the store, or NULL
 * (no room, or @bytes holds fewer than 2 steps): the group keeps none.
 */
struct group_store *group_store_new(struct event_base *base,
		    struct ring_budget *budget, struct group_key *key,
		    const struct ring_layout *layout, uint64_t rows,
		    const struct image_pipeline *image, uint64_t epoch_steps,
		    uint64_t bytes, uint64_t linger_ms);

/**
 * group_store_ref(), group_store_unref() - take or drop a reference; a
 * store with none lingers its linger_ms from then (0: it goes then).
 */
void		 group_store_ref(struct group_store *s);
void		 group_store_unref(struct group_store *s);

/*
 * How a copy ended, for its caller's group_store_done_cb: added to the
 * store (the slot let go), copied out of it into the slot (whole, with
 * @replaced bad samples), or not copied out (the store went: decode).
 */
enum group_store_copy {
	GROUP_STORE_ADDED,
	GROUP_STORE_COPIED,
	GROUP_STORE_NOT_COPIED,
};

typedef void	 group_store_done_cb(void *arg, uint32_t slot,
		    enum group_store_copy how, uint64_t replaced);

/**
 * group_store_add() - @ring's slot @i is ready, with @replaced bad
 * samples: copy its step into the store (the oldest step not being read
 * makes room), holding the slot (ring_slot_hold()) until the copy ends,
 * when @done(@arg, @i, GROUP_STORE_ADDED) runs.  Nothing when the store
 * has the step, or no room.
 */
void		 group_store_add(struct group_store *s, struct ring *ring,
		    uint32_t i, uint64_t replaced, group_store_done_cb *done,
		    void *arg);

/**
 * group_store_serve() - @ring's slot @i is filling (its step set): when
 * the store has that step, copy it in, and @done(@arg, @i,
 * GROUP_STORE_COPIED or _NOT_COPIED) follows.  Return: whether it does
 * (no decode).
 */
bool		 group_store_serve(struct group_store *s, struct ring *ring,
		    uint32_t i, group_store_done_cb *done, void *arg);

/**
 * group_store_forget() - the caller @arg goes: its copies are dropped (a
 * copy under way is waited for, a few ms) and the slots held for copies
 * out of it let go.
 */
void		 group_store_forget(struct group_store *s, void *arg);

/**
 * group_store_lingering() - the bytes of @b that stores whose groups
 * ended hold (each gives them back as soon as a ring needs them).
 */
uint64_t	 group_store_lingering(const struct ring_budget *b);

/**
 * group_store_give_back() - ring_budget's give_back: give back the last
 * entries of stores (punched out of the memfd), lingering stores first,
 * oldest first, until @need bytes of @b are free.
 */
void		 group_store_give_back(struct ring_budget *b, uint64_t need);

#endif /* INFEED_GROUP_STORE_H */
