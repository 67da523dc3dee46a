/* SPDX-License-Identifier: MIT */
/*
 * Descriptors in the unit tests: see unit-fds.h.
 */

#include <sys/socket.h>
#include <sys/uio.h>

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include <check.h>

#include "unit-fds.h"

#define UNIT_MAX_SEND_FDS	16

/* Count the entries of /proc/PID/fd. */
int
unit_count_fds(pid_t pid)
{
	char		 path[64];
	DIR		*d;
	struct dirent	*de;
	int		 n = 0;

	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/fd");
	else
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	ck_assert_ptr_nonnull(d = opendir(path));
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return (pid == 0 ? n - 1 : n);	/* not opendir's own */
}

/* One byte with @count copies of @fd in a hand-built SCM_RIGHTS. */
void
unit_send_fds(int sock, int fd, int count)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) *
				    UNIT_MAX_SEND_FDS)];
	} cbuf;
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*cmsg;
	char		 byte = 'x';
	int		 i;

	ck_assert_int_le(count, UNIT_MAX_SEND_FDS);
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
	ck_assert_int_eq(sendmsg(sock, &msg, 0), 1);
}
