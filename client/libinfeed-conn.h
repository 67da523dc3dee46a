/* SPDX-License-Identifier: MIT */
/*
 * The connection's calls that take and give frames (libinfeed-conn.c),
 * for the files of the protocol's edge (libinfeed-private.h's "Frames:"
 * line).  It alone brings in the protobuf codec (proto/wire.h): every
 * other file includes libinfeed-private.h only and sees plain C, as
 * tests/check-layers --client checks.
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

#endif /* INFEED_LIBINFEED_CONN_H */
