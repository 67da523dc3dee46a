/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the two state machines of a session's stream: a reader's
 * (daemon/consumer.c: alone, member, left, rejoined, ended) and a
 * producer's (daemon/producer.c: idle, filling, epoch end, failed).  Every
 * move each one's transition function allows goes through, and every
 * other is fatal with a message naming both states (run in a forked child
 * that reads what it said on its way out); whether a reader takes its
 * group's steps, or is out of its group, follows its state alone.  A
 * reader's queue of Next requests, without a stream (an ended member's,
 * which answers every Next with why): the 65th waiting Next is refused,
 * the queued ones are answered in order by consumer_cancel(), each
 * counted in the wait histogram.
 */

#include <sys/wait.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "consumer.h"
#include "log.h"
#include "producer.h"
#include "runner.h"

static const char *const consumer_names[] = {
	"ALONE", "MEMBER", "LEFT", "REJOINED", "ENDED",
};
static const char *const producer_names[] = {
	"IDLE", "FILLING", "EPOCH_END", "FAILED",
};

/* What the events heard. */
static uint64_t	errors_heard[CONSUMER_MAX_WAITING + 1];
static size_t	nerrors_heard;

static void
no_step(void *arg, struct session_req req, const struct session_step *st)
{
	(void)arg, (void)req, (void)st;
	ck_abort_msg("a step without a stream");
}

static void
no_end(void *arg, struct session_req req, uint64_t epoch)
{
	(void)arg, (void)req, (void)epoch;
	ck_abort_msg("an EndOfData without a stream");
}

