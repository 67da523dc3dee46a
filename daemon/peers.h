/* SPDX-License-Identifier: MIT */
/*
 * The registry of client connections: every peer (peer.h) by id, what
 * they share (the daemon's parts they use, the history of ended sessions
 * and errors, the pending Attach checks), the client count that
 * max_clients bounds, and the one statistics snapshot taken of them all.
 */
#ifndef INFEED_PEERS_H
#define INFEED_PEERS_H

#include <stdbool.h>
#include <stdint.h>

#include "catalogue.h"
#include "config.h"
#include "peer.h"
#include "stats.h"

struct peers;

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

#endif /* INFEED_PEERS_H */
