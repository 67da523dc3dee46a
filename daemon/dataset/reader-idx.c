/* SPDX-License-Identifier: MIT */
/*
 * The "idx" reader: MNIST-style IDX files, plain or gzip-compressed.
 *
 *	[dataset mnist]
 *	type = idx
 *	images = /data/train-images-idx3-ubyte.gz
 *	labels = /data/train-labels-idx1-ubyte.gz
 *	classes = 10			(optional; else max label + 1)
 *
 * An images file is magic 00 00 08 03 (unsigned bytes, 3 dimensions) then
 * N, rows and cols as big-endian 32-bit numbers, then N*rows*cols bytes;
 * a sample is [1, rows, cols], channel first as torchvision's ToTensor
 * gives it.  Magic 00 00 08 04 (N, channels, rows, cols) is read the same
 * way with sample shape [channels, rows, cols].  A labels file is magic
 * 00 00 08 01, then N, then N bytes.  Other IDX element types are refused.
 *
 * A plain file is mapped read-only.  A gzip file (magic 1f 8b) is inflated
 * once, at open, into a MAP_SHARED anonymous mapping, so the workers forked
 * later share the bytes instead of each inflating its own copy.  Either way
 * the length must be exactly what the header says.
 */

#include <sys/mman.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZLIB_CONST	/* next_in is const: the input is a read-only map */
#include <zlib.h>

#include "copy.h"
#include "reader-idx.h"

#define IDX_TYPE_UBYTE	0x08
#define IDX_MAX_DIMS	4

/* One IDX file as held in memory. */
struct idx_file {
	const char		*path;
	struct dataset_map	 map;		/* header and data */
	size_t			 off;		/* header length */
	uint32_t		 ndims;
	uint64_t		 dims[IDX_MAX_DIMS];
};

struct idx {
	struct idx_file		 images;
	struct idx_file		 labels;
};

/* Inflating a gzip file that is mapped whole. */
struct idx_gz {
	z_stream	 zs;
	const uint8_t	*next;		/* not yet given to zlib */
	size_t		 left;
	int		 done;		/* no more output */
	int		 early;		/* input ended early */
};

static int	idx_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	idx_read(const struct dataset *, uint64_t, void *, int64_t *,
		    bool);
static int	idx_locate(const struct dataset *, uint64_t,
		    struct dataset_loc *, int64_t *);
static void	idx_close(struct dataset *);
static int	idx_magic(struct dataset *, struct idx_file *,
		    const uint8_t *, int, char **);
static int	idx_dims(struct dataset *, struct idx_file *, const uint8_t *,
		    int, uint64_t *, char **);
static void	idx_describe(const struct idx_file *, int, uint64_t, char *,
		    size_t);
static int	idx_load(struct dataset *, struct idx_file *, int, char **);
static int	idx_load_gzip(struct dataset *, struct idx_file *, int,
		    struct dataset_map *, char **);
static int	idx_gz_pull(struct idx_gz *, void *, size_t, size_t *);

const struct dataset_ops dataset_idx_ops = {
	.type = "idx",
	.keys = (const char *const []){ "images", "labels", "classes", NULL },
	.data_key = "images",
	.labels_key = "labels",
	.open = idx_open,
	.read = idx_read,
	.locate = idx_locate,
	.close = idx_close,
};

/* Name an IDX element type for messages. */
static const char *
idx_type_name(uint8_t t)
{
	switch (t) {
	case 0x08:
		return ("unsigned byte");
	case 0x09:
		return ("signed byte");
	case 0x0b:
		return ("int16");
	case 0x0c:
		return ("int32");
	case 0x0d:
		return ("float32");
	case 0x0e:
		return ("float64");
	default:
		return (NULL);
	}
}

