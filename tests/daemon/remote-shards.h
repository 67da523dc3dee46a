/* SPDX-License-Identifier: MIT */
/*
 * Tar shards of tiny PNGs for the remote tests, and one epoch's check:
 * see remote-shards.c.
 */
#ifndef INFEED_TEST_REMOTE_SHARDS_H
#define INFEED_TEST_REMOTE_SHARDS_H

#include <stdbool.h>
#include <stdint.h>

/* A free port on loopback (bound and closed: a server takes it next), or -1. */
int	remote_free_port(void);

/* The grey level of sample @i's image. */
uint8_t	remote_grey_of(uint64_t i);

/*
 * Shards @prefix-NNNNNN.tar in folder @sub of the test's folder, @n of
 * @per samples each: sample i (over the set) a PNG of remote_grey_of(i),
 * label i % 10.  With @index, @sub/counts.txt has each shard's count.
 */
void	remote_make_shards(const char *sub, const char *prefix, int n,
	    int per, bool index);

/*
 * One shuffled epoch of dataset @name, @n samples: every index once, each
 * image its grey and its label the index's.
 */
void	remote_read_epoch(const char *name, uint64_t n, uint64_t seed);

#endif
