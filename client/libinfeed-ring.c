/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's view of the daemon's ring: the mapping of the session's
 * ring, the held slots, the rings of ended sessions whose steps the caller
 * still holds, and the copy-on-write restore of a slot given back.
 *
 * Copy-on-write: the mapping is private over a read-only descriptor, so
 * the trainer's writes land in private pages and never reach the daemon.
 * A slot given back keeps its private pages until it is taken again;
 * then those of every slot given back since are dropped, so that the slot
 * shows the daemon's bytes.  From a slot's first restore on, the kernel
 * tracks which of its pages are written (userfaultfd's asynchronous
 * write-protect, Linux 6.7), so finding them reads page-table entries
 * only; untracked, the struct page of every page mapped is read, about
 * 1 ms for a 52 MB slot the trainer has read.  Not from the start: a
 * tracked slot's pages are mapped one fault each (4 times the cost of the
 * first read) rather than 16 at a time, so the trainer's first read of
 * each slot goes untracked.  With the trainer holding one step at a time,
 * one walk serves the `slots` slots it has given back since the last.
 *
 * A page the trainer only reads stays mapped across the slot's uses: a
 * walk drops only pages found written (protected, a read maps a page
 * protected: infeed_track_writes), and the daemon's page behind a kept
 * entry is the one it writes the next steps into (a punch of the memfd
 * unmaps it everywhere, and a page mapped again where no marker was left
 * counts as written once), so the slot shows the daemon's current bytes.
 * So a reading trainer takes page faults on its first pass over the ring
 * only (issue 35: about 250 ns a 4 KiB page, 16 pages a fault), and its
 * first walk of each slot sets the tracking up (about 100 ns a page:
 * the untracked walk, then the protection); later walks of a slot read
 * nothing written, about 3 ns a page (Linux 6.18, this VM; a group's
 * ring of 58 slots takes 58 steps to pass, test-libinfeed-cow).
 *
 * Most trainers write nothing, and the walk reads every page-table entry
 * of the slots all the same (about 40 us for three 52 MB slots, hot; three
 * times that cold, after a step's sleep).  So a walk is skipped for a slot
 * when nothing can have written it since its last restore: after one, every
 * page of the slot is unmapped or mapped read-only (a file page, or
 * write-protected), so a write to it takes a page fault, or, through the
 * kernel's get_user_pages (O_DIRECT, RDMA), makes a private anonymous page
 * without a fault counted.  Neither the process's faults (getrusage) nor
 * its anonymous pages (/proc/self/statm, exact since Linux 6.16) changed:
 * nothing was written (infeed_ring_stamp), unless another process wrote
 * (process_vm_writev) while this one freed as many anonymous pages: such
 * a write is not sure to be dropped (infeed.h, copy_on_write).  A ring just mapped is clean
 * the same way (nothing of it is mapped yet); a slot walked is stamped
 * after the walk, whose own faults (its stack, the descriptors it opens)
 * are no write of the trainer's.
 */

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/param.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <linux/userfaultfd.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libinfeed-private.h"

static void	infeed_ring_stamp_new(struct infeed_ring *);

/* No ring, no pagemap open. */
void
infeed_ring_init(struct infeed_ring *r)
{
	memset(r, 0, sizeof(*r));
	r->pagemap = -1;
	r->uffd = -1;
	r->statm = -1;
}

/* The bit of @slot in a held mask (slots are fewer than 64). */
static uint64_t
infeed_ring_slot_bit(uint32_t slot)
{
	return (slot < 64 ? UINT64_C(1) << slot : 0);
}

/*
 * The session ended (a daemon restart, a reload, a detach): unmap its
 * ring, unless the caller still holds steps in it; then keep the mapping
 * (as @session_id's) until they are released, so that a held step stays
 * readable and unchanged (a new ring is mapped elsewhere).
 */
void
infeed_ring_unmap(struct infeed_ring *r, uint64_t session_id)
{
	struct infeed_old_ring	*o;

	if (r->base != NULL && r->held > 0 && (o = reallocarray(r->old,
	    r->nold + 1, sizeof(*r->old))) != NULL) {
		r->old = o;
		o[r->nold].base = r->base;
		o[r->nold].bytes = r->bytes;
		o[r->nold].session_id = session_id;
		o[r->nold].held = r->held;
		r->nold++;
	} else if (r->base != NULL)
		munmap(r->base, r->bytes);
	r->base = NULL;
	r->held = 0;
	r->unrestored = 0;
	r->tracked = 0;
	r->stamped = 0;
}

/* Unmap every ring, held or not, and close the pagemap. */
void
infeed_ring_free(struct infeed_ring *r)
{
	r->held = 0;
	infeed_ring_unmap(r, 0);
	while (r->nold > 0) {
		r->nold--;
		munmap(r->old[r->nold].base, r->old[r->nold].bytes);
	}
	free(r->old);
	r->old = NULL;
	if (r->pagemap != -1)
		close(r->pagemap);
	r->pagemap = -1;
	if (r->uffd != -1)
		close(r->uffd);
	r->uffd = -1;
	if (r->statm != -1)
		close(r->statm);
	r->statm = -1;
}

/*
 * A step of an ended session was released: unmap its ring after the
 * last.  Returns whether @session_id was such a session.
 */
bool
infeed_ring_release_old(struct infeed_ring *r, uint64_t session_id,
    uint32_t slot)
{
	size_t	i;

	for (i = 0; i < r->nold; i++) {
		/* A session that left its group has two rings: find the one. */
		if (r->old[i].session_id != session_id ||
		    !(r->old[i].held & infeed_ring_slot_bit(slot)))
			continue;
		/* Releasing a step twice does not free another's ring. */
		r->old[i].held &= ~infeed_ring_slot_bit(slot);
		if (r->old[i].held == 0) {
			munmap(r->old[i].base, r->old[i].bytes);
			r->old[i] = r->old[--r->nold];
		}
		return (true);
	}
	return (false);
}

/* Map @r->bytes of @fd (not closed) as @r says: its base, or NULL. */
static uint8_t *
infeed_ring_mmap(struct infeed_ring *r, int fd, bool copy_on_write)
{
	uint8_t	*base;

	/*
	 * Copy-on-write: the descriptor stays read-only, so the trainer's
	 * writes land in private pages and never reach the daemon.
	 */
	if (copy_on_write)
		base = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE, fd, 0);
	else
		base = mmap(NULL, r->bytes, PROT_READ, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return (NULL);
#ifdef MADV_HUGEPAGE
	/*
	 * Where the daemon's pages are huge, map them so: fewer faults.  Not
	 * copy-on-write, where a write would copy 2 MiB instead of 4 KiB.
	 */
	if (!copy_on_write)
		(void)madvise(base, r->bytes, MADV_HUGEPAGE);
#endif
	return (base);
}

/* Whether the caller holds a step of @session_id numbered in @mask. */
static bool
infeed_ring_holds(const struct infeed_ring *r, uint64_t session_id,
    uint64_t mask)
{
	size_t	i;

	if (r->held & mask)
		return (true);
	for (i = 0; i < r->nold; i++) {
		if (r->old[i].session_id == session_id &&
		    (r->old[i].held & mask))
			return (true);
	}
	return (false);
}

/*
 * The session left its shared group, or rejoined it: map the ring that
 * came with the Step that says @ring (its own, or the group's again); the
 * one it replaces stays mapped (as an ended session's) while the caller
 * holds steps in it, released to the daemon by their slot numbers, which
 * the new ring's do not overlap.
 */
int
infeed_ring_remap(struct infeed *f, const struct infeed_ring_shape *ring)
{
	struct infeed_ring	*r = &f->ring;
	uint8_t			*base;
	uint64_t		 numbers = 0;
	int			 fd;

	if ((fd = infeed_conn_take_fd(&f->conn)) == -1)
		return (infeed_fail(f, INFEED_ERR_PROTOCOL, "a Step with a new "
		    "ring came without its file descriptor"));
	if (ring->slots > 0 && ring->first_slot + (uint64_t)ring->slots <= 64)
		numbers = (ring->slots == 64 ? ~UINT64_C(0) :
		    (UINT64_C(1) << ring->slots) - 1) << ring->first_slot;
	if (numbers == 0 || infeed_ring_holds(r, f->session_id, numbers) ||
	    ring->slot_bytes != r->slot_bytes ||
	    ring->ring_bytes / ring->slots < ring->slot_bytes ||
	    ring->ring_bytes > SIZE_MAX) {
		close(fd);
		return (infeed_fail(f, INFEED_ERR_PROTOCOL, "a Step's new ring "
		    "(%u slots of %llu bytes from slot %u, %llu bytes) does "
		    "not fit beside the ring of %u slots of %llu bytes from "
		    "slot %u (at most 64 slot numbers, none of a step still "
		    "held)", ring->slots, (unsigned long long)ring->slot_bytes,
		    ring->first_slot, (unsigned long long)ring->ring_bytes,
		    r->slots, (unsigned long long)r->slot_bytes,
		    r->first_slot));
	}
	infeed_ring_unmap(r, f->session_id);
	r->bytes = ring->ring_bytes;
	base = infeed_ring_mmap(r, fd, r->copy_on_write);
	close(fd);
	if (base == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "cannot map the "
		    "session's new ring (%zu bytes): %s", r->bytes,
		    strerror(errno)));
	r->base = base;
	r->slots = ring->slots;
	r->first_slot = ring->first_slot;
	infeed_ring_stamp_new(r);
	return (INFEED_OK);
}

