/* SPDX-License-Identifier: MIT */
/*
 * Reads in flight for every reader (issue 36, item 1, and "nothing given
 * up"), through slowfs (tests/slowfs.c), storage slow for real: the same
 * files as npy, IDX, a tar of images and an imagefolder, each catalogued
 * twice, once behind the store (a delay on every read) and once from
 * the page cache, and the npy pair as a trainer's own files (passed by
 * descriptor, opened through the store or not).  For each reader an epoch through the store gives the
 * steps of the page cache's, byte for byte, every row once, and the store
 * saw many of a step's reads at once (its max_in_flight, with one worker
 * and read_ahead off: a reader that fell back to one blocking read at a
 * time shows 1 or 2).  Then two trainers sharing a group, and an elastic
 * resume (8 processes, then 6), over the store: the page cache's rows.
 */

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "infeed.h"
#include "slowfs-mount.h"

#define RD_N		64		/* samples of each dataset */
#define RD_SIDE		64		/* an array row: 64 x 64 uint8, a page */
#define RD_ROW		(RD_SIDE * RD_SIDE)
#define RD_BATCH	16
#define RD_DELAY_US	"20000"		/* 20 ms a read */
#define RD_NPY_HEAD	128		/* the npy header, padded */
#define RD_MAX_STEPS	64		/* steps an epoch records, at most */

static struct slowfs	fs;
static bool		mounted;

/* Byte @j of array sample @i. */
static uint8_t
rd_byte(uint64_t i, unsigned j)
{
	return ((uint8_t)(i * 37 + j * 11 + (j >> 8)));
}

static void
rd_put(const char *rel, const void *buf, size_t len)
{
	write_file(path_in(dir, rel), buf, len);
}

/* @v big-endian into @p (IDX headers). */
static void
rd_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* x.npy and y.npy; x.idx and y.idx (the same rows and labels). */
static void
rd_arrays(void)
{
	static uint8_t	x[RD_NPY_HEAD + RD_N * RD_ROW];
	uint8_t		y[RD_NPY_HEAD + RD_N * 8], yl[8 + RD_N];
	int		n;
	unsigned	i, j;
	int64_t		l;

	for (i = 0; i < RD_N; i++)
		for (j = 0; j < RD_ROW; j++)
			x[RD_NPY_HEAD + i * RD_ROW + j] = rd_byte(i, j);
	/* npy 1.0: magic, version, header length, a dict padded to 128. */
	memcpy(x, "\x93NUMPY\x01\x00", 8);
	n = snprintf((char *)x + 10, RD_NPY_HEAD - 10, "{'descr': '|u1', "
	    "'fortran_order': False, 'shape': (%d, %d, %d), }", RD_N,
	    RD_SIDE, RD_SIDE);
	memset(x + 10 + n, ' ', RD_NPY_HEAD - 10 - (size_t)n - 1);
	x[RD_NPY_HEAD - 1] = '\n';
	x[8] = RD_NPY_HEAD - 10;
	x[9] = 0;
	memcpy(y, x, RD_NPY_HEAD);
	n = snprintf((char *)y + 10, RD_NPY_HEAD - 10, "{'descr': '<i8', "
	    "'fortran_order': False, 'shape': (%d,), }", RD_N);
	memset(y + 10 + n, ' ', RD_NPY_HEAD - 10 - (size_t)n - 1);
	for (i = 0; i < RD_N; i++) {
		l = i % 10;
		memcpy(y + RD_NPY_HEAD + i * 8, &l, 8);
		yl[8 + i] = (uint8_t)l;
	}
	rd_put("src/x.npy", x, sizeof(x));
	rd_put("src/y.npy", y, sizeof(y));
	/* IDX: 0 0 type dims, then each dimension, big-endian. */
	memset(x, 0, 4);
	x[2] = 0x08;
	x[3] = 3;
	rd_be32(x + 4, RD_N);
	rd_be32(x + 8, RD_SIDE);
	rd_be32(x + 12, RD_SIDE);
	memmove(x + 16, x + RD_NPY_HEAD, (size_t)RD_N * RD_ROW);
	rd_put("src/x.idx", x, 16 + (size_t)RD_N * RD_ROW);
	memset(yl, 0, 4);
	yl[2] = 0x08;
	yl[3] = 1;
	rd_be32(yl + 4, RD_N);
	rd_put("src/y.idx", yl, sizeof(yl));
}

