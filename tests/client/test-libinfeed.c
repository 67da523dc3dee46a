/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's size-carrying structs (docs/libinfeed.md): a trainer built
 * against an older infeed.h, whose structs end before today's last fields,
 * gets the defaults for what its structs lack, and the library writes
 * nothing past the size the trainer passed; a trainer built against a newer
 * infeed.h gets zeros for what this library does not know, and is refused
 * when it sets such a field.
 *
 * An "old" struct here is a copy of today's cut before its last fields, as
 * an older infeed.h declared it, followed by guard bytes that must stay as
 * they were.  The first cases need no daemon; the others attach to the real
 * infeedd on a private socket (tests/harness.h).
 */

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "libinfeed-private.h"
#include "infeed.h"

#define GUARD		0xa5
#define GUARD_BYTES	64

/* infeed_options as an older infeed.h had it: up to num_workers. */
struct old_options {
	uint32_t	struct_size;
	uint32_t	batch_size;
	uint32_t	device_iterations;
	uint32_t	replication_factor;
	uint32_t	gradient_accumulation;
	bool		shuffle;
	uint64_t	seed;
	bool		drop_last;
	uint32_t	num_workers;
};

/* infeed_session_info before sample_shape and sample_bytes. */
struct old_session_info {
	uint32_t	struct_size;
	uint32_t	slots;
	uint64_t	session_id;
	uint64_t	combined_batch_size;
	uint64_t	steps_per_epoch;
	uint64_t	last_step_rows;
	uint32_t	ndim;
	int		data_dtype;
};

/* infeed_step before session. */
struct old_step {
	uint32_t	 struct_size;
	uint32_t	 slot;
	uint64_t	 epoch;
	uint64_t	 step;
	uint64_t	 rows;
	const void	*data;
	const int32_t	*labels;
	const uint64_t	*indices;
};

/* infeed_dataset before classes. */
struct old_dataset {
	uint32_t	 struct_size;
	uint32_t	 ndim;
	char		*name;
	char		*type;
	uint64_t	 samples;
	uint64_t	 shape[INFEED_MAX_DIMS];
	int		 dtype;
	int		 label_dtype;
};

/* infeed_options as a newer infeed.h might have it. */
struct new_options {
	struct infeed_options	o;
	uint64_t		added_later;
};

/* An old struct of @type followed by guard bytes. */
#define GUARDED(type)							\
	struct {							\
		type	v;						\
		uint8_t	guard[GUARD_BYTES];				\
	}

/* The old structs are today's structs cut at a field boundary. */
_Static_assert(sizeof(struct old_options) ==
    offsetof(struct infeed_options, buffer_size), "old_options");
_Static_assert(sizeof(struct old_session_info) ==
    offsetof(struct infeed_session_info, sample_shape), "old_session_info");
_Static_assert(sizeof(struct old_step) ==
    offsetof(struct infeed_step, session), "old_step");
_Static_assert(sizeof(struct old_dataset) ==
    offsetof(struct infeed_dataset, classes), "old_dataset");

/* Fill @p with the guard pattern. */
static void
guard_fill(void *p, size_t len)
{
	memset(p, GUARD, len);
}

/* Whether @len bytes at @p still hold the guard pattern. */
static int
guard_intact(const void *p, size_t len)
{
	const uint8_t	*b = p;
	size_t		 i;

	for (i = 0; i < len; i++) {
		if (b[i] != GUARD)
			return (0);
	}
	return (1);
}

/* Old options: poptorch's defaults in its fields, nothing written past. */
START_TEST(test_init_old_options_writes_only_its_size)
{
	GUARDED(struct old_options)	g;

	guard_fill(&g, sizeof(g));
	infeed_options_init_size((struct infeed_options *)(void *)&g.v,
	    sizeof(g.v));
	ck_assert_uint_eq(g.v.struct_size, sizeof(struct old_options));
	ck_assert_uint_eq(g.v.batch_size, 1);
	ck_assert_uint_eq(g.v.device_iterations, 1);
	ck_assert_uint_eq(g.v.replication_factor, 1);
	ck_assert_uint_eq(g.v.gradient_accumulation, 1);
	ck_assert(!g.v.shuffle);
	ck_assert_uint_eq(g.v.seed, 0);
	ck_assert(g.v.drop_last);
	ck_assert_uint_eq(g.v.num_workers, 0);
	ck_assert(guard_intact(g.guard, sizeof(g.guard)));
}
END_TEST

/* Today's options through the macro: its size and every default. */
START_TEST(test_init_options_defaults)
{
	struct infeed_options	o;

	memset(&o, GUARD, sizeof(o));
	infeed_options_init(&o);
	ck_assert_uint_eq(o.struct_size, sizeof(o));
	ck_assert_uint_eq(o.batch_size, 1);
	ck_assert_uint_eq(o.buffer_size, 3);
	ck_assert(o.load_indefinitely);
	ck_assert(!o.early_preload);
	ck_assert_uint_eq(o.distributed_process_count, 1);
	ck_assert_uint_eq(o.reconnect_timeout_ms, 60000);
	ck_assert(!o.to_float32);
	ck_assert(o.scale == 1.0f);
	ck_assert_uint_eq(o.nchannels, 0);
	ck_assert(o.std[INFEED_MAX_CHANNELS - 1] == 0.0f);
}
END_TEST

/* Newer options: what this library does not know is zeroed, size kept. */
START_TEST(test_init_new_options_zeroes_unknown_fields)
{
	GUARDED(struct new_options)	g;

	guard_fill(&g, sizeof(g));
	infeed_options_init_size(&g.v.o, sizeof(g.v));
	ck_assert_uint_eq(g.v.o.struct_size, sizeof(struct new_options));
	ck_assert_uint_eq(g.v.o.batch_size, 1);
	ck_assert_uint_eq(g.v.added_later, 0);
	ck_assert(guard_intact(g.guard, sizeof(g.guard)));
}
END_TEST

/* Options that were never initialised are refused, not guessed at. */
START_TEST(test_attach_refuses_uninitialised_options)
{
	struct infeed		*f = infeed_new();
	struct infeed_options	 o;

	memset(&o, 0, sizeof(o));
	o.batch_size = 4;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_USAGE);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "infeed_options_init"));
	infeed_free(f);
}
END_TEST

