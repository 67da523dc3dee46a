/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's ABI: the public entry points that take or fill a
 * size-carrying struct (docs/libinfeed.md).  Inside the library every
 * struct is this infeed.h's whole struct: what comes in is widened to it
 * (defaults for what the caller's struct lacks), what goes out is cut to
 * the caller's size (infeed_put); only this file (and the Stats' decoding)
 * looks at sizes.  The session's work is libinfeed.c's.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libinfeed-private.h"
#include "number.h"
#include "options-schema.h"

/*
 * No struct may end in padding: a field added later would start inside an
 * older struct's size, and an older caller's padding would be read as it.
 */
_Static_assert(sizeof(struct infeed_options) ==
    FIELD_END(struct infeed_options, seq_len),
    "infeed_options has tail padding");
_Static_assert(sizeof(struct infeed_session_info) ==
    FIELD_END(struct infeed_session_info, start_epoch_last_step_rows),
    "infeed_session_info has tail padding");
_Static_assert(sizeof(struct infeed_step) ==
    FIELD_END(struct infeed_step, reserved0), "infeed_step has tail padding");
_Static_assert(sizeof(struct infeed_dataset) ==
    FIELD_END(struct infeed_dataset, tokens),
    "infeed_dataset has tail padding");
_Static_assert(sizeof(struct infeed_stats) ==
    FIELD_END(struct infeed_stats, cache_waited),
    "infeed_stats has tail padding");
_Static_assert(sizeof(struct infeed_session_stats) ==
    FIELD_END(struct infeed_session_stats, group_rejoins),
    "infeed_session_stats has tail padding");
_Static_assert(sizeof(struct infeed_files) ==
    FIELD_END(struct infeed_files, shape), "infeed_files has tail padding");
_Static_assert(sizeof(struct infeed_worker_stats) ==
    FIELD_END(struct infeed_worker_stats, taken_over),
    "infeed_worker_stats has tail padding");
_Static_assert(sizeof(struct infeed_elastic_stage) ==
    FIELD_END(struct infeed_elastic_stage, steps_done),
    "infeed_elastic_stage has tail padding");
_Static_assert(sizeof(struct infeed_state) ==
    FIELD_END(struct infeed_state, reserved1), "infeed_state has tail padding");

/*
 * Write the library's @have bytes at @src to the caller's @size bytes at
 * @dst: what fits, then zeros.  Return: the bytes copied.
 */
size_t
infeed_put(void *dst, size_t size, const void *src, size_t have)
{
	size_t	n = size < have ? size : have;

	memcpy(dst, src, n);
	if (size > n)
		memset((uint8_t *)dst + n, 0, size - n);
	return (n);
}

/* Whether bytes @from to @to of @p are all zero. */
static bool
infeed_zero(const void *p, size_t from, size_t to)
{
	const uint8_t	*b = p;

	for (; from < to; from++) {
		if (b[from] != 0)
			return (false);
	}
	return (true);
}

/* Refuse an output struct too small to hold its struct_size. */
int
infeed_check_out_size(struct infeed *f, const char *what, size_t size)
{
	if (size < sizeof(uint32_t) || size > INFEED_MAX_STRUCT_SIZE)
		return (infeed_fail(f, INFEED_ERR_USAGE, "%s of %zu bytes: "
		    "pass the struct as infeed.h declares it", what, size));
	return (INFEED_OK);
}

/* A zeroed object of the larger of the caller's @size and ours, @have. */
void *
infeed_alloc_out(size_t size, size_t have)
{
	return (calloc(1, size > have ? size : have));
}

/* Free the strings of a catalogue entry that the caller's @size holds. */
static void
infeed_dataset_clear(struct infeed_dataset *d, size_t size)
{
	if (size >= FIELD_END(struct infeed_dataset, name))
		free(d->name);
	if (size >= FIELD_END(struct infeed_dataset, type))
		free(d->type);
}

