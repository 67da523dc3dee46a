/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/pool.c, the parent side of the worker pool: a real
 * pool of two worker processes on a real event base, reading a catalogue
 * of synthetic and raw datasets from a configuration file written for each
 * test, fills a ring made with ring_new().  Jobs complete through the
 * ring's callback exactly once with the rows the dataset gives; max_jobs
 * caps a ring's jobs; removing a ring or dropping its jobs stops them; a
 * worker killed mid-job is replaced and its job still completes once; a
 * row that kills workers three times is reported as crashed, and a store
 * that stops answering after three job_timeouts of the job's first row,
 * whatever order its workers die in; int64 labels come whole, and a label
 * too large for int32 labels is reported with its index instead of
 * wrapped.
 *
 * The event loop runs one round at a time against a deadline, with a tick
 * timer so that a round always ends: a bug fails a test, never hangs it.
 */

#include <sys/resource.h>
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>

#include "catalogue.h"
#include "config.h"
#include "dataset.h"
#include "unit-daemon.h"
#include "log.h"
#include "pool.h"
#include "ring.h"
#include "runner.h"
#include "transform.h"

#define WORKERS		2
#define DEADLINE_MS	15000		/* slow under valgrind */
#define MAX_DONE	256
#define TEST_UID	1000		/* the user of every ring */

/* One report through the ring's callback. */
struct done {
	uint32_t		slot;
	uint64_t		rows;
	enum pool_job_result	result;
	uint64_t		bad;
	int			signal;
	int			status;
	unsigned		deaths;
	int64_t			label;
	char			reason[256];
};

/* What a ring's callback saw. */
struct record {
	struct done	done[MAX_DONE];
	unsigned	n;
};

static char			 rundir[PATH_MAX];	/* made by main() */
static char			 tmpdir[PATH_MAX];	/* made per test */
static char			 raw_path[PATH_MAX];
static char			*cause;
static const char		*setup_extra = "";	/* [infeedd] lines */
static const char		*setup_more = "";	/* a dataset section */

/* Dataset "big": record BIG_ROW's label does not fit in int32. */
#define BIG_ROW		9
#define BIG_LABEL	INT64_C(3000000000)

/*
 * A fresh directory, configuration, catalogue, event base and pool of two
 * workers for every test: "f32" is synthetic, "raw" a file of 16 records
 * of 4 bytes, "big" the same records with int64 labels, one of them
 * BIG_LABEL.
 */
static void
setup(void)
{
	char		path[PATH_MAX], labels_path[PATH_MAX], text[2048];
	char		big_path[PATH_MAX];
	uint8_t		data[64], labels[16];
	int64_t		big[16];
	int		i;

	make_test_dir(rundir, tmpdir, sizeof(tmpdir));
	for (i = 0; i < 64; i++)
		data[i] = (uint8_t)(i * 3 + 1);
	for (i = 0; i < 16; i++)
		labels[i] = (uint8_t)(i % 5);
	unit_fmt(raw_path, sizeof(raw_path), "%s/raw.bin", tmpdir);
	unit_fmt(labels_path, sizeof(labels_path), "%s/raw-labels.bin",
	    tmpdir);
	write_file(raw_path, data, sizeof(data));
	write_file(labels_path, labels, sizeof(labels));
	for (i = 0; i < 16; i++)
		big[i] = i % 5;
	big[BIG_ROW] = BIG_LABEL;
	unit_fmt(big_path, sizeof(big_path), "%s/big-labels.bin", tmpdir);
	write_file(big_path, big, sizeof(big));
	unit_fmt(text, sizeof(text),
	    "[infeedd]\n"
	    "workers = %d\n"
	    "memory_budget = 16M\n"
	    "%s"
	    "[dataset f32]\n"
	    "type = synthetic\n"
	    "samples = 500\n"
	    "shape = 3,5\n"
	    "dtype = float32\n"
	    "classes = 7\n"
	    "seed = 11\n"
	    "[dataset raw]\n"
	    "type = raw\n"
	    "path = %s\n"
	    "shape = 4\n"
	    "dtype = uint8\n"
	    "labels = %s\n"
	    "label_dtype = uint8\n"
	    "[dataset big]\n"
	    "type = raw\n"
	    "path = %s\n"
	    "shape = 4\n"
	    "dtype = uint8\n"
	    "labels = %s\n"
	    "label_dtype = int64\n"
	    "[dataset slow]\n"
	    "type = synthetic\n"
	    "samples = 10\n"
	    "shape = 4\n"
	    "dtype = uint8\n"
	    "sample_delay_us = 50000\n"
	    "%s", WORKERS, setup_extra, raw_path, labels_path, raw_path,
	    big_path, setup_more);
	unit_fmt(path, sizeof(path), "%s/infeedd.conf", tmpdir);
	write_file(path, text, strlen(text));
	/* FLAKY_MAPPED's file, mapped by the workers: 1 MiB, sparse. */
	unit_fmt(unit_flaky_map, sizeof(unit_flaky_map), "%s/flaky-map.bin",
	    tmpdir);
	write_file(unit_flaky_map, "", 0);
	ck_assert_int_eq(truncate(unit_flaky_map, FLAKY_MAP_BYTES), 0);

	unit_daemon_start(path, *setup_more != '\0' ? 5 : 4, WORKERS);
}

/* Stop the workers and free everything the test left. */
static void
teardown(void)
{
	unit_daemon_stop();
	free(cause);
	cause = NULL;
	remove_tree(tmpdir);
}

/* The ring's callback: record the report. */
static void
done_cb(void *arg, const struct pool_report *r)
{
	struct record	*rec = arg;

	ck_assert_uint_lt(rec->n, MAX_DONE);
	rec->done[rec->n].slot = r->slot;
	rec->done[rec->n].rows = r->rows;
	rec->done[rec->n].result = r->result;
	rec->done[rec->n].bad = r->bad;
	rec->done[rec->n].signal = r->signal;
	rec->done[rec->n].status = r->status;
	rec->done[rec->n].deaths = r->deaths;
	snprintf(rec->done[rec->n].reason, sizeof(rec->done[rec->n].reason),
	    "%s", r->reason);
	rec->done[rec->n].label = r->label;
	rec->n++;
}

/* Run the loop until @pred(@arg) holds; false at the deadline. */
static bool
run_until(bool (*pred)(const void *), const void *arg)
{
	return (unit_run_until(pred, arg, DEADLINE_MS));
}

/* Whether the pool has nothing queued or running. */
static bool
pred_idle(const void *arg)
{
	(void)arg;
	return (pool_idle(pool));
}

/* Whether no worker runs a job of a removed ring any more. */
static bool
pred_not_settling(const void *arg)
{
	(void)arg;
	return (!pool_settling(pool));
}

/* Workers busy now. */
static unsigned
busy_workers(void)
{
	struct pool_worker_info	info;
	unsigned		i, n = 0;

	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		n += strcmp(info.state, "busy") == 0;
	}
	return (n);
}

/*
 * A ring of @slots slots of @rows rows of dataset @name with labels of
 * @label_dtype, registered.
 */
static struct pool_ring *
add_ring_labels(const char *name, uint64_t rows, enum infeed_dtype label_dtype,
    uint32_t slots, unsigned max_jobs, struct record *rec, struct ring **rp,
    const struct dataset **dsp)
{
	static struct transform	 tf;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	size_t			 index;
	struct ring_owner	 owner = { TEST_UID, 0, 0, 0 };

	ck_assert_ptr_nonnull(ds = catalogue_find(cat, name, &index));
	ck_assert_int_eq(transform_init(&tf, NULL, ds, &cause), 0);
	ck_assert_uint_eq(tf.out_sample_bytes, ds->sample_bytes);
	r = ring_new(&budget, rows, tf.out_sample_bytes, label_dtype, slots,
	    &owner, &cause);
	ck_assert_msg(r != NULL, "ring_new: %s", cause);
	pr = pool_add_ring(pool, (uint32_t)index, &r->layout, &tf, r->mem,
	    max_jobs, done_cb, rec, &cause);
	ck_assert_msg(pr != NULL, "pool_add_ring: %s", cause);
	*rp = r;
	if (dsp != NULL)
		*dsp = ds;
	return (pr);
}

/* A ring of dataset @name with int32 labels, registered. */
static struct pool_ring *
add_ring(const char *name, uint64_t rows, uint32_t slots, unsigned max_jobs,
    struct record *rec, struct ring **rp, const struct dataset **dsp)
{
	return (add_ring_labels(name, rows, INFEED_DTYPE_INT32, slots,
	    max_jobs, rec, rp, dsp));
}

/* Write a recognisable index table into slot @slot. */
static void
fill_indices(struct ring *r, uint32_t slot, uint64_t rows, uint64_t samples)
{
	uint64_t	*idx = ring_indices(r, slot);
	uint64_t	 k;

	for (k = 0; k < rows; k++)
		idx[k] = (k * 37 + slot * 11 + 5) % samples;
}

/*
 * Queue rows [0, @njobs x @per) of slot @slot (the ring's @seq-th step)
 * as @njobs jobs of @per rows.
 */
static void
submit_jobs(struct pool_ring *pr, struct ring *r, uint32_t slot,
    uint64_t seq, unsigned njobs, uint64_t per)
{
	unsigned	i;

	for (i = 0; i < njobs; i++)
		pool_submit(pr, slot, 0, seq, i * per, i * per + per,
		    ring_indices(r, slot) + i * per);
}

/* Rows [0, @rows) of slot @slot hold what the dataset gives for the
 * indices of the slot's table. */
