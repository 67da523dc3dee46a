/* SPDX-License-Identifier: MIT */
/*
 * The remote raw reader (reader-remote.c): a raw dataset whose files are
 * http://, https:// or s3:// URLs, read through the host's cache (daemon/remote/).
 * dataset.c picks it for a "type = raw" section whose path is a URL.
 */
#ifndef INFEED_READER_REMOTE_H
#define INFEED_READER_REMOTE_H

#include <stdbool.h>

#include "reader.h"

struct cache_object;

extern const struct dataset_ops dataset_remote_raw_ops;

/**
 * dataset_remote_url() - whether @path (may be NULL) is a URL this reader
 * reads: http:// or https://.
 */
bool	dataset_remote_url(const char *path);

/**
 * dataset_remote_urls() - the URLs section @conf's open will ask a HEAD
 * of (its path and labels, when URLs), pointers into @conf, up to 2 in
 * @out (a reload asks them first: cache_heads_start()).  Return: how many.
 */
size_t	dataset_remote_urls(const struct dataset_conf *conf, char **out);

/**
 * dataset_remote_site() - reach @url as @conf's endpoint, region,
 * credentials, profile and ca_file say (s3.c).  Return: 0, or -1 with
 * *@cause.
 */
int	dataset_remote_site(struct dataset *ds, const char *url,
	    const struct dataset_conf *conf, char **cause);

/**
 * dataset_remote_record() - record @index of @ds (its sample_bytes from
 * @data_off of @data) into @dst and its label (label_dtype, from
 * @labels_off of @labels) into *@label, through the host's cache.
 * Return: 0, or -1 with errno EIO and dataset_set_why() the reason.
 */
int	dataset_remote_record(const struct dataset *ds,
	    struct cache_object *data, uint64_t data_off,
	    struct cache_object *labels, uint64_t labels_off, uint64_t index,
	    void *dst, int64_t *label);

/**
 * dataset_remote_order_new() - tell the host's cache that a session reads
 * @ds in the order of a sampler of @opts: record i at @data_off + i x
 * sample_bytes of @data, its label at @labels_off + i x its size of
 * @labels (a reader's order_new).  Return: the handle for
 * dataset_remote_order_at() and dataset_remote_order_free(), or NULL
 * (eviction then goes without this session's order).
 */
void	*dataset_remote_order_new(const struct dataset *ds,
	    struct cache_object *data, uint64_t data_off,
	    struct cache_object *labels, uint64_t labels_off,
	    const struct sampler_opts *opts);
void	 dataset_remote_order_at(void *order, uint64_t epoch, uint64_t row);
void	 dataset_remote_order_free(void *order);

/* dataset_remote_order_key() - a key for a new session's cursors. */
uint64_t dataset_remote_order_key(void);

/**
 * dataset_remote_read_ahead() - start downloading records @idx (@n, of
 * later steps) of @data and their labels in @labels, as
 * dataset_remote_record() reads them, waiting for none.
 */
void	 dataset_remote_read_ahead(const struct dataset *ds,
	    struct cache_object *data, uint64_t data_off,
	    struct cache_object *labels, uint64_t labels_off,
	    const uint64_t *idx, uint32_t n);

#endif /* INFEED_READER_REMOTE_H */
