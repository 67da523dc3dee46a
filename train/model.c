/* SPDX-License-Identifier: MIT */
/*
 * model.c - the layers, the two tutorial networks, the loss and the
 * optimisers of model.h.
 *
 * Stash layout.  model_forward() on layers [l0, l1) for n samples writes,
 * layer after layer, an area per layer:
 *
 *   [ output: n x shape_size(out) floats, NCHW ][ extra ]
 *
 * where extra is empty except for
 *
 *   max-pool:  the arg-max of every output, n x shape_size(out) floats in
 *              the same order, each the offset of the chosen element within
 *              its input plane (c, ., .) as an exact integer-valued float;
 *   GroupNorm: (mean, 1/std) per sample and group, 2 x n x groups floats,
 *              sample-major.
 *
 * A layer's input is the previous layer's output (or the caller's @in for
 * l0), so a pipeline stage only has to keep its own stash.
 *
 * Convolutions are im2col + one sgemm per sample, which writes NCHW
 * directly; batching samples into one wider sgemm measured slower here
 * (the per-sample im2col matrix stays in cache).
 *
 * FLOPs per sample (forward): conv and linear count 2 per multiply-add
 * plus 1 per output for the bias; max-pool 1 compare per input element of
 * a window; ReLU 1 per element; GroupNorm 7 per element (1 for the mean,
 * 2 for the variance, 2 to normalise, 2 for the affine map).
 *
 * Weights are drawn from one splitmix64 stream seeded with the seed,
 * layer by layer, weights then bias: word i = mix(seed + i * golden) for
 * i = 1, 2, ..., u = (word >> 40) * 2^-24, value = bound * (2u - 1) with
 * bound = 1/sqrt(fan_in), which is what PyTorch's default init amounts to.
 */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "model.h"
#include "splitmix64.h"

#define MODEL_GN_EPS		1e-5
#define MODEL_GN_FLOPS		7.0

