/* SPDX-License-Identifier: MIT */
/*
 * Ring memory: memfds, the budget, held and kept memory and the thread
 * that zeroes and punches it (see ring-memory.h).
 *
 * The kept list and the states of kept memory are shared with the
 * scrubber thread under the scrubber's lock, and so is the list of memory
 * given up, whose pages the thread punches out (off the event loop: a
 * GiB takes about half a second) before the main thread uncharges it.
 * The thread only changes states, the main thread alone adds and removes.
 * A forked worker never takes the lock (the thread is not in it).
 */

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "ring-memory.h"
#include "xmalloc.h"

/* Kept memory serves a ring that needs at least this share of it. */
#define RING_REUSE_SLACK	4	/* at most 1/4 more than needed */

/* The scrubber zeroes this much between looks at whether to stop. */
#define RING_SCRUB_CHUNK	(2 * 1024 * 1024)

/* Without a pidfd, whether a holder exited is asked this often. */
#define RING_HOLDER_POLL_MS	500

/* It punches this much of memory given up per call. */
#define RING_PUNCH_CHUNK	(64 * 1024 * 1024)

struct ring_scrubber {
	pthread_t	 thread;
	pthread_mutex_t	 lock;
	pthread_cond_t	 cond;		/* a state changed, or stop */
	bool		 stop;
	struct ring_mem	*busy;		/* being zeroed now, or NULL */
	int		 done_fd;	/* an eventfd told of punches, or -1 */
};

/* A size in exact, readable units. */
const char *
ring_mem_format_bytes(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	uint64_t	u = 1024;
	int		i = 0;

	if (v < 1024) {
		snprintf(buf, len, "%llu bytes", (unsigned long long)v);
		return (buf);
	}
	while (i < 3 && v >= u * 1024) {
		u *= 1024;
		i++;
	}
	if (v % u == 0)
		snprintf(buf, len, "%llu %s", (unsigned long long)(v / u),
		    units[i]);
	else
		snprintf(buf, len, "%.1f %s (%llu bytes)", (double)v /
		    (double)u, units[i], (unsigned long long)v);
	return (buf);
}

/* Take the scrubber's lock, when there is a scrubber. */
static void
ring_mem_lock(struct ring_budget *b)
{
	if (b->scrubber != NULL)
		pthread_mutex_lock(&b->scrubber->lock);
}

static void
ring_mem_unlock(struct ring_budget *b)
{
	if (b->scrubber != NULL)
		pthread_mutex_unlock(&b->scrubber->lock);
}

/* Zero @len bytes of a memory from @off, populated in one call where the
 * kernel can. */
static void
ring_mem_zero(struct ring_mem *m, uint64_t off, uint64_t len)
{
#ifdef MADV_POPULATE_WRITE
	(void)madvise(m->map + off, len, MADV_POPULATE_WRITE);
#endif
	memset(m->map + off, 0, len);
}

/*
 * In the scrubber, locked: free the pages of memory given up, a chunk at
 * a time; a mapping a client keeps (its descriptor cannot be taken back)
 * then holds none of them.  FREED once done, unless told to stop.
 */
static void
ring_mem_punch(struct ring_scrubber *sc, struct ring_mem *m)
{
	uint64_t	off, len;

	for (off = 0; off < m->bytes && !sc->stop; off += len) {
		len = m->bytes - off < RING_PUNCH_CHUNK ? m->bytes - off :
		    RING_PUNCH_CHUNK;
		pthread_mutex_unlock(&sc->lock);
		if (fallocate(m->memfd, FALLOC_FL_PUNCH_HOLE |
		    FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == -1)
			m->punch_errno = errno;
		pthread_mutex_lock(&sc->lock);
	}
	if (off >= m->bytes) {
		m->state = RING_MEM_FREED;
		/* The event loop uncharges it. */
		if (sc->done_fd != -1)
			(void)eventfd_write(sc->done_fd, 1);
	}
	pthread_cond_broadcast(&sc->cond);
}

/* Wait on the scrubber's condition, @ms at most; under its lock. */
static void
ring_mem_wait_ms(struct ring_scrubber *sc, uint64_t ms)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	(void)pthread_cond_timedwait(&sc->cond, &sc->lock, &ts);
}

