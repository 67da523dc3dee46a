/* SPDX-License-Identifier: MIT */
/*
 * The configuration file: [infeedd] settings and one [dataset NAME]
 * section per catalogue entry, read with inih.  A bad file is refused as a
 * whole, with a message naming the line and what was expected.
 */
#ifndef INFEED_CONFIG_H
#define INFEED_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"

struct config {
	char			*path;
	char			*socket_path;
	unsigned		 workers;	/* worker processes */
	unsigned		 max_clients;
	uint32_t		 max_frame_size;
	uint64_t		 memory_budget;	/* bytes, all step rings */
	uint32_t		 job_timeout_ms; /* per row; then stuck */
	uint64_t		 image_memory_max; /* one image's decode */
	uint32_t		 keep_ring_ms;	/* ended sessions' ring memory */
	char			*metrics_host;	/* NULL: no metrics endpoint */
	uint16_t		 metrics_port;
	struct dataset_conf	*datasets;
	size_t			 ndatasets;
};

/**
 * config_load() - read and check the file at @path.
 * Return: the configuration, or NULL with *@cause set (malloc'd).
 */
struct config	*config_load(const char *path, char **cause);

/**
 * config_free() - free @conf; NULL is a no-op.
 */
void		 config_free(struct config *conf);

/**
 * config_parse_size() - "4G", "512K", "1048576" into bytes.
 * Return: 0, or -1 when @s is not a size.
 */
int		 config_parse_size(const char *s, uint64_t *out);

#endif /* INFEED_CONFIG_H */
