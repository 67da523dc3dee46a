/* SPDX-License-Identifier: MIT */
/* Prometheus metrics over HTTP (metrics_listen); see metrics.c. */
#ifndef INFEED_METRICS_H
#define INFEED_METRICS_H

#include <stdint.h>

#include "peers.h"
#include "stats.h"

struct evbuffer;
struct event_base;
struct metrics;

/**
 * metrics_new() - serve GET /metrics on @host:@port (0: any free port; the
 * log says which) from @ps's sessions and workers.
 * Return: the server, or NULL with *@cause set (malloc'd).
 */
struct metrics	*metrics_new(struct event_base *base, const char *host,
		    uint16_t port, struct peers *ps, char **cause);

/**
 * metrics_port() - the port @m listens on (the one it found, for port 0).
 */
uint16_t	 metrics_port(const struct metrics *m);

/**
 * metrics_render() - append the text exposition of snapshot @st to @b:
 * what GET /metrics answers.
 */
void		 metrics_render(struct evbuffer *b, const struct stats *st);

/**
 * metrics_free() - stop serving; NULL is a no-op.
 */
void		 metrics_free(struct metrics *m);

#endif /* INFEED_METRICS_H */
