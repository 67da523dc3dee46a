/* SPDX-License-Identifier: MIT */
/*
 * libinfeed: see infeed.h for the contract, libinfeed-private.h for the
 * files it is made of.  This one is the session: connect, attach, next,
 * release, detach, over the connection (libinfeed-conn.c) and the ring
 * (libinfeed-ring.c), with whole structs only (libinfeed-abi.c widens
 * the caller's).
 *
 * Resume: the handle remembers where it is (the next epoch and step) and
 * how it attached, so when the daemon goes away infeed_next can reconnect
 * and attach again with start_epoch/start_step, and the trainer sees the
 * same steps it would have seen without the interruption.  Within an
 * elastic epoch (start_epoch_stages) it sends the same stages again, and
 * start_step counts the current stage's steps, as the daemon's do.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "dtype.h"
#include "libinfeed-conn.h"

/* A fresh handle. */
struct infeed *
infeed_new(void)
{
	struct infeed	*f;

	if ((f = calloc(1, sizeof(*f))) == NULL)
		return (NULL);
	infeed_conn_init(&f->conn);
	infeed_ring_init(&f->ring);
	return (f);
}

/*
 * The session ended (a daemon restart, a reload, a detach): its ring goes,
 * or stays until the caller gives back the steps it holds.
 */
static void
infeed_session_end(struct infeed *f)
{
	infeed_ring_unmap(&f->ring, f->session_id);
	f->attached = false;
	/* A new session owes nothing (infeed_resume keeps what was owed). */
	f->eod_owed = false;
}

/* Close the duplicates of the files of the last attach, if any. */
static void
infeed_files_close(struct infeed *f)
{
	while (f->nfiles > 0)
		close(f->files_fd[--f->nfiles]);
}

/* Close, unmap, free. */
void
infeed_free(struct infeed *f)
{
	if (f == NULL)
		return;
	infeed_files_close(f);
	/* A Step come for a Next nobody collects goes back before the end. */
	if (f->attached && f->conn.fd != -1)
		infeed_conn_next_give_back(f);
	infeed_ring_free(&f->ring);
	infeed_conn_close(&f->conn);
	free(f->path);
	free(f->name);
	free(f->dataset);
	free(f->transform);
	free(f);
}

/* Connect and exchange Hello/Welcome; remember where, to resume. */
int
infeed_connect(struct infeed *f, const char *path, const char *name)
{
	int	r;

	if (f->conn.fd != -1)
		return (infeed_fail(f, INFEED_ERR_USAGE, "already connected"));
	if (path == NULL && (path = getenv("INFEED_SOCKET")) == NULL)
		path = INFEED_DEFAULT_SOCKET;
	if ((r = infeed_conn_open(f, path, name)) != INFEED_OK)
		return (r);
	if (f->path == NULL || strcmp(f->path, path) != 0) {
		free(f->path);
		f->path = strdup(path);
	}
	if (name != NULL && f->name != name) {
		free(f->name);
		f->name = strdup(name);
	}
	return (INFEED_OK);
}

/* Room for the messages that LoaderOptions points to. */
struct infeed_loader_parts {
	Infeed__Transform	 transform;
	Infeed__ElasticStage	 stages[INFEED_MAX_ELASTIC_STAGES];
	Infeed__ElasticStage	*stage_ptrs[INFEED_MAX_ELASTIC_STAGES];
};

/* LoaderOptions (and the messages it points to, in @parts) from @o. */
static void
infeed_loader_options(Infeed__LoaderOptions *lo,
    struct infeed_loader_parts *parts, const struct infeed_options *o)
{
	Infeed__Transform	*t = &parts->transform;
	uint32_t		 i;

