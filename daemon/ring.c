/* SPDX-License-Identifier: MIT */
/*
 * Step rings: the memfd, its layout and its slots' states (see ring.h).
 */

#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A size in exact, readable units. */
const char *
ring_format_bytes(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	uint64_t	u = 1024;
	int		i = 0;

	if (v < 1024) {
		snprintf(buf, len, "%llu bytes", (unsigned long long)v);
		return (buf);
	}
	while (i < 3 && v >= u * 1024) {
		u *= 1024;
		i++;
	}
	if (v % u == 0)
		snprintf(buf, len, "%llu %s", (unsigned long long)(v / u),
		    units[i]);
	else
		snprintf(buf, len, "%.1f %s (%llu bytes)", (double)v /
		    (double)u, units[i], (unsigned long long)v);
	return (buf);
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

/* Make, seal and map a ring, charged to the budget. */
struct ring *
ring_new(struct ring_budget *budget, uint64_t rows, uint64_t row_bytes,
    enum infeed_dtype label_dtype, uint32_t slots, char **cause)
{
	struct ring	*r;
	uint64_t	 avail;
	char		 need[48], per[48], free_[48], limit[48];

	/* The session checked the client's choice. */
	if (label_dtype != INFEED_DTYPE_INT32 &&
	    label_dtype != INFEED_DTYPE_INT64)
		fatalx("ring: labels of dtype %d", (int)label_dtype);
	r = xcalloc(1, sizeof(*r));
	r->budget = budget;
	r->memfd = -1;
	if (ring_plan(&r->layout, rows, row_bytes, label_dtype, slots) ==
	    -1) {
		*cause = xasprintf("a step of %llu rows of %llu bytes does not "
		    "fit in memory", (unsigned long long)rows,
		    (unsigned long long)row_bytes);
		goto fail;
	}
	avail = budget->limit > budget->used ? budget->limit - budget->used :
	    0;
	if (r->layout.ring_bytes > avail) {
		*cause = xasprintf("the step ring needs %s (%u slots of %s) but "
		    "only %s of the daemon's memory budget (%s, memory_budget "
		    "in %s) is free; use a smaller buffer_size or combined "
		    "batch, or raise the budget",
		    ring_format_bytes(r->layout.ring_bytes, need, sizeof(need)),
		    slots, ring_format_bytes(r->layout.slot_bytes, per,
		    sizeof(per)), ring_format_bytes(avail, free_,
		    sizeof(free_)), ring_format_bytes(budget->limit, limit,
		    sizeof(limit)), budget->source);
		goto fail;
	}
	r->memfd = memfd_create("infeed-ring", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING);
	if (r->memfd == -1 || ftruncate(r->memfd,
	    (off_t)r->layout.ring_bytes) == -1 || fcntl(r->memfd, F_ADD_SEALS,
	    F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == -1) {
		*cause = xasprintf("cannot create the step ring: %s",
		    strerror(errno));
		goto fail;
	}
	/* Only the daemon's own user may reopen it writable. */
	if (fchmod(r->memfd, 0400) == -1) {
		*cause = xasprintf("cannot protect the step ring: %s",
		    strerror(errno));
		goto fail;
	}
	r->map = mmap(NULL, r->layout.ring_bytes, PROT_READ | PROT_WRITE,
	    MAP_SHARED, r->memfd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		*cause = xasprintf("cannot map the step ring: %s",
		    strerror(errno));
		goto fail;
	}
	r->slot = xcalloc(slots, sizeof(*r->slot));
	budget->used += r->layout.ring_bytes;
	return (r);

fail:
	ring_free(r);
	return (NULL);
}

/* Unmap, close and give the memory back to the budget. */
void
ring_free(struct ring *r)
{
	if (r == NULL)
		return;
	if (r->map != NULL) {
		munmap(r->map, r->layout.ring_bytes);
		r->budget->used -= r->layout.ring_bytes;
	}
	if (r->memfd != -1)
		close(r->memfd);
	free(r->slot);
	free(r);
}

/* In a new worker: drop the main process's mapping and descriptor. */
void
ring_forget(struct ring *r)
{
	if (r->map != NULL)
		munmap(r->map, r->layout.ring_bytes);
	if (r->memfd != -1)
		close(r->memfd);
	r->map = NULL;
	r->memfd = -1;
}

/* A read-only descriptor of the ring, so the client cannot write it. */
int
ring_readonly_fd(const struct ring *r)
{
	char	path[64];
	int	fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", r->memfd);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		fd = fcntl(r->memfd, F_DUPFD_CLOEXEC, 0);
	return (fd);
}

/* Slot @i's index table. */
uint64_t *
ring_indices(const struct ring *r, uint32_t i)
{
	return ((uint64_t *)(void *)(r->map + (uint64_t)i *
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

/* Move a slot along its cycle; nothing else is allowed. */
void
ring_slot_set(struct ring *r, uint32_t i, enum slot_state st)
{
	static const enum slot_state next[] = {
		[SLOT_FREE] = SLOT_FILLING,
		[SLOT_FILLING] = SLOT_READY,
		[SLOT_READY] = SLOT_HELD,
		[SLOT_HELD] = SLOT_FREE,
	};

	if (i >= r->layout.slots)
		fatalx("ring: slot %u of %u does not exist", i,
		    r->layout.slots);
	if (next[r->slot[i].state] != st)
		fatalx("ring: slot %u cannot go from state %d to %d", i,
		    (int)r->slot[i].state, (int)st);
	r->slot[i].state = st;
}
