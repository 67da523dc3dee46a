/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/worker.c, the child side of the pool, driven over
 * a SOCK_SEQPACKET socketpair as the pool drives it, with the test as the
 * pool (a blocking transport, as the worker's own): READY first; MAP and
 * JOB fill a ring's slot with the dataset's rows and labels and answer
 * DONE; a JOB of a ring it was not sent, or of a length that does not
 * match its rows, is answered as an error and the worker goes on; a
 * message too short, a MAP without its descriptor and a message carrying
 * descriptors it should not are dropped with those descriptors closed; a
 * MAP with more descriptors than a MAP carries, or a record longer than
 * the largest message, ends the worker with a failure status (it never
 * keeps some of them); the pool's end closing ends the worker cleanly.
 */

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "catalogue.h"
#include "clock.h"
#include "config.h"
#include "dataset.h"
#include "ring.h"
#include "transform.h"
#include "transport.h"
#include "worker.h"
#include "runner.h"

#define ROWS		8
#define SLOTS		2
#define RING_ID		7

static char			 rundir[PATH_MAX];	/* the run's, made by the runner */
static char			 tmpdir[PATH_MAX];
static char			 conf_path[PATH_MAX];
static struct config		*conf;
static struct catalogue		*cat;
static const struct dataset	*ds;
static struct ring_budget	 budget;
static struct ring		*ring;
static struct transform		 tf;
static struct worker_beat	*beat;
static struct transport		*pool_end;	/* the test, as the pool */
static pid_t			 worker = -1;
static struct worker_msg_job	*jm;		/* a JOB and its indices */
static struct worker_msg_done	*done;		/* its DONE */

/* A configuration with one synthetic dataset, its catalogue and a ring. */
static void
setup(void)
{
	struct ring_owner	 owner = { getuid(), getgid(), 0, 0 };
	FILE			*f;
	char			*cause = NULL;
	size_t			 index;

	/* One directory a test, in the run's (run_suite_in_dir()). */
	make_test_dir(rundir, tmpdir, sizeof(tmpdir));
	ck_assert_int_lt(snprintf(conf_path, sizeof(conf_path),
	    "%s/infeedd.conf", tmpdir), (int)sizeof(conf_path));
	ck_assert_ptr_nonnull(f = fopen(conf_path, "w"));
	fputs("[infeedd]\nworkers = 1\nmemory_budget = 16M\n"
	    "[dataset u8]\ntype = synthetic\nsamples = 37\nshape = 3,2\n"
	    "dtype = uint8\nclasses = 5\nseed = 3\n", f);
	ck_assert_int_eq(fclose(f), 0);
	conf = config_load(conf_path, &cause);
	ck_assert_msg(conf != NULL, "config: %s", cause);
	cat = catalogue_open(conf, NULL, UINT64_MAX);
	ck_assert_ptr_nonnull(ds = catalogue_find(cat, "u8", &index));
	ck_assert_uint_eq(index, 0);
	ck_assert_int_eq(transform_init(&tf, NULL, ds, &cause), 0);
	ring_budget_init(&budget, conf->memory_budget, conf->path, 0);
	ring = ring_new(&budget, ROWS, tf.out_sample_bytes, INFEED_DTYPE_INT32,
	    SLOTS, &owner, &cause);
	ck_assert_msg(ring != NULL, "ring_new: %s", cause);
	beat = mmap(NULL, sizeof(*beat), PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_ANONYMOUS, -1, 0);
	ck_assert(beat != MAP_FAILED);
	ck_assert_ptr_nonnull(jm = calloc(1, sizeof(*jm) +
	    WORKER_MAX_JOB_ROWS * sizeof(uint64_t)));
	ck_assert_ptr_nonnull(done = calloc(1, WORKER_MAX_DONE));
}

/* Start the worker, as pool_spawn() does, and take its READY. */
static void
start_worker(void)
{
	struct transport_conf	 tc = { .kind = TRANSPORT_PACKET };
	struct worker_conf	 wc = { getpid(), getpid(), beat, 64 << 20 };
	struct worker_msg_ready	 m;
	sigset_t		 all, old;
	size_t			 nfds;
	int			 sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0,
	    sv), 0);
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	if ((worker = fork()) == 0) {
		close(sv[0]);
		worker_main(cat, sv[1], &old, &wc);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	ck_assert_int_gt(worker, 0);
	close(sv[1]);
	pool_end = transport_new(NULL, sv[0], &tc);
	ck_assert_int_eq(transport_recv_typed(pool_end, &m, sizeof(m), NULL, 0,
	    &nfds), (ssize_t)sizeof(m));
	ck_assert_uint_eq(m.hdr.type, WORKER_MSG_READY);
}

