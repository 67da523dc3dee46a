/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the pipeline schedules, the IPU cost model and the trace
 * writers: the reference's totals and slot tables for N = 4 (sections 2.1
 * to 2.5), valid execution order of every schedule, the per-framework
 * validity rules, the cost model's calibration on the efficient-data-
 * loading tutorial and its worked example (3.5), and well-formed trace
 * JSON and SVG.
 */

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "costmodel.h"
#include "runner.h"
#include "schedule.h"
#include "trace.h"

#define ALL_KINDS	6

/* Fail with the condition's text; silent (and fast) when it holds. */
#define require(cond) do {						\
	if (!(cond))							\
		ck_abort_msg("%s:%d: %s fails for %s N=%d M=%d",	\
		    __FILE__, __LINE__, #cond, schedule_name(s->kind),	\
		    s->stages, s->micro);				\
} while (0)

static struct schedule	 sch;
static struct timeline	*tl;
static char		 tmpdir[64];

static const enum schedule_kind all_kinds[ALL_KINDS] = {
	SCHEDULE_PIPELINED, SCHEDULE_SHARDED, SCHEDULE_GROUPED,
	SCHEDULE_INTERLEAVED, SCHEDULE_GPIPE, SCHEDULE_1F1B,
};

/* Reference 2.2, PopTorch PipelinedExecution, N = 4, M = 8. */
static const char *const table_pipelined[14][4] = {
	{ "F0", "", "", "" },
	{ "F1", "F0", "", "" },
	{ "F2", "F1", "F0", "" },
	{ "F3", "F2", "F1", "F0+B0" },
	{ "F4", "F3", "F2+B0", "F1+B1" },
	{ "F5", "F4+B0", "F3+B1", "F2+B2" },
	{ "F6+B0", "F5+B1", "F4+B2", "F3+B3" },
	{ "F7+B1", "F6+B2", "F5+B3", "F4+B4" },
	{ "B2", "F7+B3", "F6+B4", "F5+B5" },
	{ "B3", "B4", "F7+B5", "F6+B6" },
	{ "B4", "B5", "B6", "F7+B7" },
	{ "B5", "B6", "B7", "" },
	{ "B6", "B7", "", "" },
	{ "B7", "", "", "" },
};

/* Reference 2.2, TF Grouped, N = 4, M = 8 (B before F inside a step). */
static const char *const table_grouped[15][4] = {
	{ "F0", "", "", "" },
	{ "F1", "F0", "", "" },
	{ "F2", "F1", "F0", "" },
	{ "F3", "F2", "F1", "F0" },
	{ "F4", "F3", "F2", "B0+F1" },
	{ "F5", "F4", "B0+F3", "B1+F2" },
	{ "F6", "B0+F5", "B1+F4", "B2+F3" },
	{ "B0+F7", "B1+F6", "B2+F5", "B3+F4" },
	{ "B1", "B2+F7", "B3+F6", "B4+F5" },
	{ "B2", "B3", "B4+F7", "B5+F6" },
	{ "B3", "B4", "B5", "B6+F7" },
	{ "B4", "B5", "B6", "B7" },
	{ "B5", "B6", "B7", "" },
	{ "B6", "B7", "", "" },
	{ "B7", "", "", "" },
};

/* Reference 2.2, TF Interleaved and 1F1B, N = 4, M = 8, side by side. */
static const char *const table_interleaved_1f1b[22][8] = {
	{ "F0", "", "", "", "F0", "", "", "" },
	{ "", "F0", "", "", "F1", "F0", "", "" },
	{ "F1", "", "F0", "", "F2", "F1", "F0", "" },
	{ "", "F1", "", "F0", "F3", "F2", "F1", "F0" },
	{ "F2", "", "F1", "B0", "", "", "", "B0" },
	{ "", "F2", "B0", "F1", "", "", "B0", "F1" },
	{ "F3", "B0", "F2", "B1", "", "B0", "F2", "B1" },
	{ "B0", "F3", "B1", "F2", "B0", "F3", "B1", "F2" },
	{ "F4", "B1", "F3", "B2", "F4", "B1", "F3", "B2" },
	{ "B1", "F4", "B2", "F3", "B1", "F4", "B2", "F3" },
	{ "F5", "B2", "F4", "B3", "F5", "B2", "F4", "B3" },
	{ "B2", "F5", "B3", "F4", "B2", "F5", "B3", "F4" },
	{ "F6", "B3", "F5", "B4", "F6", "B3", "F5", "B4" },
	{ "B3", "F6", "B4", "F5", "B3", "F6", "B4", "F5" },
	{ "F7", "B4", "F6", "B5", "F7", "B4", "F6", "B5" },
	{ "B4", "F7", "B5", "F6", "B4", "F7", "B5", "F6" },
	{ "", "B5", "F7", "B6", "", "B5", "F7", "B6" },
	{ "B5", "", "B6", "F7", "B5", "", "B6", "F7" },
	{ "", "B6", "", "B7", "", "B6", "", "B7" },
	{ "B6", "", "B7", "", "B6", "", "B7", "" },
	{ "", "B7", "", "", "", "B7", "", "" },
	{ "B7", "", "", "", "B7", "", "", "" },
};

static void	build(enum schedule_kind, int, int, bool, bool);
static void	expect_refused(enum schedule_kind, int, int, bool, ...)
		    __attribute__((sentinel));
static void	check_table(enum schedule_kind, int, const char *const *, int,
		    int);
static void	check_order(const struct schedule *, bool);
static int	closed_peak(enum schedule_kind, int, int, int);
static void	tutorial_stage(struct stage_cost *);
static void	tutorial_shape(struct run_shape *, int, bool);
static double	tutorial_rate(const struct ipu_config *, int, bool);
static void	bert_stages(struct stage_cost *);
static char	*slurp(const char *, size_t *);
static size_t	count_substr(const char *, const char *);
static const char *json_value(const char *, int);
static bool	json_valid(const char *);
static void	tmp_path(char *, size_t, const char *);

