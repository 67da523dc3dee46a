/* SPDX-License-Identifier: MIT */
/*
 * Integration tests: the real infeedd, started on a private socket in a
 * temporary directory with a catalogue of small files made here, driven
 * through libinfeed and through raw frames on the socket.
 *
 * $INFEEDD names the daemon binary (meson sets it).
 */

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "infeed.h"
#include "sampler.h"
#include "harness.h"
#include "utf8.h"

/* The catalogue lists good datasets and leaves out the broken one. */
START_TEST(list_names_every_served_dataset)
{
	struct infeed		*f = client();
	struct infeed_dataset	*list;
	size_t			 n, i;
	int			 raw = 0, syn = 0;

	ck_assert_int_eq(infeed_list_datasets(f, &list, &n), INFEED_OK);
	ck_assert_uint_eq(n, 2);
	for (i = 0; i < n; i++) {
		if (strcmp(list[i].name, "raw") == 0) {
			raw = 1;
			ck_assert_uint_eq(list[i].samples, RAW_N);
			ck_assert_uint_eq(list[i].ndim, 3);
			ck_assert_uint_eq(list[i].shape[1], RAW_H);
			ck_assert_int_eq(list[i].dtype, INFEED_DTYPE_UINT8);
			ck_assert_uint_eq(list[i].classes, RAW_CLASSES);
		}
		if (strcmp(list[i].name, "synthetic") == 0) {
			syn = 1;
			ck_assert_uint_eq(list[i].samples, 500);
			ck_assert_int_eq(list[i].dtype, INFEED_DTYPE_FLOAT32);
		}
		ck_assert_str_ne(list[i].name, "broken");
	}
	ck_assert(raw && syn);
	infeed_datasets_free(list, n);
	infeed_free(f);
}
END_TEST

/* A client sending garbage is cut off; another keeps being served. */
START_TEST(garbage_bytes_cut_the_client_off)
{
	struct infeed		*good = client();
	struct infeed_dataset	*list;
	struct infeed_step	 st;
	struct infeed_options	 o;
	uint8_t			 junk[64];
	size_t			 n;
	int			 bad;

	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(good, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(good, &st), INFEED_OK);

	bad = raw_connect();
	memset(junk, 0xff, sizeof(junk));
	junk[0] = 20;		/* a small length, then bytes that do not parse */
	junk[1] = junk[2] = junk[3] = 0;
	ck_assert_int_eq(write(bad, junk, sizeof(junk)), sizeof(junk));
	ck_assert_msg(raw_closed(bad), "the garbage client was not cut off");
	close(bad);

	ck_assert_int_eq(infeed_release(good, &st), INFEED_OK);
	ck_assert_int_eq(infeed_next(good, &st), INFEED_OK);
	ck_assert_uint_eq(st.step, 1);
	ck_assert_int_eq(infeed_list_datasets(good, &list, &n), INFEED_OK);
	ck_assert_uint_eq(n, 2);
	infeed_datasets_free(list, n);
	infeed_free(good);
}
END_TEST

/* An oversized length gets an Error and a disconnect, nothing else. */
START_TEST(oversized_frame_refused_before_allocating)
{
	struct wire_in	 in;
	Infeed__Frame	*r;
	uint8_t		 hdr[4] = { 0xff, 0xff, 0xff, 0x7f };
	int		 fd = raw_connect();
	struct infeed	*other;

	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(fd, &in, WIRE_PROTOCOL_VERSION);
	ck_assert_int_eq(write(fd, hdr, 4), 4);
	r = raw_recv(fd, &in);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
	ck_assert_int_eq(r->error->code, INFEED__ERROR_CODE__ERROR_BAD_FRAME);
	ck_assert_ptr_nonnull(strstr(r->error->message, "larger than"));
	infeed__frame__free_unpacked(r, NULL);
	ck_assert(raw_closed(fd));
	close(fd);
	wire_in_clear(&in);
	other = client();
	infeed_free(other);
}
END_TEST

/* A version mismatch is refused with both versions named. */
START_TEST(hello_with_another_version_refused)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	struct wire_in	 in;
	int		 fd = raw_connect();

	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	h.protocol_version = 99;
	f.msg_case = INFEED__FRAME__MSG_HELLO;
	f.hello = &h;
	raw_send(fd, &f);
	r = raw_recv(fd, &in);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
	ck_assert_int_eq(r->error->code,
	    INFEED__ERROR_CODE__ERROR_VERSION_MISMATCH);
	ck_assert_ptr_nonnull(strstr(r->error->message, "version 99"));
	ck_assert_ptr_nonnull(strstr(r->error->message, "version 1"));
	infeed__frame__free_unpacked(r, NULL);
	ck_assert(raw_closed(fd));
	close(fd);
	wire_in_clear(&in);
}
END_TEST

