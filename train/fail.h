/* SPDX-License-Identifier: MIT */
/*
 * fail.h - the one way train/ reports a refusal: a sentence in the
 * caller's buffer, and -1.
 */
#ifndef INFEED_TRAIN_FAIL_H
#define INFEED_TRAIN_FAIL_H

#include <stddef.h>

/**
 * train_fail() - format the reason into @err (if not NULL and there is
 * room) and return -1.
 */
int train_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/**
 * cli_int() - parse --@opt's @s as a whole number in [@lo, @hi] into *@v;
 * on failure print the advice on stderr and return -1.
 */
int cli_int(const char *opt, const char *s, long lo, long hi, long *v);

#endif
