/* SPDX-License-Identifier: MIT */
/*
 * cmd-dataloading.c - `infeed-train dataloading`: Graphcore's
 * efficient-data-loading tutorial as one experiment.
 *
 * The tutorial runs poptorch.inferenceModel of its ClassificationModel
 * (1x128x128 inputs) on one IPU per replica with micro-batch 16 and 50
 * device iterations, and compares three throughputs: the loader alone, the
 * IPU with synthetic data, and the IPU with real data.  Real data reaching
 * the synthetic figure means the loader is not the bottleneck.  Here the
 * loader is infeedd, the IPU is the simulated one (emulate mode by
 * default: each step takes its modelled device time), and the host
 * transfer really reads every byte of every step.
 */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cli.h"
#include "commands.h"
#include "fail.h"
#include "device.h"
#include "executor.h"
#include "progress.h"
#include "source.h"

struct dl_args {
	struct executor_options x;
	struct ipu_config ipu;
	const char *socket, *dataset, *profile, *transform;
	int replicas[8], nreplicas;
	int steps, rounds;
	uint32_t workers, buffer_size;
	bool compute, json, quiet, shuffle;
};

/* One row of the table: medians over the rounds. */
struct dl_row {
	int replicas;
	size_t step_rows;
	double loader, synthetic, real;  /* items/s */
	double ratio;                    /* median of each round's real/syn */
	double ratio_min, ratio_max;
	double modelled;                 /* the cost model's synthetic rate */
};

#define MAX_ROUNDS 50

/* Print the usage of infeed-train dataloading to @fp. */
static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: infeed-train dataloading [OPTIONS]\n"
	    "\n"
	    "The efficient-data-loading experiment: throughput of the loader "
	    "alone, of\nthe simulated IPU with synthetic data, and of the IPU "
	    "fed by infeedd, for\nthe tutorial's ClassificationModel "
	    "(1x128x128 inputs, inference).\n"
	    "\n"
	    "  --socket PATH            infeedd's socket (default "
	    "$INFEED_SOCKET or\n"
	    "                           " INFEED_DEFAULT_SOCKET ")\n"
	    "  --dataset NAME           (tutorial-synthetic)\n"
	    "  --transform PIPELINE     for a dataset of images: the "
	    "torchvision pipeline\n"
	    "                           the workers run, ending in "
	    "ToTensor(); the model\n"
	    "                           then takes its [3, H, W] rows\n"
	    "  --batch-size B           micro-batch size (16)\n"
	    "  --device-iterations D    (50)\n"
	    "  --replicas R             run only R replicas (default: 1, then "
	    "4);\n"
	    "                           may be given more than once\n"
	    "  --steps N                steps measured per figure, after one "
	    "warm-up\n"
	    "                           step (36)\n"
	    "  --rounds N               repeat the three measurements N times "
	    "and\n"
	    "                           report medians (1; at most 50)\n"
	    "  --workers N              loader workers (0: the daemon's pool)\n"
	    "  --buffer-size N          ring slots (3)\n"
	    "  --no-shuffle             read in order\n"
	    "  --mode emulate|compute   spend the modelled device time "
	    "(default), or\n"
	    "                           really run the model on this CPU\n"
	    "  --ipu KEY=VALUE          override a cost-model figure (--ipu "
	    "help)\n"
	    "  --profile DIR            write DIR/dataloading-rR.json and "
	    ".svg\n"
	    "  --json                   end with one JSON object line\n"
	    "  --quiet                  no progress output\n");
}

enum {
	OPT_SOCKET = 256, OPT_DATASET, OPT_TRANSFORM, OPT_BATCH, OPT_DI, OPT_REPLICAS,
	OPT_STEPS, OPT_ROUNDS, OPT_WORKERS, OPT_BUFFER, OPT_NO_SHUFFLE, OPT_MODE, OPT_IPU,
	OPT_PROFILE, OPT_JSON, OPT_QUIET,
};

#define DA(field)	offsetof(struct dl_args, field)

