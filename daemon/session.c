/* SPDX-License-Identifier: MIT */
/*
 * Sessions (see session.h): the front peer.c calls.  A session is made of
 * a checked source (session-check.h), one reader (consumer.h) and the
 * stream it reads: a producer of its own (producer.h), or its group's
 * (group.h), of which it is then a member.  Calls go down: session ->
 * group -> consumer -> producer -> pool and ring; this file only picks
 * which of them a request goes to.
 */

#include <sys/random.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "consumer.h"
#include "group.h"
#include "log.h"
#include "packings.h"
#include "producer.h"
#include "sampler.h"
#include "session.h"
#include "transform.h"
#include "xmalloc.h"

struct session {
	struct session_host	 host;
	struct session_client	 client;
	uint64_t		 id;
	struct session_source	 src;		/* its data and sampler */
	uint64_t		 table_charged;	/* its table's, to the budget */
	struct session_options	 opts;		/* a copy, for status */
	char			*packing;	/* its dataset's, if on demand */
	struct producer_spec	 spec;	/* its own producer's, alone or left */
	struct consumer		 rd;	/* its reader: position, Nexts, slots */
	struct group_member	 gm;	/* gm.g NULL: in no group (any more) */
};

_Static_assert((int)SESSION_LEAVE_HELD_BACK == (int)GROUP_LEAVE_HELD_BACK &&
    (int)SESSION_LEAVE_WAITED == (int)GROUP_LEAVE_WAITED &&
    (int)SESSION_LEAVE_REASONS == (int)GROUP_LEAVE_REASONS,
    "session_leave is group_leave");

/* The metrics' reason labels, by session_leave. */
const char *const session_leave_names[SESSION_LEAVE_REASONS] = {
	"held_back", "waited",
};

static uint64_t	session_next_id;	/* 0: not seeded yet */

/*
 * A new session id.  Ids never repeat across daemon instances (a client
 * resuming after a restart tells its old steps from the new session's by
 * the id): they start at a random multiple of 2^21, below 2^53 so that
 * every JSON reader keeps them exact.  Groups draw theirs here too.
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

/*
 * Join a group that has @s's next step, or make one: its producer is of
 * @s's Attach @a, checked again into a source of the group's own (it
 * outlives any member), loading indefinitely if @a does, charged once.
 */
static int
session_join(struct session *s, const struct session_attach *a,
    struct session_checked *chk, enum errcode *code, char **cause)
{
	struct session_attach	 pa;
	struct session_source	 src;
	struct group		*g;
	uint64_t		 seq = 0;
	bool			 late = false;

	g = group_find(&s->host, &s->client, &s->src, &s->opts,
	    s->rd.pos_epoch, s->rd.pos_step, &seq, &late);
	if (g == NULL) {
		pa = *a;
		pa.options.share = false;
		pa.options.early_preload = false;
		memset(&src, 0, sizeof(src));
		if (session_check(&s->host, &s->client, &pa, NULL, 0, chk,
		    &src, code, cause) == -1) {
			session_source_clear(&src);
			return (-1);
		}
		pa.options.seq_len = 0;		/* as s->opts: src.ds's own */
		g = group_new(session_new_id(), &s->host, &s->client,
		    &pa.options, &src, code, cause);
		if (g == NULL)
			return (-1);
		log_info("client %llu: group %llu on '%s': %u slots of %llu "
		    "KiB", (unsigned long long)s->client.peer_id,
		    (unsigned long long)g->id, g->src.ds->name,
		    g->p->ring->layout.slots,
		    (unsigned long long)(g->p->ring->layout.slot_bytes >> 10));
		seq = 0;
	}
	group_join(g, &s->gm, &s->rd, &s->spec, s->client.pid, seq, late);
	return (0);
}

/*
 * Make the session an Attach asks for: check it (with what a helper
 * thread checked already, @chk), then make its own producer or join a
 * group.  A removed ring's memory that workers still write is not waited
 * for here: session_attach_begin() waits for it on the loop.
 */
