/* SPDX-License-Identifier: MIT */
/*
 * Tests for daemon/dataset.c and the readers: every reader opens good
 * files and hands back the right bytes and labels, and refuses bad ones
 * with a message that names the file and what is wrong.  Each test makes
 * its files in a fresh directory under one mkdtemp'd for the run, which
 * main() removes whatever happened.
 */

#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <zlib.h>

#include "copy.h"
#include "dataset.h"
#include "runner.h"

#define FASHION_DIR	"/usr/share/datasets/fashion-mnist"

static char	rundir[PATH_MAX];	/* made by main() */
static char	tmpdir[PATH_MAX];	/* made for each test */

/* A fresh directory for the test's files. */
static void
setup(void)
{
	make_test_dir(rundir, tmpdir, sizeof(tmpdir));
}

/* Remove the test's directory and its files. */
static void
teardown(void)
{
	DIR		*d;
	struct dirent	*de;
	char		 p[PATH_MAX];

	if ((d = opendir(tmpdir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (snprintf(p, sizeof p, "%s/%s", tmpdir,
		    de->d_name) < (int)sizeof p)
			unlink(p);
	}
	closedir(d);
	rmdir(tmpdir);
}

/* Path of a file in the test's directory; eight in use at once. */
static const char *
tpath(const char *name)
{
	return (path_in(tmpdir, name));
}

/* Write len bytes to path gzip-compressed; mode "wb" or "ab". */
static void
write_gz(const char *path, const char *mode, const void *data, size_t len)
{
	gzFile	gz;

	gz = gzopen(path, mode);
	ck_assert_ptr_nonnull(gz);
	if (len > 0)
		ck_assert_int_eq(gzwrite(gz, data, (unsigned)len), (int)len);
	ck_assert_int_eq(gzclose(gz), Z_OK);
}

/* Store v big-endian at p. */
static void
put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

/* Pixel j of image i in the IDX fixtures. */
static uint8_t
pixel(uint32_t i, uint32_t j)
{
	return ((uint8_t)(i * 31 + j * 7 + 1));
}

/* Label of image i in the fixtures. */
static uint8_t
label_of(uint32_t i)
{
	return ((uint8_t)(i * 3 % 10));
}

/* An IDX images file of n images of rows x cols; caller frees. */
static uint8_t *
idx_images(uint32_t n, uint32_t rows, uint32_t cols, size_t *len)
{
	uint8_t		*b;
	uint32_t	 i, j;

	*len = 16 + (size_t)n * rows * cols;
	b = malloc(*len);
	ck_assert_ptr_nonnull(b);
	put_be32(b, 0x00000803);
	put_be32(b + 4, n);
	put_be32(b + 8, rows);
	put_be32(b + 12, cols);
	for (i = 0; i < n; i++) {
		for (j = 0; j < rows * cols; j++)
			b[16 + (size_t)i * rows * cols + j] = pixel(i, j);
	}
	return (b);
}

/* An IDX labels file of n labels; caller frees. */
static uint8_t *
idx_labels(uint32_t n, size_t *len)
{
	uint8_t		*b;
	uint32_t	 i;

	*len = 8 + (size_t)n;
	b = malloc(*len);
	ck_assert_ptr_nonnull(b);
	put_be32(b, 0x00000801);
	put_be32(b + 4, n);
	for (i = 0; i < n; i++)
		b[8 + i] = label_of(i);
	return (b);
}

/* A config section from NULL-terminated key, value pairs. */
static struct dataset_conf *
conf_new(const char *name, ...)
{
	struct dataset_conf	*c;
	va_list			 ap;
	const char		*k;

	c = calloc(1, sizeof *c);
	ck_assert_ptr_nonnull(c);
	c->name = strdup(name);
	c->source = strdup("test.conf:1");
	c->kv = calloc(32, sizeof *c->kv);
	ck_assert_ptr_nonnull(c->kv);
	va_start(ap, name);
	while ((k = va_arg(ap, const char *)) != NULL) {
		ck_assert_uint_lt(c->nkv, 32);
		c->kv[c->nkv].key = strdup(k);
		c->kv[c->nkv].value = strdup(va_arg(ap, const char *));
		c->nkv++;
	}
	va_end(ap);
	return (c);
}

/* Free what conf_new() made. */
static void
conf_free(struct dataset_conf *c)
{
	size_t	i;

	for (i = 0; i < c->nkv; i++) {
		free(c->kv[i].key);
		free(c->kv[i].value);
	}
	free(c->kv);
	free(c->name);
	free(c->source);
	free(c);
}

/* Open c, which must work; frees c. */
static struct dataset *
open_ok(struct dataset_conf *c)
{
	struct dataset	*ds;
	char		*cause = NULL;

	ds = dataset_open(c, &cause);
	ck_assert_msg(ds != NULL, "dataset_open failed: %s",
	    cause != NULL ? cause : "(no cause)");
	ck_assert_ptr_null(cause);
	conf_free(c);
	return (ds);
}

/* Open c, which must fail with a cause holding a and b; frees c. */
static void
open_fails(struct dataset_conf *c, const char *a, const char *b)
{
	struct dataset	*ds;
	char		*cause = NULL, prefix[64];

	ds = dataset_open(c, &cause);
	ck_assert_msg(ds == NULL, "dataset_open should have failed");
	ck_assert_ptr_nonnull(cause);
	snprintf(prefix, sizeof prefix, "dataset '%s': ", c->name);
	ck_assert_msg(strncmp(cause, prefix, strlen(prefix)) == 0,
	    "cause '%s' does not start with '%s'", cause, prefix);
	ck_assert_msg(strstr(cause, a) != NULL, "cause '%s' lacks '%s'",
	    cause, a);
	ck_assert_msg(b == NULL || strstr(cause, b) != NULL,
	    "cause '%s' lacks '%s'", cause, b);
	free(cause);
	conf_free(c);
}

/* Check image i of an IDX fixture dataset. */
static void
check_idx_sample(struct dataset *ds, uint32_t i)
{
	uint8_t		buf[256];
	int64_t		label = -1;
	uint32_t	j;

	ck_assert_uint_le(ds->sample_bytes, sizeof buf);
	ck_assert_int_eq(dataset_read(ds, i, buf, &label, false), 0);
	ck_assert_int_eq(label, label_of(i));
	for (j = 0; j < ds->sample_bytes; j++)
		ck_assert_uint_eq(buf[j], pixel(i, j));
}

/* Sizes, names and parsing of every dtype. */
START_TEST(dtype_sizes_names_and_parsing)
{
	enum infeed_dtype	t;

	ck_assert_uint_eq(dtype_size(INFEED_DTYPE_UINT8), 1);
	ck_assert_uint_eq(dtype_size(INFEED_DTYPE_INT32), 4);
	ck_assert_uint_eq(dtype_size(INFEED_DTYPE_INT64), 8);
	ck_assert_uint_eq(dtype_size(INFEED_DTYPE_FLOAT16), 2);
	ck_assert_uint_eq(dtype_size(INFEED_DTYPE_FLOAT32), 4);
	ck_assert_uint_eq(dtype_size(INFEED_DTYPE_FLOAT64), 8);
	ck_assert_uint_eq(dtype_size((enum infeed_dtype)0), 0);
	ck_assert_str_eq(dtype_name(INFEED_DTYPE_FLOAT16), "float16");
	ck_assert_str_eq(dtype_name((enum infeed_dtype)99), "unknown");
	for (t = INFEED_DTYPE_UINT8; t <= INFEED_DTYPE_FLOAT64; t++) {
		enum infeed_dtype	u;

		ck_assert_int_eq(dtype_parse(dtype_name(t), &u), 0);
		ck_assert_int_eq(u, t);
	}
	ck_assert_int_eq(dtype_parse("float", &t), -1);
	ck_assert_int_eq(dtype_parse("", &t), -1);
}
END_TEST

/* A later line of a section overrides an earlier one. */
START_TEST(conf_get_takes_the_last_line_of_a_key)
{
	struct dataset_conf	*c;

	c = conf_new("x", "a", "1", "b", "2", "a", "3", NULL);
	ck_assert_str_eq(dataset_conf_get(c, "a"), "3");
	ck_assert_str_eq(dataset_conf_get(c, "b"), "2");
	ck_assert_ptr_null(dataset_conf_get(c, "c"));
	conf_free(c);
}
END_TEST

/* Shapes are 1 to 8 positive integers and nothing else. */
START_TEST(shape_parse_takes_only_positive_dimensions)
{
	uint64_t	 shape[INFEED_MAX_DIMS];
	uint32_t	 ndim;
	const char	*errstr;

	ck_assert_int_eq(dataset_shape_parse("1,128,128", shape, &ndim,
	    &errstr), 0);
	ck_assert_uint_eq(ndim, 3);
	ck_assert_uint_eq(shape[0], 1);
	ck_assert_uint_eq(shape[2], 128);
	ck_assert_int_eq(dataset_shape_parse(" 3 , 4 ", shape, &ndim,
	    &errstr), 0);
	ck_assert_uint_eq(ndim, 2);
	ck_assert_uint_eq(shape[1], 4);
	ck_assert_int_eq(dataset_shape_parse("1,2,3,4,5,6,7,8", shape, &ndim,
	    &errstr), 0);
	ck_assert_uint_eq(ndim, 8);
	ck_assert_int_eq(dataset_shape_parse("1,2,3,4,5,6,7,8,9", shape,
	    &ndim, &errstr), -1);
	ck_assert_ptr_nonnull(strstr(errstr, "too many"));
	ck_assert_int_eq(dataset_shape_parse("", shape, &ndim, &errstr), -1);
	ck_assert_int_eq(dataset_shape_parse("1,,2", shape, &ndim, &errstr),
	    -1);
	ck_assert_int_eq(dataset_shape_parse("0,2", shape, &ndim, &errstr),
	    -1);
	ck_assert_int_eq(dataset_shape_parse("-1", shape, &ndim, &errstr),
	    -1);
	ck_assert_int_eq(dataset_shape_parse("2,", shape, &ndim, &errstr),
	    -1);
	ck_assert_int_eq(dataset_shape_parse("18446744073709551616", shape,
	    &ndim, &errstr), -1);
	ck_assert_int_eq(dataset_shape_parse("3x4", shape, &ndim, &errstr),
	    -1);
}
END_TEST

/* A plain IDX pair gives the right geometry, bytes and labels. */
START_TEST(idx_plain_reads_geometry_bytes_and_labels)
{
	struct dataset	*ds;
	uint8_t		*img, *lab;
	size_t		 ilen, llen;
	int64_t		 label;
	uint8_t		 buf[32];

	img = idx_images(7, 5, 4, &ilen);
	lab = idx_labels(7, &llen);
	write_file(tpath("img"), img, ilen);
	write_file(tpath("lab"), lab, llen);
	ds = open_ok(conf_new("mnist", "type", "idx", "images", tpath("img"),
	    "labels", tpath("lab"), NULL));
	ck_assert_str_eq(ds->name, "mnist");
	ck_assert_str_eq(ds->type, "idx");
	ck_assert_uint_eq(ds->samples, 7);
	ck_assert_uint_eq(ds->ndim, 3);
	ck_assert_uint_eq(ds->shape[0], 1);
	ck_assert_uint_eq(ds->shape[1], 5);
	ck_assert_uint_eq(ds->shape[2], 4);
	ck_assert_int_eq(ds->dtype, INFEED_DTYPE_UINT8);
	ck_assert_int_eq(ds->label_dtype, INFEED_DTYPE_UINT8);
	ck_assert_uint_eq(ds->sample_bytes, 20);
	ck_assert_uint_eq(ds->classes, 9 + 1);	/* labels 0 3 6 9 2 5 8 */
	ck_assert_str_eq(ds->data_path, tpath("img"));
	ck_assert_str_eq(ds->labels_path, tpath("lab"));
	check_idx_sample(ds, 0);
	check_idx_sample(ds, 3);
	check_idx_sample(ds, 6);
	ck_assert_int_eq(dataset_read(ds, 7, buf, &label, false), -1);
	dataset_free(ds);
	dataset_free(NULL);
	free(img);
	free(lab);
}
END_TEST

/* gzip IDX files, one member or two, read like plain ones. */
START_TEST(idx_gzip_reads_like_plain)
{
	struct dataset	*ds;
	uint8_t		*img, *lab;
	size_t		 ilen, llen;

	/* Large enough that inflate needs several rounds. */
	img = idx_images(300, 16, 16, &ilen);
	lab = idx_labels(300, &llen);
	write_gz(tpath("img.gz"), "wb", img, ilen);
	write_gz(tpath("lab.gz"), "wb", lab, llen);
	write_file(tpath("lab"), lab, llen);

	ds = open_ok(conf_new("mnist", "type", "idx", "images",
	    tpath("img.gz"), "labels", tpath("lab.gz"), NULL));
	ck_assert_uint_eq(ds->samples, 300);
	ck_assert_uint_eq(ds->shape[1], 16);
	ck_assert_uint_eq(ds->sample_bytes, 256);
	ck_assert_uint_eq(ds->classes, 10);
	check_idx_sample(ds, 0);
	check_idx_sample(ds, 1);
	check_idx_sample(ds, 150);
	check_idx_sample(ds, 299);
	dataset_free(ds);

	/* Compressed images, plain labels, 'classes =' given. */
	ds = open_ok(conf_new("mnist", "type", "idx", "images",
	    tpath("img.gz"), "labels", tpath("lab"), "classes", "12", NULL));
	ck_assert_uint_eq(ds->classes, 12);
	check_idx_sample(ds, 77);
	dataset_free(ds);

	/* Two gzip members, as from cat a.gz b.gz. */
	write_gz(tpath("two.gz"), "wb", img, 1000);
	write_gz(tpath("two.gz"), "ab", img + 1000, ilen - 1000);
	ds = open_ok(conf_new("mnist", "type", "idx", "images",
	    tpath("two.gz"), "labels", tpath("lab"), NULL));
	check_idx_sample(ds, 3);
	check_idx_sample(ds, 299);
	dataset_free(ds);

	/* A 'classes =' that a label breaks. */
	open_fails(conf_new("mnist", "type", "idx", "images",
	    tpath("img.gz"), "labels", tpath("lab"), "classes", "5", NULL),
	    tpath("lab"), "is not below 'classes = 5'");
	free(img);
	free(lab);
}
END_TEST

/* Files that are not unsigned-byte IDX files are named. */
START_TEST(idx_refuses_a_bad_magic_naming_it)
{
	uint8_t		*img, *lab;
	size_t		 ilen, llen;

	img = idx_images(7, 5, 4, &ilen);
	lab = idx_labels(7, &llen);
	write_file(tpath("lab"), lab, llen);

	/* The files swapped. */
	write_file(tpath("img"), img, ilen);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("lab"),
	    "labels", tpath("img"), NULL), tpath("lab"),
	    "'images =' names a labels file");
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("img"),
	    "labels", tpath("img"), NULL), tpath("img"),
	    "'labels =' names an images file");

	/* Not IDX at all. */
	write_file(tpath("junk"), "hello, world", 12);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("junk"),
	    "labels", tpath("lab"), NULL), tpath("junk"),
	    "not an IDX file: it starts with 68 65 6c 6c");

	/* IDX, but int32 elements. */
	img[2] = 0x0c;
	write_file(tpath("img32"), img, ilen);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("img32"),
	    "labels", tpath("lab"), NULL), tpath("img32"),
	    "holds int32 elements (IDX type 0x0c)");

	/* Bad magic inside a gzip file. */
	write_gz(tpath("img32.gz"), "wb", img, ilen);
	open_fails(conf_new("mnist", "type", "idx", "images",
	    tpath("img32.gz"), "labels", tpath("lab"), NULL),
	    tpath("img32.gz"), "int32");

	/* Corrupt gzip data: a wrong CRC in the trailer. */
	img[2] = 0x08;
	write_gz(tpath("c.gz"), "wb", img, ilen);
	{
		FILE	*f = fopen(tpath("c.gz"), "r+b");

		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(fseek(f, -8, SEEK_END), 0);
		ck_assert_uint_eq(fwrite("\xde\xad", 1, 2, f), 2);
		ck_assert_int_eq(fclose(f), 0);
	}
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("c.gz"),
	    "labels", tpath("lab"), NULL), tpath("c.gz"),
	    "the gzip data is corrupt: incorrect data check");
	free(img);
	free(lab);
}
END_TEST