/* Check the 4-byte magic of an images or labels file and learn ndims. */
static int
idx_magic(struct dataset *ds, struct idx_file *f, const uint8_t *m,
    int labels, char **cause)
{
	const char	*tname;
	uint32_t	 want = labels ? 1 : 3;

	if (m[0] != 0 || m[1] != 0) {
		if (m[0] == 0x93 && m[1] == 'N')
			return (dataset_error(cause, ds, "%s: not an IDX file "
			    "but a NumPy .npy file; use 'type = npy'",
			    f->path));
		return (dataset_error(cause, ds, "%s: not an IDX file: it "
		    "starts with %02x %02x %02x %02x where an IDX %s file "
		    "starts with 00 00 08 %02x", f->path, m[0], m[1], m[2],
		    m[3], labels ? "labels" : "images", want));
	}
	if (m[2] != IDX_TYPE_UBYTE) {
		if ((tname = idx_type_name(m[2])) == NULL)
			return (dataset_error(cause, ds, "%s: not an IDX file: "
			    "unknown element type 0x%02x in its magic "
			    "%02x %02x %02x %02x", f->path, m[2], m[0], m[1],
			    m[2], m[3]));
		return (dataset_error(cause, ds, "%s: holds %s elements (IDX "
		    "type 0x%02x); only unsigned byte (0x08) IDX files are "
		    "read, so convert it to raw or npy", f->path, tname,
		    m[2]));
	}
	f->ndims = m[3];
	if (labels && f->ndims != 1) {
		return (dataset_error(cause, ds, "%s: has %u dimensions (magic "
		    "00 00 08 %02x) where a labels file has 1 (magic "
		    "00 00 08 01)%s", f->path, f->ndims, f->ndims,
		    f->ndims == 3 ? "; 'labels =' names an images file" : ""));
	}
	if (!labels && f->ndims != 3 && f->ndims != 4) {
		return (dataset_error(cause, ds, "%s: has %u dimensions (magic "
		    "00 00 08 %02x) where an images file has 3 (magic "
		    "00 00 08 03: N, rows, cols) or 4 (N, channels, rows, "
		    "cols)%s", f->path, f->ndims, f->ndims,
		    f->ndims == 1 ? "; 'images =' names a labels file" : ""));
	}
	f->off = 4 + 4 * (size_t)f->ndims;
	return (0);
}

/* Read the big-endian dimensions after the magic; total data bytes out. */
static int
idx_dims(struct dataset *ds, struct idx_file *f, const uint8_t *h,
    int labels, uint64_t *bytes, char **cause)
{
	const uint8_t	*p;
	uint64_t	 n = 1;
	uint32_t	 i;

	for (i = 0; i < f->ndims; i++) {
		p = h + 4 + 4 * i;
		f->dims[i] = (uint64_t)p[0] << 24 | (uint64_t)p[1] << 16 |
		    (uint64_t)p[2] << 8 | (uint64_t)p[3];
		if (f->dims[i] == 0)
			return (dataset_error(cause, ds, "%s: dimension %u of "
			    "the IDX header is 0; the file holds no %s",
			    f->path, i + 1, labels ? "labels" : "images"));
		if (__builtin_mul_overflow(n, f->dims[i], &n) ||
		    n > SIZE_MAX - f->off)
			return (dataset_error(cause, ds, "%s: the IDX header's "
			    "dimensions multiply to more bytes than can be "
			    "held", f->path));
	}
	*bytes = n;
	return (0);
}

/* "60000 images of 28x28 (47040000 bytes)" or "60000 labels (...)". */
static void
idx_describe(const struct idx_file *f, int labels, uint64_t bytes, char *buf,
    size_t len)
{
	char	shape[96];

	if (labels) {
		snprintf(buf, len, "%" PRIu64 " labels (%" PRIu64 " bytes)",
		    f->dims[0], bytes);
		return;
	}
	dataset_shape_format(f->dims + 1, f->ndims - 1, shape, sizeof shape);
	snprintf(buf, len, "%" PRIu64 " images of %s (%" PRIu64 " bytes)",
	    f->dims[0], shape, bytes);
}

/*
 * Inflate up to len bytes to dst, going on into the next member of a
 * multi-member file; *got counts what came out.  Stops early, with
 * g->done set, at the end of the data.  Return: 0, or -1 on corrupt data.
 */
static int
idx_gz_pull(struct idx_gz *g, void *dst, size_t len, size_t *got)
{
	uint8_t		*out = dst;
	const uint8_t	*rest;
	size_t		 n;
	uInt		 before;
	int		 ret;

	*got = 0;
	while (len > 0 && !g->done) {
		if (g->zs.avail_in == 0 && g->left > 0) {
			n = g->left < UINT_MAX ? g->left : UINT_MAX;
			g->zs.next_in = g->next;
			g->zs.avail_in = (uInt)n;
			g->next += n;
			g->left -= n;
		}
		before = len < UINT_MAX ? (uInt)len : UINT_MAX;
		g->zs.next_out = out;
		g->zs.avail_out = before;
		ret = inflate(&g->zs, Z_NO_FLUSH);
		n = before - g->zs.avail_out;
		out += n;
		len -= n;
		*got += n;
		switch (ret) {
		case Z_OK:
			break;
		case Z_STREAM_END:
			/*
			 * Another member follows?  What zlib has not taken
			 * yet is contiguous from next_in, as the whole file
			 * is mapped.  Anything else after a member is
			 * ignored, as gzip(1) does.
			 */
			rest = g->zs.next_in;
			if (g->zs.avail_in + g->left >= 2 && rest[0] == 0x1f &&
			    rest[1] == 0x8b) {
				if (inflateReset(&g->zs) != Z_OK)
					return (-1);
			} else
				g->done = 1;
			break;
		case Z_BUF_ERROR:
			/* No progress: out of input, as output has room. */
			if (g->zs.avail_in == 0 && g->left == 0) {
				g->done = 1;
				g->early = 1;
				break;
			}
			return (-1);
		default:
			return (-1);
		}
	}
	return (0);
}

