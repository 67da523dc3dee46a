/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the image transforms: what the pipeline parser accepts
 * and refuses (and says), the canonical text, RandomResizedCrop's fallback,
 * plans that depend only on (seed, epoch, index), and the scalar and AVX2
 * code giving the same bytes, and the tail (ToTensor [+ Normalize]) alone
 * exact from uint8 and back.  python/tests/test_image_transform.py
 * compares the outputs with torchvision's.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "image-transform.h"
#include "runner.h"
#include "splitmix64.h"

static const char *const imagenet_train = "RandomResizedCrop(224, "
    "scale=(0.08, 1.0), ratio=(0.75, 1.3333333)), "
    "RandomHorizontalFlip(p=0.5), ToTensor(), Normalize(mean=[0.485, "
    "0.456, 0.406], std=[0.229, 0.224, 0.225])";

/* Parse @text, which must be accepted. */
static void
parse_ok(const char *text, struct image_pipeline *p)
{
	char	*cause = NULL;
	int	 rc;

	rc = image_pipeline_parse(text, p, &cause);
	ck_assert_msg(rc == 0, "refused '%s': %s", text,
	    cause != NULL ? cause : "(no cause)");
	ck_assert_ptr_null(cause);
}

/* Parse @text, which must be refused with a message holding @words. */
static void
parse_refused(const char *text, const char *words)
{
	struct image_pipeline	 p;
	char			*cause = NULL;

	ck_assert_msg(image_pipeline_parse(text, &p, &cause) == -1,
	    "accepted '%s'", text);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, words) != NULL, "'%s': message '%s' "
	    "lacks '%s'", text, cause, words);
	free(cause);
}

START_TEST(parse_imagenet_train)
{
	struct image_pipeline	p;

	parse_ok(imagenet_train, &p);
	ck_assert_uint_eq(p.crop, IMAGE_CROP_RANDOM_RESIZED);
	ck_assert_uint_eq(p.crop_h, 224);
	ck_assert_uint_eq(p.crop_w, 224);
	ck_assert(p.scale[0] == 0.08f && p.scale[1] == 1.0f);
	ck_assert(p.ratio[0] == 0.75f && p.ratio[1] == 1.3333333f);
	ck_assert(p.ratio64[1] == 1.3333333);
	ck_assert(p.flip_p == 0.5f);
	ck_assert_uint_eq(p.output, IMAGE_OUT_FLOAT32_CHW);
	ck_assert_uint_eq(p.normalize, 1);
	ck_assert(p.mean[1] == 0.456f && p.std[2] == 0.225f);
	ck_assert_uint_eq(p.out_h, 224);
	ck_assert_uint_eq(p.out_bytes, 224 * 224 * 3 * 4);
}
END_TEST

START_TEST(parse_forms)
{
	struct image_pipeline	p;

	parse_ok("Resize(256), CenterCrop(224), PILToTensor()", &p);
	ck_assert_uint_eq(p.resize, 256);
	ck_assert_uint_eq(p.crop, IMAGE_CROP_CENTER);
	ck_assert_uint_eq(p.output, IMAGE_OUT_UINT8_CHW);
	ck_assert_uint_eq(p.out_bytes, 224 * 224 * 3);

	parse_ok("transforms.Compose([\n  transforms.Resize([256], "
	    "interpolation=InterpolationMode.BILINEAR, max_size=300, "
	    "antialias=True),\n  T.CenterCrop((200, 100)),\n])", &p);
	ck_assert_uint_eq(p.resize, 256);
	ck_assert_uint_eq(p.max_size, 300);
	ck_assert_uint_eq(p.out_h, 200);
	ck_assert_uint_eq(p.out_w, 100);
	ck_assert_uint_eq(p.output, IMAGE_OUT_UINT8_HWC);

	parse_ok("Compose(transforms=[Resize((32, 48), 'bilinear')])", &p);
	ck_assert_uint_eq(p.resize_h, 32);
	ck_assert_uint_eq(p.resize_w, 48);
	ck_assert_uint_eq(p.crop, IMAGE_CROP_NONE);

	parse_ok("RandomResizedCrop([160], (0.35, 1), (3/4, 4/3), 2, None), "
	    "RandomHorizontalFlip(), ToTensor(), Normalize(0.5, (0.25,), "
	    "inplace=True)", &p);
	ck_assert_uint_eq(p.crop_w, 160);
	ck_assert(p.ratio64[0] == 3.0 / 4.0 && p.ratio64[1] == 4.0 / 3.0);
	ck_assert(p.flip_p == 0.5f);
	ck_assert(p.mean[2] == 0.5f && p.std[0] == 0.25f && p.std[2] ==
	    0.25f);

	parse_ok("[CenterCrop(8192), ToTensor(), RandomHorizontalFlip(1.0)]",
	    &p);
	ck_assert(p.flip_p == 1.0f);
	ck_assert_uint_eq(p.out_h, 8192);
}
END_TEST

