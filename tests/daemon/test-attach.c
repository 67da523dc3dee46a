/* SPDX-License-Identifier: MIT */
/*
 * An Attach never holds the other clients (issue 24, items 2 and 10),
 * against the real infeedd, with a bystander (tests/harness.h) timing its
 * round trips throughout: a client's 2 GiB labels file is not scanned at
 * Attach, and a bad label late in it fails the step that reads it, naming
 * the sample; a client file that never answers (a FUSE file whose reads
 * block, served by this test) gets its client an error after
 * INFEED_ATTACH_CHECK_S while everyone else is served, a client that hangs
 * up meanwhile leaves nothing behind, more Attach requests than
 * INFEED_MAX_ATTACH_CHECKS + INFEED_MAX_ATTACH_QUEUE are refused at once,
 * and SIGTERM still stops the daemon with a check stuck; Attach requests
 * back to back while the workers still run removed rings' jobs do not
 * block the loop (they wait on it: pool_settling()); a user in 300
 * groups, the allowed one last, gets in, and a group database that does
 * not answer holds only the Attach that asked it.  The FUSE and group database tests need root (a
 * mount namespace of their own); without it they say so and pass.
 */

#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fuse-file.h"
#include "harness.h"
#include "infeed-limits.h"

#define N	103	/* samples of the small npy file */

/* A version 1.0 .npy image with header dict @dict, into *@len bytes. */
static uint8_t *
npy_bytes(const char *dict, const void *data, size_t len, size_t *total)
{
	uint8_t	*buf;
	size_t	 hlen = strlen(dict) + 1, pad;

	pad = (64 - (10 + hlen) % 64) % 64;
	hlen += pad;
	*total = 10 + hlen + len;
	ck_assert_ptr_nonnull(buf = malloc(*total));
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (uint8_t)(hlen & 0xff);
	buf[9] = (uint8_t)(hlen >> 8);
	memcpy(buf + 10, dict, strlen(dict));
	memset(buf + 10 + strlen(dict), ' ', pad);
	buf[10 + hlen - 1] = '\n';
	memcpy(buf + 10 + hlen, data, len);
	return (buf);
}

/* The small npy data file: N samples of 2x3 float32. */
static uint8_t *
small_npy(size_t *total)
{
	float	x[N * 6];
	size_t	i;

	for (i = 0; i < N * 6; i++)
		x[i] = (float)i;
	return (npy_bytes("{'descr': '<f4', 'fortran_order': False, "
	    "'shape': (103, 2, 3), }", x, sizeof(x), total));
}

/* Make @path a sparse file of @size bytes. */
static void
sparse_file(const char *path, uint64_t size)
{
	int	fd;

	ck_assert_int_ne(fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644),
	    -1);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

/* Raw uint8 data of shape (4,) with raw int64 labels, for libinfeed. */
static void
raw_files(struct infeed_files *fl, int dfd, int lfd)
{
	infeed_files_init(fl);
	fl->data_fd = dfd;
	fl->labels_fd = lfd;
	fl->data_format = INFEED_FILE_RAW;
	fl->labels_format = INFEED_FILE_RAW;
	fl->ndim = 1;
	fl->shape[0] = 4;
	fl->dtype = INFEED_DTYPE_UINT8;
	fl->label_dtype = INFEED_DTYPE_INT64;
}

/*
 * A 2 GiB labels file (2^28 int64 labels, sparse: all 0) and 1 GiB of
 * data: the Attach answers at once and the bystander never waits (main
 * scanned every label on the event loop, 7.8 s for a client's Attach).
 */