/*
 * The scrubber: punch memory given up, and zero kept memory idle for
 * scrub_after_ms, oldest first, until told to stop; a chunk at a time, so
 * that a ring of the same content can claim it.
 */
static void *
ring_mem_scrub_main(void *arg)
{
	struct ring_budget	*b = arg;
	struct ring_scrubber	*sc = b->scrubber;
	struct ring_mem		*m;
	uint64_t		 off, len, now, due;

	pthread_mutex_lock(&sc->lock);
	while (!sc->stop) {
		/* Memory given up first: the budget waits for it. */
		TAILQ_FOREACH(m, &b->freeing, entry) {
			if (m->state == RING_MEM_FREEING)
				break;
		}
		if (m != NULL) {
			ring_mem_punch(sc, m);
			continue;
		}
		now = clock_now_ms();
		due = UINT64_MAX;
		TAILQ_FOREACH(m, &b->kept, entry) {
			if (m->state != RING_MEM_DIRTY)
				continue;
			if (now >= m->idle_since_ms + b->scrub_after_ms)
				break;
			if (m->idle_since_ms + b->scrub_after_ms < due)
				due = m->idle_since_ms + b->scrub_after_ms;
		}
		if (m == NULL) {
			if (due == UINT64_MAX)
				pthread_cond_wait(&sc->cond, &sc->lock);
			else
				ring_mem_wait_ms(sc, due - now);
			continue;
		}
		m->state = RING_MEM_SCRUBBING;
		sc->busy = m;
		for (off = 0; off < m->bytes && m->state ==
		    RING_MEM_SCRUBBING && !sc->stop; off += len) {
			len = m->bytes - off < RING_SCRUB_CHUNK ? m->bytes -
			    off : RING_SCRUB_CHUNK;
			pthread_mutex_unlock(&sc->lock);
			ring_mem_zero(m, off, len);
			pthread_mutex_lock(&sc->lock);
		}
		if (m->state == RING_MEM_SCRUBBING) {
			m->state = off < m->bytes ? RING_MEM_DIRTY :
			    RING_MEM_CLEAN;
			if (m->state == RING_MEM_CLEAN)
				m->owner.content = 0;
			m->idle_since_ms = clock_now_ms();
		}
		sc->busy = NULL;
		pthread_cond_broadcast(&sc->cond);
	}
	pthread_mutex_unlock(&sc->lock);
	return (NULL);
}

