/* SPDX-License-Identifier: MIT */
/*
 * The image decoder's front: format detection from magic bytes, the
 * open/decode state and region checks; image-jpeg.c and image-png.c do the
 * decoding, on the state and with the helpers of image-codec.c (see
 * image-decode.h for the contract).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image-decode.h"
#include "image-codec.h"
#include "image-jpeg.h"
#include "image-png.h"

static const uint8_t	jpeg_magic[3] = { 0xff, 0xd8, 0xff };
static const uint8_t	png_magic[8] = {
	0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'
};

struct image_decoder *
image_decoder_new(void)
{
	return (calloc(1, sizeof(struct image_decoder)));
}

void
image_decoder_free(struct image_decoder *d)
{
	if (d == NULL)
		return;
	image_png_close(d);
	image_png_free(d->png);
	image_jpeg_free(d->jpeg);
	free(d->scratch);
	free(d);
}

void
image_decoder_set_memory_max(struct image_decoder *d, uint64_t bytes)
{
	d->memory_max = bytes;
}

const char *
image_decoder_error(const struct image_decoder *d)
{
	return (d->err);
}

/* Say what @buf starts with, for "not a JPEG or PNG image". */
static int
image_unknown(struct image_decoder *d, const uint8_t *buf, size_t len)
{
	static const char	 digits[] = "0123456789abcdef";
	char			 hex[3 * 4];
	size_t			 i, n = len < 4 ? len : 4;

	if (len == 0)
		return (image_error(d, "not a JPEG or PNG image (empty)"));
	for (i = 0; i < n; i++) {
		hex[3 * i] = digits[buf[i] >> 4];
		hex[3 * i + 1] = digits[buf[i] & 15];
		hex[3 * i + 2] = i + 1 < n ? ' ' : '\0';
	}
	return (image_error(d, "not a JPEG or PNG image (starts with %s)",
	    hex));
}

int
image_open(struct image_decoder *d, const uint8_t *buf, size_t len,
    struct image_info *info)
{
	int	rc;

	image_png_close(d);
	d->state = IMAGE_NONE;
	d->err[0] = '\0';
	memset(&d->info, 0, sizeof d->info);
	memset(info, 0, sizeof *info);
	if (d->scratch_len > IMAGE_SCRATCH_KEEP) {
		free(d->scratch);
		d->scratch = NULL;
		d->scratch_len = 0;
	}
	if (buf == NULL)
		len = 0;
	d->buf = buf;
	d->len = len;

	if (len >= sizeof jpeg_magic &&
	    memcmp(buf, jpeg_magic, sizeof jpeg_magic) == 0) {
		d->info.format = IMAGE_FORMAT_JPEG;
		rc = image_jpeg_open(d);
	} else if (len >= sizeof png_magic &&
	    memcmp(buf, png_magic, sizeof png_magic) == 0) {
		d->info.format = IMAGE_FORMAT_PNG;
		rc = image_png_open(d);
	} else
		return (image_unknown(d, buf, len));
	if (rc == -1)
		return (-1);

	if (d->info.width == 0 || d->info.height == 0)
		return (image_error(d, "empty image (%ux%u)", d->info.width,
		    d->info.height));
	if ((uint64_t)d->info.width * d->info.height > IMAGE_MAX_PIXELS)
		return (image_error(d, "image too large (%ux%u, over %llu "
		    "pixels)", d->info.width, d->info.height,
		    IMAGE_MAX_PIXELS));
	d->state = IMAGE_OPEN;
	*info = d->info;
	return (0);
}

int
image_decode_region(struct image_decoder *d, uint32_t x, uint32_t y,
    uint32_t w, uint32_t h, uint8_t *dst, size_t dst_stride)
{
	if (d->state != IMAGE_OPEN)
		return (image_error(d, d->state == IMAGE_USED ?
		    "image already decoded (open it again)" :
		    "no image open"));
	d->state = IMAGE_USED;
	if (w == 0 || h == 0 || (uint64_t)x + w > d->info.width ||
	    (uint64_t)y + h > d->info.height)
		return (image_error(d, "region %ux%u at (%u,%u) outside the "
		    "%ux%u image", w, h, x, y, d->info.width,
		    d->info.height));
	if (dst == NULL || dst_stride < (size_t)w * 3)
		return (image_error(d, "row stride %zu too small for %u "
		    "pixels", dst_stride, w));

	switch (d->info.format) {
	case IMAGE_FORMAT_JPEG:
		return (image_jpeg_decode(d, x, y, w, h, dst, dst_stride));
	case IMAGE_FORMAT_PNG:
		return (image_png_decode(d, x, y, w, h, dst, dst_stride));
	default:
		return (image_error(d, "no image open"));
	}
}