START_TEST(huge_labels_file_attach_holds_no_one)
{
	struct bystander	 b;
	struct bystander_report	 r;
	struct infeed		*f;
	struct infeed_files	 fl;
	struct infeed_options	 o;
	struct infeed_step	 st;
	uint64_t		 n = (uint64_t)1 << 28, t0, ms;
	int			 dfd, lfd;

	sparse_file(tpath("big.bin"), n * 4);
	sparse_file(tpath("big-labels.bin"), n * 8);
	ck_assert_int_ne(dfd = open(tpath("big.bin"), O_RDONLY), -1);
	ck_assert_int_ne(lfd = open(tpath("big-labels.bin"), O_RDONLY), -1);
	bystander_start(&b);
	f = client();
	raw_files(&fl, dfd, lfd);
	infeed_options_init(&o);
	o.batch_size = 8;
	t0 = now_ms();
	ck_assert_msg(infeed_attach_files(f, "big", &fl, &o, NULL) ==
	    INFEED_OK, "%s", infeed_error(f));
	ms = now_ms() - t0;
	fprintf(stderr, "attach of 2^28 labels: %llu ms\n",
	    (unsigned long long)ms);
	ck_assert_msg(ms < 1000, "the Attach took %llu ms",
	    (unsigned long long)ms);
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_uint_eq(st.rows, 8);
	ck_assert_int_eq(st.labels[0], 0);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	usleep(300000);			/* the bystander's rounds */
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	infeed_free(f);
	close(dfd);
	close(lfd);
}
END_TEST

/*
 * Label -3 at sample 937 of 1000: the session reads every step before it,
 * then the step holding it fails with ERROR_DATA naming the sample and
 * the label (main refused the whole Attach after scanning every label).
 */
START_TEST(bad_label_fails_the_step_that_reads_it)
{
	struct infeed		*f;
	struct infeed_files	 fl;
	struct infeed_options	 o;
	struct infeed_step	 st;
	static uint8_t		 x[1000 * 4];
	static int64_t		 y[1000];
	unsigned		 s;
	int			 dfd, lfd;

	for (s = 0; s < 1000; s++)
		y[s] = s % 10;
	y[937] = -3;
	write_file(tpath("x.bin"), x, sizeof(x));
	write_file(tpath("y.bin"), y, sizeof(y));
	ck_assert_int_ne(dfd = open(tpath("x.bin"), O_RDONLY), -1);
	ck_assert_int_ne(lfd = open(tpath("y.bin"), O_RDONLY), -1);
	f = client();
	raw_files(&fl, dfd, lfd);
	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_msg(infeed_attach_files(f, "late-bad", &fl, &o, NULL) ==
	    INFEED_OK, "%s", infeed_error(f));
	for (s = 0; s < 93; s++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "step %u: %s",
		    s, infeed_error(f));
		ck_assert_int_eq(st.labels[3], (s * 10 + 3) % 10);
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_int_eq(infeed_next(f, &st), INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(f), 8);
	ck_assert_msg(strstr(infeed_error(f), "the label of sample 937") !=
	    NULL && strstr(infeed_error(f), "is -3, which is no class "
	    "number") != NULL, "%s", infeed_error(f));
	infeed_free(f);
	close(dfd);
	close(lfd);
}
END_TEST

/* The npy data file on FUSE, as Files for libinfeed. */
static void
npy_files(struct infeed_files *fl, int fd)
{
	infeed_files_init(fl);
	fl->data_fd = fd;
	fl->data_format = INFEED_FILE_NPY;
	fl->labels_format = INFEED_FILE_NONE;
}

/*
 * The data file never answers a read: the bystander is served all along,
 * the client gets ERROR_DATA naming the file after INFEED_ATTACH_CHECK_S,
 * and SIGTERM stops the daemon at once though its thread is still stuck
 * (main blocked its event loop in pread for ever).
 */
