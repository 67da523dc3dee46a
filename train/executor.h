/* SPDX-License-Identifier: MIT */
/*
 * executor.h - runs device steps of the simulated IPU system for real.
 *
 * One host call ("device step") covers D device iterations; each iteration
 * runs the pipeline schedule over M micro-batches on each of R replicas,
 * then averages the replicas' gradients with a ring all-reduce and updates
 * the weights once.  The ops of the schedule are executed in the
 * schedule's own order on real tensors (forward, recompute, backward of a
 * stage's layer range), so every schedule must give the same weights, and
 * the tests check that it does.
 *
 * A step's rows follow poptorch's layout: the micro-batch of device
 * iteration i, accumulation step a and replica r starts at row
 * ((i * M + a) * R + r) * B.
 */
#ifndef INFEED_TRAIN_EXECUTOR_H
#define INFEED_TRAIN_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lr-schedule.h"
#include "model.h"
#include "schedule.h"

#define EXECUTOR_MAX_STAGES MODEL_MAX_BLOCKS

struct executor_options {
	enum model_kind model;
	struct shape input;             /* the model's input; c 0: its own */
	int classes;                    /* its outputs; 0: its own */
	uint64_t seed;                  /* weight initialisation */
	int nstages;                    /* IPUs per replica */
	int stage_first_block[EXECUTOR_MAX_STAGES]; /* stage s starts here */
	enum schedule_kind schedule;
	bool recompute;                 /* PopTorch's default with > 1 IPU */
	int batch_size;                 /* micro-batch B */
	int gradient_accumulation;      /* M */
	int replicas;                   /* R */
	int device_iterations;          /* D */
	enum optimiser_kind optimiser;
	float lr, momentum, weight_decay;
};

/* What one host call produced, in poptorch's "All" shapes: one loss per
 * micro-batch ordered [D][M][R], one row of logits per input row. */
struct step_outputs {
	size_t nmicro;                  /* D * M * R, fewer for a short step */
	float *losses;                  /* [nmicro] mean loss of each */
	int *correct;                   /* [nmicro] right answers in each */
	int *micro_rows;                /* [nmicro] rows in each */
	size_t rows;
	float *logits;                  /* [rows][classes] */
	double loss_sum;                /* sum over rows of per-row loss */
	long right;                     /* rows predicted right */
};

struct executor;

/**
 * executor_options_default() - the pipelining tutorial: 4 IPUs, one block
 * each, pipelined with recomputation, B 40, M 10, R 1, D 10, AdamW 0.001.
 */
void executor_options_default(struct executor_options *o);

/**
 * executor_stages_parse() - "B1+B2,B3,B4": one comma-separated entry per
 * IPU, blocks joined by '+', in order, every block exactly once (as
 * poptorch.Stage("B1", "B2").ipu(0), ...).  -1 with @err on a bad map.
 */
int executor_stages_parse(struct executor_options *o, const char *spec,
    char *err, size_t errlen);

/**
 * executor_new() - check @o (returns NULL with the reason in @err), build
 * the model, schedule and buffers.  @training false: forward only.
 */
struct executor *executor_new(const struct executor_options *o,
    bool training, char *err, size_t errlen);
void executor_free(struct executor *x);

struct model *executor_model(struct executor *x);
const struct schedule *executor_schedule(const struct executor *x);
size_t executor_step_rows(const struct executor *x);  /* B*M*R*D */

/**
 * executor_run() - one host call on @rows rows of float32 @data and int32
 * @labels in poptorch's layout.  Training needs a full step; inference
 * takes a short one (the last micro-batch may be partial).  Labels are
 * checked first: one outside [0, classes) refuses the whole step with
 * the row in @err and returns -1.  @out is filled (its arrays are owned
 * by the executor and valid until the next call).
 */
int executor_run(struct executor *x, const float *data,
    const int32_t *labels, size_t rows,
    struct step_outputs *out, char *err, size_t errlen);

/**
 * executor_set_optimiser() - as poptorch's setOptimizer() between host
 * calls: the learning rate, and the momentum (SGD) or beta1 (AdamW) when
 * @p has one.  The optimiser's state is kept.
 */
void executor_set_optimiser(struct executor *x, const struct lr_point *p);

/**
 * ring_allreduce_mean() - the bandwidth-optimal ring all-reduce
 * (reduce-scatter, then all-gather) over @r buffers of @n floats: each
 * ends up holding the element-wise mean.
 */
void ring_allreduce_mean(float **bufs, int r, size_t n);

#endif
