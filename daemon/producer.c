/* SPDX-License-Identifier: MIT */
/*
 * Producers (see producer.h).  Steps are filled in sequence order, each
 * slot taking the next step as soon as it is free; nothing waits for a
 * reader to ask.  A step's indices and jobs are made a bounded amount per
 * loop callback (producer_prepare), whatever its rows, stages and
 * shuffle, and its shuffle's table is charged to memory_budget
 * (producer_table).  Past the ring, the next read_ahead steps' indices
 * go to the pool to be read ahead (producer_read_ahead), in the same
 * bounded callbacks.  Producers call the pool and the ring, never a
 * reader, a group or a session: what is done goes up through the done
 * callback.
 */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "group-store.h"
#include "log.h"
#include "pool.h"
#include "producer.h"
#include "sampler.h"
#include "session-check.h"
#include "xmalloc.h"

/*
 * A step's indices are computed and its jobs queued this many work units
 * (sampler_row_cost(), SAMPLER_COST_*: about a nanosecond each) at a
 * time, a callback each, with the loop's sockets looked at in between: a
 * step of 2^26 rows, shuffled or of 16 elastic stages, costs the event
 * loop about a millisecond per callback (15 s at once before), never the
 * whole step.
 */
#define PRODUCER_PREPARE_WORK	(1024 * 1024)

static void	producer_prepare_later(struct producer *);
static void	producer_store_done(void *, uint32_t, enum group_store_copy,
		    uint64_t);

/* Move @st to @to; the allowed transitions are all here. */
void
producer_state_move(enum producer_state *st, enum producer_state to,
    uint64_t id)
{
	bool	ok;

	switch (to) {
	case PRODUCER_FILLING:
		ok = *st == PRODUCER_IDLE;
		break;
	case PRODUCER_EPOCH_END:
		ok = *st == PRODUCER_FILLING;
		break;
	case PRODUCER_IDLE:
		ok = *st == PRODUCER_EPOCH_END;
		break;
	case PRODUCER_FAILED:
		ok = *st != PRODUCER_FAILED;
		break;
	default:
		ok = false;
		break;
	}
	if (!ok)
		fatalx("session %llu: no transition from state %d to %d",
		    (unsigned long long)id, (int)*st, (int)to);
	*st = to;
}

/* Move the producer to state @to. */
static void
producer_set_state(struct producer *p, enum producer_state to)
{
	producer_state_move(&p->state, to, p->id);
}

/*
 * Slot @i's dataset indices: the producer's own table, which the workers
 * get through the pool.  The ring's copy is the client's to read (and, in
 * a mapping it made writable, to scribble on): nothing reads it back.
 */
static uint64_t *
producer_indices(const struct producer *p, uint32_t i)
{
	return (p->indices + (uint64_t)i * p->spec.src->sampler.cbs);
}

/* "from FILE (labels: FILE); check those files", for a sample's error. */
static char *
producer_sample_files(const struct dataset *ds)
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
producer_drop_after_failure(struct producer *p)
{
	uint32_t	i;

	if (p->jobs_dropped)
		return;
	for (i = 0; i < p->ring->layout.slots; i++) {
		if (p->ring->slot[i].state == SLOT_FILLING &&
		    p->ring->slot[i].seq < p->failed_seq)
			return;
	}
	p->jobs_dropped = true;
	pool_drop_jobs(p->pool_ring);
}

