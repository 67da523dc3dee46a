/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/ring.c: the layout of a step ring, its charge to
 * the memory budget and the messages of a refusal in exact units, the
 * read-only descriptor the client gets, the seals, the memory kept from
 * ended sessions (zeroed, for the same user only, given up under
 * pressure and with time, punched), the memory of an ended session whose
 * client's process still holds steps (charged until that process exits,
 * whose refusals name it), and the one cycle of
 * slot states (a forbidden move is fatal: those tests run it in a forked
 * child and read what it said on its way out).
 */

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "ring.h"
#include "runner.h"

#define KiB	(UINT64_C(1) << 10)
#define MiB	(UINT64_C(1) << 20)
#define GiB	(UINT64_C(1) << 30)
#define TiB	(UINT64_C(1) << 40)

#define TEST_UID	1000	/* the user of every ring but where said */
#define TEST_GID	100

static const struct ring_owner	 test_owner = { TEST_UID, TEST_GID, 0, 0 };
static struct ring_budget	 budget;
static char			*cause;

/* A generous budget and no message for every test. */
static void
setup(void)
{
	ring_budget_init(&budget, 64 * MiB, "/etc/infeed/test.conf", 0);
	cause = NULL;
}

/*
 * A budget of 64 MiB that keeps ended sessions' memory a minute, and zeroes
 * it at once (the daemon's waits RING_SCRUB_AFTER_MS: setup_keep_late()).
 */
static void
setup_keep(void)
{
	ring_budget_init(&budget, 64 * MiB, "/etc/infeed/test.conf", 60000);
	budget.scrub_after_ms = 0;
	cause = NULL;
}

/* ... that zeroes kept memory once idle 2 s. */
static void
setup_keep_late(void)
{
	setup_keep();
	budget.scrub_after_ms = 2000;
}

/* Free the message a test left. */
static void
teardown(void)
{
	ring_budget_clear(&budget);
	free(cause);
	cause = NULL;
}

/* A ring with labels of @label_dtype that must be made. */
static struct ring *
ring_ok_labels(uint64_t rows, uint64_t row_bytes,
    enum infeed_dtype label_dtype, uint32_t slots)
{
	struct ring	*r;

	r = ring_new(&budget, rows, row_bytes, label_dtype, slots, &test_owner,
	    &cause);
	ck_assert_msg(r != NULL, "ring_new(%llu rows, %llu bytes, labels %d, "
	    "%u slots): %s", (unsigned long long)rows,
	    (unsigned long long)row_bytes, (int)label_dtype, slots,
	    cause != NULL ? cause : "(no cause)");
	return (r);
}

/* A ring with int32 labels (the default) that must be made. */
static struct ring *
ring_ok(uint64_t rows, uint64_t row_bytes, uint32_t slots)
{
	return (ring_ok_labels(rows, row_bytes, INFEED_DTYPE_INT32, slots));
}

/* Check every layout rule for one ring with labels of @label_dtype. */
static void
check_layout_labels(uint64_t rows, uint64_t row_bytes,
    enum infeed_dtype label_dtype, uint32_t slots)
{
	const struct ring_layout	*l;
	struct ring			*r;
	uint64_t			 lsize;

	lsize = label_dtype == INFEED_DTYPE_INT64 ? 8 : 4;
	r = ring_ok_labels(rows, row_bytes, label_dtype, slots);
	l = &r->layout;
	ck_assert_uint_eq(l->slots, slots);
	ck_assert_uint_eq(l->label_dtype, label_dtype);
	ck_assert_uint_eq(l->row_bytes, row_bytes);
	ck_assert_uint_eq(l->data_offset, 0);
	ck_assert_uint_eq(l->data_offset % 64, 0);
	ck_assert_uint_eq(l->labels_offset % 64, 0);
	ck_assert_uint_eq(l->indices_offset % 64, 0);
	/* Data, then the labels, then uint64 indices, none overlapping. */
	ck_assert_uint_ge(l->labels_offset, l->data_offset + rows * row_bytes);
	ck_assert_uint_lt(l->labels_offset, l->data_offset + rows * row_bytes +
	    64);
	ck_assert_uint_ge(l->indices_offset, l->labels_offset + rows * lsize);
	ck_assert_uint_lt(l->indices_offset, l->labels_offset + rows * lsize +
	    64);
	ck_assert_uint_ge(l->slot_bytes, l->indices_offset + rows * 8);
	ck_assert_uint_lt(l->slot_bytes, l->indices_offset + rows * 8 + 4096);
	ck_assert_uint_eq(l->slot_bytes % 4096, 0);
	ck_assert_uint_eq(l->ring_bytes, (uint64_t)slots * l->slot_bytes);
	/* The index table of slot i is where the layout says. */
	ck_assert_ptr_eq(ring_indices(r, slots - 1), r->mem->map +
	    (uint64_t)(slots - 1) * l->slot_bytes + l->indices_offset);
	ck_assert_uint_eq(ring_count(r, SLOT_FREE), slots);
	ring_free(r);
}

/* Check every layout rule for one ring with int32 labels. */
static void
check_layout(uint64_t rows, uint64_t row_bytes, uint32_t slots)
{
	check_layout_labels(rows, row_bytes, INFEED_DTYPE_INT32, slots);
}

START_TEST(test_layout_aligned_and_in_order)
{
	check_layout(1, 1, 1);
	check_layout(10, 12, 3);
	check_layout(4, 16, 2);			/* data ends on 64 */
	check_layout(64, 48, 4);
	check_layout(1000, 3 * 8 * 8 * 4, 2);	/* slot of several pages */
	check_layout(512, 8, 64);		/* slot of exactly one page */
	check_layout(7, 4093, 5);
}
END_TEST

