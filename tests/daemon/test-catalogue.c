/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/catalogue.c: catalogue_open serves the good
 * datasets of a configuration in order and leaves a bad one out with a
 * logged error (never fatal); catalogue_find looks them up by name;
 * catalogue_allows admits only the groups of allow_groups; reopening with
 * the old catalogue keeps an unchanged dataset's open object and opens a
 * changed or new one afresh.  The datasets are synthetic (no files) except
 * where a missing file is the point.
 */

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "catalogue.h"
#include "log.h"
#include "runner.h"

static char	rundir[PATH_MAX];	/* made by main() */
static char	conf_file[PATH_MAX + 32];
static char	logbuf[16384];		/* what the last log capture held */
static FILE	*log_file;
static int	 saved_stderr = -1;

/* Send the log (stderr) to a temporary file until log_end(). */
static void
log_begin(void)
{
	fflush(stderr);
	ck_assert_ptr_nonnull(log_file = tmpfile());
	ck_assert_int_ne(saved_stderr = dup(STDERR_FILENO), -1);
	ck_assert_int_ne(dup2(fileno(log_file), STDERR_FILENO), -1);
}

/* Put stderr back and keep what was logged in logbuf. */
static void
log_end(void)
{
	size_t	n;

	fflush(stderr);
	ck_assert_int_ne(dup2(saved_stderr, STDERR_FILENO), -1);
	close(saved_stderr);
	saved_stderr = -1;
	rewind(log_file);
	n = fread(logbuf, 1, sizeof logbuf - 1, log_file);
	logbuf[n] = '\0';
	fclose(log_file);
	log_file = NULL;
}

/* Load @text as the configuration, which must be valid. */
static struct config *
conf_load(const char *text)
{
	struct config	*conf;
	FILE		*f;
	char		*cause = NULL;

	snprintf(conf_file, sizeof conf_file, "%s/infeedd.conf", rundir);
	ck_assert_ptr_nonnull(f = fopen(conf_file, "w"));
	ck_assert_int_ge(fputs(text, f), 0);
	ck_assert_int_eq(fclose(f), 0);
	conf = config_load(conf_file, &cause);
	ck_assert_msg(conf != NULL, "config_load: %s", cause);
	return (conf);
}

/* Open @conf's catalogue (with @old), logging to logbuf. */
static struct catalogue *
cat_open(const struct config *conf, struct catalogue *old)
{
	struct catalogue	*cat;

	log_begin();
	cat = catalogue_open(conf, old, UINT64_MAX);
	log_end();
	ck_assert_ptr_nonnull(cat);
	return (cat);
}

/* Did the log say @s? */
static void
logged(const char *s)
{
	ck_assert_msg(strstr(logbuf, s) != NULL, "no '%s' in the log:\n%s", s,
	    logbuf);
}

/* The name of a group the test process is not in, or NULL. */
static const char *
foreign_group(void)
{
	static const char *const names[] = { "nogroup", "games", "news",
	    "uucp", "lp", "mail", NULL };
	struct group	*gr;
	gid_t		 groups[256];
	int		 n, i, k;

	n = getgroups(256, groups);
	for (i = 0; names[i] != NULL; i++) {
		if ((gr = getgrnam(names[i])) == NULL ||
		    gr->gr_gid == getgid())
			continue;
		for (k = 0; k < n && groups[k] != gr->gr_gid; k++)
			;
		if (k == n && gr->gr_mem[0] == NULL)
			return (names[i]);
	}
	return (NULL);
}

