/* SPDX-License-Identifier: MIT */
/*
 * What every reader shares (see reader.h): the section's keys, messages
 * that name the dataset, numbers and shapes, read-only maps of files and
 * the checks that a file still holds a row, label scans, the raw and npy
 * readers' pair of files, a worker's buffer, and a dataset's release.
 * None of it knows a particular reader, prints or exits.
 */

#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy.h"
#include "number.h"
#include "reader.h"

static int	dataset_vcause(char **, const char *, const char *, va_list)
		    __attribute__((__format__(__printf__, 3, 0)));

/* Value of key in conf; a later line overrides an earlier one. */
const char *
dataset_conf_get(const struct dataset_conf *conf, const char *key)
{
	size_t	i;

	for (i = conf->nkv; i > 0; i--) {
		if (strcmp(conf->kv[i - 1].key, key) == 0)
			return (conf->kv[i - 1].value);
	}
	return (NULL);
}

/* Format "dataset 'NAME': " and a message into *cause. */
static int
dataset_vcause(char **cause, const char *name, const char *fmt, va_list ap)
{
	char	*msg;

	*cause = NULL;
	if (vasprintf(&msg, fmt, ap) == -1)
		return (-1);
	if (asprintf(cause, "dataset '%s': %s", name, msg) == -1)
		*cause = NULL;
	free(msg);
	return (-1);
}

/* Long opens' progress and stop (dataset_open_tick()): the loop stops,
 * a reload's thread opens; relaxed atomics, as nothing else hangs on them. */
static uint64_t	dataset_open_count;
static bool	dataset_open_stopping;

bool
dataset_open_tick(void)
{
	__atomic_fetch_add(&dataset_open_count, 1, __ATOMIC_RELAXED);
	return (!__atomic_load_n(&dataset_open_stopping, __ATOMIC_RELAXED));
}

void
dataset_open_stop(bool stop)
{
	__atomic_store_n(&dataset_open_stopping, stop, __ATOMIC_RELAXED);
}

uint64_t
dataset_open_ticks(void)
{
	return (__atomic_load_n(&dataset_open_count, __ATOMIC_RELAXED));
}

/* Set *cause to a message about ds. */
int
dataset_error(char **cause, const struct dataset *ds, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	dataset_vcause(cause, ds->name, fmt, ap);
	va_end(ap);
	return (-1);
}

/* The "shape" and "dtype" of a file of fixed records, into @ds. */
int
dataset_record_conf(struct dataset *ds, const struct dataset_conf *conf,
    char **cause)
{
	const char	*v, *errstr;

	if ((v = dataset_conf_need(ds, conf, "shape",
	    "the shape of one record, like 3,224,224", cause)) == NULL)
		return (-1);
	if (dataset_shape_parse(v, ds->shape, &ds->ndim, &errstr) != 0)
		return (dataset_error(cause, ds, "'shape = %s': %s", v,
		    errstr));
	if ((v = dataset_conf_need(ds, conf, "dtype", "the element type: "
	    "uint8, int32, int64, float16, float32 or float64",
	    cause)) == NULL)
		return (-1);
	if (dtype_parse(v, &ds->dtype) != 0)
		return (dataset_error(cause, ds, "'dtype = %s' is not a type; "
		    "use uint8, int32, int64, float16, float32 or float64", v));
	return (0);
}

/* Value of a key the reader cannot do without. */
const char *
dataset_conf_need(const struct dataset *ds, const struct dataset_conf *conf,
    const char *key, const char *what, char **cause)
{
	const char	*v;

	if ((v = dataset_conf_get(conf, key)) != NULL && *v != '\0')
		return (v);
	if (conf->source != NULL) {
		dataset_error(cause, ds, "%s '%s =' (%s) in the section at %s",
		    v == NULL ? "missing" : "empty", key, what, conf->source);
	} else {
		dataset_error(cause, ds, "%s '%s =' (%s)",
		    v == NULL ? "missing" : "empty", key, what);
	}
	return (NULL);
}

