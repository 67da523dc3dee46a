/* SPDX-License-Identifier: MIT */
/*
 * What an encoded image is, as image_open() reports it: its format (from
 * the magic bytes) and size.  Shared by the decoder's front
 * (image-decode.h), the formats' decoders and their callers.
 */
#ifndef INFEED_IMAGE_INFO_H
#define INFEED_IMAGE_INFO_H

#include <stdint.h>

enum image_format {
	IMAGE_FORMAT_UNKNOWN = 0,
	IMAGE_FORMAT_JPEG = 1,
	IMAGE_FORMAT_PNG = 2
};

struct image_info {
	enum image_format	format;
	uint32_t		width, height;
};

#define IMAGE_MAX_PIXELS 178956970ULL	/* Pillow's DecompressionBombError limit */

#endif /* INFEED_IMAGE_INFO_H */