/* Start the scrubber, with every signal blocked (the main thread's). */
static void
ring_mem_scrubber_start(struct ring_budget *b)
{
	struct ring_scrubber	*sc;
	pthread_condattr_t	 attr;
	sigset_t		 all, old;
	int			 rc;

	sc = xcalloc(1, sizeof(*sc));
	sc->done_fd = b->done_fd;
	pthread_mutex_init(&sc->lock, NULL);
	/* Timed waits (ring_mem_wait_ms()) on the monotonic clock. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&sc->cond, &attr);
	pthread_condattr_destroy(&attr);
	b->scrubber = sc;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&sc->thread, NULL, ring_mem_scrub_main, b);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		fatalx("cannot start the ring scrubber: %s", strerror(rc));
}

/* Wait until kept memory @m is not being zeroed; under the lock. */
static void
ring_mem_wait_scrubbed(struct ring_budget *b, struct ring_mem *m)
{
	while (b->scrubber != NULL && b->scrubber->busy == m)
		pthread_cond_wait(&b->scrubber->cond, &b->scrubber->lock);
}

/* Stop watching the process that held @m. */
static void
ring_mem_unwatch(struct ring_mem *m)
{
	if (m->ev != NULL)
		event_free(m->ev);
	if (m->pidfd != -1)
		close(m->pidfd);
	m->ev = NULL;
	m->pidfd = -1;
}

/*
 * Unmap, close and uncharge memory; its pages stay for whoever still maps it (memory given up goes through
 * ring_mem_drop() first).
 */
static void
ring_mem_free(struct ring_budget *b, struct ring_mem *m)
{
	ring_mem_unwatch(m);
	free(m->heirs);
	if (m->map != NULL)
		munmap(m->map, m->bytes);
	if (m->memfd != -1)
		close(m->memfd);
	b->used -= m->bytes;
	free(m);
}

/*
 * Give memory up, locked (the scrubber started): still charged, it waits
 * for the scrubber to punch its pages out, and ring_budget_collect() then
 * uncharges it.
 */
static void
ring_mem_drop_locked(struct ring_budget *b, struct ring_mem *m)
{
	ring_mem_unwatch(m);
	m->state = RING_MEM_FREEING;
	TAILQ_INSERT_TAIL(&b->freeing, m, entry);
	b->freeing_bytes += m->bytes;
	pthread_cond_broadcast(&b->scrubber->cond);
}

/* Give memory up (see ring_mem_drop_locked()). */
static void
ring_mem_drop(struct ring_budget *b, struct ring_mem *m)
{
	if (b->scrubber == NULL)
		ring_mem_scrubber_start(b);
	ring_mem_lock(b);
	ring_mem_drop_locked(b, m);
	ring_mem_unlock(b);
}

/* Uncharge memory given up whose pages are punched out. */
void
ring_budget_collect(struct ring_budget *b)
{
	struct ring_mem_list	 done;
	struct ring_mem		*m, *next;

	if (b->scrubber == NULL)
		return;
	TAILQ_INIT(&done);
	ring_mem_lock(b);
	for (m = TAILQ_FIRST(&b->freeing); m != NULL; m = next) {
		next = TAILQ_NEXT(m, entry);
		if (m->state != RING_MEM_FREED)
			continue;
		TAILQ_REMOVE(&b->freeing, m, entry);
		b->freeing_bytes -= m->bytes;
		TAILQ_INSERT_TAIL(&done, m, entry);
	}
	ring_mem_unlock(b);
	while ((m = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, m, entry);
		if (m->punch_errno != 0)
			log_warnx("cannot free the pages of ring memory %llu "
			    "(%llu bytes) that a client may still map: %s",
			    (unsigned long long)m->id,
			    (unsigned long long)m->bytes,
			    strerror(m->punch_errno));
		ring_mem_free(b, m);
	}
}

/* Wait until every memory given up is punched out, and uncharge it. */
void
ring_budget_settle(struct ring_budget *b)
{
	struct ring_mem	*m;

	if (b->scrubber == NULL)
		return;
	ring_mem_lock(b);
	for (;;) {
		TAILQ_FOREACH(m, &b->freeing, entry) {
			if (m->state == RING_MEM_FREEING)
				break;
		}
		if (m == NULL || b->scrubber->stop)
			break;
		pthread_cond_wait(&b->scrubber->cond, &b->scrubber->lock);
	}
	ring_mem_unlock(b);
	ring_budget_collect(b);
}

/* Take kept memory @m out of the list; under the lock, not scrubbing. */
static void
ring_mem_unkeep(struct ring_budget *b, struct ring_mem *m)
{
	TAILQ_REMOVE(&b->kept, m, entry);
	b->kept_bytes -= m->bytes;
}

/*
 * Whether kept memory @m can go to a ring of @content without the main
 * thread zeroing or waiting for more than one chunk: zeroed, of the same
 * dataset, or small.
 */
static bool
ring_mem_ready_for(const struct ring_mem *m, uint64_t content)
{
	return (m->state == RING_MEM_CLEAN || (content != 0 &&
	    m->owner.content == content) || m->bytes <= RING_SCRUB_CHUNK);
}

/* Take kept memory @m out of the list, the scrubber stopped; locked. */
static void
ring_mem_claim(struct ring_budget *b, struct ring_mem *m)
{
	if (m->state == RING_MEM_SCRUBBING)
		m->state = RING_MEM_CLAIMED;
	ring_mem_wait_scrubbed(b, m);
	ring_mem_unkeep(b, m);
}

/*
 * The smallest kept memory of @o's user and group that holds @need bytes
 * without wasting more than a RING_REUSE_SLACK-th of them and is ready
 * for @o's content, out of the list, with nothing in it but zeroes or
 * bytes of that content; or NULL.  Memory still to be zeroed is left to
 * the scrubber: zeroing it here would hold up every other client.
 */
static struct ring_mem *
ring_mem_reuse(struct ring_budget *b, uint64_t need, const struct ring_owner *o)
{
	struct ring_mem	*m, *best = NULL;

	ring_mem_lock(b);
	TAILQ_FOREACH(m, &b->kept, entry) {
		if (m->owner.uid == o->uid && m->owner.gid == o->gid &&
		    m->bytes >= need && m->bytes - need <= need /
		    RING_REUSE_SLACK && ring_mem_ready_for(m, o->content) &&
		    (best == NULL || m->bytes < best->bytes))
			best = m;
	}
	if (best != NULL) {
		ring_mem_claim(b, best);
		/* Small and not zeroed yet (by a stopped scrub): here. */
		if (best->state != RING_MEM_CLEAN && (o->content == 0 ||
		    best->owner.content != o->content))
			ring_mem_zero(best, 0, best->bytes);
		best->state = RING_MEM_IN_USE;
		b->reused++;
	}
	ring_mem_unlock(b);
	return (best);
}

/*
 * Give kept memory up, oldest first, until @need bytes of the budget are
 * free once what is given up is punched out.
 */
static void
ring_mem_make_room(struct ring_budget *b, uint64_t need)
{
	struct ring_mem	*m;
	uint64_t	 used;

	ring_mem_lock(b);
	for (;;) {
		used = b->used - b->freeing_bytes;
		if (b->limit - (used < b->limit ? used : b->limit) >= need ||
		    (m = TAILQ_FIRST(&b->kept)) == NULL)
			break;
		ring_mem_claim(b, m);
		ring_mem_drop_locked(b, m);
	}
	ring_mem_unlock(b);
}

/* New memory of @bytes for a ring: a sealed memfd, mapped here. */
static struct ring_mem *
ring_mem_new(struct ring_budget *b, uint64_t bytes, char **cause)
{
	struct ring_mem	*m;

	m = xcalloc(1, sizeof(*m));
	m->bytes = bytes;
	m->pidfd = -1;
	m->budget = b;
	m->memfd = memfd_create("infeed-ring", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING);
	if (m->memfd == -1 || ftruncate(m->memfd, (off_t)bytes) == -1 ||
	    fcntl(m->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_SEAL) == -1) {
		*cause = xasprintf("cannot create the step ring: %s",
		    strerror(errno));
		goto fail;
	}
	/* Only the daemon's own user may reopen it writable. */
	if (fchmod(m->memfd, 0400) == -1) {
		*cause = xasprintf("cannot protect the step ring: %s",
		    strerror(errno));
		goto fail;
	}
	m->map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
	    m->memfd, 0);
	if (m->map == MAP_FAILED) {
		*cause = xasprintf("cannot map the step ring: %s",
		    strerror(errno));
		m->map = NULL;
		goto fail;
	}
	ring_mem_advise(m->map, bytes);
	m->id = ++b->next_mem_id;
	b->used += bytes;
	b->made++;
	return (m);

fail:
	if (m->memfd != -1)
		close(m->memfd);
	free(m);
	return (NULL);
}

