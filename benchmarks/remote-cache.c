/* SPDX-License-Identifier: MIT */
/*
 * Issue 38's cache targets: a remote raw dataset served by a real nginx
 * on loopback, read by a private infeedd through its host cache.
 *
 *   data:     --blocks blocks of 1 MiB (64) of records of --record-kib
 *             KiB (16), and their int64 labels, made in a temporary
 *             folder that nginx serves.
 *   order:    a cache of --cache-pct % (25) of the data's blocks, one
 *             trainer, --epochs shuffled epochs (3), batch --batch (32),
 *             seed 1, --workers workers (2): the blocks downloaded
 *             (infeedd's cache_misses) against the fewest that order can
 *             be read with, computed here from the same sampler with
 *             Belady's policy (evict the block needed furthest ahead: the
 *             optimum for blocks of one size).  Target: <= 1.1 x.
 *   lru:      the same run with INFEED_CACHE_EVICT=lru in infeedd's
 *             environment (least recently used: a setting for this
 *             benchmark only, what other loaders' caches do), for
 *             comparison.
 *   shared:   --trainers trainers (4), seeds 1, 2, ..., each its own
 *             process and session (different orders: no shared
 *             pipeline), --epochs epochs at once through a cache that
 *             holds the dataset: each block is downloaded once per epoch
 *             per host at most (asserted), not once per trainer.
 *
 * --npy serves the same records as .npy arrays (data and labels, a header
 * of RC_NPY_HEADER bytes each, then the records), so the order the cache
 * is given counts records from after the header.
 *
 * --tar serves --blocks WebDataset tar shards instead, each under one
 * block: samples of an 8x8 grey PNG, a .txt member that brings the
 * sample to --record-kib KiB, and a .cls label (so a shard is a block, and
 * the fewest downloads are Belady's over the shards); with --index the
 * set has `index = counts.txt`, so the daemon opens no shard and the
 * workers index each as they first read it (issue 38, round eight).
 *
 * Each run starts with an empty cache and a fresh infeedd.  Every trainer
 * checks a byte of each record and its label.  It prints a table and
 * exits 1 when a target is missed or a record is wrong.
 *
 *     build/benchmarks/remote-cache build/daemon/infeedd [--blocks 64]
 *         [--record-kib 16] [--cache-pct 25] [--epochs 3] [--batch 32]
 *         [--workers 2] [--trainers 4] [--npy | --tar [--index]]
 *
 * It needs /usr/sbin/nginx (Debian's nginx or nginx-light).  The figures
 * are counts of blocks, not times: a busy machine changes them only
 * through the order the workers happen to read in.
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "infeed.h"
#include "sampler.h"

#define RC_NGINX	"/usr/sbin/nginx"
#define RC_BLOCK	(1024 * 1024)	/* cache.c's CACHE_BLOCK */
#define RC_HEADER	40		/* a block file's header */
#define RC_CLASSES	10
#define RC_NPY_HEADER	128		/* --npy: a .npy file's header */

struct rc_cfg {
	const char	*infeedd;
	unsigned	 blocks, record_kib, cache_pct, epochs, batch, workers;
	unsigned	 trainers;
	bool		 npy;		/* --npy: .npy files, not raw */
	bool		 tar;		/* --tar: tar shards */
	bool		 index;		/* --index: with index = */
	unsigned	 per;		/* --tar: samples a shard */
	uint64_t	 off;		/* where the records start */
	uint64_t	 records;	/* N */
	size_t		 record;	/* bytes */
	char		 dir[256];
	char		 conf[300], sock[300], cache[300];
	int		 port;
	pid_t		 nginx;
};

/* What one run's infeedd said of its cache. */
struct rc_run {
	uint64_t	misses, hits, downloaded, evictions;
	uint64_t	bad;		/* wrong bytes or labels */
};

/* Byte @j of record @i: what the trainers check. */
static uint8_t
rc_byte(uint64_t i, size_t j)
{
	return ((uint8_t)(i * 13 + j));
}

/* Write @len bytes of @p to @path, or exit. */
static void
rc_write(const char *path, const void *p, size_t len)
{
	FILE	*fp;

	if ((fp = fopen(path, "w")) == NULL || fwrite(p, 1, len, fp) != len ||
	    fclose(fp) != 0) {
		perror(path);
		exit(2);
	}
}

