/* SPDX-License-Identifier: MIT */
/*
 * Per-sample plans: image_plan_make() turns an image's size and (seed,
 * epoch, index) into the box of source pixels the decoder must produce and
 * everything image_plan_run() (image-transform.h) then needs.  The draws
 * come from a counter-based generator keyed by (seed, epoch, index, draw
 * number), so a plan is the same whichever worker makes it, and in
 * whatever order.
 */
#ifndef INFEED_IMAGE_PLAN_H
#define INFEED_IMAGE_PLAN_H

#include <stdint.h>

#include "image-pipeline.h"

/* Columns [x, x+w), rows [y, y+h). */
struct image_box {
	uint32_t	x, y, w, h;
};

/*
 * One axis of a plan.  The region [src, src+in) of the source (the crop,
 * or the whole image) is resampled to @out pixels (no resampling when
 * in == out); of those, [first, first+count) are kept and land at output
 * position @pad, with zeros around them.  When the plan flips, the kept
 * pixels land mirrored at out_w - pad - count.
 */
struct image_axis {
	uint32_t	src, in, out;
	uint32_t	first, count;
	uint32_t	pad;
};

/* What one sample needs: computed from the image size and (seed, epoch, index) alone. */
struct image_plan {
	struct image_box	decode;	/* the source pixels the decoder must produce */
	struct image_box	crop;	/* RandomResizedCrop's box (source pixels) or
					   CenterCrop's (in the resized image) */
	struct image_axis	x, y;
	uint32_t		flip;
	uint32_t		pad0;
};

void	 image_plan_make(const struct image_pipeline *, uint32_t, uint32_t,
	    uint64_t, uint64_t, uint64_t, struct image_plan *);

/* The random draws behind the plans (exported for the tests). */
uint64_t image_draw(uint64_t, uint64_t, uint64_t, uint64_t);
float	 image_draw_unit(uint64_t, uint64_t, uint64_t, uint64_t);

#endif /* INFEED_IMAGE_PLAN_H */
