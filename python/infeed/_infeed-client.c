/* SPDX-License-Identifier: MIT */
/*
 * infeed._infeed's Client and Epoch: one connection to infeedd with at
 * most one session (connect, attach to a dataset or the trainer's files,
 * detach, flush the releases of leases that died, state), and the
 * iterator of one epoch, whose next() takes a step here: a wait in slices
 * with the GIL released, so signal handlers run; a program holding every
 * slot gets SlotsHeldError instead of a wait for ever (libinfeed's state
 * says where the session is and which ring it reads).
 */

#include "_infeed.h"

#define CLIENT_SLICE_MS	100	/* signal handlers run at least this often */

/* Take the client for one call from this thread and process. */
static int
client_enter(ClientObject *self)
{
	char	msg[256];

	if (self->f == NULL) {
		raise_keyed("usage", "this loader is closed");
		return (-1);
	}
	if (self->pid != this_pid) {
		snprintf(msg, sizeof(msg), "this connection to infeedd was "
		    "made in process %d; a forked process must make its own "
		    "(create the DataLoader after the fork)", (int)self->pid);
		raise_keyed("usage", msg);
		return (-1);
	}
	if (self->busy) {
		raise_keyed("usage", "the loader is in use by another thread: "
		    "one thread at a time may take steps from it");
		return (-1);
	}
	self->busy = 1;
	return (0);
}

/* Send the Release of every step whose lease died; -1 with an error. */
static int
client_flush(ClientObject *self)
{
	struct infeed_step	st;
	int			r, failed = 0;

	/*
	 * Most calls find none: no lock taken.  One queued meanwhile by
	 * another thread is sent by the next call or wait slice.
	 */
	if (__atomic_load_n(&self->ndead, __ATOMIC_ACQUIRE) == 0)
		return (0);
	for (;;) {
		pthread_mutex_lock(&self->mu);
		if (self->ndead == 0) {
			pthread_mutex_unlock(&self->mu);
			break;
		}
		st = self->dead[--self->ndead];
		pthread_mutex_unlock(&self->mu);
		r = infeed_release(self->f, &st);
		if (r != INFEED_OK && !failed) {
			raise_infeed(self, r);
			failed = 1;
		}
	}
	return (failed ? -1 : 0);
}

static int
Client_init(ClientObject *self, PyObject *args, PyObject *kw)
{
	static char	*kwlist[] = { (char *)"socket", (char *)"client_name",
	    NULL };
	const char	*path = NULL, *name = NULL;
	struct infeed	*f;
	int		 r;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|zz", kwlist, &path,
	    &name))
		return (-1);
	if (self->f != NULL) {
		PyErr_SetString(PyExc_RuntimeError, "already connected");
		return (-1);
	}
	if ((f = infeed_new()) == NULL) {
		PyErr_NoMemory();
		return (-1);
	}
	Py_BEGIN_ALLOW_THREADS
	r = infeed_connect(f, path, name);
	Py_END_ALLOW_THREADS
	self->f = f;
	self->pid = this_pid;
	if (r != INFEED_OK) {
		raise_infeed(self, r);
		self->f = NULL;
		infeed_free(f);
		return (-1);
	}
	return (0);
}

static PyObject *
Client_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	ClientObject	*self;

	if ((self = (ClientObject *)PyType_GenericAlloc(type, 0)) == NULL)
		return (NULL);
	pthread_mutex_init(&self->mu, NULL);
	return ((PyObject *)self);
}

/* No lease is alive (each holds a reference): free everything. */
static void
Client_dealloc(ClientObject *self)
{
	PyTypeObject	*tp = Py_TYPE(self);
	freefunc	 tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	spares_clear(self);
	if (self->f != NULL && self->pid == this_pid)
		infeed_free(self->f);
	free(self->dead);
	Py_XDECREF(self->from_dlpack);
	Py_XDECREF(self->inference_mode);
	pthread_mutex_destroy(&self->mu);
	tp_free(self);
	Py_DECREF(tp);	/* an instance of a heap type holds its type */
}

static PyObject *
Client_datasets(ClientObject *self, PyObject *unused)
{
	struct infeed_dataset	*list = NULL;
	PyObject		*out = NULL, *d;
	size_t			 n = 0, i;
	int			 r;

	if (client_enter(self) == -1)
		return (NULL);
	Py_BEGIN_ALLOW_THREADS
	r = infeed_list_datasets(self->f, &list, &n);
	Py_END_ALLOW_THREADS
	self->busy = 0;
	if (r != INFEED_OK)
		return (raise_infeed(self, r));
	if ((out = PyList_New(0)) == NULL)
		goto done;
	for (i = 0; i < n; i++) {
		if ((d = dataset_dict(&list[i])) == NULL ||
		    PyList_Append(out, d) == -1) {
			Py_XDECREF(d);
			Py_CLEAR(out);
			goto done;
		}
		Py_DECREF(d);
	}
done:
	infeed_datasets_free(list, n);
	return (out);
}

