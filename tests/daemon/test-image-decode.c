/* SPDX-License-Identifier: MIT */
/*
 * Tests for daemon/dataset/image-*.c, the JPEG and PNG decoders, against
 * the fixtures in tests/images (made by tests/images/make-fixtures, with
 * PIL's convert("RGB") pixels of each good image in expected.rgb):
 * full decodes and random regions are bit-identical to PIL's, bad files
 * fail with a phrase that says why, a cut file never yields wrong pixels,
 * and one decoder serves every image, whatever failed before; with a
 * memory cap, an interlaced 16-bit PNG or a progressive JPEG that would
 * need more is refused at open, saying how much, and every good fixture
 * still decodes.
 * $IMAGE_FIXTURES names the directory (meson sets it).
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "image-bombs.h"
#include "image-decode.h"
#include "runner.h"

#define MAX_FIXTURES	64
#define PAD		7	/* bytes after each row, left untouched */
#define REGIONS		60	/* random regions per image */

struct fixture {
	char		 name[64];
	int		 good;
	uint32_t	 width, height;
	const uint8_t	*expected;	/* good: PIL's RGB8 */
	char		 phase[8];	/* bad: "open" or "decode" */
	char		 phrase[128];	/* bad: in the error */
	uint8_t		*data;
	size_t		 len;
};

static struct fixture	 fixtures[MAX_FIXTURES];
static size_t		 nfixtures;
static uint8_t		*expected;
static size_t		 expected_len;

/* Read all of @path (NULL on failure). */
static uint8_t *
read_file(const char *path, size_t *len)
{
	FILE	*fp;
	uint8_t	*buf;
	long	 n;

	if ((fp = fopen(path, "rb")) == NULL)
		return (NULL);
	if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 ||
	    fseek(fp, 0, SEEK_SET) != 0) {
		fclose(fp);
		return (NULL);
	}
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (buf == NULL || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
		free(buf);
		fclose(fp);
		return (NULL);
	}
	fclose(fp);
	*len = (size_t)n;
	return (buf);
}

/* Load fixtures.txt, expected.rgb and every file they name; exit if any
 * is missing. */
static void
load_fixtures(void)
{
	const char	*dir = getenv("IMAGE_FIXTURES");
	char		 path[4096], line[512];
	struct fixture	*f;
	FILE		*fp;
	unsigned long long off;
	int		 n;

	if (dir == NULL)
		dir = "tests/images";
	snprintf(path, sizeof path, "%s/expected.rgb", dir);
	if ((expected = read_file(path, &expected_len)) == NULL) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(1);
	}
	snprintf(path, sizeof path, "%s/fixtures.txt", dir);
	if ((fp = fopen(path, "r")) == NULL) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(1);
	}
	while (fgets(line, sizeof line, fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (nfixtures == MAX_FIXTURES) {
			fprintf(stderr, "too many fixtures\n");
			exit(1);
		}
		f = &fixtures[nfixtures];
		if (sscanf(line, "good %63s %" SCNu32 " %" SCNu32 " %llu",
		    f->name, &f->width, &f->height, &off) == 4) {
			f->good = 1;
			if (off > expected_len || (uint64_t)f->width *
			    f->height * 3 > expected_len - off) {
				fprintf(stderr, "%s: past expected.rgb\n",
				    f->name);
				exit(1);
			}
			f->expected = expected + off;
		} else if (sscanf(line, "bad %63s %7s %n", f->name, f->phase,
		    &n) == 2) {
			snprintf(f->phrase, sizeof f->phrase, "%s", line + n);
		} else {
			fprintf(stderr, "fixtures.txt: bad line '%s'\n", line);
			exit(1);
		}
		snprintf(path, sizeof path, "%s/%s", dir, f->name);
		if ((f->data = read_file(path, &f->len)) == NULL) {
			fprintf(stderr, "%s: %s\n", path, strerror(errno));
			exit(1);
		}
		nfixtures++;
	}
	fclose(fp);
}

/* splitmix64, for reproducible regions. */
static uint64_t
next_random(uint64_t *s)
{
	uint64_t	z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (z ^ (z >> 31));
}

/*
 * Decode region (x, y, w, h) of good fixture @f with @d and compare it
 * with PIL's pixels; the padding after each row must stay untouched.
 * Plain tests with ck_abort_msg(), as every ck_assert() costs Check a
 * write and this runs a hundred thousand times.
 */