/* Fresh schedule, no timeline, a private temporary directory. */
static void
setup(void)
{
	memset(&sch, 0, sizeof sch);
	tl = NULL;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/test-schedule.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

/* Free what the test left behind and remove its files. */
static void
teardown(void)
{
	char	path[128];

	schedule_free(&sch);
	trace_free(tl);
	tmp_path(path, sizeof path, "t.json");
	unlink(path);
	tmp_path(path, sizeof path, "t.svg");
	unlink(path);
	rmdir(tmpdir);
}

/* A file name inside the test's directory. */
static void
tmp_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* Build @sch, which must be accepted. */
static void
build(enum schedule_kind kind, int n, int m, bool training, bool recompute)
{
	char	err[256];
	int	rc;

	schedule_free(&sch);
	rc = schedule_build(&sch, kind, n, m, training, recompute, err,
	    sizeof err);
	ck_assert_msg(rc == 0, "%s N=%d M=%d refused: %s", schedule_name(kind),
	    n, m, err);
}

/* Check that (kind, n, m) is refused with a reason holding each string. */
static void
expect_refused(enum schedule_kind kind, int n, int m, bool training, ...)
{
	struct schedule	 s;
	char		 err[512];
	const char	*want;
	va_list		 ap;

	err[0] = '\0';
	ck_assert_int_eq(schedule_check(kind, n, m, training, err, sizeof err),
	    -1);
	ck_assert_msg(strlen(err) > 20, "no reason for %s N=%d M=%d",
	    schedule_name(kind), n, m);
	va_start(ap, training);
	while ((want = va_arg(ap, const char *)) != NULL)
		ck_assert_msg(strstr(err, want) != NULL,
		    "reason \"%s\" lacks \"%s\"", err, want);
	va_end(ap);
	ck_assert_int_eq(schedule_build(&s, kind, n, m, training, false, err,
	    sizeof err), -1);
	ck_assert_ptr_null(s.ops);
}

/* Compare @kind's N=4 slot table with @rows x 4 cells taken @stride apart. */
static void
check_table(enum schedule_kind kind, int m, const char *const *cells,
    int rows, int stride)
{
	char	cell[64];
	int	t, k;

	build(kind, 4, m, true, false);
	ck_assert_int_eq(sch.nslots, rows);
	for (t = 0; t < rows; t++)
		for (k = 0; k < 4; k++) {
			schedule_cell(&sch, t, k, cell, sizeof cell);
			ck_assert_msg(strcmp(cell, cells[t * stride + k]) == 0,
			    "%s slot %d IPU%d: got \"%s\", want \"%s\"",
			    schedule_name(kind), t, k, cell,
			    cells[t * stride + k]);
		}
}

/* Check that @s is a valid execution order holding each op exactly once. */
static void
check_order(const struct schedule *s, bool recompute)
{
	const struct sched_op	*op;
	unsigned char		*f, *b, *r, *slotf, *slotb;
	size_t			 nm = (size_t)s->stages * s->micro, at;
	int			 i, k, n = s->stages, m = s->micro, want;

	f = calloc(nm, 1);
	b = calloc(nm, 1);
	r = calloc(nm, 1);
	slotf = calloc((size_t)s->nslots * n, 1);
	slotb = calloc((size_t)s->nslots * n, 1);
	require(f && b && r && slotf && slotb);
	want = n * m * (s->training ? 2 : 1) +
	    (recompute && s->training ? (n - 1) * m : 0);
	require(s->nops == want);
	for (i = 0; i < s->nops; i++) {
		op = &s->ops[i];
		k = op->stage;
		require(k >= 0 && k < n && op->micro >= 0 && op->micro < m);
		require(op->slot >= 0 && op->slot < s->nslots);
		if (i > 0)
			require(s->ops[i - 1].slot <= op->slot);
		at = (size_t)k * m + op->micro;
		switch (op->kind) {
		case OP_FORWARD:
			require(!f[at]);
			if (k > 0)
				require(f[at - m]);
			f[at] = 1;
			require(slotf[(size_t)op->slot * n + k]++ == 0);
			break;
		case OP_RECOMPUTE:
			require(s->training && recompute && k < n - 1);
			require(f[at] && !r[at] && !b[at]);
			r[at] = 1;
			require(i + 1 < s->nops);
			require(s->ops[i + 1].kind == OP_BACKWARD &&
			    s->ops[i + 1].stage == k &&
			    s->ops[i + 1].micro == op->micro &&
			    s->ops[i + 1].slot == op->slot);
			break;
		case OP_BACKWARD:
			require(s->training);
			require(f[at] && !b[at]);
			if (k < n - 1)
				require(b[at + m]);
			if (recompute && k < n - 1)
				require(r[at]);
			b[at] = 1;
			require(slotb[(size_t)op->slot * n + k]++ == 0);
			break;
		}
	}
	for (at = 0; at < nm; at++) {
		require(f[at]);
		require(b[at] == s->training);
	}
	free(f);
	free(b);
	free(r);
	free(slotf);
	free(slotb);
}

/* The peak stash of table 2.1 for stage @k. */
static int
closed_peak(enum schedule_kind kind, int n, int m, int k)
{
	switch (kind) {
	case SCHEDULE_PIPELINED:
		return (k < n - 1 ? 2 * (n - 1 - k) + 1 : 1);
	case SCHEDULE_GROUPED:
		return (2 * (n - k) - 1);
	case SCHEDULE_INTERLEAVED:
		return (n - k);
	case SCHEDULE_1F1B:
		return (n - k < m ? n - k : m);
	case SCHEDULE_GPIPE:
		return (m);
	default:
		return (1);
	}
}

START_TEST(schedule_names_parse_and_print_back)
{
	int	i;

	for (i = 0; i < ALL_KINDS; i++)
		ck_assert_int_eq(schedule_parse(schedule_name(all_kinds[i])),
		    (int)all_kinds[i]);
	ck_assert_int_eq(schedule_parse("pipelined"), SCHEDULE_PIPELINED);
	ck_assert_int_eq(schedule_parse("1f1b"), SCHEDULE_1F1B);
	ck_assert_int_eq(schedule_parse("bogus"), -1);
	ck_assert_int_eq(schedule_parse(NULL), -1);
}
END_TEST

START_TEST(test_totals_n4_m8)
{
	static const struct {
		enum schedule_kind	kind;
		int			slots;
		double			span1, span2, bubble2;
	} want[] = {
		{ SCHEDULE_PIPELINED, 14, 22, 33, 3.0 / 11 },
		{ SCHEDULE_GROUPED, 15, 22, 33, 3.0 / 11 },
		{ SCHEDULE_INTERLEAVED, 22, 22, 40, 0.4 },
		{ SCHEDULE_SHARDED, 64, 64, 96, 0.75 },
		{ SCHEDULE_GPIPE, 22, 22, 33, 3.0 / 11 },
		{ SCHEDULE_1F1B, 22, 22, 33, 3.0 / 11 },
	};
	size_t	i;

	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		build(want[i].kind, 4, 8, true, false);
		ck_assert_int_eq(sch.nslots, want[i].slots);
		ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 1),
		    want[i].span1, 1e-9);
		ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2),
		    want[i].span2, 1e-9);
		ck_assert_double_eq_tol(schedule_bubble_fraction(&sch, 2),
		    want[i].bubble2, 1e-9);
		if (want[i].kind != SCHEDULE_SHARDED)
			ck_assert_double_eq_tol(schedule_bubble_fraction(&sch,
			    1), 3.0 / 11, 1e-9);
		ck_assert(sch.lockstep == (want[i].kind != SCHEDULE_GPIPE &&
		    want[i].kind != SCHEDULE_1F1B));
	}
}
END_TEST

START_TEST(test_totals_other_m)
{
	/* Table 2.5: M = 10, 16, 32 for N = 4. */
	build(SCHEDULE_PIPELINED, 4, 10, true, false);
	ck_assert_int_eq(sch.nslots, 16);
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 1), 26, 1e-9);
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2), 39, 1e-9);
	ck_assert_double_eq_tol(schedule_bubble_fraction(&sch, 2), 3.0 / 13,
	    1e-9);
	build(SCHEDULE_1F1B, 4, 10, true, false);
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2), 39, 1e-9);
	build(SCHEDULE_GROUPED, 4, 16, true, false);
	ck_assert_int_eq(sch.nslots, 23);
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2), 57, 1e-9);
	build(SCHEDULE_PIPELINED, 4, 16, true, false);
	ck_assert_int_eq(sch.nslots, 22);
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2), 57, 1e-9);
	build(SCHEDULE_GROUPED, 4, 32, true, false);
	ck_assert_int_eq(sch.nslots, 39);
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2), 105, 1e-9);
	ck_assert_double_eq_tol(schedule_bubble_fraction(&sch, 2), 3.0 / 35,
	    1e-9);
	build(SCHEDULE_INTERLEAVED, 4, 32, true, false);
	ck_assert_int_eq(sch.nslots, 70);
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2), 136, 1e-9);
	build(SCHEDULE_SHARDED, 4, 10, true, false);
	ck_assert_int_eq(sch.nslots, 80);
}
END_TEST

