/* SPDX-License-Identifier: MIT */
/*
 * Byte ranges of remote objects over HTTP(S), with libcurl's multi
 * interface: every range of a call is in flight at once (a call's ranges
 * may be of several objects, each range naming its own), and the easy
 * handles (and so their connections, kept alive) are reused from call to
 * call.  TLS peers are verified (libcurl's default, kept).  A range that
 * fails in a way a retry can mend (5xx, 429, a reset, a stall, a body
 * shorter than asked) is asked again after a backoff that doubles, with
 * jitter so that many workers do not come back together; after
 * FETCH_ATTEMPTS the error names the URL, the range and what went wrong.
 *
 * An s3://bucket/key URL is fetched from its site's endpoint, path-style
 * (endpoint/bucket/key: S3-compatible stores), or else from AWS's
 * virtual-hosted https://bucket.s3.REGION.amazonaws.com/key; a site with
 * keys has each request signed by libcurl (CURLOPT_AWS_SIGV4) with them,
 * and its session token sent as x-amz-security-token.  The keys are
 * never put in a message: errors name the URL as the dataset gave it.
 * A site's CA file (ca_file) replaces the system's CAs for its https
 * peers, which are verified all the same.
 *
 * The calls block: they are made in a worker process (the dataset's read,
 * for the row that needs the bytes) and at a dataset's open (one HEAD,
 * FETCH_HEAD_ATTEMPTS tries of at most FETCH_HEAD_MS: the catalogue opens
 * datasets at start-up and, at a reload, after cache_heads_start() asked
 * them in a thread, so a server that does not answer never holds the
 * daemon's event loop).  The handles are
 * the calling thread's own (a thread of cache.c's fetches beside its
 * worker): a child after fork() makes new ones, so no two processes
 * share a connection; a thread that ends frees its with fetch_thread_end().
 */

#include <sys/types.h>

#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "clock.h"
#include "fetch.h"

#define FETCH_ATTEMPTS		5
#define FETCH_BACKOFF_MS	50	/* the first wait; doubles */
#define FETCH_MAX_HANDLES	8	/* ranges in flight at once */
#define FETCH_CONNECT_MS	5000
#define FETCH_URL_MAX		4096
/* SHA-256 of no bytes: a GET's or a HEAD's payload, for SigV4. */
#define FETCH_EMPTY_SHA256	\
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/*
 * A body slower than FETCH_STALL_BYTES a second for FETCH_STALL_S is
 * stalled: one that trickles (a few bytes a second) holds its worker as
 * one that stopped does, and a block at 1 KiB/s would take 17 minutes.
 * INFEED_FETCH_STALL_S in the environment shortens the time, for the
 * tests (five tries of ten seconds are too long to wait out there).
 */
#define FETCH_STALL_BYTES	1024
#define FETCH_STALL_S		10
/*
 * A dataset's open asks the size with a HEAD, and a reload waits for
 * them (in a thread): fewer tries and a short limit bound that wait.
 */
#define FETCH_HEAD_ATTEMPTS	2
#define FETCH_HEAD_MS		3000

/* One transfer of a call. */
struct fetch_xfer {
	CURL			*easy;
	struct fetch_range	*r;
	size_t			 got;
	char			 err[CURL_ERROR_SIZE];
	struct curl_slist	*hdrs;	/* a token, If-Match: made once */
	bool			 if_match;
	bool			 signed_hdrs;
	struct fetch_object	*head;	/* a HEAD's: its ETag goes here */
};

/*
 * The calling thread's handles (a cache prefetch thread has its own:
 * cache.c), remade in a child after fork().
 */
struct fetch_handles {
	pid_t	 pid;
	CURLM	*multi;
	CURL	*easy[FETCH_MAX_HANDLES];
	uint64_t requests;
};
static __thread struct fetch_handles	fetch_state;

/* The sites fetch_site_set() was given; a child after fork() has them too. */
struct fetch_site_entry {
	char			*prefix;
	struct fetch_site	 site;
};
static struct fetch_site_entry	*fetch_sites;
static size_t			 fetch_nsites;

/* The handles of the process this one was forked from. */
static __thread struct fetch_handles	fetch_inherited;

static int	fetch_setup(char **);
static void	fetch_fail(char **, const char *, ...)
		    __attribute__((__format__(__printf__, 2, 3)));

/* Set *cause to a malloc'ed message. */
static void
fetch_fail(char **cause, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	if (vasprintf(cause, fmt, ap) == -1)
		*cause = NULL;
	va_end(ap);
}

