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
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cli.h"
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
	const char *stages;             /* --stages, parsed once all is read */
	int epochs, test_batch, test_iterations;
	bool emulate, synthetic, json, quiet, shuffle;
	bool momentum_set, wd_set;      /* given, so not the optimiser's */
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

#define TA(field)	offsetof(struct train_args, field)

/* The options in getopt's order (which its messages about ambiguous
 * abbreviations follow); an alias comes after the name it stands for. */
static const struct cli_opt train_options[] = {
	{ "socket", OPT_SOCKET, CLI_STRING, TA(socket), 0, 0 },
	{ "dataset", OPT_DATASET, CLI_STRING, TA(dataset), 0, 0 },
	{ "test-dataset", OPT_TEST_DATASET, CLI_STRING, TA(test_dataset), 0,
	    0 },
	{ "synthetic-data", OPT_SYNTHETIC, CLI_TRUE, TA(synthetic), 0, 0 },
	{ "no-shuffle", OPT_NO_SHUFFLE, CLI_FALSE, TA(shuffle), 0, 0 },
	{ "seed", OPT_SEED, CLI_U64, TA(x.seed), 0, INT64_MAX },
	{ "workers", OPT_WORKERS, CLI_U32, TA(workers), 0, 1024 },
	{ "buffer-size", OPT_BUFFER, CLI_U32, TA(buffer_size), 1, 64 },
	{ "batch-size", OPT_BATCH, CLI_INT, TA(x.batch_size), 1, 65536 },
	{ "gradient-accumulation", OPT_GA, CLI_INT,
	    TA(x.gradient_accumulation), 1, 65536 },
	{ "device-iterations", OPT_DI, CLI_INT, TA(x.device_iterations), 1,
	    1 << 20 },
	{ "replicas", OPT_REPLICAS, CLI_INT, TA(x.replicas), 1, 64 },
	{ "epochs", OPT_EPOCHS, CLI_INT, TA(epochs), 1, 100000 },
	{ "test-batch-size", OPT_TEST_BATCH, CLI_INT, TA(test_batch), 1,
	    65536 },
	{ "test-device-iterations", OPT_TEST_DI, CLI_INT, TA(test_iterations),
	    1, 1 << 20 },
	{ "output-mode", OPT_OUTPUT, CLI_OWN, 0, 0, 0 },
	{ "strategy", OPT_STRATEGY, CLI_OWN, 0, 0, 0 },
	{ "stages", OPT_STAGES, CLI_STRING, TA(stages), 0, 0 },
	{ "no-recompute", OPT_NO_RECOMPUTE, CLI_FALSE, TA(x.recompute), 0, 0 },
	{ "optimiser", OPT_OPTIMISER, CLI_OWN, 0, 0, 0 },
	{ "optimizer", OPT_OPTIMISER, CLI_OWN, 0, 0, 0 },
	{ "learning-rate", OPT_LR, CLI_FLOAT, TA(x.lr), 0, 0 },
	{ "lr", OPT_LR, CLI_FLOAT, TA(x.lr), 0, 0 },
	{ "lr-schedule", OPT_LR_SCHEDULE, CLI_OWN, 0, 0, 0 },
	{ "momentum", OPT_MOMENTUM, CLI_OWN, 0, 0, 0 },
	{ "weight-decay", OPT_WD, CLI_OWN, 0, 0, 0 },
	{ "mode", OPT_MODE, CLI_OWN, 0, 0, 0 },
	{ "offload-optimiser", OPT_OFFLOAD, CLI_TRUE,
	    TA(ipu.offload_optimiser), 0, 0 },
	{ "offload-optimizer", OPT_OFFLOAD, CLI_TRUE,
	    TA(ipu.offload_optimiser), 0, 0 },
	{ "ipu", OPT_IPU, CLI_OWN, 0, 0, 0 },
	{ "profile", OPT_PROFILE, CLI_STRING, TA(profile), 0, 0 },
	{ "json", OPT_JSON, CLI_TRUE, TA(json), 0, 0 },
	{ "quiet", OPT_QUIET, CLI_TRUE, TA(quiet), 0, 0 },
	{ "help", 'h', CLI_HELP, 0, 0, 0 },
};

/* The tutorial's settings, before the command line. */
static void
train_args_default(struct train_args *a)
{
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
}