/* A file shorter or longer than its header says is refused. */
START_TEST(idx_refuses_a_file_shorter_or_longer_than_its_header)
{
	struct stat	 st;
	uint8_t		*img, *lab, *gz;
	size_t		 ilen, llen;
	FILE		*f;

	img = idx_images(7, 5, 4, &ilen);	/* 140 bytes of data */
	lab = idx_labels(7, &llen);
	write_file(tpath("lab"), lab, llen);

	write_file(tpath("img"), img, 16 + 100);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("img"),
	    "labels", tpath("lab"), NULL), tpath("img"),
	    ": truncated: header says 7 images of 5x4 (140 bytes) but the "
	    "file has 100 bytes of data");

	/* Shorter than its header. */
	write_file(tpath("img"), img, 10);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("img"),
	    "labels", tpath("lab"), NULL), tpath("img"),
	    "less than an IDX header");

	/* Empty. */
	write_file(tpath("img"), img, 0);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("img"),
	    "labels", tpath("lab"), NULL), tpath("img"), "empty");

	/* Too long. */
	f = fopen(tpath("img"), "wb");
	ck_assert_ptr_nonnull(f);
	fwrite(img, 1, ilen, f);
	fwrite("xyz", 1, 3, f);
	fclose(f);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("img"),
	    "labels", tpath("lab"), NULL), tpath("img"),
	    "the file has 143 bytes of data, 3 too many");

	/* A whole gzip stream of too little data. */
	write_gz(tpath("img.gz"), "wb", img, 16 + 100);
	open_fails(conf_new("mnist", "type", "idx", "images",
	    tpath("img.gz"), "labels", tpath("lab"), NULL), tpath("img.gz"),
	    ": truncated: header says 7 images of 5x4 (140 bytes) but the "
	    "file has 100 bytes of data");

	/* A gzip file cut short. */
	write_gz(tpath("full.gz"), "wb", img, ilen);
	ck_assert_int_eq(stat(tpath("full.gz"), &st), 0);
	gz = malloc(st.st_size);
	ck_assert_ptr_nonnull(gz);
	f = fopen(tpath("full.gz"), "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(gz, 1, st.st_size, f), (size_t)st.st_size);
	fclose(f);
	write_file(tpath("cut.gz"), gz, st.st_size / 2);
	open_fails(conf_new("mnist", "type", "idx", "images",
	    tpath("cut.gz"), "labels", tpath("lab"), NULL), tpath("cut.gz"),
	    "gzip stream ends early");
	/* Only the 8-byte trailer missing. */
	write_file(tpath("cut.gz"), gz, st.st_size - 4);
	open_fails(conf_new("mnist", "type", "idx", "images",
	    tpath("cut.gz"), "labels", tpath("lab"), NULL), tpath("cut.gz"),
	    "gzip stream ends early");

	/* A truncated labels file. */
	write_file(tpath("img"), img, ilen);
	write_file(tpath("lab"), lab, llen - 2);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("img"),
	    "labels", tpath("lab"), NULL), tpath("lab"),
	    "truncated: header says 7 labels (7 bytes) but the file has 5");
	free(gz);
	free(img);
	free(lab);
}
END_TEST

/* Images and labels must agree on N; N must not be 0. */
START_TEST(idx_refuses_differing_image_and_label_counts)
{
	uint8_t		*img, *lab;
	size_t		 ilen, llen;

	img = idx_images(7, 5, 4, &ilen);
	lab = idx_labels(6, &llen);
	write_file(tpath("img"), img, ilen);
	write_file(tpath("lab"), lab, llen);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("img"),
	    "labels", tpath("lab"), NULL), "img holds 7 images but ",
	    "lab holds 6 labels");
	free(img);
	free(lab);

	/* A zero dimension. */
	img = idx_images(0, 5, 4, &ilen);
	lab = idx_labels(0, &llen);
	write_file(tpath("img"), img, ilen);
	open_fails(conf_new("mnist", "type", "idx", "images", tpath("img"),
	    "labels", tpath("lab"), NULL), tpath("img"), "is 0");
	free(img);
	free(lab);
}
END_TEST

/* The real Fashion-MNIST training set, when installed. */
START_TEST(idx_reads_installed_fashion_mnist)
{
	struct dataset	*ds;
	uint8_t		 buf[784];
	int64_t		 label;
	uint64_t	 i, sum;

	if (access(FASHION_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0 ||
	    access(FASHION_DIR "/train-labels-idx1-ubyte.gz", R_OK) != 0)
		return;	/* not on this machine: nothing to check */
	ds = open_ok(conf_new("fashion", "type", "idx",
	    "images", FASHION_DIR "/train-images-idx3-ubyte.gz",
	    "labels", FASHION_DIR "/train-labels-idx1-ubyte.gz", NULL));
	ck_assert_uint_eq(ds->samples, 60000);
	ck_assert_uint_eq(ds->ndim, 3);
	ck_assert_uint_eq(ds->shape[0], 1);
	ck_assert_uint_eq(ds->shape[1], 28);
	ck_assert_uint_eq(ds->shape[2], 28);
	ck_assert_uint_eq(ds->sample_bytes, 784);
	ck_assert_uint_eq(ds->classes, 10);
	for (i = 0; i < 60000; i += 5999) {
		ck_assert_int_eq(dataset_read(ds, i, buf, &label, false), 0);
		ck_assert(label >= 0 && label < 10);
	}
	/* The first training image is an ankle boot (class 9), not blank. */
	ck_assert_int_eq(dataset_read(ds, 0, buf, &label, false), 0);
	ck_assert_int_eq(label, 9);
	for (sum = 0, i = 0; i < sizeof buf; i++)
		sum += buf[i];
	ck_assert_uint_gt(sum, 0);
	dataset_free(ds);
}
END_TEST

/* Value v as element type t at dst. */
static void
put_elem(uint8_t *dst, enum infeed_dtype t, uint32_t v)
{
	uint16_t	u16 = (uint16_t)v;
	int32_t		i32 = (int32_t)v;
	int64_t		i64 = v;
	float		f = (float)v;
	double		d = v;

	switch (t) {
	case INFEED_DTYPE_UINT8:
		*dst = (uint8_t)v;
		break;
	case INFEED_DTYPE_INT32:
		memcpy(dst, &i32, 4);
		break;
	case INFEED_DTYPE_INT64:
		memcpy(dst, &i64, 8);
		break;
	case INFEED_DTYPE_FLOAT16:
		memcpy(dst, &u16, 2);
		break;
	case INFEED_DTYPE_FLOAT32:
		memcpy(dst, &f, 4);
		break;
	case INFEED_DTYPE_FLOAT64:
		memcpy(dst, &d, 8);
		break;
	}
}

/* raw records of every dtype, with every label dtype. */
START_TEST(raw_reads_every_dtype_and_label_dtype)
{
	static const enum infeed_dtype	 ltypes[] = {
		INFEED_DTYPE_UINT8, INFEED_DTYPE_INT32, INFEED_DTYPE_INT64
	};
	struct dataset		*ds;
	enum infeed_dtype		 t, lt;
	uint8_t			 data[5 * 6 * 8], labels[5 * 8];
	uint8_t			 buf[6 * 8], want[8];
	size_t			 es, i, j;
	int64_t			 label;

	for (t = INFEED_DTYPE_UINT8; t <= INFEED_DTYPE_FLOAT64; t++) {
		lt = ltypes[t % 3];
		es = dtype_size(t);
		for (i = 0; i < 5; i++) {
			for (j = 0; j < 6; j++)
				put_elem(data + (i * 6 + j) * es, t,
				    (uint32_t)(i * 10 + j));
			put_elem(labels + i * dtype_size(lt), lt,
			    (uint32_t)(4 - i));
		}
		write_file(tpath("data"), data, 5 * 6 * es);
		write_file(tpath("labels"), labels, 5 * dtype_size(lt));
		ds = open_ok(conf_new("r", "type", "raw", "path", tpath("data"),
		    "shape", "2,3", "dtype", dtype_name(t), "labels",
		    tpath("labels"), "label_dtype", dtype_name(lt), NULL));
		ck_assert_uint_eq(ds->samples, 5);
		ck_assert_uint_eq(ds->ndim, 2);
		ck_assert_uint_eq(ds->sample_bytes, 6 * es);
		ck_assert_int_eq(ds->dtype, t);
		ck_assert_int_eq(ds->label_dtype, lt);
		ck_assert_uint_eq(ds->classes, 5);
		for (i = 0; i < 5; i++) {
			ck_assert_int_eq(dataset_read(ds, i, buf, &label, false), 0);
			ck_assert_int_eq(label, 4 - (int64_t)i);
			for (j = 0; j < 6; j++) {
				put_elem(want, t, (uint32_t)(i * 10 + j));
				ck_assert_mem_eq(buf + j * es, want, es);
			}
		}
		dataset_free(ds);
	}

	/* label_dtype defaults to int64. */
	for (i = 0; i < 5; i++)
		put_elem(labels + i * 8, INFEED_DTYPE_INT64, (uint32_t)i);
	write_file(tpath("labels"), labels, 5 * 8);
	write_file(tpath("data"), data, 5 * 6);
	ds = open_ok(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "6", "dtype", "uint8", "labels", tpath("labels"),
	    "classes", "7", NULL));
	ck_assert_int_eq(ds->label_dtype, INFEED_DTYPE_INT64);
	ck_assert_uint_eq(ds->classes, 7);
	ck_assert_str_eq(ds->data_path, tpath("data"));
	ck_assert_str_eq(ds->labels_path, tpath("labels"));
	ck_assert_int_eq(dataset_read(ds, 3, buf, &label, false), 0);
	ck_assert_int_eq(label, 3);
	dataset_free(ds);
}
END_TEST

