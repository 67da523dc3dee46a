/* SPDX-License-Identifier: MIT */
/*
 * A trainer's own files as a dataset, passed by descriptor
 * (infeed_attach_files, Attach.files), against the real infeedd: every
 * index once per epoch with the right bytes and labels for npy and raw
 * pairs; only the descriptors are used (the files are unlinked before the
 * attach); descriptors that are not readable regular files and bad npy
 * headers are refused, naming the problem; every copy of the descriptors
 * is closed in the daemon and its workers after detach; a worker killed
 * mid-session is replaced and the session goes on with the same data; a
 * daemon restart is ridden out by re-sending the files; descriptors with
 * any other frame are closed and the frame refused; a shuffled sparse file
 * of 2^40 samples is served (no permutation table) while a bystander is.
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "sampler.h"

#define N		103	/* samples: not a multiple of the batch */
#define B		4
#define STEPS		(N / B)	/* drop_last */

/* Sample i's element j, and its label, in every fixture. */
static float
x_of(uint64_t i, unsigned j)
{
	return ((float)i * 10.0f + (float)j);
}

static int64_t
y_of(uint64_t i)
{
	return ((int64_t)(i * 7 % 10));
}

/* Write a version 1.0 .npy file with header dict @dict. */
static void
write_npy(const char *path, const char *dict, const void *data, size_t len)
{
	uint8_t	*buf;
	size_t	 hlen = strlen(dict) + 1, pad, total;

	pad = (64 - (10 + hlen) % 64) % 64;
	hlen += pad;
	total = 10 + hlen + len;
	ck_assert_ptr_nonnull(buf = malloc(total));
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (uint8_t)(hlen & 0xff);
	buf[9] = (uint8_t)(hlen >> 8);
	memcpy(buf + 10, dict, strlen(dict));
	memset(buf + 10 + strlen(dict), ' ', pad);
	buf[10 + hlen - 1] = '\n';
	memcpy(buf + 10 + hlen, data, len);
	write_file(path, buf, total);
	free(buf);
}

/* x.npy (N, 2, 3) float32 and y.npy (N,) int64. */
static void
make_npy_pair(void)
{
	float		x[N * 6];
	int64_t		y[N];
	uint64_t	i;
	unsigned	j;

	for (i = 0; i < N; i++) {
		for (j = 0; j < 6; j++)
			x[i * 6 + j] = x_of(i, j);
		y[i] = y_of(i);
	}
	write_npy(tpath("x.npy"), "{'descr': '<f4', 'fortran_order': False, "
	    "'shape': (103, 2, 3), }", x, sizeof(x));
	write_npy(tpath("y.npy"), "{'descr': '<i8', 'fortran_order': False, "
	    "'shape': (103,), }", y, sizeof(y));
}

/* x.bin: N records of 2x3 float32; y.bin: N int32 labels. */
static void
make_raw_pair(void)
{
	float		x[N * 6];
	int32_t		y[N];
	uint64_t	i;
	unsigned	j;

	for (i = 0; i < N; i++) {
		for (j = 0; j < 6; j++)
			x[i * 6 + j] = x_of(i, j);
		y[i] = (int32_t)y_of(i);
	}
	write_file(tpath("x.bin"), x, sizeof(x));
	write_file(tpath("y.bin"), y, sizeof(y));
}

/* Open @name with @flags, then unlink it: only the descriptor is left. */
static int
open_unlinked(const char *name, int flags)
{
	int	fd;

	ck_assert_int_ne(fd = open(tpath(name), flags | O_CLOEXEC), -1);
	ck_assert_int_eq(unlink(tpath(name)), 0);
	return (fd);
}

/* Files for an npy pair or a raw pair (float32 2x3, int32 labels). */
static void
files_for(struct infeed_files *fl, int npy, int dfd, int lfd)
{
	infeed_files_init(fl);
	fl->data_fd = dfd;
	fl->labels_fd = lfd;
	fl->data_format = npy ? INFEED_FILE_NPY : INFEED_FILE_RAW;
	fl->labels_format = lfd == -1 ? INFEED_FILE_NONE : npy ?
	    INFEED_FILE_NPY : INFEED_FILE_RAW;
	if (!npy) {
		fl->ndim = 2;
		fl->shape[0] = 2;
		fl->shape[1] = 3;
		fl->dtype = INFEED_DTYPE_FLOAT32;
		fl->label_dtype = lfd == -1 ? 0 : INFEED_DTYPE_INT32;
	}
}

/* Shuffled options, batch B, dropping the last partial step. */
static void
options_for(struct infeed_options *o)
{
	infeed_options_init(o);
	o->batch_size = B;
	o->shuffle = true;
	o->seed = 5;
	o->load_indefinitely = true;
	o->reconnect_timeout_ms = 10000;
}

