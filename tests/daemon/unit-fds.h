/* SPDX-License-Identifier: MIT */
/*
 * Descriptors in the unit tests of the transport and its users: counting
 * a process's open ones (to show none leaked) and passing copies of one
 * by hand, as many as a test likes (more than any frame carries).
 */
#ifndef INFEED_TEST_UNIT_FDS_H
#define INFEED_TEST_UNIT_FDS_H

#include <sys/types.h>

/* Open descriptors of process @pid (0: this one), from /proc. */
int	unit_count_fds(pid_t pid);

/* Send one byte on @sock with @count (at most 16) copies of @fd. */
void	unit_send_fds(int sock, int fd, int count);

#endif /* INFEED_TEST_UNIT_FDS_H */
