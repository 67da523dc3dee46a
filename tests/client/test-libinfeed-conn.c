/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of libinfeed's connection (libinfeed-conn.c) over a
 * socketpair, the test playing infeedd: the outstanding Next's reply state
 * (none, pending, held back), Release acknowledgements taken on the way,
 * a refused Release reported before the step that came with it, a Step
 * nobody will collect given back when the session ends (its ring's
 * descriptor closed, never mapped by the next session); and
 * infeed_get_state() reporting that state, in a caller's struct of any
 * size.
 */

#include <sys/mman.h>
#include <sys/socket.h>

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libinfeed-conn.h"
#include "libinfeed-private.h"
#include "runner.h"

static struct infeed	*f;
static int		 peer = -1;	/* infeedd's end */
static struct wire_in	 peer_in;

static void
setup(void)
{
	int	sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
	    sv), 0);
	ck_assert_ptr_nonnull(f = infeed_new());
	f->conn.fd = sv[0];
	peer = sv[1];
	wire_in_init(&peer_in, INFEED_DEFAULT_MAX_FRAME);
}

static void
teardown(void)
{
	infeed_free(f);
	if (peer != -1)
		close(peer);
	peer = -1;
	wire_in_clear(&peer_in);
}

/* infeedd sends @fr with request id @id. */
static void
peer_send(Infeed__Frame *fr, uint64_t id)
{
	uint8_t	*buf;
	size_t	 len;

	fr->has_request_id = 1;
	fr->request_id = id;
	ck_assert_ptr_nonnull(buf = wire_pack(fr, INFEED_DEFAULT_MAX_FRAME,
	    &len));
	ck_assert_int_eq(wire_send_all(peer, buf, len, -1), 0);
	free(buf);
}

/*
 * infeedd answers request @id with the Step of @slot; with @fd (not -1),
 * a Step that brings a new ring of one slot, @fd its descriptor.
 */
static void
peer_step_fd(uint64_t id, uint32_t slot, int fd)
{
	Infeed__Frame	fr = INFEED__FRAME__INIT;
	Infeed__Step	st = INFEED__STEP__INIT;
	Infeed__Ring	rg = INFEED__RING__INIT;
	uint8_t		*buf;
	size_t		 len;

	st.slot = slot;
	st.step = slot;
	if (fd != -1) {
		rg.slots = 1;
		rg.first_slot = slot;
		rg.ring_bytes = rg.slot_bytes = 4096;
		st.ring = &rg;
	}
	fr.msg_case = INFEED__FRAME__MSG_STEP;
	fr.step = &st;
	fr.has_request_id = 1;
	fr.request_id = id;
	ck_assert_ptr_nonnull(buf = wire_pack(&fr, INFEED_DEFAULT_MAX_FRAME,
	    &len));
	ck_assert_int_eq(wire_send_all(peer, buf, len, fd), 0);
	free(buf);
}

/* infeedd answers request @id with the Step of @slot. */
static void
peer_step(uint64_t id, uint32_t slot)
{
	peer_step_fd(id, slot, -1);
}

/* A ring of one slot whose bytes are all @byte, by descriptor. */
static int
ring_memfd(uint8_t byte)
{
	uint8_t	buf[4096];
	int	fd;

	memset(buf, byte, sizeof(buf));
	ck_assert_int_ne(fd = memfd_create("ring", MFD_CLOEXEC), -1);
	ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	return (fd);
}

/* How many descriptors of this process are open on a memfd. */
static unsigned
memfds_open(void)
{
	return ((unsigned)count_fds_on("/memfd:"));
}

/* infeedd refuses request @id with @code. */
static void
peer_error(uint64_t id, Infeed__ErrorCode code)
{
	Infeed__Frame	fr = INFEED__FRAME__INIT;
	Infeed__Error	e = INFEED__ERROR__INIT;

	e.code = code;
	e.message = (char *)"refused by the test";
	fr.msg_case = INFEED__FRAME__MSG_ERROR;
	fr.error = &e;
	peer_send(&fr, id);
}

/*
 * How many frames of @what the client sent that infeedd has not read; the
 * slot of the last Release among them in *@slot, and whether it came
 * before any Detach in *@first, when not NULL.
 */
