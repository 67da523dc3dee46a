/* SPDX-License-Identifier: MIT */
/*
 * infeed._infeed's leases: a Lease holds one step's slot and describes
 * its bytes, through numpy's array interface (__array_struct__) and as
 * DLPack tensors for torch; the last view gone, it gives the slot back
 * (at once, or queued for the call running on its client: a lease may die
 * on any thread).  The Step struct sequence is built here too, its
 * indices copied out of the slot only when first read.
 */

#include "_infeed.h"

/* Lease @l describes step @st's bytes, as @self's session lays them. */
void
lease_describe(ClientObject *self, LeaseObject *l,
    const struct infeed_step *st)
{
	const uint8_t	*lo, *hi, *p[3];
	uint64_t	 n[3];
	int		 i;

	l->st = *st;
	p[0] = st->data;
	n[0] = st->rows * self->sample_bytes;
	p[1] = st->label_dtype == INFEED_DTYPE_INT64 ?
	    (const uint8_t *)st->labels64 : (const uint8_t *)st->labels;
	n[1] = st->rows * infeed_dtype_size(st->label_dtype);
	p[2] = (const uint8_t *)st->indices;
	n[2] = st->rows * sizeof(uint64_t);
	lo = p[0];
	hi = p[0] + n[0];
	for (i = 1; i < 3; i++) {
		if (p[i] < lo)
			lo = p[i];
		if (p[i] + n[i] > hi)
			hi = p[i] + n[i];
	}
	l->base = (uint8_t *)(uintptr_t)lo;
	l->len = hi - lo;
	l->data_offset = p[0] - lo;
	l->labels_offset = p[1] - lo;
	l->indices_offset = p[2] - lo;
	l->readonly = !self->writable;
	l->tensors = 0;
	l->ai_len = l->len;
	l->ai_stride = 1;
	l->ai = (struct array_interface){ .two = 2, .nd = 1, .typekind = 'u',
	    .itemsize = 1, .flags = ARRAY_C_CONTIGUOUS | ARRAY_F_CONTIGUOUS |
	    ARRAY_ALIGNED | ARRAY_NOTSWAPPED | (l->readonly ? 0 :
	    ARRAY_WRITEABLE), .shape = &l->ai_len, .strides = &l->ai_stride,
	    .data = l->base, .descr = NULL };
}

/* A Lease over step @st of @self. */
PyObject *
lease_new(ClientObject *self, const struct infeed_step *st)
{
	LeaseObject	*l;

	if ((l = PyObject_New(LeaseObject, LeaseType)) == NULL)
		return (NULL);
	Py_INCREF(self);
	l->client = self;
	lease_describe(self, l, st);
	return ((PyObject *)l);
}

/* DLPack's element type of infeed dtype @dtype into @t. */
static void
dl_dtype(struct dl_tensor *t, int dtype)
{
	static const struct { uint8_t code, bits; } types[] = {
		[INFEED_DTYPE_UINT8] = { 1, 8 },
		[INFEED_DTYPE_INT32] = { 0, 32 },
		[INFEED_DTYPE_INT64] = { 0, 64 },
		[INFEED_DTYPE_FLOAT16] = { 2, 16 },
		[INFEED_DTYPE_FLOAT32] = { 2, 32 },
		[INFEED_DTYPE_FLOAT64] = { 2, 64 },
	};

	if (dtype > 0 && (size_t)dtype < sizeof(types) / sizeof(types[0])) {
		t->code = types[dtype].code;
		t->bits = types[dtype].bits;
	}
	t->lanes = 1;
}

/* A C-contiguous CPU tensor of @ndim sizes (in @shape) at @data. */
static void
dl_describe(struct dl_managed_tensor *mt, void *data, int dtype,
    int64_t *shape, int64_t *strides, int ndim)
{
	int	i;

	memset(&mt->t, 0, sizeof(mt->t));
	mt->t.data = data;
	mt->t.device_type = DL_CPU;
	mt->t.ndim = ndim;
	mt->t.shape = shape;
	mt->t.strides = strides;
	dl_dtype(&mt->t, dtype);
	for (i = ndim - 1; i >= 0; i--)
		strides[i] = i == ndim - 1 ? 1 : strides[i + 1] * shape[i + 1];
}

/*
 * A data or labels tensor is gone; the last of them drops their reference
 * to the lease (taking the GIL once a step).  Torch may free a tensor on a
 * thread without the GIL; after the interpreter is finalized the lease is
 * left alone.
 */
