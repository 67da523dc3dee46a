/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the frame decoder: arbitrary bytes fed to a wire_in in
 * arbitrary pieces, every frame cut off and freed, as infeedd does with what
 * a client sends.  Built for libFuzzer with -Dfuzz=enabled (clang); without
 * it, fuzz-main.c turns it into a regression test over the corpus.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "wire.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Feed @data in chunks whose sizes come from the data itself. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_in	 in;
	Infeed__Frame	*f;
	char		*cause;
	size_t		 off = 0, chunk;
	uint32_t	 max = INFEED_MIN_MAX_FRAME;

	if (size > 0)
		max = INFEED_MIN_MAX_FRAME << (data[0] % 4);
	wire_in_init(&in, max);
	while (off < size) {
		chunk = 1 + data[off] % 64;
		if (chunk > size - off)
			chunk = size - off;
		if (wire_in_feed(&in, data + off, chunk) == -1)
			break;
		off += chunk;
		for (;;) {
			cause = NULL;
			switch (wire_in_frame(&in, &f, &cause)) {
			case WIRE_OK:
				infeed__frame__free_unpacked(f, NULL);
				continue;
			case WIRE_BAD:
				free(cause);
				wire_in_clear(&in);
				return (0);
			case WIRE_AGAIN:
				break;
			}
			break;
		}
	}
	wire_in_clear(&in);
	return (0);
}
