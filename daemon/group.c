/* SPDX-License-Identifier: MIT */
/*
 * Shared groups (see group.h): the list of groups, joining and matching,
 * the members' delivery from the group's producer, refilling what every
 * member is done with, the slack (who the group is blocked on, and for
 * how long), leaving, ending and rejoining, and the processes that keep
 * steps of an ended member's.
 */

#include <sys/syscall.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "config.h"
#include "group-store.h"
#include "group.h"
#include "log.h"
#include "sampler.h"
#include "xmalloc.h"

/*
 * A member leaves its group once the group was blocked on it (every slot
 * taken, another member waiting) for INFEED_GROUP_SLACK_MS in all within
 * the last GROUP_BLAME_WINDOW_MS: each other member then ran at 0.8 of
 * its own pace at least over that window.  A stopped member costs the
 * others the slack once; a slower one, or one that pauses, leaves as soon
 * as it has cost them that much, however often the group moved meanwhile.
 * The window is kept in buckets.
 */
#define GROUP_BLAME_WINDOW_MS	(5 * INFEED_GROUP_SLACK_MS)
#define GROUP_BLAME_BUCKET_MS	(GROUP_BLAME_WINDOW_MS / GROUP_BLAME_BUCKETS)

/*
 * How far behind its group a late member may be and catch up.  The
 * members ahead wait for it about as long as it is behind (L), once;
 * going alone instead, it halves their pace while both run.  Over a run
 * of S steps, catching up costs them less when L < S / 2, and decodes
 * S + L rather than 2 S: runs are seldom shorter than two epochs.
 */
#define GROUP_CATCH_UP_EPOCHS	1


/*
 * A process that ended a session of a group holding slots of its ring:
 * they are its to read until it exits (watched with a pidfd, else
 * kill(pid, 0) as the group settles).
 */
struct group_holder {
	struct group		*g;
	pid_t			 pid;
	uint32_t		 holds[INFEED_MAX_SLOTS];	/* per slot */
	int			 pidfd;	/* -1: none */
	struct event		*ev;	/* its exit, or NULL */
};

static TAILQ_HEAD(, group) group_list = TAILQ_HEAD_INITIALIZER(group_list);

/* What the log says of a member that left, by group_leave. */
static const char *const group_leave_why[GROUP_LEAVE_REASONS] = {
	"after holding it back for the slack within the blame window",
	"after waiting on slots that those that left or ended still hold",
};

static void	group_deliver(struct group *);
static void	group_settle(struct group *);
static void	group_slack_cb(int, short, void *);

/* The bit of group ring slot @i in a member's shared_held. */
static uint64_t
group_bit(uint32_t i)
{
	return (UINT64_C(1) << i);
}

/* Whether a session asked to share and may: see group.h. */
bool
group_may_share(const struct session_host *host,
    const struct session_options *o, const struct session_source *src)
{
	return (o->share && host->base != NULL && !src->own_ds &&
	    o->nstages == 0 && o->buffer_size <= INFEED_MAX_GROUP_SLOTS);
}

