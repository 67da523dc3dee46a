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
 * size and ETag hash, its index and length, a CRC-32C of its bytes, the
 * daemon's life it was written in) that a process checks before it first
 * reads the block: a file torn by a crash is dropped and downloaded
 * again.  Only a block written before the daemon started has its bytes
 * checked against the CRC (once a process): one written since was renamed
 * whole into place, and a crash that could tear it is a restart, which
 * starts another life (cache_dir/.stats).  So a block's bytes are summed
 * when it lands and once after a restart, not by every process that reads
 * it.  An object whose size or ETag changed
 * on the server loses every block it had (cache_object_open()), and each
 * download asks for the ETag it knows (If-Match), so old and new bytes are
 * never mixed.
 *
 * A block may be filled in parts (cache_object_read_part(): a tar
 * member's bytes, not its shard's): its file then holds a header of
 * CACHE_PART_DATA bytes (which of its CACHE_PAGE pages it holds, each
 * page's CRC-32C, the life it was last written in, and a sum of the
 * header itself) and the pages at their place in the block after it, a
 * sparse file of the block's size (it counts whole against cache_max).
 * Only the pages missing under a read are downloaded (near runs in one
 * range; a prefetch's, those of the granules of CACHE_PART_GRANULE pages,
 * 128 KiB, that hold them), or all it
 * lacks when that rest is under CACHE_PART_REST (a block with no part
 * file is then kept whole; a part file is filled in place, not written
 * again to a new file).  The file is made
 * whole (a temporary name renamed) with no page, then written in place
 * under the block's lock: each range's bytes, then the header that says
 * they are there, so a crash loses a range, never mixes one in; a header
 * torn by a crash fails its sum and the file is dropped (by a process
 * that holds the lock: another may be writing it).  Pages written in an
 * earlier life are summed before they are served (each read's pages) and
 * before the next write (all of them), and a torn one is downloaded
 * again.
 *
 * cache_max bounds the blocks' bytes.  Before a block is kept (one process
 * of the host at a time: cache_dir/.lock), blocks are evicted until it
 * fits: first those no known order needs (the oldest first), then the one
 * needed furthest ahead by any session (Belady's policy, the best there
 * is for a known order).  A block that cannot fit is served and not kept.
 * The host's count of the bytes held (cache_dir/.stats) says whether it
 * fits; only when it does not are the files scanned (which makes the
 * count exact again), so keeping a block costs no walk of cache_dir.
 * For benchmarks only, INFEED_CACHE_EVICT=lru in the environment makes
 * eviction least-recently-used instead (a hit touches the block's mtime),
 * to compare with what other loaders do (benchmarks/remote-cache).
 *
 * The orders are known from the sessions (cache_cursor_new()): each
 * session reading an object writes a cursor file in the object's folder,
 * cursor-PID-N, holding its sampler's options (the sampler is a pure
 * function of them and the epoch), how records map to bytes (base +
 * index x stride; or, a span, records first..first+count-1 evenly over
 * the object, whose size the evicting process reads in the folder's meta
 * file: a tar shard, which the daemon may never open) and, in a shared
 * mapping the daemon updates as the session goes, its (epoch, row).  The
 * process that evicts (a worker) reads every cursor of the folders it
 * scans and, once per cursor and
 * epoch, computes where in that epoch each block is read, and the first
 * read of each in the epoch after (cache_plan_epoch(): O(rows) time, 4
 * bytes a row and 8 a block, for epochs of up to CACHE_PLAN_MAX_ROWS
 * rows; a longer epoch's order is not used).  The workers read a ring
 * ahead of the cursor, so each worker also writes in the cursor file the
 * row it reads (a slot per worker, CACHE_READERS of them), found from the
 * offset it reads or, for a tar shard, the sample it names
 * (cache_object_reading()), and the row its run of rows began at (its
 * job).  A block's next use is then a binary search: none if a reader
 * reads it now, else the rows from the oldest reader's row to it, past
 * the rows each reader has read since its job began, shared by all the
 * readers (the pool cuts a step into jobs of a few rows that the workers
 * take in turn); within the session's epoch and the next (the horizon),
 * past that it is not needed.  Over sessions,
 * the soonest; rows count as the time, so sessions are taken to go at the
 * same speed.  A cursor whose process is gone is removed.  The daemon
 * makes and removes its cursors' files in a thread of its own, in the
 * order asked, so a slow cache_dir (NFS, a full disk) never holds its
 * event loop; until the file is made, eviction goes without that
 * session's order.  For the tests, INFEED_CACHE_CURSOR_DELAY_MS in the
 * environment makes the thread wait that long before each file, as a
 * slow cache_dir would.
 *
 * A block missing is downloaded by one process of the host at a time (a
 * lock on its byte of the object's lock file): the others that need it
 * wait, then read it from the cache, so it is downloaded once; a download
 * that fails after its tries fails the reads that waited on it too, with
 * its cause (cache_failure_note()), rather than each trying in turn.  A
 * process's own threads wait for one another on a mutex first
 * (cache_block_take()), so only other processes are waited for through
 * the kernel (valgrind cannot run a thread that waits in F_OFD_SETLKW).
 *
 * The blocks of the steps a session reads ahead (read_ahead) are fetched
 * before their reads (cache_object_prefetch(), cache_url_prefetch()): a
 * worker queues them, and CACHE_AHEAD_THREADS threads of its own take
 * them in order, up to CACHE_AHEAD_BATCH blocks (of any objects) in
 * flight each (fetch.c's handles are a thread's own), while the worker
 * decodes; the pages asked of one block are one entry (their bits OR'd).
 * A queue call wakes one thread, and a thread that leaves entries behind
 * wakes the next: an idle thread is not woken for nothing (a sample's
 * prefetch is a call, so a broadcast woke both threads each sample).
 * Pages of part blocks that the process wrote or read (cache_held(), a
 * bit a page) are not queued again, so a sample read ahead whose pages
 * are kept costs no thread an open, a lock and a header read.
 * A thread takes a block's lock without waiting: one another process (or
 * the worker itself) holds is left to it, so nothing is fetched twice,
 * and a read that needs a block a thread is fetching waits on its lock as
 * on any other process's.  A prefetch that fails fails the reads waiting
 * on it; a later read fetches the block itself, retries and reports.
 * What is queued or in flight is at most a quarter of cache_max (the
 * blocks fetched ahead do not evict each other before their reads) and
 * CACHE_AHEAD_QUEUE blocks;
 * the threads' buffers, CACHE_AHEAD_THREADS x CACHE_AHEAD_BATCH blocks
 * (CACHE_AHEAD_BYTES, 8 MiB): bounded a worker, not charged to
 * memory_budget, whatever the sessions ask; they are the worker's private
 * memory, which status shows and workers = auto counts.
 * Within the process, cache.lock guards the objects, the plans and the
 * keeping of a block, which the threads share.
 *
 * The calls block on the disk and the network: a worker process makes
 * them for the rows it reads; see fetch.c.  The daemon's own opens (a
 * reload's, on a thread of daemon.c's) need a HEAD each:
 * cache_heads_start() asks those of raw and npy files in a thread first,
 * and cache_object_open() takes the answers it left.  The fork server
 * opens the catalogue the daemon has just opened: it takes each object's
 * size and ETag from its meta file (cache_trust_meta()), so it asks no
 * server while no worker can be forked, and indexes the objects the
 * daemon did.
 */

#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "cache.h"
#include "clock.h"
#include "sampler.h"

#define CACHE_MAGIC	"INFCBLK2"	/* the life and CRC-32C: issue 38 */
#define CACHE_PART_MAGIC "INFCPRT1"	/* a block filled in parts */
/* A part block's pages: downloaded, held and summed one by one. */
#define CACHE_PAGE	4096
#define CACHE_PAGES	(CACHE_BLOCK / CACHE_PAGE)
#define CACHE_PART_DATA	4096		/* a part file's bytes start */
/*
 * When the pages of a block not asked for are this few bytes or fewer,
 * they come with those asked: the whole block in one request rather than
 * another request later.
 */
#define CACHE_PART_REST	(64 * 1024)
/*
 * A prefetch's pages are rounded out to the granules (of this many pages,
 * 128 KiB) that hold them: what a request costs besides its bytes (the
 * worker's CPU, and the server's) is paid once for several samples, while
 * a step still downloads a part of each block it touches.  A read that
 * waits asks its own pages only.
 */
#define CACHE_PART_GRANULE 32
_Static_assert(CACHE_PAGES % CACHE_PART_GRANULE == 0,
    "a block is whole granules");
#define CACHE_CURSOR_MAGIC "INFCCUR3"	/* a reader's start: issue 38 */
/* The longest epoch whose order a worker computes: 4 bytes a row. */
#define CACHE_PLAN_MAX_ROWS	((uint64_t)1 << 24)
#define CACHE_NONE		UINT32_MAX
#define CACHE_READERS		16	/* workers a cursor says are reading */
/* Rows a reader may skip and still be in the same job (a row read unsaid). */
#define CACHE_RUN_GAP		4
/*
 * How long a block's failed download stays the answer to reads that begin
 * after it (cache_failure_note()): about the next wait the tries' backoff
 * would have taken.
 */
#define CACHE_FAILURE_FRESH_MS	1000
/* Prefetch (cache_object_prefetch()), in each process that asks it. */
#define CACHE_AHEAD_THREADS	2	/* each with its transfers in flight */
#define CACHE_AHEAD_BATCH	4	/* blocks a thread has in flight */
#define CACHE_AHEAD_QUEUE	256	/* blocks waiting, at most */
/* What the threads' buffers hold at most (infeed.conf(5) says 8 MiB). */
#define CACHE_AHEAD_BYTES	\
	((size_t)CACHE_AHEAD_THREADS * CACHE_AHEAD_BATCH * CACHE_BLOCK)
_Static_assert(CACHE_AHEAD_BYTES <= 8 << 20,
    "the prefetch buffers' bound is documented as 8 MiB a worker");

/* A cursor file: one session's order of one object, and where it is. */
struct cache_cursor_file {
	char		magic[8];
	int64_t		pid;		/* the daemon's, to find stale ones */
	uint64_t	object_size;
	uint64_t	block;
	uint64_t	base;		/* record i at base + i x stride */
	uint64_t	stride;
	/*
	 * Not 0: records first..first+count-1 alone, taken to lie evenly
	 * over the object, whose size (object_size 0) the evicting process
	 * reads in the folder's meta file (cache_cursor_new_span()).
	 */
	uint64_t	first;
	uint64_t	count;
	uint64_t	key;		/* the same for a session's cursors */
	struct sampler_opts opts;
	uint64_t	gen;		/* odd while (epoch, row) change */
	uint64_t	epoch;
	uint64_t	row;
	/*
	 * The workers reading for the session, each at its row, having read
	 * start..row-1 in turn since it last moved to another job.
	 */
	struct {
		int64_t		pid;	/* 0: free */
		uint64_t	epoch;
		uint64_t	row;
		uint64_t	start;
	} readers[CACHE_READERS];
};

/* A session's cursor, as the daemon holds it. */
struct cache_cursor {
	struct cache_cursor_file *f;	/* shared mapping; NULL until made */
	struct cache_cursor_file init;	/* what the thread writes in it */
	char		*path;
	uint64_t	 epoch, row;	/* cache_cursor_at()'s last */
	/* cache_cursors' queue, under its lock. */
	struct cache_cursor *qnext;
	bool		 queued;
	bool		 gone;		/* cache_cursor_free() called */
};

/* A cursor as an evicting process sees it, with its epochs' orders. */
struct cache_plan {
	char		 path[PATH_MAX];
	uint64_t	 dirkey;	/* the object's folder name */
	struct cache_cursor_file *f;	/* shared mapping */
	int		 slot;		/* this process's reader, or -1 */
	bool		 seen;		/* by this scan */
	/*
	 * Records first..first+count-1 at base + (i - first) x stride of an
	 * object of size bytes: the cursor's, or (a span) from the meta
	 * file; size 0 until known.
	 */
	uint64_t	 size, base, stride, first, count;
	uint64_t	 at_epoch, at_row;
	/* Where its readers are (cache_plans_now()), and the oldest row. */
	unsigned	 nreaders;
	uint64_t	 reader_row[CACHE_READERS];
	uint64_t	 reader_start[CACHE_READERS];
	uint64_t	 oldest;
	uint64_t	 epoch;		/* of the tables below; UINT64_MAX */
	uint64_t	 rows;
	uint64_t	 nblocks;
	uint32_t	*start;		/* block b read at rows[start[b]..start[b+1]) */
	uint32_t	*at;
	uint32_t	*next_first;	/* the first read in epoch + 1, or NONE */
	uint32_t	*row_of;	/* each record's row in the epoch, or NONE */
	struct cache_plan *next;
};

/* What opens each block's file. */
struct cache_header {
	char		magic[8];
	uint64_t	object_size;
	uint64_t	index;
	uint64_t	len;
	uint32_t	etag_hash;
	uint32_t	crc;
	uint64_t	life;		/* cache_stats' when it was written */
};

/*
 * What opens a block's file when the block is filled in parts
 * (cache_object_read_part()): which CACHE_PAGE pages it holds and each
 * one's CRC-32C, itself summed; the bytes from CACHE_PART_DATA on, each
 * page at its place in the block (a sparse file of the block's size).
 */
struct cache_part {
	char		magic[8];
	uint64_t	object_size;
	uint64_t	index;
	uint64_t	len;
	uint32_t	etag_hash;
	uint32_t	sum;		/* of this header, with sum 0 */
	uint64_t	life;		/* when a page was last written */
	uint8_t		have[CACHE_PAGES / 8];
	uint32_t	crc[CACHE_PAGES];
};
_Static_assert(sizeof(struct cache_part) <= CACHE_PART_DATA,
    "a part block's header fits before its bytes");

/*
 * The pages of one block to download, under its lock (cache_fill_plan()):
 * into @buf, at their place in the block; then kept (cache_part_write(),
 * or cache_block_store() when whole).
 */
struct cache_fill {
	uint64_t	 block;
	size_t		 len;		/* the block's */
	bool		 had;		/* a part file was there */
	bool		 whole;		/* with them the block is whole */
	struct cache_part h;		/* the part file's header, checked */
	uint8_t		 want[CACHE_PAGES / 8];	/* pages to download */
	size_t		 lo;		/* the first page in @buf */
	uint8_t		*buf;		/* the block's bytes from page lo:
					   those fetched, and (had) those
					   asked and held */
	uint64_t	 fetched;	/* bytes */
};

struct cache_object {
	char		*url;
	char		*dir;		/* cache_dir/HASH */
	struct fetch_object meta;
	uint32_t	 etag_hash;
	uint64_t	 dirkey;	/* the folder's name: a hash of the URL */
	uint64_t	 nblocks;
	uint8_t		*verified;	/* a byte a block: checked here */
	uint8_t		*held;		/* CACHE_PAGES bits a block: seen */
	bool		 by_record;	/* cache_object_reading() called */
	uint64_t	*order;		/* cache_object_order()'s */
	size_t		 norder;
	size_t		 pos;
	struct cache_object *next;	/* the process's open objects */
};

static void	cache_prefetch_forget(struct cache_object *);
static struct cache_object *cache_ahead_adopt(const char *);

static struct {
	char		*dir;
	uint64_t	 max;
	size_t		 block;
	/* The host's counts: cache_dir/.stats, shared; else this one's. */
	struct cache_stats *stats;
	struct cache_stats own;
	struct cache_object *objects;
	struct cache_plan *plans;	/* the cursors last scanned */
	bool		 lru;		/* INFEED_CACHE_EVICT=lru: see above */
	bool		 trust_meta;	/* cache_trust_meta(): the fork server */
	/*
	 * The objects, the plans and the keeping of a block, shared by the
	 * process's threads (its prefetch threads: cache_object_prefetch()).
	 */
	pthread_mutex_t	 lock;

	unsigned	 cursors;	/* cache_cursor_new()'s names */
} cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* A HEAD asked ahead by cache_heads_start(), and its answer. */
struct cache_head {
	char		*url;
	int		 rc;		/* fetch_head()'s */
	struct fetch_object meta;
	char		*cause;
};

/* The HEADs of a reload, asked by a thread (cache_heads_start()). */
static struct {
	pthread_mutex_t	 lock;		/* the answers, read by the loop */
	struct cache_head *heads;
	size_t		 n;
	pthread_t	 thread;
	bool		 running;
	bool		 stop;		/* forgotten: ask no more (atomic) */
	int		 done[2];	/* a pipe: written when all are asked */
} cache_heads = { .lock = PTHREAD_MUTEX_INITIALIZER, .done = { -1, -1 } };

/*
 * The lock files this process has open, so that a child forked meanwhile
 * closes its copies (cache_lock_open()).
 */
static struct {
	pthread_mutex_t	 lock;
	int		*fd;
	size_t		 n, cap;
	bool		 atfork;	/* the handlers are registered */
} cache_lockfds = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * The blocks this process's threads hold the lock of (cache_block_take()),
 * so that its threads wait for one another here and the byte lock in the
 * object's lock file is only ever waited for by other processes.
 */
static struct {
	pthread_mutex_t	 lock;
	pthread_cond_t	 gone;		/* a block let go of */
	struct cache_held {
		uint64_t	dirkey, block;
	}		*b;
	size_t		 n, cap;
} cache_held_blocks = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.gone = PTHREAD_COND_INITIALIZER,
};

