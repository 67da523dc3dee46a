/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the step sampler: the poptorch worked examples (step
 * counts, distributed blocks), the row layout rule, the shuffle's
 * reproducibility and uniformity, the table-free Feistel shuffle of
 * datasets above SAMPLER_TABLE_MAX (a bijection, keyed on seed and epoch
 * alone, spread evenly, a step of a 2^40-sample dataset in microseconds
 * with no table), and the messages of sampler_init().
 */

#include <sys/resource.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <check.h>

#include "runner.h"
#include "sampler.h"
#include "splitmix64.h"

static struct sampler	smp;

static struct sampler_opts	opts_default(uint64_t, uint32_t, uint32_t);
static void			init_ok(struct sampler *,
				    const struct sampler_opts *);
static void			expect_cause(const struct sampler_opts *, ...)
				    __attribute__((sentinel));
static uint64_t			*epoch_indices(struct sampler *, uint64_t,
				    uint64_t *);
static void			check_distributed(uint64_t, uint32_t, uint32_t,
				    uint32_t, bool, bool);

/* Fresh sampler and no message for every test. */
static void
setup(void)
{
	memset(&smp, 0, sizeof smp);
}

/* Free what the test left behind. */
static void
teardown(void)
{
	sampler_clear(&smp);
}

/* Return options for N samples, B and DI, everything else at its default. */
static struct sampler_opts
opts_default(uint64_t samples, uint32_t batch, uint32_t di)
{
	struct sampler_opts	o;

	memset(&o, 0, sizeof o);
	o.samples = samples;
	o.batch_size = batch;
	o.device_iterations = di;
	o.replication_factor = 1;
	o.gradient_accumulation = 1;
	o.shuffle = false;
	o.seed = 0;
	o.drop_last = true;
	o.process_id = 0;
	o.process_count = 1;
	return (o);
}

/* Initialise a sampler that must be accepted. */
static void
init_ok(struct sampler *s, const struct sampler_opts *o)
{
	char	*why = NULL;
	int	 rc;

	rc = sampler_init(s, o, &why);
	ck_assert_msg(rc == 0, "sampler_init failed: %s",
	    why != NULL ? why : "(no cause)");
	ck_assert_ptr_null(why);
}

/* Check that sampler_init() refuses @o with a message holding each string. */
static void
expect_cause(const struct sampler_opts *o, ...)
{
	struct sampler	 s;
	char		*why = NULL;
	const char	*want;
	va_list		 ap;

	ck_assert_int_eq(sampler_init(&s, o, &why), -1);
	ck_assert_ptr_nonnull(why);
	va_start(ap, o);
	while ((want = va_arg(ap, const char *)) != NULL)
		ck_assert_msg(strstr(why, want) != NULL,
		    "cause \"%s\" lacks \"%s\"", why, want);
	va_end(ap);
	free(why);
	sampler_clear(&s);
}

/* Collect every index of an epoch, in step and row order; *count is set. */
static uint64_t *
epoch_indices(struct sampler *s, uint64_t epoch, uint64_t *count)
{
	uint64_t	*all, step, rows, got, total = 0;

	all = malloc((s->steps_per_epoch * s->cbs + 1) * sizeof *all);
	ck_assert_ptr_nonnull(all);
	for (step = 0; step < s->steps_per_epoch; step++) {
		rows = sampler_step_rows(s, step);
		ck_assert_uint_le(rows, s->cbs);
		got = sampler_step_indices(s, epoch, step, all + total);
		ck_assert_uint_eq(got, rows);
		total += got;
	}
	ck_assert_uint_eq(total, s->block_length);
	*count = total;
	return (all);
}

START_TEST(test_steps_tutorial)
{
	struct sampler_opts	o = opts_default(10000, 16, 50);

	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.cbs, 800);
	ck_assert_uint_eq(smp.steps_per_epoch, 12);
	ck_assert_uint_eq(sampler_step_rows(&smp, 11), 800);
	ck_assert_uint_eq(sampler_step_rows(&smp, 12), 0);
}
END_TEST

START_TEST(test_steps_tutorial_replicas)
{
	struct sampler_opts	o = opts_default(10000, 16, 50);

	o.replication_factor = 4;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.cbs, 3200);
	ck_assert_uint_eq(smp.steps_per_epoch, 3);
}
END_TEST

START_TEST(test_steps_mnist_train)
{
	struct sampler_opts	o = opts_default(60000, 40, 10);

	o.gradient_accumulation = 10;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.cbs, 4000);
	ck_assert_uint_eq(smp.steps_per_epoch, 15);
	ck_assert_uint_eq(sampler_step_rows(&smp, 14), 4000);
}
END_TEST

START_TEST(test_steps_mnist_test)
{
	struct sampler_opts	o = opts_default(10000, 8, 100);
	uint64_t		s;

	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.cbs, 800);
	ck_assert_uint_eq(smp.steps_per_epoch, 12);
	for (s = 0; s < 12; s++)
		ck_assert_uint_eq(sampler_step_rows(&smp, s), 800);
	sampler_clear(&smp);

	o.drop_last = false;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.steps_per_epoch, 13);
	for (s = 0; s < 12; s++)
		ck_assert_uint_eq(sampler_step_rows(&smp, s), 800);
	ck_assert_uint_eq(sampler_step_rows(&smp, 12), 400);
}
END_TEST

START_TEST(test_steps_fashion_mnist)
{
	struct sampler_opts	o = opts_default(60000, 128, 1);

	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.steps_per_epoch, 468);
}
END_TEST

START_TEST(test_steps_doc_distributed)
{
	struct sampler_opts	o = opts_default(100000, 2, 400);

	o.replication_factor = 2;
	o.gradient_accumulation = 8;
	o.process_count = 2;
	o.process_id = 1;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.cbs, 12800);
	ck_assert_uint_eq(smp.steps_per_epoch, 3);
	ck_assert_uint_eq(smp.block_length, 38400);
	ck_assert_uint_eq(smp.block_offset, 38400);
}
END_TEST

START_TEST(test_no_shuffle_order)
{
	struct sampler_opts	 o = opts_default(10000, 16, 50);
	uint64_t		*out, s, j, rows;

	out = malloc(800 * sizeof *out);
	ck_assert_ptr_nonnull(out);
	o.drop_last = false;
	init_ok(&smp, &o);
	for (s = 0; s < smp.steps_per_epoch; s++) {
		rows = sampler_step_indices(&smp, 3, s, out);
		ck_assert_uint_eq(rows, s < 12 ? 800 : 400);
		for (j = 0; j < rows; j++)
			ck_assert_uint_eq(out[j], s * 800 + j);
	}
	/* No permutation is allocated without shuffle. */
	ck_assert_ptr_null(smp.perm);
	ck_assert_uint_eq(sampler_step_indices(&smp, 0, 13, out), 0);
	free(out);
}
END_TEST

START_TEST(test_row_owner_worked_example)
{
	struct sampler_opts	o = opts_default(8, 2, 2);
	static const uint32_t	want_it[8] = { 0, 0, 0, 0, 1, 1, 1, 1 };
	static const uint32_t	want_rep[8] = { 0, 0, 1, 1, 0, 0, 1, 1 };
	uint32_t		it, acc, rep, b;
	uint64_t		k, out[8];

	o.replication_factor = 2;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.cbs, 8);
	ck_assert_uint_eq(smp.steps_per_epoch, 1);
	ck_assert_uint_eq(sampler_step_indices(&smp, 0, 0, out), 8);
	for (k = 0; k < 8; k++) {
		sampler_row_owner(&smp, k, &it, &acc, &rep, &b);
		ck_assert_uint_eq(it, want_it[k]);
		ck_assert_uint_eq(acc, 0);
		ck_assert_uint_eq(rep, want_rep[k]);
		ck_assert_uint_eq(b, k % 2);
		/* Consecutive samples fill rows 0, 1, 2, ... */
		ck_assert_uint_eq(out[k], k);
	}
}
END_TEST