/* Check a step's rows: bytes and labels of the indices it says. */
static void
check_step(const struct infeed_step *st, int labels, uint8_t *seen)
{
	const float	*x = st->data;
	uint64_t	 r, i;
	unsigned	 j;

	ck_assert_uint_eq(st->rows, B);
	for (r = 0; r < st->rows; r++) {
		i = st->indices[r];
		ck_assert_uint_lt(i, N);
		seen[i]++;
		for (j = 0; j < 6; j++)
			ck_assert_msg(x[r * 6 + j] == x_of(i, j), "row %llu "
			    "(index %llu) element %u is %g, expected %g",
			    (unsigned long long)r, (unsigned long long)i, j,
			    (double)x[r * 6 + j], (double)x_of(i, j));
		ck_assert_int_eq(st->labels[r], labels ? y_of(i) : 0);
	}
}

/*
 * Read @epochs whole epochs: every index once (all but the N % B that
 * drop_last leaves out), shuffled, with the right bytes and labels.
 */
static void
read_epochs(struct infeed *f, unsigned epochs, int labels)
{
	struct infeed_step	st;
	uint8_t			seen[N];
	unsigned		e, s, n, in_order;
	uint64_t		i;

	for (e = 0; e < epochs; e++) {
		memset(seen, 0, sizeof(seen));
		in_order = 0;
		for (s = 0; s < STEPS; s++) {
			ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
			    infeed_error(f));
			check_step(&st, labels, seen);
			in_order += st.indices[0] == (uint64_t)s * B;
			ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
		}
		for (i = 0, n = 0; i < N; i++) {
			ck_assert_uint_le(seen[i], 1);
			n += seen[i];
		}
		ck_assert_uint_eq(n, STEPS * B);
		ck_assert_uint_lt(in_order, STEPS);	/* shuffled */
	}
}

/* The workers' pids, from the daemon's Stats. */
static size_t
worker_pids(struct infeed *f, pid_t *pids, size_t max)
{
	struct infeed_stats	*st;
	size_t			 i, n = 0;

	ck_assert_msg(infeed_get_stats(f, &st) == INFEED_OK, "%s",
	    infeed_error(f));
	for (i = 0; i < st->nworkers && n < max; i++) {
		if (st->workers[i]->pid > 0)
			pids[n++] = st->workers[i]->pid;
	}
	infeed_stats_free(st);
	return (n);
}

/* Descriptors of the daemon and of its workers @pids together. */
static int
count_all(const pid_t *pids, size_t n)
{
	int	total = count_fds(infeedd_pid, RING_MEMFD);
	size_t	i;

	for (i = 0; i < n; i++)
		total += count_fds(pids[i], RING_MEMFD);
	return (total);
}