/* The options in getopt's order. */
static const struct cli_opt dl_options[] = {
	{ "socket", OPT_SOCKET, CLI_STRING, DA(socket), 0, 0 },
	{ "dataset", OPT_DATASET, CLI_STRING, DA(dataset), 0, 0 },
	{ "transform", OPT_TRANSFORM, CLI_STRING, DA(transform), 0, 0 },
	{ "batch-size", OPT_BATCH, CLI_INT, DA(x.batch_size), 1, 65536 },
	{ "device-iterations", OPT_DI, CLI_INT, DA(x.device_iterations), 1,
	    1 << 20 },
	{ "replicas", OPT_REPLICAS, CLI_OWN, 0, 0, 0 },
	{ "steps", OPT_STEPS, CLI_INT, DA(steps), 1, 1000000 },
	{ "rounds", OPT_ROUNDS, CLI_INT, DA(rounds), 1, MAX_ROUNDS },
	{ "workers", OPT_WORKERS, CLI_U32, DA(workers), 0, 1024 },
	{ "buffer-size", OPT_BUFFER, CLI_U32, DA(buffer_size), 1, 64 },
	{ "no-shuffle", OPT_NO_SHUFFLE, CLI_FALSE, DA(shuffle), 0, 0 },
	{ "mode", OPT_MODE, CLI_OWN, 0, 0, 0 },
	{ "ipu", OPT_IPU, CLI_OWN, 0, 0, 0 },
	{ "profile", OPT_PROFILE, CLI_STRING, DA(profile), 0, 0 },
	{ "json", OPT_JSON, CLI_TRUE, DA(json), 0, 0 },
	{ "quiet", OPT_QUIET, CLI_TRUE, DA(quiet), 0, 0 },
	{ "help", 'h', CLI_HELP, 0, 0, 0 },
};

/* The tutorial's settings, before the command line. */
static void
dl_args_default(struct dl_args *a)
{
	memset(a, 0, sizeof(*a));
	executor_options_default(&a->x);
	a->x.model = MODEL_DATALOADING_TUTORIAL;
	a->x.nstages = 1;
	a->x.stage_first_block[0] = 0;
	a->x.batch_size = 16;
	a->x.device_iterations = 50;
	a->x.gradient_accumulation = 1;
	ipu_config_default(&a->ipu);
	a->dataset = "tutorial-synthetic";
	a->steps = 36;
	a->rounds = 1;
	a->buffer_size = 3;
	a->shuffle = true;
}

/* --replicas, --mode and --ipu (cli_command.own). */
static int
dl_option(void *args, int id, const char *arg)
{
	struct dl_args	*a = args;
	long		 v;

	switch (id) {
	case OPT_REPLICAS:
		if (cli_int("replicas", arg, 1, 64, &v) < 0)
			return (2);
		if (a->nreplicas == 8) {
			fprintf(stderr, "infeed-train: at most 8 --replicas "
			    "values\n");
			return (2);
		}
		a->replicas[a->nreplicas++] = v;
		return (0);
	case OPT_MODE:
		if (strcmp(arg, "compute") == 0) {
			a->compute = true;
		} else if (strcmp(arg, "emulate") == 0) {
			a->compute = false;
		} else {
			fprintf(stderr, "infeed-train: unknown mode '%s': use "
			    "emulate (spend the modelled device time) or "
			    "compute (run the model on this CPU)\n", arg);
			return (2);
		}
		return (0);
	default:
		return (cli_ipu(&a->ipu, arg));
	}
}

static const struct cli_command dl_cli = {
	"infeed-train dataloading", dl_options,
	sizeof(dl_options) / sizeof(dl_options[0]), usage, dl_option,
};

/* 0 run, 1 done (help), 2 usage error. */
static int
parse_args(int argc, char **argv, struct dl_args *a)
{
	int rc;

	dl_args_default(a);
	if ((rc = cli_parse(&dl_cli, argc, argv, a)) != 0)
		return (rc);
	if (optind < argc) {
		fprintf(stderr, "infeed-train: unexpected argument '%s'\n",
		    argv[optind]);
		return (2);
	}
	if (a->nreplicas == 0) {
		a->replicas[0] = 1;
		a->replicas[1] = 4;
		a->nreplicas = 2;
	}
	return (0);
}

enum measure { LOADER_ALONE, SYNTHETIC, REAL };

/* Open the source that @what reads: synthetic, or a session of infeedd
 * that loads indefinitely. */
