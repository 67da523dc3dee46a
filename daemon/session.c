/* SPDX-License-Identifier: MIT */
/*
 * Sessions: one attached trainer's view of a dataset, and its step ring.
 *
 * A session owns a sampler (which index goes in which row of which step)
 * and a ring: one memfd, sealed against resizing, of buffer_size slots, each
 * holding one whole step (data, int32 labels, uint64 dataset indices).  The
 * client gets a read-only descriptor of the memfd in Attached and maps it.
 *
 * A slot goes FREE -> FILLING (the main process writes the row indices and
 * queues jobs on the worker pool) -> READY (every row written) -> HELD (sent
 * to the client in a Step) -> FREE (the client sent Release).  Steps are
 * filled and delivered in sequence order; a held slot is never rewritten,
 * and a slow client stalls only its own session.  Next is answered as soon
 * as the next step is ready, never by polling.
 */

#include <sys/mman.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"

#define SESSION_PAGE		4096
#define SESSION_ALIGN		64
#define SESSION_JOBS_PER_WORKER	4	/* jobs a step is cut into, per worker */

enum slot_state {
	SLOT_FREE,
	SLOT_FILLING,
	SLOT_READY,
	SLOT_HELD,
};

struct slot {
	enum slot_state	state;
	uint64_t	seq;		/* fill order */
	uint64_t	epoch;
	uint64_t	step;
	uint64_t	rows;
	uint64_t	rows_pending;
	int		error;
	uint64_t	bad_index;
};

struct session {
	struct daemon	*d;
	struct peer	*peer;
	uint64_t	 id;
	struct dataset	*ds;
	size_t		 ds_index;
	struct sampler	 sampler;
	Infeed__LoaderOptions *opts;	/* a packed copy, for status */
	bool		 load_indefinitely;

	int		 memfd;
	uint8_t		*map;
	struct ring_desc desc;
	struct slot	*slots;
	uint32_t	 nslots;
	uint64_t	*indices;	/* scratch, CBS entries */

	bool		 started;	/* filling has begun */
	bool		 at_epoch_end;	/* !load_indefinitely: filled it all */
	bool		 failed;
	char		*failure;
	uint64_t	 fill_epoch;
	uint64_t	 fill_step;
	uint64_t	 fill_seq;
	uint64_t	 deliver_seq;
	unsigned	 pending_next;

	uint64_t	 epoch;		/* of the last step delivered */
	uint64_t	 step;
	uint64_t	 steps_delivered;
	uint64_t	 rows_delivered;
	uint64_t	 first_next_ms;
};

static void	session_fill(struct session *);

/* Round @v up to a multiple of @a. */
static uint64_t
session_round(uint64_t v, uint64_t a)
{
	return ((v + a - 1) / a * a);
}

/* Check the transform and fill in the ring description's part of it. */
static int
session_transform(struct session *s, const Infeed__Transform *t,
    char **cause)
{
	struct ring_desc	*rd = &s->desc;
	struct dataset		*ds = s->ds;
	size_t			 i, n;

	rd->in_dtype = ds->dtype;
	rd->in_sample_bytes = ds->sample_bytes;
	rd->out_sample_bytes = ds->sample_bytes;
	rd->scale = 1.0f;
	if (t == NULL || !t->to_float32) {
		if (t != NULL && (t->n_mean || t->n_std || (t->has_scale &&
		    t->scale != 1.0f))) {
			*cause = xasprintf("transform: scale, mean and std need "
			    "to_float32 = true");
			return (-1);
		}
		return (0);
	}
	if (ds->dtype != INFEED_DTYPE_UINT8 && ds->dtype != INFEED_DTYPE_FLOAT32) {
		*cause = xasprintf("transform: to_float32 converts uint8 or "
		    "float32 samples, but '%s' holds %s", ds->name,
		    dtype_name(ds->dtype));
		return (-1);
	}
	if (!isfinite(t->scale) || t->scale == 0.0f) {
		*cause = xasprintf("transform: scale must be a finite non-zero "
		    "number, e.g. 1/255");
		return (-1);
	}
	n = t->n_mean;
	if (n != t->n_std) {
		*cause = xasprintf("transform: %zu mean values but %zu std "
		    "values; give one of each per channel", t->n_mean,
		    t->n_std);
		return (-1);
	}
	if (n > 1 && (ds->ndim == 0 || n != ds->shape[0] ||
	    n > INFEED_MAX_CHANNELS)) {
		*cause = xasprintf("transform: %zu mean/std values, but samples "
		    "have %llu channels (dim 0 of the sample shape); give one "
		    "value, or one per channel", n, ds->ndim ?
		    (unsigned long long)ds->shape[0] : 0ULL);
		return (-1);
	}
	for (i = 0; i < n; i++) {
		if (!isfinite(t->mean[i]) || !isfinite(t->std[i]) ||
		    t->std[i] == 0.0f) {
			*cause = xasprintf("transform: mean and std must be "
			    "finite and std non-zero (channel %zu)", i);
			return (-1);
		}
		rd->mean[i] = t->mean[i];
		rd->std[i] = t->std[i];
	}
	rd->to_float32 = 1;
	rd->scale = t->scale;
	rd->nchannels = (uint32_t)n;
	rd->channel_elems = ds->sample_bytes / dtype_size(ds->dtype) /
	    (n > 1 ? n : 1);
	rd->out_sample_bytes = ds->sample_bytes / dtype_size(ds->dtype) *
	    sizeof(float);
	return (0);
}