static void
check_region(struct image_decoder *d, const struct fixture *f, uint32_t x,
    uint32_t y, uint32_t w, uint32_t h)
{
	struct image_info	 info;
	size_t			 stride = (size_t)w * 3 + PAD;
	uint8_t			*out;
	uint32_t		 r;
	const uint8_t		*want;
	int			 i;

	if (image_open(d, f->data, f->len, &info) != 0)
		ck_abort_msg("%s: %s", f->name, image_decoder_error(d));
	if (info.width != f->width || info.height != f->height ||
	    info.format != (strstr(f->name, ".jpg") != NULL ?
	    IMAGE_FORMAT_JPEG : IMAGE_FORMAT_PNG))
		ck_abort_msg("%s: opened as %d %ux%u", f->name, info.format,
		    info.width, info.height);
	if ((out = malloc(stride * h)) == NULL)
		ck_abort_msg("out of memory");
	memset(out, 0xa5, stride * h);
	if (image_decode_region(d, x, y, w, h, out, stride) != 0)
		ck_abort_msg("%s %ux%u at (%u,%u): %s", f->name, w, h, x, y,
		    image_decoder_error(d));
	for (r = 0; r < h; r++) {
		want = f->expected + ((size_t)(y + r) * f->width + x) * 3;
		if (memcmp(out + r * stride, want, (size_t)w * 3) != 0)
			ck_abort_msg("%s: region %ux%u at (%u,%u) differs from "
			    "PIL in row %u", f->name, w, h, x, y, y + r);
		for (i = 0; i < PAD; i++)
			if (out[r * stride + (size_t)w * 3 + i] != 0xa5)
				ck_abort_msg("%s: region %ux%u at (%u,%u) "
				    "wrote past row %u", f->name, w, h, x, y,
				    y + r);
	}
	free(out);
}

START_TEST(test_full_decodes_equal_pil)
{
	struct image_decoder	*d;
	size_t			 i, n = 0;

	ck_assert_ptr_nonnull(d = image_decoder_new());
	for (i = 0; i < nfixtures; i++) {
		if (!fixtures[i].good)
			continue;
		check_region(d, &fixtures[i], 0, 0, fixtures[i].width,
		    fixtures[i].height);
		n++;
	}
	ck_assert_uint_ge(n, 25);
	image_decoder_free(d);
}
END_TEST

START_TEST(test_regions_equal_pil)
{
	struct image_decoder	*d;
	const struct fixture	*f;
	uint64_t		 seed = 18;
	uint32_t		 x, y, w, h, W, H;
	size_t			 i;
	int			 k;

	ck_assert_ptr_nonnull(d = image_decoder_new());
	for (i = 0; i < nfixtures; i++) {
		f = &fixtures[i];
		if (!f->good)
			continue;
		W = f->width;
		H = f->height;
		/* The edges: first and last column and row, one pixel. */
		check_region(d, f, 0, 0, 1, H);
		check_region(d, f, W - 1, 0, 1, H);
		check_region(d, f, 0, H - 1, W, 1);
		check_region(d, f, W - 1, H - 1, 1, 1);
		check_region(d, f, W / 2, H / 2, W - W / 2, H - H / 2);
		for (k = 0; k < REGIONS; k++) {
			w = 1 + next_random(&seed) % W;
			h = 1 + next_random(&seed) % H;
			x = next_random(&seed) % (W - w + 1);
			y = next_random(&seed) % (H - h + 1);
			check_region(d, f, x, y, w, h);
		}
	}
	image_decoder_free(d);
}
END_TEST

/* Every column span and every row span of each JPEG: the crop's margin
 * and alignment, and skipping, at every offset. */
START_TEST(test_every_span_of_jpegs_equals_pil)
{
	struct image_decoder	*d;
	const struct fixture	*f;
	uint32_t		 a, n, W, H;
	size_t			 i;

	ck_assert_ptr_nonnull(d = image_decoder_new());
	for (i = 0; i < nfixtures; i++) {
		f = &fixtures[i];
		if (!f->good || strstr(f->name, ".jpg") == NULL)
			continue;
		W = f->width;
		H = f->height;
		for (a = 0; a < W; a++)
			for (n = 1; n <= W - a; n++)
				check_region(d, f, a, 0, n, H);
		for (a = 0; a < H; a++)
			for (n = 1; n <= H - a; n++)
				check_region(d, f, W / 3, a, W - W / 3, n);
	}
	image_decoder_free(d);
}
END_TEST

