/* SPDX-License-Identifier: MIT */
/*
 * Reads in flight: a worker queues the reads of a job's rows together
 * and takes each as it completes, so that a store with a millisecond a
 * read serves many at once instead of one.  Two backends, one behaviour:
 * io_uring (liburing), where the kernel allows it, and a small pool of
 * threads doing blocking preads where it does not (io_uring disabled by
 * the io_uring_disabled sysctl, refused by seccomp, ENOSYS on an old
 * kernel, EPERM).  The daemon chooses once, at start (io_backend_choose()),
 * logs it and shows it in the Stats frame; every worker makes its own
 * batch of that backend after fork (a ring is never shared across fork).
 *
 * A read is whole or short: the batch reads again after a partial read
 * (a signal, a FUSE server answering in parts) until all @len bytes are
 * there or the file ends (a short count: the file was cut) or an error.
 * The buffers are the caller's until the read completes: a caller that
 * stops early (an error, a SIGBUS) waits out the rest (io_batch_drain())
 * before it lets them go, so that nothing lands in a slot after its DONE.
 * A worker killed with reads in flight writes nothing after it is reaped:
 * the kernel ends a dying task's io_uring requests, and a thread group's
 * threads, before its parent can wait for it.
 */
#ifndef INFEED_IO_BATCH_H
#define INFEED_IO_BATCH_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

/* How reads are put in flight; the configuration's io_backend. */
enum io_backend {
	IO_BACKEND_AUTO = 0,	/* io_uring where allowed, else threads */
	IO_BACKEND_URING,
	IO_BACKEND_THREADS,
};

/* Reads a worker keeps in flight at most (its batch's depth). */
#define IO_BATCH_DEPTH		64

struct io_batch;

/**
 * io_backend_parse() - "auto", "io_uring" or "threads" into *@out.
 * Return: 0, or -1 for another word.
 */
int		 io_backend_parse(const char *s, enum io_backend *out);

/**
 * io_backend_name() - "io_uring" or "threads" ("auto" for AUTO).
 */
const char	*io_backend_name(enum io_backend b);

/**
 * io_backend_choose() - the backend for @want: AUTO is io_uring when this
 * process may set up a ring and read through it, else threads; URING is
 * io_uring or fatal (the operator asked for it).  @why gets the reason
 * ("io_uring, kernel 6.1" or "threads: io_uring refused (Operation not
 * permitted; kernel.io_uring_disabled = 2)").  The environment's
 * INFEED_IO_BACKEND, when set, overrides @want (tests and benchmarks);
 * the choice is put there, so that a fork server exec'd again (forker.c)
 * chooses the same.
 */
enum io_backend	 io_backend_choose(enum io_backend want, char *why,
		    size_t len);

/**
 * io_backend_chosen() - what io_backend_choose() chose in this process or
 * the one it was forked from (a worker); AUTO's choice if none did.
 */
enum io_backend	 io_backend_chosen(void);

/**
 * io_backend_why() - the reason io_backend_choose() gave, for status.
 */
const char	*io_backend_why(void);

/**
 * io_batch_new() - a batch of @depth reads at most through @b; a ring
 * that cannot be made here falls back to threads, saying so.
 */
struct io_batch	*io_batch_new(enum io_backend b, unsigned depth);

/**
 * io_batch_free() - wait for what is in flight, then free; NULL: no-op.
 */
void		 io_batch_free(struct io_batch *io);

/**
 * io_batch_room() - how many more reads io_batch_read() takes now.
 */
unsigned	 io_batch_room(const struct io_batch *io);

/**
 * io_batch_inflight() - reads queued or in flight, not yet taken.
 */
unsigned	 io_batch_inflight(const struct io_batch *io);

/**
 * io_batch_read() - queue a read of @len bytes at @off of @fd into @buf,
 * known by @tag; submitted at once (threads) or at the next
 * io_batch_wait() (io_uring, many in one call).  Needs io_batch_room().
 */
void		 io_batch_read(struct io_batch *io, int fd, void *buf,
		    size_t len, uint64_t off, uint64_t tag);

/**
 * io_batch_wait() - take one completed read, waiting for it: its @tag,
 * and in *@res the bytes read (less than asked: the file ended) or
 * -errno.  Return: 0, or -1 when nothing is in flight.
 */
int		 io_batch_wait(struct io_batch *io, uint64_t *tag,
		    ssize_t *res);

/**
 * io_batch_drain() - wait for every read in flight and drop them.
 */
void		 io_batch_drain(struct io_batch *io);

#endif /* INFEED_IO_BATCH_H */
