/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's copy-on-write ring (client/libinfeed-ring.c) on steps of
 * many pages, against the real infeedd on a private socket: a trainer
 * that only reads its steps keeps the slots' pages mapped from one pass
 * over the ring to the next (no page fault reading a slot it has read
 * before), also for pages it reads first after the slot's tracking began
 * (issue 35, "Python's own cost per step"); and a trainer that writes
 * some pages, every page, or has the kernel write them (read() into the
 * slot) sees the daemon's bytes when the slot comes back.
 *
 * The dataset is a raw array of 2,048 rows of one page each, a step of
 * 1,024 rows (4 MiB), so each slot spans at least one whole page table
 * (2 MiB) that a trainer reading only a step's first rows never touches.
 */

#include <sys/resource.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "libinfeed-private.h"
#include "infeed.h"

#define WIDE_N		2048
#define WIDE_BYTES	4096		/* a row: one page */
#define WIDE_BATCH	1024		/* a step: 4 MiB */
#define WIDE_SLOTS	3		/* the ring's slots (share off) */
#define WIDE_FEW	16		/* rows a first glance reads */

/* Byte @j of row @i of "wide": every page of every row differs. */
static uint8_t
wide_byte(uint64_t i, unsigned j)
{
	return ((uint8_t)(i * 131 + j * 7 + (j >> 8) + 1));
}

/* Fresh files with "wide" added, and infeedd. */
static void
wide_setup(void)
{
	uint8_t		*data;
	int64_t		 labels[WIDE_N];
	char		 path[400], extra[1024];
	unsigned	 i, j;

	make_files(NULL);
	ck_assert_ptr_nonnull(data = malloc((size_t)WIDE_N * WIDE_BYTES));
	for (i = 0; i < WIDE_N; i++) {
		for (j = 0; j < WIDE_BYTES; j++)
			data[(size_t)i * WIDE_BYTES + j] = wide_byte(i, j);
		labels[i] = (int64_t)(i % RAW_CLASSES);
	}
	snprintf(path, sizeof(path), "%s/wide.bin", dir);
	write_file(path, data, (size_t)WIDE_N * WIDE_BYTES);
	free(data);
	snprintf(path, sizeof(path), "%s/wide-labels.bin", dir);
	write_file(path, labels, sizeof(labels));
	snprintf(extra, sizeof(extra),
	    "\n[dataset wide]\n"
	    "type = raw\n"
	    "path = %s/wide.bin\n"
	    "shape = 1,64,64\n"
	    "dtype = uint8\n"
	    "labels = %s/wide-labels.bin\n"
	    "label_dtype = int64\n"
	    "classes = %d\n", dir, dir, RAW_CLASSES);
	make_config(extra);
	infeedd_start(NULL);
}

/* A trainer of "wide" on a copy-on-write ring of its own (3 slots). */
static struct infeed *
wide_attach(void)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_session_info info;

	infeed_options_init(&o);
	o.batch_size = WIDE_BATCH;
	o.shuffle = true;
	o.seed = 35;
	o.copy_on_write = true;
	o.share = false;
	info.struct_size = sizeof(info);
	ck_assert_int_eq(infeed_attach(f, "wide", &o, &info), INFEED_OK);
	ck_assert_uint_eq(info.slots, WIDE_SLOTS);
	return (f);
}

/* This thread's page faults so far. */
static long
faults(void)
{
	struct rusage	ru;

	ck_assert_int_eq(getrusage(RUSAGE_THREAD, &ru), 0);
	return (ru.ru_minflt + ru.ru_majflt);
}

/*
 * How many pages of @st's data are not mapped in this process now
 * (/proc/self/pagemap's bit 63): each would take a fault when read.
 * Counted so rather than by the faults of a read, which a sanitizer's
 * own shadow memory adds to.
 */
static unsigned
wide_unmapped(const struct infeed_step *st)
{
	static uint64_t	ent[WIDE_BATCH];
	uintptr_t	page = (uintptr_t)st->data / WIDE_BYTES;
	unsigned	i, n = 0;
	int		fd;

	ck_assert_uint_eq((uintptr_t)st->data % WIDE_BYTES, 0);
	ck_assert_uint_le(st->rows, WIDE_BATCH);
	ck_assert_int_ge(fd = open("/proc/self/pagemap", O_RDONLY |
	    O_CLOEXEC), 0);
	ck_assert_int_eq(pread(fd, ent, st->rows * sizeof(ent[0]),
	    (off_t)(page * sizeof(ent[0]))), (ssize_t)(st->rows *
	    sizeof(ent[0])));
	close(fd);
	for (i = 0; i < st->rows; i++)
		n += !(ent[i] >> 63 & 1);
	return (n);
}

