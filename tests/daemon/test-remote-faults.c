/* SPDX-License-Identifier: MIT */
/*
 * A remote server's faults served by a real nginx (issue 38, item 3),
 * beside test-remote's 503 and cut body and test-remote-tar's server
 * gone: the program skips, saying why, without nginx.
 *
 * - 429 to every GET (nginx's "return 429"), a connection closed with no
 *   answer to every GET ("return 444"), and a body that trickles (200
 *   bytes a second, under fetch.c's 1 KiB a second for 2 s): the range is asked again with a
 *   doubling backoff (nginx's access log, $msec: the tries and the time
 *   between the first and the last), then that session gets ERROR_DATA
 *   naming the URL and the sample; a session on a good dataset reading
 *   at the same time gets every index once with its bytes, and a
 *   bystander's round trips stay under 250 ms;
 * - a body that stalls (nginx reading its file from slowfs, which holds
 *   every read unanswered until told: nginx's "aio threads" keeps its own
 *   loop free): fetch.c's stall timeout (10 s under 1 KiB a second; 2 s
 *   here, INFEED_FETCH_STALL_S) ends the transfer and the range is asked
 *   again, served once slowfs lets the reads go; that session's epoch is
 *   then every index once, and another session and a bystander are
 *   served meanwhile.  (Skipped where FUSE cannot be mounted.)  The test
 *   lets the second try through rather than wait out five;
 * - a fetch's tries hold no worker from the other sessions: with 2
 *   workers, a 429 set and one whose server never answers (nginx proxying
 *   to a listener that says nothing) beside a bystander and a session on
 *   a healthy remote set, whose worst round trips stay under 250 ms;
 * - latency for real, no sleep in infeed: nginx serving tar shards from
 *   slowfs with a delay on every read (as a store with latency behind
 *   HTTP): an epoch keeps several requests in flight (slowfs's
 *   max_in_flight, and nginx's log: requests whose times overlap).
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <netinet/in.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "remote-shards.h"
#include "slowfs-mount.h"

static pid_t		nginx_pid = -1;
static int		nginx_port;
static int		silent_fd = -1;	/* a backend that never answers */
static struct slowfs	fs;
static bool		fs_up;

/*
 * A listener that accepts nothing and says nothing: the kernel completes
 * the connections, and a request sent on one is never answered.
 * Return: its port.
 */
static int
silent_start(void)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof(sin);

	ck_assert_int_ne(silent_fd = socket(AF_INET, SOCK_STREAM, 0), -1);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(silent_fd, (struct sockaddr *)&sin,
	    sizeof(sin)), 0);
	ck_assert_int_eq(listen(silent_fd, 64), 0);
	ck_assert_int_eq(getsockname(silent_fd, (struct sockaddr *)&sin,
	    &len), 0);
	return (ntohs(sin.sin_port));
}

/*
 * nginx serving the test's folder, each request logged with its time
 * ($msec); HEADs find the files everywhere, GETs under /r429/ get 429,
 * under /r444/ a closed connection and under /silent/ a proxied request
 * that the backend never answers (a server that stalls, without holding
 * nginx's own loop); /stall/ serves the slowfs mount (if any), its reads
 * in nginx's threads; /trickle/ serves the folder at 200 bytes a second.
 */
static void
nginx_start(const char *stall_root)
{
	char	conf[4096], stall[1024] = "";
	int	silent_port = silent_start();

	ck_assert_int_ne(nginx_port = remote_free_port(), -1);
	if (stall_root != NULL)
		snprintf(stall, sizeof(stall), "  location /stall/ { aio "
		    "threads; sendfile off; alias \"%s/\"; }\n", stall_root);
	snprintf(conf, sizeof(conf),
	    "daemon off;\nmaster_process off;\nworker_processes 1;\n"
	    "pid \"%s/nginx.pid\";\nerror_log \"%s/nginx-error.log\";\n"
	    "events { worker_connections 64; }\n"
	    "http {\n log_format t '$msec $request_time \"$request\" "
	    "$status';\n"
	    " access_log \"%s/access.log\" t;\n"
	    " client_body_temp_path \"%s/nginx-tmp\";\n"
	    " proxy_temp_path \"%s/nginx-tmp\";\n"
	    " server {\n  listen 127.0.0.1:%d;\n  root \"%s\";\n"
	    "  location /r429/ { if ($request_method = GET) { return 429; } "
	    "alias \"%s/\"; }\n"
	    "  location /r444/ { if ($request_method = GET) { return 444; } "
	    "alias \"%s/\"; }\n"
	    "  location /silent/ { if ($request_method = GET) { proxy_pass "
	    "http://127.0.0.1:%d; } alias \"%s/\"; }\n"
	    "  location /trickle/ { limit_rate 200; alias \"%s/\"; }\n"
	    "%s }\n}\n",
	    dir, dir, dir, dir, dir, nginx_port, dir, dir, dir, silent_port,
	    dir, dir, stall);
	nginx_pid = remote_nginx_run(conf, nginx_port, 0);
}

