/* SPDX-License-Identifier: MIT */
/*
 * Tests for the image readers (reader-imagefolder.c, reader-tar.c) and
 * braces.c: the ImageFolder order rules and errors, brace expansion,
 * the tar headers the indexer must read, webdataset's grouping and every
 * refusal with its message, the bytes a worker reads, and what a shard or
 * a file cut after indexing gives.  Trees and tars are made here, in a
 * fresh directory per test (tar headers by a small writer below).
 */

#include <sys/stat.h>

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

#include "braces.h"
#include "dataset.h"
#include "reader-tar.h"
#include "runner.h"

static char	rundir[PATH_MAX];	/* made by main() */
static char	tmpdir[PATH_MAX];	/* made for each test */

/* A fresh directory for the test's files. */
static void
setup(void)
{
	make_test_dir(rundir, tmpdir, sizeof(tmpdir));
}

/* Remove the test's tree (symlinks are removed, not followed). */
static void
teardown(void)
{
	chmod(tmpdir, 0700);
	remove_tree(tmpdir);
}

/* Path of @rel in the test's directory; eight in use at once. */
static const char *
tpath(const char *rel)
{
	return (path_in(tmpdir, rel));
}

/*
 * @s as a "shards =" value names it: a space, tab, comma, brace or
 * backslash in the path (a checkout under "My Files") escaped with a
 * backslash, as the reader's patterns read them; eight in use at once.
 */
static const char *
shards_escape(const char *s)
{
	static char	buf[8][2 * PATH_MAX];
	static int	next;
	char		*p = buf[next++ % 8], *q = p;

	for (; *s != '\0'; s++) {
		if (strchr(" \t,{}\\", *s) != NULL)
			*q++ = '\\';
		*q++ = *s;
	}
	*q = '\0';
	return (p);
}

/* tpath(@rel) as a "shards =" value. */
static const char *
spath(const char *rel)
{
	return (shards_escape(tpath(rel)));
}

/* Make directory @rel and its parents. */
static void
mkdirs(const char *rel)
{
	char	p[PATH_MAX], *s;

	snprintf(p, sizeof p, "%s", tpath(rel));
	for (s = p + strlen(tmpdir) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		ck_assert(mkdir(p, 0755) == 0 || errno == EEXIST);
		*s = '/';
	}
	ck_assert(mkdir(p, 0755) == 0 || errno == EEXIST);
}

/* Write @len bytes to file @rel. */
static void
put(const char *rel, const void *data, size_t len)
{
	FILE	*f;

	ck_assert_ptr_nonnull(f = fopen(tpath(rel), "wb"));
	if (len > 0)
		ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

/* A file whose content is its own name. */
static void
touch(const char *rel)
{
	put(rel, rel, strlen(rel));
}

/* A config section from key, value pairs ending in NULL. */
static struct dataset_conf *
conf_new(const char *name, ...)
{
	static struct dataset_conf	conf;
	static struct dataset_kv	kv[16];
	va_list				ap;
	const char			*k;

	memset(&conf, 0, sizeof conf);
	conf.name = (char *)name;
	conf.kv = kv;
	va_start(ap, name);
	while ((k = va_arg(ap, const char *)) != NULL) {
		ck_assert_uint_lt(conf.nkv, 16);
		kv[conf.nkv].key = (char *)k;
		kv[conf.nkv].value = va_arg(ap, char *);
		conf.nkv++;
	}
	va_end(ap);
	return (&conf);
}

/* Open what @conf says; it must open. */
static struct dataset *
open_ok(const struct dataset_conf *conf)
{
	struct dataset	*ds;
	char		*cause = NULL;

	ds = dataset_open(conf, &cause);
	ck_assert_msg(ds != NULL, "refused: %s", cause ? cause : "(null)");
	ck_assert(ds->encoded);
	ck_assert_uint_eq(ds->ndim, 0);
	ck_assert_uint_eq(ds->sample_bytes, 0);
	return (ds);
}

/* Open what @conf says; it must be refused with @want in the message. */
static void
open_fails(const struct dataset_conf *conf, const char *want)
{
	struct dataset	*ds;
	char		*cause = NULL;

	ds = dataset_open(conf, &cause);
	ck_assert_msg(ds == NULL, "opened, but should fail with: %s", want);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, want) != NULL,
	    "message \"%s\" lacks \"%s\"", cause, want);
	free(cause);
}

/* The root of the test's tree, "<tmpdir>/<rel>". */
static struct dataset *
folder_open(const char *rel)
{
	return (open_ok(conf_new("imgs", "type", "imagefolder", "root",
	    tpath(rel), NULL)));
}

/* Sample @i must be file @rel (relative to the test dir) of class @label. */
static void
check_sample(const struct dataset *ds, uint64_t i, const char *rel,
    int64_t label)
{
	struct dataset_buf	 buf = { 0 };
	char			 where[PATH_MAX + 8], want[PATH_MAX + 8];
	int64_t			 l = -1;

	snprintf(want, sizeof want, "'%s'", tpath(rel));
	ck_assert_str_eq(dataset_sample_where(ds, i, where, sizeof where),
	    want);
	ck_assert_int_eq(dataset_read_encoded(ds, i, &buf, &l), 0);
	ck_assert_int_eq(l, label);
	ck_assert_uint_eq(buf.len, strlen(rel));
	ck_assert(memcmp(buf.p, rel, buf.len) == 0);
	dataset_buf_free(&buf);
}

/*
 * braceexpand 0.1.7's results, from the reference and its README: padding,
 * steps, both directions, letters along A-Z a-z, lists, nesting, products,
 * literals and escapes.
 */
