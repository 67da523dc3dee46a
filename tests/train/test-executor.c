/* SPDX-License-Identifier: MIT */
/*
 * test-executor: the simulated IPU system computes the same training
 * whatever the schedule, replication or micro-batch split, averages
 * replicas with a real ring all-reduce, shapes outputs as poptorch does,
 * and refuses what it cannot run with the reason.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "executor.h"
#include "outputs.h"
#include "runner.h"

/* Deterministic step data: n rows of 1x28x28 and labels. */
static void make_step(size_t n, float **data, int32_t **labels)
{
	uint64_t x = 12345;

	*data = malloc(n * 784 * sizeof(float));
	*labels = malloc(n * sizeof(int32_t));
	ck_assert_ptr_nonnull(*data);
	ck_assert_ptr_nonnull(*labels);
	for (size_t i = 0; i < n; i++) {
		(*labels)[i] = (int32_t)(i * 7 % 10);
		for (size_t j = 0; j < 784; j++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			/* A class-dependent pattern plus noise: learnable. */
			(*data)[i * 784 + j] =
			    ((j % 10) == (size_t)(*labels)[i] ? 1.0f : 0.0f) +
			    (float)(x >> 40) / (1 << 24) - 0.5f;
		}
	}
}

/* Train one host call with @o; return a copy of the weights. */
static float *train_once(const struct executor_options *o, size_t *nparams,
			 int calls)
{
	char err[256];
	struct executor *x = executor_new(o, true, err, sizeof(err));
	struct step_outputs out;
	size_t rows;
	float *data, *w;
	int32_t *labels;

	ck_assert_msg(x != NULL, "%s", err);
	rows = executor_step_rows(x);
	make_step(rows, &data, &labels);
	for (int c = 0; c < calls; c++)
		ck_assert_msg(executor_run(x, data, labels, rows, &out, err,
					   sizeof(err)) == 0, "%s", err);
	*nparams = executor_model(x)->nparams;
	w = malloc(*nparams * sizeof(float));
	ck_assert_ptr_nonnull(w);
	memcpy(w, executor_model(x)->params, *nparams * sizeof(float));
	free(data);
	free(labels);
	executor_free(x);
	return w;
}

/* Largest |a-b| relative to the largest |a|. */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
	double d = 0, m = 1e-12;

	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		m = fmax(m, fabs((double)a[i]));
	}
	return d / m;
}

/* The tutorial's 4 pipelined IPUs on one small training step: B 4, M 7
 * (the least the schedule takes), D 1; @o is left for further use. */
static struct executor *small_executor(struct executor_options *o)
{
	char err[256];
	struct executor *x;

	executor_options_default(o);
	o->device_iterations = 1;
	o->gradient_accumulation = 7;
	o->batch_size = 4;
	x = executor_new(o, true, err, sizeof(err));
	ck_assert_msg(x != NULL, "%s", err);
	return x;
}

/* The weights after a step differ from the initial ones (so the
 * comparisons below are about something). */
START_TEST(training_changes_weights)
{
	struct executor_options o;
	struct executor *x;
	size_t n;
	float *after;

	x = small_executor(&o);
	after = train_once(&o, &n, 1);
	ck_assert_double_gt(max_rel_diff(executor_model(x)->params, after, n),
			    1e-4);
	free(after);
	executor_free(x);
}
END_TEST

/* executor_set_optimiser() between host calls acts as poptorch's
 * setOptimizer(): lr 0 leaves the weights alone (AdamW's decay is lr x
 * wd), and a new lr trains exactly as an executor made with it. */
