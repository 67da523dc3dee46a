/* SPDX-License-Identifier: MIT */
/*
 * The statistics' counters, each declared once: X-macro tables from which
 * the daemon fills the Stats frame (daemon/stats-frame.c) and renders
 * /metrics (daemon/metrics.c), libinfeed converts the frame into its
 * public structs (client/libinfeed-stats.c) and infeedctl status prints
 * them (client/infeedctl.c).  A counter's name is its field in
 * infeed.proto's message and in infeed.h's struct, which stay as they
 * are (their field numbers and order are the ABI); libinfeed-stats.c and
 * stats-frame.c check each entry's type against both at compile time.
 *
 * A new counter of these tables is its proto field, its infeed.h field,
 * one line here and the code that counts it.
 */
#ifndef INFEED_STATS_SCHEMA_H
#define INFEED_STATS_SCHEMA_H

/*
 * The daemon's memory and rings, uint64_t each, in the Stats message,
 * the daemon's struct stats and infeed.h's struct infeed_stats:
 * X(name, metric, type, help), where metric is the /metrics family (one
 * series, no label) and type its Prometheus type.
 */
#define INFEED_MEMORY_STATS(X)						\
	X(memory_used, "infeed_memory_used_bytes", "gauge",		\
	    "Shared memory in the step rings of sessions.")		\
	X(memory_kept, "infeed_memory_kept_bytes", "gauge",		\
	    "Ring memory of ended sessions kept warm for the next "	\
	    "(keep_ring_memory).")					\
	X(memory_held, "infeed_memory_held_bytes", "gauge",		\
	    "Ring memory of ended sessions whose client processes still " \
	    "hold steps, charged to the budget until they exit.")	\
	X(rings_reused, "infeed_rings_reused_total", "counter",		\
	    "Rings made on kept memory.")				\
	X(rings_made, "infeed_rings_made_total", "counter",		\
	    "Rings made on new memory.")				\
	X(memory_private, "infeed_memory_private_bytes", "gauge",	\
	    "infeedd's own memory beyond rings and datasets: resident "	\
	    "anonymous memory and page tables of the main process and its " \
	    "workers.")							\
	X(memory_budget, "infeed_memory_budget_bytes", "gauge",		\
	    "The configured memory_budget for rings.")

/*
 * The host's cache of remote datasets (daemon/remote/cache.c), uint64_t
 * each, as INFEED_MEMORY_STATS: X(name, metric, type, help); cache_stats()
 * counts them, since infeedd started, for every process of the host.
 */
#define INFEED_CACHE_STATS(X)						\
	X(cache_bytes, "infeed_cache_bytes", "gauge",			\
	    "Bytes of remote datasets' blocks in cache_dir.")		\
	X(cache_max, "infeed_cache_max_bytes", "gauge",			\
	    "The configured cache_max (0: no cache_dir).")		\
	X(cache_hits, "infeed_cache_hits_total", "counter",		\
	    "Blocks of remote datasets read from the cache.")		\
	X(cache_misses, "infeed_cache_misses_total", "counter",		\
	    "Blocks of remote datasets downloaded, missing from the cache.") \
	X(cache_bytes_downloaded, "infeed_cache_downloaded_bytes_total", \
	    "counter", "Bytes of remote datasets downloaded.")		\
	X(cache_evictions, "infeed_cache_evictions_total", "counter",	\
	    "Blocks evicted from the cache to make room, the one needed " \
	    "furthest ahead by the sessions' orders first.")		\
	X(cache_fetched_ahead, "infeed_cache_fetched_ahead_total",	\
	    "counter", "Of the blocks downloaded, those fetched before " \
	    "their reads (read_ahead).")					\
	X(cache_waited, "infeed_cache_waited_total", "counter",		\
	    "Blocks a read found missing and waited for (downloaded by " \
	    "it, or by another process of the host).")

/*
 * A session's cumulative counters, which outlive it (the daemon folds an
 * ended session's into its dataset's history) and are /metrics series
 * per session and per dataset of ended ones:
 * X(name, report, scale, metric, help, lib), where report is the uint64_t
 * field of the daemon's struct session_report (and struct stats_ended)
 * that counts it, divided by scale for the Stats frame and /metrics (1e6:
 * microseconds counted, seconds sent); lib is LIB where infeed.h's
 * struct infeed_session_stats has the field, else NOLIB.
 */
