/* SPDX-License-Identifier: MIT */
/*
 * source.h - where infeed-train's device steps come from: infeedd through
 * libinfeed (zero-copy steps from the daemon's ring), or synthetic data
 * made once on the "device", as poptorch's enableSyntheticData.
 */
#ifndef INFEED_TRAIN_SOURCE_H
#define INFEED_TRAIN_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "infeed.h"
#include "model.h"

struct source {
	bool synthetic;
	struct infeed *f;
	struct infeed_session_info info;
	struct infeed_step step;
	bool held;
	float *data;                    /* synthetic */
	int32_t *labels;
	size_t rows;
	uint64_t steps_per_epoch;       /* synthetic: as if the dataset */
	uint64_t next_step;
};

/**
 * source_open_infeed() - connect to infeedd at @socket_path (NULL: the
 * default), attach to @dataset with @o and check that its samples fit
 * @m's input (after the float32 transform).  -1 with @err otherwise.
 */
int source_open_infeed(struct source *s, const char *socket_path,
    const char *dataset, const struct infeed_options *o,
    const struct model *m, char *err, size_t errlen);

/**
 * source_probe_images() - the shape ([3, H, W] float32) and class count of
 * @dataset's rows under @o->transform, from a short attach: the input a
 * model needs to take them.  -1 with @err if the pipeline does not give
 * float32 CHW.
 */
int source_probe_images(const char *socket_path, const char *dataset,
    const struct infeed_options *o, struct shape *input, int *classes,
    char *err, size_t errlen);

/**
 * source_open_synthetic() - steps of @rows random samples shaped for @m,
 * @steps_per_epoch of them per epoch.
 */
int source_open_synthetic(struct source *s, const struct model *m,
    size_t rows, uint64_t steps_per_epoch,
    uint64_t seed, char *err, size_t errlen);

/**
 * source_next() - the next step: 0 with @data, @labels, @rows set, 1 at
 * the end of an epoch (the next call starts the next one), -1 with @err.
 */
int source_next(struct source *s, const float **data, const int32_t **labels,
    size_t *rows, char *err, size_t errlen);

/** source_release() - hand the current step back (a no-op if synthetic). */
void source_release(struct source *s);
void source_close(struct source *s);

/**
 * host_transfer() - read every byte of @len at @p, as the host link's DMA
 * does, and return a checksum so the compiler keeps the reads.
 */
uint64_t host_transfer(const void *p, size_t len);

#endif