/* Map the ring @at describes from @fd, which it closes. */
int
infeed_ring_map(struct infeed *f, int fd, const struct infeed_ring_shape *at,
    bool copy_on_write)
{
	struct infeed_ring	*r = &f->ring;
	int			 label_dtype = at->label_dtype;

	if (label_dtype != INFEED_DTYPE_INT32 &&
	    label_dtype != INFEED_DTYPE_INT64) {
		close(fd);
		return (infeed_fail(f, INFEED_ERR_PROTOCOL, "Attached says "
		    "the ring's labels are of dtype %d; this libinfeed reads "
		    "int32 (%d) and int64 (%d)", label_dtype,
		    INFEED_DTYPE_INT32, INFEED_DTYPE_INT64));
	}
	r->bytes = at->ring_bytes;
	r->base = infeed_ring_mmap(r, fd, copy_on_write);
	close(fd);
	if (r->base == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "cannot map the step "
		    "ring (%zu bytes): %s", r->bytes, strerror(errno)));
	r->first_slot = 0;
	r->slot_bytes = at->slot_bytes;
	r->data_offset = at->data_offset;
	r->labels_offset = at->labels_offset;
	r->indices_offset = at->indices_offset;
	r->label_dtype = label_dtype;
	r->slots = at->slots;
	r->copy_on_write = copy_on_write;
	r->unrestored = 0;
	r->tracked = 0;
	r->stamped = 0;
	infeed_ring_stamp_new(r);
	return (INFEED_OK);
}

