/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for sequence packing (common/packing.c): the efficiency of
 * each algorithm on log-normal document lengths like web text's (BFD over
 * the whole dataset >= 99 % at seq_len 2048, printed with the others),
 * that a packing is a pure function of its arguments, that every token is
 * in exactly one row once and no segment spans two documents, the
 * refusals, and that packing_row_put() writes what a plain loop writes.
 */

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <check.h>

#include "packing.h"
#include "runner.h"
#include "splitmix64.h"

#define DOCS	65536
#define SEQ	2048

/*
 * Document bounds of @n log-normal lengths (median @median tokens, sigma
 * @sigma; at least 1, at most 64 * SEQ), from @seed; malloc'd.
 */
static uint64_t *
lognormal_bounds(uint64_t n, double median, double sigma, uint64_t seed)
{
	uint64_t	*b = malloc((n + 1) * sizeof *b), i, st = seed, len;
	double		 u1, u2, z;

	ck_assert_ptr_nonnull(b);
	b[0] = 0;
	for (i = 0; i < n; i++) {
		u1 = ((double)(splitmix64_next(&st) >> 11) + 1) / 9007199254740993.0;
		u2 = (double)(splitmix64_next(&st) >> 11) / 9007199254740992.0;
		z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
		len = (uint64_t)(median * exp(sigma * z));
		if (len < 1)
			len = 1;
		if (len > 64 * SEQ)
			len = 64 * SEQ;
		b[i + 1] = b[i] + len;
	}
	return (b);
}

/*
 * Every token once in epoch @epoch of @seed, rows within seq_len, each
 * piece inside one document.
 */
static void
check_epoch(const struct packing *p, const uint64_t *b, uint64_t n,
    uint64_t seed, uint64_t epoch)
{
	uint8_t		*seen = calloc(b[n], 1);
	uint64_t	 r, i, t, used, doc;

	ck_assert_ptr_nonnull(seen);
	ck_assert_uint_eq(p->row_first[0], 0);
	ck_assert_uint_eq(p->row_first[p->rows], p->npieces);
	for (r = 0; r < p->rows; r++) {
		used = 0;
		if (p->row_first[r] >= p->row_first[r + 1])
			ck_abort_msg("row %llu is empty", (unsigned long long)r);
		for (i = p->row_first[r]; i < p->row_first[r + 1]; i++) {
			const struct packing_piece *pc = packing_piece(p, i,
			    seed, epoch);

			used += pc->len;
			/* The document holding the piece's first token. */
			doc = 0;
			{
				uint64_t lo = 0, hi = n;

				while (hi - lo > 1) {
					uint64_t mid = (lo + hi) / 2;

					if (b[mid] <= pc->start)
						lo = mid;
					else
						hi = mid;
				}
				doc = lo;
			}
			/* Plain ifs: a passing ck_assert costs a write. */
			if (pc->start + pc->len > b[doc + 1])
				ck_abort_msg("row %llu: a piece spans documents "
				    "%llu and %llu", (unsigned long long)r,
				    (unsigned long long)doc,
				    (unsigned long long)doc + 1);
			if (pc->doc_begins != (pc->start == b[doc]))
				ck_abort_msg("row %llu: doc_begins wrong",
				    (unsigned long long)r);
			for (t = pc->start; t < pc->start + pc->len; t++) {
				if (seen[t])
					ck_abort_msg("token %llu twice",
					    (unsigned long long)t);
				seen[t] = 1;
			}
		}
		if (used > p->seq_len)
			ck_abort_msg("row %llu holds %llu tokens",
			    (unsigned long long)r, (unsigned long long)used);
	}
	for (t = 0; t < b[n]; t++) {
		if (!seen[t])
			ck_abort_msg("token %llu in no row",
			    (unsigned long long)t);
	}
	ck_assert_uint_eq(p->tokens, b[n]);
	free(seen);
}

/* Every token once, as epoch 0 of seed 0 packs them. */
static void
check_exactly_once(const struct packing *p, const uint64_t *b, uint64_t n)
{
	check_epoch(p, b, n, 0, 0);
}