/* Attach to @dataset, or to the trainer's @files when not NULL. */
static PyObject *
client_attach(ClientObject *self, const char *dataset, PyObject *opts,
    const struct infeed_files *files)
{
	struct infeed_options		o;
	struct infeed_session_info	info;
	PyObject			*keep = NULL;
	int				r;

	/* o.transform points into keep: held across the wait. */
	if (options_from(opts, &o, &keep) == -1 ||
	    client_enter(self) == -1) {
		Py_XDECREF(keep);
		return (NULL);
	}
	(void)client_flush(self);
	PyErr_Clear();	/* releases of an ended session cannot fail us */
	Py_BEGIN_ALLOW_THREADS
	if (files != NULL)
		r = infeed_attach_files(self->f, dataset, files, &o, &info);
	else
		r = infeed_attach(self->f, dataset, &o, &info);
	Py_END_ALLOW_THREADS
	Py_XDECREF(keep);
	self->busy = 0;
	spares_clear(self);	/* of the old session's ring and shape */
	if (r != INFEED_OK)
		return (raise_infeed(self, r));
	spares_setup(self, &info);
	self->data_dtype = info.data_dtype;
	self->sample_bytes = info.sample_bytes;
	self->ndim = info.ndim;
	memcpy(self->sample_shape, info.sample_shape,
	    sizeof(self->sample_shape));
	self->writable = o.copy_on_write;
	return (info_dict(&info));
}

static PyObject *
Client_attach(ClientObject *self, PyObject *args)
{
	const char	*dataset;
	PyObject	*opts;

	if (!PyArg_ParseTuple(args, "sO!", &dataset, &PyDict_Type, &opts))
		return (NULL);
	return (client_attach(self, dataset, opts, NULL));
}

/*
 * attach_files(name, options, fds, spec): attach to the trainer's own
 * files, open in this process; infeedd gets the descriptors, no path.
 */
static PyObject *
Client_attach_files(ClientObject *self, PyObject *args)
{
	struct infeed_files	 fl;
	const char		*name;
	PyObject		*opts, *spec, *v;
	int			 data_fd, labels_fd;

	if (!PyArg_ParseTuple(args, "sO!(ii)O!", &name, &PyDict_Type, &opts,
	    &data_fd, &labels_fd, &PyDict_Type, &spec))
		return (NULL);
	infeed_files_init(&fl);
	fl.data_fd = data_fd;
	fl.labels_fd = labels_fd;
	v = PyDict_GetItemString(spec, "data_npy");
	fl.data_format = v != NULL && PyObject_IsTrue(v) ? INFEED_FILE_NPY :
	    INFEED_FILE_RAW;
	if (fl.data_format == INFEED_FILE_RAW && files_raw_from(spec, &fl) ==
	    -1)
		return (NULL);
	if (labels_fd != -1) {
		v = PyDict_GetItemString(spec, "labels_npy");
		fl.labels_format = v != NULL && PyObject_IsTrue(v) ?
		    INFEED_FILE_NPY : INFEED_FILE_RAW;
		v = PyDict_GetItemString(spec, "label_dtype");
		if (fl.labels_format == INFEED_FILE_RAW && v != NULL &&
		    PyUnicode_Check(v) && (fl.label_dtype = dtype_of(v)) == 0)
			return (NULL);
	}
	return (client_attach(self, name, opts, &fl));
}

/* Milliseconds on the monotonic clock, with their fraction. */
static double
now_ms(void)
{
	return ((double)clock_now_us() / 1e3);
}

/*
 * Wait for the next step in slices, the dead leases' steps given back
 * before each (the first by the caller); the step in *@st, or a result.
 */