static void
check_rows(const struct ring *r, const struct dataset *ds, uint32_t slot,
    uint64_t rows)
{
	const struct ring_layout	*l = &r->layout;
	const uint8_t			*sb = r->mem->map + slot * l->slot_bytes;
	const int32_t			*labels;
	const int64_t			*labels64;
	uint64_t			 k, idx;
	int64_t				 label;
	uint8_t				 want[256];

	ck_assert_uint_le(ds->sample_bytes, sizeof(want));
	labels = (const int32_t *)(const void *)(sb + l->labels_offset);
	labels64 = (const int64_t *)(const void *)(sb + l->labels_offset);
	for (k = 0; k < rows; k++) {
		idx = ring_indices(r, slot)[k];
		ck_assert_int_eq(dataset_read(ds, idx, want, &label, false), 0);
		ck_assert_msg(memcmp(sb + l->data_offset + k * l->row_bytes,
		    want, ds->sample_bytes) == 0, "slot %u row %llu (index "
		    "%llu): data differs from dataset_read", slot,
		    (unsigned long long)k, (unsigned long long)idx);
		if (l->label_dtype == INFEED_DTYPE_INT64)
			ck_assert_int_eq(labels64[k], label);
		else
			ck_assert_int_eq(labels[k], label);
	}
}

/* Whether slot @slot's bytes are all zero. */
static bool
slot_is_zero(const struct ring *r, uint32_t slot)
{
	const uint8_t	*p = r->mem->map + slot * r->layout.slot_bytes;
	uint64_t	 i;

	/* The index table is the test's; look at data and labels only. */
	for (i = 0; i < r->layout.indices_offset; i++) {
		if (p[i] != 0)
			return (false);
	}
	return (true);
}

/* Order reports by slot, then rows. */
static int
done_cmp(const void *a, const void *b)
{
	const struct done	*x = a, *y = b;

	if (x->slot != y->slot)
		return (x->slot < y->slot ? -1 : 1);
	if (x->rows != y->rows)
		return (x->rows < y->rows ? -1 : 1);
	return (0);
}

/*
 * to_float32 on float32 samples with scale 1 and no mean/std is the
 * identity: the workers read rows straight into the ring instead of
 * through a conversion buffer; any scale still converts.
 */
START_TEST(test_float32_kept_as_it_is_is_not_converted)
{
	struct transform_spec	 t = { .scale = 1.0f };
	struct transform	 tf;
	const struct dataset	*ds;
	size_t			 index;

	ck_assert_ptr_nonnull(ds = catalogue_find(cat, "f32", &index));
	t.to_float32 = true;
	ck_assert_int_eq(transform_init(&tf, &t, ds, &cause), 0);
	ck_assert(!tf.to_float32);
	ck_assert_uint_eq(tf.out_sample_bytes, ds->sample_bytes);
	ck_assert_int_eq(transform_out_dtype(&tf, ds), INFEED_DTYPE_FLOAT32);
	t.scale = 0.5f;
	ck_assert_int_eq(transform_init(&tf, &t, ds, &cause), 0);
	ck_assert(tf.to_float32);
}
END_TEST

START_TEST(test_jobs_complete_once_with_the_datasets_rows)
{
	static const uint64_t	cuts[] = { 0, 1, 3, 6, 10, 15, 21, 28, 36 };
	struct record		 rec = { .n = 0 };
	struct done		 want[32];
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 i, nwant = 0;
	uint64_t		 rows_done = 0;
	struct pool_worker_info	 info;

	pr = add_ring("f32", 36, 3, 0, &rec, &r, &ds);
	fill_indices(r, 0, 36, ds->samples);
	fill_indices(r, 2, 36, ds->samples);
	/* Slot 0 in jobs of 1 to 8 rows, slot 2 in one job; 1 untouched. */
	for (i = 0; i + 1 < sizeof(cuts) / sizeof(cuts[0]); i++) {
		pool_submit(pr, 0, 0, 0, cuts[i], cuts[i + 1],
		    ring_indices(r, 0) + cuts[i]);
		want[nwant].slot = 0;
		want[nwant++].rows = cuts[i + 1] - cuts[i];
	}
	pool_submit(pr, 2, 0, 0, 0, 36, ring_indices(r, 2) + 0);
	want[nwant].slot = 2;
	want[nwant++].rows = 36;
	ck_assert(!pool_idle(pool));

	ck_assert_msg(run_until(pred_idle, NULL), "jobs did not finish");
	unit_run_for(50);
	ck_assert_uint_eq(rec.n, nwant);
	for (i = 0; i < rec.n; i++) {
		ck_assert_int_eq(rec.done[i].result, POOL_JOB_DONE);
		rows_done += rec.done[i].rows;
	}
	qsort(rec.done, rec.n, sizeof(rec.done[0]), done_cmp);
	qsort(want, nwant, sizeof(want[0]), done_cmp);
	for (i = 0; i < nwant; i++) {
		ck_assert_uint_eq(rec.done[i].slot, want[i].slot);
		ck_assert_uint_eq(rec.done[i].rows, want[i].rows);
	}
	check_rows(r, ds, 0, 36);
	check_rows(r, ds, 2, 36);
	ck_assert_msg(slot_is_zero(r, 1), "slot 1 was written without a job");

	/* The workers count what they wrote. */
	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		rows_done -= info.rows_done;
		ck_assert_str_eq(info.state, "idle");
		ck_assert_uint_eq(info.restarts, 0);
		ck_assert_int_gt(info.pid, 0);
	}
	ck_assert_uint_eq(rows_done, 0);
	pool_remove_ring(pr, r, false);
}
END_TEST

START_TEST(test_unreadable_index_reported_as_read_error)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	uint64_t		*idx;

	pr = add_ring("f32", 4, 2, 0, &rec, &r, &ds);
	idx = ring_indices(r, 1);
	idx[0] = 0;
	idx[1] = 1;
	idx[2] = ds->samples + 100;	/* past the end */
	idx[3] = 3;
	pool_submit(pr, 1, 0, 0, 0, 4, ring_indices(r, 1) + 0);
	ck_assert(run_until(pred_idle, NULL));
	unit_run_for(30);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_uint_eq(rec.done[0].slot, 1);
	ck_assert_uint_eq(rec.done[0].rows, 4);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_READ_ERROR);
	ck_assert_uint_eq(rec.done[0].bad, ds->samples + 100);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* An int64 ring gets every label whole, the large one too. */
START_TEST(test_int64_labels_written_whole)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	const int64_t		*labels;
	uint64_t		*idx, k;

	pr = add_ring_labels("big", 16, INFEED_DTYPE_INT64, 2, 0, &rec, &r,
	    &ds);
	idx = ring_indices(r, 1);
	for (k = 0; k < 16; k++)
		idx[k] = 15 - k;
	pool_submit(pr, 1, 0, 0, 0, 16, ring_indices(r, 1) + 0);
	ck_assert(run_until(pred_idle, NULL));
	unit_run_for(30);
	ck_assert_uint_gt(rec.n, 0);
	for (k = 0; k < rec.n; k++)
		ck_assert_int_eq(rec.done[k].result, POOL_JOB_DONE);
	check_rows(r, ds, 1, 16);
	labels = (const int64_t *)(const void *)(r->mem->map +
	    r->layout.slot_bytes + r->layout.labels_offset);
	ck_assert_int_eq(labels[15 - BIG_ROW], BIG_LABEL);
	ck_assert_int_eq(labels[15], 0);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* An int32 ring never wraps a label that does not fit: it says which. */
START_TEST(test_label_too_large_for_int32_reported)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	uint64_t		*idx, k;

	pr = add_ring_labels("big", 16, INFEED_DTYPE_INT32, 2, 0, &rec, &r,
	    &ds);
	idx = ring_indices(r, 0);
	for (k = 0; k < 16; k++)
		idx[k] = k;
	pool_submit(pr, 0, 0, 0, 0, 16, ring_indices(r, 0) + 0);
	ck_assert(run_until(pred_idle, NULL));
	unit_run_for(30);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_LABEL_RANGE);
	ck_assert_uint_eq(rec.done[0].bad, BIG_ROW);
	ck_assert_int_eq(rec.done[0].label, BIG_LABEL);
	pool_remove_ring(pr, r, false);
}
END_TEST

START_TEST(test_max_jobs_caps_a_rings_running_jobs)
{
	struct record		 rec_a = { .n = 0 }, rec_b = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*a, *b;
	struct ring		*ra, *rb;
	uint64_t		 deadline;
	unsigned		 most = 0;

	/* max_jobs 1: one job runs, the rest wait, whatever is idle. */
	a = add_ring("f32", 40, 1, 1, &rec_a, &ra, &ds);
	fill_indices(ra, 0, 40, ds->samples);
	submit_jobs(a, ra, 0, 0, 4, 10);
	ck_assert_uint_eq(busy_workers(), 1);
	ck_assert_uint_eq(pool_jobs_queued(pool), 3);
	deadline = now_ms() + DEADLINE_MS;
	while (rec_a.n < 4 && now_ms() < deadline) {
		event_base_loop(base, EVLOOP_ONCE);
		if (busy_workers() > most)
			most = busy_workers();
	}
	ck_assert_uint_eq(rec_a.n, 4);
	ck_assert_uint_eq(most, 1);
	check_rows(ra, ds, 0, 40);

	/* max_jobs 0: the whole pool. */
	b = add_ring("f32", 40, 1, 0, &rec_b, &rb, NULL);
	fill_indices(rb, 0, 40, ds->samples);
	submit_jobs(b, rb, 0, 0, 4, 10);
	ck_assert_uint_eq(busy_workers(), 2);
	ck_assert_uint_eq(pool_jobs_queued(pool), 2);
	ck_assert(run_until(pred_idle, NULL));
	ck_assert_uint_eq(rec_b.n, 4);
	check_rows(rb, ds, 0, 40);

	/* The cap is per ring: two rings of max_jobs 1 run side by side. */
	rec_a.n = rec_b.n = 0;
	pool_submit(a, 0, 0, 0, 0, 20, ring_indices(ra, 0) + 0);
	pool_submit(a, 0, 0, 0, 20, 40, ring_indices(ra, 0) + 20);
	pool_submit(b, 0, 0, 0, 0, 40, ring_indices(rb, 0) + 0);
	ck_assert_uint_eq(busy_workers(), 2);
	ck_assert(run_until(pred_idle, NULL));
	pool_remove_ring(a, ra, false);
	pool_remove_ring(b, rb, false);
}
END_TEST

