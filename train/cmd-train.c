/* SPDX-License-Identifier: MIT */
/*
 * cmd-train.c - `infeed-train train`: Graphcore's PopTorch pipelining
 * tutorial (mnist_pipeline.py) on Fashion-MNIST, fed by infeedd.
 *
 * Train B 40, GA 10, DI 10, 3 epochs, AdamW lr 0.001, pipelined over 4
 * IPUs (one block each); then evaluate on the test set with B 8, DI 100
 * (GA folded into DI, as the tutorial does).  `--mode compute` really
 * trains; `--mode emulate` only spends each step's modelled device time,
 * so the run goes as fast as the simulated device would.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "fail.h"
#include "device.h"
#include "executor.h"
#include "outputs.h"
#include "progress.h"
#include "source.h"

/* Fashion-MNIST's pixel mean and standard deviation after scaling to
 * [0, 1] (the tutorial normalises MNIST the same way with its own). */
#define FASHION_MEAN 0.2860f
#define FASHION_STD  0.3530f

struct train_args {
	struct executor_options x;
	struct output_spec out;
	struct ipu_config ipu;
	const char *socket, *dataset, *test_dataset, *profile;
	int epochs, test_batch, test_iterations;
	bool emulate, synthetic, json, quiet, shuffle;
	uint32_t workers, buffer_size;
	enum lr_schedule_kind lr_schedule;
};

/* What one pass over a dataset measured. */
struct pass_result {
	uint64_t steps, items;
	double loss_sum;        /* over returned outputs */
	uint64_t loss_n;
	uint64_t right, judged; /* returned predictions judged */
	double seconds, device_seconds;
};

/* Print the usage of infeed-train train to @fp. */
static void
usage(FILE *fp)
{
	fprintf(fp,
	    "usage: infeed-train train [OPTIONS]\n"
	    "\n"
	    "Train the pipelining tutorial's network (B1 conv 1->10, B2 conv "
	    "10->20,\nB3 linear 320->256, B4 linear 256->10) on a simulated "
	    "IPU system fed by\ninfeedd, then evaluate it on the test set.\n"
	    "\n"
	    "Data:\n"
	    "  --socket PATH              infeedd's socket (default "
	    "$INFEED_SOCKET or\n"
	    "                             " INFEED_DEFAULT_SOCKET ")\n"
	    "  --dataset NAME             training set (fashion-mnist-train)\n"
	    "  --test-dataset NAME        test set (fashion-mnist-test); "
	    "'none' skips it\n"
	    "  --synthetic-data           no infeedd: random data on the "
	    "device, as\n"
	    "                             poptorch's enableSyntheticData\n"
	    "  --no-shuffle, --seed N, --workers N, --buffer-size N\n"
	    "                             loader options (shuffle on, seed 0, "
	    "all\n"
	    "                             workers, 3 slots)\n"
	    "Batching (poptorch.Options):\n"
	    "  --batch-size B             micro-batch size (40)\n"
	    "  --gradient-accumulation M  micro-batches per weight update "
	    "(10)\n"
	    "  --device-iterations D      weight updates per host call (10)\n"
	    "  --replicas R               data-parallel copies (1)\n"
	    "  --epochs N                 (3)\n"
	    "  --test-batch-size B, --test-device-iterations D   (8, 100)\n"
	    "  --output-mode all|final|sum|every-N   what a step returns "
	    "(final)\n"
	    "Model and optimiser:\n"
	    "  --strategy NAME            pipelined (default), sharded, "
	    "grouped,\n"
	    "                             interleaved, gpipe or 1f1b\n"
	    "  --stages MAP               blocks per IPU, e.g. B1+B2,B3+B4 "
	    "(B1,B2,B3,B4)\n"
	    "  --no-recompute             keep activations instead of "
	    "recomputing\n"
	    "  --optimiser adamw|sgd      (adamw)\n"
	    "  --learning-rate LR         (0.001; the peak with onecycle)\n"
	    "  --lr-schedule NAME         constant (default), cosine or "
	    "onecycle, as\n"
	    "                             torch's CosineAnnealingLR and "
	    "OneCycleLR,\n"
	    "                             stepped once per host call\n"
	    "  --momentum X               sgd's momentum (0.9)\n"
	    "  --weight-decay X           (adamw 0.01, sgd 0)\n"
	    "                             (--optimizer, --lr and "
	    "--offload-optimizer\n"
	    "                             are accepted too)\n"
	    "Simulated device:\n"
	    "  --mode compute|emulate     really train (the default), or only "
	    "spend\n"
	    "                             the modelled device time\n"
	    "  --offload-optimiser        optimiser state in streaming memory\n"
	    "  --ipu KEY=VALUE            override a cost-model figure "
	    "(--ipu help lists them)\n"
	    "  --profile DIR              write DIR/train.json (trace) and "
	    "DIR/train.svg\n"
	    "Output:\n"
	    "  --json                     end with one JSON object line\n"
	    "  --quiet                    no progress bars\n");
}

