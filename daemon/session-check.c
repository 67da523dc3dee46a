/* SPDX-License-Identifier: MIT */
/*
 * Attach checks (see session-check.h): what an Attach asks is judged here,
 * before any session, ring or group exists, and what passes becomes a
 * session's source (its dataset, sampler and transform).  attach-check.c's
 * helper threads call session_files_check() too; nothing here calls up.
 */

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dtype.h"
#include "log.h"
#include "packing.h"
#include "packings.h"
#include "session-check.h"
#include "utf8.h"
#include "xmalloc.h"

/* The sampler's options are the sampler's as options-schema.h says. */
#define SESSION_SAMPLER_TYPE(name, field, type, def, limit, kind, ...)	\
	INFEED_OPTION_SAMPLER_##kind(_Static_assert(_Generic(		\
	    ((struct sampler_opts *)0)->field, type: 1, default: 0),	\
	    "sampler.h's " #field " is not " #type " as options-schema.h " \
	    "says");)
INFEED_LOADER_OPTIONS(SESSION_SAMPLER_TYPE)
#undef SESSION_SAMPLER_TYPE

/*
 * Refuse option @name's value @v outside [@min, @max] of its LIMIT in
 * options-schema.h, saying so in its @unit and with poptorch's default
 * @def.
 */
static int
session_check_limit(uint64_t v, const char *name, const char *def,
    uint64_t min, uint64_t max, const char *unit, char **cause)
{
	if (v >= min && v <= max)
		return (0);
	*cause = xasprintf("%s is %llu; expected %llu to %llu%s (poptorch's "
	    "default is %s)", name, (unsigned long long)v,
	    (unsigned long long)min, (unsigned long long)max, unit, def);
	return (-1);
}

/* Does @a say what @b says, key by key, but for @skip? */
static bool
session_conf_same_but(const struct dataset_conf *a,
    const struct dataset_conf *b, const char *skip)
{
	const char	*v;
	size_t		 i, n = 0;

	for (i = 0; i < a->nkv; i++) {
		if (strcmp(a->kv[i].key, skip) == 0)
			continue;
		if ((v = dataset_conf_get(b, a->kv[i].key)) == NULL ||
		    strcmp(v, a->kv[i].value) != 0)
			return (false);
		n++;
	}
	for (i = 0; i < b->nkv; i++)
		n -= strcmp(b->kv[i].key, skip) != 0;
	return (n == 0);
}

/*
 * The section of @cat that says what section @index says but for seq_len
 * (and its name), with seq_len @seq_len: its index, or SIZE_MAX.
 */
static size_t
session_seq_len_section(const struct catalogue *cat, size_t index,
    uint32_t seq_len)
{
	const struct dataset	*ds = cat->datasets[index], *d;
	size_t			 i;

	for (i = 0; i < cat->ndatasets; i++) {
		d = cat->datasets[i];
		if (d != ds && strcmp(d->type, ds->type) == 0 &&
		    d->ndim == 2 && d->shape[1] == seq_len &&
		    session_conf_same_but(cat->entries[i].conf,
		    cat->entries[index].conf, "seq_len"))
			return (i);
	}
	return (SIZE_MAX);
}

/* Whether @ds is a tokens (or mix) dataset of rows, the rows of seq_len. */
static bool
session_is_tokens(const struct dataset *ds)
{
	return ((strcmp(ds->type, "tokens") == 0 ||
	    strcmp(ds->type, "mix") == 0) && ds->ndim == 2);
}

/*
 * A token dataset's seq_len asked for (0: its own), up to
 * PACKING_SEQ_LEN_MAX.  Another seq_len is served by a section of the
 * catalogue that says what the asked one says but for seq_len (and its
 * name): the session reads that one instead (src->ds and ds_index).  Its
 * allow_groups are the same, so the access already judged holds.  A
 * tokens dataset with no such section gets one made (packings.c); the
 * Attach waited for it (session_check_packing()).
 */
static int
session_check_seq_len(const struct session_host *host,
    struct session_source *src, const struct session_options *o,
    enum errcode *code, char **cause)
{
	const struct catalogue	*cat = host->cat;
	const struct dataset	*ds = src->ds;
	size_t			 i = SIZE_MAX;
	int			 rc;