/* Fetch the catalogue as an array of the caller's @size per entry. */
int
infeed_list_datasets_size(struct infeed *f, struct infeed_dataset **list,
    size_t *n, size_t size)
{
	struct infeed_dataset	*whole, *e;
	uint8_t			*out;
	size_t			 i, k, count;
	int			 r;

	if ((r = infeed_check_out_size(f, "struct infeed_dataset", size)) !=
	    INFEED_OK)
		return (r);
	if ((r = infeed_proto_datasets(f, &whole, &count)) != INFEED_OK)
		return (r);
	if ((out = calloc(count + 1, size)) == NULL) {
		infeed_datasets_free_size(whole, count, sizeof(*whole));
		return (infeed_fail(f, INFEED_ERR_SYSTEM, "out of memory"));
	}
	for (i = 0; i < count; i++) {
		e = (struct infeed_dataset *)(void *)(out + i * size);
		k = infeed_put(e, size, &whole[i], sizeof(whole[i]));
		e->struct_size = (uint32_t)k;
		/* Strings past the caller's struct were not handed over. */
		if (k < FIELD_END(struct infeed_dataset, name))
			free(whole[i].name);
		if (k < FIELD_END(struct infeed_dataset, type))
			free(whole[i].type);
	}
	free(whole);
	*n = count;
	*list = (struct infeed_dataset *)(void *)out;
	return (INFEED_OK);
}

/* Free a catalogue listing of @size bytes an entry. */
void
infeed_datasets_free_size(struct infeed_dataset *list, size_t n,
    size_t size)
{
	size_t	i;

	if (list == NULL)
		return;
	for (i = 0; i < n; i++)
		infeed_dataset_clear((struct infeed_dataset *)(void *)
		    ((uint8_t *)list + i * size), size);
	free(list);
}

/* Read a non-negative decimal from the environment. */
static int
infeed_env_uint(const char *name, uint32_t *out)
{
	const char	*s = getenv(name);
	uint64_t	 v;

	if (s == NULL || number_parse_u64(s, 0, UINT32_MAX, &v, NULL) == -1)
		return (-1);
	*out = (uint32_t)v;
	return (0);
}

/* poptorch's defaults, and mpirun's rank and size, in a whole struct. */
static void
infeed_options_defaults(struct infeed_options *o)
{
	uint32_t	rank, size;

	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	/* The protocol's defaults (a LIB0 option's is its 0). */
#define INFEED_OPTION_DEFAULT(name, field, type, def, limit, kind, lib, ...) \
	INFEED_OPTION_##lib(o->name = INFEED_OPTION_ALWAYS_##lib ? (def) : 0;)
	INFEED_LOADER_OPTIONS(INFEED_OPTION_DEFAULT)
#undef INFEED_OPTION_DEFAULT
	o->scale = 1.0f;
	o->reconnect_timeout_ms = 60000;
	/* A trainer built against 1.7 or later shares (infeed.h). */
	o->share = true;
	if (infeed_env_uint("OMPI_COMM_WORLD_RANK", &rank) == 0 &&
	    infeed_env_uint("OMPI_COMM_WORLD_SIZE", &size) == 0) {
		o->distributed_process_id = rank;
		o->distributed_process_count = size;
	}
}

/* The defaults in the caller's struct of @size bytes, which it records. */
void
infeed_options_init_size(struct infeed_options *o, size_t size)
{
	struct infeed_options	d;

	if (size < sizeof(o->struct_size) || size > INFEED_MAX_STRUCT_SIZE)
		return;		/* infeed_attach refuses it */
	infeed_options_defaults(&d);
	infeed_put(o, size, &d, sizeof(d));
	o->struct_size = (uint32_t)size;
}

/*
 * The caller's options @o (NULL: the defaults) as a whole struct in @out:
 * its fields, and the defaults for those past its struct_size.
 */
static int
infeed_options_take(struct infeed *f, const struct infeed_options *o,
    struct infeed_options *out)
{
	size_t	size;

