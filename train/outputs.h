/* SPDX-License-Identifier: MIT */
/*
 * outputs.h - what a training or inference step hands back to the host,
 * in poptorch's OutputMode shapes (../shared/reference/poptorch-semantics.md
 * section J): All returns every micro-batch, EveryN(n) the device
 * iterations n-1, 2n-1, ..., Final the last micro-batch of each replica,
 * Sum one sum per replica.  A per-micro-batch scalar (the loss) becomes a
 * vector of b_dim values, or stays a scalar when b_dim is 1; the
 * predictions get b_dim x B rows.
 */
#ifndef INFEED_TRAIN_OUTPUTS_H
#define INFEED_TRAIN_OUTPUTS_H

#include <stddef.h>
#include <stdint.h>

#include "executor.h"

enum output_mode { OUTPUT_FINAL, OUTPUT_EVERY_N, OUTPUT_ALL, OUTPUT_SUM };

struct output_spec {
	enum output_mode mode;
	int every;                      /* n of EveryN */
};

/* What reaches the host after one call. */
struct host_outputs {
	size_t b_dim;                   /* copies of the per-micro shape */
	int loss_is_scalar;             /* b_dim == 1 */
	float *loss;                    /* [b_dim] */
	size_t pred_rows;               /* B * b_dim, fewer for short steps */
	float *preds;                   /* [pred_rows][classes] */
	int32_t *pred_labels;           /* the labels of those rows, or NULL
					 * for Sum (sums have no label) */
};

/** output_mode_parse() - "all", "final", "sum" or "every-N". */
int output_mode_parse(const char *s, struct output_spec *spec,
    char *err, size_t errlen);

/** output_mode_name() - the spelling output_mode_parse() takes. */
const char *output_mode_name(const struct output_spec *spec, char *buf,
    size_t len);

/**
 * output_mode_check() - EveryN(n) needs n <= device iterations and
 * device iterations % n == 0, as PopART's isValidAnchorReturnPeriod.
 */
int output_mode_check(const struct output_spec *spec, int device_iterations,
    char *err, size_t errlen);

/**
 * outputs_select() - pick and shape @all (every micro-batch of a call with
 * @B, @M, @R, @D; rows in poptorch's layout) for @spec into @out, whose
 * buffers are (re)allocated here; free them with host_outputs_free().
 * Returns -1 without memory.
 */
int outputs_select(const struct output_spec *spec,
    const struct step_outputs *all, const int32_t *labels,
    int B, int M, int R, int D, int classes,
    struct host_outputs *out);
void host_outputs_free(struct host_outputs *out);

#endif