	if (o->seq_len == 0 || (session_is_tokens(ds) &&
	    ds->shape[1] == o->seq_len))
		return (0);
	if (!session_is_tokens(ds)) {
		*cause = xasprintf("seq_len = %u is for token datasets (type "
		    "tokens or mix); '%s' is of type %s: leave seq_len unset",
		    o->seq_len, ds->name, ds->type);
		return (-1);
	}
	if (o->seq_len > PACKING_SEQ_LEN_MAX) {
		*cause = xasprintf("seq_len = %u: expected 0 (the dataset's, "
		    "%llu) or 1 to %u tokens a row", o->seq_len,
		    (unsigned long long)ds->shape[1], PACKING_SEQ_LEN_MAX);
		return (-1);
	}
	if (!src->own_ds)
		i = session_seq_len_section(cat, src->ds_index, o->seq_len);
	if (i != SIZE_MAX) {
		src->ds = cat->datasets[i];
		src->ds_index = i;
		return (0);
	}
	if (src->own_ds || host->packs == NULL ||
	    strcmp(ds->type, "tokens") != 0) {
		*cause = xasprintf("dataset '%s' is packed in rows of seq_len "
		    "%llu (its section's); seq_len = %u needs a section of its "
		    "own over the same files, such as [dataset %s-%u] with the "
		    "same keys and seq_len = %u (infeedd packs a dataset when "
		    "it opens, and then serves it to a trainer asking '%s' "
		    "with that seq_len), or leave seq_len unset",
		    ds->name, (unsigned long long)ds->shape[1], o->seq_len,
		    ds->name, o->seq_len, o->seq_len, ds->name);
		return (-1);
	}
	rc = packings_want(host->packs, cat, src->ds_index, o->seq_len, cause);
	if (rc == 1) {
		*code = ERRCODE_RESOURCE_EXHAUSTED;
		*cause = xasprintf("seq_len = %u: dataset '%s' is being packed "
		    "at that seq_len for this trainer; it was not ready in "
		    "time: attach again in a moment", o->seq_len, ds->name);
	} else if (rc == -1)
		*code = ERRCODE_RESOURCE_EXHAUSTED;
	return (-1);
}

/* Whether Attach @a waits for a packing (see session-check.h). */
bool
session_check_packing(const struct session_host *host,
    const struct session_attach *a)
{
	const struct dataset	*ds;
	size_t			 index;
	uint32_t		 seq_len = a->options.seq_len;
	char			*cause = NULL;
	int			 rc;

	if (host->packs == NULL || a->has_files || seq_len == 0 ||
	    seq_len > PACKING_SEQ_LEN_MAX ||
	    (ds = catalogue_find(host->cat, a->dataset, &index)) == NULL ||
	    strcmp(ds->type, "tokens") != 0 || ds->ndim != 2 ||
	    ds->shape[1] == seq_len ||
	    session_seq_len_section(host->cat, index, seq_len) != SIZE_MAX)
		return (false);
	rc = packings_want(host->packs, host->cat, index, seq_len, &cause);
	free(cause);		/* session_check() says it again */
	return (rc == 1);
}

/*
 * Check the label dtype asked for: int32 (the default) or int64.  A dtype
 * is named as infeed.proto's DType names it, DTYPE_ and the upper case of
 * its name.
 */
static int
session_check_label_dtype(struct session_source *src,
    const struct session_options *o, char **cause)
{
	char		name[32] = "DTYPE_UNSPECIFIED";
	const char	*low;
	size_t		i;
	bool		known = o->label_dtype == 0;

	switch (o->label_dtype) {
	case INFEED_DTYPE_INT32:
	case INFEED_DTYPE_INT64:
		src->label_dtype = (enum infeed_dtype)o->label_dtype;
		return (0);
	default:
		break;
	}
	if (!known && dtype_size((enum infeed_dtype)o->label_dtype) != 0) {
		known = true;
		low = dtype_name((enum infeed_dtype)o->label_dtype);
		for (i = 0; low[i] != '\0' && i + 7 < sizeof(name); i++)
			name[6 + i] = (char)toupper((unsigned char)low[i]);
		name[6 + i] = '\0';
	}
	if (known)
		*cause = xasprintf("label_dtype is %s (%d); expected "
		    "DTYPE_INT32 (2, the default) or DTYPE_INT64 (3, what "
		    "torch's CrossEntropyLoss takes)", name,
		    (int)o->label_dtype);
	else
		*cause = xasprintf("label_dtype is %d, which is no DType; "
		    "expected DTYPE_INT32 (2, the default) or DTYPE_INT64 (3, "
		    "what torch's CrossEntropyLoss takes)", (int)o->label_dtype);
	return (-1);
}

