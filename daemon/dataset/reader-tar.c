/* SPDX-License-Identifier: MIT */
/*
 * The "tar" reader: images in tar shards, in WebDataset's convention.
 *
 *	[dataset imagenet-shards]
 *	type = tar
 *	shards = /data/train-{000000..000146}.tar	a brace pattern, or a
 *					list of paths and patterns separated
 *					by spaces or commas
 *	classes = 1000			(optional; else max label + 1)
 *
 * Each shard is indexed once, when the catalogue loads, and its
 * descriptor kept (close-on-exec, shared by the forked workers, which
 * read with pread only).  Per sample the index keeps the shard, the
 * image's offset and size and the label: 24 bytes.
 *
 * The indexer reads what Python's tarfile reads, as webdataset 1.0.2
 * uses it: 512-byte blocks; ustar names with their prefix; pax 'x' and
 * 'g' headers (path, size; webdataset's writer puts one before every
 * member); GNU 'L' and 'K' long names; base-256 sizes; the checksum,
 * signed or unsigned; the end at the first zero block.  Regular files are
 * grouped into samples as webdataset's group_by_keys does: the key is the
 * directory plus the basename up to its first dot, the suffix the rest,
 * lowercased; consecutive members with one key form a sample; names that
 * do not split so, and "__*__" names, are skipped.  A sample must have
 * exactly one image (jpg, jpeg, png; also ppm, pgm, bmp, tif, tiff and
 * webp, which the decoder will judge) and a "cls" label, parsed as
 * Python's int() parses it.  Anything else is refused at load, naming
 * the shard and the member: a sample without image or label, a repeated
 * suffix, a key that comes back after other samples, a bad label, a
 * corrupt or truncated shard.  Compressed shards are refused: random
 * access needs an uncompressed tar.
 *
 * Remote shards (http://, https://, s3://; dataset_remote_tar_ops, which
 * dataset.c picks when "shards =" names URLs) are read through the
 * host's cache (daemon/remote/cache.c), so a byte is downloaded once for
 * the host, whichever process reads it:
 *
 *	[dataset laion-shards]
 *	type = tar
 *	shards = s3://bucket/train/shard-{000000..000999}.tar
 *	index = s3://bucket/train/counts.txt	(optional: see below)
 *	classes = 1000			(needed with index =)
 *	endpoint, region, credentials, profile, ca_file: see s3.c
 *
 * Without "index =" each shard is indexed at open as a local one is, its
 * headers read through the cache (1 MiB blocks: in practice the whole
 * shard), and the samples' reads then find those blocks there: a shard is
 * downloaded once when cache_max holds the set.  With it the open reads
 * only that file: a line per shard, in the order of "shards =", its
 * sample count (an image and its label), then optionally the shard's
 * file name, which must match.  The counts fix N and every sample's
 * shard, so the order (a permutation of N, dataset.h) is known at once
 * and the first step waits for the few shards it reads, not for all: a
 * worker indexes a shard the first time it reads one of its samples
 * (through the cache, so the host downloads it once however many workers
 * index it) and fails that read, naming the shard, if the count is not
 * the index's.  The count cannot come from a shard's first bytes: tar
 * headers are spread through the whole shard.  A shard's line may be
 * followed by its samples' members ("+ OFFSET SIZE LABEL": the image
 * member's data and the label): that shard is never walked nor downloaded
 * whole; a sample is read by the pages of its member and the tar header
 * before it, rounded to the cache's granules (cache_object_read_part()),
 * the header checked to be a regular member's of that size, so that an
 * epoch's first steps download about their samples, not every shard they
 * touch (issue 38).
 *
 * dataset_tar_open_fd() indexes one shard from a descriptor; the fuzzer
 * feeds it arbitrary bytes, so nothing here trusts a size or a name.
 */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "braces.h"
#include "cache.h"
#include "fetch.h"
#include "reader-remote.h"
#include "reader-tar.h"
#include "s3.h"
#include "utf8.h"

#define TAR_BLOCK	512
#define TAR_WINDOW	32768		/* read ahead of the headers */
#define TAR_MAX_NAME	65536		/* an L name or a pax path */
#define TAR_MAX_PAX	(1024 * 1024)	/* a pax header's records */
#define TAR_MAX_CLS	4096		/* a .cls member */
/*
 * A remote shard's window, aligned: a header and what follows.  Not a
 * whole cache block: each worker walks each shard's headers (index =),
 * and copying every byte of the shard to read its headers was a third
 * of what the remote path cost over a local one (docs/performance.md,
 * issue 38 round four).  A missing block is downloaded whole all the same.
 */
#define TAR_REMOTE_WINDOW 8192
/*
 * A session's order is shared for at most this many shards x samples: the
 * process that evicts walks each shard's epoch (cache.c).
 */
#define TAR_ORDER_MAX	((uint64_t)1 << 24)
#define TAR_REMOTE_AHEAD (8 * CACHE_BLOCK)	/* asked for at once to index */
#define TAR_MAX_INDEX	(64 * 1024 * 1024)	/* an index = file */

/* One sample: the image member's data, in which shard, and the label. */
struct tar_sample {
	uint64_t	off;
	uint32_t	size;		/* UINT32_MAX: that or more */
	uint32_t	shard;
	uint32_t	label;
};

/* What an open tar dataset holds. */
struct tar {
	int			*fds;		/* -1 for a remote shard */
	char			**paths;
	uint32_t		 nshards;
	struct tar_sample	*s;
	uint64_t		 cap;
	/* Remote shards: objects opened as needed. */
	bool			 remote;
	bool			 lazy;		/* index = given */
	struct cache_object	**objs;
	/* With index =: each shard's first sample (nshards + 1 of them),
	 * and whether this process indexed it yet. */
	uint64_t		*first;
	uint8_t			*ready;
	/*
	 * Shards whose members the index lists: each sample read by its
	 * pages (cache_object_read_part()), the shard never walked.
	 */
	uint8_t			*parts;
	/* The read-ahead call that last asked a whole shard (a worker's). */
	uint32_t		*ahead_call;
	uint32_t		 ahead_calls;
};

/* A cursor over the members of one shard. */
struct tar_iter {
	int		 fd;
	struct cache_object *obj;	/* a remote shard's, or NULL */
	size_t		 wsize;		/* the window's size */
	char		 why[400];	/* a remote read's failure */
	uint64_t	 fsize;
	uint64_t	 pos;		/* of the next header */
	uint8_t		*win;		/* TAR_WINDOW bytes read ahead */
	uint64_t	 win_off;
	size_t		 win_len;
	char		*gpath;		/* a pax 'g' path, or NULL */
	bool		 has_gsize;
	uint64_t	 gsize;
	/* The member tar_next() found. */
	char		*name;
	uint64_t	 data_off;
	uint64_t	 size;
	bool		 regular;
	char		 err[600];
};

/* The sample being gathered from consecutive members. */
struct tar_group {
	bool		 active;
	char		*key;
	char		*first;		/* its first member's name */
	char		*image;		/* its image member's name, or NULL */
	char		 suffixes[512];	/* "\0"-separated, for duplicates */
	size_t		 slen;
	uint64_t	 off;
	uint64_t	 size;
	bool		 has_label;
	uint32_t	 label;
};

/* The keys a shard's samples had, to find one that comes back. */
struct tar_keys {
	uint64_t	*hash;		/* 0: empty slot */
	size_t		*at;		/* offset in str */
	size_t		 n;
	size_t		 cap;		/* a power of two */
	char		*str;
	size_t		 slen;
	size_t		 scap;
};

static const char *const tar_image_suffixes[] = {
	"jpg", "jpeg", "png", "ppm", "pgm", "bmp", "tif", "tiff", "webp", NULL
};

static int	tar_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	tar_read(const struct dataset *, uint64_t,
		    struct dataset_buf *, int64_t *);
static char	*tar_where(const struct dataset *, uint64_t, char *, size_t);
static char	*tar_brief(const struct dataset *, uint64_t, char *, size_t);
static int	tar_locate(const struct dataset *, uint64_t,
		    struct dataset_loc *, int64_t *);
static void	tar_close(struct dataset *);
static int	tar_fail(struct tar_iter *, const char *, ...)
		    __attribute__((__format__(__printf__, 2, 3)));

static int	tar_remote_read(const struct dataset *, uint64_t,
		    struct dataset_buf *, int64_t *);
static void	tar_remote_read_ahead(const struct dataset *,
		    const uint64_t *, uint32_t);
static void	*tar_remote_order_new(const struct dataset *,
		    const struct sampler_opts *);
static void	tar_remote_order_at(void *, uint64_t, uint64_t);
static void	tar_remote_order_free(void *);

const struct dataset_ops dataset_remote_tar_ops = {
	.type = "tar",
	.keys = (const char *const []){ "shards", "classes", "index", S3_KEYS,
	    NULL },
	.data_key = "shards",
	.open = tar_open,
	.close = tar_close,
	.read_encoded = tar_remote_read,
	.sample_where = tar_where,
	.sample_brief = tar_brief,
	.read_ahead = tar_remote_read_ahead,
	.order_new = tar_remote_order_new,
	.order_at = tar_remote_order_at,
	.order_free = tar_remote_order_free,
};

const struct dataset_ops dataset_tar_ops = {
	.type = "tar",
	.keys = (const char *const []){ "shards", "classes", NULL },
	.data_key = "shards",
	.open = tar_open,
	.close = tar_close,
	.read_encoded = tar_read,
	.locate = tar_locate,
	.sample_where = tar_where,
	.sample_brief = tar_brief,
};

/* Note what is wrong with the shard, for the caller's message. */
static int
tar_fail(struct tar_iter *it, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(it->err, sizeof it->err, fmt, ap);
	va_end(ap);
	return (-1);
}

