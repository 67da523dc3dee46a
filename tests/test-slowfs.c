/* SPDX-License-Identifier: MIT */
/*
 * slowfs (tests/slowfs.c), the slow store of the tests and benchmarks of
 * data not in memory (issue 36, item 4): every read waits its delay, many
 * wait at once up to the depth and no more (with no thread waiting for
 * each), the counters say how many were in flight, held reads wait until released, the page cache keeps a
 * file's pages until dropped, and the control file refuses what it does
 * not know; a mount never outlives its server, however the server ends.
 * Where FUSE cannot be mounted (no /dev/fuse, not allowed) the
 * program says why and exits 77: meson counts it as skipped.
 */

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "runner.h"
#include "slowfs-mount.h"

#define ROW		16384
#define ROWS		64
#define DELAY_MS	50
#define DEPTH		8
#define THREADS		16

static char	rundir[4096];

struct reader {
	int		 fd;
	unsigned	 first, count, stride;
	uint8_t		*want;
	uint64_t	 done_ms;
	int		 bad;
};

/* A source directory with a file of ROWS rows, its bytes in @data. */
static void
make_source(char *dir, size_t len, uint8_t *data)
{
	size_t	i;

	make_test_dir(rundir, dir, len);
	ck_assert_int_eq(mkdir(path_in(dir, "src"), 0755), 0);
	for (i = 0; i < (size_t)ROW * ROWS; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	write_file(path_in(dir, "src/rows"), data, (size_t)ROW * ROWS);
}

/* Read rows first, first + stride, ... with pread, checking each. */
static void *
reader_run(void *arg)
{
	struct reader	*r = arg;
	uint8_t		 buf[ROW];
	unsigned	 i, row;

	for (i = 0; i < r->count; i++) {
		row = r->first + i * r->stride;
		if (pread(r->fd, buf, ROW, (off_t)row * ROW) != ROW ||
		    memcmp(buf, r->want + (size_t)row * ROW, ROW) != 0)
			r->bad++;
	}
	r->done_ms = now_ms();
	return (NULL);
}

/* The threads of process @pid (its status's Threads), or 0. */
static unsigned
threads_of(pid_t pid)
{
	char		 path[64], line[256];
	unsigned	 n = 0;
	FILE		*fp;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((fp = fopen(path, "re")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "Threads: %u", &n) == 1)
			break;
	fclose(fp);
	return (n);
}

/*
 * 16 threads read 64 rows through a store of 50 ms and depth 8: 8 reads
 * wait at once and no more, more than 8 are in flight, every row right,
 * in about 64 / 8 x 50 ms = 0.4 s (one at a time would take 3.2 s).  No
 * thread waits for a read: slowfs runs its 4 takers, 1 answerer and main
 * (before, a thread slept in each read: 16 and more).
 */
START_TEST(test_depth)
{
	static uint8_t		 data[ROW * ROWS];
	static const char *const opts[] = { "--delay-us", "50000", "--depth",
				    "8", "--direct-io", NULL };
	struct reader		 r[THREADS];
	pthread_t		 th[THREADS];
	struct slowfs		 fs;
	char			 dir[4096];
	uint64_t		 t0, ms;
	unsigned		 nthreads;
	int			 fd, i;

	make_source(dir, sizeof(dir), data);
	if (!slowfs_start(&fs, path_in(dir, "src"), path_in(dir, "mnt"),
	    opts))
		return;
	fd = open(path_in(dir, "mnt/rows"), O_RDONLY);
	ck_assert_int_ne(fd, -1);
	t0 = now_ms();
	for (i = 0; i < THREADS; i++) {
		r[i] = (struct reader){ fd, (unsigned)i, ROWS / THREADS,
		    THREADS, data, 0, 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, reader_run,
		    &r[i]), 0);
	}
	usleep(DELAY_MS * 1000 * 2);	/* the reads in flight */
	nthreads = threads_of(fs.pid);
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(r[i].bad, 0);
	}
	ms = now_ms() - t0;
	printf("depth: slowfs ran %u threads with %d readers\n", nthreads,
	    THREADS);
	ck_assert_uint_gt(nthreads, 0);
	ck_assert_uint_le(nthreads, 6);
	printf("depth: 64 reads of 50 ms at depth 8 in %llu ms (one at a "
	    "time: 3200), max %llu in flight, %llu waiting at once\n",
	    (unsigned long long)ms,
	    (unsigned long long)slowfs_counter(&fs, "max_in_flight"),
	    (unsigned long long)slowfs_counter(&fs, "max_serving"));
	ck_assert_uint_eq(slowfs_counter(&fs, "reads"), ROWS);
	ck_assert_uint_eq(slowfs_counter(&fs, "bytes"), (uint64_t)ROWS * ROW);
	ck_assert_uint_eq(slowfs_counter(&fs, "max_serving"), DEPTH);
	ck_assert_uint_gt(slowfs_counter(&fs, "max_in_flight"), DEPTH);
	ck_assert_uint_eq(slowfs_counter(&fs, "in_flight"), 0);
	/* Not before the delays allow, and far from one at a time. */
	ck_assert_uint_ge(ms, ROWS / DEPTH * DELAY_MS - 10);
	ck_assert_uint_lt(ms, ROWS * DELAY_MS / 2);
	close(fd);
	slowfs_stop(&fs);
}
END_TEST