/* raw files of the wrong size, and bad keys, are refused. */
START_TEST(raw_refuses_wrong_sizes_and_bad_keys)
{
	uint8_t		data[100], labels[80];
	int64_t		neg = -1;

	memset(data, 1, sizeof data);
	memset(labels, 0, sizeof labels);
	write_file(tpath("data"), data, 100);
	write_file(tpath("labels"), labels, 10 * 8);

	/* 100 bytes is not a whole number of 3x4 float32 records. */
	open_fails(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "3,4", "dtype", "float32", "labels", tpath("labels"),
	    NULL), tpath("data"), "100 bytes is not a whole number of "
	    "records of float32 3x4 (48 bytes each)");

	/* 10 records, but labels for 10 int32 are 40 bytes, not 80. */
	open_fails(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "10", "dtype", "uint8", "labels", tpath("labels"),
	    "label_dtype", "int32", NULL), tpath("labels"),
	    "holds 80 bytes where 10 labels of int32");
	write_file(tpath("labels"), labels, 9 * 8);
	open_fails(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "10", "dtype", "uint8", "labels", tpath("labels"),
	    NULL), tpath("labels"), "holds 72 bytes where 10 labels of int64");

	/* Bad keys. */
	open_fails(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "10", "dtype", "complex64", "labels", tpath("labels"),
	    NULL), "'dtype = complex64' is not a type", NULL);
	open_fails(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "10,0", "dtype", "uint8", "labels", tpath("labels"),
	    NULL), "'shape = 10,0'", "positive");
	open_fails(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "10", "dtype", "uint8", "labels", tpath("labels"),
	    "label_dtype", "float32", NULL), "'label_dtype = float32'", NULL);
	open_fails(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "10", "dtype", "uint8", "labels", tpath("labels"),
	    "classes", "0", NULL), "'classes = 0'", NULL);
	open_fails(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "4294967296,4294967296", "dtype", "float64", "labels",
	    tpath("labels"), NULL), "too large", NULL);
	open_fails(conf_new("r", "type", "raw", "path", tpath("nonesuch"),
	    "shape", "10", "dtype", "uint8", "labels", tpath("labels"),
	    NULL), tpath("nonesuch"), "cannot open: No such file");

	/* A negative label. */
	memcpy(labels + 8 * 4, &neg, 8);
	write_file(tpath("labels"), labels, 10 * 8);
	open_fails(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "10", "dtype", "uint8", "labels", tpath("labels"),
	    NULL), tpath("labels"), "label -1 of sample 4 is negative");
}
END_TEST

/* Write a .npy file with header dict and data; version 1, 2 or 3. */
static void
write_npy(const char *path, int version, const char *dict, const void *data,
    size_t len)
{
	uint8_t		*b;
	size_t		 pre = version == 1 ? 10 : 12, hlen, total;

	hlen = strlen(dict) + 1;
	hlen += (64 - (pre + hlen) % 64) % 64;
	total = pre + hlen + len;
	b = malloc(total);
	ck_assert_ptr_nonnull(b);
	memcpy(b, "\x93NUMPY", 6);
	b[6] = (uint8_t)version;
	b[7] = 0;
	b[8] = hlen & 0xff;
	b[9] = (hlen >> 8) & 0xff;
	if (version != 1) {
		b[10] = (hlen >> 16) & 0xff;
		b[11] = (hlen >> 24) & 0xff;
	}
	memset(b + pre, ' ', hlen);
	memcpy(b + pre, dict, strlen(dict));
	b[pre + hlen - 1] = '\n';
	if (len > 0)
		memcpy(b + pre + hlen, data, len);
	write_file(path, b, total);
	free(b);
}

/* Three float32 samples of 1x4x4 and their int64 labels. */
static void
npy_fixture(float *x, int64_t *y)
{
	int	i;

	for (i = 0; i < 48; i++)
		x[i] = (float)i * 0.5f;
	y[0] = 2;
	y[1] = 0;
	y[2] = 1;
}

/* .npy files with version 1, 2 and 3 headers. */
/*
 * A client's files by descriptor: the npy reader's checks, read only when
 * mapped, and the descriptor's offset (the client's too) never moved.
 */
START_TEST(npy_files_by_descriptor)
{
	struct dataset_files	 spec = { 0 };
	struct dataset		*ds;
	float			 x[48], got[16];
	int64_t			 y[3], label;
	char			*cause = NULL;
	bool			 content;
	uint64_t		 i;
	int			 fd, lfd, w, m;

	npy_fixture(x, y);
	write_npy(tpath("x.npy"), 1, "{'descr': '<f4', 'fortran_order': "
	    "False, 'shape': (3, 1, 4, 4), }", x, sizeof x);
	write_npy(tpath("y.npy"), 1, "{'descr': '<i8', 'fortran_order': "
	    "False, 'shape': (3,), }", y, sizeof y);
	spec.data_format = DATASET_FORMAT_NPY;
	spec.labels_format = DATASET_FORMAT_NPY;

	/* Checked only: no mapping to read. */
	ck_assert_int_ne(fd = open(tpath("x.npy"), O_RDONLY), -1);
	ck_assert_int_ne(lfd = open(tpath("y.npy"), O_RDONLY), -1);
	ds = dataset_open_files("mine", &spec, fd, lfd, false, NULL, &cause);
	ck_assert_msg(ds != NULL, "%s", cause);
	ck_assert_uint_eq(ds->samples, 3);
	/* A client's labels are not scanned (issue 24): classes unknown. */
	ck_assert_uint_eq(ds->classes, 0);
	ck_assert_int_eq(dataset_read(ds, 0, got, &label, false), -1);
	dataset_free(ds);

	/*
	 * Read: the bytes and labels, and the offset still 0, whether the
	 * files are mapped whole, in part (the rest read with pread) or
	 * not at all (the daemon would not have the workers map them).
	 */
	for (m = 0; m < 3; m++) {
		spec.map_data = m == 0 ? DATASET_MAP_ALL : m == 1 ? 200 : 0;
		spec.map_labels = m == 0 ? DATASET_MAP_ALL : m == 1 ? 140 : 0;
		ck_assert_int_ne(fd = open(tpath("x.npy"), O_RDONLY), -1);
		ck_assert_int_ne(lfd = open(tpath("y.npy"), O_RDONLY), -1);
		ck_assert_int_ne(w = dup(fd), -1);
		ds = dataset_open_files("mine", &spec, fd, lfd, true, NULL,
		    &cause);
		ck_assert_msg(ds != NULL, "%s", cause);
		for (i = 0; i < 3; i++) {
			dataset_job_begin();
			ck_assert_int_eq(dataset_read(ds, i, got, &label,
			    false), 0);
			ck_assert_int_eq(dataset_job_end(NULL), 0);
			ck_assert_int_eq(memcmp(got, x + 16 * i, sizeof got),
			    0);
			ck_assert_int_eq(label, y[i]);
		}
		ck_assert_int_eq(lseek(w, 0, SEEK_CUR), 0);
		dataset_free(ds);
		close(w);
	}
	spec.map_data = spec.map_labels = 0;

	/* Content refused as content, the descriptor as the descriptor. */
	write_npy(tpath("x.npy"), 1, "{'descr': '<f4', 'fortran_order': "
	    "True, 'shape': (3, 1, 4, 4), }", x, sizeof x);
	ck_assert_int_ne(fd = open(tpath("x.npy"), O_RDONLY), -1);
	spec.labels_format = DATASET_FORMAT_NONE;
	ck_assert_ptr_null(dataset_open_files("mine", &spec, fd, -1, false,
	    &content, &cause));
	ck_assert(content);
	ck_assert_ptr_nonnull(strstr(cause, "dataset 'mine': the data file: "
	    "the array is in Fortran order"));
	free(cause);
	ck_assert_int_ne(fd = open(tpath("x.npy"), O_WRONLY), -1);
	ck_assert_ptr_null(dataset_open_files("mine", &spec, fd, -1, false,
	    &content, &cause));
	ck_assert(!content);
	ck_assert_ptr_nonnull(strstr(cause, "O_WRONLY"));
	free(cause);
}
END_TEST

START_TEST(npy_reads_version_1_2_and_3_headers)
{
	struct dataset	*ds;
	float		 x[48], buf[16];
	int64_t		 y[3], label;
	uint8_t		 y8[3] = { 4, 0, 2 };
	int		 i;

	npy_fixture(x, y);
	write_npy(tpath("x.npy"), 1, "{'descr': '<f4', 'fortran_order': "
	    "False, 'shape': (3, 1, 4, 4), }", x, sizeof x);
	write_npy(tpath("y.npy"), 1, "{'descr': '<i8', 'fortran_order': "
	    "False, 'shape': (3,), }", y, sizeof y);
	ds = open_ok(conf_new("n", "type", "npy", "path", tpath("x.npy"),
	    "labels", tpath("y.npy"), NULL));
	ck_assert_uint_eq(ds->samples, 3);
	ck_assert_uint_eq(ds->ndim, 3);
	ck_assert_uint_eq(ds->shape[0], 1);
	ck_assert_uint_eq(ds->shape[1], 4);
	ck_assert_uint_eq(ds->shape[2], 4);
	ck_assert_int_eq(ds->dtype, INFEED_DTYPE_FLOAT32);
	ck_assert_int_eq(ds->label_dtype, INFEED_DTYPE_INT64);
	ck_assert_uint_eq(ds->sample_bytes, 64);
	ck_assert_uint_eq(ds->classes, 3);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(dataset_read(ds, i, buf, &label, false), 0);
		ck_assert_int_eq(label, y[i]);
		ck_assert_mem_eq(buf, x + 16 * i, sizeof buf);
	}
	dataset_free(ds);

	/* Version 2 header, double quotes, no spaces, |u1 labels. */
	write_npy(tpath("x2.npy"), 2, "{\"shape\":(3,16),\"fortran_order\":"
	    "False,\"descr\":\"<f4\"}", x, sizeof x);
	write_npy(tpath("y2.npy"), 3, "{'descr': '|u1', 'fortran_order': "
	    "False, 'shape': (3L,), }", y8, sizeof y8);
	ds = open_ok(conf_new("n", "type", "npy", "path", tpath("x2.npy"),
	    "labels", tpath("y2.npy"), NULL));
	ck_assert_uint_eq(ds->ndim, 1);
	ck_assert_uint_eq(ds->shape[0], 16);
	ck_assert_int_eq(ds->label_dtype, INFEED_DTYPE_UINT8);
	ck_assert_uint_eq(ds->classes, 5);
	ck_assert_int_eq(dataset_read(ds, 2, buf, &label, false), 0);
	ck_assert_int_eq(label, 2);
	ck_assert_mem_eq(buf, x + 32, sizeof buf);
	dataset_free(ds);
}
END_TEST

