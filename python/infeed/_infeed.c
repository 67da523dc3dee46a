/* SPDX-License-Identifier: MIT */
/*
 * infeed._infeed: the CPython binding of libinfeed, used by the infeed
 * package's Python layer (DataLoader); not meant to be used directly.
 *
 * A Client is one connection to infeedd with at most one session.  Where
 * the session is (attached, its id, the held slots, an outstanding Next,
 * the position) is libinfeed's (infeed_get_state), never copied here.
 * Client.epoch() gives the iterator of one epoch (`for ... in loader`),
 * whose next() runs here, without a Python frame.  Each step it takes is
 * held by a Lease: a small object that describes the step's bytes in the
 * ring, also through numpy's array interface (__array_struct__), so the
 * array numpy makes of it, and every array and torch tensor built on that,
 * keeps it alive.  When the last view is gone the lease dies and gives the
 * slot back at once, or queues it for the call running on the loader.  A
 * lease may die on any thread, even while a call waits with the GIL
 * released, so then it never calls libinfeed.
 *
 * Written to Python's limited API of 3.9 (Py_LIMITED_API, set by meson),
 * so that one build, _infeed.abi3.so, loads in every CPython from 3.9 on:
 * hence heap types from specs, and the array interface rather than the
 * buffer protocol, which entered the limited API only in 3.11.
 *
 * With torch output the whole Step is built here: data and labels are
 * DLPack tensors over the lease (each holds it; the last one gone frees
 * it, on whichever thread).  Python and torch code on the per-step path
 * cost far more than their hot-loop times when the step's 52 MB have just
 * left the caches (docs/performance.md), so a step touches as little as
 * it can.  The tensors are made ahead, several steps' worth at a time
 * ("spares"): each slot's place in the ring is known from the first step
 * seen in it, and a step in that slot gets a set made for it, fresh (never
 * handed out before).  The indices are copied out of the slot into a
 * tensor of their own only when the program first reads Step.indices:
 * until then the step holds its lease in their place (through its data the
 * slot is held anyway), and most trainers never read them.  The pid of
 * the process is kept up to date by a fork handler, not asked of the
 * kernel on every step.
 *
 * The wait for a step releases the GIL and runs in slices, so that Ctrl-C
 * and other signal handlers run within a slice; an interrupted Next stays
 * outstanding and the next call collects it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <sys/param.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "infeed.h"

#define CLIENT_SLICE_MS	100	/* signal handlers run at least this often */

/* Exception classes by key ("daemon:5", "closed", ...), set by __init__. */
static PyObject	*error_classes;

typedef struct {
	PyObject_HEAD
	struct infeed		*f;
	pid_t			 pid;		/* the process that connected */
	int			 busy;		/* a call is running */
	/* The session's facts from its Attached, to build steps. */
	int			 data_dtype;
	uint64_t		 sample_bytes;
	uint32_t		 ndim;
	uint64_t		 sample_shape[INFEED_MAX_DIMS];
	PyObject		*from_dlpack;	/* torch's, or NULL */
	PyObject		*inference_mode; /* torch's check, or NULL */
	bool			 writable;	/* copy-on-write mapping */
	/* Tensors made ahead for full steps, by slot (none: NULL). */
	struct spare_slot	*spare;
	uint32_t		 nspare_slots;
	uint32_t		 spares_per_slot;
	uint64_t		 full_rows;	/* a full step's rows */
	/* Steps whose leases died, to release; guarded by mu. */
	pthread_mutex_t		 mu;
	struct infeed_step	*dead;
	size_t			 ndead;
	size_t			 capdead;
} ClientObject;

/*
 * PyArrayInterface, the C side of numpy's array interface protocol
 * (__array_struct__, in numpy's "The array interface protocol"), declared
 * here as the protocol defines it: numpy reads it without a dict to parse,
 * and nothing of numpy's C API or ABI is used.
 */
