/* SPDX-License-Identifier: MIT */
/*
 * The npy reader (reader-npy.c): NumPy .npy files of samples and of labels,
 * catalogue or client files alike.  dataset.c's table of readers holds its
 * operations.
 */
#ifndef INFEED_READER_NPY_H
#define INFEED_READER_NPY_H

#include "reader.h"

extern const struct dataset_ops dataset_npy_ops;
/* .npy arrays at http://, https:// or s3:// URLs, through the host's cache. */
extern const struct dataset_ops dataset_remote_npy_ops;

/*
 * The npy reader's checks, as the raw reader's (reader-raw.h: on the
 * descriptor, never the mapping; a client's labels are not scanned).
 *
 * dataset_npy_samples() - set the shape, dtype, sample_bytes and samples
 * from the .npy header, and *@off to where the samples start.
 * dataset_npy_labels() - an integer .npy of shape (ds->samples,): set
 * ds->label_dtype and *@off, check each label.
 */
int		 dataset_npy_samples(struct dataset *ds, const char *what,
		    const struct dataset_map *m, uint64_t *off, char **cause);
int		 dataset_npy_labels(struct dataset *ds, const char *what,
		    const char *data_what, const struct dataset_map *m,
		    uint64_t *off, char **cause);

#endif /* INFEED_READER_NPY_H */