	infeed_options_defaults(out);
	if (o == NULL)
		return (INFEED_OK);
	size = o->struct_size;
	if (size < sizeof(o->struct_size) || size > INFEED_MAX_STRUCT_SIZE)
		return (infeed_fail(f, INFEED_ERR_USAGE, "the options' "
		    "struct_size is %zu: set them up with infeed_options_init "
		    "first", size));
	if (size > sizeof(*out) && !infeed_zero(o, sizeof(*out), size))
		return (infeed_fail(f, INFEED_ERR_USAGE, "the options set "
		    "fields past the %zu bytes this libinfeed knows (the "
		    "trainer's are %zu): it needs a newer libinfeed",
		    sizeof(*out), size));
	memcpy(out, o, size < sizeof(*out) ? size : sizeof(*out));
	out->struct_size = sizeof(*out);
	/*
	 * A caller built before 1.7 may count on step.slot below buffer_size,
	 * which a shared session's own ring breaks: it never shares.
	 */
	if (size < FIELD_END(struct infeed_options, share))
		out->share = false;
	if (out->nchannels > INFEED_MAX_CHANNELS)
		return (infeed_fail(f, INFEED_ERR_USAGE, "nchannels is %u; at "
		    "most %d", out->nchannels, INFEED_MAX_CHANNELS));
	if (out->nstart_epoch_stages > INFEED_MAX_ELASTIC_STAGES)
		return (infeed_fail(f, INFEED_ERR_USAGE, "nstart_epoch_stages "
		    "is %u; at most %d", out->nstart_epoch_stages,
		    INFEED_MAX_ELASTIC_STAGES));
	return (INFEED_OK);
}

/* No files yet, and the caller's size. */
void
infeed_files_init_size(struct infeed_files *fl, size_t size)
{
	struct infeed_files	d;

	if (size < sizeof(fl->struct_size) || size > INFEED_MAX_STRUCT_SIZE)
		return;		/* infeed_attach_files refuses it */
	memset(&d, 0, sizeof(d));
	d.data_fd = d.labels_fd = -1;
	infeed_put(fl, size, &d, sizeof(d));
	fl->struct_size = (uint32_t)size;
}

/*
 * The caller's files @fl as whole files in @out: its fields, and the
 * defaults for those past its struct_size; checked as far as the library
 * can (the daemon checks the rest).
 */
static int
infeed_files_take(struct infeed *f, const struct infeed_files *fl,
    struct infeed_files *out)
{
	size_t	size;

	if (fl == NULL)
		return (infeed_fail(f, INFEED_ERR_USAGE, "no files given"));
	size = fl->struct_size;
	if (size < FIELD_END(struct infeed_files, data_fd) ||
	    size > INFEED_MAX_STRUCT_SIZE)
		return (infeed_fail(f, INFEED_ERR_USAGE, "the files' "
		    "struct_size is %zu: set them up with infeed_files_init "
		    "first", size));
	if (size > sizeof(*out) && !infeed_zero(fl, sizeof(*out), size))
		return (infeed_fail(f, INFEED_ERR_USAGE, "the files set "
		    "fields past the %zu bytes this libinfeed knows (the "
		    "trainer's are %zu): it needs a newer libinfeed",
		    sizeof(*out), size));
	memset(out, 0, sizeof(*out));
	out->labels_fd = -1;
	memcpy(out, fl, size < sizeof(*out) ? size : sizeof(*out));
	out->struct_size = sizeof(*out);
	if (out->data_fd < 0)
		return (infeed_fail(f, INFEED_ERR_USAGE, "data_fd is %d; open "
		    "the data file for reading first", out->data_fd));
	if ((out->labels_format == INFEED_FILE_NONE) != (out->labels_fd < 0))
		return (infeed_fail(f, INFEED_ERR_USAGE, "labels_fd is %d with "
		    "labels_format %d: a labels file needs labels_format "
		    "INFEED_FILE_RAW or INFEED_FILE_NPY, and no labels file "
		    "INFEED_FILE_NONE and labels_fd -1", out->labels_fd,
		    out->labels_format));
	if (out->ndim > INFEED_MAX_DIMS)
		return (infeed_fail(f, INFEED_ERR_USAGE, "ndim is %u; at most "
		    "%d", out->ndim, INFEED_MAX_DIMS));
	return (INFEED_OK);
}

