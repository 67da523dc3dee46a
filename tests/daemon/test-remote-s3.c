/* SPDX-License-Identifier: MIT */
/*
 * s3:// against a real S3-compatible server (issue 38, item 4): Debian's
 * radosgw on a one-node Ceph whose one OSD keeps its objects in memory,
 * started once for the program by radosgw-cluster (about 15 s; the
 * program skips, saying why, where Ceph is not installed or the cluster
 * does not start).  radosgw checks every request's SigV4 signature, so
 * what test-remote-tar shows with nginx (which cannot) is shown here for
 * real: tar shards, with and without index =, read from a bucket through
 * an endpoint, path-style, with the keys of a credentials file; a wrong
 * secret refused at open, with advice, the secret in no message.
 */

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "remote-shards.h"

#define NSHARDS		3
#define PER_SHARD	40
#define ACCESS		"AKIDINFEEDTEST"
#define SECRET		"zzRGWsecretNEVERshownZZ"
#define WRONG		"zzWRONGsecretNEVERshownZZ"
#define BUCKET		"infeed"
/* The longest TMPDIR the cluster's sockets fit under (107 bytes a path). */
#define RGW_TMPDIR_MAX	40

static char	cluster_dir[512];
static int	rgw_port;

/* Run @argv (a NULL-ended list); its exit status. */
static int
run(const char *const argv[])
{
	pid_t	pid;
	int	st;

	if ((pid = fork()) == 0) {
		execvp(argv[0], (char *const *)(uintptr_t)argv);
		_exit(127);
	}
	if (pid == -1 || waitpid(pid, &st, 0) == -1)
		return (-1);
	return (WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* PUT @file (NULL: none, a bucket) at @key of radosgw, signed by curl. */
static int
rgw_put(const char *file, const char *key)
{
	char	url[512];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s", rgw_port, key);
	if (file == NULL)
		return (run((const char *const []){ "curl", "-sSf", "--aws-sigv4",
		    "aws:amz:us-east-1:s3", "-u", ACCESS ":" SECRET, "-H",
		    "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-X", "PUT",
		    "-o", "/dev/null", url, NULL }));
	return (run((const char *const []){ "curl", "-sSf", "--aws-sigv4",
	    "aws:amz:us-east-1:s3", "-u", ACCESS ":" SECRET, "-H",
	    "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T", file,
	    "-o", "/dev/null", url, NULL }));
}

/*
 * Shards (with counts.txt) made and put in the bucket; datasets on them
 * with the keys of creds.ini, and one with a wrong secret.
 */
static void
s3_setup(void)
{
	char	extra[4096], path[600], key[128];
	int	k;

	make_files(NULL);
	remote_make_shards("set", "s", NSHARDS, PER_SHARD, true);
	for (k = 0; k < NSHARDS; k++) {
		snprintf(path, sizeof(path), "%s/set/s-%06d.tar", dir, k);
		snprintf(key, sizeof(key), BUCKET "/set/s-%06d.tar", k);
		ck_assert_int_eq(rgw_put(path, key), 0);
	}
	snprintf(path, sizeof(path), "%s/set/counts.txt", dir);
	ck_assert_int_eq(rgw_put(path, BUCKET "/set/counts.txt"), 0);
	snprintf(path, sizeof(path), "[ci]\naws_access_key_id = " ACCESS
	    "\naws_secret_access_key = " SECRET "\n[wrong]\n"
	    "aws_access_key_id = " ACCESS "\naws_secret_access_key = " WRONG
	    "\n");
	write_file(path_in(dir, "creds.ini"), path, strlen(path));
	snprintf(extra, sizeof(extra), "cache_dir = %s/cache\ncache_max = 64M\n"
	    "\n[dataset s3tar]\ntype = tar\nshards = s3://" BUCKET "/set/"
	    "s-{000000..%06d}.tar\nendpoint = http://127.0.0.1:%d\n"
	    "region = us-east-1\ncredentials = %s/creds.ini\nprofile = ci\n"
	    "\n[dataset s3index]\ntype = tar\nshards = s3://" BUCKET "/set/"
	    "s-{000000..%06d}.tar\nindex = s3://" BUCKET "/set/counts.txt\n"
	    "classes = 10\nendpoint = http://127.0.0.1:%d\n"
	    "credentials = %s/creds.ini\nprofile = ci\n"
	    "\n[dataset s3wrong]\ntype = tar\nshards = s3://wrongsite/set/"
	    "s-000000.tar\nendpoint = http://127.0.0.1:%d/" BUCKET "-alias\n"
	    "credentials = %s/creds.ini\nprofile = wrong\n",
	    dir, NSHARDS - 1, rgw_port, dir, NSHARDS - 1, rgw_port, dir,
	    rgw_port, dir);
	make_config(extra);
	infeedd_start(NULL);
}

static void
s3_teardown(void)
{
	remove_tree(path_in(dir, "cache"));
	teardown();
}

/*
 * radosgw checks each signature: shards read by their index at open, and
 * lazily with index =, serve the local shards' samples.
 */
START_TEST(radosgw_serves_signed_range_reads)
{
	remote_read_epoch("s3tar", NSHARDS * PER_SHARD, 1);
	remote_read_epoch("s3index", NSHARDS * PER_SHARD, 2);
}
END_TEST

/* A wrong secret: refused at open, with advice; no secret in the log. */
START_TEST(wrong_secret_is_refused_and_never_shown)
{
	char	log[65536];

	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "dataset 's3wrong' refused") != NULL &&
	    strstr(log, "403") != NULL && strstr(log, "check the "
	    "credentials") != NULL, "%s", log);
	ck_assert_ptr_null(strstr(log, SECRET));
	ck_assert_ptr_null(strstr(log, WRONG));
}
END_TEST

