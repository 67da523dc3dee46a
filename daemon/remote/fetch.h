/* SPDX-License-Identifier: MIT */
/*
 * Byte ranges of remote objects over HTTP(S), with libcurl: see fetch.c.
 */
#ifndef INFEED_FETCH_H
#define INFEED_FETCH_H

#include <stddef.h>
#include <stdint.h>

/* What a HEAD tells of an object. */
struct fetch_object {
	uint64_t	size;
	char		etag[128];	/* "" when the server sends none */
};

/* One range of fetch_ranges(): @len bytes at @off into @dst. */
struct fetch_range {
	uint64_t	 off;
	size_t		 len;
	void		*dst;
};

/**
 * fetch_head() - the size and ETag of @url in *@o.
 * Return: 0, or -1 with *@cause (malloc'ed) naming the URL.
 */
int	fetch_head(const char *url, struct fetch_object *o, char **cause);

/**
 * fetch_ranges() - the @n ranges of @url, all in flight at once.  With
 * @etag not "", a server whose object no longer has that ETag fails the
 * call rather than mixing the new object's bytes with the old.
 * Return: 0 when every range is whole, or -1 with *@cause naming the URL.
 */
int	fetch_ranges(const char *url, const char *etag,
	    struct fetch_range *r, size_t n, char **cause);

/* How many requests fetch_head() and fetch_ranges() sent (this process). */
uint64_t	fetch_requests(void);

#endif
