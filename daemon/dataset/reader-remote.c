/* SPDX-License-Identifier: MIT */
/*
 * The remote raw reader: a raw dataset (reader-raw.c's keys and meaning)
 * whose samples and labels are URLs, read through the host's cache.
 *
 *	[dataset crops]
 *	type = raw
 *	path = https://data.example/crops.bin
 *	shape = 3,224,224
 *	dtype = uint8
 *	labels = https://data.example/crops-labels.bin
 *	label_dtype = int64
 *	classes = 1000			(needed: the labels are not scanned)
 *
 * The open asks each object's size and ETag (one HEAD each, cache.c) and
 * checks that they hold a whole number of records and one label each; it
 * downloads nothing.  A worker's read takes the record's bytes and its
 * label from the cache, which downloads the blocks it lacks (in that
 * worker process, never the daemon's event loop).  A download that fails
 * after its retries fails the read with EIO, and dataset_short_why()
 * then gives the URL and the reason, so the session hears ERROR_DATA for
 * that sample, and no other session is touched.
 *
 * A session's order is shared with the host's cache (order_new): a cursor
 * on each object, samples at i x sample_bytes, labels at i x their size
 * (from where the records start: 0 here, after the header for npy), so a
 * worker that makes room evicts what the sessions need furthest ahead.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "reader-raw.h"
#include "reader-remote.h"
#include "s3.h"

/* What a remote raw dataset holds. */
struct remote_raw {
	struct cache_object	*data;
	struct cache_object	*labels;
};

static int	remote_raw_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	remote_raw_read(const struct dataset *, uint64_t, void *,
		    int64_t *, bool);
static void	remote_raw_close(struct dataset *);
static void	*remote_raw_order_new(const struct dataset *,
		    const struct sampler_opts *);
static void	 remote_raw_read_ahead(const struct dataset *,
		    const uint64_t *, uint32_t);

const struct dataset_ops dataset_remote_raw_ops = {
	.type = "raw",
	.keys = (const char *const []){ "path", "shape", "dtype", "labels",
	    "label_dtype", "classes", S3_KEYS, NULL },
	.data_key = "path",
	.labels_key = "labels",
	.open = remote_raw_open,
	.read = remote_raw_read,
	.close = remote_raw_close,
	.order_new = remote_raw_order_new,
	.order_at = dataset_remote_order_at,
	.order_free = dataset_remote_order_free,
	.read_ahead = remote_raw_read_ahead,
};

/* A session's cursors on a remote raw dataset's two objects. */
struct remote_order {
	struct cache_cursor	*data;
	struct cache_cursor	*labels;
};

/* http://, https:// or s3:// (s3.c). */
bool
dataset_remote_url(const char *path)
{
	return (s3_url(path));
}

/* The section's site keys (s3.h's S3_KEYS) in *@c. */
static void
remote_site_keys(const struct dataset_conf *conf, struct s3_conf *c)
{
	c->endpoint = dataset_conf_get(conf, "endpoint");
	c->region = dataset_conf_get(conf, "region");
	c->credentials = dataset_conf_get(conf, "credentials");
	c->profile = dataset_conf_get(conf, "profile");
	c->ca_file = dataset_conf_get(conf, "ca_file");
}

/* How to reach @url: the section's endpoint, region, keys, CA file. */
int
dataset_remote_site(struct dataset *ds, const char *url,
    const struct dataset_conf *conf, char **cause)
{
	struct s3_conf	 c;
	char		*why = NULL;

	remote_site_keys(conf, &c);
	if (s3_site_conf(url, &c, &why) == 0)
		return (0);
	dataset_error(cause, ds, "%s", why != NULL ? why : strerror(ENOMEM));
	free(why);
	return (-1);
}

/*
 * The URLs whose HEAD the open asks, each site set first (so a thread's
 * HEAD is signed and verified as the open's would be); one whose site is
 * refused is left to the open, which says why.
 */
