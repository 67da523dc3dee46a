/* SPDX-License-Identifier: MIT */
/*
 * PNG with libspng, converted to RGB8 as Pillow's convert("RGB") does.
 *
 * libspng's own RGB8 output equals Pillow's for most PNGs but not for two
 * (16-bit grey: libspng shifts, Pillow clips at 255; a palette index past
 * the palette's end: libspng gives black, Pillow (i, i, i) from the grey
 * ramp it pre-fills), so rows are decoded as SPNG_FMT_PNG (the PNG's own
 * samples, 16-bit ones in host order) with no flags (no tRNS, gamma or
 * sBIT) and converted here, one rule per colour type:
 *
 *	grey 1-bit	0 -> 0, 1 -> 255 (Pillow's mode "1")
 *	grey 2/4-bit	v * 85 / v * 17
 *	grey 8-bit	v
 *	grey 16-bit	min(v, 255)
 *	palette		PLTE[i], or (i, i, i) past its end
 *	RGB, RGBA, GA	the colour samples, alpha dropped; 16-bit: v >> 8
 *
 * A non-interlaced image is decoded row by row up to the region's last
 * row; an interlaced one is decoded whole, then the region copied.
 * Ancillary chunks are capped (PNG_CHUNK_MAX each, PNG_CACHE_MAX in all)
 * and the size by IMAGE_MAX_PIXELS, so no file makes libspng allocate
 * without bound; an interlaced image whose whole decoded size is over the
 * decoder's memory cap is refused at open, before anything is allocated
 * (a 13376 x 13376 16-bit RGBA one, 100 bytes of file, needs 1.43 GB).
 */

#include <stdlib.h>
#include <string.h>

#include <spng.h>

#include "image-codec.h"
#include "image-png.h"

#define PNG_CHUNK_MAX	(16u << 20)	/* one ancillary chunk, inflated */
#define PNG_CACHE_MAX	(64u << 20)	/* all of them */

struct image_png {
	spng_ctx		*ctx;		/* this image's; NULL if none */
	struct spng_ihdr	 ihdr;
	uint8_t			 pal[256][3];	/* PLTE, then a grey ramp */
};

/* Forget the open image's context. */
void
image_png_close(struct image_decoder *d)
{
	if (d->png != NULL && d->png->ctx != NULL) {
		spng_ctx_free(d->png->ctx);
		d->png->ctx = NULL;
	}
}

void
image_png_free(struct image_png *p)
{
	if (p == NULL)
		return;
	if (p->ctx != NULL)
		spng_ctx_free(p->ctx);
	free(p);
}

/* The error phrase for libspng's error @ret. */
static int
image_png_error(struct image_decoder *d, const char *what, int ret)
{
	switch (ret) {
	case SPNG_IO_EOF:
	case SPNG_EOF:
	case SPNG_EIDAT_TOO_SHORT:
		what = "truncated PNG data";
		break;
	case SPNG_EMEM:
		what = "out of memory decoding PNG";
		break;
	case SPNG_ECHUNK_LIMITS:
		what = "PNG over the chunk limits";
		break;
	default:
		break;
	}
	return (image_error(d, "%s (%s)", what, spng_strerror(ret)));
}

/* Bytes of one decoded pixel at the PNG's own depth (at least 1). */
static uint64_t
image_png_bytes_per_pixel(const struct spng_ihdr *ih)
{
	unsigned	ch;

	switch (ih->color_type) {
	case SPNG_COLOR_TYPE_TRUECOLOR:
		ch = 3;
		break;
	case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
		ch = 2;
		break;
	case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA:
		ch = 4;
		break;
	default:
		ch = 1;
		break;
	}
	return (ih->bit_depth == 16 ? 2 * ch : ch);
}

/* Read IHDR; set d->info's size. */
int
image_png_open(struct image_decoder *d)
{
	struct image_png	*p;
	uint64_t		 need;
	int			 ret;

	if (d->png == NULL && (d->png = calloc(1, sizeof *d->png)) == NULL)
		return (image_error(d, "out of memory (PNG decoder)"));
	p = d->png;
	if ((p->ctx = spng_ctx_new(0)) == NULL)
		return (image_error(d, "out of memory (PNG decoder)"));
	if (spng_set_image_limits(p->ctx, IMAGE_MAX_PIXELS,
	    IMAGE_MAX_PIXELS) != 0 ||
	    spng_set_chunk_limits(p->ctx, PNG_CHUNK_MAX, PNG_CACHE_MAX) != 0)
		return (image_error(d, "cannot set the PNG decoder's limits"));
	if ((ret = spng_set_png_buffer(p->ctx, d->buf, d->len)) != 0)
		return (image_png_error(d, "bad PNG header", ret));
	if ((ret = spng_get_ihdr(p->ctx, &p->ihdr)) != 0)
		return (image_png_error(d, "bad PNG header", ret));
	d->info.width = p->ihdr.width;
	d->info.height = p->ihdr.height;
	/* Adam7 is decoded whole: the image, at its own depth, at once. */
	if (p->ihdr.interlace_method != SPNG_INTERLACE_NONE &&
	    d->memory_max != 0) {
		need = (uint64_t)p->ihdr.width * p->ihdr.height *
		    image_png_bytes_per_pixel(&p->ihdr);
		if (need > d->memory_max)
			return (image_memory_refuse(d, "an interlaced PNG is "
			    "decoded whole", need, d->memory_max));
	}
	return (0);
}