enum {
	OPT_DATASET = 256, OPT_TEST_DATASET, OPT_SYNTHETIC, OPT_NO_SHUFFLE,
	OPT_SEED, OPT_WORKERS, OPT_BUFFER, OPT_BATCH, OPT_GA, OPT_DI,
	OPT_REPLICAS, OPT_EPOCHS, OPT_TEST_BATCH, OPT_TEST_DI, OPT_OUTPUT,
	OPT_STRATEGY, OPT_STAGES, OPT_NO_RECOMPUTE, OPT_OPTIMISER, OPT_LR,
	OPT_MOMENTUM, OPT_WD, OPT_LR_SCHEDULE, OPT_MODE, OPT_OFFLOAD, OPT_IPU, OPT_PROFILE,
	OPT_JSON, OPT_QUIET, OPT_SOCKET,
};

static const struct option train_options[] = {
	{ "socket", required_argument, NULL, OPT_SOCKET },
	{ "dataset", required_argument, NULL, OPT_DATASET },
	{ "test-dataset", required_argument, NULL, OPT_TEST_DATASET },
	{ "synthetic-data", no_argument, NULL, OPT_SYNTHETIC },
	{ "no-shuffle", no_argument, NULL, OPT_NO_SHUFFLE },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "workers", required_argument, NULL, OPT_WORKERS },
	{ "buffer-size", required_argument, NULL, OPT_BUFFER },
	{ "batch-size", required_argument, NULL, OPT_BATCH },
	{ "gradient-accumulation", required_argument, NULL, OPT_GA },
	{ "device-iterations", required_argument, NULL, OPT_DI },
	{ "replicas", required_argument, NULL, OPT_REPLICAS },
	{ "epochs", required_argument, NULL, OPT_EPOCHS },
	{ "test-batch-size", required_argument, NULL, OPT_TEST_BATCH },
	{ "test-device-iterations", required_argument, NULL, OPT_TEST_DI },
	{ "output-mode", required_argument, NULL, OPT_OUTPUT },
	{ "strategy", required_argument, NULL, OPT_STRATEGY },
	{ "stages", required_argument, NULL, OPT_STAGES },
	{ "no-recompute", no_argument, NULL, OPT_NO_RECOMPUTE },
	{ "optimiser", required_argument, NULL, OPT_OPTIMISER },
	{ "optimizer", required_argument, NULL, OPT_OPTIMISER },
	{ "learning-rate", required_argument, NULL, OPT_LR },
	{ "lr", required_argument, NULL, OPT_LR },
	{ "lr-schedule", required_argument, NULL, OPT_LR_SCHEDULE },
	{ "momentum", required_argument, NULL, OPT_MOMENTUM },
	{ "weight-decay", required_argument, NULL, OPT_WD },
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "offload-optimiser", no_argument, NULL, OPT_OFFLOAD },
	{ "offload-optimizer", no_argument, NULL, OPT_OFFLOAD },
	{ "ipu", required_argument, NULL, OPT_IPU },
	{ "profile", required_argument, NULL, OPT_PROFILE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Parse a finite number for option @opt, or say what is wrong. */
static int
parse_float(const char *opt, const char *s, float *v)
{
	char *end;

	errno = 0;
	*v = strtof(s, &end);
	if (errno || end == s || *end != '\0' || !isfinite(*v) || *v < 0) {
		fprintf(stderr, "infeed-train: --%s takes a non-negative "
		    "number, got '%s'\n", opt, s);
		return (-1);
	}
	return (0);
}

/* Parse argv into @a; 0 run, 1 done (help), 2 usage error. */
static int
parse_args(int argc, char **argv, struct train_args *a)
{
	char err[512];
	bool momentum_set = false, wd_set = false;
	const char *stages = NULL;
	long v;
	int c, sched;

	memset(a, 0, sizeof(*a));
	executor_options_default(&a->x);
	a->out.mode = OUTPUT_FINAL;
	a->out.every = 1;
	ipu_config_default(&a->ipu);
	a->dataset = "fashion-mnist-train";
	a->test_dataset = "fashion-mnist-test";
	a->epochs = 3;
	a->test_batch = 8;
	a->test_iterations = 100;
	a->shuffle = true;
	a->buffer_size = 3;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", train_options, NULL)) != -1) {
		switch (c) {
		case OPT_SOCKET: a->socket = optarg; break;
		case OPT_DATASET: a->dataset = optarg; break;
		case OPT_TEST_DATASET: a->test_dataset = optarg; break;
		case OPT_SYNTHETIC: a->synthetic = true; break;
		case OPT_NO_SHUFFLE: a->shuffle = false; break;
		case OPT_PROFILE: a->profile = optarg; break;
		case OPT_JSON: a->json = true; break;
		case OPT_QUIET: a->quiet = true; break;
		case OPT_NO_RECOMPUTE: a->x.recompute = false; break;
		case OPT_OFFLOAD: a->ipu.offload_optimiser = true; break;
		case OPT_STAGES: stages = optarg; break;
		case OPT_SEED:
			if (cli_int("seed", optarg, 0, INT64_MAX, &v) < 0)
				return (2);
			a->x.seed = v;
			break;
		case OPT_WORKERS:
			if (cli_int("workers", optarg, 0, 1024, &v) < 0)
				return (2);
			a->workers = v;
			break;
		case OPT_BUFFER:
			if (cli_int("buffer-size", optarg, 1, 64, &v) < 0)
				return (2);
			a->buffer_size = v;
			break;
		case OPT_BATCH:
			if (cli_int("batch-size", optarg, 1, 65536, &v) < 0)
				return (2);
			a->x.batch_size = v;
			break;
		case OPT_GA:
			if (cli_int("gradient-accumulation", optarg, 1,
			    65536, &v) < 0)
				return (2);
			a->x.gradient_accumulation = v;
			break;
		case OPT_DI:
			if (cli_int("device-iterations", optarg, 1, 1 << 20,
			    &v) < 0)
				return (2);
			a->x.device_iterations = v;
			break;
		case OPT_REPLICAS:
			if (cli_int("replicas", optarg, 1, 64, &v) < 0)
				return (2);
			a->x.replicas = v;
			break;
		case OPT_EPOCHS:
			if (cli_int("epochs", optarg, 1, 100000, &v) < 0)
				return (2);
			a->epochs = v;
			break;
		case OPT_TEST_BATCH:
			if (cli_int("test-batch-size", optarg, 1, 65536,
			    &v) < 0)
				return (2);
			a->test_batch = v;
			break;
		case OPT_TEST_DI:
			if (cli_int("test-device-iterations", optarg, 1,
			    1 << 20, &v) < 0)
				return (2);
			a->test_iterations = v;
			break;
		case OPT_OUTPUT:
			if (output_mode_parse(optarg, &a->out, err,
			    sizeof(err)) < 0)
				goto bad;
			break;
		case OPT_STRATEGY:
			if ((sched = schedule_parse(optarg)) < 0) {
				snprintf(err, sizeof(err), "unknown strategy "
				    "'%s': use pipelined, sharded, "
				    "grouped, interleaved, gpipe or 1f1b",
				    optarg);
				goto bad;
			}
			a->x.schedule = sched;
			break;
		case OPT_OPTIMISER:
			if (strcmp(optarg, "adamw") == 0) {
				a->x.optimiser = OPTIMISER_ADAMW;
			} else if (strcmp(optarg, "sgd") == 0) {
				a->x.optimiser = OPTIMISER_SGD;
			} else {
				snprintf(err, sizeof(err), "unknown optimiser "
				    "'%s': use adamw or sgd", optarg);
				goto bad;
			}
			break;
		case OPT_LR:
			if (parse_float("learning-rate", optarg, &a->x.lr) < 0)
				return (2);
			break;
		case OPT_LR_SCHEDULE:
			if (lr_schedule_parse(optarg, &a->lr_schedule) < 0) {
				snprintf(err, sizeof(err), "unknown learning-"
				    "rate schedule '%s': use constant, "
				    "cosine or onecycle", optarg);
				goto bad;
			}
			break;
		case OPT_MOMENTUM:
			if (parse_float("momentum", optarg, &a->x.momentum) < 0)
				return (2);
			momentum_set = true;
			break;
		case OPT_WD:
			if (parse_float("weight-decay", optarg,
			    &a->x.weight_decay) < 0)
				return (2);
			wd_set = true;
			break;
		case OPT_MODE:
			if (strcmp(optarg, "compute") == 0) {
				a->emulate = false;
			} else if (strcmp(optarg, "emulate") == 0) {
				a->emulate = true;
			} else {
				snprintf(err, sizeof(err), "unknown mode '%s': "
				    "use compute (really train) or "
				    "emulate (only spend the device "
				    "time)", optarg);
				goto bad;
			}
			break;
		case OPT_IPU:
			if (strcmp(optarg, "help") == 0) {
				ipu_config_print(&a->ipu, stdout, "  ");
				return (1);
			}
			if (ipu_config_parse(&a->ipu, optarg, err,
			    sizeof(err)) < 0)
				goto bad;
			break;
		case 'h':
			usage(stdout);
			return (1);
		default:
			fprintf(stderr, "infeed-train train --help lists the "
			    "options.\n");
			return (2);
		}
	}
	if (optind < argc) {
		snprintf(err, sizeof(err), "unexpected argument '%s'",
		    argv[optind]);
		goto bad;
	}
	/* torch.optim.SGD has no weight decay by default; the tutorial's
	 * SGD runs use momentum 0.9. */
	if (a->x.optimiser == OPTIMISER_SGD && !momentum_set)
		a->x.momentum = 0.9f;
	if (a->x.optimiser == OPTIMISER_ADAMW && momentum_set) {
		snprintf(err, sizeof(err), "--momentum is SGD's; AdamW uses "
		    "betas (0.9, 0.999). Add --optimiser sgd or drop "
		    "--momentum");
		goto bad;
	}
	if (a->x.optimiser == OPTIMISER_SGD && !wd_set)
		a->x.weight_decay = 0;
	if (stages != NULL &&
	    executor_stages_parse(&a->x, stages, err, sizeof(err)) < 0)
		goto bad;
	if (a->x.lr <= 0) {
		snprintf(err, sizeof(err), "--learning-rate must be above 0");
		goto bad;
	}
	if (output_mode_check(&a->out, a->x.device_iterations, err,
	    sizeof(err)) < 0)
		goto bad;
	if (strcmp(a->test_dataset, "none") == 0)
		a->test_dataset = NULL;
	return (0);
bad:
	fprintf(stderr, "infeed-train: %s\n", err);
	return (2);
}

