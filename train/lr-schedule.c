/* SPDX-License-Identifier: MIT */
/*
 * lr-schedule.c - learning-rate schedules with torch.optim.lr_scheduler's
 * formulas.  PopTorch keeps the optimiser on the device and takes a new
 * learning rate only with setOptimizer() between host calls, so the
 * schedule steps once per call, not once per weight update.
 */
#include "lr-schedule.h"

#include <math.h>
#include <string.h>

/* OneCycleLR's defaults. */
#define ONECYCLE_PCT_START      0.3
#define ONECYCLE_DIV            25.0
#define ONECYCLE_FINAL_DIV      1e4
#define ONECYCLE_BASE_MOMENTUM  0.85
#define ONECYCLE_MAX_MOMENTUM   0.95

static const char *const names[] = {
	[LR_CONSTANT] = "constant",
	[LR_COSINE] = "cosine",
	[LR_ONECYCLE] = "onecycle",
};

/* Look a learning-rate schedule up by name. */
int
lr_schedule_parse(const char *name, enum lr_schedule_kind *kind)
{
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i]) == 0) {
			*kind = (enum lr_schedule_kind)i;
			return (0);
		}
	return (-1);
}

/* The name of a learning-rate schedule. */
const char *
lr_schedule_name(enum lr_schedule_kind kind)
{
	return (names[kind]);
}

/* OneCycleLR's cosine from @start to @end at fraction @pct. */
static double
anneal_cos(double start, double end, double pct)
{
	return (end + (start - end) / 2.0 * (cos(M_PI * pct) + 1.0));
}

/* The learning rate and betas at call @t of @n. */
struct lr_point
lr_schedule_at(enum lr_schedule_kind kind, float lr, uint64_t t,
    uint64_t total)
{
	struct lr_point p = { .lr = lr };
	double initial, phase1_end, pct;

	if (total == 0)
		total = 1;
	if (t >= total)
		t = total - 1;
	switch (kind) {
	case LR_CONSTANT:
		break;
	case LR_COSINE:
		/* eta_min 0: lr (1 + cos(pi t / T)) / 2. */
		p.lr = (float)(lr * (1.0 + cos(M_PI * (double)t /
		    (double)total)) / 2.0);
		break;
	case LR_ONECYCLE:
		/* Warm up from lr/25 to lr over the first 30 % of the calls
		 * while the momentum falls from 0.95 to 0.85, then anneal to
		 * lr/25/1e4 while it climbs back. */
		initial = lr / ONECYCLE_DIV;
		phase1_end = ONECYCLE_PCT_START * (double)total - 1.0;
		p.has_momentum = true;
		if (phase1_end > 0 && (double)t <= phase1_end) {
			pct = (double)t / phase1_end;
			p.lr = (float)anneal_cos(initial, lr, pct);
			p.momentum = (float)anneal_cos(ONECYCLE_MAX_MOMENTUM,
			    ONECYCLE_BASE_MOMENTUM, pct);
		} else {
			pct = ((double)t - phase1_end) /
			    ((double)total - 1.0 - phase1_end);
			p.lr = (float)anneal_cos(lr, initial /
			    ONECYCLE_FINAL_DIV, pct);
			p.momentum = (float)anneal_cos(ONECYCLE_BASE_MOMENTUM,
			    ONECYCLE_MAX_MOMENTUM, pct);
		}
		break;
	}
	return (p);
}