/* An old trainer's options: its fields used, the defaults for the rest. */
START_TEST(test_attach_old_options_takes_defaults)
{
	struct infeed			*f = client();
	GUARDED(struct old_options)	 g;
	struct infeed_session_info	 info;

	guard_fill(&g, sizeof(g));
	infeed_options_init_size((struct infeed_options *)(void *)&g.v,
	    sizeof(g.v));
	g.v.batch_size = 10;
	/*
	 * Read as today's struct, the guard would be buffer_size 0xa5a5a5a5
	 * (refused) and a reconnect timeout of 46 minutes.
	 */
	ck_assert_msg(infeed_attach(f, "raw", (struct infeed_options *)
	    (void *)&g.v, &info) == INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_eq(info.combined_batch_size, 10);
	ck_assert_uint_eq(info.slots, 3);	/* buffer_size's default */
	ck_assert_uint_eq(info.steps_per_epoch, RAW_N / 10);
	ck_assert(guard_intact(g.guard, sizeof(g.guard)));
	infeed_free(f);
}
END_TEST

/* A newer trainer may pass fields it left at 0, but not set ones. */
START_TEST(test_attach_new_options_refused_when_set)
{
	struct infeed		*f = client();
	struct new_options	 n;

	infeed_options_init_size(&n.o, sizeof(n));
	n.added_later = 1;
	ck_assert_int_eq(infeed_attach(f, "raw", &n.o, NULL), INFEED_ERR_USAGE);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "newer libinfeed"));
	n.added_later = 0;
	n.o.batch_size = 5;
	ck_assert_msg(infeed_attach(f, "raw", &n.o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	infeed_free(f);
}
END_TEST

/* Old session info: filled up to its size, nothing written past. */
START_TEST(test_attach_old_info_written_to_its_size)
{
	struct infeed			*f = client();
	struct infeed_options		 o;
	GUARDED(struct old_session_info) g;

	infeed_options_init(&o);
	o.batch_size = 8;
	guard_fill(&g, sizeof(g));
	ck_assert_int_eq(infeed_attach_size(f, "raw", &o,
	    (struct infeed_session_info *)(void *)&g.v, sizeof(g.v)),
	    INFEED_OK);
	ck_assert_uint_eq(g.v.struct_size, sizeof(g.v));
	ck_assert_uint_eq(g.v.combined_batch_size, 8);
	ck_assert_uint_eq(g.v.steps_per_epoch, RAW_N / 8);
	ck_assert_uint_eq(g.v.ndim, 3);
	ck_assert_int_eq(g.v.data_dtype, INFEED_DTYPE_UINT8);
	ck_assert(guard_intact(g.guard, sizeof(g.guard)));
	infeed_free(f);
}
END_TEST

/* Old steps: written to their size, and released like today's. */
START_TEST(test_next_old_step_written_to_its_size)
{
	struct infeed			*f = client();
	struct infeed_options		 o;
	struct infeed_step		 st;
	GUARDED(struct old_step)	 g;
	int				 i;

	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	/* More steps than slots: each release must reach the daemon. */
	for (i = 0; i < 8; i++) {
		guard_fill(&g, sizeof(g));
		ck_assert_msg(infeed_next_size(f, (struct infeed_step *)
		    (void *)&g.v, sizeof(g.v)) == INFEED_OK, "%s",
		    infeed_error(f));
		ck_assert_uint_eq(g.v.struct_size, sizeof(g.v));
		ck_assert_uint_eq(g.v.step, (uint64_t)i);
		ck_assert_uint_eq(g.v.rows, 10);
		ck_assert_uint_eq(g.v.indices[0], (uint64_t)i * 10);
		ck_assert(guard_intact(g.guard, sizeof(g.guard)));
		ck_assert_int_eq(infeed_release(f, (struct infeed_step *)
		    (void *)&g.v), INFEED_OK);
	}
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.struct_size, sizeof(st));
	ck_assert_uint_eq(st.step, 8);
	/* Too small to hold even its size: refused, nothing written. */
	guard_fill(&g, sizeof(g));
	ck_assert_int_eq(infeed_next_size(f, (struct infeed_step *)
	    (void *)&g.v, 2), INFEED_ERR_USAGE);
	ck_assert(guard_intact(&g, sizeof(g)));
	infeed_free(f);
}
END_TEST

/*
 * The label dtype fields (libinfeed 1.1) and an older caller: options cut
 * before label_dtype get int32 labels (the guard, read as label_dtype,
 * would be refused), session info and steps cut before their label
 * fields are written to their size and get int32 labels through labels.
 */
START_TEST(test_label_dtype_cut_off_for_older_callers)
{
	struct infeed			*f = client();
	GUARDED(struct infeed_options)	 go;
	GUARDED(struct infeed_session_info) gi;
	GUARDED(struct infeed_step)	 gs;
	size_t				 osize, isize, ssize;
	int				 i;

	osize = offsetof(struct infeed_options, label_dtype);
	isize = offsetof(struct infeed_session_info, label_dtype);
	ssize = offsetof(struct infeed_step, labels64);
	guard_fill(&go, sizeof(go));
	infeed_options_init_size(&go.v, osize);
	ck_assert(guard_intact((uint8_t *)&go + osize, sizeof(go) - osize));
	go.v.batch_size = 10;
	guard_fill(&gi, sizeof(gi));
	ck_assert_msg(infeed_attach_size(f, "raw", &go.v, &gi.v, isize) ==
	    INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_eq(gi.v.struct_size, isize);
	ck_assert_uint_eq(gi.v.combined_batch_size, 10);
	ck_assert(guard_intact((uint8_t *)&gi + isize, sizeof(gi) - isize));
	for (i = 0; i < 4; i++) {
		guard_fill(&gs, sizeof(gs));
		ck_assert_int_eq(infeed_next_size(f, &gs.v, ssize), INFEED_OK);
		ck_assert_uint_eq(gs.v.struct_size, ssize);
		ck_assert_ptr_nonnull(gs.v.labels);
		ck_assert_int_eq(gs.v.labels[1], (int32_t)((gs.v.indices[1] *
		    3) % RAW_CLASSES));
		ck_assert(guard_intact((uint8_t *)&gs + ssize,
		    sizeof(gs) - ssize));
		ck_assert_int_eq(infeed_release(f, &gs.v), INFEED_OK);
	}
	infeed_free(f);
}
END_TEST

/* Today's callers: the label dtype in the info and every step. */
START_TEST(test_label_dtype_reported_in_info_and_step)
{
	struct infeed			*f = client();
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_step		 st;

	infeed_options_init(&o);
	ck_assert_int_eq(o.label_dtype, 0);
	ck_assert_int_eq(o.copy_on_write, false);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, &info), INFEED_OK);
	ck_assert_int_eq(info.label_dtype, INFEED_DTYPE_INT32);
	ck_assert(INFEED_HAS_FIELD(struct infeed_session_info, &info,
	    label_dtype));
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(st.label_dtype, INFEED_DTYPE_INT32);
	ck_assert_ptr_nonnull(st.labels);
	ck_assert_ptr_null(st.labels64);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	o.label_dtype = INFEED_DTYPE_INT64;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, &info), INFEED_OK);
	ck_assert_int_eq(info.label_dtype, INFEED_DTYPE_INT64);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert(INFEED_HAS_FIELD(struct infeed_step, &st, label_dtype));
	ck_assert_int_eq(st.label_dtype, INFEED_DTYPE_INT64);
	ck_assert_ptr_null(st.labels);
	ck_assert_ptr_nonnull(st.labels64);
	ck_assert_int_eq(st.labels64[3], (int64_t)((st.indices[3] * 3) %
	    RAW_CLASSES));
	infeed_free(f);
}
END_TEST

