/* SPDX-License-Identifier: MIT */
/*
 * The configuration file, infeed.conf(5): INI, read with libinih.
 *
 *   [infeedd]            daemon settings (socket, workers, limits)
 *   [dataset NAME]       one catalogue entry; "type =" picks the reader and
 *                        the other keys are the reader's, checked (unknown
 *                        ones too) when the catalogue opens: a bad section
 *                        refuses that dataset, not the file
 *
 * A syntax error, an unknown section or key in [infeedd], a bad value or a
 * duplicate dataset name makes the whole file invalid: config_load returns
 * NULL with a cause naming the file, the line where it can, and what was
 * expected.
 */

#include <arpa/inet.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ini.h>

#include "cache.h"
#include "config.h"
#include "number.h"
#include "paths.h"
#include "xmalloc.h"

#define CONFIG_DEFAULT_MAX_CLIENTS	256
#define CONFIG_DEFAULT_BUDGET		(4ULL << 30)
#define CONFIG_DEFAULT_JOB_TIMEOUT_MS	30000
#define CONFIG_MAX_JOB_TIMEOUT_MS	(24U * 3600 * 1000)
#define CONFIG_DEFAULT_IMAGE_MEMORY	(256ULL << 20)
#define CONFIG_MIN_IMAGE_MEMORY		(16ULL << 20)
#define CONFIG_MAX_IMAGE_MEMORY		(64ULL << 30)
#define CONFIG_DEFAULT_CACHE_MAX	(10ULL << 30)
#define CONFIG_DEFAULT_KEEP_RING_MS	(10U * 60 * 1000)
#define CONFIG_MAX_KEEP_RING_MS		(7U * 24 * 3600 * 1000)

static const char *const config_daemon_keys[] = {
	"socket", "workers", "max_clients", "max_frame_size", "memory_budget",
	"group_window", "group_linger", "job_timeout", "image_memory_max",
	"keep_ring_memory", "metrics_listen", "io_backend", "read_ahead",
	"cache_dir", "cache_max", NULL,
};

/*
 * The metrics port when metrics_listen names only an address: outside the
 * range 9100-9999 that Prometheus' exporters have taken (all of it, since
 * 2023), and below the kernel's ephemeral ports.
 */
#define CONFIG_DEFAULT_METRICS_PORT	10099

/* State while libinih walks the file. */
struct config_parse {
	struct config	*conf;
	FILE		*fp;
	int		 line;		/* read so far; inih does not say */
	char		*error;
	int		 error_line;	/* where config_handler set error */
	char		*section;	/* of the previous key */
};

/* Parse a byte count with an optional K, M, G or T suffix (powers of 1024). */
int
config_parse_size(const char *s, uint64_t *out)
{
	const char	*end;
	uint64_t	 v;
	unsigned	 shift = 0;

	if (number_scan_u64(s, &v, &end) != 0)
		return (-1);
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	default:
		return (-1);
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
		return (-1);
	*out = (uint64_t)v << shift;
	return (0);
}

/*
 * read_ahead = auto | off | N steps | SIZE into @conf: steps and bytes,
 * the other one unbounded (auto: both).  Return: 0, or -1 when malformed.
 */
static int
config_read_ahead(const char *value, struct config *conf)
{
	const char	*end;
	uint64_t	 v;

	if (strcmp(value, "auto") == 0) {
		conf->read_ahead_steps = CONFIG_READ_AHEAD_AUTO_STEPS;
		conf->read_ahead_bytes = CONFIG_READ_AHEAD_AUTO_BYTES;
		return (0);
	}
	if (strcmp(value, "off") == 0 || strcmp(value, "0") == 0) {
		conf->read_ahead_steps = 0;
		conf->read_ahead_bytes = 0;
		return (0);
	}
	if (number_scan_u64(value, &v, &end) == 0 && v >= 1 &&
	    v <= CONFIG_READ_AHEAD_MAX_STEPS && (strcmp(end, " steps") == 0 ||
	    strcmp(end, " step") == 0)) {
		conf->read_ahead_steps = (uint32_t)v;
		conf->read_ahead_bytes = UINT64_MAX;
		return (0);
	}
	if (config_parse_size(value, &v) == 0 && v > 0) {
		conf->read_ahead_steps = CONFIG_READ_AHEAD_MAX_STEPS;
		conf->read_ahead_bytes = v;
		return (0);
	}
	return (-1);
}