/* Attach to a dataset with the caller's options and session info sizes. */
int
infeed_attach_size(struct infeed *f, const char *dataset,
    const struct infeed_options *o, struct infeed_session_info *info,
    size_t info_size)
{
	struct infeed_options		opts;
	struct infeed_session_info	whole;
	int				r;

	if (info != NULL && (r = infeed_check_out_size(f,
	    "struct infeed_session_info", info_size)) != INFEED_OK)
		return (r);
	if ((r = infeed_options_take(f, o, &opts)) != INFEED_OK)
		return (r);
	r = infeed_attach_dataset(f, dataset, &opts, info ? &whole : NULL);
	if (r == INFEED_OK && info != NULL)
		info->struct_size = (uint32_t)infeed_put(info, info_size,
		    &whole, sizeof(whole));
	return (r);
}

/* Attach to the caller's own files, passed by descriptor. */
int
infeed_attach_files_size(struct infeed *f, const char *name,
    const struct infeed_files *fl, const struct infeed_options *o,
    struct infeed_session_info *info, size_t info_size)
{
	struct infeed_options		opts;
	struct infeed_session_info	whole;
	struct infeed_files		files;
	int				r;

	if (info != NULL && (r = infeed_check_out_size(f,
	    "struct infeed_session_info", info_size)) != INFEED_OK)
		return (r);
	if ((r = infeed_options_take(f, o, &opts)) != INFEED_OK ||
	    (r = infeed_files_take(f, fl, &files)) != INFEED_OK)
		return (r);
	r = infeed_attach_files_whole(f, name, &files, &opts,
	    info ? &whole : NULL);
	if (r == INFEED_OK && info != NULL)
		info->struct_size = (uint32_t)infeed_put(info, info_size,
		    &whole, sizeof(whole));
	return (r);
}

/* The next step within @timeout_ms, in the caller's struct of @size bytes. */
int
infeed_next_timeout_size(struct infeed *f, struct infeed_step *step,
    size_t size, int timeout_ms)
{
	struct infeed_step	whole;
	int			r;

	/* The hot path: this header's struct (or a newer one). */
	if (size >= sizeof(whole) && size <= INFEED_MAX_STRUCT_SIZE) {
		r = infeed_next_whole(f, step, timeout_ms);
		if (r == INFEED_OK && size > sizeof(whole))
			memset((uint8_t *)step + sizeof(whole), 0,
			    size - sizeof(whole));
		return (r);
	}
	if ((r = infeed_check_out_size(f, "struct infeed_step", size)) !=
	    INFEED_OK)
		return (r);
	if ((r = infeed_next_whole(f, &whole, timeout_ms)) == INFEED_OK) {
		memcpy(step, &whole, size);
		step->struct_size = (uint32_t)size;
	}
	return (r);
}

/* The next step, waiting for it. */
int
infeed_next_size(struct infeed *f, struct infeed_step *step, size_t size)
{
	return (infeed_next_timeout_size(f, step, size, -1));
}

/* Where the handle is, in the caller's struct of @size bytes. */
int
infeed_get_state_size(struct infeed *f, struct infeed_state *st,
    size_t size)
{
	struct infeed_state	whole;
	int			r;

	if ((r = infeed_check_out_size(f, "struct infeed_state", size)) !=
	    INFEED_OK)
		return (r);
	infeed_state_whole(f, &whole);
	st->struct_size = (uint32_t)infeed_put(st, size, &whole,
	    sizeof(whole));
	return (INFEED_OK);
}