static void
dl_lease_deleter(struct dl_managed_tensor *mt)
{
	LeaseObject		*l = mt->manager_ctx;
	PyGILState_STATE	 g;

	if (__atomic_sub_fetch(&l->tensors, 1, __ATOMIC_ACQ_REL) > 0 ||
	    !Py_IsInitialized())
		return;
	g = PyGILState_Ensure();
	Py_DECREF(l);
	PyGILState_Release(g);
}

/* An indices tensor is gone: free its copy. */
static void
dl_indices_deleter(struct dl_managed_tensor *mt)
{
	free(mt);
}

/* A capsule that no consumer took frees its tensor (DLPack's rule). */
static void
dl_capsule_free(PyObject *capsule)
{
	struct dl_managed_tensor	*mt;

	if (!PyCapsule_IsValid(capsule, "dltensor"))
		return;		/* renamed "used_dltensor" by its consumer */
	mt = PyCapsule_GetPointer(capsule, "dltensor");
	mt->deleter(mt);
}

/* The tensor that @from_dlpack makes of @mt, which it owns from here. */
static PyObject *
dl_tensor_new(PyObject *from_dlpack, struct dl_managed_tensor *mt)
{
	PyObject	*capsule, *t;

	if ((capsule = PyCapsule_New(mt, "dltensor", dl_capsule_free)) ==
	    NULL) {
		mt->deleter(mt);
		return (NULL);
	}
	t = PyObject_CallFunctionObjArgs(from_dlpack, capsule, NULL);
	Py_DECREF(capsule);
	return (t);
}

/*
 * An int64 tensor of lease @l's indices over a copy of its own (freed with
 * the tensor): keeping the indices must not hold the slot.
 */
static PyObject *
indices_tensor(LeaseObject *l)
{
	struct dl_indices	*x;
	uint64_t		 rows = l->st.rows;

	if ((x = malloc(sizeof(*x) + rows * sizeof(uint64_t))) == NULL)
		return (PyErr_NoMemory());
	memcpy(x->idx, l->st.indices, rows * sizeof(uint64_t));
	x->shape = (int64_t)rows;
	dl_describe(&x->mt, x->idx, INFEED_DTYPE_INT64, &x->shape, &x->stride,
	    1);
	x->mt.manager_ctx = NULL;
	x->mt.deleter = dl_indices_deleter;
	return (dl_tensor_new(l->client->from_dlpack, &x->mt));
}

/* Lease @l's data or labels (@which 0 or 1) as a tensor. */
PyObject *
lease_tensor(ClientObject *self, LeaseObject *l, int which)
{
	const struct infeed_step	*st = &l->st;
	uint32_t			 i;

	l->dl_shape[which][0] = (int64_t)st->rows;
	if (which == 0) {
		for (i = 0; i < self->ndim; i++)
			l->dl_shape[0][i + 1] = (int64_t)self->sample_shape[i];
		dl_describe(&l->dl[0], l->base + l->data_offset,
		    self->data_dtype, l->dl_shape[0], l->dl_strides[0],
		    (int)self->ndim + 1);
	} else
		dl_describe(&l->dl[1], l->base + l->labels_offset,
		    st->label_dtype, l->dl_shape[1], l->dl_strides[1], 1);
	l->dl[which].manager_ctx = l;
	l->dl[which].deleter = dl_lease_deleter;
	/* Made before the step is handed out: no deleter runs meanwhile. */
	if (l->tensors++ == 0)
		Py_INCREF(l);	/* the tensors', dropped by the last one */
	return (dl_tensor_new(self->from_dlpack, &l->dl[which]));
}

/*
 * Whether a Step reads its indices at the first look (Step's "indices"
 * replaced, at import); if the type refuses it, they are copied as each
 * step is handed out.
 */
static bool	step_lazy_indices;

/*
 * A Step of tensors @data and @labels over lease @l, which it also holds
 * in place of the indices; its epoch and step are set as it is handed out
 * (step_hand_out).  The references are taken, even on failure (a NULL
 * tensor fails it).
 */
PyObject *
step_of(LeaseObject *l, PyObject *data, PyObject *labels)
{
	PyObject	*step;
	int		 i;

	if (data == NULL || labels == NULL ||
	    (step = PyStructSequence_New(StepType)) == NULL) {
		Py_XDECREF(data);
		Py_XDECREF(labels);
		return (NULL);
	}
	PyStructSequence_SetItem(step, 0, data);
	PyStructSequence_SetItem(step, 1, labels);
	Py_INCREF(l);
	PyStructSequence_SetItem(step, 2, (PyObject *)l);
	for (i = 3; i < 5; i++) {
		Py_INCREF(Py_None);
		PyStructSequence_SetItem(step, i, Py_None);
	}
	return (step);
}