/* Make this process's handles (again after a fork: the parent's stay its). */
static int
fetch_setup(char **cause)
{
	size_t	i;

	if (fetch_state.multi != NULL && fetch_state.pid == getpid())
		return (0);
	/*
	 * A parent's handles are kept as they are, unused: freeing them
	 * would shut its TLS connections from here.
	 */
	if (fetch_state.multi != NULL) {
		fetch_inherited = fetch_state;
		memset(&fetch_state, 0, sizeof fetch_state);
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    (fetch_state.multi = curl_multi_init()) == NULL) {
		fetch_fail(cause, "libcurl would not start");
		return (-1);
	}
	for (i = 0; i < FETCH_MAX_HANDLES; i++) {
		if ((fetch_state.easy[i] = curl_easy_init()) == NULL) {
			fetch_fail(cause, "libcurl would not start");
			return (-1);
		}
	}
	fetch_state.pid = getpid();
	return (0);
}

/* A copy of @s, or NULL with errno; NULL for NULL. */
static int
fetch_dup(char **dst, const char *s)
{
	*dst = NULL;
	if (s != NULL && (*dst = strdup(s)) == NULL)
		return (-1);
	return (0);
}

/* Free what @site's strings hold, the keys wiped first. */
void
fetch_site_clear(struct fetch_site *site)
{
	if (site->secret_key != NULL)
		explicit_bzero(site->secret_key, strlen(site->secret_key));
	if (site->token != NULL)
		explicit_bzero(site->token, strlen(site->token));
	free(site->endpoint);
	free(site->region);
	free(site->access_key);
	free(site->secret_key);
	free(site->token);
	free(site->ca_file);
	memset(site, 0, sizeof *site);
}

/* Reach the URLs under @prefix as @site says. */
int
fetch_site_set(const char *prefix, const struct fetch_site *site,
    char **cause)
{
	struct fetch_site_entry	*e = NULL, *n;
	struct fetch_site	 c;
	size_t			 i;

	*cause = NULL;
	memset(&c, 0, sizeof c);
	if (fetch_dup(&c.endpoint, site->endpoint) != 0 ||
	    fetch_dup(&c.region, site->region) != 0 ||
	    fetch_dup(&c.access_key, site->access_key) != 0 ||
	    fetch_dup(&c.secret_key, site->secret_key) != 0 ||
	    fetch_dup(&c.token, site->token) != 0 ||
	    fetch_dup(&c.ca_file, site->ca_file) != 0)
		goto fail;
	for (i = 0; i < fetch_nsites; i++) {
		if (strcmp(fetch_sites[i].prefix, prefix) == 0)
			e = &fetch_sites[i];
	}
	if (e == NULL) {
		if ((n = reallocarray(fetch_sites, fetch_nsites + 1,
		    sizeof *n)) == NULL)
			goto fail;
		fetch_sites = n;
		e = &fetch_sites[fetch_nsites];
		if ((e->prefix = strdup(prefix)) == NULL)
			goto fail;
		memset(&e->site, 0, sizeof e->site);
		fetch_nsites++;
	}
	fetch_site_clear(&e->site);
	e->site = c;
	return (0);
fail:
	fetch_site_clear(&c);
	fetch_fail(cause, "%s", strerror(ENOMEM));
	return (-1);
}

/* The site of @url: the longest prefix that matches, or NULL. */
static const struct fetch_site *
fetch_site_of(const char *url)
{
	const struct fetch_site	*best = NULL;
	size_t			 i, len, blen = 0;

	for (i = 0; i < fetch_nsites; i++) {
		len = strlen(fetch_sites[i].prefix);
		if (len >= blen && strncmp(url, fetch_sites[i].prefix,
		    len) == 0) {
			best = &fetch_sites[i].site;
			blen = len;
		}
	}
	return (best);
}

/* The http(s) URL that @url is fetched from. */
char *
fetch_url(const char *url, char *buf, size_t len)
{
	const struct fetch_site	*site;
	const char		*bucket, *key, *region;
	size_t			 blen, elen;
	int			 n;

	if (strncmp(url, "http://", 7) == 0 ||
	    strncmp(url, "https://", 8) == 0)
		n = snprintf(buf, len, "%s", url);
	else if (strncmp(url, "s3://", 5) == 0) {
		bucket = url + 5;
		if ((key = strchr(bucket, '/')) == NULL || key == bucket)
			return (NULL);
		blen = (size_t)(key - bucket);
		site = fetch_site_of(url);
		if (site != NULL && site->endpoint != NULL) {
			elen = strlen(site->endpoint);
			while (elen > 0 && site->endpoint[elen - 1] == '/')
				elen--;
			n = snprintf(buf, len, "%.*s/%.*s%s", (int)elen,
			    site->endpoint, (int)blen, bucket, key);
		} else {
			region = site != NULL && site->region != NULL ?
			    site->region : "us-east-1";
			n = snprintf(buf, len, "https://%.*s.s3.%s."
			    "amazonaws.com%s", (int)blen, bucket, region, key);
		}
	} else
		return (NULL);
	if (n < 0 || (size_t)n >= len)
		return (NULL);
	return (buf);
}

