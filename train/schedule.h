/* SPDX-License-Identifier: MIT */
/*
 * schedule.h - the order in which a simulated multi-IPU pipeline runs the
 * forward and backward passes of one weight update.
 *
 * A schedule is a list of ops (forward, backward or recompute of stage k on
 * micro-batch m), each placed in a slot.  For the lock-step (BSP)
 * schedules of Graphcore's frameworks a slot is a step / pipeline cycle;
 * for the asynchronous references (GPipe, 1F1B) it is a unit time slot
 * with tF = tB = 1.  The ops are stored in a valid execution order: slot
 * by slot, and within a slot in the order the framework runs them (TF
 * Grouped: backward before forward on an IPU; PopTorch: forward before
 * backward).  Running them in that order on real tensors is always correct.
 * See ../shared/reference/pipeline-schedules.md, sections 1 and 2.
 */
#ifndef INFEED_TRAIN_SCHEDULE_H
#define INFEED_TRAIN_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>

/* Sizes schedule_check() accepts; larger ones are refused as absurd. */
#define SCHEDULE_MAX_STAGES	64
#define SCHEDULE_MAX_MICRO	100000
#define SCHEDULE_MAX_WORK	1000000	/* N x M */

enum schedule_kind {
	SCHEDULE_PIPELINED,   /* PopTorch PipelinedExecution (PopART) */
	SCHEDULE_SHARDED,     /* PopTorch ShardedExecution = TF Sequential */
	SCHEDULE_GROUPED,     /* TF PipelineSchedule.Grouped */
	SCHEDULE_INTERLEAVED, /* TF PipelineSchedule.Interleaved */
	SCHEDULE_GPIPE,       /* asynchronous reference */
	SCHEDULE_1F1B,        /* asynchronous reference, PipeDream-Flush */
};

enum op_kind { OP_FORWARD, OP_BACKWARD, OP_RECOMPUTE };

struct sched_op {
	enum op_kind kind;
	int stage;      /* = the IPU it runs on, 0..N-1 */
	int micro;      /* micro-batch 0..M-1 */
	int slot;       /* step / cycle / unit slot */
};

struct schedule {
	enum schedule_kind kind;
	int stages;     /* N */
	int micro;      /* M */
	bool training;  /* false: forward ops only (inference) */
	bool lockstep;  /* BSP steps (Graphcore) vs asynchronous (references) */
	int nslots;     /* steps / cycles / unit slots for tF = tB = 1 */
	int nops;
	struct sched_op *ops;
};

/** schedule_name() - "pipelined", "sharded", ... as the CLI spells them. */
const char *schedule_name(enum schedule_kind kind);

/** schedule_parse() - the inverse of schedule_name(); -1 if unknown. */
int schedule_parse(const char *name);

/**
 * schedule_check() - whether @kind can run @stages stages with @micro
 * micro-batches per weight update.  On refusal returns -1 and writes the
 * reason and what would be accepted to @err, e.g. "the pipelined schedule
 * over 4 IPUs needs a gradient accumulation of at least 7 (2N-1 pipeline
 * stages), got 4".
 */
int schedule_check(enum schedule_kind kind, int stages, int micro,
    bool training, char *err, size_t errlen);

/**
 * schedule_build() - build the schedule (after schedule_check()).  With
 * @recompute, stages k < N-1 of a training schedule get an OP_RECOMPUTE of
 * micro-batch m right before their OP_BACKWARD of m, in the same slot
 * (PopTorch's default RecomputationType::Pipeline).  Returns -1 with @err
 * set if the combination is refused or memory runs out.
 */
int schedule_build(struct schedule *s, enum schedule_kind kind, int stages,
    int micro, bool training, bool recompute,
    char *err, size_t errlen);
void schedule_free(struct schedule *s);

/**
 * schedule_peak_stash() - for each stage, the largest number of
 * micro-batches whose forward has run but whose backward has not, over the
 * schedule (the activations it must keep).  @peak has room for N ints.
 * Inference keeps nothing for a backward, so its peaks are 0.
 */
void schedule_peak_stash(const struct schedule *s, int *peak);

/**
 * schedule_unit_makespan() - makespan in units of tF when forward costs 1
 * and backward @tb (recompute costs 1), copies ignored: for lock-step
 * schedules the sum over steps of the busiest IPU's work, for the
 * asynchronous ones the dependency-driven finish time.
 */
double schedule_unit_makespan(const struct schedule *s, double tb);

/**
 * schedule_bubble_fraction() - idle share of N x makespan at the same
 * unit costs: 1 - total work / (N * makespan).
 */
double schedule_bubble_fraction(const struct schedule *s, double tb);

/**
 * schedule_slot_word() - what a slot is called in @kind's framework:
 * "cycle" (PopART), "step" (TF), "op-step" (sharded), "slot" (async).
 */
const char *schedule_slot_word(enum schedule_kind kind);

/**
 * schedule_slot_ops() - the ops of @slot are ops[*@first .. *@first + n),
 * n returned (0 for an empty or out-of-range slot).
 */
int schedule_slot_ops(const struct schedule *s, int slot, int *first);

/**
 * schedule_cell() - the work of IPU @stage in @slot as the reference
 * tables write it, in execution order: "F3+B0", "F6+R0+B0", or "" when the
 * IPU idles.  Returns the number of ops in the cell.
 */
int schedule_cell(const struct schedule *s, int slot, int stage,
    char *buf, size_t len);

/** schedule_find() - index in ops of @kind of (@stage, @micro), or -1. */
int schedule_find(const struct schedule *s, enum op_kind kind, int stage,
    int micro);

#endif
