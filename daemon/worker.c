/* SPDX-License-Identifier: MIT */
/*
 * A worker process: takes each row's dataset index from the job, reads the
 * sample through the dataset (whose mappings it inherited at fork),
 * transforms it if the session asked, writes data and label into the slot,
 * and answers DONE.  The reads of a job's rows go in flight together
 * (io-batch.h), straight into the slot for arrays (one copy, by the
 * kernel) and into a buffer for what is converted or decoded, each row
 * finished as its read completes; a row whose pages are in the page cache
 * is copied from the mapping instead (mincore), which is faster still.
 * Before DONE every read of the job has completed, whatever happened: no
 * read lands in a slot the pool has given back.  It keeps one mapping per ring it was sent, and for a
 * ring that reads a client's files, the dataset it opened from the
 * descriptors that came with the ring (refused, every job of that ring
 * fails as unreadable: the client changed the files since the daemon
 * checked them).
 *
 * A file mapped for reading can be truncated under the worker (a client's
 * own file, typically): rows are copied with a SIGBUS handler armed, and a
 * fault while copying is the row's read error ("truncated to N bytes
 * while the session read it"), not the worker's death; a read that comes
 * back short is the same error ("the file is N bytes now").  Each row it
 * finishes is counted in its beat, so the pool's deadline is per row, and
 * the beat names the row being copied or decoded, the one a crash blames.
 */

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "copy.h"
#include "io-batch.h"
#include "log.h"
#include "transport.h"
#include "worker.h"
#include "xmalloc.h"

/* Datasets are populated when they take at most this share of RAM, */
#define WORKER_POPULATE_SHARE	4
/* ... this much at a time between jobs (a few ms). */
#define WORKER_IDLE_POPULATE_CHUNK	(16u << 20)

_Static_assert(WORKER_MAX_FDS <= TRANSPORT_MAX_FDS,
    "a MAP carries more descriptors than a message may");
_Static_assert(sizeof(struct worker_msg_map) <= sizeof(struct worker_msg_job) +
    WORKER_MAX_JOB_ROWS * sizeof(uint64_t),
    "a MAP is longer than the longest JOB, the worker's buffer");

/* A ring memory mapped in this worker, kept until FORGET. */
struct wmem {
	uint64_t		 id;
	uint64_t		 bytes;
	uint8_t			*map;
	uint8_t			*populated;	/* per chunk: mapped here */
};

/*
 * A worker maps the pages of its memories a chunk at a time, in one call,
 * the first time it writes there (worker_populate()): a fault a page
 * cost about 15 % of the workers' time in the first session on a ring's
 * memory (perf, issue 25).
 */
#define WORKER_POPULATE_CHUNK	(2u << 20)

/* A ring this worker fills, on one of its memories. */
struct wring {
	bool			 used;
	struct worker_ring	 desc;
	uint8_t			*map;		/* its memory's */
	uint8_t			*populated;	/* its memory's */
	uint8_t			*tmp;		/* ntmp input samples */
	unsigned		 ntmp;		/* at most IO_BATCH_DEPTH */
	uint64_t		 tmp_used;	/* a bit a sample of tmp */
	float			*lut;		/* uint8 -> float, per channel */
	const struct dataset	*ds;		/* the catalogue's, or NULL */
	struct dataset		*files;		/* a client's, or NULL */
	char			*files_why;	/* why not, when refused */
	char			*why;		/* its jobs fail: ours, why */
};

/* A ring's buffers for reads converted to float32: this many bytes at most. */
#define WORKER_IO_BYTES		(32u << 20)
/* An in-flight image buffer larger than this is freed after use. */
#define WORKER_ENC_KEEP		(4u << 20)
/* Pages asked of mincore(2) at a time. */
#define WORKER_MINCORE_PAGES	64
/*
 * A copy from the mapping that took this long waited for a page still
 * being read (read ahead, pool_read_ahead(): mincore(2) counts a page
 * under I/O as in memory), and the rows then wait one at a time: for
 * WORKER_MAP_OFF_MS the worker reads even resident rows in flight, once
 * WORKER_MAP_WAIT_ROWS copies in a row took it.  The time allowed
 * grows with the row (worker_copy_timed()): a cached 128 KiB row copies
 * in about 25 us, a cached 8 MiB row in 456 us (57 us a MiB; 0.5-2 ms a
 * MiB with the CPUs shared, test_big_cached_rows_stay_copied), one
 * converted to float32 in about 500 us a MiB (600 KB in 300 us), so
 * WORKER_MAP_WAIT_US_MIB, 4x the slower, keeps big cached rows copied.
 */
#define WORKER_MAP_WAIT_US	300
#define WORKER_MAP_WAIT_US_MIB	2000
#define WORKER_MAP_WAIT_ROWS	3
#define WORKER_MAP_OFF_MS	1000
/* Rows to read ahead looked at first: all resident, the dataset is. */
#define WORKER_AHEAD_PROBE	4
/* Rows found in memory in a row before worker_resident() samples. */
#define WORKER_RESIDENT_TRUST	1024
#define WORKER_RESIDENT_SAMPLE	64

uint64_t			 worker_resident_asked;

/* A row whose read is in flight. */
struct worker_fl {
	bool			 used;
	bool			 owned;	/* @fd is an image file, ours to close */
	int			 fd;
	uint64_t		 row;
	uint64_t		 index;
	size_t			 len;
	uint64_t		 end;	/* the file's bytes the row needs */
	const struct dataset_map *map;	/* the file's, for a short read */
	int64_t			 label;
	uint8_t			*tmp;	/* to convert: its ring's buffer */
	unsigned		 tmp_slot;
	struct wring		*w;	/* ... of this ring */
	struct dataset_buf	 enc;	/* an image's bytes */
	size_t			 bytes;	/* of enc, counted in worker_fl_bytes */
};

/* The reads in flight: their batch, entries (by tag) and free ones. */
static struct io_batch		*worker_io;
static struct worker_fl		 worker_fl[IO_BATCH_DEPTH];
static unsigned			 worker_free[IO_BATCH_DEPTH];
static unsigned			 worker_nfree;
static size_t			 worker_fl_bytes;
static long			 worker_page;
/* The sample being copied out of a mapping, for a SIGBUS's message. */
static uint64_t			 worker_copying;

/* This worker's progress, shared with the pool. */
static struct worker_beat	*worker_beat;

/* The pool's socket, where the next JOB is looked at (worker_next_rows()). */
static int			 worker_sock = -1;
static struct worker_msg_job	*worker_peeked;
static size_t			 worker_peeked_len;

/* The way back from a SIGBUS while rows are copied. */
static sigjmp_buf		 worker_bus_jb;
static volatile sig_atomic_t	 worker_bus_armed;

