/* SPDX-License-Identifier: MIT */
/*
 * infeed._infeed's spares: torch Steps made ahead.  Each slot's place in
 * the ring the session reads is known from the first step seen in it; a full step in that
 * slot gets a set of tensors made for it beforehand, fresh (never handed
 * out before), so the per-step path touches as little as it can
 * (docs/performance.md).
 */

#include "_infeed.h"

/* Drop every spare and the table (a new session, the end of one). */
void
spares_clear(ClientObject *self)
{
	struct spare_slot	*table = self->spare;
	uint32_t		 i, j;

	self->spare = NULL;
	for (i = 0; table != NULL && i < self->nspare_slots; i++)
		for (j = 0; j < table[i].n; j++)
			Py_DECREF(table[i].s[j].step);
	free(table);
	self->nspare_slots = 0;
}

/*
 * A table of spares for the session @info describes: as many per slot as
 * SPARES_MAX allows; none (and no table) without memory.
 */
void
spares_setup(ClientObject *self, const struct infeed_session_info *info)
{
	uint64_t	per = SPARES_MAX / MAX(info->slots, 1);

	per = MIN(MAX(per, 1), SPARES_PER_SLOT);
	if (info->slots == 0 ||
	    (self->spare = calloc(info->slots, sizeof(*self->spare))) == NULL)
		return;
	self->nspare_slots = info->slots;
	self->spares_per_slot = (uint32_t)per;
	self->full_rows = info->combined_batch_size;
}

/* Make a spare for slot @sp into @out; -1 with an error. */
static int
spare_make(ClientObject *self, const struct spare_slot *sp,
    struct spare *out)
{
	struct infeed_step	 st;
	LeaseObject		*l;
	PyObject		*data;

	memset(&st, 0, sizeof(st));
	st.struct_size = sizeof(st);
	st.rows = self->full_rows;
	st.data = sp->data;
	st.label_dtype = sp->label_dtype;
	if (sp->label_dtype == INFEED_DTYPE_INT64)
		st.labels64 = (const int64_t *)(const void *)sp->labels;
	else
		st.labels = (const int32_t *)(const void *)sp->labels;
	st.indices = sp->indices;
	if ((l = PyObject_New(LeaseObject, LeaseType)) == NULL)
		return (-1);
	l->client = NULL;	/* until handed out */
	lease_describe(self, l, &st);
	out->lease = l;
	data = lease_tensor(self, l, 0);
	out->step = step_of(l, data, data != NULL ? lease_tensor(self, l, 1) :
	    NULL);
	Py_DECREF(l);		/* the step and its tensors hold it */
	return (out->step != NULL ? 0 : -1);
}

/*
 * Top up the spares of every slot whose place is known; -1 with an
 * error.  None while torch's inference mode is on: a tensor made in it is
 * an inference tensor, which autograd refuses outside it.
 */
static int
spares_fill(ClientObject *self)
{
	struct spare_slot	*sp;
	PyObject		*on;
	uint32_t		 i;
	int			 inference;

	if (self->inference_mode == NULL)
		return (0);
	if ((on = PyObject_CallObject(self->inference_mode, NULL)) == NULL)
		return (-1);
	inference = PyObject_IsTrue(on);
	Py_DECREF(on);
	if (inference != 0)
		return (inference);
	for (i = 0; i < self->nspare_slots; i++) {
		sp = &self->spare[i];
		while (sp->data != NULL && sp->n < self->spares_per_slot) {
			if (spare_make(self, sp, &sp->s[sp->n]) == -1)
				return (-1);
			sp->n++;
		}
	}
	return (0);
}

/*
 * The spares' slot of step @st, whose place is recorded from it (a
 * reconnect, or a group member's move to a ring of its own and back, maps
 * a new ring: the slot's old spares go); NULL when the step is not a
 * full one, or there are no spares.  The ring's slots are numbered from
 * its first_slot (a member's own ring's follow the group's).
 */
static struct spare_slot *
spare_slot_of(ClientObject *self, const struct infeed_step *st)
{
	struct infeed_state	 state;
	struct spare_slot	*sp;
	const uint8_t		*labels;
	uint32_t		 i, j;

	(void)infeed_get_state(self->f, &state);
	i = st->slot - state.first_slot;
	if (st->slot < state.first_slot || i >= self->nspare_slots ||
	    st->rows != self->full_rows)
		return (NULL);
	sp = &self->spare[i];
	labels = st->label_dtype == INFEED_DTYPE_INT64 ?
	    (const uint8_t *)st->labels64 : (const uint8_t *)st->labels;
	if (sp->data == st->data && sp->labels == labels &&
	    sp->indices == st->indices && sp->label_dtype == st->label_dtype)
		return (sp);
	for (j = 0; j < sp->n; j++)
		Py_DECREF(sp->s[j].step);
	sp->n = 0;
	sp->data = st->data;
	sp->labels = labels;
	sp->indices = st->indices;
	sp->label_dtype = st->label_dtype;
	return (sp);
}

/*
 * Step @st as a Step of torch tensors, or NULL with an error (the step
 * given back).  A full step gets a spare of its slot (all slots are topped
 * up when it has none); another, tensors made for it.
 */
PyObject *
torch_step(ClientObject *self, const struct infeed_step *st)
{
	struct spare_slot	*sp;
	struct spare		*s;
	LeaseObject		*l;
	PyObject		*data, *step;

	/* torch's calls may let another thread in: not to the spares. */
	self->busy = 1;
	if ((sp = spare_slot_of(self, st)) != NULL && sp->n == 0 &&
	    spares_fill(self) == -1) {
		(void)infeed_release(self->f, st);
		self->busy = 0;
		return (NULL);
	}
	self->busy = 0;
	if (sp != NULL && sp->n > 0) {
		s = &sp->s[--sp->n];
		l = s->lease;
		l->st = *st;
		Py_INCREF(self);
		l->client = self;	/* its death releases the step now */
		return (step_hand_out(s->step, l));
	}
	if ((l = (LeaseObject *)lease_new(self, st)) == NULL) {
		client_give_back(self, st);
		return (NULL);
	}
	data = lease_tensor(self, l, 0);
	step = step_of(l, data, data != NULL ? lease_tensor(self, l, 1) :
	    NULL);
	Py_DECREF(l);		/* the step and its tensors hold it now */
	return (step != NULL ? step_hand_out(step, l) : NULL);
}