START_TEST(set_optimiser_between_calls)
{
	struct executor_options o;
	struct lr_point zero = { .lr = 0.0f }, fast = { .lr = 0.003f };
	struct step_outputs out;
	struct executor *x;
	char err[256];
	size_t rows, n;
	float *data, *before, *want;
	int32_t *labels;

	x = small_executor(&o);
	rows = executor_step_rows(x);
	n = executor_model(x)->nparams;
	make_step(rows, &data, &labels);
	before = malloc(n * sizeof(float));
	ck_assert_ptr_nonnull(before);
	memcpy(before, executor_model(x)->params, n * sizeof(float));

	executor_set_optimiser(x, &zero);
	ck_assert_int_eq(executor_run(x, data, labels, rows, &out, err,
				      sizeof(err)), 0);
	ck_assert(memcmp(before, executor_model(x)->params,
			 n * sizeof(float)) == 0);

	/* AdamW's first real step after a zero one: compare with a fresh
	 * executor made with lr 0.003 that also took two steps, the first
	 * at lr 0. */
	executor_set_optimiser(x, &fast);
	ck_assert_int_eq(executor_run(x, data, labels, rows, &out, err,
				      sizeof(err)), 0);
	ck_assert_double_gt(max_rel_diff(before, executor_model(x)->params,
					 n), 1e-4);
	o.lr = 0.003f;
	{
		struct executor *y = executor_new(&o, true, err, sizeof(err));

		ck_assert_msg(y != NULL, "%s", err);
		executor_set_optimiser(y, &zero);
		ck_assert_int_eq(executor_run(y, data, labels, rows, &out,
					      err, sizeof(err)), 0);
		executor_set_optimiser(y, &fast);
		ck_assert_int_eq(executor_run(y, data, labels, rows, &out,
					      err, sizeof(err)), 0);
		want = executor_model(y)->params;
		ck_assert(memcmp(want, executor_model(x)->params,
				 n * sizeof(float)) == 0);
		executor_free(y);
	}
	/* OneCycleLR's momentum reaches AdamW's beta1: two steps at beta1
	 * 0.5 end elsewhere than two at the default 0.9 (one would not
	 * show it: bias correction makes AdamW's first step independent of
	 * beta1). */
	{
		struct lr_point fast5 = { .lr = 0.003f, .has_momentum = true,
					  .momentum = 0.5f };
		struct executor *y = executor_new(&o, true, err, sizeof(err));
		struct executor *z = executor_new(&o, true, err, sizeof(err));

		ck_assert(y != NULL && z != NULL);
		executor_set_optimiser(z, &fast5);
		for (int c = 0; c < 2; c++) {
			ck_assert_int_eq(executor_run(y, data, labels, rows,
						      &out, err, sizeof(err)), 0);
			ck_assert_int_eq(executor_run(z, data, labels, rows,
						      &out, err, sizeof(err)), 0);
		}
		ck_assert_double_gt(max_rel_diff(executor_model(y)->params,
						 executor_model(z)->params, n),
				    1e-4);
		executor_free(y);
		executor_free(z);
	}
	free(before);
	free(data);
	free(labels);
	executor_free(x);
}
END_TEST

/* Pipelined and sharded (and every other schedule) give the same
 * weights after a step: a schedule only reorders the same ops. */
START_TEST(schedules_train_the_same)
{
	static const enum schedule_kind kinds[] = {
		SCHEDULE_SHARDED, SCHEDULE_GROUPED, SCHEDULE_INTERLEAVED,
		SCHEDULE_GPIPE, SCHEDULE_1F1B,
	};
	struct executor_options o;
	size_t n, n2;
	float *ref, *w;

	executor_options_default(&o);
	o.batch_size = 4;
	o.gradient_accumulation = 8;    /* valid for all over 4 IPUs */
	o.device_iterations = 2;
	ref = train_once(&o, &n, 1);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		o.schedule = kinds[k];
		w = train_once(&o, &n2, 1);
		ck_assert_uint_eq(n, n2);
		ck_assert_msg(max_rel_diff(ref, w, n) < 1e-6,
			      "%s differs from pipelined by %g",
			      schedule_name(kinds[k]), max_rel_diff(ref, w, n));
		free(w);
	}
	/* Recomputation recomputes, it does not change the result. */
	o.schedule = SCHEDULE_PIPELINED;
	o.recompute = false;
	w = train_once(&o, &n2, 1);
	ck_assert_double_lt(max_rel_diff(ref, w, n), 1e-6);
	free(w);
	/* Neither does another stage map. */
	o.nstages = 2;
	o.stage_first_block[0] = 0;
	o.stage_first_block[1] = 2;
	o.gradient_accumulation = 8;
	w = train_once(&o, &n2, 1);
	ck_assert_double_lt(max_rel_diff(ref, w, n), 1e-6);
	free(w);
	free(ref);
}
END_TEST

