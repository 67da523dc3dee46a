/* SPDX-License-Identifier: MIT */
/*
 * The configuration file: [infeedd] settings and one [dataset NAME]
 * section per catalogue entry, read with inih.  A bad file is refused as a
 * whole, with a message naming the line and what was expected.
 */
#ifndef INFEED_CONFIG_H
#define INFEED_CONFIG_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "io-batch.h"

/*
 * read_ahead = auto: 16 steps, at most 64 MiB and an eighth of
 * memory_budget (docs/performance.md, issue 36 round two, measures it).
 */
#define CONFIG_READ_AHEAD_AUTO_STEPS	16
#define CONFIG_READ_AHEAD_AUTO_BYTES	(64ULL << 20)
#define CONFIG_READ_AHEAD_MAX_STEPS	1024

struct config {
	char			*path;
	char			*socket_path;
	unsigned		 workers;	/* worker processes; auto: to start */
	bool			 workers_auto;	/* workers = auto (autotune.h) */
	unsigned		 max_clients;
	uint32_t		 max_frame_size;
	uint64_t		 memory_budget;	/* bytes, all step rings */
	uint64_t		 group_window;	/* bytes, a group's past steps;
						   CONFIG_GROUP_WINDOW_AUTO */
	uint64_t		 group_linger_ms; /* a group's store, after it */
	uint32_t		 job_timeout_ms; /* per row; then stuck */
	uint64_t		 image_memory_max; /* one image's decode */
	uint32_t		 keep_ring_ms;	/* ended sessions' ring memory */
	enum io_backend		 io_backend;	/* reads in flight: io-batch.h */
	/*
	 * read_ahead: steps past the ring a session's rows are read ahead
	 * (into the page cache), and the bytes of those steps at most;
	 * CONFIG_READ_AHEAD_AUTO's figures unless set.
	 */
	uint32_t		 read_ahead_steps;
	uint64_t		 read_ahead_bytes;
	char			*metrics_host;	/* NULL: no metrics endpoint */
	uint16_t		 metrics_port;
	char			*cache_dir;	/* remote datasets' cache; NULL: none */
	uint64_t		 cache_max;	/* bytes of it */
	struct dataset_conf	*datasets;
	size_t			 ndatasets;
};

/*
 * group_window = auto (the default): a window only for groups that decode
 * images, whose steps cost far more to make again than to keep; a raw
 * array's catch-up is a gather like the window's read, and a window would
 * only add the first touch of its slots to every session that shares.
 */
#define CONFIG_GROUP_WINDOW_AUTO	UINT64_MAX
#define CONFIG_GROUP_WINDOW_IMAGES	(1ULL << 30)

/*
 * A group of images also keeps a store of its past steps (group-store.h)
 * of up to group_store bytes: with auto, CONFIG_GROUP_STORE_IMAGES (two
 * epochs of 1,500 images at 224 x 224 float32 take 1.7 GiB), and
 * group_window's bytes when that is set, unless group_linger is off
 * (auto, the default: CONFIG_GROUP_LINGER_AUTO_MS, a sweep's or an
 * evaluation's next trainer starts within that).  Images that end in
 * ToTensor are kept as uint8 in pages kept from step to step and store
 * to store, which costs a lone trainer about 0.7 ms of infeedd's CPU a
 * step (docs/performance.md, issue 35 round six; a third of its speed
 * as float32 in new pages, round three).
 * It lingers that long after the group's last member leaves, charged to
 * memory_budget, and gives way to any ring that needs the budget.
 */
#define CONFIG_GROUP_STORE_IMAGES	(2ULL << 30)
#define CONFIG_GROUP_LINGER_AUTO_MS	30000
#define CONFIG_MAX_GROUP_LINGER_MS	(24ULL * 3600 * 1000)

/*
 * The CPUs the daemon may use: the least of its affinity mask and its
 * cgroup's CPU quota (its own cgroup's and every parent's: cgroup v2's
 * cpu.max, or, on a v1 host, the cpu controller's cfs_quota_us over
 * cfs_period_us), never the host's count; containers, Slurm and taskset
 * limit a daemon in these.
 */
struct config_cpus {
	unsigned	n;		/* 1 to INFEED_MAX_WORKERS */
	unsigned	affinity;	/* CPUs in the affinity mask */
	double		quota;		/* cpu.max in CPUs; 0: no quota */
	char		why[96];	/* "cgroup cpu.max 1.5 CPUs, affinity 2" */
};

/**
 * config_cpu_max_parse() - a cgroup v2 cpu.max line, "QUOTA PERIOD" or
 * "max PERIOD", into *@cpus (QUOTA / PERIOD; 0 for "max": no quota).
 * Return: 0, or -1 when @text is not such a line.
 */
int		 config_cpu_max_parse(const char *text, double *cpus);

/**
 * config_cpus_from() - the CPUs of affinity mask @mask (@setsize bytes)
 * bounded by the quota files under @cgroup_root (cpu.max; v1: under its
 * cpu/) of the cgroup that @proc_cgroup (the text of /proc/self/cgroup)
 * names, and its parents' (a quota rounded up: 1.5 CPUs is 2 workers); a
 * file that is missing or malformed bounds nothing.  @proc_cgroup may be
 * NULL (no cgroup).
 */
void		 config_cpus_from(const cpu_set_t *mask, size_t setsize,
		    const char *proc_cgroup, const char *cgroup_root,
		    struct config_cpus *out);

/**
 * config_ncpus() - the CPUs this process may use now (config_cpus_from()
 * with its own affinity, /proc/self/cgroup and /sys/fs/cgroup): the
 * default worker count, and the most that workers = auto starts.
 */
unsigned	 config_ncpus(struct config_cpus *out);

/**
 * config_load() - read and check the file at @path.
 * Return: the configuration, or NULL with *@cause set (malloc'd).
 */
struct config	*config_load(const char *path, char **cause);

/**
 * config_copy() - a copy of @conf that config_free() frees on its own:
 * what a reload that does not read the file starts from.
 */
struct config	*config_copy(const struct config *conf);

/**
 * config_dataset_copy() - @src's name, source and keys, copied into @dst.
 */
void		 config_dataset_copy(struct dataset_conf *dst,
		    const struct dataset_conf *src);

/**
 * config_dataset_clear() - free what section @dc holds, and zero it.
 */
void		 config_dataset_clear(struct dataset_conf *dc);

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
