/* SPDX-License-Identifier: MIT */
/*
 * The checks of an Attach (see attach-check.h), moved off the event loop.
 * Whatever an Attach asks of what its client controls runs on a helper
 * thread, never on the event loop: fstat and the headers of the client's
 * files (a file on the client's own FUSE mount may never answer) and the
 * client's groups for allow_groups (the group database may be LDAP, and
 * slow).  The checks are counted per uid, so that what one user's files
 * or groups do holds only that user's Attach requests: at most
 * INFEED_MAX_ATTACH_CHECKS threads run for one uid's live Attach requests,
 * INFEED_MAX_ATTACH_QUEUE more of its wait; a check not done in
 * INFEED_ATTACH_CHECK_S, or whose client hung up, is given up: its Attach
 * gets an error, and its thread, which nothing can stop, is counted as
 * stuck against that uid until it returns (past INFEED_MAX_STUCK_CHECKS of
 * one uid, that uid's Attach requests that need a thread are refused).
 * However many uids, at most INFEED_MAX_ATTACH_THREADS threads exist,
 * running and stuck together: a check waits for one to return beyond
 * that.  A thread touches only its own job; it hands it back on a list
 * under the mutex and wakes the loop through a pipe.  Descriptors that
 * came with the frame stay open until the loop frees the job, so a worker
 * forked meanwhile can close them (the thread checks duplicates, made
 * after its first reads, which such a worker may keep).
 *
 * Then, when a removed ring's job is still running in a worker, the
 * Attach waits up to POOL_SETTLE_MS for its memory on a timer, so that a
 * trainer started again gets its old ring memory back without the loop
 * ever blocking; and when it asks a tokens dataset for a seq_len that no
 * section packs, it waits, on the same timer and up to
 * INFEED_ATTACH_CHECK_S, for the packing made for it (packings.c).
 */

#include <sys/queue.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "attach-check.h"
#include "clock.h"
#include "log.h"
#include "packings.h"
#include "session-check.h"
#include "xmalloc.h"

#define ATTACH_SETTLE_POLL_MS	2	/* how often a settling Attach looks */

/* What a job's thread is doing, for the message when it takes too long. */
enum attach_stage {
	STAGE_QUEUED,		/* no thread yet */
	STAGE_DATA,		/* fstat and header of the data file */
	STAGE_LABELS,		/* ... of the labels file */
	STAGE_FILES,		/* both, through the readers' checks */
	STAGE_GROUPS,		/* the client's groups, from NSS */
	STAGE_DONE,
};

struct attach_checks;

/* The work of one Attach on a helper thread. */
struct attach_job {
	TAILQ_ENTRY(attach_job)	 entry;	/* queue, then done list */
	TAILQ_ENTRY(attach_job)	 all;	/* the loop's, till freed */
	struct attach_checks		*sc;
	struct attach_pending		*p;	/* NULL: given up */
	/* Read by the thread, set before it starts. */
	char				*name;
	struct dataset_files		 spec;
	int				 fds[2];	/* the frame's */
	size_t				 nfds;
	bool				 want_groups;
	uid_t				 uid;
	gid_t				 gid;
	/* Written by the thread, read by the loop once it is done. */
	atomic_int			 stage;
	struct dataset			*ds;
	bool				 content;
	char				*cause;
	gid_t				*groups;
	size_t				 ngroups;
	bool				 have_groups;
};
TAILQ_HEAD(attach_job_list, attach_job);

struct attach_pending {
	TAILQ_ENTRY(attach_pending)	 entry;
	struct attach_checks		*sc;
	struct session_attach		 a;	/* a copy */
	struct session_client		 client;
	struct attach_job		*job;	/* while it runs or waits */
	struct event			*timer;	/* deadline, then settling */
	uint64_t			 settle_until_ms;
	struct packings			*packs;	/* a packing to wait for */
	uint64_t			 pack_until_ms;
	attach_checked_cb		*cb;
	void				*arg;
	struct session_checked		 chk;
	bool				 failed;
	enum errcode		 code;
	char				*cause;
};
TAILQ_HEAD(attach_pending_list, attach_pending);

/* What a uid's checks are doing, counted in attach_count(). */
enum attach_count {
	COUNT_QUEUED,		/* waiting for a thread */
	COUNT_RUNNING,		/* on a thread, for a live Attach */
	COUNT_STUCK,		/* on a thread, given up, not returned */
	COUNT_N,
};