START_TEST(test_row_owner_all_axes)
{
	struct sampler_opts	o = opts_default(1000, 3, 2);
	uint32_t		i, a, r, b, it, acc, rep, mb;
	uint64_t		k;

	o.gradient_accumulation = 4;
	o.replication_factor = 5;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.cbs, 3 * 2 * 4 * 5);
	for (i = 0; i < 2; i++)
		for (a = 0; a < 4; a++)
			for (r = 0; r < 5; r++)
				for (b = 0; b < 3; b++) {
					k = ((i * 4 + a) * 5 + r) * 3 + b;
					sampler_row_owner(&smp, k, &it, &acc,
					    &rep, &mb);
					ck_assert_uint_eq(it, i);
					ck_assert_uint_eq(acc, a);
					ck_assert_uint_eq(rep, r);
					ck_assert_uint_eq(mb, b);
				}
	/* NULL outputs are skipped. */
	sampler_row_owner(&smp, 119, &it, NULL, NULL, NULL);
	ck_assert_uint_eq(it, 1);
}
END_TEST

START_TEST(test_shuffle_is_permutation)
{
	struct sampler_opts	 o = opts_default(10007, 16, 50);
	uint64_t		*all, count, i, e, moved, bad;
	unsigned char		*seen;

	o.shuffle = true;
	o.seed = 42;
	o.drop_last = false;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.steps_per_epoch, 13);
	ck_assert_uint_eq(sampler_step_rows(&smp, 12), 10007 - 12 * 800);
	seen = malloc(10007);
	ck_assert_ptr_nonnull(seen);
	for (e = 0; e < 3; e++) {
		all = epoch_indices(&smp, e, &count);
		ck_assert_uint_eq(count, 10007);
		memset(seen, 0, 10007);
		moved = 0;
		bad = 0;
		for (i = 0; i < count; i++) {
			if (all[i] >= 10007 || seen[all[i]] != 0) {
				bad++;
				continue;
			}
			seen[all[i]] = 1;
			if (all[i] != i)
				moved++;
		}
		ck_assert_uint_eq(bad, 0);
		/* A shuffle of 10007 leaves very few points fixed. */
		ck_assert_uint_gt(moved, 10007 - 20);
		free(all);
	}
	free(seen);
}
END_TEST

START_TEST(test_shuffle_reproducible)
{
	struct sampler_opts	 o = opts_default(5000, 10, 7);
	struct sampler		 other;
	uint64_t		*a, *b, *direct, na, nb, e;

	o.shuffle = true;
	o.seed = 0x1234;
	o.drop_last = false;
	init_ok(&smp, &o);
	direct = malloc(5000 * sizeof *direct);
	ck_assert_ptr_nonnull(direct);

	/* Walk epochs 0..4 on one sampler, then ask a fresh one for epoch 5. */
	for (e = 0; e < 5; e++) {
		a = epoch_indices(&smp, e, &na);
		free(a);
	}
	a = epoch_indices(&smp, 5, &na);
	init_ok(&other, &o);
	b = epoch_indices(&other, 5, &nb);
	ck_assert_uint_eq(na, nb);
	ck_assert_mem_eq(a, b, na * sizeof *a);
	sampler_permutation(5000, true, 0x1234, 5, direct);
	ck_assert_mem_eq(a, direct, na * sizeof *a);
	free(b);
	sampler_clear(&other);

	/* A different geometry (another worker count, a restart) agrees. */
	o.batch_size = 3;
	o.device_iterations = 11;
	init_ok(&other, &o);
	b = epoch_indices(&other, 5, &nb);
	ck_assert_uint_eq(na, nb);
	ck_assert_mem_eq(a, b, na * sizeof *a);
	free(b);
	sampler_clear(&other);

	/* Going back to an epoch already seen recomputes it. */
	b = epoch_indices(&smp, 0, &nb);
	free(b);
	b = epoch_indices(&smp, 5, &nb);
	ck_assert_mem_eq(a, b, na * sizeof *a);
	free(b);
	free(a);
	free(direct);
}
END_TEST

START_TEST(test_shuffle_epochs_and_seeds_differ)
{
	uint64_t	*p0, *p1, *q0, *id;
	const uint64_t	 n = 1000;

	p0 = malloc(n * sizeof *p0);
	p1 = malloc(n * sizeof *p1);
	q0 = malloc(n * sizeof *q0);
	id = malloc(n * sizeof *id);
	ck_assert(p0 != NULL && p1 != NULL && q0 != NULL && id != NULL);
	sampler_permutation(n, true, 7, 0, p0);
	sampler_permutation(n, true, 7, 1, p1);
	sampler_permutation(n, true, 8, 0, q0);
	sampler_permutation(n, false, 7, 0, id);
	ck_assert(memcmp(p0, p1, n * sizeof *p0) != 0);
	ck_assert(memcmp(p0, q0, n * sizeof *p0) != 0);
	ck_assert(memcmp(p1, q0, n * sizeof *p0) != 0);
	ck_assert(memcmp(p0, id, n * sizeof *p0) != 0);
	/* Seed and epoch are not interchangeable. */
	sampler_permutation(n, true, 0, 7, p1);
	ck_assert(memcmp(p0, p1, n * sizeof *p0) != 0);
	sampler_permutation(n, true, 7, 0, p1);
	ck_assert_mem_eq(p0, p1, n * sizeof *p0);
	free(p0);
	free(p1);
	free(q0);
	free(id);
}
END_TEST

START_TEST(test_shuffle_trivial_sizes)
{
	uint64_t	out[2];

	sampler_permutation(1, true, 99, 3, out);
	ck_assert_uint_eq(out[0], 0);
	sampler_permutation(2, true, 99, 3, out);
	ck_assert((out[0] == 0 && out[1] == 1) || (out[0] == 1 && out[1] == 0));
}
END_TEST

/*
 * The shuffle is specified in sampler.c so that clients can reproduce it;
 * these orders come from an independent Python transcription of that text.
 */
START_TEST(shuffle_matches_an_independent_transcription)
{
	static const uint64_t	want10[10] = { 7, 6, 9, 5, 8, 1, 4, 0, 2, 3 };
	static const uint64_t	want16[16] = { 8, 12, 6, 7, 5, 2, 11, 10, 1,
				    4, 14, 15, 3, 13, 0, 9 };
	uint64_t		out[16];

	sampler_permutation(10, true, 0, 0, out);
	ck_assert_mem_eq(out, want10, sizeof want10);
	sampler_permutation(16, true, 42, 3, out);
	ck_assert_mem_eq(out, want16, sizeof want16);
}
END_TEST

/* The table's shuffle as docs/protocol.md writes it, one draw at a time. */
static void
plain_fisher_yates(uint64_t n, uint64_t seed, uint64_t epoch, uint64_t *out)
{
	uint64_t		key, ctr = 0, i, j, t, m, thr;
	unsigned __int128	p;

	key = splitmix64_mix(seed ^ splitmix64_mix(epoch ^
	    0x6a09e667f3bcc909ULL));
	for (i = 0; i < n; i++)
		out[i] = i;
	for (i = n > 1 ? n - 1 : 0; i > 0; i--) {
		m = i + 1;
		p = (unsigned __int128)splitmix64_mix(key + ++ctr *
		    SPLITMIX64_GAMMA) * m;
		thr = -m % m;
		while ((uint64_t)p < thr)
			p = (unsigned __int128)splitmix64_mix(key + ++ctr *
			    SPLITMIX64_GAMMA) * m;
		j = (uint64_t)(p >> 64);
		t = out[i];
		out[i] = out[j];
		out[j] = t;
	}
}

/*
 * sampler.c makes its draws ahead of the swaps to prefetch the table; the
 * order must be the plain pass's, for every N around the look-ahead.
 */
START_TEST(table_shuffle_is_the_plain_fisher_yates)
{
	uint64_t	*a, *b, n, seed;

	a = malloc(70000 * sizeof *a);
	b = malloc(70000 * sizeof *b);
	ck_assert(a != NULL && b != NULL);
	for (n = 1; n <= 100; n++)
		for (seed = 0; seed < 4; seed++) {
			plain_fisher_yates(n, seed, n, a);
			sampler_permutation(n, true, seed, n, b);
			ck_assert_mem_eq(a, b, n * sizeof *a);
		}
	plain_fisher_yates(65537, 11, 2, a);
	sampler_permutation(65537, true, 11, 2, b);
	ck_assert_mem_eq(a, b, 65537 * sizeof *a);
	free(a);
	free(b);
}
END_TEST

