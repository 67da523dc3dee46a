/* SPDX-License-Identifier: MIT */
/*
 * Groups' stores of past steps (see group-store.h): the list of stores,
 * their memory and its charge, the copier thread and its queue, copies
 * into and out of a store (as uint8 for images that end in ToTensor),
 * lingering, and giving memory back.
 */

#include <sys/eventfd.h>
#include <sys/mman.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "group-store.h"
#include "log.h"
#include "ring-memory.h"
#include "ring.h"
#include "xmalloc.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* Linux 5.14 */
#endif

/*
 * A copy: a ring slot into a store's entry (add), or back (serve),
 * through infeedd's mapping of the store's memfd (the entry's pages made
 * first when they are not); or a store's memory to unmap and close (done
 * NULL: its pages are freed here, not on the event loop).
 */
struct gs_job {
	struct group_store	*s;	/* NULL: the store went meanwhile */
	const struct group_store_form *form;	/* the store's */
	struct ring		*ring;
	group_store_done_cb	*done;	/* NULL: memory to close */
	void			*arg;
	struct group_store_mem	 mem;	/* the store's */
	uint32_t		 slot;
	uint32_t		 e;
	bool			 add;
	bool			 page;	/* the entry's pages to make */
	bool			 failed;	/* no pages for it */
	uint64_t		 replaced;	/* a serve's: the entry's */
	uint64_t		 rows;
	uint8_t			*buf;	/* the ring slot's bytes */
	uint64_t		 off;	/* the entry's, in the memfd */
	TAILQ_ENTRY(gs_job)	 entry;
};
TAILQ_HEAD(gs_job_list, gs_job);

/* The copier: one thread for every store, started with the first. */
static struct {
	pthread_t		 thread;
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;
	struct gs_job_list	 queue;
	struct gs_job_list	 done;	/* for the loop */
	struct gs_job		*busy;	/* being copied */
	bool			 running;
	bool			 stop;
	int			 efd;
	struct event		*ev;
	struct event		*ev_linger;
	struct event_base	*base;
} gs = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
    .efd = -1 };

static TAILQ_HEAD(, group_store) gs_list = TAILQ_HEAD_INITIALIZER(gs_list);

static void	gs_queue(struct gs_job *);
static void	gs_release(struct group_store *, struct group_store_mem *);

/*
 * Make the pages of job @j's entry and map them, once for every step
 * that lands there: fallocate() allocates them (and says when there is
 * no memory, where a write would be SIGBUS), MADV_POPULATE_WRITE maps
 * them at once (a fault a page costs more; a kernel before 5.14 faults
 * them).  -1: no pages.
 */
static int
gs_page(const struct gs_job *j)
{
	uint64_t	len = j->form->entry_bytes;

	if (fallocate(j->mem.fd, 0, (off_t)j->off, (off_t)len) == -1)
		return (-1);
	if (madvise(j->mem.map + j->off, len, MADV_POPULATE_WRITE) == -1 &&
	    errno != EINVAL)
		return (-1);
	return (0);
}

/*
 * Copy job @j's step: its rows as uint8 through the tail (or the whole
 * slot as it is), then its labels and indices, through infeedd's
 * mapping of the entry's pages (made first when they are not).  -1: no
 * pages for it.
 */
static int
gs_copy(const struct gs_job *j)
{
	const struct group_store_form	*f = j->form;
	uint8_t				*en = j->mem.map + j->off;
	uint64_t			 r, u8row = f->row_bytes / 4;

	if (j->page && gs_page(j) == -1)
		return (-1);
	if (!f->u8) {
		memcpy(j->add ? en : j->buf, j->add ? j->buf : en,
		    f->slot_bytes);
		return (0);
	}
	for (r = 0; r < j->rows; r++) {
		if (j->add)
			image_tail_to_u8(&f->tail, (const float *)(const void *)
			    (j->buf + r * f->row_bytes), en + r * u8row);
		else
			image_tail_to_float(&f->tail, en + r * u8row,
			    (float *)(void *)(j->buf + r * f->row_bytes));
	}
	memcpy(j->add ? en + f->rest_at : j->buf + f->rest_offset,
	    j->add ? j->buf + f->rest_offset : en + f->rest_at,
	    f->slot_bytes - f->rest_offset);
	return (0);
}

/* Free memory @m (on the copier: unmapping frees its pages). */
static void
gs_mem_free(struct group_store_mem *m)
{
	if (m->fd == -1)
		return;
	munmap(m->map, m->bytes);
	close(m->fd);
	free(m->paged);
	m->fd = -1;
}

