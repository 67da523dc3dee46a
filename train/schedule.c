/* SPDX-License-Identifier: MIT */
/*
 * The pipeline schedules of schedule.h as slot functions.
 *
 * Every schedule is given by the slot of each op (reference sections 1.2
 * to 1.7): PopTorch pipelined F_k(m) = m+k, B_k(m) = m+2N-2-k; TF grouped
 * F_k(m) = m+k, B_k(m) = m+2N-1-k; TF interleaved F_k(m) = 2m+k,
 * B_k(m) = 2m+2N-1-k; sharded F_k(m) = 2Nm+k, B_k(m) = 2Nm+2N-1-k; GPipe
 * F_k(m) = m+k, B_k(m) = M+2N-2-k+m; 1F1B F_k(m) = m+k (m < N-k) or
 * 2m+k, B_k(m) = 2m+2N-1-k.  The ops are generated per (stage, micro) and
 * sorted by (slot, IPU, order inside the IPU's slot), which is a valid
 * execution order because every op's inputs come from an earlier slot or
 * from an earlier op of the same IPU and slot.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "fail.h"

/* An op while it is generated: its sort rank inside the IPU's slot. */
struct schedule_gen {
	struct sched_op	op;
	int		rank;
};

static const char *const schedule_names[] = {
	[SCHEDULE_PIPELINED] = "pipelined",
	[SCHEDULE_SHARDED] = "sharded",
	[SCHEDULE_GROUPED] = "grouped",
	[SCHEDULE_INTERLEAVED] = "interleaved",
	[SCHEDULE_GPIPE] = "gpipe",
	[SCHEDULE_1F1B] = "1f1b",
};
#define SCHEDULE_NKINDS	(int)(sizeof schedule_names / sizeof schedule_names[0])

static int	schedule_multiple(enum schedule_kind, int, int, int,
    const char *, const char *, char *, size_t);
static int	schedule_nslots(enum schedule_kind, int, int, bool);
static void	schedule_slot_of(const struct schedule *, enum op_kind, int,
    int, int *, int *);
static int	schedule_gen_cmp(const void *, const void *);
static double	schedule_op_cost(enum op_kind, double);
static double	schedule_async_makespan(const struct schedule *, double);

/* Return the CLI name of @kind. */
const char *
schedule_name(enum schedule_kind kind)
{
	if ((int)kind < 0 || (int)kind >= SCHEDULE_NKINDS)
		return ("unknown");
	return (schedule_names[kind]);
}

/* Return the kind called @name, or -1. */
int
schedule_parse(const char *name)
{
	int	i;

	if (name == NULL)
		return (-1);
	for (i = 0; i < SCHEDULE_NKINDS; i++)
		if (strcmp(name, schedule_names[i]) == 0)
			return (i);
	return (-1);
}

/* Return what @kind's framework calls a slot. */
const char *
schedule_slot_word(enum schedule_kind kind)
{
	switch (kind) {
	case SCHEDULE_PIPELINED:
		return ("cycle");
	case SCHEDULE_GROUPED:
	case SCHEDULE_INTERLEAVED:
		return ("step");
	case SCHEDULE_SHARDED:
		return ("op-step");
	default:
		return ("slot");
	}
}

/* Refuse @micro unless a positive multiple of @mult, naming the nearest. */
static int
schedule_multiple(enum schedule_kind kind, int stages, int micro, int mult,
    const char *what, const char *why, char *err, size_t errlen)
{
	char	next[48] = "";
	int	lo, hi, best;

	if (micro >= mult && micro % mult == 0)
		return (0);
	lo = micro / mult * mult;
	hi = lo + mult;
	if (lo < mult)
		best = mult;
	else {
		best = micro - lo <= hi - micro ? lo : hi;
		snprintf(next, sizeof next, " (the next one %s is %d)",
		    best == lo ? "up" : "down", best == lo ? hi : lo);
	}
	return (train_fail(err, errlen, "the %s schedule over %d IPU%s "
	    "needs %s that is a multiple of %d (%s) and at least %d, got %d; "
	    "the closest valid value is %d%s", schedule_name(kind), stages,
	    stages == 1 ? "" : "s", what, mult, why, mult, micro, best, next));
}

