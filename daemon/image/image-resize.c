/* SPDX-License-Identifier: MIT */
/*
 * Pillow 9.4's bilinear resampling (libImaging/Resample.c), exactly: per
 * axis, a triangle filter stretched by the scale factor when shrinking,
 * weights computed in double, normalised, then rounded to 22-bit fixed
 * point; each output sample is (2^21 + sum of input * weight) >> 22,
 * clipped to 0..255.  The horizontal pass runs first into a uint8
 * intermediate, then the vertical pass.
 *
 * Only the outputs a plan keeps are computed: every output sample depends
 * on its own weights alone, so a window of the output is the same as the
 * window cut from the whole.
 *
 * The AVX2 passes do the same integer arithmetic (32-bit products and
 * sums; no product or sum can overflow, since the weights of one output
 * add up to about 2^22 and inputs are below 2^8), so their results are
 * identical to the scalar ones, which remain for other machines.
 */

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IMAGE_HAVE_AVX2	1
#endif

#include "image-resize.h"

#define PRECISION_BITS	22

static enum image_simd	simd_level = IMAGE_SIMD_AUTO;

/**
 * image_simd_select() - choose the code image_plan_run() uses
 * @level: IMAGE_SIMD_AUTO (the best this CPU runs), SCALAR or AVX2
 *
 * AVX2 on a CPU without it gives the scalar code.
 *
 * Return: the level now in use (never AUTO).
 */
enum image_simd
image_simd_select(enum image_simd level)
{
	bool	avx2 = false;

#ifdef IMAGE_HAVE_AVX2
	__builtin_cpu_init();
	avx2 = __builtin_cpu_supports("avx2");
#endif
	if (level == IMAGE_SIMD_SCALAR || !avx2)
		simd_level = IMAGE_SIMD_SCALAR;
	else
		simd_level = IMAGE_SIMD_AVX2;
	return (simd_level);
}

/* The level in use, choosing the best on first use. */
enum image_simd
image_simd_current(void)
{
	if (simd_level == IMAGE_SIMD_AUTO)
		image_simd_select(IMAGE_SIMD_AUTO);
	return (simd_level);
}

/* Pillow's filter support and scale for @in -> @out. */
static void
resize_scale(uint32_t in, uint32_t out, double *scale, double *fscale,
    double *support)
{
	*scale = (double)((float)in - 0.0f) / out;
	*fscale = *scale < 1.0 ? 1.0 : *scale;
	*support = 1.0 * *fscale;
}

/*
 * The inputs [*xmin, *xmax) that output @o reads, as Pillow computes them;
 * returns the output's centre in input coordinates.
 */
static double
resize_window(uint32_t in, double scale, double support, uint32_t o,
    int *xmin, int *xmax)
{
	double	center = 0.0 + (o + 0.5) * scale;

	*xmin = (int)(center - support + 0.5);
	if (*xmin < 0)
		*xmin = 0;
	*xmax = (int)(center + support + 0.5);
	if (*xmax > (int)in)
		*xmax = in;
	return (center);
}

/**
 * image_resize_bounds() - the inputs output @o of a resize reads
 * @in: input size
 * @out: output size
 * @o: the output sample
 * @lo: its first input
 * @hi: one past its last input
 */
void
image_resize_bounds(uint32_t in, uint32_t out, uint32_t o, int32_t *lo,
    int32_t *hi)
{
	double	scale, fscale, support;
	int	xmin, xmax;

	resize_scale(in, out, &scale, &fscale, &support);
	(void)resize_window(in, scale, support, o, &xmin, &xmax);
	*lo = xmin;
	*hi = xmax;
}

/**
 * image_resize_ksize() - the most inputs one output of @in -> @out reads
 * @in: input size
 * @out: output size
 *
 * Return: Pillow's ksize, or 1 when in == out (no resampling).
 */
uint32_t
image_resize_ksize(uint32_t in, uint32_t out)
{
	double	scale, fscale, support;

	if (in == out)
		return (1);
	resize_scale(in, out, &scale, &fscale, &support);
	return ((uint32_t)ceil(support) * 2 + 1);
}

