/* SPDX-License-Identifier: MIT */
/*
 * The raw reader (reader-raw.c): a file of fixed-size samples and one of
 * labels, catalogue or client files alike.  dataset.c's table of readers
 * holds its operations.
 */
#ifndef INFEED_READER_RAW_H
#define INFEED_READER_RAW_H

#include "reader.h"

extern const struct dataset_ops dataset_raw_ops;

/*
 * The raw reader's checks, on a file's descriptor in @m (read with pread:
 * never through the mapping), shared by the catalogue's files and a
 * client's (dataset_open_files()).  @what names the file, @data_what the
 * samples' file in the labels' messages, @hint says what to check for a
 * size that does not add up ("check 'shape =' and 'dtype ='").
 *
 * dataset_raw_samples() - ds->shape and ds->dtype are set: set
 * ds->sample_bytes and ds->samples from the file's size.
 * dataset_raw_labels() - the file holds ds->samples labels of
 * ds->label_dtype, each a class number.
 *
 * The labels are scanned for the catalogue's files only: a client's
 * (ds->client_files) are checked in O(1), their sizes and header, and each
 * label is checked by the worker that copies it (a bad one is ERROR_DATA
 * naming the sample), so a huge labels file costs the Attach nothing.
 */
int		 dataset_raw_samples(struct dataset *ds, const char *what,
		    const struct dataset_map *m, const char *hint,
		    char **cause);
int		 dataset_raw_labels(struct dataset *ds, const char *what,
		    const char *data_what, const struct dataset_map *m,
		    const char *hint, char **cause);

#endif /* INFEED_READER_RAW_H */
