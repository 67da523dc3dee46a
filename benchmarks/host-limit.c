/* SPDX-License-Identifier: MIT */
/*
 * The seed's experiment's real-data phase without infeed: what this host
 * can do at all for it, to judge benchmarks/dataloading's real/synthetic
 * against (issue 25: "a limit must be a limit").
 *
 * The same work, in one process: a ring of --slots slots (3) of the
 * step's rows in shared memory; 2 threads (the workers) fill each step,
 * half each, with the workers' own copy (common/copy.h) from 10000
 * random [1,128,128] float32 samples in shared memory, as soon as its
 * slot is free; a third thread (the trainer) takes each step as soon as
 * it is whole, reads every byte with infeed-train's host_transfer(),
 * frees the slot, and waits out the device's time from when the step was
 * ready, as `infeed-train dataloading` does.  --steps steps (36) after
 * one warm-up step, --rounds rounds (5); it prints each round's items/s
 * and real/synthetic (the device's rate: --device-items-per-s, the cost
 * model's 136793 for R 4), and their medians.
 *
 *   build/benchmarks/host-limit [--replicas R] [--slots S] [--steps N]
 *       [--rounds N] [--device-items-per-s X]
 */

#include <sys/mman.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy.h"
#include "source.h"

#define ROW_BYTES	(128 * 128 * 4)
#define SAMPLES		10000
#define WORKERS		2
#define MAX_ROUNDS	32

struct hl {
	uint8_t		*src, *ring;
	uint32_t	*idx;		/* [steps + 1][rows] */
	unsigned	 rows, slots, steps;
	unsigned	 done[1024];	/* workers done with step k */
	unsigned	 taken;		/* steps the trainer freed */
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
};

struct hl_arg {
	struct hl	*h;
	unsigned	 w;		/* which half of each step */
};

static double
now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
}

/* A worker: its half of every step, once the step's slot is free. */
static void *
hl_worker(void *arg)
{
	struct hl	*h = ((struct hl_arg *)arg)->h;
	unsigned	 w = ((struct hl_arg *)arg)->w;
	unsigned	 k, r, lo, hi;
	uint8_t		*slot;
	bool		 stream = copy_streams(ROW_BYTES, h->rows);

	lo = w * h->rows / WORKERS;
	hi = (w + 1) * h->rows / WORKERS;
	for (k = 0; k <= h->steps; k++) {
		pthread_mutex_lock(&h->mu);
		while (k - h->taken >= h->slots)
			pthread_cond_wait(&h->cv, &h->mu);
		pthread_mutex_unlock(&h->mu);
		slot = h->ring + (size_t)(k % h->slots) * h->rows * ROW_BYTES;
		for (r = lo; r < hi; r++)
			copy_row(slot + (size_t)r * ROW_BYTES, h->src +
			    (size_t)h->idx[(size_t)k * h->rows + r] * ROW_BYTES,
			    ROW_BYTES, stream);
		copy_fence();
		pthread_mutex_lock(&h->mu);
		h->done[k]++;
		pthread_cond_broadcast(&h->cv);
		pthread_mutex_unlock(&h->mu);
	}
	return (NULL);
}

