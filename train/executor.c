/* SPDX-License-Identifier: MIT */
/*
 * executor.c - real forward/backward passes in the order a pipeline
 * schedule runs them, replicas, gradient accumulation and device
 * iterations.  See executor.h for the contract.
 *
 * Replicas run one after another on the host (they are independent until
 * the all-reduce), so buffers for stashed activations and inter-stage
 * gradients exist once per (stage, micro-batch) and are reused by every
 * replica; gradients exist once per replica.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"

struct executor {
	struct executor_options o;
	bool training;
	struct model *model;
	struct schedule sched;
	int l0[EXECUTOR_MAX_STAGES], l1[EXECUTOR_MAX_STAGES];
	int nmicro_sched;               /* micro-batches per schedule run */
	int nbuf;                       /* buffers per stage: M, or 1 */
	float **stash;                  /* [stage * nmicro_sched + m] */
	float **din;                    /* gradient of stage k's input */
	float **dlogits;                /* [m] */
	float **grad;                   /* [replica] */
	struct optimiser *opt;
	struct step_outputs out;
	size_t out_cap_micro, out_cap_rows;
};

/* Defaults of the pipelining tutorial (mnist_pipeline.py). */
void
executor_options_default(struct executor_options *o)
{
	int s;

	memset(o, 0, sizeof(*o));
	o->model = MODEL_PIPELINE_TUTORIAL;
	o->seed = 0;
	o->nstages = 4;
	for (s = 0; s < 4; s++)
		o->stage_first_block[s] = s;
	o->schedule = SCHEDULE_PIPELINED;
	o->recompute = true;
	o->batch_size = 40;
	o->gradient_accumulation = 10;
	o->replicas = 1;
	o->device_iterations = 10;
	o->optimiser = OPTIMISER_ADAMW;
	o->lr = 0.001f;
	o->momentum = 0.9f;
	o->weight_decay = 0.01f;
}

/* Parse "B1+B2,B3,B4" against the blocks of o->model. */
int
executor_stages_parse(struct executor_options *o, const char *spec, char *err,
    size_t errlen)
{
	struct model *m = model_new(o->model, 0);	/* blocks only */
	char *copy, *save = NULL, *stage;
	int next = 0, nstages = 0, rc = -1;

	if (m == NULL || (copy = strdup(spec)) == NULL) {
		snprintf(err, errlen, "out of memory");
		model_free(m);
		return (-1);
	}
	for (stage = strtok_r(copy, ",", &save); stage != NULL;
	    stage = strtok_r(NULL, ",", &save)) {
		char *save2 = NULL, *blk;
		int first = next;

		if (nstages == EXECUTOR_MAX_STAGES)
			goto bad;
		for (blk = strtok_r(stage, "+", &save2); blk != NULL;
		    blk = strtok_r(NULL, "+", &save2)) {
			if (model_block_find(m, blk) != next)
				goto bad;
			next++;
		}
		if (next == first)
			goto bad;
		o->stage_first_block[nstages++] = first;
	}
	if (next != m->nblocks)
		goto bad;
	o->nstages = nstages;
	rc = 0;
	goto out;
bad:
	{
		char names[64] = "";
		int b;

		for (b = 0; b < m->nblocks; b++) {
			strncat(names, m->blocks[b].name,
			    sizeof(names) - strlen(names) - 2);
			if (b + 1 < m->nblocks)
				strcat(names, ",");
		}
		snprintf(err, errlen,
		    "bad stage map '%s': give one comma-separated entry "
		    "per IPU with the blocks in order joined by '+', "
		    "each block once (blocks of %s: %s), e.g. '%s'",
		    spec, m->name, names, "B1+B2,B3,B4");
	}
out:
	free(copy);
	model_free(m);
	return (rc);
}

/* Check the numbers a user gives before anything is allocated. */
static int
options_check(const struct executor_options *o, char *err, size_t errlen)
{
	size_t i;

	static const struct { const char *name; int max; } lim[] = {
		{ "batch size", 1 << 16 },
		{ "gradient accumulation", 1 << 16 },
		{ "replicas", 64 },
		{ "device iterations", 1 << 20 },
	};
	const int v[] = { o->batch_size, o->gradient_accumulation,
			  o->replicas, o->device_iterations };

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (v[i] < 1 || v[i] > lim[i].max) {
			snprintf(err, errlen, "%s must be 1..%d, got %d",
			    lim[i].name, lim[i].max, v[i]);
			return (-1);
		}
	if ((double)o->batch_size * o->gradient_accumulation * o->replicas *
	    o->device_iterations > 1e7) {
		snprintf(err, errlen, "a step of %d x %d x %d x %d samples is "
		    "too large; keep batch size x device iterations x "
		    "replicas x gradient accumulation under 10 million",
		    o->batch_size, o->device_iterations, o->replicas,
		    o->gradient_accumulation);
		return (-1);
	}
	if (!(o->lr > 0 && isfinite(o->lr))) {
		snprintf(err, errlen, "learning rate must be a positive number");
		return (-1);
	}
	return (0);
}

