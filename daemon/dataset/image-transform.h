/* SPDX-License-Identifier: MIT */
/*
 * Image transforms: torchvision 0.14's RandomResizedCrop, Resize,
 * CenterCrop, RandomHorizontalFlip, ToTensor, PILToTensor and Normalize on
 * PIL images, reproduced exactly (Pillow 9.4's bilinear arithmetic, the
 * same rounding everywhere), apart from the random draws, which are
 * infeed's own.
 *
 * A pipeline is parsed once (image_pipeline_parse) into plain data.  For
 * each sample, image_plan_make() turns the image's size and (seed, epoch,
 * index) into a plan: the box of source pixels the decoder must produce and
 * everything image_plan_run() then needs to turn those pixels into the
 * output tensor.  The draws come from a counter-based generator keyed by
 * (seed, epoch, index, draw number), so a plan is the same whichever worker
 * makes it, and in whatever order.
 *
 * Only the pixels that reach the output are computed: Resize followed by
 * CenterCrop resamples only the kept window, and the decode box holds only
 * the source pixels that window reads.
 */
#ifndef INFEED_IMAGE_TRANSFORM_H
#define INFEED_IMAGE_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#define IMAGE_MAX_SIZE		8192	/* largest size a transform accepts */

enum image_output {
	IMAGE_OUT_FLOAT32_CHW = 0,	/* ToTensor() [+ Normalize] */
	IMAGE_OUT_UINT8_CHW = 1,	/* PILToTensor() */
	IMAGE_OUT_UINT8_HWC = 2,	/* neither: what the PIL image holds */
};

enum image_crop {
	IMAGE_CROP_NONE = 0,
	IMAGE_CROP_RANDOM_RESIZED = 1,
	IMAGE_CROP_CENTER = 2,
};

/* A parsed pipeline: plain data (no pointers), copied into messages to worker processes. */
struct image_pipeline {
	uint32_t	resize;		/* Resize(size) of the short side; 0: none */
	uint32_t	resize_h, resize_w; /* Resize((h, w)); 0: none */
	uint32_t	max_size;	/* Resize(..., max_size); 0: none */
	uint32_t	crop;		/* enum image_crop */
	uint32_t	crop_h, crop_w;	/* RandomResizedCrop size or CenterCrop size */
	float		scale[2], ratio[2]; /* RandomResizedCrop */
	float		flip_p;		/* RandomHorizontalFlip(p); 0: none */
	uint32_t	output;		/* enum image_output */
	uint32_t	normalize;	/* Normalize present */
	float		mean[3], std[3];
	uint32_t	out_h, out_w;	/* every sample's output size */
	uint64_t	out_bytes;	/* one sample's output bytes */
	double		ratio64[2];	/* ratio as written (Python floats): the
					   fallback computes with these */
};

int	 image_pipeline_parse(const char *, struct image_pipeline *, char **);
char	*image_pipeline_format(const struct image_pipeline *, char *, size_t);

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

/* Scratch memory a worker reuses across samples (grown as needed). */
struct image_work {
	void		*buf;
	size_t		 cap;
	float		 lut[3][256];	/* ToTensor + Normalize, per channel */
	float		 lut_key[6];	/* the mean and std lut was made for */
	uint32_t	 lut_ok;
	uint32_t	 pad0;
};

void	 image_work_free(struct image_work *);
int	 image_plan_run(const struct image_pipeline *, const struct image_plan *,
	    const uint8_t *, size_t, void *, struct image_work *);

/* The random draws behind the plans (exported for the tests). */
uint64_t image_draw(uint64_t, uint64_t, uint64_t, uint64_t);
float	 image_draw_unit(uint64_t, uint64_t, uint64_t, uint64_t);

/* Which code image_plan_run() uses: the tests and the benchmark force one. */
enum image_simd {
	IMAGE_SIMD_AUTO = 0,
	IMAGE_SIMD_SCALAR = 1,
	IMAGE_SIMD_AVX2 = 2,
};
enum image_simd	 image_simd_select(enum image_simd);

#endif /* INFEED_IMAGE_TRANSFORM_H */
