/* SPDX-License-Identifier: MIT */
/*
 * The JPEG decoder (libjpeg-turbo), called by the front in image-decode.c
 * on the decoder's state (image-codec.h); see image-jpeg.c for how it
 * follows Pillow.
 */
#ifndef INFEED_IMAGE_JPEG_H
#define INFEED_IMAGE_JPEG_H

#include <stddef.h>
#include <stdint.h>

struct image_decoder;
struct image_jpeg;

/* Read the header of d->buf into d->info; 0, or -1 with the error set. */
int	image_jpeg_open(struct image_decoder *d);
/* Decode a region of the opened JPEG as RGB8 (see image_decode_region()). */
int	image_jpeg_decode(struct image_decoder *d, uint32_t x, uint32_t y,
	    uint32_t w, uint32_t h, uint8_t *dst, size_t dst_stride);
/* Free the decompressor kept between images; NULL is a no-op. */
void	image_jpeg_free(struct image_jpeg *j);

#endif /* INFEED_IMAGE_JPEG_H */