/* Refuse sizes and micro-batch counts @kind cannot run, saying why. */
int
schedule_check(enum schedule_kind kind, int stages, int micro,
    bool training, char *err, size_t errlen)
{
	const char	*what;
	int		 need;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	if ((int)kind < 0 || (int)kind >= SCHEDULE_NKINDS)
		return (train_fail(err, errlen, "unknown schedule %d; the "
		    "schedules are pipelined, sharded, grouped, interleaved, "
		    "gpipe and 1f1b", (int)kind));
	if (stages < 1)
		return (train_fail(err, errlen, "a pipeline needs at least "
		    "1 stage (one IPU), got %d stages", stages));
	if (stages > SCHEDULE_MAX_STAGES)
		return (train_fail(err, errlen, "%d stages is more than the "
		    "%d IPUs the simulator models per replica; use at most %d "
		    "stages and replicate instead", stages,
		    SCHEDULE_MAX_STAGES, SCHEDULE_MAX_STAGES));
	what = training ? "a gradient accumulation" :
	    "a number of micro-batches per run (device iterations)";
	if (micro < 1)
		return (train_fail(err, errlen, "%s of %d is not possible: "
		    "at least 1 micro-batch must run; the closest valid value "
		    "is 1", training ? "a gradient accumulation" :
		    "a device iteration count", micro));
	if (micro > SCHEDULE_MAX_MICRO)
		return (train_fail(err, errlen, "%d micro-batches per "
		    "weight update is more than the %d the simulator accepts; "
		    "use at most %d", micro, SCHEDULE_MAX_MICRO,
		    SCHEDULE_MAX_MICRO));
	if ((long)stages * micro > SCHEDULE_MAX_WORK)
		return (train_fail(err, errlen, "%d stages x %d "
		    "micro-batches is more than the %d stage passes the "
		    "simulator accepts per weight update; use at most %d "
		    "micro-batches with %d stages", stages, micro,
		    SCHEDULE_MAX_WORK, SCHEDULE_MAX_WORK / stages, stages));

	switch (kind) {
	case SCHEDULE_PIPELINED:
		need = training ? 2 * stages - 1 : stages;
		if (micro >= need)
			return (0);
		if (training)
			return (train_fail(err, errlen, "the pipelined "
			    "schedule over %d IPU%s needs a gradient "
			    "accumulation of at least %d (2N-1 pipeline "
			    "stages: a forward and a backward per IPU, the "
			    "last IPU's merged into one), got %d; the closest "
			    "valid value is %d", stages, stages == 1 ? "" : "s",
			    need, micro, need));
		return (train_fail(err, errlen, "pipelined inference over "
		    "%d IPU%s needs at least %d micro-batches per run (device "
		    "iterations >= the number of stages), got %d; the closest "
		    "valid value is %d", stages, stages == 1 ? "" : "s",
		    need, micro, need));
	case SCHEDULE_GROUPED:
		return (schedule_multiple(kind, stages, micro,
		    training ? 2 * stages : stages, what, training ?
		    "2N: every forward and backward stage" :
		    "N: every forward stage", err, errlen));
	case SCHEDULE_INTERLEAVED:
		return (schedule_multiple(kind, stages, micro, stages, what,
		    "N: the number of IPUs", err, errlen));
	default:
		return (0);
	}
}

/* Return the number of slots of @kind for N = @n, M = @m. */
static int
schedule_nslots(enum schedule_kind kind, int n, int m, bool training)
{
	if (!training)
		return (kind == SCHEDULE_SHARDED ? n * m : m + n - 1);
	switch (kind) {
	case SCHEDULE_PIPELINED:
		return (m + 2 * n - 2);
	case SCHEDULE_GROUPED:
		return (m + 2 * n - 1);
	case SCHEDULE_SHARDED:
		return (2 * n * m);
	default:	/* interleaved, GPipe, 1F1B */
		return (2 * m + 2 * n - 2);
	}
}

/* Set the slot and in-slot rank of op @kind of (@k, @m). */
static void
schedule_slot_of(const struct schedule *s, enum op_kind kind, int k, int m,
    int *slot, int *rank)
{
	int	n = s->stages, mm = s->micro;
	bool	fwd = kind == OP_FORWARD;

	/* PopART runs F before B in a cycle, TF grouped B before F. */
	if (s->kind == SCHEDULE_GROUPED)
		*rank = kind == OP_FORWARD ? 2 : kind == OP_RECOMPUTE ? 0 : 1;
	else
		*rank = kind == OP_FORWARD ? 0 : kind == OP_RECOMPUTE ? 1 : 2;
	if (!s->training) {
		*slot = s->kind == SCHEDULE_SHARDED ? n * m + k : m + k;
		return;
	}
	switch (s->kind) {
	case SCHEDULE_PIPELINED:
		*slot = fwd ? m + k : m + 2 * n - 2 - k;
		break;
	case SCHEDULE_GROUPED:
		*slot = fwd ? m + k : m + 2 * n - 1 - k;
		break;
	case SCHEDULE_INTERLEAVED:
		*slot = fwd ? 2 * m + k : 2 * m + 2 * n - 1 - k;
		break;
	case SCHEDULE_SHARDED:
		*slot = 2 * n * m + (fwd ? k : 2 * n - 1 - k);
		break;
	case SCHEDULE_GPIPE:
		*slot = fwd ? m + k : mm + 2 * n - 2 - k + m;
		break;
	case SCHEDULE_1F1B:
		if (fwd)
			*slot = m < n - k ? m + k : 2 * m + k;
		else
			*slot = 2 * m + 2 * n - 1 - k;
		break;
	}
}

