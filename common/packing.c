/* SPDX-License-Identifier: MIT */
/*
 * Sequence packing: which documents' tokens make each row of seq_len.
 *
 * A document of at most seq_len tokens is one piece; a longer one is cut
 * into pieces of seq_len (each a full row) and a remainder.  The pieces
 * shorter than seq_len are then packed into rows by one of:
 *
 *  - best-fit decreasing (PACKING_BFD, the default): the pieces of a
 *    window, longest first (a counting sort by length, stable), each into
 *    the open row whose free room is the smallest that holds it, found in
 *    a bitmap of the rooms that some row has (O(seq_len / 64) a piece at
 *    worst); a new row when none holds it.  Over the whole dataset
 *    (window 0) this is what Graphcore's histogram packing computes from
 *    the length histogram, done piece by piece.
 *  - next-fit (PACKING_NEXT_FIT): in document order, a new row whenever
 *    the piece does not fit the current one; the greedy baseline.
 *  - one piece a row (PACKING_PAD): the padding-per-document baseline.
 *
 * Measured by tests/common/test-packing.c on log-normal lengths like web
 * text's (median 400 tokens, sigma 1.2, so a mean of 820 and a tail past
 * seq_len; 65536 documents, 53.7 M tokens, seq_len 2048): BFD over all
 * 99.99 % in 4 ms, over windows of 4096 pieces 99.95 %, of 512 99.6 %;
 * next-fit 81 %; padding 35 %.  BFD over all is what the token reader
 * uses: the cost is a few ms per 50 M tokens, once, at open.
 *
 * The packing is a function of the bounds, seq_len, the algorithm and the
 * window alone, so every process (the daemon, a worker re-executed by the
 * fork server) that packs the same files gets the same rows.  Rows are in
 * the order they were opened; within a row, pieces are in document order.
 *
 * Re-packing each epoch (per_epoch, BFD): BFD decides from the lengths
 * alone, so taking the ties of each length (in a window) in another order
 * gives rows of the same lengths with other documents in them.  The
 * pieces are kept in BFD's order, grouped in classes of one window and
 * length, and each row's slots name the piece BFD put there; in epoch e
 * of seed s, packing_piece() gives a slot the piece of its class at the
 * position a Feistel bijection keyed on (s, e, class) maps it to.  Nothing
 * is made per epoch, and the rows' count is the same in every epoch.
 * Within a row, pieces are then longest first.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "packing.h"
#include "sampler.h"
#include "splitmix64.h"

#define NONE	UINT64_MAX

/* The open rows of BFD, bucketed by their free room. */
struct packing_bins {
	uint32_t	 seq_len;
	uint64_t	*head;		/* seq_len + 1: a stack of rows a room */
	uint64_t	*next;		/* a row's next in its stack */
	uint64_t	*bits;		/* rooms with a row */
	size_t		 nwords;
};

/* Push row @bin, with @room free, on its room's stack. */
static void
packing_push(struct packing_bins *b, uint64_t bin, uint32_t room)
{
	b->next[bin] = b->head[room];
	b->head[room] = bin;
	b->bits[room / 64] |= (uint64_t)1 << (room % 64);
}

/* Pop a row of the smallest room >= @len into *@room; NONE if none. */
static uint64_t
packing_pop(struct packing_bins *b, uint32_t len, uint32_t *room)
{
	size_t		w = len / 64;
	uint64_t	word, bin;

	word = b->bits[w] & (~(uint64_t)0 << (len % 64));
	while (word == 0) {
		if (++w == b->nwords)
			return (NONE);
		word = b->bits[w];
	}
	*room = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(word));
	bin = b->head[*room];
	b->head[*room] = b->next[bin];
	if (b->head[*room] == NONE)
		b->bits[w] &= ~((uint64_t)1 << (*room % 64));
	return (bin);
}

/* Close every open row (a window ends). */
static void
packing_bins_reset(struct packing_bins *b)
{
	size_t	i;

	for (i = 0; i <= b->seq_len; i++)
		b->head[i] = NONE;
	memset(b->bits, 0, b->nwords * sizeof *b->bits);
}

