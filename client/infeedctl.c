/* SPDX-License-Identifier: MIT */
/*
 * infeedctl: the operator's tool for infeedd.
 *
 *   infeedctl [--socket PATH] datasets [--json]
 *   infeedctl [--socket PATH] status [--json]
 *   infeedctl [--socket PATH] bench --dataset NAME [options]
 *
 * bench is the loader-only experiment of the efficient-data-loading
 * tutorial: it attaches like a trainer, touches every step it gets and
 * reports throughput; with --verify it also checks every delivered index
 * against the documented order (the same sampler the daemon uses) and that
 * each epoch delivers every index of its share exactly once.
 */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infeed.h"
#include "infeed.pb-c.h"
#include "sampler.h"
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
	    "  bench --dataset NAME       measure loader-only throughput\n"
	    "        [--batch-size B] [--device-iterations D] [--replicas R]\n"
	    "        [--gradient-accumulation K] [--shuffle] [--seed S]\n"
	    "        [--no-drop-last] [--workers W] [--buffer-size N]\n"
	    "        [--epochs E] [--distributed-process-id p\n"
	    "        --distributed-processes P] [--verify] [--json]\n"
	    "\n"
	    "The socket is --socket, else $INFEED_SOCKET, else %s.\n",
	    INFEED_DEFAULT_SOCKET);
}

/* Parse a whole unsigned number or exit with advice. */
static uint64_t
parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	unsigned long long	 v;
	char			*end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s == '-' || errno != 0 || *end != '\0' || v < min || v > max) {
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

/* infeedctl datasets */
static int
cmd_datasets(int argc, char **argv)
{
	struct infeed_dataset	*list;
	struct infeed		*f;
	size_t			 n, i, j;
	int			 json = 0;
	char			 shape[128];

	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		json = 1;
	else if (argc != 1) {
		usage(stderr);
		return (2);
	}
	f = connect_or_die();
	if (infeed_list_datasets(f, &list, &n) != INFEED_OK) {
		fprintf(stderr, "infeedctl: %s\n", infeed_error(f));
		infeed_free(f);
		return (1);
	}
	if (json) {
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
			    "\"classes\":%u}", infeed_dtype_name(list[i].dtype),
			    infeed_dtype_name(list[i].label_dtype),
			    list[i].classes);
		}
		printf("]\n");
	} else {
		printf("%-28s %-10s %10s %-14s %-8s %-7s %s\n", "NAME", "TYPE",
		    "SAMPLES", "SHAPE", "DTYPE", "LABELS", "CLASSES");
		for (i = 0; i < n; i++) {
			shape_string(shape, sizeof(shape), list[i].shape,
			    list[i].ndim);
			printf("%-28s %-10s %10llu %-14s %-8s %-7s %u\n",
			    list[i].name, list[i].type,
			    (unsigned long long)list[i].samples, shape,
			    infeed_dtype_name(list[i].dtype),
			    infeed_dtype_name(list[i].label_dtype),
			    list[i].classes);
		}
		if (n == 0)
			printf("(no datasets: check the daemon's log for "
			    "refused ones)\n");
	}
	infeed_datasets_free(list, n);
	infeed_free(f);
	return (0);
}

