/* SPDX-License-Identifier: MIT */
/*
 * Loader-only throughput of the data-loading tutorial's workload, against
 * this machine's own limit for the same job, measured in the same run.
 *
 *   workload: 10000 samples of [1,128,128] float32 (64 KiB each) in a raw
 *             file in the page cache; B 16, DI 50 (800 rows a step),
 *             shuffled.
 *   limit:    gathering 800 random 64 KiB rows of the mapped file into one
 *             reused buffer on huge pages with one thread a CPU (at least
 *             2), with the copy the workers use (common/copy.h: streaming
 *             stores for a slot past the last-level cache): the fastest
 *             standalone gather of these rows found on the 2-core VM
 *             (issue 35; docs/performance.md lists the variants tried).
 *   infeed:   the real infeedd (a worker for each limit thread) serving
 *             the same file as a `raw` dataset, read through libinfeed by
 *             a client that checks every step (below).
 *
 * Like for like (issue 35): the limit never reads what it gathers, and a
 * trainer on an IPU host reads none of its step either (it goes to the
 * device by DMA).  So by default (--reads ids) the client reads no page
 * but what its check needs: every row's index (exactly-once, counted), the
 * first word of one row in 16 and one whole row a step against the file.
 * --reads pages has the client read every page of every step (the
 * figures of round seven and before) and the limit's threads every page
 * of their share of each step they gather, and prints the ratio to the
 * limit that reads nothing beside.
 *
 * The limit is that gather: a reused, pre-faulted destination, a
 * pre-touched source, threads kept for the run that each gather their
 * share of every step with no wait between steps, measured in the same
 * run as infeed and interleaved with it, round by round; every figure is
 * a median.  The limit checks itself: every row of its last step must
 * hold its source row's bytes, and the same threads also time a plain
 * copy of the same bytes from pre-faulted anonymous memory (256 MiB or
 * more, past any cache); wrong bytes, or a limit below half of the plain
 * copy, are reported as a broken measurement (exit status 3), not as a
 * ratio.
 *
 * It alternates the two measurements --rounds times and prints the median
 * of each and the ratio of the medians (the first step of each session is
 * left out: a steady-state figure).
 *
 * The default mode and --clients also print a cpu ratio: the limit's CPU
 * time a row over infeed's (its clients, infeedd and its workers, from
 * /proc and getrusage), the median of the rounds' ratios.  On an idle
 * machine where both keep every CPU busy it is what the ratio is; on a
 * busy one, where the limit's threads and infeed's processes get
 * different shares of the CPUs (8 clients and 2 workers against 2
 * threads), it is bent far less than the ratio (issue 35).
 *
 * --session: issue 17's 72-step session instead.  Each round measures the
 * limit, restarts infeedd, and times two sessions of 6 epochs (72 steps)
 * from the call to infeed_attach() to the last step released, first step
 * included: the first session after the daemon starts ("cold") and the
 * next one on the same daemon ("warm", which may reuse the first one's
 * kept ring memory).  It reports their ratios to the limit, their time
 * to first step (from infeed_attach() to the first step in hand) and each
 * session's cpu ratio (as below: what the first session's fresh ring
 * memory costs shows there, whatever the load).
 *
 * --clients N (1 to 8): issue 17's concurrent clients.  The tutorial's
 * file and one infeedd (workers as above); each round measures the
 * limit, then forks N client processes, each with its own connection,
 * attached to the dataset as distributed process i of N (same seed,
 * shuffled, B 16, DI 50).  They attach, wait at a barrier (a pipe the
 * parent closes), take their first step (untimed: it maps fresh ring
 * memory) and run --epochs epochs of their share (default 8, or more to
 * make 24 steps a client), checking every step; the limit gathers as
 * many steps as they take together.  Each client's items/s is over its
 * own timed span; the aggregate is all timed items over (last end -
 * first start).  It prints the aggregate, its ratio to the same round's
 * limit (the median of the rounds' ratios; target >= 0.8, and 0.85 when
 * timed from the Attach), each client's items/s and the fairness,
 * max |client - mean| / mean (target <= 0.25).
 * Every client checks every step: its epoch and step in sequence, full
 * rows, each row's index in range, the sampled rows' content (above); over
 * each of the first 16 epochs, no index may reach two rows of the N
 * clients together and, with drop_last, they must deliver N x
 * steps_per_epoch x 800 rows: "exactly-once: ok", or it fails with exit
 * status 1.
 *
 * --row-bytes X --rows R: one cell of issue 17's cost table.  A raw file
 * of float32 rows of shape [1,X/4] (uint8 [1,X] when X is not a multiple
 * of 4) with --samples S samples (default 655360000 / X, the tutorial's
 * 655 MB, and never fewer than 2R); each row's first 4 bytes hold its
 * index.  B 16 and DI R/16 (B R, DI 1 when R is not a multiple of 16),
 * shuffled, one client, the first step left out, checking every step as
 * --clients does.  The limit gathers R random rows
 * of X bytes as above, sized for the cell.  The ring takes --buffer-size
 * slots (default 3, or 2 when 3 would not fit in memory); memory_budget is
 * raised above the ring's size when it needs more than 4G; a cell whose
 * file, ring and gather buffer do not fit in MemAvailable less 3 GiB is
 * printed as skipped, with the reason.  --epochs defaults to enough epochs
 * to move about --gb G gigabytes a round (default 3) and at least 16 steps.
 * The ratio is the median of the rounds' ratios.
 *
 * In every mode the limit's threads live for the whole run (thread
 * start-up would dominate a step of 64 rows of 4 KiB); the data file is written back to disk before
 * anything is timed; an untimed warm-up (24 steps of each client, an epoch
 * of the default mode, or a
 * session of buffer_size + 1 steps) comes first, so that the first round,
 * like the others, finds its rings in memory the daemon kept and every
 * slot mapped; and before each round the program waits until infeedd is
 * idle (its scrubber zeroing the last rings would otherwise eat into the
 * next limit).  Every mode prints its figures and then one line of JSON.
 *
 * The default mode and --session check every step too, each session's
 * epochs counted afresh: a failed check is exit status 1, no figure.
 *
 * usage: loader-vs-gather INFEEDD [--rounds N] [--epochs E] [--reads R]
 *	      [--session [--pause-ms MS]] [--clients N [--from-attach]]
 *	      [--row-bytes X --rows R [--samples S] [--buffer-size SLOTS]
 *	      [--gb G]]
 *
 *   --rounds N        rounds, 1 to 32 (default 5)
 *   --reads R         ids (default) or pages: what the client reads, and
 *                     the limit with it (above)
 *   --epochs E        epochs a session (default 4; 6 with --session;
 *                     with --clients 8, or enough for 24 steps a
 *                     client; from --gb in cell mode)
 *   --session         the 72-step session timed from Attach, as above
 *   --pause-ms MS     --session: pause between the two sessions (0)
 *   --clients N       N concurrent distributed clients, as above
 *   --from-attach     --clients: each client starts at the barrier,
 *                     attaches and takes 72 steps (whole epochs of its
 *                     share), timed from infeed_attach() with the first
 *                     step, as a user times a run (issue 25)
 *   --row-bytes X     cell mode: bytes a row (4 to 64 MiB)
 *   --rows R          cell mode: rows a step (combined batch)
 *   --samples S       cell mode: samples in the file
 *   --buffer-size S   cell mode: ring slots (1 to 64)
 *   --gb G            cell mode: gigabytes a round when --epochs is unset
 */

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"
#include "infeed.h"

#define N_SAMPLES	10000
#define SAMPLE_BYTES	(128 * 128 * 4)
#define CBS		800
#define MAX_THREADS	16		/* the limit's, one a CPU */
#define HUGE_BYTES	(2u << 20)

#define MAX_ROUNDS	32
#define MAX_CLIENTS	8
#define CHECK_EPOCHS	16		/* epochs checked for exactly-once */
#define CHECK_REPORTS	3		/* messages a client prints at most */
#define CHECK_WORD_EVERY 16		/* rows a first word is checked of */
#define CELL_FILE_BYTES	655360000ULL	/* the tutorial's file */
/* Enough that a new session's first touch of its slots (the client maps
 * the ring anew) does not make up the figure of a cell of huge steps. */
#define CELL_MIN_STEPS	16
/*
 * Untimed steps a client takes first: enough that each worker has written
 * (and so mapped) every part of every slot; after 4, the first timed
 * round's workers still mapped the slots' parts the other had written
 * (5-6 % of infeed's CPU in it, round eight).
 */
#define WARM_STEPS	24
#define GIB		(1024ULL * 1024 * 1024)
#define PLAIN_BYTES	(256ULL << 20)	/* the copy check's source */
/* A limit below this fraction of a plain copy is a broken measurement. */
#define LIMIT_MIN_OF_MEMCPY	0.5
#define CELL_SPARE	(3 * GIB)	/* memory a cell leaves to others */

/* The limit's gather threads, one a CPU, kept for the run. */
struct gpool {
	pthread_t		 th[MAX_THREADS];
	unsigned		 threads;
	pthread_barrier_t	 go, done;
	const uint8_t		*src;
	const uint8_t		*plain;		/* the copy check's, or NULL */
	uint64_t		 plain_rows;
	uint8_t			*dst;
	uint32_t		*idx;		/* [rows]: the last step's */
	size_t			 row_bytes;
	unsigned		 rows;
	uint64_t		 samples;
	uint64_t		 steps;		/* a run's */
	bool			 reads;		/* read every page it wrote */
	bool			 stop;
};

struct gpool_arg {
	struct gpool	*g;
	unsigned	 t;
};

/* What one client reports back to the parent. */
struct client_result {
	double		t0, t1;		/* its timed span */
	uint64_t	items;		/* rows in it */
	uint64_t	steps_per_epoch;
	uint64_t	cbs;
	int		ok;
};