/* --optimiser and --mode: a choice of two words. */
static int
train_choice(struct train_args *a, int id, const char *arg)
{
	if (id == OPT_OPTIMISER) {
		if (strcmp(arg, "adamw") == 0)
			a->x.optimiser = OPTIMISER_ADAMW;
		else if (strcmp(arg, "sgd") == 0)
			a->x.optimiser = OPTIMISER_SGD;
		else
			return (cli_refuse("unknown optimiser '%s': use adamw "
			    "or sgd", arg));
		return (0);
	}
	if (strcmp(arg, "compute") == 0)
		a->emulate = false;
	else if (strcmp(arg, "emulate") == 0)
		a->emulate = true;
	else
		return (cli_refuse("unknown mode '%s': use compute (really "
		    "train) or emulate (only spend the device time)", arg));
	return (0);
}

/* The options that are more than a value to store (cli_command.own). */
static int
train_option(void *args, int id, const char *arg)
{
	struct train_args	*a = args;
	char			 err[512];
	int			 sched;

	switch (id) {
	case OPT_OUTPUT:
		if (output_mode_parse(arg, &a->out, err, sizeof(err)) < 0)
			return (cli_refuse("%s", err));
		return (0);
	case OPT_STRATEGY:
		if ((sched = schedule_parse(arg)) < 0)
			return (cli_refuse("unknown strategy '%s': use "
			    "pipelined, sharded, grouped, interleaved, gpipe "
			    "or 1f1b", arg));
		a->x.schedule = sched;
		return (0);
	case OPT_LR_SCHEDULE:
		if (lr_schedule_parse(arg, &a->lr_schedule) < 0)
			return (cli_refuse("unknown learning-rate schedule "
			    "'%s': use constant, cosine or onecycle", arg));
		return (0);
	case OPT_MOMENTUM:
		if (cli_float("momentum", arg, &a->x.momentum) < 0)
			return (2);
		a->momentum_set = true;
		return (0);
	case OPT_WD:
		if (cli_float("weight-decay", arg, &a->x.weight_decay) < 0)
			return (2);
		a->wd_set = true;
		return (0);
	case OPT_IPU:
		return (cli_ipu(&a->ipu, arg));
	default:
		return (train_choice(a, id, arg));
	}
}

static const struct cli_command train_cli = {
	"infeed-train train", train_options,
	sizeof(train_options) / sizeof(train_options[0]), usage, train_option,
};

/* What the options mean together: defaults that follow from others, and
 * combinations refused; 0 run, 2 usage error. */
static int
train_args_check(int argc, char **argv, struct train_args *a)
{
	char err[512];

	if (optind < argc)
		return (cli_refuse("unexpected argument '%s'", argv[optind]));
	/* torch.optim.SGD has no weight decay by default; the tutorial's
	 * SGD runs use momentum 0.9. */
	if (a->x.optimiser == OPTIMISER_SGD && !a->momentum_set)
		a->x.momentum = 0.9f;
	if (a->x.optimiser == OPTIMISER_ADAMW && a->momentum_set)
		return (cli_refuse("--momentum is SGD's; AdamW uses betas "
		    "(0.9, 0.999). Add --optimiser sgd or drop --momentum"));
	if (a->x.optimiser == OPTIMISER_SGD && !a->wd_set)
		a->x.weight_decay = 0;
	if (a->stages != NULL &&
	    executor_stages_parse(&a->x, a->stages, err, sizeof(err)) < 0)
		return (cli_refuse("%s", err));
	if (a->x.lr <= 0)
		return (cli_refuse("--learning-rate must be above 0"));
	if (output_mode_check(&a->out, a->x.device_iterations, err,
	    sizeof(err)) < 0)
		return (cli_refuse("%s", err));
	if (strcmp(a->test_dataset, "none") == 0)
		a->test_dataset = NULL;
	return (0);
}