START_TEST(parse_refusals)
{
	parse_refused("ColorJitter(0.4)", "unknown transform 'ColorJitter': "
	    "infeed runs RandomResizedCrop, Resize, CenterCrop, "
	    "RandomHorizontalFlip, ToTensor, PILToTensor and Normalize");
	parse_refused("Resize(256)", "Resize(256) alone gives images of "
	    "different sizes: add CenterCrop(224) or use RandomResizedCrop");
	parse_refused("ToTensor()", "images keep their own sizes");
	parse_refused("", "images keep their own sizes");
	parse_refused("CenterCrop(224), Normalize(0.5, 0.5), ToTensor()",
	    "Normalize before ToTensor");
	parse_refused("CenterCrop(224), PILToTensor(), Normalize(0.5, 0.5)",
	    "Normalize after PILToTensor");
	parse_refused("RandomResizedCrop(224, scale=(1.0, 0.5))",
	    "RandomResizedCrop: scale (1.0, 0.5) is not increasing");
	parse_refused("RandomResizedCrop(224, ratio=(2, 1))",
	    "ratio (2, 1) is not increasing");
	parse_refused("RandomResizedCrop(224, scale=(0, 1))",
	    "scale (0, 1) is out of range");
	parse_refused("RandomResizedCrop(224, scale=(0.1, 1e999))",
	    "not finite");
	parse_refused("RandomResizedCrop(0)", "size 0 is out of range");
	parse_refused("RandomResizedCrop(8193)", "size 8193 is out of range");
	parse_refused("RandomResizedCrop(224.0)", "not an integer");
	parse_refused("RandomResizedCrop((1, 2, 3))", "expected an int");
	parse_refused("RandomResizedCrop()", "missing required argument "
	    "'size'");
	parse_refused("RandomResizedCrop(224, interpolation="
	    "InterpolationMode.BICUBIC)", "interpolation "
	    "InterpolationMode.BICUBIC is not supported");
	parse_refused("Resize(256, antialias=False), CenterCrop(224)",
	    "antialias=False");
	parse_refused("Resize(256, max_size=256), CenterCrop(224)",
	    "must be strictly greater");
	parse_refused("Resize((256, 256), max_size=300)",
	    "max_size should only be passed");
	parse_refused("Resize(256, foo=1)", "unexpected keyword argument "
	    "'foo'");
	parse_refused("Resize(256, size=3)", "multiple values for argument "
	    "'size'");
	parse_refused("CenterCrop(224, 3)", "takes at most 1 argument");
	parse_refused("CenterCrop(size=224, 3)", "positional argument "
	    "follows");
	parse_refused("RandomHorizontalFlip(), CenterCrop(224)",
	    "CenterCrop after RandomHorizontalFlip");
	parse_refused("RandomHorizontalFlip(1.5), CenterCrop(2)",
	    "p 1.5 is out of range");
	parse_refused("CenterCrop(224), RandomHorizontalFlip(), "
	    "RandomHorizontalFlip()", "RandomHorizontalFlip twice");
	parse_refused("CenterCrop(224), Resize(256)", "Resize after "
	    "CenterCrop");
	parse_refused("RandomResizedCrop(224), CenterCrop(200)",
	    "CenterCrop after RandomResizedCrop");
	parse_refused("CenterCrop(224), ToTensor(), PILToTensor()",
	    "PILToTensor after ToTensor");
	parse_refused("CenterCrop(224), ToTensor(), CenterCrop(10)",
	    "CenterCrop after ToTensor");
	parse_refused("CenterCrop(224), ToTensor(), Normalize([0.5, 0.5], "
	    "[1, 1])", "expected one value or three");
	parse_refused("CenterCrop(224), ToTensor(), Normalize(0.5, "
	    "[1, 0, 1])", "std [1, 0, 1] evaluated to zero");
	parse_refused("CenterCrop(224), ToTensor(), Normalize(0.5, 1e-50)",
	    "evaluated to zero");
	parse_refused("CenterCrop(224), ToTensor(), Normalize(1e39, 1)",
	    "not finite");
	parse_refused("CenterCrop(224), ToTensor(), Normalize(0.5)",
	    "missing required argument 'std'");
	parse_refused("CenterCrop(224) ToTensor()", "',' between transforms");
	parse_refused("Compose([CenterCrop(224)]", "')' closing Compose(");
	parse_refused("CenterCrop(224", "at the end of the text");
	parse_refused("CenterCrop(1/0)", "division by zero");
}
END_TEST