/* Loader options for a pass over a dataset with @x's batching. */
static void
loader_options(const struct train_args *a, const struct executor_options *x,
    bool training, struct infeed_options *o)
{
	infeed_options_init(o);
	o->batch_size = x->batch_size;
	o->device_iterations = x->device_iterations;
	o->replication_factor = x->replicas;
	o->gradient_accumulation = x->gradient_accumulation;
	o->shuffle = training && a->shuffle;
	o->seed = x->seed;
	o->drop_last = training;        /* evaluate every test sample */
	o->num_workers = a->workers;
	o->buffer_size = a->buffer_size;
	o->load_indefinitely = false;   /* an EndOfData per epoch */
	o->to_float32 = true;
	o->scale = 1.0f / 255;
	o->nchannels = 1;
	o->mean[0] = FASHION_MEAN;
	o->std[0] = FASHION_STD;
}

/* Where training is in its learning-rate schedule, in host calls. */
struct lr_plan {
	enum lr_schedule_kind kind;
	float lr;
	uint64_t call, calls;
};

/* One epoch (or the test pass, @lr NULL): take steps until the end of the
 * epoch. */
static int
run_pass(const struct train_args *a, struct executor *x, struct device *dev,
    struct source *src, const struct executor_options *xo, struct lr_plan *lr,
    const char *title, uint64_t steps, struct pass_result *r, char *err,
    size_t errlen)
{
	bool training = lr != NULL;
	struct progress bar;
	struct host_outputs host = { 0 };
	struct output_spec spec = a->out;
	const float *data;
	const int32_t *labels;
	size_t rows;
	char status[96] = "";
	double t0 = now_seconds(), ready;
	int rc;

	memset(r, 0, sizeof(*r));
	if (!training)
		spec.mode = OUTPUT_ALL;         /* poptorch's inference default */
	progress_begin(&bar, title, steps, a->quiet);
	for (;;) {
		double wait0 = now_seconds();

		rc = source_next(src, &data, &labels, &rows, err, errlen);
		if (rc == 1)
			break;
		if (rc < 0)
			goto fail;
		ready = now_seconds();
		if (a->profile && training && r->steps == 0 &&
		    device_profile(dev, a->profile, "train", ready - wait0,
		    err, errlen) < 0)
			goto fail;
		if (a->emulate) {
			/* The device's DMA reads the step; then the host
			 * blocks in the call for the modelled time. */
			if (!src->synthetic)
				(void)host_transfer(data, rows *
				    shape_size(executor_model(x)->input) *
				    sizeof(float));
			source_release(src);
			device_wait_until(ready + device_call_seconds(dev) *
			    rows / executor_step_rows(x));
		} else {
			struct step_outputs all;
			struct model *m = executor_model(x);
			size_t i;

			if (training) {
				struct lr_point p = lr_schedule_at(lr->kind,
				    lr->lr, lr->call++, lr->calls);

				executor_set_optimiser(x, &p);
			}
			if (executor_run(x, data, labels, rows, &all, err,
			    errlen) < 0)
				goto fail;
			if (outputs_select(&spec, &all, labels, xo->batch_size,
			    training ? xo->gradient_accumulation
			    : 1,
			    xo->replicas,
			    training ? xo->device_iterations
			    : xo->device_iterations *
			    xo->gradient_accumulation,
			    m->classes, &host) < 0) {
				snprintf(err, errlen, "out of memory");
				goto fail;
			}
			source_release(src);
			for (i = 0; i < host.b_dim; i++)
				r->loss_sum += host.loss[i];
			r->loss_n += host.b_dim;
			for (i = 0; host.pred_labels &&
			    i < host.pred_rows; i++) {
				const float *p = host.preds + i * m->classes;
				int best = 0;
				int k;

				for (k = 1; k < m->classes; k++)
					if (p[k] > p[best])
						best = k;
				r->right += best == host.pred_labels[i];
			}
			if (host.pred_labels)
				r->judged += host.pred_rows;
			snprintf(status, sizeof(status),
			    "Loss: %.4f | Accuracy: %5.2f%%",
			    r->loss_sum / r->loss_n,
			    r->judged ? 100.0 * r->right / r->judged : 0);
		}
		r->steps++;
		r->items += rows;
		r->device_seconds += device_call_seconds(dev) * rows /
		    executor_step_rows(x);
		progress_update(&bar, r->steps, status);
	}
	r->seconds = now_seconds() - t0;
	progress_end(&bar, r->steps, status);
	host_outputs_free(&host);
	return (0);
fail:
	progress_end(&bar, r->steps, status);
	host_outputs_free(&host);
	return (-1);
}

