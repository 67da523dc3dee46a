/* SPDX-License-Identifier: MIT */
/*
 * The Python extension's inside (infeed._infeed): its objects and what
 * its files call of one another.  It is one module made of files by job,
 * each over the ones below it:
 *
 *	_infeed.c		the module: its types made, the error classes,
 *				the fork handler, the dtype constants
 *	_infeed-client.c	Client (connect, attach, detach, state) and
 *				Epoch, the iterator whose next() takes a step
 *	_infeed-spares.c	torch Steps made ahead, by slot ("spares")
 *	_infeed-lease.c		Lease (a step's bytes, numpy's array
 *				interface), DLPack tensors over it, the Step
 *				struct sequence's lazy indices
 *	_infeed-options.c	Python values to libinfeed's structs (the
 *				loader options, a trainer's files, dtypes) and
 *				its facts back to dicts
 *
 * Nothing here is the package's API: the Python layer (_loader.py) calls
 * the types; the names below are hidden (the module exports
 * PyInit__infeed alone).
 */
#ifndef INFEED_PY_INFEED_H
#define INFEED_PY_INFEED_H

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

/* infeed.proto's ERROR_UNEXPECTED: a request the session cannot take. */
#define DAEMON_UNEXPECTED	3

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

/* Heap types, made from their specs at module init (_infeed.c). */
extern PyTypeObject	*ClientType;
extern PyTypeObject	*LeaseType;
extern PyTypeObject	*StepType;
extern PyTypeObject	*EpochType;
extern PyType_Spec	 Client_spec;
extern PyType_Spec	 Epoch_spec;
extern PyType_Spec	 Lease_spec;

/* This process's id: set at import and by the fork handler in a child. */
extern volatile pid_t	 this_pid;

/* _infeed.c: errors, and the types only a Client makes. */
PyObject	*raise_keyed(const char *key, const char *msg);
PyObject	*raise_infeed(ClientObject *self, int r);
PyObject	*refuse_new(PyTypeObject *type, PyObject *args, PyObject *kw);

/* _infeed-client.c: the client. */
void	client_give_back(ClientObject *self, const struct infeed_step *st);

/* _infeed-spares.c: torch Steps made ahead. */
void	spares_clear(ClientObject *self);
void	spares_setup(ClientObject *self,
    const struct infeed_session_info *info);
PyObject	*torch_step(ClientObject *self, const struct infeed_step *st);

/* _infeed-lease.c: leases, tensors and Steps. */
void	lease_describe(ClientObject *self, LeaseObject *l,
    const struct infeed_step *st);
PyObject	*lease_new(ClientObject *self, const struct infeed_step *st);
PyObject	*lease_tensor(ClientObject *self, LeaseObject *l, int which);
PyObject	*step_of(LeaseObject *l, PyObject *data, PyObject *labels);
PyObject	*step_hand_out(PyObject *step, LeaseObject *l);
void	step_type_ready(void);

/* _infeed-options.c: Python values in and out. */
PyObject	*dataset_dict(const struct infeed_dataset *d);
int	options_from(PyObject *d, struct infeed_options *o, PyObject **keep);
PyObject	*info_dict(const struct infeed_session_info *in);
int	dtype_number(const char *name);
int	dtype_of(PyObject *name);
int	files_raw_from(PyObject *spec, struct infeed_files *fl);

#endif /* INFEED_PY_INFEED_H */