	*t = (Infeed__Transform)INFEED__TRANSFORM__INIT;
	lo->has_batch_size = lo->has_device_iterations = 1;
	lo->batch_size = o->batch_size;
	lo->device_iterations = o->device_iterations;
	lo->has_replication_factor = lo->has_gradient_accumulation = 1;
	lo->replication_factor = o->replication_factor;
	lo->gradient_accumulation = o->gradient_accumulation;
	lo->has_shuffle = lo->has_seed = lo->has_drop_last = 1;
	lo->shuffle = o->shuffle;
	lo->seed = o->seed;
	lo->drop_last = o->drop_last;
	lo->has_num_workers = lo->has_buffer_size = 1;
	lo->num_workers = o->num_workers;
	lo->buffer_size = o->buffer_size;
	lo->has_load_indefinitely = lo->has_early_preload = 1;
	lo->load_indefinitely = o->load_indefinitely;
	lo->early_preload = o->early_preload;
	lo->has_distributed_process_id = 1;
	lo->has_distributed_process_count = 1;
	lo->distributed_process_id = o->distributed_process_id;
	lo->distributed_process_count = o->distributed_process_count;
	lo->has_start_epoch = lo->has_start_step = 1;
	lo->start_epoch = o->start_epoch;
	lo->start_step = o->start_step;
	for (i = 0; i < o->nstart_epoch_stages; i++) {
		parts->stages[i] = (Infeed__ElasticStage)
		    INFEED__ELASTIC_STAGE__INIT;
		parts->stages[i].process_count =
		    o->start_epoch_stages[i].process_count;
		parts->stages[i].combined_batch_size =
		    o->start_epoch_stages[i].combined_batch_size;
		parts->stages[i].steps_done =
		    o->start_epoch_stages[i].steps_done;
		parts->stage_ptrs[i] = &parts->stages[i];
	}
	lo->n_start_epoch_stages = o->nstart_epoch_stages;
	lo->start_epoch_stages = parts->stage_ptrs;
	/* The daemon may then give this session a new ring in a Step. */
	lo->has_share = 1;
	lo->share = o->share;
	/* 0 is the default; anything else goes as it is, for the daemon. */
	if (o->label_dtype != 0) {
		lo->has_label_dtype = 1;
		lo->label_dtype = (Infeed__DType)o->label_dtype;
	}
	if (o->to_float32) {
		t->has_to_float32 = t->has_scale = 1;
		t->to_float32 = 1;
		t->scale = o->scale;
		t->n_mean = t->n_std = o->nchannels;
		t->mean = (float *)(uintptr_t)o->mean;
		t->std = (float *)(uintptr_t)o->std;
		lo->transform = t;
	}
	if (o->transform != NULL) {
		t->pipeline = (char *)(uintptr_t)o->transform;
		lo->transform = t;
	}
}

/* The steps of start_epoch, as Attached said; an older daemon's are all. */
static uint64_t
infeed_start_epoch_steps(const Infeed__Attached *at)
{
	return (at->has_start_epoch_steps ? at->start_epoch_steps :
	    at->steps_per_epoch);
}

/* The labels' dtype in the ring @at describes; int32 when it does not say. */
static int
infeed_label_dtype(const Infeed__Attached *at)
{
	return (at->has_label_dtype ? (int)at->label_dtype :
	    INFEED_DTYPE_INT32);
}

/* The whole session info from Attached. */
static void
infeed_info_from(struct infeed_session_info *info, const Infeed__Attached *at)
{
	size_t	i;

	memset(info, 0, sizeof(*info));
	info->struct_size = sizeof(*info);
	info->session_id = at->session_id;
	info->combined_batch_size = at->combined_batch_size;
	info->steps_per_epoch = at->steps_per_epoch;
	info->last_step_rows = at->last_step_rows;
	info->slots = at->slots;
	info->ndim = at->n_sample_shape < INFEED_MAX_DIMS ?
	    (uint32_t)at->n_sample_shape : INFEED_MAX_DIMS;
	for (i = 0; i < info->ndim; i++)
		info->sample_shape[i] = at->sample_shape[i];
	info->data_dtype = at->data_dtype;
	info->sample_bytes = at->sample_bytes;
	info->label_dtype = infeed_label_dtype(at);
	info->start_epoch_steps = infeed_start_epoch_steps(at);
	info->start_epoch_last_step_rows = at->has_start_epoch_last_step_rows ?
	    at->start_epoch_last_step_rows : at->last_step_rows;
}