START_TEST(test_bad_files_fail_saying_why)
{
	struct image_decoder	*d;
	struct image_info	 info;
	const struct fixture	*f;
	uint8_t			*out;
	size_t			 i, n = 0;
	int			 rc;

	ck_assert_ptr_nonnull(d = image_decoder_new());
	out = malloc(1 << 20);
	ck_assert_ptr_nonnull(out);
	for (i = 0; i < nfixtures; i++) {
		f = &fixtures[i];
		if (f->good)
			continue;
		n++;
		rc = image_open(d, f->data, f->len, &info);
		if (strcmp(f->phase, "open") == 0) {
			ck_assert_msg(rc == -1, "%s: opened", f->name);
		} else {
			ck_assert_msg(rc == 0, "%s: %s", f->name,
			    image_decoder_error(d));
			ck_assert(info.width * info.height * 3 <= 1 << 20);
			rc = image_decode_region(d, 0, 0, info.width,
			    info.height, out, (size_t)info.width * 3);
			ck_assert_msg(rc == -1, "%s: decoded", f->name);
		}
		ck_assert_msg(strstr(image_decoder_error(d), f->phrase) !=
		    NULL, "%s: error '%s', not '%s'", f->name,
		    image_decoder_error(d), f->phrase);
	}
	ck_assert_uint_ge(n, 8);
	free(out);
	image_decoder_free(d);
}
END_TEST

/* Every cut of a file fails or gives PIL's pixels, never others. */
static void
check_prefixes(struct image_decoder *d, const struct fixture *f)
{
	struct image_info	 info;
	size_t			 len, step = f->len / 300 + 1;
	size_t			 full = (size_t)f->width * f->height * 3;
	uint8_t			*out, *copy;
	int			 ok = 0;

	out = malloc(full);
	ck_assert_ptr_nonnull(out);
	for (len = 0; len <= f->len; len += len + step > f->len &&
	    len < f->len ? f->len - len : step) {
		/* A copy of exactly @len bytes, so ASan sees overreads. */
		copy = malloc(len ? len : 1);
		ck_assert_ptr_nonnull(copy);
		memcpy(copy, f->data, len);
		if (image_open(d, copy, len, &info) == 0 &&
		    image_decode_region(d, 0, 0, info.width, info.height,
		    out, (size_t)info.width * 3) == 0) {
			if (memcmp(out, f->expected, full) != 0)
				ck_abort_msg("%s cut at %zu of %zu: wrong "
				    "pixels", f->name, len, f->len);
			ok++;
		} else if (image_decoder_error(d)[0] == '\0')
			ck_abort_msg("%s cut at %zu: no error phrase", f->name,
			    len);
		free(copy);
		if (len == f->len)
			break;
	}
	ck_assert_msg(ok > 0, "%s: not even the whole file decodes", f->name);
	free(out);
}

START_TEST(test_cut_files_never_give_wrong_pixels)
{
	struct image_decoder	*d;
	size_t			 i;

	ck_assert_ptr_nonnull(d = image_decoder_new());
	for (i = 0; i < nfixtures; i++)
		if (fixtures[i].good)
			check_prefixes(d, &fixtures[i]);
	image_decoder_free(d);
}
END_TEST

/* The named fixture. */
static const struct fixture *
fixture(const char *name)
{
	size_t	i;

	for (i = 0; i < nfixtures; i++)
		if (strcmp(fixtures[i].name, name) == 0)
			return (&fixtures[i]);
	ck_abort_msg("no fixture %s", name);
	return (NULL);
}

START_TEST(test_one_decoder_survives_errors_and_abandoned_images)
{
	struct image_decoder	*d;
	struct image_info	 info;
	const struct fixture	*bad, *jpg, *png;
	uint8_t			*out;
	size_t			 i;

	ck_assert_ptr_nonnull(d = image_decoder_new());
	ck_assert_ptr_nonnull(out = malloc(1 << 20));
	jpg = fixture("jprog-odd.jpg");
	png = fixture("p8-oob.png");
	for (i = 0; i < nfixtures; i++) {
		bad = &fixtures[i];
		if (bad->good)
			continue;
		if (image_open(d, bad->data, bad->len, &info) == 0)
			ck_assert_int_eq(image_decode_region(d, 0, 0,
			    info.width, info.height, out,
			    (size_t)info.width * 3), -1);
		check_region(d, jpg, 3, 5, 20, 9);
		/* Opened and left: the next open forgets it. */
		ck_assert_int_eq(image_open(d, jpg->data, jpg->len, &info), 0);
		ck_assert_int_eq(image_open(d, png->data, png->len, &info), 0);
		check_region(d, png, 1, 2, 7, 3);
		check_region(d, fixture("jcmyk.jpg"), 0, 0, 34, 22);
	}
	free(out);
	image_decoder_free(d);
}
END_TEST

