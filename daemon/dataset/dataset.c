/* SPDX-License-Identifier: MIT */
/*
 * Datasets: the front that picks a reader.
 *
 * dataset_open() picks a reader from the table below by the section's
 * "type" key, refuses a key it does not read, and lets it check its files;
 * every message it or a reader gives starts with "dataset 'NAME': " and
 * names the file and what was expected.  dataset_open_files() makes a
 * client's files a dataset with the raw and npy readers' checks.  What the
 * readers share is below them, in reader.c; none of it prints or exits.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "reader-idx.h"
#include "reader-imagefolder.h"
#include "reader-mix.h"
#include "reader-npy.h"
#include "reader-raw.h"
#include "reader-remote.h"
#include "reader-synthetic.h"
#include "reader-tar.h"
#include "reader-tokens.h"
#include "utf8.h"

static const struct dataset_ops *readers[] = {
	&dataset_idx_ops,
	&dataset_raw_ops,
	&dataset_npy_ops,
	&dataset_synthetic_ops,
	&dataset_imagefolder_ops,
	&dataset_tar_ops,
	&dataset_tokens_ops,
	&dataset_mix_ops,
};

/* Keys of every section besides the reader's; catalogue.c reads the second. */
static const char *const common_keys[] = { "type", "allow_groups",
	"bad_samples", NULL };

#define NITEMS(a) (sizeof (a) / sizeof (a)[0])

/* The last dataset_open()'s serial. */
static uint64_t dataset_serials;

static char	*dataset_known_types(void);
static int	dataset_check_keys(struct dataset *,
		    const struct dataset_conf *, char **);

/* "idx, raw, npy, synthetic", for messages. */
static char *
dataset_known_types(void)
{
	char	*s = NULL, *t;
	size_t	 i;

	for (i = 0; i < NITEMS(readers); i++) {
		if (asprintf(&t, "%s%s%s", s == NULL ? "" : s,
		    s == NULL ? "" : ", ", readers[i]->type) == -1) {
			free(s);
			return (NULL);
		}
		free(s);
		s = t;
	}
	return (s);
}

/* Is @key in the NULL-terminated list @keys? */
static int
dataset_key_in(const char *key, const char *const *keys)
{
	for (; *keys != NULL; keys++) {
		if (strcmp(*keys, key) == 0)
			return (1);
	}
	return (0);
}

/* Edit distance of two short strings, capped at 3 (enough for typos). */
static size_t
dataset_key_distance(const char *a, const char *b)
{
	size_t	la = strlen(a), lb = strlen(b), i, j, prev, diag, v;
	size_t	row[33];

	if (la > 32 || lb > 32)
		return (3);
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		diag = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			prev = row[j];
			v = diag + (a[i - 1] != b[j - 1]);
			if (row[j] + 1 < v)
				v = row[j] + 1;
			if (row[j - 1] + 1 < v)
				v = row[j - 1] + 1;
			row[j] = v;
			diag = prev;
		}
	}
	return (row[lb] < 3 ? row[lb] : 3);
}

/* The key of @keys nearest @key, if it is a likely typo of it. */
const char *
dataset_key_guess(const char *key, const char *const *keys)
{
	const char	*best = NULL;
	size_t		 d, bestd = 3;

	for (; *keys != NULL; keys++) {
		d = dataset_key_distance(key, *keys);
		if (d < bestd && d < strlen(*keys)) {
			best = *keys;
			bestd = d;
		}
	}
	return (best);
}

/* Refuse a key the reader does not read (a typo would pass unnoticed). */
static int
dataset_check_keys(struct dataset *ds, const struct dataset_conf *conf,
    char **cause)
{
	const struct dataset_ops *ops = ds->ops;
	const char	*key = NULL, *guess, *names[33];
	char		 known[512], hint[128], where[600];
	size_t		 i, n = 0, off;

	for (i = 0; i < conf->nkv && key == NULL; i++) {
		if (!dataset_key_in(conf->kv[i].key, ops->keys) &&
		    !dataset_key_in(conf->kv[i].key, common_keys))
			key = conf->kv[i].key;
	}
	if (key == NULL)
		return (0);

	/* "type, path, ... and allow_groups". */
	names[n++] = common_keys[0];
	for (i = 0; ops->keys[i] != NULL && n < NITEMS(names) - 2; i++)
		names[n++] = ops->keys[i];
	names[n++] = common_keys[1];
	names[n] = NULL;
	known[0] = '\0';
	for (i = 0, off = 0; i < n && off < sizeof known; i++) {
		snprintf(known + off, sizeof known - off, "%s%s",
		    i == 0 ? "" : i + 1 == n ? " and " : ", ", names[i]);
		off = strlen(known);
	}
	hint[0] = '\0';
	if ((guess = dataset_key_guess(key, names)) != NULL)
		snprintf(hint, sizeof hint, " (did you mean '%s'?)", guess);
	where[0] = '\0';
	if (conf->source != NULL)
		snprintf(where, sizeof where, " of %s", conf->source);
	return (dataset_error(cause, ds, "unknown key '%s' in section "
	    "[dataset %s]%s%s; type = %s takes the keys %s", key,
	    conf->name, where, hint, ops->type, known));
}

