/* SPDX-License-Identifier: MIT */
/*
 * A remote dataset's site: its endpoint, region, credentials and CA file,
 * from its section's keys and the AWS environment: see s3.c.
 */
#ifndef INFEED_S3_H
#define INFEED_S3_H

/* A dataset section's keys for reaching its URLs (any may be NULL). */
struct s3_conf {
	const char	*endpoint;	/* endpoint = https://host:port */
	const char	*region;	/* region = eu-west-1 */
	const char	*credentials;	/* credentials = a shared-credentials file */
	const char	*profile;	/* profile = its section */
	const char	*ca_file;	/* ca_file = PEM CAs for https */
};

/* The keys s3_site_conf() reads, for a reader's list. */
#define S3_KEYS	"endpoint", "region", "credentials", "profile", "ca_file"

/**
 * s3_site_conf() - reach @url's site (an s3:// bucket, or an http(s)
 * host) as @c says, with credentials for s3:// from the usual places.
 * Return: 0, or -1 with *@cause (malloc'ed) saying what is wrong, never
 * a key.
 */
int	s3_site_conf(const char *url, const struct s3_conf *c, char **cause);

/**
 * s3_url_shown() - whether @url may be named in errors, logs and status:
 * not with a user name or password, nor a query that holds a signature, a
 * token or a key (a presigned URL).  s3_site_conf() checks its URL so.
 * Return: 0, or -1 with *@cause (malloc'ed), which does not name @url.
 */
int	s3_url_shown(const char *url, char **cause);

/**
 * s3_url() - whether @url is one the remote readers read: http://,
 * https:// or s3://.
 */
int	s3_url(const char *url);

#endif