/* Remove a file of the scratch directory. */
static void
remove_in(const char *name)
{
	char	path[PATH_MAX];

	ck_assert_int_lt(snprintf(path, sizeof(path), "%s/%s", tmpdir, name),
	    (int)sizeof(path));
	(void)unlink(path);
}

static void
teardown(void)
{
	int	status;

	transport_free(pool_end);
	pool_end = NULL;
	if (worker > 0) {
		kill(worker, SIGKILL);
		(void)waitpid(worker, &status, 0);
	}
	worker = -1;
	ring_free(ring);
	ring_budget_clear(&budget);
	catalogue_free(cat);
	config_free(conf);
	munmap(beat, sizeof(*beat));
	free(jm);
	free(done);
	remove_in("infeedd.conf");
	rmdir(tmpdir);
}

/* Send the ring, its memfd with it. */
static void
send_map(void)
{
	struct worker_msg_map	m;

	memset(&m, 0, sizeof(m));
	m.ring.ring_id = RING_ID;
	m.ring.mem_id = ring->mem->id;
	m.ring.mem_bytes = ring->mem->bytes;
	m.ring.dataset_index = 0;
	/* The worker checks the catalogue's dataset is the pool's. */
	snprintf(m.ring.dataset, sizeof(m.ring.dataset), "%s", ds->name);
	m.ring.samples = ds->samples;
	m.ring.sample_bytes = ds->sample_bytes;
	m.ring.layout = ring->layout;
	m.ring.transform = tf;
	ck_assert_int_eq(transport_send_typed(pool_end, &m, sizeof(m),
	    WORKER_MSG_MAP, &ring->mem->memfd, 1), 0);
}

/* Send a JOB of rows [@begin, @end) of @slot of ring @ring_id. */
static void
send_job(uint64_t ring_id, uint32_t slot, uint64_t begin, uint64_t end)
{
	uint64_t	r;

	memset(jm, 0, sizeof(*jm));
	jm->ring_id = ring_id;
	jm->slot = slot;
	jm->row_begin = begin;
	jm->row_end = end;
	jm->job_id = begin + 1;
	for (r = begin; r < end; r++)
		jm->indices[r - begin] = (r * 11 + slot * 5 + 2) % ds->samples;
	ck_assert_int_eq(transport_send_typed(pool_end, jm, sizeof(*jm) +
	    (end - begin) * sizeof(uint64_t), WORKER_MSG_JOB, NULL, 0), 0);
}

/*
 * The worker's answer into done: a DONE, no longer than its reason and
 * where; its where.
 */
static const char *
recv_done(void)
{
	const char	*where;
	ssize_t		 n;
	size_t		 nfds;

	n = transport_recv_typed(pool_end, done, WORKER_MAX_DONE, NULL, 0,
	    &nfds);
	ck_assert_uint_eq(done->hdr.type, WORKER_MSG_DONE);
	ck_assert(worker_done_whole(done, (size_t)n));
	where = worker_done_where(done);
	ck_assert_int_eq(n, (ssize_t)(where + strlen(where) + 1 -
	    (const char *)done));
	return (where);
}

