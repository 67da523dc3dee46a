/* SPDX-License-Identifier: MIT */
/*
 * A remote dataset's site, from its section's keys:
 *
 *	endpoint = https://minio.internal:9000	(s3://: an S3-compatible
 *					store, path-style; default AWS)
 *	region = eu-west-1		(s3://: SigV4's region; default
 *					AWS_REGION, AWS_DEFAULT_REGION,
 *					else us-east-1)
 *	credentials = /etc/infeed/s3.ini	(a shared-credentials file)
 *	profile = training		(its section; default AWS_PROFILE,
 *					else default)
 *	ca_file = /etc/infeed/ca.pem	(https: trust these CAs instead of
 *					the system's; peers still verified)
 *
 * The keys of an s3:// site come from the first of: the file named by
 * "credentials =" (which must then hold them); AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) in infeedd's environment;
 * the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
 * ~/.aws/credentials) when it has the profile.  With none, requests go
 * unsigned (a public bucket).  A site is a bucket (s3://bucket/) or a
 * host (scheme://host:port/): datasets on one site share its settings,
 * the last one opened winning.  The keys are read when the dataset opens
 * (in the daemon, before its workers fork) and kept in memory only, wiped
 * before they are freed; no message names them.  URLs are named in
 * errors, logs and status, so one that holds a secret (a password, or a
 * presigned query: s3_url_shown()) is refused without being named.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "s3.h"

/* Set *cause to a malloc'ed message; return -1. */
static int
s3_fail(char **cause, const char *fmt, ...)
    __attribute__((__format__(__printf__, 2, 3)));

static int
s3_fail(char **cause, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	if (vasprintf(cause, fmt, ap) == -1)
		*cause = NULL;
	va_end(ap);
	return (-1);
}

/* Whether @url is http://, https:// or s3://. */
int
s3_url(const char *url)
{
	return (url != NULL && (strncmp(url, "http://", 7) == 0 ||
	    strncmp(url, "https://", 8) == 0 || strncmp(url, "s3://", 5) == 0));
}

/* @s without the blanks around it, in place. */
static char *
s3_trim(char *s)
{
	size_t	len;

	while (*s == ' ' || *s == '\t')
		s++;
	len = strlen(s);
	while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t' ||
	    s[len - 1] == '\n' || s[len - 1] == '\r'))
		s[--len] = '\0';
	return (s);
}

/* Replace the key *@dst by a copy of @v, the old one wiped; -1 on ENOMEM. */
static int
s3_key_set(char **dst, const char *v)
{
	if (*dst != NULL)
		explicit_bzero(*dst, strlen(*dst));
	free(*dst);
	return ((*dst = strdup(v)) == NULL ? -1 : 0);
}

/*
 * The keys of @profile in the shared-credentials file @path into @site.
 * Return: 1 found, 0 no such file or profile (with @must, an error), -1.
 */
static int
s3_keys_file(const char *path, const char *profile, bool must,
    struct fetch_site *site, char **cause)
{
	FILE	*f;
	char	 line[4096], *k, *v, *eq, want[300];
	bool	 in = false, seen = false, nomem = false;
	int	 rc = 0;

	if ((f = fopen(path, "re")) == NULL) {
		if (!must)
			return (0);
		return (s3_fail(cause, "credentials = %s: %s; name a "
		    "shared-credentials file infeedd may read", path,
		    strerror(errno)));
	}
	snprintf(want, sizeof want, "profile %s", profile);
	while (fgets(line, sizeof line, f) != NULL) {
		k = s3_trim(line);
		if (*k == '#' || *k == ';' || *k == '\0')
			continue;
		if (*k == '[') {
			if ((v = strchr(k, ']')) != NULL)
				*v = '\0';
			k = s3_trim(k + 1);
			in = strcmp(k, profile) == 0 || strcmp(k, want) == 0;
			seen = seen || in;
			continue;
		}
		if (!in || (eq = strchr(k, '=')) == NULL)
			continue;
		*eq = '\0';
		v = s3_trim(eq + 1);
		k = s3_trim(k);
		if (strcmp(k, "aws_access_key_id") == 0)
			nomem |= s3_key_set(&site->access_key, v) != 0;
		else if (strcmp(k, "aws_secret_access_key") == 0)
			nomem |= s3_key_set(&site->secret_key, v) != 0;
		else if (strcmp(k, "aws_session_token") == 0)
			nomem |= s3_key_set(&site->token, v) != 0;
	}
	explicit_bzero(line, sizeof line);
	fclose(f);
	if (nomem)
		rc = s3_fail(cause, "credentials file %s: profile '%s': %s",
		    path, profile, strerror(ENOMEM));
	else if (site->access_key != NULL && site->secret_key != NULL)
		rc = 1;
	else if (must || seen)
		rc = s3_fail(cause, "credentials file %s: profile '%s' %s; it "
		    "needs aws_access_key_id and aws_secret_access_key", path,
		    profile, seen ? "lacks a key" : "is not there");
	return (rc);
}

