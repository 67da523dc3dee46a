/* SPDX-License-Identifier: MIT */
/*
 * fail.c - refusals with a reason, and whole-number options.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

/* Parse a whole number from @lo to @hi for option @opt. */
int
cli_int(const char *opt, const char *s, long lo, long hi, long *v)
{
	char *end;

	errno = 0;
	*v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || *v < lo || *v > hi) {
		fprintf(stderr, "infeed-train: --%s takes a whole number from "
		    "%ld to %ld, got '%s'\n", opt, lo, hi, s);
		return (-1);
	}
	return (0);
}
