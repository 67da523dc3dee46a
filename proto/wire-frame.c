/* SPDX-License-Identifier: MIT */
/*
 * Framing and fd passing; see wire-frame.h for the contract.
 */

#include <sys/socket.h>
#include <sys/uio.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire-frame.h"

#define WIRE_RECV_CHUNK	65536

/* Read a little-endian 32-bit length. */
static uint32_t
wire_get_le32(const uint8_t *p)
{
	return ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
	    (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Write a frame's little-endian 32-bit length. */
void
wire_put_header(uint8_t *p, uint32_t len)
{
	p[0] = len & 0xff;
	p[1] = (len >> 8) & 0xff;
	p[2] = (len >> 16) & 0xff;
	p[3] = (len >> 24) & 0xff;
}

/* Prepare an empty input buffer. */
void
wire_in_init(struct wire_in *in, uint32_t max_frame)
{
	memset(in, 0, sizeof(*in));
	in->max_frame = max_frame;
}

/* Free the buffer and close unclaimed fds. */
void
wire_in_clear(struct wire_in *in)
{
	size_t	i;

	for (i = 0; i < in->nfds; i++)
		close(in->fds[i]);
	free(in->buf);
	memset(in, 0, sizeof(*in));
}

/* Make room for @more bytes; never beyond one header plus one frame. */
static int
wire_in_reserve(struct wire_in *in, size_t more)
{
	size_t	 want, limit, cap;
	uint8_t	*nbuf;

	limit = (size_t)in->max_frame + WIRE_HEADER_SIZE;
	want = in->len + more;
	if (want <= in->cap)
		return (0);
	if (want > limit + WIRE_RECV_CHUNK)
		want = limit + WIRE_RECV_CHUNK;
	cap = in->cap ? in->cap : 4096;
	while (cap < want)
		cap *= 2;
	if ((nbuf = realloc(in->buf, cap)) == NULL)
		return (-1);
	in->buf = nbuf;
	in->cap = cap;
	return (0);
}

/* Append bytes as if they had been received. */
int
wire_in_feed(struct wire_in *in, const void *data, size_t len)
{
	if (wire_in_reserve(in, len) == -1)
		return (-1);
	/* The buffer never grows past one maximal frame and a read's worth. */
	if (in->cap - in->len < len) {
		errno = ENOBUFS;
		return (-1);
	}
	memcpy(in->buf + in->len, data, len);
	in->len += len;
	in->rx += len;
	return (0);
}

/*
 * One recvmsg with its descriptors, refusing cut or surplus ones; one a
 * signal interrupts is tried again if @retry, else fails with EINTR.
 */
static ssize_t
wire_recv_fds_once(int sock, void *buf, size_t len, int *fds, size_t maxfds,
    size_t *nfds, bool retry)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
	} cbuf;
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*cmsg;
	ssize_t		 n;
	size_t		 i, k;
	int		 fd, error = 0;

	*nfds = 0;
	if (maxfds > WIRE_MAX_FDS) {
		errno = EINVAL;
		return (-1);
	}
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = buf;
	iov.iov_len = len;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf.buf;
	msg.msg_controllen = sizeof(cbuf.buf);
	do {
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	} while (n == -1 && errno == EINTR && retry);
	if (n == -1)
		return (-1);

	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
	    cmsg = CMSG_NXTHDR(&msg, cmsg)) {
		if (cmsg->cmsg_level != SOL_SOCKET ||
		    cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k; i++) {
			memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int),
			    sizeof(int));
			if (*nfds < maxfds)
				fds[(*nfds)++] = fd;
			else {
				close(fd);
				error = EPROTO;
			}
		}
	}
	/* Cut ancillary data may have lost descriptors: nothing is whole. */
	if (msg.msg_flags & MSG_CTRUNC)
		error = EPROTO;
	else if (msg.msg_flags & MSG_TRUNC)
		error = EMSGSIZE;
	if (error != 0) {
		while (*nfds > 0)
			close(fds[--*nfds]);
		errno = error;
		return (-1);
	}
	return (n);
}

/* One recvmsg with its descriptors, tried again when a signal interrupts. */
ssize_t
wire_recv_fds(int sock, void *buf, size_t len, int *fds, size_t maxfds,
    size_t *nfds)
{
	return (wire_recv_fds_once(sock, buf, len, fds, maxfds, nfds, true));
}