/* A request before Hello, or a reply sent as a request, is refused. */
START_TEST(frames_out_of_order_refused)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT, *r;
	Infeed__ListDatasets	 ld = INFEED__LIST_DATASETS__INIT;
	Infeed__Welcome		 w = INFEED__WELCOME__INIT;
	struct wire_in		 in;
	int			 fd = raw_connect();

	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	f.msg_case = INFEED__FRAME__MSG_LIST_DATASETS;
	f.list_datasets = &ld;
	raw_send(fd, &f);
	r = raw_recv(fd, &in);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
	ck_assert_ptr_nonnull(strstr(r->error->message, "before Hello"));
	infeed__frame__free_unpacked(r, NULL);
	ck_assert(raw_closed(fd));
	close(fd);
	wire_in_clear(&in);

	fd = raw_connect();
	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(fd, &in, WIRE_PROTOCOL_VERSION);
	w.protocol_version = 1;
	f.msg_case = INFEED__FRAME__MSG_WELCOME;
	f.welcome = &w;
	raw_send(fd, &f);
	r = raw_recv(fd, &in);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
	ck_assert_int_eq(r->error->code, INFEED__ERROR_CODE__ERROR_UNEXPECTED);
	infeed__frame__free_unpacked(r, NULL);
	ck_assert(raw_closed(fd));
	close(fd);
	wire_in_clear(&in);
}
END_TEST

/*
 * Row @r's label in @st, which must hold labels of @label_dtype only: int64
 * through labels64, int32 through labels.
 */
static int64_t
step_label(const struct infeed_step *st, int label_dtype, uint64_t r)
{
	ck_assert_int_eq(st->label_dtype, label_dtype);
	if (label_dtype == INFEED_DTYPE_INT64) {
		ck_assert_ptr_null(st->labels);
		ck_assert_ptr_nonnull(st->labels64);
		return (st->labels64[r]);
	}
	ck_assert_ptr_null(st->labels64);
	ck_assert_ptr_nonnull(st->labels);
	return (st->labels[r]);
}

/* Read one epoch; check order, bytes and labels of every row. */
static void
check_epoch(struct infeed *f, const struct infeed_session_info *info,
    struct sampler *smp, uint64_t epoch, uint8_t *seen, uint64_t *count)
{
	struct infeed_step	 st;
	uint64_t		*expect, s, r, bad = 0;
	const uint8_t		*row;
	unsigned		 j;