/* Rows [@begin, @end) of @slot hold what the dataset gives. */
static void
check_rows(uint32_t slot, uint64_t begin, uint64_t end)
{
	const struct ring_layout *l = &ring->layout;
	const uint8_t		*base = ring->mem->map +
				    (uint64_t)slot * l->slot_bytes;
	const int32_t		*labels = (const int32_t *)(const void *)
				    (base + l->labels_offset);
	const uint64_t		*indices = (const uint64_t *)(const void *)
				    (base + l->indices_offset);
	uint8_t			 want[64];
	int64_t			 label;
	uint64_t		 r;

	ck_assert_uint_le(ds->sample_bytes, sizeof(want));
	for (r = begin; r < end; r++) {
		ck_assert_uint_eq(indices[r], (r * 11 + slot * 5 + 2) %
		    ds->samples);
		ck_assert_int_eq(dataset_read(ds, indices[r], want, &label, false),
		    0);
		ck_assert_int_eq(memcmp(base + l->data_offset +
		    r * tf.out_sample_bytes, want, ds->sample_bytes), 0);
		ck_assert_int_eq(labels[r], label);
	}
}

/* MAP then JOBs: each answered DONE, the rows written, the memfd closed. */
START_TEST(test_jobs_fill_rows_and_answer_done)
{
	int	fds;

	start_worker();
	fds = count_fds(worker, NULL);
	send_map();
	send_job(RING_ID, 0, 0, ROWS);
	ck_assert_str_eq(recv_done(), "");
	ck_assert_int_eq(done->error, WORKER_OK);
	ck_assert_uint_eq(done->job_id, 1);
	ck_assert_str_eq(done->text, "");
	ck_assert_uint_eq(done->bytes, ROWS * ds->sample_bytes);
	check_rows(0, 0, ROWS);
	send_job(RING_ID, 1, 2, 5);
	recv_done();
	ck_assert_int_eq(done->error, WORKER_OK);
	check_rows(1, 2, 5);
	/* The ring's memfd was mapped and closed: none is kept. */
	ck_assert_int_eq(count_fds(worker, NULL), fds);
	ck_assert_uint_ge(beat->rows, ROWS + 3);
}
END_TEST

/*
 * A JOB of a ring it was not sent, or unmapped, or one whose length is
 * not its rows' is answered with an error, and the worker goes on.
 */
START_TEST(test_bad_jobs_answered_as_errors)
{
	struct worker_msg_unmap	um;

	start_worker();
	send_job(RING_ID + 1, 0, 0, 2);
	recv_done();
	ck_assert_int_eq(done->error, WORKER_READ_ERROR);
	ck_assert_uint_eq(done->bad_index, (0 * 11 + 2) % ds->samples);
	send_map();
	/* A slot the ring does not have. */
	send_job(RING_ID, SLOTS, 0, 1);
	recv_done();
	ck_assert_int_eq(done->error, WORKER_READ_ERROR);
	/* Four indices' bytes for rows [0, 2). */
	memset(jm, 0, sizeof(*jm));
	jm->ring_id = RING_ID;
	jm->row_end = 2;
	ck_assert_int_eq(transport_send_typed(pool_end, jm, sizeof(*jm) +
	    4 * sizeof(uint64_t), WORKER_MSG_JOB, NULL, 0), 0);
	recv_done();
	ck_assert_int_eq(done->error, WORKER_READ_ERROR);
	send_job(RING_ID, 0, 0, ROWS);
	recv_done();
	ck_assert_int_eq(done->error, WORKER_OK);
	check_rows(0, 0, ROWS);
	/* Unmapped, its jobs fail. */
	memset(&um, 0, sizeof(um));
	um.ring_id = RING_ID;
	ck_assert_int_eq(transport_send_typed(pool_end, &um, sizeof(um),
	    WORKER_MSG_UNMAP, NULL, 0), 0);
	send_job(RING_ID, 0, 0, 1);
	recv_done();
	ck_assert_int_eq(done->error, WORKER_READ_ERROR);
}
END_TEST