START_TEST(blocking_file_times_out_others_served)
{
	struct fusefs		 fs;
	struct bystander	 b;
	struct bystander_report	 r;
	struct infeed		*f;
	struct infeed_files	 fl;
	uint8_t			*data;
	size_t			 dlen;
	static char		 log[65536];
	uint64_t		 t0, ms;
	int			 fd, status;

	data = small_npy(&dlen);
	if (!fuse_start(&fs, dir, data, dlen)) {
		free(data);
		return;
	}
	ck_assert_int_ne(fd = open(fs.path, O_RDONLY), -1);
	bystander_start(&b);
	f = client();
	npy_files(&fl, fd);
	t0 = now_ms();
	ck_assert_int_eq(infeed_attach_files(f, "stuck", &fl, NULL, NULL),
	    INFEED_ERR_DAEMON);
	ms = now_ms() - t0;
	ck_assert_int_eq(infeed_daemon_code(f), 8);
	ck_assert_msg(strstr(infeed_error(f), "the data file did not answer "
	    "in 10 s") != NULL, "%s", infeed_error(f));
	ck_assert_msg(ms >= INFEED_ATTACH_CHECK_S * 1000 - 500 &&
	    ms < INFEED_ATTACH_CHECK_S * 1000 + 3000, "answered after %llu "
	    "ms", (unsigned long long)ms);
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	/* The connection goes on. */
	ck_assert_int_eq(infeed_attach(f, "raw", NULL, NULL), INFEED_OK);
	infeed_free(f);
	/*
	 * The thread is still in its read: SIGTERM stops the daemon anyway,
	 * at once.  The kernel ends the process only once the FUSE request
	 * is answered or aborted (a read a FUSE server took cannot be
	 * interrupted), which the server's end does here.
	 */
	kill(infeedd_pid, SIGTERM);
	for (t0 = now_ms(); now_ms() - t0 < 5000; usleep(10000)) {
		read_log(log, sizeof(log));
		if (strstr(log, "info: stopped") != NULL)
			break;
	}
	ck_assert_msg(strstr(log, "info: stopped") != NULL, "infeedd did not "
	    "stop in 5 s");
	close(fd);
	fuse_stop(&fs);
	ck_assert_int_eq(waitpid(infeedd_pid, &status, 0), infeedd_pid);
	infeedd_pid = -1;
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "infeedd exited with status %d", status);
	free(data);
}
END_TEST

/* A raw connection, said hello, that sends Attach with files fd @fd. */
static int
raw_attach_fd(struct wire_in *in, int fd)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT;
	Infeed__Attach	 a = INFEED__ATTACH__INIT;
	Infeed__Files	 files = INFEED__FILES__INIT;
	uint8_t		*buf;
	size_t		 len;
	int		 sock = raw_connect();

	wire_in_init(in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(sock, in, WIRE_PROTOCOL_VERSION);
	files.has_data_format = 1;
	files.data_format = INFEED__FILE_FORMAT__FILE_FORMAT_NPY;
	a.dataset = (char *)"on-fuse";
	a.files = &files;
	fr.msg_case = INFEED__FRAME__MSG_ATTACH;
	fr.attach = &a;
	ck_assert_ptr_nonnull(buf = wire_pack(&fr, INFEED_DEFAULT_MAX_FRAME,
	    &len));
	ck_assert_int_eq(wire_send_all(sock, buf, len, fd), 0);
	free(buf);
	return (sock);
}

/*
 * A client hangs up while its check is stuck: the daemon drops it, and
 * when the read returns at last the thread's result is thrown away and
 * every descriptor of the client closed.
 */
START_TEST(hang_up_while_checked_leaves_nothing)
{
	struct fusefs		 fs;
	struct bystander	 b;
	struct bystander_report	 r;
	struct wire_in		 in;
	Infeed__Frame		*st;
	uint8_t			*data;
	size_t			 dlen;
	int			 fd, sock, before, after, tries;

	data = small_npy(&dlen);
	if (!fuse_start(&fs, dir, data, dlen)) {
		free(data);
		return;
	}
	ck_assert_int_ne(fd = open(fs.path, O_RDONLY), -1);
	bystander_start(&b);
	before = count_fds(infeedd_pid, RING_MEMFD);
	sock = raw_attach_fd(&in, fd);
	usleep(300000);			/* its thread is in the read now */
	close(sock);
	wire_in_clear(&in);
	usleep(300000);
	/* The daemon serves on; the client is gone from its stats. */
	st = raw_stats();
	ck_assert_uint_eq(st->stats->clients, 2);	/* bystander, us */
	infeed__frame__free_unpacked(st, NULL);
	fuse_release(&fs);
	for (tries = 0; tries < 300; tries++) {
		if ((after = count_fds(infeedd_pid, RING_MEMFD)) == before)
			break;
		usleep(10000);
	}
	ck_assert_msg(after == before, "%d descriptors in the daemon, %d "
	    "before the attach", after, before);
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	close(fd);
	fuse_stop(&fs);
	free(data);
}
END_TEST