/* The Files message of whole files @in; pointers borrow from @in. */
static void
infeed_files_message(Infeed__Files *out, const struct infeed_files *in)
{
	out->has_data_format = 1;
	out->data_format = (Infeed__FileFormat)in->data_format;
	out->has_labels_format = 1;
	out->labels_format = (Infeed__FileFormat)in->labels_format;
	if (in->data_format == INFEED_FILE_RAW) {
		out->n_shape = in->ndim;
		out->shape = (uint64_t *)(uintptr_t)in->shape;
		out->has_dtype = 1;
		out->dtype = (Infeed__DType)in->dtype;
	}
	if (in->labels_format == INFEED_FILE_RAW && in->label_dtype != 0) {
		out->has_label_dtype = 1;
		out->label_dtype = (Infeed__DType)in->label_dtype;
	}
}

/*
 * Attach with whole options @o and map the ring; remember how, to resume.
 * With f->nfiles, the dataset is the files of infeed_attach_files.
 * @info: the whole session info, or NULL.
 */
static int
infeed_attach_whole(struct infeed *f, const char *dataset,
    const struct infeed_options *o, struct infeed_session_info *info)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *reply;
	Infeed__Attach		 a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	 lo = INFEED__LOADER_OPTIONS__INIT;
	struct infeed_loader_parts parts;
	Infeed__Files		 fl = INFEED__FILES__INIT;
	Infeed__Attached	*at;
	struct infeed_ring_shape shape;
	char			*transform = NULL;
	int			 r, fd;

	/* Our own copy of the transform's text, kept for resuming. */
	if (&f->opts != o && o->transform != NULL &&
	    (transform = strdup(o->transform)) == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	infeed_loader_options(&lo, &parts, o);
	a.dataset = (char *)(uintptr_t)dataset;
	a.options = &lo;
	/* The files of infeed_attach_files, again when resuming. */
	if (f->nfiles > 0) {
		infeed_files_message(&fl, &f->files);
		a.files = &fl;
	}
	fr.msg_case = INFEED__FRAME__MSG_ATTACH;
	fr.attach = &a;
	if ((r = infeed_conn_request(f, &fr, f->files_fd, f->nfiles,
	    INFEED__FRAME__MSG_ATTACHED, &reply)) != INFEED_OK) {
		free(transform);
		return (r);
	}
	at = reply->attached;
	if ((fd = infeed_conn_take_fd(&f->conn)) == -1)
		r = infeed_fail(f, INFEED_ERR_PROTOCOL, "Attached came "
		    "without the ring's file descriptor");
	else {
		memset(&shape, 0, sizeof(shape));
		shape.ring_bytes = at->ring_bytes;
		shape.slot_bytes = at->slot_bytes;
		shape.data_offset = at->data_offset;
		shape.labels_offset = at->labels_offset;
		shape.indices_offset = at->indices_offset;
		shape.slots = at->slots;
		shape.label_dtype = infeed_label_dtype(at);
		r = infeed_ring_map(f, fd, &shape, o->copy_on_write);
	}
	if (r != INFEED_OK) {
		infeed__frame__free_unpacked(reply, NULL);
		free(transform);
		return (r);
	}
	f->attached = true;
	f->session_id = at->session_id;
	f->steps_per_epoch = at->steps_per_epoch;
	f->start_epoch_steps = infeed_start_epoch_steps(at);
	/* A daemon that knows no stages ignored them: its order is wrong. */
	if (o->nstart_epoch_stages > 0 && !at->has_start_epoch_steps) {
		infeed__frame__free_unpacked(reply, NULL);
		free(transform);
		(void)infeed_detach(f);
		f->daemon_code = 0;	/* not a refusal of the daemon's */
		return (infeed_fail(f, INFEED_ERR_DAEMON, "the daemon does "
		    "not know elastic resume (start_epoch_stages): its "
		    "Attached has no start_epoch_steps, so it ignored the "
		    "%u stages and would deliver the wrong samples; upgrade "
		    "infeedd, or resume with the process count the state "
		    "was saved with", o->nstart_epoch_stages));
	}
	f->next_epoch = o->start_epoch;
	f->next_step = o->start_step;
	if (f->dataset != dataset) {
		free(f->dataset);
		f->dataset = strdup(dataset);
	}
	if (&f->opts != o) {
		f->opts = *o;
		free(f->transform);
		f->transform = transform;
		f->opts.transform = transform;
	}
	if (info != NULL)
		infeed_info_from(info, at);
	infeed__frame__free_unpacked(reply, NULL);
	return (INFEED_OK);
}