/*
 * The first @rows rows of @st (every byte) against the dataset's; returns
 * the page faults that reading them took.
 */
static long
wide_check(const struct infeed_step *st, uint64_t rows)
{
	static uint8_t	 want[WIDE_BYTES];
	const uint8_t	*p = st->data;
	uint64_t	 r;
	unsigned	 j;
	long		 before, n = 0;
	int		 differs;

	ck_assert_uint_ge(st->rows, rows);
	for (r = 0; r < rows; r++) {
		for (j = 0; j < WIDE_BYTES; j++)
			want[j] = wide_byte(st->indices[r], j);
		/* Counted over the reads of the ring alone. */
		before = faults();
		differs = memcmp(p + r * WIDE_BYTES, want, WIDE_BYTES);
		n += faults() - before;
		ck_assert_msg(differs == 0, "epoch %llu step %llu (slot %u), "
		    "row %llu (index %llu): not the daemon's bytes",
		    (unsigned long long)st->epoch,
		    (unsigned long long)st->step, st->slot,
		    (unsigned long long)r,
		    (unsigned long long)st->indices[r]);
	}
	return (n);
}

/*
 * A trainer that reads every byte of its steps takes page faults on its
 * first pass over the ring only: its second and later passes take none,
 * the slots' pages staying mapped (and write-protected) while the walk
 * that restores them finds nothing written.
 */
