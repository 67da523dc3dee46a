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
 * a Fisher-Yates shuffle driven by a counter-based generator keyed on
 * (seed, epoch) alone, so it is the same for any worker count, buffer size
 * or daemon restart, and any epoch can be computed without the ones before.
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
 */
#ifndef INFEED_SAMPLER_H
#define INFEED_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

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
};

struct sampler {
	struct sampler_opts opts;
	uint64_t	cbs;			/* combined batch size */
	uint64_t	steps_per_epoch;
	uint64_t	block_offset;		/* start of this process's block */
	uint64_t	block_length;		/* samples in it */
	uint64_t	*perm;			/* cached permutation, N entries */
	uint64_t	perm_epoch;
	bool		perm_valid;
};

/**
 * sampler_init() - check @opts and compute the epoch geometry.
 * @cause: on failure, a malloc'd message saying which value is wrong and
 *         what is expected.
 * Return: 0, or -1 with *cause set.
 */
int		sampler_init(struct sampler *s, const struct sampler_opts *opts,
		    char **cause);

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
 * sampler_step_indices() - write the dataset index of every row of
 * (@epoch, @step) to @out (sampler_step_rows() entries, in row order).
 * Computes and caches the epoch's permutation when it changes.
 * Return: the number of rows written.
 */
uint64_t	sampler_step_indices(struct sampler *s, uint64_t epoch,
		    uint64_t step, uint64_t *out);

/**
 * sampler_row_owner() - split row @k into (device iteration, accumulation
 * step, replica, micro-row) by the layout rule above.
 */
void		sampler_row_owner(const struct sampler *s, uint64_t k,
		    uint32_t *iteration, uint32_t *accumulation,
		    uint32_t *replica, uint32_t *micro_row);

/**
 * sampler_permutation() - write epoch @epoch's permutation of [0, N) for
 * @seed to @out (N entries); the identity when @shuffle is false.
 */
void		sampler_permutation(uint64_t samples, bool shuffle,
		    uint64_t seed, uint64_t epoch, uint64_t *out);

#endif /* INFEED_SAMPLER_H */
