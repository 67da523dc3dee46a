/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the image decoders: arbitrary bytes to image_open(),
 * then a full decode and a region decode whose place comes from the last
 * bytes of the input, with one decoder reused as a worker reuses it.
 * Images over FUZZ_MAX_PIXELS are opened but not decoded, so a header
 * claiming a huge size costs no more than libFuzzer's memory limit allows.
 * The decoder has a memory cap, as a worker's has (image_memory_max):
 * run with -malloc_limit_mb a little above FUZZ_MEMORY_MAX and any
 * allocation the cap should have refused is reported.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image-decode.h"

#define FUZZ_MAX_PIXELS	(4u << 20)
#define FUZZ_MEMORY_MAX	(64u << 20)	/* the decoder's image_memory_max */

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static struct image_decoder	*decoder;

/* A number from the input's tail, so regions vary with the data. */
static uint32_t
fuzz_tail(const uint8_t *data, size_t size, size_t back)
{
	uint32_t	v = 0;

	if (size >= back + 4)
		memcpy(&v, data + size - back - 4, 4);
	return (v);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image_info	 info;
	uint8_t			*out;
	uint32_t		 x, y, w, h;

	if (decoder == NULL) {
		if ((decoder = image_decoder_new()) == NULL)
			abort();
		image_decoder_set_memory_max(decoder, FUZZ_MEMORY_MAX);
	}
	if (image_open(decoder, data, size, &info) == -1)
		return (0);
	if ((uint64_t)info.width * info.height > FUZZ_MAX_PIXELS)
		return (0);
	if ((out = malloc((size_t)info.width * info.height * 3)) == NULL)
		abort();
	(void)image_decode_region(decoder, 0, 0, info.width, info.height, out,
	    (size_t)info.width * 3);

	w = 1 + fuzz_tail(data, size, 0) % info.width;
	h = 1 + fuzz_tail(data, size, 4) % info.height;
	x = fuzz_tail(data, size, 8) % (info.width - w + 1);
	y = fuzz_tail(data, size, 12) % (info.height - h + 1);
	if (image_open(decoder, data, size, &info) == 0)
		(void)image_decode_region(decoder, x, y, w, h, out,
		    (size_t)w * 3);
	free(out);
	return (0);
}