/* Good sections open in order; each bad one is left out and logged. */
START_TEST(catalogue_leaves_out_bad_datasets_with_a_logged_error)
{
	struct config		*conf;
	struct catalogue	*cat;
	char			 text[2 * PATH_MAX + 1024];

	snprintf(text, sizeof text,
	    "[dataset noise]\ntype = synthetic\nsamples = 10\nshape = 4\n"
	    "[dataset typo]\ntype = synthetic\nsamples = 10\nshape = 4\n"
	    "clases = 3\n"
	    "[dataset nofile]\ntype = raw\npath = %s/none.bin\nshape = 4\n"
	    "dtype = uint8\nlabels = %s/none-labels.bin\n"
	    "[dataset nogroup]\ntype = synthetic\nsamples = 1\nshape = 1\n"
	    "allow_groups = no-such-group-here\n"
	    "[dataset later]\ntype = synthetic\nsamples = 20\nshape = 2,2\n"
	    "dtype = uint8\n", rundir, rundir);
	conf = conf_load(text);
	ck_assert_uint_eq(conf->ndatasets, 5);
	cat = cat_open(conf, NULL);
	ck_assert_uint_eq(cat->ndatasets, 2);
	ck_assert_str_eq(cat->datasets[0]->name, "noise");
	ck_assert_ptr_eq(cat->entries[0].conf, &conf->datasets[0]);
	ck_assert_str_eq(cat->datasets[1]->name, "later");
	ck_assert_ptr_eq(cat->entries[1].conf, &conf->datasets[4]);
	ck_assert_uint_eq(cat->datasets[1]->samples, 20);
	ck_assert_uint_eq(cat->datasets[1]->sample_bytes, 4);
	logged("dataset 'typo' refused: dataset 'typo': unknown key "
	    "'clases' in section [dataset typo]");
	logged("(did you mean 'classes'?)");
	logged("dataset 'nofile' refused: dataset 'nofile': ");
	logged("none.bin: cannot open: No such file or directory");
	logged("dataset 'nogroup' refused: allow_groups: no group "
	    "'no-such-group-here' on this host");
	logged("dataset 'later': synthetic, 20 samples of uint8[4 bytes]");
	catalogue_free(cat);
	catalogue_free(NULL);
	config_free(conf);

	/* A catalogue with nothing in it is still a catalogue. */
	conf = conf_load("[dataset bad]\ntype = nonesuch\n");
	cat = cat_open(conf, NULL);
	ck_assert_uint_eq(cat->ndatasets, 0);
	ck_assert_ptr_null(catalogue_find(cat, "bad", NULL));
	logged("dataset 'bad' refused: dataset 'bad': unknown type "
	    "'nonesuch'; the known types are idx, raw, npy, synthetic");
	catalogue_free(cat);
	config_free(conf);
}
END_TEST

/* catalogue_find: by exact name, with its index; NULL for others. */
START_TEST(catalogue_find_looks_datasets_up_by_name)
{
	struct config		*conf;
	struct catalogue	*cat;
	size_t			 index = 99;

	conf = conf_load("[dataset a]\ntype = synthetic\nsamples = 1\n"
	    "shape = 1\n[dataset broken]\ntype = synthetic\n"
	    "[dataset b]\ntype = synthetic\nsamples = 2\nshape = 1\n");
	cat = cat_open(conf, NULL);
	ck_assert_uint_eq(cat->ndatasets, 2);
	ck_assert_ptr_eq(catalogue_find(cat, "b", &index), cat->datasets[1]);
	ck_assert_uint_eq(index, 1);
	ck_assert_ptr_eq(catalogue_find(cat, "a", &index), cat->datasets[0]);
	ck_assert_uint_eq(index, 0);
	ck_assert_ptr_eq(catalogue_find(cat, "a", NULL), cat->datasets[0]);
	index = 99;
	ck_assert_ptr_null(catalogue_find(cat, "broken", &index));
	ck_assert_ptr_null(catalogue_find(cat, "A", &index));
	ck_assert_ptr_null(catalogue_find(cat, "", &index));
	ck_assert_ptr_null(catalogue_find(cat, "bb", &index));
	ck_assert_uint_eq(index, 99);
	catalogue_free(cat);
	config_free(conf);
}
END_TEST