START_TEST(braces_expand_as_braceexpand)
{
	static const struct {
		const char	*pattern;
		const char	*want;	/* names joined by ' ', or NULL */
	} cases[] = {
		{ "/d/train-{000000..000002}.tar",
		  "/d/train-000000.tar /d/train-000001.tar /d/train-000002.tar" },
		{ "{0..10}", "0 1 2 3 4 5 6 7 8 9 10" },
		{ "{1..010}", "001 002 003 004 005 006 007 008 009 010" },
		{ "{-01..1}", "-01 000 001" },
		{ "{07..10}", "07 08 09 10" },
		{ "{0..-0}", "0" },
		{ "{-0..2}", "0 1 2" },
		{ "{4..1}", "4 3 2 1" },
		{ "{2..-1}", "2 1 0 -1" },
		{ "{1..10..3}", "1 4 7 10" },
		{ "{10..1..-3}", "10 7 4 1" },
		{ "{1..3..0}", "1 2 3" },
		{ "{00..10..5}", "00 05 10" },
		{ "{a..c}", "a b c" },
		{ "{a..g..2}", "a c e g" },
		{ "{Z..a}", "Z a" },
		{ "{b..Y}", "b a Z Y" },
		{ "x{a,b,c}y", "xay xby xcy" },
		{ "index.html{,.backup}", "index.html index.html.backup" },
		{ "python{2.{5..7},3.{2,3}}",
		  "python2.5 python2.6 python2.7 python3.2 python3.3" },
		{ "{a,b}{1,2}", "a1 a2 b1 b2" },
		{ "s{0..1}-{x,y}", "s0-x s0-y s1-x s1-y" },
		{ "a{b}c", "a{b}c" },
		{ "{}", "{}" },
		{ "{a{1,2}}", "{a1} {a2}" },
		{ "{1..}", "{1..}" },
		{ "{1..2..x}", "{1..2..x}" },
		{ "{1\\{2,3}", "1{2 3" },
		{ "\\{1,2\\}", "{1,2}" },
		{ "\\{1,2}", NULL },
		{ "a\\,b", "a,b" },
		{ "plain.tar", "plain.tar" },
		{ "{1{2,3}", NULL },
		{ "a}", NULL },
		{ "{a", NULL },
		{ "{0..9999999}", NULL },
	};
	char		**names, got[512];
	const char	*err;
	size_t		 n, i, j, off;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (cases[i].want == NULL) {
			ck_assert_msg(braces_expand(cases[i].pattern, &names,
			    &n, &err) == -1, "'%s' expanded", cases[i].pattern);
			ck_assert_ptr_nonnull(err);
			continue;
		}
		ck_assert_msg(braces_expand(cases[i].pattern, &names, &n,
		    &err) == 0, "'%s': %s", cases[i].pattern, err);
		got[0] = '\0';
		for (j = 0, off = 0; j < n; j++)
			off += (size_t)snprintf(got + off, sizeof got - off,
			    "%s%s", j ? " " : "", names[j]);
		ck_assert_msg(strcmp(got, cases[i].want) == 0,
		    "'%s' gave '%s', not '%s'", cases[i].pattern, got,
		    cases[i].want);
		braces_free(names, n);
	}
	ck_assert_int_eq(braces_expand("{1{2,3}", &names, &n, &err), -1);
	ck_assert_str_eq(err, "has unbalanced braces");
}
END_TEST

/*
 * Classes in code-point order with hidden ones and symlinks to
 * directories; directories by whole path; files by name; extensions of
 * any case; everything else left out.
 */
START_TEST(imagefolder_orders_as_torchvision)
{
	static const char *const dirs[] = {
		"r/a/sub", "r/a/sub-2", "r/a/sub.1", "r/a/sub/x", "r/a/sub_z",
		"r/.hidden", "r/B", "r/_x", "r/a b", "r/outside",
	};
	static const struct {
		const char	*rel;
		int		 label;
	} want[] = {
		{ "r/.hidden/.jpg", 0 },
		{ "r/B/Z.JPG", 1 },
		{ "r/B/b.Jpeg", 1 },
		{ "r/_x/x.webp", 2 },
		{ "r/a/A.PNG", 3 },
		{ "r/a/b.jpg", 3 },
		{ "r/a/sub/x.tif", 3 },
		{ "r/a/sub-2/x.TIFF", 3 },
		{ "r/a/sub.1/x.bmp", 3 },
		{ "r/a/sub/x/y.pgm", 3 },
		{ "r/a/sub_z/y.ppm", 3 },
		{ "r/a b/x.jpeg", 4 },
		{ "r/link/in.png", 5 },
	};
	static const char *const skipped[] = {
		"r/a/x.jpg.txt", "r/a/jpg", "r/a/x.gif", "r/.hidden/x.JPG.bak",
		"r/file-in-root.jpg",
	};
	struct dataset	*ds;
	size_t		 i;

	for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
		mkdirs(dirs[i]);
	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		if (strncmp(want[i].rel, "r/link/", 7) != 0)
			touch(want[i].rel);
	}
	for (i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
		touch(skipped[i]);
	/* A class that is a symlink to a directory; its path keeps the link. */
	put("r/outside/in.png", "r/link/in.png", strlen("r/link/in.png"));
	ck_assert_int_eq(symlink("outside", tpath("r/link")), 0);
	/* A dangling symlink is no class; one named *.jpg is a file. */
	ck_assert_int_eq(symlink("nowhere", tpath("r/dangling")), 0);

	ds = folder_open("r");
	ck_assert_str_eq(ds->type, "imagefolder");
	ck_assert_uint_eq(ds->classes, 7);
	ck_assert_str_eq(ds->class_names[0], ".hidden");
	ck_assert_str_eq(ds->class_names[1], "B");
	ck_assert_str_eq(ds->class_names[2], "_x");
	ck_assert_str_eq(ds->class_names[3], "a");
	ck_assert_str_eq(ds->class_names[4], "a b");
	ck_assert_str_eq(ds->class_names[5], "link");
	ck_assert_str_eq(ds->class_names[6], "outside");
	ck_assert_uint_eq(ds->samples, sizeof want / sizeof want[0] + 1);
	for (i = 0; i < sizeof want / sizeof want[0]; i++)
		check_sample(ds, i, want[i].rel, want[i].label);
	ck_assert_str_eq(ds->data_path, tpath("r"));
	dataset_free(ds);
}
END_TEST