/* Copy the paths of the dataset's files, for messages about its samples. */
static int
dataset_keep_paths(struct dataset *ds, const struct dataset_conf *conf,
    char **cause)
{
	const char	*v;

	if (ds->ops->data_key != NULL &&
	    (v = dataset_conf_get(conf, ds->ops->data_key)) != NULL &&
	    (ds->data_path = strdup(v)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(ENOMEM)));
	if (ds->ops->labels_key != NULL &&
	    (v = dataset_conf_get(conf, ds->ops->labels_key)) != NULL &&
	    (ds->labels_path = strdup(v)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(ENOMEM)));
	return (0);
}

/* Open the dataset a config section describes. */
struct dataset *
dataset_open(const struct dataset_conf *conf, char **cause)
{
	return (dataset_open_within(conf, UINT64_MAX, cause));
}

/* Open it, keeping at most @room bytes in memory. */
struct dataset *
dataset_open_within(const struct dataset_conf *conf, uint64_t room,
    char **cause)
{
	struct dataset	*ds;
	const char	*type;
	char		*known, buf[128];
	size_t		 i, total;

	*cause = NULL;
	if ((ds = calloc(1, sizeof *ds)) == NULL ||
	    (ds->name = strdup(conf->name)) == NULL) {
		free(ds);
		if (asprintf(cause, "dataset '%s': %s", conf->name,
		    strerror(ENOMEM)) == -1)
			*cause = NULL;
		return (NULL);
	}
	ds->serial = ++dataset_serials;
	ds->memory_room = room;

	known = dataset_known_types();
	type = dataset_conf_get(conf, "type");
	for (i = 0; type != NULL && i < NITEMS(readers); i++) {
		if (strcmp(readers[i]->type, type) == 0)
			break;
	}
	if (type == NULL || i == NITEMS(readers)) {
		if (type == NULL) {
			snprintf(buf, sizeof buf, "one of %s",
			    known != NULL ? known : "the known types");
			dataset_conf_need(ds, conf, "type", buf, cause);
		} else {
			dataset_error(cause, ds, "unknown type '%s'; the "
			    "known types are %s", type,
			    known != NULL ? known : "(out of memory)");
		}
		free(known);
		dataset_free(ds);
		return (NULL);
	}
	free(known);

	ds->ops = readers[i];
	if (ds->ops == &dataset_raw_ops &&
	    dataset_remote_url(dataset_conf_get(conf, "path")))
		ds->ops = &dataset_remote_raw_ops;	/* through the cache */
	if (ds->ops == &dataset_npy_ops &&
	    dataset_remote_url(dataset_conf_get(conf, "path")))
		ds->ops = &dataset_remote_npy_ops;
	if (ds->ops == &dataset_tar_ops &&
	    dataset_remote_url(dataset_conf_get(conf, "shards")))
		ds->ops = &dataset_remote_tar_ops;
	ds->type = ds->ops->type;
	if (dataset_check_keys(ds, conf, cause) != 0) {
		ds->ops = NULL;
		dataset_free(ds);
		return (NULL);
	}
	if (ds->ops->open(ds, conf, cause) != 0) {
		/* The reader cleaned up after itself. */
		ds->ops = NULL;
		dataset_free(ds);
		return (NULL);
	}

	/* Broken invariants of a reader, not the operator's fault. */
	if (ds->encoded && (ds->samples == 0 || ds->ndim != 0 ||
	    ds->sample_bytes != 0 || ds->ops->read_encoded == NULL ||
	    ds->ops->sample_where == NULL)) {
		dataset_error(cause, ds, "reader '%s' gave %" PRIu64 " encoded "
		    "samples, which does not add up", ds->type, ds->samples);
		dataset_free(ds);
		return (NULL);
	}
	if (!ds->encoded && (ds->samples == 0 ||
	    dataset_shape_bytes(ds->shape, ds->ndim, ds->dtype, &total) != 0 ||
	    total != ds->sample_bytes)) {
		dataset_error(cause, ds, "reader '%s' gave %" PRIu64 " samples "
		    "of %s %s in %zu bytes, which do not add up", ds->type,
		    ds->samples, dtype_name(ds->dtype),
		    dataset_shape_format(ds->shape, ds->ndim, buf, sizeof buf),
		    ds->sample_bytes);
		dataset_free(ds);
		return (NULL);
	}
	if (dataset_keep_paths(ds, conf, cause) != 0) {
		dataset_free(ds);
		return (NULL);
	}
	return (ds);
}

