/* SPDX-License-Identifier: MIT */
/*
 * workers = auto on the real infeedd (issue 25): a trainer on a dataset
 * whose reads wait (sample_delay_us, a slow-storage stand-in) makes the
 * pool grow above one worker within seconds, and past the CPUs the daemon
 * may use (config_ncpus(): its affinity and cgroup cpu.max), since its
 * workers wait for storage and not for a CPU (issue 36, item 3; main
 * stopped at the CPUs), never past its max (autotune_limit()); when the
 * trainer stops, the idle pool shrinks back to one.  Every index of every
 * epoch comes exactly once across the resizes, each with the same bytes
 * every epoch.  Stats, `infeedctl status` and the log say what was
 * decided and why.  Through slowfs (tests/slowfs.c), a FUSE store whose
 * every read takes 5 ms, the pool grows past the CPUs too (skipped where
 * FUSE cannot be mounted).  Directions, not timings, are asserted: the machine
 * may be loaded.
 */

#include <sys/stat.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "autotune.h"
#include "config.h"
#include "harness.h"
#include "slowfs-mount.h"

#define SLOW_SAMPLES	400
#define SLOW_BYTES	16
#define SLOW_BATCH	8
#define DEADLINE_MS	30000

/*
 * The daemon with the pool sizing itself, from the configuration file
 * (its workers = 2 comes first: the later key wins), and a synthetic
 * dataset whose every read sleeps 2 ms.
 */
static void
setup_auto(void)
{
	make_files("workers = auto\n"
	    "[dataset slow]\n"
	    "type = synthetic\n"
	    "samples = 400\n"
	    "shape = 16\n"
	    "dtype = uint8\n"
	    "sample_delay_us = 5000\n");
	infeedd_start("");
}

/* The daemon's Stats now. */
static struct infeed_stats *
stats_now(struct infeed *g)
{
	struct infeed_stats	*st;

	ck_assert_msg(infeed_get_stats(g, &st) == INFEED_OK, "%s",
	    infeed_error(g));
	return (st);
}

/* What a trainer saw: per epoch, how often each index came. */
struct seen {
	uint8_t		count[SLOW_SAMPLES];
	uint8_t		bytes[SLOW_SAMPLES][SLOW_BYTES];
	bool		known[SLOW_SAMPLES];
	uint64_t	epoch;
	unsigned	epochs_done;
};

/* Count step @st's indices; an epoch ends with every index once. */
static void
seen_step(struct seen *s, const struct infeed_step *st)
{
	const uint8_t	*data = st->data;
	uint64_t	 r, idx;
	unsigned	 i;

	if (st->epoch != s->epoch) {
		for (i = 0; i < SLOW_SAMPLES; i++)
			ck_assert_msg(s->count[i] == 1, "epoch %llu: index "
			    "%u came %u times", (unsigned long long)s->epoch,
			    i, s->count[i]);
		memset(s->count, 0, sizeof(s->count));
		s->epoch = st->epoch;
		s->epochs_done++;
	}
	for (r = 0; r < st->rows; r++) {
		idx = st->indices[r];
		ck_assert_uint_lt(idx, SLOW_SAMPLES);
		s->count[idx]++;
		/* A row lost or written twice would show other bytes. */
		if (!s->known[idx]) {
			memcpy(s->bytes[idx], data + r * SLOW_BYTES,
			    SLOW_BYTES);
			s->known[idx] = true;
		} else
			ck_assert_msg(memcmp(s->bytes[idx], data + r *
			    SLOW_BYTES, SLOW_BYTES) == 0, "index %llu: other "
			    "bytes in epoch %llu", (unsigned long long)idx,
			    (unsigned long long)st->epoch);
	}
}

/* Take one step of @f into @s. */
static void
take_step(struct infeed *f, struct seen *s)
{
	struct infeed_step	st;
	int			r;

	while ((r = infeed_next(f, &st)) == INFEED_END_OF_DATA)
		;
	ck_assert_msg(r == INFEED_OK, "%s", infeed_error(f));
	seen_step(s, &st);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
}

/*
 * A trainer waiting for a slow dataset: the pool grows past the CPUs (its
 * workers sleep, they do not compute), never past its max; every epoch
 * exactly once across the resizes; the idle pool shrinks back.
 */