/* Parse a duration: "500ms", "30s", "2m", "1h" or plain seconds, in ms. */
static int
config_parse_duration(const char *s, uint64_t *ms)
{
	const char	*end;
	uint64_t	 v, mul;

	if (number_scan_u64(s, &v, &end) != 0)
		return (-1);
	if (strcmp(end, "ms") == 0)
		mul = 1;
	else if (*end == '\0' || strcmp(end, "s") == 0)
		mul = 1000;
	else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
		mul = 60000;
	else if (strcmp(end, "h") == 0)
		mul = 3600000;
	else
		return (-1);
	if (v > UINT64_MAX / mul)
		return (-1);
	*ms = v * mul;
	return (0);
}

/*
 * metrics_listen: "off", or an IPv4 or [IPv6] address with an optional
 * ":port" (0: any free port, for tests); -1 when it is none of those.
 */
static int
config_parse_listen(const char *value, struct config *conf)
{
	char		 host[64], buf[16];
	const char	*port = NULL, *end;
	uint64_t	 p = CONFIG_DEFAULT_METRICS_PORT;
	size_t		 n;

	if (strcmp(value, "off") == 0 || *value == '\0') {
		free(conf->metrics_host);
		conf->metrics_host = NULL;
		return (0);
	}
	if (*value == '[') {
		if ((end = strchr(value, ']')) == NULL)
			return (-1);
		n = (size_t)(end - value - 1);
		if (end[1] == ':')
			port = end + 2;
		else if (end[1] != '\0')
			return (-1);
		value++;
	} else {
		end = strrchr(value, ':');
		n = end != NULL ? (size_t)(end - value) : strlen(value);
		if (end != NULL)
			port = end + 1;
	}
	if (n == 0 || n >= sizeof(host))
		return (-1);
	memcpy(host, value, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, buf) != 1 &&
	    inet_pton(AF_INET6, host, buf) != 1)
		return (-1);
	if (port != NULL && number_parse_u64(port, 0, 65535, &p, NULL) != 0)
		return (-1);
	free(conf->metrics_host);
	conf->metrics_host = xstrdup(host);
	conf->metrics_port = (uint16_t)p;
	return (0);
}