/* torchvision's two messages, allow_empty, a missing root, bad names. */
START_TEST(imagefolder_refuses_with_torchvisions_words)
{
	struct dataset	*ds;
	char		 want[PATH_MAX + 64], bad[16] = { 'r', '/', 'x', '\xff',
	    '\0' };

	mkdirs("none");
	snprintf(want, sizeof want, "dataset 'imgs': Couldn't find any "
	    "class folder in %s.", tpath("none"));
	open_fails(conf_new("imgs", "type", "imagefolder", "root",
	    tpath("none"), NULL), want);
	touch("none/file.jpg");
	open_fails(conf_new("imgs", "type", "imagefolder", "root",
	    tpath("none"), NULL), want);

	mkdirs("r/a");
	mkdirs("r/b/deep/er");
	mkdirs("r/c");
	mkdirs("r/d");
	touch("r/a/x.jpg");
	touch("r/c/x.txt");
	touch("r/b/deep/er/readme");
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    NULL), "dataset 'imgs': Found no valid file for the classes b, c, "
	    "d. Supported extensions are: .jpg, .jpeg, .png, .ppm, .bmp, "
	    ".pgm, .tif, .tiff, .webp (set 'allow_empty = true'");
	ds = open_ok(conf_new("imgs", "type", "imagefolder", "root",
	    tpath("r"), "allow_empty", "true", NULL));
	ck_assert_uint_eq(ds->classes, 4);
	ck_assert_uint_eq(ds->samples, 1);
	check_sample(ds, 0, "r/a/x.jpg", 0);
	dataset_free(ds);
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    "allow_empty", "yes", NULL), "'allow_empty = yes': expected true "
	    "or false");

	/* Every class empty, even allowed, is no dataset. */
	mkdirs("e/a");
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("e"),
	    "allow_empty", "true", NULL), "no image file");

	open_fails(conf_new("imgs", "type", "imagefolder", "root",
	    tpath("missing"), NULL), "No such file or directory");
	open_fails(conf_new("imgs", "type", "imagefolder", "root",
	    tpath("r/a/x.jpg"), NULL), "Not a directory");
	open_fails(conf_new("imgs", "type", "imagefolder", NULL),
	    "missing 'root ='");

	/* A name Python would sort as surrogates. */
	mkdirs(bad);
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    "allow_empty", "true", NULL), "is not valid UTF-8");
	rmdir(tpath(bad));
	snprintf(bad, sizeof bad, "r/a/\xfe.jpg");
	touch(bad);
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    "allow_empty", "true", NULL), "is not valid UTF-8");
	unlink(tpath(bad));
	/* ... but a file that is no image may be called anything. */
	snprintf(bad, sizeof bad, "r/a/\xfe.txt");
	touch(bad);
	ds = open_ok(conf_new("imgs", "type", "imagefolder", "root",
	    tpath("r"), "allow_empty", "true", NULL));
	dataset_free(ds);
}
END_TEST

/*
 * A symlink cycle is refused, not walked forever; a directory shared by
 * two classes is no cycle, but one reached twice under one class is
 * refused (os.walk would list it twice; a chain of such links doubles the
 * walk at each level).
 */
START_TEST(imagefolder_refuses_a_symlink_cycle)
{
	struct dataset	*ds;
	char		 where[PATH_MAX + 8], want[PATH_MAX + 8];

	mkdirs("r/a/sub");
	mkdirs("r/shared");
	touch("r/a/sub/x.jpg");
	touch("r/shared/s.png");
	ck_assert_int_eq(symlink("../shared", tpath("r/a/s1")), 0);
	ds = folder_open("r");
	ck_assert_uint_eq(ds->samples, 3);
	snprintf(want, sizeof want, "'%s'", tpath("r/a/s1/s.png"));
	ck_assert_str_eq(dataset_sample_where(ds, 0, where, sizeof where),
	    want);
	check_sample(ds, 1, "r/a/sub/x.jpg", 0);
	check_sample(ds, 2, "r/shared/s.png", 1);
	dataset_free(ds);
	ck_assert_int_eq(symlink("../../shared", tpath("r/a/sub/s2")), 0);
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    NULL), "again, reached twice under one class through symlinks");
	unlink(tpath("r/a/sub/s2"));

	ck_assert_int_eq(symlink("..", tpath("r/a/sub/up")), 0);
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    NULL), "is a symlink cycle");
	unlink(tpath("r/a/sub/up"));
	ck_assert_int_eq(symlink(".", tpath("r/shared/self")), 0);
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    NULL), "/self' is a symlink cycle");
}
END_TEST

/*
 * A diamond of directory links, two a level and 30 levels deep (2^30
 * paths), is refused at once, in every follow_symlinks mode.
 */
START_TEST(imagefolder_diamond_of_links_refused_fast)
{
	static const char *const modes[] = { "inside", "all" };
	struct timespec	 t0, t1;
	char		 rel[64], to[64];
	size_t		 m;
	int		 i;
	double		 s;

	mkdirs("r/c");
	touch("r/c/x.jpg");
	for (i = 0; i <= 30; i++) {
		snprintf(rel, sizeof rel, "r/c/L%d", i);
		mkdirs(rel);
	}
	for (i = 0; i < 30; i++) {
		snprintf(to, sizeof to, "../L%d", i + 1);
		snprintf(rel, sizeof rel, "r/c/L%d/a", i);
		ck_assert_int_eq(symlink(to, tpath(rel)), 0);
		snprintf(rel, sizeof rel, "r/c/L%d/b", i);
		ck_assert_int_eq(symlink(to, tpath(rel)), 0);
	}
	for (m = 0; m < sizeof modes / sizeof modes[0]; m++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		/* The first time with the default. */
		open_fails(m == 0 ? conf_new("imgs", "type", "imagefolder",
		    "root", tpath("r"), NULL) : conf_new("imgs", "type",
		    "imagefolder", "root", tpath("r"), "follow_symlinks",
		    modes[m], NULL),
		    "again, reached twice under one class through symlinks");
		clock_gettime(CLOCK_MONOTONIC, &t1);
		s = (double)(t1.tv_sec - t0.tv_sec) +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		ck_assert_msg(s < 1.0, "%s: %.2f s to refuse the diamond",
		    modes[m], s);
	}
}
END_TEST

/* max_directories and max_files bound the walk, with advice. */
START_TEST(imagefolder_walk_capped)
{
	struct dataset	*ds;
	char		 rel[64];
	int		 i;

	for (i = 0; i < 10; i++) {
		snprintf(rel, sizeof rel, "r/c/d%d/x.jpg", i);
		mkdirs(rel);
		rmdir(tpath(rel));
		touch(rel);
	}
	/* 11 directories (the class and its 10), 10 files. */
	ds = open_ok(conf_new("imgs", "type", "imagefolder", "root",
	    tpath("r"), "max_directories", "11", "max_files", "10", NULL));
	ck_assert_uint_eq(ds->samples, 10);
	dataset_free(ds);
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    "max_directories", "10", NULL), "passed max_directories = 10 "
	    "directories");
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    "max_files", "9", NULL), "passed max_files = 9 files");
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    "max_files", "0", NULL), "'max_files = 0'");
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    "follow_symlinks", "yes", NULL), "'follow_symlinks = yes': "
	    "expected inside");
}
END_TEST

/*
 * Whoever writes into the tree cannot make infeedd read outside it: by
 * default a link out of root is refused at indexing, naming it, and an
 * image swapped for such a link after indexing fails to read (EXDEV);
 * links that stay inside work, relative or absolute; none refuses every
 * link; all follows them all, as torchvision.
 */
