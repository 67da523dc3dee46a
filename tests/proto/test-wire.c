/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the framing and fd-passing layer (proto/wire.c): frames
 * round-trip over a socketpair, partial and coalesced reads are cut
 * correctly, oversized and undecodable frames are refused before anything
 * large is allocated, fds travel with SCM_RIGHTS and never leak.
 */

#include <sys/socket.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "runner.h"
#include "wire.h"

#define SMALL_CAP	(128 * 1024)	/* "nothing big was allocated" */

static struct wire_in	in;
static int		sv[2] = { -1, -1 };	/* [0] reads, [1] writes */
static char		client_name[] = "test-wire";
static char		dataset_name[] = "mnist-train";

static void		 put_le32(uint8_t *, uint32_t);
static uint8_t		*pack_hello(uint32_t, size_t *);
static void		 expect_hello(uint32_t);
static void		 expect_bad(const char *, const char *);
static void		 recv_some(void);

/* A fresh non-blocking socketpair and an empty wire_in for every test. */
static void
setup(void)
{
	ck_assert_int_eq(socketpair(AF_UNIX,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
}

/* Free the buffer, close queued fds and both ends. */
static void
teardown(void)
{
	wire_in_clear(&in);
	if (sv[0] != -1)
		close(sv[0]);
	if (sv[1] != -1)
		close(sv[1]);
	sv[0] = sv[1] = -1;
}

/* Write a little-endian 32-bit length, as a peer would. */
static void
put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

/* Pack a Hello carrying @version and client_name; *len is set. */
static uint8_t *
pack_hello(uint32_t version, size_t *len)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT;
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	uint8_t		*buf;

	h.protocol_version = version;
	h.client_name = client_name;
	f.msg_case = INFEED__FRAME__MSG_HELLO;
	f.hello = &h;
	buf = wire_pack(&f, INFEED_DEFAULT_MAX_FRAME, len);
	ck_assert_ptr_nonnull(buf);
	return (buf);
}

/* Check that the next frame in @in is our Hello with @version. */
static void
expect_hello(uint32_t version)
{
	Infeed__Frame	*f = NULL;
	char		*cause = NULL;

	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_OK);
	ck_assert_ptr_null(cause);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_HELLO);
	ck_assert_uint_eq(f->hello->protocol_version, version);
	ck_assert_ptr_nonnull(f->hello->client_name);
	ck_assert_str_eq(f->hello->client_name, client_name);
	infeed__frame__free_unpacked(f, NULL);
}

/* Check that the next frame is refused with a cause holding both strings. */
static void
expect_bad(const char *want1, const char *want2)
{
	Infeed__Frame	*f = NULL;
	char		*cause = NULL;

	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_BAD);
	ck_assert_ptr_null(f);
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(want1 == NULL || strstr(cause, want1) != NULL,
	    "cause \"%s\" lacks \"%s\"", cause, want1);
	ck_assert_msg(want2 == NULL || strstr(cause, want2) != NULL,
	    "cause \"%s\" lacks \"%s\"", cause, want2);
	free(cause);
}

/* One wire_in_recv() on the reading end that must bring bytes. */
static void
recv_some(void)
{
	ssize_t	n;

	n = wire_in_recv(&in, sv[0]);
	ck_assert_msg(n > 0, "wire_in_recv returned %zd: %s", n,
	    n == -1 ? strerror(errno) : "end of stream");
}

START_TEST(test_roundtrip_hello)
{
	uint8_t	*buf;
	size_t	 len;

	buf = pack_hello(WIRE_PROTOCOL_VERSION, &len);
	ck_assert_uint_eq(len, WIRE_HEADER_SIZE +
	    (buf[0] | buf[1] << 8 | buf[2] << 16 | (uint32_t)buf[3] << 24));
	ck_assert_int_eq(wire_send_all(sv[1], buf, len, -1), 0);
	free(buf);
	recv_some();
	ck_assert_uint_eq(in.len, len);
	expect_hello(WIRE_PROTOCOL_VERSION);
	ck_assert_uint_eq(in.len, 0);
	ck_assert_uint_eq(in.nfds, 0);
	ck_assert_int_eq(wire_in_take_fd(&in), -1);
}
END_TEST

