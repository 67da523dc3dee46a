/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's protocol edge for the session's calls, as peer.c is the
 * daemon's: each request built from plain structs (Attach from whole
 * options and files, Detach, ListDatasets) and each reply read into plain
 * ones (Attached, DatasetList), over the connection's frames
 * (libinfeed-conn.h).  The files above see no frame; the Next's Step is
 * converted by the connection itself, which may hold it back.
 */

#include <stdlib.h>
#include <string.h>

#include "libinfeed-conn.h"
#include "options-schema.h"

_Static_assert(INFEED_DAEMON_NOT_FOUND == INFEED__ERROR_CODE__ERROR_NOT_FOUND,
    "INFEED_DAEMON_NOT_FOUND is not infeed.proto's NOT_FOUND");

/* infeed.h's options hold options-schema.h's values, in their size. */
#define INFEED_OPTION_TYPE(name, field, type, def, limit, kind, lib, ...) \
	INFEED_OPTION_##lib(_Static_assert(				\
	    sizeof(((struct infeed_options *)0)->name) == sizeof(type),	\
	    "infeed.h's infeed_options." #name " is not the " #type	\
	    " of options-schema.h");)
INFEED_LOADER_OPTIONS(INFEED_OPTION_TYPE)
#undef INFEED_OPTION_TYPE

/* Room for the messages that LoaderOptions points to. */
struct infeed_loader_parts {
	Infeed__Transform	 transform;
	Infeed__ElasticStage	 stages[INFEED_MAX_ELASTIC_STAGES];
	Infeed__ElasticStage	*stage_ptrs[INFEED_MAX_ELASTIC_STAGES];
};

/* LoaderOptions (and the messages it points to, in @parts) from @o. */
static void
infeed_loader_options(Infeed__LoaderOptions *lo,
    struct infeed_loader_parts *parts, const struct infeed_options *o)
{
	Infeed__Transform	*t = &parts->transform;
	uint32_t		 i;

	*t = (Infeed__Transform)INFEED__TRANSFORM__INIT;
	/* Each of options-schema.h that infeed.h has; LIB0's when set. */
#define INFEED_LOADER_OPTION(name, field, type, def, limit, kind, lib, ...) \
	INFEED_OPTION_##lib(						\
	if (INFEED_OPTION_ALWAYS_##lib || o->name != 0) {		\
		lo->has_##name = 1;					\
		lo->name = (__typeof__(lo->name))o->name;		\
	})
	INFEED_LOADER_OPTIONS(INFEED_LOADER_OPTION)
#undef INFEED_LOADER_OPTION
	for (i = 0; i < o->nstart_epoch_stages; i++) {
		parts->stages[i] = (Infeed__ElasticStage)
		    INFEED__ELASTIC_STAGE__INIT;
		parts->stages[i].process_count =
		    o->start_epoch_stages[i].process_count;
		parts->stages[i].combined_batch_size =
		    o->start_epoch_stages[i].combined_batch_size;
		parts->stages[i].steps_done =
		    o->start_epoch_stages[i].steps_done;
		parts->stage_ptrs[i] = &parts->stages[i];
	}
	lo->n_start_epoch_stages = o->nstart_epoch_stages;
	lo->start_epoch_stages = parts->stage_ptrs;
	if (o->to_float32) {
		t->has_to_float32 = t->has_scale = 1;
		t->to_float32 = 1;
		t->scale = o->scale;
		t->n_mean = t->n_std = o->nchannels;
		t->mean = (float *)(uintptr_t)o->mean;
		t->std = (float *)(uintptr_t)o->std;
		lo->transform = t;
	}
	if (o->transform != NULL) {
		t->pipeline = (char *)(uintptr_t)o->transform;
		lo->transform = t;
	}
}

/* The Files message of whole files @in; pointers borrow from @in. */
static void
infeed_files_message(Infeed__Files *out, const struct infeed_files *in)
{
	out->has_data_format = 1;
	out->data_format = (Infeed__FileFormat)in->data_format;
	out->has_labels_format = 1;
	out->labels_format = (Infeed__FileFormat)in->labels_format;
	if (in->data_format == INFEED_FILE_RAW) {
		out->n_shape = in->ndim;
		out->shape = (uint64_t *)(uintptr_t)in->shape;
		out->has_dtype = 1;
		out->dtype = (Infeed__DType)in->dtype;
	}
	if (in->labels_format == INFEED_FILE_RAW && in->label_dtype != 0) {
		out->has_label_dtype = 1;
		out->label_dtype = (Infeed__DType)in->label_dtype;
	}
}

/* The whole session info, ring and group from Attached. */
static void
infeed_attached_from(struct infeed_attached *out, const Infeed__Attached *at)
{
	struct infeed_session_info	*info = &out->info;
	size_t				 i;

	memset(out, 0, sizeof(*out));
	info->struct_size = sizeof(*info);
	info->session_id = at->session_id;
	info->combined_batch_size = at->combined_batch_size;
	info->steps_per_epoch = at->steps_per_epoch;
	info->last_step_rows = at->last_step_rows;
	info->slots = at->slots;
	info->ndim = at->n_sample_shape < INFEED_MAX_DIMS ?
	    (uint32_t)at->n_sample_shape : INFEED_MAX_DIMS;
	for (i = 0; i < info->ndim; i++)
		info->sample_shape[i] = at->sample_shape[i];
	info->data_dtype = at->data_dtype;
	info->sample_bytes = at->sample_bytes;
	/* int32 when it does not say. */
	info->label_dtype = at->has_label_dtype ? (int)at->label_dtype :
	    INFEED_DTYPE_INT32;
	/* An older daemon's start epoch has all the steps. */
	info->start_epoch_steps = at->has_start_epoch_steps ?
	    at->start_epoch_steps : at->steps_per_epoch;
	info->start_epoch_last_step_rows = at->has_start_epoch_last_step_rows ?
	    at->start_epoch_last_step_rows : at->last_step_rows;
	out->knows_stages = at->has_start_epoch_steps;
	out->group_id = at->has_group_id ? at->group_id : 0;
	out->quiet_release = at->has_quiet_release && at->quiet_release;
	out->ring.ring_bytes = at->ring_bytes;
	out->ring.slot_bytes = at->slot_bytes;
	out->ring.data_offset = at->data_offset;
	out->ring.labels_offset = at->labels_offset;
	out->ring.indices_offset = at->indices_offset;
	out->ring.slots = at->slots;
	out->ring.label_dtype = info->label_dtype;
}