static int
dl_open(const struct dl_args *a, struct executor *x, enum measure what,
    struct source *src, char *err, size_t errlen)
{
	struct infeed_options o;

	if (what == SYNTHETIC)
		return (source_open_synthetic(src, executor_model(x),
		    executor_step_rows(x), a->steps + 1, 1, err, errlen));
	infeed_options_init(&o);
	o.batch_size = a->x.batch_size;
	o.device_iterations = a->x.device_iterations;
	o.replication_factor = a->x.replicas;
	o.shuffle = a->shuffle;
	o.num_workers = a->workers;
	o.buffer_size = a->buffer_size;
	o.load_indefinitely = true;
	o.to_float32 = a->transform == NULL;	/* images: the pipeline's */
	o.transform = a->transform;
	return (source_open_infeed(src, a->socket, a->dataset, &o,
	    executor_model(x), err, errlen));
}

/*
 * Take one warm-up step, then a->steps measured ones, and return items/s.
 * LOADER_ALONE reads every step and hands it back at once; SYNTHETIC
 * spends the device time on data already on the device; REAL reads the
 * step from infeedd (the host transfer), then the device time.
 */
static double
measure(const struct dl_args *a, struct executor *x, const struct device *dev,
    enum measure what, const char *title, char *err, size_t errlen)
{
	struct source src;
	struct progress bar;
	struct step_outputs all;
	const float *data;
	const int32_t *labels;
	size_t rows, items = 0, bytes;
	double t0 = 0, ready, rate = -1;
	int rc;
	int s;

	rc = dl_open(a, x, what, &src, err, errlen);
	if (rc < 0)
		return (-1);
	bytes = shape_size(executor_model(x)->input) * sizeof(float);
	progress_begin(&bar, title, a->steps + 1, a->quiet);
	for (s = 0; s <= a->steps; s++) {
		if (s == 1)
			t0 = clock_now_s();     /* after the warm-up step */
		if ((rc = source_next(&src, &data, &labels, &rows, err,
		    errlen)) == 1)
			rc = source_next(&src, &data, &labels, &rows, err,
			    errlen);
		if (rc != 0) {
			if (rc == 1)
				snprintf(err, errlen, "the loader returned an "
				    "empty epoch");
			goto out;
		}
		ready = clock_now_s();
		if (what != SYNTHETIC)
			(void)host_transfer(data, rows * bytes);
		if (a->compute && what != LOADER_ALONE) {
			if (executor_run(x, data, labels, rows, &all, err,
			    errlen) < 0)
				goto out;
			source_release(&src);
		} else {
			source_release(&src);
			if (what != LOADER_ALONE)
				device_wait_until(ready +
				    device_call_seconds(dev) *
				    rows / executor_step_rows(x));
		}
		if (s > 0)
			items += rows;
		progress_update(&bar, s + 1, NULL);
	}
	rate = items / (clock_now_s() - t0);
out:
	progress_end(&bar, a->steps + 1, NULL);
	source_close(&src);
	return (rate);
}

/* qsort comparison of two doubles. */
static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return ((x > y) - (x < y));
}

/* The median of @n values (sorts a copy). */
static double
median(const double *v, int n)
{
	double s[MAX_ROUNDS];

	memcpy(s, v, n * sizeof(double));
	qsort(s, n, sizeof(double), cmp_double);
	return (n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2);
}