/* Order generated ops by slot, IPU, then the framework's in-slot order. */
static int
schedule_gen_cmp(const void *a, const void *b)
{
	const struct schedule_gen	*x = a, *y = b;

	if (x->op.slot != y->op.slot)
		return (x->op.slot < y->op.slot ? -1 : 1);
	if (x->op.stage != y->op.stage)
		return (x->op.stage < y->op.stage ? -1 : 1);
	return ((x->rank > y->rank) - (x->rank < y->rank));
}

/* Generate the ops of @kind and sort them into execution order. */
int
schedule_build(struct schedule *s, enum schedule_kind kind, int stages,
    int micro, bool training, bool recompute, char *err, size_t errlen)
{
	struct schedule_gen	*gen;
	size_t			 per, n = 0, i;
	int			 k, m;

	memset(s, 0, sizeof *s);
	if (schedule_check(kind, stages, micro, training, err, errlen) == -1)
		return (-1);
	recompute = recompute && training;
	per = training ? 2 : 1;
	s->kind = kind;
	s->stages = stages;
	s->micro = micro;
	s->training = training;
	s->lockstep = kind != SCHEDULE_GPIPE && kind != SCHEDULE_1F1B;
	s->nslots = schedule_nslots(kind, stages, micro, training);

	i = (size_t)stages * micro * per;
	if (recompute)
		i += (size_t)(stages - 1) * micro;
	gen = calloc(i, sizeof *gen);
	s->ops = calloc(i, sizeof *s->ops);
	if (gen == NULL || s->ops == NULL) {
		free(gen);
		schedule_free(s);
		return (train_fail(err, errlen, "out of memory for %zu "
		    "schedule ops", i));
	}
	for (k = 0; k < stages; k++) {
		for (m = 0; m < micro; m++) {
			gen[n].op = (struct sched_op){ OP_FORWARD, k, m, 0 };
			schedule_slot_of(s, OP_FORWARD, k, m, &gen[n].op.slot,
			    &gen[n].rank);
			n++;
			if (!training)
				continue;
			if (recompute && k < stages - 1) {
				gen[n].op = (struct sched_op){ OP_RECOMPUTE, k,
				    m, 0 };
				/* In the backward's slot, right before it. */
				schedule_slot_of(s, OP_RECOMPUTE, k, m,
				    &gen[n].op.slot, &gen[n].rank);
				n++;
			}
			gen[n].op = (struct sched_op){ OP_BACKWARD, k, m, 0 };
			schedule_slot_of(s, OP_BACKWARD, k, m, &gen[n].op.slot,
			    &gen[n].rank);
			n++;
		}
	}
	qsort(gen, n, sizeof *gen, schedule_gen_cmp);
	for (i = 0; i < n; i++)
		s->ops[i] = gen[i].op;
	s->nops = (int)n;
	free(gen);
	return (0);
}

/* Free the ops of @s; @s may be zeroed or already freed. */
void
schedule_free(struct schedule *s)
{
	if (s == NULL)
		return;
	free(s->ops);
	s->ops = NULL;
	s->nops = 0;
}

/* Count, per stage, the most forwards waiting for their backward. */
void
schedule_peak_stash(const struct schedule *s, int *peak)
{
	int	*live, i, k;

	for (k = 0; k < s->stages; k++)
		peak[k] = 0;
	if (!s->training)
		return;
	live = calloc(s->stages, sizeof *live);
	if (live == NULL)
		abort();
	for (i = 0; i < s->nops; i++) {
		k = s->ops[i].stage;
		if (s->ops[i].kind == OP_FORWARD) {
			if (++live[k] > peak[k])
				peak[k] = live[k];
		} else if (s->ops[i].kind == OP_BACKWARD)
			live[k]--;
	}
	free(live);
}

/* Unit cost of an op: forward and recompute 1, backward @tb. */
static double
schedule_op_cost(enum op_kind kind, double tb)
{
	return (kind == OP_BACKWARD ? tb : 1.0);
}

