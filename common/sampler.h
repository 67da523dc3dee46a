/* SPDX-License-Identifier: MIT */
/*
 * The step sampler: which dataset index goes in which row of which step.
 *
 * This is poptorch.DataLoader's arithmetic (shared/reference, sections B-F),
 * with its known flaws fixed:
 *
 *   CBS   = batch_size * device_iterations * replication_factor *
 *           gradient_accumulation
 *   row k of a step belongs to device iteration i, accumulation step a,
 *   replica r and micro-row b with k = ((i*GA + a)*R + r)*B + b; consecutive
 *   entries of the process's index sequence fill rows 0, 1, 2, ...
 *
 * Every epoch has a permutation of [0, N): the identity without shuffle, or
 * a shuffle driven by a counter-based generator keyed on (seed, epoch)
 * alone, so it is the same for any worker count, buffer size or daemon
 * restart, and any epoch can be computed without the ones before.  Up to
 * SAMPLER_TABLE_MAX samples the shuffle is a Fisher-Yates table of N
 * entries, allocated by sampler_init(); above it (N is a client's to
 * choose: a sparse file of 2^40 samples costs it nothing) it is a keyed
 * Feistel bijection of [0, N) computed position by position, with no
 * table, so that memory and time stay bounded by the rows of a step.
 *
 * The daemon computes a step's indices a bounded amount at a time
 * (sampler_prepare(), sampler_rows_indices(), sampler_row_cost()), so
 * that no size a client chooses holds its event loop: the table's
 * Fisher-Yates pass goes a number of swaps at a time, and rows of a step
 * go a number at a time, each row's cost weighed by its shuffle and
 * stages.  sampler_init_deferred() leaves the table to be allocated by
 * the caller (sampler_table_alloc()), once it has charged its
 * sampler_table_bytes() to the memory budget.
 *
 * Distributed process p of P reads one contiguous block of the epoch's
 * permutation:
 *   drop_last:  per_proc = CBS * floor(N / (CBS*P)), block p starts at
 *               p*per_proc; steps = per_proc / CBS on every process.
 *   otherwise:  blocks of N/P, the first N%P one longer; every process gets
 *               steps = ceil(ceil(N/P) / CBS) steps, so collectives never
 *               hang (poptorch lets the counts differ); a process whose block
 *               is shorter gets a shorter (possibly empty) last step.
 * P = 1 is the undistributed case: drop_last gives floor(N/CBS) steps,
 * otherwise ceil(N/CBS) with a short last step of N % CBS rows.
 *
 * A configuration that yields no step at all (N < CBS*P with drop_last) is
 * refused with a message, where poptorch divides by zero.
 *
 * Elastic resume (issue 26): an epoch begun under P0 processes, each with
 * combined batch size C0, that completed k0 global steps together (every
 * process took k0 steps), then went on under P1 processes with C1 that
 * completed k1 steps, and so on ("stages"), is finished by the loader's
 * own P and CBS.  The positions of the permutation that no process has
 * received form a list: stage 0's list is [0, N); the next stage's is,
 * block after block in process order, what is left of each of the stage's
 * blocks after its first k*C entries (the drop_last remainder of a stage,
 * the positions past P*per_proc, is never delivered in that epoch).  The
 * current stage splits its list as the rules above split [0, N): its block
 * p, its steps (with drop_last, floor(M / (CBS*P)), possibly 0: the epoch
 * is over; otherwise ceil(ceil(M/P) / CBS)).  Every process derives its
 * share from the stages alone.  The epochs after it are ordinary.
 */
#ifndef INFEED_SAMPLER_H
#define INFEED_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "infeed-limits.h"

/*
 * The most samples whose shuffle is a table (2^22: 32 MiB, a Fisher-Yates
 * pass of some tens of milliseconds); larger datasets use the Feistel
 * bijection.  Changing it changes the orders of datasets in between.
 */
#define SAMPLER_TABLE_MAX	((uint64_t)1 << 22)
#define SAMPLER_FEISTEL_ROUNDS	6

/* The Feistel bijection of [0, N) for one (seed, epoch): see sampler.c. */
struct sampler_feistel {
	uint64_t	samples;		/* N */
	unsigned	half_bits;		/* h: the domain is 2^(2h) >= N */
	uint64_t	mask;			/* 2^h - 1 */
	uint64_t	round_key[SAMPLER_FEISTEL_ROUNDS];
};

