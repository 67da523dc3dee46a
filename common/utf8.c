/* SPDX-License-Identifier: MIT */
/*
 * UTF-8 checks and cleaning (RFC 3629: no overlongs, no surrogates,
 * nothing above U+10FFFF).
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* Length of the well-formed sequence at @s (@left bytes), or 0. */
static size_t
utf8_seq(const unsigned char *s, size_t left)
{
	uint32_t	cp;
	size_t		n, i;

	if (s[0] < 0x80)
		return (1);
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return (0);
	if (n > left)
		return (0);
	cp = s[0] & (0x7f >> n);
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return (0);
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return (0);
	return (n);
}

/* Whether the bytes are well-formed UTF-8. */
bool
utf8_valid(const char *s, size_t len)
{
	const unsigned char	*p = (const unsigned char *)s;
	size_t			 i = 0, n;

	while (i < len) {
		if ((n = utf8_seq(p + i, len - i)) == 0)
			return (false);
		i += n;
	}
	return (true);
}

/* Where to cut without splitting a character. */
size_t
utf8_cut(const char *s, size_t max)
{
	const unsigned char	*p = (const unsigned char *)s;
	size_t			 len = strlen(s), n;

	if (len <= max)
		return (len);
	n = max;
	/* Back over continuation bytes to the start of a character. */
	while (n > 0 && (p[n] & 0xc0) == 0x80)
		n--;
	return (n);
}

/* A clean, bounded, one-line copy. */
char *
utf8_clean(const char *s, size_t max)
{
	const unsigned char	*p = (const unsigned char *)s;
	char			*out;
	size_t			 len = strlen(s), i = 0, o = 0, n;

	if ((out = malloc((len < max ? len : max) + 1)) == NULL)
		return (NULL);
	while (i < len) {
		n = utf8_seq(p + i, len - i);
		if (n == 0 || p[i] < 0x20 || p[i] == 0x7f)
			n = 1;
		if (o + n > max)
			break;
		if (n == 1 && (p[i] < 0x20 || p[i] >= 0x7f))
			out[o] = '?';
		else
			memcpy(out + o, p + i, n);
		i += n;
		o += n;
	}
	out[o] = '\0';
	return (out);
}
