/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/metrics.c: a stats snapshot made in the test
 * rendered as Prometheus' text exposition (metrics_render): the daemon's
 * gauges, every live session's and every ended dataset's series with
 * their labels escaped, the cumulative wait histogram, ring slots,
 * workers, and errors by the protocol's names (errcode.h's against
 * infeed.proto's); and the HTTP server on an in-process event base, asked
 * over a socket: GET /metrics answered with the daemon's snapshot and the
 * exposition's content type, another path 404, another method 501.
 */

#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <event2/buffer.h>

#include "log.h"
#include "metrics.h"
#include "peers.h"
#include "stats.h"
#include "unit-daemon.h"
#include "wire.h"
#include "runner.h"

#define DEADLINE_MS	10000

static char	rundir[PATH_MAX];	/* made by main() */
static char	tmpdir[PATH_MAX];	/* made per server test */
static char	*text;			/* what the last render gave */

/* Render @st into text. */
static void
render(const struct stats *st)
{
	struct evbuffer	*b;
	size_t		 len;

	free(text);
	ck_assert_ptr_nonnull(b = evbuffer_new());
	metrics_render(b, st);
	len = evbuffer_get_length(b);
	ck_assert_ptr_nonnull(text = calloc(1, len + 1));
	ck_assert_int_eq(evbuffer_remove(b, text, len), (int)len);
	evbuffer_free(b);
}

/* The text holds @line as a whole line. */
static void
has_line(const char *line)
{
	const char	*p;
	size_t		 n = strlen(line);

	for (p = text; (p = strstr(p, line)) != NULL; p++) {
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return;
	}
	ck_abort_msg("no line '%s' in:\n%s", line, text);
}

/* How many lines begin with @prefix. */
static unsigned
count_lines(const char *prefix)
{
	const char	*p;
	unsigned	 n = 0;

	for (p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'),
	    p = p ? p + 1 : NULL)
		n += strncmp(p, prefix, strlen(prefix)) == 0;
	return (n);
}

