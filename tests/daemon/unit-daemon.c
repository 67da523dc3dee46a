/* SPDX-License-Identifier: MIT */
/*
 * What the pool and session unit tests share: see unit-daemon.h.
 */

#include <sys/mman.h>

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "config.h"
#include "peers.h"
#include "pool.h"
#include "unit-daemon.h"

struct config		*conf;
struct catalogue	*cat;
struct event_base	*base;
struct pool		*pool;
struct ring_budget	 budget;
char			 unit_flaky_map[4096];
static struct event	*tick;

/*
 * Under AddressSanitizer, leave a worker's SIGSEGV or SIGBUS (the "flaky"
 * reader crashes on purpose) to kill it as it would in production, rather
 * than report it as a finding and exit 1; the pool's handling of the
 * crash is the test.  Without the sanitizer nothing calls this.
 */
const char	*__asan_default_options(void);
const char *
__asan_default_options(void)
{
	return ("handle_sigbus=0:handle_segv=0");
}

/* snprintf that fails the test rather than cut. */
void
unit_fmt(char *buf, size_t len, const char *f, ...)
{
	va_list	ap;
	int	n;

	va_start(ap, f);
	n = vsnprintf(buf, len, f, ap);
	va_end(ap);
	ck_assert(n >= 0 && (size_t)n < len);
}

/* Turn the loop until @pred(@arg) holds; false after @ms. */
bool
unit_run_until(bool (*pred)(const void *), const void *arg, uint64_t ms)
{
	uint64_t	deadline = now_ms() + ms;

	while (!pred(arg)) {
		if (now_ms() > deadline)
			return (false);
		event_base_loop(base, EVLOOP_ONCE);
	}
	return (true);
}

/* Turn the loop for @ms, so that late or extra events come in. */
void
unit_run_for(uint64_t ms)
{
	uint64_t	end = now_ms() + ms;

	while (now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
}

/* The tick: ends each round of the loop, so deadlines are checked. */
void
unit_tick_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	(void)arg;
}

/*
 * FLAKY_MAPPED: 20 ms, then three bytes from the middle of a mapping of
 * unit_flaky_map (made the first time, in the worker).
 */
static int
flaky_mapped(void *dst)
{
	static uint8_t	*map;
	int		 fd;

	if (map == NULL) {
		if ((fd = open(unit_flaky_map, O_RDONLY | O_CLOEXEC)) == -1)
			return (-1);
		map = mmap(NULL, FLAKY_MAP_BYTES, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (map == MAP_FAILED) {
			map = NULL;
			return (-1);
		}
	}
	usleep(20000);
	memcpy(dst, map + FLAKY_MAP_BYTES / 2, 3);
	return (0);
}

/* Sample i is three bytes of i; FLAKY_BAD fails, FLAKY_CRASH crashes. */
static int
flaky_read(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label, bool stream)
{
	(void)ds;
	(void)stream;
	if (index == FLAKY_MAPPED && unit_flaky_map[0] != '\0') {
		*label = (int64_t)(index % 4);
		return (flaky_mapped(dst));
	}
	if (index == FLAKY_BAD)
		return (-1);
	if (index == FLAKY_CRASH)
		raise(SIGSEGV);
	if (index == FLAKY_EXIT)
		_exit(1);
	memset(dst, (int)index, 3);
	*label = (int64_t)(index % 4);
	return (0);
}

/* Nothing to close. */
static void
flaky_close(struct dataset *ds)
{
	(void)ds;
}

static const struct dataset_ops flaky_ops = {
	.type = "flaky",
	.keys = (const char *const []){ NULL },
	.read = flaky_read,
	.close = flaky_close,
};

/* Add "flaky" to the catalogue. */
static void
unit_add_flaky(struct catalogue *c)
{
	struct dataset	*ds;
	size_t		 n = c->ndatasets;

	ck_assert_ptr_nonnull(ds = calloc(1, sizeof(*ds)));
	ck_assert_ptr_nonnull(ds->name = strdup("flaky"));
	ck_assert_ptr_nonnull(ds->data_path = strdup(FLAKY_PATH));
	ds->type = "flaky";
	ds->samples = 20;
	ds->ndim = 1;
	ds->shape[0] = 3;
	ds->dtype = INFEED_DTYPE_UINT8;
	ds->label_dtype = INFEED_DTYPE_INT64;
	ds->classes = 4;
	ds->sample_bytes = 3;
	ds->ops = &flaky_ops;
	c->datasets = realloc(c->datasets, (n + 1) *
	    sizeof(*c->datasets));
	c->entries = realloc(c->entries, (n + 1) * sizeof(*c->entries));
	ck_assert(c->datasets != NULL && c->entries != NULL);
	c->datasets[n] = ds;
	memset(&c->entries[n], 0, sizeof(c->entries[n]));
	c->ndatasets = n + 1;
}

/* Config, catalogue (with "flaky"), budget, event base and pool. */
/* Run the loop until every worker has said READY (within 15 s). */
static void
unit_wait_ready(void)
{
	struct pool_worker_info	info;
	uint64_t		deadline = now_ms() + 15000;
	unsigned		i, starting;

	do {
		event_base_loop(base, EVLOOP_ONCE);
		for (i = starting = 0; i < pool_size(pool); i++) {
			pool_worker_info(pool, i, &info);
			starting += strcmp(info.state, "starting") == 0;
		}
	} while (starting > 0 && now_ms() < deadline);
	ck_assert_msg(starting == 0, "%u workers never said READY", starting);
}

void
unit_daemon_start(const char *path, size_t ndatasets, unsigned workers)
{
	struct timeval	 tv = { 0, 5000 };
	char		*cause = NULL;

	conf = config_load(path, &cause);
	ck_assert_msg(conf != NULL, "config: %s", cause);
	cat = catalogue_open(conf, NULL, UINT64_MAX);
	ck_assert_uint_eq(cat->ndatasets, ndatasets);
	unit_add_flaky(cat);
	ring_budget_init(&budget, conf->memory_budget, conf->path, 0);
	ck_assert_ptr_nonnull(base = event_base_new());
	ck_assert_ptr_nonnull(tick = event_new(base, -1, EV_PERSIST,
	    unit_tick_cb, NULL));
	ck_assert_int_eq(event_add(tick, &tv), 0);
	pool = pool_new(base, cat, &budget, workers, 0, conf->job_timeout_ms,
	    conf->image_memory_max);
	unit_wait_ready();
}

/* Peers over what unit_daemon_start() made, a fixed pool's. */
struct peers *
unit_peers_new(void)
{
	struct peers_host	ph;

	memset(&ph, 0, sizeof(ph));
	ph.base = base;
	ph.conf = conf;
	ph.cat = cat;
	ph.pool = pool;
	ph.budget = &budget;
	ph.started_ms = now_ms();
	return (peers_new(&ph));
}

/* Free it all, the pool first. */
void
unit_daemon_stop(void)
{
	ring_budget_clear(&budget);
	pool_free(pool);
	pool = NULL;
	event_free(tick);
	event_base_free(base);
	catalogue_free(cat);
	config_free(conf);
}

