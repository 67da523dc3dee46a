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
 * and the store's route since round six (the step as uint8 through the
 * pipeline's tail, image_tail_to_u8(), into a mapping of the memfd):
 *   u8-fresh: each entry's pages made and mapped (fallocate(), then
 *             MADV_POPULATE_WRITE), then the conversion into them,
 *   u8-kept:  the conversion into the same pages again (a store's
 *             pages are kept for the steps after, and the next store),
 *   u8-serve: the way back, image_tail_to_float(), into a float buffer
 *             already faulted (a late member's slot),
 *   u8-close: the mapping's munmap() and the memfd's close(),
 * and prints the medians in ms a step and as a share of one core at 80
 * steps a second (a lone trainer's pace on the 2-core machine).
 *
 *   usage: group-store-copy [--rounds N] [--steps S] [--quarter]
 */

#include <sys/mman.h>
#include <sys/resource.h>

#include <fcntl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image-transform.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif

#define GSC_ROWS	32
#define GSC_STEP	(GSC_ROWS * 3ULL * 224 * 224 * 4)
#define GSC_PACE	80.0	/* steps a second, a lone trainer's */
#define GSC_SRCS	4	/* float steps converted in turn: 74 MiB */
#define GSC_KINDS	8

static const char *gsc_names[GSC_KINDS] = { "fresh", "reused", "close",
    "memcpy", "u8-fresh", "u8-kept", "u8-serve", "u8-close" };

/* The benchmarks' pipeline: the ImageNet Normalize. */
static const char gsc_pipeline[] = "RandomResizedCrop(224), ToTensor(), "
    "Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])";

/* CPU seconds of this process so far, user and system. */
static double
gsc_cpu(void)
{
	struct rusage	u;

	getrusage(RUSAGE_SELF, &u);
	return ((double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
	    (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6);
}

/* pwrite() @n steps of @step bytes from @src into @fd at @at on. */
static void
gsc_write(int fd, const char *src, uint64_t step, int n, uint64_t at)
{
	uint64_t	done;
	ssize_t		w;
	int		i;

	for (i = 0; i < n; i++)
		for (done = 0; done < step; done += (uint64_t)w)
			if ((w = pwrite(fd, src + done, step - done,
			    (off_t)(at + i * step + done))) <= 0) {
				perror("pwrite");
				exit(1);
			}
}

/*
 * The store's route for @steps steps of float32 rows @src: into a fresh
 * mapping (pages made per entry) or @map's kept pages; @t[k] its CPU.
 */
static void
gsc_u8(const struct image_tail *tl, const float *src, float *back,
    int steps, int rounds_at, double **t)
{
	uint64_t	 row = 3ULL * tl->plane, entry = (GSC_ROWS * row + 4095) &
			    ~4095ULL, bytes = entry * (uint64_t)steps;
	uint8_t		*map;
	double		 t0;
	int		 fd, i, k;

	if ((fd = memfd_create("group-store-copy", MFD_CLOEXEC)) == -1 ||
	    ftruncate(fd, (off_t)bytes) == -1 || (map = mmap(NULL, bytes,
	    PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		perror("memfd");
		exit(1);
	}
	t0 = gsc_cpu();
	for (i = 0; i < steps; i++) {
		if (fallocate(fd, 0, (off_t)(i * entry), (off_t)entry) == -1 ||
		    madvise(map + i * entry, entry, MADV_POPULATE_WRITE) ==
		    -1) {
			perror("fallocate, madvise");
			exit(1);
		}
		for (k = 0; k < GSC_ROWS; k++)
			image_tail_to_u8(tl, src + (i % GSC_SRCS) * GSC_ROWS *
			    row + k * row, map + i * entry + k * row);
	}
	t[4][rounds_at] = gsc_cpu() - t0;
	t0 = gsc_cpu();
	for (i = 0; i < steps; i++)
		for (k = 0; k < GSC_ROWS; k++)
			image_tail_to_u8(tl, src + (i % GSC_SRCS) * GSC_ROWS *
			    row + k * row, map + i * entry + k * row);
	t[5][rounds_at] = gsc_cpu() - t0;
	t0 = gsc_cpu();
	for (i = 0; i < steps; i++)
		for (k = 0; k < GSC_ROWS; k++)
			image_tail_to_float(tl, map + i * entry + k * row,
			    back + k * row);
	t[6][rounds_at] = gsc_cpu() - t0;
	t0 = gsc_cpu();
	munmap(map, bytes);
	close(fd);
	t[7][rounds_at] = gsc_cpu() - t0;
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
	struct image_pipeline p;
	struct image_tail tl;
	uint64_t	 step = GSC_STEP;
	double		*t[GSC_KINDS], t0, med;
	char		*src, *dst, *why = NULL;
	float		*fsrc, *back;
	uint64_t	 j;
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
	if (image_pipeline_parse(gsc_pipeline, &p, &why) == -1 ||
	    image_tail_init(&tl, &p) == -1) {
		fprintf(stderr, "group-store-copy: no uint8 route\n");
		return (1);
	}
	/*
	 * Steps of the tensor's floats, what the copier converts: GSC_SRCS
	 * of them in turn, more than the L3 holds, as a ring's slots are.
	 */
	if ((fsrc = malloc(GSC_STEP * GSC_SRCS)) == NULL ||
	    (back = malloc(GSC_STEP)) == NULL)
		return (1);
	for (j = 0; j < GSC_STEP * GSC_SRCS / 4; j++)
		fsrc[j] = tl.lut[j / tl.plane % 3][(j * 2654435761u) >> 8 & 255];
	memset(back, 0, GSC_STEP);
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
		gsc_write(fd, src, step, steps, 0);
		t[0][r] = gsc_cpu() - t0;
		t0 = gsc_cpu();
		gsc_write(fd, src, step, steps, 0);
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
		gsc_u8(&tl, fsrc, back, steps, r, t);
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