struct array_interface {
	int		 two;		/* 2, a sanity check */
	int		 nd;
	char		 typekind;	/* 'u': unsigned integers */
	int		 itemsize;
	int		 flags;
	Py_intptr_t	*shape;
	Py_intptr_t	*strides;
	void		*data;
	PyObject	*descr;
};
#define ARRAY_C_CONTIGUOUS	0x0001
#define ARRAY_F_CONTIGUOUS	0x0002
#define ARRAY_ALIGNED		0x0100
#define ARRAY_NOTSWAPPED	0x0200
#define ARRAY_WRITEABLE		0x0400

/*
 * DLPack's tensor (dlpack.h, the unversioned ABI that every DLPack
 * consumer takes in a capsule named "dltensor"), declared here as the
 * standard defines it, as the array interface above is.
 */
struct dl_tensor {
	void		*data;
	int32_t		 device_type;	/* 1: kDLCPU */
	int32_t		 device_id;
	int32_t		 ndim;
	uint8_t		 code;		/* 0 int, 1 uint, 2 float */
	uint8_t		 bits;
	uint16_t	 lanes;
	int64_t		*shape;
	int64_t		*strides;	/* in elements */
	uint64_t	 byte_offset;
};
struct dl_managed_tensor {
	struct dl_tensor	  t;
	void			 *manager_ctx;
	void			(*deleter)(struct dl_managed_tensor *);
};
#define DL_CPU			1
#define DL_DIMS			(1 + INFEED_MAX_DIMS)	/* rows first */

/* The indices of a step: a DLPack tensor over its own copy. */
struct dl_indices {
	struct dl_managed_tensor mt;
	int64_t			 shape;
	int64_t			 stride;
	uint64_t		 idx[];
};

typedef struct {
	PyObject_HEAD
	ClientObject		*client;
	struct infeed_step	 st;
	uint8_t			*base;		/* the exported bytes */
	Py_ssize_t		 len;
	int			 readonly;
	Py_ssize_t		 data_offset;
	Py_ssize_t		 labels_offset;
	Py_ssize_t		 indices_offset;
	struct array_interface	 ai;		/* of the bytes, as uint8 */
	Py_intptr_t		 ai_len;
	Py_intptr_t		 ai_stride;
	/* The data and labels tensors of a torch Step. */
	struct dl_managed_tensor dl[2];
	int64_t			 dl_shape[2][DL_DIMS];
	int64_t			 dl_strides[2][DL_DIMS];
	int			 tensors;	/* alive; they hold one ref */
} LeaseObject;

#define SPARES_MAX		16	/* sets made ahead, in all */
#define SPARES_PER_SLOT		4	/* at most, for one slot */

/*
 * A Step made ahead: its data and labels over one slot, through a lease
 * without a client until it is handed out (so it holds none, and a spare
 * dropped unused releases nothing); its epoch and step are set then.
 */
struct spare {
	PyObject		*step;
	LeaseObject		*lease;		/* held by its tensors */
};

/* A slot's place in the ring, from a step seen in it, and its spares. */
struct spare_slot {
	const uint8_t		*data;		/* NULL: no step seen in it */
	const uint8_t		*labels;
	const uint64_t		*indices;
	int			 label_dtype;
	uint32_t		 n;
	struct spare		 s[SPARES_PER_SLOT];
};

/* Heap types, made from their specs at module init. */
static PyTypeObject	*ClientType;
static PyTypeObject	*LeaseType;
static PyTypeObject	*StepType;
static PyTypeObject	*EpochType;

/* This process's id: set at import and by the fork handler in a child. */
static volatile pid_t	 this_pid;

/* Raise the class registered under @key (or RuntimeError) with @msg. */
static PyObject *
raise_keyed(const char *key, const char *msg)
{
	PyObject	*cls = NULL;

	if (error_classes != NULL)
		cls = PyDict_GetItemString(error_classes, key);
	if (cls == NULL && error_classes != NULL)
		cls = PyDict_GetItemString(error_classes, "error");
	PyErr_SetString(cls != NULL ? cls : PyExc_RuntimeError, msg);
	return (NULL);
}

