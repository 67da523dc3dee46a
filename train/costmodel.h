/* SPDX-License-Identifier: MIT */
/*
 * costmodel.h - how long a GC200-like IPU system takes to run a schedule.
 *
 * The model of reference pipeline-schedules.md section 3: per-stage compute
 * from FLOPs at an efficiency of the fp32 peak plus a fixed cost per layer,
 * lock-step steps that end in inter-IPU copies and a sync, host transfers
 * that block the IPU doing them, one ring all-reduce and one weight update
 * per weight update, D weight updates per host call.  Every figure is a
 * field of struct ipu_config that the command line can override as
 * --ipu key=value.
 *
 * Calibration: the efficient-data-loading tutorial's ClassificationModel
 * (poptorch.inferenceModel, 1 IPU, micro-batch 16, 50 device iterations,
 * synthetic data) printed 34,306.55 items/s on one replica and 136,452.36
 * on four; the defaults below give 34,198 and 136,793 (-0.3 %, +0.25 %).
 */
#ifndef INFEED_TRAIN_COSTMODEL_H
#define INFEED_TRAIN_COSTMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "schedule.h"
#include "trace.h"

#define COSTMODEL_MAX_STAGES	SCHEDULE_MAX_STAGES

struct ipu_config {
	/* Compute. */
	double	peak_flops;	/* FLOP/s per IPU, fp32: 62.5e12 (GC200,
				 * reference 3.1) */
	double	efficiency;	/* share of peak_flops the layers reach:
				 * 0.0128, calibrated on the tutorial */
	double	layer_overhead;	/* s per layer per forward pass: 5e-6,
				 * compute-set syncs and exchanges
				 * (assumption) */
	double	backward_ratio;	/* tB / tF: 2 (ref 3.2) */
	/* Between the IPUs of a replica. */
	double	link_bw;	/* B/s per direction between two IPUs:
				 * 32e9 */
	double	link_sync;	/* s, the sync ending every step: 2e-6 */
	/* Host. */
	double	host_bw;	/* B/s host<->IPU, per IPU (not shared by
				 * replicas): 64e9, PCIe Gen4 x16 (ref 3.1) */
	double	host_latency;	/* s per host transfer: 2e-6 with Poplar's
				 * prefetch (60e-6 without, ref 3.2) */
	double	launch;		/* s of host work per host call (engine.run
				 * from Python, result hand-back): 200e-6
				 * (assumption) */
	/* Weight update. */
	double	ring_bw;	/* B/s of the all-reduce ring: 32e9 */
	double	ring_alpha;	/* s per ring hop: 5e-6 (assumption) */
	double	grad_bytes;	/* bytes per gradient element reduced: 4 */
	double	sram_bw;	/* B/s of In-Processor memory: 47.5e12 */
	double	update_bytes;	/* bytes touched per parameter by the
				 * optimiser: 16 (Adam-like, ref 3.2) */
	double	stream_bw;	/* B/s to Streaming Memory: 16e9 (assumption) */
	double	state_bytes;	/* optimiser state bytes per parameter moved
				 * each way when offloaded: 8 (two fp32
				 * moments) */
	bool	offload_optimiser; /* state in Streaming Memory: false */
	bool	outer_serial;	/* all-reduce and update run IPU after IPU
				 * (PopART's default Serial outer fragment):
				 * true; false = all IPUs at once */
	/* Display. */
	double	clock_hz;	/* IPU clock for the cycles axis: 1.33e9 */
};

/* What one pipeline stage (one IPU) of the model costs. */
struct stage_cost {
	double	flops;		/* forward FLOPs per sample */
	int	layers;		/* layers, each costs layer_overhead per pass */
	double	act_bytes;	/* bytes per sample sent to stage k+1 (its
				 * gradient comes back the same size) */
	double	params;		/* parameters: all-reduced, updated */
	double	in_bytes;	/* host input bytes per sample (stage 0) */
	double	out_bytes;	/* bytes per sample returned to the host (last
				 * stage) */
};