/* Say row @row of the job is begun: the pool's deadline is per row. */
static void
worker_beat_row(uint64_t row)
{
	worker_beat->row = row;
	__atomic_store_n(&worker_beat->rows, worker_beat->rows + 1,
	    __ATOMIC_RELAXED);
}

/*
 * The memory this process may use: the host's, or less where its cgroup
 * says so (cgroup v2's memory.max, v1's memory.limit_in_bytes), the page
 * cache included: a dataset populated past it would only be read twice.
 */
static uint64_t
worker_memory_max(void)
{
	char		 line[512], path[700];
	uint64_t	 max, v;
	FILE		*f;
	const char	*rel = NULL;
	bool		 v1 = false;

	max = (uint64_t)sysconf(_SC_PHYS_PAGES) *
	    (uint64_t)sysconf(_SC_PAGESIZE);
	if ((f = fopen("/proc/self/cgroup", "re")) == NULL)
		return (max);
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "0::", 3) == 0 && rel == NULL) {
			rel = line + 3;
		} else if (strstr(line, ":memory:") != NULL) {
			rel = strstr(line, ":memory:") + 8;
			v1 = true;
			break;
		}
	}
	fclose(f);
	if (rel == NULL)
		return (max);
	if (v1)
		snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/"
		    "memory.limit_in_bytes", rel);
	else
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max",
		    rel);
	if ((f = fopen(path, "re")) == NULL)
		return (max);
	if (fscanf(f, "%" SCNu64, &v) == 1 && v < max)
		max = v;		/* "max" (v2) reads as no number */
	fclose(f);
	return (max);
}

/* The daemon, whose death ends the worker (worker_orphan_cb()). */
static pid_t	worker_daemon;

/*
 * The parent-death signal: the parent died, the fork server or the
 * daemon.  The fork server's death leaves the worker with the daemon (a
 * child subreaper), which a new fork server replaces: it serves on.
 */
static void
worker_orphan_cb(int sig)
{
	(void)sig;
	if (getppid() != worker_daemon)
		_exit(0);
}

/*
 * SIGBUS: while rows are copied, a mapped file cut under them; go back to
 * worker_fill().  Anywhere else it is a bug: the default action, on the
 * faulting instruction again, kills the worker (and blames its job).
 */
static void
worker_bus_cb(int sig)
{
	if (worker_bus_armed) {
		worker_bus_armed = 0;
		siglongjmp(worker_bus_jb, 1);
	}
	signal(sig, SIG_DFL);
}

/*
 * Map the pages of @len bytes at @off of ring @w here, a chunk in one
 * call, unless done before.  Only a hint: a page it misses, or one the
 * kernel takes back later, faults in as before.
 */
static void
worker_populate(struct wring *w, uint64_t off, uint64_t len)
{
#ifdef MADV_POPULATE_WRITE
	uint64_t	c, last, at, n;

	if (len == 0 || w->populated == NULL)
		return;
	last = (off + len - 1) / WORKER_POPULATE_CHUNK;
	for (c = off / WORKER_POPULATE_CHUNK; c <= last; c++) {
		if (w->populated[c])
			continue;
		at = c * WORKER_POPULATE_CHUNK;
		n = w->desc.mem_bytes - at < WORKER_POPULATE_CHUNK ?
		    w->desc.mem_bytes - at : WORKER_POPULATE_CHUNK;
		(void)madvise(w->map + at, n, MADV_POPULATE_WRITE);
		w->populated[c] = 1;
	}
#else
	(void)w;
	(void)off;
	(void)len;
#endif
}

/* Until when resident rows are read in flight, not copied (ms). */
static uint64_t	worker_map_off_until;
static unsigned	worker_map_slow;	/* copies in a row that waited */

/*
 * Rows in a row that waited: the kernel is still reading them.  One alone
 * is a worker the scheduler stopped (3 processes on 2 CPUs), which read
 * in flight for a second cost the cached case 0.73 -> 0.55 of the gather
 * limit.
 */
bool
worker_copy_timed(size_t len, uint64_t us)
{
	uint64_t	limit = WORKER_MAP_WAIT_US +
			    (uint64_t)len * WORKER_MAP_WAIT_US_MIB / (1u << 20);

	if (us <= limit) {
		worker_map_slow = 0;
		return (false);
	}
	if (++worker_map_slow < WORKER_MAP_WAIT_ROWS)
		return (false);
	worker_map_slow = 0;
	worker_map_off_until = clock_now_ms() + WORKER_MAP_OFF_MS;
	return (true);
}

/*
 * Whether the pages of @p (@len bytes of a mapping) are all in memory:
 * a mincore() of at most WORKER_MINCORE_PAGES pages at a time.
 */
static bool
worker_in_memory(const uint8_t *p, size_t len)
{
	unsigned char	vec[WORKER_MINCORE_PAGES];
	uintptr_t	at, end;
	size_t		pages, i;

	if (worker_page == 0)
		worker_page = sysconf(_SC_PAGESIZE);
	at = (uintptr_t)p & ~(uintptr_t)(worker_page - 1);
	end = (uintptr_t)p + len;
	while (at < end) {
		pages = (end - at + worker_page - 1) / worker_page;
		if (pages > WORKER_MINCORE_PAGES)
			pages = WORKER_MINCORE_PAGES;
		if (mincore((void *)at, pages * worker_page, vec) == -1)
			return (false);
		for (i = 0; i < pages; i++)
			if ((vec[i] & 1) == 0)
				return (false);
		at += pages * worker_page;
	}
	return (true);
}

/*
 * Once WORKER_RESIDENT_TRUST rows in a row were in memory, only one in
 * WORKER_RESIDENT_SAMPLE is checked, until one is not: a mincore() a row
 * was 15 % of the workers' time with every row cached (perf, issue 35),
 * and one in 16 still 2.9 % (round eight): a row evicted since is found
 * 64 rows later at most.
 * A row taken for resident that is not is still copied right, by a fault
 * that reads it, as before reads in flight.  The run is a dataset's: one
 * cached says nothing of another just opened (a few kept, the oldest
 * given up).
 */
bool
worker_resident(const void *owner, const uint8_t *p, size_t len)
{
	static struct {
		const void	*owner;
		uint64_t	 streak, skipped;
	}		runs[4];
	static unsigned	next;
	uint64_t	*streak;
	size_t		i;

	for (i = 0; i < 4 && runs[i].owner != owner; i++)
		;
	if (i == 4) {
		i = next++ % 4;
		runs[i].owner = owner;
		runs[i].streak = 0;
	}
	streak = &runs[i].streak;
	if (*streak >= WORKER_RESIDENT_TRUST &&
	    ++runs[i].skipped % WORKER_RESIDENT_SAMPLE != 0)
		return (true);
	worker_resident_asked++;
	if (!worker_in_memory(p, len)) {
		*streak = 0;
		return (false);
	}
	(*streak)++;
	return (true);
}

