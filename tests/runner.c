/* SPDX-License-Identifier: MIT */
/*
 * The one main() of every Check program, less what the program sets up
 * for itself: run_suite() runs a suite's tests as Check's CK_* variables
 * say (CK_RUN_CASE, CK_VERBOSITY, CK_FORK...) and gives the exit status;
 * run_suite_in_dir() does so in a directory of the run's own, made under
 * $TMPDIR (or /tmp) and removed with everything in it at the end, for the
 * programs that write files; remove_tree() is the removal, for the tests'
 * own directories too.
 */

#include <sys/stat.h>

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "runner.h"

/*
 * Run @s's tests; EXIT_SUCCESS when every one passed.  SIGPIPE is
 * ignored: a peer that hangs up is a failed write for the test to see,
 * not the death of the program.
 */
int
run_suite(Suite *s)
{
	SRunner	*sr = srunner_create(s);
	int	 nfailed;

	signal(SIGPIPE, SIG_IGN);
	srunner_run_all(sr, CK_ENV);
	nfailed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (nfailed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}

/*
 * run_suite() in a fresh directory $TMPDIR/NAME.XXXXXX, whose path goes
 * in @rundir (@len bytes) for the tests, removed with all it holds after.
 */
int
run_suite_in_dir(Suite *s, const char *name, char *rundir, size_t len)
{
	const char	*tmp;
	int		 n, status;

	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0')
		tmp = "/tmp";
	n = snprintf(rundir, len, "%s/%s.XXXXXX", tmp, name);
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "%s: the directory's path under %s is longer "
		    "than %zu bytes\n", name, tmp, len - 1);
		return (EXIT_FAILURE);
	}
	if (mkdtemp(rundir) == NULL) {
		fprintf(stderr, "mkdtemp %s: %s\n", rundir, strerror(errno));
		return (EXIT_FAILURE);
	}
	status = run_suite(s);
	remove_tree(rundir);
	return (status);
}

/* nftw's callback for remove_tree(): one entry, children first. */
static int
remove_tree_cb(const char *path, const struct stat *st, int flag,
    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return (0);
}

/* Remove @path and everything under it; symlinks go, never followed. */
void
remove_tree(const char *path)
{
	nftw(path, remove_tree_cb, 16, FTW_DEPTH | FTW_PHYS);
}
