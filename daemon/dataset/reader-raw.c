/* SPDX-License-Identifier: MIT */
/*
 * The "raw" reader: a file of fixed-size records and a file of labels.
 *
 *	[dataset crops]
 *	type = raw
 *	path = /data/crops.bin		N records of shape and dtype
 *	shape = 3,224,224
 *	dtype = uint8			uint8 int32 int64 float16 float32
 *					float64, in host byte order
 *	labels = /data/crops-labels.bin	N labels
 *	label_dtype = int64		uint8, int32 or int64 (the default)
 *	classes = 1000			(optional; else max label + 1)
 *
 * N comes from the size of the data file, which must be a whole number of
 * records; the labels file must hold exactly N labels.  Both are mapped
 * read-only and shared.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reader-raw.h"

static int	raw_open(struct dataset *, const struct dataset_conf *,
		    char **);

const struct dataset_ops dataset_raw_ops = {
	.type = "raw",
	.keys = (const char *const []){ "path", "shape", "dtype", "labels",
	    "label_dtype", "classes", NULL },
	.data_key = "path",
	.labels_key = "labels",
	.open = raw_open,
	.read = dataset_pair_read,
	.locate = dataset_pair_locate,
	.close = dataset_pair_close,
};

/* Records of ds->shape and ds->dtype: N from the file's size. */
int
dataset_raw_samples(struct dataset *ds, const char *what,
    const struct dataset_map *m, const char *hint, char **cause)
{
	char	shape[128];

	dataset_shape_format(ds->shape, ds->ndim, shape, sizeof shape);
	if (dataset_shape_bytes(ds->shape, ds->ndim, ds->dtype,
	    &ds->sample_bytes) != 0)
		return (dataset_error(cause, ds, "a record of %s %s is too "
		    "large", dtype_name(ds->dtype), shape));
	if (m->size % ds->sample_bytes != 0)
		return (dataset_error(cause, ds, "%s: %" PRIu64 " bytes is not "
		    "a whole number of records of %s %s (%zu bytes each): %"
		    PRIu64 " records and %" PRIu64 " bytes over; %s", what,
		    m->size, dtype_name(ds->dtype), shape, ds->sample_bytes,
		    m->size / ds->sample_bytes, m->size % ds->sample_bytes,
		    hint));
	ds->samples = m->size / ds->sample_bytes;
	return (0);
}

/*
 * Exactly one label of ds->label_dtype per record, each a class number
 * (checked here for the catalogue's files only).
 */
int
dataset_raw_labels(struct dataset *ds, const char *what,
    const char *data_what, const struct dataset_map *m, const char *hint,
    char **cause)
{
	size_t	lsize = dtype_size(ds->label_dtype);

	if (lsize == 0 || m->size / lsize != ds->samples ||
	    m->size % lsize != 0)
		return (dataset_error(cause, ds, "%s: holds %" PRIu64 " bytes "
		    "where %" PRIu64 " labels of %s (one per record of %s) "
		    "take %" PRIu64 " bytes; %s", what, m->size, ds->samples,
		    dtype_name(ds->label_dtype), data_what,
		    ds->samples * lsize, hint));
	/*
	 * A client's labels are not scanned: a file of 2^34 labels would
	 * hold the daemon for minutes.  The workers check each label they
	 * copy (worker_rows), so a bad one fails the step that reads it.
	 */
	if (ds->client_files)
		return (0);
	return (dataset_labels_check_file(ds, what, m, 0, ds->label_dtype,
	    cause));
}

/* Read the keys, map both files and check their sizes. */
static int
raw_open(struct dataset *ds, const struct dataset_conf *conf, char **cause)
{
	struct dataset_pair	*r;
	const char		*path, *lpath, *v;

	if ((r = calloc(1, sizeof *r)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	r->data.fd = r->labels.fd = -1;
	ds->priv = r;

	if ((path = dataset_conf_need(ds, conf, "path",
	    "the path of the file of records", cause)) == NULL)
		goto fail;
	if (dataset_record_conf(ds, conf, cause) != 0)
		goto fail;
	if ((lpath = dataset_conf_need(ds, conf, "labels",
	    "the path of the file of labels", cause)) == NULL)
		goto fail;
	ds->label_dtype = INFEED_DTYPE_INT64;
	if ((v = dataset_conf_get(conf, "label_dtype")) != NULL &&
	    (dtype_parse(v, &ds->label_dtype) != 0 ||
	    (ds->label_dtype != INFEED_DTYPE_UINT8 && ds->label_dtype != INFEED_DTYPE_INT32 &&
	    ds->label_dtype != INFEED_DTYPE_INT64))) {
		dataset_error(cause, ds, "'label_dtype = %s' is not a label "
		    "type; use uint8, int32 or int64", v);
		goto fail;
	}
	if (dataset_conf_classes(ds, conf, cause) != 0)
		goto fail;

	if (dataset_map_file(ds, path, &r->data, cause) != 0 ||
	    dataset_raw_samples(ds, path, &r->data,
	    "check 'shape =' and 'dtype ='", cause) != 0)
		goto fail;
	if (dataset_map_file(ds, lpath, &r->labels, cause) != 0 ||
	    dataset_raw_labels(ds, lpath, path, &r->labels,
	    "check 'label_dtype ='", cause) != 0)
		goto fail;
	r->reads = true;
	return (0);

fail:
	dataset_pair_close(ds);
	return (-1);
}