/* Raise the exception for libinfeed's result @r on @self. */
static PyObject *
raise_infeed(ClientObject *self, int r)
{
	char	key[32];

	switch (r) {
	case INFEED_ERR_DAEMON:
		snprintf(key, sizeof(key), "daemon:%d",
		    infeed_daemon_code(self->f));
		break;
	case INFEED_ERR_CLOSED:
		snprintf(key, sizeof(key), "closed");
		break;
	case INFEED_ERR_SYSTEM:
		snprintf(key, sizeof(key), "system");
		break;
	case INFEED_ERR_PROTOCOL:
		snprintf(key, sizeof(key), "protocol");
		break;
	default:
		snprintf(key, sizeof(key), "usage");
		break;
	}
	return (raise_keyed(key, infeed_error(self->f)));
}

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

static void	spares_clear(ClientObject *);

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

/* A tuple of the @n sizes in @dims. */
static PyObject *
shape_tuple(const uint64_t *dims, uint32_t n)
{
	PyObject	*shape, *v;
	uint32_t	 i;

	if ((shape = PyTuple_New(n)) == NULL)
		return (NULL);
	for (i = 0; i < n; i++) {
		if ((v = PyLong_FromUnsignedLongLong(dims[i])) == NULL ||
		    PyTuple_SetItem(shape, i, v) == -1) {
			Py_DECREF(shape);
			return (NULL);
		}
	}
	return (shape);
}

/* A dict of one catalogue entry. */
static PyObject *
dataset_dict(const struct infeed_dataset *d)
{
	PyObject	*shape;

	if ((shape = shape_tuple(d->shape, d->ndim)) == NULL)
		return (NULL);
	return (Py_BuildValue("{s:s,s:s,s:K,s:N,s:s,s:s,s:I}",
	    "name", d->name, "type", d->type ? d->type : "",
	    "samples", (unsigned long long)d->samples, "shape", shape,
	    "dtype", infeed_dtype_name(d->dtype),
	    "label_dtype", infeed_dtype_name(d->label_dtype),
	    "classes", d->classes));
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

/* The items of sequence @v as a tuple, or NULL with TypeError(@msg). */
static PyObject *
sequence_tuple(PyObject *v, const char *msg)
{
	PyObject	*t = PySequence_Tuple(v);

	if (t == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
		PyErr_Clear();
		PyErr_SetString(PyExc_TypeError, msg);
	}
	return (t);
}

/*
 * The UTF-8 bytes of str @v, or NULL with an error (PyUnicode_AsUTF8 is
 * in the limited API only from 3.10); the caller keeps the bytes object
 * for as long as it uses PyBytes_AsString's pointer.
 */
static PyObject *
utf8_bytes(PyObject *v, const char *what)
{
	PyObject	*type;

	if (!PyUnicode_Check(v)) {
		type = PyObject_GetAttrString((PyObject *)Py_TYPE(v),
		    "__name__");
		PyErr_Format(PyExc_TypeError, "%s must be a str, not %S", what,
		    type != NULL ? type : Py_None);
		Py_XDECREF(type);
		return (NULL);
	}
	return (PyUnicode_AsUTF8String(v));
}

/* Option @key of dict @d as an unsigned integer up to @max, if present. */
static int
opt_uint(PyObject *d, const char *key, uint64_t max, uint64_t *out)
{
	PyObject		*v = PyDict_GetItemString(d, key);
	unsigned long long	 x;

	if (v == NULL || v == Py_None)
		return (0);
	x = PyLong_AsUnsignedLongLong(v);
	if (PyErr_Occurred() || x > max) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "%s must be an integer from 0 "
		    "to %llu, not %R", key, (unsigned long long)max, v);
		return (-1);
	}
	*out = x;
	return (0);
}

/* Option @key of dict @d as a bool, if present. */
static int
opt_bool(PyObject *d, const char *key, bool *out)
{
	PyObject	*v = PyDict_GetItemString(d, key);
	int		 b;

	if (v == NULL || v == Py_None)
		return (0);
	if ((b = PyObject_IsTrue(v)) == -1)
		return (-1);
	*out = b;
	return (0);
}