/* A name cleaned for a message: valid UTF-8, one line, not too long. */
static const char *
tar_clean(const char *s, char *buf, size_t len)
{
	char	*c;

	buf[0] = '\0';
	if ((c = utf8_clean(s, len - 1)) != NULL) {
		snprintf(buf, len, "%s", c);
		free(c);
	}
	return (buf);
}

/* Why the last read failed: a remote read's reason, or errno's. */
static const char *
tar_read_why(const struct tar_iter *it)
{
	return (it->why[0] != '\0' ? it->why : strerror(errno));
}

/* @len bytes at @off of a remote shard, through the host's cache. */
static int
tar_remote_pread(struct tar_iter *it, uint64_t off, void *dst, size_t len)
{
	char	*why = NULL;

	if (cache_object_read(it->obj, off, len, dst, &why) == 0)
		return (0);
	snprintf(it->why, sizeof it->why, "%s", why != NULL ? why :
	    strerror(ENOMEM));
	free(why);
	errno = EIO;
	return (-1);
}

/* Read @len bytes at @off of the shard, through the read-ahead window. */
static int
tar_pread(struct tar_iter *it, uint64_t off, void *dst, size_t len)
{
	uint8_t	*p = dst;
	size_t	 got = 0;
	ssize_t	 r;
	uint64_t start;

	if (off >= it->win_off && off - it->win_off <= it->win_len &&
	    len <= it->win_len - (off - it->win_off)) {
		memcpy(dst, it->win + (off - it->win_off), len);
		return (0);
	}
	if (it->obj != NULL) {
		/* A window is a cache block, whole. */
		start = off - off % it->wsize;
		if (off + len > start + it->wsize || off > it->fsize)
			return (tar_remote_pread(it, off, dst, len));
		it->win_off = start;
		it->win_len = 0;
		if (tar_remote_pread(it, start, it->win, it->fsize - start <
		    it->wsize ? (size_t)(it->fsize - start) : it->wsize) != 0)
			return (-1);
		it->win_len = it->fsize - start < it->wsize ?
		    (size_t)(it->fsize - start) : it->wsize;
		if (off + len > start + it->win_len) {
			errno = EIO;
			return (-1);
		}
		memcpy(dst, it->win + (off - start), len);
		return (0);
	}
	if (len <= TAR_WINDOW) {
		it->win_off = off;
		it->win_len = 0;
		while (it->win_len < TAR_WINDOW) {
			r = pread(it->fd, it->win + it->win_len,
			    TAR_WINDOW - it->win_len,
			    (off_t)(off + it->win_len));
			if (r == -1 && errno == EINTR)
				continue;
			if (r == -1)
				return (-1);
			if (r == 0)
				break;
			it->win_len += (size_t)r;
		}
		if (it->win_len < len) {
			errno = EIO;
			return (-1);
		}
		memcpy(dst, it->win, len);
		return (0);
	}
	while (got < len) {
		r = pread(it->fd, p + got, len - got, (off_t)(off + got));
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return (-1);
		if (r == 0) {
			errno = EIO;
			return (-1);
		}
		got += (size_t)r;
	}
	return (0);
}

/*
 * A number field as tarfile's nti() reads it: base-256 when the first
 * byte is 0x80 (0xff: negative, refused), else octal up to the first NUL,
 * spaces around it allowed, empty meaning 0.
 */
static int
tar_number(const uint8_t *f, size_t len, uint64_t *out)
{
	uint64_t	v = 0;
	size_t		i, end;

	if (f[0] == 0x80) {
		for (i = 1; i < len; i++) {
			if (v >> 56 != 0)
				return (-1);
			v = v << 8 | f[i];
		}
		*out = v;
		return (0);
	}
	if (f[0] == 0xff)
		return (-1);
	for (end = 0; end < len && f[end] != '\0'; end++)
		;
	for (i = 0; i < end && (f[i] == ' ' || f[i] == '\t'); i++)
		;
	while (end > i && (f[end - 1] == ' ' || f[end - 1] == '\t' ||
	    f[end - 1] == '\n'))
		end--;
	for (; i < end; i++) {
		if (f[i] < '0' || f[i] > '7' || v >> 60 != 0)
			return (-1);
		v = v << 3 | (uint64_t)(f[i] - '0');
	}
	*out = v;
	return (0);
}

/* Is the header's checksum right, counted unsigned or signed? */
static bool
tar_checksum_ok(const uint8_t *h)
{
	uint64_t	want;
	unsigned	u = 0;
	int		s = 0, i;

	if (tar_number(h + 148, 8, &want) != 0)
		return (false);
	for (i = 0; i < TAR_BLOCK; i++) {
		if (i >= 148 && i < 156) {
			u += ' ';
			s += ' ';
		} else {
			u += h[i];
			s += (signed char)h[i];
		}
	}
	return (want == u || (int64_t)want == s);
}

/* Replace the malloc'd string *@dst with @len bytes of @src. */
static int
tar_setstr(char **dst, const void *src, size_t len)
{
	char	*s;

	if ((s = malloc(len + 1)) == NULL)
		return (-1);
	memcpy(s, src, len);
	s[len] = '\0';
	free(*dst);
	*dst = s;
	return (0);
}

/* What a pax header says of the next member (or all, for 'g'). */
struct tar_pax {
	char		*path;
	bool		 has_size;
	uint64_t	 size;
	bool		 sparse;
};

/*
 * Parse pax records "LEN KEY=VALUE\n" with the framing tarfile checks;
 * keep path (without trailing slashes) and size.
 */
static int
tar_pax_parse(struct tar_iter *it, const uint8_t *b, size_t len,
    uint64_t at, struct tar_pax *px)
{
	size_t		 pos = 0, reclen, i, ks, eq, end, vlen;
	uint64_t	 v;

	while (pos < len && b[pos] != '\0') {
		reclen = 0;
		for (i = pos; i < len && b[i] >= '0' && b[i] <= '9'; i++) {
			if (reclen > TAR_MAX_PAX)
				break;
			reclen = reclen * 10 + (size_t)(b[i] - '0');
		}
		if (i == pos || i >= len || b[i] != ' ' || reclen < 5 ||
		    reclen > len - pos)
			return (tar_fail(it, "a malformed pax header at byte "
			    "%" PRIu64, at));
		ks = i + 1;
		end = pos + reclen - 1;		/* the '\n' */
		for (eq = ks; eq < end && b[eq] != '='; eq++)
			;
		if (ks >= end || eq == ks || eq == end || b[end] != '\n')
			return (tar_fail(it, "a malformed pax header at byte "
			    "%" PRIu64, at));
		vlen = end - eq - 1;
		if (eq - ks == 4 && memcmp(b + ks, "path", 4) == 0) {
			while (vlen > 0 && b[eq + vlen] == '/')
				vlen--;
			if (vlen > TAR_MAX_NAME)
				return (tar_fail(it, "a pax path of more than "
				    "%d bytes at byte %" PRIu64, TAR_MAX_NAME,
				    at));
			if (tar_setstr(&px->path, b + eq + 1, vlen) != 0)
				return (tar_fail(it, "%s", strerror(ENOMEM)));
		} else if (eq - ks == 4 && memcmp(b + ks, "size", 4) == 0) {
			v = 0;
			for (i = eq + 1; i < end; i++) {
				if (b[i] < '0' || b[i] > '9' ||
				    v > (UINT64_MAX >> 4))
					return (tar_fail(it, "a pax size that "
					    "is not a number at byte %" PRIu64,
					    at));
				v = v * 10 + (uint64_t)(b[i] - '0');
			}
			if (vlen == 0)
				return (tar_fail(it, "an empty pax size at "
				    "byte %" PRIu64, at));
			px->has_size = true;
			px->size = v;
		} else if (eq - ks > 11 && memcmp(b + ks, "GNU.sparse.",
		    11) == 0)
			px->sparse = true;
		pos += reclen;
	}
	return (0);
}

/* Read an extension header's data (a pax header, an L name) at @pos. */
static int
tar_ext_data(struct tar_iter *it, uint64_t pos, uint64_t size, size_t max,
    const char *what, uint8_t **out)
{
	uint8_t	*b;

	if (size > max)
		return (tar_fail(it, "%s of %" PRIu64 " bytes at byte %"
		    PRIu64 " (at most %zu expected)", what, size, pos, max));
	if (pos + TAR_BLOCK + size > it->fsize)
		return (tar_fail(it, "%s at byte %" PRIu64 " runs past the "
		    "end of the shard; is it truncated?", what, pos));
	if ((b = malloc(size + 1)) == NULL)
		return (tar_fail(it, "%s", strerror(ENOMEM)));
	if (tar_pread(it, pos + TAR_BLOCK, b, (size_t)size) != 0) {
		free(b);
		return (tar_fail(it, "cannot read %s at byte %" PRIu64 ": %s",
		    what, pos, tar_read_why(it)));
	}
	b[size] = '\0';
	*out = b;
	return (0);
}