/* Set @i of @step, new and not handed out yet, to @v (taken). */
static PyObject *
step_set(PyObject *step, int i, PyObject *v)
{
	PyObject	*old = PyStructSequence_GetItem(step, i);

	if (v == NULL) {
		Py_DECREF(step);
		return (NULL);
	}
	PyStructSequence_SetItem(step, i, v);
	Py_DECREF(old);
	return (step);
}

/*
 * @step of step_of(), over lease @l now holding a step of the session,
 * with that step's epoch and number (and, where Step reads its indices
 * up front, them); NULL with an error, @step dropped.
 */
PyObject *
step_hand_out(PyObject *step, LeaseObject *l)
{
	if (!step_lazy_indices &&
	    step_set(step, 2, indices_tensor(l)) == NULL)
		return (NULL);
	if (step_set(step, 3, PyLong_FromUnsignedLongLong(l->st.epoch)) ==
	    NULL)
		return (NULL);
	return (step_set(step, 4, PyLong_FromUnsignedLongLong(l->st.step)));
}

/*
 * Step.indices: a step handed out holds its lease in their place until
 * the first look copies them out of the slot, which is held meanwhile (by
 * the step's data); a Step made in Python holds its own.
 */
static PyObject *
step_indices(PyObject *step, void *closure)
{
	PyObject	*v = PyStructSequence_GetItem(step, 2), *t;

	if (Py_TYPE(v) != LeaseType) {
		Py_INCREF(v);
		return (v);
	}
	if ((t = indices_tensor((LeaseObject *)v)) == NULL)
		return (NULL);
	/* torch's call may have let another thread look first. */
	if (PyStructSequence_GetItem(step, 2) == v) {
		PyStructSequence_SetItem(step, 2, t);	/* takes t */
		Py_DECREF(v);
	} else {
		Py_DECREF(t);
		t = PyStructSequence_GetItem(step, 2);
	}
	Py_INCREF(t);
	return (t);
}

/* Step's own __reduce__, which pickles what is in place of the indices. */
static PyObject	*step_reduce_fields;

/* Step.__reduce__: the indices first, then the struct sequence's. */
static PyObject *
Step_reduce(PyObject *step, PyObject *unused)
{
	PyObject	*t;

	if ((t = step_indices(step, NULL)) == NULL)
		return (NULL);
	Py_DECREF(t);
	return (PyObject_CallFunctionObjArgs(step_reduce_fields, step, NULL));
}

static PyGetSetDef step_indices_def = {
	"indices", step_indices, NULL,
	"[rows]: their indices in the dataset", NULL
};

static PyMethodDef step_reduce_def = {
	"__reduce__", (PyCFunction)Step_reduce, METH_NOARGS, NULL
};

/*
 * Make Step read its indices at the first look: its "indices" member and
 * __reduce__ replaced by step_indices and Step_reduce.  0, or -1 with an
 * error (the type is left as it was).
 */
static int
step_type_lazy(void)
{
	PyObject	*get, *reduce;
	int		 r = -1;

	if ((step_reduce_fields = PyObject_GetAttrString(
	    (PyObject *)StepType, "__reduce__")) == NULL)
		return (-1);
	get = PyDescr_NewGetSet(StepType, &step_indices_def);
	reduce = PyDescr_NewMethod(StepType, &step_reduce_def);
	if (get != NULL && reduce != NULL &&
	    PyObject_SetAttrString((PyObject *)StepType, "__reduce__",
	    reduce) == 0) {
		if (PyObject_SetAttrString((PyObject *)StepType, "indices",
		    get) == 0)
			r = 0;
		else
			(void)PyObject_SetAttrString((PyObject *)StepType,
			    "__reduce__", step_reduce_fields);
	}
	Py_XDECREF(get);
	Py_XDECREF(reduce);
	return (r);
}

/* The Step type is new (at import): its indices lazy where it allows. */
void
step_type_ready(void)
{
	Py_CLEAR(step_reduce_fields);
	if (!(step_lazy_indices = step_type_lazy() == 0))
		PyErr_Clear();	/* the type is read-only: copies up front */
}

/*
 * The last view is gone: give the slot back now if no call is running on
 * the loader (the GIL is held, so none can start), so that infeedd refills
 * it while the trainer computes; else queue it for the running call.
 */