/* Let a mix open its sources from the configuration's sections. */
void
dataset_sections(const struct dataset_conf *confs, size_t n)
{
	dataset_mix_sections(confs, n, confs != NULL ? dataset_open_within :
	    NULL);
}

/* Refuse what a client's Files says before touching its files. */
static int
dataset_files_check(struct dataset *ds, const struct dataset_files *spec,
    int labels_fd, char **cause)
{
	uint32_t	i;

	switch (spec->data_format) {
	case DATASET_FORMAT_RAW:
		ds->ops = &dataset_raw_ops;
		break;
	case DATASET_FORMAT_NPY:
		ds->ops = &dataset_npy_ops;
		break;
	default:
		return (dataset_error(cause, ds, "Files.data_format is %u; "
		    "expected FILE_FORMAT_RAW (1) or FILE_FORMAT_NPY (2)",
		    spec->data_format));
	}
	ds->type = ds->ops->type;
	if (spec->labels_format > DATASET_FORMAT_NPY)
		return (dataset_error(cause, ds, "Files.labels_format is %u; "
		    "expected FILE_FORMAT_NONE (0), FILE_FORMAT_RAW (1) or "
		    "FILE_FORMAT_NPY (2)", spec->labels_format));
	if ((spec->labels_format == DATASET_FORMAT_NONE) != (labels_fd == -1))
		return (dataset_error(cause, ds, "labels_format %s needs %s "
		    "labels file", spec->labels_format == DATASET_FORMAT_NONE ?
		    "none" : "raw or npy", spec->labels_format ==
		    DATASET_FORMAT_NONE ? "no" : "a"));
	if (spec->data_format == DATASET_FORMAT_RAW) {
		if (spec->ndim == 0 || spec->ndim > INFEED_MAX_DIMS)
			return (dataset_error(cause, ds, "raw data needs "
			    "Files.shape, the shape of one sample: 1 to %d "
			    "dimensions, not %u", INFEED_MAX_DIMS,
			    spec->ndim));
		for (i = 0; i < spec->ndim; i++) {
			if (spec->shape[i] == 0)
				return (dataset_error(cause, ds, "Files.shape "
				    "has a dimension of 0; every dimension of "
				    "a sample is at least 1"));
			ds->shape[i] = spec->shape[i];
		}
		ds->ndim = spec->ndim;
		ds->dtype = (enum infeed_dtype)spec->dtype;
		if (spec->dtype > INFEED_DTYPE_FLOAT64 ||
		    dtype_size(ds->dtype) == 0)
			return (dataset_error(cause, ds, "raw data needs "
			    "Files.dtype: uint8, int32, int64, float16, "
			    "float32 or float64"));
	}
	if (spec->labels_format == DATASET_FORMAT_RAW) {
		ds->label_dtype = spec->label_dtype == 0 ? INFEED_DTYPE_INT64 :
		    (enum infeed_dtype)spec->label_dtype;
		if (ds->label_dtype != INFEED_DTYPE_UINT8 &&
		    ds->label_dtype != INFEED_DTYPE_INT32 &&
		    ds->label_dtype != INFEED_DTYPE_INT64)
			return (dataset_error(cause, ds, "Files.label_dtype "
			    "%u is not a label type; raw labels are uint8, "
			    "int32 or int64 (the default)",
			    spec->label_dtype));
	}
	return (0);
}

