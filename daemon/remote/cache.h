/* SPDX-License-Identifier: MIT */
/*
 * The host's cache of remote objects, in fixed-size blocks: see cache.c.
 */
#ifndef INFEED_CACHE_H
#define INFEED_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fetch.h"

struct sampler_opts;

#define CACHE_BLOCK	(1024 * 1024)	/* cache_configure()'s block size */

/* One remote object as the cache sees it. */
struct cache_object;

/*
 * What the host's cache did since infeedd started (every process of the
 * host counts in cache_dir/.stats) and what it holds.
 */
struct cache_stats {
	uint64_t	hits;		/* blocks read from cache_dir */
	uint64_t	misses;		/* blocks downloaded */
	uint64_t	torn;		/* blocks found broken and dropped */
	uint64_t	bytes_downloaded;
	uint64_t	evictions;
	uint64_t	ahead;		/* of the misses: fetched ahead */
	uint64_t	waited;		/* blocks a read waited for */
	uint64_t	bytes;		/* blocks' files held, headers too */
	uint64_t	max;		/* cache_max; 0: no cache_dir */
	/* The daemon's start (random): in a block's header, written since. */
	uint64_t	life;
};

/**
 * cache_configure() - use @dir (made if missing) for at most @max bytes of
 * blocks of @block bytes each; NULL @dir: no cache (remote datasets are
 * then refused).  Return: 0, or -1 with *@cause.
 */
int	cache_configure(const char *dir, uint64_t max, size_t block,
	    char **cause);

/**
 * cache_object_open() - @url's size and ETag (a HEAD), its blocks kept
 * only when they are of that same object.  Return: the object, or NULL
 * with *@cause.
 */
struct cache_object *cache_object_open(const char *url, char **cause);

/**
 * cache_trust_meta() - with @on, cache_object_open() takes an object's
 * size and ETag from its meta file, if it has one, and asks the server
 * only for one without: for the fork server, which opens the catalogue
 * the daemon has just opened (and so checked with the server), so that
 * it indexes the same objects, and 1,000 shards cost no 1,000 HEADs
 * while no worker can be forked.
 */
void	cache_trust_meta(bool on);

/**
 * cache_heads_start() - ask the size and ETag of each of @n @urls in a
 * thread, for a reload's opens on the daemon's event loop: once the
 * returned fd is readable, cache_heads_finish(), then the opens (whose
 * cache_object_open() takes these answers and asks nothing), then
 * cache_heads_forget().  Return: the fd, or -1 (nothing to ask, or no
 * thread: the opens ask themselves).
 */
int	cache_heads_start(char *const *urls, size_t n);
void	cache_heads_finish(void);
void	cache_heads_forget(void);

/**
 * cache_object_size() - the object's size in bytes.
 */
uint64_t	cache_object_size(const struct cache_object *o);

/**
 * cache_object_read() - @len bytes at @off, from the cache's blocks, the
 * missing ones downloaded (all at once) and kept.  Return: 0, or -1 with
 * *@cause naming the URL.
 */
int	cache_object_read(struct cache_object *o, uint64_t off, size_t len,
	    void *dst, char **cause);

/**
 * cache_object_reading() - this process reads record @rec (of the
 * sessions' samplers) of @o next, for eviction to know where each worker
 * reads.  From the first call on, a read of @o no longer says so by its
 * offset (record i at base + i x stride): for objects whose records are
 * not there exactly (a tar shard's members differ in size; its headers
 * are read to index it, before any sample).
 */
void	cache_object_reading(struct cache_object *o, uint64_t rec);

/**
 * cache_object_read_part() - as cache_object_read(), but of a block the
 * host's cache lacks only the pages (CACHE_PAGE bytes each, cache.c)
 * under the bytes asked are downloaded, near ones in one range, and kept
 * in the block's file, which holds the block in parts (each page summed):
 * a later read of other bytes of it downloads only what is missing.  The
 * whole block is downloaded when what else it lacks is small
 * (CACHE_PART_REST).  For reads at random of small records in large
 * objects (a tar shard's members, with their offsets known).
 */
