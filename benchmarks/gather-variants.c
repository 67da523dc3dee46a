/* SPDX-License-Identifier: MIT */
/*
 * Ways of gathering the tutorial's rows, to find the fastest standalone
 * gather this machine can do: what benchmarks/loader-vs-gather's limit
 * must be at least as fast as (issue 35).
 *
 * Each variant gathers --steps steps of 800 random 64 KiB rows of a file
 * in the page cache (its mapping populated, MAP_POPULATE) into a reused,
 * pre-faulted destination, and checks that the last step's rows hold
 * their source rows' bytes.  The variants run interleaved, one after the
 * other in every round, and each prints its median items/s over the
 * rounds and its ratio to the first (the limit as it was before issue
 * 35: 2 threads meeting at a barrier every step, SSE2 streaming stores,
 * a destination of 4 KiB pages).
 *
 *   usage: gather-variants FILE [--rounds N] [--steps S]
 *
 * FILE holds at least 10000 x 64 KiB (benchmarks/python-loader's x.bin,
 * say); it is read through the page cache.
 */

#include <sys/mman.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __x86_64__
#include <immintrin.h>
#endif

#define SAMPLES		10000
#define ROW		65536
#define ROWS		800
#define MAX_THREADS	16
#define MAX_ROUNDS	32
#define HUGE_BYTES	(2u << 20)

/* How one variant copies a row. */
enum gv_copy {
	GV_SSE2,		/* 16-byte streaming stores (common/copy.c) */
	GV_AVX2,		/* 32-byte streaming stores */
	GV_AVX2_PREFETCH,	/* the same, prefetching the next row */
	GV_AVX512,		/* 64-byte streaming stores */
	GV_MEMCPY,		/* glibc's memcpy */
	GV_MOVSB		/* rep movsb */
};

struct gv_variant {
	const char	*name;
	enum gv_copy	 copy;
	int		 threads;	/* 0: one a CPU */
	bool		 barrier;	/* all threads meet every step */
	bool		 huge;		/* destination on huge pages */
};

static const struct gv_variant gv_variants[] = {
	{ "before: 2 threads, barrier a step, SSE2 stream, 4K pages",
	    GV_SSE2, 2, true, false },
	{ "huge-page destination", GV_SSE2, 2, true, true },
	{ "no barrier a step", GV_SSE2, 2, false, false },
	{ "no barrier, huge pages (the limit now)", GV_SSE2, 0, false, true },
	{ "no barrier, huge pages, AVX2 stream", GV_AVX2, 0, false, true },
	{ "no barrier, huge pages, AVX2 stream, prefetch next row",
	    GV_AVX2_PREFETCH, 0, false, true },
	{ "no barrier, huge pages, AVX-512 stream", GV_AVX512, 0, false,
	    true },
	{ "no barrier, huge pages, memcpy", GV_MEMCPY, 0, false, true },
	{ "no barrier, huge pages, rep movsb", GV_MOVSB, 0, false, true },
	{ "no barrier, huge pages, 1 thread", GV_SSE2, 1, false, true },
	{ "no barrier, huge pages, 2 x CPUs threads", GV_SSE2, -1, false,
	    true },
};
#define GV_NVARIANTS	(sizeof(gv_variants) / sizeof(gv_variants[0]))

/* One variant's run. */
struct gv_run {
	const struct gv_variant	*v;
	const uint8_t		*src;
	uint8_t			*dst;
	uint32_t		 idx[ROWS];	/* the last step's */
	int			 threads;
	uint64_t		 steps;
	pthread_barrier_t	 step;
};

struct gv_arg {
	struct gv_run	*run;
	int		 t;
};

/* Seconds on the monotonic clock. */
static double
now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return ((x > y) - (x < y));
}

