/* SPDX-License-Identifier: MIT */
/*
 * slowfs (tests/slowfs.c) for the C tests: a directory served through
 * FUSE with a delay on every read, mounted in a temporary directory by a
 * child of the test and unmounted with fusermount3 -u.  The program is
 * $SLOWFS (meson sets it for the tests that link this).
 */
#ifndef INFEED_TEST_SLOWFS_MOUNT_H
#define INFEED_TEST_SLOWFS_MOUNT_H

#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>

struct slowfs {
	pid_t	pid;
	char	mnt[400];	/* where SOURCE is served */
	char	ctl[420];	/* mnt/.slowfs */
};

/*
 * Serve @src at @mnt (made if missing) through slowfs with its options
 * @opts (a NULL-terminated list, e.g. "--delay-us", "2000", NULL); true
 * once mounted.  False, having printed "skipped: " and why on stderr,
 * where FUSE cannot be mounted here (no $SLOWFS, no /dev/fuse, not
 * allowed); any other failure fails the test.
 */
bool		slowfs_start(struct slowfs *fs, const char *src,
		    const char *mnt, const char *const *opts);

/* Unmount and wait for the server (killed if it does not go). */
void		slowfs_stop(struct slowfs *fs);

/* The counter @name of the control file ("reads", "max_in_flight"). */
uint64_t	slowfs_counter(const struct slowfs *fs, const char *name);

/* Write @cmd ("reset", "hold", "release", "drop") to the control file. */
void		slowfs_command(const struct slowfs *fs, const char *cmd);

/*
 * Whether slowfs mounts here at all, tried outside any test (no Check
 * call); false having said why ("skipped: ...") on stderr.  A program
 * whose every test needs it exits 77 then: meson counts it as skipped.
 */
bool		slowfs_probe(void);

/*
 * Why FUSE cannot be mounted here, or NULL: $SLOWFS unset, /dev/fuse
 * missing, or (not root) no fusermount3.
 */
const char	*slowfs_unavailable(void);

#endif /* INFEED_TEST_SLOWFS_MOUNT_H */