/* Set one [infeedd] key. */
static int
config_set_daemon(struct config_parse *cp, const char *name,
    const char *value)
{
	struct config	*conf = cp->conf;
	const char	*guess;
	uint64_t	 v;

	if (strcmp(name, "socket") == 0) {
		if (*value != '/' || strlen(value) >= 108) {
			cp->error = xasprintf("[infeedd] socket = %s: expected "
			    "an absolute path shorter than 108 bytes", value);
			return (0);
		}
		free(conf->socket_path);
		conf->socket_path = xstrdup(value);
	} else if (strcmp(name, "workers") == 0) {
		conf->workers_auto = strcmp(value, "auto") == 0;
		if (conf->workers_auto)
			v = 1;	/* it starts with one and grows (autotune.h) */
		else if (number_parse_u64(value, 0, INFEED_MAX_WORKERS, &v,
		    NULL) == -1) {
			cp->error = xasprintf("[infeedd] workers = %s: expected "
			    "auto (the pool sizes itself) or a number of worker "
			    "processes from 0 (one per CPU) to %d", value,
			    INFEED_MAX_WORKERS);
			return (0);
		}
		conf->workers = (unsigned)v;
	} else if (strcmp(name, "max_clients") == 0) {
		if (number_parse_u64(value, 1, INFEED_MAX_CLIENTS, &v,
		    NULL) == -1) {
			cp->error = xasprintf("[infeedd] max_clients = %s: "
			    "expected a number from 1 to %d", value,
			    INFEED_MAX_CLIENTS);
			return (0);
		}
		conf->max_clients = (unsigned)v;
	} else if (strcmp(name, "max_frame_size") == 0) {
		if (config_parse_size(value, &v) == -1 ||
		    v < INFEED_MIN_MAX_FRAME || v > INFEED_MAX_MAX_FRAME) {
			cp->error = xasprintf("[infeedd] max_frame_size = %s: "
			    "expected a size from 4K to 64M", value);
			return (0);
		}
		conf->max_frame_size = (uint32_t)v;
	} else if (strcmp(name, "memory_budget") == 0) {
		if (config_parse_size(value, &v) == -1 || v == 0) {
			cp->error = xasprintf("[infeedd] memory_budget = %s: "
			    "expected a size such as 4G", value);
			return (0);
		}
		conf->memory_budget = v;
	} else if (strcmp(name, "group_window") == 0) {
		if (strcmp(value, "auto") == 0) {
			v = CONFIG_GROUP_WINDOW_AUTO;
		} else if (config_parse_size(value, &v) == -1 ||
		    v == CONFIG_GROUP_WINDOW_AUTO) {
			cp->error = xasprintf("[infeedd] group_window = %s: "
			    "expected auto, a size such as 1G, or 0 for none",
			    value);
			return (0);
		}
		conf->group_window = v;
	} else if (strcmp(name, "group_linger") == 0) {
		if (strcmp(value, "auto") == 0)
			v = CONFIG_GROUP_LINGER_AUTO_MS;
		else if (strcmp(value, "off") == 0 || strcmp(value, "0") == 0)
			v = 0;
		else if (config_parse_duration(value, &v) == -1 ||
		    v > CONFIG_MAX_GROUP_LINGER_MS) {
			cp->error = xasprintf("[infeedd] group_linger = %s: "
			    "expected auto, off, or a duration up to 24h such "
			    "as 30s", value);
			return (0);
		}
		conf->group_linger_ms = v;
	} else if (strcmp(name, "job_timeout") == 0) {
		if (config_parse_duration(value, &v) == -1 || v < 100 ||
		    v > CONFIG_MAX_JOB_TIMEOUT_MS) {
			cp->error = xasprintf("[infeedd] job_timeout = %s: "
			    "expected a duration from 100ms to 24h such as 30s "
			    "or 500ms", value);
			return (0);
		}
		conf->job_timeout_ms = (uint32_t)v;
	} else if (strcmp(name, "image_memory_max") == 0) {
		if (config_parse_size(value, &v) == -1 ||
		    v < CONFIG_MIN_IMAGE_MEMORY ||
		    v > CONFIG_MAX_IMAGE_MEMORY) {
			cp->error = xasprintf("[infeedd] image_memory_max = "
			    "%s: expected a size from 16M to 64G such as 256M",
			    value);
			return (0);
		}
		conf->image_memory_max = v;
	} else if (strcmp(name, "keep_ring_memory") == 0) {
		if (config_parse_duration(value, &v) == -1 ||
		    v > CONFIG_MAX_KEEP_RING_MS) {
			cp->error = xasprintf("[infeedd] keep_ring_memory = %s: "
			    "expected a duration up to 7 days such as 10min, "
			    "or 0 to free a ring's memory when its session "
			    "ends", value);
			return (0);
		}
		conf->keep_ring_ms = (uint32_t)v;
	} else if (strcmp(name, "io_backend") == 0) {
		if (io_backend_parse(value, &conf->io_backend) == -1) {
			cp->error = xasprintf("[infeedd] io_backend = %s: "
			    "expected auto (io_uring where the kernel allows "
			    "it, else threads), io_uring or threads", value);
			return (0);
		}
	} else if (strcmp(name, "read_ahead") == 0) {
		if (config_read_ahead(value, conf) == -1) {
			cp->error = xasprintf("[infeedd] read_ahead = %s: "
			    "expected auto (%d steps, at most %lluM), off, a "
			    "number of steps up to %d such as 8 steps, or a "
			    "size such as 64M", value,
			    CONFIG_READ_AHEAD_AUTO_STEPS,
			    CONFIG_READ_AHEAD_AUTO_BYTES >> 20,
			    CONFIG_READ_AHEAD_MAX_STEPS);
			return (0);
		}
	} else if (strcmp(name, "metrics_listen") == 0) {
		if (config_parse_listen(value, conf) == -1) {
			cp->error = xasprintf("[infeedd] metrics_listen = %s: "
			    "expected an IP address and an optional port, such "
			    "as 127.0.0.1:%d, [::1]:%d or 127.0.0.1 (port %d), "
			    "or off", value, CONFIG_DEFAULT_METRICS_PORT,
			    CONFIG_DEFAULT_METRICS_PORT,
			    CONFIG_DEFAULT_METRICS_PORT);
			return (0);
		}
	} else if (strcmp(name, "cache_dir") == 0) {
		if (*value != '/') {
			cp->error = xasprintf("[infeedd] cache_dir = %s: expected "
			    "an absolute path, a folder for remote datasets' "
			    "bytes", value);
			return (0);
		}
		free(conf->cache_dir);
		conf->cache_dir = xstrdup(value);
	} else if (strcmp(name, "cache_max") == 0) {
		if (config_parse_size(value, &v) == -1 || v == 0) {
			cp->error = xasprintf("[infeedd] cache_max = %s: "
			    "expected a size such as 100G", value);
			return (0);
		}
		conf->cache_max = v;
	} else {
		guess = dataset_key_guess(name, config_daemon_keys);
		cp->error = xasprintf("unknown key '%s' in section [infeedd]"
		    "%s%s%s; it takes the keys socket, workers, max_clients, "
		    "max_frame_size, memory_budget, group_window, "
		    "group_linger, job_timeout, image_memory_max, "
		    "keep_ring_memory, metrics_listen, io_backend, "
		    "read_ahead, cache_dir and cache_max",
		    name,
		    guess ? " (did you mean '" : "", guess ? guess : "",
		    guess ? "'?)" : "");
		return (0);
	}
	return (1);
}

