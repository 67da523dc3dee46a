/* SPDX-License-Identifier: MIT */
/*
 * The runner every Check program's main() calls: see runner.c.
 */
#ifndef INFEED_TEST_RUNNER_H
#define INFEED_TEST_RUNNER_H

#include <stddef.h>

#include <check.h>

int	run_suite(Suite *s);
int	run_suite_in_dir(Suite *s, const char *name, char *rundir,
	    size_t len);
void	remove_tree(const char *path);

#endif /* INFEED_TEST_RUNNER_H */
