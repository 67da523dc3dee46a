/* SPDX-License-Identifier: MIT */
/*
 * The listening socket.  Socket activation first: when systemd passes one
 * listening Unix stream socket, infeedd serves on it and leaves the file to
 * systemd.  Otherwise infeedd binds its own: a stale socket file is removed
 * (only if nothing answers on it), the new one gets mode 0660, and it is
 * unlinked at exit.  Every accepted connection goes to the peers.
 */
#ifndef INFEED_LISTEN_H
#define INFEED_LISTEN_H

#include "peers.h"

/* Out of descriptors, accepting pauses this long, then tries again. */
#define LISTEN_RETRY_MS		100

struct event_base;
struct listener;

/**
 * listen_open() - take systemd's socket or bind @path, and accept on
 * @base into @peers.  Return: the listener, or NULL (the reason logged).
 */
struct listener	*listen_open(struct event_base *base, const char *path,
		    struct peers *peers);

/**
 * listen_free() - stop listening and remove our socket file; NULL is a
 * no-op.
 */
void		 listen_free(struct listener *l);

#endif /* INFEED_LISTEN_H */
