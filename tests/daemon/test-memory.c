/* SPDX-License-Identifier: MIT */
/*
 * The memory budget against the real infeedd, counted in the pages that
 * shared memory really takes (st_blocks of the ring descriptors a client
 * got), issue 24 item 3: a client that keeps a step of every session it
 * ends cannot take infeedd's shared memory past memory_budget, and is told
 * which of its processes holds what; kept memory given up while an old
 * client still maps it really goes; a process that exits gives its ended
 * sessions' memory back to the budget; a ring's memfd may be larger than
 * ring_bytes, and libinfeed reads such a ring right.
 */

#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"

#define MiB	(UINT64_C(1) << 20)

/*
 * "big": 300000 samples of 64 bytes.  A session of batch 300000 has a
 * ring of 3 slots of 300000 x (64 + 4 + 8) bytes (65.2 MiB) and index
 * tables of 13.7 MiB: one fits in 100 MiB, two do not.
 */
#define BIG_ROWS	300000
#define BUDGET		"100M"
#define BUDGET_BYTES	(100 * MiB)

static void
setup_big(void)
{
	char	extra[512];

	snprintf(extra, sizeof(extra), "memory_budget = %s\n\n"
	    "[dataset big]\ntype = synthetic\nsamples = %d\nshape = 1,8,8\n"
	    "dtype = uint8\nclasses = 10\nseed = 3\n", BUDGET, BIG_ROWS);
	make_files(extra);
	infeedd_start(NULL);
}

/* A raw connection, said hello on. */
struct conn {
	int		fd;
	struct wire_in	in;
};

static void
conn_open(struct conn *c)
{
	c->fd = raw_connect();
	wire_in_init(&c->in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(c->fd, &c->in, WIRE_PROTOCOL_VERSION);
}

static void
conn_close(struct conn *c)
{
	close(c->fd);
	wire_in_clear(&c->in);
}

/* Send @f and read the reply, within ten seconds. */
static Infeed__Frame *
conn_call(struct conn *c, Infeed__Frame *f)
{
	Infeed__Frame	*r;
	struct pollfd	 pfd = { c->fd, POLLIN, 0 };
	char		*cause = NULL;

	raw_send(c->fd, f);
	for (;;) {
		if (wire_in_frame(&c->in, &r, &cause) == WIRE_OK)
			return (r);
		ck_assert_msg(poll(&pfd, 1, 10000) == 1, "no reply in 10 s");
		ck_assert_int_gt(wire_in_recv(&c->in, c->fd), 0);
	}
}

/*
 * Attach to @dataset with batch @batch and early_preload, endless (every
 * slot fills): the ring's descriptor in *@ring_fd and Attached.ring_bytes
 * in *@ring_bytes (may be NULL), or -1 and the Error's message in @msg
 * when refused (then its code is RESOURCE_EXHAUSTED).
 */
static void
conn_attach_to(struct conn *c, const char *dataset, uint32_t batch,
    int *ring_fd, uint64_t *ring_bytes, char *msg, size_t len)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT, *r;
	Infeed__Attach		 a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	 o = INFEED__LOADER_OPTIONS__INIT;

	o.has_batch_size = o.has_early_preload = 1;
	o.batch_size = batch;
	o.early_preload = 1;
	o.has_load_indefinitely = 1;
	o.load_indefinitely = 1;
	a.dataset = (char *)dataset;
	a.options = &o;
	f.msg_case = INFEED__FRAME__MSG_ATTACH;
	f.attach = &a;
	r = conn_call(c, &f);
	*ring_fd = -1;
	msg[0] = '\0';
	if (r->msg_case == INFEED__FRAME__MSG_ATTACHED) {
		*ring_fd = wire_in_take_fd(&c->in);
		ck_assert_int_ge(*ring_fd, 0);
		if (ring_bytes != NULL)
			*ring_bytes = r->attached->ring_bytes;
	} else {
		ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
		ck_assert_int_eq(r->error->code,
		    INFEED__ERROR_CODE__ERROR_RESOURCE_EXHAUSTED);
		snprintf(msg, len, "%s", r->error->message);
	}
	infeed__frame__free_unpacked(r, NULL);
}

/* conn_attach_to() "big". */
static void
conn_attach(struct conn *c, uint32_t batch, int *ring_fd, char *msg,
    size_t len)
{
	conn_attach_to(c, "big", batch, ring_fd, NULL, msg, len);
}

/* Next: the step's slot, which the client now holds. */
static uint32_t
conn_next(struct conn *c)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	Infeed__Next	 n = INFEED__NEXT__INIT;
	uint32_t	 slot;

	f.msg_case = INFEED__FRAME__MSG_NEXT;
	f.next = &n;
	r = conn_call(c, &f);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_STEP);
	slot = r->step->slot;
	infeed__frame__free_unpacked(r, NULL);
	return (slot);
}