/* @path: a .npy header of @dict (RC_NPY_HEADER bytes), then @p. */
static void
rc_write_npy(const char *path, const char *dict, const void *p, size_t len)
{
	uint8_t	*buf;
	size_t	 hlen = RC_NPY_HEADER - 10;

	if ((buf = malloc(RC_NPY_HEADER + len)) == NULL) {
		perror("malloc");
		exit(2);
	}
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (uint8_t)hlen;
	buf[9] = (uint8_t)(hlen >> 8);
	memset(buf + 10, ' ', hlen);
	memcpy(buf + 10, dict, strlen(dict));
	buf[RC_NPY_HEADER - 1] = '\n';
	memcpy(buf + RC_NPY_HEADER, p, len);
	rc_write(path, buf, RC_NPY_HEADER + len);
	free(buf);
}

/* The dataset: records and labels. */
static void
rc_make_data(const struct rc_cfg *c)
{
	char		 dict[100];
	uint8_t		*p;
	int64_t		*l;
	char		 path[400];
	uint64_t	 i;
	size_t		 j;

	if ((p = malloc(c->records * c->record)) == NULL ||
	    (l = malloc(c->records * sizeof(*l))) == NULL) {
		perror("malloc");
		exit(2);
	}
	for (i = 0; i < c->records; i++) {
		for (j = 0; j < c->record; j++)
			p[i * c->record + j] = rc_byte(i, j);
		l[i] = (int64_t)(i % RC_CLASSES);
	}
	snprintf(path, sizeof(path), "%s/data.bin", c->dir);
	rc_write(path, p, c->records * c->record);
	snprintf(path, sizeof(path), "%s/labels.bin", c->dir);
	rc_write(path, l, c->records * sizeof(*l));
	snprintf(dict, sizeof(dict), "{'descr': '|u1', 'fortran_order': "
	    "False, 'shape': (%llu, %zu), }", (unsigned long long)c->records,
	    c->record);
	snprintf(path, sizeof(path), "%s/data.npy", c->dir);
	rc_write_npy(path, dict, p, c->records * c->record);
	snprintf(dict, sizeof(dict), "{'descr': '<i8', 'fortran_order': "
	    "False, 'shape': (%llu,), }", (unsigned long long)c->records);
	snprintf(path, sizeof(path), "%s/labels.npy", c->dir);
	rc_write_npy(path, dict, l, c->records * sizeof(*l));
	free(p);
	free(l);
}

/* A big-endian u32 at @p. */
static void
rc_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* A PNG chunk of @len bytes of @data into @out; its length. */
static size_t
rc_png_chunk(uint8_t *out, const char *type, const uint8_t *data, size_t len)
{
	rc_be32(out, (uint32_t)len);
	memcpy(out + 4, type, 4);
	if (len > 0)
		memcpy(out + 8, data, len);
	rc_be32(out + 8 + len, (uint32_t)crc32(0, out + 4, (uInt)(len + 4)));
	return (len + 12);
}

/* An 8x8 grey PNG of level @v into @out (512 bytes); its length. */
static size_t
rc_png(uint8_t *out, uint8_t v)
{
	uint8_t		ihdr[13] = { 0 }, raw[8 * 9], z[256];
	uLongf		zlen = sizeof(z);
	size_t		n = 8;
	unsigned	y;

	memcpy(out, "\x89PNG\r\n\x1a\n", 8);
	rc_be32(ihdr, 8);
	rc_be32(ihdr + 4, 8);
	ihdr[8] = 8;		/* bit depth; grey */
	n += rc_png_chunk(out + n, "IHDR", ihdr, sizeof(ihdr));
	for (y = 0; y < 8; y++) {
		raw[y * 9] = 0;
		memset(raw + y * 9 + 1, v, 8);
	}
	if (compress(z, &zlen, raw, sizeof(raw)) != Z_OK)
		exit(2);
	n += rc_png_chunk(out + n, "IDAT", z, zlen);
	n += rc_png_chunk(out + n, "IEND", NULL, 0);
	return (n);
}