/* Allocate an array of @n buffers of @floats each. */
static float **
buffers_new(size_t n, size_t floats)
{
	float **b = calloc(n ? n : 1, sizeof(*b));
	size_t i;

	if (b == NULL)
		return (NULL);
	for (i = 0; i < n; i++)
		if ((b[i] = calloc(floats ? floats : 1, sizeof(float))) ==
		    NULL) {
			while (i--)
				free(b[i]);
			free(b);
			return (NULL);
		}
	return (b);
}

/* Free @n buffers and their array. */
static void
buffers_free(float **b, size_t n)
{
	size_t i;

	if (b == NULL)
		return;
	for (i = 0; i < n; i++)
		free(b[i]);
	free(b);
}

/* Build model, schedule and buffers. */
struct executor *
executor_new(const struct executor_options *o, bool training, char *err,
    size_t errlen)
{
	struct executor *x;
	int s;
	int m;
	int N = o->nstages, M, B = o->batch_size;

	if (options_check(o, err, errlen) < 0)
		return (NULL);
	if ((x = calloc(1, sizeof(*x))) == NULL)
		goto oom;
	x->o = *o;
	x->training = training;
	if ((x->model = model_new_shaped(o->model, o->input.c ? &o->input :
	    NULL, o->classes, o->seed)) == NULL)
		goto oom;
	if (N < 1 || N > x->model->nblocks) {
		snprintf(err, errlen, "%s has %d blocks, so it runs on 1 to %d "
		    "IPUs; got %d", x->model->name, x->model->nblocks,
		    x->model->nblocks, N);
		goto fail;
	}
	for (s = 0; s < N; s++) {
		int b0 = o->stage_first_block[s];
		int b1 = s + 1 < N ? o->stage_first_block[s + 1] :
		    x->model->nblocks;

		if (b0 < 0 || b1 <= b0 || b1 > x->model->nblocks ||
		    (s == 0 && b0 != 0)) {
			snprintf(err, errlen, "stage map does not cover the "
			    "blocks of %s in order", x->model->name);
			goto fail;
		}
		x->l0[s] = x->model->blocks[b0].first;
		x->l1[s] = x->model->blocks[b1 - 1].first +
		    x->model->blocks[b1 - 1].count;
	}

	/* Training pipelines over the accumulation steps; inference over
	 * the device iterations (GA folded into DI, as poptorch does). */
	M = training ? o->gradient_accumulation :
	    o->gradient_accumulation * o->device_iterations;
	x->nmicro_sched = M;
	x->nbuf = training ? M : 1;
	if (schedule_build(&x->sched, o->schedule, N, M, training,
	    training && o->recompute && N > 1, err, errlen) < 0)
		goto fail;

	if ((x->stash = calloc((size_t)N * x->nbuf, sizeof(float *))) ==
	    NULL ||
	    (x->din = calloc((size_t)N * x->nbuf, sizeof(float *))) == NULL)
		goto oom;
	for (s = 0; s < N; s++)
		for (m = 0; m < x->nbuf; m++) {
			size_t i = (size_t)s * x->nbuf + m;
			size_t in = shape_size(x->model->layers[x->l0[s]].in);

			x->stash[i] = calloc(model_stash_floats(x->model,
			    x->l0[s], x->l1[s], B),
			    sizeof(float));
			if (x->stash[i] == NULL)
				goto oom;
			if (training && s > 0 &&
			    (x->din[i] = calloc(in * B, sizeof(float))) ==
			    NULL)
				goto oom;
		}
	if (training) {
		x->dlogits = buffers_new(M, (size_t)B * x->model->classes);
		x->grad = buffers_new(o->replicas, x->model->nparams);
		x->opt = optimiser_new(o->optimiser, o->lr, x->model->nparams);
		if (x->dlogits == NULL || x->grad == NULL || x->opt == NULL)
			goto oom;
		x->opt->momentum = o->momentum;
		x->opt->weight_decay = o->weight_decay;
	}
	return (x);
oom:
	snprintf(err, errlen, "out of memory building the simulated IPUs");
fail:
	executor_free(x);
	return (NULL);
}

