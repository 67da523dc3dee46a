/* SPDX-License-Identifier: MIT */
/*
 * The idx reader (reader-idx.c): MNIST's IDX files, gzipped or not.
 * dataset.c's table of readers holds its operations.
 */
#ifndef INFEED_READER_IDX_H
#define INFEED_READER_IDX_H

#include "reader.h"

extern const struct dataset_ops dataset_idx_ops;

#endif /* INFEED_READER_IDX_H */
