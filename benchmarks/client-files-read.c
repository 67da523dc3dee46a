/* SPDX-License-Identifier: MIT */
/*
 * A client's file read as a worker reads it (issue 39, item 4): through
 * a mapping of the whole file (what the daemon lets the workers map,
 * within DATASET_FILES_MAP_UID_MAX and DATASET_FILES_MAP_MAX), or with
 * pread, a system call a row (the files beyond).  A raw uint8 file of
 * --mib MiB (1024) in --dir (/dev/shm: in page cache), rows of each size
 * below, read at random indices in jobs of 256 rows between
 * dataset_job_begin() and dataset_job_end(), as worker_fill() does; the
 * mapping's first pass (its page faults) and its second, and pread's.
 * Prints nanoseconds a row, the median of --rounds rounds (5).
 *
 *   build/benchmarks/client-files-read [--mib N] [--dir DIR] [--rounds N]
 */

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dataset.h"

#define BENCH_JOB_ROWS	256
#define BENCH_ROWS	(1u << 17)	/* rows a pass */
#define BENCH_MAX_ROUNDS	15

static uint64_t
bench_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

/* Read @n rows at @idx in jobs, as a worker; nanoseconds a row. */
static double
bench_pass(const struct dataset *ds, const uint64_t *idx, size_t n,
    uint8_t *dst)
{
	uint64_t	t0 = bench_ns();
	int64_t		label;
	size_t		i;

	for (i = 0; i < n; i++) {
		if (i % BENCH_JOB_ROWS == 0)
			dataset_job_begin();
		if (dataset_read(ds, idx[i], dst, &label, false) != 0) {
			fprintf(stderr, "read: %s\n", strerror(errno));
			exit(1);
		}
		if (i % BENCH_JOB_ROWS == BENCH_JOB_ROWS - 1 || i == n - 1)
			(void)dataset_job_end(NULL);
	}
	return ((double)(bench_ns() - t0) / (double)n);
}

/* The file as a worker opens it: mapped whole, or not at all. */
static struct dataset *
bench_open(const char *path, size_t row, bool map)
{
	struct dataset_files	 spec;
	struct dataset		*ds;
	char			*cause = NULL;
	int			 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		perror(path);
		exit(1);
	}
	memset(&spec, 0, sizeof(spec));
	spec.data_format = DATASET_FORMAT_RAW;
	spec.dtype = INFEED_DTYPE_UINT8;
	spec.ndim = 1;
	spec.shape[0] = row;
	spec.map_data = map ? DATASET_MAP_ALL : 0;
	if ((ds = dataset_open_files("bench", &spec, fd, -1, true, NULL,
	    &cause)) == NULL) {
		fprintf(stderr, "%s\n", cause);
		exit(1);
	}
	return (ds);
}

static int
bench_cmp(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return ((x > y) - (x < y));
}

static double
bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp);
	return (v[n / 2]);
}

int
main(int argc, char **argv)
{
	static const size_t	 rows[] = { 4, 64, 784, 3072, 12288, 150528 };
	const char		*dir = "/dev/shm";
	uint64_t		 mib = 1024, *idx, n;
	double			 cold[BENCH_MAX_ROUNDS], warm[BENCH_MAX_ROUNDS];
	double			 rd[BENCH_MAX_ROUNDS];
	char			 path[4096];
	uint8_t			*dst, *buf;
	struct dataset		*ds;
	size_t			 r, i, nrows;
	int			 rounds = 5, k, fd;

	for (k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--mib") == 0 && k + 1 < argc)
			mib = strtoull(argv[++k], NULL, 10);
		else if (strcmp(argv[k], "--dir") == 0 && k + 1 < argc)
			dir = argv[++k];
		else if (strcmp(argv[k], "--rounds") == 0 && k + 1 < argc)
			rounds = atoi(argv[++k]);
		else {
			fprintf(stderr, "usage: %s [--mib N] [--dir DIR] "
			    "[--rounds N]\n", argv[0]);
			return (2);
		}
	}
	if (rounds < 1 || rounds > BENCH_MAX_ROUNDS || mib == 0) {
		fprintf(stderr, "--rounds 1 to %d, --mib at least 1\n",
		    BENCH_MAX_ROUNDS);
		return (2);
	}
	snprintf(path, sizeof(path), "%s/infeed-bench-XXXXXX", dir);
	if ((fd = mkstemp(path)) == -1) {
		perror(path);
		return (1);
	}
	if ((buf = malloc(1 << 20)) == NULL)
		return (1);
	memset(buf, 7, 1 << 20);
	for (n = 0; n < mib; n++)
		if (write(fd, buf, 1 << 20) != 1 << 20) {
			perror("write");
			unlink(path);
			return (1);
		}
	close(fd);
	nrows = BENCH_ROWS;
	if ((idx = malloc(nrows * sizeof(*idx))) == NULL ||
	    (dst = malloc(rows[sizeof(rows) / sizeof(rows[0]) - 1])) == NULL)
		return (1);
	printf("%llu MiB file in %s, %zu random rows a pass, jobs of %d rows; "
	    "ns a row, median of %d rounds\n", (unsigned long long)mib, dir,
	    nrows, BENCH_JOB_ROWS, rounds);
	printf("%8s %12s %12s %12s %10s\n", "row", "map 1st", "map 2nd",
	    "pread", "pread/2nd");
	srandom(1);
	for (r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		n = (mib << 20) / rows[r];
		/* A whole number of rows (the file only shrinks). */
		if (truncate(path, (off_t)(n * rows[r])) == -1) {
			perror(path);
			break;
		}
		for (k = 0; k < rounds; k++) {
			for (i = 0; i < nrows; i++)
				idx[i] = ((uint64_t)random() << 31 ^
				    (uint64_t)random()) % n;
			ds = bench_open(path, rows[r], true);
			cold[k] = bench_pass(ds, idx, nrows, dst);
			warm[k] = bench_pass(ds, idx, nrows, dst);
			dataset_free(ds);
			ds = bench_open(path, rows[r], false);
			rd[k] = bench_pass(ds, idx, nrows, dst);
			dataset_free(ds);
		}
		cold[0] = bench_median(cold, rounds);
		warm[0] = bench_median(warm, rounds);
		rd[0] = bench_median(rd, rounds);
		printf("%8zu %12.0f %12.0f %12.0f %10.2f\n", rows[r], cold[0],
		    warm[0], rd[0], rd[0] / warm[0]);
	}
	unlink(path);
	free(idx);
	free(dst);
	free(buf);
	return (0);
}