/* Blocks of data after a header of @size bytes. */
static uint64_t
tar_blocks(uint64_t size)
{
	return ((size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK);
}

/*
 * What the extension headers before a member said of it: as tarfile
 * applies them, the first name-giving header of the chain ('L', or 'x'
 * with a path) wins, and so does the first size.
 */
struct tar_chain {
	char		*name;		/* malloc'd; NULL until name_set */
	bool		 name_set;
	bool		 size_set;
	bool		 sparse;
	uint64_t	 size;
};

/*
 * Read the header block at @pos into @h and its size field into *@size.
 * Return: 1, or 0 at the end of the archive (its end of file, or the
 * zero block that ends it), or -1 with it->err set.
 */
static int
tar_header(struct tar_iter *it, uint64_t pos, uint8_t h[TAR_BLOCK],
    uint64_t *size)
{
	size_t	i;

	if (pos == it->fsize)
		return (0);	/* no end blocks: tarfile stops too */
	if (pos == 0 && it->fsize < TAR_BLOCK)
		return (tar_fail(it, "not a tar archive: %" PRIu64 " bytes, "
		    "less than one header", it->fsize));
	if (it->fsize - pos < TAR_BLOCK)
		return (tar_fail(it, "a header cut short at byte %" PRIu64
		    " (the shard's last %" PRIu64 " bytes); is it "
		    "truncated?", pos, it->fsize - pos));
	if (tar_pread(it, pos, h, TAR_BLOCK) != 0)
		return (tar_fail(it, "cannot read at byte %" PRIu64 ": %s",
		    pos, tar_read_why(it)));
	for (i = 0; i < TAR_BLOCK && h[i] == 0; i++)
		;
	if (i == TAR_BLOCK)
		return (0);	/* the end-of-archive block */
	if (!tar_checksum_ok(h))
		return (tar_fail(it, "%s at byte %" PRIu64, pos == 0 ? "not a "
		    "tar archive: no valid header" : "a header with a bad "
		    "checksum (corrupt, or not a tar member)", pos));
	if (tar_number(h + 124, 12, size) != 0 || *size > INT64_MAX / 2)
		return (tar_fail(it, "a header with a bad size field at byte %"
		    PRIu64, pos));
	return (1);
}

/*
 * A pax header ('x' or 'X' for the next member, 'g' for all that follow)
 * of @size bytes at @pos: into @ch, or into it->gpath and it->gsize.
 */
static int
tar_chain_pax(struct tar_iter *it, struct tar_chain *ch, char type,
    uint64_t pos, uint64_t size)
{
	struct tar_pax	 px;
	uint8_t		*b;
	int		 rc;

	memset(&px, 0, sizeof px);
	if (tar_ext_data(it, pos, size, TAR_MAX_PAX, "a pax header", &b) != 0)
		return (-1);
	rc = tar_pax_parse(it, b, (size_t)size, pos, &px);
	free(b);
	if (rc != 0) {
		free(px.path);
		return (-1);
	}
	if (type == 'g') {
		if (px.path != NULL) {
			free(it->gpath);
			it->gpath = px.path;
			px.path = NULL;
		}
		if (px.has_size) {
			it->has_gsize = true;
			it->gsize = px.size;
		}
		return (0);
	}
	if (px.path == NULL && it->gpath != NULL &&
	    tar_setstr(&px.path, it->gpath, strlen(it->gpath)) != 0)
		return (tar_fail(it, "%s", strerror(ENOMEM)));
	if (!ch->name_set && px.path != NULL) {
		free(ch->name);
		ch->name = px.path;
		px.path = NULL;
		ch->name_set = true;
	}
	if (!ch->size_set && (px.has_size || it->has_gsize)) {
		ch->size = px.has_size ? px.size : it->gsize;
		ch->size_set = true;
	}
	ch->sparse = ch->sparse || px.sparse;
	free(px.path);
	return (0);
}

/* A GNU long name ('L') or long link name ('K') of @size bytes at @pos. */
static int
tar_chain_gnu(struct tar_iter *it, struct tar_chain *ch, char type,
    uint64_t pos, uint64_t size)
{
	uint8_t	*b;
	int	 rc = 0;

	if (tar_ext_data(it, pos, size, TAR_MAX_NAME, type == 'L' ?
	    "a GNU long name" : "a GNU long link name", &b) != 0)
		return (-1);
	if (type == 'L' && !ch->name_set) {
		if (tar_setstr(&ch->name, b, strlen((char *)b)) != 0)
			rc = tar_fail(it, "%s", strerror(ENOMEM));
		else
			ch->name_set = true;
	}
	free(b);
	return (rc);
}

/*
 * The member whose header @h is at @pos: set it->name (the chain's, then
 * a 'g' path, then the ustar name and prefix), data_off, size and regular,
 * and move it->pos past its data.  Return: 1, or -1 with it->err set.
 */
static int
tar_member_at(struct tar_iter *it, struct tar_chain *ch, const uint8_t *h,
    uint64_t pos, uint64_t size)
{
	char		 ustar[256], type = (char)h[156];
	const char	*name;
	size_t		 nlen, plen;

	nlen = strnlen((const char *)h, 100);
	plen = memcmp(h + 257, "ustar\0", 6) == 0 ?
	    strnlen((const char *)h + 345, 155) : 0;
	if (plen > 0)
		snprintf(ustar, sizeof ustar, "%.*s/%.*s", (int)plen,
		    (const char *)h + 345, (int)nlen, (const char *)h);
	else
		snprintf(ustar, sizeof ustar, "%.*s", (int)nlen,
		    (const char *)h);
	if (ch->name_set) {
		free(it->name);
		it->name = ch->name;
		ch->name = NULL;
	} else {
		name = it->gpath != NULL ? it->gpath : ustar;
		if (tar_setstr(&it->name, name, strlen(name)) != 0)
			return (tar_fail(it, "%s", strerror(ENOMEM)));
	}
	if (ch->size_set)
		size = ch->size;
	else if (it->has_gsize)
		size = it->gsize;
	if (size > INT64_MAX / 2)
		return (tar_fail(it, "a member of %" PRIu64 " bytes at byte %"
		    PRIu64, size, pos));
	it->regular = (type == '0' || type == '\0' || type == '7') &&
	    !(type == '\0' && nlen > 0 && h[nlen - 1] == '/');
	if (it->regular && ch->sparse)
		return (tar_fail(it, "a sparse member at byte %" PRIu64 ", "
		    "which cannot be read by offset", pos));
	if (type == 'S')
		return (tar_fail(it, "a GNU sparse member at byte %" PRIu64
		    ", which cannot be read by offset", pos));
	it->data_off = pos + TAR_BLOCK;
	it->size = size;
	/* tarfile skips the data of regular and unknown types only. */
	if (it->regular || (type != '\0' && strchr("123456", type) == NULL)) {
		if (size > it->fsize - it->data_off)
			return (tar_fail(it, "a member of %" PRIu64 " bytes at "
			    "byte %" PRIu64 " that runs past the end of the "
			    "shard (%" PRIu64 " bytes); is it truncated?", size,
			    pos, it->fsize));
		it->pos = it->data_off + tar_blocks(size);
		if (it->pos > it->fsize)
			it->pos = it->fsize;
	} else
		it->pos = it->data_off;
	return (1);
}

/*
 * The next member: 1 with it->name, data_off, size and regular set; 0 at
 * the end of the archive; -1 with it->err set.  Extension headers before
 * a member are applied as tarfile applies them (see struct tar_chain and
 * tar_member_at()).
 */
static int
tar_next(struct tar_iter *it)
{
	uint8_t			h[TAR_BLOCK];
	struct tar_chain	ch = { NULL, false, false, false, 0 };
	uint64_t		size, pos;
	char			type;
	int			rc;

	for (;;) {
		pos = it->pos;
		if ((rc = tar_header(it, pos, h, &size)) != 1)
			break;
		type = (char)h[156];
		if (type == 'x' || type == 'X' || type == 'g')
			rc = tar_chain_pax(it, &ch, type, pos, size);
		else if (type == 'L' || type == 'K')
			rc = tar_chain_gnu(it, &ch, type, pos, size);
		else {
			rc = tar_member_at(it, &ch, h, pos, size);
			break;
		}
		if (rc != 0)
			break;
		it->pos = pos + TAR_BLOCK + tar_blocks(size);
	}
	free(ch.name);
	return (rc);
}

/* Start reading a shard's members from its first byte: @fd, or @obj. */
static int
tar_iter_init(struct tar_iter *it, int fd, struct cache_object *obj,
    uint64_t fsize)
{
	memset(it, 0, sizeof *it);
	it->fd = fd;
	it->obj = obj;
	it->fsize = fsize;
	it->wsize = obj != NULL ? TAR_REMOTE_WINDOW : TAR_WINDOW;
	if ((it->win = malloc(it->wsize)) == NULL)
		return (-1);
	return (0);
}

/* Free what a cursor holds. */
static void
tar_iter_clear(struct tar_iter *it)
{
	free(it->win);
	free(it->gpath);
	free(it->name);
	it->win = NULL;
	it->gpath = it->name = NULL;
}

/*
 * webdataset's skip_meta and meta_prefix/suffix: "__x__" at the top, or
 * a first path component "__...__".
 */
static bool
tar_is_meta(const char *name)
{
	const char	*slash = strchr(name, '/');
	size_t		 len = strlen(name), seg;

	if (strncmp(name, "__", 2) != 0)
		return (false);
	if (slash == NULL && len >= 2 && strcmp(name + len - 2, "__") == 0)
		return (true);
	seg = slash != NULL ? (size_t)(slash - name) : len;
	return (seg >= 4 && name[seg - 2] == '_' && name[seg - 1] == '_');
}

/*
 * webdataset's base_plus_ext, the regex ^((?:.*\/|)[^.]+)[.]([^/]*)$:
 * the key is the directory and the basename up to its first dot, the
 * suffix the rest.  A basename starting with a dot makes the directory
 * itself the key ("dir/.x": "dir/", "x"), if the last directory's name
 * has no dot.  Return: whether @name splits; *@keylen and *@suffix.
 */
static bool
tar_split(const char *name, size_t *keylen, const char **suffix)
{
	const char	*base, *dot, *comp;
	size_t		 dlen;

	base = strrchr(name, '/');
	base = base != NULL ? base + 1 : name;
	dlen = (size_t)(base - name);
	if ((dot = strchr(base, '.')) == NULL)
		return (false);
	if (dot > base) {
		*keylen = (size_t)(dot - name);
		*suffix = dot + 1;
		return (true);
	}
	if (dlen == 0)
		return (false);
	/* The last directory component, with its slash, must lack a dot. */
	for (comp = base - 1; comp > name && comp[-1] != '/'; comp--)
		;
	if (memchr(comp, '.', (size_t)(base - comp)) != NULL)
		return (false);
	*keylen = dlen;
	*suffix = dot + 1;
	return (true);
}

/* A string's 64-bit FNV-1a hash, never 0. */
static uint64_t
tar_hash(const char *s)
{
	uint64_t	h = 14695981039346656037ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ULL;
	return (h != 0 ? h : 1);
}

/* Add @key to @k; return 1 if it was there already, -1 without memory. */
static int
tar_keys_add(struct tar_keys *k, const char *key)
{
	uint64_t	 h = tar_hash(key), *nh;
	size_t		*na, i, j, ncap, len = strlen(key), cap;
	char		*ns;

	if (k->cap == 0 || (k->n + 1) * 2 > k->cap) {
		ncap = k->cap == 0 ? 256 : k->cap * 2;
		if ((nh = calloc(ncap, sizeof *nh)) == NULL ||
		    (na = calloc(ncap, sizeof *na)) == NULL) {
			free(nh);
			return (-1);
		}
		for (i = 0; i < k->cap; i++) {
			if (k->hash[i] == 0)
				continue;
			for (j = k->hash[i] & (ncap - 1); nh[j] != 0;
			    j = (j + 1) & (ncap - 1))
				;
			nh[j] = k->hash[i];
			na[j] = k->at[i];
		}
		free(k->hash);
		free(k->at);
		k->hash = nh;
		k->at = na;
		k->cap = ncap;
	}
	for (j = h & (k->cap - 1); k->hash[j] != 0; j = (j + 1) & (k->cap - 1)) {
		if (k->hash[j] == h && strcmp(k->str + k->at[j], key) == 0)
			return (1);
	}
	if (k->slen + len + 1 > k->scap) {
		cap = k->scap == 0 ? 65536 : k->scap;
		while (cap < k->slen + len + 1)
			cap *= 2;
		if ((ns = realloc(k->str, cap)) == NULL)
			return (-1);
		k->str = ns;
		k->scap = cap;
	}
	memcpy(k->str + k->slen, key, len + 1);
	k->hash[j] = h;
	k->at[j] = k->slen;
	k->slen += len + 1;
	k->n++;
	return (0);
}

/* Free a key set. */
static void
tar_keys_clear(struct tar_keys *k)
{
	free(k->hash);
	free(k->at);
	free(k->str);
	memset(k, 0, sizeof *k);
}

/*
 * A .cls member's bytes as Python's int() reads them: ASCII whitespace
 * around, an optional sign, decimal digits with single underscores
 * between them.  Return: 0 with *@v set, -1 when int() would refuse it,
 * -2 when the number is too large for a class.
 */
static int
tar_cls_parse(const uint8_t *b, size_t len, int64_t *v)
{
	size_t	i = 0;
	int64_t	n = 0;
	bool	neg = false, digit = false, big = false;

#define TAR_SPACE(c) ((c) == ' ' || ((c) >= '\t' && (c) <= '\r'))
	while (i < len && TAR_SPACE(b[i]))
		i++;
	while (len > i && TAR_SPACE(b[len - 1]))
		len--;
#undef TAR_SPACE
	if (i < len && (b[i] == '+' || b[i] == '-'))
		neg = b[i++] == '-';
	for (; i < len; i++) {
		if (b[i] == '_' && digit && i + 1 < len && b[i + 1] >= '0' &&
		    b[i + 1] <= '9')
			continue;
		if (b[i] < '0' || b[i] > '9')
			return (-1);
		digit = true;
		if (n > (INT64_MAX - 9) / 10)
			big = true;
		else
			n = n * 10 + (b[i] - '0');
	}
	if (!digit)
		return (-1);
	if (big)
		return (-2);
	*v = neg ? -n : n;
	return (0);
}

/* Is @suffix an image's? */
static bool
tar_is_image(const char *suffix)
{
	const char *const *s;

	for (s = tar_image_suffixes; *s != NULL; s++) {
		if (strcmp(*s, suffix) == 0)
			return (true);
	}
	return (false);
}

/* Append a sample to the index. */
static int
tar_push(struct tar *t, struct dataset *ds, uint32_t shard, uint64_t off,
    uint64_t size, uint32_t label)
{
	struct tar_sample	*s;
	uint64_t		 cap;

	if (ds->samples == t->cap) {
		cap = t->cap == 0 ? 1024 : t->cap * 2;
		if ((s = reallocarray(t->s, cap, sizeof *s)) == NULL)
			return (-1);
		t->s = s;
		t->cap = cap;
	}
	s = &t->s[ds->samples++];
	s->off = off;
	s->size = size > UINT32_MAX ? UINT32_MAX : (uint32_t)size;
	s->shard = shard;
	s->label = label;
	return (0);
}

/* Forget the group being gathered. */
static void
tar_group_clear(struct tar_group *g)
{
	free(g->key);
	free(g->first);
	free(g->image);
	memset(g, 0, sizeof *g);
}

/* The group is complete: it must have an image and a label. */
static int
tar_group_flush(struct dataset *ds, struct tar *t, uint32_t shard,
    struct tar_group *g, const char *where, char **cause)
{
	char	m[512], k[512];
	int	rc = 0;

	if (!g->active)
		return (0);
	if (g->image == NULL)
		rc = dataset_error(cause, ds, "member '%s' of shard '%s': "
		    "sample '%s' has no image (.jpg, .jpeg or .png)",
		    tar_clean(g->first, m, sizeof m), where,
		    tar_clean(g->key, k, sizeof k));
	else if (!g->has_label)
		rc = dataset_error(cause, ds, "member '%s' of shard '%s': "
		    "sample '%s' has no label (.cls)",
		    tar_clean(g->image, m, sizeof m), where,
		    tar_clean(g->key, k, sizeof k));
	else if (tar_push(t, ds, shard, g->off, g->size, g->label) != 0)
		rc = dataset_error(cause, ds, "%s", strerror(ENOMEM));
	tar_group_clear(g);
	return (rc);
}

/* Read and check a .cls member's label. */
static int
tar_group_label(struct dataset *ds, struct tar_iter *it, struct tar_group *g,
    uint32_t classes, const char *where, char **cause)
{
	uint8_t		 b[TAR_MAX_CLS];
	char		 m[512], text[64];
	int64_t		 v = 0;
	size_t		 i;
	int		 r;

	tar_clean(it->name, m, sizeof m);
	if (it->size > TAR_MAX_CLS)
		return (dataset_error(cause, ds, "member '%s' of shard '%s': "
		    "a label of %" PRIu64 " bytes; expected a class number "
		    "such as 3", m, where, it->size));
	if (tar_pread(it, it->data_off, b, (size_t)it->size) != 0)
		return (dataset_error(cause, ds, "member '%s' of shard '%s': "
		    "cannot read it: %s", m, where, tar_read_why(it)));
	r = tar_cls_parse(b, (size_t)it->size, &v);
	for (i = 0; i < it->size && i + 4 < sizeof text; i++)
		text[i] = b[i] >= 0x20 && b[i] < 0x7f ? (char)b[i] : '?';
	text[i] = '\0';
	if (i < it->size)
		snprintf(text + i, sizeof text - i, "...");
	if (r == -1)
		return (dataset_error(cause, ds, "member '%s' of shard '%s': "
		    "the label '%s' is not a whole number (as Python's int() "
		    "reads it); expected a class number such as 3", m, where,
		    text));
	if (r == -2 || v >= (int64_t)UINT32_MAX - 1)
		return (dataset_error(cause, ds, "member '%s' of shard '%s': "
		    "the label '%s' is too large for a class number", m,
		    where, text));
	if (v < 0)
		return (dataset_error(cause, ds, "member '%s' of shard '%s': "
		    "the label %" PRId64 " is negative; labels are class "
		    "numbers from 0", m, where, v));
	if (classes != 0 && v >= classes)
		return (dataset_error(cause, ds, "member '%s' of shard '%s': "
		    "the label %" PRId64 " is not below 'classes = %" PRIu32
		    "'", m, where, v, classes));
	g->has_label = true;
	g->label = (uint32_t)v;
	return (0);
}

/* Group one regular member into the sample being gathered. */
static int
tar_member(struct dataset *ds, struct tar *t, uint32_t shard,
    struct tar_iter *it, struct tar_group *g, struct tar_keys *keys,
    uint32_t classes, const char *where, char **cause)
{
	const char	*suffix;
	char		 sfx[256], m[512], k[512], o[512];
	size_t		 keylen, slen, i;
	int		 r;

	if (tar_is_meta(it->name) || !tar_split(it->name, &keylen, &suffix))
		return (0);
	slen = strlen(suffix);
	if (slen >= sizeof sfx)
		slen = sizeof sfx - 1;
	for (i = 0; i < slen; i++)
		sfx[i] = suffix[i] >= 'A' && suffix[i] <= 'Z' ?
		    (char)(suffix[i] + 'a' - 'A') : suffix[i];
	sfx[slen] = '\0';

	if (!g->active || strlen(g->key) != keylen ||
	    memcmp(g->key, it->name, keylen) != 0) {
		if (tar_group_flush(ds, t, shard, g, where, cause) != 0)
			return (-1);
		if (tar_setstr(&g->key, it->name, keylen) != 0 ||
		    tar_setstr(&g->first, it->name, strlen(it->name)) != 0 ||
		    (r = tar_keys_add(keys, g->key)) == -1)
			return (dataset_error(cause, ds, "%s",
			    strerror(ENOMEM)));
		g->active = true;
		if (r == 1)
			return (dataset_error(cause, ds, "member '%s' of shard "
			    "'%s': sample '%s' appears again after other "
			    "samples; a sample's members must follow one "
			    "another in the shard",
			    tar_clean(it->name, m, sizeof m), where,
			    tar_clean(g->key, k, sizeof k)));
	}
	for (i = 0; i < g->slen; i += strlen(g->suffixes + i) + 1) {
		if (strcmp(g->suffixes + i, sfx) == 0)
			return (dataset_error(cause, ds, "member '%s' of shard "
			    "'%s': sample '%s' has a second .%s member "
			    "(webdataset: duplicate file name in tar file)",
			    tar_clean(it->name, m, sizeof m), where,
			    tar_clean(g->key, k, sizeof k), sfx));
	}
	if (g->slen + slen + 1 > sizeof g->suffixes)
		return (dataset_error(cause, ds, "member '%s' of shard '%s': "
		    "sample '%s' has too many members",
		    tar_clean(it->name, m, sizeof m), where,
		    tar_clean(g->key, k, sizeof k)));
	memcpy(g->suffixes + g->slen, sfx, slen + 1);
	g->slen += slen + 1;

	if (tar_is_image(sfx)) {
		if (g->image != NULL)
			return (dataset_error(cause, ds, "member '%s' of shard "
			    "'%s': sample '%s' already has an image, '%s'; a "
			    "sample holds one image",
			    tar_clean(it->name, m, sizeof m), where,
			    tar_clean(g->key, k, sizeof k),
			    tar_clean(g->image, o, sizeof o)));
		if (tar_setstr(&g->image, it->name, strlen(it->name)) != 0)
			return (dataset_error(cause, ds, "%s",
			    strerror(ENOMEM)));
		g->off = it->data_off;
		g->size = it->size;
	} else if (strcmp(sfx, "cls") == 0)
		return (tar_group_label(ds, it, g, classes, where, cause));
	return (0);
}

/* Why a shard that is compressed cannot be read; NULL if it is not. */
static const char *
tar_compressed(const uint8_t *b, size_t len)
{
	if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return ("gzip");
	if (len >= 3 && memcmp(b, "BZh", 3) == 0)
		return ("bzip2");
	if (len >= 6 && memcmp(b, "\xfd" "7zXZ\0", 6) == 0)
		return ("xz");
	if (len >= 4 && memcmp(b, "\x28\xb5\x2f\xfd", 4) == 0)
		return ("zstd");
	return (NULL);
}

/*
 * Bring remote shard @obj into the host's cache before it is indexed: its
 * headers are spread through all of it, and read one window at a time
 * they would be one range request after another; TAR_REMOTE_AHEAD bytes
 * at once are that many blocks in flight together (fetch.c).  Return: 0,
 * or -1 with *@why (malloc'ed).
 */
static int
tar_remote_fill(struct cache_object *obj, char **why)
{
	uint64_t	 size = cache_object_size(obj), off;
	size_t		 len;
	uint8_t		*scratch;
	int		 rc = 0;

	*why = NULL;
	if ((scratch = malloc(TAR_REMOTE_AHEAD)) == NULL)
		return (0);	/* the index reads it window by window */
	for (off = 0; off < size && rc == 0; off += len) {
		len = size - off < TAR_REMOTE_AHEAD ? (size_t)(size - off) :
		    TAR_REMOTE_AHEAD;
		rc = cache_object_read(obj, off, len, scratch, why);
	}
	free(scratch);
	return (rc);
}

/* Index shard number @shard, open on @fd or remote as @obj, into @t. */
static int
tar_index(struct dataset *ds, struct tar *t, uint32_t shard, int fd,
    struct cache_object *obj, const char *path, char **cause)
{
	struct tar_iter	 it;
	struct tar_group g;
	struct tar_keys	 keys;
	struct stat	 st;
	const char	*z;
	char		 where[512], *why = NULL;
	uint8_t		 magic[6];
	uint32_t	 classes = ds->classes;
	int		 r, rc = -1;

	tar_clean(path, where, sizeof where);
	if (obj != NULL && tar_remote_fill(obj, &why) != 0) {
		dataset_error(cause, ds, "shard '%s': %s", where, why != NULL ?
		    why : strerror(ENOMEM));
		free(why);
		return (-1);
	}
	if (obj != NULL) {
		st.st_mode = S_IFREG;
		st.st_size = (off_t)cache_object_size(obj);
	} else if (fstat(fd, &st) == -1)
		return (dataset_error(cause, ds, "shard '%s': cannot stat: %s",
		    where, strerror(errno)));
	if (!S_ISREG(st.st_mode))
		return (dataset_error(cause, ds, "shard '%s' is not a regular "
		    "file; expected a tar file", where));
	if (st.st_size == 0)
		return (dataset_error(cause, ds, "shard '%s' is empty; "
		    "expected a tar file", where));
	if (tar_iter_init(&it, fd, obj, (uint64_t)st.st_size) != 0)
		return (dataset_error(cause, ds, "%s", strerror(ENOMEM)));
	memset(&g, 0, sizeof g);
	memset(&keys, 0, sizeof keys);
	if (tar_pread(&it, 0, magic, sizeof magic < it.fsize ?
	    sizeof magic : (size_t)it.fsize) == 0 &&
	    (z = tar_compressed(magic, sizeof magic < it.fsize ?
	    sizeof magic : (size_t)it.fsize)) != NULL) {
		dataset_error(cause, ds, "shard '%s' is %s-compressed; infeed "
		    "reads samples at random by their offset, which needs an "
		    "uncompressed tar: decompress the shards, or write them "
		    "uncompressed", where, z);
		goto out;
	}
	while ((r = tar_next(&it)) == 1) {
		if (it.regular && tar_member(ds, t, shard, &it, &g, &keys,
		    classes, where, cause) != 0)
			goto out;
	}
	if (r == -1) {
		dataset_error(cause, ds, "shard '%s': %s", where, it.err);
		goto out;
	}
	if (tar_group_flush(ds, t, shard, &g, where, cause) != 0)
		goto out;
	rc = 0;
out:
	tar_group_clear(&g);
	tar_keys_clear(&keys);
	tar_iter_clear(&it);
	return (rc);
}

/* "scheme://host/" or "s3://bucket/": @url's length up to its site's end. */
static size_t
tar_site_len(const char *url)
{
	const char	*p = strstr(url, "://"), *slash;

	if (p == NULL || (slash = strchr(p + 3, '/')) == NULL)
		return (strlen(url));
	return ((size_t)(slash - url));
}

/*
 * Set up shard @k's site, unless shard k - 1 is on the same one; each
 * shard's URL is checked as one that messages may name.
 */
static int
tar_site(struct dataset *ds, struct tar *t, uint32_t k,
    const struct dataset_conf *conf, char **cause)
{
	const char	*url = t->paths[k];
	char		*why = NULL;
	size_t		 len = tar_site_len(url);

	if (k == 0 || tar_site_len(t->paths[k - 1]) != len ||
	    strncmp(t->paths[k - 1], url, len) != 0)
		return (dataset_remote_site(ds, url, conf, cause));
	if (s3_url_shown(url, &why) == 0)
		return (0);
	dataset_error(cause, ds, "%s", why != NULL ? why : strerror(ENOMEM));
	free(why);
	return (-1);
}

/* The whole of the index file @where (a URL or a path), NUL-ended. */
static char *
tar_index_load(struct dataset *ds, const char *where, size_t *len,
    char **cause)
{
	struct fetch_object	 o;
	struct fetch_range	 r;
	struct stat		 st;
	char			*b = NULL, *why = NULL;
	FILE			*f;
	size_t			 n;

	if (s3_url(where)) {
		if (fetch_head(where, &o, &why) != 0)
			goto fail;
		if (o.size > TAR_MAX_INDEX) {
			dataset_error(cause, ds, "index = %s: %" PRIu64 " bytes; "
			    "at most %d expected (a line per shard)", where,
			    o.size, TAR_MAX_INDEX);
			return (NULL);
		}
		if ((b = malloc((size_t)o.size + 1)) == NULL)
			goto fail;
		memset(&r, 0, sizeof r);
		r.off = 0;
		r.len = (size_t)o.size;
		r.dst = b;
		if (o.size > 0 && fetch_ranges(where, o.etag, &r, 1,
		    &why) != 0) {
			free(r.cause);	/* the call's is its copy */
			goto fail;
		}
		b[o.size] = '\0';
		*len = (size_t)o.size;
		return (b);
	}
	if ((f = fopen(where, "re")) == NULL || fstat(fileno(f), &st) != 0) {
		dataset_error(cause, ds, "index = %s: %s; expected the file "
		    "of the shards' sample counts", where, strerror(errno));
		if (f != NULL)
			fclose(f);
		return (NULL);
	}
	if (st.st_size > TAR_MAX_INDEX) {
		fclose(f);
		dataset_error(cause, ds, "index = %s: %lld bytes; at most %d "
		    "expected (a line per shard)", where,
		    (long long)st.st_size, TAR_MAX_INDEX);
		return (NULL);
	}
	if ((b = malloc((size_t)st.st_size + 1)) != NULL) {
		n = fread(b, 1, (size_t)st.st_size, f);
		b[n] = '\0';
		*len = n;
	}
	fclose(f);
	if (b != NULL)
		return (b);
fail:
	free(b);
	dataset_error(cause, ds, "index = %s: %s", where, why != NULL ? why :
	    strerror(ENOMEM));
	free(why);
	return (NULL);
}

/*
 * A member line of "index =" ("+ OFFSET SIZE LABEL") at @line into *@m.
 * Return: 0, or -1 (not three numbers, or out of range).
 */
static int
tar_index_member(const char *line, uint32_t classes, struct tar_sample *m)
{
	unsigned long long	off, size, label;
	int			n = 0;

	if (sscanf(line, "+ %llu %llu %llu %n", &off, &size, &label,
	    &n) != 3 || (line[n] != '\0' && line[n] != '\r') ||
	    off < TAR_BLOCK || off % TAR_BLOCK != 0 || size == 0 ||
	    size > INFEED_MAX_IMAGE_BYTES || label >= classes)
		return (-1);
	m->off = off;
	m->size = (uint32_t)size;
	m->label = (uint32_t)label;
	return (0);
}

/*
 * Read "index =": a sample count per shard (and optionally its file
 * name), each shard's line optionally followed by a member line per
 * sample ("+ OFFSET SIZE LABEL": its image member's data, and its label),
 * which spares the workers the shard's walk: its samples are then read by
 * their pages alone.  The index's claims are checked: the counts against
 * the room, each member against the tar header before it when read.
 */
static int
tar_index_file(struct dataset *ds, struct tar *t,
    const struct dataset_conf *conf, char **cause)
{
	const char	*where = dataset_conf_get(conf, "index");
	char		*b, *line, *next, *end, *name, *base;
	struct tar_sample *mem = NULL, *nm;
	size_t		 len, nmem = 0, capmem = 0, mk = 0;
	uint64_t	 count, total = 0, i, *given = NULL;
	uint32_t	 k = 0;
	int		 rc = -1;

	if (ds->classes == 0)
		return (dataset_error(cause, ds, "with 'index =', give "
		    "'classes =' too: the labels are read as the samples are, "
		    "not at open"));
	if ((s3_url(where) && dataset_remote_site(ds, where, conf,
	    cause) != 0) || (b = tar_index_load(ds, where, &len, cause)) == NULL)
		return (-1);
	if ((t->first = calloc(t->nshards + 1, sizeof *t->first)) == NULL ||
	    (t->ready = calloc(t->nshards, 1)) == NULL ||
	    (t->parts = calloc(t->nshards, 1)) == NULL ||
	    (given = calloc(t->nshards + 1, sizeof *given)) == NULL) {
		dataset_error(cause, ds, "%s", strerror(ENOMEM));
		goto out;
	}
	for (line = b; line != NULL && *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		while (*line == ' ' || *line == '\t')
			line++;
		if (*line == '\0' || *line == '#' || *line == '\r')
			continue;
		if (*line == '+') {
			if (k == 0 || given[k - 1] == t->first[k] -
			    t->first[k - 1]) {
				dataset_error(cause, ds, "index = %s: a member "
				    "line ('%.40s') where a shard's line is "
				    "expected; each shard's line ('COUNT NAME') "
				    "is followed by none or COUNT member lines",
				    where, line);
				goto out;
			}
			if (nmem == capmem) {
				capmem = capmem ? capmem * 2 : 1024;
				if ((nm = reallocarray(mem, capmem,
				    sizeof *mem)) == NULL) {
					dataset_error(cause, ds, "%s",
					    strerror(ENOMEM));
					goto out;
				}
				mem = nm;
			}
			if (tar_index_member(line, ds->classes,
			    &mem[nmem]) != 0) {
				dataset_error(cause, ds, "index = %s: shard %"
				    PRIu32 "'s member line '%.60s' is not '+ "
				    "OFFSET SIZE LABEL' (the image member's "
				    "data offset, a multiple of 512, its size, "
				    "up to %d, and a label under classes = %"
				    PRIu32 ")", where, k - 1, line,
				    INFEED_MAX_IMAGE_BYTES, ds->classes);
				goto out;
			}
			mem[nmem++].shard = k - 1;
			given[k - 1]++;
			continue;
		}
		if (k > 0 && given[k - 1] != 0 && given[k - 1] !=
		    t->first[k] - t->first[k - 1]) {
			dataset_error(cause, ds, "index = %s: shard %" PRIu32
			    " has %" PRIu64 " member lines for a count of %"
			    PRIu64 "; give all or none", where, k - 1,
			    given[k - 1], t->first[k] - t->first[k - 1]);
			goto out;
		}
		errno = 0;
		count = strtoull(line, &end, 10);
		if (end == line || errno != 0 || count > UINT32_MAX ||
		    (*end != '\0' && *end != ' ' && *end != '\t' &&
		    *end != '\r')) {
			dataset_error(cause, ds, "index = %s: line for shard %"
			    PRIu32 " does not start with a sample count; "
			    "expected lines such as '1000 shard-000000.tar'",
			    where, k);
			goto out;
		}
		if (k == t->nshards) {
			dataset_error(cause, ds, "index = %s: more lines than "
			    "the %" PRIu32 " shards of 'shards ='", where,
			    t->nshards);
			goto out;
		}
		name = strtok(end, " \t\r");
		base = strrchr(t->paths[k], '/');
		base = base != NULL ? base + 1 : t->paths[k];
		if (name != NULL && strcmp(name, base) != 0) {
			dataset_error(cause, ds, "index = %s: line %" PRIu32
			    " is for '%s' but shard %" PRIu32 " is '%s'; the "
			    "lines follow the order of 'shards ='", where,
			    k + 1, name, k, base);
			goto out;
		}
		t->first[k++] = total;
		total += count;
		t->first[k] = total;
	}
	if (k > 0 && given[k - 1] != 0 && given[k - 1] != t->first[k] -
	    t->first[k - 1]) {
		dataset_error(cause, ds, "index = %s: shard %" PRIu32 " has %"
		    PRIu64 " member lines for a count of %" PRIu64 "; give all "
		    "or none", where, k - 1, given[k - 1], t->first[k] -
		    t->first[k - 1]);
		goto out;
	}
	if (k != t->nshards) {
		dataset_error(cause, ds, "index = %s: %" PRIu32 " lines for %"
		    PRIu32 " shards; expected one per shard", where, k,
		    t->nshards);
		goto out;
	}
	t->first[k] = total;
	if (total > UINT32_MAX) {
		dataset_error(cause, ds, "index = %s counts %" PRIu64 " samples; "
		    "expected at most %" PRIu32 " in one dataset: split the "
		    "shards into several sections", where, total, UINT32_MAX);
		goto out;
	}
	/*
	 * The member table is the daemon's memory: memory_budget's.  What
	 * the index claims is checked against the room before the table is
	 * made, not after it is touched (a count may claim 2^32 samples).
	 */
	if (total * sizeof *t->s > ds->memory_room ||
	    ds->memory + total * sizeof *t->s > ds->memory_room) {
		dataset_error(cause, ds, "index = %s counts %" PRIu64 " samples, "
		    "whose member table takes %" PRIu64 " bytes (%zu a sample) "
		    "in the daemon and again in the workers' fork server, and "
		    "memory_budget has %" PRIu64 " bytes left for each; raise "
		    "memory_budget, split the shards into several sections, or "
		    "check the index's counts", where, total, total *
		    sizeof *t->s, sizeof *t->s, ds->memory_room);
		goto out;
	}
	ds->memory += total * sizeof *t->s;
	if (total == 0 || (t->s = calloc(total, sizeof *t->s)) == NULL) {
		dataset_error(cause, ds, total == 0 ? "index = %s counts no "
		    "sample" : "index = %s: %s", where, strerror(ENOMEM));
		goto out;
	}
	for (k = 0; k < t->nshards; k++) {
		t->parts[k] = given[k] != 0;
		t->ready[k] = t->parts[k];
		for (i = t->first[k]; i < t->first[k + 1]; i++)
			t->s[i] = t->parts[k] ? mem[mk++] :
			    (struct tar_sample){ .shard = k };
	}
	ds->samples = t->cap = total;
	rc = 0;
out:
	free(given);
	free(mem);
	free(b);
	return (rc);
}

/*
 * Index remote shard @k in this process (with index =), if it was not,
 * to read sample @index: its members as a local shard's, their count
 * checked against the index.
 */
static int
tar_remote_ready(const struct dataset *ds, struct tar *t, uint32_t k,
    uint64_t index, char **cause)
{
	struct dataset	 tmp = *ds;
	struct tar	 tt;
	char		*why = NULL;
	uint64_t	 want = t->first[k + 1] - t->first[k];

	if (t->objs[k] == NULL &&
	    (t->objs[k] = cache_object_open(t->paths[k], &why)) == NULL) {
		dataset_error(cause, &tmp, "shard '%s': %s", t->paths[k],
		    why != NULL ? why : strerror(ENOMEM));
		free(why);
		return (-1);
	}
	/* Its download evicts by this sample's place in the order. */
	cache_object_reading(t->objs[k], index);
	if (t->ready[k])
		return (0);
	memset(&tt, 0, sizeof tt);
	tmp.samples = 0;
	if (tar_index(&tmp, &tt, k, -1, t->objs[k], t->paths[k],
	    cause) != 0) {
		free(tt.s);
		return (-1);
	}
	if (tmp.samples != want) {
		free(tt.s);
		return (dataset_error(cause, &tmp, "shard '%s' holds %" PRIu64
		    " samples where 'index =' says %" PRIu64 "; make the "
		    "index again from the shards", t->paths[k], tmp.samples,
		    want));
	}
	memcpy(&t->s[t->first[k]], tt.s, want * sizeof *tt.s);
	free(tt.s);
	t->ready[k] = 1;
	return (0);
}

/*
 * Add the remote shard at @url: indexed now through the cache, or, with
 * an index (t->first), by a worker that reads it (tar_remote_ready()).
 */
static int
tar_add_remote(struct dataset *ds, struct tar *t, const char *url,
    const struct dataset_conf *conf, char **cause)
{
	struct cache_object	**objs;
	char			 *why = NULL;
	uint32_t		  k = t->nshards;

	if ((objs = reallocarray(t->objs, k + 1, sizeof *objs)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(ENOMEM)));
	t->objs = objs;
	t->objs[k] = NULL;
	t->fds[k] = -1;
	if ((t->paths[k] = strdup(url)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(ENOMEM)));
	t->nshards++;
	if (!s3_url(url))
		return (dataset_error(cause, ds, "'shards =': '%s' is not a "
		    "URL, and the first shard is: give all the shards as "
		    "http://, https:// or s3:// URLs, or all as paths", url));
	if (tar_site(ds, t, k, conf, cause) != 0)
		return (-1);
	if (t->lazy)
		return (0);
	if ((t->objs[k] = cache_object_open(url, &why)) == NULL) {
		dataset_error(cause, ds, "shard '%s': %s", url, why != NULL ?
		    why : strerror(ENOMEM));
		free(why);
		return (-1);
	}
	return (tar_index(ds, t, k, -1, t->objs[k], url, cause));
}

/* Add the shard at @path (or open on @fd, when not -1) to the dataset. */
static int
tar_add_shard(struct dataset *ds, struct tar *t, const char *path, int fd,
    const struct dataset_conf *conf, char **cause)
{
	int	*fds;
	char	**paths, where[512];

	if (t->nshards == UINT32_MAX - 1) {
		if (fd != -1)
			close(fd);
		return (dataset_error(cause, ds, "too many shards"));
	}
	if (!dataset_open_tick()) {
		if (fd != -1)
			close(fd);
		return (dataset_error(cause, ds, DATASET_OPEN_STOPPED));
	}
	if ((fds = reallocarray(t->fds, t->nshards + 1, sizeof *fds)) ==
	    NULL) {
		if (fd != -1)
			close(fd);
		return (dataset_error(cause, ds, "%s", strerror(ENOMEM)));
	}
	t->fds = fds;
	if ((paths = reallocarray(t->paths, t->nshards + 1,
	    sizeof *paths)) == NULL) {
		if (fd != -1)
			close(fd);
		return (dataset_error(cause, ds, "%s", strerror(ENOMEM)));
	}
	t->paths = paths;
	if (t->remote)
		return (tar_add_remote(ds, t, path, conf, cause));
	if (fd == -1 && (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY |
	    O_NONBLOCK)) == -1)
		return (dataset_error(cause, ds, "shard '%s': cannot open: "
		    "%s%s", tar_clean(path, where, sizeof where),
		    strerror(errno), errno == EMFILE ? " (raise the open "
		    "files limit, LimitNOFILE=, for this many shards)" : ""));
	if ((t->paths[t->nshards] = strdup(path)) == NULL) {
		close(fd);
		return (dataset_error(cause, ds, "%s", strerror(ENOMEM)));
	}
	t->fds[t->nshards++] = fd;
	if (tar_index(ds, t, t->nshards - 1, fd, NULL, path, cause) == -1)
		return (-1);
	/* Indexed, so a regular file: io_uring reads it blocking, not EAGAIN. */
	(void)fcntl(fd, F_SETFL, O_RDONLY);
	return (0);
}

