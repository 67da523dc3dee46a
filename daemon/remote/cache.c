/* SPDX-License-Identifier: MIT */
/*
 * The host's cache of remote objects: cache_dir holds, for each object
 * (named by a hash of its URL), a meta file (its size and ETag, then the
 * URL) and its blocks, one file of a fixed size each (the last shorter),
 * so bytes downloaded once serve every session and every process of the
 * host, and a restarted daemon too.
 *
 * What the files hold is checked, not trusted.  A block is written to a
 * temporary name and renamed, and it opens with a header (its object's
 * size and ETag hash, its index and length, a CRC-32 of its bytes) that a
 * process checks before it first reads the block: a file torn by a crash
 * is dropped and downloaded again.  An object whose size or ETag changed
 * on the server loses every block it had (cache_object_open()), and each
 * download asks for the ETag it knows (If-Match), so old and new bytes are
 * never mixed.
 *
 * cache_max bounds the blocks' bytes.  Before a block is kept (one process
 * of the host at a time: cache_dir/.lock), blocks are evicted until it
 * fits: first those no known order needs (the oldest
 * first), then the one needed furthest ahead in the order the sessions
 * will read (cache_object_order(); Belady's policy, the best there is for
 * a known order).  A block that cannot fit is served and not kept.
 *
 * A block missing is downloaded by one process of the host at a time (a
 * lock on its byte of the object's lock file): the others that need it
 * wait, then read it from the cache, so it is downloaded once.
 *
 * The calls block on the disk and the network: a worker process makes
 * them for the rows it reads; see fetch.c.
 */

#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "cache.h"

#define CACHE_MAGIC	"INFCBLK1"

/* What opens each block's file. */
struct cache_header {
	char		magic[8];
	uint64_t	object_size;
	uint64_t	index;
	uint64_t	len;
	uint32_t	etag_hash;
	uint32_t	crc;
};

struct cache_object {
	char		*url;
	char		*dir;		/* cache_dir/HASH */
	struct fetch_object meta;
	uint32_t	 etag_hash;
	uint64_t	 nblocks;
	uint8_t		*verified;	/* a byte a block: checked here */
	uint64_t	*order;		/* cache_object_order()'s */
	size_t		 norder;
	size_t		 pos;
	struct cache_object *next;	/* the process's open objects */
};

static struct {
	char		*dir;
	uint64_t	 max;
	size_t		 block;
	struct cache_stats stats;
	struct cache_object *objects;
} cache;

/* Set *cause to a malloc'ed message. */
static int
cache_fail(char **cause, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	if (vasprintf(cause, fmt, ap) == -1)
		*cause = NULL;
	va_end(ap);
	return (-1);
}

/* FNV-1a, 64 bits: an object's folder name. */
static uint64_t
cache_hash(const char *s)
{
	uint64_t	h = 0xcbf29ce484222325ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
	return (h);
}

/* Use @dir for at most @max bytes of @block-byte blocks. */
int
cache_configure(const char *dir, uint64_t max, size_t block, char **cause)
{
	free(cache.dir);
	cache.dir = NULL;
	if (dir == NULL)
		return (0);
	if (block == 0)
		return (cache_fail(cause, "cache block size 0"));
	if (mkdir(dir, 0750) == -1 && errno != EEXIST)
		return (cache_fail(cause, "cache_dir = %s: %s; make it, or name "
		    "a folder infeedd may write", dir, strerror(errno)));
	if ((cache.dir = strdup(dir)) == NULL)
		return (cache_fail(cause, "%s", strerror(errno)));
	cache.max = max;
	cache.block = block;
	return (0);
}

/* Remove every block file of @dir (the object changed). */
static void
cache_drop_blocks(const char *dir)
{
	struct dirent	*de;
	DIR		*d;
	char		 path[PATH_MAX];

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] != 'b')
			continue;
		if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) <
		    (int)sizeof path)
			unlink(path);
	}
	closedir(d);
}

