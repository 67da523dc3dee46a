/* SPDX-License-Identifier: MIT */
/*
 * libinfeed's internals that its tests call; not exported from the shared
 * library (libinfeed.map lists every exported name).
 */
#ifndef INFEED_LIBINFEED_PRIVATE_H
#define INFEED_LIBINFEED_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

/**
 * infeed_pagemap_written() - whether /proc/self/pagemap entry @ent of a
 * copy-on-write ring is a page the trainer wrote (a private copy, present
 * or swapped out), which infeed_release() drops.
 */
bool	infeed_pagemap_written(uint64_t ent);

#endif /* INFEED_LIBINFEED_PRIVATE_H */