static int
peer_count_release(Infeed__Frame__MsgCase what, uint32_t *slot,
    bool *first)
{
	struct pollfd	 pfd = { .fd = peer, .events = POLLIN };
	Infeed__Frame	*fr;
	char		*cause = NULL;
	bool		 detached = false;
	int		 n = 0;

	for (;;) {
		while (wire_in_frame(&peer_in, &fr, &cause) == WIRE_OK) {
			n += fr->msg_case == what;
			if (fr->msg_case == INFEED__FRAME__MSG_RELEASE &&
			    slot != NULL) {
				*slot = fr->release->slot;
				*first = !detached;
			}
			detached |= fr->msg_case == INFEED__FRAME__MSG_DETACH;
			infeed__frame__free_unpacked(fr, NULL);
		}
		ck_assert_ptr_null(cause);
		if (poll(&pfd, 1, 0) != 1 ||
		    wire_in_recv(&peer_in, peer) <= 0)
			return (n);
	}
}

/*
 * The steps_received of the next Detach the client sent (frames before it
 * skipped): -1 when it carries none, -2 when no Detach came.
 */
static int64_t
peer_detach_steps(void)
{
	struct pollfd	 pfd = { .fd = peer, .events = POLLIN };
	Infeed__Frame	*fr;
	char		*cause = NULL;
	int64_t		 n;

	for (;;) {
		while (wire_in_frame(&peer_in, &fr, &cause) == WIRE_OK) {
			if (fr->msg_case != INFEED__FRAME__MSG_DETACH) {
				infeed__frame__free_unpacked(fr, NULL);
				continue;
			}
			n = fr->detach->has_steps_received ?
			    (int64_t)fr->detach->steps_received : -1;
			infeed__frame__free_unpacked(fr, NULL);
			return (n);
		}
		ck_assert_ptr_null(cause);
		if (poll(&pfd, 1, 0) != 1 ||
		    wire_in_recv(&peer_in, peer) <= 0)
			return (-2);
	}
}

/* How many frames of @what the client sent that infeedd has not read. */
static int
peer_count(Infeed__Frame__MsgCase what)
{
	return (peer_count_release(what, NULL, NULL));
}

/* The client's next reply, expected to be a Step of @slot. */
static void
next_is_step(int timeout_ms, uint32_t slot)
{
	struct infeed_next_reply reply;

	ck_assert_msg(infeed_conn_next(f, &reply, timeout_ms) == INFEED_OK,
	    "%s", infeed_error(f));
	ck_assert(!reply.end_of_data);
	ck_assert_uint_eq(reply.slot, slot);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_NONE);
}

START_TEST(next_stays_pending_after_a_timeout_and_is_not_sent_again)
{
	struct infeed_next_reply reply;

	ck_assert_int_eq(f->conn.next, INFEED_NEXT_NONE);
	ck_assert_int_eq(infeed_conn_next(f, &reply, 0), INFEED_TIMEOUT);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_PENDING);
	ck_assert_int_eq(infeed_conn_next(f, &reply, 10), INFEED_TIMEOUT);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_PENDING);
	ck_assert_int_eq(peer_count(INFEED__FRAME__MSG_NEXT), 1);
	peer_step(INFEED_ID_NEXT, 2);
	next_is_step(-1, 2);
	ck_assert_int_eq(peer_count(INFEED__FRAME__MSG_NEXT), 0);
	/* Collected: the next call asks again. */
	ck_assert_int_eq(infeed_conn_next(f, &reply, 0), INFEED_TIMEOUT);
	ck_assert_int_eq(peer_count(INFEED__FRAME__MSG_NEXT), 1);
}
END_TEST

