/* SPDX-License-Identifier: MIT */
/*
 * The codecs' shared ground: the decoder's state, which the front
 * (image-decode.c) and each format's decoder (image-jpeg.c, image-png.c)
 * work on, and the helpers they share (the error phrase, the scratch rows,
 * the memory cap's refusal).  Nothing outside daemon/image/ includes it.
 */
#ifndef INFEED_IMAGE_CODEC_H
#define INFEED_IMAGE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "image-info.h"

#define IMAGE_ERROR_MAX		256	/* bytes of an error phrase */
#define IMAGE_SCRATCH_KEEP	(16u << 20)	/* scratch kept between images */

struct image_jpeg;
struct image_png;

enum image_state {
	IMAGE_NONE = 0,		/* nothing open, or the last open failed */
	IMAGE_OPEN,		/* image_open() succeeded */
	IMAGE_USED		/* image_decode_region() was called */
};

struct image_decoder {
	struct image_jpeg	*jpeg;		/* made on the first JPEG */
	struct image_png	*png;		/* one image's libspng context */
	enum image_state	 state;
	struct image_info	 info;
	const uint8_t		*buf;		/* the caller's encoded image */
	size_t			 len;
	uint8_t			*scratch;	/* rows, reused */
	size_t			 scratch_len;
	uint64_t		 memory_max;	/* a decode's, 0: no cap */
	char			 err[IMAGE_ERROR_MAX];
};

/* Set @d's error phrase; returns -1 for "return (image_error(...))". */
int	image_error(struct image_decoder *d, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* A scratch buffer of at least @len bytes, or NULL with the error set. */
uint8_t	*image_scratch(struct image_decoder *d, size_t len);

/**
 * image_memory_refuse() - the phrase for an image that needs @need bytes
 * of @what where @max are allowed, in @d's error; returns -1.
 */
int	image_memory_refuse(struct image_decoder *d, const char *what,
	    uint64_t need, uint64_t max);

#endif /* INFEED_IMAGE_CODEC_H */
