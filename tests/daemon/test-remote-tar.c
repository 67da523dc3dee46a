/* SPDX-License-Identifier: MIT */
/*
 * Remote tar shards and s3:// (issue 38, items 1 and 4) against a real
 * nginx on a private port (the program skips, saying why, without it):
 *
 * - shards over http:// serve what the same shards read locally serve,
 *   and indexing them downloads each shard once (nginx's access log);
 * - with "index =" the open downloads the index alone, the first step
 *   reads only the shards it needs (fewer GETs than shards), an epoch
 *   still has every index once, and a shard whose count is not the
 *   index's fails that read, naming the shard;
 * - a shard that answers 503, or a server gone, fails that session with
 *   ERROR_DATA naming the URL, while another session is served;
 * - s3:// with an endpoint (nginx serving the bucket path-style: it cannot
 *   check a signature, which is the fake part here) signs every request
 *   with the keys of a credentials file, or of the environment (nginx
 *   logs the Authorization header's credential), and the secret is never
 *   in infeedd's log or status;
 * - the signature libcurl makes (a HEAD to a listener here) is the one a
 *   SigV4 written here from AWS's documentation computes, and that one
 *   gives AWS's published signature for its get-vanilla test vector;
 * - https with ca_file: nginx's self-signed certificate trusted;
 * - three shuffled epochs through a cache of a quarter of the set
 *   download near the fewest that order allows (Belady), with and
 *   without index = (the cache evicts by the session's order).
 */

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <zlib.h>

#include "cache.h"
#include "fetch.h"
#include "harness.h"
#include "remote-shards.h"
#include "s3.h"
#include "sampler.h"

#define PER_SHARD	40
#define NSHARDS		3
#define LAZY_SHARDS	200
#define LAZY_PER	4
/* infeedd.conf's read_ahead: few, so the first step's shards stay countable. */
#define READ_AHEAD	"4 steps"
/*
 * The set whose index lists its members: 8 samples of 120 KB and a block
 * (970 KB) a shard, a sample to a granule of the cache's (128 KiB).
 */
#define PART_SHARDS	16
#define PART_PER	8
#define PART_PAD	120000
#define ORD_SHARDS	24	/* the order case's set */
#define ORD_PER		16	/* samples a shard of it */
#define ORD_CACHED	6	/* shards its cache holds */
#define SECRET		"wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzSECRETzz"
#define TOKEN		"FQoGZXIvYXdzEXAMPLEzzTOKENzz"

static pid_t	nginx_pid = -1;
static char	cache_max[32] = "64M";	/* infeedd.conf's */
static int	nginx_port;
static int	nginx_tls_port;

/*
 * nginx serving the test's folder as one foreground process (test-remote.c
 * says why); /flaky/ answers HEAD but 503 to every GET; the access log
 * has each request's credential (the Authorization header, cut at the
 * signature) and token; with tls.crt, https on a second port.
 */
static void
nginx_start(void)
{
	char	conf[4096], tls[1024] = "";

	nginx_port = remote_free_port();
	nginx_tls_port = 0;
	if (access(path_in(dir, "tls.crt"), R_OK) == 0) {
		nginx_tls_port = remote_free_port();
		snprintf(tls, sizeof(tls), " server {\n  listen 127.0.0.1:%d "
		    "ssl;\n  ssl_certificate %s/tls.crt;\n"
		    "  ssl_certificate_key %s/tls.key;\n  root %s;\n }\n",
		    nginx_tls_port, dir, dir, dir);
	}
	snprintf(conf, sizeof(conf),
	    "daemon off;\nmaster_process off;\nworker_processes 1;\n"
	    "pid %s/nginx.pid;\nerror_log %s/nginx-error.log;\n"
	    "events { worker_connections 64; }\n"
	    "http {\n log_format sig '$request auth=[$http_authorization] "
	    "token=[$http_x_amz_security_token] bytes=$body_bytes_sent';\n"
	    " access_log %s/access.log sig;\n"
	    " client_body_temp_path %s/nginx-tmp;\n"
	    " proxy_temp_path %s/nginx-tmp;\n"
	    " server {\n  listen 127.0.0.1:%d;\n  root %s;\n"
	    "  location /flaky/ { if ($request_method = GET) "
	    "{ return 503; } alias %s/; }\n }\n%s}\n",
	    dir, dir, dir, dir, dir, nginx_port, dir, dir, tls);
	nginx_pid = remote_nginx_run(conf, nginx_port, nginx_tls_port);
}

/* Stop nginx. */
static void
nginx_stop(void)
{
	remote_nginx_stop(&nginx_pid);
	remove_tree(path_in(dir, "nginx-tmp"));
}

