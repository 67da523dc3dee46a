/* SPDX-License-Identifier: MIT */
/*
 * The helpers the image decoder's front and its formats share (see
 * image-codec.h): the error phrase, the scratch rows, and the refusal of
 * an image over the decoder's memory cap.
 */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "image-codec.h"

/* Set the error phrase. */
int
image_error(struct image_decoder *d, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(d->err, sizeof d->err, fmt, ap);
	va_end(ap);
	return (-1);
}

/* Grow the scratch buffer to @len bytes. */
uint8_t *
image_scratch(struct image_decoder *d, size_t len)
{
	uint8_t	*p;

	if (len == 0)
		len = 1;
	if (d->scratch_len >= len)
		return (d->scratch);
	free(d->scratch);
	d->scratch_len = 0;
	if ((p = malloc(len)) == NULL) {
		d->scratch = NULL;
		image_error(d, "out of memory (%zu bytes of rows)", len);
		return (NULL);
	}
	d->scratch = p;
	d->scratch_len = len;
	return (p);
}

/* "image needs 1367 MiB to decode (...), above image_memory_max (256 MiB)" */
int
image_memory_refuse(struct image_decoder *d, const char *what, uint64_t need,
    uint64_t max)
{
	return (image_error(d, "image needs %llu MiB to decode (%s), above "
	    "image_memory_max (%llu MiB)", (unsigned long long)((need +
	    (1u << 20) - 1) >> 20), what, (unsigned long long)(max >> 20)));
}