/*
 * A job's failure, kept for the lowest row that failed: with reads in
 * flight, rows complete out of order, and DONE names the one a row-by-row
 * read would have (the same bad_index whatever the store's timing).
 */
static void
worker_fail(struct worker_msg_done *d, uint64_t *fail_row, int *rc,
    uint64_t row, int why, uint64_t index, int64_t label, const char *text)
{
	if (row >= *fail_row)
		return;
	*fail_row = row;
	*rc = why;
	d->bad_index = index;
	d->bad_label = label;
	snprintf(d->text, WORKER_REASON_LEN, "%s", text != NULL ? text : "");
}

/*
 * Store row @r's @label in the slot's label table, after checking it.  A
 * client's labels are checked here, row by row, not at Attach: no class
 * number is negative or past uint32, nor past int32 when the ring's
 * labels are int32 (never wrapped into another class).
 */
static bool
worker_label(uint8_t *base, const struct ring_layout *l, uint64_t r,
    int64_t label)
{
	if (label < 0 || label >= UINT32_MAX)
		return (false);
	if (l->label_dtype == INFEED_DTYPE_INT64)
		((int64_t *)(void *)(base + l->labels_offset))[r] = label;
	else if (label > INT32_MAX)
		return (false);
	else
		((int32_t *)(void *)(base + l->labels_offset))[r] =
		    (int32_t)label;
	return (true);
}

/* Take a free in-flight entry (there is one: io_batch_room() said so). */
static struct worker_fl *
worker_fl_take(void)
{
	struct worker_fl	*e = &worker_fl[worker_free[--worker_nfree]];

	e->used = true;
	return (e);
}

/* Give an entry back, closing its image file. */
static void
worker_fl_put(struct worker_fl *e)
{
	if (e->owned)
		close(e->fd);
	if (e->tmp != NULL)
		e->w->tmp_used &= ~((uint64_t)1 << e->tmp_slot);
	e->tmp = NULL;
	e->owned = false;
	e->used = false;
	worker_fl_bytes -= e->bytes;
	e->bytes = 0;
	worker_free[worker_nfree++] = (unsigned)(e - worker_fl);
	if (e->enc.cap > WORKER_ENC_KEEP)
		dataset_buf_free(&e->enc);
}

/* Drop the reads in flight (after an error or a SIGBUS): wait them out. */
static void
worker_inflight_drop(void)
{
	unsigned	i;

	io_batch_drain(worker_io);
	for (i = 0; i < IO_BATCH_DEPTH; i++) {
		if (worker_fl[i].used)
			worker_fl_put(&worker_fl[i]);
	}
}

/* The context of one job's rows, for the completion of each read. */
struct worker_rowjob {
	struct wring			*w;
	struct transform_work		*tw;
	const struct dataset		*ds;
	const struct worker_msg_job	*job;
	struct worker_msg_done		*d;
	uint8_t				*base;
	uint64_t			 fail_row;
	int				 rc;
	/*
	 * When the row copied before this one ended (us), or 0: the clock is
	 * read once a copied row, not three times (1.1 % of a worker's time
	 * with every row cached, perf, issue 35).
	 */
	uint64_t			 copied_us;
};

/*
 * Image row @r: decode it from the bytes its read brought (given to the
 * dataset, dataset_encoded_give()), else read it alone.
 */
static void
worker_image_row(struct worker_rowjob *j, uint64_t r, uint64_t idx)
{
	const struct ring_layout *l = &j->w->desc.layout;
	const struct transform	*tf = &j->w->desc.transform;
	int64_t			 label;
	char			 text[WORKER_REASON_LEN];

	worker_beat_row(r);
	text[0] = '\0';
	if (transform_image_row(tf, j->tw, j->ds, j->job->epoch, idx,
	    j->base + l->data_offset + r * tf->out_sample_bytes, &label,
	    &j->d->bytes, &j->d->replaced, text, sizeof(text)) == -1)
		worker_fail(j->d, &j->fail_row, &j->rc, r, WORKER_READ_ERROR,
		    idx, 0, text);
	else if (!worker_label(j->base, l, r, label))
		worker_fail(j->d, &j->fail_row, &j->rc, r, WORKER_LABEL_RANGE,
		    idx, label, NULL);
}

/* Take one completed read and finish its row. */
static void
worker_complete(struct worker_rowjob *j)
{
	const struct transform	*tf = &j->w->desc.transform;
	const struct ring_layout *l = &j->w->desc.layout;
	struct worker_fl	*e;
	uint64_t		 tag;
	ssize_t			 res;
	char			 text[WORKER_REASON_LEN];

	if (io_batch_wait(worker_io, &tag, &res) == -1)
		return;
	e = &worker_fl[tag];
	if (j->ds->encoded) {
		if (res == (ssize_t)e->len) {
			e->enc.len = e->len;
			dataset_encoded_give(j->ds, e->index, &e->enc,
			    e->label);
		}
		/* Else read again, alone, for the reason (or a replacement). */
		if (e->owned) {
			close(e->fd);
			e->owned = false;
		}
		worker_image_row(j, e->row, e->index);
		dataset_encoded_give(NULL, 0, NULL, 0);
	} else if (res != (ssize_t)e->len) {
		if (res >= 0)
			(void)dataset_map_short(e->map, e->end);
		else
			errno = (int)-res;
		if (errno == EIO)	/* a file cut short */
			dataset_short_why(text, sizeof(text));
		else
			snprintf(text, sizeof(text), "cannot read it (%s)",
			    strerror(errno));
		worker_fail(j->d, &j->fail_row, &j->rc, e->row,
		    WORKER_READ_ERROR, e->index, 0, text);
	} else {
		worker_beat_row(e->row);
		if (tf->to_float32)
			transform_row(tf, j->w->lut, e->tmp, (float *)(void *)
			    (j->base + l->data_offset + e->row *
			    tf->out_sample_bytes));
		j->d->bytes += e->len;
	}
	worker_fl_put(e);
}

/*
 * Row @r (dataset index @idx) of an array dataset: copied from the file's
 * mapping when its pages are in memory (the fastest there is: no system
 * call), else read in flight into the slot (one copy, by the kernel, from
 * the page cache or the device) or into a buffer for conversion.
 */