/* Parse argv into @a; 0 run, 1 done (help), 2 usage error. */
static int
parse_args(int argc, char **argv, struct train_args *a)
{
	int rc;

	train_args_default(a);
	if ((rc = cli_parse(&train_cli, argc, argv, a)) != 0)
		return (rc);
	return (train_args_check(argc, argv, a));
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

/* One epoch (or the test pass, @lr NULL) in progress. */
struct pass {
	struct executor			*x;
	struct device			*dev;
	struct source			*src;
	const struct executor_options	*xo;
	struct lr_plan			*lr;
	struct output_spec		 spec;
	struct host_outputs		 host;
	struct pass_result		*r;
	char				 status[96];
};

/* Emulate a step: the device's DMA reads it; then the host blocks in the
 * call for the modelled time. */
static void
pass_emulate(struct pass *p, const float *data, size_t rows, double ready)
{
	if (!p->src->synthetic)
		(void)host_transfer(data, rows *
		    shape_size(executor_model(p->x)->input) * sizeof(float));
	source_release(p->src);
	device_wait_until(ready + device_call_seconds(p->dev) * rows /
	    executor_step_rows(p->x));
}

/* Add the returned outputs' losses and judged predictions to the pass,
 * and say the running figures in the status. */
static void
pass_tally(struct pass *p, int classes)
{
	struct pass_result	*r = p->r;
	struct host_outputs	*host = &p->host;
	const float		*pred;
	size_t			 i;
	int			 best, k;

	for (i = 0; i < host->b_dim; i++)
		r->loss_sum += host->loss[i];
	r->loss_n += host->b_dim;
	for (i = 0; host->pred_labels && i < host->pred_rows; i++) {
		pred = host->preds + i * classes;
		best = 0;
		for (k = 1; k < classes; k++)
			if (pred[k] > pred[best])
				best = k;
		r->right += best == host->pred_labels[i];
	}
	if (host->pred_labels)
		r->judged += host->pred_rows;
	snprintf(p->status, sizeof(p->status),
	    "Loss: %.4f | Accuracy: %5.2f%%", r->loss_sum / r->loss_n,
	    r->judged ? 100.0 * r->right / r->judged : 0);
}

/* Really run a step (a weight update when training) and tally what it
 * returns to the host. */
static int
pass_compute(struct pass *p, const float *data, const int32_t *labels,
    size_t rows, char *err, size_t errlen)
{
	const struct executor_options	*xo = p->xo;
	struct model			*m = executor_model(p->x);
	struct step_outputs		 all;
	struct lr_point			 lp;
	bool				 training = p->lr != NULL;

	if (training) {
		lp = lr_schedule_at(p->lr->kind, p->lr->lr, p->lr->call++,
		    p->lr->calls);
		executor_set_optimiser(p->x, &lp);
	}
	if (executor_run(p->x, data, labels, rows, &all, err, errlen) < 0)
		return (-1);
	if (outputs_select(&p->spec, &all, labels, xo->batch_size,
	    training ? xo->gradient_accumulation : 1, xo->replicas,
	    training ? xo->device_iterations :
	    xo->device_iterations * xo->gradient_accumulation, m->classes,
	    &p->host) < 0) {
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	source_release(p->src);
	pass_tally(p, m->classes);
	return (0);
}

/* One epoch (or the test pass, @lr NULL): take steps until the end of the
 * epoch. */
static int
run_pass(const struct train_args *a, struct executor *x, struct device *dev,
    struct source *src, const struct executor_options *xo, struct lr_plan *lr,
    const char *title, uint64_t steps, struct pass_result *r, char *err,
    size_t errlen)
{
	struct pass	 p = { .x = x, .dev = dev, .src = src,
	    .xo = xo, .lr = lr, .spec = a->out, .r = r };
	struct progress	 bar;
	const float	*data;
	const int32_t	*labels;
	size_t		 rows;
	double		 t0 = clock_now_s(), wait0, ready;
	int		 rc;

	memset(r, 0, sizeof(*r));
	if (lr == NULL)		/* poptorch's inference default */
		p.spec.mode = OUTPUT_ALL;
	progress_begin(&bar, title, steps, a->quiet);
	for (;;) {
		wait0 = clock_now_s();
		rc = source_next(src, &data, &labels, &rows, err, errlen);
		if (rc == 1)
			break;
		if (rc < 0)
			goto fail;
		ready = clock_now_s();
		if (a->profile && lr != NULL && r->steps == 0 &&
		    device_profile(dev, a->profile, "train", ready - wait0,
		    err, errlen) < 0)
			goto fail;
		if (a->emulate)
			pass_emulate(&p, data, rows, ready);
		else if (pass_compute(&p, data, labels, rows, err, errlen) < 0)
			goto fail;
		r->steps++;
		r->items += rows;
		r->device_seconds += device_call_seconds(dev) * rows /
		    executor_step_rows(x);
		progress_update(&bar, r->steps, p.status);
	}
	r->seconds = clock_now_s() - t0;
	rc = 0;
	goto out;
fail:
	rc = -1;
out:
	progress_end(&bar, r->steps, p.status);
	host_outputs_free(&p.host);
	return (rc);
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
