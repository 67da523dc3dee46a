/* SPDX-License-Identifier: MIT */
/*
 * Token datasets on the real infeedd (issue 37): a reload that opens a
 * token dataset reads and packs it on a thread, never on the event loop.
 * The token file is served through slowfs with its reads held, so that
 * the open's scan for document ends waits as long as the test likes: a
 * bystander trainer's round trips stay under 250 ms all the while (2 s
 * with infeedd under valgrind; on the loop they waited for the whole
 * hold), and once the reads are released the reload ends with the
 * dataset served.  The same for a
 * packing made on demand, for a trainer asking a seq_len that no section
 * has: its Attach waits for the packing, the bystander does not.
 *
 * Without slowfs too: a packing too large for memory_budget is refused
 * before it is made (the daemon's peak memory stays far below it), and a
 * packing on demand reloads the running configuration, not the file.
 * In this process, with slowfs: a token file replaced while its ids are
 * checked is not what is served.
 * Through libinfeed, a C trainer's epoch: every token once, with the
 * positions, segments and labels docs/tokens.md ("A row") promises.
 */

#include <sys/stat.h>
#include <sys/wait.h>

#include <fcntl.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "dataset.h"
#include "harness.h"
#include "infeed.h"
#include "packing.h"
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

/*
 * The bystander's limit on a round trip: 250 ms, 2 s with infeedd under
 * valgrind (scripts/test), which runs one thread at a time.
 */
static uint64_t
tok_limit_ms(void)
{
	const char	*d = getenv("INFEEDD");

	return (d != NULL && strstr(d, "valgrind") != NULL ? 2000 : 250);
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
	bystander_assert(&r, tok_limit_ms());
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
	bystander_assert(&r, tok_limit_ms());
	slowfs_stop(&fs);
}
END_TEST

/* Documents of the C trainer's file: lengths 1 to 40 (seq_len 16 cuts some). */
#define TOK_DOCS	300
#define TOK_SEQ		16

/*
 * Write @dir/c.bin (uint32 ids, token t of the file being 1000 + t) and
 * @dir/c.idx (its documents' offsets); return the tokens written and set
 * @doc_of[t] to token t's document, @start_of[d] to document d's first.
 */
static uint32_t
tokens_c_files(uint32_t *doc_of, uint32_t *start_of)
{
	static uint32_t	ids[TOK_DOCS * 40];
	static uint64_t	offs[TOK_DOCS + 1];
	uint32_t	d, k, n = 0;

	for (d = 0; d < TOK_DOCS; d++) {
		offs[d] = n;
		start_of[d] = n;
		for (k = 0; k < 1 + (d * 7) % 40; k++) {
			doc_of[n] = d;
			ids[n] = 1000 + n;
			n++;
		}
	}
	offs[TOK_DOCS] = n;
	write_file(tpath("c.bin"), ids, n * sizeof(ids[0]));
	write_file(tpath("c.idx"), offs, sizeof(offs));
	return (n);
}

/*
 * A C trainer's epoch of a token dataset through libinfeed: every token
 * once; in each row, [ids | positions | segments] with positions counting
 * from each piece's start (a document's start or a seq_len cut in it),
 * a piece's tokens consecutive in one document, segments numbering the
 * pieces from 1, padding at the row's end with ids and segments 0 and
 * positions from its start; the label is the row's pieces.
 */