/* int64 labels: 8 bytes a row, still 64-byte aligned, indices after. */
START_TEST(test_layout_int64_labels_twice_as_wide)
{
	struct ring	*a, *b;

	check_layout_labels(1, 1, INFEED_DTYPE_INT64, 1);
	check_layout_labels(10, 12, INFEED_DTYPE_INT64, 3);
	check_layout_labels(7, 4093, INFEED_DTYPE_INT64, 5);
	check_layout_labels(1000, 3 * 8 * 8 * 4, INFEED_DTYPE_INT64, 2);
	check_layout_labels(512, 8, INFEED_DTYPE_INT64, 64);
	a = ring_ok_labels(100, 1000, INFEED_DTYPE_INT32, 2);
	b = ring_ok_labels(100, 1000, INFEED_DTYPE_INT64, 2);
	/*
	 * The labels start at the same place, the indices later: 100000
	 * bytes of data, then 400 or 800 bytes of labels, each rounded up
	 * to 64.
	 */
	ck_assert_uint_eq(a->layout.labels_offset, 100032);
	ck_assert_uint_eq(b->layout.labels_offset, 100032);
	ck_assert_uint_eq(a->layout.indices_offset, 100480);
	ck_assert_uint_eq(b->layout.indices_offset, 100864);
	ck_assert_uint_eq(a->layout.label_dtype, INFEED_DTYPE_INT32);
	ck_assert_uint_eq(b->layout.label_dtype, INFEED_DTYPE_INT64);
	ring_free(a);
	ring_free(b);
	/*
	 * 256 rows of 4 bytes: with int32 labels exactly one page a slot
	 * (1024 + 1024 + 2048), with int64 labels two (1024 + 2048 + 2048).
	 */
	a = ring_ok_labels(256, 4, INFEED_DTYPE_INT32, 1);
	b = ring_ok_labels(256, 4, INFEED_DTYPE_INT64, 1);
	ck_assert_uint_eq(a->layout.slot_bytes, 4096);
	ck_assert_uint_eq(b->layout.slot_bytes, 8192);
	ring_free(a);
	ring_free(b);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

/* Labels of another dtype are the session's bug: fatal, and said. */
static void
make_float_labels(void *unused, int dtype)
{
	(void)unused;
	(void)ring_new(&budget, 4, 8, (enum infeed_dtype)dtype, 1, &test_owner,
	    &cause);
}

START_TEST(test_layout_other_label_dtype_is_fatal)
{
	char	err[512];
	int	status;

	status = run_in_child(make_float_labels, NULL, INFEED_DTYPE_FLOAT32,
	    err, sizeof(err));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
	    "status %d", status);
	ck_assert_msg(strstr(err, "labels of dtype 5") != NULL, "%s", err);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

START_TEST(test_budget_charged_at_new_and_given_back_at_free)
{
	struct ring	*a, *b;
	uint64_t	 abytes;

	/* The ring, and its index tables: rows x slots x 8 bytes, twice. */
	a = ring_ok(100, 1000, 3);
	ck_assert_uint_eq(a->tables, 100 * 3 * 8 * 2);
	abytes = a->layout.ring_bytes + a->tables;
	ck_assert_uint_eq(budget.used, abytes);
	b = ring_ok(10, 10, 2);
	ck_assert_uint_eq(budget.used, abytes + b->layout.ring_bytes +
	    b->tables);
	ring_free(a);
	ck_assert_uint_eq(budget.used, b->layout.ring_bytes + b->tables);
	ring_free(b);
	ck_assert_uint_eq(budget.used, 0);
	ring_free(NULL);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

START_TEST(test_budget_exact_fit_made_one_byte_short_refused)
{
	struct ring	*r;
	uint64_t	 need;

	r = ring_ok(10, 12, 3);
	need = r->layout.ring_bytes + r->tables;
	ring_free(r);

	budget.limit = need;
	r = ring_ok(10, 12, 3);
	ck_assert_uint_eq(budget.used, need);
	ring_free(r);

	budget.limit = need - 1;
	ck_assert_ptr_null(ring_new(&budget, 10, 12, INFEED_DTYPE_INT32, 3,
	    &test_owner, &cause));
	ck_assert_ptr_nonnull(cause);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

START_TEST(test_budget_refusal_in_kib_not_zero_mib)
{
	int	fds = count_fds(0, NULL);

	/* 2 slots of 104 KiB (100 KiB of data, labels, indices, rounded). */
	budget.limit = 100 * KiB;
	ck_assert_ptr_null(ring_new(&budget, 100, 1024, INFEED_DTYPE_INT32, 2,
	    &test_owner, &cause));
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, "needs 211.1 KiB (216192 bytes) (2 slots "
	    "of 104 KiB and 3.1 KiB (3200 bytes) of index tables)") != NULL,
	    "%s", cause);
	ck_assert_msg(strstr(cause, "only 100 KiB") != NULL, "%s", cause);
	ck_assert_msg(strstr(cause, "(100 KiB, memory_budget in "
	    "/etc/infeed/test.conf)") != NULL, "%s", cause);
	ck_assert_msg(strstr(cause, "0 MiB") == NULL, "%s", cause);
	ck_assert_uint_eq(budget.used, 0);
	ck_assert_int_eq(count_fds(0, NULL), fds);
}
END_TEST

START_TEST(test_budget_refusal_counts_what_others_use)
{
	struct ring	*a;
	uint64_t	 left;

	budget.limit = 1536 * KiB;
	a = ring_ok(100, 1024, 2);		/* 208 KiB + 3200 bytes */
	left = budget.limit - a->layout.ring_bytes - a->tables;
	ck_assert_uint_eq(left, 1328 * KiB - 3200);
	/* 8 slots of 256 KiB + one page: 2080 KiB, more than is left. */
	ck_assert_ptr_null(ring_new(&budget, 256, 1024, INFEED_DTYPE_INT32, 8,
	    &test_owner, &cause));
	ck_assert_msg(strstr(cause, "only 1.3 MiB (1356672 bytes)") != NULL,
	    "%s", cause);
	ck_assert_msg(strstr(cause, "(1.5 MiB (1572864 bytes), "
	    "memory_budget") != NULL, "%s", cause);
	ck_assert_uint_eq(budget.used, a->layout.ring_bytes + a->tables);
	ring_free(a);
	ck_assert_uint_eq(budget.used, 0);

	/* Used beyond the limit (a reload lowered it): nothing is free. */
	budget.used = 2 * MiB;
	free(cause);
	cause = NULL;
	ck_assert_ptr_null(ring_new(&budget, 1, 1, INFEED_DTYPE_INT32, 1,
	    &test_owner, &cause));
	ck_assert_msg(strstr(cause, "only 0 bytes") != NULL, "%s", cause);
	ck_assert_uint_eq(budget.used, 2 * MiB);
}
END_TEST

/* ring_mem_format_bytes(@v) must read @want. */
static void
check_format(uint64_t v, const char *want)
{
	char	buf[64];

	ck_assert_str_eq(ring_mem_format_bytes(v, buf, sizeof(buf)), want);
}

START_TEST(test_format_bytes_exact_units)
{
	char	small[8];

	check_format(0, "0 bytes");
	check_format(300, "300 bytes");
	check_format(1023, "1023 bytes");
	check_format(1024, "1 KiB");
	check_format(1536, "1.5 KiB (1536 bytes)");
	check_format(100 * KiB, "100 KiB");
	check_format(512 * KiB, "512 KiB");
	check_format(1023 * KiB, "1023 KiB");
	check_format(MiB, "1 MiB");
	check_format(MiB + MiB / 2, "1.5 MiB (1572864 bytes)");
	check_format(MiB + 1, "1.0 MiB (1048577 bytes)");
	check_format(4 * GiB, "4 GiB");
	check_format(TiB, "1 TiB");
	check_format(2048 * TiB, "2048 TiB");
	/* Never a size that rounds to nothing without its bytes. */
	check_format(MiB - 1, "1024.0 KiB (1048575 bytes)");
	/* A short buffer is cut, not overrun. */
	ck_assert_str_eq(ring_mem_format_bytes(1536, small, sizeof(small)),
	    "1.5 KiB");
}
END_TEST

START_TEST(test_overflowing_step_refused_without_allocating)
{
	int	fds = count_fds(0, NULL);

	budget.limit = UINT64_MAX;
	ck_assert_ptr_null(ring_new(&budget, UINT64_C(1) << 40,
	    UINT64_C(1) << 40, INFEED_DTYPE_INT32, 2, &test_owner, &cause));
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, "a step of 1099511627776 rows of "
	    "1099511627776 bytes does not fit in memory") != NULL, "%s",
	    cause);
	free(cause);
	cause = NULL;

	/* Each slot fits, slots x slot_bytes does not. */
	ck_assert_ptr_null(ring_new(&budget, UINT64_C(1) << 58, 16,
	    INFEED_DTYPE_INT32, 4, &test_owner, &cause));
	ck_assert_msg(strstr(cause, "does not fit in memory") != NULL, "%s",
	    cause);
	free(cause);
	cause = NULL;

	ck_assert_ptr_null(ring_new(&budget, UINT64_MAX, 1, INFEED_DTYPE_INT32, 1,
	    &test_owner, &cause));
	ck_assert_msg(strstr(cause, "does not fit in memory") != NULL, "%s",
	    cause);
	ck_assert_uint_eq(budget.used, 0);
	ck_assert_int_eq(count_fds(0, NULL), fds);
}
END_TEST