/*
 * Body bytes into the range; more than asked fails the transfer.  An
 * error's body is dropped: its status judges the transfer (fetch_judge()),
 * and a page longer than the range must not hide a 404 behind a failed
 * write, tried again.
 */
static size_t
fetch_write_cb(char *p, size_t size, size_t n, void *arg)
{
	struct fetch_xfer	*x = arg;
	size_t			 len = size * n;
	long			 code = 0;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200 && code != 206)
		return (len);
	if (x->r == NULL || len > x->r->len - x->got)
		return (0);
	memcpy((char *)x->r->dst + x->got, p, len);
	x->got += len;
	return (len);
}

/* A HEAD's ETag header, quotes kept (they are part of it). */
static size_t
fetch_header_cb(char *p, size_t size, size_t n, void *arg)
{
	struct fetch_xfer	*x = arg;
	size_t			 len = size * n, v;

	if (x->head == NULL || len < 6 || strncasecmp(p, "etag:", 5) != 0)
		return (len);
	for (v = 5; v < len && (p[v] == ' ' || p[v] == '\t'); v++)
		;
	while (len > v && (p[len - 1] == '\r' || p[len - 1] == '\n' ||
	    p[len - 1] == ' '))
		len--;
	if (len - v < sizeof x->head->etag) {
		memcpy(x->head->etag, p + v, len - v);
		x->head->etag[len - v] = '\0';
	}
	return (size * n);
}

/* Seconds under FETCH_STALL_BYTES a second that make a stall. */
static long
fetch_stall_s(void)
{
	return (clock_wait_s("INFEED_FETCH_STALL_S", FETCH_STALL_S));
}

/* Set up @x's handle for @url: a range, or a HEAD when x->head is set. */
static int
fetch_prepare(struct fetch_xfer *x, const char *url, const char *etag)
{
	const struct fetch_site	*site = fetch_site_of(url);
	char			 range[64], hdr[160], real[FETCH_URL_MAX];
	char			 sigv4[160], *tok;
	struct curl_slist	*l;
	CURL			*e = x->easy;

	curl_easy_reset(e);
	if (fetch_url(url, real, sizeof real) == NULL)
		return (-1);
	curl_easy_setopt(e, CURLOPT_URL, real);
	if (site != NULL && site->ca_file != NULL)
		curl_easy_setopt(e, CURLOPT_CAINFO, site->ca_file);
	if (site != NULL && site->access_key != NULL) {
		snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3",
		    site->region != NULL ? site->region : "us-east-1");
		curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4);
		curl_easy_setopt(e, CURLOPT_USERNAME, site->access_key);
		curl_easy_setopt(e, CURLOPT_PASSWORD, site->secret_key);
	}
	if (!x->signed_hdrs && site != NULL && site->access_key != NULL) {
		/*
		 * S3 refuses a SigV4 request without the payload's hash
		 * (radosgw: SignatureDoesNotMatch), and libcurl 7.88 does
		 * not send it: an empty body's, which libcurl then signs.
		 */
		if ((l = curl_slist_append(x->hdrs, "x-amz-content-sha256: "
		    FETCH_EMPTY_SHA256)) == NULL)
			return (-1);
		x->hdrs = l;
		x->signed_hdrs = true;
		if (site->token != NULL) {
			if (asprintf(&tok, "x-amz-security-token: %s",
			    site->token) == -1)
				return (-1);
			l = curl_slist_append(x->hdrs, tok);
			explicit_bzero(tok, strlen(tok));
			free(tok);
			if (l == NULL)
				return (-1);
			x->hdrs = l;
		}
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)FETCH_CONNECT_MS);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, (long)FETCH_STALL_BYTES);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, fetch_stall_s());
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->err);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	x->err[0] = '\0';
	x->got = 0;
	if (x->head != NULL) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)FETCH_HEAD_MS);
		curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, fetch_header_cb);
		curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
		return (0);
	}
	snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, x->r->off,
	    x->r->off + x->r->len - 1);
	curl_easy_setopt(e, CURLOPT_RANGE, range);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fetch_write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	if (etag[0] != '\0' && !x->if_match) {
		snprintf(hdr, sizeof hdr, "If-Match: %s", etag);
		if ((l = curl_slist_append(x->hdrs, hdr)) == NULL)
			return (-1);
		x->hdrs = l;
		x->if_match = true;
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->hdrs);
	return (0);
}

