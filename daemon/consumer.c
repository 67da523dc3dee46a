/* SPDX-License-Identifier: MIT */
/*
 * Consumers (see consumer.h).  A Next is answered as soon as the step it
 * asks for is ready, never by polling: the producer's done callback, a
 * release or a new Next delivers.  A slow client stalls only its own
 * producer, or, in a group, those it holds back until it leaves
 * (group.h).
 */

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "consumer.h"
#include "log.h"
#include "xmalloc.h"

/* The upper bounds, in seconds, of the wait histogram's buckets. */
const double	consumer_wait_bounds[CONSUMER_WAIT_BUCKETS - 1] = {
	0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5,
};

/* A reader of nothing yet. */
void
consumer_init(struct consumer *c, const struct session_events *ev,
    void *arg, uint64_t epoch, uint64_t step, bool load_indefinitely)
{
	memset(c, 0, sizeof(*c));
	c->ev = *ev;
	c->arg = arg;
	c->state = CONSUMER_ALONE;
	c->seen = PRODUCER_IDLE;
	c->pos_epoch = epoch;
	c->pos_step = step;
	c->load_indefinitely = load_indefinitely;
}

/* Free its own producer and its message. */
void
consumer_clear(struct consumer *c)
{
	producer_free(c->own);
	c->own = NULL;
	c->from = NULL;
	free(c->failure);
	c->failure = NULL;
}

/* Move to state @to; the allowed transitions are all here. */
void
consumer_set_state(struct consumer *c, enum consumer_state to)
{
	/* A bit for each state it may come from. */
	static const uint8_t	from[] = {
		[CONSUMER_ALONE] = 0,
		[CONSUMER_MEMBER] = 1 << CONSUMER_ALONE |
		    1 << CONSUMER_REJOINED,
		[CONSUMER_LEFT] = 1 << CONSUMER_MEMBER,
		[CONSUMER_REJOINED] = 1 << CONSUMER_LEFT,
		[CONSUMER_ENDED] = 1 << CONSUMER_MEMBER,
	};

	if ((from[to] & 1 << c->state) == 0)
		fatalx("session %llu: no reader transition from %d to %d",
		    (unsigned long long)c->id, (int)c->state, (int)to);
	c->state = to;
}

/* Whether it takes its group's steps (a member, or back in as one). */
bool
consumer_in_group(const struct consumer *c)
{
	return (c->state == CONSUMER_MEMBER || c->state == CONSUMER_REJOINED);
}

/* Whether a member is out of its group: it fell behind, or was ended. */
bool
consumer_left(const struct consumer *c)
{
	return (c->state == CONSUMER_LEFT || c->state == CONSUMER_ENDED);
}

/* Its own producer finished rows: count them and answer what is ready. */
static void
consumer_done_cb(void *arg, uint64_t bytes, uint64_t replaced)
{
	struct consumer	*c = arg;

	c->bytes_read += bytes;
	c->samples_replaced += replaced;
	consumer_deliver(c);
}

/* Make its own producer, filling from its position. */
int
consumer_go_alone(struct consumer *c, const struct producer_spec *spec,
    enum errcode *code, char **cause)
{
	c->own = producer_new(spec, c->pos_epoch, c->pos_step,
	    consumer_done_cb, c, code, cause);
	if (c->own == NULL)
		return (-1);
	c->own->id = c->id;
	c->from = c->own;
	return (0);
}

/* Queue a Next, unless every slot is held or too many wait. */
int
consumer_queue(struct consumer *c, struct session_req req,
    enum errcode *code, char **cause)
{
	uint32_t	nslots, held;
	unsigned	k;

	if (c->state == CONSUMER_ENDED) {
		/* Ended by its group (group_end()): it says why. */
		nslots = 1;
		held = 0;
	} else if (consumer_in_group(c)) {
		nslots = c->from->ring->layout.slots;
		held = (uint32_t)__builtin_popcountll(c->shared_held);
	} else {
		nslots = c->own->ring->layout.slots;
		held = ring_count(c->own->ring, SLOT_HELD);
	}
	*code = ERRCODE_UNEXPECTED;
	if (held == nslots) {
		*cause = xasprintf("all %u slots are held; release a step "
		    "before asking for the next one (or attach with a larger "
		    "buffer_size)", nslots);
		return (-1);
	}
	if (c->nwaiting == CONSUMER_MAX_WAITING) {
		*cause = xasprintf("%d Next requests already wait for steps; "
		    "read their answers before sending more",
		    CONSUMER_MAX_WAITING);
		return (-1);
	}
	if (c->first_next_ms == 0)
		c->first_next_ms = clock_now_ms();
	k = (c->waiting_first + c->nwaiting) % CONSUMER_MAX_WAITING;
	c->waiting[k] = req;
	c->waiting_us[k] = clock_now_us();
	c->nwaiting++;
	return (0);
}

/* Take the oldest waiting Next. */
struct session_req
consumer_pop(struct consumer *c)
{
	struct session_req	req = c->waiting[c->waiting_first];
	double			waited;
	unsigned		b;

	waited = (double)(clock_now_us() - c->waiting_us[c->waiting_first]) /
	    1e6;
	for (b = 0; b < CONSUMER_WAIT_BUCKETS - 1 &&
	    waited > consumer_wait_bounds[b]; b++)
		;
	c->wait_counts[b]++;
	c->waiting_first = (c->waiting_first + 1) % CONSUMER_MAX_WAITING;
	c->nwaiting--;
	return (req);
}

