/* SPDX-License-Identifier: MIT */
/*
 * libinfeed: the client library of infeedd.
 *
 * A trainer connects to infeedd, attaches to a dataset with loader options
 * (poptorch.DataLoader's, with its defaults), then takes device steps with
 * infeed_next() and gives them back with infeed_release().  A step's data,
 * labels and dataset indices point straight into the daemon's shared ring:
 * nothing is copied, and the memory stays valid until the step is released.
 *
 *	struct infeed *f = infeed_new();
 *	struct infeed_options o;
 *	struct infeed_step st;
 *
 *	infeed_options_init(&o);
 *	o.batch_size = 16;
 *	o.device_iterations = 50;
 *	if (infeed_connect(f, NULL, "my-trainer") != INFEED_OK ||
 *	    infeed_attach(f, "tutorial-synthetic", &o, NULL) != INFEED_OK)
 *		errx(1, "%s", infeed_error(f));
 *	while (infeed_next(f, &st) == INFEED_OK) {
 *		train(st.data, st.labels, st.rows);
 *		infeed_release(f, &st);
 *	}
 *	infeed_free(f);
 *
 * Labels are int32 (st.labels) unless the options ask for int64
 * (o.label_dtype = INFEED_DTYPE_INT64, what torch's CrossEntropyLoss
 * takes): then the workers write int64 labels and st.labels64 points at
 * them, still without a copy.
 *
 * Every call returns an infeed_code; on failure infeed_error() says what
 * went wrong in words.  The library never prints and never exits.  A handle
 * is for one thread at a time.
 *
 * The ABI: every struct carries its size, so fields can be added without
 * breaking trainers built against an older infeed.h; the soname and the
 * symbol versions follow docs/libinfeed.md.
 */
#ifndef INFEED_H
#define INFEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "infeed-dtype.h"
#include "infeed-limits.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INFEED_DEFAULT_SOCKET	"/run/infeed/infeedd.sock"

/* Results of every call. */
enum infeed_code {
	INFEED_OK = 0,
	INFEED_END_OF_DATA = 1,	/* infeed_next: the epoch is over */
	INFEED_TIMEOUT = 2,	/* infeed_next_timeout: no step yet */
	INFEED_ERR_SYSTEM = -1,	/* a system call failed (connect, mmap) */
	INFEED_ERR_PROTOCOL = -2, /* the daemon said something unexpected */
	INFEED_ERR_DAEMON = -3,	/* the daemon refused: see infeed_error() */
	INFEED_ERR_CLOSED = -4,	/* the daemon closed the connection */
	INFEED_ERR_USAGE = -5,	/* a call out of order or a bad argument */
};

/*
 * Structs that cross the library boundary carry their own size.
 *
 * Each starts with struct_size, so that a trainer compiled against an
 * older infeed.h keeps working with a newer libinfeed (docs/libinfeed.md):
 *  - input structs (infeed_options) are set up by infeed_options_init(),
 *    which records sizeof the caller's struct; the library reads only
 *    those bytes and takes the defaults for fields the caller's header did
 *    not have yet;
 *  - output structs are written through macros that pass sizeof the
 *    caller's struct: the library writes at most that many bytes and sets
 *    struct_size to the bytes it filled, so INFEED_HAS_FIELD() tells a
 *    newer trainer whether an older library set a field.
 * The macros keep the calls of earlier releases compiling unchanged.
 */

/* Whether @p, a struct @type with its struct_size set, holds @field. */
#define INFEED_HAS_FIELD(type, p, field)				\
	((size_t)(p)->struct_size >= offsetof(type, field) +		\
	    sizeof(((type *)0)->field))

/* sizeof the struct @p points to; the whole @type when @p is NULL. */
#define INFEED_OUT_SIZE(p, type)	sizeof(*(1 ? (p) : (type *)0))

/* One catalogue entry. */
struct infeed_dataset {
	uint32_t	 struct_size;	/* set by the library */
	uint32_t	 ndim;
	char		*name;
	char		*type;
	uint64_t	 samples;
	uint64_t	 shape[INFEED_MAX_DIMS];
	int		 dtype;		/* enum infeed_dtype */
	int		 label_dtype;
	uint32_t	 classes;
	uint32_t	 reserved0;	/* 0; no tail padding (see above) */
	/*
	 * Since libinfeed 1.12, a token dataset's documents and the real
	 * tokens in its packed rows (packing efficiency: tokens / (samples *
	 * shape[1])); 0 for the others.
	 */
	uint64_t	 documents;
	uint64_t	 tokens;
};