/*
 * The images: tests/images' fixtures, one after another, as an
 * imagefolder of 2 classes and as a tar shard (NNN.png or .jpg with
 * NNN.cls), made with tar(1) in name order.
 */
static void
rd_images(void)
{
	static const char *const img[] = { "g1.png", "g2.png", "g4.png",
	    "g16.png", "l.png", "la.png", "p1.png", "p4.png", "p8.png",
	    "rgb.png", "rgba.png", "rgb16.png", "rgba16.png", "rgb-adam7.png",
	    "j420-even.jpg", "j420-odd.jpg", "j422-odd.jpg", "j444-odd.jpg",
	    "jgrey-odd.jpg", "jprog-odd.jpg" };
	const char	*fixtures = getenv("IMAGE_FIXTURES");
	static char	 buf[1 << 16];
	char		 path[700], rel[64], cmd[1600], cls[4];
	const char	*name, *ext;
	ssize_t		 len;
	unsigned	 i;
	int		 fd;

	ck_assert_msg(fixtures != NULL, "set IMAGE_FIXTURES to tests/images");
	ck_assert_int_eq(mkdir(path_in(dir, "src/imgs"), 0755), 0);
	ck_assert_int_eq(mkdir(path_in(dir, "src/imgs/a"), 0755), 0);
	ck_assert_int_eq(mkdir(path_in(dir, "src/imgs/b"), 0755), 0);
	ck_assert_int_eq(mkdir(path_in(dir, "tarsrc"), 0755), 0);
	for (i = 0; i < RD_N; i++) {
		name = img[i % (sizeof(img) / sizeof(img[0]))];
		ext = strrchr(name, '.');
		snprintf(path, sizeof(path), "%s/%s", fixtures, name);
		ck_assert_int_ne(fd = open(path, O_RDONLY), -1);
		ck_assert_int_gt(len = read(fd, buf, sizeof(buf)), 0);
		close(fd);
		snprintf(rel, sizeof(rel), "src/imgs/%c/%03u%s", "ab"[i % 2],
		    i, ext);
		rd_put(rel, buf, (size_t)len);
		snprintf(rel, sizeof(rel), "tarsrc/%03u%s", i, ext);
		rd_put(rel, buf, (size_t)len);
		snprintf(rel, sizeof(rel), "tarsrc/%03u.cls", i);
		snprintf(cls, sizeof(cls), "%u", i % 10);
		rd_put(rel, cls, strlen(cls));
	}
	snprintf(cmd, sizeof(cmd), "tar -C '%s/tarsrc' --sort=name "
	    "--format=ustar -cf '%s/src/set.tar' . && rm -r '%s/tarsrc'",
	    dir, dir, dir);
	ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

/* Each dataset behind the store (NAME-slow) and from @src (NAME-cache). */
static void
rd_catalogue(const char *src, const char *suffix, FILE *fp)
{
	fprintf(fp, "\n[dataset npy-%s]\ntype = npy\npath = %s/x.npy\n"
	    "labels = %s/y.npy\nclasses = 10\n"
	    "\n[dataset idx-%s]\ntype = idx\nimages = %s/x.idx\n"
	    "labels = %s/y.idx\nclasses = 10\n"
	    "\n[dataset tar-%s]\ntype = tar\nshards = %s/set.tar\n"
	    "\n[dataset folder-%s]\ntype = imagefolder\nroot = %s/imgs\n",
	    suffix, src, src, suffix, src, src, suffix, src, suffix, src);
}

/*
 * A fresh directory, the files behind slowfs and infeedd with one worker
 * and read_ahead off (a step's reads go in flight together or not at
 * all), the store's counters reset once start-up's reads are over.
 * False: FUSE cannot be mounted here.
 */
static bool
rd_start(void)
{
	char		src[600], mnt[600];
	uint64_t	reads = UINT64_MAX;
	FILE		*fp;
	int		i;

	make_files("read_ahead = off\ngroup_window = 0");
	/* One worker: the store's depth is a worker's, not the pool's. */
	snprintf(src, sizeof(src), "%s/src", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	rd_arrays();
	rd_images();
	ck_assert_ptr_nonnull(fp = fopen(conf_path, "a"));
	rd_catalogue(mnt, "slow", fp);
	rd_catalogue(src, "cache", fp);
	fclose(fp);
	/* Start-up (a tar's every header) quick: the delay comes after. */
	if (!slowfs_start(&fs, src, mnt, (const char *const []){ "--delay-us",
	    "0", "--depth", "256", "--readahead-kib", "4", NULL }))
		return (false);
	mounted = true;
	infeedd_start("1");
	for (i = 0; i < 100; i++) {
		usleep(200000);
		if (slowfs_counter(&fs, "reads") == reads &&
		    slowfs_counter(&fs, "in_flight") == 0)
			break;
		reads = slowfs_counter(&fs, "reads");
	}
	/* What start-up read is cached no more. */
	slowfs_command(&fs, "drop");
	slowfs_command(&fs, "delay-us " RD_DELAY_US);
	slowfs_command(&fs, "reset");
	return (true);
}

static void
rd_stop(void)
{
	infeedd_stop();
	if (mounted)
		slowfs_stop(&fs);
	mounted = false;
	remove_tree(path_in(dir, "src"));
	remove_tree(path_in(dir, "mnt"));
	rm_dir();
}

/* FNV-1a of @len bytes at @p, on from @h. */
static uint64_t
rd_hash(uint64_t h, const void *p, size_t len)
{
	const uint8_t	*b = p;

	while (len-- > 0)
		h = (h ^ *b++) * 0x100000001b3ull;
	return (h);
}

/* Attach @name with the job's options (process @rank of @procs). */
static struct infeed *
rd_attach(const char *name, uint32_t rank, uint32_t procs,
    const struct infeed_elastic_stage *stage, uint64_t *row_bytes)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_session_info info;
	struct infeed_files	 fl;
	char			 path[600];

	infeed_options_init(&o);
	o.batch_size = RD_BATCH / procs > 0 ? RD_BATCH / procs : 1;
	o.shuffle = true;
	o.seed = 5;
	o.buffer_size = 1;
	o.load_indefinitely = false;
	o.distributed_process_id = rank;
	o.distributed_process_count = procs;
	if (strncmp(name, "tar", 3) == 0 || strncmp(name, "folder", 6) == 0)
		o.transform = "Resize((8, 8)), ToTensor()";
	if (stage != NULL) {
		o.nstart_epoch_stages = 1;
		o.start_epoch_stages[0] = *stage;
	}
	info.struct_size = sizeof(info);
	if (strncmp(name, "files-", 6) == 0) {
		/* A trainer's own npy pair, "files-slow" or "files-cache". */
		infeed_files_init(&fl);
		snprintf(path, sizeof(path), "%s/%s/x.npy", dir, strcmp(name +
		    6, "slow") == 0 ? "mnt" : "src");
		ck_assert_int_ne(fl.data_fd = open(path, O_RDONLY), -1);
		memcpy(strrchr(path, '/') + 1, "y", 1);
		ck_assert_int_ne(fl.labels_fd = open(path, O_RDONLY), -1);
		fl.data_format = fl.labels_format = INFEED_FILE_NPY;
		ck_assert_msg(infeed_attach_files(f, name, &fl, &o, &info) ==
		    INFEED_OK, "%s: %s", name, infeed_error(f));
		close(fl.data_fd);
		close(fl.labels_fd);
	} else
		ck_assert_msg(infeed_attach(f, name, &o, &info) == INFEED_OK,
		    "%s: %s", name, infeed_error(f));
	*row_bytes = info.sample_bytes;
	return (f);
}

/*
 * Up to @max steps of @f (0: to the epoch's end), each step's hash (its
 * rows, labels and indices) into @h, each row counted in @seen.
 * Return: the steps taken.
 */
static unsigned
rd_steps(struct infeed *f, uint64_t row_bytes, unsigned max, uint64_t *h,
    uint8_t *seen)
{
	struct infeed_step	st;
	unsigned		n = 0;
	uint64_t		r, label;
	int			rc = INFEED_OK;

	while ((max == 0 || n < max) && (rc = infeed_next(f, &st)) ==
	    INFEED_OK) {
		ck_assert_uint_lt(n, RD_MAX_STEPS);
		h[n] = rd_hash(0xcbf29ce484222325ull, st.data,
		    st.rows * row_bytes);
		h[n] = rd_hash(h[n], st.indices, st.rows * sizeof(uint64_t));
		for (r = 0; r < st.rows; r++) {
			label = st.labels64 != NULL ? (uint64_t)st.labels64[r] :
			    (uint64_t)st.labels[r];
			h[n] = rd_hash(h[n], &label, sizeof(label));
			ck_assert_uint_lt(st.indices[r], RD_N);
			seen[st.indices[r]]++;
		}
		n++;
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_msg(rc == INFEED_OK || rc == INFEED_END_OF_DATA, "%s",
	    infeed_error(f));
	return (n);
}

/* Every sample once in @seen (@n of them: the rest, dropped, none). */
static void
rd_once(const char *what, const uint8_t *seen)
{
	unsigned	i, once = 0;

	for (i = 0; i < RD_N; i++) {
		ck_assert_msg(seen[i] <= 1, "%s: sample %u %u times", what, i,
		    seen[i]);
		once += seen[i];
	}
	ck_assert_msg(once == RD_N / RD_BATCH * RD_BATCH, "%s: %u samples "
	    "of %d", what, once, RD_N);
}

/* An epoch of @name through the store and from the page cache. */
static void
rd_reader(const char *name, uint64_t min_depth)
{
	uint64_t	 hs[RD_MAX_STEPS], hc[RD_MAX_STEPS], bytes, depth, reads;
	uint64_t	 t0, ms;
	uint8_t		 seen[RD_N];
	char		 ds[64];
	struct infeed	*f;
	unsigned	 ns, nc, i;

	if (!rd_start()) {
		rd_stop();
		return;
	}
	snprintf(ds, sizeof(ds), "%s-slow", name);
	memset(seen, 0, sizeof(seen));
	t0 = now_ms();
	f = rd_attach(ds, 0, 1, NULL, &bytes);
	ns = rd_steps(f, bytes, 0, hs, seen);
	ms = now_ms() - t0;
	infeed_free(f);
	rd_once(ds, seen);
	depth = slowfs_counter(&fs, "max_in_flight");
	reads = slowfs_counter(&fs, "reads");
	snprintf(ds, sizeof(ds), "%s-cache", name);
	memset(seen, 0, sizeof(seen));
	f = rd_attach(ds, 0, 1, NULL, &bytes);
	nc = rd_steps(f, bytes, 0, hc, seen);
	infeed_free(f);
	rd_once(ds, seen);
	fprintf(stderr, "%s: an epoch of %u steps of %d through a store of "
	    "%s us a read: %" PRIu64 " ms, %" PRIu64 " reads, %" PRIu64
	    " in flight at most\n", name, ns, RD_BATCH, RD_DELAY_US, ms,
	    reads, depth);
	ck_assert_uint_eq(ns, nc);
	for (i = 0; i < ns; i++)
		ck_assert_msg(hs[i] == hc[i], "%s: step %u through the store "
		    "differs from the page cache's", name, i);
	/* One read at a time: 1 (2 with the next job's first asked). */
	ck_assert_msg(depth >= min_depth, "%s: %" PRIu64 " reads in "
	    "flight at most", name, depth);
	rd_stop();
}

START_TEST(npy_reads_in_flight)
{
	rd_reader("npy", RD_BATCH / 2);
}
END_TEST

START_TEST(idx_reads_in_flight)
{
	rd_reader("idx", RD_BATCH / 2);
}
END_TEST

START_TEST(tar_reads_in_flight)
{
	rd_reader("tar", 3);
}
END_TEST

START_TEST(imagefolder_reads_in_flight)
{
	rd_reader("folder", 3);
}
END_TEST

START_TEST(own_files_reads_in_flight)
{
	rd_reader("files", 4);
}
END_TEST

/*
 * Two trainers of one job share a group (share, the default) on the
 * store: each gets every row once, the page cache's steps.
 */
START_TEST(shared_group_through_the_store)
{
	uint64_t	 h[3][RD_MAX_STEPS], bytes, depth;
	uint8_t		 seen[3][RD_N];
	struct infeed	*a, *b;
	unsigned	 n[3], i, k;
	struct infeed_step st;

	if (!rd_start()) {
		rd_stop();
		return;
	}
	memset(seen, 0, sizeof(seen));
	a = rd_attach("npy-slow", 0, 1, NULL, &bytes);
	b = rd_attach("npy-slow", 0, 1, NULL, &bytes);
	/* In turn, a step each: both in the group all along. */
	n[0] = n[1] = 0;
	for (k = 0; k < RD_N / RD_BATCH; k++) {
		n[0] += rd_steps(a, bytes, 1, h[0] + n[0], seen[0]);
		n[1] += rd_steps(b, bytes, 1, h[1] + n[1], seen[1]);
	}
	ck_assert_int_eq(infeed_next(a, &st), INFEED_END_OF_DATA);
	ck_assert_int_eq(infeed_next(b, &st), INFEED_END_OF_DATA);
	depth = slowfs_counter(&fs, "max_in_flight");
	fprintf(stderr, "group: %" PRIu64 " reads, %" PRIu64 " in flight at "
	    "most\n", slowfs_counter(&fs, "reads"), depth);
	ck_assert_msg(depth >= RD_BATCH / 2, "group: %" PRIu64 " reads in "
	    "flight at most", depth);
	infeed_free(a);
	infeed_free(b);
	a = rd_attach("npy-cache", 0, 1, NULL, &bytes);
	n[2] = rd_steps(a, bytes, 0, h[2], seen[2]);
	infeed_free(a);
	for (k = 0; k < 3; k++) {
		rd_once(k < 2 ? "a trainer of the group" : "the page cache",
		    seen[k]);
		ck_assert_uint_eq(n[k], RD_N / RD_BATCH);
		for (i = 0; i < n[k]; i++)
			ck_assert_msg(h[k][i] == h[2][i], "trainer %u step %u "
			    "differs from the page cache's", k, i);
	}
	rd_stop();
}
END_TEST

/*
 * An elastic resume over the store: 8 processes take a step of an epoch
 * (steps of RD_BATCH / 8 rows each), 6 finish it (stages: 8 processes, 1
 * step).  Every row once, and each process's steps those of the same
 * run from the page cache.
 */
static unsigned
rd_elastic(const char *name, uint64_t *h)
{
	/* A process's combined batch: its own rows a step. */
	struct infeed_elastic_stage stage = { 8, 0, RD_BATCH / 8, 1 };
	uint8_t		 seen[RD_N];
	uint64_t	 bytes;
	struct infeed	*f;
	unsigned	 n = 0, r, i, once = 0;

	memset(seen, 0, sizeof(seen));
	for (r = 0; r < 8; r++) {
		f = rd_attach(name, r, 8, NULL, &bytes);
		n += rd_steps(f, bytes, 1, h + n, seen);
		infeed_free(f);
	}
	for (r = 0; r < 6; r++) {
		f = rd_attach(name, r, 6, &stage, &bytes);
		n += rd_steps(f, bytes, 0, h + n, seen);
		infeed_free(f);
	}
	for (i = 0; i < RD_N; i++) {
		ck_assert_msg(seen[i] <= 1, "%s: sample %u %u times", name, i,
		    seen[i]);
		once += seen[i];
	}
	/* 8 x 2 rows, then steps of 6 x 2 rows: 48 rows, 4 dropped. */
	ck_assert_msg(once >= RD_N - 6 * (RD_BATCH / 8), "%s: %u samples",
	    name, once);
	return (n);
}

START_TEST(elastic_resume_through_the_store)
{
	uint64_t	hs[RD_MAX_STEPS], hc[RD_MAX_STEPS];
	unsigned	ns, nc, i;

	if (!rd_start()) {
		rd_stop();
		return;
	}
	ns = rd_elastic("npy-slow", hs);
	nc = rd_elastic("npy-cache", hc);
	fprintf(stderr, "elastic: %u steps, %" PRIu64 " reads\n", ns,
	    slowfs_counter(&fs, "reads"));
	ck_assert_uint_eq(ns, nc);
	for (i = 0; i < ns; i++)
		ck_assert_msg(hs[i] == hc[i], "elastic step %u differs", i);
	rd_stop();
}
END_TEST

static Suite *
inflight_readers_suite(void)
{
	Suite	*s = suite_create("inflight-readers");
	TCase	*tc = tcase_create("readers");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, npy_reads_in_flight);
	tcase_add_test(tc, idx_reads_in_flight);
	tcase_add_test(tc, tar_reads_in_flight);
	tcase_add_test(tc, imagefolder_reads_in_flight);
	tcase_add_test(tc, own_files_reads_in_flight);
	suite_add_tcase(s, tc);
	tc = tcase_create("nothing-given-up");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, shared_group_through_the_store);
	tcase_add_test(tc, elastic_resume_through_the_store);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	if (!slowfs_probe())
		return (77);
	return (run_suite(inflight_readers_suite()));
}