START_TEST(imagefolder_symlinks_stay_inside_root)
{
	struct dataset_buf	 buf = { 0 };
	struct dataset		*ds;
	int64_t			 label;
	char			 want[PATH_MAX + 64];

	mkdirs("r/a");
	mkdirs("r/b/sub");
	mkdirs("secret/dir");
	touch("r/a/x.jpg");
	touch("r/b/sub/y.jpg");
	touch("secret/s.jpg");
	touch("secret/dir/y.jpg");
	/* Inside: relative and absolute links, to a file and a directory. */
	ck_assert_int_eq(symlink("x.jpg", tpath("r/a/rel.jpg")), 0);
	ck_assert_int_eq(symlink(tpath("r/a/x.jpg"), tpath("r/a/abs.jpg")),
	    0);
	ck_assert_int_eq(symlink(tpath("r/b/sub"), tpath("r/a/dir")), 0);
	ds = folder_open("r");
	ck_assert_uint_eq(ds->samples, 5);	/* abs, rel, x, dir/y, sub/y */
	ck_assert_int_eq(dataset_read_encoded(ds, 0, &buf, &label), 0);
	ck_assert_uint_eq(buf.len, strlen("r/a/x.jpg"));
	ck_assert_int_eq(dataset_read_encoded(ds, 1, &buf, &label), 0);
	ck_assert_uint_eq(buf.len, strlen("r/a/x.jpg"));
	check_sample(ds, 2, "r/a/x.jpg", 0);
	ck_assert_int_eq(dataset_read_encoded(ds, 3, &buf, &label), 0);
	ck_assert(memcmp(buf.p, "r/b/sub/y.jpg", buf.len) == 0);

	/* Swapped after indexing: refused when read, whatever the link. */
	ck_assert_int_eq(unlink(tpath("r/a/rel.jpg")), 0);
	ck_assert_int_eq(symlink("../../secret/s.jpg", tpath("r/a/rel.jpg")),
	    0);
	ck_assert_int_eq(dataset_read_encoded(ds, 1, &buf, &label), -1);
	ck_assert_int_eq(errno, EXDEV);
	ck_assert_int_eq(unlink(tpath("r/a/abs.jpg")), 0);
	ck_assert_int_eq(symlink(tpath("secret/s.jpg"), tpath("r/a/abs.jpg")),
	    0);
	ck_assert_int_eq(dataset_read_encoded(ds, 0, &buf, &label), -1);
	ck_assert_int_eq(errno, EXDEV);
	/* ... and so is a directory on the way swapped for a link out. */
	ck_assert_int_eq(rename(tpath("r/b/sub"), tpath("r/b/old")), 0);
	ck_assert_int_eq(symlink("../../secret/dir", tpath("r/b/sub")), 0);
	ck_assert_int_eq(dataset_read_encoded(ds, 4, &buf, &label), -1);
	ck_assert_int_eq(errno, EXDEV);
	dataset_free(ds);

	/* A link out is refused at indexing, naming it, unless all. */
	snprintf(want, sizeof want, "'%s/", tpath("r/a"));
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    NULL), want);
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    NULL), "is a symlink that leads out of root");
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    "follow_symlinks", "inside", NULL), "follow_symlinks = all");
	ds = open_ok(conf_new("imgs", "type", "imagefolder", "root",
	    tpath("r"), "follow_symlinks", "all", NULL));
	ck_assert_int_eq(dataset_read_encoded(ds, 0, &buf, &label), 0);
	ck_assert_uint_eq(buf.len, strlen("secret/s.jpg"));
	dataset_free(ds);
	/* A class that is a link out, too. */
	unlink(tpath("r/a/abs.jpg"));
	unlink(tpath("r/a/rel.jpg"));
	unlink(tpath("r/b/sub"));
	rename(tpath("r/b/old"), tpath("r/b/sub"));
	ck_assert_int_eq(symlink("../secret", tpath("r/leak")), 0);
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    NULL), "/r/leak' is a symlink that leads out of root");
	unlink(tpath("r/leak"));

	/* none: no link at all, not even inside; a plain tree reads. */
	open_fails(conf_new("imgs", "type", "imagefolder", "root", tpath("r"),
	    "follow_symlinks", "none", NULL), "/r/a/dir' is a symlink, and "
	    "'follow_symlinks = none' refuses");
	unlink(tpath("r/a/dir"));
	ds = open_ok(conf_new("imgs", "type", "imagefolder", "root",
	    tpath("r"), "follow_symlinks", "none", NULL));
	ck_assert_uint_eq(ds->samples, 2);
	check_sample(ds, 0, "r/a/x.jpg", 0);
	ck_assert_int_eq(rename(tpath("r/b/sub"), tpath("r/b/old")), 0);
	ck_assert_int_eq(symlink("old", tpath("r/b/sub")), 0);
	ck_assert_int_eq(dataset_read_encoded(ds, 1, &buf, &label), -1);
	ck_assert_int_eq(errno, EXDEV);
	dataset_free(ds);
	dataset_buf_free(&buf);
}
END_TEST

/* Reads: the file's bytes; gone, unreadable, huge, replaced files fail. */
START_TEST(imagefolder_reads_files_and_their_errors)
{
	struct dataset_buf	 buf = { 0 };
	struct dataset		*ds;
	int64_t			 label;
	uint8_t			 raw[16];
	int			 fd;

	mkdirs("r/a");
	mkdirs("r/b");
	touch("r/a/1.jpg");
	touch("r/a/2.jpg");
	touch("r/b/3.png");
	touch("r/b/4.png");
	put("r/b/5.png", "", 0);
	ds = folder_open("r");
	ck_assert_uint_eq(ds->samples, 5);
	check_sample(ds, 2, "r/b/3.png", 1);
	/* The buffer is reused; an empty file reads as 0 bytes. */
	ck_assert_int_eq(dataset_read_encoded(ds, 0, &buf, &label), 0);
	ck_assert_int_eq(dataset_read_encoded(ds, 4, &buf, &label), 0);
	ck_assert_uint_eq(buf.len, 0);

	ck_assert_int_eq(unlink(tpath("r/a/2.jpg")), 0);
	ck_assert_int_eq(dataset_read_encoded(ds, 1, &buf, &label), -1);
	ck_assert_int_eq(errno, ENOENT);
	if (geteuid() != 0) {
		ck_assert_int_eq(chmod(tpath("r/b/3.png"), 0), 0);
		ck_assert_int_eq(dataset_read_encoded(ds, 2, &buf, &label), -1);
		ck_assert_int_eq(errno, EACCES);
	}
	ck_assert_int_eq(unlink(tpath("r/b/4.png")), 0);
	mkdirs("r/b/4.png");
	ck_assert_int_eq(dataset_read_encoded(ds, 3, &buf, &label), -1);
	ck_assert_int_eq(errno, EINVAL);
	fd = open(tpath("r/b/5.png"), O_WRONLY);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(ftruncate(fd, INFEED_MAX_IMAGE_BYTES + 1), 0);
	close(fd);
	ck_assert_int_eq(dataset_read_encoded(ds, 4, &buf, &label), -1);
	ck_assert_int_eq(errno, EFBIG);
	ck_assert_int_eq(dataset_read_encoded(ds, 5, &buf, &label), -1);
	ck_assert_int_eq(errno, ERANGE);

	/* Encoded samples have no fixed size: dataset_read() refuses. */
	ck_assert_int_eq(dataset_read(ds, 0, raw, &label, false), -1);
	ck_assert_int_eq(errno, EOPNOTSUPP);
	dataset_buf_free(&buf);
	dataset_free(ds);
}
END_TEST

