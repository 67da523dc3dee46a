/* SPDX-License-Identifier: MIT */
/*
 * infeed's limits: the one home of every bound that both sides of the
 * protocol, the tools and the docs (docs/protocol.md quotes them) rely on.
 * Installed with infeed.h; a value here changes only with the protocol.
 */
#ifndef INFEED_LIMITS_H
#define INFEED_LIMITS_H

/* Dimensions of one sample (the step adds the row dimension). */
#define INFEED_MAX_DIMS			8
/* Channels a transform normalises with their own mean and std. */
#define INFEED_MAX_CHANNELS		16
/* Slots in a session's step ring (LoaderOptions.buffer_size). */
#define INFEED_MAX_SLOTS		64
/* Bytes of a client name (Hello.client_name) kept by the daemon. */
#define INFEED_MAX_CLIENT_NAME		64
/* Bytes of a dataset name in the configuration and in Attach. */
#define INFEED_MAX_DATASET_NAME		64
/* A frame's protobuf body: the default, and the range max_frame_size takes. */
#define INFEED_DEFAULT_MAX_FRAME	(1024 * 1024)
#define INFEED_MIN_MAX_FRAME		4096
#define INFEED_MAX_MAX_FRAME		(64 * 1024 * 1024)
/*
 * Stages of an elastic epoch (LoaderOptions.start_epoch_stages): the
 * process counts an epoch went through before the loader's own.
 */
#define INFEED_MAX_ELASTIC_STAGES	16
/* Worker processes of one daemon. */
#define INFEED_MAX_WORKERS		256
/* Clients one daemon serves at once (max_clients). */
#define INFEED_MAX_CLIENTS		65536
/* Bytes of one encoded image (an image file or a tar member) a worker reads. */
#define INFEED_MAX_IMAGE_BYTES		(64 * 1024 * 1024)
/*
 * An Attach whose checks touch what the client controls (its files' fstat
 * and headers, its groups for allow_groups) waits for them at most this
 * many seconds.  The checks are counted per uid: at most
 * INFEED_MAX_ATTACH_CHECKS of one uid's run at once, INFEED_MAX_ATTACH_QUEUE
 * more wait their turn, and past INFEED_MAX_STUCK_CHECKS of its checks that
 * never returned (a file on a mount that does not answer) that uid's
 * Attach requests that need one are refused; other uids' go on.  All uids
 * together have at most INFEED_MAX_ATTACH_THREADS threads, running or
 * given up.
 */
#define INFEED_ATTACH_CHECK_S		10
#define INFEED_MAX_ATTACH_CHECKS	4
#define INFEED_MAX_ATTACH_QUEUE		32
#define INFEED_MAX_STUCK_CHECKS		8
#define INFEED_MAX_ATTACH_THREADS	64
/*
 * Shared pipelines (LoaderOptions.share): a member that holds its group
 * back (every slot filled, another member waiting for the next step) for
 * this many milliseconds in all, within five times as long, leaves it
 * (so no member runs below 0.8 of its own pace for another).  A member's
 * buffer_size is at most INFEED_MAX_GROUP_SLOTS; the group's ring has
 * buffer_size slots, more with a window (group_window): up to 64 -
 * buffer_size in all (a member's Step.slot numbers the group's slots,
 * then its own ring's, below 64).
 */
#define INFEED_GROUP_SLACK_MS		500
#define INFEED_MAX_GROUP_SLOTS		32

#endif /* INFEED_LIMITS_H */
