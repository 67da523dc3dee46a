/* SPDX-License-Identifier: MIT */
/*
 * infeedctl: the operator's tool for infeedd.
 *
 *   infeedctl [--socket PATH] datasets [--json]
 *   infeedctl [--socket PATH] status [--json]
 *   infeedctl [--socket PATH] bench --dataset NAME [options]
 *   infeedctl tokens index|convert ...	(infeedctl-tokens.c)
 *
 * bench is the loader-only experiment of the efficient-data-loading
 * tutorial: it attaches like a trainer, touches every step it gets and
 * reports throughput; with --verify it also checks every delivered index
 * against the documented order (the same sampler the daemon uses) and that
 * each epoch delivers every index of its share exactly once.
 *
 * It speaks to infeedd only through libinfeed's public API (infeed.h),
 * and takes the order from common/'s sampler, as any tool could.
 */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "infeed.h"
#include "infeedctl-tokens.h"
#include "number.h"
#include "options-schema.h"
#include "sampler.h"
#include "stats-schema.h"
#include "version.h"

static const char *socket_path;

/* Print the usage to @fp. */
static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: infeedctl [--socket PATH] COMMAND [ARGS]\n"
	    "\n"
	    "Commands:\n"
	    "  datasets [--json]          list the daemon's catalogue\n"
	    "  status [--json]            sessions, workers and throughput\n"
	    "  top [--once] [--json]      each trainer's items/s and how much\n"
	    "                             of its time it waits for data,\n"
	    "                             refreshed every second\n"
	    "  bench --dataset NAME       measure loader-only throughput\n"
	    "        [--batch-size B] [--device-iterations D] [--replicas R]\n"
	    "        [--gradient-accumulation K] [--shuffle] [--seed S]\n"
	    "        [--no-drop-last] [--workers W] [--buffer-size N]\n"
	    "        [--epochs E] [--distributed-process-id p\n"
	    "        --distributed-processes P] [--label-dtype int32|int64]\n"
	    "        [--transform PIPELINE] [--verify] [--json]\n"
	    "  tokens index --eot ID [--dtype uint16|uint32] FILE.bin "
	    "[OUT.idx]\n"
	    "                             the index of documents of a file\n"
	    "                             whose documents end with ID\n"
	    "  tokens convert [--dtype uint16|uint32] [--key NAME] "
	    "IN.jsonl PREFIX\n"
	    "                             PREFIX.bin and PREFIX.idx from\n"
	    "                             JSON lines of token ids\n"
	    "\n"
	    "The socket is --socket, else $INFEED_SOCKET, else %s.\n",
	    INFEED_DEFAULT_SOCKET);
}

/* Parse a whole unsigned number or exit with advice. */
static uint64_t
parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	uint64_t	v;

	if (number_parse_u64(s, min, max, &v, NULL) == -1) {
		fprintf(stderr, "infeedctl: %s %s: expected a whole number "
		    "from %llu to %llu\n", opt, s, (unsigned long long)min,
		    (unsigned long long)max);
		exit(2);
	}
	return (v);
}

/* Connect or exit with the library's message. */
static struct infeed *
connect_or_die(void)
{
	struct infeed	*f;

	if ((f = infeed_new()) == NULL) {
		fprintf(stderr, "infeedctl: out of memory\n");
		exit(1);
	}
	if (infeed_connect(f, socket_path, "infeedctl") != INFEED_OK) {
		fprintf(stderr, "infeedctl: %s\n", infeed_error(f));
		infeed_free(f);
		exit(1);
	}
	return (f);
}

/* Print a string as a JSON string literal. */
static void
json_string(const char *s)
{
	putchar('"');
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
	putchar('"');
}

/* Format a shape as "1x28x28". */
static void
shape_string(char *buf, size_t len, const uint64_t *shape, size_t ndim)
{
	size_t	i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < ndim && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%llu",
		    i ? "x" : "", (unsigned long long)shape[i]);
}

/* infeedctl datasets --json */
static void
datasets_json(const struct infeed_dataset *list, size_t n)
{
	size_t	i, j;

	printf("[");
	for (i = 0; i < n; i++) {
		printf("%s{\"name\":", i ? "," : "");
		json_string(list[i].name);
		printf(",\"type\":");
		json_string(list[i].type);
		printf(",\"samples\":%llu,\"shape\":[",
		    (unsigned long long)list[i].samples);
		for (j = 0; j < list[i].ndim; j++)
			printf("%s%llu", j ? "," : "",
			    (unsigned long long)list[i].shape[j]);
		printf("],\"dtype\":\"%s\",\"label_dtype\":\"%s\","
		    "\"classes\":%u", infeed_dtype_name(list[i].dtype),
		    infeed_dtype_name(list[i].label_dtype), list[i].classes);
		if (list[i].documents != 0 && list[i].ndim == 2)
			printf(",\"documents\":%llu,\"tokens\":%llu,"
			    "\"packing_efficiency\":%.4f",
			    (unsigned long long)list[i].documents,
			    (unsigned long long)list[i].tokens,
			    (double)list[i].tokens / ((double)list[i].samples *
			    (double)list[i].shape[1]));
		printf("}");
	}
	printf("]\n");
}