/* One round: the trainer's items/s over the steps after the first. */
static double
hl_round(struct hl *h, double device_s)
{
	struct hl_arg	 args[WORKERS];
	pthread_t	 th[WORKERS];
	struct timespec	 ts;
	double		 t0 = 0, ready, left;
	uint64_t	 sink = 0;
	unsigned	 k, w;

	memset(h->done, 0, sizeof(h->done));
	h->taken = 0;
	for (w = 0; w < WORKERS; w++) {
		args[w].h = h;
		args[w].w = w;
		pthread_create(&th[w], NULL, hl_worker, &args[w]);
	}
	for (k = 0; k <= h->steps; k++) {
		pthread_mutex_lock(&h->mu);
		while (h->done[k] < WORKERS)
			pthread_cond_wait(&h->cv, &h->mu);
		pthread_mutex_unlock(&h->mu);
		ready = now_s();
		if (k == 1)
			t0 = ready;
		sink += host_transfer(h->ring + (size_t)(k % h->slots) *
		    h->rows * ROW_BYTES, (size_t)h->rows * ROW_BYTES);
		pthread_mutex_lock(&h->mu);
		h->taken++;
		pthread_cond_broadcast(&h->cv);
		pthread_mutex_unlock(&h->mu);
		while ((left = ready + device_s - now_s()) > 0) {
			ts.tv_sec = (time_t)left;
			ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
			nanosleep(&ts, NULL);
		}
	}
	for (w = 0; w < WORKERS; w++)
		pthread_join(th[w], NULL);
	(void)sink;
	return ((double)h->steps * h->rows / (now_s() - t0));
}

static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return ((x > y) - (x < y));
}

int
main(int argc, char **argv)
{
	struct hl	 h;
	double		 dev = 136793, rate[MAX_ROUNDS];
	unsigned	 replicas = 4, rounds = 5, i;
	size_t		 k;

	memset(&h, 0, sizeof(h));
	h.slots = 3;
	h.steps = 36;
	for (i = 1; i + 1 < (unsigned)argc; i += 2) {
		if (strcmp(argv[i], "--replicas") == 0)
			replicas = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--slots") == 0)
			h.slots = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--steps") == 0)
			h.steps = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--rounds") == 0)
			rounds = (unsigned)atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--device-items-per-s") == 0)
			dev = atof(argv[i + 1]);
		else
			break;
	}
	if (i != (unsigned)argc || replicas < 1 || replicas > 16 ||
	    h.slots < 2 || h.slots > 16 || h.steps < 1 || h.steps > 1000 ||
	    rounds < 1 || rounds > MAX_ROUNDS || !(dev > 0)) {
		fprintf(stderr, "usage: host-limit [--replicas 1-16] [--slots "
		    "2-16] [--steps 1-1000] [--rounds 1-32] "
		    "[--device-items-per-s X]\n");
		return (2);
	}
	h.rows = 800 * replicas;	/* B 16 x DI 50 a replica */
	h.src = mmap(NULL, (size_t)SAMPLES * ROW_BYTES, PROT_READ |
	    PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	h.ring = mmap(NULL, (size_t)h.slots * h.rows * ROW_BYTES, PROT_READ |
	    PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	h.idx = calloc((size_t)(h.steps + 1) * h.rows, sizeof(*h.idx));
	if (h.src == MAP_FAILED || h.ring == MAP_FAILED || h.idx == NULL) {
		fprintf(stderr, "host-limit: out of memory\n");
		return (1);
	}
	memset(h.src, 1, (size_t)SAMPLES * ROW_BYTES);
	memset(h.ring, 2, (size_t)h.slots * h.rows * ROW_BYTES);
	srandom(1);
	for (k = 0; k < (size_t)(h.steps + 1) * h.rows; k++)
		h.idx[k] = (uint32_t)(random() % SAMPLES);
	pthread_mutex_init(&h.mu, NULL);
	pthread_cond_init(&h.cv, NULL);
	printf("the seed's experiment without infeed: R %u (%u rows a step), "
	    "%u slots, 2 worker threads and the trainer, %u steps a round\n",
	    replicas, h.rows, h.slots, h.steps);
	for (i = 0; i < rounds; i++) {
		rate[i] = hl_round(&h, h.rows / dev);
		printf("round %u: %.0f items/s, real/synthetic %.2f\n", i + 1,
		    rate[i], rate[i] / dev);
		fflush(stdout);
	}
	qsort(rate, rounds, sizeof(*rate), cmp_double);
	printf("median: %.0f items/s, real/synthetic %.2f (device %.0f "
	    "items/s)\n", rate[rounds / 2], rate[rounds / 2] / dev, dev);
	return (0);
}
