/* SPDX-License-Identifier: MIT */
/*
 * The reader interface: a dataset as a reader fills it (struct dataset),
 * the table of operations each reader provides (struct dataset_ops), and
 * what the readers share, implemented in reader.c: messages, numbers and
 * shapes from a section, read-only maps of files and the checks that they
 * still hold a row, label scans, the raw and npy readers' pair of files,
 * and a dataset's release.  The names keep the dataset_ prefix: they are
 * the dataset library's, and dataset.h, the front that picks a reader
 * (dataset.c), includes this header for its callers.  Nothing here knows
 * any particular reader.
 */
#ifndef INFEED_READER_H
#define INFEED_READER_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "infeed-limits.h"


/* One "key = value" of a [dataset NAME] section, in file order. */
struct dataset_kv {
	char	*key;
	char	*value;
};

/* A [dataset NAME] section as read from the config file. */
struct dataset_conf {
	char			*name;
	struct dataset_kv	*kv;
	size_t			 nkv;
	char			*source;	/* "file:line" of the section */
};

struct dataset_ops;
struct sampler_opts;
struct dataset_buf;
struct dataset_map;

/*
 * Where a sample's bytes are, for a worker that reads many at once
 * (dataset_locate()): @len bytes at @off of @fd, and the same bytes in a
 * mapping when the reader has one (@mapped; copied from there when they
 * are resident).
 */
struct dataset_loc {
	int			 fd;	/* -1: only @mapped (memory) */
	uint64_t		 off;
	size_t			 len;
	const uint8_t		*mapped;	/* or NULL */
	const struct dataset_map *map;	/* @fd's, for a short read's why */
	bool			 owned;	/* @fd is the caller's to close */
};

struct dataset {
	char			*name;
	const char		*type;		/* "idx", "raw", "npy", "synthetic",
						   "imagefolder", "tar" */
	uint64_t		 samples;	/* N */
	uint32_t		 ndim;
	uint64_t		 shape[INFEED_MAX_DIMS];	/* one sample */
	enum infeed_dtype		 dtype;
	enum infeed_dtype		 label_dtype;	/* as stored */
	uint32_t		 classes;	/* 0 when unknown */
	size_t			 sample_bytes;	/* prod(shape) * dtype_size */
	char			*data_path;	/* the samples' file; NULL if none */
	char			*labels_path;	/* the labels' file; NULL if none */
	bool			 client_files;	/* dataset_open_files()'s */
	/*
	 * Which opening of a catalogue section this is: unique in the
	 * process, never 0; 0 for a client's files.
	 */
	uint64_t		 serial;
	/*
	 * Bytes the reader keeps in memory while open (a tokens packing), in
	 * each process that opens it: the catalogue charges them to
	 * memory_budget.
	 */
	uint64_t		 memory;
	/*
	 * What ds->memory may come to (dataset_open_within()): a reader
	 * refuses, before it allocates, what would pass it.
	 */
	uint64_t		 memory_room;
	/*
	 * A token dataset's documents and the real tokens in its rows
	 * (samples: the packed rows of shape[1] tokens); 0 for others.
	 */
	uint64_t		 documents;
	uint64_t		 tokens;
	/*
	 * Samples are encoded images (dataset_read_encoded()); ndim, shape,
	 * dtype and sample_bytes are then 0.
	 */
	bool			 encoded;
	/* The classes' names, ds->classes of them; NULL when unnamed. */
	char			**class_names;
	const struct dataset_ops *ops;
	void			*priv;
};