/*
 * Since libinfeed 1.6, elastic resume (docs/protocol.md, "Elastic resume"):
 * a finished stage of the start epoch that its processes ran under another
 * process count.  process_count processes took steps of
 * combined_batch_size rows (what their infeed_session_info said), and all
 * of them completed steps_done steps together.
 */
struct infeed_elastic_stage {
	uint32_t	process_count;
	uint32_t	reserved0;		/* 0 */
	uint64_t	combined_batch_size;
	uint64_t	steps_done;
};

/*
 * Loader options: poptorch.DataLoader and AsynchronousDataAccessor.  Use
 * infeed_options_init() for poptorch's defaults, then change what you need.
 */
struct infeed_options {
	uint32_t	struct_size;		/* set by infeed_options_init */
	uint32_t	batch_size;		/* 1 */
	uint32_t	device_iterations;	/* 1 */
	uint32_t	replication_factor;	/* 1 */
	uint32_t	gradient_accumulation;	/* 1 */
	bool		shuffle;		/* false */
	uint64_t	seed;			/* 0 */
	bool		drop_last;		/* true, as in poptorch */
	uint32_t	num_workers;		/* 0: the daemon's whole pool */
	uint32_t	buffer_size;		/* 3 */
	bool		load_indefinitely;	/* true */
	bool		early_preload;		/* false */
	/* From OMPI_COMM_WORLD_RANK / _SIZE when set, as poptorch.Options. */
	uint32_t	distributed_process_id;	/* 0 */
	uint32_t	distributed_process_count; /* 1 */
	/* Resume: the first step delivered. */
	uint64_t	start_epoch;
	uint64_t	start_step;
	/*
	 * When the daemon goes away mid-session (systemctl restart),
	 * infeed_next reconnects for up to this long and resumes at the step
	 * after the last one delivered, so the order is unchanged.  0: fail
	 * with INFEED_ERR_CLOSED instead.
	 */
	uint32_t	reconnect_timeout_ms;	/* 60000 */
	/* uint8 or float32 -> float32: x * scale, then (x - mean) / std. */
	bool		to_float32;
	float		scale;			/* 1.0 */
	uint32_t	nchannels;		/* 0: no normalisation */
	float		mean[INFEED_MAX_CHANNELS];
	float		std[INFEED_MAX_CHANNELS];
	/*
	 * Since libinfeed 1.1: the labels' type in the ring.  0 or
	 * INFEED_DTYPE_INT32: int32 (infeed_step.labels); INFEED_DTYPE_INT64:
	 * int64 (infeed_step.labels64).  The daemon refuses anything else.
	 * A daemon older than this option ignores it and sends int32 labels:
	 * infeed_session_info.label_dtype says what the ring holds.
	 */
	int		label_dtype;		/* 0: int32 */
	/*
	 * Since libinfeed 1.1, client-side only: map the ring copy-on-write
	 * (MAP_PRIVATE from the read-only descriptor), so the trainer may
	 * write into a step it holds (an in-place op on a tensor): the write
	 * lands in private pages that neither the daemon nor other clients
	 * see, and infeed_next() drops them before it hands over the slot's
	 * next step, so that step shows the daemon's bytes.  Where the
	 * kernel allows (Linux 6.7), a userfaultfd descriptor tracks them.
	 * Pages only read stay mapped: a trainer that reads its steps takes
	 * page faults on its first pass over the ring only.
	 * A slot the process cannot have written since (no page fault, no
	 * change in its count of anonymous pages) is not walked again, so a
	 * write into the ring by another process (a debugger,
	 * process_vm_writev), which takes no fault of this one's, is not
	 * sure to be dropped: it is missed when the process frees as many
	 * anonymous pages meanwhile.  Not with locked
	 * memory: mlock() or mlockall() of a copy-on-write mapping copies
	 * every page of it at once, so the steps ahead show the bytes of the
	 * moment it was locked.  Off: the ring is read-only, and a write
	 * faults.
	 */
	bool		copy_on_write;		/* false */
	uint8_t		reserved0[3];		/* 0; no tail padding */
	/*
	 * Since libinfeed 1.2: what the workers do to each image of an image
	 * dataset (type imagefolder or tar), written as torchvision code:
	 * "RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
	 * Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])"
	 * (docs/protocol.md has the grammar).  Image datasets need one, array
	 * datasets refuse one.  The library keeps its own copy.
	 */
	const char	*transform;		/* NULL */
	/*
	 * Since libinfeed 1.6, elastic resume: start_epoch's finished stages,
	 * first to last, when the job began that epoch under other process
	 * counts; start_step then counts the steps of the current stage (this
	 * process count's).  Every process sends the same stages.  A daemon
	 * that knows no stages is refused (INFEED_ERR_DAEMON, detached); so
	 * is a resume after a daemon restart that lands there.  The stages
	 * apply to start_epoch only; the epochs after it are ordinary.
	 */
	uint32_t	nstart_epoch_stages;	/* 0: none, an ordinary resume */
	uint32_t	reserved1;		/* 0 */
	struct infeed_elastic_stage start_epoch_stages[INFEED_MAX_ELASTIC_STAGES];
	/*
	 * Since libinfeed 1.7, shared pipelines (docs/protocol.md): true
	 * joins a group of trainers of the same user whose options give the
	 * same bytes at every step, so each step is read and decoded once
	 * into one slot they all map; every trainer still gets every sample
	 * of its epochs once, from its own position.  A trainer that falls
	 * behind leaves the group and goes on alone (the library maps its
	 * new ring; step.slot may then be buffer_size or more), and rejoins
	 * when it catches up (the group's ring again); one that stops holds
	 * the others back for INFEED_GROUP_SLACK_MS at most.
	 * true, the default (a caller built before 1.7 never shares);
	 * false: a ring of its own, always.
	 */
	bool		share;			/* true */
	uint8_t		reserved2[3];		/* 0 */
	/*
	 * Since libinfeed 1.12, token datasets: the tokens of a packed row
	 * the trainer expects, checked at the Attach; 0 (an older caller's
	 * zeros too) takes the dataset's.
	 */
	uint32_t	seq_len;		/* 0 */
};

