/* SPDX-License-Identifier: MIT */
/*
 * Byte ranges of remote objects over HTTP(S), with libcurl: see fetch.c.
 */
#ifndef INFEED_FETCH_H
#define INFEED_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a HEAD tells of an object. */
struct fetch_object {
	uint64_t	size;
	char		etag[128];	/* "" when the server sends none */
};

/*
 * One range of fetch_ranges(): @len bytes at @off into @dst; of @url with
 * @etag when set (several objects in one call), else of the call's.  The
 * call sets @whole when the range came whole, and @cause (malloc'ed: the
 * caller frees it) on each range whose own tries failed; a failed call's
 * cause is a copy of the first's.  In a failed call the other ranges may
 * have come whole, or been left unfinished (neither).
 */
struct fetch_range {
	uint64_t	 off;
	size_t		 len;
	void		*dst;
	const char	*url;
	const char	*etag;
	bool		 whole;
	char		*cause;
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

/*
 * How the objects under one prefix are reached (fetch_site_set()): an
 * s3:// prefix's endpoint, region and keys, and for any prefix a CA file.
 */
struct fetch_site {
	char	*endpoint;	/* "https://host[:port]", path-style; NULL: AWS */
	char	*region;	/* for SigV4; NULL: us-east-1 */
	char	*access_key;	/* NULL: requests go unsigned */
	char	*secret_key;
	char	*token;		/* a session token, or NULL */
	char	*ca_file;	/* NULL: the system's CAs */
};

/**
 * fetch_site_set() - reach the URLs that start with @prefix as @site says
 * (copied; a later call for the same prefix replaces it; the longest
 * prefix that matches wins).  Return: 0, or -1 with *@cause.
 */
int	fetch_site_set(const char *prefix, const struct fetch_site *site,
	    char **cause);

/**
 * fetch_site_clear() - free what @site's strings hold and zero it.
 */
void	fetch_site_clear(struct fetch_site *site);

/**
 * fetch_url() - the http(s) URL that @url (http://, https:// or
 * s3://bucket/key) is fetched from, with its site's endpoint, in @buf.
 * Return: @buf, or NULL when @url is no URL fetch reads or is too long.
 */
char	*fetch_url(const char *url, char *buf, size_t len);

/* How many requests fetch_head() and fetch_ranges() sent (this thread). */
uint64_t	fetch_requests(void);

/* Free the calling thread's handles, before it ends. */
void	fetch_thread_end(void);

#endif