START_TEST(snapshot_rendered_as_the_exposition_text)
{
	struct session_options	o;
	struct stats_history	h;
	struct stats_session	ss[1];
	struct pool_worker_info	w[3];	/* the third: a spare, below */
	struct stats		st;

	memset(&o, 0, sizeof(o));
	memset(&h, 0, sizeof(h));
	memset(ss, 0, sizeof(ss));
	memset(w, 0, sizeof(w));
	memset(&st, 0, sizeof(st));
	ss[0].report.id = 42;
	ss[0].report.dataset = "mnist";
	ss[0].report.options = &o;
	ss[0].report.steps = 7;
	ss[0].report.rows = 700;
	ss[0].report.bytes_read = 5488;
	ss[0].report.samples_replaced = 1;
	ss[0].report.data_wait_us = 250000;
	ss[0].report.active_us = 2000000;
	ss[0].report.wait_counts[0] = 5;	/* <= 1 ms */
	ss[0].report.wait_counts[4] = 1;	/* <= 100 ms */
	ss[0].report.wait_counts[8] = 1;	/* > 5 s */
	ss[0].report.slots_ready = 1;
	ss[0].report.slots_held = 2;
	ss[0].report.slots = 3;
	ss[0].report.group_id = 9;
	ss[0].report.group_members = 4;
	ss[0].report.group_steps_filled = 11;
	ss[0].report.group_leaves[SESSION_LEAVE_HELD_BACK] = 3;
	ss[0].report.group_leaves[SESSION_LEAVE_WAITED] = 2;
	ss[0].report.group_stays = 1;
	ss[0].report.group_rejoins = 4;
	ss[0].client_name = "job \"a\"\n\\x";
	h.ended = calloc(1, sizeof(*h.ended));
	ck_assert_ptr_nonnull(h.ended);
	h.nended = 1;
	h.ended[0].dataset = (char *)(uintptr_t)"(files)";
	h.ended[0].sessions = 2;
	h.ended[0].steps = 3;
	h.ended[0].rows = 30;
	h.ended[0].data_wait_us = 1500000;
	h.ended[0].wait_counts[1] = 3;
	h.errors[ERRCODE_NOT_FOUND] = 4;
	h.errors[ERRCODE_DATA] = 1;
	w[0].pid = 100;
	w[0].busy_s = 1.5;
	w[0].rows_done = 300;
	w[1].pid = -1;
	w[1].restarts = 2;
	w[1].stuck = 1;
	w[1].taken_over = 3;
	st.uptime_ms = 61500;
	st.clients = 2;
	st.sessions = ss;
	st.nsessions = 1;
	st.workers = w;
	st.nworkers = 2;
	st.jobs_queued = 5;
	st.rows_reissued = 8;
	st.memory_used = 4096;
	st.memory_kept = 1024;
	st.memory_held = 512;
	st.memory_budget = 1 << 20;
	st.memory_private = 777;
	st.rings_reused = 1;
	st.rings_made = 3;
	st.fork_server_pid = 4321;
	st.fork_server_restarts = 2;
	st.cache_bytes = 3 << 20;
	st.cache_misses = 4;
	st.cache_evictions = 1;
	st.cache_fetched_ahead = 5;
	st.cache_waited = 6;
	st.history = &h;
	render(&st);

	has_line("# HELP infeed_clients Connected clients.");
	has_line("# TYPE infeed_clients gauge");
	has_line("infeed_clients 2");
	has_line("infeed_sessions 1");
	has_line("infeed_memory_used_bytes 4096");
	has_line("infeed_memory_kept_bytes 1024");
	has_line("infeed_memory_held_bytes 512");
	has_line("infeed_rings_reused_total 1");
	has_line("infeed_rings_made_total 3");
	has_line("infeed_memory_private_bytes 777");
	has_line("infeed_memory_budget_bytes 1048576");
	has_line("# TYPE infeed_cache_misses_total counter");
	has_line("infeed_cache_bytes 3145728");
	has_line("infeed_cache_misses_total 4");
	has_line("infeed_cache_evictions_total 1");
	has_line("infeed_cache_hits_total 0");
	has_line("# TYPE infeed_cache_fetched_ahead_total counter");
	has_line("infeed_cache_fetched_ahead_total 5");
	has_line("infeed_cache_waited_total 6");
	has_line("infeed_uptime_seconds 61.500");
	has_line("infeed_rows_reissued_total 8");
	has_line("infeed_jobs_queued 5");
	has_line("infeed_fork_server_restarts_total 2");
	has_line("infeed_fork_server_up 1");
	/* A fixed pool: its max is its size, and it never resizes. */
	has_line("infeed_workers 2");
	has_line("infeed_workers_max 2");
	has_line("infeed_pool_resizes_total{direction=\"grow\","
	    "reason=\"trainers_waiting\"} 0");
	has_line("infeed_pool_resizes_total{direction=\"shrink\","
	    "reason=\"workers_idle\"} 0");
	has_line("infeed_workers_spare 0");
	/* A spare up: a worker process, not one of the pool's (issue 36). */
	st.nworkers = 3;
	st.spares = 1;
	st.spares_started = 2;
	render(&st);
	has_line("infeed_workers 3");
	has_line("infeed_workers_max 2");
	has_line("infeed_workers_spare 1");
	has_line("infeed_pool_spares_started_total{reason="
	    "\"workers_blocked_in_storage\"} 2");
	st.nworkers = 2;
	st.spares = 0;
	/* workers = auto: its bound and its resizes, by direction and why. */
	st.workers_auto = true;
	st.autotune.max = 4;
	st.autotune.grows = 3;
	st.autotune.shrinks = 1;
	render(&st);
	has_line("infeed_workers_max 4");
	has_line("infeed_pool_resizes_total{direction=\"grow\","
	    "reason=\"trainers_waiting\"} 3");
	has_line("infeed_pool_resizes_total{direction=\"shrink\","
	    "reason=\"workers_idle\"} 1");
	/* Past the CPUs for storage, and given back (issue 36, item 3). */
	st.autotune.grows = 9;
	st.autotune.grows_storage = 6;
	st.autotune.shrinks = 4;
	st.autotune.shrinks_cpu = 1;
	render(&st);
	has_line("infeed_pool_resizes_total{direction=\"grow\","
	    "reason=\"trainers_waiting\"} 3");
	has_line("infeed_pool_resizes_total{direction=\"grow\","
	    "reason=\"workers_waiting_for_storage\"} 6");
	has_line("infeed_pool_resizes_total{direction=\"shrink\","
	    "reason=\"workers_idle\"} 3");
	has_line("infeed_pool_resizes_total{direction=\"shrink\","
	    "reason=\"workers_waiting_for_cpu\"} 1");
	/* Every code but the unspecified one, by its name in infeed.proto. */
	has_line("infeed_errors_total{code=\"ERROR_NOT_FOUND\"} 4");
	has_line("infeed_errors_total{code=\"ERROR_DATA\"} 1");
	has_line("infeed_errors_total{code=\"ERROR_VERSION_MISMATCH\"} 0");
	has_line("infeed_errors_total{code=\"ERROR_INTERNAL\"} 0");
	ck_assert_uint_eq(count_lines("infeed_errors_total{"), 9);

	/* A live session, its client's name escaped; then the ended. */
	has_line("# TYPE infeed_steps_delivered_total counter");
	has_line("infeed_steps_delivered_total{dataset=\"mnist\",client=\"job "
	    "\\\"a\\\"\\n\\\\x\",session=\"42\"} 7");
	has_line("infeed_steps_delivered_total{dataset=\"(files)\",client=\"\","
	    "session=\"ended\"} 3");
	has_line("infeed_items_delivered_total{dataset=\"(files)\",client=\"\","
	    "session=\"ended\"} 30");
	has_line("infeed_read_bytes_total{dataset=\"mnist\",client=\"job "
	    "\\\"a\\\"\\n\\\\x\",session=\"42\"} 5488");
	has_line("infeed_samples_replaced_total{dataset=\"mnist\",client=\"job "
	    "\\\"a\\\"\\n\\\\x\",session=\"42\"} 1");
	has_line("infeed_data_wait_seconds_total{dataset=\"(files)\","
	    "client=\"\",session=\"ended\"} 1.5");
	has_line("infeed_active_seconds_total{dataset=\"mnist\",client=\"job "
	    "\\\"a\\\"\\n\\\\x\",session=\"42\"} 2");

	/* The histogram: cumulative buckets, then the sum and the count. */
	has_line("# TYPE infeed_next_wait_seconds histogram");
	has_line("infeed_next_wait_seconds_bucket{dataset=\"mnist\",client="
	    "\"job \\\"a\\\"\\n\\\\x\",session=\"42\",le=\"0.001\"} 5");
	has_line("infeed_next_wait_seconds_bucket{dataset=\"mnist\",client="
	    "\"job \\\"a\\\"\\n\\\\x\",session=\"42\",le=\"0.05\"} 5");
	has_line("infeed_next_wait_seconds_bucket{dataset=\"mnist\",client="
	    "\"job \\\"a\\\"\\n\\\\x\",session=\"42\",le=\"0.1\"} 6");
	has_line("infeed_next_wait_seconds_bucket{dataset=\"mnist\",client="
	    "\"job \\\"a\\\"\\n\\\\x\",session=\"42\",le=\"5\"} 6");
	has_line("infeed_next_wait_seconds_bucket{dataset=\"mnist\",client="
	    "\"job \\\"a\\\"\\n\\\\x\",session=\"42\",le=\"+Inf\"} 7");
	has_line("infeed_next_wait_seconds_sum{dataset=\"mnist\",client="
	    "\"job \\\"a\\\"\\n\\\\x\",session=\"42\"} 0.25");
	has_line("infeed_next_wait_seconds_count{dataset=\"mnist\",client="
	    "\"job \\\"a\\\"\\n\\\\x\",session=\"42\"} 7");
	has_line("infeed_next_wait_seconds_bucket{dataset=\"(files)\",client="
	    "\"\",session=\"ended\",le=\"0.005\"} 3");
	ck_assert_uint_eq(count_lines("infeed_next_wait_seconds_bucket{"),
	    2 * SESSION_WAIT_BUCKETS);

	/* Ring slots of live sessions only; workers by index. */
	has_line("infeed_ring_slots{dataset=\"mnist\",client=\"job \\\"a\\\""
	    "\\n\\\\x\",session=\"42\",state=\"ready\"} 1");
	has_line("infeed_ring_slots{dataset=\"mnist\",client=\"job \\\"a\\\""
	    "\\n\\\\x\",session=\"42\",state=\"held\"} 2");
	has_line("infeed_ring_slots{dataset=\"mnist\",client=\"job \\\"a\\\""
	    "\\n\\\\x\",session=\"42\",state=\"all\"} 3");
	ck_assert_uint_eq(count_lines("infeed_ring_slots{"), 3);
	has_line("infeed_worker_busy_seconds_total{worker=\"0\"} 1.5");
	has_line("infeed_worker_rows_total{worker=\"0\"} 300");
	has_line("infeed_worker_restarts_total{worker=\"1\"} 2");
	has_line("infeed_worker_stuck_total{worker=\"1\"} 1");
	has_line("infeed_worker_taken_over_total{worker=\"1\"} 3");
	/* Shared pipelines: the member's group, and what the group filled. */
	has_line("infeed_group_members{dataset=\"mnist\",client=\"job "
	    "\\\"a\\\"\\n\\\\x\",session=\"42\",group=\"9\"} 4");
	has_line("infeed_group_steps_filled_total{group=\"9\"} 11");
	/* ... and its members' leaves by reason, stays and rejoins. */
	has_line("infeed_group_leaves_total{group=\"9\",reason=\"held_back\"}"
	    " 3");
	has_line("infeed_group_leaves_total{group=\"9\",reason=\"waited\"} 2");
	ck_assert_uint_eq(count_lines("infeed_group_leaves_total{"), 2);
	has_line("infeed_group_stays_total{group=\"9\"} 1");
	has_line("infeed_group_rejoins_total{group=\"9\"} 4");
	has_line("# TYPE infeed_group_leaves_total counter");
	has_line("# TYPE infeed_group_stays_total counter");
	has_line("# TYPE infeed_group_rejoins_total counter");
	/* How reads are put in flight, io_uring or threads. */
	ck_assert_uint_eq(count_lines("infeed_reads_in_flight_info{backend="),
	    1);
	/* Each family once. */
	ck_assert_uint_eq(count_lines("# TYPE "), 47);
	free(h.ended);
}
END_TEST

