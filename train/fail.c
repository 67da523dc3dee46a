/* SPDX-License-Identifier: MIT */
/*
 * fail.c - refusals with a reason.
 */
#include <stdarg.h>
#include <stdio.h>

#include "fail.h"

/* Format an error into @err and return -1. */
int
train_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return (-1);
}