START_TEST(test_recv_nothing_again)
{
	Infeed__Frame	*f;
	char		*cause = NULL;

	errno = 0;
	ck_assert_int_eq(wire_in_recv(&in, sv[0]), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_ptr_null(f);
	ck_assert_ptr_null(cause);
}
END_TEST

START_TEST(test_byte_at_a_time)
{
	Infeed__Frame	*f;
	char		*cause = NULL;
	uint8_t		*buf;
	size_t		 len, i, early = 0;

	buf = pack_hello(7, &len);
	for (i = 0; i + 1 < len; i++) {
		if (wire_in_feed(&in, buf + i, 1) != 0 ||
		    wire_in_frame(&in, &f, &cause) != WIRE_AGAIN)
			early++;
	}
	ck_assert_uint_eq(early, 0);
	ck_assert_ptr_null(cause);
	ck_assert_int_eq(wire_in_feed(&in, buf + len - 1, 1), 0);
	free(buf);
	expect_hello(7);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_uint_eq(in.len, 0);
}
END_TEST

START_TEST(test_header_split)
{
	Infeed__Frame	*f;
	char		*cause = NULL;
	uint8_t		*buf;
	size_t		 len;

	buf = pack_hello(3, &len);
	ck_assert_int_eq(wire_in_feed(&in, buf, 2), 0);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_int_eq(wire_in_feed(&in, buf + 2, 2), 0);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_int_eq(wire_in_feed(&in, buf + 4, len - 4), 0);
	expect_hello(3);

	/* Three header bytes, then the last one together with the body. */
	ck_assert_int_eq(wire_in_feed(&in, buf, 3), 0);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_int_eq(wire_in_feed(&in, buf + 3, len - 3), 0);
	free(buf);
	expect_hello(3);
	ck_assert_ptr_null(cause);
}
END_TEST

START_TEST(test_split_over_sockets_reads)
{
	Infeed__Frame	*f;
	char		*cause = NULL;
	uint8_t		*buf;
	size_t		 len;

	buf = pack_hello(5, &len);
	ck_assert_int_eq(wire_send_all(sv[1], buf, 3, -1), 0);
	recv_some();
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_int_eq(wire_send_all(sv[1], buf + 3, len - 3, -1), 0);
	free(buf);
	recv_some();
	expect_hello(5);
}
END_TEST

START_TEST(test_two_frames_one_read)
{
	Infeed__Frame	*f;
	char		*cause = NULL;
	uint8_t		*a, *b, *both;
	size_t		 alen, blen;

	a = pack_hello(1, &alen);
	b = pack_hello(2, &blen);
	both = malloc(alen + blen);
	ck_assert_ptr_nonnull(both);
	memcpy(both, a, alen);
	memcpy(both + alen, b, blen);
	ck_assert_int_eq(wire_send_all(sv[1], both, alen + blen, -1), 0);
	free(a);
	free(b);
	free(both);
	recv_some();
	ck_assert_uint_eq(in.len, alen + blen);
	expect_hello(1);
	expect_hello(2);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_ptr_null(f);
}
END_TEST

START_TEST(test_three_frames_one_read)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *f;
	Infeed__Next	 next = INFEED__NEXT__INIT;
	Infeed__Release	 rel = INFEED__RELEASE__INIT;
	char		*cause = NULL;
	uint8_t		*a, *b, *c, *all;
	size_t		 alen, blen, clen;

	a = pack_hello(9, &alen);
	fr.msg_case = INFEED__FRAME__MSG_NEXT;
	fr.next = &next;
	b = wire_pack(&fr, INFEED_DEFAULT_MAX_FRAME, &blen);
	ck_assert_ptr_nonnull(b);
	rel.slot = 7;
	fr.msg_case = INFEED__FRAME__MSG_RELEASE;
	fr.release = &rel;
	c = wire_pack(&fr, INFEED_DEFAULT_MAX_FRAME, &clen);
	ck_assert_ptr_nonnull(c);
	all = malloc(alen + blen + clen);
	ck_assert_ptr_nonnull(all);
	memcpy(all, a, alen);
	memcpy(all + alen, b, blen);
	memcpy(all + alen + blen, c, clen);
	ck_assert_int_eq(wire_send_all(sv[1], all, alen + blen + clen, -1),
	    0);
	free(a);
	free(b);
	free(c);
	free(all);
	recv_some();

	expect_hello(9);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_OK);
	ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_NEXT);
	infeed__frame__free_unpacked(f, NULL);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_OK);
	ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_RELEASE);
	ck_assert_uint_eq(f->release->slot, 7);
	infeed__frame__free_unpacked(f, NULL);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_ptr_null(cause);
	ck_assert_uint_eq(in.len, 0);
}
END_TEST

