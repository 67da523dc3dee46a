/* SPDX-License-Identifier: MIT */
/*
 * Hostile images within IMAGE_MAX_PIXELS, made in the tests (tiny files):
 * an interlaced 16-bit RGBA PNG of 13376 x 13376, which needs its whole
 * decoded image, 1.43 GB, at once; a progressive JPEG of the same size,
 * whose coefficients take 1.07 GB until its last scan.  Only their
 * headers are real: a decoder must refuse them before it allocates.
 */
#ifndef INFEED_TEST_IMAGE_BOMBS_H
#define INFEED_TEST_IMAGE_BOMBS_H

#include <stddef.h>
#include <stdint.h>

#define IMAGE_BOMB_SIDE		13376
#define IMAGE_BOMB_MAX		128	/* bytes of either file, at most */

/* The PNG into @buf (IMAGE_BOMB_MAX bytes); its length. */
size_t	image_bomb_png(uint8_t *buf);

/* The JPEG into @buf (IMAGE_BOMB_MAX bytes); its length. */
size_t	image_bomb_jpeg(uint8_t *buf);

#endif /* INFEED_TEST_IMAGE_BOMBS_H */
