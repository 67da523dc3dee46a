/* SPDX-License-Identifier: MIT */
/*
 * c-loader: the C client's side of benchmarks/python-loader.  Attaches to
 * a dataset with the tutorial's options, takes every step of some epochs,
 * reads every byte of each step once (a sum over 8-byte words, as numpy's
 * sum in the Python round does) and prints one JSON line: items per
 * second and the median time per step.
 *
 *	c-loader SOCKET DATASET BATCH DEVICE_ITERATIONS EPOCHS
 *	    [ready|ready-cow|callgrind|cow]
 *
 * With "ready" the steps are not read, and each Next is sent 20 ms after
 * the last step was released, when the ring is full again: the median
 * time of Next and Release is then the client's own cost per step, and
 * ready_cpu_median_s its CPU time (this thread's), which a busy machine's
 * preemption does not inflate; ready_cpu_mean_s is their mean, which
 * counts the work that only some steps do; ready_next_cpu_median_s is the
 * part up to Next's return (the rest is the Release).  "callgrind" is "ready" with each step's
 * Next and Release between callgrind-marks.c's marks, for a run under
 * callgrind (benchmarks/python-loader --callgrind).  "ready-cow" is
 * "ready" on a copy_on_write ring, as Python's default maps it: the
 * restore of the slots given back is in its steps' CPU (issue 35).
 * "cow" reads every step as the default does, from a copy_on_write ring:
 * Python's default round, like for like.  The ready modes also print the
 * page faults and context switches of their steps (getrusage, read
 * outside the timed part), a step.
 */

#include <sys/resource.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infeed.h"

#ifdef HAVE_CALLGRIND_MARKS
void	callgrind_caches_empty(void);
void	callgrind_step_begin(void);
void	callgrind_step_split(void);
void	callgrind_step_end(int);
#endif

/* Seconds on the monotonic clock. */
static double
now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

/* Seconds of this thread's CPU time. */
static double
cpu_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

/* A sum over the 8-byte words of @len bytes (every byte read once). */
static uint64_t
touch(const void *p, size_t len)
{
	const uint64_t	*w = p;
	uint64_t	 a = 0, b = 0, c = 0, d = 0;
	size_t		 i, n = len / 8;

	for (i = 0; i + 4 <= n; i += 4) {
		a += w[i];
		b += w[i + 1];
		c += w[i + 2];
		d += w[i + 3];
	}
	for (; i < n; i++)
		a += w[i];
	return (a + b + c + d);
}

/* This thread's minor faults and context switches (both kinds) so far. */
static void
usage_now(long *faults, long *switches)
{
	struct rusage	ru;

	getrusage(RUSAGE_THREAD, &ru);
	*faults = ru.ru_minflt;
	*switches = ru.ru_nvcsw + ru.ru_nivcsw;
}

static int
cmp_double(const void *x, const void *y)
{
	double	a = *(const double *)x, b = *(const double *)y;

	return ((a > b) - (a < b));
}

