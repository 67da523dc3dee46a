/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the tar reader's indexer: arbitrary bytes as one shard
 * (in a memfd, so the indexer reads them with pread as it reads a file),
 * indexed with dataset_tar_open_fd(); when they index, every sample is
 * read and named, as a worker and its error messages would.  Built for
 * libFuzzer with -Dfuzz=enabled (clang); without it, fuzz-main.c turns it
 * into a regression test over corpus-tar.
 */

#include <sys/mman.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "dataset.h"
#include "reader-tar.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* Index @data as a shard, then read and name what it holds. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dataset_buf	 buf = { 0 };
	struct dataset		*ds;
	char			*cause = NULL, where[512];
	int64_t			 label;
	uint64_t		 i;
	int			 fd;

	if ((fd = memfd_create("fuzz-tar", MFD_CLOEXEC)) == -1)
		abort();
	if (size > 0 && write(fd, data, size) != (ssize_t)size)
		abort();
	ds = dataset_tar_open_fd("fuzz", "fuzz.tar", fd, &cause);
	free(cause);
	if (ds == NULL)
		return (0);
	if (!ds->encoded || ds->samples == 0 || ds->classes == 0)
		abort();
	for (i = 0; i < ds->samples && i < 64; i++) {
		if (dataset_read_encoded(ds, i, &buf, &label) == 0 &&
		    (label < 0 || label >= ds->classes))
			abort();
		dataset_sample_where(ds, i, where, sizeof where);
	}
	dataset_buf_free(&buf);
	dataset_free(ds);
	return (0);
}