/* Pillow's bilinear_filter. */
static double
tri(double x)
{
	if (x < 0.0)
		x = -x;
	if (x < 1.0)
		return (1.0 - x);
	return (0.0);
}

/**
 * image_resize_coeffs() - the weights of a window of a resize's outputs
 * @in: input size
 * @out: output size
 * @first: first output kept
 * @count: outputs kept
 * @flip: store them last first (a mirrored window)
 * @co: co->lo, co->n and co->k (count * image_resize_ksize()) to fill
 *
 * When in == out, each output copies its input (weight 2^22): that is
 * what Pillow's weights come to, and a pass that only flips needs it.
 */
void
image_resize_coeffs(uint32_t in, uint32_t out, uint32_t first,
    uint32_t count, int flip, struct image_coeffs *co)
{
	double		 scale, fscale, support, center, ss, ww, w;
	double		*kk;
	int32_t		*k;
	uint32_t	 m, o, ksize = image_resize_ksize(in, out);
	int		 x, xmin, xmax;

	co->count = count;
	co->ksize = ksize;
	co->maxn = 0;
	resize_scale(in, out, &scale, &fscale, &support);
	ss = 1.0 / fscale;
	for (m = 0; m < count; m++) {
		o = first + (flip ? count - 1 - m : m);
		k = co->k + (size_t)m * ksize;
		if (in == out) {
			co->lo[m] = o;
			co->n[m] = 1;
			k[0] = 1 << PRECISION_BITS;
			co->maxn = 1;
			continue;
		}
		center = resize_window(in, scale, support, o, &xmin, &xmax);
		xmax -= xmin;
		kk = co->dk;
		ww = 0.0;
		for (x = 0; x < xmax; x++) {
			w = tri((x + xmin - center + 0.5) * ss);
			kk[x] = w;
			ww += w;
		}
		for (x = 0; x < xmax; x++) {
			if (ww != 0.0)
				kk[x] /= ww;
			if (kk[x] < 0)
				k[x] = (int)(-0.5 + kk[x] *
				    (1 << PRECISION_BITS));
			else
				k[x] = (int)(0.5 + kk[x] *
				    (1 << PRECISION_BITS));
		}
		for (; x < (int)ksize; x++)
			k[x] = 0;
		co->lo[m] = xmin;
		co->n[m] = xmax;
		if ((uint32_t)xmax > co->maxn)
			co->maxn = xmax;
	}
}

/* Clip a sum to a byte as Pillow's clip8 does. */
static inline uint8_t
clip8(int32_t acc)
{
	int32_t	v = acc >> PRECISION_BITS;

	return (v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v);
}

/* One row of the horizontal pass, scalar. */
static void
hrow_scalar(const struct image_coeffs *co, const uint8_t *s, uint8_t *d)
{
	const int32_t	*k;
	const uint8_t	*p;
	int32_t		 a0, a1, a2;
	uint32_t	 m;
	int32_t		 t;

	for (m = 0; m < co->count; m++) {
		p = s + (size_t)co->lo[m] * 3;
		k = co->k + (size_t)m * co->ksize;
		a0 = a1 = a2 = 1 << (PRECISION_BITS - 1);
		for (t = 0; t < co->n[m]; t++) {
			a0 += p[3 * t] * k[t];
			a1 += p[3 * t + 1] * k[t];
			a2 += p[3 * t + 2] * k[t];
		}
		d[3 * m] = clip8(a0);
		d[3 * m + 1] = clip8(a1);
		d[3 * m + 2] = clip8(a2);
	}
}

/* One output row of the vertical pass, scalar, bytes [from, bytes). */
static void
vrow_scalar(const int32_t *k, int32_t n, const uint8_t *s, size_t stride,
    uint32_t from, uint32_t bytes, uint8_t *d)
{
	int32_t		acc, t;
	uint32_t	i;

	for (i = from; i < bytes; i++) {
		acc = 1 << (PRECISION_BITS - 1);
		for (t = 0; t < n; t++)
			acc += s[(size_t)t * stride + i] * k[t];
		d[i] = clip8(acc);
	}
}

