/* SPDX-License-Identifier: MIT */
/*
 * Sessions (see session.h).  Steps are filled and delivered in sequence
 * order; a slow client stalls only its own session.  A Next is answered
 * as soon as the next step is ready, never by polling.
 */

#include <sys/queue.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
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
#include "utf8.h"
#include "xmalloc.h"

/* dataset.h numbers the formats as infeed.proto does. */
_Static_assert((int)DATASET_FORMAT_NONE ==
    (int)INFEED__FILE_FORMAT__FILE_FORMAT_NONE &&
    (int)DATASET_FORMAT_RAW == (int)INFEED__FILE_FORMAT__FILE_FORMAT_RAW &&
    (int)DATASET_FORMAT_NPY == (int)INFEED__FILE_FORMAT__FILE_FORMAT_NPY,
    "dataset.h and infeed.proto disagree on file formats");

#define SESSION_JOBS_PER_WORKER	4	/* jobs a step is cut into, per worker */
/*
 * ... each of this many bytes of arrays at least: a job costs a round trip
 * to a worker (images cost their decoding, whatever their size).
 */
#define SESSION_JOB_MIN_BYTES	(4 * 1024 * 1024)
#define SESSION_MAX_WAITING	INFEED_MAX_SLOTS	/* Next requests */

enum session_state {
	SESSION_IDLE,		/* nothing asked for yet, or after EndOfData */
	SESSION_FILLING,	/* steps are being filled and delivered */
	SESSION_EPOCH_END,	/* the epoch's last step is queued */
	SESSION_FAILED,		/* a sample could not be read */
};

struct session {
	struct session_host	 host;
	struct session_client	 client;
	struct session_events	 ev;
	void			*arg;
	uint64_t		 id;
	enum session_state	 state;

	struct dataset		*ds;
	size_t			 ds_index;
	struct dataset_files	 files;		/* with own_ds */
	bool			 own_ds;	/* the client's files */
	struct sampler		 sampler;
	Infeed__LoaderOptions	*opts;		/* a copy, for status */
	bool			 load_indefinitely;
	enum infeed_dtype	 label_dtype;	/* in the ring */
	struct transform	 transform;
	struct ring		*ring;
	uint64_t		*indices;	/* per slot, our own copy */
	struct pool_ring	*pool_ring;
	char			*failure;
	Infeed__ErrorCode	 failure_code;	/* DATA, or INTERNAL */
	uint64_t		 failed_seq;	/* the first step that failed */
	bool			 jobs_dropped;	/* ... and the rest dropped */

	uint64_t		 fill_epoch;
	uint64_t		 fill_step;
	uint64_t		 fill_seq;
	uint64_t		 deliver_seq;
	struct session_req	 waiting[SESSION_MAX_WAITING];	/* FIFO */
	uint64_t		 waiting_us[SESSION_MAX_WAITING]; /* since */
	unsigned		 waiting_first;
	unsigned		 nwaiting;

	uint64_t		 epoch;		/* of the last step delivered */
	uint64_t		 step;
	uint64_t		 steps_delivered;
	uint64_t		 rows_delivered;
	uint64_t		 first_next_ms;
	/*
	 * Data wait: the time the client had a Next waiting with no step
	 * ready, the answer to "is this trainer input-bound?".
	 */
	uint64_t		 bytes_read;	/* from the dataset, by workers */
	uint64_t		 samples_replaced; /* bad ones, by others */
	uint64_t		 out_shape[INFEED_MAX_DIMS]; /* of a row */
	uint32_t		 out_dims;
	uint64_t		 wait_since_us;	/* 0: no Next waits */
	uint64_t		 data_wait_us;
	/* Nexts answered, by how long each waited (session_wait_bounds). */
	uint64_t		 wait_counts[SESSION_WAIT_BUCKETS];
};

/* The upper bounds, in seconds, of the wait histogram's buckets. */
const double	session_wait_bounds[SESSION_WAIT_BUCKETS - 1] = {
	0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5,
};

static uint64_t	session_next_id;	/* 0: not seeded yet */

struct session_checked;