/* One uid's checks; an entry goes once its counts are all 0. */
struct attach_uid {
	uid_t		uid;
	unsigned	n[COUNT_N];
};

struct attach_checks {
	struct event_base		*base;
	struct pool			*pool;
	struct attach_pending_list	 pending;
	struct attach_job_list		 queue;	/* not started */
	struct attach_job_list		 jobs;	/* every job not freed */
	unsigned			 n[COUNT_N];	/* all uids' */
	struct attach_uid		*uids;
	size_t				 nuids;
	bool				 stopping;	/* start no thread */
	int				 wake[2];	/* pipe */
	struct event			*wake_ev;
	/* Shared with the threads. */
	pthread_mutex_t			 mtx;
	struct attach_job_list		 done;
	unsigned			 threads;
	bool				 closing;
};

static void	attach_check_run(struct attach_checks *);

/* The counts of @uid's checks; zeros when it has none. */
static struct attach_uid
attach_uid_counts(const struct attach_checks *sc, uid_t uid)
{
	struct attach_uid	none = { .uid = uid };
	size_t			i;

	for (i = 0; i < sc->nuids; i++)
		if (sc->uids[i].uid == uid)
			return (sc->uids[i]);
	return (none);
}

/* Count @delta more (or fewer) checks of @uid in state @c. */
static void
attach_count(struct attach_checks *sc, uid_t uid, enum attach_count c,
    int delta)
{
	struct attach_uid	*u;
	size_t			 i;
	int			 k;

	for (i = 0; i < sc->nuids && sc->uids[i].uid != uid; i++)
		;
	if (i == sc->nuids) {
		sc->uids = xreallocarray(sc->uids, sc->nuids + 1,
		    sizeof(*sc->uids));
		memset(&sc->uids[i], 0, sizeof(sc->uids[i]));
		sc->uids[i].uid = uid;
		sc->nuids++;
	}
	u = &sc->uids[i];
	u->n[c] += (unsigned)delta;
	sc->n[c] += (unsigned)delta;
	for (k = 0; k < COUNT_N; k++)
		if (u->n[k] != 0)
			return;
	sc->uids[i] = sc->uids[--sc->nuids];
}

/* Free a job: the loop's side, or a thread's once the loop has gone. */
static void
attach_job_free(struct attach_job *j)
{
	size_t	i;

	for (i = 0; i < j->nfds; i++)
		if (j->fds[i] != -1)
			close(j->fds[i]);
	dataset_free(j->ds);
	free(j->groups);
	free(j->cause);
	free(j->name);
	free(j);
}

/*
 * Check the client's files as the catalogue's readers do, on the thread.
 * Each file's fstat and first bytes are read first, one file at a time, so
 * that a file that does not answer can be named; then the readers' checks
 * run on duplicates (taken over by the dataset), the frame's descriptors
 * staying the loop's.
 */
static void
attach_job_files(struct attach_job *j)
{
	struct stat	sb;
	uint8_t		head[128];
	int		dfd[2] = { -1, -1 };
	size_t		i;

	for (i = 0; i < j->nfds; i++) {
		atomic_store(&j->stage, i == 0 ? STAGE_DATA : STAGE_LABELS);
		if (fstat(j->fds[i], &sb) == 0 && S_ISREG(sb.st_mode) &&
		    sb.st_size > 0 && (i == 0 ? j->spec.data_format :
		    j->spec.labels_format) == DATASET_FORMAT_NPY)
			(void)!pread(j->fds[i], head, (size_t)sb.st_size <
			    sizeof(head) ? (size_t)sb.st_size : sizeof(head), 0);
	}
	atomic_store(&j->stage, STAGE_FILES);
	for (i = 0; i < j->nfds; i++) {
		if ((dfd[i] = fcntl(j->fds[i], F_DUPFD_CLOEXEC, 0)) == -1) {
			if (asprintf(&j->cause, "cannot duplicate the files' "
			    "descriptors: %s", strerror(errno)) == -1)
				j->cause = NULL;
			if (i == 1)
				close(dfd[0]);
			return;
		}
	}
	j->ds = dataset_open_files(j->name, &j->spec, dfd[0], dfd[1], false,
	    &j->content, &j->cause);
}