/* Set the class count once every shard is indexed. */
static int
tar_finish(struct dataset *ds, struct tar *t, char **cause)
{
	struct tar_sample	*s;
	uint64_t		 i;
	uint32_t		 max = 0;

	if (ds->samples == 0)
		return (dataset_error(cause, ds, "the shards hold no sample "
		    "(an image member and its .cls label); a dataset needs "
		    "at least one"));
	if (ds->classes == 0) {
		for (i = 0; i < ds->samples; i++) {
			if (t->s[i].label > max)
				max = t->s[i].label;
		}
		ds->classes = max + 1;
	}
	if ((s = reallocarray(t->s, ds->samples, sizeof *s)) != NULL) {
		t->s = s;
		t->cap = ds->samples;
	}
	return (0);
}

/* A dataset of one shard from a descriptor. */
struct dataset *
dataset_tar_open_fd(const char *name, const char *shard, int fd,
    char **cause)
{
	struct dataset	*ds;
	struct tar	*t;

	*cause = NULL;
	if ((ds = calloc(1, sizeof *ds)) == NULL ||
	    (ds->name = strdup(name)) == NULL ||
	    (t = calloc(1, sizeof *t)) == NULL) {
		if (ds != NULL)
			free(ds->name);
		free(ds);
		close(fd);
		if (asprintf(cause, "dataset '%s': %s", name,
		    strerror(ENOMEM)) == -1)
			*cause = NULL;
		return (NULL);
	}
	ds->priv = t;
	ds->ops = &dataset_tar_ops;
	ds->type = ds->ops->type;
	ds->encoded = true;
	ds->label_dtype = INFEED_DTYPE_INT64;
	if (tar_add_shard(ds, t, shard, fd, NULL, cause) != 0 ||
	    tar_finish(ds, t, cause) != 0) {
		dataset_free(ds);
		return (NULL);
	}
	return (ds);
}