/* Parse a comma-separated list of positive dimensions. */
int
dataset_shape_parse(const char *s, uint64_t shape[INFEED_MAX_DIMS],
    uint32_t *ndim, const char **errstr)
{
	const char	*p = s, *comma;
	char		 buf[32];
	size_t		 len;
	uint32_t	 n = 0;

	for (;;) {
		comma = strchr(p, ',');
		len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (n == INFEED_MAX_DIMS) {
			*errstr = "has too many dimensions (at most 8)";
			return (-1);
		}
		if (len >= sizeof buf) {
			*errstr = "has a dimension that is too large";
			return (-1);
		}
		memcpy(buf, p, len);
		buf[len] = '\0';
		if (number_parse_u64(buf, 1, UINT64_MAX, &shape[n],
		    errstr) != 0) {
			*errstr = "must be positive whole numbers separated "
			    "by commas, like 1,28,28";
			return (-1);
		}
		n++;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	*ndim = n;
	return (0);
}

/* Bytes of one sample of the given shape and dtype, overflow-checked. */
int
dataset_shape_bytes(const uint64_t *shape, uint32_t ndim, enum infeed_dtype t,
    size_t *out)
{
	size_t		 n;
	uint32_t	 i;

	if ((n = dtype_size(t)) == 0)
		return (-1);
	for (i = 0; i < ndim; i++) {
		if (shape[i] > SIZE_MAX ||
		    __builtin_mul_overflow(n, (size_t)shape[i], &n))
			return (-1);
	}
	*out = n;
	return (0);
}

/* Write a shape as "28x28". */
char *
dataset_shape_format(const uint64_t *shape, uint32_t ndim, char *buf,
    size_t len)
{
	size_t		 off = 0;
	uint32_t	 i;
	int		 n;

	if (len == 0)
		return (buf);
	buf[0] = '\0';
	if (ndim == 0) {
		snprintf(buf, len, "scalar");
		return (buf);
	}
	for (i = 0; i < ndim && off < len; i++) {
		n = snprintf(buf + off, len - off, "%s%" PRIu64,
		    i == 0 ? "" : "x", shape[i]);
		if (n < 0)
			break;
		off += (size_t)n;
	}
	return (buf);
}

/* What a descriptor is when it is not a regular file, for messages. */
static const char *
dataset_file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return ("a directory");
	if (S_ISFIFO(mode))
		return ("a pipe");
	if (S_ISSOCK(mode))
		return ("a socket");
	if (S_ISCHR(mode))
		return ("a character device");
	if (S_ISBLK(mode))
		return ("a block device");
	return ("not a file");
}

/*
 * The files mapped in this process, for dataset_populate(): a worker maps
 * each one's pages once, when it starts, instead of faulting them one
 * page at a time on the hot path.
 */
struct dataset_mapped {
	uint8_t	*base;
	size_t	 len;
};
static struct dataset_mapped	*mapped;
static size_t			 nmapped;

/* dataset_populate()'s files (len 0 once unmapped) and where it stands. */
static struct dataset_mapped	*pop;
static size_t			 npop, pop_file;
static uint64_t			 pop_off;
static bool			 pop_started;

static void
dataset_maps_add(uint8_t *base, size_t len)
{
	mapped = reallocarray(mapped, nmapped + 1, sizeof(*mapped));
	if (mapped == NULL)
		abort();
	mapped[nmapped].base = base;
	mapped[nmapped++].len = len;
}

static void
dataset_maps_remove(const uint8_t *base)
{
	size_t	i;

	for (i = 0; i < npop; i++)
		if (pop[i].base == base)
			pop[i].len = 0;
	for (i = 0; i < nmapped; i++) {
		if (mapped[i].base == base) {
			mapped[i] = mapped[--nmapped];
			return;
		}
	}
}

#ifdef MADV_POPULATE_READ
/*
 * The kernel's fault-around: one read fault maps the cached pages of the
 * 64 KiB around it (its default fault_around_bytes), where populating
 * every page walks them one at a time, at twice the CPU (28 against
 * 16 ms for 625 MiB, issue 35).  A window it maps less of faults the
 * rest in on the hot path, as before any populate.
 */
#define DATASET_FAULT_AROUND	(64u * 1024)

/*
 * Map the pages of @n bytes at @p that the page cache holds, one page a
 * fault-around window of a run of them, and leave the rest: reading
 * those from storage is the workers' reads in flight (worker.c), at many
 * a time, not a pass of one read at a time here that a job would wait
 * behind (a chunk of 16 MiB from a store of 2 ms a read took seconds).
 */
