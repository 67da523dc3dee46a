/* SPDX-License-Identifier: MIT */
/*
 * Transforms: what a session asks the workers to do to each sample on its
 * way into the ring.  For arrays: uint8 or float32 -> float32 as
 * x * scale, then (x - mean[c]) / std[c] per channel (dim 0 of the sample
 * shape).  For images (an encoded dataset): a torchvision-style pipeline,
 * decoded and run per image (transform_image_row).  The session checks a
 * client's Transform once, at Attach (transform_init); the workers apply
 * it to every row (transform_row).
 */
#ifndef INFEED_TRANSFORM_H
#define INFEED_TRANSFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "image-transform.h"
#include "infeed-limits.h"

/*
 * What a client asks of its samples, as its Attach says (peer.c converts
 * infeed.proto's Transform): unchecked, transform_init() judges it.
 */
struct transform_spec {
	bool		 to_float32;
	float		 scale;			/* 1 when not given */
	size_t		 nmean;			/* values given: */
	size_t		 nstd;			/* the first INFEED_MAX_CHANNELS */
	float		 mean[INFEED_MAX_CHANNELS];	/* are kept */
	float		 std[INFEED_MAX_CHANNELS];
	char		*pipeline;		/* images: the text; or NULL */
};

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
	/* Images: the pipeline, and what its random draws are keyed by. */
	uint32_t	image;			/* 1: an encoded dataset */
	uint32_t	bad_replace;		/* bad_samples = replace */
	uint64_t	seed;
	struct image_pipeline pipeline;
};

/**
 * transform_init() - check the client's @t (NULL: none) against dataset
 * @ds and fill in @tf.
 * Return: 0, or -1 with *@cause saying what is wrong and what is expected.
 */
int	 transform_init(struct transform *tf, const struct transform_spec *t,
	    const struct dataset *ds, char **cause);

/**
 * transform_out_dtype() - the dtype of the rows that @tf writes.
 */
enum infeed_dtype transform_out_dtype(const struct transform *tf,
	    const struct dataset *ds);

/**
 * transform_out_shape() - the shape of one row @tf writes, into @shape;
 * Return: its number of dimensions.
 */
uint32_t transform_out_shape(const struct transform *tf,
	    const struct dataset *ds, uint64_t shape[INFEED_MAX_DIMS]);

/* What a worker keeps from one image to the next: buffers, a decoder. */
struct transform_work;

/**
 * transform_work_new(), transform_work_free() - a worker's image state;
 * free(NULL) is a no-op.  new never fails (out of memory is fatal).  An
 * image that needs more than @memory_max bytes to decode (its decoded box,
 * an interlaced PNG whole, a progressive JPEG's coefficients) is refused
 * as bad (0: no cap).
 */
struct transform_work *transform_work_new(uint64_t memory_max);
void	 transform_work_free(struct transform_work *w);

/**
 * transform_image_row() - read image @index of @ds, decode what @tf's
 * pipeline needs of it and write the row at @out (out_sample_bytes),
 * with its label in *@label.  The crop and flip draw from (tf->seed,
 * @epoch, @index) alone.  A bad image (unreadable, truncated, corrupt,
 * not JPEG or PNG) is replaced, with tf->bad_replace, by the first good
 * one of a fixed sequence of other indices (logged; counted in
 * *@replaced); else, or when none of them is good either, it fails.
 * *@bytes grows by the encoded bytes read.
 * Return: 0, or -1 with @reason saying what was wrong with image @index.
 */
int	 transform_image_row(const struct transform *tf,
	    struct transform_work *w, const struct dataset *ds,
	    uint64_t epoch, uint64_t index, void *out, int64_t *label,
	    uint64_t *bytes, uint32_t *replaced, char *reason, size_t len);

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
