/* SPDX-License-Identifier: MIT */
/*
 * Token datasets on the real infeedd (issue 37): a reload that opens a
 * token dataset reads and packs it on a thread, never on the event loop.
 * The token file is served through slowfs with its reads held, so that
 * the open's scan for document ends waits as long as the test likes: a
 * bystander trainer's round trips stay under 250 ms all the while (on
 * the loop they waited for the whole hold), and once the reads are
 * released the reload ends with the dataset served.  The same for a
 * packing made on demand, for a trainer asking a seq_len that no section
 * has: its Attach waits for the packing, the bystander does not.
 */

#include <sys/stat.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "infeed.h"
#include "slowfs-mount.h"

#define TOK_COUNT	(256 * 1024)	/* uint16 tokens: 512 KiB */
#define TOK_EOT		1
#define TOK_HOLD_US	1500000		/* the reads held this long */

/* Write @src/web.bin: documents of 1 to 97 tokens, each ended by TOK_EOT. */
static void
tokens_file(const char *src)
{
	static uint16_t	ids[TOK_COUNT];
	char		path[600];
	uint32_t	i, left = 0, k = 0;
	FILE		*fp;

	for (i = 0; i < TOK_COUNT; i++) {
		if (left == 0) {
			left = 1 + (k++ * 37) % 97;
			ids[i] = (uint16_t)(2 + i % 1000);
		} else
			ids[i] = --left == 0 ? TOK_EOT : (uint16_t)(2 + i % 1000);
	}
	ck_assert_int_eq(mkdir(src, 0755), 0);
	snprintf(path, sizeof(path), "%s/web.bin", src);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	ck_assert_uint_eq(fwrite(ids, 2, TOK_COUNT, fp), TOK_COUNT);
	fclose(fp);
}

/*
 * A fresh test directory whose web.bin (tokens_file()) is served through
 * slowfs at @mnt.
 */
static void
tokens_mount(struct slowfs *fs, char *mnt, size_t len)
{
	char	src[400];

	make_files(NULL);
	snprintf(src, sizeof(src), "%s/src", tpath("."));
	snprintf(mnt, len, "%s/mnt", tpath("."));
	tokens_file(src);
	ck_assert(slowfs_start(fs, src, mnt, (const char *const []){
	    "--delay-us", "1000", "--readahead-kib", "4", NULL }));
}

/* Whether the log holds @text, waiting up to @ms for it. */
static bool
log_has(const char *text, unsigned ms)
{
	static char	buf[1 << 16];
	unsigned	i;

	for (i = 0; i <= ms / 10; i++) {
		read_log(buf, sizeof(buf));
		if (strstr(buf, text) != NULL)
			return (true);
		usleep(10000);
	}
	return (false);
}

/*
 * A reload adds a token dataset whose file's reads are held: the open
 * waits in its scan, off the loop; the bystander is served meanwhile.
 */
START_TEST(a_reload_opens_a_token_dataset_off_the_loop)
{
	struct slowfs		 fs;
	struct bystander	 b;
	struct bystander_report	 r;
	char			 mnt[400];
	FILE			*fp;

	tokens_mount(&fs, mnt, sizeof(mnt));
	infeedd_start("");
	bystander_start(&b);
	usleep(200000);

	slowfs_command(&fs, "hold");
	ck_assert_ptr_nonnull(fp = fopen(tpath("infeedd.conf"), "a"));
	fprintf(fp, "\n[dataset web]\ntype = tokens\npath = %s/web.bin\n"
	    "eot = %d\nseq_len = 64\n", mnt, TOK_EOT);
	fclose(fp);
	ck_assert_int_eq(kill(infeedd_pid, SIGHUP), 0);
	usleep(TOK_HOLD_US);
	/* The open is under way, waiting for its reads. */
	ck_assert_uint_gt(slowfs_counter(&fs, "held"), 0);
	ck_assert(!log_has("reloaded", 0));
	slowfs_command(&fs, "release");
	ck_assert_msg(log_has("reloaded: ", 20000), "the reload never ended");
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	ck_assert(log_has("dataset 'web': tokens", 0));
	slowfs_stop(&fs);
}
END_TEST

/* A trainer asking "web" for seq_len 128: its Attach and first step. */
struct tok_trainer {
	pthread_t	 t;
	atomic_bool	 done;
	int		 rc;		/* infeed_attach()'s */
	uint64_t	 row_bytes;
};

/* Attach, and read a step; done then. */
static void *
tok_trainer_main(void *arg)
{
	struct tok_trainer	*tr = arg;
	struct infeed_options	 o;
	struct infeed_session_info info;
	struct infeed_step	 st;
	struct infeed		*f = client();

	infeed_options_init(&o);
	o.batch_size = 2;
	o.seq_len = 128;
	memset(&info, 0, sizeof(info));
	tr->rc = infeed_attach(f, "web", &o, &info);
	if (tr->rc == INFEED_OK && infeed_next(f, &st) == INFEED_OK)
		tr->row_bytes = info.sample_bytes;
	infeed_free(f);
	atomic_store(&tr->done, true);
	return (NULL);
}

/*
 * A trainer asks for a seq_len that no section packs while the token
 * file's reads are held: the packing made for it waits in its scan, off
 * the loop; its Attach waits for it; the bystander is served meanwhile.
 */
START_TEST(a_packing_on_demand_is_made_off_the_loop)
{
	struct slowfs		 fs;
	struct bystander	 b;
	struct bystander_report	 r;
	struct tok_trainer	 tr;
	char			 mnt[400], extra[1200];

	tokens_mount(&fs, mnt, sizeof(mnt));
	snprintf(extra, sizeof(extra), "\n[dataset web]\ntype = tokens\n"
	    "path = %s/web.bin\neot = %d\nseq_len = 64\n", mnt, TOK_EOT);
	make_config(extra);
	infeedd_start("");
	ck_assert(log_has("dataset 'web': tokens", 20000));
	bystander_start(&b);
	usleep(200000);

	slowfs_command(&fs, "hold");
	memset(&tr, 0, sizeof(tr));
	atomic_init(&tr.done, false);
	ck_assert_int_eq(pthread_create(&tr.t, NULL, tok_trainer_main, &tr),
	    0);
	usleep(TOK_HOLD_US);
	/* The packing is under way, waiting for its reads; so is the Attach. */
	ck_assert(log_has("packing it at seq_len 128 as 'web/128'", 0));
	ck_assert_uint_gt(slowfs_counter(&fs, "held"), 0);
	ck_assert(!atomic_load(&tr.done));
	slowfs_command(&fs, "release");
	pthread_join(tr.t, NULL);
	ck_assert_int_eq(tr.rc, INFEED_OK);
	ck_assert_uint_eq(tr.row_bytes, 3 * 4 * 128);
	bystander_stop(&b, &r);
	bystander_assert(&r, 250);
	slowfs_stop(&fs);
}
END_TEST

static Suite *
tokens_suite(void)
{
	Suite	*s = suite_create("tokens");
	TCase	*tc = tcase_create("tokens");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, a_reload_opens_a_token_dataset_off_the_loop);
	tcase_add_test(tc, a_packing_on_demand_is_made_off_the_loop);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every case; skipped (77) where FUSE cannot be mounted. */
int
main(void)
{
	if (!slowfs_probe())
		return (77);
	return (run_suite(tokens_suite()));
}
