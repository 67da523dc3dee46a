/* SPDX-License-Identifier: MIT */
/*
 * Reliability against the real infeedd: resume at a start position and
 * across a daemon restart with the same order, a dataset file truncated
 * under a running session (an error naming the sample and its files),
 * clients killed at random moments, a client that sends and never reads, a
 * flood of connections, and a reply too large for a frame.
 */

#include <sys/socket.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"

/* Open descriptors of the daemon's main process. */
static int
daemon_fds(void)
{
	char		 path[64];
	DIR		*d;
	struct dirent	*de;
	int		 n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)infeedd_pid);
	ck_assert_ptr_nonnull(d = opendir(path));
	while ((de = readdir(d)) != NULL)
		n += de->d_name[0] != '.';
	closedir(d);
	return (n);
}

/* The daemon's Stats. */
static Infeed__Stats *
stats(Infeed__Frame **frame)
{
	struct infeed	*f = client();
	uint8_t		*buf;
	size_t		 len;

	ck_assert_int_eq(infeed_stats_frame(f, &buf, &len), INFEED_OK);
	infeed_free(f);
	*frame = infeed__frame__unpack(NULL, len, buf);
	free(buf);
	ck_assert_ptr_nonnull(*frame);
	return ((*frame)->stats);
}

/* Indices of @steps steps from @f, appended to @out at *@n. */
static void
take(struct infeed *f, unsigned steps, uint64_t *out, size_t *n)
{
	struct infeed_step	st;
	unsigned		s;

	for (s = 0; s < steps; s++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		memcpy(out + *n, st.indices, st.rows * sizeof(*out));
		*n += st.rows;
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
}

/* Shuffled options used by the resume tests: 6 steps of 150 per epoch. */
static void
resume_options(struct infeed_options *o)
{
	infeed_options_init(o);
	o->batch_size = 50;
	o->device_iterations = 3;
	o->shuffle = true;
	o->seed = 99;
}

/* The indices of the first 20 steps of an uninterrupted run. */
static uint64_t *
reference_run(size_t *n)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	uint64_t		*all = calloc(20 * 150, sizeof(*all));

	*n = 0;
	resume_options(&o);
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	take(f, 20, all, n);
	infeed_free(f);
	return (all);
}

/* Attaching with (epoch, step) gives exactly the uninterrupted steps. */
START_TEST(attach_at_epoch_and_step_resumes_the_order)
{
	struct infeed		*f;
	struct infeed_options	 o;
	uint64_t		*all, *part;
	size_t			 na, np = 0;

	all = reference_run(&na);
	part = calloc(20 * 150, sizeof(*part));
	resume_options(&o);
	f = client();
	o.start_epoch = 1;
	o.start_step = 2;	/* step 8 of the uninterrupted run */
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	take(f, 12, part, &np);
	ck_assert_uint_eq(np, 12 * 150);
	ck_assert_int_eq(memcmp(part, all + 8 * 150, np * sizeof(*all)), 0);
	infeed_free(f);
	free(all);
	free(part);
}
END_TEST

/* A daemon restart mid-epoch: libinfeed reconnects, the order is unchanged. */
START_TEST(daemon_restart_reconnects_with_the_same_order)
{
	struct infeed		*f;
	struct infeed_options	 o;
	uint64_t		*all, *got;
	size_t			 na, ng = 0;

	all = reference_run(&na);
	got = calloc(20 * 150, sizeof(*got));
	resume_options(&o);
	f = client();
	o.reconnect_timeout_ms = 10000;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	take(f, 4, got, &ng);
	infeedd_stop();			/* systemctl restart, in short */
	infeedd_start("1");
	take(f, 16, got, &ng);
	ck_assert_uint_eq(ng, na);
	ck_assert_int_eq(memcmp(got, all, na * sizeof(*all)), 0);
	infeed_free(f);
	free(all);
	free(got);
}
END_TEST

/*
 * Steps held across a daemon restart stay readable and unchanged until
 * released (the old ring stays mapped for them; the new one is mapped
 * elsewhere), releasing them is harmless, and the order goes on.
 */
