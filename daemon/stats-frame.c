/* SPDX-License-Identifier: MIT */
/*
 * The Stats frame (see stats-frame.h): the statistics snapshot (stats.h)
 * as an Infeed__Stats, the one reply to GetStats.  Beside peer.c, at the
 * protocol's edge: strings and arrays are borrowed from the snapshot, the
 * messages that hold them are allocated here and freed by
 * stats_frame_clear().
 */

#include <stdlib.h>
#include <string.h>

#include "options-schema.h"
#include "stats-frame.h"
#include "stats-schema.h"
#include "version.h"
#include "xmalloc.h"

/* The schema's types are the proto's (stats-schema.h). */
#define STATS_FRAME_TYPE(msg, name, type)				\
	_Static_assert(_Generic(((msg *)0)->name, type: 1, default: 0),	\
	    "infeed.proto's " #name " is not " #type " as stats-schema.h " \
	    "says");
#define STATS_FRAME_WORKER_TYPE(name, type, ...)			\
	STATS_FRAME_TYPE(Infeed__WorkerStats, name, type)
#define STATS_FRAME_GROUP_TYPE(name, ...)				\
	STATS_FRAME_TYPE(Infeed__SessionStats, name, uint64_t)
#define STATS_FRAME_SESSION_TYPE(name, report, scale, ...)		\
	STATS_FRAME_TYPE(Infeed__SessionStats, name,			\
	    __typeof__((uint64_t)0 / (scale)))
#define STATS_FRAME_MEMORY_TYPE(name, ...)				\
	STATS_FRAME_TYPE(Infeed__Stats, name, uint64_t)
INFEED_MEMORY_STATS(STATS_FRAME_MEMORY_TYPE)
INFEED_CACHE_STATS(STATS_FRAME_MEMORY_TYPE)
INFEED_SESSION_STATS(STATS_FRAME_SESSION_TYPE)
INFEED_WORKER_STATS_DAEMON(STATS_FRAME_WORKER_TYPE)
INFEED_WORKER_STATS(STATS_FRAME_WORKER_TYPE)
INFEED_GROUP_STATS(STATS_FRAME_GROUP_TYPE)

/*
 * LoaderOptions' fields hold the values of options-schema.h's types
 * (protobuf-c's bool is an int; a DType, an enum).
 */
#define STATS_FRAME_OPTION_TYPE(name, field, type, ...)			\
	_Static_assert(sizeof(((Infeed__LoaderOptions *)0)->name) ==	\
	    sizeof(type) || _Generic((type)0, bool: 1, default: 0),	\
	    "infeed.proto's LoaderOptions." #name " is not " #type	\
	    " as options-schema.h says");
INFEED_LOADER_OPTIONS(STATS_FRAME_OPTION_TYPE)

/* A session's LoaderOptions, as it was asked for, for its SessionStats. */
static void
stats_frame_options(const struct session_options *o,
    struct stats_frame_options *out)
{
	Infeed__LoaderOptions	*lo = &out->lo;
	Infeed__Transform	*t = &out->t;
	size_t			 i;

	infeed__loader_options__init(lo);
#define STATS_FRAME_OPTION(name, field, ...)				\
	lo->has_##name = 1;						\
	lo->name = (__typeof__(lo->name))o->field;
	INFEED_LOADER_OPTIONS(STATS_FRAME_OPTION)
#undef STATS_FRAME_OPTION
	/* A session's count is at most INFEED_MAX_ELASTIC_STAGES. */
	for (i = 0; i < o->nstages; i++) {
		infeed__elastic_stage__init(&out->stage[i]);
		out->stage[i].process_count = o->stages[i].process_count;
		out->stage[i].combined_batch_size = o->stages[i].cbs;
		out->stage[i].steps_done = o->stages[i].steps_done;
		out->stagep[i] = &out->stage[i];
	}
	lo->n_start_epoch_stages = o->nstages;
	lo->start_epoch_stages = out->stagep;
	if (!o->has_transform)
		return;
	infeed__transform__init(t);
	t->has_to_float32 = t->has_scale = 1;
	t->to_float32 = o->transform.to_float32;
	t->scale = o->transform.scale;
	/* A session's counts are at most INFEED_MAX_CHANNELS. */
	t->n_mean = o->transform.nmean;
	t->mean = (float *)(uintptr_t)o->transform.mean;
	t->n_std = o->transform.nstd;
	t->std = (float *)(uintptr_t)o->transform.std;
	t->pipeline = o->transform.pipeline;
	lo->transform = t;
}

/* A live session of the snapshot as a SessionStats. */
static void
stats_frame_session(const struct stats_session *in, Infeed__SessionStats *ss,
    struct stats_frame_options *opts)
{
	const struct session_report	*r = &in->report;