/*
 * Messages the pool never sends are dropped, and any descriptor that came
 * with them closed: a short one, a MAP without its memfd, a FORGET and a
 * JOB carrying one.  The worker then serves a JOB as before.
 */
START_TEST(test_malformed_messages_dropped_with_their_fds)
{
	struct worker_msg_map		m;
	struct worker_msg_forget	fm;
	struct transport_hdr		h;
	int				fds, devnull;

	ck_assert_int_ge(devnull = open("/dev/null", O_RDONLY | O_CLOEXEC),
	    0);
	start_worker();
	fds = count_fds(worker, NULL);
	ck_assert_int_eq(transport_send_consume(pool_end, "short", 5, NULL,
	    0), 0);
	/* A header whose length is not its record's, a descriptor with it. */
	memset(&h, 0, sizeof(h));
	h.type = WORKER_MSG_UNMAP;
	h.len = sizeof(struct worker_msg_unmap);
	ck_assert_int_eq(transport_send_dup(pool_end, &h, sizeof(h),
	    &devnull, 1), 0);
	memset(&m, 0, sizeof(m));
	ck_assert_int_eq(transport_send_typed(pool_end, &m, sizeof(m),
	    WORKER_MSG_MAP, NULL, 0), 0);
	memset(&fm, 0, sizeof(fm));
	ck_assert_int_eq(transport_send_typed(pool_end, &fm, sizeof(fm),
	    WORKER_MSG_FORGET, &devnull, 1), 0);
	/* A FORGET as long as a MAP. */
	ck_assert_int_eq(transport_send_typed(pool_end, &m, sizeof(m),
	    WORKER_MSG_FORGET, NULL, 0), 0);
	memset(jm, 0, sizeof(*jm));
	jm->ring_id = RING_ID;
	jm->row_end = 1;
	ck_assert_int_eq(transport_send_typed(pool_end, jm, sizeof(*jm) +
	    sizeof(uint64_t), WORKER_MSG_JOB, &devnull, 1), 0);
	send_map();
	send_job(RING_ID, 0, 0, 3);
	recv_done();
	ck_assert_int_eq(done->error, WORKER_OK);
	ck_assert_uint_eq(done->job_id, 1);
	check_rows(0, 0, 3);
	ck_assert_int_eq(count_fds(worker, NULL), fds);
	close(devnull);
}
END_TEST

/*
 * A DONE is whole only as the worker makes it: a reason and a where, each
 * NUL-terminated within its bound, and nothing after.
 */
START_TEST(test_done_whole_only_with_its_two_strings)
{
	struct worker_msg_done	*d = done;
	size_t			 base = sizeof(*d);

	memset(d, 0, WORKER_MAX_DONE);
	memcpy(d->text, "bad\0f.jpg", 10);
	ck_assert(worker_done_whole(d, base + 10));
	ck_assert_str_eq(worker_done_where(d), "f.jpg");
	memcpy(d->text, "\0", 2);
	ck_assert(worker_done_whole(d, base + 2));	/* both "" */
	ck_assert(!worker_done_whole(d, base));		/* no strings */
	ck_assert(!worker_done_whole(d, base + 1));	/* no where */
	memcpy(d->text, "bad\0f.jpg\0x", 12);
	ck_assert(!worker_done_whole(d, base + 12));	/* bytes after */
	memcpy(d->text, "bad\0\0\0", 6);
	ck_assert(!worker_done_whole(d, base + 6));	/* a third string */
	/* A reason as long as its bound, its NUL past it. */
	memset(d->text, 'r', WORKER_REASON_LEN);
	d->text[WORKER_REASON_LEN] = '\0';
	d->text[WORKER_REASON_LEN + 1] = '\0';
	ck_assert(!worker_done_whole(d, base + WORKER_REASON_LEN + 2));
	ck_assert(!worker_done_whole(d, WORKER_MAX_DONE + 1));
}
END_TEST

