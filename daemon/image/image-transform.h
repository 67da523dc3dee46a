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

/*
 * The tail of a pipeline of float32 output (ToTensor, and Normalize if
 * there) on its own: a sample's uint8 CHW planes into the tensor
 * image_plan_run() writes for them, and back, exactly (a group's store
 * keeps steps as uint8: group-store.h).
 */
struct image_tail {
	float		 lut[3][256];	/* the tensor's float of each byte */
	float		 key[6];	/* mean, std (0, 1: no Normalize) */
	size_t		 plane;		/* out_h * out_w */
};

void	 image_work_free(struct image_work *);
int	 image_plan_run(const struct image_pipeline *, const struct image_plan *,
	    const uint8_t *, size_t, void *, struct image_work *);
int	 image_tail_init(struct image_tail *, const struct image_pipeline *);
void	 image_tail_to_float(const struct image_tail *, const uint8_t *,
	    float *);
void	 image_tail_to_u8(const struct image_tail *, const float *,
	    uint8_t *);

#endif /* INFEED_IMAGE_TRANSFORM_H */
