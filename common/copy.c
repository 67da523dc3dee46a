/* SPDX-License-Identifier: MIT */
/* Copying rows into a step's slot: see copy.h for when to stream. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "copy.h"

/* Where the kernel cannot say (no sysfs, another system). */
#define COPY_CACHE_GUESS	(32u << 20)

/*
 * Bytes of the largest cache the kernel lists for CPU 0, read once
 * (sysfs: sysconf(_SC_LEVEL3_CACHE_SIZE) said 256 MiB for this VM's
 * 32 MiB, from what the hypervisor's CPUID makes up).
 */
static uint64_t
copy_cache_bytes(void)
{
	static uint64_t	 bytes;
	char		 path[80], buf[32], *end;
	unsigned long	 v;
	FILE		*f;
	int		 i;

	if (bytes != 0)
		return (bytes);
	for (i = 0; i < 16; i++) {
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/"
		    "cache/index%d/size", i);
		if ((f = fopen(path, "re")) == NULL)
			continue;
		if (fgets(buf, sizeof(buf), f) != NULL) {
			v = strtoul(buf, &end, 10);
			if (*end == 'K')
				v <<= 10;
			else if (*end == 'M')
				v <<= 20;
			if (v > bytes)
				bytes = v;
		}
		fclose(f);
	}
	if (bytes == 0)
		bytes = COPY_CACHE_GUESS;
	return (bytes);
}

bool
copy_streams(uint64_t row_bytes, uint64_t rows)
{
#ifdef __SSE2__
	return (row_bytes % 64 == 0 && rows > 0 &&
	    row_bytes > copy_cache_bytes() / rows);
#else
	(void)row_bytes;
	(void)rows;
	return (false);
#endif
}

void
copy_row(void *dst, const void *src, size_t n, bool stream)
{
#ifdef __SSE2__
	__m128i		*d = dst;
	const __m128i	*s = src;
	size_t		 i;

	/* Streaming stores need 16-byte aligned destinations. */
	if (stream && ((uintptr_t)dst & 15) == 0) {
		for (i = 0; i + 4 <= n / 16; i += 4) {
			__m128i	a = _mm_loadu_si128(s + i);
			__m128i	b = _mm_loadu_si128(s + i + 1);
			__m128i	c = _mm_loadu_si128(s + i + 2);
			__m128i	e = _mm_loadu_si128(s + i + 3);

			_mm_stream_si128(d + i, a);
			_mm_stream_si128(d + i + 1, b);
			_mm_stream_si128(d + i + 2, c);
			_mm_stream_si128(d + i + 3, e);
		}
		memcpy(d + i, s + i, n - i * 16);
		return;
	}
#else
	(void)stream;
#endif
	memcpy(dst, src, n);
}

void
copy_fence(void)
{
#ifdef __SSE2__
	_mm_sfence();
#endif
}