/* infeedctl datasets, as a table. */
static void
datasets_text(const struct infeed_dataset *list, size_t n)
{
	size_t	i;
	char	shape[128];

	printf("%-28s %-10s %10s %-14s %-8s %-7s %s\n", "NAME", "TYPE",
	    "SAMPLES", "SHAPE", "DTYPE", "LABELS", "CLASSES");
	for (i = 0; i < n; i++) {
		/* Images (imagefolder, tar) have no shape until decoded. */
		if (list[i].ndim == 0 && list[i].dtype == 0)
			snprintf(shape, sizeof(shape), "images");
		else
			shape_string(shape, sizeof(shape), list[i].shape,
			    list[i].ndim);
		printf("%-28s %-10s %10llu %-14s %-8s %-7s %u\n",
		    list[i].name, list[i].type,
		    (unsigned long long)list[i].samples, shape,
		    list[i].dtype == 0 ? "-" : infeed_dtype_name(list[i].dtype),
		    infeed_dtype_name(list[i].label_dtype), list[i].classes);
	}
	for (i = 0; i < n; i++) {
		if (list[i].documents != 0 && list[i].ndim == 2)
			printf("%s: %llu documents, %llu tokens packed in %llu "
			    "rows of %llu: efficiency %.2f %%\n", list[i].name,
			    (unsigned long long)list[i].documents,
			    (unsigned long long)list[i].tokens,
			    (unsigned long long)list[i].samples,
			    (unsigned long long)list[i].shape[1],
			    100.0 * (double)list[i].tokens /
			    ((double)list[i].samples * (double)list[i].shape[1]));
	}
	if (n == 0)
		printf("(no datasets: check the daemon's log for refused "
		    "ones)\n");
}

/*
 * The only argument a listing command takes: 1 for "--json", 0 for none,
 * or -1 (usage printed) for anything else.
 */
static int
json_flag(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		return (1);
	if (argc == 1)
		return (0);
	usage(stderr);
	return (-1);
}

/* infeedctl datasets */
static int
cmd_datasets(int argc, char **argv)
{
	struct infeed_dataset	*list;
	struct infeed		*f;
	size_t			 n;
	int			 json;

	if ((json = json_flag(argc, argv)) == -1)
		return (2);
	f = connect_or_die();
	if (infeed_list_datasets(f, &list, &n) != INFEED_OK) {
		fprintf(stderr, "infeedctl: %s\n", infeed_error(f));
		infeed_free(f);
		return (1);
	}
	if (json)
		datasets_json(list, n);
	else
		datasets_text(list, n);
	infeed_datasets_free(list, n);
	infeed_free(f);
	return (0);
}

