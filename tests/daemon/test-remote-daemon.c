/* SPDX-License-Identifier: MIT */
/*
 * The daemon's own remote work (issue 38), against a real nginx on a
 * private port (the program skips, saying why, without it):
 *
 * - a reload that adds 1,000 remote tar shards without "index =" (each
 *   indexed through the cache on the reload's thread, then again, from
 *   the cache, by the workers' fork server before they are replaced): a
 *   bystander's round trips stay under 250 ms throughout, each shard is
 *   asked once (a HEAD and a GET), and the new dataset is served;
 * - infeedd stopped during a reload's HEADs against a server that answers
 *   each one only after a second (the test's own: nginx cannot be told to
 *   stall a HEAD): it exits at once, with status 0, not after every HEAD;
 * - infeedd stopped during a reload that indexes remote tar shards, each
 *   seconds long to download (nginx's limit_rate): it exits within a
 *   shard, not after all of them;
 * - a start-up that indexes such shards tells systemd (NOTIFY_SOCKET, the
 *   test's) how far it got, with more time, before READY=1;
 * - an s3:// dataset whose server refuses the reads with a body that
 *   repeats the request's Authorization and token (as S3's
 *   SignatureDoesNotMatch repeats what was signed): the secret, the token
 *   and the signature are in neither infeedd's log, the client's error,
 *   infeedctl status and datasets, nor /metrics; and a URL whose query
 *   holds a signature (a presigned URL) is refused without naming it.
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "remote-shards.h"

#define WIDE_SHARDS	1000
#define SLOW_FILES	40	/* HEADs to the slow server: 1 s each */
#define SLOW_SHARDS	8	/* behind nginx's limit_rate: seconds each */
#define ACCESS		"AKIDREMOTEDAEMONTEST"
#define SECRET		"zzDaemonSecretNeverShownQ7/+x"
#define TOKEN		"zzDaemonTokenNeverShownR8"

static pid_t	nginx_pid = -1;
static int	nginx_port;

/*
 * nginx serving the test's folder; under /deny/ and /gone/ it answers 403
 * with a body that repeats the request's Authorization and token, /deny/
 * to GETs only (a HEAD finds the file), /gone/ to everything.
 */
static void
nginx_start(void)
{
	char	conf[4096];

	ck_assert_int_ne(nginx_port = remote_free_port(), -1);
	snprintf(conf, sizeof(conf),
	    "daemon off;\nmaster_process off;\nworker_processes 1;\n"
	    "pid \"%s/nginx.pid\";\nerror_log \"%s/nginx-error.log\";\n"
	    "events { worker_connections 64; }\n"
	    "http {\n access_log \"%s/access.log\";\n"
	    " client_body_temp_path \"%s/nginx-tmp\";\n"
	    " proxy_temp_path \"%s/nginx-tmp\";\n"
	    " server {\n  listen 127.0.0.1:%d;\n  root \"%s\";\n"
	    "  location /deny/ { if ($request_method = GET) { return 403 "
	    "\"<Error><Code>SignatureDoesNotMatch</Code><SignatureProvided>"
	    "$http_authorization</SignatureProvided><Token>"
	    "$http_x_amz_security_token</Token></Error>\"; } "
	    "alias \"%s/\"; }\n"
	    "  location /gone/ { return 403 \"<Error><SignatureProvided>"
	    "$http_authorization</SignatureProvided><Token>"
	    "$http_x_amz_security_token</Token></Error>\"; }\n"
	    "  location /slow/ { limit_rate 4k; }\n }\n}\n",
	    dir, dir, dir, dir, dir, nginx_port, dir, dir);
	nginx_pid = remote_nginx_run(conf, nginx_port, 0);
}

/* The files, nginx and a configuration with a cache: no daemon yet. */
static void
remote_files_setup(void)
{
	char	cache[700];

	make_files(NULL);
	nginx_start();
	snprintf(cache, sizeof(cache), "cache_dir = %s/cache\n"
	    "cache_max = 64M", dir);
	make_config(cache);
}

static void
remote_daemon_setup(void)
{
	remote_files_setup();
	infeedd_start(NULL);
}

static void
remote_daemon_teardown(void)
{
	remote_nginx_stop(&nginx_pid);
	remove_tree(path_in(dir, "nginx-tmp"));
	remove_tree(path_in(dir, "cache"));
	remove_tree(path_in(dir, "wide"));
	teardown();
}

