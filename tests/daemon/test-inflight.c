/* SPDX-License-Identifier: MIT */
/*
 * Reads in flight (issue 36, item 1), through storage that is slow for
 * real: a raw dataset served by slowfs (tests/slowfs.c) with a delay on
 * every read, read by the real infeedd.  A step's rows are read together,
 * many at once (a step takes about one delay, not one a row), with
 * io_uring and with the thread pool forced (INFEED_IO_BACKEND=threads),
 * byte for byte the same; a file cut while its reads wait in the store is
 * the session's data error, no worker's death; the steps after the ring's
 * are read ahead (read_ahead), no further than it and an eighth of
 * memory_budget allow; a worker killed while its
 * reads wait loses or doubles no row; a store that stops answering times
 * the job out, and other sessions are served meanwhile, by spare workers
 * charged to memory_budget (none past it).
 */

#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "infeed.h"
#include "slowfs-mount.h"

#define SLOW_ROWS	256		/* samples */
#define SLOW_BYTES	4096		/* a page each: one read a row */
#define SLOW_BATCH	32
#define SLOW_DELAY_US	100000		/* 100 ms a read */

static struct slowfs	fs;
static bool		mounted;
static const char	*slow_job_timeout = "30s";	/* job_timeout */
static const char	*slow_read_ahead = "auto";	/* read_ahead */
static bool		 slow_float;	/* sessions convert rows to float32 */
static const char	*slow_budget = "256M";		/* memory_budget */

/* Byte @j of sample @i. */
static uint8_t
slow_byte(uint64_t i, unsigned j)
{
	return ((uint8_t)(i * 131 + j * 7 + (j >> 8)));
}

/* Write the dataset into @src and a catalogue that reads it through @mnt. */
static void
slow_files(const char *src, const char *mnt, unsigned workers)
{
	static uint8_t	data[SLOW_ROWS * SLOW_BYTES];
	int64_t		labels[SLOW_ROWS];
	char		path[600];
	unsigned	i, j;
	FILE		*fp;

	for (i = 0; i < SLOW_ROWS; i++) {
		for (j = 0; j < SLOW_BYTES; j++)
			data[i * SLOW_BYTES + j] = slow_byte(i, j);
		labels[i] = i % 10;
	}
	ck_assert_int_eq(mkdir(src, 0755), 0);
	snprintf(path, sizeof(path), "%s/rows.bin", src);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	ck_assert_uint_eq(fwrite(data, 1, sizeof(data), fp), sizeof(data));
	fclose(fp);
	snprintf(path, sizeof(path), "%s/labels.bin", src);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	ck_assert_uint_eq(fwrite(labels, 1, sizeof(labels), fp),
	    sizeof(labels));
	fclose(fp);
	ck_assert_ptr_nonnull(fp = fopen(conf_path, "w"));
	/*
	 * group_window = 0: a ring of buffer_size slots, what the read-ahead
	 * bound counts from.  And harness.c's "raw", on local disk: the
	 * bystander's.
	 */
	fprintf(fp, "[infeedd]\nworkers = %u\nmemory_budget = %s\n"
	    "job_timeout = %s\nread_ahead = %s\ngroup_window = 0\n\n"
	    "[dataset slow]\ntype = raw\npath = %s/rows.bin\n"
	    "labels = %s/labels.bin\nshape = %d\ndtype = uint8\n"
	    "label_dtype = int64\nclasses = 10\n\n"
	    "[dataset raw]\ntype = raw\npath = %s/raw.bin\n"
	    "shape = 1,%d,%d\ndtype = uint8\nlabels = %s/raw-labels.bin\n"
	    "label_dtype = int64\nclasses = %d\n", workers, slow_budget,
	    slow_job_timeout, slow_read_ahead, mnt, mnt, SLOW_BYTES, dir, RAW_H, RAW_W, dir,
	    RAW_CLASSES);
	fclose(fp);
}

