/* SPDX-License-Identifier: MIT */
/*
 * The daemon's life: start-up (once, for infeedd and for the tests and
 * fuzz targets that run it in process), the systemd notifications, the
 * reload that SIGHUP asks for, and shutdown.  A reload opens the new
 * catalogue on a thread of its own (catalogue_open_beside(): the readers
 * map and check files, token datasets scan and pack theirs, remote tar
 * shards are downloaded and indexed), which only reads the served
 * catalogue; then the fork server opens it beside its own
 * (pool_prepare()) while the workers serve the old one; then the loop
 * serves it and the workers are replaced.  The catalogue's datasets keep memory (a packing)
 * charged to memory_budget, the old catalogue's given back at a reload; a
 * reload whose catalogue and the rings held then would pass the budget is
 * refused, as a bad file is.
 */

#include <sys/resource.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "cache.h"
#include "clock.h"
#include "daemon.h"
#include "io-batch.h"
#include "log.h"
#include "packings.h"
#include "reader-remote.h"
#include "stats.h"
#include "version.h"
#include "xmalloc.h"

/* SIGHUP: reload. */
static void
daemon_hup_cb(evutil_socket_t sig, short ev, void *arg)
{
	(void)sig;
	(void)ev;
	daemon_reload(arg);
}

static void	daemon_reload_from(struct daemon *, bool);

/*
 * A packing for a seq_len is wanted, or no longer used: reload the
 * running configuration, not the file (an edit not yet sent with SIGHUP
 * is not the trainers' to apply).
 */
static void
daemon_reload_packings(void *arg)
{
	daemon_reload_from(arg, false);
}

/* Tell systemd we are alive. */
static void
daemon_watchdog_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	(void)arg;
	sd_notify(0, "WATCHDOG=1");
}

/* Every few seconds: a STATUS= line with sessions and throughput. */
static void
daemon_status_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct daemon		*d = arg;
	struct stats		 st;
	uint64_t		 now = clock_now_ms(), rows = 0, wait_us = 0;
	uint64_t		 active_us = 0;
	double			 rate = 0, bound = 0;
	size_t			 i;

	(void)fd;
	(void)ev;
	peers_stats(d->peers, &st);
	for (i = 0; i < st.nsessions; i++) {
		rows += st.sessions[i].report.rows;
		wait_us += st.sessions[i].report.data_wait_us;
		active_us += st.sessions[i].report.active_us;
	}
	/*
	 * Over the last interval; sessions that ended in between make the
	 * totals go down, and that interval says nothing.
	 */
	if (now > d->status_ms && rows >= d->status_rows)
		rate = (double)(rows - d->status_rows) * 1000.0 /
		    (double)(now - d->status_ms);
	if (active_us > d->status_active_us && wait_us >= d->status_wait_us)
		bound = (double)(wait_us - d->status_wait_us) /
		    (double)(active_us - d->status_active_us);
	ring_budget_trim(&d->budget, now);
	pool_let_go(d->pool);	/* memory that trim gave up */
	d->status_rows = rows;
	d->status_ms = now;
	d->status_wait_us = wait_us;
	d->status_active_us = active_us;
	sd_notifyf(0, "STATUS=%zu sessions, %u clients, %.0f items/s, "
	    "trainers input-bound %.0f%% of the time", st.nsessions,
	    st.clients, rate, bound > 1 ? 100.0 : bound * 100);
	stats_clear(&st);
}

/* workers = auto: every AUTOTUNE_TICK_MS, size the pool (autotune.h). */
static void
daemon_autotune_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct daemon	*d = arg;
	struct stats	 st;
	uint64_t	 wait_us, active_us, room, charged;

	(void)fd;
	(void)ev;
	peers_stats(d->peers, &st);
	stats_trainer_wait(&st, &wait_us, &active_us);
	/* Kept memory is given up for what needs the room. */
	charged = st.memory_used + st.memory_held;
	room = charged < st.memory_budget ? st.memory_budget - charged : 0;
	autotune_tick(d->autotune, wait_us, active_us, st.memory_private,
	    room);
	stats_clear(&st);
}

/* SIGTERM or SIGINT: leave the loop. */
static void
daemon_stop_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct daemon	*d = arg;

	(void)ev;
	log_info("%s received, shutting down", strsignal(sig));
	sd_notify(0, "STOPPING=1");
	event_base_loopexit(d->base, NULL);
}

