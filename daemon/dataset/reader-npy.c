/* SPDX-License-Identifier: MIT */
/*
 * The "npy" reader: a NumPy .npy array of samples and one of labels.
 *
 *	[dataset cifar]
 *	type = npy
 *	path = /data/x.npy		shape (N, ...), C order
 *	labels = /data/y.npy		shape (N,), an integer dtype
 *	classes = 10			(optional; else max label + 1)
 *
 * A .npy file is "\x93NUMPY", a version byte pair, a little-endian header
 * length (2 bytes in version 1.0, 4 in 2.0 and 3.0), then that many bytes
 * of a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 * and the array's bytes.  The first dimension is N and the rest is the
 * sample's shape.  Only C order and the little-endian dtypes <u1 (|u1),
 * <i4, <i8, <f2, <f4 and <f8 are read; the data must be exactly as long
 * as the shape says.  Both files are mapped read-only and shared.  The
 * header is read with pread (at most NPY_MAX_HEADER bytes of it), so the
 * same checks serve a client's files, which are only mapped in workers.
 *
 * Arrays at URLs (http://, https://, s3://; dataset_remote_npy_ops,
 * which dataset.c picks when "path =" is one) are read through the host's
 * cache: the open reads each header with one range request (its first
 * cache block, which the first records' reads then find there), and a
 * worker reads each record and its label as reader-remote.c's raw reader
 * does, and a session's order reaches the cache the same way, records
 * counted from where each array's data starts.  The labels are not scanned at open (that would download them):
 * "classes =" is needed.  endpoint, region, credentials, profile and
 * ca_file: see s3.c.
 *
 * The header comes from a file anyone may have written, so npy_parse()
 * never reads outside the bytes it is given and fails on anything it does
 * not understand; a fuzzer can drive it through a file.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "reader-npy.h"
#include "reader-remote.h"
#include "s3.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the npy reader hands out little-endian data as is"
#endif

#define NPY_MAX_DIMS	(INFEED_MAX_DIMS + 1)	/* N and a sample */
#define NPY_MAGIC	"\x93NUMPY"
#define NPY_MAGIC_LEN	6
#define NPY_MAX_HEADER	65536	/* bytes read; numpy itself reads 10000 */

/* What a .npy header says. */
struct npy_header {
	char		descr[16];
	enum infeed_dtype	dtype;
	int		fortran;
	uint32_t	ndim;
	uint64_t	shape[NPY_MAX_DIMS];
	size_t		data_off;	/* where the data starts */
	uint64_t	data_bytes;	/* prod(shape) * dtype size */
};

/* A cursor over the header's dict text. */
struct npy_cursor {
	const uint8_t	*p;
	const uint8_t	*e;
	char		*err;
	size_t		 errlen;
};

static int	npy_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	npy_fail(struct npy_cursor *, const char *, ...)
		    __attribute__((__format__(__printf__, 2, 3)));
static int	npy_remote_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	npy_remote_read(const struct dataset *, uint64_t, void *,
		    int64_t *, bool);
static void	npy_remote_close(struct dataset *);
static void	*npy_remote_order_new(const struct dataset *,
		    const struct sampler_opts *);
static void	 npy_remote_read_ahead(const struct dataset *,
		    const uint64_t *, uint32_t);
static int	npy_samples_set(struct dataset *, const char *,
		    const struct npy_header *, uint64_t *, char **);
static int	npy_labels_set(struct dataset *, const char *, const char *,
		    const struct npy_header *, uint64_t *, char **);
static int	npy_parse(const uint8_t *, size_t, uint64_t,
		    struct npy_header *, char *, size_t);

/* What a remote npy dataset holds. */
struct npy_remote {
	struct cache_object	*data;
	struct cache_object	*labels;
	uint64_t		 data_off;
	uint64_t		 labels_off;
};

const struct dataset_ops dataset_remote_npy_ops = {
	.type = "npy",
	.keys = (const char *const []){ "path", "labels", "classes", S3_KEYS,
	    NULL },
	.data_key = "path",
	.labels_key = "labels",
	.open = npy_remote_open,
	.read = npy_remote_read,
	.close = npy_remote_close,
	.order_new = npy_remote_order_new,
	.order_at = dataset_remote_order_at,
	.order_free = dataset_remote_order_free,
	.read_ahead = npy_remote_read_ahead,
};