/* What Attach told us about the session and its steps. */
struct infeed_session_info {
	uint32_t	struct_size;		/* set by the library */
	uint32_t	slots;
	uint64_t	session_id;
	uint64_t	combined_batch_size;
	uint64_t	steps_per_epoch;
	uint64_t	last_step_rows;
	uint32_t	ndim;
	int		data_dtype;		/* after any transform */
	uint64_t	sample_shape[INFEED_MAX_DIMS];
	uint64_t	sample_bytes;
	/*
	 * Since libinfeed 1.1: INFEED_DTYPE_INT32 or INFEED_DTYPE_INT64, as
	 * the daemon's Attached said (INT32 from a daemon that did not say).
	 */
	int		label_dtype;
	uint32_t	reserved0;		/* 0; no tail padding */
	/*
	 * Since libinfeed 1.6: the steps of start_epoch from its first step
	 * (of the current stage, with elastic stages) and its last step's
	 * rows; the same as steps_per_epoch and last_step_rows without
	 * stages.  0 for an epoch that the earlier stages finished.
	 */
	uint64_t	start_epoch_steps;
	uint64_t	start_epoch_last_step_rows;
};

/* One device step, valid until infeed_release(). */
struct infeed_step {
	uint32_t	 struct_size;		/* set by the library */
	uint32_t	 slot;
	uint64_t	 epoch;
	uint64_t	 step;			/* within the epoch */
	uint64_t	 rows;			/* combined batch, or fewer */
	const void	*data;			/* [rows, sample_shape...] */
	const int32_t	*labels;		/* [rows]; NULL when int64 */
	const uint64_t	*indices;		/* [rows] dataset indices */
	uint64_t	 session;		/* which attach it came from */
	/* Since libinfeed 1.1: */
	const int64_t	*labels64;		/* [rows]; NULL when int32 */
	int		 label_dtype;		/* INFEED_DTYPE_INT32 or _INT64 */
	uint32_t	 reserved0;		/* 0; no tail padding */
};