START_TEST(a_c_trainer_gets_each_token_once_with_positions_and_segments)
{
	static uint32_t		 doc_of[TOK_DOCS * 40];
	static uint8_t		 seen[TOK_DOCS * 40];
	uint32_t		 start_of[TOK_DOCS], ntok, got = 0;
	struct infeed_options	 o;
	struct infeed_session_info info;
	struct infeed_step	 st;
	struct infeed		*f;
	char			 extra[1200];
	uint64_t		 r;
	int			 rc, j, nseg, first, pad;

	make_files(NULL);
	ntok = tokens_c_files(doc_of, start_of);
	snprintf(extra, sizeof(extra), "\n[dataset web]\ntype = tokens\n"
	    "path = %s\nindex = %s\ndtype = uint32\nseq_len = %d\n",
	    tpath("c.bin"), tpath("c.idx"), TOK_SEQ);
	make_config(extra);
	infeedd_start("");
	f = client();
	infeed_options_init(&o);
	o.batch_size = 4;
	o.shuffle = true;
	o.seed = 5;
	o.drop_last = false;
	o.load_indefinitely = false;
	memset(&info, 0, sizeof(info));
	ck_assert_int_eq(infeed_attach(f, "web", &o, &info), INFEED_OK);
	ck_assert_uint_eq(info.sample_bytes, 3 * 4 * TOK_SEQ);
	while ((rc = infeed_next(f, &st)) == INFEED_OK) {
		ck_assert_uint_eq(st.epoch, 0);
		for (r = 0; r < st.rows; r++) {
			const int32_t	*row = (const int32_t *)st.data +
			    r * 3 * TOK_SEQ;
			const int32_t	*pos = row + TOK_SEQ;
			const int32_t	*seg = row + 2 * TOK_SEQ;
			int64_t		 label = st.labels != NULL ?
			    st.labels[r] : st.labels64[r];

			nseg = 0;
			first = pad = -1;
			for (j = 0; j < TOK_SEQ; j++) {
				uint32_t	t;

				if (seg[j] == 0) {	/* padding, to the end */
					if (pad < 0)
						pad = j;
					ck_assert_int_eq(row[j], 0);
					ck_assert_int_eq(pos[j], j - pad);
					continue;
				}
				ck_assert_int_lt(pad, 0);
				ck_assert_int_ge(row[j], 1000);
				t = (uint32_t)row[j] - 1000;
				ck_assert_uint_lt(t, ntok);
				ck_assert_msg(!seen[t], "token %u twice", t);
				seen[t] = 1;
				got++;
				if (pos[j] == 0) {	/* a piece begins */
					ck_assert_int_eq(seg[j], ++nseg);
					ck_assert_uint_eq((t -
					    start_of[doc_of[t]]) % TOK_SEQ, 0);
					first = j;
				} else {
					ck_assert_int_ge(first, 0);
					ck_assert_int_eq(seg[j], nseg);
					ck_assert_int_eq(pos[j], j - first);
					ck_assert_int_eq(row[j], row[j - 1] + 1);
					ck_assert_uint_eq(doc_of[t],
					    doc_of[t - 1]);
				}
			}
			ck_assert_int_eq(label, nseg);
		}
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_msg(rc == INFEED_END_OF_DATA, "%s", infeed_error(f));
	ck_assert_uint_eq(got, ntok);
	infeed_free(f);
}
END_TEST

/* A line "@key N kB" of /proc/@pid/status, in bytes. */
static uint64_t
proc_status_kb(pid_t pid, const char *key)
{
	char		 path[64], line[256];
	unsigned long	 kb = 0;
	FILE		*fp;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	ck_assert_ptr_nonnull(fp = fopen(path, "r"));
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (strncmp(line, key, strlen(key)) == 0 &&
		    sscanf(line + strlen(key), ": %lu kB", &kb) == 1)
			break;
	}
	fclose(fp);
	ck_assert_uint_gt(kb, 0);
	return ((uint64_t)kb * 1024);
}

/* Tokens of the big file: a packing at seq_len 1 keeps 44 bytes each. */
#define BIG_TOKENS	(4u << 20)

/*
 * A reload adds a token dataset whose packing memory_budget (256M, for
 * both copies) cannot hold: 4 Mi pieces (one document at seq_len 1), 176
 * MiB a copy.  It is refused saying why, and the daemon's peak memory
 * (VmHWM, reset before) grows far less than the packing: it was never
 * made.  Made and then refused, it took about 300 MiB.
 */