static void	session_fill(struct session *);
static void	session_deliver(struct session *);
static struct session *session_make(const struct session_host *,
		    const struct session_client *, const Infeed__Attach *,
		    int *, size_t, struct session_checked *,
		    const struct session_events *, void *,
		    Infeed__ErrorCode *, char **);

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
	return (s->indices + (uint64_t)i * s->sampler.cbs);
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
	s->failure_code = INFEED__ERROR_CODE__ERROR_DATA;
	if (r->result == POOL_JOB_CRASHED && r->signal == 0) {
		/* Not the data's doing (fatal() in a worker): ours. */
		snprintf(what, sizeof(what), "workers exited %u times (status "
		    "%d; the daemon's log says why) reading", r->deaths,
		    r->status);
		s->failure_code = INFEED__ERROR_CODE__ERROR_INTERNAL;
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
	files = session_sample_files(s->ds);
	if (r->result == POOL_JOB_INTERNAL) {
		s->failure_code = INFEED__ERROR_CODE__ERROR_INTERNAL;
		s->failure = xasprintf("dataset '%s': the daemon cannot fill "
		    "step %llu (epoch %llu): %s; see the daemon's log",
		    s->ds->name, (unsigned long long)sl->step,
		    (unsigned long long)sl->epoch, r->reason[0] != '\0' ?
		    r->reason : "a worker failed");
	} else if (r->result == POOL_JOB_LABEL_RANGE &&
	    (r->label < 0 || r->label >= UINT32_MAX))
		s->failure = xasprintf("dataset '%s': the label of sample %llu "
		    "(epoch %llu, step %llu) is %lld, which is no class "
		    "number: labels are 0 to %u; check the labels %s",
		    s->ds->name, (unsigned long long)index,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    (long long)r->label, UINT32_MAX - 1, files);
	else if (r->result == POOL_JOB_LABEL_RANGE)
		s->failure = xasprintf("dataset '%s': the label of sample "
		    "%llu (epoch %llu, step %llu) is %lld, which does not fit "
		    "in the int32 labels this session asked for; attach with "
		    "label_dtype DTYPE_INT64, or check the labels %s",
		    s->ds->name, (unsigned long long)index,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    (long long)r->label, files);
	else if (s->ds->encoded) {
		/*
		 * An image: the worker says what was wrong with it, and
		 * where; after a death, name it without reading anything.
		 */
		at = r->where != NULL && r->where[0] != '\0' ? r->where :
		    dataset_sample_brief(s->ds, index, where, sizeof(where));
		s->failure = xasprintf("dataset '%s': %s sample %llu (%sepoch "
		    "%llu, step %llu), %s: %s; fix or remove that file, or set "
		    "'bad_samples = replace' for the dataset", s->ds->name,
		    what, (unsigned long long)index, row,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    at, r->reason[0] != '\0' ? r->reason : "it cannot be read");
	} else
		s->failure = xasprintf("dataset '%s': %s sample %llu (%sepoch "
		    "%llu, step %llu) %s%s%s%s", s->ds->name, what,
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

	if (r->slot >= s->ring->layout.slots ||
	    s->ring->slot[r->slot].state != SLOT_FILLING)
		return;
	sl = &s->ring->slot[r->slot];
	s->bytes_read += r->bytes;
	s->samples_replaced += r->replaced;
	if (r->result != POOL_JOB_DONE)
		session_fail(s, r);
	sl->rows_pending -= r->rows < sl->rows_pending ? r->rows :
	    sl->rows_pending;
	if (sl->rows_pending == 0)
		ring_slot_set(s->ring, r->slot, SLOT_READY);
	if (s->state == SESSION_FAILED)
		session_drop_after_failure(s);
	session_deliver(s);
}

/* Check the label dtype asked for: int32 (the default) or int64. */
static int
session_check_label_dtype(struct session *s, const Infeed__LoaderOptions *o,
    char **cause)
{
	const ProtobufCEnumValue *v;

	switch (o->label_dtype) {
	case INFEED__DTYPE__DTYPE_INT32:
	case INFEED__DTYPE__DTYPE_INT64:
		s->label_dtype = (enum infeed_dtype)o->label_dtype;
		return (0);
	default:
		break;
	}
	v = protobuf_c_enum_descriptor_get_value(&infeed__dtype__descriptor,
	    (int)o->label_dtype);
	if (v != NULL)
		*cause = xasprintf("label_dtype is %s (%d); expected "
		    "DTYPE_INT32 (2, the default) or DTYPE_INT64 (3, what "
		    "torch's CrossEntropyLoss takes)", v->name,
		    (int)o->label_dtype);
	else
		*cause = xasprintf("label_dtype is %d, which is no DType; "
		    "expected DTYPE_INT32 (2, the default) or DTYPE_INT64 (3, "
		    "what torch's CrossEntropyLoss takes)", (int)o->label_dtype);
	return (-1);
}

/*
 * Read what Attach.files says of the client's files into @spec, and refuse
 * what is wrong with it before any descriptor is touched: on the event
 * loop, since it reads only the frame.
 */
static int
session_files_spec(const Infeed__Attach *a, size_t nfds,
    struct dataset_files *spec, Infeed__ErrorCode *code, char **cause)
{
	const Infeed__Files	*f = a->files;
	size_t			 want, i;

	*code = INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT;
	*cause = NULL;
	memset(spec, 0, sizeof(*spec));
	spec->data_format = f->has_data_format ? (uint32_t)f->data_format : 0;
	spec->labels_format = f->has_labels_format ?
	    (uint32_t)f->labels_format : 0;
	spec->dtype = f->has_dtype ? (uint32_t)f->dtype : 0;
	spec->label_dtype = f->has_label_dtype ? (uint32_t)f->label_dtype : 0;
	want = spec->labels_format == DATASET_FORMAT_NONE ? 1 : 2;
	if (*a->dataset == '\0' || !utf8_valid(a->dataset,
	    strlen(a->dataset)))
		*cause = xasprintf("a session on files needs a name (Attach."
		    "dataset, shown in logs and stats): 1 to %d bytes of "
		    "UTF-8", INFEED_MAX_DATASET_NAME);
	else if (nfds != want)
		*cause = xasprintf("%zu file descriptors came with the Attach "
		    "frame where its files need %zu: the data file's, then "
		    "the labels file's when labels_format is not none, as "
		    "SCM_RIGHTS with the frame's first byte", nfds, want);
	else if (f->n_shape > INFEED_MAX_DIMS)
		*cause = xasprintf("Files.shape has %zu dimensions; a sample "
		    "has at most %d", f->n_shape, INFEED_MAX_DIMS);
	else if (spec->data_format == DATASET_FORMAT_NPY &&
	    (f->n_shape > 0 || f->has_dtype))
		*cause = xasprintf("npy data says its own shape and dtype; "
		    "leave Files.shape and Files.dtype unset");
	else if (spec->labels_format != DATASET_FORMAT_RAW &&
	    f->has_label_dtype)
		*cause = xasprintf("Files.label_dtype is for raw labels only; "
		    "leave it unset");
	if (*cause != NULL)
		return (-1);
	spec->ndim = (uint32_t)f->n_shape;
	for (i = 0; i < f->n_shape; i++)
		spec->shape[i] = f->shape[i];
	return (0);
}

/*
 * Open the client's files as the session's dataset, from the descriptors
 * that came with the Attach (taken over).  The name is only for display;
 * there is no catalogue to find it in or allow_groups to check: the kernel
 * checked the client's own access when it opened the files.  This is the
 * synchronous way, for session_new_files(); infeedd checks them on a
 * helper thread (session_attach_begin()).
 */
static int
session_open_files(struct session *s, const Infeed__Attach *a, int *fds,
    size_t nfds, Infeed__ErrorCode *code, char **cause)
{
	size_t	i;
	bool	content;

	if (session_files_spec(a, nfds, &s->files, code, cause) == -1) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		return (-1);
	}
	s->ds = dataset_open_files(a->dataset, &s->files, fds[0],
	    nfds > 1 ? fds[1] : -1, false, &content, cause);
	if (s->ds == NULL) {
		if (content)
			*code = INFEED__ERROR_CODE__ERROR_DATA;
		if (*cause == NULL)
			*cause = xasprintf("out of memory");
		return (-1);
	}
	s->own_ds = true;
	s->ds_index = UINT32_MAX;
	return (0);
}