/* Append @text to the configuration. */
static void
config_append(const char *text)
{
	FILE	*fp;

	ck_assert_ptr_nonnull(fp = fopen(conf_path, "a"));
	fputs(text, fp);
	ck_assert_int_eq(fclose(fp), 0);
}

/* SIGHUP, then wait (at most @limit_ms) for @what in the log; the ms taken. */
static uint64_t
reload_until(const char *what, uint64_t limit_ms, char *log, size_t len)
{
	uint64_t	t0 = now_ms(), ms = 0;

	ck_assert_int_eq(kill(infeedd_pid, SIGHUP), 0);
	for (;;) {
		read_log(log, len);
		if (strstr(log, what) != NULL || ms > limit_ms)
			break;
		usleep(20000);
		ms = now_ms() - t0;
	}
	ck_assert_msg(strstr(log, what) != NULL, "no '%s' in the log after "
	    "%llu ms", what, (unsigned long long)ms);
	return (ms);
}

/* nginx's requests so far whose line holds @what; 100 ms on. */
static int
nginx_requests(const char *what)
{
	char	line[2048];
	FILE	*fp;
	int	n = 0;

	usleep(100000);
	if ((fp = fopen(path_in(dir, "access.log"), "r")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL)
		n += strstr(line, what) != NULL;
	fclose(fp);
	return (n);
}

/*
 * A reload adds 1,000 remote shards without "index =": the reload's
 * thread asks each one's size and indexes it through the cache (its whole
 * shard); then the fork server opens the same catalogue beside its own,
 * while the old workers serve (pool_prepare()), taking each shard's size
 * and ETag from the cache's meta file rather than from 1,000 more HEADs;
 * only then are the workers replaced.  A bystander's round trips stay
 * under 250 ms throughout and 1.5 s past the switch (0.3-1.3 s here with
 * the workers replaced before the fork server's open, 20 s at 20 ms a
 * HEAD with its HEADs).
 */
START_TEST(reload_indexing_many_shards_keeps_clients_served)
{
	static char		 log[1 << 18];
	struct bystander	 b;
	struct bystander_report	 r;
	char			 sect[512];
	uint64_t		 ms;

	remote_make_shards("wide", "w", WIDE_SHARDS, 1, false);
	snprintf(sect, sizeof(sect), "\n[dataset wide]\ntype = tar\n"
	    "shards = http://127.0.0.1:%d/wide/w-{000000..%06d}.tar\n"
	    "classes = 10\n", nginx_port, WIDE_SHARDS - 1);
	config_append(sect);
	bystander_start(&b);
	usleep(300000);
	ms = reload_until("reloaded:", 120000, log, sizeof(log));
	/* The workers replaced, each forked from the new catalogue. */
	usleep(1500000);
	bystander_stop(&b, &r);
	printf("remote-daemon: a reload indexing %d remote shards: %llu ms\n",
	    WIDE_SHARDS, (unsigned long long)ms);
	ck_assert_msg(strstr(log, "reloaded: 3 datasets") != NULL, "%s", log);
	/* The log says what takes the time, and how long it took. */
	ck_assert_ptr_nonnull(strstr(log, "dataset 'wide': opening its remote "
	    "files (tar shards without index ="));
	ck_assert_ptr_nonnull(strstr(log, "dataset 'wide': its remote files "
	    "opened in "));
	ck_assert_int_eq(nginx_requests("HEAD /wide/w-"), WIDE_SHARDS);
	ck_assert_int_eq(nginx_requests("GET /wide/w-"), WIDE_SHARDS);
	bystander_assert(&r, 250);
	remote_read_epoch("wide", WIDE_SHARDS, 3);
	ck_assert_int_eq(nginx_requests("GET /wide/w-"), WIDE_SHARDS);
}
END_TEST

/* The slow server: a listener whose every answer waits a second. */
struct slow_server {
	int		fd;
	int		port;
	pthread_t	thread;
};

/* Answer each request on @fd, a second late, as a 16,000-byte object. */
static void
slow_answer(int fd)
{
	static const char	answer[] = "HTTP/1.1 200 OK\r\n"
	    "Content-Length: 16000\r\nETag: \"slow\"\r\n"
	    "Connection: close\r\n\r\n";
	char			req[4096];
	size_t			got = 0;
	ssize_t			n;

	while (got < sizeof(req) - 1 && (n = read(fd, req + got,
	    sizeof(req) - 1 - got)) > 0) {
		got += (size_t)n;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n") != NULL)
			break;
	}
	sleep(1);
	(void)!write(fd, answer, sizeof(answer) - 1);
}

/* The slow server's thread: one connection at a time, until closed. */
static void *
slow_main(void *arg)
{
	struct slow_server	*ss = arg;
	int			 c;

	while ((c = accept(ss->fd, NULL, NULL)) != -1) {
		slow_answer(c);
		close(c);
	}
	return (NULL);
}

static void
slow_start(struct slow_server *ss)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof(sin);

	ck_assert_int_ne(ss->fd = socket(AF_INET, SOCK_STREAM, 0), -1);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(ss->fd, (struct sockaddr *)&sin, sizeof(sin)),
	    0);
	ck_assert_int_eq(getsockname(ss->fd, (struct sockaddr *)&sin, &len),
	    0);
	ck_assert_int_eq(listen(ss->fd, 64), 0);
	ss->port = ntohs(sin.sin_port);
	ck_assert_int_eq(pthread_create(&ss->thread, NULL, slow_main, ss), 0);
}

