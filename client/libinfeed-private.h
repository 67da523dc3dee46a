/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's inside: the handle and what its files call of one another.
 * Nothing here is exported from the shared library (libinfeed.map lists
 * every exported name); the unit tests beside the files call it.
 *
 * libinfeed is split by job; calls go only down this list:
 *
 *	libinfeed-stats.c	the daemon's Stats decoded into public structs
 *	libinfeed-abi.c		size widening: every public entry point that
 *				takes or fills a size-carrying struct, handed
 *				on as whole structs
 *	libinfeed.c		the session: connect, attach, next, release,
 *				detach, resume after a daemon restart
 *	libinfeed-proto.c	the protocol's edge for the session's calls:
 *				Attach, Detach and ListDatasets built from
 *				plain structs, their replies read into them
 *	libinfeed-conn.c	the connection: frames and the descriptor
 *				each carried, request ids, the outstanding
 *				Next's reply state (a Step read into a
 *				plain struct)
 *	libinfeed-ring.c	the ring's mapping, rings of ended sessions,
 *				copy-on-write restore
 *	libinfeed-error.c	the handle's last error, which all of them set
 *
 * The protocol's frames stop at its edge, as the daemon's stop at peer.c:
 * only the files named on the next line include libinfeed-conn.h, which
 * declares the connection's calls that take and give frames (and so
 * proto/wire.h and protobuf), and name a protobuf type; every other file
 * sees the plain structs below (tests/check-layers --client).
 *
 * Frames: libinfeed-stats.c libinfeed-proto.c libinfeed-conn.c
 */
#ifndef INFEED_LIBINFEED_PRIVATE_H
#define INFEED_LIBINFEED_PRIVATE_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "infeed.h"
#include "wire-frame.h"

/* The end of @field in @type: a struct of that size holds it wholly. */
#define FIELD_END(type, field)						\
	(offsetof(type, field) + sizeof(((type *)0)->field))

/* A struct_size above this is not one any infeed.h ever had. */
#define INFEED_MAX_STRUCT_SIZE	4096

/*
 * Request ids (docs/protocol.md, pipelining): a Release's reply may come
 * before or after the Step of a Next sent earlier, so every reply is told
 * apart by the id its request carried (libinfeed-conn.c sends them).
 */
#define INFEED_ID_RELEASE	1
#define INFEED_ID_NEXT		2
#define INFEED_ID_CALL		3

/* ErrorCode NOT_FOUND (infeed.proto): the daemon ended the session. */
#define INFEED_DAEMON_NOT_FOUND	5

/*
 * The outstanding Next, as the connection knows it.  Replies come in the
 * order of the requests; a Next's reply may be left unread (a wait that
 * timed out, a refused Release reported first) and is collected by the
 * next infeed_next.
 */
enum infeed_next_state {
	INFEED_NEXT_NONE,	/* none outstanding: the next call sends one */
	INFEED_NEXT_PENDING,	/* sent; its reply not read yet */
	INFEED_NEXT_HELD,	/* its reply read and held back, because a
				   refused Release was reported first */
};

/* A ring as Attached (or a Step's new ring) describes it. */
struct infeed_ring_shape {
	uint64_t	ring_bytes;
	uint64_t	slot_bytes;
	uint64_t	data_offset;	/* Attached's alone: */
	uint64_t	labels_offset;
	uint64_t	indices_offset;
	uint32_t	slots;
	uint32_t	first_slot;	/* a Step's ring's alone */
	int		label_dtype;	/* INT32 or INT64; Attached's alone */
};

/* A Next's reply, as the connection read it: a Step or an EndOfData. */
struct infeed_next_reply {
	bool			 end_of_data;	/* of epoch @epoch */
	bool			 new_ring;	/* @ring: the session moved */
	uint32_t		 slot;
	uint64_t		 epoch;
	uint64_t		 step;
	uint64_t		 rows;
	struct infeed_ring_shape ring;		/* with new_ring */
};

