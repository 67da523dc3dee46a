/* SPDX-License-Identifier: MIT */
/*
 * device.c - the cost model applied to an executor's configuration.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "device.h"

/* Per-stage costs from the layers each IPU runs. */
static void
stage_costs(struct device *d, const struct executor_options *o,
    const struct model *m)
{
	int k;

	for (k = 0; k < o->nstages; k++) {
		struct stage_cost *c = &d->stages[k];
		int b0 = o->stage_first_block[k];
		int b1 = k + 1 < o->nstages ? o->stage_first_block[k + 1] :
		    m->nblocks;
		int l0 = m->blocks[b0].first;
		int l1 = m->blocks[b1 - 1].first + m->blocks[b1 - 1].count;
		int l;

		memset(c, 0, sizeof(*c));
		for (l = l0; l < l1; l++) {
			c->flops += m->layers[l].fwd_flops;
			c->params += m->layers[l].nparams;
		}
		c->layers = l1 - l0;
		if (k + 1 < o->nstages)
			c->act_bytes = shape_size(m->layers[l1 - 1].out) *
			    sizeof(float);
		else
			c->out_bytes = (m->classes + 1) * sizeof(float);
		if (k == 0)
			c->in_bytes = shape_size(m->input) * sizeof(float);
	}
}

/* Model the simulated IPU system that runs @o's schedule. */
int
device_setup(struct device *d, const struct ipu_config *ipu,
    const struct executor_options *o, const struct model *m,
    const struct schedule *sched, bool training, bool synthetic,
    const struct output_spec *out, char *err, size_t errlen)
{
	memset(d, 0, sizeof(*d));
	d->ipu = *ipu;
	d->sched = sched;
	stage_costs(d, o, m);
	run_shape_default(&d->shape, training);
	d->shape.micro_batch = o->batch_size;
	d->shape.replicas = o->replicas;
	/* Inference pipelines over GA x DI micro-batches in one run. */
	d->shape.device_iterations = training ? o->device_iterations : 1;
	d->shape.synthetic = synthetic;
	if (out != NULL && training) {
		int M = o->gradient_accumulation;

		d->shape.outputs = out->mode == OUTPUT_ALL ? M :
				   out->mode == OUTPUT_EVERY_N ?
				       (M / out->every > 0 ? M / out->every : 1) : 1;
	}
	if (costmodel_check(&d->ipu, sched, d->stages, &d->shape, err,
	    errlen) < 0)
		return (-1);
	if (costmodel_evaluate(&d->ipu, sched, d->stages, &d->shape,
	    &d->timing, NULL) < 0) {
		snprintf(err, errlen, "the cost model failed: %s",
		    strerror(errno));
		return (-1);
	}
	return (0);
}

/* Modelled seconds of one host call (one step). */
double
device_call_seconds(const struct device *d)
{
	return (d->timing.call);
}

/* Sleep until @t on the monotonic clock (clock_now_s()). */
void
device_wait_until(double t)
{
	struct timespec ts;

	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	    EINTR)
		;
}

/* Trace one host call of @shape into a new timeline, after the host's
 * measured wait for the step's data. */
static struct timeline *
trace_call(const struct device *d, const struct run_shape *shape,
    double host_wait, char *err, size_t errlen)
{
	struct timeline *tl = trace_new(d->sched->stages, 0);
	struct device_timing t;
	size_t i;

	if (tl == NULL) {
		snprintf(err, errlen, "out of memory for the trace");
		return (NULL);
	}
	if (host_wait > 0)
		trace_add(tl, TRACE_LANE_HOST, TRACE_HOST_WAIT, -1, -1, 0,
		    host_wait, "waiting for infeedd");
	if (costmodel_evaluate(&d->ipu, d->sched, d->stages, shape, &t,
	    tl) < 0) {
		snprintf(err, errlen, "the cost model failed: %s",
		    strerror(errno));
		trace_free(tl);
		return (NULL);
	}
	for (i = host_wait > 0; host_wait > 0 && i < tl->nspans;
	    i++) {
		tl->spans[i].start += host_wait;
		tl->spans[i].end += host_wait;
	}
	for (i = 0; host_wait > 0 && i < tl->nmarks; i++)
		tl->marks[i] += host_wait;
	return (tl);
}

/* Write the modelled execution trace of one step to @dir. */
int
device_profile(const struct device *d, const char *dir, const char *name,
    double host_wait, char *err, size_t errlen)
{
	struct run_shape one = d->shape;
	struct timeline *tl;
	char path[4096];
	int rc;

	if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create profile directory %s: %s",
		    dir, strerror(errno));
		return (-1);
	}
	/* The trace holds the whole host call; the picture its first
	 * device iteration, where the schedule can still be read. */
	if ((tl = trace_call(d, &d->shape, host_wait, err, errlen)) == NULL)
		return (-1);
	snprintf(path, sizeof(path), "%s/%s.json", dir, name);
	rc = trace_write_json(tl, path, err, errlen);
	trace_free(tl);
	if (rc < 0)
		return (-1);
	one.device_iterations = 1;
	if ((tl = trace_call(d, &one, host_wait, err, errlen)) == NULL)
		return (-1);
	snprintf(path, sizeof(path), "%s/%s.svg", dir, name);
	rc = trace_write_svg(tl, path, err, errlen);
	trace_free(tl);
	return (rc);
}