/*
 * Split "shards =" into patterns at spaces and at commas outside braces,
 * and expand each.  Return: 0, or -1 with *@cause set.
 */
static int
tar_shards(struct dataset *ds, struct tar *t, const char *v,
    const struct dataset_conf *conf, char **cause)
{
	char		*tok, **names;
	const char	*p = v, *start, *err;
	size_t		 n, i, len;
	int		 depth;

	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == ',' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		start = p;
		for (depth = 0; *p != '\0'; p++) {
			if (*p == '\\' && p[1] != '\0') {
				p++;
				continue;
			}
			if (*p == '{')
				depth++;
			else if (*p == '}')
				depth--;
			else if (*p == ' ' || *p == '\t' || *p == '\n' ||
			    (*p == ',' && depth <= 0))
				break;
		}
		len = (size_t)(p - start);
		if ((tok = strndup(start, len)) == NULL)
			return (dataset_error(cause, ds, "%s",
			    strerror(ENOMEM)));
		if (braces_expand(tok, &names, &n, &err) != 0) {
			dataset_error(cause, ds, "'shards =': the pattern '%s' "
			    "%s", tok, err);
			free(tok);
			return (-1);
		}
		free(tok);
		for (i = 0; i < n; i++) {
			if (tar_add_shard(ds, t, names[i], -1, conf,
			    cause) != 0) {
				braces_free(names, n);
				return (-1);
			}
		}
		braces_free(names, n);
	}
	if (t->nshards == 0)
		return (dataset_error(cause, ds, "'shards =' names no shard; "
		    "expected paths or a pattern such as "
		    "/data/train-{000000..000146}.tar"));
	return (0);
}

