/* SPDX-License-Identifier: MIT */
/*
 * UTF-8 for strings that come from a client or a file and go back out in
 * frames (which strict protobuf decoders check) or into logs.
 */
#ifndef INFEED_UTF8_H
#define INFEED_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/**
 * utf8_valid() - whether the @len bytes at @s are well-formed UTF-8.
 */
bool	 utf8_valid(const char *s, size_t len);

/**
 * utf8_cut() - the largest length <= @max at which @s (NUL-terminated)
 * can be cut without splitting a character.
 */
size_t	 utf8_cut(const char *s, size_t max);

/**
 * utf8_clean() - a malloc'd copy of @s of at most @max bytes, cut on a
 * character boundary, with each byte of a malformed sequence and each
 * control character (newline, escape, ...) replaced by '?', so that it is
 * valid UTF-8 and one line in a log.  NULL without memory.
 */
char	*utf8_clean(const char *s, size_t max);

#endif /* INFEED_UTF8_H */