int
main(int argc, char **argv)
{
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_step		 st;
	struct infeed			*f;
	double				*times, *cpus, *nexts, t0, t, start;
	double				 c0 = 0, cpu_sum = 0;
	uint64_t			 items = 0, sink = 0, epochs, done = 0;
	size_t				 n = 0, cap, i;
	int				 r;

	long				 f0 = 0, s0 = 0, f1, s1;
	long				 faults = 0, switches = 0;
	int				 ready, marks, cow;

	if (argc != 6 && !(argc == 7 && (strcmp(argv[6], "ready") == 0 ||
	    strcmp(argv[6], "ready-cow") == 0 ||
	    strcmp(argv[6], "callgrind") == 0 ||
	    strcmp(argv[6], "cow") == 0))) {
		fprintf(stderr, "usage: c-loader SOCKET DATASET BATCH "
		    "DEVICE_ITERATIONS EPOCHS [ready|ready-cow|callgrind|cow]"
		    "\n");
		return (2);
	}
	cow = argc == 7 && (strcmp(argv[6], "ready-cow") == 0 ||
	    strcmp(argv[6], "cow") == 0);
	ready = argc == 7 && strcmp(argv[6], "cow") != 0;
	marks = ready && strcmp(argv[6], "callgrind") == 0;
#ifndef HAVE_CALLGRIND_MARKS
	if (marks) {
		fprintf(stderr, "c-loader: built without valgrind's "
		    "callgrind.h (install valgrind)\n");
		return (2);
	}
#endif
	infeed_options_init(&o);
	o.batch_size = (uint32_t)atoi(argv[3]);
	o.device_iterations = (uint32_t)atoi(argv[4]);
	o.shuffle = true;
	o.load_indefinitely = false;
	o.copy_on_write = cow;
	epochs = strtoull(argv[5], NULL, 10);
	if ((f = infeed_new()) == NULL ||
	    infeed_connect(f, argv[1], "c-loader") != INFEED_OK ||
	    infeed_attach(f, argv[2], &o, &info) != INFEED_OK) {
		fprintf(stderr, "c-loader: %s\n", f ? infeed_error(f) : "oom");
		return (1);
	}
	cap = info.steps_per_epoch * epochs + 1;
	times = calloc(cap, sizeof(*times));
	cpus = calloc(cap, sizeof(*cpus));
	nexts = calloc(cap, sizeof(*nexts));
	if (times == NULL || cpus == NULL || nexts == NULL) {
		fprintf(stderr, "c-loader: out of memory\n");
		return (1);
	}
	start = t0 = now_s();
	while (done < epochs) {
		if (ready) {
			usleep(20000);
			usage_now(&f0, &s0);
			t0 = now_s();
			c0 = cpu_s();
		}
#ifdef HAVE_CALLGRIND_MARKS
		if (marks) {
			callgrind_caches_empty();
			callgrind_step_begin();
		}
#endif
		if ((r = infeed_next(f, &st)) == INFEED_OK) {
			if (ready && !marks && n < cap)
				nexts[n] = cpu_s() - c0;
#ifdef HAVE_CALLGRIND_MARKS
			if (marks)
				callgrind_step_split();
#endif
			if (!ready)
				sink += touch(st.data,
				    st.rows * info.sample_bytes);
			items += st.rows;
			infeed_release(f, &st);
		}
#ifdef HAVE_CALLGRIND_MARKS
		if (marks)
			callgrind_step_end(r == INFEED_OK);
#endif
		if (r == INFEED_END_OF_DATA) {
			done++;
			continue;
		}
		if (r != INFEED_OK) {
			fprintf(stderr, "c-loader: %s\n", infeed_error(f));
			return (1);
		}
		t = now_s();
		if (n < cap) {
			cpus[n] = cpu_s() - c0;
			times[n++] = t - t0;
		}
		if (ready) {
			usage_now(&f1, &s1);
			faults += f1 - f0;
			switches += s1 - s0;
		}
		t0 = t;
	}
	t = now_s() - start;
	for (i = 0; i < n; i++)
		cpu_sum += cpus[i];
	qsort(times, n, sizeof(*times), cmp_double);
	qsort(cpus, n, sizeof(*cpus), cmp_double);
	qsort(nexts, n, sizeof(*nexts), cmp_double);
	printf("{\"items_per_s\": %.1f, \"step_median_s\": %.6f, "
	    "\"ready_cpu_median_s\": %.6f, \"ready_cpu_mean_s\": %.6f, "
	    "\"ready_next_cpu_median_s\": %.6f, "
	    "\"ready_faults\": %.2f, \"ready_switches\": %.2f, "
	    "\"steps\": %zu, \"sink\": %llu}\n", (double)items / t,
	    n ? times[n / 2] : 0.0, ready && n ? cpus[n / 2] : 0.0,
	    ready && n ? cpu_sum / (double)n : 0.0,
	    ready && n ? nexts[n / 2] : 0.0,
	    n ? (double)faults / (double)n : 0.0,
	    n ? (double)switches / (double)n : 0.0, n,
	    (unsigned long long)(sink & 1));
	free(times);
	free(cpus);
	free(nexts);
	infeed_free(f);
	return (0);
}