/*
 * Swap in a pool of one worker, ready, so that jobs are done in the order
 * they are given out; one_worker_end() puts the test's pool back.
 */
static struct pool	*two_workers;

static void
one_worker_begin(void)
{
	struct pool_worker_info	info;
	uint64_t		deadline = now_ms() + DEADLINE_MS;

	two_workers = pool;
	pool = pool_new(base, cat, &budget, 1, 0, 30000, 256 << 20);
	do {
		event_base_loop(base, EVLOOP_ONCE);
		pool_worker_info(pool, 0, &info);
	} while (strcmp(info.state, "starting") == 0 &&
	    now_ms() < deadline);
	ck_assert_str_eq(info.state, "idle");
}

static void
one_worker_end(void)
{
	pool_free(pool);
	pool = two_workers;
}

/* The slots of @rec's reports, in order, as a string ("1021..."). */
static const char *
report_slots(const struct record *rec)
{
	static char	buf[MAX_DONE + 1];
	unsigned	i;

	for (i = 0; i < rec->n; i++)
		buf[i] = (char)('0' + rec->done[i].slot);
	buf[i] = '\0';
	return (buf);
}

/*
 * A queued job of less depth goes first: another session's next step
 * (depth 0) overtakes steps further ahead (depths 1 and 2) that were
 * queued before it, instead of being done last, as in plain order.  One
 * worker, so the reports come in the order the jobs were given out.
 */
START_TEST(test_next_steps_go_before_steps_further_ahead)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*a, *b;
	struct ring		*ra, *rb;

	one_worker_begin();
	a = add_ring("f32", 40, 3, 0, &rec, &ra, &ds);
	b = add_ring("f32", 1, 1, 0, &rec, &rb, NULL);
	fill_indices(ra, 1, 40, ds->samples);
	fill_indices(ra, 2, 40, ds->samples);
	fill_indices(rb, 0, 1, ds->samples);
	submit_jobs(a, ra, 1, 1, 4, 10);
	submit_jobs(a, ra, 2, 2, 4, 10);
	pool_submit(b, 0, 0, 0, 0, 1, ring_indices(rb, 0));
	ck_assert_uint_eq(pool_jobs_queued(pool), 8);
	ck_assert(run_until(pred_idle, NULL));
	/* A's first job was running; then B's, then A's in depth order. */
	ck_assert_str_eq(report_slots(&rec), "101112222");
	pool_remove_ring(a, ra, false);
	pool_remove_ring(b, rb, false);
	one_worker_end();
}
END_TEST

/*
 * Depth is counted from what the client has had, not fixed when a job is
 * queued: once a client has taken the steps before it, a step queued two
 * ahead is its next, and goes before another session's step one ahead
 * queued after it (else a ring with a long queue could wait for ever).
 */
START_TEST(test_queued_steps_move_up_as_the_client_takes_steps)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*a, *b;
	struct ring		*ra, *rb;

	one_worker_begin();
	a = add_ring("f32", 40, 3, 0, &rec, &ra, &ds);
	b = add_ring("f32", 40, 2, 0, &rec, &rb, NULL);
	fill_indices(ra, 0, 40, ds->samples);
	fill_indices(ra, 2, 40, ds->samples);
	fill_indices(rb, 1, 40, ds->samples);
	/* The worker busy with A's step 0; A's step 2 queued. */
	pool_submit(a, 0, 0, 0, 0, 40, ring_indices(ra, 0));
	submit_jobs(a, ra, 2, 2, 2, 20);
	/* B's step 1, one ahead, queued after it. */
	submit_jobs(b, rb, 1, 1, 4, 10);
	/* A's client has had steps 0 and 1: step 2 is its next. */
	pool_ring_delivered(a, 2);
	ck_assert(run_until(pred_idle, NULL));
	ck_assert_str_eq(report_slots(&rec), "0221111");
	pool_remove_ring(a, ra, false);
	pool_remove_ring(b, rb, false);
	one_worker_end();
}
END_TEST

/*
 * Among next steps, the one that has been next longest goes first: a
 * session's first step, queued while another's client had not yet taken
 * its first, goes before that other session's second step, although the
 * second was queued earlier (when every trainer starts at once, every
 * one gets its first step before any gets its second).
 */
START_TEST(test_first_steps_before_second_steps)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*a, *b;
	struct ring		*ra, *rb;

	one_worker_begin();
	a = add_ring("f32", 20, 3, 0, &rec, &ra, &ds);
	b = add_ring("f32", 20, 3, 0, &rec, &rb, NULL);
	fill_indices(ra, 0, 20, ds->samples);
	fill_indices(ra, 1, 20, ds->samples);
	fill_indices(rb, 2, 20, ds->samples);
	/* A's first step running, its second queued; then B's first. */
	pool_submit(a, 0, 0, 0, 0, 20, ring_indices(ra, 0));
	submit_jobs(a, ra, 1, 1, 2, 10);
	submit_jobs(b, rb, 2, 0, 2, 10);
	/* A's client takes its first step: its second is next, since now. */
	pool_ring_delivered(a, 1);
	ck_assert(run_until(pred_idle, NULL));
	ck_assert_str_eq(report_slots(&rec), "02211");
	pool_remove_ring(a, ra, false);
	pool_remove_ring(b, rb, false);
	one_worker_end();
}
END_TEST


#define MANY_JOBS	32768	/* at most; a 64 Mi-row step is 16k jobs */

/* Reports of test_many_jobs' single-row jobs, and where ring B's came. */
struct many {
	unsigned	n;
	unsigned	b_at;			/* reports before B's */
};

/* Ring A's callback for test_many_jobs: count the reports. */
static void
many_a_cb(void *arg, const struct pool_report *r)
{
	struct many	*m = arg;

	ck_assert_int_eq(r->result, POOL_JOB_DONE);
	ck_assert_uint_eq(r->rows, 1);
	m->n++;
}

/* Ring B's callback for test_many_jobs. */
static void
many_b_cb(void *arg, const struct pool_report *r)
{
	struct many	*m = arg;

	ck_assert_int_eq(r->result, POOL_JOB_DONE);
	m->b_at = m->n;
}

/* How many jobs test_many_jobs waits for. */
static unsigned	many_want;

/* Whether every job of test_many_jobs was reported. */
static bool
pred_many_done(const void *arg)
{
	const struct many	*m = arg;

	return (m->n == many_want && m->b_at != UINT_MAX);
}

/* The daemon's own CPU time (not the workers'), in ms. */
static double
self_cpu_ms(void)
{
	struct rusage	ru;

	ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
	return ((double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3);
}

/*
 * Queue @n single-row jobs of ring A's step one ahead, then ring B's next
 * step: B's goes before the rest of A's (least depth first), and every
 * job is reported once.  Return: the daemon's CPU time over them, in ms.
 */
static double
many_jobs(unsigned n)
{
	static struct many	 m;
	static struct transform	 tf;
	const struct dataset	*ds;
	struct pool_ring	*a, *b;
	struct ring		*ra, *rb;
	struct ring_owner	 owner = { TEST_UID, 0, 0, 0 };
	size_t			 index;
	double			 cpu;
	unsigned		 i;

	memset(&m, 0, sizeof(m));
	m.b_at = UINT_MAX;
	many_want = n;
	ck_assert_ptr_nonnull(ds = catalogue_find(cat, "f32", &index));
	ck_assert_int_eq(transform_init(&tf, NULL, ds, &cause), 0);
	ra = ring_new(&budget, n, tf.out_sample_bytes, INFEED_DTYPE_INT32, 2,
	    &owner, &cause);
	rb = ring_new(&budget, 1, tf.out_sample_bytes, INFEED_DTYPE_INT32, 1,
	    &owner, &cause);
	ck_assert_msg(ra != NULL && rb != NULL, "ring_new: %s", cause);
	a = pool_add_ring(pool, (uint32_t)index, &ra->layout, &tf, ra->mem,
	    0, many_a_cb, &m, &cause);
	b = pool_add_ring(pool, (uint32_t)index, &rb->layout, &tf, rb->mem,
	    0, many_b_cb, &m, &cause);
	ck_assert(a != NULL && b != NULL);
	fill_indices(ra, 1, n, ds->samples);
	fill_indices(rb, 0, 1, ds->samples);
	cpu = self_cpu_ms();
	for (i = 0; i < n; i++)
		pool_submit(a, 1, 0, 1, i, i + 1, ring_indices(ra, 1) + i);
	pool_submit(b, 0, 0, 0, 0, 1, ring_indices(rb, 0));
	ck_assert(unit_run_until(pred_many_done, &m, 60000));
	cpu = self_cpu_ms() - cpu;
	printf("many jobs: %u single-row jobs reported in %.0f ms of the "
	    "daemon's CPU; the next step came after %u of them\n", n, cpu,
	    m.b_at);
	/* Not behind the queue: given out at once (the other worker goes on
	 * with single rows while its worker maps the ring). */
	ck_assert_msg(m.b_at < n / 4, "the next step came after %u of %u "
	    "jobs queued before it", m.b_at, n);
	check_rows(ra, ds, 1, n);
	pool_remove_ring(a, ra, false);
	pool_remove_ring(b, rb, false);
	return (cpu);
}

/*
 * A long queue (a 64 Mi-row step is 16k jobs): another ring's next step
 * still goes first, and every job is reported once.  The loop's CPU time
 * is printed, a quarter of the jobs then all: about four times as much
 * (8 to 14 times when each pick scanned every queued job).
 */
START_TEST(test_many_jobs)
{
	double	small, big;

	small = many_jobs(MANY_JOBS / 4);
	big = many_jobs(MANY_JOBS);
	printf("many jobs: 4 times the jobs took %.1f times the CPU\n",
	    big / small);
}
END_TEST

/*
 * A new worker gets no job before it says READY (it may be reading
 * gigabytes of datasets into memory first, and a job's deadline runs from
 * when it is given): a job queued on a pool just made waits, then runs.
 */

START_TEST(test_no_job_before_a_worker_is_ready)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info;
	const struct dataset	*ds;
	struct pool		*ready = pool;
	struct pool_ring	*pr;
	struct ring		*r;

	pool = pool_new(base, cat, &budget, 1, 0, 30000, 256 << 20);
	pool_worker_info(pool, 0, &info);
	ck_assert_str_eq(info.state, "starting");
	pr = add_ring("f32", 10, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 10, ds->samples);
	pool_submit(pr, 0, 0, 0, 0, 10, ring_indices(r, 0));
	ck_assert_uint_eq(pool_jobs_queued(pool), 1);
	ck_assert_uint_eq(busy_workers(), 0);
	ck_assert(run_until(pred_idle, NULL));
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_DONE);
	check_rows(r, ds, 0, 10);
	pool_remove_ring(pr, r, false);
	pool_free(pool);
	pool = ready;
}
END_TEST