/* Print a number or JSON null when nothing was measured. */
static void
json_number(const char *key, double v, bool have, bool comma)
{
	if (have)
		printf("\"%s\":%.6g%s", key, v, comma ? "," : "");
	else
		printf("\"%s\":null%s", key, comma ? "," : "");
}

/* A training run: the executors, devices and sources, and the results. */
struct train_run {
	struct executor		*x;		/* training */
	struct executor		*tx;		/* the test pass, or NULL */
	struct executor_options	 txo;
	struct device		 dev;
	struct device		 tdev;
	struct source		 src;
	struct source		 tsrc;
	struct pass_result	 ep;		/* the last epoch */
	struct pass_result	 test;
	double			 train_s;
	double			 device_s;
	uint64_t		 items;
	char			 err[512];
};

/* The executors and devices of training and testing; 0, or 2 (usage). */
static int
train_setup(const struct train_args *a, struct train_run *t)
{
	if ((t->x = executor_new(&a->x, true, t->err, sizeof(t->err))) ==
	    NULL || device_setup(&t->dev, &a->ipu, &a->x,
	    executor_model(t->x), executor_schedule(t->x), true, a->synthetic,
	    &a->out, t->err, sizeof(t->err)) < 0) {
		fprintf(stderr, "infeed-train: %s\n", t->err);
		return (2);
	}
	/* Evaluation: the same IPUs, GA folded into DI, no optimiser. */
	t->txo = a->x;
	t->txo.batch_size = a->test_batch;
	t->txo.device_iterations = a->test_iterations;
	t->txo.gradient_accumulation = 1;
	if (a->test_dataset && ((t->tx = executor_new(&t->txo, false, t->err,
	    sizeof(t->err))) == NULL || device_setup(&t->tdev, &a->ipu,
	    &t->txo, executor_model(t->tx), executor_schedule(t->tx), false,
	    a->synthetic, NULL, t->err, sizeof(t->err)) < 0)) {
		fprintf(stderr, "infeed-train: the test pass (--test-batch-size "
		    "%d, --test-device-iterations %d): %s\n", a->test_batch,
		    a->test_iterations, t->err);
		return (2);
	}
	return (0);
}