static void	model_fatal(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
static void	model_check_range(const struct model *, int, int, int);
static void	model_block(struct model *, const char *);
static struct layer *model_layer(struct model *, enum layer_kind);
static void	model_conv(struct model *, int, int);
static void	model_pool(struct model *, int);
static void	model_relu(struct model *);
static void	model_groupnorm(struct model *, int);
static void	model_linear(struct model *, int);
static float	model_rng_uniform(uint64_t *, float);
static void	model_init_params(struct model *, uint64_t);
static size_t	layer_stash_floats(const struct layer *, int);
static size_t	layer_extra_floats(const struct layer *, int);
static size_t	conv_scratch_floats(const struct layer *);
static int	model_scratch_grow(struct model *, size_t);
static void	conv_im2col(const struct layer *, const float *, float *,
    size_t);
static void	conv_col2im(const struct layer *, const float *, size_t,
    float *);
static void	conv_forward(struct model *, const struct layer *, int,
    const float *, float *);
static void	conv_backward(struct model *, const struct layer *, int,
    const float *, const float *, float *, float *);
static void	pool_forward(const struct layer *, int, const float *,
    float *, float *);
static void	pool_backward(const struct layer *, int, const float *,
    const float *, float *);
static void	relu_forward(const struct layer *, int, const float *,
    float *);
static void	relu_backward(const struct layer *, int, const float *,
    const float *, float *);
static void	groupnorm_forward(const struct model *, const struct layer *,
    int, const float *, float *);
static void	groupnorm_backward(const struct model *,
    const struct layer *, int, const float *, const float *,
    const float *, float *, float *);
static void	linear_forward(const struct model *, const struct layer *,
    int, const float *, float *);
static void	linear_backward(const struct model *, const struct layer *,
    int, const float *, const float *, float *, float *);

/* A broken invariant or an allocation that cannot fail politely: stop. */
static void
model_fatal(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	fputs("model: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

/* Stop unless [l0, l1) is a non-empty layer range and n is not negative. */
static void
model_check_range(const struct model *m, int l0, int l1, int n)
{
	if (l0 < 0 || l1 > m->nlayers || l0 >= l1 || n < 0)
		model_fatal("bad layer range [%d, %d) or n %d for %d layers",
		    l0, l1, n, m->nlayers);
}

/* Start block @name at the next layer. */
static void
model_block(struct model *m, const char *name)
{
	struct block	*b;

	if (m->nblocks == MODEL_MAX_BLOCKS)
		model_fatal("too many blocks");
	b = &m->blocks[m->nblocks++];
	snprintf(b->name, sizeof b->name, "%s", name);
	b->first = m->nlayers;
	b->count = 0;
}

/* Append a layer whose input is the previous layer's output. */
static struct layer *
model_layer(struct model *m, enum layer_kind kind)
{
	struct layer	*l;

	if (m->nlayers == MODEL_MAX_LAYERS || m->nblocks == 0)
		model_fatal("too many layers or no block");
	l = &m->layers[m->nlayers];
	memset(l, 0, sizeof *l);
	l->kind = kind;
	l->in = m->nlayers == 0 ? m->input : m->layers[m->nlayers - 1].out;
	l->out = l->in;
	l->param_offset = m->nparams;
	m->nlayers++;
	m->blocks[m->nblocks - 1].count++;
	return (l);
}

/* Append a k x k convolution to @cout channels, stride 1, no padding. */
static void
model_conv(struct model *m, int cout, int k)
{
	struct layer	*l = model_layer(m, LAYER_CONV);
	double		 macs;

	l->k = k;
	l->out.c = cout;
	l->out.h = l->in.h - k + 1;
	l->out.w = l->in.w - k + 1;
	l->nparams = (size_t)cout * l->in.c * k * k + cout;
	macs = (double)l->in.c * k * k * shape_size(l->out);
	l->fwd_flops = 2.0 * macs + (double)shape_size(l->out);
	m->nparams += l->nparams;
}

/* Append a k x k max-pool with stride k (floor mode, as torch). */
static void
model_pool(struct model *m, int k)
{
	struct layer	*l = model_layer(m, LAYER_MAXPOOL);

	l->k = k;
	l->out.h = l->in.h / k;
	l->out.w = l->in.w / k;
	l->fwd_flops = (double)shape_size(l->out) * k * k;
}

/* Append a ReLU. */
static void
model_relu(struct model *m)
{
	struct layer	*l = model_layer(m, LAYER_RELU);

	l->fwd_flops = (double)shape_size(l->out);
}

/* Append a GroupNorm with @groups groups and a per-channel affine map. */
static void
model_groupnorm(struct model *m, int groups)
{
	struct layer	*l = model_layer(m, LAYER_GROUPNORM);

	if (l->in.c % groups != 0)
		model_fatal("%d channels in %d groups", l->in.c, groups);
	l->k = groups;
	l->nparams = 2 * (size_t)l->in.c;
	l->fwd_flops = MODEL_GN_FLOPS * (double)shape_size(l->out);
	m->nparams += l->nparams;
}

/* Append a linear layer to @out features on the flattened input. */
static void
model_linear(struct model *m, int out)
{
	struct layer	*l = model_layer(m, LAYER_LINEAR);
	size_t		 in = shape_size(l->in);

	l->out.c = out;
	l->out.h = 1;
	l->out.w = 1;
	l->nparams = (size_t)out * in + out;
	l->fwd_flops = 2.0 * (double)in * out + out;
	m->nparams += l->nparams;
}

/* Return a float uniform in [-bound, bound). */
static float
model_rng_uniform(uint64_t *state, float bound)
{
	float	u;

	u = (float)(splitmix64_next(state) >> 40) * 0x1p-24f;
	return (bound * (2.0f * u - 1.0f));
}

/* Initialise every parameter as PyTorch's reset_parameters() would. */
static void
model_init_params(struct model *m, uint64_t seed)
{
	uint64_t	 state = seed;
	struct layer	*l;
	float		*p, bound;
	size_t		 i, fan_in, nw;
	int		 li;

	for (li = 0; li < m->nlayers; li++) {
		l = &m->layers[li];
		p = m->params + l->param_offset;
		switch (l->kind) {
		case LAYER_CONV:
		case LAYER_LINEAR:
			if (l->kind == LAYER_CONV)
				fan_in = (size_t)l->in.c * l->k * l->k;
			else
				fan_in = shape_size(l->in);
			bound = (float)(1.0 / sqrt((double)fan_in));
			nw = l->nparams;
			for (i = 0; i < nw; i++)
				p[i] = model_rng_uniform(&state, bound);
			break;
		case LAYER_GROUPNORM:
			for (i = 0; i < (size_t)l->in.c; i++) {
				p[i] = 1.0f;
				p[l->in.c + i] = 0.0f;
			}
			break;
		case LAYER_MAXPOOL:
		case LAYER_RELU:
			break;
		}
	}
}

/* Return the floats of extra state a layer keeps beyond its output. */
static size_t
layer_extra_floats(const struct layer *l, int n)
{
	if (l->kind == LAYER_GROUPNORM)
		return (2 * (size_t)n * l->k);
	if (l->kind == LAYER_MAXPOOL)
		return ((size_t)n * shape_size(l->out));
	return (0);
}

/* Return the floats a layer takes in the stash. */
static size_t
layer_stash_floats(const struct layer *l, int n)
{
	return ((size_t)n * shape_size(l->out) + layer_extra_floats(l, n));
}

/* Return the scratch a convolution needs: one sample's im2col matrix. */
static size_t
conv_scratch_floats(const struct layer *l)
{
	return ((size_t)l->in.c * l->k * l->k * l->out.h * l->out.w);
}

/* Make the scratch area at least @floats long; -1 if out of memory. */
static int
model_scratch_grow(struct model *m, size_t floats)
{
	float	*s;

	if (floats <= m->scratch_floats)
		return (0);
	s = realloc(m->scratch, floats * sizeof *s);
	if (s == NULL) {
		errno = ENOMEM;
		return (-1);
	}
	m->scratch = s;
	m->scratch_floats = floats;
	return (0);
}

/* Lay out one sample's patches as rows (c, i, j) of a matrix, stride @ld. */
static void
conv_im2col(const struct layer *l, const float *x, float *col, size_t ld)
{
	const float	*src;
	int		 c, i, j, oy, k = l->k, oh = l->out.h;
	int		 ow = l->out.w, h = l->in.h, w = l->in.w;
	float		*row;

	for (c = 0; c < l->in.c; c++)
		for (i = 0; i < k; i++)
			for (j = 0; j < k; j++) {
				row = col + ((size_t)(c * k + i) * k + j) * ld;
				for (oy = 0; oy < oh; oy++) {
					src = x + ((size_t)c * h + oy + i) * w
					    + j;
					memcpy(row, src, ow * sizeof *row);
					row += ow;
				}
			}
}

/* Add the patch gradients of one sample back onto its (zeroed) input. */
static void
conv_col2im(const struct layer *l, const float *col, size_t ld, float *dx)
{
	int		 c, i, j, oy, ox, k = l->k, oh = l->out.h;
	int		 ow = l->out.w, h = l->in.h, w = l->in.w;
	const float	*row, *src;
	float		*dst;

	for (c = 0; c < l->in.c; c++)
		for (i = 0; i < k; i++)
			for (j = 0; j < k; j++) {
				row = col + ((size_t)(c * k + i) * k + j) * ld;
				for (oy = 0; oy < oh; oy++) {
					src = row + (size_t)oy * ow;
					dst = dx + ((size_t)c * h + oy + i) * w
					    + j;
					for (ox = 0; ox < ow; ox++)
						dst[ox] += src[ox];
				}
			}
}

/* Convolve @n samples: y = W * im2col(x) + b, one sample per sgemm. */
static void
conv_forward(struct model *m, const struct layer *l, int n, const float *x,
    float *y)
{
	const float	*w = m->params + l->param_offset, *b;
	float		*col = m->scratch, *ys;
	size_t		 p = (size_t)l->out.h * l->out.w, isz, osz, q;
	int		 kk = l->in.c * l->k * l->k, co = l->out.c, s, c;

	b = w + (size_t)co * kk;
	isz = shape_size(l->in);
	osz = shape_size(l->out);
	for (s = 0; s < n; s++) {
		ys = y + s * osz;
		conv_im2col(l, x + s * isz, col, p);
		for (c = 0; c < co; c++)
			for (q = 0; q < p; q++)
				ys[c * p + q] = b[c];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
		    co, (int)p, kk, 1.0f, w, kk, col, (int)p, 1.0f, ys,
		    (int)p);
	}
}

/* Add dW, db of a convolution into @grad; write dx if wanted. */
static void
conv_backward(struct model *m, const struct layer *l, int n, const float *x,
    const float *dy, float *dx, float *grad)
{
	const float	*w = m->params + l->param_offset, *dys;
	float		*dw = grad + l->param_offset, *db, *col = m->scratch;
	size_t		 p = (size_t)l->out.h * l->out.w, isz, osz, q;
	int		 kk = l->in.c * l->k * l->k, co = l->out.c, s, c;
	double		 sum;

	db = dw + (size_t)co * kk;
	isz = shape_size(l->in);
	osz = shape_size(l->out);
	for (c = 0; c < co; c++) {
		sum = 0.0;
		for (s = 0; s < n; s++)
			for (q = 0; q < p; q++)
				sum += dy[s * osz + c * p + q];
		db[c] += (float)sum;
	}
	for (s = 0; s < n; s++) {
		dys = dy + s * osz;
		conv_im2col(l, x + s * isz, col, p);
		/* dW[co][kk] += dy[co][p] * col[kk][p]^T */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
		    co, kk, (int)p, 1.0f, dys, (int)p, col, (int)p, 1.0f,
		    dw, kk);
		if (dx == NULL)
			continue;
		/* dcol[kk][p] = W^T * dy, into the im2col area */
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans,
		    kk, (int)p, co, 1.0f, w, kk, dys, (int)p, 0.0f, col,
		    (int)p);
		memset(dx + s * isz, 0, isz * sizeof *dx);
		conv_col2im(l, col, p, dx + s * isz);
	}
}

