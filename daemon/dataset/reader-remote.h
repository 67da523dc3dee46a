/* SPDX-License-Identifier: MIT */
/*
 * The remote raw reader (reader-remote.c): a raw dataset whose files are
 * http:// or https:// URLs, read through the host's cache (daemon/remote/).
 * dataset.c picks it for a "type = raw" section whose path is a URL.
 */
#ifndef INFEED_READER_REMOTE_H
#define INFEED_READER_REMOTE_H

#include <stdbool.h>

#include "reader.h"

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


#endif /* INFEED_READER_REMOTE_H */
