/* SPDX-License-Identifier: MIT */
/*
 * The daemon's statistics, as one model: a snapshot taken at once from the
 * peers, their sessions, the worker pool and the ring budget (peers.c's
 * peers_stats() fills it), rendered three ways: the Stats frame
 * (stats-frame.c), /metrics (metrics.c) and systemd's STATUS= line
 * (daemon.c).  Counters that several renderings share are declared once,
 * in proto/stats-schema.h.  Plain data:
 * its strings are borrowed from what they describe, so a snapshot is used
 * at once, then cleared.
 *
 * What outlives a session is its history: ended sessions folded per
 * dataset (so that metrics stay bounded) and Error frames counted per
 * code; the peers keep it.
 */
#ifndef INFEED_STATS_H
#define INFEED_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "autotune.h"
#include "errcode.h"
#include "pool.h"
#include "ring.h"
#include "session.h"
#include "stats-schema.h"

/* A live session, with what its peer knows of the client. */
struct stats_session {
	struct session_report	 report;
	const char		*client_name;	/* NULL: it gave none */
	uint64_t		 errors_sent;	/* Error frames during it */
};

/* Sessions that ended, folded per dataset ("(files)": clients' files). */
struct stats_ended {
	char		*dataset;
	uint64_t	 sessions;
	/* steps, rows, ..., active_us: INFEED_SESSION_STATS' report fields */
#define STATS_ENDED_FIELD(name, report, ...)	uint64_t report;
	INFEED_SESSION_STATS(STATS_ENDED_FIELD)
#undef STATS_ENDED_FIELD
	uint64_t	 wait_counts[SESSION_WAIT_BUCKETS];
};

/* What outlives the sessions, since the daemon started. */
struct stats_history {
	struct stats_ended	*ended;
	size_t			 nended;
	uint64_t		 errors[ERRCODE_COUNT];	/* sent, by code */
};

/* The daemon now. */
struct stats {
	uint64_t		 uptime_ms;
	unsigned		 clients;
	struct stats_session	*sessions;
	size_t			 nsessions;
	struct pool_worker_info	*workers;
	unsigned		 nworkers;	/* the spares up too: */
	unsigned		 spares;	/* pool_spares() */
	uint64_t		 spares_started;
	const char		*spare_why;
	bool			 workers_auto;	/* workers = auto: */
	struct autotune_report	 autotune;	/* ... its bound, decisions */
	unsigned		 jobs_queued;
	uint64_t		 rows_reissued;
	pid_t			 fork_server_pid;	/* -1: none up */
	unsigned		 fork_server_restarts;
	/*
	 * memory_used (live rings and their tables), memory_kept, ...,
	 * memory_private (main process and workers): stats-schema.h.
	 */
#define STATS_MEMORY_FIELD(name, ...)	uint64_t name;
	INFEED_MEMORY_STATS(STATS_MEMORY_FIELD)
	INFEED_CACHE_STATS(STATS_MEMORY_FIELD)	/* cache_stats() */
#undef STATS_MEMORY_FIELD
	const char		*huge_pages;
	const char		*reads_in_flight;	/* io_backend_why() */
	const struct stats_history *history;	/* borrowed */
	/* The catalogue, borrowed: its token datasets' packing for /metrics. */
	const struct catalogue	*cat;
};

/**
 * stats_take() - begin a snapshot: the pool's workers and queue (and how
 * @at sizes it; NULL: a fixed pool), the ring budget, the uptime since
 * @started_ms, @clients connected and history @h; room for @max_sessions
 * sessions, added with stats_add_session().  Clear it with stats_clear().
 */
void	 stats_take(struct stats *st, const struct pool *pool,
	    const struct ring_budget *budget, const struct autotune *at,
	    uint64_t started_ms,
	    unsigned clients, size_t max_sessions,
	    const struct stats_history *h);

/**
 * stats_add_session() - add live session @s, whose client is called
 * @client_name (borrowed; NULL: no name) and was sent @errors_sent Error
 * frames during it.
 */
void	 stats_add_session(struct stats *st, const struct session *s,
	    const char *client_name, uint64_t errors_sent);

/**
 * stats_trainer_wait() - what every trainer since the daemon started
 * (the live sessions of @st and the ended ones of its history) waited
 * for data, in *@wait_us, of its active time, in *@active_us.
 */
void	 stats_trainer_wait(const struct stats *st, uint64_t *wait_us,
	    uint64_t *active_us);

/**
 * stats_clear() - free what the snapshot allocated (not what it borrows).
 */
void	 stats_clear(struct stats *st);

/**
 * stats_history_end() - session @s ends: fold what it did into its
 * dataset's totals (the client's own files all count as "(files)").
 */
void	 stats_history_end(struct stats_history *h, const struct session *s);

/**
 * stats_history_error() - an Error frame of @code was sent.
 */
void	 stats_history_error(struct stats_history *h, enum errcode code);

/**
 * stats_history_clear() - free the history; it is empty again.
 */
void	 stats_history_clear(struct stats_history *h);

#endif /* INFEED_STATS_H */