START_TEST(test_misuse_refused)
{
	struct image_decoder	*d;
	struct image_info	 info;
	const struct fixture	*f;
	uint8_t			 out[64 * 3];

	ck_assert_ptr_nonnull(d = image_decoder_new());
	ck_assert_str_eq(image_decoder_error(d), "");
	ck_assert_int_eq(image_decode_region(d, 0, 0, 1, 1, out, 3), -1);
	ck_assert_str_eq(image_decoder_error(d), "no image open");

	f = fixture("j420-even.jpg");
	ck_assert_int_eq(image_open(d, f->data, f->len, &info), 0);
	ck_assert_int_eq(image_decode_region(d, 60, 0, 5, 1, out, 15), -1);
	ck_assert_ptr_nonnull(strstr(image_decoder_error(d), "outside"));
	ck_assert_int_eq(image_decode_region(d, 0, 0, 1, 1, out, 3), -1);
	ck_assert_ptr_nonnull(strstr(image_decoder_error(d),
	    "already decoded"));

	ck_assert_int_eq(image_open(d, f->data, f->len, &info), 0);
	ck_assert_int_eq(image_decode_region(d, 0, 0, 0, 1, out, 3), -1);
	ck_assert_int_eq(image_open(d, f->data, f->len, &info), 0);
	ck_assert_int_eq(image_decode_region(d, UINT32_MAX, 0, 2, 1, out, 6),
	    -1);
	ck_assert_int_eq(image_open(d, f->data, f->len, &info), 0);
	ck_assert_int_eq(image_decode_region(d, 0, UINT32_MAX, 1, 2, out, 3),
	    -1);
	ck_assert_int_eq(image_open(d, f->data, f->len, &info), 0);
	ck_assert_int_eq(image_decode_region(d, 0, 0, 4, 1, out, 11), -1);
	ck_assert_ptr_nonnull(strstr(image_decoder_error(d), "stride"));
	ck_assert_int_eq(image_open(d, NULL, 0, &info), -1);
	ck_assert_int_eq(info.format, IMAGE_FORMAT_UNKNOWN);
	ck_assert_int_eq(image_open(d, (const uint8_t *)"\xff\xd8", 2, &info),
	    -1);
	ck_assert_str_eq(image_decoder_error(d),
	    "not a JPEG or PNG image (starts with ff d8)");

	/* After all that, still right. */
	check_region(d, f, 0, 0, f->width, f->height);
	image_decoder_free(d);
	image_decoder_free(NULL);
}
END_TEST

/*
 * The memory cap: the hostile images (a 13376 x 13376 interlaced 16-bit
 * RGBA PNG, 1.43 GB decoded whole; a progressive JPEG that size, 1.07 GB
 * of coefficients) are refused at open, before anything is allocated,
 * naming what they need and the cap; without a cap they open (the cap is
 * why); under a small cap every good fixture, progressive and interlaced
 * ones too, still decodes as PIL does.
 */
START_TEST(test_memory_cap_refuses_bombs_at_open)
{
	struct image_decoder	*d;
	struct image_info	 info;
	uint8_t			 png[IMAGE_BOMB_MAX], jpg[IMAGE_BOMB_MAX];
	size_t			 npng, njpg, i;

	npng = image_bomb_png(png);
	njpg = image_bomb_jpeg(jpg);
	ck_assert_ptr_nonnull(d = image_decoder_new());
	ck_assert_int_eq(image_open(d, png, npng, &info), 0);
	ck_assert_int_eq(image_open(d, jpg, njpg, &info), 0);
	ck_assert_uint_eq(info.width, IMAGE_BOMB_SIDE);

	image_decoder_set_memory_max(d, 256u << 20);
	ck_assert_int_eq(image_open(d, png, npng, &info), -1);
	ck_assert_str_eq(image_decoder_error(d), "image needs 1366 MiB to "
	    "decode (an interlaced PNG is decoded whole), above "
	    "image_memory_max (256 MiB)");
	ck_assert_int_eq(image_open(d, jpg, njpg, &info), -1);
	ck_assert_str_eq(image_decoder_error(d), "image needs 1024 MiB to "
	    "decode (a progressive JPEG keeps the whole image's "
	    "coefficients), above image_memory_max (256 MiB)");

	image_decoder_set_memory_max(d, 16u << 20);
	for (i = 0; i < nfixtures; i++) {
		if (fixtures[i].good)
			check_region(d, &fixtures[i], 0, 0, fixtures[i].width,
			    fixtures[i].height);
	}
	image_decoder_free(d);
}
END_TEST

static Suite *
image_decode_suite(void)
{
	Suite	*s = suite_create("image-decode");
	TCase	*tc;

	tc = tcase_create("pil");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_full_decodes_equal_pil);
	tcase_add_test(tc, test_regions_equal_pil);
	tcase_add_test(tc, test_every_span_of_jpegs_equals_pil);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_bad_files_fail_saying_why);
	tcase_add_test(tc, test_cut_files_never_give_wrong_pixels);
	tcase_add_test(tc, test_one_decoder_survives_errors_and_abandoned_images);
	tcase_add_test(tc, test_misuse_refused);
	tcase_add_test(tc, test_memory_cap_refuses_bombs_at_open);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	load_fixtures();
	return (run_suite(image_decode_suite()));
}
