/* SPDX-License-Identifier: MIT */
/*
 * The imagefolder reader (reader-imagefolder.c): a torchvision ImageFolder
 * tree of image files.  dataset.c's table of readers holds its operations.
 */
#ifndef INFEED_READER_IMAGEFOLDER_H
#define INFEED_READER_IMAGEFOLDER_H

#include "reader.h"

extern const struct dataset_ops dataset_imagefolder_ops;

#endif /* INFEED_READER_IMAGEFOLDER_H */