START_TEST(test_peak_stash_n4_m8)
{
	static const struct {
		enum schedule_kind	kind;
		int			peak[4];
	} want[] = {
		{ SCHEDULE_PIPELINED, { 7, 5, 3, 1 } },
		{ SCHEDULE_GROUPED, { 7, 5, 3, 1 } },
		{ SCHEDULE_INTERLEAVED, { 4, 3, 2, 1 } },
		{ SCHEDULE_1F1B, { 4, 3, 2, 1 } },
		{ SCHEDULE_GPIPE, { 8, 8, 8, 8 } },
		{ SCHEDULE_SHARDED, { 1, 1, 1, 1 } },
	};
	int	peak[4], k;
	size_t	i;

	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		build(want[i].kind, 4, 8, true, false);
		schedule_peak_stash(&sch, peak);
		for (k = 0; k < 4; k++)
			ck_assert_msg(peak[k] == want[i].peak[k],
			    "%s stage %d: peak %d, want %d",
			    schedule_name(want[i].kind), k, peak[k],
			    want[i].peak[k]);
		/* Recomputation stashes inputs, not more micro-batches. */
		build(want[i].kind, 4, 8, true, true);
		schedule_peak_stash(&sch, peak);
		for (k = 0; k < 4; k++)
			ck_assert_int_eq(peak[k], want[i].peak[k]);
	}
	build(SCHEDULE_PIPELINED, 4, 8, false, false);
	schedule_peak_stash(&sch, peak);
	for (k = 0; k < 4; k++)
		ck_assert_int_eq(peak[k], 0);
}
END_TEST

START_TEST(test_first_backward)
{
	int	i;

	build(SCHEDULE_GROUPED, 4, 8, true, false);
	i = schedule_find(&sch, OP_BACKWARD, 0, 0);
	ck_assert_int_ge(i, 0);
	ck_assert_int_eq(sch.ops[i].slot, 7);
	build(SCHEDULE_PIPELINED, 4, 8, true, false);
	i = schedule_find(&sch, OP_BACKWARD, 0, 0);
	ck_assert_int_ge(i, 0);
	ck_assert_int_eq(sch.ops[i].slot, 6);
	build(SCHEDULE_INTERLEAVED, 4, 8, true, false);
	i = schedule_find(&sch, OP_BACKWARD, 0, 0);
	ck_assert_int_ge(i, 0);
	ck_assert_int_eq(sch.ops[i].slot, 7);
	ck_assert_int_eq(schedule_find(&sch, OP_RECOMPUTE, 0, 0), -1);
}
END_TEST

START_TEST(test_table_pipelined)
{
	check_table(SCHEDULE_PIPELINED, 8, &table_pipelined[0][0], 14, 4);
}
END_TEST

START_TEST(test_table_grouped)
{
	check_table(SCHEDULE_GROUPED, 8, &table_grouped[0][0], 15, 4);
}
END_TEST

START_TEST(test_table_interleaved_1f1b)
{
	check_table(SCHEDULE_INTERLEAVED, 8, &table_interleaved_1f1b[0][0],
	    22, 8);
	check_table(SCHEDULE_1F1B, 8, &table_interleaved_1f1b[0][4], 22, 8);
}
END_TEST

START_TEST(test_table_pipelined_m10)
{
	char	cell[64], want[64];
	int	t, k, f, b;

	/* Table 2.3: IPU k runs F(t-k) and B(t-6+k), both if they exist. */
	build(SCHEDULE_PIPELINED, 4, 10, true, false);
	ck_assert_int_eq(sch.nslots, 16);
	for (t = 0; t < 16; t++)
		for (k = 0; k < 4; k++) {
			f = t - k;
			b = t - 6 + k;
			want[0] = '\0';
			if (f >= 0 && f < 10)
				snprintf(want, sizeof want, "F%d", f);
			if (b >= 0 && b < 10)
				snprintf(want + strlen(want), sizeof want -
				    strlen(want), "%sB%d", want[0] ? "+" : "",
				    b);
			schedule_cell(&sch, t, k, cell, sizeof cell);
			ck_assert_str_eq(cell, want);
		}
}
END_TEST

START_TEST(test_sharded_table)
{
	char	cell[64];

	/* Table 2.4: one op per op-step, F0..F3 then B3..B0. */
	build(SCHEDULE_SHARDED, 4, 8, true, false);
	schedule_cell(&sch, 0, 0, cell, sizeof cell);
	ck_assert_str_eq(cell, "F0");
	schedule_cell(&sch, 3, 3, cell, sizeof cell);
	ck_assert_str_eq(cell, "F0");
	schedule_cell(&sch, 4, 3, cell, sizeof cell);
	ck_assert_str_eq(cell, "B0");
	schedule_cell(&sch, 7, 0, cell, sizeof cell);
	ck_assert_str_eq(cell, "B0");
	schedule_cell(&sch, 8, 0, cell, sizeof cell);
	ck_assert_str_eq(cell, "F1");
	schedule_cell(&sch, 15, 0, cell, sizeof cell);
	ck_assert_str_eq(cell, "B1");
	ck_assert_int_eq(schedule_cell(&sch, 5, 0, cell, sizeof cell), 0);
	ck_assert_str_eq(cell, "");
}
END_TEST

START_TEST(recomputation_slots_match_the_reference)
{
	char	cell[64];
	int	peak[4];

	build(SCHEDULE_PIPELINED, 4, 8, true, true);
	check_order(&sch, true);
	schedule_cell(&sch, 6, 0, cell, sizeof cell);
	ck_assert_str_eq(cell, "F6+R0+B0");
	schedule_cell(&sch, 3, 3, cell, sizeof cell);
	ck_assert_str_eq(cell, "F0+B0");
	/* F+R+B = 4 in cycles 4..9, see reference 2.1's note. */
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2), 42, 1e-9);
	build(SCHEDULE_GROUPED, 4, 8, true, true);
	schedule_cell(&sch, 7, 0, cell, sizeof cell);
	ck_assert_str_eq(cell, "R0+B0+F7");
	/* Inference ignores recomputation. */
	build(SCHEDULE_PIPELINED, 4, 8, false, true);
	check_order(&sch, true);
	ck_assert_int_eq(sch.nops, 32);
	schedule_peak_stash(&sch, peak);
	ck_assert_int_eq(peak[0], 0);
}
END_TEST