/* Before a fork: no lock file is opened or closed, no block taken. */
static void
cache_lockfds_prepare(void)
{
	pthread_mutex_lock(&cache_lockfds.lock);
	pthread_mutex_lock(&cache_held_blocks.lock);
}

static void
cache_lockfds_parent(void)
{
	pthread_mutex_unlock(&cache_held_blocks.lock);
	pthread_mutex_unlock(&cache_lockfds.lock);
}

/*
 * In the child: its copies of the parent's lock files closed, and so the
 * parent's threads' blocks not its own.
 */
static void
cache_lockfds_child(void)
{
	size_t	k;

	for (k = 0; k < cache_lockfds.n; k++)
		close(cache_lockfds.fd[k]);
	cache_lockfds.n = 0;
	cache_held_blocks.n = 0;
	pthread_mutex_unlock(&cache_held_blocks.lock);
	pthread_mutex_unlock(&cache_lockfds.lock);
}

/*
 * Open lock file @path (made if missing), for flock() or a block's byte
 * lock (F_OFD_SETLK); close it with cache_lock_close().  Both kinds of
 * lock belong to the open file description, which fork() shares with the
 * child: a child that kept its copy of a lock file another thread held
 * then would hold that block, or the host's lock, for its whole life,
 * and every process of the host needing it would wait for ever (the fork
 * server is forked from the daemon, and workers from the fork server,
 * while prefetch threads download).  So every lock file open is known
 * here and a fork's child closes its copies.  Return: the descriptor,
 * or -1 with errno.
 */
static int
cache_lock_open(const char *path)
{
	int	fd, *nfd;
	size_t	cap;

	pthread_mutex_lock(&cache_lockfds.lock);
	if (!cache_lockfds.atfork) {
		if (pthread_atfork(cache_lockfds_prepare,
		    cache_lockfds_parent, cache_lockfds_child) != 0) {
			pthread_mutex_unlock(&cache_lockfds.lock);
			errno = ENOMEM;
			return (-1);
		}
		cache_lockfds.atfork = true;
	}
	if (cache_lockfds.n == cache_lockfds.cap) {
		cap = cache_lockfds.cap ? cache_lockfds.cap * 2 : 16;
		if ((nfd = realloc(cache_lockfds.fd, cap * sizeof *nfd)) ==
		    NULL) {
			pthread_mutex_unlock(&cache_lockfds.lock);
			errno = ENOMEM;
			return (-1);
		}
		cache_lockfds.fd = nfd;
		cache_lockfds.cap = cap;
	}
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) != -1)
		cache_lockfds.fd[cache_lockfds.n++] = fd;
	pthread_mutex_unlock(&cache_lockfds.lock);
	return (fd);
}

/* Close lock file @fd (cache_lock_open()): its locks are let go of. */
static void
cache_lock_close(int fd)
{
	size_t	k;

	pthread_mutex_lock(&cache_lockfds.lock);
	for (k = 0; k < cache_lockfds.n; k++)
		if (cache_lockfds.fd[k] == fd) {
			cache_lockfds.fd[k] =
			    cache_lockfds.fd[--cache_lockfds.n];
			break;
		}
	close(fd);
	pthread_mutex_unlock(&cache_lockfds.lock);
}

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

/* @url's object folder, cache_dir/HASH (malloc'ed), and its key. */
static char *
cache_folder(const char *url, uint64_t *dirkey)
{
	char	*dir;

	*dirkey = cache_hash(url);
	if (asprintf(&dir, "%s/%016" PRIx64, cache.dir, *dirkey) == -1)
		return (NULL);
	return (dir);
}

/* Add @n to a counter every process of the host may add to at once. */
static void
cache_count(uint64_t *c, int64_t n)
{
	__atomic_fetch_add(c, (uint64_t)n, __ATOMIC_RELAXED);
}

/*
 * CRC-32C (Castagnoli) of @len bytes at @p, a block's sum: the SSE4.2
 * instruction where the CPU has it (a 1 MiB block in about 0.1 ms, a
 * tenth of zlib's crc32 here), else a table; the same sums either way.
 */
static uint32_t	cache_crc_table[256];
static pthread_once_t cache_crc_once = PTHREAD_ONCE_INIT;

static void
cache_crc_init(void)
{
	uint32_t	c;
	unsigned	i, k;

	for (i = 0; i < 256; i++) {
		for (c = i, k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78 : c >> 1;
		cache_crc_table[i] = c;
	}
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t
cache_crc_sse42(const uint8_t *p, size_t len)
{
	uint64_t	c = 0xffffffff, v;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	for (; len > 0; p++, len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p);
	return ((uint32_t)c ^ 0xffffffff);
}
#endif

static uint32_t
cache_crc(const void *buf, size_t len)
{
	const uint8_t	*p = buf;
	uint32_t	 c = 0xffffffff;

#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return (cache_crc_sse42(p, len));
#endif
	pthread_once(&cache_crc_once, cache_crc_init);
	for (; len > 0; p++, len--)
		c = cache_crc_table[(c ^ *p) & 0xff] ^ (c >> 8);
	return (c ^ 0xffffffff);
}

/* A daemon's life: a number no earlier start of it had, nor 0. */
static uint64_t
cache_life(void)
{
	struct timespec	ts;
	uint64_t	v = 0;

	if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
		clock_gettime(CLOCK_REALTIME, &ts);
		v = (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
		v ^= (uint64_t)getpid() << 32;
	}
	return (v != 0 ? v : 1);
}

/* The bytes of the block files in @dir's object folders. */
static uint64_t
cache_du(const char *dir)
{
	struct dirent	*de, *be;
	struct stat	 st;
	DIR		*d, *bd;
	char		 odir[PATH_MAX], path[PATH_MAX];
	uint64_t	 total = 0;

	if ((d = opendir(dir)) == NULL)
		return (0);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || snprintf(odir, sizeof odir,
		    "%s/%s", dir, de->d_name) >= (int)sizeof odir ||
		    (bd = opendir(odir)) == NULL)
			continue;
		while ((be = readdir(bd)) != NULL)
			if (be->d_name[0] == 'b' &&
			    strchr(be->d_name, '.') == NULL &&
			    snprintf(path, sizeof path, "%s/%s", odir,
			    be->d_name) < (int)sizeof path &&
			    stat(path, &st) == 0)
				total += (uint64_t)st.st_size;
		closedir(bd);
	}
	closedir(d);
	return (total);
}

/*
 * The host's counts, mapped from cache_dir/.stats: zero but for the bytes
 * held, which a scan counts once (start-up).  Without the file, this
 * process's own.
 */
static void
cache_stats_map(const char *dir)
{
	char	 path[PATH_MAX];
	void	*m = MAP_FAILED;
	int	 fd;

	if (cache.stats != NULL && cache.stats != &cache.own)
		munmap(cache.stats, sizeof *cache.stats);
	memset(&cache.own, 0, sizeof cache.own);
	cache.own.life = cache_life();
	cache.stats = &cache.own;
	if (snprintf(path, sizeof path, "%s/.stats", dir) >= (int)sizeof path)
		return;
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) == -1)
		return;
	if (ftruncate(fd, sizeof *cache.stats) == 0)
		m = mmap(NULL, sizeof *cache.stats, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return;
	cache.stats = m;
	memset(cache.stats, 0, sizeof *cache.stats);
	cache.stats->bytes = cache_du(dir);
	cache.stats->life = cache_life();
}

/* Use @dir for at most @max bytes of @block-byte blocks. */
int
cache_configure(const char *dir, uint64_t max, size_t block, char **cause)
{
	bool	same = cache.dir != NULL && dir != NULL &&
		    strcmp(cache.dir, dir) == 0;

	free(cache.dir);
	cache.dir = NULL;
	if (cache.stats == NULL)
		cache.stats = &cache.own;
	if (dir == NULL)
		return (0);
	/* At most CACHE_BLOCK: the prefetch buffers' bound assumes it. */
	if (block == 0 || block > CACHE_BLOCK)
		return (cache_fail(cause, "cache block size %zu; 1 to %d "
		    "bytes expected", block, CACHE_BLOCK));
	if (mkdir(dir, 0750) == -1 && errno != EEXIST)
		return (cache_fail(cause, "cache_dir = %s: %s; make it, or name "
		    "a folder infeedd may write", dir, strerror(errno)));
	if ((cache.dir = strdup(dir)) == NULL)
		return (cache_fail(cause, "%s", strerror(errno)));
	/* A reload's same cache_dir keeps its counts and scans nothing. */
	if (!same)
		cache_stats_map(dir);
	cache.max = max;
	cache.block = block;
	cache.lru = getenv("INFEED_CACHE_EVICT") != NULL &&
	    strcmp(getenv("INFEED_CACHE_EVICT"), "lru") == 0;
	return (0);
}

/* Remove every block file of @dir (the object changed). */
static void
cache_drop_blocks(const char *dir)
{
	struct dirent	*de;
	struct stat	 st;
	DIR		*d;
	char		 path[PATH_MAX];

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] != 'b')
			continue;
		if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) <
		    (int)sizeof path && stat(path, &st) == 0 &&
		    unlink(path) == 0 && strchr(de->d_name, '.') == NULL)
			cache_count(&cache.stats->bytes, -(int64_t)st.st_size);
	}
	closedir(d);
}

/* Write @h and @p to @path by way of a temporary name. */
static int
cache_write_file(const char *path, const void *h, size_t hlen, const void *p,
    size_t len)
{
	char	tmp[PATH_MAX];
	int	fd, saved;

	/* The thread's id too: a worker's prefetch threads write as well. */
	if (snprintf(tmp, sizeof tmp, "%s.%ld.%ld.tmp", path,
	    (long)getpid(), (long)gettid()) >= (int)sizeof tmp) {
		errno = ENAMETOOLONG;
		return (-1);
	}
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0640)) == -1)
		return (-1);
	errno = 0;	/* a short write sets none: ENOSPC below */
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

/* A HEAD's answer: one cache_heads_start() asked, else asked now. */
static int
cache_head_answer(const char *url, struct fetch_object *meta, char **cause)
{
	size_t	i;
	int	rc = 1;

	pthread_mutex_lock(&cache_heads.lock);
	for (i = 0; !cache_heads.running && i < cache_heads.n; i++)
		if (strcmp(cache_heads.heads[i].url, url) == 0) {
			rc = cache_heads.heads[i].rc;
			*meta = cache_heads.heads[i].meta;
			if (rc != 0 && (*cause = strdup(
			    cache_heads.heads[i].cause != NULL ?
			    cache_heads.heads[i].cause : url)) == NULL)
				rc = cache_fail(cause, "%s", strerror(ENOMEM));
			break;
		}
	pthread_mutex_unlock(&cache_heads.lock);
	if (rc == 1)
		rc = fetch_head(url, meta, cause);
	return (rc);
}

/* Whether @a and @b are on one server: scheme://host:port/ alike. */
static bool
cache_same_server(const char *a, const char *b)
{
	const char	*p = strstr(a, "://"), *end;

	if (p == NULL || (end = strchr(p + 3, '/')) == NULL)
		return (false);
	return (strncmp(a, b, (size_t)(end - a + 1)) == 0);
}

/*
 * The thread of cache_heads_start(): each HEAD (a server that failed one
 * is not asked again: its other URLs get that failure), then a byte on
 * the pipe.
 */
static void *
cache_heads_main(void *arg)
{
	struct cache_head	*h;
	size_t			 i, j;

	(void)arg;
	for (i = 0; i < cache_heads.n; i++) {
		h = &cache_heads.heads[i];
		if (__atomic_load_n(&cache_heads.stop, __ATOMIC_RELAXED)) {
			h->rc = -1;	/* forgotten (infeedd stops) */
			continue;
		}
		for (j = 0; j < i; j++)
			if (cache_heads.heads[j].rc != 0 &&
			    cache_same_server(cache_heads.heads[j].url,
			    h->url))
				break;
		if (j < i) {
			h->rc = -1;
			if (asprintf(&h->cause, "%s: not asked, as its server "
			    "failed: %s", h->url,
			    cache_heads.heads[j].cause != NULL ?
			    cache_heads.heads[j].cause : "?") == -1)
				h->cause = NULL;
			continue;
		}
		h->rc = fetch_head(h->url, &h->meta, &h->cause);
	}
	fetch_thread_end();
	(void)!write(cache_heads.done[1], "", 1);
	return (NULL);
}

/* Ask @n URLs' HEADs in a thread; the fd to wait on, or -1. */
int
cache_heads_start(char *const *urls, size_t n)
{
	size_t	i;

	cache_heads_forget();
	if (n == 0 || pipe2(cache_heads.done, O_CLOEXEC | O_NONBLOCK) == -1)
		return (-1);
	if ((cache_heads.heads = calloc(n, sizeof *cache_heads.heads)) ==
	    NULL)
		goto fail;
	for (cache_heads.n = 0; cache_heads.n < n; cache_heads.n++)
		if ((cache_heads.heads[cache_heads.n].url = strdup(
		    urls[cache_heads.n])) == NULL)
			goto fail;
	cache_heads.running = true;
	__atomic_store_n(&cache_heads.stop, false, __ATOMIC_RELAXED);
	if (pthread_create(&cache_heads.thread, NULL, cache_heads_main,
	    NULL) != 0) {
		cache_heads.running = false;
		goto fail;
	}
	return (cache_heads.done[0]);

fail:
	for (i = 0; i < cache_heads.n; i++)
		free(cache_heads.heads[i].url);
	free(cache_heads.heads);
	cache_heads.heads = NULL;
	cache_heads.n = 0;
	close(cache_heads.done[0]);
	close(cache_heads.done[1]);
	cache_heads.done[0] = cache_heads.done[1] = -1;
	return (-1);
}