/* A helper thread: do the job, hand it back to the loop, wake it. */
static void *
attach_job_run(void *arg)
{
	struct attach_job	*j = arg;
	struct attach_checks	*sc = j->sc;
	bool			 last;
	char			 c = 1;

	if (j->nfds > 0)
		attach_job_files(j);
	if (j->want_groups) {
		atomic_store(&j->stage, STAGE_GROUPS);
		j->have_groups = catalogue_user_groups(j->uid, j->gid,
		    &j->groups, &j->ngroups) == 0;
	}
	atomic_store(&j->stage, STAGE_DONE);
	pthread_mutex_lock(&sc->mtx);
	if (sc->closing) {
		/* The daemon is stopping: nothing waits for this any more. */
		attach_job_free(j);
		last = --sc->threads == 0;
		pthread_mutex_unlock(&sc->mtx);
		if (last) {
			pthread_mutex_destroy(&sc->mtx);
			free(sc);
		}
		return (NULL);
	}
	TAILQ_INSERT_TAIL(&sc->done, j, entry);
	sc->threads--;
	(void)!write(sc->wake[1], &c, 1);	/* full: already woken */
	pthread_mutex_unlock(&sc->mtx);
	return (NULL);
}

/* The pending Attach can end: its owner calls attach_check_end(). */
static void
attach_pending_ready(struct attach_pending *p)
{
	evtimer_del(p->timer);
	p->cb(p->arg);
}

/*
 * Fail the pending Attach with @code and a message: now, or, when @later,
 * on the next loop pass (the caller may be attach_check_begin(), which
 * never calls back).
 */
static void PRINTFLIKE(4, 5)
attach_pending_fail(struct attach_pending *p, bool later,
    enum errcode code, const char *fmt, ...)
{
	struct timeval	zero = { 0, 0 };
	va_list		ap;

	p->failed = true;
	p->code = code;
	va_start(ap, fmt);
	if (vasprintf(&p->cause, fmt, ap) == -1)
		fatal("vasprintf");
	va_end(ap);
	if (!later) {
		attach_pending_ready(p);
		return;
	}
	p->settle_until_ms = 0;		/* the timer finds it ready */
	evtimer_add(p->timer, &zero);
}

/*
 * Settling: go on once no removed ring's job runs and no packing is under
 * way, each waited for until its time is up.
 */
static void
attach_pending_settle(struct attach_pending *p)
{
	struct timeval	tv = { 0, ATTACH_SETTLE_POLL_MS * 1000 };
	uint64_t	now = clock_now_ms();

	if (p->failed || ((!pool_settling(p->sc->pool) ||
	    now >= p->settle_until_ms) && (!packings_pending(p->packs) ||
	    now >= p->pack_until_ms))) {
		attach_pending_ready(p);
		return;
	}
	evtimer_add(p->timer, &tv);
}

/* The thread's answer for pending Attach @p. */
static void
attach_pending_checked(struct attach_pending *p, struct attach_job *j)
{
	p->job = NULL;
	evtimer_del(p->timer);
	if (j->nfds > 0 && j->ds == NULL) {
		p->failed = true;
		p->code = j->content ? ERRCODE_DATA :
		    ERRCODE_INVALID_ARGUMENT;
		p->cause = j->cause != NULL ? j->cause :
		    xasprintf("out of memory");
		j->cause = NULL;
		attach_pending_ready(p);
		return;
	}
	p->chk.ds = j->ds;
	j->ds = NULL;
	p->chk.files = j->spec;
	p->chk.have_groups = j->have_groups;
	p->chk.groups = j->groups;
	p->chk.ngroups = j->ngroups;
	j->groups = NULL;
	p->settle_until_ms = clock_now_ms() + POOL_SETTLE_MS;
	attach_pending_settle(p);
}

/* Threads handed jobs back: answer their Attaches, start queued ones. */
static void
attach_check_wake_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct attach_checks	*sc = arg;
	struct attach_job_list	 done;
	struct attach_job	*j;
	char			 buf[64];

	(void)ev;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	TAILQ_INIT(&done);
	pthread_mutex_lock(&sc->mtx);
	TAILQ_CONCAT(&done, &sc->done, entry);
	pthread_mutex_unlock(&sc->mtx);
	while ((j = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, j, entry);
		TAILQ_REMOVE(&sc->jobs, j, all);
		if (j->p == NULL) {
			attach_count(sc, j->uid, COUNT_STUCK, -1);
			log_debug("a helper thread checking an Attach of uid %u "
			    "returned after it was given up (%u still out)",
			    (unsigned)j->uid, sc->n[COUNT_STUCK]);
		} else {
			attach_count(sc, j->uid, COUNT_RUNNING, -1);
			attach_pending_checked(j->p, j);
		}
		attach_job_free(j);
	}
	attach_check_run(sc);
}

