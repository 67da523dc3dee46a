/* SPDX-License-Identifier: MIT */
/*
 * One connection's transport, the daemon's only: a socket, the messages it
 * did not take yet, and the descriptors that travel with them.  peer.c
 * talks to clients through one (a byte stream of proto/wire.c frames), and
 * pool.c and worker.c to each other (a SOCK_SEQPACKET socketpair, one
 * message a record), as tmux's proc.c serves both its server and client.
 *
 * Output: transport_send_*() sends at once what the socket takes and
 * queues the rest, in order.  Every sendmsg carries bytes of one message
 * only, its descriptors on its first byte, so the receiver can tell whose
 * they are (wire-frame.h).  On an event loop a write event, armed only while the
 * queue is not empty, sends the rest; without one (a worker) a send blocks
 * until the whole message is gone.
 *
 * Descriptors: once queued with a message, a descriptor is the transport's
 * until it is sent, then closed; a failed send, transport_free() and
 * transport_close_fds() close every one it holds.  A _consume send takes
 * the caller's descriptors over, whatever it returns; a _dup send leaves
 * them with the caller and duplicates them only when the message waits.
 * Received descriptors are the caller's, and a receive that fails closes
 * every one it brought (wire_recv_fds()).
 *
 * Backpressure, as bgpd's control.c throttles: once more than the high
 * mark of bytes waits, the transport pauses (stops reading) until the queue
 * drains to the low mark; then it reads again and says so (drained).  So a
 * client that does not read its replies makes the daemon hold at most the
 * high mark and the message that crossed it.
 *
 * Errors: a send that fails for good (the other end went away) breaks the
 * transport: its queue is dropped, later sends fail with EPIPE, and on an
 * event loop the broken callback runs once, from the loop, never inside a
 * call of the owner's (which may not expect to be freed there).
 */
#ifndef INFEED_TRANSPORT_H
#define INFEED_TRANSPORT_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct timeval;
struct transport;
struct wire_in;

/* Descriptors one message carries at most (WIRE_MAX_FDS). */
#define TRANSPORT_MAX_FDS	4

/*
 * PACKET: a typed message, as the pool, the fork server and the workers
 * send them, begins with this header; its type's payload follows
 * (forker.h, worker.h say which payload each type has).
 */
struct transport_hdr {
	uint32_t	type;
	uint32_t	len;		/* the whole message's bytes */
};

enum transport_kind {
	TRANSPORT_STREAM,	/* SOCK_STREAM: wire frames, cut by wire_in */
	TRANSPORT_PACKET,	/* SOCK_SEQPACKET: a message is a record */
};

/*
 * What the owner hears, each with transport_conf's @arg; any may be NULL,
 * and so may transport_conf's @events.
 */
struct transport_events {
	void	(*read)(void *arg);	/* the socket has something to read */
	void	(*read_timeout)(void *arg);	/* ... not within the timeout */
	void	(*drained)(void *arg);	/* paused, it reads again */
	void	(*broken)(void *arg, int error);	/* a send failed */
};

struct transport_conf {
	enum transport_kind		 kind;
	uint32_t			 max_frame;	/* STREAM: frames read */
	size_t				 high;	/* queued bytes; 0: no pause */
	size_t				 low;	/* ... to resume at */
	const struct transport_events	*events;
	void				*arg;
};

/**
 * transport_new() - carry messages over @fd, which the transport now owns
 * (closed by transport_free()).  With @base, @fd is made non-blocking and
 * served on that loop; with NULL it is left blocking and nothing calls back.
 */
struct transport *transport_new(struct event_base *base, int fd,
		    const struct transport_conf *conf);

/**
 * transport_free() - close the socket and every descriptor queued or
 * received and not taken; NULL is a no-op.
 */
void		 transport_free(struct transport *t);

/**
 * transport_close_fds() - in a freshly forked process: close the socket and
 * every descriptor the transport holds, touching no event (they are the
 * parent's); transport_free() afterwards closes nothing again.
 */
void		 transport_close_fds(struct transport *t);

int		 transport_fd(const struct transport *t);

/**
 * transport_read_on() - call events->read when the socket has something,
 * or events->read_timeout after @timeout (NULL: none) of silence; while
 * paused, only once it drains.
 */
void		 transport_read_on(struct transport *t,
		    const struct timeval *timeout);

/* Read no more until transport_read_on(). */
void		 transport_read_off(struct transport *t);

/* Whether events->read is armed now (wanted and not paused). */
bool		 transport_reading(const struct transport *t);

/* Whether more than the high mark waits to be sent. */
bool		 transport_paused(const struct transport *t);

/* Bytes and messages waiting for the socket. */
size_t		 transport_queued_bytes(const struct transport *t);
size_t		 transport_queued(const struct transport *t);

/**
 * transport_recv() - STREAM: one read into transport_in(); as
 * wire_in_recv().
 */
ssize_t		 transport_recv(struct transport *t);

/* STREAM: what was read and not yet cut into frames (wire-frame.h). */
struct wire_in	*transport_in(struct transport *t);

/**
 * transport_recv_msg() - PACKET: one record of at most @len bytes into
 * @buf, with at most @maxfds descriptors into @fds (*@nfds of them, now the
 * caller's).  Return: as wire_recv_fds(): a longer record (EMSGSIZE), cut
 * ancillary data or more than @maxfds descriptors (EPROTO) are refused and
 * the descriptors that came closed.
 */
ssize_t		 transport_recv_msg(struct transport *t, void *buf,
		    size_t len, int *fds, size_t maxfds, size_t *nfds);

/**
 * transport_recv_typed() - PACKET: transport_recv_msg() of one typed
 * message (struct transport_hdr, then its payload) into @buf: a record
 * shorter than the header, or whose header gives another length, is
 * refused with errno EBADMSG and its descriptors closed (the stream goes
 * on); the caller checks the payload its type has.
 */
ssize_t		 transport_recv_typed(struct transport *t, void *buf,
		    size_t len, int *fds, size_t maxfds, size_t *nfds);

/**
 * transport_send_typed() - set @m's header (@type, @len bytes in all) and
 * send it as transport_send_dup() does.
 */
int		 transport_send_typed(struct transport *t, void *m,
		    size_t len, uint32_t type, const int *fds, size_t nfds);

/**
 * transport_send_consume() - send @len bytes of @buf (copied if they must
 * wait) with @nfds descriptors @fds, which the transport takes over.
 * Return: 0 (sent or queued), or -1 with errno set (EPIPE once broken).
 */
int		 transport_send_consume(struct transport *t, const void *buf,
		    size_t len, const int *fds, size_t nfds);

/**
 * transport_send_dup() - transport_send_consume() that leaves @fds with
 * the caller: what waits is sent with duplicates.  Return: 0, or -1 with
 * errno set (EMFILE: no descriptor for a duplicate; nothing was queued).
 */
int		 transport_send_dup(struct transport *t, const void *buf,
		    size_t len, const int *fds, size_t nfds);

/**
 * transport_flush() - send what waits, as much as the socket takes now.
 * Return: 0, or -1 with errno set once the transport is broken.
 */
int		 transport_flush(struct transport *t);

/**
 * transport_cork() - STREAM: hold what is sent from now on until the next
 * transport_flush() (the caller's to make) and send it then in one
 * sendmsg: replies to requests that came together go back together, and
 * the other end is woken once, not once a reply.  Past the high mark the
 * queue goes as it would (the loop sends it as the socket takes it).
 * PACKET (each send a message) and blocking transports are not corked.
 */
void		 transport_cork(struct transport *t);

#endif /* INFEED_TRANSPORT_H */