/* Write @len bytes of @p to @path by way of a temporary name. */
static int
cache_write_file(const char *path, const void *h, size_t hlen, const void *p,
    size_t len)
{
	char	tmp[PATH_MAX];
	int	fd, saved;

	if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path,
	    (long)getpid()) >= (int)sizeof tmp) {
		errno = ENAMETOOLONG;
		return (-1);
	}
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0640)) == -1)
		return (-1);
	if ((hlen > 0 && write(fd, h, hlen) != (ssize_t)hlen) ||
	    (len > 0 && write(fd, p, len) != (ssize_t)len) ||
	    close(fd) != 0 || rename(tmp, path) != 0) {
		saved = errno != 0 ? errno : ENOSPC;
		close(fd);
		unlink(tmp);
		errno = saved;
		return (-1);
	}
	return (0);
}

/* @url's object: its blocks kept only if size and ETag are the server's. */
struct cache_object *
cache_object_open(const char *url, char **cause)
{
	struct cache_object	*o;
	char			 path[PATH_MAX], want[512], have[512];
	FILE			*f;
	size_t			 n = 0;

	*cause = NULL;
	if (cache.dir == NULL) {
		cache_fail(cause, "%s: a remote dataset needs the host's "
		    "cache: set cache_dir = (a folder) and cache_max = in "
		    "[infeedd]", url);
		return (NULL);
	}
	if ((o = calloc(1, sizeof *o)) == NULL ||
	    (o->url = strdup(url)) == NULL ||
	    asprintf(&o->dir, "%s/%016" PRIx64, cache.dir,
	    cache_hash(url)) == -1) {
		if (o != NULL)
			o->dir = NULL;
		cache_object_close(o);
		cache_fail(cause, "%s", strerror(ENOMEM));
		return (NULL);
	}
	if (fetch_head(url, &o->meta, cause) != 0) {
		cache_object_close(o);
		return (NULL);
	}
	o->etag_hash = (uint32_t)cache_hash(o->meta.etag);
	o->nblocks = (o->meta.size + cache.block - 1) / cache.block;
	if ((o->verified = calloc(o->nblocks + 1, 1)) == NULL) {
		cache_object_close(o);
		cache_fail(cause, "%s", strerror(ENOMEM));
		return (NULL);
	}

	/* The meta file says which object the blocks are of. */
	snprintf(want, sizeof want, "%" PRIu64 " %s %zu\n%s\n", o->meta.size,
	    o->meta.etag, cache.block, url);
	snprintf(path, sizeof path, "%s/meta", o->dir);
	if ((f = fopen(path, "re")) != NULL) {
		n = fread(have, 1, sizeof have - 1, f);
		fclose(f);
	}
	have[n] = '\0';
	if (strcmp(have, want) != 0) {
		if (mkdir(o->dir, 0750) == -1 && errno != EEXIST) {
			cache_fail(cause, "%s: %s", o->dir, strerror(errno));
			cache_object_close(o);
			return (NULL);
		}
		cache_drop_blocks(o->dir);
		if (cache_write_file(path, NULL, 0, want, strlen(want)) != 0) {
			cache_fail(cause, "%s: %s (cache_dir)", path,
			    strerror(errno));
			cache_object_close(o);
			return (NULL);
		}
	}
	o->next = cache.objects;
	cache.objects = o;
	return (o);
}

/* The object's size. */
uint64_t
cache_object_size(const struct cache_object *o)
{
	return (o->meta.size);
}

/* Bytes in block @i of @o. */
static size_t
cache_block_len(const struct cache_object *o, uint64_t i)
{
	uint64_t	start = i * cache.block;

	return ((size_t)(o->meta.size - start < cache.block ?
	    o->meta.size - start : cache.block));
}

/*
 * Read @len bytes at @at of block @i from its file, checking the whole
 * block first if this process has not: 0, or -1 when absent or torn
 * (then removed).
 */