/*
 * A tar writer for the tests: ustar, GNU or v7 headers, pax and GNU
 * long-name records, base-256 sizes, a bad checksum on request.
 */
enum tfmt { T_USTAR, T_GNU, T_V7 };

struct tw {
	FILE		*f;
	enum tfmt	 fmt;
	bool		 b256;		/* next size in base-256 */
	bool		 bad_sum;	/* next checksum wrong */
};

/* Open a tar file @rel for writing. */
static void
tw_open(struct tw *w, const char *rel, enum tfmt fmt)
{
	memset(w, 0, sizeof *w);
	ck_assert_ptr_nonnull(w->f = fopen(tpath(rel), "wb"));
	w->fmt = fmt;
}

/* Pad to the next block. */
static void
tw_pad(struct tw *w, size_t len)
{
	static const uint8_t	zero[512];

	if (len % 512 != 0)
		ck_assert_uint_eq(fwrite(zero, 1, 512 - len % 512, w->f),
		    512 - len % 512);
}

/* A header: @name (split at the last '/' into prefix for ustar when long). */
static void
tw_header(struct tw *w, const char *name, char type, uint64_t size)
{
	uint8_t		 h[512];
	const char	*slash;
	unsigned	 sum = 0;
	size_t		 i, nlen = strlen(name);
	int		 b;

	memset(h, 0, sizeof h);
	if (nlen > 100 && w->fmt == T_USTAR &&
	    (slash = strrchr(name, '/')) != NULL) {
		memcpy(h + 345, name, (size_t)(slash - name));
		memcpy(h, slash + 1, strlen(slash + 1));
	} else
		memcpy(h, name, nlen > 100 ? 100 : nlen);
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0001750", 8);
	memcpy(h + 116, "0001750", 8);
	if (w->b256) {
		h[124] = 0x80;
		for (b = 0; b < 8; b++)
			h[135 - b] = (uint8_t)(size >> (8 * b));
		w->b256 = false;
	} else
		snprintf((char *)h + 124, 12, "%011" PRIo64, size);
	memcpy(h + 136, "14712345670", 12);
	h[156] = (uint8_t)type;
	if (w->fmt == T_USTAR)
		memcpy(h + 257, "ustar\0" "00", 8);
	else if (w->fmt == T_GNU)
		memcpy(h + 257, "ustar  \0", 8);
	memset(h + 148, ' ', 8);
	for (i = 0; i < 512; i++)
		sum += h[i];
	if (w->bad_sum) {
		sum++;
		w->bad_sum = false;
	}
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	ck_assert_uint_eq(fwrite(h, 1, 512, w->f), 512);
}

/* A member with its data. */
static void
tw_add(struct tw *w, const char *name, char type, const void *data,
    size_t len)
{
	tw_header(w, name, type, len);
	if (len > 0)
		ck_assert_uint_eq(fwrite(data, 1, len, w->f), len);
	tw_pad(w, len);
}

/* A regular member whose data is a string. */
static void
tw_file(struct tw *w, const char *name, const char *data)
{
	tw_add(w, name, '0', data, strlen(data));
}

/* A pax header ('x' or 'g') of "key=value" records. */
static void
tw_pax(struct tw *w, char type, const char *k1, const char *v1)
{
	char	rec[4096];
	size_t	len, n;

	/* The length counts itself: find the fixed point. */
	for (len = strlen(k1) + strlen(v1) + 4, n = 0; n != len; ) {
		n = len;
		len = (size_t)snprintf(NULL, 0, "%zu %s=%s\n", n, k1, v1);
	}
	snprintf(rec, sizeof rec, "%zu %s=%s\n", len, k1, v1);
	tw_add(w, "././@PaxHeader", type, rec, len);
}

/* A GNU long name record for the next member. */
static void
tw_long(struct tw *w, char type, const char *name)
{
	tw_add(w, "././@LongLink", type, name, strlen(name) + 1);
}

/* Two zero blocks and close. */
static void
tw_close(struct tw *w, bool end)
{
	static const uint8_t	zero[1024];

	if (end)
		ck_assert_uint_eq(fwrite(zero, 1, 1024, w->f), 1024);
	ck_assert_int_eq(fclose(w->f), 0);
}

/* Open shards @pattern (relative names are made absolute by the caller). */
static struct dataset *
tar_open_ok(const char *shards)
{
	return (open_ok(conf_new("wds", "type", "tar", "shards", shards,
	    NULL)));
}

/* Sample @i: bytes @data, label @label, member @member of shard @rel. */
static void
check_member(const struct dataset *ds, uint64_t i, const char *data,
    int64_t label, const char *member, const char *rel)
{
	struct dataset_buf	 buf = { 0 };
	char			 where[1024], want[1024];
	int64_t			 l = -1;

	snprintf(want, sizeof want, "member '%s' of shard '%s'", member,
	    tpath(rel));
	ck_assert_str_eq(dataset_sample_where(ds, i, where, sizeof where),
	    want);
	ck_assert_int_eq(dataset_read_encoded(ds, i, &buf, &l), 0);
	ck_assert_int_eq(l, label);
	ck_assert_uint_eq(buf.len, strlen(data));
	ck_assert(memcmp(buf.p, data, buf.len) == 0);
	dataset_buf_free(&buf);
}

