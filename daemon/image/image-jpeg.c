/* SPDX-License-Identifier: MIT */
/*
 * JPEG with libjpeg-turbo, as Pillow decodes it: libjpeg's defaults (ISLOW
 * IDCT, fancy upsampling, scale 1/1), only out_color_space set (RGB for 3
 * components, GRAYSCALE for 1, CMYK for 4), the input colour space left to
 * libjpeg's JFIF/Adobe detection.  Pillow always takes 4-component data as
 * Adobe-inverted CMYK and converts it with its own formula, repeated here.
 *
 * libjpeg reports errors through error_exit, which must not return, and
 * warnings through emit_message(-1).  Both longjmp back to the entry point
 * here with the message written to the decoder's error phrase: a warning
 * ("Premature end of JPEG file", "Corrupt JPEG data: ...") is a bad image,
 * as Pillow raises on a truncated file.  After a longjmp the decompressor
 * is reset with jpeg_abort_decompress(), which keeps it for the next image.
 *
 * A region is decoded with jpeg_crop_scanline() and jpeg_skip_scanlines()
 * (libjpeg-turbo 1.5.1 and later).  Fancy upsampling treats the edges of a
 * cropped row as image edges, so one more column is asked for on each side
 * (clamped), and at least JPEG_MIN_CROP columns; libjpeg widens the crop to
 * its iMCU alignment and says where it starts.  No extra rows are needed: libjpeg-turbo keeps the upsampler's
 * context rows itself when skipping.  Rows below the region are never
 * decoded (jpeg_abort_decompress()).
 */

#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "image-codec.h"
#include "image-jpeg.h"

/*
 * The narrowest crop asked of libjpeg.  Very narrow crops (a chroma row of
 * one sample) upsample differently from a full decode even inside the
 * margin, so a crop is widened to at least two iMCU columns of 4:2:0.
 */
#define JPEG_MIN_CROP	32

#if BITS_IN_JSAMPLE != 8
#error "image-jpeg.c wants an 8-bit libjpeg"
#endif

/* libjpeg's error manager, with the way back to the entry point. */
struct image_jpeg_err {
	struct jpeg_error_mgr	 pub;	/* first: libjpeg casts to it */
	jmp_buf			 jb;
	struct image_decoder	*d;
	const char		*what;	/* "bad JPEG header", ... */
	int			 in_header;	/* in image_jpeg_open() */
};

struct image_jpeg {
	struct jpeg_decompress_struct	 cinfo;
	struct image_jpeg_err		 jerr;
	int				 components;	/* 1, 3 or 4 */
};

/* Write libjpeg's message for its last error or warning as the phrase. */
static void
image_jpeg_message(j_common_ptr cinfo)
{
	struct image_jpeg_err	*e = (struct image_jpeg_err *)cinfo->err;
	char			 msg[JMSG_LENGTH_MAX];
	const char		*what = e->what;

	(*cinfo->err->format_message)(cinfo, msg);
	switch (cinfo->err->msg_code) {
	case JWRN_JPEG_EOF:
		what = e->in_header ? "truncated JPEG header" :
		    "truncated JPEG data";
		break;
	case JERR_BAD_PRECISION:
		what = "unsupported JPEG";
		break;
	case JERR_OUT_OF_MEMORY:
		what = "out of memory decoding JPEG";
		break;
	case JERR_NO_BACKING_STORE:	/* over max_memory_to_use */
		what = "image needs more memory to decode than "
		    "image_memory_max allows";
		break;
	default:
		if (cinfo->err->msg_code >= JWRN_ADOBE_XFORM &&
		    cinfo->err->msg_code <= JWRN_BOGUS_ICC)
			what = "corrupt JPEG data";
		break;
	}
	image_error(e->d, "%s (%s)", what, msg);
}

/* error_exit: never return to libjpeg. */
static void
image_jpeg_error_exit_cb(j_common_ptr cinfo)
{
	struct image_jpeg_err	*e = (struct image_jpeg_err *)cinfo->err;

	image_jpeg_message(cinfo);
	longjmp(e->jb, 1);
}

/* emit_message: a warning (level -1) is an error; trace messages are not. */
static void
image_jpeg_emit_message_cb(j_common_ptr cinfo, int level)
{
	struct image_jpeg_err	*e = (struct image_jpeg_err *)cinfo->err;

	if (level >= 0)
		return;
	image_jpeg_message(cinfo);
	longjmp(e->jb, 1);
}

/* output_message: nothing is ever printed. */
static void
image_jpeg_output_message_cb(j_common_ptr cinfo)
{
}