/*
 * Max-pool k x k windows with stride k; the first maximum wins (a NaN wins
 * as in torch).  @arg gets, per output, the offset of the chosen element
 * in its input plane, as a float (exact: planes are far below 2^24).
 */
static void
pool_forward(const struct layer *l, int n, const float *x, float *y,
    float *arg)
{
	const float	*r0, *r1;
	float		 best, v, a, b, c, d;
	int		 k = l->k, w = l->in.w, oh = l->out.h, ow = l->out.w;
	int		 p, oy, ox, i, j, at, off;

	for (p = 0; p < n * l->in.c; p++) {
		for (oy = 0; oy < oh; oy++) {
			r0 = x + (size_t)oy * k * w;
			r1 = r0 + w;
			for (ox = 0; ox < ow && k == 2; ox++) {
				/*
				 * The common case, branch-free; a window with
				 * a NaN (or both infinities) takes the loop.
				 */
				a = r0[2 * ox];
				b = r0[2 * ox + 1];
				c = r1[2 * ox];
				d = r1[2 * ox + 1];
				if (isnan(a + b + c + d))
					break;
				at = b > a ? 1 : 0;
				best = b > a ? b : a;
				at = c > best ? w : at;
				best = c > best ? c : best;
				at = d > best ? w + 1 : at;
				best = d > best ? d : best;
				*y++ = best;
				*arg++ = (float)(oy * k * w + 2 * ox + at);
			}
			for (; ox < ow; ox++) {
				best = r0[ox * k];
				at = ox * k;
				for (i = 0; i < k; i++)
					for (j = 0; j < k; j++) {
						off = i * w + ox * k + j;
						v = r0[off];
						if (v > best || v != v) {
							best = v;
							at = off;
						}
					}
				*y++ = best;
				*arg++ = (float)(oy * k * w + at);
			}
		}
		x += (size_t)l->in.h * w;
	}
}

