/* SPDX-License-Identifier: MIT */
/*
 * slowfs: storage that is slow for real, for the tests and benchmarks of
 * data that is not in memory (issue 36, item 4).  A FUSE file system
 * (libfuse3) that serves a directory read-only and makes every read of a
 * file wait --delay-us before it is answered, as a network or object
 * store would, with many reads in flight at once: at most --depth reads
 * wait at the same time (the store's queue depth; the rest queue for a
 * place), so the store's limit is depth / delay reads a second.
 *
 * Cheap a read, so that the limit is the store's and not the CPU's: no
 * thread sleeps for a read.  SLOWFS_TAKERS threads take the requests from
 * /dev/fuse, answer every other request at once, and queue a read (its
 * request, 80 bytes, copied into a node of a free list); --threads
 * threads (1) answer the queued reads when due, one after another, woken
 * once for all that are due within SLOWFS_SLACK_NS (100 us: a read waits
 * its delay and at most that more, so depth / delay stays a bound), with
 * libfuse's high-level read (a pread of the source).  The kernel may send --depth x 2 + 16 reads at once
 * (max_background: read-ahead and async direct reads).
 *
 *   slowfs [--delay-us N] [--depth N] [--threads N] [--direct-io]
 *          [--readahead-kib N] [--drop-ms N] [--allow-other]
 *          [--stats FILE] SOURCE MOUNTPOINT
 *
 * It stays in the foreground until unmounted (fusermount3 -u MOUNTPOINT)
 * or signalled, then prints its counters on stderr (and to --stats FILE).
 * MOUNTPOINT/.slowfs, a file readdir does not list, is its control: read,
 * it gives the counters a line each ("reads 1234"); written, it takes
 * commands a line each:
 *
 *   reset         the counters back to 0
 *   hold          reads from now wait, unanswered, until release (a store
 *                 that stops answering)
 *   release       answer the held reads, and every read from now on
 *   release N     answer N more reads, the oldest waiting first, and hold
 *                 on (a store that answers a few)
 *   release-newest N  answer the N newest waiting reads, and hold on (a
 *                 read ahead that lands while the reads before it wait)
 *   drop          forget what the kernel caches of the files read
 *   delay-us N    the delay from now on
 *
 * The kernel's page cache: by default a file's pages stay cached while it
 * is open (as NFS keeps them), so a second read of the same bytes is not
 * slow; --drop-ms N forgets them every N ms (mapped pages too: the next
 * touch reads again), --direct-io caches nothing (but the kernel then
 * refuses MAP_SHARED mappings of the files).  --readahead-kib sets the
 * kernel's read-ahead for a file (its own default, usually 128 KiB).
 *
 * A mount never outlives its server: it is made with auto_unmount, so
 * fusermount3 (which stays behind, watching) unmounts it however slowfs
 * ends, SIGKILL included; and at start slowfs unmounts (lazily) every
 * slowfs mount of this host whose server is gone, named by its fsname
 * ("slowfs:PID"), or that answers "not connected" (an older mount).
 *
 * Exits 0 once unmounted, 2 on a usage error, 3 when it cannot mount
 * (no /dev/fuse, not allowed): the tests then skip.  Built for the tests
 * and benchmarks, never installed; tests/slowfs-mount.c starts and stops
 * it, tests/with-slowfs runs a command with a mount.
 */

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 12)

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fuse.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#define SLOWFS_CTL	"/.slowfs"
#define SLOWFS_EXIT_NOMOUNT	3
#define SLOWFS_TAKERS	4	/* threads reading /dev/fuse */
#define SLOWFS_REQ_MAX	256	/* a queued read's request, at most */
#define SLOWFS_SLACK_NS	100000	/* an answerer wakes that late, for more */

/* A read's request, queued until it is due. */
struct slowfs_req {
	struct slowfs_req	*next;
	uint64_t		 due_ns;	/* CLOCK_MONOTONIC */
	size_t			 len;
	bool			 held;		/* counted in held */
	uint64_t		 data[SLOWFS_REQ_MAX / 8];
};

/* A file read since start, for drop. */
struct slowfs_path {
	struct slowfs_path	*next;
	char			 path[];
};