/* Held memory's bytes of @uid (every user's with (uid_t)-1), a pid. */
uint64_t
ring_budget_held_by(const struct ring_budget *b, uid_t uid, pid_t *pid)
{
	const struct ring_mem	*m;
	uint64_t		 n = 0;

	if (pid != NULL)
		*pid = 0;
	TAILQ_FOREACH(m, &b->held, entry) {
		if (uid != (uid_t)-1 && m->owner.uid != uid)
			continue;
		if (pid != NULL && *pid == 0)
			*pid = m->owner.pid;
		n += m->bytes;
	}
	return (n);
}

/*
 * What of the budget ended sessions hold, for a refusal to @o: its own
 * user's processes first (up to four named), which it can do something
 * about.
 */
static char *
ring_mem_held_note(const struct ring_budget *b, const struct ring_owner *o)
{
	const struct ring_mem	*m;
	uint64_t		 mine = 0, others;
	pid_t			 pids[4];
	char			 a[48], c[48], list[64], *mine_s, *note;
	size_t			 n = 0, i, len = 0, nmem = 0;
	bool			 more = false;

	TAILQ_FOREACH(m, &b->held, entry) {
		if (m->owner.uid != o->uid)
			continue;
		mine += m->bytes;
		nmem++;
		for (i = 0; i < n && pids[i] != m->owner.pid; i++)
			;
		if (i == n && n < 4)
			pids[n++] = m->owner.pid;
		else if (i == n)
			more = true;
	}
	others = b->held_bytes - mine;
	list[0] = '\0';
	for (i = 0; i < n; i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d",
		    i == 0 ? "" : ", ", (int)pids[i]);
	if (mine > 0)
		mine_s = xasprintf("; your process%s %s%s still hold%s %s of "
		    "%s (steps received and not released: tensors still "
		    "referenced); drop the tensors or end the process",
		    n > 1 ? "es" : "", list, more ? " and others" : "",
		    n > 1 ? "" : "s", ring_mem_format_bytes(mine, a, sizeof(a)),
		    nmem > 1 ? "ended sessions" : "an ended session");
	else
		mine_s = xstrdup("");
	if (others > 0)
		note = xasprintf("%s; %s is held for ended sessions of other "
		    "users' processes that still hold steps", mine_s,
		    ring_mem_format_bytes(others, c, sizeof(c)));
	else
		note = xstrdup(mine_s);
	free(mine_s);
	return (note);
}