/* Have the copier free memory @m (taken from the caller). */
static void
gs_mem_close(struct group_store_mem *m)
{
	struct gs_job	*j;

	if (m->fd == -1)
		return;
	j = xcalloc(1, sizeof(*j));
	j->mem = *m;
	gs_queue(j);
	m->fd = -1;
}

/* The copier's loop: copy what is queued, tell the event loop. */
static void *
gs_main(void *arg)
{
	struct gs_job	*j;

	(void)arg;
	pthread_mutex_lock(&gs.lock);
	while (!gs.stop || !TAILQ_EMPTY(&gs.queue)) {
		if ((j = TAILQ_FIRST(&gs.queue)) == NULL) {
			pthread_cond_wait(&gs.cond, &gs.lock);
			continue;
		}
		TAILQ_REMOVE(&gs.queue, j, entry);
		if (j->done == NULL) {
			pthread_mutex_unlock(&gs.lock);
			gs_mem_free(&j->mem);
			free(j);
			pthread_mutex_lock(&gs.lock);
			continue;
		}
		gs.busy = j;
		pthread_mutex_unlock(&gs.lock);
		j->failed = gs_copy(j) == -1;
		pthread_mutex_lock(&gs.lock);
		gs.busy = NULL;
		TAILQ_INSERT_TAIL(&gs.done, j, entry);
		(void)eventfd_write(gs.efd, 1);
		pthread_cond_broadcast(&gs.cond);
	}
	pthread_mutex_unlock(&gs.lock);
	return (NULL);
}

/* A copy ended: the store has a step more, or its caller one. */
static void
gs_finish(struct gs_job *j)
{
	struct group_store_entry	*en;

	if (j->s != NULL) {
		en = &j->s->entries[j->e];
		if (!j->add)
			en->readers--;
		else if (j->failed)
			en->used = false;
		else
			en->ready = j->s->mem.paged[j->e] = true;
	}
	if (j->add) {
		ring_slot_unhold(j->ring, j->slot);
		j->done(j->arg, j->slot, GROUP_STORE_ADDED, 0);
	} else
		j->done(j->arg, j->slot, j->failed ? GROUP_STORE_NOT_COPIED :
		    GROUP_STORE_COPIED, j->replaced);
}

/*
 * The copier told the loop of copies that ended: finish them one at a
 * time, off the list (a finish may free a store, whose jobs go then).
 */
static void
gs_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gs_job	*j;
	eventfd_t	 n;

	(void)what, (void)arg;
	(void)eventfd_read(fd, &n);
	for (;;) {
		pthread_mutex_lock(&gs.lock);
		if ((j = TAILQ_FIRST(&gs.done)) != NULL)
			TAILQ_REMOVE(&gs.done, j, entry);
		pthread_mutex_unlock(&gs.lock);
		if (j == NULL)
			break;
		gs_finish(j);
		free(j);
	}
}

/* Free the stores whose lingering is over; time the next. */
static void
gs_linger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct group_store	*s, *next;
	struct timeval		 tv;
	uint64_t		 now = clock_now_ms(), first = 0;

	(void)fd, (void)what, (void)arg;
	for (s = TAILQ_FIRST(&gs_list); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (s->refs > 0)
			continue;
		if (s->linger_until_ms <= now) {
			log_info("a shared group's store of past steps "
			    "lingered its group_linger after its last member "
			    "left, and is given back");
			gs_release(s, NULL);
		} else if (first == 0 || s->linger_until_ms < first)
			first = s->linger_until_ms;
	}
	if (first != 0 && gs.ev_linger != NULL) {
		tv.tv_sec = (time_t)((first - now) / 1000);
		tv.tv_usec = (suseconds_t)((first - now) % 1000 * 1000);
		evtimer_add(gs.ev_linger, &tv);
	}
}

/* Start the copier on @base's loop, with every signal blocked. */
static void
gs_start(struct event_base *base)
{
	sigset_t	all, old;
	int		rc;

	if (gs.running)
		return;
	if ((gs.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) == -1)
		fatal("cannot make an eventfd for the group stores' copier");
	if ((gs.ev = event_new(base, gs.efd, EV_READ | EV_PERSIST,
	    gs_done_cb, NULL)) == NULL || event_add(gs.ev, NULL) == -1 ||
	    (gs.ev_linger = evtimer_new(base, gs_linger_cb, NULL)) == NULL)
		fatalx("cannot watch the group stores' copier");
	gs.base = base;
	TAILQ_INIT(&gs.queue);
	TAILQ_INIT(&gs.done);
	gs.stop = false;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&gs.thread, NULL, gs_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		fatalx("cannot start the group stores' copier: %s",
		    strerror(rc));
	gs.running = true;
}

