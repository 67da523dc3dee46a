/* SPDX-License-Identifier: MIT */
/*
 * The daemon: the top layer, which makes and owns every other one.
 * Start-up order: read the configuration, open the catalogue, start the
 * worker pool (its fork server, forked now, holds the datasets' mappings
 * and nothing of any client, and forks every worker), then listen and
 * tell systemd we are ready.  SIGTERM or SIGINT
 * stops cleanly; SIGHUP reloads.
 *
 * The layers, each calling only those below it (tests/check-layers reads
 * this list and fails the build's tests when an #include goes up or round,
 * or round the files of one folder; a layer may be several files that
 * share a private header, as pool is pool.c and the files pool-private.h
 * lists):
 *
 * Layers: main -> daemon -> metrics -> listen -> peers -> peer, stats-frame
 *   -> stats, attach-check
 *   -> autotune -> session -> group -> consumer -> producer -> group-store
 *   -> session-check -> packings -> pool -> forker -> worker
 *   -> transport -> ring, transform
 *   -> ring-memory -> catalogue -> config -> dataset (dataset/: the front,
 *   the readers and what they share), image (image/: decoders and image
 *   transforms), io-batch (reads in flight) -> remote (remote/: byte ranges
 *   over HTTP and the host's cache) -> log, xmalloc, paths, procmem, errcode
 *
 * A session is one reader (consumer) of one stream (producer): its own,
 * or its shared group's, which several read.  Some layers stay apart from
 * modules below them too (tests/check-layers, through any header):
 *
 * Apart: consumer: pool, sampler (a reader takes steps, it never fills
 *   them); producer: session, group, consumer (a stream knows no reader)
 *
 * common/ (the sampler, dtypes, limits, numbers, the monotonic clock) and
 * proto/ lie under them all, but the protocol's messages end at peer and
 * stats-frame: below them, requests, answers and error codes are plain C,
 * and no file includes a protobuf header (proto/wire.h, the codec, is
 * peer.c's, the generated messages stats-frame.c's too; the layers below
 * use proto/wire-frame.h, framing and descriptors).
 */
#ifndef INFEED_DAEMON_H
#define INFEED_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "autotune.h"
#include "catalogue.h"
#include "config.h"
#include "listen.h"
#include "metrics.h"
#include "peers.h"
#include "pool.h"
#include "ring.h"

struct event;
struct event_base;

struct daemon {
	struct event_base	*base;
	struct config		*conf;
	char			*conf_socket;	/* the file's socket at start */
	struct catalogue	*cat;
	struct pool		*pool;
	struct ring_budget	 budget;
	struct peers		*peers;
	struct listener		*listener;	/* NULL unless a service */
	struct metrics		*metrics;	/* NULL without metrics_listen */
	struct autotune		*autotune;	/* NULL unless workers = auto */
	struct event		*ev_autotune;
	uint64_t		 started_ms;
	uint64_t		 status_ms;	/* last STATUS= line */
	uint64_t		 status_rows;
	uint64_t		 status_wait_us;	/* data wait at the last STATUS= */
	uint64_t		 status_active_us;
	struct event		*ev_term;
	struct event		*ev_int;
	struct event		*ev_hup;
	struct event		*ev_watchdog;
	struct event		*ev_status;
	/*
	 * A reload first asks its remote datasets' servers (a HEAD each, in a
	 * thread: cache_heads_start(); its configuration and the event of the
	 * answers), then opens the new catalogue on a thread (its datasets'
	 * files are read, token datasets packed) and finishes on the loop.
	 */
	struct config		*reload_conf;	/* NULL: no HEADs under way */
	struct event		*ev_reload;
	struct daemon_reload	*reload;	/* NULL: no open under way */
	bool			 reload_again;	/* SIGHUP meanwhile */
	bool			 reload_file;	/* ... it reads the file */
	struct packings		*packs;		/* made for a seq_len */
};

struct daemon_args {
	const char	*config_path;
	const char	*socket_path;	/* NULL: the configuration's */
	unsigned	 workers;	/* 0: the configuration's */
	bool		 service;	/* listen, signals, systemd notices */
	bool		 workers_auto;	/* --workers auto: the pool sizes itself */
	bool		 forker_restarts; /* infeedd's binary: a dead fork
					   server is started from it again */
};

/**
 * daemon_start() - make the daemon as @args say.  Start-up failures are
 * fatal and say why.  Without @args->service nothing listens (tests and
 * fuzz targets hand connections to d->peers themselves).
 */
struct daemon	*daemon_start(const struct daemon_args *args);

/**
 * daemon_run() - serve until SIGTERM or SIGINT.
 */
void		 daemon_run(struct daemon *d);

/**
 * daemon_free() - close every client, stop the workers, free everything.
 */
void		 daemon_free(struct daemon *d);

/**
 * daemon_reload() - reread the configuration; the old one stays if the new
 * one is bad or its datasets, with the rings held then, would pass its
 * memory_budget (the log and STATUS= say by how much).  Its remote datasets' servers are asked first in a thread,
 * so the new catalogue is in place once they answered (or their tries
 * ran out), and the event loop never waits on them.
 */
void		 daemon_reload(struct daemon *d);

#endif /* INFEED_DAEMON_H */
