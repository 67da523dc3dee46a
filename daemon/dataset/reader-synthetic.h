/* SPDX-License-Identifier: MIT */
/*
 * The synthetic reader (reader-synthetic.c): samples made from a seed, no
 * file read.  dataset.c's table of readers holds its operations.
 */
#ifndef INFEED_READER_SYNTHETIC_H
#define INFEED_READER_SYNTHETIC_H

#include "reader.h"

extern const struct dataset_ops dataset_synthetic_ops;

#endif /* INFEED_READER_SYNTHETIC_H */
