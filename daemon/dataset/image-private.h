/* SPDX-License-Identifier: MIT */
/*
 * What image-decode.c shares with the format decoders, image-jpeg.c and
 * image-png.c; nothing outside daemon/dataset/image-*.c includes it.
 */
#ifndef INFEED_IMAGE_PRIVATE_H
#define INFEED_IMAGE_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "image-decode.h"

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

int	image_jpeg_open(struct image_decoder *d);
int	image_jpeg_decode(struct image_decoder *d, uint32_t x, uint32_t y,
	    uint32_t w, uint32_t h, uint8_t *dst, size_t dst_stride);
void	image_jpeg_free(struct image_jpeg *j);

int	image_png_open(struct image_decoder *d);
int	image_png_decode(struct image_decoder *d, uint32_t x, uint32_t y,
	    uint32_t w, uint32_t h, uint8_t *dst, size_t dst_stride);
void	image_png_close(struct image_decoder *d);
void	image_png_free(struct image_png *p);

#endif /* INFEED_IMAGE_PRIVATE_H */
