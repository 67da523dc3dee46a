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

#include "dataset.h"

struct raw {
	struct dataset_map	data;
	struct dataset_map	labels;
};

static int	raw_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	raw_read(const struct dataset *, uint64_t, void *, int64_t *);
static void	raw_close(struct dataset *);

const struct dataset_ops dataset_raw_ops = {
	.type = "raw",
	.keys = (const char *const []){ "path", "shape", "dtype", "labels",
	    "label_dtype", "classes", NULL },
	.data_key = "path",
	.labels_key = "labels",
	.open = raw_open,
	.read = raw_read,
	.close = raw_close,
};

/* Read the keys, map both files and check their sizes. */
static int
raw_open(struct dataset *ds, const struct dataset_conf *conf, char **cause)
{
	struct raw	*r;
	const char	*path, *lpath, *v, *errstr;
	char		 shape[128];
	size_t		 lsize;

	if ((r = calloc(1, sizeof *r)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	ds->priv = r;

	if ((path = dataset_conf_need(ds, conf, "path",
	    "the path of the file of records", cause)) == NULL)
		goto fail;
	if ((v = dataset_conf_need(ds, conf, "shape",
	    "the shape of one record, like 3,224,224", cause)) == NULL)
		goto fail;
	if (dataset_shape_parse(v, ds->shape, &ds->ndim, &errstr) != 0) {
		dataset_error(cause, ds, "'shape = %s': %s", v, errstr);
		goto fail;
	}
	if ((v = dataset_conf_need(ds, conf, "dtype", "the element type: "
	    "uint8, int32, int64, float16, float32 or float64",
	    cause)) == NULL)
		goto fail;
	if (dtype_parse(v, &ds->dtype) != 0) {
		dataset_error(cause, ds, "'dtype = %s' is not a type; use "
		    "uint8, int32, int64, float16, float32 or float64", v);
		goto fail;
	}
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
	dataset_shape_format(ds->shape, ds->ndim, shape, sizeof shape);
	if (dataset_shape_bytes(ds->shape, ds->ndim, ds->dtype,
	    &ds->sample_bytes) != 0) {
		dataset_error(cause, ds, "a record of %s %s is too large",
		    dtype_name(ds->dtype), shape);
		goto fail;
	}

	if (dataset_map_file(ds, path, &r->data, cause) != 0)
		goto fail;
	if (r->data.len % ds->sample_bytes != 0) {
		dataset_error(cause, ds, "%s: %zu bytes is not a whole number "
		    "of records of %s %s (%zu bytes each): %zu records and "
		    "%zu bytes over; check 'shape =' and 'dtype ='", path,
		    r->data.len, dtype_name(ds->dtype), shape,
		    ds->sample_bytes, r->data.len / ds->sample_bytes,
		    r->data.len % ds->sample_bytes);
		goto fail;
	}
	ds->samples = r->data.len / ds->sample_bytes;

	if (dataset_map_file(ds, lpath, &r->labels, cause) != 0)
		goto fail;
	lsize = dtype_size(ds->label_dtype);
	if (r->labels.len / lsize != ds->samples ||
	    r->labels.len % lsize != 0) {
		dataset_error(cause, ds, "%s: holds %zu bytes where %" PRIu64
		    " labels of %s (one per record of %s) take %" PRIu64
		    " bytes; check 'label_dtype ='", lpath, r->labels.len,
		    ds->samples, dtype_name(ds->label_dtype), path,
		    ds->samples * lsize);
		goto fail;
	}
	if (dataset_labels_check(ds, lpath, r->labels.base, ds->label_dtype,
	    cause) != 0)
		goto fail;
	return (0);

fail:
	raw_close(ds);
	return (-1);
}

/*
 * Copy one record out and read its label; -1 when either file no longer
 * holds it (truncated since it was mapped: see dataset_map_holds()).
 */
static int
raw_read(const struct dataset *ds, uint64_t index, void *dst, int64_t *label)
{
	const struct raw	*r = ds->priv;

	if (!dataset_map_holds(&r->data, (index + 1) * ds->sample_bytes) ||
	    !dataset_map_holds(&r->labels,
	    (index + 1) * dtype_size(ds->label_dtype)))
		return (-1);
	memcpy(dst, r->data.base + index * ds->sample_bytes,
	    ds->sample_bytes);
	*label = dataset_label_get(r->labels.base, ds->label_dtype, index);
	return (0);
}

/* Unmap both files. */
static void
raw_close(struct dataset *ds)
{
	struct raw	*r = ds->priv;

	if (r == NULL)
		return;
	dataset_unmap(&r->data);
	dataset_unmap(&r->labels);
	free(r);
	ds->priv = NULL;
}