START_TEST(inference_schedules_have_forward_slots_only)
{
	build(SCHEDULE_PIPELINED, 4, 8, false, false);
	ck_assert_int_eq(sch.nslots, 11);
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2), 11, 1e-9);
	build(SCHEDULE_GROUPED, 4, 8, false, false);
	ck_assert_int_eq(sch.nslots, 11);
	build(SCHEDULE_SHARDED, 4, 8, false, false);
	ck_assert_int_eq(sch.nslots, 32);
	ck_assert_double_eq_tol(schedule_unit_makespan(&sch, 2), 32, 1e-9);
	ck_assert_double_eq_tol(schedule_bubble_fraction(&sch, 2), 0.75,
	    1e-9);
	build(SCHEDULE_PIPELINED, 4, 4, false, false);
	build(SCHEDULE_GROUPED, 4, 4, false, false);
	build(SCHEDULE_PIPELINED, 1, 1, false, false);
	ck_assert_int_eq(sch.nslots, 1);
	ck_assert_int_eq(sch.nops, 1);
}
END_TEST

START_TEST(test_valid_order_all)
{
	double	tb, span, want;
	int	i, n, m, k, r, peak[8], training;

	for (i = 0; i < ALL_KINDS; i++)
	for (training = 0; training <= 1; training++)
	for (n = 1; n <= 8; n++)
	for (m = 1; m <= 40; m++) {
		if (schedule_check(all_kinds[i], n, m, training, NULL, 0)
		    == -1)
			continue;
		for (r = 0; r <= 1; r++) {
			build(all_kinds[i], n, m, training, r);
			check_order(&sch, r);
		}
		build(all_kinds[i], n, m, training, false);
		if (!training)
			continue;
		schedule_peak_stash(&sch, peak);
		for (k = 0; k < n; k++)
			if (peak[k] != closed_peak(all_kinds[i], n, m, k))
				ck_abort_msg("%s N=%d M=%d stage %d: peak %d, "
				    "want %d", schedule_name(all_kinds[i]), n,
				    m, k, peak[k],
				    closed_peak(all_kinds[i], n, m, k));
		/* Async unit slots are the event-driven times at tB = 1. */
		if (!sch.lockstep && schedule_unit_makespan(&sch, 1) !=
		    sch.nslots)
			ck_abort_msg("%s N=%d M=%d: async makespan is not the "
			    "slot count", schedule_name(all_kinds[i]), n, m);
		for (tb = 1; tb <= 2; tb++) {
			span = schedule_unit_makespan(&sch, tb);
			if (all_kinds[i] == SCHEDULE_SHARDED)
				want = m * n * (1 + tb);
			else if (all_kinds[i] == SCHEDULE_INTERLEAVED)
				want = n < 2 ? m * (1 + tb) :
				    n + (2 * m + n - 2) * tb;
			else
				want = (m + n - 1) * (1 + tb);
			if (fabs(span - want) > 1e-9)
				ck_abort_msg("%s N=%d M=%d tB=%g: makespan "
				    "%g, want %g", schedule_name(all_kinds[i]),
				    n, m, tb, span, want);
			if (all_kinds[i] != SCHEDULE_SHARDED &&
			    all_kinds[i] != SCHEDULE_INTERLEAVED &&
			    fabs(schedule_bubble_fraction(&sch, tb) -
			    (n - 1.0) / (m + n - 1)) > 1e-9)
				ck_abort_msg("%s N=%d M=%d: bubble is not "
				    "(N-1)/(M+N-1)",
				    schedule_name(all_kinds[i]), n, m);
		}
	}
}
END_TEST

START_TEST(invalid_schedules_refused_with_advice)
{
	expect_refused(SCHEDULE_PIPELINED, 4, 4, true, "at least 7",
	    "got 4", "closest valid value is 7", (char *)NULL);
	expect_refused(SCHEDULE_GROUPED, 4, 10, true, "multiple of 8",
	    "got 10", "closest valid value is 8", (char *)NULL);
	expect_refused(SCHEDULE_INTERLEAVED, 4, 6, true, "multiple of 4",
	    "got 6", (char *)NULL);
	expect_refused(SCHEDULE_GROUPED, 4, 4, true, "at least 8",
	    "closest valid value is 8", (char *)NULL);
	expect_refused(SCHEDULE_GROUPED, 4, 6, false, "multiple of 4",
	    (char *)NULL);
	expect_refused(SCHEDULE_PIPELINED, 4, 3, false, "device iterations",
	    "closest valid value is 4", (char *)NULL);
	expect_refused(SCHEDULE_PIPELINED, 0, 8, true, "at least 1",
	    (char *)NULL);
	expect_refused(SCHEDULE_1F1B, 65, 200, true, "64", (char *)NULL);
	expect_refused(SCHEDULE_GPIPE, 4, 0, true, "closest valid value is 1",
	    (char *)NULL);
	expect_refused(SCHEDULE_SHARDED, 1, 100001, true, "100000",
	    (char *)NULL);
	expect_refused(SCHEDULE_SHARDED, 64, 20000, true, "15625",
	    (char *)NULL);
	expect_refused((enum schedule_kind)42, 4, 8, true, "pipelined",
	    (char *)NULL);
	/* The boundaries themselves are accepted. */
	ck_assert_int_eq(schedule_check(SCHEDULE_PIPELINED, 4, 7, true, NULL,
	    0), 0);
	ck_assert_int_eq(schedule_check(SCHEDULE_GROUPED, 4, 16, true, NULL,
	    0), 0);
	ck_assert_int_eq(schedule_check(SCHEDULE_INTERLEAVED, 4, 12, true,
	    NULL, 0), 0);
	ck_assert_int_eq(schedule_check(SCHEDULE_GPIPE, 4, 1, true, NULL, 0),
	    0);
}
END_TEST

/* The tutorial's ClassificationModel on one IPU, as one stage. */
static void
tutorial_stage(struct stage_cost *st)
{
	memset(st, 0, sizeof *st);
	/* The blocks' forward FLOPs as train/model.c counts them. */
	st->flops = 1666980.0 + 10818948.0 + 8354600.0 + 2010.0;
	st->layers = 3 + 3 + 2 + 1;
	st->params = 50 + 1536 + 4177300 + 1010;
	st->in_bytes = 65536;
	st->out_bytes = 10 * 4;
}

/* inferenceModel, micro-batch 16, 50 device iterations. */
static void
tutorial_shape(struct run_shape *shape, int replicas, bool synthetic)
{
	run_shape_default(shape, false);
	shape->micro_batch = 16;
	shape->replicas = replicas;
	shape->device_iterations = 50;
	shape->synthetic = synthetic;
}

/* The modelled items/s of the tutorial. */
static double
tutorial_rate(const struct ipu_config *cfg, int replicas, bool synthetic)
{
	struct schedule		s;
	struct stage_cost	st;
	struct run_shape	shape;
	struct device_timing	dt;

	ck_assert_int_eq(schedule_build(&s, SCHEDULE_PIPELINED, 1, 1, false,
	    false, NULL, 0), 0);
	tutorial_stage(&st);
	tutorial_shape(&shape, replicas, synthetic);
	ck_assert_int_eq(costmodel_evaluate(cfg, &s, &st, &shape, &dt, NULL),
	    0);
	ck_assert_double_eq_tol(dt.items, 16.0 * 50 * replicas, 1e-9);
	ck_assert_double_eq(dt.allreduce, 0);
	ck_assert_double_eq(dt.weight_update, 0);
	schedule_free(&s);
	return (dt.items_per_s);
}

