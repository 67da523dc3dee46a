/* SPDX-License-Identifier: MIT */
/*
 * Step rings: one memfd per session, sealed against resizing, of
 * buffer_size slots, each holding one whole step (data, int32 or int64
 * labels as the session asked, uint64 dataset indices).  The client maps a read-only descriptor of it;
 * the workers map it read-write and fill the slots.
 *
 * A slot goes FREE -> FILLING (its indices are written and its rows are
 * being read) -> READY (every row written) -> FREE (every reader is past
 * it: it takes a later step).  A ready slot is HELD while readers hold it
 * (sent to a client, not released yet; a shared group's ring has several
 * readers, each holding a slot once): the ring counts its holders, and it
 * is READY again when the last lets go.  ring_slot_set() and
 * ring_slot_hold()/ring_slot_unhold() are the one place that moves a slot
 * and they refuse any other transition: a held slot is never rewritten,
 * however many readers hold it.
 *
 * A ring lives on ring memory (ring-memory.h): taken from the budget,
 * with the session's index tables (its own and the pool's jobs' copies,
 * slots x rows x 8 bytes each) charged with it, and released when the
 * session is over and no worker writes it any more.
 */
#ifndef INFEED_RING_H
#define INFEED_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "infeed-dtype.h"
#include "ring-memory.h"

/* Where things are in a ring; plain data, sent to the workers. */
struct ring_layout {
	uint32_t	slots;
	uint32_t	label_dtype;	/* INFEED_DTYPE_INT32 or _INT64 */
	uint64_t	slot_bytes;
	uint64_t	ring_bytes;
	uint64_t	data_offset;	/* in a slot */
	uint64_t	labels_offset;
	uint64_t	indices_offset;
	uint64_t	row_bytes;	/* data bytes per row */
};

enum slot_state {
	SLOT_FREE,
	SLOT_FILLING,
	SLOT_READY,
	SLOT_HELD,
};

struct ring_slot {
	enum slot_state	state;
	uint64_t	seq;		/* fill order */
	uint64_t	epoch;
	uint64_t	step;
	uint64_t	rows;
	uint64_t	rows_pending;
	uint32_t	holders;	/* readers holding it: HELD */
};

struct ring {
	struct ring_layout	 layout;
	struct ring_mem		*mem;
	struct ring_slot	*slot;	/* layout.slots of them */
	uint64_t		 tables;	/* index tables' bytes, charged */
};

/**
 * ring_new() - a ring of @slots slots of @rows rows of @row_bytes and a
 * label of @label_dtype (INFEED_DTYPE_INT32 or INFEED_DTYPE_INT64;
 * anything else is a broken invariant, fatal) for @owner, a client of a
 * user and group that will hold bytes of a dataset (its serial; 0 for
 * data that no other ring may share), on memory from @budget
 * (ring_mem_take(): kept memory of the same user, or new), with the
 * session's index tables (ring_tables_bytes()) charged with it.
 * Return: the ring, or NULL with *@cause (malloc'd) saying what did not
 * fit (and what of the budget ended sessions' processes hold, @owner's
 * own first) or which system call failed, in exact units.
 */
struct ring	*ring_new(struct ring_budget *budget, uint64_t rows,
		    uint64_t row_bytes, enum infeed_dtype label_dtype,
		    uint32_t slots, const struct ring_owner *owner,
		    char **cause);

/**
 * ring_release() - the session is over and no worker writes the ring any
 * more: its tables are uncharged and its memory released
 * (ring_mem_release()): held while the client holds steps in it (a slot
 * HELD), else kept when @keep, else given up.  NULL is a no-op.
 */
void		 ring_release(struct ring *r, bool keep);

/**
 * ring_free() - free the ring and uncharge its memory now, without
 * punching it (at exit, and in tests): pages that a client still maps
 * are left to it, as the daemon goes.
 */
void		 ring_free(struct ring *r);

/**
 * ring_tables_bytes() - what the index tables of a ring of @slots slots
 * of @rows rows take (the session's and the pool's jobs' copies), or
 * UINT64_MAX when that overflows.
 */
uint64_t	 ring_tables_bytes(uint64_t rows, uint32_t slots);

/**
 * ring_readonly_fd() - a new read-only descriptor of the memfd, for the
 * client, or -1 with errno set.
 */
int		 ring_readonly_fd(const struct ring *r);

/**
 * ring_indices() - slot @i's dataset-index table, the client's copy (the
 * workers write it from their jobs; the daemon never reads it back).
 */
uint64_t	*ring_indices(const struct ring *r, uint32_t i);

/**
 * ring_find() - the first slot in state @st, or -1.
 */
int		 ring_find(const struct ring *r, enum slot_state st);

/**
 * ring_count() - slots in state @st.
 */
uint32_t	 ring_count(const struct ring *r, enum slot_state st);

/**
 * ring_slot_set() - move slot @i to @st along FREE -> FILLING -> READY ->
 * FREE; any other transition (a held slot freed or refilled among them)
 * is a broken invariant and fatal.
 */
void		 ring_slot_set(struct ring *r, uint32_t i, enum slot_state st);

/**
 * ring_slot_hold(), ring_slot_unhold() - a reader takes ready slot @i
 * (READY or HELD: HELD from now on), or lets go of it (READY again once
 * no reader holds it).  Holding a slot not ready, or letting go of one no
 * reader holds, is a broken invariant and fatal.
 */
void		 ring_slot_hold(struct ring *r, uint32_t i);
void		 ring_slot_unhold(struct ring *r, uint32_t i);

/**
 * ring_slot_filled() - whether slot @i holds a whole step (READY or HELD).
 */
bool		 ring_slot_filled(const struct ring *r, uint32_t i);

#endif /* INFEED_RING_H */