/* Attach to catalogue dataset @dataset with whole options @o. */
int
infeed_attach_dataset(struct infeed *f, const char *dataset,
    const struct infeed_options *o, struct infeed_session_info *info)
{
	if (f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "already attached; "
		    "call infeed_detach first"));
	if (dataset == NULL)
		return (infeed_fail(f, INFEED_ERR_USAGE, "no dataset named"));
	f->eod_owed = false;	/* a new session owes nothing */
	infeed_files_close(f);
	return (infeed_attach_whole(f, dataset, o, info));
}

/* Attach to the caller's own whole @files, passed by descriptor. */
int
infeed_attach_files_whole(struct infeed *f, const char *name,
    const struct infeed_files *files, const struct infeed_options *o,
    struct infeed_session_info *info)
{
	int	r, fd;

	if (f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "already attached; "
		    "call infeed_detach first"));
	infeed_files_close(f);
	/* Our own copies: the caller may close theirs; a resume needs them. */
	fd = files->data_fd;
	while (fd != -1) {
		if ((f->files_fd[f->nfiles] = fcntl(fd, F_DUPFD_CLOEXEC,
		    0)) == -1) {
			r = infeed_fail(f, INFEED_ERR_SYSTEM, "cannot "
			    "duplicate descriptor %d: %s", fd,
			    strerror(errno));
			infeed_files_close(f);
			return (r);
		}
		fd = f->nfiles++ == 0 ? files->labels_fd : -1;
	}
	f->files = *files;
	f->eod_owed = false;	/* a new session owes nothing */
	r = infeed_attach_whole(f, name != NULL ? name : "files", o, info);
	if (r != INFEED_OK)
		infeed_files_close(f);
	return (r);
}

/* The daemon went away: reconnect and attach again where we were. */
static int
infeed_resume(struct infeed *f, int why)
{
	struct infeed_options	 o = f->opts;
	char			*path, *name, *dataset, saved[sizeof(f->error)];
	uint64_t		 deadline;
	bool			 owed;
	int			 r;

	if (f->opts.reconnect_timeout_ms == 0 || f->path == NULL ||
	    f->dataset == NULL)
		return (why);
	snprintf(saved, sizeof(saved), "%s", f->error);
	deadline = clock_now_ms() + f->opts.reconnect_timeout_ms;
	path = strdup(f->path);
	name = f->name != NULL ? strdup(f->name) : NULL;
	dataset = strdup(f->dataset);
	/* Within the elastic epoch, its stages again: next_step counts the
	   current stage's steps. */
	if (f->next_epoch != o.start_epoch)
		o.nstart_epoch_stages = 0;
	o.start_epoch = f->next_epoch;
	o.start_step = f->next_step;
	owed = f->eod_owed;
	infeed_session_end(f);
	f->eod_owed = owed;
	r = why;
	while (path != NULL && dataset != NULL) {
		infeed_conn_close(&f->conn);
		if ((r = infeed_connect(f, path, name)) == INFEED_OK) {
			r = infeed_attach_whole(f, dataset, &o, NULL);
			break;
		}
		if (clock_now_ms() >= deadline)
			break;
		usleep(100000);
	}
	free(path);
	free(name);
	free(dataset);
	if (r != INFEED_OK)
		return (infeed_fail(f, r, "%s; reconnecting for %u ms did not "
		    "work either: %s", saved, o.reconnect_timeout_ms,
		    infeed_error(f)));
	return (INFEED_OK);
}