static int
cache_block_load(struct cache_object *o, uint64_t i, size_t at, size_t len,
    void *dst)
{
	struct cache_header	 h;
	char			 path[PATH_MAX];
	uint8_t			*buf;
	size_t			 blen = cache_block_len(o, i);
	int			 fd, ok = 0;

	snprintf(path, sizeof path, "%s/b%" PRIu64, o->dir, i);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (-1);
	if (!o->verified[i]) {
		if ((buf = malloc(blen)) == NULL) {
			close(fd);
			return (-1);
		}
		ok = pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
		    memcmp(h.magic, CACHE_MAGIC, 8) == 0 &&
		    h.object_size == o->meta.size && h.index == i &&
		    h.len == blen && h.etag_hash == o->etag_hash &&
		    pread(fd, buf, blen, sizeof h) == (ssize_t)blen &&
		    (uint32_t)crc32(0, buf, (uInt)blen) == h.crc;
		free(buf);
		if (!ok) {
			close(fd);
			unlink(path);
			cache.stats.torn++;
			return (-1);
		}
		o->verified[i] = 1;
	}
	ok = pread(fd, dst, len, (off_t)(sizeof h + at)) == (ssize_t)len;
	close(fd);
	if (!ok) {
		o->verified[i] = 0;
		return (-1);
	}
	cache.stats.hits++;
	return (0);
}

/* Where block @i of @dir is next needed by this process's orders. */
static uint64_t
cache_next_use(const char *dir, uint64_t i)
{
	struct cache_object	*o;
	uint64_t		 best = UINT64_MAX;
	size_t			 k;

	for (o = cache.objects; o != NULL; o = o->next) {
		if (strcmp(o->dir, dir) != 0)
			continue;
		for (k = o->pos; k < o->norder && k < best; k++)
			if (o->order[k] == i) {
				best = k;
				break;
			}
	}
	return (best);
}

/* One block file as eviction sees it. */
struct cache_file {
	char		path[PATH_MAX];
	uint64_t	size;
	uint64_t	next;	/* next use; UINT64_MAX: none known */
	int64_t		mtime;
};

/* Every block file of cache_dir but @keep's block @ki, in *@out. */
static uint64_t
cache_scan(struct cache_file **out, size_t *n, const struct cache_object *keep,
    uint64_t ki)
{
	struct cache_file	*f = NULL, *nf;
	struct dirent		*de, *be;
	struct stat		 st;
	DIR			*d, *bd;
	char			 odir[PATH_MAX], skip[PATH_MAX];
	uint64_t		 total = 0, bi;
	size_t			 cap = 0;

	*n = 0;
	snprintf(skip, sizeof skip, "%s/b%" PRIu64, keep->dir, ki);
	if ((d = opendir(cache.dir)) == NULL) {
		*out = NULL;
		return (0);
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (snprintf(odir, sizeof odir, "%s/%s", cache.dir,
		    de->d_name) >= (int)sizeof odir ||
		    (bd = opendir(odir)) == NULL)
			continue;
		while ((be = readdir(bd)) != NULL) {
			if (be->d_name[0] != 'b' ||
			    strchr(be->d_name, '.') != NULL)
				continue;
			if (*n == cap) {
				cap = cap ? cap * 2 : 64;
				if ((nf = realloc(f, cap * sizeof *f)) == NULL)
					break;
				f = nf;
			}
			if (snprintf(f[*n].path, sizeof f[*n].path, "%s/%s",
			    odir, be->d_name) >= (int)sizeof f[*n].path ||
			    stat(f[*n].path, &st) != 0)
				continue;
			total += (uint64_t)st.st_size;
			if (strcmp(f[*n].path, skip) == 0)
				continue;
			bi = strtoull(be->d_name + 1, NULL, 10);
			f[*n].size = (uint64_t)st.st_size;
			f[*n].mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 +
			    st.st_mtim.tv_nsec;
			f[*n].next = cache_next_use(odir, bi);
			(*n)++;
		}
		closedir(bd);
	}
	closedir(d);
	*out = f;
	return (total);
}

/*
 * Evict until @need more bytes fit under cache_max, keeping @o's block
 * @i.  Return: 0, or -1 when they cannot fit.
 */