START_TEST(a_refused_release_is_reported_first_and_the_step_held_back)
{
	struct infeed_next_reply reply;

	ck_assert_int_eq(infeed_conn_release(f, 1), INFEED_OK);
	ck_assert_uint_eq(f->conn.releases_unanswered, 1);
	peer_error(INFEED_ID_RELEASE,
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	peer_step(INFEED_ID_NEXT, 0);
	ck_assert_int_eq(infeed_conn_next(f, &reply, -1), INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(f),
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_HELD);
	ck_assert_uint_eq(f->conn.held.slot, 0);
	ck_assert_uint_eq(f->conn.releases_unanswered, 0);
	/* The held step comes next, without another Next. */
	next_is_step(0, 0);
	ck_assert_int_eq(peer_count(INFEED__FRAME__MSG_NEXT), 1);
}
END_TEST

START_TEST(a_bounded_wait_reports_the_refusal_before_the_step_comes)
{
	struct infeed_next_reply reply;

	ck_assert_int_eq(infeed_conn_release(f, 1), INFEED_OK);
	peer_error(INFEED_ID_RELEASE,
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(infeed_conn_next(f, &reply, 1000),
	    INFEED_ERR_DAEMON);
	/* Its reply not read yet: still pending, nothing held. */
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_PENDING);
	peer_step(INFEED_ID_NEXT, 1);
	next_is_step(1000, 1);
	ck_assert_int_eq(peer_count(INFEED__FRAME__MSG_NEXT), 1);
}
END_TEST

/*
 * To a daemon that said quiet_release, a Release is quiet and waits for
 * no answer (the Step is taken straight); its refusal is still reported
 * first.  To one that did not, it is not quiet (an older daemon would
 * answer it).
 */
START_TEST(a_quiet_release_waits_for_no_answer_but_its_refusal)
{
	struct infeed_next_reply reply;
	Infeed__Frame	*fr;
	char		*cause = NULL;

	ck_assert_int_eq(infeed_conn_release(f, 0), INFEED_OK);
	ck_assert_uint_eq(f->conn.releases_unanswered, 1);
	ck_assert_int_gt(wire_in_recv(&peer_in, peer), 0);
	ck_assert_int_eq(wire_in_frame(&peer_in, &fr, &cause), WIRE_OK);
	ck_assert_int_eq(fr->msg_case, INFEED__FRAME__MSG_RELEASE);
	ck_assert(!fr->release->has_quiet);
	infeed__frame__free_unpacked(fr, NULL);
	f->conn.releases_unanswered = 0;

	f->conn.quiet_release = true;	/* as Attached said */
	ck_assert_int_eq(infeed_conn_release(f, 1), INFEED_OK);
	ck_assert_uint_eq(f->conn.releases_unanswered, 0);
	ck_assert_int_gt(wire_in_recv(&peer_in, peer), 0);
	ck_assert_int_eq(wire_in_frame(&peer_in, &fr, &cause), WIRE_OK);
	ck_assert_int_eq(fr->msg_case, INFEED__FRAME__MSG_RELEASE);
	ck_assert(fr->release->has_quiet && fr->release->quiet);
	infeed__frame__free_unpacked(fr, NULL);
	peer_step(INFEED_ID_NEXT, 2);
	next_is_step(-1, 2);

	ck_assert_int_eq(infeed_conn_release(f, 2), INFEED_OK);
	peer_error(INFEED_ID_RELEASE,
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	peer_step(INFEED_ID_NEXT, 0);
	ck_assert_int_eq(infeed_conn_next(f, &reply, -1), INFEED_ERR_DAEMON);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_HELD);
	next_is_step(0, 0);
}
END_TEST

START_TEST(acknowledged_releases_are_taken_on_the_way)
{
	Infeed__Frame	fr = INFEED__FRAME__INIT;
	Infeed__Released rl = INFEED__RELEASED__INIT;

	ck_assert_int_eq(infeed_conn_release(f, 0), INFEED_OK);
	ck_assert_int_eq(infeed_conn_release(f, 1), INFEED_OK);
	ck_assert_uint_eq(f->conn.releases_unanswered, 2);
	fr.msg_case = INFEED__FRAME__MSG_RELEASED;
	fr.released = &rl;
	peer_send(&fr, INFEED_ID_RELEASE);
	peer_step(INFEED_ID_NEXT, 2);
	/* After the step: pipelined. */
	peer_send(&fr, INFEED_ID_RELEASE);
	next_is_step(-1, 2);
	ck_assert_uint_eq(f->conn.releases_unanswered, 1);
}
END_TEST

START_TEST(an_error_reply_or_a_closed_connection_ends_the_next)
{
	struct infeed_next_reply reply;

	peer_error(INFEED_ID_NEXT, INFEED__ERROR_CODE__ERROR_NOT_FOUND);
	ck_assert_int_eq(infeed_conn_next(f, &reply, -1), INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(f),
	    INFEED__ERROR_CODE__ERROR_NOT_FOUND);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_NONE);
	close(peer);
	peer = -1;
	ck_assert_int_eq(infeed_conn_next(f, &reply, -1), INFEED_ERR_CLOSED);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_NONE);
}
END_TEST

