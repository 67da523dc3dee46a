/* SPDX-License-Identifier: MIT */
/*
 * s3:// against a real S3-compatible server (issue 38, item 4): Debian's
 * radosgw on a one-node Ceph whose one OSD keeps its objects in memory,
 * started once for the program by radosgw-cluster (about 15 s; the
 * program skips, saying why, where Ceph is not installed or the cluster
 * does not start).  radosgw checks every request's SigV4 signature, so
 * what test-remote-tar shows with nginx (which cannot) is shown here for
 * real: tar shards, with and without index =, read from a bucket through
 * an endpoint, path-style, with the keys of a credentials file; raw and
 * npy arrays read from the bucket step for step equal to the same files
 * read locally; a wrong secret refused at open, with advice, the secret
 * in no message, and a key the bucket lacks refused naming its URL.
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

#define NPY_N		300
#define NPY_W		5

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
 * x.npy: NPY_N rows of NPY_W bytes (row i: i * 7 + j), y.npy their
 * labels (i % 10, <i8), each a v1.0 header padded so the data starts at
 * 128, as numpy writes them.
 */
static void
make_npy(void)
{
	static uint8_t	 x[NPY_N * NPY_W];
	static int64_t	 y[NPY_N];
	char		 head[160];
	size_t		 hlen;
	unsigned	 i, j;
	FILE		*fp;

	for (i = 0; i < NPY_N; i++) {
		for (j = 0; j < NPY_W; j++)
			x[i * NPY_W + j] = (uint8_t)(i * 7 + j);
		y[i] = i % 10;
	}
	for (i = 0; i < 2; i++) {
		snprintf(head, sizeof(head), "{'descr': '%s', 'fortran_order': "
		    "False, 'shape': (%d%s), }", i == 0 ? "|u1" : "<i8", NPY_N,
		    i == 0 ? ", 5" : ",");
		hlen = strlen(head);
		memset(head + hlen, ' ', 118 - hlen);
		head[117] = '\n';
		ck_assert_ptr_nonnull(fp = fopen(path_in(dir, i == 0 ? "x.npy" :
		    "y.npy"), "w"));
		fwrite("\x93NUMPY\x01\x00\x76\x00", 1, 10, fp);
		fwrite(head, 1, 118, fp);
		if (i == 0)
			fwrite(x, 1, sizeof(x), fp);
		else
			fwrite(y, 1, sizeof(y), fp);
		ck_assert_int_eq(fclose(fp), 0);
	}
}

/*
 * The harness's raw files and make_npy()'s put in the bucket under arr/;
 * sections for them read locally (raw is the harness's own) and from
 * s3:// with the keys of creds.ini, a raw set signed with the wrong
 * secret (another bucket: a site is a bucket, its keys shared by its
 * datasets) and one whose key the bucket lacks.
 */
static void
s3_arrays_put(void)
{
	static const char *const files[] = { "raw.bin", "raw-labels.bin",
	    "x.npy", "y.npy", NULL };
	char		 path[600], key[128];
	FILE		*fp;
	int		 k;

	make_npy();
	for (k = 0; files[k] != NULL; k++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[k]);
		snprintf(key, sizeof(key), BUCKET "/arr/%s", files[k]);
		ck_assert_int_eq(rgw_put(path, key), 0);
	}
	ck_assert_ptr_nonnull(fp = fopen(conf_path, "a"));
	fprintf(fp, "\n[dataset s3raw]\ntype = raw\npath = s3://" BUCKET
	    "/arr/raw.bin\nlabels = s3://" BUCKET "/arr/raw-labels.bin\n"
	    "shape = 1,%d,%d\ndtype = uint8\nlabel_dtype = int64\n"
	    "classes = %d\nendpoint = http://127.0.0.1:%d\n"
	    "region = us-east-1\ncredentials = %s/creds.ini\nprofile = ci\n",
	    RAW_H, RAW_W, RAW_CLASSES, rgw_port, dir);
	fprintf(fp, "\n[dataset npylocal]\ntype = npy\npath = %s/x.npy\n"
	    "labels = %s/y.npy\nclasses = 10\n", dir, dir);
	fprintf(fp, "\n[dataset s3npy]\ntype = npy\npath = s3://" BUCKET
	    "/arr/x.npy\nlabels = s3://" BUCKET "/arr/y.npy\nclasses = 10\n"
	    "endpoint = http://127.0.0.1:%d\nregion = us-east-1\n"
	    "credentials = %s/creds.ini\nprofile = ci\n", rgw_port, dir);
	/* A site is a bucket, its keys shared: the wrong one has its own. */
	fprintf(fp, "\n[dataset s3rawwrong]\ntype = raw\npath = "
	    "s3://wrongarr/arr/raw.bin\nlabels = s3://wrongarr/arr/"
	    "raw-labels.bin\nshape = 1,%d,%d\ndtype = uint8\nlabel_dtype = int64\n"
	    "classes = %d\nendpoint = http://127.0.0.1:%d\n"
	    "credentials = %s/creds.ini\nprofile = wrong\n", RAW_H, RAW_W,
	    RAW_CLASSES, rgw_port, dir);
	fprintf(fp, "\n[dataset s3rawmissing]\ntype = raw\npath = s3://"
	    BUCKET "/arr/no-such.bin\nlabels = s3://" BUCKET "/arr/"
	    "raw-labels.bin\nshape = 1,%d,%d\ndtype = uint8\n"
	    "label_dtype = int64\nclasses = %d\nendpoint = http://127.0.0.1:%d\ncredentials = %s/creds.ini\n"
	    "profile = ci\n", RAW_H, RAW_W, RAW_CLASSES, rgw_port, dir);
	ck_assert_int_eq(fclose(fp), 0);
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
	s3_arrays_put();
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