static int
cache_make_room(struct cache_object *o, uint64_t i, uint64_t need)
{
	struct cache_file	*f;
	size_t			 n, k, v;
	uint64_t		 total;
	int			 rc = 0;

	if (need > cache.max)
		return (-1);
	total = cache_scan(&f, &n, o, i);
	while (total + need > cache.max) {
		/* Not needed at all first (the oldest), then furthest ahead. */
		for (v = n, k = 0; k < n; k++) {
			if (f[k].size == UINT64_MAX)
				continue;
			if (v == n || f[k].next > f[v].next ||
			    (f[k].next == f[v].next && f[k].mtime < f[v].mtime))
				v = k;
		}
		if (v == n) {
			rc = -1;
			break;
		}
		if (unlink(f[v].path) == 0) {
			cache.stats.evictions++;
			total -= f[v].size;
		}
		f[v].size = UINT64_MAX;
	}
	free(f);
	return (rc);
}

static int	cache_block_write(struct cache_object *, uint64_t, const void *,
		    size_t, char **);

/* Keep block @i of @o (@p, its bytes), if it fits. */
static int
cache_block_store(struct cache_object *o, uint64_t i, const void *p,
    char **cause)
{
	char	path[PATH_MAX];
	size_t	len = cache_block_len(o, i);
	int	fd, rc;

	/*
	 * One process of the host makes room and writes at a time, so two
	 * never both count the room free and pass cache_max together.
	 */
	snprintf(path, sizeof path, "%s/.lock", cache.dir);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) == -1)
		return (cache_fail(cause, "%s: %s (cache_dir)", path,
		    strerror(errno)));
	while (flock(fd, LOCK_EX) == -1 && errno == EINTR)
		;
	rc = cache_block_write(o, i, p, len, cause);
	close(fd);
	return (rc);
}

/* cache_block_store() under the host's lock. */
static int
cache_block_write(struct cache_object *o, uint64_t i, const void *p,
    size_t len, char **cause)
{
	struct cache_header	h;
	char			path[PATH_MAX];

	if (cache_make_room(o, i, sizeof h + len) != 0)
		return (0);
	memset(&h, 0, sizeof h);
	memcpy(h.magic, CACHE_MAGIC, 8);
	h.object_size = o->meta.size;
	h.index = i;
	h.len = len;
	h.etag_hash = o->etag_hash;
	h.crc = (uint32_t)crc32(0, p, (uInt)len);
	snprintf(path, sizeof path, "%s/b%" PRIu64, o->dir, i);
	if (cache_write_file(path, &h, sizeof h, p, len) != 0)
		return (cache_fail(cause, "%s: %s; cache_dir needs room for "
		    "cache_max bytes", path, strerror(errno)));
	o->verified[i] = 1;
	return (0);
}

/*
 * Hold (F_WRLCK) or let go (F_UNLCK) of block @i's byte in @fd, @o's lock
 * file: one process of the host downloads a block while the others that
 * need it wait, then read it from the cache.  Open file description
 * locks: a process's own, never shared with a parent across fork().
 */
static int
cache_block_lock(int fd, uint64_t i, short type)
{
	struct flock	fl;

	memset(&fl, 0, sizeof fl);
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t)i;
	fl.l_len = 1;
	while (fcntl(fd, F_OFD_SETLKW, &fl) == -1) {
		if (errno != EINTR)
			return (-1);
	}
	return (0);
}

