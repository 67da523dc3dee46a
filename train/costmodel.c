/* SPDX-License-Identifier: MIT */
/*
 * The cost model of costmodel.h (reference pipeline-schedules.md, 3.2-3.3).
 *
 * A lock-step schedule costs, per step t,
 *   T_step(t) = max_k work_k(t) + T_copy(t)
 *   work_k(t) = T_in (stage 0 reads a micro-batch) + its ops + T_out (the
 *               last stage returns an output), the host transfers blocking
 *               the IPU as they do without I/O tiles
 *   T_copy(t) = max over directed links of bytes / link_bw + link_sync,
 *               every step, activations and gradients crossing at once
 *               (a single IPU has no links: no copy, no sync)
 * and an asynchronous one (GPipe, 1F1B) is run op by op: an op starts when
 * its IPU is free and its input has arrived (producer end + bytes/link_bw
 * + link_sync).  Then per weight update, if training, a ring all-reduce
 * per stage (R > 1) and the optimiser step, serial over the IPUs or
 * parallel; per host call, the launch.
 *
 * Calibration of the defaults: the tutorial's ClassificationModel does
 * 20,842,538 forward FLOPs per sample in 9 layers (as train/model.c
 * counts them); at micro-batch 16 that
 * is 5.2 µs of a GC200's fp32 peak, while the measured 34,306.55 items/s
 * means ~466 µs per device iteration.  Two things close the gap.  Each
 * layer is several Poplar compute sets, each ending in an exchange and a
 * chip-wide BSP sync; on GC200 profiles a small layer costs a few thousand
 * cycles of those whatever its FLOPs, so layer_overhead = 5 µs (~6.7k
 * cycles) per layer and pass.  And convolutions with 1 to 12 channels
 * cannot fill the AMP units (which want channel groups of 8-16) in fp32,
 * so the FLOPs run at a small share of peak: efficiency = 0.0128 makes the
 * rest.  With launch = 200 µs per call that gives 34,198 items/s for one
 * replica and 136,793 for four (-0.3 %, +0.25 %); with real data the
 * 1 MiB input per micro-batch over 64 GB/s PCIe adds 18.4 µs per
 * iteration, a ceiling 96 % of synthetic.  Both factors are
 * overridable (--ipu efficiency=0.5 layer_overhead=1e-6 for a large
 * dense model).
 */

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "costmodel.h"
#include "fail.h"

/* One --ipu key: where it lives and how to show it. */
struct ipu_key {
	const char	*name;
	size_t		 off;
	int		 flag;		/* a bool field, else a double */
	const char	*unit;
	const char	*help;
};