/*
 * Room for @need bytes more: kept memory freed, oldest first, and memory
 * given up waited for when that is enough; else a clause saying what is
 * free (ring_mem_take()'s).
 */
static int
ring_budget_room(struct ring_budget *b, uint64_t need,
    const struct ring_owner *owner, char **cause)
{
	uint64_t	 avail;
	char		 free_[48], limit[48];
	char		*note;

	ring_mem_make_room(b, need);
	if (b->give_back != NULL && (b->limit < b->used ||
	    b->limit - b->used < need))
		b->give_back(b, need);
	avail = b->limit > b->used ? b->limit - b->used : 0;
	/* It fits once memory given up is gone: wait for that, no more. */
	if (need > avail && need - avail <= b->freeing_bytes) {
		ring_budget_settle(b);
		avail = b->limit > b->used ? b->limit - b->used : 0;
	}
	if (need <= avail)
		return (0);
	note = ring_mem_held_note(b, owner);
	*cause = xasprintf("only %s of the daemon's memory budget (%s, "
	    "memory_budget in %s) is free%s",
	    ring_mem_format_bytes(avail, free_, sizeof(free_)),
	    ring_mem_format_bytes(b->limit, limit, sizeof(limit)),
	    b->source, note);
	free(note);
	return (-1);
}

/* Kept memory of the same user, or new memory, charged with @extra. */
struct ring_mem *
ring_mem_take(struct ring_budget *b, uint64_t bytes, uint64_t extra,
    const struct ring_owner *owner, bool *over, char **cause)
{
	struct ring_mem	*m;
	uint64_t	 need;

	*over = false;
	if (__builtin_add_overflow(bytes, extra, &need)) {
		*over = true;
		*cause = xstrdup("that does not fit in memory");
		return (NULL);
	}
	/* Memory that processes gone held is the budget's again. */
	ring_budget_collect(b);
	ring_budget_reap(b);
	if ((m = ring_mem_reuse(b, bytes, owner)) != NULL)
		need = extra;	/* the memory is charged already */
	if (ring_budget_room(b, need, owner, cause) == -1) {
		*over = true;
		/* Kept memory that does not make room goes as room would. */
		if (m != NULL) {
			b->reused--;
			ring_mem_drop(b, m);
		}
		return (NULL);
	}
	if (m == NULL && (m = ring_mem_new(b, bytes, cause)) == NULL)
		return (NULL);
	b->used += extra;
	m->owner = *owner;
	return (m);
}

/* Memory that is no ring's (a shuffle's table), charged if it fits. */
int
ring_budget_charge(struct ring_budget *b, uint64_t bytes,
    const struct ring_owner *owner, char **cause)
{
	ring_budget_collect(b);
	ring_budget_reap(b);
	if (ring_budget_room(b, bytes, owner, cause) == -1)
		return (-1);
	b->used += bytes;
	return (0);
}