START_TEST(npy_pair_by_descriptor_every_index_once)
{
	struct infeed			*f;
	struct infeed_files		 fl;
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	int				 dfd, lfd;

	make_npy_pair();
	dfd = open_unlinked("x.npy", O_RDONLY);
	lfd = open_unlinked("y.npy", O_RDONLY);
	f = client();
	files_for(&fl, 1, dfd, lfd);
	options_for(&o);
	ck_assert_msg(infeed_attach_files(f, "my-npy", &fl, &o, &info) ==
	    INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_eq(info.steps_per_epoch, STEPS);
	ck_assert_uint_eq(info.ndim, 2);
	ck_assert_uint_eq(info.sample_shape[0], 2);
	ck_assert_uint_eq(info.sample_shape[1], 3);
	ck_assert_int_eq(info.data_dtype, INFEED_DTYPE_FLOAT32);
	/* The caller's descriptors stay the caller's. */
	ck_assert_int_ne(fcntl(dfd, F_GETFD), -1);
	read_epochs(f, 2, 1);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	infeed_free(f);
	close(dfd);
	close(lfd);
}
END_TEST

START_TEST(raw_pair_by_descriptor_every_index_once)
{
	struct infeed		*f;
	struct infeed_files	 fl;
	struct infeed_options	 o;
	int			 dfd, lfd;

	make_raw_pair();
	/* Read-write is readable too. */
	dfd = open_unlinked("x.bin", O_RDWR);
	lfd = open_unlinked("y.bin", O_RDONLY);
	f = client();
	files_for(&fl, 0, dfd, lfd);
	options_for(&o);
	/* The caller may close its own once attached. */
	ck_assert_msg(infeed_attach_files(f, "my-raw", &fl, &o, NULL) ==
	    INFEED_OK, "%s", infeed_error(f));
	close(dfd);
	close(lfd);
	read_epochs(f, 2, 1);
	infeed_free(f);
}
END_TEST

START_TEST(raw_without_labels_reads_label_zero)
{
	struct infeed		*f;
	struct infeed_files	 fl;
	struct infeed_options	 o;
	int			 dfd;

	make_raw_pair();
	dfd = open_unlinked("x.bin", O_RDONLY);
	f = client();
	files_for(&fl, 0, dfd, -1);
	options_for(&o);
	ck_assert_msg(infeed_attach_files(f, "unlabelled", &fl, &o, NULL) ==
	    INFEED_OK, "%s", infeed_error(f));
	read_epochs(f, 1, 0);
	infeed_free(f);
	close(dfd);
}
END_TEST

/* Attach with @fl must fail with daemon code @code naming @what. */
static void
refused(struct infeed *f, const struct infeed_files *fl, int code,
    const char *what)
{
	ck_assert_int_eq(infeed_attach_files(f, "bad", fl, NULL, NULL),
	    INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(f), code);
	ck_assert_msg(strstr(infeed_error(f), what) != NULL, "'%s' lacks "
	    "'%s'", infeed_error(f), what);
}

START_TEST(unreadable_and_irregular_descriptors_refused)
{
	struct infeed		*f;
	struct infeed_files	 fl;
	int			 fd, p[2], sv[2];

	make_npy_pair();
	f = client();

	ck_assert_int_ne(fd = open(tpath("x.npy"), O_WRONLY), -1);
	files_for(&fl, 1, fd, -1);
	refused(f, &fl, 4, "the data file: opened write-only (O_WRONLY)");
	close(fd);

	ck_assert_int_ne(fd = open(dir, O_RDONLY | O_DIRECTORY), -1);
	files_for(&fl, 1, fd, -1);
	refused(f, &fl, 4, "not a regular file but a directory");
	close(fd);

	ck_assert_int_eq(pipe(p), 0);
	files_for(&fl, 1, p[0], -1);
	refused(f, &fl, 4, "not a regular file but a pipe");
	close(p[0]);
	close(p[1]);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	files_for(&fl, 1, sv[0], -1);
	refused(f, &fl, 4, "not a regular file but a socket");
	close(sv[0]);
	close(sv[1]);

	write_file(tpath("empty"), "", 0);
	ck_assert_int_ne(fd = open(tpath("empty"), O_RDONLY), -1);
	files_for(&fl, 1, fd, -1);
	refused(f, &fl, 4, "the data file: the file is empty");
	close(fd);

	/* Good data, labels that are a directory. */
	ck_assert_int_ne(fd = open(tpath("x.npy"), O_RDONLY), -1);
	ck_assert_int_ne(p[0] = open(dir, O_RDONLY | O_DIRECTORY), -1);
	files_for(&fl, 1, fd, p[0]);
	refused(f, &fl, 4, "the labels file: not a regular file");
	close(p[0]);

	/* Raw data without a shape. */
	files_for(&fl, 0, fd, -1);
	fl.ndim = 0;
	refused(f, &fl, 4, "Files.shape");
	close(fd);

	/* The handle still works. */
	ck_assert_int_eq(infeed_attach(f, "raw", NULL, NULL), INFEED_OK);
	infeed_free(f);
}
END_TEST

START_TEST(bad_content_refused_naming_the_problem)
{
	struct infeed		*f;
	struct infeed_files	 fl;
	float			 x[6] = { 0 };
	int64_t			 y[2] = { 0, 1 };
	int			 fd, lfd;

	f = client();
	write_npy(tpath("f.npy"), "{'descr': '<f4', 'fortran_order': True, "
	    "'shape': (1, 2, 3), }", x, sizeof(x));
	ck_assert_int_ne(fd = open(tpath("f.npy"), O_RDONLY), -1);
	files_for(&fl, 1, fd, -1);
	refused(f, &fl, 8, "the data file: the array is in Fortran order");
	close(fd);

	write_npy(tpath("c.npy"), "{'descr': '<c8', 'fortran_order': False, "
	    "'shape': (3,), }", x, 24);
	ck_assert_int_ne(fd = open(tpath("c.npy"), O_RDONLY), -1);
	files_for(&fl, 1, fd, -1);
	refused(f, &fl, 8, "dtype '<c8' is not supported");
	close(fd);

	write_file(tpath("junk.npy"), "PK\x03\x04 not numpy", 15);
	ck_assert_int_ne(fd = open(tpath("junk.npy"), O_RDONLY), -1);
	files_for(&fl, 1, fd, -1);
	refused(f, &fl, 8, "not a .npy file");
	close(fd);

	/* 100 bytes are not whole records of 2x3 float32 (24 bytes). */
	write_file(tpath("odd.bin"), x, 20);
	ck_assert_int_ne(fd = open(tpath("odd.bin"), O_RDONLY), -1);
	files_for(&fl, 0, fd, -1);
	refused(f, &fl, 8, "20 bytes is not a whole number of records of "
	    "float32 2x3 (24 bytes each)");
	close(fd);

	/* One sample, two labels. */
	write_npy(tpath("one.npy"), "{'descr': '<f4', 'fortran_order': "
	    "False, 'shape': (1, 2, 3), }", x, sizeof(x));
	write_npy(tpath("two.npy"), "{'descr': '<i8', 'fortran_order': "
	    "False, 'shape': (2,), }", y, sizeof(y));
	ck_assert_int_ne(fd = open(tpath("one.npy"), O_RDONLY), -1);
	ck_assert_int_ne(lfd = open(tpath("two.npy"), O_RDONLY), -1);
	files_for(&fl, 1, fd, lfd);
	refused(f, &fl, 8, "the labels file: labels have shape (2,) where "
	    "the data file needs (1,)");
	close(fd);
	close(lfd);
	infeed_free(f);
}
END_TEST

START_TEST(descriptors_closed_in_daemon_and_workers_after_detach)
{
	struct infeed		*f;
	struct infeed_files	 fl;
	struct infeed_options	 o;
	struct infeed_step	 st;
	pid_t			 pids[8];
	size_t			 n;
	int			 before, during, after, dfd, lfd, tries;

	make_npy_pair();
	f = client();
	n = worker_pids(f, pids, 8);
	ck_assert_uint_eq(n, 2);
	before = count_all(pids, n);
	dfd = open_unlinked("x.npy", O_RDONLY);
	lfd = open_unlinked("y.npy", O_RDONLY);
	files_for(&fl, 1, dfd, lfd);
	options_for(&o);
	o.early_preload = true;
	ck_assert_msg(infeed_attach_files(f, "counted", &fl, &o, NULL) ==
	    INFEED_OK, "%s", infeed_error(f));
	/* Enough steps that both workers had jobs, so both have the files. */
	for (tries = 0; tries < 20; tries++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	during = count_all(pids, n);
	ck_assert_msg(during > before, "%d descriptors with the session, "
	    "%d before", during, before);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	/* The workers close theirs when they read UNMAP. */
	for (tries = 0; tries < 200; tries++) {
		if ((after = count_all(pids, n)) == before)
			break;
		usleep(10000);
	}
	ck_assert_msg(after == before, "%d descriptors in the daemon and its "
	    "workers after detach, %d before attach", after, before);
	infeed_free(f);
	close(dfd);
	close(lfd);
}
END_TEST

START_TEST(killed_worker_replaced_session_goes_on)
{
	struct infeed		*f;
	struct infeed_files	 fl;
	struct infeed_options	 o;
	struct infeed_step	 st;
	pid_t			 pids[8];
	size_t			 n, i;
	int			 dfd, lfd;

	make_npy_pair();
	dfd = open_unlinked("x.npy", O_RDONLY);
	lfd = open_unlinked("y.npy", O_RDONLY);
	f = client();
	files_for(&fl, 1, dfd, lfd);
	options_for(&o);
	ck_assert_msg(infeed_attach_files(f, "survivor", &fl, &o, NULL) ==
	    INFEED_OK, "%s", infeed_error(f));
	close(dfd);
	close(lfd);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	n = worker_pids(f, pids, 8);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(kill(pids[i], SIGKILL), 0);
	/* The rest of this epoch and two more, from new workers. */
	for (i = 1; i < STEPS; i++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	read_epochs(f, 2, 1);
	ck_assert_uint_ne(worker_pids(f, pids + 4, 4), 0);
	for (i = 0; i < n; i++)
		ck_assert_int_ne(pids[4], pids[i]);
	infeed_free(f);
}
END_TEST

/* Restarts of every worker so far, from Stats. */
static unsigned
worker_restarts(struct infeed *f)
{
	struct infeed_stats	*st;
	unsigned		 n = 0;
	size_t			 i;

	ck_assert_msg(infeed_get_stats(f, &st) == INFEED_OK, "%s",
	    infeed_error(f));
	for (i = 0; i < st->nworkers; i++)
		n += st->workers[i]->restarts;
	infeed_stats_free(st);
	return (n);
}

#define CUT_N		64		/* samples of 1 MiB, sparse */
#define CUT_SAMPLE	(1u << 20)

/*
 * A trainer's raw file truncated while its session reads it (rows of
 * 1 MiB, so that workers are copying when it happens): the session ends
 * with ERROR_DATA saying the file was truncated, with the sample beyond
 * it; no worker dies (a worker copying a row out of the mapping used to
 * die of SIGBUS, every busy one, each respawned, and the client was told
 * "cannot read sample N ... check that file" with no reason); another
 * trainer is served meanwhile.
 */
START_TEST(file_truncated_under_session_is_error_data_no_worker_dies)
{
	struct bystander	 b;
	struct bystander_report	 rep;
	struct infeed		*f;
	struct infeed_files	 fl;
	struct infeed_options	 o;
	struct infeed_step	 st;
	unsigned		 restarts, s;
	pid_t			 cutter;
	int			 wfd, dfd, status, rc = INFEED_OK;

	ck_assert_int_ne(wfd = open(tpath("big.bin"), O_RDWR | O_CREAT |
	    O_CLOEXEC, 0644), -1);
	ck_assert_int_eq(ftruncate(wfd, (off_t)CUT_N * CUT_SAMPLE), 0);
	dfd = open_unlinked("big.bin", O_RDONLY);
	f = client();
	infeed_files_init(&fl);
	fl.data_fd = dfd;
	fl.labels_fd = -1;
	fl.data_format = INFEED_FILE_RAW;
	fl.labels_format = INFEED_FILE_NONE;
	fl.ndim = 1;
	fl.shape[0] = CUT_SAMPLE;
	fl.dtype = INFEED_DTYPE_UINT8;
	infeed_options_init(&o);
	o.batch_size = 16;
	o.buffer_size = 3;
	o.load_indefinitely = true;
	ck_assert_msg(infeed_attach_files(f, "cut", &fl, &o, NULL) ==
	    INFEED_OK, "%s", infeed_error(f));
	close(dfd);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	restarts = worker_restarts(f);
	bystander_start(&b);
	usleep(300000);
	/*
	 * Cut it to three pages 50 ms into a run of steps taken as fast as
	 * they come, so that workers are copying rows when it happens.
	 */
	ck_assert_int_ne(cutter = fork(), -1);
	if (cutter == 0) {
		usleep(50000);
		_exit(ftruncate(wfd, 3 * 4096) == 0 ? 0 : 1);
	}
	for (s = 0; s < 100000 && rc == INFEED_OK; s++) {
		if ((rc = infeed_next(f, &st)) == INFEED_OK)
			ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_int_eq(waitpid(cutter, &status, 0), cutter);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	usleep(300000);
	bystander_stop(&b, &rep);
	fprintf(stderr, "after %u steps: %s\n", s, infeed_error(f));
	ck_assert_msg(rc == INFEED_ERR_DAEMON, "%d after %u steps: %s", rc, s,
	    infeed_error(f));
	ck_assert_int_eq(infeed_daemon_code(f), 8);	/* ERROR_DATA */
	ck_assert_msg(strstr(infeed_error(f), "truncated") != NULL &&
	    (strstr(infeed_error(f), "while the session read it") != NULL ||
	    strstr(infeed_error(f), "after the session began") != NULL),
	    "%s", infeed_error(f));
	ck_assert_msg(worker_restarts(f) == restarts, "workers died: %u "
	    "restarts, %u before the file was cut; see %s/infeedd.log",
	    worker_restarts(f), restarts, dir);
	bystander_assert(&rep, 250);
	infeed_free(f);
	close(wfd);
}
END_TEST

START_TEST(daemon_restart_resumes_with_the_same_files)
{
	struct infeed		*f;
	struct infeed_files	 fl;
	struct infeed_options	 o;
	struct infeed_step	 st;
	unsigned		 s;
	int			 dfd, lfd;

	make_raw_pair();
	dfd = open_unlinked("x.bin", O_RDONLY);
	lfd = open_unlinked("y.bin", O_RDONLY);
	f = client();
	files_for(&fl, 0, dfd, lfd);
	options_for(&o);
	ck_assert_msg(infeed_attach_files(f, "resumed", &fl, &o, NULL) ==
	    INFEED_OK, "%s", infeed_error(f));
	close(dfd);
	close(lfd);
	for (s = 0; s < STEPS; s++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_int_eq(infeedd_stop(), 0);
	infeedd_start(NULL);
	/* The handle's duplicates go to the new daemon. */
	read_epochs(f, 1, 1);
	infeed_free(f);
}
END_TEST

/* Send one frame with @fd on a raw socket. */
static void
raw_send_fd(int sock, const Infeed__Frame *fr, int fd)
{
	uint8_t	*buf;
	size_t	 len;

	ck_assert_ptr_nonnull(buf = wire_pack(fr, INFEED_DEFAULT_MAX_FRAME,
	    &len));
	ck_assert_int_eq(wire_send_all(sock, buf, len, fd), 0);
	free(buf);
}

/*
 * Wait (2 s at most) until the daemon serves no connection but watcher
 * @sock: those before it (the harness's readiness probe, the test's own)
 * are closed in the daemon too, so that its descriptors can be counted.
 */
static void
wait_only_watcher(int sock, struct wire_in *in)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *r;
	Infeed__GetStats	 gs = INFEED__GET_STATS__INIT;
	uint64_t		 clients = 0;
	int			 tries;

	fr.msg_case = INFEED__FRAME__MSG_GET_STATS;
	fr.get_stats = &gs;
	for (tries = 0; tries < 200; tries++) {
		raw_send(sock, &fr);
		ck_assert_ptr_nonnull(r = raw_recv(sock, in));
		ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_STATS);
		clients = r->stats->clients;
		infeed__frame__free_unpacked(r, NULL);
		if (clients == 1)
			return;
		usleep(10000);
	}
	ck_abort_msg("the daemon still serves %llu clients",
	    (unsigned long long)clients);
}

START_TEST(descriptors_with_other_frames_closed_and_refused)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *r;
	Infeed__GetStats	 gs = INFEED__GET_STATS__INIT;
	Infeed__Attach		 a = INFEED__ATTACH__INIT;
	struct wire_in		 in, win;
	int			 sock, fd, before, after, tries, watcher;

	make_npy_pair();
	ck_assert_int_ne(fd = open(tpath("x.npy"), O_RDONLY), -1);
	watcher = raw_connect();
	wire_in_init(&win, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(watcher, &win, WIRE_PROTOCOL_VERSION);
	wait_only_watcher(watcher, &win);
	before = count_fds(infeedd_pid, RING_MEMFD);

	/* GetStats with a descriptor: BAD_FRAME, then the daemon hangs up. */
	sock = raw_connect();
	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(sock, &in, WIRE_PROTOCOL_VERSION);
	fr.msg_case = INFEED__FRAME__MSG_GET_STATS;
	fr.get_stats = &gs;
	raw_send_fd(sock, &fr, fd);
	ck_assert_ptr_nonnull(r = raw_recv(sock, &in));
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
	ck_assert_int_eq(r->error->code, INFEED__ERROR_CODE__ERROR_BAD_FRAME);
	ck_assert_ptr_nonnull(strstr(r->error->message, "GetStats came with "
	    "file descriptors"));
	infeed__frame__free_unpacked(r, NULL);
	ck_assert(raw_closed(sock));
	close(sock);
	wire_in_clear(&in);

	/* An Attach to the catalogue with one: refused, the connection stays. */
	sock = raw_connect();
	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(sock, &in, WIRE_PROTOCOL_VERSION);
	a.dataset = (char *)"raw";
	fr.msg_case = INFEED__FRAME__MSG_ATTACH;
	fr.attach = &a;
	raw_send_fd(sock, &fr, fd);
	ck_assert_ptr_nonnull(r = raw_recv(sock, &in));
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
	ck_assert_int_eq(r->error->code,
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(r->error->message, "descriptors come "
	    "only with Attach.files"));
	infeed__frame__free_unpacked(r, NULL);
	fr.msg_case = INFEED__FRAME__MSG_GET_STATS;
	fr.get_stats = &gs;
	raw_send(sock, &fr);
	ck_assert_ptr_nonnull(r = raw_recv(sock, &in));
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_STATS);
	infeed__frame__free_unpacked(r, NULL);
	close(sock);
	wire_in_clear(&in);

	/* Neither descriptor stays in the daemon. */
	wait_only_watcher(watcher, &win);
	for (tries = 0; tries < 200; tries++) {
		if ((after = count_fds(infeedd_pid, RING_MEMFD)) == before)
			break;
		usleep(10000);
	}
	ck_assert_int_eq(after, before);
	close(watcher);
	wire_in_clear(&win);
	close(fd);
}
END_TEST

/* The daemon's peak resident memory, in KiB (VmHWM), or -1. */
static long
daemon_peak_kib(void)
{
	char	 path[64], line[256];
	FILE	*fp;
	long	 kib = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)infeedd_pid);
	if ((fp = fopen(path, "r")) == NULL)
		return (-1);
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
			break;
	fclose(fp);
	return (kib);
}