START_TEST(format_round_trip)
{
	static const char *const texts[] = {
		"RandomResizedCrop(224, scale=(0.08, 1.0), ratio=(0.75, "
		    "1.3333333333333333)), RandomHorizontalFlip(p=0.5), "
		    "ToTensor(), Normalize(mean=[0.485, 0.456, 0.406], "
		    "std=[0.229, 0.224, 0.225])",
		"Resize(256, max_size=400), CenterCrop((224, 100)), "
		    "PILToTensor()",
		"Resize((7, 9)), RandomHorizontalFlip(0.1)",
		"CenterCrop(3), ToTensor()",
		"RandomResizedCrop((1, 2), (0.1, 0.2), (3/4, 4/3))",
	};
	struct image_pipeline	p, q;
	char			buf[1024];
	size_t			i;

	for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		parse_ok(texts[i], &p);
		image_pipeline_format(&p, buf, sizeof buf);
		parse_ok(buf, &q);
		ck_assert_msg(memcmp(&p, &q, sizeof p) == 0, "'%s' gave '%s', "
		    "which parses differently", texts[i], buf);
	}
	parse_ok(texts[0], &p);
	ck_assert_str_eq(image_pipeline_format(&p, buf, sizeof buf),
	    "RandomResizedCrop(size=224, scale=(0.08, 1.0), ratio=(0.75, "
	    "1.3333333333333333)), RandomHorizontalFlip(p=0.5), ToTensor(), "
	    "Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, "
	    "0.225])");
	image_pipeline_format(&p, buf, 10);
	ck_assert_uint_eq(strlen(buf), 9);
}
END_TEST

START_TEST(rrc_fallback)
{
	struct image_pipeline	p;
	struct image_plan	plan;
	uint64_t		i;

	parse_ok("RandomResizedCrop(224)", &p);
	for (i = 0; i < 50; i++) {
		/* No attempt can fit 10 rows: always the fallback. */
		image_plan_make(&p, 1000, 10, 1, 0, i, &plan);
		ck_assert_uint_eq(plan.crop.y, 0);
		ck_assert_uint_eq(plan.crop.x, 493);
		ck_assert_uint_eq(plan.crop.h, 10);
		ck_assert_uint_eq(plan.crop.w, 13);
		ck_assert_uint_eq(plan.decode.x, 493);
		ck_assert_uint_eq(plan.decode.w, 13);
	}
	image_plan_make(&p, 10, 1000, 1, 0, 0, &plan);
	ck_assert_uint_eq(plan.crop.w, 10);
	ck_assert_uint_eq(plan.crop.h, 13);	/* rint(10 / 0.75) */
	ck_assert_uint_eq(plan.crop.y, 493);
}
END_TEST

