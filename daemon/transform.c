/* SPDX-License-Identifier: MIT */
/*
 * Transforms: checked once in the main process, applied by the workers to
 * every row.  Nothing here allocates on the per-row path.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transform.h"
#include "xmalloc.h"

/* Check the client's transform and describe it for the workers. */
int
transform_init(struct transform *tf, const Infeed__Transform *t,
    const struct dataset *ds, char **cause)
{
	size_t	i, n;

	memset(tf, 0, sizeof(*tf));
	tf->in_dtype = ds->dtype;
	tf->in_sample_bytes = ds->sample_bytes;
	tf->out_sample_bytes = ds->sample_bytes;
	tf->scale = 1.0f;
	if (t != NULL && t->pipeline != NULL) {
		*cause = xasprintf("transform: '%s' holds arrays (type %s), "
		    "and a pipeline such as RandomResizedCrop(224) is for "
		    "image datasets (type imagefolder or tar); convert arrays "
		    "with to_float32, scale, mean and std", ds->name,
		    ds->type);
		return (-1);
	}
	if (t == NULL || !t->to_float32) {
		if (t != NULL && (t->n_mean || t->n_std || (t->has_scale &&
		    t->scale != 1.0f))) {
			*cause = xasprintf("transform: scale, mean and std need "
			    "to_float32 = true");
			return (-1);
		}
		return (0);
	}
	if (ds->dtype != INFEED_DTYPE_UINT8 &&
	    ds->dtype != INFEED_DTYPE_FLOAT32) {
		*cause = xasprintf("transform: to_float32 converts uint8 or "
		    "float32 samples, but '%s' holds %s", ds->name,
		    dtype_name(ds->dtype));
		return (-1);
	}
	if (!isfinite(t->scale) || t->scale == 0.0f) {
		*cause = xasprintf("transform: scale must be a finite non-zero "
		    "number, e.g. 1/255");
		return (-1);
	}
	n = t->n_mean;
	if (n != t->n_std) {
		*cause = xasprintf("transform: %zu mean values but %zu std "
		    "values; give one of each per channel", t->n_mean,
		    t->n_std);
		return (-1);
	}
	if (n > 1 && (ds->ndim == 0 || n != ds->shape[0] ||
	    n > INFEED_MAX_CHANNELS)) {
		*cause = xasprintf("transform: %zu mean/std values, but samples "
		    "have %llu channels (dim 0 of the sample shape); give one "
		    "value, or one per channel (at most %d)", n, ds->ndim ?
		    (unsigned long long)ds->shape[0] : 0ULL,
		    INFEED_MAX_CHANNELS);
		return (-1);
	}
	for (i = 0; i < n; i++) {
		if (!isfinite(t->mean[i]) || !isfinite(t->std[i]) ||
		    t->std[i] == 0.0f) {
			*cause = xasprintf("transform: mean and std must be "
			    "finite and std non-zero (channel %zu)", i);
			return (-1);
		}
		tf->mean[i] = t->mean[i];
		tf->std[i] = t->std[i];
	}
	tf->to_float32 = 1;
	tf->scale = t->scale;
	tf->nchannels = (uint32_t)n;
	tf->channel_elems = ds->sample_bytes / dtype_size(ds->dtype) /
	    (n > 1 ? n : 1);
	tf->out_sample_bytes = ds->sample_bytes / dtype_size(ds->dtype) *
	    sizeof(float);
	return (0);
}

/* The dtype of the rows in the ring. */
enum infeed_dtype
transform_out_dtype(const struct transform *tf, const struct dataset *ds)
{
	return (tf->to_float32 ? INFEED_DTYPE_FLOAT32 : ds->dtype);
}

/* Whether transform_row() wants a lookup table. */
int
transform_needs_lut(const struct transform *tf)
{
	return (tf->to_float32 && tf->in_dtype == INFEED_DTYPE_UINT8);
}

/* The per-channel lookup table for uint8 -> float32. */
float *
transform_lut_new(const struct transform *tf)
{
	float		*lut;
	unsigned	 c, v, nch = tf->nchannels ? tf->nchannels : 1;
	float		 mean, std;

	if (!transform_needs_lut(tf) ||
	    (lut = malloc(sizeof(float) * 256 * nch)) == NULL)
		return (NULL);
	for (c = 0; c < nch; c++) {
		mean = tf->nchannels ? tf->mean[c] : 0.0f;
		std = tf->nchannels ? tf->std[c] : 1.0f;
		for (v = 0; v < 256; v++)
			lut[c * 256 + v] = ((float)v * tf->scale - mean) / std;
	}
	return (lut);
}

/* Convert one sample into the slot's float32 row. */
void
transform_row(const struct transform *tf, const float *lut,
    const uint8_t *in, float *out)
{
	uint64_t	 e, n, c, per;
	const float	*fin = (const float *)(const void *)in;
	const float	*l;
	float		 mean, std;

	n = tf->out_sample_bytes / sizeof(float);
	per = tf->channel_elems ? tf->channel_elems : n;
	for (e = 0; e < n; e++) {
		c = tf->nchannels > 1 ? e / per : 0;
		if (tf->in_dtype == INFEED_DTYPE_UINT8) {
			l = lut + c * 256;
			out[e] = l[in[e]];
		} else {
			mean = tf->nchannels ? tf->mean[c] : 0.0f;
			std = tf->nchannels ? tf->std[c] : 1.0f;
			out[e] = (fin[e] * tf->scale - mean) / std;
		}
	}
}