START_TEST(cost_model_matches_the_tutorial_calibration)
{
	struct ipu_config	cfg;
	double			r1, r4, real1;

	ipu_config_default(&cfg);
	r1 = tutorial_rate(&cfg, 1, true);
	r4 = tutorial_rate(&cfg, 4, true);
	ck_assert_msg(fabs(r1 / 34306.55 - 1) < 0.10, "R=1: %.2f items/s",
	    r1);
	ck_assert_msg(fabs(r4 / 136452.36 - 1) < 0.10, "R=4: %.2f items/s",
	    r4);
	/* Replicas have their own host links: four replicas, four times. */
	ck_assert_double_eq_tol(r4 / r1, 4, 0.04);
	/* Real data pays the input over PCIe, but stays near synthetic. */
	real1 = tutorial_rate(&cfg, 1, false);
	ck_assert_double_lt(real1, r1);
	ck_assert_double_gt(real1, 0.93 * r1);
	/* And the PCIe figure is what keeps it there. */
	ipu_config_set(&cfg, "host_bw", "4e9", NULL, 0);
	ck_assert_double_lt(tutorial_rate(&cfg, 1, false), 0.8 * r1);
}
END_TEST

START_TEST(test_allreduce_and_update)
{
	struct ipu_config	cfg;
	struct stage_cost	st[4];
	struct run_shape	shape;
	struct device_timing	dt, prev;
	int			r, k;

	ipu_config_default(&cfg);
	build(SCHEDULE_PIPELINED, 4, 8, true, true);
	for (k = 0; k < 4; k++) {
		tutorial_stage(&st[k]);
		st[k].act_bytes = 4096;
	}
	run_shape_default(&shape, true);
	shape.micro_batch = 4;
	memset(&prev, 0, sizeof prev);
	for (r = 1; r <= 16; r *= 2) {
		shape.replicas = r;
		ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape,
		    &dt, NULL), 0);
		if (r == 1)
			ck_assert_double_eq(dt.allreduce, 0);
		else
			ck_assert_double_gt(dt.allreduce, prev.allreduce);
		ck_assert_double_gt(dt.weight_update, 0);
		ck_assert_double_eq_tol(dt.update, dt.pipe + dt.allreduce +
		    dt.weight_update, 1e-15);
		ck_assert_double_eq_tol(dt.call, cfg.launch + dt.update,
		    1e-15);
		ck_assert_double_eq_tol(dt.items, 4.0 * 8 * r, 1e-9);
		prev = dt;
	}
	/* Offloading the optimiser state adds the Streaming Memory trips. */
	shape.replicas = 1;
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape, &prev,
	    NULL), 0);
	cfg.offload_optimiser = true;
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape, &dt,
	    NULL), 0);
	ck_assert_double_gt(dt.weight_update, prev.weight_update);
	ck_assert_double_eq_tol(dt.weight_update - prev.weight_update,
	    4 * 2 * st[0].params * cfg.state_bytes / cfg.stream_bw, 1e-12);
	ck_assert_double_gt(dt.call, prev.call);
	/* Serial outer fragment sums the IPUs, parallel takes the slowest. */
	cfg.outer_serial = false;
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape, &prev,
	    NULL), 0);
	ck_assert_double_eq_tol(dt.weight_update, 4 * prev.weight_update,
	    1e-12);
}
END_TEST

START_TEST(test_monotonic_in_m)
{
	struct ipu_config	cfg;
	struct stage_cost	st[4];
	struct run_shape	shape;
	struct device_timing	dt;
	double			last_call = 0, last_rate = 0;
	int			m, k;

	ipu_config_default(&cfg);
	for (k = 0; k < 4; k++) {
		tutorial_stage(&st[k]);
		st[k].act_bytes = 65536;
	}
	run_shape_default(&shape, true);
	shape.micro_batch = 8;
	shape.replicas = 2;
	shape.device_iterations = 3;
	for (m = 7; m <= 64; m++) {
		build(SCHEDULE_PIPELINED, 4, m, true, true);
		ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape,
		    &dt, NULL), 0);
		ck_assert_double_gt(dt.call, last_call);
		/* The ramps and the update are shared by more samples. */
		ck_assert_double_gt(dt.items_per_s, last_rate);
		last_call = dt.call;
		last_rate = dt.items_per_s;
		for (k = 0; k < 4; k++)
			ck_assert(dt.busy[k] > 0 && dt.busy[k] <= 1);
	}
}
END_TEST

START_TEST(test_unit_matches_schedule)
{
	struct ipu_config	cfg;
	struct stage_cost	st[8];
	struct run_shape	shape;
	struct device_timing	dt;
	double			tb;
	int			i, r, k;

	memset(st, 0, sizeof st);
	for (k = 0; k < 8; k++)
		st[k].flops = 1;
	for (i = 0; i < ALL_KINDS; i++)
	for (r = 0; r <= 1; r++)
	for (tb = 1; tb <= 3; tb += 0.5) {
		build(all_kinds[i], 4, 8, true, r);
		costmodel_unit_config(&cfg, tb);
		run_shape_default(&shape, true);
		shape.synthetic = true;
		ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape,
		    &dt, NULL), 0);
		ck_assert_msg(fabs(dt.pipe * 1e6 -
		    schedule_unit_makespan(&sch, tb)) < 1e-6,
		    "%s tB=%g: cost model %g us, unit makespan %g",
		    schedule_name(all_kinds[i]), tb, dt.pipe * 1e6,
		    schedule_unit_makespan(&sch, tb));
	}
}
END_TEST

/* Reference 3.5: BERT-Large-like, 85 M parameters per stage on 4 IPUs. */
static void
bert_stages(struct stage_cost *st)
{
	int	k;

	memset(st, 0, 4 * sizeof *st);
	for (k = 0; k < 4; k++) {
		st[k].flops = 2 * 85e6 * 384;		/* per sample */
		st[k].act_bytes = 384 * 1024 * 2;	/* fp16 */
		st[k].params = 85e6;
	}
}