/* Held reads wait, unanswered, until released; then they are right. */
START_TEST(test_hold)
{
	static uint8_t		 data[ROW * ROWS];
	static const char *const opts[] = { "--delay-us", "1000",
				    "--direct-io", NULL };
	struct reader		 r;
	pthread_t		 th;
	struct slowfs		 fs;
	char			 dir[4096];
	uint64_t		 t0;
	int			 fd;

	make_source(dir, sizeof(dir), data);
	if (!slowfs_start(&fs, path_in(dir, "src"), path_in(dir, "mnt"),
	    opts))
		return;
	fd = open(path_in(dir, "mnt/rows"), O_RDONLY);
	ck_assert_int_ne(fd, -1);
	slowfs_command(&fs, "hold");
	r = (struct reader){ fd, 3, 2, 7, data, 0, 0 };
	t0 = now_ms();
	ck_assert_int_eq(pthread_create(&th, NULL, reader_run, &r), 0);
	while (slowfs_counter(&fs, "held") == 0)
		ck_assert_uint_lt(now_ms() - t0, 5000);
	usleep(300000);
	ck_assert_uint_eq(slowfs_counter(&fs, "held"), 1);
	ck_assert_uint_eq(slowfs_counter(&fs, "reads"), 0);
	ck_assert_uint_eq(r.done_ms, 0);
	slowfs_command(&fs, "release");
	pthread_join(th, NULL);
	ck_assert_int_eq(r.bad, 0);
	ck_assert_uint_ge(r.done_ms - t0, 300);
	ck_assert_uint_eq(slowfs_counter(&fs, "reads"), 2);
	ck_assert_uint_eq(slowfs_counter(&fs, "held"), 0);
	ck_assert_uint_eq(slowfs_counter(&fs, "held_total"), 1);
	close(fd);
	slowfs_stop(&fs);
}
END_TEST

/* Every byte of @map read (and checked); the time it took. */
static uint64_t
read_map(const uint8_t *map, const uint8_t *want)
{
	uint64_t	t0 = now_ms();
	size_t		i;

	for (i = 0; i < (size_t)ROW * ROWS; i += 4096)
		ck_assert_int_eq(memcmp(map + i, want + i, 4096), 0);
	return (now_ms() - t0);
}

/*
 * A shared mapping of a file through the page cache: the first pass reads
 * from the store, the second from the cache, and after "drop" (and with
 * --drop-ms) from the store again.
 */