struct session *
session_new(const struct session_host *host,
    const struct session_client *client, const struct session_attach *a,
    int *fds, size_t nfds, struct session_checked *chk,
    const struct session_events *ev, void *arg, enum errcode *code,
    char **cause)
{
	const struct session_options	*o = &a->options;
	const struct ring		*view;
	struct session			*s;

	s = xcalloc(1, sizeof(*s));
	s->host = *host;
	s->client = *client;
	consumer_init(&s->rd, ev, arg, o->start_epoch, o->start_step,
	    o->load_indefinitely);
	if (session_check(host, client, a, fds, nfds, chk, &s->src, code,
	    cause) == -1)
		goto fail;
	session_options_copy(&s->opts, o);
	/*
	 * The seq_len asked for is src.ds's own now (session_check() chose
	 * the section): 0, so that a session that named it and one that
	 * left it unset, or named that section, share a group.
	 */
	s->opts.seq_len = 0;
	producer_spec_init(&s->spec, host, client, o, &s->src,
	    &s->table_charged);
	if (group_may_share(host, &s->opts, &s->src)) {
		if (session_join(s, a, chk, code, cause) == -1)
			goto fail;
	} else if (consumer_go_alone(&s->rd, &s->spec, code, cause) == -1)
		goto fail;
	s->id = session_new_id();
	s->rd.id = s->id;
	if (s->rd.own != NULL)
		s->rd.own->id = s->id;
	view = s->rd.from->ring;
	log_info("client %llu: session %llu on %s'%s': combined batch %llu, "
	    "%llu steps per epoch, %u slots of %llu KiB, shuffle %s, "
	    "process %u of %u", (unsigned long long)client->peer_id,
	    (unsigned long long)s->id,
	    s->src.own_ds ? "the client's files " : "", s->src.ds->name,
	    (unsigned long long)s->src.sampler.cbs,
	    (unsigned long long)s->src.sampler.steps_per_epoch,
	    view->layout.slots,
	    (unsigned long long)(view->layout.slot_bytes >> 10),
	    o->shuffle ? "on" : "off", o->process_id, o->process_count);
	if (o->nstages > 0)
		log_info("client %llu: session %llu resumes epoch %llu after "
		    "%zu stages of other process counts: %llu steps left",
		    (unsigned long long)client->peer_id,
		    (unsigned long long)s->id,
		    (unsigned long long)o->start_epoch, o->nstages,
		    (unsigned long long)sampler_epoch_steps(&s->src.sampler,
		    o->start_epoch));
	if (s->gm.g != NULL)
		log_info("client %llu: session %llu shares group %llu (%u "
		    "members)%s", (unsigned long long)client->peer_id,
		    (unsigned long long)s->id,
		    (unsigned long long)s->gm.g->id, s->gm.g->nmembers,
		    s->gm.late ? ", behind it: it catches up first" : "");
	/* Fill the ring now; the first Step still waits for the first Next. */
	if (o->early_preload && s->gm.g != NULL)
		group_start(s->gm.g);
	else if (o->early_preload)
		producer_start(s->rd.own);
	/* A packing made for a seq_len lives while sessions use it. */
	if (!s->src.own_ds && packings_use(host->packs, s->src.ds->name, 1))
		s->packing = xstrdup(s->src.ds->name);
	return (s);

fail:
	session_free(s);
	return (NULL);
}

/* Free a session: its seat in its group, its reader, its source. */
void
session_free(struct session *s)
{
	if (s == NULL)
		return;
	group_quit(&s->gm);
	consumer_clear(&s->rd);
	if (s->packing != NULL)
		packings_use(s->host.packs, s->packing, -1);
	free(s->packing);
	session_source_clear(&s->src);
	free(s->opts.transform.pipeline);
	ring_budget_uncharge(s->host.budget, s->table_charged);
	free(s);
}

/* Next: start filling if needed, answer when the next step is ready. */
int
session_next(struct session *s, struct session_req req,
    enum errcode *code, char **cause)
{
	struct consumer	*c = &s->rd;
	bool		 ended = c->state == CONSUMER_ENDED;

	if (c->state == CONSUMER_LEFT && s->gm.g != NULL)
		(void)group_rejoin(&s->gm);
	if (consumer_queue(c, req, code, cause) == -1)
		return (-1);
	if (ended) {
		/* Ended by its group: it says why. */
		consumer_cancel(c, c->failure_code, c->failure);
		return (0);
	}
	if (consumer_in_group(c))
		group_next(&s->gm);
	else
		consumer_next(c);
	consumer_wait_begin(c);
	if (consumer_in_group(c))
		group_watch(s->gm.g);
	return (0);
}

/* Release: the client is done with a slot, of its group's ring or its own. */
int
session_release(struct session *s, uint32_t slot, char **cause)
{
	if (group_release(&s->gm, slot) == 0)
		return (0);
	return (consumer_release(&s->rd, slot, cause));
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

	if (s->rd.steps_delivered == 0 ||
	    s->rd.steps_delivered != received + 1)
		return;
	if (session_release(s, s->rd.last_slot, &cause) == 0)
		log_debug("session %llu: slot %u, sent as the client "
		    "detached, released unread", (unsigned long long)s->id,
		    s->rd.last_slot);
	free(cause);
}

