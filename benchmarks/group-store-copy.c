/* SPDX-License-Identifier: MIT */
/*
 * What a group's store of past steps (daemon/group-store.c) costs per
 * step, alone, to say where a lone trainer's 40 % goes when the store is
 * on (issue 35, round five): the copier pwrite()s each step a group
 * decodes into its memfd, and the store's pages are freed when it goes.
 *
 * Each round, interleaved, for --steps steps of one step's bytes (32 x 3
 * x 224 x 224 float32, 18.4 MiB, as the shared-pipeline benchmarks'
 * images; --quarter: as uint8, a quarter of it), times the CPU (user and
 * system, getrusage) of
 *   fresh:  pwrite() into a new memfd (shmem allocates 4 KiB pages),
 *   reused: pwrite() into the same memfd again (its pages kept),
 *   close:  the memfd's close (its pages freed),
 *   memcpy: a plain copy into a reused buffer (the copy alone),
 * and prints the medians in ms a step and as a share of one core at 80
 * steps a second (a lone trainer's pace on the 2-core machine).
 *
 *   usage: group-store-copy [--rounds N] [--steps S] [--quarter]
 */

#include <sys/mman.h>
#include <sys/resource.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GSC_STEP	(32ULL * 3 * 224 * 224 * 4)
#define GSC_PACE	80.0	/* steps a second, a lone trainer's */
#define GSC_KINDS	4

static const char *gsc_names[GSC_KINDS] = { "fresh", "reused", "close",
    "memcpy" };

/* CPU seconds of this process so far, user and system. */
static double
gsc_cpu(void)
{
	struct rusage	u;

	getrusage(RUSAGE_SELF, &u);
	return ((double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	    (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6);
}

/* pwrite() @n steps of @step bytes from @src into @fd, all of them. */
static void
gsc_write(int fd, const char *src, uint64_t step, int n)
{
	uint64_t	done;
	ssize_t		w;
	int		i;

	for (i = 0; i < n; i++)
		for (done = 0; done < step; done += (uint64_t)w)
			if ((w = pwrite(fd, src + done, step - done,
			    (off_t)(i * step + done))) <= 0) {
				perror("pwrite");
				exit(1);
			}
}

static int
gsc_cmp(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return (x < y ? -1 : x > y);
}

int
main(int argc, char **argv)
{
	uint64_t	 step = GSC_STEP;
	double		*t[GSC_KINDS], t0, med;
	char		*src, *dst;
	int		 rounds = 5, steps = 94, r, i, k, fd;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--quarter") == 0)
			step /= 4;
		else {
			fprintf(stderr, "usage: group-store-copy [--rounds N] "
			    "[--steps S] [--quarter]\n");
			return (2);
		}
	}
	if (rounds < 1 || steps < 1) {
		fprintf(stderr, "group-store-copy: --rounds and --steps "
		    "must be at least 1\n");
		return (2);
	}
	if ((src = malloc(step)) == NULL || (dst = malloc(step)) == NULL)
		return (1);
	memset(src, 7, step);
	memset(dst, 0, step);
	for (k = 0; k < GSC_KINDS; k++)
		if ((t[k] = calloc((size_t)rounds, sizeof(double))) == NULL)
			return (1);
	for (r = 0; r < rounds; r++) {
		if ((fd = memfd_create("group-store-copy", MFD_CLOEXEC)) ==
		    -1 || ftruncate(fd, (off_t)(step * (uint64_t)steps)) == -1) {
			perror("memfd");
			return (1);
		}
		t0 = gsc_cpu();
		gsc_write(fd, src, step, steps);
		t[0][r] = gsc_cpu() - t0;
		t0 = gsc_cpu();
		gsc_write(fd, src, step, steps);
		t[1][r] = gsc_cpu() - t0;
		t0 = gsc_cpu();
		close(fd);
		t[2][r] = gsc_cpu() - t0;
		t0 = gsc_cpu();
		for (i = 0; i < steps; i++) {
			memcpy(dst, src, step);
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		t[3][r] = gsc_cpu() - t0;
	}
	printf("group store, %d steps of %.1f MiB, medians of %d rounds:\n",
	    steps, (double)step / (1 << 20), rounds);
	for (k = 0; k < GSC_KINDS; k++) {
		qsort(t[k], (size_t)rounds, sizeof(double), gsc_cmp);
		med = t[k][rounds / 2] * 1000 / steps;
		printf("  %-7s %6.2f ms a step, %5.1f %% of a core at %.0f "
		    "steps/s\n", gsc_names[k], med, med * GSC_PACE / 10,
		    GSC_PACE);
	}
	return (0);
}