START_TEST(test_remove_ring_drops_its_jobs_unreported)
{
	struct record		 rec = { .n = 0 }, rec2 = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr, *pr2;
	struct ring		*r, *r2;

	pr = add_ring("f32", 50, 1, 1, &rec, &r, &ds);
	pr2 = add_ring("f32", 8, 1, 0, &rec2, &r2, NULL);
	fill_indices(r, 0, 50, ds->samples);
	submit_jobs(pr, r, 0, 0, 5, 10);
	ck_assert_uint_eq(busy_workers(), 1);
	ck_assert_uint_eq(pool_jobs_queued(pool), 4);
	pool_remove_ring(pr, r, false);
	ck_assert_uint_eq(pool_jobs_queued(pool), 0);
	ck_assert(run_until(pred_idle, NULL));
	unit_run_for(50);
	/* Neither the removed ring nor the other one heard of the job. */
	ck_assert_uint_eq(rec.n, 0);
	ck_assert_uint_eq(rec2.n, 0);

	/* The pool goes on with the other ring. */
	fill_indices(r2, 0, 8, ds->samples);
	pool_submit(pr2, 0, 0, 0, 0, 8, ring_indices(r2, 0) + 0);
	ck_assert(run_until(pred_idle, NULL));
	ck_assert_uint_eq(rec2.n, 1);
	ck_assert_uint_eq(rec.n, 0);
	check_rows(r2, ds, 0, 8);
	pool_remove_ring(pr2, r2, false);
	pool_remove_ring(NULL, NULL, false);
}
END_TEST

/*
 * Removing a ring whose job a worker is running does not wait for it (the
 * daemon's one loop serves every other client meanwhile), nor give its
 * memory up while the worker may still write it: the memory is released
 * once the job is done, unreported.
 */
START_TEST(test_removed_ring_released_when_its_running_job_is_done)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	uint64_t		 used;

	pr = add_ring("slow", 4, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 4, ds->samples);
	pool_submit(pr, 0, 0, 0, 0, 4, ring_indices(r, 0));	/* 200 ms */
	ck_assert_uint_eq(busy_workers(), 1);
	used = budget.used;
	ck_assert_uint_gt(used, 0);
	pool_remove_ring(pr, r, true);
	ck_assert_uint_eq(busy_workers(), 1);
	ck_assert_uint_eq(budget.used, used);
	ck_assert(run_until(pred_idle, NULL));
	unit_run_for(20);
	ring_budget_settle(&budget);		/* its pages punched out */
	ck_assert_uint_eq(budget.used, 0);	/* keep_ms 0: freed */
	ck_assert_uint_eq(rec.n, 0);
}
END_TEST

/*
 * pool_settling() says a removed ring's job still runs, until it ends and
 * the ring's memory is released (what an Attach waits for on the loop).
 */
START_TEST(test_settle_releases_removed_rings)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;

	pr = add_ring("slow", 1, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 1, ds->samples);
	pool_submit(pr, 0, 0, 0, 0, 1, ring_indices(r, 0));	/* 50 ms */
	ck_assert_uint_eq(busy_workers(), 1);
	pool_remove_ring(pr, r, true);
	ck_assert_uint_gt(budget.used, 0);
	ck_assert(pool_settling(pool));
	ck_assert(run_until(pred_not_settling, NULL));
	ring_budget_settle(&budget);		/* its pages punched out */
	ck_assert_uint_eq(budget.used, 0);
	ck_assert(pool_idle(pool));
	ck_assert_uint_eq(rec.n, 0);
}
END_TEST

START_TEST(test_drop_jobs_drops_queued_running_one_finishes)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;

	pr = add_ring("f32", 50, 1, 1, &rec, &r, &ds);
	fill_indices(r, 0, 50, ds->samples);
	submit_jobs(pr, r, 0, 0, 5, 10);
	ck_assert_uint_eq(pool_jobs_queued(pool), 4);
	pool_drop_jobs(pr);
	ck_assert_uint_eq(pool_jobs_queued(pool), 0);
	ck_assert_uint_eq(busy_workers(), 1);
	ck_assert(!pool_idle(pool));
	ck_assert(run_until(pred_idle, NULL));
	unit_run_for(50);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_uint_eq(rec.done[0].rows, 10);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_DONE);
	check_rows(r, ds, 0, 10);

	/* The ring stays registered: new jobs run. */
	pool_submit(pr, 0, 0, 0, 10, 50, ring_indices(r, 0) + 10);
	ck_assert(run_until(pred_idle, NULL));
	ck_assert_uint_eq(rec.n, 2);
	check_rows(r, ds, 0, 50);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* Whether the record accounts for 8 rows and all is idle. */
static bool
pred_rows(const void *arg)
{
	const struct record	*rec = arg;
	uint64_t		 rows = 0;
	unsigned		 i;

	for (i = 0; i < rec->n; i++)
		rows += rec->done[i].rows;
	return (rows >= 8 && pool_idle(pool));
}

START_TEST(test_killed_worker_replaced_and_its_job_completes_once)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info[WORKERS], after;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 i, victim = WORKERS;
	uint64_t		 rows = 0;

	pr = add_ring("f32", 8, 2, 0, &rec, &r, &ds);
	fill_indices(r, 1, 8, ds->samples);
	/* Stopped workers take a job but never finish it. */
	for (i = 0; i < WORKERS; i++) {
		pool_worker_info(pool, i, &info[i]);
		ck_assert_int_gt(info[i].pid, 0);
		ck_assert_int_eq(kill(info[i].pid, SIGSTOP), 0);
	}
	pool_submit(pr, 1, 0, 0, 0, 8, ring_indices(r, 1) + 0);
	for (i = 0; i < WORKERS; i++) {
		pool_worker_info(pool, i, &after);
		if (strcmp(after.state, "busy") == 0)
			victim = i;
	}
	ck_assert_uint_lt(victim, WORKERS);
	ck_assert_int_eq(kill(info[victim].pid, SIGKILL), 0);
	for (i = 0; i < WORKERS; i++) {
		if (i != victim)
			ck_assert_int_eq(kill(info[i].pid, SIGCONT), 0);
	}

	ck_assert_msg(run_until(pred_rows, &rec), "the job never completed");
	unit_run_for(100);
	for (i = 0; i < rec.n; i++) {
		ck_assert_uint_eq(rec.done[i].slot, 1);
		ck_assert_int_eq(rec.done[i].result, POOL_JOB_DONE);
		rows += rec.done[i].rows;
	}
	ck_assert_uint_eq(rows, 8);
	check_rows(r, ds, 1, 8);
	for (i = 0; i < WORKERS; i++) {
		pool_worker_info(pool, i, &after);
		ck_assert_str_eq(after.state, "idle");
		ck_assert_int_gt(after.pid, 0);
		if (i == victim) {
			ck_assert_int_ne(after.pid, info[i].pid);
			ck_assert_uint_eq(after.restarts, 1);
		} else {
			ck_assert_int_eq(after.pid, info[i].pid);
			ck_assert_uint_eq(after.restarts, 0);
		}
	}
	pool_remove_ring(pr, r, false);
}
END_TEST

/*
 * Stop the workers, queue @njobs jobs of 8 rows of ring @pr (slots 0, 1,
 * ..., each its ring's next step) and run the loop a moment: into
 * @info, each worker as it was.
 */
static void
submit_to_stopped_workers(struct pool_ring *pr, struct ring *r,
    const struct dataset *ds, unsigned njobs, struct pool_worker_info *info)
{
	unsigned	i;

	for (i = 0; i < WORKERS; i++) {
		pool_worker_info(pool, i, &info[i]);
		ck_assert_int_gt(info[i].pid, 0);
		ck_assert_int_eq(kill(info[i].pid, SIGSTOP), 0);
	}
	for (i = 0; i < njobs; i++) {
		fill_indices(r, i, 8, ds->samples);
		pool_submit(pr, i, 0, i, 0, 8, ring_indices(r, i));
	}
	/* Two start; the others wait for the loop's turn. */
	ck_assert_uint_eq(pool_jobs_queued(pool), njobs - WORKERS);
	unit_run_for(20);
}

/*
 * The 8 rows of each slot of @njobs reported once, done, with the
 * dataset's rows (a job may come back in parts: pool_requeue()).
 */