static struct {
	/* Options. */
	int		 src;		/* the served directory */
	uint64_t	 delay_us;
	unsigned	 depth;
	unsigned	 threads;
	bool		 direct_io;
	long		 readahead_kib;	/* -1: the kernel's */
	unsigned	 drop_ms;
	const char	*stats;

	/* Under lock. */
	pthread_mutex_t	 lock;
	pthread_cond_t	 cond;
	bool		 hold;
	uint64_t	 let;		/* reads a hold lets through */
	uint64_t	 reads, bytes, drops, held_total;
	unsigned	 in_flight, max_in_flight;
	unsigned	 serving, max_serving;
	unsigned	 held;
	struct slowfs_path *paths;
	/* Reads: waiting for a place, in order; serving, by due time. */
	struct slowfs_req *waiting, **waiting_tail, *serving_q, *free_reqs;

	struct fuse	*fuse;
} sf = {
	.delay_us = 2000, .depth = 64, .readahead_kib = -1,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

/* @path relative to the source directory ("." for the root). */
static const char *
slowfs_rel(const char *path)
{
	return (path[1] == '\0' ? "." : path + 1);
}

/* The counters as text, a line each; its length. */
static size_t
slowfs_format(char *buf, size_t len)
{
	int	n;

	pthread_mutex_lock(&sf.lock);
	n = snprintf(buf, len, "reads %" PRIu64 "\nbytes %" PRIu64 "\n"
	    "in_flight %u\nmax_in_flight %u\nserving %u\nmax_serving %u\n"
	    "held %u\nheld_total %" PRIu64 "\ndrops %" PRIu64 "\n"
	    "delay_us %" PRIu64 "\ndepth %u\nthreads %u\nhold %d\n",
	    sf.reads, sf.bytes, sf.in_flight, sf.max_in_flight, sf.serving,
	    sf.max_serving, sf.held, sf.held_total, sf.drops, sf.delay_us,
	    sf.depth, sf.threads, sf.hold ? 1 : 0);
	pthread_mutex_unlock(&sf.lock);
	return (n < 0 ? 0 : (size_t)n >= len ? len - 1 : (size_t)n);
}

/* Remember @path as read, once, for drop. */
static void
slowfs_remember(const char *path)
{
	struct slowfs_path	*p;
	size_t			 len = strlen(path) + 1;

	pthread_mutex_lock(&sf.lock);
	for (p = sf.paths; p != NULL; p = p->next)
		if (strcmp(p->path, path) == 0)
			break;
	if (p == NULL && (p = malloc(sizeof(*p) + len)) != NULL) {
		memcpy(p->path, path, len);
		p->next = sf.paths;
		sf.paths = p;
	}
	pthread_mutex_unlock(&sf.lock);
}

/*
 * Forget the kernel's cached pages of every file read.  The list only
 * grows, so its entries can be walked without the lock once taken.
 */
static void
slowfs_drop(void)
{
	struct slowfs_path	*p;

	pthread_mutex_lock(&sf.lock);
	p = sf.paths;
	sf.drops++;
	pthread_mutex_unlock(&sf.lock);
	for (; p != NULL; p = p->next)
		(void)fuse_invalidate_path(sf.fuse, p->path);
}

/* --drop-ms: drop every so often. */
static void *
slowfs_dropper(void *arg)
{
	struct timespec	ts = { sf.drop_ms / 1000,
			    (long)(sf.drop_ms % 1000) * 1000000 };

	(void)arg;
	for (;;) {
		nanosleep(&ts, NULL);
		if (sf.fuse != NULL)
			slowfs_drop();
	}
	return (NULL);
}

/* Now, in ns of CLOCK_MONOTONIC. */
static uint64_t
slowfs_now_ns(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec);
}

/*
 * Under the lock: give waiting reads their places while there are any
 * and no hold (or one that lets some through: release N), each due a
 * delay from now; under a hold, count the waiting as held.  Wakes the answerers when the first due changes.
 */