/*
 * Read what Attach.files says of the client's files into @spec, and refuse
 * what is wrong with it before any descriptor is touched: on the event
 * loop, since it reads only the request.
 */
int
session_files_check(const struct session_attach *a, size_t nfds,
    struct dataset_files *spec, enum errcode *code, char **cause)
{
	const struct session_files	*f = &a->files;
	size_t				 want, i;

	*code = ERRCODE_INVALID_ARGUMENT;
	*cause = NULL;
	memset(spec, 0, sizeof(*spec));
	spec->data_format = f->data_format;
	spec->labels_format = f->labels_format;
	spec->dtype = f->has_dtype ? f->dtype : 0;
	spec->label_dtype = f->has_label_dtype ? f->label_dtype : 0;
	want = spec->labels_format == DATASET_FORMAT_NONE ? 1 : 2;
	if (*a->dataset == '\0' || !utf8_valid(a->dataset,
	    strlen(a->dataset)))
		*cause = xasprintf("a session on files needs a name (Attach."
		    "dataset, shown in logs and stats): 1 to %d bytes of "
		    "UTF-8", INFEED_MAX_DATASET_NAME);
	else if (nfds != want)
		*cause = xasprintf("%zu file descriptors came with the Attach "
		    "frame where its files need %zu: the data file's, then "
		    "the labels file's when labels_format is not none, as "
		    "SCM_RIGHTS with the frame's first byte", nfds, want);
	else if (f->ndim > INFEED_MAX_DIMS)
		*cause = xasprintf("Files.shape has %zu dimensions; a sample "
		    "has at most %d", f->ndim, INFEED_MAX_DIMS);
	else if (spec->data_format == DATASET_FORMAT_NPY &&
	    (f->ndim > 0 || f->has_dtype))
		*cause = xasprintf("npy data says its own shape and dtype; "
		    "leave Files.shape and Files.dtype unset");
	else if (spec->labels_format != DATASET_FORMAT_RAW &&
	    f->has_label_dtype)
		*cause = xasprintf("Files.label_dtype is for raw labels only; "
		    "leave it unset");
	if (*cause != NULL)
		return (-1);
	spec->ndim = (uint32_t)f->ndim;
	for (i = 0; i < f->ndim; i++)
		spec->shape[i] = f->shape[i];
	return (0);
}

/*
 * Open the client's files as the session's dataset, from the descriptors
 * that came with the Attach (taken over).  The name is only for display;
 * there is no catalogue to find it in or allow_groups to check: the kernel
 * checked the client's own access when it opened the files.  This is the
 * synchronous way, for an Attach no helper thread checked; infeedd checks
 * them on a helper thread (attach-check.c).
 */
static int
session_open_files(struct session_source *src, const struct session_attach *a,
    int *fds, size_t nfds, enum errcode *code, char **cause)
{
	size_t	i;
	bool	content;

	if (session_files_check(a, nfds, &src->files, code, cause) == -1) {
		for (i = 0; i < nfds; i++)
			close(fds[i]);
		return (-1);
	}
	src->ds = dataset_open_files(a->dataset, &src->files, fds[0],
	    nfds > 1 ? fds[1] : -1, false, &content, cause);
	if (src->ds == NULL) {
		if (content)
			*code = ERRCODE_DATA;
		if (*cause == NULL)
			*cause = xasprintf("out of memory");
		return (-1);
	}
	src->own_ds = true;
	src->ds_index = UINT32_MAX;
	return (0);
}