/* Inflate a gzip IDX file (mapped as z) into a shared anonymous mapping. */
static int
idx_load_gzip(struct dataset *ds, struct idx_file *f, int labels,
    struct dataset_map *z, char **cause)
{
	struct idx_gz	 g;
	uint8_t		 hdr[4 + 4 * IDX_MAX_DIMS], scratch[16384];
	uint64_t	 bytes, have;
	size_t		 got, more;
	void		*p;
	char		 what[160];
	int		 rv = -1;

	memset(&g, 0, sizeof g);
	g.next = z->base;
	g.left = z->len;
	if (inflateInit2(&g.zs, 16 + MAX_WBITS) != Z_OK)
		return (dataset_error(cause, ds, "%s: cannot start zlib: %s",
		    f->path, g.zs.msg != NULL ? g.zs.msg : "out of memory"));

	if (idx_gz_pull(&g, hdr, 4, &got) != 0)
		goto corrupt;
	if (got < 4) {
		dataset_error(cause, ds, "%s: truncated: it decompresses to "
		    "%zu bytes, less than an IDX header", f->path, got);
		goto out;
	}
	if (idx_magic(ds, f, hdr, labels, cause) != 0)
		goto out;
	if (idx_gz_pull(&g, hdr + 4, f->off - 4, &got) != 0)
		goto corrupt;
	if (got < f->off - 4) {
		dataset_error(cause, ds, "%s: truncated: it decompresses to "
		    "%zu bytes, less than its %zu-byte IDX header", f->path,
		    4 + got, f->off);
		goto out;
	}
	if (idx_dims(ds, f, hdr, labels, &bytes, cause) != 0)
		goto out;
	idx_describe(f, labels, bytes, what, sizeof what);

	p = mmap(NULL, f->off + bytes, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		dataset_error(cause, ds, "%s: header says %s, more than can "
		    "be held in memory: %s", f->path, what, strerror(errno));
		goto out;
	}
	f->map.base = p;
	f->map.len = f->off + bytes;
	f->map.fd = -1;
	memcpy(f->map.base, hdr, f->off);
	if (idx_gz_pull(&g, f->map.base + f->off, bytes, &got) != 0)
		goto corrupt;
	have = got;
	while (!g.done) {
		if (idx_gz_pull(&g, scratch, sizeof scratch, &more) != 0)
			goto corrupt;
		have += more;
	}
	if (have < bytes) {
		dataset_error(cause, ds, "%s: truncated: header says %s but "
		    "the file has %" PRIu64 " bytes of data%s", f->path, what,
		    have, g.early ? " (and its gzip stream ends early)" : "");
		goto out;
	}
	if (have > bytes) {
		dataset_error(cause, ds, "%s: header says %s but the file has "
		    "%" PRIu64 " bytes of data, %" PRIu64 " too many", f->path,
		    what, have, have - bytes);
		goto out;
	}
	if (g.early) {
		dataset_error(cause, ds, "%s: truncated: the gzip stream ends "
		    "early (its data is complete, its trailer is not)",
		    f->path);
		goto out;
	}
	if (mprotect(f->map.base, f->map.len, PROT_READ) != 0) {
		dataset_error(cause, ds, "%s: mprotect: %s", f->path,
		    strerror(errno));
		goto out;
	}
	rv = 0;
	goto out;

corrupt:
	dataset_error(cause, ds, "%s: the gzip data is corrupt: %s", f->path,
	    g.zs.msg != NULL ? g.zs.msg : "inflate failed");
out:
	inflateEnd(&g.zs);
	if (rv != 0)
		dataset_unmap(&f->map);
	return (rv);
}

/* Map or inflate one IDX file and check its header against its length. */
static int
idx_load(struct dataset *ds, struct idx_file *f, int labels, char **cause)
{
	struct dataset_map	 z;
	uint64_t		 bytes;
	char			 what[160];
	int			 rv;

	if (dataset_map_file(ds, f->path, &z, cause) != 0)
		return (-1);
	if (z.len >= 2 && z.base[0] == 0x1f && z.base[1] == 0x8b) {
		rv = idx_load_gzip(ds, f, labels, &z, cause);
		dataset_unmap(&z);
		return (rv);
	}

	f->map = z;
	if (z.len >= 4 && idx_magic(ds, f, z.base, labels, cause) != 0)
		goto fail;
	if (z.len < 4 || z.len < f->off) {
		dataset_error(cause, ds, "%s: truncated: the file has %zu "
		    "bytes, less than an IDX header", f->path, z.len);
		goto fail;
	}
	if (idx_dims(ds, f, z.base, labels, &bytes, cause) != 0)
		goto fail;
	idx_describe(f, labels, bytes, what, sizeof what);
	if (z.len - f->off < bytes) {
		dataset_error(cause, ds, "%s: truncated: header says %s but "
		    "the file has %zu bytes of data", f->path, what,
		    z.len - f->off);
		goto fail;
	}
	if (z.len - f->off > bytes) {
		dataset_error(cause, ds, "%s: header says %s but the file has "
		    "%zu bytes of data, %" PRIu64 " too many", f->path, what,
		    z.len - f->off, z.len - f->off - bytes);
		goto fail;
	}
	return (0);

fail:
	dataset_unmap(&f->map);
	return (-1);
}

