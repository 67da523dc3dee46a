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


#endif /* INFEED_READER_REMOTE_H */