static int	infeed_next_once(struct infeed *, struct infeed_step *, int);

/* The steps of @epoch: fewer in an elastic epoch (start_epoch_stages). */
static uint64_t
infeed_epoch_steps(const struct infeed *f, uint64_t epoch)
{
	if (epoch == f->opts.start_epoch)
		return (f->start_epoch_steps);
	return (f->steps_per_epoch);
}

/* Wait for the next step, resuming after a daemon restart. */
int
infeed_next_whole(struct infeed *f, struct infeed_step *step, int timeout_ms)
{
	int	r;

	r = infeed_next_once(f, step, timeout_ms);
	if ((r == INFEED_ERR_CLOSED || r == INFEED_ERR_SYSTEM) && f->attached &&
	    infeed_resume(f, r) == INFEED_OK) {
		/*
		 * The daemon went away owing this epoch's EndOfData: the new
		 * session starts at the next epoch, so say it here.
		 */
		if (f->eod_owed) {
			f->eod_owed = false;
			return (INFEED_END_OF_DATA);
		}
		r = infeed_next_once(f, step, timeout_ms);
	}
	return (r);
}

/* Ask for the next step once (or collect the one asked for). */
static int
infeed_next_once(struct infeed *f, struct infeed_step *step, int timeout_ms)
{
	Infeed__Frame		*reply;
	const Infeed__Ring	*ring;
	struct infeed_ring_shape shape;
	const uint8_t		*base;
	int			 r;

	if (!f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not attached; call "
		    "infeed_attach first"));
	if ((r = infeed_conn_next(f, &reply, timeout_ms)) != INFEED_OK) {
		/* The daemon ended the session (a reload): attach again. */
		if (r == INFEED_ERR_DAEMON &&
		    f->daemon_code == INFEED__ERROR_CODE__ERROR_NOT_FOUND)
			infeed_session_end(f);
		return (r);
	}
	if (reply->msg_case == INFEED__FRAME__MSG_END_OF_DATA) {
		f->next_epoch = reply->end_of_data->epoch + 1;
		f->next_step = 0;
		f->eod_owed = false;
		infeed__frame__free_unpacked(reply, NULL);
		return (INFEED_END_OF_DATA);
	}
	/* The session left its shared group (or rejoined): a ring comes. */
	if ((ring = reply->step->ring) != NULL) {
		memset(&shape, 0, sizeof(shape));
		shape.ring_bytes = ring->ring_bytes;
		shape.slot_bytes = ring->slot_bytes;
		shape.slots = ring->slots;
		shape.first_slot = ring->first_slot;
	}
	if (ring != NULL && (r = infeed_ring_remap(f, &shape)) != INFEED_OK) {
		infeed__frame__free_unpacked(reply, NULL);
		return (r);
	}
	if ((base = infeed_ring_take(&f->ring, reply->step->slot)) == NULL) {
		infeed__frame__free_unpacked(reply, NULL);
		return (infeed_fail(f, INFEED_ERR_PROTOCOL, "step in slot %u "
		    "is outside the ring", reply->step->slot));
	}
	step->struct_size = sizeof(*step);
	step->slot = reply->step->slot;
	step->epoch = reply->step->epoch;
	step->step = reply->step->step;
	step->rows = reply->step->rows;
	step->data = base + f->ring.data_offset;
	step->labels = NULL;
	step->labels64 = NULL;
	if (f->ring.label_dtype == INFEED_DTYPE_INT64)
		step->labels64 = (const int64_t *)(const void *)(base +
		    f->ring.labels_offset);
	else
		step->labels = (const int32_t *)(const void *)(base +
		    f->ring.labels_offset);
	step->label_dtype = f->ring.label_dtype;
	step->reserved0 = 0;
	step->indices = (const uint64_t *)(const void *)(base +
	    f->ring.indices_offset);
	step->session = f->session_id;
	f->next_epoch = step->epoch;
	f->next_step = step->step + 1;
	if (f->next_step == infeed_epoch_steps(f, step->epoch)) {
		f->next_epoch++;
		f->next_step = 0;
		/* Without load_indefinitely, an EndOfData comes next. */
		f->eod_owed = !f->opts.load_indefinitely;
	}
	infeed__frame__free_unpacked(reply, NULL);
	return (INFEED_OK);
}