/* One session in the daemon's Stats; strings are NULL when not sent. */
struct infeed_session_stats {
	uint32_t	 struct_size;		/* set by the library */
	int32_t		 client_pid;
	uint64_t	 session_id;
	char		*dataset;
	char		*client_name;
	uint32_t	 client_uid;
	uint32_t	 slots;
	uint64_t	 epoch;			/* where the session is */
	uint64_t	 step;
	uint32_t	 slots_ready;
	uint32_t	 slots_held;
	uint64_t	 steps_delivered;
	double		 items_per_s;
	/* The loader options it attached with, when has_options. */
	bool		 has_options;
	bool		 shuffle;
	bool		 drop_last;
	uint32_t	 batch_size;
	uint32_t	 device_iterations;
	uint32_t	 replication_factor;
	uint32_t	 gradient_accumulation;
	uint32_t	 num_workers;
	uint32_t	 buffer_size;
	uint32_t	 distributed_process_id;
	uint32_t	 distributed_process_count;
	uint64_t	 seed;
	/*
	 * Since libinfeed 1.1: seconds the client waited in Next with no step
	 * ready (data wait) and since its first Next; data_wait_s / active_s
	 * is the share of time the trainer was input-bound.
	 */
	double		 data_wait_s;
	double		 active_s;
	/*
	 * Since libinfeed 1.2: an image dataset's pipeline (NULL for none),
	 * and its bad samples replaced by others (bad_samples = replace).
	 */
	char		*transform;
	uint64_t	 samples_replaced;
	/* Since libinfeed 1.4: Error frames sent to the client meanwhile. */
	uint64_t	 errors_sent;
	/*
	 * Since libinfeed 1.7, shared pipelines: the session's group (0:
	 * none), its members, whether the session left one for falling
	 * behind, and the steps the group filled and bytes its workers read
	 * once for all its members (a member's bytes_read is then 0).
	 */
	uint64_t	 group_id;
	uint32_t	 group_members;
	uint32_t	 group_left;
	uint64_t	 group_steps_filled;
	uint64_t	 group_bytes_read;
	/*
	 * Since libinfeed 1.8, the group's history (the same for each of its
	 * members; 0 outside a group): members that left it for holding it
	 * back past the slack, or for waiting on slots that those that left
	 * still hold; members that fell behind but stayed (no room in the
	 * memory budget for a ring of their own, or steps of their former
	 * ring still held); members that rejoined it.
	 */
	uint64_t	 group_leaves_held_back;
	uint64_t	 group_leaves_waited;
	uint64_t	 group_stays;
	uint64_t	 group_rejoins;
};

/* One worker process in the daemon's Stats. */
struct infeed_worker_stats {
	uint32_t	 struct_size;		/* set by the library */
	int32_t		 pid;
	uint32_t	 restarts;
	char		*state;			/* starting (reading its datasets in),
						   idle, busy, stuck, taken-over
						   (killed: another finished its
						   job first), retiring,
						   restarting */
	uint64_t	 rows_done;
	uint32_t	 stuck;			/* killed at job_timeout */
	/*
	 * Since libinfeed 1.9 (in what was reserved, 0 before): jobs another
	 * worker took over from it, which did nothing for a second.
	 */
	uint32_t	 taken_over;
};

/*
 * The daemon's Stats, from infeed_get_stats().  Every object is allocated
 * by the library, so the arrays hold pointers: an entry's size may grow.
 */