/*
 * All 24 orders of 4 elements must come out about equally often over many
 * epochs; the counts are deterministic, so this cannot flake.
 */
START_TEST(test_shuffle_uniform)
{
	unsigned int	counts[256];
	uint64_t	out[4], e;
	unsigned int	code, seen = 0, c;

	memset(counts, 0, sizeof counts);
	for (e = 0; e < 24000; e++) {
		sampler_permutation(4, true, 1, e, out);
		code = (unsigned int)(out[0] | out[1] << 2 | out[2] << 4 |
		    out[3] << 6);
		counts[code]++;
	}
	for (c = 0; c < 256; c++) {
		if (counts[c] == 0)
			continue;
		seen++;
		ck_assert_uint_gt(counts[c], 850);
		ck_assert_uint_lt(counts[c], 1150);
	}
	ck_assert_uint_eq(seen, 24);
}
END_TEST

START_TEST(test_shuffle_large)
{
	struct sampler_opts	 o = opts_default(1000000, 64, 100);
	uint64_t		*out, step, rows, j, bad = 0;
	unsigned char		*seen;

	o.shuffle = true;
	o.seed = 2024;
	o.drop_last = false;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.cbs, 6400);
	ck_assert_uint_eq(smp.steps_per_epoch, 157);
	out = malloc(smp.cbs * sizeof *out);
	seen = calloc(1000000, 1);
	ck_assert(out != NULL && seen != NULL);
	/* Check's assertions are slow; count the bad rows and assert once. */
	for (step = 0; step < smp.steps_per_epoch; step++) {
		rows = sampler_step_indices(&smp, 1, step, out);
		ck_assert_uint_eq(rows, sampler_step_rows(&smp, step));
		for (j = 0; j < rows; j++) {
			if (out[j] >= 1000000 || seen[out[j]] != 0)
				bad++;
			else
				seen[out[j]] = 1;
		}
	}
	for (j = 0; j < 1000000; j++)
		if (seen[j] != 1)
			bad++;
	ck_assert_uint_eq(bad, 0);
	free(out);
	free(seen);
}
END_TEST

/*
 * Split N samples of combined batch B*DI over np processes and check that
 * the blocks are disjoint, that every process has the same step count and
 * that together they cover what they must.
 */
static void
check_distributed(uint64_t n, uint32_t batch, uint32_t di, uint32_t np,
    bool drop_last, bool shuffle)
{
	struct sampler_opts	 o = opts_default(n, batch, di);
	struct sampler		 s;
	uint64_t		*all, count, total = 0, i, steps = 0;
	uint64_t		 cbs = (uint64_t)batch * di, per_proc;
	unsigned char		*seen;
	uint32_t		 p;

	seen = calloc(n, 1);
	ck_assert_ptr_nonnull(seen);
	o.drop_last = drop_last;
	o.shuffle = shuffle;
	o.seed = 77;
	o.process_count = np;
	for (p = 0; p < np; p++) {
		o.process_id = p;
		init_ok(&s, &o);
		if (p == 0)
			steps = s.steps_per_epoch;
		ck_assert_uint_eq(s.steps_per_epoch, steps);
		all = epoch_indices(&s, 2, &count);
		for (i = 0; i < count; i++) {
			if (all[i] >= n || seen[all[i]] != 0)
				ck_abort_msg("index %ju out of range or read "
				    "twice (N=%ju, P=%u, p=%u)",
				    (uintmax_t)all[i], (uintmax_t)n, np, p);
			seen[all[i]] = 1;
		}
		total += count;
		free(all);
		sampler_clear(&s);
	}
	if (drop_last) {
		per_proc = cbs * (n / (cbs * np));
		ck_assert_uint_eq(steps, per_proc / cbs);
		ck_assert_uint_eq(total, np * per_proc);
	} else {
		ck_assert_uint_eq(total, n);
		ck_assert_uint_eq(steps,
		    ((n + np - 1) / np + cbs - 1) / cbs);
	}
	free(seen);
}

START_TEST(test_distributed_disjoint)
{
	uint32_t	np;
	int		dl, sh;

	for (np = 2; np <= 4; np++)
		for (dl = 0; dl < 2; dl++)
			for (sh = 0; sh < 2; sh++) {
				check_distributed(10000, 16, 50, np, dl, sh);
				check_distributed(1003, 7, 3, np, dl, sh);
				check_distributed(97, 5, 1, np, dl, sh);
			}
}
END_TEST

START_TEST(two_processes_get_equal_contiguous_blocks)
{
	struct sampler_opts	o = opts_default(10000, 16, 50);
	uint64_t		out[800];

	o.process_count = 2;
	o.process_id = 0;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.block_length, 4800);
	ck_assert_uint_eq(smp.block_offset, 0);
	ck_assert_uint_eq(smp.steps_per_epoch, 6);
	sampler_clear(&smp);

	o.process_id = 1;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.block_length, 4800);
	ck_assert_uint_eq(smp.block_offset, 4800);
	ck_assert_uint_eq(smp.steps_per_epoch, 6);
	ck_assert_uint_eq(sampler_step_indices(&smp, 0, 0, out), 800);
	ck_assert_uint_eq(out[0], 4800);
	ck_assert_uint_eq(sampler_step_indices(&smp, 0, 5, out), 800);
	ck_assert_uint_eq(out[799], 9599);
}
END_TEST

START_TEST(three_processes_get_equal_contiguous_blocks)
{
	struct sampler_opts	o = opts_default(10000, 16, 50);
	uint32_t		p;

	o.process_count = 3;
	for (p = 0; p < 3; p++) {
		o.process_id = p;
		init_ok(&smp, &o);
		ck_assert_uint_eq(smp.block_length, 3200);
		ck_assert_uint_eq(smp.block_offset, p * 3200);
		ck_assert_uint_eq(smp.steps_per_epoch, 4);
		sampler_clear(&smp);
	}
}
END_TEST

START_TEST(test_distributed_p3_keep_last)
{
	struct sampler_opts	o = opts_default(10000, 16, 50);
	static const uint64_t	len[3] = { 3334, 3333, 3333 };
	static const uint64_t	off[3] = { 0, 3334, 6667 };
	static const uint64_t	tail[3] = { 134, 133, 133 };
	uint32_t		p;

	o.process_count = 3;
	o.drop_last = false;
	for (p = 0; p < 3; p++) {
		o.process_id = p;
		init_ok(&smp, &o);
		ck_assert_uint_eq(smp.block_length, len[p]);
		ck_assert_uint_eq(smp.block_offset, off[p]);
		ck_assert_uint_eq(smp.steps_per_epoch, 5);
		ck_assert_uint_eq(sampler_step_rows(&smp, 3), 800);
		ck_assert_uint_eq(sampler_step_rows(&smp, 4), tail[p]);
		sampler_clear(&smp);
	}
}
END_TEST

START_TEST(test_distributed_uneven_steps)
{
	struct sampler_opts	o = opts_default(10, 1, 1);
	static const uint64_t	len[4] = { 3, 3, 2, 2 };
	static const uint64_t	off[4] = { 0, 3, 6, 8 };
	uint64_t		out[1];
	uint32_t		p;

	o.process_count = 4;
	o.drop_last = false;
	for (p = 0; p < 4; p++) {
		o.process_id = p;
		init_ok(&smp, &o);
		ck_assert_uint_eq(smp.block_length, len[p]);
		ck_assert_uint_eq(smp.block_offset, off[p]);
		ck_assert_uint_eq(smp.steps_per_epoch, 3);
		ck_assert_uint_eq(sampler_step_rows(&smp, 0), 1);
		ck_assert_uint_eq(sampler_step_rows(&smp, 1), 1);
		ck_assert_uint_eq(sampler_step_rows(&smp, 2), p < 2 ? 1 : 0);
		ck_assert_uint_eq(sampler_step_indices(&smp, 0, 2, out),
		    p < 2 ? 1 : 0);
		if (p < 2)
			ck_assert_uint_eq(out[0], off[p] + 2);
		sampler_clear(&smp);
	}
}
END_TEST