START_TEST(a_packing_past_the_budget_is_refused_unmade)
{
	uint64_t	 idx[2] = { 0, BIG_TOKENS }, rss, hwm, size;
	char		 path[400], text[64];
	FILE		*fp;
	int		 fd;

	make_files(NULL);
	infeedd_start("");
	ck_assert(log_has("dataset 'raw'", 20000));
	/* A file of zeros (sparse), and its one document's index. */
	ck_assert_int_ge(fd = open(tpath("big.bin"), O_WRONLY | O_CREAT, 0644),
	    0);
	ck_assert_int_eq(ftruncate(fd, 2 * (off_t)BIG_TOKENS), 0);
	close(fd);
	ck_assert_ptr_nonnull(fp = fopen(tpath("big.idx"), "w"));
	ck_assert_uint_eq(fwrite(idx, sizeof(idx), 1, fp), 1);
	fclose(fp);

	/* The peak from now on: "5" resets VmHWM to VmRSS. */
	snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)infeedd_pid);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	ck_assert_int_gt(fputs("5", fp), 0);
	ck_assert_int_eq(fclose(fp), 0);
	rss = proc_status_kb(infeedd_pid, "VmRSS");
	ck_assert_ptr_nonnull(fp = fopen(tpath("infeedd.conf"), "a"));
	fprintf(fp, "\n[dataset big]\ntype = tokens\npath = %s\n"
	    "index = %s\nseq_len = 1\n", tpath("big.bin"), tpath("big.idx"));
	fclose(fp);
	ck_assert_int_eq(kill(infeedd_pid, SIGHUP), 0);
	ck_assert_msg(log_has("reloaded: ", 120000), "the reload never ended");
	ck_assert(log_has("dataset 'big' refused: ", 0));
	ck_assert(log_has("memory_budget", 0));
	hwm = proc_status_kb(infeedd_pid, "VmHWM");
	size = packing_bytes(BIG_TOKENS, BIG_TOKENS, true);
	snprintf(text, sizeof(text), "%.1f", (double)(hwm - rss) / (1 << 20));
	printf("big: packing %.1f MiB; the daemon's peak %s MiB above its "
	    "memory before the reload\n", (double)size / (1 << 20), text);
	ck_assert_msg(hwm < rss + size / 4, "the reload took %s MiB at its "
	    "peak, for a packing of %.1f MiB that it refused", text,
	    (double)size / (1 << 20));
}
END_TEST

/*
 * The file is edited (a dataset dropped) without a SIGHUP; a trainer
 * asks for a seq_len that no section packs: the reload that packs it
 * starts from the running configuration, so the dropped dataset is still
 * served.  A SIGHUP then reads the file: it goes.
 */
START_TEST(a_packing_on_demand_keeps_the_running_configuration)
{
	struct infeed_options	 o;
	struct infeed		*f;
	char			 src[400], web[1000], both[1400];

	make_files(NULL);
	snprintf(src, sizeof(src), "%s/src", tpath("."));
	tokens_file(src);
	snprintf(web, sizeof(web), "\n[dataset web]\ntype = tokens\n"
	    "path = %s/web.bin\neot = %d\nseq_len = 64\n", src, TOK_EOT);
	snprintf(both, sizeof(both), "%s\n[dataset extra]\ntype = synthetic\n"
	    "samples = 100\nshape = 1,8,8\ndtype = float32\nclasses = 10\n",
	    web);
	make_config(both);
	infeedd_start("");
	ck_assert(log_has("dataset 'extra'", 20000));
	make_config(web);	/* "extra" dropped, no SIGHUP */

	infeed_options_init(&o);
	o.batch_size = 2;
	o.seq_len = 128;
	f = client();
	ck_assert_int_eq(infeed_attach(f, "web", &o, NULL), INFEED_OK);
	infeed_free(f);
	infeed_options_init(&o);
	o.batch_size = 2;
	f = client();
	ck_assert_msg(infeed_attach(f, "extra", &o, NULL) == INFEED_OK,
	    "the packing's reload applied the file's edit: %s",
	    infeed_error(f));
	infeed_free(f);
	ck_assert(log_has("reloading the running configuration", 0));

	ck_assert_int_eq(kill(infeedd_pid, SIGHUP), 0);
	ck_assert(log_has("reloading ", 20000));
	f = client();
	/* The SIGHUP's reload is done when "extra" is gone. */
	while (infeed_attach(f, "extra", &o, NULL) == INFEED_OK) {
		infeed_free(f);
		usleep(50000);
		f = client();
	}
	infeed_free(f);
}
END_TEST

/* Tokens of the uint32 file that is swapped (256 KiB). */
#define SWAP_TOKENS	(64 * 1024)

/* The open of web, in a thread: it waits in the held scan. */
struct swap_open {
	pthread_t		 t;
	struct dataset_conf	 conf;
	struct dataset		*ds;
	char			*cause;
};

static void *
swap_open_main(void *arg)
{
	struct swap_open	*so = arg;

	so->ds = dataset_open(&so->conf, &so->cause);
	return (NULL);
}

