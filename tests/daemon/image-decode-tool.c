/* SPDX-License-Identifier: MIT */
/*
 * image-decode-tool: the image decoders from the command line, for the
 * Python tests that compare them with PIL.
 *
 *	image-decode-tool FILE [X Y W H]	RGB8 of the region (the whole
 *						image by default) on stdout
 *	image-decode-tool --info FILE		"jpeg 500 375"
 *	image-decode-tool --time N FILE [X Y W H]
 *						decode N times, print the mean CPU
 *						time per decode in ms
 *
 * Errors go to stderr, with exit status 1.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image-decode.h"

/* Read all of @path; exit on failure. */
static uint8_t *
tool_read(const char *path, size_t *len)
{
	FILE	*fp;
	uint8_t	*buf = NULL, *nbuf;
	size_t	 cap = 0, n = 0, got;

	if ((fp = fopen(path, "rb")) == NULL) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		exit(1);
	}
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			if ((nbuf = realloc(buf, cap)) == NULL) {
				fprintf(stderr, "%s: out of memory\n", path);
				exit(1);
			}
			buf = nbuf;
		}
		got = fread(buf + n, 1, cap - n, fp);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(fp)) {
		fprintf(stderr, "%s: read error\n", path);
		exit(1);
	}
	fclose(fp);
	*len = n;
	return (buf);
}

/* A uint32 argument; exit on anything else. */
static uint32_t
tool_u32(const char *s)
{
	char			*end;
	unsigned long long	 v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v > UINT32_MAX) {
		fprintf(stderr, "image-decode-tool: bad number '%s'\n", s);
		exit(1);
	}
	return ((uint32_t)v);
}

static void
tool_usage(void)
{
	fprintf(stderr, "usage: image-decode-tool FILE [X Y W H]\n"
	    "       image-decode-tool --info FILE\n"
	    "       image-decode-tool --time N FILE [X Y W H]\n");
	exit(1);
}

/* Open @buf and decode the region (or all of it) into @out, or a new
 * buffer when @out is NULL. */
static uint8_t *
tool_decode(struct image_decoder *d, const char *path, const uint8_t *buf,
    size_t len, char **argv, int nargs, uint32_t *w, uint32_t *h,
    uint8_t *out)
{
	struct image_info	 info;
	uint32_t		 x = 0, y = 0;

	if (image_open(d, buf, len, &info) == -1) {
		fprintf(stderr, "%s: %s\n", path, image_decoder_error(d));
		exit(1);
	}
	*w = info.width;
	*h = info.height;
	if (nargs == 4) {
		x = tool_u32(argv[0]);
		y = tool_u32(argv[1]);
		*w = tool_u32(argv[2]);
		*h = tool_u32(argv[3]);
	}
	if (out == NULL && (out = malloc((size_t)*w * *h * 3 + 1)) == NULL) {
		fprintf(stderr, "%s: out of memory\n", path);
		exit(1);
	}
	if (image_decode_region(d, x, y, *w, *h, out, (size_t)*w * 3) == -1) {
		fprintf(stderr, "%s: %s\n", path, image_decoder_error(d));
		exit(1);
	}
	return (out);
}

int
main(int argc, char **argv)
{
	struct image_decoder	*d;
	struct image_info	 info;
	struct timespec		 t0, t1;
	uint8_t			*buf, *out;
	size_t			 len;
	uint32_t		 w, h, i, n;
	double			 ms;

	if (argc < 2)
		tool_usage();
	if ((d = image_decoder_new()) == NULL) {
		fprintf(stderr, "image-decode-tool: out of memory\n");
		return (1);
	}
	if (strcmp(argv[1], "--info") == 0) {
		if (argc != 3)
			tool_usage();
		buf = tool_read(argv[2], &len);
		if (image_open(d, buf, len, &info) == -1) {
			fprintf(stderr, "%s: %s\n", argv[2],
			    image_decoder_error(d));
			return (1);
		}
		printf("%s %" PRIu32 " %" PRIu32 "\n",
		    info.format == IMAGE_FORMAT_JPEG ? "jpeg" : "png",
		    info.width, info.height);
	} else if (strcmp(argv[1], "--time") == 0) {
		if (argc != 4 && argc != 8)
			tool_usage();
		n = tool_u32(argv[2]);
		buf = tool_read(argv[3], &len);
		/* One decode to warm up and size the output, kept. */
		out = tool_decode(d, argv[3], buf, len, argv + 4, argc - 4,
		    &w, &h, NULL);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
		for (i = 0; i < n; i++)
			tool_decode(d, argv[3], buf, len, argv + 4, argc - 4,
			    &w, &h, out);
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
		free(out);
		ms = ((t1.tv_sec - t0.tv_sec) * 1e3 +
		    (t1.tv_nsec - t0.tv_nsec) / 1e6) / (n ? n : 1);
		printf("%.4f ms CPU per decode of %" PRIu32 "x%" PRIu32 "\n", ms,
		    w, h);
	} else {
		if (argc != 2 && argc != 6)
			tool_usage();
		buf = tool_read(argv[1], &len);
		out = tool_decode(d, argv[1], buf, len, argv + 2, argc - 2,
		    &w, &h, NULL);
		if (fwrite(out, 1, (size_t)w * h * 3, stdout) !=
		    (size_t)w * h * 3 || fflush(stdout) != 0) {
			fprintf(stderr, "image-decode-tool: write error\n");
			return (1);
		}
		free(out);
	}
	free(buf);
	image_decoder_free(d);
	return (0);
}