/* Bad .npy headers and data are refused with the reason. */
START_TEST(npy_refuses_bad_headers_and_data_with_the_reason)
{
	float		 x[48];
	int64_t		 y[3];
	double		 yf[3] = { 0, 1, 2 };

	npy_fixture(x, y);
	write_npy(tpath("y.npy"), 1, "{'descr': '<i8', 'fortran_order': "
	    "False, 'shape': (3,), }", y, sizeof y);

#define NPY_FAILS(dict, data, len, a, b) do {				\
	write_npy(tpath("x.npy"), 1, dict, data, len);			\
	open_fails(conf_new("n", "type", "npy", "path", tpath("x.npy"),	\
	    "labels", tpath("y.npy"), NULL), a, b);			\
} while (0)

	NPY_FAILS("garbage", x, sizeof x, tpath("x.npy"),
	    "where '{' opening the header dict was expected");
	NPY_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1",
	    x, sizeof x, tpath("x.npy"), "not a tuple");
	NPY_FAILS("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 1, "
	    "4, 4), }", x, sizeof x, tpath("x.npy"), "Fortran order");
	NPY_FAILS("{'descr': '>f4', 'fortran_order': False, 'shape': (3, 1, "
	    "4, 4), }", x, sizeof x, tpath("x.npy"), "big-endian");
	NPY_FAILS("{'descr': '<c8', 'fortran_order': False, 'shape': (3, 1, "
	    "4, 4), }", x, sizeof x, tpath("x.npy"), "'<c8' is not supported");
	NPY_FAILS("{'descr': [('a', '<f4')], 'fortran_order': False, "
	    "'shape': (3,), }", x, 12, tpath("x.npy"), "structured");
	NPY_FAILS("{'descr': '<f4', 'shape': (3, 16), }", x, sizeof x,
	    tpath("x.npy"), "no 'fortran_order'");
	NPY_FAILS("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
	    "'shape': (3, 16), }", x, sizeof x, tpath("x.npy"), "twice");
	NPY_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 16), "
	    "'extra': 1}", x, sizeof x, tpath("x.npy"), "unexpected key");
	NPY_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 16)}"
	    " x", x, sizeof x, tpath("x.npy"), "something after its dict");
	NPY_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
	    x, 4, tpath("x.npy"), "holds no samples");
	NPY_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': "
	    "(3,0), }", x, 0, tpath("x.npy"), "makes every sample empty");
	NPY_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': "
	    "(3,1,1,1,1,1,1,1,1,1), }", x, 12, tpath("x.npy"),
	    "more than 9 dimensions");
	NPY_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': "
	    "(99999999999, 99999999999, 99999999999), }", x, 12,
	    tpath("x.npy"), "too large");

	/* Truncated data, and too much of it. */
	NPY_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1, "
	    "4, 4), }", x, sizeof x - 10, tpath("x.npy"), "truncated: header "
	    "says shape (3, 1, 4, 4) of <f4 (192 bytes) but the file has 182 "
	    "bytes of data");
	NPY_FAILS("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, "
	    "4, 4), }", x, sizeof x, tpath("x.npy"), "64 too many");

	/* Not npy, or a truncated prelude. */
	write_file(tpath("x.npy"), "\x93NUMPY\x01\x00\xff\xff{", 11);
	open_fails(conf_new("n", "type", "npy", "path", tpath("x.npy"),
	    "labels", tpath("y.npy"), NULL), tpath("x.npy"),
	    "the header says it is 65535 bytes long but only 1 follow");
	write_file(tpath("x.npy"), "\x93NUMPY\x07\x00\x10\x00", 10);
	open_fails(conf_new("n", "type", "npy", "path", tpath("x.npy"),
	    "labels", tpath("y.npy"), NULL), "version 7.0", NULL);
	write_file(tpath("x.npy"), "PK\x03\x04", 4);
	open_fails(conf_new("n", "type", "npy", "path", tpath("x.npy"),
	    "labels", tpath("y.npy"), NULL), "not a .npy file", NULL);

	/* Labels that do not fit the samples. */
	write_npy(tpath("x.npy"), 1, "{'descr': '<f4', 'fortran_order': "
	    "False, 'shape': (3, 1, 4, 4), }", x, sizeof x);
	write_npy(tpath("y.npy"), 1, "{'descr': '<i8', 'fortran_order': "
	    "False, 'shape': (2,), }", y, 16);
	open_fails(conf_new("n", "type", "npy", "path", tpath("x.npy"),
	    "labels", tpath("y.npy"), NULL), tpath("y.npy"),
	    "labels have shape (2,) where");
	write_npy(tpath("y.npy"), 1, "{'descr': '<i8', 'fortran_order': "
	    "False, 'shape': (3, 1), }", y, sizeof y);
	open_fails(conf_new("n", "type", "npy", "path", tpath("x.npy"),
	    "labels", tpath("y.npy"), NULL), "labels have shape (3, 1)",
	    "needs (3,)");
	write_npy(tpath("y.npy"), 1, "{'descr': '<f8', 'fortran_order': "
	    "False, 'shape': (3,), }", yf, sizeof yf);
	open_fails(conf_new("n", "type", "npy", "path", tpath("x.npy"),
	    "labels", tpath("y.npy"), NULL), tpath("y.npy"),
	    "must be integers");
#undef NPY_FAILS
}
END_TEST

/*
 * Every prefix of a good file, and every byte of its header replaced,
 * is refused or read, never a crash (run under valgrind for over-reads).
 */