#define IPU_NUM(f, u, h)	\
	{ #f, offsetof(struct ipu_config, f), 0, u, h }
#define IPU_FLAG(f, h)	\
	{ #f, offsetof(struct ipu_config, f), 1, "0/1", h }

static const struct ipu_key ipu_keys[] = {
	IPU_NUM(peak_flops, "FLOP/s", "fp32 peak per IPU"),
	IPU_NUM(efficiency, "", "share of peak the layers reach (<= 1)"),
	IPU_NUM(layer_overhead, "s", "fixed cost per layer per forward pass"),
	IPU_NUM(backward_ratio, "", "backward time / forward time"),
	IPU_NUM(link_bw, "B/s", "inter-IPU link, per direction"),
	IPU_NUM(link_sync, "s", "sync ending every pipeline step"),
	IPU_NUM(host_bw, "B/s", "host link per IPU (PCIe Gen4 x16)"),
	IPU_NUM(host_latency, "s", "per host transfer (60e-6 unprefetched)"),
	IPU_NUM(launch, "s", "host cost per host call"),
	IPU_NUM(ring_bw, "B/s", "all-reduce ring bandwidth"),
	IPU_NUM(ring_alpha, "s", "all-reduce latency per ring hop"),
	IPU_NUM(grad_bytes, "B", "bytes per gradient element reduced"),
	IPU_NUM(sram_bw, "B/s", "In-Processor memory bandwidth"),
	IPU_NUM(update_bytes, "B", "bytes touched per parameter by the update"),
	IPU_NUM(stream_bw, "B/s", "Streaming Memory bandwidth"),
	IPU_NUM(state_bytes, "B", "optimiser state per parameter, offloaded"),
	IPU_FLAG(offload_optimiser, "optimiser state in Streaming Memory"),
	IPU_FLAG(outer_serial, "all-reduce and update IPU after IPU"),
	IPU_NUM(clock_hz, "Hz", "IPU clock, for the cycles axis"),
};
#define IPU_NKEYS	(sizeof ipu_keys / sizeof ipu_keys[0])

/* Everything one evaluation needs, worked out once. */
struct costmodel_ctx {
	const struct ipu_config	*cfg;
	const struct schedule	*s;
	const struct stage_cost	*st;
	int			 n, m, outputs;
	double			 b;
	double			 tf[COSTMODEL_MAX_STAGES];
	double			 tb[COSTMODEL_MAX_STAGES];
	double			 fwd_lat[COSTMODEL_MAX_STAGES]; /* k -> k+1 */
	double			 bwd_lat[COSTMODEL_MAX_STAGES]; /* k -> k-1 */
	double			 ar[COSTMODEL_MAX_STAGES];
	double			 wu[COSTMODEL_MAX_STAGES];
	double			 t_in, t_out;
	double			 copy;		/* per update, lock-step */
	double			*fend, *bend;	/* async scratch, N x M */
	double			*links;		/* lock-step scratch, 2N */
};

static const struct ipu_key *ipu_key_find(const char *);
static double	*ipu_key_num(struct ipu_config *, const struct ipu_key *);
static bool	*ipu_key_flag(struct ipu_config *, const struct ipu_key *);
static bool	 costmodel_output_at(const struct costmodel_ctx *, int);
static double	 costmodel_op_time(const struct costmodel_ctx *,
    const struct sched_op *);
static enum trace_kind costmodel_trace_kind(enum op_kind);
static void	 costmodel_span(struct timeline *, int, enum trace_kind, int,
    int, double, double);
static double	 costmodel_lockstep(struct costmodel_ctx *, struct timeline *,
    double, int);
static double	 costmodel_async(struct costmodel_ctx *, struct timeline *,
    double, int);
static double	 costmodel_outer(const struct costmodel_ctx *,
    struct timeline *, double, int, double *, double *);
static void	 costmodel_ctx_init(struct costmodel_ctx *,
    const struct ipu_config *, const struct schedule *,
    const struct stage_cost *, const struct run_shape *);
static int	 costmodel_ctx_alloc(struct costmodel_ctx *);
static void	 costmodel_busy(const struct costmodel_ctx *,
    const struct run_shape *, struct device_timing *);
static void	 costmodel_trace(struct costmodel_ctx *,
    const struct run_shape *, const struct device_timing *,
    struct timeline *);

/* Fill @cfg with the GC200-like defaults. */
void
ipu_config_default(struct ipu_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->peak_flops = 62.5e12;
	cfg->efficiency = 0.0128;
	cfg->layer_overhead = 5e-6;
	cfg->backward_ratio = 2;
	cfg->link_bw = 32e9;
	cfg->link_sync = 2e-6;
	cfg->host_bw = 64e9;
	cfg->host_latency = 2e-6;
	cfg->launch = 200e-6;
	cfg->ring_bw = 32e9;
	cfg->ring_alpha = 5e-6;
	cfg->grad_bytes = 4;
	cfg->sram_bw = 47.5e12;
	cfg->update_bytes = 16;
	cfg->stream_bw = 16e9;
	cfg->state_bytes = 8;
	cfg->offload_optimiser = false;
	cfg->outer_serial = true;
	cfg->clock_hz = 1.33e9;
}

/* Fill @cfg so that unit FLOPs take 1 µs and nothing else costs time. */
void
costmodel_unit_config(struct ipu_config *cfg, double tb)
{
	ipu_config_default(cfg);
	cfg->peak_flops = 1e6;
	cfg->efficiency = 1;
	cfg->layer_overhead = 0;
	cfg->backward_ratio = tb;
	cfg->link_sync = 0;
	cfg->host_latency = 0;
	cfg->launch = 0;
	cfg->ring_alpha = 0;
	cfg->clock_hz = 0;
}

/* The key called @name, or NULL. */
static const struct ipu_key *
ipu_key_find(const char *name)
{
	size_t	i;

	for (i = 0; i < IPU_NKEYS; i++)
		if (strcmp(ipu_keys[i].name, name) == 0)
			return (&ipu_keys[i]);
	return (NULL);
}

/* The double field of @key in @cfg. */
static double *
ipu_key_num(struct ipu_config *cfg, const struct ipu_key *key)
{
	return ((double *)(void *)((char *)cfg + key->off));
}

/* The bool field of @key in @cfg. */
static bool *
ipu_key_flag(struct ipu_config *cfg, const struct ipu_key *key)
{
	return ((bool *)(void *)((char *)cfg + key->off));
}

/* Set one field from its key and a textual value, validated. */
int
ipu_config_set(struct ipu_config *cfg, const char *key, const char *value,
    char *err, size_t errlen)
{
	static const char	*const yes[] = { "1", "true", "yes", "on" };
	static const char	*const no[] = { "0", "false", "no", "off" };
	const struct ipu_key	*k;
	char			 keys[512], *end;
	double			 v;
	size_t			 i, used = 0;

	if (key == NULL || (k = ipu_key_find(key)) == NULL) {
		keys[0] = '\0';
		for (i = 0; i < IPU_NKEYS && used < sizeof keys; i++)
			used += (size_t)snprintf(keys + used, sizeof keys -
			    used, "%s%s", i > 0 ? ", " : "", ipu_keys[i].name);
		return (train_fail(err, errlen, "unknown IPU setting "
		    "\"%s\"; the settings are %s", key != NULL ? key : "",
		    keys));
	}
	if (value == NULL)
		value = "";
	if (k->flag) {
		for (i = 0; i < sizeof yes / sizeof yes[0]; i++) {
			if (strcasecmp(value, yes[i]) == 0) {
				*ipu_key_flag(cfg, k) = true;
				return (0);
			}
			if (strcasecmp(value, no[i]) == 0) {
				*ipu_key_flag(cfg, k) = false;
				return (0);
			}
		}
		return (train_fail(err, errlen, "IPU setting %s is a "
		    "switch: give 1 or 0 (true/false, yes/no, on/off), not "
		    "\"%s\"", k->name, value));
	}
	errno = 0;
	v = strtod(value, &end);
	/* Times and sizes may be 0 (a cost left out); rates and the
	 * efficiency divide, so they must be above 0. */
	if (end == value || *end != '\0' || errno == ERANGE || !isfinite(v) ||
	    v < 0 || (v == 0 && (strstr(k->unit, "/s") != NULL ||
	    strcmp(k->name, "efficiency") == 0)))
		return (train_fail(err, errlen, "IPU setting %s needs a "
		    "%s finite number%s%s, not \"%s\" (it is %g)",
		    k->name, strstr(k->unit, "/s") != NULL ||
		    strcmp(k->name, "efficiency") == 0 ? "positive" :
		    "non-negative", k->unit[0] != '\0' ? " in " : "", k->unit,
		    value, *ipu_key_num(cfg, k)));
	if (strcmp(k->name, "efficiency") == 0 && v > 1)
		return (train_fail(err, errlen, "IPU setting efficiency "
		    "is a share of the peak, at most 1, not %g", v));
	*ipu_key_num(cfg, k) = v;
	return (0);
}

/* Split a "key=value" argument and set it. */
int
ipu_config_parse(struct ipu_config *cfg, const char *arg, char *err,
    size_t errlen)
{
	const char	*eq;
	char		 key[64];

	if ((eq = strchr(arg, '=')) == NULL || eq == arg ||
	    (size_t)(eq - arg) >= sizeof key)
		return (train_fail(err, errlen, "--ipu takes key=value, "
		    "for example efficiency=0.5, not \"%s\"", arg));
	memcpy(key, arg, eq - arg);
	key[eq - arg] = '\0';
	return (ipu_config_set(cfg, key, eq + 1, err, errlen));
}

/* List every key with its value, unit and meaning. */
void
ipu_config_print(const struct ipu_config *cfg, FILE *f, const char *indent)
{
	const struct ipu_key	*k;
	struct ipu_config	 c = *cfg;
	size_t			 i;

	for (i = 0; i < IPU_NKEYS; i++) {
		k = &ipu_keys[i];
		if (k->flag)
			fprintf(f, "%s%-18s %-10d %-7s %s\n", indent, k->name,
			    *ipu_key_flag(&c, k) ? 1 : 0, k->unit, k->help);
		else
			fprintf(f, "%s%-18s %-10g %-7s %s\n", indent, k->name,
			    *ipu_key_num(&c, k), k->unit, k->help);
	}
}

/* Fill @shape with one sample, replica and iteration. */
void
run_shape_default(struct run_shape *shape, bool training)
{
	memset(shape, 0, sizeof *shape);
	shape->micro_batch = 1;
	shape->replicas = 1;
	shape->device_iterations = 1;
	shape->training = training;
}

/* Refuse a configuration, schedule, stage costs or shape that make no sense. */
int
costmodel_check(const struct ipu_config *cfg, const struct schedule *s,
    const struct stage_cost *stages, const struct run_shape *shape,
    char *err, size_t errlen)
{
	struct ipu_config	 c;
	const struct ipu_key	*key;
	const struct stage_cost	*st;
	double			 v;
	size_t			 i;
	int			 k;

	if (cfg == NULL || s == NULL || stages == NULL || shape == NULL)
		return (train_fail(err, errlen, "nothing to evaluate"));
	c = *cfg;
	for (i = 0; i < IPU_NKEYS; i++) {
		key = &ipu_keys[i];
		if (key->flag)
			continue;
		v = *ipu_key_num(&c, key);
		if (!isfinite(v) || v < 0 || (v == 0 &&
		    strstr(key->unit, "/s") != NULL))
			return (train_fail(err, errlen, "IPU setting %s "
			    "is %g; it must be a finite number above 0",
			    key->name, v));
	}
	if (c.efficiency <= 0 || c.efficiency > 1)
		return (train_fail(err, errlen, "IPU efficiency %g is not "
		    "a share of the peak in (0, 1]", c.efficiency));
	if (s->ops == NULL || s->nops < 1 || s->stages < 1 ||
	    s->stages > COSTMODEL_MAX_STAGES || s->micro < 1)
		return (train_fail(err, errlen, "the schedule is empty; "
		    "build it with schedule_build() first"));
	if (shape->training != s->training)
		return (train_fail(err, errlen, "the run is %s but the "
		    "schedule was built for %s", shape->training ? "training" :
		    "inference", s->training ? "training" : "inference"));
	if (shape->micro_batch < 1 || shape->micro_batch > 1000000)
		return (train_fail(err, errlen, "micro-batch size %d is "
		    "outside 1..1000000", shape->micro_batch));
	if (shape->replicas < 1 || shape->replicas > 65536)
		return (train_fail(err, errlen, "replication factor %d is "
		    "outside 1..65536", shape->replicas));
	if (shape->device_iterations < 1 ||
	    shape->device_iterations > 100000000)
		return (train_fail(err, errlen, "device iterations %d is "
		    "outside 1..100000000", shape->device_iterations));
	if (shape->outputs < 0 || shape->outputs > s->micro)
		return (train_fail(err, errlen, "%d outputs per weight "
		    "update is outside 0..%d (0 = the default, %d = every "
		    "micro-batch)", shape->outputs, s->micro, s->micro));
	for (k = 0; k < s->stages; k++) {
		st = &stages[k];
		if (!isfinite(st->flops) || st->flops < 0 || st->layers < 0 ||
		    !isfinite(st->act_bytes) || st->act_bytes < 0 ||
		    !isfinite(st->params) || st->params < 0 ||
		    !isfinite(st->in_bytes) || st->in_bytes < 0 ||
		    !isfinite(st->out_bytes) || st->out_bytes < 0)
			return (train_fail(err, errlen, "stage %d's costs "
			    "must be finite and not negative", k));
	}
	return (0);
}

/* Whether micro-batch @m's output goes back to the host (evenly spaced). */
static bool
costmodel_output_at(const struct costmodel_ctx *c, int m)
{
	long	o = c->outputs, mm = c->m;

	return ((long)(m + 1) * o / mm > (long)m * o / mm);
}

/* The compute time of @op. */
static double
costmodel_op_time(const struct costmodel_ctx *c, const struct sched_op *op)
{
	return (op->kind == OP_BACKWARD ? c->tb[op->stage] : c->tf[op->stage]);
}

/* The trace kind drawn for an op. */
static enum trace_kind
costmodel_trace_kind(enum op_kind kind)
{
	return (kind == OP_FORWARD ? TRACE_FORWARD : kind == OP_BACKWARD ?
	    TRACE_BACKWARD : TRACE_RECOMPUTE);
}

/* Append a span of positive length, if there is a timeline. */
static void
costmodel_span(struct timeline *tl, int lane, enum trace_kind kind, int micro,
    int iter, double start, double end)
{
	if (tl != NULL && end > start)
		trace_add(tl, lane, kind, micro, iter, start, end, NULL);
}

/* Run a lock-step schedule from @t0; return T_pipe, set c->copy. */
static double
costmodel_lockstep(struct costmodel_ctx *c, struct timeline *tl, double t0,
    int iter)
{
	const struct schedule	*s = c->s;
	const struct sched_op	*op;
	double			 work[COSTMODEL_MAX_STAGES], busiest, link;
	double			 start, d, t = t0;
	int			 i, j, q, k, n = c->n;
	bool			 out;

	c->copy = 0;
	if (tl != NULL)
		trace_mark(tl, t);
	for (i = 0; i < s->nops; i = j) {
		for (j = i; j < s->nops && s->ops[j].slot == s->ops[i].slot;
		    j++)
			;
		memset(work, 0, n * sizeof work[0]);
		memset(c->links, 0, 2 * n * sizeof c->links[0]);
		/* Host input first, outputs last (PopART: D, M, H, C). */
		out = false;
		for (q = i; q < j; q++) {
			op = &s->ops[q];
			if (op->kind != OP_FORWARD)
				continue;
			if (op->stage == 0 && c->t_in > 0) {
				costmodel_span(tl, 0, TRACE_HOST_IN, op->micro,
				    iter, t, t + c->t_in);
				work[0] += c->t_in;
			}
			if (op->stage == n - 1 && c->t_out > 0 &&
			    costmodel_output_at(c, op->micro))
				out = true;
		}
		for (q = i; q < j; q++) {
			op = &s->ops[q];
			k = op->stage;
			d = costmodel_op_time(c, op);
			start = t + work[k];
			costmodel_span(tl, k, costmodel_trace_kind(op->kind),
			    op->micro, iter, start, start + d);
			work[k] += d;
			if (op->kind == OP_FORWARD && k < n - 1)
				c->links[2 * k] += c->b * c->st[k].act_bytes;
			if (op->kind == OP_BACKWARD && k > 0)
				c->links[2 * k + 1] +=
				    c->b * c->st[k - 1].act_bytes;
		}
		if (out) {
			for (q = i; q < j; q++) {
				op = &s->ops[q];
				if (op->kind != OP_FORWARD ||
				    op->stage != n - 1 ||
				    !costmodel_output_at(c, op->micro))
					continue;
				start = t + work[n - 1];
				costmodel_span(tl, n - 1, TRACE_HOST_OUT,
				    op->micro, iter, start, start + c->t_out);
				work[n - 1] += c->t_out;
			}
		}
		busiest = 0;
		for (k = 0; k < n; k++)
			if (work[k] > busiest)
				busiest = work[k];
		link = 0;
		if (n > 1) {
			for (k = 0; k < 2 * n; k++)
				if (c->links[k] > link)
					link = c->links[k];
			link = link / c->cfg->link_bw + c->cfg->link_sync;
			for (k = 0; k < n; k++)
				costmodel_span(tl, k, TRACE_COPY, -1, iter,
				    t + busiest, t + busiest + link);
		}
		c->copy += link;
		t += busiest + link;
		if (tl != NULL)
			trace_mark(tl, t);
	}
	return (t - t0);
}

/* Run an asynchronous schedule from @t0, op by op; return T_pipe. */
static double
costmodel_async(struct costmodel_ctx *c, struct timeline *tl, double t0,
    int iter)
{
	const struct schedule	*s = c->s;
	const struct sched_op	*op;
	double			 free_at[COSTMODEL_MAX_STAGES], start, end, r;
	double			 span = t0;
	size_t			 at;
	int			 i, k, n = c->n;

	for (k = 0; k < n; k++)
		free_at[k] = t0;
	for (i = 0; i < s->nops; i++) {
		op = &s->ops[i];
		k = op->stage;
		at = (size_t)k * c->m + op->micro;
		start = free_at[k];
		if (op->kind == OP_FORWARD) {
			if (k > 0) {
				r = c->fend[at - c->m] + c->fwd_lat[k - 1];
				if (r > start)
					start = r;
			}
			if (k == 0 && c->t_in > 0) {
				costmodel_span(tl, 0, TRACE_HOST_IN, op->micro,
				    iter, start, start + c->t_in);
				start += c->t_in;
			}
		} else {
			if (c->fend[at] > start)
				start = c->fend[at];
			if (op->kind == OP_BACKWARD && k < n - 1) {
				r = c->bend[at + c->m] + c->bwd_lat[k + 1];
				if (r > start)
					start = r;
			}
		}
		end = start + costmodel_op_time(c, op);
		costmodel_span(tl, k, costmodel_trace_kind(op->kind), op->micro,
		    iter, start, end);
		if (op->kind == OP_FORWARD)
			c->fend[at] = end;
		else if (op->kind == OP_BACKWARD)
			c->bend[at] = end;
		if (op->kind == OP_FORWARD && k == n - 1 && c->t_out > 0 &&
		    costmodel_output_at(c, op->micro)) {
			costmodel_span(tl, k, TRACE_HOST_OUT, op->micro, iter,
			    end, end + c->t_out);
			end += c->t_out;
		}
		free_at[k] = end;
		if (end > span)
			span = end;
	}
	c->copy = 0;
	return (span - t0);
}

/* All-reduce and update from @t0; set their shares, return their time. */
static double
costmodel_outer(const struct costmodel_ctx *c, struct timeline *tl, double t0,
    int iter, double *ar, double *wu)
{
	double	t = t0, ar_max = 0, wu_max = 0;
	int	k;

	*ar = *wu = 0;
	if (c->cfg->outer_serial) {
		/* PopART's Serial outer fragment: IPU after IPU. */
		for (k = 0; k < c->n; k++) {
			costmodel_span(tl, k, TRACE_ALLREDUCE, -1, iter, t,
			    t + c->ar[k]);
			t += c->ar[k];
			costmodel_span(tl, k, TRACE_WEIGHT_UPDATE, -1, iter, t,
			    t + c->wu[k]);
			t += c->wu[k];
			*ar += c->ar[k];
			*wu += c->wu[k];
		}
		return (t - t0);
	}
	for (k = 0; k < c->n; k++) {
		if (c->ar[k] > ar_max)
			ar_max = c->ar[k];
		if (c->wu[k] > wu_max)
			wu_max = c->wu[k];
	}
	for (k = 0; k < c->n; k++) {
		costmodel_span(tl, k, TRACE_ALLREDUCE, -1, iter, t0,
		    t0 + c->ar[k]);
		costmodel_span(tl, k, TRACE_WEIGHT_UPDATE, -1, iter,
		    t0 + ar_max, t0 + ar_max + c->wu[k]);
	}
	*ar = ar_max;
	*wu = wu_max;
	return (ar_max + wu_max);
}

/* The context of one evaluation: each stage's compute, link, all-reduce
 * and update times, and the host transfers. */
static void
costmodel_ctx_init(struct costmodel_ctx *c, const struct ipu_config *cfg,
    const struct schedule *s, const struct stage_cost *stages,
    const struct run_shape *shape)
{
	double	rate, r;
	int	k, n;

	memset(c, 0, sizeof *c);
	c->cfg = cfg;
	c->s = s;
	c->st = stages;
	c->n = n = s->stages;
	c->m = s->micro;
	c->b = shape->micro_batch;
	c->outputs = shape->outputs > 0 ? shape->outputs :
	    s->training ? 1 : s->micro;
	rate = cfg->efficiency * cfg->peak_flops;
	r = shape->replicas;
	for (k = 0; k < n; k++) {
		c->tf[k] = c->b * stages[k].flops / rate +
		    stages[k].layers * cfg->layer_overhead;
		c->tb[k] = cfg->backward_ratio * c->tf[k];
		if (k < n - 1)
			c->fwd_lat[k] = c->b * stages[k].act_bytes /
			    cfg->link_bw + cfg->link_sync;
		if (k > 0)
			c->bwd_lat[k] = c->b * stages[k - 1].act_bytes /
			    cfg->link_bw + cfg->link_sync;
		if (s->training && shape->replicas > 1)
			c->ar[k] = 2 * (r - 1) / r * stages[k].params *
			    cfg->grad_bytes / cfg->ring_bw +
			    2 * (r - 1) * cfg->ring_alpha;
		if (s->training) {
			c->wu[k] = stages[k].params * cfg->update_bytes /
			    cfg->sram_bw;
			if (cfg->offload_optimiser)
				c->wu[k] += 2 * stages[k].params *
				    cfg->state_bytes / cfg->stream_bw;
		}
	}
	if (!shape->synthetic && stages[0].in_bytes > 0)
		c->t_in = c->b * stages[0].in_bytes / cfg->host_bw +
		    cfg->host_latency;
	if (stages[n - 1].out_bytes > 0)
		c->t_out = c->b * stages[n - 1].out_bytes / cfg->host_bw +
		    cfg->host_latency;
}

/* The scratch that the lock-step or the asynchronous walk needs. */
static int
costmodel_ctx_alloc(struct costmodel_ctx *c)
{
	if (c->s->lockstep)
		c->links = calloc(2 * (size_t)c->n, sizeof *c->links);
	else {
		c->fend = calloc((size_t)c->n * c->m, sizeof *c->fend);
		c->bend = calloc((size_t)c->n * c->m, sizeof *c->bend);
	}
	if ((c->s->lockstep && c->links == NULL) ||
	    (!c->s->lockstep && (c->fend == NULL || c->bend == NULL))) {
		free(c->links);
		free(c->fend);
		free(c->bend);
		errno = ENOMEM;
		return (-1);
	}
	return (0);
}

/* Each IPU's busy share of a host call, and the host transfers' time. */
static void
costmodel_busy(const struct costmodel_ctx *c, const struct run_shape *shape,
    struct device_timing *out)
{
	const struct sched_op	*op;
	const struct schedule	*s = c->s;
	double			 busy[COSTMODEL_MAX_STAGES];
	int			 i, k, n = c->n, nout = 0;

	memset(busy, 0, sizeof busy);
	for (i = 0; i < s->nops; i++) {
		op = &s->ops[i];
		busy[op->stage] += costmodel_op_time(c, op);
		if (op->kind == OP_FORWARD && op->stage == 0)
			busy[0] += c->t_in;
		if (op->kind == OP_FORWARD && op->stage == n - 1 &&
		    c->t_out > 0 && costmodel_output_at(c, op->micro)) {
			busy[n - 1] += c->t_out;
			nout++;
		}
	}
	out->host_io = s->micro * c->t_in + nout * c->t_out;
	for (k = 0; k < n; k++)
		out->busy[k] = out->call > 0 ? shape->device_iterations *
		    (busy[k] + c->ar[k] + c->wu[k]) / out->call : 0;
}

/* Trace every weight update of one host call into @tl. */
static void
costmodel_trace(struct costmodel_ctx *c, const struct run_shape *shape,
    const struct device_timing *out, struct timeline *tl)
{
	const struct ipu_config	*cfg = c->cfg;
	double			 t, ar, wu;
	int			 d;

	tl->clock_hz = cfg->clock_hz;
	if (cfg->launch > 0)
		trace_add(tl, TRACE_LANE_HOST, TRACE_HOST_WAIT, -1, -1,
		    0, cfg->launch, "launch");
	for (d = 0; d < shape->device_iterations && tl->dropped == 0; d++) {
		t = cfg->launch + d * out->update;
		t += c->s->lockstep ? costmodel_lockstep(c, tl, t, d) :
		    costmodel_async(c, tl, t, d);
		costmodel_outer(c, tl, t, d, &ar, &wu);
	}
}

/* Time one host call and, if asked, trace it. */
int
costmodel_evaluate(const struct ipu_config *cfg, const struct schedule *s,
    const struct stage_cost *stages, const struct run_shape *shape,
    struct device_timing *out, struct timeline *tl)
{
	struct costmodel_ctx	c;
	double			pipe, ar, wu;
	int			k;

	if (costmodel_check(cfg, s, stages, shape, NULL, 0) == -1) {
		errno = EINVAL;
		return (-1);
	}
	costmodel_ctx_init(&c, cfg, s, stages, shape);
	memset(out, 0, sizeof *out);
	for (k = 0; k < c.n; k++) {
		out->forward[k] = c.tf[k];
		out->backward[k] = s->training ? c.tb[k] : 0;
	}
	if (costmodel_ctx_alloc(&c) == -1)
		return (-1);
	/* One weight update's timing; every update of a call is the same. */
	pipe = s->lockstep ? costmodel_lockstep(&c, NULL, 0, 0) :
	    costmodel_async(&c, NULL, 0, 0);
	out->stages = c.n;
	out->pipe = pipe;
	out->copy = c.copy;
	costmodel_outer(&c, NULL, 0, 0, &ar, &wu);
	out->allreduce = ar;
	out->weight_update = wu;
	out->update = pipe + ar + wu;
	out->launch = cfg->launch;
	out->call = cfg->launch + shape->device_iterations * out->update;
	out->items = c.b * s->micro * shape->replicas *
	    shape->device_iterations;
	out->items_per_s = out->call > 0 ? out->items / out->call : 0;
	costmodel_busy(&c, shape, out);
	if (tl != NULL)
		costmodel_trace(&c, shape, out, tl);
	free(c.links);
	free(c.fend);
	free(c.bend);
	return (0);
}