/* Shared by the clients and the parent (MAP_SHARED, before fork). */
struct shared {
	struct client_result	res[MAX_CLIENTS];
	uint32_t		bad;		/* wrong steps and rows */
	uint32_t		dup;		/* rows twice in an epoch */
	uint8_t			count[];	/* [CHECK_EPOCHS][samples] */
};

/*
 * What a client checks in every step it takes: every row's index (the
 * exactly-once count), and the content of a sample of rows: the first
 * word of one row in CHECK_WORD_EVERY (of every row with --reads pages)
 * and one whole row a step against the file's bytes.  A trainer on an IPU
 * host hands the step to the device by DMA and its CPU reads none of it,
 * so by default the client reads no more than that (issue 35).
 */
struct check {
	struct shared	*sh;
	uint64_t	 samples;
	unsigned	 epochs;	/* epochs counted, <= CHECK_EPOCHS */
	bool		 tutorial;	/* first word: tutorial's, else index */
	bool		 every_word;	/* first word of every row */
	const uint8_t	*src;		/* the file, mapped */
	unsigned	 reports;
};

/* One client session. */
struct run {
	const char	*sock;
	const char	*dataset;
	uint32_t	 batch_size, device_iterations, buffer_size;
	uint32_t	 process_id, process_count;
	bool		 distributed;	/* set the process id and count */
	uint64_t	 seed;
	unsigned	 epochs;
	uint64_t	 max_steps;	/* 0: epochs x steps_per_epoch */
	bool		 from_attach;
	bool		 read_pages;	/* touch every page of every step */
	int		 ready_fd, go_fd;	/* -1: no barrier */
	struct check	*chk;		/* NULL: no checks */
	double		 t0, t1, first_s;
	uint64_t	 items, steps_per_epoch, cbs;
};

/* The run's files and settings. */
struct bench {
	const char	*infeedd;
	char		 dir[256], data[300], labels[300], conf[300];
	char		 sock[300];
	unsigned	 rounds, epochs;
	bool		 epochs_set;
	bool		 from_attach;	/* --clients: time as a user would */
	bool		 reads;		/* --reads pages: both read every page */
};

/* Seconds on the monotonic clock. */
static double
now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

/* Sort helper for medians. */
static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return ((x > y) - (x < y));
}

/* Median of @n values (sorted in place). */
static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

/*
 * A pre-faulted buffer of @len bytes on 2 MiB boundaries, on huge pages
 * where the kernel gives them (fewer TLB misses: the fastest destination
 * found for the limit, issue 35).  Not malloc: its large blocks start 16
 * bytes into a page, and copying page-aligned rows of the file there ran
 * 3 - 4 x slower on the 2-core VM than to a page-aligned buffer (issue 25:
 * the limit was that much too low).
 */
static uint8_t *
buf_new(size_t len)
{
	uint8_t		*p, *a;
	uintptr_t	 mask = HUGE_BYTES - 1;

	p = mmap(NULL, len + HUGE_BYTES, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return (NULL);
	/* Keep exactly [a, a + len): munmap(a, len) frees it all. */
	a = (uint8_t *)(((uintptr_t)p + mask) & ~mask);
	if (a > p)
		munmap(p, (size_t)(a - p));
	munmap(a + len, (size_t)(p + len + HUGE_BYTES - (a + len)));
#ifdef MADV_HUGEPAGE
	(void)madvise(a, len, MADV_HUGEPAGE);
#endif
	memset(a, 1, len);
	return (a);
}

/* A row number from @x's generator, below @n (xorshift64*). */
static uint64_t
gpool_random(uint64_t *x, uint64_t n)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return ((*x * UINT64_C(2685821657736338717)) >> 32) % n;
}

/*
 * A pool thread: between the two barriers, its share of each of
 * @g->steps steps, with no wait between steps (a barrier a step cost the
 * limit 5 - 15 % on the 2-core VM, issue 35): random rows of the file, or
 * (@g->plain) rows of the copy check's source in order.  The rows of the
 * last step are recorded in @g->idx for the byte check.
 */
static void *
gpool_main(void *p)
{
	struct gpool_arg	*a = p;
	struct gpool		*g = a->g;
	const uint8_t		*src;
	const volatile uint8_t	*rd;
	uint64_t		 s, x = 0x9e3779b97f4a7c15ULL * (a->t + 1), i;
	uint64_t		 sum = 0;
	size_t			 off;
	unsigned		 r, begin, end;
	bool			 stream = copy_streams(g->row_bytes, g->rows);

	begin = a->t * g->rows / g->threads;
	end = (a->t + 1) * g->rows / g->threads;
	free(a);
	for (;;) {
		pthread_barrier_wait(&g->go);
		if (g->stop)
			break;
		src = g->plain != NULL ? g->plain : g->src;
		for (s = 0; s < g->steps; s++) {
			for (r = begin; r < end; r++) {
				i = g->plain != NULL ? (s * g->rows + r) %
				    g->plain_rows : gpool_random(&x,
				    g->samples);
				g->idx[r] = (uint32_t)i;
				copy_row(g->dst + (size_t)r * g->row_bytes,
				    src + (size_t)i * g->row_bytes,
				    g->row_bytes, stream);
			}
			if (!g->reads)
				continue;
			/* The client's read of its step, this thread's share. */
			copy_fence();
			rd = g->dst + (size_t)begin * g->row_bytes;
			for (off = 0; off < (size_t)(end - begin) *
			    g->row_bytes; off += 4096)
				sum += rd[off];
		}
		copy_fence();
		pthread_barrier_wait(&g->done);
	}
	(void)sum;
	return (NULL);
}

/*
 * The limit's threads, and infeedd's workers: one a CPU, at least 2 (the
 * 2-core VM's, and the count a worker pool of `auto` starts from).
 */
static unsigned
limit_threads(void)
{
	long	cpus = sysconf(_SC_NPROCESSORS_ONLN);

	return (cpus < 2 ? 2 : cpus > MAX_THREADS ? MAX_THREADS :
	    (unsigned)cpus);
}

/* Start the gather threads for steps of @rows rows of @row_bytes. */
static int
gpool_start(struct gpool *g, const uint8_t *src, uint8_t *dst,
    uint64_t samples, size_t row_bytes, unsigned rows)
{
	struct gpool_arg	*a;
	unsigned		 t;

	memset(g, 0, sizeof(*g));
	g->src = src;
	g->dst = dst;
	g->samples = samples;
	g->row_bytes = row_bytes;
	g->rows = rows;
	g->threads = limit_threads();
	if (g->threads > rows)
		g->threads = rows;
	if ((g->idx = calloc(rows, sizeof(*g->idx))) == NULL)
		return (-1);
	pthread_barrier_init(&g->go, NULL, g->threads + 1);
	pthread_barrier_init(&g->done, NULL, g->threads + 1);
	for (t = 0; t < g->threads; t++) {
		if ((a = malloc(sizeof(*a))) == NULL)
			return (-1);
		a->g = g;
		a->t = t;
		if (pthread_create(&g->th[t], NULL, gpool_main, a) != 0)
			return (-1);
	}
	return (0);
}

/* Stop and join the gather threads. */
static void
gpool_stop(struct gpool *g)
{
	unsigned	t;

	g->stop = true;
	pthread_barrier_wait(&g->go);
	for (t = 0; t < g->threads; t++)
		pthread_join(g->th[t], NULL);
	pthread_barrier_destroy(&g->go);
	pthread_barrier_destroy(&g->done);
	free(g->idx);
}

/*
 * The limit's byte check: every row of the last step gathered holds the
 * bytes of the row it was copied from, or the measurement is broken
 * (exit status 3): a fast gather that copies the wrong bytes is no limit.
 */
static void
gpool_check_bytes(const struct gpool *g, const uint8_t *src)
{
	unsigned	r;

	for (r = 0; r < g->rows; r++) {
		if (memcmp(g->dst + (size_t)r * g->row_bytes, src +
		    (size_t)g->idx[r] * g->row_bytes, g->row_bytes) == 0)
			continue;
		printf("broken measurement: the gather limit's row %u holds "
		    "other bytes than row %u of its source; no ratio is "
		    "reported.\n", r, g->idx[r]);
		exit(3);
	}
}

static double	self_cpu_s(void);

/* Run @steps steps of the pool (from @plain when not NULL): items/s. */
static double
gpool_run(struct gpool *g, const uint8_t *plain, uint64_t plain_rows,
    uint64_t steps)
{
	double	t0;

	g->plain = plain;
	g->plain_rows = plain_rows;
	g->steps = steps;
	t0 = now_s();
	pthread_barrier_wait(&g->go);
	pthread_barrier_wait(&g->done);
	t0 = now_s() - t0;
	gpool_check_bytes(g, plain != NULL ? plain : g->src);
	g->plain = NULL;
	return ((double)steps * g->rows / t0);
}

/*
 * items/s of @steps gathers of random rows by the pool; @reads: each
 * thread then reads every page of its share of the step, as a client
 * that reads every page does (--reads pages).
 */
static double
gpool_rate(struct gpool *g, uint64_t steps, bool reads)
{
	double	rate;

	g->reads = reads;
	rate = gpool_run(g, NULL, 0, steps);
	g->reads = false;
	return (rate);
}

/*
 * The round's limit for @steps steps, like for like with infeed's client
 * (reading every page with --reads pages), its CPU a row in *@cpu, and
 * in *@plain the limit that reads nothing (round seven's, the same as
 * the first without --reads pages).
 */
static double
limit_round(const struct bench *b, struct gpool *g, uint64_t steps,
    double *cpu, double *plain)
{
	double	c0 = self_cpu_s(), lim;

	lim = gpool_rate(g, steps, b->reads);
	*cpu = (self_cpu_s() - c0) / ((double)steps * g->rows);
	*plain = b->reads ? gpool_rate(g, steps, false) : lim;
	return (lim);
}

/*
 * items/s of a plain copy (the limit's own copy_row()) of @steps steps'
 * bytes by the same threads into the same buffer, row after row of
 * @plain (@plain_rows rows of pre-faulted anonymous memory, more than
 * any cache holds): the limit's self-check.  The limit gathers the same
 * bytes from random rows of the file; far below this, it measures
 * something else.
 */
