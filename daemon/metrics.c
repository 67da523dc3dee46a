/* SPDX-License-Identifier: MIT */
/*
 * Prometheus metrics over HTTP, with libevent's HTTP server, when the
 * configuration sets metrics_listen.  GET /metrics answers the text
 * exposition format from one snapshot of the daemon (stats.h), so a
 * scrape costs time and memory in proportion to the sessions and workers,
 * both bounded by the configuration.  Only GET is served, headers are
 * capped at 8 KiB, bodies refused, and a connection that sends nothing for
 * 5 s is closed: a slow or hostile HTTP client cannot hold the event loop.
 *
 * Nor can it hold descriptors: libevent 2.1's evhttp has no connection cap,
 * and its timeout restarts with every byte, so a process sending a byte
 * every few seconds would keep a connection for ever, and enough of them
 * would leave none for rings, workers and clients.  So at most
 * METRICS_MAX_CONNS connections are open at once (a new one closes the
 * oldest: a scrape that sends its request at once is still served), each
 * is closed METRICS_DEADLINE_S after it was accepted whatever it sends,
 * and out of descriptors the listener pauses instead of spinning.  evhttp
 * has no hook per connection but the one that makes its bufferevent
 * (evhttp_set_bevcb); the connection is found from that bufferevent's
 * callback argument just after, and followed with its close callback.
 *
 * docs/operations.md lists the metrics.
 */

#include <sys/queue.h>
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "catalogue.h"
#include "clock.h"
#include "errcode.h"
#include "io-batch.h"
#include "log.h"
#include "metrics.h"
#include "session.h"
#include "stats.h"
#include "stats-schema.h"
#include "xmalloc.h"

#define METRICS_MAX_HEADERS	8192
#define METRICS_TIMEOUT_S	5
/* Connections open at once, and how long one may stay from its accept. */
#define METRICS_MAX_CONNS	16
#define METRICS_DEADLINE_S	10
/* Out of descriptors: the listener pauses this long. */
#define METRICS_PAUSE_MS	1000

struct metrics;

/* One HTTP connection, from its bufferevent's making to its close. */
struct metrics_conn {
	struct metrics			*m;
	struct bufferevent		*bev;	/* a reference held until found */
	struct evhttp_connection	*evcon;	/* NULL until found */
	struct event			*ev;	/* finding it, then its deadline */
	TAILQ_ENTRY(metrics_conn)	 entry;
};
TAILQ_HEAD(metrics_conns, metrics_conn);

struct metrics {
	struct event_base	*base;
	struct evhttp		*http;
	struct peers		*peers;
	struct evconnlistener	*listener;
	struct event		*ev_resume;	/* after an accept failure */
	struct metrics_conns	 pending;	/* made, connection not found */
	struct metrics_conns	 open;		/* oldest first */
	unsigned		 nopen;
	uint64_t		 evicted;	/* not yet logged */
	uint64_t		 evicted_logged_ms;
	bool			 accept_failing;	/* since the last accept */
	struct metrics		*next;		/* in metrics_all */
	uint16_t		 port;		/* bound */
};

/*
 * Every server, for the listener's error callback: its argument is
 * evhttp's (the listener's one user pointer), so it finds its server here.
 */
static struct metrics	*metrics_all;

/* Append @s to @b as a label value: backslash, quote and newline escaped. */
static void
metrics_label(struct evbuffer *b, const char *s)
{
	for (; s != NULL && *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			evbuffer_add_printf(b, "\\%c", *s);
		else if (*s == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, s, 1);
	}
}

