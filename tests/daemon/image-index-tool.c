/* SPDX-License-Identifier: MIT */
/*
 * image-index-tool: open a dataset from a config section given as
 * arguments and print its index, so that tests in other languages can
 * compare it with torchvision's ImageFolder or a tar reader of their own.
 *
 *	image-index-tool [--bytes] type=imagefolder root=DIR
 *	image-index-tool [--bytes] type=tar shards=PATTERN
 *	image-index-tool --time type=... (only how long opening took)
 *
 * Prints "classes<TAB>C", then "class<TAB>I<TAB>NAME" per named class,
 * then "I<TAB>LABEL<TAB>WHERE" per sample, WHERE as
 * dataset_sample_where() gives it; with --bytes, each sample line ends
 * with "<TAB>LEN<TAB>CRC32" of its bytes as dataset_read_encoded() reads
 * them, or "<TAB>-1<TAB>ERRNO" (and label -1) when it cannot be read.
 * On a refused dataset, prints the message on stderr and exits 1.
 * Not installed.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "dataset.h"

int
main(int argc, char **argv)
{
	struct dataset_conf	 conf;
	struct dataset_kv	 kv[16];
	struct dataset_buf	 buf = { 0 };
	struct dataset		*ds;
	char			*cause = NULL, *eq, where[4096];
	uint64_t		 i;
	int64_t			 label;
	uint32_t		 c;
	struct timespec		 t0, t1;
	int			 a, bytes = 0, timed = 0, saved;

	memset(&conf, 0, sizeof conf);
	conf.name = (char *)"tool";
	conf.kv = kv;
	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--bytes") == 0) {
			bytes = 1;
			continue;
		}
		if (strcmp(argv[a], "--time") == 0) {
			timed = 1;
			continue;
		}
		if ((eq = strchr(argv[a], '=')) == NULL ||
		    conf.nkv == sizeof kv / sizeof kv[0]) {
			fprintf(stderr, "usage: image-index-tool [--bytes|--time] "
			    "key=value ...\n");
			return (2);
		}
		*eq = '\0';
		kv[conf.nkv].key = argv[a];
		kv[conf.nkv].value = eq + 1;
		conf.nkv++;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if ((ds = dataset_open(&conf, &cause)) == NULL) {
		fprintf(stderr, "%s\n", cause != NULL ? cause : "out of memory");
		free(cause);
		return (1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (timed) {
		printf("opened in %.3f s: %" PRIu64 " samples, %" PRIu32
		    " classes\n", (double)(t1.tv_sec - t0.tv_sec) +
		    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, ds->samples,
		    ds->classes);
		dataset_free(ds);
		return (0);
	}
	printf("classes\t%" PRIu32 "\n", ds->classes);
	for (c = 0; ds->class_names != NULL && c < ds->classes; c++)
		printf("class\t%" PRIu32 "\t%s\n", c, ds->class_names[c]);
	for (i = 0; i < ds->samples; i++) {
		buf.len = 0;
		if (dataset_read_encoded(ds, i, &buf, &label) != 0) {
			/* A dangling link, say: ImageFolder lists it too. */
			saved = errno;
			printf("%" PRIu64 "\t%d\t%s\t-1\t%d\n", i, -1,
			    dataset_sample_where(ds, i, where, sizeof where),
			    saved);
			continue;
		}
		printf("%" PRIu64 "\t%" PRId64 "\t%s", i, label,
		    dataset_sample_where(ds, i, where, sizeof where));
		if (bytes)
			printf("\t%zu\t%lu", buf.len, buf.len == 0 ? 0UL :
			    crc32(0, buf.p, (uInt)buf.len));
		printf("\n");
	}
	dataset_buf_free(&buf);
	dataset_free(ds);
	return (0);
}
