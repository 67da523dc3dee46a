/* SPDX-License-Identifier: MIT */
/*
 * Sessions (see session.h).  Steps are filled and delivered in sequence
 * order; a slow client stalls only its own session.  A Next is answered
 * as soon as the next step is ready, never by polling.  A step's indices
 * and jobs are made a bounded amount per loop callback (session_prepare),
 * whatever its rows, stages and shuffle, and its shuffle's table is
 * charged to memory_budget (session_table).
 */

#include <sys/queue.h>
#include <sys/random.h>
#include <sys/syscall.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "sampler.h"
#include "session.h"
#include "transform.h"
#include "xmalloc.h"

#define SESSION_JOBS_PER_WORKER	4	/* jobs a step is cut into, per worker */
/*
 * ... each of this many bytes of arrays at least: a job costs a round trip
 * to a worker (images cost their decoding, whatever their size).
 */
#define SESSION_JOB_MIN_BYTES	(4 * 1024 * 1024)
#define SESSION_MAX_WAITING	INFEED_MAX_SLOTS	/* Next requests */
/*
 * A step's indices are computed and its jobs queued this many work units
 * (sampler_row_cost(), SAMPLER_COST_*: about a nanosecond each) at a
 * time, a callback each, with the loop's sockets looked at in between: a
 * step of 2^26 rows, shuffled or of 16 elastic stages, costs the event
 * loop about a millisecond per callback (15 s at once before), never the
 * whole step.
 */
#define SESSION_PREPARE_WORK	(1024 * 1024)
/*
 * A member leaves its group once the group was blocked on it (every slot
 * taken, another member waiting) for INFEED_GROUP_SLACK_MS in all within
 * the last SESSION_BLAME_WINDOW_MS: each other member then ran at 0.8 of
 * its own pace at least over that window.  A stopped member costs the
 * others the slack once; a slower one, or one that pauses, leaves as soon
 * as it has cost them that much, however often the group moved meanwhile.
 * The window is kept in buckets.
 */
#define SESSION_BLAME_WINDOW_MS	(5 * INFEED_GROUP_SLACK_MS)
#define SESSION_BLAME_BUCKETS	10
#define SESSION_BLAME_BUCKET_MS	\
	(SESSION_BLAME_WINDOW_MS / SESSION_BLAME_BUCKETS)

enum session_state {
	SESSION_IDLE,		/* nothing asked for yet, or after EndOfData */
	SESSION_FILLING,	/* steps are being filled and delivered */
	SESSION_EPOCH_END,	/* the epoch's last step is queued */
	SESSION_FAILED,		/* a sample could not be read */
};

/*
 * What a session reads its steps from (session_set_reader() moves it):
 *
 *   ALONE (its own ring) --attach, shares--> MEMBER (its group's ring)
 *   MEMBER --falls behind--> LEFT (catching up on a ring of its own; a
 *     freed group's stays LEFT) --caught up--> REJOINED (the group's ring
 *     again, holding steps of its own) --holds none--> MEMBER
 *   MEMBER --falls behind, no room for a ring--> ENDED (Nexts get why)
 *   ALONE --made for a group--> PRODUCER (the group's hidden filler)
 */
enum session_reader {
	SESSION_ALONE,
	SESSION_MEMBER,
	SESSION_LEFT,
	SESSION_REJOINED,
	SESSION_ENDED,
	SESSION_PRODUCER,
};

/* Time a group was blocked on someone, over the last window. */
struct session_blame {
	uint64_t	bucket;		/* the newest: ms / BUCKET_MS */
	uint32_t	ms[SESSION_BLAME_BUCKETS];
};

struct session {
	struct session_host	 host;
	struct session_client	 client;
	struct session_events	 ev;
	void			*arg;
	uint64_t		 id;
	enum session_state	 state;

	struct session_source	 src;		/* its data and sampler */
	uint64_t		 table_charged;	/* its table's, to the budget */
	struct session_options	 opts;		/* a copy, for status */
	bool			 load_indefinitely;
	struct ring		*ring;
	uint64_t		*indices;	/* per slot, our own copy */
	struct pool_ring	*pool_ring;
	char			*failure;
	enum errcode		 failure_code;	/* DATA, or INTERNAL */
	uint64_t		 failed_seq;	/* the first step that failed */
	bool			 jobs_dropped;	/* ... and the rest dropped */

	uint64_t		 fill_epoch;
	uint64_t		 fill_step;
	uint64_t		 fill_seq;
	/* Rows of each filling slot whose jobs are queued (session_prepare). */
	uint64_t		 prepared[INFEED_MAX_SLOTS];
	struct event		*ev_prepare;	/* the next rows, or NULL */
	uint64_t		 deliver_seq;
	struct session_req	 waiting[SESSION_MAX_WAITING];	/* FIFO */
	uint64_t		 waiting_us[SESSION_MAX_WAITING]; /* since */
	unsigned		 waiting_first;
	unsigned		 nwaiting;

	uint64_t		 epoch;		/* of the last step delivered */
	uint64_t		 step;
	uint64_t		 steps_delivered;
	uint32_t		 last_slot;	/* Step.slot of the last */
	uint64_t		 rows_delivered;
	uint64_t		 first_next_ms;
	/*
	 * Data wait: the time the client had a Next waiting with no step
	 * ready, the answer to "is this trainer input-bound?".
	 */
	uint64_t		 bytes_read;	/* from the dataset, by workers */
	uint64_t		 samples_replaced; /* bad ones, by others */
	uint64_t		 wait_since_us;	/* 0: no Next waits */
	uint64_t		 data_wait_us;
	/* Nexts answered, by how long each waited (session_wait_bounds). */
	uint64_t		 wait_counts[SESSION_WAIT_BUCKETS];

	/*
	 * Shared groups (session.h).  A member takes its group's producer's
	 * slots: ring, indices and pool_ring are NULL until it leaves; its
	 * deliver_seq counts in the producer's sequence.
	 */
	struct session_group	*group;	/* NULL: none (any more) */
	enum session_reader	 reader;
	/* The group ring's slots it holds, a bit each (the ring counts). */
	uint64_t		 shared_held;
	uint64_t		 pos_epoch;	/* the member's next step */
	uint64_t		 pos_step;
	uint32_t		 first_slot;	/* Step.slot of own slot 0 */
	bool			 new_ring;	/* the next Step carries its ring */
	struct session_blame	 blame;	/* the group blocked on it */
	bool			 blamed;	/* ... since charged_ms */
	TAILQ_ENTRY(session)	 member_entry;
};

/*
 * A process that ended a session of a group holding slots of its ring:
 * they are its to read until it exits (watched with a pidfd, else
 * kill(pid, 0) as the group settles).
 */
struct session_holder {
	struct session_group	*g;
	pid_t			 pid;
	uint32_t		 holds[INFEED_MAX_GROUP_SLOTS];	/* per slot */
	int			 pidfd;	/* -1: none */
	struct event		*ev;	/* its exit, or NULL */
};

/* A shared group: its producer and its members (see session.h). */
struct session_group {
	uint64_t		 id;
	struct session		*producer;
	TAILQ_HEAD(, session)	 members;	/* and those that left */
	uint32_t		 nmembers;	/* not left */
	struct session_holder	**holders;	/* ended members' */
	size_t			 nholders;
	struct event		*ev_slack;
	uint64_t		 charged_ms;	/* blamed to; 0: free */
	uint64_t		 retry_ms;	/* one stayed: not before */
	struct session_blame	 orphan;	/* on others' slots */
	bool			 orphaned;	/* ... since charged_ms */
	uint64_t		 leaves[SESSION_LEAVE_REASONS];	/* the stats' */
	uint64_t		 stays;	/* fell behind but could not leave */
	uint64_t		 rejoins;
	TAILQ_ENTRY(session_group) entry;
};

static TAILQ_HEAD(, session_group) session_groups =
    TAILQ_HEAD_INITIALIZER(session_groups);

/* The upper bounds, in seconds, of the wait histogram's buckets. */
const double	session_wait_bounds[SESSION_WAIT_BUCKETS - 1] = {
	0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5,
};

/* The metrics' reason labels, and what the log says, by session_leave. */
const char *const session_leave_names[SESSION_LEAVE_REASONS] = {
	"held_back", "waited",
};
static const char *const session_leave_why[SESSION_LEAVE_REASONS] = {
	"after holding it back for the slack within the blame window",
	"after waiting on slots that those that left or ended still hold",
};

static uint64_t	session_next_id;	/* 0: not seeded yet */

static void	session_fill(struct session *);
static void	session_prepare_later(struct session *);
static void	session_deliver(struct session *);
static void	session_group_deliver(struct session_group *);
static void	session_group_credit(struct session_group *,
		    const struct pool_report *);
static void	session_group_start(struct session_group *);
static const struct ring *session_view_ring(const struct session *);

/*
 * A new session id.  Ids never repeat across daemon instances (a client
 * resuming after a restart tells its old steps from the new session's by
 * the id): they start at a random multiple of 2^21, below 2^53 so that
 * every JSON reader keeps them exact.
 */
static uint64_t
session_new_id(void)
{
	uint32_t	r;

	if (session_next_id == 0) {
		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (uint32_t)(clock_now_ms() ^ (uint64_t)getpid() << 16);
		session_next_id = ((uint64_t)(r & 0x7fffffff) + 1) << 21;
	}
	return (session_next_id++);
}

/* Move to state @st; the allowed transitions are all here. */
static void
session_set_state(struct session *s, enum session_state st)
{
	bool	ok;

	switch (st) {
	case SESSION_FILLING:
		ok = s->state == SESSION_IDLE;
		break;
	case SESSION_EPOCH_END:
		ok = s->state == SESSION_FILLING;
		break;
	case SESSION_IDLE:
		ok = s->state == SESSION_EPOCH_END;
		break;
	case SESSION_FAILED:
		ok = s->state != SESSION_FAILED;
		break;
	default:
		ok = false;
		break;
	}
	if (!ok)
		fatalx("session %llu: no transition from state %d to %d",
		    (unsigned long long)s->id, (int)s->state, (int)st);
	s->state = st;
}