static void
worker_array_row(struct worker_rowjob *j, uint64_t r, uint64_t idx, bool stream)
{
	const struct transform	*tf = &j->w->desc.transform;
	const struct ring_layout *l = &j->w->desc.layout;
	struct dataset_loc	 loc;
	struct worker_fl	*e;
	uint8_t			*dst = j->base + l->data_offset + r *
				    tf->out_sample_bytes;
	int64_t			 label;
	char			 text[WORKER_REASON_LEN];

	if (dataset_locate(j->ds, idx, &loc, &label) == -1) {
		if (errno == EIO)	/* a file cut short */
			dataset_short_why(text, sizeof(text));
		else
			text[0] = '\0';
		worker_fail(j->d, &j->fail_row, &j->rc, r, WORKER_READ_ERROR,
		    idx, 0, text);
		return;
	}
	if (!worker_label(j->base, l, r, label)) {
		worker_fail(j->d, &j->fail_row, &j->rc, r, WORKER_LABEL_RANGE,
		    idx, label, NULL);
		return;
	}
	if (j->copied_us == 0)
		j->copied_us = clock_now_us();
	if (loc.mapped != NULL && (loc.fd == -1 ||
	    (worker_map_off_until < j->copied_us / 1000 &&
	    worker_resident(j->ds, loc.mapped, loc.len)))) {
		/* Since the last row's copy: its locate and label too. */
		uint64_t	t0 = j->copied_us;

		worker_beat_row(r);
		worker_copying = idx;
		if (tf->to_float32)
			transform_row(tf, j->w->lut, loc.mapped,
			    (float *)(void *)dst);
		else
			copy_row(dst, loc.mapped, loc.len, stream);
		j->d->bytes += loc.len;
		j->copied_us = clock_now_us();
		if (loc.fd == -1)
			worker_map_slow = 0;
		else
			(void)worker_copy_timed(loc.len, j->copied_us - t0);
		return;
	}
	j->copied_us = 0;	/* a read may wait below: the clock is stale */
	while (io_batch_room(worker_io) == 0 || (tf->to_float32 &&
	    __builtin_popcountll(j->w->tmp_used) >= (int)j->w->ntmp))
		worker_complete(j);
	e = worker_fl_take();
	e->row = r;
	e->index = idx;
	e->len = loc.len;
	e->map = loc.map;
	e->end = loc.off + loc.len;
	e->fd = loc.fd;
	e->owned = false;
	e->label = label;
	if (tf->to_float32) {
		e->tmp_slot = (unsigned)__builtin_ctzll(~j->w->tmp_used);
		j->w->tmp_used |= (uint64_t)1 << e->tmp_slot;
		e->tmp = j->w->tmp + (size_t)e->tmp_slot * tf->in_sample_bytes;
		e->w = j->w;
		io_batch_read(worker_io, loc.fd, e->tmp, loc.len, loc.off,
		    (uint64_t)(e - worker_fl));
	} else
		io_batch_read(worker_io, loc.fd, dst, loc.len, loc.off,
		    (uint64_t)(e - worker_fl));
}

/* Row @r of an image dataset: its file's read put in flight. */
static void
worker_encoded_row(struct worker_rowjob *j, uint64_t r, uint64_t idx)
{
	struct dataset_loc	 loc;
	struct worker_fl	*e;
	int64_t			 label;

	if (dataset_locate(j->ds, idx, &loc, &label) == -1) {
		/* Alone: the reason, or a replacement (bad_samples). */
		worker_image_row(j, r, idx);
		return;
	}
	while (io_batch_room(worker_io) == 0 || (worker_fl_bytes + loc.len >
	    WORKER_IO_BYTES && io_batch_inflight(worker_io) > 0))
		worker_complete(j);
	e = worker_fl_take();
	if (dataset_buf_reserve(&e->enc, loc.len) != 0) {
		if (loc.owned)
			close(loc.fd);
		worker_fl_put(e);
		worker_image_row(j, r, idx);
		return;
	}
	e->row = r;
	e->index = idx;
	e->len = loc.len;
	e->map = NULL;
	e->fd = loc.fd;
	e->owned = loc.owned;
	e->label = label;
	e->bytes = loc.len;
	worker_fl_bytes += loc.len;
	io_batch_read(worker_io, loc.fd, e->enc.p, loc.len, loc.off,
	    (uint64_t)(e - worker_fl));
}

/*
 * Where sample @i lies, for reading it ahead: 1 with *@loc, 0 for a file
 * opened for its read (an image file: closed again, nothing to ask), -1
 * when it cannot be found (its job says why).
 */
static int
worker_ahead_locate(const struct dataset *ds, uint64_t i,
    struct dataset_loc *loc)
{
	int64_t	label;

	if (i >= ds->samples || dataset_locate(ds, i, loc, &label) == -1)
		return (-1);
	if (loc->owned) {
		close(loc->fd);
		return (0);
	}
	return (1);
}

/*
 * Whether sample @i needs no reading ahead: in memory, an image file
 * (opened for its read: none of them), or not to be found (its job says).
 */
static bool
worker_ahead_needless(const struct dataset *ds, uint64_t i)
{
	struct dataset_loc	loc;

	if (worker_ahead_locate(ds, i, &loc) != 1)
		return (true);
	return (loc.fd == -1 || (loc.mapped != NULL &&
	    worker_resident(ds, loc.mapped, loc.len)));
}

/*
 * Ask the kernel for sample @i's bytes, not waiting for them.  Return:
 * false when its file is opened for its read (an image file: nothing to
 * ask, see worker_read_ahead()).
 */
static bool
worker_read_ahead_one(const struct dataset *ds, uint64_t i)
{
	struct dataset_loc	loc;
	int			found = worker_ahead_locate(ds, i, &loc);

	if (found == 1 && loc.fd != -1)
		(void)posix_fadvise(loc.fd, (off_t)loc.off, (off_t)loc.len,
		    POSIX_FADV_WILLNEED);
	return (found != 0);
}

/*
 * Whether sample @i, asked of the kernel (worker_read_ahead_one()), is in
 * memory now: its read left the store.  False where that cannot be seen
 * (no mapping, an image file): it is then counted by nothing.
 */
static bool
worker_ahead_landed(const struct dataset *ds, uint64_t i)
{
	struct dataset_loc	loc;
	int			found = worker_ahead_locate(ds, i, &loc);

	if (found != 1)
		return (found == -1);
	return (loc.mapped != NULL && worker_in_memory(loc.mapped, loc.len));
}

static int	 worker_job_ok(const struct wring *w,
		    const struct worker_msg_job *job, size_t n);

/*
 * The rows of the JOB waiting in the socket behind the running one
 * (the pool's pool_dispatch_behind()), looked at, not taken: its indices
 * and *@n, when it is a job of ring @w that fits it; else NULL.
 */
