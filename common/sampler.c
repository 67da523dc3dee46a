/* SPDX-License-Identifier: MIT */
/*
 * The step sampler: the arithmetic of sampler.h.
 *
 * The shuffle is specified exactly, so that a client in another language
 * can reproduce it:
 *
 *   mix(z):   z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
 *             z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
 *             return z ^ (z >> 31);			(splitmix64's finaliser)
 *   key:      mix(seed ^ mix(epoch ^ 0x6a09e667f3bcc909))
 *   word n:   mix(key + n * 0x9e3779b97f4a7c15), n = 1, 2, 3, ...
 *   below(m): Lemire's multiply-shift with rejection: x = next word,
 *             p = x * m (128-bit); while (low64(p) < (2^64 - m) % m) draw
 *             again; the result is high64(p), uniform in [0, m).
 *   shuffle:  for N <= SAMPLER_TABLE_MAX (2^22), a Fisher-Yates table:
 *             perm = identity; for i = N-1 down to 1:
 *             j = below(i + 1); swap perm[i] and perm[j].
 *   feistel:  for N > SAMPLER_TABLE_MAX, no table: h = the smallest
 *             integer >= 1 with 2^(2h) >= N, mask = 2^h - 1, and
 *             K[r] = word r+1 for the rounds r = 0 .. 5;
 *             E(x): L = x >> h; R = x & mask;
 *                   6 times: (L, R) = (R, L ^ (mix(R ^ K[r]) & mask));
 *                   return (L << h) | R;
 *             perm[i] = the first of E(i), E(E(i)), ... that is < N
 *             (cycle walking: E permutes [0, 2^(2h)), so the walk ends,
 *             after fewer than 4 steps on average since 2^(2h) < 4N).
 *
 * Every word is a pure function of (seed, epoch, n), so any epoch's
 * permutation is computed on its own, with no state carried over from the
 * epochs before it.  A table needs N words of memory and an O(N) pass per
 * epoch, which a client's own file of 2^40 samples would turn into a
 * failed allocation or minutes on the daemon's event loop; the Feistel
 * bijection gives any position's index in O(1) memory and time.  (Before
 * it, every size used the table: orders of datasets above 2^22 samples
 * differ from those releases.)
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "splitmix64.h"

#define SAMPLER_EPOCH_SALT	0x6a09e667f3bcc909ULL

/* A counter-based random stream: word n is mix(key + n * golden). */
struct sampler_rng {
	uint64_t	key;
	uint64_t	ctr;
};

