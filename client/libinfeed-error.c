/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's last error, the handle's: every file records its failures
 * here (infeed_fail), the caller reads them (infeed_error,
 * infeed_daemon_code).  The library never prints.
 */

#include <stdarg.h>
#include <stdio.h>

#include "libinfeed-private.h"

/* Record an error message and return @code. */
int
infeed_fail(struct infeed *f, int code, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(f->error, sizeof(f->error), fmt, ap);
	va_end(ap);
	return (code);
}

/* The last error's text. */
const char *
infeed_error(const struct infeed *f)
{
	return (f->error[0] ? f->error : "no error");
}

/* The daemon's ErrorCode behind the last INFEED_ERR_DAEMON. */
int
infeed_daemon_code(const struct infeed *f)
{
	return (f->daemon_code);
}