/* The thread is done (its fd readable): join it, keep its answers. */
void
cache_heads_finish(void)
{
	if (!cache_heads.running)
		return;
	pthread_join(cache_heads.thread, NULL);
	pthread_mutex_lock(&cache_heads.lock);
	cache_heads.running = false;
	pthread_mutex_unlock(&cache_heads.lock);
	close(cache_heads.done[0]);
	close(cache_heads.done[1]);
	cache_heads.done[0] = cache_heads.done[1] = -1;
}

/* Drop the answers (the reload's opens are done). */
void
cache_heads_forget(void)
{
	size_t	i;

	/* The HEAD under way ends; the others are not asked. */
	struct cache_head	*heads;
	size_t			 n;

	__atomic_store_n(&cache_heads.stop, true, __ATOMIC_RELAXED);
	cache_heads_finish();
	/* Under the lock: a reload's thread may be reading the answers. */
	pthread_mutex_lock(&cache_heads.lock);
	heads = cache_heads.heads;
	n = cache_heads.n;
	cache_heads.heads = NULL;
	cache_heads.n = 0;
	pthread_mutex_unlock(&cache_heads.lock);
	for (i = 0; i < n; i++) {
		free(heads[i].url);
		free(heads[i].cause);
	}
	free(heads);
}

/* Whether to take the meta files' objects as they are (see cache.h). */
void
cache_trust_meta(bool on)
{
	cache.trust_meta = on;
}

/*
 * @url's size and ETag from the meta file at @path, when it is @url's
 * (block size and URL alike; NULL @url: any URL).  Return: whether it was.
 */
static bool
cache_meta_read(const char *path, const char *url, struct fetch_object *meta)
{
	char		 have[512], etag[sizeof meta->etag], *nl;
	unsigned long long size;
	size_t		 n, block, ulen = url != NULL ? strlen(url) : 0;
	FILE		*f;

	if ((f = fopen(path, "re")) == NULL)
		return (false);
	n = fread(have, 1, sizeof have - 1, f);
	fclose(f);
	have[n] = '\0';
	if ((nl = strchr(have, '\n')) == NULL || (url != NULL &&
	    (strncmp(nl + 1, url, ulen) != 0 ||
	    strcmp(nl + 1 + ulen, "\n") != 0)))
		return (false);
	*nl = '\0';
	/* "SIZE ETAG BLOCK", the ETag as the server gave it (no spaces) or "". */
	if (sscanf(have, "%llu %127s %zu", &size, etag, &block) == 3)
		snprintf(meta->etag, sizeof meta->etag, "%s", etag);
	else if (sscanf(have, "%llu  %zu", &size, &block) == 2)
		meta->etag[0] = '\0';
	else
		return (false);
	meta->size = size;
	return (block == cache.block);
}