static int
client_wait(ClientObject *self, struct infeed_step *st, double timeout_s)
{
	double	deadline = timeout_s > 0 ? now_ms() + timeout_s * 1e3 : 0;
	char	msg[256];
	int	r, ms;

	for (;;) {
		ms = CLIENT_SLICE_MS;
		if (deadline > 0 && deadline - now_ms() < ms)
			ms = deadline - now_ms() > 0 ?
			    (int)(deadline - now_ms()) + 1 : 0;
		Py_BEGIN_ALLOW_THREADS
		r = infeed_next_timeout(self->f, st, ms);
		Py_END_ALLOW_THREADS
		if (r != INFEED_TIMEOUT)
			return (r);
		if (PyErr_CheckSignals() == -1)
			return (INFEED_TIMEOUT);
		if (deadline > 0 && now_ms() >= deadline) {
			snprintf(msg, sizeof(msg), "DataLoader timed out after "
			    "%g seconds waiting for a step (infeedd has not "
			    "filled it: see `infeedctl status`)", timeout_s);
			raise_keyed("timeout", msg);
			return (INFEED_TIMEOUT);
		}
		/* Leases that died meanwhile, on other threads. */
		if (client_flush(self) == -1)
			return (INFEED_ERR_DAEMON);
	}
}

/* libinfeed's state of @self's handle (its size is ours: no error). */
static struct infeed_state
client_state(ClientObject *self)
{
	struct infeed_state	st;

	(void)infeed_get_state(self->f, &st);
	return (st);
}

/* Raise SlotsHeldError: every one of the @slots slots is held. */
static void
client_slots_held(uint32_t slots)
{
	char	msg[512];

	snprintf(msg, sizeof(msg), "every one of the ring's %u slots is held "
	    "by a step you still reference (its data or labels, a view of "
	    "them, or the step); infeed would wait forever: drop those "
	    "references (or .clone() what you keep), or raise buffer_size",
	    slots);
	raise_keyed("slots", msg);
}

/*
 * The next step into *@st, waiting up to @timeout_s (0: for ever): 1, or
 * 0 at the end of the epoch, or -1 with an error.
 */
static int
client_take(ClientObject *self, double timeout_s, struct infeed_step *st)
{
	struct infeed_state	state;
	bool			full, member;
	int			r;

	if (client_enter(self) == -1)
		return (-1);
	if (client_flush(self) == -1) {
		self->busy = 0;
		return (-1);
	}
	if (!(state = client_state(self)).attached) {
		self->busy = 0;
		raise_keyed("usage", "not attached");
		return (-1);
	}
	/*
	 * A session holding every slot of its ring waits for ever, but a
	 * member of a shared group that holds every slot of the group's ring
	 * asks all the same: the daemon may have moved it out of the group
	 * (it tells so only in the Step that answers the Next, which brings
	 * its own ring), else it refuses the Next as unexpected.
	 */
	full = !state.next_pending && state.slots_held >= state.slots;
	member = state.group_id != 0 && !state.own_ring;
	if (full && !member) {
		self->busy = 0;
		client_slots_held(state.slots);
		return (-1);
	}
	r = client_wait(self, st, timeout_s);
	self->busy = 0;
	if (full && r == INFEED_ERR_DAEMON &&
	    infeed_daemon_code(self->f) == DAEMON_UNEXPECTED) {
		client_slots_held(state.slots);
		return (-1);
	}
	if (r == INFEED_TIMEOUT)
		return (-1);	/* a signal's exception, or the timeout */
	if (r == INFEED_END_OF_DATA)
		return (0);
	/* The daemon ended the session (a reload): libinfeed detached. */
	if (r != INFEED_OK) {
		if (!PyErr_Occurred())
			raise_infeed(self, r);
		return (-1);
	}
	return (1);
}

/* Give back step @st, which could not be handed out. */
void
client_give_back(ClientObject *self, const struct infeed_step *st)
{
	self->busy = 1;
	(void)infeed_release(self->f, st);
	self->busy = 0;
}

/*
 * One epoch's steps: the iterator of `for ... in loader`, from
 * Client.epoch().  When the epoch ends, its loader's _running goes False.
 */
typedef struct {
	PyObject_HEAD
	ClientObject		*client;
	PyObject		*loader;
	PyObject		*make;		/* make(lease) -> Step; NULL: torch */
	uint64_t		 epoch;
	double			 timeout_s;
	int			 done;
} EpochObject;

/* next(): the epoch's next step, or NULL without an error at its end. */
static PyObject *
Epoch_next(EpochObject *self)
{
	struct infeed_step	 st;
	PyObject		*lease, *step;
	int			 r;

	if (self->done)
		return (NULL);
	if ((r = client_take(self->client, self->timeout_s, &st)) == -1)
		return (NULL);
	if (r == 1 && st.epoch == self->epoch) {
		if (self->make == NULL)
			return (torch_step(self->client, &st));
		if ((lease = lease_new(self->client, &st)) == NULL) {
			client_give_back(self->client, &st);
			return (NULL);
		}
		step = PyObject_CallFunctionObjArgs(self->make, lease, NULL);
		Py_DECREF(lease);
		return (step);
	}
	/* EndOfData: the session now starts the next epoch. */
	if (r == 1)
		client_give_back(self->client, &st);
	else
		self->done = 1;
	if (PyObject_SetAttrString(self->loader, "_running", Py_False) == -1)
		return (NULL);
	if (r == 1)
		PyErr_Format(PyExc_RuntimeError, "infeed: a step of epoch %llu "
		    "came in epoch %llu", (unsigned long long)st.epoch,
		    (unsigned long long)self->epoch);
	return (NULL);	/* without an exception: StopIteration */
}