static int	sampler_fail(char **, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	sampler_mul128(uint64_t, uint64_t, uint64_t *, uint64_t *);
static void	sampler_rng_init(struct sampler_rng *, uint64_t, uint64_t);
static uint64_t	sampler_rng_next(struct sampler_rng *);
static uint64_t	sampler_rng_below(struct sampler_rng *, uint64_t);
static int	sampler_check(const struct sampler_opts *, char **);
static int	sampler_no_step(const struct sampler_opts *, uint64_t,
		    char **);
static void	sampler_fy_start(struct sampler_fy *, uint64_t, uint64_t,
		    uint64_t);
static bool	sampler_fy_run(struct sampler_fy *, uint64_t, uint64_t *,
		    uint64_t *);
static void	sampler_fisher_yates(uint64_t, uint64_t, uint64_t,
		    uint64_t *);
static uint64_t	split_block(uint64_t, uint32_t, uint32_t, uint64_t, bool,
		    uint64_t *, uint64_t *);
static int	sampler_init_stages(struct sampler *, char **);
static uint64_t	sampler_feistel_encrypt(const struct sampler_feistel *,
		    uint64_t);
static int	sampler_setup(struct sampler *, const struct sampler_opts *,
		    uint64_t, bool, char **);

/* Set *cause to a formatted message, if the caller wants one, and fail. */
static int
sampler_fail(char **cause, const char *fmt, ...)
{
	va_list	ap;

	if (cause != NULL) {
		va_start(ap, fmt);
		if (vasprintf(cause, fmt, ap) == -1)
			*cause = NULL;
		va_end(ap);
	}
	errno = EINVAL;
	return (-1);
}

/* Multiply two 64-bit words into a 128-bit product, split in halves. */
static void
sampler_mul128(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
#ifdef __SIZEOF_INT128__
	unsigned __int128	p;

	p = (unsigned __int128)a * b;
	*hi = (uint64_t)(p >> 64);
	*lo = (uint64_t)p;
#else
	uint64_t	al = a & 0xffffffffU, ah = a >> 32;
	uint64_t	bl = b & 0xffffffffU, bh = b >> 32;
	uint64_t	ll, lh, hl, hh, mid;

	ll = al * bl;
	lh = al * bh;
	hl = ah * bl;
	hh = ah * bh;
	mid = (ll >> 32) + (lh & 0xffffffffU) + (hl & 0xffffffffU);
	*hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
	*lo = (mid << 32) | (ll & 0xffffffffU);
#endif
}

/* Key a stream on (seed, epoch) alone. */
static void
sampler_rng_init(struct sampler_rng *g, uint64_t seed, uint64_t epoch)
{
	g->key = splitmix64_mix(seed ^
	    splitmix64_mix(epoch ^ SAMPLER_EPOCH_SALT));
	g->ctr = 0;
}

/* Return the stream's next word. */
static uint64_t
sampler_rng_next(struct sampler_rng *g)
{
	g->ctr++;
	return (splitmix64_mix(g->key + g->ctr * SPLITMIX64_GAMMA));
}

/* Return a uniform draw from [0, range), range >= 1, without bias (Lemire). */
static uint64_t
sampler_rng_below(struct sampler_rng *g, uint64_t range)
{
	uint64_t	hi, lo, threshold;

	sampler_mul128(sampler_rng_next(g), range, &hi, &lo);
	if (lo < range) {
		threshold = -range % range;
		while (lo < threshold)
			sampler_mul128(sampler_rng_next(g), range, &hi, &lo);
	}
	return (hi);
}

/* Check each option on its own; the geometry is checked by sampler_init. */
static int
sampler_check(const struct sampler_opts *o, char **cause)
{
	if (o->samples == 0)
		return (sampler_fail(cause,
		    "samples is 0; expected a dataset of at least 1 sample"));
	if (o->batch_size == 0)
		return (sampler_fail(cause,
		    "batch_size is 0; expected at least 1"));
	if (o->device_iterations == 0)
		return (sampler_fail(cause,
		    "device_iterations is 0; expected at least 1"));
	if (o->replication_factor == 0)
		return (sampler_fail(cause,
		    "replication_factor is 0; expected at least 1"));
	if (o->gradient_accumulation == 0)
		return (sampler_fail(cause,
		    "gradient_accumulation is 0; expected at least 1"));
	if (o->process_count == 0)
		return (sampler_fail(cause,
		    "process_count is 0; expected at least 1"));
	if (o->process_id >= o->process_count)
		return (sampler_fail(cause,
		    "process_id is %" PRIu32 " but process_count is %" PRIu32
		    "; expected a process_id from 0 to %" PRIu32,
		    o->process_id, o->process_count, o->process_count - 1));
	return (0);
}

/* Refuse a drop_last configuration that leaves no step, saying why. */
static int
sampler_no_step(const struct sampler_opts *o, uint64_t cbs, char **cause)
{
	uint64_t	need;

	if (o->process_count == 1)
		return (sampler_fail(cause, "the dataset has %" PRIu64
		    " samples but one step needs %" PRIu64 " (batch_size %"
		    PRIu32 " x device_iterations %" PRIu32
		    " x replication_factor %" PRIu32
		    " x gradient_accumulation %" PRIu32 ") with drop_last; "
		    "use a smaller batch, fewer device iterations or replicas, "
		    "or drop_last=false", o->samples,
		    cbs, o->batch_size, o->device_iterations,
		    o->replication_factor, o->gradient_accumulation));
	if (__builtin_mul_overflow(cbs, (uint64_t)o->process_count, &need))
		return (sampler_fail(cause, "the dataset has %" PRIu64
		    " samples but one step of %" PRIu32 " processes needs "
		    "more than 2^64 (combined batch %" PRIu64 " x %" PRIu32
		    " processes) with drop_last; use fewer device iterations "
		    "or replicas, or drop_last=false", o->samples,
		    o->process_count, cbs, o->process_count));
	return (sampler_fail(cause, "the dataset has %" PRIu64 " samples but "
	    "one step of %" PRIu32 " processes needs %" PRIu64 " (combined "
	    "batch %" PRIu64 " x %" PRIu32 " processes) with drop_last; use "
	    "fewer device iterations or replicas, or drop_last=false",
	    o->samples, o->process_count, need, cbs, o->process_count));
}

/* The geometry, and the shuffle's table where N <= SAMPLER_TABLE_MAX. */
int
sampler_init(struct sampler *s, const struct sampler_opts *opts,
    char **cause)
{
	return (sampler_setup(s, opts, SAMPLER_TABLE_MAX, true, cause));
}

/* The same, with another threshold (for tests). */
int
sampler_init_table_max(struct sampler *s, const struct sampler_opts *opts,
    uint64_t table_max, char **cause)
{
	return (sampler_setup(s, opts, table_max, true, cause));
}

/* The geometry alone: the caller charges the table, then allocates it. */
int
sampler_init_deferred(struct sampler *s, const struct sampler_opts *opts,
    char **cause)
{
	return (sampler_setup(s, opts, SAMPLER_TABLE_MAX, false, cause));
}

/* The table's bytes, whether it is allocated yet or not. */
uint64_t
sampler_table_bytes(const struct sampler *s)
{
	return (s->table ? s->opts.samples * sizeof *s->perm : 0);
}

/* Allocate the table, where a failure is an answer to the caller. */
int
sampler_table_alloc(struct sampler *s, char **cause)
{
	uint64_t	n = s->opts.samples;

	if (cause != NULL)
		*cause = NULL;
	if (!s->table || s->perm != NULL)
		return (0);
	if (n > SIZE_MAX / sizeof *s->perm ||
	    (s->perm = malloc(n * sizeof *s->perm)) == NULL) {
		sampler_fail(cause, "no memory for the shuffle's table of %"
		    PRIu64 " samples (%" PRIu64 " MiB); try again later", n,
		    (n * sizeof *s->perm) >> 20);
		errno = ENOMEM;
		return (-1);
	}
	return (0);
}

/*
 * The struct is zeroed first, so sampler_clear() is safe after a failed
 * sampler_init() too.  The table is allocated here (with @alloc), where a
 * failure is an answer to the caller, so that sampler_step_indices()
 * cannot fail.
 */
static int
sampler_setup(struct sampler *s, const struct sampler_opts *opts,
    uint64_t table_max, bool alloc, char **cause)
{
	const struct sampler_opts	*o = opts;
	uint64_t			 cbs, steps, n = opts->samples;

	memset(s, 0, sizeof *s);
	if (cause != NULL)
		*cause = NULL;
	if (sampler_check(o, cause) != 0)
		return (-1);

	if (__builtin_mul_overflow((uint64_t)o->batch_size,
	    (uint64_t)o->device_iterations, &cbs) ||
	    __builtin_mul_overflow(cbs, (uint64_t)o->replication_factor,
	    &cbs) ||
	    __builtin_mul_overflow(cbs, (uint64_t)o->gradient_accumulation,
	    &cbs))
		return (sampler_fail(cause, "the combined batch size "
		    "(batch_size %" PRIu32 " x device_iterations %" PRIu32
		    " x replication_factor %" PRIu32
		    " x gradient_accumulation %" PRIu32 ") overflows 64 bits; "
		    "expected a product below 2^64", o->batch_size,
		    o->device_iterations, o->replication_factor,
		    o->gradient_accumulation));

	steps = split_block(o->samples, o->process_count, o->process_id, cbs,
	    o->drop_last, &s->block_offset, &s->block_length);
	if (steps == 0 && o->drop_last)
		return (sampler_no_step(o, cbs, cause));

	s->opts = *o;
	s->cbs = cbs;
	s->steps_per_epoch = steps;
	if (o->nstages > 0 && sampler_init_stages(s, cause) != 0)
		return (-1);
	s->table = o->shuffle && n <= table_max;
	if (alloc)
		return (sampler_table_alloc(s, cause));
	return (0);
}

/*
 * Process @p's block of @n positions split among @np processes of @cbs
 * rows a step, by the rules in sampler.h; return the steps every process
 * takes.
 */
static uint64_t
split_block(uint64_t n, uint32_t np, uint32_t p, uint64_t cbs, bool drop_last,
    uint64_t *offset, uint64_t *length)
{
	uint64_t	per, rem, longest, steps;

	if (drop_last) {
		/* floor(N / (CBS*P)) without forming CBS*P, which may wrap. */
		steps = n / cbs / np;
		*length = steps * cbs;
		*offset = p * *length;
		return (steps);
	}
	/* poptorch's _SubDataset: the first N % P blocks are longer. */
	per = n / np;
	rem = n % np;
	*length = per + (p < rem ? 1 : 0);
	*offset = p * per + (p < rem ? p : rem);
	longest = per + (rem != 0 ? 1 : 0);
	return (longest / cbs + (longest % cbs != 0 ? 1 : 0));
}

/* Entries of a block of @len left after @k steps of @cbs. */
static uint64_t
split_left_of(uint64_t len, uint64_t k, uint64_t cbs)
{
	uint64_t	done;

	if (__builtin_mul_overflow(k, cbs, &done) || done >= len)
		return (0);
	return (len - done);
}

/*
 * A stage's blocks: @nlong blocks of @long_len first, then blocks of
 * @short_len (with drop_last every block is "long").
 */
static void
split_lengths(const struct sampler_split *sp, bool drop_last,
    uint64_t *nlong, uint64_t *long_len, uint64_t *short_len)
{
	uint64_t	n = sp->length, np = sp->process_count;

	if (drop_last) {
		*nlong = np;
		*long_len = *short_len = n / sp->cbs / np * sp->cbs;
		return;
	}
	*nlong = n % np;
	*short_len = n / np;
	*long_len = *short_len + 1;
}

/* Positions of a finished stage's list that no process received. */
static uint64_t
split_left(const struct sampler_split *sp, bool drop_last)
{
	uint64_t	nlong, long_len, short_len;

	split_lengths(sp, drop_last, &nlong, &long_len, &short_len);
	return (nlong * split_left_of(long_len, sp->steps_done, sp->cbs) +
	    (sp->process_count - nlong) *
	    split_left_of(short_len, sp->steps_done, sp->cbs));
}

/* Where entry @j of the list after stage @sp lies in the stage's list. */
static uint64_t
split_parent(const struct sampler_split *sp, bool drop_last, uint64_t j)
{
	uint64_t	nlong, long_len, short_len, left;

	split_lengths(sp, drop_last, &nlong, &long_len, &short_len);
	left = split_left_of(long_len, sp->steps_done, sp->cbs);
	if (j < nlong * left)
		return (j / left * long_len + (long_len - left) + j % left);
	j -= nlong * left;
	left = split_left_of(short_len, sp->steps_done, sp->cbs);
	return (nlong * long_len + j / left * short_len +
	    (short_len - left) + j % left);
}

/* Check the elastic epoch's stages and split the current stage's list. */
static int
sampler_init_stages(struct sampler *s, char **cause)
{
	const struct sampler_opts	*o = &s->opts;
	struct sampler_split		*sp;
	uint64_t			 m = o->samples, steps, off, len;
	uint32_t			 i;

	if (o->nstages > SAMPLER_MAX_STAGES)
		return (sampler_fail(cause, "the epoch went through %" PRIu32
		    " changes of process count; expected at most %d",
		    o->nstages, SAMPLER_MAX_STAGES));
	for (i = 0; i < o->nstages; i++) {
		sp = &s->split[i];
		sp->length = m;
		sp->process_count = o->stages[i].process_count;
		sp->cbs = o->stages[i].cbs;
		sp->steps_done = o->stages[i].steps_done;
		if (sp->process_count == 0 || sp->cbs == 0)
			return (sampler_fail(cause, "stage %" PRIu32 " of epoch "
			    "%" PRIu64 " has process_count %" PRIu32 " and "
			    "combined batch size %" PRIu64 "; expected at "
			    "least 1 of each", i, o->stages_epoch,
			    sp->process_count, sp->cbs));
		steps = split_block(m, sp->process_count, 0, sp->cbs,
		    o->drop_last, &off, &len);
		if (sp->steps_done > steps)
			return (sampler_fail(cause, "stage %" PRIu32 " of epoch "
			    "%" PRIu64 " completed %" PRIu64 " steps, but its "
			    "%" PRIu64 " samples split among %" PRIu32
			    " processes of combined batch size %" PRIu64
			    " make %" PRIu64 " steps; expected at most that "
			    "(is the state from this dataset and drop_last?)",
			    i, o->stages_epoch, sp->steps_done, m,
			    sp->process_count, sp->cbs, steps));
		m = split_left(sp, o->drop_last);
	}
	s->stage_length = m;
	s->stage_steps = split_block(m, o->process_count, o->process_id,
	    s->cbs, o->drop_last, &s->stage_block_offset,
	    &s->stage_block_length);
	return (0);
}

/* Free the cached permutation; the sampler may be initialised again. */
void
sampler_clear(struct sampler *s)
{
	free(s->perm);
	s->perm = NULL;
	s->perm_valid = false;
	s->perm_filling = false;
}

/* Rows in a step of a block: what is left of it, at most CBS. */
static uint64_t
block_step_rows(uint64_t steps, uint64_t block_length, uint64_t cbs,
    uint64_t step)
{
	uint64_t	start;

	if (step >= steps)
		return (0);
	/* step*CBS < ceil(N/P) here, so it cannot wrap. */
	start = step * cbs;
	if (start >= block_length)
		return (0);
	if (block_length - start < cbs)
		return (block_length - start);
	return (cbs);
}

/* Whether @epoch is the elastic epoch of the stages. */
static bool
sampler_elastic(const struct sampler *s, uint64_t epoch)
{
	return (s->opts.nstages > 0 && epoch == s->opts.stages_epoch);
}

/* Rows in a step of an ordinary epoch. */
uint64_t
sampler_step_rows(const struct sampler *s, uint64_t step)
{
	return (block_step_rows(s->steps_per_epoch, s->block_length, s->cbs,
	    step));
}

/* Steps of an epoch, the elastic one included. */
uint64_t
sampler_epoch_steps(const struct sampler *s, uint64_t epoch)
{
	return (sampler_elastic(s, epoch) ? s->stage_steps :
	    s->steps_per_epoch);
}

/* Rows in a step of any epoch. */
uint64_t
sampler_epoch_step_rows(const struct sampler *s, uint64_t epoch,
    uint64_t step)
{
	if (sampler_elastic(s, epoch))
		return (block_step_rows(s->stage_steps,
		    s->stage_block_length, s->cbs, step));
	return (sampler_step_rows(s, step));
}

/* A position of the current stage's list as a position of [0, N). */
static uint64_t
sampler_stage_position(const struct sampler *s, uint64_t pos)
{
	uint32_t	i;

	for (i = s->opts.nstages; i-- > 0;)
		pos = split_parent(&s->split[i], s->opts.drop_last, pos);
	return (pos);
}

/*
 * Make the table or the Feistel keys epoch @epoch's, if they are not, a
 * bounded amount at a time: the Fisher-Yates pass of a new epoch goes on
 * where the last call left it.
 */
bool
sampler_prepare(struct sampler *s, uint64_t epoch, uint64_t *work)
{
	if (!s->opts.shuffle || (s->perm_valid && s->perm_epoch == epoch))
		return (true);
	if (!s->table) {
		sampler_feistel_init(&s->feistel, s->opts.samples, s->opts.seed,
		    epoch);
		s->perm_epoch = epoch;
		s->perm_valid = true;
		*work -= *work < SAMPLER_FEISTEL_ROUNDS ? *work :
		    SAMPLER_FEISTEL_ROUNDS;
		return (true);
	}
	if (!s->perm_filling || s->perm_epoch != epoch) {
		sampler_fy_start(&s->fy, s->opts.samples, s->opts.seed, epoch);
		s->perm_epoch = epoch;
		s->perm_valid = false;
		s->perm_filling = true;
	}
	if (!sampler_fy_run(&s->fy, s->opts.samples, s->perm, work))
		return (false);
	s->perm_filling = false;
	s->perm_valid = true;
	return (true);
}

/* A row's work units: its position, its stages, its shuffle. */
uint64_t
sampler_row_cost(const struct sampler *s, uint64_t epoch)
{
	uint64_t	cost = 1;

	if (sampler_elastic(s, epoch))
		cost += SAMPLER_COST_STAGE * s->opts.nstages;
	if (s->opts.shuffle)
		cost += s->table ? 1 : SAMPLER_COST_FEISTEL;
	return (cost);
}

/*
 * Without shuffle the indices are computed; with it they come from the
 * table (sampler_prepare() filled it for the epoch) or from the Feistel
 * bijection.  In the elastic epoch each row's position is mapped back
 * through the stages first (sampler.h).
 */
void
sampler_rows_indices(const struct sampler *s, uint64_t epoch, uint64_t step,
    uint64_t begin, uint64_t end, uint64_t *out)
{
	uint64_t	start, j, n = end - begin;
	bool		elastic = sampler_elastic(s, epoch);

	start = (elastic ? s->stage_block_offset : s->block_offset) +
	    step * s->cbs + begin;
	if (s->opts.shuffle && s->perm != NULL && !elastic) {
		memcpy(out, s->perm + start, n * sizeof *out);
		return;
	}
	for (j = 0; j < n; j++)
		out[j] = elastic ? sampler_stage_position(s, start + j) :
		    start + j;
	if (!s->opts.shuffle)
		return;
	if (s->perm != NULL)
		for (j = 0; j < n; j++)
			out[j] = s->perm[out[j]];
	else
		for (j = 0; j < n; j++)
			out[j] = sampler_feistel_index(&s->feistel, out[j]);
}

/* A whole step at once (its epoch's table filled first, if it must be). */
uint64_t
sampler_step_indices(struct sampler *s, uint64_t epoch, uint64_t step,
    uint64_t *out)
{
	uint64_t	rows, work = UINT64_MAX;

	rows = sampler_epoch_step_rows(s, epoch, step);
	if (rows == 0)
		return (0);
	sampler_prepare(s, epoch, &work);
	sampler_rows_indices(s, epoch, step, 0, rows, out);
	return (rows);
}

/* Decompose k = ((i*GA + a)*R + r)*B + b; any output may be NULL. */
void
sampler_row_owner(const struct sampler *s, uint64_t k, uint32_t *iteration,
    uint32_t *accumulation, uint32_t *replica, uint32_t *micro_row)
{
	const struct sampler_opts	*o = &s->opts;

	if (micro_row != NULL)
		*micro_row = (uint32_t)(k % o->batch_size);
	k /= o->batch_size;
	if (replica != NULL)
		*replica = (uint32_t)(k % o->replication_factor);
	k /= o->replication_factor;
	if (accumulation != NULL)
		*accumulation = (uint32_t)(k % o->gradient_accumulation);
	k /= o->gradient_accumulation;
	if (iteration != NULL)
		*iteration = (uint32_t)k;
}

/* Begin epoch @epoch's Fisher-Yates pass over a table of @samples. */
static void
sampler_fy_start(struct sampler_fy *fy, uint64_t samples, uint64_t seed,
    uint64_t epoch)
{
	struct sampler_rng	g;

	sampler_rng_init(&g, seed, epoch);
	fy->key = g.key;
	fy->ctr = g.ctr;
	fy->filled = 0;
	fy->primed = false;
	fy->i = samples - 1;
	fy->ahead = samples - 1;
}

/*
 * Shuffle the identity of [0, N) in @out by Fisher-Yates (see the top),
 * going on where the last call stopped, for about *@work units; return
 * whether the table is done.  The draws do not depend on the table, so
 * they are made SAMPLER_FY_AHEAD iterations early and the entry each will
 * swap is prefetched: the swaps miss the cache otherwise (a 2^22 table is
 * 32 MiB), and this makes the pass about 3.5 times faster, with the same
 * order.
 */
static bool
sampler_fy_run(struct sampler_fy *fy, uint64_t samples, uint64_t *out,
    uint64_t *work)
{
	struct sampler_rng	g = { fy->key, fy->ctr };
	uint64_t		i, j, t, stop, *draw = fy->draw;

	/* The identity first: a unit an entry. */
	if (fy->filled < samples) {
		stop = samples - fy->filled < *work ? samples : fy->filled +
		    *work;
		for (i = fy->filled; i < stop; i++)
			out[i] = i;
		*work -= stop - fy->filled;
		fy->filled = stop;
		if (stop < samples)
			return (false);
	}
	if (samples < 2)
		return (true);
	/* draw[i % AHEAD] is iteration i's j, made when ahead was i. */
	if (!fy->primed) {
		for (; fy->ahead > 0 && samples - 1 - fy->ahead <
		    SAMPLER_FY_AHEAD; fy->ahead--) {
			draw[fy->ahead % SAMPLER_FY_AHEAD] =
			    sampler_rng_below(&g, fy->ahead + 1);
			__builtin_prefetch(&out[draw[fy->ahead %
			    SAMPLER_FY_AHEAD]], 1);
		}
		fy->primed = true;
	}
	for (i = fy->i; i > 0 && *work > 0; i--) {
		*work -= *work < SAMPLER_COST_SWAP ? *work : SAMPLER_COST_SWAP;
		j = draw[i % SAMPLER_FY_AHEAD];
		t = out[i];
		out[i] = out[j];
		out[j] = t;
		if (fy->ahead > 0) {
			draw[fy->ahead % SAMPLER_FY_AHEAD] =
			    sampler_rng_below(&g, fy->ahead + 1);
			__builtin_prefetch(&out[draw[fy->ahead %
			    SAMPLER_FY_AHEAD]], 1);
			fy->ahead--;
		}
	}
	fy->i = i;
	fy->ctr = g.ctr;
	return (i == 0);
}

/* The whole pass at once. */
static void
sampler_fisher_yates(uint64_t samples, uint64_t seed, uint64_t epoch,
    uint64_t *out)
{
	struct sampler_fy	fy;
	uint64_t		work = UINT64_MAX;

	sampler_fy_start(&fy, samples, seed, epoch);
	sampler_fy_run(&fy, samples, out, &work);
}

/* Write the identity, or the epoch's shuffle by the rule at the top. */
void
sampler_permutation(uint64_t samples, bool shuffle, uint64_t seed,
    uint64_t epoch, uint64_t *out)
{
	struct sampler_feistel	f;
	uint64_t		i;

	if (!shuffle) {
		for (i = 0; i < samples; i++)
			out[i] = i;
	} else if (samples <= SAMPLER_TABLE_MAX)
		sampler_fisher_yates(samples, seed, epoch, out);
	else {
		sampler_feistel_init(&f, samples, seed, epoch);
		for (i = 0; i < samples; i++)
			out[i] = sampler_feistel_index(&f, i);
	}
}

/* Round keys from the (seed, epoch) stream; h from N (see the top). */
void
sampler_feistel_init(struct sampler_feistel *f, uint64_t samples,
    uint64_t seed, uint64_t epoch)
{
	struct sampler_rng	g;
	unsigned		bits, r;

	/* bits of N - 1: 2^bits >= N; h = ceil(bits / 2), at least 1. */
	bits = samples > 1 ? 64 - (unsigned)__builtin_clzll(samples - 1) : 0;
	f->samples = samples;
	f->half_bits = bits > 2 ? (bits + 1) / 2 : 1;
	f->mask = ((uint64_t)1 << f->half_bits) - 1;
	sampler_rng_init(&g, seed, epoch);
	for (r = 0; r < SAMPLER_FEISTEL_ROUNDS; r++)
		f->round_key[r] = sampler_rng_next(&g);
}

/* One pass of the balanced Feistel network over [0, 2^(2h)). */
static uint64_t
sampler_feistel_encrypt(const struct sampler_feistel *f, uint64_t x)
{
	uint64_t	l = x >> f->half_bits, r = x & f->mask, t;
	unsigned	i;

	for (i = 0; i < SAMPLER_FEISTEL_ROUNDS; i++) {
		t = l ^ (splitmix64_mix(r ^ f->round_key[i]) & f->mask);
		l = r;
		r = t;
	}
	return ((l << f->half_bits) | r);
}

/*
 * Cycle walking: E permutes the domain, so the walk from a position below
 * N comes back below N, on a value no other position reaches.
 */
uint64_t
sampler_feistel_index(const struct sampler_feistel *f, uint64_t position)
{
	uint64_t	y = position;

	do
		y = sampler_feistel_encrypt(f, y);
	while (y >= f->samples);
	return (y);
}