/* Old catalogue entries: an array of the old size, freed as such. */
START_TEST(test_list_old_datasets_at_their_stride)
{
	struct infeed		*f = client();
	struct old_dataset	*list;
	size_t			 n, i, raw = SIZE_MAX;

	ck_assert_int_eq(infeed_list_datasets_size(f,
	    (struct infeed_dataset **)(void *)&list, &n, sizeof(*list)),
	    INFEED_OK);
	ck_assert_uint_eq(n, 2);	/* raw and synthetic; broken refused */
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(list[i].struct_size, sizeof(*list));
		if (strcmp(list[i].name, "raw") == 0)
			raw = i;
	}
	ck_assert_uint_ne(raw, SIZE_MAX);
	ck_assert_str_eq(list[raw].type, "raw");
	ck_assert_uint_eq(list[raw].samples, RAW_N);
	ck_assert_uint_eq(list[raw].ndim, 3);
	ck_assert_uint_eq(list[raw].shape[2], RAW_W);
	ck_assert_int_eq(list[raw].label_dtype, INFEED_DTYPE_INT64);
	infeed_datasets_free_size((struct infeed_dataset *)(void *)list, n,
	    sizeof(*list));
	infeed_free(f);
}
END_TEST

/* The bracketed word of shmem_enabled into @buf, or "unknown". */
static const char *
shmem_thp_mode(char *buf, size_t len)
{
	char	 line[256], *a, *b;
	FILE	*fp;

	snprintf(buf, len, "unknown");
	fp = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
	if (fp == NULL)
		return (buf);
	if (fgets(line, sizeof(line), fp) != NULL &&
	    (a = strchr(line, '[')) != NULL && (b = strchr(a, ']')) != NULL)
		snprintf(buf, len, "%.*s", (int)(b - a - 1), a + 1);
	fclose(fp);
	return (buf);
}

/* Stats through the API: the session attached, and every worker. */
START_TEST(test_get_stats)
{
	struct infeed			*f = client(), *g = client();
	struct infeed_options		 o;
	struct infeed_step		 st;
	struct infeed_stats		*stats;
	struct infeed_session_stats	*ss;
	size_t				 i;
	char				 mode[32];

	infeed_options_init(&o);
	o.batch_size = 10;
	o.shuffle = true;
	o.seed = 42;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_msg(infeed_get_stats(g, &stats) == INFEED_OK, "%s",
	    infeed_error(g));
	ck_assert_uint_eq(stats->struct_size, sizeof(*stats));
	ck_assert_ptr_nonnull(stats->daemon_version);
	ck_assert_uint_eq(stats->clients, 2);
	ck_assert_uint_gt(stats->memory_used, 0);
	/* Its own memory, main and workers: at least their heaps. */
	ck_assert_uint_gt(stats->memory_private, 3 * 4096);
#ifndef __SANITIZE_ADDRESS__
	/* Issue 17's bound, but where valgrind runs infeedd. */
	if (strstr(getenv("INFEEDD"), "valgrind") == NULL)
		ck_assert_msg(stats->memory_private <= 32 * 1024 * 1024,
		    "infeedd takes %llu bytes of its own",
		    (unsigned long long)stats->memory_private);
#endif
	/* The kernel's shmem huge page mode, as the daemon read it. */
	ck_assert_ptr_nonnull(stats->huge_pages);
	ck_assert_msg(strcmp(stats->huge_pages, shmem_thp_mode(mode,
	    sizeof(mode))) == 0, "huge pages '%s', the kernel says '%s'",
	    stats->huge_pages, mode);
	ck_assert_uint_eq(stats->nsessions, 1);
	ss = stats->sessions[0];
	ck_assert_uint_eq(ss->session_id, st.session);
	ck_assert_str_eq(ss->dataset, "raw");
	ck_assert_str_eq(ss->client_name, "test");
	ck_assert_int_eq(ss->client_pid, getpid());
	ck_assert(ss->has_options);
	ck_assert_uint_eq(ss->batch_size, 10);
	ck_assert(ss->shuffle);
	ck_assert_uint_eq(ss->seed, 42);
	ck_assert_uint_eq(ss->slots, 3);
	ck_assert_uint_eq(ss->slots_held, 1);
	ck_assert_uint_eq(stats->nworkers, 2);	/* harness: workers = 2 */
	for (i = 0; i < stats->nworkers; i++) {
		ck_assert_int_gt(stats->workers[i]->pid, 0);
		ck_assert_ptr_nonnull(stats->workers[i]->state);
	}
	infeed_stats_free(stats);
	infeed_free(f);
	infeed_free(g);
}
END_TEST