/* len(iter(loader)) is len(loader). */
static Py_ssize_t
Epoch_len(EpochObject *self)
{
	return (PyObject_Size(self->loader));
}

static void
Epoch_dealloc(EpochObject *self)
{
	PyTypeObject	*tp = Py_TYPE(self);

	Py_DECREF(self->client);
	Py_DECREF(self->loader);
	Py_XDECREF(self->make);
	PyObject_Free(self);
	Py_DECREF(tp);		/* an instance of a heap type holds its type */
}

static PyType_Slot Epoch_slots[] = {
	{ Py_tp_doc, (void *)"One epoch's steps of a DataLoader." },
	{ Py_tp_new, (void *)refuse_new },
	{ Py_tp_dealloc, (void *)Epoch_dealloc },
	{ Py_tp_iter, (void *)PyObject_SelfIter },
	{ Py_tp_iternext, (void *)Epoch_next },
	{ Py_sq_length, (void *)Epoch_len },
	{ 0, NULL }
};

PyType_Spec Epoch_spec = {
	.name = "infeed._infeed.Epoch",
	.basicsize = sizeof(EpochObject),
	.flags = Py_TPFLAGS_DEFAULT,
	.slots = Epoch_slots,
};

/*
 * epoch(loader, epoch, timeout_s, make=None) -> the iterator of @epoch's
 * steps: Steps of torch tensors (set_from_dlpack() first), or make(lease)
 * of each step's Lease.
 */
static PyObject *
Client_epoch(ClientObject *self, PyObject *args)
{
	EpochObject		*it;
	PyObject		*loader, *make = Py_None;
	unsigned long long	 epoch;
	double			 timeout_s;

	if (!PyArg_ParseTuple(args, "OKd|O", &loader, &epoch, &timeout_s,
	    &make))
		return (NULL);
	if (make == Py_None && self->from_dlpack == NULL)
		return (raise_keyed("usage", "torch steps need "
		    "set_from_dlpack() first"));
	if ((it = PyObject_New(EpochObject, EpochType)) == NULL)
		return (NULL);
	Py_INCREF(self);
	it->client = self;
	Py_INCREF(loader);
	it->loader = loader;
	it->make = NULL;
	if (make != Py_None) {
		Py_INCREF(make);
		it->make = make;
	}
	it->epoch = epoch;
	it->timeout_s = timeout_s;
	it->done = 0;
	return ((PyObject *)it);
}

/*
 * set_from_dlpack(fn, inference_mode_enabled=None): torch's from_dlpack,
 * which torch steps call, and torch.is_inference_mode_enabled (without
 * it, no tensors are made ahead).
 */
static PyObject *
Client_set_from_dlpack(ClientObject *self, PyObject *args)
{
	PyObject	*fn, *inference = Py_None;

	if (!PyArg_ParseTuple(args, "O|O", &fn, &inference))
		return (NULL);
	if (!PyCallable_Check(fn) || (inference != Py_None &&
	    !PyCallable_Check(inference))) {
		PyErr_SetString(PyExc_TypeError, "expected a callable");
		return (NULL);
	}
	Py_INCREF(fn);
	Py_XDECREF(self->from_dlpack);
	self->from_dlpack = fn;
	Py_XDECREF(self->inference_mode);
	self->inference_mode = NULL;
	if (inference != Py_None) {
		Py_INCREF(inference);
		self->inference_mode = inference;
	}
	Py_RETURN_NONE;
}

static PyObject *
Client_flush(ClientObject *self, PyObject *unused)
{
	int	r;

	if (client_enter(self) == -1)
		return (NULL);
	r = client_flush(self);
	self->busy = 0;
	if (r == -1)
		return (NULL);
	Py_RETURN_NONE;
}