/*
 * A fresh directory, the dataset behind slowfs (a read of a page waits
 * @delay_us; the kernel reads no more than a row ahead) and infeedd with
 * @workers reading it, the store's counters reset once the workers'
 * first pass over the files (dataset_populate(), which maps what is
 * cached: the labels, read at open) is over.  Nothing of the samples'
 * file is cached then.  False: FUSE cannot be mounted here.
 */
static bool
slow_start(unsigned workers, unsigned delay_us)
{
	char		src[400], mnt[400], delay[32];
	uint64_t	reads = UINT64_MAX;
	int		i;

	make_files(NULL);
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	snprintf(delay, sizeof(delay), "%u", delay_us);
	slow_files(src, mnt, workers);
	if (!slowfs_start(&fs, src, mnt, (const char *const []){ "--delay-us",
	    delay, "--depth", "256", "--readahead-kib", "4", NULL }))
		return (false);
	mounted = true;
	infeedd_start("");
	/* The first pass over the files: over once the reads stop. */
	for (i = 0; i < 100; i++) {
		usleep(200000);
		if (slowfs_counter(&fs, "reads") == reads &&
		    slowfs_counter(&fs, "in_flight") == 0)
			break;
		reads = slowfs_counter(&fs, "reads");
	}
	slowfs_command(&fs, "reset");
	return (true);
}

static void
slow_stop(void)
{
	static const char *const left[] = { "src/rows.bin", "src/labels.bin",
	    "src", "mnt" };
	char		path[600];
	size_t		i;

	infeedd_stop();
	if (mounted)
		slowfs_stop(&fs);
	mounted = false;
	/* rm_dir() removes the files of the top directory alone. */
	for (i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, left[i]);
		(void)remove(path);
	}
	slow_job_timeout = "30s";
	slow_read_ahead = "auto";
	slow_budget = "256M";
	slow_float = false;
	unsetenv("INFEED_IO_BACKEND");
	rm_dir();
}

