/* SPDX-License-Identifier: MIT */
/*
 * One client connection: its socket, its state, and the only code that
 * writes frames to clients.  A peer turns requests into calls on its
 * session and the session's answers (through session_events) into frames.
 * The protocol ends here: requests are converted into the plain C structs
 * and codes of the layers below (session.h, errcode.h), and their answers
 * back into frames; the stats snapshot (stats.h) becomes the Stats frame
 * in stats-frame.c, beside it.  The set of connections, and what they
 * share, is the registry's (peers.h).
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

struct attach_checks;
struct event_base;
struct peer;

/* What the peers need from the daemon. */
struct peers_host {
	struct event_base	*base;
	const struct config	*conf;
	const struct catalogue	*cat;
	struct pool		*pool;
	struct ring_budget	*budget;
	const struct autotune	*autotune;	/* NULL: a fixed pool */
	uint64_t		 started_ms;
	struct packings		*packs;		/* packings on demand */
};

/* What a peer asks of the registry that holds it (peers.c). */
struct peer_owner {
	/* @p is being freed: forget it. */
	void	(*closed)(void *arg, struct peer *p);
	/* Whether peer @id is still connected. */
	bool	(*has)(void *arg, uint64_t id);
	/* The one snapshot (stats.h), for GetStats. */
	void	(*snapshot)(void *arg, struct stats *st);
};

/* What every peer shares, kept by the registry. */
struct peer_shared {
	struct peers_host	 host;
	struct stats_history	 history;	/* ended sessions, errors */
	struct attach_checks	*checks;	/* pending Attaches */
	const struct peer_owner	*owner;
	void			*owner_arg;
};

/* What tests and fuzz targets may see of one connection. */
struct peer_probe {
	bool	reading;	/* its requests are read (no backpressure) */
	int	unread;		/* bytes waiting in its socket */
	size_t	fds_kept;	/* descriptors it received and holds */
	size_t	queued;		/* bytes of replies its socket did not take */
};

/* What a reload did to a peer's session. */
enum peer_reloaded {
	PEER_NO_SESSION,
	PEER_KEPT,
	PEER_ENDED_SESSION,	/* its dataset changed or went */
};

/**
 * peer_new() - serve connection @fd (non-blocking) as peer @id; @refused:
 * only to refuse it (its first frame gets RESOURCE_EXHAUSTED).
 */
struct peer	*peer_new(struct peer_shared *sh, uint64_t id, int fd,
		    bool refused);

/**
 * peer_free() - close the connection (telling its owner) and free it.
 */
void		 peer_free(struct peer *p);

/**
 * peer_refuse() - refuse peer @p, saying @why to its first frame.
 */
void		 peer_refuse(struct peer *p, const char *why);

uint64_t	 peer_id(const struct peer *p);

/**
 * peer_add_stats() - add @p's session, if it has one, to snapshot @st.
 */
void		 peer_add_stats(const struct peer *p, struct stats *st);

/**
 * peer_reload() - the catalogue is now @cat: @p's session goes on if its
 * dataset did not change, else it ends (waiting Next requests get
 * NOT_FOUND, and so do later ones).
 */
enum peer_reloaded peer_reload(struct peer *p, const struct catalogue *cat);

void		 peer_probe(const struct peer *p, struct peer_probe *out);

#endif /* INFEED_PEER_H */