/* Open the training data: synthetic, or a session of infeedd. */
static int
train_open_source(const struct train_args *a, struct train_run *t)
{
	struct infeed_options	lo;
	size_t			rows = executor_step_rows(t->x);

	if (a->synthetic)
		return (source_open_synthetic(&t->src, executor_model(t->x),
		    rows, 60000 / rows ? 60000 / rows : 1, a->x.seed, t->err,
		    sizeof(t->err)));
	loader_options(a, &a->x, true, &lo);
	if (source_open_infeed(&t->src, a->socket, a->dataset, &lo,
	    executor_model(t->x), t->err, sizeof(t->err)) < 0)
		return (-1);
	if (t->src.info.steps_per_epoch == 0) {
		snprintf(t->err, sizeof(t->err), "dataset %s is smaller than "
		    "one step of %zu samples; lower the batch size, device "
		    "iterations, replicas or gradient accumulation",
		    a->dataset, rows);
		return (-1);
	}
	return (0);
}

/* Say on stderr what is trained on what, and how fast it should go. */
static void
train_announce(const struct train_args *a, const struct train_run *t)
{
	if (a->quiet)
		return;
	fprintf(stderr, "infeed-train: %s, %s over %d IPU%s x %d replica%s, "
	    "%zu samples a step, modelled %.2f ms a step (%.0f samples/s)%s"
	    "\n", executor_model(t->x)->name, schedule_name(a->x.schedule),
	    a->x.nstages, a->x.nstages > 1 ? "s" : "", a->x.replicas,
	    a->x.replicas > 1 ? "s" : "", executor_step_rows(t->x),
	    device_call_seconds(&t->dev) * 1e3,
	    executor_step_rows(t->x) / device_call_seconds(&t->dev),
	    a->emulate ? ", emulated" : "");
}