/*
 * Start queued jobs, oldest first, of each uid that runs fewer than
 * INFEED_MAX_ATTACH_CHECKS and has fewer than INFEED_MAX_STUCK_CHECKS
 * given up, while fewer than INFEED_MAX_ATTACH_THREADS threads exist:
 * threads stay bounded however many files never answer, and one uid's
 * never take another's turn.
 */
static void
attach_check_run(struct attach_checks *sc)
{
	struct attach_job	*j, *next;
	struct attach_uid	 u;
	pthread_attr_t		 attr;
	pthread_t		 t;
	int			 rc;

	for (j = TAILQ_FIRST(&sc->queue); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (sc->stopping || sc->n[COUNT_RUNNING] +
		    sc->n[COUNT_STUCK] >= INFEED_MAX_ATTACH_THREADS)
			return;
		u = attach_uid_counts(sc, j->uid);
		if (u.n[COUNT_RUNNING] >= INFEED_MAX_ATTACH_CHECKS ||
		    u.n[COUNT_STUCK] >= INFEED_MAX_STUCK_CHECKS)
			continue;
		TAILQ_REMOVE(&sc->queue, j, entry);
		attach_count(sc, j->uid, COUNT_QUEUED, -1);
		atomic_store(&j->stage, j->nfds > 0 ? STAGE_DATA :
		    STAGE_GROUPS);
		pthread_mutex_lock(&sc->mtx);
		sc->threads++;
		pthread_mutex_unlock(&sc->mtx);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &attr, attach_job_run, j);
		pthread_attr_destroy(&attr);
		if (rc == 0) {
			attach_count(sc, j->uid, COUNT_RUNNING, 1);
			continue;
		}
		pthread_mutex_lock(&sc->mtx);
		sc->threads--;
		pthread_mutex_unlock(&sc->mtx);
		TAILQ_REMOVE(&sc->jobs, j, all);
		j->p->job = NULL;
		attach_pending_fail(j->p, true,
		    ERRCODE_RESOURCE_EXHAUSTED, "infeedd "
		    "cannot start a thread to check this Attach: %s; try "
		    "again later", strerror(rc));
		attach_job_free(j);
	}
}

/*
 * Give up running job @j: nothing waits for it any more, and its thread
 * counts as stuck against its uid until it returns.
 */
static void
attach_job_give_up(struct attach_checks *sc, struct attach_job *j)
{
	pthread_mutex_lock(&sc->mtx);
	j->p = NULL;
	pthread_mutex_unlock(&sc->mtx);
	attach_count(sc, j->uid, COUNT_RUNNING, -1);
	attach_count(sc, j->uid, COUNT_STUCK, 1);
}