START_TEST(test_distributed_shuffle_global)
{
	struct sampler_opts	 o = opts_default(1001, 4, 5);
	struct sampler		 s;
	uint64_t		*whole, *part, nw, np, done = 0;
	uint32_t		 p;

	/* One process's order is the concatenation of P processes' blocks. */
	o.shuffle = true;
	o.seed = 5;
	o.drop_last = false;
	init_ok(&smp, &o);
	whole = epoch_indices(&smp, 9, &nw);
	ck_assert_uint_eq(nw, 1001);
	o.process_count = 3;
	for (p = 0; p < 3; p++) {
		o.process_id = p;
		init_ok(&s, &o);
		part = epoch_indices(&s, 9, &np);
		ck_assert_mem_eq(part, whole + done, np * sizeof *part);
		done += np;
		free(part);
		sampler_clear(&s);
	}
	ck_assert_uint_eq(done, 1001);
	free(whole);
}
END_TEST

START_TEST(invalid_options_refused_with_messages)
{
	struct sampler_opts	o;

	o = opts_default(0, 16, 50);
	expect_cause(&o, "samples is 0; expected a dataset of at least 1 "
	    "sample", NULL);
	o = opts_default(10000, 0, 50);
	expect_cause(&o, "batch_size is 0; expected at least 1", NULL);
	o = opts_default(10000, 16, 0);
	expect_cause(&o, "device_iterations is 0; expected at least 1", NULL);

	o = opts_default(10000, 16, 50);
	o.replication_factor = 0;
	expect_cause(&o, "replication_factor is 0; expected at least 1", NULL);

	o = opts_default(10000, 16, 50);
	o.gradient_accumulation = 0;
	expect_cause(&o, "gradient_accumulation is 0; expected at least 1",
	    NULL);

	o = opts_default(10000, 16, 50);
	o.process_count = 0;
	expect_cause(&o, "process_count is 0; expected at least 1", NULL);

	o = opts_default(10000, 16, 50);
	o.process_count = 4;
	o.process_id = 4;
	expect_cause(&o, "process_id is 4", "process_count is 4", "0 to 3",
	    NULL);
	o.process_id = UINT32_MAX;
	expect_cause(&o, "process_id is 4294967295", NULL);
}
END_TEST

START_TEST(test_invalid_overflow)
{
	struct sampler_opts	o = opts_default(10000, UINT32_MAX, UINT32_MAX);

	o.replication_factor = 2;
	expect_cause(&o, "overflows 64 bits", "batch_size 4294967295",
	    "device_iterations 4294967295", "replication_factor 2",
	    "gradient_accumulation 1", NULL);

	/* (2^32-1)^2 fits; one more factor of 2^32-1 does not. */
	o.replication_factor = 1;
	o.drop_last = false;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.cbs, (uint64_t)UINT32_MAX * UINT32_MAX);
	ck_assert_uint_eq(smp.steps_per_epoch, 1);
	ck_assert_uint_eq(sampler_step_rows(&smp, 0), 10000);
	sampler_clear(&smp);

	o.gradient_accumulation = UINT32_MAX;
	expect_cause(&o, "overflows 64 bits", NULL);

	/* CBS fits, CBS * P does not: still a clean refusal. */
	o = opts_default(UINT64_MAX, UINT32_MAX, UINT32_MAX);
	o.process_count = 4;
	expect_cause(&o, "one step of 4 processes needs more than 2^64",
	    "drop_last=false", NULL);
}
END_TEST

START_TEST(test_invalid_no_step)
{
	struct sampler_opts	o = opts_default(1000, 16, 50);

	o.replication_factor = 4;
	expect_cause(&o, "the dataset has 1000 samples but one step needs "
	    "3200 (batch_size 16 x device_iterations 50 x replication_factor "
	    "4 x gradient_accumulation 1) with drop_last",
	    "drop_last=false", NULL);

	o.replication_factor = 1;
	o.process_count = 4;
	o.process_id = 2;
	expect_cause(&o, "the dataset has 1000 samples but one step of 4 "
	    "processes needs 3200 (combined batch 800 x 4 processes) with "
	    "drop_last; use fewer device iterations or replicas, or "
	    "drop_last=false", NULL);

	/* The same configuration is accepted without drop_last. */
	o.drop_last = false;
	init_ok(&smp, &o);
	ck_assert_uint_eq(smp.block_length, 250);
	ck_assert_uint_eq(smp.steps_per_epoch, 1);
	ck_assert_uint_eq(sampler_step_rows(&smp, 0), 250);
}
END_TEST

START_TEST(test_invalid_null_cause)
{
	struct sampler		s;
	struct sampler_opts	o = opts_default(10000, 0, 50);

	ck_assert_int_eq(sampler_init(&s, &o, NULL), -1);
	sampler_clear(&s);
}
END_TEST

/*
 * The Feistel shuffle (N > SAMPLER_TABLE_MAX), exercised on small N too
 * through sampler_feistel_*() and sampler_init_table_max().
 */

/* Feistel order of [0, N) for (seed, epoch) into @out. */
static void
feistel_order(uint64_t n, uint64_t seed, uint64_t epoch, uint64_t *out)
{
	struct sampler_feistel	f;
	uint64_t		i;

	sampler_feistel_init(&f, n, seed, epoch);
	for (i = 0; i < n; i++)
		out[i] = sampler_feistel_index(&f, i);
}

/* How many entries of @order (N of them) miss [0, N) or repeat one. */
static uint64_t
not_a_permutation(const uint64_t *order, uint64_t n)
{
	unsigned char	*seen;
	uint64_t	 i, bad = 0;

	ck_assert_ptr_nonnull(seen = calloc(n, 1));
	for (i = 0; i < n; i++) {
		if (order[i] >= n || seen[order[i]] != 0)
			bad++;
		else
			seen[order[i]] = 1;
	}
	free(seen);
	return (bad);
}

START_TEST(feistel_is_a_bijection_for_every_small_n)
{
	static const uint64_t	ns[] = { 1, 2, 3, 4, 5, 7, 16, 17, 100, 1000,
				    4096, 4097, 65537 };
	static const uint64_t	keys[][2] = { { 0, 0 }, { 42, 1 },
				    { 7, 12345 }, { UINT64_MAX, UINT64_MAX } };
	uint64_t		*out;
	size_t			 i, k;

	ck_assert_ptr_nonnull(out = malloc(65537 * sizeof *out));
	for (i = 0; i < sizeof ns / sizeof ns[0]; i++)
		for (k = 0; k < sizeof keys / sizeof keys[0]; k++) {
			feistel_order(ns[i], keys[k][0], keys[k][1], out);
			ck_assert_msg(not_a_permutation(out, ns[i]) == 0,
			    "N=%ju seed=%ju epoch=%ju: not a permutation",
			    (uintmax_t)ns[i], (uintmax_t)keys[k][0],
			    (uintmax_t)keys[k][1]);
		}
	free(out);
}
END_TEST

START_TEST(feistel_steps_of_every_process_cover_the_epoch_once)
{
	struct sampler_opts	 o = opts_default(1003, 7, 3);
	struct sampler		 s;
	uint64_t		*whole, *part, nw, np, done, i;
	uint32_t		 p, procs;

	/* The same order as sampler_feistel_index(), by process blocks. */
	o.shuffle = true;
	o.seed = 77;
	o.drop_last = false;
	ck_assert_int_eq(sampler_init_table_max(&smp, &o, 0, NULL), 0);
	ck_assert_ptr_null(smp.perm);
	whole = epoch_indices(&smp, 4, &nw);
	ck_assert_uint_eq(nw, 1003);
	ck_assert_uint_eq(not_a_permutation(whole, nw), 0);
	part = malloc(nw * sizeof *part);
	ck_assert_ptr_nonnull(part);
	feistel_order(1003, 77, 4, part);
	ck_assert_mem_eq(whole, part, nw * sizeof *part);
	free(part);
	for (procs = 2; procs <= 4; procs++) {
		o.process_count = procs;
		for (p = 0, done = 0; p < procs; p++) {
			o.process_id = p;
			ck_assert_int_eq(sampler_init_table_max(&s, &o, 0,
			    NULL), 0);
			part = epoch_indices(&s, 4, &np);
			ck_assert_mem_eq(part, whole + done,
			    np * sizeof *part);
			done += np;
			free(part);
			sampler_clear(&s);
		}
		ck_assert_uint_eq(done, 1003);
	}
	/* With drop_last a process's steps hold distinct indices too. */
	o.drop_last = true;
	o.process_count = 3;
	o.process_id = 1;
	ck_assert_int_eq(sampler_init_table_max(&s, &o, 0, NULL), 0);
	part = epoch_indices(&s, 4, &np);
	ck_assert_uint_eq(np, 21 * (1003 / 63));
	for (i = 0; i < np; i++)
		ck_assert_uint_eq(part[i], whole[s.block_offset + i]);
	free(part);
	sampler_clear(&s);
	free(whole);
}
END_TEST

