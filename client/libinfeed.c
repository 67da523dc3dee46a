/* SPDX-License-Identifier: MIT */
/*
 * libinfeed: see infeed.h for the contract, libinfeed-private.h for the
 * files it is made of.  This one is the session: connect, attach, next,
 * release, detach, over the protocol's edge (libinfeed-proto.c and the
 * connection, libinfeed-conn.c, which read frames into plain structs: no
 * frame reaches this file) and the ring (libinfeed-ring.c), with whole
 * structs only (libinfeed-abi.c widens the caller's).  It knows which
 * ring the session reads (its group's or its own) for infeed_state.
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
#include "libinfeed-private.h"

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

/*
 * Attach with whole options @o and map the ring; remember how, to resume.
 * With f->nfiles, the dataset is the files of infeed_attach_files.
 * @info: the whole session info, or NULL.
 */
static int
infeed_attach_whole(struct infeed *f, const char *dataset,
    const struct infeed_options *o, struct infeed_session_info *info)
{
	struct infeed_attached	 at;
	char			*transform = NULL;
	int			 r;

	/* Our own copy of the transform's text, kept for resuming. */
	if (&f->opts != o && o->transform != NULL &&
	    (transform = strdup(o->transform)) == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	/* The files of infeed_attach_files, again when resuming. */
	r = infeed_proto_attach(f, dataset, o, f->nfiles > 0 ? &f->files :
	    NULL, f->files_fd, f->nfiles, &at);
	if (r == INFEED_OK)
		r = infeed_ring_map(f, at.ring_fd, &at.ring, o->copy_on_write);
	if (r != INFEED_OK) {
		free(transform);
		return (r);
	}
	f->attached = true;
	f->session_id = at.info.session_id;
	f->group_id = at.group_id;
	f->conn.quiet_release = at.quiet_release;
	f->own_ring = at.group_id == 0;
	f->steps_per_epoch = at.info.steps_per_epoch;
	f->start_epoch_steps = at.info.start_epoch_steps;
	/* A daemon that knows no stages ignored them: its order is wrong. */
	if (o->nstart_epoch_stages > 0 && !at.knows_stages) {
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
		*info = at.info;
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
	struct infeed_next_reply reply;
	const uint8_t		*base;
	int			 r;

	if (!f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not attached; call "
		    "infeed_attach first"));
	if ((r = infeed_conn_next(f, &reply, timeout_ms)) != INFEED_OK) {
		/* The daemon ended the session (a reload): attach again. */
		if (r == INFEED_ERR_DAEMON &&
		    f->daemon_code == INFEED_DAEMON_NOT_FOUND)
			infeed_session_end(f);
		return (r);
	}
	if (reply.end_of_data) {
		f->next_epoch = reply.epoch + 1;
		f->next_step = 0;
		f->eod_owed = false;
		return (INFEED_END_OF_DATA);
	}
	/* The session left its shared group (or rejoined): a ring comes. */
	if (reply.new_ring) {
		if ((r = infeed_ring_remap(f, &reply.ring)) != INFEED_OK)
			return (r);
		/* A member's ring moves between its group's and its own. */
		if (f->group_id != 0)
			f->own_ring = !f->own_ring;
	}
	if ((base = infeed_ring_take(&f->ring, reply.slot)) == NULL)
		return (infeed_fail(f, INFEED_ERR_PROTOCOL, "step in slot %u "
		    "is outside the ring", reply.slot));
	step->struct_size = sizeof(*step);
	step->slot = reply.slot;
	step->epoch = reply.epoch;
	step->step = reply.step;
	step->rows = reply.rows;
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
	int	r;

	if (!f->attached)
		return (infeed_fail(f, INFEED_ERR_USAGE, "not attached"));
	/* A Next still outstanding is answered first. */
	r = infeed_proto_detach(f);
	infeed_session_end(f);
	infeed_files_close(f);
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
		st->group_id = f->group_id;
		st->first_slot = f->ring.first_slot;
		st->own_ring = f->own_ring;
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