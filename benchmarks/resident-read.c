/* SPDX-License-Identifier: MIT */
/*
 * Rows whose pages are in the page cache, read the ways a worker could
 * (issue 36, item 1): copied out of the file's mapping after mincore(2)
 * says they are resident (what worker.c does), copied out of the mapping
 * with no check, read in flight through io_uring and through the thread
 * pool (io-batch.h: --depth at a time, into the destination), and one
 * pread at a time.  A file of --mib MiB (256) in --dir (/var/tmp), read
 * whole first (so it is cached) and mapped and populated as a worker's
 * idle pass does; rows of each size below at random indices.  Prints
 * nanoseconds a row, the median of --rounds rounds (5).
 *
 *   build/benchmarks/resident-read [--mib N] [--dir DIR] [--rounds N]
 *       [--depth N]
 */

#include <sys/mman.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io-batch.h"

#define BENCH_ROWS		(1u << 15)	/* rows a pass */
#define BENCH_MAX_ROUNDS	15

enum bench_way { MINCORE_COPY, COPY, URING, THREADS, PREAD, NWAYS };
static const char *const bench_names[NWAYS] = {
	"mincore+copy", "copy", "io_uring", "threads", "pread",
};

static uint64_t
bench_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
}

static int
bench_cmp(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return ((x > y) - (x < y));
}

/* Whether @len bytes at @p are resident, as worker.c asks. */
static bool
bench_resident(const uint8_t *p, size_t len, long page)
{
	unsigned char	vec[64];
	uintptr_t	at = (uintptr_t)p & ~(uintptr_t)(page - 1);
	size_t		pages = ((uintptr_t)p + len - at + page - 1) / page, i;

	if (pages > 64 || mincore((void *)at, pages * page, vec) == -1)
		return (false);
	for (i = 0; i < pages; i++)
		if ((vec[i] & 1) == 0)
			return (false);
	return (true);
}

/* One pass of @way over rows @idx of @row bytes: ns a row. */
static double
bench_pass(enum bench_way way, int fd, const uint8_t *map, size_t row,
    const uint64_t *idx, uint8_t *dst, struct io_batch *io, unsigned depth,
    long page)
{
	uint64_t	t0 = bench_ns(), tag;
	ssize_t		res;
	size_t		i, sink = 0;

	for (i = 0; i < BENCH_ROWS; i++) {
		uint8_t	*to = dst + (i % 256) * row;

		switch (way) {
		case MINCORE_COPY:
			sink += bench_resident(map + idx[i] * row, row, page);
			/* FALLTHROUGH */
		case COPY:
			memcpy(to, map + idx[i] * row, row);
			break;
		case URING:
		case THREADS:
			while (io_batch_room(io) == 0 ||
			    io_batch_inflight(io) >= depth)
				(void)io_batch_wait(io, &tag, &res);
			io_batch_read(io, fd, to, row, idx[i] * row, i);
			break;
		case PREAD:
			if (pread(fd, to, row, (off_t)(idx[i] * row)) !=
			    (ssize_t)row)
				abort();
			break;
		default:
			break;
		}
	}
	if (io != NULL)
		io_batch_drain(io);
	if (sink == 1)
		fprintf(stderr, " ");
	return ((double)(bench_ns() - t0) / BENCH_ROWS);
}

int
main(int argc, char **argv)
{
	static const size_t	 sizes[] = { 4096, 16384, 131072 };
	const char		*d = "/var/tmp";
	unsigned		 mib = 256, rounds = 5, depth = 32, r, s, w;
	double			 ns[NWAYS][BENCH_MAX_ROUNDS];
	struct io_batch		*io[NWAYS] = { NULL };
	char			 path[512], buf[1 << 16];
	uint64_t		*idx, n, i;
	uint8_t			*map, *dst;
	long			 page = sysconf(_SC_PAGESIZE);
	int			 fd, a;

	for (a = 1; a + 1 < argc; a += 2) {
		if (strcmp(argv[a], "--mib") == 0)
			mib = (unsigned)atoi(argv[a + 1]);
		else if (strcmp(argv[a], "--dir") == 0)
			d = argv[a + 1];
		else if (strcmp(argv[a], "--rounds") == 0)
			rounds = (unsigned)atoi(argv[a + 1]);
		else if (strcmp(argv[a], "--depth") == 0)
			depth = (unsigned)atoi(argv[a + 1]);
	}
	if (rounds < 1 || rounds > BENCH_MAX_ROUNDS || depth < 1 ||
	    depth > IO_BATCH_DEPTH)
		return (2);
	snprintf(path, sizeof(path), "%s/resident-read.XXXXXX", d);
	if ((fd = mkstemp(path)) == -1)
		return (1);
	unlink(path);
	memset(buf, 7, sizeof(buf));
	for (i = 0; i < (uint64_t)mib << 4; i++)
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			return (1);
	map = mmap(NULL, (size_t)mib << 20, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return (1);
	(void)madvise(map, (size_t)mib << 20, MADV_POPULATE_READ);
	io[URING] = io_batch_new(IO_BACKEND_URING, IO_BATCH_DEPTH);
	io[THREADS] = io_batch_new(IO_BACKEND_THREADS, IO_BATCH_DEPTH);
	idx = malloc(BENCH_ROWS * sizeof(*idx));
	dst = aligned_alloc(4096, 256 * sizes[2]);
	printf("%-10s", "row");
	for (w = 0; w < NWAYS; w++)
		printf("%14s", bench_names[w]);
	printf("   (ns a row, median of %u; io depth %u)\n", rounds, depth);
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		n = ((uint64_t)mib << 20) / sizes[s];
		srand(1);
		for (i = 0; i < BENCH_ROWS; i++)
			idx[i] = (uint64_t)rand() % n;
		for (r = 0; r < rounds; r++)	/* interleaved */
			for (w = 0; w < NWAYS; w++)
				ns[w][r] = bench_pass((enum bench_way)w, fd,
				    map, sizes[s], idx, dst, io[w], depth,
				    page);
		printf("%-10zu", sizes[s]);
		for (w = 0; w < NWAYS; w++) {
			qsort(ns[w], rounds, sizeof(double), bench_cmp);
			printf("%14.0f", ns[w][rounds / 2]);
		}
		printf("\n");
	}
	io_batch_free(io[URING]);
	io_batch_free(io[THREADS]);
	return (0);
}