/* A pending Attach's deadline (or, settling, its next look). */
static void
attach_pending_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct attach_pending	*p = arg;
	struct attach_checks	*sc = p->sc;
	struct attach_job	*j = p->job;
	struct attach_uid	 u;
	const char		*file;
	int			 stage;

	(void)fd;
	(void)ev;
	if (j == NULL) {
		attach_pending_settle(p);
		return;
	}
	p->job = NULL;
	stage = atomic_load(&j->stage);
	if (stage == STAGE_QUEUED) {
		TAILQ_REMOVE(&sc->queue, j, entry);
		TAILQ_REMOVE(&sc->jobs, j, all);
		attach_count(sc, j->uid, COUNT_QUEUED, -1);
		attach_job_free(j);
		u = attach_uid_counts(sc, p->client.uid);
		attach_pending_fail(p, false,
		    ERRCODE_RESOURCE_EXHAUSTED, "infeedd is "
		    "busy checking other Attach requests (of uid %u: %u "
		    "running, %u waiting, %u that never returned; of all "
		    "users: %u threads of at most %d) and did not get to "
		    "this one in %d s; try again later",
		    (unsigned)p->client.uid, u.n[COUNT_RUNNING],
		    u.n[COUNT_QUEUED], u.n[COUNT_STUCK], sc->n[COUNT_RUNNING] +
		    sc->n[COUNT_STUCK], INFEED_MAX_ATTACH_THREADS,
		    INFEED_ATTACH_CHECK_S);
		return;
	}
	/* The thread cannot be stopped: its job is given up. */
	attach_job_give_up(sc, j);
	log_warnx("client %llu (pid %d, uid %u): an Attach's check did not "
	    "return in %d s (%s); %u such checks of uid %u are out",
	    (unsigned long long)p->client.peer_id, (int)p->client.pid,
	    (unsigned)p->client.uid, INFEED_ATTACH_CHECK_S,
	    stage == STAGE_GROUPS ? "the group database" : "the client's "
	    "files", attach_uid_counts(sc, j->uid).n[COUNT_STUCK],
	    (unsigned)j->uid);
	attach_check_run(sc);
	if (stage == STAGE_GROUPS) {
		attach_pending_fail(p, false,
		    ERRCODE_RESOURCE_EXHAUSTED, "the host's "
		    "group database did not answer in %d s when infeedd asked "
		    "for the groups of uid %u, which allow_groups of '%s' "
		    "needs; try again later, and tell the operator (NSS, "
		    "LDAP or SSSD may be down)", INFEED_ATTACH_CHECK_S,
		    (unsigned)p->client.uid, p->a.dataset);
		return;
	}
	file = stage == STAGE_DATA ? "the data file" : stage == STAGE_LABELS ?
	    "the labels file" : "the data or the labels file";
	attach_pending_fail(p, false, ERRCODE_DATA, "%s did not "
	    "answer in %d s: fstat or a read of its header never returned "
	    "(a file on a FUSE or network mount that does not answer?); "
	    "infeedd gave up on it.  Fix the mount, or copy the file to a "
	    "local disk, and Attach again", file, INFEED_ATTACH_CHECK_S);
}

/* The helper threads' state, with the loop's end of their pipe. */
struct attach_checks *
attach_check_new(struct event_base *base, struct pool *pool)
{
	struct attach_checks	*sc;

	sc = xcalloc(1, sizeof(*sc));
	sc->base = base;
	sc->pool = pool;
	TAILQ_INIT(&sc->pending);
	TAILQ_INIT(&sc->queue);
	TAILQ_INIT(&sc->jobs);
	TAILQ_INIT(&sc->done);
	if (pthread_mutex_init(&sc->mtx, NULL) != 0)
		fatalx("pthread_mutex_init");
	if (pipe2(sc->wake, O_NONBLOCK | O_CLOEXEC) == -1)
		fatal("pipe2");
	sc->wake_ev = event_new(base, sc->wake[0], EV_READ | EV_PERSIST,
	    attach_check_wake_cb, sc);
	if (sc->wake_ev == NULL || event_add(sc->wake_ev, NULL) == -1)
		fatalx("event_new for the helper threads");
	return (sc);
}

/* Free a pending Attach and what it holds. */
static void
attach_pending_free(struct attach_pending *p)
{
	TAILQ_REMOVE(&p->sc->pending, p, entry);
	event_free(p->timer);
	session_attach_clear(&p->a);
	dataset_free(p->chk.ds);
	free(p->chk.groups);
	free(p->cause);
	free(p);
}

/*
 * Free it all.  Threads still running (stuck on a file, in shutdown) free
 * their own jobs when they return, and the last one frees @sc: nothing
 * waits for them, so SIGTERM ends the daemon whatever they do.
 */
void
attach_check_free(struct attach_checks *sc)
{
	struct attach_job	*j;
	bool			 last;

	if (sc == NULL)
		return;
	sc->stopping = true;
	while (!TAILQ_EMPTY(&sc->pending))
		attach_check_cancel(TAILQ_FIRST(&sc->pending));
	event_free(sc->wake_ev);
	pthread_mutex_lock(&sc->mtx);
	sc->closing = true;
	/* Handed back, not read yet. */
	while ((j = TAILQ_FIRST(&sc->done)) != NULL) {
		TAILQ_REMOVE(&sc->done, j, entry);
		attach_job_free(j);
	}
	close(sc->wake[0]);
	close(sc->wake[1]);
	free(sc->uids);
	sc->uids = NULL;
	sc->nuids = 0;
	last = sc->threads == 0;
	pthread_mutex_unlock(&sc->mtx);
	if (!last)
		return;
	pthread_mutex_destroy(&sc->mtx);
	free(sc);
}