/* Read the keys, then open and index every shard. */
static int
tar_open(struct dataset *ds, const struct dataset_conf *conf, char **cause)
{
	struct tar	*t;
	const char	*v;

	if ((t = calloc(1, sizeof *t)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	ds->priv = t;
	ds->encoded = true;
	ds->label_dtype = INFEED_DTYPE_INT64;
	t->remote = ds->ops == &dataset_remote_tar_ops;
	t->lazy = t->remote && dataset_conf_get(conf, "index") != NULL;
	if ((v = dataset_conf_need(ds, conf, "shards", "the tar shards: "
	    "paths or a pattern such as /data/train-{000000..000146}.tar",
	    cause)) == NULL ||
	    dataset_conf_classes(ds, conf, cause) != 0 ||
	    tar_shards(ds, t, v, conf, cause) != 0 ||
	    (t->lazy && tar_index_file(ds, t, conf, cause) != 0) ||
	    tar_finish(ds, t, cause) != 0) {
		tar_close(ds);
		return (-1);
	}
	return (0);
}

/* Read an image member with one pread on its shard's descriptor. */
static int
tar_read(const struct dataset *ds, uint64_t index, struct dataset_buf *buf,
    int64_t *label)
{
	const struct tar	*t = ds->priv;
	const struct tar_sample	*s = &t->s[index];
	size_t			 got = 0;
	ssize_t			 r;

	if (s->size > INFEED_MAX_IMAGE_BYTES) {
		errno = EFBIG;
		return (-1);
	}
	if (dataset_buf_reserve(buf, s->size) != 0)
		return (-1);
	while (got < s->size) {
		r = pread(t->fds[s->shard], buf->p + got, s->size - got,
		    (off_t)(s->off + got));
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1)
			return (-1);
		if (r == 0) {
			errno = EIO;	/* the shard was cut since */
			return (-1);
		}
		got += (size_t)r;
	}
	buf->len = got;
	*label = s->label;
	return (0);
}

/*
 * Start downloading later steps' samples @idx into the host's cache
 * (cache_object_prefetch()): a member's bytes, or all of a shard this
 * process has not indexed (with index =: its index reads all of it,
 * tar_remote_fill()), or a shard not opened here, its HEAD in the
 * prefetch thread (cache_url_prefetch()).  A shard that will not open is
 * left to the read, which says why.
 */
static void
tar_remote_read_ahead(const struct dataset *ds, const uint64_t *idx,
    uint32_t n)
{
	struct tar		*t = ds->priv;
	const struct tar_sample	*s;
	uint32_t		 i, k, call;

	if (t->ahead_call == NULL &&
	    (t->ahead_call = calloc(t->nshards, sizeof *t->ahead_call)) == NULL)
		return;
	call = ++t->ahead_calls;
	for (i = 0; i < n; i++) {
		if (idx[i] >= ds->samples)
			continue;
		s = &t->s[idx[i]];
		k = s->shard;
		/* A whole shard is asked once a call, not once a sample. */
		if ((t->objs[k] == NULL || (t->lazy && !t->ready[k])) &&
		    (t->parts == NULL || !t->parts[k]) &&
		    t->ahead_call[k] == call)
			continue;
		t->ahead_call[k] = call;
		if (t->parts != NULL && t->parts[k]) {
			/* Its member and the header before it, by pages. */
			if (t->objs[k] == NULL)
				cache_url_prefetch(t->paths[k], s->off -
				    TAR_BLOCK, s->size + TAR_BLOCK);
			else
				cache_object_prefetch_part(t->objs[k], s->off -
				    TAR_BLOCK, s->size + TAR_BLOCK);
		} else if (t->objs[k] == NULL)
			cache_url_prefetch(t->paths[k], 0, 0);	/* and HEAD */
		else if (t->lazy && !t->ready[k])
			cache_object_prefetch(t->objs[k], 0,
			    cache_object_size(t->objs[k]));
		else
			cache_object_prefetch(t->objs[k], s->off, s->size);
	}
}

/* A session's cursors on the shards of a remote tar set. */
struct tar_order {
	struct cache_cursor	**c;
	uint32_t		  n;
};

/*
 * A session's order of a remote tar set, for the host's cache to evict
 * by: a cursor on each shard, its samples first..end-1 taken to lie
 * evenly over it (cache_cursor_new_span()).  The shard's size is read by
 * the process that evicts, so a set with index =, whose shards only the
 * workers open, has its cursors too, and the daemon asks no server.
 * NULL for sets past TAR_ORDER_MAX: eviction then goes without it.
 */
static void *
tar_remote_order_new(const struct dataset *ds, const struct sampler_opts *opts)
{
	struct tar		*t = ds->priv;
	struct tar_order	*to;
	uint64_t		 key = dataset_remote_order_key(), first, end;
	uint32_t		 k;
	char			*why = NULL;

	if ((uint64_t)t->nshards * ds->samples > TAR_ORDER_MAX ||
	    (to = calloc(1, sizeof *to)) == NULL)
		return (NULL);
	if ((to->c = calloc(t->nshards, sizeof *to->c)) == NULL) {
		free(to);
		return (NULL);
	}
	for (first = 0, k = 0; k < t->nshards; k++, first = end) {
		if (t->lazy)
			end = t->first[k + 1];
		else
			for (end = first; end < ds->samples &&
			    t->s[end].shard == k; end++)
				;
		if (end == first)
			continue;
		to->c[to->n] = cache_cursor_new_span(t->paths[k], key, first,
		    end - first, opts, &why);
		free(why);
		why = NULL;
		if (to->c[to->n] != NULL)
			to->n++;
	}
	return (to);
}

/* The session reads (epoch, row) next. */
static void
tar_remote_order_at(void *arg, uint64_t epoch, uint64_t row)
{
	struct tar_order	*to = arg;
	uint32_t		 k;

	for (k = 0; k < to->n; k++)
		cache_cursor_at(to->c[k], epoch, row);
}

/* Remove the cursors. */
static void
tar_remote_order_free(void *arg)
{
	struct tar_order	*to = arg;
	uint32_t		 k;

	if (to == NULL)
		return;
	for (k = 0; k < to->n; k++)
		cache_cursor_free(to->c[k]);
	free(to->c);
	free(to);
}

/* The reason of a failed remote read, for the session (see dataset.h). */
static void
tar_remote_why(const struct dataset *ds, char *why)
{
	size_t		 len = strlen(ds->name);
	const char	*msg = why != NULL ? why : strerror(ENOMEM);

	/* The session's error names the dataset already. */
	if (strncmp(msg, "dataset '", 9) == 0 && strncmp(msg + 9, ds->name,
	    len) == 0 && strncmp(msg + 9 + len, "': ", 3) == 0)
		msg += 12 + len;
	dataset_set_why("%s", msg);
	free(why);
	errno = EIO;
}

/*
 * Read sample @s of a shard whose members the index lists: the tar header
 * before the member and its data, by their pages alone
 * (cache_object_read_part()).  The header must be a regular member's of
 * the index's size: a stale index is named, not served.
 */
static int
tar_remote_read_part(const struct dataset *ds, const struct tar_sample *s,
    struct dataset_buf *buf, int64_t *label)
{
	const struct tar	*t = ds->priv;
	uint64_t		 size;
	char			*why = NULL, where[512];

	if (dataset_buf_reserve(buf, (size_t)s->size + TAR_BLOCK) != 0)
		return (-1);
	if (cache_object_read_part(t->objs[s->shard], s->off - TAR_BLOCK,
	    (size_t)s->size + TAR_BLOCK, buf->p, &why) != 0) {
		tar_remote_why(ds, why);
		return (-1);
	}
	if (!tar_checksum_ok(buf->p) || (buf->p[156] != '0' &&
	    buf->p[156] != '\0') || tar_number(buf->p + 124, 12, &size) != 0 ||
	    size != s->size) {
		tar_clean(t->paths[s->shard], where, sizeof where);
		if (asprintf(&why, "shard '%s': no tar header of a %" PRIu32
		    "-byte member before byte %" PRIu64 ", where 'index =' "
		    "puts one: the index is not of this shard; make it again "
		    "from the shards", where, s->size, s->off) == -1)
			why = NULL;
		tar_remote_why(ds, why);
		return (-1);
	}
	memmove(buf->p, buf->p + TAR_BLOCK, s->size);
	buf->len = s->size;
	*label = s->label;
	return (0);
}

/* Read an image member of a remote shard through the host's cache. */
static int
tar_remote_read(const struct dataset *ds, uint64_t index,
    struct dataset_buf *buf, int64_t *label)
{
	struct tar		*t = ds->priv;
	const struct tar_sample	*s = &t->s[index];
	char			*why = NULL;

	if (t->lazy && tar_remote_ready(ds, t, s->shard, index, &why) != 0)
		goto fail;
	if (!t->lazy)
		cache_object_reading(t->objs[s->shard], index);
	if (s->size > INFEED_MAX_IMAGE_BYTES) {
		errno = EFBIG;
		return (-1);
	}
	if (t->parts != NULL && t->parts[s->shard])
		return (tar_remote_read_part(ds, s, buf, label));
	if (dataset_buf_reserve(buf, s->size) != 0)
		return (-1);
	if (cache_object_read(t->objs[s->shard], s->off, s->size, buf->p,
	    &why) != 0)
		goto fail;
	buf->len = s->size;
	*label = s->label;
	return (0);
fail:
	tar_remote_why(ds, why);
	return (-1);
}

/* Where a member is in its shard, and its label. */
static int
tar_locate(const struct dataset *ds, uint64_t index, struct dataset_loc *loc,
    int64_t *label)
{
	const struct tar	*t = ds->priv;
	const struct tar_sample	*s = &t->s[index];

	if (s->size > INFEED_MAX_IMAGE_BYTES) {
		errno = EFBIG;
		return (-1);
	}
	loc->fd = t->fds[s->shard];
	loc->off = s->off;
	loc->len = s->size;
	loc->mapped = NULL;
	loc->map = NULL;
	loc->owned = false;
	*label = s->label;
	return (0);
}

/* "the member at byte N of shard 'PATH'", from the index alone. */
static char *
tar_brief(const struct dataset *ds, uint64_t index, char *buf, size_t len)
{
	const struct tar	*t = ds->priv;
	const struct tar_sample	*s = &t->s[index];
	char			 where[512];

	tar_clean(t->paths[s->shard], where, sizeof where);
	if (t->lazy)
		snprintf(buf, len, "sample %" PRIu64 " of shard '%s'", index -
		    t->first[s->shard], where);
	else
		snprintf(buf, len, "the member at byte %" PRIu64 " of shard "
		    "'%s'", s->off, where);
	return (buf);
}

/*
 * "member 'NAME' of shard 'PATH'": the index keeps no names, so walk the
 * shard's headers again to the member whose data is the sample's (for
 * messages only, which are rare, and in a worker: the main process names
 * a sample with tar_brief(), reading nothing).
 */
static char *
tar_where(const struct dataset *ds, uint64_t index, char *buf, size_t len)
{
	const struct tar	*t = ds->priv;
	const struct tar_sample	*s = &t->s[index];
	struct tar_iter		 it;
	struct stat		 st;
	char			 m[512], where[512];
	int			 r = -2;

	if (t->remote && (t->objs[s->shard] == NULL ||
	    (t->lazy && !t->ready[s->shard])))
		return (tar_brief(ds, index, buf, len));
	tar_clean(t->paths[s->shard], where, sizeof where);
	if (t->remote)
		st.st_size = (off_t)cache_object_size(t->objs[s->shard]);
	if ((t->remote || fstat(t->fds[s->shard], &st) == 0) &&
	    tar_iter_init(&it, t->fds[s->shard], t->objs != NULL ?
	    t->objs[s->shard] : NULL, (uint64_t)st.st_size) == 0) {
		while ((r = tar_next(&it)) == 1 && it.data_off < s->off)
			;
		/* A member cut short still has its header: name it. */
		if (r != 0 && it.data_off == s->off && it.regular &&
		    it.name != NULL)
			snprintf(buf, len, "member '%s' of shard '%s'",
			    tar_clean(it.name, m, sizeof m), where);
		else
			r = -2;
		tar_iter_clear(&it);
	}
	if (r == -2)
		snprintf(buf, len, "the member at byte %" PRIu64 " of shard "
		    "'%s'", s->off, where);
	return (buf);
}

/* Close the shards and free the index. */
static void
tar_close(struct dataset *ds)
{
	struct tar	*t = ds->priv;
	uint32_t	 i;

	if (t == NULL)
		return;
	for (i = 0; i < t->nshards; i++) {
		if (t->fds[i] != -1)
			close(t->fds[i]);
		if (t->objs != NULL)
			cache_object_close(t->objs[i]);
		free(t->paths[i]);
	}
	free(t->objs);
	free(t->first);
	free(t->ready);
	free(t->parts);
	free(t->ahead_call);
	free(t->fds);
	free(t->paths);
	free(t->s);
	free(t);
	ds->priv = NULL;
}