/* Option @key: a float, or a sequence of up to @max floats into @out. */
static int
opt_floats(PyObject *d, const char *key, float *out, uint32_t max,
    uint32_t *n)
{
	PyObject	*v = PyDict_GetItemString(d, key), *seq;
	Py_ssize_t	 i, len;

	if (v == NULL || v == Py_None)
		return (0);
	if (PyNumber_Check(v)) {
		out[0] = (float)PyFloat_AsDouble(v);
		if (n != NULL)
			*n = 1;
		return (PyErr_Occurred() ? -1 : 0);
	}
	if ((seq = sequence_tuple(v, "expected numbers")) == NULL)
		return (-1);
	len = PyTuple_Size(seq);
	if (len < 1 || (uint64_t)len > max || n == NULL) {
		Py_DECREF(seq);
		PyErr_Format(PyExc_ValueError, "%s takes 1 to %u values, not "
		    "%zd", key, n == NULL ? 1 : max, len);
		return (-1);
	}
	for (i = 0; i < len; i++)
		out[i] = (float)PyFloat_AsDouble(PyTuple_GetItem(seq, i));
	Py_DECREF(seq);
	*n = (uint32_t)len;
	return (PyErr_Occurred() ? -1 : 0);
}

/*
 * Option @key: a str, or None, into *@out, valid while the caller holds
 * *@keep, its UTF-8 bytes (libinfeed copies it at attach).
 */
static int
opt_str(PyObject *d, const char *key, PyObject **keep, const char **out)
{
	PyObject	*v = PyDict_GetItemString(d, key);

	if (v == NULL || v == Py_None)
		return (0);
	if ((*keep = utf8_bytes(v, key)) == NULL)
		return (-1);
	*out = PyBytes_AsString(*keep);
	return (*out == NULL ? -1 : 0);
}

/* The integer @v as one up to @max into *@out, or -1 naming @what. */
static int
stage_uint(PyObject *v, const char *what, uint64_t max, uint64_t *out)
{
	unsigned long long	x = PyLong_AsUnsignedLongLong(v);

	if (PyErr_Occurred() || x > max || x == 0) {
		PyErr_Clear();
		PyErr_Format(PyExc_ValueError, "start_epoch_stages: %s must be "
		    "an integer from 1 to %llu, not %R", what,
		    (unsigned long long)max, v);
		return (-1);
	}
	*out = x;
	return (0);
}

/*
 * Option start_epoch_stages: a sequence of [process_count,
 * combined_batch_size, steps_done], at most INFEED_MAX_ELASTIC_STAGES.
 */
static int
opt_stages(PyObject *d, struct infeed_options *o)
{
	PyObject	*v = PyDict_GetItemString(d, "start_epoch_stages");
	PyObject	*seq, *one = NULL;
	Py_ssize_t	 i, n;
	uint64_t	 p = 0, c = 0, k = 0;
	int		 r = -1;

	if (v == NULL || v == Py_None)
		return (0);
	if ((seq = sequence_tuple(v, "start_epoch_stages must be a list of "
	    "[process_count, combined_batch_size, steps_done]")) == NULL)
		return (-1);
	if ((n = PyTuple_Size(seq)) > INFEED_MAX_ELASTIC_STAGES) {
		PyErr_Format(PyExc_ValueError, "start_epoch_stages has %zd "
		    "stages; at most %d", n, INFEED_MAX_ELASTIC_STAGES);
		goto out;
	}
	for (i = 0; i < n; i++) {
		if ((one = sequence_tuple(PyTuple_GetItem(seq, i), "a stage "
		    "must be [process_count, combined_batch_size, "
		    "steps_done]")) == NULL)
			goto out;
		if (PyTuple_Size(one) != 3) {
			PyErr_Format(PyExc_ValueError, "stage %zd has %zd "
			    "values: expected [process_count, "
			    "combined_batch_size, steps_done]", i,
			    PyTuple_Size(one));
			goto out;
		}
		if (stage_uint(PyTuple_GetItem(one, 0), "process_count",
		    UINT32_MAX, &p) == -1 || stage_uint(PyTuple_GetItem(one,
		    1), "combined_batch_size", UINT64_MAX, &c) == -1)
			goto out;
		k = PyLong_AsUnsignedLongLong(PyTuple_GetItem(one, 2));
		if (PyErr_Occurred()) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError, "start_epoch_stages: "
			    "steps_done must be an integer >= 0, not %R",
			    PyTuple_GetItem(one, 2));
			goto out;
		}
		o->start_epoch_stages[i].process_count = (uint32_t)p;
		o->start_epoch_stages[i].combined_batch_size = c;
		o->start_epoch_stages[i].steps_done = k;
		Py_CLEAR(one);
	}
	o->nstart_epoch_stages = (uint32_t)n;
	r = 0;