static const uint64_t *
worker_next_rows(const struct wring *w, uint64_t *n)
{
	const struct worker_msg_job	*job = worker_peeked;
	ssize_t				 got;

	if (worker_sock == -1)
		return (NULL);
	got = recv(worker_sock, worker_peeked, worker_peeked_len, MSG_PEEK |
	    MSG_DONTWAIT);
	if (got < (ssize_t)sizeof(*job) || job->hdr.len != (size_t)got ||
	    job->hdr.type != WORKER_MSG_JOB || job->ring_id !=
	    w->desc.ring_id || !worker_job_ok(w, job, (size_t)got))
		return (NULL);
	*n = job->row_end - job->row_begin;
	return (job->indices);
}

/*
 * Ask the kernel to read the bytes of samples @idx (@n, a later step's:
 * pool_read_ahead()) into the page cache, without waiting for them
 * (posix_fadvise WILLNEED): when their job comes, its reads find them
 * there, or already on their way.  When its first WORKER_AHEAD_PROBE
 * rows are in memory the dataset is taken to be, and nothing is asked
 * (a few mincore(2) a job, not one a row).
 * Only in the files the worker keeps open (arrays, tar shards): an image
 * file is opened for its read, and a FUSE store forgets a file's cached
 * pages when it is opened again (without keep_cache), so its bytes would
 * be read twice.  A sample that cannot be located is left to its job.
 */
static void
worker_read_ahead(const struct dataset *ds, const uint64_t *idx, uint32_t n)
{
	uint32_t	i;

	/* The first rows needless (a few syscalls a job): all are. */
	for (i = 0; i < n && i < WORKER_AHEAD_PROBE; i++)
		if (!worker_ahead_needless(ds, idx[i]))
			break;
	if (i == n || i == WORKER_AHEAD_PROBE)
		return;
	for (i = 0; i < n; i++)
		worker_read_ahead_one(ds, idx[i]);
}

/*
 * Read the rows of @job, whose dataset indices are @indices (from the
 * pool, never from the ring), into its slot, and say so in DONE @d.  The
 * reads of the rows go in flight together (io-batch.h), each row copied,
 * converted or decoded as its read completes; a dataset whose reader
 * cannot say where its samples are (synthetic) is read row by row.
 * Return: WORKER_OK, or WORKER_READ_ERROR with d->bad_index (and its
 * reason in d->text), or WORKER_LABEL_RANGE with d->bad_index and
 * d->bad_label (a label that is no class number, or outside int32 when
 * the ring's labels are int32); of the lowest row that failed.
 */
static int
worker_rows(struct wring *w, struct transform_work *tw,
    const struct dataset *ds, const struct worker_msg_job *job,
    struct worker_msg_done *d, const uint64_t *indices)
{
	const struct ring_layout *l = &w->desc.layout;
	const struct transform	*tf = &w->desc.transform;
	struct worker_rowjob	 j;
	uint8_t			*dst;
	const uint64_t		*next = NULL;
	int64_t			 label;
	uint64_t		 r, idx, nnext = 0, asked = 0, owed = 0, landed = 0;
	bool			 inflight = dataset_locates(ds), peek = inflight;
	/* A slot past the cache is written around it (copy.h). */
	bool			 stream = !tf->to_float32 && l->row_bytes != 0 &&
				    copy_streams(l->row_bytes, (l->labels_offset -
				    l->data_offset) / l->row_bytes);

	j.w = w;
	j.tw = tw;
	j.ds = ds;
	j.job = job;
	j.d = d;
	j.base = w->map + (uint64_t)job->slot * l->slot_bytes;
	j.fail_row = UINT64_MAX;
	j.rc = WORKER_OK;
	j.copied_us = 0;
	worker_populate(w, (uint64_t)job->slot * l->slot_bytes + l->data_offset +
	    job->row_begin * tf->out_sample_bytes, (job->row_end - job->row_begin) *
	    tf->out_sample_bytes);
	memcpy(j.base + l->indices_offset + job->row_begin * sizeof(uint64_t),
	    indices, (job->row_end - job->row_begin) * sizeof(uint64_t));
	d->bytes = 0;
	d->replaced = 0;
	d->text[0] = '\0';
	/*
	 * A remote reader's rows download while the rows before them decode:
	 * the job's own (its first rows are read ahead by nothing else) and
	 * the later steps'.
	 */
	if (!inflight)
		dataset_read_ahead(ds, indices, (job->row_end -
		    job->row_begin) + job->ahead);
	for (r = job->row_begin; r < job->row_end && j.rc == WORKER_OK; r++) {
		idx = indices[r - job->row_begin];
		if (idx >= ds->samples) {
			worker_fail(d, &j.fail_row, &j.rc, r,
			    WORKER_READ_ERROR, idx, 0, NULL);
			break;
		}
		if (!inflight) {
			worker_beat_row(r);
			dst = j.base + l->data_offset + r *
			    tf->out_sample_bytes;
			worker_copying = idx;
			if (tf->image) {
				worker_image_row(&j, r, idx);
				continue;
			}
			if (dataset_read_at(ds, idx, tf->seed, job->epoch,
			    tf->to_float32 ? w->tmp : dst, &label,
			    stream) == -1) {
				worker_fail(d, &j.fail_row, &j.rc, r,
				    WORKER_READ_ERROR, idx, 0, NULL);
				if (errno == EIO)	/* a file cut short */
					dataset_short_why(d->text,
					    WORKER_REASON_LEN);
				break;
			}
			if (tf->to_float32)
				transform_row(tf, w->lut, w->tmp,
				    (float *)(void *)dst);
			d->bytes += ds->sample_bytes;
			if (!worker_label(j.base, l, r, label))
				worker_fail(d, &j.fail_row, &j.rc, r,
				    WORKER_LABEL_RANGE, idx, label, NULL);
		} else if (tf->image)
			worker_encoded_row(&j, r, idx);
		else
			worker_array_row(&j, r, idx, stream);
	}
	/* While the job's own reads wait: the later steps' rows. */
	if (inflight)
		worker_read_ahead(ds, indices + (job->row_end - job->row_begin),
		    job->ahead);
	/*
	 * The rest as it comes, after a failure too: a row before the one
	 * that failed may fail as well, and DONE names the lowest.  For each
	 * that completes, a row of the next job (behind this one in the
	 * socket, pool_dispatch_behind()) is asked of the kernel: through the
	 * job's tail the store keeps as many reads in flight, where it had
	 * fewer and fewer until the last was in, then none until the next
	 * job's first; and no more than the job's own (the depth is the
	 * job's, as fio's is its iodepth).  A row of the next job already
	 * in memory (oldest asked first) frees its place too: through a tail
	 * longer than the store's latency the rows asked early have landed,
	 * and without it the depth dipped by them until the next job began.
	 */
	while (io_batch_inflight(worker_io) > 0) {
		worker_complete(&j);
		owed++;
		/* Looked for until it comes (the pool sends it on a DONE). */
		if (next == NULL && peek)
			next = worker_next_rows(w, &nnext);
		for (; next != NULL && landed < asked &&
		    worker_ahead_landed(ds, next[landed]); landed++)
			owed++;
		for (; next != NULL && owed > 0 && asked < nnext; owed--)
			if (!worker_read_ahead_one(ds, next[asked++]))
				next = NULL, peek = false;
	}
	return (j.rc);
}