/* @len bytes at @off: cached blocks read, the others fetched together. */
int
cache_object_read(struct cache_object *o, uint64_t off, size_t len,
    void *dst, char **cause)
{
	struct fetch_range	*r = NULL;
	uint64_t		 first, last, i, bstart;
	size_t			 n = 0, k, at, l;
	char			 lpath[PATH_MAX];
	int			 rc = 0, lockfd = -1;

	*cause = NULL;
	if (len == 0)
		return (0);
	if (off > o->meta.size || len > o->meta.size - off)
		return (cache_fail(cause, "%s: bytes %" PRIu64 " to %" PRIu64
		    " are past its end (%" PRIu64 " bytes)", o->url, off,
		    off + len - 1, o->meta.size));
	first = off / cache.block;
	last = (off + len - 1) / cache.block;
	if ((r = calloc(last - first + 1, sizeof *r)) == NULL)
		return (cache_fail(cause, "%s", strerror(ENOMEM)));
	for (i = first; i <= last; i++) {
		bstart = i * cache.block;
		at = off > bstart ? (size_t)(off - bstart) : 0;
		l = (size_t)((bstart + cache_block_len(o, i) <
		    off + len ? bstart + cache_block_len(o, i) :
		    off + len) - (bstart + at));
		if (cache_block_load(o, i, at, l,
		    (uint8_t *)dst + (bstart + at - off)) == 0)
			continue;
		/* A miss: wait for whoever downloads it, then look again. */
		if (lockfd == -1 && (snprintf(lpath, sizeof lpath, "%s/lock",
		    o->dir) >= (int)sizeof lpath || (lockfd = open(lpath,
		    O_RDWR | O_CREAT | O_CLOEXEC, 0640)) == -1)) {
			rc = cache_fail(cause, "%s/lock: %s (cache_dir)",
			    o->dir, strerror(errno));
			goto out;
		}
		if (cache_block_lock(lockfd, i, F_WRLCK) != 0) {
			rc = cache_fail(cause, "%s: %s (cache_dir)", lpath,
			    strerror(errno));
			goto out;
		}
		if (cache_block_load(o, i, at, l,
		    (uint8_t *)dst + (bstart + at - off)) == 0) {
			cache_block_lock(lockfd, i, F_UNLCK);
			continue;
		}
		r[n].off = bstart;
		r[n].len = cache_block_len(o, i);
		if ((r[n].dst = malloc(r[n].len)) == NULL) {
			rc = cache_fail(cause, "%s", strerror(ENOMEM));
			goto out;
		}
		n++;
	}
	if (n > 0 && fetch_ranges(o->url, o->meta.etag, r, n, cause) != 0) {
		rc = -1;
		goto out;
	}
	for (k = 0; k < n; k++) {
		cache.stats.misses++;
		cache.stats.bytes_downloaded += r[k].len;
		i = r[k].off / cache.block;
		if (cache_block_store(o, i, r[k].dst, cause) != 0) {
			rc = -1;
			goto out;
		}
		at = off > r[k].off ? (size_t)(off - r[k].off) : 0;
		l = (size_t)((r[k].off + r[k].len < off + len ?
		    r[k].off + r[k].len : off + len) - (r[k].off + at));
		memcpy((uint8_t *)dst + (r[k].off + at - off),
		    (uint8_t *)r[k].dst + at, l);
	}
out:
	/* Closing the lock file lets go of every block's lock. */
	if (lockfd != -1)
		close(lockfd);
	for (k = 0; k < n; k++)
		free(r[k].dst);
	free(r);
	return (rc);
}

/* The blocks @o will be read in. */
int
cache_object_order(struct cache_object *o, const uint64_t *blocks, size_t n)
{
	uint64_t	*c = NULL;

	if (n > 0) {
		if ((c = malloc(n * sizeof *c)) == NULL)
			return (-1);
		memcpy(c, blocks, n * sizeof *c);
	}
	free(o->order);
	o->order = c;
	o->norder = n;
	o->pos = 0;
	return (0);
}

/* Where in its order @o's reads are. */
void
cache_object_at(struct cache_object *o, size_t pos)
{
	o->pos = pos;
}

/* Free @o and forget it. */
void
cache_object_close(struct cache_object *o)
{
	struct cache_object	**p;

	if (o == NULL)
		return;
	for (p = &cache.objects; *p != NULL; p = &(*p)->next)
		if (*p == o) {
			*p = o->next;
			break;
		}
	free(o->url);
	free(o->dir);
	free(o->verified);
	free(o->order);
	free(o);
}

/* This process's counts. */
void
cache_stats(struct cache_stats *out)
{
	*out = cache.stats;
}
