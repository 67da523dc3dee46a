/* SPDX-License-Identifier: MIT */
/*
 * Step rings: the layout of a ring on its memory and its slots' states
 * (see ring.h); the memory itself is ring-memory.c's.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "log.h"
#include "ring.h"
#include "xmalloc.h"

#define RING_PAGE	4096
#define RING_ALIGN	64

/* Round @v up to a multiple of @a. */
static uint64_t
ring_round(uint64_t v, uint64_t a)
{
	return ((v + a - 1) / a * a);
}

/* Lay out a slot of @rows rows; -1 when it cannot fit in memory. */
static int
ring_plan(struct ring_layout *l, uint64_t rows, uint64_t row_bytes,
    enum infeed_dtype label_dtype, uint32_t slots)
{
	uint64_t	data;

	/* Keep every part of a slot below 2^62 so no offset can wrap. */
	if (slots == 0 || rows > (UINT64_C(1) << 58) ||
	    __builtin_mul_overflow(rows, row_bytes, &data) ||
	    data > (UINT64_C(1) << 62))
		return (-1);
	memset(l, 0, sizeof(*l));
	l->slots = slots;
	l->label_dtype = label_dtype;
	l->row_bytes = row_bytes;
	l->data_offset = 0;
	l->labels_offset = ring_round(data, RING_ALIGN);
	l->indices_offset = ring_round(l->labels_offset +
	    rows * dtype_size(label_dtype), RING_ALIGN);
	l->slot_bytes = ring_round(l->indices_offset + rows * sizeof(uint64_t),
	    RING_PAGE);
	if (l->slot_bytes > UINT64_MAX / slots)
		return (-1);
	l->ring_bytes = l->slot_bytes * slots;
	return (0);
}

/* The index tables of a ring: the session's and the jobs' copies. */
uint64_t
ring_tables_bytes(uint64_t rows, uint32_t slots)
{
	uint64_t	v;

	if (__builtin_mul_overflow(rows, (uint64_t)slots, &v) ||
	    __builtin_mul_overflow(v, 2 * sizeof(uint64_t), &v))
		return (UINT64_MAX);
	return (v);
}

/* A ring on kept memory of the same user, or on new memory. */
struct ring *
ring_new(struct ring_budget *budget, uint64_t rows, uint64_t row_bytes,
    enum infeed_dtype label_dtype, uint32_t slots,
    const struct ring_owner *owner, char **cause)
{
	struct ring	*r;
	uint64_t	 need;
	char		 need_[48], per[48], tab[48];
	char		*why;
	bool		 over;

	/* The session checked the client's choice. */
	if (label_dtype != INFEED_DTYPE_INT32 &&
	    label_dtype != INFEED_DTYPE_INT64)
		fatalx("ring: labels of dtype %d", (int)label_dtype);
	r = xcalloc(1, sizeof(*r));
	if (ring_plan(&r->layout, rows, row_bytes, label_dtype, slots) ==
	    -1 || (r->tables = ring_tables_bytes(rows, slots)) == UINT64_MAX ||
	    __builtin_add_overflow(r->layout.ring_bytes, r->tables, &need)) {
		*cause = xasprintf("a step of %llu rows of %llu bytes does not "
		    "fit in memory", (unsigned long long)rows,
		    (unsigned long long)row_bytes);
		goto fail;
	}
	r->mem = ring_mem_take(budget, r->layout.ring_bytes, r->tables, owner,
	    &over, &why);
	if (r->mem == NULL && !over) {
		*cause = why;
		goto fail;
	}
	if (r->mem == NULL) {
		*cause = xasprintf("the step ring needs %s (%u slots of %s "
		    "and %s of index tables) but %s; use a smaller "
		    "buffer_size or combined batch, or raise the budget",
		    ring_mem_format_bytes(need, need_, sizeof(need_)), slots,
		    ring_mem_format_bytes(r->layout.slot_bytes, per,
		    sizeof(per)), ring_mem_format_bytes(r->tables, tab,
		    sizeof(tab)), why);
		free(why);
		goto fail;
	}
	r->slot = xcalloc(slots, sizeof(*r->slot));
	return (r);

fail:
	free(r);
	return (NULL);
}