/* Set the optimiser's learning rate and betas for the next step. */
void
executor_set_optimiser(struct executor *x, const struct lr_point *p)
{
	if (x->opt == NULL)
		return;
	x->opt->lr = p->lr;
	if (p->has_momentum) {
		if (x->opt->kind == OPTIMISER_ADAMW)
			x->opt->beta1 = p->momentum;
		else
			x->opt->momentum = p->momentum;
	}
}

/* Free an executor; NULL is a no-op. */
void
executor_free(struct executor *x)
{
	size_t n;

	if (x == NULL)
		return;
	n = (size_t)x->o.nstages * x->nbuf;
	buffers_free(x->stash, n);
	buffers_free(x->din, n);
	buffers_free(x->dlogits, x->nbuf);
	buffers_free(x->grad, x->o.replicas);
	optimiser_free(x->opt);
	schedule_free(&x->sched);
	model_free(x->model);
	free(x->out.losses);
	free(x->out.correct);
	free(x->out.micro_rows);
	free(x->out.logits);
	free(x);
}

/* The executor's model. */
struct model *
executor_model(struct executor *x)
{
	return (x->model);
}

/* The executor's pipeline schedule. */
const struct schedule *
executor_schedule(const struct executor *x)
{
	return (&x->sched);
}

/* Rows of one step: the combined batch size. */
size_t
executor_step_rows(const struct executor *x)
{
	return ((size_t)x->o.batch_size * x->o.gradient_accumulation *
	    x->o.replicas * x->o.device_iterations);
}

/* Reduce-scatter then all-gather: chunk c travels round the ring. */
void
ring_allreduce_mean(float **bufs, int r, size_t n)
{
	size_t chunk = (n + r - 1) / r;
	int round;
	int i;

	if (r < 2)
		return;
	/* Reduce-scatter: after r-1 rounds replica i owns the full sum of
	 * chunk (i + 1) % r. */
	for (round = 0; round < r - 1; round++)
		for (i = 0; i < r; i++) {
			int c = ((i - round) % r + r) % r;
			size_t lo = c * chunk, hi = lo + chunk;
			float *dst = bufs[(i + 1) % r];
			const float *src = bufs[i];
			size_t j;

			if (hi > n)
				hi = n;
			for (j = lo; j < hi; j++)
				dst[j] += src[j];
		}
	for (i = 0; i < r; i++) {
		int c = (i + 1) % r;
		size_t lo = c * chunk, hi = lo + chunk;
		size_t j;

		if (hi > n)
			hi = n;
		for (j = lo; j < hi; j++)
			bufs[i][j] /= r;
	}
	/* All-gather: pass the finished chunks round the ring. */
	for (round = 0; round < r - 1; round++)
		for (i = 0; i < r; i++) {
			int c = ((i + 1 - round) % r + r) % r;
			size_t lo = c * chunk, hi = lo + chunk;

			if (hi > n)
				hi = n;
			if (lo < hi)
				memcpy(bufs[(i + 1) % r] + lo, bufs[i] + lo,
				    (hi - lo) * sizeof(float));
		}
}

/* Make room for a call's outputs. */
static int
outputs_reserve(struct executor *x, size_t nmicro, size_t rows)
{
	struct step_outputs *out = &x->out;

	if (nmicro > x->out_cap_micro) {
		float *l = realloc(out->losses, nmicro * sizeof(float));
		int *c, *r;

		if (l == NULL)
			return (-1);
		out->losses = l;
		if ((c = realloc(out->correct, nmicro * sizeof(int))) == NULL)
			return (-1);
		out->correct = c;
		if ((r = realloc(out->micro_rows, nmicro * sizeof(int))) ==
		    NULL)
			return (-1);
		out->micro_rows = r;
		x->out_cap_micro = nmicro;
	}
	if (rows > x->out_cap_rows) {
		float *g = realloc(out->logits, rows * x->model->classes *
		    sizeof(float));

		if (g == NULL)
			return (-1);
		out->logits = g;
		x->out_cap_rows = rows;
	}
	return (0);
}

/* Record micro-batch @idx's loss, right answers and logits. */
static void
record(struct executor *x, size_t idx, const float *logits,
    const int32_t *labels, int n, size_t row0)
{
	struct step_outputs *out = &x->out;
	int classes = x->model->classes, right = 0;
	float loss = loss_cross_entropy(logits, labels, n, classes, NULL,
	    &right);

	out->losses[idx] = loss;
	out->correct[idx] = right;
	out->micro_rows[idx] = n;
	out->loss_sum += (double)loss * n;
	out->right += right;
	memcpy(out->logits + row0 * classes, logits,
	    (size_t)n * classes * sizeof(float));
}