struct infeed_stats {
	uint32_t			  struct_size;	/* by the library */
	uint32_t			  clients;
	char				 *daemon_version; /* NULL: not sent */
	uint64_t			  uptime_ms;
	uint64_t			  memory_used;	/* live sessions' rings, tables */
	uint64_t			  memory_budget;
	uint32_t			  jobs_queued;
	uint32_t			  reserved0;
	size_t				  nsessions;
	struct infeed_session_stats	**sessions;
	size_t				  nworkers;
	struct infeed_worker_stats	**workers;
	/* Since libinfeed 1.3: ended sessions' ring memory kept for the next one. */
	uint64_t			  memory_kept;
	uint64_t			  rings_reused;	/* made on kept memory */
	uint64_t			  rings_made;	/* made on new memory */
	/* infeedd's own memory beyond rings and datasets (main + workers). */
	uint64_t			  memory_private;
	/* Whether rings get huge pages: the kernel's shmem THP mode. */
	char				 *huge_pages;	/* NULL: not sent */
	/*
	 * Since libinfeed 1.4: ring memory of ended sessions whose processes
	 * still hold steps, charged to the budget until they exit.
	 */
	uint64_t			  memory_held;
	/*
	 * Since libinfeed 1.7: workers = auto, the pool sizing itself (0
	 * and NULL: a fixed pool, or a daemon that did not say).
	 */
	uint32_t			  workers_auto;	/* 1: workers = auto */
	uint32_t			  workers_max;	/* CPUs it may use */
	char				 *workers_max_why; /* "cgroup cpu.max 2.0
							     CPUs, affinity 2" */
	char				 *pool_last_resize; /* "grew at 12:00:01
							      because ...", or "" */
	char				 *pool_decision; /* the latest, and why */
	uint64_t			  pool_grows;	/* trainers waited */
	uint64_t			  pool_shrinks;	/* workers idle */
	/*
	 * Since libinfeed 1.9: the fork server, which starts the workers:
	 * its pid (0 while none is up, and from a daemon that did not say),
	 * and how many times infeedd started a new one after one died.
	 */
	int32_t				  fork_server_pid;
	uint32_t			  fork_server_restarts;
	/*
	 * Since libinfeed 1.11: how the workers put reads in flight,
	 * "io_uring, kernel 6.1.0" or "threads: io_uring refused (...)"
	 * (NULL: a daemon that did not say).
	 */
	char				 *reads_in_flight;
	/*
	 * Since libinfeed 1.12: the host's cache of remote datasets
	 * (cache_dir; all 0 without one): bytes held, cache_max, blocks
	 * read from it and downloaded since infeedd started, bytes
	 * downloaded, blocks evicted.
	 */
	uint64_t			  cache_bytes;
	uint64_t			  cache_max;
	uint64_t			  cache_hits;
	uint64_t			  cache_misses;
	uint64_t			  cache_bytes_downloaded;
	uint64_t			  cache_evictions;
	/*
	 * Since libinfeed 1.12 too: of the blocks downloaded, those
	 * fetched ahead of their reads (read_ahead); the blocks a read
	 * found missing and waited for.
	 */
	uint64_t			  cache_fetched_ahead;
	uint64_t			  cache_waited;
};

/* How a file passed to infeed_attach_files() is laid out. */
enum infeed_file_format {
	INFEED_FILE_NONE = 0,	/* labels_format: no labels file */
	INFEED_FILE_RAW = 1,	/* fixed-size records, host byte order */
	INFEED_FILE_NPY = 2,	/* a NumPy .npy array, C order */
};

/*
 * The trainer's own files as a dataset (infeed_attach_files).  The trainer
 * opens them, so the kernel checks its own permissions; the daemon gets
 * the open descriptors, never a path.  Set it up with infeed_files_init().
 */
struct infeed_files {
	uint32_t	struct_size;	/* set by infeed_files_init */
	int		data_fd;	/* open for reading (O_RDONLY) */
	int		labels_fd;	/* -1: no labels (every label is 0) */
	int		data_format;	/* INFEED_FILE_RAW or INFEED_FILE_NPY */
	int		labels_format;	/* NONE (the default), RAW or NPY */
	int		dtype;		/* RAW data: enum infeed_dtype */
	int		label_dtype;	/* RAW labels: uint8, int32, int64 (0) */
	uint32_t	ndim;		/* RAW data: the shape of one sample */
	uint64_t	shape[INFEED_MAX_DIMS];
};

struct infeed;

/**
 * infeed_new() - a fresh, unconnected handle; NULL only without memory.
 */
struct infeed	*infeed_new(void);

/**
 * infeed_free() - detach, disconnect, unmap and free; NULL is a no-op.
 */
void		 infeed_free(struct infeed *f);

/**
 * infeed_error() - what the last failing call on @f went wrong with.
 */
const char	*infeed_error(const struct infeed *f);

/**
 * infeed_daemon_code() - the daemon's ErrorCode (infeed.proto) behind the
 * last INFEED_ERR_DAEMON, or 0.
 */
int		 infeed_daemon_code(const struct infeed *f);

/**
 * infeed_connect() - connect to infeedd and say hello.
 * @socket_path: NULL for $INFEED_SOCKET, or INFEED_DEFAULT_SOCKET.
 * @client_name: shown in the daemon's logs and status; may be NULL.
 * A daemon that does not accept or answer within 10 s
 * ($INFEED_CONNECT_TIMEOUT_MS) is an INFEED_ERR_SYSTEM that says so.
 */
int		 infeed_connect(struct infeed *f, const char *socket_path,
		    const char *client_name);

/**
 * infeed_list_datasets() - the daemon's catalogue: *@list is an array of
 * *@n entries, each of the caller's sizeof(struct infeed_dataset); free it
 * with infeed_datasets_free().
 */