/* A client's files as a dataset: the raw and npy readers' checks. */
struct dataset *
dataset_open_files(const char *name, const struct dataset_files *spec,
    int data_fd, int labels_fd, bool map, bool *content, char **cause)
{
	static const char	*what = "the data file";
	static const char	*lwhat = "the labels file";
	struct dataset		*ds;
	struct dataset_pair	*p = NULL;
	bool			 ignored;
	int			 flags, rc;

	*cause = NULL;
	if (content == NULL)
		content = &ignored;
	*content = false;
	flags = DATASET_MAP_SHARED | (map ? DATASET_MAP_READ : 0);
	if ((ds = calloc(1, sizeof *ds)) == NULL ||
	    (ds->name = utf8_clean(name, INFEED_MAX_DATASET_NAME)) == NULL ||
	    (p = calloc(1, sizeof *p)) == NULL) {
		if (asprintf(cause, "dataset '%s': %s", name,
		    strerror(ENOMEM)) == -1)
			*cause = NULL;
		goto fail;
	}
	p->data.fd = p->labels.fd = -1;
	ds->priv = p;
	ds->client_files = true;
	if (dataset_files_check(ds, spec, labels_fd, cause) != 0)
		goto fail;

	p->reads = map;
	rc = dataset_map_fd(ds, what, data_fd, flags, spec->map_data, &p->data,
	    cause);
	data_fd = -1;
	if (rc != 0)
		goto fail;
	*content = true;
	if (spec->data_format == DATASET_FORMAT_RAW)
		rc = dataset_raw_samples(ds, what, &p->data, "check "
		    "Files.shape and Files.dtype", cause);
	else
		rc = dataset_npy_samples(ds, what, &p->data, &p->data_off,
		    cause);
	if (rc != 0)
		goto fail;

	if (labels_fd != -1) {
		*content = false;
		rc = dataset_map_fd(ds, lwhat, labels_fd, flags,
		    spec->map_labels, &p->labels, cause);
		labels_fd = -1;
		if (rc != 0)
			goto fail;
		*content = true;
		if (spec->labels_format == DATASET_FORMAT_RAW)
			rc = dataset_raw_labels(ds, lwhat, what, &p->labels,
			    "check Files.label_dtype", cause);
		else
			rc = dataset_npy_labels(ds, lwhat, what, &p->labels,
			    &p->labels_off, cause);
		if (rc != 0)
			goto fail;
	} else
		ds->label_dtype = INFEED_DTYPE_INT32;	/* every label is 0 */
	*content = false;
	if ((ds->data_path = strdup("the data file the client passed")) ==
	    NULL) {
		dataset_error(cause, ds, "%s", strerror(ENOMEM));
		goto fail;
	}
	if (spec->labels_format != DATASET_FORMAT_NONE &&
	    (ds->labels_path = strdup("the labels file the client "
	    "passed")) == NULL) {
		dataset_error(cause, ds, "%s", strerror(ENOMEM));
		goto fail;
	}
	return (ds);

fail:
	if (data_fd != -1)
		close(data_fd);
	if (labels_fd != -1)
		close(labels_fd);
	if (ds != NULL && p != NULL)
		dataset_pair_close(ds);
	if (ds != NULL)
		ds->ops = NULL;
	dataset_free(ds);
	return (NULL);
}

/* Both files' sizes, as the check found them. */
uint64_t
dataset_files_bytes(const struct dataset *ds)
{
	const struct dataset_pair	*p = ds->priv;

	if (!ds->client_files || p == NULL)
		return (0);
	return (p->data.size + (p->labels.fd != -1 ? p->labels.size : 0));
}

/* Charge a client's files, within the bounds, or have them read. */
bool
dataset_files_charge(struct dataset *ds, uid_t uid,
    struct dataset_files *spec)
{
	struct dataset_pair	*p = ds->priv;
	uint64_t		 bytes = dataset_files_bytes(ds);

	spec->map_data = spec->map_labels = 0;
	if (!ds->client_files || p == NULL || p->charged != 0 ||
	    !dataset_charge(uid, bytes))
		return (false);
	p->charged = bytes;
	p->charged_uid = uid;
	spec->map_data = p->data.size;
	spec->map_labels = p->labels.fd != -1 ? p->labels.size : 0;
	return (true);
}

/* A client dataset's descriptors, data then labels. */
unsigned
dataset_files_fds(const struct dataset *ds, int fds[2])
{
	const struct dataset_pair	*p = ds->priv;
	unsigned			 n = 0;

	if (!ds->client_files)
		return (0);
	fds[n++] = p->data.fd;
	if (p->labels.fd != -1)
		fds[n++] = p->labels.fd;
	return (n);
}

