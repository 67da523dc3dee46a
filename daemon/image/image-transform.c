/* SPDX-License-Identifier: MIT */
/*
 * Running a plan (image_plan_run()): the resampling passes
 * (image-resize.c), then each output row written into the tensor: float32
 * CHW through a per-channel table of ToTensor + Normalize, uint8 CHW, or
 * uint8 HWC, with zeros (what CenterCrop pads with, normalised like any
 * pixel) around the kept window.
 *
 * The table holds ((v / 255.0f) - mean) / std for each byte v, computed in
 * float32 with true divisions, as torch computes x.div(255) then
 * x.sub_(mean).div_(std): bit for bit the same floats.  The flip costs
 * nothing: the horizontal pass takes the mirrored window's weights.
 *
 * The tail alone (image_tail_*): the same table and divisions from a
 * sample's uint8 planes, and the way back, checked exact for every byte
 * of every channel before it is used.
 */

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IMAGE_HAVE_AVX2	1
#endif

#include "image-transform.h"

/* Where one output row goes. */
struct out_row {
	const struct image_pipeline	*p;
	const struct image_work		*w;
	void				*out;
	uint32_t			 y, x;	/* first output pixel */
};

/* @p's mean and std (0 and 1 without Normalize): the table's key. */
static void
lut_key_of(const struct image_pipeline *p, float key[6])
{
	unsigned int	c;

	for (c = 0; c < 3; c++) {
		key[c] = p->normalize ? p->mean[c] : 0.0f;
		key[3 + c] = p->normalize ? p->std[c] : 1.0f;
	}
}

/* ToTensor + Normalize of every byte, per channel, for @key. */
static void
lut_fill(float lut[3][256], const float key[6])
{
	unsigned int	c, v;

	for (c = 0; c < 3; c++)
		for (v = 0; v < 256; v++)
			lut[c][v] = ((float)v / 255.0f - key[c]) / key[3 + c];
}

/* Make w->lut for @p's mean and std, unless it is already. */
static void
lut_make(const struct image_pipeline *p, struct image_work *w)
{
	float		key[6];

	lut_key_of(p, key);
	if (w->lut_ok && memcmp(key, w->lut_key, sizeof key) == 0)
		return;
	lut_fill(w->lut, key);
	memcpy(w->lut_key, key, sizeof key);
	w->lut_ok = 1;
}

/* One row of @n RGB8 pixels into the output, scalar. */
static void
row_scalar(const struct out_row *o, const uint8_t *row, uint32_t n)
{
	const struct image_pipeline	*p = o->p;
	size_t				 plane = (size_t)p->out_h * p->out_w;
	size_t				 at = (size_t)o->y * p->out_w + o->x;
	float				*f = o->out;
	uint8_t				*b = o->out;
	uint32_t			 i;

	switch (p->output) {
	case IMAGE_OUT_FLOAT32_CHW:
		for (i = 0; i < n; i++) {
			f[at + i] = o->w->lut[0][row[3 * i]];
			f[plane + at + i] = o->w->lut[1][row[3 * i + 1]];
			f[2 * plane + at + i] = o->w->lut[2][row[3 * i + 2]];
		}
		break;
	case IMAGE_OUT_UINT8_CHW:
		for (i = 0; i < n; i++) {
			b[at + i] = row[3 * i];
			b[plane + at + i] = row[3 * i + 1];
			b[2 * plane + at + i] = row[3 * i + 2];
		}
		break;
	default:
		memcpy(b + 3 * at, row, (size_t)n * 3);
		break;
	}
}

#ifdef IMAGE_HAVE_AVX2
/*
 * Eight bytes as ((v / 255) - mean) / std, the table's own float32
 * operations: each is correctly rounded, so the floats are the table's.
 * Two divisions cost less than a gather from the table.
 */
__attribute__((target("avx2")))
static inline __m256
to_float(__m128i v, __m256 k255, __m256 mean, __m256 std)
{
	__m256	x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));

	return (_mm256_div_ps(_mm256_sub_ps(_mm256_div_ps(x, k255), mean),
	    std));
}