/* allow_groups admits members of a listed group only; none: everyone. */
START_TEST(catalogue_allows_only_the_groups_of_allow_groups)
{
	struct config		*conf;
	struct catalogue	*cat;
	struct group		*gr;
	const char		*other;
	char			 text[1024], mine[256];

	ck_assert_ptr_nonnull(gr = getgrgid(getgid()));
	snprintf(mine, sizeof mine, "%s", gr->gr_name);
	other = foreign_group();
	snprintf(text, sizeof text,
	    "[dataset open]\ntype = synthetic\nsamples = 1\nshape = 1\n"
	    "[dataset mine]\ntype = synthetic\nsamples = 1\nshape = 1\n"
	    "allow_groups = %s%s%s\n"
	    "[dataset empty]\ntype = synthetic\nsamples = 1\nshape = 1\n"
	    "allow_groups =\n", other != NULL ? other : "", other != NULL ?
	    ", " : "", mine);
	conf = conf_load(text);
	cat = cat_open(conf, NULL);
	ck_assert_uint_eq(cat->ndatasets, 3);
	ck_assert(!cat->entries[0].restricted);
	ck_assert(catalogue_allows(cat, 0, getuid(), getgid()));
	ck_assert(catalogue_allows(cat, 0, 12345, 54321));
	ck_assert(cat->entries[1].restricted);
	ck_assert_uint_eq(cat->entries[1].ngroups, other != NULL ? 2 : 1);
	ck_assert(catalogue_allows(cat, 1, getuid(), getgid()));
	/* A uid with no passwd entry has no supplementary groups. */
	ck_assert(!catalogue_allows(cat, 1, 4000000, 4000000));
	/* allow_groups with no group: nobody. */
	ck_assert(cat->entries[2].restricted);
	ck_assert_uint_eq(cat->entries[2].ngroups, 0);
	ck_assert(!catalogue_allows(cat, 2, getuid(), getgid()));
	catalogue_free(cat);
	config_free(conf);

	/* Only a group the process is not in: refused. */
	if (other == NULL)
		return;
	snprintf(text, sizeof text, "[dataset theirs]\ntype = synthetic\n"
	    "samples = 1\nshape = 1\nallow_groups = %s\n", other);
	conf = conf_load(text);
	cat = cat_open(conf, NULL);
	ck_assert_uint_eq(cat->ndatasets, 1);
	ck_assert(!catalogue_allows(cat, 0, getuid(), getgid()));
	ck_assert_ptr_nonnull(gr = getgrnam(other));
	ck_assert(catalogue_allows(cat, 0, 4000000, gr->gr_gid));
	catalogue_free(cat);
	config_free(conf);
}
END_TEST

/*
 * Reopening with the old catalogue: an unchanged section keeps its open
 * dataset (the same object, taken out of the old catalogue); a changed one
 * is opened afresh, a new one opened, a removed one left to the old
 * catalogue, and one changed into a bad section is left out.
 */
START_TEST(catalogue_reopen_keeps_unchanged_datasets)
{
	struct config		*c1, *c2;
	struct catalogue	*cat1, *cat2;
	struct dataset		*a, *b;

	c1 = conf_load("[dataset a]\ntype = synthetic\nsamples = 10\n"
	    "shape = 4\n[dataset b]\ntype = synthetic\nsamples = 10\n"
	    "shape = 4\n[dataset gone]\ntype = synthetic\nsamples = 1\n"
	    "shape = 1\n[dataset c]\ntype = synthetic\nsamples = 3\n"
	    "shape = 1\n");
	cat1 = cat_open(c1, NULL);
	ck_assert_uint_eq(cat1->ndatasets, 4);
	a = cat1->datasets[0];
	b = cat1->datasets[1];

	c2 = conf_load("[dataset new]\ntype = synthetic\nsamples = 5\n"
	    "shape = 1\n[dataset b]\ntype = synthetic\nsamples = 30\n"
	    "shape = 4\n[dataset a]\ntype = synthetic\nsamples = 10\n"
	    "shape = 4\n[dataset c]\ntype = synthetic\nsamples = 3\n"
	    "shape = 1\nclases = 2\n");
	cat2 = cat_open(c2, cat1);
	ck_assert_uint_eq(cat2->ndatasets, 3);
	ck_assert_str_eq(cat2->datasets[0]->name, "new");
	ck_assert_uint_eq(cat2->datasets[0]->samples, 5);
	/* b changed: a new object with the new section's samples. */
	ck_assert_ptr_ne(cat2->datasets[1], b);
	ck_assert_str_eq(cat2->datasets[1]->name, "b");
	ck_assert_uint_eq(cat2->datasets[1]->samples, 30);
	/* a unchanged (moved in the file): the same object, handed over. */
	ck_assert_ptr_eq(cat2->datasets[2], a);
	ck_assert_ptr_eq(cat2->entries[2].conf, &c2->datasets[2]);
	ck_assert_ptr_null(cat1->datasets[0]);
	/* The old catalogue still owns b, gone and the good c. */
	ck_assert_ptr_eq(cat1->datasets[1], b);
	ck_assert_ptr_nonnull(cat1->datasets[2]);
	ck_assert_ptr_nonnull(cat1->datasets[3]);
	ck_assert_ptr_null(catalogue_find(cat2, "c", NULL));
	ck_assert_ptr_null(catalogue_find(cat1, "a", NULL));
	logged("dataset 'c' refused: dataset 'c': unknown key 'clases'");
	catalogue_free(cat1);
	config_free(c1);
	/* What cat2 kept outlives the old catalogue and configuration. */
	ck_assert_uint_eq(a->samples, 10);
	ck_assert_str_eq(catalogue_find(cat2, "a", NULL)->name, "a");
	catalogue_free(cat2);
	config_free(c2);
}
END_TEST