/* Open an idx dataset: both files, their counts and the labels. */
static int
idx_open(struct dataset *ds, const struct dataset_conf *conf, char **cause)
{
	struct idx	*x;
	uint32_t	 i;

	if ((x = calloc(1, sizeof *x)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	ds->priv = x;
	if (dataset_conf_classes(ds, conf, cause) != 0)
		goto fail;
	if ((x->images.path = dataset_conf_need(ds, conf, "images",
	    "the path of the IDX images file", cause)) == NULL)
		goto fail;
	if ((x->labels.path = dataset_conf_need(ds, conf, "labels",
	    "the path of the IDX labels file", cause)) == NULL)
		goto fail;
	if (idx_load(ds, &x->images, 0, cause) != 0)
		goto fail;
	if (idx_load(ds, &x->labels, 1, cause) != 0)
		goto fail;
	if (x->images.dims[0] != x->labels.dims[0]) {
		dataset_error(cause, ds, "%s holds %" PRIu64 " images but %s "
		    "holds %" PRIu64 " labels; there must be one label per "
		    "image", x->images.path, x->images.dims[0], x->labels.path,
		    x->labels.dims[0]);
		goto fail;
	}

	ds->samples = x->images.dims[0];
	ds->dtype = INFEED_DTYPE_UINT8;
	ds->label_dtype = INFEED_DTYPE_UINT8;
	if (x->images.ndims == 3) {
		ds->ndim = 3;
		ds->shape[0] = 1;
		ds->shape[1] = x->images.dims[1];
		ds->shape[2] = x->images.dims[2];
	} else {
		ds->ndim = x->images.ndims - 1;
		for (i = 0; i < ds->ndim; i++)
			ds->shape[i] = x->images.dims[i + 1];
	}
	/* Cannot overflow: idx_dims() checked the whole file's size. */
	dataset_shape_bytes(ds->shape, ds->ndim, ds->dtype, &ds->sample_bytes);

	if (dataset_labels_check(ds, x->labels.path,
	    x->labels.map.base + x->labels.off, ds->label_dtype, cause) != 0)
		goto fail;
	return (0);

fail:
	idx_close(ds);
	return (-1);
}

/*
 * Copy one image out and read its label; -1 when a plain file no longer
 * holds it (truncated since it was mapped: see dataset_map_holds()).  An
 * inflated gzip file is anonymous memory, which nothing can cut short.
 */
static int
idx_read(const struct dataset *ds, uint64_t index, void *dst, int64_t *label,
    bool stream)
{
	const struct idx	*x = ds->priv;

	if (!dataset_map_holds(&x->images.map, x->images.off +
	    (index + 1) * ds->sample_bytes) ||
	    !dataset_map_holds(&x->labels.map, x->labels.off + index + 1))
		return (-1);
	copy_row(dst, x->images.map.base + x->images.off +
	    index * ds->sample_bytes, ds->sample_bytes, stream);
	*label = x->labels.map.base[x->labels.off + index];
	return (0);
}

/* Where an image is (a gzip file's: only in memory), and its label. */
static int
idx_locate(const struct dataset *ds, uint64_t index, struct dataset_loc *loc,
    int64_t *label)
{
	const struct idx	*x = ds->priv;
	uint64_t		 off = x->images.off + index * ds->sample_bytes;

	if (!dataset_map_holds(&x->images.map, off + ds->sample_bytes) ||
	    !dataset_map_holds(&x->labels.map, x->labels.off + index + 1))
		return (-1);
	loc->fd = x->images.map.fd;
	loc->off = off;
	loc->len = ds->sample_bytes;
	loc->mapped = x->images.map.base + off;
	loc->map = &x->images.map;
	loc->owned = false;
	*label = x->labels.map.base[x->labels.off + index];
	return (0);
}

/* Unmap both files. */
static void
idx_close(struct dataset *ds)
{
	struct idx	*x = ds->priv;

	if (x == NULL)
		return;
	dataset_unmap(&x->images.map);
	dataset_unmap(&x->labels.map);
	free(x);
	ds->priv = NULL;
}