size_t
dataset_remote_urls(const struct dataset_conf *conf, char **out)
{
	const char	*keys[] = { "path", "labels" }, *v;
	struct s3_conf	 c;
	char		*why = NULL;
	size_t		 i, n = 0;

	remote_site_keys(conf, &c);
	for (i = 0; i < 2; i++) {
		if (!dataset_remote_url(v = dataset_conf_get(conf, keys[i])))
			continue;
		if (s3_site_conf(v, &c, &why) == 0)
			out[n++] = (char *)(uintptr_t)v;
		free(why);
		why = NULL;
	}
	return (n);
}

/* The keys, then each object's size and ETag: nothing downloaded. */
static int
remote_raw_open(struct dataset *ds, const struct dataset_conf *conf,
    char **cause)
{
	struct remote_raw	*r;
	struct dataset_map	 m;
	const char		*path, *lpath, *v;
	char			*why = NULL;
	uint64_t		 lsize;

	if ((r = calloc(1, sizeof *r)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	ds->priv = r;
	path = dataset_conf_get(conf, "path");
	if (dataset_record_conf(ds, conf, cause) != 0)
		goto fail;
	if ((lpath = dataset_conf_need(ds, conf, "labels",
	    "the URL of the file of labels", cause)) == NULL)
		goto fail;
	if (!dataset_remote_url(lpath)) {
		dataset_error(cause, ds, "'labels = %s': the samples are at a "
		    "URL, so the labels must be too (http://, https:// or "
		    "s3://)", lpath);
		goto fail;
	}
	if (dataset_remote_site(ds, path, conf, cause) != 0 ||
	    dataset_remote_site(ds, lpath, conf, cause) != 0)
		goto fail;
	ds->label_dtype = INFEED_DTYPE_INT64;
	if ((v = dataset_conf_get(conf, "label_dtype")) != NULL &&
	    (dtype_parse(v, &ds->label_dtype) != 0 ||
	    (ds->label_dtype != INFEED_DTYPE_UINT8 &&
	    ds->label_dtype != INFEED_DTYPE_INT32 &&
	    ds->label_dtype != INFEED_DTYPE_INT64))) {
		dataset_error(cause, ds, "'label_dtype = %s' is not a label "
		    "type; use uint8, int32 or int64", v);
		goto fail;
	}
	if (dataset_conf_classes(ds, conf, cause) != 0)
		goto fail;
	if (ds->classes == 0) {
		dataset_error(cause, ds, "remote labels are not scanned at "
		    "open (that would download them all): give 'classes ='");
		goto fail;
	}

	if ((r->data = cache_object_open(path, &why)) == NULL ||
	    (r->labels = cache_object_open(lpath, &why)) == NULL) {
		dataset_error(cause, ds, "%s", why != NULL ? why :
		    strerror(ENOMEM));
		free(why);
		goto fail;
	}
	memset(&m, 0, sizeof m);
	m.fd = -1;
	m.size = cache_object_size(r->data);
	if (dataset_raw_samples(ds, path, &m,
	    "check 'shape =' and 'dtype ='", cause) != 0)
		goto fail;
	lsize = dtype_size(ds->label_dtype);
	if (cache_object_size(r->labels) != ds->samples * lsize) {
		dataset_error(cause, ds, "%s: holds %" PRIu64 " bytes where %"
		    PRIu64 " labels of %s (one per record of %s) take %" PRIu64
		    " bytes; check 'label_dtype ='", lpath,
		    cache_object_size(r->labels), ds->samples,
		    dtype_name(ds->label_dtype), path, ds->samples * lsize);
		goto fail;
	}
	return (0);

fail:
	remote_raw_close(ds);
	return (-1);
}

/* Record @index and its label, through the cache. */
static int
remote_raw_read(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label, bool stream)
{
	const struct remote_raw	*r = ds->priv;

	(void)stream;
	return (dataset_remote_record(ds, r->data, 0, r->labels, 0, index, dst,
	    label));
}

/* Record @index of @data (from @data_off) and its label in @labels. */
int
dataset_remote_record(const struct dataset *ds, struct cache_object *data,
    uint64_t data_off, struct cache_object *labels, uint64_t labels_off,
    uint64_t index, void *dst, int64_t *label)
{
	size_t			 lsize = dtype_size(ds->label_dtype);
	uint8_t			 lbuf[8];
	char			*why = NULL;

	if (cache_object_read(data, data_off + index * ds->sample_bytes,
	    ds->sample_bytes, dst, &why) != 0 ||
	    cache_object_read(labels, labels_off + index * lsize, lsize, lbuf,
	    &why) != 0) {
		dataset_set_why("%s", why != NULL ? why : strerror(ENOMEM));
		free(why);
		errno = EIO;
		return (-1);
	}
	*label = dataset_label_get(lbuf, ds->label_dtype, 0);
	if (*label < 0 || (uint64_t)*label >= ds->classes) {
		dataset_set_why("label %" PRId64 " of sample %" PRIu64 " is not "
		    "below 'classes = %" PRIu32 "'", *label, index,
		    ds->classes);
		errno = EIO;
		return (-1);
	}
	return (0);
}

/* Start downloading later steps' records @idx and their labels. */
void
dataset_remote_read_ahead(const struct dataset *ds, struct cache_object *data,
    uint64_t data_off, struct cache_object *labels, uint64_t labels_off,
    const uint64_t *idx, uint32_t n)
{
	size_t		lsize = dtype_size(ds->label_dtype);
	uint32_t	i;

	for (i = 0; i < n; i++) {
		if (idx[i] >= ds->samples)
			continue;
		cache_object_prefetch(data, data_off + idx[i] *
		    ds->sample_bytes, ds->sample_bytes);
		cache_object_prefetch(labels, labels_off + idx[i] * lsize,
		    lsize);
	}
}

/* Later steps' records of a remote raw dataset: from byte 0. */
static void
remote_raw_read_ahead(const struct dataset *ds, const uint64_t *idx,
    uint32_t n)
{
	const struct remote_raw	*r = ds->priv;

	dataset_remote_read_ahead(ds, r->data, 0, r->labels, 0, idx, n);
}

/* Close both objects. */
static void
remote_raw_close(struct dataset *ds)
{
	struct remote_raw	*r = ds->priv;

	if (r == NULL)
		return;
	cache_object_close(r->data);
	cache_object_close(r->labels);
	free(r);
	ds->priv = NULL;
}

/* A session's order of a remote raw dataset: records from byte 0. */
static void *
remote_raw_order_new(const struct dataset *ds, const struct sampler_opts *opts)
{
	const struct remote_raw	*r = ds->priv;

	return (dataset_remote_order_new(ds, r->data, 0, r->labels, 0, opts));
}

/* A new key for a session's cursors: the daemon's pid and a count. */
uint64_t
dataset_remote_order_key(void)
{
	static uint32_t	count;

	return ((uint64_t)getpid() << 32 | count++);
}

/*
 * A session's order: a cursor on each object, or NULL when cache_dir
 * refuses one (eviction then goes without this session's order).
 */
void *
dataset_remote_order_new(const struct dataset *ds, struct cache_object *data,
    uint64_t data_off, struct cache_object *labels, uint64_t labels_off,
    const struct sampler_opts *opts)
{
	struct remote_order	*ro;
	uint64_t		 key = dataset_remote_order_key();
	char			*why = NULL;

	if ((ro = calloc(1, sizeof *ro)) == NULL)
		return (NULL);
	ro->data = cache_cursor_new(data, key, data_off, ds->sample_bytes,
	    opts, &why);
	free(why);
	why = NULL;
	if (ro->data != NULL)
		ro->labels = cache_cursor_new(labels, key, labels_off,
		    dtype_size(ds->label_dtype), opts, &why);
	free(why);
	if (ro->labels == NULL) {
		dataset_remote_order_free(ro);
		return (NULL);
	}
	return (ro);
}

/* The session reads (epoch, row) next. */
void
dataset_remote_order_at(void *arg, uint64_t epoch, uint64_t row)
{
	struct remote_order	*ro = arg;

	cache_cursor_at(ro->data, epoch, row);
	cache_cursor_at(ro->labels, epoch, row);
}

/* Remove the cursors. */
void
dataset_remote_order_free(void *arg)
{
	struct remote_order	*ro = arg;

	if (ro == NULL)
		return;
	cache_cursor_free(ro->data);
	cache_cursor_free(ro->labels);
	free(ro);
}
