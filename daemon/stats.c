/* SPDX-License-Identifier: MIT */
/*
 * The statistics model (see stats.h): a snapshot's daemon-wide part read
 * from the pool and the ring budget, its sessions' parts from the sessions
 * themselves, and the history of ended sessions and errors sent.
 */

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "clock.h"
#include "io-batch.h"
#include "procmem.h"
#include "stats.h"
#include "xmalloc.h"

/* The schema's session counters are uint64_t fields of the report. */
#define STATS_REPORT_TYPE(name, report, ...)				\
	_Static_assert(_Generic(((struct session_report *)0)->report,	\
	    uint64_t: 1, default: 0), "session_report's " #report	\
	    " is not the uint64_t stats-schema.h says");
INFEED_SESSION_STATS(STATS_REPORT_TYPE)

/* Begin a snapshot: everything but the sessions. */
void
stats_take(struct stats *st, const struct pool *pool,
    const struct ring_budget *budget, const struct autotune *at,
    uint64_t started_ms, unsigned clients, size_t max_sessions,
    const struct stats_history *h)
{
	struct cache_stats	cs;
	unsigned		i;

	memset(st, 0, sizeof(*st));
	st->uptime_ms = clock_now_ms() - started_ms;
	st->clients = clients;
	st->sessions = xcalloc(max_sessions + 1, sizeof(*st->sessions));
	st->spares = pool_spares(pool, &st->spares_started, &st->spare_why);
	st->nworkers = pool_size(pool) + st->spares;
	st->workers = xcalloc(st->nworkers + 1, sizeof(*st->workers));
	for (i = 0; i < st->nworkers; i++)
		pool_worker_info(pool, i, &st->workers[i]);
	if ((st->workers_auto = at != NULL))
		autotune_report(at, &st->autotune);
	st->jobs_queued = pool_jobs_queued(pool);
	st->rows_reissued = pool_rows_reissued(pool);
	pool_forker_info(pool, &st->fork_server_pid,
	    &st->fork_server_restarts);
	/* The budget charges kept, held and freeing memory too. */
	st->memory_used = budget->used - budget->kept_bytes -
	    budget->held_bytes - budget->freeing_bytes;
	st->memory_kept = budget->kept_bytes;
	st->memory_held = budget->held_bytes;
	st->memory_budget = budget->limit;
	st->rings_reused = budget->reused;
	st->rings_made = budget->made;
	st->huge_pages = ring_mem_huge_pages();
	st->reads_in_flight = io_backend_why();
	cache_stats(&cs);
	st->cache_bytes = cs.bytes;
	st->cache_max = cs.max;
	st->cache_hits = cs.hits;
	st->cache_misses = cs.misses;
	st->cache_bytes_downloaded = cs.bytes_downloaded;
	st->cache_evictions = cs.evictions;
	st->cache_fetched_ahead = cs.ahead;
	st->cache_waited = cs.waited;
	st->memory_private = procmem_private(getpid());
	for (i = 0; i < st->nworkers; i++) {
		if (st->workers[i].pid > 0)
			st->memory_private += procmem_private(
			    st->workers[i].pid);
	}
	st->history = h;
}

/* Add a live session; stats_take() made room for it. */
void
stats_add_session(struct stats *st, const struct session *s,
    const char *client_name, uint64_t errors_sent)
{
	struct stats_session	*ss = &st->sessions[st->nsessions++];

	session_report(s, &ss->report);
	ss->client_name = client_name;
	ss->errors_sent = errors_sent;
}

/* Trainers' data wait and active time, live sessions and ended ones. */
void
stats_trainer_wait(const struct stats *st, uint64_t *wait_us,
    uint64_t *active_us)
{
	size_t	i;

	*wait_us = 0;
	*active_us = 0;
	for (i = 0; i < st->nsessions; i++) {
		*wait_us += st->sessions[i].report.data_wait_us;
		*active_us += st->sessions[i].report.active_us;
	}
	for (i = 0; st->history != NULL && i < st->history->nended; i++) {
		*wait_us += st->history->ended[i].data_wait_us;
		*active_us += st->history->ended[i].active_us;
	}
}

/* Free the snapshot's arrays. */
void
stats_clear(struct stats *st)
{
	free(st->sessions);
	free(st->workers);
	memset(st, 0, sizeof(*st));
}

/* Fold an ending session into its dataset's totals. */
void
stats_history_end(struct stats_history *h, const struct session *s)
{
	struct session_report	 r;
	struct stats_ended	*e = NULL;
	const char		*name;
	size_t			 i;
	unsigned		 b;

	session_report(s, &r);
	name = r.own_files ? "(files)" : r.dataset;
	for (i = 0; i < h->nended && e == NULL; i++)
		if (strcmp(h->ended[i].dataset, name) == 0)
			e = &h->ended[i];
	if (e == NULL) {
		h->ended = xreallocarray(h->ended, h->nended + 1,
		    sizeof(*h->ended));
		e = &h->ended[h->nended++];
		memset(e, 0, sizeof(*e));
		e->dataset = xstrdup(name);
	}
	e->sessions++;
#define STATS_FOLD(name, report, ...)	e->report += r.report;
	INFEED_SESSION_STATS(STATS_FOLD)
#undef STATS_FOLD
	for (b = 0; b < SESSION_WAIT_BUCKETS; b++)
		e->wait_counts[b] += r.wait_counts[b];
}

/* Count an Error frame sent. */
void
stats_history_error(struct stats_history *h, enum errcode code)
{
	if ((unsigned)code < ERRCODE_COUNT)
		h->errors[code]++;
}

/* Free the history. */
void
stats_history_clear(struct stats_history *h)
{
	while (h->nended > 0)
		free(h->ended[--h->nended].dataset);
	free(h->ended);
	memset(h, 0, sizeof(*h));
}