/* Create, size and seal the ring memfd and map it. */
static int
session_make_ring(struct session *s, Infeed__ErrorCode *code, char **cause)
{
	struct ring_desc	*rd = &s->desc;
	struct daemon		*d = s->d;
	uint64_t		 cbs = s->sampler.cbs, data, avail;

	/*
	 * Keep every part of a slot below 2^62 so that the offsets below
	 * cannot wrap: a wrapped size would pass the budget check.
	 */
	if (cbs > (UINT64_C(1) << 58) ||
	    __builtin_mul_overflow(cbs, rd->out_sample_bytes, &data) ||
	    data > (UINT64_C(1) << 62)) {
		*code = INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED;
		*cause = xasprintf("a step of %llu rows of %llu bytes does not "
		    "fit in memory", (unsigned long long)cbs,
		    (unsigned long long)rd->out_sample_bytes);
		return (-1);
	}
	rd->data_offset = 0;
	rd->labels_offset = session_round(data, SESSION_ALIGN);
	rd->indices_offset = session_round(rd->labels_offset +
	    cbs * sizeof(int32_t), SESSION_ALIGN);
	rd->slot_bytes = session_round(rd->indices_offset +
	    cbs * sizeof(uint64_t), SESSION_PAGE);
	rd->slots = s->nslots;
	rd->ring_bytes = rd->slot_bytes * s->nslots;
	avail = d->conf->memory_budget > d->memory_used ?
	    d->conf->memory_budget - d->memory_used : 0;
	if (rd->slot_bytes > UINT64_MAX / s->nslots ||
	    rd->ring_bytes > avail) {
		*code = INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED;
		*cause = xasprintf("the step ring needs %llu MiB (%u slots of "
		    "%llu MiB) but only %llu MiB of the daemon's memory budget "
		    "(%llu MiB, memory_budget in %s) is free; use a smaller "
		    "buffer_size or combined batch, or raise the budget",
		    (unsigned long long)(rd->ring_bytes >> 20), s->nslots,
		    (unsigned long long)(rd->slot_bytes >> 20),
		    (unsigned long long)(avail >> 20),
		    (unsigned long long)(d->conf->memory_budget >> 20),
		    d->conf->path);
		return (-1);
	}
	s->memfd = memfd_create("infeed-ring", MFD_CLOEXEC |
	    MFD_ALLOW_SEALING);
	if (s->memfd == -1 || ftruncate(s->memfd, (off_t)rd->ring_bytes) ==
	    -1 || fcntl(s->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
	    F_SEAL_SEAL) == -1) {
		*code = INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED;
		*cause = xasprintf("cannot create the step ring: %s",
		    strerror(errno));
		return (-1);
	}
	s->map = mmap(NULL, rd->ring_bytes, PROT_READ | PROT_WRITE,
	    MAP_SHARED, s->memfd, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		*code = INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED;
		*cause = xasprintf("cannot map the step ring: %s",
		    strerror(errno));
		return (-1);
	}
	d->memory_used += rd->ring_bytes;
	return (0);
}

