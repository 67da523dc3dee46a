/* SPDX-License-Identifier: MIT */
/*
 * slowfs for the C tests: see slowfs-mount.h.  The server runs in the
 * foreground as a child of the test; the mount is ready once its control
 * file answers.  It goes however the test ends: slowfs_stop() unmounts
 * lazily; a test that fails or is killed ends the server (its parent's
 * death sends it SIGTERM), and its auto_unmount (fusermount3, watching)
 * unmounts even when it is killed outright.
 */

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "runner.h"
#include "slowfs-mount.h"

#define SLOWFS_EXIT_NOMOUNT	3	/* slowfs.c's: cannot mount here */

/* Why FUSE cannot be mounted here, or NULL. */
const char *
slowfs_unavailable(void)
{
	const char	*prog = getenv("SLOWFS");

	if (prog == NULL || *prog == '\0')
		return ("$SLOWFS is not set (slowfs is built with libfuse3)");
	if (access("/dev/fuse", F_OK) == -1)
		return ("no /dev/fuse");
	if (geteuid() != 0 && access("/usr/bin/fusermount3", X_OK) == -1 &&
	    access("/bin/fusermount3", X_OK) == -1)
		return ("not root and no fusermount3");
	return (NULL);
}

/* Run fusermount3 -u -z @mnt; its exit status, -1 when it did not run. */
static int
slowfs_fusermount(const char *mnt)
{
	pid_t	pid;
	int	st;

	if ((pid = fork()) == -1)
		return (-1);
	if (pid == 0) {
		int	null = open("/dev/null", O_WRONLY);

		if (null != -1)
			dup2(null, STDERR_FILENO);
		execlp("fusermount3", "fusermount3", "-u", "-z", mnt,
		    (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) == -1 || !WIFEXITED(st))
		return (-1);
	return (WEXITSTATUS(st));
}

/*
 * Serve @src at @mnt through slowfs with @opts: 1 once mounted, 0 where it
 * cannot mount here (said on stderr), -1 on another failure (in @why).
 * No Check call: slowfs_probe() runs it outside the tests.
 */
static int
slowfs_mount(struct slowfs *fs, const char *src, const char *mnt,
    const char *const *opts, char *why, size_t len)
{
	const char	*no, *argv[40];
	struct stat	 st;
	uint64_t	 deadline;
	int		 argc = 0, status, i;

	if ((no = slowfs_unavailable()) != NULL) {
		fprintf(stderr, "skipped: slowfs: %s\n", no);
		return (0);
	}
	(void)mkdir(mnt, 0755);
	snprintf(fs->mnt, sizeof(fs->mnt), "%s", mnt);
	snprintf(fs->ctl, sizeof(fs->ctl), "%s/.slowfs", mnt);
	argv[argc++] = getenv("SLOWFS");
	for (i = 0; opts != NULL && opts[i] != NULL && argc < 36; i++)
		argv[argc++] = opts[i];
	argv[argc++] = src;
	argv[argc++] = mnt;
	argv[argc] = NULL;
	if ((fs->pid = fork()) == -1) {
		snprintf(why, len, "fork: %s", strerror(errno));
		return (-1);
	}
	if (fs->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0],
		    strerror(errno));
		_exit(127);
	}
	deadline = now_ms() + 10000;
	while (stat(fs->ctl, &st) == -1) {
		if (waitpid(fs->pid, &status, WNOHANG) == fs->pid) {
			fs->pid = 0;
			if (WIFEXITED(status) &&
			    WEXITSTATUS(status) == SLOWFS_EXIT_NOMOUNT) {
				fprintf(stderr, "skipped: slowfs could not "
				    "mount %s (its message above)\n", mnt);
				return (0);
			}
			snprintf(why, len, "slowfs exited (status %d) before "
			    "mounting %s", status, mnt);
			return (-1);
		}
		if (now_ms() >= deadline) {
			snprintf(why, len, "slowfs did not mount %s within "
			    "10 s", mnt);
			slowfs_stop(fs);
			return (-1);
		}
		usleep(10000);
	}
	return (1);
}

/* Serve @src at @mnt through slowfs with @opts. */
bool
slowfs_start(struct slowfs *fs, const char *src, const char *mnt,
    const char *const *opts)
{
	char	why[512];
	int	rc = slowfs_mount(fs, src, mnt, opts, why, sizeof(why));

	ck_assert_msg(rc != -1, "%s", why);
	return (rc == 1);
}

/* Whether slowfs mounts here at all (no Check call: before the suite). */
bool
slowfs_probe(void)
{
	char		 dir[] = "/tmp/infeed-slowfs-probe.XXXXXX";
	char		 src[64], mnt[64], why[512];
	struct slowfs	 fs;
	int		 rc;

	if (mkdtemp(dir) == NULL) {
		fprintf(stderr, "skipped: slowfs: %s: %s\n", dir,
		    strerror(errno));
		return (false);
	}
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	(void)mkdir(src, 0755);
	if ((rc = slowfs_mount(&fs, src, mnt, NULL, why, sizeof(why))) == 1)
		slowfs_stop(&fs);
	else if (rc == -1)
		fprintf(stderr, "skipped: %s\n", why);
	rmdir(src);
	rmdir(dir);
	return (rc == 1);
}

/* Unmount, then wait for the server: it exits once unmounted. */
void
slowfs_stop(struct slowfs *fs)
{
	uint64_t	deadline;
	int		i;

	if (fs->pid <= 0)
		return;
	if (slowfs_fusermount(fs->mnt) != 0)
		kill(fs->pid, SIGTERM);
	deadline = now_ms() + 5000;
	for (i = 0; waitpid(fs->pid, NULL, WNOHANG) == 0; i++) {
		if (now_ms() >= deadline) {
			kill(fs->pid, SIGKILL);
			waitpid(fs->pid, NULL, 0);
			break;
		}
		if (i == 100)	/* held reads keep it: end the session */
			kill(fs->pid, SIGTERM);
		usleep(10000);
	}
	fs->pid = 0;
	(void)rmdir(fs->mnt);
}

/* One counter of the control file. */
uint64_t
slowfs_counter(const struct slowfs *fs, const char *name)
{
	char			 buf[1024], key[64];
	unsigned long long	 v;
	const char		*line;
	ssize_t			 n;
	int			 fd;

	fd = open(fs->ctl, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd != -1, "%s: %s", fs->ctl, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_msg(n > 0, "%s: nothing read", fs->ctl);
	buf[n] = '\0';
	for (line = buf; line != NULL && *line != '\0';
	    line = strchr(line, '\n') != NULL ? strchr(line, '\n') + 1 :
	    NULL)
		if (sscanf(line, "%63s %llu", key, &v) == 2 &&
		    strcmp(key, name) == 0)
			return (v);
	ck_abort_msg("%s has no counter %s:\n%s", fs->ctl, name, buf);
	return (0);
}

/* Write a command to the control file. */
void
slowfs_command(const struct slowfs *fs, const char *cmd)
{
	size_t	len = strlen(cmd);
	int	fd;

	fd = open(fs->ctl, O_WRONLY | O_CLOEXEC);
	ck_assert_msg(fd != -1, "%s: %s", fs->ctl, strerror(errno));
	ck_assert_msg(write(fd, cmd, len) == (ssize_t)len, "%s: %s: %s",
	    fs->ctl, cmd, strerror(errno));
	close(fd);
}
