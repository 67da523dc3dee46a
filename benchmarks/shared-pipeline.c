/* SPDX-License-Identifier: MIT */
/*
 * Issue 25's shared-pipeline target: several trainers on the same image
 * pipeline, sharing one decode (LoaderOptions.share), against one trainer
 * alone, on a private infeedd.
 *
 *   data:      an ImageFolder tree of JPEGs (benchmarks/images-corpus
 *              makes 5,000 ImageNet-shaped ones: its OUT/train).
 *   pipeline:  RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
 *              Normalize(ImageNet's mean and std); B --batch (32),
 *              shuffled, seed 1, --slots slots (4), --workers workers (2).
 *   alone:     one trainer: --steps steps (40), timed from infeed_attach()
 *              to the last step released, touching a byte of every page.
 *   shared:    --trainers processes (4), released together at a barrier,
 *              each the same as alone (share on: one group).
 *   unshared:  the same with share off, for reference (each decodes).
 *
 * Rounds interleave alone, shared and unshared --rounds times (5); it
 * prints each figure's median, and for shared each trainer's items/s over
 * the alone one's (the median of the rounds' ratios; target: every
 * trainer >= 0.8).
 *
 * --stop-s S (10; 0: skip): the stopped member.  --trainers trainers run
 * for about 3 S at the shared rate; S into it, trainer 0 gets SIGSTOP for
 * S seconds, then SIGCONT.  It prints the others' rate while it was
 * stopped over their rate before (target: >= 0.9), and trainer 0 finishes
 * its steps from its own ring.
 *
 * --launch-rounds R (0: skip; issue 35): trainers as users start them,
 * each its own process attaching as soon as it is up, with no barrier:
 * --trainers of them launched together, then 0.25 s apart (as Python
 * trainers launched together attach, their imports done), then 1 s
 * apart, then 2 s apart,
 * each taking --launch-epochs epochs (2), R rounds, each round beside
 * one trainer alone over as many.  It prints, for each launch, each round's slowest
 * trainer over alone (targets: >= 0.8 in every round together, >= 0.7
 * staggered) and the images the workers decoded for all of them over
 * those for the one alone (target, staggered: <= 1.5).
 *
 * Every trainer checks every step: the epoch and step in sequence, and no
 * index twice in an epoch; and every trainer's step k holds the indices of
 * the lone trainer's step k (the same order as alone).  A failure prints
 * "exactly-once: FAILED" and exits with status 1.
 *
 *     build/benchmarks/shared-pipeline build/daemon/infeedd TRAIN_DIR
 *         [--trainers 4] [--steps 40] [--batch 32] [--slots 4]
 *         [--workers 2] [--rounds 5] [--stop-s 10] [--launch-rounds 0]
 *         [--launch-epochs 2]
 *
 * It writes its configuration and socket in a temporary directory and
 * removes them.  Do not read figures off a busy machine.
 */

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infeed.h"

#define SP_MAX_TRAINERS	16
#define SP_MAX_STEPS	100000
#define SP_MAX_SAMPLES	(1 << 22)
#define SP_TRANSFORM	"RandomResizedCrop(224), RandomHorizontalFlip(), " \
			"ToTensor(), Normalize(mean=[0.485, 0.456, 0.406], " \
			"std=[0.229, 0.224, 0.225])"

/* What one run asks for. */
struct sp_cfg {
	const char	*infeedd;
	const char	*train_dir;
	char		 dir[256];
	char		 sock[300];
	char		 conf[300];
	unsigned	 trainers;
	uint64_t	 steps;
	unsigned	 batch;
	unsigned	 slots;
	unsigned	 workers;
	unsigned	 rounds;
	unsigned	 stop_s;
	unsigned	 launch_rounds;
	unsigned	 launch_epochs;
};

