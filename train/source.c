/* SPDX-License-Identifier: MIT */
/*
 * source.c - device steps from infeedd or synthetic data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source.h"
#include "splitmix64.h"

/*
 * Connect and attach to @dataset with @o; its class count in *@classes.
 * -1 with @err, and s->f freed, otherwise.
 */
static int
source_attach(struct source *s, const char *socket_path, const char *dataset,
    const struct infeed_options *o, int *classes, char *err, size_t errlen)
{
	struct infeed_options opts = *o;
	struct infeed_dataset *list = NULL;
	size_t n = 0;
	size_t i;

	memset(s, 0, sizeof(*s));
	*classes = 0;
	if ((s->f = infeed_new()) == NULL) {
		snprintf(err, errlen, "out of memory");
		return (-1);
	}
	if (infeed_connect(s->f, socket_path, "infeed-train") != INFEED_OK ||
	    infeed_list_datasets(s->f, &list, &n) != INFEED_OK) {
		snprintf(err, errlen, "%s", infeed_error(s->f));
		goto fail;
	}
	for (i = 0; i < n; i++) {
		if (strcmp(list[i].name, dataset) != 0)
			continue;
		*classes = (int)list[i].classes;
		/* float32 samples need no conversion: spare the workers. */
		if (opts.to_float32 && opts.scale == 1.0f &&
		    opts.nchannels == 0 && list[i].dtype == INFEED_DTYPE_FLOAT32)
			opts.to_float32 = false;
	}
	infeed_datasets_free(list, n);
	if (infeed_attach(s->f, dataset, &opts, &s->info) != INFEED_OK) {
		snprintf(err, errlen, "dataset %s: %s", dataset,
		    infeed_error(s->f));
		goto fail;
	}
	return (0);
fail:
	infeed_free(s->f);
	s->f = NULL;
	return (-1);
}

/* Connect, attach and check the sample shape against the model's input. */
int
source_open_infeed(struct source *s, const char *socket_path,
    const char *dataset, const struct infeed_options *o, const struct model *m,
    char *err, size_t errlen)
{
	const struct infeed_session_info *in = &s->info;
	uint64_t elems = 1;
	uint32_t d;
	int classes;

	if (source_attach(s, socket_path, dataset, o, &classes, err,
	    errlen) == -1)
		return (-1);
	for (d = 0; d < in->ndim; d++)
		elems *= in->sample_shape[d];
	if (in->data_dtype != INFEED_DTYPE_FLOAT32 ||
	    elems != shape_size(m->input)) {
		snprintf(err, errlen, "dataset %s has samples of %llu %s "
		    "values, but %s takes %d x %d x %d float32 values; "
		    "pick a dataset of that shape (infeedctl datasets "
		    "lists them)", dataset, (unsigned long long)elems,
		    infeed_dtype_name(in->data_dtype), m->name,
		    m->input.c, m->input.h, m->input.w);
		source_close(s);
		return (-1);
	}
	return (0);
}

/* Attach once with the pipeline to learn the rows' shape and classes. */
int
source_probe_images(const char *socket_path, const char *dataset,
    const struct infeed_options *o, struct shape *input, int *classes,
    char *err, size_t errlen)
{
	const struct infeed_session_info *in;
	struct source s;
	int rc = -1;

	if (source_attach(&s, socket_path, dataset, o, classes, err,
	    errlen) == -1)
		return (-1);
	in = &s.info;
	if (in->data_dtype != INFEED_DTYPE_FLOAT32 || in->ndim != 3 ||
	    in->sample_shape[0] != 3 || in->sample_shape[1] > 65536 ||
	    in->sample_shape[2] > 65536) {
		snprintf(err, errlen, "dataset %s: the pipeline gives %s rows "
		    "of %u dimensions; the model takes float32 [3, H, W]: end "
		    "the pipeline with ToTensor() (and Normalize)", dataset,
		    infeed_dtype_name(in->data_dtype), in->ndim);
		goto out;
	}
	*input = (struct shape){ 3, (int)in->sample_shape[1],
	    (int)in->sample_shape[2] };
	rc = 0;
out:
	source_close(&s);
	return (rc);
}

/* Random steps made once, as poptorch's synthetic data. */
int
source_open_synthetic(struct source *s, const struct model *m, size_t rows,
    uint64_t steps_per_epoch, uint64_t seed, char *err, size_t errlen)
{
	size_t n = rows * shape_size(m->input);
	uint64_t x = seed;
	size_t i;

	memset(s, 0, sizeof(*s));
	s->synthetic = true;
	s->rows = rows;
	s->steps_per_epoch = steps_per_epoch ? steps_per_epoch : 1;
	s->data = malloc(n * sizeof(float));
	s->labels = malloc(rows * sizeof(int32_t));
	if (s->data == NULL || s->labels == NULL) {
		snprintf(err, errlen, "out of memory for %zu synthetic rows",
		    rows);
		source_close(s);
		return (-1);
	}
	for (i = 0; i < n; i++)
		s->data[i] = (float)(splitmix64_next(&x) >> 40) / (1 << 24) - 0.5f;
	for (i = 0; i < rows; i++)
		s->labels[i] = (int32_t)(splitmix64_next(&x) % m->classes);
	return (0);
}

/* The next step from infeedd or the synthetic source. */
int
source_next(struct source *s, const float **data, const int32_t **labels,
    size_t *rows, char *err, size_t errlen)
{
	int rc;

	if (s->synthetic) {
		if (s->next_step == s->steps_per_epoch) {
			s->next_step = 0;
			return (1);
		}
		s->next_step++;
		*data = s->data;
		*labels = s->labels;
		*rows = s->rows;
		return (0);
	}
	rc = infeed_next(s->f, &s->step);
	if (rc == INFEED_END_OF_DATA)
		return (1);
	if (rc != INFEED_OK) {
		snprintf(err, errlen, "infeedd: %s", infeed_error(s->f));
		return (-1);
	}
	s->held = true;
	*data = s->step.data;
	*labels = s->step.labels;
	*rows = s->step.rows;
	return (0);
}

/* Hand the current step back to infeedd. */
void
source_release(struct source *s)
{
	if (s->held)
		infeed_release(s->f, &s->step);
	s->held = false;
}

/* Detach and free; safe to call twice. */
void
source_close(struct source *s)
{
	source_release(s);
	infeed_free(s->f);
	free(s->data);
	free(s->labels);
	memset(s, 0, sizeof(*s));
}

/* Read every byte of a step, as the host link's DMA would. */
uint64_t
host_transfer(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t a = 0, c = 0, w0, w1;
	size_t i;

	/* Two independent accumulators keep the loads pipelined; memcpy is
	 * a plain load and makes no alignment assumption. */
	for (i = 0; i + 16 <= len; i += 16) {
		memcpy(&w0, b + i, 8);
		memcpy(&w1, b + i + 8, 8);
		a += w0;
		c ^= w1;
	}
	for (; i < len; i++)
		a += b[i];
	return (a ^ c);
}