#define infeed_list_datasets(f, list, n)				\
	infeed_list_datasets_size((f), (list), (n), sizeof(**(list)))
int		 infeed_list_datasets_size(struct infeed *f,
		    struct infeed_dataset **list, size_t *n, size_t size);

/**
 * infeed_datasets_free() - free what infeed_list_datasets() returned;
 * NULL is a no-op.
 */
#define infeed_datasets_free(list, n)					\
	infeed_datasets_free_size((list), (n),				\
	    INFEED_OUT_SIZE(list, struct infeed_dataset))
void		 infeed_datasets_free_size(struct infeed_dataset *list,
		    size_t n, size_t size);

/**
 * infeed_options_init() - poptorch's defaults, with the distributed process
 * id and count taken from OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE
 * when mpirun set them, and o->struct_size = sizeof(*o).  Writes only
 * sizeof(*o) bytes.  Call it before setting any field.
 */
#define infeed_options_init(o)						\
	infeed_options_init_size((o), sizeof(*(o)))
void		 infeed_options_init_size(struct infeed_options *o,
		    size_t size);

/**
 * infeed_attach() - start a session on @dataset and map its step ring.
 * @o: from infeed_options_init(), or NULL for the defaults.  Fields past
 *     o->struct_size take their defaults; fields this library does not
 *     know must be 0 (else INFEED_ERR_USAGE: it needs a newer libinfeed).
 * @info: filled in when not NULL, at most sizeof(*info) bytes.
 */
#define infeed_attach(f, dataset, o, info)				\
	infeed_attach_size((f), (dataset), (o), (info),			\
	    INFEED_OUT_SIZE(info, struct infeed_session_info))
int		 infeed_attach_size(struct infeed *f, const char *dataset,
		    const struct infeed_options *o,
		    struct infeed_session_info *info, size_t info_size);

/**
 * infeed_files_init() - no files yet (data_fd and labels_fd -1, raw
 * labels int64) and fl->struct_size = sizeof(*fl).  Writes only
 * sizeof(*fl) bytes.  Call it before setting any field.
 */
#define infeed_files_init(fl)						\
	infeed_files_init_size((fl), sizeof(*(fl)))
void		 infeed_files_init_size(struct infeed_files *fl, size_t size);

/**
 * infeed_attach_files() - infeed_attach() with the trainer's own files as
 * the dataset: their descriptors go to the daemon with the Attach, which
 * checks them (open for reading, regular files, their content as @fl
 * says) and reads nothing else.  @name names the session in the daemon's
 * logs and stats (NULL: "files").  The caller's descriptors stay the
 * caller's: the handle keeps duplicates of them, to send again when it
 * resumes after a daemon restart, and closes those at infeed_detach,
 * infeed_free or the next attach.
 */
#define infeed_attach_files(f, name, fl, o, info)			\
	infeed_attach_files_size((f), (name), (fl), (o), (info),	\
	    INFEED_OUT_SIZE(info, struct infeed_session_info))
int		 infeed_attach_files_size(struct infeed *f, const char *name,
		    const struct infeed_files *fl,
		    const struct infeed_options *o,
		    struct infeed_session_info *info, size_t info_size);

/**
 * infeed_next() - wait for the next device step.
 * Return: INFEED_OK with *@step filled, INFEED_END_OF_DATA when the epoch
 * ended and load_indefinitely is off (the next call starts the next epoch),
 * or an error.  INFEED_ERR_DAEMON with infeed_daemon_code() 5 (NOT_FOUND)
 * means the daemon ended the session (an operator's reload changed its
 * dataset): the handle is detached and may attach again.
 */
#define infeed_next(f, step)						\
	infeed_next_size((f), (step), sizeof(*(step)))
int		 infeed_next_size(struct infeed *f, struct infeed_step *step,
		    size_t size);

/**
 * infeed_next_timeout() - infeed_next(), waiting at most @timeout_ms
 * milliseconds (-1: for ever, 0: only what has arrived).
 * Return: as infeed_next(), or INFEED_TIMEOUT when no step came in time or
 * a signal interrupted the wait (so a caller's handler can run: Python's
 * Ctrl-C).  The Next stays outstanding: the next infeed_next or
 * infeed_next_timeout collects its step, and infeed_release may be called
 * meanwhile (a step released then frees its slot for the one awaited).
 * When the session ends first (infeed_detach, infeed_free), a step already
 * come for it is given back, never handed out (since 1.9.1).
 */
