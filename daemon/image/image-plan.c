/* SPDX-License-Identifier: MIT */
/*
 * Per-sample plans.  A plan follows torchvision 0.14 to the pixel:
 * RandomResizedCrop's get_params (10 attempts, half-even rounding, then
 * the clamped centre crop), Resize's truncated long side and max_size
 * rule, CenterCrop's zero padding and half-even centring.  Only the draws
 * differ: draw number n of sample (seed, epoch, index) is image_draw(seed,
 * epoch, index, n), a splitmix64 counter, so no plan depends on another,
 * on the worker that makes it or on the order of the calls.  Attempt a of
 * RandomResizedCrop uses draws 4a..4a+3 (area, log ratio, top, left); the
 * flip uses draw IMAGE_DRAW_FLIP.  The decode box comes from the
 * resampling's bounds (image-resize.c).
 */

#include <math.h>
#include <string.h>

#include "image-plan.h"
#include "image-resize.h"
#include "splitmix64.h"

#define IMAGE_DRAW_DOMAIN	0x696d6167652d7466ULL	/* "image-tf" */
#define IMAGE_DRAW_CROP		0
#define IMAGE_DRAW_FLIP		(1ULL << 32)
#define IMAGE_MAX_RESIZED	(1U << 30)

/**
 * image_draw() - draw number @n of a sample: 64 random bits
 * @seed: the attach's seed
 * @epoch: the epoch
 * @index: the sample's index in the dataset
 * @n: the draw number
 *
 * A pure function of its arguments (splitmix64's finaliser over the key,
 * then element @n of the splitmix64 stream that starts there).
 *
 * Return: the draw.
 */
uint64_t
image_draw(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t n)
{
	uint64_t	k;

	k = splitmix64_mix(seed ^ IMAGE_DRAW_DOMAIN);
	k = splitmix64_mix(k + epoch);
	k = splitmix64_mix(k ^ index);
	return (splitmix64_mix(k + (n + 1) * SPLITMIX64_GAMMA));
}

/**
 * image_draw_unit() - draw number @n as a float32 in [0, 1)
 * @seed: the attach's seed
 * @epoch: the epoch
 * @index: the sample's index
 * @n: the draw number
 *
 * 24 random bits, as torch draws a float32.
 *
 * Return: the draw.
 */
float
image_draw_unit(uint64_t seed, uint64_t epoch, uint64_t index, uint64_t n)
{
	return ((float)(image_draw(seed, epoch, index, n) >> 40) * 0x1p-24f);
}

/* A float32 uniform in [a, b) from the unit draw @u. */
static float
uniform_f32(float a, float b, float u)
{
	/* u * (b - a) is exact in double: fused or not, the same float. */
	return ((float)((double)u * (double)(b - a) + (double)a));
}

/* torch.randint(0, n): a uniform integer in [0, n). */
static uint32_t
randint(uint64_t draw, uint32_t n)
{
	return ((uint32_t)(((unsigned __int128)draw * n) >> 64));
}

/* RandomResizedCrop.get_params: the box of (H, W) to crop. */
static void
rrc_box(const struct image_pipeline *p, uint32_t W, uint32_t H,
    uint64_t seed, uint64_t epoch, uint64_t index, struct image_box *b)
{
	double		area = (double)W * H, target, ar, wd, hd, r;
	float		lr0 = logf(p->ratio[0]), lr1 = logf(p->ratio[1]), u;
	uint64_t	n;
	int		a;

	for (a = 0; a < 10; a++) {
		n = IMAGE_DRAW_CROP + 4 * (uint64_t)a;
		u = image_draw_unit(seed, epoch, index, n);
		target = area * (double)uniform_f32(p->scale[0], p->scale[1],
		    u);
		u = image_draw_unit(seed, epoch, index, n + 1);
		ar = (double)expf(uniform_f32(lr0, lr1, u));
		wd = rint(sqrt(target * ar));
		hd = rint(sqrt(target / ar));
		if (wd > 0 && wd <= W && hd > 0 && hd <= H) {
			b->w = (uint32_t)wd;
			b->h = (uint32_t)hd;
			b->y = randint(image_draw(seed, epoch, index, n + 2),
			    H - b->h + 1);
			b->x = randint(image_draw(seed, epoch, index, n + 3),
			    W - b->w + 1);
			return;
		}
	}
	/* The fallback: a centre crop with the ratio clamped. */
	r = (double)W / (double)H;
	if (r < p->ratio64[0]) {
		wd = W;
		hd = rint(wd / p->ratio64[0]);
	} else if (r > p->ratio64[1]) {
		hd = H;
		wd = rint(hd * p->ratio64[1]);
	} else {
		wd = W;
		hd = H;
	}
	/* torchvision would crop nothing here; infeed keeps a pixel. */
	b->w = wd < 1 ? 1 : wd > W ? W : (uint32_t)wd;
	b->h = hd < 1 ? 1 : hd > H ? H : (uint32_t)hd;
	b->y = (H - b->h) / 2;
	b->x = (W - b->w) / 2;
}