/* Stop the copier, the daemon going (what is done is finished). */
static void
gs_stop(void)
{
	if (!gs.running)
		return;
	pthread_mutex_lock(&gs.lock);
	gs.stop = true;
	pthread_cond_broadcast(&gs.cond);
	pthread_mutex_unlock(&gs.lock);
	pthread_join(gs.thread, NULL);
	gs_done_cb(gs.efd, EV_READ, NULL);
	event_free(gs.ev);
	event_free(gs.ev_linger);
	gs.ev = gs.ev_linger = NULL;
	close(gs.efd);
	gs.efd = -1;
	gs.running = false;
}

/*
 * Drop the queued copies that @match(job, @arg) picks, wait for one under
 * way, and let the loop finish the ended ones without the store
 * (@store_goes) or drop those too (the caller goes).  A dropped copy
 * into a store lets its slot go; one out of it decodes instead.  Under no
 * lock.
 */
static void
gs_cancel(bool (*match)(const struct gs_job *, const void *), const void *arg,
    bool store_goes)
{
	struct gs_job_list	 dropped;
	struct gs_job		*j, *next;

	TAILQ_INIT(&dropped);
	pthread_mutex_lock(&gs.lock);
	while (gs.busy != NULL && match(gs.busy, arg))
		pthread_cond_wait(&gs.cond, &gs.lock);
	for (j = TAILQ_FIRST(&gs.queue); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (match(j, arg)) {
			TAILQ_REMOVE(&gs.queue, j, entry);
			TAILQ_INSERT_TAIL(&dropped, j, entry);
		}
	}
	for (j = TAILQ_FIRST(&gs.done); j != NULL; j = next) {
		next = TAILQ_NEXT(j, entry);
		if (!match(j, arg))
			continue;
		if (store_goes) {
			j->s = NULL;	/* the copy is whole: finished as such */
			continue;
		}
		TAILQ_REMOVE(&gs.done, j, entry);
		TAILQ_INSERT_TAIL(&dropped, j, entry);
	}
	pthread_mutex_unlock(&gs.lock);
	while ((j = TAILQ_FIRST(&dropped)) != NULL) {
		TAILQ_REMOVE(&dropped, j, entry);
		if (j->s != NULL) {
			if (j->add)
				j->s->entries[j->e].used = false;
			else
				j->s->entries[j->e].readers--;
		}
		if (j->add)
			ring_slot_unhold(j->ring, j->slot);
		else if (store_goes)
			j->done(j->arg, j->slot, GROUP_STORE_NOT_COPIED, 0);
		free(j);
	}
}

/* Whether copy @j is store @arg's. */
static bool
gs_job_of_store(const struct gs_job *j, const void *arg)
{
	return (j->s == arg);
}

/* Whether copy @j is for caller @arg. */
static bool
gs_job_of_caller(const struct gs_job *j, const void *arg)
{
	return (j->done != NULL && j->arg == arg);
}

/*
 * Give back @s's memory (uncharged now): into @keep, for a new store,
 * when that holds none, else the copier frees its pages next; free @s
 * too once nothing refers to it.
 */
static void
gs_release(struct group_store *s, struct group_store_mem *keep)
{
	if (s->mem.fd != -1) {
		gs_cancel(gs_job_of_store, s, true);
		if (keep != NULL && keep->fd == -1)
			*keep = s->mem;
		else
			gs_mem_close(&s->mem);
		memset(&s->mem, 0, sizeof(s->mem));
		s->mem.fd = -1;
		ring_budget_uncharge(s->budget, s->charged);
		s->charged = 0;
		free(s->entries);
		s->entries = NULL;
		s->nentries = 0;
	}
	if (s->refs == 0) {
		TAILQ_REMOVE(&gs_list, s, entry);
		free(s->key.opts.transform.pipeline);
		free(s);
	}
}

/* A store whose key matches, referenced. */
struct group_store *
group_store_find(bool (*match)(const struct group_key *, const void *),
    const void *arg)
{
	struct group_store	*s;

	TAILQ_FOREACH(s, &gs_list, entry) {
		if (s->mem.fd != -1 && match(&s->key, arg)) {
			group_store_ref(s);
			return (s);
		}
	}
	return (NULL);
}