/* Move reader state to @to; the allowed transitions are all here. */
static void
session_set_reader(struct session *s, enum session_reader to)
{
	/* A bit for each state it may come from. */
	static const uint8_t	from[] = {
		[SESSION_ALONE] = 0,
		[SESSION_MEMBER] = 1 << SESSION_ALONE | 1 << SESSION_REJOINED,
		[SESSION_LEFT] = 1 << SESSION_MEMBER,
		[SESSION_REJOINED] = 1 << SESSION_LEFT,
		[SESSION_ENDED] = 1 << SESSION_MEMBER,
		[SESSION_PRODUCER] = 1 << SESSION_ALONE,
	};

	if ((from[to] & 1 << s->reader) == 0)
		fatalx("session %llu: no reader transition from %d to %d",
		    (unsigned long long)s->id, (int)s->reader, (int)to);
	s->reader = to;
}

/* Whether @s takes its group's steps (a member, or back in as one). */
static bool
session_in_group(const struct session *s)
{
	return (s->reader == SESSION_MEMBER || s->reader == SESSION_REJOINED);
}

/* Whether member @s is out of its group: it fell behind, or was ended. */
static bool
session_left(const struct session *s)
{
	return (s->reader == SESSION_LEFT || s->reader == SESSION_ENDED);
}

/* Take the oldest waiting Next. */
static struct session_req
session_pop(struct session *s)
{
	struct session_req	req = s->waiting[s->waiting_first];
	double			waited;
	unsigned		b;

	waited = (double)(clock_now_us() - s->waiting_us[s->waiting_first]) /
	    1e6;
	for (b = 0; b < SESSION_WAIT_BUCKETS - 1 &&
	    waited > session_wait_bounds[b]; b++)
		;
	s->wait_counts[b]++;
	s->waiting_first = (s->waiting_first + 1) % SESSION_MAX_WAITING;
	s->nwaiting--;
	return (req);
}

/*
 * Slot @i's dataset indices: the session's own table, which the workers
 * get through the pool.  The ring's copy is the client's to read (and, in
 * a mapping it made writable, to scribble on): nothing reads it back.
 */
static uint64_t *
session_indices(const struct session *s, uint32_t i)
{
	return (s->indices + (uint64_t)i * s->src.sampler.cbs);
}

/* "from FILE (labels: FILE); check those files", for a sample's error. */
static char *
session_sample_files(const struct dataset *ds)
{
	if (ds->data_path == NULL)
		return (xasprintf("made by the %s reader, which reads no file",
		    ds->type));
	if (ds->labels_path == NULL)
		return (xasprintf("from %s; check that file", ds->data_path));
	return (xasprintf("from %s (labels: %s); check those files",
	    ds->data_path, ds->labels_path));
}

/*
 * The steps before the one that failed are delivered as they become ready
 * (a bad label late in a client's file fails only the step that holds
 * it); once none of them is filling any more, the queued jobs are dropped.
 */
static void
session_drop_after_failure(struct session *s)
{
	uint32_t	i;

	if (s->jobs_dropped)
		return;
	for (i = 0; i < s->ring->layout.slots; i++) {
		if (s->ring->slot[i].state == SLOT_FILLING &&
		    s->ring->slot[i].seq < s->failed_seq)
			return;
	}
	s->jobs_dropped = true;
	pool_drop_jobs(s->pool_ring);
}

/* A sample of a slot failed: end the session's filling with a message. */
static void
session_fail(struct session *s, const struct pool_report *r)
{
	const struct ring_slot	*sl = &s->ring->slot[r->slot];
	uint64_t		 index = r->bad;
	char			*files, row[64] = "", what[256], where[512];
	const char		*at;

	/* Only the first step in the client's order that failed counts. */
	if (s->state == SESSION_FAILED && sl->seq >= s->failed_seq)
		return;
	free(s->failure);

	if ((r->result == POOL_JOB_CRASHED || r->result == POOL_JOB_STUCK) &&
	    r->bad < sl->rows) {
		index = session_indices(s, r->slot)[r->bad];
		snprintf(row, sizeof(row), "row %llu of ",
		    (unsigned long long)r->bad);
	}
	s->failure_code = ERRCODE_DATA;
	if (r->result == POOL_JOB_CRASHED && r->signal == 0) {
		/* Not the data's doing (fatal() in a worker): ours. */
		snprintf(what, sizeof(what), "workers exited %u times (status "
		    "%d; the daemon's log says why) reading", r->deaths,
		    r->status);
		s->failure_code = ERRCODE_INTERNAL;
	} else if (r->result == POOL_JOB_CRASHED && r->signal == SIGKILL)
		snprintf(what, sizeof(what), "workers were killed %u times "
		    "(SIGKILL: the kernel's OOM killer? check the kernel log, "
		    "image_memory_max and the workers' memory) reading",
		    r->deaths);
	else if (r->result == POOL_JOB_CRASHED)
		snprintf(what, sizeof(what), "workers %s %u times (SIG%s) "
		    "reading", r->signal == SIGTERM || r->signal == SIGINT ||
		    r->signal == SIGHUP || r->signal == SIGQUIT ||
		    r->signal == SIGUSR1 || r->signal == SIGUSR2 ?
		    "were killed" : "crashed", r->deaths,
		    sigabbrev_np(r->signal) ? sigabbrev_np(r->signal) : "?");
	else if (r->result == POOL_JOB_STUCK)
		snprintf(what, sizeof(what), "workers read no row within "
		    "job_timeout %u times reading", r->deaths);
	else
		snprintf(what, sizeof(what), "cannot read");
	files = session_sample_files(s->src.ds);
	if (r->result == POOL_JOB_INTERNAL) {
		s->failure_code = ERRCODE_INTERNAL;
		s->failure = xasprintf("dataset '%s': the daemon cannot fill "
		    "step %llu (epoch %llu): %s; see the daemon's log",
		    s->src.ds->name, (unsigned long long)sl->step,
		    (unsigned long long)sl->epoch, r->reason[0] != '\0' ?
		    r->reason : "a worker failed");
	} else if (r->result == POOL_JOB_LABEL_RANGE &&
	    (r->label < 0 || r->label >= UINT32_MAX))
		s->failure = xasprintf("dataset '%s': the label of sample %llu "
		    "(epoch %llu, step %llu) is %lld, which is no class "
		    "number: labels are 0 to %u; check the labels %s",
		    s->src.ds->name, (unsigned long long)index,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    (long long)r->label, UINT32_MAX - 1, files);
	else if (r->result == POOL_JOB_LABEL_RANGE)
		s->failure = xasprintf("dataset '%s': the label of sample "
		    "%llu (epoch %llu, step %llu) is %lld, which does not fit "
		    "in the int32 labels this session asked for; attach with "
		    "label_dtype DTYPE_INT64, or check the labels %s",
		    s->src.ds->name, (unsigned long long)index,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    (long long)r->label, files);
	else if (s->src.ds->encoded) {
		/*
		 * An image: the worker says what was wrong with it, and
		 * where; after a death, name it without reading anything.
		 */
		at = r->where != NULL && r->where[0] != '\0' ? r->where :
		    dataset_sample_brief(s->src.ds, index, where,
		    sizeof(where));
		s->failure = xasprintf("dataset '%s': %s sample %llu (%sepoch "
		    "%llu, step %llu), %s: %s; fix or remove that file, or set "
		    "'bad_samples = replace' for the dataset", s->src.ds->name,
		    what, (unsigned long long)index, row,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    at, r->reason[0] != '\0' ? r->reason : "it cannot be read");
	} else
		s->failure = xasprintf("dataset '%s': %s sample %llu (%sepoch "
		    "%llu, step %llu) %s%s%s%s", s->src.ds->name, what,
		    (unsigned long long)index, row,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    files, r->reason[0] != '\0' ? " (" : "", r->reason,
		    r->reason[0] != '\0' ? ")" : "");
	free(files);
	log_warnx("session %llu: %s", (unsigned long long)s->id, s->failure);
	if (s->state != SESSION_FAILED)
		session_set_state(s, SESSION_FAILED);
	s->failed_seq = sl->seq;
	session_drop_after_failure(s);
}

/* The pool finished rows of a slot. */
static void
session_done_cb(void *arg, const struct pool_report *r)
{
	struct session	 *s = arg;
	struct ring_slot *sl;

	/* A member that rejoined its group: its own ring's last jobs. */
	if (session_in_group(s))
		return;
	if (r->slot >= s->ring->layout.slots ||
	    s->ring->slot[r->slot].state != SLOT_FILLING)
		return;
	sl = &s->ring->slot[r->slot];
	s->bytes_read += r->bytes;
	s->samples_replaced += r->replaced;
	if (s->reader == SESSION_PRODUCER)
		session_group_credit(s->group, r);
	if (r->result != POOL_JOB_DONE)
		session_fail(s, r);
	sl->rows_pending -= r->rows < sl->rows_pending ? r->rows :
	    sl->rows_pending;
	if (sl->rows_pending == 0)
		ring_slot_set(s->ring, r->slot, SLOT_READY);
	if (s->state == SESSION_FAILED)
		session_drop_after_failure(s);
	if (s->reader == SESSION_PRODUCER)
		session_group_deliver(s->group);
	else
		session_deliver(s);
}


/*
 * The shuffle's table (N x 8 bytes, up to 32 MiB at 2^22 samples), for a
 * session that fills steps: a lone session, a group's producer, a member
 * when it leaves (a member in its group fills nothing and has none).  It
 * is charged to memory_budget before it is allocated, once, until the
 * session ends.
 */