/* One trainer's record, in memory its parent shares. */
struct sp_rec {
	double		 until;		/* 0, or take steps until then */
	uint64_t	 steps;		/* taken */
	double		 start;		/* at infeed_attach() */
	double		 end;		/* after its last step */
	uint64_t	 items;
	uint64_t	 bad;		/* steps out of order, indices twice */
	char		 error[256];
	double		 at[SP_MAX_STEPS];	/* each step's arrival */
	uint64_t	 hash[SP_MAX_STEPS];	/* of its indices */
};

static double
sp_now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

static int
sp_cmp(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return (x < y ? -1 : x > y);
}

static double
sp_median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), sp_cmp);
	return (n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

/* FNV-1a of a step's indices: equal steps hash equal. */
static uint64_t
sp_hash(const uint64_t *idx, uint64_t rows)
{
	uint64_t	h = 1469598103934665603ULL, r;

	for (r = 0; r < rows; r++)
		h = (h ^ idx[r]) * 1099511628211ULL;
	return (h);
}

/*
 * One trainer: wait at the barrier (-1: none), attach, take @steps steps
 * (0: --launch-epochs epochs; or, with rec->until, steps until then) checking each,
 * record them in @rec.  Runs in its own process.
 */
static void
sp_trainer(const struct sp_cfg *c, bool share, uint64_t steps, int barrier,
    struct sp_rec *rec)
{
	struct infeed			*f = infeed_new();
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_step		 st;
	const volatile uint8_t		*p;
	uint8_t				*seen = calloc(SP_MAX_SAMPLES / 8, 1);
	uint64_t			 k, r, epoch = 0, step = 0, bytes, sum = 0;
	size_t				 off;
	char				 ch;

	infeed_options_init(&o);
	o.batch_size = c->batch;
	o.shuffle = true;
	o.seed = 1;
	o.buffer_size = c->slots;
	o.transform = SP_TRANSFORM;
	o.share = share;
	if (f == NULL || seen == NULL ||
	    infeed_connect(f, c->sock, "shared-pipeline") != INFEED_OK) {
		snprintf(rec->error, sizeof(rec->error), "connect: %s",
		    f ? infeed_error(f) : "no memory");
		_exit(1);
	}
	while (barrier != -1 && read(barrier, &ch, 1) == -1 &&
	    errno == EINTR)
		;
	rec->start = sp_now();
	if (infeed_attach(f, "images", &o, &info) != INFEED_OK) {
		snprintf(rec->error, sizeof(rec->error), "attach: %s",
		    infeed_error(f));
		_exit(1);
	}
	bytes = info.combined_batch_size * info.sample_bytes;
	if (steps == 0)
		steps = c->launch_epochs * info.steps_per_epoch;
	if (steps > SP_MAX_STEPS)
		steps = SP_MAX_STEPS;
	if (rec->until > 0)
		steps = SP_MAX_STEPS;
	for (k = 0; k < steps && (rec->until == 0 || sp_now() < rec->until);
	    k++) {
		if (infeed_next(f, &st) != INFEED_OK) {
			snprintf(rec->error, sizeof(rec->error), "step %llu: "
			    "%s", (unsigned long long)k, infeed_error(f));
			_exit(1);
		}
		rec->at[k] = sp_now();
		if (st.epoch != epoch || st.step != step)
			rec->bad++;
		if (step == 0)
			memset(seen, 0, SP_MAX_SAMPLES / 8);
		for (r = 0; r < st.rows; r++) {
			if (st.indices[r] >= SP_MAX_SAMPLES ||
			    (seen[st.indices[r] / 8] >> (st.indices[r] % 8) &
			    1)) {
				rec->bad++;
				continue;
			}
			seen[st.indices[r] / 8] |= (uint8_t)(1 <<
			    (st.indices[r] % 8));
		}
		rec->hash[k] = sp_hash(st.indices, st.rows);
		/* A trainer reads its step: a byte of every page. */
		p = st.data;
		for (off = 0; off < bytes; off += 4096)
			sum += p[off];
		rec->items += st.rows;
		if (infeed_release(f, &st) != INFEED_OK) {
			snprintf(rec->error, sizeof(rec->error), "release: %s",
			    infeed_error(f));
			_exit(1);
		}
		if (++step == info.steps_per_epoch) {
			epoch++;
			step = 0;
		}
	}
	rec->end = sp_now();
	rec->steps = k;
	infeed_free(f);
	(void)sum;
	_exit(0);
}

/*
 * Run @n trainers together (share on or off) for @steps steps each, into
 * @rec; with @stop_s, for 3 x @stop_s seconds instead, trainer 0 stopped
 * for @stop_s of them from @stop_s on (its window in *@t0, *@t1).
 * Return: 0, or -1 when one failed.
 */
static int
sp_round(const struct sp_cfg *c, unsigned n, bool share, uint64_t steps,
    struct sp_rec *rec, unsigned stop_s, double *t0, double *t1)
{
	pid_t		pid[SP_MAX_TRAINERS];
	unsigned	i;
	int		bar[2], status, rc = 0;

	if (pipe(bar) == -1)
		return (-1);
	for (i = 0; i < n; i++) {
		memset(&rec[i], 0, sizeof(rec[i]) - sizeof(rec[i].at) -
		    sizeof(rec[i].hash));
		rec[i].until = stop_s > 0 ? sp_now() + 3.0 * stop_s : 0;
		if ((pid[i] = fork()) == 0) {
			close(bar[1]);
			sp_trainer(c, share, steps, bar[0], &rec[i]);
		}
	}
	close(bar[0]);
	close(bar[1]);
	if (stop_s > 0) {
		sleep(stop_s);
		*t0 = sp_now();
		kill(pid[0], SIGSTOP);
		sleep(stop_s);
		*t1 = sp_now();
		kill(pid[0], SIGCONT);
	}
	for (i = 0; i < n; i++) {
		if (waitpid(pid[i], &status, 0) != pid[i] ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "trainer %u failed: %s\n", i,
			    rec[i].error);
			rc = -1;
		}
	}
	return (rc);
}