START_TEST(a_call_that_ends_the_session_drops_a_held_step)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, dfr = INFEED__FRAME__INIT;
	Infeed__Frame	*reply;
	struct infeed_next_reply step;
	Infeed__Detach	 dt = INFEED__DETACH__INIT;
	Infeed__Detached dd = INFEED__DETACHED__INIT;
	uint32_t	 slot = 9;
	bool		 first = false;

	ck_assert_int_eq(infeed_conn_release(f, 1), INFEED_OK);
	peer_error(INFEED_ID_RELEASE,
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	peer_step(INFEED_ID_NEXT, 0);
	ck_assert_int_eq(infeed_conn_next(f, &step, -1), INFEED_ERR_DAEMON);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_HELD);
	/* Held, so no reply of the Next is read in place of Detached. */
	dfr.msg_case = INFEED__FRAME__MSG_DETACHED;
	dfr.detached = &dd;
	peer_send(&dfr, INFEED_ID_CALL);
	fr.msg_case = INFEED__FRAME__MSG_DETACH;
	fr.detach = &dt;
	ck_assert_msg(infeed_conn_call_after_next(f, &fr,
	    INFEED__FRAME__MSG_DETACHED, &reply) == INFEED_OK, "%s",
	    infeed_error(f));
	infeed__frame__free_unpacked(reply, NULL);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_NONE);
	/* Its step given back before the Detach (and the refused one). */
	ck_assert_int_eq(peer_count_release(INFEED__FRAME__MSG_RELEASE, &slot,
	    &first), 2);
	ck_assert_uint_eq(slot, 0);
	ck_assert(first);
	/* Pending instead: its reply, come already, is given back too. */
	ck_assert_int_eq(infeed_conn_next(f, &step, 0), INFEED_TIMEOUT);
	peer_step(INFEED_ID_NEXT, 1);
	peer_send(&dfr, INFEED_ID_CALL);
	ck_assert_msg(infeed_conn_call_after_next(f, &fr,
	    INFEED__FRAME__MSG_DETACHED, &reply) == INFEED_OK, "%s",
	    infeed_error(f));
	infeed__frame__free_unpacked(reply, NULL);
	ck_assert_int_eq(f->conn.next, INFEED_NEXT_NONE);
	ck_assert_int_eq(peer_count_release(INFEED__FRAME__MSG_RELEASE, &slot,
	    &first), 1);
	ck_assert_uint_eq(slot, 1);
	ck_assert(first);
}
END_TEST

static void	peer_attached(bool elastic);

/*
 * Issue 39, item 7: a Step that brought a new ring, come for a Next that
 * timed out, when the session ends: its slot is released, its descriptor
 * closed, and the next Attached maps its own ring, not that one.
 */
START_TEST(a_forgotten_steps_ring_is_closed_never_mapped)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *reply;
	struct infeed_next_reply step;
	Infeed__Detach	 dt = INFEED__DETACH__INIT;
	Infeed__Detached dd = INFEED__DETACHED__INIT;
	struct infeed_options o;
	uint32_t	 slot = 0;
	bool		 first = false;
	int		 stale;

	ck_assert_int_eq(infeed_conn_next(f, &step, 0), INFEED_TIMEOUT);
	stale = ring_memfd(0xee);
	peer_step_fd(INFEED_ID_NEXT, 5, stale);
	close(stale);
	ck_assert_uint_eq(memfds_open(), 0);	/* in flight */
	fr.msg_case = INFEED__FRAME__MSG_DETACHED;
	fr.detached = &dd;
	peer_send(&fr, INFEED_ID_CALL);
	fr = (Infeed__Frame)INFEED__FRAME__INIT;
	fr.msg_case = INFEED__FRAME__MSG_DETACH;
	fr.detach = &dt;
	ck_assert_msg(infeed_conn_call_after_next(f, &fr,
	    INFEED__FRAME__MSG_DETACHED, &reply) == INFEED_OK, "%s",
	    infeed_error(f));
	infeed__frame__free_unpacked(reply, NULL);
	ck_assert_uint_eq(memfds_open(), 0);
	ck_assert_int_eq(peer_count_release(INFEED__FRAME__MSG_RELEASE, &slot,
	    &first), 1);
	ck_assert_uint_eq(slot, 5);
	ck_assert(first);
	/* The next session's ring is the one its Attached brought. */
	infeed_options_init(&o);
	peer_attached(true);
	ck_assert_msg(infeed_attach(f, "raw", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_uint_eq(f->ring.base[0], 0);
	ck_assert_uint_eq(memfds_open(), 0);
}
END_TEST

/* infeedd answers a Detach. */
static void
peer_detached(void)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT;
	Infeed__Detached dd = INFEED__DETACHED__INIT;

	fr.msg_case = INFEED__FRAME__MSG_DETACHED;
	fr.detached = &dd;
	peer_send(&fr, INFEED_ID_CALL);
}