/*
 * A mix opens its own copies of its sources, so reopening keeps a mix
 * only while its sources' sections read the same too: an edited source
 * (here its samples; as well its path or its allow_groups) makes a new
 * mix, never the old one serving what the operator changed.
 */
START_TEST(catalogue_reopen_renews_a_mix_whose_source_changed)
{
	static const char	 mix[] = "[dataset blend]\ntype = mix\n"
	    "sources = web, code\nweights = 3, 1\n";
	struct config		*c1, *c2, *c3;
	struct catalogue	*cat1, *cat2, *cat3;
	struct dataset		*m1, *m2;
	char			 text[512];

	snprintf(text, sizeof text, "%s[dataset web]\ntype = synthetic\n"
	    "samples = 30\nshape = 2\n[dataset code]\ntype = synthetic\n"
	    "samples = 10\nshape = 2\n", mix);
	c1 = conf_load(text);
	cat1 = cat_open(c1, NULL);
	ck_assert_ptr_nonnull(m1 = catalogue_find(cat1,
	    "blend", NULL));
	/* Nothing changed: the same mix. */
	c2 = conf_load(text);
	cat2 = cat_open(c2, cat1);
	ck_assert_ptr_eq(catalogue_find(cat2, "blend", NULL), m1);
	/* Its source web changed, its own section did not: a new mix. */
	snprintf(text, sizeof text, "%s[dataset web]\ntype = synthetic\n"
	    "samples = 60\nshape = 2\n[dataset code]\ntype = synthetic\n"
	    "samples = 10\nshape = 2\n", mix);
	c3 = conf_load(text);
	cat3 = cat_open(c3, cat2);
	ck_assert_ptr_nonnull(m2 = catalogue_find(cat3,
	    "blend", NULL));
	ck_assert_ptr_ne(m2, m1);
	catalogue_free(cat1);
	catalogue_free(cat2);
	catalogue_free(cat3);
	config_free(c1);
	config_free(c2);
	config_free(c3);
}
END_TEST

static Suite *
catalogue_suite(void)
{
	Suite	*s = suite_create("catalogue");
	TCase	*tc;

	tc = tcase_create("open");
	tcase_add_test(tc,
	    catalogue_leaves_out_bad_datasets_with_a_logged_error);
	tcase_add_test(tc, catalogue_find_looks_datasets_up_by_name);
	tcase_add_test(tc, catalogue_allows_only_the_groups_of_allow_groups);
	tcase_add_test(tc, catalogue_reopen_keeps_unchanged_datasets);
	tcase_add_test(tc,
	    catalogue_reopen_renews_a_mix_whose_source_changed);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every test with its configuration in a temporary directory. */
int
main(void)
{
	return (run_suite_in_dir(catalogue_suite(), "test-catalogue", rundir,
	    sizeof(rundir)));
}