/* Receive what the socket has, with any fds (a signal: again if @retry). */
static ssize_t
wire_in_recv_once(struct wire_in *in, int sock, bool retry)
{
	ssize_t	n;
	size_t	nfds, i;
	int	fds[WIRE_MAX_FDS];

	if (wire_in_reserve(in, WIRE_RECV_CHUNK) == -1)
		return (-1);
	/* Never read past one maximal frame's worth of buffered bytes. */
	if (in->cap == in->len) {
		errno = EAGAIN;
		return (-1);
	}
	/* No more descriptors than the queue has room for. */
	n = wire_recv_fds_once(sock, in->buf + in->len, in->cap - in->len, fds,
	    WIRE_MAX_FDS - in->nfds, &nfds, retry);
	if (n == -1)
		return (-1);
	/* They came with the bytes up to this read's last. */
	for (i = 0; i < nfds; i++) {
		in->fd_at[in->nfds] = in->rx + (uint64_t)n;
		in->fds[in->nfds++] = fds[i];
	}
	in->len += (size_t)n;
	in->rx += (uint64_t)n;
	return (n);
}

/* Receive what the socket has, with any fds. */
ssize_t
wire_in_recv(struct wire_in *in, int sock)
{
	return (wire_in_recv_once(in, sock, true));
}

/* wire_in_recv(), but a signal ends a blocking wait (EINTR). */
ssize_t
wire_in_recv_intr(struct wire_in *in, int sock)
{
	return (wire_in_recv_once(in, sock, false));
}

/* The next whole frame's body, left in the buffer. */
enum wire_status
wire_in_next(struct wire_in *in, const uint8_t **body, uint32_t *len,
    char **cause)
{
	uint32_t	 flen;
	uint64_t	 end;

	in->frame_nfds = 0;
	if (in->len < WIRE_HEADER_SIZE)
		return (WIRE_AGAIN);
	flen = wire_get_le32(in->buf);
	if (flen > in->max_frame) {
		if (asprintf(cause, "frame of %u bytes is larger than the "
		    "maximum of %u bytes", flen, in->max_frame) == -1)
			*cause = NULL;
		return (WIRE_BAD);
	}
	if (in->len - WIRE_HEADER_SIZE < flen)
		return (WIRE_AGAIN);

	/* The fds that came by this frame's last byte are its own. */
	end = in->rx - in->len + WIRE_HEADER_SIZE + flen;
	while (in->frame_nfds < in->nfds && in->fd_at[in->frame_nfds] <= end)
		in->frame_nfds++;
	*body = in->buf + WIRE_HEADER_SIZE;
	*len = flen;
	return (WIRE_OK);
}

/* Drop the frame wire_in_next() returned. */
void
wire_in_skip(struct wire_in *in)
{
	size_t	n = WIRE_HEADER_SIZE + wire_get_le32(in->buf);

	memmove(in->buf, in->buf + n, in->len - n);
	in->len -= n;
}

/* Hand the oldest received fd to the caller. */
int
wire_in_take_fd(struct wire_in *in)
{
	int	fd;

	if (in->nfds == 0)
		return (-1);
	fd = in->fds[0];
	memmove(in->fds, in->fds + 1, (in->nfds - 1) * sizeof(int));
	memmove(in->fd_at, in->fd_at + 1, (in->nfds - 1) * sizeof(uint64_t));
	in->nfds--;
	if (in->frame_nfds > 0)
		in->frame_nfds--;
	return (fd);
}

/* The fds that came with the last frame cut. */
size_t
wire_in_frame_fds(const struct wire_in *in)
{
	return (in->frame_nfds);
}

/* Close the fds of the last frame cut. */
void
wire_in_drop_frame_fds(struct wire_in *in)
{
	while (in->frame_nfds > 0)
		close(wire_in_take_fd(in));
}

/* One sendmsg, with an fd riding on the first byte. */
ssize_t
wire_send_some(int sock, const void *buf, size_t len, int fd)
{
	return (wire_send_fds(sock, buf, len, &fd, fd != -1));
}

/* One sendmsg, with fds riding on the first byte. */
ssize_t
wire_send_fds(int sock, const void *buf, size_t len, const int *fds,
    size_t nfds)
{
	union {
		struct cmsghdr	hdr;
		char		buf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
	} cbuf;
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*cmsg;
	ssize_t		 n;

	memset(&msg, 0, sizeof(msg));
	iov.iov_base = (void *)(uintptr_t)buf;
	iov.iov_len = len;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (nfds > WIRE_MAX_FDS) {
		errno = EINVAL;
		return (-1);
	}
	if (nfds > 0) {
		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * nfds);
	}
	do {
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	} while (n == -1 && errno == EINTR);
	return (n);
}

/* Send everything on a blocking socket. */
int
wire_send_all(int sock, const void *buf, size_t len, int fd)
{
	return (wire_send_all_fds(sock, buf, len, &fd, fd != -1));
}

/* Send everything on a blocking socket, fds with the first byte. */
int
wire_send_all_fds(int sock, const void *buf, size_t len, const int *fds,
    size_t nfds)
{
	const uint8_t	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		if ((n = wire_send_fds(sock, p, len, fds, nfds)) == -1)
			return (-1);
		nfds = 0;
		p += n;
		len -= (size_t)n;
	}
	return (0);
}