/*
 * Judge one finished transfer: 0 done, 1 worth another try, -1 not; the
 * reason in @why.
 */
static int
fetch_judge(struct fetch_xfer *x, CURLcode rc, char *why, size_t len)
{
	long	code = 0;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
	if (rc != CURLE_OK) {
		snprintf(why, len, "%s", x->err[0] != '\0' ? x->err :
		    curl_easy_strerror(rc));
		switch (rc) {
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_URL_MALFORMAT:
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CACERT_BADFILE:
			return (-1);
		default:
			return (1);
		}
	}
	if (code == 412) {
		snprintf(why, len, "the object changed on the server (its "
		    "ETag is no longer the one cached): the old and the new "
		    "are not mixed; reload the dataset to read the new one");
		return (-1);
	}
	if (code == 401 || code == 403) {
		snprintf(why, len, "the server answered %ld (access denied): "
		    "check the credentials, the region and the endpoint, or "
		    "that the object may be read", code);
		return (-1);
	}
	if (code >= 500 || code == 429) {
		snprintf(why, len, "the server answered %ld", code);
		return (1);
	}
	if (x->head != NULL) {
		if (code != 200) {
			snprintf(why, len, "the server answered %ld", code);
			return (-1);
		}
		return (0);
	}
	if (code != 206 && !(code == 200 && x->r->off == 0)) {
		snprintf(why, len, "the server answered %ld to a range "
		    "request (expected 206)", code);
		return (-1);
	}
	if (x->got != x->r->len) {
		snprintf(why, len, "the body was cut short: %zu of %zu bytes",
		    x->got, x->r->len);
		return (1);
	}
	return (0);
}

/* Run together the transfers of @x whose res[] is 1; each one's verdict there. */
static int
fetch_run(struct fetch_xfer *x, size_t n, int *res, char (*why)[256],
    char **cause)
{
	struct fetch_xfer	*done;
	CURLMsg			*m;
	CURLMcode		 mc = CURLM_OK;
	size_t			 i;
	int			 running, left;

	for (i = 0; i < n; i++) {
		if (res[i] != 1)
			continue;
		curl_multi_add_handle(fetch_state.multi, x[i].easy);
		fetch_state.requests++;
	}
	do {
		mc = curl_multi_perform(fetch_state.multi, &running);
		if (mc == CURLM_OK && running > 0)
			mc = curl_multi_poll(fetch_state.multi, NULL, 0, 1000,
			    NULL);
	} while (mc == CURLM_OK && running > 0);
	while ((m = curl_multi_info_read(fetch_state.multi, &left)) != NULL) {
		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
		    (char **)&done);
		i = (size_t)(done - x);
		res[i] = fetch_judge(done, m->data.result, why[i],
		    sizeof why[i]);
	}
	for (i = 0; i < n; i++)
		curl_multi_remove_handle(fetch_state.multi, x[i].easy);
	if (mc != CURLM_OK) {
		fetch_fail(cause, "libcurl: %s", curl_multi_strerror(mc));
		return (-1);
	}
	return (0);
}

/* Free a transfer's headers, wiped first: one may be the session token. */
static void
fetch_headers_free(struct curl_slist *l)
{
	struct curl_slist	*h;

	for (h = l; h != NULL; h = h->next)
		explicit_bzero(h->data, strlen(h->data));
	curl_slist_free_all(l);
}