/*
 * Attach requests waiting for checks or for memory, and checks given up
 * whose threads have not returned (they hold the frames' descriptors).
 */
unsigned
attach_check_pending(const struct attach_checks *sc)
{
	const struct attach_pending	*p;
	unsigned			 n = sc->n[COUNT_STUCK];

	TAILQ_FOREACH(p, &sc->pending, entry)
		n++;
	return (n);
}

/*
 * Why an Attach of @uid that needs a thread is refused at once (its uid's
 * checks given up, every thread's given up, or its uid's running and
 * queue full), or NULL: it may queue.
 */
static char *
attach_check_room(const struct attach_checks *sc, uid_t uid)
{
	struct attach_uid	u = attach_uid_counts(sc, uid);

	if (u.n[COUNT_STUCK] >= INFEED_MAX_STUCK_CHECKS)
		return (xasprintf("%u checks of files or groups for Attach "
		    "requests of uid %u were given up and have not returned "
		    "(files on mounts that do not answer, or a group "
		    "database that does not); infeedd takes no Attach of "
		    "uid %u that needs one until they do (at most %d may be "
		    "out a user): fix the mount or copy the files to a local "
		    "disk, or attach to a catalogue dataset, and try again "
		    "later", u.n[COUNT_STUCK], (unsigned)uid, (unsigned)uid,
		    INFEED_MAX_STUCK_CHECKS));
	if (sc->n[COUNT_STUCK] >= INFEED_MAX_ATTACH_THREADS)
		return (xasprintf("%u checks of clients' files or groups "
		    "were given up and have not returned (files on mounts "
		    "that do not answer, or a group database that does not); "
		    "infeedd takes no Attach that needs one until some do "
		    "(at most %d threads): try again later, or attach to a "
		    "catalogue dataset, and tell the operator",
		    sc->n[COUNT_STUCK], INFEED_MAX_ATTACH_THREADS));
	if (u.n[COUNT_RUNNING] >= INFEED_MAX_ATTACH_CHECKS &&
	    u.n[COUNT_QUEUED] >= INFEED_MAX_ATTACH_QUEUE)
		return (xasprintf("infeedd is checking %u other Attach "
		    "requests' files or groups of uid %u and %u more wait (at "
		    "most %d and %d a user); try again in a moment",
		    u.n[COUNT_RUNNING], (unsigned)uid, u.n[COUNT_QUEUED],
		    INFEED_MAX_ATTACH_CHECKS, INFEED_MAX_ATTACH_QUEUE));
	return (NULL);
}

/* Begin an Attach: see attach-check.h. */
int
attach_check_begin(struct attach_checks *sc,
    const struct session_host *host, const struct session_client *client,
    const struct session_attach *a, int *fds, size_t nfds,
    attach_checked_cb *cb, void *arg, struct attach_pending **out,
    enum errcode *code, char **cause)
{
	struct attach_pending	*p;
	struct attach_job	*j = NULL;
	struct dataset_files	 spec;
	struct timeval		 tv = { INFEED_ATTACH_CHECK_S, 0 };
	size_t			 idx, i;
	bool			 groups = false, packing;

	*out = NULL;
	*cause = NULL;
	/* Descriptors without files: session_check() refuses them. */
	if (!a->has_files && nfds > 0)
		return (0);
	if (!a->has_files && catalogue_find(host->cat, a->dataset,
	    &idx) != NULL)
		groups = !catalogue_allows_gid(host->cat, idx, client->gid);
	/* A packing for its seq_len: started now, when access is clear. */
	packing = !groups && session_check_packing(host, a);
	/* Nothing of the client's to check, and nothing to wait for. */
	if (!a->has_files && !groups && !packing && !pool_settling(sc->pool))
		return (0);
	if (a->has_files &&
	    session_files_check(a, nfds, &spec, code, cause) == -1)
		goto refuse;
	*code = ERRCODE_RESOURCE_EXHAUSTED;
	if ((a->has_files || groups) &&
	    (*cause = attach_check_room(sc, client->uid)) != NULL)
		goto refuse;