struct dataset_ops {
	const char	*type;
	/* The keys the reader reads, NULL-terminated; see dataset_open(). */
	const char *const *keys;
	const char	*data_key;	/* the key naming the samples' file */
	const char	*labels_key;	/* ... and the labels' file */
	int		(*open)(struct dataset *, const struct dataset_conf *,
			    char **cause);
	/* Write sample @index to @dst (dataset_read()'s @stream); return 0
	 * and set *label, or -1. */
	int		(*read)(const struct dataset *, uint64_t index, void *dst,
			    int64_t *label, bool stream);
	/*
	 * As read, for a reader whose rows change with the epoch (tokens
	 * re-packed): sample @index of epoch @epoch of seed @seed (NULL: read
	 * is the same in every epoch).
	 */
	int		(*read_at)(const struct dataset *, uint64_t index,
			    uint64_t seed, uint64_t epoch, void *dst,
			    int64_t *label, bool stream);
	void		(*close)(struct dataset *);
	/* Encoded readers: see dataset_read_encoded(), dataset_sample_where(). */
	int		(*read_encoded)(const struct dataset *, uint64_t index,
			    struct dataset_buf *, int64_t *label);
	char		*(*sample_where)(const struct dataset *, uint64_t index,
			    char *buf, size_t len);
	/*
	 * Where sample @index is, reading none of it, and its label; 0, or
	 * -1 with errno as read's (NULL: read it with read or read_encoded).
	 */
	int		(*locate)(const struct dataset *, uint64_t index,
			    struct dataset_loc *, int64_t *label);
	/* As sample_where, reading nothing (NULL: sample_where does). */
	char		*(*sample_brief)(const struct dataset *, uint64_t index,
			    char *buf, size_t len);
	/* A session's order, for a reader that uses it: dataset_order_new(). */
	void		*(*order_new)(const struct dataset *,
			    const struct sampler_opts *);
	void		(*order_at)(void *, uint64_t epoch, uint64_t row);
	void		(*order_free)(void *);
	/*
	 * Start fetching samples @idx (@n, a later step's) without waiting
	 * for them: dataset_read_ahead() (NULL: nothing to fetch).
	 */
	void		(*read_ahead)(const struct dataset *, const uint64_t *idx,
			    uint32_t n);
};

/* A worker's buffer for encoded samples, reused from one to the next. */
struct dataset_buf {
	uint8_t	*p;
	size_t	 len;	/* bytes of the last sample read */
	size_t	 cap;	/* bytes allocated at p */
};

/**
 * dataset_conf_get() - value of @key in @conf, or NULL when it is absent.
 */
const char	*dataset_conf_get(const struct dataset_conf *conf,
		    const char *key);

/**
 * dataset_buf_free() - free what @buf holds and zero it.
 */
void		 dataset_buf_free(struct dataset_buf *buf);

/**
 * dataset_free() - close and free @ds; NULL is a no-op.
 */
void		 dataset_free(struct dataset *ds);

/**
 * dataset_buf_reserve() - grow @buf to hold at least @n bytes.
 * Return: 0, or -1 with errno EFBIG over INFEED_MAX_IMAGE_BYTES, ENOMEM.
 */
int		 dataset_buf_reserve(struct dataset_buf *buf, size_t n);

/*
 * A read-only view of a whole file, or of bytes decompressed at open.  A
 * file's descriptor is kept so a read can see the file shrink under it.
 */
struct dataset_map {
	uint8_t		*base;	/* NULL when only checked, not mapped */
	size_t		 len;
	int		 fd;	/* the mapped file; -1 for anonymous memory */
	bool		 shared;	/* a client's: fstat, never lseek */
	uint64_t	 job;	/* the job whose size check is cached */
	uint64_t	 size;	/* the file's size then */
	int64_t		 ctime_ns; /* shared: its ctime then */
};

/* dataset_map_fd()'s flags. */
#define DATASET_MAP_READ	0x1	/* map it, for dataset_read() */
#define DATASET_MAP_SHARED	0x2	/* its offset is a client's too */

/* dataset_map_fd()'s @max: the whole file. */
#define DATASET_MAP_ALL		UINT64_MAX

/*
 * What the raw and npy readers hold, catalogue or client files alike: a
 * file of samples and one of labels (none for a client's without).  A
 * client's files may be mapped only in part, or not at all: the rows
 * beyond a map's len are read with pread (dataset_pair_read()).
 */
struct dataset_pair {
	struct dataset_map	data;
	struct dataset_map	labels;		/* fd -1: no labels */
	uint64_t		data_off;	/* where the samples start */
	uint64_t		labels_off;	/* ... and the labels */
	bool			reads;		/* dataset_read() may read */
	/* A client's, in the daemon: charged to dataset_files_charge(). */
	uint64_t		charged;	/* bytes; 0: none */
	uid_t			charged_uid;
};

/**
 * dataset_error() - set *@cause to "dataset 'NAME': " and the message.
 * Return: -1, so a reader can write return (dataset_error(...)).
 */
int		 dataset_error(char **cause, const struct dataset *ds,
		    const char *fmt, ...)
		    __attribute__((__format__(__printf__, 3, 4)));

/**
 * dataset_open_tick() - a long open (each shard of a tar set, each read of
 * a token file's scan, each class folder of an image folder) counts one
 * step of progress, which dataset_open_ticks() shows (the catalogue tells
 * systemd while it waits); false once dataset_open_stop(true) was called:
 * infeedd is stopping, and the open gives up (DATASET_OPEN_STOPPED) rather
 * than keep the stop waiting for all of it.  Any thread.
 */
