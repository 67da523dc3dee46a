/* SPDX-License-Identifier: MIT */
/*
 * Hostile images for the decoders' memory cap: see image-bombs.h.
 */

#include <string.h>

#include "image-bombs.h"

/* PNG's CRC-32 of @len bytes. */
static uint32_t
bomb_crc32(const uint8_t *p, size_t len)
{
	uint32_t	c = 0xffffffffu;
	size_t		i;
	int		k;

	for (i = 0; i < len; i++) {
		c ^= p[i];
		for (k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
	}
	return (c ^ 0xffffffffu);
}

/* A big-endian 32-bit value at @p. */
static void
bomb_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* A PNG chunk of @type and @len bytes of @data at @p; its size. */
static size_t
bomb_chunk(uint8_t *p, const char *type, const uint8_t *data, size_t len)
{
	bomb_be32(p, (uint32_t)len);
	memcpy(p + 4, type, 4);
	if (len > 0)
		memcpy(p + 8, data, len);
	bomb_be32(p + 8 + len, bomb_crc32(p + 4, 4 + len));
	return (12 + len);
}

size_t
image_bomb_png(uint8_t *buf)
{
	static const uint8_t	sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n',
				    0x1a, '\n' };
	/* An empty zlib stream: the pixels never come. */
	static const uint8_t	idat[8] = { 0x78, 0x9c, 0x03, 0x00, 0x00,
				    0x00, 0x00, 0x01 };
	uint8_t			ihdr[13];
	size_t			n = 0;

	memcpy(buf, sig, sizeof(sig));
	n += sizeof(sig);
	bomb_be32(ihdr, IMAGE_BOMB_SIDE);
	bomb_be32(ihdr + 4, IMAGE_BOMB_SIDE);
	ihdr[8] = 16;		/* bits per sample */
	ihdr[9] = 6;		/* RGBA */
	ihdr[10] = 0;
	ihdr[11] = 0;
	ihdr[12] = 1;		/* Adam7 */
	n += bomb_chunk(buf + n, "IHDR", ihdr, sizeof(ihdr));
	n += bomb_chunk(buf + n, "IDAT", idat, sizeof(idat));
	n += bomb_chunk(buf + n, "IEND", NULL, 0);
	return (n);
}

size_t
image_bomb_jpeg(uint8_t *buf)
{
	static const uint8_t	head[] = {
		0xff, 0xd8,				/* SOI */
		0xff, 0xc2, 0x00, 0x11, 0x08,		/* SOF2, 8-bit */
		IMAGE_BOMB_SIDE >> 8, IMAGE_BOMB_SIDE & 0xff,
		IMAGE_BOMB_SIDE >> 8, IMAGE_BOMB_SIDE & 0xff,
		0x03, 0x01, 0x11, 0x00, 0x02, 0x11, 0x00, 0x03, 0x11, 0x00,
		0xff, 0xda, 0x00, 0x0c, 0x03,		/* SOS: DC first */
		0x01, 0x00, 0x02, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00,
		0xff, 0xd9,				/* EOI */
	};

	memcpy(buf, head, sizeof(head));
	return (sizeof(head));
}