START_TEST(test_readonly_fd_cannot_map_writable_but_sees_writes)
{
	struct ring	*r;
	uint64_t	*ro, len;
	void		*p;
	int		 fd;

	r = ring_ok(16, 32, 2);
	len = r->layout.ring_bytes;
	ck_assert_int_ge(fd = ring_readonly_fd(r), 0);
	ck_assert_int_ne(fd, r->mem->memfd);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);

	errno = 0;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_eq(p, MAP_FAILED);
	ck_assert_int_eq(errno, EACCES);
	ck_assert_int_eq(write(fd, "x", 1), -1);

	ro = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(ro, MAP_FAILED);
	/* Nor can the read-only mapping be made writable. */
	ck_assert_int_eq(mprotect(ro, len, PROT_READ | PROT_WRITE), -1);
	ck_assert_int_eq(errno, EACCES);

	ring_indices(r, 1)[15] = UINT64_C(0x0123456789abcdef);
	r->mem->map[5] = 0x5a;
	ck_assert_uint_eq(ro[(r->layout.slot_bytes +
	    r->layout.indices_offset) / 8 + 15], UINT64_C(0x0123456789abcdef));
	ck_assert_uint_eq(((uint8_t *)ro)[5], 0x5a);
	munmap(ro, len);
	close(fd);
	ring_free(r);
}
END_TEST