/* One row into the output, AVX2: 8 pixels (24 bytes) at a time. */
__attribute__((target("avx2")))
static void
row_avx2(const struct out_row *o, const uint8_t *row, uint32_t n)
{
	const struct image_pipeline	*p = o->p;
	const __m128i	 m_rg_lo = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1,
	    1, 4, 7, 10, 13, -1, -1, -1);
	const __m128i	 m_rg_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5,
	    -1, -1, -1, -1, -1, 0, 3, 6);
	const __m128i	 m_b_lo = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1,
	    -1, -1, -1, -1, -1, -1, -1, -1);
	const __m128i	 m_b_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7,
	    -1, -1, -1, -1, -1, -1, -1, -1);
	size_t		 plane = (size_t)p->out_h * p->out_w;
	size_t		 at = (size_t)o->y * p->out_w + o->x;
	struct out_row	 tail;
	__m128i		 lo, hi, rg, bb;
	float		*f = o->out;
	uint8_t		*b = o->out;
	uint32_t	 i = 0, c;
	__m256		 k255 = _mm256_set1_ps(255.0f), mean[3], std[3];

	for (c = 0; c < 3; c++) {
		mean[c] = _mm256_set1_ps(o->w->lut_key[c]);
		std[c] = _mm256_set1_ps(o->w->lut_key[3 + c]);
	}
	if (p->output == IMAGE_OUT_UINT8_HWC) {
		memcpy(b + 3 * at, row, (size_t)n * 3);
		return;
	}
	for (; i + 8 <= n; i += 8) {
		lo = _mm_loadu_si128((const __m128i *)(row + 3 * i));
		hi = _mm_loadl_epi64((const __m128i *)(row + 3 * i + 16));
		rg = _mm_or_si128(_mm_shuffle_epi8(lo, m_rg_lo),
		    _mm_shuffle_epi8(hi, m_rg_hi));
		bb = _mm_or_si128(_mm_shuffle_epi8(lo, m_b_lo),
		    _mm_shuffle_epi8(hi, m_b_hi));
		if (p->output == IMAGE_OUT_FLOAT32_CHW) {
			_mm256_storeu_ps(f + at + i, to_float(rg, k255,
			    mean[0], std[0]));
			_mm256_storeu_ps(f + plane + at + i, to_float(
			    _mm_srli_si128(rg, 8), k255, mean[1], std[1]));
			_mm256_storeu_ps(f + 2 * plane + at + i, to_float(bb,
			    k255, mean[2], std[2]));
		} else {
			_mm_storel_epi64((__m128i *)(b + at + i), rg);
			_mm_storel_epi64((__m128i *)(b + plane + at + i),
			    _mm_srli_si128(rg, 8));
			_mm_storel_epi64((__m128i *)(b + 2 * plane + at + i),
			    bb);
		}
	}
	if (i < n) {
		tail = *o;
		tail.x += i;
		row_scalar(&tail, row + 3 * i, n - i);
	}
}
#endif

/* One row into the output. */
static void
row_put(const struct out_row *o, const uint8_t *row, uint32_t n)
{
#ifdef IMAGE_HAVE_AVX2
	if (image_simd_current() == IMAGE_SIMD_AVX2) {
		row_avx2(o, row, n);
		return;
	}
#endif
	row_scalar(o, row, n);
}

/* Fill the output with padding: zero pixels, as the tensor holds them. */
static void
fill_padding(const struct image_pipeline *p, const struct image_work *w,
    void *out)
{
	size_t		 plane = (size_t)p->out_h * p->out_w, i;
	unsigned int	 c;
	float		*f = out;

	if (p->output != IMAGE_OUT_FLOAT32_CHW) {
		memset(out, 0, p->out_bytes);
		return;
	}
	for (c = 0; c < 3; c++)
		for (i = 0; i < plane; i++)
			f[c * plane + i] = w->lut[c][0];
}

/* Round @n up to a multiple of 64. */
static size_t
round64(size_t n)
{
	return ((n + 63) & ~(size_t)63);
}

/* Point @co's arrays into @mem for @count outputs of @ksize; the bytes. */
static size_t
coeffs_carve(struct image_coeffs *co, uint8_t *mem, uint32_t count,
    uint32_t ksize)
{
	size_t	off = 0;

	co->lo = (int32_t *)(mem + off);
	off += round64((size_t)count * sizeof(int32_t));
	co->n = (int32_t *)(mem + off);
	off += round64((size_t)count * sizeof(int32_t));
	co->k = (int32_t *)(mem + off);
	off += round64((size_t)count * ksize * sizeof(int32_t));
	co->dk = (double *)(mem + off);
	off += round64((size_t)ksize * sizeof(double));
	return (off);
}

