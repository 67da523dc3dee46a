/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/transform.c's check of a client's Transform
 * (transform_init): what it accepts and what that makes of the rows (their
 * bytes, dtype and shape, and for arrays the values transform_row writes),
 * and each refusal with its message, for array datasets and for image
 * datasets (a pipeline).  The datasets are described in memory: the check
 * reads only their name, type, element type and shape.
 */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "dtype.h"
#include "transform.h"
#include "runner.h"

/* A dataset of @dtype samples of shape @shape (@ndim dims), in memory. */
static struct dataset
array_dataset(const char *name, enum infeed_dtype dtype, uint32_t ndim,
    const uint64_t *shape)
{
	struct dataset	ds;
	uint32_t	i;

	memset(&ds, 0, sizeof(ds));
	ds.name = (char *)(uintptr_t)name;
	ds.type = "raw";
	ds.samples = 10;
	ds.dtype = dtype;
	ds.ndim = ndim;
	ds.sample_bytes = dtype_size(dtype);
	for (i = 0; i < ndim; i++) {
		ds.shape[i] = shape[i];
		ds.sample_bytes *= shape[i];
	}
	return (ds);
}

/* An image dataset (encoded samples of no fixed shape). */
static struct dataset
image_dataset(void)
{
	struct dataset	ds;

	memset(&ds, 0, sizeof(ds));
	ds.name = (char *)(uintptr_t)"pics";
	ds.type = "imagefolder";
	ds.samples = 10;
	ds.encoded = true;
	return (ds);
}

/* A Transform as a client that set only what is given writes it. */
static struct transform_spec
spec(void)
{
	struct transform_spec	t;

	memset(&t, 0, sizeof(t));
	t.scale = 1.0f;
	return (t);
}

/* transform_init refuses @t on @ds with a message holding @want. */
static void
refused(const struct transform_spec *t, const struct dataset *ds,
    const char *want)
{
	struct transform	 tf;
	char			*cause = NULL;

	ck_assert_int_eq(transform_init(&tf, t, ds, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, want) != NULL, "'%s' lacks '%s'", cause,
	    want);
	free(cause);
}

/* transform_init accepts @t on @ds. */
static void
accepted(const struct transform_spec *t, const struct dataset *ds,
    struct transform *tf)
{
	char	*cause = NULL;

	ck_assert_msg(transform_init(tf, t, ds, &cause) == 0, "refused: %s",
	    cause);
	ck_assert_ptr_null(cause);
}

START_TEST(no_transform_copies_rows_as_read)
{
	static const uint64_t	shape[] = { 3, 2, 2 };
	struct dataset		ds = array_dataset("u8", INFEED_DTYPE_UINT8, 3,
				    shape);
	struct transform_spec	t = spec();
	struct transform	tf;
	uint64_t		out[INFEED_MAX_DIMS];

	/* No Transform at all, or one that asks for nothing. */
	accepted(NULL, &ds, &tf);
	ck_assert(!tf.to_float32 && !tf.image);
	ck_assert_uint_eq(tf.out_sample_bytes, 12);
	ck_assert_int_eq(transform_out_dtype(&tf, &ds), INFEED_DTYPE_UINT8);
	ck_assert_uint_eq(transform_out_shape(&tf, &ds, out), 3);
	ck_assert(out[0] == 3 && out[1] == 2 && out[2] == 2);
	ck_assert(!transform_needs_lut(&tf));
	accepted(&t, &ds, &tf);
	ck_assert(!tf.to_float32);
	ck_assert_uint_eq(tf.out_sample_bytes, 12);
}
END_TEST

