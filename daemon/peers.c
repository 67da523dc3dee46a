/* SPDX-License-Identifier: MIT */
/*
 * The registry of client connections (see peers.h): a list of peers in
 * the order they came, the count that max_clients bounds, and what they
 * share (struct peer_shared).  A peer closes itself (a broken socket, a
 * bad frame) and tells the registry through peer_owner, so the list is
 * changed here only.
 */

#include <sys/queue.h>

#include <stdlib.h>

#include "attach-check.h"
#include "peers.h"
#include "xmalloc.h"

/* One connection in the list. */
struct peers_entry {
	TAILQ_ENTRY(peers_entry) entry;
	struct peer		*p;
	uint64_t		 id;
};
TAILQ_HEAD(peers_list, peers_entry);

struct peers {
	struct peer_shared	 sh;
	struct peers_list	 list;
	unsigned		 n;
	uint64_t		 next_id;
};

static void	peers_closed_cb(void *, struct peer *);
static bool	peers_has_cb(void *, uint64_t);
static void	peers_snapshot_cb(void *, struct stats *);

static const struct peer_owner peers_owner = {
	.closed = peers_closed_cb,
	.has = peers_has_cb,
	.snapshot = peers_snapshot_cb,
};

/* A new set of connections. */
struct peers *
peers_new(const struct peers_host *host)
{
	struct peers	*ps;

	ps = xcalloc(1, sizeof(*ps));
	ps->sh.host = *host;
	ps->sh.checks = attach_check_new(host->base, host->pool);
	ps->sh.owner = &peers_owner;
	ps->sh.owner_arg = ps;
	TAILQ_INIT(&ps->list);
	return (ps);
}

/* Close every peer and free the set. */
void
peers_free(struct peers *ps)
{
	struct peers_entry	*e;

	if (ps == NULL)
		return;
	while ((e = TAILQ_FIRST(&ps->list)) != NULL)
		peer_free(e->p);
	attach_check_free(ps->sh.checks);
	stats_history_clear(&ps->sh.history);
	free(ps);
}

/* A peer is being freed: take it off the list. */
static void
peers_closed_cb(void *arg, struct peer *p)
{
	struct peers		*ps = arg;
	struct peers_entry	*e;

	TAILQ_FOREACH(e, &ps->list, entry) {
		if (e->p == p) {
			TAILQ_REMOVE(&ps->list, e, entry);
			ps->n--;
			free(e);
			return;
		}
	}
}

/* The entry of peer @id; NULL when gone. */
static struct peers_entry *
peers_find(const struct peers *ps, uint64_t id)
{
	struct peers_entry	*e;

	TAILQ_FOREACH(e, &ps->list, entry) {
		if (e->id == id)
			return (e);
	}
	return (NULL);
}

/* Take a new connection; over the client limit, only to refuse it. */
uint64_t
peers_accept(struct peers *ps, int fd)
{
	struct peers_entry	*e;

	e = xcalloc(1, sizeof(*e));
	e->id = ++ps->next_id;
	TAILQ_INSERT_TAIL(&ps->list, e, entry);
	ps->n++;
	e->p = peer_new(&ps->sh, e->id, fd,
	    ps->n > ps->sh.host.conf->max_clients);
	return (e->id);
}

/* Take a connection only to refuse it. */
void
peers_refuse(struct peers *ps, int fd, const char *why)
{
	struct peers_entry	*e;

	e = peers_find(ps, peers_accept(ps, fd));
	if (e != NULL)
		peer_refuse(e->p, why);
}

/* Whether peer @id is still connected. */
bool
peers_has(const struct peers *ps, uint64_t id)
{
	return (peers_find(ps, id) != NULL);
}

/* For a peer: whether another request may have closed it. */
static bool
peers_has_cb(void *arg, uint64_t id)
{
	return (peers_has(arg, id));
}

/* The daemon, its sessions and its workers now: the one snapshot. */
void
peers_stats(const struct peers *ps, struct stats *st)
{
	const struct peers_entry	*e;

	stats_take(st, ps->sh.host.pool, ps->sh.host.budget,
	    ps->sh.host.autotune, ps->sh.host.started_ms, ps->n, ps->n,
	    &ps->sh.history);
	st->cat = ps->sh.host.cat;
	TAILQ_FOREACH(e, &ps->list, entry)
		peer_add_stats(e->p, st);
}

/* For a peer's GetStats. */
static void
peers_snapshot_cb(void *arg, struct stats *st)
{
	peers_stats(arg, st);
}

/* After a reload: keep sessions whose dataset did not change. */
void
peers_reload(struct peers *ps, const struct config *conf,
    const struct catalogue *cat, unsigned *kept, unsigned *ended)
{
	struct peers_entry	*e;

	ps->sh.host.conf = conf;
	ps->sh.host.cat = cat;
	*kept = *ended = 0;
	TAILQ_FOREACH(e, &ps->list, entry) {
		switch (peer_reload(e->p, cat)) {
		case PEER_KEPT:
			(*kept)++;
			break;
		case PEER_ENDED_SESSION:
			(*ended)++;
			break;
		case PEER_NO_SESSION:
			break;
		}
	}
}

/* What a test may see of a peer. */
int
peers_probe(const struct peers *ps, uint64_t id, struct peer_probe *out)
{
	const struct peers_entry	*e = peers_find(ps, id);

	if (e == NULL)
		return (-1);
	peer_probe(e->p, out);
	return (0);
}

/* Connections now. */
unsigned
peers_count(const struct peers *ps)
{
	return (ps->n);
}

/* Attach requests whose checks (or ring memory) are still awaited. */
unsigned
peers_attaching(const struct peers *ps)
{
	return (attach_check_pending(ps->sh.checks));
}