START_TEST(test_worked_example)
{
	static const struct {
		int			m, r;
		enum schedule_kind	kind;
		bool			recompute;
		double			ms;
	} want[] = {
		{ 8, 1, SCHEDULE_GROUPED, false, 140.9 },
		{ 8, 1, SCHEDULE_INTERLEAVED, false, 171.5 },
		{ 8, 1, SCHEDULE_PIPELINED, false, 140.7 },
		{ 8, 1, SCHEDULE_PIPELINED, true, 178.3 },
		{ 8, 1, SCHEDULE_SHARDED, false, 413.8 },
		{ 8, 4, SCHEDULE_GROUPED, false, 148.8 },
		{ 8, 4, SCHEDULE_PIPELINED, true, 186.3 },
		{ 10, 1, SCHEDULE_PIPELINED, false, 166.1 },
		{ 10, 4, SCHEDULE_PIPELINED, true, 220.1 },
		{ 32, 1, SCHEDULE_GROUPED, false, 446.4 },
		{ 32, 1, SCHEDULE_INTERLEAVED, false, 582.1 },
		{ 32, 4, SCHEDULE_GROUPED, false, 454.4 },
		{ 32, 4, SCHEDULE_PIPELINED, true, 592.1 },
		{ 32, 4, SCHEDULE_SHARDED, false, 1663.2 },
	};
	struct ipu_config	cfg;
	struct stage_cost	st[4];
	struct run_shape	shape;
	struct device_timing	dt;
	size_t			i;

	/* fp16 at eta 0.5, no layer overhead, fp16 gradients, parallel
	 * outer fragment, D = 1.  The reference charges a full copy in
	 * every step; the model charges only the sync when nothing crosses
	 * a link (B0, and the sharded F3), up to 0.8 % less. */
	ipu_config_default(&cfg);
	ck_assert_int_eq(ipu_config_set(&cfg, "peak_flops", "250e12", NULL,
	    0), 0);
	ck_assert_int_eq(ipu_config_set(&cfg, "efficiency", "0.5", NULL, 0),
	    0);
	cfg.layer_overhead = 0;
	cfg.grad_bytes = 2;
	cfg.outer_serial = false;
	bert_stages(st);
	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		build(want[i].kind, 4, want[i].m, true, want[i].recompute);
		run_shape_default(&shape, true);
		shape.micro_batch = 8;
		shape.replicas = want[i].r;
		shape.synthetic = true;
		ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape,
		    &dt, NULL), 0);
		ck_assert_msg(fabs(dt.update * 1e3 / want[i].ms - 1) < 0.01,
		    "%s M=%d R=%d: %.2f ms per update, reference %.1f",
		    schedule_name(want[i].kind), want[i].m, want[i].r,
		    dt.update * 1e3, want[i].ms);
		ck_assert_double_eq_tol(dt.forward[0] * 1e3, 4.18, 0.005);
	}
}
END_TEST

START_TEST(test_async_costs)
{
	struct ipu_config	cfg;
	struct stage_cost	st[4];
	struct run_shape	shape;
	struct device_timing	g, f;

	/* With uniform stages GPipe and 1F1B take about the same time,
	 * the copies' latency added to the unit makespan. */
	ipu_config_default(&cfg);
	bert_stages(st);
	run_shape_default(&shape, true);
	shape.micro_batch = 8;
	build(SCHEDULE_GPIPE, 4, 8, true, false);
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape, &g, NULL),
	    0);
	build(SCHEDULE_1F1B, 4, 8, true, false);
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape, &f, NULL),
	    0);
	ck_assert_double_gt(g.pipe, 11 * 3 * g.forward[0]);
	ck_assert_double_eq_tol(g.pipe / f.pipe, 1, 1e-3);
	ck_assert_double_eq(g.copy, 0);
}
END_TEST

START_TEST(ipu_settings_set_or_refused_with_the_valid_keys)
{
	struct ipu_config	cfg, def;
	char			err[1024];

	ipu_config_default(&cfg);
	def = cfg;
	ck_assert_int_eq(ipu_config_set(&cfg, "bogus", "1", err, sizeof err),
	    -1);
	ck_assert_ptr_nonnull(strstr(err, "bogus"));
	ck_assert_ptr_nonnull(strstr(err, "efficiency"));
	ck_assert_ptr_nonnull(strstr(err, "host_bw"));
	ck_assert_ptr_nonnull(strstr(err, "clock_hz"));
	ck_assert_int_eq(ipu_config_set(&cfg, "efficiency", "abc", err,
	    sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "positive finite number"));
	ck_assert_int_eq(ipu_config_set(&cfg, "efficiency", "", NULL, 0), -1);
	ck_assert_int_eq(ipu_config_set(&cfg, "efficiency", "0.5x", NULL, 0),
	    -1);
	ck_assert_int_eq(ipu_config_set(&cfg, "efficiency", "1.5", NULL, 0),
	    -1);
	ck_assert_int_eq(ipu_config_set(&cfg, "host_bw", "-1", NULL, 0), -1);
	ck_assert_int_eq(ipu_config_set(&cfg, "host_bw", "0", NULL, 0), -1);
	ck_assert_int_eq(ipu_config_set(&cfg, "host_bw", "nan", NULL, 0), -1);
	ck_assert_int_eq(ipu_config_set(&cfg, "host_bw", "inf", NULL, 0), -1);
	ck_assert_int_eq(ipu_config_set(&cfg, "host_bw", "1e999", NULL, 0),
	    -1);
	ck_assert_int_eq(ipu_config_set(&cfg, "offload_optimiser", "2", err,
	    sizeof err), -1);
	ck_assert(memcmp(&cfg, &def, sizeof cfg) == 0);
	ck_assert_int_eq(ipu_config_set(&cfg, "host_bw", "12.5e9", NULL, 0),
	    0);
	ck_assert_double_eq(cfg.host_bw, 12.5e9);
	ck_assert_int_eq(ipu_config_set(&cfg, "offload_optimiser", "on",
	    NULL, 0), 0);
	ck_assert(cfg.offload_optimiser);
	ck_assert_int_eq(ipu_config_parse(&cfg, "launch=1e-3", NULL, 0), 0);
	ck_assert_double_eq(cfg.launch, 1e-3);
	ck_assert_int_eq(ipu_config_parse(&cfg, "launch", err, sizeof err),
	    -1);
	ck_assert_ptr_nonnull(strstr(err, "key=value"));
	ck_assert_int_eq(ipu_config_parse(&cfg, "=3", NULL, 0), -1);
	/* Defaults of the brief and the reference. */
	ck_assert_double_eq(def.peak_flops, 62.5e12);
	ck_assert_double_eq(def.host_bw, 64e9);
	ck_assert_double_eq(def.link_bw, 32e9);
	ck_assert_double_eq(def.ring_alpha, 5e-6);
	ck_assert_double_eq(def.clock_hz, 1.33e9);
}
END_TEST

START_TEST(ipu_settings_print_with_units)
{
	struct ipu_config	 cfg;
	char			*buf = NULL;
	size_t			 len = 0;
	FILE			*f;

	ipu_config_default(&cfg);
	f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	ipu_config_print(&cfg, f, "  ");
	fclose(f);
	ck_assert_ptr_nonnull(strstr(buf, "  efficiency"));
	ck_assert_ptr_nonnull(strstr(buf, "6.25e+13"));
	ck_assert_ptr_nonnull(strstr(buf, "B/s"));
	ck_assert_ptr_nonnull(strstr(buf, "offload_optimiser"));
	free(buf);
}
END_TEST

START_TEST(test_costmodel_refuses)
{
	struct ipu_config	cfg;
	struct stage_cost	st;
	struct run_shape	shape;
	struct device_timing	dt;
	char			err[256];

	ipu_config_default(&cfg);
	tutorial_stage(&st);
	build(SCHEDULE_PIPELINED, 1, 1, false, false);
	tutorial_shape(&shape, 1, true);
	shape.training = true;
	ck_assert_int_eq(costmodel_check(&cfg, &sch, &st, &shape, err,
	    sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "inference"));
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, &st, &shape, &dt,
	    NULL), -1);
	tutorial_shape(&shape, 0, true);
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, &st, &shape, &dt,
	    NULL), -1);
	tutorial_shape(&shape, 1, true);
	shape.outputs = 2;
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, &st, &shape, &dt,
	    NULL), -1);
	shape.outputs = 0;
	st.flops = -1;
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, &st, &shape, &dt,
	    NULL), -1);
	st.flops = 1;
	cfg.host_bw = 0;
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, &st, &shape, &dt,
	    NULL), -1);
}
END_TEST