/* One replica's run of the training schedule over M micro-batches. */
static void
train_replica(struct executor *x, int r, int iter, const float *data,
    const int32_t *labels)
{
	const struct executor_options *o = &x->o;
	int i;
	int N = o->nstages, M = o->gradient_accumulation, B = o->batch_size;
	int classes = x->model->classes;
	size_t sample = shape_size(x->model->input);

	for (i = 0; i < x->sched.nops; i++) {
		const struct sched_op *op = &x->sched.ops[i];
		int k = op->stage, m = op->micro;
		size_t row0 = ((size_t)(iter * M + m) * o->replicas + r) * B;
		float *stash = x->stash[(size_t)k * M + m];
		const float *in = k == 0 ? data + row0 * sample :
		    model_output(x->model, x->l0[k - 1], x->l1[k - 1], B,
		    x->stash[(size_t)(k - 1) * M + m]);

		switch (op->kind) {
		case OP_FORWARD:
		case OP_RECOMPUTE:
			model_forward(x->model, x->l0[k], x->l1[k], B, in,
			    stash);
			if (k == N - 1 && op->kind == OP_FORWARD) {
				/* The loss is part of the last stage; scale
				 * for the mean over accumulation steps. */
				float *logits = model_output(x->model,
				    x->l0[k], x->l1[k], B, stash);
				float *dl = x->dlogits[m];
				size_t idx = ((size_t)iter * M + m) *
				    o->replicas + r;
				size_t j;

				loss_cross_entropy(logits, labels + row0, B,
				    classes, dl, NULL);
				for (j = 0; j < (size_t)B * classes; j++)
					dl[j] /= M;
				record(x, idx, logits, labels + row0, B, row0);
			}
			break;
		case OP_BACKWARD:
			model_backward(x->model, x->l0[k], x->l1[k], B, in,
			    stash, k == N - 1 ? x->dlogits[m] :
			    x->din[(size_t)(k + 1) * M + m],
			    k > 0 ? x->din[(size_t)k * M + m] : NULL, x->grad[r]);
			break;
		}
	}
}

/* Forward-only over the micro-batches of a (possibly short) step. */
static void
infer(struct executor *x, const float *data, const int32_t *labels, size_t rows)
{
	const struct executor_options *o = &x->o;
	size_t row0;
	int N = o->nstages, B = o->batch_size;
	size_t sample = shape_size(x->model->input);
	size_t idx = 0;

	for (row0 = 0; row0 < rows; row0 += B, idx++) {
		int n = rows - row0 < (size_t)B ? (int)(rows - row0) : B;
		const float *in = data + row0 * sample;
		int k;

		for (k = 0; k < N; k++) {
			/* nbuf is 1 when not training */
			model_forward(x->model, x->l0[k], x->l1[k], n, in,
			    x->stash[k]);
			in = model_output(x->model, x->l0[k], x->l1[k], n,
			    x->stash[k]);
		}
		record(x, idx, in, labels + row0, n, row0);
	}
}

/* One host call. */
int
executor_run(struct executor *x, const float *data, const int32_t *labels,
    size_t rows, struct step_outputs *out, char *err, size_t errlen)
{
	const struct executor_options *o = &x->o;
	size_t full = executor_step_rows(x), nmicro;
	size_t i;

	if (rows == 0 || rows > full || (x->training && rows != full)) {
		snprintf(err, errlen, "a %s step needs %s%zu rows (batch "
		    "size x device iterations x replicas x gradient "
		    "accumulation), got %zu",
		    x->training ? "training" : "inference",
		    x->training ? "exactly " : "1 to ", full, rows);
		return (-1);
	}
	for (i = 0; i < rows; i++)
		if (labels[i] < 0 || labels[i] >= x->model->classes) {
			snprintf(err, errlen, "row %zu of the step has label "
			    "%d, but %s has classes 0..%d", i, labels[i],
			    x->model->name, x->model->classes - 1);
			return (-1);
		}
	nmicro = (rows + o->batch_size - 1) / o->batch_size;
	if (outputs_reserve(x, nmicro, rows) < 0) {
		snprintf(err, errlen, "out of memory for the step's outputs");
		return (-1);
	}
	x->out.nmicro = nmicro;
	x->out.rows = rows;
	x->out.loss_sum = 0;
	x->out.right = 0;

	if (!x->training) {
		infer(x, data, labels, rows);
	} else {
		int it;

		for (it = 0; it < o->device_iterations; it++) {
			int r;

			for (r = 0; r < o->replicas; r++) {
				memset(x->grad[r], 0, x->model->nparams *
				    sizeof(float));
				train_replica(x, r, it, data, labels);
			}
			ring_allreduce_mean(x->grad, o->replicas,
			    x->model->nparams);
			optimiser_step(x->opt, x->model->params, x->grad[0]);
		}
	}
	*out = x->out;
	return (0);
}