#define STUCK_UID	4243	/* the user whose checks never return */
/*
 * Another user's Attach is answered, not held behind the stuck checks
 * (which hold until the FUSE server stops, after the test): 2 ms in
 * every quiet run; the bound leaves a loaded 2-core machine's ASan build
 * its stalls (a group lookup's thread read 1.1 s in one CI run).
 */
#define ANSWERED_MS	2000

/*
 * The stuck user's side, in a child of uid STUCK_UID: two rounds of 4
 * Attach requests of the FUSE file @fd, each hung up once its check is in
 * the read, then a ninth, which must be refused at once naming that uid.
 * Exit 0, or a number saying what went wrong.
 */
static void
stuck_user(int fd)
{
	struct wire_in	 in[9];
	Infeed__Frame	*fr;
	int		 sock[9], round, i, ok;

	if (setgroups(0, NULL) == -1 || setgid(STUCK_UID) == -1 ||
	    setuid(STUCK_UID) == -1)
		_exit(10);
	for (round = 0; round < 2; round++) {
		for (i = round * 4; i < round * 4 + 4; i++)
			sock[i] = raw_attach_fd(&in[i], fd);
		usleep(300000);		/* their threads are in the read */
		for (i = round * 4; i < round * 4 + 4; i++) {
			close(sock[i]);
			wire_in_clear(&in[i]);
		}
	}
	usleep(200000);			/* the daemon saw the hang-ups */
	sock[8] = raw_attach_fd(&in[8], fd);
	if ((fr = raw_recv(sock[8], &in[8])) == NULL)
		_exit(11);
	ok = fr->msg_case == INFEED__FRAME__MSG_ERROR && fr->error->code ==
	    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED &&
	    strstr(fr->error->message, "of uid 4243 were given up") != NULL;
	if (!ok)
		fprintf(stderr, "the stuck user's ninth Attach: %s: %s\n",
		    wire_case_name(fr->msg_case), fr->msg_case ==
		    INFEED__FRAME__MSG_ERROR ? fr->error->message : "");
	infeed__frame__free_unpacked(fr, NULL);
	close(sock[8]);
	wire_in_clear(&in[8]);
	_exit(ok ? 0 : 12);
}

/*
 * Issue 39, item 6: one user's checks stuck on a FUSE file that never
 * answers (two rounds of 4 hung-up Attach requests) hold only that user:
 * its next Attach with files is refused naming its uid, while another
 * user attaches with files and reads, and an Attach that needs a group
 * lookup is answered, each at once (main refused every Attach
 * that needed a check, anyone's, with attach-busy until the FUSE server
 * died).
 */