/* Stats for a newer trainer: objects as large as its, the rest zeroed. */
START_TEST(test_get_stats_newer_caller_sizes)
{
	struct infeed		*f = client();
	struct infeed_stats	*stats;
	size_t			 big = sizeof(struct infeed_stats) + 64;
	const uint8_t		*tail;
	size_t			 i;

	ck_assert_int_eq(infeed_get_stats_size(f, &stats, big,
	    sizeof(struct infeed_session_stats) + 64,
	    sizeof(struct infeed_worker_stats) + 64), INFEED_OK);
	/* struct_size says what this library filled. */
	ck_assert_uint_eq(stats->struct_size, sizeof(*stats));
	ck_assert(INFEED_HAS_FIELD(struct infeed_stats, stats, workers));
	tail = (const uint8_t *)stats + sizeof(*stats);
	for (i = 0; i < 64; i++)
		ck_assert_uint_eq(tail[i], 0);
	ck_assert_uint_gt(stats->nworkers, 0);
	tail = (const uint8_t *)stats->workers[0] +
	    sizeof(struct infeed_worker_stats);
	for (i = 0; i < 64; i++)
		ck_assert_uint_eq(tail[i], 0);
	infeed_stats_free(stats);
	infeed_free(f);
}
END_TEST

/*
 * Elastic resume's fields (libinfeed 1.6) and an older caller: options cut
 * before nstart_epoch_stages send no stages (the guard, read as a count,
 * would be refused), and session info cut before start_epoch_steps is
 * written to its size; today's gets start_epoch_steps, which without
 * stages are the epoch's.
 */
START_TEST(test_elastic_fields_cut_off_for_older_callers)
{
	struct infeed			*f = client();
	GUARDED(struct infeed_options)	 go;
	GUARDED(struct infeed_session_info) gi;
	struct infeed_session_info	 info;
	size_t				 osize, isize;

	osize = offsetof(struct infeed_options, nstart_epoch_stages);
	isize = offsetof(struct infeed_session_info, start_epoch_steps);
	guard_fill(&go, sizeof(go));
	infeed_options_init_size(&go.v, osize);
	go.v.batch_size = 10;
	guard_fill(&gi, sizeof(gi));
	ck_assert_msg(infeed_attach_size(f, "raw", &go.v, &gi.v, isize) ==
	    INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_eq(gi.v.struct_size, isize);
	ck_assert_uint_eq(gi.v.steps_per_epoch, RAW_N / 10);
	ck_assert(guard_intact((uint8_t *)&gi + isize, sizeof(gi) - isize));
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	ck_assert_msg(infeed_attach_size(f, "raw", &go.v, &info,
	    sizeof(info)) == INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_eq(info.struct_size, sizeof(info));
	ck_assert_uint_eq(info.start_epoch_steps, RAW_N / 10);
	ck_assert_uint_eq(info.start_epoch_last_step_rows, 10);
	infeed_free(f);
}
END_TEST

/* The group of @f's session in the daemon's Stats (0: none). */
static uint64_t
session_group_of(struct infeed *f)
{
	struct infeed_stats	*stats;
	struct infeed_state	 state;
	uint64_t		 g = UINT64_MAX;
	size_t			 i;

	ck_assert_int_eq(infeed_get_state(f, &state), INFEED_OK);
	ck_assert_int_eq(infeed_get_stats(f, &stats), INFEED_OK);
	for (i = 0; i < stats->nsessions; i++) {
		if (stats->sessions[i]->session_id == state.session_id)
			g = stats->sessions[i]->group_id;
	}
	infeed_stats_free(stats);
	ck_assert_msg(g != UINT64_MAX, "the session is not in the stats");
	return (g);
}

/*
 * Shared pipelines (1.7) are on by default; share = false opts out, and a
 * caller whose options end before share never shares: it may count on
 * step.slot below buffer_size, which a session that left its group breaks.
 */
START_TEST(test_share_by_default_but_not_for_older_callers)
{
	struct infeed		*f = client();
	struct infeed_options	 o;

	infeed_options_init(&o);
	ck_assert(o.share);
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_uint_ne(session_group_of(f), 0);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	o.share = false;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_uint_eq(session_group_of(f), 0);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	infeed_options_init_size(&o, offsetof(struct infeed_options, share));
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_uint_eq(session_group_of(f), 0);
	infeed_free(f);
}
END_TEST

/* Options for the elastic tests: process @p of @count, in order. */
static void
elastic_options(struct infeed_options *o, uint32_t p, uint32_t count,
    uint32_t batch)
{
	infeed_options_init(o);
	o->batch_size = batch;
	o->distributed_process_id = p;
	o->distributed_process_count = count;
}

/*
 * End to end: 4 processes of 10 rows take 7 steps of epoch 0; 3 processes
 * of 9 resume it with that stage.  Their steps are the rule's
 * (start_epoch_steps, the last step's rows), no index comes twice and all
 * but the remainders come; after the elastic epoch comes epoch 1 step 0,
 * the ordinary one for 3.  17 stages are refused by the library.
 */
START_TEST(test_elastic_stage_attach)
{
	static bool			 seen[RAW_N];
	struct infeed			*f;
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_step		 st;
	uint64_t			 delivered = 0, s, k, left;
	uint32_t			 p;

	memset(seen, 0, sizeof(seen));
	for (p = 0; p < 4; p++) {
		f = client();
		elastic_options(&o, p, 4, 10);
		ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
		for (s = 0; s < 7; s++) {
			ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
			for (k = 0; k < st.rows; k++) {
				ck_assert(!seen[st.indices[k]]);
				seen[st.indices[k]] = true;
				delivered++;
			}
			ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
		}
		infeed_free(f);
	}
	/* Stage 0: blocks of 25 steps of 10; 18 steps of each are left. */
	left = 4 * (25 - 7) * 10;
	for (p = 0; p < 3; p++) {
		f = client();
		elastic_options(&o, p, 3, 9);
		o.nstart_epoch_stages = 1;
		o.start_epoch_stages[0].process_count = 4;
		o.start_epoch_stages[0].combined_batch_size = 10;
		o.start_epoch_stages[0].steps_done = 7;
		ck_assert_msg(infeed_attach(f, "raw", &o, &info) == INFEED_OK,
		    "%s", infeed_error(f));
		ck_assert_uint_eq(info.start_epoch_steps, left / (3 * 9));
		ck_assert_uint_eq(info.start_epoch_last_step_rows, 9);
		ck_assert_uint_eq(info.steps_per_epoch, RAW_N / (3 * 9));
		for (s = 0; s < info.start_epoch_steps; s++) {
			ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
			ck_assert_uint_eq(st.epoch, 0);
			ck_assert_uint_eq(st.step, s);
			for (k = 0; k < st.rows; k++) {
				ck_assert(!seen[st.indices[k]]);
				seen[st.indices[k]] = true;
				delivered++;
			}
			ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
		}
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_uint_eq(st.epoch, 1);
		ck_assert_uint_eq(st.step, 0);
		/* The ordinary split for 3: block p starts at p·S·CBS. */
		ck_assert_uint_eq(st.indices[0], p * info.steps_per_epoch * 9);
		infeed_free(f);
	}
	ck_assert_uint_eq(delivered, 4 * 7 * 10 + left / 27 * 27);
	f = client();
	elastic_options(&o, 0, 3, 9);
	o.nstart_epoch_stages = INFEED_MAX_ELASTIC_STAGES + 1;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_USAGE);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "at most 16"));
	infeed_free(f);
}
END_TEST

