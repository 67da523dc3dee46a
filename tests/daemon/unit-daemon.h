/* SPDX-License-Identifier: MIT */
/*
 * What the pool and session unit tests share: a dataset made in the test,
 * "flaky", 20 samples of three bytes (sample i is three bytes of i, label
 * i % 4), whose index FLAKY_BAD cannot be read, whose index FLAKY_CRASH
 * crashes the worker reading it with SIGSEGV, whose index FLAKY_EXIT
 * makes it exit with status 1, as fatal() does, and whose index
 * FLAKY_MAPPED, when unit_flaky_map names a file (1 MiB when the pool
 * starts), takes 20 ms and copies from a mapping of it (cut it, and the
 * copy is a SIGBUS); and small helpers.
 */
#ifndef INFEED_TEST_UNIT_DAEMON_H
#define INFEED_TEST_UNIT_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "catalogue.h"
#include "ring.h"
#include "runner.h"

#define FLAKY_BAD	9
#define FLAKY_CRASH	13
#define FLAKY_EXIT	17
#define FLAKY_MAPPED	18
#define FLAKY_MAP_BYTES	(1u << 20)
#define FLAKY_PATH	"/srv/data/flaky.bin"

struct config;
struct peers;
struct pool;

/* FLAKY_MAPPED's file, set before unit_daemon_start(); "": none. */
extern char			 unit_flaky_map[4096];

/* The daemon's layers below the session, made by unit_daemon_start(). */
extern struct config		*conf;
extern struct catalogue		*cat;
extern struct event_base	*base;
extern struct pool		*pool;
extern struct ring_budget	 budget;

/*
 * Load the configuration at @path (it must open @ndatasets datasets), add
 * "flaky", and start a pool of @workers (with the configuration's
 * job_timeout and image_memory_max) on a fresh event base whose loop a
 * 5 ms tick keeps turning.
 */
void		unit_daemon_start(const char *path, size_t ndatasets,
		    unsigned workers);

/* Stop the pool and free what unit_daemon_start() made. */
void		unit_daemon_stop(void);

/* Peers (peer.h) over what unit_daemon_start() made, a fixed pool's. */
struct peers	*unit_peers_new(void);

/* snprintf that fails the test rather than cut. */
void		unit_fmt(char *buf, size_t len, const char *f, ...)
		    __attribute__((format(printf, 3, 4)));

/* Turn the loop until @pred(@arg) holds; false after @ms. */
bool		unit_run_until(bool (*pred)(const void *), const void *arg,
		    uint64_t ms);

/* Turn the loop for @ms, so that late or extra events come in. */
void		unit_run_for(uint64_t ms);

/* A timer callback that does nothing: it ends each round of the loop. */
void		unit_tick_cb(evutil_socket_t fd, short ev, void *arg);

#endif /* INFEED_TEST_UNIT_DAEMON_H */