static int
session_table(struct session *s, const struct ring_owner *owner,
    char **cause)
{
	uint64_t	 bytes = sampler_table_bytes(&s->src.sampler);
	char		 size[48], *why;

	if (bytes == 0 || s->table_charged != 0)
		return (0);
	if (ring_budget_charge(s->host.budget, bytes, owner, &why) == -1) {
		*cause = xasprintf("the shuffle's table of %llu samples needs "
		    "%s but %s; attach with shuffle off, wait for other "
		    "sessions to end, or ask the operator to raise the budget",
		    (unsigned long long)s->src.sampler.opts.samples,
		    ring_mem_format_bytes(bytes, size, sizeof(size)), why);
		free(why);
		return (-1);
	}
	if (sampler_table_alloc(&s->src.sampler, cause) == -1) {
		ring_budget_uncharge(s->host.budget, bytes);
		return (-1);
	}
	s->table_charged = bytes;
	return (0);
}

/*
 * Make the session's own ring (at Attach, or when it leaves its group),
 * its index tables, its shuffle's table and its registration with the
 * pool.
 */
static int
session_make_ring(struct session *s, enum errcode *code, char **cause)
{
	struct ring_owner	owner;
	uint32_t		slots = s->opts.buffer_size;

	*code = ERRCODE_RESOURCE_EXHAUSTED;
	owner.uid = s->client.uid;
	owner.gid = s->client.gid;
	owner.content = s->src.ds->serial;
	owner.pid = s->client.pid;
	if (session_table(s, &owner, cause) == -1)
		return (-1);
	s->ring = ring_new(s->host.budget, s->src.sampler.cbs,
	    s->src.transform.out_sample_bytes, s->src.label_dtype, slots,
	    &owner, cause);
	if (s->ring == NULL)
		return (-1);
	if ((s->indices = calloc(slots, s->src.sampler.cbs *
	    sizeof(uint64_t))) == NULL) {
		*cause = xasprintf("no memory for the index tables of %u "
		    "slots of %llu rows", slots,
		    (unsigned long long)s->src.sampler.cbs);
		return (-1);
	}
	s->pool_ring = pool_add_ring(s->host.pool, (uint32_t)s->src.ds_index,
	    &s->ring->layout, &s->src.transform, s->ring->mem,
	    s->opts.num_workers, session_done_cb, s, cause);
	if (s->pool_ring == NULL)
		return (-1);
	if (s->src.own_ds && pool_ring_files(s->pool_ring, &s->src.files,
	    s->src.ds, cause) == -1) {
		*code = ERRCODE_INTERNAL;
		return (-1);
	}
	return (0);
}

/* The bit of group ring slot @i in a member's shared_held. */
static uint64_t
session_group_bit(uint32_t i)
{
	return (UINT64_C(1) << i);
}

/* Whether @s asked to share and may: a catalogue dataset, no stages. */
static bool
session_group_may_share(const struct session *s,
    const struct session_host *host)
{
	return (s->opts.share && host->base != NULL && !s->src.own_ds &&
	    s->opts.nstages == 0 &&
	    s->opts.buffer_size <= INFEED_MAX_GROUP_SLOTS);
}

/* Whether two transforms, as asked, are the same. */
static bool
session_group_same_transform(const struct session_options *a,
    const struct session_options *b)
{
	const struct transform_spec	*x = &a->transform, *y = &b->transform;

	if (a->has_transform != b->has_transform)
		return (false);
	if (!a->has_transform)
		return (true);
	if ((x->pipeline == NULL) != (y->pipeline == NULL) ||
	    (x->pipeline != NULL && strcmp(x->pipeline, y->pipeline) != 0))
		return (false);
	return (x->to_float32 == y->to_float32 && x->scale == y->scale &&
	    x->nmean == y->nmean && x->nstd == y->nstd &&
	    memcmp(x->mean, y->mean, x->nmean * sizeof(x->mean[0])) == 0 &&
	    memcmp(x->std, y->std, x->nstd * sizeof(x->std[0])) == 0);
}

/*
 * Whether member @s reads exactly the bytes of producer @p at every step:
 * the same dataset, user and group (a ring holds their data, and only
 * they may map it), and every option that decides a step's bytes.
 */
static bool
session_group_matches(const struct session *p, const struct session *s)
{
	const struct session_options	*a = &p->opts, *b = &s->opts;

	return (p->host.pool == s->host.pool && p->src.ds == s->src.ds &&
	    p->client.uid == s->client.uid && p->client.gid == s->client.gid &&
	    a->batch_size == b->batch_size &&
	    a->device_iterations == b->device_iterations &&
	    a->replication_factor == b->replication_factor &&
	    a->gradient_accumulation == b->gradient_accumulation &&
	    a->shuffle == b->shuffle && a->seed == b->seed &&
	    a->drop_last == b->drop_last && a->process_id == b->process_id &&
	    a->process_count == b->process_count &&
	    p->src.label_dtype == s->src.label_dtype &&
	    a->buffer_size == b->buffer_size &&
	    a->load_indefinitely == b->load_indefinitely &&
	    session_group_same_transform(a, b));
}

/* The lowest position in the group's sequence a member still takes. */
static uint64_t
session_group_min_seq(const struct session_group *g)
{
	const struct session	*m;
	uint64_t		 min = g->producer->fill_seq;

	TAILQ_FOREACH(m, &g->members, member_entry) {
		if (session_in_group(m) && m->deliver_seq < min)
			min = m->deliver_seq;
	}
	return (min);
}

/*
 * Where step (@epoch, @step) is in @g's sequence: a slot it still has for
 * every member (not before the slowest one), or the next it fills.
 * Return: 0 with *@seq, or -1 when the group has it no more or not yet.
 */
static int
session_group_position(const struct session_group *g, uint64_t epoch,
    uint64_t step, uint64_t *seq)
{
	const struct session	*p = g->producer;
	const struct ring_slot	*sl;
	uint64_t		 fe = p->fill_epoch, fs = p->fill_step;
	uint32_t		 i;

	if (p->state == SESSION_FAILED)
		return (-1);
	for (i = 0; i < p->ring->layout.slots; i++) {
		sl = &p->ring->slot[i];
		if (sl->state != SLOT_FREE && sl->epoch == epoch &&
		    sl->step == step && sl->seq >= session_group_min_seq(g)) {
			*seq = sl->seq;
			return (0);
		}
	}
	if (fs >= sampler_epoch_steps(&p->src.sampler, fe)) {
		fe++;
		fs = 0;
	}
	if (fe != epoch || fs != step)
		return (-1);
	*seq = p->fill_seq;
	return (0);
}

static void	session_group_slack_cb(int, short, void *);

/* Nothing to tell: the producer never has a Next to answer. */
static void
session_group_no_step(void *arg, struct session_req req,
    const struct session_step *st)
{
	(void)arg, (void)req, (void)st;
}

static void
session_group_no_end(void *arg, struct session_req req, uint64_t epoch)
{
	(void)arg, (void)req, (void)epoch;
}

static void
session_group_no_error(void *arg, struct session_req req, enum errcode code,
    const char *message)
{
	(void)arg, (void)req, (void)code, (void)message;
}

static const struct session_events session_group_events = {
	.step = session_group_no_step,
	.end_of_data = session_group_no_end,
	.error = session_group_no_error,
};

/*
 * Join a group that has member @s's next step, or make one: its producer
 * is a session of @s's Attach @a that loads indefinitely, on the group's
 * ring, charged once.
 */
static int
session_group_join(struct session *s, const struct session_attach *a,
    struct session_checked *chk, enum errcode *code, char **cause)
{
	struct session_group	*g;
	struct session_attach	 pa;
	struct session		*p;
	uint64_t		 seq = 0;

	TAILQ_FOREACH(g, &session_groups, entry) {
		if (session_group_matches(g->producer, s) &&
		    session_group_position(g, s->pos_epoch, s->pos_step,
		    &seq) == 0)
			break;
	}
	if (g == NULL) {
		pa = *a;
		pa.options.share = false;
		pa.options.early_preload = false;
		p = session_new(&s->host, &s->client, &pa, NULL, 0, chk,
		    &session_group_events, NULL, code, cause);
		if (p == NULL)
			return (-1);
		g = xcalloc(1, sizeof(*g));
		g->id = p->id;
		g->producer = p;
		session_set_reader(p, SESSION_PRODUCER);
		p->group = g;
		TAILQ_INIT(&g->members);
		g->ev_slack = evtimer_new(s->host.base, session_group_slack_cb,
		    g);
		if (g->ev_slack == NULL)
			fatalx("cannot make a timer for group %llu",
			    (unsigned long long)g->id);
		TAILQ_INSERT_TAIL(&session_groups, g, entry);
		seq = 0;
	}
	s->group = g;
	session_set_reader(s, SESSION_MEMBER);
	s->deliver_seq = seq;
	TAILQ_INSERT_TAIL(&g->members, s, member_entry);
	g->nmembers++;
	return (0);
}

/*
 * A member asked for steps: the producer fills from now on; without
 * load_indefinitely it stops at each epoch's end (as a lone session
 * does: nothing is read for an epoch no one asked for yet) and goes on
 * with the next when a member asks for its first step.
 */
static void
session_group_start(struct session_group *g)
{
	struct session		*p = g->producer;
	const struct session	*m;

	if (p->state == SESSION_EPOCH_END) {
		TAILQ_FOREACH(m, &g->members, member_entry) {
			if (session_in_group(m) && m->nwaiting > 0 &&
			    m->deliver_seq == p->fill_seq &&
			    m->state != SESSION_EPOCH_END)
				break;
		}
		if (m == NULL)
			return;
		session_set_state(p, SESSION_IDLE);
		p->fill_epoch++;
		p->fill_step = 0;
	}
	if (p->state != SESSION_IDLE)
		return;
	session_set_state(p, SESSION_FILLING);
	session_fill(p);
}