START_TEST(to_float32_scales_and_normalises_per_channel)
{
	static const uint64_t	shape[] = { 3, 2, 2 };
	struct dataset		ds = array_dataset("u8", INFEED_DTYPE_UINT8, 3,
				    shape);
	struct transform_spec	t = spec();
	struct transform	tf;
	uint8_t			in[12];
	float			out[12], *lut, want;
	unsigned		e, c;

	t.to_float32 = true;
	t.scale = 0.5f;
	t.nmean = t.nstd = 3;
	t.mean[0] = 1;
	t.mean[1] = 2;
	t.mean[2] = 3;
	t.std[0] = 1;
	t.std[1] = 2;
	t.std[2] = 4;
	accepted(&t, &ds, &tf);
	ck_assert(tf.to_float32);
	ck_assert_uint_eq(tf.nchannels, 3);
	ck_assert_uint_eq(tf.channel_elems, 4);
	ck_assert_uint_eq(tf.out_sample_bytes, 12 * sizeof(float));
	ck_assert_int_eq(transform_out_dtype(&tf, &ds), INFEED_DTYPE_FLOAT32);
	ck_assert(transform_needs_lut(&tf));
	ck_assert_ptr_nonnull(lut = transform_lut_new(&tf));
	for (e = 0; e < 12; e++)
		in[e] = (uint8_t)(e * 20);
	transform_row(&tf, lut, in, out);
	for (e = 0; e < 12; e++) {
		c = e / 4;
		want = ((float)in[e] * 0.5f - t.mean[c]) / t.std[c];
		ck_assert_msg(fabsf(out[e] - want) < 1e-6f, "element %u: %g, "
		    "expected %g", e, (double)out[e], (double)want);
	}
	free(lut);

	/* One mean and std for every channel. */
	t.nmean = t.nstd = 1;
	accepted(&t, &ds, &tf);
	ck_assert_uint_eq(tf.nchannels, 1);
	ck_assert(tf.mean[0] == 1.0f && tf.std[0] == 1.0f);
}
END_TEST

START_TEST(float32_with_nothing_to_do_is_read_as_it_is)
{
	static const uint64_t	shape[] = { 4 };
	struct dataset		ds = array_dataset("f32", INFEED_DTYPE_FLOAT32,
				    1, shape);
	struct transform_spec	t = spec();
	struct transform	tf;
	float			in[4] = { 1, 2, 3, 4 }, out[4];

	t.to_float32 = true;
	accepted(&t, &ds, &tf);
	ck_assert(!tf.to_float32);
	ck_assert_uint_eq(tf.out_sample_bytes, 16);
	t.scale = 2.0f;
	accepted(&t, &ds, &tf);
	ck_assert(tf.to_float32);
	ck_assert(!transform_needs_lut(&tf));
	transform_row(&tf, NULL, (const uint8_t *)in, out);
	ck_assert(out[0] == 2 && out[1] == 4 && out[2] == 6 && out[3] == 8);
}
END_TEST

START_TEST(array_transforms_refused_with_what_is_wrong)
{
	static const uint64_t	shape[] = { 3, 2, 2 };
	struct dataset		u8 = array_dataset("u8", INFEED_DTYPE_UINT8, 3,
				    shape);
	struct dataset		i32 = array_dataset("ints", INFEED_DTYPE_INT32,
				    3, shape);
	struct transform_spec	t;
	size_t			i;

	t = spec();
	t.pipeline = (char *)(uintptr_t)"CenterCrop(2)";
	refused(&t, &u8, "transform: 'u8' holds arrays (type raw), and a "
	    "pipeline such as RandomResizedCrop(224) is for image datasets");

	t = spec();
	t.scale = 0.5f;
	refused(&t, &u8, "transform: scale, mean and std need to_float32 = "
	    "true");
	t = spec();
	t.nmean = t.nstd = 1;
	refused(&t, &u8, "need to_float32 = true");

	t = spec();
	t.to_float32 = true;
	refused(&t, &i32, "transform: to_float32 converts uint8 or float32 "
	    "samples, but 'ints' holds int32");

	t.scale = 0.0f;
	refused(&t, &u8, "scale must be a finite non-zero number");
	t.scale = INFINITY;
	refused(&t, &u8, "scale must be a finite non-zero number");
	t.scale = NAN;
	refused(&t, &u8, "scale must be a finite non-zero number");

	t = spec();
	t.to_float32 = true;
	t.nmean = 2;
	t.nstd = 3;
	refused(&t, &u8, "transform: 2 mean values but 3 std values; give "
	    "one of each per channel");
	t.nmean = 2;
	t.nstd = 2;
	refused(&t, &u8, "transform: 2 mean/std values, but samples have 3 "
	    "channels (dim 0 of the sample shape)");
	/* More values than a session keeps: refused by their count. */
	t.nmean = t.nstd = 1000;
	refused(&t, &u8, "1000 mean/std values, but samples have 3 channels");
	refused(&t, &u8, "(at most 16)");

	t.nmean = t.nstd = 3;
	for (i = 0; i < 3; i++) {
		t.mean[i] = 0.5f;
		t.std[i] = 1.0f;
	}
	t.std[1] = 0.0f;
	refused(&t, &u8, "transform: mean and std must be finite and std "
	    "non-zero (channel 1)");
	t.std[1] = 1.0f;
	t.mean[2] = NAN;
	refused(&t, &u8, "(channel 2)");
}
END_TEST