#define HUGE_N		((uint64_t)1 << 40)
#define HUGE_B		64

/* Attach to the sparse file @fd as one-byte samples, shuffled, seed 5. */
static void
huge_attach(struct infeed *f, int fd)
{
	struct infeed_files		fl;
	struct infeed_options		o;
	struct infeed_session_info	info;

	infeed_files_init(&fl);
	fl.data_fd = fd;
	fl.labels_fd = -1;
	fl.data_format = INFEED_FILE_RAW;
	fl.labels_format = INFEED_FILE_NONE;
	fl.dtype = INFEED_DTYPE_UINT8;
	fl.ndim = 1;
	fl.shape[0] = 1;
	infeed_options_init(&o);
	o.batch_size = HUGE_B;
	o.shuffle = true;
	o.seed = 5;
	/*
	 * One of the two workers: each row in a hole of a sparse file costs
	 * its worker a readahead window of zeroed page cache (8 MiB where
	 * read_ahead_kb is 8192: 3 to 40 ms a row), the session's own reads,
	 * which would keep both workers from the bystander for seconds.
	 */
	o.num_workers = 1;
	o.reconnect_timeout_ms = 0;	/* a daemon that died fails the test */
	ck_assert_msg(infeed_attach_files(f, "huge", &fl, &o, &info) ==
	    INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_eq(info.steps_per_epoch, HUGE_N / HUGE_B);
}

/*
 * Take step @step of epoch 0: @want's indices (when not NULL), each row
 * byte @bytes[j] (0 when NULL), label 0.  Returns its indices in @got.
 */
static void
huge_step(struct infeed *f, uint64_t step, const uint64_t *want,
    const uint8_t *bytes, uint64_t *got)
{
	struct infeed_step	 st;
	const uint8_t		*x;
	uint64_t		 j;

	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "step %llu: %s",
	    (unsigned long long)step, infeed_error(f));
	ck_assert_uint_eq(st.epoch, 0);
	ck_assert_uint_eq(st.step, step);
	ck_assert_uint_eq(st.rows, HUGE_B);
	x = st.data;
	for (j = 0; j < HUGE_B; j++) {
		ck_assert_uint_lt(st.indices[j], HUGE_N);
		if (want != NULL)
			ck_assert_msg(st.indices[j] == want[j], "step %llu row "
			    "%llu is index %llu, the documented order says "
			    "%llu", (unsigned long long)step,
			    (unsigned long long)j,
			    (unsigned long long)st.indices[j],
			    (unsigned long long)want[j]);
		ck_assert_uint_eq(x[j], bytes != NULL ? bytes[j] : 0);
		ck_assert_int_eq(st.labels[j], 0);
		if (got != NULL)
			got[j] = st.indices[j];
	}
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
}

