/* SPDX-License-Identifier: MIT */
/*
 * The daemon object's life beyond start-up: the clock every module reads
 * and the reload that SIGHUP asks for.  Kept out of main.c so that the
 * tests and fuzz targets, which build their own struct daemon, link it
 * from the core library like infeedd does.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "daemon.h"

/* Milliseconds on the monotonic clock. */
uint64_t
daemon_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

/* Reload the configuration; the old one stays if the new one is bad. */
void
daemon_reload(struct daemon *d)
{
	struct config	*nconf;
	struct catalogue *ncat;
	struct peer	*p, *next;
	char		*cause = NULL;
	unsigned	 kept = 0, ended = 0, n;

	sd_notify(0, "RELOADING=1");
	log_info("reloading %s", d->conf->path);
	if ((nconf = config_load(d->conf->path, &cause)) == NULL) {
		log_warnx("reload refused, the running configuration stays: "
		    "%s", cause);
		sd_notifyf(0, "READY=1\nSTATUS=reload refused: %s", cause);
		free(cause);
		return;
	}
	/* The socket and pool size need a restart; keep what runs. */
	if (strcmp(nconf->socket_path, d->conf->socket_path) != 0)
		log_warnx("reload: the socket path changes only at restart");
	free(nconf->socket_path);
	nconf->socket_path = xstrdup(d->conf->socket_path);
	nconf->workers = d->conf->workers;
	ncat = catalogue_open(nconf, d->cat);
	for (p = TAILQ_FIRST(&d->peers); p != NULL; p = next) {
		next = TAILQ_NEXT(p, entry);
		if (p->session == NULL)
			continue;
		if (session_reload(p->session, ncat) == 0) {
			kept++;
			continue;
		}
		/* Answer what waits; later requests get the same reason. */
		free(p->detached_why);
		p->detached_why = xasprintf("the operator reloaded infeedd and "
		    "dataset '%s' changed or was removed; this session ended, "
		    "attach again", session_dataset_name(p->session));
		for (n = session_pending_next(p->session); n > 0; n--)
			peer_send_error(p, INFEED__ERROR_CODE__ERROR_NOT_FOUND,
			    "%s", p->detached_why);
		session_free(p->session);
		p->session = NULL;
		ended++;
	}
	catalogue_free(d->cat);
	config_free(d->conf);
	d->conf = nconf;
	d->cat = ncat;
	pool_reload(d->pool);
	log_info("reloaded: %zu datasets; %u sessions kept, %u ended",
	    ncat->ndatasets, kept, ended);
	sd_notifyf(0, "READY=1\nSTATUS=reloaded: %zu datasets",
	    ncat->ndatasets);
}