/* Give back what ring_budget_charge() charged. */
void
ring_budget_uncharge(struct ring_budget *b, uint64_t bytes)
{
	b->used -= bytes;
}

/* Whether the process that holds @m is gone. */
static bool
ring_mem_holder_gone(const struct ring_mem *m)
{
	struct pollfd	pfd;

	if (m->pidfd != -1) {
		pfd.fd = m->pidfd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		return (poll(&pfd, 1, 0) > 0);
	}
	return (kill(m->owner.pid, 0) == -1 && errno == ESRCH);
}

/* Pass @m to its next holder (ring_mem_hold_for()): false when none. */
static bool
ring_mem_next_holder(struct ring_mem *m)
{
	if (m->nheirs == 0)
		return (false);
	m->owner.pid = m->heirs[0];
	m->nheirs--;
	memmove(m->heirs, m->heirs + 1, m->nheirs * sizeof(*m->heirs));
	return (true);
}

static void	ring_mem_holder_exit_cb(evutil_socket_t, short, void *);

/*
 * Watch the exit of @m's holder, or of the first of its next ones still
 * there: false when none is.  A process already gone, or unknown (a pid
 * of another namespace), holds nothing.
 */
static bool
ring_mem_watch_holder(struct ring_budget *b, struct ring_mem *m)
{
	const struct timeval	poll_tv = { RING_HOLDER_POLL_MS / 1000,
				    RING_HOLDER_POLL_MS % 1000 * 1000 };

	for (;;) {
		if (m->owner.pid <= 0)
			log_warnx("a client of uid %u whose process is not "
			    "known here (of another pid namespace) held steps "
			    "of its ended session; their memory is not kept "
			    "for it: it may read zeroes now",
			    (unsigned)m->owner.uid);
		else if (kill(m->owner.pid, 0) == 0 || errno != ESRCH)
			break;
		if (!ring_mem_next_holder(m))
			return (false);
	}
	m->pidfd = (int)syscall(SYS_pidfd_open, m->owner.pid, 0);
	/*
	 * Without a pidfd (a kernel before 5.3, valgrind), kill(pid, 0) every
	 * RING_HOLDER_POLL_MS: a zombie still counts as there until reaped.
	 */
	if (b->base != NULL) {
		m->ev = m->pidfd != -1 ? event_new(b->base, m->pidfd, EV_READ,
		    ring_mem_holder_exit_cb, m) : event_new(b->base, -1,
		    EV_PERSIST, ring_mem_holder_exit_cb, m);
		if (m->ev != NULL && event_add(m->ev, m->pidfd != -1 ? NULL :
		    &poll_tv) == -1) {
			event_free(m->ev);
			m->ev = NULL;
		}
	}
	return (true);
}

/* Free held memory whose process exited. */
void
ring_budget_reap(struct ring_budget *b)
{
	struct ring_mem	*m, *next;
	char		 size[48];
	pid_t		 gone;

	for (m = TAILQ_FIRST(&b->held); m != NULL; m = next) {
		next = TAILQ_NEXT(m, entry);
		if (!ring_mem_holder_gone(m))
			continue;
		gone = m->owner.pid;
		ring_mem_unwatch(m);
		if (ring_mem_next_holder(m) && ring_mem_watch_holder(b, m)) {
			log_info("process %d (uid %u) exited: the %s of ring "
			    "memory it held stay charged, held by process %d "
			    "(of the same group) until it exits", (int)gone,
			    (unsigned)m->owner.uid, ring_mem_format_bytes(
			    m->bytes, size, sizeof(size)), (int)m->owner.pid);
			continue;
		}
		TAILQ_REMOVE(&b->held, m, entry);
		b->held_bytes -= m->bytes;
		log_info("process %d (uid %u) exited: the %s of ring memory it "
		    "held of an ended session are freed", (int)gone,
		    (unsigned)m->owner.uid, ring_mem_format_bytes(m->bytes, size,
		    sizeof(size)));
		ring_mem_drop(b, m);
	}
}