out:
	Py_XDECREF(one);
	Py_DECREF(seq);
	return (r);
}

/*
 * Loader options from the dict the Python layer built; *@keep holds the
 * bytes that o->transform points into (NULL if none), even on failure.
 */
static int
options_from(PyObject *d, struct infeed_options *o, PyObject **keep)
{
	uint64_t	u;
	uint32_t	nmean = 0, nstd = 0;

	infeed_options_init(o);
#define U32(k, field) do {						\
	u = o->field;							\
	if (opt_uint(d, k, UINT32_MAX, &u) == -1)			\
		return (-1);						\
	o->field = (uint32_t)u;						\
} while (0)
#define U64(k, field) do {						\
	u = o->field;							\
	if (opt_uint(d, k, UINT64_MAX, &u) == -1)			\
		return (-1);						\
	o->field = u;							\
} while (0)
	U32("batch_size", batch_size);
	U32("device_iterations", device_iterations);
	U32("replication_factor", replication_factor);
	U32("gradient_accumulation", gradient_accumulation);
	U64("seed", seed);
	U32("num_workers", num_workers);
	U32("buffer_size", buffer_size);
	U32("distributed_process_id", distributed_process_id);
	U32("distributed_process_count", distributed_process_count);
	U64("start_epoch", start_epoch);
	U64("start_step", start_step);
	U32("reconnect_timeout_ms", reconnect_timeout_ms);
	U32("label_dtype", label_dtype);
#undef U32
#undef U64
	if (opt_bool(d, "shuffle", &o->shuffle) == -1 ||
	    opt_bool(d, "drop_last", &o->drop_last) == -1 ||
	    opt_bool(d, "load_indefinitely", &o->load_indefinitely) == -1 ||
	    opt_bool(d, "early_preload", &o->early_preload) == -1 ||
	    opt_bool(d, "to_float32", &o->to_float32) == -1 ||
	    opt_bool(d, "copy_on_write", &o->copy_on_write) == -1 ||
	    opt_bool(d, "share", &o->share) == -1 ||
	    opt_stages(d, o) == -1 ||
	    opt_str(d, "transform", keep, &o->transform) == -1 ||
	    opt_floats(d, "scale", &o->scale, 1, NULL) == -1 ||
	    opt_floats(d, "mean", o->mean, INFEED_MAX_CHANNELS, &nmean) ==
	    -1 || opt_floats(d, "std", o->std, INFEED_MAX_CHANNELS, &nstd) ==
	    -1)
		return (-1);
	if (nmean != nstd) {
		PyErr_Format(PyExc_ValueError, "mean has %u values and std "
		    "%u: give one per channel for both, or one for all",
		    nmean, nstd);
		return (-1);
	}
	o->nchannels = nmean;
	return (0);
}