/* Copy row @s to @d as @c says; @next is the row after (prefetched). */
static void
gv_copy_row(enum gv_copy c, uint8_t *d, const uint8_t *s,
    const uint8_t *next)
{
	size_t	i, n = ROW;

	switch (c) {
#ifdef __x86_64__
	case GV_SSE2:
		for (i = 0; i < ROW / 16; i += 4) {
			__m128i	a = _mm_loadu_si128((const __m128i *)s + i);
			__m128i	b = _mm_loadu_si128((const __m128i *)s + i + 1);
			__m128i	e = _mm_loadu_si128((const __m128i *)s + i + 2);
			__m128i	f = _mm_loadu_si128((const __m128i *)s + i + 3);

			_mm_stream_si128((__m128i *)d + i, a);
			_mm_stream_si128((__m128i *)d + i + 1, b);
			_mm_stream_si128((__m128i *)d + i + 2, e);
			_mm_stream_si128((__m128i *)d + i + 3, f);
		}
		return;
	case GV_AVX2:
	case GV_AVX2_PREFETCH:
		if (!__builtin_cpu_supports("avx2"))
			break;
		for (i = 0; i < ROW; i += 128) {
			if (c == GV_AVX2_PREFETCH) {
				_mm_prefetch((const char *)next + i,
				    _MM_HINT_T0);
				_mm_prefetch((const char *)next + i + 64,
				    _MM_HINT_T0);
			}
			__asm__ volatile(
			    "vmovdqa (%1), %%ymm0\n\t"
			    "vmovdqa 32(%1), %%ymm1\n\t"
			    "vmovdqa 64(%1), %%ymm2\n\t"
			    "vmovdqa 96(%1), %%ymm3\n\t"
			    "vmovntdq %%ymm0, (%0)\n\t"
			    "vmovntdq %%ymm1, 32(%0)\n\t"
			    "vmovntdq %%ymm2, 64(%0)\n\t"
			    "vmovntdq %%ymm3, 96(%0)\n\t"
			    : : "r"(d + i), "r"(s + i)
			    : "xmm0", "xmm1", "xmm2", "xmm3", "memory");
		}
		return;
	case GV_AVX512:
		if (!__builtin_cpu_supports("avx512f"))
			break;
		for (i = 0; i < ROW; i += 128) {
			__asm__ volatile(
			    "vmovdqa64 (%1), %%zmm0\n\t"
			    "vmovdqa64 64(%1), %%zmm1\n\t"
			    "vmovntdq %%zmm0, (%0)\n\t"
			    "vmovntdq %%zmm1, 64(%0)\n\t"
			    : : "r"(d + i), "r"(s + i)
			    : "xmm0", "xmm1", "memory");
		}
		return;
	case GV_MOVSB:
		__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : :
		    "memory");
		return;
#endif
	default:
		break;
	}
	memcpy(d, s, n);
}

/* A row number below SAMPLES from @x's generator (xorshift64*). */
static uint32_t
gv_random(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return ((uint32_t)(((*x * UINT64_C(2685821657736338717)) >> 32) %
	    SAMPLES));
}

/* A thread: its share of every step, with or without a barrier a step. */
static void *
gv_thread(void *p)
{
	struct gv_arg	*a = p;
	struct gv_run	*run = a->run;
	uint64_t	 x = 0x9e3779b97f4a7c15ULL * (uint64_t)(a->t + 1), s;
	int		 begin = a->t * ROWS / run->threads;
	int		 end = (a->t + 1) * ROWS / run->threads, r;
	uint32_t	 i, next;

	for (s = 0; s < run->steps; s++) {
		next = gv_random(&x);
		for (r = begin; r < end; r++) {
			i = next;
			next = gv_random(&x);
			run->idx[r] = i;
			gv_copy_row(run->v->copy, run->dst + (size_t)r * ROW,
			    run->src + (size_t)i * ROW, run->src +
			    (size_t)next * ROW);
		}
#ifdef __x86_64__
		_mm_sfence();
#endif
		if (run->v->barrier)
			pthread_barrier_wait(&run->step);
	}
	return (NULL);
}