#ifdef IMAGE_HAVE_AVX2
/* Shift, saturate and order four vectors of sums into 32 bytes. */
__attribute__((target("avx2")))
static inline __m256i
pack4(__m256i a0, __m256i a1, __m256i a2, __m256i a3)
{
	__m256i	w01, w23, b;

	a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
	a1 = _mm256_srai_epi32(a1, PRECISION_BITS);
	a2 = _mm256_srai_epi32(a2, PRECISION_BITS);
	a3 = _mm256_srai_epi32(a3, PRECISION_BITS);
	w01 = _mm256_packs_epi32(a0, a1);
	w23 = _mm256_packs_epi32(a2, a3);
	b = _mm256_packus_epi16(w01, w23);
	return (_mm256_permutevar8x32_epi32(b,
	    _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}
#endif

#ifdef IMAGE_HAVE_AVX2
/*
 * Lay the weights out for the AVX2 pass.  Per group of 8 outputs: each
 * output's first input, shifted so that all read the same even number of
 * inputs inside the row (the extra weights are 0); then per pair of taps,
 * for each two outputs, the weights' high and low 11 bits as int16 pairs,
 * (k_t, k_t+1) three times and (0, 0), for _mm256_madd_epi16: Pillow's
 * 22-bit weights do not fit in 16 bits, so each sum is taken twice.
 */
static int
htab_make(const struct image_coeffs *co, uint32_t bufw, void *mem,
    struct image_htab *tab)
{
	uint32_t	 groups = co->count / 8, g, j, t, c, K;
	int32_t		 lo, shift, w;
	int16_t		*kv, *v;
	uintptr_t	 a = (uintptr_t)mem;

	K = (co->maxn + 1) & ~1U;
	if (groups == 0 || bufw < K)
		return (-1);
	a = (a + 31) & ~(uintptr_t)31;
	tab->k = (int32_t *)a;
	tab->off = tab->k + (size_t)groups * (K / 2) * 64;
	tab->groups = groups;
	tab->taps = K;
	for (g = 0; g < groups; g++) {
		kv = (int16_t *)(tab->k + (size_t)g * (K / 2) * 64);
		memset(kv, 0, (size_t)(K / 2) * 64 * sizeof(int32_t));
		for (j = 0; j < 8; j++) {
			lo = co->lo[8 * g + j];
			if (lo > (int32_t)(bufw - K))
				lo = bufw - K;
			shift = co->lo[8 * g + j] - lo;
			tab->off[8 * g + j] = lo * 3;
			for (t = 0; t < (uint32_t)co->n[8 * g + j]; t++) {
				w = co->k[(size_t)(8 * g + j) * co->ksize + t];
				/* Tap pair, output pair, high/low, lane. */
				v = kv + (size_t)((t + shift) / 2) * 128 +
				    (j / 2) * 32 + (j % 2) * 8 +
				    (t + shift) % 2;
				for (c = 0; c < 3; c++) {
					v[2 * c] = (int16_t)(w >> 11);
					v[16 + 2 * c] = (int16_t)(w & 2047);
				}
			}
		}
	}
	return (0);
}

/* Two outputs' two taps: 8 bytes at each, as (t, t+1) int16 pairs. */
__attribute__((target("avx2")))
static inline __m256i
load_pairs(const uint8_t *a, const uint8_t *b, __m256i mask)
{
	return (_mm256_shuffle_epi8(_mm256_inserti128_si256(
	    _mm256_castsi128_si256(_mm_loadl_epi64((const __m128i *)a)),
	    _mm_loadl_epi64((const __m128i *)b), 1), mask));
}

/* Rows of the horizontal pass, AVX2; the last row runs scalar. */
__attribute__((target("avx2")))
static void
hpass_avx2(const struct image_coeffs *co, const struct image_htab *tab,
    const uint8_t *src, size_t stride, uint32_t rows, uint8_t *dst,
    size_t dstride)
{
	const __m256i	 round = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
	const __m256i	 compact = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9,
	    10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12,
	    13, 14, -1, -1, -1, -1);
	const __m256i	 pairs = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1,
	    2, -1, 5, -1, -1, -1, -1, -1, 0, -1, 3, -1, 1, -1, 4, -1, 2, -1,
	    5, -1, -1, -1, -1, -1);
	struct image_coeffs	 tail;
	const uint8_t	*s, *q0, *q1, *q2, *q3, *q4, *q5, *q6, *q7;
	const __m256i	*kv;
	const int32_t	*off;
	__m256i		 h0, h1, h2, h3, l0, l1, l2, l3, v, b;
	uint8_t		*d;
	uint32_t	 r, g, o, end = 3 * tab->taps, done = tab->groups * 8;

	tail = *co;
	tail.count = co->count - done;
	tail.lo += done;
	tail.n += done;
	tail.k += (size_t)done * co->ksize;
	for (r = 0; r < rows; r++) {
		s = src + (size_t)r * stride;
		d = dst + (size_t)r * dstride;
		if (r == rows - 1) {
			/* 8-byte loads would read past the last pixel. */
			hrow_scalar(co, s, d);
			break;
		}
		for (g = 0; g < tab->groups; g++) {
			off = tab->off + 8 * g;
			kv = (const __m256i *)(tab->k + (size_t)g *
			    (tab->taps / 2) * 64);
			q0 = s + off[0];
			q1 = s + off[1];
			q2 = s + off[2];
			q3 = s + off[3];
			q4 = s + off[4];
			q5 = s + off[5];
			q6 = s + off[6];
			q7 = s + off[7];
			h0 = h1 = h2 = h3 = l0 = l1 = l2 = l3 =
			    _mm256_setzero_si256();
			for (o = 0; o < end; o += 6, kv += 8) {
				v = load_pairs(q0 + o, q1 + o, pairs);
				h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(v,
				    _mm256_load_si256(kv)));
				l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(v,
				    _mm256_load_si256(kv + 1)));
				v = load_pairs(q2 + o, q3 + o, pairs);
				h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(v,
				    _mm256_load_si256(kv + 2)));
				l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(v,
				    _mm256_load_si256(kv + 3)));
				v = load_pairs(q4 + o, q5 + o, pairs);
				h2 = _mm256_add_epi32(h2, _mm256_madd_epi16(v,
				    _mm256_load_si256(kv + 4)));
				l2 = _mm256_add_epi32(l2, _mm256_madd_epi16(v,
				    _mm256_load_si256(kv + 5)));
				v = load_pairs(q6 + o, q7 + o, pairs);
				h3 = _mm256_add_epi32(h3, _mm256_madd_epi16(v,
				    _mm256_load_si256(kv + 6)));
				l3 = _mm256_add_epi32(l3, _mm256_madd_epi16(v,
				    _mm256_load_si256(kv + 7)));
			}
			h0 = _mm256_add_epi32(_mm256_add_epi32(
			    _mm256_slli_epi32(h0, 11), l0), round);
			h1 = _mm256_add_epi32(_mm256_add_epi32(
			    _mm256_slli_epi32(h1, 11), l1), round);
			h2 = _mm256_add_epi32(_mm256_add_epi32(
			    _mm256_slli_epi32(h2, 11), l2), round);
			h3 = _mm256_add_epi32(_mm256_add_epi32(
			    _mm256_slli_epi32(h3, 11), l3), round);
			b = _mm256_shuffle_epi8(pack4(h0, h1, h2, h3),
			    compact);
			_mm_storeu_si128((__m128i *)(d + 24 * g),
			    _mm256_castsi256_si128(b));
			_mm_storeu_si128((__m128i *)(d + 24 * g + 12),
			    _mm256_extracti128_si256(b, 1));
		}
		if (tail.count > 0)
			hrow_scalar(&tail, s, d + 3 * done);
	}
}

