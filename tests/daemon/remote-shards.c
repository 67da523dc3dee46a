/* SPDX-License-Identifier: MIT */
/*
 * What the remote tests share: nginx started on a private port, tar
 * shards of tiny PNGs (8x8 grey, written here with zlib) and tar members
 * (test-faults.c's too), and the check of one epoch of them through
 * infeedd.
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "harness.h"
#include "remote-shards.h"

#define SIDE		8		/* the images: SIDE x SIDE grey */

/* A free port on loopback (bound and closed: nginx takes it next). */
int
remote_free_port(void)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof(sin);
	int			fd, port = -1;

	/* No ck_assert: test-remote-s3's main() calls it outside a test. */
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return (-1);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
		port = ntohs(sin.sin_port);
	close(fd);
	return (port);
}

/* Wait for a listener on loopback @port. */
void
remote_wait_port(int port)
{
	struct sockaddr_in	sin;
	int			i, fd;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (i = 0; i < 500; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
			close(fd);
			return;
		}
		close(fd);
		usleep(10000);
	}
	ck_abort_msg("nginx did not start; see %s/nginx-error.log", dir);
}

/*
 * nginx run with @conf (written to nginx.conf in the test's folder) in the
 * foreground, once @port and @tls_port (unless 0) listen; its pid.
 */
pid_t
remote_nginx_run(const char *conf, int port, int tls_port)
{
	char	path[400];
	pid_t	pid;

	snprintf(path, sizeof(path), "%s/nginx.conf", dir);
	write_file(path, conf, strlen(conf));
	if ((pid = fork()) == 0) {
		execl(NGINX, "nginx", "-p", dir, "-c", path, "-e",
		    path_in(dir, "nginx-error.log"), (char *)NULL);
		_exit(127);
	}
	ck_assert_int_ne(pid, -1);
	remote_wait_port(port);
	if (tls_port != 0)
		remote_wait_port(tls_port);
	return (pid);
}

/* Append a big-endian u32. */
static void
be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* A PNG chunk of @len bytes of @data into @out; its length. */
static size_t
png_chunk(uint8_t *out, const char *type, const uint8_t *data, size_t len)
{
	uLong	crc;

	be32(out, (uint32_t)len);
	memcpy(out + 4, type, 4);
	if (len > 0)		/* IEND has no data (NULL) */
		memcpy(out + 8, data, len);
	crc = crc32(0, out + 4, (uInt)(len + 4));
	be32(out + 8 + len, (uint32_t)crc);
	return (len + 12);
}

/* The grey level of sample @i's image. */
uint8_t
remote_grey_of(uint64_t i)
{
	return ((uint8_t)(i * 37 % 256));
}

/* A SIDE x SIDE grey PNG of level @v into @out; its length. */
static size_t
png_grey(uint8_t *out, uint8_t v)
{
	uint8_t		ihdr[13], raw[SIDE * (SIDE + 1)], z[512];
	uLongf		zlen = sizeof(z);
	size_t		n = 8;
	unsigned	y;

	memcpy(out, "\x89PNG\r\n\x1a\n", 8);
	be32(ihdr, SIDE);
	be32(ihdr + 4, SIDE);
	ihdr[8] = 8;		/* bit depth */
	ihdr[9] = 0;		/* grey */
	ihdr[10] = ihdr[11] = ihdr[12] = 0;
	n += png_chunk(out + n, "IHDR", ihdr, sizeof(ihdr));
	for (y = 0; y < SIDE; y++) {
		raw[y * (SIDE + 1)] = 0;	/* no filter */
		memset(raw + y * (SIDE + 1) + 1, v, SIDE);
	}
	ck_assert_int_eq(compress(z, &zlen, raw, sizeof(raw)), Z_OK);
	n += png_chunk(out + n, "IDAT", z, zlen);
	n += png_chunk(out + n, "IEND", NULL, 0);
	return (n);
}

/* Append a ustar member @name of @len bytes of @data to @fp. */
void
tar_member(FILE *fp, const char *name, const void *data, size_t len)
{
	uint8_t		h[512], pad[512];
	unsigned	sum = 0, i;

	memset(h, 0, sizeof(h));
	memset(pad, 0, sizeof(pad));
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
	ck_assert_uint_eq(fwrite(h, 1, sizeof(h), fp), sizeof(h));
	ck_assert_uint_eq(fwrite(data, 1, len, fp), len);
	ck_assert_uint_eq(fwrite(pad, 1, (512 - len % 512) % 512, fp),
	    (512 - len % 512) % 512);
}

/*
 * Shards @prefix-NNNNNN.tar in folder @sub, @n of @per samples each:
 * sample i (counted over the set) is a PNG of remote_grey_of(i), label
 * i % 10, then (with @pad) a .txt member of @pad bytes.  With @index,
 * @sub/counts.txt lists each shard's count, and with @members each
 * sample's image member after it ("+ OFFSET SIZE LABEL").
 */