static double
gpool_copy_rate(struct gpool *g, const uint8_t *plain, uint64_t plain_rows,
    uint64_t steps)
{
	return (gpool_run(g, plain, plain_rows, steps));
}

/* Rows of the copy check's source: at least 256 MiB and a step. */
static uint64_t
plain_rows_for(size_t row_bytes, unsigned rows)
{
	uint64_t	n = (PLAIN_BYTES + row_bytes - 1) / row_bytes;

	return (n > rows ? n : rows);
}

/*
 * Print the copy check beside the limit (medians of the rounds), or,
 * when the limit is far below it, say the measurement is broken and exit:
 * a ratio to a wrong limit is not a figure.
 */
static void
limit_check(double lim, double cpy, size_t row_bytes)
{
	printf("copy check        %.0f items/s (%.2f GB/s): the limit is "
	    "%.2f of a plain copy (>= %.2f expected)\n", cpy,
	    cpy * row_bytes / 1e9, lim / cpy, LIMIT_MIN_OF_MEMCPY);
	if (lim >= LIMIT_MIN_OF_MEMCPY * cpy)
		return;
	printf("broken measurement: the gather limit (%.0f items/s) is %.2f "
	    "of a plain copy of the same bytes by the same threads in the "
	    "same run (%.0f items/s); expected at least %.2f.  The limit is "
	    "wrong (its buffers, threads or timing), so no ratio is "
	    "reported.\n", lim, lim / cpy, cpy, LIMIT_MIN_OF_MEMCPY);
	exit(3);
}