/*
 * infeedd answers the Attach with an Attached of a one-slot ring (a memfd
 * it passes along) and, when @elastic, start_epoch_steps (an older daemon
 * sends none), of shared group @group_id (0: none); then, when @detached,
 * the Detached of a Detach, if one comes.
 */
static void
peer_attached_group(bool elastic, uint64_t group_id, bool detached)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT;
	Infeed__Attached at = INFEED__ATTACHED__INIT;
	uint8_t		*buf;
	size_t		 len;
	int		 fd;

	ck_assert_int_ne(fd = memfd_create("ring", MFD_CLOEXEC), -1);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	at.session_id = 9;
	at.slots = 1;
	at.ring_bytes = at.slot_bytes = 4096;
	at.combined_batch_size = 10;
	at.steps_per_epoch = 25;
	at.last_step_rows = 10;
	at.has_start_epoch_steps = at.has_start_epoch_last_step_rows = elastic;
	at.start_epoch_steps = 20;
	at.start_epoch_last_step_rows = 4;
	at.has_group_id = group_id != 0;
	at.group_id = group_id;
	fr.msg_case = INFEED__FRAME__MSG_ATTACHED;
	fr.attached = &at;
	fr.has_request_id = 1;
	fr.request_id = INFEED_ID_CALL;
	ck_assert_ptr_nonnull(buf = wire_pack(&fr, INFEED_DEFAULT_MAX_FRAME,
	    &len));
	ck_assert_int_eq(wire_send_all(peer, buf, len, fd), 0);
	free(buf);
	close(fd);
	if (detached)
		peer_detached();
}

/* An Attached of no group, then a Detached (see peer_attached_group). */
static void
peer_attached(bool elastic)
{
	peer_attached_group(elastic, 0, true);
}

/*
 * Issue 34, item 4: infeed_state says the session's group and whether the
 * ring it reads is its own, and from which slot number, so a binding
 * decodes no slot number: a member's ring moves to its own when a Step
 * brings one (it left the group) and back when the next brings the
 * group's (it rejoined).
 */