/*
 * Attach to @dataset with whole options @o (and whole @files, sent as
 * @nfds descriptors @fds, or NULL for a catalogue dataset); Attached into
 * *@out, whose ring_fd is then the caller's.
 */
int
infeed_proto_attach(struct infeed *f, const char *dataset,
    const struct infeed_options *o, const struct infeed_files *files,
    const int *fds, size_t nfds, struct infeed_attached *out)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *reply;
	Infeed__Attach		 a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	 lo = INFEED__LOADER_OPTIONS__INIT;
	struct infeed_loader_parts parts;
	Infeed__Files		 fl = INFEED__FILES__INIT;
	int			 r;

	infeed_loader_options(&lo, &parts, o);
	a.dataset = (char *)(uintptr_t)dataset;
	a.options = &lo;
	if (files != NULL) {
		infeed_files_message(&fl, files);
		a.files = &fl;
	}
	fr.msg_case = INFEED__FRAME__MSG_ATTACH;
	fr.attach = &a;
	if ((r = infeed_conn_request(f, &fr, fds, nfds,
	    INFEED__FRAME__MSG_ATTACHED, &reply)) != INFEED_OK)
		return (r);
	infeed_attached_from(out, reply->attached);
	infeed__frame__free_unpacked(reply, NULL);
	if ((out->ring_fd = infeed_conn_take_fd(&f->conn)) == -1)
		return (infeed_fail(f, INFEED_ERR_PROTOCOL, "Attached came "
		    "without the ring's file descriptor"));
	return (INFEED_OK);
}

/*
 * End the session (Detach); a Next outstanding is answered first.  The
 * Steps read so far go with it, so that a Step that crosses the Detach,
 * which the caller never sees, is released by the daemon.
 */
int
infeed_proto_detach(struct infeed *f)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *reply;
	Infeed__Detach	 dt = INFEED__DETACH__INIT;
	int		 r;

	dt.has_steps_received = 1;
	dt.steps_received = f->conn.steps_read;
	fr.msg_case = INFEED__FRAME__MSG_DETACH;
	fr.detach = &dt;
	r = infeed_conn_call_after_next(f, &fr, INFEED__FRAME__MSG_DETACHED,
	    &reply);
	if (r == INFEED_OK)
		infeed__frame__free_unpacked(reply, NULL);
	return (r);
}

/* One whole catalogue entry from its DatasetInfo; -1 without memory. */
static int
infeed_dataset_from(struct infeed_dataset *d, const Infeed__DatasetInfo *di)
{
	size_t	j;

	memset(d, 0, sizeof(*d));
	d->struct_size = sizeof(*d);
	d->name = strdup(di->name);
	d->type = strdup(di->type ? di->type : "");
	d->samples = di->samples;
	d->ndim = di->n_shape < INFEED_MAX_DIMS ? (uint32_t)di->n_shape :
	    INFEED_MAX_DIMS;
	for (j = 0; j < d->ndim; j++)
		d->shape[j] = di->shape[j];
	d->dtype = di->dtype;
	d->label_dtype = di->label_dtype;
	d->classes = di->classes;
	d->documents = di->documents;
	d->tokens = di->tokens;
	if (d->name == NULL || d->type == NULL) {
		free(d->name);
		free(d->type);
		return (-1);
	}
	return (0);
}

/*
 * The catalogue (ListDatasets) as *@n whole entries in *@list: the
 * array and the strings of each entry are the caller's to free.
 */
int
infeed_proto_datasets(struct infeed *f, struct infeed_dataset **list,
    size_t *n)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *reply;
	Infeed__ListDatasets	 ld = INFEED__LIST_DATASETS__INIT;
	Infeed__DatasetList	*dl;
	struct infeed_dataset	*out;
	size_t			 i;
	int			 r;

	fr.msg_case = INFEED__FRAME__MSG_LIST_DATASETS;
	fr.list_datasets = &ld;
	if ((r = infeed_conn_call(f, &fr, INFEED__FRAME__MSG_DATASET_LIST,
	    &reply)) != INFEED_OK)
		return (r);
	dl = reply->dataset_list;
	out = calloc(dl->n_datasets + 1, sizeof(*out));
	for (i = 0; out != NULL && i < dl->n_datasets; i++) {
		if (infeed_dataset_from(&out[i], dl->datasets[i]) == -1) {
			while (i-- > 0) {
				free(out[i].name);
				free(out[i].type);
			}
			free(out);
			out = NULL;
		}
	}
	*n = dl->n_datasets;
	infeed__frame__free_unpacked(reply, NULL);
	if (out == NULL)
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	*list = out;
	return (INFEED_OK);
}