/*
 * What the workers read for the group is counted once, on its oldest
 * member (a lone member's counts are then a lone session's).
 */
static void
session_group_credit(struct session_group *g, const struct pool_report *r)
{
	struct session	*m;

	TAILQ_FOREACH(m, &g->members, member_entry) {
		if (session_in_group(m)) {
			m->bytes_read += r->bytes;
			m->samples_replaced += r->replaced;
			return;
		}
	}
}

/*
 * Whether a member still takes step @seq (a slot someone holds, a member
 * or the process of one whose session ended, is HELD in the ring and
 * never refilled: ring.c sees to that).
 */
static bool
session_group_pinned(const struct session_group *g, uint64_t seq)
{
	const struct session	*m;

	TAILQ_FOREACH(m, &g->members, member_entry) {
		if (session_in_group(m) && m->deliver_seq <= seq)
			return (true);
	}
	return (false);
}

/*
 * Whether the group holds a member back: every slot taken, and a member
 * waiting for the step the producer would fill next.
 */
static bool
session_group_blocked(const struct session_group *g)
{
	const struct session	*p = g->producer, *m;

	if (p->state != SESSION_FILLING ||
	    ring_find(p->ring, SLOT_FREE) != -1)
		return (false);
	TAILQ_FOREACH(m, &g->members, member_entry) {
		if (session_in_group(m) && m->nwaiting > 0 &&
		    m->deliver_seq == p->fill_seq)
			return (true);
	}
	return (false);
}

/*
 * The oldest ready slot of the group's ring that members alone keep from
 * being refilled (not one that those that left or ended hold), in *@slot
 * and *@seq.  Return: whether there is one.
 */
static bool
session_group_oldest(const struct session_group *g, uint32_t *slot,
    uint64_t *seq)
{
	const struct ring	*r = g->producer->ring;
	const struct session	*m;
	uint32_t		 i, others;
	bool			 found = false;

	for (i = 0; i < r->layout.slots; i++) {
		if (!ring_slot_filled(r, i) ||
		    (found && r->slot[i].seq >= *seq))
			continue;
		/* Its holders, less the members in the group. */
		others = r->slot[i].holders;
		TAILQ_FOREACH(m, &g->members, member_entry) {
			if (session_in_group(m) && (m->shared_held &
			    session_group_bit(i)))
				others--;
		}
		if (others > 0)
			continue;
		*slot = i;
		*seq = r->slot[i].seq;
		found = true;
	}
	return (found);
}

/* Move @b's window on to bucket @k: older buckets fall out of it. */
static void
session_blame_advance(struct session_blame *b, uint64_t k)
{
	uint64_t	j;

	for (j = b->bucket + 1; j <= k &&
	    j <= b->bucket + SESSION_BLAME_BUCKETS; j++)
		b->ms[j % SESSION_BLAME_BUCKETS] = 0;
	if (k > b->bucket)
		b->bucket = k;
}

/* Add the time from @from to @to (ms, CLOCK_MONOTONIC) to @b. */
static void
session_blame_add(struct session_blame *b, uint64_t from, uint64_t to)
{
	uint64_t	k, end;

	if (to - from > SESSION_BLAME_WINDOW_MS)
		from = to - SESSION_BLAME_WINDOW_MS;
	for (; from < to; from = end) {
		k = from / SESSION_BLAME_BUCKET_MS;
		end = (k + 1) * SESSION_BLAME_BUCKET_MS;
		if (end > to)
			end = to;
		session_blame_advance(b, k);
		if (k + SESSION_BLAME_BUCKETS > b->bucket)
			b->ms[k % SESSION_BLAME_BUCKETS] +=
			    (uint32_t)(end - from);
	}
}

/* @b's time within the window that ends at @now. */
static uint64_t
session_blame_sum(struct session_blame *b, uint64_t now)
{
	uint64_t	sum = 0;
	unsigned	i;

	session_blame_advance(b, now / SESSION_BLAME_BUCKET_MS);
	for (i = 0; i < SESSION_BLAME_BUCKETS; i++)
		sum += b->ms[i];
	return (sum);
}

/* What is left of the slack after @b's time in the window ending @now. */
static uint64_t
session_blame_left(struct session_blame *b, uint64_t now)
{
	uint64_t	used = session_blame_sum(b, now);

	return (used < INFEED_GROUP_SLACK_MS ? INFEED_GROUP_SLACK_MS - used :
	    0);
}

/*
 * Charge the time the group was blocked since the last look to whom it
 * was blocked on then (the members that keep its oldest slot from being
 * refilled and do not wait themselves; else no member: the slots those
 * that left or ended hold), see who it is blocked on now, and set the
 * slack's timer for when the first of them will have cost the others
 * INFEED_GROUP_SLACK_MS within the window.  Called whenever a member
 * takes, releases, asks or goes, and by the timer.
 */
static void
session_group_watch(struct session_group *g)
{
	struct session	*m;
	struct timeval	 tv;
	uint64_t	 now = clock_now_ms(), seq = 0, wait, left;
	uint32_t	 slot = 0;
	bool		 blocked, oldest, any = false;

	if (g->charged_ms != 0 && now > g->charged_ms) {
		TAILQ_FOREACH(m, &g->members, member_entry) {
			if (m->blamed)
				session_blame_add(&m->blame, g->charged_ms,
				    now);
		}
		if (g->orphaned)
			session_blame_add(&g->orphan, g->charged_ms, now);
	}
	blocked = session_group_blocked(g);
	oldest = blocked && session_group_oldest(g, &slot, &seq);
	wait = INFEED_GROUP_SLACK_MS;
	TAILQ_FOREACH(m, &g->members, member_entry) {
		m->blamed = oldest && session_in_group(m) && m->nwaiting == 0 &&
		    ((m->shared_held & session_group_bit(slot)) ||
		    m->deliver_seq <= seq);
		if (!m->blamed)
			continue;
		any = true;
		left = session_blame_left(&m->blame, now);
		if (left < wait)
			wait = left;
	}
	g->orphaned = blocked && !any;
	if (g->orphaned)
		wait = session_blame_left(&g->orphan, now);
	if (!blocked) {
		g->charged_ms = 0;
		evtimer_del(g->ev_slack);
		return;
	}
	g->charged_ms = now;
	/* One that could not leave is tried again after the slack. */
	if (g->retry_ms > now + wait)
		wait = g->retry_ms - now;
	if (wait == 0)
		wait = 1;
	tv.tv_sec = (time_t)(wait / 1000);
	tv.tv_usec = (suseconds_t)(wait % 1000 * 1000);
	evtimer_add(g->ev_slack, &tv);
}

/*
 * Free the group ring's slots that every member is past and none holds,
 * and fill them with the next steps.
 */
static void
session_group_reclaim(struct session_group *g)
{
	struct session		*p = g->producer;
	struct ring_slot	*sl;
	bool			 freed = false;
	uint32_t		 i;

	for (i = 0; i < p->ring->layout.slots; i++) {
		sl = &p->ring->slot[i];
		if (sl->state != SLOT_READY ||
		    session_group_pinned(g, sl->seq))
			continue;
		ring_slot_set(p->ring, i, SLOT_FREE);
		freed = true;
	}
	if (freed)
		session_fill(p);
}

static void	session_group_settle(struct session_group *);

/*
 * Forget holder @k of @g; with @unhold, its process exited: it lets go of
 * the slots it held, which the group refills again.
 */
static void
session_group_holder_drop(struct session_group *g, size_t k, bool unhold)
{
	struct session_holder	*h = g->holders[k];
	uint32_t		 i;

	for (i = 0; unhold && i < INFEED_MAX_GROUP_SLOTS; i++) {
		while (h->holds[i] > 0) {
			ring_slot_unhold(g->producer->ring, i);
			h->holds[i]--;
		}
	}
	if (h->ev != NULL)
		event_free(h->ev);
	if (h->pidfd != -1)
		close(h->pidfd);
	free(h);
	g->holders[k] = g->holders[--g->nholders];
}

/*
 * Forget the holders whose processes exited (@pidfd's, readable, or
 * those without a pidfd that kill() finds gone).  Return: whether any.
 */
static bool
session_group_reap(struct session_group *g, int pidfd)
{
	struct session_holder	*h;
	size_t			 i;
	bool			 any = false;

	for (i = 0; i < g->nholders; ) {
		h = g->holders[i];
		if ((pidfd != -1 && h->pidfd == pidfd) || (h->pidfd == -1 &&
		    h->pid > 0 && kill(h->pid, 0) == -1 && errno == ESRCH)) {
			log_info("process %d, which kept steps of group %llu "
			    "after its session ended, exited: their slots are "
			    "refilled again", (int)h->pid,
			    (unsigned long long)g->id);
			session_group_holder_drop(g, i, true);
			any = true;
		} else
			i++;
	}
	return (any);
}

/* A holder's process exited. */
static void
session_group_holder_exit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session_holder	*h = arg;
	struct session_group	*g = h->g;

	(void)what;
	if (session_group_reap(g, fd))
		session_group_settle(g);
}

/* Let go of slots @slots of @g's ring, one hold each. */
static void
session_group_unhold(struct session_group *g, uint64_t slots)
{
	uint32_t	k;

	for (k = 0; k < INFEED_MAX_GROUP_SLOTS; k++) {
		if (slots & session_group_bit(k))
			ring_slot_unhold(g->producer->ring, k);
	}
}

/*
 * Process @pid ended a session of @g holding slots @slots of its ring: its
 * holds in the ring stay until it exits, and the group refills them no
 * more till then.
 */
