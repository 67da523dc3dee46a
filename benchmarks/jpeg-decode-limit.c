/* SPDX-License-Identifier: MIT */
/*
 * jpeg-decode-limit: this machine's limit for plain, full-size JPEG
 * decoding with libjpeg-turbo, the ceiling of any loader that decodes the
 * same files (issue 18's benchmark, benchmarks/images).
 *
 *   jpeg-decode-limit [--threads N] [--rounds R] DIR|LIST
 *
 * Reads every *.jpg / *.jpeg file under DIR (any case; or the files named
 * one a line in the file LIST) into memory first, then, each round, decodes
 * every file once to RGB at full size with libjpeg's defaults (ISLOW DCT,
 * fancy upsampling, scale 1/1; greyscale files to GRAYSCALE, as a loader
 * would then replicate), N threads taking files from a shared counter.  The
 * pixels are summed so the decode cannot be skipped.  Prints each round's
 * images/s on stderr and, at the end, one JSON line on stdout with every
 * round and their median.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <jpeglib.h>

/* One file, read whole. */
struct blob {
	unsigned char *data;
	size_t size;
};

static struct blob *files;
static size_t nfiles, capfiles;
static uint64_t total_bytes;

/* One round's shared state. */
static atomic_size_t next_file;
static atomic_uint_fast64_t failures;
static pthread_barrier_t start_barrier, end_barrier;
static int rounds_left;

/* A libjpeg error manager that returns to the decoder instead of exiting. */
struct decode_err {
	struct jpeg_error_mgr pub;
	jmp_buf jump;
};

/* Per thread: the decompressor, kept across files, and its output. */
struct worker {
	pthread_t thread;
	struct jpeg_decompress_struct cinfo;
	struct decode_err err;
	unsigned char *row;
	size_t rowcap;
	uint64_t checksum, pixels;
};

/* Abort with a message. */
static void
die(const char *what)
{
	fprintf(stderr, "jpeg-decode-limit: %s\n", what);
	exit(1);
}

/* libjpeg's error_exit: back to decode_one's setjmp. */
static void
decode_error_exit_cb(j_common_ptr cinfo)
{
	struct decode_err *e = (struct decode_err *)cinfo->err;

	longjmp(e->jump, 1);
}

/* libjpeg's output_message: silent (failures are counted). */
static void
decode_message_cb(j_common_ptr cinfo)
{
}

/* Append one file's contents to the corpus. */
static void
corpus_add(const char *path, off_t size)
{
	FILE *f;
	struct blob b;

	if ((f = fopen(path, "rb")) == NULL) {
		perror(path);
		exit(1);
	}
	b.size = (size_t)size;
	if ((b.data = malloc(b.size ? b.size : 1)) == NULL)
		die("out of memory");
	if (fread(b.data, 1, b.size, f) != b.size) {
		perror(path);
		exit(1);
	}
	fclose(f);
	if (nfiles == capfiles) {
		capfiles = capfiles ? 2 * capfiles : 1024;
		files = realloc(files, capfiles * sizeof(*files));
		if (files == NULL)
			die("out of memory");
	}
	files[nfiles++] = b;
	total_bytes += b.size;
}

/* Whether a name ends with .jpg or .jpeg, in any case. */
static int
is_jpeg_name(const char *path)
{
	const char *dot = strrchr(path, '.');

	return (dot != NULL && (strcasecmp(dot, ".jpg") == 0 ||
	    strcasecmp(dot, ".jpeg") == 0));
}

/* nftw callback: keep the JPEG files. */
static int
corpus_walk_cb(const char *path, const struct stat *st, int type,
    struct FTW *ftw)
{
	if (type == FTW_F && is_jpeg_name(path))
		corpus_add(path, st->st_size);
	return (0);
}

/* Read the corpus from a directory tree or a list of files. */
static void
corpus_load(const char *where)
{
	struct stat st;
	char line[4096];
	FILE *list;

	if (stat(where, &st) == -1) {
		perror(where);
		exit(1);
	}
	if (S_ISDIR(st.st_mode)) {
		if (nftw(where, corpus_walk_cb, 32, FTW_PHYS) == -1) {
			perror(where);
			exit(1);
		}
		return;
	}
	if ((list = fopen(where, "r")) == NULL) {
		perror(where);
		exit(1);
	}
	while (fgets(line, sizeof(line), list) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '\0')
			continue;
		if (stat(line, &st) == -1) {
			perror(line);
			exit(1);
		}
		corpus_add(line, st.st_size);
	}
	fclose(list);
}

/* Decode one file fully; 0, or -1 when libjpeg refused it. */
static int
decode_one(struct worker *w, const struct blob *b)
{
	struct jpeg_decompress_struct *c = &w->cinfo;
	size_t stride;
	JSAMPROW rows[1];

	if (setjmp(w->err.jump)) {
		jpeg_abort_decompress(c);
		return (-1);
	}
	jpeg_mem_src(c, b->data, (unsigned long)b->size);
	jpeg_read_header(c, TRUE);
	/* libjpeg's defaults: JDCT_ISLOW, fancy upsampling, scale 1/1. */
	if (c->jpeg_color_space != JCS_GRAYSCALE)
		c->out_color_space = JCS_RGB;
	jpeg_start_decompress(c);
	stride = (size_t)c->output_width * (size_t)c->output_components;
	if (stride > w->rowcap) {
		free(w->row);
		if ((w->row = malloc(stride)) == NULL)
			die("out of memory");
		w->rowcap = stride;
	}
	rows[0] = w->row;
	while (c->output_scanline < c->output_height) {
		jpeg_read_scanlines(c, rows, 1);
		w->checksum += w->row[stride / 2];
	}
	w->pixels += (uint64_t)c->output_width * c->output_height;
	jpeg_finish_decompress(c);
	return (0);
}

