/* SPDX-License-Identifier: MIT */
/*
 * The standalone gather of packed token rows: the honest limit for
 * infeed's tokens a second (issue 37), what a trainer's own process could
 * do at best with the same files and no daemon.
 *
 *	tokens-gather TOKENS.bin INDEX.idx [--seq-len 2048] [--rows 16]
 *	    [--threads N] [--epochs N] [--repack epoch|none]
 *	    [--write stream|direct] [--json]
 *
 * The documents of INDEX.idx (N + 1 uint64 offsets, as
 * infeed.write_tokens() writes) in the uint16 ids of TOKENS.bin are packed
 * as infeedd packs them (common/packing.c, best-fit decreasing over all
 * pieces), the rows taken in a shuffled order (the sampler's Feistel
 * bijection, seed 1), a step of --rows rows at a time, for --epochs
 * epochs (1 by default).  With --repack epoch (the default, as a tokens
 * section's) each epoch's rows hold the pieces packing_piece() gives that
 * epoch, as infeedd's do; none: the same rows every epoch.  Each row is
 * what infeedd's workers write, with the same loop
 * (packing_row_put()): int32 [3, seq_len], token ids (widened from the
 * mapping), position ids and segment ids.  Each thread (threads = CPUs
 * by default) takes its share of a step's rows, a barrier a step, and
 * either (--write stream, the default) builds each row in a buffer of
 * its own, in cache, and writes it to the step buffer with streaming
 * stores (copy_row()), or (direct) builds it in the step buffer, as a
 * worker does in a slot that fits the cache; benchmarks/tokens-throughput
 * takes the better of the two as the limit.  Prints real tokens a second
 * (padding not counted), rows a second and the packing's efficiency.
 */

#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"
#include "packing.h"
#include "sampler.h"

struct gather {
	const uint16_t		*tok;
	struct packing		 pk;
	uint32_t		 seq;
	uint32_t		 rows;		/* a step */
	uint64_t		 steps;		/* an epoch */
	uint64_t		 epochs;
	bool			 per_epoch;	/* --repack epoch */
	bool			 direct;	/* --write direct */
	unsigned		 threads;
	int32_t			*step;		/* rows x 3 x seq */
	pthread_barrier_t	 bar;
	uint64_t		 tokens[64];	/* per thread */
};

struct gather_thread {
	struct gather	*g;
	unsigned	 id;
};

/* Map @path read-only, or exit saying why. */
static const void *
gather_map(const char *path, size_t *len)
{
	struct stat	 sb;
	void		*p;
	int		 fd;

	if ((fd = open(path, O_RDONLY)) == -1 || fstat(fd, &sb) == -1) {
		fprintf(stderr, "tokens-gather: %s: %s\n", path,
		    strerror(errno));
		exit(1);
	}
	*len = (size_t)sb.st_size;
	p = mmap(NULL, *len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "tokens-gather: mmap %s: %s\n", path,
		    strerror(errno));
		exit(1);
	}
	close(fd);
	return (p);
}

/* Row @r of @epoch, as infeedd's tokens reader writes it, into @buf. */
static uint64_t
gather_row(const struct gather *g, uint64_t r, uint64_t epoch, int32_t *buf)
{
	int32_t		*ids = buf, *pos = buf + g->seq, *seg = pos + g->seq;
	uint32_t	 at = 0, k = 1;
	uint64_t	 i;

	for (i = g->pk.row_first[r]; i < g->pk.row_first[r + 1]; i++, k++) {
		const struct packing_piece *pc = packing_piece(&g->pk, i, 1,
		    epoch);

		packing_row_put(ids + at, pos + at, seg + at, g->tok +
		    pc->start, false, pc->len, 0, (int32_t)k);
		at += pc->len;
	}
	packing_row_put(ids + at, pos + at, seg + at, NULL, false,
	    g->seq - at, 0, 0);
	return (at);
}

/* One thread: its share of every step's rows. */
static void *
gather_main(void *arg)
{
	struct gather_thread	*t = arg;
	struct gather		*g = t->g;
	size_t			 row_bytes = 3 * (size_t)g->seq * 4;
	int32_t			*buf = aligned_alloc(64, row_bytes);
	struct sampler_feistel	 order;
	uint64_t		 e, s, b, toks = 0;
	uint32_t		 lo = g->rows * t->id / g->threads,
				 hi = g->rows * (t->id + 1) / g->threads;
	uint8_t			*row;

	if (buf == NULL)
		abort();
	for (e = 0; e < g->epochs; e++) {
		sampler_feistel_init(&order, g->pk.rows, 1, e);
		for (s = 0; s < g->steps; s++) {
			for (b = lo; b < hi; b++) {
				row = (uint8_t *)g->step + b * row_bytes;
				toks += gather_row(g, sampler_feistel_index(
				    &order, s * g->rows + b), e, g->direct ?
				    (int32_t *)(void *)row : buf);
				if (!g->direct)
					copy_row(row, buf, row_bytes, true);
			}
			copy_fence();
			pthread_barrier_wait(&g->bar);
		}
	}
	g->tokens[t->id] = toks;
	free(buf);
	return (NULL);
}