/* Attached, as libinfeed-proto.c read it. */
struct infeed_attached {
	struct infeed_session_info info;	/* whole */
	struct infeed_ring_shape ring;
	uint64_t		 group_id;	/* 0: a ring of its own */
	bool			 knows_stages;	/* it sent start_epoch_steps:
						   the daemon knows stages */
	bool			 quiet_release;	/* it answers a quiet
						   Release only if refused */
	int			 ring_fd;	/* the caller's */
};

/* The connection to infeedd (libinfeed-conn.c). */
struct infeed_conn {
	int			 fd;		/* -1: not connected */
	struct wire_in		 in;
	uint32_t		 max_frame;
	unsigned		 releases_unanswered;
	bool			 quiet_release;	/* the session's daemon said
						   Attached.quiet_release */
	enum infeed_next_state	 next;
	struct infeed_next_reply held;		/* with INFEED_NEXT_HELD */
	/*
	 * The descriptor that came with the last reply read (a ring's), until
	 * infeed_conn_take_fd takes it or the next read closes it; held_fd
	 * goes with held.  -1: none.
	 */
	int			 reply_fd;
	int			 held_fd;
	uint64_t		 steps_read;	/* Steps read this session */
	/*
	 * The socket's receive timeout (SO_RCVTIMEO, ms; 0: none): a wait for
	 * ever has wait_ms (the handshake's bound, else none), a bounded wait
	 * its own bound, set only when it changes.
	 */
	unsigned		 rcv_ms;
	unsigned		 wait_ms;
};

/* A ring of an ended session whose steps the caller still holds. */
struct infeed_old_ring {
	uint8_t		*base;
	size_t		 bytes;
	uint64_t	 session_id;
	uint64_t	 held;		/* a bit per slot */
};

/* The session's ring, mapped from the daemon's (libinfeed-ring.c). */
/* What the process did to its memory, as infeed_ring_stamp() reads it. */
struct infeed_mem_stamp {
	uint64_t	faults;		/* page faults, minor and major */
	uint64_t	anon;		/* anonymous pages mapped */
};

struct infeed_ring {
	uint8_t			*base;		/* NULL: none mapped */
	size_t			 bytes;
	uint32_t		 slots;
	uint64_t		 held;		/* a bit per slot held */
	/* Given back since the last restore: may hold private pages. */
	uint64_t		 unrestored;	/* a bit per slot */
	uint64_t		 slot_bytes;
	uint64_t		 data_offset;
	uint64_t		 labels_offset;
	uint64_t		 indices_offset;
	int			 label_dtype;	/* INT32 or INT64 */
	uint32_t		 first_slot;	/* Step.slot of slot 0 */
	bool			 copy_on_write;
	struct infeed_old_ring	*old;
	size_t			 nold;
	int			 pagemap;	/* /proc/self/pagemap, or -1 */
	bool			 no_pagemap_scan; /* the kernel lacks it */
	int			 uffd;		/* write tracking, or -1 */
	bool			 no_uffd;	/* none to be had */
	uint64_t		 tracked;	/* a bit per slot tracked */
	/*
	 * A slot restored stays clean while the process takes no page fault
	 * and makes no anonymous page (infeed_ring_stamp): the stamp of its
	 * last restore, valid where its bit of @stamped is set.
	 */
	uint64_t		 stamped;	/* a bit per slot */
	struct infeed_mem_stamp	 stamp[64];
	int			 statm;		/* /proc/self/statm, or -1 */
	pid_t			 statm_pid;	/* whose statm it is */
	uint64_t		 walks_skipped;	/* for the tests */
};

struct infeed {
	struct infeed_conn	 conn;
	struct infeed_ring	 ring;
	char			 error[1024];
	int			 daemon_code;

