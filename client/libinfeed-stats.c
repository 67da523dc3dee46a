/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's Stats: the daemon's Stats reply decoded into the public
 * structs (each allocated at least as large as the caller's, zeroed
 * first), or handed over packed for tools that decode it themselves.
 */

#include <stdlib.h>
#include <string.h>

#include "libinfeed-conn.h"
#include "options-schema.h"
#include "stats-schema.h"

/*
 * The counters of stats-schema.h (and the options of options-schema.h
 * that a session's stats show) are fields of infeed.h's structs as it
 * declares them: the table follows the ABI, never the other way round.
 */
#define INFEED_STATS_TYPE(str, name, type)				\
	_Static_assert(_Generic(((struct str *)0)->name, type: 1,	\
	    default: 0), "infeed.h's " #str "." #name " is not " #type	\
	    " as stats-schema.h says");
#define INFEED_WORKER_TYPE(name, type, ...)				\
	INFEED_STATS_TYPE(infeed_worker_stats, name, type)
#define INFEED_GROUP_TYPE(name, ...)					\
	INFEED_STATS_TYPE(infeed_session_stats, name, uint64_t)
#define INFEED_SESSION_TYPE(name, report, scale, metric, help, lib)	\
	INFEED_STATS_##lib(INFEED_STATS_TYPE(infeed_session_stats, name, \
	    __typeof__((uint64_t)0 / (scale))))
#define INFEED_MEMORY_TYPE(name, ...)					\
	INFEED_STATS_TYPE(infeed_stats, name, uint64_t)
INFEED_MEMORY_STATS(INFEED_MEMORY_TYPE)
INFEED_CACHE_STATS(INFEED_MEMORY_TYPE)
INFEED_SESSION_STATS(INFEED_SESSION_TYPE)
INFEED_WORKER_STATS(INFEED_WORKER_TYPE)
INFEED_GROUP_STATS(INFEED_GROUP_TYPE)
#define INFEED_OPTION_STAT_TYPE(name, field, type, def, limit, kind, lib, \
    stat)								\
	INFEED_OPTION_##stat(_Static_assert(_Generic(			\
	    ((struct infeed_session_stats *)0)->name, type: 1, default: 0), \
	    "infeed.h's infeed_session_stats." #name " is not " #type	\
	    " as options-schema.h says");)
INFEED_LOADER_OPTIONS(INFEED_OPTION_STAT_TYPE)

/* A copy of a string that may be absent; false when out of memory. */
static bool
infeed_strdup_opt(char **out, const char *s)
{
	*out = s != NULL ? strdup(s) : NULL;
	return (s == NULL || *out != NULL);
}

/* One session's stats; NULL without memory. */
static struct infeed_session_stats *
infeed_session_stats_from(const Infeed__SessionStats *in, size_t size)
{
	struct infeed_session_stats	*ss;
	const Infeed__LoaderOptions	*lo = in->options;

	if ((ss = infeed_alloc_out(size, sizeof(*ss))) == NULL)
		return (NULL);
	ss->struct_size = sizeof(*ss);
	ss->session_id = in->session_id;
	ss->client_pid = in->client_pid;
	ss->client_uid = in->client_uid;
	ss->epoch = in->epoch;
	ss->step = in->step;
	ss->slots = in->slots;
	ss->slots_ready = in->slots_ready;
	ss->slots_held = in->slots_held;
	ss->items_per_s = in->items_per_s;
	if (lo != NULL) {
		ss->has_options = true;
#define INFEED_SESSION_OPTION(name, field, type, def, limit, kind, lib, \
    stat)								\
	INFEED_OPTION_##stat(ss->name = (type)lo->name;)
		INFEED_LOADER_OPTIONS(INFEED_SESSION_OPTION)
#undef INFEED_SESSION_OPTION
	}
#define INFEED_SESSION_STAT(name, report, scale, metric, help, lib)	\
	INFEED_STATS_##lib(ss->name = in->has_##name ? in->name : 0;)
	INFEED_SESSION_STATS(INFEED_SESSION_STAT)
#undef INFEED_SESSION_STAT
	ss->errors_sent = in->errors_sent;
	ss->group_id = in->group_id;
	ss->group_members = in->group_members;
	ss->group_left = in->group_left;
#define INFEED_GROUP_STAT(name, ...)	ss->name = in->name;
	INFEED_GROUP_STATS(INFEED_GROUP_STAT)
#undef INFEED_GROUP_STAT
	if (!infeed_strdup_opt(&ss->dataset, in->dataset) ||
	    !infeed_strdup_opt(&ss->client_name, in->client_name) ||
	    !infeed_strdup_opt(&ss->transform, lo != NULL &&
	    lo->transform != NULL ? lo->transform->pipeline : NULL)) {
		free(ss->dataset);
		free(ss->client_name);
		free(ss);
		return (NULL);
	}
	return (ss);
}

/* One worker's stats; NULL without memory. */
static struct infeed_worker_stats *
infeed_worker_stats_from(const Infeed__WorkerStats *in, size_t size)
{
	struct infeed_worker_stats	*ws;

	if ((ws = infeed_alloc_out(size, sizeof(*ws))) == NULL)
		return (NULL);
	ws->struct_size = sizeof(*ws);
	ws->pid = in->pid;
#define INFEED_WORKER_STAT(name, ...)					\
	ws->name = in->has_##name ? in->name : 0;
	INFEED_WORKER_STATS(INFEED_WORKER_STAT)
#undef INFEED_WORKER_STAT
	if (!infeed_strdup_opt(&ws->state, in->state)) {
		free(ws);
		return (NULL);
	}
	return (ws);
}