/* Answer the oldest waiting Next with slot @i of ring @r. */
void
consumer_send_step(struct consumer *c, const struct ring *r, uint32_t i,
    uint32_t first_slot)
{
	const struct ring_slot	*sl = &r->slot[i];
	struct session_step	 st;

	memset(&st, 0, sizeof(st));
	st.slot = i + first_slot;
	st.epoch = sl->epoch;
	st.step = sl->step;
	st.rows = sl->rows;
	st.new_ring = c->new_ring;
	st.first_slot = first_slot;
	st.ring_slots = r->layout.slots;
	st.slot_bytes = r->layout.slot_bytes;
	st.ring_bytes = r->layout.ring_bytes;
	c->new_ring = false;
	c->epoch = sl->epoch;
	c->step = sl->step;
	c->steps_delivered++;
	c->last_slot = st.slot;
	c->rows_delivered += sl->rows;
	c->ev.step(c->arg, consumer_pop(c), &st);
}

/* Every step of the epoch went out: answer with EndOfData. */
static void
consumer_end_epoch(struct consumer *c)
{
	uint64_t	epoch = producer_next_epoch(c->own);

	c->ev.end_of_data(c->arg, consumer_pop(c), epoch);
	/* A Next sent after this one asks for the next epoch. */
	if (c->nwaiting > 0)
		producer_start(c->own);
}

/* Answer waiting Next requests with ready steps, in order. */
void
consumer_deliver(struct consumer *c)
{
	struct producer		*p = c->own;
	struct ring_slot	*sl;
	uint32_t		 i = 0;

	while (c->nwaiting > 0) {
		sl = producer_find_seq(p, c->deliver_seq, &i);
		switch (producer_gate(p, sl)) {
		case PRODUCER_GATE_WAIT:
			return;
		case PRODUCER_GATE_ERROR:
			c->ev.error(c->arg, consumer_pop(c),
			    p->failure_code, p->failure);
			continue;
		case PRODUCER_GATE_STEP:
			break;
		}
		if (sl == NULL && p->state == PRODUCER_EPOCH_END &&
		    c->deliver_seq == p->fill_seq) {
			consumer_end_epoch(c);
			continue;
		}
		if (sl == NULL || sl->state != SLOT_READY)
			break;
		ring_slot_hold(p->ring, i);
		c->deliver_seq++;
		producer_delivered(p, c->deliver_seq);
		consumer_send_step(c, p->ring, i, c->first_slot);
	}
	/* Caught up: its group answers from here (it may call us back). */
	if (c->nwaiting > 0 && c->at_stop != NULL && producer_at_stop(p) &&
	    c->deliver_seq == p->fill_seq) {
		c->at_stop(c->at_stop_arg);
		return;
	}
	consumer_wait_end(c);
}

/* A Next queued on its own producer: fill, and answer what is ready. */
void
consumer_next(struct consumer *c)
{
	if (c->own->state == PRODUCER_IDLE)
		producer_start(c->own);
	else
		producer_fill(c->own);
	consumer_deliver(c);
}

/* A slot of its own ring is given back (also one kept as it rejoined). */
int
consumer_release(struct consumer *c, uint32_t slot, char **cause)
{
	struct producer	*p = c->own;

	if (p == NULL || slot < c->first_slot ||
	    slot - c->first_slot >= p->ring->layout.slots ||
	    p->ring->slot[slot - c->first_slot].state != SLOT_HELD) {
		*cause = xasprintf("slot %u is not held by this session; "
		    "release only slots received in a Step, once each", slot);
		return (-1);
	}
	/* Its only reader is done with it: it takes a later step. */
	ring_slot_unhold(p->ring, slot - c->first_slot);
	ring_slot_set(p->ring, slot - c->first_slot, SLOT_FREE);
	if (consumer_in_group(c)) {
		consumer_own_drop(c);
		return (0);
	}
	producer_fill(p);
	consumer_deliver(c);
	return (0);
}

/* Back in its group, it gives up its own ring once it holds none of it. */
void
consumer_own_drop(struct consumer *c)
{
	if (c->own == NULL || ring_count(c->own->ring, SLOT_HELD) > 0)
		return;
	producer_free(c->own);
	c->own = NULL;
	consumer_set_state(c, CONSUMER_MEMBER);
}

/* Answer every waiting Next with an error. */
void
consumer_cancel(struct consumer *c, enum errcode code, const char *message)
{
	while (c->nwaiting > 0)
		c->ev.error(c->arg, consumer_pop(c), code, message);
	consumer_wait_end(c);
}

/* No Next waits any more: add the time one did to the data wait. */
void
consumer_wait_end(struct consumer *c)
{
	if (c->nwaiting > 0 || c->wait_since_us == 0)
		return;
	c->data_wait_us += clock_now_us() - c->wait_since_us;
	c->wait_since_us = 0;
}

/* Not answered at once: the client waits for data from now. */
void
consumer_wait_begin(struct consumer *c)
{
	if (c->nwaiting > 0 && c->wait_since_us == 0)
		c->wait_since_us = clock_now_us();
}

/* The data wait so far, and the time since the first Next. */
void
consumer_data_wait(const struct consumer *c, uint64_t *wait_us,
    uint64_t *active_us)
{
	uint64_t	now = clock_now_us();

	*wait_us = c->data_wait_us;
	if (c->wait_since_us != 0)
		*wait_us += now - c->wait_since_us;
	*active_us = c->first_next_ms ? now - c->first_next_ms * 1000 : 0;
	if (*wait_us > *active_us)
		*wait_us = *active_us;
}