/* Route each window's gradient to the element the forward pass chose. */
static void
pool_backward(const struct layer *l, int n, const float *arg,
    const float *dy, float *dx)
{
	size_t	plane = (size_t)l->in.h * l->in.w;
	size_t	out = (size_t)l->out.h * l->out.w, q;
	int	p;

	memset(dx, 0, (size_t)n * shape_size(l->in) * sizeof *dx);
	for (p = 0; p < n * l->in.c; p++) {
		for (q = 0; q < out; q++)
			dx[(size_t)arg[q]] += dy[q];
		arg += out;
		dy += out;
		dx += plane;
	}
}

/*
 * y = max(x, 0), on the bits: a compare-and-branch per element mispredicts
 * on half of them (10x slower measured); the mask below is branch-free
 * and vectorises.  A NaN with its sign bit clear passes, as in torch.
 */
static void
relu_forward(const struct layer *l, int n, const float *x, float *y)
{
	size_t		i, len = (size_t)n * shape_size(l->in);
	uint32_t	b;

	for (i = 0; i < len; i++) {
		memcpy(&b, &x[i], sizeof b);
		b &= ~(uint32_t)((int32_t)b >> 31);
		memcpy(&y[i], &b, sizeof b);
	}
}

/*
 * dx = dy where the output was positive, as torch's threshold_backward;
 * y >= +0 here, so "positive" is "any bit set".
 */
static void
relu_backward(const struct layer *l, int n, const float *y, const float *dy,
    float *dx)
{
	size_t		i, len = (size_t)n * shape_size(l->in);
	uint32_t	a, b;

	for (i = 0; i < len; i++) {
		memcpy(&a, &y[i], sizeof a);
		memcpy(&b, &dy[i], sizeof b);
		b &= -(uint32_t)(a != 0);
		memcpy(&dx[i], &b, sizeof b);
	}
}