/* Attach to "slow", shuffled, steps of SLOW_BATCH rows. */
static struct infeed *
slow_attach(unsigned buffer_size, bool forever)
{
	struct infeed		*f = client();
	struct infeed_options	 o;

	infeed_options_init(&o);
	o.batch_size = SLOW_BATCH;
	o.shuffle = true;
	o.seed = 11;
	o.buffer_size = buffer_size;
	o.load_indefinitely = forever;
	o.early_preload = true;		/* reads start at the Attach */
	o.to_float32 = slow_float;
	ck_assert_msg(infeed_attach(f, "slow", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	return (f);
}

/*
 * Every row of @st is its sample, byte for byte (or each byte's value as
 * a float32: slow_float), with its label.
 */
static void
slow_check_step(const struct infeed_step *st)
{
	const uint8_t	*p = st->data;
	const float	*fp = st->data;
	uint64_t	 r;
	unsigned	 j;

	for (r = 0; r < st->rows; r++) {
		for (j = 0; j < SLOW_BYTES; j++) {
			if (slow_float ? fp[r * SLOW_BYTES + j] !=
			    (float)slow_byte(st->indices[r], j) :
			    p[r * SLOW_BYTES + j] != slow_byte(st->indices[r],
			    j))
				ck_abort_msg("step %" PRIu64 " row %" PRIu64
				    " (sample %" PRIu64 ") byte %u differs",
				    st->step, r, st->indices[r], j);
		}
		ck_assert_int_eq(st->labels64 ? st->labels64[r] :
		    st->labels[r], (int64_t)(st->indices[r] % 10));
	}
}

/* An epoch of steps: every sample once, each checked; its ms in *@ms. */
static void
slow_epoch(struct infeed *f, uint64_t *ms, uint8_t *seen)
{
	struct infeed_step	st;
	uint64_t		t0 = now_ms(), r;
	int			rc;

	while ((rc = infeed_next(f, &st)) == INFEED_OK) {
		slow_check_step(&st);
		for (r = 0; r < st.rows; r++)
			seen[st.indices[r]]++;
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_msg(rc == INFEED_END_OF_DATA, "%s", infeed_error(f));
	*ms = now_ms() - t0;
}

/* One step's rows in flight through @backend: about one delay, not 32. */
static void
slow_one_step_in_flight(const char *backend)
{
	struct infeed		*f;
	struct infeed_stats	*stats;
	struct infeed_step	 st;
	uint64_t		 t0, ms, depth;
	char			 log[65536];

	setenv("INFEED_IO_BACKEND", backend, 1);
	if (!slow_start(1, SLOW_DELAY_US)) {
		slow_stop();
		return;
	}
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, backend) != NULL, "the log does not say "
	    "reads go through %s: %s", backend, log);
	f = slow_attach(1, false);
	/* Status says how, as the log does. */
	ck_assert_msg(infeed_get_stats(f, &stats) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_ptr_nonnull(stats->reads_in_flight);
	ck_assert_msg(strncmp(stats->reads_in_flight, backend,
	    strlen(backend)) == 0, "status says '%s'",
	    stats->reads_in_flight);
	infeed_stats_free(stats);
	t0 = now_ms();
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ms = now_ms() - t0;
	slow_check_step(&st);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	depth = slowfs_counter(&fs, "max_in_flight");
	fprintf(stderr, "%s: a step of %d rows through a store of %d ms a "
	    "read took %" PRIu64 " ms, %" PRIu64 " reads in flight at most\n",
	    backend, SLOW_BATCH, SLOW_DELAY_US / 1000, ms, depth);
	/* One read at a time: 32 x 100 ms; all at once: about 100 ms. */
	ck_assert_msg(ms < SLOW_BATCH * SLOW_DELAY_US / 1000 / 4,
	    "%" PRIu64 " ms for one step", ms);
	ck_assert_msg(depth >= SLOW_BATCH / 2, "%" PRIu64 " reads in flight "
	    "at most", depth);
	infeed_free(f);
	slow_stop();
}

START_TEST(step_rows_in_flight_io_uring)
{
	slow_one_step_in_flight("io_uring");
}
END_TEST

START_TEST(step_rows_in_flight_threads)
{
	slow_one_step_in_flight("threads");
}
END_TEST

/*
 * The thread pool forced (INFEED_IO_BACKEND=threads, as io_backend =
 * threads) gives the same steps, byte for byte, as io_uring: an epoch of
 * each through the store, every sample once.
 */
START_TEST(fallback_backend_same_steps)
{
	static const char *const backends[] = { "io_uring", "threads" };
	uint8_t		 seen[SLOW_ROWS];
	uint64_t	 ms;
	struct infeed	*f;
	unsigned	 b, i;

	for (b = 0; b < 2; b++) {
		setenv("INFEED_IO_BACKEND", backends[b], 1);
		if (!slow_start(2, 2000)) {
			slow_stop();
			return;
		}
		f = slow_attach(3, false);
		memset(seen, 0, sizeof(seen));
		slow_epoch(f, &ms, seen);
		for (i = 0; i < SLOW_ROWS / SLOW_BATCH * SLOW_BATCH; i++)
			ck_assert_msg(seen[i] <= 1, "sample %u seen %u times",
			    i, seen[i]);
		fprintf(stderr, "%s: an epoch in %" PRIu64 " ms, %" PRIu64
		    " reads\n", backends[b], ms, slowfs_counter(&fs, "reads"));
		infeed_free(f);
		slow_stop();
	}
}
END_TEST

/*
 * Read-ahead from the known order (issue 36, item 2), within its bound:
 * a session of 2 slots whose trainer holds its first step, so that the
 * ring is full, makes the store read its 2 steps and, with read_ahead =
 * 2 steps, the next 2 steps' rows and no more (each row a read of its
 * own: counted by the store); with read_ahead = off, the ring's alone.
 * Then the epoch: every sample once, each right, and each row read from
 * the store once (what was read ahead is taken from the page cache).
 */
static void
slow_read_ahead_bound(const char *setting, uint64_t steps_ahead)
{
	struct infeed		*f;
	struct infeed_step	 st;
	uint8_t			 seen[SLOW_ROWS];
	uint64_t		 held, reads, ms, r, ring = 2 * SLOW_BATCH;

	slow_read_ahead = setting;
	if (!slow_start(1, 2000)) {
		slow_stop();
		return;
	}
	f = slow_attach(2, false);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	slow_check_step(&st);
	/* The ring is full now; what the store reads settles. */
	held = UINT64_MAX;
	for (r = 0; r < 50 && (reads = slowfs_counter(&fs, "reads")) != held;
	    r++) {
		held = reads;
		usleep(200000);
	}
	fprintf(stderr, "read_ahead = %s: %" PRIu64 " rows read from the "
	    "store with the ring of %" PRIu64 " rows full (%" PRIu64 " in "
	    "the ring and %" PRIu64 " ahead allowed)\n", setting, reads,
	    ring, ring, steps_ahead * SLOW_BATCH);
	ck_assert_uint_le(reads, ring + steps_ahead * SLOW_BATCH);
	if (steps_ahead > 0)
		ck_assert_uint_gt(reads, ring + (steps_ahead - 1) * SLOW_BATCH);
	memset(seen, 0, sizeof(seen));
	for (r = 0; r < st.rows; r++)
		seen[st.indices[r]]++;
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	slow_epoch(f, &ms, seen);
	for (r = 0; r < SLOW_ROWS; r++)
		ck_assert_msg(seen[r] == 1, "sample %" PRIu64 " seen %u times",
		    r, seen[r]);
	reads = slowfs_counter(&fs, "reads");
	fprintf(stderr, "read_ahead = %s: the epoch of %d rows in %" PRIu64
	    " ms, %" PRIu64 " rows read from the store\n", setting,
	    SLOW_ROWS, ms, reads);
	ck_assert_uint_le(reads, SLOW_ROWS);
	infeed_free(f);
	slow_stop();
}

START_TEST(read_ahead_within_its_bound)
{
	slow_read_ahead_bound("2 steps", 2);
}
END_TEST

/* Within an eighth of memory_budget too: 1M holds 1 step of 128K. */
START_TEST(read_ahead_within_the_memory_budget)
{
	slow_budget = "1M";
	slow_read_ahead_bound("2 steps", 1);
}
END_TEST

START_TEST(read_ahead_off)
{
	slow_read_ahead_bound("off", 0);
}
END_TEST

/* Wait until the store holds at least @n reads unanswered. */
static void
slow_wait_held(uint64_t n)
{
	int	i;

	for (i = 0; i < 1000 && slowfs_counter(&fs, "held") < n; i++)
		usleep(10000);
	ck_assert_msg(slowfs_counter(&fs, "held") >= n, "%" PRIu64 " reads "
	    "held of %" PRIu64 " (%" PRIu64 " reads)", slowfs_counter(&fs,
	    "held"), n, slowfs_counter(&fs, "reads"));
}

/*
 * The next job's reads go out in the current one's tail (issue 36): one
 * worker, read_ahead off, a session of 8 slots, so the pool sends the next
 * step's job behind the running one.  The store holds the running job's
 * 32 reads; it answers 8 of them: for each, a read of a row of the job
 * behind reaches the store (held), not waiting for the rest of the job's
 * own, and no more than that (the depth stays the job's).  Then the
 * epoch: every sample once, each right.  The rows behind are asked of
 * the kernel (posix_fadvise), for their job to find in the page cache,
 * whether its rows are read as they are or converted to float32.
 */
static void
slow_next_jobs_reads_in_the_tail(bool to_float32)
{
	struct infeed	*f;
	uint8_t		 seen[SLOW_ROWS];
	uint64_t	 ms, total = 0, r;
	int		 i;

	slow_float = to_float32;
	slow_read_ahead = "off";
	if (!slow_start(1, 2000)) {
		slow_stop();
		return;
	}
	slowfs_command(&fs, "hold");
	f = slow_attach(8, false);
	slow_wait_held(SLOW_BATCH);
	usleep(200000);		/* the job behind, sent */
	ck_assert_uint_eq(slowfs_counter(&fs, "held_total"), SLOW_BATCH);
	slowfs_command(&fs, "release 8");
	for (i = 0; i < 300 && (total = slowfs_counter(&fs, "held_total")) <
	    SLOW_BATCH + 8; i++)
		usleep(10000);
	usleep(200000);		/* and no more */
	total = slowfs_counter(&fs, "held_total");
	fprintf(stderr, "next job's reads in the tail (%s): %" PRIu64 " reads "
	    "held in all after 8 of the first job's %d were answered\n",
	    to_float32 ? "to_float32" : "as they are", total, SLOW_BATCH);
	ck_assert_uint_eq(total, SLOW_BATCH + 8);
	ck_assert_uint_eq(slowfs_counter(&fs, "held"), SLOW_BATCH);
	slowfs_command(&fs, "release");
	memset(seen, 0, sizeof(seen));
	slow_epoch(f, &ms, seen);
	for (r = 0; r < SLOW_ROWS; r++)
		ck_assert_msg(seen[r] == 1, "sample %" PRIu64 " seen %u times",
		    r, seen[r]);
	infeed_free(f);
	slow_stop();
}

START_TEST(next_jobs_reads_go_out_in_the_current_ones_tail)
{
	slow_next_jobs_reads_in_the_tail(false);
}
END_TEST

START_TEST(next_jobs_rows_asked_in_the_current_ones_tail_converted)
{
	slow_next_jobs_reads_in_the_tail(true);
}
END_TEST

/*
 * A row of the job behind that lands frees its place in the depth (issue
 * 36, round seven): as above, the store answers 8 of the running job's
 * reads, and 8 rows of the job behind are asked; then it answers those
 * 8 (the newest), and one more of the running job's: for that one
 * completion the worker asks 1 row of the job behind for it and 8 for
 * the rows that landed, 9 in all, where it asked 1 when only its own
 * completions were counted (the depth dipped by the rows that landed).
 */
START_TEST(rows_of_the_job_behind_that_land_are_replaced)
{
	struct infeed	*f;
	uint8_t		 seen[SLOW_ROWS];
	uint64_t	 ms, total = 0, r;
	int		 i;

	slow_float = false;
	slow_read_ahead = "off";
	if (!slow_start(1, 2000)) {
		slow_stop();
		return;
	}
	slowfs_command(&fs, "hold");
	f = slow_attach(8, false);
	slow_wait_held(SLOW_BATCH);
	usleep(200000);		/* the job behind, sent */
	slowfs_command(&fs, "release 8");
	for (i = 0; i < 300 && slowfs_counter(&fs, "held_total") <
	    SLOW_BATCH + 8; i++)
		usleep(10000);
	ck_assert_uint_eq(slowfs_counter(&fs, "held_total"), SLOW_BATCH + 8);
	slowfs_command(&fs, "release-newest 8");
	for (i = 0; i < 300 && slowfs_counter(&fs, "held") >
	    SLOW_BATCH - 8; i++)
		usleep(10000);
	usleep(200000);		/* the 8 answered, in the page cache */
	slowfs_command(&fs, "release 1");
	for (i = 0; i < 300 && (total = slowfs_counter(&fs, "held_total")) <
	    SLOW_BATCH + 8 + 9; i++)
		usleep(10000);
	usleep(200000);		/* and no more */
	total = slowfs_counter(&fs, "held_total");
	fprintf(stderr, "rows of the job behind that landed: %" PRIu64
	    " reads held in all after 8 landed and one more of the running "
	    "job's was answered (%d + 8 + 9 expected)\n", total, SLOW_BATCH);
	ck_assert_uint_eq(total, SLOW_BATCH + 8 + 9);
	slowfs_command(&fs, "release");
	memset(seen, 0, sizeof(seen));
	slow_epoch(f, &ms, seen);
	for (r = 0; r < SLOW_ROWS; r++)
		ck_assert_msg(seen[r] == 1, "sample %" PRIu64 " seen %u times",
		    r, seen[r]);
	infeed_free(f);
	slow_stop();
}
END_TEST

/*
 * A worker killed while its reads wait in the store: its job is done
 * again by another, and the epoch has every sample once, each right (no
 * read of the dead worker lands in a slot after it is reaped).
 */
START_TEST(worker_killed_mid_read_loses_nothing)
{
	struct infeed		*f;
	struct infeed_step	 st;
	uint8_t			 seen[SLOW_ROWS];
	pid_t			 w[4];
	uint64_t		 r, ms;
	int			 n, i;

	if (!slow_start(2, 2000)) {
		slow_stop();
		return;
	}
	slowfs_command(&fs, "hold");
	f = slow_attach(2, false);
	slow_wait_held(SLOW_BATCH);
	ck_assert_int_eq(n = daemon_worker_pids(w, 4), 2);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(kill(w[i], SIGKILL), 0);
	usleep(300000);
	slowfs_command(&fs, "release");
	memset(seen, 0, sizeof(seen));
	slow_epoch(f, &ms, seen);
	for (r = 0; r < SLOW_ROWS; r++)
		ck_assert_msg(seen[r] == 1, "sample %" PRIu64 " seen %u times",
		    r, seen[r]);
	/* And the next epoch, from the replacements. */
	memset(seen, 0, sizeof(seen));
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	slow_check_step(&st);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeed_free(f);
	slow_stop();
}
END_TEST

/*
 * The data file cut while a step's reads wait in the store: the reads
 * come back short, and the session ends with ERROR_DATA saying the file
 * was truncated; no worker dies, and the daemon serves a new session.
 */
START_TEST(file_truncated_under_reads_in_flight)
{
	struct infeed		*f;
	struct infeed_step	 st;
	char			 path[600];
	pid_t			 w[4], after[4];
	int			 rc;

	if (!slow_start(1, 2000)) {
		slow_stop();
		return;
	}
	ck_assert_int_eq(daemon_worker_pids(w, 4), 1);
	slowfs_command(&fs, "hold");
	f = slow_attach(1, true);
	slow_wait_held(SLOW_BATCH / 2);
	snprintf(path, sizeof(path), "%s/src/rows.bin", dir);
	ck_assert_int_eq(truncate(path, 3 * SLOW_BYTES), 0);
	slowfs_command(&fs, "release");
	while ((rc = infeed_next(f, &st)) == INFEED_OK)
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	fprintf(stderr, "cut under reads in flight: %s\n", infeed_error(f));
	ck_assert_int_eq(rc, INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(f), 8);	/* ERROR_DATA */
	ck_assert_msg(strstr(infeed_error(f), "truncated") != NULL, "%s",
	    infeed_error(f));
	infeed_free(f);
	ck_assert_int_eq(daemon_worker_pids(after, 4), 1);
	ck_assert_msg(after[0] == w[0], "the worker died");
	/* The daemon serves on: a new session reads the three rows left. */
	infeed_free(client());
	slow_stop();
}
END_TEST

/* The daemon's memory_used (its Stats), asked on a connection of its own. */
static uint64_t
slow_memory_used(void)
{
	struct infeed		*f = client();
	struct infeed_stats	*st;
	uint64_t		 used;

	ck_assert_msg(infeed_get_stats(f, &st) == INFEED_OK, "%s",
	    infeed_error(f));
	used = st->memory_used;
	infeed_stats_free(st);
	infeed_free(f);
	return (used);
}

/* Whether infeedctl status lists a spare worker. */
static bool
slow_spare_up(void)
{
	char	out[16384];

	infeedctl_run("status", out, sizeof(out));
	return (strstr(out, " spare ") != NULL);
}

/*
 * A store that stops answering (every read held, as a hung FUSE server
 * holds them): the job times out as any stuck job does (job_timeout, per
 * row, 3 tries), the session gets its error saying so, and the daemon
 * serves the other sessions all along: a bystander on a local dataset is
 * answered (ListDatasets within 250 ms), its steps waiting for one
 * job_timeout at most while every worker is held by the dead store (a
 * fixed pool has no worker to spare; the retries of the timed-out rows go
 * after its steps: before, it waited for each try).  The error names the
 * step's first row, the one each try begins with, after its 3 tries
 * (about 3.5 s; 20 s allowed for valgrind): the rows of a job cut by the
 * deaths go back in row order (test-pool's case hung; it once took 62 s
 * and named row 30).  Once the store answers again, a new session is
 * served.
 */
START_TEST(store_that_stops_answering)
{
	struct bystander	 b;
	struct bystander_report	 rep;
	struct infeed		*f;
	struct infeed_step	 st;
	uint64_t		 t0, ms;
	static char		 logbuf[1 << 20];
	char			 out[16384];
	unsigned		 tries;
	const char		*p;
	uint64_t		 used;
	bool			 spare;
	int			 rc;

	slow_job_timeout = "1s";
	if (!slow_start(2, 2000)) {
		slow_stop();
		return;
	}
	slowfs_command(&fs, "hold");
	bystander_start(&b);
	t0 = now_ms();
	f = slow_attach(1, false);
	slow_wait_held(SLOW_BATCH / 2);
	/* Both workers wait on the store: a spare serves the bystander. */
	spare = false;
	for (tries = 0; tries < 100 && !spare; tries++) {
		infeedctl_run("status", out, sizeof(out));
		spare = strstr(out, " spare ") != NULL;
		if (!spare)
			usleep(20000);
	}
	ck_assert_msg(spare, "no spare worker in the status:\n%s", out);
	/* Charged to memory_budget while it is up: 16 MiB at least. */
	used = slow_memory_used();
	fprintf(stderr, "memory_used with a spare up: %.1f MiB\n",
	    (double)used / (1 << 20));
	ck_assert_uint_ge(used, 16 << 20);
	while ((rc = infeed_next(f, &st)) == INFEED_OK)
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	ms = now_ms() - t0;
	bystander_stop(&b, &rep);
	fprintf(stderr, "a store that stops answering: the session's error "
	    "after %" PRIu64 " ms: %s\n", ms, infeed_error(f));
	ck_assert_int_eq(rc, INFEED_ERR_DAEMON);
	ck_assert_msg(strstr(infeed_error(f), "job_timeout") != NULL, "%s",
	    infeed_error(f));
	ck_assert_msg(strstr(infeed_error(f), "(row 0 of epoch 0, step 0)") !=
	    NULL && ms < 20000, "the error should name the step's first row "
	    "after its 3 tries; it came after %" PRIu64 " ms: %s", ms,
	    infeed_error(f));
	fprintf(stderr, "bystander: %" PRIu64 " rounds, worst ListDatasets "
	    "%" PRIu64 " ms, worst Next %" PRIu64 " ms (job_timeout 1 s)\n",
	    rep.rounds, rep.worst_list_ms, rep.worst_next_ms);
	ck_assert_msg(rep.errors == 0, "the bystander failed: %s", rep.error);
	ck_assert_uint_gt(rep.rounds, 0);
	ck_assert_uint_lt(rep.worst_list_ms, 250);
	/* A spare serves it while both workers wait on the store. */
	ck_assert_uint_lt(rep.worst_next_ms, 250);
	read_log(logbuf, sizeof(logbuf));
	/* The spares' lines: why each started, and how soon it was ready. */
	for (p = logbuf; (p = strstr(p, "spare worker")) != NULL; p++)
		fprintf(stderr, "%.*s\n", (int)strcspn(p, "\n"), p);
	ck_assert_msg(strstr(logbuf, "of 2 workers blocked in their storage "
	    "for 50 ms or more, none idle, and a job of another session "
	    "waiting") != NULL, "no spare's reason in the "
	    "log: %s", strstr(logbuf, "spare") ? strstr(logbuf, "spare") :
	    logbuf);
	infeed_free(f);
	slowfs_command(&fs, "release");
	f = slow_attach(1, false);
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s", infeed_error(f));
	slow_check_step(&st);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeed_free(f);
	/* Idle with no worker blocked, the spares go, and their charge. */
	for (tries = 0; tries < 100 && slow_spare_up(); tries++)
		usleep(100000);
	ck_assert_msg(!slow_spare_up(), "a spare still up");
	used = slow_memory_used();
	fprintf(stderr, "memory_used once the spares went: %.1f MiB\n",
	    (double)used / (1 << 20));
	ck_assert_uint_lt(used, 16 << 20);
	slow_stop();
}
END_TEST

/*
 * A spare is charged to memory_budget before it starts: with less free
 * than a worker takes (16 MiB at least), none starts while both workers
 * wait on a store that stopped answering, the log says why, and the
 * bystander is still served, after the blocked jobs' job_timeout.
 */
START_TEST(no_spare_past_the_memory_budget)
{
	struct bystander	 b;
	struct bystander_report	 rep;
	struct infeed		*f;
	struct infeed_step	 st;
	static char		 logbuf[1 << 20];
	unsigned		 tries;
	int			 rc;

	slow_job_timeout = "1s";
	slow_budget = "8M";
	if (!slow_start(2, 2000)) {
		slow_stop();
		return;
	}
	slowfs_command(&fs, "hold");
	bystander_start(&b);
	f = slow_attach(1, false);
	slow_wait_held(SLOW_BATCH / 2);
	/* As long as store_that_stops_answering's spare took, and more. */
	for (tries = 0; tries < 40; tries++) {
		ck_assert_msg(!slow_spare_up(), "a spare started past the "
		    "memory budget");
		usleep(25000);
	}
	while ((rc = infeed_next(f, &st)) == INFEED_OK)
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	ck_assert_int_eq(rc, INFEED_ERR_DAEMON);
	bystander_stop(&b, &rep);
	fprintf(stderr, "no spare: bystander %" PRIu64 " rounds, worst Next "
	    "%" PRIu64 " ms (job_timeout 1 s)\n", rep.rounds,
	    rep.worst_next_ms);
	ck_assert_msg(rep.errors == 0, "the bystander failed: %s", rep.error);
	ck_assert_uint_gt(rep.rounds, 0);
	read_log(logbuf, sizeof(logbuf));
	ck_assert_msg(strstr(logbuf, "no spare worker, though ") != NULL &&
	    strstr(logbuf, "a worker's memory does not fit, for only") !=
	    NULL,
	    "no refusal in the log: %s", strstr(logbuf, "spare") ?
	    strstr(logbuf, "spare") : logbuf);
	ck_assert_ptr_null(strstr(logbuf, "starting spare worker"));
	infeed_free(f);
	slowfs_command(&fs, "release");
	slow_stop();
}
END_TEST

static Suite *
inflight_suite(void)
{
	Suite	*s = suite_create("inflight");
	TCase	*tc = tcase_create("inflight");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, step_rows_in_flight_io_uring);
	tcase_add_test(tc, step_rows_in_flight_threads);
	tcase_add_test(tc, fallback_backend_same_steps);
	tcase_add_test(tc, read_ahead_within_its_bound);
	tcase_add_test(tc, read_ahead_within_the_memory_budget);
	tcase_add_test(tc, read_ahead_off);
	tcase_add_test(tc, next_jobs_reads_go_out_in_the_current_ones_tail);
	tcase_add_test(tc,
	    next_jobs_rows_asked_in_the_current_ones_tail_converted);
	tcase_add_test(tc, rows_of_the_job_behind_that_land_are_replaced);
	suite_add_tcase(s, tc);
	/* Faults while reads wait in the store. */
	tc = tcase_create("faults");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, worker_killed_mid_read_loses_nothing);
	tcase_add_test(tc, file_truncated_under_reads_in_flight);
	tcase_add_test(tc, store_that_stops_answering);
	tcase_add_test(tc, no_spare_past_the_memory_budget);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	if (!slowfs_probe())
		return (77);
	return (run_suite(inflight_suite()));
}