	p = xcalloc(1, sizeof(*p));
	p->sc = sc;
	session_attach_copy(&p->a, a);
	p->client = *client;
	p->cb = cb;
	p->arg = arg;
	if ((p->timer = evtimer_new(sc->base, attach_pending_timer_cb, p)) ==
	    NULL)
		fatalx("evtimer_new");
	TAILQ_INSERT_TAIL(&sc->pending, p, entry);
	*out = p;
	if (!a->has_files && !groups) {
		p->packs = packing ? host->packs : NULL;
		p->pack_until_ms = clock_now_ms() + INFEED_ATTACH_CHECK_S * 1000;
		p->settle_until_ms = clock_now_ms() + POOL_SETTLE_MS;
		attach_pending_settle(p);	/* not ready: it settles */
		return (1);
	}
	j = xcalloc(1, sizeof(*j));
	j->sc = sc;
	j->p = p;
	j->name = xstrdup(a->dataset);
	j->spec = spec;
	j->nfds = a->has_files ? nfds : 0;
	for (i = 0; i < j->nfds; i++)
		j->fds[i] = fds[i];
	j->want_groups = groups;
	j->uid = client->uid;
	j->gid = client->gid;
	atomic_init(&j->stage, STAGE_QUEUED);
	p->job = j;
	TAILQ_INSERT_TAIL(&sc->jobs, j, all);
	TAILQ_INSERT_TAIL(&sc->queue, j, entry);
	attach_count(sc, j->uid, COUNT_QUEUED, 1);
	evtimer_add(p->timer, &tv);
	attach_check_run(sc);
	return (1);

refuse:
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	return (-1);
}

/* The dataset (or session) name a pending Attach asks for. */
const char *
attach_check_name(const struct attach_pending *p)
{
	return (p->a.dataset);
}

/*
 * Have the workers map the client's files when its uid's, and all
 * clients', mapped files stay within bounds (dataset_files_charge()), else
 * read them with pread: a client's sparse files of tens of TiB cannot
 * take the workers' address space from the others.
 */
static void
attach_check_charge(struct attach_pending *p)
{
	uint64_t	mine, all;

	if (dataset_files_charge(p->chk.ds, p->client.uid, &p->chk.files))
		return;
	mine = dataset_charged(p->client.uid, &all);
	log_info("client %llu (pid %d, uid %u): the workers read its files "
	    "for '%s' (%llu MiB) with pread, not mapped: uid %u has %llu MiB "
	    "of files mapped, of at most %llu, and all clients %llu MiB, of "
	    "at most %llu", (unsigned long long)p->client.peer_id,
	    (int)p->client.pid, (unsigned)p->client.uid, p->a.dataset,
	    (unsigned long long)(dataset_files_bytes(p->chk.ds) >> 20),
	    (unsigned)p->client.uid, (unsigned long long)(mine >> 20),
	    (unsigned long long)(DATASET_FILES_MAP_UID_MAX >> 20),
	    (unsigned long long)(all >> 20),
	    (unsigned long long)(DATASET_FILES_MAP_MAX >> 20));
}

/* End a pending Attach whose callback came: make the session, or fail. */
struct session *
attach_check_end(struct attach_pending *p, const struct session_host *host,
    const struct session_events *ev, void *arg, enum errcode *code,
    char **cause)
{
	struct session	*s = NULL;

	*cause = NULL;
	if (p->failed) {
		*code = p->code;
		*cause = p->cause;
		p->cause = NULL;
	} else {
		if (p->chk.ds != NULL)
			attach_check_charge(p);
		s = session_new(host, &p->client, &p->a, NULL, 0, &p->chk, ev,
		    arg, code, cause);
	}
	attach_pending_free(p);
	return (s);
}

/*
 * The client went away: no callback.  A job still queued goes now; one
 * running is given up, and freed when its thread returns.
 */
void
attach_check_cancel(struct attach_pending *p)
{
	struct attach_checks	*sc = p->sc;
	struct attach_job	*j = p->job;

	if (j != NULL && atomic_load(&j->stage) == STAGE_QUEUED) {
		TAILQ_REMOVE(&sc->queue, j, entry);
		TAILQ_REMOVE(&sc->jobs, j, all);
		attach_count(sc, j->uid, COUNT_QUEUED, -1);
		attach_job_free(j);
	} else if (j != NULL)
		attach_job_give_up(sc, j);
	p->job = NULL;
	attach_pending_free(p);
	attach_check_run(sc);
}