/* Fill the palette: PLTE's entries, then Pillow's grey ramp. */
static int
image_png_palette(struct image_decoder *d)
{
	struct image_png	*p = d->png;
	struct spng_plte	 plte;
	uint32_t		 i, n = 0;
	int			 ret;

	ret = spng_get_plte(p->ctx, &plte);
	if (ret == 0)
		n = plte.n_entries < 256 ? plte.n_entries : 256;
	else if (ret != SPNG_ECHUNKAVAIL)
		return (image_png_error(d, "corrupt PNG", ret));
	for (i = 0; i < n; i++) {
		p->pal[i][0] = plte.entries[i].red;
		p->pal[i][1] = plte.entries[i].green;
		p->pal[i][2] = plte.entries[i].blue;
	}
	for (; i < 256; i++)
		p->pal[i][0] = p->pal[i][1] = p->pal[i][2] = i;
	return (0);
}

/* A host-order 16-bit sample. */
static inline uint16_t
image_png_u16(const uint8_t *s)
{
	uint16_t	v;

	memcpy(&v, s, sizeof v);
	return (v);
}

/* Sample @i of a row of @depth-bit (1, 2, 4 or 8) samples. */
static inline unsigned
image_png_bits(const uint8_t *in, size_t i, unsigned depth)
{
	size_t		bit = i * depth;
	unsigned	shift = 8 - depth - (unsigned)(bit & 7);

	return ((in[bit >> 3] >> shift) & ((1u << depth) - 1));
}

/* Pixels [x, x+w) of a decoded row @in to RGB8 at @out. */
static void
image_png_row(const struct image_png *p, uint8_t *out, const uint8_t *in,
    uint32_t x, uint32_t w)
{
	const struct spng_ihdr	*ih = &p->ihdr;
	unsigned		 depth = ih->bit_depth, v;
	size_t			 i, e = (size_t)x + w;
	int			 c;

	switch (ih->color_type) {
	case SPNG_COLOR_TYPE_GRAYSCALE:
		for (i = x; i < e; i++, out += 3) {
			switch (depth) {
			case 1:
				v = image_png_bits(in, i, 1) ? 255 : 0;
				break;
			case 2:
				v = image_png_bits(in, i, 2) * 85;
				break;
			case 4:
				v = image_png_bits(in, i, 4) * 17;
				break;
			case 8:
				v = in[i];
				break;
			default:
				v = image_png_u16(in + 2 * i);
				if (v > 255)
					v = 255;
				break;
			}
			out[0] = out[1] = out[2] = v;
		}
		break;
	case SPNG_COLOR_TYPE_INDEXED:
		for (i = x; i < e; i++, out += 3) {
			v = depth == 8 ? in[i] : image_png_bits(in, i, depth);
			memcpy(out, p->pal[v], 3);
		}
		break;
	case SPNG_COLOR_TYPE_TRUECOLOR:
		if (depth == 8) {
			memcpy(out, in + 3 * (size_t)x, 3 * (size_t)w);
			break;
		}
		for (i = x; i < e; i++, out += 3)
			for (c = 0; c < 3; c++)
				out[c] = image_png_u16(in + 6 * i + 2 * c) >> 8;
		break;
	case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
		for (i = x; i < e; i++, out += 3) {
			v = depth == 8 ? in[2 * i] :
			    (unsigned)(image_png_u16(in + 4 * i) >> 8);
			out[0] = out[1] = out[2] = v;
		}
		break;
	case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA:
		for (i = x; i < e; i++, out += 3)
			for (c = 0; c < 3; c++)
				out[c] = depth == 8 ? in[4 * i + c] :
				    image_png_u16(in + 8 * i + 2 * c) >> 8;
		break;
	}
}

int
image_png_decode(struct image_decoder *d, uint32_t x, uint32_t y,
    uint32_t w, uint32_t h, uint8_t *dst, size_t dst_stride)
{
	struct image_png	*p = d->png;
	uint8_t			*buf;
	size_t			 total, rowlen;
	uint32_t		 r;
	int			 ret;

	if (p->ihdr.color_type == SPNG_COLOR_TYPE_INDEXED &&
	    image_png_palette(d) == -1)
		return (-1);
	if ((ret = spng_decoded_image_size(p->ctx, SPNG_FMT_PNG,
	    &total)) != 0)
		return (image_png_error(d, "corrupt PNG", ret));
	if (total == 0 || total % d->info.height != 0)
		return (image_error(d, "corrupt PNG (image of %zu bytes)",
		    total));
	rowlen = total / d->info.height;

	if (p->ihdr.interlace_method != SPNG_INTERLACE_NONE) {
		/* Adam7 spreads every row over all seven passes. */
		if ((buf = image_scratch(d, total)) == NULL)
			return (-1);
		memset(buf, 0, total);
		if ((ret = spng_decode_image(p->ctx, buf, total, SPNG_FMT_PNG,
		    0)) != 0)
			return (image_png_error(d, "corrupt PNG data", ret));
		for (r = 0; r < h; r++)
			image_png_row(p, dst + r * dst_stride,
			    buf + (size_t)(y + r) * rowlen, x, w);
		return (0);
	}

	if ((buf = image_scratch(d, rowlen)) == NULL)
		return (-1);
	if ((ret = spng_decode_image(p->ctx, NULL, 0, SPNG_FMT_PNG,
	    SPNG_DECODE_PROGRESSIVE)) != 0)
		return (image_png_error(d, "corrupt PNG data", ret));
	for (r = 0; r < y + h; r++) {
		ret = spng_decode_row(p->ctx, buf, rowlen);
		if (ret != 0 && !(ret == SPNG_EOI &&
		    r == d->info.height - 1))
			return (image_png_error(d, "corrupt PNG data",
			    ret == SPNG_EOI ? SPNG_EINTERNAL : ret));
		if (r >= y)
			image_png_row(p, dst + (size_t)(r - y) * dst_stride,
			    buf, x, w);
	}
	return (0);
}