	expect = calloc(info->combined_batch_size, sizeof(*expect));
	for (s = 0; s < info->steps_per_epoch; s++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		ck_assert_uint_eq(st.epoch, epoch);
		ck_assert_uint_eq(st.step, s);
		ck_assert_uint_eq(sampler_step_indices(smp, epoch, s, expect),
		    st.rows);
		for (r = 0; r < st.rows; r++) {
			if (st.indices[r] != expect[r] ||
			    st.indices[r] >= RAW_N || seen[st.indices[r]]++)
				bad++;
			row = (const uint8_t *)st.data + r * RAW_BYTES;
			for (j = 0; j < RAW_BYTES; j++)
				bad += row[j] != raw_byte(st.indices[r], j);
			bad += step_label(&st, info->label_dtype, r) !=
			    (int64_t)((st.indices[r] * 3) % RAW_CLASSES);
		}
		*count += st.rows;
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_msg(bad == 0, "%llu wrong rows, bytes or labels",
	    (unsigned long long)bad);
	free(expect);
}

/* Attach to "raw" with @o and check @epochs epochs exactly. */
static void
run_epochs(struct infeed_options *o, unsigned epochs, int covers_all)
{
	struct infeed			*f = client();
	struct infeed_session_info	 info;
	struct sampler			 smp;
	uint8_t				*seen;
	uint64_t			 count, i;
	unsigned			 e;

	ck_assert_msg(infeed_attach(f, "raw", o, &info) == INFEED_OK, "%s",
	    infeed_error(f));
	raw_oracle(&smp, o);
	ck_assert_uint_eq(info.combined_batch_size, smp.cbs);
	ck_assert_uint_eq(info.steps_per_epoch, smp.steps_per_epoch);
	/* Labels are int32 unless int64 were asked for. */
	ck_assert_int_eq(info.label_dtype, o->label_dtype ==
	    INFEED_DTYPE_INT64 ? INFEED_DTYPE_INT64 : INFEED_DTYPE_INT32);
	seen = calloc(RAW_N, 1);
	for (e = 0; e < epochs; e++) {
		memset(seen, 0, RAW_N);
		count = 0;
		check_epoch(f, &info, &smp, e, seen, &count);
		if (covers_all) {
			for (i = 0; i < RAW_N; i++)
				ck_assert_msg(seen[i] == 1, "index %llu seen "
				    "%u times in epoch %u",
				    (unsigned long long)i, seen[i], e);
		}
	}
	free(seen);
	sampler_clear(&smp);
	infeed_free(f);
}

/* Without shuffle and without drop_last, an epoch is 0..N-1 in order. */
START_TEST(epoch_in_order_delivers_every_sample_once)
{
	struct infeed_options	o;

	infeed_options_init(&o);
	o.batch_size = 7;
	o.device_iterations = 5;
	o.replication_factor = 2;
	o.gradient_accumulation = 3;
	o.drop_last = false;
	run_epochs(&o, 2, 1);
}
END_TEST

/* Shuffled epochs deliver every index once, in the sampler's order. */
START_TEST(shuffled_epochs_deliver_every_sample_once)
{
	struct infeed_options	o;

	infeed_options_init(&o);
	o.batch_size = 16;
	o.device_iterations = 4;
	o.replication_factor = 2;
	o.shuffle = true;
	o.seed = 42;
	o.drop_last = false;
	o.buffer_size = 2;
	run_epochs(&o, 3, 1);
}
END_TEST

/* Distributed shares are checked against the sampler's blocks. */
START_TEST(distributed_shares_cover_the_epoch_once)
{
	struct infeed_options	o;
	uint32_t		p;

	for (p = 0; p < 3; p++) {
		infeed_options_init(&o);
		o.batch_size = 10;
		o.device_iterations = 3;
		o.shuffle = true;
		o.seed = 5;
		o.distributed_process_id = p;
		o.distributed_process_count = 3;
		run_epochs(&o, 2, 0);
	}
}
END_TEST

/* Collect the indices of the first @steps steps with @o. */
static uint64_t *
collect(struct infeed_options *o, unsigned steps, size_t *n)
{
	struct infeed		*f = client();
	struct infeed_step	 st;
	uint64_t		*out = NULL;
	unsigned		 s;

	*n = 0;
	ck_assert_int_eq(infeed_attach(f, "raw", o, NULL), INFEED_OK);
	for (s = 0; s < steps; s++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		out = realloc(out, (*n + st.rows) * sizeof(*out));
		memcpy(out + *n, st.indices, st.rows * sizeof(*out));
		*n += st.rows;
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	infeed_free(f);
	return (out);
}

/*
 * label_dtype INT64: the workers write int64 labels, equal to the
 * dataset's for every row of every epoch, and Attached says so; asking for
 * INT32 explicitly is the same as the default.
 */
START_TEST(int64_labels_equal_the_datasets_for_every_row)
{
	struct infeed_options	o;

	infeed_options_init(&o);
	ck_assert_int_eq(o.label_dtype, 0);
	o.batch_size = 7;
	o.device_iterations = 3;
	o.replication_factor = 2;
	o.shuffle = true;
	o.seed = 9;
	o.drop_last = false;
	o.label_dtype = INFEED_DTYPE_INT64;
	run_epochs(&o, 2, 1);
	o.label_dtype = INFEED_DTYPE_INT32;
	run_epochs(&o, 1, 1);
}
END_TEST

/* Attached as raw frames: label_dtype said, INT32 by default. */
START_TEST(attached_says_the_label_dtype)
{
	Infeed__Frame		 fr = INFEED__FRAME__INIT, *r;
	Infeed__Attach		 a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	 o = INFEED__LOADER_OPTIONS__INIT;
	struct wire_in		 in;
	uint64_t		 lbytes[2];
	int			 fd, i;

	for (i = 0; i < 2; i++) {
		fd = raw_connect();
		wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
		raw_hello(fd, &in, 1);
		o.has_batch_size = 1;
		o.batch_size = 100;
		o.has_label_dtype = i;
		o.label_dtype = INFEED__DTYPE__DTYPE_INT64;
		a.dataset = (char *)"raw";
		a.options = &o;
		fr.msg_case = INFEED__FRAME__MSG_ATTACH;
		fr.attach = &a;
		raw_send(fd, &fr);
		ck_assert_ptr_nonnull(r = raw_recv(fd, &in));
		ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ATTACHED);
		ck_assert(r->attached->has_label_dtype);
		ck_assert_int_eq(r->attached->label_dtype, i == 0 ?
		    INFEED__DTYPE__DTYPE_INT32 : INFEED__DTYPE__DTYPE_INT64);
		/* The labels area is 100 labels of that size, 64-aligned. */
		lbytes[i] = r->attached->indices_offset -
		    r->attached->labels_offset;
		ck_assert_uint_eq(r->attached->labels_offset % 64, 0);
		infeed__frame__free_unpacked(r, NULL);
		wire_in_clear(&in);
		close(fd);
	}
	ck_assert_uint_eq(lbytes[0], 448);	/* 400 up to 64 */
	ck_assert_uint_eq(lbytes[1], 832);	/* 800 up to 64 */
}
END_TEST

/*
 * A label_dtype other than INT32 or INT64 is refused with
 * ERROR_INVALID_ARGUMENT, a message that names it and what is accepted,
 * and the connection stays usable.
 */
START_TEST(other_label_dtypes_refused_with_advice)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st;
	const char		*msg;

	infeed_options_init(&o);
	o.label_dtype = INFEED_DTYPE_FLOAT32;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(f),
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	msg = infeed_error(f);
	ck_assert_msg(strstr(msg, "label_dtype is DTYPE_FLOAT32 (5)") != NULL,
	    "%s", msg);
	ck_assert_msg(strstr(msg, "expected DTYPE_INT32 (2, the default) or "
	    "DTYPE_INT64 (3") != NULL, "%s", msg);
	o.label_dtype = 99;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(f),
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	msg = infeed_error(f);
	ck_assert_msg(strstr(msg, "label_dtype is 99, which is no DType") !=
	    NULL, "%s", msg);
	ck_assert_msg(strstr(msg, "DTYPE_INT64") != NULL, "%s", msg);
	o.label_dtype = INFEED_DTYPE_UINT8;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "DTYPE_UINT8"));
	/* Still usable. */
	o.label_dtype = INFEED_DTYPE_INT64;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_int_eq(st.labels64[0], 0);
	infeed_free(f);
}
END_TEST