/* Images the daemon's workers decoded so far (-1: no Stats). */
static double
sp_decoded(const struct sp_cfg *c)
{
	struct infeed		*f = infeed_new();
	struct infeed_stats	*st = NULL;
	double			 n = -1;
	size_t			 i;

	if (f != NULL && infeed_connect(f, c->sock, "shared-pipeline") ==
	    INFEED_OK && infeed_get_stats(f, &st) == INFEED_OK) {
		for (n = 0, i = 0; i < st->nworkers; i++)
			n += (double)st->workers[i]->rows_done;
	}
	infeed_stats_free(st);
	infeed_free(f);
	return (n);
}

/*
 * Launch @n trainers @gap_ms apart, each its own process with no barrier,
 * for two epochs each, into @rec, the images decoded meanwhile in
 * *@decoded.  Return: 0, or -1 when one failed.
 */
static int
sp_launch(const struct sp_cfg *c, unsigned n, unsigned gap_ms,
    struct sp_rec *rec, double *decoded)
{
	pid_t		pid[SP_MAX_TRAINERS];
	unsigned	i;
	int		status, rc = 0;
	double		d0 = sp_decoded(c);

	for (i = 0; i < n; i++) {
		memset(&rec[i], 0, sizeof(rec[i]) - sizeof(rec[i].at) -
		    sizeof(rec[i].hash));
		if (i > 0 && gap_ms > 0)
			usleep(gap_ms * 1000);
		if ((pid[i] = fork()) == 0)
			sp_trainer(c, true, 0, -1, &rec[i]);
	}
	for (i = 0; i < n; i++) {
		if (waitpid(pid[i], &status, 0) != pid[i] ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "trainer %u failed: %s\n", i,
			    rec[i].error);
			rc = -1;
		}
	}
	*decoded = sp_decoded(c) - d0;
	return (rc);
}

/* Items a second of trainer @r, from its attach to its last step. */
static double
sp_rate(const struct sp_rec *r)
{
	return (r->end > r->start ? (double)r->items / (r->end - r->start) :
	    0);
}

/*
 * Whether every trainer of @n got every step once in the lone trainer's
 * order (@alone's hashes), counting failures into *@bad.
 */