/* A thread: decode files from the shared counter, round after round. */
static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	size_t i;

	for (;;) {
		pthread_barrier_wait(&start_barrier);
		if (rounds_left == 0)
			return (NULL);
		while ((i = atomic_fetch_add(&next_file, 1)) < nfiles)
			if (decode_one(w, &files[i]) == -1)
				atomic_fetch_add(&failures, 1);
		pthread_barrier_wait(&end_barrier);
	}
}

/* Seconds on the monotonic clock. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
}

/* qsort comparator for doubles. */
static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return ((x > y) - (x < y));
}

/* Print usage and exit with code. */
static void
usage(int code)
{
	fprintf(code ? stderr : stdout,
	    "usage: jpeg-decode-limit [--threads N] [--rounds R] DIR|LIST\n");
	exit(code);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int nthreads = 2, rounds = 5, ch, t, r;
	struct worker *ws;
	double *rate, *sorted, median, t0, el;
	uint64_t pixels = 0, checksum = 0;
	size_t i;

	while ((ch = getopt_long(argc, argv, "t:r:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 't':
			nthreads = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'h':
			usage(0);
			break;
		default:
			usage(2);
		}
	}
	if (optind != argc - 1 || nthreads < 1 || nthreads > 256 || rounds < 1)
		usage(2);
	corpus_load(argv[optind]);
	if (nfiles == 0)
		die("no .jpg or .jpeg files found");
	fprintf(stderr, "jpeg-decode-limit: %zu files, %.1f MB in memory, "
	    "%d threads, %d rounds\n", nfiles, (double)total_bytes / 1e6,
	    nthreads, rounds);

	ws = calloc((size_t)nthreads, sizeof(*ws));
	rate = calloc((size_t)rounds, sizeof(*rate));
	sorted = calloc((size_t)rounds, sizeof(*sorted));
	if (ws == NULL || rate == NULL || sorted == NULL)
		die("out of memory");
	rounds_left = rounds;
	pthread_barrier_init(&start_barrier, NULL, (unsigned)nthreads + 1);
	pthread_barrier_init(&end_barrier, NULL, (unsigned)nthreads + 1);
	for (t = 0; t < nthreads; t++) {
		struct worker *w = &ws[t];

		w->cinfo.err = jpeg_std_error(&w->err.pub);
		w->err.pub.error_exit = decode_error_exit_cb;
		w->err.pub.output_message = decode_message_cb;
		jpeg_create_decompress(&w->cinfo);
		if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
			die("cannot start a thread");
	}
	for (r = 0; r < rounds; r++) {
		atomic_store(&next_file, 0);
		t0 = now();
		pthread_barrier_wait(&start_barrier);
		pthread_barrier_wait(&end_barrier);
		el = now() - t0;
		rate[r] = (double)nfiles / el;
		fprintf(stderr, "round %d: %.0f images/s (%.3f s)\n", r + 1,
		    rate[r], el);
	}
	rounds_left = 0;
	pthread_barrier_wait(&start_barrier);
	for (t = 0; t < nthreads; t++) {
		pthread_join(ws[t].thread, NULL);
		jpeg_destroy_decompress(&ws[t].cinfo);
		free(ws[t].row);
		pixels += ws[t].pixels;
		checksum += ws[t].checksum;
	}
	memcpy(sorted, rate, (size_t)rounds * sizeof(*rate));
	qsort(sorted, (size_t)rounds, sizeof(*sorted), cmp_double);
	median = rounds % 2 ? sorted[rounds / 2] :
	    (sorted[rounds / 2 - 1] + sorted[rounds / 2]) / 2;
	fprintf(stderr, "median: %.0f images/s, %.1f Mpixel/s\n", median,
	    median * (double)pixels / ((double)nfiles * rounds) / 1e6);
	printf("{\"files\": %zu, \"bytes\": %llu, \"threads\": %d, "
	    "\"rounds\": [", nfiles, (unsigned long long)total_bytes, nthreads);
	for (r = 0; r < rounds; r++)
		printf("%s%.1f", r ? ", " : "", rate[r]);
	printf("], \"median_images_per_s\": %.1f, \"mean_megapixels\": %.4f, "
	    "\"failures\": %llu, \"checksum\": %llu}\n", median,
	    (double)pixels / ((double)nfiles * rounds) / 1e6,
	    (unsigned long long)atomic_load(&failures),
	    (unsigned long long)checksum);
	for (i = 0; i < nfiles; i++)
		free(files[i].data);
	free(files);
	free(ws);
	free(rate);
	free(sorted);
	return (atomic_load(&failures) ? 1 : 0);
}
