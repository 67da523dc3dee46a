/* SPDX-License-Identifier: MIT */
/*
 * Loader-only throughput of the data-loading tutorial's workload, against
 * this machine's own limit for the same job, measured in the same run.
 *
 *   workload: 10000 samples of [1,128,128] float32 (64 KiB each) in a raw
 *             file in the page cache; B 16, DI 50 (800 rows a step),
 *             shuffled.
 *   limit:    gathering 800 random 64 KiB rows of the mapped file into one
 *             reused buffer with 2 threads, as fast as memcpy goes.
 *   infeed:   the real infeedd (2 workers) serving the same file as a `raw`
 *             dataset, read through libinfeed by a client that touches
 *             every page of every step.
 *
 * The limit is that gather: a reused, pre-faulted destination, a
 * pre-touched source, 2 threads, measured in the same run as infeed and
 * interleaved with it, round by round; every figure is a median.
 *
 * It alternates the two measurements --rounds times and prints the median
 * of each and the ratio of the medians (the first step of each session is
 * left out: a steady-state figure).
 *
 * --session: issue 17's 72-step session instead.  Each round measures the
 * limit, restarts infeedd, and times two sessions of 6 epochs (72 steps)
 * from the call to infeed_attach() to the last step released, first step
 * included: the first session after the daemon starts ("cold") and the
 * next one on the same daemon ("warm", which may reuse the first one's
 * kept ring memory).  It reports their ratios to the limit and their time
 * to first step (from infeed_attach() to the first step in hand).
 *
 * usage: loader-vs-gather INFEEDD [--rounds N] [--epochs E] [--session]
 */

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infeed.h"

#define N_SAMPLES	10000
#define SAMPLE_BYTES	(128 * 128 * 4)
#define CBS		800
#define THREADS		2

