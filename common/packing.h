/* SPDX-License-Identifier: MIT */
/*
 * Sequence packing: documents of tokens into rows of seq_len tokens, each
 * document whole in one row (a longer one cut into seq_len pieces and a
 * remainder), so that no row needs attention across documents beyond what
 * its segments say.  See packing.c for the algorithms and their measured
 * efficiency.
 */
#ifndef INFEED_COMMON_PACKING_H
#define INFEED_COMMON_PACKING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest seq_len packing takes (a row's bins are scanned by bitmap). */
#define PACKING_SEQ_LEN_MAX	(1u << 20)

/* One segment of a row: tokens [start, start + len) of the token file. */
struct packing_piece {
	uint64_t	start;
	uint32_t	len;
	uint32_t	doc_begins;	/* 1: the document's first token */
};

/* Which algorithm packs the pieces shorter than seq_len. */
enum packing_algo {
	PACKING_BFD = 0,	/* best-fit decreasing over a window */
	PACKING_NEXT_FIT = 1,	/* greedy, in document order */
	PACKING_PAD = 2,	/* one piece a row: the padding baseline */
};

/*
 * A packing: row r holds the pieces packing_piece() gives for slots
 * row_first[r] .. row_first[r + 1] - 1, in that order, then padding up to
 * seq_len.  Without re-packing (slot NULL) slot j is pieces[j].  With it,
 * pieces are in BFD's order (by window, longest first, then document
 * order), the pieces of one window and one length making a class
 * (class_first[c] .. class_first[c + 1] - 1; cls[] names each piece's),
 * and slot[j] is the piece BFD put in slot j; in an epoch, slot j holds
 * instead the piece of the same class at the position a bijection keyed
 * on (seed, epoch, class) gives: BFD over the pieces with the ties of
 * each class in another order, since BFD's choices depend on the lengths
 * alone.
 */
struct packing {
	uint32_t		 seq_len;
	uint64_t		 rows;
	uint64_t		*row_first;	/* rows + 1 entries */
	struct packing_piece	*pieces;
	uint64_t		 npieces;
	uint64_t		 tokens;	/* real tokens in all rows */
	uint64_t		*slot;		/* npieces; NULL: no re-packing */
	uint32_t		*cls;		/* npieces: each piece's class */
	uint64_t		*class_first;	/* nclasses + 1 */
	uint64_t		 nclasses;
};

/**
 * packing_make() - pack @ndocs documents, document i being tokens
 * [@bounds[i], @bounds[i + 1]) (@bounds has @ndocs + 1 increasing entries),
 * into rows of @seq_len tokens with @algo; @window: BFD packs this many
 * pieces at a time (0: all of them, the best efficiency).  @per_epoch
 * (BFD only): keep what packing_piece() needs to re-pack every epoch.  A
 * pure function of its arguments: the same packing in every process.
 *
 * Return: 0, or -1 with errno (ENOMEM; EINVAL for a @seq_len of 0 or over
 * PACKING_SEQ_LEN_MAX, or bounds that do not increase; EOVERFLOW for 2^32
 * pieces or more with @per_epoch).
 */
int	packing_make(struct packing *p, const uint64_t *bounds, uint64_t ndocs,
	    uint32_t seq_len, enum packing_algo algo, uint64_t window,
	    bool per_epoch);

/**
 * packing_bytes() - what packing_make() would keep for @npieces pieces in
 * at most @rows rows (@per_epoch as given to it): the figure to charge
 * before packing.
 */
uint64_t packing_bytes(uint64_t npieces, uint64_t rows, bool per_epoch);

/**
 * packing_pieces() - the pieces @bounds' @ndocs documents make at
 * @seq_len (a document of L tokens makes ceil(L / @seq_len)).
 */
uint64_t packing_pieces(const uint64_t *bounds, uint64_t ndocs,
	    uint32_t seq_len);

/**
 * packing_piece() - the piece in slot @j (row_first[r] <= @j <
 * row_first[r + 1] for row r) in epoch @epoch of seed @seed: the same
 * rows' lengths every epoch, other documents in them (see struct
 * packing).  O(1) expected; no allocation.
 */
const struct packing_piece *packing_piece(const struct packing *p,
	    uint64_t j, uint64_t seed, uint64_t epoch);

/**
 * packing_clear() - free what @p holds and zero it.
 */
void	packing_clear(struct packing *p);

/**
 * packing_efficiency() - real tokens over all tokens of the rows, 0 to 1.
 */
double	packing_efficiency(const struct packing *p);

/**
 * packing_row_put() - write @n tokens of a row's segment @k: @ids[x] the
 * id @src[x] (uint16, or uint32 when @wide; NULL: padding, 0), @pos[x]
 * the position @pos0 + x, @seg[x] = @k.  What the tokens reader writes
 * and the benchmarks' gather limit writes, one loop for both.
 */
void	packing_row_put(int32_t *ids, int32_t *pos, int32_t *seg,
	    const void *src, bool wide, uint32_t n, uint32_t pos0, int32_t k);

#endif /* INFEED_COMMON_PACKING_H */
