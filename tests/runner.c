/* SPDX-License-Identifier: MIT */
/*
 * The one main() of every Check program, less what the program sets up
 * for itself: run_suite() runs a suite's tests as Check's CK_* variables
 * say (CK_RUN_CASE, CK_VERBOSITY, CK_FORK...) and gives the exit status;
 * run_suite_in_dir() does so in a directory of the run's own, made under
 * $TMPDIR (or /tmp) and removed with everything in it at the end, for the
 * programs that write files; make_test_dir() makes a test's own in it,
 * path_in() names a file there, remove_tree() removes it.
 *
 * And the few helpers every kind of test uses, unit and integration
 * alike, so that none keeps a copy: the monotonic clock, a file written
 * whole, a process's descriptors counted and descriptors passed by hand.
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "runner.h"

/*
 * Run @s's tests; EXIT_SUCCESS when every one passed.  SIGPIPE is
 * ignored: a peer that hangs up is a failed write for the test to see,
 * not the death of the program.
 */
int
run_suite(Suite *s)
{
	SRunner	*sr = srunner_create(s);
	int	 nfailed;

	signal(SIGPIPE, SIG_IGN);
	srunner_run_all(sr, CK_ENV);
	nfailed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (nfailed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}

/*
 * run_suite() in a fresh directory $TMPDIR/NAME.XXXXXX, whose path goes
 * in @rundir (@len bytes) for the tests, removed with all it holds after.
 */
int
run_suite_in_dir(Suite *s, const char *name, char *rundir, size_t len)
{
	const char	*tmp;
	int		 n, status;

	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
		tmp = "/tmp";
	n = snprintf(rundir, len, "%s/%s.XXXXXX", tmp, name);
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "%s: the directory's path under %s is longer "
		    "than %zu bytes\n", name, tmp, len - 1);
		return (EXIT_FAILURE);
	}
	if (mkdtemp(rundir) == NULL) {
		fprintf(stderr, "mkdtemp %s: %s\n", rundir, strerror(errno));
		return (EXIT_FAILURE);
	}
	status = run_suite(s);
	remove_tree(rundir);
	return (status);
}

/* A fresh directory @rundir/t.XXXXXX for one test, its path in @dir. */
void
make_test_dir(const char *rundir, char *dir, size_t len)
{
	int	n;

	n = snprintf(dir, len, "%s/t.XXXXXX", rundir);
	ck_assert(n > 0 && (size_t)n < len);
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* @dir/@name, in one of eight buffers: eight such paths in use at once. */
const char *
path_in(const char *dir, const char *name)
{
	static char	buf[8][PATH_MAX];
	static int	next;
	char		*p = buf[next++ % 8];
	int		 n;

	n = snprintf(p, PATH_MAX, "%s/%s", dir, name);
	ck_assert(n > 0 && n < PATH_MAX);
	return (p);
}

/* nftw's callback for remove_tree(): one entry, children first. */
static int
remove_tree_cb(const char *path, const struct stat *st, int flag,
    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return (0);
}

/* Remove @path and everything under it; symlinks go, never followed. */
void
remove_tree(const char *path)
{
	nftw(path, remove_tree_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Milliseconds on a clock that only goes forward. */
uint64_t
now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

/* Write @len bytes to @path or fail the test. */
void
write_file(const char *path, const void *buf, size_t len)
{
	FILE	*fp;

	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	ck_assert_uint_eq(fwrite(buf, 1, len, fp), len);
	ck_assert_int_eq(fclose(fp), 0);
}

/*
 * Count the entries of /proc/PID/fd (of /proc/self/fd for 0, less the
 * one opendir() reads them through) whose link does not name @but.
 */
int
count_fds(pid_t pid, const char *but)
{
	char		 path[64], link[PATH_MAX + 64], to[PATH_MAX];
	DIR		*d;
	struct dirent	*de;
	ssize_t		 len;
	int		 n = 0;

	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/fd");
	else
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if ((d = opendir(path)) == NULL)
		return (-1);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (but != NULL) {
			snprintf(link, sizeof(link), "%s/%s", path,
			    de->d_name);
			len = readlink(link, to, sizeof(to) - 1);
			to[len > 0 ? len : 0] = '\0';
			if (strstr(to, but) != NULL)
				continue;
		}
		n++;
	}
	closedir(d);
	return (pid == 0 ? n - 1 : n);
}

/* Run @fn(@p, @arg) in a child: see runner.h. */
int
run_in_child(void (*fn)(void *p, int arg), void *p, int arg, char *err,
    size_t errlen)
{
	pid_t	pid;
	size_t	off = 0;
	ssize_t	n;
	int	fd[2], status;

	ck_assert_int_eq(pipe(fd), 0);
	fflush(stdout);
	fflush(stderr);
	ck_assert_int_ne(pid = fork(), -1);
	if (pid == 0) {
		close(fd[0]);
		dup2(fd[1], STDERR_FILENO);
		fn(p, arg);
		_exit(0);
	}
	close(fd[1]);
	while (off + 1 < errlen &&
	    (n = read(fd[0], err + off, errlen - 1 - off)) > 0)
		off += (size_t)n;
	err[off] = '\0';
	close(fd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return (status);
}

/* This process's descriptors on @what: all of them less the others. */
int
count_fds_on(const char *what)
{
	return (count_fds(0, NULL) - count_fds(0, what));
}

/* One byte with @count copies of @fd in a hand-built SCM_RIGHTS. */
void
send_fds(int sock, int fd, int count)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) *
				    RUNNER_MAX_SEND_FDS)];
	} cbuf;
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*cmsg;
	char		 byte = 'x';
	int		 i;

	ck_assert_int_le(count, RUNNER_MAX_SEND_FDS);
	memset(&msg, 0, sizeof(msg));
	memset(&cbuf, 0, sizeof(cbuf));
	iov.iov_base = &byte;
	iov.iov_len = 1;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count);
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
	for (i = 0; i < count; i++)
		memcpy(CMSG_DATA(cmsg) + (size_t)i * sizeof(int), &fd,
		    sizeof(int));
	ck_assert_int_eq(sendmsg(sock, &msg, MSG_NOSIGNAL), 1);
}
