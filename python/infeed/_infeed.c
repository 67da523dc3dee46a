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
 *
 * This file is the module itself; _infeed.h lists the files the rest is
 * split into, by job.
 */

#include "_infeed.h"

/* Exception classes by key ("daemon:5", "closed", ...), set by __init__. */
static PyObject	*error_classes;

/* Heap types, made from their specs at module init. */
PyTypeObject	*ClientType;
PyTypeObject	*LeaseType;
PyTypeObject	*StepType;
PyTypeObject	*EpochType;

/* This process's id: set at import and by the fork handler in a child. */
volatile pid_t	 this_pid;

/* Raise the class registered under @key (or RuntimeError) with @msg. */
PyObject *
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
PyObject *
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

/* Only a Client makes leases and epochs (a heap type inherits object's). */
PyObject *
refuse_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	PyErr_SetString(PyExc_TypeError, "leases and epochs come from "
	    "infeed.DataLoader");
	return (NULL);
}

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
	step_type_ready();
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