/* May @client attach to catalogue dataset src->ds_index? */
static bool
session_allowed(const struct catalogue *cat,
    const struct session_client *client, const struct session_source *src,
    const struct session_checked *chk)
{
	if (catalogue_allows_gid(cat, src->ds_index, client->gid))
		return (true);
	if (chk != NULL && chk->have_groups)
		return (catalogue_allows_groups(cat, src->ds_index,
		    client->gid, chk->groups, chk->ngroups));
	/*
	 * Only without a thread's answer (session_new(), or a reload that
	 * restricted the dataset while the Attach waited): ask now.
	 */
	return (catalogue_allows(cat, src->ds_index, client->uid,
	    client->gid));
}

/*
 * Elastic resume: start_epoch's stages into the sampler's options, their
 * count checked before anything is allocated (the sampler checks each).
 */
static int
session_check_stages(const struct session_options *o, struct sampler_opts *so,
    char **cause)
{
	if (o->nstages > INFEED_MAX_ELASTIC_STAGES) {
		*cause = xasprintf("start_epoch_stages has %zu stages; "
		    "expected at most %d (INFEED_MAX_ELASTIC_STAGES), one for "
		    "each process count epoch %llu went through", o->nstages,
		    INFEED_MAX_ELASTIC_STAGES,
		    (unsigned long long)o->start_epoch);
		return (-1);
	}
	so->stages_epoch = o->start_epoch;
	so->nstages = (uint32_t)o->nstages;
	memcpy(so->stages, o->stages, o->nstages * sizeof(o->stages[0]));
	return (0);
}

/*
 * start_step counts steps of start_epoch as this process count splits it:
 * of the whole epoch, or of what its stages left.  An elastic epoch with
 * nothing left has no step: start_step 0 then starts at its end.
 */
static int
session_check_start_step(const struct session_source *src,
    const struct session_options *o, char **cause)
{
	uint64_t	steps;

	steps = sampler_epoch_steps(&src->sampler, o->start_epoch);
	if (o->start_step < steps || (steps == 0 && o->start_step == 0))
		return (0);
	if (o->nstages == 0)
		*cause = xasprintf("start_step is %llu but an epoch has %llu "
		    "steps (0 to %llu)", (unsigned long long)o->start_step,
		    (unsigned long long)steps,
		    (unsigned long long)steps - 1);
	else
		*cause = xasprintf("start_step is %llu but what the %zu "
		    "start_epoch_stages left of epoch %llu makes %llu steps "
		    "for %u processes; expected %s%llu (start_step counts "
		    "the steps of the last stage, this one)",
		    (unsigned long long)o->start_step, o->nstages,
		    (unsigned long long)o->start_epoch,
		    (unsigned long long)steps, o->process_count,
		    steps > 0 ? "0 to " : "", (unsigned long long)(steps > 0 ?
		    steps - 1 : 0));
	return (-1);
}

/*
 * Check the access and options an Attach brings; fill in the sampler.
 * With @chk, the client's files were opened (and its groups looked up) on
 * a helper thread already: take them from there.
 */
int
session_check(const struct session_host *host,
    const struct session_client *client, const struct session_attach *a,
    int *fds, size_t nfds, struct session_checked *chk,
    struct session_source *src, enum errcode *code, char **cause)
{
	const struct session_options	*o = &a->options;
	struct sampler_opts		 so;