const struct dataset_ops dataset_npy_ops = {
	.type = "npy",
	.keys = (const char *const []){ "path", "labels", "classes", NULL },
	.data_key = "path",
	.labels_key = "labels",
	.open = npy_open,
	.read = dataset_pair_read,
	.locate = dataset_pair_locate,
	.close = dataset_pair_close,
};

static const struct {
	const char	*descr;
	enum infeed_dtype	 dtype;
} npy_dtypes[] = {
	{ "<u1", INFEED_DTYPE_UINT8 },
	{ "|u1", INFEED_DTYPE_UINT8 },
	{ "<i4", INFEED_DTYPE_INT32 },
	{ "<i8", INFEED_DTYPE_INT64 },
	{ "<f2", INFEED_DTYPE_FLOAT16 },
	{ "<f4", INFEED_DTYPE_FLOAT32 },
	{ "<f8", INFEED_DTYPE_FLOAT64 },
};

/* Record a parse error; return -1. */
static int
npy_fail(struct npy_cursor *c, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(c->err, c->errlen, fmt, ap);
	va_end(ap);
	return (-1);
}

/* Skip Python whitespace. */
static void
npy_skip(struct npy_cursor *c)
{
	while (c->p < c->e && (*c->p == ' ' || *c->p == '\t' ||
	    *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

/* Expect one character after optional whitespace. */
static int
npy_expect(struct npy_cursor *c, char ch, const char *where)
{
	npy_skip(c);
	if (c->p == c->e)
		return (npy_fail(c, "the header ends where '%c' %s was "
		    "expected", ch, where));
	if (*c->p != (uint8_t)ch)
		return (npy_fail(c, "found '%c' where '%c' %s was expected",
		    *c->p >= 0x20 && *c->p < 0x7f ? *c->p : '?', ch, where));
	c->p++;
	return (0);
}

/* Parse a quoted string into buf (len bytes); longer strings fail. */
static int
npy_string(struct npy_cursor *c, char *buf, size_t len, const char *what)
{
	uint8_t	q;
	size_t	n = 0;

	npy_skip(c);
	if (c->p == c->e || (*c->p != '\'' && *c->p != '"'))
		return (npy_fail(c, "%s is not a quoted string", what));
	q = *c->p++;
	while (c->p < c->e && *c->p != q) {
		if (*c->p < 0x20 || *c->p >= 0x7f || *c->p == '\\')
			return (npy_fail(c, "%s holds a character that has "
			    "no place in a .npy header", what));
		if (n + 1 >= len)
			return (npy_fail(c, "%s is too long", what));
		buf[n++] = (char)*c->p++;
	}
	if (c->p == c->e)
		return (npy_fail(c, "%s has no closing quote", what));
	c->p++;
	buf[n] = '\0';
	return (0);
}

/* Parse True or False. */
static int
npy_bool(struct npy_cursor *c, int *out)
{
	npy_skip(c);
	if ((size_t)(c->e - c->p) >= 4 && memcmp(c->p, "True", 4) == 0) {
		c->p += 4;
		*out = 1;
		return (0);
	}
	if ((size_t)(c->e - c->p) >= 5 && memcmp(c->p, "False", 5) == 0) {
		c->p += 5;
		*out = 0;
		return (0);
	}
	return (npy_fail(c, "'fortran_order' is neither True nor False"));
}

/* Parse a tuple of non-negative integers such as (60000, 28, 28). */
static int
npy_tuple(struct npy_cursor *c, struct npy_header *h)
{
	uint64_t	v;
	int		digits;

	if (npy_expect(c, '(', "opening 'shape'") != 0)
		return (-1);
	h->ndim = 0;
	for (;;) {
		npy_skip(c);
		if (c->p < c->e && *c->p == ')') {
			c->p++;
			return (0);
		}
		if (h->ndim == NPY_MAX_DIMS)
			return (npy_fail(c, "'shape' has more than %d "
			    "dimensions", NPY_MAX_DIMS));
		v = 0;
		digits = 0;
		while (c->p < c->e && *c->p >= '0' && *c->p <= '9') {
			if (v > (UINT64_MAX - (*c->p - '0')) / 10)
				return (npy_fail(c, "a dimension in 'shape' "
				    "is too large"));
			v = v * 10 + (*c->p++ - '0');
			digits++;
		}
		if (digits == 0)
			return (npy_fail(c, "'shape' is not a tuple of "
			    "non-negative integers"));
		if (c->p < c->e && *c->p == 'L')	/* Python 2's long */
			c->p++;
		h->shape[h->ndim++] = v;
		npy_skip(c);
		if (c->p < c->e && *c->p == ',')
			c->p++;
		else if (c->p < c->e && *c->p == ')')
			continue;
		else
			return (npy_fail(c, "'shape' is not a tuple of "
			    "non-negative integers"));
	}
}

/* Map a descr to a dtype, or explain why it cannot be read. */
static int
npy_dtype(struct npy_cursor *c, struct npy_header *h)
{
	size_t	i;

	for (i = 0; i < sizeof npy_dtypes / sizeof npy_dtypes[0]; i++) {
		if (strcmp(npy_dtypes[i].descr, h->descr) == 0) {
			h->dtype = npy_dtypes[i].dtype;
			return (0);
		}
	}
	if (h->descr[0] == '>')
		return (npy_fail(c, "dtype '%s' is big-endian; save it with "
		    "arr.astype('<%s')", h->descr, h->descr + 1));
	return (npy_fail(c, "dtype '%s' is not supported; use <u1, <i4, "
	    "<i8, <f2, <f4 or <f8", h->descr));
}

/*
 * Parse the .npy header at the start of buf (len bytes, the first of the
 * file's @file_len) into h.  Return: 0, or -1 with a reason in err.
 */
static int
npy_parse(const uint8_t *buf, size_t len, uint64_t file_len,
    struct npy_header *h, char *err, size_t errlen)
{
	struct npy_cursor	 c;
	char			 key[32];
	uint32_t		 hlen, i;
	size_t			 start, size;
	int			 seen_descr = 0, seen_fortran = 0;
	int			 seen_shape = 0;

	memset(h, 0, sizeof *h);
	c.err = err;
	c.errlen = errlen;
	c.p = c.e = buf;

	if (len < NPY_MAGIC_LEN || memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
		return (npy_fail(&c, "not a .npy file: it does not start with "
		    "\\x93NUMPY"));
	if (len < 10)
		return (npy_fail(&c, "truncated: the file has %zu bytes, less "
		    "than a .npy header", len));
	if (file_len < len)
		file_len = len;
	switch (buf[6]) {
	case 1:
		hlen = (uint32_t)buf[8] | (uint32_t)buf[9] << 8;
		start = 10;
		break;
	case 2:
	case 3:
		if (len < 12)
			return (npy_fail(&c, "truncated: the file has %zu "
			    "bytes, less than a .npy header", len));
		hlen = (uint32_t)buf[8] | (uint32_t)buf[9] << 8 |
		    (uint32_t)buf[10] << 16 | (uint32_t)buf[11] << 24;
		start = 12;
		break;
	default:
		return (npy_fail(&c, ".npy format version %u.%u is not "
		    "supported (1.0, 2.0 and 3.0 are)", buf[6], buf[7]));
	}
	if (hlen > file_len - start)
		return (npy_fail(&c, "truncated: the header says it is %" PRIu32
		    " bytes long but only %" PRIu64 " follow", hlen,
		    file_len - start));
	if (hlen > len - start)
		return (npy_fail(&c, "the header says it is %" PRIu32 " bytes "
		    "long; infeed reads headers of at most %d bytes", hlen,
		    NPY_MAX_HEADER));
	c.p = buf + start;
	c.e = c.p + hlen;
	h->data_off = start + hlen;

	if (npy_expect(&c, '{', "opening the header dict") != 0)
		return (-1);
	for (;;) {
		npy_skip(&c);
		if (c.p < c.e && *c.p == '}') {
			c.p++;
			break;
		}
		if (npy_string(&c, key, sizeof key, "a key of the header "
		    "dict") != 0)
			return (-1);
		if (npy_expect(&c, ':', "after a key") != 0)
			return (-1);
		if (strcmp(key, "descr") == 0 && !seen_descr) {
			npy_skip(&c);
			if (c.p < c.e && *c.p == '[')
				return (npy_fail(&c, "structured dtypes are "
				    "not supported"));
			if (npy_string(&c, h->descr, sizeof h->descr,
			    "'descr'") != 0)
				return (-1);
			seen_descr = 1;
		} else if (strcmp(key, "fortran_order") == 0 &&
		    !seen_fortran) {
			if (npy_bool(&c, &h->fortran) != 0)
				return (-1);
			seen_fortran = 1;
		} else if (strcmp(key, "shape") == 0 && !seen_shape) {
			if (npy_tuple(&c, h) != 0)
				return (-1);
			seen_shape = 1;
		} else if (strcmp(key, "descr") == 0 ||
		    strcmp(key, "fortran_order") == 0 ||
		    strcmp(key, "shape") == 0) {
			return (npy_fail(&c, "the header gives '%s' twice",
			    key));
		} else
			return (npy_fail(&c, "unexpected key '%s' in the "
			    "header", key));
		npy_skip(&c);
		if (c.p < c.e && *c.p == ',')
			c.p++;
		else if (c.p < c.e && *c.p == '}')
			continue;
		else
			return (npy_fail(&c, "the header dict is not closed "
			    "with '}'"));
	}
	npy_skip(&c);
	if (c.p != c.e)
		return (npy_fail(&c, "the header has something after its "
		    "dict"));
	if (!seen_descr || !seen_fortran || !seen_shape)
		return (npy_fail(&c, "the header has no '%s'", !seen_descr ?
		    "descr" : !seen_fortran ? "fortran_order" : "shape"));
	if (npy_dtype(&c, h) != 0)
		return (-1);
	if (h->fortran)
		return (npy_fail(&c, "the array is in Fortran order; save "
		    "np.ascontiguousarray(arr) instead"));

	size = dtype_size(h->dtype);
	h->data_bytes = size;
	for (i = 0; i < h->ndim; i++) {
		if (__builtin_mul_overflow(h->data_bytes, h->shape[i],
		    &h->data_bytes))
			return (npy_fail(&c, "'shape' is too large"));
	}
	return (0);
}

/* "(60000, 1, 28, 28)" for messages. */
static char *
npy_shape_format(const struct npy_header *h, char *buf, size_t len)
{
	size_t		off = 0;
	uint32_t	i;
	int		n;

	n = snprintf(buf, len, "(");
	for (i = 0; i < h->ndim && n >= 0 && off + (size_t)n < len; i++) {
		off += (size_t)n;
		n = snprintf(buf + off, len - off, "%s%" PRIu64,
		    i == 0 ? "" : ", ", h->shape[i]);
	}
	if (n >= 0 && off + (size_t)n < len) {
		off += (size_t)n;
		snprintf(buf + off, len - off, h->ndim == 1 ? ",)" : ")");
	}
	return (buf);
}

/*
 * Parse the header in the first @len bytes (all of them, or
 * NPY_MAX_HEADER) of a .npy file of @size bytes; check the data's length.
 */
static int
npy_check(struct dataset *ds, const char *path, const uint8_t *head,
    size_t len, uint64_t size, struct npy_header *h, char **cause)
{
	char		 err[256], shape[160];
	uint64_t	 have;

	if (npy_parse(head, len, size, h, err, sizeof err) != 0)
		return (dataset_error(cause, ds, "%s: %s", path, err));
	npy_shape_format(h, shape, sizeof shape);
	have = size - h->data_off;
	if (have < h->data_bytes)
		return (dataset_error(cause, ds, "%s: truncated: header says "
		    "shape %s of %s (%" PRIu64 " bytes) but the file has %"
		    PRIu64 " bytes of data", path, shape, h->descr,
		    h->data_bytes, have));
	if (have > h->data_bytes)
		return (dataset_error(cause, ds, "%s: header says shape %s of "
		    "%s (%" PRIu64 " bytes) but the file has %" PRIu64 " bytes "
		    "of data, %" PRIu64 " too many", path, shape, h->descr,
		    h->data_bytes, have, have - h->data_bytes));
	return (0);
}

/* Parse the header of the .npy file behind @m; check the data's length. */
static int
npy_load(struct dataset *ds, const char *path, const struct dataset_map *m,
    struct npy_header *h, char **cause)
{
	uint8_t		*head;
	size_t		 len;
	int		 rc;

	len = m->size < NPY_MAX_HEADER ? (size_t)m->size : NPY_MAX_HEADER;
	if ((head = malloc(len)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	if (dataset_pread(m, head, len, 0) != 0) {
		dataset_error(cause, ds, "%s: cannot read the header: %s",
		    path, strerror(errno));
		free(head);
		return (-1);
	}
	rc = npy_check(ds, path, head, len, m->size, h, cause);
	free(head);
	return (rc);
}

/* The samples: an array (N, ...) whose first dimension is N. */
int
dataset_npy_samples(struct dataset *ds, const char *path,
    const struct dataset_map *m, uint64_t *off, char **cause)
{
	struct npy_header	 h;

	if (npy_load(ds, path, m, &h, cause) != 0)
		return (-1);
	return (npy_samples_set(ds, path, &h, off, cause));
}

/* The samples' shape and count from their header @h. */
static int
npy_samples_set(struct dataset *ds, const char *path,
    const struct npy_header *hp, uint64_t *off, char **cause)
{
	struct npy_header	 h = *hp;
	char			 shape[160];
	uint32_t		 i;

	npy_shape_format(&h, shape, sizeof shape);
	if (h.ndim == 0 || h.shape[0] == 0)
		return (dataset_error(cause, ds, "%s: shape %s holds no "
		    "samples; the first dimension is the sample count", path,
		    shape));
	if (h.ndim - 1 > INFEED_MAX_DIMS)
		return (dataset_error(cause, ds, "%s: shape %s gives a sample "
		    "more than %d dimensions", path, shape, INFEED_MAX_DIMS));
	for (i = 1; i < h.ndim; i++) {
		if (h.shape[i] == 0)
			return (dataset_error(cause, ds, "%s: shape %s makes "
			    "every sample empty", path, shape));
	}
	ds->samples = h.shape[0];
	ds->dtype = h.dtype;
	ds->ndim = h.ndim - 1;
	for (i = 0; i < ds->ndim; i++)
		ds->shape[i] = h.shape[i + 1];
	/* Cannot overflow: the whole array's size was checked. */
	dataset_shape_bytes(ds->shape, ds->ndim, ds->dtype, &ds->sample_bytes);
	*off = h.data_off;
	return (0);
}

/* The labels: integers of shape (N,), each a class number (see above). */
int
dataset_npy_labels(struct dataset *ds, const char *lpath, const char *path,
    const struct dataset_map *m, uint64_t *off, char **cause)
{
	struct npy_header	lh;

	if (npy_load(ds, lpath, m, &lh, cause) != 0 ||
	    npy_labels_set(ds, lpath, path, &lh, off, cause) != 0)
		return (-1);
	/* A client's labels are checked as the workers read them. */
	if (ds->client_files)
		return (0);
	return (dataset_labels_check_file(ds, lpath, m, lh.data_off,
	    ds->label_dtype, cause));
}

/* The labels' dtype and where they start, from their header @lh. */
static int
npy_labels_set(struct dataset *ds, const char *lpath, const char *path,
    const struct npy_header *lh, uint64_t *off, char **cause)
{
	char	shape[160];

	npy_shape_format(lh, shape, sizeof shape);
	if (lh->dtype != INFEED_DTYPE_UINT8 && lh->dtype != INFEED_DTYPE_INT32 &&
	    lh->dtype != INFEED_DTYPE_INT64)
		return (dataset_error(cause, ds, "%s: labels have dtype '%s'; "
		    "they must be integers: <u1, <i4 or <i8", lpath,
		    lh->descr));
	if (lh->ndim != 1 || lh->shape[0] != ds->samples)
		return (dataset_error(cause, ds, "%s: labels have shape %s "
		    "where %s needs (%" PRIu64 ",): one label per sample",
		    lpath, shape, path, ds->samples));
	ds->label_dtype = lh->dtype;
	*off = lh->data_off;
	return (0);
}

/* Open an npy dataset: the samples, then labels that must match them. */
static int
npy_open(struct dataset *ds, const struct dataset_conf *conf, char **cause)
{
	struct dataset_pair	*n;
	const char		*path, *lpath;

	if ((n = calloc(1, sizeof *n)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	n->data.fd = n->labels.fd = -1;
	ds->priv = n;
	if (dataset_conf_classes(ds, conf, cause) != 0)
		goto fail;
	if ((path = dataset_conf_need(ds, conf, "path",
	    "the path of the .npy file of samples", cause)) == NULL)
		goto fail;
	if ((lpath = dataset_conf_need(ds, conf, "labels",
	    "the path of the .npy file of labels", cause)) == NULL)
		goto fail;
	if (dataset_map_file(ds, path, &n->data, cause) != 0 ||
	    dataset_npy_samples(ds, path, &n->data, &n->data_off, cause) != 0)
		goto fail;
	if (dataset_map_file(ds, lpath, &n->labels, cause) != 0 ||
	    dataset_npy_labels(ds, lpath, path, &n->labels, &n->labels_off,
	    cause) != 0)
		goto fail;
	n->reads = true;
	return (0);

fail:
	dataset_pair_close(ds);
	return (-1);
}

/* The header of the remote .npy @obj (one range: its first bytes). */
static int
npy_remote_header(struct dataset *ds, const char *url,
    struct cache_object *obj, struct npy_header *h, char **cause)
{
	uint64_t	 size = cache_object_size(obj);
	size_t		 len = size < NPY_MAX_HEADER ? (size_t)size :
			    NPY_MAX_HEADER;
	uint8_t		*head;
	char		*why = NULL;
	int		 rc;

	if ((head = malloc(len + 1)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	if (cache_object_read(obj, 0, len, head, &why) != 0) {
		dataset_error(cause, ds, "%s: cannot read the header: %s", url,
		    why != NULL ? why : strerror(ENOMEM));
		free(why);
		free(head);
		return (-1);
	}
	rc = npy_check(ds, url, head, len, size, h, cause);
	free(head);
	return (rc);
}

/* Both arrays' headers, one range request each; no records read. */
static int
npy_remote_open(struct dataset *ds, const struct dataset_conf *conf,
    char **cause)
{
	struct npy_remote	*r;
	struct npy_header	 h;
	const char		*path, *lpath;
	char			*why = NULL;

	if ((r = calloc(1, sizeof *r)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	ds->priv = r;
	path = dataset_conf_get(conf, "path");
	if ((lpath = dataset_conf_need(ds, conf, "labels",
	    "the URL of the .npy file of labels", cause)) == NULL ||
	    dataset_conf_classes(ds, conf, cause) != 0)
		goto fail;
	if (!s3_url(lpath)) {
		dataset_error(cause, ds, "'labels = %s': the samples are at a "
		    "URL, so the labels must be too (http://, https:// or "
		    "s3://)", lpath);
		goto fail;
	}
	if (ds->classes == 0) {
		dataset_error(cause, ds, "remote labels are not scanned at "
		    "open (that would download them all): give 'classes ='");
		goto fail;
	}
	if (dataset_remote_site(ds, path, conf, cause) != 0 ||
	    dataset_remote_site(ds, lpath, conf, cause) != 0)
		goto fail;
	if ((r->data = cache_object_open(path, &why)) == NULL ||
	    (r->labels = cache_object_open(lpath, &why)) == NULL) {
		dataset_error(cause, ds, "%s", why != NULL ? why :
		    strerror(ENOMEM));
		free(why);
		goto fail;
	}
	if (npy_remote_header(ds, path, r->data, &h, cause) != 0 ||
	    npy_samples_set(ds, path, &h, &r->data_off, cause) != 0 ||
	    npy_remote_header(ds, lpath, r->labels, &h, cause) != 0 ||
	    npy_labels_set(ds, lpath, path, &h, &r->labels_off, cause) != 0)
		goto fail;
	return (0);

fail:
	npy_remote_close(ds);
	return (-1);
}

/* Record @index and its label, through the cache. */
static int
npy_remote_read(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label, bool stream)
{
	const struct npy_remote	*r = ds->priv;

	(void)stream;
	return (dataset_remote_record(ds, r->data, r->data_off, r->labels,
	    r->labels_off, index, dst, label));
}

/* A session's order: records from each array's data, after its header. */
static void *
npy_remote_order_new(const struct dataset *ds, const struct sampler_opts *opts)
{
	const struct npy_remote	*r = ds->priv;

	return (dataset_remote_order_new(ds, r->data, r->data_off, r->labels,
	    r->labels_off, opts));
}

/* Start downloading later steps' records, after each array's header. */
static void
npy_remote_read_ahead(const struct dataset *ds, const uint64_t *idx,
    uint32_t n)
{
	const struct npy_remote	*r = ds->priv;

	dataset_remote_read_ahead(ds, r->data, r->data_off, r->labels,
	    r->labels_off, idx, n);
}

/* Close both objects. */
static void
npy_remote_close(struct dataset *ds)
{
	struct npy_remote	*r = ds->priv;

	if (r == NULL)
		return;
	cache_object_close(r->data);
	cache_object_close(r->labels);
	free(r);
	ds->priv = NULL;
}
