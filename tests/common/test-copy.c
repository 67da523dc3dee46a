/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for row copies into a slot (common/copy.c): every byte
 * arrives, with streaming stores or without, at every alignment and
 * length; and streaming is chosen only for slots past the last-level
 * cache whose rows start on cache lines.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "copy.h"
#include "runner.h"

/* Bytes a test buffer holds: room for a 64 KiB row at any offset. */
#define BUF	(65536 + 256)

/* Copy @n bytes to @dst_off in a buffer of 0xee, then check every byte. */
static void
copy_and_check(size_t dst_off, size_t src_off, size_t n, bool stream)
{
	static uint8_t	src[BUF] __attribute__((aligned(64)));
	static uint8_t	dst[BUF] __attribute__((aligned(64)));
	static uint8_t	want[BUF];
	size_t		i;

	for (i = 0; i < BUF; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	memset(dst, 0xee, sizeof(dst));
	memset(want, 0xee, sizeof(want));
	memcpy(want + dst_off, src + src_off, n);
	copy_row(dst + dst_off, src + src_off, n, stream);
	copy_fence();
	for (i = 0; i < BUF; i++)
		if (dst[i] != want[i])
			ck_abort_msg("%s copy of %zu bytes to offset %zu from "
			    "offset %zu: byte %zu is %u, expected %u", stream ?
			    "streaming" : "plain", n, dst_off, src_off, i,
			    dst[i], want[i]);
}

START_TEST(copy_every_length_and_alignment)
{
	static const size_t	lens[] = { 0, 1, 15, 16, 17, 63, 64, 65, 127,
				    128, 4096, 4100, 65536, 65536 + 48 };
	static const size_t	offs[] = { 0, 1, 8, 16, 64 };
	size_t			l, d, s;
	int			stream;

	for (stream = 0; stream < 2; stream++)
		for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
			for (d = 0; d < sizeof(offs) / sizeof(offs[0]); d++)
				for (s = 0; s < 3; s++)
					copy_and_check(offs[d], offs[s] + s,
					    lens[l], stream);
}
END_TEST

START_TEST(copy_streams_only_past_the_cache)
{
	/* Rows that do not start on cache lines never stream. */
	ck_assert(!copy_streams(65536 + 4, 100000));
	ck_assert(!copy_streams(100, 1u << 30));
	/* A slot of 4 KiB rows fits any last-level cache. */
	ck_assert(!copy_streams(4096, 1));
	ck_assert(!copy_streams(64, 16));
	ck_assert(!copy_streams(65536, 0));
#ifdef __SSE2__
	/* 64 GiB slots are past any cache. */
	ck_assert(copy_streams(65536, 1u << 20));
	ck_assert(copy_streams(4096, 16u << 20));
#endif
}
END_TEST

static Suite *
copy_suite(void)
{
	Suite	*s = suite_create("copy");
	TCase	*tc = tcase_create("copy");

	tcase_add_test(tc, copy_every_length_and_alignment);
	tcase_add_test(tc, copy_streams_only_past_the_cache);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(copy_suite()));
}