/* Check that @co reads only inside [0, @size) once moved by @base. */
static bool
coeffs_rebase(struct image_coeffs *co, int32_t base, uint32_t size)
{
	uint32_t	m;

	for (m = 0; m < co->count; m++) {
		co->lo[m] -= base;
		if (co->lo[m] < 0 || co->n[m] < 1 ||
		    (uint32_t)co->lo[m] + co->n[m] > size)
			return (false);
	}
	return (true);
}

/* Make sure @w holds @need bytes. */
static int
work_reserve(struct image_work *w, size_t need)
{
	void	*m;

	if (w->cap >= need)
		return (0);
	need += need / 4;
	if (posix_memalign(&m, 64, need) != 0) {
		errno = ENOMEM;
		return (-1);
	}
	free(w->buf);
	w->buf = m;
	w->cap = need;
	return (0);
}

/**
 * image_work_free() - free a worker's scratch memory
 * @w: the scratch; zeroed, ready for use again
 */
void
image_work_free(struct image_work *w)
{
	free(w->buf);
	memset(w, 0, sizeof *w);
}

/**
 * image_plan_run() - turn the decoded pixels of a plan into the output
 * @p: the pipeline
 * @plan: image_plan_make()'s plan for this image
 * @src: the RGB8 pixels of plan->decode, first row first
 * @stride: bytes from one row of @src to the next (at least 3 * width)
 * @out: p->out_bytes of output
 * @w: scratch memory, kept between calls (zeroed before the first)
 *
 * Return: 0, or -1 with errno ENOMEM, or EINVAL for a plan that does not
 * fit the pipeline.
 */
int
image_plan_run(const struct image_pipeline *p, const struct image_plan *plan,
    const uint8_t *src, size_t stride, void *out, struct image_work *w)
{
	const struct image_axis	*ax = &plan->x, *ay = &plan->y;
	struct image_coeffs	 hc, vc;
	struct out_row		 o;
	const uint8_t		*tmp, *row;
	uint8_t			*mem, *tmpbuf = NULL, *rowbuf = NULL;
	void			*htab = NULL;
	size_t			 need, hbytes, vbytes, tbytes, rbytes, tabbytes;
	size_t			 tstride;
	uint32_t		 hk, vk, m, bytes;
	bool			 hneed, vneed;

	if (ax->pad + ax->count > p->out_w || ay->pad + ay->count > p->out_h ||
	    ax->first + ax->count > ax->out ||
	    ay->first + ay->count > ay->out ||
	    (ax->count == 0) != (ay->count == 0) ||
	    (ax->count > 0 && (plan->decode.w == 0 || plan->decode.h == 0 ||
	    stride < (size_t)plan->decode.w * 3))) {
		errno = EINVAL;
		return (-1);
	}
	lut_make(p, w);
	if (ax->count == 0) {
		fill_padding(p, w, out);
		return (0);
	}
	hneed = ax->in != ax->out || plan->flip;
	vneed = ay->in != ay->out;
	hk = image_resize_ksize(ax->in, ax->out);
	vk = image_resize_ksize(ay->in, ay->out);
	bytes = ax->count * 3;

	/* Carve the scratch: weights, AVX2 table, intermediate, a row. */
	memset(&hc, 0, sizeof hc);
	memset(&vc, 0, sizeof vc);
	hbytes = round64((size_t)ax->count * 8) * 2 +
	    round64((size_t)ax->count * hk * 4) + round64((size_t)hk * 8);
	vbytes = round64((size_t)ay->count * 8) * 2 +
	    round64((size_t)ay->count * vk * 4) + round64((size_t)vk * 8);
	/* The table needs the widest window; ksize bounds it. */
	tabbytes = round64((ax->count / 8) * 8 * sizeof(int32_t) +
	    (ax->count / 8) * (size_t)(hk + 1) * 32 * sizeof(int32_t) + 64);
	tbytes = hneed ? round64((size_t)plan->decode.h * bytes + 32) : 0;
	rbytes = vneed ? round64((size_t)bytes + 32) : 0;
	need = hbytes + vbytes + tabbytes + tbytes + rbytes;
	if (work_reserve(w, need) != 0)
		return (-1);
	mem = w->buf;
	mem += coeffs_carve(&hc, mem, ax->count, hk);
	mem += coeffs_carve(&vc, mem, ay->count, vk);
	htab = mem;
	mem += tabbytes;
	if (hneed) {
		tmpbuf = mem;
		mem += tbytes;
	}
	if (vneed)
		rowbuf = mem;

	/* Weights, moved to count from the decoded box's first pixel. */
	image_resize_coeffs(ax->in, ax->out, ax->first, ax->count, plan->flip,
	    &hc);
	image_resize_coeffs(ay->in, ay->out, ay->first, ay->count, 0, &vc);
	if (!coeffs_rebase(&hc, plan->decode.x - ax->src, plan->decode.w) ||
	    !coeffs_rebase(&vc, plan->decode.y - ay->src, plan->decode.h)) {
		errno = EINVAL;
		return (-1);
	}

	if (hneed) {
		image_resize_hpass(&hc, plan->decode.w, src, stride,
		    plan->decode.h, tmpbuf, bytes, htab);
		tmp = tmpbuf;
		tstride = bytes;
	} else {
		tmp = src;
		tstride = stride;
	}

	if (ax->count < p->out_w || ay->count < p->out_h)
		fill_padding(p, w, out);
	o.p = p;
	o.w = w;
	o.out = out;
	o.x = plan->flip ? p->out_w - ax->pad - ax->count : ax->pad;
	for (m = 0; m < ay->count; m++) {
		if (vneed) {
			image_resize_vrow(vc.k + (size_t)m * vc.ksize,
			    vc.n[m], tmp + (size_t)vc.lo[m] * tstride, tstride,
			    bytes, rowbuf);
			row = rowbuf;
		} else
			row = tmp + (size_t)vc.lo[m] * tstride;
		o.y = ay->pad + m;
		row_put(&o, row, ax->count);
	}
	return (0);
}

