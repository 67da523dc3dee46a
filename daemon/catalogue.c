/* SPDX-License-Identifier: MIT */
/*
 * The catalogue: the datasets that infeedd serves, opened from the
 * configuration.  A dataset whose files are bad is refused with a log line
 * naming the file and the fault; the rest of the catalogue is served.
 */

#include <stdlib.h>
#include <string.h>

#include "daemon.h"

/* Open every dataset the configuration names. */
struct catalogue *
catalogue_open(const struct config *conf)
{
	struct catalogue	*cat;
	struct dataset		*ds;
	char			*cause;
	size_t			 i;

	cat = xcalloc(1, sizeof(*cat));
	cat->datasets = xcalloc(conf->ndatasets + 1, sizeof(*cat->datasets));
	for (i = 0; i < conf->ndatasets; i++) {
		cause = NULL;
		ds = dataset_open(&conf->datasets[i], &cause);
		if (ds == NULL) {
			log_warnx("dataset '%s' refused: %s",
			    conf->datasets[i].name,
			    cause ? cause : "unknown error");
			free(cause);
			continue;
		}
		log_info("dataset '%s': %s, %llu samples of %s[%llu bytes]",
		    ds->name, ds->type, (unsigned long long)ds->samples,
		    dtype_name(ds->dtype), (unsigned long long)ds->sample_bytes);
		cat->datasets[cat->ndatasets++] = ds;
	}
	return (cat);
}

/* Close every dataset; NULL is a no-op. */
void
catalogue_free(struct catalogue *cat)
{
	size_t	i;

	if (cat == NULL)
		return;
	for (i = 0; i < cat->ndatasets; i++)
		dataset_free(cat->datasets[i]);
	free(cat->datasets);
	free(cat);
}

/* Look a dataset up by name. */
struct dataset *
catalogue_find(const struct catalogue *cat, const char *name, size_t *index)
{
	size_t	i;

	for (i = 0; i < cat->ndatasets; i++) {
		if (strcmp(cat->datasets[i]->name, name) == 0) {
			if (index != NULL)
				*index = i;
			return (cat->datasets[i]);
		}
	}
	return (NULL);
}