/* @url's object: its blocks kept only if size and ETag are the server's. */
static struct cache_object *
cache_object_make(const char *url, char **cause)
{
	struct cache_object	*o;
	char			 path[PATH_MAX], want[512], have[512];
	FILE			*f;
	size_t			 n = 0;
	int			 lockfd;

	*cause = NULL;
	if (cache.dir == NULL) {
		cache_fail(cause, "%s: a remote dataset needs the host's "
		    "cache: set cache_dir = (a folder) and cache_max = in "
		    "[infeedd]", url);
		return (NULL);
	}
	if ((o = calloc(1, sizeof *o)) == NULL ||
	    (o->url = strdup(url)) == NULL ||
	    (o->dir = cache_folder(url, &o->dirkey)) == NULL) {
		cache_object_close(o);
		cache_fail(cause, "%s", strerror(ENOMEM));
		return (NULL);
	}
	snprintf(path, sizeof path, "%s/meta", o->dir);
	if ((!cache.trust_meta || !cache_meta_read(path, url, &o->meta)) &&
	    cache_head_answer(url, &o->meta, cause) != 0) {
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

	/*
	 * The meta file says which object the blocks are of.  It is read,
	 * and written anew with the blocks dropped if it differs, by one
	 * process or thread of the host at a time (flock on the folder's
	 * lock file, apart from the blocks' byte locks): two first opens at
	 * once would otherwise both find none, and the second would drop a
	 * block the first had downloaded since (downloaded twice).
	 */
	snprintf(want, sizeof want, "%" PRIu64 " %s %zu\n%s\n", o->meta.size,
	    o->meta.etag, cache.block, url);
	snprintf(path, sizeof path, "%s/lock", o->dir);
	if ((mkdir(o->dir, 0750) == -1 && errno != EEXIST) ||
	    (lockfd = cache_lock_open(path)) == -1) {
		cache_fail(cause, "%s: %s (cache_dir)", o->dir,
		    strerror(errno));
		cache_object_close(o);
		return (NULL);
	}
	while (flock(lockfd, LOCK_EX) == -1 && errno == EINTR)
		;
	snprintf(path, sizeof path, "%s/meta", o->dir);
	if ((f = fopen(path, "re")) != NULL) {
		n = fread(have, 1, sizeof have - 1, f);
		fclose(f);
	}
	have[n] = '\0';
	if (strcmp(have, want) != 0) {
		cache_drop_blocks(o->dir);
		if (cache_write_file(path, NULL, 0, want, strlen(want)) != 0) {
			cache_fail(cause, "%s: %s (cache_dir)", path,
			    strerror(errno));
			cache_lock_close(lockfd);
			cache_object_close(o);
			return (NULL);
		}
	}
	cache_lock_close(lockfd);
	pthread_mutex_lock(&cache.lock);
	o->next = cache.objects;
	cache.objects = o;
	pthread_mutex_unlock(&cache.lock);
	return (o);
}

/*
 * @url's object: one a prefetch thread opened for it (cache_url_prefetch()),
 * or else cache_object_make()'s.
 */
struct cache_object *
cache_object_open(const char *url, char **cause)
{
	struct cache_object	*o;

	*cause = NULL;
	if ((o = cache_ahead_adopt(url)) != NULL)
		return (o);
	return (cache_object_make(url, cause));
}

/* The object's size. */
uint64_t
cache_object_size(const struct cache_object *o)
{
	return (o->meta.size);
}

/*
 * The block file this process read last, kept open: a tar shard's
 * headers and its members are read a piece at a time, and an open and a
 * close for each piece cost more than the read.  One a process, so an
 * evicted block whose file it holds keeps at most one block's bytes on
 * the disk past cache_max, until the next read of another block.
 */
static struct {
	pthread_mutex_t		 lock;
	const struct cache_object *o;
	uint64_t		 block;
	int			 fd;
} cache_fd = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* Block @i's file (@path) of @o: the one kept open, or opened now. */
static int
cache_fd_take(const struct cache_object *o, uint64_t i, const char *path)
{
	int	fd = -1;

	pthread_mutex_lock(&cache_fd.lock);
	if (cache_fd.o == o && cache_fd.block == i) {
		fd = cache_fd.fd;
		cache_fd.fd = -1;
		cache_fd.o = NULL;
	}
	pthread_mutex_unlock(&cache_fd.lock);
	return (fd != -1 ? fd : open(path, O_RDONLY | O_CLOEXEC));
}

/* Keep @fd, block @i's of @o, open for the next read (or @o's closing). */
static void
cache_fd_keep(const struct cache_object *o, uint64_t i, int fd)
{
	int	old;

	pthread_mutex_lock(&cache_fd.lock);
	old = cache_fd.fd;
	cache_fd.o = o;
	cache_fd.block = i;
	cache_fd.fd = fd;
	pthread_mutex_unlock(&cache_fd.lock);
	if (old != -1)
		close(old);
}

/* Close the file kept open if it is @o's. */
static void
cache_fd_forget(const struct cache_object *o)
{
	int	fd = -1;

	pthread_mutex_lock(&cache_fd.lock);
	if (cache_fd.o == o) {
		fd = cache_fd.fd;
		cache_fd.fd = -1;
		cache_fd.o = NULL;
	}
	pthread_mutex_unlock(&cache_fd.lock);
	if (fd != -1)
		close(fd);
}

/* Bytes in block @i of @o. */
static size_t
cache_block_len(const struct cache_object *o, uint64_t i)
{
	uint64_t	start = i * cache.block;

	return ((size_t)(o->meta.size - start < cache.block ?
	    o->meta.size - start : cache.block));
}

/* Whether page @k is in @h. */
static bool
cache_part_has(const struct cache_part *h, size_t k)
{
	return ((h->have[k / 8] >> (k % 8)) & 1);
}

/* The sum of part header @h. */
static uint32_t
cache_part_sum(const struct cache_part *h)
{
	struct cache_part	c = *h;

	c.sum = 0;
	return (cache_crc(&c, sizeof c));
}

/* Whether @h is a whole part header of block @i of @o. */
static bool
cache_part_ok(const struct cache_object *o, uint64_t i,
    const struct cache_part *h)
{
	return (memcmp(h->magic, CACHE_PART_MAGIC, 8) == 0 &&
	    h->object_size == o->meta.size && h->index == i &&
	    h->len == cache_block_len(o, i) && h->etag_hash == o->etag_hash &&
	    h->sum == cache_part_sum(h));
}

/* Bytes in page @k of a block of @blen bytes. */
static size_t
cache_page_len(size_t blen, size_t k)
{
	return (blen - k * CACHE_PAGE < CACHE_PAGE ? blen - k * CACHE_PAGE :
	    CACHE_PAGE);
}

/*
 * The pages of part block @i that this process has seen in its file
 * (written or read whole), made when first needed: a bit a page, or NULL
 * without memory.  What it says may be out of date (another process may
 * have evicted the block); it only spares a prefetch of pages held, and
 * a read that finds them gone downloads them itself.
 */
static uint8_t *
cache_held(struct cache_object *o, uint64_t i)
{
	uint8_t	*h = __atomic_load_n(&o->held, __ATOMIC_ACQUIRE), *n;

	if (h == NULL) {
		if ((n = calloc(o->nblocks + 1, CACHE_PAGES / 8)) == NULL)
			return (NULL);
		if (__atomic_compare_exchange_n(&o->held, &h, n, false,
		    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			h = n;
		else
			free(n);
	}
	return (h + i * (CACHE_PAGES / 8));
}

/* Mark pages @p0..@p1 of part block @i seen (@on), or all unseen. */
static void
cache_held_mark(struct cache_object *o, uint64_t i, size_t p0, size_t p1,
    bool on)
{
	uint8_t	*h = cache_held(o, i);
	size_t	 k;

	for (k = on ? p0 : 0; h != NULL && k <= (on ? p1 : CACHE_PAGES - 1);
	    k++)
		if (on)
			__atomic_fetch_or(&h[k / 8], (uint8_t)(1u << (k % 8)),
			    __ATOMIC_RELAXED);
		else
			__atomic_store_n(&h[k / 8], 0, __ATOMIC_RELAXED);
}

/* Whether pages @p0..@p1 of part block @i are all seen. */
static bool
cache_held_all(struct cache_object *o, uint64_t i, size_t p0, size_t p1)
{
	uint8_t	*h = __atomic_load_n(&o->held, __ATOMIC_ACQUIRE);
	size_t	 k;

	if (h == NULL)
		return (false);
	h += i * (CACHE_PAGES / 8);
	for (k = p0; k <= p1; k++)
		if (!((__atomic_load_n(&h[k / 8], __ATOMIC_RELAXED) >>
		    (k % 8)) & 1))
			return (false);
	return (true);
}

/*
 * Pages @p0..@p1 of part file @fd (header @h) into @buf (page p0 first),
 * each checked against its CRC when written in an earlier life.  Return:
 * 0, or -1 (one is not held, torn, or unread).
 */
static int
cache_part_pages(int fd, const struct cache_part *h, size_t p0, size_t p1,
    uint8_t *buf)
{
	size_t	k, end = p1 * CACHE_PAGE + cache_page_len(h->len, p1);

	for (k = p0; k <= p1; k++)
		if (!cache_part_has(h, k))
			return (-1);
	if (pread(fd, buf, end - p0 * CACHE_PAGE, (off_t)(CACHE_PART_DATA +
	    p0 * CACHE_PAGE)) != (ssize_t)(end - p0 * CACHE_PAGE))
		return (-1);
	if (h->life == cache.stats->life)
		return (0);
	for (k = p0; k <= p1; k++)
		if (cache_crc(buf + (k - p0) * CACHE_PAGE,
		    cache_page_len(h->len, k)) != h->crc[k])
			return (-1);
	return (0);
}

/*
 * Read @len bytes at @at of part block @i (@fd, its file at @path): 0, or
 * -1 when the pages are not all there, or not whole.  A header that does
 * not check is dropped only by a process that holds the block's lock
 * (@locked): another may be writing it.
 */
static int
cache_part_load(struct cache_object *o, uint64_t i, int fd, const char *path,
    size_t at, size_t len, void *dst, bool locked)
{
	struct cache_part	 h;
	struct stat		 st;
	uint8_t			*buf;
	size_t			 p0 = at / CACHE_PAGE;
	size_t			 p1 = (at + len - 1) / CACHE_PAGE;
	int			 ok;

	if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
	    !cache_part_ok(o, i, &h)) {
		if (locked && fstat(fd, &st) == 0 && unlink(path) == 0) {
			cache_count(&cache.stats->bytes, -(int64_t)st.st_size);
			cache_count(&cache.stats->torn, 1);
		}
		close(fd);
		return (-1);
	}
	if (h.life == cache.stats->life) {
		/* Written whole in this life: its pages' bytes as they are. */
		for (ok = 1; p0 <= p1 && ok; p0++)
			ok = cache_part_has(&h, p0);
		ok = ok && pread(fd, dst, len, (off_t)(CACHE_PART_DATA + at)) ==
		    (ssize_t)len;
	} else {
		/* From an earlier life: the pages read are summed. */
		if ((buf = malloc((p1 - p0 + 1) * CACHE_PAGE)) == NULL) {
			close(fd);
			return (-1);
		}
		ok = cache_part_pages(fd, &h, p0, p1, buf) == 0;
		if (ok)
			memcpy(dst, buf + at - p0 * CACHE_PAGE, len);
		free(buf);
	}
	if (!ok) {
		close(fd);
		return (-1);
	}
	cache_held_mark(o, i, at / CACHE_PAGE, (at + len - 1) / CACHE_PAGE,
	    true);
	cache_fd_keep(o, i, fd);
	cache_count(&cache.stats->hits, 1);
	return (0);
}

/*
 * Read @len bytes at @at of block @i from its file, checking the whole
 * block first if this process has not: 0, or -1 when absent or torn
 * (then removed).  A block filled in parts is read as cache_part_load()
 * says; @locked: this process holds the block's lock.
 */
static int
cache_block_load(struct cache_object *o, uint64_t i, size_t at, size_t len,
    void *dst, bool locked)
{
	struct cache_header	 h;
	struct stat		 st;
	char			 path[PATH_MAX];
	uint8_t			*buf;
	size_t			 blen = cache_block_len(o, i);
	int			 fd, ok = 0;

	snprintf(path, sizeof path, "%s/b%" PRIu64, o->dir, i);
	if ((fd = cache_fd_take(o, i, path)) == -1)
		return (-1);
	if (!__atomic_load_n(&o->verified[i], __ATOMIC_RELAXED)) {
		ok = pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h;
		if (ok && memcmp(h.magic, CACHE_PART_MAGIC, 8) == 0)
			return (cache_part_load(o, i, fd, path, at, len, dst,
			    locked));
		ok = ok && memcmp(h.magic, CACHE_MAGIC, 8) == 0 &&
		    h.object_size == o->meta.size && h.index == i &&
		    h.len == blen && h.etag_hash == o->etag_hash;
		/* Written in an earlier life: its bytes are summed. */
		if (ok && h.life != cache.stats->life) {
			if ((buf = malloc(blen)) == NULL) {
				close(fd);
				return (-1);
			}
			ok = pread(fd, buf, blen, sizeof h) == (ssize_t)blen &&
			    cache_crc(buf, blen) == h.crc;
			free(buf);
		}
		if (!ok) {
			if (fstat(fd, &st) == 0 && unlink(path) == 0)
				cache_count(&cache.stats->bytes,
				    -(int64_t)st.st_size);
			close(fd);
			cache_count(&cache.stats->torn, 1);
			return (-1);
		}
		__atomic_store_n(&o->verified[i], 1, __ATOMIC_RELAXED);
	}
	ok = pread(fd, dst, len, (off_t)(sizeof h + at)) == (ssize_t)len;
	if (ok && cache.lru)
		(void)futimens(fd, NULL);
	if (ok)
		cache_fd_keep(o, i, fd);
	else
		close(fd);
	if (!ok) {
		__atomic_store_n(&o->verified[i], 0, __ATOMIC_RELAXED);
		return (-1);
	}
	cache_count(&cache.stats->hits, 1);
	return (0);
}

/* The blocks of @p's object that epoch @epoch reads, in order: *@out. */
static int
cache_plan_walk(const struct cache_plan *p, uint64_t epoch, uint64_t **out,
    size_t *n, uint64_t *rows, uint32_t *row_of)
{
	const struct cache_cursor_file *f = p->f;
	struct sampler	 sm;
	uint64_t	*idx = NULL, *pairs = NULL, *np, steps, s, k, m, row = 0;
	uint64_t	 b, last, off;
	size_t		 cap = 0;
	char		*why = NULL;

	*n = 0;
	if (sampler_init(&sm, &f->opts, &why) != 0) {
		free(why);
		return (-1);
	}
	steps = sampler_epoch_steps(&sm, epoch);
	if (steps * sm.cbs > CACHE_PLAN_MAX_ROWS ||
	    (idx = malloc(sm.cbs * sizeof *idx)) == NULL)
		goto fail;
	for (s = 0; s < steps; s++) {
		m = sampler_step_indices(&sm, epoch, s, idx);
		for (k = 0; k < m; k++, row++) {
			if (row_of != NULL && idx[k] < f->opts.samples)
				row_of[idx[k]] = (uint32_t)row;
			/* Records outside the object's are not its. */
			if (idx[k] < p->first || idx[k] - p->first >= p->count)
				continue;
			off = p->base + (idx[k] - p->first) * p->stride;
			if (off >= p->size)
				continue;
			last = (off + p->stride - 1) / f->block;
			for (b = off / f->block; b <= last && b < p->nblocks;
			    b++) {
				if (*n == cap) {
					cap = cap ? cap * 2 : 1024;
					if ((np = realloc(pairs, cap *
					    sizeof *np)) == NULL)
						goto fail;
					pairs = np;
				}
				pairs[(*n)++] = b << 32 | row;
			}
		}
	}
	free(idx);
	sampler_clear(&sm);
	*out = pairs;
	*rows = row;
	return (0);

fail:
	free(idx);
	free(pairs);
	sampler_clear(&sm);
	return (-1);
}

/* Forget @p's epoch tables. */
static void
cache_plan_clear(struct cache_plan *p)
{
	free(p->start);
	free(p->at);
	free(p->next_first);
	free(p->row_of);
	p->start = p->at = p->next_first = p->row_of = NULL;
	p->epoch = UINT64_MAX;
}

/*
 * @p's tables for epoch @epoch: where each block is read in it (sorted by
 * block, then row), where first in the epoch after, and each record's
 * row.  Return: 0, or
 * -1 (an epoch too long, or no memory): the order is not used.
 */
static int
cache_plan_epoch(struct cache_plan *p, uint64_t epoch)
{
	uint64_t	*pairs = NULL, rows, nrows, b;
	size_t		 n, k;

	if (p->epoch == epoch)
		return (0);
	cache_plan_clear(p);
	if (p->f->opts.samples > CACHE_PLAN_MAX_ROWS ||
	    (p->row_of = malloc(p->f->opts.samples * sizeof *p->row_of)) ==
	    NULL)
		goto fail;
	memset(p->row_of, 0xff, p->f->opts.samples * sizeof *p->row_of);
	if (cache_plan_walk(p, epoch, &pairs, &n, &rows, p->row_of) != 0)
		goto fail;
	if ((p->start = calloc(p->nblocks + 1, sizeof *p->start)) == NULL ||
	    (p->at = malloc((n + 1) * sizeof *p->at)) == NULL ||
	    (p->next_first = malloc(p->nblocks * sizeof *p->next_first)) ==
	    NULL)
		goto fail;
	/* A counting sort by block keeps each block's rows in order. */
	for (k = 0; k < n; k++)
		p->start[(pairs[k] >> 32) + 1]++;
	for (b = 0; b < p->nblocks; b++)
		p->start[b + 1] += p->start[b];
	for (k = 0; k < n; k++) {
		b = pairs[k] >> 32;
		p->at[p->start[b]++] = (uint32_t)pairs[k];
	}
	for (b = p->nblocks; b > 0; b--)
		p->start[b] = p->start[b - 1];
	p->start[0] = 0;
	free(pairs);
	pairs = NULL;

	for (b = 0; b < p->nblocks; b++)
		p->next_first[b] = CACHE_NONE;
	if (cache_plan_walk(p, epoch + 1, &pairs, &n, &nrows, NULL) == 0) {
		for (k = n; k > 0; k--)
			p->next_first[pairs[k - 1] >> 32] =
			    (uint32_t)pairs[k - 1];
		free(pairs);
	}
	p->epoch = epoch;
	p->rows = rows;
	return (0);

fail:
	/* Not tried again for this epoch: its tables stay NULL. */
	free(pairs);
	cache_plan_clear(p);
	p->epoch = epoch;
	return (-1);
}

/* The first row at or after @row that block @b is read at, or NONE. */
static uint32_t
cache_plan_use(const struct cache_plan *p, uint64_t b, uint64_t row)
{
	uint32_t	lo = p->start[b], hi = p->start[b + 1], mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (p->at[mid] < row)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < p->start[b + 1] ? p->at[lo] : CACHE_NONE);
}

/*
 * How soon @p's session reads block @b, in rows of one reader, or
 * UINT64_MAX: not within this epoch and the next.  A block a reader is
 * reading now is needed now.  The rest are read from the oldest reader's
 * row on by all the readers together, k rows at a time, but for the rows
 * a reader has read since its job began: the pool cuts a step into jobs
 * of a few rows (pool_job_rows(): images 4 a worker, arrays 1) that the
 * workers take in turn, so a worker does not read on to its step's end,
 * and the rows between two workers' are mostly read already.
 */
static uint64_t
cache_plan_distance(const struct cache_plan *p, uint64_t b)
{
	uint64_t	u, k = p->nreaders > 0 ? p->nreaders : 1;
	unsigned	r, moved;

	if (p->start == NULL || p->epoch != p->at_epoch || b >= p->nblocks)
		return (UINT64_MAX);
	for (r = 0; r < p->nreaders; r++)
		if (cache_plan_use(p, b, p->reader_row[r]) == p->reader_row[r])
			return (0);
	/* Past the rows a reader has read since its job began: done. */
	u = cache_plan_use(p, b, p->oldest);
	do {
		moved = 0;
		for (r = 0; r < p->nreaders && u != CACHE_NONE; r++)
			if (u >= p->reader_start[r] && u < p->reader_row[r]) {
				u = cache_plan_use(p, b, p->reader_row[r]);
				moved = 1;
			}
	} while (moved && u != CACHE_NONE);
	if (u != CACHE_NONE)
		return ((u - p->oldest) / k);
	if (p->next_first[b] != CACHE_NONE && p->rows >= p->oldest)
		return ((p->rows - p->oldest + p->next_first[b]) / k);
	return (UINT64_MAX);
}

/* (epoch, row) of cursor @f, read whole. */
static void
cache_cursor_read(const struct cache_cursor_file *f, uint64_t *epoch,
    uint64_t *row)
{
	uint64_t	g;

	do {
		g = __atomic_load_n(&f->gen, __ATOMIC_ACQUIRE);
		*epoch = __atomic_load_n(&f->epoch, __ATOMIC_ACQUIRE);
		*row = __atomic_load_n(&f->row, __ATOMIC_ACQUIRE);
	} while ((g & 1) != 0 || g != __atomic_load_n(&f->gen,
	    __ATOMIC_ACQUIRE));
}

/*
 * Where @p's records lie in its object (folder @odir): as its cursor
 * says, or, for a span (cache_cursor_new_span()), evenly over the size the
 * meta file gives, once there is one (a worker's open writes it, before
 * any block of the object is kept).  Return: whether that is known.
 */
static bool
cache_plan_geometry(struct cache_plan *p, const char *odir)
{
	struct fetch_object	 meta;
	char			 path[PATH_MAX];

	if (p->size != 0)
		return (true);
	if (p->f->count == 0) {
		p->size = p->f->object_size;
		p->base = p->f->base;
		p->stride = p->f->stride;
		p->first = 0;
		p->count = UINT64_MAX;
	} else {
		if (snprintf(path, sizeof path, "%s/meta", odir) >=
		    (int)sizeof path || !cache_meta_read(path, NULL, &meta) ||
		    meta.size == 0)
			return (false);
		p->size = meta.size;
		p->base = 0;
		if ((p->stride = meta.size / p->f->count) == 0)
			p->stride = 1;
		p->first = p->f->first;
		p->count = p->f->count;
	}
	p->nblocks = (p->size + p->f->block - 1) / p->f->block;
	if (p->stride == 0)
		p->stride = 1;
	cache_plan_clear(p);	/* made again for the new size */
	return (true);
}

/*
 * Cursor file @name of folder @odir (key @dirkey), seen by a scan: mapped
 * once, its tables made for its session's epoch.  A cursor of a process
 * that is gone is removed.
 */
static void
cache_plan_see(const char *odir, const char *name, uint64_t dirkey)
{
	struct cache_plan		*p;
	struct cache_cursor_file	*f;
	struct stat			 st;
	char				 path[PATH_MAX];
	void				*m;
	int				 fd;

	if (snprintf(path, sizeof path, "%s/%s", odir, name) >=
	    (int)sizeof path)
		return;
	for (p = cache.plans; p != NULL; p = p->next)
		if (strcmp(p->path, path) == 0)
			break;
	if (p == NULL) {
		if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1)
			return;
		m = MAP_FAILED;
		if (fstat(fd, &st) == 0 &&
		    st.st_size == (off_t)sizeof(struct cache_cursor_file))
			m = mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE,
			    MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			return;
		f = m;
		if (memcmp(f->magic, CACHE_CURSOR_MAGIC, 8) != 0 ||
		    f->block == 0 || (p = calloc(1, sizeof *p)) == NULL) {
			munmap(m, sizeof *f);
			return;
		}
		snprintf(p->path, sizeof p->path, "%s", path);
		p->f = f;
		p->slot = -1;
		p->dirkey = dirkey;
		p->epoch = UINT64_MAX;
		p->next = cache.plans;
		cache.plans = p;
	}
	if (kill((pid_t)p->f->pid, 0) == -1 && errno == ESRCH) {
		unlink(path);
		return;
	}
	p->seen = true;
	cache_cursor_read(p->f, &p->at_epoch, &p->at_row);
	if (cache_plan_geometry(p, odir))
		(void)cache_plan_epoch(p, p->at_epoch);
}

/* Say in @p's cursor that this process reads (@epoch, @row). */
static void
cache_plan_reader(struct cache_plan *p, uint64_t epoch, uint64_t row)
{
	int64_t		me = (int64_t)getpid(), none;
	uint64_t	was_epoch, was_row;
	int		k;

	if (p->slot == -1 || p->f->readers[p->slot].pid != me) {
		p->slot = -1;
		for (k = 0; k < CACHE_READERS && p->slot == -1; k++) {
			none = p->f->readers[k].pid;
			if ((none == 0 || (kill((pid_t)none, 0) == -1 &&
			    errno == ESRCH)) &&
			    __atomic_compare_exchange_n(&p->f->readers[k].pid,
			    &none, me, false, __ATOMIC_ACQ_REL,
			    __ATOMIC_ACQUIRE))
				p->slot = k;
		}
		if (p->slot == -1)
			return;
		/* A slot just taken: its row and start are set below. */
		__atomic_store_n(&p->f->readers[p->slot].epoch, UINT64_MAX,
		    __ATOMIC_RELEASE);
	}
	/* The next rows of one job continue its run; another job starts one. */
	was_epoch = __atomic_load_n(&p->f->readers[p->slot].epoch,
	    __ATOMIC_ACQUIRE);
	was_row = __atomic_load_n(&p->f->readers[p->slot].row,
	    __ATOMIC_ACQUIRE);
	if (was_epoch != epoch || row < was_row ||
	    row - was_row > CACHE_RUN_GAP)
		__atomic_store_n(&p->f->readers[p->slot].start, row,
		    __ATOMIC_RELEASE);
	__atomic_store_n(&p->f->readers[p->slot].epoch, epoch,
	    __ATOMIC_RELEASE);
	__atomic_store_n(&p->f->readers[p->slot].row, row, __ATOMIC_RELEASE);
}

/*
 * This process reads the record at @off of folder @dirkey's object (or,
 * @rec not UINT64_MAX, record @rec of the sessions' order): say so in the
 * cursors whose order has it (their reader slot for this process), so
 * that every process that evicts knows where the workers read, a ring
 * ahead of the session's cursor.  Plans of an epoch other than their
 * cursor's wait for the next scan.
 */
