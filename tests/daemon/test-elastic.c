/* SPDX-License-Identifier: MIT */
/*
 * Elastic resume on the real infeedd (issue 26): the processes of one job,
 * each a raw connection, take steps of an epoch under one process count,
 * and new connections finish it under another with
 * LoaderOptions.start_epoch_stages (docs/protocol.md, "Elastic resume").
 *
 * Checked: every step a connection gets is the sampler's for its options
 * and stages (tests/test-sampler.c checks the sampler against a model of
 * the lists); over the epoch, no index comes twice and the indices
 * delivered are the epoch's N less exactly the documented drop_last
 * remainders; Attached.start_epoch_steps and start_epoch_last_step_rows
 * are what the epoch's rest delivers; the next epoch is the ordinary one
 * of the new process count; start_step counts steps of the last stage;
 * bad stages are refused with a message naming the stage; an Attach
 * without stages is as before.
 */

#include <sys/mman.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "infeed-limits.h"
#include "sampler.h"

#define EL_EPOCH	2	/* the elastic epoch: not the first */
#define EL_SEED		7
#define EL_DI		2	/* device iterations: CBS = 2 * batch */
#define EL_MAX_PHASES	4

/* A job's options: those every process of every phase shares. */
struct el_job {
	bool	shuffle;
	bool	drop_last;
};

/* One process of the job: a raw connection and its ring, mapped. */
struct el_proc {
	int		 fd;
	struct wire_in	 in;
	const uint8_t	*ring;
	uint64_t	 ring_bytes;
	uint64_t	 slot_bytes;
	uint64_t	 indices_offset;
	uint64_t	 cbs;
	uint64_t	 steps_per_epoch;
	uint64_t	 start_epoch_steps;
	uint64_t	 start_epoch_last_step_rows;
	struct sampler	 oracle;	/* the same options, for its steps */
};

/* One phase of the job: P processes of a batch, for some steps. */
struct el_phase {
	uint32_t	process_count;
	uint32_t	batch_size;
	uint64_t	steps;		/* each process's; 0: the rest */
};

/* What an Attach asks for, beyond the job's options. */
struct el_attach {
	uint32_t			 process_id;
	uint32_t			 process_count;
	uint32_t			 batch_size;
	uint64_t			 start_step;
	bool				 indefinitely;
	bool				 early_preload;
	const struct sampler_stage	*stages;
	size_t				 nstages;
};