static void
conn_release(struct conn *c, uint32_t slot)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	Infeed__Release	 rl = INFEED__RELEASE__INIT;

	rl.slot = slot;
	f.msg_case = INFEED__FRAME__MSG_RELEASE;
	f.release = &rl;
	r = conn_call(c, &f);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_RELEASED);
	infeed__frame__free_unpacked(r, NULL);
}

static void
conn_detach(struct conn *c)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	Infeed__Detach	 d = INFEED__DETACH__INIT;

	f.msg_case = INFEED__FRAME__MSG_DETACH;
	f.detach = &d;
	r = conn_call(c, &f);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_DETACHED);
	infeed__frame__free_unpacked(r, NULL);
}

/* Bytes of shared memory the ring behind @fd really takes. */
static uint64_t
allocated(int fd)
{
	struct stat	sb;

	ck_assert_int_eq(fstat(fd, &sb), 0);
	return ((uint64_t)sb.st_blocks * 512);
}

/* What the rings behind @n descriptors take together. */
static uint64_t
allocated_all(const int *fds, int n)
{
	uint64_t	sum = 0;
	int		i;

	for (i = 0; i < n; i++)
		sum += allocated(fds[i]);
	return (sum);
}

/* Wait until the ring behind @fd is filled (early_preload, endless). */
static void
wait_filled(int fd, uint64_t at_least)
{
	uint64_t	deadline = now_ms() + 20000;

	while (allocated(fd) < at_least && now_ms() < deadline)
		usleep(20000);
	ck_assert_msg(allocated(fd) >= at_least, "the ring took only %llu "
	    "bytes after 20 s", (unsigned long long)allocated(fd));
}

/* The daemon's figure of held memory (Stats.memory_held). */
static uint64_t
held_by_stats(void)
{
	Infeed__Frame	*r = raw_stats();
	uint64_t	 v;

	ck_assert(r->stats->has_memory_held);
	v = r->stats->memory_held;
	infeed__frame__free_unpacked(r, NULL);
	return (v);
}

/*
 * Issue 24's reproduction: attach with a big batch and early_preload,
 * take a step and keep it, detach, four times in one process.  Each ended
 * ring stays mapped (its step is kept), so its pages stay; the shared
 * memory they take together must stay within memory_budget, and an attach
 * that would pass it is refused, saying that this very process holds the
 * memory of an ended session and what to do.  A bystander is served on
 * time throughout.
 */
START_TEST(test_kept_steps_of_ended_sessions_stay_within_the_budget)
{
	struct bystander	 by;
	struct bystander_report	 rep;
	struct conn		 c;
	uint64_t		 total, worst = 0;
	char			 msg[1024], want[128];
	int			 fds[4], nfds = 0, fd, i, refused = 0;

	bystander_start(&by);
	conn_open(&c);
	for (i = 0; i < 4; i++) {
		conn_attach(&c, BIG_ROWS, &fd, msg, sizeof(msg));
		if (fd == -1) {
			refused++;
			snprintf(want, sizeof(want), "your process %d still "
			    "holds", (int)getpid());
			ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
			ck_assert_msg(strstr(msg, "drop the tensors or end "
			    "the process") != NULL, "%s", msg);
			ck_assert_msg(strstr(msg, "memory_budget") != NULL,
			    "%s", msg);
			continue;
		}
		fds[nfds++] = fd;
		/* Every slot written: the whole ring is in memory. */
		wait_filled(fd, 3 * (uint64_t)BIG_ROWS * 64);
		(void)conn_next(&c);		/* kept, never released */
		conn_detach(&c);
		usleep(100000);
		total = allocated_all(fds, nfds);
		worst = total > worst ? total : worst;
		ck_assert_msg(total <= BUDGET_BYTES, "after %d sessions the "
		    "rings a client still maps take %llu MiB of shared "
		    "memory, past memory_budget (%s)", i + 1,
		    (unsigned long long)(total / MiB), BUDGET);
	}
	fprintf(stderr, "kept steps: %d sessions made, %d refused, at most "
	    "%llu MiB of shared memory\n", nfds, refused,
	    (unsigned long long)(worst / MiB));
	ck_assert_int_eq(nfds, 1);
	ck_assert_int_eq(refused, 3);
	/* Stats say what the ended session's process holds. */
	ck_assert_uint_eq(held_by_stats(), (uint64_t)lseek(fds[0], 0,
	    SEEK_END));
	bystander_stop(&by, &rep);
	/* Under valgrind (scripts/test) every round trip is slower. */
	bystander_assert(&rep, strstr(getenv("INFEEDD"), "valgrind") != NULL ?
	    2000 : 250);
	conn_close(&c);
	for (i = 0; i < nfds; i++)
		close(fds[i]);
}
END_TEST