static void
sp_check(const struct sp_rec *rec, unsigned n, const struct sp_rec *alone,
    uint64_t *bad)
{
	unsigned	i;
	uint64_t	k;

	for (i = 0; i < n; i++) {
		*bad += rec[i].bad + (rec[i].steps > alone->steps);
		for (k = 0; k < rec[i].steps && k < alone->steps; k++)
			*bad += rec[i].hash[k] != alone->hash[k];
	}
}

static void
sp_daemon_conf(struct sp_cfg *c)
{
	FILE	*fp;

	snprintf(c->sock, sizeof(c->sock), "%s/infeedd.sock", c->dir);
	snprintf(c->conf, sizeof(c->conf), "%s/infeedd.conf", c->dir);
	if ((fp = fopen(c->conf, "w")) == NULL) {
		perror(c->conf);
		exit(2);
	}
	fprintf(fp, "[infeedd]\nworkers = %u\nmemory_budget = 4G\n\n"
	    "[dataset images]\ntype = imagefolder\nroot = %s\n", c->workers,
	    c->train_dir);
	fclose(fp);
}

static pid_t
sp_daemon_start(const struct sp_cfg *c)
{
	pid_t	pid;
	int	i, fd;

	unlink(c->sock);
	if ((pid = fork()) == 0) {
		/* $SHARED_PIPELINE_LOG: infeedd's log goes to that file. */
		fd = open(getenv("SHARED_PIPELINE_LOG") ?
		    getenv("SHARED_PIPELINE_LOG") : "/dev/null",
		    O_WRONLY | O_CREAT | O_APPEND, 0600);
		dup2(fd, 2);
		execl(c->infeedd, c->infeedd, "--config", c->conf, "--socket",
		    c->sock, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 500 && access(c->sock, F_OK) != 0; i++)
		usleep(20000);
	usleep(200000);
	return (pid);
}

/*
 * --launch-rounds: the trainers launched together, 0.25, 1 and 2 s apart with
 * no barrier, each round beside one alone (its order the reference),
 * counting failures of order into *@bad.  Return: 0, or -1.
 */
static int
sp_launches(const struct sp_cfg *c, struct sp_rec *rec, uint64_t *bad)
{
	static const unsigned	gaps[] = { 0, 250, 1000, 2000 };
	double			alone, alone_dec, dec, worst, x;
	unsigned		g, round, i;

	for (g = 0; g < sizeof(gaps) / sizeof(gaps[0]); g++) {
		if (gaps[g] == 0)
			printf("%u trainers launched together, %u epochs "
			    "each:\n", c->trainers, c->launch_epochs);
		else
			printf("%u trainers launched %.2f s apart, %u epochs "
			    "each:\n", c->trainers, gaps[g] / 1000.0,
			    c->launch_epochs);
		for (round = 0; round < c->launch_rounds; round++) {
			if (sp_launch(c, 1, 0, &rec[c->trainers],
			    &alone_dec) == -1 ||
			    sp_launch(c, c->trainers, gaps[g], rec, &dec) ==
			    -1)
				return (-1);
			sp_check(rec, c->trainers, &rec[c->trainers], bad);
			alone = sp_rate(&rec[c->trainers]);
			printf("  round %u: each over alone (%.0f items/s):",
			    round + 1, alone);
			worst = 1e300;
			for (i = 0; i < c->trainers; i++) {
				x = sp_rate(&rec[i]) / alone;
				worst = x < worst ? x : worst;
				printf(" %.2f", x);
			}
			printf("; the slowest %.2f; decoded %.2f x alone's\n",
			    worst, alone_dec > 0 ? dec / alone_dec : 0);
			fflush(stdout);
		}
	}
	return (0);
}

static uint64_t
sp_arg(const char *opt, const char *v, uint64_t lo, uint64_t hi)
{
	char			*end;
	unsigned long long	 x;

	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || x < lo || x > hi) {
		fprintf(stderr, "%s takes %llu to %llu, not '%s'\n", opt,
		    (unsigned long long)lo, (unsigned long long)hi, v);
		exit(2);
	}
	return (x);
}