static void
session_group_add_holder(struct session_group *g, pid_t pid, uint64_t slots)
{
	struct session_holder	*h;
	size_t			 i;
	uint32_t		 k;

	for (i = 0; i < g->nholders && g->holders[i]->pid != pid; i++)
		;
	if (i == g->nholders) {
		h = xcalloc(1, sizeof(*h));
		h->g = g;
		h->pid = pid;
		h->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (h->pidfd != -1 && ((h->ev = event_new(
		    g->producer->host.base, h->pidfd, EV_READ,
		    session_group_holder_exit_cb, h)) == NULL ||
		    event_add(h->ev, NULL) == -1)) {
			/* Unwatched: kill(pid, 0) finds its end instead. */
			if (h->ev != NULL)
				event_free(h->ev);
			h->ev = NULL;
			close(h->pidfd);
			h->pidfd = -1;
		}
		g->holders = xreallocarray(g->holders, g->nholders + 1,
		    sizeof(*g->holders));
		g->holders[g->nholders++] = h;
	}
	for (k = 0; k < INFEED_MAX_GROUP_SLOTS; k++) {
		if (slots & session_group_bit(k))
			g->holders[i]->holds[k]++;
	}
}

/*
 * Free group @g, whose last member went: those that left and hold none of
 * its slots may no longer rejoin it.
 */
static void
session_group_free(struct session_group *g)
{
	struct session	*p = g->producer, *m;
	pid_t		*pids;
	size_t		 n = g->nholders;
	uint32_t	 i;

	while ((m = TAILQ_FIRST(&g->members)) != NULL) {
		TAILQ_REMOVE(&g->members, m, member_entry);
		m->group = NULL;
	}
	TAILQ_REMOVE(&session_groups, g, entry);
	event_free(g->ev_slack);
	/*
	 * A member that ended holding steps may still read them: their slots
	 * stay held, so the ring's pages stay as they are (ring_release())
	 * rather than be reused, charged until the last such member's process
	 * exits (not the producer's client's: the ring is the group's).
	 */
	pids = xreallocarray(NULL, n + 1, sizeof(*pids));
	for (i = 0; i < n; i++)
		pids[i] = g->holders[i]->pid;
	while (g->nholders > 0)
		session_group_holder_drop(g, 0, false);
	if (n > 0)
		ring_mem_hold_for(p->ring->mem, pids, n);
	free(pids);
	p->group = NULL;
	session_free(p);
	free(g->holders);
	free(g);
}

/*
 * Free @g once no member is in it and none that left holds its slots
 * (those that left are kept in its list only to rejoin it); else refill
 * what its members are done with.
 */
static void
session_group_settle(struct session_group *g)
{
	const struct session	*m;

	TAILQ_FOREACH(m, &g->members, member_entry) {
		if (session_in_group(m) || m->shared_held != 0)
			break;
	}
	if (m == NULL) {
		session_group_free(g);
		return;
	}
	(void)session_group_reap(g, -1);
	session_group_reclaim(g);
	session_group_watch(g);
}

/* Member @m is out of @g's list: its session ended. */
static void
session_group_drop(struct session *m)
{
	struct session_group	*g = m->group;

	TAILQ_REMOVE(&g->members, m, member_entry);
	if (session_in_group(m))
		g->nmembers--;
	m->group = NULL;
	session_group_settle(g);
}

static void	session_member_deliver(struct session *);

/* Answer the members' waiting Nexts with the group's ready steps. */
static void
session_group_deliver(struct session_group *g)
{
	struct session	*m, *next;

	for (m = TAILQ_FIRST(&g->members); m != NULL; m = next) {
		next = TAILQ_NEXT(m, member_entry);
		if (session_in_group(m))
			session_member_deliver(m);
	}
	pool_ring_delivered(g->producer->pool_ring, session_group_min_seq(g));
	session_group_watch(g);
}

/*
 * Member @m, which held the others back, has no room for a ring of its
 * own (@cause): it is ended rather than freeze them.  Its Nexts get the
 * error from now on; the group's slots it holds stay its own until it
 * releases them (a kept step never changes), the others it kept free.
 */
static void
session_group_end(struct session *m, const char *cause)
{
	struct session_group	*g = m->group;

	log_warnx("session %llu held group %llu back and is ended: %s",
	    (unsigned long long)m->id, (unsigned long long)g->id, cause);
	session_set_reader(m, SESSION_ENDED);
	g->nmembers--;
	g->stays++;
	free(m->failure);
	m->failure = xasprintf("this session held the other trainers of its "
	    "shared group back for %d ms (stopped, or slower than they are), "
	    "and %s, so it was ended to let them go on; release its steps and "
	    "attach again (with share=False it never waits on others, nor "
	    "they on it)", INFEED_GROUP_SLACK_MS, cause);
	m->failure_code = ERRCODE_RESOURCE_EXHAUSTED;
	session_set_state(m, SESSION_FAILED);
	session_cancel(m, m->failure_code, m->failure);
}

/*
 * Member @m falls behind: it gets a ring of its own (charged to the
 * budget) and fills it from its own position; what it holds of the
 * group's ring stays its own until released.  When the budget cannot
 * hold that ring, one that held the group back is ended
 * (session_group_end()); one that waited stays in the group, which
 * waits, and tries again after the slack, as one does that still holds
 * steps of the ring it had before it rejoined.  Return: 0, or -1 when it
 * stayed or was ended.  The group counts either, by @why.
 */
static int
session_group_leave(struct session *m, enum session_leave why)
{
	struct session_group	*g = m->group;
	struct session		*p = g->producer;
	enum errcode		 code;
	char			*cause = NULL, *msg;

	/* Steps of the ring it had before it rejoined: one ring of its own. */
	if (m->reader == SESSION_REJOINED) {
		log_info("session %llu falls behind group %llu but stays in "
		    "it until it releases the steps it holds of the ring it "
		    "had before it rejoined", (unsigned long long)m->id,
		    (unsigned long long)g->id);
		g->stays++;
		g->retry_ms = clock_now_ms() + INFEED_GROUP_SLACK_MS;
		return (-1);
	}
	if (session_make_ring(m, &code, &cause) == -1) {
		pool_remove_ring(m->pool_ring, m->ring, true);
		m->pool_ring = NULL;
		m->ring = NULL;
		free(m->indices);
		m->indices = NULL;
		msg = xasprintf("memory_budget has no room for a ring of its "
		    "own: %s", cause);
		free(cause);
		if (why == SESSION_LEAVE_HELD_BACK) {
			session_group_end(m, msg);
			free(msg);
			return (-1);
		}
		log_warnx("session %llu waits on group %llu but stays in "
		    "it: %s", (unsigned long long)m->id,
		    (unsigned long long)g->id, msg);
		free(msg);
		g->stays++;
		g->retry_ms = clock_now_ms() + INFEED_GROUP_SLACK_MS;
		return (-1);
	}
	log_info("session %llu left group %llu %s; it goes on alone from "
	    "epoch %llu step %llu", (unsigned long long)m->id,
	    (unsigned long long)g->id, session_leave_why[why],
	    (unsigned long long)m->pos_epoch, (unsigned long long)m->pos_step);
	session_set_reader(m, SESSION_LEFT);
	g->nmembers--;
	g->leaves[why]++;
	m->first_slot = p->ring->layout.slots;
	m->new_ring = true;
	m->fill_seq = m->deliver_seq = 0;
	m->fill_epoch = m->pos_epoch;
	m->fill_step = m->pos_step;
	/* An EndOfData is owed for the epoch it finished (session_end_epoch). */
	if (m->state == SESSION_EPOCH_END && m->pos_epoch > 0) {
		m->fill_epoch = m->pos_epoch - 1;
		m->fill_step = sampler_epoch_steps(&m->src.sampler,
		    m->fill_epoch);
	}
	session_fill(m);
	session_deliver(m);
	return (0);
}

/* Whether step @seq of group @g is ready in its ring. */
static bool
session_group_ready(const struct session_group *g, uint64_t seq)
{
	const struct ring	*r = g->producer->ring;
	uint32_t		 i;

	for (i = 0; i < r->layout.slots; i++) {
		if (ring_slot_filled(r, i) && r->slot[i].seq == seq)
			return (true);
	}
	return (false);
}

/* A member that rejoined gives up its own ring once it holds none of it. */
static void
session_own_ring_drop(struct session *s)
{
	if (s->ring == NULL || ring_count(s->ring, SLOT_HELD) > 0)
		return;
	pool_remove_ring(s->pool_ring, s->ring, true);
	s->pool_ring = NULL;
	s->ring = NULL;
	free(s->indices);
	s->indices = NULL;
	session_set_reader(s, SESSION_MEMBER);
}

/*
 * Left member @m caught up: the step it takes next is one its group still
 * holds for the others, or fills next.  From there it takes the group's
 * steps again (the next Step brings the group's ring back when its client
 * maps its own), and gives up its own ring once it holds none of it.
 * Only between steps (no Next waits), and holding none of the group's
 * slots (a client maps the group's ring once).  Return: whether it did.
 */