/*
 * BFD over windows: set bin_of[] for every piece, and order[] to the
 * pieces in the order BFD took them; return the rows.
 */
static int
packing_bfd(const struct packing_piece *pc, uint64_t n, uint32_t seq_len,
    uint64_t window, uint64_t *bin_of, uint64_t *order, uint64_t *nbins)
{
	struct packing_bins	 b;
	uint64_t		*count = NULL, w0, w1, i, bin;
	uint32_t		 room, len;
	int			 rc = -1;

	memset(&b, 0, sizeof b);
	b.seq_len = seq_len;
	b.nwords = (size_t)seq_len / 64 + 1;
	if (window == 0 || window > n)
		window = n;
	if ((b.head = calloc((size_t)seq_len + 1, sizeof *b.head)) == NULL ||
	    (b.next = calloc(n == 0 ? 1 : n, sizeof *b.next)) == NULL ||
	    (b.bits = calloc(b.nwords, sizeof *b.bits)) == NULL ||
	    (count = calloc((size_t)seq_len + 2, sizeof *count)) == NULL)
		goto out;
	*nbins = 0;
	for (w0 = 0; w0 < n; w0 = w1) {
		w1 = n - w0 < window ? n : w0 + window;
		packing_bins_reset(&b);
		/* Longest first, stable: count[] by seq_len - len. */
		memset(count, 0, ((size_t)seq_len + 2) * sizeof *count);
		for (i = w0; i < w1; i++)
			count[seq_len - pc[i].len + 1]++;
		for (i = 1; i <= seq_len + 1; i++)
			count[i] += count[i - 1];
		for (i = w0; i < w1; i++)
			order[w0 + count[seq_len - pc[i].len]++] = i;
		for (i = w0; i < w1; i++) {
			len = pc[order[i]].len;
			if ((bin = packing_pop(&b, len, &room)) == NONE) {
				bin = (*nbins)++;
				room = seq_len;
			}
			bin_of[order[i]] = bin;
			if (room - len > 0)
				packing_push(&b, bin, room - len);
		}
	}
	rc = 0;
out:
	free(b.head);
	free(b.next);
	free(b.bits);
	free(count);
	if (rc != 0)
		errno = ENOMEM;
	return (rc);
}

/*
 * Keep the pieces in BFD's @order, in classes of one window and one
 * length, and each row's slots: the piece BFD put there.
 */
static int
packing_classes(struct packing *p, const struct packing_piece *pc,
    const uint64_t *order, const uint64_t *bin_of, uint64_t n,
    uint64_t window)
{
	uint64_t	q, c = 0;

	if (window == 0 || window > n)
		window = n;
	if ((p->slot = calloc(n == 0 ? 1 : n, sizeof *p->slot)) == NULL ||
	    (p->cls = calloc(n == 0 ? 1 : n, sizeof *p->cls)) == NULL ||
	    (p->class_first = calloc(n + 1, sizeof *p->class_first)) == NULL)
		return (-1);
	for (q = 0; q < n; q++) {
		p->pieces[q] = pc[order[q]];
		if (q > 0 && (q % window == 0 ||
		    pc[order[q]].len != pc[order[q - 1]].len))
			p->class_first[++c] = q;
		p->cls[q] = (uint32_t)c;
		p->slot[p->row_first[bin_of[order[q]] + 1]++] = q;
	}
	p->nclasses = n == 0 ? 0 : c + 1;
	p->class_first[p->nclasses] = n;
	return (0);
}