static void
slowfs_promote(void)
{
	struct slowfs_req	*r, **pp;
	uint64_t		 now = 0;
	bool			 first = false;

	while ((r = sf.waiting) != NULL && sf.serving < sf.depth &&
	    (!sf.hold || sf.let > 0)) {
		if (sf.hold)
			sf.let--;
		if ((sf.waiting = r->next) == NULL)
			sf.waiting_tail = &sf.waiting;
		if (r->held)
			sf.held--;
		if (now == 0)
			now = slowfs_now_ns();
		r->due_ns = now + sf.delay_us * 1000;
		/* By due time; with one delay, that is at the end. */
		for (pp = &sf.serving_q; *pp != NULL && (*pp)->due_ns <=
		    r->due_ns; pp = &(*pp)->next)
			;
		r->next = *pp;
		first = first || pp == &sf.serving_q;
		*pp = r;
		if (++sf.serving > sf.max_serving)
			sf.max_serving = sf.serving;
	}
	if (first)
		pthread_cond_broadcast(&sf.cond);
	if (!sf.hold)
		return;
	for (r = sf.waiting; r != NULL; r = r->next) {
		if (!r->held) {
			r->held = true;
			sf.held++;
			sf.held_total++;
		}
	}
}

/* Queue a read's request @in (@len bytes); false: answer it at once. */
static bool
slowfs_queue(const void *in, size_t len)
{
	struct slowfs_req	*r;

	if (len > sizeof(r->data))
		return (false);
	pthread_mutex_lock(&sf.lock);
	if ((r = sf.free_reqs) != NULL)
		sf.free_reqs = r->next;
	else if ((r = malloc(sizeof(*r))) == NULL) {
		pthread_mutex_unlock(&sf.lock);
		return (false);
	}
	memcpy(r->data, in, len);
	r->len = len;
	r->held = false;
	r->next = NULL;
	*sf.waiting_tail = r;
	sf.waiting_tail = &r->next;
	if (++sf.in_flight > sf.max_in_flight)
		sf.max_in_flight = sf.in_flight;
	slowfs_promote();
	pthread_mutex_unlock(&sf.lock);
	return (true);
}

/*
 * An answerer: wait for the first due read, answer it (libfuse's read,
 * slowfs_read()), then the next due, until the session ends.
 */
static void *
slowfs_answerer(void *arg)
{
	struct fuse_session	*se = arg;
	struct slowfs_req	*r;
	struct timespec		 ts;
	struct fuse_buf		 buf;
	uint64_t		 now, until;

	pthread_mutex_lock(&sf.lock);
	while (!fuse_session_exited(se)) {
		now = slowfs_now_ns();
		if ((r = sf.serving_q) == NULL || r->due_ns > now) {
			/*
			 * SLOWFS_SLACK_NS after the first is due, to answer
			 * all then due at one wake (a read waits its delay
			 * and at most that more); 100 ms at most, to notice
			 * an exit.
			 */
			until = r != NULL && r->due_ns < now + 100000000 ?
			    r->due_ns + SLOWFS_SLACK_NS : now + 100000000;
			ts.tv_sec = (time_t)(until / 1000000000);
			ts.tv_nsec = (long)(until % 1000000000);
			pthread_cond_timedwait(&sf.cond, &sf.lock, &ts);
			continue;
		}
		sf.serving_q = r->next;
		pthread_mutex_unlock(&sf.lock);
		memset(&buf, 0, sizeof(buf));
		buf.mem = r->data;
		buf.size = r->len;
		fuse_session_process_buf(se, &buf);
		pthread_mutex_lock(&sf.lock);
		sf.serving--;
		sf.in_flight--;
		r->next = sf.free_reqs;
		sf.free_reqs = r;
		slowfs_promote();
	}
	pthread_cond_broadcast(&sf.cond);
	pthread_mutex_unlock(&sf.lock);
	return (NULL);
}

/*
 * A taker: read each request from /dev/fuse; queue a read of a file of
 * the source (the control file's, fh -1, is not slow), answer any other
 * at once.
 */