static void
remote_shards(const char *sub, const char *prefix, int n, int per,
    bool index, size_t pad, bool members)
{
	char		path[700], name[64], cls[16];
	uint8_t		png[1024], zero[1024], *txt;
	size_t		len;
	FILE		*fp, *ix = NULL;
	int		k, j;
	uint64_t	i = 0;
	long		off;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	mkdir(path, 0755);
	if (index) {
		snprintf(path, sizeof(path), "%s/%s/counts.txt", dir, sub);
		ck_assert_ptr_nonnull(ix = fopen(path, "w"));
		fprintf(ix, "# samples per shard\n");
	}
	ck_assert_ptr_nonnull(txt = calloc(1, pad + 1));
	memset(txt, 'x', pad);
	memset(zero, 0, sizeof(zero));
	for (k = 0; k < n; k++) {
		snprintf(path, sizeof(path), "%s/%s/%s-%06d.tar", dir, sub,
		    prefix, k);
		ck_assert_ptr_nonnull(fp = fopen(path, "w"));
		if (ix != NULL)
			fprintf(ix, "%d %s-%06d.tar\n", per, prefix, k);
		for (j = 0; j < per; j++, i++) {
			snprintf(name, sizeof(name), "s%08llu.png",
			    (unsigned long long)i);
			len = png_grey(png, remote_grey_of(i));
			off = ftell(fp) + 512;
			tar_member(fp, name, png, len);
			if (ix != NULL && members)
				fprintf(ix, "+ %ld %zu %llu\n", off, len,
				    (unsigned long long)(i % 10));
			if (pad > 0) {
				snprintf(name, sizeof(name), "s%08llu.txt",
				    (unsigned long long)i);
				tar_member(fp, name, txt, pad);
			}
			snprintf(name, sizeof(name), "s%08llu.cls",
			    (unsigned long long)i);
			snprintf(cls, sizeof(cls), "%llu",
			    (unsigned long long)(i % 10));
			tar_member(fp, name, cls, strlen(cls));
		}
		ck_assert_uint_eq(fwrite(zero, 1, 1024, fp), 1024);
		ck_assert_int_eq(fclose(fp), 0);
	}
	free(txt);
	if (ix != NULL)
		ck_assert_int_eq(fclose(ix), 0);
}

void
remote_make_shards(const char *sub, const char *prefix, int n, int per,
    bool index)
{
	remote_shards(sub, prefix, n, per, index, 0, false);
}

void
remote_make_member_shards(const char *sub, const char *prefix, int n,
    int per, size_t pad)
{
	remote_shards(sub, prefix, n, per, true, pad, true);
}

/*
 * One epoch of @name, @n samples: every index once, each image the grey
 * of its index and its label the index's.
 */
void
remote_read_epoch(const char *name, uint64_t n, uint64_t seed)
{
	struct infeed			*f = client();
	struct infeed_session_info	 info;
	struct infeed_options		 o;
	struct infeed_step		 st;
	uint8_t				*seen;
	uint64_t			 s, r, bad = 0, count = 0;
	const float			*px;
	float				 want;

	ck_assert_ptr_nonnull(seen = calloc(n, 1));
	infeed_options_init(&o);
	o.batch_size = 16;
	o.shuffle = true;
	o.seed = seed;
	o.drop_last = false;
	o.label_dtype = INFEED_DTYPE_INT64;
	o.transform = "Resize((8, 8)), ToTensor()";
	ck_assert_msg(infeed_attach(f, name, &o, &info) == INFEED_OK,
	    "%s: %s", name, infeed_error(f));
	for (s = 0; s < info.steps_per_epoch; s++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s: %s",
		    name, infeed_error(f));
		for (r = 0; r < st.rows; r++) {
			bad += st.indices[r] >= n || seen[st.indices[r]]++;
			/* The first float of a row is its pixel (0, 0). */
			px = (const float *)((const uint8_t *)st.data +
			    r * (info.sample_bytes));
			want = (float)remote_grey_of(st.indices[r]) / 255.0f;
			bad += px[0] < want - 0.01f || px[0] > want + 0.01f;
			bad += st.labels64[r] != (int64_t)(st.indices[r] % 10);
		}
		count += st.rows;
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_uint_eq(count, n);
	ck_assert_msg(bad == 0, "%s: %llu wrong rows, pixels or labels", name,
	    (unsigned long long)bad);
	free(seen);
	infeed_free(f);
}

/*
 * The fewest downloads for reading @seq (@n blocks) with room for @cap:
 * Belady's policy, the optimum for pages of one size, evicting the block
 * whose next use is furthest.
 */
unsigned
remote_belady_misses(const uint64_t *seq, size_t n, size_t cap)
{
	uint64_t	held[64];
	size_t		nheld = 0, i, j, k, far, v;
	unsigned	misses = 0;

	ck_assert_uint_le(cap, 64);
	for (i = 0; i < n; i++) {
		for (j = 0; j < nheld && held[j] != seq[i]; j++)
			;
		if (j < nheld)
			continue;
		misses++;
		if (nheld < cap) {
			held[nheld++] = seq[i];
			continue;
		}
		for (v = 0, far = 0, j = 0; j < nheld; j++) {
			for (k = i + 1; k < n && seq[k] != held[j]; k++)
				;
			if (k >= far) {
				far = k;
				v = j;
			}
		}
		held[v] = seq[i];
	}
	return (misses);
}

/* Stop the nginx of remote_nginx_run() (none: nothing), and say so. */
void
remote_nginx_stop(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGTERM);
		waitpid(*pid, NULL, 0);
		*pid = -1;
	}
}