/* A read-only descriptor of the ring, so the client cannot write it. */
static int
session_readonly_fd(struct session *s)
{
	char	path[64];
	int	fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", s->memfd);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		fd = fcntl(s->memfd, F_DUPFD_CLOEXEC, 0);
	return (fd);
}

/* Find a session by id. */
struct session *
session_find(struct daemon *d, uint64_t id)
{
	struct peer	*p;

	TAILQ_FOREACH(p, &d->peers, entry) {
		if (p->session != NULL && p->session->id == id)
			return (p->session);
	}
	return (NULL);
}

/* Turn LoaderOptions into sampler options, checking what the sampler does not. */
static int
session_options(struct session *s, const Infeed__LoaderOptions *o,
    struct sampler_opts *so, char **cause)
{
	memset(so, 0, sizeof(*so));
	so->samples = s->ds->samples;
	so->batch_size = o->batch_size;
	so->device_iterations = o->device_iterations;
	so->replication_factor = o->replication_factor;
	so->gradient_accumulation = o->gradient_accumulation;
	so->shuffle = o->shuffle;
	so->seed = o->seed;
	so->drop_last = o->drop_last;
	so->process_id = o->distributed_process_id;
	so->process_count = o->distributed_process_count;
	if (o->buffer_size == 0 || o->buffer_size > INFEED_MAX_SLOTS) {
		*cause = xasprintf("buffer_size is %u; expected 1 to %d slots "
		    "(poptorch's default is 3)", o->buffer_size,
		    INFEED_MAX_SLOTS);
		return (-1);
	}
	return (0);
}

