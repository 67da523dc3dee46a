/* SPDX-License-Identifier: MIT */
/*
 * Datasets: the readers behind a catalogue entry.  This header is the
 * front the daemon includes (dataset.c); struct dataset, its buffers and
 * what every reader shares are in reader.h, which it includes.
 *
 * A dataset is opened once, in the daemon's main process, when the
 * catalogue loads; opening checks every file (magic, sizes, shapes, label
 * count) and refuses a bad one with a message naming the file and what is
 * wrong.  Whatever an open dataset holds (mmaps, decompressed IDX bytes) is
 * MAP_SHARED or read-only, so the worker processes forked afterwards read
 * samples from it without copying or decompressing again.
 *
 * dataset_read() is what a worker calls for every row: it writes one
 * sample's bytes (sample_bytes of them, in the dataset's own dtype) and
 * returns its label.  It never allocates and is safe to call from any
 * process that inherited the dataset.
 *
 * An image dataset (types imagefolder and tar) is "encoded": its samples
 * are image files, or members of tar shards, whose decoding happens later
 * in the worker, so the dataset has no shape, dtype or sample_bytes (the
 * output's shape comes from the session's transform).  A worker reads one
 * with dataset_read_encoded() into a buffer of its own, with pread on
 * descriptors opened at open (or openat on a kept directory), never a
 * shared offset; dataset_read() refuses such a dataset.
 *
 * A client's own files (Attach.files) are a dataset too, of the raw and
 * npy readers, opened from the descriptors the client passed
 * (dataset_open_files()): the same checks as for files opened by path, and
 * never a path opened on a client's behalf.  The daemon only checks
 * them, with fstat and pread of their headers, on a helper thread (a
 * client may truncate its file at any time, and a mapping would then raise
 * SIGBUS in the daemon; a file on the client's own FUSE mount may never
 * answer); the workers map them, within bounds: a client's files take a
 * worker's address space, and a sparse file of tens of TiB costs its
 * client nothing, so the daemon charges what it has the workers map,
 * DATASET_FILES_MAP_UID_MAX a uid and DATASET_FILES_MAP_MAX in all
 * (dataset_files_charge()); files beyond are read with pread, a system
 * call a row.  Their labels are not scanned at open (see
 * dataset_npy_labels()).
 */
#ifndef INFEED_DATASET_H
#define INFEED_DATASET_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "infeed-limits.h"
#include "reader.h"

/**
 * dataset_key_guess() - the key of NULL-terminated @keys that @key is
 * likely a typo of (at most two edits away), for "did you mean" hints;
 * NULL when none is close.
 */
const char	*dataset_key_guess(const char *key, const char *const *keys);

/**
 * dataset_open() - open the dataset a config section describes.
 * @conf: the section; its "type" key picks the reader, and a key that
 *        neither the reader nor the catalogue reads ("allow_groups") is
 *        refused with the file, the section and the keys that are valid.
 * @cause: on failure, a malloc'd message for the operator, naming the
 *         dataset, the file and what was wrong and expected.
 *
 * Return: the dataset, or NULL with *cause set.
 */
struct dataset	*dataset_open(const struct dataset_conf *conf, char **cause);

/**
 * dataset_open_within() - dataset_open() of a dataset that may keep
 * @room bytes in memory at most (ds->memory: a tokens packing); past
 * that it is refused, saying so, before its reader allocates them.
 * dataset_open() is dataset_open_within() with no limit.
 */
struct dataset	*dataset_open_within(const struct dataset_conf *conf,
		    uint64_t room, char **cause);

/**
 * dataset_sections() - the configuration's @n dataset sections, which a
 * mix (type = mix) may name as its sources, while the catalogue opens
 * them; NULL, 0 after.  Not thread-safe: the loop's, at open and reload.
 */
void		 dataset_sections(const struct dataset_conf *confs, size_t n);

/* How a client's file is laid out; numbered as infeed.proto's FileFormat. */
enum dataset_format {
	DATASET_FORMAT_NONE = 0,	/* labels only: no labels file */
	DATASET_FORMAT_RAW = 1,
	DATASET_FORMAT_NPY = 2,
};