/* "# HELP" and "# TYPE" of a metric family. */
static void
metrics_family(struct evbuffer *b, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

/* {dataset="...",client="...",session="..."} of a session's series. */
static void
metrics_labels(struct evbuffer *b, const char *dataset, const char *client,
    const char *session, const char *extra)
{
	evbuffer_add(b, "{dataset=\"", 10);
	metrics_label(b, dataset);
	evbuffer_add(b, "\",client=\"", 10);
	metrics_label(b, client);
	evbuffer_add_printf(b, "\",session=\"%s\"%s%s}", session,
	    extra ? "," : "", extra ? extra : "");
}

/* The session counters of the schema (stats-schema.h), for /metrics. */
enum {
#define METRICS_SESSION_INDEX(name, ...)	METRICS_##name,
	INFEED_SESSION_STATS(METRICS_SESSION_INDEX)
#undef METRICS_SESSION_INDEX
	METRICS_SESSION_STATS
};

/* One session's series (live or folded), whose sample @w is in @buf. */
struct metrics_series {
	const char	*dataset;
	const char	*client;
	char		 session[32];	/* an id, or "ended" */
	double		 v[METRICS_SESSION_STATS];	/* by the schema */
	const uint64_t	*wait_counts;	/* SESSION_WAIT_BUCKETS */
	size_t		 nwait_counts;
};

/* Counter family @name (@help): entry @k of every series. */
static void
metrics_per_series(struct evbuffer *b, const struct metrics_series *s,
    size_t n, const char *name, const char *help, size_t k)
{
	size_t	i;

	metrics_family(b, name, "counter", help);
	for (i = 0; i < n; i++) {
		evbuffer_add_printf(b, "%s", name);
		metrics_labels(b, s[i].dataset, s[i].client, s[i].session,
		    NULL);
		evbuffer_add_printf(b, " %.10g\n", s[i].v[k]);
	}
}

/* The histogram of each Next's wait, per series. */
static void
metrics_wait_histogram(struct evbuffer *b, const struct metrics_series *s,
    size_t n)
{
	const char	*name = "infeed_next_wait_seconds";
	char		 le[48];
	uint64_t	 cum;
	size_t		 i, k;

	metrics_family(b, name, "histogram", "How long each Next waited for "
	    "its step (0 when one was ready).");
	for (i = 0; i < n; i++) {
		cum = 0;
		for (k = 0; k < SESSION_WAIT_BUCKETS; k++) {
			cum += k < s[i].nwait_counts ? s[i].wait_counts[k] : 0;
			if (k < SESSION_WAIT_BUCKETS - 1)
				snprintf(le, sizeof(le), "le=\"%g\"",
				    consumer_wait_bounds[k]);
			else
				snprintf(le, sizeof(le), "le=\"+Inf\"");
			evbuffer_add_printf(b, "%s_bucket", name);
			metrics_labels(b, s[i].dataset, s[i].client,
			    s[i].session, le);
			evbuffer_add_printf(b, " %llu\n",
			    (unsigned long long)cum);
		}
		evbuffer_add_printf(b, "%s_sum", name);
		metrics_labels(b, s[i].dataset, s[i].client, s[i].session,
		    NULL);
		evbuffer_add_printf(b, " %.10g\n%s_count",
		    s[i].v[METRICS_data_wait_s], name);
		metrics_labels(b, s[i].dataset, s[i].client, s[i].session,
		    NULL);
		evbuffer_add_printf(b, " %llu\n", (unsigned long long)cum);
	}
}

/* Live sessions, then ended ones folded per dataset, as series. */
static struct metrics_series *
metrics_series(const struct stats *st, size_t *n)
{
	const struct stats_history	*h = st->history;
	const struct session_report	*r;
	const struct stats_ended	*e;
	struct metrics_series		*s, *x;
	size_t				 i;

	s = xcalloc(st->nsessions + h->nended + 1, sizeof(*s));
	for (i = 0; i < st->nsessions; i++) {
		r = &st->sessions[i].report;
		x = &s[i];
		x->dataset = r->dataset;
		x->client = st->sessions[i].client_name;
		snprintf(x->session, sizeof(x->session), "%llu",
		    (unsigned long long)r->id);
#define METRICS_SERIES_LIVE(name, report, scale, ...)			\
		x->v[METRICS_##name] = (double)(r->report / (scale));
		INFEED_SESSION_STATS(METRICS_SERIES_LIVE)
#undef METRICS_SERIES_LIVE
		x->wait_counts = r->wait_counts;
		x->nwait_counts = SESSION_WAIT_BUCKETS;
	}
	for (i = 0; i < h->nended; i++) {
		e = &h->ended[i];
		x = &s[st->nsessions + i];
		x->dataset = e->dataset;
		x->client = "";
		snprintf(x->session, sizeof(x->session), "ended");
#define METRICS_SERIES_ENDED(name, report, scale, ...)			\
		x->v[METRICS_##name] = (double)(e->report / (scale));
		INFEED_SESSION_STATS(METRICS_SERIES_ENDED)
#undef METRICS_SERIES_ENDED
		x->wait_counts = e->wait_counts;
		x->nwait_counts = SESSION_WAIT_BUCKETS;
	}
	*n = st->nsessions + h->nended;
	return (s);
}

/* The ring slots of live sessions, by state. */
static void
metrics_rings(struct evbuffer *b, const struct stats *st)
{
	const struct stats_session	*ss;
	char				 id[32];
	size_t				 i;

	metrics_family(b, "infeed_ring_slots", "gauge", "Slots of a "
	    "session's ring: ready (filled, not yet taken), held (by the "
	    "trainer) and all.");
	for (i = 0; i < st->nsessions; i++) {
		ss = &st->sessions[i];
		snprintf(id, sizeof(id), "%llu",
		    (unsigned long long)ss->report.id);
		evbuffer_add(b, "infeed_ring_slots", 17);
		metrics_labels(b, ss->report.dataset, ss->client_name, id,
		    "state=\"ready\"");
		evbuffer_add_printf(b, " %u\ninfeed_ring_slots",
		    ss->report.slots_ready);
		metrics_labels(b, ss->report.dataset, ss->client_name, id,
		    "state=\"held\"");
		evbuffer_add_printf(b, " %u\ninfeed_ring_slots",
		    ss->report.slots_held);
		metrics_labels(b, ss->report.dataset, ss->client_name, id,
		    "state=\"all\"");
		evbuffer_add_printf(b, " %u\n", ss->report.slots);
	}
}

/* Whether session @i of @st is its group's first: one series per group. */
static bool
metrics_group_first(const struct stats *st, size_t i)
{
	uint64_t	group = st->sessions[i].report.group_id;
	size_t		j;

	if (group == 0)
		return (false);
	for (j = 0; j < i; j++) {
		if (st->sessions[j].report.group_id == group)
			return (false);
	}
	return (true);
}

/* The group counters of the schema (stats-schema.h), for /metrics. */
static const struct {
	const char	*name, *help;	/* NULL name: not in /metrics */
	int		 reason;	/* session_leave_names; -1: none */
	size_t		 field;		/* a uint64_t in session_report */
} metrics_group_stats[] = {
#define METRICS_GROUP_STAT(name, report, metric, reason, help)		\
	{ metric, help, reason, offsetof(struct session_report, report) },
	INFEED_GROUP_STATS(METRICS_GROUP_STAT)
#undef METRICS_GROUP_STAT
};

/*
 * The group counter families of metrics_group_stats[@f..@g) (one family,
 * a series per reason), each series per group: its first session's.
 */
static void
metrics_group_family(struct evbuffer *b, const struct stats *st, size_t f,
    size_t g)
{
	const struct session_report	*r;
	uint64_t			 v;
	size_t				 i, k;

	metrics_family(b, metrics_group_stats[f].name, "counter",
	    metrics_group_stats[f].help);
	for (i = 0; i < st->nsessions; i++) {
		r = &st->sessions[i].report;
		if (!metrics_group_first(st, i))
			continue;
		for (k = f; k < g; k++) {
			memcpy(&v, (const char *)r +
			    metrics_group_stats[k].field, sizeof(v));
			evbuffer_add_printf(b, "%s{group=\"%llu\"",
			    metrics_group_stats[k].name,
			    (unsigned long long)r->group_id);
			if (metrics_group_stats[k].reason >= 0)
				evbuffer_add_printf(b, ",reason=\"%s\"",
				    session_leave_names[
				    metrics_group_stats[k].reason]);
			evbuffer_add_printf(b, "} %llu\n",
			    (unsigned long long)v);
		}
	}
}

/*
 * Shared pipelines (issue 25): each member session's group and its
 * members; per group, the steps it filled once for all of them, and its
 * members that left it (by reason), stayed, and rejoined.
 */
static void
metrics_groups(struct evbuffer *b, const struct stats *st)
{
	const struct session_report	*r;
	char				 id[32], group[48];
	size_t				 i, f, g, n;

	metrics_family(b, "infeed_group_members", "gauge", "Members of the "
	    "shared group the session belongs to (group: the group's id).");
	for (i = 0; i < st->nsessions; i++) {
		r = &st->sessions[i].report;
		if (r->group_id == 0)
			continue;
		snprintf(id, sizeof(id), "%llu", (unsigned long long)r->id);
		snprintf(group, sizeof(group), "group=\"%llu\"",
		    (unsigned long long)r->group_id);
		evbuffer_add(b, "infeed_group_members", 20);
		metrics_labels(b, r->dataset, st->sessions[i].client_name, id,
		    group);
		evbuffer_add_printf(b, " %u\n", r->group_members);
	}
	/* Each family of the schema's group counters, in its order. */
	n = sizeof(metrics_group_stats) / sizeof(metrics_group_stats[0]);
	for (f = 0; f < n; f = g) {
		for (g = f + 1; g < n && metrics_group_stats[g].name != NULL &&
		    metrics_group_stats[f].name != NULL &&
		    strcmp(metrics_group_stats[g].name,
		    metrics_group_stats[f].name) == 0; g++)
			continue;
		if (metrics_group_stats[f].name != NULL)
			metrics_group_family(b, st, f, g);
	}
}

/* Worker processes: the schema's counters (stats-schema.h). */
static void
metrics_workers(struct evbuffer *b, const struct stats *st)
{
	size_t	i;

#define METRICS_WORKER_STAT(field, type, name, help, ...)		\
	metrics_family(b, name, "counter", help);			\
	for (i = 0; i < st->nworkers; i++)				\
		evbuffer_add_printf(b, "%s{worker=\"%zu\"} %.10g\n", name, \
		    i, (double)st->workers[i].field);
	INFEED_WORKER_STATS_DAEMON(METRICS_WORKER_STAT)
	INFEED_WORKER_STATS(METRICS_WORKER_STAT)
#undef METRICS_WORKER_STAT
}

/* The daemon's own gauges and its errors by code. */
static void
metrics_daemon(struct evbuffer *b, const struct stats *st)
{
	size_t	c;

	metrics_family(b, "infeed_clients", "gauge", "Connected clients.");
	evbuffer_add_printf(b, "infeed_clients %u\n", st->clients);
	metrics_family(b, "infeed_sessions", "gauge", "Attached sessions.");
	evbuffer_add_printf(b, "infeed_sessions %zu\n", st->nsessions);
#define METRICS_MEMORY(name, metric, type, help)			\
	metrics_family(b, metric, type, help);				\
	evbuffer_add_printf(b, metric " %llu\n",			\
	    (unsigned long long)st->name);
	INFEED_MEMORY_STATS(METRICS_MEMORY)
	INFEED_CACHE_STATS(METRICS_MEMORY)
#undef METRICS_MEMORY
	metrics_family(b, "infeed_uptime_seconds", "gauge", "Seconds since "
	    "infeedd started.");
	evbuffer_add_printf(b, "infeed_uptime_seconds %.3f\n",
	    (double)st->uptime_ms / 1000.0);
	metrics_family(b, "infeed_rows_reissued_total", "counter", "Rows "
	    "given to a worker again after the one reading them died.");
	evbuffer_add_printf(b, "infeed_rows_reissued_total %llu\n",
	    (unsigned long long)st->rows_reissued);
	metrics_family(b, "infeed_fork_server_restarts_total", "counter",
	    "New fork servers infeedd started after one died.");
	evbuffer_add_printf(b, "infeed_fork_server_restarts_total %u\n",
	    st->fork_server_restarts);
	metrics_family(b, "infeed_reads_in_flight_info", "gauge", "How the "
	    "workers put their reads in flight (io_backend), chosen at start: "
	    "io_uring, or threads where the kernel refuses io_uring.");
	evbuffer_add_printf(b, "infeed_reads_in_flight_info{backend=\"%s\"} 1\n",
	    io_backend_name(io_backend_chosen()));
	metrics_family(b, "infeed_fork_server_up", "gauge", "1 while a fork "
	    "server is up to start workers, 0 while a new one is awaited.");
	evbuffer_add_printf(b, "infeed_fork_server_up %d\n",
	    st->fork_server_pid > 0);
	metrics_family(b, "infeed_jobs_queued", "gauge", "Jobs (parts of "
	    "steps) waiting for a free worker.");
	evbuffer_add_printf(b, "infeed_jobs_queued %u\n", st->jobs_queued);
	metrics_family(b, "infeed_workers", "gauge", "Worker processes "
	    "(one being retired by workers = auto too).");
	evbuffer_add_printf(b, "infeed_workers %u\n", st->nworkers);
	metrics_family(b, "infeed_workers_max", "gauge", "The most workers "
	    "the pool may have: with workers = auto the CPUs infeedd may use "
	    "(affinity, cgroup cpu.max) for workers that compute, more for "
	    "workers that wait for storage, else workers.");
	evbuffer_add_printf(b, "infeed_workers_max %u\n", st->workers_auto ?
	    st->autotune.max : st->nworkers - st->spares);
	metrics_family(b, "infeed_workers_spare", "gauge", "Spare workers up "
	    "(of infeed_workers): they serve the other sessions while every "
	    "worker is blocked in a store that does not answer.");
	evbuffer_add_printf(b, "infeed_workers_spare %u\n", st->spares);
	metrics_family(b, "infeed_pool_spares_started_total", "counter",
	    "Spare workers started, and why: every worker blocked in its "
	    "storage while another session's job waited.");
	evbuffer_add_printf(b, "infeed_pool_spares_started_total{reason="
	    "\"workers_blocked_in_storage\"} %llu\n",
	    (unsigned long long)st->spares_started);
	metrics_family(b, "infeed_pool_resizes_total", "counter", "Workers "
	    "added and retired by workers = auto, and why: past the CPUs for "
	    "workers that wait for storage, given back when they wait for a "
	    "CPU.");
	evbuffer_add_printf(b, "infeed_pool_resizes_total{direction=\"grow\","
	    "reason=\"trainers_waiting\"} %llu\n",
	    (unsigned long long)(st->autotune.grows -
	    st->autotune.grows_storage));
	evbuffer_add_printf(b, "infeed_pool_resizes_total{direction=\"grow\","
	    "reason=\"workers_waiting_for_storage\"} %llu\n",
	    (unsigned long long)st->autotune.grows_storage);
	evbuffer_add_printf(b, "infeed_pool_resizes_total{direction="
	    "\"shrink\",reason=\"workers_idle\"} %llu\n",
	    (unsigned long long)(st->autotune.shrinks -
	    st->autotune.shrinks_cpu));
	evbuffer_add_printf(b, "infeed_pool_resizes_total{direction="
	    "\"shrink\",reason=\"workers_waiting_for_cpu\"} %llu\n",
	    (unsigned long long)st->autotune.shrinks_cpu);
	metrics_family(b, "infeed_errors_total", "counter", "Errors sent to "
	    "clients, by the protocol's ErrorCode.");
	for (c = ERRCODE_NONE + 1; c < ERRCODE_COUNT; c++)
		evbuffer_add_printf(b, "infeed_errors_total{code=\"%s\"} "
		    "%llu\n", errcode_name((enum errcode)c),
		    (unsigned long long)st->history->errors[c]);
}

/* One family of a token dataset's packing: @what of each. */
static void
metrics_tokens_family(struct evbuffer *b, const struct catalogue *cat,
    const char *metric, const char *help, int what)
{
	const struct dataset	*ds;
	size_t			 i;
	bool			 any = false;

	for (i = 0; i < cat->ndatasets; i++) {
		if ((ds = cat->datasets[i]) == NULL || ds->documents == 0 ||
		    ds->ndim != 2)
			continue;
		if (!any)
			evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s gauge\n",
			    metric, help, metric);
		any = true;
		evbuffer_add_printf(b, "%s{dataset=\"", metric);
		metrics_label(b, ds->name);
		if (what == 0)
			evbuffer_add_printf(b, "\"} %llu\n",
			    (unsigned long long)ds->documents);
		else if (what == 1)
			evbuffer_add_printf(b, "\"} %llu\n",
			    (unsigned long long)ds->tokens);
		else if (what == 2)
			evbuffer_add_printf(b, "\"} %llu\n",
			    (unsigned long long)ds->samples);
		else
			evbuffer_add_printf(b, "\"} %.6f\n",
			    (double)ds->tokens / ((double)ds->samples *
			    (double)ds->shape[1]));
	}
}

/* Token datasets: documents, tokens, packed rows and their efficiency. */
static void
metrics_tokens(struct evbuffer *b, const struct stats *st)
{
	if (st->cat == NULL)
		return;
	metrics_tokens_family(b, st->cat, "infeed_tokens_documents",
	    "Documents of a token dataset.", 0);
	metrics_tokens_family(b, st->cat, "infeed_tokens_tokens",
	    "Real tokens in a token dataset's packed rows.", 1);
	metrics_tokens_family(b, st->cat, "infeed_tokens_rows",
	    "Packed rows of a token dataset (its samples).", 2);
	metrics_tokens_family(b, st->cat, "infeed_tokens_packing_efficiency",
	    "Real tokens over all tokens of a token dataset's rows.", 3);
}

/* The exposition text of snapshot @st. */
void
metrics_render(struct evbuffer *b, const struct stats *st)
{
	struct metrics_series	*s;
	size_t			 n;

	s = metrics_series(st, &n);
	metrics_daemon(b, st);
#define METRICS_SESSION_FAMILY(name, report, scale, metric, help, ...)	\
	metrics_per_series(b, s, n, metric, help, METRICS_##name);
	INFEED_SESSION_STATS(METRICS_SESSION_FAMILY)
#undef METRICS_SESSION_FAMILY
	metrics_wait_histogram(b, s, n);
	metrics_rings(b, st);
	metrics_groups(b, st);
	metrics_workers(b, st);
	metrics_tokens(b, st);
	free(s);
}

/* GET /metrics */
static void
metrics_cb(struct evhttp_request *req, void *arg)
{
	struct metrics		*m = arg;
	struct evbuffer		*b;
	struct stats		 st;

	if ((b = evbuffer_new()) == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	peers_stats(m->peers, &st);
	metrics_render(b, &st);
	stats_clear(&st);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(req, HTTP_OK, "OK", b);
	evbuffer_free(b);
}

/* Anything but /metrics. */
static void
metrics_other_cb(struct evhttp_request *req, void *arg)
{
	(void)arg;
	evhttp_send_error(req, HTTP_NOTFOUND, "infeedd serves /metrics only");
}

/* A connection closed (by either side, or by us): forget it. */
static void
metrics_conn_closed_cb(struct evhttp_connection *evcon, void *arg)
{
	struct metrics_conn	*c = arg;

	(void)evcon;
	TAILQ_REMOVE(&c->m->open, c, entry);
	c->m->nopen--;
	event_free(c->ev);
	free(c);
}

/* METRICS_DEADLINE_S after its accept: close it, whatever it is doing. */
static void
metrics_conn_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct metrics_conn	*c = arg;

	(void)fd;
	(void)what;
	evhttp_connection_free(c->evcon);	/* calls the close callback */
}

/* Say, at most once a minute, that connections were closed for room. */
static void
metrics_log_evicted(struct metrics *m)
{
	uint64_t	now = clock_now_ms();

	if (m->evicted == 0 || (m->evicted_logged_ms != 0 &&
	    now - m->evicted_logged_ms < 60000))
		return;
	log_warnx("metrics: %llu connections closed to make room: more than "
	    "%d were open at once", (unsigned long long)m->evicted,
	    METRICS_MAX_CONNS);
	m->evicted = 0;
	m->evicted_logged_ms = now;
}

/*
 * Just after evhttp made the connection of bufferevent @c->bev: find it
 * (the bufferevent's callback argument), follow its close, arm its
 * deadline, and close the oldest when too many are open.
 */
static void
metrics_conn_found_cb(evutil_socket_t fd, short what, void *arg)
{
	struct metrics_conn	*c = arg, *old;
	struct metrics		*m = c->m;
	/* Fewer seconds where INFEED_METRICS_DEADLINE_S says (the tests). */
	struct timeval		 tv = { clock_wait_s(
				    "INFEED_METRICS_DEADLINE_S",
				    METRICS_DEADLINE_S), 0 };
	void			*cbarg = NULL;

	(void)fd;
	(void)what;
	TAILQ_REMOVE(&m->pending, c, entry);
	/* Room is made below: the next connection may be accepted. */
	if (!evtimer_pending(m->ev_resume, NULL))
		evconnlistener_enable(m->listener);
	bufferevent_getcb(c->bev, NULL, NULL, NULL, &cbarg);
	/* Freed by evhttp already (it failed): only our reference is left. */
	bufferevent_decref(c->bev);
	if (cbarg == NULL) {
		event_free(c->ev);
		free(c);
		return;
	}
	c->evcon = cbarg;
	while (m->nopen >= METRICS_MAX_CONNS &&
	    (old = TAILQ_FIRST(&m->open)) != NULL) {
		evhttp_connection_free(old->evcon);
		m->evicted++;
	}
	metrics_log_evicted(m);
	evhttp_connection_set_closecb(c->evcon, metrics_conn_closed_cb, c);
	event_free(c->ev);
	if ((c->ev = evtimer_new(m->base, metrics_conn_deadline_cb, c)) ==
	    NULL)
		fatalx("metrics: out of memory");
	TAILQ_INSERT_TAIL(&m->open, c, entry);
	m->nopen++;
	evtimer_add(c->ev, &tv);
}

/*
 * evhttp's hook for a new connection's bufferevent: make it, and look for
 * its connection as soon as evhttp has made it, before any of its I/O.
 */
static struct bufferevent *
metrics_bev_cb(struct event_base *base, void *arg)
{
	struct metrics		*m = arg;
	struct metrics_conn	*c = xcalloc(1, sizeof(*c));

	c->m = m;
	m->accept_failing = false;
	if ((c->bev = bufferevent_socket_new(base, -1,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL ||
	    (c->ev = event_new(base, -1, 0, metrics_conn_found_cb, c)) ==
	    NULL)
		fatalx("metrics: out of memory");
	/* Ours until found, so that it cannot be freed under us. */
	bufferevent_incref(c->bev);
	/*
	 * One accept a turn of the loop: the listener would otherwise accept
	 * a whole burst (up to the backlog) before any is found and counted,
	 * every one a descriptor; it is enabled again once this one is.
	 */
	evconnlistener_disable(m->listener);
	TAILQ_INSERT_TAIL(&m->pending, c, entry);
	event_active(c->ev, EV_TIMEOUT, 1);
	return (c->bev);
}

/*
 * Out of descriptors (or another accept failure): pause, instead of
 * libevent's warning on every turn of the loop; say so once until an
 * accept works again.
 */
static void
metrics_accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct metrics	*m;
	struct timeval	 tv = { 0, METRICS_PAUSE_MS * 1000 };
	int		 err = EVUTIL_SOCKET_ERROR();

	(void)arg;	/* evhttp's */
	for (m = metrics_all; m != NULL && m->listener != lev; m = m->next)
		;
	if (m == NULL)
		return;

	if (!m->accept_failing)
		log_warnx("metrics: cannot accept a connection (%s); trying "
		    "again every %d ms", evutil_socket_error_to_string(err),
		    METRICS_PAUSE_MS);
	m->accept_failing = true;
	evconnlistener_disable(lev);
	evtimer_add(m->ev_resume, &tv);
}

/* The pause is over. */
static void
metrics_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct metrics	*m = arg;

	(void)fd;
	(void)what;
	evconnlistener_enable(m->listener);
}

/* The port @bound listens on. */
static uint16_t
metrics_bound_port(struct evhttp_bound_socket *bound)
{
	struct sockaddr_storage	ss;
	socklen_t		len = sizeof(ss);

	if (getsockname(evhttp_bound_socket_get_fd(bound),
	    (struct sockaddr *)&ss, &len) == -1)
		return (0);
	if (ss.ss_family == AF_INET6)
		return (ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
	return (ntohs(((struct sockaddr_in *)&ss)->sin_port));
}

struct metrics *
metrics_new(struct event_base *base, const char *host, uint16_t port,
    struct peers *ps, char **cause)
{
	struct metrics			*m = xcalloc(1, sizeof(*m));
	struct evhttp_bound_socket	*bound;

	if ((m->http = evhttp_new(base)) == NULL) {
		free(m);
		*cause = xasprintf("cannot create the HTTP server");
		return (NULL);
	}
	m->base = base;
	m->peers = ps;
	TAILQ_INIT(&m->pending);
	TAILQ_INIT(&m->open);
	if ((m->ev_resume = evtimer_new(base, metrics_resume_cb, m)) == NULL)
		fatalx("metrics: out of memory");
	evhttp_set_bevcb(m->http, metrics_bev_cb, m);
	evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET);
	evhttp_set_max_headers_size(m->http, METRICS_MAX_HEADERS);
	evhttp_set_max_body_size(m->http, 0);
	evhttp_set_timeout(m->http, METRICS_TIMEOUT_S);
	evhttp_set_cb(m->http, "/metrics", metrics_cb, m);
	evhttp_set_gencb(m->http, metrics_other_cb, m);
	if ((bound = evhttp_bind_socket_with_handle(m->http, host, port)) ==
	    NULL) {
		evhttp_free(m->http);
		event_free(m->ev_resume);
		free(m);
		*cause = xasprintf("cannot listen on %s port %u for metrics "
		    "(metrics_listen): is the address this host's and the port "
		    "free?", host, (unsigned)port);
		return (NULL);
	}
	m->port = metrics_bound_port(bound);
	m->listener = evhttp_bound_socket_get_listener(bound);
	m->next = metrics_all;
	metrics_all = m;
	evconnlistener_set_error_cb(m->listener, metrics_accept_error_cb);
	log_info("metrics on http://%s%s%s:%u/metrics",
	    strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
	    (unsigned)m->port);
	return (m);
}

/* The port it listens on. */
uint16_t
metrics_port(const struct metrics *m)
{
	return (m->port);
}

void
metrics_free(struct metrics *m)
{
	struct metrics_conn	*c;
	struct metrics		**pp;

	if (m == NULL)
		return;
	for (pp = &metrics_all; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	}
	/* Connections not yet found: drop our reference; evhttp frees them. */
	while ((c = TAILQ_FIRST(&m->pending)) != NULL) {
		TAILQ_REMOVE(&m->pending, c, entry);
		bufferevent_decref(c->bev);
		event_free(c->ev);
		free(c);
	}
	evhttp_free(m->http);	/* calls the close callback of the open */
	event_free(m->ev_resume);
	free(m);
}