/*
 * Kept memory given up for a ring that needs the budget goes, though the
 * client that had it still maps it (it released its steps, but keeps the
 * mapping): its pages are freed, and it reads zeroes.
 */
/*
 * Detach while the Step answering the last Next is on its way, never read:
 * a Detach that says how many Steps were read (libinfeed's, since 1.10.1)
 * has the daemon release that one, so nothing stays held for the client's
 * process; one that does not say (an older client) leaves it held until the
 * process exits, as before.
 */
START_TEST(test_step_crossing_the_detach_released)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r, *st;
	Infeed__Next	 n = INFEED__NEXT__INIT;
	Infeed__Detach	 d = INFEED__DETACH__INIT;
	struct pollfd	 pfd;
	struct conn	 c;
	char		 msg[512], *cause = NULL;
	uint64_t	 held[2], used, deadline;
	int		 fd, i;

	for (i = 0; i < 2; i++) {
		conn_open(&c);
		conn_attach(&c, 64, &fd, msg, sizeof(msg));
		ck_assert_int_ge(fd, 0);
		conn_release(&c, conn_next(&c));
		f = (Infeed__Frame)INFEED__FRAME__INIT;
		f.msg_case = INFEED__FRAME__MSG_NEXT;
		f.next = &n;
		raw_send(c.fd, &f);
		/* The Step is here, unread, when the Detach goes. */
		pfd = (struct pollfd){ c.fd, POLLIN, 0 };
		ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
		d.has_steps_received = i == 0;
		d.steps_received = 1;
		f = (Infeed__Frame)INFEED__FRAME__INIT;
		f.msg_case = INFEED__FRAME__MSG_DETACH;
		f.detach = &d;
		r = conn_call(&c, &f);
		ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_STEP);
		while (wire_in_frame(&c.in, &st, &cause) != WIRE_OK) {
			ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
			ck_assert_int_gt(wire_in_recv(&c.in, c.fd), 0);
		}
		ck_assert_int_eq(st->msg_case, INFEED__FRAME__MSG_DETACHED);
		infeed__frame__free_unpacked(st, NULL);
		infeed__frame__free_unpacked(r, NULL);
		/* The ring goes once its running jobs end (used till then). */
		deadline = now_ms() + 10000;
		for (;;) {
			r = raw_stats();
			used = r->stats->memory_used;
			held[i] = r->stats->memory_held;
			infeed__frame__free_unpacked(r, NULL);
			if (used == 0 || now_ms() > deadline)
				break;
			usleep(10000);
		}
		ck_assert_uint_eq(used, 0);
		close(fd);
		conn_close(&c);
	}
	fprintf(stderr, "held after a Step crossed the Detach: %llu bytes "
	    "with steps_received, %llu without\n", (unsigned long long)held[0],
	    (unsigned long long)held[1]);
	ck_assert_uint_eq(held[0], 0);
	ck_assert_uint_gt(held[1], 0);
}
END_TEST

START_TEST(test_kept_memory_given_up_really_goes)
{
	struct conn	 c;
	uint64_t	 before;
	char		 msg[1024];
	int		 old, fd;

	conn_open(&c);
	conn_attach(&c, BIG_ROWS, &old, msg, sizeof(msg));
	ck_assert_msg(old != -1, "%s", msg);
	wait_filled(old, 3 * (uint64_t)BIG_ROWS * 64);
	conn_release(&c, conn_next(&c));
	conn_detach(&c);
	/* Kept warm (the daemon zeroes it), and still mapped by us. */
	usleep(200000);
	before = allocated(old);
	ck_assert_uint_ge(before, 3 * (uint64_t)BIG_ROWS * 64);
	/* Another shape needs the budget: the kept memory is given up. */
	conn_attach(&c, BIG_ROWS / 2, &fd, msg, sizeof(msg));
	ck_assert_msg(fd != -1, "%s", msg);
	ck_assert_msg(allocated(old) == 0, "kept memory given up for a new "
	    "ring still takes %llu bytes of shared memory (%llu before)",
	    (unsigned long long)allocated(old), (unsigned long long)before);
	ck_assert_uint_le(allocated(old) + allocated(fd), BUDGET_BYTES);
	close(fd);
	close(old);
	conn_close(&c);
}
END_TEST

/*
 * The memory an ended session's process holds goes back to the budget
 * when that process exits: an attach refused while it lives then fits.
 */