/* Dataset "big": sample BIG_INDEX's label does not fit in int32. */
#define BIG_INDEX	500
#define BIG_LABEL	INT64_C(3000000000)

/*
 * Restart the daemon with dataset "big": raw.bin's samples with int64
 * labels i % 10, but BIG_LABEL for sample BIG_INDEX.
 */
static void
start_with_big_labels(void)
{
	static int64_t	labels[RAW_N];
	char		path[400], extra[1024];
	unsigned	i;

	infeedd_stop();
	for (i = 0; i < RAW_N; i++)
		labels[i] = i % 10;
	labels[BIG_INDEX] = BIG_LABEL;
	snprintf(path, sizeof(path), "%s/big-labels.bin", dir);
	write_file(path, labels, sizeof(labels));
	snprintf(extra, sizeof(extra),
	    "[dataset big]\n"
	    "type = raw\n"
	    "path = %s/raw.bin\n"
	    "shape = 1,%d,%d\n"
	    "dtype = uint8\n"
	    "labels = %s\n"
	    "label_dtype = int64\n", dir, RAW_H, RAW_W, path);
	make_config(extra);
	infeedd_start(NULL);
}

/*
 * A label that does not fit in int32 comes whole as int64; with int32
 * labels it is never wrapped into another class: the Next that needs it
 * gets ERROR_DATA naming the sample, the label and the way out.
 */
START_TEST(label_too_large_for_int32_fails_with_its_index)
{
	struct infeed		*f, *g;
	struct infeed_options	 o;
	struct infeed_step	 st;
	const char		*msg;
	char			 want[128];
	uint64_t		 row;
	int			 i, r = INFEED_OK, found = 0;

	start_with_big_labels();
	f = client();
	infeed_options_init(&o);
	o.batch_size = 100;
	o.label_dtype = INFEED_DTYPE_INT64;
	ck_assert_int_eq(infeed_attach(f, "big", &o, NULL), INFEED_OK);
	for (i = 0; i < 10; i++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		for (row = 0; row < st.rows; row++) {
			found += st.indices[row] == BIG_INDEX;
			ck_assert_int_eq(st.labels64[row], st.indices[row] ==
			    BIG_INDEX ? BIG_LABEL : (int64_t)st.indices[row] %
			    10);
		}
		infeed_release(f, &st);
	}
	ck_assert_int_eq(found, 1);
	infeed_free(f);

	g = client();
	o.label_dtype = 0;
	ck_assert_int_eq(infeed_attach(g, "big", &o, NULL), INFEED_OK);
	for (i = 0; i < 10 && r == INFEED_OK; i++) {
		r = infeed_next(g, &st);
		if (r == INFEED_OK) {
			ck_assert_uint_lt(st.step, BIG_INDEX / 100);
			infeed_release(g, &st);
		}
	}
	ck_assert_int_eq(r, INFEED_ERR_DAEMON);
	ck_assert_int_eq(infeed_daemon_code(g), INFEED__ERROR_CODE__ERROR_DATA);
	msg = infeed_error(g);
	snprintf(want, sizeof(want), "the label of sample %d (epoch 0, step "
	    "%d) is %lld, which does not fit in the int32 labels", BIG_INDEX,
	    BIG_INDEX / 100, (long long)BIG_LABEL);
	ck_assert_msg(strstr(msg, want) != NULL, "%s", msg);
	ck_assert_msg(strstr(msg, "label_dtype DTYPE_INT64") != NULL, "%s",
	    msg);
	ck_assert_msg(strstr(msg, "big-labels.bin") != NULL, "%s", msg);
	infeed_free(g);
}
END_TEST

/* The order depends on seed and epoch only: not workers, not buffer size. */
START_TEST(order_independent_of_worker_count)
{
	struct infeed_options	 o;
	uint64_t		*a, *b, *c;
	size_t			 na, nb, nc;

	infeed_options_init(&o);
	o.batch_size = 50;
	o.shuffle = true;
	o.seed = 1234;
	o.num_workers = 1;
	o.buffer_size = 1;
	a = collect(&o, 45, &na);
	o.num_workers = 2;
	o.buffer_size = 6;
	b = collect(&o, 45, &nb);
	/* And across a daemon restart with another pool size. */
	infeedd_stop();
	infeedd_start("1");
	c = collect(&o, 45, &nc);
	ck_assert_uint_eq(na, nb);
	ck_assert_uint_eq(na, nc);
	ck_assert_int_eq(memcmp(a, b, na * sizeof(*a)), 0);
	ck_assert_int_eq(memcmp(a, c, na * sizeof(*a)), 0);
	/* 45 steps of 50 cross two epoch boundaries: epochs differ. */
	ck_assert_int_ne(memcmp(a, a + 1000, 250 * sizeof(*a)), 0);
	free(a);
	free(b);
	free(c);
}
END_TEST