/* nginx's GETs so far whose line holds @what ("" for all); 100 ms on. */
static int
nginx_gets(const char *what)
{
	char	line[2048];
	FILE	*fp;
	int	n = 0;

	usleep(100000);
	if ((fp = fopen(path_in(dir, "access.log"), "r")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL)
		n += strncmp(line, "GET ", 4) == 0 && strstr(line, what) != NULL;
	fclose(fp);
	return (n);
}

/* Whether the access log has a line holding @what. */
static bool
nginx_logged(const char *what)
{
	char	line[2048];
	FILE	*fp;
	bool	found = false;

	if ((fp = fopen(path_in(dir, "access.log"), "r")) == NULL)
		return (false);
	while (!found && fgets(line, sizeof(line), fp) != NULL)
		found = strstr(line, what) != NULL;
	fclose(fp);
	return (found);
}

/* The configuration of every case; @extra goes after the datasets. */
static void
remote_tar_config(const char *extra)
{
	char	cache[600], sect[8192];
	FILE	*fp;

	snprintf(cache, sizeof(cache), "cache_dir = %s/cache\n"
	    "cache_max = %s\nread_ahead = %s", dir, cache_max,
	    READ_AHEAD);
	make_config(cache);
	snprintf(sect, sizeof(sect),
	    "\n[dataset local]\ntype = tar\nshards = %s/set/s-{000000..%06d}"
	    ".tar\n"
	    "\n[dataset http]\ntype = tar\nshards = http://127.0.0.1:%d/set/"
	    "s-{000000..%06d}.tar\n"
	    "\n[dataset lazy]\ntype = tar\nshards = http://127.0.0.1:%d/many/"
	    "m-{000000..%06d}.tar\nindex = http://127.0.0.1:%d/many/"
	    "counts.txt\nclasses = 10\n"
	    "\n[dataset flaky]\ntype = tar\nshards = http://127.0.0.1:%d/"
	    "flaky/many/m-{000000..%06d}.tar\nindex = http://127.0.0.1:%d/"
	    "many/counts.txt\nclasses = 10\n"
	    "\n[dataset npy]\ntype = npy\npath = http://127.0.0.1:%d/x.npy\n"
	    "labels = http://127.0.0.1:%d/y.npy\nclasses = 10\n"
	    "\n[dataset parts]\ntype = tar\nshards = http://127.0.0.1:%d/"
	    "parts/p-{000000..%06d}.tar\nindex = http://127.0.0.1:%d/parts/"
	    "counts.txt\nclasses = 10\n%s",
	    dir, NSHARDS - 1, nginx_port, NSHARDS - 1, nginx_port,
	    LAZY_SHARDS - 1, nginx_port, nginx_port, LAZY_SHARDS - 1,
	    nginx_port, nginx_port, nginx_port, nginx_port, PART_SHARDS - 1,
	    nginx_port, extra != NULL ? extra : "");
	ck_assert_ptr_nonnull(fp = fopen(conf_path, "a"));
	fputs(sect, fp);
	fclose(fp);
}

#define NPY_N		50
#define NPY_W		3

/* x.npy: NPY_N rows of NPY_W bytes (row i: i + j); y.npy: i % 10, <i8. */
static void
make_npy(void)
{
	char		 head[160], *p;
	uint8_t		 x[NPY_N * NPY_W];
	int64_t		 y[NPY_N];
	size_t		 hlen;
	unsigned	 i, j;
	FILE		*fp;

	for (i = 0; i < NPY_N; i++) {
		for (j = 0; j < NPY_W; j++)
			x[i * NPY_W + j] = (uint8_t)(i + j);
		y[i] = i % 10;
	}
	for (i = 0; i < 2; i++) {
		/* A v1.0 header padded so the data starts at 128. */
		snprintf(head, sizeof(head), "{'descr': '%s', 'fortran_order': "
		    "False, 'shape': (%d%s), }", i == 0 ? "|u1" : "<i8", NPY_N,
		    i == 0 ? ", 3" : ",");
		hlen = strlen(head);
		ck_assert_uint_lt(hlen, 118);
		memset(head + hlen, ' ', 118 - hlen);
		head[118 - 1] = '\n';
		ck_assert_ptr_nonnull(fp = fopen(path_in(dir, i == 0 ? "x.npy" :
		    "y.npy"), "w"));
		fwrite("\x93NUMPY\x01\x00\x76\x00", 1, 10, fp);
		fwrite(head, 1, 118, fp);
		p = i == 0 ? (char *)x : (char *)y;
		fwrite(p, 1, i == 0 ? sizeof(x) : sizeof(y), fp);
		ck_assert_int_eq(fclose(fp), 0);
	}
}

static void
remote_tar_setup(void)
{
	make_files(NULL);
	nginx_start();
	make_npy();
	remote_make_shards("set", "s", NSHARDS, PER_SHARD, false);
	remote_make_shards("many", "m", LAZY_SHARDS, LAZY_PER, true);
	remote_make_member_shards("parts", "p", PART_SHARDS, PART_PER,
	    PART_PAD);
	remote_tar_config(NULL);
	infeedd_start(NULL);
}

static void
remote_tar_teardown(void)
{
	nginx_stop();
	remove_tree(path_in(dir, "cache"));
	teardown();
}

/*
 * Shards over http:// serve what the same shards read locally serve, and
 * each shard (under a cache block) is downloaded once: its index and its
 * samples' reads take the same block, from the host's cache.
 */
START_TEST(http_shards_equal_local_and_download_once)
{
	int	gets;

	remote_read_epoch("local", NSHARDS * PER_SHARD, 1);
	remote_read_epoch("http", NSHARDS * PER_SHARD, 2);
	gets = nginx_gets("/set/");
	printf("remote-tar: %d shards indexed and read: %d GETs\n", NSHARDS,
	    gets);
	ck_assert_int_eq(gets, NSHARDS);
	remote_read_epoch("http", NSHARDS * PER_SHARD, 3);
	ck_assert_int_eq(nginx_gets("/set/"), NSHARDS);
}
END_TEST

/*
 * With index =, the daemon's open downloads the index only; the first
 * step reads the shards it needs, not all; an epoch is every index once.
 */
START_TEST(index_lets_the_first_step_skip_the_other_shards)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st;
	uint64_t		 t0, ms;
	int			 first;

	ck_assert_int_eq(nginx_gets("/many/m-"), 0);
	ck_assert_int_eq(nginx_gets("/many/counts.txt"), 2);	/* 2 datasets */
	infeed_options_init(&o);
	o.batch_size = 8;
	o.buffer_size = 1;
	o.shuffle = true;
	o.transform = "Resize((8, 8)), ToTensor()";
	t0 = now_ms();
	ck_assert_msg(infeed_attach(f, "lazy", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
	    infeed_error(f));
	ms = now_ms() - t0;
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeed_free(f);
	first = nginx_gets("/many/m-");
	printf("remote-tar: %d shards with index =: first step %llu ms "
	    "after the attach, %d shards' GETs by then\n", LAZY_SHARDS,
	    (unsigned long long)ms, first);
	ck_assert_int_lt(first, LAZY_SHARDS / 2);
	remote_read_epoch("lazy", LAZY_SHARDS * LAZY_PER, 4);
	/* Each shard once for the host, though both workers index it. */
	ck_assert_int_eq(nginx_gets("/many/m-"), LAZY_SHARDS);
}
END_TEST

/*
 * nginx's GETs so far whose line holds @what: the bytes sent, and in
 * *@urls how many URLs they were of (100 ms on, as nginx_gets()).
 */
static uint64_t
nginx_bytes(const char *what, int *urls)
{
	char		line[2048], seen[64][256], *b, *sp;
	uint64_t	total = 0;
	FILE		*fp;
	int		k;

	usleep(100000);
	*urls = 0;
	if ((fp = fopen(path_in(dir, "access.log"), "r")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (strncmp(line, "GET ", 4) != 0 || strstr(line, what) ==
		    NULL || (b = strstr(line, " bytes=")) == NULL)
			continue;
		total += strtoull(b + 7, NULL, 10);
		if ((sp = strchr(line + 4, ' ')) != NULL)
			*sp = '\0';
		for (k = 0; k < *urls && strcmp(seen[k], line + 4) != 0; k++)
			;
		if (k == *urls && k < 64 && strlen(line + 4) <
		    sizeof(seen[0]))
			memcpy(seen[(*urls)++], line + 4, strlen(line + 4) + 1);
	}
	fclose(fp);
	return (total);
}

/*
 * With index = listing each sample's member, a step downloads its
 * samples' pages (the tar header before each and its image, rounded to
 * the cache's 128 KiB granules), not their shards: the first step and
 * those read ahead of it (steps of 2) took a small part of the shards
 * they touched (nginx's access log); then an epoch is every index once,
 * each image and label right, and no byte was downloaded twice.
 */
START_TEST(member_index_downloads_the_steps_pages_not_their_shards)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct stat		 sb;
	uint64_t		 bytes, shard, set;
	int			 urls;

	ck_assert_int_eq(stat(path_in(dir, "parts/p-000000.tar"), &sb), 0);
	shard = (uint64_t)sb.st_size;
	set = shard * PART_SHARDS;
	infeed_options_init(&o);
	o.batch_size = 2;
	o.buffer_size = 1;
	o.shuffle = true;
	o.transform = "Resize((8, 8)), ToTensor()";
	ck_assert_msg(infeed_attach(f, "parts", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeed_free(f);
	bytes = nginx_bytes("/parts/p-", &urls);
	printf("remote-tar: members listed: the first step's %d shards "
	    "(%llu bytes whole) took %llu bytes\n", urls,
	    (unsigned long long)(urls * shard), (unsigned long long)bytes);
	ck_assert_int_gt(urls, 0);
	ck_assert_uint_lt(bytes * 3, urls * shard);
	remote_read_epoch("parts", PART_SHARDS * PART_PER, 6);
	bytes = nginx_bytes("/parts/p-", &urls);
	printf("remote-tar: members listed: an epoch of %d shards (%llu "
	    "bytes) took %llu bytes\n", urls, (unsigned long long)set,
	    (unsigned long long)bytes);
	ck_assert_int_eq(urls, PART_SHARDS);
	ck_assert_uint_le(bytes, set);
}
END_TEST

/* The host's cache counts as infeedd keeps them (cache.c), mapped. */
static struct cache_stats *
host_cache_stats(int *fd)
{
	void	*m;

	if ((*fd = open(path_in(dir, "cache/.stats"), O_RDONLY)) == -1)
		return (NULL);
	m = mmap(NULL, sizeof(struct cache_stats), PROT_READ, MAP_SHARED, *fd,
	    0);
	return (m == MAP_FAILED ? NULL : m);
}

/*
 * The shards of the steps after the ring are downloaded while the trainer
 * holds its first step (read_ahead, cache_object_prefetch()), not when a
 * worker reads them: with one step in hand and one slot, the workers have
 * read 2 steps' rows at most, yet the host's cache holds the READ_AHEAD
 * (4) steps after them too.  Then the epoch is every index once, and each
 * shard is downloaded once.
 */
START_TEST(read_ahead_downloads_later_steps_before_their_reads)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct cache_stats	*cs;
	struct infeed_stats	*ds;
	int			 gets = 0, k, fd;
	const int		 batch = 8, ring_rows = 5 * batch;

	infeed_options_init(&o);
	o.batch_size = batch;
	o.buffer_size = 1;
	o.shuffle = true;
	o.transform = "Resize((8, 8)), ToTensor()";
	ck_assert_msg(infeed_attach(f, "lazy", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	for (k = 0; k < 3; k++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		if (k < 2)
			ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	/* Each shard is 4 samples: the steps ahead are shards not read. */
	for (k = 0; k < 50 && gets <= ring_rows + batch; k++)
		gets = nginx_gets("/many/m-");
	ck_assert_ptr_nonnull(cs = host_cache_stats(&fd));
	printf("remote-tar: one step held, ring of %d rows: %d shards "
	    "downloaded, %llu of %llu blocks ahead of their reads\n",
	    ring_rows, gets, (unsigned long long)cs->ahead,
	    (unsigned long long)cs->misses);
	fflush(stdout);
	ck_assert_int_gt(gets, ring_rows + batch);
	ck_assert_uint_gt(cs->ahead, 0);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	infeed_free(f);
	remote_read_epoch("lazy", LAZY_SHARDS * LAZY_PER, 9);
	printf("remote-tar: after an epoch: %llu blocks downloaded, %llu "
	    "ahead of their reads, %llu reads waited for one\n",
	    (unsigned long long)cs->misses, (unsigned long long)cs->ahead,
	    (unsigned long long)cs->waited);
	ck_assert_int_eq(nginx_gets("/many/m-"), LAZY_SHARDS);
	/* The same counts in the daemon's Stats (status, top, /metrics). */
	f = client();
	ck_assert_int_eq(infeed_get_stats(f, &ds), INFEED_OK);
	ck_assert_uint_eq(ds->cache_fetched_ahead, cs->ahead);
	ck_assert_uint_eq(ds->cache_waited, cs->waited);
	ck_assert_uint_gt(ds->cache_fetched_ahead, 0);
	infeed_stats_free(ds);
	infeed_free(f);
	munmap(cs, sizeof(*cs));
	close(fd);
}
END_TEST

/* A shard with fewer samples than the index says: that read is named. */
START_TEST(index_count_wrong_is_named)
{
	struct infeed		*f;
	struct infeed_options	 o;
	struct infeed_step	 st;
	char			 extra[600];
	int			 rc;

	/* "short": the first shard of "many", said to hold one more. */
	write_file(path_in(dir, "many/short.txt"), "5 m-000000.tar\n", 15);
	snprintf(extra, sizeof(extra), "\n[dataset short]\ntype = tar\n"
	    "shards = http://127.0.0.1:%d/many/m-000000.tar\nindex = "
	    "%s/many/short.txt\nclasses = 10\n", nginx_port, dir);
	ck_assert_int_eq(infeedd_stop(), 0);
	remote_tar_config(extra);
	infeedd_start(NULL);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 5;
	o.transform = "Resize((8, 8)), ToTensor()";
	ck_assert_msg(infeed_attach(f, "short", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	rc = infeed_next(f, &st);
	printf("remote-tar: wrong count: %s\n", infeed_error(f));
	ck_assert_int_ne(rc, INFEED_OK);
	ck_assert_msg(strstr(infeed_error(f), "m-000000.tar' holds 4 samples "
	    "where 'index =' says 5") != NULL, "%s", infeed_error(f));
	infeed_free(f);
}
END_TEST

/*
 * An index that claims 2^32 - 1 samples (a 96 GiB member table): refused
 * against memory_budget before the table is made, quickly, naming it;
 * the other datasets are served.
 */
START_TEST(index_claiming_too_many_samples_is_refused)
{
	struct infeed		*f;
	struct infeed_options	 o;
	struct infeed_step	 st;
	char			 extra[600], log[65536];
	uint64_t		 t0, ms;

	write_file(path_in(dir, "many/huge.txt"), "4294967295 m-000000.tar\n",
	    24);
	snprintf(extra, sizeof(extra), "\n[dataset huge]\ntype = tar\n"
	    "shards = http://127.0.0.1:%d/many/m-000000.tar\nindex = "
	    "%s/many/huge.txt\nclasses = 10\n", nginx_port, dir);
	ck_assert_int_eq(infeedd_stop(), 0);
	remote_tar_config(extra);
	t0 = now_ms();
	infeedd_start(NULL);
	ms = now_ms() - t0;
	read_log(log, sizeof(log));
	printf("remote-tar: an index of 2^32 - 1 samples refused in %llu ms "
	    "(the daemon's start)\n", (unsigned long long)ms);
	ck_assert_msg(strstr(log, "dataset 'huge' refused") != NULL &&
	    strstr(log, "counts 4294967295 samples, whose member table "
	    "takes 103079215080 bytes") != NULL &&
	    strstr(log, "memory_budget has") != NULL,
	    "no refusal of the index in the log:\n%s", log);
	ck_assert_msg(ms < 20000, "the start took %llu ms",
	    (unsigned long long)ms);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 4;
	o.transform = "Resize((8, 8)), ToTensor()";
	ck_assert_msg(infeed_attach(f, "local", &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s", infeed_error(f));
	infeed_free(f);
}
END_TEST

/* The first step of @name fails: its error, in @buf. */
static void
first_step_fails(const char *name, char *buf, size_t len)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st;

	infeed_options_init(&o);
	o.batch_size = 8;
	o.transform = "Resize((8, 8)), ToTensor()";
	ck_assert_msg(infeed_attach(f, name, &o, NULL) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_int_ne(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_daemon_code(f), 8);	/* ERROR_DATA */
	snprintf(buf, len, "%s", infeed_error(f));
	infeed_free(f);
}

/*
 * 503 to every GET of a shard (after the retries), then the server gone:
 * ERROR_DATA naming the URL for that session, and another session on
 * shards in the cache is served.
 */
START_TEST(shard_faults_fail_that_session_only)
{
	char	err[1024];

	remote_read_epoch("http", NSHARDS * PER_SHARD, 5);	/* now in the cache */
	first_step_fails("flaky", err, sizeof(err));
	printf("remote-tar: 503: %s\n", err);
	ck_assert_msg(strstr(err, "/flaky/many/m-") != NULL &&
	    strstr(err, "503") != NULL, "%s", err);
	remote_read_epoch("http", NSHARDS * PER_SHARD, 6);

	nginx_stop();
	first_step_fails("lazy", err, sizeof(err));
	printf("remote-tar: server gone: %s\n", err);
	ck_assert_msg(strstr(err, "/many/m-") != NULL, "%s", err);
	remote_read_epoch("http", NSHARDS * PER_SHARD, 7);
}
END_TEST

/*
 * npy arrays over http: each header by one range request (its first
 * cache block), the records then read from the cache: one GET a file.
 */
START_TEST(npy_over_http)
{
	struct infeed			*f = client();
	struct infeed_session_info	 info;
	struct infeed_options		 o;
	struct infeed_step		 st;
	uint64_t			 s, r, bad = 0, count = 0;
	const uint8_t			*row;

	infeed_options_init(&o);
	o.batch_size = 7;
	o.shuffle = true;
	o.drop_last = false;
	o.label_dtype = INFEED_DTYPE_INT64;
	ck_assert_msg(infeed_attach(f, "npy", &o, &info) == INFEED_OK, "%s",
	    infeed_error(f));
	ck_assert_uint_eq(info.sample_bytes, NPY_W);
	for (s = 0; s < info.steps_per_epoch; s++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		for (r = 0; r < st.rows; r++) {
			row = (const uint8_t *)st.data + r * NPY_W;
			bad += row[0] != (uint8_t)st.indices[r] ||
			    row[2] != (uint8_t)(st.indices[r] + 2);
			bad += st.labels64[r] != (int64_t)(st.indices[r] % 10);
		}
		count += st.rows;
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	infeed_free(f);
	ck_assert_uint_eq(count, NPY_N);
	ck_assert_msg(bad == 0, "%llu wrong rows", (unsigned long long)bad);
	ck_assert_int_eq(nginx_gets("GET /x.npy"), 1);
	ck_assert_int_eq(nginx_gets("GET /y.npy"), 1);
}
END_TEST

/* Write @creds as a shared-credentials file in the folder. */
static void
write_creds(void)
{
	const char	*c = "# for the test\n[default]\naws_access_key_id = "
	    "AKIDWRONG\naws_secret_access_key = wrong\n\n[profile train]\n"
	    "aws_access_key_id = AKIDFILE\naws_secret_access_key = " SECRET
	    "\naws_session_token = " TOKEN "\n";

	write_file(path_in(dir, "creds.ini"), c, strlen(c));
}

/*
 * "b1" and "b2" are buckets on nginx, path-style (links to the folder):
 * s3file signs with the keys of a file named in the section, s3env with
 * those of infeedd's environment; s3bad names a profile the file lacks.
 */
static void
s3_setup(void)
{
	char	extra[2048];

	make_files(NULL);
	nginx_start();
	remote_make_shards("set", "s", NSHARDS, PER_SHARD, false);
	remote_make_shards("many", "m", LAZY_SHARDS, LAZY_PER, true);
	ck_assert_int_eq(symlink(".", path_in(dir, "b1")), 0);
	ck_assert_int_eq(symlink(".", path_in(dir, "b2")), 0);
	ck_assert_int_eq(symlink(".", path_in(dir, "b3")), 0);
	write_creds();
	snprintf(extra, sizeof(extra),
	    "\n[dataset s3file]\ntype = tar\nshards = s3://b1/set/s-{000000.."
	    "%06d}.tar\nendpoint = http://127.0.0.1:%d\nregion = eu-test-1\n"
	    "credentials = %s/creds.ini\nprofile = train\n"
	    "\n[dataset s3env]\ntype = tar\nshards = s3://b2/many/m-{000000.."
	    "%06d}.tar\nindex = s3://b2/many/counts.txt\nclasses = 10\n"
	    "endpoint = http://127.0.0.1:%d/\n"
	    "\n[dataset s3bad]\ntype = tar\nshards = s3://b3/set/s-000000.tar\n"
	    "endpoint = http://127.0.0.1:%d\ncredentials = %s/creds.ini\n"
	    "profile = nope\n"
	    "\n[dataset userinfo]\ntype = tar\nshards = http://alice:"
	    "hunter2@127.0.0.1:%d/set/s-000000.tar\n"
	    "\n[dataset rawuserinfo]\ntype = raw\npath = http://bob:pw7x@"
	    "127.0.0.1:%d/x.npy\nlabels = http://127.0.0.1:%d/y.npy\n"
	    "shape = 3\ndtype = uint8\n",
	    NSHARDS - 1, nginx_port, dir, LAZY_SHARDS - 1, nginx_port,
	    nginx_port, dir, nginx_port, nginx_port, nginx_port);
	remote_tar_config(extra);
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", SECRET, 1);
	unsetenv("AWS_SESSION_TOKEN");
	infeedd_start(NULL);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
}

/*
 * s3:// through an endpoint: every request signed with the keys from the
 * file (and its token sent) or the environment; the secret and the token
 * are never in infeedd's log or status, not even in a refusal.
 */
START_TEST(s3_signed_and_secrets_never_shown)
{
	char	log[65536], status[65536];

	remote_read_epoch("s3file", NSHARDS * PER_SHARD, 1);
	remote_read_epoch("s3env", LAZY_SHARDS * LAZY_PER, 2);
	ck_assert_int_eq(nginx_gets("GET /b1/set/s-"), NSHARDS);
	ck_assert_msg(nginx_logged("GET /b1/set/s-000000.tar HTTP/1.1 auth=["
	    "AWS4-HMAC-SHA256 Credential=AKIDFILE/"), "no signed GET");
	ck_assert_msg(nginx_logged("/eu-test-1/s3/aws4_request"),
	    "the region is not signed");
	ck_assert_msg(nginx_logged("token=[" TOKEN "]"), "no token sent");
	ck_assert_msg(nginx_logged("GET /b2/many/counts.txt HTTP/1.1 auth=["
	    "AWS4-HMAC-SHA256 Credential=AKIDENV/us-east-1/") ||
	    nginx_logged("GET /b2/many/counts.txt HTTP/1.1 auth=["
	    "AWS4-HMAC-SHA256 Credential=AKIDENV/"), "no GET signed with "
	    "the environment's keys");
	ck_assert(!nginx_logged("AKIDWRONG"));
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "dataset 's3bad'") != NULL &&
	    strstr(log, "profile 'nope' is not there") != NULL,
	    "no refusal of s3bad in the log:\n%s", log);
	/* A password in a URL: refused, and never shown either. */
	ck_assert_msg(strstr(log, "dataset 'userinfo' refused") != NULL &&
	    strstr(log, "dataset 'rawuserinfo' refused") != NULL &&
	    strstr(log, "a URL with a user name or password") != NULL,
	    "no refusal of a URL with a password in the log:\n%s", log);
	ck_assert_ptr_null(strstr(log, "hunter2"));
	ck_assert_ptr_null(strstr(log, "pw7x"));
	ck_assert(!nginx_logged("alice") && !nginx_logged("hunter2"));
	infeedctl_run("status", status, sizeof(status));
	ck_assert_msg(strstr(status, "infeedd") != NULL, "%s", status);
	ck_assert_ptr_null(strstr(status, "hunter2"));
	ck_assert_ptr_null(strstr(log, SECRET));
	ck_assert_ptr_null(strstr(log, TOKEN));
	ck_assert_ptr_null(strstr(status, SECRET));
	ck_assert_ptr_null(strstr(status, TOKEN));
}
END_TEST

/* SHA-256 of @len bytes at @p in hex, into @out (65 bytes). */
static void
sha256_hex(const void *p, size_t len, char *out)
{
	uint8_t		md[SHA256_DIGEST_LENGTH];
	unsigned	i;

	SHA256(p, len, md);
	for (i = 0; i < sizeof(md); i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

/* HMAC-SHA256 of @msg with @key (@klen bytes) into @out (32 bytes). */
static void
hmac256(const void *key, size_t klen, const char *msg, uint8_t *out)
{
	unsigned	len = 32;

	ck_assert_ptr_nonnull(HMAC(EVP_sha256(), key, (int)klen,
	    (const uint8_t *)msg, strlen(msg), out, &len));
}

/*
 * SigV4 as AWS documents it: the signature (hex, into @sig) of
 * @canonical, a canonical request, at @amzdate for @secret, @region and
 * @service.
 */
static void
sigv4(const char *canonical, const char *amzdate, const char *secret,
    const char *region, const char *service, char *sig)
{
	char		 key[256], date[9], sts[1024], hash[65];
	uint8_t		 k[32];
	unsigned	 i;

	snprintf(date, sizeof(date), "%.8s", amzdate);
	sha256_hex(canonical, strlen(canonical), hash);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/"
	    "aws4_request\n%s", amzdate, date, region, service, hash);
	snprintf(key, sizeof(key), "AWS4%s", secret);
	hmac256(key, strlen(key), date, k);
	hmac256(k, 32, region, k);
	hmac256(k, 32, service, k);
	hmac256(k, 32, "aws4_request", k);
	hmac256(k, 32, sts, k);
	for (i = 0; i < 32; i++)
		sprintf(sig + 2 * i, "%02x", k[i]);
}

/* What the listener thread saw: one request's head. */
struct capture {
	int	fd;
	char	req[8192];
};

/* Take one request, answer 200 with a size and an ETag, close. */
static void *
capture_cb(void *arg)
{
	struct capture	*c = arg;
	const char	*ok = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
	    "ETag: \"e\"\r\nConnection: close\r\n\r\n";
	size_t		 n = 0;
	ssize_t		 r;
	int		 fd;

	if ((fd = accept(c->fd, NULL, NULL)) == -1)
		return (NULL);
	while (n < sizeof(c->req) - 1 && strstr(c->req, "\r\n\r\n") == NULL) {
		if ((r = read(fd, c->req + n, sizeof(c->req) - 1 - n)) <= 0)
			break;
		n += (size_t)r;
		c->req[n] = '\0';
	}
	(void)write(fd, ok, strlen(ok));
	close(fd);
	return (NULL);
}

/* The value of header @name (lowercase) in @req, trimmed, into @out. */
static bool
header_of(const char *req, const char *name, char *out, size_t len)
{
	const char	*p = strstr(req, "\r\n"), *e;
	size_t		 nlen = strlen(name), i;

	for (; p != NULL && p[2] != '\r'; p = strstr(p + 2, "\r\n")) {
		for (i = 0; i < nlen && tolower((unsigned char)p[2 + i]) ==
		    name[i]; i++)
			;
		if (i < nlen || p[2 + nlen] != ':')
			continue;
		p += 3 + nlen;
		while (*p == ' ')
			p++;
		e = strstr(p, "\r\n");
		snprintf(out, len, "%.*s", (int)(e - p), p);
		return (true);
	}
	return (false);
}

/*
 * AWS's get-vanilla vector (aws-sig-v4-test-suite) gives its published
 * signature here; then the Authorization libcurl builds for a HEAD of
 * s3://vec/... (fetch.c, keys and token set) is the one SigV4 computes
 * from what the listener received.
 */
START_TEST(sigv4_matches_aws_test_vector)
{
	struct sockaddr_in	 sin;
	socklen_t		 slen = sizeof(sin);
	struct fetch_site	 site;
	struct fetch_object	 o;
	struct capture		 c;
	pthread_t		 th;
	char			 sig[65], auth[1024], signed_h[512], date[64];
	char			 canon[4096], v[1024], name[128], path[512];
	char			 want[65], ep[64], *cause = NULL, *p, *q;
	const char		*vanilla = "GET\n/\n\nhost:example.amazonaws.com"
	    "\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

	sigv4(vanilla, "20150830T123600Z",
	    "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1",
	    "service", sig);
	ck_assert_str_eq(sig, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260"
	    "956d9b8aae1d763fbf31");

	memset(&c, 0, sizeof(c));
	ck_assert_int_ne(c.fd = socket(AF_INET, SOCK_STREAM, 0), -1);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(c.fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(listen(c.fd, 1), 0);
	ck_assert_int_eq(getsockname(c.fd, (struct sockaddr *)&sin, &slen),
	    0);
	ck_assert_int_eq(pthread_create(&th, NULL, capture_cb, &c), 0);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", ntohs(sin.sin_port));
	memset(&site, 0, sizeof(site));
	site.endpoint = ep;
	site.region = (char *)"us-east-1";
	site.access_key = (char *)"AKIDEXAMPLE";
	site.secret_key = (char *)"wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
	site.token = (char *)TOKEN;
	ck_assert_int_eq(fetch_site_set("s3://vec/", &site, &cause), 0);
	ck_assert_msg(fetch_head("s3://vec/data/shard-000001.tar", &o,
	    &cause) == 0, "%s", cause);
	pthread_join(th, NULL);
	close(c.fd);
	ck_assert_uint_eq(o.size, 5);
	printf("remote-tar: libcurl's request:\n%s", c.req);

	/* HEAD /vec/data/shard-000001.tar HTTP/1.1 */
	ck_assert_int_eq(sscanf(c.req, "HEAD %511s HTTP/1.1", path), 1);
	ck_assert_str_eq(path, "/vec/data/shard-000001.tar");
	ck_assert(header_of(c.req, "authorization", auth, sizeof(auth)));
	ck_assert(header_of(c.req, "x-amz-date", date, sizeof(date)));
	ck_assert_msg(strncmp(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/",
	    40) == 0 && strstr(auth, "/us-east-1/s3/aws4_request") != NULL,
	    "%s", auth);
	ck_assert_ptr_nonnull(p = strstr(auth, "SignedHeaders="));
	snprintf(signed_h, sizeof(signed_h), "%.*s", (int)strcspn(p + 14,
	    ", "), p + 14);
	ck_assert_msg(strstr(signed_h, "x-amz-security-token") != NULL,
	    "the token is not signed: %s", signed_h);
	/* The canonical request from what arrived. */
	snprintf(canon, sizeof(canon), "HEAD\n%s\n\n", path);
	for (p = signed_h; *p != '\0'; p = *q != '\0' ? q + 1 : q) {
		q = p + strcspn(p, ";");
		snprintf(name, sizeof(name), "%.*s", (int)(q - p), p);
		ck_assert_msg(header_of(c.req, name, v, sizeof(v)), "%s", name);
		snprintf(canon + strlen(canon), sizeof(canon) - strlen(canon),
		    "%s:%s\n", name, v);
	}
	if (!header_of(c.req, "x-amz-content-sha256", v, sizeof(v)))
		sha256_hex("", 0, v);
	snprintf(canon + strlen(canon), sizeof(canon) - strlen(canon),
	    "\n%s\n%s", signed_h, v);
	sigv4(canon, date, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
	    "us-east-1", "s3", want);
	ck_assert_ptr_nonnull(p = strstr(auth, "Signature="));
	ck_assert_str_eq(p + 10, want);
}
END_TEST

/*
 * https with ca_file: nginx's self-signed certificate (made here with
 * openssl) is refused for a dataset that does not name it, and trusted
 * for one that does (a CA file is its host's: here the daemon is
 * restarted between the two).
 */
START_TEST(https_with_ca_file)
{
	char	cmd[1200], extra[1200], log[65536];

	if (access("/usr/bin/openssl", X_OK) != 0) {
		printf("remote-tar: https case skipped: no /usr/bin/openssl\n");
		return;
	}
	snprintf(cmd, sizeof(cmd), "/usr/bin/openssl req -x509 -newkey "
	    "rsa:2048 -nodes -subj /CN=127.0.0.1 -addext subjectAltName="
	    "IP:127.0.0.1 -days 1 -keyout %s/tls.key -out %s/tls.crt "
	    ">/dev/null 2>&1", dir, dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(infeedd_stop(), 0);
	nginx_stop();
	nginx_start();
	ck_assert_int_ne(nginx_tls_port, 0);
	snprintf(extra, sizeof(extra), "\n[dataset untrusted]\ntype = tar\n"
	    "shards = https://127.0.0.1:%d/set/s-000000.tar\n",
	    nginx_tls_port);
	remote_tar_config(extra);
	infeedd_start(NULL);
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "dataset 'untrusted' refused") != NULL &&
	    strstr(log, "certificate") != NULL, "%s", log);
	ck_assert_int_eq(infeedd_stop(), 0);
	snprintf(extra, sizeof(extra), "\n[dataset tls]\ntype = tar\n"
	    "shards = https://127.0.0.1:%d/set/s-{000000..%06d}.tar\n"
	    "ca_file = %s/tls.crt\n", nginx_tls_port, NSHARDS - 1, dir);
	remote_tar_config(extra);
	infeedd_start(NULL);
	remote_read_epoch("tls", NSHARDS * PER_SHARD, 1);
}
END_TEST

/*
 * The order case: ORD_SHARDS shards of one cache block each, in a cache
 * of ORD_CACHED (a block's file is its bytes and a 40-byte header).
 */
static void
order_setup(void)
{
	struct stat	st;
	char		extra[600];

	make_files(NULL);
	nginx_start();
	make_npy();
	remote_make_shards("set", "s", NSHARDS, PER_SHARD, false);
	remote_make_shards("many", "m", LAZY_SHARDS, LAZY_PER, true);
	remote_make_shards("ord", "o", ORD_SHARDS, ORD_PER, false);
	remote_make_shards("ordi", "o", ORD_SHARDS, ORD_PER, true);
	ck_assert_int_eq(stat(path_in(dir, "ord/o-000000.tar"), &st), 0);
	snprintf(cache_max, sizeof(cache_max), "%lld",
	    (long long)(ORD_CACHED * (st.st_size + 40) + 20));
	snprintf(extra, sizeof(extra), "\n[dataset ord]\ntype = tar\nshards = "
	    "http://127.0.0.1:%d/ord/o-{000000..%06d}.tar\n"
	    "\n[dataset ordi]\ntype = tar\nshards = "
	    "http://127.0.0.1:%d/ordi/o-{000000..%06d}.tar\nindex = "
	    "http://127.0.0.1:%d/ordi/counts.txt\nclasses = 10\n", nginx_port,
	    ORD_SHARDS - 1, nginx_port, ORD_SHARDS - 1, nginx_port);
	remote_tar_config(extra);
	snprintf(cache_max, sizeof(cache_max), "64M");
	infeedd_start(NULL);
}

/*
 * Three shuffled epochs of the order case's set @name (its shards under
 * /@name/) through a cache of a quarter of it: the daemon shares the
 * session's order of each shard with the cache, and the worker downloads
 * at most 1.1 x the fewest shards that order can be read with (Belady,
 * computed here from the same sampler; 1.2 x for a loaded machine), where
 * evicting the oldest downloads 1.4-1.5 x that.  With @indexed the open
 * downloads no shard; @workers read for the session in steps of @batch,
 * and @limit (in hundredths) is the bound.
 */
/* Downloads reading @seq through a cache of @cap that evicts the least recently used. */
static unsigned
lru_misses(const uint64_t *seq, size_t n, size_t cap)
{
	uint64_t	held[64];
	size_t		nheld = 0, i, j;
	unsigned	misses = 0;

	ck_assert_uint_le(cap, 64);
	for (i = 0; i < n; i++) {
		for (j = 0; j < nheld && held[j] != seq[i]; j++)
			;
		if (j == nheld) {
			misses++;
			if (nheld < cap)
				nheld++;
			j = nheld - 1;	/* the least recent goes */
		}
		memmove(&held[1], &held[0], j * sizeof(held[0]));
		held[0] = seq[i];
	}
	return (misses);
}

static void
tar_eviction_case(const char *name, bool indexed, unsigned workers,
    unsigned batch, int limit)
{
	struct infeed			*f = client();
	struct infeed_session_info	 info;
	struct infeed_options		 o;
	struct infeed_step		 st;
	struct sampler_opts		 so;
	struct sampler			 sm;
	uint64_t			 seq[3 * ORD_SHARDS * ORD_PER], e, s;
	uint64_t			 idx[ORD_SHARDS * ORD_PER];
	size_t				 n = 0, k, j;
	char				*why = NULL;
	unsigned			 best, lru;
	int				 opened, gets;
	char				 shards[64];

	snprintf(shards, sizeof(shards), "/%s/o-", name);
	opened = nginx_gets(shards);
	/* Indexed at the open, or by the workers as they read. */
	ck_assert_int_eq(opened, indexed ? 0 : ORD_SHARDS);
	infeed_options_init(&o);
	o.batch_size = batch;
	o.shuffle = true;
	o.seed = 11;
	o.load_indefinitely = true;
	o.num_workers = workers;
	o.buffer_size = 2;
	o.transform = "Resize((8, 8)), ToTensor()";
	ck_assert_msg(infeed_attach(f, name, &o, &info) == INFEED_OK, "%s",
	    infeed_error(f));
	for (e = 0; e < 3; e++)
		for (s = 0; s < info.steps_per_epoch; s++) {
			ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
			    infeed_error(f));
			ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
		}
	infeed_free(f);
	gets = nginx_gets(shards) - opened;

	/* The same order, shard by shard (4 samples each), and Belady's. */
	memset(&so, 0, sizeof(so));
	so.samples = ORD_SHARDS * ORD_PER;
	so.batch_size = batch;
	so.device_iterations = so.replication_factor = 1;
	so.gradient_accumulation = so.process_count = 1;
	so.shuffle = true;
	so.seed = 11;
	ck_assert_msg(sampler_init(&sm, &so, &why) == 0, "%s", why);
	for (e = 0; e < 3; e++)
		for (s = 0; s < sm.steps_per_epoch; s++)
			for (k = sampler_step_indices(&sm, e, s, idx), j = 0;
			    j < k; j++)
				seq[n++] = idx[j] / ORD_PER;
	sampler_clear(&sm);
	best = remote_belady_misses(seq, n, ORD_CACHED);
	lru = lru_misses(seq, n, ORD_CACHED);
	printf("remote-tar: 3 shuffled epochs of %d shards%s, %u worker%s, "
	    "through a cache of %d: %d GETs, %u at best (%.2f x), %u by LRU "
	    "(%.2f x)\n", ORD_SHARDS, indexed ? " (index =)" : "", workers,
	    workers > 1 ? "s" : "", ORD_CACHED, gets, best,
	    (double)gets / best, lru, (double)lru / best);
	/* The bound tells the order from none: LRU's count is past it. */
	ck_assert_uint_lt(best * limit, lru * 100);
	ck_assert_int_le(gets * 100, best * limit);
}

START_TEST(tar_eviction_follows_the_sessions_order)
{
	/* 1.11 here (1.07-1.09 with 4 samples a shard); 1.40-1.48 then with
	 * no order (the oldest first). */
	tar_eviction_case("ord", false, 1, 8, 120);
}
END_TEST

/*
 * The same set with index =: the workers open the shards, and the
 * daemon's cursors on them take each shard's size from the cache's meta
 * file.  Two workers, in steps of 32 that the pool cuts into jobs of 4
 * rows, which the workers take in turn: 1.13-1.15 here, 1.19-1.24 at load
 * 4-7 and 1.32 once beside the other tests (a worker fetching lags the
 * other), 1.13-1.14 with infeedd under valgrind; 1.27-1.30 when the cache
 * took each worker to read on to its step's end (before issue 38 round
 * nine: benchmarks/remote-cache tells that apart, 1.11 against 1.01, not
 * this bound); LRU 1.55, no order at all (before round eight) about so.
 */
START_TEST(indexed_tar_eviction_follows_the_sessions_order)
{
	tar_eviction_case("ordi", true, 2, 32, 140);
}
END_TEST

static Suite *
remote_tar_suite(void)
{
	Suite	*s = suite_create("remote-tar");
	TCase	*tc;

	tc = tcase_create("http");
	tcase_add_checked_fixture(tc, remote_tar_setup, remote_tar_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, http_shards_equal_local_and_download_once);
	tcase_add_test(tc, index_lets_the_first_step_skip_the_other_shards);
	tcase_add_test(tc,
	    member_index_downloads_the_steps_pages_not_their_shards);
	tcase_add_test(tc, index_count_wrong_is_named);
	tcase_add_test(tc, index_claiming_too_many_samples_is_refused);
	tcase_add_test(tc, read_ahead_downloads_later_steps_before_their_reads);
	tcase_add_test(tc, shard_faults_fail_that_session_only);
	tcase_add_test(tc, https_with_ca_file);
	tcase_add_test(tc, npy_over_http);
	suite_add_tcase(s, tc);

	tc = tcase_create("order");
	tcase_add_checked_fixture(tc, order_setup, remote_tar_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, tar_eviction_follows_the_sessions_order);
	tcase_add_test(tc, indexed_tar_eviction_follows_the_sessions_order);
	suite_add_tcase(s, tc);

	tc = tcase_create("s3");
	tcase_add_checked_fixture(tc, s3_setup, remote_tar_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, s3_signed_and_secrets_never_shown);
	tcase_add_test(tc, sigv4_matches_aws_test_vector);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	if (access(NGINX, X_OK) != 0) {
		printf("remote-tar: skipped: %s is not installed (Debian's "
		    "nginx or nginx-light; scripts/install-deps --tests)\n",
		    NGINX);
		return (77);
	}
	return (run_suite(remote_tar_suite()));
}