START_TEST(npy_survives_every_prefix_and_mangled_header_byte)
{
	struct dataset	*ds;
	struct stat	 st;
	float		 x[48];
	int64_t		 y[3];
	uint8_t		*b, saved;
	char		*cause;
	size_t		 n, i;
	FILE		*f;
	static const uint8_t subst[] = {
		0, '\'', '"', '{', '}', '(', ')', ',', ':', ' ', '9', 0xff
	};
	size_t		 k;

	npy_fixture(x, y);
	write_npy(tpath("y.npy"), 1, "{'descr': '<i8', 'fortran_order': "
	    "False, 'shape': (3,), }", y, sizeof y);
	write_npy(tpath("good.npy"), 1, "{'descr': '<f4', 'fortran_order': "
	    "False, 'shape': (3, 1, 4, 4), }", x, sizeof x);
	ck_assert_int_eq(stat(tpath("good.npy"), &st), 0);
	b = malloc(st.st_size);
	ck_assert_ptr_nonnull(b);
	f = fopen(tpath("good.npy"), "rb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(b, 1, st.st_size, f), (size_t)st.st_size);
	fclose(f);

	for (n = 0; n < (size_t)st.st_size; n++) {
		struct dataset_conf *c;

		write_file(tpath("x.npy"), b, n);
		c = conf_new("n", "type", "npy", "path", tpath("x.npy"),
		    "labels", tpath("y.npy"), NULL);
		cause = NULL;
		ds = dataset_open(c, &cause);
		ck_assert_ptr_null(ds);
		ck_assert_ptr_nonnull(cause);
		free(cause);
		conf_free(c);
	}
	for (i = 0; i < 64 + 10 && i < (size_t)st.st_size; i++) {
		saved = b[i];
		for (k = 0; k < sizeof subst; k++) {
			struct dataset_conf *c;

			b[i] = subst[k];
			write_file(tpath("x.npy"), b, st.st_size);
			c = conf_new("n", "type", "npy", "path",
			    tpath("x.npy"), "labels", tpath("y.npy"), NULL);
			cause = NULL;
			ds = dataset_open(c, &cause);
			ck_assert((ds == NULL) != (cause == NULL));
			dataset_free(ds);
			free(cause);
			conf_free(c);
		}
		b[i] = saved;
	}
	free(b);
}
END_TEST

/* Seconds on the monotonic clock. */
static double
now_s(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

/* Read sample @index of @ds into @buf; how many seconds it took. */
static double
timed_read(const struct dataset *ds, uint64_t index, uint8_t *buf,
    int64_t *label)
{
	double	t0 = now_s();

	ck_assert_int_eq(dataset_read(ds, index, buf, label, false), 0);
	return (now_s() - t0);
}

/*
 * cache = true: a sample is made once, by whichever process reads it
 * first (a worker forked after the open), and every later read, in any
 * of them, copies the same bytes and label as a set without the cache.
 * sample_delay_us stands for the making, so a read that made the sample
 * again would take it.
 */
START_TEST(synthetic_cache_makes_each_sample_once_for_every_worker)
{
	struct dataset	*plain, *cached;
	uint8_t		*want, *got;
	int64_t		 lw, lg;
	pid_t		 pid;
	int		 status;
	uint64_t	 i;

	plain = open_ok(conf_new("s", "type", "synthetic", "samples", "4",
	    "shape", "3,5,7", "seed", "42", NULL));
	cached = open_ok(conf_new("s", "type", "synthetic", "samples", "4",
	    "shape", "3,5,7", "seed", "42", "sample_delay_us", "300000",
	    "cache", "true", NULL));
	want = malloc(plain->sample_bytes);
	got = malloc(plain->sample_bytes);
	ck_assert_ptr_nonnull(want);
	ck_assert_ptr_nonnull(got);

	/* A worker makes sample 2. */
	if ((pid = fork()) == 0) {
		_exit(dataset_read(cached, 2, got, &lg, false) == 0 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_msg(timed_read(cached, 2, got, &lg) < 0.15, "sample 2, "
	    "made by another process, was made again");
	ck_assert_int_eq(dataset_read(plain, 2, want, &lw, false), 0);
	ck_assert_mem_eq(got, want, plain->sample_bytes);
	ck_assert_int_eq(lg, lw);

	/* Made here, then copied; every sample the same as without. */
	ck_assert(timed_read(cached, 3, got, &lg) >= 0.3);
	ck_assert_msg(timed_read(cached, 3, got, &lg) < 0.15, "sample 3 "
	    "was made twice");
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(dataset_read(cached, i, got, &lg, false), 0);
		ck_assert_int_eq(dataset_read(plain, i, want, &lw, false), 0);
		ck_assert_mem_eq(got, want, plain->sample_bytes);
		ck_assert_int_eq(lg, lw);
	}
	dataset_free(cached);
	dataset_free(plain);
	free(want);
	free(got);

	open_fails(conf_new("s", "type", "synthetic", "samples", "4",
	    "shape", "3", "cache", "yes", NULL), "'cache = yes'",
	    "expected true or false");
	/* 2^40 samples of 1 MiB: refused, not mapped. */
	open_fails(conf_new("s", "type", "synthetic", "samples",
	    "1099511627776", "shape", "262144", "cache", "true", NULL),
	    "would take more than half of this host's",
	    "leave the cache out");
}
END_TEST

/* A synthetic sample depends on (seed, index) alone. */
START_TEST(synthetic_sample_depends_on_seed_and_index_alone)
{
	struct dataset	*a, *b;
	uint8_t		*ba, *bb;
	float		 f;
	int64_t		 la, lb;
	size_t		 i;
	uint64_t	 idx[] = { 0, 1, 12345, 99999 };
	size_t		 k;

	a = open_ok(conf_new("s", "type", "synthetic", "samples", "100000",
	    "shape", "3,5,7", "seed", "42", NULL));
	b = open_ok(conf_new("s", "type", "synthetic", "samples", "100000",
	    "shape", "3,5,7", "seed", "42", NULL));
	ck_assert_uint_eq(a->samples, 100000);
	ck_assert_ptr_null(a->data_path);	/* no file to blame */
	ck_assert_ptr_null(a->labels_path);
	ck_assert_int_eq(a->dtype, INFEED_DTYPE_FLOAT32);
	ck_assert_uint_eq(a->classes, 10);
	ck_assert_uint_eq(a->sample_bytes, 3 * 5 * 7 * 4);
	ba = malloc(a->sample_bytes);
	bb = malloc(a->sample_bytes);
	ck_assert_ptr_nonnull(ba);
	ck_assert_ptr_nonnull(bb);

	/* Same (seed, index): same bytes and label, in either dataset. */
	for (k = 0; k < sizeof idx / sizeof idx[0]; k++) {
		ck_assert_int_eq(dataset_read(a, idx[k], ba, &la, false), 0);
		ck_assert_int_eq(dataset_read(b, idx[k], bb, &lb, false), 0);
		ck_assert_mem_eq(ba, bb, a->sample_bytes);
		ck_assert_int_eq(la, lb);
		ck_assert(la >= 0 && la < 10);
		for (i = 0; i < 105; i++) {
			memcpy(&f, ba + i * 4, 4);
			ck_assert(f >= 0.0f && f < 1.0f);
		}
	}
	/* Reading in another order changes nothing. */
	ck_assert_int_eq(dataset_read(b, 1, bb, &lb, false), 0);
	ck_assert_int_eq(dataset_read(b, 0, bb, &lb, false), 0);
	ck_assert_int_eq(dataset_read(a, 0, ba, &la, false), 0);
	ck_assert_mem_eq(ba, bb, a->sample_bytes);
	/* Another index differs. */
	ck_assert_int_eq(dataset_read(b, 1, bb, &lb, false), 0);
	ck_assert(memcmp(ba, bb, a->sample_bytes) != 0);
	dataset_free(b);

	/* Another seed differs. */
	b = open_ok(conf_new("s", "type", "synthetic", "samples", "100000",
	    "shape", "3,5,7", "seed", "43", NULL));
	ck_assert_int_eq(dataset_read(b, 0, bb, &lb, false), 0);
	ck_assert(memcmp(ba, bb, a->sample_bytes) != 0);
	dataset_free(b);
	dataset_free(a);
	free(ba);
	free(bb);
}
END_TEST

/* Synthetic values of each dtype lie in their range. */
START_TEST(synthetic_values_of_each_dtype_lie_in_range)
{
	struct dataset	*ds;
	enum infeed_dtype	 t;
	uint8_t		 buf[37 * 8], seen[256];
	int64_t		 label, i64;
	int32_t		 i32;
	uint16_t	 h;
	double		 d;
	size_t		 i, distinct;
	uint64_t	 s;

	for (t = INFEED_DTYPE_UINT8; t <= INFEED_DTYPE_FLOAT64; t++) {
		ds = open_ok(conf_new("s", "type", "synthetic", "samples", "50",
		    "shape", "37", "dtype", dtype_name(t), "classes", "3",
		    NULL));
		ck_assert_uint_eq(ds->sample_bytes, 37 * dtype_size(t));
		ck_assert_uint_eq(ds->classes, 3);
		memset(seen, 0, sizeof seen);
		for (s = 0; s < 50; s++) {
			ck_assert_int_eq(dataset_read(ds, s, buf, &label, false), 0);
			ck_assert(label >= 0 && label < 3);
			for (i = 0; i < 37; i++) {
				switch (t) {
				case INFEED_DTYPE_UINT8:
					seen[buf[i]] = 1;
					break;
				case INFEED_DTYPE_INT32:
					memcpy(&i32, buf + i * 4, 4);
					ck_assert(i32 >= 0 && i32 < 256);
					seen[i32] = 1;
					break;
				case INFEED_DTYPE_INT64:
					memcpy(&i64, buf + i * 8, 8);
					ck_assert(i64 >= 0 && i64 < 256);
					seen[i64] = 1;
					break;
				case INFEED_DTYPE_FLOAT16:
					/* Below 1.0 (0x3c00), sign clear. */
					memcpy(&h, buf + i * 2, 2);
					ck_assert_uint_lt(h, 0x3c00);
					seen[h >> 8] = 1;
					break;
				case INFEED_DTYPE_FLOAT32:
					break;
				case INFEED_DTYPE_FLOAT64:
					memcpy(&d, buf + i * 8, 8);
					ck_assert(d >= 0.0 && d < 1.0);
					seen[(int)(d * 256)] = 1;
					break;
				}
			}
		}
		for (distinct = 0, i = 0; i < 256; i++)
			distinct += seen[i];
		if (t != INFEED_DTYPE_FLOAT32)
			ck_assert_uint_gt(distinct, 20);
		dataset_free(ds);
	}

	open_fails(conf_new("s", "type", "synthetic", "samples", "0",
	    "shape", "3", NULL), "'samples = 0'", "at least 1");
	open_fails(conf_new("s", "type", "synthetic", "samples", "10",
	    "shape", "3", "seed", "x", NULL), "'seed = x'", NULL);
	/* Numbers are decimal, as everywhere in the configuration. */
	open_fails(conf_new("s", "type", "synthetic", "samples", "10",
	    "shape", "3", "seed", "0x10", NULL), "'seed = 0x10': not a "
	    "non-negative whole number", NULL);
	open_fails(conf_new("s", "type", "synthetic", "samples", "10",
	    "shape", "3", "dtype", "bfloat16", NULL), "'dtype = bfloat16'",
	    NULL);
}
END_TEST

/* An unknown or missing type lists the known ones. */
START_TEST(dataset_refuses_unknown_or_missing_type)
{
	open_fails(conf_new("p", "type", "parquet", "path", "/x", NULL),
	    "unknown type 'parquet'", "idx, raw, npy, synthetic");
	open_fails(conf_new("p", "path", "/x", NULL), "missing 'type ='",
	    "test.conf:1");
}
END_TEST

/* Each reader names the key it is missing. */
START_TEST(dataset_refuses_missing_keys_naming_them)
{
	open_fails(conf_new("m", "type", "idx", "images", "/x", NULL),
	    "missing 'labels ='", "test.conf:1");
	open_fails(conf_new("m", "type", "idx", "labels", "/x", NULL),
	    "missing 'images ='", NULL);
	open_fails(conf_new("m", "type", "idx", "images", "", "labels", "/x",
	    NULL), "empty 'images ='", NULL);
	open_fails(conf_new("m", "type", "raw", "path", "/x", "dtype", "uint8",
	    "labels", "/y", NULL), "missing 'shape ='", NULL);
	open_fails(conf_new("m", "type", "raw", "path", "/x", "shape", "1",
	    "labels", "/y", NULL), "missing 'dtype ='", NULL);
	open_fails(conf_new("m", "type", "raw", "shape", "1", "dtype", "uint8",
	    "labels", "/y", NULL), "missing 'path ='", NULL);
	open_fails(conf_new("m", "type", "raw", "path", "/x", "shape", "1",
	    "dtype", "uint8", NULL), "missing 'labels ='", NULL);
	open_fails(conf_new("m", "type", "npy", "labels", "/y", NULL),
	    "missing 'path ='", NULL);
	open_fails(conf_new("m", "type", "npy", "path", "/x", NULL),
	    "missing 'labels ='", NULL);
	open_fails(conf_new("m", "type", "synthetic", "shape", "3", NULL),
	    "missing 'samples ='", NULL);
	open_fails(conf_new("m", "type", "synthetic", "samples", "3", NULL),
	    "missing 'shape ='", NULL);
	open_fails(conf_new("m", "type", "idx", "images", tpath("none"),
	    "labels", "/y", NULL), tpath("none"), "cannot open");
	open_fails(conf_new("m", "type", "idx", "images", tmpdir,
	    "labels", "/y", NULL), tmpdir, "not a regular file");
}
END_TEST

/*
 * A key the reader does not read (a typo) refuses the dataset, naming the
 * file, the section, the key, the key probably meant and the valid ones.
 */
START_TEST(dataset_refuses_unknown_key_naming_valid_ones)
{
	struct dataset_conf	*c;
	struct dataset		*ds;
	char			*cause = NULL;
	int64_t			 labels[3] = { 0, 1, 2 };

	write_file(tpath("data"), "abcdef", 6);
	write_file(tpath("labels"), labels, sizeof labels);
	c = conf_new("crops", "type", "raw", "path", tpath("data"), "shape",
	    "2", "dtype", "uint8", "labels", tpath("labels"), "clases", "10",
	    NULL);
	ds = dataset_open(c, &cause);
	ck_assert_ptr_null(ds);
	ck_assert_ptr_nonnull(cause);
	ck_assert_str_eq(cause, "dataset 'crops': unknown key 'clases' in "
	    "section [dataset crops] of test.conf:1 (did you mean "
	    "'classes'?); type = raw takes the keys type, path, shape, dtype, "
	    "labels, label_dtype, classes and allow_groups");
	free(cause);
	conf_free(c);
	/* Spelt right, with every key raw takes, it opens. */
	ds = open_ok(conf_new("crops", "type", "raw", "path", tpath("data"),
	    "shape", "2", "dtype", "uint8", "labels", tpath("labels"),
	    "label_dtype", "int64", "classes", "10", "allow_groups", "nogroup",
	    NULL));
	ck_assert_uint_eq(ds->classes, 10);
	dataset_free(ds);

	/* Each type lists its own keys; no guess when none is close. */
	open_fails(conf_new("m", "type", "idx", "image", "/x", "labels", "/y",
	    NULL), "unknown key 'image' in section [dataset m] of test.conf:1 "
	    "(did you mean 'images'?)", "type = idx takes the keys type, "
	    "images, labels, classes and allow_groups");
	open_fails(conf_new("m", "type", "npy", "path", "/x", "labels", "/y",
	    "shape", "3", NULL), "unknown key 'shape' in section [dataset m] "
	    "of test.conf:1; type = npy", "takes the keys type, path, labels, "
	    "classes and allow_groups");
	open_fails(conf_new("m", "type", "synthetic", "samples", "1", "shape",
	    "1", "Seed", "3", NULL), "unknown key 'Seed'", "(did you mean "
	    "'seed'?); type = synthetic takes the keys type, samples, shape, "
	    "dtype, classes, seed, sample_delay_us, cache and allow_groups");
	open_fails(conf_new("m", "type", "synthetic", "samples", "1", "shape",
	    "1", "allow_group", "x", NULL), "unknown key 'allow_group'",
	    "(did you mean 'allow_groups'?)");
	/* Reported before a key it may have been meant for is missing. */
	open_fails(conf_new("m", "type", "synthetic", "sample", "10", "shape",
	    "1", NULL), "unknown key 'sample'", "did you mean 'samples'?");
}
END_TEST

/*
 * A file cut short after the dataset opened (a copy rewritten in place,
 * a full disk): a row that is no longer wholly inside its file, or whose
 * label is not, fails to read.  Bytes past the new end in the last partial
 * page would read as zeros and pages wholly past it would raise SIGBUS;
 * rows before the cut read as they did.
 */

/* Byte j of row i of the truncation fixtures: never zero. */
static uint8_t
cut_byte(uint64_t i, unsigned j)
{
	return ((uint8_t)((i * 7 + j * 13) | 0x80));
}

/* A raw dataset of 1000 rows of 16 bytes and int64 labels i % 10. */
static struct dataset *
cut_raw_open(void)
{
	uint8_t		 data[1000 * 16];
	int64_t		 labels[1000];
	unsigned	 i, j;

	for (i = 0; i < 1000; i++) {
		for (j = 0; j < 16; j++)
			data[i * 16 + j] = cut_byte(i, j);
		labels[i] = i % 10;
	}
	write_file(tpath("data"), data, sizeof data);
	write_file(tpath("labels"), labels, sizeof labels);
	return (open_ok(conf_new("cut", "type", "raw", "path", tpath("data"),
	    "shape", "4,4", "dtype", "uint8", "labels", tpath("labels"),
	    NULL)));
}

/* Row @i of a cut fixture reads whole: its bytes and its label. */
static void
cut_read_ok(struct dataset *ds, uint64_t i, int64_t want_label)
{
	uint8_t		buf[16];
	int64_t		label = -1;
	unsigned	j;

	ck_assert_msg(dataset_read(ds, i, buf, &label, false) == 0, "row %" PRIu64
	    " should read", i);
	ck_assert_int_eq(label, want_label);
	for (j = 0; j < 16; j++)
		ck_assert_uint_eq(buf[j], cut_byte(i, j));
}

/* Row @i of a cut fixture fails to read. */
static void
cut_read_fails(struct dataset *ds, uint64_t i)
{
	uint8_t		buf[64];
	int64_t		label = -1;

	ck_assert_uint_le(ds->sample_bytes, sizeof buf);
	ck_assert_msg(dataset_read(ds, i, buf, &label, false) == -1, "row %" PRIu64
	    " is not wholly inside its file but read", i);
}

/* A client's sparse raw file of @size bytes, as the daemon checks it. */
static struct dataset *
charged_files(uint64_t size)
{
	struct dataset_files	 spec = { 0 };
	struct dataset		*ds;
	char			*cause = NULL;
	int			 fd;

	ck_assert_int_ne(fd = open(tpath("sparse.bin"), O_RDWR | O_CREAT |
	    O_TRUNC, 0600), -1);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	spec.data_format = DATASET_FORMAT_RAW;
	spec.dtype = INFEED_DTYPE_UINT8;
	spec.ndim = 1;
	spec.shape[0] = 1;
	ds = dataset_open_files("mine", &spec, fd, -1, false, NULL, &cause);
	ck_assert_msg(ds != NULL, "%s", cause);
	return (ds);
}

/*
 * Issue 39, item 4: what the workers map of clients' files is charged, at
 * most DATASET_FILES_MAP_UID_MAX a uid and DATASET_FILES_MAP_MAX in all;
 * files past either are read with pread (map_data 0), and freeing a
 * dataset gives its charge back.
 */
START_TEST(client_files_mapped_within_bounds)
{
	struct dataset_files	 spec;
	struct dataset		*ds[8];
	uint64_t		 tib = (uint64_t)1 << 40, all;
	uid_t			 uid;

	/* 3 TiB of uid 1000's: mapped; 3 more: over its 4 TiB. */
	memset(&spec, 0, sizeof(spec));
	ds[0] = charged_files(3 * tib);
	ck_assert(dataset_files_charge(ds[0], 1000, &spec));
	ck_assert_uint_eq(spec.map_data, 3 * tib);
	ck_assert_uint_eq(spec.map_labels, 0);
	ds[1] = charged_files(3 * tib);
	ck_assert(!dataset_files_charge(ds[1], 1000, &spec));
	ck_assert_uint_eq(spec.map_data, 0);
	ck_assert_uint_eq(dataset_charged(1000, &all), 3 * tib);
	ck_assert_uint_eq(all, 3 * tib);
	/* Given back when the first is freed: now the second fits. */
	dataset_free(ds[0]);
	ck_assert_uint_eq(dataset_charged(1000, &all), 0);
	ck_assert_uint_eq(all, 0);
	ck_assert(dataset_files_charge(ds[1], 1000, &spec));
	ck_assert_uint_eq(spec.map_data, 3 * tib);
	dataset_free(ds[1]);

	/* 16 TiB in all: five uids of 3 TiB, and a sixth is read. */
	for (uid = 0; uid < 6; uid++) {
		ds[uid] = charged_files(3 * tib);
		ck_assert(dataset_files_charge(ds[uid], 2000 + uid, &spec) ==
		    (uid < 5));
	}
	ck_assert_uint_eq(dataset_charged(2005, &all), 0);
	ck_assert_uint_eq(all, 15 * tib);
	for (uid = 0; uid < 6; uid++)
		dataset_free(ds[uid]);
	ck_assert_uint_eq(dataset_charged(2000, &all), 0);
	ck_assert_uint_eq(all, 0);
	unlink(tpath("sparse.bin"));
}
END_TEST

/*
 * A client's raw file (fstat'ed, as a client's are) changed under a job:
 * cut, it is seen at the job's end with its new size, and a later read
 * says why it failed; cut and written again to the same size within the
 * job, it is seen as changed too (its ctime), so the rows are read again;
 * untouched, it is not.
 */
START_TEST(client_file_changed_within_a_job_is_seen)
{
	struct dataset_files	 spec = { 0 };
	struct dataset		*ds;
	uint8_t			 data[64 * 16], buf[16];
	char			 why[256];
	char			*cause = NULL;
	uint64_t		 size;
	int64_t			 label;
	unsigned		 i;
	int			 fd;

	for (i = 0; i < sizeof data; i++)
		data[i] = (uint8_t)i;
	write_file(tpath("c.bin"), data, sizeof data);
	spec.data_format = DATASET_FORMAT_RAW;
	spec.labels_format = DATASET_FORMAT_NONE;
	spec.dtype = INFEED_DTYPE_UINT8;
	spec.ndim = 1;
	spec.shape[0] = 16;
	ck_assert_int_ne(fd = open(tpath("c.bin"), O_RDONLY), -1);
	ds = dataset_open_files("mine", &spec, fd, -1, true, NULL, &cause);
	ck_assert_msg(ds != NULL, "%s", cause);

	dataset_job_begin();
	ck_assert_int_eq(dataset_read(ds, 3, buf, &label, false), 0);
	ck_assert_int_eq(dataset_job_end(&size), 0);

	/* Cut and written again, the same bytes: still a change. */
	usleep(20000);		/* past the ctime's clock tick */
	dataset_job_begin();
	ck_assert_int_eq(dataset_read(ds, 3, buf, &label, false), 0);
	ck_assert_int_eq(truncate(tpath("c.bin"), 0), 0);
	write_file(tpath("c.bin"), data, sizeof data);
	ck_assert_int_eq(dataset_job_end(&size), 1);
	ck_assert_uint_eq(size, UINT64_MAX);	/* no smaller now */

	/* Cut: seen with its size; a row past it says why. */
	dataset_job_begin();
	ck_assert_int_eq(dataset_read(ds, 3, buf, &label, false), 0);
	ck_assert_int_eq(truncate(tpath("c.bin"), 40), 0);
	ck_assert_int_eq(dataset_job_end(&size), 1);
	ck_assert_uint_eq(size, 40);
	ck_assert_int_eq(dataset_read(ds, 3, buf, &label, false), -1);
	ck_assert_str_eq(dataset_short_why(why, sizeof why), "the file is 40 "
	    "bytes now, and the sample needs bytes up to 64: it was truncated "
	    "after the session began");
	dataset_free(ds);
}
END_TEST

/* raw: rows cut by a truncation of the data file fail, earlier ones read. */
START_TEST(raw_read_fails_for_rows_past_a_truncated_data_file)
{
	struct dataset	*ds = cut_raw_open();

	cut_read_ok(ds, 900, 0);
	/* 300 rows and half of row 300 are left; page 1 is partial. */
	ck_assert_int_eq(truncate(tpath("data"), 300 * 16 + 8), 0);
	cut_read_ok(ds, 0, 0);
	cut_read_ok(ds, 299, 9);
	cut_read_fails(ds, 300);	/* half inside */
	cut_read_fails(ds, 400);	/* in the partial page: zeros */
	cut_read_fails(ds, 511);
	cut_read_fails(ds, 900);	/* in a page past the end: SIGBUS */
	cut_read_ok(ds, 42, 2);
	dataset_free(ds);
}
END_TEST

/* raw: rows whose labels a truncation cut off fail, earlier ones read. */
START_TEST(raw_read_fails_for_rows_past_a_truncated_labels_file)
{
	struct dataset	*ds = cut_raw_open();

	/* 600 labels and half of label 600 are left; page 1 is partial. */
	ck_assert_int_eq(truncate(tpath("labels"), 600 * 8 + 4), 0);
	cut_read_ok(ds, 599, 9);
	cut_read_fails(ds, 600);
	cut_read_fails(ds, 701);	/* label 1 would read as 0 */
	cut_read_ok(ds, 511, 1);
	dataset_free(ds);
}
END_TEST

/* npy: the same for a .npy file, whose rows start after its header. */
START_TEST(npy_read_fails_for_rows_past_a_truncated_file)
{
	struct dataset	*ds;
	uint8_t		*x, buf[16];
	int64_t		 y[600], label;
	struct stat	 st;
	off_t		 data_off;
	unsigned	 i, j;

	x = malloc(600 * 16);
	ck_assert_ptr_nonnull(x);
	for (i = 0; i < 600; i++) {
		for (j = 0; j < 16; j++)
			x[i * 16 + j] = cut_byte(i, j);
		y[i] = i % 10;
	}
	write_npy(tpath("x.npy"), 1, "{'descr': '|u1', 'fortran_order': "
	    "False, 'shape': (600, 4, 4), }", x, 600 * 16);
	write_npy(tpath("y.npy"), 1, "{'descr': '<i8', 'fortran_order': "
	    "False, 'shape': (600,), }", y, sizeof y);
	free(x);
	ds = open_ok(conf_new("cut", "type", "npy", "path", tpath("x.npy"),
	    "labels", tpath("y.npy"), NULL));
	ck_assert_int_eq(stat(tpath("x.npy"), &st), 0);
	data_off = st.st_size - 600 * 16;
	ck_assert_int_eq(truncate(tpath("x.npy"), data_off + 200 * 16 + 8),
	    0);
	cut_read_ok(ds, 199, 9);
	cut_read_fails(ds, 200);
	cut_read_fails(ds, 240);	/* in the partial page */
	cut_read_fails(ds, 599);	/* in a page past the end */
	/* The labels too: 300 of them left. */
	ck_assert_int_eq(stat(tpath("y.npy"), &st), 0);
	ck_assert_int_eq(truncate(tpath("y.npy"), st.st_size - 300 * 8), 0);
	ck_assert_int_eq(dataset_read(ds, 150, buf, &label, false), 0);
	ck_assert_int_eq(label, 0);
	cut_read_fails(ds, 301);
	dataset_free(ds);
}
END_TEST

/*
 * idx: the same for a plain IDX file; a gzip one was inflated at open, so
 * truncating it afterwards changes nothing.
 */
START_TEST(idx_read_fails_for_rows_past_a_truncated_plain_file)
{
	struct dataset	*ds;
	uint8_t		*img, *lab, buf[16];
	size_t		 ilen, llen;
	int64_t		 label;

	img = idx_images(600, 4, 4, &ilen);
	lab = idx_labels(600, &llen);
	write_file(tpath("img"), img, ilen);
	write_file(tpath("lab"), lab, llen);
	ds = open_ok(conf_new("cut", "type", "idx", "images", tpath("img"),
	    "labels", tpath("lab"), NULL));
	ck_assert_int_eq(truncate(tpath("img"), 16 + 300 * 16 + 8), 0);
	check_idx_sample(ds, 299);
	cut_read_fails(ds, 300);
	cut_read_fails(ds, 400);	/* in the partial page */
	cut_read_fails(ds, 599);	/* in a page past the end */
	ck_assert_int_eq(truncate(tpath("lab"), 8 + 100), 0);
	check_idx_sample(ds, 99);
	cut_read_fails(ds, 100);
	dataset_free(ds);

	write_gz(tpath("img.gz"), "wb", img, ilen);
	write_gz(tpath("lab.gz"), "wb", lab, llen);
	ds = open_ok(conf_new("cut", "type", "idx", "images", tpath("img.gz"),
	    "labels", tpath("lab.gz"), NULL));
	ck_assert_int_eq(truncate(tpath("img.gz"), 10), 0);
	ck_assert_int_eq(truncate(tpath("lab.gz"), 10), 0);
	check_idx_sample(ds, 599);
	ck_assert_int_eq(dataset_read(ds, 0, buf, &label, false), 0);
	dataset_free(ds);
	free(img);
	free(lab);
}
END_TEST

/* Every test, in cases by reader. */
/* 1024 int64 labels of class 0. */
static const uint8_t	zero8k[8192];

/* Kilobytes of the mapping at @base mapped in this process (smaps' Rss). */
static unsigned long
mapped_kb(const void *base)
{
	char		 line[512];
	unsigned long	 kb = 0, lo, hi;
	bool		 in = false;
	FILE		*f;

	ck_assert_ptr_nonnull(f = fopen("/proc/self/smaps", "r"));
	while (fgets(line, sizeof line, f) != NULL) {
		/* A mapping's first line: "lo-hi perms ...". */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			if (in)
				break;
			in = lo == (unsigned long)base;
		} else if (in && sscanf(line, "Rss: %lu kB", &kb) == 1)
			break;
	}
	fclose(f);
	return (kb);
}

/*
 * A worker maps its datasets' pages a chunk a call between jobs: 4 MiB
 * of samples take 4 calls of 1 MiB (and the labels' file one more), each
 * mapping more of them.
 */
START_TEST(populate_maps_a_chunk_a_call)
{
	const struct dataset_pair	*p;
	struct dataset			*ds;
	uint8_t				*data;
	unsigned long			 before;
	int				 calls = 0;
	bool				 more;

	ck_assert_ptr_nonnull(data = calloc(1, 4u << 20));
	write_file(tpath("data"), data, 4u << 20);
	free(data);
	write_file(tpath("labels"), zero8k, sizeof(zero8k));
	ds = open_ok(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "4096", "dtype", "uint8", "labels", tpath("labels"),
	    "classes", "2", NULL));
	p = ds->priv;
	ck_assert_ptr_nonnull(p->data.base);
	ck_assert_uint_lt(mapped_kb(p->data.base), 1024);
	/* The kernel may map a large folio's neighbours at once: more. */
	do {
		before = mapped_kb(p->data.base);
		more = dataset_populate(64u << 20, 1u << 20);
		ck_assert_uint_ge(mapped_kb(p->data.base), before);
		if (calls++ == 0) {
			ck_assert_uint_ge(mapped_kb(p->data.base), 1024);
			ck_assert_uint_lt(mapped_kb(p->data.base), 4096);
		}
	} while (more);
	ck_assert_int_eq(calls, 5);
	ck_assert_uint_eq(mapped_kb(p->data.base), 4096);
	ck_assert(!dataset_populate(64u << 20, 1u << 20));
	dataset_free(ds);
}
END_TEST

/* Over the share of memory given, a worker maps nothing ahead. */
START_TEST(populate_skips_datasets_over_the_share)
{
	const struct dataset_pair	*p;
	struct dataset			*ds;
	uint8_t				*data;

	ck_assert_ptr_nonnull(data = calloc(1, 4u << 20));
	write_file(tpath("data"), data, 4u << 20);
	free(data);
	write_file(tpath("labels"), zero8k, sizeof(zero8k));
	ds = open_ok(conf_new("r", "type", "raw", "path", tpath("data"),
	    "shape", "4096", "dtype", "uint8", "labels", tpath("labels"),
	    "classes", "2", NULL));
	p = ds->priv;
	ck_assert(!dataset_populate(1u << 20, 1u << 20));
	ck_assert_uint_lt(mapped_kb(p->data.base), 1024);
	dataset_free(ds);
}
END_TEST

/*
 * Tokens: 5 documents of lengths 3, 5, 9, 2, 4 (23 tokens), token t of the
 * file being 1000 + t; @bits 16 or 32.  Writes tok.bin and tok.idx.
 */
static void
write_tokens(int bits)
{
	static const uint64_t	b[] = { 0, 3, 8, 17, 19, 23 };
	uint16_t		t16[23];
	uint32_t		t32[23];
	int			i;

	for (i = 0; i < 23; i++) {
		t16[i] = (uint16_t)(1000 + i);
		t32[i] = (uint32_t)(1000 + i);
	}
	if (bits == 16)
		write_file(tpath("tok.bin"), t16, sizeof t16);
	else
		write_file(tpath("tok.bin"), t32, sizeof t32);
	write_file(tpath("tok.idx"), b, sizeof b);
}

/*
 * The rows hold every token once, each piece within one document, with
 * positions restarting at each piece and segments numbering them.
 */
START_TEST(tokens_packs_documents_into_rows)
{
	struct dataset	*ds;
	int32_t		 row[3 * 8];
	uint8_t		 seen[23];
	int64_t		 label;
	uint64_t	 r;
	int		 bits, j, tok, nseg;

	for (bits = 16; bits <= 32; bits += 16) {
		write_tokens(bits);
		ds = open_ok(conf_new("tok", "type", "tokens", "path",
		    tpath("tok.bin"), "index", tpath("tok.idx"), "dtype",
		    bits == 16 ? "uint16" : "uint32", "seq_len", "8", NULL));
		ck_assert_uint_eq(ds->ndim, 2);
		ck_assert_uint_eq(ds->shape[0], 3);
		ck_assert_uint_eq(ds->shape[1], 8);
		ck_assert_int_eq(ds->dtype, INFEED_DTYPE_INT32);
		/* 3 + 5 | 8 (of 9) | 1 + 2 + 4: 3 rows, 23 of 24 tokens. */
		ck_assert_uint_eq(ds->samples, 3);
		memset(seen, 0, sizeof seen);
		for (r = 0; r < ds->samples; r++) {
			ck_assert_int_eq(dataset_read(ds, r, row, &label,
			    false), 0);
			nseg = 0;
			for (j = 0; j < 8; j++) {
				if (row[16 + j] == 0) {	/* padding */
					ck_assert_int_eq(row[j], 0);
					continue;
				}
				tok = row[j] - 1000;
				ck_assert_int_ge(tok, 0);
				ck_assert_int_lt(tok, 23);
				ck_assert(!seen[tok]);
				seen[tok] = 1;
				if (row[8 + j] == 0) {
					nseg++;
					ck_assert_int_eq(row[16 + j], nseg);
				} else {
					/* The same segment, the next token. */
					ck_assert_int_eq(row[16 + j],
					    row[16 + j - 1]);
					ck_assert_int_eq(row[8 + j],
					    row[8 + j - 1] + 1);
					ck_assert_int_eq(row[j], row[j - 1] + 1);
				}
			}
			ck_assert_int_eq(label, nseg);
		}
		for (j = 0; j < 23; j++)
			ck_assert(seen[j]);
		dataset_free(ds);
	}
}
END_TEST

/*
 * Rows longer than the reader's chunk are the same written straight or
 * streamed (the slot past the cache), in every epoch: every token once,
 * positions from each piece's start, padding 0; epochs 0 and 1 differ.
 */
START_TEST(tokens_rows_the_same_streamed_and_each_epoch_once)
{
	enum { SEQ = 3000, DOCS = 40 };
	static uint16_t	 t16[DOCS * 2500];
	static uint64_t	 b[DOCS + 1];
	static uint8_t	 seen[DOCS * 2500];
	struct dataset	*ds;
	int32_t		*plain, *streamed;
	int64_t		 l1, l2;
	uint64_t	 r, e, n = 0, i, differ = 0;
	int		 j;

	for (i = 0; i < DOCS; i++) {
		b[i] = n;
		n += (uint64_t[]){ 1, 700, 1400, 2100, 3500 }[i % 5];
	}
	b[DOCS] = n;
	for (i = 0; i < n; i++)
		t16[i] = (uint16_t)(i + 1);
	write_file(tpath("big.bin"), t16, n * 2);
	write_file(tpath("big.idx"), b, sizeof b);
	ds = open_ok(conf_new("big", "type", "tokens", "path",
	    tpath("big.bin"), "index", tpath("big.idx"), "seq_len", "3000",
	    NULL));
	plain = calloc(3 * SEQ, sizeof(int32_t));
	streamed = calloc(3 * SEQ, sizeof(int32_t));
	ck_assert(plain != NULL && streamed != NULL);
	for (e = 0; e < 2; e++) {
		memset(seen, 0, sizeof seen);
		for (r = 0; r < ds->samples; r++) {
			ck_assert_int_eq(dataset_read_at(ds, r, 9, e, plain, &l1,
			    false), 0);
			ck_assert_int_eq(dataset_read_at(ds, r, 9, e, streamed,
			    &l2, true), 0);
			copy_fence();
			ck_assert(memcmp(plain, streamed, 3 * SEQ * 4) == 0);
			ck_assert_int_eq(l1, l2);
			for (j = 0; j < SEQ; j++) {
				if (plain[2 * SEQ + j] == 0) {
					ck_assert_int_eq(plain[j], 0);
					continue;
				}
				if (seen[plain[j] - 1])
					ck_abort_msg("token %d twice", plain[j]);
				seen[plain[j] - 1] = 1;
				if (plain[SEQ + j] != 0 && plain[j] !=
				    plain[j - 1] + 1)
					ck_abort_msg("row %llu: a piece is not "
					    "consecutive", (unsigned long long)r);
			}
			if (e == 1) {
				ck_assert_int_eq(dataset_read_at(ds, r, 9, 0,
				    streamed, &l2, false), 0);
				differ += memcmp(plain, streamed, SEQ * 4) != 0;
			}
		}
		for (i = 0; i < n; i++)
			ck_assert(seen[i]);
	}
	ck_assert_uint_gt(differ, 0);
	free(plain);
	free(streamed);
	dataset_free(ds);
}
END_TEST

/* Bad files and keys are refused, naming the file and what is wrong. */
START_TEST(tokens_refuses_bad_files_with_the_reason)
{
	static const uint64_t	short_idx[] = { 0, 3, 8, 17, 19, 22 };
	static const uint64_t	not_zero[] = { 1, 3, 23 };
	static const uint64_t	empty_doc[] = { 0, 3, 3, 23 };
	static const uint32_t	big[] = { 5, 0x80000000u };
	static const uint64_t	big_idx[] = { 0, 2 };

	write_tokens(16);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), NULL), "seq_len", NULL);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", "eot", "x", NULL),
	    "both", NULL);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "0", NULL), "seq_len = 0",
	    NULL);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", "dtype", "int8", NULL),
	    "uint16 or uint32", NULL);
	/* 46 bytes as uint32: not whole. */
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", "dtype", "uint32",
	    NULL), "tok.bin", "not a whole number of uint32");
	write_file(tpath("tok.idx"), short_idx, sizeof short_idx);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", NULL), "tok.idx",
	    "ends at token 22, but");
	write_file(tpath("tok.idx"), not_zero, sizeof not_zero);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", NULL), "tok.idx",
	    "starts at token 0");
	write_file(tpath("tok.idx"), empty_doc, sizeof empty_doc);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", NULL), "document 1",
	    "no empty document");
	write_file(tpath("tok.idx"), empty_doc, 12);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", NULL), "tok.idx",
	    "12 bytes is not an index");
	write_file(tpath("big.bin"), big, sizeof big);
	write_file(tpath("big.idx"), big_idx, sizeof big_idx);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("big.bin"),
	    "index", tpath("big.idx"), "seq_len", "8", "dtype", "uint32",
	    NULL), "big.bin", "token 1 is 2147483648");
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("nope.idx"), "seq_len", "8", NULL), "nope.idx",
	    "cannot open");
}
END_TEST