int
main(int argc, char **argv)
{
	struct gather		 g;
	struct gather_thread	 th[64];
	pthread_t		 tid[64];
	struct timespec		 t0, t1;
	const uint64_t		*idx;
	size_t			 tok_len, idx_len;
	uint64_t		 toks = 0;
	double			 s;
	unsigned		 i;
	bool			 json = false;
	long			 ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	memset(&g, 0, sizeof g);
	g.seq = 2048;
	g.rows = 16;
	g.epochs = 1;
	g.per_epoch = true;
	g.threads = ncpu > 0 && ncpu < 64 ? (unsigned)ncpu : 1;
	if (argc < 3) {
		fprintf(stderr, "usage: tokens-gather TOKENS.bin INDEX.idx "
		    "[--seq-len N] [--rows N] [--threads N] [--epochs N] "
		    "[--repack epoch|none] [--write stream|direct] "
		    "[--json]\n");
		return (2);
	}
	for (i = 3; i < (unsigned)argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--seq-len") == 0)
			g.seq = (uint32_t)atoi(argv[++i]);
		else if (i + 1 < (unsigned)argc && strcmp(argv[i], "--rows") == 0)
			g.rows = (uint32_t)atoi(argv[++i]);
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--threads") == 0)
			g.threads = (unsigned)atoi(argv[++i]);
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--epochs") == 0)
			g.epochs = (uint64_t)atoll(argv[++i]);
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--repack") == 0)
			g.per_epoch = strcmp(argv[++i], "none") != 0;
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--write") == 0)
			g.direct = strcmp(argv[++i], "direct") == 0;
		else {
			fprintf(stderr, "tokens-gather: unexpected '%s'\n",
			    argv[i]);
			return (2);
		}
	}
	if (g.threads < 1 || g.threads > 64 || g.rows < g.threads ||
	    g.seq < 1 || g.seq > PACKING_SEQ_LEN_MAX || g.epochs < 1) {
		fprintf(stderr, "tokens-gather: 1 to 64 threads, at most one a "
		    "row, a seq_len from 1 and an epoch at least\n");
		return (2);
	}
	g.tok = gather_map(argv[1], &tok_len);
	idx = gather_map(argv[2], &idx_len);
	if (idx_len < 16 || idx_len % 8 != 0 ||
	    idx[idx_len / 8 - 1] != tok_len / 2) {
		fprintf(stderr, "tokens-gather: %s is not the index of %s's "
		    "uint16 ids\n", argv[2], argv[1]);
		return (1);
	}
	if (packing_make(&g.pk, idx, idx_len / 8 - 1, g.seq, PACKING_BFD, 0,
	    g.per_epoch) != 0) {
		fprintf(stderr, "tokens-gather: packing: %s\n", strerror(errno));
		return (1);
	}
	g.steps = g.pk.rows / g.rows;
	g.step = aligned_alloc(64, (size_t)g.rows * 3 * g.seq * 4);
	if (g.step == NULL || g.steps == 0)
		return (1);
	memset(g.step, 0, (size_t)g.rows * 3 * g.seq * 4);
	pthread_barrier_init(&g.bar, NULL, g.threads);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < g.threads; i++) {
		th[i].g = &g;
		th[i].id = i;
		if (pthread_create(&tid[i], NULL, gather_main, &th[i]) != 0)
			return (1);
	}
	for (i = 0; i < g.threads; i++) {
		pthread_join(tid[i], NULL);
		toks += g.tokens[i];
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (json)
		printf("{\"tokens_per_s\":%.0f,\"rows_per_s\":%.0f,\"steps\":"
		    "%llu,\"threads\":%u,\"packing_efficiency\":%.5f}\n",
		    (double)toks / s, (double)(g.epochs * g.steps * g.rows) / s,
		    (unsigned long long)(g.epochs * g.steps), g.threads,
		    packing_efficiency(&g.pk));
	else
		printf("%.1f M tokens/s, %.0f rows/s, %llu steps of %u rows, "
		    "%u threads, packing efficiency %.4f\n", (double)toks / s /
		    1e6, (double)(g.epochs * g.steps * g.rows) / s,
		    (unsigned long long)(g.epochs * g.steps), g.rows, g.threads,
		    packing_efficiency(&g.pk));
	packing_clear(&g.pk);
	free(g.step);
	return (0);
}
