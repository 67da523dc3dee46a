/* SPDX-License-Identifier: MIT */
/*
 * Worker processes, the child side: forked by the fork server (forker.h)
 * with the catalogue already open and nothing of any client, they read
 * samples and write them straight into step slots in shared memory.
 * A ring names its catalogue dataset by index and by name, with its
 * samples and their size: the fork server opened its catalogue itself,
 * from the sections the daemon sent after a reload (or when it was
 * started again), and a dataset that is not the daemon's (it changed on
 * disk in between, or did not open) fails the ring's jobs, saying so.  A worker dies with the daemon, not with
 * the fork server: it outlives a fork server that dies (WORKER_ORPHAN_SIGNAL).
 *
 * The pool and a worker talk over one SOCK_SEQPACKET socketpair, through a
 * transport (transport.h) on each side, one message a record, each a
 * header (struct transport_hdr: its type, enum worker_msg_type, and its
 * length) and its type's payload (struct worker_msg_*): MAP (with
 * a ring's memfd, sent the first time the worker gets a job of that ring,
 * and after it the descriptors of a client's files when the ring's dataset
 * is theirs: the worker opens that dataset itself, with
 * dataset_open_files(), and closes it at UNMAP), UNMAP, JOB (rows
 * [row_begin, row_end) of one slot, followed by the dataset index of each
 * row), DONE (the job's result; its reason and where, when it failed,
 * follow as two strings, as long as they are) and FORGET.  A worker has
 * at most one job at a time.  A record that is not a whole message of its
 * type is dropped by the worker and kills the worker at the pool.
 *
 * A worker keeps its mapping of a ring's memory after UNMAP, for the next
 * ring the daemon makes on the same memory (ring-memory.h: kept memory),
 * so that its pages are not faulted again; FORGET (mem_id) drops it once
 * the budget no longer keeps that memory (pool_let_go()).
 *
 * The indices travel in the message, not through the ring: the client
 * maps the ring too, and nothing it could write there (through a
 * descriptor it reopened writable, say) may steer a worker.  The worker
 * copies them into the slot's index table for the client.
 */
#ifndef INFEED_WORKER_H
#define INFEED_WORKER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "catalogue.h"
#include "ring.h"
#include "transform.h"
#include "transport.h"

enum worker_msg_type {
	WORKER_MSG_MAP = 1,
	WORKER_MSG_UNMAP,
	WORKER_MSG_JOB,
	WORKER_MSG_DONE,
	WORKER_MSG_FORGET,	/* a ring memory is not kept: unmap it */
	/*
	 * The worker's first message: its datasets' pages are populated
	 * (which may read gigabytes from disk), so jobs may come, each with
	 * its deadline.
	 */
	WORKER_MSG_READY,
};

/*
 * DONE's error: rows were written, one could not be read, or one's label
 * does not fit the ring's int32 labels.
 */
enum worker_result {
	WORKER_OK = 0,
	WORKER_READ_ERROR = -1,
	WORKER_LABEL_RANGE = -2,
	WORKER_INTERNAL = -3,	/* the worker could not, whatever the data */
};

/* Descriptors a MAP carries at most: the ring, a client's data, labels. */
#define WORKER_MAX_FDS		3

/* What a worker needs to fill a ring's slots; sent once per ring. */
struct worker_ring {
	uint64_t		ring_id;
	uint64_t		mem_id;	/* its memory, kept mapped across rings */
	uint64_t		mem_bytes;
	uint32_t		dataset_index;	/* in the catalogue */
	char			dataset[INFEED_MAX_DATASET_NAME + 1];
	uint64_t		samples;	/* the daemon's dataset's */
	uint64_t		sample_bytes;
	uint32_t		nfiles;	/* 0, or a client's files: 1 or 2 */
	struct ring_layout	layout;
	struct transform	transform;
	struct dataset_files	files;	/* with nfiles: how to read them */
};

/*
 * A worker's parent-death signal: it checks whether its parent is still
 * the daemon (the fork server died) or not (the daemon died: it exits).
 */
#define WORKER_ORPHAN_SIGNAL	SIGUSR2

/* Rows in one JOB message at most (its indices: 32 KiB). */
#define WORKER_MAX_JOB_ROWS	4096
/* Indices to read ahead in one JOB message at most (pool_read_ahead()). */
#define WORKER_MAX_JOB_AHEAD	512

/* DONE's reason, with its NUL at most: what was wrong with the sample. */
#define WORKER_REASON_LEN	256
/* DONE's where, likewise: the file (tar member, image) of it, or "". */
#define WORKER_WHERE_LEN	512

/*
 * A worker's progress, in memory the pool maps shared before it forks:
 * the worker counts the rows it begins, so that job_timeout holds per
 * row, and says which row of which job it reads, so that the row that
 * killed it is known.  Only the worker writes it.  The pool takes a job
 * over (pool.h) when neither this count nor the worker's CPU time (the
 * kernel's clock of it, a heartbeat the worker need not keep) moved for
 * a second.
 */