bool		 dataset_open_tick(void);
void		 dataset_open_stop(bool stop);
uint64_t	 dataset_open_ticks(void);
#define DATASET_OPEN_STOPPED	"the open was given up: infeedd is stopping"

/**
 * dataset_record_conf() - the "shape" and "dtype" keys of a file of fixed
 * records (raw, local or remote) into @ds's shape, ndim and dtype: 0, or
 * -1 with *@cause naming the key and what it should be.
 */
int		 dataset_record_conf(struct dataset *ds,
		    const struct dataset_conf *conf, char **cause);

/**
 * dataset_conf_need() - value of @key in @conf, or NULL with *@cause set
 * to a message that says the key is missing and that it is @what.
 */
const char	*dataset_conf_need(const struct dataset *ds,
		    const struct dataset_conf *conf, const char *key,
		    const char *what, char **cause);

/**
 * dataset_shape_parse() - parse "1,128,128" into @shape (at most
 * INFEED_MAX_DIMS positive integers) and *@ndim.  Return: 0, or -1 with
 * *@errstr set to a static phrase.
 */
int		 dataset_shape_parse(const char *s,
		    uint64_t shape[INFEED_MAX_DIMS], uint32_t *ndim,
		    const char **errstr);

/**
 * dataset_shape_bytes() - bytes of one sample of @shape in @t, in *@out.
 * Return: 0, or -1 when the product overflows size_t or @t is unknown.
 */
int		 dataset_shape_bytes(const uint64_t *shape, uint32_t ndim,
		    enum infeed_dtype t, size_t *out);

/**
 * dataset_shape_format() - write "28x28" for @shape into @buf (@len bytes,
 * truncated if short); "scalar" when @ndim is 0.  Return: @buf.
 */
char		*dataset_shape_format(const uint64_t *shape, uint32_t ndim,
		    char *buf, size_t len);

/**
 * dataset_map_file() - map regular file @path read-only and shared into @m
 * and keep it open (close-on-exec) for dataset_map_holds().
 * Return: 0, or -1 with *@cause naming the file (an empty file is refused).
 */
int		 dataset_map_file(const struct dataset *ds, const char *path,
		    struct dataset_map *m, char **cause);

/**
 * dataset_map_fd() - what dataset_map_file() does once the file is open:
 * take over @fd (closed on failure), refuse it unless it is open for
 * reading, a regular file and not empty, and with DATASET_MAP_READ map its
 * first @max bytes at most (DATASET_MAP_ALL: all of it; 0: none, m->base
 * stays NULL).  @what names the file in *@cause.  m->size is the file's
 * size, m->len the bytes mapped.
 */
int		 dataset_map_fd(const struct dataset *ds, const char *what,
		    int fd, int flags, uint64_t max, struct dataset_map *m,
		    char **cause);

/**
 * dataset_pread() - read @len bytes at @off of the file behind @m, all of
 * them.  Return: 0, or -1 with errno (EIO when the file is shorter).
 */
int		 dataset_pread(const struct dataset_map *m, void *buf,
		    size_t len, uint64_t off);

/**
 * dataset_pair_read(), dataset_pair_close() - the raw and npy readers'
 * read and close: ds->priv is a struct dataset_pair.  Closing a client's
 * files gives back what dataset_files_charge() charged for them.
 */
int		 dataset_pair_read(const struct dataset *ds, uint64_t index,
		    void *dst, int64_t *label, bool stream);
void		 dataset_pair_close(struct dataset *ds);

/**
 * dataset_pair_locate() - the raw and npy readers' locate: the checks of
 * dataset_pair_read() (a file cut short fails here, as there), the row's
 * place in the data file and in its map when mapped, and its label.
 */
int		 dataset_pair_locate(const struct dataset *ds, uint64_t index,
		    struct dataset_loc *loc, int64_t *label);

/*
 * Bytes of clients' files the workers map at most: one uid's sessions
 * together, and all clients' (a worker's address space is 128 TiB).
 */
#define DATASET_FILES_MAP_UID_MAX	((uint64_t)4 << 40)
#define DATASET_FILES_MAP_MAX		((uint64_t)16 << 40)

/**
 * dataset_charge(), dataset_uncharge() - the daemon's ledger of what the
 * workers map of clients' files (see dataset_files_charge()): charge
 * @bytes to @uid when its charges stay within DATASET_FILES_MAP_UID_MAX
 * and all within DATASET_FILES_MAP_MAX (else charge nothing and return
 * false), or give them back.  Not thread-safe: the daemon's loop only.
 * dataset_charged() - what @uid has charged, and all in *@all (may be
 * NULL).
 */
