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

#endif
