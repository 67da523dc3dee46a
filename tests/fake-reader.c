/* SPDX-License-Identifier: MIT */
/*
 * The "flaky" dataset: see fake-reader.h.
 */

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "fake-reader.h"

/* Sample i is three bytes of i; FLAKY_BAD fails, FLAKY_CRASH crashes. */
static int
flaky_read(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label)
{
	(void)ds;
	if (index == FLAKY_BAD)
		return (-1);
	if (index == FLAKY_CRASH)
		raise(SIGSEGV);
	memset(dst, (int)index, 3);
	*label = (int64_t)(index % 4);
	return (0);
}

/* Nothing to close. */
static void
flaky_close(struct dataset *ds)
{
	(void)ds;
}

static const struct dataset_ops flaky_ops = {
	.type = "flaky",
	.keys = (const char *const []){ NULL },
	.read = flaky_read,
	.close = flaky_close,
};

/* Add "flaky" to the catalogue. */
void
fake_add_flaky(struct catalogue *cat)
{
	struct dataset	*ds;
	size_t		 n = cat->ndatasets;

	ck_assert_ptr_nonnull(ds = calloc(1, sizeof(*ds)));
	ck_assert_ptr_nonnull(ds->name = strdup("flaky"));
	ck_assert_ptr_nonnull(ds->data_path = strdup(FLAKY_PATH));
	ds->type = "flaky";
	ds->samples = 20;
	ds->ndim = 1;
	ds->shape[0] = 3;
	ds->dtype = INFEED_DTYPE_UINT8;
	ds->label_dtype = INFEED_DTYPE_INT64;
	ds->classes = 4;
	ds->sample_bytes = 3;
	ds->ops = &flaky_ops;
	cat->datasets = realloc(cat->datasets, (n + 1) *
	    sizeof(*cat->datasets));
	cat->entries = realloc(cat->entries, (n + 1) * sizeof(*cat->entries));
	ck_assert(cat->datasets != NULL && cat->entries != NULL);
	cat->datasets[n] = ds;
	memset(&cat->entries[n], 0, sizeof(cat->entries[n]));
	cat->ndatasets = n + 1;
}
