/* SPDX-License-Identifier: MIT */
/*
 * infeedd: serve device steps of training data to trainers.
 *
 * Start-up order: read the configuration, open the catalogue, fork the
 * worker pool (so workers inherit the datasets' mappings and nothing of any
 * client), then listen and tell systemd we are ready.  SIGTERM or SIGINT
 * stops cleanly: STOPPING=1, close every client, stop the workers, remove
 * the socket file.
 */

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "daemon.h"
#include "version.h"

/* SIGHUP: reload. */
static void
main_hup_cb(evutil_socket_t sig, short ev, void *arg)
{
	(void)sig;
	(void)ev;
	daemon_reload(arg);
}

/* Tell systemd we are alive. */
static void
main_watchdog_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	(void)arg;
	sd_notify(0, "WATCHDOG=1");
}

/* Every few seconds: a STATUS= line with sessions and throughput. */
static void
main_status_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct daemon	*d = arg;
	struct peer	*p;
	uint64_t	 rows = 0, now = daemon_now_ms();
	unsigned	 sessions = 0;
	double		 rate = 0;

	(void)fd;
	(void)ev;
	TAILQ_FOREACH(p, &d->peers, entry) {
		if (p->session == NULL)
			continue;
		sessions++;
		rows += session_rows_delivered(p->session);
	}
	/* Rows of sessions that ended in between are not counted twice. */
	if (now > d->status_ms && rows >= d->status_rows)
		rate = (double)(rows - d->status_rows) * 1000.0 /
		    (double)(now - d->status_ms);
	d->status_rows = rows;
	d->status_ms = now;
	sd_notifyf(0, "STATUS=%u sessions, %u clients, %.0f items/s",
	    sessions, d->npeers, rate);
}

/* SIGTERM or SIGINT: leave the loop. */
static void
main_stop_cb(evutil_socket_t sig, short ev, void *arg)
{
	struct daemon	*d = arg;

	(void)ev;
	log_info("%s received, shutting down", strsignal(sig));
	sd_notify(0, "STOPPING=1");
	event_base_loopexit(d->base, NULL);
}

/* Print how to run us. */
static void
main_usage(FILE *fp)
{
	fprintf(fp,
	    "usage: infeedd [--config FILE] [--socket PATH] [--workers N] "
	    "[--verbose]\n"
	    "\n"
	    "Serve device steps of training data to trainers over a Unix "
	    "socket.\n"
	    "\n"
	    "  -c, --config FILE   catalogue and settings (default %s)\n"
	    "  -s, --socket PATH   listen here (default: [infeedd] socket, "
	    "or %s)\n"
	    "  -w, --workers N     worker processes (default: [infeedd] "
	    "workers, or one per CPU)\n"
	    "  -v, --verbose       log debug messages too\n"
	    "  -V, --version       print the version and exit\n"
	    "  -h, --help          print this help and exit\n",
	    INFEEDD_DEFAULT_CONFIG, INFEEDD_DEFAULT_SOCKET);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "workers", required_argument, NULL, 'w' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct daemon	 d;
	struct event	*ev_term, *ev_int, *ev_hup, *ev_watchdog, *ev_status;
	struct timeval	 tv;
	uint64_t	 watchdog_usec = 0;
	const char	*config_path = INFEEDD_DEFAULT_CONFIG;
	const char	*socket_path = NULL;
	char		*cause = NULL, *end;
	long		 workers = -1;
	int		 ch, verbose = 0;

	while ((ch = getopt_long(argc, argv, "c:s:w:vVh", longopts, NULL))
	    != -1) {
		switch (ch) {
		case 'c':
			config_path = optarg;
			break;
		case 's':
			socket_path = optarg;
			break;
		case 'w':
			errno = 0;
			workers = strtol(optarg, &end, 10);
			if (errno || *end != '\0' || workers < 1 ||
			    workers > INFEED_MAX_WORKERS) {
				fprintf(stderr, "infeedd: --workers %s: expected "
				    "a number from 1 to %d\n", optarg,
				    INFEED_MAX_WORKERS);
				return (2);
			}
			break;
		case 'v':
			verbose = 1;
			break;
		case 'V':
			printf("infeedd %s\n", INFEED_VERSION);
			return (0);
		case 'h':
			main_usage(stdout);
			return (0);
		default:
			main_usage(stderr);
			return (2);
		}
	}
	if (optind != argc) {
		fprintf(stderr, "infeedd: unexpected argument '%s'\n",
		    argv[optind]);
		main_usage(stderr);
		return (2);
	}

	log_init("infeedd", verbose);
	signal(SIGPIPE, SIG_IGN);
	memset(&d, 0, sizeof(d));
	d.listen_fd = -1;
	TAILQ_INIT(&d.peers);
	d.started_ms = daemon_now_ms();

	if ((d.conf = config_load(config_path, &cause)) == NULL) {
		sd_notifyf(0, "STATUS=bad configuration: %s", cause);
		fatalx("configuration: %s", cause);
	}
	if (socket_path != NULL) {
		free(d.conf->socket_path);
		d.conf->socket_path = xstrdup(socket_path);
	}
	if (workers > 0)
		d.conf->workers = (unsigned)workers;
	log_info("infeedd %s starting with %s", INFEED_VERSION,
	    d.conf->path);

	if ((d.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	d.cat = catalogue_open(d.conf, NULL);
	d.pool = pool_new(&d, d.conf->workers);
	if (listen_open(&d, d.conf->socket_path) == -1)
		fatalx("cannot listen on %s", d.conf->socket_path);
	listen_start(&d);

	ev_term = evsignal_new(d.base, SIGTERM, main_stop_cb, &d);
	ev_int = evsignal_new(d.base, SIGINT, main_stop_cb, &d);
	ev_hup = evsignal_new(d.base, SIGHUP, main_hup_cb, &d);
	if (ev_term == NULL || ev_int == NULL || ev_hup == NULL ||
	    event_add(ev_term, NULL) || event_add(ev_int, NULL) ||
	    event_add(ev_hup, NULL))
		fatalx("cannot handle signals");
	ev_watchdog = event_new(d.base, -1, EV_PERSIST, main_watchdog_cb, &d);
	ev_status = event_new(d.base, -1, EV_PERSIST, main_status_cb, &d);
	if (ev_watchdog == NULL || ev_status == NULL)
		fatalx("cannot create timers");
	if (sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0) {
		tv.tv_sec = (time_t)(watchdog_usec / 2 / 1000000);
		tv.tv_usec = (suseconds_t)(watchdog_usec / 2 % 1000000);
		event_add(ev_watchdog, &tv);
		log_info("watchdog: pinging systemd every %llu ms",
		    (unsigned long long)(watchdog_usec / 2000));
	}
	tv.tv_sec = 5;
	tv.tv_usec = 0;
	event_add(ev_status, &tv);
	d.status_ms = daemon_now_ms();

	log_info("ready: %zu datasets, %u workers", d.cat->ndatasets,
	    d.conf->workers);
	sd_notifyf(0, "READY=1\nSTATUS=serving %zu datasets with %u workers, "
	    "0 sessions", d.cat->ndatasets, d.conf->workers);
	event_base_dispatch(d.base);

	peer_free_all(&d);
	listen_close(&d);
	pool_free(d.pool);
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_hup);
	event_free(ev_watchdog);
	event_free(ev_status);
	catalogue_free(d.cat);
	event_base_free(d.base);
	config_free(d.conf);
	log_info("stopped");
	return (0);
}
