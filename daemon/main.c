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

/* Milliseconds on the monotonic clock. */
uint64_t
daemon_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
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
	struct event	*ev_term, *ev_int;
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
			    workers > 256) {
				fprintf(stderr, "infeedd: --workers %s: expected "
				    "a number from 1 to 256\n", optarg);
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
	d.cat = catalogue_open(d.conf);
	d.pool = pool_new(&d, d.conf->workers);
	if (listen_open(&d, d.conf->socket_path) == -1)
		fatalx("cannot listen on %s", d.conf->socket_path);
	listen_start(&d);

	ev_term = evsignal_new(d.base, SIGTERM, main_stop_cb, &d);
	ev_int = evsignal_new(d.base, SIGINT, main_stop_cb, &d);
	if (ev_term == NULL || ev_int == NULL || event_add(ev_term, NULL) ||
	    event_add(ev_int, NULL))
		fatalx("cannot handle signals");

	log_info("ready: %zu datasets, %u workers", d.cat->ndatasets,
	    d.conf->workers);
	sd_notifyf(0, "READY=1\nSTATUS=serving %zu datasets with %u workers",
	    d.cat->ndatasets, d.conf->workers);
	event_base_dispatch(d.base);

	peer_free_all(&d);
	listen_close(&d);
	pool_free(d.pool);
	event_free(ev_term);
	event_free(ev_int);
	catalogue_free(d.cat);
	event_base_free(d.base);
	config_free(d.conf);
	log_info("stopped");
	return (0);
}