static void
check_each_slot_once(const struct record *rec, const struct ring *r,
    const struct dataset *ds, unsigned njobs)
{
	uint64_t	rows[MAX_DONE] = { 0 };
	unsigned	i;

	for (i = 0; i < rec->n; i++) {
		ck_assert_int_eq(rec->done[i].result, POOL_JOB_DONE);
		ck_assert_uint_lt(rec->done[i].slot, njobs);
		rows[rec->done[i].slot] += rec->done[i].rows;
	}
	for (i = 0; i < njobs; i++) {
		ck_assert_uint_eq(rows[i], 8);
		check_rows(r, ds, i, 8);
	}
}

/*
 * A step of arrays goes in one job a worker, each of 4 MiB at least: a job
 * costs a JOB, a DONE and a wake-up on each side (issue 35: 8 a step of
 * 800 rows of 64 KiB on 2 workers before, 2 now); images in 4 a worker.
 */
START_TEST(test_a_step_of_arrays_is_one_job_a_worker)
{
	ck_assert_uint_eq(pool_size(pool), WORKERS);
	/* 800 rows of 64 KiB (50 MiB): one job a worker. */
	ck_assert_uint_eq(pool_job_rows(pool, 800, 65536, false),
	    (800 + WORKERS - 1) / WORKERS);
	/* 6 MiB: one job of 4 MiB at least. */
	ck_assert_uint_eq(pool_job_rows(pool, 96, 65536, false), 96);
	/* 800 rows of 1 KiB: one job. */
	ck_assert_uint_eq(pool_job_rows(pool, 800, 1024, false), 800);
	/* 64 images: 4 jobs a worker. */
	ck_assert_uint_eq(pool_job_rows(pool, 64, 150528, true),
	    (64 + 4 * WORKERS - 1) / (4 * WORKERS));
}
END_TEST

/*
 * With every worker busy on one ring, its next job goes behind a running
 * one, in that worker's socket (pool_dispatch_behind()): nothing is left
 * queued while each worker runs one job and holds one more, and once the
 * workers go on each job is done once, the rows right.
 */
START_TEST(test_next_job_waits_in_a_busy_workers_socket)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info[WORKERS];
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 i;

	pr = add_ring("f32", 8, 5, 0, &rec, &r, &ds);
	submit_to_stopped_workers(pr, r, ds, 5, info);
	/* One job a worker behind its running one; the fifth waits. */
	ck_assert_uint_eq(pool_jobs_queued(pool), 5 - 2 * WORKERS);
	ck_assert_uint_eq(busy_workers(), WORKERS);
	for (i = 0; i < WORKERS; i++)
		ck_assert_int_eq(kill(info[i].pid, SIGCONT), 0);
	ck_assert(run_until(pred_idle, NULL));
	unit_run_for(50);
	check_each_slot_once(&rec, r, ds, 5);
	ck_assert_uint_eq(rec.n, 5);
	ck_assert_uint_eq(pool_rows_reissued(pool), 0);
	pool_remove_ring(pr, r, false);
}
END_TEST

/*
 * While the workers serve two rings no job goes behind another: a later
 * job of either waits in the pool's queue for a worker that is free, so
 * no session's step waits in a worker's socket behind another's.
 */
START_TEST(test_no_job_waits_behind_while_two_rings_are_served)
{
	struct record		 rec_a = { .n = 0 }, rec_b = { .n = 0 };
	struct pool_worker_info	 info[WORKERS];
	const struct dataset	*ds;
	struct pool_ring	*a, *b;
	struct ring		*ra, *rb;
	unsigned		 i;

	a = add_ring("f32", 8, 3, 0, &rec_a, &ra, &ds);
	b = add_ring("f32", 8, 1, 0, &rec_b, &rb, NULL);
	for (i = 0; i < WORKERS; i++) {
		pool_worker_info(pool, i, &info[i]);
		ck_assert_int_eq(kill(info[i].pid, SIGSTOP), 0);
	}
	for (i = 0; i < 3; i++)
		fill_indices(ra, i, 8, ds->samples);
	fill_indices(rb, 0, 8, ds->samples);
	pool_submit(a, 0, 0, 0, 0, 8, ring_indices(ra, 0));
	pool_submit(b, 0, 0, 0, 0, 8, ring_indices(rb, 0));
	pool_submit(a, 1, 0, 1, 0, 8, ring_indices(ra, 1));
	pool_submit(a, 2, 0, 2, 0, 8, ring_indices(ra, 2));
	unit_run_for(20);
	ck_assert_uint_eq(pool_jobs_queued(pool), 2);
	for (i = 0; i < WORKERS; i++)
		ck_assert_int_eq(kill(info[i].pid, SIGCONT), 0);
	ck_assert(run_until(pred_idle, NULL));
	unit_run_for(50);
	check_each_slot_once(&rec_a, ra, ds, 3);
	check_each_slot_once(&rec_b, rb, ds, 1);
	pool_remove_ring(a, ra, false);
	pool_remove_ring(b, rb, false);
}
END_TEST

/*
 * A worker killed with a job running and one behind it: the running one
 * goes back as any dead worker's does, the one behind (never begun) goes
 * back blaming nothing; each is done once, by a worker, with no death
 * counted against its rows.
 */
START_TEST(test_dead_workers_job_behind_goes_back)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info[WORKERS], after;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 i;

	pr = add_ring("f32", 8, 4, 0, &rec, &r, &ds);
	submit_to_stopped_workers(pr, r, ds, 4, info);
	ck_assert_uint_eq(pool_jobs_queued(pool), 0);
	ck_assert_int_eq(kill(info[0].pid, SIGKILL), 0);
	for (i = 1; i < WORKERS; i++)
		ck_assert_int_eq(kill(info[i].pid, SIGCONT), 0);
	ck_assert(run_until(pred_idle, NULL));
	unit_run_for(100);
	check_each_slot_once(&rec, r, ds, 4);
	for (i = 0; i < rec.n; i++)
		ck_assert_uint_eq(rec.done[i].deaths, 0);
	/* Both of the dead worker's jobs, 8 rows each, went again. */
	ck_assert_uint_eq(pool_rows_reissued(pool), 16);
	pool_worker_info(pool, 0, &after);
	ck_assert_int_ne(after.pid, info[0].pid);
	ck_assert_uint_eq(after.restarts, 1);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* Whether the pool's size is @arg's and no worker is being added or retired. */
static bool
pred_size(const void *arg)
{
	return (pool_size(pool) == *(const unsigned *)arg &&
	    !pool_resizing(pool));
}

/*
 * workers = auto's pool (pool_grow(), pool_shrink()): it grows to its max
 * and no further, several starting at once but none while one retires
 * (issue 36, item 3: auto doubles for storage); a worker retired while it
 * runs a job finishes that job first and takes no other, so every row of
 * a step is written and reported exactly once across the resizes; it
 * never goes below one worker.
 */
START_TEST(test_pool_grows_and_shrinks_losing_nothing)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	struct pool		*fixed = pool;
	unsigned		 i, want;
	uint64_t		 rows = 0;

	pool = pool_new(base, cat, &budget, 1, 3, 30000, 256 << 20);
	ck_assert_uint_eq(pool_size(pool), 1);
	ck_assert_uint_eq(pool_max(pool), 3);
	ck_assert_int_eq(pool_shrink(pool), -1);	/* one is the least */

	/* 8 jobs of one row of 50 ms each: the workers are busy a while. */
	pr = add_ring("slow", 8, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 8, ds->samples);
	submit_jobs(pr, r, 0, 0, 8, 1);
	ck_assert_int_eq(pool_grow(pool), 0);
	ck_assert_uint_eq(pool_size(pool), 2);
	want = 2;
	ck_assert_msg(run_until(pred_size, &want), "no second worker");

	/* Retire the second while it reads a row: it finishes it first. */
	while (busy_workers() < 2 && !pool_idle(pool))
		event_base_loop(base, EVLOOP_ONCE);
	pool_worker_info(pool, 1, &info);
	ck_assert_str_eq(info.state, "busy");
	ck_assert_int_eq(pool_shrink(pool), 0);
	ck_assert_int_eq(pool_grow(pool), -1);	/* not while one retires */
	pool_worker_info(pool, 1, &info);
	ck_assert_str_eq(info.state, "busy");
	ck_assert_uint_eq(pool_size(pool), 2);
	want = 1;
	ck_assert_msg(run_until(pred_size, &want), "the worker was not "
	    "retired");
	ck_assert_msg(run_until(pred_rows, &rec), "the jobs never completed");
	unit_run_for(100);
	for (i = 0; i < rec.n; i++) {
		ck_assert_int_eq(rec.done[i].result, POOL_JOB_DONE);
		rows += rec.done[i].rows;
	}
	ck_assert_uint_eq(rows, 8);
	ck_assert_uint_eq(rec.n, 8);
	check_rows(r, ds, 0, 8);
	pool_worker_info(pool, 0, &info);
	ck_assert_uint_eq(info.restarts, 0);

	/* Up to its max, two starting at once, and no further. */
	ck_assert_int_eq(pool_grow(pool), 0);
	ck_assert_int_eq(pool_grow(pool), 0);
	ck_assert_int_eq(pool_grow(pool), -1);
	want = 3;
	ck_assert_msg(run_until(pred_size, &want), "no worker %u", want);
	for (i = 0; i < 3; i++) {
		pool_worker_info(pool, i, &info);
		ck_assert_int_gt(info.pid, 0);
	}
	pool_remove_ring(pr, r, false);
	pool_free(pool);
	pool = fixed;
}
END_TEST

/* Whether every row of @arg's (a struct want_rows) is reported. */
struct want_rows {
	const struct record	*rec;
	uint64_t		 rows;
};

