/* SPDX-License-Identifier: MIT */
/*
 * The runner every Check program's main() calls, and the helpers every
 * kind of test uses: see runner.c.
 */
#ifndef INFEED_TEST_RUNNER_H
#define INFEED_TEST_RUNNER_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include <check.h>

int		run_suite(Suite *s);
int		run_suite_in_dir(Suite *s, const char *name, char *rundir,
		    size_t len);
void		make_test_dir(const char *rundir, char *dir, size_t len);
void		remove_tree(const char *path);

/* @dir/@name, valid until eight more such paths are asked for. */
const char	*path_in(const char *dir, const char *name);

#define RUNNER_MAX_SEND_FDS	16	/* more than any frame carries */

/* Milliseconds on a clock that only goes forward. */
uint64_t	now_ms(void);

/* Write @len bytes to @path, or fail the test. */
void		write_file(const char *path, const void *buf, size_t len);

/*
 * Open descriptors of process @pid (0: this one), from /proc, less those
 * whose target's name holds @but (NULL: none left out); -1 when the
 * process is gone or its list cannot be read.
 */
int		count_fds(pid_t pid, const char *but);

/* This process's descriptors whose target's name holds @what. */
int		count_fds_on(const char *what);

/*
 * count_fds()'s @but for all but ring memory, which infeedd keeps from an
 * ended session for the next one (keep_ring_memory).
 */
#define RING_MEMFD	"memfd:infeed-ring"

/*
 * Run @fn(@p, @arg) in a forked child and return its wait status; what
 * the child wrote to stderr (a fatal message) lands in @err.
 */
int		run_in_child(void (*fn)(void *p, int arg), void *p, int arg,
		    char *err, size_t errlen);

/* Send one byte on @sock with @count (at most 16) copies of @fd. */
void		send_fds(int sock, int fd, int count);

#endif /* INFEED_TEST_RUNNER_H */