static void
heard_error(void *arg, struct session_req req, enum errcode code,
    const char *message)
{
	(void)arg;
	ck_assert_int_eq(code, ERRCODE_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(message, "ended");
	errors_heard[nerrors_heard++] = req.id;
}

static const struct session_events events = {
	.step = no_step,
	.end_of_data = no_end,
	.error = heard_error,
};

/* A reader brought to @st by allowed moves only. */
static void
consumer_reach(struct consumer *c, enum consumer_state st)
{
	consumer_init(c, &events, NULL, 0, 0, false);
	c->id = 7;
	if (st == CONSUMER_ALONE)
		return;
	consumer_set_state(c, CONSUMER_MEMBER);
	if (st == CONSUMER_ENDED)
		consumer_set_state(c, CONSUMER_ENDED);
	if (st == CONSUMER_LEFT || st == CONSUMER_REJOINED)
		consumer_set_state(c, CONSUMER_LEFT);
	if (st == CONSUMER_REJOINED)
		consumer_set_state(c, CONSUMER_REJOINED);
	ck_assert_int_eq(c->state, st);
}

/* A producer's state brought to @st by allowed moves only. */
static enum producer_state
producer_reach(enum producer_state st)
{
	enum producer_state	s = PRODUCER_IDLE;

	if (st == PRODUCER_FAILED)
		producer_state_move(&s, PRODUCER_FAILED, 7);
	if (st == PRODUCER_FILLING || st == PRODUCER_EPOCH_END)
		producer_state_move(&s, PRODUCER_FILLING, 7);
	if (st == PRODUCER_EPOCH_END)
		producer_state_move(&s, PRODUCER_EPOCH_END, 7);
	ck_assert_int_eq(s, st);
	return (s);
}

/* In the child: reader move @from -> @to (@arg = from << 4 | to). */
static void
child_consumer(void *p, int arg)
{
	struct consumer	c;

	(void)p;
	consumer_reach(&c, (enum consumer_state)(arg >> 4));
	log_init("test-stream", 0);
	consumer_set_state(&c, (enum consumer_state)(arg & 15));
}

/* In the child: producer move @from -> @to. */
static void
child_producer(void *p, int arg)
{
	enum producer_state	s = producer_reach(
				    (enum producer_state)(arg >> 4));

	(void)p;
	log_init("test-stream", 0);
	producer_state_move(&s, (enum producer_state)(arg & 15), 7);
}

/*
 * Every move between the @n states named @names, run by @child in a child
 * (@from << 4 | @to): those @allowed (@n x @n) go through, the others are
 * fatal and say so ("session 7: @what FROM to TO").
 */
static void
check_moves(const char *const *names, int n, const int *allowed,
    void (*child)(void *, int), const char *what)
{
	char	err[4096], want[96];
	int	from, to, status;

	for (from = 0; from < n; from++) {
		for (to = 0; to < n; to++) {
			status = run_in_child(child, NULL, from << 4 | to, err,
			    sizeof(err));
			if (allowed[from * n + to]) {
				ck_assert_msg(WIFEXITED(status) &&
				    WEXITSTATUS(status) == 0, "%s -> %s "
				    "refused: %s", names[from], names[to], err);
				continue;
			}
			ck_assert_msg(WIFEXITED(status) &&
			    WEXITSTATUS(status) != 0, "%s -> %s was allowed",
			    names[from], names[to]);
			snprintf(want, sizeof(want), "session 7: %s %d to %d",
			    what, from, to);
			ck_assert_msg(strstr(err, want) != NULL,
			    "%s -> %s: said '%s'", names[from], names[to], err);
		}
	}
}

START_TEST(test_reader_moves_only_as_allowed)
{
	static const int allowed[5][5] = {
		[CONSUMER_ALONE][CONSUMER_MEMBER] = 1,
		[CONSUMER_MEMBER][CONSUMER_LEFT] = 1,
		[CONSUMER_MEMBER][CONSUMER_ENDED] = 1,
		[CONSUMER_LEFT][CONSUMER_REJOINED] = 1,
		[CONSUMER_REJOINED][CONSUMER_MEMBER] = 1,
	};

	check_moves(consumer_names, 5, &allowed[0][0], child_consumer,
	    "no reader transition from");
}
END_TEST

START_TEST(test_producer_moves_only_as_allowed)
{
	static const int allowed[4][4] = {
		[PRODUCER_IDLE][PRODUCER_FILLING] = 1,
		[PRODUCER_FILLING][PRODUCER_EPOCH_END] = 1,
		[PRODUCER_EPOCH_END][PRODUCER_IDLE] = 1,
		[PRODUCER_IDLE][PRODUCER_FAILED] = 1,
		[PRODUCER_FILLING][PRODUCER_FAILED] = 1,
		[PRODUCER_EPOCH_END][PRODUCER_FAILED] = 1,
	};

	check_moves(producer_names, 4, &allowed[0][0], child_producer,
	    "no transition from state");
}
END_TEST

START_TEST(test_in_group_and_left_follow_the_state)
{
	struct consumer	c;
	int		st;

	for (st = CONSUMER_ALONE; st <= CONSUMER_ENDED; st++) {
		consumer_reach(&c, (enum consumer_state)st);
		ck_assert_msg(consumer_in_group(&c) ==
		    (st == CONSUMER_MEMBER || st == CONSUMER_REJOINED), "%s",
		    consumer_names[st]);
		ck_assert_msg(consumer_left(&c) ==
		    (st == CONSUMER_LEFT || st == CONSUMER_ENDED), "%s",
		    consumer_names[st]);
		consumer_clear(&c);
	}
}
END_TEST

START_TEST(test_queue_bounded_and_cancelled_in_order)
{
	struct session_req	req = { 0, true };
	struct consumer		c;
	enum errcode		code;
	uint64_t		counted = 0;
	char			*cause = NULL;
	unsigned		i;

	consumer_reach(&c, CONSUMER_ENDED);
	nerrors_heard = 0;
	for (i = 0; i < CONSUMER_MAX_WAITING; i++) {
		req.id = 100 + i;
		ck_assert_int_eq(consumer_queue(&c, req, &code, &cause), 0);
	}
	req.id = 999;
	ck_assert_int_eq(consumer_queue(&c, req, &code, &cause), -1);
	ck_assert_int_eq(code, ERRCODE_UNEXPECTED);
	ck_assert_msg(strstr(cause, "64 Next requests already wait") !=
	    NULL, "said '%s'", cause);
	free(cause);
	ck_assert_uint_eq(c.nwaiting, CONSUMER_MAX_WAITING);
	ck_assert_uint_ne(c.first_next_ms, 0);

	consumer_cancel(&c, ERRCODE_RESOURCE_EXHAUSTED, "ended");
	ck_assert_uint_eq(c.nwaiting, 0);
	ck_assert_uint_eq(nerrors_heard, CONSUMER_MAX_WAITING);
	for (i = 0; i < CONSUMER_MAX_WAITING; i++)
		ck_assert_uint_eq(errors_heard[i], 100 + i);
	for (i = 0; i < CONSUMER_WAIT_BUCKETS; i++)
		counted += c.wait_counts[i];
	ck_assert_uint_eq(counted, CONSUMER_MAX_WAITING);
	consumer_clear(&c);
}
END_TEST

static Suite *
stream_suite(void)
{
	Suite	*s = suite_create("stream");
	TCase	*tc;

	tc = tcase_create("states");
	tcase_add_test(tc, test_reader_moves_only_as_allowed);
	tcase_add_test(tc, test_producer_moves_only_as_allowed);
	tcase_add_test(tc, test_in_group_and_left_follow_the_state);
	suite_add_tcase(s, tc);

	tc = tcase_create("queue");
	tcase_add_test(tc, test_queue_bounded_and_cancelled_in_order);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	log_init("test-stream", -1);
	return (run_suite(stream_suite()));
}