/* The daemon-wide part of Stats and its arrays; NULL without memory. */
static struct infeed_stats *
infeed_stats_from(const Infeed__Stats *in, size_t size, size_t session_size,
    size_t worker_size)
{
	struct infeed_stats	*st;
	size_t			 i;

	if ((st = infeed_alloc_out(size, sizeof(*st))) == NULL)
		return (NULL);
	st->struct_size = sizeof(*st);
	st->uptime_ms = in->uptime_ms;
	st->clients = in->clients;
#define INFEED_MEMORY_STAT(name, ...)	st->name = in->name;
	INFEED_MEMORY_STATS(INFEED_MEMORY_STAT)
	INFEED_CACHE_STATS(INFEED_MEMORY_STAT)
#undef INFEED_MEMORY_STAT
	st->workers_auto = in->has_workers_auto && in->workers_auto;
	st->workers_max = in->workers_max;
	st->pool_grows = in->pool_grows;
	st->pool_shrinks = in->pool_shrinks;
	st->jobs_queued = in->jobs_queued;
	st->fork_server_pid = in->fork_server_pid;
	st->fork_server_restarts = in->fork_server_restarts;
	st->sessions = calloc(in->n_sessions + 1, sizeof(*st->sessions));
	st->workers = calloc(in->n_workers + 1, sizeof(*st->workers));
	if (st->sessions == NULL || st->workers == NULL ||
	    !infeed_strdup_opt(&st->daemon_version, in->daemon_version) ||
	    !infeed_strdup_opt(&st->huge_pages, in->huge_pages) ||
	    !infeed_strdup_opt(&st->reads_in_flight, in->reads_in_flight) ||
	    !infeed_strdup_opt(&st->workers_max_why, in->workers_max_why) ||
	    !infeed_strdup_opt(&st->pool_last_resize, in->pool_last_resize) ||
	    !infeed_strdup_opt(&st->pool_decision, in->pool_decision))
		goto fail;
	for (; st->nsessions < in->n_sessions; st->nsessions++) {
		i = st->nsessions;
		if ((st->sessions[i] = infeed_session_stats_from(
		    in->sessions[i], session_size)) == NULL)
			goto fail;
	}
	for (; st->nworkers < in->n_workers; st->nworkers++) {
		i = st->nworkers;
		if ((st->workers[i] = infeed_worker_stats_from(in->workers[i],
		    worker_size)) == NULL)
			goto fail;
	}
	return (st);
fail:
	infeed_stats_free(st);
	return (NULL);
}

/* The daemon's Stats, decoded; objects at least the caller's sizes. */
int
infeed_get_stats_size(struct infeed *f, struct infeed_stats **out,
    size_t size, size_t session_size, size_t worker_size)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *reply;
	Infeed__GetStats gs = INFEED__GET_STATS__INIT;
	int		 r;

	if ((r = infeed_check_out_size(f, "struct infeed_stats", size)) !=
	    INFEED_OK || (r = infeed_check_out_size(f,
	    "struct infeed_session_stats", session_size)) != INFEED_OK ||
	    (r = infeed_check_out_size(f, "struct infeed_worker_stats",
	    worker_size)) != INFEED_OK)
		return (r);
	fr.msg_case = INFEED__FRAME__MSG_GET_STATS;
	fr.get_stats = &gs;
	if ((r = infeed_conn_call(f, &fr, INFEED__FRAME__MSG_STATS, &reply)) !=
	    INFEED_OK)
		return (r);
	*out = infeed_stats_from(reply->stats, size, session_size,
	    worker_size);
	infeed__frame__free_unpacked(reply, NULL);
	if (*out == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	return (INFEED_OK);
}

/* Free decoded Stats. */
void
infeed_stats_free(struct infeed_stats *st)
{
	size_t	i;

	if (st == NULL)
		return;
	for (i = 0; i < st->nsessions; i++) {
		free(st->sessions[i]->dataset);
		free(st->sessions[i]->client_name);
		free(st->sessions[i]->transform);
		free(st->sessions[i]);
	}
	for (i = 0; i < st->nworkers; i++) {
		free(st->workers[i]->state);
		free(st->workers[i]);
	}
	free(st->sessions);
	free(st->workers);
	free(st->daemon_version);
	free(st->huge_pages);
	free(st->reads_in_flight);
	free(st->workers_max_why);
	free(st->pool_last_resize);
	free(st->pool_decision);
	free(st);
}

/* The daemon's Stats reply, packed, for tools that decode it. */
int
infeed_stats_frame(struct infeed *f, uint8_t **buf, size_t *len)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *reply;
	Infeed__GetStats gs = INFEED__GET_STATS__INIT;
	int		 r;

	fr.msg_case = INFEED__FRAME__MSG_GET_STATS;
	fr.get_stats = &gs;
	if ((r = infeed_conn_call(f, &fr, INFEED__FRAME__MSG_STATS, &reply)) !=
	    INFEED_OK)
		return (r);
	*len = infeed__frame__get_packed_size(reply);
	if ((*buf = malloc(*len ? *len : 1)) == NULL) {
		infeed__frame__free_unpacked(reply, NULL);
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	}
	infeed__frame__pack(reply, *buf);
	infeed__frame__free_unpacked(reply, NULL);
	return (INFEED_OK);
}