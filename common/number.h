/* SPDX-License-Identifier: MIT */
/*
 * Whole numbers written by people: in the configuration file, a dataset's
 * section, and on the command line of infeedd and infeed-train.  One
 * grammar for all: decimal digits, with no sign, and an overflow is an
 * error, never a wrap.  Nothing here prints or exits; the caller says
 * which option or key was wrong.
 */
#ifndef INFEED_NUMBER_H
#define INFEED_NUMBER_H

#include <stdint.h>

/**
 * number_parse_u64() - parse @s, decimal digits with optional blanks
 * (spaces, tabs) around them, into *@out, which must lie in [@min, @max].
 * @errstr: on failure, if not NULL, set to a static phrase: "not a
 *          non-negative whole number", "too large", "too small" or "must
 *          be at least 1".
 *
 * Return: 0, or -1 with *@out unchanged.
 */
int	number_parse_u64(const char *s, uint64_t min, uint64_t max,
	    uint64_t *out, const char **errstr);

/**
 * number_scan_u64() - parse the decimal digits that start @s into *@out,
 * for a number followed by a unit ("4G", "30s"); *@end is set just past
 * them.  Return: 0, or -1 when @s starts with no digit or the number
 * overflows 64 bits.
 */
int	number_scan_u64(const char *s, uint64_t *out, const char **end);

#endif /* INFEED_NUMBER_H */
