/* SPDX-License-Identifier: MIT */
/*
 * Allocation for the control plane: small, trusted sizes only; running out
 * of memory is fatal.  Sizes from a client or a file use plain malloc.
 */
#ifndef INFEED_XMALLOC_H
#define INFEED_XMALLOC_H

#include <stddef.h>

#include "log.h"

void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xreallocarray(void *, size_t, size_t);
char	*xstrdup(const char *);
char	*xasprintf(const char *, ...) PRINTFLIKE(1, 2);

#endif /* INFEED_XMALLOC_H */