/* What a client says of its files: plain data, sent to the workers. */
struct dataset_files {
	uint32_t	data_format;	/* RAW or NPY */
	uint32_t	labels_format;	/* NONE, RAW or NPY */
	uint32_t	dtype;		/* RAW data: enum infeed_dtype */
	uint32_t	label_dtype;	/* RAW labels: uint8, int32 or int64 */
	uint32_t	ndim;		/* RAW data: one sample's shape */
	uint32_t	pad;
	uint64_t	shape[INFEED_MAX_DIMS];
	/*
	 * The daemon's, never the client's (0 from the Attach): the bytes of
	 * each file the workers may map, as dataset_files_charge() allowed;
	 * they read the rest with pread.
	 */
	uint64_t	map_data;
	uint64_t	map_labels;
};

/**
 * dataset_open_files() - a dataset @name of a client's files: samples in
 * @data_fd, labels in @labels_fd (-1 when @spec has none; every label is
 * then 0).  Both descriptors are taken over, and closed on failure too.
 * Each is checked (open for reading, a regular file, not empty) and so is
 * its content, with the raw and npy readers' own checks; their offsets,
 * which the client shares, are never moved.
 * @map: read the files with dataset_read() (a worker), mapping at most
 *       spec->map_data and spec->map_labels bytes of them; else only
 *       check them and keep the descriptors for dataset_files_fds() (the
 *       daemon, which never maps a client's file).
 * @content: on failure, set to whether the files' content was at fault
 *           (rather than @spec or what the descriptors are); may be NULL.
 * @cause: on failure, "dataset 'NAME': the data file: ..." saying what
 *         was wrong and what was expected.
 *
 * Return: the dataset, or NULL with *@cause set.
 */
struct dataset	*dataset_open_files(const char *name,
		    const struct dataset_files *spec, int data_fd,
		    int labels_fd, bool map, bool *content, char **cause);

/**
 * dataset_files_charge() - have the workers map the files of @ds, a
 * dataset_open_files() of @uid's, if the ledger (dataset_charge()) takes
 * their sizes: then set spec->map_data and spec->map_labels to them, else
 * to 0 (the workers read the files with pread).  Freeing @ds gives the
 * charge back.  Not thread-safe: the daemon's loop calls it, and frees
 * the datasets it charged there.
 * Return: whether the files are mapped.
 */
bool		 dataset_files_charge(struct dataset *ds, uid_t uid,
		    struct dataset_files *spec);

/**
 * dataset_files_bytes() - the bytes of a client's files, both together,
 * as they were checked.
 */
uint64_t	 dataset_files_bytes(const struct dataset *ds);

/**
 * dataset_files_fds() - the descriptors of a dataset_open_files() dataset,
 * data then labels, borrowed.  Return: how many (0 for a catalogue one).
 */
unsigned	 dataset_files_fds(const struct dataset *ds, int fds[2]);

/**
 * dataset_read() - write sample @index's bytes to @dst and its label to
 * *@label.  @index must be below ds->samples.  @stream: write @dst with
 * streaming stores (copy_row(); the caller calls copy_fence() before it
 * says the rows are there), as copy_streams() chose for the slot; a
 * reader that computes its sample may ignore it.  Return: 0, or -1 when the
 * underlying file can no longer be read, such as a sample or label that is
 * no longer wholly inside a file truncated since the dataset opened.
 */
int		 dataset_read(const struct dataset *ds, uint64_t index,
		    void *dst, int64_t *label, bool stream);

/**
 * dataset_read_at() - dataset_read() of sample @index as it is in epoch
 * @epoch of seed @seed, the step's: a token dataset's rows are packed
 * anew each epoch; the other readers' rows are the same in every epoch.
 */
int		 dataset_read_at(const struct dataset *ds, uint64_t index,
		    uint64_t seed, uint64_t epoch, void *dst, int64_t *label,
		    bool stream);