/*
 * The PAGEMAP_SCAN ioctl of /proc/self/pagemap (Linux 6.7), for headers
 * older than it (Debian 12's are 6.1): it returns the ranges of pages
 * that match, so finding a slot's written pages costs a page-table walk
 * in the kernel instead of reading 8 bytes per page.
 */
#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t	start;
	uint64_t	end;
	uint64_t	categories;
};

struct pm_scan_arg {
	uint64_t	size;
	uint64_t	flags;
	uint64_t	start;
	uint64_t	end;
	uint64_t	walk_end;
	uint64_t	vec;
	uint64_t	vec_len;
	uint64_t	max_pages;
	uint64_t	category_inverted;
	uint64_t	category_mask;
	uint64_t	category_anyof_mask;
	uint64_t	return_mask;
};

#define PAGEMAP_SCAN		_IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING	(1 << 0)
#define PM_SCAN_CHECK_WPASYNC	(1 << 1)
#define PAGE_IS_WRITTEN		(1 << 1)
#define PAGE_IS_FILE		(1 << 2)
#define PAGE_IS_PRESENT		(1 << 3)
#define PAGE_IS_SWAPPED		(1 << 4)
#endif

/* userfaultfd's asynchronous write-protect (Linux 6.7), likewise. */
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC	(1 << 15)
#endif

/* What a PAGEMAP_SCAN of the ring looks for (infeed_restore_scan). */
enum infeed_scan {
	INFEED_SCAN_FILE,	/* untracked: private pages, dropped */
	INFEED_SCAN_WRITTEN,	/* tracked: written pages, dropped */
	INFEED_SCAN_PROTECT	/* pages mapped, protected */
};

static int	infeed_restore_scan(struct infeed_ring *, uintptr_t, uintptr_t,
		    enum infeed_scan);

/*
 * Have the kernel track the pages the trainer writes in [@lo, @hi), just
 * restored: registered for write-protect in asynchronous mode, a write
 * clears a page's protection without stopping the writer, and
 * PAGEMAP_SCAN finds the unprotected (written) pages from the page-table
 * entries alone, protecting them again.  The scan protects every page
 * of the range, those not mapped too (the kernel leaves a marker in
 * their entries, making page tables for them where there were none), so
 * a page first read later is mapped protected, and counts as written
 * only when written (test-libinfeed-cow's pages read late).
 * Returns whether it does; where the kernel, its settings or a seccomp
 * filter deny userfaultfd, never.
 */
