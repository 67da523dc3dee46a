/* SPDX-License-Identifier: MIT */
/*
 * device.h - the simulated IPU system's clock: the cost model applied to
 * one executor configuration, and the waits of the emulate mode.
 */
#ifndef INFEED_TRAIN_DEVICE_H
#define INFEED_TRAIN_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "costmodel.h"
#include "executor.h"
#include "outputs.h"

struct device {
	struct ipu_config ipu;
	struct stage_cost stages[EXECUTOR_MAX_STAGES];
	struct run_shape shape;
	const struct schedule *sched;
	struct device_timing timing;    /* of one full host call */
};

/**
 * device_setup() - model one host call of @sched with @o's shape on @ipu:
 * per-stage FLOPs, activations and parameters come from @m's layers.
 * @synthetic: no host input transfer (poptorch's enableSyntheticData).
 */
int device_setup(struct device *d, const struct ipu_config *ipu,
    const struct executor_options *o, const struct model *m,
    const struct schedule *sched, bool training, bool synthetic,
    const struct output_spec *out, char *err, size_t errlen);

/** device_call_seconds() - modelled time of one full host call. */
double device_call_seconds(const struct device *d);

/** device_wait_until() - sleep until CLOCK_MONOTONIC second @t. */
void device_wait_until(double t);

/**
 * device_profile() - write @dir/@name.json (Chrome/Perfetto trace) and
 * @dir/@name.svg of one host call, after @host_wait seconds the host
 * spent waiting for the step's data.  Creates @dir if needed.
 */
int device_profile(const struct device *d, const char *dir, const char *name,
    double host_wait, char *err, size_t errlen);

#endif