/* errcode.h names each code as infeed.proto does, number for number. */
START_TEST(error_codes_named_as_the_protocol_names_them)
{
	const ProtobufCEnumValue	*v;
	int				 c;

	for (c = 0; c < ERRCODE_COUNT; c++) {
		v = protobuf_c_enum_descriptor_get_value(
		    &infeed__error_code__descriptor, c);
		ck_assert_ptr_nonnull(v);
		ck_assert_str_eq(errcode_name((enum errcode)c), v->name);
	}
	ck_assert_ptr_null(protobuf_c_enum_descriptor_get_value(
	    &infeed__error_code__descriptor, ERRCODE_COUNT));
	ck_assert_ptr_null(errcode_name((enum errcode)ERRCODE_COUNT));
}
END_TEST


/*
 * Send @request to the server on @port and read the whole answer (the
 * server closes), turning the event loop meanwhile.
 */
static void
http(uint16_t port, const char *request)
{
	struct sockaddr_in	 sin;
	uint64_t		 deadline = now_ms() + DEADLINE_MS;
	size_t			 len = 0, cap = 1 << 16;
	ssize_t			 n = -1;
	int			 fd;

	free(text);
	ck_assert_ptr_nonnull(text = calloc(1, cap));
	ck_assert_int_ge(fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0),
	    0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(write(fd, request, strlen(request)),
	    (ssize_t)strlen(request));
	ck_assert_int_ne(fcntl(fd, F_SETFL, O_NONBLOCK), -1);
	while (now_ms() < deadline) {
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		n = read(fd, text + len, cap - 1 - len);
		if (n == 0)
			break;
		if (n > 0)
			len += (size_t)n;
		else if (errno == EAGAIN)
			usleep(1000);
		else
			break;
		ck_assert_uint_lt(len, cap - 1);
	}
	ck_assert_msg(n == 0, "the answer did not end: %s", text);
	close(fd);
}