/* A sample of a slot failed: end the filling with a message. */
static void
producer_fail(struct producer *p, const struct pool_report *r)
{
	const struct ring_slot	*sl = &p->ring->slot[r->slot];
	const struct dataset	*ds = p->spec.src->ds;
	uint64_t		 index = r->bad;
	char			*files, row[64] = "", what[256], where[512];
	const char		*at;

	/* Only the first step in the client's order that failed counts. */
	if (p->state == PRODUCER_FAILED && sl->seq >= p->failed_seq)
		return;
	free(p->failure);

	if ((r->result == POOL_JOB_CRASHED || r->result == POOL_JOB_STUCK) &&
	    r->bad < sl->rows) {
		index = producer_indices(p, r->slot)[r->bad];
		snprintf(row, sizeof(row), "row %llu of ",
		    (unsigned long long)r->bad);
	}
	p->failure_code = ERRCODE_DATA;
	if (r->result == POOL_JOB_CRASHED && r->signal == 0) {
		/* Not the data's doing (fatal() in a worker): ours. */
		snprintf(what, sizeof(what), "workers exited %u times (status "
		    "%d; the daemon's log says why) reading", r->deaths,
		    r->status);
		p->failure_code = ERRCODE_INTERNAL;
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
	files = producer_sample_files(ds);
	if (r->result == POOL_JOB_INTERNAL) {
		p->failure_code = ERRCODE_INTERNAL;
		p->failure = xasprintf("dataset '%s': the daemon cannot fill "
		    "step %llu (epoch %llu): %s; see the daemon's log",
		    ds->name, (unsigned long long)sl->step,
		    (unsigned long long)sl->epoch, r->reason[0] != '\0' ?
		    r->reason : "a worker failed");
	} else if (r->result == POOL_JOB_LABEL_RANGE &&
	    (r->label < 0 || r->label >= UINT32_MAX))
		p->failure = xasprintf("dataset '%s': the label of sample %llu "
		    "(epoch %llu, step %llu) is %lld, which is no class "
		    "number: labels are 0 to %u; check the labels %s",
		    ds->name, (unsigned long long)index,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    (long long)r->label, UINT32_MAX - 1, files);
	else if (r->result == POOL_JOB_LABEL_RANGE)
		p->failure = xasprintf("dataset '%s': the label of sample "
		    "%llu (epoch %llu, step %llu) is %lld, which does not fit "
		    "in the int32 labels this session asked for; attach with "
		    "label_dtype DTYPE_INT64, or check the labels %s",
		    ds->name, (unsigned long long)index,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    (long long)r->label, files);
	else if (ds->encoded) {
		/*
		 * An image: the worker says what was wrong with it, and
		 * where; after a death, name it without reading anything.
		 */
		at = r->where != NULL && r->where[0] != '\0' ? r->where :
		    dataset_sample_brief(ds, index, where, sizeof(where));
		p->failure = xasprintf("dataset '%s': %s sample %llu (%sepoch "
		    "%llu, step %llu), %s: %s; fix or remove that file, or set "
		    "'bad_samples = replace' for the dataset", ds->name,
		    what, (unsigned long long)index, row,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    at, r->reason[0] != '\0' ? r->reason : "it cannot be read");
	} else
		p->failure = xasprintf("dataset '%s': %s sample %llu (%sepoch "
		    "%llu, step %llu) %s%s%s%s", ds->name, what,
		    (unsigned long long)index, row,
		    (unsigned long long)sl->epoch, (unsigned long long)sl->step,
		    files, r->reason[0] != '\0' ? " (" : "", r->reason,
		    r->reason[0] != '\0' ? ")" : "");
	free(files);
	log_warnx("%s %llu: %s", p->kind, (unsigned long long)p->id,
	    p->failure);
	if (p->state != PRODUCER_FAILED)
		producer_set_state(p, PRODUCER_FAILED);
	p->failed_seq = sl->seq;
	producer_drop_after_failure(p);
}

/*
 * Tell the dataset where the stream reads now (a remote dataset's cache
 * evicts by it): the oldest step still filling, else the next to fill.
 */
static void
producer_order_update(struct producer *p)
{
	const struct ring_slot	*sl, *oldest = NULL;
	uint32_t		 i;

	if (p->order == NULL)
		return;
	for (i = 0; i < p->ring->layout.slots; i++) {
		sl = &p->ring->slot[i];
		if (sl->state == SLOT_FILLING &&
		    (oldest == NULL || sl->seq < oldest->seq))
			oldest = sl;
	}
	if (oldest != NULL)
		dataset_order_at(p->spec.src->ds, p->order, oldest->epoch,
		    oldest->step * p->spec.src->sampler.cbs);
	else
		dataset_order_at(p->spec.src->ds, p->order, p->fill_epoch,
		    p->fill_step * p->spec.src->sampler.cbs);
}

/* The pool finished rows of a slot. */
static void
producer_pool_cb(void *arg, const struct pool_report *r)
{
	struct producer	 *p = arg;
	struct ring_slot *sl;

	/* Retired: a reader back in its group, its own ring's last jobs. */
	if (p->retired)
		return;
	if (r->slot >= p->ring->layout.slots ||
	    p->ring->slot[r->slot].state != SLOT_FILLING)
		return;
	sl = &p->ring->slot[r->slot];
	p->bytes_read += r->bytes;
	p->replaced[r->slot] += r->replaced;
	if (r->result != POOL_JOB_DONE)
		producer_fail(p, r);
	sl->rows_pending -= r->rows < sl->rows_pending ? r->rows :
	    sl->rows_pending;
	if (sl->rows_pending == 0) {
		ring_slot_set(p->ring, r->slot, SLOT_READY);
		producer_order_update(p);
		if (p->store_adds && p->state != PRODUCER_FAILED)
			group_store_add(p->store, p->ring, r->slot,
			    p->replaced[r->slot], producer_store_done, p);
	}
	if (p->state == PRODUCER_FAILED)
		producer_drop_after_failure(p);
	p->done(p->arg, r->bytes, r->replaced);
}

/*
 * The shuffle's table (N x 8 bytes, up to 32 MiB at 2^22 samples), for a
 * source that fills steps: a lone session's, a group's, a member's when
 * it leaves (a member in its group fills nothing and has none).  It is
 * charged to memory_budget before it is allocated, once, until the
 * source's owner frees it.
 */
static int
producer_table(const struct producer_spec *spec, char **cause)
{
	struct sampler	*sm = &spec->src->sampler;
	uint64_t	 bytes = sampler_table_bytes(sm);
	char		 size[48], *why;

	if (bytes == 0 || *spec->table_charged != 0)
		return (0);
	if (ring_budget_charge(spec->budget, bytes, &spec->owner, &why) ==
	    -1) {
		*cause = xasprintf("the shuffle's table of %llu samples needs "
		    "%s but %s; attach with shuffle off, wait for other "
		    "sessions to end, or ask the operator to raise the budget",
		    (unsigned long long)sm->opts.samples,
		    ring_mem_format_bytes(bytes, size, sizeof(size)), why);
		free(why);
		return (-1);
	}
	if (sampler_table_alloc(sm, cause) == -1) {
		ring_budget_uncharge(spec->budget, bytes);
		return (-1);
	}
	*spec->table_charged = bytes;
	return (0);
}

/* What a producer of a client's Attach is made of. */
void
producer_spec_init(struct producer_spec *spec,
    const struct session_host *host, const struct session_client *client,
    const struct session_options *o, struct session_source *src,
    uint64_t *table_charged)
{
	memset(spec, 0, sizeof(*spec));
	spec->pool = host->pool;
	spec->budget = host->budget;
	spec->base = host->base;
	spec->src = src;
	spec->table_charged = table_charged;
	spec->owner.uid = client->uid;
	spec->owner.gid = client->gid;
	spec->owner.content = src->ds->serial;
	spec->owner.pid = client->pid;
	spec->slots = o->buffer_size;
	spec->num_workers = o->num_workers;
	spec->load_indefinitely = o->load_indefinitely;
}

/* Make the producer: see producer.h. */
struct producer *
producer_new(const struct producer_spec *spec, uint64_t epoch,
    uint64_t step, producer_done_cb *done, void *arg, enum errcode *code,
    char **cause)
{
	struct session_source	*src = spec->src;
	struct producer		*p;

	*code = ERRCODE_RESOURCE_EXHAUSTED;
	p = xcalloc(1, sizeof(*p));
	p->kind = "session";
	p->spec = *spec;
	p->done = done;
	p->arg = arg;
	p->fill_epoch = epoch;
	p->fill_step = step;
	p->room = UINT32_MAX;
	if (producer_table(spec, cause) == -1)
		goto fail;
	p->ring = ring_new(spec->budget, src->sampler.cbs,
	    src->transform.out_sample_bytes, src->label_dtype, spec->slots,
	    &spec->owner, cause);
	if (p->ring == NULL)
		goto fail;
	if ((p->indices = calloc(spec->slots, src->sampler.cbs *
	    sizeof(uint64_t))) == NULL) {
		*cause = xasprintf("no memory for the index tables of %u "
		    "slots of %llu rows", spec->slots,
		    (unsigned long long)src->sampler.cbs);
		goto fail;
	}
	p->pool_ring = pool_add_ring(spec->pool, (uint32_t)src->ds_index,
	    &p->ring->layout, &src->transform, p->ring->mem,
	    spec->num_workers, producer_pool_cb, p, cause);
	if (p->pool_ring == NULL)
		goto fail;
	if (src->own_ds && pool_ring_files(p->pool_ring, &src->files,
	    src->ds, cause) == -1) {
		*code = ERRCODE_INTERNAL;
		goto fail;
	}
	/* A remote dataset's cache evicts by the order (cache.c). */
	p->order = dataset_order_new(src->ds, &src->sampler.opts);
	return (p);

fail:
	producer_free(p);
	return (NULL);
}

/* Free a producer: its registration, its ring and its state. */
void
producer_free(struct producer *p)
{
	if (p == NULL)
		return;
	if (p->ev_prepare != NULL)
		event_free(p->ev_prepare);
	producer_set_store(p, NULL, false);
	/*
	 * Its memory is kept for the next ring only when no reader holds a
	 * step, and only once no job writes it any more: the pool releases
	 * it then.  A ring a client holds steps of (libinfeed keeps reading
	 * held steps after a session ends, so those pages must stay as they
	 * are) stays charged to the budget until the client's process exits
	 * (ring_release()).  The index tables, freed here and with the jobs,
	 * were charged with the ring.
	 */
	pool_remove_ring(p->pool_ring, p->ring, p->ring != NULL &&
	    ring_count(p->ring, SLOT_HELD) == 0);
	dataset_order_free(p->spec.src->ds, p->order);
	free(p->indices);
	free(p->ahead);
	free(p->failure);
	free(p);
}

/*
 * Queue rows [@begin, @end) of slot @i on the pool, their indices
 * computed, in the pool's jobs of a step (pool_job_rows()), as the step
 * the client takes in the ring's order (the pool serves the nearest steps
 * first); rows prepared in several callbacks are cut where those end too.
 */
static void
producer_submit(struct producer *p, uint32_t i, uint64_t begin,
    uint64_t end)
{
	const struct ring_slot	*sl = &p->ring->slot[i];
	uint64_t		 chunk, r, stop;

	chunk = pool_job_rows(p->spec.pool, sl->rows,
	    p->ring->layout.row_bytes, p->spec.src->transform.image);
	for (r = begin; r < end; r = stop) {
		stop = (r / chunk + 1) * chunk;
		if (stop > end)
			stop = end;
		pool_submit(p->pool_ring, i, sl->epoch, sl->seq, r, stop,
		    producer_indices(p, i) + r);
	}
}

/*
 * The filling slot whose next rows are to be prepared (the lowest step in
 * the ring's order with rows not yet queued), or -1.  None on a retired
 * producer, and none past a failed step (its jobs are dropped,
 * producer_drop_after_failure()).
 */
static int
producer_prepare_slot(const struct producer *p)
{
	const struct ring_slot	*sl;
	uint32_t		 i;
	int			 best = -1;

	if (p->retired)
		return (-1);
	for (i = 0; i < p->ring->layout.slots; i++) {
		sl = &p->ring->slot[i];
		if (sl->state != SLOT_FILLING || p->prepared[i] >= sl->rows ||
		    (p->state == PRODUCER_FAILED && sl->seq >= p->failed_seq))
			continue;
		if (best == -1 || sl->seq < p->ring->slot[best].seq)
			best = (int)i;
	}
	return (best);
}

/*
 * Send the rows of the steps after the ring's to be read ahead
 * (pool_read_ahead()), for at most *@work units: up to
 * pool_read_ahead_steps() past the last step a slot took, within that
 * step's epoch (the next one's table is not made yet) and before a
 * catch-up stream's stop.  So the reads of a step are asked for
 * read_ahead steps before its slot is, and no more are: the window moves
 * as slots take steps.  Return whether steps are left to send.
 */
static bool
producer_read_ahead(struct producer *p, uint64_t *work)
{
	struct sampler		*sm = &p->spec.src->sampler;
	const struct transform	*tf = &p->spec.src->transform;
	uint64_t		 epoch = p->fill_epoch, end, rows, cost;

	if (p->retired || p->state != PRODUCER_FILLING || p->fill_step == 0)
		return (false);
	if (p->ahead_epoch != epoch || p->ahead_step < p->fill_step) {
		p->ahead_epoch = epoch;
		p->ahead_step = p->fill_step;
	}
	end = p->fill_step + pool_read_ahead_steps(p->pool_ring, sm->cbs,
	    sm->cbs * (tf->in_sample_bytes ? tf->in_sample_bytes :
	    tf->out_sample_bytes));
	if (end > sampler_epoch_steps(sm, epoch))
		end = sampler_epoch_steps(sm, epoch);
	if (p->stops && p->stop_epoch == epoch && end > p->stop_step)
		end = p->stop_step;
	while (p->ahead_step < end) {
		if (*work == 0 || !sampler_prepare(sm, epoch, work))
			return (true);
		rows = sampler_epoch_step_rows(sm, epoch, p->ahead_step);
		if (p->ahead == NULL)
			p->ahead = xcalloc(sm->cbs, sizeof(*p->ahead));
		sampler_rows_indices(sm, epoch, p->ahead_step, 0, rows,
		    p->ahead);
		if (!pool_read_ahead(p->pool_ring, p->ahead, rows))
			return (false);	/* again when a slot takes a step */
		p->ahead_step++;
		cost = rows * sampler_row_cost(sm, epoch);
		*work -= cost < *work ? cost : *work;
	}
	return (false);
}

/*
 * Compute the indices of the next rows and queue their jobs, for about
 * PRODUCER_PREPARE_WORK units (a new epoch's shuffle table among them),
 * then those of the steps to read ahead; return whether rows are left.
 */
static bool
producer_prepare(struct producer *p)
{
	struct sampler		*sm = &p->spec.src->sampler;
	const struct ring_slot	*sl;
	uint64_t		 work = PRODUCER_PREPARE_WORK, cost, n, begin;
	int			 i;

	while (work > 0 && (i = producer_prepare_slot(p)) != -1) {
		sl = &p->ring->slot[i];
		if (!sampler_prepare(sm, sl->epoch, &work))
			return (true);
		cost = sampler_row_cost(sm, sl->epoch);
		begin = p->prepared[i];
		n = work / cost > 0 ? work / cost : 1;
		if (n > sl->rows - begin)
			n = sl->rows - begin;
		sampler_rows_indices(sm, sl->epoch, sl->step, begin, begin + n,
		    producer_indices(p, (uint32_t)i) + begin);
		p->prepared[i] = begin + n;
		work -= n * cost < work ? n * cost : work;
		producer_submit(p, (uint32_t)i, begin, begin + n);
	}
	if (producer_prepare_slot(p) != -1)
		return (true);
	return (producer_read_ahead(p, &work));
}

/* The next rows' preparation, after the loop has looked at its sockets. */
static void
producer_prepare_cb(evutil_socket_t fd, short what, void *arg)
{
	struct producer	*p = arg;

	(void)fd;
	(void)what;
	if (producer_prepare(p))
		producer_prepare_later(p);
}

/*
 * Prepare the filling slots' rows from a timer of no delay (run once the
 * loop has polled its sockets, unlike an event made active); without an
 * event base (the session tests), all at once.
 */
static void
producer_prepare_later(struct producer *p)
{
	static const struct timeval	now = { 0, 0 };

	if (producer_prepare_slot(p) == -1)
		return;
	if (p->spec.base == NULL) {
		while (producer_prepare(p))
			;
		return;
	}
	if (p->ev_prepare == NULL && (p->ev_prepare = evtimer_new(
	    p->spec.base, producer_prepare_cb, p)) == NULL)
		fatalx("cannot make a timer for %s %llu", p->kind,
		    (unsigned long long)p->id);
	if (!evtimer_pending(p->ev_prepare, NULL))
		evtimer_add(p->ev_prepare, &now);
}

/*
 * Start filling free slots with the next steps in order: each takes its
 * step, its sequence number and its row count now; its indices and jobs
 * follow a bounded amount at a time (producer_prepare()).
 */
void
producer_fill(struct producer *p)
{
	struct sampler		*sm = &p->spec.src->sampler;
	struct ring_slot	*sl;
	uint64_t		 rows;
	int			 i;

	while (p->state == PRODUCER_FILLING) {
		if (p->fill_step >= sampler_epoch_steps(sm, p->fill_epoch)) {
			if (!p->spec.load_indefinitely) {
				producer_set_state(p, PRODUCER_EPOCH_END);
				break;
			}
			p->fill_epoch++;
			p->fill_step = 0;
		}
		if (producer_at_stop(p) || p->room == 0 ||
		    (i = ring_find(p->ring, SLOT_FREE)) == -1)
			break;
		if (p->room != UINT32_MAX)
			p->room--;
		sl = &p->ring->slot[i];
		rows = sampler_epoch_step_rows(sm, p->fill_epoch,
		    p->fill_step);
		ring_slot_set(p->ring, (uint32_t)i, SLOT_FILLING);
		sl->seq = p->fill_seq++;
		sl->epoch = p->fill_epoch;
		sl->step = p->fill_step++;
		sl->rows = rows;
		sl->rows_pending = rows;
		p->prepared[i] = 0;
		p->replaced[i] = 0;
		if (rows == 0)
			ring_slot_set(p->ring, (uint32_t)i, SLOT_READY);
		else if (p->store != NULL && group_store_serve(p->store,
		    p->ring, (uint32_t)i, producer_store_done, p))
			p->prepared[i] = rows;	/* copied, not decoded */
	}
	producer_order_update(p);
	producer_prepare_later(p);
}

/* Fill from a store, and add to it. */
void
producer_set_store(struct producer *p, struct group_store *s, bool adds)
{
	if (p->store != NULL) {
		group_store_forget(p->store, p);
		group_store_unref(p->store);
	}
	p->store = s;
	p->store_adds = adds;
	if (s != NULL)
		group_store_ref(s);
}

/*
 * A copy of the store's ended: a step added (its slot let go), a step
 * copied in (whole), or not (the store went: decode the slot's rows after
 * all).
 */
static void
producer_store_done(void *arg, uint32_t i, enum group_store_copy how,
    uint64_t replaced)
{
	struct producer		*p = arg;
	struct ring_slot	*sl = &p->ring->slot[i];

	if (how == GROUP_STORE_ADDED) {
		p->done(p->arg, 0, 0);
		return;
	}
	if (p->retired || sl->state != SLOT_FILLING)
		return;
	if (how == GROUP_STORE_NOT_COPIED) {
		p->prepared[i] = 0;
		producer_prepare_later(p);
		return;
	}
	sl->rows_pending = 0;
	ring_slot_set(p->ring, i, SLOT_READY);
	producer_order_update(p);
	p->done(p->arg, 0, replaced);
}

/* IDLE to FILLING, and fill. */
void
producer_start(struct producer *p)
{
	producer_set_state(p, PRODUCER_FILLING);
	producer_fill(p);
}

/* The epoch ended: the next fill starts the next one. */
uint64_t
producer_next_epoch(struct producer *p)
{
	uint64_t	epoch = p->fill_epoch;

	producer_set_state(p, PRODUCER_IDLE);
	p->fill_epoch++;
	p->fill_step = 0;
	return (epoch);
}

/* Go on from a reader's stream at (@epoch, @step), in state @st. */
void
producer_handover(struct producer *p, uint64_t epoch, uint64_t step,
    enum producer_state st)
{
	if (p->state != PRODUCER_IDLE || p->fill_seq != 0)
		fatalx("%s %llu: a stream handed to a producer that filled",
		    p->kind, (unsigned long long)p->id);
	p->fill_epoch = epoch;
	p->fill_step = step;
	p->state = st;
}

/* A catch-up stream's end: fill nothing from there on, or go on. */
void
producer_stop_at(struct producer *p, bool stops, uint64_t epoch,
    uint64_t step)
{
	p->stops = stops;
	p->stop_epoch = epoch;
	p->stop_step = step;
	if (!stops)
		producer_fill(p);
}

/* Whether every step before its stop is filled (or filling). */
bool
producer_at_stop(const struct producer *p)
{
	uint64_t	epoch = p->fill_epoch, step = p->fill_step;

	if (!p->stops)
		return (false);
	if (step >= sampler_epoch_steps(&p->spec.src->sampler, epoch)) {
		epoch++;
		step = 0;
	}
	return (epoch > p->stop_epoch ||
	    (epoch == p->stop_epoch && step >= p->stop_step));
}

/* Fill no more: the ring stays for the steps its readers hold. */
void
producer_retire(struct producer *p)
{
	p->retired = true;
	pool_drop_jobs(p->pool_ring);
}

/* Readers had every step before the @next_seq-th. */
void
producer_delivered(struct producer *p, uint64_t next_seq)
{
	pool_ring_delivered(p->pool_ring, next_seq);
}

/* The slot of the ring that holds step @seq, or NULL. */
struct ring_slot *
producer_find_seq(const struct producer *p, uint64_t seq, uint32_t *index)
{
	uint32_t	i;

	for (i = 0; i < p->ring->layout.slots; i++) {
		if (p->ring->slot[i].state != SLOT_FREE &&
		    p->ring->slot[i].seq == seq) {
			*index = i;
			return (&p->ring->slot[i]);
		}
	}
	return (NULL);
}

/*
 * Failed: the steps before the failed one still go out as they become
 * ready (until the jobs are dropped); every other Next gets the error.
 */
enum producer_gate
producer_gate(const struct producer *p, const struct ring_slot *sl)
{
	if (p->state != PRODUCER_FAILED)
		return (PRODUCER_GATE_STEP);
	if (sl != NULL && sl->seq < p->failed_seq &&
	    sl->state == SLOT_FILLING && !p->jobs_dropped)
		return (PRODUCER_GATE_WAIT);
	if (sl == NULL || sl->seq >= p->failed_seq ||
	    (sl->state != SLOT_READY && sl->state != SLOT_HELD))
		return (PRODUCER_GATE_ERROR);
	return (PRODUCER_GATE_STEP);
}

/* After a reload: where @src's dataset is now, or -1 when it went. */
int
producer_reload(struct session_source *src, struct producer *p,
    const struct catalogue *cat)
{
	size_t	i;

	for (i = 0; i < cat->ndatasets; i++) {
		if (cat->datasets[i] == src->ds)
			break;
	}
	if (i == cat->ndatasets)
		return (-1);
	src->ds_index = i;
	if (p != NULL)
		pool_ring_set_dataset(p->pool_ring, (uint32_t)i);
	return (0);
}
