/* SPDX-License-Identifier: MIT */
/*
 * A dataset made in the test, for the pool and session unit tests:
 * "flaky", 20 samples of three bytes (sample i is three bytes of i, label
 * i % 4), whose index FLAKY_BAD cannot be read and whose index FLAKY_CRASH
 * crashes the worker reading it with SIGSEGV.
 */
#ifndef INFEED_TEST_FAKE_READER_H
#define INFEED_TEST_FAKE_READER_H

#include "catalogue.h"

#define FLAKY_BAD	9
#define FLAKY_CRASH	13
#define FLAKY_PATH	"/srv/data/flaky.bin"

/* Add "flaky" to @cat, as catalogue_open() would have. */
void	fake_add_flaky(struct catalogue *cat);

#endif /* INFEED_TEST_FAKE_READER_H */
