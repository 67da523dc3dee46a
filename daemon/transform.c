/* SPDX-License-Identifier: MIT */
/*
 * Transforms: checked once in the main process, applied by the workers to
 * every row.  Nothing here allocates on the per-row path, except an image
 * row's buffers, which grow with the image up to TRANSFORM_KEEP and stay,
 * or are given back after an image larger than that.
 */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image-decode.h"
#include "log.h"
#include "splitmix64.h"
#include "transform.h"
#include "xmalloc.h"

/* Other samples tried, in a fixed order, in place of a bad image. */
#define TRANSFORM_REPLACE_TRIES	8
/* An image's buffers are kept up to this for the next one. */
#define TRANSFORM_KEEP		(16u << 20)

struct transform_work {
	struct image_decoder	*dec;
	struct dataset_buf	 enc;		/* the encoded image */
	uint8_t			*pix;		/* its decoded box, RGB8 */
	size_t			 pixcap;
	struct image_work	 iw;
	uint64_t		 memory_max;	/* 0: no cap */
};

/* Check an image dataset's pipeline and describe it for the workers. */
static int
transform_init_image(struct transform *tf, const struct transform_spec *t,
    const struct dataset *ds, char **cause)
{
	char	*why = NULL;

	if (t == NULL || t->pipeline == NULL) {
		*cause = xasprintf("transform: '%s' holds images of different "
		    "sizes (type %s); attach with a pipeline that makes them "
		    "one size, such as \"RandomResizedCrop(224), "
		    "RandomHorizontalFlip(), ToTensor()\" to train or "
		    "\"Resize(256), CenterCrop(224), ToTensor()\" to "
		    "evaluate", ds->name, ds->type);
		return (-1);
	}
	if (t->to_float32 || t->nmean || t->nstd || t->scale != 1.0f) {
		*cause = xasprintf("transform: to_float32, scale, mean and std "
		    "are for array datasets; for images, end the pipeline "
		    "with ToTensor() and Normalize(mean, std)");
		return (-1);
	}
	if (image_pipeline_parse(t->pipeline, &tf->pipeline, &why) == -1) {
		*cause = xasprintf("transform: %s", why ? why : "cannot parse "
		    "the pipeline");
		free(why);
		return (-1);
	}
	tf->image = 1;
	tf->in_sample_bytes = 0;
	tf->out_sample_bytes = tf->pipeline.out_bytes;
	return (0);
}