#define INFEED_SESSION_STATS(X)						\
	X(steps_delivered, steps, 1, "infeed_steps_delivered_total",	\
	    "Device steps delivered to the trainer.", LIB)		\
	X(rows_delivered, rows, 1, "infeed_items_delivered_total",	\
	    "Samples delivered to the trainer.", NOLIB)			\
	X(bytes_read, bytes_read, 1, "infeed_read_bytes_total",		\
	    "Bytes the workers read from the dataset for the session (sum " \
	    "by dataset for a dataset's).", NOLIB)			\
	X(samples_replaced, samples_replaced, 1,			\
	    "infeed_samples_replaced_total", "Bad samples (images that " \
	    "cannot be decoded) replaced by other samples of the dataset, " \
	    "with bad_samples = replace.", LIB)				\
	X(data_wait_s, data_wait_us, 1e6, "infeed_data_wait_seconds_total", \
	    "Seconds the trainer waited in Next with no step ready: "	\
	    "divided by infeed_active_seconds_total, the share of time it " \
	    "was input-bound.", LIB)					\
	X(active_s, active_us, 1e6, "infeed_active_seconds_total",	\
	    "Seconds since the session's first Next.", LIB)

/* For a table's lib column: the code for infeed.h's fields only. */
#define INFEED_STATS_LIB(code)		code
#define INFEED_STATS_NOLIB(code)

/*
 * A worker's counters: X(name, type, metric, help, column, width), where
 * metric is the /metrics counter family (one series per worker, labelled
 * worker="i"), and column and width its heading in infeedctl status's
 * table of workers.  Those of INFEED_WORKER_STATS_DAEMON are in the Stats
 * frame and /metrics only (infeed.h's struct has no room for them); the
 * daemon's struct pool_worker_info holds both lists, in this order.
 */
#define INFEED_WORKER_STATS_DAEMON(X)					\
	X(busy_s, double, "infeed_worker_busy_seconds_total",		\
	    "Seconds the worker spent reading and writing rows.", "", 0)

#define INFEED_WORKER_STATS(X)						\
	X(rows_done, uint64_t, "infeed_worker_rows_total",		\
	    "Rows the worker wrote into rings.", "ROWS", 12)		\
	X(restarts, uint32_t, "infeed_worker_restarts_total",		\
	    "Times the worker process died and was started again.",	\
	    "RESTARTS", 8)						\
	X(stuck, uint32_t, "infeed_worker_stuck_total",			\
	    "Times the worker was killed for missing job_timeout.",	\
	    "STUCK", 6)							\
	X(taken_over, uint32_t, "infeed_worker_taken_over_total",	\
	    "Jobs another worker took over from the worker: it began no " \
	    "row and used no CPU for a second.", "TAKEN-OVER", 10)

/*
 * A shared group's counters, uint64_t each and the same on every member's
 * SessionStats (sent only for a session in a group):
 * X(name, report, metric, reason, help), where report is the field of
 * the daemon's struct session_report that holds it, and metric the
 * /metrics counter family, one series per group (NULL: none).  Entries
 * of one family follow each other, each a reason (session_leave_names,
 * -1: none) of it; the first carries the family's help.  infeedctl status
 * --json prints them all, in this order.
 */
#define INFEED_GROUP_STATS(X)						\
	X(group_steps_filled, group_steps_filled,			\
	    "infeed_group_steps_filled_total", -1,			\
	    "Steps a shared group filled, each once for all its members.") \
	X(group_bytes_read, group_bytes_read, NULL, -1, NULL)		\
	X(group_leaves_held_back, group_leaves[SESSION_LEAVE_HELD_BACK], \
	    "infeed_group_leaves_total", SESSION_LEAVE_HELD_BACK,	\
	    "Members that left a shared group for a ring of their own, by " \
	    "reason: held_back (it held the group back past the slack), " \
	    "waited (it waited on slots that members that left still "	\
	    "hold).")							\
	X(group_leaves_waited, group_leaves[SESSION_LEAVE_WAITED],	\
	    "infeed_group_leaves_total", SESSION_LEAVE_WAITED, NULL)	\
	X(group_stays, group_stays, "infeed_group_stays_total", -1,	\
	    "Members that fell behind a shared group with no room in the " \
	    "memory budget for a ring of their own (ended if they held it " \
	    "back, else stayed), or with steps of their former ring still " \
	    "held (stayed).")						\
	X(group_rejoins, group_rejoins, "infeed_group_rejoins_total", -1, \
	    "Members that left a shared group and rejoined it on catching " \
	    "up.")

#endif /* INFEED_STATS_SCHEMA_H */
