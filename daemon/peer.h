/* SPDX-License-Identifier: MIT */
/*
 * Client connections: every peer's socket, its state, and the only code
 * that writes frames to clients.  A peer turns requests into calls on its
 * session and the session's answers (through session_events) into frames.
 * The protocol ends here: requests are converted into the plain C structs
 * and codes of the layers below (session.h, errcode.h), and their answers
 * and the stats snapshot (stats.h) back into frames.
 *
 * A peer's states and their transitions (peer_set_state):
 *
 *   HELLO --Hello--> READY --Attach--> ATTACHED --Detach--> READY
 *   ATTACHED --a reload ended the session--> ENDED --Attach--> READY -->...
 *   REFUSED (over max_clients, or out of descriptors): its first frame
 *   gets RESOURCE_EXHAUSTED, then the connection closes.
 *
 * Whatever one client does is that client's problem: a malformed,
 * oversized or out-of-place frame gets an Error frame (where the socket
 * still takes it) and that peer alone is closed.
 */
#ifndef INFEED_PEER_H
#define INFEED_PEER_H

#include <stdbool.h>
#include <stdint.h>

#include "catalogue.h"
#include "config.h"
#include "pool.h"
#include "ring.h"
#include "session.h"
#include "stats.h"

struct event_base;
struct peers;

/* What the peers need from the daemon. */
struct peers_host {
	struct event_base	*base;
	const struct config	*conf;
	const struct catalogue	*cat;
	struct pool		*pool;
	struct ring_budget	*budget;
	const struct autotune	*autotune;	/* NULL: a fixed pool */
	uint64_t		 started_ms;
};

/**
 * peers_new() - an empty set of connections.
 */
struct peers	*peers_new(const struct peers_host *host);

/**
 * peers_free() - close every connection and free the set; NULL is a no-op.
 */
void		 peers_free(struct peers *ps);

/**
 * peers_accept() - serve a new connection on @fd (non-blocking).
 * Return: the new peer's id.
 */
uint64_t	 peers_accept(struct peers *ps, int fd);

/**
 * peers_refuse() - take connection @fd only to refuse it: its first frame
 * (its Hello) is answered with RESOURCE_EXHAUSTED and @why, then it closes.
 */
void		 peers_refuse(struct peers *ps, int fd, const char *why);

/**
 * peers_reload() - the configuration and catalogue changed: sessions on
 * datasets that did not change go on, the others end (their waiting Next
 * requests get NOT_FOUND).  Counts go to *@kept and *@ended.
 */
void		 peers_reload(struct peers *ps, const struct config *conf,
		    const struct catalogue *cat, unsigned *kept,
		    unsigned *ended);

/* What tests and fuzz targets may see of one connection. */
struct peer_probe {
	bool	reading;	/* its requests are read (no backpressure) */
	int	unread;		/* bytes waiting in its socket */
	size_t	fds_kept;	/* descriptors it received and holds */
	size_t	queued;		/* bytes of replies its socket did not take */
};

/**
 * peers_probe() - fill @out for peer @id.  Return: 0, or -1 when gone.
 */
int		 peers_probe(const struct peers *ps, uint64_t id,
		    struct peer_probe *out);

unsigned	 peers_count(const struct peers *ps);
/* Attach requests whose checks (or ring memory) are still awaited. */
unsigned	 peers_attaching(const struct peers *ps);
/* Whether peer @id is still connected. */
bool		 peers_has(const struct peers *ps, uint64_t id);
/**
 * peers_stats() - the daemon, its sessions and workers now (stats.h): the
 * one snapshot that GetStats, /metrics and STATUS= render.  Clear it with
 * stats_clear().
 */
void		 peers_stats(const struct peers *ps, struct stats *st);

#endif /* INFEED_PEER_H */