/* Run every epoch of training, then close its source. */
static int
train_epochs(const struct train_args *a, struct train_run *t)
{
	struct lr_plan	plan;
	uint64_t	steps;
	char		title[32];
	int		e;

	steps = a->synthetic ? t->src.steps_per_epoch :
	    t->src.info.steps_per_epoch;
	plan = (struct lr_plan){ .kind = a->lr_schedule, .lr = a->x.lr,
	    .calls = steps * (uint64_t)a->epochs };
	for (e = 0; e < a->epochs; e++) {
		snprintf(title, sizeof(title), "Epoch %d/%d", e + 1, a->epochs);
		if (run_pass(a, t->x, &t->dev, &t->src, &a->x, &plan, title,
		    steps, &t->ep, t->err, sizeof(t->err)) < 0)
			return (-1);
		t->train_s += t->ep.seconds;
		t->device_s += t->ep.device_seconds;
		t->items += t->ep.items;
	}
	source_close(&t->src);
	return (0);
}

/* The test pass with the trained weights. */
static int
train_test(const struct train_args *a, struct train_run *t)
{
	struct infeed_options	lo;
	size_t			rows = executor_step_rows(t->tx);

	/* The trained weights move to the inference model. */
	memcpy(executor_model(t->tx)->params, executor_model(t->x)->params,
	    executor_model(t->x)->nparams * sizeof(float));
	if (a->synthetic) {
		if (source_open_synthetic(&t->tsrc, executor_model(t->tx),
		    rows, 10000 / rows ? 10000 / rows : 1, a->x.seed + 1,
		    t->err, sizeof(t->err)) < 0)
			return (-1);
	} else {
		loader_options(a, &t->txo, false, &lo);
		if (source_open_infeed(&t->tsrc, a->socket, a->test_dataset,
		    &lo, executor_model(t->tx), t->err, sizeof(t->err)) < 0)
			return (-1);
	}
	if (run_pass(a, t->tx, &t->tdev, &t->tsrc, &t->txo, NULL, "Testing",
	    a->synthetic ? t->tsrc.steps_per_epoch :
	    t->tsrc.info.steps_per_epoch, &t->test, t->err,
	    sizeof(t->err)) < 0)
		return (-1);
	source_close(&t->tsrc);
	return (0);
}