/* The dataset section called @dname, or NULL. */
static struct dataset_conf *
config_dataset_find(struct config *conf, const char *dname)
{
	size_t	i;

	for (i = 0; i < conf->ndatasets; i++) {
		if (strcmp(conf->datasets[i].name, dname) == 0)
			return (&conf->datasets[i]);
	}
	return (NULL);
}

/* Start the dataset section called @dname. */
static struct dataset_conf *
config_dataset_new(struct config *conf, const char *dname)
{
	struct dataset_conf	*dc;

	conf->datasets = xreallocarray(conf->datasets, conf->ndatasets + 1,
	    sizeof(*conf->datasets));
	dc = &conf->datasets[conf->ndatasets++];
	memset(dc, 0, sizeof(*dc));
	dc->name = xstrdup(dname);
	dc->source = xstrdup(conf->path);
	return (dc);
}

/* Set one key of a [dataset NAME] section. */
static int
config_set_dataset(struct config_parse *cp, const char *section,
    bool new_section, const char *name, const char *value)
{
	struct dataset_conf	*dc;
	const char		*dname;
	size_t			 i;

	dname = section + 8;
	while (*dname == ' ' || *dname == '"')
		dname++;
	if (*dname == '\0' || strpbrk(dname, "\"/ \t") != NULL) {
		cp->error = xasprintf("[%s]: a dataset name must be one word "
		    "without quotes, slashes or spaces", section);
		return (0);
	}
	/*
	 * Seen before another section came in between: a second section of
	 * the same name (which inih cannot tell from the first when the two
	 * are adjacent; then a key set twice is caught below).
	 */
	if ((dc = config_dataset_find(cp->conf, dname)) != NULL &&
	    new_section && dataset_conf_get(dc, name) == NULL) {
		cp->error = xasprintf("[%s] appears a second time; a dataset "
		    "section may appear only once", section);
		return (0);
	}
	if (dc == NULL)
		dc = config_dataset_new(cp->conf, dname);
	for (i = 0; i < dc->nkv; i++) {
		if (strcmp(dc->kv[i].key, name) == 0) {
			cp->error = xasprintf("[%s]: key '%s' is set twice "
			    "(a dataset section may appear only once)",
			    section, name);
			return (0);
		}
	}
	dc->kv = xreallocarray(dc->kv, dc->nkv + 1, sizeof(*dc->kv));
	dc->kv[dc->nkv].key = xstrdup(name);
	dc->kv[dc->nkv].value = xstrdup(value);
	dc->nkv++;
	return (1);
}

/* libinih callback: one key = value in a section. */
static int
config_handler(void *user, const char *section, const char *name,
    const char *value)
{
	struct config_parse	*cp = user;
	bool			 new_section;
	int			 ok;

	if (cp->error != NULL)
		return (0);
	new_section = cp->section == NULL || strcmp(cp->section, section) != 0;
	if (new_section) {
		free(cp->section);
		cp->section = xstrdup(section);
	}
	if (strcmp(section, "infeedd") == 0)
		ok = config_set_daemon(cp, name, value);
	else if (strncmp(section, "dataset ", 8) == 0)
		ok = config_set_dataset(cp, section, new_section, name, value);
	else {
		cp->error = xasprintf("unknown section [%s]; expected "
		    "[infeedd] or [dataset NAME]", section);
		ok = 0;
	}
	if (!ok)
		cp->error_line = cp->line;
	return (ok);
}