/* Normalise each (sample, group) to zero mean, unit biased variance. */
static void
groupnorm_forward(const struct model *m, const struct layer *l, int n,
    const float *x, float *y)
{
	const float	*gamma = m->params + l->param_offset, *beta, *xs;
	float		*stats, *ys, sc, sh, mf;
	size_t		 hw = (size_t)l->in.h * l->in.w, cnt, i;
	int		 g, s, c, cpg = l->in.c / l->k;
	double		 sum, sq, mean, var, rstd, d;

	beta = gamma + l->in.c;
	stats = y + (size_t)n * shape_size(l->out);
	cnt = (size_t)cpg * hw;
	for (s = 0; s < n; s++)
		for (g = 0; g < l->k; g++) {
			xs = x + ((size_t)s * l->in.c + (size_t)g * cpg) * hw;
			ys = y + (xs - x);
			sum = 0.0;
			for (i = 0; i < cnt; i++)
				sum += xs[i];
			mean = sum / (double)cnt;
			sq = 0.0;
			for (i = 0; i < cnt; i++) {
				d = xs[i] - mean;
				sq += d * d;
			}
			var = sq / (double)cnt;
			rstd = 1.0 / sqrt(var + MODEL_GN_EPS);
			mf = (float)mean;
			for (c = 0; c < cpg; c++) {
				sc = (float)(rstd * gamma[g * cpg + c]);
				sh = beta[g * cpg + c];
				for (i = 0; i < hw; i++)
					ys[c * hw + i] = (xs[c * hw + i] - mf)
					    * sc + sh;
			}
			stats[2 * ((size_t)s * l->k + g)] = (float)mean;
			stats[2 * ((size_t)s * l->k + g) + 1] = (float)rstd;
		}
}

/* Add dgamma, dbeta into @grad; write dx if wanted. */
static void
groupnorm_backward(const struct model *m, const struct layer *l, int n,
    const float *x, const float *stats, const float *dy, float *dx,
    float *grad)
{
	const float	*gamma = m->params + l->param_offset, *xs, *dys;
	float		*dgamma = grad + l->param_offset, *dbeta, *dxs;
	size_t		 hw = (size_t)l->in.h * l->in.w, cnt, i;
	int		 g, s, c, ch, cpg = l->in.c / l->k;
	double		 mean, rstd, xh, sdy, sdyx, a, b, gm;

	dbeta = dgamma + l->in.c;
	cnt = (size_t)cpg * hw;
	for (s = 0; s < n; s++)
		for (g = 0; g < l->k; g++) {
			xs = x + ((size_t)s * l->in.c + (size_t)g * cpg) * hw;
			dys = dy + (xs - x);
			mean = stats[2 * ((size_t)s * l->k + g)];
			rstd = stats[2 * ((size_t)s * l->k + g) + 1];
			a = 0.0;	/* sum of dxhat */
			b = 0.0;	/* sum of dxhat * xhat */
			for (c = 0; c < cpg; c++) {
				ch = g * cpg + c;
				sdy = 0.0;
				sdyx = 0.0;
				for (i = 0; i < hw; i++) {
					xh = (xs[c * hw + i] - mean) * rstd;
					sdy += dys[c * hw + i];
					sdyx += dys[c * hw + i] * xh;
				}
				dbeta[ch] += (float)sdy;
				dgamma[ch] += (float)sdyx;
				a += sdy * gamma[ch];
				b += sdyx * gamma[ch];
			}
			if (dx == NULL)
				continue;
			a /= (double)cnt;
			b /= (double)cnt;
			dxs = dx + (xs - x);
			for (c = 0; c < cpg; c++) {
				gm = gamma[g * cpg + c];
				for (i = 0; i < hw; i++) {
					xh = (xs[c * hw + i] - mean) * rstd;
					dxs[c * hw + i] = (float)(rstd *
					    (dys[c * hw + i] * gm - a -
					    xh * b));
				}
			}
		}
}

/* y = x W^T + b, W [out][in] as torch. */
static void
linear_forward(const struct model *m, const struct layer *l, int n,
    const float *x, float *y)
{
	const float	*w = m->params + l->param_offset, *b;
	int		 in = (int)shape_size(l->in), out = l->out.c, s;

	b = w + (size_t)out * in;
	for (s = 0; s < n; s++)
		memcpy(y + (size_t)s * out, b, out * sizeof *y);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in,
	    1.0f, x, in, w, in, 1.0f, y, out);
}