/* The decompressor, made once per decoder. */
static struct image_jpeg *
image_jpeg_new(struct image_decoder *d)
{
	struct image_jpeg	*volatile j;

	if ((j = calloc(1, sizeof *j)) == NULL)
		return (NULL);
	j->cinfo.err = jpeg_std_error(&j->jerr.pub);
	j->jerr.pub.error_exit = image_jpeg_error_exit_cb;
	j->jerr.pub.emit_message = image_jpeg_emit_message_cb;
	j->jerr.pub.output_message = image_jpeg_output_message_cb;
	j->jerr.d = d;
	j->jerr.what = "bad JPEG";
	if (setjmp(j->jerr.jb)) {
		/* jpeg_create_decompress fails only for lack of memory. */
		jpeg_destroy_decompress(&j->cinfo);
		free(j);
		return (NULL);
	}
	jpeg_create_decompress(&j->cinfo);
	return (j);
}

void
image_jpeg_free(struct image_jpeg *j)
{
	if (j == NULL)
		return;
	jpeg_destroy_decompress(&j->cinfo);
	free(j);
}

/*
 * A progressive (or any multi-scan) JPEG keeps the coefficients of the
 * whole image, 2 bytes a sample of each component (as subsampled), until
 * its last scan: refuse it, from the header, when that is over the cap.
 * libjpeg's own max_memory_to_use is the backstop (a virtual array over
 * it fails, as there is no backing store).
 */
static int
image_jpeg_memory(struct image_decoder *d,
    struct jpeg_decompress_struct *cinfo)
{
	jpeg_component_info	*c;
	uint64_t		 need = 0, w, h;
	int			 i;

	if (d->memory_max == 0)
		return (0);
	cinfo->mem->max_memory_to_use = d->memory_max > LONG_MAX ? LONG_MAX :
	    (long)d->memory_max;
	if (!jpeg_has_multiple_scans(cinfo))
		return (0);
	for (i = 0; i < cinfo->num_components; i++) {
		c = &cinfo->comp_info[i];
		w = ((uint64_t)c->width_in_blocks + c->h_samp_factor - 1) /
		    c->h_samp_factor * c->h_samp_factor;
		h = ((uint64_t)c->height_in_blocks + c->v_samp_factor - 1) /
		    c->v_samp_factor * c->v_samp_factor;
		need += w * h * DCTSIZE2 * sizeof(JCOEF);
	}
	if (need > d->memory_max) {
		jpeg_abort_decompress(cinfo);
		return (image_memory_refuse(d, "a progressive JPEG keeps the "
		    "whole image's coefficients", need, d->memory_max));
	}
	return (0);
}

/* Read the header; set d->info's size. */
int
image_jpeg_open(struct image_decoder *d)
{
	struct image_jpeg		*j;
	struct jpeg_decompress_struct	*cinfo;

	if (d->jpeg == NULL && (d->jpeg = image_jpeg_new(d)) == NULL)
		return (image_error(d, "out of memory (JPEG decompressor)"));
	j = d->jpeg;
	cinfo = &j->cinfo;
	j->jerr.d = d;
	j->jerr.what = "bad JPEG header";
	j->jerr.in_header = 1;
	if (setjmp(j->jerr.jb)) {
		jpeg_abort_decompress(cinfo);
		return (-1);
	}
	jpeg_abort_decompress(cinfo);
	jpeg_mem_src(cinfo, d->buf, d->len);
	if (jpeg_read_header(cinfo, TRUE) != JPEG_HEADER_OK) {
		jpeg_abort_decompress(cinfo);
		return (image_error(d, "bad JPEG header (no image, only "
		    "tables)"));
	}
	if (cinfo->data_precision != 8) {
		jpeg_abort_decompress(cinfo);
		return (image_error(d, "unsupported JPEG (%d-bit samples)",
		    cinfo->data_precision));
	}
	switch (cinfo->num_components) {
	case 1:
		cinfo->out_color_space = JCS_GRAYSCALE;
		break;
	case 3:
		cinfo->out_color_space = JCS_RGB;
		break;
	case 4:
		cinfo->out_color_space = JCS_CMYK;
		break;
	default:
		jpeg_abort_decompress(cinfo);
		return (image_error(d, "unsupported JPEG (%d components)",
		    cinfo->num_components));
	}
	j->components = cinfo->num_components;
	d->info.width = cinfo->image_width;
	d->info.height = cinfo->image_height;
	return (image_jpeg_memory(d, cinfo));
}