static bool
session_group_rejoin(struct session *m)
{
	struct session_group	*g = m->group;
	uint64_t		 epoch = m->pos_epoch, step = m->pos_step, seq;

	if (m->nwaiting > 0 || m->shared_held != 0 || m->ring == NULL ||
	    (m->state != SESSION_FILLING && m->state != SESSION_IDLE))
		return (false);
	if (m->steps_delivered > 0) {
		epoch = m->epoch;
		step = m->step + 1;
		if (step >= sampler_epoch_steps(&m->src.sampler, epoch)) {
			epoch++;
			step = 0;
		}
	}
	/*
	 * Only where its first Step from the group goes out at once, and
	 * holding at most one step of its own ring (a for-loop's last): so it
	 * never waits in the group with steps of its own ring still held,
	 * which would keep it from leaving again.
	 */
	if (session_group_position(g, epoch, step, &seq) == -1 ||
	    !session_group_ready(g, seq) ||
	    ring_count(m->ring, SLOT_HELD) > 1)
		return (false);
	log_info("session %llu caught up with group %llu and rejoins it at "
	    "epoch %llu step %llu", (unsigned long long)m->id,
	    (unsigned long long)g->id, (unsigned long long)epoch,
	    (unsigned long long)step);
	session_set_reader(m, SESSION_REJOINED);
	g->nmembers++;
	g->rejoins++;
	m->deliver_seq = seq;
	m->pos_epoch = epoch;
	m->pos_step = step;
	memset(&m->blame, 0, sizeof(m->blame));
	/* Its client maps its own ring, unless no Step brought it yet. */
	m->new_ring = !m->new_ring;
	pool_drop_jobs(m->pool_ring);
	session_own_ring_drop(m);
	return (true);
}

/*
 * A member's blame reached the slack: those that cost the others the
 * slack within the window leave the group (or are ended: no room for a
 * ring).  When the group still cannot fill the step a member waits for
 * and no member it could wait on is to blame (the slots that those that
 * left or ended hold block it, or one that could not leave), the members
 * that wait go on alone too: at once when someone was just dealt with,
 * else once they waited the slack on such slots within the window.  A
 * stopped member never freezes the others.
 */
static void
session_group_slack_cb(int fd, short what, void *arg)
{
	struct session_group	*g = arg;
	struct session		*p = g->producer, *m;
	uint64_t		 now = clock_now_ms();
	bool			 acted = false, stuck = false;

	(void)fd, (void)what;
	session_group_watch(g);
	if (g->charged_ms == 0 || now < g->retry_ms)
		return;
	g->retry_ms = 0;
	TAILQ_FOREACH(m, &g->members, member_entry) {
		if (!m->blamed ||
		    session_blame_left(&m->blame, now) > 0)
			continue;
		acted = true;
		if (session_group_leave(m, SESSION_LEAVE_HELD_BACK) == -1 &&
		    session_in_group(m))
			stuck = true;
	}
	session_group_reclaim(g);
	session_group_watch(g);
	if (g->charged_ms != 0 && (stuck || g->orphaned) && (acted ||
	    session_blame_left(&g->orphan, now) == 0)) {
		TAILQ_FOREACH(m, &g->members, member_entry) {
			if (session_in_group(m) && m->nwaiting > 0 &&
			    m->deliver_seq == p->fill_seq)
				(void)session_group_leave(m,
				    SESSION_LEAVE_WAITED);
		}
	}
	session_group_settle(g);
}

/*
 * Make the session an Attach asks for: check it (with what a helper
 * thread checked already, @chk), make the ring and register it.  A
 * removed ring's memory that workers still write is not waited for here:
 * session_attach_begin() waits for it on the loop.
 */
struct session *
session_new(const struct session_host *host,
    const struct session_client *client, const struct session_attach *a,
    int *fds, size_t nfds, struct session_checked *chk,
    const struct session_events *ev, void *arg, enum errcode *code,
    char **cause)
{
	const struct session_options	*o = &a->options;
	struct session			*s;

	s = xcalloc(1, sizeof(*s));
	s->host = *host;
	s->client = *client;
	s->ev = *ev;
	s->arg = arg;
	if (session_check(host, client, a, fds, nfds, chk, &s->src, code,
	    cause) == -1)
		goto fail;
	s->load_indefinitely = o->load_indefinitely;
	s->fill_epoch = s->pos_epoch = o->start_epoch;
	s->fill_step = s->pos_step = o->start_step;
	session_options_copy(&s->opts, o);
	if (session_group_may_share(s, host)) {
		if (session_group_join(s, a, chk, code, cause) == -1)
			goto fail;
	} else if (session_make_ring(s, code, cause) == -1)
		goto fail;
	s->id = session_new_id();
	log_info("client %llu: session %llu on %s'%s': combined batch %llu, "
	    "%llu steps per epoch, %u slots of %llu KiB, shuffle %s, "
	    "process %u of %u", (unsigned long long)client->peer_id,
	    (unsigned long long)s->id,
	    s->src.own_ds ? "the client's files " : "", s->src.ds->name,
	    (unsigned long long)s->src.sampler.cbs,
	    (unsigned long long)s->src.sampler.steps_per_epoch,
	    session_view_ring(s)->layout.slots,
	    (unsigned long long)(session_view_ring(s)->layout.slot_bytes >> 10),
	    o->shuffle ? "on" : "off", o->process_id, o->process_count);
	if (o->nstages > 0)
		log_info("client %llu: session %llu resumes epoch %llu after "
		    "%zu stages of other process counts: %llu steps left",
		    (unsigned long long)client->peer_id,
		    (unsigned long long)s->id,
		    (unsigned long long)o->start_epoch, o->nstages,
		    (unsigned long long)sampler_epoch_steps(&s->src.sampler,
		    o->start_epoch));
	if (s->group != NULL)
		log_info("client %llu: session %llu shares group %llu (%u "
		    "members)", (unsigned long long)client->peer_id,
		    (unsigned long long)s->id,
		    (unsigned long long)s->group->id, s->group->nmembers);
	/* Fill the ring now; the first Step still waits for the first Next. */
	if (o->early_preload && s->group != NULL)
		session_group_start(s->group);
	else if (o->early_preload) {
		session_set_state(s, SESSION_FILLING);
		session_fill(s);
	}
	return (s);

fail:
	session_free(s);
	return (NULL);
}

/* Free a session: its ring, its registration and its state. */
void
session_free(struct session *s)
{
	if (s == NULL)
		return;
	if (s->ev_prepare != NULL)
		event_free(s->ev_prepare);
	/*
	 * The group's slots it holds are its process's to read on (a kept
	 * step never changes): the group never refills them.
	 */
	if (s->group != NULL && s->reader != SESSION_PRODUCER) {
		/*
		 * A client whose pid is not known (another pid namespace)
		 * cannot be watched: as for ring memory, it holds nothing
		 * once its session ends.
		 */
		if (s->shared_held != 0 && s->client.pid > 0)
			session_group_add_holder(s->group, s->client.pid,
			    s->shared_held);
		else
			session_group_unhold(s->group, s->shared_held);
		s->shared_held = 0;
		session_group_drop(s);
	}
	/*
	 * Its memory is kept for the next session only when the client holds
	 * no step, and only once no job writes it any more: the pool releases
	 * it then.  A ring whose client holds steps (libinfeed keeps reading
	 * held steps after a session ends, so those pages must stay as they
	 * are) stays charged to the budget until the client's process exits
	 * (ring_release()).  The index tables, freed here and with the jobs,
	 * were charged with the ring.
	 */
	pool_remove_ring(s->pool_ring, s->ring, s->ring != NULL &&
	    ring_count(s->ring, SLOT_HELD) == 0);
	session_source_clear(&s->src);
	free(s->indices);
	free(s->opts.transform.pipeline);
	ring_budget_uncharge(s->host.budget, s->table_charged);
	free(s->failure);
	free(s);
}

/*
 * Queue rows [@begin, @end) of slot @i on the pool, their indices
 * computed: the step is cut so every worker gets some (of arrays, 4 MiB a
 * job at least), as the step the client takes in the ring's order (the
 * pool serves the nearest steps first); rows prepared in several
 * callbacks are cut where those end too.
 */
static void
session_submit(struct session *s, uint32_t i, uint64_t begin, uint64_t end)
{
	const struct ring_slot	*sl = &s->ring->slot[i];
	uint64_t		 chunk, r, stop, njobs, rows = sl->rows;

	njobs = (uint64_t)pool_size(s->host.pool) * SESSION_JOBS_PER_WORKER;
	if (!s->src.transform.image &&
	    rows * s->ring->layout.row_bytes / SESSION_JOB_MIN_BYTES < njobs)
		njobs = rows * s->ring->layout.row_bytes /
		    SESSION_JOB_MIN_BYTES;
	if (njobs == 0)
		njobs = 1;
	chunk = (rows + njobs - 1) / njobs;
	for (r = begin; r < end; r = stop) {
		stop = (r / chunk + 1) * chunk;
		if (stop > end)
			stop = end;
		pool_submit(s->pool_ring, i, sl->epoch, sl->seq, r, stop,
		    session_indices(s, i) + r);
	}
}

/*
 * The filling slot whose next rows are to be prepared (the lowest step in
 * the ring's order with rows not yet queued), or -1.  None on a ring the
 * session no longer fills (a member back in its group keeps its own only
 * for the steps it holds), and none past a failed step (its jobs are
 * dropped, session_drop_after_failure()).
 */
static int
session_prepare_slot(const struct session *s)
{
	const struct ring_slot	*sl;
	uint32_t		 i;
	int			 best = -1;

	if (s->ring == NULL || session_in_group(s))
		return (-1);
	for (i = 0; i < s->ring->layout.slots; i++) {
		sl = &s->ring->slot[i];
		if (sl->state != SLOT_FILLING || s->prepared[i] >= sl->rows ||
		    (s->state == SESSION_FAILED && sl->seq >= s->failed_seq))
			continue;
		if (best == -1 || sl->seq < s->ring->slot[best].seq)
			best = (int)i;
	}
	return (best);
}

/*
 * Compute the indices of the next rows and queue their jobs, for about
 * SESSION_PREPARE_WORK units (a new epoch's shuffle table among them);
 * return whether rows are left to prepare.
 */
