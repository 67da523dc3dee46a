/* SPDX-License-Identifier: MIT */
/*
 * Brace expansion of shard patterns, as Python's braceexpand 0.1.7 (which
 * webdataset uses) does it: "/data/train-{000000..000146}.tar".
 */
#ifndef INFEED_BRACES_H
#define INFEED_BRACES_H

#include <stddef.h>

/* The most names one pattern may expand to. */
#define BRACES_MAX_NAMES	1000000

/**
 * braces_expand() - expand @pattern into *@out, a malloc'd array of *@n
 * malloc'd strings (free them with braces_free()), in braceexpand's order.
 *
 * - "{a..b}" and "{a..b..step}" count from integer a to b inclusive, up or
 *   down; step's sign is ignored and 0 means 1.  When a or b other than
 *   "0" and "-0" starts with "0" or "-0", every number is zero-padded to
 *   the longer of the two, sign included ("{1..010}", "{-01..1}").
 * - "{a..z}" counts letters the same way (by code point).
 * - "{x,y,...}" is each alternative in turn; alternatives nest.
 * - several groups give their Cartesian product, the leftmost slowest.
 * - a group with neither ("a{b}c", "{}") stays as written.
 * - "\\c" is c, taken literally.
 *
 * Return: 0, or -1 with *@err set to a static phrase (unbalanced braces,
 * a range too long, more than BRACES_MAX_NAMES names, no memory).
 */
int	braces_expand(const char *pattern, char ***out, size_t *n,
	    const char **err);

/**
 * braces_free() - free what braces_expand() gave; NULL is a no-op.
 */
void	braces_free(char **names, size_t n);

#endif /* INFEED_BRACES_H */