struct gather_arg {
	const uint8_t	*src;
	uint8_t		*dst;
	const uint32_t	*idx;
	unsigned	 begin, end;
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

/* One thread's share of a gather. */
static void *
gather_thread(void *p)
{
	struct gather_arg	*a = p;
	unsigned		 r;

	for (r = a->begin; r < a->end; r++)
		memcpy(a->dst + (size_t)r * SAMPLE_BYTES,
		    a->src + (size_t)a->idx[r] * SAMPLE_BYTES, SAMPLE_BYTES);
	return (NULL);
}

/* items/s of gathering @steps steps of random rows with 2 threads. */
static double
gather_limit(const uint8_t *src, uint8_t *dst, unsigned steps)
{
	struct gather_arg	 a[THREADS];
	pthread_t		 th[THREADS];
	uint32_t		 idx[CBS];
	unsigned		 s, r, t;
	double			 t0;

	t0 = now_s();
	for (s = 0; s < steps; s++) {
		for (r = 0; r < CBS; r++)
			idx[r] = (uint32_t)(random() % N_SAMPLES);
		for (t = 0; t < THREADS; t++) {
			a[t].src = src;
			a[t].dst = dst;
			a[t].idx = idx;
			a[t].begin = t * CBS / THREADS;
			a[t].end = (t + 1) * CBS / THREADS;
			pthread_create(&th[t], NULL, gather_thread, &a[t]);
		}
		for (t = 0; t < THREADS; t++)
			pthread_join(th[t], NULL);
	}
	return ((double)steps * CBS / (now_s() - t0));
}

/*
 * items/s of @epochs epochs through infeedd, or -1.  @from_attach: timed
 * from infeed_attach() with the first step (*@first_s: its time to first
 * step), else from the second step.
 */
static double
infeed_rate(const char *sock, unsigned epochs, unsigned round,
    bool from_attach, double *first_s)
{
	struct infeed			*f = infeed_new();
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_step		 st;
	const volatile uint8_t		*p;
	uint64_t			 k, total, items = 0, sum = 0;
	size_t				 off;
	double				 t0, rate = -1;

	infeed_options_init(&o);
	o.batch_size = 16;
	o.device_iterations = 50;
	o.shuffle = true;
	o.seed = round;
	if (infeed_connect(f, sock, "loader-vs-gather") != INFEED_OK) {
		fprintf(stderr, "bench: %s\n", infeed_error(f));
		goto out;
	}
	t0 = now_s();
	if (infeed_attach(f, "tutorial-raw", &o, &info) != INFEED_OK) {
		fprintf(stderr, "bench: %s\n", infeed_error(f));
		goto out;
	}
	if (infeed_next(f, &st) != INFEED_OK)
		goto fail;
	if (first_s != NULL)
		*first_s = now_s() - t0;
	if (from_attach)
		items += st.rows;
	infeed_release(f, &st);
	total = (uint64_t)epochs * info.steps_per_epoch;
	/* Else the first step, which maps the ring, is not part of it. */
	if (!from_attach)
		t0 = now_s();
	for (k = 1; k < total; k++) {
		if (infeed_next(f, &st) != INFEED_OK)
			goto fail;
		p = st.data;
		for (off = 0; off < st.rows * info.sample_bytes; off += 4096)
			sum += p[off];
		items += st.rows;
		infeed_release(f, &st);
	}
	rate = (double)items / (now_s() - t0);
	(void)sum;
	goto out;
fail:
	fprintf(stderr, "bench: %s\n", infeed_error(f));
out:
	infeed_free(f);
	return (rate);
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

int
main(int argc, char **argv)
{
	const char	*infeedd, *tmp = getenv("TMPDIR");
	char		 dir[256], data[300], labels[300], conf[300], sock[300];
	char		 buf[2048];
	unsigned	 rounds = 5, epochs = 4, i, r;
	double		 lim[32], inf[32], ml, mi;
	double		 cold[32], warm[32], cold_f[32], warm_f[32];
	bool		 session = false;
	unsigned	 pause_ms = 0;
	uint8_t		*src, *dst, *row;
	int64_t		*lab;
	pid_t		 pid;
	FILE		*fp;
	int		 fd;

	if (argc < 2) {
		fprintf(stderr, "usage: loader-vs-gather INFEEDD [--rounds N] "
		    "[--epochs E]\n");
		return (2);
	}
	infeedd = argv[1];
	for (i = 2; i < (unsigned)argc; i++) {
		if (strcmp(argv[i], "--session") == 0) {
			session = true;
			epochs = 6;
		} else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--rounds") == 0)
			rounds = (unsigned)atoi(argv[++i]);
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--pause-ms") == 0)
			pause_ms = (unsigned)atoi(argv[++i]);
		else if (i + 1 < (unsigned)argc &&
		    strcmp(argv[i], "--epochs") == 0)
			epochs = (unsigned)atoi(argv[++i]);
	}
	if (rounds < 1 || rounds > 32 || epochs < 1) {
		fprintf(stderr, "bench: --rounds 1..32, --epochs >= 1\n");
		return (2);
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "%s/infeed-bench-XXXXXX", tmp ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		return (1);
	snprintf(data, sizeof(data), "%s/tutorial.f32", dir);
	snprintf(labels, sizeof(labels), "%s/tutorial.labels", dir);
	snprintf(conf, sizeof(conf), "%s/infeedd.conf", dir);
	snprintf(sock, sizeof(sock), "%s/infeedd.sock", dir);

	fprintf(stderr, "bench: writing %d samples of 64 KiB (%.0f MB) to %s\n",
	    N_SAMPLES, N_SAMPLES * (double)SAMPLE_BYTES / 1e6, data);
	fp = fopen(data, "w");
	row = malloc(SAMPLE_BYTES);
	for (i = 0; i < N_SAMPLES; i++) {
		for (r = 0; r < SAMPLE_BYTES / 4; r++)
			((float *)(void *)row)[r] = (float)((i * 31 + r) % 1000) /
			    1000.0f;
		fwrite(row, 1, SAMPLE_BYTES, fp);
	}
	fclose(fp);
	free(row);
	lab = malloc(N_SAMPLES * sizeof(*lab));
	for (i = 0; i < N_SAMPLES; i++)
		lab[i] = i % 10;
	fp = fopen(labels, "w");
	fwrite(lab, sizeof(*lab), N_SAMPLES, fp);
	fclose(fp);
	free(lab);
	snprintf(buf, sizeof(buf), "[infeedd]\nworkers = 2\n\n"
	    "[dataset tutorial-raw]\ntype = raw\npath = %s\nshape = 1,128,128\n"
	    "dtype = float32\nlabels = %s\nlabel_dtype = int64\nclasses = 10\n",
	    data, labels);
	fp = fopen(conf, "w");
	fputs(buf, fp);
	fclose(fp);

	fd = open(data, O_RDONLY);
	src = mmap(NULL, (size_t)N_SAMPLES * SAMPLE_BYTES, PROT_READ,
	    MAP_SHARED, fd, 0);
	close(fd);
	dst = malloc((size_t)CBS * SAMPLE_BYTES);
	if (src == MAP_FAILED || dst == NULL)
		return (1);
	memset(dst, 0, (size_t)CBS * SAMPLE_BYTES);
	gather_limit(src, dst, 12);	/* warm the page cache and dst */

	pid = daemon_start(infeedd, conf, sock);
	for (r = 0; r < rounds; r++) {
		lim[r] = gather_limit(src, dst, 12 * epochs);
		if (session) {
			daemon_stop(pid);
			pid = daemon_start(infeedd, conf, sock);
			cold[r] = infeed_rate(sock, epochs, r, true, &cold_f[r]);
			usleep(pause_ms * 1000);
			warm[r] = infeed_rate(sock, epochs, r + 100, true,
			    &warm_f[r]);
			fprintf(stderr, "bench: round %u/%u: gather limit %.0f "
			    "items/s, first session %.0f (%.2f, first step "
			    "%.1f ms), next session %.0f (%.2f, first step "
			    "%.1f ms)\n", r + 1, rounds, lim[r], cold[r],
			    cold[r] / lim[r], cold_f[r] * 1e3, warm[r],
			    warm[r] / lim[r], warm_f[r] * 1e3);
			cold[r] /= lim[r];
			warm[r] /= lim[r];
			if (cold[r] < 0 || warm[r] < 0)
				break;
			continue;
		}
		inf[r] = infeed_rate(sock, epochs, r, false, NULL);
		fprintf(stderr, "bench: round %u/%u: gather limit %.0f items/s, "
		    "infeed %.0f items/s (%.0f%%)\n", r + 1, rounds, lim[r],
		    inf[r], 100.0 * inf[r] / lim[r]);
		if (inf[r] < 0)
			break;
	}
	daemon_stop(pid);
	munmap(src, (size_t)N_SAMPLES * SAMPLE_BYTES);
	free(dst);
	unlink(data);
	unlink(labels);
	unlink(conf);
	rmdir(dir);
	if (r < rounds)
		return (1);

	ml = median(lim, (int)rounds);
	if (session) {
		printf("workload          10000 x [1,128,128] float32, B 16, DI "
		    "50 (800 rows/step), shuffled, %u epochs (%u steps) timed "
		    "from Attach\n", epochs, epochs * 12);
		printf("gather limit      %.0f items/s, median of %u\n", ml,
		    rounds);
		printf("first session     %.2f of the limit, first step %.1f "
		    "ms (medians)\n", median(cold, (int)rounds),
		    median(cold_f, (int)rounds) * 1e3);
		printf("next session      %.2f of the limit, first step %.1f "
		    "ms (medians; targets >= 0.70, <= 20 ms)\n",
		    median(warm, (int)rounds), median(warm_f, (int)rounds) *
		    1e3);
		printf("{\"gather_items_per_s\":%.1f,\"first_session_ratio\":"
		    "%.4f,\"first_session_first_step_s\":%.4f,"
		    "\"next_session_ratio\":%.4f,\"next_session_first_step_s\":"
		    "%.4f,\"rounds\":%u,\"epochs\":%u}\n", ml,
		    median(cold, (int)rounds), median(cold_f, (int)rounds),
		    median(warm, (int)rounds), median(warm_f, (int)rounds),
		    rounds, epochs);
		return (0);
	}
	mi = median(inf, (int)rounds);
	printf("workload          10000 x [1,128,128] float32, B 16, DI 50 "
	    "(800 rows/step), shuffled\n");
	printf("gather limit      %.0f items/s (%.2f GB/s), median of %u\n",
	    ml, ml * SAMPLE_BYTES / 1e9, rounds);
	printf("infeed            %.0f items/s (%.2f GB/s), median of %u\n",
	    mi, mi * SAMPLE_BYTES / 1e9, rounds);
	printf("ratio             %.2f (target >= 0.70)\n", mi / ml);
	printf("{\"gather_items_per_s\":%.1f,\"infeed_items_per_s\":%.1f,"
	    "\"ratio\":%.4f,\"rounds\":%u,\"epochs\":%u}\n", ml, mi, mi / ml,
	    rounds, epochs);
	return (0);
}
