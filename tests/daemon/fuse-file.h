/* SPDX-License-Identifier: MIT */
/*
 * A file that never answers, for the tests of what infeedd does when a
 * client's file (or the group database) does not: a FUSE file served by a
 * child of the test, on a mount in the test's own mount namespace.
 * GETATTR and OPEN are answered, READs are held unanswered until
 * fuse_release() (or for ever).  It needs root and /dev/fuse.
 */
#ifndef INFEED_TEST_FUSE_FILE_H
#define INFEED_TEST_FUSE_FILE_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fusefs {
	pid_t	pid;
	int	ctl;		/* 'r' releases the held reads */
	char	path[400];
};

/*
 * Mount a FUSE file serving the @dlen bytes of @data at @dir/fuse-file
 * (fs->path), in a mount namespace this process enters; false, having
 * said why on stderr, without root or /dev/fuse (the test then passes).
 */
bool	fuse_start(struct fusefs *fs, const char *dir, const uint8_t *data,
	    size_t dlen);

/* Answer the held reads, and every read from now on. */
void	fuse_release(struct fusefs *fs);

/* Stop the server (reads still held fail) and unmount. */
void	fuse_stop(struct fusefs *fs);

#endif /* INFEED_TEST_FUSE_FILE_H */