/* Efficiency and cost of each algorithm; BFD over all is >= 99 %. */
START_TEST(efficiency_on_lognormal_lengths)
{
	static const struct {
		const char		*name;
		enum packing_algo	 algo;
		uint64_t		 window;
	} algos[] = {
		{ "bfd, all", PACKING_BFD, 0 },
		{ "bfd, window 4096", PACKING_BFD, 4096 },
		{ "bfd, window 512", PACKING_BFD, 512 },
		{ "next-fit", PACKING_NEXT_FIT, 0 },
		{ "pad", PACKING_PAD, 0 },
	};
	uint64_t	*b = lognormal_bounds(DOCS, 400, 1.2, 1);
	struct packing	 p;
	struct timespec	 t0, t1;
	double		 eff[5], ms;
	size_t		 i;

	for (i = 0; i < 5; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ck_assert_int_eq(packing_make(&p, b, DOCS, SEQ, algos[i].algo,
		    algos[i].window, true), 0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
		eff[i] = packing_efficiency(&p);
		printf("packing %-17s %llu docs, %llu tokens, seq_len %u: "
		    "%llu rows, efficiency %.4f, %.1f ms\n", algos[i].name,
		    (unsigned long long)DOCS, (unsigned long long)b[DOCS], SEQ,
		    (unsigned long long)p.rows, eff[i], ms);
		check_exactly_once(&p, b, DOCS);
		packing_clear(&p);
	}
	ck_assert_msg(eff[0] >= 0.99, "BFD packs %.4f, expected >= 0.99",
	    eff[0]);
	ck_assert(eff[0] >= eff[1] && eff[1] > eff[3] && eff[3] > eff[4]);
	free(b);
}
END_TEST

/* The same arguments give the same rows, byte for byte. */
START_TEST(packing_is_a_pure_function)
{
	uint64_t	*b = lognormal_bounds(5000, 300, 1.5, 7);
	struct packing	 p, q;

	ck_assert_int_eq(packing_make(&p, b, 5000, 1024, PACKING_BFD, 1000,
	    true), 0);
	ck_assert_int_eq(packing_make(&q, b, 5000, 1024, PACKING_BFD, 1000,
	    true), 0);
	ck_assert_uint_eq(p.rows, q.rows);
	ck_assert_uint_eq(p.npieces, q.npieces);
	ck_assert(memcmp(p.row_first, q.row_first,
	    (p.rows + 1) * sizeof *p.row_first) == 0);
	ck_assert(memcmp(p.pieces, q.pieces, p.npieces * sizeof *p.pieces) ==
	    0);
	check_exactly_once(&p, b, 5000);
	packing_clear(&p);
	packing_clear(&q);
	free(b);
}
END_TEST

/*
 * Each epoch packs anew: the same rows' count and efficiency, every token
 * once, but other pieces share a row (most rows' groups change from epoch
 * to epoch); the same (seed, epoch) gives the same rows; without
 * per_epoch every epoch is epoch 0.
 */
START_TEST(each_epoch_packs_anew)
{
	uint64_t	*b = lognormal_bounds(DOCS, 400, 1.2, 1), r, i, same,
			 multi, e;
	struct packing	 p, q;

	ck_assert_int_eq(packing_make(&p, b, DOCS, SEQ, PACKING_BFD, 0, true),
	    0);
	ck_assert_int_eq(packing_make(&q, b, DOCS, SEQ, PACKING_BFD, 0, false),
	    0);
	ck_assert_uint_eq(p.rows, q.rows);
	for (e = 0; e < 3; e++)
		check_epoch(&p, b, DOCS, 42, e);
	check_epoch(&p, b, DOCS, 43, 0);
	/* Rows of several pieces whose pieces are all the same, 0 vs 1. */
	same = multi = 0;
	for (r = 0; r < p.rows; r++) {
		bool	eq = true;

		if (p.row_first[r + 1] - p.row_first[r] < 2)
			continue;
		multi++;
		for (i = p.row_first[r]; i < p.row_first[r + 1]; i++) {
			if (packing_piece(&p, i, 42, 0)->start !=
			    packing_piece(&p, i, 42, 1)->start)
				eq = false;
			/* A pure function of (seed, epoch). */
			if (packing_piece(&p, i, 42, 1) !=
			    packing_piece(&p, i, 42, 1))
				ck_abort_msg("slot %llu moved",
				    (unsigned long long)i);
		}
		same += eq;
	}
	printf("re-packing: %llu rows of several pieces, %llu the same in "
	    "epochs 0 and 1; efficiency %.4f every epoch\n",
	    (unsigned long long)multi, (unsigned long long)same,
	    packing_efficiency(&p));
	ck_assert_uint_gt(multi, p.rows / 2);
	ck_assert_msg(same * 10 < multi, "%llu of %llu rows are the same in "
	    "epochs 0 and 1", (unsigned long long)same,
	    (unsigned long long)multi);
	/* Without per_epoch: one packing for all epochs. */
	for (i = 0; i < q.npieces; i++)
		ck_assert_ptr_eq(packing_piece(&q, i, 42, 0),
		    packing_piece(&q, i, 42, 7));
	ck_assert_uint_lt(packing_bytes(q.npieces, q.rows, false),
	    packing_bytes(p.npieces, p.rows, true));
	packing_clear(&p);
	packing_clear(&q);
	free(b);
}
END_TEST

/* Long documents are cut at seq_len; small seq_lens and tiny datasets. */
START_TEST(long_documents_are_cut)
{
	uint64_t	b[] = { 0, 10, 35, 36, 60 };
	struct packing	p;
	uint32_t	seq;
	int		algo;

	for (algo = 0; algo < 3; algo++) {
		for (seq = 1; seq <= 40; seq++) {
			ck_assert_int_eq(packing_make(&p, b, 4, seq,
			    (enum packing_algo)algo, algo == 0 ? 2 : 0,
			    true), 0);
			check_exactly_once(&p, b, 4);
			check_epoch(&p, b, 4, 3, 5);
			packing_clear(&p);
		}
	}
	/* 25 tokens at seq_len 8: 3 full pieces and a remainder of 1. */
	ck_assert_int_eq(packing_make(&p, b + 1, 1, 8, PACKING_BFD, 0, true), 0);
	ck_assert_uint_eq(p.npieces, 4);
	packing_clear(&p);
	ck_assert_int_eq(packing_make(&p, b, 0, 8, PACKING_BFD, 0, true), 0);
	ck_assert_uint_eq(p.rows, 0);
	packing_clear(&p);
}
END_TEST

/* A zero or too large seq_len and an empty document are refused. */
/*
 * packing_row_put()'s arrays, at every length around its 8-token steps,
 * for uint16 ids, uint32 ids and padding: a plain loop's, and nothing
 * past them written.
 */
START_TEST(row_put_writes_what_a_loop_writes)
{
	uint16_t	s16[40];
	uint32_t	s32[40];
	int32_t		a[3][48];
	uint32_t	n, x, kind;

	for (x = 0; x < 40; x++) {
		s16[x] = (uint16_t)(65535 - 3 * x);
		s32[x] = 2000000000u + x;
	}
	for (kind = 0; kind < 3; kind++) {
		for (n = 0; n <= 40; n++) {
			memset(a, 0x55, sizeof a);
			packing_row_put(a[0], a[1], a[2], kind == 0 ? (void *)s16 :
			    kind == 1 ? (void *)s32 : NULL, kind == 1, n, 7, 9);
			for (x = 0; x < 48; x++) {
				int32_t id = kind == 0 ? s16[x % 40] : kind == 1 ?
				    (int32_t)s32[x % 40] : 0;

				if (x >= n) {
					ck_assert_int_eq(a[0][x], 0x55555555);
					ck_assert_int_eq(a[1][x], 0x55555555);
					ck_assert_int_eq(a[2][x], 0x55555555);
					continue;
				}
				ck_assert_int_eq(a[0][x], id);
				ck_assert_int_eq(a[1][x], (int32_t)(7 + x));
				ck_assert_int_eq(a[2][x], 9);
			}
		}
	}
}
END_TEST

START_TEST(bad_arguments_refused)
{
	uint64_t	b[] = { 0, 10, 10, 20 };
	struct packing	p;

	errno = 0;
	ck_assert_int_eq(packing_make(&p, b, 1, 0, PACKING_BFD, 0, true), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(packing_make(&p, b, 1, PACKING_SEQ_LEN_MAX + 1,
	    PACKING_BFD, 0, true), -1);
	ck_assert_int_eq(packing_make(&p, b, 3, 8, PACKING_BFD, 0, true), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(p.pieces);
}
END_TEST

static Suite *
packing_suite(void)
{
	Suite	*s = suite_create("packing");
	TCase	*tc = tcase_create("packing");

	tcase_add_test(tc, efficiency_on_lognormal_lengths);
	tcase_add_test(tc, packing_is_a_pure_function);
	tcase_add_test(tc, each_epoch_packs_anew);
	tcase_add_test(tc, long_documents_are_cut);
	tcase_add_test(tc, bad_arguments_refused);
	tcase_add_test(tc, row_put_writes_what_a_loop_writes);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every case; CK_VERBOSITY and CK_FORK pick the mode. */
int
main(void)
{
	return (run_suite(packing_suite()));
}