START_TEST(test_memfd_sealed_against_resize)
{
	struct ring	*r;
	off_t		 len;
	int		 seals, fd;

	r = ring_ok(16, 32, 2);
	len = (off_t)r->layout.ring_bytes;
	seals = fcntl(r->mem->memfd, F_GET_SEALS);
	ck_assert_int_ne(seals, -1);
	ck_assert_int_eq(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
	    F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	ck_assert_int_eq(ftruncate(r->mem->memfd, len / 2), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(ftruncate(r->mem->memfd, len * 2), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(ftruncate(r->mem->memfd, 0), -1);
	/* Seals cannot be taken off or changed. */
	ck_assert_int_eq(fcntl(r->mem->memfd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	ck_assert_int_ge(fd = ring_readonly_fd(r), 0);
	ck_assert_int_eq(ftruncate(fd, 0), -1);
	ck_assert_int_eq(lseek(r->mem->memfd, 0, SEEK_END), len);
	close(fd);
	ring_free(r);
}
END_TEST

START_TEST(test_slot_cycle_free_filling_ready_held_free)
{
	struct ring	*r;
	int		 round;

	r = ring_ok(4, 8, 3);
	for (round = 0; round < 2; round++) {
		ring_slot_set(r, 1, SLOT_FILLING);
		ck_assert_int_eq(r->slot[1].state, SLOT_FILLING);
		ring_slot_set(r, 1, SLOT_READY);
		ck_assert_int_eq(r->slot[1].state, SLOT_READY);
		ring_slot_hold(r, 1);
		ck_assert_int_eq(r->slot[1].state, SLOT_HELD);
		ring_slot_unhold(r, 1);
		ck_assert_int_eq(r->slot[1].state, SLOT_READY);
		ring_slot_set(r, 1, SLOT_FREE);
		ck_assert_int_eq(r->slot[1].state, SLOT_FREE);
	}
	ck_assert_uint_eq(ring_count(r, SLOT_FREE), 3);
	ring_free(r);
}
END_TEST

/*
 * A slot of a shared ring is HELD while any of its readers holds it, and
 * READY again only once the last lets go: never refilled meanwhile.
 */
START_TEST(test_slot_held_until_its_last_holder_lets_go)
{
	struct ring	*r;

	r = ring_ok(4, 8, 3);
	ring_slot_set(r, 2, SLOT_FILLING);
	ring_slot_set(r, 2, SLOT_READY);
	ck_assert(ring_slot_filled(r, 2));
	ring_slot_hold(r, 2);
	ring_slot_hold(r, 2);
	ring_slot_hold(r, 2);
	ck_assert_uint_eq(r->slot[2].holders, 3);
	ring_slot_unhold(r, 2);
	ring_slot_unhold(r, 2);
	ck_assert_int_eq(r->slot[2].state, SLOT_HELD);
	ck_assert(ring_slot_filled(r, 2));
	ck_assert_uint_eq(ring_count(r, SLOT_HELD), 1);
	ring_slot_unhold(r, 2);
	ck_assert_int_eq(r->slot[2].state, SLOT_READY);
	ck_assert_uint_eq(r->slot[2].holders, 0);
	ck_assert(!ring_slot_filled(r, 0));
	ring_free(r);
}
END_TEST

/*
 * In the child: bring slot 1 to state (arg >> 2) the allowed way (HELD by
 * two readers), then ask for state (arg & 3): HELD by one more holder.
 */
static void
child_move(void *p, int arg)
{
	struct ring	*r = p;
	enum slot_state	from = (enum slot_state)(arg >> 2);
	enum slot_state	to = (enum slot_state)(arg & 3);

	log_init("test-ring", 0);
	if (from != SLOT_FREE)
		ring_slot_set(r, 1, SLOT_FILLING);
	if (from == SLOT_READY || from == SLOT_HELD)
		ring_slot_set(r, 1, SLOT_READY);
	if (from == SLOT_HELD) {
		ring_slot_hold(r, 1);
		ring_slot_hold(r, 1);
	}
	if (to == SLOT_HELD)
		ring_slot_hold(r, 1);
	else
		ring_slot_set(r, 1, to);
}

/* In the child: let go of slot 1, held once, twice. */
static void
child_unhold_twice(void *p, int arg)
{
	struct ring	*r = p;

	(void)arg;
	log_init("test-ring", 0);
	ring_slot_set(r, 1, SLOT_FILLING);
	ring_slot_set(r, 1, SLOT_READY);
	ring_slot_hold(r, 1);
	ring_slot_unhold(r, 1);
	ring_slot_unhold(r, 1);
}

START_TEST(test_slot_forbidden_transition_is_fatal)
{
	static const char *const names[] = { "FREE", "FILLING", "READY",
	    "HELD" };
	static const int allowed[4][4] = {
		[SLOT_FREE][SLOT_FILLING] = 1,
		[SLOT_FILLING][SLOT_READY] = 1,
		[SLOT_READY][SLOT_FREE] = 1,
		[SLOT_READY][SLOT_HELD] = 1,
		[SLOT_HELD][SLOT_HELD] = 1,	/* one more holder */
	};
	struct ring	*r;
	char		 err[4096], want[64];
	int		 from, to, status;

	r = ring_ok(4, 8, 3);
	for (from = SLOT_FREE; from <= SLOT_HELD; from++) {
		for (to = SLOT_FREE; to <= SLOT_HELD; to++) {
			status = run_in_child(child_move, r, from << 2 | to,
			    err, sizeof(err));
			if (allowed[from][to]) {
				ck_assert_msg(WIFEXITED(status) &&
				    WEXITSTATUS(status) == 0, "%s -> %s "
				    "refused: %s", names[from], names[to],
				    err);
				continue;
			}
			ck_assert_msg(WIFEXITED(status) &&
			    WEXITSTATUS(status) != 0, "%s -> %s was allowed",
			    names[from], names[to]);
			if (to == SLOT_HELD)
				snprintf(want, sizeof(want), "slot 1 cannot "
				    "be held in state %d", from);
			else
				snprintf(want, sizeof(want), "slot 1 cannot "
				    "go from state %d to %d", from, to);
			ck_assert_msg(strstr(err, want) != NULL,
			    "%s -> %s: said '%s'", names[from], names[to],
			    err);
		}
	}
	status = run_in_child(child_unhold_twice, r, 0, err, sizeof(err));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
	    "a slot held once was let go of twice");
	ck_assert_msg(strstr(err, "slot 1 is not held") != NULL, "said '%s'",
	    err);
	/* The parent's copy never moved. */
	ck_assert_uint_eq(ring_count(r, SLOT_FREE), 3);
	ring_free(r);
}
END_TEST

/* In the child: move slot @arg, which does not exist. */
static void
child_move_missing(void *p, int arg)
{
	struct ring	*r = p;

	log_init("test-ring", 0);
	ring_slot_set(r, (uint32_t)arg, SLOT_FILLING);
}

/*
 * A slot index past the end is fatal with a message, without reading the
 * slot that does not exist (a heap-buffer-overflow once, under ASan).
 */
START_TEST(test_slot_index_out_of_range_is_fatal)
{
	struct ring	*r;
	char		 err[4096];
	int		 status;

	r = ring_ok(4, 8, 3);
	status = run_in_child(child_move_missing, r, 3, err, sizeof(err));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
	    "moving slot 3 of 3 was allowed");
	ck_assert_msg(strstr(err, "slot 3 of 3 does not exist") != NULL, "said "
	    "'%s'", err);
	status = run_in_child(child_move_missing, r, 1000000, err,
	    sizeof(err));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
	    "moving slot 1000000 of 3 was allowed");
	ck_assert_msg(strstr(err, "slot 1000000 of 3 does not exist") != NULL,
	    "said '%s'", err);
	ring_free(r);
}
END_TEST

START_TEST(test_find_and_count_by_state)
{
	struct ring	*r;

	r = ring_ok(2, 8, 5);
	ck_assert_int_eq(ring_find(r, SLOT_FREE), 0);
	ck_assert_int_eq(ring_find(r, SLOT_FILLING), -1);
	ck_assert_int_eq(ring_find(r, SLOT_READY), -1);
	ck_assert_int_eq(ring_find(r, SLOT_HELD), -1);
	ck_assert_uint_eq(ring_count(r, SLOT_FREE), 5);

	ring_slot_set(r, 0, SLOT_FILLING);
	ring_slot_set(r, 3, SLOT_FILLING);
	ring_slot_set(r, 3, SLOT_READY);
	ring_slot_set(r, 4, SLOT_FILLING);
	ring_slot_set(r, 4, SLOT_READY);
	ring_slot_hold(r, 4);
	ck_assert_int_eq(ring_find(r, SLOT_FREE), 1);
	ck_assert_int_eq(ring_find(r, SLOT_FILLING), 0);
	ck_assert_int_eq(ring_find(r, SLOT_READY), 3);
	ck_assert_int_eq(ring_find(r, SLOT_HELD), 4);
	ck_assert_uint_eq(ring_count(r, SLOT_FREE), 2);
	ck_assert_uint_eq(ring_count(r, SLOT_FILLING), 1);
	ck_assert_uint_eq(ring_count(r, SLOT_READY), 1);
	ck_assert_uint_eq(ring_count(r, SLOT_HELD), 1);

	ring_slot_set(r, 1, SLOT_FILLING);
	ring_slot_set(r, 2, SLOT_FILLING);
	ck_assert_int_eq(ring_find(r, SLOT_FREE), -1);
	ck_assert_uint_eq(ring_count(r, SLOT_FREE), 0);
	ck_assert_uint_eq(ring_count(r, SLOT_FILLING), 3);
	ring_free(r);
}
END_TEST

/* Every test, in cases by contract. */
/* Whether @len bytes at @p are all zero. */
static bool
all_zero(const uint8_t *p, uint64_t len)
{
	uint64_t	i;

	for (i = 0; i < len; i++) {
		if (p[i] != 0)
			return (false);
	}
	return (true);
}

/* A ring of @uid (group TEST_GID) for dataset @content that must be made. */
static struct ring *
ring_of_content(uid_t uid, uint64_t content, uint64_t rows,
    uint64_t row_bytes)
{
	struct ring_owner	 o = { uid, TEST_GID, content, 0 };
	struct ring		*r;

	r = ring_new(&budget, rows, row_bytes, INFEED_DTYPE_INT32, 3, &o,
	    &cause);
	ck_assert_msg(r != NULL, "ring_new: %s", cause);
	return (r);
}

/* A ring of @uid for data no other ring shares. */
static struct ring *
ring_of(uid_t uid, uint64_t rows, uint64_t row_bytes)
{
	return (ring_of_content(uid, 0, rows, row_bytes));
}

/* Whether every one of @len bytes at @p is @a or @b. */
static bool
all_either(const uint8_t *p, uint64_t len, uint8_t a, uint8_t b)
{
	uint64_t	i;

	for (i = 0; i < len; i++) {
		if (p[i] != a && p[i] != b)
			return (false);
	}
	return (true);
}

/*
 * A session's ring written all over and released as drained comes back,
 * the same memory still charged to the budget, for the next ring of the
 * same user and shape; what that client maps is all zeroes.
 */
START_TEST(test_kept_memory_reused_zeroed_for_the_same_user)
{
	struct ring	*r;
	uint64_t	 id, bytes;
	uint8_t		*ro;
	int		 fd;

	r = ring_of(TEST_UID, 64, 4096);
	id = r->mem->id;
	bytes = r->mem->bytes;
	memset(r->mem->map, 0xa5, bytes);
	ring_release(r, true);
	ck_assert_uint_eq(budget.used, bytes);
	ck_assert_uint_eq(budget.kept_bytes, bytes);
	ck_assert(ring_budget_keeps(&budget, id));

	r = ring_of(TEST_UID, 64, 4096);
	ck_assert_uint_eq(r->mem->id, id);
	ck_assert_uint_eq(budget.reused, 1);
	ck_assert_uint_eq(budget.made, 1);
	ck_assert_uint_eq(budget.kept_bytes, 0);
	ck_assert(!ring_budget_keeps(&budget, id));	/* in use */
	ck_assert_uint_eq(budget.used, bytes + r->tables);
	ck_assert_int_ge(fd = ring_readonly_fd(r), 0);
	ro = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(ro, MAP_FAILED);
	ck_assert_msg(all_zero(ro, bytes), "a reused ring shows the last "
	    "session's bytes");
	munmap(ro, bytes);
	close(fd);
	ring_free(r);
	ck_assert_uint_eq(budget.used, 0);
	ck_assert(!ring_budget_keeps(&budget, id));
}
END_TEST

/* The scrubber zeroes kept memory by itself, soon after the release. */
START_TEST(test_kept_memory_zeroed_by_the_scrubber)
{
	struct ring	*r;
	struct ring_mem	*m;
	int		 i;

	r = ring_of(TEST_UID, 256, 4096);
	memset(r->mem->map, 0x5a, r->mem->bytes);
	ring_release(r, true);
	m = TAILQ_FIRST(&budget.kept);
	ck_assert_ptr_nonnull(m);
	for (i = 0; i < 500 && *(volatile enum ring_mem_state *)&m->state !=
	    RING_MEM_CLEAN; i++)
		usleep(10000);
	ck_assert_int_eq(m->state, RING_MEM_CLEAN);
	ck_assert(all_zero(m->map, m->bytes));
}
END_TEST

/*
 * Memory another user's client had never goes to this one (that client
 * may still map it), nor to the same user in another group, nor memory a
 * worker may still write, nor memory of another size.
 */
START_TEST(test_kept_memory_only_for_same_user_drained_and_size)
{
	struct ring		*r, *other, *big;
	uint64_t		 id;
	struct ring_owner	 setgid = { TEST_UID, TEST_GID + 1, 0, 0 };

	r = ring_of(TEST_UID, 64, 4096);
	id = r->mem->id;
	ring_release(r, true);
	other = ring_of(TEST_UID + 1, 64, 4096);
	ck_assert_uint_ne(other->mem->id, id);
	ck_assert_uint_eq(budget.reused, 0);
	/* The same user in another group (a setgid program) neither. */
	big = ring_new(&budget, 64, 4096, INFEED_DTYPE_INT32, 3, &setgid,
	    &cause);
	ck_assert_ptr_nonnull(big);
	ck_assert_uint_ne(big->mem->id, id);
	ck_assert_uint_eq(budget.reused, 0);
	ring_free(big);
	/* 2 times the rows: more than a quarter too small. */
	big = ring_of(TEST_UID, 128, 4096);
	ck_assert_uint_ne(big->mem->id, id);
	ring_free(big);
	/* A ring a third smaller would waste more than a quarter. */
	big = ring_of(TEST_UID, 40, 4096);
	ck_assert_uint_ne(big->mem->id, id);
	ring_free(big);
	ck_assert_uint_eq(budget.reused, 0);

	/* Not drained: given up, not kept for workers to map. */
	id = other->mem->id;
	ring_release(other, false);
	ck_assert(!ring_budget_keeps(&budget, id));
	ring_budget_settle(&budget);
	ck_assert_uint_eq(budget.used, budget.kept_bytes);
}
END_TEST

/* Kept memory gives way to a ring the budget could not hold otherwise. */
START_TEST(test_kept_memory_freed_when_the_budget_needs_it)
{
	struct ring	*r;
	uint64_t	 id;

	r = ring_of(TEST_UID, 4, 4 * MiB);	/* 48 MiB of 64 */
	id = r->mem->id;
	ring_release(r, true);
	ck_assert(ring_budget_keeps(&budget, id));
	r = ring_of(TEST_UID + 1, 4, 4 * MiB);
	ck_assert_uint_ne(r->mem->id, id);
	ck_assert(!ring_budget_keeps(&budget, id));
	ck_assert_uint_eq(budget.kept_bytes, 0);
	ck_assert_uint_eq(budget.used, r->mem->bytes + r->tables);
	ring_free(r);
}
END_TEST

/*
 * Memory kept from another dataset goes to a ring only zeroed: released a
 * moment ago, with the scrubber at it, the next ring of the same user is
 * made on new memory (zeroing it in the main thread would hold up every
 * other client); once the scrubber is done, the kept memory serves, all
 * zeroes.
 */
START_TEST(test_kept_memory_of_another_dataset_zeroed)
{
	struct ring	*r, *other;
	struct ring_mem	*m;
	uint64_t	 id, bytes;

	r = ring_of_content(TEST_UID, 7, 4, 2 * MiB);
	id = r->mem->id;
	bytes = r->mem->bytes;
	memset(r->mem->map, 0xa5, bytes);
	ring_release(r, true);
	m = TAILQ_FIRST(&budget.kept);
	other = ring_of_content(TEST_UID, 8, 4, 2 * MiB);
	if (other->mem->id == id)	/* the scrubber was that quick */
		ck_assert_int_eq(budget.kept_bytes, 0);
	ck_assert_msg(all_zero(other->mem->map, bytes), "a ring of dataset 8 "
	    "shows bytes of dataset 7");
	if (other->mem->id != id) {
		while (*(volatile enum ring_mem_state *)&m->state !=
		    RING_MEM_CLEAN)
			usleep(1000);
		r = ring_of_content(TEST_UID, 8, 4, 2 * MiB);
		ck_assert_uint_eq(r->mem->id, id);
		ck_assert_uint_eq(r->mem->owner.content, 8);
		ck_assert(all_zero(r->mem->map, bytes));
		ring_free(r);
	}
	ring_free(other);
}
END_TEST

/*
 * Kept memory waits scrub_after_ms before it is zeroed: a trainer started
 * again takes its last ring's memory as it is (no zeroing at all), and the
 * scrubber zeroes what no ring took once that time is up.
 */
START_TEST(test_kept_memory_zeroed_only_once_idle_a_while)
{
	struct ring	*r;
	struct ring_mem	*m;
	uint64_t	 id, bytes, t0;

	r = ring_of_content(TEST_UID, 7, 4, 4 * MiB);
	id = r->mem->id;
	bytes = r->mem->bytes;
	memset(r->mem->map, 0xa5, bytes);
	ring_release(r, true);
	t0 = clock_now_ms();
	m = TAILQ_FIRST(&budget.kept);
	usleep(200000);
	ck_assert_int_eq(*(volatile enum ring_mem_state *)&m->state,
	    RING_MEM_DIRTY);
	ck_assert(all_either(m->map, bytes, 0xa5, 0xa5));
	/* Taken as it is by the same dataset's next ring. */
	r = ring_of_content(TEST_UID, 7, 4, 4 * MiB);
	ck_assert_uint_eq(r->mem->id, id);
	ck_assert(all_either(r->mem->map, bytes, 0xa5, 0xa5));
	ring_release(r, true);
	t0 = clock_now_ms();
	m = TAILQ_FIRST(&budget.kept);
	while (*(volatile enum ring_mem_state *)&m->state != RING_MEM_CLEAN &&
	    clock_now_ms() < t0 + 10000)
		usleep(10000);
	ck_assert_int_eq(m->state, RING_MEM_CLEAN);
	ck_assert_uint_ge(clock_now_ms() - t0, 1900);
	ck_assert(all_zero(m->map, bytes));
}
END_TEST

/*
 * The same user's next ring of the same dataset (a trainer started again)
 * takes the memory at once, as it is: every byte is still that dataset's
 * or zero, and the scrubber, stopped, never writes it again.
 */
START_TEST(test_kept_memory_of_the_same_dataset_taken_at_once)
{
	struct ring	*r;
	struct ring_mem	*m;
	uint64_t	 id, bytes;

	r = ring_of_content(TEST_UID, 7, 4, 4 * MiB);
	id = r->mem->id;
	bytes = r->mem->bytes;
	memset(r->mem->map, 0xa5, bytes);
	ring_release(r, true);
	/* Catch the scrubber at it (48 MiB take it milliseconds). */
	m = TAILQ_FIRST(&budget.kept);
	while (*(volatile enum ring_mem_state *)&m->state == RING_MEM_DIRTY)
		usleep(50);
	r = ring_of_content(TEST_UID, 7, 4, 4 * MiB);
	ck_assert_uint_eq(r->mem->id, id);
	ck_assert_uint_eq(budget.reused, 1);
	ck_assert_int_eq(r->mem->state, RING_MEM_IN_USE);
	ck_assert(all_either(r->mem->map, bytes, 0xa5, 0));
	/* The session writes it; nothing zeroes it behind its back. */
	memset(r->mem->map, 0x11, bytes);
	usleep(100000);
	ck_assert_msg(all_either(r->mem->map, bytes, 0x11, 0x11), "the "
	    "scrubber zeroed memory a ring had taken");

	/* Zeroed in the meantime, it goes to another dataset too. */
	ring_release(r, true);
	while (*(volatile enum ring_mem_state *)&TAILQ_FIRST(
	    &budget.kept)->state != RING_MEM_CLEAN)
		usleep(10000);
	r = ring_of_content(TEST_UID, 9, 4, 4 * MiB);
	ck_assert_uint_eq(r->mem->id, id);
	ck_assert(all_zero(r->mem->map, bytes));
	ring_free(r);
}
END_TEST

/* Kept memory unused for keep_ms is freed; younger memory stays. */
START_TEST(test_kept_memory_freed_after_keep_ms)
{
	struct ring	*r;
	struct ring_mem	*m;
	uint64_t	 t;

	r = ring_of(TEST_UID, 64, 4096);
	ring_release(r, true);
	/* Zeroed first: trim leaves memory the scrubber is zeroing. */
	m = TAILQ_FIRST(&budget.kept);
	while (*(volatile enum ring_mem_state *)&m->state != RING_MEM_CLEAN)
		usleep(1000);
	t = m->idle_since_ms;
	ring_budget_trim(&budget, t + 59000);
	ck_assert_uint_ne(budget.kept_bytes, 0);
	ck_assert(ring_budget_keeps(&budget, m->id));
	/* The scrubber restarts the clock as it ends: a later time. */
	ring_budget_trim(&budget, t + 3600000);
	ck_assert_uint_eq(budget.kept_bytes, 0);
	ring_budget_settle(&budget);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

/* A process that waits to be killed: a client that holds steps. */
static pid_t
holder_start(void)
{
	pid_t	pid;

	if ((pid = fork()) == 0) {
		for (;;)
			pause();
	}
	ck_assert_int_gt(pid, 0);
	return (pid);
}

/* End a holder and reap it. */
static void
holder_end(pid_t pid)
{
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

/* Bytes of shared memory a descriptor's pages really take. */
static uint64_t
fd_allocated(int fd)
{
	struct stat	sb;

	ck_assert_int_eq(fstat(fd, &sb), 0);
	return ((uint64_t)sb.st_blocks * 512);
}

/* A ring of @pid's whose slot 0 its client holds, filled with 0x5a. */
static struct ring *
ring_held_by(pid_t pid, uid_t uid, uint64_t rows, uint64_t row_bytes)
{
	struct ring_owner	 o = { uid, TEST_GID, 7, pid };
	struct ring		*r;

	r = ring_new(&budget, rows, row_bytes, INFEED_DTYPE_INT32, 3, &o,
	    &cause);
	ck_assert_msg(r != NULL, "ring_new: %s", cause);
	memset(r->mem->map, 0x5a, r->mem->bytes);
	ring_slot_set(r, 0, SLOT_FILLING);
	ring_slot_set(r, 0, SLOT_READY);
	ring_slot_hold(r, 0);
	return (r);
}

/* 3 slots of it take 64 MiB less 412 KiB. */
#define BIG_ROW		(21 * MiB + 200 * KiB)

/*
 * An ended session whose client still holds a step: its ring stays as it
 * is and charged (its tables are not) until the client's process exits,
 * and a ring that does not fit meanwhile is refused naming that process;
 * then its pages are freed, though the client's mapping survives.
 */
START_TEST(test_held_memory_charged_until_its_process_exits)
{
	struct ring	*r, *big;
	pid_t		 pid = holder_start(), who;
	uint64_t	 bytes, id;
	uint8_t		*ro;
	char		 want[64];
	int		 fd;

	r = ring_held_by(pid, TEST_UID, 64, 4096);	/* 3 x 260 KiB */
	bytes = r->mem->bytes;
	id = r->mem->id;
	ck_assert_int_ge(fd = ring_readonly_fd(r), 0);
	ro = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(ro, MAP_FAILED);
	ck_assert_uint_eq(fd_allocated(fd), bytes);
	ring_release(r, false);
	ck_assert_uint_eq(budget.held_bytes, bytes);
	ck_assert_uint_eq(budget.used, bytes);
	ck_assert_uint_eq(ring_budget_held_by(&budget, TEST_UID, &who), bytes);
	ck_assert_int_eq(who, pid);
	ck_assert_uint_eq(ring_budget_held_by(&budget, TEST_UID + 1, NULL), 0);
	ck_assert(!ring_budget_keeps(&budget, id));	/* no next ring's */
	ck_assert_uint_eq(fd_allocated(fd), bytes);
	ck_assert_uint_eq(ro[bytes - 1], 0x5a);

	/* 64 MiB less 780 KiB: 64 MiB less 412 KiB does not fit. */
	ck_assert_ptr_null(ring_new(&budget, 1, BIG_ROW, INFEED_DTYPE_INT32, 3,
	    &test_owner, &cause));
	snprintf(want, sizeof(want), "your process %d still holds 780 KiB",
	    (int)pid);
	ck_assert_msg(strstr(cause, want) != NULL, "%s", cause);
	ck_assert_msg(strstr(cause, "drop the tensors or end the process") !=
	    NULL, "%s", cause);
	free(cause);
	cause = NULL;
	/* Another user is told that others' processes hold it. */
	big = ring_new(&budget, 1, BIG_ROW, INFEED_DTYPE_INT32, 3,
	    &(struct ring_owner){ TEST_UID + 1, TEST_GID, 0, 1 }, &cause);
	ck_assert_ptr_null(big);
	ck_assert_msg(strstr(cause, "780 KiB is held for ended sessions of "
	    "other users' processes") != NULL, "%s", cause);
	ck_assert_msg(strstr(cause, "your process") == NULL, "%s", cause);
	free(cause);
	cause = NULL;

	/* The process exits: the next ring finds the budget free. */
	holder_end(pid);
	big = ring_new(&budget, 1, BIG_ROW, INFEED_DTYPE_INT32, 3,
	    &test_owner, &cause);
	ck_assert_msg(big != NULL, "%s", cause);
	ck_assert_uint_eq(budget.held_bytes, 0);
	ck_assert_uint_eq(budget.used, big->mem->bytes + big->tables);
	/* Its pages are gone; a mapping that survives reads zeroes. */
	ck_assert_uint_eq(fd_allocated(fd), 0);
	ck_assert_uint_eq(ro[bytes - 1], 0);
	munmap(ro, bytes);
	close(fd);
	ring_free(big);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

/* Two processes of the user hold memory: both are named, all counted. */
START_TEST(test_held_memory_of_two_processes_named_together)
{
	struct ring	*r;
	pid_t		 p1 = holder_start(), p2 = holder_start();
	char		 want[128];

	ring_release(ring_held_by(p1, TEST_UID, 64, 4096), false);
	ring_release(ring_held_by(p2, TEST_UID, 64, 4096), false);
	ring_release(ring_held_by(p2, TEST_UID, 64, 4096), false);
	ck_assert_uint_eq(budget.held_bytes, 3 * 780 * KiB);
	r = ring_new(&budget, 1, BIG_ROW, INFEED_DTYPE_INT32, 3, &test_owner,
	    &cause);
	ck_assert_ptr_null(r);
	snprintf(want, sizeof(want), "your processes %d, %d still hold 2.3 "
	    "MiB (2396160 bytes) of ended sessions", (int)p1, (int)p2);
	ck_assert_msg(strstr(cause, want) != NULL, "%s", cause);
	holder_end(p1);
	holder_end(p2);
	ring_budget_reap(&budget);
	ck_assert_uint_eq(budget.held_bytes, 0);
	ring_budget_settle(&budget);
	ck_assert_uint_eq(budget.used, 0);
}
END_TEST

/* A process already gone when its session ends holds nothing. */
START_TEST(test_held_memory_of_a_gone_process_freed_at_once)
{
	struct ring	*r;
	pid_t		 pid = holder_start();
	int		 fd;

	r = ring_held_by(pid, TEST_UID, 64, 4096);
	ck_assert_int_ge(fd = ring_readonly_fd(r), 0);
	holder_end(pid);
	ring_release(r, true);
	ck_assert_uint_eq(budget.held_bytes, 0);
	ck_assert_uint_eq(budget.kept_bytes, 0);
	ring_budget_settle(&budget);
	ck_assert_uint_eq(budget.used, 0);
	ck_assert_uint_eq(fd_allocated(fd), 0);
	close(fd);
}
END_TEST

/* On an event loop, the process's exit frees its memory at once. */
START_TEST(test_held_memory_freed_when_the_loop_sees_the_exit)
{
	struct event_base	*base = event_base_new();
	struct ring		*r;
	pid_t			 pid = holder_start();
	int			 fd, i;

	ck_assert_ptr_nonnull(base);
	ring_budget_watch(&budget, base);
	r = ring_held_by(pid, TEST_UID, 64, 4096);
	ck_assert_int_ge(fd = ring_readonly_fd(r), 0);
	ring_release(r, true);
	ck_assert_uint_ne(budget.held_bytes, 0);
	/* Its exit is watched, and nothing came yet. */
	ck_assert_int_eq(event_base_loop(base, EVLOOP_NONBLOCK), 0);
	ck_assert_uint_ne(budget.held_bytes, 0);
	holder_end(pid);
	for (i = 0; i < 100 && budget.held_bytes != 0; i++)
		(void)event_base_loop(base, EVLOOP_ONCE);
	ck_assert_uint_eq(budget.held_bytes, 0);
	ring_budget_settle(&budget);
	ck_assert_uint_eq(budget.used, 0);
	ck_assert_uint_eq(fd_allocated(fd), 0);
	close(fd);
	ring_budget_clear(&budget);
	event_base_free(base);
}
END_TEST

/*
 * Kept memory given up for a ring that needs the budget is punched: a
 * client that still maps it (it holds no step, but keeps the mapping)
 * holds none of its pages, and reads zeroes.
 */
START_TEST(test_kept_memory_given_up_is_punched)
{
	struct ring	*r;
	uint64_t	 bytes;
	uint8_t		*ro;
	int		 fd;

	r = ring_of(TEST_UID, 4, 4 * MiB);	/* 48 MiB of 64 */
	bytes = r->mem->bytes;
	memset(r->mem->map, 0x5a, bytes);
	ck_assert_int_ge(fd = ring_readonly_fd(r), 0);
	ro = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(ro, MAP_FAILED);
	ring_release(r, true);
	ck_assert_uint_eq(budget.kept_bytes, bytes);
	ck_assert_uint_eq(fd_allocated(fd), bytes);
	r = ring_of(TEST_UID + 1, 4, 4 * MiB);
	ck_assert_uint_eq(budget.kept_bytes, 0);
	ck_assert_uint_eq(fd_allocated(fd), 0);
	ck_assert_uint_eq(ro[0], 0);
	ck_assert_uint_eq(budget.used, r->mem->bytes + r->tables);
	ring_free(r);
	munmap(ro, bytes);
	close(fd);
}
END_TEST

/* A ring freed for good (nothing kept) is punched too. */
START_TEST(test_freed_memory_is_punched)
{
	struct ring	*r;
	uint64_t	 bytes;
	int		 fd;

	r = ring_ok(64, 4096, 3);
	bytes = r->mem->bytes;
	memset(r->mem->map, 0x5a, r->mem->bytes);
	ck_assert_int_ge(fd = ring_readonly_fd(r), 0);
	ck_assert_uint_eq(fd_allocated(fd), r->mem->bytes);
	ring_release(r, false);
	/* Charged until its pages are gone (the scrubber punches them). */
	ck_assert_uint_eq(budget.freeing_bytes, bytes);
	ck_assert_uint_eq(budget.used, bytes);
	ring_budget_settle(&budget);
	ck_assert_uint_eq(fd_allocated(fd), 0);
	ck_assert_uint_eq(budget.freeing_bytes, 0);
	ck_assert_uint_eq(budget.used, 0);
	close(fd);
}
END_TEST

static Suite *
ring_suite(void)
{
	Suite	*s = suite_create("ring");
	TCase	*tc;

	tc = tcase_create("layout");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_layout_aligned_and_in_order);
	tcase_add_test(tc, test_layout_int64_labels_twice_as_wide);
	tcase_add_test(tc, test_layout_other_label_dtype_is_fatal);
	tcase_add_test(tc, test_overflowing_step_refused_without_allocating);
	suite_add_tcase(s, tc);

	tc = tcase_create("budget");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_budget_charged_at_new_and_given_back_at_free);
	tcase_add_test(tc, test_budget_exact_fit_made_one_byte_short_refused);
	tcase_add_test(tc, test_budget_refusal_in_kib_not_zero_mib);
	tcase_add_test(tc, test_budget_refusal_counts_what_others_use);
	tcase_add_test(tc, test_format_bytes_exact_units);
	suite_add_tcase(s, tc);

	tc = tcase_create("memfd");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_readonly_fd_cannot_map_writable_but_sees_writes);
	tcase_add_test(tc, test_memfd_sealed_against_resize);
	suite_add_tcase(s, tc);

	tc = tcase_create("kept");
	tcase_add_checked_fixture(tc, setup_keep, teardown);
	tcase_add_test(tc, test_kept_memory_reused_zeroed_for_the_same_user);
	tcase_add_test(tc, test_kept_memory_zeroed_by_the_scrubber);
	tcase_add_test(tc, test_kept_memory_only_for_same_user_drained_and_size);
	tcase_add_test(tc, test_kept_memory_freed_when_the_budget_needs_it);
	tcase_add_test(tc, test_kept_memory_freed_after_keep_ms);
	tcase_add_test(tc, test_kept_memory_of_another_dataset_zeroed);
	tcase_add_test(tc, test_kept_memory_of_the_same_dataset_taken_at_once);
	tcase_add_test(tc, test_kept_memory_given_up_is_punched);
	tcase_add_test(tc, test_freed_memory_is_punched);
	suite_add_tcase(s, tc);

	tc = tcase_create("kept-late");
	tcase_add_checked_fixture(tc, setup_keep_late, teardown);
	tcase_add_test(tc, test_kept_memory_zeroed_only_once_idle_a_while);
	suite_add_tcase(s, tc);

	tc = tcase_create("held");
	tcase_add_checked_fixture(tc, setup_keep, teardown);
	tcase_add_test(tc, test_held_memory_charged_until_its_process_exits);
	tcase_add_test(tc, test_held_memory_of_two_processes_named_together);
	tcase_add_test(tc, test_held_memory_of_a_gone_process_freed_at_once);
	tcase_add_test(tc, test_held_memory_freed_when_the_loop_sees_the_exit);
	suite_add_tcase(s, tc);

	tc = tcase_create("slots");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_slot_cycle_free_filling_ready_held_free);
	tcase_add_test(tc, test_slot_held_until_its_last_holder_lets_go);
	tcase_add_test(tc, test_slot_forbidden_transition_is_fatal);
	tcase_add_test(tc, test_slot_index_out_of_range_is_fatal);
	tcase_add_test(tc, test_find_and_count_by_state);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	log_init("test-ring", -1);
	return (run_suite(ring_suite()));
}