START_TEST(test_exit_of_the_holding_process_gives_the_memory_back)
{
	struct conn	 c;
	uint64_t	 deadline, held;
	pid_t		 pid;
	char		 msg[1024], want[128];
	int		 ready[2], fd;

	ck_assert_int_eq(pipe(ready), 0);
	if ((pid = fork()) == 0) {
		/* A trainer that keeps a step of its ended session. */
		close(ready[0]);
		conn_open(&c);
		conn_attach(&c, BIG_ROWS, &fd, msg, sizeof(msg));
		if (fd == -1)
			_exit(1);
		wait_filled(fd, 3 * (uint64_t)BIG_ROWS * 64);
		(void)conn_next(&c);
		conn_detach(&c);
		conn_close(&c);		/* it keeps only the ring */
		(void)write(ready[1], "x", 1);
		for (;;)
			pause();
	}
	close(ready[1]);
	ck_assert_int_eq(read(ready[0], msg, 1), 1);
	close(ready[0]);
	conn_open(&c);
	conn_attach(&c, BIG_ROWS, &fd, msg, sizeof(msg));
	ck_assert_int_eq(fd, -1);
	snprintf(want, sizeof(want), "your process %d still holds", (int)pid);
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	ck_assert_uint_gt(held_by_stats(), 0);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	/* The daemon sees the exit on its own, at once. */
	deadline = now_ms() + 2000;
	while ((held = held_by_stats()) != 0 && now_ms() < deadline)
		usleep(20000);
	ck_assert_msg(held == 0, "%llu bytes still held 2 s after the "
	    "process exited", (unsigned long long)held);
	conn_attach(&c, BIG_ROWS, &fd, msg, sizeof(msg));
	ck_assert_msg(fd != -1, "%s", msg);
	close(fd);
	conn_close(&c);
}
END_TEST

/*
 * The protocol's contract on the ring's memfd: at least ring_bytes, maybe
 * more (a ring on kept memory up to a quarter larger than it needs); the
 * ring is its first ring_bytes.  libinfeed maps just those and reads a
 * ring made on larger kept memory right.
 */
START_TEST(test_ring_on_larger_kept_memory_read_right)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed		*f;
	struct conn		 c;
	struct stat		 sb;
	uint64_t		 bytes, i, idx;
	unsigned		 j;
	const uint8_t		*row;
	char			 msg[1024];
	int			 fd;

	/* 1000 raw rows: slots of 7 pages; 850 rows: of 6, within 1/4. */
	conn_open(&c);
	conn_attach_to(&c, "raw", 1000, &fd, &bytes, msg, sizeof(msg));
	ck_assert_msg(fd != -1, "%s", msg);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	ck_assert_uint_eq((uint64_t)sb.st_size, bytes);
	ck_assert_uint_eq(bytes, 3 * 7 * 4096);
	close(fd);
	conn_release(&c, conn_next(&c));
	conn_detach(&c);
	usleep(100000);
	conn_attach_to(&c, "raw", 850, &fd, &bytes, msg, sizeof(msg));
	ck_assert_msg(fd != -1, "%s", msg);
	ck_assert_uint_eq(bytes, 3 * 6 * 4096);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	ck_assert_msg((uint64_t)sb.st_size == 3 * 7 * 4096, "a ring of %llu "
	    "bytes on kept memory came in a memfd of %lld",
	    (unsigned long long)bytes, (long long)sb.st_size);
	close(fd);
	conn_detach(&c);
	conn_close(&c);

	/* The same through libinfeed: every row's bytes and label right. */
	f = client();
	infeed_options_init(&o);
	o.batch_size = 1000;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	usleep(100000);
	o.batch_size = 850;
	o.shuffle = true;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.rows, 850);
	for (i = 0; i < st.rows; i++) {
		idx = st.indices[i];
		ck_assert_uint_lt(idx, RAW_N);
		row = (const uint8_t *)st.data + i * RAW_BYTES;
		for (j = 0; j < RAW_BYTES; j++)
			ck_assert_uint_eq(row[j], raw_byte(idx, j));
		ck_assert_int_eq(st.labels[i], (int32_t)((idx * 3) %
		    RAW_CLASSES));
	}
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeed_free(f);
}
END_TEST

static Suite *
memory_suite(void)
{
	Suite	*s = suite_create("memory");
	TCase	*tc = tcase_create("budget");

	tcase_add_checked_fixture(tc, setup_big, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc,
	    test_kept_steps_of_ended_sessions_stay_within_the_budget);
	tcase_add_test(tc, test_kept_memory_given_up_really_goes);
	tcase_add_test(tc, test_step_crossing_the_detach_released);
	tcase_add_test(tc,
	    test_exit_of_the_holding_process_gives_the_memory_back);
	tcase_add_test(tc, test_ring_on_larger_kept_memory_read_right);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(memory_suite()));
}