/* The suite: struct sizes alone, then against the daemon. */
/*
 * Options for the wait and copy-on-write tests: 10 steps of 100 rows, in
 * order, in a ring of the session's own (`share` off): its 3 slots come
 * back every third step, where a group's window would add 58 more.
 */
static struct infeed *
attach_plain(bool cow)
{
	struct infeed		*f = client();
	struct infeed_options	 o;

	infeed_options_init(&o);
	o.batch_size = 100;
	o.copy_on_write = cow;
	o.share = false;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	return (f);
}

/*
 * infeed_next_timeout gives up while the daemon cannot answer, with the
 * Next still outstanding: the next call collects that step, and a release
 * sent meanwhile is answered; no step is lost or repeated.
 */
START_TEST(test_next_timeout_keeps_the_next_outstanding)
{
	struct infeed		*f = attach_plain(false);
	struct infeed_step	 a, b;
	int			 r;

	ck_assert_int_eq(infeed_next(f, &a), INFEED_OK);
	ck_assert_uint_eq(a.step, 0);
	kill(infeedd_pid, SIGSTOP);
	ck_assert_int_eq(infeed_next_timeout(f, &b, 0), INFEED_TIMEOUT);
	ck_assert_int_eq(infeed_next_timeout(f, &b, 50), INFEED_TIMEOUT);
	/* A release while the Next waits. */
	ck_assert_int_eq(infeed_release(f, &a), INFEED_OK);
	kill(infeedd_pid, SIGCONT);
	while ((r = infeed_next_timeout(f, &b, 100)) == INFEED_TIMEOUT)
		;
	ck_assert_int_eq(r, INFEED_OK);
	ck_assert_uint_eq(b.step, 1);
	ck_assert_uint_eq(b.indices[0], 100);
	ck_assert_int_eq(infeed_release(f, &b), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &b), INFEED_OK);
	ck_assert_uint_eq(b.step, 2);
	infeed_free(f);
}
END_TEST

static void
alarm_cb(int sig)
{
	(void)sig;
}

/* A signal during the wait returns INFEED_TIMEOUT, for its handler. */
START_TEST(test_next_timeout_returns_on_a_signal)
{
	struct infeed		*f = attach_plain(false);
	struct sigaction	 sa;
	struct infeed_step	 st;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = alarm_cb;	/* no SA_RESTART, as Python's */
	sigaction(SIGALRM, &sa, NULL);
	kill(infeedd_pid, SIGSTOP);
	ualarm(100000, 0);
	ck_assert_int_eq(infeed_next_timeout(f, &st, 30000), INFEED_TIMEOUT);
	kill(infeedd_pid, SIGCONT);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.step, 0);
	infeed_free(f);
}
END_TEST

/*
 * A wait for ever after a bounded one waits past that bound: the bound is
 * the socket's receive timeout while it lasts (issue 35), and must not
 * stay on it.
 */
START_TEST(test_next_waits_past_an_earlier_bound)
{
	struct infeed		*f = attach_plain(false);
	struct infeed_state	 before, after;
	struct infeed_step	 st;
	pid_t			 waker;

	ck_assert_int_eq(infeed_get_state(f, &before), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	kill(infeedd_pid, SIGSTOP);
	ck_assert_int_eq(infeed_next_timeout(f, &st, 20), INFEED_TIMEOUT);
	if ((waker = fork()) == 0) {
		usleep(300000);		/* 15 times the bound */
		kill(infeedd_pid, SIGCONT);
		_exit(0);
	}
	ck_assert_int_gt(waker, 0);
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_eq(st.step, 1);
	/* Not by a reconnect after a wait cut short (a new session). */
	ck_assert_int_eq(infeed_get_state(f, &after), INFEED_OK);
	ck_assert_uint_eq(after.session_id, before.session_id);
	waitpid(waker, NULL, 0);
	infeed_free(f);
}
END_TEST

/* Detaching with a Next outstanding, then attaching again, works. */
START_TEST(test_detach_with_a_next_outstanding)
{
	struct infeed		*f = attach_plain(false);
	struct infeed_options	 o;
	struct infeed_step	 st;

	kill(infeedd_pid, SIGSTOP);
	ck_assert_int_eq(infeed_next_timeout(f, &st, 20), INFEED_TIMEOUT);
	kill(infeedd_pid, SIGCONT);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	infeed_options_init(&o);
	o.batch_size = 100;
	o.start_step = 3;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.step, 3);
	infeed_free(f);
}
END_TEST

/* How many of this process's descriptors are open on a memfd (a ring's). */
static unsigned
ring_fds(void)
{
	return ((unsigned)count_fds_on("/memfd:"));
}

/* Whether session @sid left its group, as @g's Stats say. */
static bool
group_left(struct infeed *g, uint64_t sid)
{
	struct infeed_stats	*st;
	bool			 left = false;
	size_t			 i;

	ck_assert_int_eq(infeed_get_stats(g, &st), INFEED_OK);
	for (i = 0; i < st->nsessions; i++)
		if (st->sessions[i]->session_id == sid)
			left = st->sessions[i]->group_left != 0;
	infeed_stats_free(st);
	return (left);
}

/* What the budget charges: memory_used and memory_held, as @g sees them. */
static uint64_t
charged(struct infeed *g)
{
	struct infeed_stats	*st;
	uint64_t		 v;

	ck_assert_int_eq(infeed_get_stats(g, &st), INFEED_OK);
	v = st->memory_used + st->memory_held;
	infeed_stats_free(st);
	return (v);
}