/* infeedctl status */
static int
cmd_status(int argc, char **argv)
{
	struct infeed		*f;
	Infeed__Frame		*fr;
	Infeed__Stats		*st;
	Infeed__SessionStats	*ss;
	Infeed__WorkerStats	*ws;
	uint8_t			*buf;
	size_t			 len, i;
	int			 json = 0;

	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		json = 1;
	else if (argc != 1) {
		usage(stderr);
		return (2);
	}
	f = connect_or_die();
	if (infeed_stats_frame(f, &buf, &len) != INFEED_OK) {
		fprintf(stderr, "infeedctl: %s\n", infeed_error(f));
		infeed_free(f);
		return (1);
	}
	infeed_free(f);
	fr = infeed__frame__unpack(NULL, len, buf);
	free(buf);
	if (fr == NULL || fr->msg_case != INFEED__FRAME__MSG_STATS) {
		fprintf(stderr, "infeedctl: cannot decode the status reply\n");
		return (1);
	}
	st = fr->stats;
	if (json) {
		printf("{\"daemon_version\":");
		json_string(st->daemon_version ? st->daemon_version : "");
		printf(",\"uptime_s\":%.3f,\"clients\":%u,\"memory_used\":%llu,"
		    "\"memory_budget\":%llu,\"sessions\":[",
		    (double)st->uptime_ms / 1000.0, st->clients,
		    (unsigned long long)st->memory_used,
		    (unsigned long long)st->memory_budget);
		for (i = 0; i < st->n_sessions; i++) {
			ss = st->sessions[i];
			printf("%s{\"session_id\":%llu,\"dataset\":", i ? "," :
			    "", (unsigned long long)ss->session_id);
			json_string(ss->dataset ? ss->dataset : "");
			printf(",\"client_name\":");
			json_string(ss->client_name ? ss->client_name : "");
			printf(",\"client_pid\":%d,\"client_uid\":%u,"
			    "\"epoch\":%llu,\"step\":%llu,\"slots\":%u,"
			    "\"slots_ready\":%u,\"slots_held\":%u,"
			    "\"steps_delivered\":%llu,\"items_per_s\":%.1f",
			    ss->client_pid, ss->client_uid,
			    (unsigned long long)ss->epoch,
			    (unsigned long long)ss->step, ss->slots,
			    ss->slots_ready, ss->slots_held,
			    (unsigned long long)ss->steps_delivered,
			    ss->items_per_s);
			if (ss->options != NULL)
				printf(",\"batch_size\":%u,"
				    "\"device_iterations\":%u,"
				    "\"replication_factor\":%u,"
				    "\"gradient_accumulation\":%u,"
				    "\"shuffle\":%s,\"buffer_size\":%u",
				    ss->options->batch_size,
				    ss->options->device_iterations,
				    ss->options->replication_factor,
				    ss->options->gradient_accumulation,
				    ss->options->shuffle ? "true" : "false",
				    ss->options->buffer_size);
			printf("}");
		}
		printf("],\"workers\":[");
		for (i = 0; i < st->n_workers; i++) {
			ws = st->workers[i];
			printf("%s{\"pid\":%d,\"state\":\"%s\",\"rows_done\":"
			    "%llu,\"restarts\":%u}", i ? "," : "", ws->pid,
			    ws->state ? ws->state : "", (unsigned long long)
			    ws->rows_done, ws->restarts);
		}
		printf("]}\n");
	} else {
		printf("infeedd %s, up %.0f s, %u clients, rings %llu of %llu "
		    "MiB\n\n", st->daemon_version ? st->daemon_version : "?",
		    (double)st->uptime_ms / 1000.0, st->clients,
		    (unsigned long long)(st->memory_used >> 20),
		    (unsigned long long)(st->memory_budget >> 20));
		printf("%-8s %-22s %-16s %8s %7s %8s %9s %12s\n", "SESSION",
		    "DATASET", "CLIENT", "PID", "EPOCH", "STEP", "RING",
		    "ITEMS/S");
		for (i = 0; i < st->n_sessions; i++) {
			char	ring[32];

			ss = st->sessions[i];
			snprintf(ring, sizeof(ring), "%u+%u/%u",
			    ss->slots_ready, ss->slots_held, ss->slots);
			printf("%-8llu %-22s %-16s %8d %7llu %8llu %9s %12.0f"
			    "\n", (unsigned long long)ss->session_id,
			    ss->dataset ? ss->dataset : "",
			    ss->client_name ? ss->client_name : "",
			    ss->client_pid, (unsigned long long)ss->epoch,
			    (unsigned long long)ss->step, ring,
			    ss->items_per_s);
		}
		if (st->n_sessions == 0)
			printf("(no sessions)\n");
		printf("\n%-8s %-8s %-11s %12s %8s\n", "WORKER", "PID", "STATE",
		    "ROWS", "RESTARTS");
		for (i = 0; i < st->n_workers; i++) {
			ws = st->workers[i];
			printf("%-8zu %-8d %-11s %12llu %8u\n", i, ws->pid,
			    ws->state ? ws->state : "",
			    (unsigned long long)ws->rows_done, ws->restarts);
		}
		printf("\nRING is ready+held/slots.\n");
	}
	infeed__frame__free_unpacked(fr, NULL);
	return (0);
}