/* Signals, the watchdog and the STATUS= timer of a service. */
static void
daemon_service_events(struct daemon *d)
{
	struct timeval	tv;
	uint64_t	watchdog_usec = 0;

	d->ev_term = evsignal_new(d->base, SIGTERM, daemon_stop_cb, d);
	d->ev_int = evsignal_new(d->base, SIGINT, daemon_stop_cb, d);
	d->ev_hup = evsignal_new(d->base, SIGHUP, daemon_hup_cb, d);
	if (d->ev_term == NULL || d->ev_int == NULL || d->ev_hup == NULL ||
	    event_add(d->ev_term, NULL) || event_add(d->ev_int, NULL) ||
	    event_add(d->ev_hup, NULL))
		fatalx("cannot handle signals");
	d->ev_watchdog = event_new(d->base, -1, EV_PERSIST,
	    daemon_watchdog_cb, d);
	d->ev_status = event_new(d->base, -1, EV_PERSIST, daemon_status_cb, d);
	if (d->ev_watchdog == NULL || d->ev_status == NULL)
		fatalx("cannot create timers");
	if (sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0) {
		tv.tv_sec = (time_t)(watchdog_usec / 2 / 1000000);
		tv.tv_usec = (suseconds_t)(watchdog_usec / 2 % 1000000);
		event_add(d->ev_watchdog, &tv);
		log_info("watchdog: pinging systemd every %llu ms",
		    (unsigned long long)(watchdog_usec / 2000));
	}
	tv.tv_sec = 5;
	tv.tv_usec = 0;
	event_add(d->ev_status, &tv);
	d->status_ms = clock_now_ms();
}

/*
 * Take the hard limit of open files as the soft one, as services do, and
 * warn when max_clients cannot fit in it (each client may hold its socket
 * and its ring, and the pool a copy of the ring).  The limit, for
 * autotune_limit(); UINT64_MAX when none.
 */
static uint64_t
daemon_raise_nofile(const struct config *conf, unsigned workers)
{
	struct rlimit	rl;
	uint64_t	need;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
		return (UINT64_MAX);
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == -1)
			log_warn("setrlimit RLIMIT_NOFILE");
		(void)getrlimit(RLIMIT_NOFILE, &rl);
	}
	need = (uint64_t)conf->max_clients * 3 + (workers +
	    POOL_SPARES_MAX) * 2 + 32;
	if (rl.rlim_cur != RLIM_INFINITY && need > rl.rlim_cur)
		log_warnx("max_clients = %u needs about %llu file descriptors "
		    "but the limit is %llu (LimitNOFILE= under systemd); "
		    "clients past it are refused", conf->max_clients,
		    (unsigned long long)need, (unsigned long long)rl.rlim_cur);
	return (rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur);
}