/*
 * Loader V of a group of two (*@a keeps both slots) times out in its third
 * infeed_next; once the group leaves V (the slack) its waiting Next is
 * answered by a Step with V's own ring, which nobody collects.
 */
static struct infeed *
forget_a_step(struct infeed **a, struct infeed_step *kept)
{
	struct infeed		*v = client(), *g = client();
	struct infeed_options	 o;
	struct infeed_session_info info;
	struct infeed_step	 st;
	struct pollfd		 pfd;
	uint64_t		 start;

	infeed_options_init(&o);
	o.batch_size = 100;
	o.buffer_size = 2;
	*a = client();
	ck_assert_int_eq(infeed_attach(*a, "raw", &o, NULL), INFEED_OK);
	info.struct_size = sizeof(info);
	ck_assert_int_eq(infeed_attach(v, "raw", &o, &info), INFEED_OK);
	ck_assert_int_eq(infeed_next(*a, &kept[0]), INFEED_OK);
	ck_assert_int_eq(infeed_next(*a, &kept[1]), INFEED_OK);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(infeed_next(v, &st), INFEED_OK);
		ck_assert_int_eq(infeed_release(v, &st), INFEED_OK);
	}
	ck_assert_int_eq(infeed_next_timeout(v, &st, 50), INFEED_TIMEOUT);
	start = now_ms();
	while (!group_left(g, info.session_id)) {
		ck_assert_msg(now_ms() - start < 20000, "V never left");
		usleep(10000);
	}
	/* Its Step, come but unread. */
	pfd = (struct pollfd){ .fd = v->conn.fd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
	infeed_free(g);
	return (v);
}

/*
 * Issue 39, items 7 and 8: a Step nobody collected (its infeed_next timed
 * out, then the session ended) is released at once, with its ring's
 * descriptor closed: the budget holds nothing of it while the process
 * lives on, and the next session's steps come from its own ring (epoch 1
 * step 0 is samples 0-99, not epoch 0 step 3's from the stale ring).
 */
START_TEST(test_forgotten_step_given_back_and_never_mapped)
{
	struct infeed		*a, *v, *g = client();
	struct infeed_options	 o;
	struct infeed_step	 kept[2], st;
	uint64_t		 base = charged(g), used = 0, start;
	unsigned		 j;

	/* Detached: its next session maps its own ring. */
	v = forget_a_step(&a, kept);
	ck_assert_int_eq(infeed_detach(v), INFEED_OK);
	infeed_options_init(&o);
	o.batch_size = 100;
	o.buffer_size = 2;
	o.start_epoch = 1;
	ck_assert_int_eq(infeed_attach(v, "raw", &o, NULL), INFEED_OK);
	for (uint64_t s = 0; s < 3; s++) {
		ck_assert_int_eq(infeed_next(v, &st), INFEED_OK);
		ck_assert_uint_eq(st.epoch, 1);
		ck_assert_uint_eq(st.step, s);
		ck_assert_msg(st.indices[0] == s * 100, "epoch 1 step %llu "
		    "has sample %llu first: a stale ring's step",
		    (unsigned long long)s, (unsigned long long)st.indices[0]);
		for (j = 0; j < RAW_BYTES; j++)
			ck_assert_uint_eq(((const uint8_t *)st.data)[
			    99 * RAW_BYTES + j], raw_byte(s * 100 + 99, j));
		ck_assert_int_eq(infeed_release(v, &st), INFEED_OK);
	}
	ck_assert_uint_eq(ring_fds(), 0);
	infeed_free(v);
	ck_assert_int_eq(infeed_release(a, &kept[0]), INFEED_OK);
	ck_assert_int_eq(infeed_release(a, &kept[1]), INFEED_OK);
	infeed_free(a);
	/* Freed without a detach: the same. */
	v = forget_a_step(&a, kept);
	infeed_free(v);
	ck_assert_int_eq(infeed_release(a, &kept[0]), INFEED_OK);
	ck_assert_int_eq(infeed_release(a, &kept[1]), INFEED_OK);
	infeed_free(a);
	ck_assert_uint_eq(ring_fds(), 0);
	start = now_ms();
	while ((used = charged(g)) != base && now_ms() - start < 5000)
		usleep(10000);
	printf("forgotten steps: %llu bytes charged before, %llu after two "
	    "loaders ended\n", (unsigned long long)base,
	    (unsigned long long)used);
	ck_assert_msg(used == base, "%llu bytes of forgotten steps stay "
	    "charged", (unsigned long long)(used - base));
	infeed_free(g);
}
END_TEST

/*
 * copy_on_write: a trainer writes all over a step it holds; a second
 * client sees the daemon's bytes, and when the slot comes back to the
 * writer with a later step it holds the daemon's bytes again.
 */
START_TEST(test_copy_on_write_writes_stay_private)
{
	struct infeed		*f = attach_plain(true), *g = attach_plain(false);
	struct infeed_step	 st, other;
	uint64_t		 n, r;
	unsigned		 j;

	for (n = 0; n < 10; n++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_int_eq(infeed_next(g, &other), INFEED_OK);
		ck_assert_uint_eq(st.indices[0], other.indices[0]);
		for (r = 0; r < st.rows; r++)
			for (j = 0; j < RAW_BYTES; j++)
				ck_assert_uint_eq(((const uint8_t *)st.data)[r *
				    RAW_BYTES + j], raw_byte(st.indices[r], j));
		memset((void *)(uintptr_t)st.data, 0xee, st.rows * RAW_BYTES);
		memset((void *)(uintptr_t)st.indices, 0xee,
		    st.rows * sizeof(uint64_t));
		for (r = 0; r < other.rows; r++)
			ck_assert_uint_eq(((const uint8_t *)other.data)[r *
			    RAW_BYTES], raw_byte(other.indices[r], 0));
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
		ck_assert_int_eq(infeed_release(g, &other), INFEED_OK);
	}
	infeed_free(g);
	infeed_free(f);
}
END_TEST

/* Whether each byte of @st's data is the daemon's. */
static bool
step_is_daemons(const struct infeed_step *st)
{
	uint64_t	r;
	unsigned	j;

	for (r = 0; r < st->rows; r++)
		for (j = 0; j < RAW_BYTES; j++)
			if (((const uint8_t *)st->data)[r * RAW_BYTES + j] !=
			    raw_byte(st->indices[r], j))
				return (false);
	return (true);
}