/* Say whether the loader is the bottleneck and what to change. */
static void
verdict(const struct dl_args *a, const struct dl_row *r)
{
	double share = r->ratio;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	printf("R %d: real data reaches %.0f%% of synthetic. ", r->replicas,
	    100 * share);
	if (r->loader < r->synthetic) {
		printf("The loader is the bottleneck: alone it delivers %.0f "
		    "items/s and the device takes %.0f.\n", r->loader,
		    r->synthetic);
		printf("     Give infeedd more workers (workers= in its "
		    "config; %s, this host has %ld cores) or faster "
		    "storage; a bigger global batch does not help a "
		    "loader-bound run.\n",
		    a->workers ? "--workers limits this session" :
		    "the session uses the whole pool", cores);
		if (a->transform != NULL)
			printf("     Decoding and augmenting is the cost here: "
			    "about %.1f times this host's cores would keep "
			    "up; or store the images smaller, or end the "
			    "pipeline with PILToTensor() and normalise on the "
			    "device.\n", r->synthetic / r->loader);
	} else if (share < 0.9) {
		printf("The loader alone keeps up (%.0f items/s) but not next "
		    "to the trainer: they compete for this host's %ld "
		    "cores and memory bandwidth.\n", r->loader, cores);
		printf("     Raise --buffer-size (%u now) to absorb jitter, "
		    "raise --device-iterations for fewer, larger steps, or "
		    "run infeedd on cores the trainer does not use.\n",
		    a->buffer_size);
	} else {
		printf("The loader is not the bottleneck (alone: %.0f "
		    "items/s, %.1fx what the device needs).\n", r->loader,
		    r->loader / r->synthetic);
	}
}

/* Measure @r's configuration a->rounds times and keep the medians. */
static int
dl_rounds(const struct dl_args *a, struct executor *x,
    const struct device *syn, const struct device *real, struct dl_row *r,
    char *err, size_t errlen)
{
	double	loader[MAX_ROUNDS], syn_rate[MAX_ROUNDS];
	double	real_rate[MAX_ROUNDS], ratio[MAX_ROUNDS];
	char	title[48];
	int	k;

	for (k = 0; k < a->rounds; k++) {
		snprintf(title, sizeof(title), "R %d loader alone ",
		    r->replicas);
		if ((loader[k] = measure(a, x, real, LOADER_ALONE, title, err,
		    errlen)) < 0)
			return (-1);
		snprintf(title, sizeof(title), "R %d synthetic data",
		    r->replicas);
		if ((syn_rate[k] = measure(a, x, syn, SYNTHETIC, title, err,
		    errlen)) < 0)
			return (-1);
		snprintf(title, sizeof(title), "R %d real data     ",
		    r->replicas);
		if ((real_rate[k] = measure(a, x, real, REAL, title, err,
		    errlen)) < 0)
			return (-1);
		ratio[k] = real_rate[k] / syn_rate[k];
	}
	r->loader = median(loader, a->rounds);
	r->synthetic = median(syn_rate, a->rounds);
	r->real = median(real_rate, a->rounds);
	r->ratio = median(ratio, a->rounds);
	r->ratio_min = r->ratio_max = ratio[0];
	for (k = 1; k < a->rounds; k++) {
		if (ratio[k] < r->ratio_min)
			r->ratio_min = ratio[k];
		if (ratio[k] > r->ratio_max)
			r->ratio_max = ratio[k];
	}
	return (0);
}

/* One row of the table: a->x.replicas replicas, measured; 0, 1 (run
 * time) or 2 (a configuration refused), said on stderr. */
static int
dl_row_measure(const struct dl_args *a, struct dl_row *r)
{
	struct executor	*x;
	struct device	 syn, real;
	char		 err[512], title[48];
	int		 rc = 1;

	x = executor_new(&a->x, false, err, sizeof(err));
	if (x == NULL ||
	    device_setup(&syn, &a->ipu, &a->x, executor_model(x),
	    executor_schedule(x), false, true, NULL, err, sizeof(err)) < 0 ||
	    device_setup(&real, &a->ipu, &a->x, executor_model(x),
	    executor_schedule(x), false, false, NULL, err, sizeof(err)) < 0) {
		rc = 2;
		goto out;
	}
	memset(r, 0, sizeof(*r));
	r->replicas = a->x.replicas;
	r->step_rows = executor_step_rows(x);
	r->modelled = syn.timing.items_per_s;
	if (a->profile) {
		snprintf(title, sizeof(title), "dataloading-r%d", r->replicas);
		if (device_profile(&real, a->profile, title, 0, err,
		    sizeof(err)) < 0)
			goto out;
	}
	if (dl_rounds(a, x, &syn, &real, r, err, sizeof(err)) < 0)
		goto out;
	rc = 0;
out:
	if (rc != 0)
		fprintf(stderr, "infeed-train: %s\n", err);
	executor_free(x);
	return (rc);
}