/* Check the client's transform and describe it for the workers. */
int
transform_init(struct transform *tf, const struct transform_spec *t,
    const struct dataset *ds, char **cause)
{
	size_t	i, n;

	memset(tf, 0, sizeof(*tf));
	tf->in_dtype = ds->dtype;
	tf->in_sample_bytes = ds->sample_bytes;
	tf->out_sample_bytes = ds->sample_bytes;
	tf->scale = 1.0f;
	if (ds->encoded)
		return (transform_init_image(tf, t, ds, cause));
	if (t != NULL && t->pipeline != NULL) {
		*cause = xasprintf("transform: '%s' holds arrays (type %s), "
		    "and a pipeline such as RandomResizedCrop(224) is for "
		    "image datasets (type imagefolder or tar); convert arrays "
		    "with to_float32, scale, mean and std", ds->name,
		    ds->type);
		return (-1);
	}
	if (t == NULL || !t->to_float32) {
		if (t != NULL && (t->nmean || t->nstd || t->scale != 1.0f)) {
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
	n = t->nmean;
	if (n != t->nstd) {
		*cause = xasprintf("transform: %zu mean values but %zu std "
		    "values; give one of each per channel", t->nmean,
		    t->nstd);
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
	/* float32 kept as it is: read straight into the ring, no copy. */
	if (ds->dtype == INFEED_DTYPE_FLOAT32 && n == 0 && t->scale == 1.0f)
		return (0);
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
	if (tf->image)
		return (tf->pipeline.output == IMAGE_OUT_FLOAT32_CHW ?
		    INFEED_DTYPE_FLOAT32 : INFEED_DTYPE_UINT8);
	return (tf->to_float32 ? INFEED_DTYPE_FLOAT32 : ds->dtype);
}

/* The shape of one row in the ring: the dataset's, or the pipeline's. */
uint32_t
transform_out_shape(const struct transform *tf, const struct dataset *ds,
    uint64_t shape[INFEED_MAX_DIMS])
{
	const struct image_pipeline *p = &tf->pipeline;

	if (!tf->image) {
		memcpy(shape, ds->shape, ds->ndim * sizeof(*shape));
		return (ds->ndim);
	}
	if (p->output == IMAGE_OUT_UINT8_HWC) {
		shape[0] = p->out_h;
		shape[1] = p->out_w;
		shape[2] = 3;
	} else {
		shape[0] = 3;
		shape[1] = p->out_h;
		shape[2] = p->out_w;
	}
	return (3);
}

/* A worker's image state. */
struct transform_work *
transform_work_new(uint64_t memory_max)
{
	struct transform_work	*w;

	w = xcalloc(1, sizeof(*w));
	if ((w->dec = image_decoder_new()) == NULL)
		fatalx("worker: out of memory for an image decoder");
	w->memory_max = memory_max;
	image_decoder_set_memory_max(w->dec, memory_max);
	return (w);
}

/* After an image larger than TRANSFORM_KEEP, give its buffers back. */
static void
transform_work_trim(struct transform_work *w)
{
	if (w->pixcap > TRANSFORM_KEEP) {
		free(w->pix);
		w->pix = NULL;
		w->pixcap = 0;
	}
	if (w->iw.cap > TRANSFORM_KEEP) {
		free(w->iw.buf);
		w->iw.buf = NULL;
		w->iw.cap = 0;
	}
	if (w->enc.cap > TRANSFORM_KEEP)
		dataset_buf_free(&w->enc);
}

/* Free a worker's image state; NULL is a no-op. */
void
transform_work_free(struct transform_work *w)
{
	if (w == NULL)
		return;
	image_decoder_free(w->dec);
	dataset_buf_free(&w->enc);
	free(w->pix);
	image_work_free(&w->iw);
	free(w);
}

/* Read, decode and transform image @index; -1 with @reason when bad. */
static int
transform_image_one(const struct transform *tf, struct transform_work *w,
    const struct dataset *ds, uint64_t epoch, uint64_t index, void *out,
    int64_t *label, uint64_t *bytes, char *reason, size_t len)
{
	struct image_info	info;
	struct image_plan	plan;
	size_t			stride, need;
	char			why[512];
	int			rc = 0;

	if (dataset_read_encoded(ds, index, &w->enc, label) == -1) {
		/* A remote shard's reader says which URL and what failed. */
		if (errno == EIO && dataset_why_set())
			snprintf(reason, len, "cannot read it: %s",
			    dataset_short_why(why, sizeof why));
		else
			snprintf(reason, len, "cannot read it (%s)",
			    errno == EXDEV ? "it is reached through a symlink "
			    "that the dataset's follow_symlinks refuses" :
			    strerror(errno));
		transform_work_trim(w);
		return (-1);
	}
	*bytes += w->enc.len;
	if (image_open(w->dec, w->enc.p, w->enc.len, &info) == -1) {
		snprintf(reason, len, "%s", image_decoder_error(w->dec));
		transform_work_trim(w);
		return (-1);
	}
	image_plan_make(&tf->pipeline, info.width, info.height, tf->seed,
	    epoch, index, &plan);
	/* The box is inside an image of at most IMAGE_MAX_PIXELS. */
	stride = (size_t)plan.decode.w * 3;
	need = stride * plan.decode.h;
	if (w->memory_max != 0 && need > w->memory_max) {
		snprintf(reason, len, "image needs %llu MiB to decode (its "
		    "%ux%u RGB box), above image_memory_max (%llu MiB)",
		    (unsigned long long)((need + (1u << 20) - 1) >> 20),
		    plan.decode.w, plan.decode.h,
		    (unsigned long long)(w->memory_max >> 20));
		transform_work_trim(w);
		return (-1);
	}
	if (need > w->pixcap) {
		free(w->pix);
		w->pixcap = 0;
		if ((w->pix = malloc(need)) == NULL) {
			snprintf(reason, len, "out of memory (%zu bytes to "
			    "decode it)", need);
			transform_work_trim(w);
			return (-1);
		}
		w->pixcap = need;
	}
	if (need > 0 && image_decode_region(w->dec, plan.decode.x,
	    plan.decode.y, plan.decode.w, plan.decode.h, w->pix, stride) ==
	    -1) {
		snprintf(reason, len, "%s", image_decoder_error(w->dec));
		rc = -1;
	} else if (image_plan_run(&tf->pipeline, &plan, w->pix, stride, out,
	    &w->iw) == -1) {
		snprintf(reason, len, "out of memory transforming it");
		rc = -1;
	}
	transform_work_trim(w);
	return (rc);
}

/* One image row, or a replacement for a bad one. */
int
transform_image_row(const struct transform *tf, struct transform_work *w,
    const struct dataset *ds, uint64_t epoch, uint64_t index, void *out,
    int64_t *label, uint64_t *bytes, uint32_t *replaced, char *reason,
    size_t len)
{
	char		 other[256], where[512];
	uint64_t	 state, alt;
	unsigned	 k;

	if (transform_image_one(tf, w, ds, epoch, index, out, label, bytes,
	    reason, len) == 0)
		return (0);
	if (!tf->bad_replace || ds->samples < 2)
		return (-1);
	/* The same replacement whichever worker meets it, every epoch. */
	state = tf->seed ^ splitmix64_mix(index + 1);
	for (k = 0; k < TRANSFORM_REPLACE_TRIES; k++) {
		alt = splitmix64_next(&state) % ds->samples;
		if (alt == index)
			continue;
		if (transform_image_one(tf, w, ds, epoch, alt, out, label,
		    bytes, other, sizeof(other)) == 0) {
			log_warnx("dataset '%s': sample %llu, %s: %s; replaced "
			    "by sample %llu (bad_samples = replace)", ds->name,
			    (unsigned long long)index, dataset_sample_where(ds,
			    index, where, sizeof(where)), reason,
			    (unsigned long long)alt);
			(*replaced)++;
			return (0);
		}
	}
	return (-1);
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