/* Attach a peer to a dataset: check the options, build sampler and ring. */
struct session *
session_attach(struct peer *p, const Infeed__Attach *a,
    Infeed__ErrorCode *code, char **cause)
{
	static const Infeed__LoaderOptions defaults =
	    INFEED__LOADER_OPTIONS__INIT;
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__Attached	 at = INFEED__ATTACHED__INIT;
	const Infeed__LoaderOptions *o;
	struct daemon		*d = p->d;
	struct session		*s;
	struct sampler_opts	 so;
	uint8_t			*packed;
	size_t			 len;
	int			 rofd;

	o = a->options != NULL ? a->options : &defaults;
	s = xcalloc(1, sizeof(*s));
	s->d = d;
	s->peer = p;
	s->memfd = -1;
	s->ds = catalogue_find(d->cat, a->dataset, &s->ds_index);
	if (s->ds == NULL) {
		*code = INFEED__ERROR_CODE__ERROR_NOT_FOUND;
		*cause = xasprintf("no such dataset; 'infeedctl datasets' "
		    "lists the catalogue");
		goto fail;
	}
	if (!catalogue_allows(d->cat, s->ds_index, p->uid, p->gid)) {
		*code = INFEED__ERROR_CODE__ERROR_PERMISSION_DENIED;
		*cause = xasprintf("permission denied: uid %u (gid %u) is not in "
		    "any group that allow_groups in %s permits for this "
		    "dataset; ask the operator to add you to one",
		    (unsigned)p->uid, (unsigned)p->gid, d->conf->path);
		log_warnx("client %llu (pid %d, uid %u): refused attach to "
		    "'%s' by allow_groups", (unsigned long long)p->id,
		    (int)p->pid, (unsigned)p->uid, a->dataset);
		s->ds = NULL;
		goto fail;
	}
	*code = INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT;
	if (session_options(s, o, &so, cause) == -1)
		goto fail;
	if (sampler_init(&s->sampler, &so, cause) == -1)
		goto fail;
	if (o->start_step >= s->sampler.steps_per_epoch) {
		*cause = xasprintf("start_step is %llu but an epoch has %llu "
		    "steps (0 to %llu)", (unsigned long long)o->start_step,
		    (unsigned long long)s->sampler.steps_per_epoch,
		    (unsigned long long)s->sampler.steps_per_epoch - 1);
		goto fail;
	}
	if (session_transform(s, o->transform, cause) == -1)
		goto fail;
	s->nslots = o->buffer_size;
	if (session_make_ring(s, code, cause) == -1)
		goto fail;

	s->id = ++d->next_session_id;
	s->desc.session_id = s->id;
	s->desc.dataset_index = (uint32_t)s->ds_index;
	s->slots = xcalloc(s->nslots, sizeof(*s->slots));
	s->indices = xcalloc(s->sampler.cbs, sizeof(*s->indices));
	s->load_indefinitely = o->load_indefinitely;
	s->fill_epoch = o->start_epoch;
	s->fill_step = o->start_step;
	len = infeed__loader_options__get_packed_size(o);
	packed = xmalloc(len);
	infeed__loader_options__pack(o, packed);
	s->opts = infeed__loader_options__unpack(NULL, len, packed);
	free(packed);
	pool_map_session(d->pool, &s->desc, s->memfd, o->num_workers);

	if ((rofd = session_readonly_fd(s)) == -1) {
		*code = INFEED__ERROR_CODE__ERROR_INTERNAL;
		*cause = xasprintf("cannot duplicate the ring descriptor: %s",
		    strerror(errno));
		goto fail;
	}
	at.session_id = s->id;
	at.combined_batch_size = s->sampler.cbs;
	at.steps_per_epoch = s->sampler.steps_per_epoch;
	at.last_step_rows = sampler_step_rows(&s->sampler,
	    s->sampler.steps_per_epoch - 1);
	at.slots = s->nslots;
	at.slot_bytes = s->desc.slot_bytes;
	at.ring_bytes = s->desc.ring_bytes;
	at.data_offset = s->desc.data_offset;
	at.labels_offset = s->desc.labels_offset;
	at.indices_offset = s->desc.indices_offset;
	at.n_sample_shape = s->ds->ndim;
	at.sample_shape = s->ds->shape;
	at.data_dtype = s->desc.to_float32 ? INFEED__DTYPE__DTYPE_FLOAT32 :
	    (Infeed__DType)s->ds->dtype;
	at.sample_bytes = s->desc.out_sample_bytes;
	f.msg_case = INFEED__FRAME__MSG_ATTACHED;
	f.attached = &at;
	peer_send(p, &f, rofd);
	log_info("client %llu: session %llu on '%s': combined batch %llu, "
	    "%llu steps per epoch, %u slots of %llu KiB, shuffle %s, "
	    "process %u of %u", (unsigned long long)p->id,
	    (unsigned long long)s->id, s->ds->name,
	    (unsigned long long)s->sampler.cbs,
	    (unsigned long long)s->sampler.steps_per_epoch, s->nslots,
	    (unsigned long long)(s->desc.slot_bytes >> 10),
	    o->shuffle ? "on" : "off", o->distributed_process_id,
	    o->distributed_process_count);
	/* Fill the ring now; the first Step still waits for the first Next. */
	if (o->early_preload) {
		s->started = true;
		session_fill(s);
	}
	return (s);

fail:
	session_free(s);
	return (NULL);
}

/* Free a session: its slots, ring and queued work; NULL is a no-op. */
void
session_free(struct session *s)
{
	if (s == NULL)
		return;
	if (s->id != 0)
		pool_unmap_session(s->d->pool, s->id);
	if (s->map != NULL) {
		munmap(s->map, s->desc.ring_bytes);
		s->d->memory_used -= s->desc.ring_bytes;
	}
	if (s->memfd != -1)
		close(s->memfd);
	if (s->opts != NULL)
		infeed__loader_options__free_unpacked(s->opts, NULL);
	sampler_clear(&s->sampler);
	free(s->failure);
	free(s->indices);
	free(s->slots);
	free(s);
}