/* Without load_indefinitely each epoch ends with END_OF_DATA. */
START_TEST(end_of_data_follows_the_last_step)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st;
	int			 s, e;

	infeed_options_init(&o);
	o.batch_size = 100;
	o.device_iterations = 3;	/* 3 steps of 300, 100 dropped */
	o.load_indefinitely = false;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	for (e = 0; e < 2; e++) {
		for (s = 0; s < 3; s++) {
			ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
			ck_assert_uint_eq(st.epoch, (uint64_t)e);
			ck_assert_uint_eq(st.step, (uint64_t)s);
			ck_assert_uint_eq(st.rows, 300);
			infeed_release(f, &st);
		}
		ck_assert_int_eq(infeed_next(f, &st), INFEED_END_OF_DATA);
	}
	infeed_free(f);
}
END_TEST

/* Bad options are refused with a reason; the connection stays usable. */
START_TEST(bad_attach_options_refused_with_advice)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st;

	infeed_options_init(&o);
	o.batch_size = 0;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "batch_size"));
	infeed_options_init(&o);
	o.buffer_size = 0;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "buffer_size"));
	infeed_options_init(&o);
	ck_assert_int_eq(infeed_attach(f, "nope", &o, NULL), INFEED_ERR_DAEMON);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "no such dataset"));
	o.batch_size = 2000;	/* more than the dataset with drop_last */
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	infeed_options_init(&o);
	o.distributed_process_id = 3;
	o.distributed_process_count = 2;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	/* A step too large for the memory budget (256M). */
	infeed_options_init(&o);
	ck_assert_int_eq(infeed_attach(f, "synthetic", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	o.batch_size = 500;
	o.buffer_size = 64;
	o.drop_last = true;
	o.to_float32 = true;
	o.nchannels = 2;	/* samples have one channel */
	o.mean[0] = o.mean[1] = 0;
	o.std[0] = o.std[1] = 1;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "channels"));
	/* Still usable. */
	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.rows, 10);
	infeed_free(f);
}
END_TEST