int
main(int argc, char **argv)
{
	struct sp_cfg	 c = { .trainers = 4, .steps = 40, .batch = 32,
			    .slots = 4, .workers = 2, .rounds = 5,
			    .stop_s = 10, .launch_epochs = 2 };
	struct sp_rec	*rec;
	double		 alone[64], shared[64], unshared[64], ratio[64];
	double		 worst[64], t0 = 0, t1 = 0, before, during, x, gap;
	uint64_t	 bad = 0, steps_stop, k, n_before, n_during;
	unsigned	 i, j, round, m;
	pid_t		 d;
	int		 a;
	size_t		 len;

	for (a = 3; a + 1 < argc; a += 2) {
		if (strcmp(argv[a], "--trainers") == 0)
			c.trainers = (unsigned)sp_arg(argv[a], argv[a + 1], 2,
			    SP_MAX_TRAINERS);
		else if (strcmp(argv[a], "--steps") == 0)
			c.steps = sp_arg(argv[a], argv[a + 1], 2, 10000);
		else if (strcmp(argv[a], "--batch") == 0)
			c.batch = (unsigned)sp_arg(argv[a], argv[a + 1], 1,
			    1024);
		else if (strcmp(argv[a], "--slots") == 0)
			c.slots = (unsigned)sp_arg(argv[a], argv[a + 1], 2, 32);
		else if (strcmp(argv[a], "--workers") == 0)
			c.workers = (unsigned)sp_arg(argv[a], argv[a + 1], 1,
			    256);
		else if (strcmp(argv[a], "--rounds") == 0)
			c.rounds = (unsigned)sp_arg(argv[a], argv[a + 1], 1,
			    64);
		else if (strcmp(argv[a], "--stop-s") == 0)
			c.stop_s = (unsigned)sp_arg(argv[a], argv[a + 1], 0,
			    600);
		else if (strcmp(argv[a], "--launch-epochs") == 0)
			c.launch_epochs = (unsigned)sp_arg(argv[a],
			    argv[a + 1], 1, 1000);
		else if (strcmp(argv[a], "--launch-rounds") == 0)
			c.launch_rounds = (unsigned)sp_arg(argv[a], argv[a + 1],
			    0, 64);
		else
			break;
	}
	if (argc < 3 || a != argc) {
		fprintf(stderr, "usage: %s INFEEDD TRAIN_DIR [--trainers 4] "
		    "[--steps 40] [--batch 32] [--slots 4] [--workers 2] "
		    "[--rounds 5] [--stop-s 10] [--launch-rounds 0] "
		    "[--launch-epochs 2]\n",
		    argv[0]);
		return (2);
	}
	c.infeedd = argv[1];
	c.train_dir = argv[2];
	snprintf(c.dir, sizeof(c.dir), "%s/infeed-shared-XXXXXX",
	    getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(c.dir) == NULL) {
		perror("mkdtemp");
		return (2);
	}
	sp_daemon_conf(&c);
	len = (SP_MAX_TRAINERS + 1) * sizeof(*rec);
	rec = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_ANONYMOUS, -1, 0);
	if (rec == MAP_FAILED) {
		perror("mmap");
		return (2);
	}
	d = sp_daemon_start(&c);
	printf("%u trainers, %llu steps of %u images each (%s), %u workers, "
	    "%u slots, %u rounds\n", c.trainers, (unsigned long long)c.steps,
	    c.batch, SP_TRANSFORM, c.workers, c.slots, c.rounds);
	for (round = 0; round < c.rounds; round++) {
		/* The lone trainer's order is the reference: rec[trainers]. */
		if (sp_round(&c, 1, true, c.steps, &rec[c.trainers], 0, NULL,
		    NULL) == -1)
			goto fail;
		alone[round] = sp_rate(&rec[c.trainers]);
		if (sp_round(&c, c.trainers, true, c.steps, rec, 0, NULL,
		    NULL) == -1)
			goto fail;
		sp_check(rec, c.trainers, &rec[c.trainers], &bad);
		shared[round] = 0;
		worst[round] = 1e300;
		for (i = 0; i < c.trainers; i++) {
			shared[round] += sp_rate(&rec[i]);
			if (sp_rate(&rec[i]) < worst[round])
				worst[round] = sp_rate(&rec[i]);
		}
		ratio[round] = worst[round] / alone[round];
		if (sp_round(&c, c.trainers, false, c.steps, rec, 0, NULL,
		    NULL) == -1)
			goto fail;
		sp_check(rec, c.trainers, &rec[c.trainers], &bad);
		unshared[round] = 0;
		for (i = 0; i < c.trainers; i++)
			unshared[round] += sp_rate(&rec[i]);
		printf("round %u: alone %.0f items/s; shared %.0f in all, the "
		    "slowest %.0f (%.2f of alone); unshared %.0f in all\n",
		    round + 1, alone[round], shared[round], worst[round],
		    ratio[round], unshared[round]);
		fflush(stdout);
	}
	printf("medians: alone %.0f items/s; %u shared trainers %.0f in all; "
	    "unshared %.0f in all\n", sp_median(alone, c.rounds), c.trainers,
	    sp_median(shared, c.rounds), sp_median(unshared, c.rounds));
	printf("the slowest shared trainer over alone: %.2f (target >= 0.80)"
	    "\n", sp_median(ratio, c.rounds));
	if (c.stop_s > 0) {
		if (sp_round(&c, c.trainers, true, 0, rec, c.stop_s, &t0,
		    &t1) == -1)
			goto fail;
		/* The lone trainer's order, as far as the farthest went. */
		for (i = 0, steps_stop = 0; i < c.trainers; i++)
			if (rec[i].steps > steps_stop)
				steps_stop = rec[i].steps;
		if (sp_round(&c, 1, true, steps_stop, &rec[c.trainers], 0,
		    NULL, NULL) == -1)
			goto fail;
		sp_check(rec, c.trainers, &rec[c.trainers], &bad);
		m = 0;
		for (i = 1; i < c.trainers; i++) {
			n_before = n_during = 0;
			gap = 0;
			for (k = 0; k < rec[i].steps; k++) {
				if (k > 0 && rec[i].at[k] >= t0 &&
				    rec[i].at[k] - rec[i].at[k - 1] > gap)
					gap = rec[i].at[k] - rec[i].at[k - 1];
				n_before += rec[i].at[k] < t0;
				n_during += rec[i].at[k] >= t0 &&
				    rec[i].at[k] < t1;
			}
			before = (double)n_before / (t0 - rec[i].start);
			during = (double)n_during / (t1 - t0);
			ratio[m++] = before > 0 ? during / before : 0;
			printf("trainer %u: %.2f steps/s before the stop, "
			    "%.2f while trainer 0 was stopped (its longest wait "
			    "for a step then: %.3f s)\n", i, before, during,
			    gap);
		}
		for (j = 0, x = 1e300; j < m; j++)
			x = ratio[j] < x ? ratio[j] : x;
		printf("with trainer 0 stopped for %u s: the others kept %.2f "
		    "of their rate (the worst; target >= 0.90); trainer 0 "
		    "went on to %llu steps, the others to %llu\n", c.stop_s,
		    x, (unsigned long long)rec[0].steps,
		    (unsigned long long)rec[1].steps);
	}
	if (c.launch_rounds > 0 && sp_launches(&c, rec, &bad) == -1)
		goto fail;
	printf("exactly-once: %s\n", bad == 0 ? "ok" : "FAILED");
	kill(d, SIGTERM);
	waitpid(d, NULL, 0);
	unlink(c.conf);
	unlink(c.sock);
	rmdir(c.dir);
	return (bad == 0 ? 0 : 1);

fail:
	kill(d, SIGTERM);
	waitpid(d, NULL, 0);
	unlink(c.conf);
	unlink(c.sock);
	rmdir(c.dir);
	return (1);
}