/* libinih reader: fgets, counting lines as inih does. */
static char *
config_read_line(char *str, int num, void *stream)
{
	struct config_parse	*cp = stream;

	cp->line++;
	return (fgets(str, num, cp->fp));
}

/* Parse a cgroup v2 cpu.max line: "QUOTA PERIOD" or "max PERIOD". */
int
config_cpu_max_parse(const char *text, double *cpus)
{
	const char	*end;
	uint64_t	 quota = 0, period;
	bool		 max = strncmp(text, "max", 3) == 0;

	if (max)
		end = text + 3;
	else if (number_scan_u64(text, &quota, &end) != 0 || quota == 0)
		return (-1);
	if (*end != ' ' || number_scan_u64(end + 1, &period, &end) != 0 ||
	    period == 0 || (*end != '\0' && *end != '\n'))
		return (-1);
	*cpus = max ? 0 : (double)quota / (double)period;
	return (0);
}

/* Read small file @path (what fits) into @buf; -1 when it cannot be. */
static int
config_read_small(const char *path, char *buf, size_t len)
{
	FILE	*fp;
	size_t	 n;

	if ((fp = fopen(path, "re")) == NULL)
		return (-1);
	n = fread(buf, 1, len - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	return (n > 0 ? 0 : -1);
}

/*
 * The quota that cgroup directory @dir sets, in CPUs (0: none): cgroup
 * v2's cpu.max, or v1's cpu.cfs_quota_us over cpu.cfs_period_us (-1: none).
 */
static double
config_cgroup_dir_quota(const char *dir, bool v1)
{
	char		 path[PATH_MAX + 32], line[128];
	uint64_t	 quota, period;
	double		 cpus;
	int		 n;

	n = snprintf(path, sizeof(path), "%s/%s", dir, v1 ?
	    "cpu.cfs_quota_us" : "cpu.max");
	if (n < 0 || (size_t)n >= sizeof(path) ||
	    config_read_small(path, line, sizeof(line)) == -1)
		return (0);
	if (!v1)
		return (config_cpu_max_parse(line, &cpus) == 0 ? cpus : 0);
	line[strcspn(line, "\n")] = '\0';
	if (number_parse_u64(line, 1, UINT64_MAX, &quota, NULL) == -1)
		return (0);	/* "-1": no quota */
	n = snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
	if (n < 0 || (size_t)n >= sizeof(path) ||
	    config_read_small(path, line, sizeof(line)) == -1)
		return (0);
	line[strcspn(line, "\n")] = '\0';
	if (number_parse_u64(line, 1, UINT64_MAX, &period, NULL) == -1)
		return (0);
	return ((double)quota / (double)period);
}

/*
 * The cgroup path of this process in @proc_cgroup's text: cgroup v2's
 * ("0::/a/b"), or with @v1 the one of the v1 hierarchy that has the cpu
 * controller ("4:cpu,cpuacct:/a/b"), copied to @dir; -1 when none.
 */
static int
config_cgroup_path(const char *proc_cgroup, bool v1, char *dir, size_t len)
{
	const char	*line, *list, *path;
	size_t		 n, k;

	for (line = proc_cgroup; *line != '\0'; line += n + (line[n] != '\0')) {
		n = strcspn(line, "\n");
		if ((list = memchr(line, ':', n)) == NULL ||
		    (path = memchr(list + 1, ':', n - (size_t)(list + 1 -
		    line))) == NULL)
			continue;
		list++;
		if (!v1 && (list != line + 2 || line[0] != '0' ||
		    path != list))
			continue;
		if (v1) {
			/* One of the comma-separated controllers is "cpu". */
			for (k = 0; list + k < path; k += strcspn(list + k,
			    ",:") + 1) {
				if (strncmp(list + k, "cpu", 3) == 0 &&
				    (list[k + 3] == ',' || list[k + 3] == ':'))
					break;
			}
			if (list + k >= path)
				continue;
		}
		path++;
		if (*path != '/' || (size_t)(line + n - path) >= len)
			return (-1);
		memcpy(dir, path, (size_t)(line + n - path));
		dir[line + n - path] = '\0';
		return (0);
	}
	return (-1);
}

/*
 * The least quota of this process's cgroup and its parents under @root
 * (v2: @root itself; v1: its "cpu" hierarchy), in CPUs; 0 when none has
 * one.  A v2 quota is used where there is one, else a v1 quota; *@file
 * names the file it is in.
 */
static double
config_cgroup_quota(const char *proc_cgroup, const char *root,
    const char **file)
{
	char	 base[PATH_MAX], dir[PATH_MAX], full[PATH_MAX * 2], *slash;
	double	 cpus, least = 0;
	int	 v1;

	if (proc_cgroup == NULL)
		return (0);
	for (v1 = 0; v1 <= 1 && least == 0; v1++) {
		if (config_cgroup_path(proc_cgroup, v1, dir, sizeof(dir)) == -1)
			continue;
		snprintf(base, sizeof(base), "%s%s", root, v1 ? "/cpu" : "");
		*file = v1 ? "cpu.cfs_quota_us" : "cpu.max";
		for (;;) {
			snprintf(full, sizeof(full), "%s%s", base,
			    strcmp(dir, "/") == 0 ? "" : dir);
			cpus = config_cgroup_dir_quota(full, v1);
			if (cpus > 0 && (least == 0 || cpus < least))
				least = cpus;
			if (strcmp(dir, "/") == 0)
				break;
			slash = strrchr(dir, '/');
			slash[slash == dir ? 1 : 0] = '\0';
		}
	}
	return (least);
}

/* The CPUs that @mask and the cgroup's quota allow, and why. */
void
config_cpus_from(const cpu_set_t *mask, size_t setsize,
    const char *proc_cgroup, const char *cgroup_root, struct config_cpus *out)
{
	const char	*file = "cpu.max";
	double		 whole;
	unsigned	 n;

	memset(out, 0, sizeof(*out));
	out->affinity = (unsigned)CPU_COUNT_S(setsize, mask);
	out->quota = config_cgroup_quota(proc_cgroup, cgroup_root, &file);
	n = out->affinity;
	if (out->quota > 0) {
		whole = out->quota - (double)(unsigned)out->quota > 1e-9 ?
		    (double)(unsigned)out->quota + 1 : out->quota;
		if (whole < n)
			n = (unsigned)whole;
		snprintf(out->why, sizeof(out->why), "cgroup %s %.1f CPUs, "
		    "affinity %u", file, out->quota, out->affinity);
	} else
		snprintf(out->why, sizeof(out->why), "affinity %u, no cgroup "
		    "CPU quota", out->affinity);
	out->n = n < 1 ? 1 : n > INFEED_MAX_WORKERS ? INFEED_MAX_WORKERS : n;
}

/* The CPUs this process may use: its affinity, its cgroup's quota. */
unsigned
config_ncpus(struct config_cpus *out)
{
	struct config_cpus	 scratch;
	cpu_set_t		*mask;
	size_t			 setsize;
	char			 cg[4096];
	long			 online = sysconf(_SC_NPROCESSORS_CONF);
	int			 ncpu = online > 1024 ? (int)online : 1024;
	bool			 have_cg;

	if (out == NULL)
		out = &scratch;
	have_cg = config_read_small("/proc/self/cgroup", cg, sizeof(cg)) == 0;
	/* A mask wide enough for the machine's CPUs (CPU_SETSIZE is 1024). */
	mask = CPU_ALLOC(ncpu);
	setsize = CPU_ALLOC_SIZE(ncpu);
	if (mask == NULL || sched_getaffinity(0, setsize, mask) == -1) {
		if (mask != NULL)
			CPU_FREE(mask);
		mask = CPU_ALLOC(1);
		setsize = CPU_ALLOC_SIZE(1);
		CPU_ZERO_S(setsize, mask);
		CPU_SET_S(0, setsize, mask);
	}
	config_cpus_from(mask, setsize, have_cg ? cg : NULL, "/sys/fs/cgroup",
	    out);
	CPU_FREE(mask);
	return (out->n);
}

/* Read and check the configuration file. */
struct config *
config_load(const char *path, char **cause)
{
	struct config_parse	 cp;
	struct config		*conf;
	char			*why = NULL;
	int			 r;

	conf = xcalloc(1, sizeof(*conf));
	conf->path = xstrdup(path);
	conf->socket_path = xstrdup(INFEEDD_DEFAULT_SOCKET);
	conf->max_clients = CONFIG_DEFAULT_MAX_CLIENTS;
	conf->max_frame_size = INFEED_DEFAULT_MAX_FRAME;
	conf->memory_budget = CONFIG_DEFAULT_BUDGET;
	conf->group_window = CONFIG_GROUP_WINDOW_AUTO;
	conf->group_linger_ms = CONFIG_GROUP_LINGER_AUTO_MS;	/* config.h */
	conf->job_timeout_ms = CONFIG_DEFAULT_JOB_TIMEOUT_MS;
	conf->read_ahead_steps = CONFIG_READ_AHEAD_AUTO_STEPS;
	conf->read_ahead_bytes = CONFIG_READ_AHEAD_AUTO_BYTES;
	conf->image_memory_max = CONFIG_DEFAULT_IMAGE_MEMORY;
	conf->keep_ring_ms = CONFIG_DEFAULT_KEEP_RING_MS;
	conf->cache_max = CONFIG_DEFAULT_CACHE_MAX;
	memset(&cp, 0, sizeof(cp));
	cp.conf = conf;

	if ((cp.fp = fopen(path, "r")) == NULL) {
		*cause = xasprintf("%s: cannot open: %s", path,
		    strerror(errno));
		goto fail;
	}
	r = ini_parse_stream(config_read_line, &cp, config_handler, &cp);
	fclose(cp.fp);
	if (r == -2) {
		*cause = xasprintf("%s: out of memory while parsing", path);
		goto fail;
	}
	/* inih goes on after a syntax error: r is the first bad line. */
	if (r > 0) {
		*cause = xasprintf("%s:%d: %s", path, r,
		    cp.error != NULL && cp.error_line == r ? cp.error :
		    "syntax error; expected [section] or key = value");
		goto fail;
	}
	free(cp.section);
	cp.section = NULL;
	if (conf->workers == 0)
		conf->workers = config_ncpus(NULL);
	/* The remote readers of the catalogue opened next use the cache. */
	if (cache_configure(conf->cache_dir, conf->cache_max, CACHE_BLOCK,
	    &why) != 0) {
		*cause = xasprintf("%s: [infeedd] %s", path, why);
		free(why);
		goto fail;
	}
	return (conf);

fail:
	free(cp.error);
	free(cp.section);
	config_free(conf);
	return (NULL);
}

/* A copy of section @src into @dst. */
void
config_dataset_copy(struct dataset_conf *dst, const struct dataset_conf *src)
{
	size_t	i;

	dst->name = xstrdup(src->name);
	dst->source = xstrdup(src->source);
	dst->nkv = src->nkv;
	dst->kv = xcalloc(src->nkv == 0 ? 1 : src->nkv, sizeof(*dst->kv));
	for (i = 0; i < src->nkv; i++) {
		dst->kv[i].key = xstrdup(src->kv[i].key);
		dst->kv[i].value = xstrdup(src->kv[i].value);
	}
}

/* Free what section @dc holds. */
void
config_dataset_clear(struct dataset_conf *dc)
{
	size_t	j;

	for (j = 0; j < dc->nkv; j++) {
		free(dc->kv[j].key);
		free(dc->kv[j].value);
	}
	free(dc->kv);
	free(dc->name);
	free(dc->source);
	memset(dc, 0, sizeof(*dc));
}

/* A copy of @conf, every string and section its own. */
struct config *
config_copy(const struct config *conf)
{
	struct config	*c = xmalloc(sizeof(*c));
	size_t		 i;

	*c = *conf;
	c->path = xstrdup(conf->path);
	c->socket_path = xstrdup(conf->socket_path);
	c->metrics_host = conf->metrics_host != NULL ?
	    xstrdup(conf->metrics_host) : NULL;
	c->cache_dir = conf->cache_dir != NULL ? xstrdup(conf->cache_dir) :
	    NULL;
	c->datasets = xcalloc(conf->ndatasets + 1, sizeof(*c->datasets));
	for (i = 0; i < conf->ndatasets; i++)
		config_dataset_copy(&c->datasets[i], &conf->datasets[i]);
	return (c);
}

/* Free a configuration; NULL is a no-op. */
void
config_free(struct config *conf)
{
	size_t	i;

	if (conf == NULL)
		return;
	for (i = 0; i < conf->ndatasets; i++)
		config_dataset_clear(&conf->datasets[i]);
	free(conf->datasets);
	free(conf->metrics_host);
	free(conf->cache_dir);
	free(conf->socket_path);
	free(conf->path);
	free(conf);
}