/* An attach beyond the memory budget says how much it needs and has. */
START_TEST(attach_past_the_memory_budget_refused_until_freed)
{
	struct infeed		*f = client(), *g = client();
	struct infeed_options	 o;

	/* synthetic: 256 B a sample; 500 rows x 64 slots is about 9 MiB. */
	infeedd_stop();
	make_config("memory_budget = 12M");
	infeedd_start(NULL);
	infeed_free(f);
	infeed_free(g);
	f = client();
	g = client();
	infeed_options_init(&o);
	o.batch_size = 500;
	o.buffer_size = 64;
	ck_assert_int_eq(infeed_attach(f, "synthetic", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_attach(g, "synthetic", &o, NULL),
	    INFEED_ERR_DAEMON);
	ck_assert_ptr_nonnull(strstr(infeed_error(g), "memory budget"));
	infeed_free(f);
	/* The first session's ring is returned to the budget. */
	usleep(100000);
	ck_assert_msg(infeed_attach(g, "synthetic", &o, NULL) == INFEED_OK,
	    "%s", infeed_error(g));
	infeed_free(g);
}
END_TEST

/*
 * A client name is kept as valid UTF-8 of at most INFEED_MAX_CLIENT_NAME
 * bytes, cut on a character, on one line: Stats stays decodable by strict
 * protobuf libraries and the log cannot be forged.
 */
START_TEST(test_client_name_cut_on_a_character)
{
	struct infeed	*f = infeed_new(), *g = infeed_new();
	Infeed__Frame	*r;
	char		 name[INFEED_MAX_CLIENT_NAME + 8];
	const char	*n;
	size_t		 i, found = 0;

	/* 63 ASCII bytes, then a 2-byte character across the limit. */
	memset(name, 'a', INFEED_MAX_CLIENT_NAME - 1);
	strcpy(name + INFEED_MAX_CLIENT_NAME - 1, "\xc3\xa9xyz");
	ck_assert_int_eq(infeed_connect(f, sock_path, name), INFEED_OK);
	ck_assert_int_eq(infeed_attach(f, "raw", NULL, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_connect(g, sock_path,
	    "evil\ninfo: forged line \x1b[31m"), INFEED_OK);
	ck_assert_int_eq(infeed_attach(g, "raw", NULL, NULL), INFEED_OK);
	r = raw_stats();
	for (i = 0; i < r->stats->n_sessions; i++) {
		n = r->stats->sessions[i]->client_name;
		ck_assert_ptr_nonnull(n);
		ck_assert_msg(utf8_valid(n, strlen(n)), "client name '%s' is "
		    "not valid UTF-8", n);
		ck_assert_uint_le(strlen(n), INFEED_MAX_CLIENT_NAME);
		ck_assert_ptr_null(strpbrk(n, "\n\r\x1b"));
		if (n[0] == 'a') {
			ck_assert_uint_eq(strlen(n), INFEED_MAX_CLIENT_NAME - 1);
			found++;
		} else {
			ck_assert_str_eq(n, "evil?info: forged line ?[31m");
			found++;
		}
	}
	ck_assert_uint_eq(found, 2);
	infeed__frame__free_unpacked(r, NULL);
	infeed_free(f);
	infeed_free(g);
}
END_TEST

/* An overlong dataset name is refused with the advice kept, in UTF-8. */
START_TEST(test_long_dataset_name_keeps_the_advice)
{
	struct infeed	*f = client();
	char		*name;
	const char	*e;
	size_t		 i;

	name = malloc(3001);
	for (i = 0; i < 3000; i += 2)
		memcpy(name + i, "\xc3\xa9", 2);
	name[3000] = '\0';
	ck_assert_int_eq(infeed_attach(f, name, NULL, NULL),
	    INFEED_ERR_DAEMON);
	e = infeed_error(f);
	ck_assert_int_eq(infeed_daemon_code(f),
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	ck_assert_msg(utf8_valid(e, strlen(e)), "not UTF-8: %s", e);
	ck_assert_msg(strstr(e, "infeedctl datasets") != NULL, "%s", e);
	ck_assert_msg(strstr(e, "at most 64 bytes") != NULL, "%s", e);
	/* The connection goes on. */
	ck_assert_int_eq(infeed_attach(f, "raw", NULL, NULL), INFEED_OK);
	free(name);
	infeed_free(f);
}
END_TEST

/* A budget below a MiB is quoted exactly, not as "0 MiB". */
START_TEST(test_memory_budget_in_exact_units)
{
	struct infeed		*f;
	struct infeed_options	 o;
	const char		*e;

	infeedd_stop();
	make_config("memory_budget = 100K");
	infeedd_start(NULL);
	f = client();
	infeed_options_init(&o);
	o.batch_size = 1000;
	o.buffer_size = 8;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_ERR_DAEMON);
	e = infeed_error(f);
	ck_assert_msg(strstr(e, "0 MiB") == NULL, "%s", e);
	ck_assert_msg(strstr(e, "(100 KiB, memory_budget in") != NULL, "%s", e);
	ck_assert_msg(strstr(e, "8 slots of 28 KiB") != NULL, "%s", e);
	infeed_free(f);
}
END_TEST

/* uint8 -> float32 with scale and normalisation. */
START_TEST(float32_transform_normalises_rows)
{
	struct infeed			*f = client();
	struct infeed_options		 o;
	struct infeed_session_info	 info;
	struct infeed_step		 st;
	const float			*x;
	float				 want;
	uint64_t			 r;
	unsigned			 j;

	infeed_options_init(&o);
	o.batch_size = 25;
	o.to_float32 = true;
	o.scale = 1.0f / 255.0f;
	o.nchannels = 1;
	o.mean[0] = 0.1307f;
	o.std[0] = 0.3081f;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, &info), INFEED_OK);
	ck_assert_int_eq(info.data_dtype, INFEED_DTYPE_FLOAT32);
	ck_assert_uint_eq(info.sample_bytes, RAW_BYTES * sizeof(float));
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	x = st.data;
	for (r = 0; r < st.rows; r++) {
		for (j = 0; j < RAW_BYTES; j++) {
			want = ((float)raw_byte(st.indices[r], j) / 255.0f -
			    0.1307f) / 0.3081f;
			ck_assert_float_eq_tol(x[r * RAW_BYTES + j], want,
			    1e-5);
		}
	}
	infeed_free(f);
}
END_TEST

static uint64_t	session_errors_sent(void);

/*
 * Releasing a slot that is not held is refused; the session goes on, and
 * the step whose reply came with the refusal is delivered next.
 */
START_TEST(release_of_an_unheld_slot_refused)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st, fake;

	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	fake = st;
	fake.slot = 77;
	ck_assert_int_eq(infeed_release(f, &fake), INFEED_OK);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	/* The refusal of slot 77 is reported by the next call. */
	ck_assert_int_eq(infeed_next(f, &st), INFEED_ERR_DAEMON);
	ck_assert_ptr_nonnull(strstr(infeed_error(f), "slot 77"));
	/* The step that came with the refusal is not lost. */
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.step, 1);
	ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.step, 2);
	/* The refusal is counted against the session, for infeedctl top. */
	ck_assert_uint_eq(session_errors_sent(), 1);
	infeed_free(f);
}
END_TEST

/* Errors sent during the only session, as another client sees them in
 * Stats and infeedctl top --once --json shows them. */
static uint64_t
session_errors_sent(void)
{
	struct infeed_stats	*st;
	struct infeed		*g = client();
	uint64_t		 n;
	char			 want[64], out[4096];

	ck_assert_msg(infeed_get_stats(g, &st) == INFEED_OK, "%s",
	    infeed_error(g));
	ck_assert_uint_eq(st->nsessions, 1);
	n = st->sessions[0]->errors_sent;
	infeed_stats_free(st);
	infeed_free(g);
	infeedctl_run("top --once --json", out, sizeof(out));
	snprintf(want, sizeof(want), "\"errors_sent\":%llu}",
	    (unsigned long long)n);
	ck_assert_msg(strstr(out, want) != NULL, "%s", out);
	return (n);
}

