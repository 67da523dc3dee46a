/* SPDX-License-Identifier: MIT */
/*
 * model-speed: samples per second of infeed-train's networks on this CPU.
 *
 *   build/benchmarks/model-speed [blas-threads]
 *
 * Times, best of 7 rounds, forward + backward of the pipelining
 * tutorial's network at micro-batch 40 (what a Fashion-MNIST epoch does)
 * and forward, then forward + backward, of the data-loading tutorial's
 * network at micro-batch 16.  With no argument OpenBLAS keeps its own
 * thread count (OPENBLAS_NUM_THREADS or one per core).
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cblas.h>

#include "model.h"

#define ROUNDS	7

static double	now(void);
static double	bench(enum model_kind, int, int, int);

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + ts.tv_nsec * 1e-9);
}

/* Return the best samples/s of @iters passes over @n samples. */
static double
bench(enum model_kind kind, int n, int iters, int backward)
{
	struct model	*m;
	float		*in, *stash, *grad, *dl;
	int32_t		*labels;
	size_t		 insz, i;
	double		 best = 0.0, t0, rate;
	uint32_t	 x = 1;
	int		 nl, it, r;

	if ((m = model_new(kind, 1)) == NULL || model_reserve(m, n) == -1) {
		fprintf(stderr, "model-speed: out of memory\n");
		exit(1);
	}
	nl = m->nlayers;
	insz = (size_t)n * shape_size(m->input);
	in = malloc(insz * sizeof *in);
	stash = malloc(model_stash_floats(m, 0, nl, n) * sizeof *stash);
	grad = calloc(m->nparams, sizeof *grad);
	dl = malloc((size_t)n * m->classes * sizeof *dl);
	labels = malloc(n * sizeof *labels);
	if (in == NULL || stash == NULL || grad == NULL || dl == NULL ||
	    labels == NULL) {
		fprintf(stderr, "model-speed: out of memory\n");
		exit(1);
	}
	for (i = 0; i < insz; i++) {
		x = x * 1664525u + 1013904223u;
		in[i] = (float)(x >> 8) * 0x1p-24f;
	}
	for (r = 0; r < n; r++)
		labels[r] = r % m->classes;
	model_forward(m, 0, nl, n, in, stash);
	for (r = 0; r < ROUNDS; r++) {
		t0 = now();
		for (it = 0; it < iters; it++) {
			model_forward(m, 0, nl, n, in, stash);
			if (!backward)
				continue;
			loss_cross_entropy(model_output(m, 0, nl, n, stash),
			    labels, n, m->classes, dl, NULL);
			model_backward(m, 0, nl, n, in, stash, dl, NULL, grad);
		}
		rate = (double)iters * n / (now() - t0);
		if (rate > best)
			best = rate;
	}
	free(in);
	free(stash);
	free(grad);
	free(dl);
	free(labels);
	model_free(m);
	return (best);
}

int
main(int argc, char **argv)
{
	double	r;

	if (argc > 1)
		openblas_set_num_threads(atoi(argv[1]));
	printf("BLAS threads: %d\n", openblas_get_num_threads());
	r = bench(MODEL_PIPELINE_TUTORIAL, 40, 100, 1);
	printf("pipeline-tutorial    n=40 forward+backward: %8.0f samples/s "
	    "(180,000 samples: %.1f s)\n", r, 180000 / r);
	r = bench(MODEL_DATALOADING_TUTORIAL, 16, 8, 0);
	printf("dataloading-tutorial n=16 forward:          %8.0f samples/s\n",
	    r);
	r = bench(MODEL_DATALOADING_TUTORIAL, 16, 4, 1);
	printf("dataloading-tutorial n=16 forward+backward: %8.0f samples/s\n",
	    r);
	return (0);
}