/* How the worker ended, within 5 s. */
static int
worker_status(void)
{
	int	status = 0, i;
	pid_t	pid = 0;

	for (i = 0; i < 500 && (pid = waitpid(worker, &status, WNOHANG)) == 0;
	    i++)
		usleep(10000);
	ck_assert_int_eq(pid, worker);
	worker = -1;
	return (status);
}

/*
 * A MAP with more descriptors than a MAP carries: the worker kept three
 * and leaked the fourth before; now it refuses the message, closing them
 * all, and ends with a status (the pool then blames no sample but says
 * why in the log).
 */
START_TEST(test_map_with_too_many_fds_ends_the_worker)
{
	struct worker_msg_map	m;
	int			fds[4], status, i;

	start_worker();
	memset(&m, 0, sizeof(m));
	m.ring.ring_id = RING_ID;
	for (i = 0; i < 4; i++)
		fds[i] = ring->mem->memfd;
	ck_assert_int_eq(transport_send_typed(pool_end, &m, sizeof(m),
	    WORKER_MSG_MAP, fds, 4), 0);
	status = worker_status();
	ck_assert(WIFEXITED(status));
	ck_assert_int_ne(WEXITSTATUS(status), 0);
}
END_TEST

/* A record longer than the longest JOB is cut: the worker ends. */
START_TEST(test_cut_record_ends_the_worker)
{
	size_t	len = sizeof(*jm) + (WORKER_MAX_JOB_ROWS +
		    WORKER_MAX_JOB_AHEAD + 1) * sizeof(uint64_t);
	void	*big;
	int	 status;

	start_worker();
	ck_assert_ptr_nonnull(big = calloc(1, len));
	ck_assert_int_eq(transport_send_typed(pool_end, big, len,
	    WORKER_MSG_JOB, NULL, 0), 0);
	free(big);
	status = worker_status();
	ck_assert(WIFEXITED(status));
	ck_assert_int_ne(WEXITSTATUS(status), 0);
}
END_TEST

