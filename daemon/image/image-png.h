/* SPDX-License-Identifier: MIT */
/*
 * The PNG decoder (libspng), called by the front in image-decode.c on the
 * decoder's state (image-codec.h); see image-png.c for how it follows
 * Pillow.
 */
#ifndef INFEED_IMAGE_PNG_H
#define INFEED_IMAGE_PNG_H

#include <stddef.h>
#include <stdint.h>

struct image_decoder;
struct image_png;

/* Read the header of d->buf into d->info; 0, or -1 with the error set. */
int	image_png_open(struct image_decoder *d);
/* Decode a region of the opened PNG as RGB8 (see image_decode_region()). */
int	image_png_decode(struct image_decoder *d, uint32_t x, uint32_t y,
	    uint32_t w, uint32_t h, uint8_t *dst, size_t dst_stride);
/* Forget the image open in d->png, keeping the context. */
void	image_png_close(struct image_decoder *d);
/* Free a libspng context; NULL is a no-op. */
void	image_png_free(struct image_png *p);

#endif /* INFEED_IMAGE_PNG_H */