/* A dict of the session's facts. */
static PyObject *
info_dict(const struct infeed_session_info *in)
{
	PyObject	*shape;

	if ((shape = shape_tuple(in->sample_shape, in->ndim)) == NULL)
		return (NULL);
	return (Py_BuildValue("{s:K,s:I,s:K,s:K,s:K,s:K,s:K,s:N,s:s,s:K,s:s}",
	    "session_id", (unsigned long long)in->session_id,
	    "start_epoch_steps", (unsigned long long)in->start_epoch_steps,
	    "start_epoch_last_step_rows",
	    (unsigned long long)in->start_epoch_last_step_rows,
	    "slots", in->slots,
	    "combined_batch_size",
	    (unsigned long long)in->combined_batch_size,
	    "steps_per_epoch", (unsigned long long)in->steps_per_epoch,
	    "last_step_rows", (unsigned long long)in->last_step_rows,
	    "sample_shape", shape,
	    "dtype", infeed_dtype_name(in->data_dtype),
	    "sample_bytes", (unsigned long long)in->sample_bytes,
	    "label_dtype", infeed_dtype_name(in->label_dtype)));
}

/* The number of the dtype called @name, or 0 with an error. */
static int
dtype_number(const char *name)
{
	int	t;

	for (t = 1; t < 64; t++)
		if (strcmp(infeed_dtype_name(t), name) == 0)
			return (t);
	PyErr_Format(PyExc_ValueError, "unknown dtype '%s': expected uint8, "
	    "int32, int64, float16, float32 or float64", name);
	return (0);
}

/* The number of the dtype named by str @name, or 0 with an error. */
static int
dtype_of(PyObject *name)
{
	PyObject	*b;
	int		 t;

	if ((b = utf8_bytes(name, "dtype")) == NULL)
		return (0);
	t = dtype_number(PyBytes_AsString(b));
	Py_DECREF(b);
	return (t);
}

static void	spares_setup(ClientObject *,
		    const struct infeed_session_info *);

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