/* How the schedule is driven. */
struct run_shape {
	int	micro_batch;	/* b, samples per micro-batch */
	int	replicas;	/* R */
	int	device_iterations; /* D, weight updates (or inference runs of
				 * M micro-batches) per host call */
	bool	synthetic;	/* no host input at all (enableSyntheticData) */
	int	outputs;	/* outputs returned per weight update and
				 * replica: M (OutputMode All), M/n (EveryN),
				 * 1 (Final, Sum); 0 = PopTorch's default,
				 * Final for training and All for inference */
	bool	training;	/* must match the schedule's */
};

/* The time of one host call and where it goes; seconds unless noted. */
struct device_timing {
	int	stages;
	double	forward[COSTMODEL_MAX_STAGES];	/* tF of a micro-batch */
	double	backward[COSTMODEL_MAX_STAGES];	/* tB of a micro-batch */
	double	pipe;		/* per update: the pipeline's steps, with the
				 * copies and the host I/O they wait for */
	double	copy;		/* per update: inter-IPU copies and syncs
				 * (lock-step schedules; 0 for async ones) */
	double	host_io;	/* per update: host transfers the IPUs do */
	double	allreduce;	/* per update: 0 unless training with R > 1 */
	double	weight_update;	/* per update: 0 for inference */
	double	update;		/* pipe + allreduce + weight_update */
	double	launch;		/* per call */
	double	call;		/* launch + D x update */
	double	items;		/* samples per call: b x M x R x D */
	double	items_per_s;	/* items / call */
	double	busy[COSTMODEL_MAX_STAGES]; /* share of the call each IPU
				 * computes, streams or reduces */
};

/** ipu_config_default() - the GC200-like defaults documented above. */
void ipu_config_default(struct ipu_config *cfg);

/**
 * ipu_config_set() - set the field called @key from @value: a positive
 * finite number (0/1, true/false, yes/no, on/off for the two flags).
 * Returns 0, or -1 with @err saying what was wrong and listing the keys.
 */
int ipu_config_set(struct ipu_config *cfg, const char *key, const char *value,
    char *err, size_t errlen);

/** ipu_config_parse() - ipu_config_set() of a "key=value" argument. */
int ipu_config_parse(struct ipu_config *cfg, const char *arg, char *err,
    size_t errlen);

/**
 * ipu_config_print() - one line per key: name, current value, unit and
 * meaning, each line prefixed with @indent (for --help).
 */
void ipu_config_print(const struct ipu_config *cfg, FILE *f,
    const char *indent);

/** run_shape_default() - b 1, R 1, D 1, real data, default outputs. */
void run_shape_default(struct run_shape *shape, bool training);

/**
 * costmodel_check() - whether @cfg, @stages (s->stages of them) and @shape
 * can be evaluated with @s.  Returns 0, or -1 with @err set.
 */
int costmodel_check(const struct ipu_config *cfg, const struct schedule *s,
    const struct stage_cost *stages,
    const struct run_shape *shape, char *err, size_t errlen);

/**
 * costmodel_evaluate() - the device time of one host call, T_call =
 * launch + D x (pipe + all-reduce + weight update), and its breakdown in
 * @out.  If @tl is not NULL, the spans of that call are appended to it
 * (replica 0's IPU lanes plus the host lane, step boundaries marked,
 * clock_hz set); a full timeline just stops growing.  Returns 0, or -1
 * with errno EINVAL when costmodel_check() refuses, ENOMEM.
 */
int costmodel_evaluate(const struct ipu_config *cfg, const struct schedule *s,
    const struct stage_cost *stages,
    const struct run_shape *shape, struct device_timing *out,
    struct timeline *tl);

/**
 * costmodel_unit_config() - a configuration in which a stage whose
 * stage_cost is { .flops = 1, .layers = 0 } at micro-batch 1 takes 1 µs
 * forward and @tb µs backward, and nothing else costs time: the unit
 * schedule of schedule_unit_makespan() in µs, for tracing it.
 */
void costmodel_unit_config(struct ipu_config *cfg, double tb);

#endif