/*
 * The work units of sampler_prepare() and sampler_row_cost(): about a
 * nanosecond each (0.7 to 1.4 on a 2-core EPYC).  A row costs 1, a
 * Feistel row SAMPLER_COST_FEISTEL more, each stage of an elastic epoch
 * SAMPLER_COST_STAGE more; a Fisher-Yates swap SAMPLER_COST_SWAP.
 */
#define SAMPLER_COST_FEISTEL	16
#define SAMPLER_COST_STAGE	4
#define SAMPLER_COST_SWAP	4

#define SAMPLER_FY_AHEAD	32	/* Fisher-Yates draws made early */

/* A Fisher-Yates pass over the table, a bounded amount at a time. */
struct sampler_fy {
	uint64_t	key;			/* the (seed, epoch) stream */
	uint64_t	ctr;
	uint64_t	filled;			/* identity written below this */
	bool		primed;			/* the first draws are made */
	uint64_t	i;			/* the next swap's, 0: done */
	uint64_t	ahead;			/* the next draw to make */
	uint64_t	draw[SAMPLER_FY_AHEAD];	/* iteration i's at i % AHEAD */
};

/* The most stages an epoch may have gone through (changes of P in it). */
#define SAMPLER_MAX_STAGES	INFEED_MAX_ELASTIC_STAGES

/* A finished stage of an elastic epoch: see above. */
struct sampler_stage {
	uint32_t	process_count;		/* P of the stage */
	uint64_t	cbs;			/* each process's CBS in it */
	uint64_t	steps_done;		/* global steps completed */
};

struct sampler_opts {
	uint64_t	samples;		/* N */
	uint32_t	batch_size;
	uint32_t	device_iterations;
	uint32_t	replication_factor;
	uint32_t	gradient_accumulation;
	bool		shuffle;
	uint64_t	seed;
	bool		drop_last;
	uint32_t	process_id;
	uint32_t	process_count;
	/* Elastic resume: epoch stages_epoch went through nstages stages. */
	uint64_t	stages_epoch;
	uint32_t	nstages;		/* 0: no elastic epoch */
	struct sampler_stage stages[SAMPLER_MAX_STAGES];
};

/* One stage's list and split, computed by sampler_init(). */
struct sampler_split {
	uint64_t	length;			/* M: positions in its list */
	uint32_t	process_count;
	uint64_t	cbs;
	uint64_t	steps_done;
};

struct sampler {
	struct sampler_opts opts;
	uint64_t	cbs;			/* combined batch size */
	uint64_t	steps_per_epoch;
	uint64_t	block_offset;		/* start of this process's block */
	uint64_t	block_length;		/* samples in it */
	bool		table;			/* the shuffle is a table */
	uint64_t	*perm;			/* the table, or NULL */
	struct sampler_feistel feistel;		/* otherwise, for perm_epoch */
	uint64_t	perm_epoch;
	bool		perm_valid;		/* ready for perm_epoch */
	bool		perm_filling;		/* ... fy under way for it */
	struct sampler_fy fy;
	/* The elastic epoch (opts.nstages > 0): the finished stages, then
	 * this process's block of the current stage's list and its steps. */
	struct sampler_split split[SAMPLER_MAX_STAGES];
	uint64_t	stage_length;		/* M of the current stage */
	uint64_t	stage_steps;
	uint64_t	stage_block_offset;
	uint64_t	stage_block_length;
};

/**
 * sampler_init() - check @opts and compute the epoch geometry; with
 * shuffle and N <= SAMPLER_TABLE_MAX, allocate the permutation's table.
 * @cause: on failure, a malloc'd message saying which value is wrong and
 *         what is expected.
 * Return: 0, or -1 with *cause set and errno EINVAL (an option) or ENOMEM
 * (the table).
 */
int		sampler_init(struct sampler *s, const struct sampler_opts *opts,
		    char **cause);

/**
 * sampler_init_table_max() - sampler_init() with another threshold between
 * the table and the Feistel bijection, for tests of the Feistel path on
 * small N: orders differ from sampler_init()'s for @table_max < N <=
 * SAMPLER_TABLE_MAX.
 */
int		sampler_init_table_max(struct sampler *s,
		    const struct sampler_opts *opts, uint64_t table_max,
		    char **cause);

/**
 * sampler_init_deferred() - sampler_init() without allocating the table:
 * sampler_table_bytes() says what sampler_table_alloc() will take.
 */
int		sampler_init_deferred(struct sampler *s,
		    const struct sampler_opts *opts, char **cause);

/**
 * sampler_table_bytes() - the bytes of the shuffle's table that @s uses
 * (N x 8 with shuffle and N <= SAMPLER_TABLE_MAX), or 0: none.
 */