/* The ring is mapped read-only: the client cannot write the daemon's data. */
START_TEST(ring_mapped_read_only_in_the_client)
{
	struct infeed		*f = client();
	struct infeed_options	 o;
	struct infeed_step	 st;
	long			 page = sysconf(_SC_PAGESIZE);
	void			*p;

	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	p = (void *)((uintptr_t)st.data & ~(uintptr_t)(page - 1));
	ck_assert_int_eq(mprotect(p, (size_t)page, PROT_READ | PROT_WRITE),
	    -1);
	infeed_free(f);
}
END_TEST

/* A worker killed mid-epoch is replaced; the epoch is still complete. */
START_TEST(killed_workers_restarted_and_rows_redone)
{
	struct infeed_options	 o;
	char			 cmd[256];

	infeed_options_init(&o);
	o.batch_size = 20;
	o.shuffle = true;
	o.drop_last = false;
	o.buffer_size = 2;
	/* The workers: the children of the fork server, the daemon's child. */
	snprintf(cmd, sizeof(cmd), "pkill -9 -P \"$(pgrep -d, -P %d)\"",
	    (int)infeedd_pid);
	ck_assert_int_eq(system(cmd), 0);
	run_epochs(&o, 2, 1);
	ck_assert_int_eq(system(cmd), 0);
	run_epochs(&o, 1, 1);
}
END_TEST

/* SIGTERM stops the daemon cleanly and removes its socket. */
START_TEST(sigterm_stops_cleanly_and_removes_the_socket)
{
	struct infeed	*f = client();
	struct stat	 sb;
	int		 status;

	ck_assert_int_eq(stat(sock_path, &sb), 0);
	status = infeedd_stop();
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_int_eq(stat(sock_path, &sb), -1);
	infeed_free(f);
}
END_TEST

/* Many clients at once, all served. */
START_TEST(many_clients_served_at_once)
{
	struct infeed		*f[20];
	struct infeed_options	 o;
	struct infeed_step	 st;
	int			 i;

	infeed_options_init(&o);
	o.batch_size = 5;
	for (i = 0; i < 20; i++) {
		f[i] = client();
		ck_assert_int_eq(infeed_attach(f[i], "raw", &o, NULL),
		    INFEED_OK);
	}
	for (i = 0; i < 20; i++) {
		ck_assert_int_eq(infeed_next(f[i], &st), INFEED_OK);
		ck_assert_uint_eq(st.indices[0], 0);
	}
	for (i = 0; i < 20; i++)
		infeed_free(f[i]);
}
END_TEST

/* Take @n steps from @f, sleeping @think_us before each Next. */
static void
take_steps(struct infeed *f, unsigned n, useconds_t think_us)
{
	struct infeed_step	st;
	unsigned		i;

	for (i = 0; i < n; i++) {
		usleep(think_us);
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
}

/* The session of @f's attach in @st. */
static const struct infeed_session_stats *
stats_of(const struct infeed_stats *st, const char *name)
{
	size_t	i;

	for (i = 0; i < st->nsessions; i++)
		if (st->sessions[i]->client_name != NULL &&
		    strcmp(st->sessions[i]->client_name, name) == 0)
			return (st->sessions[i]);
	ck_abort_msg("no session of %s in Stats", name);
	return (NULL);
}

/*
 * The data wait tells whose fault a slow trainer is: one that thinks
 * between steps on fast data is input-bound near 0 % of the time, one
 * that reads a slow dataset (sample_delay_us) near 100 %.  STATUS= and
 * `infeedctl top` show it.
 */
START_TEST(data_wait_tells_a_slow_trainer_from_slow_data)
{
	struct infeed		*fast, *slow, *f;
	struct infeed_options	 o;
	struct infeed_stats	*st;
	const struct infeed_session_stats *a, *b;
	char			 out[8192];

	infeedd_stop();
	make_config("\n[dataset slow]\ntype = synthetic\nsamples = 400\n"
	    "shape = 1,4,4\ndtype = uint8\nsample_delay_us = 2000\n");
	infeedd_start(NULL);
	fast = infeed_new();
	slow = infeed_new();
	ck_assert_int_eq(infeed_connect(fast, sock_path, "thinker"), INFEED_OK);
	ck_assert_int_eq(infeed_connect(slow, sock_path, "starved"), INFEED_OK);
	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(fast, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_attach(slow, "slow", &o, NULL), INFEED_OK);
	take_steps(fast, 15, 20000);	/* 20 ms of work per step */
	take_steps(slow, 15, 0);	/* each step takes ~10 ms to make */
	f = client();
	ck_assert_int_eq(infeed_get_stats(f, &st), INFEED_OK);
	a = stats_of(st, "thinker");
	b = stats_of(st, "starved");
	ck_assert_msg(a->active_s > 0.25 && a->data_wait_s < 0.2 * a->active_s,
	    "thinker waited %.3f s of %.3f", a->data_wait_s, a->active_s);
	ck_assert_msg(b->active_s > 0.1 && b->data_wait_s > 0.7 * b->active_s,
	    "starved waited %.3f s of %.3f", b->data_wait_s, b->active_s);
	infeed_stats_free(st);
	infeed_free(f);
	infeedctl_run("top --once --json", out, sizeof(out));
	ck_assert_msg(strstr(out, "\"client_name\":\"starved\"") != NULL &&
	    strstr(out, "\"input_bound\":") != NULL, "%s", out);
	infeed_free(fast);
	infeed_free(slow);
}
END_TEST

/* infeedctl bench: 3 verified epochs of a small step. */
#define BENCH	"bench --dataset synthetic --batch-size 7 --shuffle " \
		"--epochs 3 --no-drop-last --verify"

/* The operator's benchmark: every step checked, the time to the first
 * step reported and within the run's. */
START_TEST(infeedctl_bench_verifies_and_reports_the_first_step)
{
	char		 out[4096], *p;
	double		 first, secs;

	infeedctl_run(BENCH " --json", out, sizeof(out));
	ck_assert_msg(strstr(out, "\"verified\":true") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "\"items\":1500,") != NULL, "%s", out);
	ck_assert_ptr_nonnull(p = strstr(out, "\"first_step_s\":"));
	first = strtod(p + strlen("\"first_step_s\":"), NULL);
	ck_assert_ptr_nonnull(p = strstr(out, "\"seconds\":"));
	secs = strtod(p + strlen("\"seconds\":"), NULL);
	ck_assert_msg(first > 0 && first < 5 && secs > 0, "%s", out);
	/* The first epoch's rate and the steady one after it, apart. */
	ck_assert_ptr_nonnull(p = strstr(out, "\"first_epoch_items_per_s\":"));
	ck_assert_msg(strtod(p + strlen("\"first_epoch_items_per_s\":"),
	    NULL) > 0, "%s", out);
	ck_assert_ptr_nonnull(p = strstr(out, "\"later_epochs_items_per_s\":"));
	ck_assert_msg(strtod(p + strlen("\"later_epochs_items_per_s\":"),
	    NULL) > 0, "%s", out);
}
END_TEST