/* Add dW = dy^T x and db into @grad; write dx = dy W if wanted. */
static void
linear_backward(const struct model *m, const struct layer *l, int n,
    const float *x, const float *dy, float *dx, float *grad)
{
	const float	*w = m->params + l->param_offset;
	float		*dw = grad + l->param_offset, *db;
	int		 in = (int)shape_size(l->in), out = l->out.c, s, o;
	double		 sum;

	db = dw + (size_t)out * in;
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n,
	    1.0f, dy, out, x, in, 1.0f, dw, in);
	for (o = 0; o < out; o++) {
		sum = 0.0;
		for (s = 0; s < n; s++)
			sum += dy[(size_t)s * out + o];
		db[o] += (float)sum;
	}
	if (dx != NULL)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in,
		    out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

/* Build the network of @kind and draw its weights from @seed. */
struct model *
model_new(enum model_kind kind, uint64_t seed)
{
	return (model_new_shaped(kind, NULL, 0, seed));
}

struct model *
model_new_shaped(enum model_kind kind, const struct shape *input,
    int classes, uint64_t seed)
{
	struct model	*m;
	size_t		 need = 0, sz;
	int		 i;

	if ((m = calloc(1, sizeof *m)) == NULL)
		return (NULL);
	m->kind = kind;
	m->classes = classes > 0 ? classes : 10;
	switch (kind) {
	case MODEL_PIPELINE_TUTORIAL:
		m->name = "pipeline-tutorial";
		m->input = input ? *input : (struct shape){ 1, 28, 28 };
		model_block(m, "B1");
		model_conv(m, 10, 5);
		model_pool(m, 2);
		model_relu(m);
		model_block(m, "B2");
		model_conv(m, 20, 5);
		model_pool(m, 2);
		model_relu(m);
		model_block(m, "B3");
		model_linear(m, 256);
		model_relu(m);
		model_block(m, "B4");
		model_linear(m, m->classes);
		break;
	case MODEL_DATALOADING_TUTORIAL:
		m->name = "dataloading-tutorial";
		m->input = input ? *input : (struct shape){ 1, 128, 128 };
		model_block(m, "B1");
		model_conv(m, 5, 3);
		model_relu(m);
		model_pool(m, 2);
		model_block(m, "B2");
		model_conv(m, 12, 5);
		model_relu(m);
		model_groupnorm(m, 3);
		model_block(m, "B3");
		model_linear(m, 100);
		model_relu(m);
		model_block(m, "B4");
		model_linear(m, m->classes);
		break;
	default:
		free(m);
		errno = EINVAL;
		return (NULL);
	}
	for (i = 0; i < m->nlayers; i++)
		if (m->layers[i].kind == LAYER_CONV) {
			sz = conv_scratch_floats(&m->layers[i]);
			if (sz > need)
				need = sz;
		}
	m->params = malloc(m->nparams * sizeof *m->params);
	if (m->params == NULL || model_scratch_grow(m, need) == -1) {
		model_free(m);
		errno = ENOMEM;
		return (NULL);
	}
	model_init_params(m, seed);
	return (m);
}

/* Free a model; NULL is a no-op. */
void
model_free(struct model *m)
{
	if (m == NULL)
		return;
	free(m->params);
	free(m->scratch);
	free(m);
}

/* Return the index of block @name, or -1. */
int
model_block_find(const struct model *m, const char *name)
{
	int	i;

	for (i = 0; i < m->nblocks; i++)
		if (strcmp(m->blocks[i].name, name) == 0)
			return (i);
	return (-1);
}

/* Return the printable name of a layer kind. */
const char *
layer_kind_name(enum layer_kind kind)
{
	switch (kind) {
	case LAYER_CONV:
		return ("conv");
	case LAYER_MAXPOOL:
		return ("maxpool");
	case LAYER_RELU:
		return ("relu");
	case LAYER_GROUPNORM:
		return ("groupnorm");
	case LAYER_LINEAR:
		return ("linear");
	}
	return ("?");
}

/* Give the parameter range owned by layers [l0, l1). */
void
model_param_range(const struct model *m, int l0, int l1, size_t *offset,
    size_t *count)
{
	const struct layer	*last;

	model_check_range(m, l0, l1, 0);
	last = &m->layers[l1 - 1];
	*offset = m->layers[l0].param_offset;
	*count = last->param_offset + last->nparams - *offset;
}

