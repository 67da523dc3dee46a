/* SPDX-License-Identifier: MIT */
/*
 * trace.h - an execution timeline of a simulated (or real) IPU run, written
 * as Chrome/Perfetto trace-event JSON or as a PopVision-like SVG.
 *
 * A timeline is a bounded list of spans, each on a lane: IPU 0..N-1 of a
 * replica, or the host.  It never grows past the cap given to trace_new();
 * spans beyond it are counted in @dropped and not stored, so a trace of a
 * long run stays bounded in memory and on disk.  Reference
 * pipeline-schedules.md, section 4.
 */
#ifndef INFEED_TRAIN_TRACE_H
#define INFEED_TRAIN_TRACE_H

#include <stddef.h>

#define TRACE_LANE_HOST		(-1)	/* the host: loader, launch, outfeed */
#define TRACE_DEFAULT_SPANS	200000	/* cap when trace_new() is given 0 */
#define TRACE_MAX_IPUS		64	/* lanes per replica */
#define TRACE_LABEL_MAX		32

enum trace_kind {
	TRACE_FORWARD,		/* F(m), green */
	TRACE_BACKWARD,		/* B(m), red */
	TRACE_RECOMPUTE,	/* R(m), orange */
	TRACE_COPY,		/* inter-IPU copy + sync ending a step, blue */
	TRACE_HOST_IN,		/* host -> IPU StreamCopy, light orange */
	TRACE_HOST_OUT,		/* IPU -> host StreamCopy, light orange */
	TRACE_ALLREDUCE,	/* cross-replica gradient all-reduce, cyan */
	TRACE_WEIGHT_UPDATE,	/* optimiser step, purple */
	TRACE_HOST_WAIT,	/* host launching or waiting for data, grey */
	TRACE_NKINDS
};

struct trace_span {
	int		 replica;	/* Perfetto pid */
	int		 lane;		/* IPU 0..N-1 or TRACE_LANE_HOST */
	enum trace_kind	 kind;
	int		 micro;		/* micro-batch, -1 if none */
	int		 iteration;	/* device iteration, -1 if none */
	double		 start, end;	/* seconds since the trace began */
	char		 label[TRACE_LABEL_MAX]; /* optional, "" = from kind */
};

struct timeline {
	int			 nipus;		/* IPU lanes per replica */
	double			 clock_hz;	/* cycles scale, 0 = none */
	size_t			 nspans, cap, max_spans;
	size_t			 dropped;	/* spans refused once full */
	struct trace_span	*spans;
	size_t			 nmarks, cap_marks, max_marks;
	double			*marks;		/* step boundaries, seconds */
};

/**
 * trace_new() - an empty timeline for @nipus IPU lanes (1..TRACE_MAX_IPUS)
 * plus the host lane, holding at most @max_spans spans (0: the default)
 * and as many step marks.  NULL on a bad argument or no memory.
 */
struct timeline *trace_new(int nipus, size_t max_spans);
void trace_free(struct timeline *tl);

/** trace_clear() - forget every span and mark, keep the settings. */
void trace_clear(struct timeline *tl);

/** trace_kind_name() - "forward", "backward", ... "host-wait". */
const char *trace_kind_name(enum trace_kind kind);

/**
 * trace_append() - copy @span into the timeline.  Returns 0, or -1 if the
 * span is malformed (lane out of range, end before start, not finite) or
 * the timeline is full (then @dropped counts it).
 */
int trace_append(struct timeline *tl, const struct trace_span *span);

/**
 * trace_add() - trace_append() of a replica-0 span; @label may be NULL.
 */
int trace_add(struct timeline *tl, int lane, enum trace_kind kind, int micro,
    int iteration, double start, double end, const char *label);

/** trace_mark() - record a lock-step boundary at @t seconds; -1 if full. */
int trace_mark(struct timeline *tl, double t);

/** trace_end() - the latest end of any span, 0 for an empty timeline. */
double trace_end(const struct timeline *tl);

/**
 * trace_write_json() - write @tl to @path as trace-event JSON: one
 * "ph":"X" event per span (ts and dur in µs, pid = replica, tid = lane,
 * the host lane being tid nipus) and "thread_name" metadata naming the
 * lanes "IPU 0".. and "host".  Returns 0, or -1 with @err set.
 */
int trace_write_json(const struct timeline *tl, const char *path,
    char *err, size_t errlen);

/**
 * trace_write_svg() - write replica 0 of @tl to @path as a self-contained
 * SVG execution trace: a lane per IPU and one for the host, coloured
 * blocks labelled with their micro-batch when wide enough, step
 * boundaries, a time axis in µs with a cycles scale when clock_hz is set,
 * and a legend.  Returns 0, or -1 with @err set.
 */
int trace_write_svg(const struct timeline *tl, const char *path,
    char *err, size_t errlen);

#endif