/* Start filling free slots with the next steps in order. */
static void
session_fill(struct session *s)
{
	struct slot	*sl;
	uint64_t	*dst, rows, chunk, r, njobs;
	uint32_t	 i;

	if (!s->started || s->failed)
		return;
	for (;;) {
		if (s->fill_step >= s->sampler.steps_per_epoch) {
			if (!s->load_indefinitely) {
				s->at_epoch_end = true;
				return;
			}
			s->fill_epoch++;
			s->fill_step = 0;
		}
		for (i = 0; i < s->nslots; i++) {
			if (s->slots[i].state == SLOT_FREE)
				break;
		}
		if (i == s->nslots)
			return;
		sl = &s->slots[i];
		rows = sampler_step_indices(&s->sampler, s->fill_epoch,
		    s->fill_step, s->indices);
		if (rows != sampler_step_rows(&s->sampler, s->fill_step))
			fatal("sampler: cannot compute the permutation");
		dst = (uint64_t *)(void *)(s->map + (uint64_t)i *
		    s->desc.slot_bytes + s->desc.indices_offset);
		memcpy(dst, s->indices, rows * sizeof(uint64_t));
		sl->state = SLOT_FILLING;
		sl->seq = s->fill_seq++;
		sl->epoch = s->fill_epoch;
		sl->step = s->fill_step++;
		sl->rows = rows;
		sl->rows_pending = rows;
		sl->error = 0;
		if (rows == 0) {
			sl->state = SLOT_READY;
			continue;
		}
		njobs = (uint64_t)pool_size(s->d->pool) *
		    SESSION_JOBS_PER_WORKER;
		chunk = (rows + njobs - 1) / njobs;
		for (r = 0; r < rows; r += chunk)
			pool_submit(s->d->pool, s->id, i, r,
			    r + chunk < rows ? r + chunk : rows);
	}
}

/* Answer waiting Next requests with ready steps, in order. */
static void
session_deliver(struct session *s)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__Step		 st = INFEED__STEP__INIT;
	Infeed__EndOfData	 eod = INFEED__END_OF_DATA__INIT;
	struct slot		*sl;
	uint32_t		 i;

	while (s->pending_next > 0) {
		if (s->failed) {
			s->pending_next--;
			peer_send_error(s->peer, INFEED__ERROR_CODE__ERROR_DATA,
			    "%s", s->failure);
			continue;
		}
		sl = NULL;
		for (i = 0; i < s->nslots; i++) {
			if (s->slots[i].state != SLOT_FREE &&
			    s->slots[i].seq == s->deliver_seq) {
				sl = &s->slots[i];
				break;
			}
		}
		if (sl == NULL && s->at_epoch_end &&
		    s->deliver_seq == s->fill_seq) {
			/* Every step of the epoch went out: say so. */
			s->pending_next--;
			eod.epoch = s->fill_epoch;
			f.msg_case = INFEED__FRAME__MSG_END_OF_DATA;
			f.end_of_data = &eod;
			peer_send(s->peer, &f, -1);
			s->at_epoch_end = false;
			s->started = false;
			s->fill_epoch++;
			s->fill_step = 0;
			/* A Next sent after this one asks for the next epoch. */
			if (s->pending_next > 0) {
				s->started = true;
				session_fill(s);
			}
			continue;
		}
		if (sl == NULL || sl->state != SLOT_READY)
			return;
		sl->state = SLOT_HELD;
		s->deliver_seq++;
		s->pending_next--;
		s->epoch = sl->epoch;
		s->step = sl->step;
		s->steps_delivered++;
		s->rows_delivered += sl->rows;
		st.slot = i;
		st.epoch = sl->epoch;
		st.step = sl->step;
		st.rows = sl->rows;
		f.msg_case = INFEED__FRAME__MSG_STEP;
		f.step = &st;
		peer_send(s->peer, &f, -1);
	}
}

/* Next: start filling if needed, answer when the next step is ready. */
void
session_next(struct session *s)
{
	uint32_t	i, held = 0;

	for (i = 0; i < s->nslots; i++)
		held += s->slots[i].state == SLOT_HELD;
	if (held == s->nslots) {
		peer_send_error(s->peer, INFEED__ERROR_CODE__ERROR_UNEXPECTED,
		    "all %u slots are held; release a step before asking for "
		    "the next one (or attach with a larger buffer_size)",
		    s->nslots);
		return;
	}
	if (s->first_next_ms == 0)
		s->first_next_ms = daemon_now_ms();
	s->pending_next++;
	s->started = true;
	session_fill(s);
	session_deliver(s);
}