/*
 * worker_rows() with SIGBUS caught: a file cut while a row was copied out
 * of its mapping makes that row a read error with the reason, and ends
 * the job (*@faulted).  *@twp is made again after a fault (a decoder may
 * have been left half way).
 */
static int
worker_rows_guarded(struct wring *w, struct transform_work **twp,
    const struct dataset *ds, const struct worker_msg_job *job,
    struct worker_msg_done *d, const uint64_t *indices,
    uint64_t image_memory_max, bool *faulted)
{
	int		rc;
	uint64_t	size;

	*faulted = false;
	/* No mask to save (a syscall a job): SIGBUS is never blocked. */
	if (sigsetjmp(worker_bus_jb, 0) != 0) {
		*faulted = true;
		/* Nothing lands in the slot after DONE. */
		worker_inflight_drop();
		d->bad_index = worker_copying;
		if (dataset_job_end(&size) && size != UINT64_MAX)
			snprintf(d->text, WORKER_REASON_LEN, "the file was "
			    "truncated to %" PRIu64 " bytes while the session "
			    "read it; sample %" PRIu64 " is beyond it", size,
			    d->bad_index);
		else
			snprintf(d->text, WORKER_REASON_LEN, "reading it "
			    "through its mapping raised SIGBUS (the file "
			    "changed while the session read it, or an I/O "
			    "error)");
		transform_work_free(*twp);
		*twp = transform_work_new(image_memory_max);
		copy_fence();
		return (WORKER_READ_ERROR);
	}
	worker_bus_armed = 1;
	rc = worker_rows(w, *twp, ds, job, d, indices);
	worker_bus_armed = 0;
	/* The rows' streaming stores land before DONE says they are there. */
	copy_fence();
	return (rc);
}

/*
 * Fill the rows of @job into DONE @d; an enum worker_result, as worker_rows().  The
 * files' sizes are checked once before the rows and once after: if a file
 * shrank (or a client's changed) meanwhile, the rows are read again, so a
 * row it cut off fails instead of going out as the zeros of a truncated
 * page, and rows of a file written again are all of its new content.
 */
static int
worker_fill(struct wring *w, struct transform_work **twp,
    const struct dataset *ds, const struct worker_msg_job *job,
    struct worker_msg_done *d, const uint64_t *indices,
    uint64_t image_memory_max)
{
	bool	faulted;
	int	rc;

	worker_beat->job = job->job_id;
	worker_beat_row(job->row_begin);
	dataset_job_begin();
	rc = worker_rows_guarded(w, twp, ds, job, d, indices,
	    image_memory_max, &faulted);
	if (faulted)
		return (rc);
	if (dataset_job_end(NULL) && rc == WORKER_OK) {
		dataset_job_begin();
		rc = worker_rows_guarded(w, twp, ds, job, d, indices,
		    image_memory_max, &faulted);
		if (!faulted)
			(void)dataset_job_end(NULL);
	}
	return (rc);
}

/* Whether a JOB fits its ring: a slot, rows and indices that exist. */
static int
worker_job_ok(const struct wring *w, const struct worker_msg_job *job, size_t n)
{
	const struct ring_layout *l = &w->desc.layout;
	uint64_t		 rows;

	if (job->slot >= l->slots || job->row_begin >= job->row_end ||
	    job->row_end - job->row_begin > WORKER_MAX_JOB_ROWS ||
	    job->ahead > WORKER_MAX_JOB_AHEAD)
		return (0);
	rows = job->row_end - job->row_begin;
	return (n == sizeof(*job) + (rows + job->ahead) * sizeof(uint64_t) &&
	    job->row_end * w->desc.transform.out_sample_bytes <=
	    l->labels_offset);
}

/* Find a mapped ring. */
static struct wring *
worker_find(struct wring *w, size_t n, uint64_t id)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (w[i].used && w[i].desc.ring_id == id)
			return (&w[i]);
	}
	return (NULL);
}

/*
 * Open the client's files that came with a ring: the same checks as the
 * daemon made, and the dataset must still be the one it checked (the
 * sizes the ring was laid out for).  NULL when not, with *@why: its jobs
 * then fail with that reason.
 */
static struct dataset *
worker_files(const struct worker_ring *desc, const int *fds, size_t nfds,
    char **why)
{
	const struct transform	*tf = &desc->transform;
	struct dataset		*ds;
	char			*cause = NULL;
	size_t			 i;

	if (nfds != desc->nfiles) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		log_warnx("ring %llu: %zu file descriptors where %u were "
		    "expected", (unsigned long long)desc->ring_id, nfds,
		    desc->nfiles);
		*why = xstrdup("the worker was not sent the files");
		return (NULL);
	}
	ds = dataset_open_files("client files", &desc->files, fds[0],
	    nfds > 1 ? fds[1] : -1, true, NULL, &cause);
	if (ds == NULL) {
		log_warnx("ring %llu: %s", (unsigned long long)desc->ring_id,
		    cause ? cause : "cannot open the client's files");
		*why = xasprintf("the files changed since the session began "
		    "(%s)", cause ? cause : "they cannot be opened");
		free(cause);
		return (NULL);
	}
	if (ds->sample_bytes != tf->in_sample_bytes ||
	    (uint32_t)ds->dtype != tf->in_dtype) {
		log_warnx("ring %llu: the client's files changed since they "
		    "were checked", (unsigned long long)desc->ring_id);
		*why = xasprintf("the files changed since the session began: "
		    "samples of %llu bytes of %s now, %llu bytes of %s then",
		    (unsigned long long)ds->sample_bytes, dtype_name(ds->dtype),
		    (unsigned long long)tf->in_sample_bytes,
		    dtype_name((enum infeed_dtype)tf->in_dtype));
		dataset_free(ds);
		return (NULL);
	}
	return (ds);
}

/*
 * The mapping of memory @id of @bytes from @fd (closed), made the first
 * time only and kept: its pages are mapped once for all the rings the
 * daemon makes on it.  NULL (errno set) when it cannot be mapped.
 */