/* One output row of the vertical pass, AVX2. */
__attribute__((target("avx2")))
static void
vrow_avx2(const int32_t *k, int32_t n, const uint8_t *src, size_t stride,
    uint32_t bytes, uint8_t *d)
{
	const __m256i	 round = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));
	const uint8_t	*s;
	__m256i		 a0, a1, a2, a3, kv, w;
	__m128i		 h;
	uint32_t	 i = 0;
	int32_t		 t;

	for (; i + 32 <= bytes; i += 32) {
		a0 = a1 = a2 = a3 = round;
		s = src + i;
		for (t = 0; t < n; t++, s += stride) {
			kv = _mm256_set1_epi32(k[t]);
			a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(
			    _mm256_cvtepu8_epi32(_mm_loadl_epi64(
			    (const __m128i *)s)), kv));
			a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(
			    _mm256_cvtepu8_epi32(_mm_loadl_epi64(
			    (const __m128i *)(s + 8))), kv));
			a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(
			    _mm256_cvtepu8_epi32(_mm_loadl_epi64(
			    (const __m128i *)(s + 16))), kv));
			a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(
			    _mm256_cvtepu8_epi32(_mm_loadl_epi64(
			    (const __m128i *)(s + 24))), kv));
		}
		_mm256_storeu_si256((__m256i *)(d + i), pack4(a0, a1, a2, a3));
	}
	for (; i + 8 <= bytes; i += 8) {
		a0 = round;
		s = src + i;
		for (t = 0; t < n; t++, s += stride)
			a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(
			    _mm256_cvtepu8_epi32(_mm_loadl_epi64(
			    (const __m128i *)s)), _mm256_set1_epi32(k[t])));
		a0 = _mm256_srai_epi32(a0, PRECISION_BITS);
		w = _mm256_packs_epi32(a0, a0);
		w = _mm256_packus_epi16(w, w);
		h = _mm_unpacklo_epi32(_mm256_castsi256_si128(w),
		    _mm256_extracti128_si256(w, 1));
		_mm_storel_epi64((__m128i *)(d + i), h);
	}
	vrow_scalar(k, n, src, stride, i, bytes, d);
}
#endif

