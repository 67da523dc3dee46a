/* SPDX-License-Identifier: MIT */
/*
 * model.h - the simulated IPU's network: layers, blocks, loss, optimisers.
 *
 * A model is a flat list of layers whose parameters live in one contiguous
 * float vector (so gradients, all-reduce and optimisers work on ranges of
 * it).  Layers are grouped into named blocks ("B1".."B4"), and a pipeline
 * stage runs a consecutive range of layers, as poptorch.BeginBlock /
 * poptorch.Stage("B1", "B2").ipu(0) do.  Everything is fp32, NCHW, with the
 * matrix products on CBLAS (OpenBLAS).
 *
 * Not thread-safe: a model owns one scratch area for im2col and friends.
 */
#ifndef INFEED_TRAIN_MODEL_H
#define INFEED_TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

enum model_kind {
	/* Pipelining tutorial (mnist_pipeline.py), 1x28x28 input, 10 classes:
	 * B1 conv 1->10 k5, max-pool 2, ReLU; B2 conv 10->20 k5, max-pool 2,
	 * ReLU; B3 linear 320->256, ReLU; B4 linear 256->10 (+ the loss). */
	MODEL_PIPELINE_TUTORIAL,
	/* Efficient-data-loading tutorial's ClassificationModel, 1x128x128:
	 * B1 conv 1->5 k3, ReLU, max-pool 2; B2 conv 5->12 k5, ReLU,
	 * GroupNorm(3 groups); B3 linear 41772->100, ReLU; B4 linear 100->10. */
	MODEL_DATALOADING_TUTORIAL,
};

enum layer_kind {
	LAYER_CONV,      /* stride 1, no padding, bias */
	LAYER_MAXPOOL,   /* kernel = stride = k */
	LAYER_RELU,
	LAYER_GROUPNORM, /* groups, eps 1e-5, per-channel affine */
	LAYER_LINEAR,    /* flattens its input */
};

struct shape { int c, h, w; };

static inline size_t shape_size(struct shape s)
{
	return ((size_t)s.c * s.h * s.w);
}

struct layer {
	enum layer_kind kind;
	struct shape in, out;   /* per sample */
	int k;                  /* conv/pool kernel; groupnorm groups */
	size_t param_offset;    /* into model->params */
	size_t nparams;         /* weights then bias (gamma then beta) */
	double fwd_flops;       /* per sample, multiply-add = 2 */
};

#define MODEL_MAX_LAYERS 16
#define MODEL_MAX_BLOCKS 8

struct block {
	char name[8];           /* "B1" .. */
	int first, count;       /* layer range */
};

struct model {
	enum model_kind kind;
	const char *name;
	struct shape input;
	int classes;
	int nlayers, nblocks;
	struct layer layers[MODEL_MAX_LAYERS];
	struct block blocks[MODEL_MAX_BLOCKS];
	size_t nparams;
	float *params;          /* all weights, contiguous */
	float *scratch;         /* im2col and similar, grown on demand */
	size_t scratch_floats;
};

/**
 * model_new() - build a model and initialise its weights as PyTorch does
 * (kaiming-uniform with a=sqrt(5): U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
 * weights and biases; GroupNorm gamma 1, beta 0), from @seed alone.
 * Returns NULL on allocation failure.
 */
struct model *model_new(enum model_kind kind, uint64_t seed);

/**
 * model_new_shaped() - model_new() for inputs of shape @input (NULL: the
 * model's own) and @classes outputs (0: its own 10): the same layers,
 * sized for the data, as the data-loading experiment needs for images.
 */
struct model *model_new_shaped(enum model_kind kind,
    const struct shape *input, int classes, uint64_t seed);
void model_free(struct model *m);

/** model_block_find() - index of the block called @name, or -1. */
int model_block_find(const struct model *m, const char *name);

/** layer_kind_name() - "conv", "maxpool", "relu", "groupnorm", "linear". */
const char *layer_kind_name(enum layer_kind kind);

/**
 * model_param_range() - the parameters of layers [@l0, @l1) are
 * params[*@offset .. *@offset + *@count) (layers own consecutive ranges).
 */
void model_param_range(const struct model *m, int l0, int l1,
    size_t *offset, size_t *count);

/** model_flops() - forward FLOPs per sample of layers [@l0, @l1). */
double model_flops(const struct model *m, int l0, int l1);

/**
 * model_reserve() - grow the scratch area so that model_backward() on up
 * to @n samples never allocates.  model_forward() never allocates;
 * model_backward() otherwise grows the scratch itself and aborts if it
 * cannot.  Returns 0, or -1 with errno ENOMEM.
 */
int model_reserve(struct model *m, int n);

/**
 * model_stash_floats() - floats needed to keep every intermediate output of
 * layers [@l0, @l1) for @n samples; model_forward() fills such a stash and
 * model_backward() reads it.  Layer by layer: its output (n x out, NCHW),
 * then for a max-pool the arg-max of each output and for a GroupNorm the
 * (mean, 1/std) of each sample and group (model.c has the details).
 */
size_t model_stash_floats(const struct model *m, int l0, int l1, int n);

/** model_output() - where the output of layer @l1-1 sits inside @stash. */
float *model_output(const struct model *m, int l0, int l1, int n, float *stash);

/**
 * model_forward() - run layers [@l0, @l1) on @n samples of @in (shape
 * layers[l0].in), keeping every layer's output in @stash.
 */
void model_forward(struct model *m, int l0, int l1, int n,
    const float *in, float *stash);

/**
 * model_backward() - given @dout (gradient of the loss for the output of
 * layer @l1-1), ADD the parameter gradients of layers [@l0, @l1) into
 * @grad (a vector of m->nparams floats, same layout as m->params) and, if
 * @din is not NULL, write the gradient for @in.  @in and @stash are what
 * model_forward() was given and filled.
 */
void model_backward(struct model *m, int l0, int l1, int n,
    const float *in, const float *stash, const float *dout,
    float *din, float *grad);

/**
 * loss_cross_entropy() - mean softmax cross-entropy of @n rows of @logits
 * (n x classes) against @labels.  Writes d(mean loss)/d(logits) to @dlogits
 * if not NULL, the number of rows whose arg-max equals the label to
 * @correct if not NULL.  Labels outside [0, classes) count as wrong and
 * contribute no gradient; the caller validates labels first.
 */
float loss_cross_entropy(const float *logits, const int32_t *labels, int n,
    int classes, float *dlogits, int *correct);

enum optimiser_kind { OPTIMISER_SGD, OPTIMISER_ADAMW };

/* torch.optim.SGD (momentum, dampening 0, weight_decay added to the
 * gradient) and torch.optim.AdamW (decoupled weight decay) semantics. */
struct optimiser {
	enum optimiser_kind kind;
	float lr, momentum, weight_decay, beta1, beta2, eps;
	size_t n;
	long step;              /* AdamW bias correction counter */
	float *m, *v;           /* momentum / first moment, second moment */
};

/**
 * optimiser_new() - an optimiser for @n parameters with PyTorch's defaults:
 * SGD momentum 0 and weight_decay 0; AdamW betas (0.9, 0.999), eps 1e-8,
 * weight_decay 0.01.  Change the fields before the first step.
 */
struct optimiser *optimiser_new(enum optimiser_kind kind, float lr, size_t n);
void optimiser_free(struct optimiser *o);

/** optimiser_step() - one update of @params[0..n) from @grad[0..n). */
void optimiser_step(struct optimiser *o, float *params, const float *grad);

#endif
