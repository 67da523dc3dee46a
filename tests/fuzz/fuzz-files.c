/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for a trainer's own files (Attach.files): the first bytes of
 * the input choose the spec (formats, dtypes, a raw shape) and where the
 * data file ends and the labels file begins, plus how far each file is
 * grown with a sparse tail; both go to memfds.  The daemon's check
 * (dataset_open_files() without mapping) and, when it accepts, the
 * worker's opening (mapped whole, in part or not at all, as bytes 13 to
 * 15 say) and reads of the first, last and a middle sample must never
 * crash, hang or allocate by what a header claims.
 */

#include <sys/mman.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"

#define FUZZ_HEADER		16
#define FUZZ_MAX_SAMPLE		(1u << 20)	/* bytes read per sample */

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* A memfd holding @len bytes of @buf, then grown by @grow zero bytes. */
static int
fuzz_file(const uint8_t *buf, size_t len, uint64_t grow)
{
	int	fd;

	if ((fd = memfd_create("fuzz-file", MFD_CLOEXEC)) == -1)
		abort();
	if (len > 0 && write(fd, buf, len) != (ssize_t)len)
		abort();
	if (grow > 0 && ftruncate(fd, (off_t)(len + grow)) == -1)
		abort();
	return (fd);
}

/* Read a few samples of @ds as a worker would. */
static void
fuzz_read(const struct dataset *ds)
{
	uint64_t	 pick[3];
	int64_t		 label;
	uint8_t		*dst;
	unsigned	 i;

	if (ds->samples == 0 || ds->sample_bytes > FUZZ_MAX_SAMPLE)
		return;
	if ((dst = malloc(ds->sample_bytes + 1)) == NULL)
		abort();
	pick[0] = 0;
	pick[1] = ds->samples / 2;
	pick[2] = ds->samples - 1;
	for (i = 0; i < 3; i++)
		(void)dataset_read(ds, pick[i], dst, &label, false);
	free(dst);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dataset_files	 spec;
	struct dataset		*ds;
	const uint8_t		*body;
	size_t			 len, split;
	uint64_t		 grow_data, grow_labels;
	char			*cause = NULL;
	bool			 content;
	int			 fds[2], map_fds[2];
	unsigned		 i;

	if (size < FUZZ_HEADER)
		return (0);
	memset(&spec, 0, sizeof(spec));
	spec.data_format = data[0] & 1 ? DATASET_FORMAT_NPY : DATASET_FORMAT_RAW;
	spec.labels_format = data[1] % 3;
	spec.dtype = data[2] % 8;	/* 0 and 7 are wrong on purpose */
	spec.label_dtype = data[3] % 8;
	spec.ndim = data[4] % (INFEED_MAX_DIMS + 2);
	for (i = 0; i < INFEED_MAX_DIMS && i < 4; i++)
		spec.shape[i] = data[5 + i] == 255 ? UINT64_MAX / 2 :
		    data[5 + i];
	for (; i < INFEED_MAX_DIMS; i++)
		spec.shape[i] = 1;
	/* Sparse growth up to 2^40 bytes: headers may claim any count. */
	grow_data = data[9] < 200 ? 0 : (uint64_t)1 << (data[9] - 200) % 41;
	grow_labels = data[10] < 200 ? 0 : (uint64_t)1 << (data[10] - 200) % 41;
	body = data + FUZZ_HEADER;
	len = size - FUZZ_HEADER;
	split = len == 0 ? 0 : ((size_t)data[11] << 8 | data[12]) % (len + 1);

	fds[0] = fuzz_file(body, split, grow_data);
	fds[1] = spec.labels_format == DATASET_FORMAT_NONE ? -1 :
	    fuzz_file(body + split, len - split, grow_labels);
	map_fds[0] = dup(fds[0]);
	map_fds[1] = fds[1] == -1 ? -1 : dup(fds[1]);

	/* The daemon's check, then (when it passes) the worker's opening. */
	ds = dataset_open_files("fuzz", &spec, fds[0], fds[1], false, &content,
	    &cause);
	free(cause);
	cause = NULL;
	if (ds == NULL) {
		close(map_fds[0]);
		if (map_fds[1] != -1)
			close(map_fds[1]);
		return (0);
	}
	dataset_free(ds);
	/* Mapped whole, in part (the rest read with pread) or not at all. */
	spec.map_data = data[13] % 3 == 0 ? DATASET_MAP_ALL :
	    data[13] % 3 == 1 ? (uint64_t)data[14] << 4 : 0;
	spec.map_labels = data[13] % 3 == 0 ? DATASET_MAP_ALL :
	    data[13] % 3 == 1 ? (uint64_t)data[15] << 4 : 0;
	ds = dataset_open_files("fuzz", &spec, map_fds[0], map_fds[1], true,
	    &content, &cause);
	free(cause);
	if (ds != NULL) {
		fuzz_read(ds);
		dataset_free(ds);
	}
	return (0);
}