/* Print the table of every configuration, with the tutorial's figures. */
static void
dl_print_table(const struct dl_args *a, const struct dl_row *rows)
{
	int i;

	printf("\nEfficient data loading: ClassificationModel %dx%dx%d%s%s, "
	    "B %d, DI %d, %s mode, %d measured steps each%s\n",
	    a->x.input.c ? a->x.input.c : 1, a->x.input.c ? a->x.input.h : 128,
	    a->x.input.c ? a->x.input.w : 128, a->transform ? " from " : "",
	    a->transform ? a->transform : "", a->x.batch_size, a->x.device_iterations,
	    a->compute ? "compute" : "emulate", a->steps,
	    a->rounds > 1 ? ", medians of the rounds" : "");
	printf("%-4s %8s %14s %14s %14s %8s\n", "R", "step", "loader alone",
	    "synthetic", "real data", "real/syn");
	for (i = 0; i < a->nreplicas; i++)
		printf("%-4d %8zu %14.0f %14.0f %14.0f %7.0f%%\n",
		    rows[i].replicas, rows[i].step_rows, rows[i].loader,
		    rows[i].synthetic, rows[i].real, 100 * rows[i].ratio);
	if (a->rounds > 1)
		for (i = 0; i < a->nreplicas; i++)
			printf("R %d: real/synthetic ranged %.0f%% to %.0f%% "
			    "over %d rounds\n", rows[i].replicas,
			    100 * rows[i].ratio_min, 100 * rows[i].ratio_max,
			    a->rounds);
	printf("(items/s; %sthe cost model gives", a->transform ? "" :
	    "the tutorial's IPU printed 34,307 synthetic at R 1 and 136,452 "
	    "at R 4; ");
	for (i = 0; i < a->nreplicas; i++)
		printf(" %.0f at R %d", rows[i].modelled, rows[i].replicas);
	printf(")\n\n");
}

/* Print the first configuration's figures, then every row, as JSON. */
static void
dl_print_json(const struct dl_args *a, const struct dl_row *rows)
{
	int i;

	printf("{\"loader_items_per_s\":%.1f,\"synthetic_items_per_s\":"
	    "%.1f,\"real_items_per_s\":%.1f,\"rounds\":%d,"
	    "\"runs\":[", rows[0].loader, rows[0].synthetic,
	    rows[0].real, a->rounds);
	for (i = 0; i < a->nreplicas; i++)
		printf("%s{\"replicas\":%d,\"combined_batch_size\":%zu,"
		    "\"loader_items_per_s\":%.1f,"
		    "\"synthetic_items_per_s\":%.1f,"
		    "\"real_items_per_s\":%.1f,"
		    "\"real_over_synthetic\":%.4f,"
		    "\"modelled_items_per_s\":%.1f}",
		    i ? "," : "", rows[i].replicas,
		    rows[i].step_rows, rows[i].loader,
		    rows[i].synthetic, rows[i].real, rows[i].ratio,
		    rows[i].modelled);
	printf("]}\n");
}

/* With --transform, size the model for the pipeline's rows. */
static int
dl_probe_images(struct dl_args *a)
{
	struct infeed_options	o;
	char			err[512];

	infeed_options_init(&o);
	o.transform = a->transform;
	if (source_probe_images(a->socket, a->dataset, &o, &a->x.input,
	    &a->x.classes, err, sizeof(err)) != 0) {
		fprintf(stderr, "infeed-train: %s\n", err);
		return (-1);
	}
	return (0);
}

/* infeed-train dataloading */
int
cmd_dataloading(int argc, char **argv)
{
	struct dl_args	a;
	struct dl_row	rows[8];
	int		i, rc, prc = parse_args(argc, argv, &a);

	if (prc != 0)
		return (prc == 1 ? 0 : 2);
	if (a.transform != NULL && dl_probe_images(&a) != 0)
		return (1);
	for (i = 0; i < a.nreplicas; i++) {
		a.x.replicas = a.replicas[i];
		if ((rc = dl_row_measure(&a, &rows[i])) != 0)
			return (rc);
	}
	dl_print_table(&a, rows);
	for (i = 0; i < a.nreplicas; i++)
		verdict(&a, &rows[i]);
	if (a.json)
		dl_print_json(&a, rows);
	return (0);
}