/* Read a whole file into a NUL-terminated buffer. */
static char *
slurp(const char *path, size_t *len)
{
	FILE	*f;
	char	*buf;
	long	 n;

	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, n, f), n);
	buf[n] = '\0';
	fclose(f);
	if (len != NULL)
		*len = n;
	return (buf);
}

/* Occurrences of @needle in @hay. */
static size_t
count_substr(const char *hay, const char *needle)
{
	size_t	n = 0;

	while ((hay = strstr(hay, needle)) != NULL) {
		n++;
		hay += strlen(needle);
	}
	return (n);
}

/* Parse one JSON value at @p; return the byte after it, NULL if malformed. */
static const char *
json_value(const char *p, int depth)
{
	while (isspace((unsigned char)*p))
		p++;
	if (depth > 64)
		return (NULL);
	if (*p == '{' || *p == '[') {
		char	close = *p == '{' ? '}' : ']';
		bool	obj = *p == '{';

		p++;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == close)
			return (p + 1);
		for (;;) {
			if (obj) {
				while (isspace((unsigned char)*p))
					p++;
				if (*p != '"' || (p = json_value(p, depth + 1))
				    == NULL)
					return (NULL);
				while (isspace((unsigned char)*p))
					p++;
				if (*p++ != ':')
					return (NULL);
			}
			if ((p = json_value(p, depth + 1)) == NULL)
				return (NULL);
			while (isspace((unsigned char)*p))
				p++;
			if (*p == close)
				return (p + 1);
			if (*p++ != ',')
				return (NULL);
		}
	}
	if (*p == '"') {
		for (p++; *p != '"'; p++) {
			if (*p == '\0' || (unsigned char)*p < 0x20)
				return (NULL);
			if (*p == '\\') {
				p++;
				if (strchr("\"\\/bfnrtu", *p) == NULL ||
				    *p == '\0')
					return (NULL);
			}
		}
		return (p + 1);
	}
	if (strncmp(p, "true", 4) == 0 || strncmp(p, "null", 4) == 0)
		return (p + 4);
	if (strncmp(p, "false", 5) == 0)
		return (p + 5);
	if (*p == '-' || isdigit((unsigned char)*p)) {
		char	*end;

		strtod(p, &end);
		return (end > p ? end : NULL);
	}
	return (NULL);
}

/* Whether @s is exactly one JSON value, whitespace around. */
static bool
json_valid(const char *s)
{
	const char	*end = json_value(s, 0);

	if (end == NULL)
		return (false);
	while (isspace((unsigned char)*end))
		end++;
	return (*end == '\0');
}

START_TEST(test_trace_costmodel)
{
	struct ipu_config	cfg;
	struct stage_cost	st[2];
	struct run_shape	shape;
	struct device_timing	dt;
	char			path[128], err[256], *json, *svg;
	double			lane_end[3];
	size_t			i, len;
	int			lane;

	/* N=2, M=3, R=2, D=2, real data, the default Final output. */
	ipu_config_default(&cfg);
	build(SCHEDULE_PIPELINED, 2, 3, true, false);
	tutorial_stage(&st[0]);
	tutorial_stage(&st[1]);
	st[0].act_bytes = st[1].act_bytes = 1024;
	run_shape_default(&shape, true);
	shape.micro_batch = 4;
	shape.replicas = 2;
	shape.device_iterations = 2;
	tl = trace_new(2, 0);
	ck_assert_ptr_nonnull(tl);
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape, &dt, tl),
	    0);
	/* Per update: 12 ops, 5 steps x 2 copies, 3 in, 1 out, 2 AR, 2 WU;
	 * twice, plus the launch on the host lane. */
	ck_assert_uint_eq(tl->nspans, 2 * (12 + 10 + 3 + 1 + 2 + 2) + 1);
	ck_assert_uint_eq(tl->nmarks, 2 * (sch.nslots + 1));
	ck_assert_uint_eq(tl->dropped, 0);
	ck_assert_double_eq_tol(trace_end(tl), dt.call, 1e-12);
	ck_assert_double_eq(tl->clock_hz, cfg.clock_hz);
	/* Spans of one lane never overlap. */
	for (lane = -1; lane < 2; lane++) {
		lane_end[lane + 1] = 0;
		for (i = 0; i < tl->nspans; i++) {
			if (tl->spans[i].lane != lane)
				continue;
			ck_assert_double_ge(tl->spans[i].start + 1e-15,
			    lane_end[lane + 1]);
			lane_end[lane + 1] = tl->spans[i].end;
		}
	}

	tmp_path(path, sizeof path, "t.json");
	ck_assert_int_eq(trace_write_json(tl, path, err, sizeof err), 0);
	json = slurp(path, &len);
	ck_assert(json[0] == '{' || json[0] == '[');
	ck_assert_msg(json_valid(json), "trace JSON is malformed");
	ck_assert_uint_eq(count_substr(json, "\"ph\":\"X\""), tl->nspans);
	ck_assert_uint_eq(count_substr(json, "\"thread_name\""), 3);
	ck_assert_ptr_nonnull(strstr(json, "\"IPU 1\""));
	ck_assert_ptr_nonnull(strstr(json, "\"host\""));
	ck_assert_ptr_nonnull(strstr(json, "\"cat\":\"all-reduce\""));
	free(json);

	tmp_path(path, sizeof path, "t.svg");
	ck_assert_int_eq(trace_write_svg(tl, path, err, sizeof err), 0);
	svg = slurp(path, &len);
	ck_assert(strncmp(svg, "<?xml", 5) == 0 || strncmp(svg, "<svg", 4) ==
	    0);
	ck_assert_ptr_nonnull(strstr(svg, "<svg"));
	ck_assert(len > 7 && strcmp(svg + len - 7, "</svg>\n") == 0);
	/* A block per span, plus lane bands and legend boxes. */
	ck_assert_uint_ge(count_substr(svg, "<rect"), tl->nspans + 3);
	ck_assert_uint_eq(count_substr(svg, "<title>"), tl->nspans);
	ck_assert_ptr_nonnull(strstr(svg, ">IPU 0<"));
	ck_assert_ptr_nonnull(strstr(svg, ">host<"));
	ck_assert_ptr_nonnull(strstr(svg, "cycles"));
	ck_assert_ptr_nonnull(strstr(svg, "#e53935"));	/* backward red */
	ck_assert_uint_eq(count_substr(svg, "<svg"), 1);
	ck_assert_uint_eq(count_substr(svg, "<g"), count_substr(svg, "</g>"));
	free(svg);
}
END_TEST

START_TEST(test_trace_unit_json_count)
{
	struct ipu_config	cfg;
	struct stage_cost	st[4];
	struct run_shape	shape;
	struct device_timing	dt;
	char			path[128], err[256], *json;
	int			k;

	/* Unit costs: only the F and B blocks take time. */
	build(SCHEDULE_GROUPED, 4, 8, true, false);
	costmodel_unit_config(&cfg, 2);
	memset(st, 0, sizeof st);
	for (k = 0; k < 4; k++)
		st[k].flops = 1;
	run_shape_default(&shape, true);
	shape.synthetic = true;
	tl = trace_new(4, 0);
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, st, &shape, &dt, tl),
	    0);
	ck_assert_uint_eq(tl->nspans, 64);
	ck_assert_double_eq_tol(trace_end(tl) * 1e6, 33, 1e-6);
	tmp_path(path, sizeof path, "t.json");
	ck_assert_int_eq(trace_write_json(tl, path, err, sizeof err), 0);
	json = slurp(path, NULL);
	ck_assert(json_valid(json));
	ck_assert_uint_eq(count_substr(json, "\"ph\":\"X\""), 64);
	ck_assert_ptr_nonnull(strstr(json, "\"name\":\"B7\""));
	free(json);
}
END_TEST