/* A session of @name, shuffled by @seed, batches of 23, int64 labels. */
static struct infeed *
s3_attach(const char *name, uint64_t seed, struct infeed_session_info *info)
{
	struct infeed		*f = client();
	struct infeed_options	 o;

	infeed_options_init(&o);
	o.batch_size = 23;
	o.shuffle = true;
	o.seed = seed;
	o.drop_last = false;
	o.label_dtype = INFEED_DTYPE_INT64;
	ck_assert_msg(infeed_attach(f, name, &o, info) == INFEED_OK,
	    "%s: %s", name, infeed_error(f));
	return (f);
}

/*
 * One epoch of @local and of @remote side by side, the same seed: each
 * step's indices, bytes and labels the same; @n samples in all.
 */
static void
steps_equal(const char *local, const char *remote, uint64_t n)
{
	struct infeed_session_info	 li, ri;
	struct infeed			*lf = s3_attach(local, 5, &li);
	struct infeed			*rf = s3_attach(remote, 5, &ri);
	struct infeed_step		 ls, rs;
	uint64_t			 s, count = 0;

	ck_assert_uint_eq(ri.steps_per_epoch, li.steps_per_epoch);
	ck_assert_uint_eq(ri.sample_bytes, li.sample_bytes);
	for (s = 0; s < li.steps_per_epoch; s++) {
		ck_assert_msg(infeed_next(lf, &ls) == INFEED_OK, "%s",
		    infeed_error(lf));
		ck_assert_msg(infeed_next(rf, &rs) == INFEED_OK, "%s: step "
		    "%llu: %s", remote, (unsigned long long)s,
		    infeed_error(rf));
		ck_assert_uint_eq(rs.rows, ls.rows);
		ck_assert_msg(memcmp(rs.indices, ls.indices, ls.rows *
		    sizeof(*ls.indices)) == 0 && memcmp(rs.data, ls.data,
		    ls.rows * li.sample_bytes) == 0 && memcmp(rs.labels64,
		    ls.labels64, ls.rows * sizeof(int64_t)) == 0, "%s: step "
		    "%llu differs from %s's", remote, (unsigned long long)s,
		    local);
		count += ls.rows;
		ck_assert_int_eq(infeed_release(lf, &ls), INFEED_OK);
		ck_assert_int_eq(infeed_release(rf, &rs), INFEED_OK);
	}
	ck_assert_uint_eq(count, n);
	infeed_free(lf);
	infeed_free(rf);
}

/*
 * raw and npy arrays from the bucket, every range request signed and
 * checked by radosgw: each step equals the same files' read locally.
 */
START_TEST(radosgw_serves_raw_and_npy_arrays)
{
	steps_equal("raw", "s3raw", RAW_N);
	steps_equal("npylocal", "s3npy", NPY_N);
	printf("remote-s3: raw (%d samples) and npy (%d) from radosgw: every "
	    "step equal to the local files'\n", RAW_N, NPY_N);
}
END_TEST

/*
 * An array set signed with a wrong secret, and one naming a key the
 * bucket lacks: each refused at open, saying why; no secret shown.
 */
START_TEST(wrong_keys_of_arrays_are_clear_errors)
{
	char	log[65536], *p;

	read_log(log, sizeof(log));
	ck_assert_msg((p = strstr(log, "dataset 's3rawwrong' refused")) !=
	    NULL && strstr(p, "403") != NULL && strstr(p, "check the "
	    "credentials") != NULL, "%s", log);
	ck_assert_msg((p = strstr(log, "dataset 's3rawmissing' refused")) !=
	    NULL && strstr(p, "s3://" BUCKET "/arr/no-such.bin") != NULL &&
	    strstr(p, "404") != NULL, "%s", log);
	printf("remote-s3: %.*s\n", (int)strcspn(p, "\n"), p);
	ck_assert_ptr_null(strstr(log, SECRET));
	ck_assert_ptr_null(strstr(log, WRONG));
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
	tcase_add_test(tc, radosgw_serves_raw_and_npy_arrays);
	tcase_add_test(tc, wrong_keys_of_arrays_are_clear_errors);
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