/* Count a fault a client found, saying what it was the first few times. */
static void
check_fail(struct check *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
check_fail(struct check *c, const char *fmt, ...)
{
	va_list	ap;

	__atomic_fetch_add(&c->sh->bad, 1, __ATOMIC_RELAXED);
	if (c->reports++ >= CHECK_REPORTS)
		return;
	fprintf(stderr, "bench: check: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The first 4 bytes the file holds for sample @idx. */
static uint32_t
check_word(const struct check *c, uint64_t idx)
{
	unsigned	i = (unsigned)idx;
	uint32_t	w;
	float		v;

	if (!c->tutorial)
		return ((uint32_t)idx);
	/* What main() writes for element 0 of sample i. */
	v = (float)((i * 31 + 0) % 1000) / 1000.0f;
	memcpy(&w, &v, sizeof(w));
	return (w);
}

/* Check step @st against (@epoch, @step) and count its indices. */
static void
check_step(struct check *c, const struct infeed_session_info *info,
    const struct infeed_step *st, uint64_t epoch, uint64_t step)
{
	const uint8_t	*row;
	uint64_t	 k, idx, whole;
	uint32_t	 w;

	if (st->epoch != epoch || st->step != step)
		check_fail(c, "got epoch %" PRIu64 " step %" PRIu64 " where "
		    "epoch %" PRIu64 " step %" PRIu64 " was due", st->epoch,
		    st->step, epoch, step);
	if (st->rows != info->combined_batch_size)
		check_fail(c, "epoch %" PRIu64 " step %" PRIu64 ": %" PRIu64
		    " rows, not %" PRIu64, st->epoch, st->step, st->rows,
		    info->combined_batch_size);
	for (k = 0; k < st->rows; k++) {
		idx = st->indices[k];
		if (idx >= c->samples) {
			check_fail(c, "epoch %" PRIu64 " step %" PRIu64 " row %"
			    PRIu64 ": index %" PRIu64 " of %" PRIu64 " samples",
			    st->epoch, st->step, k, idx, c->samples);
			continue;
		}
		row = (const uint8_t *)st->data + k * info->sample_bytes;
		if (c->every_word || (k + step) % CHECK_WORD_EVERY == 0) {
			memcpy(&w, row, sizeof(w));
			if (w != check_word(c, idx))
				check_fail(c, "epoch %" PRIu64 " step %" PRIu64
				    " row %" PRIu64 ": the data is not sample %"
				    PRIu64 "'s", st->epoch, st->step, k, idx);
		}
		/* One row a step whole, a different row each step. */
		whole = (step * 97) % st->rows;
		if (k == whole && c->src != NULL && memcmp(row, c->src + idx *
		    info->sample_bytes, info->sample_bytes) != 0)
			check_fail(c, "epoch %" PRIu64 " step %" PRIu64 " row %"
			    PRIu64 ": its bytes are not sample %" PRIu64 "'s",
			    st->epoch, st->step, k, idx);
		if (st->epoch < c->epochs && __atomic_fetch_add(
		    &c->sh->count[st->epoch * c->samples + idx], 1,
		    __ATOMIC_RELAXED) != 0)
			__atomic_fetch_add(&c->sh->dup, 1, __ATOMIC_RELAXED);
	}
}

/*
 * Whether the checked epochs of the round hold every index at most once
 * and, together, @per_epoch rows each; says why not on stderr.
 */
static bool
check_round(const struct check *c, unsigned epochs, uint64_t per_epoch)
{
	uint64_t	e, i, total;
	bool		ok = true;

	if (c->sh->bad != 0) {
		fprintf(stderr, "bench: exactly-once: %u wrong steps or rows\n",
		    c->sh->bad);
		ok = false;
	}
	if (c->sh->dup != 0) {
		fprintf(stderr, "bench: exactly-once: %u rows repeat an index "
		    "of their epoch\n", c->sh->dup);
		ok = false;
	}
	for (e = 0; e < epochs && e < c->epochs; e++) {
		total = 0;
		for (i = 0; i < c->samples; i++)
			total += c->sh->count[e * c->samples + i];
		if (total != per_epoch) {
			fprintf(stderr, "bench: exactly-once: epoch %" PRIu64
			    " delivered %" PRIu64 " rows, not %" PRIu64 "\n",
			    e, total, per_epoch);
			ok = false;
		}
	}
	return (ok);
}

/* Print the verdict of the checks: "exactly-once: ok" and what it covered. */
static void
check_print(const struct check *c, bool ok, uint64_t per_epoch)
{
	if (!ok) {
		printf("exactly-once: FAILED (see above)\n");
		return;
	}
	printf("exactly-once: ok (");
	if (c->epochs == 1)
		printf("epoch 0");
	else
		printf("epochs 0-%u", c->epochs - 1);
	printf(" of every round: each index at most once, %" PRIu64 " rows "
	    "an epoch)\n", per_epoch);
}

/* Wait for the parent to close the barrier pipe. */
static void
barrier_wait(int fd)
{
	char	c;

	while (read(fd, &c, 1) == -1 && errno == EINTR)
		;
}

/*
 * One client session as @r says; 0, or -1 with the reason on stderr.
 * @r->from_attach: timed from infeed_attach() with the first step
 * (r->first_s: its time to first step), else from the second step.
 */
static int
client_run(struct run *r)
{
	struct infeed			*f = infeed_new();
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_step		 st;
	const volatile uint8_t		*p;
	uint64_t			 k, total, sum = 0, epoch = 0, step = 0;
	size_t				 off;
	int				 rc = -1;

	r->items = 0;
	infeed_options_init(&o);
	o.batch_size = r->batch_size;
	o.device_iterations = r->device_iterations;
	o.shuffle = true;
	o.seed = r->seed;
	if (r->buffer_size != 0)
		o.buffer_size = r->buffer_size;
	if (r->distributed) {
		o.distributed_process_id = r->process_id;
		o.distributed_process_count = r->process_count;
	}
	if (infeed_connect(f, r->sock, "loader-vs-gather") != INFEED_OK) {
		fprintf(stderr, "bench: %s\n", infeed_error(f));
		goto out;
	}
	/* Timed from the Attach: the clients start together before it. */
	if (r->ready_fd != -1 && r->from_attach) {
		if (write(r->ready_fd, "r", 1) != 1)
			goto out;
		close(r->ready_fd);
		barrier_wait(r->go_fd);
	}
	r->t0 = now_s();
	if (infeed_attach(f, r->dataset, &o, &info) != INFEED_OK) {
		fprintf(stderr, "bench: %s\n", infeed_error(f));
		goto out;
	}
	r->steps_per_epoch = info.steps_per_epoch;
	r->cbs = info.combined_batch_size;
	if (r->ready_fd != -1 && !r->from_attach) {
		/* Closed, so that the parent sees EOF if another client dies. */
		if (write(r->ready_fd, "r", 1) != 1)
			goto out;
		close(r->ready_fd);
		barrier_wait(r->go_fd);
	}
	if (infeed_next(f, &st) != INFEED_OK)
		goto fail;
	r->first_s = now_s() - r->t0;
	if (r->chk != NULL)
		check_step(r->chk, &info, &st, epoch, step);
	if (++step == info.steps_per_epoch) {
		epoch++;
		step = 0;
	}
	if (r->from_attach)
		r->items += st.rows;
	infeed_release(f, &st);
	total = (uint64_t)r->epochs * info.steps_per_epoch;
	if (r->max_steps != 0 && r->max_steps < total)
		total = r->max_steps;
	/* Else the first step, which maps the ring, is not part of it. */
	if (!r->from_attach)
		r->t0 = now_s();
	for (k = 1; k < total; k++) {
		if (infeed_next(f, &st) != INFEED_OK)
			goto fail;
		p = st.data;
		for (off = 0; r->read_pages && off < st.rows *
		    info.sample_bytes; off += 4096)
			sum += p[off];
		if (r->chk != NULL)
			check_step(r->chk, &info, &st, epoch, step);
		if (++step == info.steps_per_epoch) {
			epoch++;
			step = 0;
		}
		r->items += st.rows;
		infeed_release(f, &st);
	}
	r->t1 = now_s();
	(void)sum;
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "bench: %s\n", infeed_error(f));
out:
	infeed_free(f);
	return (rc);
}

/* A run of the tutorial workload (B 16, DI 50) on @sock, no barrier. */
static void
run_tutorial(struct run *r, const char *sock, uint64_t seed, unsigned epochs)
{
	memset(r, 0, sizeof(*r));
	r->sock = sock;
	r->dataset = "tutorial-raw";
	r->batch_size = 16;
	r->device_iterations = 50;
	r->seed = seed;
	r->epochs = epochs;
	r->ready_fd = r->go_fd = -1;
}

/*
 * items/s of @epochs epochs of the tutorial workload through infeedd, or
 * -1 (a client that failed, or a step that broke exactly-once, said on
 * stderr).  @from_attach: timed from infeed_attach() with the first step
 * (*@first_s: its time to first step), else from the second step.  Every
 * step is checked (@chk), each session's epochs counted afresh.
 */
static double
infeed_rate(const struct bench *b, struct check *chk, unsigned epochs,
    unsigned round, bool from_attach, double *first_s)
{
	struct run	r;

	run_tutorial(&r, b->sock, round, epochs);
	r.from_attach = from_attach;
	r.read_pages = b->reads;
	r.chk = chk;
	memset(chk->sh, 0, sizeof(*chk->sh) + (size_t)CHECK_EPOCHS *
	    chk->samples);
	if (client_run(&r) == -1 || !check_round(chk, epochs,
	    r.steps_per_epoch * r.cbs))
		return (-1);
	if (first_s != NULL)
		*first_s = r.first_s;
	return ((double)r.items / (r.t1 - r.t0));
}

/* Start infeedd on @conf and @sock; wait for its socket. */
static pid_t
daemon_start(const char *infeedd, const char *conf, const char *sock)
{
	pid_t	pid;
	int	fd, i;

	unlink(sock);
	if ((pid = fork()) == 0) {
		fd = open("/dev/null", O_WRONLY);
		dup2(fd, 2);
		execl(infeedd, infeedd, "--config", conf, "--socket", sock,
		    (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 200 && access(sock, F_OK) != 0; i++)
		usleep(20000);
	usleep(100000);
	return (pid);
}

static void
daemon_stop(pid_t pid)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/* CPU ticks infeedd's process (all its threads) has used; 0 if unknown. */
static unsigned long long
daemon_cpu(pid_t pid)
{
	char			 path[64], buf[1024], *s;
	unsigned long long	 ut, st;
	ssize_t			 n;
	int			 fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY)) == -1)
		return (0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return (0);
	buf[n] = '\0';
	/* Fields 14 and 15 (utime, stime) follow the command's ')'. */
	if ((s = strrchr(buf, ')')) == NULL || sscanf(s + 1, " %*c %*d %*d "
	    "%*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return (0);
	return (ut + st);
}

/*
 * Wait until infeedd has used no CPU for 100 ms (at most 30 s): its
 * scrubber zeroes an ended session's ring, which must not overlap the
 * next limit.
 */
static void
daemon_settle(pid_t pid)
{
	unsigned long long	last, cur;
	int			i, idle = 0;

	usleep(50000);
	last = daemon_cpu(pid);
	for (i = 0; i < 600 && idle < 2; i++) {
		usleep(50000);
		cur = daemon_cpu(pid);
		idle = cur == last ? idle + 1 : 0;
		last = cur;
	}
}

/* CPU seconds this process's threads have used. */
static double
self_cpu_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

/* CPU seconds of this process's children that have been waited for. */
static double
children_cpu_s(void)
{
	struct rusage	ru;

	getrusage(RUSAGE_CHILDREN, &ru);
	return ((double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
}

#define TREE_MAX	8192	/* processes read from /proc */

/*
 * CPU seconds used by infeedd @pid and every process under it (its fork
 * server and workers), from /proc/N/stat; 0 if unknown.
 */
static double
daemon_tree_cpu_s(pid_t pid)
{
	static int		 tpid[TREE_MAX], tppid[TREE_MAX];
	static unsigned long long tcpu[TREE_MAX];
	static bool		 in[TREE_MAX];
	char			 path[300], buf[1024], *s;
	unsigned long long	 ut, st, sum = 0;
	struct dirent		*e;
	ssize_t			 n;
	size_t			 k = 0, i, j;
	bool			 grew = true;
	DIR			*d;
	int			 fd, pp;

	if ((d = opendir("/proc")) == NULL)
		return (0);
	while ((e = readdir(d)) != NULL && k < TREE_MAX) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		if ((fd = open(path, O_RDONLY)) == -1)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* Field 4 (ppid), 14 and 15 (utime, stime) after the ')'. */
		if ((s = strrchr(buf, ')')) == NULL || sscanf(s + 1, " %*c %d "
		    "%*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &pp, &ut,
		    &st) != 3)
			continue;
		tpid[k] = atoi(e->d_name);
		tppid[k] = pp;
		tcpu[k] = ut + st;
		in[k] = tpid[k] == (int)pid;
		k++;
	}
	closedir(d);
	while (grew) {
		grew = false;
		for (i = 0; i < k; i++)
			for (j = 0; !in[i] && j < k; j++)
				if (in[j] && tppid[i] == tpid[j])
					grew = in[i] = true;
	}
	for (i = 0; i < k; i++)
		if (in[i])
			sum += tcpu[i];
	return ((double)sum / (double)sysconf(_SC_CLK_TCK));
}

/* MemAvailable from /proc/meminfo in bytes; 0 if unknown. */
static uint64_t
mem_available(void)
{
	char			 line[256];
	unsigned long long	 kb = 0;
	FILE			*fp;

	if ((fp = fopen("/proc/meminfo", "r")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(fp);
	return ((uint64_t)kb * 1024);
}

/* Write @n int64 labels, i % 10, to @path. */
static int
write_labels(const char *path, uint64_t n)
{
	int64_t		*lab;
	uint64_t	 i;
	FILE		*fp;
	int		 rc = -1;

	if ((lab = malloc(n * sizeof(*lab))) == NULL)
		return (-1);
	for (i = 0; i < n; i++)
		lab[i] = (int64_t)(i % 10);
	if ((fp = fopen(path, "w")) != NULL) {
		if (fwrite(lab, sizeof(*lab), n, fp) == n)
			rc = 0;
		if (fclose(fp) != 0)
			rc = -1;
	}
	free(lab);
	return (rc);
}

/* Write the tutorial's file, its labels and infeedd's configuration. */
static void
write_tutorial(const struct bench *b)
{
	char		 buf[2048];
	uint8_t		*row;
	unsigned	 i, r;
	FILE		*fp;

	fprintf(stderr, "bench: writing %d samples of 64 KiB (%.0f MB) to %s\n",
	    N_SAMPLES, N_SAMPLES * (double)SAMPLE_BYTES / 1e6, b->data);
	fp = fopen(b->data, "w");
	row = malloc(SAMPLE_BYTES);
	for (i = 0; i < N_SAMPLES; i++) {
		for (r = 0; r < SAMPLE_BYTES / 4; r++)
			((float *)(void *)row)[r] = (float)((i * 31 + r) % 1000) /
			    1000.0f;
		fwrite(row, 1, SAMPLE_BYTES, fp);
	}
	fclose(fp);
	free(row);
	write_labels(b->labels, N_SAMPLES);
	snprintf(buf, sizeof(buf), "[infeedd]\nworkers = %u\n\n"
	    "[dataset tutorial-raw]\ntype = raw\npath = %s\nshape = 1,128,128\n"
	    "dtype = float32\nlabels = %s\nlabel_dtype = int64\nclasses = 10\n",
	    limit_threads(), b->data, b->labels);
	fp = fopen(b->conf, "w");
	fputs(buf, fp);
	fclose(fp);
}

/* Remove the run's files and directory. */
static void
bench_cleanup(const struct bench *b)
{
	unlink(b->data);
	unlink(b->labels);
	unlink(b->conf);
	unlink(b->sock);
	rmdir(b->dir);
}

/* A shared, zeroed mapping for the clients' results and index counts. */
static struct shared *
shared_new(uint64_t samples, size_t *len)
{
	struct shared	*sh;

	*len = sizeof(*sh) + (size_t)CHECK_EPOCHS * samples;
	sh = mmap(NULL, *len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return (sh == MAP_FAILED ? NULL : sh);
}

/* Say what the client reads, and the limit that reads nothing beside. */
static void
reads_print(const struct bench *b, double plain)
{
	if (!b->reads) {
		printf("reads             ids: the client checks every row's "
		    "index, the first word of 1 row in %d and 1 whole row a "
		    "step, and reads nothing else; the limit reads nothing "
		    "(like for like: a trainer's step goes to its device by "
		    "DMA)\n", CHECK_WORD_EVERY);
		return;
	}
	printf("reads             pages: the client reads every page of every "
	    "step and the limit's threads every page of theirs; the limit "
	    "that reads nothing: %.0f items/s\n", plain);
}

/* The default mode and --session: the tutorial's workload, one client. */
static int
tutorial_main(const struct bench *b, bool session, unsigned pause_ms)
{
	unsigned	 rounds = b->rounds, epochs = b->epochs, r;
	double		 lim[MAX_ROUNDS], inf[MAX_ROUNDS], cpy[MAX_ROUNDS];
	double		 ml, mi, c0, d0, lcpu[MAX_ROUNDS], icpu[MAX_ROUNDS];
	double		 cold[MAX_ROUNDS], warm[MAX_ROUNDS];
	double		 cold_f[MAX_ROUNDS], warm_f[MAX_ROUNDS];
	double		 cold_c[MAX_ROUNDS], warm_c[MAX_ROUNDS];
	double		 lim0[MAX_ROUNDS], r0[MAX_ROUNDS], r1[MAX_ROUNDS];
	uint8_t		*src, *dst, *plain;
	uint64_t	 plain_rows;
	struct shared	*sh;
	struct check	 chk;
	struct gpool	 g;
	size_t		 shlen;
	pid_t		 pid;
	int		 fd;

	write_tutorial(b);
	fd = open(b->data, O_RDONLY);
	src = mmap(NULL, (size_t)N_SAMPLES * SAMPLE_BYTES, PROT_READ,
	    MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	dst = buf_new((size_t)CBS * SAMPLE_BYTES);
	plain_rows = plain_rows_for(SAMPLE_BYTES, CBS);
	plain = buf_new((size_t)(plain_rows * SAMPLE_BYTES));
	if (src == MAP_FAILED || dst == NULL || plain == NULL ||
	    (sh = shared_new(N_SAMPLES, &shlen)) == NULL ||
	    gpool_start(&g, src, dst, N_SAMPLES, SAMPLE_BYTES, CBS) == -1)
		return (1);
	gpool_rate(&g, 12, false);	/* warm the page cache */
	memset(&chk, 0, sizeof(chk));
	chk.sh = sh;
	chk.samples = N_SAMPLES;
	chk.epochs = epochs < CHECK_EPOCHS ? epochs : CHECK_EPOCHS;
	chk.tutorial = true;
	chk.every_word = b->reads;
	chk.src = src;

	pid = daemon_start(b->infeedd, b->conf, b->sock);
	/*
	 * Loader-only is a served daemon's figure: an untimed session first,
	 * so that the first round, like the others, finds a kept ring (it
	 * was a first session's, fresh ring memory and all, until round
	 * eight).  --session times the first session itself.
	 */
	if (!session && infeed_rate(b, &chk, 1, 1000, false, NULL) < 0) {
		fprintf(stderr, "bench: warm-up: the client failed\n");
		r = 0;
		goto stop;
	}
	for (r = 0; r < rounds; r++) {
		daemon_settle(pid);
		lim[r] = limit_round(b, &g, 12 * epochs, &lcpu[r], &lim0[r]);
		cpy[r] = gpool_copy_rate(&g, plain, plain_rows, 12 * epochs);
		if (session) {
			daemon_stop(pid);
			pid = daemon_start(b->infeedd, b->conf, b->sock);
			/* Each session's CPU: its client, infeedd, workers. */
			c0 = self_cpu_s();
			d0 = daemon_tree_cpu_s(pid);
			cold[r] = infeed_rate(b, &chk, epochs, r, true,
			    &cold_f[r]);
			cold_c[r] = lcpu[r] / ((self_cpu_s() - c0 +
			    daemon_tree_cpu_s(pid) - d0) / (12.0 * epochs *
			    CBS));
			usleep(pause_ms * 1000);
			c0 = self_cpu_s();
			d0 = daemon_tree_cpu_s(pid);
			warm[r] = infeed_rate(b, &chk, epochs, r + 100, true,
			    &warm_f[r]);
			warm_c[r] = lcpu[r] / ((self_cpu_s() - c0 +
			    daemon_tree_cpu_s(pid) - d0) / (12.0 * epochs *
			    CBS));
			fprintf(stderr, "bench: round %u/%u: gather limit %.0f "
			    "items/s, first session %.0f (%.2f, first step "
			    "%.1f ms, cpu ratio %.2f), next session %.0f "
			    "(%.2f, first step %.1f ms, cpu ratio %.2f)\n",
			    r + 1, rounds, lim[r], cold[r], cold[r] / lim[r],
			    cold_f[r] * 1e3, cold_c[r], warm[r], warm[r] /
			    lim[r], warm_f[r] * 1e3, warm_c[r]);
			r0[r] = cold[r] / lim0[r];
			r1[r] = warm[r] / lim0[r];
			cold[r] /= lim[r];
			warm[r] /= lim[r];
			if (cold[r] < 0 || warm[r] < 0)
				break;
			continue;
		}
		c0 = self_cpu_s();
		d0 = daemon_tree_cpu_s(pid);
		inf[r] = infeed_rate(b, &chk, epochs, r, false, NULL);
		r0[r] = inf[r] / lim0[r];
		/* The client, infeedd and its workers; the first step too. */
		icpu[r] = (self_cpu_s() - c0 + daemon_tree_cpu_s(pid) - d0) /
		    (12.0 * epochs * CBS);
		fprintf(stderr, "bench: round %u/%u: gather limit %.0f items/s, "
		    "infeed %.0f items/s (%.0f%%); CPU a row %.2f and %.2f "
		    "us\n", r + 1, rounds, lim[r], inf[r], 100.0 * inf[r] /
		    lim[r], lcpu[r] * 1e6, icpu[r] * 1e6);
		lcpu[r] /= icpu[r];
		if (inf[r] < 0)
			break;
	}
stop:
	daemon_stop(pid);
	gpool_stop(&g);
	munmap(src, (size_t)N_SAMPLES * SAMPLE_BYTES);
	munmap(dst, (size_t)CBS * SAMPLE_BYTES);
	munmap(plain, (size_t)(plain_rows * SAMPLE_BYTES));
	munmap(sh, shlen);
	bench_cleanup(b);
	if (r < rounds) {
		printf("exactly-once: FAILED or a client failed (see above)\n");
		return (1);
	}

	ml = median(lim, (int)rounds);
	limit_check(ml, median(cpy, (int)rounds), SAMPLE_BYTES);
	reads_print(b, median(lim0, (int)rounds));
	if (session) {
		printf("workload          10000 x [1,128,128] float32, B 16, DI "
		    "50 (800 rows/step), shuffled, %u epochs (%u steps) timed "
		    "from Attach\n", epochs, epochs * 12);
		printf("gather limit      %.0f items/s, median of %u\n", ml,
		    rounds);
		printf("first session     %.2f of the limit, first step %.1f "
		    "ms, cpu ratio %.2f (medians)\n", median(cold,
		    (int)rounds), median(cold_f, (int)rounds) * 1e3,
		    median(cold_c, (int)rounds));
		printf("next session      %.2f of the limit, first step %.1f "
		    "ms, cpu ratio %.2f (medians; targets >= 0.85, <= 20 "
		    "ms)\n", median(warm, (int)rounds), median(warm_f,
		    (int)rounds) * 1e3, median(warm_c, (int)rounds));
		if (b->reads)
			printf("against a limit that reads nothing: first %.2f, "
			    "next %.2f (round seven's way)\n", median(r0,
			    (int)rounds), median(r1, (int)rounds));
		check_print(&chk, true, 12 * CBS);
		printf("{\"reads\":\"%s\",\"gather_items_per_s\":%.1f,\"plain_copy_items_per_s\":"
		    "%.1f,\"first_session_ratio\":"
		    "%.4f,\"first_session_first_step_s\":%.4f,"
		    "\"next_session_ratio\":%.4f,\"next_session_first_step_s\":"
		    "%.4f,\"first_session_cpu_ratio\":%.4f,"
		    "\"next_session_cpu_ratio\":%.4f,"
		    "\"first_ratio_to_limit_without_reads\":%.4f,"
		    "\"next_ratio_to_limit_without_reads\":%.4f,\"rounds\":%u,"
		    "\"epochs\":%u}\n", b->reads ? "pages" : "ids", ml,
		    median(cpy, (int)rounds), median(cold, (int)rounds), median(cold_f, (int)rounds),
		    median(warm, (int)rounds), median(warm_f, (int)rounds),
		    median(cold_c, (int)rounds), median(warm_c, (int)rounds),
		    median(r0, (int)rounds), median(r1, (int)rounds), rounds,
		    epochs);
		return (0);
	}
	mi = median(inf, (int)rounds);
	printf("workload          10000 x [1,128,128] float32, B 16, DI 50 "
	    "(800 rows/step), shuffled\n");
	printf("gather limit      %.0f items/s (%.2f GB/s), median of %u\n",
	    ml, ml * SAMPLE_BYTES / 1e9, rounds);
	printf("infeed            %.0f items/s (%.2f GB/s), median of %u\n",
	    mi, mi * SAMPLE_BYTES / 1e9, rounds);
	printf("ratio             %.2f (target >= 0.90 against the best gather, issue 35)\n", mi / ml);
	if (b->reads)
		printf("against a limit that reads nothing: %.2f (round seven's "
		    "way)\n", median(r0, (int)rounds));
	printf("cpu ratio         %.2f: the limit's CPU a row over infeed's "
	    "(its client, infeedd and workers), median of the rounds; what "
	    "the ratio would be on an idle machine where both keep every "
	    "CPU busy, and bent far less by other load\n", median(lcpu,
	    (int)rounds));
	check_print(&chk, true, 12 * CBS);
	printf("{\"reads\":\"%s\",\"gather_items_per_s\":%.1f,"
	    "\"plain_copy_items_per_s\":%.1f,"
	    "\"infeed_items_per_s\":%.1f,\"ratio\":%.4f,\"cpu_ratio\":%.4f,"
	    "\"ratio_to_limit_without_reads\":%.4f,\"infeed_cpu_us_a_row\":%.3f,"
	    "\"rounds\":%u,\"epochs\":%u}\n", b->reads ? "pages" : "ids", ml,
	    median(cpy, (int)rounds), mi, mi / ml, median(lcpu, (int)rounds),
	    median(r0, (int)rounds), median(icpu, (int)rounds) * 1e6, rounds,
	    epochs);
	return (0);
}

/*
 * One round of --clients: fork @n clients for @epochs epochs (at most
 * @max_steps steps, 0: no limit), let them go together, wait for them
 * all; 0, or -1 when one failed.
 */
static int
clients_round(const struct bench *b, struct shared *sh, struct check *chk,
    unsigned n, unsigned round, unsigned epochs, uint64_t max_steps)
{
	struct run	 r;
	int		 ready[2], go[2], status, rc = 0;
	unsigned	 i, got = 0;
	pid_t		 pids[MAX_CLIENTS];
	ssize_t		 len;
	char		 c;

	if (pipe(ready) == -1 || pipe(go) == -1)
		return (-1);
	fflush(stdout);
	fflush(stderr);
	for (i = 0; i < n; i++) {
		if ((pids[i] = fork()) == -1) {
			n = i;
			rc = -1;
			break;
		}
		if (pids[i] != 0)
			continue;
		close(ready[0]);
		close(go[1]);
		run_tutorial(&r, b->sock, round, epochs);
		r.distributed = true;
		r.process_id = i;
		r.process_count = n;
		r.max_steps = max_steps;
		r.from_attach = b->from_attach && chk != NULL;
		r.read_pages = b->reads;
		r.ready_fd = ready[1];
		r.go_fd = go[0];
		r.chk = chk;
		if (client_run(&r) == 0) {
			sh->res[i].t0 = r.t0;
			sh->res[i].t1 = r.t1;
			sh->res[i].items = r.items;
			sh->res[i].steps_per_epoch = r.steps_per_epoch;
			sh->res[i].cbs = r.cbs;
			sh->res[i].ok = 1;
		}
		_exit(sh->res[i].ok ? 0 : 1);
	}
	close(ready[1]);
	close(go[0]);
	/* Every client attached (or one died: its end of ready closed). */
	while (got < n) {
		if ((len = read(ready[0], &c, 1)) == 1)
			got++;
		else if (len == 0 || errno != EINTR)
			break;
	}
	close(go[1]);
	close(ready[0]);
	for (i = 0; i < n; i++) {
		while (waitpid(pids[i], &status, 0) == -1 && errno == EINTR)
			;
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
		    !sh->res[i].ok)
			rc = -1;
	}
	return (got == n ? rc : -1);
}

/* --clients: @n concurrent distributed clients on one infeedd. */
static int
clients_main(const struct bench *b, unsigned n)
{
	unsigned	 rounds = b->rounds, r, i;
	double		 lim[MAX_ROUNDS], agg[MAX_ROUNDS], ratio[MAX_ROUNDS];
	double		 cpy[MAX_ROUNDS], lcpu[MAX_ROUNDS], c0, d0, icpu;
	double		 fair[MAX_ROUNDS], win[MAX_ROUNDS], skew[MAX_ROUNDS];
	double		 lim0[MAX_ROUNDS], ratio0[MAX_ROUNDS];
	double		 rate[MAX_CLIENTS][MAX_ROUNDS], crate[MAX_CLIENTS];
	double		 first, last, lastt0, mean, dev, ml, ma;
	uint64_t	 items, spe, cbs = 0;
	struct shared	*sh;
	struct check	 chk;
	struct gpool	 g;
	uint8_t		*src, *dst, *plain;
	uint64_t	 plain_rows;
	size_t		 shlen;
	bool		 once = true, failed = false;
	pid_t		 pid;
	int		 fd;

	write_tutorial(b);
	fd = open(b->data, O_RDONLY);
	/* Written back now, not by the kernel in the middle of a round. */
	fdatasync(fd);
	src = mmap(NULL, (size_t)N_SAMPLES * SAMPLE_BYTES, PROT_READ,
	    MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	dst = buf_new((size_t)CBS * SAMPLE_BYTES);
	plain_rows = plain_rows_for(SAMPLE_BYTES, CBS);
	plain = buf_new((size_t)(plain_rows * SAMPLE_BYTES));
	if (src == MAP_FAILED || dst == NULL || plain == NULL ||
	    (sh = shared_new(N_SAMPLES, &shlen)) == NULL) {
		bench_cleanup(b);
		return (1);
	}
	if (gpool_start(&g, src, dst, N_SAMPLES, SAMPLE_BYTES, CBS) == -1)
		return (1);
	gpool_rate(&g, 12, false);	/* warm the page cache */
	memset(&chk, 0, sizeof(chk));
	chk.sh = sh;
	chk.samples = N_SAMPLES;
	chk.epochs = b->epochs < CHECK_EPOCHS ? b->epochs : CHECK_EPOCHS;
	chk.tutorial = true;
	chk.every_word = b->reads;
	chk.src = src;

	pid = daemon_start(b->infeedd, b->conf, b->sock);
	/* An untimed round first, so that every round finds the rings warm. */
	spe = N_SAMPLES / (CBS * n);
	fprintf(stderr, "bench: warm-up: %u clients, %u steps each, "
	    "untimed\n", n, WARM_STEPS);
	if (clients_round(b, sh, NULL, n, 1000, WARM_STEPS, WARM_STEPS) ==
	    -1) {
		fprintf(stderr, "bench: warm-up: a client failed\n");
		failed = true;
	}
	for (r = 0; !failed && r < rounds; r++) {
		daemon_settle(pid);
		lim[r] = limit_round(b, &g, (uint64_t)n * b->epochs * spe,
		    &lcpu[r], &lim0[r]);
		cpy[r] = gpool_copy_rate(&g, plain, plain_rows,
		    (uint64_t)n * b->epochs * spe);
		memset(sh, 0, shlen);
		c0 = children_cpu_s();
		d0 = daemon_tree_cpu_s(pid);
		if (clients_round(b, sh, &chk, n, r, b->epochs, 0) == -1) {
			fprintf(stderr, "bench: round %u/%u: a client "
			    "failed\n", r + 1, rounds);
			break;
		}
		items = 0;
		first = lastt0 = sh->res[0].t0;
		last = sh->res[0].t1;
		mean = 0;
		for (i = 0; i < n; i++) {
			items += sh->res[i].items;
			if (sh->res[i].t0 < first)
				first = sh->res[i].t0;
			if (sh->res[i].t0 > lastt0)
				lastt0 = sh->res[i].t0;
			if (sh->res[i].t1 > last)
				last = sh->res[i].t1;
			rate[i][r] = (double)sh->res[i].items /
			    (sh->res[i].t1 - sh->res[i].t0);
			mean += rate[i][r] / n;
		}
		spe = sh->res[0].steps_per_epoch;
		cbs = sh->res[0].cbs;
		dev = 0;
		for (i = 0; i < n; i++) {
			if (rate[i][r] - mean > dev)
				dev = rate[i][r] - mean;
			if (mean - rate[i][r] > dev)
				dev = mean - rate[i][r];
		}
		win[r] = last - first;
		skew[r] = lastt0 - first;
		agg[r] = (double)items / win[r];
		ratio[r] = agg[r] / lim[r];
		ratio0[r] = agg[r] / lim0[r];
		fair[r] = dev / mean;
		/* The clients (waited for), infeedd and its workers. */
		icpu = (children_cpu_s() - c0 + daemon_tree_cpu_s(pid) - d0) /
		    (double)items;
		lcpu[r] /= icpu;
		if (!check_round(&chk, b->epochs, (uint64_t)n * spe * cbs))
			once = false;
		fprintf(stderr, "bench: round %u/%u: gather limit %.0f "
		    "items/s, %u client(s) %.0f items/s (%.2f), fairness "
		    "%.3f, window %.2f s, starts spread %.1f ms\n", r + 1,
		    rounds, lim[r], n, agg[r], ratio[r], fair[r], win[r],
		    skew[r] * 1e3);
	}
	daemon_stop(pid);
	gpool_stop(&g);
	munmap(src, (size_t)N_SAMPLES * SAMPLE_BYTES);
	munmap(dst, (size_t)CBS * SAMPLE_BYTES);
	munmap(plain, (size_t)(plain_rows * SAMPLE_BYTES));
	bench_cleanup(b);
	munmap(sh, shlen);
	if (failed || r < rounds)
		return (1);

	ml = median(lim, (int)rounds);
	limit_check(ml, median(cpy, (int)rounds), SAMPLE_BYTES);
	reads_print(b, median(lim0, (int)rounds));
	ma = median(agg, (int)rounds);
	printf("workload          10000 x [1,128,128] float32, %u clients, "
	    "each distributed process i of %u: B 16, DI 50 (800 rows/step), "
	    "shuffled, same seed, %u epochs of %" PRIu64 " steps each, %s\n",
	    n, n, b->epochs, spe, b->from_attach ? "each timed from its "
	    "Attach, first step included" : "first step left out");
	printf("gather limit      %.0f items/s (%.2f GB/s), median of %u\n",
	    ml, ml * SAMPLE_BYTES / 1e9, rounds);
	printf("aggregate         %.0f items/s (%.2f GB/s), median of %u\n",
	    ma, ma * SAMPLE_BYTES / 1e9, rounds);
	/* Issue 25's target from the Attach; issue 17's for steady clients. */
	printf("ratio             %.2f of the limit (median of the rounds' "
	    "ratios; target >= %.2f)\n", median(ratio, (int)rounds),
	    b->from_attach ? 0.85 : 0.80);
	if (b->reads)
		printf("against a limit that reads nothing: %.2f (round seven's "
		    "way)\n", median(ratio0, (int)rounds));
	for (i = 0; i < n; i++) {
		crate[i] = median(rate[i], (int)rounds);
		printf("client %u          %.0f items/s (%.2f GB/s)\n", i,
		    crate[i], crate[i] * SAMPLE_BYTES / 1e9);
	}
	printf("fairness          %.3f max |client - mean| / mean (median; "
	    "target <= %.2f)\n", median(fair, (int)rounds), b->from_attach ?
	    0.15 : 0.25);
	printf("cpu ratio         %.2f: the limit's CPU a row over infeed's "
	    "(clients, infeedd and workers), median of the rounds\n",
	    median(lcpu, (int)rounds));
	printf("window            %.2f s, client starts spread %.1f ms "
	    "(medians), after an untimed warm-up of %d steps a client\n",
	    median(win, (int)rounds), median(skew, (int)rounds) * 1e3,
	    WARM_STEPS);
	check_print(&chk, once, (uint64_t)n * spe * cbs);
	printf("{\"mode\":\"clients\",\"reads\":\"%s\",\"from_attach\":%s,"
	    "\"clients\":%u,\"ratio_to_limit_without_reads\":%.4f,"
	    "\"gather_items_per_s\":%.1f,\"plain_copy_items_per_s\":%.1f,\"aggregate_items_per_s\":%.1f,\"gather_gb_per_s\":%.3f,"
	    "\"aggregate_gb_per_s\":%.3f,\"ratio\":%.4f,\"cpu_ratio\":%.4f,"
	    "\"fairness\":%.4f,\"client_items_per_s\":[", b->reads ? "pages" :
	    "ids", b->from_attach ? "true" : "false", n, median(ratio0,
	    (int)rounds), ml, median(cpy, (int)rounds), ma,
	    ml * SAMPLE_BYTES / 1e9, ma * SAMPLE_BYTES / 1e9,
	    median(ratio, (int)rounds), median(lcpu, (int)rounds),
	    median(fair, (int)rounds));
	for (i = 0; i < n; i++)
		printf("%s%.1f", i ? "," : "", crate[i]);
	printf("],\"window_s\":%.4f,\"start_spread_s\":%.4f,\"exactly_once\":"
	    "%s,\"steps_per_epoch\":%" PRIu64 ",\"rounds\":%u,\"epochs\":%u}\n",
	    median(win, (int)rounds), median(skew, (int)rounds),
	    once ? "true" : "false", spe, rounds, b->epochs);
	return (once ? 0 : 1);
}

/* Bytes of a ring of @slots slots of @rows rows of @x bytes (ring.c). */
static uint64_t
cell_ring_bytes(uint64_t rows, uint64_t x, unsigned slots)
{
	uint64_t	slot;

	slot = (rows * x + 63) / 64 * 64 + (rows * 8 + 63) / 64 * 64 +
	    rows * 8;
	return ((slot + 4095) / 4096 * 4096 * slots);
}

/* Print a skipped cell and its JSON line. */
static int
cell_skip(uint64_t x, unsigned rows, uint64_t samples, const char *why)
{
	printf("cell              %" PRIu64 " bytes x %u rows: skipped: %s\n",
	    x, rows, why);
	printf("{\"mode\":\"cell\",\"row_bytes\":%" PRIu64 ",\"rows\":%u,"
	    "\"samples\":%" PRIu64 ",\"skipped\":true,\"reason\":\"%s\"}\n", x,
	    rows, samples, why);
	return (0);
}

/*
 * Write @n samples of @x bytes, each its index in its first 4 bytes and a
 * fixed pattern after it (float32 when @f32, else uint8).
 */
static int
cell_write(const char *path, uint64_t n, size_t x, bool f32)
{
	size_t		 per, k, j, chunk;
	uint64_t	 i;
	uint32_t	 w;
	uint8_t		*buf;
	double		 t0 = now_s();
	int		 fd, rc = -1;

	per = x >= (8u << 20) ? 1 : (8u << 20) / x;
	if ((buf = malloc(per * x)) == NULL)
		return (-1);
	for (j = 0; j < x; j++)
		buf[j] = (uint8_t)(j % 251);
	if (f32)
		for (j = 0; j < x / 4; j++)
			((float *)(void *)buf)[j] = (float)(j % 1000) / 1000.0f;
	for (k = 1; k < per; k++)
		memcpy(buf + k * x, buf, x);
	fprintf(stderr, "bench: writing %" PRIu64 " samples of %zu bytes (%.0f "
	    "MB) to %s\n", n, x, (double)n * x / 1e6, path);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) == -1)
		goto out;
	for (i = 0; i < n; i += chunk) {
		chunk = n - i < per ? (size_t)(n - i) : per;
		for (k = 0; k < chunk; k++) {
			w = (uint32_t)(i + k);
			memcpy(buf + k * x, &w, sizeof(w));
		}
		if (write(fd, buf, chunk * x) != (ssize_t)(chunk * x))
			goto out;
	}
	/* Written back now, not by the kernel in the middle of a round. */
	if (fdatasync(fd) == -1)
		goto out;
	rc = 0;
	fprintf(stderr, "bench: written in %.1f s\n", now_s() - t0);
out:
	if (fd != -1 && close(fd) != 0)
		rc = -1;
	free(buf);
	return (rc);
}

/* Cell mode: rows of @x bytes, @rows a step, against the cell's limit. */
static int
cell_main(const struct bench *b, uint64_t x, unsigned rows, uint64_t samples,
    unsigned slots, double gb)
{
	unsigned	 rounds = b->rounds, epochs = b->epochs, r, s, di, bs;
	unsigned	 least;
	double		 lim[MAX_ROUNDS], inf[MAX_ROUNDS], ratio[MAX_ROUNDS];
	double		 cpy[MAX_ROUNDS], ml, mi;
	uint64_t	 plain_bytes, plain_rows, step_bytes, file_bytes, need = 0, avail, budget, spe;
	uint64_t	 steps, off, sum = 0;
	const volatile uint8_t *p;
	char		 why[256], buf[2048], shape[64];
	struct shared	*sh = NULL;
	struct check	 chk;
	struct gpool	 g;
	struct run	 run;
	uint8_t		*src, *dst, *plain;
	size_t		 shlen = 0;
	bool		 f32 = x % 4 == 0, once = true, failed = false;
	pid_t		 pid;
	FILE		*fp;
	int		 fd;

	if (samples == 0) {
		samples = CELL_FILE_BYTES / x;
		if (samples < 2 * (uint64_t)rows)
			samples = 2 * (uint64_t)rows;
	}
	if (samples < 2 * (uint64_t)rows || samples > UINT32_MAX) {
		fprintf(stderr, "bench: --samples %" PRIu64 ": at least twice "
		    "--rows (%u) and below 2^32\n", samples, rows);
		return (2);
	}
	if (rows % 16 == 0) {
		bs = 16;
		di = rows / 16;
	} else {
		bs = rows;
		di = 1;
	}
	step_bytes = (uint64_t)rows * x;
	plain_rows = plain_rows_for((size_t)x, rows);
	plain_bytes = plain_rows * x;
	file_bytes = samples * x;
	spe = samples / rows;
	if (!b->epochs_set) {
		epochs = (unsigned)(gb * 1e9 / ((double)spe * step_bytes));
		if ((double)epochs * spe * step_bytes < gb * 1e9)
			epochs++;
		while ((uint64_t)epochs * spe < CELL_MIN_STEPS)
			epochs++;
	}
	steps = (uint64_t)epochs * spe;

	/* The file, the ring and the gather's buffer stay in memory. */
	avail = mem_available();
	least = slots != 0 ? slots : 2;
	for (s = slots != 0 ? slots : 3; s >= least; s--) {
		need = file_bytes + cell_ring_bytes(rows, x, s) + step_bytes +
		    plain_bytes;
		if (avail == 0 || need + CELL_SPARE <= avail)
			break;
	}
	if (s < least) {
		snprintf(why, sizeof(why), "file %.2f GB + ring of %u slots "
		    "%.2f GB + gather buffers %.2f GB = %.2f GB, over "
		    "MemAvailable %.2f GB less 3 GiB", file_bytes / 1e9, least,
		    cell_ring_bytes(rows, x, least) / 1e9,
		    (step_bytes + plain_bytes) / 1e9,
		    need / 1e9, avail / 1e9);
		return (cell_skip(x, rows, samples, why));
	}
	slots = s;
	budget = cell_ring_bytes(rows, x, slots) + 256 * 1024 * 1024;
	budget = (budget + (1 << 20) - 1) >> 20;	/* MiB */
	if (budget < 4096)
		budget = 4096;
	if (f32)
		snprintf(shape, sizeof(shape), "float32 [1,%" PRIu64 "]",
		    x / 4);
	else
		snprintf(shape, sizeof(shape), "uint8 [1,%" PRIu64 "]", x);
	fprintf(stderr, "bench: cell %" PRIu64 " bytes x %u rows: %" PRIu64
	    " samples, B %u DI %u, %u slots, memory_budget %" PRIu64 "M, %u "
	    "epochs of %" PRIu64 " steps\n", x, rows, samples, bs, di, slots,
	    budget, epochs, spe);

	if (cell_write(b->data, samples, (size_t)x, f32) == -1 ||
	    write_labels(b->labels, samples) == -1) {
		fprintf(stderr, "bench: %s: %s\n", b->data, strerror(errno));
		bench_cleanup(b);
		return (1);
	}
	snprintf(buf, sizeof(buf), "[infeedd]\nworkers = %u\nmemory_budget = %"
	    PRIu64 "M\n\n[dataset cell-raw]\ntype = raw\npath = %s\nshape = "
	    "1,%" PRIu64 "\ndtype = %s\nlabels = %s\nlabel_dtype = int64\n"
	    "classes = 10\n", limit_threads(), budget, b->data, f32 ? x / 4 : x,
	    f32 ? "float32" : "uint8", b->labels);
	if ((fp = fopen(b->conf, "w")) == NULL) {
		bench_cleanup(b);
		return (1);
	}
	fputs(buf, fp);
	fclose(fp);

	fd = open(b->data, O_RDONLY);
	src = mmap(NULL, (size_t)file_bytes, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	dst = buf_new((size_t)step_bytes);
	plain = buf_new((size_t)plain_bytes);
	if (src == MAP_FAILED || dst == NULL || plain == NULL ||
	    (sh = shared_new(samples, &shlen)) == NULL) {
		bench_cleanup(b);
		return (1);
	}
	/* Pre-touch the source and pre-fault the destination. */
	for (off = 0; off < file_bytes; off += 4096) {
		p = src + off;
		sum += *p;
	}
	(void)sum;
	if (gpool_start(&g, src, dst, samples, (size_t)x, rows) == -1)
		return (1);
	gpool_rate(&g, 2, false);
	memset(&chk, 0, sizeof(chk));
	chk.sh = sh;
	chk.samples = samples;
	chk.epochs = epochs < CHECK_EPOCHS ? epochs : CHECK_EPOCHS;
	chk.every_word = b->reads;
	chk.src = src;

	memset(&run, 0, sizeof(run));
	run.sock = b->sock;
	run.dataset = "cell-raw";
	run.batch_size = bs;
	run.device_iterations = di;
	run.buffer_size = slots;
	run.read_pages = b->reads;
	run.ready_fd = run.go_fd = -1;
	pid = daemon_start(b->infeedd, b->conf, b->sock);
	/* An untimed session first, so that every round finds the ring warm. */
	run.seed = 1000;
	run.epochs = slots + 1;
	run.max_steps = slots + 1;
	fprintf(stderr, "bench: warm-up: %u steps, untimed\n", slots + 1);
	if (client_run(&run) == -1) {
		fprintf(stderr, "bench: warm-up: the client failed\n");
		failed = true;
	}
	run.chk = &chk;
	for (r = 0; !failed && r < rounds; r++) {
		daemon_settle(pid);
		lim[r] = gpool_rate(&g, steps - 1, b->reads);
		cpy[r] = gpool_copy_rate(&g, plain, plain_rows, steps - 1);
		memset(sh, 0, shlen);
		run.seed = r;
		run.epochs = epochs;
		run.max_steps = 0;
		if (client_run(&run) == -1) {
			fprintf(stderr, "bench: round %u/%u: the client "
			    "failed\n", r + 1, rounds);
			break;
		}
		inf[r] = (double)run.items / (run.t1 - run.t0);
		ratio[r] = inf[r] / lim[r];
		if (!check_round(&chk, epochs, spe * rows))
			once = false;
		fprintf(stderr, "bench: round %u/%u: gather limit %.0f "
		    "items/s, infeed %.0f items/s (%.0f%%)\n", r + 1, rounds,
		    lim[r], inf[r], 100.0 * ratio[r]);
	}
	daemon_stop(pid);
	gpool_stop(&g);
	munmap(src, (size_t)file_bytes);
	munmap(sh, shlen);
	munmap(dst, (size_t)step_bytes);
	munmap(plain, (size_t)plain_bytes);
	bench_cleanup(b);
	if (failed || r < rounds)
		return (1);

	ml = median(lim, (int)rounds);
	limit_check(ml, median(cpy, (int)rounds), (size_t)x);
	mi = median(inf, (int)rounds);
	printf("workload          %" PRIu64 " x %s (%" PRIu64 " bytes a row, "
	    "%.0f MB), B %u, DI %u (%u rows/step, %.1f MB), shuffled, %u "
	    "epochs of %" PRIu64 " steps, first step left out\n", samples,
	    shape, x, file_bytes / 1e6, bs, di, rows, step_bytes / 1e6,
	    epochs, spe);
	printf("ring              %u slots (buffer_size), memory_budget %"
	    PRIu64 "M, after an untimed warm-up session\n", slots, budget);
	printf("gather limit      %.0f items/s (%.2f GB/s), median of %u\n",
	    ml, ml * x / 1e9, rounds);
	printf("infeed            %.0f items/s (%.2f GB/s), median of %u\n",
	    mi, mi * x / 1e9, rounds);
	printf("ratio             %.2f (median of the rounds' ratios)\n",
	    median(ratio, (int)rounds));
	check_print(&chk, once, spe * rows);
	printf("{\"mode\":\"cell\",\"row_bytes\":%" PRIu64 ",\"rows\":%u,"
	    "\"samples\":%" PRIu64 ",\"dtype\":\"%s\",\"batch_size\":%u,"
	    "\"device_iterations\":%u,\"buffer_size\":%u,\"memory_budget_mib\":"
	    "%" PRIu64 ",\"gather_items_per_s\":%.1f,\"plain_copy_items_per_s\":"
	    "%.1f,\"infeed_items_per_s\":"
	    "%.1f,\"gather_gb_per_s\":%.3f,\"infeed_gb_per_s\":%.3f,\"ratio\":"
	    "%.4f,\"exactly_once\":%s,\"skipped\":false,\"steps_per_epoch\":%"
	    PRIu64 ",\"rounds\":%u,\"epochs\":%u}\n", x, rows, samples,
	    f32 ? "float32" : "uint8", bs, di, slots, budget, ml,
	    median(cpy, (int)rounds), mi,
	    ml * x / 1e9, mi * x / 1e9, median(ratio, (int)rounds),
	    once ? "true" : "false", spe, rounds, epochs);
	return (once ? 0 : 1);
}

/* An unsigned option's value, or exit with the usage. */
static uint64_t
arg_uint(const char *opt, const char *v, uint64_t lo, uint64_t hi)
{
	char			*end;
	unsigned long long	 n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0 || *v == '\0' || *v == '-' || *end != '\0' || n < lo ||
	    n > hi) {
		fprintf(stderr, "bench: %s %s: expected %" PRIu64 " to %"
		    PRIu64 "\n", opt, v, lo, hi);
		exit(2);
	}
	return (n);
}

int
main(int argc, char **argv)
{
	const char	*tmp = getenv("TMPDIR");
	struct bench	 b;
	unsigned	 i, pause_ms = 0, clients = 0, rows = 0, slots = 0;
	unsigned	 spe;
	uint64_t	 row_bytes = 0, samples = 0;
	double		 gb = 3;
	bool		 session = false;

	memset(&b, 0, sizeof(b));
	b.rounds = 5;
	b.epochs = 4;
	if (argc < 2) {
		fprintf(stderr, "usage: loader-vs-gather INFEEDD [--rounds N] "
		    "[--epochs E] [--reads ids|pages]\n"
		    "           [--session [--pause-ms MS]] [--clients N "
		    "[--from-attach]]\n"
		    "           [--row-bytes X --rows R [--samples S] "
		    "[--buffer-size SLOTS] [--gb G]]\n");
		return (2);
	}
	b.infeedd = argv[1];
	for (i = 2; i < (unsigned)argc; i++) {
		if (strcmp(argv[i], "--session") == 0) {
			session = true;
			b.epochs = 6;
		} else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--rounds") == 0)
			b.rounds = (unsigned)atoi(argv[++i]);
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--pause-ms") == 0)
			pause_ms = (unsigned)atoi(argv[++i]);
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--epochs") == 0) {
			b.epochs = (unsigned)atoi(argv[++i]);
			b.epochs_set = true;
		} else if (strcmp(argv[i], "--from-attach") == 0)
			b.from_attach = true;
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--reads") == 0) {
			if (strcmp(argv[i + 1], "pages") != 0 &&
			    strcmp(argv[i + 1], "ids") != 0) {
				fprintf(stderr, "bench: --reads %s: expected "
				    "ids (the default) or pages\n", argv[i + 1]);
				return (2);
			}
			b.reads = strcmp(argv[++i], "pages") == 0;
		}
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--clients") == 0)
			clients = (unsigned)arg_uint(argv[i], argv[i + 1], 1,
			    MAX_CLIENTS), i++;
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--row-bytes") == 0)
			row_bytes = arg_uint(argv[i], argv[i + 1], 4,
			    64 << 20), i++;
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--rows") == 0)
			rows = (unsigned)arg_uint(argv[i], argv[i + 1], 1,
			    1 << 20), i++;
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--samples") == 0)
			samples = arg_uint(argv[i], argv[i + 1], 2,
			    UINT32_MAX), i++;
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--buffer-size") == 0)
			slots = (unsigned)arg_uint(argv[i], argv[i + 1], 1,
			    INFEED_MAX_SLOTS), i++;
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--gb") == 0) {
			gb = atof(argv[++i]);
			if (!(gb > 0 && gb < 1e4)) {
				fprintf(stderr, "bench: --gb: a size in GB\n");
				return (2);
			}
		} else {
			fprintf(stderr, "bench: unknown option %s\n", argv[i]);
			return (2);
		}
	}
	if (b.rounds < 1 || b.rounds > MAX_ROUNDS || b.epochs < 1) {
		fprintf(stderr, "bench: --rounds 1..32, --epochs >= 1\n");
		return (2);
	}
	if ((row_bytes != 0) != (rows != 0) || (row_bytes != 0 &&
	    (session || clients != 0)) || (session && clients != 0) ||
	    ((samples != 0 || slots != 0) && row_bytes == 0)) {
		fprintf(stderr, "bench: one mode: --session, --clients N, or "
		    "--row-bytes X --rows R (with --samples, --buffer-size, "
		    "--gb)\n");
		return (2);
	}
	if (b.from_attach && (clients == 0 || b.epochs_set)) {
		fprintf(stderr, "bench: --from-attach goes with --clients N "
		    "and takes no --epochs (72 steps a client)\n");
		return (2);
	}
	/* 72 steps a client: a whole number of epochs for 1, 2, 4 or 8. */
	if (b.from_attach) {
		spe = N_SAMPLES / (CBS * clients);
		if (72 % spe != 0) {
			fprintf(stderr, "bench: --from-attach: 72 steps are "
			    "not whole epochs of %u steps; use 1, 2, 4 or 8 "
			    "clients\n", spe);
			return (2);
		}
		b.epochs = 72 / spe;
	}
	/* 8 epochs, and at least 24 steps a client: its share is 1/N. */
	if (clients != 0 && !b.epochs_set && !b.from_attach) {
		spe = N_SAMPLES / (CBS * clients);
		b.epochs = (24 + spe - 1) / spe;
		if (b.epochs < 8)
			b.epochs = 8;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(b.dir, sizeof(b.dir), "%s/infeed-bench-XXXXXX",
	    tmp ? tmp : "/tmp");
	if (mkdtemp(b.dir) == NULL)
		return (1);
	snprintf(b.data, sizeof(b.data), "%s/%s", b.dir, row_bytes != 0 ?
	    "cell.bin" : "tutorial.f32");
	snprintf(b.labels, sizeof(b.labels), "%s/%s", b.dir, row_bytes != 0 ?
	    "cell.labels" : "tutorial.labels");
	snprintf(b.conf, sizeof(b.conf), "%s/infeedd.conf", b.dir);
	snprintf(b.sock, sizeof(b.sock), "%s/infeedd.sock", b.dir);

	if (row_bytes != 0) {
		i = (unsigned)cell_main(&b, row_bytes, rows, samples, slots,
		    gb);
		bench_cleanup(&b);
		return ((int)i);
	}
	if (clients != 0)
		return (clients_main(&b, clients));
	return (tutorial_main(&b, session, pause_ms));
}