START_TEST(test_oversized_header_fed)
{
	uint8_t	hdr[WIRE_HEADER_SIZE];

	put_le32(hdr, INFEED_DEFAULT_MAX_FRAME + 1);
	ck_assert_int_eq(wire_in_feed(&in, hdr, sizeof(hdr)), 0);
	expect_bad("1048577", "1048576");
	ck_assert_uint_lt(in.cap, SMALL_CAP);
}
END_TEST

START_TEST(test_oversized_header_received)
{
	uint8_t	hdr[WIRE_HEADER_SIZE];

	put_le32(hdr, INFEED_DEFAULT_MAX_FRAME + 1);
	ck_assert_int_eq(wire_send_all(sv[1], hdr, sizeof(hdr), -1), 0);
	recv_some();
	expect_bad("1048577", "1048576");
	ck_assert_uint_lt(in.cap, SMALL_CAP);
}
END_TEST

START_TEST(test_oversized_header_huge)
{
	uint8_t	hdr[WIRE_HEADER_SIZE];

	memset(hdr, 0xff, sizeof(hdr));
	ck_assert_int_eq(wire_in_feed(&in, hdr, sizeof(hdr)), 0);
	expect_bad("4294967295", "1048576");
	ck_assert_uint_lt(in.cap, SMALL_CAP);
}
END_TEST

START_TEST(test_exact_max_length_waits)
{
	Infeed__Frame	*f;
	char		*cause = NULL;
	uint8_t		 hdr[WIRE_HEADER_SIZE], body[100];

	put_le32(hdr, INFEED_DEFAULT_MAX_FRAME);
	ck_assert_int_eq(wire_in_feed(&in, hdr, sizeof(hdr)), 0);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	memset(body, 0, sizeof(body));
	ck_assert_int_eq(wire_in_feed(&in, body, sizeof(body)), 0);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_ptr_null(f);
	ck_assert_ptr_null(cause);
}
END_TEST

START_TEST(test_exact_max_frame_delivered)
{
	Infeed__Frame	 fr = INFEED__FRAME__INIT, *f;
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	char		*name, *cause = NULL;
	uint8_t		*buf;
	size_t		 n, len;

	/* Find the client_name length that makes the body exactly 4096. */
	name = malloc(INFEED_MIN_MAX_FRAME + 1);
	ck_assert_ptr_nonnull(name);
	h.protocol_version = WIRE_PROTOCOL_VERSION;
	h.client_name = name;
	fr.msg_case = INFEED__FRAME__MSG_HELLO;
	fr.hello = &h;
	for (n = INFEED_MIN_MAX_FRAME - 64; n < INFEED_MIN_MAX_FRAME; n++) {
		memset(name, 'x', n);
		name[n] = '\0';
		if (infeed__frame__get_packed_size(&fr) == INFEED_MIN_MAX_FRAME)
			break;
	}
	ck_assert_uint_eq(infeed__frame__get_packed_size(&fr),
	    INFEED_MIN_MAX_FRAME);

	errno = 0;
	ck_assert_ptr_null(wire_pack(&fr, INFEED_MIN_MAX_FRAME - 1, &len));
	ck_assert_int_eq(errno, EMSGSIZE);
	buf = wire_pack(&fr, INFEED_MIN_MAX_FRAME, &len);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(len, WIRE_HEADER_SIZE + INFEED_MIN_MAX_FRAME);

	wire_in_clear(&in);
	wire_in_init(&in, INFEED_MIN_MAX_FRAME);
	ck_assert_int_eq(wire_in_feed(&in, buf, len - 1), 0);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
	ck_assert_int_eq(wire_in_feed(&in, buf + len - 1, 1), 0);
	free(buf);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_OK);
	ck_assert_ptr_null(cause);
	ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_HELLO);
	ck_assert_str_eq(f->hello->client_name, name);
	infeed__frame__free_unpacked(f, NULL);
	free(name);
}
END_TEST