/* The headers real writers use, and what tarfile makes of them. */
START_TEST(tar_reads_ustar_pax_gnu_and_base256)
{
	struct tw	 w;
	struct dataset	*ds;
	char		 longname[300], longdir[200], list[6 * PATH_MAX];
	char		 big[1500];

	memset(longdir, 'd', 130);
	longdir[130] = '\0';
	memset(big, 'B', sizeof big - 1);
	big[sizeof big - 1] = '\0';

	/* webdataset's writer: a pax mtime header before every member. */
	tw_open(&w, "pax.tar", T_USTAR);
	tw_pax(&w, 'x', "mtime", "1700000000.123456");
	tw_file(&w, "train/n01/img_1.jpg", "jpeg-1");
	tw_pax(&w, 'x', "mtime", "1700000000.5");
	tw_file(&w, "train/n01/img_1.cls", "7\n");
	snprintf(longname, sizeof longname, "%s/img_2.JPEG", longdir);
	tw_pax(&w, 'x', "path", longname);
	tw_file(&w, "truncated-by-the-writer.JPEG", big);
	snprintf(longname, sizeof longname, "%s/img_2.cls", longdir);
	tw_pax(&w, 'x', "path", longname);
	tw_file(&w, "x", "3");
	tw_add(&w, "train/", '5', NULL, 0);
	tw_close(&w, true);

	/* GNU: L records, a K record, a base-256 size, no end blocks. */
	tw_open(&w, "gnu.tar", T_GNU);
	snprintf(longname, sizeof longname, "%s/g.png", longdir);
	tw_long(&w, 'L', longname);
	tw_file(&w, "short-name-ignored.png", "png-bytes");
	tw_long(&w, 'K', "some/link/target");
	tw_add(&w, "lnk.png", '2', NULL, 0);
	snprintf(longname, sizeof longname, "%s/g.cls", longdir);
	tw_long(&w, 'L', longname);
	w.b256 = true;
	tw_file(&w, "g.cls", "0");
	tw_close(&w, false);

	/* ustar: a long name split into prefix and name; v7: no magic. */
	tw_open(&w, "ustar.tar", T_USTAR);
	snprintf(longname, sizeof longname, "%s/u.jpg", longdir);
	tw_file(&w, longname, "ustar-jpeg");
	snprintf(longname, sizeof longname, "%s/u.cls", longdir);
	tw_file(&w, longname, "1");
	tw_close(&w, true);
	tw_open(&w, "v7.tar", T_V7);
	tw_add(&w, "v.jpg", '\0', "v7", 2);
	tw_add(&w, "v.cls", '7', "2", 1);
	tw_close(&w, true);

	snprintf(list, sizeof list, "%s/{pax,gnu}.tar,%s  %s",
	    shards_escape(tmpdir), spath("ustar.tar"), spath("v7.tar"));
	ds = tar_open_ok(list);
	ck_assert_str_eq(ds->type, "tar");
	ck_assert_ptr_null(ds->class_names);
	ck_assert_uint_eq(ds->samples, 5);
	ck_assert_uint_eq(ds->classes, 8);
	check_member(ds, 0, "jpeg-1", 7, "train/n01/img_1.jpg", "pax.tar");
	snprintf(longname, sizeof longname, "%s/img_2.JPEG", longdir);
	check_member(ds, 1, big, 3, longname, "pax.tar");
	snprintf(longname, sizeof longname, "%s/g.png", longdir);
	check_member(ds, 2, "png-bytes", 0, longname, "gnu.tar");
	snprintf(longname, sizeof longname, "%s/u.jpg", longdir);
	check_member(ds, 3, "ustar-jpeg", 1, longname, "ustar.tar");
	check_member(ds, 4, "v7", 2, "v.jpg", "v7.tar");
	dataset_free(ds);

	/* classes = N is kept, and every label must be below it. */
	ds = open_ok(conf_new("wds", "type", "tar", "shards", spath("v7.tar"),
	    "classes", "10", NULL));
	ck_assert_uint_eq(ds->classes, 10);
	dataset_free(ds);
	open_fails(conf_new("wds", "type", "tar", "shards", spath("v7.tar"),
	    "classes", "2", NULL), "member 'v.cls' of shard '");
	open_fails(conf_new("wds", "type", "tar", "shards", spath("v7.tar"),
	    "classes", "2", NULL), "the label 2 is not below 'classes = 2'");
}
END_TEST

/* webdataset's grouping: what is skipped, what splits where. */
START_TEST(tar_groups_as_webdataset)
{
	struct tw	 w;
	struct dataset	*ds;

	tw_open(&w, "s.tar", T_USTAR);
	tw_file(&w, "__meta__", "skipped");
	tw_file(&w, "__dir__/x.jpg", "skipped too");
	tw_file(&w, "a.b/c.seg.png", "no image field: seg.png");
	tw_file(&w, "a.b/c.JPG", "image c");
	tw_file(&w, "noext", "skipped, and no group break");
	tw_file(&w, "a.b/c.Cls", "4");
	tw_file(&w, "a.b/c.json", "{}");
	tw_file(&w, "x..jpg", "image x, suffix .jpg: no image");
	tw_file(&w, "x..cls", "1");
	tw_file(&w, "x.jpeg", "x's image");
	tw_add(&w, "x.sym.jpg", '2', NULL, 0);
	tw_file(&w, "x.cls", "1");
	tw_file(&w, "dir/.png", "dir/'s image");
	tw_file(&w, "dir/.cls", "2");
	tw_file(&w, "./y.webp", "y");
	tw_file(&w, "./y.cls", "0");
	tw_close(&w, true);
	ds = tar_open_ok(spath("s.tar"));
	ck_assert_uint_eq(ds->samples, 4);
	check_member(ds, 0, "image c", 4, "a.b/c.JPG", "s.tar");
	check_member(ds, 1, "x's image", 1, "x.jpeg", "s.tar");
	check_member(ds, 2, "dir/'s image", 2, "dir/.png", "s.tar");
	check_member(ds, 3, "y", 0, "./y.webp", "s.tar");
	dataset_free(ds);
}
END_TEST

/* A shard whose path holds a space, a comma and braces: escaped, it opens. */
START_TEST(tar_opens_a_path_with_spaces_commas_and_braces)
{
	struct tw	 w;
	struct dataset	*ds;

	mkdirs("My Data, {v1}");
	tw_open(&w, "My Data, {v1}/a b.tar", T_USTAR);
	tw_file(&w, "k.jpg", "image k");
	tw_file(&w, "k.cls", "3");
	tw_close(&w, true);
	ds = tar_open_ok(spath("My Data, {v1}/a b.tar"));
	ck_assert_uint_eq(ds->samples, 1);
	check_member(ds, 0, "image k", 3, "k.jpg", "My Data, {v1}/a b.tar");
	dataset_free(ds);
	/* Unescaped, the space splits it into two paths. */
	open_fails(conf_new("wds", "type", "tar", "shards",
	    tpath("My Data, {v1}/a b.tar"), NULL), "cannot open");
}
END_TEST