START_TEST(steps_held_across_a_restart_stay_unchanged)
{
	struct infeed		*f;
	struct infeed_options	 o;
	struct infeed_step	 held[2], st;
	uint64_t		*all, *got, copy[2][150];
	uint8_t			 bytes[2][150 * RAW_BYTES];
	size_t			 na, ng = 0;
	unsigned		 i;

	all = reference_run(&na);
	got = calloc(20 * 150, sizeof(*got));
	resume_options(&o);
	o.reconnect_timeout_ms = 10000;
	f = client();
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(infeed_next(f, &held[i]), INFEED_OK);
		memcpy(got + ng, held[i].indices, held[i].rows * sizeof(*got));
		ng += held[i].rows;
		memcpy(copy[i], held[i].indices, sizeof(copy[i]));
		memcpy(bytes[i], held[i].data, sizeof(bytes[i]));
	}
	infeedd_stop();
	infeedd_start("1");
	/* The next step resumes; the held ones must not change under us. */
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_ne(st.session, held[0].session);
	memcpy(got + ng, st.indices, st.rows * sizeof(*got));
	ng += st.rows;
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(memcmp(held[i].indices, copy[i],
		    sizeof(copy[i])), 0);
		ck_assert_int_eq(memcmp(held[i].data, bytes[i],
		    sizeof(bytes[i])), 0);
		ck_assert_int_eq(infeed_release(f, &held[i]), INFEED_OK);
		/* Twice: harmless, and the other held step stays mapped. */
		ck_assert_int_eq(infeed_release(f, &held[0]), INFEED_OK);
		if (i == 0)
			ck_assert_int_eq(memcmp(held[1].data, bytes[1],
			    sizeof(bytes[1])), 0);
	}
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	/* The new session's slots were not touched by those releases. */
	take(f, 17, got, &ng);
	ck_assert_uint_eq(ng, na);
	ck_assert_int_eq(memcmp(got, all, na * sizeof(*all)), 0);
	infeed_free(f);
	free(all);
	free(got);
}
END_TEST

/*
 * Without load_indefinitely, the EndOfData owed at an epoch's end survives
 * a daemon restart: the client sees the boundary, then the next epoch.
 */
START_TEST(end_of_data_owed_survives_a_restart)
{
	struct infeed		*f;
	struct infeed_options	 o;
	struct infeed_step	 st;
	unsigned		 i;

	resume_options(&o);
	o.load_indefinitely = false;
	o.reconnect_timeout_ms = 10000;
	f = client();
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	for (i = 0; i < 6; i++) {	/* the whole of epoch 0 */
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_uint_eq(st.epoch, 0);
		ck_assert_uint_eq(st.step, i);
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	infeedd_stop();
	infeedd_start("1");
	ck_assert_msg(infeed_next(f, &st) == INFEED_END_OF_DATA, "%s",
	    infeed_error(f));
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.epoch, 1);
	ck_assert_uint_eq(st.step, 0);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeed_free(f);
}
END_TEST

/*
 * An EndOfData never read before a detach is not owed to the next session:
 * after a restart in the middle of the next attach's epoch, the next call
 * is a step, not a false EndOfData.
 */
START_TEST(no_false_end_of_data_after_a_detach_and_a_restart)
{
	struct infeed		*f;
	struct infeed_options	 o;
	struct infeed_step	 st;
	unsigned		 i;

	resume_options(&o);
	o.load_indefinitely = false;
	o.reconnect_timeout_ms = 10000;
	f = client();
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	for (i = 0; i < 6; i++) {	/* epoch 0, its EndOfData unread */
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeedd_stop();
	infeedd_start("1");
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s", infeed_error(f));
	ck_assert_uint_eq(st.epoch, 0);
	ck_assert_uint_eq(st.step, 1);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeed_free(f);
}
END_TEST

/* Without reconnecting, a restart is reported as a closed connection. */
START_TEST(daemon_restart_without_reconnect_is_closed)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st;

	resume_options(&o);
	o.reconnect_timeout_ms = 0;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	infeedd_stop();
	ck_assert_int_eq(infeed_next(f, &st), INFEED_ERR_CLOSED);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "closed"));
	infeed_free(f);
	infeedd_start(NULL);
}
END_TEST

/*
 * A trainer silent for longer than a new client's wait for its Hello (10 s,
 * PEER_HELLO_WAIT_S: a checkpoint, a debugger; 2 s here, through
 * INFEED_HELLO_WAIT_S) is not closed: libevent
 * kept the Hello's timeout on the connection's read event and re-armed it
 * at every request, so a C client without reconnect failed (INFEED_ERR_
 * CLOSED) and Python's reconnected.
 */