	memset(src, 0, sizeof(*src));
	*cause = NULL;
	if (!a->has_files && nfds > 0) {
		*code = ERRCODE_INVALID_ARGUMENT;
		*cause = xasprintf("%zu file descriptors came with an Attach "
		    "to a catalogue dataset; descriptors come only with "
		    "Attach.files", nfds);
		while (nfds > 0)
			close(fds[--nfds]);
		return (-1);
	}
	if (a->has_files && chk != NULL && chk->ds != NULL) {
		src->files = chk->files;
		src->ds = chk->ds;
		chk->ds = NULL;
		src->own_ds = true;
		src->ds_index = UINT32_MAX;
	} else if (a->has_files) {
		if (session_open_files(src, a, fds, nfds, code, cause) == -1)
			return (-1);
	} else if ((src->ds = catalogue_find(host->cat, a->dataset,
	    &src->ds_index)) == NULL) {
		*code = ERRCODE_NOT_FOUND;
		*cause = xasprintf("no such dataset; 'infeedctl datasets' "
		    "lists the catalogue");
		return (-1);
	}
	if (!src->own_ds && !session_allowed(host->cat, client, src, chk)) {
		*code = ERRCODE_PERMISSION_DENIED;
		*cause = xasprintf("permission denied: uid %u (gid %u) is not in "
		    "any group that allow_groups in %s permits for this "
		    "dataset; ask the operator to add you to one",
		    (unsigned)client->uid, (unsigned)client->gid,
		    host->config_path);
		log_warnx("client %llu (pid %d, uid %u): refused attach to "
		    "'%s' by allow_groups", (unsigned long long)
		    client->peer_id, (int)client->pid,
		    (unsigned)client->uid, src->ds->name);
		return (-1);
	}
	*code = ERRCODE_INVALID_ARGUMENT;
#define SESSION_CHECK_LIMIT(name, field, type, def, limit, ...)	\
	if (session_check_limit(o->field, #field, #def,			\
	    INFEED_OPTION_##limit, cause) == -1)			\
		return (-1);
	INFEED_LOADER_OPTIONS(SESSION_CHECK_LIMIT)
#undef SESSION_CHECK_LIMIT
	if (session_check_label_dtype(src, o, cause) == -1 ||
	    session_check_seq_len(host, src, o, code, cause) == -1)
		return (-1);
	memset(&so, 0, sizeof(so));
	so.samples = src->ds->samples;
#define SESSION_SAMPLER_OPTION(name, field, type, def, limit, kind, ...) \
	INFEED_OPTION_SAMPLER_##kind(so.field = o->field;)
	INFEED_LOADER_OPTIONS(SESSION_SAMPLER_OPTION)
#undef SESSION_SAMPLER_OPTION
	if (session_check_stages(o, &so, cause) == -1)
		return (-1);
	/* Its table, if any, comes with a ring: session_table(). */
	if (sampler_init_deferred(&src->sampler, &so, cause) == -1)
		return (-1);
	if (session_check_start_step(src, o, cause) == -1)
		return (-1);
	if (transform_init(&src->transform, o->has_transform ? &o->transform :
	    NULL, src->ds, cause) == -1)
		return (-1);
	/* An image's crop and flip draw from the shuffle's seed. */
	src->transform.seed = o->seed;
	src->transform.bad_replace = !src->own_ds &&
	    host->cat->entries[src->ds_index].bad_replace;
	src->out_dims = transform_out_shape(&src->transform, src->ds,
	    src->out_shape);
	return (0);
}

/* A copy of @src's options for @dst to keep; its own pipeline text. */
void
session_options_copy(struct session_options *dst,
    const struct session_options *src)
{
	*dst = *src;
	if (src->transform.pipeline != NULL)
		dst->transform.pipeline = xstrdup(src->transform.pipeline);
}

/* Whether @a and @b ask for the same steps, as options-schema.h says. */
bool
session_options_same_steps(const struct session_options *a,
    const struct session_options *b)
{
#define SESSION_SAME_STEPS(name, field, type, def, limit, kind, ...)	\
	INFEED_OPTION_STEPS_##kind(if (a->field != b->field)		\
		return (false);)
	INFEED_LOADER_OPTIONS(SESSION_SAME_STEPS)
#undef SESSION_SAME_STEPS
	return (true);
}

/* A deep copy of an Attach that outlives its request. */
void
session_attach_copy(struct session_attach *dst,
    const struct session_attach *src)
{
	*dst = *src;
	dst->dataset = xstrdup(src->dataset);
	session_options_copy(&dst->options, &src->options);
}

/* Free what session_attach_copy() made. */
void
session_attach_clear(struct session_attach *a)
{
	free(a->dataset);
	free(a->options.transform.pipeline);
	memset(a, 0, sizeof(*a));
}

/* Free what session_check() made: the client's files, the sampler. */
void
session_source_clear(struct session_source *src)
{
	if (src->own_ds)
		dataset_free(src->ds);
	sampler_clear(&src->sampler);
	memset(src, 0, sizeof(*src));
}