/* A process that holds memory exited. */
static void
ring_mem_holder_exit_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct ring_mem	*m = arg;

	(void)fd;
	(void)ev;
	ring_budget_reap(m->budget);
}

/*
 * Hold @m for its client's process (or those of ring_mem_hold_for()),
 * which still holds steps in it: still charged, its pages as they are,
 * until the process exits.
 */
static void
ring_mem_hold(struct ring_budget *b, struct ring_mem *m)
{
	char	size[48];

	if (!ring_mem_watch_holder(b, m)) {
		ring_mem_drop(b, m);
		return;
	}
	m->state = RING_MEM_HELD;
	TAILQ_INSERT_TAIL(&b->held, m, entry);
	b->held_bytes += m->bytes;
	log_info("process %d (uid %u) still holds steps of its ended session: "
	    "the %s of its ring stay charged to the memory budget until it "
	    "exits", (int)m->owner.pid, (unsigned)m->owner.uid,
	    ring_mem_format_bytes(m->bytes, size, sizeof(size)));
	/* Gone in between: its pidfd is readable already. */
	ring_budget_reap(b);
}

/* The processes that hold @m when it is released held. */
void
ring_mem_hold_for(struct ring_mem *m, const pid_t *pids, size_t n)
{
	free(m->heirs);
	m->owner.pid = pids[0];
	m->nheirs = n - 1;
	m->heirs = xcalloc(n, sizeof(*m->heirs));
	memcpy(m->heirs, pids + 1, m->nheirs * sizeof(*m->heirs));
}

/* A ring is over: hold its memory, keep it or give it up. */
void
ring_mem_release(struct ring_mem *m, uint64_t extra, bool held, bool keep)
{
	struct ring_budget	*b = m->budget;

	b->used -= extra;
	if (held) {
		ring_mem_hold(b, m);
		return;
	}
	/* Not held: whoever ring_mem_hold_for() named holds nothing. */
	free(m->heirs);
	m->heirs = NULL;
	m->nheirs = 0;
	if (keep && b->keep_ms > 0) {
		if (b->scrubber == NULL)
			ring_mem_scrubber_start(b);
		ring_mem_lock(b);
		m->state = RING_MEM_DIRTY;
		m->idle_since_ms = clock_now_ms();
		TAILQ_INSERT_TAIL(&b->kept, m, entry);
		b->kept_bytes += m->bytes;
		pthread_cond_broadcast(&b->scrubber->cond);
		ring_mem_unlock(b);
	} else
		ring_mem_drop(b, m);
}

/* Free memory and uncharge it now. */
void
ring_mem_destroy(struct ring_mem *m, uint64_t extra)
{
	m->budget->used -= extra;
	ring_mem_free(m->budget, m);
}

/* Whether memory is kept for a next ring. */
bool
ring_budget_keeps(struct ring_budget *b, uint64_t mem_id)
{
	struct ring_mem	*m;
	bool		 kept = false;

	ring_mem_lock(b);
	TAILQ_FOREACH(m, &b->kept, entry) {
		if (m->id == mem_id) {
			kept = true;
			break;
		}
	}
	ring_mem_unlock(b);
	return (kept);
}

/* Free kept memory unused for keep_ms. */
void
ring_budget_trim(struct ring_budget *b, uint64_t now_ms)
{
	struct ring_mem	*m, *next;

	ring_mem_lock(b);
	for (m = TAILQ_FIRST(&b->kept); m != NULL; m = next) {
		next = TAILQ_NEXT(m, entry);
		/* The scrubber may have restarted the clock after @now_ms. */
		if (m->state == RING_MEM_SCRUBBING || (b->keep_ms > 0 &&
		    (now_ms <= m->idle_since_ms ||
		    now_ms - m->idle_since_ms < b->keep_ms)))
			continue;
		ring_mem_unkeep(b, m);
		ring_mem_drop_locked(b, m);
	}
	ring_mem_unlock(b);
	ring_budget_collect(b);
	ring_budget_reap(b);
}

