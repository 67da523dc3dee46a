/* SPDX-License-Identifier: MIT */
/*
 * Step rings: one memfd per session, sealed against resizing, of
 * buffer_size slots, each holding one whole step (data, int32 or int64
 * labels as the session asked, uint64 dataset indices).  The client maps a read-only descriptor of it;
 * the workers map it read-write and fill the slots.
 *
 * A slot goes FREE -> FILLING (its indices are written and its rows are
 * being read) -> READY (every row written) -> HELD (sent to the client) ->
 * FREE (released).  ring_slot_set() is the one place that moves a slot and
 * it refuses any other transition: a held slot is never rewritten.
 *
 * Every ring counts against one ring_budget (memory_budget in the
 * configuration), charged at ring_new() and given back at ring_free().
 */
#ifndef INFEED_RING_H
#define INFEED_RING_H

#include <stdint.h>

#include "infeed-dtype.h"

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
};

/* The memory that all rings together may take. */
struct ring_budget {
	uint64_t	 limit;		/* bytes */
	uint64_t	 used;
	const char	*source;	/* the file that sets it, for messages */
};

struct ring {
	struct ring_budget	*budget;
	struct ring_layout	 layout;
	int			 memfd;
	uint8_t			*map;
	struct ring_slot	*slot;	/* layout.slots of them */
};

/**
 * ring_new() - make, size, seal and map a ring of @slots slots of @rows
 * rows of @row_bytes and a label of @label_dtype (INFEED_DTYPE_INT32 or
 * INFEED_DTYPE_INT64; anything else is a broken invariant, fatal), and
 * charge it to @budget.
 * Return: the ring, or NULL with *@cause (malloc'd) saying what did not
 * fit or which system call failed, in exact units.
 */
struct ring	*ring_new(struct ring_budget *budget, uint64_t rows,
		    uint64_t row_bytes, enum infeed_dtype label_dtype,
		    uint32_t slots, char **cause);

/**
 * ring_free() - unmap, close and uncharge; NULL is a no-op.
 */
void		 ring_free(struct ring *r);

/**
 * ring_forget() - in a freshly forked worker: unmap and close the ring
 * without touching the budget (the main process still owns it), so that
 * the worker never pins the memory of a session that ends.
 */
void		 ring_forget(struct ring *r);

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
 * ring_slot_set() - move slot @i to @st; any transition but the four of
 * the cycle above is a broken invariant and fatal.
 */
void		 ring_slot_set(struct ring *r, uint32_t i, enum slot_state st);

/**
 * ring_format_bytes() - "300 bytes", "512 KiB", "1.5 MiB" into @buf.
 */
const char	*ring_format_bytes(uint64_t v, char *buf, size_t len);

#endif /* INFEED_RING_H */