/**
 * image_resize_hpass() - the horizontal pass over @rows rows
 * @co: the weights, inputs counted from the row's first pixel
 * @bufw: pixels in a row of @src
 * @src: RGB8 rows
 * @stride: bytes from one row of @src to the next
 * @rows: rows to resample
 * @dst: co->count RGB8 pixels a row, plus 32 bytes after the last
 * @dstride: bytes from one row of @dst to the next
 * @tabmem: image_resize_htab_bytes() of scratch, 32 bytes aligned or not
 */
void
image_resize_hpass(const struct image_coeffs *co, uint32_t bufw,
    const uint8_t *src, size_t stride, uint32_t rows, uint8_t *dst,
    size_t dstride, void *tabmem)
{
	uint32_t		r;
#ifdef IMAGE_HAVE_AVX2
	struct image_htab	tab;

	if (image_simd_current() == IMAGE_SIMD_AVX2 && rows > 1 &&
	    htab_make(co, bufw, tabmem, &tab) == 0) {
		hpass_avx2(co, &tab, src, stride, rows, dst, dstride);
		return;
	}
#endif
	for (r = 0; r < rows; r++)
		hrow_scalar(co, src + (size_t)r * stride,
		    dst + (size_t)r * dstride);
}

/**
 * image_resize_vrow() - one output row of the vertical pass
 * @k: its weights
 * @n: how many
 * @src: the first input row it reads
 * @stride: bytes from one input row to the next
 * @bytes: bytes in a row
 * @dst: the output row
 */
void
image_resize_vrow(const int32_t *k, int32_t n, const uint8_t *src,
    size_t stride, uint32_t bytes, uint8_t *dst)
{
#ifdef IMAGE_HAVE_AVX2
	if (image_simd_current() == IMAGE_SIMD_AVX2) {
		vrow_avx2(k, n, src, stride, bytes, dst);
		return;
	}
#endif
	vrow_scalar(k, n, src, stride, 0, bytes, dst);
}