START_TEST(test_garbage_body)
{
	Infeed__Frame	*f;
	char		*cause = NULL;
	uint8_t		 buf[WIRE_HEADER_SIZE + 16];

	put_le32(buf, 16);
	memset(buf + WIRE_HEADER_SIZE, 0xff, 16);
	ck_assert_int_eq(wire_in_feed(&in, buf, sizeof(buf)), 0);
	expect_bad("16 bytes", "not a valid");
	/* The bad frame was consumed, nothing is left to misread. */
	ck_assert_uint_eq(in.len, 0);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
}
END_TEST

START_TEST(test_missing_required_field)
{
	/* Frame { hello {} }: Hello's required protocol_version is absent. */
	static const uint8_t	buf[] = { 2, 0, 0, 0, 0x0a, 0x00 };

	ck_assert_int_eq(wire_in_feed(&in, buf, sizeof(buf)), 0);
	expect_bad("not a valid", NULL);
}
END_TEST

START_TEST(test_empty_body)
{
	static const uint8_t	buf[] = { 0, 0, 0, 0 };

	ck_assert_int_eq(wire_in_feed(&in, buf, sizeof(buf)), 0);
	expect_bad("no message", NULL);
	ck_assert_uint_eq(in.len, 0);
}
END_TEST

START_TEST(test_unknown_field_only)
{
	/* Field 99 (varint 1), which no version of Frame knows. */
	static const uint8_t	buf[] = { 3, 0, 0, 0, 0x98, 0x06, 0x01 };

	ck_assert_int_eq(wire_in_feed(&in, buf, sizeof(buf)), 0);
	expect_bad("no message", NULL);
}
END_TEST

START_TEST(test_fd_passing)
{
	uint8_t	*buf;
	size_t	 len;
	int	 p[2], fd, flags;
	char	 c = 0;

	/* No O_CLOEXEC here: the received fd must get it from recvmsg. */
	ck_assert_int_eq(pipe(p), 0);
	buf = pack_hello(WIRE_PROTOCOL_VERSION, &len);
	ck_assert_int_eq(wire_send_some(sv[1], buf, len, p[1]), (ssize_t)len);
	free(buf);
	close(p[1]);

	recv_some();
	ck_assert_uint_eq(in.nfds, 1);
	expect_hello(WIRE_PROTOCOL_VERSION);
	fd = wire_in_take_fd(&in);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(wire_in_take_fd(&in), -1);
	ck_assert_uint_eq(in.nfds, 0);

	flags = fcntl(fd, F_GETFD);
	ck_assert_int_ne(flags, -1);
	ck_assert_msg(flags & FD_CLOEXEC, "received fd lacks FD_CLOEXEC");

	ck_assert_int_eq(write(fd, "z", 1), 1);
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	ck_assert_int_eq(c, 'z');
	close(fd);
	close(p[0]);
}
END_TEST

/*
 * Each frame's fds are its own: none for a frame sent without, both of a
 * frame sent with two, even when all of them arrive in one read.
 */
