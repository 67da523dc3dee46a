/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the tokens reader (issue 37): a 4-byte header (flags:
 * bit 0 uint32 ids, bit 1 eot = instead of an index, bit 2 a window of 3;
 * seq_len 1 to 256; where the index begins, in 2 bytes) then the token
 * file's bytes and the index's (plain offsets, or Megatron's .idx when it
 * starts with its magic).  Opening must refuse what does not add up with
 * a message, never crash, hang or allocate by what an index claims; when
 * it opens, every row is read (at most 4096) and its segments checked.
 */

#include <sys/mman.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* A memfd of @len bytes of @buf; its path in @path. */
static int
fuzz_file(const uint8_t *buf, size_t len, char *path, size_t plen)
{
	int	fd;

	if ((fd = memfd_create("fuzz-tokens", MFD_CLOEXEC)) == -1)
		abort();
	if (len > 0 && write(fd, buf, len) != (ssize_t)len)
		abort();
	snprintf(path, plen, "/proc/self/fd/%d", fd);
	return (fd);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dataset_kv	 kv[7];
	struct dataset_conf	 conf;
	struct dataset		*ds;
	char			 tpath[64], ipath[64], seq[16], *cause = NULL;
	char			 k_type[] = "type", k_path[] = "path",
				 k_seq[] = "seq_len", k_dtype[] = "dtype",
				 k_eot[] = "eot", k_index[] = "index",
				 k_window[] = "window", v_tokens[] = "tokens",
				 v_u16[] = "uint16", v_u32[] = "uint32",
				 v_zero[] = "0", v_three[] = "3", name[] = "fuzz";
	size_t			 split, n = 0;
	uint64_t		 r;
	int32_t			*row;
	int64_t			 label;
	int			 tfd, ifd;
	uint32_t		 seq_len, j;

	if (size < 4)
		return (0);
	seq_len = (uint32_t)data[1] + 1;
	split = (size_t)data[2] << 8 | data[3];
	data += 4;
	size -= 4;
	if (split > size)
		split = size;
	tfd = fuzz_file(data, split, tpath, sizeof tpath);
	ifd = fuzz_file(data + split, size - split, ipath, sizeof ipath);
	snprintf(seq, sizeof seq, "%u", seq_len);
	kv[n++] = (struct dataset_kv){ k_type, v_tokens };
	kv[n++] = (struct dataset_kv){ k_path, tpath };
	kv[n++] = (struct dataset_kv){ k_seq, seq };
	kv[n++] = (struct dataset_kv){ k_dtype, data[-4] & 1 ? v_u32 : v_u16 };
	if (data[-4] & 2)
		kv[n++] = (struct dataset_kv){ k_eot, v_zero };
	else
		kv[n++] = (struct dataset_kv){ k_index, ipath };
	if (data[-4] & 4)
		kv[n++] = (struct dataset_kv){ k_window, v_three };
	memset(&conf, 0, sizeof conf);
	conf.name = name;
	conf.kv = kv;
	conf.nkv = n;
	if ((ds = dataset_open(&conf, &cause)) == NULL) {
		if (cause == NULL)
			abort();
		free(cause);
	} else {
		if ((row = malloc(ds->sample_bytes)) == NULL)
			abort();
		for (r = 0; r < ds->samples && r < 4096; r++) {
			if (dataset_read(ds, r, row, &label, false) != 0)
				abort();
			/* Segments rise from 1; positions restart with them. */
			for (j = 1; j < seq_len; j++) {
				if (row[2 * seq_len + j] != 0 &&
				    row[2 * seq_len + j] !=
				    row[2 * seq_len + j - 1] &&
				    (row[2 * seq_len + j] !=
				    row[2 * seq_len + j - 1] + 1 ||
				    row[seq_len + j] != 0))
					abort();
			}
		}
		free(row);
		dataset_free(ds);
	}
	close(tfd);
	close(ifd);
	return (0);
}