/* R=2 with B=20 matches R=1 with B=40: the all-reduce averages the
 * replicas' mean gradients into the mean over the global batch. */
START_TEST(replicas_match_a_bigger_batch)
{
	struct executor_options o;
	size_t n;
	float *one, *two;

	executor_options_default(&o);
	o.gradient_accumulation = 7;
	o.device_iterations = 2;
	o.optimiser = OPTIMISER_SGD;
	o.lr = 0.05f;
	o.batch_size = 40;
	o.replicas = 1;
	one = train_once(&o, &n, 2);
	o.batch_size = 20;
	o.replicas = 2;
	two = train_once(&o, &n, 2);
	ck_assert_msg(max_rel_diff(one, two, n) < 1e-5, "differ by %g",
		      max_rel_diff(one, two, n));
	free(one);
	free(two);

	/* The same holds for AdamW, whose update is not linear. */
	o.optimiser = OPTIMISER_ADAMW;
	o.lr = 0.001f;
	o.batch_size = 40;
	o.replicas = 1;
	one = train_once(&o, &n, 1);
	o.batch_size = 10;
	o.replicas = 4;
	two = train_once(&o, &n, 1);
	ck_assert_msg(max_rel_diff(one, two, n) < 1e-4, "differ by %g",
		      max_rel_diff(one, two, n));
	free(one);
	free(two);
}
END_TEST

/* Gradient accumulation averages: M=2 with B=20 equals M=1 with B=40
 * when both make one weight update of the same 40 rows. */
START_TEST(accumulation_matches_a_bigger_batch)
{
	struct executor_options o;
	size_t n;
	float *one, *two;

	executor_options_default(&o);
	o.nstages = 1;
	o.stage_first_block[0] = 0;
	o.schedule = SCHEDULE_SHARDED;
	o.optimiser = OPTIMISER_SGD;
	o.lr = 0.05f;
	o.device_iterations = 3;
	o.gradient_accumulation = 1;
	o.batch_size = 40;
	one = train_once(&o, &n, 1);
	o.gradient_accumulation = 2;
	o.batch_size = 20;
	two = train_once(&o, &n, 1);
	ck_assert_msg(max_rel_diff(one, two, n) < 1e-5, "differ by %g",
		      max_rel_diff(one, two, n));
	free(one);
	free(two);
}
END_TEST

/* The ring all-reduce leaves the element-wise mean in every buffer. */
START_TEST(ring_allreduce_is_the_mean)
{
	for (int r = 1; r <= 6; r++)
		for (size_t n = 1; n <= 23; n += 11) {
			float *b[6], mean;

			for (int i = 0; i < r; i++) {
				b[i] = malloc(n * sizeof(float));
				for (size_t j = 0; j < n; j++)
					b[i][j] = (float)(i * 100 + j);
			}
			ring_allreduce_mean(b, r, n);
			for (size_t j = 0; j < n; j++) {
				mean = (float)((r - 1) * 50.0 + j);
				for (int i = 0; i < r; i++)
					ck_assert_float_eq_tol(b[i][j], mean,
							       1e-3);
			}
			for (int i = 0; i < r; i++)
				free(b[i]);
		}
}
END_TEST

/* Training on a learnable pattern lowers the loss. */
START_TEST(training_lowers_the_loss)
{
	struct executor_options o;
	struct step_outputs out;
	char err[256];
	struct executor *x;
	float *data, first = 0, last = 0;
	int32_t *labels;
	size_t rows;

	executor_options_default(&o);
	o.batch_size = 8;
	o.gradient_accumulation = 7;
	o.device_iterations = 1;
	o.lr = 0.003f;
	x = executor_new(&o, true, err, sizeof(err));
	ck_assert_msg(x != NULL, "%s", err);
	rows = executor_step_rows(x);
	make_step(rows, &data, &labels);
	for (int c = 0; c < 30; c++) {
		ck_assert(executor_run(x, data, labels, rows, &out, err,
				       sizeof(err)) == 0);
		if (c == 0)
			first = out.loss_sum / out.rows;
		last = out.loss_sum / out.rows;
	}
	ck_assert_msg(last < 0.5 * first, "loss %g -> %g", first, last);
	free(data);
	free(labels);
	executor_free(x);
}
END_TEST