/*
 * Give back lingering stores, oldest first, until @need bytes of @b are
 * free: a new group's store is worth more than an ended one's.  The
 * first one's memory goes to @keep, its pages made already.
 */
static void
gs_make_room(struct ring_budget *b, uint64_t need, struct group_store_mem *keep)
{
	struct group_store	*s, *next;

	for (s = TAILQ_FIRST(&gs_list); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (b->limit > b->used && b->limit - b->used >= need)
			return;
		if (s->budget == b && s->mem.fd != -1 && s->refs == 0) {
			log_info("a lingering store of %u past steps is given "
			    "back for a new group's", s->nentries);
			gs_release(s, keep);
		}
	}
}

/*
 * How steps of ring slots of @l, @rows rows each, are kept: as uint8
 * through @image's tail when it has an exact one (float32 rows of 3
 * planes), else as the slot holds them.
 */
static void
gs_form(struct group_store_form *f, const struct ring_layout *l,
    uint64_t rows, const struct image_pipeline *image)
{
	memset(f, 0, sizeof(*f));
	f->slot_bytes = l->slot_bytes;
	f->rows = rows;
	f->row_bytes = l->row_bytes;
	f->entry_bytes = l->slot_bytes;
	if (image == NULL || image_tail_init(&f->tail, image) == -1 ||
	    l->data_offset != 0 || l->row_bytes != 12 * f->tail.plane ||
	    rows * l->row_bytes > l->labels_offset)
		return;
	f->u8 = true;
	f->rest_offset = l->labels_offset;
	f->rest_at = rows * (l->row_bytes / 4);
	f->entry_bytes = (f->rest_at + l->slot_bytes - l->labels_offset +
	    4095) & ~(uint64_t)4095;
}

/*
 * Memory for a store of @n entries of @entry_bytes: @kept (a store's
 * given back for it, its pages made) when it is as large (1), else a
 * new memfd mapped (0); -1 when none.
 */
static int
gs_mem_make(struct group_store_mem *m, struct group_store_mem *kept,
    uint32_t n, uint64_t entry_bytes)
{
	uint64_t	bytes = n * entry_bytes;
	void		*map;
	bool		*paged = xcalloc(n, sizeof(*paged));
	int		 took = 0;

	if (kept->fd != -1 && kept->bytes >= bytes &&
	    ftruncate(kept->fd, (off_t)bytes) == 0) {
		/* The same form: the same entries' pages are made. */
		if (kept->entry_bytes == entry_bytes)
			memcpy(paged, kept->paged, (n < kept->npaged ? n :
			    kept->npaged) * sizeof(*paged));
		free(kept->paged);
		*m = *kept;
		kept->fd = -1;
		took = 1;
	} else {
		gs_mem_close(kept);
		m->bytes = bytes;
		if ((m->fd = memfd_create("infeed-group-store",
		    MFD_CLOEXEC)) == -1 || ftruncate(m->fd, (off_t)bytes) ==
		    -1 || (map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		    MAP_SHARED, m->fd, 0)) == MAP_FAILED) {
			if (m->fd != -1)
				close(m->fd);
			free(paged);
			return (-1);
		}
		m->map = map;
	}
	m->entry_bytes = entry_bytes;
	m->paged = paged;
	m->npaged = n;
	return (took);
}