/* Sleep before attempt @k (1..): doubling, with up to half again at random. */
static void
fetch_backoff(unsigned k)
{
	struct timespec	ts;
	uint64_t	ms = (uint64_t)FETCH_BACKOFF_MS << (k - 1);

	ms += (uint64_t)random() % (ms / 2 + 1);
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

/* The URL of range @r: its own, or the call's (@url in fetch_do()). */
#define RURL(r)	((r) != NULL && (r)->url != NULL ? (r)->url : url)

/* The whole of fetch_head() and fetch_ranges(): @head set for a HEAD. */
static int
fetch_do(const char *url, const char *etag, struct fetch_range *r, size_t n,
    struct fetch_object *head, char **cause)
{
	struct fetch_xfer	 x[FETCH_MAX_HANDLES];
	int			 res[FETCH_MAX_HANDLES];
	char			 why[FETCH_MAX_HANDLES][256], tries[32];
	char			 real[FETCH_URL_MAX], *failed;
	size_t			 base, k, m, i;
	unsigned		 attempt, tries_max;
	int			 rc = 0;

	*cause = NULL;
	tries_max = head != NULL ? FETCH_HEAD_ATTEMPTS : FETCH_ATTEMPTS;
	if (fetch_url(url, real, sizeof real) == NULL) {
		fetch_fail(cause, "%s: not a URL infeed reads (http://, "
		    "https:// or s3://bucket/key, under %d bytes)", url,
		    FETCH_URL_MAX);
		return (-1);
	}
	if (fetch_setup(cause) != 0)
		return (-1);
	for (i = 0; head == NULL && i < n; i++) {
		r[i].whole = false;
		r[i].cause = NULL;
	}
	for (base = 0; base < n && rc == 0; base += m) {
		m = n - base < FETCH_MAX_HANDLES ? n - base : FETCH_MAX_HANDLES;
		memset(x, 0, sizeof x);
		for (i = 0; i < m; i++) {
			x[i].easy = fetch_state.easy[i];
			x[i].r = head != NULL ? NULL : &r[base + i];
			x[i].head = head;
			res[i] = 1;
		}
		for (attempt = 1; rc == 0; attempt++) {
			/* Only the transfers still worth a try go again. */
			for (i = k = 0; i < m && rc == 0; i++) {
				if (res[i] != 1)
					continue;
				k++;
				if (fetch_prepare(&x[i], RURL(x[i].r),
				    x[i].r != NULL && x[i].r->etag != NULL ?
				    x[i].r->etag : etag) != 0) {
					fetch_fail(cause, "%s", strerror(ENOMEM));
					rc = -1;
				}
			}
			if (rc != 0 || k == 0)
				break;
			if (fetch_run(x, m, res, why, cause) != 0) {
				rc = -1;
				break;
			}
			for (i = 0; i < m; i++)
				if (res[i] == 0 && x[i].r != NULL)
					x[i].r->whole = true;
			/* Each range that failed has its cause; the call, the first's. */
			for (i = 0; i < m; i++) {
				if (res[i] == 1 && attempt < tries_max)
					continue;
				if (res[i] == 1)
					snprintf(tries, sizeof tries, " (tried "
					    "%u times)", tries_max);
				else if (res[i] == -1)
					tries[0] = '\0';
				else
					continue;
				if (head != NULL)
					fetch_fail(&failed, "%s: %s%s", url,
					    why[i], tries);
				else
					fetch_fail(&failed, "%s: bytes %" PRIu64
					    " to %" PRIu64 ": %s%s",
					    RURL(x[i].r), x[i].r->off,
					    x[i].r->off + x[i].r->len - 1,
					    why[i], tries);
				if (rc == 0 && failed != NULL)
					*cause = x[i].r != NULL ?
					    strdup(failed) : failed;
				if (x[i].r != NULL)
					x[i].r->cause = failed;
				else if (rc != 0)
					free(failed);
				rc = -1;
			}
			if (rc == 0)
				for (i = 0; i < m; i++)
					if (res[i] == 1) {
						fetch_backoff(attempt);
						break;
					}
		}
		for (i = 0; i < m; i++)
			fetch_headers_free(x[i].hdrs);
	}
	return (rc);
}

/* The size and ETag of @url. */
int
fetch_head(const char *url, struct fetch_object *o, char **cause)
{
	struct fetch_range	dummy = { 0 };
	curl_off_t		len = -1;

	memset(o, 0, sizeof *o);
	if (fetch_do(url, "", &dummy, 1, o, cause) != 0)
		return (-1);
	curl_easy_getinfo(fetch_state.easy[0], CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
	    &len);
	if (len < 0) {
		fetch_fail(cause, "%s: the server gave no Content-Length; a "
		    "remote dataset needs to know the object's size", url);
		return (-1);
	}
	o->size = (uint64_t)len;
	return (0);
}

/* The @n ranges of @url, in flight together. */
int
fetch_ranges(const char *url, const char *etag, struct fetch_range *r,
    size_t n, char **cause)
{
	return (fetch_do(url, etag, r, n, NULL, cause));
}

/* Requests sent by this thread. */
uint64_t
fetch_requests(void)
{
	return (fetch_state.requests);
}

/* Free the calling thread's handles (it ends). */
void
fetch_thread_end(void)
{
	size_t	i;

	if (fetch_state.multi == NULL || fetch_state.pid != getpid())
		return;
	for (i = 0; i < FETCH_MAX_HANDLES; i++)
		if (fetch_state.easy[i] != NULL)
			curl_easy_cleanup(fetch_state.easy[i]);
	curl_multi_cleanup(fetch_state.multi);
	memset(&fetch_state, 0, sizeof fetch_state);
}