/*
 * The tail alone (struct image_tail): a float of the tensor back to its
 * byte, ((f * std) + mean) * 255 rounded to nearest, saturated; exact
 * for every float the table holds, which image_tail_init() checks.
 */
static inline uint8_t
tail_byte(float f, float mean, float std)
{
	float	t = (f * std + mean) * 255.0f;

	if (!(t >= 0.0f))
		return (0);
	if (t >= 255.0f)
		return (255);
	return ((uint8_t)lrintf(t));
}

/* @n floats of channel @c into bytes, scalar. */
static void
tail_plane_u8_scalar(const struct image_tail *t, unsigned int c,
    const float *in, uint8_t *out, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		out[i] = tail_byte(in[i], t->key[c], t->key[3 + c]);
}

/* @n bytes of channel @c into floats, scalar: the table. */
static void
tail_plane_float_scalar(const struct image_tail *t, unsigned int c,
    const uint8_t *in, float *out, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		out[i] = t->lut[c][in[i]];
}

#ifdef IMAGE_HAVE_AVX2
/* Eight floats as tail_byte()'s int32s (cvtps rounds to nearest even). */
__attribute__((target("avx2")))
static inline __m256i
tail_i32(const float *in, __m256 mean, __m256 std, __m256 k255)
{
	return (_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_add_ps(
	    _mm256_mul_ps(_mm256_loadu_ps(in), std), mean), k255)));
}

/* @n floats of channel @c into bytes, AVX2: 32 at a time. */
__attribute__((target("avx2")))
static void
tail_plane_u8_avx2(const struct image_tail *t, unsigned int c,
    const float *in, uint8_t *out, size_t n)
{
	const __m256i	order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	__m256		mean = _mm256_set1_ps(t->key[c]),
			std = _mm256_set1_ps(t->key[3 + c]),
			k255 = _mm256_set1_ps(255.0f);
	__m256i		ab, cd;
	size_t		i = 0;

	for (; i + 32 <= n; i += 32) {
		/* Saturating packs: what lies outside 0-255 is clamped. */
		ab = _mm256_packs_epi32(tail_i32(in + i, mean, std, k255),
		    tail_i32(in + i + 8, mean, std, k255));
		cd = _mm256_packs_epi32(tail_i32(in + i + 16, mean, std, k255),
		    tail_i32(in + i + 24, mean, std, k255));
		ab = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd),
		    order);
		/* Aligned: past the caches (the bytes are kept, not read). */
		if (((uintptr_t)(out + i) & 31) == 0)
			_mm256_stream_si256((__m256i *)(void *)(out + i), ab);
		else
			_mm256_storeu_si256((__m256i *)(void *)(out + i), ab);
	}
	_mm_sfence();
	tail_plane_u8_scalar(t, c, in + i, out + i, n - i);
}