/* Make every layer, bottom up. */
struct daemon *
daemon_start(const struct daemon_args *args)
{
	struct peers_host	 ph;
	struct daemon		*d;
	struct config_cpus	 cpus;
	struct timeval		 tick = { 0, AUTOTUNE_TICK_MS * 1000 };
	char			*cause = NULL, why[256];
	unsigned		 max = 0;
	uint64_t		 nofile;

	d = xcalloc(1, sizeof(*d));
	d->started_ms = clock_now_ms();
	if ((d->conf = config_load(args->config_path, &cause)) == NULL) {
		sd_notifyf(0, "STATUS=bad configuration: %s", cause);
		fatalx("configuration: %s", cause);
	}
	/* A reload warns when the file's socket changes, not --socket's. */
	d->conf_socket = xstrdup(d->conf->socket_path);
	if (args->socket_path != NULL) {
		free(d->conf->socket_path);
		d->conf->socket_path = xstrdup(args->socket_path);
	}
	if (args->workers > 0 || args->workers_auto) {
		d->conf->workers = args->workers_auto ? 1 : args->workers;
		d->conf->workers_auto = args->workers_auto;
	}
	/*
	 * auto: from one worker up to the CPUs it may use, more for workers
	 * that wait for storage, as the descriptors allow (autotune.h).
	 */
	nofile = daemon_raise_nofile(d->conf, d->conf->workers);
	if (d->conf->workers_auto) {
		(void)config_ncpus(&cpus);
		max = autotune_limit(&cpus, nofile, d->conf->max_clients);
	}
	log_info("infeedd %s starting with %s", INFEED_VERSION, d->conf->path);
	if ((d->base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	ring_budget_init(&d->budget, d->conf->memory_budget, d->conf->path,
	    d->conf->keep_ring_ms);
	/* Memory an ended session's process holds goes when it exits. */
	ring_budget_watch(&d->budget, d->base);
	dataset_open_stop(false);	/* a daemon before this one may have set it */
	d->cat = catalogue_open(d->conf, NULL, d->conf->memory_budget);
	d->budget.used += d->cat->memory;
	/* Before the fork server: the workers inherit the choice. */
	(void)io_backend_choose(d->conf->io_backend, why, sizeof(why));
	log_info("reads in flight: %s", why);
	d->pool = pool_new(d->base, d->cat, &d->budget, d->conf->workers, max,
	    d->conf->job_timeout_ms, d->conf->image_memory_max);
	pool_set_read_ahead(d->pool, d->conf->read_ahead_steps,
	    d->conf->read_ahead_bytes);
	if (args->forker_restarts)
		pool_forker_restarts(d->pool);
	if (d->conf->workers_auto) {
		d->autotune = autotune_new(d->pool, &cpus);
		d->ev_autotune = event_new(d->base, -1, EV_PERSIST,
		    daemon_autotune_cb, d);
		if (d->ev_autotune == NULL ||
		    event_add(d->ev_autotune, &tick) == -1)
			fatalx("cannot create the autotune timer");
	}
	ph.base = d->base;
	ph.conf = d->conf;
	ph.cat = d->cat;
	ph.pool = d->pool;
	ph.budget = &d->budget;
	ph.autotune = d->autotune;
	ph.started_ms = d->started_ms;
	ph.packs = d->packs = packings_new(d->base, daemon_reload_packings,
	    d);
	d->peers = peers_new(&ph);
	if (!args->service)
		return (d);
	/* Signals first: a client that can connect may also stop us. */
	daemon_service_events(d);
	if ((d->listener = listen_open(d->base, d->conf->socket_path,
	    d->peers)) == NULL)
		fatalx("cannot listen on %s", d->conf->socket_path);
	if (d->conf->metrics_host != NULL && (d->metrics = metrics_new(d->base,
	    d->conf->metrics_host, d->conf->metrics_port, d->peers, &cause)) ==
	    NULL)
		fatalx("%s", cause);
	log_info("ready: %zu datasets, %u workers%s", d->cat->ndatasets,
	    d->conf->workers, d->conf->workers_auto ? " (auto)" : "");
	sd_notifyf(0, "READY=1\nSTATUS=serving %zu datasets with %u workers%s, "
	    "0 sessions", d->cat->ndatasets, d->conf->workers,
	    d->conf->workers_auto ? " (auto)" : "");
	return (d);
}

/* Serve until told to stop. */
void
daemon_run(struct daemon *d)
{
	event_base_dispatch(d->base);
}

/* A reload under way: its catalogue is opened on a thread. */
struct daemon_reload {
	struct daemon		*d;
	struct config		*nconf;
	struct catalogue	*ncat;
	uint64_t		 room;		/* memory_budget's, for ncat */
	pthread_t		 thread;
	bool			 joined;
	int			 wake[2];	/* the thread's "done" */
	struct event		*ev;
};

static void	daemon_reload_switch(void *);

/* The reload's thread: open the catalogue beside the served one. */
static void *
daemon_reload_main(void *arg)
{
	struct daemon_reload	*r = arg;
	char			 c = 0;

	r->ncat = catalogue_open_beside(r->nconf, r->d->cat, r->room);
	fetch_thread_end();	/* the remote opens' handles were this thread's */
	while (write(r->wake[1], &c, 1) == -1 && errno == EINTR)
		;
	return (NULL);
}

/* Wait for the reload's thread and free what it made. */
static struct catalogue *
daemon_reload_join(struct daemon_reload *r)
{
	struct catalogue	*ncat;

	if (!r->joined)
		pthread_join(r->thread, NULL);
	ncat = r->ncat;
	event_free(r->ev);
	close(r->wake[0]);
	close(r->wake[1]);
	free(r);
	return (ncat);
}

/* Tear every layer down, top first. */
void
daemon_free(struct daemon *d)
{
	metrics_free(d->metrics);	/* it reads the peers */
	if (d->ev_reload != NULL) {
		event_free(d->ev_reload);
		config_free(d->reload_conf);
	}
	cache_heads_forget();
	/*
	 * A reload's open ends before anything it may read goes: the HEADs'
	 * answers (its HEADs stop at once), the old catalogue it shares.
	 */
	if (d->reload != NULL) {
		struct config		*nconf = d->reload->nconf;
		struct catalogue	*ncat;

		dataset_open_stop(true);	/* its long loops give up */
		ncat = daemon_reload_join(d->reload);

		d->reload = NULL;
		pool_prepare_cancel(d->pool);	/* no switch: stopping */
		catalogue_disown(ncat, d->cat);	/* d->cat's to close */
		catalogue_free(ncat);
		config_free(nconf);
	}
	if (d->ev_autotune != NULL)
		event_free(d->ev_autotune);
	peers_free(d->peers);
	packings_free(d->packs);	/* after the sessions that use them */
	autotune_free(d->autotune);
	listen_free(d->listener);
	ring_budget_clear(&d->budget);
	pool_free(d->pool);
	if (d->ev_term != NULL) {
		event_free(d->ev_term);
		event_free(d->ev_int);
		event_free(d->ev_hup);
		event_free(d->ev_watchdog);
		event_free(d->ev_status);
	}
	catalogue_free(d->cat);
	event_base_free(d->base);
	config_free(d->conf);
	free(d->conf_socket);
	free(d);
}

/*
 * A reload moves the metrics endpoint to the new metrics_listen (or stops
 * or starts it); when the new address cannot be bound, the old endpoint
 * goes on and @nconf is made to say so, so the next reload tries again.
 */
static void
daemon_reload_metrics(struct daemon *d, struct config *nconf)
{
	struct metrics	*m = NULL;
	char		*cause = NULL;

	if (d->listener == NULL)
		return;		/* not a service: nothing listens */
	if ((nconf->metrics_host == NULL) == (d->conf->metrics_host == NULL) &&
	    (nconf->metrics_host == NULL ||
	    (strcmp(nconf->metrics_host, d->conf->metrics_host) == 0 &&
	    nconf->metrics_port == d->conf->metrics_port)))
		return;
	if (nconf->metrics_host != NULL && (m = metrics_new(d->base,
	    nconf->metrics_host, nconf->metrics_port, d->peers, &cause)) ==
	    NULL) {
		log_warnx("reload: metrics stay where they were: %s", cause);
		free(cause);
		free(nconf->metrics_host);
		nconf->metrics_host = d->conf->metrics_host != NULL ?
		    xstrdup(d->conf->metrics_host) : NULL;
		nconf->metrics_port = d->conf->metrics_port;
		return;
	}
	metrics_free(d->metrics);
	d->metrics = m;
	if (m == NULL)
		log_info("reload: metrics are off");
}

/* Say that a reload is refused for @cause; the running catalogue stays. */
static void
daemon_reload_refused(struct daemon *d, const char *cause)
{
	log_warnx("reload refused, the running configuration stays: %s",
	    cause);
	sd_notifyf(0, "READY=1\nSTATUS=reload refused: %s", cause);
	packings_reloaded(d->packs, NULL);
}

/* memory_budget's bytes charged now beyond the datasets and kept memory. */
static uint64_t
daemon_budget_others(const struct daemon *d)
{
	uint64_t	not_others = d->cat->memory + d->budget.kept_bytes;

	return (d->budget.used > not_others ? d->budget.used - not_others : 0);
}

/*
 * Whether reload @r's catalogue, with the rings and tables charged now,
 * is past its memory_budget (a group's store of past steps gives back
 * first): then the reload is refused, the running catalogue stays, and
 * the log and systemd's STATUS say what was over and by how much.
 */
static bool
daemon_reload_refuse_over(struct daemon_reload *r)
{
	struct daemon		*d = r->d;
	struct ring_budget	*b = &d->budget;
	struct config		*nconf = r->nconf;
	uint64_t		 others, want, limit = b->limit;
	char			 ds_s[48], others_s[48], budget_s[48];
	char			 want_s[48], over_s[48], *cause;

	ring_budget_collect(b);
	ring_budget_reap(b);
	/* Kept ring memory is a cache that a ring takes back: not counted. */
	others = daemon_budget_others(d);
	if (others + r->ncat->memory > nconf->memory_budget &&
	    b->give_back != NULL) {
		b->limit = nconf->memory_budget;
		b->give_back(b, r->ncat->memory > d->cat->memory ?
		    r->ncat->memory - d->cat->memory : 0);
		b->limit = limit;
		others = daemon_budget_others(d);
	}
	want = others + r->ncat->memory;
	if (want <= nconf->memory_budget)
		return (false);
	cause = xasprintf("the new datasets would keep %s in memory and "
	    "the sessions' rings and tables hold %s now, %s in all: over "
	    "memory_budget (%s, in %s) by %s; raise memory_budget, drop or "
	    "shrink datasets, or reload once sessions have ended",
	    ring_mem_format_bytes(r->ncat->memory, ds_s, sizeof(ds_s)),
	    ring_mem_format_bytes(others, others_s, sizeof(others_s)),
	    ring_mem_format_bytes(want, want_s, sizeof(want_s)),
	    ring_mem_format_bytes(nconf->memory_budget, budget_s,
	    sizeof(budget_s)), nconf->path != NULL ? nconf->path :
	    "the configuration", ring_mem_format_bytes(want -
	    nconf->memory_budget, over_s, sizeof(over_s)));
	daemon_reload_refused(d, cause);
	free(cause);
	pool_prepare_cancel(d->pool);
	d->reload = NULL;
	catalogue_disown(r->ncat, d->cat);	/* d->cat's are served */
	catalogue_free(daemon_reload_join(r));
	config_free(nconf);
	if (d->reload_again) {
		d->reload_again = false;
		daemon_reload_from(d, d->reload_file);
	}
	return (true);
}

/*
 * The new catalogue is open here: the fork server opens it too, beside
 * the one it forks workers from (its tar shards indexed again, from the
 * cache), while the workers serve the old; then daemon_reload_switch().
 */
static void
daemon_reload_done_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct daemon_reload	*r = arg;

	(void)fd;
	(void)ev;
	pthread_join(r->thread, NULL);
	r->joined = true;
	if (daemon_reload_refuse_over(r))
		return;
	pool_prepare(r->d->pool, r->ncat, daemon_reload_switch, r);
}

/* The new catalogue is open here and in the fork server: serve it. */
static void
daemon_reload_switch(void *arg)
{
	struct daemon_reload	*r = arg;
	struct daemon		*d = r->d;
	struct config		*nconf = r->nconf;
	struct catalogue	*ncat;
	unsigned		 kept, ended;

	ncat = daemon_reload_join(r);
	d->reload = NULL;
	cache_heads_forget();
	catalogue_disown(d->cat, ncat);
	packings_reloaded(d->packs, ncat);
	daemon_reload_metrics(d, nconf);
	peers_reload(d->peers, nconf, ncat, &kept, &ended);
	/*
	 * The datasets' memory: the old catalogue's is given back.  It was
	 * checked before the fork server opened it (a refusal here would
	 * leave the fork server its copy); rings charged since may leave the
	 * sum past the budget: new sessions then wait for room.
	 */
	d->budget.used = d->budget.used - d->cat->memory + ncat->memory;
	if (d->budget.used > nconf->memory_budget)
		log_warnx("reload: the datasets and the rings now take %llu MiB "
		    "of memory_budget's %llu MiB; new sessions wait for room "
		    "until sessions end", (unsigned long long)(d->budget.used >>
		    20), (unsigned long long)(nconf->memory_budget >> 20));
	catalogue_free(d->cat);
	config_free(d->conf);
	d->conf = nconf;
	d->cat = ncat;
	d->budget.limit = nconf->memory_budget;
	d->budget.source = nconf->path;
	d->budget.keep_ms = nconf->keep_ring_ms;
	pool_reload(d->pool, ncat, nconf->job_timeout_ms,
	    nconf->image_memory_max);
	pool_set_read_ahead(d->pool, nconf->read_ahead_steps,
	    nconf->read_ahead_bytes);
	log_info("reloaded: %zu datasets; %u sessions kept, %u ended",
	    ncat->ndatasets, kept, ended);
	sd_notifyf(0, "READY=1\nSTATUS=reloaded: %zu datasets",
	    ncat->ndatasets);
	if (d->reload_again) {
		d->reload_again = false;
		daemon_reload_from(d, d->reload_file);
	}
}

/*
 * Open @nconf's catalogue on a thread (a token dataset's scan and packing
 * take seconds for billions of tokens) while the loop serves the old one;
 * daemon_reload_done_cb() serves it when it is open.
 */
static void
daemon_reload_open(struct daemon *d, struct config *nconf)
{
	struct daemon_reload	*r;
	uint64_t		 others;

	r = xcalloc(1, sizeof(*r));
	r->d = d;
	r->nconf = nconf;
	others = d->budget.used - d->cat->memory;
	r->room = nconf->memory_budget > others ? nconf->memory_budget -
	    others : 0;
	if (pipe2(r->wake, O_NONBLOCK | O_CLOEXEC) == -1)
		fatal("pipe2");
	if ((r->ev = event_new(d->base, r->wake[0], EV_READ,
	    daemon_reload_done_cb, r)) == NULL || event_add(r->ev, NULL) == -1)
		fatalx("cannot watch the reload's thread");
	if ((errno = pthread_create(&r->thread, NULL, daemon_reload_main,
	    r)) != 0)
		fatal("cannot start the reload's thread");
	d->reload = r;
}

/* The reload's servers answered (or gave up): open its catalogue. */
static void
daemon_reload_heads_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct daemon	*d = arg;
	struct config	*nconf = d->reload_conf;

	(void)fd;
	(void)ev;
	event_free(d->ev_reload);
	d->ev_reload = NULL;
	d->reload_conf = NULL;
	cache_heads_finish();
	daemon_reload_open(d, nconf);
}