static uint8_t *
worker_mem(struct wmem **mems, size_t *n, uint64_t id, uint64_t bytes, int fd,
    uint8_t **populated)
{
	struct wmem	*m;
	size_t		 i;

	for (i = 0; i < *n; i++) {
		if ((*mems)[i].map != NULL && (*mems)[i].id == id &&
		    (*mems)[i].bytes == bytes) {
			close(fd);
			*populated = (*mems)[i].populated;
			return ((*mems)[i].map);
		}
	}
	for (i = 0; i < *n && (*mems)[i].map != NULL; i++)
		;
	if (i == *n)
		*mems = xreallocarray(*mems, ++*n, sizeof(**mems));
	m = &(*mems)[i];
	m->id = id;
	m->bytes = bytes;
	m->map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m->map == MAP_FAILED) {
		m->map = NULL;
		return (NULL);
	}
	ring_mem_advise(m->map, bytes);
	m->populated = xcalloc((size_t)((bytes + WORKER_POPULATE_CHUNK - 1) /
	    WORKER_POPULATE_CHUNK), 1);
	*populated = m->populated;
	return (m->map);
}

/* FORGET: memory @id is not kept any more; a ring on it is gone already. */
static void
worker_forget(struct wmem *mems, size_t n, uint64_t id)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (mems[i].map != NULL && mems[i].id == id) {
			munmap(mems[i].map, mems[i].bytes);
			mems[i].map = NULL;
			free(mems[i].populated);
			mems[i].populated = NULL;
		}
	}
}

/*
 * The catalogue dataset of ring @desc, the daemon's: the one at its index
 * or of its name, of as many samples of as many bytes.  NULL when there
 * is none, with *@why.
 */
static const struct dataset *
worker_dataset(const struct catalogue *cat, const struct worker_ring *desc,
    char **why)
{
	const struct dataset	*ds = NULL;
	char			 name[sizeof(desc->dataset)];
	size_t			 i;

	memcpy(name, desc->dataset, sizeof(name));
	name[sizeof(name) - 1] = '\0';
	i = desc->dataset_index;
	if (i < cat->ndatasets && cat->datasets[i] != NULL &&
	    strcmp(cat->datasets[i]->name, name) == 0)
		ds = cat->datasets[i];
	else
		ds = catalogue_find(cat, name, &i);
	if (ds != NULL && ds->samples == desc->samples &&
	    ds->sample_bytes == desc->sample_bytes)
		return (ds);
	log_warnx("ring %llu: the workers' dataset '%s' is not the daemon's",
	    (unsigned long long)desc->ring_id, name);
	*why = xasprintf("the workers' dataset '%s' is not the daemon's (%llu "
	    "samples of %llu bytes): it changed on disk, or could not be "
	    "opened, when the workers' fork server opened the catalogue "
	    "infeedd sent it; reload infeedd again", name,
	    (unsigned long long)desc->samples,
	    (unsigned long long)desc->sample_bytes);
	return (NULL);
}

/* Take a ring the pool sent, in a free entry of *@w. */
static void
worker_map(const struct catalogue *cat, struct wring **w, size_t *n,
    struct wmem **mems, size_t *nmems, const struct worker_msg_map *m,
    const int *fds, size_t nfds)
{
	struct wring	*r;
	char		*why;
	size_t		 i;

	for (i = 0; i < *n && (*w)[i].used; i++)
		;
	if (i == *n) {
		*w = xreallocarray(*w, ++*n, sizeof(**w));
		memset(&(*w)[i], 0, sizeof((*w)[i]));
	}
	r = &(*w)[i];
	r->used = true;
	r->desc = m->ring;
	if (m->ring.layout.ring_bytes > m->ring.mem_bytes)
		fatalx("worker: a ring of %llu bytes on %llu bytes of memory",
		    (unsigned long long)m->ring.layout.ring_bytes,
		    (unsigned long long)m->ring.mem_bytes);
	r->populated = NULL;
	r->map = worker_mem(mems, nmems, m->ring.mem_id, m->ring.mem_bytes,
	    fds[0], &r->populated);
	if (r->map == NULL)
		r->why = xasprintf("a worker cannot map the step ring (%llu "
		    "bytes): %s", (unsigned long long)m->ring.mem_bytes,
		    strerror(errno));
	if (m->ring.nfiles > 0)
		r->files = worker_files(&m->ring, fds + 1, nfds - 1,
		    &r->files_why);
	else {
		for (i = 1; i < nfds; i++)
			close(fds[i]);
		if ((r->ds = worker_dataset(cat, &m->ring, &why)) == NULL &&
		    r->why == NULL)
			r->why = why;
		else if (r->ds == NULL)
			free(why);
	}
	if (m->ring.transform.to_float32) {	/* arrays converted */
		r->ntmp = (unsigned)(WORKER_IO_BYTES /
		    m->ring.transform.in_sample_bytes);
		if (r->ntmp == 0)
			r->ntmp = 1;
		if (r->ntmp > IO_BATCH_DEPTH)
			r->ntmp = IO_BATCH_DEPTH;
		r->tmp = xreallocarray(NULL, r->ntmp,
		    m->ring.transform.in_sample_bytes);
	}
	if (transform_needs_lut(&m->ring.transform) &&
	    (r->lut = transform_lut_new(&m->ring.transform)) == NULL &&
	    r->why == NULL)
		r->why = xasprintf("a worker has no memory for a lookup "
		    "table: %s", strerror(errno));
}

/* Drop a ring; its memory stays mapped until FORGET. */
static void
worker_unmap(struct wring *w)
{
	dataset_free(w->files);
	free(w->files_why);
	free(w->why);
	free(w->tmp);
	free(w->lut);
	memset(w, 0, sizeof(*w));
}

/*
 * @job (@n bytes, with its @indices): fill its rows and make @d its DONE.
 * A ring the worker could not take fails every job, with why.  Return:
 * @d's length.
 */
static size_t
worker_job(const struct catalogue *cat, struct wring *rings, size_t nrings,
    struct transform_work **twp, const struct worker_msg_job *job, size_t n,
    struct worker_msg_done *d, uint64_t image_memory_max)
{
	const struct dataset	*ds = NULL;
	struct wring		*w;
	char			*where;