START_TEST(feistel_depends_on_seed_and_epoch_only)
{
	struct sampler_opts	 o = opts_default(4097, 16, 3);
	struct sampler		 other;
	uint64_t		*a, *b, *c, na, nb, e, i, moved;

	o.shuffle = true;
	o.seed = 0x1234;
	o.drop_last = false;
	ck_assert_int_eq(sampler_init_table_max(&smp, &o, 0, NULL), 0);
	for (e = 0; e < 5; e++) {
		a = epoch_indices(&smp, e, &na);
		free(a);
	}
	a = epoch_indices(&smp, 5, &na);
	/* A fresh sampler and another geometry give the same epoch 5. */
	o.batch_size = 5;
	o.device_iterations = 11;
	ck_assert_int_eq(sampler_init_table_max(&other, &o, 0, NULL), 0);
	b = epoch_indices(&other, 5, &nb);
	ck_assert_uint_eq(na, nb);
	ck_assert_mem_eq(a, b, na * sizeof *a);
	sampler_clear(&other);
	free(b);
	/* Going back to an epoch already seen gives it again. */
	b = epoch_indices(&smp, 0, &nb);
	free(b);
	b = epoch_indices(&smp, 5, &nb);
	ck_assert_mem_eq(a, b, na * sizeof *a);
	free(b);

	/* Other epochs, other seeds, seed and epoch swapped: other orders. */
	ck_assert_ptr_nonnull(b = malloc(4097 * sizeof *b));
	ck_assert_ptr_nonnull(c = malloc(4097 * sizeof *c));
	feistel_order(4097, 0x1234, 6, b);
	ck_assert(memcmp(a, b, na * sizeof *a) != 0);
	feistel_order(4097, 0x1235, 5, b);
	ck_assert(memcmp(a, b, na * sizeof *a) != 0);
	feistel_order(4097, 5, 0x1234, b);
	ck_assert(memcmp(a, b, na * sizeof *a) != 0);
	feistel_order(4097, 0x1234, 5 + ((uint64_t)1 << 32), c);
	ck_assert(memcmp(a, c, na * sizeof *a) != 0);
	/* Far from the identity: a shuffle of 4097 fixes very few points. */
	for (i = 0, moved = 0; i < na; i++)
		moved += a[i] != i;
	ck_assert_uint_gt(moved, 4097 - 20);
	free(a);
	free(b);
	free(c);
}
END_TEST

/* An order of [0, N) for the spread check: position -> index. */
typedef uint64_t (*order_fn)(const void *, uint64_t);

static uint64_t
order_feistel(const void *arg, uint64_t i)
{
	return (sampler_feistel_index(arg, i));
}

static uint64_t
order_identity(const void *arg, uint64_t i)
{
	(void)arg;
	return (i);
}

/* Rotation by a third of N. */
static uint64_t
order_rotation(const void *arg, uint64_t i)
{
	const uint64_t	n = *(const uint64_t *)arg;

	return ((i + n / 3) % n);
}

/* i * 0x9e3779b97f4a7c15 mod N, N prime: a bijection spread over [0, N). */
static uint64_t
order_affine(const void *arg, uint64_t i)
{
	const uint64_t	n = *(const uint64_t *)arg;
	uint64_t	a = 0x9e3779b97f4a7c15ULL % n;

	return ((uint64_t)(((unsigned __int128)i * a) % n));
}

#define SPREAD_CELLS	64

/*
 * Chi-square statistics of an order of [0, N) on 64 x 64 cells: (position,
 * index) finds an order that keeps indices near their positions (the
 * identity, a rotation), (index, next index) one whose neighbours are
 * related (an affine map).  Each has 4095 degrees of freedom: about
 * 4095 +- 91 for a random permutation.
 */
static void
spread_chi2(order_fn fn, const void *arg, uint64_t n, double *pos,
    double *next)
{
	uint32_t	*a, *b;
	uint64_t	 i, y, prev = 0;
	double		 want = (double)n / (SPREAD_CELLS * SPREAD_CELLS), d;
	size_t		 c, cells = SPREAD_CELLS * SPREAD_CELLS;

	a = calloc(cells, sizeof *a);
	b = calloc(cells, sizeof *b);
	ck_assert(a != NULL && b != NULL);
	for (i = 0; i < n; i++) {
		y = fn(arg, i);
		a[i * SPREAD_CELLS / n * SPREAD_CELLS + y * SPREAD_CELLS / n]++;
		if (i > 0)
			b[prev * SPREAD_CELLS / n * SPREAD_CELLS +
			    y * SPREAD_CELLS / n]++;
		prev = y;
	}
	*pos = *next = 0;
	for (c = 0; c < cells; c++) {
		d = a[c] - want;
		*pos += d * d / want;
		d = b[c] - want;
		*next += d * d / want;
	}
	free(a);
	free(b);
}

START_TEST(feistel_spreads_like_a_random_permutation)
{
	struct sampler_feistel	f;
	static const uint64_t	sizes[] = { 1000003,
				    SAMPLER_TABLE_MAX + 1 };
	uint64_t		n, e, i, *counts;
	double			pos, next, chi, want, d;
	size_t			k;

	/*
	 * Within an epoch: the Feistel orders pass, orders with structure
	 * fail (the statistics are deterministic: nothing can flake).
	 */
	for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		n = sizes[k];
		sampler_feistel_init(&f, n, 2024, 3);
		spread_chi2(order_feistel, &f, n, &pos, &next);
		ck_assert_msg(pos > 4095 - 600 && pos < 4095 + 600 &&
		    next > 4095 - 600 && next < 4095 + 600, "N=%ju: chi-square "
		    "%.0f (positions) and %.0f (neighbours), expected about "
		    "4095", (uintmax_t)n, pos, next);
	}
	n = 1000003;
	spread_chi2(order_identity, &n, n, &pos, &next);
	ck_assert(pos > 4095 * 10);
	spread_chi2(order_rotation, &n, n, &pos, &next);
	ck_assert(pos > 4095 * 10);
	spread_chi2(order_affine, &n, n, &pos, &next);
	ck_assert(pos < 4095 + 600);	/* its positions look random */
	ck_assert(next > 4095 * 10);	/* its neighbours do not */

	/* Across epochs: where each position's index falls, for N = 100. */
	ck_assert_ptr_nonnull(counts = calloc(100 * 100, sizeof *counts));
	for (e = 0; e < 10000; e++) {
		sampler_feistel_init(&f, 100, 9, e);
		for (i = 0; i < 100; i++)
			counts[i * 100 + sampler_feistel_index(&f, i)]++;
	}
	/* 9801 degrees of freedom: 9801 +- 140. */
	for (i = 0, chi = 0, want = 100; i < 100 * 100; i++) {
		d = (double)counts[i] - want;
		chi += d * d / want;
	}
	ck_assert_msg(chi > 9801 - 900 && chi < 9801 + 900, "chi-square %.0f "
	    "over epochs, expected about 9801", chi);
	free(counts);
}
END_TEST

