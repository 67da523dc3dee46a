/* SPDX-License-Identifier: MIT */
/*
 * Attach checks: what a client's Attach asks for (the dataset, its access,
 * poptorch's options, the client's own files), judged before any session
 * exists, and what passes: a session's source, the dataset, sampler and
 * transform its steps are made of.  session.c makes sessions of checked
 * sources; attach-check.c checks the client's files on helper threads
 * with session_files_check().
 */
#ifndef INFEED_SESSION_CHECK_H
#define INFEED_SESSION_CHECK_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalogue.h"
#include "errcode.h"
#include "options-schema.h"
#include "sampler.h"
#include "transform.h"

struct event_base;
struct packings;
struct pool;
struct ring_budget;

/*
 * What a client asks of its session (infeed.proto's LoaderOptions, which
 * peer.c converts): the options of options-schema.h, with the defaults
 * the protocol gives for those not set, and the transform and elastic
 * stages; unchecked, session_check() judges them.
 */
struct session_options {
#define SESSION_OPTION_FIELD(name, field, type, ...)	type field;
	INFEED_LOADER_OPTIONS(SESSION_OPTION_FIELD)
#undef SESSION_OPTION_FIELD
	bool			has_transform;
	struct transform_spec	transform;
	/*
	 * Elastic resume: start_epoch's finished stages, as many as asked
	 * (more than INFEED_MAX_ELASTIC_STAGES are refused), of which the
	 * first INFEED_MAX_ELASTIC_STAGES are kept.
	 */
	size_t			nstages;
	struct sampler_stage	stages[INFEED_MAX_ELASTIC_STAGES];
};

/* The client's own files, as its Attach describes them (Attach.files). */
struct session_files {
	uint32_t	data_format;	/* enum dataset_format */
	uint32_t	labels_format;
	uint32_t	dtype;		/* with has_dtype */
	uint32_t	label_dtype;	/* with has_label_dtype */
	bool		has_dtype;
	bool		has_label_dtype;
	size_t		ndim;		/* given: the first INFEED_MAX_DIMS */
	uint64_t	shape[INFEED_MAX_DIMS];	/* are kept */
};

/*
 * An Attach request.  Its strings (the name, a transform's pipeline) are
 * borrowed from the frame, or a session_attach_copy()'s own.
 */
struct session_attach {
	char			*dataset;	/* a name; with files, its own */
	struct session_options	 options;
	bool			 has_files;
	struct session_files	 files;
};

/* What a session needs from the daemon. */
struct session_host {
	const struct catalogue	*cat;
	struct pool		*pool;
	struct ring_budget	*budget;
	const char		*config_path;	/* for messages */
	uint64_t		 group_window;	/* bytes; 0: groups keep none */
	uint64_t		 group_linger_ms; /* a group's store, after it */
	struct event_base	*base;	/* NULL: no shared groups (tests) */
	struct packings		*packs;	/* NULL: no packing on demand */
};

/* Who attaches, for access control and logs. */
struct session_client {
	uint64_t	 peer_id;
	pid_t		 pid;
	uid_t		 uid;
	gid_t		 gid;
};

/* What a helper thread checked of an Attach (attach-check.h), or nothing. */
struct session_checked {
	struct dataset		*ds;		/* the client's files, or NULL */
	struct dataset_files	 files;		/* ... as Attach.files says */
	bool			 have_groups;	/* the client's groups: */
	gid_t			*groups;
	size_t			 ngroups;
};

/*
 * A checked Attach's source of steps: the dataset (the catalogue's, or the
 * client's own files), the sampler (its table not made yet) and the
 * output transform, with the shape of a row it makes.
 */
struct session_source {
	struct dataset		*ds;
	size_t			 ds_index;	/* UINT32_MAX: own_ds */
	struct dataset_files	 files;		/* with own_ds */
	bool			 own_ds;	/* the client's files */
	struct sampler		 sampler;
	enum infeed_dtype	 label_dtype;	/* in the ring */
	struct transform	 transform;
	uint64_t		 out_shape[INFEED_MAX_DIMS]; /* of a row */
	uint32_t		 out_dims;
};

/**
 * session_check_packing() - whether Attach @a asks a tokens dataset for a
 * seq_len that no section packs, and a packing of it is under way
 * (packings_want(): this call starts it): the Attach waits for it before
 * session_check().  Not for a client's files.
 */
bool		 session_check_packing(const struct session_host *host,
		     const struct session_attach *a);

/**
 * session_check() - judge Attach @a of @client against @host's catalogue:
 * the dataset and the client's access to it, or the client's files (the
 * @nfds descriptors @fds that came with the frame, data then labels,
 * taken over and closed on failure too; or, with @chk, opened on a helper
 * thread already: its dataset is taken over, chk->ds then NULL), and the
 * options.  What passes goes into @src (session_source_clear() frees it,
 * whatever was returned).
 * Return: 0, or -1 with *@code and *@cause (malloc'd) saying what was
 * wrong and what was expected.
 */
int		 session_check(const struct session_host *host,
		    const struct session_client *client,
		    const struct session_attach *a, int *fds, size_t nfds,
		    struct session_checked *chk, struct session_source *src,
		    enum errcode *code, char **cause);

/**
 * session_source_clear() - free what session_check() made of @src.
 */
void		 session_source_clear(struct session_source *src);

/**
 * session_files_check() - what Attach @a says of the client's files, and
 * the @nfds descriptors that came with it, read into @spec, or refused
 * (-1 with *@code and *@cause) before any descriptor is touched.
 */
int		 session_files_check(const struct session_attach *a,
		    size_t nfds, struct dataset_files *spec,
		    enum errcode *code, char **cause);

/**
 * session_options_copy() - a copy of @src for @dst to keep, with its own
 * pipeline text (freed with free(dst->transform.pipeline)).
 */
void		 session_options_copy(struct session_options *dst,
		    const struct session_options *src);

/**
 * session_options_same_steps() - whether @a and @b agree on every option
 * that decides which samples a step holds, in what form and when (the
 * SAMPLER and RING options of options-schema.h): what the members of a
 * shared group must agree on, with the dataset and the transform.
 */
bool		 session_options_same_steps(const struct session_options *a,
		    const struct session_options *b);

/**
 * session_attach_copy(), session_attach_clear() - a deep copy of @a, for
 * an Attach that outlives its frame; and freeing one.
 */
void		 session_attach_copy(struct session_attach *dst,
		    const struct session_attach *src);
void		 session_attach_clear(struct session_attach *a);

#endif /* INFEED_SESSION_CHECK_H */