static bool
pred_rows_reported(const void *arg)
{
	const struct want_rows	*w = arg;
	uint64_t		 rows = 0;
	unsigned		 i;

	for (i = 0; i < w->rec->n; i++)
		rows += w->rec->done[i].rows;
	return (rows >= w->rows && pool_idle(pool));
}

/*
 * A row that kills workers in a job sent behind a running one: the row
 * is blamed, its three deaths reported as a crash, and every other row is
 * done once with no death counted against it.  (Here the pool reads the
 * DONE of the job before first; were the death heard first, the beat,
 * which names the job behind, would blame it just the same.)
 */
START_TEST(test_row_that_kills_workers_in_a_job_behind)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info[WORKERS];
	struct want_rows	 want = { &rec, 10 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	uint64_t		 rows[5] = { 0 };
	unsigned		 i, crashed = 0;

	pr = add_ring("flaky", 2, 5, 0, &rec, &r, &ds);
	for (i = 0; i < WORKERS; i++) {
		pool_worker_info(pool, i, &info[i]);
		ck_assert_int_eq(kill(info[i].pid, SIGSTOP), 0);
	}
	for (i = 0; i < 5; i++) {	/* 0 to 8 and 10: none flaky */
		ring_indices(r, i)[0] = 2 * i;
		ring_indices(r, i)[1] = i < 4 ? 2 * i + 1 : 10;
	}
	ring_indices(r, 3)[1] = FLAKY_CRASH;	/* the fourth job: behind */
	for (i = 0; i < 5; i++)
		pool_submit(pr, i, 0, i, 0, 2, ring_indices(r, i));
	unit_run_for(20);
	ck_assert_uint_eq(pool_jobs_queued(pool), 1);
	for (i = 0; i < WORKERS; i++)
		ck_assert_int_eq(kill(info[i].pid, SIGCONT), 0);
	ck_assert_msg(run_until(pred_rows_reported, &want), "%u reports",
	    rec.n);
	unit_run_for(100);
	for (i = 0; i < rec.n; i++) {
		rows[rec.done[i].slot] += rec.done[i].rows;
		if (rec.done[i].result == POOL_JOB_CRASHED) {
			crashed++;
			ck_assert_uint_eq(rec.done[i].slot, 3);
			ck_assert_uint_eq(rec.done[i].bad, 1);
			ck_assert_int_eq(rec.done[i].signal, SIGSEGV);
			ck_assert_uint_eq(rec.done[i].deaths, 3);
		} else {
			ck_assert_int_eq(rec.done[i].result, POOL_JOB_DONE);
			ck_assert_uint_eq(rec.done[i].deaths, 0);
		}
	}
	ck_assert_uint_eq(crashed, 1);
	for (i = 0; i < 5; i++)
		ck_assert_uint_eq(rows[i], 2);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* Whether the record holds two reports and all is idle. */
static bool
pred_two(const void *arg)
{
	const struct record	*rec = arg;

	return (rec->n >= 2 && pool_idle(pool));
}

START_TEST(test_row_that_kills_workers_three_times_reported_crashed)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 i, restarts = 0;
	uint64_t		*idx;

	pr = add_ring("flaky", 2, 1, 0, &rec, &r, &ds);
	idx = ring_indices(r, 0);
	idx[0] = FLAKY_CRASH;	/* a worker reading it dies of SIGSEGV */
	idx[1] = 12;
	pool_submit(pr, 0, 0, 0, 0, 2, ring_indices(r, 0));
	ck_assert_msg(run_until(pred_two, &rec), "%u reports", rec.n);
	unit_run_for(100);
	ck_assert_uint_eq(rec.n, 2);
	qsort(rec.done, rec.n, sizeof(rec.done[0]), done_cmp);
	/* Row 0 crashed three times; row 1, retried alone, was read. */
	for (i = 0; i < 2; i++) {
		ck_assert_uint_eq(rec.done[i].rows, 1);
		if (rec.done[i].result == POOL_JOB_CRASHED) {
			ck_assert_uint_eq(rec.done[i].bad, 0);
			ck_assert_int_eq(rec.done[i].signal, SIGSEGV);
		} else
			ck_assert_int_eq(rec.done[i].result, POOL_JOB_DONE);
	}
	ck_assert_int_ne(rec.done[0].result, rec.done[1].result);
	/* The pair crashed, then row 0 alone twice; each was replaced. */
	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		ck_assert_int_gt(info.pid, 0);
		restarts += info.restarts;
	}
	ck_assert_uint_eq(restarts, 3);
	pool_remove_ring(pr, r, false);
}
END_TEST

/*
 * A row whose worker exits with a status (as through fatal()) every time is
 * reported after three deaths, with the status, and the other row of its
 * job is read: such a death used to put the job back unchanged, for ever.
 */
START_TEST(test_row_that_exits_workers_reported_with_its_status)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 i, restarts = 0;
	uint64_t		*idx;

	pr = add_ring("flaky", 2, 1, 0, &rec, &r, &ds);
	idx = ring_indices(r, 0);
	idx[0] = 12;
	idx[1] = FLAKY_EXIT;	/* a worker reading it exits with 1 */
	pool_submit(pr, 0, 0, 0, 0, 2, ring_indices(r, 0));
	ck_assert_msg(run_until(pred_two, &rec), "%u reports: the row that "
	    "makes workers exit was never reported", rec.n);
	unit_run_for(100);
	ck_assert_uint_eq(rec.n, 2);
	for (i = 0; i < 2; i++) {
		ck_assert_uint_eq(rec.done[i].rows, 1);
		if (rec.done[i].result == POOL_JOB_CRASHED) {
			ck_assert_uint_eq(rec.done[i].bad, 1);
			ck_assert_int_eq(rec.done[i].signal, 0);
			ck_assert_int_eq(rec.done[i].status, 1);
			ck_assert_uint_eq(rec.done[i].deaths, 3);
		} else
			ck_assert_int_eq(rec.done[i].result, POOL_JOB_DONE);
	}
	ck_assert_int_ne(rec.done[0].result, rec.done[1].result);
	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		restarts += info.restarts;
	}
	ck_assert_uint_eq(restarts, 3);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* Whether the pool has nothing queued or running (for submit_exits). */
static bool
pool_quiet(void)
{
	return (pool_jobs_queued(pool) == 0 && busy_workers() == 0);
}

/*
 * Workers that die on every job are started again after a backoff that
 * doubles from 10 ms to 1 s: for a second of jobs that each kill their
 * worker, each of the two workers dies at most 8 times (0, 10, 30, 70,
 * 150, 310, 630 ms ...), not hundreds.
 */
START_TEST(test_respawns_of_dying_workers_back_off)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 i, restarts = 0;
	uint64_t		 end, *idx;

	pr = add_ring("flaky", 1, 1, 0, &rec, &r, &ds);
	idx = ring_indices(r, 0);
	idx[0] = FLAKY_EXIT;
	end = now_ms() + 1000;
	while (now_ms() < end) {
		if (pool_quiet() && rec.n < MAX_DONE - 1)
			pool_submit(pr, 0, 0, 0, 0, 1, idx);
		event_base_loop(base, EVLOOP_ONCE);
	}
	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		restarts += info.restarts;
	}
	ck_assert_msg(restarts >= 3 && restarts <= 2 * 8, "%u restarts of "
	    "dying workers in 1 s", restarts);
	pool_drop_jobs(pr);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* A job of 20 rows of "slow" (50 ms each) is done. */
static bool
pred_slow_done(const void *arg)
{
	const struct record	*rec = arg;

	return (rec->n >= 1 && pool_idle(pool));
}

/*
 * job_timeout is per row: a job of 20 rows of 50 ms (1 s) with a
 * job_timeout of 250 ms is done by one worker, not killed as stuck, split
 * and done again.
 */
START_TEST(test_job_timeout_is_per_row)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 i, stuck = 0, restarts = 0;

	pr = add_ring("slow", 20, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 20, ds->samples);
	pool_submit(pr, 0, 0, 0, 0, 20, ring_indices(r, 0));
	ck_assert(run_until(pred_slow_done, &rec));
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_DONE);
	ck_assert_uint_eq(rec.done[0].rows, 20);
	check_rows(r, ds, 0, 20);
	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		stuck += info.stuck;
		restarts += info.restarts;
	}
	ck_assert_msg(stuck == 0 && restarts == 0, "%u workers killed as "
	    "stuck, %u restarts, for a job of slow rows", stuck, restarts);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* Whether the record holds a report and all is idle. */
static bool
pred_one(const void *arg)
{
	const struct record	*rec = arg;

	return (rec->n >= 1 && pool_idle(pool));
}

/*
 * A ring whose dataset is not the one the workers have (the fork server
 * opened its own catalogue at a reload, and the file changed in between;
 * here the daemon's copy says one sample more): its jobs fail, saying so,
 * and nothing is read from the wrong dataset.
 */
START_TEST(test_ring_of_a_dataset_unlike_the_workers_fails_saying_so)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct dataset		*daemons;
	struct pool_ring	*pr;
	struct ring		*r;
	uint64_t		 samples;

	pr = add_ring("f32", 4, 1, 0, &rec, &r, &ds);
	daemons = (struct dataset *)(uintptr_t)ds;
	samples = daemons->samples;
	daemons->samples = samples + 1;
	fill_indices(r, 0, 4, samples);
	pool_submit(pr, 0, 0, 0, 0, 4, ring_indices(r, 0));
	ck_assert(run_until(pred_one, &rec));
	daemons->samples = samples;
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_INTERNAL);
	ck_assert_msg(strstr(rec.done[0].reason, "the workers' dataset 'f32' "
	    "is not the daemon's") != NULL, "%s", rec.done[0].reason);
	ck_assert(slot_is_zero(r, 0));
	pool_remove_ring(pr, r, false);
}
END_TEST