/* A new store, if the budget has room for it now. */
struct group_store *
group_store_new(struct event_base *base, struct ring_budget *budget,
    struct group_key *key, const struct ring_layout *layout, uint64_t rows,
    const struct image_pipeline *image, uint64_t epoch_steps, uint64_t bytes,
    uint64_t linger_ms)
{
	struct group_store	*s;
	struct group_store_form	 form;
	struct group_store_mem	 kept = { .fd = -1 }, mem;
	uint64_t		 free_, n;
	int			 took;

	if (base == NULL || epoch_steps == 0)
		return (NULL);
	gs_start(base);
	gs_form(&form, layout, rows, image);
	gs_make_room(budget, bytes, &kept);
	free_ = budget->limit > budget->used ? budget->limit - budget->used :
	    0;
	if (bytes > free_)
		bytes = free_;
	n = bytes / form.entry_bytes;
	if (n > GROUP_STORE_MAX_STEPS)
		n = GROUP_STORE_MAX_STEPS;
	if (n < 2) {
		gs_mem_close(&kept);
		return (NULL);
	}
	if ((took = gs_mem_make(&mem, &kept, (uint32_t)n,
	    form.entry_bytes)) == -1) {
		log_warn("a shared group keeps no store of past steps");
		return (NULL);
	}
	s = xcalloc(1, sizeof(*s));
	s->handed = took == 1;
	s->key = *key;
	memset(key, 0, sizeof(*key));
	s->budget = budget;
	s->form = form;
	s->epoch_steps = epoch_steps;
	s->nhome = (uint32_t)n;
	s->nentries = (uint32_t)n;
	s->entries = xcalloc(n, sizeof(*s->entries));
	s->mem = mem;
	s->charged = n * form.entry_bytes;
	budget->used += s->charged;
	budget->give_back = group_store_give_back;
	s->refs = 1;
	s->linger_ms = linger_ms;
	TAILQ_INSERT_TAIL(&gs_list, s, entry);
	return (s);
}

/* Take a reference. */
void
group_store_ref(struct group_store *s)
{
	s->refs++;
}

/* Drop a reference: the last one starts the store's lingering. */
void
group_store_unref(struct group_store *s)
{
	struct timeval	tv;
	uint64_t	linger_ms;

	if (s == NULL || --s->refs > 0)
		return;
	linger_ms = s->linger_ms;
	if (linger_ms == 0 || s->mem.fd == -1) {
		gs_release(s, NULL);
		return;
	}
	s->linger_until_ms = clock_now_ms() + linger_ms;
	if (gs.ev_linger != NULL && !evtimer_pending(gs.ev_linger, NULL)) {
		tv.tv_sec = (time_t)(linger_ms / 1000);
		tv.tv_usec = (suseconds_t)(linger_ms % 1000 * 1000);
		evtimer_add(gs.ev_linger, &tv);
	}
}

/*
 * The home of step (@epoch, @step): one entry a step, so that a stream
 * of steps keeps its newest nhome (each step's home is the one of the
 * step nhome before it); -1 when that entry was given back.
 */
static int
gs_home(const struct group_store *s, uint64_t epoch, uint64_t step)
{
	uint64_t	e = (epoch * s->epoch_steps + step) % s->nhome;

	return (e < s->nentries ? (int)e : -1);
}

/* The entry of step (@epoch, @step), in use; or -1. */
static int
gs_lookup(const struct group_store *s, uint64_t epoch, uint64_t step)
{
	int	e = gs_home(s, epoch, step);

	if (e != -1 && s->entries[e].used && s->entries[e].epoch == epoch &&
	    s->entries[e].step == step)
		return (e);
	return (-1);
}

/* Queue a copy. */
static void
gs_queue(struct gs_job *j)
{
	pthread_mutex_lock(&gs.lock);
	TAILQ_INSERT_TAIL(&gs.queue, j, entry);
	pthread_cond_signal(&gs.cond);
	pthread_mutex_unlock(&gs.lock);
}

/* A copy of @s's entry @e and @ring's slot @i, for @done(@arg). */
static struct gs_job *
gs_job_new(struct group_store *s, uint32_t e, struct ring *ring, uint32_t i,
    group_store_done_cb *done, void *arg)
{
	struct gs_job	*j = xcalloc(1, sizeof(*j));

	j->s = s;
	j->form = &s->form;
	j->ring = ring;
	j->done = done;
	j->arg = arg;
	j->slot = i;
	j->e = e;
	j->mem = s->mem;
	j->buf = ring->mem->map + (uint64_t)i * s->form.slot_bytes;
	j->off = (uint64_t)e * s->form.entry_bytes;
	j->rows = s->entries[e].rows;
	return (j);
}

/* Copy a ready slot's step in. */
void
group_store_add(struct group_store *s, struct ring *ring, uint32_t i,
    uint64_t replaced, group_store_done_cb *done, void *arg)
{
	const struct ring_slot	*sl = &ring->slot[i];
	struct group_store_entry *en;
	struct gs_job		*j;
	uint32_t		 e;
	int			 home;

	if (s->mem.fd == -1 || ring->layout.slot_bytes != s->form.slot_bytes ||
	    sl->rows > s->form.rows ||
	    (home = gs_home(s, sl->epoch, sl->step)) == -1)
		return;
	e = (uint32_t)home;
	en = &s->entries[e];
	/* It has the step, or another step's copy in or out is under way. */
	if (en->used && ((en->epoch == sl->epoch && en->step == sl->step) ||
	    !en->ready || en->readers > 0))
		return;
	*en = (struct group_store_entry){ .epoch = sl->epoch,
	    .step = sl->step, .rows = sl->rows, .replaced = replaced,
	    .used = true };
	ring_slot_hold(ring, i);
	j = gs_job_new(s, e, ring, i, done, arg);
	j->add = true;
	j->page = !s->mem.paged[e];
	gs_queue(j);
}