int	cache_object_read_part(struct cache_object *o, uint64_t off,
	    size_t len, void *dst, char **cause);

/**
 * cache_object_order() - the blocks @o will be read in, @n of them (a
 * copy is kept), and cache_object_at() where in that order the reads are
 * now: eviction drops the block needed furthest ahead, and first a block
 * no known order needs.
 */
int	cache_object_order(struct cache_object *o, const uint64_t *blocks,
	    size_t n);
void	cache_object_at(struct cache_object *o, size_t pos);

/**
 * cache_object_prefetch() - start downloading the blocks under @len bytes
 * at @off of @o that the host's cache lacks, in threads of this process
 * (a worker's, for the rows of later steps), and keep them: the call
 * waits for nothing.  A block another process is downloading is left to
 * it; a download that fails is dropped (the read that needs the block
 * fetches it again, and reports).  At most a quarter of cache_max is
 * queued or in flight, and CACHE_AHEAD_QUEUE blocks (cache.c).
 */
void	cache_object_prefetch(struct cache_object *o, uint64_t off,
	    size_t len);

/**
 * cache_object_prefetch_part() - as cache_object_prefetch(), the pages
 * as cache_object_read_part() would download them, rounded out to the
 * 128 KiB granules that hold them (fewer, larger requests).
 */
void	cache_object_prefetch_part(struct cache_object *o, uint64_t off,
	    size_t len);

/**
 * cache_url_prefetch() - as cache_object_prefetch() for all of @url (@len
 * 0), or as cache_object_prefetch_part() for @len bytes at @off, of an
 * object this process has not opened: a prefetch thread opens it (its
 * HEAD), and this process's next cache_object_open(@url) takes that
 * object rather than asking again.
 */
void	cache_url_prefetch(const char *url, uint64_t off, size_t len);

/* A session's place in its order of an object, shared with the host. */
struct cache_cursor;

/**
 * cache_cursor_new() - tell every process of the host that evicts that a
 * session reads @o in the order of a sampler of @opts, record i's bytes
 * at @base + i x @stride; a session's cursors on several objects share
 * @key (unique on the host: the daemon's pid and a count).  Its file in
 * the object's folder is made by a thread of this process, soon after
 * (no call here touches cache_dir: the daemon's event loop calls it),
 * and kept until cache_cursor_free().  Return: the cursor, or NULL with
 * *@cause (no memory, no thread).
 */
struct cache_cursor *cache_cursor_new(struct cache_object *o, uint64_t key,
	    uint64_t base, uint64_t stride, const struct sampler_opts *opts,
	    char **cause);

/**
 * cache_cursor_new_span() - as cache_cursor_new(), on the object at @url
 * whether this process opened it or not (a tar shard of a set with an
 * index, which only the workers open): records @first..@first+@count-1
 * of the sampler's, taken to lie evenly over the object (tar members
 * differ in size: a block's place in the order is near, not exact).  The
 * process that evicts takes the object's size from its folder's meta
 * file (written by the first open, before any block of it is kept), so
 * nothing asks the server for it.  Return: the cursor, or NULL (no
 * cache_dir, @count 0, or *@cause).
 */
struct cache_cursor *cache_cursor_new_span(const char *url, uint64_t key,
	    uint64_t first, uint64_t count, const struct sampler_opts *opts,
	    char **cause);

/**
 * cache_cursor_at() - the session reads row @row of epoch @epoch (in its
 * sampler's order) next: a store to a shared mapping, no system call.
 */
void	cache_cursor_at(struct cache_cursor *c, uint64_t epoch, uint64_t row);

/**
 * cache_cursor_free() - have the thread remove @c's file and free it;
 * NULL is a no-op.
 */
void	cache_cursor_free(struct cache_cursor *c);

/**
 * cache_cursors_wait() - wait until every cursor's file asked is made or
 * removed (tests; a process about to exit).
 */
void	cache_cursors_wait(void);

/**
 * cache_object_close() - free @o; NULL is a no-op.
 */
void	cache_object_close(struct cache_object *o);

/**
 * cache_stats() - the host's counts.
 */
void	cache_stats(struct cache_stats *out);

#endif