static void *
slowfs_taker(void *arg)
{
	struct fuse_session		*se = arg;
	struct fuse_buf			 buf = { .mem = NULL };
	const struct fuse_in_header	*in;
	const struct fuse_read_in	*rd;
	int				 res;

	while (!fuse_session_exited(se)) {
		if ((res = fuse_session_receive_buf(se, &buf)) == -EINTR)
			continue;
		if (res <= 0)
			break;
		in = buf.mem;
		rd = (const void *)(in + 1);
		if (!(buf.flags & FUSE_BUF_IS_FD) && in->opcode == FUSE_READ &&
		    buf.size >= sizeof(*in) + sizeof(*rd) &&
		    rd->fh != (uint64_t)-1 && slowfs_queue(buf.mem, buf.size))
			continue;
		fuse_session_process_buf(se, &buf);
	}
	fuse_session_exit(se);
	pthread_mutex_lock(&sf.lock);
	pthread_cond_broadcast(&sf.cond);
	pthread_mutex_unlock(&sf.lock);
	free(buf.mem);
	return (NULL);
}

/* Serve until unmounted or signalled: takers and answerers; 0 or -1. */
static int
slowfs_loop(void)
{
	struct fuse_session	*se = fuse_get_session(sf.fuse);
	pthread_t		*th;
	unsigned		 n = SLOWFS_TAKERS + sf.threads, i, up;

	if ((th = calloc(n, sizeof(*th))) == NULL)
		return (-1);
	for (up = 0; up < n; up++)
		if (pthread_create(&th[up], NULL, up < SLOWFS_TAKERS ?
		    slowfs_taker : slowfs_answerer, se) != 0)
			break;
	if (up < n)
		fuse_session_exit(se);
	for (i = 0; i < up; i++)
		pthread_join(th[i], NULL);
	free(th);
	return (up < n ? -1 : 0);
}

/* Under the lock: the @n newest waiting reads moved to the front. */
static void
slowfs_newest_first(uint64_t n)
{
	struct slowfs_req	*r, **pp, *last = NULL;
	uint64_t		 len = 0, i;

	for (r = sf.waiting; r != NULL; r = r->next, len++)
		last = r;
	if (n == 0 || n >= len)
		return;
	for (pp = &sf.waiting, i = 0; i < len - n; i++)
		pp = &(*pp)->next;
	last->next = sf.waiting;
	sf.waiting = *pp;
	*pp = NULL;
	sf.waiting_tail = pp;
}

/* Apply one command line written to the control file; 0 or -EINVAL. */
static int
slowfs_command(const char *line)
{
	unsigned long long	v;

	if (strcmp(line, "drop") == 0) {
		slowfs_drop();
		return (0);
	}
	pthread_mutex_lock(&sf.lock);
	if (strcmp(line, "reset") == 0) {
		sf.reads = sf.bytes = sf.drops = sf.held_total = 0;
		sf.max_in_flight = sf.in_flight;
		sf.max_serving = sf.serving;
	} else if (strcmp(line, "hold") == 0) {
		sf.hold = true;
		slowfs_promote();	/* counts the waiting as held */
	} else if (strcmp(line, "release") == 0) {
		sf.hold = false;
		sf.let = 0;
		slowfs_promote();
	} else if (sscanf(line, "release-newest %llu", &v) == 1) {
		slowfs_newest_first(v);
		sf.let += v;
		slowfs_promote();
	} else if (sscanf(line, "release %llu", &v) == 1) {
		sf.let += v;
		slowfs_promote();
	} else if (sscanf(line, "delay-us %llu", &v) == 1)
		sf.delay_us = v;
	else {
		pthread_mutex_unlock(&sf.lock);
		fprintf(stderr, "slowfs: unknown command '%s': expected "
		    "reset, hold, release, release N, release-newest N, drop "
		    "or delay-us N\n",
		    line);
		return (-EINVAL);
	}
	pthread_mutex_unlock(&sf.lock);
	return (0);
}

/* Serve the configuration: caches, read-ahead, the kernel's queue. */
static void *
slowfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	/* The source does not change under us. */
	cfg->entry_timeout = cfg->attr_timeout = cfg->negative_timeout = 60;
	cfg->kernel_cache = 0;
	/* Read-ahead and async direct reads are background requests. */
	conn->max_background = sf.depth * 2 + 16 > 65535 ? 65535 :
	    sf.depth * 2 + 16;
	conn->congestion_threshold = conn->max_background * 3 / 4;
	/* slowfs_taker() reads each request into memory. */
	conn->want &= ~FUSE_CAP_SPLICE_READ;
	if (sf.readahead_kib >= 0)
		conn->max_readahead = (unsigned)sf.readahead_kib * 1024;
	return (NULL);
}

