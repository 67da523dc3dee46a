/* SPDX-License-Identifier: MIT */
/*
 * Allocation for the control plane: small, trusted sizes only.  Running out
 * of memory here is fatal; sizes that come from a client or a file are
 * checked by their callers and use plain malloc.
 */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xmalloc.h"

/* malloc or die. */
void *
xmalloc(size_t size)
{
	void	*p;

	if ((p = malloc(size ? size : 1)) == NULL)
		fatal("xmalloc %zu bytes", size);
	return (p);
}

/* calloc or die. */
void *
xcalloc(size_t n, size_t size)
{
	void	*p;

	if ((p = calloc(n ? n : 1, size ? size : 1)) == NULL)
		fatal("xcalloc %zu x %zu bytes", n, size);
	return (p);
}

/* reallocarray or die. */
void *
xreallocarray(void *old, size_t n, size_t size)
{
	void	*p;

	if ((p = reallocarray(old, n ? n : 1, size ? size : 1)) == NULL)
		fatal("xreallocarray %zu x %zu bytes", n, size);
	return (p);
}

/* strdup or die. */
char *
xstrdup(const char *s)
{
	char	*p;

	if ((p = strdup(s)) == NULL)
		fatal("xstrdup");
	return (p);
}

/* asprintf or die. */
char *
xasprintf(const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		fatal("xasprintf");
	va_end(ap);
	return (s);
}