static void
cache_plans_track(uint64_t dirkey, uint64_t off, uint64_t rec)
{
	struct cache_plan	*p, *q;
	uint64_t		 idx, epoch;
	uint32_t		 row;

	for (p = cache.plans; p != NULL; p = p->next) {
		if (p->dirkey != dirkey || p->row_of == NULL)
			continue;
		epoch = __atomic_load_n(&p->f->epoch, __ATOMIC_ACQUIRE);
		if (rec != UINT64_MAX)
			idx = rec;
		else if (p->size == 0 || off < p->base ||
		    (idx = (off - p->base) / p->stride) >= p->count)
			continue;
		else
			idx += p->first;
		if (epoch != p->epoch || idx >= p->f->opts.samples ||
		    (row = p->row_of[idx]) == CACHE_NONE)
			continue;
		/* The session's cursors on its other objects: the same row. */
		for (q = cache.plans; q != NULL; q = q->next)
			if (q == p || q->f->key == p->f->key)
				cache_plan_reader(q, epoch, row);
	}
}
/*
 * Each plan's readers now: the workers whose row is in the cursor's epoch
 * at or after its row (the others are done), and the oldest of those
 * rows (the cursor's row when none reads).
 */
static void
cache_plans_now(void)
{
	struct cache_plan	*p;
	uint64_t		 row;
	unsigned		 k;

	for (p = cache.plans; p != NULL; p = p->next) {
		p->nreaders = 0;
		p->oldest = UINT64_MAX;
		for (k = 0; k < CACHE_READERS; k++) {
			if (__atomic_load_n(&p->f->readers[k].pid,
			    __ATOMIC_ACQUIRE) == 0 ||
			    __atomic_load_n(&p->f->readers[k].epoch,
			    __ATOMIC_ACQUIRE) != p->at_epoch ||
			    (row = __atomic_load_n(&p->f->readers[k].row,
			    __ATOMIC_ACQUIRE)) < p->at_row)
				continue;
			p->reader_start[p->nreaders] = __atomic_load_n(
			    &p->f->readers[k].start, __ATOMIC_ACQUIRE);
			p->reader_row[p->nreaders++] = row;
			if (row < p->oldest)
				p->oldest = row;
		}
		if (p->nreaders == 0)
			p->oldest = p->at_row;
	}
}