/* The session is over: hold its memory, keep it or give it up. */
void
ring_release(struct ring *r, bool keep)
{
	if (r == NULL)
		return;
	ring_mem_release(r->mem, r->tables, ring_count(r, SLOT_HELD) > 0,
	    keep);
	free(r->slot);
	free(r);
}

/* Free a ring and its memory now. */
void
ring_free(struct ring *r)
{
	if (r == NULL)
		return;
	ring_mem_destroy(r->mem, r->tables);
	free(r->slot);
	free(r);
}

/* A read-only descriptor of the ring, so the client cannot write it. */
int
ring_readonly_fd(const struct ring *r)
{
	return (ring_mem_readonly_fd(r->mem));
}

/* Slot @i's index table. */
uint64_t *
ring_indices(const struct ring *r, uint32_t i)
{
	return ((uint64_t *)(void *)(r->mem->map + (uint64_t)i *
	    r->layout.slot_bytes + r->layout.indices_offset));
}

/* The first slot in a state. */
int
ring_find(const struct ring *r, enum slot_state st)
{
	uint32_t	i;

	for (i = 0; i < r->layout.slots; i++) {
		if (r->slot[i].state == st)
			return ((int)i);
	}
	return (-1);
}

/* How many slots are in a state. */
uint32_t
ring_count(const struct ring *r, enum slot_state st)
{
	uint32_t	i, n = 0;

	for (i = 0; i < r->layout.slots; i++)
		n += r->slot[i].state == st;
	return (n);
}

/* Slot @i, which must exist. */
static struct ring_slot *
ring_slot(const struct ring *r, uint32_t i)
{
	if (i >= r->layout.slots)
		fatalx("ring: slot %u of %u does not exist", i,
		    r->layout.slots);
	return (&r->slot[i]);
}

/* Move a slot along its cycle; nothing else is allowed. */
void
ring_slot_set(struct ring *r, uint32_t i, enum slot_state st)
{
	static const enum slot_state next[] = {
		[SLOT_FREE] = SLOT_FILLING,
		[SLOT_FILLING] = SLOT_READY,
		[SLOT_READY] = SLOT_FREE,
		[SLOT_HELD] = SLOT_HELD,	/* only by its holders */
	};
	struct ring_slot	*sl = ring_slot(r, i);

	if (next[sl->state] != st || sl->state == SLOT_HELD)
		fatalx("ring: slot %u cannot go from state %d to %d", i,
		    (int)sl->state, (int)st);
	sl->state = st;
}

/* A reader takes a ready slot: held until every holder let go. */
void
ring_slot_hold(struct ring *r, uint32_t i)
{
	struct ring_slot	*sl = ring_slot(r, i);

	if (sl->state != SLOT_READY && sl->state != SLOT_HELD)
		fatalx("ring: slot %u cannot be held in state %d", i,
		    (int)sl->state);
	sl->holders++;
	sl->state = SLOT_HELD;
}

/* A reader lets go of a slot it held: READY again once none holds it. */
void
ring_slot_unhold(struct ring *r, uint32_t i)
{
	struct ring_slot	*sl = ring_slot(r, i);

	if (sl->state != SLOT_HELD || sl->holders == 0)
		fatalx("ring: slot %u is not held (state %d)", i,
		    (int)sl->state);
	if (--sl->holders == 0)
		sl->state = SLOT_READY;
}

/* Whether a slot holds a whole step, held or not. */
bool
ring_slot_filled(const struct ring *r, uint32_t i)
{
	return (r->slot[i].state == SLOT_READY ||
	    r->slot[i].state == SLOT_HELD);
}