/* The keys of an s3:// site from the usual places into @site. */
static int
s3_keys(const struct s3_conf *c, struct fetch_site *site, char **cause)
{
	const char	*profile, *ak, *sk, *tok, *home, *file;
	char		 path[4096];
	int		 r;

	if ((profile = c->profile) == NULL &&
	    (profile = getenv("AWS_PROFILE")) == NULL)
		profile = "default";
	if (c->credentials != NULL)
		return (s3_keys_file(c->credentials, profile, true, site,
		    cause) == 1 ? 0 : -1);
	ak = getenv("AWS_ACCESS_KEY_ID");
	sk = getenv("AWS_SECRET_ACCESS_KEY");
	tok = getenv("AWS_SESSION_TOKEN");
	if (ak != NULL && *ak != '\0' && sk != NULL && *sk != '\0') {
		if ((site->access_key = strdup(ak)) == NULL ||
		    (site->secret_key = strdup(sk)) == NULL ||
		    (tok != NULL && *tok != '\0' &&
		    (site->token = strdup(tok)) == NULL))
			return (s3_fail(cause, "%s", strerror(ENOMEM)));
		return (0);
	}
	if ((file = getenv("AWS_SHARED_CREDENTIALS_FILE")) == NULL) {
		if ((home = getenv("HOME")) == NULL)
			return (0);
		snprintf(path, sizeof path, "%s/.aws/credentials", home);
		file = path;
	}
	r = s3_keys_file(file, profile, false, site, cause);
	return (r == -1 ? -1 : 0);
}

/* Whether @url's authority (after "scheme://", before the path) has '@'. */
static bool
s3_userinfo(const char *url)
{
	const char	*p = strstr(url, "://");
	size_t		 n;

	if (p == NULL)
		return (false);
	p += 3;
	n = strcspn(p, "/?#");
	return (memchr(p, '@', n) != NULL);
}

/*
 * Whether @url's query (after '?') has a parameter whose name says it
 * holds a secret: a presigned URL's X-Amz-Signature, X-Amz-Credential or
 * X-Amz-Security-Token, GCS's X-Goog-Signature, Azure's sig, a token, a
 * key, a password.
 */
static bool
s3_query_secret(const char *url)
{
	static const char *const words[] = { "sig", "token", "key", "cred",
	    "secret", "pass", "auth", NULL };
	const char	*p = strchr(url, '?'), *end;
	char		 name[64];
	size_t		 n, i, j;

	while (p != NULL && *p != '\0' && *p != '#') {
		p++;
		n = strcspn(p, "=&#");
		end = p + n;
		for (i = 0; i < n && i < sizeof name - 1; i++)
			name[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 :
			    p[i]);
		name[i] = '\0';
		for (j = 0; words[j] != NULL; j++)
			if (strstr(name, words[j]) != NULL)
				return (true);
		p = strchr(end, '&');
	}
	return (false);
}

/* Whether @url may be named in messages; else -1 with *@cause, not naming it. */
int
s3_url_shown(const char *url, char **cause)
{
	if (s3_userinfo(url))
		return (s3_fail(cause, "a URL with a user name or password "
		    "(user:password@host) is refused, because infeed names its "
		    "URLs in errors, logs and status; give an s3:// store its "
		    "keys with credentials = or the AWS environment variables"));
	if (s3_query_secret(url))
		return (s3_fail(cause, "a URL whose query holds a signature, a "
		    "token or a key (a presigned URL) is refused, because "
		    "infeed names its URLs in errors, logs and status; give an "
		    "s3:// store its keys with credentials = or the AWS "
		    "environment variables"));
	return (0);
}

/* Reach @url's site as @c says. */
int
s3_site_conf(const char *url, const struct s3_conf *c, char **cause)
{
	struct fetch_site	 site;
	const char		*p, *slash;
	char			*prefix = NULL;
	bool			 s3 = strncmp(url, "s3://", 5) == 0;
	int			 rc = -1;

	*cause = NULL;
	memset(&site, 0, sizeof site);
	if (s3_url_shown(url, cause) != 0 || (c->endpoint != NULL &&
	    s3_url_shown(c->endpoint, cause) != 0))
		return (-1);
	if (!s3 && (c->endpoint != NULL || c->region != NULL ||
	    c->credentials != NULL || c->profile != NULL))
		return (s3_fail(cause, "%s: endpoint, region, credentials and "
		    "profile are for s3:// URLs; an http(s) URL names its "
		    "server itself", url));
	if (!s3 && c->ca_file == NULL)
		return (0);
	if (c->endpoint != NULL && strncmp(c->endpoint, "http://", 7) != 0 &&
	    strncmp(c->endpoint, "https://", 8) != 0)
		return (s3_fail(cause, "endpoint = %s: expected the store's "
		    "http:// or https:// address, such as "
		    "https://minio.internal:9000", c->endpoint));
	/* The site: s3://bucket/ or scheme://host:port/. */
	p = s3 ? url + 5 : strstr(url, "://") + 3;
	if ((slash = strchr(p, '/')) == NULL || slash == p)
		return (s3_fail(cause, "%s: expected %s", url, s3 ?
		    "s3://bucket/key" : "scheme://host/path"));
	if ((prefix = strndup(url, (size_t)(slash + 1 - url))) == NULL)
		return (s3_fail(cause, "%s", strerror(ENOMEM)));
	if (c->region == NULL && (p = getenv("AWS_REGION")) == NULL)
		p = getenv("AWS_DEFAULT_REGION");
	if ((c->endpoint != NULL &&
	    (site.endpoint = strdup(c->endpoint)) == NULL) ||
	    ((c->region != NULL || (p != NULL && *p != '\0')) &&
	    (site.region = strdup(c->region != NULL ? c->region : p)) ==
	    NULL) ||
	    (c->ca_file != NULL && (site.ca_file = strdup(c->ca_file)) ==
	    NULL)) {
		s3_fail(cause, "%s", strerror(ENOMEM));
		goto out;
	}
	if (s3 && s3_keys(c, &site, cause) != 0)
		goto out;
	rc = fetch_site_set(prefix, &site, cause);
out:
	fetch_site_clear(&site);
	free(prefix);
	return (rc);
}
