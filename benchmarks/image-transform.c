/* SPDX-License-Identifier: MIT */
/*
 * The image transforms' cost per image, one thread, scalar against AVX2:
 *
 *	build/benchmarks/image-transform [rounds] [images per round]
 *
 * On a 500x375 RGB image (an ImageNet-sized photo, here smooth gradients
 * with noise): RandomResizedCrop(224) + flip + ToTensor + Normalize, whose
 * crops cover about 43 % of the image on average, and Resize(256) +
 * CenterCrop(224) + ToTensor + Normalize.  Each round plans and runs
 * every image once (no decoding: the plan reads the decoded image in
 * place); the median round is reported, in the thread's CPU time.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image-transform.h"
#include "splitmix64.h"

#define W	500
#define H	375

static double	now(void);
static int	cmp_double(const void *, const void *);
static double	bench(const char *, const uint8_t *, int, int, double *);

/* Seconds of this thread's CPU time (other processes share the CPUs). */
static double
now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (ts.tv_sec + ts.tv_nsec * 1e-9);
}

/* qsort's order for doubles. */
static int
cmp_double(const void *a, const void *b)
{
	double	x = *(const double *)a, y = *(const double *)b;

	return (x < y ? -1 : x > y);
}

/* Median ms per image of @text over @rounds rounds of @n images. */
static double
bench(const char *text, const uint8_t *img, int rounds, int n, double *area)
{
	struct image_pipeline	 p;
	struct image_plan	 plan;
	struct image_work	 w;
	double			*t, t0, med, sum = 0;
	char			*cause;
	void			*out;
	int			 r, i;

	if (image_pipeline_parse(text, &p, &cause) != 0) {
		fprintf(stderr, "%s\n", cause);
		exit(1);
	}
	if ((out = malloc(p.out_bytes)) == NULL || (t = calloc(rounds,
	    sizeof *t)) == NULL) {
		perror("malloc");
		exit(1);
	}
	memset(&w, 0, sizeof w);
	for (r = -1; r < rounds; r++) {
		t0 = now();
		for (i = 0; i < n; i++) {
			image_plan_make(&p, W, H, 1, 0, i, &plan);
			if (r == 0)
				sum += (double)plan.decode.w * plan.decode.h /
				    (W * H);
			if (image_plan_run(&p, &plan, img + ((size_t)
			    plan.decode.y * W + plan.decode.x) * 3,
			    (size_t)W * 3, out, &w) != 0) {
				perror("image_plan_run");
				exit(1);
			}
		}
		if (r >= 0)	/* round -1 warms up */
			t[r] = (now() - t0) * 1e3 / n;
	}
	qsort(t, rounds, sizeof *t, cmp_double);
	med = t[rounds / 2];
	*area = sum / n;
	image_work_free(&w);
	free(out);
	free(t);
	return (med);
}

int
main(int argc, char **argv)
{
	static const char *const names[] = {
		"RandomResizedCrop(224)+flip+ToTensor+Normalize",
		"Resize(256)+CenterCrop(224)+ToTensor+Normalize",
		"RandomResizedCrop(224)+flip, uint8 CHW",
	};
	static const char *const texts[] = {
		"RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), "
		    "Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])",
		"Resize(256), CenterCrop(224), ToTensor(), "
		    "Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])",
		"RandomResizedCrop(224), RandomHorizontalFlip(), "
		    "PILToTensor()",
	};
	uint8_t		*img;
	uint64_t	 st = 1;
	double		 s, a, area;
	size_t		 i, x, y;
	int		 rounds = argc > 1 ? atoi(argv[1]) : 9;
	int		 n = argc > 2 ? atoi(argv[2]) : 400;

	if (rounds < 1 || n < 1) {
		fprintf(stderr, "usage: image-transform [rounds] [images]\n");
		return (1);
	}
	if ((img = malloc((size_t)W * H * 3)) == NULL)
		return (1);
	for (y = 0; y < H; y++)
		for (x = 0; x < W; x++)
			for (i = 0; i < 3; i++)
				img[(y * W + x) * 3 + i] = (splitmix64_next(&st)
				    & 31) + (i == 0 ? x / 2 : i == 1 ? y / 2 :
				    (x + y) / 4);
	printf("%ux%u RGB, %d rounds of %d images, median ms per image\n",
	    W, H, rounds, n);
	for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		image_simd_select(IMAGE_SIMD_SCALAR);
		s = bench(texts[i], img, rounds, n, &area);
		if (image_simd_select(IMAGE_SIMD_AVX2) == IMAGE_SIMD_AVX2)
			a = bench(texts[i], img, rounds, n, &area);
		else
			a = 0;
		printf("%-48s decode box %4.1f %% of the image: scalar %.3f ms, "
		    "AVX2 %.3f ms (%.2fx)\n", names[i], area * 100, s, a,
		    a > 0 ? s / a : 0);
	}
	free(img);
	return (0);
}