static bool
session_prepare(struct session *s)
{
	const struct ring_slot	*sl;
	uint64_t		 work = SESSION_PREPARE_WORK, cost, n, begin;
	int			 i;

	while (work > 0 && (i = session_prepare_slot(s)) != -1) {
		sl = &s->ring->slot[i];
		if (!sampler_prepare(&s->src.sampler, sl->epoch, &work))
			return (true);
		cost = sampler_row_cost(&s->src.sampler, sl->epoch);
		begin = s->prepared[i];
		n = work / cost > 0 ? work / cost : 1;
		if (n > sl->rows - begin)
			n = sl->rows - begin;
		sampler_rows_indices(&s->src.sampler, sl->epoch, sl->step,
		    begin, begin + n, session_indices(s, (uint32_t)i) + begin);
		s->prepared[i] = begin + n;
		work -= n * cost < work ? n * cost : work;
		session_submit(s, (uint32_t)i, begin, begin + n);
	}
	return (session_prepare_slot(s) != -1);
}

/* The next rows' preparation, after the loop has looked at its sockets. */
static void
session_prepare_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session	*s = arg;

	(void)fd;
	(void)what;
	if (session_prepare(s))
		session_prepare_later(s);
}

/*
 * Prepare the filling slots' rows from a timer of no delay (run once the
 * loop has polled its sockets, unlike an event made active); without an
 * event base (the session tests), all at once.
 */
static void
session_prepare_later(struct session *s)
{
	static const struct timeval	now = { 0, 0 };

	if (session_prepare_slot(s) == -1)
		return;
	if (s->host.base == NULL) {
		while (session_prepare(s))
			;
		return;
	}
	if (s->ev_prepare == NULL && (s->ev_prepare = evtimer_new(s->host.base,
	    session_prepare_cb, s)) == NULL)
		fatalx("cannot make a timer for session %llu",
		    (unsigned long long)s->id);
	if (!evtimer_pending(s->ev_prepare, NULL))
		evtimer_add(s->ev_prepare, &now);
}

/*
 * Start filling free slots with the next steps in order: each takes its
 * step, its sequence number and its row count now; its indices and jobs
 * follow a bounded amount at a time (session_prepare()).
 */
static void
session_fill(struct session *s)
{
	struct ring_slot	*sl;
	uint64_t		 rows;
	int			 i;

	while (s->state == SESSION_FILLING) {
		if (s->fill_step >= sampler_epoch_steps(&s->src.sampler,
		    s->fill_epoch)) {
			if (!s->load_indefinitely) {
				session_set_state(s, SESSION_EPOCH_END);
				break;
			}
			s->fill_epoch++;
			s->fill_step = 0;
		}
		if ((i = ring_find(s->ring, SLOT_FREE)) == -1)
			break;
		sl = &s->ring->slot[i];
		rows = sampler_epoch_step_rows(&s->src.sampler, s->fill_epoch,
		    s->fill_step);
		ring_slot_set(s->ring, (uint32_t)i, SLOT_FILLING);
		sl->seq = s->fill_seq++;
		sl->epoch = s->fill_epoch;
		sl->step = s->fill_step++;
		sl->rows = rows;
		sl->rows_pending = rows;
		s->prepared[i] = 0;
		if (rows == 0)
			ring_slot_set(s->ring, (uint32_t)i, SLOT_READY);
	}
	session_prepare_later(s);
}

/* Every step of the epoch went out: answer with EndOfData. */
static void
session_end_epoch(struct session *s)
{
	uint64_t	epoch = s->fill_epoch;

	session_set_state(s, SESSION_IDLE);
	s->fill_epoch++;
	s->fill_step = 0;
	s->ev.end_of_data(s->arg, session_pop(s), epoch);
	/* A Next sent after this one asks for the next epoch. */
	if (s->nwaiting > 0) {
		session_set_state(s, SESSION_FILLING);
		session_fill(s);
	}
}

/* No Next waits any more: add the time one did to the data wait. */
static void
session_wait_end(struct session *s)
{
	if (s->nwaiting > 0 || s->wait_since_us == 0)
		return;
	s->data_wait_us += clock_now_us() - s->wait_since_us;
	s->wait_since_us = 0;
}

/*
 * The data wait so far, in microseconds, counting a wait still going on,
 * and the time since the first Next (the session's active time).
 */
static void
session_data_wait(const struct session *s, uint64_t *wait_us,
    uint64_t *active_us)
{
	uint64_t	now = clock_now_us();

	*wait_us = s->data_wait_us;
	if (s->wait_since_us != 0)
		*wait_us += now - s->wait_since_us;
	*active_us = s->first_next_ms ? now - s->first_next_ms * 1000 : 0;
	if (*wait_us > *active_us)
		*wait_us = *active_us;
}

/* What a waiting Next gets from a (failed) producer's slot @sl. */
enum session_gate {
	SESSION_GATE_STEP,	/* the step, if it is ready */
	SESSION_GATE_WAIT,	/* a step before the failed one, filling */
	SESSION_GATE_ERROR,	/* the failure */
};

/*
 * Failed: the steps before the failed one still go out as they become
 * ready (until the jobs are dropped); every other Next gets the error.
 */
static enum session_gate
session_gate(const struct session *p, const struct ring_slot *sl)
{
	if (p->state != SESSION_FAILED)
		return (SESSION_GATE_STEP);
	if (sl != NULL && sl->seq < p->failed_seq &&
	    sl->state == SLOT_FILLING && !p->jobs_dropped)
		return (SESSION_GATE_WAIT);
	if (sl == NULL || sl->seq >= p->failed_seq ||
	    (sl->state != SLOT_READY && sl->state != SLOT_HELD))
		return (SESSION_GATE_ERROR);
	return (SESSION_GATE_STEP);
}

/*
 * Answer the oldest waiting Next with slot @i of ring @r (held for @s
 * already), numbered from @first_slot; with its ring when s->new_ring.
 */
static void
session_send_step(struct session *s, const struct ring *r, uint32_t i,
    uint32_t first_slot)
{
	const struct ring_slot	*sl = &r->slot[i];
	struct session_step	 st;

	memset(&st, 0, sizeof(st));
	st.slot = i + first_slot;
	st.epoch = sl->epoch;
	st.step = sl->step;
	st.rows = sl->rows;
	st.new_ring = s->new_ring;
	st.first_slot = first_slot;
	st.ring_slots = r->layout.slots;
	st.slot_bytes = r->layout.slot_bytes;
	st.ring_bytes = r->layout.ring_bytes;
	s->new_ring = false;
	s->epoch = sl->epoch;
	s->step = sl->step;
	s->steps_delivered++;
	s->last_slot = st.slot;
	s->rows_delivered += sl->rows;
	s->ev.step(s->arg, session_pop(s), &st);
}

/* The slot of ring @r that holds step @seq, or NULL. */
static struct ring_slot *
session_find_seq(const struct ring *r, uint64_t seq, uint32_t *index)
{
	uint32_t	i;

	for (i = 0; i < r->layout.slots; i++) {
		if (r->slot[i].state != SLOT_FREE && r->slot[i].seq == seq) {
			*index = i;
			return (&r->slot[i]);
		}
	}
	return (NULL);
}

/* Answer waiting Next requests with ready steps, in order. */
static void
session_deliver(struct session *s)
{
	struct ring_slot	*sl;
	uint32_t		 i = 0;

	while (s->nwaiting > 0) {
		sl = session_find_seq(s->ring, s->deliver_seq, &i);
		switch (session_gate(s, sl)) {
		case SESSION_GATE_WAIT:
			return;
		case SESSION_GATE_ERROR:
			s->ev.error(s->arg, session_pop(s),
			    s->failure_code, s->failure);
			continue;
		case SESSION_GATE_STEP:
			break;
		}
		if (sl == NULL && s->state == SESSION_EPOCH_END &&
		    s->deliver_seq == s->fill_seq) {
			session_end_epoch(s);
			continue;
		}
		if (sl == NULL || sl->state != SLOT_READY)
			return;
		ring_slot_hold(s->ring, i);
		s->deliver_seq++;
		pool_ring_delivered(s->pool_ring, s->deliver_seq);
		session_send_step(s, s->ring, i, s->first_slot);
	}
	session_wait_end(s);
}

/*
 * A member's session_deliver(): its waiting Nexts get the group's ready
 * steps from its own position on, and an EndOfData after each epoch
 * without load_indefinitely (the producer fills on into the next).
 */
static void
session_member_deliver(struct session *m)
{
	struct session		*p = m->group->producer;
	struct ring_slot	*sl;
	uint32_t		 i = 0;

	while (m->nwaiting > 0) {
		if (m->state == SESSION_EPOCH_END) {
			session_set_state(m, SESSION_IDLE);
			m->ev.end_of_data(m->arg, session_pop(m),
			    m->pos_epoch - 1);
			if (m->nwaiting > 0) {
				session_set_state(m, SESSION_FILLING);
				session_group_start(m->group);
			}
			continue;
		}
		sl = session_find_seq(p->ring, m->deliver_seq, &i);
		switch (session_gate(p, sl)) {
		case SESSION_GATE_WAIT:
			goto out;
		case SESSION_GATE_ERROR:
			m->ev.error(m->arg, session_pop(m), p->failure_code,
			    p->failure);
			continue;
		case SESSION_GATE_STEP:
			break;
		}
		if (sl == NULL || !ring_slot_filled(p->ring, i))
			break;
		ring_slot_hold(p->ring, i);
		m->shared_held |= session_group_bit(i);
		m->deliver_seq++;
		m->pos_epoch = sl->epoch;
		m->pos_step = sl->step + 1;
		if (m->pos_step >= sampler_epoch_steps(&p->src.sampler,
		    sl->epoch)) {
			m->pos_epoch++;
			m->pos_step = 0;
			if (!m->load_indefinitely)
				session_set_state(m, SESSION_EPOCH_END);
		}
		/* The group's ring, numbered from 0 (sent if it rejoined). */
		session_send_step(m, p->ring, i, 0);
	}
out:
	session_wait_end(m);
}