static void
slow_stop(struct slow_server *ss)
{
	shutdown(ss->fd, SHUT_RDWR);	/* accept() returns */
	pthread_join(ss->thread, NULL);
	close(ss->fd);
}

/*
 * infeedd stopped during a reload's HEADs, SLOW_FILES of them to a server
 * that answers each after a second (in the reload's thread, one after the
 * other): it waits for the HEAD under way, not for all (about 40 s), and
 * exits with status 0, no crash in its log.
 */
START_TEST(stop_during_a_reloads_heads_is_prompt)
{
	static char		 log[1 << 16];
	struct slow_server	 ss;
	char			 sect[512], want[64], crash[512];
	uint64_t		 t0, ms;
	int			 i, status;

	slow_start(&ss);
	for (i = 0; i < SLOW_FILES / 2; i++) {
		snprintf(sect, sizeof(sect), "\n[dataset slow%d]\ntype = raw\n"
		    "path = http://127.0.0.1:%d/raw-%d.bin\nshape = 1,%d,%d\n"
		    "dtype = uint8\nlabels = http://127.0.0.1:%d/labels-%d.bin\n"
		    "label_dtype = int64\nclasses = %d\n", i, ss.port, i, RAW_H,
		    RAW_W, ss.port, i, RAW_CLASSES);
		config_append(sect);
	}
	snprintf(want, sizeof(want), "asking the servers of %d remote files",
	    SLOW_FILES);
	(void)reload_until(want, 10000, log, sizeof(log));
	usleep(1500000);		/* a HEAD or two answered */
	t0 = now_ms();
	status = infeedd_stop();
	ms = now_ms() - t0;
	slow_stop(&ss);
	printf("remote-daemon: infeedd stopped during a reload's %d HEADs to "
	    "a server a second late each: it exited in %llu ms\n",
	    SLOW_FILES, (unsigned long long)ms);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "infeedd's exit status: %#x", status);
	ck_assert_msg(!infeedd_log_crash(crash, sizeof(crash)), "%s", crash);
	ck_assert_msg(ms < 5000, "infeedd took %llu ms to stop: it asked the "
	    "HEADs after the one under way", (unsigned long long)ms);
}
END_TEST

/* Section of dataset "slowtar": @n shards under /slow/, seconds each. */
static void
slow_section(char *sect, size_t len, int n)
{
	remote_make_shards("slow", "s", n, 4, false);
	snprintf(sect, len, "\n[dataset slowtar]\ntype = tar\n"
	    "shards = http://127.0.0.1:%d/slow/s-{000000..%06d}.tar\n"
	    "classes = 10\n", nginx_port, n - 1);
}

/*
 * infeedd stopped during a reload's indexing of SLOW_SHARDS remote tar
 * shards that take seconds each to download: the open gives up at the
 * next shard (dataset_open_tick()), so it exits in about one shard's time,
 * with status 0, not after all of them (about 2 s a shard).
 */
START_TEST(stop_during_a_reloads_indexing_is_prompt)
{
	static char	log[1 << 16];
	char		sect[512], crash[512];
	uint64_t	t0, ms;
	int		status, gets;

	slow_section(sect, sizeof(sect), SLOW_SHARDS);
	config_append(sect);
	(void)reload_until("dataset 'slowtar': opening its remote files",
	    10000, log, sizeof(log));
	usleep(1000000);		/* a shard under way */
	t0 = now_ms();
	status = infeedd_stop();
	ms = now_ms() - t0;
	gets = nginx_requests("GET /slow/s-");
	printf("remote-daemon: infeedd stopped during a reload indexing %d "
	    "slow shards: it exited in %llu ms, %d shards asked for\n",
	    SLOW_SHARDS, (unsigned long long)ms, gets);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "infeedd's exit status: %#x", status);
	ck_assert_msg(!infeedd_log_crash(crash, sizeof(crash)), "%s", crash);
	ck_assert_msg(ms < 5000 && gets < SLOW_SHARDS, "infeedd took %llu ms "
	    "to stop and asked for %d of %d shards: it went on indexing",
	    (unsigned long long)ms, gets, SLOW_SHARDS);
}
END_TEST

