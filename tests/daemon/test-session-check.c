/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/session-check.c's options, by the table of
 * proto/options-schema.h: two sessions' options agree on their steps
 * (session_options_same_steps(), what a shared group's members must
 * share) unless one of the options that decide a step's bytes or timing
 * differs, each found on its own (the list written out here); another
 * option never makes them differ; a copy (session_options_copy()) has every option and
 * a pipeline text of its own.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "log.h"
#include "options-schema.h"
#include "runner.h"
#include "session-check.h"

/* Options with each of the table at a value of its own. */
static void
options_fill(struct session_options *o)
{
	uint64_t	k = 0;

	memset(o, 0, sizeof(*o));
#define FILL_OPTION(name, field, type, ...)				\
	o->field = (type)(++k * 1000 + 1);
	INFEED_LOADER_OPTIONS(FILL_OPTION)
#undef FILL_OPTION
}

/*
 * The options that decide a step's bytes, or when it comes: what the
 * members of a shared group must agree on (docs/protocol.md, Shared
 * pipelines), written out here rather than read from the table.
 */
static const char *const steps_options[] = {
	"batch_size", "device_iterations", "replication_factor",
	"gradient_accumulation", "shuffle", "seed", "drop_last",
	"buffer_size", "load_indefinitely", "distributed_process_id",
	"distributed_process_count", "label_dtype", "seq_len",
};

/* Whether option @name is one of steps_options. */
static bool
decides_steps(const char *name)
{
	size_t	i;

	for (i = 0; i < sizeof(steps_options) / sizeof(steps_options[0]); i++)
		if (strcmp(steps_options[i], name) == 0)
			return (true);
	return (false);
}

START_TEST(same_steps_unless_an_option_of_the_steps_differs)
{
	struct session_options	a, b;
	size_t			n = 0;

	options_fill(&a);
	b = a;
	ck_assert(session_options_same_steps(&a, &b));
	/* One option changed at a time: 0, or false for a bool. */
#define FLIP_OPTION(name, field, type, ...)				\
	b = a;								\
	b.field = (type)0;						\
	n += decides_steps(#name);					\
	ck_assert_msg(session_options_same_steps(&a, &b) !=		\
	    decides_steps(#name), #name " changed: same steps is %d",	\
	    session_options_same_steps(&a, &b));
	INFEED_LOADER_OPTIONS(FLIP_OPTION)
#undef FLIP_OPTION
	ck_assert_uint_eq(n, sizeof(steps_options) /
	    sizeof(steps_options[0]));
}
END_TEST

START_TEST(a_copy_has_every_option_and_its_own_pipeline)
{
	struct session_options	a, b;
	char			pipeline[] = "ToTensor()";

	options_fill(&a);
	a.has_transform = true;
	a.transform.pipeline = pipeline;
	session_options_copy(&b, &a);
#define SAME_OPTION(name, field, ...)					\
	ck_assert_msg(b.field == a.field, #name " not copied");
	INFEED_LOADER_OPTIONS(SAME_OPTION)
#undef SAME_OPTION
	ck_assert_ptr_ne(b.transform.pipeline, a.transform.pipeline);
	ck_assert_str_eq(b.transform.pipeline, "ToTensor()");
	free(b.transform.pipeline);
}
END_TEST

static Suite *
session_check_suite(void)
{
	Suite	*s = suite_create("session-check");
	TCase	*tc = tcase_create("options");

	tcase_add_test(tc, same_steps_unless_an_option_of_the_steps_differs);
	tcase_add_test(tc, a_copy_has_every_option_and_its_own_pipeline);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	log_init("test-session-check", getenv("TEST_VERBOSE") != NULL ? 1 :
	    -1);
	return (run_suite(session_check_suite()));
}
