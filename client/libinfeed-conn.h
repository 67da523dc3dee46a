/* SPDX-License-Identifier: MIT */
/*
 * The connection's calls that take and give frames (libinfeed-conn.c),
 * for the files above it in libinfeed-private.h's list.  It alone brings
 * in the protobuf codec (proto/wire.h): the files below the connection
 * (the ring, the error) include libinfeed-private.h only and see plain C,
 * as tests/check-layers --client checks.
 */
#ifndef INFEED_LIBINFEED_CONN_H
#define INFEED_LIBINFEED_CONN_H

#include <stddef.h>

#include "libinfeed-private.h"
#include "wire.h"

/*
 * Send request @fr (with @nfds descriptors @fds) and read its reply, of
 * case @want, into *@reply.  infeed_conn_call() gives the request the id
 * of calls; infeed_conn_call_after_next() ends the session (Detach): an
 * outstanding Next's reply comes first, and is dropped.
 */
int	infeed_conn_request(struct infeed *f, Infeed__Frame *fr,
	    const int *fds, size_t nfds, Infeed__Frame__MsgCase want,
	    Infeed__Frame **reply);
int	infeed_conn_call(struct infeed *f, Infeed__Frame *fr,
	    Infeed__Frame__MsgCase want, Infeed__Frame **reply);
int	infeed_conn_call_after_next(struct infeed *f, Infeed__Frame *fr,
	    Infeed__Frame__MsgCase want, Infeed__Frame **reply);

/*
 * The reply to the Next, sending one unless one is outstanding, within
 * @timeout_ms.
 */
int	infeed_conn_next(struct infeed *f, Infeed__Frame **reply,
	    int timeout_ms);

#endif /* INFEED_LIBINFEED_CONN_H */