/* Return the forward FLOPs per sample of layers [l0, l1). */
double
model_flops(const struct model *m, int l0, int l1)
{
	double	f = 0.0;
	int	l;

	model_check_range(m, l0, l1, 0);
	for (l = l0; l < l1; l++)
		f += m->layers[l].fwd_flops;
	return (f);
}

/* Grow the scratch for a backward pass over any range on @n samples. */
int
model_reserve(struct model *m, int n)
{
	size_t	conv = 0, big = 0, sz;
	int	l;

	for (l = 0; l < m->nlayers; l++) {
		if (m->layers[l].kind == LAYER_CONV) {
			sz = conv_scratch_floats(&m->layers[l]);
			if (sz > conv)
				conv = sz;
		}
		sz = shape_size(m->layers[l].out);
		if (sz > big)
			big = sz;
	}
	return (model_scratch_grow(m, conv + 2 * big * (size_t)n));
}

/* Return the stash size of layers [l0, l1) for @n samples. */
size_t
model_stash_floats(const struct model *m, int l0, int l1, int n)
{
	size_t	sz = 0;
	int	l;

	model_check_range(m, l0, l1, n);
	for (l = l0; l < l1; l++)
		sz += layer_stash_floats(&m->layers[l], n);
	return (sz);
}

/* Return where layer l1-1's output starts in a stash of [l0, l1). */
float *
model_output(const struct model *m, int l0, int l1, int n, float *stash)
{
	size_t	off = 0;
	int	l;

	model_check_range(m, l0, l1, n);
	for (l = l0; l < l1 - 1; l++)
		off += layer_stash_floats(&m->layers[l], n);
	return (stash + off);
}

/* Run layers [l0, l1) on @n samples, each writing its stash area. */
void
model_forward(struct model *m, int l0, int l1, int n, const float *in,
    float *stash)
{
	const struct layer	*ly;
	const float		*x = in;
	float			*y = stash;
	int			 l;

	model_check_range(m, l0, l1, n);
	for (l = l0; l < l1; l++) {
		ly = &m->layers[l];
		switch (ly->kind) {
		case LAYER_CONV:
			conv_forward(m, ly, n, x, y);
			break;
		case LAYER_MAXPOOL:
			pool_forward(ly, n, x, y,
			    y + (size_t)n * shape_size(ly->out));
			break;
		case LAYER_RELU:
			relu_forward(ly, n, x, y);
			break;
		case LAYER_GROUPNORM:
			groupnorm_forward(m, ly, n, x, y);
			break;
		case LAYER_LINEAR:
			linear_forward(m, ly, n, x, y);
			break;
		}
		x = y;
		y += layer_stash_floats(ly, n);
	}
}

/* Back-propagate @dout through layers l1-1 .. l0, adding into @grad. */
void
model_backward(struct model *m, int l0, int l1, int n, const float *in,
    const float *stash, const float *dout, float *din, float *grad)
{
	const struct layer	*ly;
	const float		*x, *y, *dy = dout;
	size_t			 conv = 0, big = 0, sz, off;
	float			*ga, *gb, *dx;
	int			 l;

	model_check_range(m, l0, l1, n);
	for (l = l0; l < l1; l++) {
		if (m->layers[l].kind == LAYER_CONV) {
			sz = conv_scratch_floats(&m->layers[l]);
			if (sz > conv)
				conv = sz;
		}
		if (l > l0 && (sz = shape_size(m->layers[l].in)) > big)
			big = sz;
	}
	if (model_scratch_grow(m, conv + 2 * big * (size_t)n) == -1)
		model_fatal("out of memory for a backward pass of %d samples",
		    n);
	ga = m->scratch + conv;
	gb = ga + big * (size_t)n;

	off = model_stash_floats(m, l0, l1, n);
	for (l = l1 - 1; l >= l0; l--) {
		ly = &m->layers[l];
		off -= layer_stash_floats(ly, n);
		y = stash + off;
		if (l == l0)
			x = in;
		else
			x = y - layer_stash_floats(&m->layers[l - 1], n);
		if (l == l0)
			dx = din;
		else
			dx = dy == ga ? gb : ga;
		switch (ly->kind) {
		case LAYER_CONV:
			conv_backward(m, ly, n, x, dy, dx, grad);
			break;
		case LAYER_MAXPOOL:
			if (dx != NULL)
				pool_backward(ly, n,
				    y + (size_t)n * shape_size(ly->out), dy, dx);
			break;
		case LAYER_RELU:
			if (dx != NULL)
				relu_backward(ly, n, y, dy, dx);
			break;
		case LAYER_GROUPNORM:
			groupnorm_backward(m, ly, n, x,
			    y + (size_t)n * shape_size(ly->out), dy, dx, grad);
			break;
		case LAYER_LINEAR:
			linear_backward(m, ly, n, x, dy, dx, grad);
			break;
		}
		dy = dx;
	}
}

