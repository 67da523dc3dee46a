/* SPDX-License-Identifier: MIT */
/*
 * Copying rows into a step's slot.  A slot larger than the last-level
 * cache is out of the cache before its trainer reads it, so writing it
 * through the cache only costs: each line is read in before it is
 * written over (a third more memory traffic), and it evicts what the
 * trainer and the other workers are using.  Such slots are written with
 * streaming (non-temporal) stores, measured 1.3 - 1.5 x faster for the
 * tutorial's 64 KiB rows on the 2-core VM (docs/performance.md, issue
 * 25).  Smaller slots, and rows that do not start on a cache line, go
 * through memcpy as before.  Workers and the benchmarks' gather limit
 * choose the same way, so the limit stays the machine's.
 */
#ifndef INFEED_COPY_H
#define INFEED_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * copy_streams() - whether rows of @row_bytes bytes, @rows of them a
 * slot, are best written with copy_row(..., true): the slot's rows are
 * larger than the last-level cache and every row starts on a cache line
 * (@row_bytes a multiple of 64, the slot's rows 64-byte aligned), on a
 * machine that has streaming stores.
 */
bool	copy_streams(uint64_t row_bytes, uint64_t rows);

/**
 * copy_row() - copy @n bytes from @src to @dst, with streaming stores
 * when @stream (what copy_streams() said for this slot), else memcpy.
 * Streaming stores are ordered by nothing but copy_fence(): call it
 * before telling anyone the rows are there.
 */
void	copy_row(void *dst, const void *src, size_t n, bool stream);

/**
 * copy_fence() - make every streaming store made so far visible to other
 * processes before any store or message that follows.
 */
void	copy_fence(void);

#endif /* INFEED_COPY_H */