/* Finish time of an asynchronous schedule run op by op in array order. */
static double
schedule_async_makespan(const struct schedule *s, double tb)
{
	const struct sched_op	*op;
	double			*fend, *bend, *free_at, start, end, span = 0;
	size_t			 nm = (size_t)s->stages * s->micro;
	int			 i, k, m, n = s->stages;

	fend = calloc(nm, sizeof *fend);
	bend = calloc(nm, sizeof *bend);
	free_at = calloc(n, sizeof *free_at);
	if (fend == NULL || bend == NULL || free_at == NULL)
		abort();
	for (i = 0; i < s->nops; i++) {
		op = &s->ops[i];
		k = op->stage;
		m = op->micro;
		start = free_at[k];
		if (op->kind == OP_FORWARD) {
			if (k > 0 && fend[(size_t)(k - 1) * s->micro + m] >
			    start)
				start = fend[(size_t)(k - 1) * s->micro + m];
		} else {
			if (fend[(size_t)k * s->micro + m] > start)
				start = fend[(size_t)k * s->micro + m];
			if (op->kind == OP_BACKWARD && k < n - 1 &&
			    bend[(size_t)(k + 1) * s->micro + m] > start)
				start = bend[(size_t)(k + 1) * s->micro + m];
		}
		end = start + schedule_op_cost(op->kind, tb);
		free_at[k] = end;
		if (op->kind == OP_FORWARD)
			fend[(size_t)k * s->micro + m] = end;
		else if (op->kind == OP_BACKWARD)
			bend[(size_t)k * s->micro + m] = end;
		if (end > span)
			span = end;
	}
	free(fend);
	free(bend);
	free(free_at);
	return (span);
}

/* Return the makespan at unit costs, lock-step or event-driven. */
double
schedule_unit_makespan(const struct schedule *s, double tb)
{
	double	*work, busiest, total = 0;
	int	 i, j, k, slot;

	if (s->nops == 0)
		return (0);
	if (!s->lockstep)
		return (schedule_async_makespan(s, tb));
	work = calloc(s->stages, sizeof *work);
	if (work == NULL)
		abort();
	for (i = 0; i < s->nops; i = j) {
		slot = s->ops[i].slot;
		for (j = i; j < s->nops && s->ops[j].slot == slot; j++)
			work[s->ops[j].stage] +=
			    schedule_op_cost(s->ops[j].kind, tb);
		busiest = 0;
		for (k = 0; k < s->stages; k++) {
			if (work[k] > busiest)
				busiest = work[k];
			work[k] = 0;
		}
		total += busiest;
	}
	free(work);
	return (total);
}

/* Return the idle share of N x makespan at unit costs. */
double
schedule_bubble_fraction(const struct schedule *s, double tb)
{
	double	span, work = 0;
	int	i;

	span = schedule_unit_makespan(s, tb);
	if (span <= 0)
		return (0);
	for (i = 0; i < s->nops; i++)
		work += schedule_op_cost(s->ops[i].kind, tb);
	return (1.0 - work / (s->stages * span));
}

/* Find the ops of @slot by binary search on the sorted slots. */
int
schedule_slot_ops(const struct schedule *s, int slot, int *first)
{
	int	lo = 0, hi = s->nops, mid, end;

	*first = 0;
	if (slot < 0 || slot >= s->nslots)
		return (0);
	/* Ops are sorted by slot: find the first one at or after @slot. */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (s->ops[mid].slot < slot)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < s->nops && s->ops[end].slot == slot; end++)
		;
	*first = lo;
	return (end - lo);
}

/* Format IPU @stage's ops in @slot like the reference tables. */
int
schedule_cell(const struct schedule *s, int slot, int stage, char *buf,
    size_t len)
{
	static const char	 letter[] = { [OP_FORWARD] = 'F',
				    [OP_BACKWARD] = 'B', [OP_RECOMPUTE] = 'R' };
	size_t			 used = 0;
	int			 first, n, i, count = 0, w;

	if (len > 0)
		buf[0] = '\0';
	n = schedule_slot_ops(s, slot, &first);
	for (i = first; i < first + n; i++) {
		if (s->ops[i].stage != stage)
			continue;
		if (used < len) {
			w = snprintf(buf + used, len - used, "%s%c%d",
			    count > 0 ? "+" : "", letter[s->ops[i].kind],
			    s->ops[i].micro);
			if (w > 0)
				used += (size_t)w;
		}
		count++;
	}
	return (count);
}

/* Return the index of an op by kind, stage and micro-batch, or -1. */
int
schedule_find(const struct schedule *s, enum op_kind kind, int stage,
    int micro)
{
	int	i;

	for (i = 0; i < s->nops; i++)
		if (s->ops[i].kind == kind && s->ops[i].stage == stage &&
		    s->ops[i].micro == micro)
			return (i);
	return (-1);
}