START_TEST(stuck_checks_hold_only_their_user)
{
	struct fusefs		 fs;
	struct bystander	 b;
	struct bystander_report	 r;
	struct infeed		*f;
	struct infeed_files	 fl;
	struct infeed_step	 st;
	uint8_t			*data, *npy;
	size_t			 dlen, nlen;
	uint64_t		 t0, ms;
	pid_t			 pid;
	int			 fd, xfd, status, s;

	data = small_npy(&dlen);
	if (!fuse_start(&fs, dir, data, dlen)) {
		free(data);
		return;
	}
	/* "private" needs a group lookup for root, which is not in it. */
	ck_assert_int_eq(infeedd_stop(), 0);
	make_config("[dataset private]\ntype = synthetic\nsamples = 100\n"
	    "shape = 4\nallow_groups = daemon\n");
	infeedd_start(NULL);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(chmod(sock_path, 0666), 0);
	npy = small_npy(&nlen);
	write_file(tpath("x.npy"), npy, nlen);
	free(npy);
	ck_assert_int_ne(fd = open(fs.path, O_RDONLY), -1);
	bystander_start(&b);

	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0)
		stuck_user(fd);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);

	/* Another user (root) attaches with files and reads, at once. */
	ck_assert_int_ne(xfd = open(tpath("x.npy"), O_RDONLY), -1);
	f = client();
	npy_files(&fl, xfd);
	t0 = now_ms();
	ck_assert_msg(infeed_attach_files(f, "mine", &fl, NULL, NULL) ==
	    INFEED_OK, "another user's Attach with files: %s",
	    infeed_error(f));
	for (s = 0; s < 3; s++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ms = now_ms() - t0;
	fprintf(stderr, "with 8 stuck checks of uid %d: another user's "
	    "Attach with files and 3 steps in %llu ms\n", STUCK_UID,
	    (unsigned long long)ms);
	ck_assert_msg(ms < ANSWERED_MS, "took %llu ms", (unsigned long long)ms);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);

	/* ... and one that needs a group lookup is answered, not busy. */
	t0 = now_ms();
	ck_assert_int_eq(infeed_attach(f, "private", NULL, NULL),
	    INFEED_ERR_DAEMON);
	ms = now_ms() - t0;
	ck_assert_msg(infeed_daemon_code(f) == 7, "not permission denied "
	    "but %s", infeed_error(f));
	fprintf(stderr, "a group lookup's Attach: %llu ms (%s)\n",
	    (unsigned long long)ms, infeed_error(f));
	ck_assert_msg(ms < ANSWERED_MS, "took %llu ms", (unsigned long long)ms);
	infeed_free(f);
	close(xfd);
	/* Its own ninth Attach was refused at once, naming its uid. */
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the stuck user's side failed (status %d)", status);
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	close(fd);
	fuse_stop(&fs);
	free(data);
}
END_TEST

#define CAP	(INFEED_MAX_ATTACH_CHECKS + INFEED_MAX_ATTACH_QUEUE)

/*
 * More Attach requests with files than may be checked and wait at once:
 * those over the cap are refused at once with RESOURCE_EXHAUSTED saying
 * why; the others are answered once the file answers.
 */
START_TEST(attaches_beyond_the_cap_refused_at_once)
{
	struct fusefs		 fs;
	struct bystander	 b;
	struct bystander_report	 r;
	static struct wire_in	 in[CAP + 3];
	Infeed__Frame		*fr;
	struct pollfd		 pfd;
	uint8_t			*data;
	size_t			 dlen;
	uint64_t		 until;
	int			 fd[CAP + 3], sock[CAP + 3], i, refused = 0;
	int			 attached = 0;

	data = small_npy(&dlen);
	if (!fuse_start(&fs, dir, data, dlen)) {
		free(data);
		return;
	}
	bystander_start(&b);
	for (i = 0; i < CAP + 3; i++) {
		ck_assert_int_ne(fd[i] = open(fs.path, O_RDONLY), -1);
		sock[i] = raw_attach_fd(&in[i], fd[i]);
	}
	/* Three are refused, within two seconds, saying why. */
	until = now_ms() + 2000;
	for (i = 0; refused < 3 && now_ms() < until; i = (i + 1) % (CAP + 3)) {
		if (sock[i] == -1)
			continue;
		pfd.fd = sock[i];
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 0) != 1) {
			if (i == CAP + 2)
				usleep(10000);
			continue;
		}
		ck_assert_ptr_nonnull(fr = raw_recv(sock[i], &in[i]));
		ck_assert_int_eq(fr->msg_case, INFEED__FRAME__MSG_ERROR);
		ck_assert_int_eq(fr->error->code,
		    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED);
		ck_assert_msg(strstr(fr->error->message, "try again in a "
		    "moment") != NULL, "%s", fr->error->message);
		infeed__frame__free_unpacked(fr, NULL);
		close(sock[i]);
		sock[i] = -1;
		refused++;
	}
	ck_assert_int_eq(refused, 3);
	fuse_release(&fs);
	for (i = 0; i < CAP + 3; i++) {
		if (sock[i] == -1)
			continue;
		pfd.fd = sock[i];
		pfd.events = POLLIN;
		ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
		ck_assert_ptr_nonnull(fr = raw_recv(sock[i], &in[i]));
		ck_assert_msg(fr->msg_case == INFEED__FRAME__MSG_ATTACHED,
		    "got %s: %s", wire_case_name(fr->msg_case),
		    fr->msg_case == INFEED__FRAME__MSG_ERROR ?
		    fr->error->message : "");
		attached++;
		infeed__frame__free_unpacked(fr, NULL);
		close(sock[i]);
	}
	ck_assert_int_eq(attached, CAP);
	usleep(100000);			/* the bystander's rounds */
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	for (i = 0; i < CAP + 3; i++) {
		close(fd[i]);
		wire_in_clear(&in[i]);
	}
	fuse_stop(&fs);
	free(data);
}
END_TEST

