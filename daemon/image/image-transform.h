/* SPDX-License-Identifier: MIT */
/*
 * Image transforms: torchvision 0.14's RandomResizedCrop, Resize,
 * CenterCrop, RandomHorizontalFlip, ToTensor, PILToTensor and Normalize on
 * PIL images, reproduced exactly (Pillow 9.4's bilinear arithmetic, the
 * same rounding everywhere), apart from the random draws, which are
 * infeed's own.
 *
 * A pipeline is parsed once (image_pipeline_parse, image-pipeline.h) into
 * plain data.  For each sample, image_plan_make() (image-plan.h) turns the
 * image's size and (seed, epoch, index) into a plan: the box of source
 * pixels the decoder must produce and everything image_plan_run() then
 * needs to turn those pixels into the output tensor (image-resize.h
 * resamples).  This header is the one the daemon and the tests include:
 * it brings the other three.
 *
 * Only the pixels that reach the output are computed: Resize followed by
 * CenterCrop resamples only the kept window, and the decode box holds only
 * the source pixels that window reads.
 */
#ifndef INFEED_IMAGE_TRANSFORM_H
#define INFEED_IMAGE_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "image-pipeline.h"
#include "image-plan.h"
#include "image-resize.h"

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

#endif /* INFEED_IMAGE_TRANSFORM_H */