/* What a helper thread checked for an Attach, for session_check(). */
struct session_checked {
	struct dataset		*ds;		/* the client's files, or NULL */
	struct dataset_files	 files;		/* ... as Attach.files says */
	bool			 have_groups;	/* the client's groups: */
	gid_t			*groups;
	size_t			 ngroups;
};

/* May the client attach to catalogue dataset s->ds_index? */
static bool
session_allowed(const struct session *s, const struct session_checked *chk)
{
	const struct catalogue	*cat = s->host.cat;

	if (catalogue_allows_gid(cat, s->ds_index, s->client.gid))
		return (true);
	if (chk != NULL && chk->have_groups)
		return (catalogue_allows_groups(cat, s->ds_index,
		    s->client.gid, chk->groups, chk->ngroups));
	/*
	 * Only without a thread's answer (session_new(), or a reload that
	 * restricted the dataset while the Attach waited): ask now.
	 */
	return (catalogue_allows(cat, s->ds_index, s->client.uid,
	    s->client.gid));
}

/*
 * Check the access and options an Attach brings; fill in the sampler.
 * With @chk, the client's files were opened (and its groups looked up) on
 * a helper thread already: take them from there.
 */
static int
session_check(struct session *s, const Infeed__Attach *a,
    const Infeed__LoaderOptions *o, int *fds, size_t nfds,
    struct session_checked *chk, Infeed__ErrorCode *code, char **cause)
{
	struct sampler_opts	so;

	if (a->files != NULL && chk != NULL && chk->ds != NULL) {
		s->files = chk->files;
		s->ds = chk->ds;
		chk->ds = NULL;
		s->own_ds = true;
		s->ds_index = UINT32_MAX;
	} else if (a->files != NULL) {
		if (session_open_files(s, a, fds, nfds, code, cause) == -1)
			return (-1);
	} else if ((s->ds = catalogue_find(s->host.cat, a->dataset,
	    &s->ds_index)) == NULL) {
		*code = INFEED__ERROR_CODE__ERROR_NOT_FOUND;
		*cause = xasprintf("no such dataset; 'infeedctl datasets' "
		    "lists the catalogue");
		return (-1);
	}
	if (!s->own_ds && !session_allowed(s, chk)) {
		*code = INFEED__ERROR_CODE__ERROR_PERMISSION_DENIED;
		*cause = xasprintf("permission denied: uid %u (gid %u) is not in "
		    "any group that allow_groups in %s permits for this "
		    "dataset; ask the operator to add you to one",
		    (unsigned)s->client.uid, (unsigned)s->client.gid,
		    s->host.config_path);
		log_warnx("client %llu (pid %d, uid %u): refused attach to "
		    "'%s' by allow_groups", (unsigned long long)
		    s->client.peer_id, (int)s->client.pid,
		    (unsigned)s->client.uid, s->ds->name);
		return (-1);
	}
	*code = INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT;
	if (o->buffer_size == 0 || o->buffer_size > INFEED_MAX_SLOTS) {
		*cause = xasprintf("buffer_size is %u; expected 1 to %d slots "
		    "(poptorch's default is 3)", o->buffer_size,
		    INFEED_MAX_SLOTS);
		return (-1);
	}
	if (session_check_label_dtype(s, o, cause) == -1)
		return (-1);
	memset(&so, 0, sizeof(so));
	so.samples = s->ds->samples;
	so.batch_size = o->batch_size;
	so.device_iterations = o->device_iterations;
	so.replication_factor = o->replication_factor;
	so.gradient_accumulation = o->gradient_accumulation;
	so.shuffle = o->shuffle;
	so.seed = o->seed;
	so.drop_last = o->drop_last;
	so.process_id = o->distributed_process_id;
	so.process_count = o->distributed_process_count;
	if (sampler_init(&s->sampler, &so, cause) == -1) {
		if (errno == ENOMEM)
			*code = INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED;
		return (-1);
	}
	if (o->start_step >= s->sampler.steps_per_epoch) {
		*cause = xasprintf("start_step is %llu but an epoch has %llu "
		    "steps (0 to %llu)", (unsigned long long)o->start_step,
		    (unsigned long long)s->sampler.steps_per_epoch,
		    (unsigned long long)s->sampler.steps_per_epoch - 1);
		return (-1);
	}
	if (transform_init(&s->transform, o->transform, s->ds, cause) == -1)
		return (-1);
	/* An image's crop and flip draw from the shuffle's seed. */
	s->transform.seed = o->seed;
	s->transform.bad_replace = !s->own_ds &&
	    s->host.cat->entries[s->ds_index].bad_replace;
	s->out_dims = transform_out_shape(&s->transform, s->ds, s->out_shape);
	return (0);
}

/*
 * A deep copy of a protocol message (an Attach, which outlives its frame;
 * the options, kept for status), by packing and unpacking it.
 */
static void *
session_copy_message(const ProtobufCMessage *m)
{
	ProtobufCMessage	*copy;
	uint8_t			*packed;
	size_t			 len;

	len = protobuf_c_message_get_packed_size(m);
	packed = xmalloc(len);
	protobuf_c_message_pack(m, packed);
	copy = protobuf_c_message_unpack(m->descriptor, NULL, len, packed);
	free(packed);
	if (copy == NULL)
		fatalx("cannot copy a %s", m->descriptor->short_name);
	return (copy);
}

/* Attach: check everything, then make the ring and register it. */
struct session *
session_new(const struct session_host *host,
    const struct session_client *client, const Infeed__Attach *a,
    const struct session_events *ev, void *arg, Infeed__ErrorCode *code,
    char **cause)
{
	return (session_new_files(host, client, a, NULL, 0, ev, arg, code,
	    cause));
}

/* Attach, with the descriptors that came with the frame (taken over). */
struct session *
session_new_files(const struct session_host *host,
    const struct session_client *client, const Infeed__Attach *a,
    int *fds, size_t nfds, const struct session_events *ev, void *arg,
    Infeed__ErrorCode *code, char **cause)
{
	return (session_make(host, client, a, fds, nfds, NULL, ev, arg, code,
	    cause));
}

/*
 * Make the session an Attach asks for: check it (with what a helper
 * thread checked already, @chk), make the ring and register it.  A
 * removed ring's memory that workers still write is not waited for here:
 * session_attach_begin() waits for it on the loop.
 */
