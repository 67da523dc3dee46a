/* SPDX-License-Identifier: MIT */
/*
 * A dataset larger than the memory infeedd may use (issue 36, item 4):
 * infeedd started in a memory-limited cgroup (tests/with-memory-limit
 * makes it: the test steps in for the start, so that infeedd and its
 * workers are born there, and out again), a raw dataset 4 times the limit
 * on the local disk, not in the page cache, read for an epoch.  Every row
 * once and right, infeedd and its workers alive and never OOM-killed, and
 * the cgroup's peak (its processes and the file cache they brought in)
 * within the limit.  Exits 77 (skipped) where no such cgroup can be made
 * (no systemd scope, not root), and with infeedd under valgrind (which
 * alone needs more than the limit).
 */

#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "infeed.h"

#define MC_LIMIT_MIB	64
#define MC_ROW		16384			/* bytes a row */
#define MC_ROWS		(4 * (MC_LIMIT_MIB << 20) / MC_ROW)
#define MC_BATCH	256			/* 4 MiB a step */

static pid_t	mc_holder = -1;		/* with-memory-limit's child: sleep */
static pid_t	mc_wrapper = -1;	/* with-memory-limit */
static char	mc_dir[512];		/* the cgroup */
static bool	mc_v1;

/* The cgroup directory of @pid's memory controller into @out. */
static bool
mc_cgroup_of(pid_t pid, char *out, size_t len, bool *v1)
{
	char	path[64], line[256], *p;
	FILE	*fp;
	bool	found = false;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return (false);
	while (!found && fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if ((p = strchr(line, ':')) == NULL)
			continue;
		if (strncmp(p, ":memory:", 8) == 0 || strstr(p, ",memory:") ||
		    strstr(p, ":memory,")) {
			*v1 = true;
			snprintf(out, len, "/sys/fs/cgroup/memory%s",
			    strrchr(p, ':') + 1);
			found = true;
		}
	}
	if (!found) {
		rewind(fp);
		while (!found && fgets(line, sizeof(line), fp) != NULL) {
			line[strcspn(line, "\n")] = '\0';
			if (strncmp(line, "0::", 3) != 0)
				continue;
			*v1 = false;
			snprintf(out, len, "%s%s", access(
			    "/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ?
			    "/sys/fs/cgroup" : "/sys/fs/cgroup/unified",
			    line + 3);
			found = true;
		}
	}
	fclose(fp);
	return (found);
}

/* Write @pid into @cg's cgroup.procs. */
static bool
mc_enter(const char *cg, pid_t pid)
{
	char	path[600];
	FILE	*fp;
	int	ok;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	if ((fp = fopen(path, "w")) == NULL)
		return (false);
	ok = fprintf(fp, "%d\n", (int)pid) > 0;
	return (fclose(fp) == 0 && ok);
}

/* A number from @cg's file @name ("max": UINT64_MAX), or 0. */
static uint64_t
mc_read(const char *name, const char *key)
{
	char		path[700], line[256];
	uint64_t	v = 0;
	size_t		klen = key != NULL ? strlen(key) : 0;
	FILE		*fp;

	snprintf(path, sizeof(path), "%s/%s", mc_dir, name);
	if ((fp = fopen(path, "r")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (key != NULL && (strncmp(line, key, klen) != 0 ||
		    line[klen] != ' '))
			continue;
		v = strncmp(line + klen, "max", 3) == 0 ? UINT64_MAX :
		    strtoull(line + (key != NULL ? klen + 1 : 0), NULL, 10);
		break;
	}
	fclose(fp);
	return (v);
}

/*
 * A cgroup of MC_LIMIT_MIB by tests/with-memory-limit, held by a sleep
 * in it.  False (with-memory-limit said why) where none can be made.
 */
static bool
mc_make(void)
{
	const char	*wml = getenv("WITH_MEMORY_LIMIT");
	char		 buf[32], limit[16];
	ssize_t		 n;
	int		 fds[2], status;

	if (wml == NULL) {
		fprintf(stderr, "skipped: set WITH_MEMORY_LIMIT to "
		    "tests/with-memory-limit\n");
		return (false);
	}
	snprintf(limit, sizeof(limit), "%dM", MC_LIMIT_MIB);
	if (pipe(fds) == -1 || (mc_wrapper = fork()) == -1)
		return (false);
	if (mc_wrapper == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl(wml, wml, limit, "sh", "-c", "echo $$; exec sleep 600",
		    (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	if (n <= 0) {
		waitpid(mc_wrapper, &status, 0);
		mc_wrapper = -1;
		return (false);
	}
	buf[n] = '\0';
	mc_holder = (pid_t)atoi(buf);
	if (!mc_cgroup_of(mc_holder, mc_dir, sizeof(mc_dir), &mc_v1)) {
		fprintf(stderr, "skipped: no memory cgroup for %d\n",
		    (int)mc_holder);
		return (false);
	}
	return (true);
}

/* The holder ended: with-memory-limit removes the cgroup. */
static void
mc_unmake(void)
{
	int	status;

	if (mc_holder > 0)
		kill(mc_holder, SIGTERM);
	if (mc_wrapper > 0)
		waitpid(mc_wrapper, &status, 0);
	mc_holder = mc_wrapper = -1;
}

/* Row @i: its index at the start and the end, its low byte between. */
static void
mc_row(uint64_t i, uint8_t *row)
{
	memset(row, (int)(i & 0xff), MC_ROW);
	memcpy(row, &i, sizeof(i));
	memcpy(row + MC_ROW - sizeof(i), &i, sizeof(i));
}

/* The dataset and labels, written past the page cache. */
static void
mc_files(void)
{
	static uint8_t	rows[64 * MC_ROW];
	int64_t		label;
	uint64_t	i;
	char		path[600];
	FILE		*lf;
	int		fd;

	snprintf(path, sizeof(path), "%s/big.bin", dir);
	ck_assert_int_ne(fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644),
	    -1);
	snprintf(path, sizeof(path), "%s/big-labels.bin", dir);
	ck_assert_ptr_nonnull(lf = fopen(path, "w"));
	for (i = 0; i < MC_ROWS; i++) {
		mc_row(i, rows + (i % 64) * MC_ROW);
		if (i % 64 == 63)
			ck_assert_int_eq(write(fd, rows, sizeof(rows)),
			    (ssize_t)sizeof(rows));
		label = (int64_t)(i % 10);
		ck_assert_uint_eq(fwrite(&label, sizeof(label), 1, lf), 1);
	}
	fclose(lf);
	/* Out of the page cache: infeedd's reads bring it in, charged. */
	ck_assert_int_eq(fdatasync(fd), 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
}

START_TEST(larger_than_memory_read_once_within_the_limit)
{
	static uint8_t		 seen[MC_ROWS];
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	char			 home[512], crash[1024];
	const uint8_t		*p;
	uint64_t		 r, i, t0, ms, peak, limit, once = 0;
	bool			 v1;
	FILE			*fp;
	int			 rc;

	ck_assert(mc_make());
	make_files("memory_budget = 24M");
	ck_assert_ptr_nonnull(fp = fopen(conf_path, "a"));
	fprintf(fp, "\n[dataset big]\ntype = raw\npath = %s/big.bin\n"
	    "labels = %s/big-labels.bin\nshape = %d\ndtype = uint8\n"
	    "label_dtype = int64\nclasses = 10\n", dir, dir, MC_ROW);
	fclose(fp);
	mc_files();
	/* In for infeedd's start (its processes are born there), then out. */
	ck_assert(mc_cgroup_of(getpid(), home, sizeof(home), &v1));
	ck_assert_msg(mc_enter(mc_dir, getpid()), "cannot enter %s: %s",
	    mc_dir, strerror(errno));
	infeedd_start("1");
	ck_assert_msg(mc_enter(home, getpid()), "cannot leave for %s: %s",
	    home, strerror(errno));
	f = client();
	infeed_options_init(&o);
	o.batch_size = MC_BATCH;
	o.shuffle = true;
	o.seed = 3;
	o.buffer_size = 2;
	o.load_indefinitely = false;
	ck_assert_msg(infeed_attach(f, "big", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	t0 = now_ms();
	while ((rc = infeed_next(f, &st)) == INFEED_OK) {
		for (r = 0; r < st.rows; r++) {
			p = (const uint8_t *)st.data + r * MC_ROW;
			i = st.indices[r];
			ck_assert_uint_lt(i, MC_ROWS);
			ck_assert_msg(memcmp(p, &i, sizeof(i)) == 0 &&
			    memcmp(p + MC_ROW - sizeof(i), &i, sizeof(i)) == 0 &&
			    p[MC_ROW / 2] == (uint8_t)i, "row %" PRIu64 " is not "
			    "sample %" PRIu64 "'s", r, i);
			ck_assert_int_eq(st.labels64 != NULL ? st.labels64[r] :
			    st.labels[r], (int64_t)(i % 10));
			ck_assert_msg(seen[i]++ == 0, "sample %" PRIu64 " twice",
			    i);
			once++;
		}
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ms = now_ms() - t0;
	ck_assert_msg(rc == INFEED_END_OF_DATA, "%s", infeed_error(f));
	ck_assert_uint_eq(once, MC_ROWS / MC_BATCH * MC_BATCH);
	infeed_free(f);
	peak = mc_read(mc_v1 ? "memory.max_usage_in_bytes" : "memory.peak",
	    NULL);
	limit = mc_read(mc_v1 ? "memory.limit_in_bytes" : "memory.max", NULL);
	fprintf(stderr, "an epoch of %d MiB in %" PRIu64 " ms in a cgroup of "
	    "%" PRIu64 " MiB (%s): peak %" PRIu64 " MiB, oom kills %" PRIu64
	    "\n", 4 * MC_LIMIT_MIB, ms, limit >> 20, mc_dir, peak >> 20,
	    mc_read(mc_v1 ? "memory.oom_control" : "memory.events",
	    "oom_kill"));
	ck_assert_uint_eq(limit, (uint64_t)MC_LIMIT_MIB << 20);
	/* Above a quarter: infeedd and its reads were charged there. */
	ck_assert_msg(peak > limit / 4 && peak <= limit, "peak %" PRIu64
	    " of %" PRIu64, peak, limit);
	ck_assert_uint_eq(mc_read(mc_v1 ? "memory.oom_control" :
	    "memory.events", "oom_kill"), 0);
	ck_assert_msg(!infeedd_log_crash(crash, sizeof(crash)), "%s", crash);
	ck_assert_int_eq(kill(infeedd_pid, 0), 0);
	rc = infeedd_stop();
	ck_assert_msg(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "infeedd "
	    "ended with %#x", rc);
	mc_unmake();
	unlink(path_in(dir, "big.bin"));
	unlink(path_in(dir, "big-labels.bin"));
	rm_dir();
}
END_TEST

static Suite *
memory_cgroup_suite(void)
{
	Suite	*s = suite_create("memory-cgroup");
	TCase	*tc = tcase_create("memory-cgroup");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, larger_than_memory_read_once_within_the_limit);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	const char	*bin = getenv("INFEEDD");
	bool		 ok;

	/* valgrind alone takes more than the limit: the cgroup kills it. */
	if (bin != NULL && strstr(bin, "valgrind") != NULL) {
		fprintf(stderr, "skipped: infeedd under valgrind does not fit "
		    "in %d MiB\n", MC_LIMIT_MIB);
		return (77);
	}
	ok = mc_make();

	mc_unmake();
	if (!ok)
		return (77);
	return (run_suite(memory_cgroup_suite()));
}