/*
 * In this process: a uint32 token file is replaced by one of the same
 * size whose ids are past 2^31 (rename, as a writer that replaces files
 * does) while the open's check of the ids waits for its reads (held by
 * slowfs).  The rows served are the checked file's: the mapping is of
 * the descriptor that was read, not of the path opened again.
 */
START_TEST(a_token_file_replaced_while_checked_is_not_served)
{
	static uint32_t	 ids[SWAP_TOKENS];
	uint64_t	 idx[SWAP_TOKENS / 64 + 1];
	struct slowfs	 fs;
	struct swap_open so;
	struct dataset_kv kv[5];
	char		 src[400], mnt[400], path[600], bad[600], ipath[600];
	int32_t		*row;
	int64_t		 label;
	uint32_t	 i;
	unsigned	 ms;
	FILE		*fp;

	make_files(NULL);
	snprintf(src, sizeof(src), "%s/src", tpath("."));
	snprintf(mnt, sizeof(mnt), "%s/mnt", tpath("."));
	ck_assert_int_eq(mkdir(src, 0755), 0);
	for (i = 0; i < SWAP_TOKENS; i++)
		ids[i] = 2 + i % 1000;
	for (i = 0; i <= SWAP_TOKENS / 64; i++)
		idx[i] = (uint64_t)i * 64;
	snprintf(path, sizeof(path), "%s/web.bin", src);
	snprintf(bad, sizeof(bad), "%s/bad.bin", src);
	snprintf(ipath, sizeof(ipath), "%s/web.idx", tpath("."));
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	ck_assert_uint_eq(fwrite(ids, 4, SWAP_TOKENS, fp), SWAP_TOKENS);
	fclose(fp);
	for (i = 0; i < SWAP_TOKENS; i++)
		ids[i] = 0xfffffff0u;
	ck_assert_ptr_nonnull(fp = fopen(bad, "w"));
	ck_assert_uint_eq(fwrite(ids, 4, SWAP_TOKENS, fp), SWAP_TOKENS);
	fclose(fp);
	ck_assert_ptr_nonnull(fp = fopen(ipath, "w"));
	ck_assert_uint_eq(fwrite(idx, sizeof(idx), 1, fp), 1);
	fclose(fp);
	ck_assert(slowfs_start(&fs, src, mnt, (const char *const []){
	    "--delay-us", "100", "--readahead-kib", "4", NULL }));

	memset(&so, 0, sizeof(so));
	snprintf(path, sizeof(path), "%s/web.bin", mnt);
	kv[0] = (struct dataset_kv){ (char *)"type", (char *)"tokens" };
	kv[1] = (struct dataset_kv){ (char *)"path", path };
	kv[2] = (struct dataset_kv){ (char *)"index", ipath };
	kv[3] = (struct dataset_kv){ (char *)"dtype", (char *)"uint32" };
	kv[4] = (struct dataset_kv){ (char *)"seq_len", (char *)"64" };
	so.conf.name = (char *)"web";
	so.conf.source = (char *)"test";
	so.conf.kv = kv;
	so.conf.nkv = 5;
	slowfs_command(&fs, "hold");
	ck_assert_int_eq(pthread_create(&so.t, NULL, swap_open_main, &so), 0);
	for (ms = 0; slowfs_counter(&fs, "held") == 0 && ms < 20000; ms += 10)
		usleep(10000);
	ck_assert_uint_gt(slowfs_counter(&fs, "held"), 0);
	snprintf(path, sizeof(path), "%s/web.bin", src);
	ck_assert_int_eq(rename(bad, path), 0);
	slowfs_command(&fs, "release");
	pthread_join(so.t, NULL);
	ck_assert_msg(so.ds != NULL, "%s", so.cause);
	ck_assert_ptr_nonnull(row = malloc(so.ds->sample_bytes));
	ck_assert_int_eq(dataset_read(so.ds, 0, row, &label, false), 0);
	for (i = 0; i < 64; i++)
		ck_assert_msg(row[i] >= 2 && row[i] < 1002, "token %u of row 0 "
		    "is %d: not the checked file's", i, row[i]);
	free(row);
	dataset_free(so.ds);
	slowfs_stop(&fs);
}
END_TEST

