/* SPDX-License-Identifier: MIT */
/*
 * The dtype table: each element type's name and size, once, for the daemon,
 * libinfeed and the tools.
 */
#ifndef INFEED_COMMON_DTYPE_H
#define INFEED_COMMON_DTYPE_H

#include <stddef.h>

#include "infeed-dtype.h"

/**
 * dtype_size() - bytes of one element of @t; 0 for an unknown type.
 */
size_t		 dtype_size(enum infeed_dtype t);

/**
 * dtype_name() - "uint8", "float32", ...; "unknown" otherwise.
 */
const char	*dtype_name(enum infeed_dtype t);

/**
 * dtype_parse() - parse a dtype name; returns 0, or -1 for an unknown name.
 */
int		 dtype_parse(const char *name, enum infeed_dtype *out);

#endif /* INFEED_COMMON_DTYPE_H */
