/* SPDX-License-Identifier: MIT */
/*
 * Transforms: what a session asks the workers to do to each sample on its
 * way into the ring.  Today one: uint8 or float32 -> float32 as
 * x * scale, then (x - mean[c]) / std[c] per channel (dim 0 of the sample
 * shape).  The session checks a client's Transform once, at Attach
 * (transform_init); the workers apply it to every row (transform_row).
 */
#ifndef INFEED_TRANSFORM_H
#define INFEED_TRANSFORM_H

#include <stdint.h>

#include "dataset.h"
#include "infeed-limits.h"
#include "wire.h"

/* Plain data: it travels to the workers inside a message. */
struct transform {
	uint64_t	in_sample_bytes;	/* the dataset's */
	uint64_t	out_sample_bytes;	/* in the slot */
	uint32_t	in_dtype;
	uint32_t	to_float32;		/* 0: rows are copied as read */
	float		scale;
	uint32_t	nchannels;		/* 0: no normalisation */
	uint64_t	channel_elems;		/* elements per channel */
	float		mean[INFEED_MAX_CHANNELS];
	float		std[INFEED_MAX_CHANNELS];
};

/**
 * transform_init() - check the client's @t (NULL: none) against dataset
 * @ds and fill in @tf.
 * Return: 0, or -1 with *@cause saying what is wrong and what is expected.
 */
int	 transform_init(struct transform *tf, const Infeed__Transform *t,
	    const struct dataset *ds, char **cause);

/**
 * transform_out_dtype() - the dtype of the rows that @tf writes.
 */
enum infeed_dtype transform_out_dtype(const struct transform *tf,
	    const struct dataset *ds);

/**
 * transform_lut_new() - for uint8 input, a 256-entry table per channel that
 * transform_row() uses; NULL when @tf needs none (or without memory:
 * check transform_needs_lut()).
 */
float	*transform_lut_new(const struct transform *tf);
int	 transform_needs_lut(const struct transform *tf);

/**
 * transform_row() - convert one sample @in (in_sample_bytes) into @out
 * (out_sample_bytes of float32).
 */
void	 transform_row(const struct transform *tf, const float *lut,
	    const uint8_t *in, float *out);

#endif /* INFEED_TRANSFORM_H */