/*
 * copy_on_write: the slots given back are restored when one of them is
 * taken again, the writes in a slot the trainer still holds between them
 * staying; and once that slot is given back, its writes are found and
 * dropped in turn (a walk over it while it was held must not have
 * protected them again).  Each slot was written and restored once
 * before, so that the kernel tracks its writes where it can.
 */
START_TEST(test_copy_on_write_restore_keeps_held_writes)
{
	struct infeed		*f = attach_plain(true);
	struct infeed_step	 st[3], next;
	unsigned		 i, n, mid = 3;
	uint64_t		 b;

	for (n = 0; n < 4; n++) {
		ck_assert_int_eq(infeed_next(f, &next), INFEED_OK);
		ck_assert(step_is_daemons(&next));
		memset((void *)(uintptr_t)next.data, 0xee,
		    next.rows * RAW_BYTES);
		ck_assert_int_eq(infeed_release(f, &next), INFEED_OK);
	}
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(infeed_next(f, &st[i]), INFEED_OK);
		memset((void *)(uintptr_t)st[i].data, 0xee,
		    st[i].rows * RAW_BYTES);
		if (st[i].slot == 1)
			mid = i;
	}
	ck_assert_uint_lt(mid, 3);
	for (i = 0; i < 3; i++)
		if (i != mid)
			ck_assert_int_eq(infeed_release(f, &st[i]), INFEED_OK);
	for (n = 0; n < 4; n++) {
		ck_assert_int_eq(infeed_next(f, &next), INFEED_OK);
		ck_assert_uint_ne(next.slot, 1);
		ck_assert_msg(step_is_daemons(&next), "step %llu in slot %u "
		    "shows the trainer's old writes",
		    (unsigned long long)next.step, next.slot);
		for (b = 0; b < st[mid].rows * RAW_BYTES; b++)
			ck_assert_uint_eq(((const uint8_t *)st[mid].data)[b],
			    0xee);
		ck_assert_int_eq(infeed_release(f, &next), INFEED_OK);
	}
	ck_assert_int_eq(infeed_release(f, &st[mid]), INFEED_OK);
	for (n = 0; n < 3; n++) {
		ck_assert_int_eq(infeed_next(f, &next), INFEED_OK);
		ck_assert_msg(step_is_daemons(&next), "step %llu in slot %u "
		    "shows the trainer's old writes",
		    (unsigned long long)next.step, next.slot);
		ck_assert_int_eq(infeed_release(f, &next), INFEED_OK);
	}
	infeed_free(f);
}
END_TEST

/*
 * copy_on_write: a trainer that only reads its steps pays no restore walk
 * once each slot has been restored once: nothing can have written the
 * slots (no page fault, no new anonymous page), so the walk is skipped
 * (issue 35), and every step still shows the daemon's bytes.
 */