START_TEST(feistel_bijection_just_above_the_table)
{
	struct sampler_feistel	f;
	const uint64_t		n = SAMPLER_TABLE_MAX + 1;
	uint64_t		i, y, bad = 0;
	unsigned char		*seen;

	/* The smallest N on the Feistel path, every position once. */
	ck_assert_ptr_nonnull(seen = calloc(n, 1));
	sampler_feistel_init(&f, n, 1, 0);
	ck_assert_uint_eq(f.half_bits, 12);
	for (i = 0; i < n; i++) {
		y = sampler_feistel_index(&f, i);
		if (y >= n || seen[y] != 0)
			bad++;
		else
			seen[y] = 1;
	}
	ck_assert_uint_eq(bad, 0);
	free(seen);
}
END_TEST

START_TEST(table_up_to_the_threshold_then_feistel)
{
	struct sampler_opts	 o = opts_default(SAMPLER_TABLE_MAX, 64, 1);
	struct sampler_feistel	 f;
	uint64_t		*perm, out[64], j;

	/* N = 2^22: the table, the Fisher-Yates order of earlier releases. */
	o.shuffle = true;
	o.seed = 3;
	init_ok(&smp, &o);
	ck_assert_ptr_nonnull(smp.perm);
	ck_assert_uint_eq(sampler_step_indices(&smp, 2, 1, out), 64);
	ck_assert_ptr_nonnull(perm = malloc(SAMPLER_TABLE_MAX * sizeof *perm));
	sampler_permutation(SAMPLER_TABLE_MAX, true, 3, 2, perm);
	ck_assert_mem_eq(out, perm + 64, sizeof out);
	free(perm);
	sampler_clear(&smp);

	/* No table without shuffle. */
	o.shuffle = false;
	init_ok(&smp, &o);
	ck_assert_ptr_null(smp.perm);
	sampler_clear(&smp);

	/* N = 2^22 + 1: no table, each row's index from the bijection. */
	o = opts_default(SAMPLER_TABLE_MAX + 1, 64, 1);
	o.shuffle = true;
	o.seed = 3;
	init_ok(&smp, &o);
	ck_assert_ptr_null(smp.perm);
	ck_assert_uint_eq(sampler_step_indices(&smp, 2, 1, out), 64);
	sampler_feistel_init(&f, SAMPLER_TABLE_MAX + 1, 3, 2);
	for (j = 0; j < 64; j++)
		ck_assert_uint_eq(out[j], sampler_feistel_index(&f, 64 + j));
}
END_TEST

/* Monotonic microseconds. */
static uint64_t
now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
}

/* The peak resident set of this process, in KiB. */
static long
max_rss_kib(void)
{
	struct rusage	ru;

	ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
	return (ru.ru_maxrss);
}

/* Step @step of @epoch: @rows distinct indices below N, timed. */
static uint64_t
huge_step(struct sampler *s, uint64_t epoch, uint64_t step, uint64_t rows,
    uint64_t *out)
{
	uint64_t	t0, us, j, k;

	t0 = now_us();
	ck_assert_uint_eq(sampler_step_indices(s, epoch, step, out), rows);
	us = now_us() - t0;
	for (j = 0; j < rows; j++) {
		ck_assert_uint_lt(out[j], s->opts.samples);
		for (k = 0; k < j; k++)
			ck_assert_uint_ne(out[j], out[k]);
	}
	return (us);
}

START_TEST(huge_shuffled_dataset_needs_no_table)
{
	struct sampler_opts	o = opts_default((uint64_t)1 << 40, 64, 4);
	uint64_t		out[256], us = 0, last;
	long			rss;

	/*
	 * A client's sparse file of 2^40 one-byte samples: sampler_init()
	 * allocates nothing, and any step, of any epoch, is a few
	 * microseconds (a table would be 8 TiB, and its pass hours).
	 */
	o.shuffle = true;
	o.seed = 99;
	rss = max_rss_kib();
	init_ok(&smp, &o);
	ck_assert_ptr_null(smp.perm);
	ck_assert_uint_eq(smp.steps_per_epoch, ((uint64_t)1 << 40) / 256);
	last = smp.steps_per_epoch - 1;
	us += huge_step(&smp, 0, 0, 256, out);
	us += huge_step(&smp, 0, last, 256, out);
	us += huge_step(&smp, 7000000000ULL, 12345, 256, out);
	us += huge_step(&smp, 1, last / 2, 256, out);
	/* Loose for sanitizers and a busy machine; it is about 10 us. */
	ck_assert_msg(us < 50000, "four steps of 256 rows took %ju us",
	    (uintmax_t)us);
	/* A table would be 8 TiB; sanitizers' own bookkeeping is some MiB. */
	ck_assert_msg(max_rss_kib() - rss < 64 * 1024, "the peak RSS grew by "
	    "%ld KiB", max_rss_kib() - rss);
	sampler_clear(&smp);

	/* The largest N there is, split over 3 processes, short last step. */
	o = opts_default(UINT64_MAX, 64, 4);
	o.shuffle = true;
	o.seed = UINT64_MAX;
	o.drop_last = false;
	o.process_count = 3;
	o.process_id = 2;
	init_ok(&smp, &o);
	ck_assert_ptr_null(smp.perm);
	last = smp.steps_per_epoch - 1;
	huge_step(&smp, UINT64_MAX, 0, 256, out);
	huge_step(&smp, UINT64_MAX, last, sampler_step_rows(&smp, last), out);
}
END_TEST

/* Build the suite, one case per concern. */
/*
 * Elastic resume (issue 26), checked against a model that keeps the
 * epoch's undelivered positions as an explicit list and splits it by
 * poptorch's rules, stage after stage.
 */
struct model_stage {
	uint32_t	np;
	uint32_t	batch;		/* B, with DI 1: the stage's CBS */
	uint64_t	steps;		/* steps done; UINT64_MAX: to the end */
};

/* Process p's block of a list of @m entries, as sampler.h says. */
static uint64_t
model_block(uint64_t m, uint32_t np, uint32_t p, uint64_t cbs, bool drop_last,
    uint64_t *off, uint64_t *len)
{
	uint64_t	q, r, longest;

	if (drop_last) {
		*len = m / (cbs * np) * cbs;
		*off = p * *len;
		return (m / (cbs * np));
	}
	q = m / np;
	r = m % np;
	*len = q + (p < r);
	*off = p * q + (p < r ? p : r);
	longest = q + (r != 0);
	return ((longest + cbs - 1) / cbs);
}

/*
 * Run the epoch's stages through the model and through samplers, one per
 * process of each stage, comparing every step's indices; check that no
 * index comes twice and that the undelivered ones are exactly the stages'
 * drop_last remainders.
 */