/*
 * Without an index, eot = ends each document (nanoGPT's files): [1 2 7]
 * [3 4 5 6 7] [8 9] at seq_len 4 are pieces of 3, 4, 1 and 2 tokens, in
 * 3 rows; the pieces are whole documents or cut at seq_len.
 */
START_TEST(tokens_documents_end_at_eot_without_an_index)
{
	static const uint16_t	ids[] = { 1, 2, 7, 3, 4, 5, 6, 7, 8, 9 };
	struct dataset		*ds;
	int32_t			 row[3 * 4];
	int64_t			 label, pieces = 0;
	uint64_t		 r;
	int			 j, seen = 0;

	write_file(tpath("eot.bin"), ids, sizeof ids);
	ds = open_ok(conf_new("tok", "type", "tokens", "path",
	    tpath("eot.bin"), "eot", "7", "seq_len", "4", NULL));
	ck_assert_uint_eq(ds->samples, 3);
	for (r = 0; r < ds->samples; r++) {
		ck_assert_int_eq(dataset_read(ds, r, row, &label, false), 0);
		pieces += label;
		for (j = 0; j < 4; j++) {
			if (row[8 + j] == 0)
				continue;
			seen++;
			/* A piece starts at a document's start or its 4th. */
			if (row[4 + j] == 0)
				ck_assert(row[j] == 1 || row[j] == 3 ||
				    row[j] == 7 || row[j] == 8);
		}
	}
	ck_assert_int_eq(seen, 10);
	ck_assert_int_eq(pieces, 4);
	dataset_free(ds);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("eot.bin"),
	    "seq_len", "4", NULL), "no document bounds", "'eot ='");
	write_tokens(16);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("eot.bin"),
	    "index", tpath("tok.idx"), "eot", "7", "seq_len", "4", NULL),
	    "both 'index =' and 'eot ='", NULL);
	/* An eot no uint16 id can be would make the file one document. */
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("eot.bin"),
	    "eot", "100257", "seq_len", "4", NULL), "'eot = 100257'",
	    "no uint16 token id is that large");
}
END_TEST