/* A ustar member @name of @len bytes of @data, padded, onto @fp. */
static void
rc_tar_member(FILE *fp, const char *name, const void *data, size_t len)
{
	uint8_t		h[512] = { 0 }, pad[512] = { 0 };
	unsigned	sum = 0, i;

	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)len);
	snprintf((char *)h + 136, 12, "%011o", 0);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (i = 0; i < sizeof(h); i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	fwrite(h, 1, sizeof(h), fp);
	fwrite(data, 1, len, fp);
	fwrite(pad, 1, (512 - len % 512) % 512, fp);
}

/*
 * --tar: the shards s-NNNNNN.tar, c->per samples each (sample i: a PNG of
 * grey rc_byte(i, 0), a .txt member to make up the record's size, label
 * i % RC_CLASSES), and counts.txt.
 */
static void
rc_make_shards(const struct rc_cfg *c)
{
	char		path[400], name[64], cls[16];
	uint8_t		png[512], zero[1024] = { 0 }, *txt;
	/* 3 headers, the png and the cls, each padded to 512 bytes */
	size_t		pad = c->record - 5 * 512;
	unsigned	k, j;
	uint64_t	i = 0;
	FILE		*fp, *ix;

	snprintf(path, sizeof(path), "%s/counts.txt", c->dir);
	if ((txt = calloc(1, pad)) == NULL || (ix = fopen(path, "w")) == NULL) {
		perror(path);
		exit(2);
	}
	for (k = 0; k < c->blocks; k++) {
		snprintf(path, sizeof(path), "%s/s-%06u.tar", c->dir, k);
		if ((fp = fopen(path, "w")) == NULL) {
			perror(path);
			exit(2);
		}
		fprintf(ix, "%u s-%06u.tar\n", c->per, k);
		for (j = 0; j < c->per; j++, i++) {
			snprintf(name, sizeof(name), "s%08llu.png",
			    (unsigned long long)i);
			rc_tar_member(fp, name, png, rc_png(png,
			    rc_byte(i, 0)));
			snprintf(name, sizeof(name), "s%08llu.txt",
			    (unsigned long long)i);
			rc_tar_member(fp, name, txt, pad);
			snprintf(name, sizeof(name), "s%08llu.cls",
			    (unsigned long long)i);
			snprintf(cls, sizeof(cls), "%llu",
			    (unsigned long long)(i % RC_CLASSES));
			rc_tar_member(fp, name, cls, strlen(cls));
		}
		fwrite(zero, 1, sizeof(zero), fp);
		if (fclose(fp) != 0) {
			perror(path);
			exit(2);
		}
	}
	fclose(ix);
	free(txt);
}

/* A free port on loopback. */
static int
rc_free_port(void)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof(sin);
	int			fd, port;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd == -1 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
		perror("socket");
		exit(2);
	}
	port = ntohs(sin.sin_port);
	close(fd);
	return (port);
}