static struct session *
session_make(const struct session_host *host,
    const struct session_client *client, const Infeed__Attach *a,
    int *fds, size_t nfds, struct session_checked *chk,
    const struct session_events *ev, void *arg, Infeed__ErrorCode *code,
    char **cause)
{
	static const Infeed__LoaderOptions defaults =
	    INFEED__LOADER_OPTIONS__INIT;
	const Infeed__LoaderOptions *o;
	struct session		*s;
	struct ring_owner	 owner;

	o = a->options != NULL ? a->options : &defaults;
	s = xcalloc(1, sizeof(*s));
	s->host = *host;
	s->client = *client;
	s->ev = *ev;
	s->arg = arg;
	*cause = NULL;
	if (a->files == NULL && nfds > 0) {
		*code = INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT;
		*cause = xasprintf("%zu file descriptors came with an Attach "
		    "to a catalogue dataset; descriptors come only with "
		    "Attach.files", nfds);
		while (nfds > 0)
			close(fds[--nfds]);
		goto fail;
	}
	if (session_check(s, a, o, fds, nfds, chk, code, cause) == -1)
		goto fail;
	*code = INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED;
	owner.uid = client->uid;
	owner.gid = client->gid;
	owner.content = s->ds->serial;
	owner.pid = client->pid;
	s->ring = ring_new(host->budget, s->sampler.cbs,
	    s->transform.out_sample_bytes, s->label_dtype, o->buffer_size,
	    &owner, cause);
	if (s->ring == NULL)
		goto fail;
	if ((s->indices = calloc(o->buffer_size, s->sampler.cbs *
	    sizeof(uint64_t))) == NULL) {
		*cause = xasprintf("no memory for the index tables of %u "
		    "slots of %llu rows", o->buffer_size,
		    (unsigned long long)s->sampler.cbs);
		goto fail;
	}
	s->pool_ring = pool_add_ring(host->pool, (uint32_t)s->ds_index,
	    &s->ring->layout, &s->transform, s->ring->mem, o->num_workers,
	    session_done_cb, s, cause);
	if (s->pool_ring == NULL)
		goto fail;
	if (s->own_ds && pool_ring_files(s->pool_ring, &s->files, s->ds,
	    cause) == -1) {
		*code = INFEED__ERROR_CODE__ERROR_INTERNAL;
		goto fail;
	}
	s->id = session_new_id();
	s->load_indefinitely = o->load_indefinitely;
	s->fill_epoch = o->start_epoch;
	s->fill_step = o->start_step;
	s->opts = session_copy_message(&o->base);
	log_info("client %llu: session %llu on %s'%s': combined batch %llu, "
	    "%llu steps per epoch, %u slots of %llu KiB, shuffle %s, "
	    "process %u of %u", (unsigned long long)client->peer_id,
	    (unsigned long long)s->id, s->own_ds ? "the client's files " : "",
	    s->ds->name,
	    (unsigned long long)s->sampler.cbs,
	    (unsigned long long)s->sampler.steps_per_epoch,
	    s->ring->layout.slots,
	    (unsigned long long)(s->ring->layout.slot_bytes >> 10),
	    o->shuffle ? "on" : "off", o->distributed_process_id,
	    o->distributed_process_count);
	/* Fill the ring now; the first Step still waits for the first Next. */
	if (o->early_preload) {
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
	if (s->own_ds)
		dataset_free(s->ds);
	free(s->indices);
	if (s->opts != NULL)
		infeed__loader_options__free_unpacked(s->opts, NULL);
	sampler_clear(&s->sampler);
	free(s->failure);
	free(s);
}

/*
 * Queue the rows of slot @i on the pool, cut so every worker gets some
 * (of arrays, 4 MiB a job at least), as the step the client takes in
 * the ring's order (the pool serves the nearest steps first).
 */
static void
session_submit(struct session *s, uint32_t i, uint64_t epoch, uint64_t rows)
{
	uint64_t	chunk, r, njobs;

	njobs = (uint64_t)pool_size(s->host.pool) * SESSION_JOBS_PER_WORKER;
	if (!s->transform.image &&
	    rows * s->ring->layout.row_bytes / SESSION_JOB_MIN_BYTES < njobs)
		njobs = rows * s->ring->layout.row_bytes /
		    SESSION_JOB_MIN_BYTES;
	if (njobs == 0)
		njobs = 1;
	chunk = (rows + njobs - 1) / njobs;
	for (r = 0; r < rows; r += chunk)
		pool_submit(s->pool_ring, i, epoch, s->ring->slot[i].seq, r,
		    r + chunk < rows ? r + chunk : rows,
		    session_indices(s, i) + r);
}

/* Start filling free slots with the next steps in order. */
static void
session_fill(struct session *s)
{
	struct ring_slot	*sl;
	uint64_t		 rows;
	int			 i;

	while (s->state == SESSION_FILLING) {
		if (s->fill_step >= s->sampler.steps_per_epoch) {
			if (!s->load_indefinitely) {
				session_set_state(s, SESSION_EPOCH_END);
				return;
			}
			s->fill_epoch++;
			s->fill_step = 0;
		}
		if ((i = ring_find(s->ring, SLOT_FREE)) == -1)
			return;
		sl = &s->ring->slot[i];
		/* Never fails: sampler_init() allocated what it needs. */
		rows = sampler_step_indices(&s->sampler, s->fill_epoch,
		    s->fill_step, session_indices(s, (uint32_t)i));
		ring_slot_set(s->ring, (uint32_t)i, SLOT_FILLING);
		sl->seq = s->fill_seq++;
		sl->epoch = s->fill_epoch;
		sl->step = s->fill_step++;
		sl->rows = rows;
		sl->rows_pending = rows;
		if (rows == 0)
			ring_slot_set(s->ring, (uint32_t)i, SLOT_READY);
		else
			session_submit(s, (uint32_t)i, sl->epoch, rows);
	}
}

/* The slot holding the next step to deliver, or NULL. */
static struct ring_slot *
session_next_slot(struct session *s, uint32_t *index)
{
	uint32_t	i;

	for (i = 0; i < s->ring->layout.slots; i++) {
		if (s->ring->slot[i].state != SLOT_FREE &&
		    s->ring->slot[i].seq == s->deliver_seq) {
			*index = i;
			return (&s->ring->slot[i]);
		}
	}
	return (NULL);
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
void
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

/* What the session delivered so far, and its waits. */
void
session_totals(const struct session *s, struct session_totals *t)
{
	t->dataset = s->ds->name;
	t->own_files = s->own_ds;
	t->steps = s->steps_delivered;
	t->rows = s->rows_delivered;
	t->bytes_read = s->bytes_read;
	t->samples_replaced = s->samples_replaced;
	session_data_wait(s, &t->data_wait_us, &t->active_us);
	memcpy(t->wait_counts, s->wait_counts, sizeof(t->wait_counts));
}

/* Answer waiting Next requests with ready steps, in order. */
static void
session_deliver(struct session *s)
{
	struct session_step	 st;
	struct ring_slot	*sl;
	uint32_t		 i = 0;

	while (s->nwaiting > 0) {
		sl = session_next_slot(s, &i);
		/* Failed: the steps before the failed one still go out. */
		if (s->state == SESSION_FAILED && sl != NULL &&
		    sl->seq < s->failed_seq && sl->state == SLOT_FILLING &&
		    !s->jobs_dropped)
			return;
		if (s->state == SESSION_FAILED && (sl == NULL ||
		    sl->seq >= s->failed_seq || sl->state != SLOT_READY)) {
			s->ev.error(s->arg, session_pop(s),
			    s->failure_code, s->failure);
			continue;
		}
		if (sl == NULL && s->state == SESSION_EPOCH_END &&
		    s->deliver_seq == s->fill_seq) {
			session_end_epoch(s);
			continue;
		}
		if (sl == NULL || sl->state != SLOT_READY)
			return;
		ring_slot_set(s->ring, i, SLOT_HELD);
		s->deliver_seq++;
		pool_ring_delivered(s->pool_ring, s->deliver_seq);
		s->epoch = sl->epoch;
		s->step = sl->step;
		s->steps_delivered++;
		s->rows_delivered += sl->rows;
		st.slot = i;
		st.epoch = sl->epoch;
		st.step = sl->step;
		st.rows = sl->rows;
		s->ev.step(s->arg, session_pop(s), &st);
	}
	session_wait_end(s);
}

/* Next: start filling if needed, answer when the next step is ready. */
int
session_next(struct session *s, struct session_req req,
    Infeed__ErrorCode *code, char **cause)
{
	uint32_t	nslots = s->ring->layout.slots;

	*code = INFEED__ERROR_CODE__ERROR_UNEXPECTED;
	if (ring_count(s->ring, SLOT_HELD) == nslots) {
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
	if (s->state == SESSION_IDLE)
		session_set_state(s, SESSION_FILLING);
	session_fill(s);
	session_deliver(s);
	/* Not answered at once: the client waits for data from now. */
	if (s->nwaiting > 0 && s->wait_since_us == 0)
		s->wait_since_us = clock_now_us();
	return (0);
}

/* Release: the client is done with a slot. */
int
session_release(struct session *s, uint32_t slot, char **cause)
{
	if (slot >= s->ring->layout.slots ||
	    s->ring->slot[slot].state != SLOT_HELD) {
		*cause = xasprintf("slot %u is not held by this session; "
		    "release only slots received in a Step, once each", slot);
		return (-1);
	}
	ring_slot_set(s->ring, slot, SLOT_FREE);
	session_fill(s);
	session_deliver(s);
	return (0);
}

/* Answer every waiting Next with an error. */
void
session_cancel(struct session *s, Infeed__ErrorCode code, const char *message)
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
	if (s->own_ds)
		return (0);
	for (i = 0; i < cat->ndatasets; i++) {
		if (cat->datasets[i] == s->ds)
			break;
	}
	if (i == cat->ndatasets)
		return (-1);
	s->host.cat = cat;
	s->ds_index = i;
	pool_ring_set_dataset(s->pool_ring, (uint32_t)i);
	return (0);
}

/* The Attached reply. */
void
session_fill_attached(const struct session *s, Infeed__Attached *at)
{
	const struct ring_layout *l = &s->ring->layout;

	at->session_id = s->id;
	at->combined_batch_size = s->sampler.cbs;
	at->steps_per_epoch = s->sampler.steps_per_epoch;
	at->last_step_rows = sampler_step_rows(&s->sampler,
	    s->sampler.steps_per_epoch - 1);
	at->slots = l->slots;
	at->slot_bytes = l->slot_bytes;
	at->ring_bytes = l->ring_bytes;
	at->data_offset = l->data_offset;
	at->labels_offset = l->labels_offset;
	at->indices_offset = l->indices_offset;
	at->n_sample_shape = s->out_dims;
	at->sample_shape = (uint64_t *)s->out_shape;	/* protobuf-c's type */
	at->data_dtype = (Infeed__DType)transform_out_dtype(&s->transform,
	    s->ds);
	at->sample_bytes = s->transform.out_sample_bytes;
	at->has_label_dtype = 1;
	at->label_dtype = (Infeed__DType)l->label_dtype;
}

/* The session's part of GetStats. */
void
session_fill_stats(const struct session *s, Infeed__SessionStats *ss)
{
	uint64_t	elapsed, wait_us, active_us;

	ss->session_id = s->id;
	ss->dataset = s->ds->name;
	ss->options = s->opts;
	ss->has_epoch = ss->has_step = 1;
	ss->epoch = s->epoch;
	ss->step = s->step;
	ss->has_slots_ready = ss->has_slots_held = ss->has_slots = 1;
	ss->slots_ready = ring_count(s->ring, SLOT_READY);
	ss->slots_held = ring_count(s->ring, SLOT_HELD);
	ss->slots = s->ring->layout.slots;
	ss->has_steps_delivered = ss->has_rows_delivered = 1;
	ss->steps_delivered = s->steps_delivered;
	ss->rows_delivered = s->rows_delivered;
	ss->has_bytes_read = 1;
	ss->bytes_read = s->bytes_read;
	ss->has_samples_replaced = 1;
	ss->samples_replaced = s->samples_replaced;
	elapsed = s->first_next_ms ? clock_now_ms() - s->first_next_ms : 0;
	ss->has_items_per_s = 1;
	ss->items_per_s = elapsed ? (double)s->rows_delivered * 1000.0 /
	    (double)elapsed : 0.0;
	session_data_wait(s, &wait_us, &active_us);
	ss->has_data_wait_s = ss->has_active_s = 1;
	ss->data_wait_s = (double)wait_us / 1e6;
	ss->active_s = (double)active_us / 1e6;
	ss->n_next_wait_counts = SESSION_WAIT_BUCKETS;
	ss->next_wait_counts = (uint64_t *)(uintptr_t)s->wait_counts;
	ss->has_client_pid = ss->has_client_uid = 1;
	ss->client_pid = s->client.pid;
	ss->client_uid = s->client.uid;
}

/* A read-only descriptor of the ring for the client. */
int
session_ring_fd(const struct session *s)
{
	return (ring_readonly_fd(s->ring));
}

/* The session's id, unique in this daemon. */
uint64_t
session_id(const struct session *s)
{
	return (s->id);
}

/* Rows sent to the client so far. */
uint64_t
session_rows_delivered(const struct session *s)
{
	return (s->rows_delivered);
}

/* The name of the session's dataset. */
const char *
session_dataset_name(const struct session *s)
{
	return (s->ds->name);
}

/*
 * Attaches in progress.  Whatever an Attach asks of what its client
 * controls runs on a helper thread, never on the event loop: fstat and the
 * headers of the client's files (a file on the client's own FUSE mount may
 * never answer) and the client's groups for allow_groups (the group
 * database may be LDAP, and slow).  At most INFEED_MAX_ATTACH_CHECKS
 * threads run for live Attach requests, INFEED_MAX_ATTACH_QUEUE more wait;
 * a check not done in INFEED_ATTACH_CHECK_S is given up: its Attach gets
 * an error, and its thread, which nothing can stop, is counted as stuck
 * until it returns (past INFEED_MAX_STUCK_CHECKS, Attach requests that
 * need a thread are refused).  A thread touches only its own job; it hands
 * it back on a list under the mutex and wakes the loop through a pipe.
 * Descriptors that came with the frame stay open until the loop frees the
 * job, so a worker forked meanwhile can close them (the thread checks
 * duplicates, made after its first reads, which such a worker may keep).
 *
 * Then, when a removed ring's job is still running in a worker, the
 * Attach waits up to POOL_SETTLE_MS for its memory on a timer, so that a
 * trainer started again gets its old ring memory back without the loop
 * ever blocking.
 */

#define SESSION_SETTLE_POLL_MS	2	/* how often a settling Attach looks */

/* What a job's thread is doing, for the message when it takes too long. */
enum session_stage {
	STAGE_QUEUED,		/* no thread yet */
	STAGE_DATA,		/* fstat and header of the data file */
	STAGE_LABELS,		/* ... of the labels file */
	STAGE_FILES,		/* both, through the readers' checks */
	STAGE_GROUPS,		/* the client's groups, from NSS */
	STAGE_DONE,
};

struct session_checks;

/* The work of one Attach on a helper thread. */
struct session_job {
	TAILQ_ENTRY(session_job)	 entry;	/* queue, then done list */
	TAILQ_ENTRY(session_job)	 all;	/* the loop's, till freed */
	struct session_checks		*sc;
	struct session_pending		*p;	/* NULL: given up */
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
TAILQ_HEAD(session_job_list, session_job);

struct session_pending {
	TAILQ_ENTRY(session_pending)	 entry;
	struct session_checks		*sc;
	Infeed__Attach			*a;	/* a copy */
	struct session_client		 client;
	struct session_job		*job;	/* while it runs or waits */
	struct event			*timer;	/* deadline, then settling */
	uint64_t			 settle_until_ms;
	session_checked_cb		*cb;
	void				*arg;
	struct session_checked		 chk;
	bool				 failed;
	Infeed__ErrorCode		 code;
	char				*cause;
};
TAILQ_HEAD(session_pending_list, session_pending);

struct session_checks {
	struct event_base		*base;
	struct pool			*pool;
	struct session_pending_list	 pending;
	struct session_job_list		 queue;	/* not started */
	struct session_job_list		 jobs;	/* every job not freed */
	unsigned			 nqueued;
	unsigned			 running;	/* for live Attaches */
	unsigned			 stuck;		/* given up, running */
	bool				 stopping;	/* start no thread */
	int				 wake[2];	/* pipe */
	struct event			*wake_ev;
	/* Shared with the threads. */
	pthread_mutex_t			 mtx;
	struct session_job_list		 done;
	unsigned			 threads;
	bool				 closing;
};

static void	session_checks_run(struct session_checks *);

/* Free a job: the loop's side, or a thread's once the loop has gone. */
static void
session_job_free(struct session_job *j)
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
session_job_files(struct session_job *j)
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
session_job_run(void *arg)
{
	struct session_job	*j = arg;
	struct session_checks	*sc = j->sc;
	bool			 last;
	char			 c = 1;

	if (j->nfds > 0)
		session_job_files(j);
	if (j->want_groups) {
		atomic_store(&j->stage, STAGE_GROUPS);
		j->have_groups = catalogue_user_groups(j->uid, j->gid,
		    &j->groups, &j->ngroups) == 0;
	}
	atomic_store(&j->stage, STAGE_DONE);
	pthread_mutex_lock(&sc->mtx);
	if (sc->closing) {
		/* The daemon is stopping: nothing waits for this any more. */
		session_job_free(j);
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

/* The pending Attach can end: its owner calls session_attach_end(). */
static void
session_pending_ready(struct session_pending *p)
{
	evtimer_del(p->timer);
	p->cb(p->arg);
}

/*
 * Fail the pending Attach with @code and a message: now, or, when @later,
 * on the next loop pass (the caller may be session_attach_begin(), which
 * never calls back).
 */
static void PRINTFLIKE(4, 5)
session_pending_fail(struct session_pending *p, bool later,
    Infeed__ErrorCode code, const char *fmt, ...)
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
		session_pending_ready(p);
		return;
	}
	p->settle_until_ms = 0;		/* the timer finds it ready */
	evtimer_add(p->timer, &zero);
}

/* Settling: go on once no removed ring's job runs, or the time is up. */
static void
session_pending_settle(struct session_pending *p)
{
	struct timeval	tv = { 0, SESSION_SETTLE_POLL_MS * 1000 };

	if (p->failed || !pool_settling(p->sc->pool) ||
	    clock_now_ms() >= p->settle_until_ms) {
		session_pending_ready(p);
		return;
	}
	evtimer_add(p->timer, &tv);
}

/* The thread's answer for pending Attach @p. */
static void
session_pending_checked(struct session_pending *p, struct session_job *j)
{
	p->job = NULL;
	evtimer_del(p->timer);
	if (j->nfds > 0 && j->ds == NULL) {
		p->failed = true;
		p->code = j->content ? INFEED__ERROR_CODE__ERROR_DATA :
		    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT;
		p->cause = j->cause != NULL ? j->cause :
		    xasprintf("out of memory");
		j->cause = NULL;
		session_pending_ready(p);
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
	session_pending_settle(p);
}

/* Threads handed jobs back: answer their Attaches, start queued ones. */
static void
session_checks_wake_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct session_checks	*sc = arg;
	struct session_job_list	 done;
	struct session_job	*j;
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
			sc->stuck--;
			log_debug("a helper thread checking a client's Attach "
			    "returned after it was given up (%u still out)",
			    sc->stuck);
		} else {
			sc->running--;
			session_pending_checked(j->p, j);
		}
		session_job_free(j);
	}
	session_checks_run(sc);
}

/*
 * Start queued jobs while fewer than INFEED_MAX_ATTACH_CHECKS run and
 * fewer than INFEED_MAX_STUCK_CHECKS were given up: threads stay bounded
 * however many files never answer.
 */
static void
session_checks_run(struct session_checks *sc)
{
	struct session_job	*j;
	pthread_attr_t		 attr;
	pthread_t		 t;
	int			 rc;

	while (!sc->stopping && sc->running < INFEED_MAX_ATTACH_CHECKS &&
	    sc->stuck < INFEED_MAX_STUCK_CHECKS &&
	    (j = TAILQ_FIRST(&sc->queue)) != NULL) {
		TAILQ_REMOVE(&sc->queue, j, entry);
		sc->nqueued--;
		atomic_store(&j->stage, j->nfds > 0 ? STAGE_DATA :
		    STAGE_GROUPS);
		pthread_mutex_lock(&sc->mtx);
		sc->threads++;
		pthread_mutex_unlock(&sc->mtx);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		rc = pthread_create(&t, &attr, session_job_run, j);
		pthread_attr_destroy(&attr);
		if (rc == 0) {
			sc->running++;
			continue;
		}
		pthread_mutex_lock(&sc->mtx);
		sc->threads--;
		pthread_mutex_unlock(&sc->mtx);
		TAILQ_REMOVE(&sc->jobs, j, all);
		j->p->job = NULL;
		session_pending_fail(j->p, true,
		    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED, "infeedd "
		    "cannot start a thread to check this Attach: %s; try "
		    "again later", strerror(rc));
		session_job_free(j);
	}
}

/* A pending Attach's deadline (or, settling, its next look). */
static void
session_pending_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct session_pending	*p = arg;
	struct session_checks	*sc = p->sc;
	struct session_job	*j = p->job;
	const char		*file;
	int			 stage;

	(void)fd;
	(void)ev;
	if (j == NULL) {
		session_pending_settle(p);
		return;
	}
	p->job = NULL;
	stage = atomic_load(&j->stage);
	if (stage == STAGE_QUEUED) {
		TAILQ_REMOVE(&sc->queue, j, entry);
		TAILQ_REMOVE(&sc->jobs, j, all);
		sc->nqueued--;
		session_job_free(j);
		session_pending_fail(p, false,
		    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED, "infeedd is "
		    "busy checking other clients' Attach requests (%u running, "
		    "%u waiting, %u that never returned) and did not get to "
		    "this one in %d s; try again later", sc->running,
		    sc->nqueued, sc->stuck, INFEED_ATTACH_CHECK_S);
		return;
	}
	/* The thread cannot be stopped: its job is given up. */
	pthread_mutex_lock(&sc->mtx);
	j->p = NULL;
	pthread_mutex_unlock(&sc->mtx);
	sc->running--;
	sc->stuck++;
	log_warnx("client %llu (pid %d): an Attach's check did not return "
	    "in %d s (%s); %u such checks are out", (unsigned long long)
	    p->client.peer_id, (int)p->client.pid, INFEED_ATTACH_CHECK_S,
	    stage == STAGE_GROUPS ? "the group database" : "the client's "
	    "files", sc->stuck);
	session_checks_run(sc);
	if (stage == STAGE_GROUPS) {
		session_pending_fail(p, false,
		    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED, "the host's "
		    "group database did not answer in %d s when infeedd asked "
		    "for the groups of uid %u, which allow_groups of '%s' "
		    "needs; try again later, and tell the operator (NSS, "
		    "LDAP or SSSD may be down)", INFEED_ATTACH_CHECK_S,
		    (unsigned)p->client.uid, p->a->dataset);
		return;
	}
	file = stage == STAGE_DATA ? "the data file" : stage == STAGE_LABELS ?
	    "the labels file" : "the data or the labels file";
	session_pending_fail(p, false, INFEED__ERROR_CODE__ERROR_DATA, "%s did not "
	    "answer in %d s: fstat or a read of its header never returned "
	    "(a file on a FUSE or network mount that does not answer?); "
	    "infeedd gave up on it.  Fix the mount, or copy the file to a "
	    "local disk, and Attach again", file, INFEED_ATTACH_CHECK_S);
}