/* Wait until no worker is busy: a detached session's last job is done. */
static void
workers_idle(struct infeed *f)
{
	struct infeed_stats	*st;
	size_t			 i, busy;
	int			 tries;

	for (tries = 0; tries < 3000; tries++) {
		ck_assert_msg(infeed_get_stats(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		for (i = 0, busy = 0; i < st->nworkers; i++)
			busy += strcmp(st->workers[i]->state, "idle") != 0;
		infeed_stats_free(st);
		if (busy == 0)
			return;
		usleep(10000);
	}
	ck_abort_msg("the workers stayed busy for 30 s");
}

/*
 * A trainer's own raw file of 2^40 one-byte samples (sparse: it costs the
 * trainer nothing), shuffled: infeedd allocated the permutation's table of
 * N x 8 bytes at the first Next, failed and exited (fatalx), taking every
 * trainer's session with it.  Now the steps come, in the documented order,
 * each row the file's byte at the index the step names; the daemon's
 * memory stays small and a bystander is served throughout.
 */
START_TEST(huge_shuffled_file_served_without_a_table)
{
	struct bystander	 b;
	struct bystander_report	 r;
	struct sampler_opts	 so;
	struct sampler		 sm;
	struct infeed		*f;
	uint64_t		 got[2][HUGE_B], want[2][HUGE_B], step, j, t0;
	uint8_t			 bytes[HUGE_B];
	char			*cause = NULL;
	long			 peak;
	int			 fd;

	ck_assert_int_ne(fd = open(tpath("huge.bin"), O_RDWR | O_CREAT |
	    O_CLOEXEC, 0600), -1);
	ck_assert_msg(ftruncate(fd, (off_t)HUGE_N) == 0, "a sparse file of "
	    "2^40 bytes in %s: %s", dir, strerror(errno));
	bystander_start(&b);
	t0 = now_ms();

	/* All holes: two steps of zeros. */
	f = client();
	huge_attach(f, fd);
	for (step = 0; step < 2; step++)
		huge_step(f, step, NULL, NULL, got[step]);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	/* Its ring's next step may still be read: one worker for B below. */
	workers_idle(f);

	/* Those are the order docs/protocol.md gives for (seed 5, epoch 0). */
	memset(&so, 0, sizeof(so));
	so.samples = HUGE_N;
	so.batch_size = HUGE_B;
	so.device_iterations = so.replication_factor =
	    so.gradient_accumulation = 1;
	so.shuffle = true;
	so.seed = 5;
	so.drop_last = true;
	so.process_count = 1;
	ck_assert_msg(sampler_init(&sm, &so, &cause) == 0, "%s", cause);
	for (step = 0; step < 2; step++) {
		ck_assert_uint_eq(sampler_step_indices(&sm, 0, step,
		    want[step]), HUGE_B);
		ck_assert_mem_eq(got[step], want[step], sizeof(want[step]));
	}
	sampler_clear(&sm);

	/* A known byte at each of step 0's indices: a new session reads them. */
	for (j = 0; j < HUGE_B; j++) {
		bytes[j] = (uint8_t)(1 + j * 3);
		ck_assert_int_eq(pwrite(fd, &bytes[j], 1, (off_t)want[0][j]),
		    1);
	}
	huge_attach(f, fd);
	huge_step(f, 0, want[0], bytes, NULL);
	huge_step(f, 1, want[1], NULL, NULL);
	/* More steps, for half a second at least: the bystander's rounds. */
	for (step = 2; now_ms() - t0 < 500; step++)
		huge_step(f, step, NULL, NULL, NULL);
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	/* A table would have been 8 TiB; the daemon stays small. */
	peak = daemon_peak_kib();
	ck_assert_msg(peak > 0 && peak < 256 * 1024, "infeedd's peak RSS is "
	    "%ld KiB", peak);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	infeed_free(f);
	close(fd);
	unlink(tpath("huge.bin"));
}
END_TEST

/* A sparse file of @size bytes in /dev/shm (tmpfs takes tens of TiB). */
static int
shm_sparse(uint64_t size)
{
	char	path[] = "/dev/shm/infeed-test-XXXXXX";
	int	fd;

	ck_assert_msg((fd = mkstemp(path)) != -1, "mkstemp in /dev/shm: %s",
	    strerror(errno));
	unlink(path);			/* the descriptor is what is sent */
	ck_assert_msg(ftruncate(fd, (off_t)size) == 0, "a sparse file of "
	    "%llu bytes in /dev/shm: %s", (unsigned long long)size,
	    strerror(errno));
	return (fd);
}

/*
 * Attach @f to @fd, a raw file of one-byte samples read in order, and take
 * a step, so that the worker opens it; or -1 with the error in @why.
 */
static int
sparse_session(struct infeed *f, int fd, char *why, size_t len)
{
	struct infeed_files	fl;
	struct infeed_options	o;
	struct infeed_step	st;

	infeed_files_init(&fl);
	fl.data_fd = fd;
	fl.labels_fd = -1;
	fl.data_format = INFEED_FILE_RAW;
	fl.labels_format = INFEED_FILE_NONE;
	fl.dtype = INFEED_DTYPE_UINT8;
	fl.ndim = 1;
	fl.shape[0] = 1;
	infeed_options_init(&o);
	o.batch_size = 8;
	o.reconnect_timeout_ms = 0;
	if (infeed_attach_files(f, "sparse", &fl, &o, NULL) != INFEED_OK ||
	    infeed_next(f, &st) != INFEED_OK) {
		snprintf(why, len, "%s", infeed_error(f));
		return (-1);
	}
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	return (0);
}

#define SPARSE_MAX	200	/* sessions at most */

/*
 * Issue 39, item 4: one client's sessions over sparse files in /dev/shm,
 * of 2 TiB each, until it has asked for more than a worker's 128 TiB of
 * address space (and, each time a session fails, on with files half as
 * large, down to 4 KiB, as an attacker fills what is left): every one is
 * served (the workers map the first 4 TiB of the uid's files,
 * DATASET_FILES_MAP_UID_MAX, and read the rest with pread), and then
 * another client attaches to a catalogue dataset and to files of its own
 * and reads, with a bystander served throughout.  main mapped every file
 * whole: the sessions past the address space failed, and then so did
 * another client's ("a worker cannot map the step ring ... Cannot
 * allocate memory").
 */
START_TEST(sparse_files_cannot_take_the_workers_address_space)
{
	static struct infeed	*f[SPARSE_MAX];
	struct bystander	 b;
	struct bystander_report	 r;
	struct infeed		*g;
	struct infeed_step	 st;
	uint64_t		 size = (uint64_t)2 << 40, asked = 0, t0, ms;
	static char		 why[512], first[512], log[1 << 16];
	int			 fd, k, n, failed = 0, first_k = -1;

	/* One worker: every session's file is opened in the same one. */
	ck_assert_int_eq(infeedd_stop(), 0);
	infeedd_start("1");
	bystander_start(&b);
	for (n = 0; n < SPARSE_MAX && size >= 4096 &&
	    (failed > 0 || asked <= (uint64_t)128 << 40); n++) {
		fd = shm_sparse(size);
		f[n] = client();
		if (sparse_session(f[n], fd, why, sizeof(why)) == 0)
			asked += size;
		else {
			if (failed++ == 0) {
				first_k = n;
				snprintf(first, sizeof(first), "%s", why);
			}
			size /= 2;
		}
		close(fd);
	}

	/* Another client: a catalogue dataset, then files of its own. */
	g = client();
	t0 = now_ms();
	ck_assert_msg(infeed_attach(g, "raw", NULL, NULL) == INFEED_OK &&
	    infeed_next(g, &st) == INFEED_OK, "another client, after %d "
	    "sparse sessions (%d failed, the first, session %d: %s): %s",
	    n, failed, first_k, first, infeed_error(g));
	ck_assert_int_eq(infeed_release(g, &st), INFEED_OK);
	ck_assert_int_eq(infeed_detach(g), INFEED_OK);
	fd = shm_sparse(4096);
	ck_assert_msg(sparse_session(g, fd, why, sizeof(why)) == 0,
	    "another client's files: %s", why);
	ms = now_ms() - t0;
	close(fd);
	fprintf(stderr, "after %d sessions over sparse files (%llu GiB; %d "
	    "failed, the first %d: %s), another client's two Attach and "
	    "Next: %llu ms\n", n, (unsigned long long)(asked >> 30), failed,
	    first_k, failed ? first : "-", (unsigned long long)ms);
	ck_assert_msg(failed == 0, "%d of the sparse sessions failed, the "
	    "first, session %d: %s", failed, first_k, first);
	ck_assert_msg(ms < 250, "took %llu ms", (unsigned long long)ms);
	infeed_free(g);
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "with pread, not mapped") != NULL, "the "
	    "log does not say which files are read with pread");
	for (k = 0; k < n; k++)
		infeed_free(f[k]);
}
END_TEST

static Suite *
files_suite(void)
{
	Suite	*s = suite_create("files");
	TCase	*tc;

	tc = tcase_create("read");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, npy_pair_by_descriptor_every_index_once);
	tcase_add_test(tc, raw_pair_by_descriptor_every_index_once);
	tcase_add_test(tc, raw_without_labels_reads_label_zero);
	suite_add_tcase(s, tc);

	tc = tcase_create("refused");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, unreadable_and_irregular_descriptors_refused);
	tcase_add_test(tc, bad_content_refused_naming_the_problem);
	tcase_add_test(tc, descriptors_with_other_frames_closed_and_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("lifetime");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, descriptors_closed_in_daemon_and_workers_after_detach);
	tcase_add_test(tc, killed_worker_replaced_session_goes_on);
	tcase_add_test(tc,
	    file_truncated_under_session_is_error_data_no_worker_dies);
	tcase_add_test(tc, daemon_restart_resumes_with_the_same_files);
	suite_add_tcase(s, tc);

	tc = tcase_create("hostile");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, huge_shuffled_file_served_without_a_table);
	tcase_add_test(tc, sparse_files_cannot_take_the_workers_address_space);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(files_suite()));
}