/* Seconds on the monotonic clock. */
static double
now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
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

/* infeedctl bench */
static int
cmd_bench(int argc, char **argv)
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
		{ "verify", no_argument, NULL, 'V' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_dataset		*list = NULL;
	struct infeed_step		 st;
	struct infeed			*f;
	struct sampler			 sampler;
	struct sampler_opts		 so;
	const char			*dataset = NULL;
	uint64_t			 epochs = 1, steps = 0, items = 0, total;
	uint64_t			 e, s, k, nrows, bad = 0, epoch0 = 0, row;
	uint64_t			*expect = NULL, sink = 0, bytes = 0;
	uint8_t				*seen = NULL;
	size_t				 n = 0, i;
	double				 t0, secs;
	int				 ch, json = 0, verify = 0, r, rc = 1;
	char				*cause = NULL;

	infeed_options_init(&o);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd': dataset = optarg; break;
		case 'b': o.batch_size = (uint32_t)parse_u64("--batch-size",
		    optarg, 1, UINT32_MAX); break;
		case 'i': o.device_iterations = (uint32_t)parse_u64(
		    "--device-iterations", optarg, 1, UINT32_MAX); break;
		case 'r': o.replication_factor = (uint32_t)parse_u64(
		    "--replicas", optarg, 1, UINT32_MAX); break;
		case 'g': o.gradient_accumulation = (uint32_t)parse_u64(
		    "--gradient-accumulation", optarg, 1, UINT32_MAX); break;
		case 'S': o.shuffle = true; break;
		case 's': o.seed = parse_u64("--seed", optarg, 0, UINT64_MAX);
		    break;
		case 'L': o.drop_last = false; break;
		case 'w': o.num_workers = (uint32_t)parse_u64("--workers",
		    optarg, 1, 256); break;
		case 'B': o.buffer_size = (uint32_t)parse_u64("--buffer-size",
		    optarg, 1, 64); break;
		case 'e': epochs = parse_u64("--epochs", optarg, 1, 1000000);
		    break;
		case 'p': o.distributed_process_id = (uint32_t)parse_u64(
		    "--distributed-process-id", optarg, 0, UINT32_MAX); break;
		case 'P': o.distributed_process_count = (uint32_t)parse_u64(
		    "--distributed-processes", optarg, 1, UINT32_MAX); break;
		case 'V': verify = 1; break;
		case 'j': json = 1; break;
		default: usage(stderr); return (2);
		}
	}
	if (dataset == NULL || optind != argc) {
		fprintf(stderr, "infeedctl bench: --dataset NAME is required "
		    "('infeedctl datasets' lists them)\n");
		return (2);
	}
	f = connect_or_die();
	if (infeed_list_datasets(f, &list, &n) != INFEED_OK)
		goto fail;
	for (i = 0; i < n && strcmp(list[i].name, dataset) != 0; i++)
		;
	if (i == n) {
		fprintf(stderr, "infeedctl: no dataset '%s'; 'infeedctl "
		    "datasets' lists the catalogue\n", dataset);
		goto out;
	}
	memset(&so, 0, sizeof(so));
	so.samples = list[i].samples;
	so.batch_size = o.batch_size;
	so.device_iterations = o.device_iterations;
	so.replication_factor = o.replication_factor;
	so.gradient_accumulation = o.gradient_accumulation;
	so.shuffle = o.shuffle;
	so.seed = o.seed;
	so.drop_last = o.drop_last;
	so.process_id = o.distributed_process_id;
	so.process_count = o.distributed_process_count;
	if (infeed_attach(f, dataset, &o, &info) != INFEED_OK)
		goto fail;
	if (verify) {
		if (sampler_init(&sampler, &so, &cause) == -1) {
			fprintf(stderr, "infeedctl: the daemon accepted options "
			    "the sampler refuses: %s\n", cause);
			free(cause);
			goto out;
		}
		expect = calloc(info.combined_batch_size, sizeof(*expect));
		seen = calloc(list[i].samples, 1);
		if (expect == NULL || seen == NULL) {
			fprintf(stderr, "infeedctl: out of memory for "
			    "--verify\n");
			goto out;
		}
	}
	total = epochs * info.steps_per_epoch;
	t0 = now_s();
	for (k = 0; k < total; k++) {
		r = infeed_next(f, &st);
		if (r != INFEED_OK)
			goto fail;
		e = k / info.steps_per_epoch;
		s = k % info.steps_per_epoch;
		if (st.epoch != e || st.step != s) {
			fprintf(stderr, "infeedctl: got epoch %llu step %llu, "
			    "expected epoch %llu step %llu\n",
			    (unsigned long long)st.epoch,
			    (unsigned long long)st.step,
			    (unsigned long long)e, (unsigned long long)s);
			bad++;
		}
		sink += touch(st.data, st.rows * info.sample_bytes);
		sink += touch(st.labels, st.rows * sizeof(int32_t));
		bytes += st.rows * info.sample_bytes;
		if (verify) {
			if (s == 0) {
				memset(seen, 0, list[i].samples);
				epoch0 = items;
			}
			nrows = sampler_step_indices(&sampler, e, s, expect);
			if (nrows != st.rows)
				bad++;
			for (row = 0; row < nrows && row < st.rows; row++) {
				if (st.indices[row] != expect[row] ||
				    st.indices[row] >= list[i].samples ||
				    seen[st.indices[row]]++)
					bad++;
				if (st.labels[row] < 0 || (list[i].classes &&
				    (uint32_t)st.labels[row] >=
				    list[i].classes))
					bad++;
			}
			if (s + 1 == info.steps_per_epoch &&
			    items + st.rows - epoch0 != sampler.block_length -
			    (o.drop_last ? sampler.block_length %
			    sampler.cbs : 0))
				bad++;
		}
		items += st.rows;
		steps++;
		if (infeed_release(f, &st) != INFEED_OK)
			goto fail;
		if (!json && isatty(STDERR_FILENO) &&
		    (s + 1 == info.steps_per_epoch))
			fprintf(stderr, "\repoch %llu/%llu done",
			    (unsigned long long)e + 1,
			    (unsigned long long)epochs);
	}
	secs = now_s() - t0;
	if (!json && isatty(STDERR_FILENO))
		fprintf(stderr, "\n");
	if (json) {
		printf("{\"dataset\":");
		json_string(dataset);
		printf(",\"combined_batch_size\":%llu,\"steps_per_epoch\":%llu,"
		    "\"last_step_rows\":%llu,\"steps\":%llu,\"items\":%llu,"
		    "\"seconds\":%.6f,\"items_per_s\":%.1f,\"gb_per_s\":%.4f,"
		    "\"verified\":%s}\n",
		    (unsigned long long)info.combined_batch_size,
		    (unsigned long long)info.steps_per_epoch,
		    (unsigned long long)info.last_step_rows,
		    (unsigned long long)steps, (unsigned long long)items, secs,
		    (double)items / secs, (double)bytes / secs / 1e9,
		    verify ? (bad == 0 ? "true" : "false") : "null");
	} else {
		printf("dataset              %s\n", dataset);
		printf("combined batch size  %llu\n",
		    (unsigned long long)info.combined_batch_size);
		printf("steps per epoch      %llu\n",
		    (unsigned long long)info.steps_per_epoch);
		printf("rows of last step    %llu\n",
		    (unsigned long long)info.last_step_rows);
		printf("steps                %llu\n", (unsigned long long)steps);
		printf("items                %llu\n", (unsigned long long)items);
		printf("seconds              %.3f\n", secs);
		printf("items/s              %.1f\n", (double)items / secs);
		printf("GB/s                 %.3f\n", (double)bytes / secs / 1e9);
		if (verify)
			printf("verify               %s\n", bad == 0 ?
			    "passed: every index in the documented order, "
			    "each exactly once per epoch" :
			    "FAILED");
	}
	rc = verify && bad != 0 ? 1 : 0;
	(void)sink;
	goto out;
fail:
	fprintf(stderr, "infeedctl: %s\n", infeed_error(f));
out:
	if (verify)
		sampler_clear(&sampler);
	free(expect);
	free(seen);
	infeed_datasets_free(list, n);
	infeed_free(f);
	return (rc);
}

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
	fprintf(stderr, "infeedctl: unknown command '%s'\n", argv[i]);
	usage(stderr);
	return (2);
}