#define infeed_next_timeout(f, step, timeout_ms)			\
	infeed_next_timeout_size((f), (step), sizeof(*(step)), (timeout_ms))
int		 infeed_next_timeout_size(struct infeed *f,
		    struct infeed_step *step, size_t size, int timeout_ms);

/**
 * infeed_release() - give a step's slot back; its pointers become invalid.
 * Steps from before a reconnect are already gone: releasing them is a no-op.
 * Reads only the step's first struct_size bytes (as infeed_next set it).
 */
int		 infeed_release(struct infeed *f, const struct infeed_step *step);

/**
 * infeed_detach() - end the session; the connection stays open.  A Next
 * still outstanding is dropped, its step given back if it has come.
 */
int		 infeed_detach(struct infeed *f);

/*
 * Where a handle is (since libinfeed 1.5), for bindings that would
 * otherwise keep a copy of it: the position survives a resume after a
 * daemon restart, and the handle is detached when the daemon ended the
 * session.
 */
struct infeed_state {
	uint32_t	struct_size;		/* set by the library */
	uint32_t	slots_held;		/* steps of this session not
						   released yet */
	uint64_t	session_id;		/* of the session; 0: none */
	uint64_t	next_epoch;		/* the step infeed_next gives */
	uint64_t	next_step;		/* next, within its epoch */
	bool		attached;
	bool		next_pending;		/* a Next is outstanding: the
						   next infeed_next collects
						   it (after INFEED_TIMEOUT) */
	bool		end_of_data_owed;	/* the epoch's last step went
						   out: INFEED_END_OF_DATA
						   comes before next_epoch */
	uint8_t		reserved0;		/* 0 */
	uint32_t	slots;			/* of the session's ring */
	/*
	 * Since libinfeed 1.10, the session's group and ring, so a binding
	 * decodes no slot number: the shared group it joined (Attached; 0:
	 * none), whether the ring it reads now is its own (not in a group,
	 * or it left its group: a Step brought that ring; false again once
	 * a Step brings the group's back), and the step slot number of the
	 * ring's first slot (slots numbers from it).
	 */
	uint64_t	group_id;
	uint32_t	first_slot;
	bool		own_ring;
	uint8_t		reserved1[3];		/* 0 */
};

/**
 * infeed_get_state() - fill *@st with where the handle is; cheap (no
 * request to the daemon), so a binding may ask before every step.
 * Return: INFEED_OK, or INFEED_ERR_USAGE for a struct too small.
 */
#define infeed_get_state(f, st)						\
	infeed_get_state_size((f), (st), sizeof(*(st)))
int		 infeed_get_state_size(struct infeed *f,
		    struct infeed_state *st, size_t size);

/**
 * infeed_get_stats() - the daemon's Stats: sessions, workers and memory.
 * Free *@out with infeed_stats_free().  Every object is allocated at least
 * as large as the caller's struct and zeroed first, so fields this library
 * does not know read as 0 (and INFEED_HAS_FIELD() says so).
 */
#define infeed_get_stats(f, out)					\
	infeed_get_stats_size((f), (out), sizeof(**(out)),		\
	    sizeof(struct infeed_session_stats),			\
	    sizeof(struct infeed_worker_stats))
int		 infeed_get_stats_size(struct infeed *f,
		    struct infeed_stats **out, size_t size,
		    size_t session_size, size_t worker_size);

/**
 * infeed_stats_free() - free what infeed_get_stats() returned; NULL is a
 * no-op.
 */
void		 infeed_stats_free(struct infeed_stats *st);

/**
 * infeed_stats_frame() - the daemon's raw Stats reply (a packed infeed.Frame
 * as defined in infeed.proto), for tools and tests that decode the protocol
 * themselves; free *@buf with free().  Its layout is the protocol's, not
 * this library's: prefer infeed_get_stats().
 */
int		 infeed_stats_frame(struct infeed *f, uint8_t **buf,
		    size_t *len);

/**
 * infeed_dtype_name() - "uint8", "float32", ...
 */
const char	*infeed_dtype_name(int dtype);

/**
 * infeed_dtype_size() - bytes per element, 0 if unknown.
 */
size_t		 infeed_dtype_size(int dtype);

#ifdef __cplusplus
}
#endif

#endif /* INFEED_H */