/* Pack documents into rows of seq_len. */
int
packing_make(struct packing *p, const uint64_t *bounds, uint64_t ndocs,
    uint32_t seq_len, enum packing_algo algo, uint64_t window,
    bool per_epoch)
{
	struct packing_piece	*pc = NULL;
	uint64_t		*bin_of = NULL, *order = NULL, n = 0, i, k, len,
				 nbins = 0;
	uint32_t		 room = 0;

	memset(p, 0, sizeof *p);
	if (seq_len == 0 || seq_len > PACKING_SEQ_LEN_MAX) {
		errno = EINVAL;
		return (-1);
	}
	for (i = 0; i < ndocs; i++) {
		if (bounds[i + 1] <= bounds[i]) {
			errno = EINVAL;
			return (-1);
		}
	}
	n = packing_pieces(bounds, ndocs, seq_len);
	per_epoch = per_epoch && algo == PACKING_BFD;
	if (per_epoch && n > UINT32_MAX) {
		errno = EOVERFLOW;
		return (-1);
	}
	if ((pc = calloc(n == 0 ? 1 : n, sizeof *pc)) == NULL ||
	    (bin_of = calloc(n == 0 ? 1 : n, sizeof *bin_of)) == NULL ||
	    (order = calloc(n == 0 ? 1 : n, sizeof *order)) == NULL)
		goto nomem;
	for (i = 0, k = 0; i < ndocs; i++) {
		for (len = 0; len < bounds[i + 1] - bounds[i]; len += seq_len) {
			pc[k].start = bounds[i] + len;
			pc[k].len = (uint32_t)(bounds[i + 1] - pc[k].start <
			    seq_len ? bounds[i + 1] - pc[k].start : seq_len);
			pc[k].doc_begins = len == 0;
			p->tokens += pc[k].len;
			k++;
		}
	}

	switch (algo) {
	case PACKING_BFD:
		if (packing_bfd(pc, n, seq_len, window, bin_of, order,
		    &nbins) != 0)
			goto nomem;
		break;
	case PACKING_NEXT_FIT:
		for (i = 0; i < n; i++) {
			if (nbins == 0 || pc[i].len > room) {
				nbins++;
				room = seq_len;
			}
			room -= pc[i].len;
			bin_of[i] = nbins - 1;
		}
		break;
	default:
		for (i = 0; i < n; i++)
			bin_of[i] = nbins++;
		break;
	}

	/*
	 * The pieces by row, in document order within a row; or, to re-pack
	 * by epoch, by class, each row's slots in the order BFD filled them.
	 */
	if ((p->row_first = calloc(nbins + 2, sizeof *p->row_first)) == NULL ||
	    (p->pieces = calloc(n == 0 ? 1 : n, sizeof *p->pieces)) == NULL)
		goto nomem;
	for (i = 0; i < n; i++)
		p->row_first[bin_of[i] + 2]++;
	for (i = 2; i < nbins + 2; i++)
		p->row_first[i] += p->row_first[i - 1];
	if (per_epoch) {
		if (packing_classes(p, pc, order, bin_of, n, window) != 0)
			goto nomem;
	} else {
		for (i = 0; i < n; i++)
			p->pieces[p->row_first[bin_of[i] + 1]++] = pc[i];
	}
	free(pc);
	free(bin_of);
	free(order);
	p->seq_len = seq_len;
	p->rows = nbins;
	p->npieces = n;
	return (0);

nomem:
	free(pc);
	free(bin_of);
	free(order);
	packing_clear(p);
	errno = ENOMEM;
	return (-1);
}

/* Free a packing. */
void
packing_clear(struct packing *p)
{
	free(p->row_first);
	free(p->pieces);
	free(p->slot);
	free(p->cls);
	free(p->class_first);
	memset(p, 0, sizeof *p);
}

/* Pieces of seq_len and remainders. */
uint64_t
packing_pieces(const uint64_t *bounds, uint64_t ndocs, uint32_t seq_len)
{
	uint64_t	n = 0, i;

	for (i = 0; i < ndocs; i++)
		n += (bounds[i + 1] - bounds[i] + seq_len - 1) / seq_len;
	return (n);
}

/* What a packing keeps: pieces, row bounds, and the classes. */
uint64_t
packing_bytes(uint64_t npieces, uint64_t rows, bool per_epoch)
{
	uint64_t	b = npieces * sizeof(struct packing_piece) +
			    (rows + 2) * sizeof(uint64_t);

	if (per_epoch)
		b += npieces * (sizeof(uint64_t) + sizeof(uint32_t)) +
		    (npieces + 1) * sizeof(uint64_t);
	return (b);
}