/*
 * A file cut while a worker copies a row out of its mapping (20 rows of
 * 20 ms, the file cut 100 ms in): the copy's SIGBUS is caught, the row
 * is a read error that says so, and no worker dies (each busy one used
 * to, and was respawned).
 */
START_TEST(test_sigbus_while_copying_is_the_rows_read_error)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 i, restarts = 0;
	uint64_t		*idx, end;

	pr = add_ring("flaky", 20, 1, 1, &rec, &r, &ds);
	idx = ring_indices(r, 0);
	for (i = 0; i < 20; i++)
		idx[i] = FLAKY_MAPPED;
	pool_submit(pr, 0, 0, 0, 0, 20, idx);
	end = now_ms() + 100;
	while (now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_int_eq(truncate(unit_flaky_map, 0), 0);
	ck_assert(run_until(pred_one, &rec));
	unit_run_for(100);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_READ_ERROR);
	ck_assert_uint_eq(rec.done[0].bad, FLAKY_MAPPED);
	ck_assert_msg(strstr(rec.done[0].reason, "SIGBUS") != NULL, "%s",
	    rec.done[0].reason);
	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		restarts += info.restarts;
	}
	ck_assert_uint_eq(restarts, 0);
	pool_remove_ring(pr, r, false);
}
END_TEST

/*
 * A ring's MAP that must wait in a worker's queue (its socket is full)
 * but cannot, for want of a descriptor to keep with it: the job is sent
 * again 100 ms later, not left waiting for some other event (a worker's
 * answer, another job), which may never come.
 */
START_TEST(test_job_sent_again_after_a_queued_map_could_not_be)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 info[WORKERS];
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	struct rlimit		 rl, low;
	unsigned		 i;
	uint64_t		 end;

	pr = add_ring("f32", 4, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 4, ds->samples);
	for (i = 0; i < WORKERS; i++) {
		pool_worker_info(pool, i, &info[i]);
		ck_assert_int_eq(kill(info[i].pid, SIGSTOP), 0);
	}
	unit_run_for(50);
	/* Fill both workers' sockets: the rest waits in their queues. */
	for (i = 0; i < 500; i++)
		pool_forget_mem(pool, 1000000 + i);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	low = rl;
	low.rlim_cur = 3;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	pool_submit(pr, 0, 0, 0, 0, 4, ring_indices(r, 0));
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	ck_assert_uint_eq(pool_jobs_queued(pool), 1);	/* it could not go */
	/*
	 * The workers go on, which nothing tells the pool (they are the fork
	 * server's children, and it reports ends only): nothing but the
	 * pool's own retry may send the job now.
	 */
	for (i = 0; i < WORKERS; i++)
		ck_assert_int_eq(kill(info[i].pid, SIGCONT), 0);
	usleep(200000);
	end = now_ms() + 3000;
	while (rec.n == 0 && now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_msg(rec.n == 1, "the job waited 3 s after its MAP could not "
	    "be queued");
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_DONE);
	check_rows(r, ds, 0, 4);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* The pool with a job_timeout of 250 ms. */
static void
setup_deadlines(void)
{
	setup_extra = "job_timeout = 250ms\n";
	setup();
	setup_extra = "";
}

START_TEST(test_idle_means_nothing_queued_or_running)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;

	ck_assert_uint_eq(pool_size(pool), WORKERS);
	ck_assert(pool_idle(pool));
	ck_assert_uint_eq(pool_jobs_queued(pool), 0);
	pr = add_ring("f32", 30, 1, 1, &rec, &r, &ds);
	ck_assert(pool_idle(pool));
	fill_indices(r, 0, 30, ds->samples);
	pool_submit(pr, 0, 0, 0, 0, 10, ring_indices(r, 0) + 0);
	ck_assert(!pool_idle(pool));		/* running */
	pool_submit(pr, 0, 0, 0, 10, 20, ring_indices(r, 0) + 10);
	pool_submit(pr, 0, 0, 0, 20, 30, ring_indices(r, 0) + 20);
	ck_assert_uint_eq(pool_jobs_queued(pool), 2);
	ck_assert(run_until(pred_idle, NULL));
	ck_assert_uint_eq(rec.n, 3);
	ck_assert_uint_eq(pool_jobs_queued(pool), 0);
	ck_assert_uint_eq(busy_workers(), 0);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* The index of the worker busy now other than @not, or WORKERS. */
static unsigned
busy_worker(unsigned not)
{
	struct pool_worker_info	info;
	unsigned		i;

	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		if (i != not && strcmp(info.state, "busy") == 0)
			return (i);
	}
	return (WORKERS);
}

/* The workers' restarts, stuck kills and jobs taken over, summed. */
static void
worker_counts(unsigned *restarts, unsigned *stuck, unsigned *taken)
{
	struct pool_worker_info	info;
	unsigned		i;

	*restarts = *stuck = *taken = 0;
	for (i = 0; i < pool_size(pool); i++) {
		pool_worker_info(pool, i, &info);
		*restarts += info.restarts;
		*stuck += info.stuck;
		*taken += info.taken_over;
	}
}

/*
 * A stopped worker's job is taken over by the idle one after about a
 * second (POOL_TAKEOVER_MS), not at job_timeout (30 s here): reported
 * once, its rows right; the stopped worker is killed (its writes fenced
 * before the report) and replaced, counted as taken over, not as stuck,
 * and nothing more is reported after.
 */
START_TEST(test_stopped_workers_job_taken_over)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 before, after;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 victim, restarts, stuck, taken;
	uint64_t		 t0, took;

	pr = add_ring("slow", 4, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 4, ds->samples);
	t0 = now_ms();
	pool_submit(pr, 0, 0, 0, 0, 4, ring_indices(r, 0));
	ck_assert_uint_lt(victim = busy_worker(WORKERS), WORKERS);
	pool_worker_info(pool, victim, &before);
	ck_assert_int_eq(kill(before.pid, SIGSTOP), 0);
	ck_assert_msg(run_until(pred_slow_done, &rec), "the job never "
	    "completed");
	took = now_ms() - t0;
	printf("stopped_workers_job_taken_over: the job came %llu ms after "
	    "its worker stopped\n", (unsigned long long)took);
	ck_assert_msg(took < 2500, "the job came %llu ms after its worker "
	    "stopped", (unsigned long long)took);
	unit_run_for(300);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_DONE);
	ck_assert_uint_eq(rec.done[0].rows, 4);
	check_rows(r, ds, 0, 4);
	pool_worker_info(pool, victim, &after);
	ck_assert_int_ne(after.pid, before.pid);
	ck_assert_uint_eq(after.taken_over, 1);
	worker_counts(&restarts, &stuck, &taken);
	ck_assert_uint_eq(restarts, 1);
	ck_assert_uint_eq(stuck, 0);
	ck_assert_uint_eq(taken, 1);
	(void)kill(before.pid, SIGCONT);	/* gone: ESRCH */
	pool_remove_ring(pr, r, false);
}
END_TEST

/*
 * The first result wins: a worker stopped half way through a job of 10
 * slow rows, its job taken over, then let go on: it finishes first, and
 * the copy that lost is killed before the job is reported, once.
 */
START_TEST(test_first_of_two_copies_wins_the_other_is_killed)
{
	struct record		 rec = { .n = 0 };
	struct pool_worker_info	 a, b, after;
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 first, second, restarts, stuck, taken;
	uint64_t		 end;

	pr = add_ring("slow", 10, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 10, ds->samples);
	pool_submit(pr, 0, 0, 0, 0, 10, ring_indices(r, 0));
	ck_assert_uint_lt(first = busy_worker(WORKERS), WORKERS);
	pool_worker_info(pool, first, &a);
	unit_run_for(275);			/* about 5 rows of 10 */
	ck_assert_int_eq(kill(a.pid, SIGSTOP), 0);
	end = now_ms() + 5000;
	while ((second = busy_worker(first)) == WORKERS &&
	    now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
	ck_assert_msg(second < WORKERS, "the stopped worker's job was not "
	    "taken over within 5 s");
	pool_worker_info(pool, second, &b);
	ck_assert_int_eq(kill(a.pid, SIGCONT), 0);
	ck_assert(run_until(pred_slow_done, &rec));
	unit_run_for(300);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_DONE);
	ck_assert_uint_eq(rec.done[0].rows, 10);
	check_rows(r, ds, 0, 10);
	/* The copy that lost (5 rows behind) was killed, not the winner. */
	worker_counts(&restarts, &stuck, &taken);
	ck_assert_uint_eq(restarts, 1);
	ck_assert_uint_eq(stuck, 0);
	ck_assert_uint_eq(taken, 1);
	pool_worker_info(pool, first, &after);
	ck_assert_uint_eq(after.taken_over, 1);
	ck_assert_int_eq(after.pid, a.pid);
	pool_worker_info(pool, second, &after);
	ck_assert_int_ne(after.pid, b.pid);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* The pool with "sleepy", a dataset whose one sample takes 2 s to read. */
static void
setup_sleepy(void)
{
	setup_more = "[dataset sleepy]\n"
	    "type = synthetic\n"
	    "samples = 1\n"
	    "shape = 4\n"
	    "dtype = uint8\n"
	    "sample_delay_us = 2000000\n";
	setup();
	setup_more = "";
}

/*
 * A row that is slow on every worker (a 2 s sleep: no row begun, no CPU)
 * is taken over once, and the first copy to finish gives it: reported
 * once at about 2 s, not after the takeover's second plus another 2 s,
 * nor taken over again; the copy that lost is killed, no worker is
 * counted as stuck.
 */
START_TEST(test_row_slow_everywhere_first_copy_wins)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	unsigned		 restarts, stuck, taken;
	uint64_t		 t0, took;

	pr = add_ring("sleepy", 1, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 1, ds->samples);
	t0 = now_ms();
	pool_submit(pr, 0, 0, 0, 0, 1, ring_indices(r, 0));
	ck_assert(run_until(pred_slow_done, &rec));
	took = now_ms() - t0;
	unit_run_for(300);
	printf("row_slow_everywhere_first_copy_wins: a 2 s row came in %llu "
	    "ms\n", (unsigned long long)took);
	ck_assert_uint_eq(rec.n, 1);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_DONE);
	check_rows(r, ds, 0, 1);
	ck_assert_msg(took < 2900, "a 2 s row came in %llu ms",
	    (unsigned long long)took);
	worker_counts(&restarts, &stuck, &taken);
	ck_assert_uint_eq(taken, 1);
	ck_assert_uint_eq(restarts, 1);
	ck_assert_uint_eq(stuck, 0);
	pool_remove_ring(pr, r, false);
}
END_TEST