START_TEST(test_fds_belong_to_their_frame)
{
	uint8_t	*buf;
	size_t	 len;
	int	 p[2], before;
	ssize_t	 n;

	ck_assert_int_eq(pipe(p), 0);
	before = count_fds(0, NULL);
	buf = pack_hello(1, &len);
	ck_assert_int_eq(wire_send_all(sv[1], buf, len, -1), 0);
	ck_assert_int_eq(wire_send_all_fds(sv[1], buf, len, p, 2), 0);
	ck_assert_int_eq(wire_send_all(sv[1], buf, len, -1), 0);
	while ((n = wire_in_recv(&in, sv[0])) > 0)
		;
	ck_assert_uint_eq(in.nfds, 2);
	expect_hello(1);
	ck_assert_uint_eq(wire_in_frame_fds(&in), 0);
	expect_hello(1);
	ck_assert_uint_eq(wire_in_frame_fds(&in), 2);
	wire_in_drop_frame_fds(&in);
	ck_assert_uint_eq(in.nfds, 0);
	expect_hello(1);
	ck_assert_uint_eq(wire_in_frame_fds(&in), 0);
	ck_assert_int_eq(count_fds(0, NULL), before);
	free(buf);
	close(p[0]);
	close(p[1]);
}
END_TEST

/*
 * A frame refused (not a valid Frame, or no message this side knows)
 * takes its fds with it: they are closed, never the next frame's.
 */