bool		 dataset_charge(uid_t uid, uint64_t bytes);
void		 dataset_uncharge(uid_t uid, uint64_t bytes);
uint64_t	 dataset_charged(uid_t uid, uint64_t *all);

/**
 * dataset_populate() - map the pages of the next @chunk bytes of the files
 * mapped in this process that the page cache holds (MADV_POPULATE_READ;
 * what is not cached is left to the reads in flight, never read here), a
 * chunk a call, file after file, when together they take at most
 * @max_bytes.  A worker calls it while it has no job, so that its first
 * jobs never wait for the whole dataset.
 * Return: true while some pages are left to map.
 */
bool		 dataset_populate(uint64_t max_bytes, uint64_t chunk);

/**
 * dataset_unmap() - undo dataset_map_file() (or any mmap kept in @m, with
 * m->fd -1); a zeroed @m is a no-op.
 */
void		 dataset_unmap(struct dataset_map *m);

/**
 * dataset_map_holds() - whether the file behind @m still holds its first
 * @end bytes.  A read calls it before copying bytes out of the map: a
 * file truncated after it was mapped reads as zeros in its last partial
 * page and raises SIGBUS past it, so a row that is not wholly inside the
 * file now must be an error, not data.  Within a job (dataset_job_begin)
 * the file's size is taken once, with one lseek(2) on the kept
 * descriptor, and dataset_job_end() takes it again; outside a job every
 * call takes it.  Always true for anonymous memory.
 * Return: 1, or 0 (errno EIO, or lseek's) when the file is shorter.
 */
int		 dataset_map_holds(const struct dataset_map *m, uint64_t end);

/**
 * dataset_job_begin() - a worker starts reading a batch of rows: from now
 * on each file's size is checked once (per process, not thread-safe).
 */
void		 dataset_job_begin(void);

/**
 * dataset_job_end() - the batch is read: check the files' sizes again
 * (and a client's file's ctime: truncated and written again to the same
 * size is a change too).
 * Return: 1 when a file shrank or changed during the job (its rows must be
 * read again, so that those no longer inside the file fail), else 0; the
 * smallest size a shrunk file has now in *@size (may be NULL).
 */
int		 dataset_job_end(uint64_t *size);

/**
 * dataset_map_short() - a read of the bytes up to @end of the file behind
 * @m came back short: take its size again, so that dataset_short_why()
 * says how long it is now.  Return: -1 with errno EIO.
 */
int		 dataset_map_short(const struct dataset_map *m, uint64_t end);

/**
 * dataset_short_why() - after dataset_map_holds() said no: why, in @buf
 * ("the file is N bytes now; the sample needs bytes up to M: it was
 * truncated after the session began").
 */
char		*dataset_short_why(char *buf, size_t len);

/**
 * dataset_set_why() - a reader's reason for the read it fails with EIO
 * now (a remote object that could not be fetched), which the next
 * dataset_short_why() gives instead.
 */
void		 dataset_set_why(const char *fmt, ...)
		    __attribute__((__format__(__printf__, 1, 2)));

/**
 * dataset_why_set() - whether a reader left a reason (dataset_set_why())
 * that dataset_short_why() has not yet given.
 */
bool		 dataset_why_set(void);

/**
 * dataset_label_get() - label @index of an array of labels stored as @t
 * (uint8, int32 or int64, host byte order).
 */
int64_t		 dataset_label_get(const uint8_t *labels, enum infeed_dtype t,
		    uint64_t index);

/**
 * dataset_labels_check() - scan ds->samples labels stored as @t: each must
 * be at least 0 and below ds->classes, or, when ds->classes is 0, set
 * ds->classes to the largest label plus one.  @path names the file in
 * *@cause.  Return: 0 or -1.
 */
int		 dataset_labels_check(struct dataset *ds, const char *path,
		    const uint8_t *labels, enum infeed_dtype t, char **cause);

/**
 * dataset_labels_check_file() - dataset_labels_check() of the labels at
 * byte @off of the file behind @m, read with pread.
 */
int		 dataset_labels_check_file(struct dataset *ds,
		    const char *path, const struct dataset_map *m,
		    uint64_t off, enum infeed_dtype t, char **cause);

/**
 * dataset_conf_classes() - read the optional "classes =" key into
 * ds->classes (left 0 when absent).  Return: 0, or -1 with *@cause set.
 */
int		 dataset_conf_classes(struct dataset *ds,
		    const struct dataset_conf *conf, char **cause);

#endif /* INFEED_READER_H */