/* Mean softmax cross-entropy, its gradient and the arg-max hits. */
float
loss_cross_entropy(const float *logits, const int32_t *labels, int n,
    int classes, float *dlogits, int *correct)
{
	const float	*z;
	float		*dz;
	double		 total = 0.0, mx, sum, lse;
	int		 r, c, arg, hits = 0;

	for (r = 0; r < n; r++) {
		z = logits + (size_t)r * classes;
		mx = z[0];
		arg = 0;
		for (c = 1; c < classes; c++)
			if (z[c] > mx) {
				mx = z[c];
				arg = c;
			}
		sum = 0.0;
		for (c = 0; c < classes; c++)
			sum += exp(z[c] - mx);
		lse = mx + log(sum);
		if (labels[r] >= 0 && labels[r] < classes) {
			total += lse - z[labels[r]];
			if (arg == labels[r])
				hits++;
		}
		if (dlogits == NULL)
			continue;
		dz = dlogits + (size_t)r * classes;
		if (labels[r] < 0 || labels[r] >= classes) {
			memset(dz, 0, classes * sizeof *dz);
			continue;
		}
		for (c = 0; c < classes; c++)
			dz[c] = (float)((exp(z[c] - lse) -
			    (c == labels[r] ? 1.0 : 0.0)) / n);
	}
	if (correct != NULL)
		*correct = hits;
	return (n > 0 ? (float)(total / n) : 0.0f);
}

/* Make an optimiser with PyTorch's defaults for @n parameters. */
struct optimiser *
optimiser_new(enum optimiser_kind kind, float lr, size_t n)
{
	struct optimiser	*o;

	if ((o = calloc(1, sizeof *o)) == NULL)
		return (NULL);
	o->kind = kind;
	o->lr = lr;
	o->n = n;
	o->beta1 = 0.9f;
	o->beta2 = 0.999f;
	o->eps = 1e-8f;
	o->weight_decay = kind == OPTIMISER_ADAMW ? 0.01f : 0.0f;
	o->m = calloc(n > 0 ? n : 1, sizeof *o->m);
	if (kind == OPTIMISER_ADAMW)
		o->v = calloc(n > 0 ? n : 1, sizeof *o->v);
	if (o->m == NULL || (kind == OPTIMISER_ADAMW && o->v == NULL)) {
		optimiser_free(o);
		errno = ENOMEM;
		return (NULL);
	}
	return (o);
}

/* Free an optimiser; NULL is a no-op. */
void
optimiser_free(struct optimiser *o)
{
	if (o == NULL)
		return;
	free(o->m);
	free(o->v);
	free(o);
}

/* One torch.optim.SGD or torch.optim.AdamW step. */
void
optimiser_step(struct optimiser *o, float *params, const float *grad)
{
	float	 lr = o->lr, wd = o->weight_decay, mom = o->momentum;
	float	 b1 = o->beta1, b2 = o->beta2, eps = o->eps, g, decay;
	float	 step_size, bc2_sqrt, *m = o->m, *v = o->v;
	size_t	 i;

	switch (o->kind) {
	case OPTIMISER_SGD:
		for (i = 0; i < o->n; i++) {
			g = grad[i];
			if (wd != 0.0f)
				g += wd * params[i];
			if (mom != 0.0f) {
				m[i] = o->step == 0 ? g : mom * m[i] + g;
				g = m[i];
			}
			params[i] -= lr * g;
		}
		o->step++;
		break;
	case OPTIMISER_ADAMW:
		o->step++;
		step_size = (float)(lr / (1.0 - pow(b1, (double)o->step)));
		bc2_sqrt = (float)sqrt(1.0 - pow(b2, (double)o->step));
		decay = 1.0f - lr * wd;
		for (i = 0; i < o->n; i++) {
			g = grad[i];
			params[i] *= decay;
			m[i] += (1.0f - b1) * (g - m[i]);
			v[i] = b2 * v[i] + (1.0f - b2) * g * g;
			params[i] -= step_size * m[i] /
			    (sqrtf(v[i]) / bc2_sqrt + eps);
		}
		break;
	}
}