START_TEST(plans_deterministic)
{
	struct image_pipeline	p;
	struct image_plan	a, b, c;
	uint64_t		i, differ = 0, flips = 0;

	parse_ok(imagenet_train, &p);
	for (i = 0; i < 1000; i++) {
		image_plan_make(&p, 500, 375, 42, 3, i, &a);
		image_plan_make(&p, 500, 375, 42, 3, i + 1, &c);
		image_plan_make(&p, 500, 375, 42, 3, i, &b);
		ck_assert(memcmp(&a, &b, sizeof a) == 0);
		differ += memcmp(&a.crop, &c.crop, sizeof a.crop) != 0;
		flips += a.flip;
		ck_assert_uint_le(a.crop.x + a.crop.w, 500);
		ck_assert_uint_le(a.crop.y + a.crop.h, 375);
		image_plan_make(&p, 500, 375, 42, 4, i, &c);
		differ += memcmp(&a.crop, &c.crop, sizeof a.crop) != 0;
		image_plan_make(&p, 500, 375, 43, 3, i, &c);
		differ += memcmp(&a.crop, &c.crop, sizeof a.crop) != 0;
	}
	ck_assert_uint_ge(differ, 2990);
	ck_assert_uint_ge(flips, 430);
	ck_assert_uint_le(flips, 570);
}
END_TEST

START_TEST(draws_independent)
{
	uint64_t	fwd[64], i;

	for (i = 0; i < 64; i++)
		fwd[i] = image_draw(7, 1, 99, i);
	for (i = 64; i-- > 0;)
		ck_assert_uint_eq(image_draw(7, 1, 99, i), fwd[i]);
	for (i = 0; i < 64; i++) {
		ck_assert(image_draw_unit(7, 1, 99, i) >= 0.0f);
		ck_assert(image_draw_unit(7, 1, 99, i) < 1.0f);
	}
	ck_assert_uint_ne(image_draw(7, 1, 99, 0), image_draw(7, 1, 100, 0));
	ck_assert_uint_ne(image_draw(7, 1, 99, 0), image_draw(7, 2, 99, 0));
	ck_assert_uint_ne(image_draw(7, 1, 99, 0), image_draw(8, 1, 99, 0));
}
END_TEST

/* Run @text on a random image with each code path; the bytes must agree. */
static void
compare_paths(const char *text, uint32_t W, uint32_t H, uint64_t seed)
{
	struct image_pipeline	 p;
	struct image_plan	 plan;
	struct image_work	 w;
	uint8_t			*img, *o1, *o2;
	uint64_t		 st = seed, idx;
	size_t			 i, n = (size_t)W * H * 3;

	parse_ok(text, &p);
	img = malloc(n);
	o1 = malloc(p.out_bytes);
	o2 = malloc(p.out_bytes);
	ck_assert(img != NULL && o1 != NULL && o2 != NULL);
	for (i = 0; i < n; i++)
		img[i] = (uint8_t)(splitmix64_next(&st) >> (i % 3 == 0 ? 56 :
		    60));
	memset(&w, 0, sizeof w);
	for (idx = 0; idx < 8; idx++) {
		uint8_t	*box;
		size_t	 bw, y;

		image_plan_make(&p, W, H, seed, 0, idx, &plan);
		bw = (size_t)plan.decode.w * 3;
		box = malloc(bw * plan.decode.h + 1);
		ck_assert_ptr_nonnull(box);
		for (y = 0; y < plan.decode.h; y++)
			memcpy(box + y * bw, img + ((plan.decode.y + y) *
			    (size_t)W + plan.decode.x) * 3, bw);
		image_simd_select(IMAGE_SIMD_SCALAR);
		memset(o1, 0xa5, p.out_bytes);
		ck_assert_int_eq(image_plan_run(&p, &plan, box, bw, o1, &w),
		    0);
		image_simd_select(IMAGE_SIMD_AVX2);
		memset(o2, 0x5a, p.out_bytes);
		ck_assert_int_eq(image_plan_run(&p, &plan, box, bw, o2, &w),
		    0);
		ck_assert_msg(memcmp(o1, o2, p.out_bytes) == 0, "'%s' on "
		    "%ux%u, index %llu: scalar and AVX2 differ", text, W, H,
		    (unsigned long long)idx);
		free(box);
	}
	image_simd_select(IMAGE_SIMD_AUTO);
	image_work_free(&w);
	free(img);
	free(o1);
	free(o2);
}