/* Write a one-shard tar of @n members, name then data, and open it. */
static void
tar_refused(const char *want, int n, ...)
{
	struct tw	 w;
	va_list		 ap;
	const char	*name, *data;
	int		 i;

	tw_open(&w, "bad.tar", T_USTAR);
	va_start(ap, n);
	for (i = 0; i < n; i++) {
		name = va_arg(ap, const char *);
		data = va_arg(ap, const char *);
		tw_file(&w, name, data);
	}
	va_end(ap);
	tw_close(&w, true);
	open_fails(conf_new("wds", "type", "tar", "shards", spath("bad.tar"),
	    NULL), want);
}

/* Each refusal, naming shard and member. */
START_TEST(tar_refuses_bad_samples_naming_shard_and_member)
{
	char	want[PATH_MAX + 256];

	snprintf(want, sizeof want, "dataset 'wds': member 'x.cls' of shard "
	    "'%s': sample 'x' has no image (.jpg, .jpeg or .png)",
	    tpath("bad.tar"));
	tar_refused(want, 3, "a.jpg", "i", "a.cls", "0", "x.cls", "1");
	snprintf(want, sizeof want, "dataset 'wds': member 'x.jpg' of shard "
	    "'%s': sample 'x' has no label (.cls)", tpath("bad.tar"));
	tar_refused(want, 2, "x.jpg", "i", "x.txt", "t");
	tar_refused("member 'x.JPG' of shard", 3, "x.jpg", "i", "x.JPG", "j",
	    "x.cls", "1");
	tar_refused("sample 'x' has a second .jpg member", 3, "x.jpg", "i",
	    "x.JPG", "j", "x.cls", "1");
	tar_refused("member 'x.png' of shard", 3, "x.jpg", "i", "x.png", "j",
	    "x.cls", "1");
	tar_refused("sample 'x' already has an image, 'x.jpg'", 3, "x.jpg",
	    "i", "x.png", "j", "x.cls", "1");
	/* Interleaved: four one-member samples for webdataset. */
	tar_refused("member 'a.jpg' of shard", 4, "a.jpg", "i", "b.jpg", "j",
	    "a.cls", "1", "b.cls", "2");
	tar_refused("sample 'a' appears again after other samples", 5,
	    "a.jpg", "i", "a.cls", "1", "b.jpg", "j", "b.cls", "2",
	    "a.txt", "again");
	tar_refused("member 'README.txt' of shard", 3, "a.jpg", "i", "a.cls",
	    "1", "README.txt", "hello");

	/* .cls as Python's int(): these it refuses. */
	tar_refused("the label '' is not a whole number", 2, "x.jpg", "i",
	    "x.cls", "");
	tar_refused("the label '0x10' is not a whole number", 2, "x.jpg", "i",
	    "x.cls", "0x10");
	tar_refused("the label '1__0' is not a whole number", 2, "x.jpg", "i",
	    "x.cls", "1__0");
	tar_refused("the label '_1' is not a whole number", 2, "x.jpg", "i",
	    "x.cls", "_1");
	tar_refused("the label '1_' is not a whole number", 2, "x.jpg", "i",
	    "x.cls", "1_");
	tar_refused("the label '?" "?' is not a whole number", 2, "x.jpg", "i",
	    "x.cls", "\xd9\xa3");
	tar_refused("the label '?" "?" "?3' is not a whole number", 2, "x.jpg",
	    "i", "x.cls", "\xef\xbb\xbf" "3");
	tar_refused("the label '- 1' is not a whole number", 2, "x.jpg", "i",
	    "x.cls", "- 1");
	tar_refused("the label -1 is negative", 2, "x.jpg", "i", "x.cls",
	    " -1\n");
	tar_refused("the label '99999999999' is too large", 2, "x.jpg", "i",
	    "x.cls", "99999999999");
}
END_TEST

/* .cls values Python's int() accepts. */
START_TEST(tar_reads_labels_as_python_int)
{
	static const struct {
		const char	*text;
		int64_t		 v;
	} cases[] = {
		{ "3", 3 }, { "3\n", 3 }, { " \t42 \r\n", 42 }, { "+5", 5 },
		{ "1_000", 1000 }, { "007", 7 }, { "-0", 0 }, { "\v9\f", 9 },
	};
	struct tw	 w;
	struct dataset	*ds;
	char		 name[32];
	size_t		 i;

	tw_open(&w, "c.tar", T_USTAR);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(name, sizeof name, "s%zu.jpg", i);
		tw_file(&w, name, "i");
		snprintf(name, sizeof name, "s%zu.cls", i);
		tw_file(&w, name, cases[i].text);
	}
	tw_close(&w, true);
	ds = tar_open_ok(spath("c.tar"));
	ck_assert_uint_eq(ds->samples, sizeof cases / sizeof cases[0]);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(name, sizeof name, "s%zu.jpg", i);
		check_member(ds, i, "i", cases[i].v, name, "c.tar");
	}
	ck_assert_uint_eq(ds->classes, 1001);
	dataset_free(ds);
}
END_TEST

