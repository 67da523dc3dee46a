/* SPDX-License-Identifier: MIT */
/*
 * lr-schedule.h - learning-rate schedules as PyTorch's lr_scheduler
 * computes them, applied between host calls as poptorch's setOptimizer().
 */
#ifndef INFEED_TRAIN_LR_SCHEDULE_H
#define INFEED_TRAIN_LR_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

enum lr_schedule_kind {
	LR_CONSTANT,    /* the tutorial: one learning rate throughout */
	LR_COSINE,      /* torch CosineAnnealingLR, T_max = all calls */
	LR_ONECYCLE,    /* torch OneCycleLR with its defaults */
};

/* The optimiser's settings for one host call. */
struct lr_point {
	float lr;
	bool has_momentum;      /* OneCycleLR also cycles the momentum */
	float momentum;         /* SGD's momentum or AdamW's beta1 */
};

/** lr_schedule_parse() - "constant", "cosine" or "onecycle"; -1 if none. */
int lr_schedule_parse(const char *name, enum lr_schedule_kind *kind);
const char *lr_schedule_name(enum lr_schedule_kind kind);

/**
 * lr_schedule_at() - the settings for host call @t (0-based) of @total,
 * with @lr the base (constant, cosine) or peak (onecycle) learning rate.
 */
struct lr_point lr_schedule_at(enum lr_schedule_kind kind, float lr,
    uint64_t t, uint64_t total);

#endif