START_TEST(scalar_equals_avx2)
{
	static const char *const texts[] = {
		"RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), "
		    "Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])",
		"RandomResizedCrop((31, 77), scale=(0.01, 1)), "
		    "RandomHorizontalFlip(), PILToTensor()",
		"RandomResizedCrop(400, scale=(0.01, 0.05))",
		"Resize(256), CenterCrop(224), RandomHorizontalFlip(0.7), "
		    "ToTensor()",
		"Resize(64), CenterCrop((90, 17)), RandomHorizontalFlip(), "
		    "PILToTensor()",
		"CenterCrop((300, 700)), RandomHorizontalFlip(), ToTensor(), "
		    "Normalize(0.5, 0.5)",
		"Resize((375, 9)), RandomHorizontalFlip()",
		"Resize((5, 500)), RandomHorizontalFlip(), ToTensor()",
	};
	static const uint32_t sizes[][2] = { { 500, 375 }, { 375, 500 },
	    { 33, 17 }, { 1, 1 }, { 2000, 9 }, { 8, 640 } };
	size_t	i, j;

	if (image_simd_select(IMAGE_SIMD_AVX2) != IMAGE_SIMD_AVX2) {
		image_simd_select(IMAGE_SIMD_AUTO);
		return;		/* nothing to compare on this CPU */
	}
	for (i = 0; i < sizeof texts / sizeof texts[0]; i++)
		for (j = 0; j < sizeof sizes / sizeof sizes[0]; j++)
			compare_paths(texts[i], sizes[j][0], sizes[j][1],
			    i * 100 + j);
}
END_TEST

START_TEST(run_refuses_bad_plan)
{
	struct image_pipeline	p;
	struct image_plan	plan;
	struct image_work	w;
	uint8_t			px[3] = { 1, 2, 3 }, out[12];

	memset(&w, 0, sizeof w);
	parse_ok("CenterCrop(2)", &p);
	image_plan_make(&p, 1, 1, 0, 0, 0, &plan);
	ck_assert_uint_eq(plan.decode.w, 1);
	ck_assert_int_eq(image_plan_run(&p, &plan, px, 3, out, &w), 0);
	/* Padding left/top (2 - 1) // 2 = 0: the pixel at (0, 0). */
	ck_assert_uint_eq(out[0], 1);
	ck_assert_uint_eq(out[3], 0);
	plan.x.pad = 2;
	ck_assert_int_eq(image_plan_run(&p, &plan, px, 3, out, &w), -1);
	image_plan_make(&p, 0, 5, 0, 0, 0, &plan);
	ck_assert_int_eq(image_plan_run(&p, &plan, px, 3, out, &w), 0);
	ck_assert_uint_eq(out[0], 0);
	image_work_free(&w);
}
END_TEST

/*
 * The tail alone (a group's store keeps images as uint8, issue 35): for
 * each pipeline, each code path and a few random crops (with padding),
 * the tensor image_plan_run() writes goes to the very bytes the same
 * plan writes as PILToTensor, and those bytes come back to the tensor
 * bit for bit; so a step served from a store is the decoded one.
 */