	bool			 attached;
	bool			 eod_owed;	/* the epoch's last step went */
	uint64_t		 session_id;
	uint64_t		 group_id;	/* Attached's; 0: none */
	bool			 own_ring;	/* the ring read is the
						   session's own, not its
						   group's */
	uint64_t		 steps_per_epoch;
	uint64_t		 start_epoch_steps; /* of opts.start_epoch */
	uint64_t		 next_epoch;	/* the step the session gives */
	uint64_t		 next_step;	/* next */

	/* What it takes to reconnect and resume. */
	char			*path;
	char			*name;
	char			*dataset;
	struct infeed_options	 opts;		/* its transform: ours */
	char			*transform;	/* opts.transform's copy */
	struct infeed_files	 files;		/* with nfiles */
	int			 files_fd[2];	/* our duplicates */
	size_t			 nfiles;	/* 0: a catalogue dataset */
};

/* libinfeed.c: the session. */
int	infeed_attach_dataset(struct infeed *f, const char *dataset,
	    const struct infeed_options *o, struct infeed_session_info *info);
int	infeed_attach_files_whole(struct infeed *f, const char *name,
	    const struct infeed_files *files, const struct infeed_options *o,
	    struct infeed_session_info *info);
int	infeed_next_whole(struct infeed *f, struct infeed_step *step,
	    int timeout_ms);
void	infeed_state_whole(const struct infeed *f, struct infeed_state *st);

/* libinfeed-abi.c: the caller's sizes. */
size_t	infeed_put(void *dst, size_t size, const void *src, size_t have);
int	infeed_check_out_size(struct infeed *f, const char *what,
	    size_t size);
void	*infeed_alloc_out(size_t size, size_t have);

/* libinfeed-proto.c: the session's requests and replies. */
int	infeed_proto_attach(struct infeed *f, const char *dataset,
	    const struct infeed_options *o, const struct infeed_files *files,
	    const int *fds, size_t nfds, struct infeed_attached *out);
int	infeed_proto_detach(struct infeed *f);
int	infeed_proto_datasets(struct infeed *f, struct infeed_dataset **list,
	    size_t *n);

/* libinfeed-conn.c: the connection (its calls of frames: libinfeed-conn.h). */
void	infeed_conn_init(struct infeed_conn *c);
void	infeed_conn_close(struct infeed_conn *c);
int	infeed_conn_open(struct infeed *f, const char *path,
	    const char *name);
int	infeed_conn_next(struct infeed *f, struct infeed_next_reply *reply,
	    int timeout_ms);
int	infeed_conn_release(struct infeed *f, uint32_t slot);
int	infeed_conn_take_fd(struct infeed_conn *c);
void	infeed_conn_next_give_back(struct infeed *f);

/* libinfeed-ring.c: the ring. */
void	infeed_ring_init(struct infeed_ring *r);
int	infeed_ring_map(struct infeed *f, int fd,
	    const struct infeed_ring_shape *shape, bool copy_on_write);
void	infeed_ring_unmap(struct infeed_ring *r, uint64_t session_id);
int	infeed_ring_remap(struct infeed *f,
	    const struct infeed_ring_shape *ring);
void	infeed_ring_free(struct infeed_ring *r);
const uint8_t *infeed_ring_take(struct infeed_ring *r, uint32_t slot);
void	infeed_ring_give_back(struct infeed_ring *r, uint32_t slot);
bool	infeed_ring_release_old(struct infeed_ring *r, uint64_t session_id,
	    uint32_t slot);
uint32_t infeed_ring_held_count(const struct infeed_ring *r);

/* libinfeed-error.c: the last error. */
int	infeed_fail(struct infeed *f, int code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/**
 * infeed_pagemap_written() - whether /proc/self/pagemap entry @ent of a
 * copy-on-write ring is a page the trainer wrote (a private copy, present
 * or swapped out), which infeed_release() drops.
 */
bool	infeed_pagemap_written(uint64_t ent);

#endif /* INFEED_LIBINFEED_PRIVATE_H */