/* One session of status --json. */
static void
status_json_session(const struct infeed_session_stats *ss, int first)
{
	printf("%s{\"session_id\":%llu,\"dataset\":", first ? "" : ",",
	    (unsigned long long)ss->session_id);
	json_string(ss->dataset ? ss->dataset : "");
	printf(",\"client_name\":");
	json_string(ss->client_name ? ss->client_name : "");
	printf(",\"client_pid\":%d,\"client_uid\":%u,"
	    "\"epoch\":%llu,\"step\":%llu,\"slots\":%u,"
	    "\"slots_ready\":%u,\"slots_held\":%u,"
	    "\"steps_delivered\":%llu,\"items_per_s\":%.1f,"
	    "\"data_wait_s\":%.3f,\"active_s\":%.3f",
	    ss->client_pid, ss->client_uid, (unsigned long long)ss->epoch,
	    (unsigned long long)ss->step, ss->slots, ss->slots_ready,
	    ss->slots_held, (unsigned long long)ss->steps_delivered,
	    ss->items_per_s, ss->data_wait_s, ss->active_s);
	/* The options of options-schema.h that the session's stats hold. */
#define STATUS_OPTION(name, field, type, def, limit, kind, lib, stat)	\
	INFEED_OPTION_##stat(if (_Generic((type)0, bool: 1, default: 0))	\
		printf(",\"" #name "\":%s", ss->name ? "true" : "false");	\
	else								\
		printf(",\"" #name "\":%llu", (unsigned long long)ss->name);)
	if (ss->has_options) {
		INFEED_LOADER_OPTIONS(STATUS_OPTION)
	}
#undef STATUS_OPTION
	printf(",\"samples_replaced\":%llu,\"errors_sent\":%llu",
	    (unsigned long long)ss->samples_replaced,
	    (unsigned long long)ss->errors_sent);
	/* Shared pipelines (issue 25). */
	printf(",\"group_id\":%llu,\"group_members\":%u,\"group_left\":"
	    "%u", (unsigned long long)ss->group_id, ss->group_members,
	    ss->group_left);
#define STATUS_GROUP_STAT(name, ...)					\
	printf(",\"" #name "\":%llu", (unsigned long long)ss->name);
	INFEED_GROUP_STATS(STATUS_GROUP_STAT)
#undef STATUS_GROUP_STAT
	if (ss->transform != NULL) {
		printf(",\"transform\":");
		json_string(ss->transform);
	}
	printf("}");
}

/*
 * The pool in a line: "workers: auto, 2 of 2 (max 2: cgroup cpu.max 2.0
 * CPUs, affinity 2): grew at 12:00:01 because ...", or "workers: 2".
 */
static void
status_pool_line(const struct infeed_stats *st)
{
	if (st->fork_server_pid > 0)
		printf("fork server: pid %d, started again %u times\n",
		    st->fork_server_pid, st->fork_server_restarts);
	else
		printf("fork server: none up (one died; started again %u "
		    "times): workers that die wait for the next one\n",
		    st->fork_server_restarts);
	if (st->reads_in_flight != NULL)
		printf("reads in flight: %s\n", st->reads_in_flight);
	if (!st->workers_auto) {
		printf("workers: %zu\n", st->nworkers);
		return;
	}
	printf("workers: auto, %zu of %u (max %u: %s): %s\n  now %s\n",
	    st->nworkers, st->workers_max, st->workers_max,
	    st->workers_max_why ? st->workers_max_why : "?",
	    st->pool_last_resize && *st->pool_last_resize ?
	    st->pool_last_resize : "not resized yet",
	    st->pool_decision ? st->pool_decision : "?");
}

/*
 * The host's cache of remote datasets, when there is one; with @prev,
 * @dt seconds before (top), what it downloads now.
 */
static void
status_cache_line(const struct infeed_stats *st,
    const struct infeed_stats *prev, double dt)
{
	uint64_t	reads = st->cache_hits + st->cache_misses;

	if (st->cache_max == 0)
		return;
	printf("cache: %.1f of %.1f MiB, %llu blocks read from it, %llu "
	    "downloaded (%.1f%% hits, %llu fetched ahead, %llu waited for), "
	    "%.1f MiB downloaded, %llu evicted",
	    (double)st->cache_bytes / (1 << 20),
	    (double)st->cache_max / (1 << 20),
	    (unsigned long long)st->cache_hits,
	    (unsigned long long)st->cache_misses,
	    reads > 0 ? 100.0 * (double)st->cache_hits / (double)reads : 0.0,
	    (unsigned long long)st->cache_fetched_ahead,
	    (unsigned long long)st->cache_waited,
	    (double)st->cache_bytes_downloaded / (1 << 20),
	    (unsigned long long)st->cache_evictions);
	if (prev != NULL && dt > 0 &&
	    st->cache_bytes_downloaded >= prev->cache_bytes_downloaded)
		printf("; now %.1f MiB/s", (double)(st->cache_bytes_downloaded -
		    prev->cache_bytes_downloaded) / (1 << 20) / dt);
	printf("\n");
}

/* infeedctl status --json */
static void
status_json(const struct infeed_stats *st)
{
	const struct infeed_worker_stats	*ws;
	size_t					 i;

	printf("{\"daemon_version\":");
	json_string(st->daemon_version ? st->daemon_version : "");
	printf(",\"uptime_s\":%.3f,\"clients\":%u,\"memory_used\":%llu,"
	    "\"memory_budget\":%llu,\"memory_kept\":%llu,\"rings_reused\":"
	    "%llu,\"rings_made\":%llu,\"memory_private\":%llu,"
	    "\"memory_held\":%llu,\"huge_pages\":",
	    (double)st->uptime_ms / 1000.0, st->clients,
	    (unsigned long long)st->memory_used,
	    (unsigned long long)st->memory_budget,
	    (unsigned long long)st->memory_kept,
	    (unsigned long long)st->rings_reused,
	    (unsigned long long)st->rings_made,
	    (unsigned long long)st->memory_private,
	    (unsigned long long)st->memory_held);
	json_string(st->huge_pages ? st->huge_pages : "");
	printf(",\"sessions\":[");
	for (i = 0; i < st->nsessions; i++)
		status_json_session(st->sessions[i], i == 0);
	printf("],\"workers_auto\":%s", st->workers_auto ? "true" : "false");
	if (st->workers_auto) {
		printf(",\"workers_max\":%u,\"workers_max_why\":",
		    st->workers_max);
		json_string(st->workers_max_why ? st->workers_max_why : "");
		printf(",\"pool_last_resize\":");
		json_string(st->pool_last_resize ? st->pool_last_resize : "");
		printf(",\"pool_decision\":");
		json_string(st->pool_decision ? st->pool_decision : "");
		printf(",\"pool_grows\":%llu,\"pool_shrinks\":%llu",
		    (unsigned long long)st->pool_grows,
		    (unsigned long long)st->pool_shrinks);
	}
	printf(",\"fork_server_pid\":%d,\"fork_server_restarts\":%u",
	    st->fork_server_pid, st->fork_server_restarts);
	printf(",\"reads_in_flight\":");
	json_string(st->reads_in_flight ? st->reads_in_flight : "");
#define STATUS_CACHE_JSON(name, ...)					\
	printf(",\"" #name "\":%llu", (unsigned long long)st->name);
	INFEED_CACHE_STATS(STATUS_CACHE_JSON)
#undef STATUS_CACHE_JSON
	printf(",\"workers\":[");
	for (i = 0; i < st->nworkers; i++) {
		ws = st->workers[i];
		printf("%s{\"pid\":%d,\"state\":\"%s\"", i ? "," : "",
		    ws->pid, ws->state ? ws->state : "");
#define STATUS_WORKER_JSON(name, ...)					\
		printf(",\"" #name "\":%llu", (unsigned long long)ws->name);
		INFEED_WORKER_STATS(STATUS_WORKER_JSON)
#undef STATUS_WORKER_JSON
		printf("}");
	}
	printf("]}\n");
}

/* What the kernel's shmem THP mode means for the rings, in words. */
static const char *
status_huge_pages(const char *mode)
{
	static char	line[128];

	if (mode == NULL)
		return ("ring pages: not reported by this infeedd");
	if (strcmp(mode, "never") == 0 || strcmp(mode, "deny") == 0)
		return ("ring pages: 4 KiB (huge pages are off: "
		    "/sys/kernel/mm/transparent_hugepage/shmem_enabled is "
		    "never; advise gives rings 2 MiB pages)");
	if (strcmp(mode, "unknown") == 0)
		return ("ring pages: 4 KiB (this kernel has no huge pages for "
		    "shared memory)");
	snprintf(line, sizeof(line), "ring pages: 2 MiB where they fit "
	    "(shmem_enabled is %s)", mode);
	return (line);
}

/*
 * Shared pipelines (issue 25): one line per group, its members' sessions,
 * what it read once for them, and its members' leaves (by reason), stays
 * and rejoins so far; then the sessions that left one.
 */
static void
status_groups(const struct infeed_stats *st)
{
	const struct infeed_session_stats	*ss, *m;
	size_t					 i, j;

	for (i = 0; i < st->nsessions; i++) {
		ss = st->sessions[i];
		for (j = 0; j < i; j++) {
			if (st->sessions[j]->group_id == ss->group_id)
				break;
		}
		if (ss->group_id == 0 || j < i)
			continue;
		printf("group %llu: %u member%s (session%s", (unsigned long long)
		    ss->group_id, ss->group_members, ss->group_members == 1 ?
		    "" : "s", ss->group_members == 1 ? "" : "s");
		for (j = i; j < st->nsessions; j++) {
			m = st->sessions[j];
			if (m->group_id == ss->group_id && !m->group_left)
				printf(" %llu", (unsigned long long)
				    m->session_id);
		}
		printf("), %llu steps filled once for all, %.1f MiB read; "
		    "%llu left (%llu held it back, %llu waited on leavers' "
		    "slots), %llu stayed, %llu rejoined\n",
		    (unsigned long long)ss->group_steps_filled,
		    (double)ss->group_bytes_read / (1 << 20),
		    (unsigned long long)(ss->group_leaves_held_back +
		    ss->group_leaves_waited),
		    (unsigned long long)ss->group_leaves_held_back,
		    (unsigned long long)ss->group_leaves_waited,
		    (unsigned long long)ss->group_stays,
		    (unsigned long long)ss->group_rejoins);
	}
	for (i = 0; i < st->nsessions; i++) {
		if (st->sessions[i]->group_left)
			printf("session %llu left its group (it fell behind) "
			    "and goes on alone until it catches up\n",
			    (unsigned long long)st->sessions[i]->session_id);
	}
}

/* infeedctl status, as tables. */
static void
status_text(const struct infeed_stats *st)
{
	const struct infeed_session_stats	*ss;
	const struct infeed_worker_stats	*ws;
	size_t					 i;
	char					 ring[32];

	printf("infeedd %s, up %.0f s, %u clients, rings %llu of %llu "
	    "MiB, %llu MiB kept warm (%llu of %llu rings on kept memory), "
	    "%llu MiB held by ended sessions' processes, "
	    "%.1f MiB of its own\n%s\n",
	    st->daemon_version ? st->daemon_version : "?",
	    (double)st->uptime_ms / 1000.0, st->clients,
	    (unsigned long long)(st->memory_used >> 20),
	    (unsigned long long)(st->memory_budget >> 20),
	    (unsigned long long)(st->memory_kept >> 20),
	    (unsigned long long)st->rings_reused,
	    (unsigned long long)(st->rings_reused + st->rings_made),
	    (unsigned long long)(st->memory_held >> 20),
	    (double)st->memory_private / (1 << 20),
	    status_huge_pages(st->huge_pages));
	status_cache_line(st, NULL, 0);
	printf("\n");
	printf("%-8s %-22s %-16s %8s %7s %8s %9s %12s\n", "SESSION",
	    "DATASET", "CLIENT", "PID", "EPOCH", "STEP", "RING", "ITEMS/S");
	for (i = 0; i < st->nsessions; i++) {
		ss = st->sessions[i];
		snprintf(ring, sizeof(ring), "%u+%u/%u", ss->slots_ready,
		    ss->slots_held, ss->slots);
		printf("%-8llu %-22s %-16s %8d %7llu %8llu %9s %12.0f\n",
		    (unsigned long long)ss->session_id,
		    ss->dataset ? ss->dataset : "",
		    ss->client_name ? ss->client_name : "", ss->client_pid,
		    (unsigned long long)ss->epoch,
		    (unsigned long long)ss->step, ring, ss->items_per_s);
	}
	if (st->nsessions == 0)
		printf("(no sessions)\n");
	status_groups(st);
	for (i = 0; i < st->nsessions; i++) {
		ss = st->sessions[i];
		if (ss->transform != NULL)
			printf("session %llu: %s; %llu bad images replaced\n",
			    (unsigned long long)ss->session_id, ss->transform,
			    (unsigned long long)ss->samples_replaced);
	}
	printf("\n");
	status_pool_line(st);
	/* A column per counter of stats-schema.h. */
	printf("%-8s %-8s %-11s", "WORKER", "PID", "STATE");
#define STATUS_WORKER_HEAD(name, type, metric, help, column, width)	\
	printf(" %*s", width, column);
	INFEED_WORKER_STATS(STATUS_WORKER_HEAD)
#undef STATUS_WORKER_HEAD
	printf("\n");
	for (i = 0; i < st->nworkers; i++) {
		ws = st->workers[i];
		printf("%-8zu %-8d %-11s", i, ws->pid,
		    ws->state ? ws->state : "");
#define STATUS_WORKER_CELL(name, type, metric, help, column, width)	\
		printf(" %*llu", width, (unsigned long long)ws->name);
		INFEED_WORKER_STATS(STATUS_WORKER_CELL)
#undef STATUS_WORKER_CELL
		printf("\n");
	}
	printf("\nRING is ready+held/slots.\n");
}

/* infeedctl status */
static int
cmd_status(int argc, char **argv)
{
	struct infeed		*f;
	struct infeed_stats	*st;
	int			 json;

	if ((json = json_flag(argc, argv)) == -1)
		return (2);
	f = connect_or_die();
	if (infeed_get_stats(f, &st) != INFEED_OK) {
		fprintf(stderr, "infeedctl: %s\n", infeed_error(f));
		infeed_free(f);
		return (1);
	}
	infeed_free(f);
	if (json)
		status_json(st);
	else
		status_text(st);
	infeed_stats_free(st);
	return (0);
}

/* One session in infeedctl top: rates over the last interval. */
struct top_row {
	const struct infeed_session_stats	*ss;
	double					 items_per_s;
	double					 input_bound;	/* 0..1 */
};

/* The session of @prev with @id, or NULL. */
static const struct infeed_session_stats *
top_find(const struct infeed_stats *prev, uint64_t id)
{
	size_t	i;

	for (i = 0; prev != NULL && i < prev->nsessions; i++)
		if (prev->sessions[i]->session_id == id)
			return (prev->sessions[i]);
	return (NULL);
}

/*
 * Rates of @ss since @old, @dt seconds ago: items from the steps delivered
 * (a combined batch each), the input-bound share from the data wait.
 * Without an earlier sample, the session's averages.
 */
static void
top_rates(const struct infeed_session_stats *ss,
    const struct infeed_session_stats *old, double dt, struct top_row *row)
{
	double	cbs = 0, da;

	row->ss = ss;
	row->items_per_s = ss->items_per_s;
	row->input_bound = ss->active_s > 0 ? ss->data_wait_s / ss->active_s :
	    0;
	if (ss->has_options)
		cbs = (double)ss->batch_size * ss->device_iterations *
		    ss->replication_factor * ss->gradient_accumulation;
	if (old == NULL || dt <= 0)
		return;
	if (cbs > 0 && ss->steps_delivered >= old->steps_delivered)
		row->items_per_s = (double)(ss->steps_delivered -
		    old->steps_delivered) * cbs / dt;
	da = ss->active_s - old->active_s;
	if (da > 0)
		row->input_bound = (ss->data_wait_s - old->data_wait_s) / da;
	if (row->input_bound < 0)
		row->input_bound = 0;
	if (row->input_bound > 1)
		row->input_bound = 1;
}

/* Workers busy now, of all. */
static void
top_workers(const struct infeed_stats *st, unsigned *busy)
{
	size_t	i;

	*busy = 0;
	for (i = 0; i < st->nworkers; i++)
		*busy += st->workers[i]->state != NULL &&
		    strcmp(st->workers[i]->state, "busy") == 0;
}

/* One screen (or JSON object) of infeedctl top. */
static void
top_print(const struct infeed_stats *st, const struct infeed_stats *prev,
    double dt, int json)
{
	struct top_row	row;
	unsigned	busy;
	size_t		i;
	char		ring[16];

	top_workers(st, &busy);
	if (json) {
		printf("{\"clients\":%u,\"workers\":%zu,\"workers_busy\":%u,",
		    st->clients, st->nworkers, busy);
		if (st->workers_auto) {
			printf("\"workers_max\":%u,\"pool_last_resize\":",
			    st->workers_max);
			json_string(st->pool_last_resize ?
			    st->pool_last_resize : "");
			printf(",");
		}
		if (st->cache_max > 0)
			printf("\"cache_bytes\":%llu,\"cache_misses\":%llu,"
			    "\"cache_bytes_downloaded\":%llu,",
			    (unsigned long long)st->cache_bytes,
			    (unsigned long long)st->cache_misses,
			    (unsigned long long)st->cache_bytes_downloaded);
		printf("\"sessions\":[");
	} else {
		printf("infeedd: %u clients, %zu sessions, workers %u of %zu "
		    "busy\n", st->clients, st->nsessions, busy, st->nworkers);
		if (st->workers_auto)
			status_pool_line(st);
		status_cache_line(st, prev, dt);
		printf("\n%-16.16s %-18.18s %10s %12s %6s %7s %9s\n",
		    "CLIENT", "DATASET", "ITEMS/S", "INPUT-BOUND", "RING",
		    "ERRORS", "PID");
	}
	for (i = 0; i < st->nsessions; i++) {
		top_rates(st->sessions[i], top_find(prev,
		    st->sessions[i]->session_id), dt, &row);
		if (json) {
			printf("%s{\"session_id\":%llu,\"client_name\":",
			    i ? "," : "",
			    (unsigned long long)row.ss->session_id);
			json_string(row.ss->client_name ?
			    row.ss->client_name : "");
			printf(",\"client_pid\":%d,\"dataset\":",
			    row.ss->client_pid);
			json_string(row.ss->dataset ? row.ss->dataset : "");
			printf(",\"items_per_s\":%.1f,\"input_bound\":%.4f,"
			    "\"slots_ready\":%u,\"slots\":%u,"
			    "\"group_id\":%llu,\"group_members\":%u,"
			    "\"errors_sent\":%llu}",
			    row.items_per_s, row.input_bound,
			    row.ss->slots_ready, row.ss->slots,
			    (unsigned long long)row.ss->group_id,
			    row.ss->group_members,
			    (unsigned long long)row.ss->errors_sent);
			continue;
		}
		snprintf(ring, sizeof(ring), "%u/%u", row.ss->slots_ready,
		    row.ss->slots);
		printf("%-16.16s %-18.18s %10.0f %11.0f%% %6s %7llu %9d\n",
		    row.ss->client_name ? row.ss->client_name : "",
		    row.ss->dataset ? row.ss->dataset : "", row.items_per_s,
		    row.input_bound * 100, ring,
		    (unsigned long long)row.ss->errors_sent,
		    row.ss->client_pid);
	}
	if (json)
		printf("]}\n");
	else if (st->nsessions == 0)
		printf("(no sessions)\n");
	else {
		printf("\n");
		status_groups(st);
		printf("INPUT-BOUND: the share of time the trainer waited "
		    "for a step; RING: ready/slots; ERRORS: errors the "
		    "daemon sent it.\n");
	}
	fflush(stdout);
}


/* infeedctl top [--once] [--json] */
static int
cmd_top(int argc, char **argv)
{
	struct infeed		*f;
	struct infeed_stats	*st = NULL, *prev = NULL;
	double			 t, tprev = 0;
	int			 i, once = 0, json = 0, tty = isatty(1);

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--once") == 0)
			once = 1;
		else if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else {
			usage(stderr);
			return (2);
		}
	}
	f = connect_or_die();
	for (;;) {
		t = clock_now_s();
		if (infeed_get_stats(f, &st) != INFEED_OK) {
			fprintf(stderr, "infeedctl: %s\n", infeed_error(f));
			infeed_stats_free(prev);
			infeed_free(f);
			return (1);
		}
		/* --once: a second sample a second later gives the rates. */
		if (prev != NULL || !once) {
			if (tty && !json && !once)
				printf("\033[H\033[2J");
			top_print(st, prev, t - tprev, json);
			if (once)
				break;
		}
		infeed_stats_free(prev);
		prev = st;
		tprev = t;
		st = NULL;
		sleep(1);
	}
	infeed_stats_free(st);
	infeed_stats_free(prev);
	infeed_free(f);
	return (0);
}

/* Read one byte of every page of a step, as a trainer's copy would. */
static uint64_t
touch(const void *p, size_t len)
{
	const volatile uint8_t	*b = p;
	uint64_t		 sum = 0;
	size_t			 i;

	for (i = 0; i < len; i += 4096)
		sum += b[i];
	if (len > 0)
		sum += b[len - 1];
	return (sum);
}

/* What infeedctl bench was asked to do. */
struct bench_args {
	const char		*dataset;
	struct infeed_options	 o;
	uint64_t		 epochs;
	int			 json;
	int			 verify;
};

/* What a bench run has seen so far. */
struct bench_run {
	struct infeed_session_info	 info;
	struct infeed_dataset		*ds;		/* the catalogue entry */
	struct sampler			 sampler;	/* with --verify */
	int				 sampler_ready;
	uint64_t			*expect;	/* one step's indices */
	uint8_t				*seen;		/* per dataset index */
	uint64_t			 steps, items, bytes, bad, sink;
	uint64_t			 epoch0;	/* items when it began */
	double				 secs;		/* after the attach */
	double				 t_attach;	/* when it was sent */
	double				 first_step_s;	/* from then */
	double				 first_epoch_s;	/* from the loop's start */
	uint64_t			 first_epoch_items;
};

/* Apply one option of the batch geometry; -1 if @ch is not one. */
static int
bench_option_geometry(struct infeed_options *o, int ch, const char *arg)
{
	switch (ch) {
	case 'b':
		o->batch_size = (uint32_t)parse_u64("--batch-size", arg, 1,
		    UINT32_MAX);
		break;
	case 'i':
		o->device_iterations = (uint32_t)parse_u64(
		    "--device-iterations", arg, 1, UINT32_MAX);
		break;
	case 'r':
		o->replication_factor = (uint32_t)parse_u64("--replicas", arg,
		    1, UINT32_MAX);
		break;
	case 'g':
		o->gradient_accumulation = (uint32_t)parse_u64(
		    "--gradient-accumulation", arg, 1, UINT32_MAX);
		break;
	case 'p':
		o->distributed_process_id = (uint32_t)parse_u64(
		    "--distributed-process-id", arg, 0, UINT32_MAX);
		break;
	case 'P':
		o->distributed_process_count = (uint32_t)parse_u64(
		    "--distributed-processes", arg, 1, UINT32_MAX);
		break;
	default:
		return (-1);
	}
	return (0);
}

/* Apply one bench option; -1 for an unknown one. */
static int
bench_option(struct bench_args *a, int ch, const char *arg)
{
	switch (ch) {
	case 'd':
		a->dataset = arg;
		break;
	case 'S':
		a->o.shuffle = true;
		break;
	case 's':
		a->o.seed = parse_u64("--seed", arg, 0, UINT64_MAX);
		break;
	case 'L':
		a->o.drop_last = false;
		break;
	case 'w':
		a->o.num_workers = (uint32_t)parse_u64("--workers", arg, 1,
		    256);
		break;
	case 'B':
		a->o.buffer_size = (uint32_t)parse_u64("--buffer-size", arg, 1,
		    64);
		break;
	case 'e':
		a->epochs = parse_u64("--epochs", arg, 1, 1000000);
		break;
	case 'l':
		if (strcmp(arg, "int32") == 0)
			a->o.label_dtype = INFEED_DTYPE_INT32;
		else if (strcmp(arg, "int64") == 0)
			a->o.label_dtype = INFEED_DTYPE_INT64;
		else {
			fprintf(stderr, "infeedctl: --label-dtype %s: expected "
			    "int32 or int64\n", arg);
			exit(2);
		}
		break;
	case 't':
		a->o.transform = arg;
		break;
	case 'V':
		a->verify = 1;
		break;
	case 'j':
		a->json = 1;
		break;
	default:
		return (bench_option_geometry(&a->o, ch, arg));
	}
	return (0);
}

/* Parse bench's arguments; 0, or the exit code of a usage error. */
static int
bench_parse(int argc, char **argv, struct bench_args *a)
{
	static const struct option longopts[] = {
		{ "dataset", required_argument, NULL, 'd' },
		{ "batch-size", required_argument, NULL, 'b' },
		{ "device-iterations", required_argument, NULL, 'i' },
		{ "replicas", required_argument, NULL, 'r' },
		{ "gradient-accumulation", required_argument, NULL, 'g' },
		{ "shuffle", no_argument, NULL, 'S' },
		{ "seed", required_argument, NULL, 's' },
		{ "no-drop-last", no_argument, NULL, 'L' },
		{ "workers", required_argument, NULL, 'w' },
		{ "buffer-size", required_argument, NULL, 'B' },
		{ "epochs", required_argument, NULL, 'e' },
		{ "distributed-process-id", required_argument, NULL, 'p' },
		{ "distributed-processes", required_argument, NULL, 'P' },
		{ "label-dtype", required_argument, NULL, 'l' },
		{ "transform", required_argument, NULL, 't' },
		{ "verify", no_argument, NULL, 'V' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	int	ch;

	memset(a, 0, sizeof(*a));
	infeed_options_init(&a->o);
	a->epochs = 1;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (bench_option(a, ch, optarg) == -1) {
			usage(stderr);
			return (2);
		}
	}
	if (a->dataset == NULL || optind != argc) {
		fprintf(stderr, "infeedctl bench: --dataset NAME is required "
		    "('infeedctl datasets' lists them)\n");
		return (2);
	}
	return (0);
}

/* The sampler that --verify checks against: the documented order. */
static int
bench_verify_init(const struct bench_args *a, struct bench_run *run)
{
	struct sampler_opts	 so;
	char			*cause = NULL;

	memset(&so, 0, sizeof(so));
	so.samples = run->ds->samples;
#define BENCH_SAMPLER_OPTION(name, field, type, def, limit, kind, ...)	\
	INFEED_OPTION_SAMPLER_##kind(so.field = a->o.name;)
	INFEED_LOADER_OPTIONS(BENCH_SAMPLER_OPTION)
#undef BENCH_SAMPLER_OPTION
	if (sampler_init(&run->sampler, &so, &cause) == -1) {
		fprintf(stderr, "infeedctl: the daemon accepted options "
		    "the sampler refuses: %s\n", cause);
		free(cause);
		return (-1);
	}
	run->sampler_ready = 1;
	run->expect = calloc(run->info.combined_batch_size,
	    sizeof(*run->expect));
	run->seen = calloc(run->ds->samples, 1);
	if (run->expect == NULL || run->seen == NULL) {
		fprintf(stderr, "infeedctl: out of memory for --verify\n");
		return (-1);
	}
	return (0);
}

/* Find the dataset and attach; 0, 1 on the daemon's error, -1 on ours. */
static int
bench_attach(struct infeed *f, const struct bench_args *a,
    struct bench_run *run, struct infeed_dataset *list, size_t n)
{
	size_t	i;

	for (i = 0; i < n && strcmp(list[i].name, a->dataset) != 0; i++)
		;
	if (i == n) {
		fprintf(stderr, "infeedctl: no dataset '%s'; 'infeedctl "
		    "datasets' lists the catalogue\n", a->dataset);
		return (-1);
	}
	run->ds = &list[i];
	if (infeed_attach(f, a->dataset, &a->o, &run->info) != INFEED_OK)
		return (1);
	if (a->verify && bench_verify_init(a, run) == -1)
		return (-1);
	return (0);
}

/* Row @row's label, from int32 or int64 labels as the ring holds them. */
static int64_t
step_label(const struct infeed_step *st, uint64_t row)
{
	return (st->labels64 != NULL ? st->labels64[row] : st->labels[row]);
}

/* Count what is wrong with (@e, @s): its indices, labels, and coverage. */
static void
bench_verify_step(const struct bench_args *a, struct bench_run *run,
    const struct infeed_step *st, uint64_t e, uint64_t s)
{
	const struct infeed_dataset	*ds = run->ds;
	struct sampler			*sp = &run->sampler;
	uint64_t			 nrows, row;
	int64_t				 label;

	/* int64 labels when asked for (a daemon without them says int32). */
	if ((a->o.label_dtype == INFEED_DTYPE_INT64) !=
	    (st->labels64 != NULL))
		run->bad++;
	if (s == 0) {
		memset(run->seen, 0, ds->samples);
		run->epoch0 = run->items;
	}
	nrows = sampler_step_indices(sp, e, s, run->expect);
	if (nrows != st->rows)
		run->bad++;
	for (row = 0; row < nrows && row < st->rows; row++) {
		if (st->indices[row] != run->expect[row] ||
		    st->indices[row] >= ds->samples ||
		    run->seen[st->indices[row]]++)
			run->bad++;
		label = step_label(st, row);
		if (label < 0 || (ds->classes && (uint64_t)label >=
		    ds->classes))
			run->bad++;
	}
	/* The epoch's last step: every index of the share, once. */
	if (s + 1 == run->info.steps_per_epoch &&
	    run->items + st->rows - run->epoch0 != sp->block_length -
	    (a->o.drop_last ? sp->block_length % sp->cbs : 0))
		run->bad++;
}

/* Check, touch and count one step as a trainer would take it. */
static void
bench_take(const struct bench_args *a, struct bench_run *run,
    const struct infeed_step *st, uint64_t e, uint64_t s)
{
	if (st->epoch != e || st->step != s) {
		fprintf(stderr, "infeedctl: got epoch %llu step %llu, "
		    "expected epoch %llu step %llu\n",
		    (unsigned long long)st->epoch,
		    (unsigned long long)st->step,
		    (unsigned long long)e, (unsigned long long)s);
		run->bad++;
	}
	run->sink += touch(st->data, st->rows * run->info.sample_bytes);
	if (st->labels64 != NULL)
		run->sink += touch(st->labels64, st->rows * sizeof(int64_t));
	else
		run->sink += touch(st->labels, st->rows * sizeof(int32_t));
	run->bytes += st->rows * run->info.sample_bytes;
	if (a->verify)
		bench_verify_step(a, run, st, e, s);
	run->items += st->rows;
	run->steps++;
}

/* Take every step of the run's epochs; -1 on the library's error. */
static int
bench_loop(struct infeed *f, const struct bench_args *a,
    struct bench_run *run)
{
	struct infeed_step	st;
	uint64_t		k, e, s, total, spe = run->info.steps_per_epoch;
	double			t0;

	total = a->epochs * spe;
	t0 = clock_now_s();
	for (k = 0; k < total; k++) {
		if (infeed_next(f, &st) != INFEED_OK)
			return (-1);
		if (k == 0)
			run->first_step_s = clock_now_s() - run->t_attach;
		e = k / spe;
		s = k % spe;
		bench_take(a, run, &st, e, s);
		if (infeed_release(f, &st) != INFEED_OK)
			return (-1);
		if (e == 0 && s + 1 == spe) {
			run->first_epoch_s = clock_now_s() - t0;
			run->first_epoch_items = run->items;
		}
		if (!a->json && isatty(STDERR_FILENO) && s + 1 == spe)
			fprintf(stderr, "\repoch %llu/%llu done",
			    (unsigned long long)e + 1,
			    (unsigned long long)a->epochs);
	}
	run->secs = clock_now_s() - t0;
	if (!a->json && isatty(STDERR_FILENO))
		fprintf(stderr, "\n");
	return (0);
}

/* Items per second of the first epoch. */
static double
bench_first_rate(const struct bench_run *run)
{
	return (run->first_epoch_s > 0 ?
	    (double)run->first_epoch_items / run->first_epoch_s : 0);
}

/* Items per second after the first epoch; 0 with one epoch. */
static double
bench_later_rate(const struct bench_args *a, const struct bench_run *run)
{
	if (a->epochs < 2 || run->secs <= run->first_epoch_s)
		return (0);
	return ((double)(run->items - run->first_epoch_items) /
	    (run->secs - run->first_epoch_s));
}

/* Print bench's results as one JSON object. */
static void
bench_report_json(const struct bench_args *a, const struct bench_run *run)
{
	printf("{\"dataset\":");
	json_string(a->dataset);
	printf(",\"combined_batch_size\":%llu,\"steps_per_epoch\":%llu,"
	    "\"last_step_rows\":%llu,\"steps\":%llu,\"items\":%llu,"
	    "\"seconds\":%.6f,\"items_per_s\":%.1f,\"gb_per_s\":%.4f,"
	    "\"first_step_s\":%.6f,\"first_epoch_items_per_s\":%.1f,"
	    "\"later_epochs_items_per_s\":%.1f,\"verified\":%s}\n",
	    (unsigned long long)run->info.combined_batch_size,
	    (unsigned long long)run->info.steps_per_epoch,
	    (unsigned long long)run->info.last_step_rows,
	    (unsigned long long)run->steps, (unsigned long long)run->items,
	    run->secs, (double)run->items / run->secs,
	    (double)run->bytes / run->secs / 1e9, run->first_step_s,
	    bench_first_rate(run), bench_later_rate(a, run),
	    a->verify ? (run->bad == 0 ? "true" : "false") : "null");
}

/* What a run's first epoch and first step pay for, once. */
static const char bench_first_use[] =
    "the ring's memory, a dataset cache being made";

/* Print bench's results for a person. */
static void
bench_report_text(const struct bench_args *a, const struct bench_run *run)
{
	printf("dataset              %s\n", a->dataset);
	printf("combined batch size  %llu\n",
	    (unsigned long long)run->info.combined_batch_size);
	printf("steps per epoch      %llu\n",
	    (unsigned long long)run->info.steps_per_epoch);
	printf("rows of last step    %llu\n",
	    (unsigned long long)run->info.last_step_rows);
	printf("steps                %llu\n", (unsigned long long)run->steps);
	printf("items                %llu\n", (unsigned long long)run->items);
	printf("seconds              %.3f\n", run->secs);
	/*
	 * The first epoch pays for first use (the ring's pages, a dataset's
	 * cache made as it is read), and so does the first step: each line
	 * that includes it says so, beside the steady rate when there is one.
	 */
	printf("items/s              %.1f", (double)run->items / run->secs);
	if (a->epochs > 1)
		printf(" over %llu epochs; %.1f steady, after the first\n"
		    "  first epoch        %.1f (with first use: %s)\n"
		    "  later epochs       %.1f (steady)\n",
		    (unsigned long long)a->epochs,
		    bench_later_rate(a, run), bench_first_rate(run),
		    bench_first_use, bench_later_rate(a, run));
	else
		printf(" (with first use; --epochs 2 or more shows the "
		    "steady rate)\n");
	printf("GB/s                 %.3f\n",
	    (double)run->bytes / run->secs / 1e9);
	printf("first step           %.1f ms after the attach was sent "
	    "(with first use: %s)\n", run->first_step_s * 1e3,
	    bench_first_use);
	if (a->verify)
		printf("verify               %s\n", run->bad == 0 ?
		    "passed: every index in the documented order, "
		    "each exactly once per epoch" : "FAILED");
}

/* infeedctl bench */
static int
cmd_bench(int argc, char **argv)
{
	struct bench_args	 a;
	struct bench_run	 run;
	struct infeed_dataset	*list = NULL;
	struct infeed		*f;
	size_t			 n = 0;
	int			 r, rc = 1;

	if ((r = bench_parse(argc, argv, &a)) != 0)
		return (r);
	memset(&run, 0, sizeof(run));
	f = connect_or_die();
	if (infeed_list_datasets(f, &list, &n) != INFEED_OK)
		goto fail;
	run.t_attach = clock_now_s();
	if ((r = bench_attach(f, &a, &run, list, n)) == 1)
		goto fail;
	if (r == -1)
		goto out;
	if (bench_loop(f, &a, &run) == -1)
		goto fail;
	if (a.json)
		bench_report_json(&a, &run);
	else
		bench_report_text(&a, &run);
	rc = a.verify && run.bad != 0 ? 1 : 0;
	goto out;
fail:
	fprintf(stderr, "infeedctl: %s\n", infeed_error(f));
out:
	if (run.sampler_ready)
		sampler_clear(&run.sampler);
	free(run.expect);
	free(run.seen);
	infeed_datasets_free(list, n);
	infeed_free(f);
	return (rc);
}

/* Run the command that the arguments name. */
int
main(int argc, char **argv)
{
	int	i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
			socket_path = argv[++i];
		else if (strncmp(argv[i], "--socket=", 9) == 0)
			socket_path = argv[i] + 9;
		else if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return (0);
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("infeedctl %s\n", INFEED_VERSION);
			return (0);
		} else
			break;
	}
	if (i == argc) {
		usage(stderr);
		return (2);
	}
	if (strcmp(argv[i], "datasets") == 0)
		return (cmd_datasets(argc - i, argv + i));
	if (strcmp(argv[i], "status") == 0)
		return (cmd_status(argc - i, argv + i));
	if (strcmp(argv[i], "bench") == 0)
		return (cmd_bench(argc - i, argv + i));
	if (strcmp(argv[i], "top") == 0)
		return (cmd_top(argc - i, argv + i));
	if (strcmp(argv[i], "tokens") == 0)
		return (infeedctl_tokens(argc - i, argv + i));
	fprintf(stderr, "infeedctl: unknown command '%s'\n", argv[i]);
	usage(stderr);
	return (2);
}
