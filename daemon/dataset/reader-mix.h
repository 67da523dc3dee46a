/* SPDX-License-Identifier: MIT */
/*
 * The mix reader (reader-mix.c): samples drawn from several datasets of
 * the catalogue in set proportions.  dataset.c's table of readers holds
 * its operations.
 */
#ifndef INFEED_READER_MIX_H
#define INFEED_READER_MIX_H

#include "reader.h"

extern const struct dataset_ops dataset_mix_ops;

/* The most sources a mix takes, and the longest period of its rule. */
#define MIX_SOURCES_MAX	64
#define MIX_PERIOD_MAX	(1u << 20)

/*
 * dataset_mix_sections() - the configuration's @n sections, which a mix
 * names as its sources, and how to open one (dataset.c's
 * dataset_open_within(), which a reader may not call by name), while the
 * catalogue opens them; NULL, 0, NULL after.
 */
void	dataset_mix_sections(const struct dataset_conf *confs, size_t n,
	    struct dataset *(*open)(const struct dataset_conf *, uint64_t,
	    char **));

#endif /* INFEED_READER_MIX_H */