START_TEST(test_copy_on_write_clean_slots_not_walked)
{
	struct infeed		*f = attach_plain(true);
	struct infeed_step	 st;
	unsigned		 n;

	for (n = 0; n < 30; n++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert(step_is_daemons(&st));
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	fprintf(stderr, "test_copy_on_write_clean_slots_not_walked: %llu "
	    "slot walks skipped in 30 read-only steps\n",
	    (unsigned long long)f->ring.walks_skipped);
	ck_assert_msg(f->ring.walks_skipped > 0, "30 steps that wrote "
	    "nothing still walked every slot given back");
	infeed_free(f);
}
END_TEST

/* A write into this process by another (process_vm_writev). */
struct remote_write {
	uintptr_t	addr;
	size_t		len;
};

/*
 * The helper of test_copy_on_write_remote_write_dropped: writes 0xee
 * where the parent asks, through process_vm_writev, and answers errno.
 */
static void
remote_writer(int req, int ack)
{
	struct remote_write	 w;
	struct iovec		 local, remote;
	uint8_t			*buf = NULL;
	int			 e;

	while (read(req, &w, sizeof(w)) == (ssize_t)sizeof(w) && w.len > 0) {
		if ((buf = realloc(buf, w.len)) == NULL)
			_exit(1);
		memset(buf, 0xee, w.len);
		local.iov_base = buf;
		local.iov_len = w.len;
		remote.iov_base = (void *)w.addr;
		remote.iov_len = w.len;
		e = process_vm_writev(getppid(), &local, 1, &remote, 1, 0) ==
		    (ssize_t)w.len ? 0 : errno;
		if (write(ack, &e, sizeof(e)) != (ssize_t)sizeof(e))
			_exit(1);
	}
	_exit(0);
}

/*
 * copy_on_write: a write into a held step that costs the trainer no page
 * fault (another process's process_vm_writev, as RDMA or a debugger
 * writes) is still found and dropped when the slot comes back: the check
 * that skips the walk sees the new anonymous pages.  The writer is forked
 * before the steps, so that the fork's own copy-on-write faults are over
 * by then.
 */
START_TEST(test_copy_on_write_remote_write_dropped)
{
	struct infeed		*f;
	struct infeed_step	 st;
	struct remote_write	 w;
	int			 req[2], ack[2], e = 0, status;
	unsigned		 n, written = 0;
	pid_t			 pid;

	(void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	ck_assert_int_eq(pipe(req), 0);
	ck_assert_int_eq(pipe(ack), 0);
	if ((pid = fork()) == 0) {
		close(req[1]);
		close(ack[0]);
		remote_writer(req[0], ack[1]);
	}
	ck_assert_int_gt(pid, 0);
	close(req[0]);
	close(ack[1]);
	f = attach_plain(true);
	for (n = 0; n < 30; n++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_msg(step_is_daemons(&st), "step %llu in slot %u "
		    "shows the other process's old writes",
		    (unsigned long long)st.step, st.slot);
		/* Write every third step once the slots are all stamped. */
		if (n >= 12 && n % 3 == 0 && e == 0) {
			w.addr = (uintptr_t)st.data;
			w.len = st.rows * RAW_BYTES;
			ck_assert_int_eq(write(req[1], &w, sizeof(w)),
			    sizeof(w));
			ck_assert_int_eq(read(ack[0], &e, sizeof(e)),
			    sizeof(e));
			if (e == 0) {
				ck_assert_uint_eq(((const uint8_t *)
				    st.data)[0], 0xee);
				written++;
			}
		}
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	close(req[1]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	close(ack[0]);
	if (written == 0)
		fprintf(stderr, "test_copy_on_write_remote_write_dropped: "
		    "process_vm_writev refused here (%s): nothing checked\n",
		    strerror(e));
	else
		fprintf(stderr, "test_copy_on_write_remote_write_dropped: %u "
		    "steps written by another process, all dropped; %llu "
		    "slot walks skipped\n", written,
		    (unsigned long long)f->ring.walks_skipped);
	infeed_free(f);
}
END_TEST

/* MADV_PAGEOUT (Linux 5.4), for older headers. */
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT	21
#endif

/* Whether the page at @p is swapped out, by /proc/self/pagemap's bit 62. */
static bool
page_swapped(const void *p)
{
	uint64_t	ent = 0;
	size_t		page = (size_t)sysconf(_SC_PAGESIZE);
	int		fd;

	if ((fd = open("/proc/self/pagemap", O_RDONLY)) == -1)
		return (false);
	if (pread(fd, &ent, sizeof(ent), (off_t)((uintptr_t)p / page *
	    sizeof(ent))) != sizeof(ent))
		ent = 0;
	close(fd);
	return ((ent >> 62 & 1) != 0);
}

/*
 * copy_on_write with swap: a page the trainer wrote that went to swap is
 * dropped too, so the slot shows the daemon's bytes when it comes back
 * (it was not, and the trainer saw its own old bytes).  Without swap,
 * MADV_PAGEOUT keeps the page and this checks what it can; the decision
 * on each pagemap entry is tested alone below.
 */
START_TEST(test_copy_on_write_swapped_writes_dropped)
{
	struct infeed		*f = attach_plain(true);
	struct infeed_step	 st;
	size_t			 page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t		 lo, hi;
	uint64_t		 n, r;
	unsigned		 j, swapped = 0;

	for (n = 0; n < 10; n++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		for (r = 0; r < st.rows; r++)
			for (j = 0; j < RAW_BYTES; j++)
				ck_assert_msg(((const uint8_t *)st.data)[r *
				    RAW_BYTES + j] == raw_byte(st.indices[r],
				    j), "step %llu row %llu: the trainer's own "
				    "old bytes came back",
				    (unsigned long long)n,
				    (unsigned long long)r);
		memset((void *)(uintptr_t)st.data, 0xee, st.rows * RAW_BYTES);
		lo = (uintptr_t)st.data / page * page;
		hi = ((uintptr_t)st.data + st.rows * RAW_BYTES + page - 1) /
		    page * page;
		(void)madvise((void *)lo, hi - lo, MADV_PAGEOUT);
		if (page_swapped((const void *)lo))
			swapped++;
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	if (swapped == 0)
		fprintf(stderr, "test_copy_on_write_swapped_writes_dropped: no "
		    "page went to swap (no swap here?): only the decision "
		    "test checks swapped pages\n");
	else
		fprintf(stderr, "test_copy_on_write_swapped_writes_dropped: "
		    "%u of 10 written steps were swapped out before release\n",
		    swapped);
	infeed_free(f);
}
END_TEST

/* Which pagemap entries infeed_release() drops from a copy-on-write ring. */
START_TEST(test_pagemap_written_decision)
{
	const uint64_t	present = 1ULL << 63, swapped = 1ULL << 62,
			file = 1ULL << 61, exclusive = 1ULL << 56,
			soft_dirty = 1ULL << 55;

	ck_assert(infeed_pagemap_written(present | 0x1234));
	ck_assert(infeed_pagemap_written(present | exclusive | soft_dirty));
	ck_assert(infeed_pagemap_written(swapped | 0x5678));
	ck_assert(infeed_pagemap_written(swapped | soft_dirty));
	ck_assert(!infeed_pagemap_written(0));
	ck_assert(!infeed_pagemap_written(soft_dirty));
	ck_assert(!infeed_pagemap_written(present | file));
	ck_assert(!infeed_pagemap_written(present | file | exclusive));
	/* A page of the daemon's shared memory being migrated. */
	ck_assert(!infeed_pagemap_written(swapped | file));
}
END_TEST

static Suite *
libinfeed_suite(void)
{
	Suite	*s = suite_create("libinfeed");
	TCase	*tc;

	tc = tcase_create("sizes");
	tcase_add_test(tc, test_init_old_options_writes_only_its_size);
	tcase_add_test(tc, test_init_options_defaults);
	tcase_add_test(tc, test_init_new_options_zeroes_unknown_fields);
	tcase_add_test(tc, test_attach_refuses_uninitialised_options);
	tcase_add_test(tc, test_pagemap_written_decision);
	suite_add_tcase(s, tc);

	tc = tcase_create("daemon");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_attach_old_options_takes_defaults);
	tcase_add_test(tc, test_attach_new_options_refused_when_set);
	tcase_add_test(tc, test_attach_old_info_written_to_its_size);
	tcase_add_test(tc, test_next_old_step_written_to_its_size);
	tcase_add_test(tc, test_label_dtype_cut_off_for_older_callers);
	tcase_add_test(tc, test_label_dtype_reported_in_info_and_step);
	tcase_add_test(tc, test_list_old_datasets_at_their_stride);
	tcase_add_test(tc, test_elastic_fields_cut_off_for_older_callers);
	tcase_add_test(tc, test_share_by_default_but_not_for_older_callers);
	tcase_add_test(tc, test_elastic_stage_attach);
	tcase_add_test(tc, test_get_stats);
	tcase_add_test(tc, test_get_stats_newer_caller_sizes);
	tcase_add_test(tc, test_next_timeout_keeps_the_next_outstanding);
	tcase_add_test(tc, test_next_timeout_returns_on_a_signal);
	tcase_add_test(tc, test_next_waits_past_an_earlier_bound);
	tcase_add_test(tc, test_detach_with_a_next_outstanding);
	tcase_add_test(tc, test_forgotten_step_given_back_and_never_mapped);
	tcase_add_test(tc, test_copy_on_write_writes_stay_private);
	tcase_add_test(tc, test_copy_on_write_swapped_writes_dropped);
	tcase_add_test(tc, test_copy_on_write_restore_keeps_held_writes);
	tcase_add_test(tc, test_copy_on_write_clean_slots_not_walked);
	tcase_add_test(tc, test_copy_on_write_remote_write_dropped);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(libinfeed_suite()));
}
