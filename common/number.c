/* SPDX-License-Identifier: MIT */
/*
 * Whole numbers written by people (see number.h): one grammar for the
 * configuration file, datasets' sections and command lines.
 */

#include <stddef.h>

#include "number.h"

/* Read the decimal digits at @s; -1 on none or on overflow. */
int
number_scan_u64(const char *s, uint64_t *out, const char **end)
{
	uint64_t	v = 0;
	unsigned int	d;
	const char	*p = s;

	for (; *p >= '0' && *p <= '9'; p++) {
		d = (unsigned int)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return (-1);
		v = v * 10 + d;
	}
	if (p == s)
		return (-1);
	*out = v;
	*end = p;
	return (0);
}

/* Parse a whole number with blanks around it, in [@min, @max]. */
int
number_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out,
    const char **errstr)
{
	const char	*p = s, *why = "not a non-negative whole number";
	uint64_t	 v;

	while (*p == ' ' || *p == '\t')
		p++;
	if (number_scan_u64(p, &v, &p) != 0) {
		if (*p >= '0' && *p <= '9')
			why = "too large";
		goto fail;
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != '\0')
		goto fail;
	if (v < min) {
		why = min == 1 ? "must be at least 1" : "too small";
		goto fail;
	}
	if (v > max) {
		why = "too large";
		goto fail;
	}
	*out = v;
	return (0);

fail:
	if (errstr != NULL)
		*errstr = why;
	return (-1);
}