static void
dataset_populate_cached(uint8_t *p, size_t n)
{
	unsigned char	*vec;
	size_t		 page = (size_t)sysconf(_SC_PAGESIZE), pages, i, run;
	size_t		 at, end;

	pages = (n + page - 1) / page;
	if ((vec = malloc(pages)) == NULL || mincore(p, n, vec) == -1) {
		free(vec);
		return;
	}
	for (i = 0; i < pages; i += run) {
		for (run = 0; i + run < pages && (vec[i + run] & 1) ==
		    (vec[i] & 1); run++)
			;
		if (!(vec[i] & 1))
			continue;
		end = (i + run) * page < n ? (i + run) * page : n;
		/* The windows are aligned in the address space. */
		for (at = i * page; at < end; at = ((uintptr_t)(p + at) /
		    DATASET_FAULT_AROUND + 1) * DATASET_FAULT_AROUND -
		    (uintptr_t)p)
			(void)madvise(p + at, page, MADV_POPULATE_READ);
	}
	free(vec);
}
#endif

bool
dataset_populate(uint64_t max_bytes, uint64_t chunk)
{
#ifdef MADV_POPULATE_READ
	uint64_t	total = 0, n;
	size_t		i;

	/* The files mapped at the first call: a client's, later, are not. */
	if (!pop_started) {
		pop_started = true;
		for (i = 0; i < nmapped; i++)
			total += mapped[i].len;
		if (total > max_bytes || nmapped == 0)
			return (false);
		if ((pop = calloc(nmapped, sizeof(*pop))) == NULL)
			return (false);
		memcpy(pop, mapped, nmapped * sizeof(*pop));
		npop = nmapped;
	}
	while (pop_file < npop && pop_off >= pop[pop_file].len) {
		pop_file++;
		pop_off = 0;
	}
	if (pop_file >= npop)
		return (false);
	/* Whole pages from a page-aligned base: madvise's own bounds. */
	n = pop[pop_file].len - pop_off < chunk ? pop[pop_file].len - pop_off :
	    chunk;
	dataset_populate_cached(pop[pop_file].base + pop_off, n);
	pop_off += n;
	return (pop_file + 1 < npop || pop_off < pop[pop_file].len);
#else
	(void)max_bytes;
	(void)chunk;
	return (false);
#endif
}

/*
 * Check a regular file's descriptor and, with DATASET_MAP_READ, map it
 * read-only and shared.  The one place every file a dataset reads comes
 * through, whether opened by path or passed by a client.
 */
int
dataset_map_fd(const struct dataset *ds, const char *what, int fd, int flags,
    uint64_t max, struct dataset_map *m, char **cause)
{
	struct stat	 st;
	void		*p;
	size_t		 len;
	int		 fl, saved_errno;

	memset(m, 0, sizeof *m);
	m->fd = -1;
	if ((fl = fcntl(fd, F_GETFL)) == -1) {
		saved_errno = errno;
		close(fd);
		return (dataset_error(cause, ds, "%s: not an open file: %s",
		    what, strerror(saved_errno)));
	}
#ifdef O_PATH
	if ((fl & O_PATH) == O_PATH) {
		close(fd);
		return (dataset_error(cause, ds, "%s: opened with O_PATH, "
		    "which reads nothing; open it O_RDONLY", what));
	}
#endif
	if ((fl & O_ACCMODE) == O_WRONLY) {
		close(fd);
		return (dataset_error(cause, ds, "%s: opened write-only "
		    "(O_WRONLY), so it cannot be read; open it O_RDONLY",
		    what));
	}
	if (fstat(fd, &st) == -1) {
		saved_errno = errno;
		close(fd);
		return (dataset_error(cause, ds, "%s: cannot stat: %s", what,
		    strerror(saved_errno)));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return (dataset_error(cause, ds, "%s: not a regular file but "
		    "%s; expected a regular file", what,
		    dataset_file_kind(st.st_mode)));
	}
	if (st.st_size == 0) {
		close(fd);
		return (dataset_error(cause, ds, "%s: the file is empty",
		    what));
	}
	if ((uint64_t)st.st_size > SIZE_MAX) {
		close(fd);
		return (dataset_error(cause, ds, "%s: too large to map",
		    what));
	}
	len = (uint64_t)st.st_size < max ? (size_t)st.st_size : (size_t)max;
	if ((flags & DATASET_MAP_READ) && len > 0) {
		p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			saved_errno = errno;
			close(fd);
			return (dataset_error(cause, ds, "%s: cannot map: %s",
			    what, strerror(saved_errno)));
		}
		m->base = p;
		m->len = len;
		dataset_maps_add(p, m->len);
	}
	m->fd = fd;
	m->shared = (flags & DATASET_MAP_SHARED) != 0;
	m->job = 0;
	m->size = (uint64_t)st.st_size;
	return (0);
}