START_TEST(client_silent_past_the_hello_wait_stays_attached)
{
	struct infeed		*f;
	struct infeed_options	 o;
	struct infeed_step	 st;
	uint64_t		 i;

	infeedd_stop();
	ck_assert_int_eq(setenv("INFEED_HELLO_WAIT_S", "2", 1), 0);
	infeedd_start(NULL);
	ck_assert_int_eq(unsetenv("INFEED_HELLO_WAIT_S"), 0);
	f = client();

	resume_options(&o);
	o.reconnect_timeout_ms = 0;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	for (i = 0; i < 3; i++) {	/* requests after the Hello */
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		infeed_release(f, &st);
	}
	sleep(4);
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "after 4 s of "
	    "silence (the Hello wait is 2 s here): %s", infeed_error(f));
	ck_assert_uint_eq(st.step, 3);
	infeed_release(f, &st);
	infeed_free(f);
}
END_TEST

/*
 * A file truncated under a session is that session's error, not a crash,
 * and the error names the dataset, the sample's index and its files.  No
 * row is delivered that is not wholly inside the file: the rows in the
 * last, partial page (which read as zeros) are errors too.
 */
START_TEST(truncated_file_fails_the_session_at_the_first_cut_row)
{
	struct infeed		*f = client(), *g;
	struct infeed_options	 o;
	struct infeed_step	 st;
	char			 path[400], labels[400];
	const char		*msg, *p;
	const uint8_t		*row;
	unsigned long long	 index;
	uint64_t		 r0;
	unsigned		 j;
	int			 i, r = INFEED_OK;

	infeed_options_init(&o);
	o.batch_size = 100;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	infeed_release(f, &st);
	/*
	 * 600 samples of 16 bytes and half of sample 600 are left, in the
	 * middle of the 4 KiB page of samples 512 to 767: step 6 (samples
	 * 600 to 699, not yet filled with 3 slots) lies wholly in that page.
	 */
	snprintf(path, sizeof(path), "%s/raw.bin", dir);
	ck_assert_int_eq(truncate(path, 600 * RAW_BYTES + 8), 0);
	for (i = 0; i < 10 && r == INFEED_OK; i++) {
		r = infeed_next(f, &st);
		if (r != INFEED_OK)
			break;
		for (r0 = 0; r0 < st.rows; r0++) {
			row = (const uint8_t *)st.data + r0 * RAW_BYTES;
			for (j = 0; j < RAW_BYTES; j++)
				ck_assert_msg(row[j] == raw_byte(st.indices[r0],
				    j), "sample %llu of step %llu delivered "
				    "with wrong bytes",
				    (unsigned long long)st.indices[r0],
				    (unsigned long long)st.step);
		}
		infeed_release(f, &st);
	}
	ck_assert_int_eq(r, INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(f), INFEED__ERROR_CODE__ERROR_DATA);
	msg = infeed_error(f);
	ck_assert_msg(strstr(msg, "dataset 'raw'") != NULL, "%s", msg);
	ck_assert_msg(strstr(msg, "cannot read sample") != NULL, "%s", msg);
	snprintf(labels, sizeof(labels), "%s/raw-labels.bin", dir);
	ck_assert_msg(strstr(msg, path) != NULL, "no file in: %s", msg);
	ck_assert_msg(strstr(msg, labels) != NULL, "no labels in: %s", msg);
	/* The dataset index, not the row, and one of step 6. */
	ck_assert_msg((p = strstr(msg, "sample ")) != NULL &&
	    sscanf(p, "sample %llu", &index) == 1, "no index in: %s", msg);
	ck_assert_msg(index >= 600 && index < 700, "sample %llu: %s", index,
	    msg);
	infeed_free(f);
	/* The daemon and the other datasets carry on. */
	g = client();
	ck_assert_int_eq(infeed_attach(g, "synthetic", NULL, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(g, &st), INFEED_OK);
	infeed_free(g);
}
END_TEST

/*
 * In a child: attach to raw, take @hold steps and keep them, tell the
 * parent through @ready, and wait to be killed.
 */
static pid_t
victim_at_rest(unsigned hold)
{
	struct infeed_step	 st;
	struct infeed		*f;
	unsigned		 k;
	pid_t			 pid;
	int			 ready[2];
	char			 c;

	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_ne(pid = fork(), -1);
	if (pid == 0) {
		close(ready[0]);
		if ((f = infeed_new()) == NULL ||
		    infeed_connect(f, sock_path, "victim") != INFEED_OK ||
		    infeed_attach(f, "raw", NULL, NULL) != INFEED_OK)
			_exit(1);
		for (k = 0; k < hold; k++) {
			if (infeed_next(f, &st) != INFEED_OK)
				_exit(1);
		}
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(1);
	}
	close(ready[1]);
	ck_assert_msg(read(ready[0], &c, 1) == 1, "a victim did not attach");
	close(ready[0]);
	return (pid);
}

/*
 * Clients killed at random moments leave nothing behind in the daemon:
 * no session, job, held memory or descriptor, and their kept rings (a
 * client killed before it held a step leaves its ring memory for its
 * restart, keep_ring_memory) go when that time runs out.  The last two
 * die at chosen moments, holding a step (its ring held for its process)
 * and right after an Attach (its ring kept), for a held and a kept ring
 * on every run: under valgrind most random victims die before they
 * attach, and a kept ring once looked like a leaked descriptor.
 */
START_TEST(killed_clients_leave_nothing_behind)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	Infeed__Frame		*fr;
	Infeed__Stats		*s;
	struct infeed		*f;
	int			 base_fds, i, k;
	pid_t			 pid;

	infeedd_stop();
	make_config("keep_ring_memory = 1s");
	infeedd_start(NULL);
	usleep(100000);
	base_fds = daemon_fds();
	srandom(7);
	for (i = 0; i < 25; i++) {
		pid = fork();
		ck_assert_int_ne(pid, -1);
		if (pid == 0) {
			infeed_options_init(&o);
			o.batch_size = 20 + (uint32_t)(i % 5) * 30;
			o.shuffle = true;
			o.early_preload = i % 2;
			if ((f = infeed_new()) == NULL ||
			    infeed_connect(f, sock_path, "victim") != INFEED_OK)
				_exit(1);
			if (i % 7 == 0)
				pause();	/* killed before attaching */
			if (infeed_attach(f, "raw", &o, NULL) != INFEED_OK)
				_exit(1);
			for (k = 0; ; k++) {
				if (infeed_next(f, &st) != INFEED_OK)
					_exit(1);
				if (k % 3 != 0)	/* hold some slots */
					infeed_release(f, &st);
			}
		}
		usleep((useconds_t)(random() % 20000));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	for (i = 1; i >= 0; i--) {
		pid = victim_at_rest((unsigned)i);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	/*
	 * The daemon sees the last hang-ups and frees their memory soon (kept
	 * rings at its next look, every 5 s), but under valgrind "soon" is
	 * seconds: wait up to 20 s for all of it.
	 */
	for (i = 0; ; i++) {
		s = stats(&fr);
		if ((s->n_sessions == 0 && s->memory_used == 0 &&
		    s->memory_held == 0 && s->memory_kept == 0 &&
		    s->jobs_queued == 0) || i == 200)
			break;
		infeed__frame__free_unpacked(fr, NULL);
		usleep(100000);
	}
	ck_assert_uint_eq(s->n_sessions, 0);
	ck_assert_uint_eq(s->memory_used, 0);
	ck_assert_uint_eq(s->memory_held, 0);
	ck_assert_uint_eq(s->memory_kept, 0);
	ck_assert_uint_eq(s->jobs_queued, 0);
	infeed__frame__free_unpacked(fr, NULL);
	/* The stats clients' closes may still be on their way. */
	for (i = 0; i < 200 && daemon_fds() != base_fds; i++)
		usleep(100000);
	ck_assert_int_eq(daemon_fds(), base_fds);
}
END_TEST

/* A client that sends and never reads stalls only itself. */
START_TEST(client_that_never_reads_stalls_only_itself)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT;
	Infeed__ListDatasets	 ld = INFEED__LIST_DATASETS__INIT;
	struct infeed		*g;
	struct wire_in		 in;
	struct infeed_step	 st;
	uint8_t			*buf;
	size_t			 len, sent = 0;
	int			 fd, i, flags;
	ssize_t			 n;

	fd = raw_connect();
	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(fd, &in, WIRE_PROTOCOL_VERSION);
	fr.msg_case = INFEED__FRAME__MSG_LIST_DATASETS;
	fr.list_datasets = &ld;
	buf = wire_pack(&fr, INFEED_DEFAULT_MAX_FRAME, &len);
	flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	/* Until the socket is full both ways: the daemon stops reading us. */
	for (i = 0; i < 2000000; i++) {
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n == -1 && errno == EAGAIN) {
			usleep(1000);
			n = send(fd, buf, len, MSG_NOSIGNAL);
			if (n == -1 && errno == EAGAIN)
				break;
		}
		ck_assert_int_ne(n, -1);
		sent += (size_t)n;
	}
	ck_assert_msg(i < 2000000, "the daemon kept reading a client that "
	    "never reads its replies");
	free(buf);
	g = client();
	ck_assert_int_eq(infeed_attach(g, "raw", NULL, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(g, &st), INFEED_OK);
	infeed_free(g);
	close(fd);
	wire_in_clear(&in);
	(void)sent;
}
END_TEST

/* More connections than max_clients: the extra ones are told why. */
START_TEST(connections_past_max_clients_are_told_why)
{
	struct infeed	*f;
	struct wire_in	 in;
	Infeed__Frame	*r, hf = INFEED__FRAME__INIT;
	Infeed__Hello	 hello = INFEED__HELLO__INIT;
	int		 fds[60], i, refused = 0;

	infeedd_stop();
	make_config("max_clients = 40");
	infeedd_start(NULL);
	for (i = 0; i < 60; i++)
		fds[i] = raw_connect();
	/*
	 * Over the limit, the daemon reads the client's Hello (so the
	 * client's write does not fail with EPIPE) and answers it with
	 * RESOURCE_EXHAUSTED naming the limit, then hangs up.
	 */
	hello.protocol_version = WIRE_PROTOCOL_VERSION;
	hf.msg_case = INFEED__FRAME__MSG_HELLO;
	hf.hello = &hello;
	for (i = 40; i < 60; i++) {
		usleep(i == 40 ? 100000 : 0);
		raw_send(fds[i], &hf);
		wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
		r = raw_recv(fds[i], &in);
		if (r != NULL && r->msg_case == INFEED__FRAME__MSG_ERROR &&
		    r->error->code ==
		    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED &&
		    strstr(r->error->message, "max_clients") != NULL &&
		    strstr(r->error->message, "40") != NULL &&
		    raw_closed(fds[i]))
			refused++;
		if (r != NULL)
			infeed__frame__free_unpacked(r, NULL);
		wire_in_clear(&in);
	}
	ck_assert_int_eq(refused, 20);
	for (i = 0; i < 60; i++)
		close(fds[i]);
	usleep(100000);
	f = client();
	ck_assert_int_eq(infeed_attach(f, "raw", NULL, NULL), INFEED_OK);
	infeed_free(f);
}
END_TEST

/* A reply larger than max_frame_size fails that request, not the daemon. */
START_TEST(reply_too_large_fails_only_that_request)
{
	struct infeed		*f[40], *g;
	struct infeed_options	 o;
	struct infeed_step	 st;
	uint8_t			*buf;
	size_t			 len;
	char			 name[65];
	int			 i;

	infeedd_stop();
	make_config("max_frame_size = 4K");
	infeedd_start(NULL);
	memset(name, 'n', 64);
	name[64] = '\0';
	infeed_options_init(&o);
	/* 40 sessions of Stats take more than 4 KiB. */
	for (i = 0; i < 40; i++) {
		ck_assert_ptr_nonnull(f[i] = infeed_new());
		ck_assert_int_eq(infeed_connect(f[i], sock_path, name),
		    INFEED_OK);
		ck_assert_int_eq(infeed_attach(f[i], "raw", &o, NULL),
		    INFEED_OK);
	}
	g = client();
	ck_assert_int_eq(infeed_stats_frame(g, &buf, &len), INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(g),
	    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(infeed_error(g), "max_frame_size = 4096") !=
	    NULL, "%s", infeed_error(g));
	/* The daemon and every session carry on. */
	for (i = 0; i < 40; i++) {
		ck_assert_int_eq(infeed_next(f[i], &st), INFEED_OK);
		infeed_free(f[i]);
	}
	ck_assert_int_eq(infeed_stats_frame(g, &buf, &len), INFEED_OK);
	free(buf);
	infeed_free(g);
}
END_TEST

static Suite *
reliability_suite(void)
{
	Suite	*s = suite_create("reliability");
	TCase	*tc = tcase_create("reliability");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, attach_at_epoch_and_step_resumes_the_order);
	tcase_add_test(tc, daemon_restart_reconnects_with_the_same_order);
	tcase_add_test(tc, steps_held_across_a_restart_stay_unchanged);
	tcase_add_test(tc, end_of_data_owed_survives_a_restart);
	tcase_add_test(tc, no_false_end_of_data_after_a_detach_and_a_restart);
	tcase_add_test(tc, daemon_restart_without_reconnect_is_closed);
	tcase_add_test(tc, client_silent_past_the_hello_wait_stays_attached);
	tcase_add_test(tc,
	    truncated_file_fails_the_session_at_the_first_cut_row);
	tcase_add_test(tc, killed_clients_leave_nothing_behind);
	tcase_add_test(tc, client_that_never_reads_stalls_only_itself);
	tcase_add_test(tc, connections_past_max_clients_are_told_why);
	tcase_add_test(tc, reply_too_large_fails_only_that_request);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(reliability_suite()));
}