/* Print the run's loss, accuracy and throughput for a person. */
static void
train_report_text(const struct train_args *a, const struct train_run *t)
{
	const struct pass_result	*ep = &t->ep, *test = &t->test;

	if (!a->emulate && ep->judged)
		printf("Train: loss %.4f, accuracy %.2f%% (last epoch, %s "
		    "outputs)\n", ep->loss_sum / (ep->loss_n ? ep->loss_n : 1),
		    100.0 * ep->right / ep->judged,
		    a->out.mode == OUTPUT_ALL ? "all" : "returned");
	else if (!a->emulate)
		printf("Train: loss %.4f (output mode sum returns no "
		    "predictions to judge)\n",
		    ep->loss_sum / (ep->loss_n ? ep->loss_n : 1));
	if (t->tx != NULL && !a->emulate)
		printf("Test: accuracy %.2f%% of %llu samples%s\n",
		    test->judged ? 100.0 * test->right / test->judged : 0,
		    (unsigned long long)test->judged,
		    a->synthetic ? " (synthetic data, so chance level)" : "");
	printf("Throughput: %.0f samples/s measured over %.1f s; the "
	    "simulated device alone: %.0f samples/s\n",
	    t->items / t->train_s, t->train_s, t->items / t->device_s);
	if (a->profile)
		printf("Profile: %s/train.json (open in ui.perfetto.dev or "
		    "chrome://tracing) and %s/train.svg\n", a->profile,
		    a->profile);
}

/* Print the run's results as one JSON object. */
static void
train_report_json(const struct train_args *a, const struct train_run *t)
{
	const struct pass_result	*ep = &t->ep, *test = &t->test;
	bool				 trained = !a->emulate && ep->loss_n > 0;

	printf("{");
	json_number("train_loss", ep->loss_sum / (ep->loss_n ? ep->loss_n :
	    1), trained, true);
	json_number("train_accuracy", ep->judged ? (double)ep->right /
	    ep->judged : 0, trained && ep->judged, true);
	json_number("test_accuracy", test->judged ? (double)test->right /
	    test->judged : 0, t->tx != NULL && !a->emulate && !a->synthetic &&
	    test->judged, true);
	printf("\"epochs\":%d,\"items\":%llu,\"test_items\":%llu,",
	    a->epochs, (unsigned long long)t->items,
	    (unsigned long long)test->items);
	json_number("items_per_s", t->items / t->train_s, t->train_s > 0,
	    true);
	json_number("device_items_per_s", t->items / t->device_s,
	    t->device_s > 0, true);
	printf("\"learning_rate\":%.7g,\"lr_schedule\":\"%s\",",
	    a->x.lr, lr_schedule_name(a->lr_schedule));
	printf("\"mode\":\"%s\",\"strategy\":\"%s\",\"synthetic\":%s}\n",
	    a->emulate ? "emulate" : "compute", schedule_name(a->x.schedule),
	    a->synthetic ? "true" : "false");
}

/* infeed-train train */
int
cmd_train(int argc, char **argv)
{
	struct train_args	 a;
	struct train_run	*t;
	int			 rc, prc = parse_args(argc, argv, &a);

	if (prc != 0)
		return (prc == 1 ? 0 : 2);
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		fprintf(stderr, "infeed-train: out of memory\n");
		return (1);
	}
	if ((rc = train_setup(&a, t)) != 0)
		goto out;
	rc = 1;
	if (train_open_source(&a, t) < 0)
		goto fail;
	train_announce(&a, t);
	if (train_epochs(&a, t) < 0 || (t->tx != NULL && train_test(&a, t) < 0))
		goto fail;
	train_report_text(&a, t);
	if (a.json)
		train_report_json(&a, t);
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "infeed-train: %s\n", t->err);
out:
	source_close(&t->src);
	source_close(&t->tsrc);
	executor_free(t->x);
	executor_free(t->tx);
	free(t);
	return (rc);
}