START_TEST(test_cache)
{
	static uint8_t		 data[ROW * ROWS];
	static const char *const opts[] = { "--delay-us", "5000",
				    "--readahead-kib", "64", NULL };
	struct slowfs		 fs;
	char			 dir[4096];
	uint8_t			*map;
	uint64_t		 first, second;
	int			 fd;

	make_source(dir, sizeof(dir), data);
	if (!slowfs_start(&fs, path_in(dir, "src"), path_in(dir, "mnt"),
	    opts))
		return;
	fd = open(path_in(dir, "mnt/rows"), O_RDONLY);
	ck_assert_int_ne(fd, -1);
	map = mmap(NULL, (size_t)ROW * ROWS, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	read_map(map, data);
	first = slowfs_counter(&fs, "reads");
	ck_assert_uint_gt(first, 0);
	read_map(map, data);
	second = slowfs_counter(&fs, "reads");
	ck_assert_uint_eq(second, first);
	slowfs_command(&fs, "drop");
	read_map(map, data);
	printf("cache: %llu reads the first pass, %llu the second, %llu "
	    "after drop\n", (unsigned long long)first,
	    (unsigned long long)(second - first),
	    (unsigned long long)(slowfs_counter(&fs, "reads") - second));
	ck_assert_uint_gt(slowfs_counter(&fs, "reads"), second);
	munmap(map, (size_t)ROW * ROWS);
	close(fd);
	slowfs_stop(&fs);
}
END_TEST

/*
 * The control file: unlisted, counters reset, unknown commands refused;
 * the data read-only.
 */
START_TEST(test_control)
{
	static uint8_t		 data[ROW * ROWS];
	static const char *const opts[] = { "--delay-us", "0", NULL };
	struct slowfs		 fs;
	struct dirent		*de;
	char			 dir[4096], buf[ROW];
	DIR			*d;
	int			 fd, n = 0;

	make_source(dir, sizeof(dir), data);
	if (!slowfs_start(&fs, path_in(dir, "src"), path_in(dir, "mnt"),
	    opts))
		return;
	ck_assert_ptr_nonnull(d = opendir(path_in(dir, "mnt")));
	while ((de = readdir(d)) != NULL) {
		ck_assert_str_ne(de->d_name, ".slowfs");
		n += strcmp(de->d_name, "rows") == 0;
	}
	closedir(d);
	ck_assert_int_eq(n, 1);
	fd = open(path_in(dir, "mnt/rows"), O_RDONLY);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	close(fd);
	ck_assert_uint_gt(slowfs_counter(&fs, "reads"), 0);
	slowfs_command(&fs, "reset");
	ck_assert_uint_eq(slowfs_counter(&fs, "reads"), 0);
	fd = open(fs.ctl, O_WRONLY);
	ck_assert_int_eq(write(fd, "faster\n", 7), -1);
	ck_assert_int_eq(errno, EINVAL);
	close(fd);
	/* Root is refused by slowfs, others already by the mode, 0444. */
	ck_assert_int_eq(open(path_in(dir, "mnt/rows"), O_WRONLY), -1);
	ck_assert_msg(errno == EROFS || errno == EACCES, "%s",
	    strerror(errno));
	slowfs_stop(&fs);
}
END_TEST

/* Whether @mnt is a mount point of this host (/proc/self/mounts). */
static bool
mounted_at(const char *mnt)
{
	char	line[4096], path[4096], want[4096], type[64], *o = want;
	FILE	*fp = fopen("/proc/self/mounts", "re");
	bool	found = false;

	/* The file writes a space as \040 (a TMPDIR with one). */
	for (; *mnt != '\0' && o < want + sizeof(want) - 5; mnt++)
		o += *mnt == ' ' ? sprintf(o, "\\040") : sprintf(o, "%c",
		    *mnt);
	*o = '\0';
	ck_assert_ptr_nonnull(fp);
	while (!found && fgets(line, sizeof(line), fp) != NULL)
		found = sscanf(line, "%*s %4095s %63s", path, type) == 2 &&
		    strcmp(type, "fuse.slowfs") == 0 &&
		    strcmp(path, want) == 0;
	fclose(fp);
	return (found);
}

/* Wait up to 5 s for @mnt to be no mount; whether it went. */
static bool
unmounted_within(const char *mnt)
{
	uint64_t	t0 = now_ms();

	while (mounted_at(mnt) && now_ms() - t0 < 5000)
		usleep(20000);
	return (!mounted_at(mnt));
}

/* The pid of the fusermount3 that watches server @pid's mount, or -1. */
static pid_t
watcher_of(pid_t pid)
{
	char		 path[300], cmd[4096], want[64];
	struct dirent	*de;
	ssize_t		 n, i;
	pid_t		 found = -1;
	DIR		*d = opendir("/proc");
	int		 fd;

	ck_assert_ptr_nonnull(d);
	snprintf(want, sizeof(want), "fsname=slowfs:%d,", (int)pid);
	while (found == -1 && (de = readdir(d)) != NULL) {
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		if ((fd = open(path, O_RDONLY)) == -1)
			continue;
		n = read(fd, cmd, sizeof(cmd) - 1);
		close(fd);
		for (i = 0; i < n; i++)		/* the arguments, one line */
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		cmd[n > 0 ? n : 0] = '\0';
		if (strstr(cmd, "fusermount3") != NULL &&
		    strstr(cmd, want) != NULL)
			found = (pid_t)atoi(de->d_name);
	}
	closedir(d);
	return (found);
}

/*
 * No dead mount is left behind (a failing test or a killed run left some
 * under /tmp): a server killed outright while a read waits in it leaves
 * no mount (its auto_unmount), and one whose watcher was killed with it
 * is unmounted by the next slowfs to start (its fsname names a server
 * that is gone).
 */
START_TEST(test_no_dead_mount)
{
	static uint8_t		 data[ROW * ROWS];
	static const char *const opts[] = { "--delay-us", "1000", NULL };
	struct reader		 r;
	struct slowfs		 fs, next;
	pthread_t		 th;
	char			 dir[4096], mnt[4096];
	pid_t			 watcher;
	int			 fd;

	make_source(dir, sizeof(dir), data);
	if (!slowfs_start(&fs, path_in(dir, "src"), path_in(dir, "mnt"),
	    opts))
		return;
	snprintf(mnt, sizeof(mnt), "%s", fs.mnt);
	ck_assert(mounted_at(mnt));
	fd = open(path_in(dir, "mnt/rows"), O_RDONLY);
	ck_assert_int_ne(fd, -1);
	slowfs_command(&fs, "hold");
	r = (struct reader){ fd, 0, 1, 1, data, 0, 0 };
	ck_assert_int_eq(pthread_create(&th, NULL, reader_run, &r), 0);
	while (slowfs_counter(&fs, "held") == 0)
		usleep(10000);
	ck_assert_int_eq(kill(fs.pid, SIGKILL), 0);
	waitpid(fs.pid, NULL, 0);
	fs.pid = 0;
	ck_assert_msg(unmounted_within(mnt), "%s still mounted 5 s after "
	    "its server was killed", mnt);
	pthread_join(th, NULL);
	ck_assert_int_eq(r.bad, 1);	/* the held read failed, no hang */
	close(fd);

	/* Server and watcher killed: the mount is left, dead... */
	ck_assert(slowfs_start(&fs, path_in(dir, "src"), mnt, opts));
	ck_assert_int_ne(watcher = watcher_of(fs.pid), -1);
	ck_assert_int_eq(kill(watcher, SIGKILL), 0);
	ck_assert_int_eq(kill(fs.pid, SIGKILL), 0);
	waitpid(fs.pid, NULL, 0);
	fs.pid = 0;
	usleep(200000);
	ck_assert_msg(mounted_at(mnt), "no dead mount to sweep");
	/* ...until the next slowfs starts, anywhere. */
	ck_assert(slowfs_start(&next, path_in(dir, "src"),
	    path_in(dir, "mnt2"), opts));
	ck_assert_msg(!mounted_at(mnt), "the dead mount %s is still there "
	    "after the next slowfs started", mnt);
	slowfs_stop(&next);
}
END_TEST

static Suite *
slowfs_suite(void)
{
	Suite	*s = suite_create("slowfs");
	TCase	*tc = tcase_create("slowfs");

	tcase_add_test(tc, test_depth);
	tcase_add_test(tc, test_hold);
	tcase_add_test(tc, test_cache);
	tcase_add_test(tc, test_control);
	tcase_add_test(tc, test_no_dead_mount);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	if (!slowfs_probe())
		return (77);
	return (run_suite_in_dir(slowfs_suite(), "test-slowfs", rundir,
	    sizeof(rundir)));
}
