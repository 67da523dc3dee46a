/* SPDX-License-Identifier: MIT */
/*
 * The wire below any message: length-prefixed framing and descriptor
 * passing, with no protobuf in sight, shared by infeedd (its transports,
 * the fork server and the workers), libinfeed and the tests.  wire.h puts
 * the protobuf codec on top.
 *
 * A frame is a 4-byte little-endian length followed by that many bytes.
 * wire_in accumulates bytes (and any SCM_RIGHTS fds) read from a socket
 * and cuts them into frames; the length is checked against the limit
 * before the body is buffered, so a peer cannot make us allocate more
 * than one maximum frame.  wire_send_fds sends as much as the socket
 * takes, with descriptors on the first byte; wire_recv_fds receives one
 * read (or one SOCK_SEQPACKET record) with those that came.
 */
#ifndef INFEED_WIRE_FRAME_H
#define INFEED_WIRE_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WIRE_HEADER_SIZE	4
#define WIRE_MAX_FDS		4	/* fds queued before the frames that own them */

enum wire_status {
	WIRE_OK,	/* a frame was returned */
	WIRE_AGAIN,	/* not a whole frame yet */
	WIRE_BAD,	/* protocol error: drop the peer */
};

/*
 * Bytes and fds received from one socket, not yet cut into frames.  An fd
 * rides on the first byte of the sendmsg that carried it, and the kernel
 * ends the recvmsg that delivers it at the end of that sendmsg's bytes at
 * the latest, so an fd belongs to the frame holding the last byte of the
 * recvmsg that brought it (the sender sends no byte of a later frame in
 * that sendmsg): fd_at keeps that offset in the stream.
 */
struct wire_in {
	uint8_t		*buf;
	size_t		 len;		/* bytes in buf */
	size_t		 cap;
	uint32_t	 max_frame;
	int		 fds[WIRE_MAX_FDS];	/* received, oldest first */
	size_t		 nfds;
	uint64_t	 fd_at[WIRE_MAX_FDS];	/* stream offset it came at */
	uint64_t	 rx;		/* bytes received in all */
	size_t		 frame_nfds;	/* fds of the last frame cut */
};

/**
 * wire_in_init() - prepare @in for a peer whose frames are at most
 * @max_frame bytes long.
 */
void			 wire_in_init(struct wire_in *in, uint32_t max_frame);

/**
 * wire_in_clear() - free @in's buffer and close any fds still queued.
 */
void			 wire_in_clear(struct wire_in *in);

/**
 * wire_in_feed() - append @len received bytes (used by tests and fuzzers).
 * Return: 0, or -1 with errno ENOBUFS when more than one maximal frame
 * (plus 64 KiB) would be buffered; take frames out first.
 */
int			 wire_in_feed(struct wire_in *in, const void *data,
			    size_t len);

/**
 * wire_in_recv() - one recvmsg() from @sock into @in, collecting fds.
 *
 * Return: bytes read, 0 at end of stream, or -1 with errno set (EAGAIN when
 * nothing is there; EPROTO when ancillary data was truncated or an fd
 * arrived beyond WIRE_MAX_FDS queued: wire_recv_fds(), whose refusals
 * close what the read brought; the stream is then broken).
 */
ssize_t			 wire_in_recv(struct wire_in *in, int sock);

/**
 * wire_in_recv_intr() - wire_in_recv(), but a signal that interrupts a
 * blocking wait ends it: -1 with errno EINTR (a wait bounded by
 * SO_RCVTIMEO whose caller's handler must run; issue 35).
 */
ssize_t			 wire_in_recv_intr(struct wire_in *in, int sock);

/**
 * wire_recv_fds() - one recvmsg() of at most @len bytes into @buf from
 * @sock, with the descriptors that came into @fds (*@nfds of them, at most
 * @maxfds, which is at most WIRE_MAX_FDS; the caller owns them).
 *
 * Return: bytes read, 0 at end of stream, or -1 with errno set: EAGAIN when
 * nothing is there; EPROTO when the ancillary data was cut (MSG_CTRUNC: more
 * descriptors than WIRE_MAX_FDS, or none left to receive them into) or more
 * than @maxfds came; EMSGSIZE when a record (SOCK_SEQPACKET) was longer than
 * @len and cut (MSG_TRUNC).  On -1 every descriptor received is closed.
 */
ssize_t			 wire_recv_fds(int sock, void *buf, size_t len,
			    int *fds, size_t maxfds, size_t *nfds);

/**
 * wire_in_next() - the next whole frame's body, left in @in: *@body (valid
 * until the next call on @in) and its *@len bytes; drop it with
 * wire_in_skip() once decoded.  The fds that came with it are counted
 * (wire_in_frame_fds()).
 * @cause: on WIRE_BAD (a length over the maximum), a malloc'd reason.
 */
enum wire_status	 wire_in_next(struct wire_in *in, const uint8_t **body,
			    uint32_t *len, char **cause);

/**
 * wire_in_skip() - drop the frame wire_in_next() returned last.
 */
void			 wire_in_skip(struct wire_in *in);

/**
 * wire_put_header() - write the length header of a frame of @len bytes
 * into @p (WIRE_HEADER_SIZE bytes).
 */
void			 wire_put_header(uint8_t *p, uint32_t len);

/**
 * wire_in_take_fd() - the oldest received fd, now owned by the caller, or
 * -1 if none came.
 */
int			 wire_in_take_fd(struct wire_in *in);

/**
 * wire_in_frame_fds() - how many fds came with the frame wire_in_next()
 * (or wire.h's wire_in_frame()) returned last: they are the oldest queued; take each with
 * wire_in_take_fd() (or close them all with wire_in_drop_frame_fds()).
 */
size_t			 wire_in_frame_fds(const struct wire_in *in);

/**
 * wire_in_drop_frame_fds() - close the fds of the last frame cut.
 */
void			 wire_in_drop_frame_fds(struct wire_in *in);

/**
 * wire_send_some() - one sendmsg() of @buf[0..@len) to @sock; when @fd is
 * not -1 it is sent as SCM_RIGHTS with the first byte (the caller keeps
 * @fd open and must not pass it again once any byte went out).
 * Return: bytes sent, or -1 with errno set.
 */
ssize_t			 wire_send_some(int sock, const void *buf, size_t len,
			    int fd);

/**
 * wire_send_fds() - wire_send_some() with @nfds (at most WIRE_MAX_FDS)
 * descriptors @fds on the first byte, in that order.
 */
ssize_t			 wire_send_fds(int sock, const void *buf, size_t len,
			    const int *fds, size_t nfds);

/**
 * wire_send_all() - send a whole buffer on a blocking socket, passing @fd
 * with the first byte.  Return: 0, or -1 with errno set.
 */
int			 wire_send_all(int sock, const void *buf, size_t len,
			    int fd);

/**
 * wire_send_all_fds() - wire_send_all() with @nfds descriptors @fds on the
 * first byte.  Every sendmsg carries only bytes of @buf, so when @buf is
 * one frame its fds can only be taken as that frame's.
 */
int			 wire_send_all_fds(int sock, const void *buf,
			    size_t len, const int *fds, size_t nfds);

#endif /* INFEED_WIRE_FRAME_H */