/**
 * dataset_read_encoded() - read sample @index of an encoded dataset: its
 * bytes as stored (the whole image file, or the tar member) into @buf,
 * grown with realloc as needed, and its label into *@label.  @index must
 * be below ds->samples.  Safe in forked workers: only pread and openat,
 * never a shared file offset.
 *
 * Return: 0 with buf->len set, or -1 with errno: EIO when the file or the
 * shard is shorter than when it was indexed (cut since), EFBIG for a
 * sample over INFEED_MAX_IMAGE_BYTES, ENOENT or EACCES for an image file
 * that is gone or unreadable, EINVAL for one that is no longer a regular
 * file, EXDEV for an image file reached through a symlink that the
 * dataset's follow_symlinks refuses (imagefolder), ENOMEM, EOPNOTSUPP when
 * @ds is not encoded, ERANGE for an @index past the end.
 */
int		 dataset_read_encoded(const struct dataset *ds,
		    uint64_t index, struct dataset_buf *buf, int64_t *label);

/**
 * dataset_locates() - whether dataset_locate() knows where @ds's samples
 * are (every reader but synthetic's).
 */
bool		 dataset_locates(const struct dataset *ds);

/**
 * dataset_locate() - where sample @index's bytes are, reading none of
 * them, and its label: what a worker needs to read many samples at once
 * (io-batch.h) rather than one dataset_read() after the other.  The
 * checks are dataset_read()'s: a file cut short before the row fails here
 * (errno EIO, dataset_short_why()); one cut while the row is read comes
 * back short (dataset_map_short()).  For an image file, loc->owned: the
 * caller closes loc->fd.  Return: 0, or -1 with errno as the reads'.
 */
int		 dataset_locate(const struct dataset *ds, uint64_t index,
		    struct dataset_loc *loc, int64_t *label);

/**
 * dataset_encoded_give() - sample @index of encoded @ds is in @buf
 * already, read in flight with its @label: the next dataset_read_encoded()
 * of it (in this process) takes it from there, swapping its own buffer
 * into @buf, so that a decoder that reads through dataset_read_encoded()
 * decodes the sample as it arrived.
 */
void		 dataset_encoded_give(const struct dataset *ds,
		    uint64_t index, struct dataset_buf *buf, int64_t label);

/**
 * dataset_sample_where() - name sample @index for messages, in @buf (@len
 * bytes, truncated if short): "'/data/train/n01/x.JPEG'" for an image
 * file, "member 'n01/x.jpg' of shard '/data/train-000003.tar'" for a tar
 * member, "sample N" for the other readers.  Valid UTF-8 on one line.
 * Return: @buf.
 */
char		*dataset_sample_where(const struct dataset *ds, uint64_t index,
		    char *buf, size_t len);

/**
 * dataset_sample_brief() - dataset_sample_where() from what is in memory,
 * for the main process, which never reads a dataset's files: "the member
 * at byte N of shard '/data/train-000003.tar'" for a tar member.
 * Return: @buf.
 */
char		*dataset_sample_brief(const struct dataset *ds, uint64_t index,
		    char *buf, size_t len);

/**
 * dataset_read_ahead() - start fetching the @n samples @idx of later
 * steps, waiting for none (a remote reader downloads them into the host's
 * cache in threads of the calling worker: cache_object_prefetch()), so
 * that their reads find them there.  A no-op for a reader without it.
 */
void		 dataset_read_ahead(const struct dataset *ds,
		    const uint64_t *idx, uint32_t n);

/**
 * dataset_order_new() - tell @ds's reader that a session reads it in the
 * order of a sampler of @opts: a remote reader's cache then evicts by it
 * (cache.c).  Return: a handle for dataset_order_at() and
 * dataset_order_free(), or NULL: the reader has no use for it, or could
 * not keep it (then eviction goes without this session's order).
 */
void		*dataset_order_new(const struct dataset *ds,
		    const struct sampler_opts *opts);

/**
 * dataset_order_at() - the session of @order (may be NULL) reads row
 * @row of epoch @epoch next; cheap (a store to shared memory).
 */
void		 dataset_order_at(const struct dataset *ds, void *order,
		    uint64_t epoch, uint64_t row);

/**
 * dataset_order_free() - forget @order; NULL is a no-op.
 */
void		 dataset_order_free(const struct dataset *ds, void *order);

#endif /* INFEED_DATASET_H */
