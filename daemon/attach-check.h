/* SPDX-License-Identifier: MIT */
/*
 * Attach as infeedd does it, never blocking its event loop: the checks of
 * what the client controls (its files' fstat and headers, its groups for
 * allow_groups) run on helper threads, bounded in number and in time
 * (common/infeed-limits.h), and a ring that wants memory a removed ring
 * still holds waits for it on a timer (POOL_SETTLE_MS at most).  Then the
 * session is made (session_new() with what the threads checked).
 */
#ifndef INFEED_ATTACH_CHECK_H
#define INFEED_ATTACH_CHECK_H

#include <stddef.h>

#include "errcode.h"
#include "pool.h"
#include "session.h"

struct event_base;
struct attach_checks;
struct attach_pending;

/* A pending Attach's checks ended: call attach_check_end() now. */
typedef void	attach_checked_cb(void *arg);

/**
 * attach_check_new() - the helper threads' state, on @base; @pool is
 * asked whether removed rings still settle.  attach_check_free() gives
 * up every pending Attach (no callback) and frees what it can; threads
 * that have not returned free their own jobs when they do.
 */
struct attach_checks *attach_check_new(struct event_base *base,
		    struct pool *pool);
void		 attach_check_free(struct attach_checks *sc);

/*
 * Attach requests that wait for their checks or for ring memory, and
 * given-up checks whose threads have not returned yet.
 */
unsigned	 attach_check_pending(const struct attach_checks *sc);

/**
 * attach_check_begin() - begin Attach @a, with the @nfds descriptors
 * @fds of its frame.
 * Return: 0 when nothing needs waiting for: make the session now with
 * session_new() (the descriptors are still the caller's); 1 when
 * they were taken over and the checks go on: @cb(@arg) comes later from
 * the loop (never from within this call), then call attach_check_end()
 * with *@out; or -1, refused at once (too many checks out), with *@code
 * and *@cause set and the descriptors closed.
 */
int		 attach_check_begin(struct attach_checks *sc,
		    const struct session_host *host,
		    const struct session_client *client,
		    const struct session_attach *a, int *fds, size_t nfds,
		    attach_checked_cb *cb, void *arg,
		    struct attach_pending **out, enum errcode *code,
		    char **cause);

/**
 * attach_check_end() - once @p's callback came: make its session with
 * @host as it is now (a reload may have come meanwhile), or say why not,
 * as session_new() does.  @p is freed.
 */
struct session	*attach_check_end(struct attach_pending *p,
		    const struct session_host *host,
		    const struct session_events *ev, void *arg,
		    enum errcode *code, char **cause);

/* The dataset name (or files session name) pending Attach @p asks for. */
const char	*attach_check_name(const struct attach_pending *p);

/**
 * attach_check_cancel() - the client went away while @p waited: free it,
 * without a callback; a thread still checking its files is given up.
 */
void		 attach_check_cancel(struct attach_pending *p);

#endif /* INFEED_ATTACH_CHECK_H */