/* Broken shards: each refused with what is wrong. */
START_TEST(tar_refuses_broken_and_compressed_shards)
{
	struct tw	 w;
	uint8_t		 gz[] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3 };
	char		 pattern[PATH_MAX + 64], block[1024];
	int		 fd;

	tw_open(&w, "sum.tar", T_USTAR);
	tw_file(&w, "x.jpg", "i");
	w.bad_sum = true;
	tw_file(&w, "x.cls", "1");
	tw_close(&w, true);
	open_fails(conf_new("wds", "type", "tar", "shards", spath("sum.tar"),
	    NULL), "a header with a bad checksum (corrupt, or not a tar "
	    "member) at byte 1024");

	tw_open(&w, "cut.tar", T_USTAR);
	tw_file(&w, "x.jpg", "image");
	tw_file(&w, "x.cls", "1");
	tw_close(&w, true);
	ck_assert_int_eq(truncate(tpath("cut.tar"), 512 + 3), 0);
	open_fails(conf_new("wds", "type", "tar", "shards", spath("cut.tar"),
	    NULL), "a member of 5 bytes at byte 0 that runs past the end of "
	    "the shard (515 bytes); is it truncated?");
	ck_assert_int_eq(truncate(tpath("cut.tar"), 1024 + 100), 0);
	open_fails(conf_new("wds", "type", "tar", "shards", spath("cut.tar"),
	    NULL), "a header cut short at byte 1024");

	put("plain.txt", "hello, this is not a tar file", 29);
	open_fails(conf_new("wds", "type", "tar", "shards",
	    spath("plain.txt"), NULL), "not a tar archive: 29 bytes, less "
	    "than one header");
	memset(block, 'x', sizeof block);
	put("plain.txt", block, sizeof block);
	open_fails(conf_new("wds", "type", "tar", "shards",
	    spath("plain.txt"), NULL), "not a tar archive: no valid header "
	    "at byte 0");
	put("empty.tar", "", 0);
	open_fails(conf_new("wds", "type", "tar", "shards", spath("empty.tar"),
	    NULL), "is empty; expected a tar file");
	put("z.tar.gz", gz, sizeof gz);
	open_fails(conf_new("wds", "type", "tar", "shards", spath("z.tar.gz"),
	    NULL), "is gzip-compressed; infeed reads samples at random by "
	    "their offset, which needs an uncompressed tar");
	mkdirs("dir.tar");
	open_fails(conf_new("wds", "type", "tar", "shards", spath("dir.tar"),
	    NULL), "is not a regular file");

	/* Only zero blocks: a valid tar without samples. */
	fd = open(tpath("zero.tar"), O_WRONLY | O_CREAT, 0644);
	ck_assert_int_eq(ftruncate(fd, 10240), 0);
	close(fd);
	open_fails(conf_new("wds", "type", "tar", "shards", spath("zero.tar"),
	    NULL), "the shards hold no sample");

	snprintf(pattern, sizeof pattern, "%s/s-{0..1}.tar",
	    shards_escape(tmpdir));
	open_fails(conf_new("wds", "type", "tar", "shards", pattern, NULL),
	    "s-0.tar': cannot open: No such file or directory");
	open_fails(conf_new("wds", "type", "tar", "shards", "/x/{a,b", NULL),
	    "'shards =': the pattern '/x/{a,b' has unbalanced braces");
	open_fails(conf_new("wds", "type", "tar", "shards", " , ", NULL),
	    "'shards =' names no shard");
	open_fails(conf_new("wds", "type", "tar", NULL), "missing 'shards ='");

	/* A bad pax record. */
	tw_open(&w, "pax.tar", T_USTAR);
	tw_add(&w, "././@PaxHeader", 'x', "9 path\n", 7);
	tw_file(&w, "x.jpg", "i");
	tw_close(&w, true);
	open_fails(conf_new("wds", "type", "tar", "shards", spath("pax.tar"),
	    NULL), "a malformed pax header at byte 0");
}
END_TEST

/* A shard cut after indexing: the samples past the cut fail with EIO. */
START_TEST(tar_read_fails_past_a_shard_cut_after_indexing)
{
	struct dataset_buf	 buf = { 0 };
	struct tw		 w;
	struct dataset		*ds;
	int64_t			 label;
	char			 where[PATH_MAX + 64], want[PATH_MAX + 64];

	tw_open(&w, "s.tar", T_USTAR);
	tw_file(&w, "a.jpg", "first image");
	tw_file(&w, "a.cls", "0");
	tw_file(&w, "b.jpg", "second image");
	tw_file(&w, "b.cls", "1");
	tw_close(&w, true);
	ds = tar_open_ok(spath("s.tar"));
	ck_assert_uint_eq(ds->samples, 2);
	ck_assert_int_eq(truncate(tpath("s.tar"), 2048 + 512 + 5), 0);
	ck_assert_int_eq(dataset_read_encoded(ds, 0, &buf, &label), 0);
	ck_assert_int_eq(dataset_read_encoded(ds, 1, &buf, &label), -1);
	ck_assert_int_eq(errno, EIO);
	/* The header is still there: the member is named. */
	snprintf(want, sizeof want, "member 'b.jpg' of shard '%s'",
	    tpath("s.tar"));
	ck_assert_str_eq(dataset_sample_where(ds, 1, where, sizeof where),
	    want);
	/* Cut inside the first header: only the offset can be given. */
	ck_assert_int_eq(truncate(tpath("s.tar"), 100), 0);
	ck_assert_int_eq(dataset_read_encoded(ds, 0, &buf, &label), -1);
	ck_assert_int_eq(errno, EIO);
	snprintf(want, sizeof want, "the member at byte 512 of shard '%s'",
	    tpath("s.tar"));
	ck_assert_str_eq(dataset_sample_where(ds, 0, where, sizeof where),
	    want);
	dataset_buf_free(&buf);
	dataset_free(ds);
}
END_TEST

/* dataset_tar_open_fd(): one shard from a descriptor, as the fuzzer uses it. */
START_TEST(tar_open_fd_reads_one_shard)
{
	struct tw	 w;
	struct dataset	*ds;
	char		*cause = NULL;
	int		 fd;

	tw_open(&w, "s.tar", T_GNU);
	tw_file(&w, "k.png", "P");
	tw_file(&w, "k.cls", "5");
	tw_close(&w, true);
	fd = open(tpath("s.tar"), O_RDONLY);
	ck_assert_int_ne(fd, -1);
	ds = dataset_tar_open_fd("fd", "the shard", fd, &cause);
	ck_assert_msg(ds != NULL, "%s", cause);
	ck_assert_uint_eq(ds->samples, 1);
	ck_assert_uint_eq(ds->classes, 6);
	dataset_free(ds);
	ck_assert_int_eq(open("/dev/null", O_RDONLY), fd);	/* closed */
	close(fd);
}
END_TEST

/* Every test, in cases by reader. */
static Suite *
image_readers_suite(void)
{
	Suite	*s = suite_create("image-readers");
	TCase	*tc;

	tc = tcase_create("braces");
	tcase_add_test(tc, braces_expand_as_braceexpand);
	suite_add_tcase(s, tc);

	tc = tcase_create("imagefolder");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, imagefolder_orders_as_torchvision);
	tcase_add_test(tc, imagefolder_refuses_with_torchvisions_words);
	tcase_add_test(tc, imagefolder_refuses_a_symlink_cycle);
	tcase_add_test(tc, imagefolder_diamond_of_links_refused_fast);
	tcase_add_test(tc, imagefolder_walk_capped);
	tcase_add_test(tc, imagefolder_symlinks_stay_inside_root);
	tcase_add_test(tc, imagefolder_reads_files_and_their_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("tar");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, tar_reads_ustar_pax_gnu_and_base256);
	tcase_add_test(tc, tar_groups_as_webdataset);
	tcase_add_test(tc, tar_opens_a_path_with_spaces_commas_and_braces);
	tcase_add_test(tc, tar_refuses_bad_samples_naming_shard_and_member);
	tcase_add_test(tc, tar_reads_labels_as_python_int);
	tcase_add_test(tc, tar_refuses_broken_and_compressed_shards);
	tcase_add_test(tc, tar_read_fails_past_a_shard_cut_after_indexing);
	tcase_add_test(tc, tar_open_fd_reads_one_shard);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every test in a directory of its own, then remove it. */
int
main(void)
{
	return (run_suite_in_dir(image_readers_suite(), "test-image-readers", rundir,
	    sizeof(rundir)));
}