/* Next: start filling if needed, answer when the next step is ready. */
int
session_next(struct session *s, struct session_req req,
    enum errcode *code, char **cause)
{
	uint32_t	nslots, held;
	bool		ended;

	ended = s->reader == SESSION_ENDED;
	if (s->reader == SESSION_LEFT && s->group != NULL)
		(void)session_group_rejoin(s);
	if (ended) {
		/* Ended by its group (session_group_end()): it says why. */
		nslots = 1;
		held = 0;
	} else if (session_in_group(s)) {
		nslots = s->group->producer->ring->layout.slots;
		held = (uint32_t)__builtin_popcountll(s->shared_held);
	} else {
		nslots = s->ring->layout.slots;
		held = ring_count(s->ring, SLOT_HELD);
	}
	*code = ERRCODE_UNEXPECTED;
	if (held == nslots) {
		*cause = xasprintf("all %u slots are held; release a step "
		    "before asking for the next one (or attach with a larger "
		    "buffer_size)", nslots);
		return (-1);
	}
	if (s->nwaiting == SESSION_MAX_WAITING) {
		*cause = xasprintf("%d Next requests already wait for steps; "
		    "read their answers before sending more",
		    SESSION_MAX_WAITING);
		return (-1);
	}
	if (s->first_next_ms == 0)
		s->first_next_ms = clock_now_ms();
	s->waiting[(s->waiting_first + s->nwaiting) % SESSION_MAX_WAITING] =
	    req;
	s->waiting_us[(s->waiting_first + s->nwaiting) % SESSION_MAX_WAITING] =
	    clock_now_us();
	s->nwaiting++;
	if (ended) {
		session_cancel(s, s->failure_code, s->failure);
		return (0);
	}
	if (s->state == SESSION_IDLE)
		session_set_state(s, SESSION_FILLING);
	if (session_in_group(s)) {
		session_group_start(s->group);
		session_member_deliver(s);
	} else {
		session_fill(s);
		session_deliver(s);
	}
	/* Not answered at once: the client waits for data from now. */
	if (s->nwaiting > 0 && s->wait_since_us == 0)
		s->wait_since_us = clock_now_us();
	if (session_in_group(s))
		session_group_watch(s->group);
	return (0);
}

/* Release: the client is done with a slot. */
int
session_release(struct session *s, uint32_t slot, char **cause)
{
	struct session_group	*g = s->group;

	/* A slot of the group's ring (a member's, or one that left). */
	if (g != NULL && slot < INFEED_MAX_GROUP_SLOTS &&
	    (s->shared_held & session_group_bit(slot))) {
		s->shared_held &= ~session_group_bit(slot);
		ring_slot_unhold(g->producer->ring, slot);
		session_group_settle(g);
		return (0);
	}
	/* A slot of its own ring (also one it kept when it rejoined). */
	if (s->ring == NULL || slot < s->first_slot ||
	    slot - s->first_slot >= s->ring->layout.slots ||
	    s->ring->slot[slot - s->first_slot].state != SLOT_HELD) {
		*cause = xasprintf("slot %u is not held by this session; "
		    "release only slots received in a Step, once each", slot);
		return (-1);
	}
	/* Its only reader is done with it: it takes a later step. */
	ring_slot_unhold(s->ring, slot - s->first_slot);
	ring_slot_set(s->ring, slot - s->first_slot, SLOT_FREE);
	if (session_in_group(s)) {
		session_own_ring_drop(s);
		return (0);
	}
	session_fill(s);
	session_deliver(s);
	return (0);
}

/*
 * The client detaches having read @received Steps: one more sent than
 * that crossed the Detach and was never handed out, so it is released
 * (held, it would stay charged, and a group's slot unfilled, until the
 * client's process exits).  Any other count changes nothing.
 */
void
session_detaching(struct session *s, uint64_t received)
{
	char	*cause = NULL;

	if (s->steps_delivered == 0 || s->steps_delivered != received + 1)
		return;
	if (session_release(s, s->last_slot, &cause) == 0)
		log_debug("session %llu: slot %u, sent as the client "
		    "detached, released unread", (unsigned long long)s->id,
		    s->last_slot);
	free(cause);
}

/* Answer every waiting Next with an error. */
void
session_cancel(struct session *s, enum errcode code, const char *message)
{
	while (s->nwaiting > 0)
		s->ev.error(s->arg, session_pop(s), code, message);
	session_wait_end(s);
}

/* After a reload: keep going if our dataset is unchanged, else -1. */
int
session_reload(struct session *s, const struct catalogue *cat)
{
	size_t	i;

	/* The client's files are no part of the catalogue. */
	if (s->src.own_ds)
		return (0);
	if (s->group != NULL && s->reader != SESSION_PRODUCER &&
	    session_reload(s->group->producer, cat) == -1)
		return (-1);
	for (i = 0; i < cat->ndatasets; i++) {
		if (cat->datasets[i] == s->src.ds)
			break;
	}
	if (i == cat->ndatasets)
		return (-1);
	s->host.cat = cat;
	s->src.ds_index = i;
	if (s->pool_ring != NULL)
		pool_ring_set_dataset(s->pool_ring, (uint32_t)i);
	return (0);
}

/* The Attached reply's facts. */
void
session_describe(const struct session *s, struct session_info *info)
{
	info->id = s->id;
	info->combined_batch_size = s->src.sampler.cbs;
	info->steps_per_epoch = s->src.sampler.steps_per_epoch;
	info->last_step_rows = sampler_step_rows(&s->src.sampler,
	    s->src.sampler.steps_per_epoch - 1);
	info->start_epoch_steps = sampler_epoch_steps(&s->src.sampler,
	    s->opts.start_epoch);
	info->start_epoch_last_step_rows = info->start_epoch_steps == 0 ? 0 :
	    sampler_epoch_step_rows(&s->src.sampler, s->opts.start_epoch,
	    info->start_epoch_steps - 1);
	info->layout = session_view_ring(s)->layout;
	info->group_id = s->group != NULL ? s->group->id : 0;
	info->sample_dims = s->src.out_dims;
	info->sample_shape = s->src.out_shape;
	info->data_dtype = transform_out_dtype(&s->src.transform, s->src.ds);
	info->sample_bytes = s->src.transform.out_sample_bytes;
}

/* The ring the client maps now: its group's, or its own. */
static const struct ring *
session_view_ring(const struct session *s)
{
	return (session_in_group(s) ? s->group->producer->ring :
	    s->ring);
}

/* A member's group, and its ring's slots, for the stats. */
static void
session_group_report(const struct session *s, struct session_report *r)
{
	const struct session	*p;
	uint32_t		 i;

	r->group_id = 0;
	r->group_members = 0;
	r->group_steps_filled = 0;
	r->group_bytes_read = 0;
	r->group_left = session_left(s);
	memset(r->group_leaves, 0, sizeof(r->group_leaves));
	r->group_stays = r->group_rejoins = 0;
	/* One that left shows its group while it holds slots there. */
	if (s->group == NULL || (session_left(s) && s->shared_held == 0))
		return;
	p = s->group->producer;
	r->group_id = s->group->id;
	memcpy(r->group_leaves, s->group->leaves, sizeof(r->group_leaves));
	r->group_stays = s->group->stays;
	r->group_rejoins = s->group->rejoins;
	r->group_members = s->group->nmembers;
	r->group_steps_filled = p->fill_seq;
	r->group_bytes_read = p->bytes_read;
	if (session_left(s))
		return;
	r->slots_ready = 0;
	for (i = 0; i < p->ring->layout.slots; i++) {
		if (ring_slot_filled(p->ring, i) &&
		    p->ring->slot[i].seq >= s->deliver_seq)
			r->slots_ready++;
	}
	r->slots_held = (uint32_t)__builtin_popcountll(s->shared_held);
	r->slots = p->ring->layout.slots;
}

/* What the session is and did so far, for the stats. */
void
session_report(const struct session *s, struct session_report *r)
{
	uint64_t	elapsed;

	r->id = s->id;
	r->dataset = s->src.ds->name;
	r->own_files = s->src.own_ds;
	r->options = &s->opts;
	r->client_pid = s->client.pid;
	r->client_uid = s->client.uid;
	r->epoch = s->epoch;
	r->step = s->step;
	session_group_report(s, r);
	if (s->reader == SESSION_ENDED) {
		/* Ended by its group (session_group_end()). */
		r->slots_ready = r->slots_held = r->slots = 0;
	} else if (!session_in_group(s)) {
		r->slots_ready = ring_count(s->ring, SLOT_READY);
		r->slots_held = ring_count(s->ring, SLOT_HELD);
		r->slots = s->ring->layout.slots;
	}
	r->steps = s->steps_delivered;
	r->rows = s->rows_delivered;
	r->bytes_read = s->bytes_read;
	r->samples_replaced = s->samples_replaced;
	elapsed = s->first_next_ms ? clock_now_ms() - s->first_next_ms : 0;
	r->items_per_s = elapsed ? (double)s->rows_delivered * 1000.0 /
	    (double)elapsed : 0.0;
	session_data_wait(s, &r->data_wait_us, &r->active_us);
	memcpy(r->wait_counts, s->wait_counts, sizeof(r->wait_counts));
}

/* A read-only descriptor of the ring for the client. */
int
session_ring_fd(const struct session *s)
{
	return (ring_readonly_fd(session_view_ring(s)));
}

/* The session's id, unique in this daemon. */
uint64_t
session_id(const struct session *s)
{
	return (s->id);
}

/* The name of the session's dataset. */
const char *
session_dataset_name(const struct session *s)
{
	return (s->src.ds->name);
}