/* The files and nginx, with NOTIFY_SOCKET the test's: no daemon yet. */
static void
remote_notify_setup(void)
{
	remote_files_setup();
	notify_open();
}

static void
remote_notify_teardown(void)
{
	notify_close();
	remote_daemon_teardown();
}

/*
 * A start-up whose catalogue takes seconds to open (3 remote tar shards
 * behind limit_rate, each indexed before infeedd listens) tells systemd
 * how far it got and asks for more time (EXTEND_TIMEOUT_USEC, so that
 * TimeoutStartSec= does not kill a start-up that progresses) before
 * READY=1; the log says it too.
 */
START_TEST(a_long_start_up_tells_systemd_how_far_it_got)
{
	const char	*bin = getenv("INFEEDD");
	char		 sect[512], msg[1024], first[1024] = "";
	int		 extended = 0, ready = 0;

	slow_section(sect, sizeof(sect), 3);
	config_append(sect);
	ck_assert_ptr_nonnull(bin);
	infeedd_spawn((char *const []){ (char *)bin, (char *)"--config",
	    conf_path, (char *)"--socket", sock_path, (char *)"--workers",
	    (char *)"2", NULL });
	while (!ready && notify_wait("", 60000, msg, sizeof(msg))) {
		if (strstr(msg, "EXTEND_TIMEOUT_USEC=") != NULL &&
		    strstr(msg, "dataset 'slowtar'") != NULL && extended++ == 0)
			snprintf(first, sizeof(first), "%s", msg);
		ready = strstr(msg, "READY=1") != NULL;
	}
	printf("remote-daemon: a start-up indexing 3 slow shards sent %d "
	    "extensions before READY=1, the first: %s\n", extended, first);
	ck_assert_msg(ready, "no READY=1 from infeedd");
	ck_assert_msg(extended > 0, "no EXTEND_TIMEOUT_USEC= before READY=1");
	ck_assert_ptr_nonnull(strstr(first, "STATUS=opening the catalogue: "
	    "dataset 'slowtar' ("));
}
END_TEST

/* Whether @text holds a secret of the s3 case's, or a request's signature. */
static const char *
secret_in(const char *text)
{
	static const char *const marks[] = { SECRET, TOKEN, "Signature=",
	    "SignatureProvided", "AWS4-HMAC-SHA256", "X-Amz-Signature", NULL };
	size_t	i;

	for (i = 0; marks[i] != NULL; i++)
		if (strstr(text, marks[i]) != NULL)
			return (marks[i]);
	return (NULL);
}

/*
 * Three s3:// datasets through nginx, signed with a credentials file's
 * keys and token: "denied" opens (HEAD finds the files) and every GET is
 * refused with a 403 whose body repeats the Authorization and the token;
 * "gone" is refused at open the same way; "presigned" names shards by a
 * presigned URL (its signature SECRET).
 */
static void
remote_secrets_setup(void)
{
	char	extra[700], creds[600], sect[4096];

	make_files(NULL);
	nginx_start();
	snprintf(creds, sizeof(creds), "%s/s3.ini", dir);
	snprintf(sect, sizeof(sect), "[ci]\naws_access_key_id = " ACCESS "\n"
	    "aws_secret_access_key = " SECRET "\naws_session_token = " TOKEN
	    "\n");
	write_file(creds, sect, strlen(sect));
	snprintf(extra, sizeof(extra), "cache_dir = %s/cache\n"
	    "cache_max = 64M", dir);
	make_config(extra);
	snprintf(sect, sizeof(sect),
	    "\n[dataset denied]\ntype = raw\npath = s3://deny/raw.bin\n"
	    "labels = s3://deny/raw-labels.bin\nshape = 1,%d,%d\n"
	    "dtype = uint8\nlabel_dtype = int64\nclasses = %d\n"
	    "endpoint = http://127.0.0.1:%d\nregion = eu-test-1\n"
	    "credentials = %s\nprofile = ci\n"
	    "\n[dataset gone]\ntype = raw\npath = s3://gone/raw.bin\n"
	    "labels = s3://gone/raw-labels.bin\nshape = 1,%d,%d\n"
	    "dtype = uint8\nlabel_dtype = int64\nclasses = %d\n"
	    "endpoint = http://127.0.0.1:%d\nregion = eu-test-1\n"
	    "credentials = %s\nprofile = ci\n"
	    "\n[dataset presigned]\ntype = tar\nshards = "
	    "http://127.0.0.1:%d/s-{0..1}.tar?X-Amz-Credential=" ACCESS
	    "&X-Amz-Signature=" SECRET "\n",
	    RAW_H, RAW_W, RAW_CLASSES, nginx_port, creds, RAW_H, RAW_W,
	    RAW_CLASSES, nginx_port, creds, nginx_port);
	config_append(sect);
	infeedd_start(NULL);
}

