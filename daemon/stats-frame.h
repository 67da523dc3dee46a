/* SPDX-License-Identifier: MIT */
/*
 * The statistics snapshot (stats.h) as the Stats frame that answers
 * GetStats.  Beside peer.c at the protocol's edge: the only other daemon
 * file that knows infeed.proto's messages.
 */
#ifndef INFEED_STATS_FRAME_H
#define INFEED_STATS_FRAME_H

#include <stddef.h>

#include "infeed.pb-c.h"
#include "infeed-limits.h"
#include "stats.h"

/* A SessionStats's LoaderOptions and the messages they point to. */
struct stats_frame_options {
	Infeed__LoaderOptions	 lo;
	Infeed__Transform	 t;
	Infeed__ElasticStage	 stage[INFEED_MAX_ELASTIC_STAGES];
	Infeed__ElasticStage	*stagep[INFEED_MAX_ELASTIC_STAGES];
};

/* A Stats message and what it points to. */
struct stats_frame {
	Infeed__Stats			 msg;
	Infeed__SessionStats		*ss;
	Infeed__SessionStats		**ssp;
	struct stats_frame_options	*opts;
	Infeed__WorkerStats		*ws;
	Infeed__WorkerStats		**wsp;
};

/**
 * stats_frame_fill() - @sf->msg renders snapshot @snap, whose strings and
 * arrays it borrows: send it before @snap is cleared, then free it with
 * stats_frame_clear().
 */
void	 stats_frame_fill(struct stats_frame *sf, const struct stats *snap);

/**
 * stats_frame_clear() - free what stats_frame_fill() allocated.
 */
void	 stats_frame_clear(struct stats_frame *sf);

#endif /* INFEED_STATS_FRAME_H */