/*
 * Megatron's .idx of tok.bin's 5 documents as 5 sequences, grouped into
 * documents by @bounds (@nd of them, 0 first, 5 last); code 8 (uint16).
 */
static void
write_megatron_idx(const uint64_t *bounds, uint64_t nd, uint8_t code,
    uint64_t skew)
{
	static const int32_t	lens[] = { 3, 5, 9, 2, 4 };
	uint8_t			buf[256];
	uint64_t		v, ns = 5, i, at = 0;
	size_t			off = 0;

	memcpy(buf, "MMIDIDX\0\0", 9);
	off = 9;
	v = 1;
	memcpy(buf + off, &v, 8);
	off += 8;
	buf[off++] = code;
	memcpy(buf + off, &ns, 8);
	off += 8;
	memcpy(buf + off, &nd, 8);
	off += 8;
	memcpy(buf + off, lens, sizeof lens);
	off += sizeof lens;
	for (i = 0; i < ns; i++) {
		v = at * 2 + (i == 3 ? skew : 0);
		memcpy(buf + off, &v, 8);
		off += 8;
		at += (uint64_t)lens[i];
	}
	memcpy(buf + off, bounds, nd * 8);
	off += nd * 8;
	write_file(tpath("tok.idx"), buf, off);
}

/* Megatron's .idx is read by its magic; documents group sequences. */
START_TEST(tokens_reads_megatron_indexes)
{
	static const uint64_t	each[] = { 0, 1, 2, 3, 4, 5 };
	static const uint64_t	two[] = { 0, 2, 5 };
	static const uint64_t	bad[] = { 0, 3, 2, 5 };
	struct dataset		*ds;
	int32_t			 row[3 * 8];
	int64_t			 label, pieces = 0;
	uint64_t		 r;

	write_tokens(16);
	write_megatron_idx(each, 6, 8, 0);
	ds = open_ok(conf_new("tok", "type", "tokens", "path",
	    tpath("tok.bin"), "index", tpath("tok.idx"), "seq_len", "8",
	    NULL));
	ck_assert_uint_eq(ds->samples, 3);	/* as the plain index's */
	dataset_free(ds);
	/* Documents of 8 and 15 tokens: pieces 8 | 8 | 7, 3 rows. */
	write_megatron_idx(two, 3, 8, 0);
	ds = open_ok(conf_new("tok", "type", "tokens", "path",
	    tpath("tok.bin"), "index", tpath("tok.idx"), "seq_len", "8",
	    NULL));
	ck_assert_uint_eq(ds->samples, 3);
	for (r = 0; r < 3; r++) {
		ck_assert_int_eq(dataset_read(ds, r, row, &label, false), 0);
		pieces += label;
		/* One piece a row: positions run 0.. without a restart. */
		ck_assert_int_eq(label, 1);
		ck_assert_int_eq(row[8 + 6], 6);
	}
	dataset_free(ds);
	write_megatron_idx(two, 3, 4, 0);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", NULL), "tok.idx",
	    "dtype code 4");
	write_megatron_idx(two, 3, 8, 2);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", NULL),
	    "sequence 3 starts at byte 36", "expected byte 34");
	write_megatron_idx(bad, 4, 8, 0);
	open_fails(conf_new("tok", "type", "tokens", "path", tpath("tok.bin"),
	    "index", tpath("tok.idx"), "seq_len", "8", NULL),
	    "document bound 2 is sequence 2", NULL);
}
END_TEST