/*
 * The secret, the token and the signature of a failing s3:// fetch reach
 * neither infeedd's log, the client's error, nor infeedctl status or
 * datasets; the presigned shards are refused without their URL.
 * (/metrics has no text of a dataset's but its name: metrics.c.)
 */
START_TEST(a_failing_s3_fetch_shows_no_secret)
{
	static char			 log[1 << 16], out[1 << 16];
	struct infeed			*f = client();
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_step		 st;
	const char			*leak;
	char				 err[1024];

	infeed_options_init(&o);
	o.batch_size = 10;
	o.label_dtype = INFEED_DTYPE_INT64;
	ck_assert_msg(infeed_attach(f, "denied", &o, &info) == INFEED_OK,
	    "%s", infeed_error(f));
	ck_assert_int_ne(infeed_next(f, &st), INFEED_OK);
	snprintf(err, sizeof(err), "%s", infeed_error(f));
	infeed_free(f);
	ck_assert_msg(strstr(err, "s3://deny/raw") != NULL &&
	    strstr(err, "403") != NULL, "the error names neither the URL nor "
	    "the answer: %s", err);
	ck_assert_msg((leak = secret_in(err)) == NULL, "'%s' in the client's "
	    "error: %s", leak, err);
	ck_assert_int_gt(nginx_requests("GET /deny/raw.bin HTTP/1.1\" 403"),
	    0);

	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "dataset 'gone' refused") != NULL &&
	    strstr(log, "403") != NULL, "%s", log);
	ck_assert_msg(strstr(log, "dataset 'presigned' refused") != NULL &&
	    strstr(log, "presigned URL") != NULL, "%s", log);
	ck_assert_msg((leak = secret_in(log)) == NULL, "'%s' in infeedd's "
	    "log: %s", leak, strstr(log, leak));
	infeedctl_run("status", out, sizeof(out));
	ck_assert_msg((leak = secret_in(out)) == NULL, "'%s' in status",
	    leak);
	infeedctl_run("datasets", out, sizeof(out));
	ck_assert_msg((leak = secret_in(out)) == NULL, "'%s' in datasets",
	    leak);
}
END_TEST

static Suite *
remote_daemon_suite(void)
{
	Suite	*s = suite_create("remote-daemon");
	TCase	*tc = tcase_create("reload");

	tcase_add_checked_fixture(tc, remote_daemon_setup,
	    remote_daemon_teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, reload_indexing_many_shards_keeps_clients_served);
	suite_add_tcase(s, tc);

	tc = tcase_create("stop");
	tcase_add_checked_fixture(tc, remote_daemon_setup,
	    remote_daemon_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, stop_during_a_reloads_heads_is_prompt);
	tcase_add_test(tc, stop_during_a_reloads_indexing_is_prompt);
	suite_add_tcase(s, tc);

	tc = tcase_create("start-up");
	tcase_add_checked_fixture(tc, remote_notify_setup,
	    remote_notify_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_long_start_up_tells_systemd_how_far_it_got);
	suite_add_tcase(s, tc);

	tc = tcase_create("secrets");
	tcase_add_checked_fixture(tc, remote_secrets_setup,
	    remote_daemon_teardown);
	tcase_add_test(tc, a_failing_s3_fetch_shows_no_secret);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	if (access(NGINX, X_OK) != 0) {
		printf("remote-daemon: skipped: %s is not installed (Debian's "
		    "nginx or nginx-light; scripts/install-deps --tests)\n",
		    NGINX);
		return (77);
	}
	return (run_suite(remote_daemon_suite()));
}