/* Whether two transforms, as asked, are the same. */
static bool
group_same_transform(const struct session_options *a,
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

/* What a session of @client, @src and @o would share: its steps' key. */
static void
group_key_fill(struct group_key *k, const struct session_host *host,
    const struct session_client *client, const struct session_source *src,
    const struct session_options *o)
{
	k->pool = host->pool;
	k->ds = src->ds;
	k->serial = src->ds->serial;
	k->uid = client->uid;
	k->gid = client->gid;
	k->opts = *o;		/* borrowed */
	k->label_dtype = src->label_dtype;
}

/*
 * Whether steps of key @k are exactly the bytes of @arg's (a key too) at
 * every step: the same dataset, user and group (a ring holds their data,
 * and only they may map it), and every option that decides a step's
 * bytes (options-schema.h's SAMPLER and RING ones).
 */
static bool
group_key_matches(const struct group_key *k, const void *arg)
{
	const struct group_key	*w = arg;

	return (k->pool == w->pool && k->ds == w->ds &&
	    k->serial == w->serial && k->uid == w->uid && k->gid == w->gid &&
	    session_options_same_steps(&k->opts, &w->opts) &&
	    k->label_dtype == w->label_dtype &&
	    group_same_transform(&k->opts, &w->opts));
}

/* Whether a session of @client, @src and @b reads @g's steps' bytes. */
static bool
group_matches(const struct group *g, const struct session_host *host,
    const struct session_client *client, const struct session_source *src,
    const struct session_options *b)
{
	struct group_key	a, w;

	group_key_fill(&a, &g->host, &g->client, &g->src, &g->opts);
	group_key_fill(&w, host, client, src, b);
	return (group_key_matches(&a, &w));
}

/*
 * The position in the group's sequence from which member @m takes the
 * group's steps (a late one's meeting point), or UINT64_MAX: none (yet:
 * a late one that has not asked for a step keeps nothing).
 */
static uint64_t
group_member_seq(const struct group_member *m)
{
	if (consumer_in_group(m->c) && !m->late)
		return (m->c->deliver_seq);
	return (m->catching ? m->meet_seq : UINT64_MAX);
}

/* The lowest position in the group's sequence a member still takes. */
static uint64_t
group_min_seq(const struct group *g)
{
	const struct group_member	*m;
	uint64_t			 min = g->p->fill_seq;

	TAILQ_FOREACH(m, &g->members, entry) {
		if (group_member_seq(m) < min)
			min = group_member_seq(m);
	}
	return (min);
}

/*
 * The oldest step of @g's sequence from which the group has every step,
 * in its ring, up to the one it fills next: with a window, the window's
 * oldest (a step a member or an ended one's process holds among them:
 * kept steps never change); without, the slowest member's (a joiner
 * that pinned an older held step would take a slot of the members'
 * buffer_size).
 */
static uint64_t
group_window_seq(const struct group *g)
{
	const struct producer	*p = g->p;
	uint64_t		 seq = group_min_seq(g);
	uint32_t		 i;

	while (g->window > 0 && seq > 0 &&
	    producer_find_seq(p, seq - 1, &i) != NULL &&
	    ring_slot_filled(p->ring, i))
		seq--;
	return (seq);
}

/*
 * Where step (@epoch, @step) is in @g's sequence: a slot it still has for
 * every member (in its window of past steps too), or the next it fills.
 * Return: 0 with *@seq, or -1 when the group has it no more or not yet.
 */
static int
group_position(const struct group *g, uint64_t epoch, uint64_t step,
    uint64_t *seq)
{
	const struct producer	*p = g->p;
	const struct ring_slot	*sl;
	uint64_t		 fe = p->fill_epoch, fs = p->fill_step, from;
	uint32_t		 i;

	if (p->state == PRODUCER_FAILED)
		return (-1);
	from = group_window_seq(g);
	for (i = 0; i < p->ring->layout.slots; i++) {
		sl = &p->ring->slot[i];
		if (sl->state != SLOT_FREE && sl->epoch == epoch &&
		    sl->step == step && sl->seq >= from) {
			*seq = sl->seq;
			return (0);
		}
	}
	if (fs >= sampler_epoch_steps(&g->src.sampler, fe)) {
		fe++;
		fs = 0;
	}
	if (fe != epoch || fs != step)
		return (-1);
	*seq = p->fill_seq;
	return (0);
}

/*
 * The step at position @seq of @g's sequence: in its ring, or the one it
 * fills next (@seq its fill_seq).
 */
static void
group_seq_step(const struct group *g, uint64_t seq, uint64_t *epoch,
    uint64_t *step)
{
	const struct producer	*p = g->p;
	const struct ring_slot	*sl;
	uint32_t		 i;

	if ((sl = producer_find_seq(p, seq, &i)) != NULL) {
		*epoch = sl->epoch;
		*step = sl->step;
		return;
	}
	*epoch = p->fill_epoch;
	*step = p->fill_step;
	if (*step >= sampler_epoch_steps(&g->src.sampler, *epoch)) {
		(*epoch)++;
		*step = 0;
	}
}

/*
 * Whether a session at step (@epoch, @step) may catch up with @g: the
 * oldest step the group still has, its meeting point (*@seq), is ahead of
 * it by GROUP_CATCH_UP_EPOCHS at most.  The members ahead wait while the
 * late member fills its steps up to there, with every worker: the least
 * they can lose (sharing the workers with it meanwhile, they would lose
 * more, for longer).
 */
static bool
group_behind(const struct group *g, uint64_t epoch, uint64_t step,
    uint64_t *seq)
{
	uint64_t	me, ms;

	if (g->p->state == PRODUCER_FAILED)
		return (false);
	*seq = group_window_seq(g);
	group_seq_step(g, *seq, &me, &ms);
	if (me < epoch || (me == epoch && ms <= step))
		return (false);
	return (me - epoch < GROUP_CATCH_UP_EPOCHS ||
	    (me - epoch == GROUP_CATCH_UP_EPOCHS && ms <= step));
}

/* A group that has a session's next step, or that it catches up with. */
struct group *
group_find(const struct session_host *host,
    const struct session_client *client, const struct session_source *src,
    const struct session_options *o, uint64_t epoch, uint64_t step,
    uint64_t *seq, bool *late)
{
	struct group	*g;

	*late = false;
	TAILQ_FOREACH(g, &group_list, entry) {
		if (group_matches(g, host, client, src, o) &&
		    group_position(g, epoch, step, seq) == 0)
			return (g);
	}
	TAILQ_FOREACH(g, &group_list, entry) {
		if (group_matches(g, host, client, src, o) &&
		    group_behind(g, epoch, step, seq)) {
			*late = true;
			return (g);
		}
	}
	return (NULL);
}

/*
 * What the workers read for the group is counted once, on its oldest
 * member that takes its steps (a lone member's counts are then a lone
 * session's; a late one counts its own catch-up); then the members get
 * what is ready.
 */
static void
group_done_cb(void *arg, uint64_t bytes, uint64_t replaced)
{
	struct group		*g = arg;
	struct group_member	*m;

	TAILQ_FOREACH(m, &g->members, entry) {
		if (consumer_in_group(m->c) && !m->late) {
			m->c->bytes_read += bytes;
			m->c->samples_replaced += replaced;
			break;
		}
	}
	group_deliver(g);
}

/*
 * The slots of the window of past steps a group of options @o on @src
 * keeps (group.h) beyond its buffer_size: group_window's bytes (auto:
 * config.h's rule), and half
 * of what is free of memory_budget at most (the rest is for the members'
 * own rings, should they leave or catch up, and for other sessions); and
 * no more than leave a member's own ring of buffer_size its slot numbers
 * after the group's (a client numbers the slots it maps below 64).
 */
static uint32_t
group_window_slots(const struct session_host *host,
    const struct session_options *o, const struct session_source *src)
{
	const struct ring_budget	*b = host->budget;
	uint64_t			 step, bytes, free, n, spare;

	if (2 * o->buffer_size >= INFEED_MAX_SLOTS)
		return (0);
	/* A slot's data, labels and indices (ring.h's layout, about). */
	step = src->sampler.cbs * (src->transform.out_sample_bytes + 16);
	bytes = host->group_window;
	if (bytes == CONFIG_GROUP_WINDOW_AUTO)
		bytes = src->transform.image ? CONFIG_GROUP_WINDOW_IMAGES : 0;
	/*
	 * Kept rings and lingering stores give way to a ring: counted as
	 * used, the last trainer's would shrink the next one's window, whose
	 * ring then misses the kept memory and maps fresh pages.
	 */
	spare = b->kept_bytes + group_store_lingering(b);
	free = b->limit + spare > b->used ? (b->limit + spare - b->used) / 2 :
	    0;
	if (free < bytes)
		bytes = free;
	n = step > 0 ? bytes / step : 0;
	if (n > INFEED_MAX_SLOTS - 2 * o->buffer_size)
		n = INFEED_MAX_SLOTS - 2 * o->buffer_size;
	return ((uint32_t)n);
}

/*
 * Group @g's store of past steps (group-store.h): a store of the same key
 * (a group that runs, or one that ended within group_linger), else a new
 * one of group_window's bytes (auto: CONFIG_GROUP_STORE_IMAGES for a
 * group that decodes images, none otherwise) if the budget has them
 * free; none while group_linger is off (auto by default: config.h).  Its producer fills the steps the store has by a copy, and adds
 * the steps it decodes.
 */
static void
group_store_take(struct group *g)
{
	struct group_key	 k;
	uint64_t		 bytes = g->host.group_window;

	if (g->host.group_linger_ms == 0)
		return;
	if (bytes == CONFIG_GROUP_WINDOW_AUTO)
		bytes = g->src.transform.image ? CONFIG_GROUP_STORE_IMAGES :
		    0;
	if (bytes == 0)
		return;
	group_key_fill(&k, &g->host, &g->client, &g->src, &g->opts);
	if ((g->store = group_store_find(group_key_matches, &k)) != NULL)
		log_info("group %llu starts on a store of %u past steps of "
		    "the same data and options", (unsigned long long)g->id,
		    g->store->nentries);
	else {
		session_options_copy(&k.opts, &g->opts);
		g->store = group_store_new(g->host.base, g->host.budget, &k,
		    &g->p->ring->layout, g->src.sampler.cbs,
		    g->src.transform.image ? &g->src.transform.pipeline :
		    NULL, sampler_epoch_steps(&g->src.sampler, 0), bytes,
		    g->host.group_linger_ms);
		if (g->store == NULL)
			free(k.opts.transform.pipeline);
		else
			log_info("group %llu keeps a store of %u past steps%s "
			    "(%llu MiB of memory_budget%s)",
			    (unsigned long long)g->id, g->store->nentries,
			    g->store->form.u8 ? ", images as uint8" : "",
			    (unsigned long long)(g->store->charged >> 20),
			    g->store->handed ? ", on the pages of a store "
			    "given back for it" : "");
	}
	if (g->store != NULL)
		producer_set_store(g->p, g->store, true);
}

/* Make a group: see group.h. */
struct group *
group_new(uint64_t id, const struct session_host *host,
    const struct session_client *client, const struct session_options *o,
    struct session_source *src, enum errcode *code, char **cause)
{
	struct group	*g;

	g = xcalloc(1, sizeof(*g));
	g->id = id;
	g->host = *host;
	g->client = *client;
	session_options_copy(&g->opts, o);
	g->src = *src;
	memset(src, 0, sizeof(*src));
	TAILQ_INIT(&g->members);
	producer_spec_init(&g->spec, host, client, o, &g->src,
	    &g->table_charged);
	g->window = group_window_slots(host, o, &g->src);
	g->spec.slots += g->window;
	g->p = producer_new(&g->spec, o->start_epoch, o->start_step,
	    group_done_cb, g, code, cause);
	if (g->p == NULL && g->window > 0) {
		/* No room for the window: a group without one. */
		free(*cause);
		*cause = NULL;
		g->spec.slots -= g->window;
		g->window = 0;
		g->p = producer_new(&g->spec, o->start_epoch, o->start_step,
		    group_done_cb, g, code, cause);
	}
	if (g->p == NULL) {
		session_source_clear(&g->src);
		ring_budget_uncharge(host->budget, g->table_charged);
		free(g->opts.transform.pipeline);
		free(g);
		return (NULL);
	}
	g->p->id = id;
	g->p->kind = "group";
	g->p->room = o->buffer_size;
	group_store_take(g);
	g->ev_slack = evtimer_new(host->base, group_slack_cb, g);
	if (g->ev_slack == NULL)
		fatalx("cannot make a timer for group %llu",
		    (unsigned long long)g->id);
	TAILQ_INSERT_TAIL(&group_list, g, entry);
	return (g);
}

/* A member joins: see group.h. */
void
group_join(struct group *g, struct group_member *m, struct consumer *c,
    const struct producer_spec *spec, pid_t pid, uint64_t seq, bool late)
{
	memset(m, 0, sizeof(*m));
	m->g = g;
	m->c = c;
	m->spec = spec;
	m->pid = pid;
	consumer_set_state(c, CONSUMER_MEMBER);
	c->from = g->p;
	c->deliver_seq = seq;
	m->late = late;
	TAILQ_INSERT_TAIL(&g->members, m, entry);
	g->nmembers++;
}

/*
 * A member asked for steps: the producer fills from now on; without
 * load_indefinitely it stops at each epoch's end (as a lone session
 * does: nothing is read for an epoch no one asked for yet) and goes on
 * with the next when a member asks for its first step.
 */
void
group_start(struct group *g)
{
	struct producer			*p = g->p;
	const struct group_member	*m;

	if (p->state == PRODUCER_EPOCH_END) {
		TAILQ_FOREACH(m, &g->members, entry) {
			if (consumer_in_group(m->c) && m->c->nwaiting > 0 &&
			    m->c->deliver_seq == p->fill_seq &&
			    m->c->seen != PRODUCER_EPOCH_END)
				break;
		}
		if (m == NULL)
			return;
		(void)producer_next_epoch(p);
	}
	if (p->state != PRODUCER_IDLE)
		return;
	producer_start(p);
}

/*
 * Whether a member still takes step @seq (a slot someone holds, a member
 * or the process of one whose session ended, is HELD in the ring and
 * never refilled: ring.c sees to that).
 */
static bool
group_pinned(const struct group *g, uint64_t seq)
{
	const struct group_member	*m;

	TAILQ_FOREACH(m, &g->members, entry) {
		if (group_member_seq(m) <= seq)
			return (true);
	}
	return (false);
}

/*
 * Whether slot @i of @g's ring is in its window of past steps: ready,
 * every member past it, none holding it.
 */
static bool
group_kept(const struct group *g, uint32_t i)
{
	const struct ring_slot	*sl = &g->p->ring->slot[i];

	return (sl->state == SLOT_READY && !group_pinned(g, sl->seq));
}

/*
 * Whether the group holds a member back: no slot it may fill, and a
 * member waiting for the step the producer would fill next.
 */
static bool
group_blocked(const struct group *g)
{
	const struct producer		*p = g->p;
	const struct group_member	*m;

	if (p->state != PRODUCER_FILLING || (p->room > 0 &&
	    ring_find(p->ring, SLOT_FREE) != -1))
		return (false);
	TAILQ_FOREACH(m, &g->members, entry) {
		if (consumer_in_group(m->c) && m->c->nwaiting > 0 &&
		    m->c->deliver_seq == p->fill_seq)
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
group_oldest(const struct group *g, uint32_t *slot, uint64_t *seq)
{
	const struct ring		*r = g->p->ring;
	const struct group_member	*m;
	uint32_t			 i, others;
	bool				 found = false;

	for (i = 0; i < r->layout.slots; i++) {
		if (!ring_slot_filled(r, i) ||
		    (found && r->slot[i].seq >= *seq) ||
		    group_kept(g, i))
			continue;
		/* Its holders, less the members in the group. */
		others = r->slot[i].holders;
		TAILQ_FOREACH(m, &g->members, entry) {
			if (consumer_in_group(m->c) && (m->c->shared_held &
			    group_bit(i)))
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
group_blame_advance(struct group_blame *b, uint64_t k)
{
	uint64_t	j;

	for (j = b->bucket + 1; j <= k &&
	    j <= b->bucket + GROUP_BLAME_BUCKETS; j++)
		b->ms[j % GROUP_BLAME_BUCKETS] = 0;
	if (k > b->bucket)
		b->bucket = k;
}

/* Add the time from @from to @to (ms, CLOCK_MONOTONIC) to @b. */
static void
group_blame_add(struct group_blame *b, uint64_t from, uint64_t to)
{
	uint64_t	k, end;

	if (to - from > GROUP_BLAME_WINDOW_MS)
		from = to - GROUP_BLAME_WINDOW_MS;
	for (; from < to; from = end) {
		k = from / GROUP_BLAME_BUCKET_MS;
		end = (k + 1) * GROUP_BLAME_BUCKET_MS;
		if (end > to)
			end = to;
		group_blame_advance(b, k);
		if (k + GROUP_BLAME_BUCKETS > b->bucket)
			b->ms[k % GROUP_BLAME_BUCKETS] +=
			    (uint32_t)(end - from);
	}
}

/* @b's time within the window that ends at @now. */
static uint64_t
group_blame_sum(struct group_blame *b, uint64_t now)
{
	uint64_t	sum = 0;
	unsigned	i;

	group_blame_advance(b, now / GROUP_BLAME_BUCKET_MS);
	for (i = 0; i < GROUP_BLAME_BUCKETS; i++)
		sum += b->ms[i];
	return (sum);
}

/* What is left of the slack after @b's time in the window ending @now. */
static uint64_t
group_blame_left(struct group_blame *b, uint64_t now)
{
	uint64_t	used = group_blame_sum(b, now);

	return (used < INFEED_GROUP_SLACK_MS ? INFEED_GROUP_SLACK_MS - used :
	    0);
}

/*
 * Whether late member @m, catching up, asks for nothing: no Next waits,
 * or its Nexts wait at its meeting point and it cannot take the group's
 * steps yet (it holds steps of its own ring).
 */
static bool
group_catcher_idle(const struct group_member *m)
{
	const struct consumer	*c = m->c;

	return (c->nwaiting == 0 || (producer_at_stop(c->own) &&
	    c->deliver_seq == c->own->fill_seq));
}

/*
 * Charge the time the group was blocked since the last look to whom it
 * was blocked on then (the members that keep its oldest slot from being
 * refilled and do not wait themselves, a late member's meeting point
 * among them; else no member: the slots those that left or ended hold),
 * see who it is blocked on now, and set the slack's timer for when the
 * first of them will have cost the others INFEED_GROUP_SLACK_MS within
 * the window.  Time the group waits for a late member that catches up
 * (its Nexts wait for its own steps) is no one's: the price of sharing
 * from then on; the group looks again every bucket meanwhile, as the
 * late member's moves on its own ring do not call here.  Called whenever
 * a member takes, releases, asks or goes, and by the timer.
 */
void
group_watch(struct group *g)
{
	struct group_member	*m;
	struct timeval		 tv;
	uint64_t		 now = clock_now_ms(), seq = 0, wait, left;
	uint32_t		 slot = 0;
	bool			 blocked, oldest, any = false, excused = false;

	if (g->charged_ms != 0 && now > g->charged_ms) {
		TAILQ_FOREACH(m, &g->members, entry) {
			if (m->blamed)
				group_blame_add(&m->blame, g->charged_ms,
				    now);
		}
		if (g->orphaned)
			group_blame_add(&g->orphan, g->charged_ms, now);
	}
	blocked = group_blocked(g);
	oldest = blocked && group_oldest(g, &slot, &seq);
	wait = INFEED_GROUP_SLACK_MS;
	TAILQ_FOREACH(m, &g->members, entry) {
		if (m->catching) {
			m->blamed = oldest && m->meet_seq <= seq &&
			    group_catcher_idle(m);
			excused |= blocked && !m->blamed;
		} else
			m->blamed = oldest && consumer_in_group(m->c) &&
			    !m->late && m->c->nwaiting == 0 &&
			    ((m->c->shared_held & group_bit(slot)) ||
			    m->c->deliver_seq <= seq);
		if (!m->blamed)
			continue;
		any = true;
		left = group_blame_left(&m->blame, now);
		if (left < wait)
			wait = left;
	}
	g->orphaned = blocked && !any && !excused;
	if (g->orphaned)
		wait = group_blame_left(&g->orphan, now);
	if (excused && wait > GROUP_BLAME_BUCKET_MS)
		wait = GROUP_BLAME_BUCKET_MS;
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
 * The position of @g's member furthest ahead (that takes the group's
 * steps), or the step the group fills next when none does.
 */
static uint64_t
group_front_seq(const struct group *g)
{
	const struct group_member	*m;
	uint64_t			 front = 0;
	bool				 any = false;

	TAILQ_FOREACH(m, &g->members, entry) {
		if (consumer_in_group(m->c) && !m->late &&
		    (!any || m->c->deliver_seq > front)) {
			front = m->c->deliver_seq;
			any = true;
		}
	}
	return (any ? front : g->p->fill_seq);
}

/*
 * Free the group ring's slots that every member is past and none holds,
 * but for the newest g->window of them (the window), and fill the free
 * slots with the next steps, buffer_size of them ahead of the member
 * furthest ahead (room for the producer), as a lone session's ring has
 * them: a window's oldest slot is freed for the next step when none is
 * free.  The members behind (a late one reading the window) hold the
 * others back only once the ring is full.
 */
static void
group_reclaim(struct group *g)
{
	struct producer		*p = g->p;
	const struct ring	*r = p->ring;
	uint64_t		 ahead = p->fill_seq - group_front_seq(g);
	uint32_t		 i, kept = 0, nfree = 0, room;
	int			 old;

	for (i = 0; i < r->layout.slots; i++) {
		if (r->slot[i].state == SLOT_FREE)
			nfree++;
		else if (group_kept(g, i))
			kept++;
	}
	room = ahead < g->opts.buffer_size ?
	    g->opts.buffer_size - (uint32_t)ahead : 0;
	while (kept > 0 && (kept > g->window || nfree < room)) {
		old = -1;
		for (i = 0; i < r->layout.slots; i++) {
			if (group_kept(g, i) && (old == -1 ||
			    r->slot[i].seq < r->slot[old].seq))
				old = (int)i;
		}
		ring_slot_set(p->ring, (uint32_t)old, SLOT_FREE);
		kept--;
		nfree++;
	}
	p->room = room;
	if (room > 0 && nfree > 0)
		producer_fill(p);
}

/*
 * Forget holder @k of @g; with @unhold, its process exited: it lets go of
 * the slots it held, which the group refills again.
 */
static void
group_holder_drop(struct group *g, size_t k, bool unhold)
{
	struct group_holder	*h = g->holders[k];
	uint32_t		 i;

	for (i = 0; unhold && i < g->p->ring->layout.slots; i++) {
		while (h->holds[i] > 0) {
			ring_slot_unhold(g->p->ring, i);
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
group_reap(struct group *g, int pidfd)
{
	struct group_holder	*h;
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
			group_holder_drop(g, i, true);
			any = true;
		} else
			i++;
	}
	return (any);
}

/* A holder's process exited. */
static void
group_holder_exit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct group_holder	*h = arg;
	struct group		*g = h->g;

	(void)what;
	if (group_reap(g, fd))
		group_settle(g);
}

/* Let go of slots @slots of @g's ring, one hold each. */
static void
group_unhold(struct group *g, uint64_t slots)
{
	uint32_t	k;

	for (k = 0; k < g->p->ring->layout.slots; k++) {
		if (slots & group_bit(k))
			ring_slot_unhold(g->p->ring, k);
	}
}

/*
 * Process @pid ended a session of @g holding slots @slots of its ring: its
 * holds in the ring stay until it exits, and the group refills them no
 * more till then.
 */
static void
group_add_holder(struct group *g, pid_t pid, uint64_t slots)
{
	struct group_holder	*h;
	size_t			 i;
	uint32_t		 k;

	for (i = 0; i < g->nholders && g->holders[i]->pid != pid; i++)
		;
	if (i == g->nholders) {
		h = xcalloc(1, sizeof(*h));
		h->g = g;
		h->pid = pid;
		h->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (h->pidfd != -1 && ((h->ev = event_new(g->host.base,
		    h->pidfd, EV_READ, group_holder_exit_cb, h)) == NULL ||
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
	for (k = 0; k < g->p->ring->layout.slots; k++) {
		if (slots & group_bit(k))
			g->holders[i]->holds[k]++;
	}
}

/*
 * Free group @g, whose last member went: those that left and hold none of
 * its slots may no longer rejoin it.
 */
static void
group_free(struct group *g)
{
	struct group_member	*m;
	pid_t			*pids;
	size_t			 n = g->nholders;
	uint32_t		 i;

	while ((m = TAILQ_FIRST(&g->members)) != NULL) {
		TAILQ_REMOVE(&g->members, m, entry);
		m->g = NULL;
		if (m->c->from == g->p)
			m->c->from = m->c->own;
	}
	TAILQ_REMOVE(&group_list, g, entry);
	event_free(g->ev_slack);
	/*
	 * A member that ended holding steps may still read them: their slots
	 * stay held, so the ring's pages stay as they are (ring_release())
	 * rather than be reused, charged until the last such member's process
	 * exits (not the first member's: the ring is the group's).
	 */
	pids = xreallocarray(NULL, n + 1, sizeof(*pids));
	for (i = 0; i < n; i++)
		pids[i] = g->holders[i]->pid;
	while (g->nholders > 0)
		group_holder_drop(g, 0, false);
	if (n > 0)
		ring_mem_hold_for(g->p->ring->mem, pids, n);
	free(pids);
	producer_free(g->p);
	group_store_unref(g->store);	/* it lingers (group_linger) */
	session_source_clear(&g->src);
	free(g->opts.transform.pipeline);
	ring_budget_uncharge(g->host.budget, g->table_charged);
	free(g->holders);
	free(g);
}

/*
 * Free @g once no member is in it and none that left holds its slots
 * (those that left are kept in its list only to rejoin it); else refill
 * what its members are done with.
 */
static void
group_settle(struct group *g)
{
	const struct group_member	*m;

	TAILQ_FOREACH(m, &g->members, entry) {
		if (consumer_in_group(m->c) || m->catching ||
		    m->c->shared_held != 0)
			break;
	}
	if (m == NULL) {
		group_free(g);
		return;
	}
	(void)group_reap(g, -1);
	group_reclaim(g);
	group_watch(g);
}

/*
 * A member's delivery: its waiting Nexts get the group's ready steps from
 * its own position on, and an EndOfData after each epoch without
 * load_indefinitely (the producer fills on into the next).
 */
static void
group_member_deliver(struct group_member *m)
{
	struct consumer		*c = m->c;
	struct producer		*p = m->g->p;
	struct ring_slot	*sl;
	uint32_t		 i = 0;

	while (c->nwaiting > 0) {
		if (c->seen == PRODUCER_EPOCH_END) {
			producer_state_move(&c->seen, PRODUCER_IDLE, c->id);
			c->ev.end_of_data(c->arg, consumer_pop(c),
			    c->pos_epoch - 1);
			if (c->nwaiting > 0) {
				producer_state_move(&c->seen,
				    PRODUCER_FILLING, c->id);
				group_start(m->g);
			}
			continue;
		}
		sl = producer_find_seq(p, c->deliver_seq, &i);
		switch (producer_gate(p, sl)) {
		case PRODUCER_GATE_WAIT:
			goto out;
		case PRODUCER_GATE_ERROR:
			c->ev.error(c->arg, consumer_pop(c), p->failure_code,
			    p->failure);
			continue;
		case PRODUCER_GATE_STEP:
			break;
		}
		if (sl == NULL || !ring_slot_filled(p->ring, i))
			break;
		ring_slot_hold(p->ring, i);
		c->shared_held |= group_bit(i);
		c->deliver_seq++;
		c->pos_epoch = sl->epoch;
		c->pos_step = sl->step + 1;
		if (c->pos_step >= sampler_epoch_steps(&m->g->src.sampler,
		    sl->epoch)) {
			c->pos_epoch++;
			c->pos_step = 0;
			if (!c->load_indefinitely)
				producer_state_move(&c->seen,
				    PRODUCER_EPOCH_END, c->id);
		}
		/* The group's ring, numbered from 0 (sent if it rejoined). */
		consumer_send_step(c, p->ring, i, 0);
	}
out:
	consumer_wait_end(c);
}

/* Answer the members' waiting Nexts with the group's ready steps. */
static void
group_deliver(struct group *g)
{
	struct group_member	*m, *next;

	for (m = TAILQ_FIRST(&g->members); m != NULL; m = next) {
		next = TAILQ_NEXT(m, entry);
		if (consumer_in_group(m->c))
			group_member_deliver(m);
	}
	producer_delivered(g->p, group_min_seq(g));
	/* The member furthest ahead moved on: the producer may fill more. */
	group_reclaim(g);
	group_watch(g);
}

static void	group_catch_up(struct group_member *);

/* A Next queued for a member in its group (a late one catches up). */
void
group_next(struct group_member *m)
{
	if (m->late) {
		group_catch_up(m);
		return;
	}
	if (m->c->seen == PRODUCER_IDLE)
		producer_state_move(&m->c->seen, PRODUCER_FILLING, m->c->id);
	group_start(m->g);
	group_member_deliver(m);
	group_reclaim(m->g);
}

/*
 * Member @m, which held the others back (or, late, cannot take the
 * steps the group is past), has no room for a ring of its own (@cause):
 * it is ended rather than freeze them.  Its Nexts get the
 * error from now on; the group's slots it holds stay its own until it
 * releases them (a kept step never changes), the others it kept free.
 */
static void
group_end(struct group_member *m, const char *cause)
{
	struct group	*g = m->g;
	struct consumer	*c = m->c;

	log_warnx("session %llu %s group %llu%s and is ended: %s",
	    (unsigned long long)c->id, m->late ? "cannot catch up with" :
	    "held", (unsigned long long)g->id, m->late ? "" : " back", cause);
	consumer_set_state(c, CONSUMER_ENDED);
	g->nmembers--;
	g->stays++;
	free(c->failure);
	if (m->late)
		c->failure = xasprintf("this session attached after the other "
		    "trainers of its shared group had gone on, and %s; attach "
		    "again once memory_budget has room (or with share=False, "
		    "which never waits on others)", cause);
	else
		c->failure = xasprintf("this session held the other trainers "
		    "of its shared group back for %d ms (stopped, or slower "
		    "than they are), and %s, so it was ended to let them go "
		    "on; release its steps and attach again (with share=False "
		    "it never waits on others, nor they on it)",
		    INFEED_GROUP_SLACK_MS, cause);
	c->failure_code = ERRCODE_RESOURCE_EXHAUSTED;
	producer_state_move(&c->seen, PRODUCER_FAILED, c->id);
	consumer_cancel(c, c->failure_code, c->failure);
}

/*
 * Member @m falls behind: it gets a producer of its own (its ring charged
 * to the budget) and fills it from its own position; what it holds of
 * the group's ring stays its own until released.  When the budget cannot
 * hold that ring, one that held the group back is ended (group_end());
 * one that waited stays in the group, which waits, and tries again after
 * the slack, as one does that still holds steps of the ring it had
 * before it rejoined.  Return: 0, or -1 when it stayed or was ended.  The
 * group counts either, by @why.
 */
static int
group_leave(struct group_member *m, enum group_leave why)
{
	struct group	*g = m->g;
	struct consumer	*c = m->c;
	enum errcode	 code;
	uint64_t	 epoch, step;
	char		*cause = NULL, *msg;

	/* Steps of the ring it had before it rejoined: one ring of its own. */
	if (c->state == CONSUMER_REJOINED) {
		log_info("session %llu falls behind group %llu but stays in "
		    "it until it releases the steps it holds of the ring it "
		    "had before it rejoined", (unsigned long long)c->id,
		    (unsigned long long)g->id);
		g->stays++;
		g->retry_ms = clock_now_ms() + INFEED_GROUP_SLACK_MS;
		return (-1);
	}
	if (consumer_go_alone(c, m->spec, &code, &cause) == -1) {
		msg = xasprintf("memory_budget has no room for a ring of its "
		    "own: %s", cause);
		free(cause);
		if (why == GROUP_LEAVE_HELD_BACK) {
			group_end(m, msg);
			free(msg);
			return (-1);
		}
		log_warnx("session %llu waits on group %llu but stays in "
		    "it: %s", (unsigned long long)c->id,
		    (unsigned long long)g->id, msg);
		free(msg);
		g->stays++;
		g->retry_ms = clock_now_ms() + INFEED_GROUP_SLACK_MS;
		return (-1);
	}
	log_info("session %llu left group %llu %s; it goes on alone from "
	    "epoch %llu step %llu", (unsigned long long)c->id,
	    (unsigned long long)g->id, group_leave_why[why],
	    (unsigned long long)c->pos_epoch, (unsigned long long)c->pos_step);
	consumer_set_state(c, CONSUMER_LEFT);
	g->nmembers--;
	g->leaves[why]++;
	m->late = false;
	c->first_slot = g->p->ring->layout.slots;
	c->new_ring = true;
	c->deliver_seq = 0;
	epoch = c->pos_epoch;
	step = c->pos_step;
	/* An EndOfData is owed for the epoch it finished (consumer.c). */
	if (c->seen == PRODUCER_EPOCH_END && c->pos_epoch > 0) {
		epoch = c->pos_epoch - 1;
		step = sampler_epoch_steps(&m->spec->src->sampler, epoch);
	}
	producer_handover(c->own, epoch, step, c->seen);
	if (g->store != NULL)
		producer_set_store(c->own, g->store, false);
	producer_fill(c->own);
	consumer_deliver(c);
	return (0);
}

/*
 * Late member @m's Nexts wait at its meeting point: the group's slack
 * timer tries it at once (a deferred call: this comes from its own
 * producer's done callback, and rejoining frees that producer).
 */
static void
group_at_stop_cb(void *arg)
{
	struct group_member	*m = arg;
	struct timeval		 now = { 0, 0 };

	evtimer_add(m->g->ev_slack, &now);
}

/*
 * Late member @m asks for its first step.  The group may have it still
 * (it takes the group's steps at once); else it fills its own ring from
 * its position up to its meeting point, the oldest step the group has
 * now, which the group keeps for it, and takes the group's steps from
 * there (group_rejoin()); or, the group being too far ahead by now
 * (group_behind()), it goes on alone.  With no room in the budget for that ring it
 * is ended: the group has none of its steps before the meeting point.
 */
static void
group_catch_up(struct group_member *m)
{
	struct group	*g = m->g;
	struct consumer	*c = m->c;
	enum errcode	 code;
	uint64_t	 seq;
	char		*cause = NULL, *msg;

	/* Still late here: its own deliver_seq (from Attach) counts for none. */
	if (group_position(g, c->pos_epoch, c->pos_step, &seq) == 0) {
		m->late = false;
		c->deliver_seq = seq;
		group_next(m);
		group_watch(g);
		return;
	}
	m->catching = group_behind(g, c->pos_epoch, c->pos_step, &seq);
	m->meet_seq = seq;
	if (m->catching)
		group_seq_step(g, seq, &m->meet_epoch, &m->meet_step);
	if (consumer_go_alone(c, m->spec, &code, &cause) == -1) {
		m->catching = false;
		msg = xasprintf("memory_budget has no room for the ring of "
		    "its own it needs to take the steps the group is past: "
		    "%s", cause);
		free(cause);
		group_end(m, msg);	/* still late: says so */
		free(msg);
		m->late = false;
		return;
	}
	m->late = false;
	if (g->store != NULL)
		producer_set_store(c->own, g->store, false);
	if (m->catching)
		log_info("session %llu catches up with group %llu from epoch "
		    "%llu step %llu to epoch %llu step %llu",
		    (unsigned long long)c->id, (unsigned long long)g->id,
		    (unsigned long long)c->pos_epoch,
		    (unsigned long long)c->pos_step,
		    (unsigned long long)m->meet_epoch,
		    (unsigned long long)m->meet_step);
	else
		log_info("session %llu is more than %d epoch(s) behind group "
		    "%llu by its first step: it goes on alone",
		    (unsigned long long)c->id, GROUP_CATCH_UP_EPOCHS,
		    (unsigned long long)g->id);
	consumer_set_state(c, CONSUMER_LEFT);
	g->nmembers--;
	/* The client maps the group's ring since Attach: its own follows. */
	c->first_slot = g->p->ring->layout.slots;
	c->new_ring = true;
	c->deliver_seq = 0;
	if (m->catching) {
		c->at_stop = group_at_stop_cb;
		c->at_stop_arg = m;
		producer_stop_at(c->own, true, m->meet_epoch, m->meet_step);
	}
	consumer_next(c);
	group_watch(g);
}

/*
 * Late member @m, catching up, asked for nothing while the group waited
 * for it, for the slack: the group keeps nothing more for it, and it goes
 * on alone from its own ring (it may still rejoin as any member that left
 * does).
 */
static void
group_catch_up_end(struct group_member *m)
{
	struct consumer	*c = m->c;

	log_info("session %llu stops catching up with group %llu %s; it "
	    "goes on alone", (unsigned long long)c->id,
	    (unsigned long long)m->g->id,
	    group_leave_why[GROUP_LEAVE_HELD_BACK]);
	m->catching = false;
	m->g->leaves[GROUP_LEAVE_HELD_BACK]++;
	c->at_stop = NULL;
	producer_stop_at(c->own, false, 0, 0);
	consumer_deliver(c);
}

/* Whether step @seq of group @g is ready in its ring. */
static bool
group_ready(const struct group *g, uint64_t seq)
{
	const struct ring	*r = g->p->ring;
	uint32_t		 i;

	for (i = 0; i < r->layout.slots; i++) {
		if (ring_slot_filled(r, i) && r->slot[i].seq == seq)
			return (true);
	}
	return (false);
}

/*
 * Left member @m caught up: the step it takes next is one its group still
 * holds for the others, or fills next.  From there it takes the group's
 * steps again (the next Step brings the group's ring back when its client
 * maps its own), and gives up its own ring once it holds none of it.
 * Only between steps (no Next waits), and holding none of the group's
 * slots (a client maps the group's ring once).  Return: whether it did.
 */
bool
group_rejoin(struct group_member *m)
{
	struct group	*g = m->g;
	struct consumer	*c = m->c;
	struct sampler	*sm = &m->spec->src->sampler;
	uint64_t	 epoch = c->pos_epoch, step = c->pos_step, seq;

	if ((c->nwaiting > 0 && !m->catching) || c->shared_held != 0 ||
	    c->own == NULL || (c->own->state != PRODUCER_FILLING &&
	    c->own->state != PRODUCER_IDLE))
		return (false);
	if (c->steps_delivered > 0) {
		epoch = c->epoch;
		step = c->step + 1;
		if (step >= sampler_epoch_steps(sm, epoch)) {
			epoch++;
			step = 0;
		}
	}
	/*
	 * Only where its first Step from the group goes out at once (a late
	 * member: at its meeting point, which the group keeps), and holding
	 * at most one step of its own ring (a for-loop's last): so it never
	 * waits in the group with steps of its own ring still held, which
	 * would keep it from leaving again.
	 */
	if (ring_count(c->own->ring, SLOT_HELD) > 1)
		return (false);
	if (m->catching) {
		if (epoch != m->meet_epoch || step != m->meet_step)
			return (false);
		seq = m->meet_seq;
	} else if (group_position(g, epoch, step, &seq) == -1 ||
	    !group_ready(g, seq))
		return (false);
	log_info("session %llu caught up with group %llu and %s it at "
	    "epoch %llu step %llu", (unsigned long long)c->id,
	    (unsigned long long)g->id, m->catching ? "joins" : "rejoins",
	    (unsigned long long)epoch, (unsigned long long)step);
	consumer_set_state(c, CONSUMER_REJOINED);
	g->nmembers++;
	g->rejoins++;	/* a late member's catch-up counts too */
	m->catching = false;
	c->at_stop = NULL;
	c->seen = c->own->state;
	c->from = g->p;
	c->deliver_seq = seq;
	c->pos_epoch = epoch;
	c->pos_step = step;
	memset(&m->blame, 0, sizeof(m->blame));
	/* Its client maps its own ring, unless no Step brought it yet. */
	c->new_ring = !c->new_ring;
	producer_retire(c->own);
	consumer_own_drop(c);
	/* A late member's Nexts that waited at its meeting point. */
	if (c->nwaiting > 0) {
		group_next(m);
		group_watch(g);
	}
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
group_slack_cb(int fd, short what, void *arg)
{
	struct group		*g = arg;
	struct group_member	*m, *next;
	uint64_t		 now = clock_now_ms();
	bool			 acted = false, stuck = false;

	(void)fd, (void)what;
	/* Late members whose Nexts wait at their meeting point. */
	for (m = TAILQ_FIRST(&g->members); m != NULL; m = next) {
		next = TAILQ_NEXT(m, entry);
		if (m->catching && m->c->nwaiting > 0 &&
		    producer_at_stop(m->c->own) &&
		    m->c->deliver_seq == m->c->own->fill_seq)
			(void)group_rejoin(m);
	}
	group_watch(g);
	if (g->charged_ms == 0 || now < g->retry_ms)
		return;
	g->retry_ms = 0;
	TAILQ_FOREACH(m, &g->members, entry) {
		if (!m->blamed || group_blame_left(&m->blame, now) > 0)
			continue;
		acted = true;
		if (m->catching)
			group_catch_up_end(m);
		else if (group_leave(m, GROUP_LEAVE_HELD_BACK) == -1 &&
		    consumer_in_group(m->c))
			stuck = true;
	}
	group_reclaim(g);
	group_watch(g);
	if (g->charged_ms != 0 && (stuck || g->orphaned) && (acted ||
	    group_blame_left(&g->orphan, now) == 0)) {
		TAILQ_FOREACH(m, &g->members, entry) {
			if (consumer_in_group(m->c) && m->c->nwaiting > 0 &&
			    m->c->deliver_seq == g->p->fill_seq)
				(void)group_leave(m, GROUP_LEAVE_WAITED);
		}
	}
	group_settle(g);
}

/* A member gives back a slot of the group's ring. */
int
group_release(struct group_member *m, uint32_t slot)
{
	struct group	*g = m->g;

	if (g == NULL || slot >= g->p->ring->layout.slots ||
	    (m->c->shared_held & group_bit(slot)) == 0)
		return (-1);
	m->c->shared_held &= ~group_bit(slot);
	ring_slot_unhold(g->p->ring, slot);
	group_settle(g);
	return (0);
}

/* A member's session ends. */
void
group_quit(struct group_member *m)
{
	struct group	*g = m->g;

	if (g == NULL)
		return;
	/*
	 * The group's slots it holds are its process's to read on (a kept
	 * step never changes): the group never refills them.  A client whose
	 * pid is not known (another pid namespace) cannot be watched: as for
	 * ring memory, it holds nothing once its session ends.
	 */
	if (m->c->shared_held != 0 && m->pid > 0)
		group_add_holder(g, m->pid, m->c->shared_held);
	else
		group_unhold(g, m->c->shared_held);
	m->c->shared_held = 0;
	m->catching = false;
	m->c->at_stop = NULL;
	TAILQ_REMOVE(&g->members, m, entry);
	if (consumer_in_group(m->c))
		g->nmembers--;
	m->g = NULL;
	group_settle(g);
}

/* After a reload: keep going if the group's dataset is unchanged. */
int
group_reload(struct group *g, const struct catalogue *cat)
{
	if (producer_reload(&g->src, g->p, cat) == -1)
		return (-1);
	g->host.cat = cat;
	return (0);
}
