/* SPDX-License-Identifier: MIT */
/*
 * An image pipeline: torchvision 0.14's RandomResizedCrop, Resize,
 * CenterCrop, RandomHorizontalFlip, ToTensor, PILToTensor and Normalize,
 * parsed once from text written as torchvision code into plain data (no
 * pointers), which the plans (image-plan.h) and the driver
 * (image-transform.h) read.
 */
#ifndef INFEED_IMAGE_PIPELINE_H
#define INFEED_IMAGE_PIPELINE_H

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

#endif /* INFEED_IMAGE_PIPELINE_H */