/*
 * Start the HEADs of @nconf's remote datasets in a thread, to be waited
 * for by the loop.  Return: whether they are under way.
 */
static bool
daemon_reload_heads(struct daemon *d, struct config *nconf)
{
	char	**urls;
	size_t	  i, n = 0;
	int	  fd;

	urls = xcalloc(2 * nconf->ndatasets + 1, sizeof(*urls));
	for (i = 0; i < nconf->ndatasets; i++)
		n += dataset_remote_urls(&nconf->datasets[i], urls + n);
	fd = cache_heads_start(urls, n);
	free(urls);
	if (fd == -1)
		return (false);
	d->ev_reload = event_new(d->base, fd, EV_READ, daemon_reload_heads_cb,
	    d);
	if (d->ev_reload == NULL || event_add(d->ev_reload, NULL) != 0)
		fatalx("cannot wait for a reload's remote servers");
	d->reload_conf = nconf;
	log_info("reload: asking the servers of %zu remote files first", n);
	return (true);
}

/* Reload the configuration file. */
void
daemon_reload(struct daemon *d)
{
	daemon_reload_from(d, true);
}

/*
 * Reload the configuration, the file's (@file) or the running one's for
 * the packings; the old one stays if the new one is bad.  The remote
 * datasets' servers are asked first, then the datasets open, each on a
 * thread while the loop serves the old catalogue; a reload asked for
 * meanwhile follows once this one is done (the file's if any was).
 */
