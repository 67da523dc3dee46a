/* SPDX-License-Identifier: MIT */
/*
 * Pillow's bilinear resampling (image-resize.c): the bounds and weights of
 * each output, the horizontal and vertical passes, and which code runs
 * them (scalar or AVX2).  The plans (image-plan.c) read the bounds, the
 * driver (image-transform.c) runs the passes.
 */
#ifndef INFEED_IMAGE_RESIZE_H
#define INFEED_IMAGE_RESIZE_H

#include <stddef.h>
#include <stdint.h>

/* Which code image_plan_run() uses: the tests and the benchmark force one. */
enum image_simd {
	IMAGE_SIMD_AUTO = 0,
	IMAGE_SIMD_SCALAR = 1,
	IMAGE_SIMD_AVX2 = 2,
};
enum image_simd	 image_simd_select(enum image_simd);

/* The weights of a window of one axis's outputs. */
struct image_coeffs {
	uint32_t	 count;		/* outputs */
	uint32_t	 ksize;		/* stride of k: Pillow's ksize */
	uint32_t	 maxn;		/* the widest window */
	int32_t		*lo;		/* first input of each output */
	int32_t		*n;		/* inputs of each output */
	int32_t		*k;		/* count * ksize 22-bit weights */
	double		*dk;		/* ksize doubles of scratch */
};

/* The AVX2 horizontal pass's layout of the weights. */
struct image_htab {
	int32_t		*k;		/* groups * taps / 2 * 8 vectors */
	int32_t		*off;		/* each output's first byte */
	uint32_t	 groups;	/* of 8 outputs */
	uint32_t	 taps;
};

enum image_simd	 image_simd_current(void);
void		 image_resize_bounds(uint32_t, uint32_t, uint32_t, int32_t *,
		    int32_t *);
uint32_t	 image_resize_ksize(uint32_t, uint32_t);
void		 image_resize_coeffs(uint32_t, uint32_t, uint32_t, uint32_t,
		    int, struct image_coeffs *);
void		 image_resize_hpass(const struct image_coeffs *, uint32_t,
		    const uint8_t *, size_t, uint32_t, uint8_t *, size_t,
		    void *);
void		 image_resize_vrow(const int32_t *, int32_t, const uint8_t *,
		    size_t, uint32_t, uint8_t *);

#endif /* INFEED_IMAGE_RESIZE_H */
