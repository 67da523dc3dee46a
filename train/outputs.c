/* SPDX-License-Identifier: MIT */
/*
 * outputs.c - poptorch's OutputMode applied to a step's outputs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outputs.h"

/* Parse "all", "final", "sum", "every-N". */
int
output_mode_parse(const char *s, struct output_spec *spec, char *err,
    size_t errlen)
{
	char *end;
	long n;

	spec->every = 1;
	if (strcmp(s, "all") == 0)
		spec->mode = OUTPUT_ALL;
	else if (strcmp(s, "final") == 0)
		spec->mode = OUTPUT_FINAL;
	else if (strcmp(s, "sum") == 0)
		spec->mode = OUTPUT_SUM;
	else if (strncmp(s, "every-", 6) == 0 &&
	    (n = strtol(s + 6, &end, 10), *end == '\0') && end != s + 6 &&
	    n >= 1 && n <= 1 << 20) {
		spec->mode = OUTPUT_EVERY_N;
		spec->every = (int)n;
	} else {
		snprintf(err, errlen, "unknown output mode '%s': use all, "
		    "final, sum or every-N (N a positive number of "
		    "device iterations), as poptorch.OutputMode", s);
		return (-1);
	}
	return (0);
}

/* Name an output mode, as --output-mode takes it. */
const char *
output_mode_name(const struct output_spec *spec, char *buf, size_t len)
{
	static const char *names[] = { "final", "every-", "all", "sum" };

	if (spec->mode == OUTPUT_EVERY_N)
		snprintf(buf, len, "every-%d", spec->every);
	else
		snprintf(buf, len, "%s", names[spec->mode]);
	return (buf);
}

/* Check an output mode against the device iterations. */
int
output_mode_check(const struct output_spec *spec, int device_iterations,
    char *err, size_t errlen)
{
	if (spec->mode != OUTPUT_EVERY_N)
		return (0);
	if (spec->every > device_iterations ||
	    device_iterations % spec->every != 0) {
		snprintf(err, errlen, "output mode every-%d needs N to divide "
		    "the device iterations (%d) and not exceed them; "
		    "try every-1 or every-%d", spec->every,
		    device_iterations, device_iterations);
		return (-1);
	}
	return (0);
}

/* Free what outputs_select() allocated. */
void
host_outputs_free(struct host_outputs *out)
{
	free(out->loss);
	free(out->preds);
	free(out->pred_labels);
	memset(out, 0, sizeof(*out));
}

/* Copy micro-batch @idx's logits and labels to the end of @out. */
static void
take_micro(struct host_outputs *out, const struct step_outputs *all,
    const int32_t *labels, size_t idx, int B, int classes)
{
	size_t row0 = idx * B, n = all->micro_rows[idx];

	memcpy(out->preds + out->pred_rows * classes,
	    all->logits + row0 * classes, n * classes * sizeof(float));
	memcpy(out->pred_labels + out->pred_rows, labels + row0,
	    n * sizeof(int32_t));
	out->pred_rows += n;
}

/* Keep the outputs that @spec returns to the host. */
int
outputs_select(const struct output_spec *spec, const struct step_outputs *all,
    const int32_t *labels, int B, int M, int R, int D, int classes,
    struct host_outputs *out)
{
	size_t b_dim, i, m;
	int r;

	host_outputs_free(out);
	switch (spec->mode) {
	case OUTPUT_ALL:
		b_dim = (size_t)R * D * M;
		break;
	case OUTPUT_EVERY_N:
		b_dim = (size_t)R * D * M / spec->every;
		break;
	default:
		b_dim = R;
		break;
	}
	out->b_dim = b_dim;
	out->loss_is_scalar = b_dim == 1;
	out->loss = calloc(b_dim, sizeof(float));
	out->preds = calloc(b_dim * B * classes, sizeof(float));
	out->pred_labels = calloc(b_dim * B, sizeof(int32_t));
	if (out->loss == NULL || out->preds == NULL ||
	    out->pred_labels == NULL) {
		host_outputs_free(out);
		return (-1);
	}

	switch (spec->mode) {
	case OUTPUT_ALL:
		for (i = 0; i < all->nmicro && i < b_dim; i++) {
			out->loss[i] = all->losses[i];
			take_micro(out, all, labels, i, B, classes);
		}
		break;
	case OUTPUT_EVERY_N: {
		size_t j = 0, per_iter = (size_t)M * R;
		int it;
		size_t k;

		for (it = spec->every - 1; it < D; it += spec->every)
			for (k = 0; k < per_iter; k++) {
				m = it * per_iter + k;
				if (m >= all->nmicro)
					break;
				out->loss[j++] = all->losses[m];
				take_micro(out, all, labels, m, B, classes);
			}
		break;
	}
	case OUTPUT_FINAL:
		/* The last micro-batch of each replica: the last R. */
		for (r = 0; r < R; r++) {
			m = all->nmicro - R + r;
			if (all->nmicro < (size_t)R)
				break;
			out->loss[r] = all->losses[m];
			take_micro(out, all, labels, m, B, classes);
		}
		break;
	case OUTPUT_SUM:
		/* Replica r's micro-batches are every R-th, from r. */
		for (i = 0; i < all->nmicro; i++) {
			const float *q = all->logits + i * B * classes;
			float *p;
			size_t e;

			r = i % R;
			p = out->preds + (size_t)r * B * classes;
			out->loss[r] += all->losses[i];
			for (e = 0; e < (size_t)all->micro_rows[i] *
			    classes; e++)
				p[e] += q[e];
		}
		out->pred_rows = (size_t)R * B;
		free(out->pred_labels);
		out->pred_labels = NULL;
		break;
	}
	return (0);
}