static void
daemon_reload_from(struct daemon *d, bool file)
{
	struct config		*nconf;
	char			*cause = NULL;

	if (d->reload != NULL || d->reload_conf != NULL) {
		log_info("reload: the last one is still under way; this one "
		    "follows it");
		d->reload_file = (d->reload_again && d->reload_file) || file;
		d->reload_again = true;
		return;
	}
	sd_notify(0, "RELOADING=1");
	if (!file) {
		log_info("reloading the running configuration for the "
		    "packings trainers asked for");
		nconf = config_copy(d->conf);
	} else
		log_info("reloading %s", d->conf->path);
	if (file && (nconf = config_load(d->conf->path, &cause)) == NULL) {
		daemon_reload_refused(d, cause);
		free(cause);
		return;
	}
	/* The packings that trainers asked for, made again (packings.h). */
	packings_sections(d->packs, nconf);
	/* The socket and pool size need a restart; keep what runs. */
	if (strcmp(nconf->socket_path, d->conf_socket) != 0)
		log_warnx("reload: the socket path (now %s) changes only at "
		    "restart; infeedd still listens on %s",
		    nconf->socket_path, d->conf->socket_path);
	free(nconf->socket_path);
	nconf->socket_path = xstrdup(d->conf->socket_path);
	nconf->workers = d->conf->workers;
	nconf->workers_auto = d->conf->workers_auto;
	/* A remote dataset's open asks its server: first, in a thread. */
	if (!daemon_reload_heads(d, nconf))
		daemon_reload_open(d, nconf);
}