/* @n bytes of channel @c into floats, AVX2: to_float(), as rows do. */
__attribute__((target("avx2")))
static void
tail_plane_float_avx2(const struct image_tail *t, unsigned int c,
    const uint8_t *in, float *out, size_t n)
{
	__m256		mean = _mm256_set1_ps(t->key[c]),
			std = _mm256_set1_ps(t->key[3 + c]),
			k255 = _mm256_set1_ps(255.0f);
	__m256		v;
	size_t		i = 0;


	for (; i + 8 <= n; i += 8) {
		v = to_float(_mm_loadl_epi64((const __m128i *)(const void *)
		    (in + i)), k255, mean, std);
		/* Aligned: past the caches (a late member reads it later). */
		if (((uintptr_t)(out + i) & 31) == 0)
			_mm256_stream_ps(out + i, v);
		else
			_mm256_storeu_ps(out + i, v);
	}
	_mm_sfence();
	tail_plane_float_scalar(t, c, in + i, out + i, n - i);
}
#endif

/* Whether every byte of every channel comes back from its float. */
static bool
tail_exact(const struct image_tail *t)
{
	uint8_t		v[256], back[256];
	float		f[256];
	unsigned int	c, i;

	for (i = 0; i < 256; i++)
		v[i] = (uint8_t)i;
	for (c = 0; c < 3; c++) {
		tail_plane_u8_scalar(t, c, t->lut[c], back, 256);
		if (memcmp(back, v, 256) != 0)
			return (false);
#ifdef IMAGE_HAVE_AVX2
		if (image_simd_current() == IMAGE_SIMD_AVX2) {
			tail_plane_u8_avx2(t, c, t->lut[c], back, 256);
			tail_plane_float_avx2(t, c, v, f, 256);
			if (memcmp(back, v, 256) != 0 ||
			    memcmp(f, t->lut[c], sizeof f) != 0)
				return (false);
		}
#endif
	}
	return (true);
}

/**
 * image_tail_init() - the tail of @p (ToTensor, and Normalize if there)
 * on its own
 * @t: filled in
 * @p: the pipeline
 *
 * Return: 0, or -1 when @p's output is not float32 or a byte of some
 * channel does not come back exactly from its float (a mean or std far
 * out of the usual): then there is no exact uint8 route.
 */
int
image_tail_init(struct image_tail *t, const struct image_pipeline *p)
{
	memset(t, 0, sizeof(*t));
	if (p->output != IMAGE_OUT_FLOAT32_CHW)
		return (-1);
	lut_key_of(p, t->key);
	lut_fill(t->lut, t->key);
	t->plane = (size_t)p->out_h * p->out_w;
	return (tail_exact(t) ? 0 : -1);
}

/**
 * image_tail_to_float() - one sample's uint8 CHW planes (@in, 3 x plane
 * bytes) into the tensor (@out, 3 x plane floats): the floats
 * image_plan_run() writes for those bytes, bit for bit.
 */
void
image_tail_to_float(const struct image_tail *t, const uint8_t *in, float *out)
{
	unsigned int	c;

	for (c = 0; c < 3; c++) {
#ifdef IMAGE_HAVE_AVX2
		if (image_simd_current() == IMAGE_SIMD_AVX2) {
			tail_plane_float_avx2(t, c, in + c * t->plane,
			    out + c * t->plane, t->plane);
			continue;
		}
#endif
		tail_plane_float_scalar(t, c, in + c * t->plane,
		    out + c * t->plane, t->plane);
	}
}

/**
 * image_tail_to_u8() - one sample's tensor (@in, 3 x plane floats) back
 * into its uint8 CHW planes (@out): exact for any tensor image_plan_run()
 * wrote (image_tail_init() checked every byte); other floats are rounded
 * and clamped to 0-255.
 */
void
image_tail_to_u8(const struct image_tail *t, const float *in, uint8_t *out)
{
	unsigned int	c;

	for (c = 0; c < 3; c++) {
#ifdef IMAGE_HAVE_AVX2
		if (image_simd_current() == IMAGE_SIMD_AVX2) {
			tail_plane_u8_avx2(t, c, in + c * t->plane,
			    out + c * t->plane, t->plane);
			continue;
		}
#endif
		tail_plane_u8_scalar(t, c, in + c * t->plane,
		    out + c * t->plane, t->plane);
	}
}