static void
check_elastic(uint64_t n, bool shuffle, bool drop_last,
    const struct model_stage *st, uint32_t nst)
{
	struct sampler_opts	 o;
	struct sampler		 s;
	uint64_t		*list, *next, *perm, *got, *seen;
	uint64_t		 m = n, mnext, off, len, steps, k = 0, j, r, rows;
	uint64_t		 remainder = 0, delivered = 0, epoch = 3;
	uint32_t		 i, p;

	list = malloc(n * sizeof *list);
	next = malloc(n * sizeof *next);
	perm = malloc(n * sizeof *perm);
	got = malloc(n * sizeof *got);
	seen = calloc(n, sizeof *seen);
	ck_assert(list && next && perm && got && seen);
	for (j = 0; j < n; j++)
		list[j] = j;
	sampler_permutation(n, shuffle, 7, epoch, perm);
	o = opts_default(n, 1, 1);
	o.shuffle = shuffle;
	o.seed = 7;
	o.drop_last = drop_last;
	o.stages_epoch = epoch;
	for (i = 0; i < nst; i++) {
		o.batch_size = st[i].batch;
		o.process_count = st[i].np;
		o.nstages = i;
		mnext = 0;
		for (p = 0; p < st[i].np; p++) {
			steps = model_block(m, st[i].np, p, st[i].batch,
			    drop_last, &off, &len);
			o.process_id = p;
			init_ok(&s, &o);
			ck_assert_uint_eq(sampler_epoch_steps(&s, epoch), steps);
			k = st[i].steps < steps ? st[i].steps : steps;
			for (r = 0; r < k; r++) {
				rows = sampler_step_indices(&s, epoch, r, got);
				ck_assert_uint_eq(rows, sampler_epoch_step_rows(
				    &s, epoch, r));
				for (j = 0; j < rows; j++) {
					ck_assert_uint_eq(got[j], perm[list[off +
					    r * st[i].batch + j]]);
					ck_assert_uint_eq(seen[got[j]]++, 0);
					delivered++;
				}
				ck_assert_uint_eq(rows, r * st[i].batch >= len ?
				    0 : len - r * st[i].batch < st[i].batch ?
				    len - r * st[i].batch : st[i].batch);
			}
			/* What is left of the block goes to the next stage. */
			for (j = off + k * st[i].batch; j < off + len; j++)
				next[mnext++] = list[j];
			/* The next epoch is the ordinary split for this P. */
			if (p == 0 && i == nst - 1) {
				struct sampler	plain;
				struct sampler_opts po = o;

				po.nstages = 0;
				init_ok(&plain, &po);
				ck_assert_uint_eq(sampler_epoch_steps(&s,
				    epoch + 1), plain.steps_per_epoch);
				rows = sampler_step_indices(&s, epoch + 1, 0,
				    got);
				rows = sampler_step_indices(&plain, epoch + 1,
				    0, got + rows);
				ck_assert_mem_eq(got, got + rows,
				    rows * sizeof *got);
				sampler_clear(&plain);
			}
			sampler_clear(&s);
		}
		if (drop_last)
			remainder += m - (uint64_t)st[i].np *
			    (m / ((uint64_t)st[i].batch * st[i].np) *
			    st[i].batch);
		if (i < nst - 1) {
			o.stages[i].process_count = st[i].np;
			o.stages[i].cbs = st[i].batch;
			o.stages[i].steps_done = k;	/* as the trainer ran */
		}
		memcpy(list, next, mnext * sizeof *list);
		m = mnext;
	}
	/* The last stage ran to its end: what is left is the remainders. */
	ck_assert_uint_eq(delivered + remainder, n);
	ck_assert_uint_eq(drop_last ? remainder : 0, n - delivered);
	free(list);
	free(next);
	free(perm);
	free(got);
	free(seen);
}

START_TEST(elastic_resume_delivers_every_sample_once)
{
	/* The cases: 4 processes saved at step k, resumed with 2, 3
	 * and 8, with and without shuffle and drop_last. */
	static const uint32_t	 resumed[] = { 2, 3, 8 };
	static const uint64_t	 ns[] = { 1000, 1003, 997, 200 };
	uint64_t		 k;
	unsigned		 a, b, c;

	for (a = 0; a < 4; a++)
		for (k = 0; k <= 3; k++)
			for (b = 0; b < 3; b++)
				for (c = 0; c < 4; c++) {
					struct model_stage st[2] = {
						{ 4, 16, k },
						{ resumed[b], 16, UINT64_MAX },
					};

					check_elastic(ns[a], c & 1, c & 2, st,
					    2);
				}
}
END_TEST

START_TEST(elastic_repeated_changes_within_an_epoch)
{
	/* 4 -> 2 -> 3, and per-process batches that change with P. */
	struct model_stage	 a[3] = {
		{ 4, 16, 5 }, { 2, 16, 7 }, { 3, 16, UINT64_MAX } };
	struct model_stage	 b[4] = {
		{ 4, 10, 3 }, { 2, 20, 4 }, { 8, 5, 2 },
		{ 3, 7, UINT64_MAX } };
	unsigned		 c;

	for (c = 0; c < 4; c++) {
		check_elastic(1000, c & 1, c & 2, a, 3);
		check_elastic(1009, c & 1, c & 2, b, 4);
		/* A stage saved at its last step leaves only remainders. */
		a[0].steps = 15;
		check_elastic(1000, c & 1, c & 2, a, 3);
		a[0].steps = 5;
	}
}
END_TEST

START_TEST(elastic_resume_above_the_table)
{
	/* 2^40 samples, Feistel: positions map back through the stages in
	 * O(stages) a row, with no table. */
	struct sampler_opts	 o = opts_default((uint64_t)1 << 40, 16, 50);
	uint64_t		 got[800], i, j;

	o.shuffle = true;
	o.seed = 11;
	o.process_count = 3;
	o.process_id = 2;
	o.stages_epoch = 0;
	o.nstages = 2;
	o.stages[0] = (struct sampler_stage){ 4, 800, 1000 };
	o.stages[1] = (struct sampler_stage){ 2, 1600, 17 };
	init_ok(&smp, &o);
	ck_assert_ptr_null(smp.perm);
	ck_assert_uint_eq(sampler_step_indices(&smp, 0, 12345, got), 800);
	for (i = 0; i < 800; i++) {
		ck_assert_uint_lt(got[i], (uint64_t)1 << 40);
		for (j = 0; j < i; j++)
			ck_assert_uint_ne(got[i], got[j]);
	}
}
END_TEST

START_TEST(elastic_stages_refused_with_messages)
{
	struct sampler_opts	o = opts_default(1000, 16, 1);

	o.process_count = 2;
	o.nstages = 1;
	o.stages[0] = (struct sampler_stage){ 4, 16, 16 };
	/* 1000 samples, 4 processes, CBS 16, drop_last: 15 steps. */
	expect_cause(&o, "stage 0", "completed 16 steps", "make 15 steps",
	    NULL);
	o.stages[0] = (struct sampler_stage){ 0, 16, 1 };
	expect_cause(&o, "process_count 0", "expected at least 1", NULL);
	o.stages[0] = (struct sampler_stage){ 4, 0, 1 };
	expect_cause(&o, "combined batch size 0", NULL);
	o.stages[0] = (struct sampler_stage){ 4, 16, 1 };
	o.nstages = SAMPLER_MAX_STAGES + 1;
	expect_cause(&o, "changes of process count", "at most 16", NULL);
}
END_TEST

/*
 * Every step of epochs @e0, @e1, @e0 again (a table started for one epoch
 * and left for another) the same from the bounded calls, @work units and
 * @chunk rows at a time, as from sampler_step_indices().
 */
static void
check_bounded(const struct sampler_opts *o, uint64_t work, uint64_t chunk)
{
	static const uint64_t	 epochs[] = { 2, 5, 2 };
	struct sampler		 whole, part;
	uint64_t		*want, *got, step, steps, rows, r, w, calls, e;
	uint64_t		 epoch;
	char			*why = NULL;

	init_ok(&whole, o);
	ck_assert_msg(sampler_init_deferred(&part, o, &why) == 0, "%s", why);
	ck_assert_ptr_null(part.perm);
	ck_assert_int_eq(sampler_table_alloc(&part, &why), 0);
	want = malloc(whole.cbs * sizeof *want);
	got = malloc(whole.cbs * sizeof *got);
	ck_assert(want != NULL && got != NULL);
	for (e = 0; e < 3; e++) {
		epoch = epochs[e];
		/* A pass begun for the other epoch, then left. */
		w = work;
		sampler_prepare(&part, epoch == 2 ? 5 : 2, &w);
		for (calls = 0;; calls++) {
			w = work;
			if (sampler_prepare(&part, epoch, &w))
				break;
			if (calls > 100000000)
				ck_abort_msg("sampler_prepare never ends");
		}
		/* The first 200 steps and the last (a short one, maybe). */
		steps = sampler_epoch_steps(&whole, epoch);
		for (step = 0; step < steps; step++) {
			if (step == 200 && steps > 201)
				step = steps - 1;
			rows = sampler_step_indices(&whole, epoch, step, want);
			if (rows != sampler_epoch_step_rows(&part, epoch, step))
				ck_abort_msg("the step rows differ");
			for (r = 0; r < rows; r += chunk)
				sampler_rows_indices(&part, epoch, step, r,
				    r + chunk < rows ? r + chunk : rows,
				    got + r);
			if (memcmp(want, got, rows * sizeof *got) != 0)
				ck_abort_msg("epoch %llu step %llu differs in chunks of %llu "
			    "rows, %llu units", (unsigned long long)epoch,
			    (unsigned long long)step, (unsigned long long)chunk,
			    (unsigned long long)work);
		}
	}
	free(want);
	free(got);
	sampler_clear(&whole);
	sampler_clear(&part);
}