/* Map a whole regular file read-only and shared. */
int
dataset_map_file(const struct dataset *ds, const char *path,
    struct dataset_map *m, char **cause)
{
	int	fd;

	memset(m, 0, sizeof *m);
	m->fd = -1;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (dataset_error(cause, ds, "%s: cannot open: %s", path,
		    strerror(errno)));
	return (dataset_map_fd(ds, path, fd, DATASET_MAP_READ, DATASET_MAP_ALL,
	    m, cause));
}

/* Unmap what a dataset_map holds and close its file. */
void
dataset_unmap(struct dataset_map *m)
{
	if (m->base != NULL) {
		dataset_maps_remove(m->base);
		munmap(m->base, m->len);
	}
	if (m->fd != -1)
		close(m->fd);
	m->base = NULL;
	m->len = 0;
	m->fd = -1;
}

/* Read @len bytes at @off of the file behind @m, whole or not at all. */
int
dataset_pread(const struct dataset_map *m, void *buf, size_t len,
    uint64_t off)
{
	uint8_t	*p = buf;
	ssize_t	 n;

	while (len > 0) {
		n = pread(m->fd, p, len, (off_t)off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return (-1);
		if (n == 0) {
			errno = EIO;
			return (-1);
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return (0);
}

/*
 * The size of the file behind @m now.  lseek(SEEK_END) is half the cost
 * of fstat, but it moves the descriptor's offset, which a client's file
 * shares with the client (m->shared): fstat those.
 */
static int
dataset_map_size(const struct dataset_map *m, uint64_t *size,
    int64_t *ctime_ns)
{
	struct stat	st;
	off_t		end;

	*ctime_ns = 0;
	if (m->shared) {
		if (fstat(m->fd, &st) == -1)
			return (-1);
		*size = (uint64_t)st.st_size;
		*ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 +
		    st.st_ctim.tv_nsec;
		return (0);
	}
	if ((end = lseek(m->fd, 0, SEEK_END)) == -1)
		return (-1);
	*size = (uint64_t)end;
	return (0);
}

/* The job in progress (0: none), and the maps it checked. */
#define DATASET_JOB_MAPS	8
static uint64_t			 dataset_job;
static uint64_t			 dataset_jobs;
static struct dataset_map	*dataset_job_maps[DATASET_JOB_MAPS];
static unsigned			 dataset_job_nmaps;
/* The last check dataset_map_holds() failed: the size, the end wanted. */
static uint64_t			 dataset_short_size, dataset_short_end;

/* A worker starts a batch of rows. */
void
dataset_job_begin(void)
{
	dataset_job = ++dataset_jobs;
	dataset_job_nmaps = 0;
}

/* The batch is read: did a file it read shrink or change meanwhile? */
int
dataset_job_end(uint64_t *now)
{
	struct dataset_map	*m;
	uint64_t		 size;
	int64_t			 ctime_ns;
	unsigned		 i;
	int			 shrank = 0;

	if (now != NULL)
		*now = UINT64_MAX;
	for (i = 0; i < dataset_job_nmaps; i++) {
		m = dataset_job_maps[i];
		if (dataset_map_size(m, &size, &ctime_ns) == -1)
			size = 0;
		if (size < m->size || ctime_ns != m->ctime_ns)
			shrank = 1;
		if (size < m->size && now != NULL && size < *now)
			*now = size;
	}
	dataset_job = 0;
	dataset_job_nmaps = 0;
	return (shrank);
}

/* A read came back short: the file's size now, for the why. */
int
dataset_map_short(const struct dataset_map *m, uint64_t end)
{
	uint64_t	size = 0;
	int64_t		ctime_ns;

	if (m == NULL || m->fd == -1 ||
	    dataset_map_size(m, &size, &ctime_ns) == -1)
		size = 0;
	dataset_short_size = size;
	dataset_short_end = end;
	errno = EIO;
	return (-1);
}

/* A reader's own reason for its last failed read (dataset_set_why()). */
static char			 dataset_why[512];

/* Keep a reader's reason for dataset_short_why(). */
void
dataset_set_why(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(dataset_why, sizeof dataset_why, fmt, ap);
	va_end(ap);
}

/* Whether a reader's reason waits for dataset_short_why(). */
bool
dataset_why_set(void)
{
	return (dataset_why[0] != '\0');
}

/* Why the last read said EIO: a reader's reason, or a file that shrank. */
char *
dataset_short_why(char *buf, size_t len)
{
	if (dataset_why[0] != '\0') {
		snprintf(buf, len, "%s", dataset_why);
		dataset_why[0] = '\0';
		return (buf);
	}
	snprintf(buf, len, "the file is %" PRIu64 " bytes now, and the sample "
	    "needs bytes up to %" PRIu64 ": it was truncated after the "
	    "session began", dataset_short_size, dataset_short_end);
	return (buf);
}

/*
 * Does the file behind a map still reach @end?  See dataset_map_size()
 * for how it is measured.  The cached size is this process's own (a
 * worker's copy of the dataset), hence the cast.
 */
int
dataset_map_holds(const struct dataset_map *cm, uint64_t end)
{
	struct dataset_map	*m = (struct dataset_map *)(uintptr_t)cm;
	uint64_t		 size;
	int64_t			 ctime_ns;

	if (m->fd == -1)
		return (1);
	if (dataset_job == 0 || m->job != dataset_job) {
		if (dataset_map_size(m, &size, &ctime_ns) == -1) {
			dataset_short_size = 0;
			dataset_short_end = end;
			return (0);
		}
		m->size = size;
		m->ctime_ns = ctime_ns;
		m->job = dataset_job;
		if (dataset_job != 0 && dataset_job_nmaps < DATASET_JOB_MAPS)
			dataset_job_maps[dataset_job_nmaps++] = m;
	}
	if (m->size < end) {
		dataset_short_size = m->size;
		dataset_short_end = end;
		errno = EIO;
		return (0);
	}
	return (1);
}

/* Read one stored label; memcpy because the array may be unaligned. */
int64_t
dataset_label_get(const uint8_t *labels, enum infeed_dtype t, uint64_t index)
{
	int32_t	v32;
	int64_t	v64;

	switch (t) {
	case INFEED_DTYPE_UINT8:
		return (labels[index]);
	case INFEED_DTYPE_INT32:
		memcpy(&v32, labels + index * 4, sizeof v32);
		return (v32);
	case INFEED_DTYPE_INT64:
		memcpy(&v64, labels + index * 8, sizeof v64);
		return (v64);
	default:
		return (-1);
	}
}

/* Check labels [@first, @first + @n) and raise *@max to the largest. */
static int
dataset_labels_scan(const struct dataset *ds, const char *path,
    const uint8_t *labels, enum infeed_dtype t, uint64_t first, uint64_t n,
    int64_t *max, char **cause)
{
	uint64_t	i;
	int64_t		v;

	for (i = 0; i < n; i++) {
		v = dataset_label_get(labels, t, i);
		if (v < 0)
			return (dataset_error(cause, ds, "%s: label %" PRId64
			    " of sample %" PRIu64 " is negative; labels must "
			    "be class numbers from 0", path, v, first + i));
		if (ds->classes != 0 && v >= ds->classes)
			return (dataset_error(cause, ds, "%s: label %" PRId64
			    " of sample %" PRIu64 " is not below 'classes = "
			    "%" PRIu32 "'", path, v, first + i, ds->classes));
		if (v >= UINT32_MAX)
			return (dataset_error(cause, ds, "%s: label %" PRId64
			    " of sample %" PRIu64 " is too large for a class "
			    "number", path, v, first + i));
		if (v > *max)
			*max = v;
	}
	return (0);
}

/* Check every label is a class number and learn the class count. */
int
dataset_labels_check(struct dataset *ds, const char *path,
    const uint8_t *labels, enum infeed_dtype t, char **cause)
{
	int64_t	max = -1;

	if (dataset_labels_scan(ds, path, labels, t, 0, ds->samples, &max,
	    cause) != 0)
		return (-1);
	if (ds->classes == 0)
		ds->classes = (uint32_t)(max + 1);
	return (0);
}

/*
 * dataset_labels_check() of the labels at @off in the file behind @m,
 * read with pread in pieces: a file a client can still truncate is never
 * touched through a mapping in the main process (that would be SIGBUS).
 */
int
dataset_labels_check_file(struct dataset *ds, const char *path,
    const struct dataset_map *m, uint64_t off, enum infeed_dtype t,
    char **cause)
{
	uint8_t		*buf;
	size_t		 size = dtype_size(t), per = 65536 / 8;
	uint64_t	 first, n;
	int64_t		 max = -1;
	int		 rc = 0;

	if ((buf = malloc(per * 8)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	for (first = 0; first < ds->samples && rc == 0; first += n) {
		n = ds->samples - first < per ? ds->samples - first : per;
		if (dataset_pread(m, buf, n * size, off + first * size) != 0)
			rc = dataset_error(cause, ds, "%s: cannot read the "
			    "labels: %s", path, strerror(errno));
		else
			rc = dataset_labels_scan(ds, path, buf, t, first, n,
			    &max, cause);
	}
	free(buf);
	if (rc == 0 && ds->classes == 0)
		ds->classes = (uint32_t)(max + 1);
	return (rc);
}

/* Read the optional "classes =" key. */
int
dataset_conf_classes(struct dataset *ds, const struct dataset_conf *conf,
    char **cause)
{
	const char	*v, *errstr;
	uint64_t	 n;

	ds->classes = 0;
	if ((v = dataset_conf_get(conf, "classes")) == NULL)
		return (0);
	if (number_parse_u64(v, 1, UINT32_MAX - 1, &n, &errstr) != 0)
		return (dataset_error(cause, ds, "'classes = %s': %s", v,
		    errstr));
	ds->classes = (uint32_t)n;
	return (0);
}

/*
 * The raw and npy readers' read: copy one sample out and read its label
 * (0 without labels); -1 when either file no longer holds it (truncated
 * since it was mapped: see dataset_map_holds()).  What a map does not
 * reach (a client's file the daemon would not have the workers map whole)
 * is read with pread: a system call a row, but no address space.
 */
int
dataset_pair_read(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label, bool stream)
{
	struct dataset_loc	loc;

	if (dataset_pair_locate(ds, index, &loc, label) != 0)
		return (-1);
	if (loc.mapped != NULL)
		copy_row(dst, loc.mapped, loc.len, stream);
	else if (dataset_pread(loc.map, dst, loc.len, loc.off) != 0)
		return (-1);
	return (0);
}

/* Where a row of the raw or npy reader is, and its label. */
int
dataset_pair_locate(const struct dataset *ds, uint64_t index,
    struct dataset_loc *loc, int64_t *label)
{
	const struct dataset_pair	*p = ds->priv;
	size_t				 lsize = dtype_size(ds->label_dtype);
	uint64_t			 off, loff;
	uint8_t				 lbuf[8];

	if (!p->reads) {
		errno = EBADF;		/* only checked, never read */
		return (-1);
	}
	off = p->data_off + index * ds->sample_bytes;
	loff = p->labels_off + index * lsize;
	if (!dataset_map_holds(&p->data, off + ds->sample_bytes) ||
	    (p->labels.fd != -1 && !dataset_map_holds(&p->labels, loff +
	    lsize)))
		return (-1);
	loc->fd = p->data.fd;
	loc->off = off;
	loc->len = ds->sample_bytes;
	loc->mapped = off + ds->sample_bytes <= p->data.len ? p->data.base +
	    off : NULL;
	loc->map = &p->data;
	loc->owned = false;
	if (p->labels.fd == -1)
		*label = 0;
	else if (loff + lsize <= p->labels.len)
		*label = dataset_label_get(p->labels.base + p->labels_off,
		    ds->label_dtype, index);
	else if (dataset_pread(&p->labels, lbuf, lsize, loff) != 0)
		return (-1);
	else
		*label = dataset_label_get(lbuf, ds->label_dtype, 0);
	return (0);
}

/* Unmap and close both files. */
void
dataset_pair_close(struct dataset *ds)
{
	struct dataset_pair	*p = ds->priv;

	if (p == NULL)
		return;
	if (p->charged != 0)
		dataset_uncharge(p->charged_uid, p->charged);
	dataset_unmap(&p->data);
	dataset_unmap(&p->labels);
	free(p);
	ds->priv = NULL;
}

/*
 * What the workers map of clients' files, per uid and in all: the
 * daemon's ledger (dataset_files_charge()).
 */
struct dataset_charge {
	uid_t		uid;
	uint64_t	bytes;
};
static struct dataset_charge	*charges;
static size_t			 ncharges;
static uint64_t			 charged_all;

/* @uid's entry in the ledger, or NULL. */
static struct dataset_charge *
dataset_charge_find(uid_t uid)
{
	size_t	i;

	for (i = 0; i < ncharges; i++)
		if (charges[i].uid == uid)
			return (&charges[i]);
	return (NULL);
}

/* Charge @bytes to @uid if both bounds hold. */
bool
dataset_charge(uid_t uid, uint64_t bytes)
{
	struct dataset_charge	*c = dataset_charge_find(uid);
	uint64_t		 had = c != NULL ? c->bytes : 0;

	if (bytes > DATASET_FILES_MAP_UID_MAX - had ||
	    bytes > DATASET_FILES_MAP_MAX - charged_all)
		return (false);
	if (c == NULL) {
		if ((c = reallocarray(charges, ncharges + 1,
		    sizeof(*c))) == NULL)
			return (false);
		charges = c;
		c = &charges[ncharges++];
		c->uid = uid;
		c->bytes = 0;
	}
	c->bytes += bytes;
	charged_all += bytes;
	return (true);
}

/* Give back what dataset_charge() took. */
void
dataset_uncharge(uid_t uid, uint64_t bytes)
{
	struct dataset_charge	*c = dataset_charge_find(uid);

	if (c != NULL) {
		c->bytes -= bytes;
		if (c->bytes == 0)
			*c = charges[--ncharges];
	}
	charged_all -= bytes;
	if (ncharges == 0) {
		free(charges);
		charges = NULL;
	}
}

/* What @uid, and all, have charged. */
uint64_t
dataset_charged(uid_t uid, uint64_t *all)
{
	struct dataset_charge	*c = dataset_charge_find(uid);

	if (all != NULL)
		*all = charged_all;
	return (c != NULL ? c->bytes : 0);
}

/* Grow a worker's buffer, up to the largest image it may hold. */
int
dataset_buf_reserve(struct dataset_buf *buf, size_t n)
{
	uint8_t	*p;
	size_t	 cap;

	if (n > INFEED_MAX_IMAGE_BYTES) {
		errno = EFBIG;
		return (-1);
	}
	if (n <= buf->cap && buf->p != NULL)
		return (0);
	cap = buf->cap < 65536 ? 65536 : buf->cap;
	while (cap < n)
		cap *= 2;
	if (cap > INFEED_MAX_IMAGE_BYTES)
		cap = INFEED_MAX_IMAGE_BYTES;
	if ((p = realloc(buf->p, cap)) == NULL) {
		errno = ENOMEM;
		return (-1);
	}
	buf->p = p;
	buf->cap = cap;
	return (0);
}

/* Free a worker's buffer. */
void
dataset_buf_free(struct dataset_buf *buf)
{
	free(buf->p);
	buf->p = NULL;
	buf->len = buf->cap = 0;
}

/* Close and free a dataset. */
void
dataset_free(struct dataset *ds)
{
	uint32_t	i;

	if (ds == NULL)
		return;
	if (ds->ops != NULL)
		ds->ops->close(ds);
	if (ds->class_names != NULL) {
		for (i = 0; i < ds->classes; i++)
			free(ds->class_names[i]);
		free(ds->class_names);
	}
	free(ds->data_path);
	free(ds->labels_path);
	free(ds->name);
	free(ds);
}