/* The pool's end closing ends the worker, with status 0. */
START_TEST(test_pool_gone_ends_the_worker)
{
	int	status;

	start_worker();
	transport_free(pool_end);
	pool_end = NULL;
	status = worker_status();
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

/*
 * worker_resident() on a file whose pages are all cached: after a long
 * run of rows in memory it stops asking the kernel for most of them
 * (issue 35: a mincore() a row was 15 % of the workers' time), and once
 * a sampled row is out of memory it asks for every row again.
 */
START_TEST(test_resident_rows_sampled)
{
	enum { ROW = 65536, NROWS = 64, CALLS = 4096 };
	char		 path[PATH_MAX];
	uint8_t		*buf, *map;
	uint64_t	 asked;
	unsigned	 i, out = 0;
	int		 fd;

	ck_assert_int_lt(snprintf(path, sizeof(path), "%s/rows", tmpdir),
	    (int)sizeof(path));
	ck_assert_int_ge(fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600), 0);
	ck_assert_ptr_nonnull(buf = malloc(ROW));
	memset(buf, 7, ROW);
	for (i = 0; i < NROWS; i++)
		ck_assert_int_eq(write(fd, buf, ROW), ROW);
	free(buf);
	map = mmap(NULL, (size_t)ROW * NROWS, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert(map != MAP_FAILED);
	asked = worker_resident_asked;
	for (i = 0; i < CALLS; i++)
		ck_assert(worker_resident(map, map + (size_t)(i % NROWS) * ROW,
		    ROW));
	asked = worker_resident_asked - asked;
	fprintf(stderr, "test_resident_rows_sampled: %llu of %u calls asked "
	    "the kernel\n", (unsigned long long)asked, CALLS);
	ck_assert_uint_lt(asked, CALLS / 2);
	/*
	 * Once trusted (1024 rows, worker.c), one row in 64 is asked: a
	 * mincore() a sample was 2.9 % of a worker's time at one in 16.
	 */
	ck_assert_uint_le(asked, 1024 + (CALLS - 1024) / 64 + 1);
	/* Another dataset's rows: its own run, every row asked at first. */
	asked = worker_resident_asked;
	for (i = 0; i < 16; i++)
		ck_assert(worker_resident(path, map + ROW, ROW));
	ck_assert_uint_eq(worker_resident_asked - asked, 16);
	/* Out of memory (where the file system lets its pages go). */
	(void)fdatasync(fd);
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	/* Twice worker.c's sample (one in 64 asked, once trusted). */
	for (i = 0; i < 2 * 64 && out == 0; i++)
		out += !worker_resident(map, map, ROW);
	if (out == 0)
		fprintf(stderr, "test_resident_rows_sampled: the file's pages "
		    "stayed cached here: not checked out of memory\n");
	else {
		asked = worker_resident_asked;
		for (i = 0; i < 16; i++)
			ck_assert(!worker_resident(map, map + ROW, ROW));
		ck_assert_uint_eq(worker_resident_asked - asked, 16);
	}
	munmap(map, (size_t)ROW * NROWS);
	close(fd);
	remove_in("rows");
}
END_TEST

/*
 * worker_copy_timed(), the switch to reads in flight, fed the real time a
 * big cached row takes to copy: it never switches however often (a fixed
 * 300 us did, for any cached row over about 1.5 MB), while three rows of
 * 128 KiB in a row that waited a few ms each for a slow store's pages
 * still switch it.
 */
START_TEST(test_big_cached_rows_stay_copied)
{
	enum { BIG = 8 << 20, SMALL = 128 << 10, WAIT_US = 5000 };
	uint8_t		*src, *dst;
	uint64_t	 t0, us, most = 0;
	unsigned	 i;

	ck_assert_ptr_nonnull(src = malloc(BIG));
	ck_assert_ptr_nonnull(dst = malloc(BIG));
	memset(src, 3, BIG);
	memset(dst, 0, BIG);
	for (i = 0; i < 6; i++) {
		t0 = clock_now_us();
		memcpy(dst, src, BIG);
		us = clock_now_us() - t0;
		most = us > most ? us : most;
		ck_assert_msg(!worker_copy_timed(BIG, us), "a cached row of "
		    "%u bytes, copied in %llu us, switched to reads in flight",
		    BIG, (unsigned long long)us);
	}
	fprintf(stderr, "test_big_cached_rows_stay_copied: %u MiB cached "
	    "row copied in %llu us at most\n", BIG >> 20,
	    (unsigned long long)most);
	free(src);
	free(dst);
	ck_assert(!worker_copy_timed(SMALL, WAIT_US));
	ck_assert(!worker_copy_timed(SMALL, WAIT_US));
	ck_assert(worker_copy_timed(SMALL, WAIT_US));
}
END_TEST

static Suite *
worker_suite(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("worker");

	tc = tcase_create("messages");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_jobs_fill_rows_and_answer_done);
	tcase_add_test(tc, test_bad_jobs_answered_as_errors);
	tcase_add_test(tc, test_malformed_messages_dropped_with_their_fds);
	tcase_add_test(tc, test_done_whole_only_with_its_two_strings);
	suite_add_tcase(s, tc);

	tc = tcase_create("refusals");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_map_with_too_many_fds_ends_the_worker);
	tcase_add_test(tc, test_cut_record_ends_the_worker);
	tcase_add_test(tc, test_pool_gone_ends_the_worker);
	tcase_add_test(tc, test_resident_rows_sampled);
	tcase_add_test(tc, test_big_cached_rows_stay_copied);
	suite_add_tcase(s, tc);

	return (s);
}

int
main(void)
{
	return (run_suite_in_dir(worker_suite(), "test-worker", rundir,
	    sizeof(rundir)));
}