/* Send an Attach to "raw" with @a's options; return the reply frame. */
static Infeed__Frame *
el_attach_reply(struct el_proc *pr, const struct el_job *job,
    const struct el_attach *a)
{
	Infeed__Frame		 f = INFEED__FRAME__INIT;
	Infeed__Attach		 at = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	 o = INFEED__LOADER_OPTIONS__INIT;
	Infeed__ElasticStage	 st[INFEED_MAX_ELASTIC_STAGES + 1];
	Infeed__ElasticStage	*stp[INFEED_MAX_ELASTIC_STAGES + 1];
	Infeed__Frame		*r;
	size_t			 i;

	ck_assert_uint_le(a->nstages, INFEED_MAX_ELASTIC_STAGES + 1);
	pr->fd = raw_connect();
	wire_in_init(&pr->in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(pr->fd, &pr->in, WIRE_PROTOCOL_VERSION);
	o.has_batch_size = o.has_device_iterations = 1;
	o.batch_size = a->batch_size;
	o.device_iterations = EL_DI;
	o.has_shuffle = o.has_seed = o.has_drop_last = 1;
	o.shuffle = job->shuffle;
	o.seed = EL_SEED;
	o.drop_last = job->drop_last;
	o.has_buffer_size = 1;
	o.buffer_size = 2;
	o.has_load_indefinitely = o.has_early_preload = 1;
	o.load_indefinitely = a->indefinitely;
	o.early_preload = a->early_preload;
	o.has_distributed_process_id = o.has_distributed_process_count = 1;
	o.distributed_process_id = a->process_id;
	o.distributed_process_count = a->process_count;
	o.has_start_epoch = o.has_start_step = 1;
	o.start_epoch = EL_EPOCH;
	o.start_step = a->start_step;
	for (i = 0; i < a->nstages; i++) {
		infeed__elastic_stage__init(&st[i]);
		st[i].process_count = a->stages[i].process_count;
		st[i].combined_batch_size = a->stages[i].cbs;
		st[i].steps_done = a->stages[i].steps_done;
		stp[i] = &st[i];
	}
	o.n_start_epoch_stages = a->nstages;
	o.start_epoch_stages = stp;
	at.dataset = (char *)"raw";
	at.options = &o;
	f.msg_case = INFEED__FRAME__MSG_ATTACH;
	f.attach = &at;
	raw_send(pr->fd, &f);
	r = raw_recv(pr->fd, &pr->in);
	ck_assert_msg(r != NULL, "the daemon closed the connection at Attach");
	return (r);
}

/* The sampler the daemon should use for @a: the test's oracle. */
static void
el_oracle(struct sampler *s, const struct el_job *job,
    const struct el_attach *a)
{
	struct sampler_opts	so;
	char			*cause = NULL;

	memset(&so, 0, sizeof(so));
	so.samples = RAW_N;
	so.batch_size = a->batch_size;
	so.device_iterations = EL_DI;
	so.replication_factor = so.gradient_accumulation = 1;
	so.shuffle = job->shuffle;
	so.seed = EL_SEED;
	so.drop_last = job->drop_last;
	so.process_id = a->process_id;
	so.process_count = a->process_count;
	so.stages_epoch = EL_EPOCH;
	so.nstages = (uint32_t)a->nstages;
	if (a->nstages > 0)
		memcpy(so.stages, a->stages, a->nstages * sizeof(so.stages[0]));
	ck_assert_msg(sampler_init(s, &so, &cause) == 0, "oracle: %s", cause);
}

/* Attach @pr as @a asks, which must succeed; map its ring. */
static void
el_open(struct el_proc *pr, const struct el_job *job,
    const struct el_attach *a)
{
	Infeed__Frame	*r = el_attach_reply(pr, job, a);
	Infeed__Attached *at;
	int		 ring;
	void		*p;

	ck_assert_msg(r->msg_case == INFEED__FRAME__MSG_ATTACHED, "Attach of "
	    "process %u of %u with %zu stages: %s", a->process_id,
	    a->process_count, a->nstages, r->msg_case ==
	    INFEED__FRAME__MSG_ERROR ? r->error->message : "not Attached");
	at = r->attached;
	ck_assert_msg(at->has_start_epoch_steps &&
	    at->has_start_epoch_last_step_rows, "Attached lacks the steps of "
	    "start_epoch");
	pr->ring_bytes = at->ring_bytes;
	pr->slot_bytes = at->slot_bytes;
	pr->indices_offset = at->indices_offset;
	pr->cbs = at->combined_batch_size;
	pr->steps_per_epoch = at->steps_per_epoch;
	pr->start_epoch_steps = at->start_epoch_steps;
	pr->start_epoch_last_step_rows = at->start_epoch_last_step_rows;
	infeed__frame__free_unpacked(r, NULL);
	ck_assert_int_ne(ring = wire_in_take_fd(&pr->in), -1);
	p = mmap(NULL, (size_t)pr->ring_bytes, PROT_READ, MAP_SHARED, ring, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	close(ring);
	pr->ring = p;
	el_oracle(&pr->oracle, job, a);
	ck_assert_uint_eq(pr->cbs, pr->oracle.cbs);
	ck_assert_uint_eq(pr->steps_per_epoch, pr->oracle.steps_per_epoch);
	ck_assert_uint_eq(pr->start_epoch_steps,
	    sampler_epoch_steps(&pr->oracle, EL_EPOCH));
}

/* Hang up and forget the ring. */
static void
el_close(struct el_proc *pr)
{
	munmap((void *)(uintptr_t)pr->ring, (size_t)pr->ring_bytes);
	sampler_clear(&pr->oracle);
	close(pr->fd);
	wire_in_clear(&pr->in);
}

/*
 * Next: the step's indices into @out (at most the CBS) and its (epoch,
 * step, rows), checked against the oracle, and Release it; or false on
 * EndOfData (of *@epoch).
 */
static bool
el_step(struct el_proc *pr, uint64_t *epoch, uint64_t *step, uint64_t *rows,
    uint64_t *out)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	Infeed__Next	 n = INFEED__NEXT__INIT;
	Infeed__Release	 rl = INFEED__RELEASE__INIT;
	uint64_t	 want[256];
	uint32_t	 slot;

	f.msg_case = INFEED__FRAME__MSG_NEXT;
	f.next = &n;
	raw_send(pr->fd, &f);
	r = raw_recv(pr->fd, &pr->in);
	ck_assert_ptr_nonnull(r);
	if (r->msg_case == INFEED__FRAME__MSG_END_OF_DATA) {
		*epoch = r->end_of_data->epoch;
		infeed__frame__free_unpacked(r, NULL);
		return (false);
	}
	ck_assert_msg(r->msg_case == INFEED__FRAME__MSG_STEP, "Next got %s",
	    r->msg_case == INFEED__FRAME__MSG_ERROR ? r->error->message :
	    wire_case_name(r->msg_case));
	slot = r->step->slot;
	*epoch = r->step->epoch;
	*step = r->step->step;
	*rows = r->step->rows;
	infeed__frame__free_unpacked(r, NULL);
	ck_assert_uint_le(pr->cbs, sizeof(want) / sizeof(want[0]));
	memcpy(out, pr->ring + slot * pr->slot_bytes + pr->indices_offset,
	    *rows * sizeof(uint64_t));
	ck_assert_uint_eq(*rows, sampler_step_indices(&pr->oracle, *epoch,
	    *step, want));
	ck_assert_msg(memcmp(out, want, *rows * sizeof(uint64_t)) == 0,
	    "epoch %" PRIu64 " step %" PRIu64 ": the indices are not the "
	    "sampler's", *epoch, *step);
	rl.slot = slot;
	f.msg_case = INFEED__FRAME__MSG_RELEASE;
	f.release = &rl;
	raw_send(pr->fd, &f);
	r = raw_recv(pr->fd, &pr->in);
	ck_assert_msg(r != NULL && r->msg_case == INFEED__FRAME__MSG_RELEASED,
	    "Release was not answered with Released");
	infeed__frame__free_unpacked(r, NULL);
	return (true);
}

/* Count every delivered index of the elastic epoch in @seen. */
static void
el_count(unsigned *seen, const uint64_t *idx, uint64_t rows)
{
	uint64_t	j;

	for (j = 0; j < rows; j++) {
		ck_assert_uint_lt(idx[j], RAW_N);
		ck_assert_msg(seen[idx[j]] == 0, "index %" PRIu64 " delivered "
		    "twice in epoch %d", idx[j], EL_EPOCH);
		seen[idx[j]]++;
	}
}

/*
 * Run @nphases phases of a job over epoch EL_EPOCH, each with the stages
 * the ones before it leave; the last one to the epoch's end, then one
 * step of the next epoch, the ordinary one.  Check the indices the epoch
 * delivered against the drop_last remainders.
 */
static void
el_run(const struct el_job *job, const struct el_phase *ph, size_t nphases)
{
	static unsigned		seen[RAW_N];
	struct sampler_stage	stages[EL_MAX_PHASES];
	struct el_attach	a;
	struct el_proc		pr;
	uint64_t		idx[256], epoch, step, rows, k, m, left;
	uint64_t		delivered = 0, expected, per, cbs;
	uint64_t		first_kept = RAW_N;
	size_t			i;
	bool			last;

	memset(seen, 0, sizeof(seen));
	m = RAW_N;
	expected = 0;
	for (i = 0; i < nphases; i++) {
		last = i == nphases - 1;
		memset(&a, 0, sizeof(a));
		a.process_count = ph[i].process_count;
		a.batch_size = ph[i].batch_size;
		a.stages = stages;
		a.nstages = i;
		for (a.process_id = 0; a.process_id < a.process_count;
		    a.process_id++) {
			el_open(&pr, job, &a);
			for (k = 0; last || k < ph[i].steps; k++) {
				if (!el_step(&pr, &epoch, &step, &rows, idx)) {
					ck_assert_msg(last, "EndOfData before "
					    "the phase's steps");
					ck_assert_uint_eq(epoch, EL_EPOCH);
					break;
				}
				ck_assert_uint_eq(epoch, EL_EPOCH);
				ck_assert_uint_eq(step, k);
				if (last && k + 1 == pr.start_epoch_steps)
					ck_assert_uint_eq(rows,
					    pr.start_epoch_last_step_rows);
				el_count(seen, idx, rows);
				delivered += rows;
			}
			if (last) {
				ck_assert_uint_eq(k, pr.start_epoch_steps);
				/* The next epoch: the ordinary split. */
				ck_assert(el_step(&pr, &epoch, &step, &rows,
				    idx));
				ck_assert_uint_eq(epoch, EL_EPOCH + 1);
				ck_assert_uint_eq(step, 0);
			}
			el_close(&pr);
		}
		/*
		 * The documented remainders: with drop_last, the part of
		 * the phase's list beyond P * per_proc is never delivered.
		 */
		cbs = (uint64_t)ph[i].batch_size * EL_DI;
		per = job->drop_last ? m / (cbs * ph[i].process_count) * cbs :
		    0;
		if (job->drop_last)
			expected += m - per * ph[i].process_count;
		if (i == 0)
			first_kept = job->drop_last ? per *
			    ph[i].process_count : RAW_N;
		if (!last) {
			stages[i].process_count = ph[i].process_count;
			stages[i].cbs = cbs;
			stages[i].steps_done = ph[i].steps;
			/* Every drop_last block has per entries. */
			left = job->drop_last ? (per > ph[i].steps * cbs ?
			    per - ph[i].steps * cbs : 0) * ph[i].process_count :
			    0;
			if (job->drop_last)
				m = left;
		}
	}
	ck_assert_msg(delivered + expected == RAW_N || !job->drop_last,
	    "epoch %d delivered %" PRIu64 " indices; with drop_last's "
	    "remainders of %" PRIu64 " expected %" PRIu64, EL_EPOCH,
	    delivered, expected, (uint64_t)RAW_N - expected);
	ck_assert_msg(delivered == RAW_N || job->drop_last, "epoch %d "
	    "delivered %" PRIu64 " indices of %d without drop_last",
	    EL_EPOCH, delivered, RAW_N);
	/* In order, the first stage's remainder is the highest indices. */
	for (k = first_kept; !job->shuffle && k < RAW_N; k++)
		ck_assert_msg(seen[k] == 0, "index %" PRIu64 " of the first "
		    "stage's drop_last remainder delivered", k);
}

/* Run @ph under each of shuffle and drop_last, on and off. */
static void
el_run_each(const struct el_phase *ph, size_t nphases)
{
	struct el_job	job;
	unsigned	i;

	for (i = 0; i < 4; i++) {
		job.shuffle = (i & 1) != 0;
		job.drop_last = (i & 2) != 0;
		el_run(&job, ph, nphases);
	}
}

/* 4 processes take 5 steps of 16 rows; 2 finish the epoch. */
START_TEST(four_to_two_exactly_once)
{
	const struct el_phase	ph[] = { { 4, 8, 5 }, { 2, 8, 0 } };

	el_run_each(ph, 2);
}
END_TEST

START_TEST(four_to_three_exactly_once)
{
	const struct el_phase	ph[] = { { 4, 8, 5 }, { 3, 8, 0 } };

	el_run_each(ph, 2);
}
END_TEST

/* 8 processes, and a per-process batch of another size too. */
START_TEST(four_to_eight_exactly_once)
{
	const struct el_phase	ph[] = { { 4, 8, 5 }, { 8, 8, 0 } };
	const struct el_phase	other[] = { { 4, 8, 5 }, { 8, 4, 0 } };

	el_run_each(ph, 2);
	el_run_each(other, 2);
}
END_TEST

/* Two changes of process count within one epoch. */
START_TEST(four_to_two_to_three_exactly_once)
{
	const struct el_phase	ph[] = { { 4, 8, 5 }, { 2, 8, 6 },
				    { 3, 8, 0 } };

	el_run_each(ph, 3);
}
END_TEST

/* The one session's SessionStats.options show @n stages @st. */
static void
el_stats_stages(const struct sampler_stage *st, size_t n)
{
	Infeed__Frame		*r = raw_stats();
	Infeed__LoaderOptions	*lo;
	Infeed__ElasticStage	*es;
	size_t			 i;

	ck_assert_uint_eq(r->stats->n_sessions, 1);
	lo = r->stats->sessions[0]->options;
	ck_assert_ptr_nonnull(lo);
	ck_assert_uint_eq(lo->n_start_epoch_stages, n);
	for (i = 0; i < n; i++) {
		es = lo->start_epoch_stages[i];
		ck_assert_uint_eq(es->process_count, st[i].process_count);
		ck_assert_uint_eq(es->combined_batch_size, st[i].cbs);
		ck_assert_uint_eq(es->steps_done, st[i].steps_done);
	}
	infeed__frame__free_unpacked(r, NULL);
}

/*
 * start_step counts steps of the last stage: a process of the new count
 * restarted after 2 of its steps gets its step 2 next; across the epoch's
 * end with load_indefinitely, the ring fills into the next epoch
 * (early_preload fills it at Attach).  Stats show the stages as asked.
 */
START_TEST(start_step_counts_the_last_stage)
{
	const struct sampler_stage	st[] = { { 4, 16, 5 } };
	const struct el_job		job = { true, false };
	struct el_attach		a;
	struct el_proc			pr;
	uint64_t			idx[256], epoch, step, rows, k, n;

	memset(&a, 0, sizeof(a));
	a.process_id = 1;
	a.process_count = 2;
	a.batch_size = 8;
	a.stages = st;
	a.nstages = 1;
	a.start_step = 2;
	a.indefinitely = true;
	a.early_preload = true;
	el_open(&pr, &job, &a);
	el_stats_stages(st, 1);
	n = pr.start_epoch_steps;
	ck_assert_uint_gt(n, 3);
	ck_assert_uint_lt(n, pr.steps_per_epoch);
	for (k = 2; k < n + 2; k++) {
		ck_assert(el_step(&pr, &epoch, &step, &rows, idx));
		ck_assert_uint_eq(epoch, k < n ? EL_EPOCH : EL_EPOCH + 1);
		ck_assert_uint_eq(step, k < n ? k : k - n);
		ck_assert_uint_eq(rows, k + 1 == n ?
		    pr.start_epoch_last_step_rows : pr.cbs);
	}
	el_close(&pr);
}
END_TEST

/*
 * Stages that delivered the whole epoch leave no step: start_step 0 is
 * the epoch's end, so the first Next gets EndOfData, the next one the
 * next epoch's first step.
 */
START_TEST(nothing_left_ends_the_epoch)
{
	const struct sampler_stage	st[] = { { 4, 16, 15 } };
	const struct el_job		job = { false, true };
	struct el_attach		a;
	struct el_proc			pr;
	uint64_t			idx[256], epoch, step, rows;

	memset(&a, 0, sizeof(a));
	a.process_count = 2;
	a.batch_size = 8;
	a.stages = st;
	a.nstages = 1;
	el_open(&pr, &job, &a);
	ck_assert_uint_eq(pr.start_epoch_steps, 0);
	ck_assert_uint_eq(pr.start_epoch_last_step_rows, 0);
	ck_assert(!el_step(&pr, &epoch, &step, &rows, idx));
	ck_assert_uint_eq(epoch, EL_EPOCH);
	ck_assert(el_step(&pr, &epoch, &step, &rows, idx));
	ck_assert_uint_eq(epoch, EL_EPOCH + 1);
	ck_assert_uint_eq(step, 0);
	el_close(&pr);
}
END_TEST

/* Attach as @a, expect ERROR_INVALID_ARGUMENT saying each of @says. */
static void
el_refused(const struct el_attach *a, const char *const *says, size_t nsays)
{
	const struct el_job	job = { true, true };
	struct el_proc		pr;
	Infeed__Frame		*r = el_attach_reply(&pr, &job, a);
	size_t			 i;

	ck_assert_msg(r->msg_case == INFEED__FRAME__MSG_ERROR, "an Attach "
	    "with bad stages got %s", wire_case_name(r->msg_case));
	ck_assert_int_eq(r->error->code,
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	for (i = 0; i < nsays; i++)
		ck_assert_msg(strstr(r->error->message, says[i]) != NULL,
		    "the refusal '%s' does not say '%s'", r->error->message,
		    says[i]);
	infeed__frame__free_unpacked(r, NULL);
	close(pr.fd);
	wire_in_clear(&pr.in);
}

START_TEST(bad_stages_refused_naming_them)
{
	struct sampler_stage	st[INFEED_MAX_ELASTIC_STAGES + 1];
	struct el_attach	a;
	size_t			i;

	for (i = 0; i < INFEED_MAX_ELASTIC_STAGES + 1; i++) {
		st[i].process_count = 4;
		st[i].cbs = 16;
		st[i].steps_done = 0;
	}
	memset(&a, 0, sizeof(a));
	a.process_count = 2;
	a.batch_size = 8;
	a.stages = st;
	a.nstages = INFEED_MAX_ELASTIC_STAGES + 1;
	el_refused(&a, (const char *[]){ "start_epoch_stages has 17 stages",
	    "expected at most 16" }, 2);
	/* Stage 0 left 960 samples: 15 steps of 4 x 16 with drop_last. */
	st[1].steps_done = 16;
	a.nstages = 2;
	el_refused(&a, (const char *[]){ "stage 1 of epoch 2 completed 16 "
	    "steps", "make 15 steps" }, 2);
	st[1].steps_done = 0;
	st[0].process_count = 0;
	el_refused(&a, (const char *[]){ "stage 0 of epoch 2 has "
	    "process_count 0", "expected at least 1" }, 2);
	st[0].process_count = 4;
	st[0].cbs = 0;
	el_refused(&a, (const char *[]){ "stage 0 of epoch 2",
	    "combined batch size 0" }, 2);
	/* 4 x 16 for 5 steps leave 640 entries: 20 steps of 2 x 16. */
	st[0].cbs = 16;
	st[0].steps_done = 5;
	a.nstages = 1;
	a.start_step = 20;
	el_refused(&a, (const char *[]){ "start_step is 20",
	    "makes 20 steps for 2 processes", "expected 0 to 19" }, 3);
}
END_TEST

/* Without stages, Attached's start_epoch fields are the ordinary ones. */
START_TEST(no_stages_as_before)
{
	const struct el_job	job = { true, false };
	struct el_attach	a;
	struct el_proc		pr;

	memset(&a, 0, sizeof(a));
	a.process_id = 2;
	a.process_count = 3;
	a.batch_size = 8;
	a.start_step = 4;
	el_open(&pr, &job, &a);
	el_stats_stages(NULL, 0);
	ck_assert_uint_eq(pr.start_epoch_steps, pr.steps_per_epoch);
	/* 1000 samples in 3: the last block has 333, its last step 13. */
	ck_assert_uint_eq(pr.steps_per_epoch, 21);
	ck_assert_uint_eq(pr.start_epoch_last_step_rows, 333 - 20 * 16);
	el_close(&pr);
}
END_TEST

static Suite *
elastic_suite(void)
{
	Suite	*s = suite_create("elastic");
	TCase	*tc;

	tc = tcase_create("exactly-once");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, four_to_two_exactly_once);
	tcase_add_test(tc, four_to_three_exactly_once);
	tcase_add_test(tc, four_to_eight_exactly_once);
	tcase_add_test(tc, four_to_two_to_three_exactly_once);
	suite_add_tcase(s, tc);

	tc = tcase_create("attach");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, start_step_counts_the_last_stage);
	tcase_add_test(tc, nothing_left_ends_the_epoch);
	tcase_add_test(tc, bad_stages_refused_naming_them);
	tcase_add_test(tc, no_stages_as_before);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(elastic_suite()));
}