/* Give a slot back; the acknowledgement is read with the next reply. */
int
infeed_release(struct infeed *f, const struct infeed_step *step)
{
	int	r;

	if (step->struct_size < FIELD_END(struct infeed_step, slot))
		return (infeed_fail(f, INFEED_ERR_USAGE, "a step of %u bytes "
		    "holds no slot: pass the step infeed_next filled",
		    step->struct_size));
	/*
	 * From an ended session (a daemon restart, a reload): nothing to tell
	 * the daemon; its ring is unmapped after its last step.  A step
	 * without a session is current.
	 */
	if (step->struct_size >= FIELD_END(struct infeed_step, session) &&
	    (step->session != f->session_id || !f->attached) &&
	    infeed_ring_release_old(&f->ring, step->session,
	    step->slot))
		return (INFEED_OK);
	if (!f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not attached"));
	if (step->struct_size >= FIELD_END(struct infeed_step, session) &&
	    step->session != f->session_id)
		return (INFEED_OK);
	/* A step of a ring the session left (its group's, or its own). */
	if (step->slot < f->ring.first_slot ||
	    step->slot - f->ring.first_slot >= f->ring.slots)
		(void)infeed_ring_release_old(&f->ring, f->session_id,
		    step->slot);
	else
		infeed_ring_give_back(&f->ring, step->slot);
	r = infeed_conn_release(f, step->slot);
	/* The daemon went away with the slot; infeed_next will resume. */
	if ((r == INFEED_ERR_CLOSED || r == INFEED_ERR_SYSTEM) &&
	    f->opts.reconnect_timeout_ms > 0)
		return (INFEED_OK);
	return (r);
}

/* End the session and unmap its ring. */
int
infeed_detach(struct infeed *f)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *reply;
	Infeed__Detach	 dt = INFEED__DETACH__INIT;
	int		 r;

	if (!f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not attached"));
	fr.msg_case = INFEED__FRAME__MSG_DETACH;
	fr.detach = &dt;
	/* A Next still outstanding is answered first. */
	r = infeed_conn_call_after_next(f, &fr, INFEED__FRAME__MSG_DETACHED,
	    &reply);
	infeed_session_end(f);
	infeed_files_close(f);
	if (r == INFEED_OK)
		infeed__frame__free_unpacked(reply, NULL);
	return (r);
}

/* Where the handle is, as a whole struct. */
void
infeed_state_whole(const struct infeed *f, struct infeed_state *st)
{
	memset(st, 0, sizeof(*st));
	st->struct_size = sizeof(*st);
	st->attached = f->attached;
	if (f->attached) {
		st->session_id = f->session_id;
		st->slots = f->ring.slots;
		st->slots_held = infeed_ring_held_count(&f->ring);
	}
	st->next_epoch = f->next_epoch;
	st->next_step = f->next_step;
	st->next_pending = f->conn.next != INFEED_NEXT_NONE;
	st->end_of_data_owed = f->eod_owed;
}

/* Name an element type. */
const char *
infeed_dtype_name(int dtype)
{
	return (dtype_name((enum infeed_dtype)dtype));
}

/* Bytes per element of a type. */
size_t
infeed_dtype_size(int dtype)
{
	return (dtype_size((enum infeed_dtype)dtype));
}