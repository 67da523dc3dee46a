/* SPDX-License-Identifier: MIT */
/*
 * Image decoders: JPEG (libjpeg-turbo) and PNG (libspng) to RGB8, pixel for
 * pixel what PIL's Image.open(f).convert("RGB") gives with the same
 * libraries (Debian 12: Pillow 9.4, libjpeg-turbo 2.1.5), and only the
 * region a crop needs.
 *
 * A worker keeps one image_decoder and reuses it for every image:
 * image_open() reads the header of an encoded image held in memory, then
 * image_decode_region() decodes one rectangle of it.  The format comes from
 * the first bytes, never from a file name.  Every input is untrusted: a
 * corrupt, truncated or hostile file gives -1 and a short English phrase
 * (image_decoder_error()); nothing exits, prints, crashes or loops.
 *
 * JPEG: libjpeg's defaults (ISLOW IDCT, fancy upsampling, scale 1/1) with
 * RGB output; greyscale replicated to RGB; CMYK and YCCK through Pillow's
 * inverted-CMYK formula.  Any libjpeg warning, such as "Premature end of
 * JPEG file", is an error, as Pillow raises on a truncated file.  A region
 * is decoded with jpeg_crop_scanline() (one extra column each side, so the
 * edge columns equal a full decode's) and jpeg_skip_scanlines().
 *
 * PNG: every colour type and bit depth, interlaced or not, as Pillow
 * converts them: alpha dropped (never composited), tRNS, gamma and ICC
 * ignored, 16-bit grey clipped at 255, 16-bit colour by its high byte, a
 * palette index past the palette's end giving (i, i, i).
 *
 * Images over IMAGE_MAX_PIXELS (Pillow's DecompressionBombError limit),
 * 12-bit JPEGs and empty images are refused.
 */
#ifndef INFEED_IMAGE_DECODE_H
#define INFEED_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "image-info.h"

struct image_decoder;		/* one per worker thread, reused for every image */

/**
 * image_decoder_new() - a decoder, reused for every image one thread decodes.
 * Return: the decoder, or NULL on ENOMEM.
 */
struct image_decoder	*image_decoder_new(void);

/**
 * image_decoder_free() - free @d and everything it holds; NULL is a no-op.
 */
void			 image_decoder_free(struct image_decoder *d);

/**
 * image_open() - read the header of the encoded image in @buf.
 * @d: the decoder; whatever image it had open is forgotten.
 * @buf: the encoded image, @len bytes; must stay valid until the next
 *       image_open() or image_decode_region().
 * @info: set to the format (from the magic bytes) and the size.
 *
 * Return: 0, or -1 with image_decoder_error() set (unsupported format,
 * corrupt header, too many pixels, 0 size, more memory to decode than
 * image_decoder_set_memory_max() allows).
 */
int	image_open(struct image_decoder *d, const uint8_t *buf, size_t len,
	    struct image_info *info);

/**
 * image_decode_region() - decode a rectangle of the opened image as RGB8.
 * @d: a decoder on which image_open() succeeded.
 * @x, @y, @w, @h: columns [x, x+w) and rows [y, y+h), inside the image.
 * @dst: h rows of 3*w bytes, @dst_stride bytes apart.
 *
 * The pixels are bit-identical to that region of PIL's
 * Image.open(f).convert("RGB").  Only what the region needs is decoded.
 * May be called once per image_open().
 *
 * Return: 0, or -1 with image_decoder_error() set: truncated or corrupt data
 * (any libjpeg warning counts as an error), a region outside the image.
 */
int	image_decode_region(struct image_decoder *d, uint32_t x, uint32_t y,
	    uint32_t w, uint32_t h, uint8_t *dst, size_t dst_stride);

/**
 * image_decoder_set_memory_max() - refuse, at image_open(), an image whose
 * decode would need more than @bytes (0: no cap, the default): the whole
 * image of an interlaced PNG, the coefficients of a progressive JPEG.
 * Rows and other buffers of a width's size are not counted.
 */
void	image_decoder_set_memory_max(struct image_decoder *d, uint64_t bytes);

/**
 * image_decoder_error() - the last error, a short English phrase such as
 * "truncated JPEG data (Premature end of JPEG file)"; "" if none.
 */
const char	*image_decoder_error(const struct image_decoder *d);

#endif /* INFEED_IMAGE_DECODE_H */