/*
 * Six trainers attach, start filling (early_preload) a slow dataset and
 * detach, back to back: each new Attach finds a removed ring's job still
 * running.  main waited for it in poll() on the event loop, up to 100 ms
 * an Attach; the bystander's ListDatasets must not wait for that.  The
 * workers are kept busy on purpose, so only ListDatasets is timed.
 */
START_TEST(settling_attaches_do_not_block_the_loop)
{
	struct bystander	 b;
	struct bystander_report	 r;
	struct infeed_options	 o;
	struct infeed		*f;
	pid_t			 pid[6];
	uint64_t		 until;
	int			 i, k, status;

	ck_assert_int_eq(infeedd_stop(), 0);
	make_config("[dataset slow]\ntype = synthetic\nsamples = 100000\n"
	    "shape = 4\ndtype = float32\nclasses = 10\nseed = 1\n"
	    "sample_delay_us = 5000\n");
	infeedd_start(NULL);
	bystander_start(&b);
	for (i = 0; i < 6; i++) {
		pid[i] = fork();
		ck_assert_int_ne(pid[i], -1);
		if (pid[i] != 0)
			continue;
		until = now_ms() + 2000;
		for (k = 0; now_ms() < until; k++) {
			f = infeed_new();
			infeed_options_init(&o);
			o.batch_size = 64;
			o.early_preload = true;
			if (infeed_connect(f, sock_path, "settler") !=
			    INFEED_OK || infeed_attach(f, "slow", &o, NULL) !=
			    INFEED_OK)
				_exit(1);
			usleep(20000);	/* the workers take its jobs */
			if (infeed_detach(f) != INFEED_OK)
				_exit(2);
			infeed_free(f);
		}
		_exit(k > 0 ? 0 : 3);
	}
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(waitpid(pid[i], &status, 0), pid[i]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "a settler failed: status %d", status);
	}
	bystander_stop(&b, &r);
	fprintf(stderr, "bystander in %s: %llu rounds, worst ListDatasets %llu ms "
	    "(Next not timed: the workers are busy on purpose)\n",
	    __func__, (unsigned long long)r.rounds,
	    (unsigned long long)r.worst_list_ms);
	ck_assert_msg(r.errors == 0, "the bystander failed: %s", r.error);
	ck_assert_msg(r.worst_list_ms < 250, "a bystander's ListDatasets "
	    "took %llu ms", (unsigned long long)r.worst_list_ms);
}
END_TEST

/* Append @path's contents to @buf (at most @len bytes in all). */
static size_t
slurp(const char *path, char *buf, size_t len)
{
	size_t	n = 0;
	ssize_t	k;
	int	fd;

	ck_assert_int_ne(fd = open(path, O_RDONLY), -1);
	while (n < len && (k = read(fd, buf + n, len - n)) > 0)
		n += (size_t)k;
	close(fd);
	return (n);
}

/* Bind-mount @src over @dst, or fail the test. */
static void
bind_over(const char *src, const char *dst)
{
	ck_assert_msg(mount(src, dst, NULL, MS_BIND, NULL) == 0, "bind %s "
	    "over %s: %s", src, dst, strerror(errno));
}

/*
 * A user in 300 groups, the allowed one last (past the 256 main asked
 * getgrouplist for), attaches to a dataset whose allow_groups lists only
 * that group; and the group database (a FUSE file of this test's
 * bind-mounted over /etc/group, in its own mount namespace) answers after
 * a second:
 * the bystander never waits for it, only that Attach does.
 */