static bool
infeed_track_writes(struct infeed_ring *r, uintptr_t lo, uintptr_t hi)
{
	struct uffdio_api		api;
	struct uffdio_register		reg;

	if (r->no_uffd || r->no_pagemap_scan || r->pagemap == -1)
		return (false);
	if (r->uffd == -1) {
		memset(&api, 0, sizeof(api));
		api.api = UFFD_API;
		api.features = UFFD_FEATURE_WP_ASYNC;
		/* User-mode only: what the unprivileged may open. */
		if ((r->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC |
		    O_NONBLOCK | UFFD_USER_MODE_ONLY)) == -1 ||
		    ioctl(r->uffd, UFFDIO_API, &api) == -1) {
			if (r->uffd != -1)
				close(r->uffd);
			r->uffd = -1;
			r->no_uffd = true;
			return (false);
		}
	}
	memset(&reg, 0, sizeof(reg));
	reg.range.start = lo;
	reg.range.len = hi - lo;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	if (ioctl(r->uffd, UFFDIO_REGISTER, &reg) == -1 ||
	    infeed_restore_scan(r, lo, hi, INFEED_SCAN_PROTECT) == -1) {
		(void)ioctl(r->uffd, UFFDIO_UNREGISTER, &reg.range);
		r->no_uffd = true;
		return (false);
	}
	return (true);
}

/*
 * Whether /proc/self/pagemap entry @ent, of the copy-on-write ring, is a
 * page the trainer wrote: a private (anonymous) copy, in memory (bit 63)
 * or swapped out (bit 62).  File pages (bit 61: the daemon's shared
 * memory, or one of its pages being migrated) are not.
 */
bool
infeed_pagemap_written(uint64_t ent)
{
	return (((ent >> 63 & 1) || (ent >> 62 & 1)) && !(ent >> 61 & 1));
}

/*
 * Drop the private copies of pages in [@lo, @hi).  The kernel refuses
 * MADV_DONTNEED on locked memory (a trainer that called mlockall()): the
 * ring's pages are the daemon's shared memory, so they are unlocked, and
 * dropped then, rather than left holding the trainer's writes.
 */