/* The helper threads' state, with the loop's end of their pipe. */
struct session_checks *
session_checks_new(struct event_base *base, struct pool *pool)
{
	struct session_checks	*sc;

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
	    session_checks_wake_cb, sc);
	if (sc->wake_ev == NULL || event_add(sc->wake_ev, NULL) == -1)
		fatalx("event_new for the helper threads");
	return (sc);
}

/* Free a pending Attach and what it holds. */
static void
session_pending_free(struct session_pending *p)
{
	TAILQ_REMOVE(&p->sc->pending, p, entry);
	event_free(p->timer);
	if (p->a != NULL)
		infeed__attach__free_unpacked(p->a, NULL);
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
session_checks_free(struct session_checks *sc)
{
	struct session_job	*j;
	bool			 last;

	if (sc == NULL)
		return;
	sc->stopping = true;
	while (!TAILQ_EMPTY(&sc->pending))
		session_attach_cancel(TAILQ_FIRST(&sc->pending));
	event_free(sc->wake_ev);
	pthread_mutex_lock(&sc->mtx);
	sc->closing = true;
	/* Handed back, not read yet. */
	while ((j = TAILQ_FIRST(&sc->done)) != NULL) {
		TAILQ_REMOVE(&sc->done, j, entry);
		session_job_free(j);
	}
	close(sc->wake[0]);
	close(sc->wake[1]);
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
session_checks_pending(const struct session_checks *sc)
{
	const struct session_pending	*p;
	unsigned			 n = sc->stuck;

	TAILQ_FOREACH(p, &sc->pending, entry)
		n++;
	return (n);
}

/* Begin an Attach: see session.h. */
int
session_attach_begin(struct session_checks *sc,
    const struct session_host *host, const struct session_client *client,
    const Infeed__Attach *a, int *fds, size_t nfds, session_checked_cb *cb,
    void *arg, struct session_pending **out, Infeed__ErrorCode *code,
    char **cause)
{
	struct session_pending	*p;
	struct session_job	*j = NULL;
	struct dataset_files	 spec;
	struct timeval		 tv = { INFEED_ATTACH_CHECK_S, 0 };
	size_t			 idx, i;
	bool			 groups = false;

	*out = NULL;
	*cause = NULL;
	/* Descriptors without files: session_new_files() refuses them. */
	if (a->files == NULL && nfds > 0)
		return (0);
	if (a->files == NULL && catalogue_find(host->cat, a->dataset,
	    &idx) != NULL)
		groups = !catalogue_allows_gid(host->cat, idx, client->gid);
	/* Nothing of the client's to check, and no memory to wait for. */
	if (a->files == NULL && !groups && !pool_settling(sc->pool))
		return (0);
	if (a->files != NULL &&
	    session_files_spec(a, nfds, &spec, code, cause) == -1)
		goto refuse;
	*code = INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED;
	if ((a->files != NULL || groups) &&
	    sc->stuck >= INFEED_MAX_STUCK_CHECKS) {
		*cause = xasprintf("%u checks of clients' files or groups "
		    "were given up and have not returned (files on mounts "
		    "that do not answer, or a group database that does not); "
		    "infeedd takes no Attach that needs one until they do "
		    "(at most %d may be out): try "
		    "again later, or attach to a catalogue dataset, and tell "
		    "the operator", sc->stuck, INFEED_MAX_STUCK_CHECKS);
		goto refuse;
	}
	if ((a->files != NULL || groups) &&
	    sc->running >= INFEED_MAX_ATTACH_CHECKS &&
	    sc->nqueued >= INFEED_MAX_ATTACH_QUEUE) {
		*cause = xasprintf("infeedd is checking %u other Attach "
		    "requests' files or groups and %u more wait (at most "
		    "%d and %d); try again in a moment", sc->running,
		    sc->nqueued, INFEED_MAX_ATTACH_CHECKS,
		    INFEED_MAX_ATTACH_QUEUE);
		goto refuse;
	}

	p = xcalloc(1, sizeof(*p));
	p->sc = sc;
	p->a = session_copy_message(&a->base);
	p->client = *client;
	p->cb = cb;
	p->arg = arg;
	if ((p->timer = evtimer_new(sc->base, session_pending_timer_cb, p)) ==
	    NULL)
		fatalx("evtimer_new");
	TAILQ_INSERT_TAIL(&sc->pending, p, entry);
	*out = p;
	if (a->files == NULL && !groups) {
		p->settle_until_ms = clock_now_ms() + POOL_SETTLE_MS;
		session_pending_settle(p);	/* not ready: it settles */
		return (1);
	}
	j = xcalloc(1, sizeof(*j));
	j->sc = sc;
	j->p = p;
	j->name = xstrdup(a->dataset);
	j->spec = spec;
	j->nfds = a->files != NULL ? nfds : 0;
	for (i = 0; i < j->nfds; i++)
		j->fds[i] = fds[i];
	j->want_groups = groups;
	j->uid = client->uid;
	j->gid = client->gid;
	atomic_init(&j->stage, STAGE_QUEUED);
	p->job = j;
	TAILQ_INSERT_TAIL(&sc->jobs, j, all);
	TAILQ_INSERT_TAIL(&sc->queue, j, entry);
	sc->nqueued++;
	evtimer_add(p->timer, &tv);
	session_checks_run(sc);
	return (1);

refuse:
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	return (-1);
}

/* The dataset (or session) name a pending Attach asks for. */
const char *
session_pending_name(const struct session_pending *p)
{
	return (p->a->dataset);
}

/* End a pending Attach whose callback came: make the session, or fail. */
struct session *
session_attach_end(struct session_pending *p, const struct session_host *host,
    const struct session_events *ev, void *arg, Infeed__ErrorCode *code,
    char **cause)
{
	struct session	*s = NULL;

	*cause = NULL;
	if (p->failed) {
		*code = p->code;
		*cause = p->cause;
		p->cause = NULL;
	} else
		s = session_make(host, &p->client, p->a, NULL, 0, &p->chk,
		    ev, arg, code, cause);
	session_pending_free(p);
	return (s);
}

/*
 * The client went away: no callback.  A job still queued goes now; one
 * running is given up, and freed when its thread returns.
 */
void
session_attach_cancel(struct session_pending *p)
{
	struct session_checks	*sc = p->sc;
	struct session_job	*j = p->job;

	if (j != NULL && atomic_load(&j->stage) == STAGE_QUEUED) {
		TAILQ_REMOVE(&sc->queue, j, entry);
		TAILQ_REMOVE(&sc->jobs, j, all);
		sc->nqueued--;
		session_job_free(j);
	} else if (j != NULL) {
		pthread_mutex_lock(&sc->mtx);
		j->p = NULL;
		pthread_mutex_unlock(&sc->mtx);
		sc->running--;
		sc->stuck++;
	}
	p->job = NULL;
	session_pending_free(p);
	session_checks_run(sc);
}
