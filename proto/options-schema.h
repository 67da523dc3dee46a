/* SPDX-License-Identifier: MIT */
/*
 * The loader options an Attach carries (poptorch.DataLoader's, and
 * infeed's own), each declared once: an X-macro table from which the
 * daemon declares its struct session_options and reads LoaderOptions into
 * it (daemon/session-check.h, daemon/peer.c), gives the sampler its
 * options and checks their limits (daemon/session-check.c), and renders
 * them into a session's Stats (daemon/stats-frame.c), and says which a
 * shared group's members agree on (session_options_same_steps(), for
 * daemon/group.c);
 * libinfeed fills in infeed_options_init()'s defaults
 * (client/libinfeed-abi.c), builds LoaderOptions (client/libinfeed-proto.c)
 * and reads a session's back (client/libinfeed-stats.c), which infeedctl
 * status --json prints; the Python binding reads the loader's options
 * dict (python/infeed/_infeed-options.c); the tests' oracle and infeedctl
 * bench --verify make the sampler's options.
 *
 * A name is the option's field in infeed.proto's LoaderOptions, in
 * infeed.h's struct infeed_options and the Python binding's key; those
 * two declarations stay as they are (field numbers and the struct's
 * layout are the protocol and the ABI): the code that uses each side
 * checks the entry's type against it at compile time, and the tests
 * check the default against infeed.proto's (test-stats-frame) and each
 * option's row in docs/protocol.md's "Loader options", which says what
 * it means (test-protocol's document case).
 *
 * A new option is its proto field, its infeed.h field, one line here and
 * the code that acts on it.  The options that are messages or arrays
 * (transform, start_epoch_stages) and libinfeed's own (copy_on_write,
 * reconnect_timeout_ms, the float32 transform) are not in the table.
 */
#ifndef INFEED_OPTIONS_SCHEMA_H
#define INFEED_OPTIONS_SCHEMA_H

#include <stdbool.h>
#include <stdint.h>

#include "infeed-dtype.h"
#include "infeed-limits.h"

/*
 * X(name, field, type, def, limit, kind, lib, stat), where
 *  field	the daemon's struct session_options field (and struct
 *		sampler_opts's, for the sampler's options);
 *  type	its C type there, and in infeed.h's struct but for
 *		label_dtype (an int there, a DType in the proto);
 *  def		the protocol's default ([default] in infeed.proto), and
 *		infeed_options_init()'s but for share (see infeed.h);
 *  limit	LIMIT(min, max, unit): the daemon refuses a value outside
 *		[min, max] (session_check()); NOLIMIT: none but the type's
 *		(the sampler judges its own options: sampler_init());
 *  kind	SAMPLER: the sampler takes it (the order of the samples);
 *		RING: it decides what else a step in the ring holds, or
 *		when (with the sampler's, what the members of a shared
 *		group agree on); SESSION: neither;
 *  lib		LIB: infeed.h's struct infeed_options has it; LIB0: the
 *		same, and 0 there is the protocol's default (libinfeed
 *		leaves it out of LoaderOptions); NOLIB: the protocol's only;
 *  stat	STAT where infeed.h's struct infeed_session_stats has it
 *		(libinfeed reads a session's Stats into it), else NOSTAT.
 */
#define INFEED_LOADER_OPTIONS(X)					\
	X(batch_size, batch_size, uint32_t, 1, NOLIMIT, SAMPLER, LIB, STAT) \
	X(device_iterations, device_iterations, uint32_t, 1, NOLIMIT,	\
	    SAMPLER, LIB, STAT)						\
	X(replication_factor, replication_factor, uint32_t, 1, NOLIMIT,	\
	    SAMPLER, LIB, STAT)						\
	X(gradient_accumulation, gradient_accumulation, uint32_t, 1,	\
	    NOLIMIT, SAMPLER, LIB, STAT)				\
	X(shuffle, shuffle, bool, false, NOLIMIT, SAMPLER, LIB, STAT)	\
	X(seed, seed, uint64_t, 0, NOLIMIT, SAMPLER, LIB, STAT)		\
	X(drop_last, drop_last, bool, true, NOLIMIT, SAMPLER, LIB, STAT) \
	X(num_workers, num_workers, uint32_t, 0, NOLIMIT, SESSION, LIB,	\
	    STAT)							\
	X(persistent_workers, persistent_workers, bool, false, NOLIMIT,	\
	    SESSION, NOLIB, NOSTAT)					\
	X(buffer_size, buffer_size, uint32_t, 3,			\
	    LIMIT(1, INFEED_MAX_SLOTS, "slots"), RING, LIB, STAT)	\
	X(load_indefinitely, load_indefinitely, bool, true, NOLIMIT,	\
	    RING, LIB, NOSTAT)						\
	X(early_preload, early_preload, bool, false, NOLIMIT, SESSION,	\
	    LIB, NOSTAT)						\
	X(distributed_process_id, process_id, uint32_t, 0, NOLIMIT,	\
	    SAMPLER, LIB, STAT)						\
	X(distributed_process_count, process_count, uint32_t, 1,	\
	    NOLIMIT, SAMPLER, LIB, STAT)				\
	X(start_epoch, start_epoch, uint64_t, 0, NOLIMIT, SESSION, LIB,	\
	    NOSTAT)							\
	X(start_step, start_step, uint64_t, 0, NOLIMIT, SESSION, LIB,	\
	    NOSTAT)							\
	X(label_dtype, label_dtype, uint32_t, INFEED_DTYPE_INT32,	\
	    NOLIMIT, RING, LIB0, NOSTAT)				\
	X(share, share, bool, false, NOLIMIT, SESSION, LIB, NOSTAT)	\
	X(seq_len, seq_len, uint32_t, 0, NOLIMIT, RING, LIB0, NOSTAT)

/* A limit as arguments: min, max, " unit" (NOLIMIT: the type's). */
#define INFEED_OPTION_LIMIT(min, max, unit)	(min), (max), " " unit
#define INFEED_OPTION_NOLIMIT			0, UINT64_MAX, ""

/* For a column: the code (which may hold commas) for some values only. */
#define INFEED_OPTION_SAMPLER_SAMPLER(...)	__VA_ARGS__
#define INFEED_OPTION_SAMPLER_RING(...)
#define INFEED_OPTION_SAMPLER_SESSION(...)
#define INFEED_OPTION_STEPS_SAMPLER(...)	__VA_ARGS__
#define INFEED_OPTION_STEPS_RING(...)		__VA_ARGS__
#define INFEED_OPTION_STEPS_SESSION(...)
#define INFEED_OPTION_LIB(...)			__VA_ARGS__
#define INFEED_OPTION_LIB0(...)			__VA_ARGS__
#define INFEED_OPTION_NOLIB(...)
#define INFEED_OPTION_ALWAYS_LIB		1	/* sent: LIB */
#define INFEED_OPTION_ALWAYS_LIB0		0
#define INFEED_OPTION_STAT(...)			__VA_ARGS__
#define INFEED_OPTION_NOSTAT(...)

#endif /* INFEED_OPTIONS_SCHEMA_H */