/* Release: the client is done with a slot. */
int
session_release(struct session *s, uint32_t slot, char **cause)
{
	if (slot >= s->nslots || s->slots[slot].state != SLOT_HELD) {
		*cause = xasprintf("slot %u is not held by this session; "
		    "release only slots received in a Step, once each", slot);
		return (-1);
	}
	s->slots[slot].state = SLOT_FREE;
	session_fill(s);
	session_deliver(s);
	return (0);
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
 * A worker finished rows of a slot.  An @error of -1 means it could not
 * read dataset index @bad; -2 means row @bad crashed workers every time.
 */
void
session_job_done(struct session *s, uint32_t slot, uint32_t rows, int error,
    uint64_t bad)
{
	struct slot	*sl;
	const uint64_t	*indices;
	uint64_t	 index = bad;
	char		*files, row[64] = "";

	if (slot >= s->nslots || s->slots[slot].state != SLOT_FILLING)
		return;
	sl = &s->slots[slot];
	if (error != 0 && !s->failed) {
		if (error == -2 && bad < sl->rows) {
			indices = (const uint64_t *)(const void *)(s->map +
			    (uint64_t)slot * s->desc.slot_bytes +
			    s->desc.indices_offset);
			index = indices[bad];
			snprintf(row, sizeof(row), "row %llu of ",
			    (unsigned long long)bad);
		}
		files = session_sample_files(s->ds);
		s->failed = true;
		s->failure = xasprintf("dataset '%s': %s sample %llu (%sepoch "
		    "%llu, step %llu) %s", s->ds->name, error == -2 ?
		    "workers crashed 3 times reading" : "cannot read",
		    (unsigned long long)index, row,
		    (unsigned long long)sl->epoch,
		    (unsigned long long)sl->step, files);
		free(files);
		log_warnx("session %llu: %s", (unsigned long long)s->id,
		    s->failure);
		pool_drop_jobs(s->d->pool, s->id);
	}
	sl->rows_pending -= rows < sl->rows_pending ? rows : sl->rows_pending;
	if (sl->rows_pending == 0)
		sl->state = SLOT_READY;
	session_deliver(s);
}

/* Describe the session for GetStats; pointers borrow from @s. */
void
session_fill_stats(struct session *s, Infeed__SessionStats *ss)
{
	uint64_t	elapsed;
	uint32_t	i, ready = 0, held = 0;

	for (i = 0; i < s->nslots; i++) {
		ready += s->slots[i].state == SLOT_READY;
		held += s->slots[i].state == SLOT_HELD;
	}
	ss->session_id = s->id;
	ss->dataset = s->ds->name;
	ss->options = s->opts;
	ss->has_epoch = ss->has_step = 1;
	ss->epoch = s->epoch;
	ss->step = s->step;
	ss->has_slots_ready = ss->has_slots_held = ss->has_slots = 1;
	ss->slots_ready = ready;
	ss->slots_held = held;
	ss->slots = s->nslots;
	ss->has_steps_delivered = 1;
	ss->steps_delivered = s->steps_delivered;
	elapsed = s->first_next_ms ? daemon_now_ms() - s->first_next_ms : 0;
	ss->has_items_per_s = 1;
	ss->items_per_s = elapsed ? (double)s->rows_delivered * 1000.0 /
	    (double)elapsed : 0.0;
	ss->has_client_pid = ss->has_client_uid = 1;
	ss->client_pid = s->peer->pid;
	ss->client_uid = s->peer->uid;
	ss->client_name = s->peer->name;
}

/* After a reload: keep going if our dataset is unchanged, else -1. */
int
session_reload(struct session *s, const struct catalogue *cat)
{
	size_t	i;

	for (i = 0; i < cat->ndatasets; i++) {
		if (cat->datasets[i] == s->ds)
			break;
	}
	if (i == cat->ndatasets)
		return (-1);
	s->ds_index = i;
	s->desc.dataset_index = (uint32_t)i;
	pool_set_dataset(s->d->pool, s->id, (uint32_t)i);
	return (0);
}

/* Rows sent to the client so far. */
uint64_t
session_rows_delivered(const struct session *s)
{
	return (s->rows_delivered);
}

/* Next requests still waiting for an answer. */
unsigned
session_pending_next(const struct session *s)
{
	return (s->pending_next);
}

/* The name of the session's dataset. */
const char *
session_dataset_name(const struct session *s)
{
	return (s->ds->name);
}