START_TEST(state_follows_the_group_and_the_ring_it_reads)
{
	struct infeed_options	o;
	struct infeed_state	st;
	struct infeed_step	step;
	int			fd;

	infeed_options_init(&o);
	peer_attached_group(true, 7, false);
	ck_assert_msg(infeed_attach(f, "raw", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_int_eq(infeed_get_state(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.group_id, 7);
	ck_assert(!st.own_ring);
	ck_assert_uint_eq(st.first_slot, 0);
	/* It left its group: its own ring, numbered from slot 1. */
	peer_step_fd(INFEED_ID_NEXT, 1, fd = ring_memfd(0));
	close(fd);
	ck_assert_msg(infeed_next(f, &step) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_int_eq(infeed_get_state(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.group_id, 7);
	ck_assert(st.own_ring);
	ck_assert_uint_eq(st.first_slot, 1);
	ck_assert_uint_eq(st.slots_held, 1);
	/* It rejoined: the group's ring again. */
	ck_assert_int_eq(infeed_release(f, &step), INFEED_OK);
	peer_step_fd(INFEED_ID_NEXT, 0, fd = ring_memfd(0));
	close(fd);
	ck_assert_msg(infeed_next(f, &step) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_int_eq(infeed_get_state(f, &st), INFEED_OK);
	ck_assert(!st.own_ring);
	ck_assert_uint_eq(st.first_slot, 0);
	ck_assert_int_eq(infeed_release(f, &step), INFEED_OK);
	peer_detached();
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	/* The Detach says the two Steps read (a third would be released). */
	ck_assert_int_eq(peer_detach_steps(), 2);
	/* Detached: no group, no ring. */
	ck_assert_int_eq(infeed_get_state(f, &st), INFEED_OK);
	ck_assert(!st.attached && !st.own_ring);
	ck_assert_uint_eq(st.group_id, 0);
	/* A session of no group reads its own ring. */
	peer_attached_group(true, 0, false);
	ck_assert_msg(infeed_attach(f, "raw", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_int_eq(infeed_get_state(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.group_id, 0);
	ck_assert(st.own_ring);
}
END_TEST

/*
 * Elastic resume and an older daemon: its Attached has no
 * start_epoch_steps, so it ignored the stages; the library detaches and
 * says why.  Without stages the same daemon is fine, and its epoch's steps
 * stand for start_epoch's.
 */
START_TEST(stages_to_a_daemon_that_ignores_them_are_refused)
{
	struct infeed_options		o;
	struct infeed_session_info	info;

	infeed_options_init(&o);
	o.nstart_epoch_stages = 1;
	o.start_epoch_stages[0].process_count = 4;
	o.start_epoch_stages[0].combined_batch_size = 10;
	o.start_epoch_stages[0].steps_done = 7;
	peer_attached(false);
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "start_epoch_stages"));
	ck_assert(!f->attached);
	ck_assert_int_eq(peer_count(INFEED__FRAME__MSG_DETACH), 1);
	/* A daemon that knows them: start_epoch's own steps. */
	peer_attached(true);
	ck_assert_msg(infeed_attach(f, "raw", &o, &info) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_uint_eq(info.start_epoch_steps, 20);
	ck_assert_uint_eq(info.start_epoch_last_step_rows, 4);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	/* No stages, an older daemon: start_epoch is an ordinary epoch. */
	o.nstart_epoch_stages = 0;
	peer_attached(false);
	ck_assert_msg(infeed_attach(f, "raw", &o, &info) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_uint_eq(info.start_epoch_steps, 25);
	ck_assert_uint_eq(info.start_epoch_last_step_rows, 10);
}
END_TEST

START_TEST(state_reports_the_pending_next_in_any_callers_size)
{
	struct infeed_next_reply reply;
	struct infeed_state	 st;
	uint8_t			 buf[sizeof(st) + 8];
	/* Older callers': one cut inside 1.5's, and 1.9's (before 1.10's
	   group and ring). */
	const size_t		 cuts[] = {
		FIELD_END(struct infeed_state, session_id),
		FIELD_END(struct infeed_state, slots),
	};
	size_t			 i;

	ck_assert_int_eq(infeed_get_state(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.struct_size, sizeof(st));
	ck_assert(!st.attached && !st.next_pending && !st.end_of_data_owed);
	ck_assert_uint_eq(st.slots, 0);
	ck_assert_int_eq(infeed_conn_next(f, &reply, 0), INFEED_TIMEOUT);
	ck_assert_int_eq(infeed_get_state(f, &st), INFEED_OK);
	ck_assert(st.next_pending);
	/* An older caller's struct: filled up to its size, no further. */
	for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		memset(buf, 0xa5, sizeof(buf));
		ck_assert_int_eq(infeed_get_state_size(f, (struct infeed_state *)
		    (void *)buf, cuts[i]), INFEED_OK);
		ck_assert_uint_eq(((struct infeed_state *)(void *)buf)->
		    struct_size, cuts[i]);
		ck_assert_uint_eq(buf[cuts[i]], 0xa5);
	}
	/* A newer caller's: the bytes past ours zeroed. */
	ck_assert_int_eq(infeed_get_state_size(f, (struct infeed_state *)
	    (void *)buf, sizeof(buf)), INFEED_OK);
	ck_assert_uint_eq(buf[sizeof(buf) - 1], 0);
	ck_assert_int_eq(infeed_get_state_size(f, &st, 2), INFEED_ERR_USAGE);
}
END_TEST

/* One case: the connection's reply state. */
static Suite *
libinfeed_conn_suite(void)
{
	Suite	*s = suite_create("libinfeed-conn");
	TCase	*tc = tcase_create("reply state");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc,
	    next_stays_pending_after_a_timeout_and_is_not_sent_again);
	tcase_add_test(tc,
	    a_refused_release_is_reported_first_and_the_step_held_back);
	tcase_add_test(tc, stages_to_a_daemon_that_ignores_them_are_refused);
	tcase_add_test(tc,
	    a_bounded_wait_reports_the_refusal_before_the_step_comes);
	tcase_add_test(tc, acknowledged_releases_are_taken_on_the_way);
	tcase_add_test(tc, a_quiet_release_waits_for_no_answer_but_its_refusal);
	tcase_add_test(tc, an_error_reply_or_a_closed_connection_ends_the_next);
	tcase_add_test(tc, a_call_that_ends_the_session_drops_a_held_step);
	tcase_add_test(tc, a_forgotten_steps_ring_is_closed_never_mapped);
	tcase_add_test(tc, state_reports_the_pending_next_in_any_callers_size);
	tcase_add_test(tc, state_follows_the_group_and_the_ring_it_reads);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(libinfeed_conn_suite()));
}
