/* SPDX-License-Identifier: MIT */
/*
 * The dtype table.
 */

#include <string.h>

#include "dtype.h"

static const struct {
	enum infeed_dtype	 type;
	const char		*name;
	size_t			 size;
} dtypes[] = {
	{ INFEED_DTYPE_UINT8,	"uint8",	1 },
	{ INFEED_DTYPE_INT32,	"int32",	4 },
	{ INFEED_DTYPE_INT64,	"int64",	8 },
	{ INFEED_DTYPE_FLOAT16,	"float16",	2 },
	{ INFEED_DTYPE_FLOAT32,	"float32",	4 },
	{ INFEED_DTYPE_FLOAT64,	"float64",	8 },
};

#define NITEMS(a) (sizeof (a) / sizeof (a)[0])

/* Bytes of one element of @t. */
size_t
dtype_size(enum infeed_dtype t)
{
	size_t	i;

	for (i = 0; i < NITEMS(dtypes); i++) {
		if (dtypes[i].type == t)
			return (dtypes[i].size);
	}
	return (0);
}

/* The name of @t. */
const char *
dtype_name(enum infeed_dtype t)
{
	size_t	i;

	for (i = 0; i < NITEMS(dtypes); i++) {
		if (dtypes[i].type == t)
			return (dtypes[i].name);
	}
	return ("unknown");
}

/* Parse a dtype name. */
int
dtype_parse(const char *name, enum infeed_dtype *out)
{
	size_t	i;

	for (i = 0; i < NITEMS(dtypes); i++) {
		if (strcmp(dtypes[i].name, name) == 0) {
			*out = dtypes[i].type;
			return (0);
		}
	}
	return (-1);
}