START_TEST(auto_pool_grows_while_the_trainer_waits_then_shrinks)
{
	struct infeed		*f = client(), *g = client();
	struct infeed_options	 o;
	struct infeed_stats	*st;
	struct seen		*s = calloc(1, sizeof(*s));
	unsigned		 cpus = config_ncpus(NULL), max, steps = 0;
	uint64_t		 start = now_ms(), deadline = start + DEADLINE_MS;
	unsigned		 grew_in = 0;	/* the epoch, from 1 */
	char			 out[8192], want[128];

	ck_assert_ptr_nonnull(s);
	st = stats_now(g);
	ck_assert_uint_eq(st->workers_auto, 1);
	max = st->workers_max;
	ck_assert_uint_ge(max, cpus + 1);
	ck_assert_uint_ge(max, AUTOTUNE_STORAGE_MIN);
	ck_assert_uint_eq(st->nworkers, 1);
	ck_assert_ptr_nonnull(st->workers_max_why);
	ck_assert_msg(strstr(st->workers_max_why, "for workers that wait for "
	    "storage") != NULL, "%s", st->workers_max_why);
	infeed_stats_free(st);

	infeed_options_init(&o);
	o.batch_size = SLOW_BATCH;
	o.shuffle = true;
	o.seed = 3;
	ck_assert_msg(infeed_attach(f, "slow", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	/*
	 * Steps until the pool has grown past the CPUs, then the epoch it
	 * did in and one more, every index of each once.
	 */
	while (grew_in == 0) {
		ck_assert_msg(now_ms() < deadline, "the pool did not grow "
		    "past its %u CPUs within %d ms", cpus, DEADLINE_MS);
		take_step(f, s);
		if (++steps % 5 != 0)
			continue;
		st = stats_now(g);
		ck_assert_uint_le(st->nworkers, max);
		if (st->nworkers > cpus) {
			grew_in = s->epochs_done + 1;
			/* The grow that passed them says why. */
			ck_assert_msg(strncmp(st->pool_last_resize, "grew at ",
			    8) == 0 && strstr(st->pool_last_resize,
			    " because trainers waited ") != NULL &&
			    strstr(st->pool_last_resize, "waiting for storage")
			    != NULL && strstr(st->pool_last_resize, "past the")
			    != NULL, "%s", st->pool_last_resize);
		}
		infeed_stats_free(st);
	}
	printf("grew past %u CPUs in %.1f s\n", cpus,
	    (double)(now_ms() - start) / 1000);
	while (s->epochs_done < grew_in + 1)
		take_step(f, s);
	st = stats_now(g);
	ck_assert_uint_ge(st->pool_grows, cpus);
	ck_assert_uint_le(st->nworkers, max);
	infeed_stats_free(st);

	infeedctl_run("status", out, sizeof(out));
	snprintf(want, sizeof(want), "workers: auto, ");
	ck_assert_msg(strstr(out, want) != NULL, "%s", out);
	snprintf(want, sizeof(want), " of %u (max %u: ", max, max);
	ck_assert_msg(strstr(out, want) != NULL, "%s", out);
	ck_assert_msg(strstr(out, "): grew at ") != NULL ||
	    strstr(out, "): shrank at ") != NULL, "%s", out);

	/*
	 * The trainer stops: the idle pool goes back to one worker, one
	 * every AUTOTUNE_SHRINK_MS.
	 */
	infeed_free(f);
	st = stats_now(g);
	deadline = now_ms() + DEADLINE_MS + st->nworkers *
	    (AUTOTUNE_SHRINK_MS + 1000);
	infeed_stats_free(st);
	for (;;) {
		st = stats_now(g);
		if (st->nworkers == 1 && st->pool_shrinks > 0)
			break;
		infeed_stats_free(st);
		ck_assert_msg(now_ms() < deadline, "the idle pool did not "
		    "shrink to one in time");
		usleep(100000);
	}
	ck_assert_msg(strncmp(st->pool_last_resize, "shrank at ", 10) == 0 &&
	    strstr(st->pool_last_resize, "workers were") != NULL, "%s",
	    st->pool_last_resize);
	infeed_stats_free(st);
	infeed_free(g);
	free(s);
}
END_TEST

/* The slow store: its source, mount and whether it is up. */
static char		store_dir[256];
static struct slowfs	store_fs;
static bool		store_up;

#define STORE_ROWS	65536		/* 1 GiB, sparse: zeros */
#define STORE_ROW	16384

/*
 * A raw dataset of 16 KiB rows served by slowfs, every read 5 ms, and
 * infeedd with workers = auto reading it; where FUSE cannot be mounted
 * the test says so and passes.
 */
static void
setup_store(void)
{
	static const char *const opts[] = { "--delay-us", "5000", NULL };
	char	src[300], mnt[300], path[400], conf[1024];
	int	fd;

	snprintf(store_dir, sizeof(store_dir), "%s/infeed-store-XXXXXX",
	    getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(store_dir));
	snprintf(src, sizeof(src), "%s/src", store_dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", store_dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	snprintf(path, sizeof(path), "%s/rows.bin", src);
	ck_assert_int_ne(fd = open(path, O_WRONLY | O_CREAT, 0644), -1);
	ck_assert_int_eq(ftruncate(fd, (off_t)STORE_ROWS * STORE_ROW), 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/labels.bin", src);
	ck_assert_int_ne(fd = open(path, O_WRONLY | O_CREAT, 0644), -1);
	ck_assert_int_eq(ftruncate(fd, (off_t)STORE_ROWS * 8), 0);
	close(fd);
	if (!(store_up = slowfs_start(&store_fs, src, mnt, opts)))
		return;
	snprintf(conf, sizeof(conf), "workers = auto\n"
	    "[dataset store]\n"
	    "type = raw\n"
	    "path = %s/rows.bin\n"
	    "shape = 4,64,64\n"
	    "dtype = uint8\n"
	    "labels = %s/labels.bin\n"
	    "label_dtype = int64\n"
	    "classes = 10\n", mnt, mnt);
	make_files(conf);
	infeedd_start("");
}

/* infeedd stopped, the store unmounted, its files gone. */
static void
teardown_store(void)
{
	char	path[400];

	if (store_up) {
		teardown();
		slowfs_stop(&store_fs);
	}
	snprintf(path, sizeof(path), "%s/src/rows.bin", store_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/src/labels.bin", store_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/src", store_dir);
	rmdir(path);
	rmdir(store_dir);
}

/*
 * Issue 36, item 3, through storage that is slow for real: workers
 * blocked in page faults on a FUSE store (not asleep in the reader) count
 * as waiting for storage, and the pool grows past the CPUs, with more
 * reads in flight at the store than the CPUs.
 */
START_TEST(auto_pool_grows_past_the_cpus_through_a_slow_store)
{
	struct infeed		*f, *g;
	struct infeed_options	 o;
	struct infeed_stats	*st;
	struct infeed_step	 step;
	unsigned		 cpus = config_ncpus(NULL), workers = 0;
	uint64_t		 start = now_ms(), steps = 0;
	char			 why[512] = "";

	if (!store_up)
		return;
	f = client();
	g = client();
	infeed_options_init(&o);
	o.batch_size = 32;
	o.shuffle = true;
	ck_assert_msg(infeed_attach(f, "store", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	while (workers <= cpus) {
		ck_assert_msg(now_ms() < start + DEADLINE_MS, "the pool did "
		    "not grow past its %u CPUs within %d ms: %s", cpus,
		    DEADLINE_MS, why);
		ck_assert_msg(infeed_next(f, &step) == INFEED_OK, "%s",
		    infeed_error(f));
		ck_assert_int_eq(infeed_release(f, &step), INFEED_OK);
		if (++steps % 4 != 0)
			continue;
		st = stats_now(g);
		workers = st->nworkers;
		snprintf(why, sizeof(why), "%s", st->pool_decision != NULL ?
		    st->pool_decision : "");
		if (workers > cpus)
			ck_assert_msg(strstr(st->pool_last_resize,
			    "waiting for storage") != NULL, "%s",
			    st->pool_last_resize);
		infeed_stats_free(st);
	}
	printf("store: %u workers past %u CPUs in %.1f s, %llu reads, at "
	    "most %llu in flight\n", workers, cpus,
	    (double)(now_ms() - start) / 1000,
	    (unsigned long long)slowfs_counter(&store_fs, "reads"),
	    (unsigned long long)slowfs_counter(&store_fs, "max_in_flight"));
	ck_assert_uint_gt(slowfs_counter(&store_fs, "reads"), 0);
	infeed_free(f);
	infeed_free(g);
}
END_TEST

/* workers = N keeps a fixed pool, and says so. */
START_TEST(fixed_pool_stays_as_configured)
{
	struct infeed		*g = client();
	struct infeed_stats	*st = stats_now(g);
	char			 out[8192];

	ck_assert_uint_eq(st->workers_auto, 0);
	ck_assert_uint_eq(st->nworkers, 2);
	ck_assert_ptr_null(st->pool_last_resize);
	infeed_stats_free(st);
	infeedctl_run("status", out, sizeof(out));
	ck_assert_msg(strstr(out, "\nworkers: 2\n") != NULL, "%s", out);
	infeed_free(g);
}
END_TEST

static Suite *
autotune_daemon_suite(void)
{
	Suite	*s = suite_create("autotune-daemon");
	TCase	*tc;

	tc = tcase_create("auto");
	tcase_add_checked_fixture(tc, setup_auto, teardown);
	tcase_set_timeout(tc, 200);
	tcase_add_test(tc, auto_pool_grows_while_the_trainer_waits_then_shrinks);
	suite_add_tcase(s, tc);

	tc = tcase_create("store");
	tcase_add_checked_fixture(tc, setup_store, teardown_store);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, auto_pool_grows_past_the_cpus_through_a_slow_store);
	suite_add_tcase(s, tc);

	tc = tcase_create("fixed");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, fixed_pool_stays_as_configured);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(autotune_daemon_suite()));
}