/* Append a raw dataset @name on the files under URL folder @sub. */
static void
section(FILE *fp, const char *name, const char *sub)
{
	fprintf(fp, "\n[dataset %s]\ntype = raw\n"
	    "path = http://127.0.0.1:%d/%sraw.bin\nshape = 1,%d,%d\n"
	    "dtype = uint8\nlabels = http://127.0.0.1:%d/%sraw-labels.bin\n"
	    "label_dtype = int64\nclasses = %d\n", name, nginx_port, sub,
	    RAW_H, RAW_W, nginx_port, sub, RAW_CLASSES);
}

/*
 * The files, nginx, "good", "r429", "r444" and "silent", infeedd with
 * @workers; with FAULTS_TRICKLE "trickle" (its open takes a second or
 * two: nginx's limit_rate slows the HEAD too); with @stall_root, "stall"
 * (raw under /stall/) or, with FAULTS_SHARDS, "late" (LATE_SHARDS tar
 * shards under /stall/, index = its counts.txt).
 */
#define FAULTS_TRICKLE	0x1
#define FAULTS_SHARDS	0x2
#define LATE_SHARDS	16
#define LATE_PER	10

static void
faults_start(const char *stall_root, unsigned flags, const char *workers)
{
	char	extra[700];
	FILE	*fp;

	nginx_start(stall_root);
	snprintf(extra, sizeof(extra), "cache_dir = %s/cache\n"
	    "cache_max = 64M", dir);
	make_config(extra);
	ck_assert_ptr_nonnull(fp = fopen(conf_path, "a"));
	section(fp, "good", "");
	section(fp, "r429", "r429/");
	section(fp, "r444", "r444/");
	section(fp, "silent", "silent/");
	/* Its labels at full speed: the open reads them; the rows trickle. */
	if (flags & FAULTS_TRICKLE)
		fprintf(fp, "\n[dataset trickle]\ntype = raw\n"
		    "path = http://127.0.0.1:%d/trickle/raw.bin\n"
		    "shape = 1,%d,%d\ndtype = uint8\n"
		    "labels = http://127.0.0.1:%d/raw-labels.bin\n"
		    "label_dtype = int64\nclasses = %d\n", nginx_port, RAW_H,
		    RAW_W, nginx_port, RAW_CLASSES);
	if (stall_root != NULL && !(flags & FAULTS_SHARDS))
		section(fp, "stall", "stall/");
	if (stall_root != NULL && (flags & FAULTS_SHARDS))
		fprintf(fp, "\n[dataset late]\ntype = tar\nshards = http://"
		    "127.0.0.1:%d/stall/s-{000000..%06d}.tar\nindex = http://"
		    "127.0.0.1:%d/stall/counts.txt\nclasses = 10\n", nginx_port,
		    LATE_SHARDS - 1, nginx_port);
	ck_assert_int_eq(fclose(fp), 0);
	infeedd_start(workers);
}

/* faults_start() with infeedd's fetches stalled after @stall_s seconds. */
static void
faults_start_stalling(const char *stall_s, const char *stall_root,
    unsigned flags, const char *workers)
{
	ck_assert_int_eq(setenv("INFEED_FETCH_STALL_S", stall_s, 1), 0);
	faults_start(stall_root, flags, workers);
	ck_assert_int_eq(unsetenv("INFEED_FETCH_STALL_S"), 0);
}

static void
faults_setup(void)
{
	make_files(NULL);
	faults_start(NULL, 0, "4");
}

static void
faults_teardown(void)
{
	if (fs_up)
		slowfs_command(&fs, "release");
	remote_nginx_stop(&nginx_pid);
	if (silent_fd != -1)
		close(silent_fd);
	silent_fd = -1;
	if (fs_up)
		slowfs_stop(&fs);
	fs_up = false;
	remove_tree(path_in(dir, "nginx-tmp"));
	remove_tree(path_in(dir, "cache"));
	teardown();
}