START_TEST(test_bad_frames_fds_are_not_the_next_frames)
{
	static const uint8_t	unknown[] = { 3, 0, 0, 0, 0x98, 0x06, 0x01 };
	uint8_t			 garbage[WIRE_HEADER_SIZE + 16];
	uint8_t			*buf;
	size_t			 len;
	int			 p[2], before;

	ck_assert_int_eq(pipe(p), 0);
	before = count_fds(0, NULL);
	put_le32(garbage, 16);
	memset(garbage + WIRE_HEADER_SIZE, 0xff, 16);
	buf = pack_hello(1, &len);
	ck_assert_int_eq(wire_send_all_fds(sv[1], garbage, sizeof(garbage),
	    p, 1), 0);
	ck_assert_int_eq(wire_send_all_fds(sv[1], unknown, sizeof(unknown),
	    p + 1, 1), 0);
	ck_assert_int_eq(wire_send_all(sv[1], buf, len, -1), 0);
	while (wire_in_recv(&in, sv[0]) > 0)
		;
	ck_assert_uint_eq(in.nfds, 2);
	expect_bad("not a valid", NULL);
	expect_bad("no message", NULL);
	expect_hello(1);
	ck_assert_uint_eq(wire_in_frame_fds(&in), 0);
	ck_assert_uint_eq(in.nfds, 0);
	ck_assert_int_eq(count_fds(0, NULL), before);
	free(buf);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_fds_in_order)
{
	uint8_t	*buf;
	size_t	 len;
	int	 p[2], q[2], fd1, fd2;
	char	 c = 0;
	ssize_t	 n;

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(pipe(q), 0);
	buf = pack_hello(1, &len);
	ck_assert_int_eq(wire_send_all(sv[1], buf, len, p[1]), 0);
	ck_assert_int_eq(wire_send_all(sv[1], buf, len, q[1]), 0);
	free(buf);
	close(p[1]);
	close(q[1]);
	while ((n = wire_in_recv(&in, sv[0])) > 0)
		;
	ck_assert_int_eq(n, -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_uint_eq(in.nfds, 2);
	expect_hello(1);
	expect_hello(1);

	fd1 = wire_in_take_fd(&in);
	fd2 = wire_in_take_fd(&in);
	ck_assert_int_ge(fd1, 0);
	ck_assert_int_ge(fd2, 0);
	ck_assert_int_eq(write(fd1, "1", 1), 1);
	ck_assert_int_eq(write(fd2, "2", 1), 1);
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	ck_assert_int_eq(c, '1');
	ck_assert_int_eq(read(q[0], &c, 1), 1);
	ck_assert_int_eq(c, '2');
	close(fd1);
	close(fd2);
	close(p[0]);
	close(q[0]);
}
END_TEST

START_TEST(test_clear_closes_untaken)
{
	uint8_t	*buf;
	size_t	 len;
	int	 p[2], seen;

	ck_assert_int_eq(pipe(p), 0);
	buf = pack_hello(1, &len);
	ck_assert_int_eq(wire_send_all(sv[1], buf, len, p[1]), 0);
	free(buf);
	recv_some();
	ck_assert_uint_eq(in.nfds, 1);
	seen = in.fds[0];
	ck_assert_int_ne(fcntl(seen, F_GETFD), -1);

	wire_in_clear(&in);
	errno = 0;
	ck_assert_int_eq(fcntl(seen, F_GETFD), -1);
	ck_assert_int_eq(errno, EBADF);
	ck_assert_uint_eq(in.nfds, 0);
	ck_assert_ptr_null(in.buf);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_too_many_fds_one_message)
{
	int	p[2], before;
	ssize_t	n;

	ck_assert_int_eq(pipe(p), 0);
	send_fds(sv[1], p[1], WIRE_MAX_FDS + 1);
	before = count_fds(0, NULL);

	errno = 0;
	n = wire_in_recv(&in, sv[0]);
	ck_assert_int_eq(n, -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_uint_le(in.nfds, WIRE_MAX_FDS);

	wire_in_clear(&in);
	ck_assert_int_eq(count_fds(0, NULL), before);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_too_many_fds_queued)
{
	int	p[2], before, i;
	ssize_t	n;

	ck_assert_int_eq(pipe(p), 0);
	for (i = 0; i < WIRE_MAX_FDS + 1; i++)
		send_fds(sv[1], p[1], 1);
	before = count_fds(0, NULL);

	/* Each fd arrives in its own read; the one beyond the queue fails. */
	while ((n = wire_in_recv(&in, sv[0])) > 0)
		;
	ck_assert_int_eq(n, -1);
	ck_assert_int_eq(errno, EPROTO);
	ck_assert_uint_eq(in.nfds, WIRE_MAX_FDS);

	wire_in_clear(&in);
	ck_assert_int_eq(count_fds(0, NULL), before);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(test_end_of_stream)
{
	close(sv[1]);
	sv[1] = -1;
	ck_assert_int_eq(wire_in_recv(&in, sv[0]), 0);
}
END_TEST

START_TEST(test_end_of_stream_mid_frame)
{
	Infeed__Frame	*f;
	char		*cause = NULL;
	uint8_t		*buf;
	size_t		 len;

	buf = pack_hello(1, &len);
	ck_assert_int_eq(wire_send_all(sv[1], buf, len - 1, -1), 0);
	free(buf);
	close(sv[1]);
	sv[1] = -1;
	ck_assert_int_eq(wire_in_recv(&in, sv[0]), (ssize_t)len - 1);
	ck_assert_int_eq(wire_in_recv(&in, sv[0]), 0);
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_AGAIN);
}
END_TEST

START_TEST(test_pack_too_large)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *f = NULL;
	Infeed__DatasetList	 dl = INFEED__DATASET_LIST__INIT;
	Infeed__DatasetInfo	*infos, **ptrs;
	Infeed__DatasetInfo	 init = INFEED__DATASET_INFO__INIT;
	char			*cause = NULL;
	uint8_t			*buf;
	size_t			 i, len = 12345, count = 1000;
	ssize_t			 n;

	infos = calloc(count, sizeof(*infos));
	ptrs = calloc(count, sizeof(*ptrs));
	ck_assert_ptr_nonnull(infos);
	ck_assert_ptr_nonnull(ptrs);
	for (i = 0; i < count; i++) {
		infos[i] = init;
		infos[i].name = dataset_name;
		ptrs[i] = &infos[i];
	}
	dl.n_datasets = count;
	dl.datasets = ptrs;
	fr.msg_case = INFEED__FRAME__MSG_DATASET_LIST;
	fr.dataset_list = &dl;

	errno = 0;
	ck_assert_ptr_null(wire_pack(&fr, INFEED_MIN_MAX_FRAME, &len));
	ck_assert_int_eq(errno, EMSGSIZE);
	ck_assert_uint_eq(len, 12345);

	/* Under the default limit the same list goes through whole. */
	buf = wire_pack(&fr, INFEED_DEFAULT_MAX_FRAME, &len);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_gt(len, INFEED_MIN_MAX_FRAME);
	ck_assert_int_eq(wire_send_all(sv[1], buf, len, -1), 0);
	free(buf);
	while ((n = wire_in_recv(&in, sv[0])) > 0)
		;
	ck_assert_int_eq(wire_in_frame(&in, &f, &cause), WIRE_OK);
	ck_assert_int_eq(f->msg_case, INFEED__FRAME__MSG_DATASET_LIST);
	ck_assert_uint_eq(f->dataset_list->n_datasets, count);
	ck_assert_str_eq(f->dataset_list->datasets[count - 1]->name,
	    dataset_name);
	infeed__frame__free_unpacked(f, NULL);
	free(infos);
	free(ptrs);
}
END_TEST

START_TEST(test_case_name)
{
	ck_assert_str_eq(wire_case_name(INFEED__FRAME__MSG_HELLO), "Hello");
	ck_assert_str_eq(wire_case_name(INFEED__FRAME__MSG_ATTACHED),
	    "Attached");
	ck_assert_str_eq(wire_case_name(INFEED__FRAME__MSG__NOT_SET),
	    "unknown");
	ck_assert_str_eq(wire_case_name((Infeed__Frame__MsgCase)9999),
	    "unknown");
}
END_TEST

/*
 * wire_in_feed() must not write past its buffer when handed more than the
 * buffer is allowed to grow to: refusing with -1 or keeping every byte are
 * both fine.  With max_frame 4096 the buffer stops growing at 128 KiB.
 */
START_TEST(test_feed_beyond_limit)
{
	uint8_t	*junk;
	size_t	 big = 128 * 1024 + 1;
	int	 rc;

	wire_in_clear(&in);
	wire_in_init(&in, INFEED_MIN_MAX_FRAME);
	junk = calloc(1, big);
	ck_assert_ptr_nonnull(junk);
	rc = wire_in_feed(&in, junk, big);
	free(junk);
	ck_assert_msg(rc == -1 || in.len <= in.cap,
	    "wire_in_feed accepted %zu bytes into a %zu-byte buffer",
	    in.len, in.cap);
}
END_TEST

/* Gather the cases. */
static Suite *
wire_suite(void)
{
	Suite	*s;
	TCase	*tc;

	s = suite_create("wire");

	tc = tcase_create("framing");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_roundtrip_hello);
	tcase_add_test(tc, test_recv_nothing_again);
	tcase_add_test(tc, test_byte_at_a_time);
	tcase_add_test(tc, test_header_split);
	tcase_add_test(tc, test_split_over_sockets_reads);
	tcase_add_test(tc, test_two_frames_one_read);
	tcase_add_test(tc, test_three_frames_one_read);
	tcase_add_test(tc, test_end_of_stream);
	tcase_add_test(tc, test_end_of_stream_mid_frame);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_oversized_header_fed);
	tcase_add_test(tc, test_oversized_header_received);
	tcase_add_test(tc, test_oversized_header_huge);
	tcase_add_test(tc, test_exact_max_length_waits);
	tcase_add_test(tc, test_exact_max_frame_delivered);
	tcase_add_test(tc, test_pack_too_large);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad_body");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_garbage_body);
	tcase_add_test(tc, test_missing_required_field);
	tcase_add_test(tc, test_empty_body);
	tcase_add_test(tc, test_unknown_field_only);
	suite_add_tcase(s, tc);

	tc = tcase_create("fds");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_fd_passing);
	tcase_add_test(tc, test_fds_in_order);
	tcase_add_test(tc, test_fds_belong_to_their_frame);
	tcase_add_test(tc, test_bad_frames_fds_are_not_the_next_frames);
	tcase_add_test(tc, test_clear_closes_untaken);
	tcase_add_test(tc, test_too_many_fds_one_message);
	tcase_add_test(tc, test_too_many_fds_queued);
	suite_add_tcase(s, tc);

	tc = tcase_create("names");
	tcase_add_test(tc, test_case_name);
	suite_add_tcase(s, tc);

	tc = tcase_create("feed_bounds");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_feed_beyond_limit);
	suite_add_tcase(s, tc);

	return (s);
}

/* Run every case; CK_VERBOSITY, CK_FORK and CK_RUN_CASE pick the mode. */
int
main(void)
{
	return (run_suite(wire_suite()));
}