/* nginx serving the folder, one process in the foreground. */
static void
rc_nginx_start(struct rc_cfg *c)
{
	char	conf[2048], path[400], log[400];
	int	i;

	c->port = rc_free_port();
	snprintf(conf, sizeof(conf),
	    "daemon off;\nmaster_process off;\nworker_processes 1;\n"
	    "pid \"%s/nginx.pid\";\nerror_log \"%s/nginx-error.log\";\n"
	    "events { worker_connections 256; }\n"
	    "http {\n access_log off;\n"
	    " client_body_temp_path \"%s/nginx-tmp\";\n"
	    " server {\n  listen 127.0.0.1:%d;\n  root \"%s\";\n }\n}\n",
	    c->dir, c->dir, c->dir, c->port, c->dir);
	snprintf(path, sizeof(path), "%s/nginx.conf", c->dir);
	rc_write(path, conf, strlen(conf));
	snprintf(log, sizeof(log), "%s/nginx-error.log", c->dir);
	if ((c->nginx = fork()) == 0) {
		execl(RC_NGINX, "nginx", "-p", c->dir, "-c", path, "-e", log,
		    (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 100; i++) {
		struct sockaddr_in	sin;
		int			fd = socket(AF_INET, SOCK_STREAM, 0);

		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons((uint16_t)c->port);
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
			close(fd);
			return;
		}
		close(fd);
		usleep(20000);
	}
	fprintf(stderr, "remote-cache: nginx did not start; see %s\n", log);
	exit(2);
}

/* infeedd with a cache of @cap_bytes, @lru or by the order; its pid. */
static pid_t
rc_daemon_start(struct rc_cfg *c, uint64_t cap_bytes, bool lru)
{
	char	cmd[400];
	FILE	*fp;
	pid_t	pid;
	int	i, fd;

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->cache);
	if (system(cmd) != 0)
		exit(2);
	snprintf(c->sock, sizeof(c->sock), "%s/infeedd.sock", c->dir);
	snprintf(c->conf, sizeof(c->conf), "%s/infeedd.conf", c->dir);
	if ((fp = fopen(c->conf, "w")) == NULL) {
		perror(c->conf);
		exit(2);
	}
	fprintf(fp, "[infeedd]\nworkers = %u\nmemory_budget = 1G\n"
	    "cache_dir = %s\ncache_max = %llu\n\n", c->workers, c->cache,
	    (unsigned long long)cap_bytes);
	if (c->tar) {
		fprintf(fp, "[dataset remote]\ntype = tar\n"
		    "shards = http://127.0.0.1:%d/s-{000000..%06u}.tar\n"
		    "classes = %d\n", c->port, c->blocks - 1, RC_CLASSES);
		if (c->index)
			fprintf(fp, "index = http://127.0.0.1:%d/counts.txt\n",
			    c->port);
	} else if (c->npy)
		fprintf(fp, "[dataset remote]\ntype = npy\n"
		    "path = http://127.0.0.1:%d/data.npy\n"
		    "labels = http://127.0.0.1:%d/labels.npy\nclasses = %d\n",
		    c->port, c->port, RC_CLASSES);
	else
		fprintf(fp, "[dataset remote]\ntype = raw\n"
		    "path = http://127.0.0.1:%d/data.bin\nshape = %zu\n"
		    "dtype = uint8\nlabels = http://127.0.0.1:%d/labels.bin\n"
		    "label_dtype = int64\nclasses = %d\n", c->port, c->record,
		    c->port, RC_CLASSES);
	fclose(fp);
	unlink(c->sock);
	if ((pid = fork()) == 0) {
		if (lru)
			setenv("INFEED_CACHE_EVICT", "lru", 1);
		else
			unsetenv("INFEED_CACHE_EVICT");
		fd = open(getenv("REMOTE_CACHE_LOG") ?
		    getenv("REMOTE_CACHE_LOG") : "/dev/null",
		    O_WRONLY | O_CREAT | O_APPEND, 0600);
		dup2(fd, 2);
		execl(c->infeedd, c->infeedd, "--config", c->conf, "--socket",
		    c->sock, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 500 && access(c->sock, F_OK) != 0; i++)
		usleep(20000);
	usleep(200000);
	return (pid);
}

static void
rc_daemon_stop(pid_t pid)
{
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
}

/* One trainer: @epochs shuffled epochs of seed @seed; wrong bytes. */
static uint64_t
rc_trainer(const struct rc_cfg *c, uint64_t seed)
{
	struct infeed			*f = infeed_new();
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_step		 st;
	const uint8_t			*row;
	uint64_t			 e, s, r, bad = 0;
	size_t				 j;

	infeed_options_init(&o);
	o.batch_size = c->batch;
	o.shuffle = true;
	o.seed = seed;
	o.load_indefinitely = true;
	o.label_dtype = INFEED_DTYPE_INT64;
	if (c->tar)
		o.transform = "Resize((8, 8)), PILToTensor()";
	if (f == NULL || infeed_connect(f, c->sock, "remote-cache") !=
	    INFEED_OK || infeed_attach(f, "remote", &o, &info) != INFEED_OK) {
		fprintf(stderr, "remote-cache: %s\n", f ? infeed_error(f) :
		    "no memory");
		exit(2);
	}
	for (e = 0; e < c->epochs; e++)
		for (s = 0; s < info.steps_per_epoch; s++) {
			if (infeed_next(f, &st) != INFEED_OK) {
				fprintf(stderr, "remote-cache: %s\n",
				    infeed_error(f));
				exit(2);
			}
			for (r = 0; r < st.rows; r++) {
				/* An image's first pixel, or a record's byte. */
				row = (const uint8_t *)st.data + r *
				    info.sample_bytes;
				j = c->tar ? 0 : r % c->record;
				bad += row[j] != rc_byte(st.indices[r], j);
				bad += st.labels64[r] !=
				    (int64_t)(st.indices[r] % RC_CLASSES);
			}
			infeed_release(f, &st);
		}
	infeed_free(f);
	return (bad);
}

/* The daemon's cache counts into @run. */
static void
rc_counts(const struct rc_cfg *c, struct rc_run *run)
{
	struct infeed		*f = infeed_new();
	struct infeed_stats	*st = NULL;

	if (f == NULL || infeed_connect(f, c->sock, "remote-cache") !=
	    INFEED_OK || infeed_get_stats(f, &st) != INFEED_OK) {
		fprintf(stderr, "remote-cache: stats: %s\n", f ?
		    infeed_error(f) : "no memory");
		exit(2);
	}
	run->misses = st->cache_misses;
	run->hits = st->cache_hits;
	run->downloaded = st->cache_bytes_downloaded;
	run->evictions = st->cache_evictions;
	infeed_stats_free(st);
	infeed_free(f);
}

/* @n trainers at once, seeds 1..n, on a fresh infeedd; their counts. */
static void
rc_run(struct rc_cfg *c, uint64_t cap_bytes, bool lru, unsigned n,
    struct rc_run *run)
{
	pid_t		daemon, kids[64];
	unsigned	i;
	int		status;

	daemon = rc_daemon_start(c, cap_bytes, lru);
	memset(run, 0, sizeof(*run));
	for (i = 0; i < n; i++)
		if ((kids[i] = fork()) == 0)
			_exit(rc_trainer(c, i + 1) == 0 ? 0 : 3);
	for (i = 0; i < n; i++) {
		waitpid(kids[i], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			run->bad++;
	}
	rc_counts(c, run);
	rc_daemon_stop(daemon);
}

/*
 * The fewest blocks of data read in the order of @c's trainer (seed 1)
 * with room for @cap: Belady's policy over the epochs' block sequence,
 * with each block's next use precomputed.
 */
static uint64_t
rc_belady(const struct rc_cfg *c, unsigned cap)
{
	struct sampler_opts	 so;
	struct sampler		 sm;
	uint64_t		*seq, *idx, *nxt, *last, *held, *when;
	uint64_t		 n = 0, e, s, k, m, misses = 0, v;
	unsigned		 nheld = 0, j;
	char			*why = NULL;

	memset(&so, 0, sizeof(so));
	so.samples = c->records;
	so.batch_size = c->batch;
	so.device_iterations = so.replication_factor = 1;
	so.gradient_accumulation = so.process_count = 1;
	so.shuffle = true;
	so.seed = 1;
	if (sampler_init(&sm, &so, &why) != 0) {
		fprintf(stderr, "remote-cache: %s\n", why);
		exit(2);
	}
	seq = calloc(c->epochs * c->records * 2, sizeof(*seq));
	idx = calloc(sm.cbs, sizeof(*idx));
	for (e = 0; e < c->epochs; e++)
		for (s = 0; s < sm.steps_per_epoch; s++) {
			m = sampler_step_indices(&sm, e, s, idx);
			for (k = 0; k < m; k++) {
				uint64_t first = (c->off + idx[k] * c->record) /
				    RC_BLOCK;
				uint64_t end = (c->off + idx[k] * c->record +
				    c->record - 1) / RC_BLOCK;

				if (c->tar)	/* a shard, one block */
					first = end = idx[k] / c->per;
				for (; first <= end; first++)
					seq[n++] = first;
			}
		}
	sampler_clear(&sm);
	nxt = calloc(n, sizeof(*nxt));
	last = calloc(c->blocks + 1, sizeof(*last));
	held = calloc(cap + 1, sizeof(*held));
	when = calloc(cap + 1, sizeof(*when));
	for (j = 0; j <= c->blocks; j++)
		last[j] = UINT64_MAX;
	for (k = n; k > 0; k--) {
		nxt[k - 1] = last[seq[k - 1]];
		last[seq[k - 1]] = k - 1;
	}
	for (k = 0; k < n; k++) {
		for (j = 0; j < nheld && held[j] != seq[k]; j++)
			;
		if (j < nheld) {
			when[j] = nxt[k];
			continue;
		}
		misses++;
		if (nheld < cap) {
			held[nheld] = seq[k];
			when[nheld++] = nxt[k];
			continue;
		}
		for (v = 0, j = 1; j < nheld; j++)
			if (when[j] > when[v])
				v = j;
		held[v] = seq[k];
		when[v] = nxt[k];
	}
	free(seq);
	free(idx);
	free(nxt);
	free(last);
	free(held);
	free(when);
	return (misses);
}

static unsigned
rc_arg(const char *opt, const char *v, unsigned lo, unsigned hi)
{
	char		*end;
	unsigned long	 n;

	errno = 0;
	n = strtoul(v != NULL ? v : "", &end, 10);
	if (v == NULL || *end != '\0' || errno != 0 || n < lo || n > hi) {
		fprintf(stderr, "remote-cache: %s takes a number from %u to "
		    "%u\n", opt, lo, hi);
		exit(2);
	}
	return ((unsigned)n);
}

int
main(int argc, char **argv)
{
	struct rc_cfg	 c;
	struct rc_run	 order, lru, shared;
	uint64_t	 best, labels_blocks, data_blocks, cap_bytes, all_bytes;
	unsigned	 cap;
	char		 cmd[400];
	double		 ratio;
	int		 i, rc = 0;

	memset(&c, 0, sizeof(c));
	c.blocks = 64;
	c.record_kib = 16;
	c.cache_pct = 25;
	c.epochs = 3;
	c.batch = 32;
	c.workers = 2;
	c.trainers = 4;
	if (argc < 2) {
		fprintf(stderr, "usage: remote-cache INFEEDD [--blocks N] "
		    "[--record-kib N] [--cache-pct N] [--epochs N] "
		    "[--batch N] [--workers N] [--trainers N] [--npy | --tar "
		    "[--index]]\n");
		return (2);
	}
	c.infeedd = argv[1];
	for (i = 2; i < argc; i += 2) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--npy") == 0) {
			c.npy = true;
			i--;	/* a flag: no value */
		} else if (strcmp(argv[i], "--tar") == 0) {
			c.tar = true;
			i--;
		} else if (strcmp(argv[i], "--index") == 0) {
			c.tar = c.index = true;
			i--;
		} else if (strcmp(argv[i], "--blocks") == 0)
			c.blocks = rc_arg(argv[i], v, 4, 4096);
		else if (strcmp(argv[i], "--record-kib") == 0)
			c.record_kib = rc_arg(argv[i], v, 1, 1024);
		else if (strcmp(argv[i], "--cache-pct") == 0)
			c.cache_pct = rc_arg(argv[i], v, 1, 100);
		else if (strcmp(argv[i], "--epochs") == 0)
			c.epochs = rc_arg(argv[i], v, 1, 20);
		else if (strcmp(argv[i], "--batch") == 0)
			c.batch = rc_arg(argv[i], v, 1, 4096);
		else if (strcmp(argv[i], "--workers") == 0)
			c.workers = rc_arg(argv[i], v, 1, 64);
		else if (strcmp(argv[i], "--trainers") == 0)
			c.trainers = rc_arg(argv[i], v, 1, 64);
		else {
			fprintf(stderr, "remote-cache: unknown %s\n", argv[i]);
			return (2);
		}
	}
	if (access(RC_NGINX, X_OK) != 0) {
		fprintf(stderr, "remote-cache: needs %s (Debian's nginx)\n",
		    RC_NGINX);
		return (2);
	}
	c.record = (size_t)c.record_kib * 1024;
	c.records = (uint64_t)c.blocks * RC_BLOCK / c.record;
	if (c.tar) {
		/* Whole samples and the tar's end under a block. */
		if (c.record_kib < 4) {
			fprintf(stderr, "remote-cache: --tar needs "
			    "--record-kib 4 or more\n");
			return (2);
		}
		c.per = (unsigned)((RC_BLOCK - 1024) / c.record);
		c.records = (uint64_t)c.blocks * c.per;
	}
	c.off = c.npy ? RC_NPY_HEADER : 0;
	snprintf(c.dir, sizeof(c.dir), "%s/remote-cache-XXXXXX",
	    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (mkdtemp(c.dir) == NULL) {
		perror(c.dir);
		return (2);
	}
	snprintf(c.cache, sizeof(c.cache), "%s/cache", c.dir);
	if (c.tar)
		rc_make_shards(&c);
	else
		rc_make_data(&c);
	rc_nginx_start(&c);

	/* Room for cap blocks of data and the labels' blocks, no more. */
	labels_blocks = c.tar ? 0 : (c.off + c.records * 8 + RC_BLOCK - 1) /
	    RC_BLOCK;
	data_blocks = (c.off + (uint64_t)c.blocks * RC_BLOCK + RC_BLOCK - 1) /
	    RC_BLOCK;
	cap = c.blocks * c.cache_pct / 100;
	if (cap == 0)
		cap = 1;
	cap_bytes = (uint64_t)cap * (RC_BLOCK + RC_HEADER) +
	    c.off + c.records * 8 + labels_blocks * RC_HEADER + 1024;
	/* Without index = the open downloads each shard once, to index it. */
	best = rc_belady(&c, cap) + labels_blocks + (c.tar && !c.index ?
	    c.blocks : 0);
	rc_run(&c, cap_bytes, false, 1, &order);
	rc_run(&c, cap_bytes, true, 1, &lru);
	all_bytes = (uint64_t)(c.blocks + 1) * (RC_BLOCK + RC_HEADER) +
	    c.off + c.records * 8 + labels_blocks * RC_HEADER + 1024;
	rc_run(&c, all_bytes, false, c.trainers, &shared);

	printf("remote-cache: %u blocks of 1 MiB (%llu records of %u KiB), "
	    "cache of %u blocks (%u %%), %u shuffled epochs, batch %u, "
	    "%u workers%s\n", c.blocks, (unsigned long long)c.records,
	    c.record_kib, cap, c.cache_pct, c.epochs, c.batch, c.workers,
	    c.npy ? ", .npy" : c.index ? ", tar shards, index =" : c.tar ?
	    ", tar shards" : "");
	printf("%-34s %10s %10s %12s %10s\n", "run", "downloads", "MiB",
	    "x fewest", "evictions");
	printf("%-34s %10llu %10.1f %12.2f %10s\n", "fewest (Belady, computed)",
	    (unsigned long long)best, (double)best, 1.0, "-");
	printf("%-34s %10llu %10.1f %12.2f %10llu\n", "infeed (sessions' order)",
	    (unsigned long long)order.misses,
	    (double)order.downloaded / (1 << 20),
	    (double)order.misses / (double)best,
	    (unsigned long long)order.evictions);
	printf("%-34s %10llu %10.1f %12.2f %10llu\n", "LRU (INFEED_CACHE_EVICT)",
	    (unsigned long long)lru.misses, (double)lru.downloaded / (1 << 20),
	    (double)lru.misses / (double)best,
	    (unsigned long long)lru.evictions);
	ratio = (double)order.misses / (double)best;
	printf("order: %.2f x the fewest (target <= 1.1): %s\n", ratio,
	    ratio <= 1.1 ? "met" : "MISSED");
	if (ratio > 1.1)
		rc = 1;
	printf("shared: %u trainers (seeds 1-%u), %u epochs, a cache that "
	    "holds the data: %llu blocks downloaded for %llu blocks "
	    "(%.2f per block per epoch; target: <= 1, not %u)\n", c.trainers,
	    c.trainers, c.epochs, (unsigned long long)shared.misses,
	    (unsigned long long)(data_blocks + labels_blocks),
	    (double)shared.misses / (double)((data_blocks + labels_blocks) *
	    c.epochs), c.trainers);
	if (shared.misses > (data_blocks + labels_blocks) * c.epochs) {
		printf("shared: MISSED\n");
		rc = 1;
	}
	if (order.bad + lru.bad + shared.bad > 0) {
		printf("remote-cache: a trainer read wrong bytes or failed\n");
		rc = 1;
	}
	kill(c.nginx, SIGTERM);
	waitpid(c.nginx, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c.dir);
	if (system(cmd) != 0)
		rc = 2;
	return (rc);
}
