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
 * A packing: row r holds pieces[row_first[r]] .. pieces[row_first[r + 1]
 * - 1], in that order, then padding up to seq_len.
 */
struct packing {
	uint32_t		 seq_len;
	uint64_t		 rows;
	uint64_t		*row_first;	/* rows + 1 entries */
	struct packing_piece	*pieces;
	uint64_t		 npieces;
	uint64_t		 tokens;	/* real tokens in all rows */
};

/**
 * packing_make() - pack @ndocs documents, document i being tokens
 * [@bounds[i], @bounds[i + 1]) (@bounds has @ndocs + 1 increasing entries),
 * into rows of @seq_len tokens with @algo; @window: BFD packs this many
 * pieces at a time (0: all of them, the best efficiency).  A pure function
 * of its arguments: the same packing in every process.
 *
 * Return: 0, or -1 with errno (ENOMEM; EINVAL for a @seq_len of 0 or over
 * PACKING_SEQ_LEN_MAX, or bounds that do not increase).
 */
int	packing_make(struct packing *p, const uint64_t *bounds, uint64_t ndocs,
	    uint32_t seq_len, enum packing_algo algo, uint64_t window);

/**
 * packing_clear() - free what @p holds and zero it.
 */
void	packing_clear(struct packing *p);

/**
 * packing_efficiency() - real tokens over all tokens of the rows, 0 to 1.
 */
double	packing_efficiency(const struct packing *p);

#endif /* INFEED_COMMON_PACKING_H */