/* poptorch's output shapes for the MNIST tutorial: B 40, DI 10, GA 10. */
START_TEST(output_modes_have_poptorchs_shapes)
{
	struct executor_options o;
	struct step_outputs out;
	struct host_outputs h = { 0 };
	struct output_spec spec;
	char err[256];
	struct executor *x;
	float *data;
	int32_t *labels;
	size_t rows;

	executor_options_default(&o);
	o.batch_size = 4;
	o.gradient_accumulation = 7;
	o.device_iterations = 4;
	o.replicas = 2;
	x = executor_new(&o, true, err, sizeof(err));
	ck_assert_msg(x != NULL, "%s", err);
	rows = executor_step_rows(x);
	make_step(rows, &data, &labels);
	ck_assert(executor_run(x, data, labels, rows, &out, err,
			       sizeof(err)) == 0);
	ck_assert_uint_eq(out.nmicro, 4 * 7 * 2);

	ck_assert(output_mode_parse("all", &spec, err, sizeof(err)) == 0);
	ck_assert(outputs_select(&spec, &out, labels, 4, 7, 2, 4, 10, &h) ==
		  0);
	ck_assert_uint_eq(h.b_dim, 56);
	ck_assert_uint_eq(h.pred_rows, rows);

	/* Final: the last micro-batch of each replica = the last R*B rows. */
	ck_assert(output_mode_parse("final", &spec, err, sizeof(err)) == 0);
	ck_assert(outputs_select(&spec, &out, labels, 4, 7, 2, 4, 10, &h) ==
		  0);
	ck_assert_uint_eq(h.b_dim, 2);
	ck_assert_uint_eq(h.pred_rows, 8);
	ck_assert_int_eq(h.loss_is_scalar, 0);
	ck_assert_mem_eq(h.pred_labels, labels + rows - 8, 8 * sizeof(int));
	ck_assert_mem_eq(h.preds, out.logits + (rows - 8) * 10,
			 80 * sizeof(float));

	/* EveryN(2): iterations 1 and 3, all of their GA and replicas. */
	ck_assert(output_mode_parse("every-2", &spec, err, sizeof(err)) == 0);
	ck_assert(output_mode_check(&spec, 4, err, sizeof(err)) == 0);
	ck_assert(outputs_select(&spec, &out, labels, 4, 7, 2, 4, 10, &h) ==
		  0);
	ck_assert_uint_eq(h.b_dim, 28);
	ck_assert_float_eq(h.loss[0], out.losses[14]);
	ck_assert_float_eq(h.loss[14], out.losses[42]);

	/* Sum: one per replica over DI and GA. */
	ck_assert(output_mode_parse("sum", &spec, err, sizeof(err)) == 0);
	ck_assert(outputs_select(&spec, &out, labels, 4, 7, 2, 4, 10, &h) ==
		  0);
	ck_assert_uint_eq(h.b_dim, 2);
	{
		double s = 0;

		for (size_t i = 1; i < out.nmicro; i += 2)
			s += out.losses[i];
		ck_assert_double_eq_tol(h.loss[1], s, 1e-3);
	}
	host_outputs_free(&h);

	/* A single replica's Final loss is a scalar, as in the tutorial. */
	spec.mode = OUTPUT_FINAL;
	ck_assert(outputs_select(&spec, &out, labels, 4, 7, 1, 8, 10, &h) ==
		  0);
	ck_assert_int_eq(h.loss_is_scalar, 1);
	host_outputs_free(&h);

	ck_assert(output_mode_parse("every-3", &spec, err, sizeof(err)) == 0);
	ck_assert(output_mode_check(&spec, 4, err, sizeof(err)) < 0);
	ck_assert_ptr_nonnull(strstr(err, "divide"));
	ck_assert(output_mode_parse("every-0", &spec, err, sizeof(err)) < 0);
	ck_assert(output_mode_parse("most", &spec, err, sizeof(err)) < 0);
	free(data);
	free(labels);
	executor_free(x);
}
END_TEST