uint64_t	sampler_table_bytes(const struct sampler *s);

/**
 * sampler_table_alloc() - allocate the table sampler_init_deferred() left
 * out, if @s uses one and has none yet.
 * Return: 0, or -1 with *@cause (malloc'd) and errno ENOMEM.
 */
int		sampler_table_alloc(struct sampler *s, char **cause);

/**
 * sampler_clear() - free what sampler_init() and the cache allocated.
 */
void		sampler_clear(struct sampler *s);

/**
 * sampler_step_rows() - rows in step @step (< steps_per_epoch): CBS, or
 * fewer for the short last step.
 */
uint64_t	sampler_step_rows(const struct sampler *s, uint64_t step);

/**
 * sampler_epoch_steps() - steps of epoch @epoch: steps_per_epoch, or the
 * current stage's steps in an elastic epoch.
 */
uint64_t	sampler_epoch_steps(const struct sampler *s, uint64_t epoch);

/**
 * sampler_epoch_step_rows() - rows in step @step of epoch @epoch, as
 * sampler_step_rows() but for the elastic epoch too; 0 past its steps.
 */
uint64_t	sampler_epoch_step_rows(const struct sampler *s, uint64_t epoch,
		    uint64_t step);

/**
 * sampler_step_indices() - write the dataset index of every row of
 * (@epoch, @step) to @out (sampler_epoch_step_rows() entries, in row
 * order).
 * Fills the table with the epoch's permutation when the epoch changes
 * (N <= SAMPLER_TABLE_MAX), or computes each row's index on its own, all
 * at once (sampler_prepare() and sampler_rows_indices() go a bounded
 * amount at a time).  Never fails and never allocates: after
 * sampler_init_deferred(), the table must be allocated first.
 * Return: the number of rows written, sampler_step_rows().
 */
uint64_t	sampler_step_indices(struct sampler *s, uint64_t epoch,
		    uint64_t step, uint64_t *out);

/**
 * sampler_prepare() - make the table (or the Feistel keys) epoch
 * @epoch's, spending at most about *@work units (SAMPLER_COST_*) and
 * taking what it spent from *@work; call again to go on.  The table must
 * be allocated (sampler_table_alloc()) if @s uses one.
 * Return: whether sampler_rows_indices() may now run for @epoch.
 */
bool		sampler_prepare(struct sampler *s, uint64_t epoch,
		    uint64_t *work);

/**
 * sampler_row_cost() - the work units one row of epoch @epoch costs
 * sampler_rows_indices(): 1, plus its shuffle's and stages'.
 */
uint64_t	sampler_row_cost(const struct sampler *s, uint64_t epoch);

/**
 * sampler_rows_indices() - write the dataset indices of rows [@begin,
 * @end) of (@epoch, @step) to @out, once sampler_prepare() said @epoch is
 * ready; @end <= sampler_epoch_step_rows().
 */
void		sampler_rows_indices(const struct sampler *s, uint64_t epoch,
		    uint64_t step, uint64_t begin, uint64_t end,
		    uint64_t *out);

/**
 * sampler_row_owner() - split row @k into (device iteration, accumulation
 * step, replica, micro-row) by the layout rule above.
 */
void		sampler_row_owner(const struct sampler *s, uint64_t k,
		    uint32_t *iteration, uint32_t *accumulation,
		    uint32_t *replica, uint32_t *micro_row);

/**
 * sampler_permutation() - write epoch @epoch's permutation of [0, N) for
 * @seed to @out (N entries); the identity when @shuffle is false.  By the
 * same rule as sampler_step_indices(): a Fisher-Yates table up to
 * SAMPLER_TABLE_MAX samples, the Feistel bijection above.
 */
void		sampler_permutation(uint64_t samples, bool shuffle,
		    uint64_t seed, uint64_t epoch, uint64_t *out);

/**
 * sampler_feistel_init() - key the Feistel bijection of [0, @samples) on
 * (@seed, @epoch): its round keys are the first SAMPLER_FEISTEL_ROUNDS
 * words of the shuffle's stream.  @samples >= 1.
 */
void		sampler_feistel_init(struct sampler_feistel *f,
		    uint64_t samples, uint64_t seed, uint64_t epoch);

/**
 * sampler_feistel_index() - the index at @position (< N) of the
 * permutation that sampler_feistel_init() keyed; O(1) expected time.
 */
uint64_t	sampler_feistel_index(const struct sampler_feistel *f,
		    uint64_t position);

#endif /* INFEED_SAMPLER_H */