/* Drop the plans whose cursor the last scan did not see; unmark the rest. */
static void
cache_plans_sweep(void)
{
	struct cache_plan	**pp, *p;

	for (pp = &cache.plans; (p = *pp) != NULL;) {
		if (p->seen) {
			p->seen = false;
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		cache_plan_clear(p);
		munmap((void *)(uintptr_t)p->f, sizeof *p->f);
		free(p);
	}
}

/*
 * How soon block @i of folder @dir (key @dirkey) is needed: the fewest
 * reads before it in any session's order (the cursors scanned) or this
 * process's own (cache_object_order()); UINT64_MAX: none needs it.
 */
static uint64_t
cache_next_use(const char *dir, uint64_t dirkey, uint64_t i)
{
	struct cache_object	*o;
	struct cache_plan	*p;
	uint64_t		 best = UINT64_MAX, d;
	size_t			 k, pos;

	for (p = cache.plans; p != NULL; p = p->next)
		if (p->dirkey == dirkey && (d = cache_plan_distance(p, i)) <
		    best)
			best = d;
	for (o = cache.objects; o != NULL; o = o->next) {
		if (o->norder == 0 || strcmp(o->dir, dir) != 0)
			continue;
		pos = __atomic_load_n(&o->pos, __ATOMIC_RELAXED);
		for (k = pos; k < o->norder && k - pos < best; k++)
			if (o->order[k] == i) {
				best = k - pos;
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
	uint64_t	dirkey;	/* its object's folder name */
	uint64_t	block;
};

/*
 * Every block file of cache_dir but @keep's block @ki, in *@out, each
 * with its next use by the cursors found on the way (cache_plan_see()).
 */
static uint64_t
cache_scan(struct cache_file **out, size_t *n, const struct cache_object *keep,
    uint64_t ki)
{
	struct cache_file	*f = NULL, *nf;
	struct dirent		*de, *be;
	struct stat		 st;
	DIR			*d, *bd;
	char			 odir[PATH_MAX], skip[PATH_MAX], *slash;
	uint64_t		 total = 0, dirkey;
	size_t			 cap = 0, k;

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
		dirkey = strtoull(de->d_name, NULL, 16);
		while ((be = readdir(bd)) != NULL) {
			if (strchr(be->d_name, '.') != NULL)
				continue;
			if (strncmp(be->d_name, "cursor-", 7) == 0) {
				cache_plan_see(odir, be->d_name, dirkey);
				continue;
			}
			if (be->d_name[0] != 'b')
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
			f[*n].block = strtoull(be->d_name + 1, NULL, 10);
			f[*n].dirkey = dirkey;
			f[*n].size = (uint64_t)st.st_size;
			f[*n].mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 +
			    st.st_mtim.tv_nsec;
			(*n)++;
		}
		closedir(bd);
	}
	closedir(d);
	cache_plans_sweep();
	cache_plans_now();
	for (k = 0; k < *n; k++) {
		slash = strrchr(f[k].path, '/');
		*slash = '\0';
		f[k].next = cache.lru ? UINT64_MAX :
		    cache_next_use(f[k].path, f[k].dirkey, f[k].block);
		*slash = '/';
	}
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
	/*
	 * The host's count (cache_dir/.stats) says it fits: no scan.  A
	 * scan of every block file on each block kept was most of what the
	 * remote path cost over a local one (docs/performance.md, issue 38
	 * round four); eviction needs it, keeping a block does not.  A
	 * process's own count (no .stats) knows nothing of the others'.
	 */
	if (cache.stats != &cache.own && __atomic_load_n(&cache.stats->bytes,
	    __ATOMIC_RELAXED) + need <= cache.max)
		return (0);
	total = cache_scan(&f, &n, o, i);
	/* Under the host's lock: the count is made exact again. */
	if (cache.stats != &cache.own)
		__atomic_store_n(&cache.stats->bytes, total, __ATOMIC_RELAXED);
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
			cache_count(&cache.stats->evictions, 1);
			cache_count(&cache.stats->bytes, -(int64_t)f[v].size);
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
	if ((fd = cache_lock_open(path)) == -1)
		return (cache_fail(cause, "%s: %s (cache_dir)", path,
		    strerror(errno)));
	pthread_mutex_lock(&cache.lock);
	while (flock(fd, LOCK_EX) == -1 && errno == EINTR)
		;
	rc = cache_block_write(o, i, p, len, cause);
	cache_lock_close(fd);
	pthread_mutex_unlock(&cache.lock);
	return (rc);
}

/* cache_block_store() under the host's lock. */
static int
cache_block_write(struct cache_object *o, uint64_t i, const void *p,
    size_t len, char **cause)
{
	struct cache_header	h;
	struct stat		st;
	char			path[PATH_MAX];
	uint64_t		old = 0;

	/* A part file there (the block filled in parts) is replaced. */
	snprintf(path, sizeof path, "%s/b%" PRIu64, o->dir, i);
	if (stat(path, &st) == 0)
		old = (uint64_t)st.st_size;
	if (cache_make_room(o, i, sizeof h + len > old ? sizeof h + len - old :
	    0) != 0)
		return (0);
	memset(&h, 0, sizeof h);
	memcpy(h.magic, CACHE_MAGIC, 8);
	h.object_size = o->meta.size;
	h.index = i;
	h.len = len;
	h.etag_hash = o->etag_hash;
	h.crc = cache_crc(p, len);
	h.life = cache.stats->life;
	if (cache_write_file(path, &h, sizeof h, p, len) != 0)
		return (cache_fail(cause, "%s: keeping block %" PRIu64 " of %s "
		    "in the cache: %s; cache_dir needs room for cache_max "
		    "(%" PRIu64 " bytes): free space there or lower cache_max",
		    path, i, o->url, strerror(errno), cache.max));
	cache_count(&cache.stats->bytes, (int64_t)(sizeof h + len) -
	    (int64_t)old);
	__atomic_store_n(&o->verified[i], 1, __ATOMIC_RELAXED);
	return (0);
}

/* Where block @i of @o is in cache_held_blocks, or its count. */
static size_t
cache_held_find(const struct cache_object *o, uint64_t i)
{
	size_t	k;

	for (k = 0; k < cache_held_blocks.n; k++)
		if (cache_held_blocks.b[k].dirkey == o->dirkey &&
		    cache_held_blocks.b[k].block == i)
			break;
	return (k);
}

/* Let go of block @i of @o in this process (cache_block_take()). */
static void
cache_held_drop(const struct cache_object *o, uint64_t i)
{
	size_t	k;

	pthread_mutex_lock(&cache_held_blocks.lock);
	if ((k = cache_held_find(o, i)) < cache_held_blocks.n) {
		cache_held_blocks.b[k] =
		    cache_held_blocks.b[--cache_held_blocks.n];
		pthread_cond_broadcast(&cache_held_blocks.gone);
	}
	pthread_mutex_unlock(&cache_held_blocks.lock);
}

/*
 * Take block @i of @o's lock, in @fd, @o's lock file: one process of the
 * host downloads a block while the others that need it wait, then read it
 * from the cache.  This process's threads first wait for one another on a
 * mutex (with @wait; else a block another thread holds is not taken), then
 * the process takes the block's byte (an open file description lock:
 * F_OFD_SETLKW, or F_OFD_SETLK without @wait), which only other processes
 * can then hold: valgrind 3.19 keeps its lock on the process's threads
 * through F_OFD_SETLKW, so a thread waiting there for another thread of
 * the same worker froze that worker under valgrind (not natively).  A
 * child forked meanwhile closes its copy of the file (cache_lock_open())
 * and forgets its parent's blocks.  Return: 0, or -1 with errno (EAGAIN:
 * held, without @wait).
 */
static int
cache_block_take(const struct cache_object *o, int fd, uint64_t i, bool wait)
{
	struct cache_held	*nb;
	struct flock		 fl;
	size_t			 cap;

	pthread_mutex_lock(&cache_held_blocks.lock);
	while (cache_held_find(o, i) < cache_held_blocks.n) {
		if (!wait) {
			pthread_mutex_unlock(&cache_held_blocks.lock);
			errno = EAGAIN;
			return (-1);
		}
		pthread_cond_wait(&cache_held_blocks.gone,
		    &cache_held_blocks.lock);
	}
	if (cache_held_blocks.n == cache_held_blocks.cap) {
		cap = cache_held_blocks.cap ? cache_held_blocks.cap * 2 : 16;
		if ((nb = realloc(cache_held_blocks.b, cap * sizeof *nb)) ==
		    NULL) {
			pthread_mutex_unlock(&cache_held_blocks.lock);
			errno = ENOMEM;
			return (-1);
		}
		cache_held_blocks.b = nb;
		cache_held_blocks.cap = cap;
	}
	cache_held_blocks.b[cache_held_blocks.n].dirkey = o->dirkey;
	cache_held_blocks.b[cache_held_blocks.n++].block = i;
	pthread_mutex_unlock(&cache_held_blocks.lock);

	memset(&fl, 0, sizeof fl);
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = (off_t)i;
	fl.l_len = 1;
	while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == -1)
		if (errno != EINTR) {
			int	e = errno == EACCES ? EAGAIN : errno;

			cache_held_drop(o, i);
			errno = e;
			return (-1);
		}
	return (0);
}

/*
 * Let go of block @i of @o, taken in @fd (cache_block_take()): the byte,
 * then this process's hold.  @fd -1: the byte went with its file's close.
 */
static void
cache_block_give(const struct cache_object *o, int fd, uint64_t i)
{
	struct flock	fl;

	if (fd != -1) {
		memset(&fl, 0, sizeof fl);
		fl.l_type = F_UNLCK;
		fl.l_whence = SEEK_SET;
		fl.l_start = (off_t)i;
		fl.l_len = 1;
		(void)fcntl(fd, F_OFD_SETLK, &fl);
	}
	cache_held_drop(o, i);
}

/*
 * A block's download that failed, for the reads that waited on it: a
 * record beside the block, b<i>.failed (the monotonic microsecond it
 * failed, a newline, its cause), written while the block's lock is held.
 * A read that gets the lock and finds the block still missing takes a
 * failure noted since it began, or up to CACHE_FAILURE_FRESH_MS before
 * (cache_failure_since()), rather than go through the same tries again:
 * each waiter did, one after another, holding its worker for the whole
 * retry budget, and so did the jobs queued behind the workers the failing
 * block held, which begin just after its failure.  A read that begins
 * later removes the record and tries afresh, so no failure sticks.  The
 * dot keeps the record out of the blocks' bytes and eviction; a record
 * never read again goes with the object's blocks (cache_drop_blocks()).
 */
static bool
cache_failure_path(const struct cache_object *o, uint64_t i, char *path,
    size_t len)
{
	return (snprintf(path, len, "%s/b%" PRIu64 ".failed", o->dir, i) <
	    (int)len);
}

/* Note block @i's failed download, @cause (cache_failure_path()). */
static void
cache_failure_note(const struct cache_object *o, uint64_t i,
    const char *cause)
{
	char	path[PATH_MAX], head[32];
	int	n;

	if (!cache_failure_path(o, i, path, sizeof path))
		return;
	n = snprintf(head, sizeof head, "%" PRIu64 "\n", clock_now_us());
	(void)cache_write_file(path, head, (size_t)n, cause != NULL ? cause :
	    "", cause != NULL ? strlen(cause) : 0);
}

/*
 * Whether block @i's download failed at or after @since_us, less
 * CACHE_FAILURE_FRESH_MS (cache_failure_note()): -1 with *@cause, naming
 * it another read's, or 0.
 */
static int
cache_failure_since(const struct cache_object *o, uint64_t i,
    uint64_t since_us, char **cause)
{
	char	path[PATH_MAX], buf[2048], *nl;
	ssize_t	n;
	int	fd;

	if (!cache_failure_path(o, i, path, sizeof path) ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (0);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return (0);
	buf[n] = '\0';
	if ((nl = strchr(buf, '\n')) == NULL ||
	    strtoull(buf, NULL, 10) + CACHE_FAILURE_FRESH_MS * 1000 <
	    since_us) {
		/* Stale: this read tries afresh (the block's lock is held). */
		(void)unlink(path);
		return (0);
	}
	return (cache_fail(cause, "%s (another read's download of the same "
	    "block, just now)", nl + 1));
}

/*
 * Whether block @k of a fetch_ranges() call came whole (its ranges @r
 * from @fr[k]); if not, in *@failure its own range's failure, or NULL
 * (left unfinished, another range's failure ended the call).
 */
static bool
cache_fill_came(const struct fetch_range *r, const size_t *fr, size_t k,
    const char **failure)
{
	size_t	p;
	bool	whole = true;

	*failure = NULL;
	for (p = fr[k]; p < fr[k + 1]; p++) {
		whole = whole && r[p].whole;
		if (*failure == NULL)
			*failure = r[p].cause;
	}
	return (whole);
}

/* Free the causes fetch_ranges() left on @n ranges @r. */
static void
cache_ranges_clear(struct fetch_range *r, size_t n)
{
	size_t	p;

	for (p = 0; r != NULL && p < n; p++) {
		free(r[p].cause);
		r[p].cause = NULL;
	}
}

/* Whether page @k's granule (CACHE_PART_GRANULE) has a page of @want. */
static bool
cache_granule_wanted(const uint8_t *want, size_t k)
{
	size_t	g = k / CACHE_PART_GRANULE * CACHE_PART_GRANULE, j;

	for (j = g; j < g + CACHE_PART_GRANULE; j++)
		if ((want[j / 8] >> (j % 8)) & 1)
			return (true);
	return (false);
}

/*
 * Plan the download of block @i of @o, whose lock is held: the pages of
 * @want (NULL: all; with @granules, of the granules that hold them: a
 * prefetch's) that its file lacks, and all it lacks when
 * the rest is under CACHE_PART_REST; @part: keep them as a part file,
 * else (or when they make it whole) the block is downloaded and kept
 * whole.  A part file's pages from an earlier life are summed here first,
 * and the torn ones dropped (the header is written again by
 * cache_part_write()).
 * Return: 0 with *@f (its buf to free), 1 when nothing is missing, -1
 * with *@cause.
 */
static int
cache_fill_plan(struct cache_object *o, uint64_t i, const uint8_t *want,
    bool part, bool granules, struct cache_fill *f, char **cause)
{
	struct cache_header	 fh;
	char			 path[PATH_MAX];
	uint8_t			 page[CACHE_PAGE];
	size_t			 np, k, hi = 0, asked = 0, rest = 0;
	bool			 all;
	int			 fd;

#define BIT(m, k)	(((m)[(k) / 8] >> ((k) % 8)) & 1)
#define SET(m, k)	((m)[(k) / 8] |= (uint8_t)(1u << ((k) % 8)))
#define CLEAR(m, k)	((m)[(k) / 8] &= (uint8_t)~(1u << ((k) % 8)))
	memset(f, 0, sizeof *f);
	f->block = i;
	f->len = cache_block_len(o, i);
	np = (f->len + CACHE_PAGE - 1) / CACHE_PAGE;
	snprintf(path, sizeof path, "%s/b%" PRIu64, o->dir, i);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
		/* A whole block there (another process kept it): done. */
		if (pread(fd, &fh, sizeof fh, 0) == (ssize_t)sizeof fh &&
		    memcmp(fh.magic, CACHE_MAGIC, 8) == 0 &&
		    fh.object_size == o->meta.size && fh.index == i &&
		    fh.etag_hash == o->etag_hash) {
			close(fd);
			return (1);
		}
		f->had = pread(fd, &f->h, sizeof f->h, 0) ==
		    (ssize_t)sizeof f->h && cache_part_ok(o, i, &f->h);
		/* Its pages from an earlier life: summed, the torn dropped. */
		for (k = 0; f->had && f->h.life != cache.stats->life &&
		    k < np; k++)
			if (BIT(f->h.have, k) &&
			    cache_part_pages(fd, &f->h, k, k, page) != 0) {
				CLEAR(f->h.have, k);
				cache_count(&cache.stats->torn, 1);
			}
	}
	if (!f->had) {
		memset(&f->h, 0, sizeof f->h);
		memcpy(f->h.magic, CACHE_PART_MAGIC, 8);
		f->h.object_size = o->meta.size;
		f->h.index = i;
		f->h.len = f->len;
		f->h.etag_hash = o->etag_hash;
	}
	for (k = 0; k < np; k++) {
		if (BIT(f->h.have, k))
			continue;
		if (want == NULL || (granules ? cache_granule_wanted(want, k) :
		    BIT(want, k))) {
			SET(f->want, k);
			asked++;
		} else
			rest += cache_page_len(f->len, k);
	}
	if (asked == 0) {
		if (fd != -1)
			close(fd);
		return (1);
	}
	/* The rest is small, or the block is not kept in parts: all of it. */
	all = !part || rest <= CACHE_PART_REST;
	for (k = 0; all && k < np; k++)
		if (!BIT(f->h.have, k))
			SET(f->want, k);
	/*
	 * Kept as a whole block when there is no part file; one there is
	 * filled in place, not written again to a new file (a new inode and
	 * the block's bytes twice).
	 */
	f->whole = all && !f->had;
	/* Pages lo..hi: those to download and those asked. */
	f->lo = np;
	for (k = 0; k < np; k++)
		if (BIT(f->want, k) || (want != NULL && BIT(want, k))) {
			f->lo = k < f->lo ? k : f->lo;
			hi = k;
		}
	if ((f->buf = malloc(hi * CACHE_PAGE + cache_page_len(f->len, hi) -
	    f->lo * CACHE_PAGE)) == NULL) {
		if (fd != -1)
			close(fd);
		return (cache_fail(cause, "%s", strerror(ENOMEM)));
	}
	/*
	 * The pages asked that are held: read (and so checked), for the read
	 * they are copied to; a prefetch (@granules) serves none.
	 */
	for (k = f->lo; f->had && want != NULL && !granules && k <= hi; k++)
		if (BIT(want, k) && BIT(f->h.have, k) &&
		    cache_part_pages(fd, &f->h, k, k,
		    f->buf + (k - f->lo) * CACHE_PAGE) != 0) {
			CLEAR(f->h.have, k);
			SET(f->want, k);
		}
	if (fd != -1)
		close(fd);
	return (0);
#undef BIT
#undef SET
#undef CLEAR
}

/*
 * The ranges of @f's pages to download, into @r (room for CACHE_PAGES /
 * 2 + 1): runs of pages, a page held between two runs asked again
 * rather than a request more.  Return: how many.
 */
static size_t
cache_fill_ranges(const struct cache_object *o, const struct cache_fill *f,
    struct fetch_range *r)
{
	size_t	np = (f->len + CACHE_PAGE - 1) / CACHE_PAGE, k, n = 0, end;
	uint64_t start = f->block * cache.block;

#define WANTED(k) ((f->want[(k) / 8] >> ((k) % 8)) & 1)
	for (k = 0; k < np; k = end) {
		if (!WANTED(k)) {
			end = k + 1;
			continue;
		}
		for (end = k + 1; end < np && (WANTED(end) ||
		    (end + 1 < np && WANTED(end + 1))); end++)
			;
		r[n].off = start + k * CACHE_PAGE;
		r[n].len = (end - 1) * CACHE_PAGE + cache_page_len(f->len,
		    end - 1) - k * CACHE_PAGE;
		r[n].dst = f->buf + (k - f->lo) * CACHE_PAGE;
		r[n].url = o->url;
		r[n].etag = o->meta.etag;
		r[n].whole = false;
		r[n].cause = NULL;
		n++;
	}
#undef WANTED
	return (n);
}

/*
 * Keep part block @f's downloaded pages (@r, @n ranges) in its file, made
 * now (room made under the host's lock) if there was none: each range's
 * bytes written, then the header that says they are there, so a crash
 * between the two loses the range, never mixes it.  Return: 0 (not kept
 * for want of room is 0 too), or -1 with *@cause (a full disk).
 */
static int
cache_part_write(struct cache_object *o, struct cache_fill *f,
    const struct fetch_range *r, size_t n, char **cause)
{
	char		 path[PATH_MAX], lpath[PATH_MAX];
	size_t		 k, p, at, end;
	uint64_t	 start = f->block * cache.block;
	int		 fd = -1, lfd, rc = 0;

	snprintf(path, sizeof path, "%s/b%" PRIu64, o->dir, f->block);
	if (!f->had) {
		snprintf(lpath, sizeof lpath, "%s/.lock", cache.dir);
		if ((lfd = cache_lock_open(lpath)) == -1)
			return (cache_fail(cause, "%s: %s (cache_dir)", lpath,
			    strerror(errno)));
		pthread_mutex_lock(&cache.lock);
		while (flock(lfd, LOCK_EX) == -1 && errno == EINTR)
			;
		if (cache_make_room(o, f->block, CACHE_PART_DATA +
		    f->len) != 0)
			rc = 1;		/* served, not kept */
		else {
			f->h.life = cache.stats->life;
			f->h.sum = cache_part_sum(&f->h);
			if (cache_write_file(path, &f->h, sizeof f->h, NULL,
			    0) != 0 || truncate(path, (off_t)(CACHE_PART_DATA +
			    f->len)) != 0)
				rc = -1;
			else
				cache_count(&cache.stats->bytes,
				    (int64_t)(CACHE_PART_DATA + f->len));
		}
		cache_lock_close(lfd);
		pthread_mutex_unlock(&cache.lock);
		if (rc == 1)
			return (0);
	}
	if (rc == 0)
		errno = 0;
	if (rc == 0 && (fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		rc = -1;
	for (k = 0; rc == 0 && k < n; k++) {
		at = (size_t)(r[k].off - start);
		if (pwrite(fd, r[k].dst, r[k].len, (off_t)(CACHE_PART_DATA +
		    at)) != (ssize_t)r[k].len)
			rc = -1;
		end = at + r[k].len;
		for (p = at / CACHE_PAGE; rc == 0 && p * CACHE_PAGE < end;
		    p++) {
			f->h.crc[p] = cache_crc(f->buf + (p - f->lo) *
			    CACHE_PAGE, cache_page_len(f->len, p));
			f->h.have[p / 8] |= (uint8_t)(1u << (p % 8));
		}
	}
	if (rc == 0) {
		f->h.life = cache.stats->life;
		f->h.sum = cache_part_sum(&f->h);
		if (pwrite(fd, &f->h, sizeof f->h, 0) != (ssize_t)sizeof f->h)
			rc = -1;
	}
	for (k = 0; rc == 0 && k < n; k++)
		cache_held_mark(o, f->block, (size_t)(r[k].off - start) /
		    CACHE_PAGE, (size_t)(r[k].off - start + r[k].len - 1) /
		    CACHE_PAGE, true);
	if (rc != 0)
		cache_fail(cause, "%s: keeping pages of block %" PRIu64 " of %s "
		    "in the cache: %s; cache_dir needs room for cache_max "
		    "(%" PRIu64 " bytes): free space there or lower cache_max",
		    path, f->block, o->url, strerror(errno != 0 ? errno :
		    ENOSPC), cache.max);
	if (fd != -1)
		close(fd);
	return (rc);
}

/*
 * @len bytes at @off: cached blocks (and pages) read, the others fetched
 * together; @part: as cache_object_read_part().
 */
static int
cache_read(struct cache_object *o, uint64_t off, size_t len, void *dst,
    bool part, char **cause)
{
	struct cache_fill	*f = NULL;
	struct fetch_range	*r = NULL;
	uint8_t			 want[CACHE_PAGES / 8];
	uint64_t		 first, last, i, bstart;
	uint64_t		 taken = UINT64_MAX;	/* not yet in f */
	uint64_t		 since;		/* when block i was first asked */
	size_t			 n = 0, nr = 0, k, at, l, p, m, *fr = NULL;
	char			 lpath[PATH_MAX];
	const char		*failure;
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
	if (!__atomic_load_n(&o->by_record, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&cache.lock);
		cache_plans_track(o->dirkey, off, UINT64_MAX);
		pthread_mutex_unlock(&cache.lock);
	}
	m = (size_t)(last - first + 1);
	if ((f = calloc(m, sizeof *f)) == NULL ||
	    (fr = calloc(m + 1, sizeof *fr)) == NULL ||
	    (r = calloc(m * (CACHE_PAGES / 2 + 1), sizeof *r)) == NULL) {
		rc = cache_fail(cause, "%s", strerror(ENOMEM));
		goto out;
	}
	for (i = first; i <= last; i++) {
		bstart = i * cache.block;
		at = off > bstart ? (size_t)(off - bstart) : 0;
		l = (size_t)((bstart + cache_block_len(o, i) <
		    off + len ? bstart + cache_block_len(o, i) :
		    off + len) - (bstart + at));
		since = clock_now_us();
		if (cache_block_load(o, i, at, l,
		    (uint8_t *)dst + (bstart + at - off), false) == 0)
			continue;
		/* A miss: wait for whoever downloads it, then look again. */
		cache_count(&cache.stats->waited, 1);
		if (part)
			cache_held_mark(o, i, 0, 0, false);
		if (lockfd == -1 && (snprintf(lpath, sizeof lpath, "%s/lock",
		    o->dir) >= (int)sizeof lpath ||
		    (lockfd = cache_lock_open(lpath)) == -1)) {
			rc = cache_fail(cause, "%s/lock: %s (cache_dir)",
			    o->dir, strerror(errno));
			goto out;
		}
		if (cache_block_take(o, lockfd, i, true) != 0) {
			rc = cache_fail(cause, "%s: %s (cache_dir)", lpath,
			    strerror(errno));
			goto out;
		}
		taken = i;
		if (cache_block_load(o, i, at, l,
		    (uint8_t *)dst + (bstart + at - off), true) == 0) {
			cache_block_give(o, lockfd, i);
			taken = UINT64_MAX;
			continue;
		}
		/* Its download failed while this read waited: that failure. */
		if (cache_failure_since(o, i, since, cause) != 0) {
			rc = -1;
			goto out;
		}
		memset(want, 0, sizeof want);
		for (p = at / CACHE_PAGE; p <= (at + l - 1) / CACHE_PAGE; p++)
			want[p / 8] |= (uint8_t)(1u << (p % 8));
		/* A read waits: its own pages only, the least to wait for. */
		if ((k = (size_t)cache_fill_plan(o, i, want, part, false, &f[n],
		    cause)) != 0) {
			if ((int)k == -1) {
				rc = -1;
				goto out;
			}
			/* Kept since: read it. */
			if (cache_block_load(o, i, at, l, (uint8_t *)dst +
			    (bstart + at - off), true) != 0) {
				rc = cache_fail(cause, "%s: block %" PRIu64
				    " of the cache could not be read",
				    o->url, i);
				goto out;
			}
			cache_block_give(o, lockfd, i);
			taken = UINT64_MAX;
			continue;
		}
		fr[n] = nr;
		nr += cache_fill_ranges(o, &f[n], &r[nr]);
		n++;
		fr[n] = nr;
		taken = UINT64_MAX;
	}
	if (nr > 0 && fetch_ranges(o->url, o->meta.etag, r, nr, cause) != 0) {
		/* A block that came whole did not fail: its waiters fetch it. */
		for (k = 0; k < n; k++)
			if (!cache_fill_came(r, fr, k, &failure))
				cache_failure_note(o, f[k].block,
				    failure != NULL ? failure : *cause);
		rc = -1;
		goto out;
	}
	for (k = 0; k < n; k++) {
		i = f[k].block;
		cache_count(&cache.stats->misses, 1);
		for (p = fr[k]; p < fr[k + 1]; p++)
			cache_count(&cache.stats->bytes_downloaded,
			    (int64_t)r[p].len);
		if (f[k].whole)
			rc = cache_block_store(o, i, f[k].buf, cause);
		else
			rc = cache_part_write(o, &f[k], &r[fr[k]],
			    fr[k + 1] - fr[k], cause);
		if (rc != 0)
			goto out;
		bstart = i * cache.block;
		at = off > bstart ? (size_t)(off - bstart) : 0;
		l = (size_t)((bstart + f[k].len < off + len ?
		    bstart + f[k].len : off + len) - (bstart + at));
		memcpy((uint8_t *)dst + (bstart + at - off), f[k].buf + at -
		    f[k].lo * CACHE_PAGE, l);
	}
out:
	cache_ranges_clear(r, nr);
	/* Closing the lock file lets go of every block's byte. */
	if (lockfd != -1)
		cache_lock_close(lockfd);
	if (taken != UINT64_MAX)
		cache_block_give(o, -1, taken);
	for (k = 0; f != NULL && k < n; k++) {
		cache_block_give(o, -1, f[k].block);
		free(f[k].buf);
	}
	free(f);
	free(fr);
	free(r);
	return (rc);
}

/* @len bytes at @off, blocks missing downloaded whole. */
int
cache_object_read(struct cache_object *o, uint64_t off, size_t len,
    void *dst, char **cause)
{
	return (cache_read(o, off, len, dst, false, cause));
}

/* This process reads record @rec of the sessions' orders of @o next. */
void
cache_object_reading(struct cache_object *o, uint64_t rec)
{
	__atomic_store_n(&o->by_record, true, __ATOMIC_RELAXED);
	pthread_mutex_lock(&cache.lock);
	cache_plans_track(o->dirkey, 0, rec);
	pthread_mutex_unlock(&cache.lock);
}

/* @len bytes at @off, only the pages missing downloaded: see cache.h. */
int
cache_object_read_part(struct cache_object *o, uint64_t off, size_t len,
    void *dst, char **cause)
{
	return (cache_read(o, off, len, dst, true, cause));
}

/*
 * Blocks fetched ahead of their reads (cache_object_prefetch()): a queue
 * this process's prefetch threads take from, the soonest asked first.
 */
static struct {
	pthread_mutex_t	 lock;
	pthread_cond_t	 more;		/* something queued */
	pthread_cond_t	 done;		/* a thread put its blocks down */
	pid_t		 pid;		/* whose threads run; 0: none */
	struct cache_ahead {
		struct cache_object	*o;	/* NULL: open @url first */
		uint64_t		 block;
		char			*url;
		uint64_t		 off;	/* @url's bytes to fetch */
		size_t			 len;	/* 0: all, whole blocks */
		bool			 part;	/* only the pages of @want */
		uint8_t			 want[CACHE_PAGES / 8];
		uint64_t		 bytes;	/* counted in .bytes */
	} q[CACHE_AHEAD_QUEUE], busy[CACHE_AHEAD_THREADS][CACHE_AHEAD_BATCH];
	/* Objects the threads opened (an entry's @url), until adopted. */
	struct cache_object *opened[CACHE_AHEAD_QUEUE];
	size_t		 nopened;
	size_t		 head, n;
	size_t		 nbusy[CACHE_AHEAD_THREADS];
	uint64_t	 bytes;		/* queued and in flight */
} cache_ahead = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.more = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
};

/* Whether block @i of @o is queued or in flight (under the lock). */
static bool
cache_ahead_has(const struct cache_object *o, uint64_t i)
{
	size_t	k, t;

	for (k = 0; k < cache_ahead.n; k++) {
		const struct cache_ahead *a =
		    &cache_ahead.q[(cache_ahead.head + k) % CACHE_AHEAD_QUEUE];
		if (a->o == o && a->block == i)
			return (true);
	}
	if (o == NULL)
		return (false);
	for (t = 0; t < CACHE_AHEAD_THREADS; t++)
		for (k = 0; k < cache_ahead.nbusy[t]; k++)
			if (cache_ahead.busy[t][k].o == o &&
			    cache_ahead.busy[t][k].block == i)
				return (true);
	return (false);
}

/*
 * Download the @n blocks @b (or their pages asked, for a part entry), of
 * one object or several, that no process of the host has or is
 * downloading (a block's lock taken without waiting: the one that holds
 * it downloads it) and keep them, all in flight in one call.  A failure
 * is noted for the reads that wait on the failing object's blocks
 * meanwhile (cache_failure_note()), which report it; a read that comes
 * later fetches the block again, retries and reports.
 */
static void
cache_ahead_fetch(const struct cache_ahead *b, size_t n)
{
	struct fetch_range	 r[CACHE_AHEAD_BATCH * (CACHE_PAGES / 2 + 1)];
	struct cache_fill	 f[CACHE_AHEAD_BATCH];
	struct cache_object	*o[CACHE_AHEAD_BATCH];
	size_t			 fr[CACHE_AHEAD_BATCH + 1];
	int			 lockfd[CACHE_AHEAD_BATCH];
	bool			 taken[CACHE_AHEAD_BATCH];
	const char		*failure[CACHE_AHEAD_BATCH];
	bool			 came[CACHE_AHEAD_BATCH];
	char			 path[PATH_MAX], *why = NULL, *fresh;
	size_t			 k, j, p, m = 0, nr = 0;

	for (k = 0; k < n; k++) {
		lockfd[k] = -1;
		taken[k] = false;
		snprintf(path, sizeof path, "%s/lock", b[k].o->dir);
		if ((lockfd[k] = cache_lock_open(path)) == -1 ||
		    cache_block_take(b[k].o, lockfd[k], b[k].block, false) != 0)
			continue;
		/* Let go of when lockfd[k] closes. */
		taken[k] = true;
		/* Failed just now: the reads waiting on it take that. */
		if (cache_failure_since(b[k].o, b[k].block, clock_now_us(),
		    &fresh) != 0) {
			free(fresh);
			continue;
		}
		if (cache_fill_plan(b[k].o, b[k].block, b[k].part ? b[k].want :
		    NULL, b[k].part, true, &f[m], &why) != 0)
			continue;
		o[m] = b[k].o;
		fr[m] = nr;
		nr += cache_fill_ranges(o[m], &f[m], &r[nr]);
		m++;
	}
	fr[m] = nr;
	if (nr > 0 && fetch_ranges(o[0]->url, o[0]->meta.etag, r, nr,
	    &why) != 0)
		for (k = 0; k < m; k++)
			came[k] = cache_fill_came(r, fr, k, &failure[k]);
	else
		for (k = 0; k < m; k++)
			came[k] = true;
	/*
	 * A failed call of several objects: a block that failed takes its
	 * own range's failure, one left unfinished its object's if another
	 * of its blocks failed (else its reads fetch it); any that came whole
	 * are kept.
	 */
	for (k = 0; k < m; k++) {
		if (!came[k]) {
			for (j = 0; failure[k] == NULL && j < m; j++)
				if (!came[j] && o[j]->dirkey == o[k]->dirkey)
					failure[k] = failure[j];
			if (failure[k] != NULL)
				cache_failure_note(o[k], f[k].block,
				    failure[k]);
			continue;
		}
		cache_count(&cache.stats->misses, 1);
		for (p = fr[k]; p < fr[k + 1]; p++)
			cache_count(&cache.stats->bytes_downloaded,
			    (int64_t)r[p].len);
		cache_count(&cache.stats->ahead, 1);
		free(why);
		why = NULL;
		if (f[k].whole)
			(void)cache_block_store(o[k], f[k].block, f[k].buf,
			    &why);
		else
			(void)cache_part_write(o[k], &f[k], &r[fr[k]],
			    fr[k + 1] - fr[k], &why);
	}
	cache_ranges_clear(r, nr);
	free(why);
	for (k = 0; k < m; k++)
		free(f[k].buf);
	/* Closing a lock file lets go of its block's byte. */
	for (k = 0; k < n; k++) {
		if (lockfd[k] != -1)
			cache_lock_close(lockfd[k]);
		if (taken[k])
			cache_block_give(b[k].o, -1, b[k].block);
	}
}

static void	cache_ahead_queue(struct cache_object *, uint64_t, size_t,
		    bool);

/*
 * Open @url for a later cache_object_open() (cache_ahead_adopt()) and
 * queue all its blocks first (its reader reads all of it: a tar shard's
 * index); thread @t, called without the lock, returns with it.
 */
static void
cache_ahead_open(size_t t, char *url, uint64_t off, size_t len)
{
	struct cache_ahead	 rest[CACHE_AHEAD_QUEUE];
	struct cache_object	*o;
	char			*why = NULL;
	size_t			 n, k;

	/* Opened by an entry before this one: its pages on that object. */
	pthread_mutex_lock(&cache_ahead.lock);
	for (k = 0; k < cache_ahead.nopened; k++)
		if (strcmp(cache_ahead.opened[k]->url, url) == 0) {
			cache_ahead.nbusy[t] = 0;
			free(url);
			cache_ahead_queue(cache_ahead.opened[k], off, len != 0 ?
			    len : (size_t)cache_ahead.opened[k]->meta.size,
			    len != 0);
			pthread_cond_signal(&cache_ahead.more);
			return;
		}
	pthread_mutex_unlock(&cache_ahead.lock);
	o = cache_object_make(url, &why);
	free(why);
	pthread_mutex_lock(&cache_ahead.lock);
	cache_ahead.nbusy[t] = 0;
	free(url);
	if (o == NULL)
		return;		/* the read opens it again and says why */
	if (cache_ahead.nopened == CACHE_AHEAD_QUEUE) {
		pthread_mutex_unlock(&cache_ahead.lock);
		cache_object_close(o);
		pthread_mutex_lock(&cache_ahead.lock);
		return;
	}
	cache_ahead.opened[cache_ahead.nopened++] = o;
	/* Its blocks go first (it was the head), then the rest that fit. */
	for (n = cache_ahead.n, k = 0; k < n; k++)
		rest[k] = cache_ahead.q[(cache_ahead.head + k) %
		    CACHE_AHEAD_QUEUE];
	cache_ahead.n = 0;
	if (len == 0)
		cache_ahead_queue(o, 0, (size_t)o->meta.size, false);
	else
		cache_ahead_queue(o, off, len, true);
	for (k = 0; k < n; k++) {
		if (cache_ahead.n < CACHE_AHEAD_QUEUE)
			cache_ahead.q[(cache_ahead.head + cache_ahead.n++) %
			    CACHE_AHEAD_QUEUE] = rest[k];
		else if (rest[k].o == NULL)
			free(rest[k].url);
		else
			cache_ahead.bytes -= rest[k].bytes;
	}
	pthread_cond_signal(&cache_ahead.more);
}

/* The object a prefetch thread opened for @url, now the caller's; or NULL. */
static struct cache_object *
cache_ahead_adopt(const char *url)
{
	struct cache_object	*o = NULL;
	size_t			 k;

	if (cache_ahead.pid != getpid())
		return (NULL);
	pthread_mutex_lock(&cache_ahead.lock);
	for (k = 0; k < cache_ahead.nopened; k++)
		if (strcmp(cache_ahead.opened[k]->url, url) == 0) {
			o = cache_ahead.opened[k];
			cache_ahead.opened[k] =
			    cache_ahead.opened[--cache_ahead.nopened];
			break;
		}
	pthread_mutex_unlock(&cache_ahead.lock);
	return (o);
}

/* A prefetch thread: the queue's head, with its object's next blocks. */
static void *
cache_ahead_main(void *arg)
{
	size_t			 t = (size_t)(uintptr_t)arg, k, j, m;
	struct cache_ahead	*mine = cache_ahead.busy[t], *a;
	uint64_t		 bytes;

	pthread_mutex_lock(&cache_ahead.lock);
	for (;;) {
		while (cache_ahead.n == 0)
			pthread_cond_wait(&cache_ahead.more, &cache_ahead.lock);
		/*
		 * The head, and the blocks queued after it (of any object
		 * open), in order, to be in flight at once.
		 */
		mine[0] = cache_ahead.q[cache_ahead.head];
		m = 1;
		for (k = j = 1; k < cache_ahead.n; k++) {
			a = &cache_ahead.q[(cache_ahead.head + k) %
			    CACHE_AHEAD_QUEUE];
			if (m < CACHE_AHEAD_BATCH && a->o != NULL &&
			    mine[0].o != NULL)
				mine[m++] = *a;
			else
				cache_ahead.q[(cache_ahead.head + j++) %
				    CACHE_AHEAD_QUEUE] = *a;
		}
		cache_ahead.head = (cache_ahead.head + 1) % CACHE_AHEAD_QUEUE;
		cache_ahead.n -= m;
		cache_ahead.nbusy[t] = m;
		/* What it left is another thread's: wake one (a queue call
		 * wakes one thread, not all, so an idle one is not woken for
		 * nothing each sample). */
		if (cache_ahead.n > 0)
			pthread_cond_signal(&cache_ahead.more);
		pthread_mutex_unlock(&cache_ahead.lock);

		if (mine[0].o == NULL) {
			cache_ahead_open(t, mine[0].url, mine[0].off,
			    mine[0].len);
			continue;	/* with the lock held again */
		}
		cache_ahead_fetch(mine, m);

		pthread_mutex_lock(&cache_ahead.lock);
		for (bytes = 0, k = 0; k < m; k++)
			bytes += mine[k].bytes;
		cache_ahead.bytes -= bytes;
		cache_ahead.nbusy[t] = 0;
		pthread_cond_broadcast(&cache_ahead.done);
	}
	return (NULL);
}

/* Start this process's prefetch threads (under the lock): false if none. */
static bool
cache_ahead_start(void)
{
	pthread_attr_t	attr;
	pthread_t	th;
	sigset_t	all, old;
	size_t		t;
	bool		ok = true;

	if (cache_ahead.pid == getpid())
		return (true);
	/* A child after fork(): the parent's threads are not here. */
	cache_ahead.head = cache_ahead.n = 0;
	cache_ahead.bytes = 0;
	memset(cache_ahead.nbusy, 0, sizeof cache_ahead.nbusy);
	/* The threads take no signal: the worker's handlers stay its. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (t = 0; t < CACHE_AHEAD_THREADS && ok; t++)
		ok = pthread_create(&th, &attr, cache_ahead_main,
		    (void *)(uintptr_t)t) == 0;
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (t == 0 || (!ok && t == 1))
		return (false);
	cache_ahead.pid = getpid();
	return (true);
}

/*
 * The queued part entry for block @i of @o, to add pages to, or NULL
 * (under the lock).
 */
static struct cache_ahead *
cache_ahead_part(const struct cache_object *o, uint64_t i)
{
	struct cache_ahead	*a;
	size_t			 k;

	for (k = 0; k < cache_ahead.n; k++) {
		a = &cache_ahead.q[(cache_ahead.head + k) % CACHE_AHEAD_QUEUE];
		if (a->o == o && a->block == i && a->part)
			return (a);
	}
	return (NULL);
}

/* A new entry at the queue's tail, zeroed (the lock held, a place free). */
static struct cache_ahead *
cache_ahead_push(void)
{
	struct cache_ahead	*a = &cache_ahead.q[(cache_ahead.head +
				    cache_ahead.n++) % CACHE_AHEAD_QUEUE];

	memset(a, 0, sizeof *a);
	return (a);
}

/*
 * Queue @o's blocks under [@off, @off + @len) (the lock held); @part:
 * only their pages there, added to a part entry of the block's queued.
 */
static void
cache_ahead_queue(struct cache_object *o, uint64_t off, size_t len, bool part)
{
	struct cache_ahead	*a;
	uint64_t		 i, first, last, blen, bstart, at, end, p;

	if (len == 0 || off >= o->meta.size)
		return;
	if (len > o->meta.size - off)
		len = (size_t)(o->meta.size - off);
	first = off / cache.block;
	last = (off + len - 1) / cache.block;
	for (i = first; i <= last; i++) {
		bstart = i * cache.block;
		blen = cache_block_len(o, i);
		at = off > bstart ? off - bstart : 0;
		end = off + len < bstart + blen ? off + len - bstart : blen;
		if (part)
			blen = end - at;
		/* Within a quarter of cache_max: the fetched do not evict
		 * each other before their reads. */
		if (cache_ahead.bytes + blen > cache.max / 4)
			break;
		if (__atomic_load_n(&o->verified[i], __ATOMIC_RELAXED))
			continue;
		/* Pages this process saw kept: no thread's open and lock. */
		if (part && cache_held_all(o, i, (size_t)at / CACHE_PAGE,
		    (size_t)(end - 1) / CACHE_PAGE))
			continue;
		if (part && (a = cache_ahead_part(o, i)) != NULL) {
			for (p = at / CACHE_PAGE; p <= (end - 1) / CACHE_PAGE;
			    p++)
				a->want[p / 8] |= (uint8_t)(1u << (p % 8));
			a->bytes += blen;
			cache_ahead.bytes += blen;
			continue;
		}
		if (cache_ahead.n == CACHE_AHEAD_QUEUE)
			break;
		if (!part && cache_ahead_has(o, i))
			continue;
		a = cache_ahead_push();
		a->o = o;
		a->block = i;
		a->part = part;
		a->bytes = blen;
		for (p = at / CACHE_PAGE; part && p <= (end - 1) / CACHE_PAGE;
		    p++)
			a->want[p / 8] |= (uint8_t)(1u << (p % 8));
		cache_ahead.bytes += blen;
	}
}

/* Queue @o's blocks (@part: pages) under [@off, @off + @len). */
static void
cache_prefetch(struct cache_object *o, uint64_t off, size_t len, bool part)
{
	size_t		n;
	uint64_t	bytes;

	if (cache.dir == NULL)
		return;
	pthread_mutex_lock(&cache_ahead.lock);
	if (cache_ahead_start()) {
		n = cache_ahead.n;
		bytes = cache_ahead.bytes;
		cache_ahead_queue(o, off, len, part);
		if (cache_ahead.n > n || cache_ahead.bytes > bytes)
			pthread_cond_signal(&cache_ahead.more);
	}
	pthread_mutex_unlock(&cache_ahead.lock);
}

/* Start downloading @o's blocks under [@off, @off + @len): see cache.h. */
void
cache_object_prefetch(struct cache_object *o, uint64_t off, size_t len)
{
	cache_prefetch(o, off, len, false);
}

/* The same, only the pages asked: see cache.h. */
void
cache_object_prefetch_part(struct cache_object *o, uint64_t off, size_t len)
{
	cache_prefetch(o, off, len, true);
}

/* Open @url and download all of it, or its pages under @len bytes at @off. */
void
cache_url_prefetch(const char *url, uint64_t off, size_t len)
{
	struct cache_ahead	*a;
	size_t			 k, t;
	char			*u;

	if (cache.dir == NULL)
		return;
	pthread_mutex_lock(&cache_ahead.lock);
	if (!cache_ahead_start() || cache_ahead.n == CACHE_AHEAD_QUEUE)
		goto out;
	for (k = 0; k < cache_ahead.nopened; k++)
		if (strcmp(cache_ahead.opened[k]->url, url) == 0) {
			/* Opened, not yet taken: its pages queued on it. */
			if (len != 0) {
				cache_ahead_queue(cache_ahead.opened[k], off,
				    len, true);
				pthread_cond_signal(&cache_ahead.more);
			}
			goto out;
		}
	/*
	 * Queued or being opened: all of it asked once; pages asked again,
	 * an entry each (taken to the object once it is open).
	 */
	for (k = 0; len == 0 && k < cache_ahead.n; k++) {
		a = &cache_ahead.q[(cache_ahead.head + k) % CACHE_AHEAD_QUEUE];
		if (a->o == NULL && strcmp(a->url, url) == 0)
			goto out;
	}
	for (t = 0; len == 0 && t < CACHE_AHEAD_THREADS; t++)
		if (cache_ahead.nbusy[t] > 0 && cache_ahead.busy[t][0].o ==
		    NULL && strcmp(cache_ahead.busy[t][0].url, url) == 0)
			goto out;
	if ((u = strdup(url)) == NULL)
		goto out;
	a = cache_ahead_push();
	a->url = u;
	a->off = off;
	a->len = len;
	pthread_cond_signal(&cache_ahead.more);
out:
	pthread_mutex_unlock(&cache_ahead.lock);
}

/* Drop @o's queued blocks and wait for those in flight (@o closes). */
static void
cache_prefetch_forget(struct cache_object *o)
{
	size_t	k, j, t;
	bool	busy;

	if (cache_ahead.pid != getpid())
		return;
	pthread_mutex_lock(&cache_ahead.lock);
	for (k = j = 0; k < cache_ahead.n; k++) {
		struct cache_ahead a =
		    cache_ahead.q[(cache_ahead.head + k) % CACHE_AHEAD_QUEUE];
		if (a.o == o)
			cache_ahead.bytes -= a.bytes;
		else
			cache_ahead.q[(cache_ahead.head + j++) %
			    CACHE_AHEAD_QUEUE] = a;
	}
	cache_ahead.n = j;
	do {
		busy = false;
		for (t = 0; t < CACHE_AHEAD_THREADS; t++)
			for (k = 0; k < cache_ahead.nbusy[t]; k++)
				if (cache_ahead.busy[t][k].o == o)
					busy = true;
		if (busy)
			pthread_cond_wait(&cache_ahead.done, &cache_ahead.lock);
	} while (busy);
	pthread_mutex_unlock(&cache_ahead.lock);
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
	pthread_mutex_lock(&cache.lock);
	free(o->order);
	o->order = c;
	o->norder = n;
	o->pos = 0;
	pthread_mutex_unlock(&cache.lock);
	return (0);
}

/* Where in its order @o's reads are. */
void
cache_object_at(struct cache_object *o, size_t pos)
{
	__atomic_store_n(&o->pos, pos, __ATOMIC_RELAXED);
}

/* Free @o and forget it. */
void
cache_object_close(struct cache_object *o)
{
	struct cache_object	**p;

	if (o == NULL)
		return;
	cache_prefetch_forget(o);
	cache_fd_forget(o);
	pthread_mutex_lock(&cache.lock);
	for (p = &cache.objects; *p != NULL; p = &(*p)->next)
		if (*p == o) {
			*p = o->next;
			break;
		}
	pthread_mutex_unlock(&cache.lock);
	free(o->url);
	free(o->dir);
	free(o->verified);
	free(o->held);
	free(o->order);
	free(o);
}

/* The host's counts. */
void
cache_stats(struct cache_stats *out)
{
	out->hits = __atomic_load_n(&cache.stats->hits, __ATOMIC_RELAXED);
	out->misses = __atomic_load_n(&cache.stats->misses, __ATOMIC_RELAXED);
	out->torn = __atomic_load_n(&cache.stats->torn, __ATOMIC_RELAXED);
	out->bytes_downloaded = __atomic_load_n(&cache.stats->bytes_downloaded,
	    __ATOMIC_RELAXED);
	out->evictions = __atomic_load_n(&cache.stats->evictions,
	    __ATOMIC_RELAXED);
	out->bytes = __atomic_load_n(&cache.stats->bytes, __ATOMIC_RELAXED);
	out->ahead = __atomic_load_n(&cache.stats->ahead, __ATOMIC_RELAXED);
	out->waited = __atomic_load_n(&cache.stats->waited, __ATOMIC_RELAXED);
	out->max = cache.dir != NULL ? cache.max : 0;
}

/*
 * The cursors' files are made and removed by a thread of the daemon's
 * (cache_cursor_thread()), in the order asked: a slow cache_dir never
 * holds the event loop.
 */
static struct {
	pthread_mutex_t	 lock;
	pthread_cond_t	 cond;		/* a job queued, or the queue done */
	struct cache_cursor *head, **tail;
	bool		 started;
	bool		 busy;		/* the thread is on a job */
	unsigned	 delay_ms;	/* INFEED_CACHE_CURSOR_DELAY_MS */
} cache_cursors = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.tail = &cache_cursors.head,
};

/* Make @c's file (a temporary name, then renamed); publish its mapping. */
static void
cache_cursor_make(struct cache_cursor *c)
{
	struct cache_cursor_file	*f;
	char				 tmp[PATH_MAX];
	void				*m = MAP_FAILED;
	int				 fd;

	/* A span's object may be opened by no process yet: its folder. */
	snprintf(tmp, sizeof tmp, "%s", c->path);
	*strrchr(tmp, '/') = '\0';
	if (mkdir(tmp, 0750) == -1 && errno != EEXIST)
		return;
	/* Made whole under a temporary name, so a scan never sees it half. */
	snprintf(tmp, sizeof tmp, "%s.tmp", c->path);
	if ((fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0640)) == -1)
		return;
	if (ftruncate(fd, sizeof *f) != 0 || (m = mmap(NULL, sizeof *f,
	    PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
		goto fail;
	f = m;
	*f = c->init;
	f->epoch = __atomic_load_n(&c->epoch, __ATOMIC_ACQUIRE);
	f->row = __atomic_load_n(&c->row, __ATOMIC_ACQUIRE);
	if (rename(tmp, c->path) != 0)
		goto fail;
	close(fd);
	__atomic_store_n(&c->f, f, __ATOMIC_RELEASE);
	return;

fail:
	if (m != MAP_FAILED)
		munmap(m, sizeof *f);
	close(fd);
	unlink(tmp);
}

/* Make the queued cursors' files, and remove those freed. */
static void *
cache_cursor_thread(void *arg)
{
	struct cache_cursor	*c;
	bool			 gone;

	(void)arg;
	pthread_mutex_lock(&cache_cursors.lock);
	for (;;) {
		while ((c = cache_cursors.head) == NULL)
			pthread_cond_wait(&cache_cursors.cond,
			    &cache_cursors.lock);
		if ((cache_cursors.head = c->qnext) == NULL)
			cache_cursors.tail = &cache_cursors.head;
		c->queued = false;
		gone = c->gone;
		cache_cursors.busy = true;
		pthread_mutex_unlock(&cache_cursors.lock);

		if (cache_cursors.delay_ms > 0)
			usleep(cache_cursors.delay_ms * 1000);
		if (!gone && c->f == NULL)
			cache_cursor_make(c);
		else if (gone) {
			/* Freed: nothing queues @c again. */
			if (c->f != NULL) {
				unlink(c->path);
				munmap(c->f, sizeof *c->f);
			}
			free(c->path);
			free(c);
		}

		pthread_mutex_lock(&cache_cursors.lock);
		cache_cursors.busy = false;
		pthread_cond_broadcast(&cache_cursors.cond);
	}
	return (NULL);
}

/* Queue @c for the thread (started the first time); the lock is held. */
static int
cache_cursor_queue(struct cache_cursor *c)
{
	pthread_attr_t	 attr;
	pthread_t	 t;
	const char	*v;
	int		 rc = 0;

	if (!cache_cursors.started) {
		if ((v = getenv("INFEED_CACHE_CURSOR_DELAY_MS")) != NULL)
			cache_cursors.delay_ms = (unsigned)strtoul(v, NULL, 10);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &attr, cache_cursor_thread, NULL);
		pthread_attr_destroy(&attr);
		if (rc != 0)
			return (-1);
		cache_cursors.started = true;
	}
	if (!c->queued) {
		c->queued = true;
		c->qnext = NULL;
		*cache_cursors.tail = c;
		cache_cursors.tail = &c->qnext;
		pthread_cond_broadcast(&cache_cursors.cond);
	}
	return (0);
}

/*
 * A session's cursor in folder @dir (an object's), for the host to see:
 * @init's object_size, base, stride, first and count set, the rest here.
 */
static struct cache_cursor *
cache_cursor_add(const char *dir, const struct cache_cursor_file *init,
    uint64_t key, const struct sampler_opts *opts, char **cause)
{
	struct cache_cursor		*c;
	struct cache_cursor_file	*f;
	int				 rc;

	*cause = NULL;
	if ((c = calloc(1, sizeof *c)) == NULL ||
	    asprintf(&c->path, "%s/cursor-%ld-%u", dir, (long)getpid(),
	    cache.cursors++) == -1) {
		free(c);
		cache_fail(cause, "%s", strerror(ENOMEM));
		return (NULL);
	}
	f = &c->init;
	*f = *init;
	memcpy(f->magic, CACHE_CURSOR_MAGIC, 8);
	f->pid = (int64_t)getpid();
	f->block = cache.block;
	f->key = key;
	f->opts = *opts;
	pthread_mutex_lock(&cache_cursors.lock);
	rc = cache_cursor_queue(c);
	pthread_mutex_unlock(&cache_cursors.lock);
	if (rc != 0) {
		cache_fail(cause, "no thread to make %s: %s", c->path,
		    strerror(errno));
		free(c->path);
		free(c);
		return (NULL);
	}
	return (c);
}

/* A session's cursor on @o: record i at @base + i x @stride. */
struct cache_cursor *
cache_cursor_new(struct cache_object *o, uint64_t key, uint64_t base,
    uint64_t stride, const struct sampler_opts *opts, char **cause)
{
	struct cache_cursor_file	init = { .object_size = o->meta.size,
	    .base = base, .stride = stride };

	return (cache_cursor_add(o->dir, &init, key, opts, cause));
}

/*
 * A session's cursor on the object at @url, opened here or not: records
 * @first..@first+@count-1 evenly over it, its size from the meta file.
 */
struct cache_cursor *
cache_cursor_new_span(const char *url, uint64_t key, uint64_t first,
    uint64_t count, const struct sampler_opts *opts, char **cause)
{
	struct cache_cursor_file	init = { .first = first,
	    .count = count };
	struct cache_cursor		*c;
	char				*dir;
	uint64_t			 dirkey;

	*cause = NULL;
	if (cache.dir == NULL || count == 0)
		return (NULL);
	if ((dir = cache_folder(url, &dirkey)) == NULL) {
		cache_fail(cause, "%s", strerror(ENOMEM));
		return (NULL);
	}
	c = cache_cursor_add(dir, &init, key, opts, cause);
	free(dir);
	return (c);
}

/* Wait until the thread has made or removed every cursor asked. */
void
cache_cursors_wait(void)
{
	pthread_mutex_lock(&cache_cursors.lock);
	while (cache_cursors.head != NULL || cache_cursors.busy)
		pthread_cond_wait(&cache_cursors.cond, &cache_cursors.lock);
	pthread_mutex_unlock(&cache_cursors.lock);
}

/* @c's session reads row @row of epoch @epoch next. */
void
cache_cursor_at(struct cache_cursor *c, uint64_t epoch, uint64_t row)
{
	struct cache_cursor_file	*f;

	/* Kept here too, for a file the thread has yet to make. */
	__atomic_store_n(&c->epoch, epoch, __ATOMIC_RELEASE);
	__atomic_store_n(&c->row, row, __ATOMIC_RELEASE);
	if ((f = __atomic_load_n(&c->f, __ATOMIC_ACQUIRE)) == NULL ||
	    (f->epoch == epoch && f->row == row))
		return;
	__atomic_store_n(&f->gen, f->gen + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&f->epoch, epoch, __ATOMIC_RELEASE);
	__atomic_store_n(&f->row, row, __ATOMIC_RELEASE);
	__atomic_store_n(&f->gen, f->gen + 1, __ATOMIC_RELEASE);
}

/* The thread removes @c's file and frees it. */
void
cache_cursor_free(struct cache_cursor *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&cache_cursors.lock);
	c->gone = true;
	/* Queued before, so the thread is there. */
	(void)cache_cursor_queue(c);
	pthread_mutex_unlock(&cache_cursors.lock);
}