/*
 * The bounded calls the daemon makes (sampler_prepare() a few units at a
 * time, sampler_rows_indices() a few rows at a time) give the steps of
 * sampler_step_indices(): plain, the table's shuffle, the Feistel
 * shuffle, elastic stages with each, distributed, short last steps.
 */
START_TEST(bounded_calls_give_the_same_steps)
{
	static const uint64_t	units[] = { 1, 7, 1000, UINT64_MAX };
	static const uint64_t	chunks[] = { 1, 5, 64 };
	struct sampler_opts	o;
	unsigned		i, j, k;

	for (i = 0; i < 6; i++) {
		o = opts_default(i < 4 ? 1003 : SAMPLER_TABLE_MAX + 9, 8, 3);
		o.shuffle = i % 2 == 1;
		o.seed = 17;
		o.drop_last = i == 0;
		o.process_count = i == 2 ? 3 : 1;
		o.process_id = i == 2 ? 1 : 0;
		if (i >= 3) {
			o.stages_epoch = 2;
			o.nstages = 2;
			o.stages[0] = (struct sampler_stage){ 4, 16, 3 };
			o.stages[1] = (struct sampler_stage){ 3, 8, 5 };
		}
		for (j = 0; j < 4; j++)
			for (k = 0; k < 3; k++) {
				/* The big ones once, at full speed. */
				if (i >= 4 && (j != 3 || k != 2))
					continue;
				check_bounded(&o, units[j], chunks[k]);
			}
	}
}
END_TEST

/*
 * A 2^22-sample table's Fisher-Yates pass in bounded calls: each spends
 * no more than it is given (one swap over at most), and all of them
 * together about N x (1 + SAMPLER_COST_SWAP) units.
 */
START_TEST(table_pass_spends_what_it_is_given)
{
	struct sampler_opts	o = opts_default(SAMPLER_TABLE_MAX, 64, 1);
	struct sampler		whole;
	uint64_t		w, spent = 0, calls = 0, give = 256 * 1024;
	char			*why = NULL;

	o.shuffle = true;
	o.seed = 3;
	ck_assert_int_eq(sampler_init_deferred(&smp, &o, &why), 0);
	ck_assert_uint_eq(sampler_table_bytes(&smp), SAMPLER_TABLE_MAX * 8);
	ck_assert_ptr_null(smp.perm);
	ck_assert_int_eq(sampler_table_alloc(&smp, &why), 0);
	ck_assert_ptr_nonnull(smp.perm);
	for (;;) {
		w = give;
		calls++;
		if (sampler_prepare(&smp, 4, &w))
			break;
		ck_assert_uint_le(w, give);
		ck_assert_uint_lt(w, SAMPLER_COST_SWAP);
		spent += give - w;
	}
	spent += give - w;
	ck_assert_uint_le(spent, SAMPLER_TABLE_MAX * (1 + SAMPLER_COST_SWAP));
	ck_assert_uint_ge(spent, (SAMPLER_TABLE_MAX - 1) *
	    (1 + SAMPLER_COST_SWAP));
	ck_assert_uint_ge(calls, spent / give);
	init_ok(&whole, &o);
	w = UINT64_MAX;
	ck_assert(sampler_prepare(&whole, 4, &w));
	ck_assert_mem_eq(whole.perm, smp.perm, SAMPLER_TABLE_MAX * 8);
	sampler_clear(&whole);
}
END_TEST

/* What a row costs, and which samplers have a table to charge. */
START_TEST(row_costs_and_table_bytes)
{
	struct sampler_opts	o = opts_default(1000, 10, 1);
	char			*why = NULL;

	ck_assert_int_eq(sampler_init_deferred(&smp, &o, &why), 0);
	ck_assert_uint_eq(sampler_row_cost(&smp, 0), 1);
	ck_assert_uint_eq(sampler_table_bytes(&smp), 0);
	sampler_clear(&smp);
	o.shuffle = true;
	ck_assert_int_eq(sampler_init_deferred(&smp, &o, &why), 0);
	ck_assert_uint_eq(sampler_row_cost(&smp, 0), 2);
	ck_assert_uint_eq(sampler_table_bytes(&smp), 8000);
	sampler_clear(&smp);
	o.samples = SAMPLER_TABLE_MAX + 1;
	o.stages_epoch = 1;
	o.nstages = 3;
	o.stages[0] = o.stages[1] = o.stages[2] =
	    (struct sampler_stage){ 2, 1, 1 };
	ck_assert_int_eq(sampler_init_deferred(&smp, &o, &why), 0);
	ck_assert_uint_eq(sampler_table_bytes(&smp), 0);
	ck_assert_uint_eq(sampler_row_cost(&smp, 0), 1 + SAMPLER_COST_FEISTEL);
	ck_assert_uint_eq(sampler_row_cost(&smp, 1), 1 + SAMPLER_COST_FEISTEL +
	    3 * SAMPLER_COST_STAGE);
}
END_TEST

static Suite *
sampler_suite(void)
{
	Suite	*s = suite_create("sampler");
	TCase	*tc;

	tc = tcase_create("steps");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_steps_tutorial);
	tcase_add_test(tc, test_steps_tutorial_replicas);
	tcase_add_test(tc, test_steps_mnist_train);
	tcase_add_test(tc, test_steps_mnist_test);
	tcase_add_test(tc, test_steps_fashion_mnist);
	tcase_add_test(tc, test_steps_doc_distributed);
	tcase_add_test(tc, test_no_shuffle_order);
	suite_add_tcase(s, tc);

	tc = tcase_create("layout");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_row_owner_worked_example);
	tcase_add_test(tc, test_row_owner_all_axes);
	suite_add_tcase(s, tc);

	tc = tcase_create("shuffle");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_shuffle_is_permutation);
	tcase_add_test(tc, test_shuffle_reproducible);
	tcase_add_test(tc, test_shuffle_epochs_and_seeds_differ);
	tcase_add_test(tc, test_shuffle_trivial_sizes);
	tcase_add_test(tc, shuffle_matches_an_independent_transcription);
	tcase_add_test(tc, table_shuffle_is_the_plain_fisher_yates);
	tcase_add_test(tc, test_shuffle_uniform);
	tcase_add_test(tc, test_shuffle_large);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("feistel");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, feistel_is_a_bijection_for_every_small_n);
	tcase_add_test(tc, feistel_steps_of_every_process_cover_the_epoch_once);
	tcase_add_test(tc, feistel_depends_on_seed_and_epoch_only);
	tcase_add_test(tc, feistel_spreads_like_a_random_permutation);
	tcase_add_test(tc, feistel_bijection_just_above_the_table);
	tcase_add_test(tc, table_up_to_the_threshold_then_feistel);
	tcase_add_test(tc, huge_shuffled_dataset_needs_no_table);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("distributed");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_distributed_disjoint);
	tcase_add_test(tc, two_processes_get_equal_contiguous_blocks);
	tcase_add_test(tc, three_processes_get_equal_contiguous_blocks);
	tcase_add_test(tc, test_distributed_p3_keep_last);
	tcase_add_test(tc, test_distributed_uneven_steps);
	tcase_add_test(tc, test_distributed_shuffle_global);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("validation");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, invalid_options_refused_with_messages);
	tcase_add_test(tc, test_invalid_overflow);
	tcase_add_test(tc, test_invalid_no_step);
	tcase_add_test(tc, test_invalid_null_cause);
	suite_add_tcase(s, tc);

	tc = tcase_create("elastic");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, elastic_resume_delivers_every_sample_once);
	tcase_add_test(tc, elastic_repeated_changes_within_an_epoch);
	tcase_add_test(tc, elastic_resume_above_the_table);
	tcase_add_test(tc, elastic_stages_refused_with_messages);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("bounded");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, bounded_calls_give_the_same_steps);
	tcase_add_test(tc, table_pass_spends_what_it_is_given);
	tcase_add_test(tc, row_costs_and_table_bytes);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	return (s);
}

/* Run every case; CK_VERBOSITY and CK_FORK pick the mode. */
int
main(void)
{
	return (run_suite(sampler_suite()));
}