/* For a person (the demo's first figures, issue 27): the whole run's
 * rate has the steady one beside it, and the first step says why it is
 * slow. */
START_TEST(infeedctl_bench_text_says_why_the_first_figures_are_slow)
{
	char		 out[4096], *line;

	infeedctl_run(BENCH, out, sizeof(out));
	ck_assert_ptr_nonnull(line = strstr(out, "\nitems/s "));
	line = strndup(line + 1, strcspn(line + 1, "\n"));
	ck_assert_msg(strstr(line, " over 3 epochs; ") != NULL &&
	    strstr(line, " steady, after the first") != NULL, "%s", out);
	free(line);
	ck_assert_ptr_nonnull(line = strstr(out, "\nfirst step "));
	line = strndup(line + 1, strcspn(line + 1, "\n"));
	ck_assert_msg(strstr(line, " after the attach was sent (with first "
	    "use: the ring's memory, a dataset cache being made)") != NULL,
	    "%s", out);
	free(line);
}
END_TEST

static Suite *
integration_suite(void)
{
	Suite	*s = suite_create("integration");
	TCase	*tc = tcase_create("daemon");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, list_names_every_served_dataset);
	tcase_add_test(tc, infeedctl_bench_verifies_and_reports_the_first_step);
	tcase_add_test(tc, infeedctl_bench_text_says_why_the_first_figures_are_slow);
	tcase_add_test(tc, garbage_bytes_cut_the_client_off);
	tcase_add_test(tc, oversized_frame_refused_before_allocating);
	tcase_add_test(tc, hello_with_another_version_refused);
	tcase_add_test(tc, frames_out_of_order_refused);
	tcase_add_test(tc, epoch_in_order_delivers_every_sample_once);
	tcase_add_test(tc, shuffled_epochs_deliver_every_sample_once);
	tcase_add_test(tc, distributed_shares_cover_the_epoch_once);
	tcase_add_test(tc, order_independent_of_worker_count);
	tcase_add_test(tc, int64_labels_equal_the_datasets_for_every_row);
	tcase_add_test(tc, attached_says_the_label_dtype);
	tcase_add_test(tc, other_label_dtypes_refused_with_advice);
	tcase_add_test(tc, label_too_large_for_int32_fails_with_its_index);
	tcase_add_test(tc, end_of_data_follows_the_last_step);
	tcase_add_test(tc, bad_attach_options_refused_with_advice);
	tcase_add_test(tc, attach_past_the_memory_budget_refused_until_freed);
	tcase_add_test(tc, test_memory_budget_in_exact_units);
	tcase_add_test(tc, test_client_name_cut_on_a_character);
	tcase_add_test(tc, test_long_dataset_name_keeps_the_advice);
	tcase_add_test(tc, float32_transform_normalises_rows);
	tcase_add_test(tc, release_of_an_unheld_slot_refused);
	tcase_add_test(tc, ring_mapped_read_only_in_the_client);
	tcase_add_test(tc, killed_workers_restarted_and_rows_redone);
	tcase_add_test(tc, sigterm_stops_cleanly_and_removes_the_socket);
	tcase_add_test(tc, many_clients_served_at_once);
	tcase_add_test(tc, data_wait_tells_a_slow_trainer_from_slow_data);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(integration_suite()));
}