struct worker_beat {
	uint64_t		rows;	/* rows begun, ever */
	uint64_t		job;	/* the JOB's job_id */
	uint64_t		row;	/* the row it is reading */
	uint8_t			pad[40];	/* a cache line each */
};

/* What a worker is started with, besides the catalogue. */
struct worker_conf {
	pid_t			 parent;	/* the fork server */
	pid_t			 daemon;	/* it dies with it */
	struct worker_beat	*beat;
	uint64_t		 image_memory_max;	/* bytes a decode may take */
};

/* MAP: a ring to fill; its memfd (and a client's files) come with it. */
struct worker_msg_map {
	struct transport_hdr	hdr;
	struct worker_ring	ring;
};

/* UNMAP: ring @ring_id is gone. */
struct worker_msg_unmap {
	struct transport_hdr	hdr;
	uint64_t		ring_id;
};

/* FORGET: ring memory @mem_id is not kept: unmap it. */
struct worker_msg_forget {
	struct transport_hdr	hdr;
	uint64_t		mem_id;
};

/* JOB: rows [row_begin, row_end) of @slot, their dataset indices after. */
struct worker_msg_job {
	struct transport_hdr	hdr;
	uint32_t		slot;
	uint32_t		ahead;		/* indices to read ahead */
	uint64_t		ring_id;
	uint64_t		row_begin;
	uint64_t		row_end;
	uint64_t		epoch;		/* the step's */
	uint64_t		job_id;		/* for the beat, and DONE */
	uint64_t		indices[];	/* row_end - row_begin, then
						   ahead (pool_read_ahead()) */
};

/* READY: the worker's first message. */
struct worker_msg_ready {
	struct transport_hdr	hdr;
};

/*
 * DONE: JOB @job_id's result.  @text holds its reason (what was wrong
 * with the sample that failed; "" when none) and after it its where (the
 * file of that sample, or ""), each NUL-terminated, the message ending
 * with the second; each shorter than WORKER_REASON_LEN and
 * WORKER_WHERE_LEN.
 */
struct worker_msg_done {
	struct transport_hdr	hdr;
	int32_t			error;		/* enum worker_result */
	uint32_t		replaced;	/* bad samples replaced */
	uint64_t		job_id;
	uint64_t		bytes;		/* read from the dataset */
	uint64_t		bad_index;	/* the index that failed */
	int64_t			bad_label;	/* LABEL_RANGE: its label */
	char			text[];
};

/* The longest DONE. */
#define WORKER_MAX_DONE		(sizeof(struct worker_msg_done) + \
				    WORKER_REASON_LEN + WORKER_WHERE_LEN)

/*
 * Whether DONE @d, @n bytes, is whole: its reason and where, each shorter
 * than its bound, the message ending with the second's NUL.  Inline: the
 * format's one home, read by the pool.
 */
static inline bool
worker_done_whole(const struct worker_msg_done *d, size_t n)
{
	const char	*end = (const char *)d + n, *where;
	size_t		 len;

	if (n <= sizeof(*d) || n > WORKER_MAX_DONE || end[-1] != '\0')
		return (false);
	len = strnlen(d->text, (size_t)(end - d->text));
	where = d->text + len + 1;
	return (len < WORKER_REASON_LEN && where < end &&
	    strlen(where) == (size_t)(end - where) - 1 &&
	    (size_t)(end - where) <= WORKER_WHERE_LEN);
}

/* A DONE's where, after its reason. */
static inline const char *
worker_done_where(const struct worker_msg_done *d)
{
	return (d->text + strlen(d->text) + 1);
}

/**
 * worker_resident() - whether @len bytes at @p of a file's mapping are
 * all in memory (then a row is copied from the mapping, else read in
 * flight).  After a long run of rows that were, only one call in 16 asks
 * the kernel (mincore), until a row is not; the run is counted per
 * @owner (the dataset).  worker_resident_asked counts the calls that
 * asked (for the tests).
 */
bool	worker_resident(const void *owner, const uint8_t *p, size_t len);
extern uint64_t	worker_resident_asked;

/**
 * worker_copy_timed() - count a copy of a @len-byte row from its mapping
 * that took @us: one slower than a cached row of its length waited for a
 * page still being read.  Returns true when it made the third such copy
 * in a row: the worker then reads even resident rows in flight for a
 * second.
 */
bool	worker_copy_timed(size_t len, uint64_t us);

/**
 * worker_main() - serve jobs on @sock from the datasets of @cat until the
 * pool closes the socket; never returns.  Called with every signal
 * blocked: it sets its own dispositions, then restores @mask.
 */
void	worker_main(const struct catalogue *cat, int sock,
	    const sigset_t *mask, const struct worker_conf *wc)
	    __attribute__((noreturn));

#endif /* INFEED_WORKER_H */