/* A row past the end of a token file truncated since is an error. */
START_TEST(tokens_read_fails_for_rows_past_a_truncated_file)
{
	struct dataset	*ds;
	int32_t		 row[3 * 8];
	int64_t		 label;

	write_tokens(16);
	ds = open_ok(conf_new("tok", "type", "tokens", "path",
	    tpath("tok.bin"), "index", tpath("tok.idx"), "seq_len", "8",
	    NULL));
	ck_assert_int_eq(truncate(tpath("tok.bin"), 4), 0);
	ck_assert_int_eq(dataset_read(ds, 0, row, &label, false), -1);
	dataset_free(ds);
}
END_TEST

/* A raw source of @n int64 samples, sample i being @base + i. */
static struct dataset_conf *
mix_source_conf(const char *name, uint64_t n, int64_t base,
    const char *shape)
{
	int64_t		v[64], l[64];
	char		data[64], labels[64];
	uint64_t	i;

	ck_assert_uint_le(n, 64);
	for (i = 0; i < n; i++) {
		v[i] = base + (int64_t)i;
		l[i] = 0;
	}
	snprintf(data, sizeof data, "%s.bin", name);
	snprintf(labels, sizeof labels, "%s-labels.bin", name);
	write_file(tpath(data), v, n * sizeof *v);
	write_file(tpath(labels), l, n * sizeof *l);
	return (conf_new(name, "type", "raw", "path", tpath(data), "shape",
	    shape, "dtype", "int64", "labels", tpath(labels), NULL));
}

/* Open a mix with the sections @c[0..n-1] known; frees none of them. */
static struct dataset *
mix_open_with(struct dataset_conf **c, size_t n, struct dataset_conf *mix,
    char **cause)
{
	struct dataset_conf	 all[8];
	struct dataset		*ds;
	size_t			 i;

	for (i = 0; i < n; i++)
		all[i] = *c[i];
	all[n] = *mix;
	dataset_sections(all, n + 1);
	*cause = NULL;
	ds = dataset_open(mix, cause);
	dataset_sections(NULL, 0);
	return (ds);
}

/*
 * 0.7 and 0.3 of a 10-sample and a 3-sample source: every window of 100
 * rows within one row of 70/30, the whole exactly; each source epoch (10,
 * resp. 3 of the source's rows in turn) a permutation of the source; the
 * same rows on a second open; another seed, another order.
 */
START_TEST(mix_draws_in_proportion_and_each_source_epoch_once)
{
	struct dataset_conf	*src[2], *mix;
	struct dataset		*ds, *again;
	char			*cause;
	int64_t			 v, w, label, *seq;
	uint64_t		 i, j, na = 0, nb = 0, win[2];
	uint64_t		 ka = 0, kb = 0, blk[2][10];
	uint64_t		 rows = 2000;

	src[0] = mix_source_conf("a", 10, 1000, "1");
	src[1] = mix_source_conf("b", 3, 2000, "1");
	mix = conf_new("m", "type", "mix", "sources", "a, b", "weights",
	    "0.7, 0.3", "samples", "2000", NULL);
	ds = mix_open_with(src, 2, mix, &cause);
	ck_assert_msg(ds != NULL, "%s", cause);
	again = mix_open_with(src, 2, mix, &cause);
	ck_assert_ptr_nonnull(again);
	ck_assert_uint_eq(ds->samples, rows);
	ck_assert_uint_eq(ds->sample_bytes, 8);
	seq = calloc(rows, sizeof *seq);
	ck_assert_ptr_nonnull(seq);
	for (i = 0; i < rows; i++) {
		ck_assert_int_eq(dataset_read(ds, i, &v, &label, false), 0);
		ck_assert_int_eq(dataset_read(again, i, &w, &label, false), 0);
		ck_assert_int_eq(v, w);
		seq[i] = v;
		if (v < 2000) {
			na++;
			blk[0][ka++ % 10] = (uint64_t)(v - 1000);
			if (ka % 10 == 0) {
				/* A source epoch: each sample once. */
				uint64_t seen = 0;

				for (j = 0; j < 10; j++)
					seen |= (uint64_t)1 << blk[0][j];
				ck_assert_uint_eq(seen, 0x3ff);
			}
		} else {
			nb++;
			blk[1][kb++ % 3] = (uint64_t)(v - 2000);
			if (kb % 3 == 0) {
				uint64_t seen = 0;

				for (j = 0; j < 3; j++)
					seen |= (uint64_t)1 << blk[1][j];
				ck_assert_uint_eq(seen, 0x7);
			}
		}
	}
	ck_assert_uint_eq(na, 1400);
	ck_assert_uint_eq(nb, 600);
	/* Every window of 100 rows: 70 +- 1 of a. */
	for (i = 0; i + 100 <= rows; i++) {
		win[0] = 0;
		for (j = i; j < i + 100; j++)
			win[0] += seq[j] < 2000;
		ck_assert_msg(win[0] >= 69 && win[0] <= 71, "rows %llu..: %llu "
		    "of a in 100", (unsigned long long)i,
		    (unsigned long long)win[0]);
	}
	dataset_free(again);
	conf_free(mix);
	/* Another seed: the same proportions, another order of a. */
	mix = conf_new("m", "type", "mix", "sources", "a, b", "weights",
	    "0.7, 0.3", "samples", "2000", "seed", "9", NULL);
	again = mix_open_with(src, 2, mix, &cause);
	ck_assert_ptr_nonnull(again);
	for (i = 0, j = 0; i < 100; i++) {
		ck_assert_int_eq(dataset_read(again, i, &v, &label, false), 0);
		ck_assert_int_eq(v < 2000, seq[i] < 2000);
		j += v != seq[i];
	}
	ck_assert_uint_gt(j, 0);
	free(seq);
	dataset_free(again);
	dataset_free(ds);
	conf_free(mix);
	conf_free(src[0]);
	conf_free(src[1]);
}
END_TEST

/* What a mix refuses, naming the source and what is wrong. */
START_TEST(mix_refuses_bad_sources_and_weights)
{
	struct dataset_conf	*src[3], *mix;
	struct dataset		*ds;
	char			*cause;
	static const struct {
		const char	*sources, *weights, *a, *b;
	} bad[] = {
		{ "a, nope", "1, 1", "source 'nope'", "section" },
		{ "a, c", "1, 1", "source 'c' has samples of float64 1", NULL },
		{ "a, b", "1", "1 weights for 2 sources", NULL },
		{ "a, b", "1, -1", "weight '-1' of source 'b'", NULL },
		{ "a, b", "1, 0", "weight '0'", NULL },
		{ "a, b", "1, 0.0001", "weight '0.0001'", NULL },
		{ "a, g", "1, 1", "source 'g' has 'allow_groups = root'", NULL },
		{ "a, m", "1, 1", "source 'm' is not another", NULL },
		{ "a, b", "1, 2000000", "period of 2000001", NULL },
	};
	size_t			 i;

	src[0] = mix_source_conf("a", 10, 1000, "1");
	src[1] = conf_new("c", "type", "raw", "path", tpath("a.bin"), "shape",
	    "1", "dtype", "float64", "labels", tpath("a-labels.bin"), NULL);
	src[2] = conf_new("g", "type", "raw", "path", tpath("a.bin"), "shape",
	    "1", "dtype", "int64", "labels", tpath("a-labels.bin"),
	    "allow_groups", "root", NULL);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		mix = conf_new("m", "type", "mix", "sources", bad[i].sources,
		    "weights", bad[i].weights, NULL);
		{
			struct dataset_conf *b = mix_source_conf("b", 3, 2000,
			    "1");
			struct dataset_conf *all[4] = { src[0], src[1],
			    src[2], b };

			ds = mix_open_with(all, 4, mix, &cause);
			conf_free(b);
		}
		ck_assert_msg(ds == NULL, "case %zu opened", i);
		ck_assert_msg(strstr(cause, "dataset 'm': ") == cause &&
		    strstr(cause, bad[i].a) != NULL && (bad[i].b == NULL ||
		    strstr(cause, bad[i].b) != NULL), "case %zu: '%s'", i,
		    cause);
		free(cause);
		conf_free(mix);
	}
	for (i = 0; i < 3; i++)
		conf_free(src[i]);
}
END_TEST

static Suite *
dataset_suite(void)
{
	Suite	*s = suite_create("dataset");
	TCase	*tc;

	tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, dtype_sizes_names_and_parsing);
	tcase_add_test(tc, populate_maps_a_chunk_a_call);
	tcase_add_test(tc, populate_skips_datasets_over_the_share);
	tcase_add_test(tc, conf_get_takes_the_last_line_of_a_key);
	tcase_add_test(tc, shape_parse_takes_only_positive_dimensions);
	tcase_add_test(tc, dataset_refuses_unknown_or_missing_type);
	tcase_add_test(tc, dataset_refuses_missing_keys_naming_them);
	tcase_add_test(tc, dataset_refuses_unknown_key_naming_valid_ones);
	suite_add_tcase(s, tc);

	tc = tcase_create("idx");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, idx_plain_reads_geometry_bytes_and_labels);
	tcase_add_test(tc, idx_gzip_reads_like_plain);
	tcase_add_test(tc, idx_refuses_a_bad_magic_naming_it);
	tcase_add_test(tc,
	    idx_refuses_a_file_shorter_or_longer_than_its_header);
	tcase_add_test(tc, idx_refuses_differing_image_and_label_counts);
	suite_add_tcase(s, tc);

	/* Inflates 26 MB: slow under valgrind. */
	tc = tcase_create("fashion-mnist");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, idx_reads_installed_fashion_mnist);
	suite_add_tcase(s, tc);

	tc = tcase_create("raw");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, raw_reads_every_dtype_and_label_dtype);
	tcase_add_test(tc, raw_refuses_wrong_sizes_and_bad_keys);
	suite_add_tcase(s, tc);

	tc = tcase_create("npy");
	tcase_add_test(tc, npy_files_by_descriptor);
	tcase_add_test(tc, client_files_mapped_within_bounds);
	tcase_add_test(tc, client_file_changed_within_a_job_is_seen);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, npy_reads_version_1_2_and_3_headers);
	tcase_add_test(tc, npy_refuses_bad_headers_and_data_with_the_reason);
	tcase_add_test(tc, npy_survives_every_prefix_and_mangled_header_byte);
	suite_add_tcase(s, tc);

	tc = tcase_create("synthetic");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, synthetic_sample_depends_on_seed_and_index_alone);
	tcase_add_test(tc, synthetic_values_of_each_dtype_lie_in_range);
	tcase_add_test(tc, synthetic_cache_makes_each_sample_once_for_every_worker);
	suite_add_tcase(s, tc);

	tc = tcase_create("tokens");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, tokens_packs_documents_into_rows);
	tcase_add_test(tc, tokens_rows_the_same_streamed_and_each_epoch_once);
	tcase_add_test(tc, tokens_refuses_bad_files_with_the_reason);
	tcase_add_test(tc, tokens_documents_end_at_eot_without_an_index);
	tcase_add_test(tc, tokens_reads_megatron_indexes);
	tcase_add_test(tc, tokens_read_fails_for_rows_past_a_truncated_file);
	suite_add_tcase(s, tc);

	tc = tcase_create("mix");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, mix_draws_in_proportion_and_each_source_epoch_once);
	tcase_add_test(tc, mix_refuses_bad_sources_and_weights);
	suite_add_tcase(s, tc);

	tc = tcase_create("truncated");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, raw_read_fails_for_rows_past_a_truncated_data_file);
	tcase_add_test(tc,
	    raw_read_fails_for_rows_past_a_truncated_labels_file);
	tcase_add_test(tc, npy_read_fails_for_rows_past_a_truncated_file);
	tcase_add_test(tc,
	    idx_read_fails_for_rows_past_a_truncated_plain_file);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every test in a directory of its own, then remove it. */
int
main(void)
{
	return (run_suite_in_dir(dataset_suite(), "test-dataset", rundir,
	    sizeof(rundir)));
}