static void
Lease_dealloc(LeaseObject *self)
{
	ClientObject		*c = self->client;
	struct infeed_step	*grown;
	size_t			 cap;

	if (c == NULL) {	/* a spare never handed out */
		PyObject_Free(self);
		Py_DECREF(LeaseType);
		return;
	}
	if (!c->busy && c->f != NULL && c->pid == this_pid) {
		c->busy = 1;
		/* A refusal comes back with the next reply, as usual. */
		(void)infeed_release(c->f, &self->st);
		c->busy = 0;
		Py_DECREF(c);
		PyObject_Free(self);
		Py_DECREF(LeaseType);	/* each instance holds its type */
		return;
	}
	pthread_mutex_lock(&c->mu);
	if (c->ndead == c->capdead) {
		cap = c->capdead ? c->capdead * 2 : 8;
		if ((grown = realloc(c->dead, cap * sizeof(*grown))) != NULL) {
			c->dead = grown;
			c->capdead = cap;
		}
	}
	/* Without memory the slot stays held until the session ends. */
	if (c->ndead < c->capdead) {
		c->dead[c->ndead] = self->st;
		/* Seen without the lock by client_flush. */
		__atomic_store_n(&c->ndead, c->ndead + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&c->mu);
	Py_DECREF(c);
	PyObject_Free(self);
	Py_DECREF(LeaseType);
}

/* A capsule of a lease's array interface holds the lease. */
static void
lease_capsule_free(PyObject *capsule)
{
	Py_XDECREF((PyObject *)PyCapsule_GetContext(capsule));
}

/*
 * __array_struct__: numpy.asarray(lease) makes a uint8 array of the step's
 * bytes whose base is the lease.
 */
static PyObject *
lease_array_struct(LeaseObject *self)
{
	PyObject	*c;

	/* numpy takes only a capsule without a name. */
	if ((c = PyCapsule_New(&self->ai, NULL, lease_capsule_free)) == NULL)
		return (NULL);
	Py_INCREF(self);
	if (PyCapsule_SetContext(c, self) == -1) {
		Py_DECREF(self);
		Py_DECREF(c);
		return (NULL);
	}
	return (c);
}

static PyObject *
Lease_get(LeaseObject *self, void *which)
{
	switch ((intptr_t)which) {
	case 0:
		return (PyLong_FromSsize_t(self->data_offset));
	case 1:
		return (PyLong_FromSsize_t(self->labels_offset));
	case 2:
		return (PyLong_FromSsize_t(self->indices_offset));
	case 3:
		return (PyLong_FromUnsignedLongLong(self->st.rows));
	case 4:
		return (PyLong_FromUnsignedLongLong(self->st.epoch));
	case 5:
		return (PyLong_FromUnsignedLongLong(self->st.step));
	case 6:
		return (PyLong_FromUnsignedLong(self->st.slot));
	case 8:
		return (lease_array_struct(self));
	default:
		return (PyBool_FromLong(!self->readonly));
	}
}

static PyGetSetDef Lease_getset[] = {
	{ "data_offset", (getter)Lease_get, NULL, NULL, (void *)0 },
	{ "labels_offset", (getter)Lease_get, NULL, NULL, (void *)1 },
	{ "indices_offset", (getter)Lease_get, NULL, NULL, (void *)2 },
	{ "rows", (getter)Lease_get, NULL, NULL, (void *)3 },
	{ "epoch", (getter)Lease_get, NULL, NULL, (void *)4 },
	{ "step", (getter)Lease_get, NULL, NULL, (void *)5 },
	{ "slot", (getter)Lease_get, NULL, NULL, (void *)6 },
	{ "writable", (getter)Lease_get, NULL, NULL, (void *)7 },
	{ "__array_struct__", (getter)Lease_get, NULL, NULL, (void *)8 },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PyType_Slot Lease_slots[] = {
	{ Py_tp_doc, (void *)"One device step's bytes in the ring; its slot "
	  "goes back to infeedd when the last view of it is gone." },
	{ Py_tp_new, (void *)refuse_new },
	{ Py_tp_dealloc, (void *)Lease_dealloc },
	{ Py_tp_getset, Lease_getset },
	{ 0, NULL }
};

PyType_Spec Lease_spec = {
	.name = "infeed._infeed.Lease",
	.basicsize = sizeof(LeaseObject),
	.flags = Py_TPFLAGS_DEFAULT,
	.slots = Lease_slots,
};
