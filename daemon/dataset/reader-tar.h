/* SPDX-License-Identifier: MIT */
/*
 * The tar reader (reader-tar.c): WebDataset-style tar shards of images.
 * dataset.c's table of readers holds its operations.
 */
#ifndef INFEED_READER_TAR_H
#define INFEED_READER_TAR_H

#include "reader.h"

extern const struct dataset_ops dataset_tar_ops;
/* Shards at http://, https:// or s3:// URLs, through the host's cache. */
extern const struct dataset_ops dataset_remote_tar_ops;

/**
 * dataset_tar_open_fd() - a tar dataset @name of the one shard open on
 * @fd (taken over, closed on failure too), @shard naming it in messages:
 * what the tar reader does with each shard of "shards =", exposed for the
 * fuzzer and the tests.  Return: the dataset, or NULL with *@cause set.
 */
struct dataset	*dataset_tar_open_fd(const char *name, const char *shard,
		    int fd, char **cause);

#endif /* INFEED_READER_TAR_H */