START_TEST(image_pipelines_accepted_and_refused)
{
	struct dataset		ds = image_dataset();
	struct transform_spec	t = spec();
	struct transform	tf;
	uint64_t		out[INFEED_MAX_DIMS];

	refused(NULL, &ds, "transform: 'pics' holds images of different "
	    "sizes (type imagefolder); attach with a pipeline that makes them "
	    "one size");
	refused(&t, &ds, "holds images of different sizes");

	t.pipeline = (char *)(uintptr_t)"Resize(256), CenterCrop(224), "
	    "ToTensor()";
	accepted(&t, &ds, &tf);
	ck_assert(tf.image);
	ck_assert_uint_eq(tf.out_sample_bytes, 3 * 224 * 224 * 4);
	ck_assert_int_eq(transform_out_dtype(&tf, &ds), INFEED_DTYPE_FLOAT32);
	ck_assert_uint_eq(transform_out_shape(&tf, &ds, out), 3);
	ck_assert(out[0] == 3 && out[1] == 224 && out[2] == 224);

	/* Without ToTensor: what the PIL image holds, height first. */
	t.pipeline = (char *)(uintptr_t)"Resize(64), CenterCrop((32, 48))";
	accepted(&t, &ds, &tf);
	ck_assert_int_eq(transform_out_dtype(&tf, &ds), INFEED_DTYPE_UINT8);
	ck_assert_uint_eq(transform_out_shape(&tf, &ds, out), 3);
	ck_assert(out[0] == 32 && out[1] == 48 && out[2] == 3);
	ck_assert_uint_eq(tf.out_sample_bytes, 32 * 48 * 3);

	/* The array fields are for arrays. */
	t.to_float32 = true;
	refused(&t, &ds, "transform: to_float32, scale, mean and std are for "
	    "array datasets; for images, end the pipeline with ToTensor() "
	    "and Normalize(mean, std)");
	t.to_float32 = false;
	t.scale = 2.0f;
	refused(&t, &ds, "are for array datasets");
	t.scale = 1.0f;
	t.nmean = 1;
	refused(&t, &ds, "are for array datasets");
	t.nmean = 0;

	/* The parser's reason, after "transform: ". */
	t.pipeline = (char *)(uintptr_t)"ToTensor()";
	refused(&t, &ds, "transform: ");
	refused(&t, &ds, "images keep their own sizes");
}
END_TEST

static Suite *
transform_suite(void)
{
	Suite	*s = suite_create("transform");
	TCase	*tc = tcase_create("init");

	tcase_add_test(tc, no_transform_copies_rows_as_read);
	tcase_add_test(tc, to_float32_scales_and_normalises_per_channel);
	tcase_add_test(tc, float32_with_nothing_to_do_is_read_as_it_is);
	tcase_add_test(tc, array_transforms_refused_with_what_is_wrong);
	tcase_add_test(tc, image_pipelines_accepted_and_refused);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(transform_suite()));
}
