/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the image pipeline parser: arbitrary text to
 * image_pipeline_parse(); what it accepts must format, parse again to the
 * same pipeline, and plan and run on a small image of a size taken from
 * the input.  Built for libFuzzer with -Dfuzz=enabled (clang); without
 * it, fuzz-main.c turns it into a regression test over the corpus.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image-transform.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Parse @data as a pipeline; exercise whatever is accepted. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image_pipeline	 p, q;
	struct image_plan	 plan;
	struct image_work	 w;
	char			*text, *cause = NULL, buf[1024];
	uint8_t			*img, *out;
	uint32_t		 W, H;

	if ((text = malloc(size + 1)) == NULL)
		return (0);
	memcpy(text, data, size);
	text[size] = '\0';
	if (image_pipeline_parse(text, &p, &cause) != 0) {
		if (cause == NULL)
			abort();
		free(cause);
		free(text);
		return (0);
	}
	if (cause != NULL)
		abort();
	image_pipeline_format(&p, buf, sizeof buf);
	if (image_pipeline_parse(buf, &q, &cause) != 0 ||
	    memcmp(&p, &q, sizeof p) != 0)
		abort();
	/* Small outputs only: a fuzzer's 8192x8192 would only be slow. */
	W = 1 + (size > 0 ? data[0] % 64 : 0);
	H = 1 + (size > 1 ? data[1] % 64 : 0);
	if (p.out_bytes <= (1 << 20) && p.crop_h <= 1024 &&
	    p.resize <= 1024 && p.resize_h <= 1024 && p.resize_w <= 1024) {
		image_plan_make(&p, W, H, size, 0, size * 7, &plan);
		img = calloc((size_t)plan.decode.w * plan.decode.h * 3 + 1, 1);
		out = malloc(p.out_bytes);
		memset(&w, 0, sizeof w);
		if (img != NULL && out != NULL && image_plan_run(&p, &plan,
		    img, (size_t)plan.decode.w * 3, out, &w) != 0)
			abort();
		image_work_free(&w);
		free(img);
		free(out);
	}
	free(text);
	return (0);
}