/*
 * nginx's requests so far whose line holds @what, 100 ms on (it logs a
 * request once answered), answered by @until_ms on the wall clock
 * (UINT64_MAX: all); the first and last one's $msec in @first and @last
 * (ms).
 */
static int
nginx_requests(const char *what, uint64_t until_ms, uint64_t *first,
    uint64_t *last)
{
	char	line[2048];
	FILE	*fp;
	int	n = 0;
	double	t;

	usleep(100000);
	*first = *last = 0;
	if ((fp = fopen(path_in(dir, "access.log"), "r")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (strstr(line, what) == NULL)
			continue;
		t = strtod(line, NULL);
		if ((uint64_t)(t * 1000) > until_ms)
			continue;
		if (n++ == 0)
			*first = (uint64_t)(t * 1000);
		*last = (uint64_t)(t * 1000);
	}
	fclose(fp);
	return (n);
}

/* An epoch of "good" in a thread, its steps spread over about a second. */
struct reader {
	pthread_t	thread;
	const char	*name;
	uint64_t	count, bad, dup;
	uint64_t	ms;		/* the epoch took */
	uint64_t	worst_ms;	/* its slowest Next */
	uint8_t		seen[RAW_N];
	char		error[512];
};

static void *
reader_main(void *arg)
{
	struct reader			*rd = arg;
	struct infeed			*f = client();
	struct infeed_session_info	 info;
	struct infeed_options		 o;
	struct infeed_step		 st;
	uint8_t				*seen = rd->seen;
	const uint8_t			*row;
	uint64_t			 s, r, t, t0 = now_ms();
	unsigned			 j;
	int				 rc;

	infeed_options_init(&o);
	o.batch_size = 20;
	o.shuffle = true;
	o.seed = 11;
	o.drop_last = false;
	o.label_dtype = INFEED_DTYPE_INT64;
	memset(seen, 0, RAW_N);
	if (infeed_attach(f, rd->name, &o, &info) != INFEED_OK) {
		snprintf(rd->error, sizeof(rd->error), "%s", infeed_error(f));
		infeed_free(f);
		return (NULL);
	}
	for (s = 0; s < info.steps_per_epoch; s++) {
		t = now_ms();
		rc = infeed_next(f, &st);
		if (now_ms() - t > rd->worst_ms)
			rd->worst_ms = now_ms() - t;
		if (rc != INFEED_OK) {
			snprintf(rd->error, sizeof(rd->error), "%s",
			    infeed_error(f));
			break;
		}
		for (r = 0; r < st.rows; r++) {
			if (st.indices[r] >= RAW_N) {
				rd->bad++;
				continue;
			}
			rd->dup += seen[st.indices[r]]++ != 0;
			row = (const uint8_t *)st.data + r * RAW_BYTES;
			for (j = 0; j < RAW_BYTES; j++)
				rd->bad += row[j] != raw_byte(st.indices[r], j);
			rd->bad += st.labels64[r] !=
			    (int64_t)((st.indices[r] * 3) % RAW_CLASSES);
		}
		rd->count += st.rows;
		(void)infeed_release(f, &st);
		usleep(20000);
	}
	rd->ms = now_ms() - t0;
	infeed_free(f);
	return (NULL);
}

/* The reader's epoch was every index once with its bytes and label. */
static void
reader_assert(const struct reader *rd)
{
	printf("remote-faults: '%s': %llu samples in %llu ms (worst Next "
	    "%llu ms), %llu doubled, %llu wrong%s%s\n", rd->name,
	    (unsigned long long)rd->count, (unsigned long long)rd->ms,
	    (unsigned long long)rd->worst_ms,
	    (unsigned long long)rd->dup,
	    (unsigned long long)rd->bad, rd->error[0] ? ": " : "", rd->error);
	ck_assert_msg(rd->error[0] == '\0', "%s: %s", rd->name, rd->error);
	ck_assert_uint_eq(rd->count, RAW_N);
	ck_assert_uint_eq(rd->dup, 0);
	ck_assert_uint_eq(rd->bad, 0);
}

/*
 * Dataset @name's GETs answered by a fault every time: its session gets
 * ERROR_DATA naming the URL and the sample, after the tries the error
 * says (nginx saw them all, spread by the backoff: 50 + 100 + 200 + 400
 * ms at least for five); "good" read meanwhile in a thread is exact, a
 * bystander is served.
 */
static void
fault_fails_that_session_only(const char *name, const char *why)
{
	struct infeed			*f;
	struct infeed_session_info	 info;
	struct infeed_options		 o;
	struct infeed_step		 st;
	struct bystander		 b;
	struct bystander_report		 br;
	struct reader			 rd = { .name = "good" };
	char				 err[1024], what[64];
	const char			*p;
	uint64_t			 first, last;
	int				 rc, tries = 0, seen;

	bystander_start(&b);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 10;
	o.label_dtype = INFEED_DTYPE_INT64;
	ck_assert_msg(infeed_attach(f, name, &o, &info) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_int_eq(pthread_create(&rd.thread, NULL, reader_main, &rd),
	    0);
	rc = infeed_next(f, &st);
	snprintf(err, sizeof(err), "%s", infeed_error(f));
	infeed_free(f);
	pthread_join(rd.thread, NULL);
	bystander_stop(&b, &br);
	snprintf(what, sizeof(what), "\"GET /%s/raw.bin", name);
	seen = nginx_requests(what, UINT64_MAX, &first, &last);
	if ((p = strstr(err, "(tried ")) != NULL)
		tries = atoi(p + strlen("(tried "));
	printf("remote-faults: %s: %s\nremote-faults: %s: nginx saw %d GETs "
	    "of raw.bin over %llu ms\n", name, err, name, seen,
	    (unsigned long long)(last - first));
	ck_assert_int_ne(rc, INFEED_OK);
	ck_assert_msg(strstr(err, "http://127.0.0.1:") != NULL &&
	    strstr(err, "/raw.bin") != NULL && strstr(err, why) != NULL &&
	    strstr(err, "sample ") != NULL, "the error names neither the URL, "
	    "what went wrong (%s) nor the sample: %s", why, err);
	ck_assert_msg(tries >= 3, "no retries said: %s", err);
	ck_assert_int_ge(seen, tries);
	ck_assert_msg(last - first >= 600, "%d tries over %llu ms: no backoff",
	    seen, (unsigned long long)(last - first));
	reader_assert(&rd);
	bystander_assert(&br, 250);
}

/* 429 Too Many Requests to every GET. */
START_TEST(too_many_requests_fail_that_session_only)
{
	fault_fails_that_session_only("r429", "429");
}
END_TEST

/* Every GET's connection closed with no answer (nginx's 444). */
START_TEST(closed_without_answer_fails_that_session_only)
{
	fault_fails_that_session_only("r444", "Empty reply");
}
END_TEST

/*
 * A body that trickles (200 bytes a second) is a stall too, as one that
 * stops is: each try ends (INFEED_FETCH_STALL_S: 2 s under 1 KiB a
 * second, for the test) and the session gets ERROR_DATA after the tries.
 * Under 1 byte a second was the bound before: a 1 MiB block then took an
 * hour and a half, holding its worker.
 */
static void
trickle_setup(void)
{
	make_files(NULL);
	faults_start_stalling("2", NULL, FAULTS_TRICKLE, "4");
}

START_TEST(trickling_body_fails_that_session_only)
{
	fault_fails_that_session_only("trickle", "too slow");
}
END_TEST

/*
 * The files under "slow" (copies of raw's) served by slowfs at "mnt";
 * skipped (the setup's flag) where FUSE cannot be mounted.
 */
static void
stall_setup(void)
{
	static const char *const opts[] = { "--delay-us", "0", NULL };
	char	src[600], mnt[600], to[700];

	make_files(NULL);
	snprintf(src, sizeof(src), "%s/slow", dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	snprintf(to, sizeof(to), "%s/raw.bin", src);
	ck_assert_int_eq(link(path_in(dir, "raw.bin"), to), 0);
	snprintf(to, sizeof(to), "%s/raw-labels.bin", src);
	ck_assert_int_eq(link(path_in(dir, "raw-labels.bin"), to), 0);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	fs_up = slowfs_start(&fs, src, mnt, opts);
	/* A try stalls in 1 s, not 10 (the test's time). */
	faults_start_stalling("1", fs_up ? mnt : NULL, 0, "4");
}

/*
 * The harness's 2 workers, as many as the failing sessions; a stalled
 * try ends in 1 s, not 10.
 */
static void
retries_setup(void)
{
	make_files(NULL);
	faults_start_stalling("1", NULL, 0, "2");
}

/* 4 workers: a read of each of three sessions at once; tries of 1 s. */
static void
waiters_setup(void)
{
	make_files(NULL);
	faults_start_stalling("1", NULL, 0, "4");
}

/* Tar shards under "slow" served by slowfs at "mnt", 20 ms a read. */
static void
latency_setup(void)
{
	static const char *const opts[] = { "--delay-us", "20000", "--depth",
	    "32", NULL };
	char	src[600], mnt[600];

	make_files(NULL);
	remote_make_shards("slow", "s", LATE_SHARDS, LATE_PER, true);
	snprintf(src, sizeof(src), "%s/slow", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	fs_up = slowfs_start(&fs, src, mnt, opts);
	faults_start(fs_up ? mnt : NULL, FAULTS_SHARDS, "4");
}

/* The most of nginx's GETs of @what whose times overlapped (its log). */
static int
nginx_overlap(const char *what)
{
	char	line[2048], *end;
	double	b[512], e[512];
	FILE	*fp;
	int	n = 0, i, j, k, most = 0;

	usleep(100000);
	ck_assert_ptr_nonnull(fp = fopen(path_in(dir, "access.log"), "r"));
	while (n < 512 && fgets(line, sizeof(line), fp) != NULL) {
		if (strstr(line, what) == NULL)
			continue;
		e[n] = strtod(line, &end);
		b[n] = e[n] - strtod(end, NULL);
		n++;
	}
	fclose(fp);
	for (i = 0; i < n; i++) {
		for (j = k = 0; j < n; j++)
			k += b[j] <= b[i] && e[j] > b[i];
		most = k > most ? k : most;
	}
	return (most);
}

/*
 * Every read nginx makes of the shards waits 20 ms in slowfs, as a store
 * with latency behind HTTP: an epoch (every index once, the local
 * shards' pixels and labels) keeps several requests in flight, slowfs's
 * max_in_flight and nginx's overlapping requests say.
 */
START_TEST(latency_keeps_requests_in_flight)
{
	uint64_t	t0, ms, most;
	int		overlap;

	if (!fs_up) {
		printf("remote-faults: latency_keeps_requests_in_flight "
		    "skipped: FUSE cannot be mounted here\n");
		return;
	}
	slowfs_command(&fs, "reset");
	t0 = now_ms();
	remote_read_epoch("late", LATE_SHARDS * LATE_PER, 4);
	ms = now_ms() - t0;
	most = slowfs_counter(&fs, "max_in_flight");
	overlap = nginx_overlap("\"GET /stall/s-");
	printf("remote-faults: latency: an epoch of %d shards, 20 ms a read: "
	    "%llu ms; %llu reads in flight at most in the store, %d GETs at "
	    "once in nginx's log, %llu reads in all\n", LATE_SHARDS,
	    (unsigned long long)ms, (unsigned long long)most, overlap,
	    (unsigned long long)slowfs_counter(&fs, "reads"));
	ck_assert_uint_ge(most, 3);
	ck_assert_int_ge(overlap, 3);
}
END_TEST

/*
 * slowfs holds nginx's reads of the files under /stall/: each GET's
 * headers go out and its body never comes.  fetch.c's stall timeout ends
 * the try after 10 s (1 s here) and asks again; the test lets the reads
 * go 2 s after the good session's epoch, so a later try is served.  Meanwhile "good" is read in a thread,
 * exact, and a bystander is served; the stalled session's epoch is then
 * every index once with its bytes.
 */
START_TEST(stalled_body_is_asked_again)
{
	struct bystander	 b;
	struct bystander_report	 br;
	struct reader		 rd = { .name = "good" };
	struct reader		 sr = { .name = "stall" };
	uint64_t		 first, last;
	int			 seen;

	if (!fs_up) {
		printf("remote-faults: stalled_body_is_asked_again skipped: "
		    "FUSE cannot be mounted here\n");
		return;
	}
	slowfs_command(&fs, "hold");
	bystander_start(&b);
	ck_assert_int_eq(pthread_create(&sr.thread, NULL, reader_main, &sr),
	    0);
	usleep(500000);
	ck_assert_int_eq(pthread_create(&rd.thread, NULL, reader_main, &rd),
	    0);
	pthread_join(rd.thread, NULL);
	reader_assert(&rd);
	sleep(2);	/* past the first try's 1 s stall */
	slowfs_command(&fs, "release");
	pthread_join(sr.thread, NULL);
	bystander_stop(&b, &br);
	seen = nginx_requests("\"GET /stall/raw.bin", UINT64_MAX, &first,
	    &last);
	printf("remote-faults: stall: nginx saw %d GETs of raw.bin, %llu ms "
	    "apart (first to last)\n", seen,
	    (unsigned long long)(last - first));
	reader_assert(&sr);
	ck_assert_msg(seen >= 2, "%d GETs: the stalled one was not asked "
	    "again", seen);
	bystander_assert(&br, 250);
}
END_TEST

/*
 * A session's first Next, in a thread, waiting @wait_ms at most (0: for
 * its answer): its code and error.
 */
struct first_next {
	pthread_t	thread;
	const char	*name;
	int		wait_ms;
	uint32_t	batch;	/* 0: 10 */
	int		rc;
	uint64_t	ms;	/* the Next took */
	char		error[512];
};

static void *
first_next_main(void *arg)
{
	struct first_next		*fn = arg;
	struct infeed			*f = client();
	struct infeed_session_info	 info;
	struct infeed_options		 o;
	struct infeed_step		 st;
	uint64_t			 t0;

	infeed_options_init(&o);
	o.batch_size = fn->batch > 0 ? fn->batch : 10;
	o.label_dtype = INFEED_DTYPE_INT64;
	if ((fn->rc = infeed_attach(f, fn->name, &o, &info)) == INFEED_OK) {
		t0 = now_ms();
		fn->rc = fn->wait_ms > 0 ? infeed_next_timeout(f, &st,
		    fn->wait_ms) : infeed_next(f, &st);
		fn->ms = now_ms() - t0;
	}
	snprintf(fn->error, sizeof(fn->error), "%s", fn->rc == INFEED_OK ?
	    "" : infeed_error(f));
	infeed_free(f);
	return (NULL);
}

/*
 * A fetch's tries hold no worker from the other sessions: with the
 * harness's 2 workers, one session's server answers 429 to every GET
 * (its tries 50 to 400 ms apart) and another's never answers (each try
 * waits out the stall time, 1 s here), so both sessions' jobs are in a
 * fetch's tries while a bystander on a local dataset and a session on a
 * healthy server read; their round trips stay under 250 ms.  The 429
 * session still gets its ERROR_DATA after its tries; the stalled one is
 * left in its third try (its five take 6 s: the stall test has them).
 */
START_TEST(retries_hold_no_worker)
{
	struct bystander	 b;
	struct bystander_report	 br;
	struct first_next	 r429 = { .name = "r429" };
	struct first_next	 silent = { .name = "silent", .wait_ms = 2500 };
	struct reader		 rd = { .name = "good" };

	bystander_start(&b);
	ck_assert_int_eq(pthread_create(&silent.thread, NULL, first_next_main,
	    &silent), 0);
	ck_assert_int_eq(pthread_create(&r429.thread, NULL, first_next_main,
	    &r429), 0);
	usleep(200000);		/* both sessions' jobs in their tries */
	ck_assert_int_eq(pthread_create(&rd.thread, NULL, reader_main, &rd),
	    0);
	pthread_join(r429.thread, NULL);
	pthread_join(rd.thread, NULL);
	pthread_join(silent.thread, NULL);
	bystander_stop(&b, &br);
	printf("remote-faults: retries: r429 failed after %llu ms: %s\n"
	    "remote-faults: retries: silent still waited after %llu ms: %s\n"
	    "remote-faults: retries: worst Next: bystander %llu ms, 'good' "
	    "%llu ms\n", (unsigned long long)r429.ms, r429.error,
	    (unsigned long long)silent.ms, silent.error,
	    (unsigned long long)br.worst_next_ms,
	    (unsigned long long)rd.worst_ms);
	fflush(stdout);
	ck_assert_int_ne(r429.rc, INFEED_OK);
	ck_assert_msg(strstr(r429.error, "/r429/raw.bin") != NULL &&
	    strstr(r429.error, "429") != NULL && strstr(r429.error,
	    "(tried ") != NULL && strstr(r429.error, "sample ") != NULL,
	    "the error names neither the URL, the 429, the tries nor the "
	    "sample: %s", r429.error);
	ck_assert_int_eq(silent.rc, INFEED_TIMEOUT);
	reader_assert(&rd);
	ck_assert_msg(rd.worst_ms < 250, "a session on a healthy server "
	    "waited %llu ms for a step", (unsigned long long)rd.worst_ms);
	bystander_assert(&br, 250);
}
END_TEST

/*
 * Three sessions (no group: their batch sizes differ) read the same
 * block of a server that never answers (each try waits out the stall
 * time, 1 s here: about 6 s for the five, so all three reads wait however
 * slowly they attach): one download goes through its tries while the
 * other reads wait on its lock, and they take its failure rather than go
 * through the tries again each in turn (they did: three sets of GETs, the
 * last error after three retry budgets).
 */
START_TEST(waiters_take_the_failure)
{
	struct first_next	 fn[3] = {
		{ .name = "silent", .batch = 10 },
		{ .name = "silent", .batch = 20 },
		{ .name = "silent", .batch = 30 },
	};
	const char		*p;
	struct timespec		 ts;
	uint64_t		 first, last;
	int			 i, seen, tries = 0;

	for (i = 0; i < 3; i++)
		ck_assert_int_eq(pthread_create(&fn[i].thread, NULL,
		    first_next_main, &fn[i]), 0);
	for (i = 0; i < 3; i++)
		pthread_join(fn[i].thread, NULL);
	/* Not the GETs of jobs begun after it (read ahead): they try anew. */
	clock_gettime(CLOCK_REALTIME, &ts);
	seen = nginx_requests("\"GET /silent/raw.bin", (uint64_t)ts.tv_sec *
	    1000 + (uint64_t)ts.tv_nsec / 1000000, &first, &last);
	for (i = 0; i < 3; i++) {
		printf("remote-faults: waiters: batch %u failed after %llu "
		    "ms: %s\n", fn[i].batch, (unsigned long long)fn[i].ms,
		    fn[i].error);
		ck_assert_int_ne(fn[i].rc, INFEED_OK);
		ck_assert_msg(strstr(fn[i].error, "/silent/raw.bin") != NULL &&
		    (p = strstr(fn[i].error, "(tried ")) != NULL, "the error "
		    "names neither the URL nor the tries: %s", fn[i].error);
		if (atoi(p + strlen("(tried ")) > tries)
			tries = atoi(p + strlen("(tried "));
	}
	printf("remote-faults: waiters: nginx saw %d GETs of raw.bin over "
	    "%llu ms before the 3 sessions failed, %d tries a download\n",
	    seen, (unsigned long long)(last - first), tries);
	fflush(stdout);
	ck_assert_msg(tries >= 3 && seen < 2 * tries, "%d GETs for the one "
	    "block 3 sessions read, with %d tries a download: the reads that "
	    "waited on its download went through its tries again", seen,
	    tries);
}
END_TEST

static Suite *
remote_faults_suite(void)
{
	Suite	*s = suite_create("remote-faults");
	TCase	*tc = tcase_create("answers");

	tcase_add_checked_fixture(tc, faults_setup, faults_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, too_many_requests_fail_that_session_only);
	tcase_add_test(tc, closed_without_answer_fails_that_session_only);
	suite_add_tcase(s, tc);

	tc = tcase_create("trickle");
	tcase_add_checked_fixture(tc, trickle_setup, faults_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, trickling_body_fails_that_session_only);
	suite_add_tcase(s, tc);

	tc = tcase_create("stall");
	tcase_add_checked_fixture(tc, stall_setup, faults_teardown);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, stalled_body_is_asked_again);
	suite_add_tcase(s, tc);

	tc = tcase_create("retries");
	tcase_add_checked_fixture(tc, retries_setup, faults_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, retries_hold_no_worker);
	suite_add_tcase(s, tc);

	tc = tcase_create("waiters");
	tcase_add_checked_fixture(tc, waiters_setup, faults_teardown);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, waiters_take_the_failure);
	suite_add_tcase(s, tc);

	tc = tcase_create("latency");
	tcase_add_checked_fixture(tc, latency_setup, faults_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, latency_keeps_requests_in_flight);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	if (access(NGINX, X_OK) != 0) {
		printf("remote-faults: skipped: %s is not installed (Debian's "
		    "nginx or nginx-light; scripts/install-deps --tests)\n",
		    NGINX);
		return (77);
	}
	return (run_suite(remote_faults_suite()));
}