/* The raw data's sample shape and dtype from @spec into @fl. */
static int
files_raw_from(PyObject *spec, struct infeed_files *fl)
{
	PyObject	*shape = PyDict_GetItemString(spec, "shape"), *seq;
	PyObject	*dtype = PyDict_GetItemString(spec, "dtype");
	Py_ssize_t	 i, n;

	if (shape == NULL || dtype == NULL || !PyUnicode_Check(dtype)) {
		PyErr_SetString(PyExc_ValueError, "raw data needs shape= and "
		    "dtype=");
		return (-1);
	}
	if ((fl->dtype = dtype_of(dtype)) == 0 ||
	    (seq = sequence_tuple(shape, "shape must be a sequence")) ==
	    NULL)
		return (-1);
	n = PyTuple_Size(seq);
	if (n < 1 || n > INFEED_MAX_DIMS) {
		Py_DECREF(seq);
		PyErr_Format(PyExc_ValueError, "shape has %zd dimensions; a "
		    "sample has 1 to %d", n, INFEED_MAX_DIMS);
		return (-1);
	}
	fl->ndim = (uint32_t)n;
	for (i = 0; i < n; i++)
		fl->shape[i] = PyLong_AsUnsignedLongLong(
		    PyTuple_GetItem(seq, i));
	Py_DECREF(seq);
	return (PyErr_Occurred() ? -1 : 0);
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

/* Lease @l describes step @st's bytes, as @self's session lays them. */
static void
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
static PyObject *
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

/*
 * Whether the session of @state left its shared group: the steps it holds
 * are then of the group's ring, and its next Step brings a ring of its
 * own.  libinfeed's state says whether it reads its group's ring; only
 * then, and only when every slot of it is held, are the daemon's Stats
 * asked, for the daemon tells a member it left only in the Step that
 * answers its next Next.
 */
static bool
client_left_group(ClientObject *self, const struct infeed_state *state)
{
	struct infeed_stats	*st = NULL;
	uint64_t		 id = state->session_id;
	bool			 left = false;
	size_t			 i;
	int			 r;

	if (state->group_id == 0 || state->own_ring)
		return (false);
	Py_BEGIN_ALLOW_THREADS
	r = infeed_get_stats(self->f, &st);
	Py_END_ALLOW_THREADS
	for (i = 0; r == INFEED_OK && i < st->nsessions; i++) {
		if (st->sessions[i]->session_id == id)
			left = st->sessions[i]->group_left != 0;
	}
	infeed_stats_free(st);
	return (left);
}

/*
 * The next step into *@st, waiting up to @timeout_s (0: for ever): 1, or
 * 0 at the end of the epoch, or -1 with an error.
 */
static int
client_take(ClientObject *self, double timeout_s, struct infeed_step *st)
{
	struct infeed_state	state;
	char			msg[512];
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
	if (!state.next_pending && state.slots_held >= state.slots &&
	    !client_left_group(self, &state)) {
		self->busy = 0;
		snprintf(msg, sizeof(msg), "every one of the ring's %u slots "
		    "is held by a step you still reference (its data or "
		    "labels, a view of them, or the step); infeed would wait "
		    "forever: drop those references (or .clone() what you "
		    "keep), or raise buffer_size", state.slots);
		raise_keyed("slots", msg);
		return (-1);
	}
	r = client_wait(self, st, timeout_s);
	self->busy = 0;
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
static PyObject *
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
static PyObject *
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
static PyObject *
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

/* Drop every spare and the table (a new session, the end of one). */
static void
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
static void
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
 * reconnect maps a new ring: the slot's old spares go); NULL when the
 * step is not a full one, or there are no spares.
 */
static struct spare_slot *
spare_slot_of(ClientObject *self, const struct infeed_step *st)
{
	struct spare_slot	*sp;
	const uint8_t		*labels;
	uint32_t		 j;

	if (st->slot >= self->nspare_slots || st->rows != self->full_rows)
		return (NULL);
	sp = &self->spare[st->slot];
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

/* Give back step @st, which could not be handed out. */
static void
client_give_back(ClientObject *self, const struct infeed_step *st)
{
	self->busy = 1;
	(void)infeed_release(self->f, st);
	self->busy = 0;
}

/*
 * Step @st as a Step of torch tensors, or NULL with an error (the step
 * given back).  A full step gets a spare of its slot (all slots are topped
 * up when it has none); another, tensors made for it.
 */
static PyObject *
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

/* Only a Client makes leases and epochs (a heap type inherits object's). */
static PyObject *
refuse_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	PyErr_SetString(PyExc_TypeError, "leases and epochs come from "
	    "infeed.DataLoader");
	return (NULL);
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

static PyType_Spec Epoch_spec = {
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

static PyType_Spec Client_spec = {
	.name = "infeed._infeed.Client",
	.basicsize = sizeof(ClientObject),
	.flags = Py_TPFLAGS_DEFAULT,
	.slots = Client_slots,
};

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
	if (c->ndead < c->capdead)
		c->dead[c->ndead++] = self->st;
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

static PyType_Spec Lease_spec = {
	.name = "infeed._infeed.Lease",
	.basicsize = sizeof(LeaseObject),
	.flags = Py_TPFLAGS_DEFAULT,
	.slots = Lease_slots,
};

/* set_error_classes(dict): the exception class for each error key. */
static PyObject *
set_error_classes(PyObject *mod, PyObject *d)
{
	if (!PyDict_Check(d)) {
		PyErr_SetString(PyExc_TypeError, "expected a dict");
		return (NULL);
	}
	Py_XDECREF(error_classes);
	Py_INCREF(d);
	error_classes = d;
	Py_RETURN_NONE;
}

static PyObject *
dtype_size(PyObject *mod, PyObject *args)
{
	const char	*name;
	int		 t;

	if (!PyArg_ParseTuple(args, "s", &name) || (t = dtype_number(name)) ==
	    0)
		return (NULL);
	return (Py_BuildValue("(in)", t, (Py_ssize_t)infeed_dtype_size(t)));
}

static PyMethodDef module_methods[] = {
	{ "set_error_classes", set_error_classes, METH_O,
	  "set_error_classes(dict): exception classes by error key" },
	{ "dtype", dtype_size, METH_VARARGS,
	  "dtype(name) -> (number, size) of an infeed dtype" },
	{ NULL, NULL, 0, NULL }
};

static PyStructSequence_Field step_fields[] = {
	{ "data", "[rows, *sample_shape]: the step's samples" },
	{ "labels", "[rows]: their labels" },
	{ "indices", "[rows]: their indices in the dataset" },
	{ "epoch", "the epoch the step belongs to" },
	{ "step", "the step's number within the epoch" },
	{ NULL, NULL }
};

static PyStructSequence_Desc step_desc = {
	"infeed.Step",
	"One device step: unpacks as `data, labels` (like PopTorch's batch) "
	"and also has .indices, .epoch and .step.",
	step_fields,
	2,
};

static struct PyModuleDef module_def = {
	PyModuleDef_HEAD_INIT,
	.m_name = "infeed._infeed",
	.m_doc = "libinfeed for the infeed package; use infeed.DataLoader.",
	.m_size = -1,
	.m_methods = module_methods,
};

/* DTYPE_UINT8 ... DTYPE_FLOAT64: infeed-dtype.h's numbers, by name. */
static int
add_dtype_constants(PyObject *m)
{
	char		 name[32];
	const char	*n;
	int		 t;
	size_t		 i;

	for (t = 1; t < 64; t++) {
		n = infeed_dtype_name(t);
		if (strcmp(n, infeed_dtype_name(0)) == 0)
			continue;	/* not a dtype */
		snprintf(name, sizeof(name), "DTYPE_%s", n);
		for (i = 6; name[i] != '\0'; i++)
			if (name[i] >= 'a' && name[i] <= 'z')
				name[i] -= 'a' - 'A';
		if (PyModule_AddIntConstant(m, name, t) < 0)
			return (-1);
	}
	return (0);
}

/* In a forked child, this process is another. */
static void
fork_child(void)
{
	this_pid = getpid();
}

PyMODINIT_FUNC	PyInit__infeed(void);

PyMODINIT_FUNC
PyInit__infeed(void)
{
	static bool	 fork_handler;
	PyObject	*m, *step;

	this_pid = getpid();
	if (!fork_handler && (errno = pthread_atfork(NULL, NULL,
	    fork_child)) != 0)
		return (PyErr_SetFromErrno(PyExc_OSError));
	fork_handler = true;
	if (ClientType == NULL && (ClientType = (PyTypeObject *)
	    PyType_FromSpec(&Client_spec)) == NULL)
		return (NULL);
	if (LeaseType == NULL && (LeaseType = (PyTypeObject *)
	    PyType_FromSpec(&Lease_spec)) == NULL)
		return (NULL);
	if (EpochType == NULL && (EpochType = (PyTypeObject *)
	    PyType_FromSpec(&Epoch_spec)) == NULL)
		return (NULL);
	if ((m = PyModule_Create(&module_def)) == NULL)
		return (NULL);
	if ((step = (PyObject *)PyStructSequence_NewType(&step_desc)) ==
	    NULL || PyModule_AddObject(m, "Step", step) < 0) {
		Py_XDECREF(step);
		Py_DECREF(m);
		return (NULL);
	}
	Py_XDECREF(StepType);
	Py_INCREF(step);	/* torch_step() makes them */
	StepType = (PyTypeObject *)step;
	Py_CLEAR(step_reduce_fields);
	if (!(step_lazy_indices = step_type_lazy() == 0))
		PyErr_Clear();	/* the type is read-only: copies up front */
	Py_INCREF(ClientType);
	Py_INCREF(LeaseType);
	if (PyModule_AddObject(m, "Client", (PyObject *)ClientType) < 0 ||
	    PyModule_AddObject(m, "Lease", (PyObject *)LeaseType) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_CHANNELS",
	    INFEED_MAX_CHANNELS) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_ELASTIC_STAGES",
	    INFEED_MAX_ELASTIC_STAGES) < 0 || add_dtype_constants(m) == -1) {
		Py_DECREF(m);
		return (NULL);
	}
	return (m);
}