/* torchvision 0.14's _compute_resized_output_size. */
static void
resized_size(const struct image_pipeline *p, uint32_t W, uint32_t H,
    uint32_t *rw, uint32_t *rh)
{
	uint32_t	shortside, longside;
	double		ns, nl;

	if (p->resize_h != 0) {
		*rw = p->resize_w;
		*rh = p->resize_h;
		return;
	}
	if (p->resize == 0) {
		*rw = W;
		*rh = H;
		return;
	}
	shortside = W <= H ? W : H;
	longside = W <= H ? H : W;
	ns = p->resize;
	nl = trunc((double)((uint64_t)p->resize * longside) / shortside);
	if (p->max_size != 0 && nl > p->max_size) {
		ns = trunc((double)p->max_size * ns / nl);
		nl = p->max_size;
	}
	/* torchvision would fail on 0 and on sizes beyond memory. */
	if (ns < 1)
		ns = 1;
	if (nl > IMAGE_MAX_RESIZED)
		nl = IMAGE_MAX_RESIZED;
	*rw = (uint32_t)(W <= H ? ns : nl);
	*rh = (uint32_t)(W <= H ? nl : ns);
}

/* CenterCrop @c of @ax->out pixels: padding, then half-even centring. */
static void
center_axis(struct image_axis *ax, uint32_t c)
{
	uint32_t	d;

	if (c > ax->out) {
		ax->first = 0;
		ax->count = ax->out;
		ax->pad = (c - ax->out) / 2;
	} else {
		d = ax->out - c;
		ax->first = (d >> 1) + (d & 1 & (d >> 1));
		ax->count = c;
		ax->pad = 0;
	}
}

/* The source pixels @ax reads: [*x, *x + *w). */
static void
axis_span(const struct image_axis *ax, uint32_t *x, uint32_t *w)
{
	int32_t	lo0, hi0, lo1, hi1;

	if (ax->count == 0) {
		*x = *w = 0;
		return;
	}
	if (ax->in == ax->out) {
		*x = ax->src + ax->first;
		*w = ax->count;
		return;
	}
	image_resize_bounds(ax->in, ax->out, ax->first, &lo0, &hi0);
	image_resize_bounds(ax->in, ax->out, ax->first + ax->count - 1, &lo1,
	    &hi1);
	*x = ax->src + lo0;
	*w = hi1 - lo0;
}

/**
 * image_plan_make() - what one sample needs
 * @p: the pipeline
 * @width: the image's width
 * @height: the image's height
 * @seed: the attach's seed
 * @epoch: the epoch
 * @index: the sample's index
 * @plan: filled in; plan->decode is the box of source pixels to decode
 *
 * A pure function of its arguments.  An image of width or height 0 gives a
 * plan with an empty decode box and an output of padding only.
 */
void
image_plan_make(const struct image_pipeline *p, uint32_t width,
    uint32_t height, uint64_t seed, uint64_t epoch, uint64_t index,
    struct image_plan *plan)
{
	struct image_box	b;
	uint32_t		rw, rh;

	memset(plan, 0, sizeof *plan);
	if (width == 0 || height == 0)
		goto flip;
	if (p->crop == IMAGE_CROP_RANDOM_RESIZED) {
		rrc_box(p, width, height, seed, epoch, index, &b);
		plan->crop = b;
		plan->x = (struct image_axis){ b.x, b.w, p->crop_w, 0,
		    p->crop_w, 0 };
		plan->y = (struct image_axis){ b.y, b.h, p->crop_h, 0,
		    p->crop_h, 0 };
	} else {
		resized_size(p, width, height, &rw, &rh);
		plan->x = (struct image_axis){ 0, width, rw, 0, rw, 0 };
		plan->y = (struct image_axis){ 0, height, rh, 0, rh, 0 };
		if (p->crop == IMAGE_CROP_CENTER) {
			center_axis(&plan->x, p->crop_w);
			center_axis(&plan->y, p->crop_h);
		}
		plan->crop = (struct image_box){ plan->x.first,
		    plan->y.first, plan->x.count, plan->y.count };
	}
	axis_span(&plan->x, &plan->decode.x, &plan->decode.w);
	axis_span(&plan->y, &plan->decode.y, &plan->decode.h);
flip:
	if (p->flip_p > 0)
		plan->flip = image_draw_unit(seed, epoch, index,
		    IMAGE_DRAW_FLIP) < p->flip_p;
}