/*
 * infeedd stopped while the fork server opens a reload's catalogue (its
 * second half): the fork server sees the daemon's end of its socket close
 * and its open gives up at the next scan chunk, so the stop is prompt
 * (fixes item 4).  A 32 MiB token file through slowfs: read at 1 ms a
 * read by the daemon's open, then at 40 ms a read (about 10 s of reads)
 * by the fork server's.
 */
START_TEST(a_stop_during_the_fork_servers_open_is_prompt)
{
	enum { N = 16 << 20 };		/* uint16 tokens */
	struct slowfs	 fs;
	static uint16_t	 ids[N];
	static char	 buf[1 << 16];
	char		 src[400], mnt[400], path[420];
	const char	*p;
	uint64_t	 t0, ms;
	FILE		*fp;
	int		 i, status;
	bool		 opened = false;

	make_files(NULL);
	snprintf(src, sizeof(src), "%s/src", tpath("."));
	snprintf(mnt, sizeof(mnt), "%s/mnt", tpath("."));
	ck_assert_int_eq(mkdir(src, 0755), 0);
	for (i = 0; i < N; i++)
		ids[i] = i % 1000 == 999 ? TOK_EOT : (uint16_t)(2 + i % 1000);
	snprintf(path, sizeof(path), "%s/big.bin", src);
	ck_assert_ptr_nonnull(fp = fopen(path, "w"));
	ck_assert_uint_eq(fwrite(ids, 2, N, fp), N);
	fclose(fp);
	ck_assert(slowfs_start(&fs, src, mnt, (const char *const []){
	    "--delay-us", "1000", "--readahead-kib", "128", NULL }));
	infeedd_start("");
	ck_assert_ptr_nonnull(fp = fopen(tpath("infeedd.conf"), "a"));
	fprintf(fp, "\n[dataset big]\ntype = tokens\npath = %s/big.bin\n"
	    "eot = %d\nseq_len = 64\n", mnt, TOK_EOT);
	fclose(fp);
	ck_assert_int_eq(kill(infeedd_pid, SIGHUP), 0);
	/* The daemon's own open done (its line, not the fork server's). */
	for (i = 0; i < 6000 && !opened; i++) {
		read_log(buf, sizeof(buf));
		for (p = buf; (p = strstr(p, "dataset 'big': tokens")) != NULL;
		    p++) {
			const char *l = p;

			while (l > buf && l[-1] != '\n')
				l--;
			opened |= strncmp(strchr(l, ' ') + 1, "infeedd[",
			    8) == 0;
		}
		if (!opened)
			usleep(10000);
	}
	ck_assert_msg(opened, "the daemon never opened 'big': %s", buf);
	slowfs_command(&fs, "delay-us 40000");
	slowfs_command(&fs, "drop");
	t0 = now_ms();
	ck_assert_int_eq(kill(infeedd_pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(infeedd_pid, &status, 0), infeedd_pid);
	ms = now_ms() - t0;
	infeedd_pid = -1;
	printf("stopped during the fork server's open in %llu ms\n",
	    (unsigned long long)ms);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Under valgrind the exits (leak checks) take seconds of their own. */
	ck_assert_msg(ms < 4 * tok_limit_ms(), "the stop took %llu ms",
	    (unsigned long long)ms);
	ck_assert(log_has("its catalogue's open gives up", 0));
	slowfs_stop(&fs);
}
END_TEST

static Suite *
tokens_suite(void)
{
	Suite	*s = suite_create("tokens");
	TCase	*tc = tcase_create("tokens");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, a_packing_past_the_budget_is_refused_unmade);
	tcase_add_test(tc, a_packing_on_demand_keeps_the_running_configuration);
	tcase_add_test(tc,
	    a_c_trainer_gets_each_token_once_with_positions_and_segments);
	/* These need FUSE. */
	if (slowfs_probe()) {
		tcase_add_test(tc, a_reload_opens_a_token_dataset_off_the_loop);
		tcase_add_test(tc, a_packing_on_demand_is_made_off_the_loop);
		tcase_add_test(tc,
		    a_token_file_replaced_while_checked_is_not_served);
		tcase_add_test(tc,
		    a_stop_during_the_fork_servers_open_is_prompt);
	} else
		printf("the cases with slowfs skipped: %s\n",
		    slowfs_unavailable());
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(tokens_suite()));
}