static PyObject *
Client_detach(ClientObject *self, PyObject *unused)
{
	int	r;

	if (client_enter(self) == -1)
		return (NULL);
	if (!client_state(self).attached) {
		self->busy = 0;
		Py_RETURN_NONE;
	}
	(void)client_flush(self);
	PyErr_Clear();
	spares_clear(self);
	/* Leases of the old session keep their (still mapped) ring. */
	Py_BEGIN_ALLOW_THREADS
	r = infeed_detach(self->f);
	Py_END_ALLOW_THREADS
	self->busy = 0;
	if (r != INFEED_OK && r != INFEED_ERR_CLOSED)
		return (raise_infeed(self, r));
	Py_RETURN_NONE;
}

/*
 * Steps of the session still referenced: those libinfeed holds, less the
 * dead leases' whose Release waits for the next call.
 */
static PyObject *
Client_get_held(ClientObject *self, void *closure)
{
	struct infeed_state	st;
	size_t			i;

	if (self->f == NULL || self->pid != this_pid)
		return (PyLong_FromLong(0));
	st = client_state(self);
	pthread_mutex_lock(&self->mu);
	for (i = 0; i < self->ndead; i++)
		if (st.attached && self->dead[i].session == st.session_id &&
		    st.slots_held > 0)
			st.slots_held--;
	pthread_mutex_unlock(&self->mu);
	return (PyLong_FromUnsignedLong(st.slots_held));
}

/*
 * state() -> dict: where the session is, as libinfeed knows it: attached,
 * epoch and step (the step it gives next), end_of_data_owed (the epoch's
 * last step went out; its EndOfData comes first), next_pending, group_id
 * (its shared group, 0: none) and own_ring (the ring it reads is its own:
 * no group, or it left it).
 */
static PyObject *
Client_state(ClientObject *self, PyObject *unused)
{
	struct infeed_state	st;

	if (client_enter(self) == -1)
		return (NULL);
	st = client_state(self);
	self->busy = 0;
	return (Py_BuildValue("{s:O,s:K,s:K,s:O,s:O,s:K,s:O}",
	    "attached", st.attached ? Py_True : Py_False,
	    "epoch", (unsigned long long)st.next_epoch,
	    "step", (unsigned long long)st.next_step,
	    "end_of_data_owed", st.end_of_data_owed ? Py_True : Py_False,
	    "next_pending", st.next_pending ? Py_True : Py_False,
	    "group_id", (unsigned long long)st.group_id,
	    "own_ring", st.own_ring ? Py_True : Py_False));
}

static PyMethodDef Client_methods[] = {
	{ "datasets", (PyCFunction)Client_datasets, METH_NOARGS,
	  "datasets() -> list of dicts: the daemon's catalogue" },
	{ "attach", (PyCFunction)Client_attach, METH_VARARGS,
	  "attach(dataset, options: dict) -> dict: start a session" },
	{ "attach_files", (PyCFunction)Client_attach_files, METH_VARARGS,
	  "attach_files(name, options, (data_fd, labels_fd), spec) -> dict" },
	{ "epoch", (PyCFunction)Client_epoch, METH_VARARGS,
	  "epoch(loader, epoch, timeout_s, make=None) -> iterator of the "
	  "epoch's Steps (torch, or make(lease))" },
	{ "set_from_dlpack", (PyCFunction)Client_set_from_dlpack,
	  METH_VARARGS, "set_from_dlpack(fn, inference_mode_enabled=None): "
	  "torch.utils.dlpack.from_dlpack and torch.is_inference_mode_enabled,"
	  " for torch steps" },
	{ "state", (PyCFunction)Client_state, METH_NOARGS,
	  "state() -> dict: where the session is (libinfeed's)" },
	{ "flush", (PyCFunction)Client_flush, METH_NOARGS,
	  "flush(): send the releases of dead leases now" },
	{ "detach", (PyCFunction)Client_detach, METH_NOARGS,
	  "detach(): end the session; leases stay readable" },
	{ NULL, NULL, 0, NULL }
};

static PyGetSetDef Client_getset[] = {
	{ "held", (getter)Client_get_held, NULL,
	  "steps of the session still referenced", NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

static PyType_Slot Client_slots[] = {
	{ Py_tp_doc, (void *)"A connection to infeedd with at most one "
	  "session." },
	{ Py_tp_new, (void *)Client_new },
	{ Py_tp_init, (void *)Client_init },
	{ Py_tp_dealloc, (void *)Client_dealloc },
	{ Py_tp_methods, Client_methods },
	{ Py_tp_getset, Client_getset },
	{ 0, NULL }
};

PyType_Spec Client_spec = {
	.name = "infeed._infeed.Client",
	.basicsize = sizeof(ClientObject),
	.flags = Py_TPFLAGS_DEFAULT,
	.slots = Client_slots,
};