/* Answer every waiting Next with an error. */
void
session_cancel(struct session *s, enum errcode code, const char *message)
{
	consumer_cancel(&s->rd, code, message);
}

/* After a reload: keep going if our dataset is unchanged, else -1. */
int
session_reload(struct session *s, const struct catalogue *cat)
{
	/* The client's files are no part of the catalogue. */
	if (s->src.own_ds)
		return (0);
	if (s->gm.g != NULL && group_reload(s->gm.g, cat) == -1)
		return (-1);
	if (producer_reload(&s->src, s->rd.own, cat) == -1)
		return (-1);
	s->host.cat = cat;
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
	/* The ring the client maps now: its group's, or its own. */
	info->layout = s->rd.from->ring->layout;
	info->group_id = s->gm.g != NULL ? s->gm.g->id : 0;
	info->sample_dims = s->src.out_dims;
	info->sample_shape = s->src.out_shape;
	info->data_dtype = transform_out_dtype(&s->src.transform, s->src.ds);
	info->sample_bytes = s->src.transform.out_sample_bytes;
}

/* A member's group, and its ring's slots, for the stats. */
static void
session_group_report(const struct session *s, struct session_report *r)
{
	const struct consumer	*c = &s->rd;
	const struct group	*g = s->gm.g;
	const struct producer	*p;
	uint32_t		 i;

	r->group_id = 0;
	r->group_members = 0;
	r->group_steps_filled = 0;
	r->group_bytes_read = 0;
	r->group_left = consumer_left(c);
	memset(r->group_leaves, 0, sizeof(r->group_leaves));
	r->group_stays = r->group_rejoins = 0;
	/*
	 * One that left shows its group while it holds slots there, or
	 * catches up with it.
	 */
	if (g == NULL || (consumer_left(c) && c->shared_held == 0 &&
	    !s->gm.catching))
		return;
	p = g->p;
	r->group_id = g->id;
	for (i = 0; i < SESSION_LEAVE_REASONS; i++)
		r->group_leaves[i] = g->leaves[i];
	r->group_stays = g->stays;
	r->group_rejoins = g->rejoins;
	r->group_members = g->nmembers;
	r->group_steps_filled = p->fill_seq;
	r->group_bytes_read = p->bytes_read;
	if (consumer_left(c))
		return;
	r->slots_ready = 0;
	for (i = 0; i < p->ring->layout.slots; i++) {
		if (ring_slot_filled(p->ring, i) &&
		    p->ring->slot[i].seq >= c->deliver_seq)
			r->slots_ready++;
	}
	r->slots_held = (uint32_t)__builtin_popcountll(c->shared_held);
	r->slots = p->ring->layout.slots;
}

/* What the session is and did so far, for the stats. */
void
session_report(const struct session *s, struct session_report *r)
{
	const struct consumer	*c = &s->rd;
	uint64_t		 elapsed;

	r->id = s->id;
	r->dataset = s->src.ds->name;
	r->own_files = s->src.own_ds;
	r->options = &s->opts;
	r->client_pid = s->client.pid;
	r->client_uid = s->client.uid;
	r->epoch = c->epoch;
	r->step = c->step;
	session_group_report(s, r);
	if (c->state == CONSUMER_ENDED) {
		/* Ended by its group. */
		r->slots_ready = r->slots_held = r->slots = 0;
	} else if (!consumer_in_group(c)) {
		r->slots_ready = ring_count(c->own->ring, SLOT_READY);
		r->slots_held = ring_count(c->own->ring, SLOT_HELD);
		r->slots = c->own->ring->layout.slots;
	}
	r->steps = c->steps_delivered;
	r->rows = c->rows_delivered;
	r->bytes_read = c->bytes_read;
	r->samples_replaced = c->samples_replaced;
	elapsed = c->first_next_ms ? clock_now_ms() - c->first_next_ms : 0;
	r->items_per_s = elapsed ? (double)c->rows_delivered * 1000.0 /
	    (double)elapsed : 0.0;
	consumer_data_wait(c, &r->data_wait_us, &r->active_us);
	memcpy(r->wait_counts, c->wait_counts, sizeof(r->wait_counts));
}

/* A read-only descriptor of the ring for the client. */
int
session_ring_fd(const struct session *s)
{
	return (ring_readonly_fd(s->rd.from->ring));
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