	memset(d, 0, sizeof(*d));
	w = worker_find(rings, nrings, job->ring_id);
	d->job_id = job->job_id;
	d->error = WORKER_READ_ERROR;
	d->bad_index = job->indices[0];
	d->text[0] = '\0';
	if (w != NULL && w->why != NULL) {
		d->error = WORKER_INTERNAL;
		snprintf(d->text, WORKER_REASON_LEN, "%s", w->why);
	} else if (w != NULL && w->desc.nfiles > 0) {
		ds = w->files;
		if (ds == NULL && w->files_why != NULL)
			snprintf(d->text, WORKER_REASON_LEN, "%s",
			    w->files_why);
	} else if (w != NULL)
		ds = w->ds;
	if (ds != NULL && worker_job_ok(w, job, n))
		d->error = worker_fill(w, twp, ds, job, d, job->indices,
		    image_memory_max);
	/* The where after the reason; named here: no one waits on a tar's. */
	where = d->text + strlen(d->text) + 1;
	where[0] = '\0';
	if (ds != NULL && d->error == WORKER_READ_ERROR && ds->encoded)
		(void)dataset_sample_where(ds, d->bad_index, where,
		    WORKER_WHERE_LEN);
	return (sizeof(*d) + (size_t)(where - d->text) + strlen(where) + 1);
}

/*
 * Whether @h (@n bytes, with @nfds descriptors) is a message the pool
 * sends, whole: its type's payload, descriptors with a MAP alone.
 */
static bool
worker_msg_whole(const struct transport_hdr *h, size_t n, size_t nfds)
{
	switch (h->type) {
	case WORKER_MSG_MAP:
		return (n == sizeof(struct worker_msg_map) && nfds > 0);
	case WORKER_MSG_UNMAP:
		return (n == sizeof(struct worker_msg_unmap) && nfds == 0);
	case WORKER_MSG_FORGET:
		return (n == sizeof(struct worker_msg_forget) && nfds == 0);
	case WORKER_MSG_JOB:
		/* Its rows are checked against its length (worker_job_ok()). */
		return (n >= sizeof(struct worker_msg_job) +
		    sizeof(uint64_t) && nfds == 0);
	default:
		return (false);
	}
}

/* Whether a message from the pool is waiting (or the pool is gone). */
static bool
worker_message_waits(const struct transport *t)
{
	struct pollfd	pfd = { transport_fd(t), POLLIN, 0 };

	return (poll(&pfd, 1, 0) != 0);
}

/* The worker process: serve jobs until the pool goes away. */
void
worker_main(const struct catalogue *cat, int sock, const sigset_t *mask,
    const struct worker_conf *wc)
{
	struct wring		*rings = NULL, *w;
	struct wmem		*mems = NULL;
	struct transform_work	*tw;
	struct sigaction	 sa;
	size_t			 nrings = 0, nmems = 0, len;
	struct transport_hdr	*mp;
	struct worker_msg_ready	 ready;
	struct worker_msg_done	*done;
	struct transport	*t;
	struct transport_conf	 tc = { .kind = TRANSPORT_PACKET };
	ssize_t			 n;
	size_t			 nfds, i, len_done;
	int			 fds[WORKER_MAX_FDS];
	uint64_t		 populate_max;
	bool			 populating = true;

	populate_max = worker_memory_max() / WORKER_POPULATE_SHARE;
	/* Sent again on each parent's death, the fork server's too. */
	worker_daemon = wc->daemon;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = worker_orphan_cb;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(WORKER_ORPHAN_SIGNAL, &sa, NULL);
	prctl(PR_SET_PDEATHSIG, WORKER_ORPHAN_SIGNAL);
	if (getppid() != wc->parent && getppid() != wc->daemon)
		_exit(0);	/* gone before the line above */
	/* What ps, top and perf show: a worker, not the fork server. */
	prctl(PR_SET_NAME, "infeedd-worker");
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = worker_bus_cb;
	sa.sa_flags = SA_NODEFER;	/* not blocked after the longjmp */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	worker_beat = wc->beat;
	sigprocmask(SIG_SETMASK, mask, NULL);
	log_init("infeedd-worker", 0);
	/* The longest message from the pool: a JOB of the most rows. */
	len = sizeof(struct worker_msg_job) + (WORKER_MAX_JOB_ROWS +
	    WORKER_MAX_JOB_AHEAD) * sizeof(uint64_t);
	mp = xcalloc(1, len);
	worker_peeked = xcalloc(1, len);
	worker_peeked_len = len;
	worker_sock = sock;
	done = xcalloc(1, WORKER_MAX_DONE);
	/* Its reads' ring (or threads), made before it says it is ready. */
	worker_page = sysconf(_SC_PAGESIZE);
	worker_io = io_batch_new(io_backend_chosen(), IO_BATCH_DEPTH);
	for (i = 0; i < IO_BATCH_DEPTH; i++)
		worker_free[worker_nfree++] = IO_BATCH_DEPTH - 1 - i;
	/* Blocking: a worker has nothing else to do meanwhile. */
	t = transport_new(NULL, sock, &tc);
	if (transport_send_typed(t, &ready, sizeof(ready), WORKER_MSG_READY,
	    NULL, 0) == -1)
		_exit(0);
	tw = transform_work_new(wc->image_memory_max);
	for (;;) {
		/*
		 * The datasets' pages, mapped a chunk at a time while no
		 * message waits, never faulted per job; but never before a
		 * job either (a session that starts with the daemon).
		 */
		while (populating && !worker_message_waits(t))
			populating = dataset_populate(populate_max,
			    WORKER_IDLE_POPULATE_CHUNK);
		n = transport_recv_typed(t, mp, len, fds, WORKER_MAX_FDS,
		    &nfds);
		/* The pool sends neither: a MAP cut short would lose a ring. */
		if (n == -1 && (errno == EPROTO || errno == EMSGSIZE))
			fatal("worker: a message from the pool came cut off "
			    "or with more than %d descriptors",
			    WORKER_MAX_FDS);
		if (n == -1 && errno == EBADMSG)
			continue;	/* its descriptors closed */
		if (n <= 0)
			_exit(0);
		if (!worker_msg_whole(mp, (size_t)n, nfds)) {
			for (i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		switch (mp->type) {
		case WORKER_MSG_MAP:
			worker_map(cat, &rings, &nrings, &mems, &nmems,
			    (void *)mp, fds, nfds);
			break;
		case WORKER_MSG_FORGET:
			worker_forget(mems, nmems,
			    ((struct worker_msg_forget *)mp)->mem_id);
			break;
		case WORKER_MSG_UNMAP:
			if ((w = worker_find(rings, nrings,
			    ((struct worker_msg_unmap *)mp)->ring_id)) != NULL)
				worker_unmap(w);
			break;
		case WORKER_MSG_JOB:
			len_done = worker_job(cat, rings, nrings, &tw,
			    (void *)mp, (size_t)n, done, wc->image_memory_max);
			if (transport_send_typed(t, done, len_done,
			    WORKER_MSG_DONE, NULL, 0) == -1)
				_exit(0);
			break;
		}
	}
}