START_TEST(many_groups_and_a_slow_group_database)
{
	static char		 passwd[1 << 20], group[1 << 20];
	struct fusefs		 fs;
	struct bystander	 b;
	struct bystander_report	 r;
	struct infeed		*f;
	size_t			 np, ng;
	uint64_t		 t0, ms;
	pid_t			 pid, releaser;
	int			 i, status;

	np = slurp("/etc/passwd", passwd, sizeof(passwd) - 4096);
	np += (size_t)snprintf(passwd + np, sizeof(passwd) - np,
	    "infeedmany:x:4242:4242::/nonexistent:/bin/false\n");
	ng = slurp("/etc/group", group, sizeof(group) - 65536);
	ng += (size_t)snprintf(group + ng, sizeof(group) - ng,
	    "infeedmany:x:4242:\n");
	for (i = 0; i < 300; i++)
		ng += (size_t)snprintf(group + ng, sizeof(group) - ng,
		    "infg%d:x:%d:infeedmany\n", i, 50000 + i);
	/* The same group file, on FUSE: reads wait until released. */
	if (!fuse_start(&fs, dir, (const uint8_t *)group, ng))
		return;
	/* A daemon in this mount namespace, which sees the files below. */
	ck_assert_int_eq(infeedd_stop(), 0);
	write_file(tpath("passwd"), passwd, np);
	write_file(tpath("group"), group, ng);
	bind_over(tpath("passwd"), "/etc/passwd");
	bind_over(tpath("group"), "/etc/group");
	make_config("[dataset private]\ntype = synthetic\nsamples = 100\n"
	    "shape = 4\nallow_groups = infg299\n");
	infeedd_start(NULL);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(chmod(sock_path, 0666), 0);
	bystander_start(&b);

	/* From now on /etc/group answers one second after it is read. */
	ck_assert_int_eq(umount2("/etc/group", MNT_DETACH), 0);
	bind_over(fs.path, "/etc/group");
	releaser = fork();
	ck_assert_int_ne(releaser, -1);
	if (releaser == 0) {
		usleep(1000000);
		fuse_release(&fs);
		_exit(0);
	}
	t0 = now_ms();
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		if (setgroups(0, NULL) == -1 || setgid(4242) == -1 ||
		    setuid(4242) == -1)
			_exit(100);
		f = infeed_new();
		if (infeed_connect(f, sock_path, "many-groups") != INFEED_OK)
			_exit(101);
		if (infeed_attach(f, "private", NULL, NULL) == INFEED_OK)
			_exit(0);
		fprintf(stderr, "attach: %s\n", infeed_error(f));
		_exit(infeed_daemon_code(f) == 7 ? 3 : 4);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ms = now_ms() - t0;
	waitpid(releaser, NULL, 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the user in 300 groups could not attach (status %d: 3 is "
	    "permission denied)", status);
	fprintf(stderr, "attach with a group database answering after 1 s: "
	    "%llu ms\n", (unsigned long long)ms);
	ck_assert_uint_ge(ms, 900);
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	umount2("/etc/group", MNT_DETACH);
	fuse_stop(&fs);
}
END_TEST

static Suite *
attach_suite(void)
{
	Suite	*s = suite_create("attach");
	TCase	*tc;

	tc = tcase_create("labels");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, huge_labels_file_attach_holds_no_one);
	tcase_add_test(tc, bad_label_fails_the_step_that_reads_it);
	suite_add_tcase(s, tc);

	tc = tcase_create("blocking");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, blocking_file_times_out_others_served);
	tcase_add_test(tc, hang_up_while_checked_leaves_nothing);
	tcase_add_test(tc, attaches_beyond_the_cap_refused_at_once);
	tcase_add_test(tc, stuck_checks_hold_only_their_user);
	suite_add_tcase(s, tc);

	tc = tcase_create("settle");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, settling_attaches_do_not_block_the_loop);
	suite_add_tcase(s, tc);

	tc = tcase_create("groups");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, many_groups_and_a_slow_group_database);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(attach_suite()));
}