/*
 * The pool with a job_timeout of 250 ms and "hung", a dataset whose every
 * read takes 10 s: a store that stopped answering.
 */
static void
setup_hung(void)
{
	setup_extra = "job_timeout = 250ms\n";
	setup_more = "[dataset hung]\n"
	    "type = synthetic\n"
	    "samples = 16\n"
	    "shape = 4\n"
	    "dtype = uint8\n"
	    "sample_delay_us = 10000000\n";
	setup();
	setup_extra = "";
	setup_more = "";
}

/* Whether every worker is busy, or a report came. */
static bool
pred_all_busy(const void *arg)
{
	const struct record	*rec = arg;

	return (rec->n > 0 || busy_workers() == WORKERS);
}

/* Whether a report came. */
static bool
pred_reported(const void *arg)
{
	const struct record	*rec = arg;

	return (rec->n > 0);
}

/* Whether process @pid is a zombie, or gone (its /proc entry too). */
static bool
dead(pid_t pid)
{
	char	 path[64], buf[512], *p;
	FILE	*fp;
	bool	 zombie;

	unit_fmt(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return (true);
	zombie = fgets(buf, sizeof(buf), fp) != NULL &&
	    (p = strrchr(buf, ')')) != NULL && p[1] == ' ' && p[2] == 'Z';
	fclose(fp);
	return (zombie);
}

/* Whether no worker is busy (both killed), or a report came. */
static bool
pred_none_busy(const void *arg)
{
	const struct record	*rec = arg;

	return (rec->n > 0 || busy_workers() == 0);
}

/*
 * A store that stops answering: every row of a job of 6 hangs.  The row
 * each try of it begins with (row 0) is reported after its three
 * job_timeouts, whatever order the workers die in: a dead worker's parts
 * go back in row order, after the rows before them that wait for another
 * try.  Once the first death has cut the job, row 0 runs on one worker and
 * rows 1-5 on the other's replacement; both are let die with the fork
 * server stopped, so that it reaps them together (the older, row 0's,
 * first), as on a loaded machine where replacements come late.  The parts of the later death used to go before
 * the row of the earlier one: each round then carved one row more while
 * the rows tried before waited behind, and the error came after about
 * rows x job_timeout, not 3 (62 s for a step of 32 in CI; here row 4
 * after 13 kills, or row 1 after 6, in 14 runs of 14).
 */
START_TEST(test_hung_rows_reported_after_three_timeouts)
{
	struct record		 rec = { .n = 0 };
	const struct dataset	*ds;
	struct pool_ring	*pr;
	struct ring		*r;
	struct pool_worker_info	 info;
	unsigned		 restarts, stuck, taken, forker_restarts, i;
	uint64_t		 t0, end, took;
	pid_t			 forker, pids[WORKERS];

	pr = add_ring("hung", 6, 1, 0, &rec, &r, &ds);
	fill_indices(r, 0, 6, ds->samples);
	t0 = now_ms();
	pool_submit(pr, 0, 0, 0, 0, 6, ring_indices(r, 0));
	/* The first death: row 0 on the other worker, 1-5 on its successor. */
	ck_assert(run_until(pred_all_busy, &rec));
	ck_assert_uint_eq(rec.n, 0);
	for (i = 0; i < WORKERS; i++) {
		pool_worker_info(pool, i, &info);
		pids[i] = info.pid;
	}
	pool_forker_info(pool, &forker, &forker_restarts);
	ck_assert_int_eq(kill(forker, SIGSTOP), 0);
	end = now_ms() + 600;		/* both deadlines pass */
	while (now_ms() < end)
		usleep(10 * 1000);	/* cut short by SIGCHLD */
	/* A replacement slow to begin its part dies a turn or two later. */
	ck_assert(run_until(pred_none_busy, &rec));
	ck_assert_uint_eq(rec.n, 0);
	/* Both reaped at once: the older first (waitpid(-1)'s order). */
	end = now_ms() + DEADLINE_MS;
	while ((!dead(pids[0]) || !dead(pids[1])) && now_ms() < end)
		usleep(10 * 1000);
	ck_assert_int_eq(kill(forker, SIGCONT), 0);
	ck_assert(unit_run_until(pred_reported, &rec, 2 * DEADLINE_MS));
	took = now_ms() - t0;
	worker_counts(&restarts, &stuck, &taken);
	printf("hung_rows_reported_after_three_timeouts: row %llu reported "
	    "after %llu ms, %u workers killed as stuck\n",
	    (unsigned long long)rec.done[0].bad, (unsigned long long)took,
	    stuck);
	ck_assert_int_eq(rec.done[0].result, POOL_JOB_STUCK);
	ck_assert_uint_eq(rec.done[0].rows, 1);
	ck_assert_uint_eq(rec.done[0].deaths, 3);
	ck_assert_msg(rec.done[0].bad == 0 && stuck <= 5, "row %llu reported "
	    "first, after %u workers killed as stuck: row 0, tried first each "
	    "time, waited behind the rows carved after it",
	    (unsigned long long)rec.done[0].bad, stuck);
	pool_drop_jobs(pr);
	pool_remove_ring(pr, r, false);
}
END_TEST

/* Every test, in cases by contract. */
static Suite *
pool_suite(void)
{
	Suite	*s = suite_create("pool");
	TCase	*tc;

	tc = tcase_create("jobs");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_jobs_complete_once_with_the_datasets_rows);
	tcase_add_test(tc, test_float32_kept_as_it_is_is_not_converted);
	tcase_add_test(tc, test_next_steps_go_before_steps_further_ahead);
	tcase_add_test(tc, test_queued_steps_move_up_as_the_client_takes_steps);
	tcase_add_test(tc, test_first_steps_before_second_steps);
	tcase_add_test(tc, test_removed_ring_released_when_its_running_job_is_done);
	tcase_add_test(tc, test_settle_releases_removed_rings);
	tcase_add_test(tc,
	    test_ring_of_a_dataset_unlike_the_workers_fails_saying_so);
	tcase_add_test(tc, test_no_job_before_a_worker_is_ready);
	tcase_add_test(tc, test_unreadable_index_reported_as_read_error);
	tcase_add_test(tc, test_int64_labels_written_whole);
	tcase_add_test(tc, test_label_too_large_for_int32_reported);
	tcase_add_test(tc, test_max_jobs_caps_a_rings_running_jobs);
	tcase_add_test(tc, test_remove_ring_drops_its_jobs_unreported);
	tcase_add_test(tc, test_drop_jobs_drops_queued_running_one_finishes);
	tcase_add_test(tc, test_idle_means_nothing_queued_or_running);
	tcase_add_test(tc, test_job_sent_again_after_a_queued_map_could_not_be);
	tcase_add_test(tc, test_a_step_of_arrays_is_one_job_a_worker);
	tcase_add_test(tc, test_next_job_waits_in_a_busy_workers_socket);
	tcase_add_test(tc, test_no_job_waits_behind_while_two_rings_are_served);
	suite_add_tcase(s, tc);

	tc = tcase_create("many-jobs");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_many_jobs);
	suite_add_tcase(s, tc);

	tc = tcase_create("crashes");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc,
	    test_killed_worker_replaced_and_its_job_completes_once);
	tcase_add_test(tc, test_dead_workers_job_behind_goes_back);
	tcase_add_test(tc, test_row_that_kills_workers_in_a_job_behind);
	tcase_add_test(tc,
	    test_row_that_kills_workers_three_times_reported_crashed);
	tcase_add_test(tc,
	    test_row_that_exits_workers_reported_with_its_status);
	tcase_add_test(tc, test_respawns_of_dying_workers_back_off);
	tcase_add_test(tc, test_pool_grows_and_shrinks_losing_nothing);
	tcase_add_test(tc, test_sigbus_while_copying_is_the_rows_read_error);
	suite_add_tcase(s, tc);

	tc = tcase_create("deadlines");
	tcase_add_checked_fixture(tc, setup_deadlines, teardown);
	tcase_add_test(tc, test_job_timeout_is_per_row);
	suite_add_tcase(s, tc);

	tc = tcase_create("hung");
	tcase_add_checked_fixture(tc, setup_hung, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_hung_rows_reported_after_three_timeouts);
	suite_add_tcase(s, tc);

	tc = tcase_create("takeover");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_stopped_workers_job_taken_over);
	tcase_add_test(tc, test_first_of_two_copies_wins_the_other_is_killed);
	suite_add_tcase(s, tc);

	tc = tcase_create("takeover-slow");
	tcase_add_checked_fixture(tc, setup_sleepy, teardown);
	tcase_add_test(tc, test_row_slow_everywhere_first_copy_wins);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every test in a directory of its own, then remove it. */
int
main(void)
{
	log_init("test-pool", getenv("TEST_VERBOSE") != NULL ? 1 : -1);
	return (run_suite_in_dir(pool_suite(), "test-pool", rundir,
	    sizeof(rundir)));
}