START_TEST(test_cow_reader_takes_no_faults_after_its_first_pass)
{
	struct infeed		*f = wide_attach();
	struct infeed_step	 st;
	unsigned		 n, unmapped = 0;
	long			 first = 0, later = 0;

	for (n = 0; n < 5 * WIDE_SLOTS; n++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		if (n < WIDE_SLOTS) {
			first += wide_check(&st, st.rows);
		} else {
			unmapped += wide_unmapped(&st);
			later += wide_check(&st, st.rows);
		}
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	printf("test_cow_reader_takes_no_faults_after_its_first_pass: "
	    "%ld faults reading the first %u steps (%u pages), %ld reading "
	    "the next %u, %u of their pages unmapped before; %llu restore "
	    "walks skipped\n", first, WIDE_SLOTS, WIDE_SLOTS * WIDE_BATCH,
	    later, 4 * WIDE_SLOTS, unmapped,
	    (unsigned long long)f->ring.walks_skipped);
	ck_assert_msg(unmapped == 0, "a trainer that only reads found %u "
	    "pages of slots it had read unmapped (%ld faults reading them)",
	    unmapped, later);
	infeed_free(f);
}
END_TEST

/*
 * A trainer that reads only a step's first rows on its first pass, then
 * every row: the pages it maps first after the slot's tracking began (in
 * a page table the first pass never made) take a fault each on the
 * second pass (no fault-around in a tracked range), and none after: the
 * protection of the slot covered them before they were mapped (the
 * kernel's markers), so the walks after the second pass find them
 * protected, not written, and keep them.  A kernel that left them
 * unprotected would have them counted as written and dropped by the
 * walk, and the third pass would take a fault a page again (about 1,000
 * a step).
 */
START_TEST(test_cow_pages_read_late_stay_mapped)
{
	struct infeed		*f = wide_attach();
	struct infeed_step	 st;
	unsigned		 n, before = 0, unmapped = 0;
	long			 second = 0, later = 0;

	for (n = 0; n < 6 * WIDE_SLOTS; n++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		if (n < WIDE_SLOTS) {
			(void)wide_check(&st, WIDE_FEW);
		} else if (n < 2 * WIDE_SLOTS) {
			before += wide_unmapped(&st);
			second += wide_check(&st, st.rows);
		} else {
			unmapped += wide_unmapped(&st);
			later += wide_check(&st, st.rows);
		}
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	printf("test_cow_pages_read_late_stay_mapped: %u pages unmapped "
	    "before the second pass, %ld faults reading it all; %u unmapped "
	    "before the next %u steps, %ld faults reading them; %llu restore "
	    "walks skipped\n", before, second, unmapped, 4 * WIDE_SLOTS,
	    later, (unsigned long long)f->ring.walks_skipped);
	/* The first pass left most of each step unmapped. */
	ck_assert_uint_gt(before, WIDE_SLOTS * WIDE_BATCH / 2);
	ck_assert_msg(unmapped == 0, "%u pages first read on the second "
	    "pass were unmapped again (%ld faults reading them): the "
	    "restore dropped them", unmapped, later);
	infeed_free(f);
}
END_TEST

/* How a trainer writes into a step it holds. */
enum wide_write {
	WIDE_WRITE_SOME,	/* every fifth page, and half a page */
	WIDE_WRITE_ALL,		/* every byte */
	WIDE_WRITE_READ		/* read() from a file: the kernel writes */
};

/* Write 0xee over @st as @how says. */
static void
wide_write(const struct infeed_step *st, enum wide_write how, int fd)
{
	uint8_t		*p = (uint8_t *)(uintptr_t)st->data;
	size_t		 len = (size_t)st->rows * WIDE_BYTES, off;

	switch (how) {
	case WIDE_WRITE_SOME:
		for (off = 0; off < len; off += 5 * WIDE_BYTES)
			p[off + 17] = 0xee;
		memset(p + 3 * WIDE_BYTES + 100, 0xee, WIDE_BYTES / 2);
		break;
	case WIDE_WRITE_ALL:
		memset(p, 0xee, len);
		break;
	case WIDE_WRITE_READ:
		/* Half the step: what O_DIRECT or a socket's recv() does. */
		ck_assert_int_eq(pread(fd, p + WIDE_BYTES, len / 2, 0),
		    (ssize_t)(len / 2));
		break;
	}
	ck_assert_uint_eq(p[how == WIDE_WRITE_READ ? WIDE_BYTES + 17 : 17],
	    0xee);
}

/*
 * A trainer reads a pass over the ring (its pages kept mapped), then
 * writes into every other step it holds, as @how says; each step it
 * takes shows the daemon's bytes, whether its slot was written last time
 * or not, and the writes stay private (another trainer of the same
 * options, reading the same steps alongside, sees the daemon's).
 */
static void
wide_writer(enum wide_write how)
{
	struct infeed		*f = wide_attach(), *g = wide_attach();
	struct infeed_step	 st, other;
	uint8_t			*ee;
	char			 path[400];
	unsigned		 n;
	int			 fd;

	ck_assert_ptr_nonnull(ee = malloc((size_t)WIDE_BATCH * WIDE_BYTES));
	memset(ee, 0xee, (size_t)WIDE_BATCH * WIDE_BYTES);
	snprintf(path, sizeof(path), "%s/ee.bin", dir);
	write_file(path, ee, (size_t)WIDE_BATCH * WIDE_BYTES);
	free(ee);
	ck_assert_int_ge(fd = open(path, O_RDONLY | O_CLOEXEC), 0);
	for (n = 0; n < 7 * WIDE_SLOTS; n++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_int_eq(infeed_next(g, &other), INFEED_OK);
		ck_assert_uint_eq(st.step, other.step);
		(void)wide_check(&st, st.rows);
		/* Every slot is written on some passes and not on others. */
		if (n >= WIDE_SLOTS && n % 2 == 1) {
			wide_write(&st, how, fd);
			(void)wide_check(&other, other.rows);
		}
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
		ck_assert_int_eq(infeed_release(g, &other), INFEED_OK);
	}
	close(fd);
	infeed_free(g);
	infeed_free(f);
}

/* Some pages written: dropped, the slot's other pages kept. */
START_TEST(test_cow_some_pages_written_show_the_daemons_bytes)
{
	wide_writer(WIDE_WRITE_SOME);
}
END_TEST

/* Every page written. */
START_TEST(test_cow_all_pages_written_show_the_daemons_bytes)
{
	wide_writer(WIDE_WRITE_ALL);
}
END_TEST

/* Pages the kernel wrote for the trainer (read(): get_user_pages). */
START_TEST(test_cow_pages_read_into_show_the_daemons_bytes)
{
	wide_writer(WIDE_WRITE_READ);
}
END_TEST

static Suite *
cow_suite(void)
{
	Suite	*s = suite_create("libinfeed-cow");
	TCase	*tc = tcase_create("cow");

	tcase_add_checked_fixture(tc, wide_setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_cow_reader_takes_no_faults_after_its_first_pass);
	tcase_add_test(tc, test_cow_pages_read_late_stay_mapped);
	tcase_add_test(tc, test_cow_some_pages_written_show_the_daemons_bytes);
	tcase_add_test(tc, test_cow_all_pages_written_show_the_daemons_bytes);
	tcase_add_test(tc, test_cow_pages_read_into_show_the_daemons_bytes);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(cow_suite()));
}