/* Pillow's MULDIV255: a*b/255, rounded. */
static inline int
image_muldiv255(int a, int b)
{
	int	t = a * b + 128;

	return ((t + (t >> 8)) >> 8);
}

/* @n pixels of libjpeg output (@comps per pixel) to RGB8. */
static void
image_jpeg_row(uint8_t *out, const uint8_t *in, uint32_t n, int comps)
{
	uint32_t	i;
	int		nk;

	switch (comps) {
	case 3:
		memcpy(out, in, (size_t)n * 3);
		break;
	case 1:
		for (i = 0; i < n; i++, out += 3)
			out[0] = out[1] = out[2] = in[i];
		break;
	case 4:
		/*
		 * Pillow unpacks "CMYK;I" (C = 255 - c, ..., K = 255 - k),
		 * then R = 255 - K - C*(255 - K)/255, so with libjpeg's
		 * inverted samples 255 - K is k itself.
		 */
		for (i = 0; i < n; i++, in += 4, out += 3) {
			nk = in[3];
			out[0] = nk - image_muldiv255(255 - in[0], nk);
			out[1] = nk - image_muldiv255(255 - in[1], nk);
			out[2] = nk - image_muldiv255(255 - in[2], nk);
		}
		break;
	}
}

int
image_jpeg_decode(struct image_decoder *d, uint32_t x, uint32_t y,
    uint32_t w, uint32_t h, uint8_t *dst, size_t dst_stride)
{
	struct image_jpeg		*j = d->jpeg;
	struct jpeg_decompress_struct	*cinfo = &j->cinfo;
	JDIMENSION			 xoff, cw;
	JSAMPROW			 row;
	uint8_t				*buf;
	size_t				 skip;
	uint32_t			 r;

	j->jerr.d = d;
	j->jerr.what = "corrupt JPEG data";
	j->jerr.in_header = 0;
	if (setjmp(j->jerr.jb)) {
		jpeg_abort_decompress(cinfo);
		return (-1);
	}
	jpeg_start_decompress(cinfo);
	if (cinfo->output_width != d->info.width ||
	    cinfo->output_height != d->info.height ||
	    cinfo->output_components != j->components) {
		jpeg_abort_decompress(cinfo);
		return (image_error(d, "bad JPEG (output %ux%ux%d, header "
		    "%ux%ux%d)", cinfo->output_width, cinfo->output_height,
		    cinfo->output_components, d->info.width, d->info.height,
		    j->components));
	}

	xoff = 0;
	cw = cinfo->output_width;
	if (w < cinfo->output_width) {
		xoff = x > 0 ? x - 1 : 0;
		cw = ((uint64_t)x + w + 1 < cinfo->output_width ?
		    x + w + 1 : cinfo->output_width) - xoff;
		if (cw < JPEG_MIN_CROP) {
			cw = JPEG_MIN_CROP;
			if (cw > cinfo->output_width)
				cw = cinfo->output_width;
			if (xoff > cinfo->output_width - cw)
				xoff = cinfo->output_width - cw;
		}
		jpeg_crop_scanline(cinfo, &xoff, &cw);
		if (xoff > x || (uint64_t)xoff + cw < (uint64_t)x + w ||
		    cw != cinfo->output_width) {
			jpeg_abort_decompress(cinfo);
			return (image_error(d, "bad JPEG crop (%u+%u for "
			    "%u+%u)", xoff, cw, x, w));
		}
	}
	skip = (size_t)(x - xoff) * j->components;

	if (y > 0 && jpeg_skip_scanlines(cinfo, y) != y) {
		jpeg_abort_decompress(cinfo);
		return (image_error(d, "truncated JPEG data (rows end before "
		    "%u)", y));
	}

	/* Full-width RGB rows go straight to @dst; others through scratch. */
	buf = NULL;
	if (!(j->components == 3 && skip == 0 && cw == w) &&
	    (buf = image_scratch(d, (size_t)cw * j->components)) == NULL) {
		jpeg_abort_decompress(cinfo);
		return (-1);
	}
	for (r = 0; r < h; r++) {
		row = buf != NULL ? buf : dst + r * dst_stride;
		if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
			jpeg_abort_decompress(cinfo);
			return (image_error(d, "truncated JPEG data (no row "
			    "%u)", y + r));
		}
		if (buf != NULL)
			image_jpeg_row(dst + r * dst_stride, buf + skip, w,
			    j->components);
	}
	jpeg_abort_decompress(cinfo);
	return (0);
}