START_TEST(server_answers_get_metrics_from_the_daemon)
{
	struct peers		*ps;
	struct metrics		*m;
	char			 path[PATH_MAX], conf_text[256], *cause = NULL;

	make_test_dir(rundir, tmpdir, sizeof(tmpdir));
	unit_fmt(conf_text, sizeof(conf_text), "[infeedd]\nworkers = 2\n"
	    "memory_budget = 16M\n[dataset a]\ntype = synthetic\n"
	    "samples = 10\nshape = 4\ndtype = uint8\n");
	unit_fmt(path, sizeof(path), "%s/infeedd.conf", tmpdir);
	write_file(path, conf_text, strlen(conf_text));
	unit_daemon_start(path, 1, 2);
	ps = unit_peers_new();
	m = metrics_new(base, "127.0.0.1", 0, ps, &cause);
	ck_assert_msg(m != NULL, "%s", cause);
	ck_assert_uint_ne(metrics_port(m), 0);

	http(metrics_port(m), "GET /metrics HTTP/1.1\r\nHost: test\r\n"
	    "Connection: close\r\n\r\n");
	ck_assert_msg(strncmp(text, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s",
	    text);
	ck_assert_msg(strstr(text, "Content-Type: text/plain; version=0.0.4; "
	    "charset=utf-8\r\n") != NULL, "%s", text);
	ck_assert_msg(strstr(text, "\ninfeed_clients 0\n") != NULL, "%s", text);
	ck_assert_msg(strstr(text, "\ninfeed_sessions 0\n") != NULL, "%s",
	    text);
	ck_assert_msg(strstr(text, "\ninfeed_memory_budget_bytes 16777216\n")
	    != NULL, "%s", text);
	ck_assert_msg(strstr(text, "\ninfeed_worker_rows_total{worker=\"1\"} ")
	    != NULL, "%s", text);
	ck_assert_msg(strstr(text, "\ninfeed_errors_total{code=\"ERROR_DATA\"} "
	    "0\n") != NULL, "%s", text);

	http(metrics_port(m), "GET /other HTTP/1.1\r\nHost: test\r\n"
	    "Connection: close\r\n\r\n");
	ck_assert_msg(strncmp(text, "HTTP/1.1 404 ", 13) == 0, "%s", text);
	ck_assert_msg(strstr(text, "infeedd serves /metrics only") != NULL,
	    "%s", text);
	http(metrics_port(m), "POST /metrics HTTP/1.1\r\nHost: test\r\n"
	    "Content-Length: 0\r\nConnection: close\r\n\r\n");
	/* evhttp answers a method it does not serve 501. */
	ck_assert_msg(strncmp(text, "HTTP/1.1 501 ", 13) == 0, "%s", text);

	metrics_free(m);
	peers_free(ps);
	unit_daemon_stop();
	remove_tree(tmpdir);
}
END_TEST

static Suite *
metrics_suite(void)
{
	Suite	*s = suite_create("metrics");
	TCase	*tc;

	tc = tcase_create("render");
	tcase_add_test(tc, snapshot_rendered_as_the_exposition_text);
	tcase_add_test(tc, error_codes_named_as_the_protocol_names_them);
	suite_add_tcase(s, tc);
	tc = tcase_create("server");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, server_answers_get_metrics_from_the_daemon);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every test, the server's in a directory of its own. */
int
main(void)
{
	int	rc;

	log_init("test-metrics", getenv("TEST_VERBOSE") != NULL ? 1 : -1);
	rc = run_suite_in_dir(metrics_suite(), "test-metrics", rundir,
	    sizeof(rundir));
	free(text);
	return (rc);
}