/*
 * The bijections of the classes last used, by class: a row's pieces are
 * of the common lengths mostly, so most slots find theirs keyed already.
 * A bijection is a function of (its size, seed, epoch, class) alone.  Per
 * thread, so that packing_piece() stays safe to call from any.
 */
#define PACKING_KEYS	64
static __thread struct packing_key {
	uint64_t		 seed, epoch, c;
	struct sampler_feistel	 f;
} packing_keys[PACKING_KEYS];

/* Slot @j's piece in (@seed, @epoch): its class's, permuted. */
const struct packing_piece *
packing_piece(const struct packing *p, uint64_t j, uint64_t seed,
    uint64_t epoch)
{
	struct packing_key	*k;
	uint64_t		 q, c, first, n;

	if (p->slot == NULL)
		return (&p->pieces[j]);
	q = p->slot[j];
	c = p->cls[q];
	first = p->class_first[c];
	n = p->class_first[c + 1] - first;
	if (n == 1)
		return (&p->pieces[q]);
	k = &packing_keys[c % PACKING_KEYS];
	if (k->seed != seed || k->epoch != epoch || k->c != c ||
	    k->f.samples != n) {
		sampler_feistel_init(&k->f, n, seed ^ splitmix64_mix(c + 1),
		    epoch);
		k->seed = seed;
		k->epoch = epoch;
		k->c = c;
	}
	return (&p->pieces[first + sampler_feistel_index(&k->f, q - first)]);
}

/* Real tokens over the rows' room. */
double
packing_efficiency(const struct packing *p)
{
	if (p->rows == 0)
		return (0);
	return ((double)p->tokens / ((double)p->rows * p->seq_len));
}

/*
 * A piece's three arrays, 8 tokens a step: the ids widened to int32, the
 * positions counting up, the segment repeated.  By hand, since -O2 does
 * not vectorize loops of unknown length; 2.6 x the scalar loop's rows a
 * second on the 2-core VM (docs/performance.md, issue 37 round three).
 */
void
packing_row_put(int32_t *ids, int32_t *pos, int32_t *seg, const void *src,
    bool wide, uint32_t n, uint32_t pos0, int32_t k)
{
	const uint16_t	*s16 = src;
	const uint32_t	*s32 = src;
	uint32_t	 x = 0;

#ifdef __SSE2__
	__m128i		 zero = _mm_setzero_si128(), four = _mm_set1_epi32(4);
	__m128i		 p = _mm_setr_epi32((int32_t)pos0, (int32_t)pos0 + 1,
			    (int32_t)pos0 + 2, (int32_t)pos0 + 3);
	__m128i		 sk = _mm_set1_epi32(k), lo = zero, hi = zero, v;

	for (; x + 8 <= n; x += 8) {
		if (src != NULL && !wide) {
			v = _mm_loadu_si128((const __m128i *)(s16 + x));
			lo = _mm_unpacklo_epi16(v, zero);
			hi = _mm_unpackhi_epi16(v, zero);
		} else if (src != NULL) {
			lo = _mm_loadu_si128((const __m128i *)(s32 + x));
			hi = _mm_loadu_si128((const __m128i *)(s32 + x + 4));
		}
		_mm_storeu_si128((__m128i *)(ids + x), lo);
		_mm_storeu_si128((__m128i *)(ids + x + 4), hi);
		_mm_storeu_si128((__m128i *)(pos + x), p);
		p = _mm_add_epi32(p, four);
		_mm_storeu_si128((__m128i *)(pos + x + 4), p);
		p = _mm_add_epi32(p, four);
		_mm_storeu_si128((__m128i *)(seg + x), sk);
		_mm_storeu_si128((__m128i *)(seg + x + 4), sk);
	}
#endif
	for (; x < n; x++) {
		ids[x] = src == NULL ? 0 : wide ? (int32_t)s32[x] : s16[x];
		pos[x] = (int32_t)(pos0 + x);
		seg[x] = k;
	}
}