/* Stop the scrubber and free every kept memory. */
void
ring_budget_clear(struct ring_budget *b)
{
	struct ring_scrubber	*sc = b->scrubber;
	struct ring_mem		*m;

	if (b->give_back != NULL)
		b->give_back(b, UINT64_MAX);
	if (sc != NULL) {
		pthread_mutex_lock(&sc->lock);
		sc->stop = true;
		pthread_cond_broadcast(&sc->cond);
		pthread_mutex_unlock(&sc->lock);
		pthread_join(sc->thread, NULL);
		pthread_mutex_destroy(&sc->lock);
		pthread_cond_destroy(&sc->cond);
		free(sc);
		b->scrubber = NULL;
	}
	while ((m = TAILQ_FIRST(&b->kept)) != NULL) {
		ring_mem_unkeep(b, m);
		ring_mem_free(b, m);
	}
	/* The daemon goes: what clients hold stays as it is, theirs. */
	while ((m = TAILQ_FIRST(&b->held)) != NULL) {
		TAILQ_REMOVE(&b->held, m, entry);
		b->held_bytes -= m->bytes;
		ring_mem_free(b, m);
	}
	while ((m = TAILQ_FIRST(&b->freeing)) != NULL) {
		TAILQ_REMOVE(&b->freeing, m, entry);
		b->freeing_bytes -= m->bytes;
		ring_mem_free(b, m);
	}
	if (b->done_ev != NULL)
		event_free(b->done_ev);
	if (b->done_fd != -1)
		close(b->done_fd);
	b->done_ev = NULL;
	b->done_fd = -1;
}

/* The scrubber punched memory out: uncharge it. */
static void
ring_mem_punched_cb(evutil_socket_t fd, short ev, void *arg)
{
	eventfd_t	v;

	(void)ev;
	(void)eventfd_read(fd, &v);
	ring_budget_collect(arg);
}

/* Watch held memory's processes, and the scrubber's punches, on @base. */
void
ring_budget_watch(struct ring_budget *b, struct event_base *base)
{
	b->base = base;
	if (b->scrubber != NULL || b->done_ev != NULL)
		fatalx("ring_budget_watch: called twice or too late");
	if ((b->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1 ||
	    (b->done_ev = event_new(base, b->done_fd, EV_READ | EV_PERSIST,
	    ring_mem_punched_cb, b)) == NULL || event_add(b->done_ev, NULL) == -1)
		fatal("cannot watch the ring scrubber");
}

/* An empty budget. */
void
ring_budget_init(struct ring_budget *b, uint64_t limit, const char *source,
    uint64_t keep_ms)
{
	memset(b, 0, sizeof(*b));
	b->limit = limit;
	b->source = source;
	b->keep_ms = keep_ms;
	b->scrub_after_ms = RING_SCRUB_AFTER_MS;
	TAILQ_INIT(&b->kept);
	TAILQ_INIT(&b->held);
	TAILQ_INIT(&b->freeing);
	b->done_fd = -1;
}

/* Huge pages for a ring's mapping where the kernel gives them. */
void
ring_mem_advise(void *map, uint64_t bytes)
{
#ifdef MADV_HUGEPAGE
	(void)madvise(map, bytes, MADV_HUGEPAGE);
#else
	(void)map;
	(void)bytes;
#endif
}

/* The bracketed word of shmem_enabled, e.g. "always [advise] never". */
const char *
ring_mem_huge_pages(void)
{
	static char	 mode[32];
	char		 line[256], *open_, *close_;
	FILE		*fp;

	snprintf(mode, sizeof(mode), "unknown");
	if ((fp = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled",
	    "re")) == NULL)
		return (mode);
	if (fgets(line, sizeof(line), fp) != NULL &&
	    (open_ = strchr(line, '[')) != NULL &&
	    (close_ = strchr(open_, ']')) != NULL &&
	    close_ - open_ - 1 < (int)sizeof(mode))
		snprintf(mode, sizeof(mode), "%.*s", (int)(close_ - open_ - 1),
		    open_ + 1);
	fclose(fp);
	return (mode);
}

/* A read-only descriptor of the memory, so the client cannot write it. */
int
ring_mem_readonly_fd(const struct ring_mem *m)
{
	char	path[64];
	int	fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", m->memfd);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		fd = fcntl(m->memfd, F_DUPFD_CLOEXEC, 0);
	return (fd);
}