/* Stat a file of the source (the control file: an empty one). */
static int
slowfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	if (strcmp(path, SLOWFS_CTL) == 0) {
		memset(st, 0, sizeof(*st));
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_uid = getuid();
		st->st_gid = getgid();
		return (0);
	}
	if (fstatat(sf.src, slowfs_rel(path), st, AT_SYMLINK_NOFOLLOW) == -1)
		return (-errno);
	st->st_mode &= ~(mode_t)0222;	/* served read-only */
	return (0);
}

/* A symbolic link of the source, as it is. */
static int
slowfs_readlink(const char *path, char *buf, size_t len)
{
	ssize_t	n;

	if ((n = readlinkat(sf.src, slowfs_rel(path), buf, len - 1)) == -1)
		return (-errno);
	buf[n] = '\0';
	return (0);
}

/* A directory's entries (the control file not among them). */
static int
slowfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
    struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct dirent	*de;
	DIR		*d;
	int		 fd;

	(void)off;
	(void)fi;
	(void)flags;
	if ((fd = openat(sf.src, slowfs_rel(path), O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1)
		return (-errno);
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return (-errno);
	}
	while ((de = readdir(d)) != NULL)
		if (fill(buf, de->d_name, NULL, 0, 0) != 0)
			break;
	closedir(d);
	return (0);
}

/* Open a file of the source read-only (the control file read-write). */
static int
slowfs_open(const char *path, struct fuse_file_info *fi)
{
	int	fd;

	if (strcmp(path, SLOWFS_CTL) == 0) {
		fi->direct_io = 1;	/* the counters, fresh every read */
		fi->fh = (uint64_t)-1;
		return (0);
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return (-EROFS);
	if ((fd = openat(sf.src, slowfs_rel(path), O_RDONLY | O_CLOEXEC)) ==
	    -1)
		return (-errno);
	fi->fh = (uint64_t)fd;
	fi->direct_io = sf.direct_io;
	fi->keep_cache = 0;
	slowfs_remember(path);
	return (0);
}

/*
 * A read: the control file's counters, or a file's bytes, its delay
 * already waited in the queue (slowfs_queue(), slowfs_answerer()).
 */
static int
slowfs_read(const char *path, char *buf, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	ssize_t		n;
	char		text[512];
	size_t		len;

	(void)path;
	if (fi->fh == (uint64_t)-1) {
		len = slowfs_format(text, sizeof(text));
		if ((size_t)off >= len)
			return (0);
		len -= (size_t)off;
		len = len < size ? len : size;
		memcpy(buf, text + off, len);
		return ((int)len);
	}
	n = pread((int)fi->fh, buf, size, off);
	if (n >= 0) {
		pthread_mutex_lock(&sf.lock);
		sf.reads++;
		sf.bytes += (uint64_t)n;
		pthread_mutex_unlock(&sf.lock);
	}
	return (n == -1 ? -errno : (int)n);
}

/* Commands to the control file; every other file is read-only. */
static int
slowfs_write(const char *path, const char *buf, size_t size, off_t off,
    struct fuse_file_info *fi)
{
	char	line[128];
	size_t	i, start = 0;
	int	rc;

	(void)off;
	(void)fi;
	if (strcmp(path, SLOWFS_CTL) != 0)
		return (-EROFS);
	for (i = 0; i <= size; i++) {
		if (i < size && buf[i] != '\n')
			continue;
		if (i > start) {
			if (i - start >= sizeof(line))
				return (-EINVAL);
			memcpy(line, buf + start, i - start);
			line[i - start] = '\0';
			if ((rc = slowfs_command(line)) != 0)
				return (rc);
		}
		start = i + 1;
	}
	return ((int)size);
}

/* Only the control file may be truncated (a shell's "> .slowfs"). */
static int
slowfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	(void)size;
	(void)fi;
	return (strcmp(path, SLOWFS_CTL) == 0 ? 0 : -EROFS);
}

/* Close a file of the source. */
static int
slowfs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	if (fi->fh != (uint64_t)-1)
		close((int)fi->fh);
	return (0);
}