/* A pre-faulted destination for one step, on 2 MiB boundaries. */
static uint8_t *
gv_dst(bool huge)
{
	size_t	 len = (size_t)ROWS * ROW;
	uint8_t	*p, *a;

	p = mmap(NULL, len + HUGE_BYTES, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return (NULL);
	a = (uint8_t *)(((uintptr_t)p + HUGE_BYTES - 1) &
	    ~(uintptr_t)(HUGE_BYTES - 1));
	(void)madvise(a, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	memset(a, 1, len);
	return (a);
}

/* items/s of variant @v, or -1 when its bytes are wrong. */
static double
gv_measure(const struct gv_variant *v, const uint8_t *src, uint8_t *dst,
    uint64_t steps, int cpus)
{
	static struct gv_run	 run;
	struct gv_arg		 args[MAX_THREADS];
	pthread_t		 th[MAX_THREADS];
	double			 t0;
	int			 t, r;

	memset(&run, 0, sizeof(run));
	run.v = v;
	run.src = src;
	run.dst = dst;
	run.steps = steps;
	run.threads = v->threads > 0 ? v->threads : v->threads == 0 ? cpus :
	    2 * cpus;
	if (run.threads > MAX_THREADS)
		run.threads = MAX_THREADS;
	pthread_barrier_init(&run.step, NULL, (unsigned)run.threads);
	t0 = now_s();
	for (t = 0; t < run.threads; t++) {
		args[t].run = &run;
		args[t].t = t;
		pthread_create(&th[t], NULL, gv_thread, &args[t]);
	}
	for (t = 0; t < run.threads; t++)
		pthread_join(th[t], NULL);
	t0 = now_s() - t0;
	pthread_barrier_destroy(&run.step);
	for (r = 0; r < ROWS; r++)
		if (memcmp(dst + (size_t)r * ROW, src + (size_t)run.idx[r] *
		    ROW, ROW) != 0)
			return (-1);
	return ((double)steps * ROWS / t0);
}

int
main(int argc, char **argv)
{
	static double	 rate[GV_NVARIANTS][MAX_ROUNDS];
	uint8_t		*dst[2];
	const uint8_t	*src;
	double		 base = 0, m;
	unsigned long	 rounds = 5, steps = 40;
	size_t		 v;
	unsigned	 r;
	struct stat	 sb;
	int		 fd, i, cpus;
	FILE		*la;
	char		 load[64] = "?";

	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
			steps = strtoul(argv[++i], NULL, 10);
		else
			argc = 0;
	}
	if (argc < 2 || rounds < 1 || rounds > MAX_ROUNDS || steps < 1) {
		fprintf(stderr, "usage: gather-variants FILE [--rounds 1-32] "
		    "[--steps S]\n");
		return (2);
	}
	if ((fd = open(argv[1], O_RDONLY)) == -1 || fstat(fd, &sb) == -1 ||
	    sb.st_size < (off_t)SAMPLES * ROW) {
		fprintf(stderr, "gather-variants: %s: need a readable file of "
		    "at least %d bytes\n", argv[1], SAMPLES * ROW);
		return (2);
	}
	src = mmap(NULL, (size_t)SAMPLES * ROW, PROT_READ, MAP_SHARED |
	    MAP_POPULATE, fd, 0);
	close(fd);
	dst[0] = gv_dst(false);
	dst[1] = gv_dst(true);
	if (src == MAP_FAILED || dst[0] == NULL || dst[1] == NULL)
		return (1);
	cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 2)
		cpus = 2;
	if ((la = fopen("/proc/loadavg", "re")) != NULL) {
		if (fgets(load, sizeof(load), la) == NULL)
			strcpy(load, "?\n");
		fclose(la);
	}
	printf("load before: %s", load);
	for (r = 0; r < rounds; r++)
		for (v = 0; v < GV_NVARIANTS; v++) {
			rate[v][r] = gv_measure(&gv_variants[v], src,
			    dst[gv_variants[v].huge], steps, cpus);
			if (rate[v][r] < 0) {
				printf("%s: wrong bytes gathered\n",
				    gv_variants[v].name);
				return (1);
			}
		}
	for (v = 0; v < GV_NVARIANTS; v++) {
		qsort(rate[v], rounds, sizeof(double), cmp_double);
		m = rounds % 2 ? rate[v][rounds / 2] : (rate[v][rounds / 2 -
		    1] + rate[v][rounds / 2]) / 2;
		if (v == 0)
			base = m;
		printf("%8.0f items/s  %.2f  %s\n", m, m / base,
		    gv_variants[v].name);
	}
	if ((la = fopen("/proc/loadavg", "re")) != NULL) {
		if (fgets(load, sizeof(load), la) != NULL)
			printf("load after: %s", load);
		fclose(la);
	}
	return (0);
}