START_TEST(test_trace_escaping)
{
	char	path[128], err[256], *json, *svg;

	tl = trace_new(1, 0);
	ck_assert_ptr_nonnull(tl);
	ck_assert_int_eq(trace_add(tl, 0, TRACE_FORWARD, 0, 0, 0, 1e-3,
	    "a\"b<c>&\\d\n\xff"), 0);
	ck_assert_int_eq(trace_add(tl, TRACE_LANE_HOST, TRACE_HOST_WAIT, -1,
	    -1, 0, 2e-3, "wait"), 0);
	tmp_path(path, sizeof path, "t.json");
	ck_assert_int_eq(trace_write_json(tl, path, err, sizeof err), 0);
	json = slurp(path, NULL);
	ck_assert(json_valid(json));
	ck_assert_ptr_nonnull(strstr(json, "a\\\"b<c>&\\\\d??"));
	ck_assert_ptr_nonnull(strstr(json, "\"tid\":1,\"ts\":0.000,"
	    "\"dur\":2000.000"));
	free(json);
	tmp_path(path, sizeof path, "t.svg");
	ck_assert_int_eq(trace_write_svg(tl, path, err, sizeof err), 0);
	svg = slurp(path, NULL);
	ck_assert_ptr_nonnull(strstr(svg, "a&quot;b&lt;c&gt;&amp;\\d??"));
	ck_assert_ptr_null(strstr(svg, "<c>"));
	free(svg);
}
END_TEST

START_TEST(test_trace_bounds)
{
	struct trace_span	sp;
	char			err[256];
	int			i;

	ck_assert_ptr_null(trace_new(0, 0));
	ck_assert_ptr_null(trace_new(TRACE_MAX_IPUS + 1, 0));
	tl = trace_new(2, 10);
	ck_assert_ptr_nonnull(tl);
	ck_assert_int_eq(trace_add(tl, 2, TRACE_FORWARD, 0, 0, 0, 1, NULL),
	    -1);
	ck_assert_int_eq(trace_add(tl, -2, TRACE_FORWARD, 0, 0, 0, 1, NULL),
	    -1);
	ck_assert_int_eq(trace_add(tl, 0, TRACE_FORWARD, 0, 0, 1, 0.5, NULL),
	    -1);
	ck_assert_int_eq(trace_add(tl, 0, TRACE_FORWARD, 0, 0, NAN, 1, NULL),
	    -1);
	ck_assert_int_eq(trace_add(tl, 0, TRACE_NKINDS, 0, 0, 0, 1, NULL), -1);
	ck_assert_uint_eq(tl->nspans, 0);
	for (i = 0; i < 20; i++)
		trace_add(tl, i % 2, TRACE_BACKWARD, i, 0, i, i + 1, NULL);
	ck_assert_uint_eq(tl->nspans, 10);
	ck_assert_uint_eq(tl->dropped, 10);
	for (i = 0; i < 20; i++)
		trace_mark(tl, i);
	ck_assert_uint_eq(tl->nmarks, 10);
	/* A long label is cut, not overrun. */
	memset(&sp, 0, sizeof sp);
	memset(sp.label, 'x', sizeof sp.label);
	trace_clear(tl);
	ck_assert_int_eq(trace_append(tl, &sp), 0);
	ck_assert_uint_eq(strlen(tl->spans[0].label), TRACE_LABEL_MAX - 1);
	/* Unwritable paths give a reason. */
	ck_assert_int_eq(trace_write_json(tl, "/nonexistent/dir/t.json", err,
	    sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/dir/t.json"));
	ck_assert_int_eq(trace_write_svg(tl, "/nonexistent/dir/t.svg", err,
	    sizeof err), -1);
	ck_assert_ptr_nonnull(strstr(err, "cannot"));
	trace_free(NULL);
}
END_TEST

START_TEST(test_trace_capped_costmodel)
{
	struct ipu_config	cfg;
	struct stage_cost	st;
	struct run_shape	shape;
	struct device_timing	dt;

	/* A long run fills the cap and stops instead of growing. */
	ipu_config_default(&cfg);
	tutorial_stage(&st);
	build(SCHEDULE_PIPELINED, 1, 1, false, false);
	tutorial_shape(&shape, 1, false);
	shape.device_iterations = 100000;
	tl = trace_new(1, 1000);
	ck_assert_int_eq(costmodel_evaluate(&cfg, &sch, &st, &shape, &dt, tl),
	    0);
	ck_assert_uint_eq(tl->nspans, 1000);
	ck_assert_uint_gt(tl->dropped, 0);
	ck_assert_uint_lt(tl->dropped, 10);
}
END_TEST

/* Build the suite, one case per concern. */
static Suite *
schedule_suite(void)
{
	Suite	*s = suite_create("schedule");
	TCase	*tc;

	tc = tcase_create("schedules");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, schedule_names_parse_and_print_back);
	tcase_add_test(tc, test_totals_n4_m8);
	tcase_add_test(tc, test_totals_other_m);
	tcase_add_test(tc, test_peak_stash_n4_m8);
	tcase_add_test(tc, test_first_backward);
	tcase_add_test(tc, test_table_pipelined);
	tcase_add_test(tc, test_table_grouped);
	tcase_add_test(tc, test_table_interleaved_1f1b);
	tcase_add_test(tc, test_table_pipelined_m10);
	tcase_add_test(tc, test_sharded_table);
	tcase_add_test(tc, recomputation_slots_match_the_reference);
	tcase_add_test(tc, inference_schedules_have_forward_slots_only);
	tcase_add_test(tc, test_valid_order_all);
	tcase_add_test(tc, invalid_schedules_refused_with_advice);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("costmodel");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, cost_model_matches_the_tutorial_calibration);
	tcase_add_test(tc, test_allreduce_and_update);
	tcase_add_test(tc, test_monotonic_in_m);
	tcase_add_test(tc, test_unit_matches_schedule);
	tcase_add_test(tc, test_worked_example);
	tcase_add_test(tc, test_async_costs);
	tcase_add_test(tc, ipu_settings_set_or_refused_with_the_valid_keys);
	tcase_add_test(tc, ipu_settings_print_with_units);
	tcase_add_test(tc, test_costmodel_refuses);
	suite_add_tcase(s, tc);

	tc = tcase_create("trace");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_trace_costmodel);
	tcase_add_test(tc, test_trace_unit_json_count);
	tcase_add_test(tc, test_trace_escaping);
	tcase_add_test(tc, test_trace_bounds);
	tcase_add_test(tc, test_trace_capped_costmodel);
	suite_add_tcase(s, tc);

	return (s);
}

/* Run every case; CK_VERBOSITY and CK_FORK pick the mode. */
int
main(void)
{
	return (run_suite(schedule_suite()));
}