static void
tail_round_trip(const char *text, enum image_simd simd, uint64_t seed)
{
	struct image_pipeline	 p, p8;
	struct image_plan	 plan;
	struct image_work	 w;
	struct image_tail	 t;
	uint8_t			*img, *box, *u8, *back;
	float			*f, *f2;
	uint64_t		 st = seed, idx;
	size_t			 i, bw, y, W = 97, H = 61, n = W * H * 3;

	parse_ok(text, &p);
	p8 = p;
	p8.output = IMAGE_OUT_UINT8_CHW;
	p8.out_bytes = p.out_bytes / 4;
	image_simd_select(simd);
	ck_assert_int_eq(image_tail_init(&t, &p), 0);
	img = malloc(n);
	f = malloc(p.out_bytes);
	f2 = malloc(p.out_bytes);
	u8 = malloc(p8.out_bytes);
	back = malloc(p8.out_bytes);
	ck_assert(img && f && f2 && u8 && back);
	for (i = 0; i < n; i++)
		img[i] = (uint8_t)(splitmix64_next(&st) >> 56);
	memset(&w, 0, sizeof w);
	for (idx = 0; idx < 6; idx++) {
		image_plan_make(&p, (uint32_t)W, (uint32_t)H, seed, 0, idx,
		    &plan);
		bw = (size_t)plan.decode.w * 3;
		box = malloc(bw * plan.decode.h + 1);
		ck_assert_ptr_nonnull(box);
		for (y = 0; y < plan.decode.h; y++)
			memcpy(box + y * bw, img + ((plan.decode.y + y) * W +
			    plan.decode.x) * 3, bw);
		ck_assert_int_eq(image_plan_run(&p, &plan, box, bw, f, &w), 0);
		ck_assert_int_eq(image_plan_run(&p8, &plan, box, bw, u8, &w),
		    0);
		image_tail_to_u8(&t, f, back);
		ck_assert_msg(memcmp(back, u8, p8.out_bytes) == 0, "'%s': the "
		    "tensor's floats do not come back to its bytes", text);
		image_tail_to_float(&t, u8, f2);
		ck_assert_msg(memcmp(f2, f, p.out_bytes) == 0, "'%s': the "
		    "bytes do not come back to the tensor bit for bit", text);
		free(box);
	}
	image_simd_select(IMAGE_SIMD_AUTO);
	image_work_free(&w);
	free(img);
	free(f);
	free(f2);
	free(u8);
	free(back);
}

START_TEST(tail_is_exact_both_ways)
{
	static const char *const texts[] = {
		"RandomResizedCrop(64), RandomHorizontalFlip(), ToTensor(), "
		    "Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])",
		"RandomResizedCrop((33, 71)), ToTensor()",
		"Resize(40), CenterCrop((80, 45)), ToTensor(), "
		    "Normalize(0.5, 0.5)",
		"Resize(70), CenterCrop(50), RandomHorizontalFlip(), "
		    "ToTensor(), Normalize([0.1, -2.5, 7], [0.01, 3, 0.3])",
	};
	size_t	i;

	for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		tail_round_trip(texts[i], IMAGE_SIMD_SCALAR, i);
		if (image_simd_select(IMAGE_SIMD_AVX2) == IMAGE_SIMD_AVX2)
			tail_round_trip(texts[i], IMAGE_SIMD_AVX2, i + 100);
	}
	image_simd_select(IMAGE_SIMD_AUTO);
}
END_TEST

/*
 * No uint8 route where it would not be exact: uint8 outputs already are,
 * and a mean so large that neighbouring bytes' floats meet.
 */
START_TEST(tail_refuses_what_is_not_exact)
{
	struct image_pipeline	p;
	struct image_tail	t;

	parse_ok("CenterCrop(8), PILToTensor()", &p);
	ck_assert_int_eq(image_tail_init(&t, &p), -1);
	parse_ok("CenterCrop(8)", &p);
	ck_assert_int_eq(image_tail_init(&t, &p), -1);
	parse_ok("CenterCrop(8), ToTensor(), Normalize(100000, 1)", &p);
	ck_assert_int_eq(image_tail_init(&t, &p), -1);
	parse_ok("CenterCrop(8), ToTensor(), Normalize(100, 1)", &p);
	ck_assert_int_eq(image_tail_init(&t, &p), 0);
}
END_TEST

static Suite *
image_transform_suite(void)
{
	Suite	*s = suite_create("image-transform");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, parse_imagenet_train);
	tcase_add_test(tc, parse_forms);
	tcase_add_test(tc, parse_refusals);
	tcase_add_test(tc, format_round_trip);
	tcase_add_test(tc, rrc_fallback);
	tcase_add_test(tc, plans_deterministic);
	tcase_add_test(tc, draws_independent);
	tcase_add_test(tc, scalar_equals_avx2);
	tcase_add_test(tc, run_refuses_bad_plan);
	tcase_add_test(tc, tail_is_exact_both_ways);
	tcase_add_test(tc, tail_refuses_what_is_not_exact);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(image_transform_suite()));
}