/* Copy a step the store has into a filling slot. */
bool
group_store_serve(struct group_store *s, struct ring *ring, uint32_t i,
    group_store_done_cb *done, void *arg)
{
	const struct ring_slot	*sl = &ring->slot[i];
	struct gs_job		*j;
	int			 e;

	if (s->mem.fd == -1 || ring->layout.slot_bytes != s->form.slot_bytes ||
	    (e = gs_lookup(s, sl->epoch, sl->step)) == -1 ||
	    !s->entries[e].ready || s->entries[e].rows != sl->rows)
		return (false);
	s->entries[e].readers++;
	j = gs_job_new(s, (uint32_t)e, ring, i, done, arg);
	j->replaced = s->entries[e].replaced;
	gs_queue(j);
	return (true);
}

/* A caller goes: its copies with it. */
void
group_store_forget(struct group_store *s, void *arg)
{
	(void)s;
	if (gs.running)
		gs_cancel(gs_job_of_caller, arg, false);
}

/* Whether copy @j is into or out of an entry of store @arg's cut. */
static bool
gs_job_past_cut(const struct gs_job *j, const void *arg)
{
	const struct group_store	*s = arg;

	return (j->s == s && j->e >= s->nentries);
}

/*
 * Give back @s's entries from @cut on: copies in or out of them are
 * dropped (or waited for), their pages punched out of the memfd.
 */
static void
gs_cut(struct group_store *s, uint32_t cut)
{
	uint64_t	from = (uint64_t)cut * s->form.entry_bytes,
			len = (uint64_t)(s->nentries - cut) * s->form.entry_bytes;
	uint32_t	was = s->nentries;

	s->nentries = cut;	/* lookups miss them from now on */
	gs_cancel(gs_job_past_cut, s, true);
	memset(&s->entries[cut], 0, (was - cut) * sizeof(*s->entries));
	memset(&s->mem.paged[cut], 0, (was - cut) * sizeof(*s->mem.paged));
	if (fallocate(s->mem.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    (off_t)from, (off_t)len) == -1)
		log_warn("cannot punch a group store's steps out");
	s->charged -= len;
	ring_budget_uncharge(s->budget, len);
}

/* Stores that linger: see group-store.h. */
uint64_t
group_store_lingering(const struct ring_budget *b)
{
	const struct group_store	*s;
	uint64_t			 bytes = 0;

	TAILQ_FOREACH(s, &gs_list, entry) {
		if (s->budget == b && s->mem.fd != -1 && s->refs == 0)
			bytes += s->charged;
	}
	return (bytes);
}

/*
 * Make room in the budget: the last entries of stores, lingering ones
 * first, oldest first; a store left with fewer than 2 goes.
 */
void
group_store_give_back(struct ring_budget *b, uint64_t need)
{
	struct group_store	*s, *next;
	uint64_t		 short_, k;
	int			 pass;

	for (pass = 0; pass < 2; pass++) {
		for (s = TAILQ_FIRST(&gs_list); s != NULL; s = next) {
			next = TAILQ_NEXT(s, entry);
			if (b->limit > b->used && b->limit - b->used >= need)
				return;
			if (s->budget != b || s->mem.fd == -1 ||
			    (pass == 0 && s->refs > 0))
				continue;
			short_ = need - (b->limit > b->used ? b->limit -
			    b->used : 0);
			k = (short_ + s->form.entry_bytes - 1) /
			    s->form.entry_bytes;
			if (need != UINT64_MAX)
				log_info("a shared group's store of past steps "
				    "gives back %llu of its %u steps: "
				    "memory_budget is needed for a ring",
				    (unsigned long long)(k < s->nentries ? k :
				    s->nentries), s->nentries);
			if (need == UINT64_MAX || k + 2 > s->nentries)
				gs_release(s, NULL);
			else
				gs_cut(s, s->nentries - (uint32_t)k);
		}
	}
	if (need == UINT64_MAX)
		gs_stop();
}