/* What cannot run is refused with the reason. */
START_TEST(refusals_say_why)
{
	struct executor_options o;
	struct step_outputs out;
	char err[256];
	struct executor *x;
	float *data;
	int32_t *labels;
	size_t rows;

	executor_options_default(&o);
	o.gradient_accumulation = 4;    /* pipelined over 4 needs 7 */
	ck_assert_ptr_null(executor_new(&o, true, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "7"));
	o.gradient_accumulation = 10;
	o.schedule = SCHEDULE_GROUPED;  /* needs a multiple of 8 */
	ck_assert_ptr_null(executor_new(&o, true, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "multiple"));
	o.schedule = SCHEDULE_PIPELINED;
	o.batch_size = 0;
	ck_assert_ptr_null(executor_new(&o, true, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "batch size"));

	ck_assert_int_lt(executor_stages_parse(&o, "B2,B1,B3,B4", err,
					       sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "B1+B2"));
	ck_assert_int_lt(executor_stages_parse(&o, "B1,B2,B3", err,
					       sizeof(err)), 0);
	ck_assert_int_eq(executor_stages_parse(&o, "B1+B2,B3+B4", err,
					       sizeof(err)), 0);
	ck_assert_int_eq(o.nstages, 2);

	/* A label the model cannot have refuses the step, naming the row. */
	executor_options_default(&o);
	o.batch_size = 2;
	o.gradient_accumulation = 7;
	o.device_iterations = 1;
	x = executor_new(&o, true, err, sizeof(err));
	ck_assert_msg(x != NULL, "%s", err);
	rows = executor_step_rows(x);
	make_step(rows, &data, &labels);
	labels[5] = 10;
	ck_assert_int_lt(executor_run(x, data, labels, rows, &out, err,
				      sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "row 5"));
	/* A short training step is refused too. */
	labels[5] = 1;
	ck_assert_int_lt(executor_run(x, data, labels, rows - 1, &out, err,
				      sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, "exactly"));
	free(data);
	free(labels);
	executor_free(x);
}
END_TEST

/* Inference takes a short last step and evaluates every row. */
START_TEST(inference_takes_short_steps)
{
	struct executor_options o;
	struct step_outputs out;
	char err[256];
	struct executor *x;
	float *data;
	int32_t *labels;

	executor_options_default(&o);
	o.batch_size = 8;
	o.gradient_accumulation = 1;
	o.device_iterations = 10;
	x = executor_new(&o, false, err, sizeof(err));
	ck_assert_msg(x != NULL, "%s", err);
	make_step(80, &data, &labels);
	ck_assert(executor_run(x, data, labels, 37, &out, err,
			       sizeof(err)) == 0);
	ck_assert_uint_eq(out.rows, 37);
	ck_assert_uint_eq(out.nmicro, 5);
	ck_assert_int_eq(out.micro_rows[4], 5);
	free(data);
	free(labels);
	executor_free(x);
}
END_TEST

static Suite *executor_suite(void)
{
	Suite *s = suite_create("executor");
	TCase *tc = tcase_create("executor");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, training_changes_weights);
	tcase_add_test(tc, set_optimiser_between_calls);
	tcase_add_test(tc, schedules_train_the_same);
	tcase_add_test(tc, replicas_match_a_bigger_batch);
	tcase_add_test(tc, accumulation_matches_a_bigger_batch);
	tcase_add_test(tc, ring_allreduce_is_the_mean);
	tcase_add_test(tc, training_lowers_the_loss);
	tcase_add_test(tc, output_modes_have_poptorchs_shapes);
	tcase_add_test(tc, refusals_say_why);
	tcase_add_test(tc, inference_takes_short_steps);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(executor_suite());
}