/* The source's file system, as df sees it. */
static int
slowfs_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	return (fstatvfs(sf.src, st) == -1 ? -errno : 0);
}

static const struct fuse_operations slowfs_ops = {
	.init = slowfs_init,
	.getattr = slowfs_getattr,
	.readlink = slowfs_readlink,
	.readdir = slowfs_readdir,
	.open = slowfs_open,
	.read = slowfs_read,
	.write = slowfs_write,
	.truncate = slowfs_truncate,
	.release = slowfs_release,
	.statfs = slowfs_statfs,
};

/* Print the usage and exit 2. */
static void
slowfs_usage(const char *why)
{
	if (why != NULL)
		fprintf(stderr, "slowfs: %s\n", why);
	fprintf(stderr, "usage: slowfs [--delay-us N] [--depth N] "
	    "[--threads N] [--direct-io]\n"
	    "              [--readahead-kib N] [--drop-ms N] "
	    "[--allow-other] [--stats FILE]\n"
	    "              SOURCE MOUNTPOINT\n");
	exit(2);
}

/* A number option within [@min, @max], or the usage. */
static unsigned long long
slowfs_number(const char *opt, const char *arg, unsigned long long min,
    unsigned long long max)
{
	unsigned long long	 v;
	char			*end, why[160];

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno != 0 || *arg == '\0' || *end != '\0' || v < min ||
	    v > max) {
		snprintf(why, sizeof(why), "%s %s: expected a number from %llu "
		    "to %llu", opt, arg, min, max);
		slowfs_usage(why);
	}
	return (v);
}

/* Undo /proc/mounts' octal escapes (\040 a space) in place. */
static void
slowfs_unescape(char *s)
{
	char	*o = s;

	for (; *s != '\0'; s++, o++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
			    (s[3] - '0'));
			s += 3;
		} else
			*o = *s;
	}
	*o = '\0';
}