/* Write one sample and its label; never for an encoded dataset. */
int
dataset_read(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label, bool stream)
{
	if (ds->encoded || ds->ops->read == NULL) {
		errno = EOPNOTSUPP;
		return (-1);
	}
	if (index >= ds->samples) {
		errno = ERANGE;
		return (-1);
	}
	return (ds->ops->read(ds, index, dst, label, stream));
}

/* A sample as its epoch has it. */
int
dataset_read_at(const struct dataset *ds, uint64_t index, uint64_t seed,
    uint64_t epoch, void *dst, int64_t *label, bool stream)
{
	if (ds->ops->read_at == NULL || ds->encoded)
		return (dataset_read(ds, index, dst, label, stream));
	if (index >= ds->samples) {
		errno = ERANGE;
		return (-1);
	}
	return (ds->ops->read_at(ds, index, seed, epoch, dst, label, stream));
}

/*
 * An encoded sample a worker read already (dataset_encoded_give()), for
 * the next dataset_read_encoded() of it.
 */
static struct {
	const struct dataset	*ds;	/* NULL: none */
	uint64_t		 index;
	struct dataset_buf	*buf;
	int64_t			 label;
} dataset_given;

/* Read one encoded sample's bytes and its label. */
int
dataset_read_encoded(const struct dataset *ds, uint64_t index,
    struct dataset_buf *buf, int64_t *label)
{
	struct dataset_buf	tmp;

	if (!ds->encoded) {
		errno = EOPNOTSUPP;
		return (-1);
	}
	if (index >= ds->samples) {
		errno = ERANGE;
		return (-1);
	}
	if (dataset_given.ds == ds && dataset_given.index == index) {
		/* Swapped, not copied: the giver gets @buf's memory back. */
		tmp = *buf;
		*buf = *dataset_given.buf;
		*dataset_given.buf = tmp;
		*label = dataset_given.label;
		dataset_given.ds = NULL;
		return (0);
	}
	return (ds->ops->read_encoded(ds, index, buf, label));
}

/* Hand the next dataset_read_encoded() of @index a sample read already. */
void
dataset_encoded_give(const struct dataset *ds, uint64_t index,
    struct dataset_buf *buf, int64_t label)
{
	dataset_given.ds = ds;
	dataset_given.index = index;
	dataset_given.buf = buf;
	dataset_given.label = label;
}

/* Whether a worker may read @ds's samples in flight. */
bool
dataset_locates(const struct dataset *ds)
{
	return (ds->ops->locate != NULL);
}

/* Where sample @index is. */
int
dataset_locate(const struct dataset *ds, uint64_t index,
    struct dataset_loc *loc, int64_t *label)
{
	if (ds->ops->locate == NULL) {
		errno = EOPNOTSUPP;
		return (-1);
	}
	if (index >= ds->samples) {
		errno = ERANGE;
		return (-1);
	}
	return (ds->ops->locate(ds, index, loc, label));
}

/* Name a sample for messages. */
char *
dataset_sample_where(const struct dataset *ds, uint64_t index, char *buf,
    size_t len)
{
	if (len == 0)
		return (buf);
	if (ds->encoded && index < ds->samples)
		return (ds->ops->sample_where(ds, index, buf, len));
	snprintf(buf, len, "sample %" PRIu64, index);
	return (buf);
}

/* Name a sample for messages from what is in memory. */
char *
dataset_sample_brief(const struct dataset *ds, uint64_t index, char *buf,
    size_t len)
{
	if (len > 0 && ds->encoded && index < ds->samples &&
	    ds->ops->sample_brief != NULL)
		return (ds->ops->sample_brief(ds, index, buf, len));
	return (dataset_sample_where(ds, index, buf, len));
}


/* Start fetching later steps' samples @idx. */
void
dataset_read_ahead(const struct dataset *ds, const uint64_t *idx, uint32_t n)
{
	if (ds->ops->read_ahead != NULL && n > 0)
		ds->ops->read_ahead(ds, idx, n);
}

/* A session's order, for the reader's use. */
void *
dataset_order_new(const struct dataset *ds, const struct sampler_opts *opts)
{
	if (ds->ops->order_new == NULL)
		return (NULL);
	return (ds->ops->order_new(ds, opts));
}

/* Where the session of @order reads next. */
void
dataset_order_at(const struct dataset *ds, void *order, uint64_t epoch,
    uint64_t row)
{
	if (order != NULL)
		ds->ops->order_at(order, epoch, row);
}

/* Forget @order. */
void
dataset_order_free(const struct dataset *ds, void *order)
{
	if (order != NULL)
		ds->ops->order_free(order);
}