	infeed__session_stats__init(ss);
	ss->session_id = r->id;
	ss->dataset = (char *)(uintptr_t)r->dataset;
	stats_frame_options(r->options, opts);
	ss->options = &opts->lo;
	ss->has_epoch = ss->has_step = 1;
	ss->epoch = r->epoch;
	ss->step = r->step;
	ss->has_slots_ready = ss->has_slots_held = ss->has_slots = 1;
	ss->slots_ready = r->slots_ready;
	ss->slots_held = r->slots_held;
	ss->slots = r->slots;
#define STATS_FRAME_SESSION(name, report, scale, ...)			\
	ss->has_##name = 1;						\
	ss->name = r->report / (scale);
	INFEED_SESSION_STATS(STATS_FRAME_SESSION)
#undef STATS_FRAME_SESSION
	ss->has_items_per_s = 1;
	ss->items_per_s = r->items_per_s;
	ss->n_next_wait_counts = SESSION_WAIT_BUCKETS;
	ss->next_wait_counts = (uint64_t *)(uintptr_t)r->wait_counts;
	ss->has_client_pid = ss->has_client_uid = 1;
	ss->client_pid = r->client_pid;
	ss->client_uid = r->client_uid;
	ss->client_name = (char *)(uintptr_t)in->client_name;
	ss->has_errors_sent = 1;
	ss->errors_sent = in->errors_sent;
	if (r->group_id != 0) {
		ss->has_group_id = ss->has_group_members = 1;
		ss->group_id = r->group_id;
		ss->group_members = r->group_members;
#define STATS_FRAME_GROUP(name, report, ...)				\
		ss->has_##name = 1;					\
		ss->name = r->report;
		INFEED_GROUP_STATS(STATS_FRAME_GROUP)
#undef STATS_FRAME_GROUP
	}
	ss->has_group_left = 1;
	ss->group_left = r->group_left;
}

/* A worker of the snapshot as a WorkerStats. */
static void
stats_frame_worker(const struct pool_worker_info *wi, Infeed__WorkerStats *ws)
{
	infeed__worker_stats__init(ws);
	ws->pid = wi->pid;
	ws->state = (char *)(uintptr_t)wi->state;
#define STATS_FRAME_WORKER(name, ...)					\
	ws->has_##name = 1;						\
	ws->name = wi->name;
	INFEED_WORKER_STATS_DAEMON(STATS_FRAME_WORKER)
	INFEED_WORKER_STATS(STATS_FRAME_WORKER)
#undef STATS_FRAME_WORKER
}

/* The snapshot as a Stats message. */
void
stats_frame_fill(struct stats_frame *sf, const struct stats *snap)
{
	Infeed__Stats	*st = &sf->msg;
	size_t		 i;

	memset(sf, 0, sizeof(*sf));
	infeed__stats__init(st);
	sf->ss = xcalloc(snap->nsessions + 1, sizeof(*sf->ss));
	sf->ssp = xcalloc(snap->nsessions + 1, sizeof(*sf->ssp));
	sf->opts = xcalloc(snap->nsessions + 1, sizeof(*sf->opts));
	for (i = 0; i < snap->nsessions; i++) {
		stats_frame_session(&snap->sessions[i], &sf->ss[i],
		    &sf->opts[i]);
		sf->ssp[i] = &sf->ss[i];
	}
	sf->ws = xcalloc(snap->nworkers + 1, sizeof(*sf->ws));
	sf->wsp = xcalloc(snap->nworkers + 1, sizeof(*sf->wsp));
	for (i = 0; i < snap->nworkers; i++) {
		stats_frame_worker(&snap->workers[i], &sf->ws[i]);
		sf->wsp[i] = &sf->ws[i];
	}
	st->daemon_version = (char *)INFEED_VERSION;
	st->has_uptime_ms = 1;
	st->uptime_ms = snap->uptime_ms;
	st->has_clients = 1;
	st->clients = snap->clients;
	st->n_sessions = snap->nsessions;
	st->sessions = sf->ssp;
#define STATS_FRAME_MEMORY(name, ...)					\
	st->has_##name = 1;						\
	st->name = snap->name;
	INFEED_MEMORY_STATS(STATS_FRAME_MEMORY)
	INFEED_CACHE_STATS(STATS_FRAME_MEMORY)
#undef STATS_FRAME_MEMORY
	st->has_jobs_queued = 1;
	st->jobs_queued = snap->jobs_queued;
	st->has_rows_reissued = 1;
	st->rows_reissued = snap->rows_reissued;
	st->has_fork_server_pid = st->has_fork_server_restarts = 1;
	st->fork_server_pid = snap->fork_server_pid > 0 ?
	    snap->fork_server_pid : 0;
	st->fork_server_restarts = snap->fork_server_restarts;
	st->n_workers = snap->nworkers;
	st->workers = sf->wsp;
	st->huge_pages = (char *)(uintptr_t)snap->huge_pages;
	st->reads_in_flight = (char *)(uintptr_t)snap->reads_in_flight;
	if (snap->workers_auto) {
		st->has_workers_auto = st->has_workers_max = 1;
		st->workers_auto = 1;
		st->workers_max = snap->autotune.max;
		st->workers_max_why =
		    (char *)(uintptr_t)snap->autotune.max_why;
		st->pool_last_resize = (char *)(uintptr_t)snap->autotune.last;
		st->pool_decision = (char *)(uintptr_t)snap->autotune.now;
		st->has_pool_grows = st->has_pool_shrinks = 1;
		st->pool_grows = snap->autotune.grows;
		st->pool_shrinks = snap->autotune.shrinks;
	}
}

/* Free the messages the Stats frame points to. */
void
stats_frame_clear(struct stats_frame *sf)
{
	free(sf->wsp);
	free(sf->ws);
	free(sf->opts);
	free(sf->ssp);
	free(sf->ss);
	memset(sf, 0, sizeof(*sf));
}
