/* SPDX-License-Identifier: MIT */
/*
 * image-transform-tool: run one image through a pipeline, for the Python
 * tests that compare infeed's transforms with torchvision's.
 *
 *	image-transform-tool [-s scalar|avx2] [-n count] W H IN PIPELINE
 *	    SEED EPOCH INDEX [OUT]
 *
 * IN holds W * H RGB8 pixels, row after row.  For each of the @count
 * indices from INDEX (1 by default) the tool prints the plan,
 *
 *	index I crop X Y W H flip F decode X Y W H out H W BYTES
 *
 * and, with OUT, runs the first one on the decode box cut from IN and
 * writes the output tensor's bytes there.  Exit status 2 and the parser's
 * message on stderr for a refused pipeline.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image-transform.h"

static void	usage(void) __attribute__((noreturn));

/* Print the usage and exit. */
static void
usage(void)
{
	fprintf(stderr, "usage: image-transform-tool [-s scalar|avx2] "
	    "[-n count] W H IN PIPELINE SEED EPOCH INDEX [OUT]\n");
	exit(1);
}

int
main(int argc, char **argv)
{
	struct image_pipeline	 p;
	struct image_plan	 plan;
	struct image_work	 w;
	FILE			*fp;
	uint8_t			*img, *out;
	char			*cause;
	uint64_t		 seed, epoch, index, count = 1, i;
	size_t			 len;
	uint32_t		 W, H;
	int			 ch;

	while ((ch = getopt(argc, argv, "s:n:")) != -1) {
		switch (ch) {
		case 's':
			if (strcmp(optarg, "scalar") == 0)
				image_simd_select(IMAGE_SIMD_SCALAR);
			else if (strcmp(optarg, "avx2") == 0) {
				if (image_simd_select(IMAGE_SIMD_AVX2) !=
				    IMAGE_SIMD_AVX2) {
					fprintf(stderr, "no AVX2 here\n");
					return (3);
				}
			} else
				usage();
			break;
		case 'n':
			count = strtoull(optarg, NULL, 10);
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 7 && argc != 8)
		usage();
	W = strtoul(argv[0], NULL, 10);
	H = strtoul(argv[1], NULL, 10);
	seed = strtoull(argv[4], NULL, 0);
	epoch = strtoull(argv[5], NULL, 0);
	index = strtoull(argv[6], NULL, 0);
	if (image_pipeline_parse(argv[3], &p, &cause) != 0) {
		fprintf(stderr, "%s\n", cause != NULL ? cause : "(no cause)");
		free(cause);
		return (2);
	}
	for (i = 0; i < count; i++) {
		image_plan_make(&p, W, H, seed, epoch, index + i, &plan);
		printf("index %" PRIu64 " crop %u %u %u %u flip %u decode %u %u "
		    "%u %u out %u %u %" PRIu64 "\n", index + i, plan.crop.x,
		    plan.crop.y, plan.crop.w, plan.crop.h, plan.flip,
		    plan.decode.x, plan.decode.y, plan.decode.w, plan.decode.h,
		    p.out_h, p.out_w, p.out_bytes);
	}
	if (argc == 7)
		return (0);

	image_plan_make(&p, W, H, seed, epoch, index, &plan);
	len = (size_t)W * H * 3;
	if ((img = malloc(len + 1)) == NULL || (out = malloc(p.out_bytes)) ==
	    NULL) {
		perror("malloc");
		return (1);
	}
	if ((fp = fopen(argv[2], "rb")) == NULL || fread(img, 1, len, fp) !=
	    len) {
		fprintf(stderr, "%s: cannot read %zu bytes\n", argv[2], len);
		return (1);
	}
	fclose(fp);
	memset(&w, 0, sizeof w);
	/* The decoder's box, cut out into rows of its own width. */
	{
		uint8_t	*box;
		size_t	 bw = (size_t)plan.decode.w * 3, y;

		if ((box = malloc(bw * plan.decode.h + (plan.decode.h == 0))) ==
		    NULL) {
			perror("malloc");
			return (1);
		}
		for (y = 0; y < plan.decode.h; y++)
			memcpy(box + y * bw, img + ((plan.decode.y + y) *
			    (size_t)W + plan.decode.x) * 3, bw);
		if (image_plan_run(&p, &plan, box, bw, out, &w) != 0) {
			fprintf(stderr, "image_plan_run: %s\n",
			    strerror(errno));
			return (1);
		}
		free(box);
	}
	if ((fp = fopen(argv[7], "wb")) == NULL || fwrite(out, 1,
	    p.out_bytes, fp) != p.out_bytes || fclose(fp) != 0) {
		fprintf(stderr, "%s: cannot write\n", argv[7]);
		return (1);
	}
	image_work_free(&w);
	free(img);
	free(out);
	return (0);
}