static Suite *
remote_s3_suite(void)
{
	Suite	*s = suite_create("remote-s3");
	TCase	*tc = tcase_create("radosgw");

	tcase_add_checked_fixture(tc, s3_setup, s3_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, radosgw_serves_signed_range_reads);
	tcase_add_test(tc, wrong_secret_is_refused_and_never_shown);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	const char	*script = getenv("RADOSGW_CLUSTER");
	const char	*need[] = { "/usr/bin/radosgw", "/usr/bin/ceph-mon",
	    "/usr/bin/ceph-osd", "/usr/bin/ceph", "/usr/bin/radosgw-admin",
	    "/usr/bin/curl", NULL };
	const char	*tmp;
	char		 mp[16], rp[16];
	int		 i, rc;

	for (i = 0; need[i] != NULL; i++) {
		if (access(need[i], X_OK) != 0) {
			printf("remote-s3: skipped: %s is not installed "
			    "(Debian's radosgw, ceph-mon, ceph-osd and curl; "
			    "scripts/install-deps --tests)\n", need[i]);
			return (77);
		}
	}
	if (script == NULL) {
		printf("remote-s3: skipped: set RADOSGW_CLUSTER to "
		    "tests/daemon/radosgw-cluster\n");
		return (77);
	}
	/*
	 * Under TMPDIR, as every test's folder; Ceph's admin sockets go in
	 * it, and a socket's path has at most 107 bytes, so a longer TMPDIR
	 * gives way to /tmp.
	 */
	if ((tmp = getenv("TMPDIR")) == NULL || *tmp == '\0' ||
	    strlen(tmp) > RGW_TMPDIR_MAX)
		tmp = "/tmp";
	snprintf(cluster_dir, sizeof(cluster_dir), "%s/infeed-rgw-XXXXXX",
	    tmp);
	if (mkdtemp(cluster_dir) == NULL) {
		printf("remote-s3: cannot make %s: %s\n", cluster_dir,
		    strerror(errno));
		return (1);
	}
	snprintf(mp, sizeof(mp), "%d", remote_free_port());
	rgw_port = remote_free_port();
	snprintf(rp, sizeof(rp), "%d", rgw_port);
	if (run((const char *const []){ script, "start", cluster_dir, mp,
	    rp, ACCESS, SECRET, NULL }) != 0 || rgw_put(NULL, BUCKET) != 0) {
		run((const char *const []){ script, "stop", cluster_dir,
		    NULL });
		printf("remote-s3: skipped: the one-node Ceph with radosgw "
		    "did not start here (see above)\n");
		remove_tree(cluster_dir);
		return (77);
	}
	rc = run_suite(remote_s3_suite());
	run((const char *const []){ script, "stop", cluster_dir, NULL });
	remove_tree(cluster_dir);
	return (rc);
}
