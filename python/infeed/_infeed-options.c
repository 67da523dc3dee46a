/* SPDX-License-Identifier: MIT */
/*
 * infeed._infeed's conversions: the loader's options dict to struct
 * infeed_options (each value checked, with the key named in the error),
 * a trainer's files' raw spec, dtype names; the session's facts and the
 * catalogue back to dicts.
 */

#include "_infeed.h"
#include "options-schema.h"

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
PyObject *
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

/* Option @key of dict @d as a bool (0 or 1), if present. */
static int
opt_bool(PyObject *d, const char *key, uint64_t *out)
{
	PyObject	*v = PyDict_GetItemString(d, key);
	int		 b;

	if (v == NULL || v == Py_None)
		return (0);
	if ((b = PyObject_IsTrue(v)) == -1)
		return (-1);
	*out = (uint64_t)b;
	return (0);
}

/* Option @key as a bool with @max 0, else as an integer up to @max. */
static int
opt_scalar(PyObject *d, const char *key, uint64_t max, uint64_t *out)
{
	return (max == 0 ? opt_bool(d, key, out) : opt_uint(d, key, max,
	    out));
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
int
options_from(PyObject *d, struct infeed_options *o, PyObject **keep)
{
	uint64_t	u;
	uint32_t	nmean = 0, nstd = 0;

	infeed_options_init(o);
	/* Those of options-schema.h by their types, then libinfeed's own. */
#define OPTIONS_OWN(name, max) do {					\
	u = (uint64_t)o->name;						\
	if (opt_scalar(d, #name, max, &u) == -1)			\
		return (-1);						\
	o->name = (__typeof__(o->name))u;				\
} while (0)
#define OPTIONS_FROM(name, field, type, def, limit, kind, lib, ...)	\
	INFEED_OPTION_##lib(OPTIONS_OWN(name, _Generic((type)0, bool: 0, \
	    default: (uint64_t)(type)-1));)
	INFEED_LOADER_OPTIONS(OPTIONS_FROM)
#undef OPTIONS_FROM
	OPTIONS_OWN(reconnect_timeout_ms, UINT32_MAX);
	OPTIONS_OWN(to_float32, 0);
	OPTIONS_OWN(copy_on_write, 0);
#undef OPTIONS_OWN
	if (opt_stages(d, o) == -1 ||
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
PyObject *
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
int
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
int
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

/* The raw data's sample shape and dtype from @spec into @fl. */
int
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