static void
infeed_drop_pages(uintptr_t lo, uintptr_t hi)
{
	if (madvise((void *)lo, hi - lo, MADV_DONTNEED) == -1 &&
	    errno == EINVAL && munlock((void *)lo, hi - lo) == 0)
		(void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/*
 * Drop the private pages in [@lo, @hi) found by PAGEMAP_SCAN, as @scan
 * says: written (and protected again) where tracked; else not
 * file-backed, and present or swapped (a written page that went to swap
 * would come back from it when the slot is refilled).  Or protect the
 * pages mapped, dropping none.  -1 when the kernel has no such ioctl
 * (then never again), or refuses a tracked scan (then no slot is tracked
 * again, and the caller scans untracked).
 */
static int
infeed_restore_scan(struct infeed_ring *r, uintptr_t lo, uintptr_t hi,
    enum infeed_scan scan)
{
	struct page_region	reg[32];
	struct pm_scan_arg	arg;
	long			n, i;

	while (lo < hi) {
		memset(&arg, 0, sizeof(arg));
		arg.size = sizeof(arg);
		arg.start = lo;
		arg.end = hi;
		arg.vec = (uintptr_t)reg;
		arg.vec_len = sizeof(reg) / sizeof(reg[0]);
		if (scan != INFEED_SCAN_FILE) {
			arg.flags = PM_SCAN_WP_MATCHING |
			    PM_SCAN_CHECK_WPASYNC;
			arg.category_mask = PAGE_IS_WRITTEN;
			arg.return_mask = PAGE_IS_WRITTEN;
		} else {
			arg.category_mask = PAGE_IS_FILE;
			arg.category_inverted = PAGE_IS_FILE;
			arg.category_anyof_mask = PAGE_IS_PRESENT |
			    PAGE_IS_SWAPPED;
			arg.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		}
		if ((n = ioctl(r->pagemap, PAGEMAP_SCAN, &arg)) == -1) {
			if (scan != INFEED_SCAN_FILE)
				r->no_uffd = true;
			else
				r->no_pagemap_scan = true;
			return (-1);
		}
		for (i = 0; scan != INFEED_SCAN_PROTECT && i < n; i++)
			infeed_drop_pages(reg[i].start, reg[i].end);
		if (arg.walk_end <= lo)
			break;
		lo = arg.walk_end;
	}
	return (0);
}

/*
 * Drop the private pages the trainer wrote in [@lo, @hi), slots given
 * back, tracked or not, so that they show the daemon's bytes again.
 * /proc/self/pagemap says which pages are private copies: dropping only
 * those costs far less than dropping whole slots.  MADV_DONTNEED on the
 * private mapping frees a swapped copy's swap entry too.
 */
static void
infeed_restore_range(struct infeed_ring *r, uintptr_t lo, uintptr_t hi,
    bool tracked)
{
	uint64_t	 ent[512];
	size_t		 page = (size_t)sysconf(_SC_PAGESIZE), npages, i, j, n;
	size_t		 run = SIZE_MAX;

	npages = (hi - lo) / page;
	if (r->pagemap == -1 && (r->pagemap = open("/proc/self/pagemap",
	    O_RDONLY | O_CLOEXEC)) == -1) {
		infeed_drop_pages(lo, hi);
		return;
	}
	if (tracked && !r->no_pagemap_scan && !r->no_uffd &&
	    infeed_restore_scan(r, lo, hi, INFEED_SCAN_WRITTEN) == 0)
		return;
	/* Untracked, or a tracked scan refused. */
	if (!r->no_pagemap_scan && infeed_restore_scan(r, lo, hi,
	    INFEED_SCAN_FILE) == 0)
		return;
	for (i = 0; i < npages; i += n) {
		n = MIN(npages - i, sizeof(ent) / sizeof(ent[0]));
		if (pread(r->pagemap, ent, n * sizeof(*ent),
		    (off_t)((lo / page + i) * sizeof(*ent))) !=
		    (ssize_t)(n * sizeof(*ent))) {
			infeed_drop_pages(lo + i * page, hi);
			return;
		}
		for (j = 0; j < n; j++) {
			if (infeed_pagemap_written(ent[j])) {
				if (run == SIZE_MAX)
					run = i + j;
			} else if (run != SIZE_MAX) {
				infeed_drop_pages(lo + run * page,
				    lo + (i + j) * page);
				run = SIZE_MAX;
			}
		}
	}
	if (run != SIZE_MAX)
		infeed_drop_pages(lo + run * page, hi);
}

/*
 * What the process has done to its memory so far, in @s: its page faults
 * and its anonymous pages.  False where either cannot be read (then no
 * walk is skipped).  statm is opened again in a forked child: the
 * parent's would describe the parent.
 */
static bool
infeed_ring_stamp(struct infeed_ring *r, struct infeed_mem_stamp *s)
{
	struct rusage	 ru;
	char		 buf[160], *p = buf, *end;
	uint64_t	 v[3];
	ssize_t		 n;
	pid_t		 pid = getpid();
	int		 i;

	if (r->statm != -1 && r->statm_pid != pid) {
		close(r->statm);
		r->statm = -1;
	}
	if (r->statm == -1) {
		if ((r->statm = open("/proc/self/statm", O_RDONLY |
		    O_CLOEXEC)) == -1)
			return (false);
		r->statm_pid = pid;
	}
	if (getrusage(RUSAGE_SELF, &ru) == -1 ||
	    (n = pread(r->statm, buf, sizeof(buf) - 1, 0)) <= 0)
		return (false);
	buf[n] = '\0';
	/* Size, resident, shared (file and shmem); not sscanf (callgrind: 400
	 * instructions and 19 cold cache lines a call). */
	for (i = 0; i < 3; i++, p = end) {
		v[i] = strtoull(p, &end, 10);
		if (end == p)
			return (false);
	}
	if (v[2] > v[1])
		return (false);
	s->faults = (uint64_t)ru.ru_minflt + (uint64_t)ru.ru_majflt;
	s->anon = v[1] - v[2];
	return (true);
}

/* The slots of @mask are clean now: stamp them (or forget their stamps). */
static void
infeed_ring_stamp_slots(struct infeed_ring *r, uint64_t mask)
{
	struct infeed_mem_stamp	now;
	uint64_t		m;

	if (mask == 0)
		return;
	r->stamped &= ~mask;
	if (!infeed_ring_stamp(r, &now))
		return;
	for (m = mask; m != 0; m &= m - 1)
		r->stamp[__builtin_ctzll(m)] = now;
	r->stamped |= mask;
}

/*
 * A copy-on-write ring just mapped: nothing is mapped in it yet, so
 * nothing can be written without a fault; its slots are clean until one.
 */
static void
infeed_ring_stamp_new(struct infeed_ring *r)
{
	uint64_t	mask;

	if (!r->copy_on_write || r->slots == 0 ||
	    r->first_slot + (uint64_t)r->slots > 64)
		return;
	mask = (r->slots == 64 ? ~UINT64_C(0) : (UINT64_C(1) << r->slots) -
	    1) << r->first_slot;
	infeed_ring_stamp_slots(r, mask);
}

/*
 * Copy-on-write ring: restore the slots of @mask, none held, one walk for
 * each run of neighbours tracked alike (a walk over a held slot would
 * protect its written pages again, and they would not be found when it
 * comes back); a slot restored untracked is tracked from then on.
 */
static void
infeed_restore_slots(struct infeed_ring *r, uint64_t mask)
{
	struct infeed_mem_stamp	now;
	size_t			page = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t		run, clean = 0, m, walked;
	uint32_t		first, end, i;
	uintptr_t		lo, hi;
	bool			tracked;

	if (infeed_ring_stamp(r, &now)) {
		for (m = mask & r->stamped; m != 0; m &= m - 1) {
			i = (uint32_t)__builtin_ctzll(m);
			if (r->stamp[i].faults == now.faults &&
			    r->stamp[i].anon == now.anon)
				clean |= UINT64_C(1) << i;
		}
	}
	r->walks_skipped += (uint64_t)__builtin_popcountll(clean);
	walked = mask &= ~clean;
	while (mask != 0) {
		first = (uint32_t)__builtin_ctzll(mask);
		tracked = (r->tracked >> first & 1) != 0;
		run = 0;
		for (end = first; end < 64 && (mask >> end & 1) &&
		    ((r->tracked >> end & 1) != 0) == tracked; end++)
			run |= UINT64_C(1) << end;
		mask &= ~run;
		/* Bits are Step.slot numbers: from first_slot in this ring. */
		lo = (uintptr_t)(r->base + (uint64_t)(first - r->first_slot) *
		    r->slot_bytes);
		hi = (uintptr_t)(r->base + (uint64_t)(end - r->first_slot) *
		    r->slot_bytes);
		lo -= lo % page;
		hi = (hi + page - 1) / page * page;
		infeed_restore_range(r, lo, hi, tracked);
		/* Tracked by whole pages only, none of a held slot. */
		if (!tracked && r->slot_bytes % page == 0 &&
		    infeed_track_writes(r, lo, hi))
			r->tracked |= run;
	}
	/*
	 * Stamped after the walks, whose own faults (the stack, the
	 * descriptors opened) are not the trainer's writes: no one writes
	 * a slot given back.
	 */
	infeed_ring_stamp_slots(r, walked);
}

/*
 * The step in @slot goes to the caller: held until given back.  A slot
 * that may hold the trainer's writes from an earlier step is restored
 * first, with every other slot given back since.  Return: the slot's
 * first byte, or NULL when the slot is outside the ring.
 */
const uint8_t *
infeed_ring_take(struct infeed_ring *r, uint32_t slot)
{
	if (slot < r->first_slot ||
	    (uint64_t)(slot - r->first_slot) * r->slot_bytes >= r->bytes)
		return (NULL);
	if (r->unrestored & infeed_ring_slot_bit(slot)) {
		infeed_restore_slots(r, r->unrestored);
		r->unrestored = 0;
	}
	r->held |= infeed_ring_slot_bit(slot);
	return (r->base + (uint64_t)(slot - r->first_slot) * r->slot_bytes);
}

/*
 * The caller gave @slot back; in a copy-on-write ring it may hold the
 * trainer's writes, dropped when the slot is taken again.
 */
void
infeed_ring_give_back(struct infeed_ring *r, uint32_t slot)
{
	if (r->copy_on_write && (r->held & infeed_ring_slot_bit(slot)))
		r->unrestored |= infeed_ring_slot_bit(slot);
	r->held &= ~infeed_ring_slot_bit(slot);
}

/* How many slots of the session's ring the caller holds. */
uint32_t
infeed_ring_held_count(const struct infeed_ring *r)
{
	return ((uint32_t)__builtin_popcountll(r->held));
}