/* Unmount @mnt lazily: umount2 as root, else fusermount3 -u -z. */
static void
slowfs_detach(const char *mnt)
{
	pid_t	pid;

	if (umount2(mnt, MNT_DETACH) == 0)
		return;
	if ((pid = fork()) == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", mnt,
		    (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/*
 * Unmount the slowfs mounts left by servers that are gone (a run killed
 * before auto_unmount, or a host where fusermount3 died too): their
 * fsname says "slowfs:PID" and PID is no slowfs; an older one, plain
 * "slowfs", is stale when it answers ENOTCONN.  Its directory goes too
 * when empty.
 */
static void
slowfs_sweep(void)
{
	char		 line[4096], src[256], mnt[4096], type[64], comm[64];
	char		 path[64];
	struct statvfs	 vfs;
	FILE		*fp, *cf;
	long		 pid;
	bool		 stale;

	if ((fp = fopen("/proc/self/mounts", "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (sscanf(line, "%255s %4095s %63s", src, mnt, type) != 3 ||
		    strcmp(type, "fuse.slowfs") != 0)
			continue;
		if (sscanf(src, "slowfs:%ld", &pid) == 1) {
			/* "PID (slowfs) S ...": gone, a zombie, or reused. */
			snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
			comm[0] = '\0';
			if ((cf = fopen(path, "re")) != NULL) {
				if (fgets(comm, sizeof(comm), cf) == NULL)
					comm[0] = '\0';
				fclose(cf);
			}
			snprintf(path, sizeof(path), "%ld (slowfs) ", pid);
			stale = strncmp(comm, path, strlen(path)) != 0 ||
			    comm[strlen(path)] == 'Z';
		} else
			/* stat() may answer from the kernel's cache. */
			stale = statvfs(mnt, &vfs) == -1 && errno == ENOTCONN;
		if (!stale)
			continue;
		/* /proc/mounts escapes spaces as \040: the tests' paths. */
		slowfs_unescape(mnt);
		slowfs_detach(mnt);
		(void)rmdir(mnt);
		fprintf(stderr, "slowfs: unmounted %s, left by a server that "
		    "is gone\n", mnt);
	}
	fclose(fp);
}

int
main(int argc, char **argv)
{
	static const struct option	 longopts[] = {
		{ "delay-us", required_argument, NULL, 'd' },
		{ "depth", required_argument, NULL, 'q' },
		{ "threads", required_argument, NULL, 't' },
		{ "direct-io", no_argument, NULL, 'D' },
		{ "readahead-kib", required_argument, NULL, 'r' },
		{ "drop-ms", required_argument, NULL, 'p' },
		{ "allow-other", no_argument, NULL, 'a' },
		{ "stats", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static char			 dash_o[] = "-o";
	char				*fargv[8], text[512], mopts[128];
	struct fuse_args		 args;
	pthread_t			 dropper;
	pthread_condattr_t		 cattr;
	FILE				*fp;
	bool				 allow_other = false;
	int				 ch, fargc = 0, rc;

	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			sf.delay_us = slowfs_number("--delay-us", optarg, 0,
			    60000000);
			break;
		case 'q':
			sf.depth = (unsigned)slowfs_number("--depth", optarg,
			    1, 4096);
			break;
		case 't':
			sf.threads = (unsigned)slowfs_number("--threads",
			    optarg, 1, 64);
			break;
		case 'D':
			sf.direct_io = true;
			break;
		case 'r':
			sf.readahead_kib = (long)slowfs_number(
			    "--readahead-kib", optarg, 0, 65536);
			break;
		case 'p':
			sf.drop_ms = (unsigned)slowfs_number("--drop-ms",
			    optarg, 1, 3600000);
			break;
		case 'a':
			allow_other = true;
			break;
		case 's':
			sf.stats = optarg;
			break;
		default:
			slowfs_usage(NULL);
		}
	}
	if (argc - optind != 2)
		slowfs_usage("expected SOURCE and MOUNTPOINT");
	if (sf.threads == 0)
		sf.threads = 1;
	sf.waiting_tail = &sf.waiting;
	/* The answerers' waits are on CLOCK_MONOTONIC, as the due times. */
	if (pthread_condattr_init(&cattr) != 0 ||
	    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&sf.cond, &cattr) != 0) {
		fprintf(stderr, "slowfs: cannot set up a condition\n");
		return (1);
	}
	if ((sf.src = open(argv[optind], O_RDONLY | O_DIRECTORY | O_CLOEXEC))
	    == -1) {
		fprintf(stderr, "slowfs: %s: %s; expected a directory to "
		    "serve\n", argv[optind], strerror(errno));
		return (2);
	}

	slowfs_sweep();
	snprintf(mopts, sizeof(mopts), "default_permissions,auto_unmount,"
	    "fsname=slowfs:%ld,subtype=slowfs%s", (long)getpid(),
	    allow_other ? ",allow_other" : "");
	fargv[fargc++] = argv[0];
	fargv[fargc++] = dash_o;
	fargv[fargc++] = mopts;
	fargv[fargc] = NULL;
	args = (struct fuse_args)FUSE_ARGS_INIT(fargc, fargv);
	if ((sf.fuse = fuse_new(&args, &slowfs_ops, sizeof(slowfs_ops),
	    NULL)) == NULL) {
		fprintf(stderr, "slowfs: cannot set up FUSE\n");
		return (1);
	}
	if (fuse_mount(sf.fuse, argv[optind + 1]) != 0) {
		fprintf(stderr, "slowfs: cannot mount %s (needs /dev/fuse, "
		    "and root or fusermount3)\n", argv[optind + 1]);
		fuse_destroy(sf.fuse);
		return (SLOWFS_EXIT_NOMOUNT);
	}
	if (fuse_set_signal_handlers(fuse_get_session(sf.fuse)) != 0)
		return (1);
	if (sf.drop_ms > 0 && pthread_create(&dropper, NULL, slowfs_dropper,
	    NULL) == 0)
		pthread_detach(dropper);

	rc = slowfs_loop();

	slowfs_format(text, sizeof(text));
	fprintf(stderr, "slowfs: unmounted %s:\n%s", argv[optind + 1], text);
	if (sf.stats != NULL && (fp = fopen(sf.stats, "w")) != NULL) {
		fputs(text, fp);
		fclose(fp);
	}
	fuse_remove_signal_handlers(fuse_get_session(sf.fuse));
	fuse_unmount(sf.fuse);
	fuse_destroy(sf.fuse);
	return (rc == 0 ? 0 : 1);
}
