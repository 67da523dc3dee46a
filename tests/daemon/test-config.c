/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/config.c: config_load's defaults, every [infeedd]
 * key with good and bad values and the exact advice of each message, sizes
 * with suffixes, unknown keys and sections, bad dataset names, duplicate
 * keys and sections, and the dataset sections kept in file order with
 * their keys.  Each test writes its file in a directory of its own under
 * one mkdtemp'd for the run, which main() removes.
 */

#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "config.h"
#include "paths.h"
#include "runner.h"

static char	rundir[PATH_MAX];	/* made by main() */
static char	conf_file[PATH_MAX];	/* the test's configuration */
static char	*cause;			/* the last config_load's message */

/* A fresh directory and file name for the test. */
static void
setup(void)
{
	char	dir[PATH_MAX];
	int	n;

	make_test_dir(rundir, dir, sizeof(dir));
	n = snprintf(conf_file, sizeof conf_file, "%s/infeedd.conf", dir);
	ck_assert(n > 0 && (size_t)n < sizeof conf_file);
	cause = NULL;
}

/* Remove the test's file and directory. */
static void
teardown(void)
{
	char	*slash;

	free(cause);
	cause = NULL;
	unlink(conf_file);
	if ((slash = strrchr(conf_file, '/')) != NULL) {
		*slash = '\0';
		rmdir(conf_file);
	}
}

/* Write @text as the test's configuration file. */
static void
write_conf(const char *text)
{
	FILE	*f;

	ck_assert_ptr_nonnull(f = fopen(conf_file, "w"));
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/* Load @text, which must be valid. */
static struct config *
load_ok(const char *text)
{
	struct config	*conf;

	write_conf(text);
	free(cause);
	cause = NULL;
	conf = config_load(conf_file, &cause);
	ck_assert_msg(conf != NULL, "config_load failed: %s", cause);
	ck_assert_str_eq(conf->path, conf_file);
	return (conf);
}

/* Load @text, which must be refused with exactly "FILE:@line: @msg". */
static void
load_fails(const char *text, int line, const char *msg)
{
	struct config	*conf;
	char		 want[PATH_MAX + 1024];
	int		 n;

	write_conf(text);
	free(cause);
	cause = NULL;
	conf = config_load(conf_file, &cause);
	ck_assert_msg(conf == NULL, "config_load took:\n%s", text);
	ck_assert_ptr_nonnull(cause);
	n = snprintf(want, sizeof want, "%s:%d: %s", conf_file, line, msg);
	ck_assert(n > 0 && (size_t)n < sizeof want);
	ck_assert_str_eq(cause, want);
}

/* An empty file gives every default and no datasets. */
START_TEST(config_gives_defaults_for_an_empty_file)
{
	struct config	*conf = load_ok("");

	/* One worker per CPU the daemon may use, not per CPU of the host. */
	ck_assert_str_eq(conf->socket_path, INFEEDD_DEFAULT_SOCKET);
	ck_assert_uint_eq(conf->workers, config_ncpus(NULL));
	ck_assert(!conf->workers_auto);
	ck_assert_uint_eq(conf->max_clients, 256);
	ck_assert_uint_eq(conf->max_frame_size, INFEED_DEFAULT_MAX_FRAME);
	ck_assert_uint_eq(conf->memory_budget, 4ULL << 30);
	ck_assert_uint_eq(conf->ndatasets, 0);
	config_free(conf);
	config_free(NULL);

	/* Comments and an empty [infeedd] change nothing. */
	conf = load_ok("# infeedd.conf\n; nothing set\n[infeedd]\n");
	ck_assert_str_eq(conf->socket_path, INFEEDD_DEFAULT_SOCKET);
	ck_assert_uint_eq(conf->max_clients, 256);
	config_free(conf);
}
END_TEST

/* Every [infeedd] key is read, with "key: value" as well as "key = value". */
START_TEST(config_reads_every_daemon_key)
{
	struct config	*conf;

	conf = load_ok("[infeedd]\nsocket = /tmp/x/infeedd.sock\n"
	    "workers = 3\nmax_clients: 17\nmax_frame_size = 64K\n"
	    "memory_budget = 512M\n");
	ck_assert_str_eq(conf->socket_path, "/tmp/x/infeedd.sock");
	ck_assert_uint_eq(conf->workers, 3);
	ck_assert_uint_eq(conf->max_clients, 17);
	ck_assert_uint_eq(conf->max_frame_size, 64 * 1024);
	ck_assert_uint_eq(conf->memory_budget, 512ULL << 20);
	config_free(conf);

	/* The bounds are allowed; workers = 0 means one per CPU. */
	conf = load_ok("[infeedd]\nworkers = 0\nmax_clients = 65536\n"
	    "max_frame_size = 4K\n");
	ck_assert_uint_ge(conf->workers, 1);
	ck_assert_uint_le(conf->workers, INFEED_MAX_WORKERS);
	ck_assert_uint_eq(conf->max_clients, INFEED_MAX_CLIENTS);
	ck_assert_uint_eq(conf->max_frame_size, INFEED_MIN_MAX_FRAME);
	config_free(conf);
	conf = load_ok("[infeedd]\nworkers = 256\nmax_clients = 1\n"
	    "max_frame_size = 64M\nmemory_budget = 1\n");
	ck_assert_uint_eq(conf->workers, INFEED_MAX_WORKERS);
	ck_assert_uint_eq(conf->max_clients, 1);
	ck_assert_uint_eq(conf->max_frame_size, INFEED_MAX_MAX_FRAME);
	ck_assert_uint_eq(conf->memory_budget, 1);
	config_free(conf);

	/* A key given again in [infeedd] overrides the earlier line. */
	conf = load_ok("[infeedd]\nworkers = 2\nworkers = 5\n");
	ck_assert_uint_eq(conf->workers, 5);
	config_free(conf);
}
END_TEST

/* Sizes: a number of bytes, K/M/G/T as powers of 1024, "i" and "B" too. */
START_TEST(config_parses_sizes_with_binary_suffixes)
{
	static const struct {
		const char	*s;
		uint64_t	 v;
	} good[] = {
		{ "0", 0 }, { "100", 100 }, { "512K", 512ULL << 10 },
		{ "512k", 512ULL << 10 }, { "1M", 1ULL << 20 },
		{ "4G", 4ULL << 30 }, { "4GiB", 4ULL << 30 },
		{ "4gb", 4ULL << 30 }, { "4GB", 4ULL << 30 },
		{ "2T", 2ULL << 40 },
		{ "18446744073709551615", UINT64_MAX },
		{ "16777215T", 16777215ULL << 40 },
	};
	static const char *const bad[] = {
		"", "G", "4X", "-1", " 4G", "4G ", "4GG", "4 G", "4Gx", "1.5G",
		"0x10", "16777216T", "18446744073709551616",
	};
	uint64_t	v;
	size_t		i;

	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		v = 12345;
		ck_assert_msg(config_parse_size(good[i].s, &v) == 0,
		    "'%s' refused", good[i].s);
		ck_assert_msg(v == good[i].v, "'%s' gave %llu", good[i].s,
		    (unsigned long long)v);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		v = 12345;
		ck_assert_msg(config_parse_size(bad[i], &v) == -1,
		    "'%s' taken as %llu", bad[i], (unsigned long long)v);
		ck_assert_uint_eq(v, 12345);
	}
}
END_TEST

/* socket must be an absolute path that fits a sockaddr_un. */
START_TEST(config_refuses_a_bad_socket_path)
{
	char	text[512], longpath[200];

	load_fails("[infeedd]\nsocket = run/infeedd.sock\n", 2,
	    "[infeedd] socket = run/infeedd.sock: expected an absolute path "
	    "shorter than 108 bytes");
	memset(longpath, 'a', sizeof longpath);
	longpath[0] = '/';
	longpath[108] = '\0';
	snprintf(text, sizeof text, "# a comment\n[infeedd]\nsocket = %s\n",
	    longpath);
	load_fails(text, 3, "[infeedd] socket = /aaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaa: expected an absolute path shorter than 108 "
	    "bytes");
	longpath[107] = '\0';
	snprintf(text, sizeof text, "[infeedd]\nsocket = %s\n", longpath);
	config_free(load_ok(text));
}
END_TEST

/* workers: 0 (one per CPU) to 256, a plain decimal number. */
START_TEST(config_refuses_a_bad_workers_count)
{
	static const char *const bad[] = { "257", "-1", "two", "2x", "0x10",
	    "1000000000000000000000" };
	char	text[256], msg[256];
	size_t	i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "[infeedd]\nworkers = %s\n",
		    bad[i]);
		snprintf(msg, sizeof msg, "[infeedd] workers = %s: expected "
		    "auto (the pool sizes itself) or a number of worker "
		    "processes from 0 (one per CPU) to 256", bad[i]);
		load_fails(text, 2, msg);
	}
}
END_TEST

/* workers = auto: the pool starts with one worker and sizes itself. */
START_TEST(config_reads_workers_auto)
{
	struct config	*conf = load_ok("[infeedd]\nworkers = auto\n");

	ck_assert(conf->workers_auto);
	ck_assert_uint_eq(conf->workers, 1);
	config_free(conf);
	load_fails("[infeedd]\nworkers = Auto\n", 2, "[infeedd] workers = "
	    "Auto: expected auto (the pool sizes itself) or a number of worker "
	    "processes from 0 (one per CPU) to 256");
}
END_TEST

/* cpu.max: "QUOTA PERIOD" or "max PERIOD", nothing else. */
START_TEST(config_parses_cgroup_cpu_max)
{
	static const char *const bad[] = { "", "max", "150000", "0 100000",
	    "150000 0", "-1 100000", "150000 100000 x", "maxi 100000",
	    "1.5 1" };
	double	cpus = -1;
	size_t	i;

	ck_assert_int_eq(config_cpu_max_parse("max 100000\n", &cpus), 0);
	ck_assert(cpus == 0);
	ck_assert_int_eq(config_cpu_max_parse("150000 100000\n", &cpus), 0);
	ck_assert(cpus == 1.5);
	ck_assert_int_eq(config_cpu_max_parse("50000 100000", &cpus), 0);
	ck_assert(cpus == 0.5);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(config_cpu_max_parse(bad[i], &cpus) == -1,
		    "took cpu.max '%s'", bad[i]);
}
END_TEST

/* Write @text as file @dir/@name, making @dir first. */
static void
write_cgroup_file(const char *dir, const char *name, const char *text)
{
	char	path[PATH_MAX];
	FILE	*f;

	ck_assert(mkdir(dir, 0700) == 0 || errno == EEXIST);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/* Remove file @dir/@name. */
static void
unlink_in(const char *dir, const char *name)
{
	char	path[PATH_MAX];

	snprintf(path, sizeof path, "%s/%s", dir, name);
	ck_assert_int_eq(unlink(path), 0);
}

/* The CPUs of mask @cpus[0..n) and the cgroup tree under @root. */
static unsigned
cpus_of(const int *cpus, size_t n, const char *proc_cgroup,
    const char *root, struct config_cpus *out)
{
	cpu_set_t	mask;
	size_t		i;

	CPU_ZERO(&mask);
	for (i = 0; i < n; i++)
		CPU_SET(cpus[i], &mask);
	config_cpus_from(&mask, sizeof(mask), proc_cgroup, root, out);
	return (out->n);
}

/*
 * The daemon's CPUs: its affinity mask bounded by the least cpu.max of
 * its cgroup and every parent, a quota rounded up; never the host's.
 */
START_TEST(config_counts_the_cpus_it_may_use)
{
	static const int	 four[] = { 0, 1, 5, 7 }, one[] = { 3 };
	struct config_cpus	 c;
	char			 root[PATH_MAX / 2], a[PATH_MAX], b[PATH_MAX];
	size_t			 n = (size_t)(strrchr(conf_file, '/') -
				    conf_file);

	/* The test's directory stands for /sys/fs/cgroup. */
	ck_assert_uint_lt(n, sizeof root);
	memcpy(root, conf_file, n);
	root[n] = '\0';
	snprintf(a, sizeof a, "%s/a", root);
	snprintf(b, sizeof b, "%s/a/b c", root);

	/* No cgroup v2 (or no cpu.max anywhere): the affinity mask. */
	ck_assert_uint_eq(cpus_of(four, 4, NULL, root, &c), 4);
	ck_assert_uint_eq(c.affinity, 4);
	ck_assert(c.quota == 0);
	ck_assert_str_eq(c.why, "affinity 4, no cgroup CPU quota");
	ck_assert_uint_eq(cpus_of(one, 1, "0::/a\n", root, &c), 1);
	ck_assert_uint_eq(cpus_of(four, 4, "1:name=systemd:/x\n", root, &c),
	    4);

	/* "max": no quota; 150000/100000 is 2 workers; 50000/100000 one. */
	write_cgroup_file(a, "cpu.max", "max 100000\n");
	ck_assert_uint_eq(cpus_of(four, 4, "0::/a\n", root, &c), 4);
	write_cgroup_file(a, "cpu.max", "150000 100000\n");
	ck_assert_uint_eq(cpus_of(four, 4, "0::/a\n", root, &c), 2);
	ck_assert(c.quota == 1.5);
	ck_assert_str_eq(c.why, "cgroup cpu.max 1.5 CPUs, affinity 4");
	ck_assert_uint_eq(cpus_of(one, 1, "0::/a\n", root, &c), 1);
	write_cgroup_file(a, "cpu.max", "200000 100000\n");
	ck_assert_uint_eq(cpus_of(four, 4, "0::/a\n", root, &c), 2);
	ck_assert_str_eq(c.why, "cgroup cpu.max 2.0 CPUs, affinity 4");

	/* A child's cgroup is bounded by its parent's quota too... */
	write_cgroup_file(b, "cpu.max", "max 100000\n");
	ck_assert_uint_eq(cpus_of(four, 4, "0::/a/b c\n", root, &c), 2);
	/* ... and by its own, the least of them, on any line of the file. */
	write_cgroup_file(b, "cpu.max", "50000 100000\n");
	ck_assert_uint_eq(cpus_of(four, 4, "12:cpu:/v1\n0::/a/b c\n", root,
	    &c), 1);
	ck_assert(c.quota == 0.5);
	/* The root's cpu.max counts as well; a malformed one bounds nothing. */
	write_cgroup_file(root, "cpu.max", "300000 100000\n");
	write_cgroup_file(b, "cpu.max", "garbage\n");
	ck_assert_uint_eq(cpus_of(four, 4, "0::/\n", root, &c), 3);
	ck_assert_uint_eq(cpus_of(four, 4, "0::/a/b c\n", root, &c), 2);

	/* A cgroup v1 host: the cpu controller's hierarchy, under cpu/. */
	unlink_in(root, "cpu.max");
	snprintf(a, sizeof a, "%s/cpu", root);
	snprintf(b, sizeof b, "%s/cpu/a", root);
	write_cgroup_file(a, "cpu.cfs_quota_us", "-1\n");
	write_cgroup_file(a, "cpu.cfs_period_us", "100000\n");
	write_cgroup_file(b, "cpu.cfs_quota_us", "150000\n");
	write_cgroup_file(b, "cpu.cfs_period_us", "100000\n");
	ck_assert_uint_eq(cpus_of(four, 4, "5:cpuset:/x\n4:cpu,cpuacct:/a\n"
	    "0::/\n", root, &c), 2);
	ck_assert(c.quota == 1.5);
	ck_assert_str_eq(c.why, "cgroup cpu.cfs_quota_us 1.5 CPUs, affinity 4");
	ck_assert_uint_eq(cpus_of(four, 4, "4:cpuacct,cpu:/a\n", root, &c), 2);
	/* Not the cpu controller's hierarchy; "-1" is no quota. */
	ck_assert_uint_eq(cpus_of(four, 4, "4:cpuacct:/a\n", root, &c), 4);
	ck_assert_uint_eq(cpus_of(four, 4, "4:cpu:/\n", root, &c), 4);
	/* A v2 quota, where there is one, is the one. */
	write_cgroup_file(root, "cpu.max", "300000 100000\n");
	ck_assert_uint_eq(cpus_of(four, 4, "4:cpu:/a\n0::/\n", root, &c), 3);
	unlink_in(b, "cpu.cfs_quota_us");
	unlink_in(b, "cpu.cfs_period_us");
	rmdir(b);
	unlink_in(a, "cpu.cfs_quota_us");
	unlink_in(a, "cpu.cfs_period_us");
	rmdir(a);

	/* This process: within the host's count, and at least one. */
	ck_assert_uint_ge(config_ncpus(&c), 1);
	ck_assert_uint_le(c.n, (unsigned)sysconf(_SC_NPROCESSORS_CONF));
	ck_assert_uint_le(c.n, c.affinity);

	snprintf(b, sizeof b, "%s/a/b c", root);
	unlink_in(b, "cpu.max");
	rmdir(b);
	snprintf(a, sizeof a, "%s/a", root);
	unlink_in(a, "cpu.max");
	rmdir(a);
	unlink_in(root, "cpu.max");
}
END_TEST

/* max_clients: 1 to 65536. */
START_TEST(config_refuses_a_bad_max_clients)
{
	static const char *const bad[] = { "0", "65537", "many", "-5" };
	char	text[256], msg[256];
	size_t	i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "[infeedd]\nmax_clients = %s\n",
		    bad[i]);
		snprintf(msg, sizeof msg, "[infeedd] max_clients = %s: "
		    "expected a number from 1 to 65536", bad[i]);
		load_fails(text, 2, msg);
	}
}
END_TEST

/* max_frame_size: a size from 4K to 64M. */
START_TEST(config_refuses_a_bad_max_frame_size)
{
	static const char *const bad[] = { "4095", "64M1", "65M", "1G",
	    "big", "0" };
	char	text[256], msg[256];
	size_t	i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "[infeedd]\nmax_frame_size = %s\n",
		    bad[i]);
		snprintf(msg, sizeof msg, "[infeedd] max_frame_size = %s: "
		    "expected a size from 4K to 64M", bad[i]);
		load_fails(text, 2, msg);
	}
}
END_TEST

/* memory_budget: a size above 0. */
START_TEST(config_refuses_a_bad_memory_budget)
{
	static const char *const bad[] = { "0", "0G", "lots", "4Q", "" };
	char	text[256], msg[256];
	size_t	i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "[infeedd]\nmemory_budget = %s\n",
		    bad[i]);
		snprintf(msg, sizeof msg, "[infeedd] memory_budget = %s: "
		    "expected a size such as 4G", bad[i]);
		load_fails(text, 2, msg);
	}
}
END_TEST

/*
 * read_ahead (issue 36, item 2): auto by default (16 steps, 64M at most),
 * off, a number of steps, or a size; anything else refused with the forms.
 */
START_TEST(config_reads_read_ahead)
{
	static const char *const bad[] = { "lots", "0 steps", "9 stairs",
	    "1025 steps", "-1", "" };
	struct config	*conf = load_ok("");
	char		 text[256], msg[512];
	size_t		 i;

	ck_assert_uint_eq(conf->read_ahead_steps, 16);
	ck_assert_uint_eq(conf->read_ahead_bytes, 64ULL << 20);
	config_free(conf);
	conf = load_ok("[infeedd]\nread_ahead = off\n");
	ck_assert_uint_eq(conf->read_ahead_steps, 0);
	config_free(conf);
	conf = load_ok("[infeedd]\nread_ahead = 0\n");
	ck_assert_uint_eq(conf->read_ahead_steps, 0);
	config_free(conf);
	conf = load_ok("[infeedd]\nread_ahead = 12 steps\n");
	ck_assert_uint_eq(conf->read_ahead_steps, 12);
	ck_assert_uint_eq(conf->read_ahead_bytes, UINT64_MAX);
	config_free(conf);
	conf = load_ok("[infeedd]\nread_ahead = 1 step\n");
	ck_assert_uint_eq(conf->read_ahead_steps, 1);
	config_free(conf);
	conf = load_ok("[infeedd]\nread_ahead = 256M\n");
	ck_assert_uint_eq(conf->read_ahead_steps, 1024);
	ck_assert_uint_eq(conf->read_ahead_bytes, 256ULL << 20);
	config_free(conf);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(text, sizeof text, "[infeedd]\nread_ahead = %s\n",
		    bad[i]);
		snprintf(msg, sizeof msg, "[infeedd] read_ahead = %s: expected "
		    "auto (16 steps, at most 64M), off, a number of steps up to "
		    "1024 such as 8 steps, or a size such as 64M", bad[i]);
		load_fails(text, 2, msg);
	}
}
END_TEST

/* An unknown [infeedd] key names the keys, with a guess when one is close. */
START_TEST(config_refuses_unknown_daemon_key)
{
	load_fails("[infeedd]\nworkers = 2\nworkrs = 2\n", 3,
	    "unknown key 'workrs' in section [infeedd] (did you mean "
	    "'workers'?); it takes the keys socket, workers, max_clients, "
	    "max_frame_size, memory_budget, group_window, group_linger, "
	    "job_timeout, image_memory_max, keep_ring_memory, metrics_listen, "
	    "io_backend, read_ahead, cache_dir and cache_max");
	load_fails("[infeedd]\nmax_client = 2\n", 2,
	    "unknown key 'max_client' in section [infeedd] (did you mean "
	    "'max_clients'?); it takes the keys socket, workers, max_clients, "
	    "max_frame_size, memory_budget, group_window, group_linger, "
	    "job_timeout, image_memory_max, keep_ring_memory, metrics_listen, "
	    "io_backend, read_ahead, cache_dir and cache_max");
	load_fails("[infeedd]\nthreads = 2\n", 2,
	    "unknown key 'threads' in section [infeedd]; it takes the keys "
	    "socket, workers, max_clients, max_frame_size, memory_budget, "
	    "group_window, group_linger, job_timeout, image_memory_max, "
	    "keep_ring_memory, metrics_listen, io_backend, read_ahead, "
	    "cache_dir and cache_max");
	load_fails("[infeedd]\ncache_dir = cache\n", 2,
	    "[infeedd] cache_dir = cache: expected an absolute path, a "
	    "folder for remote datasets' bytes");
	load_fails("[infeedd]\ncache_max = lots\n", 2,
	    "[infeedd] cache_max = lots: expected a size such as 100G");
	load_fails("[infeedd]\ngroup_window = some\n", 2,
	    "[infeedd] group_window = some: expected auto, a size such as "
	    "1G, or 0 for none");
	load_fails("[infeedd]\ngroup_linger = awhile\n", 2,
	    "[infeedd] group_linger = awhile: expected auto, off, or a "
	    "duration up to 24h such as 30s");
	load_fails("[infeedd]\ngroup_linger = 25h\n", 2,
	    "[infeedd] group_linger = 25h: expected auto, off, or a "
	    "duration up to 24h such as 30s");
}
END_TEST

/* group_linger: auto (30 s) by default and when said; a duration; off. */
START_TEST(config_reads_group_linger)
{
	struct config	*conf;

	conf = load_ok("[infeedd]\nworkers = 2\n");
	ck_assert_uint_eq(conf->group_linger_ms, CONFIG_GROUP_LINGER_AUTO_MS);
	config_free(conf);
	conf = load_ok("[infeedd]\ngroup_linger = 2m\n");
	ck_assert_uint_eq(conf->group_linger_ms, 120000);
	config_free(conf);
	conf = load_ok("[infeedd]\ngroup_linger = off\n");
	ck_assert_uint_eq(conf->group_linger_ms, 0);
	config_free(conf);
	conf = load_ok("[infeedd]\ngroup_linger = 0\ngroup_linger = auto\n");
	ck_assert_uint_eq(conf->group_linger_ms, CONFIG_GROUP_LINGER_AUTO_MS);
	config_free(conf);
}
END_TEST

/* group_window: auto by default and when said; a size; 0. */
START_TEST(config_reads_group_window)
{
	struct config	*conf;

	conf = load_ok("[infeedd]\nworkers = 2\n");
	ck_assert_uint_eq(conf->group_window, CONFIG_GROUP_WINDOW_AUTO);
	config_free(conf);
	conf = load_ok("[infeedd]\ngroup_window = 1G\n");
	ck_assert_uint_eq(conf->group_window, 1ULL << 30);
	config_free(conf);
	conf = load_ok("[infeedd]\ngroup_window = 0\n");
	ck_assert_uint_eq(conf->group_window, 0);
	config_free(conf);
	conf = load_ok("[infeedd]\ngroup_window = 0\ngroup_window = auto\n");
	ck_assert_uint_eq(conf->group_window, CONFIG_GROUP_WINDOW_AUTO);
	config_free(conf);
}
END_TEST

/* metrics_listen: off by default; an address with an optional port. */
START_TEST(config_reads_metrics_listen)
{
	static const struct {
		const char	*text, *host;
		unsigned	 port;
	} good[] = {
		{ "127.0.0.1:9200", "127.0.0.1", 9200 },
		{ "127.0.0.1", "127.0.0.1", 10099 },
		{ "[::1]:10100", "::1", 10100 },
		{ "0.0.0.0:0", "0.0.0.0", 0 },
	};
	static const char *const bad[] = {
		"localhost:80", "127.0.0.1:99999", "127.0.0.1:", "[::1", ":80",
		"1.2.3:4", "127.0.0.1:8x",
	};
	struct config	*conf;
	char		 text[128], msg[256];
	size_t		 i;

	conf = load_ok("[infeedd]\n");
	ck_assert_ptr_null(conf->metrics_host);
	config_free(conf);
	conf = load_ok("[infeedd]\nmetrics_listen = off\n");
	ck_assert_ptr_null(conf->metrics_host);
	config_free(conf);
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(text, sizeof(text), "[infeedd]\nmetrics_listen = %s\n",
		    good[i].text);
		conf = load_ok(text);
		ck_assert_str_eq(conf->metrics_host, good[i].host);
		ck_assert_uint_eq(conf->metrics_port, good[i].port);
		config_free(conf);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "[infeedd]\nmetrics_listen = %s\n",
		    bad[i]);
		snprintf(msg, sizeof(msg), "[infeedd] metrics_listen = %s: "
		    "expected an IP address and an optional port, such as "
		    "127.0.0.1:10099, [::1]:10099 or 127.0.0.1 (port 10099), "
		    "or off", bad[i]);
		load_fails(text, 2, msg);
	}
}
END_TEST

/* job_timeout takes durations from 100ms to 24h, 30s by default. */
START_TEST(config_reads_job_timeout_durations)
{
	static const struct {
		const char	*text;
		uint32_t	 ms;
	} good[] = {
		{ "30s", 30000 }, { "500ms", 500 }, { "2m", 120000 },
		{ "7", 7000 }, { "100ms", 100 }, { "24h", 86400000 },
	};
	struct config	*conf;
	char		 text[128];
	size_t		 i;

	conf = load_ok("[infeedd]\n");
	ck_assert_uint_eq(conf->job_timeout_ms, 30000);
	config_free(conf);
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(text, sizeof(text), "[infeedd]\njob_timeout = %s\n",
		    good[i].text);
		conf = load_ok(text);
		ck_assert_uint_eq(conf->job_timeout_ms, good[i].ms);
		config_free(conf);
	}
	load_fails("[infeedd]\njob_timeout = 50ms\n", 2, "[infeedd] "
	    "job_timeout = 50ms: expected a duration from 100ms to 24h such "
	    "as 30s or 500ms");
	load_fails("[infeedd]\njob_timeout = 25h\n", 2, "[infeedd] "
	    "job_timeout = 25h: expected a duration from 100ms to 24h such "
	    "as 30s or 500ms");
	load_fails("[infeedd]\njob_timeout = soon\n", 2, "[infeedd] "
	    "job_timeout = soon: expected a duration from 100ms to 24h such "
	    "as 30s or 500ms");
}
END_TEST

/* Only [infeedd] and [dataset NAME] sections; keys need a section. */
/* image_memory_max takes sizes from 16M to 64G, 256M by default. */
START_TEST(config_reads_image_memory_max)
{
	struct config	*conf;

	conf = load_ok("[infeedd]\n");
	ck_assert_uint_eq(conf->image_memory_max, 256ULL << 20);
	config_free(conf);
	conf = load_ok("[infeedd]\nimage_memory_max = 1G\n");
	ck_assert_uint_eq(conf->image_memory_max, 1ULL << 30);
	config_free(conf);
	conf = load_ok("[infeedd]\nimage_memory_max = 16M\n");
	ck_assert_uint_eq(conf->image_memory_max, 16ULL << 20);
	config_free(conf);
	load_fails("[infeedd]\nimage_memory_max = 1M\n", 2, "[infeedd] "
	    "image_memory_max = 1M: expected a size from 16M to 64G such as "
	    "256M");
	load_fails("[infeedd]\nimage_memory_max = 65G\n", 2, "[infeedd] "
	    "image_memory_max = 65G: expected a size from 16M to 64G such as "
	    "256M");
	load_fails("[infeedd]\nimage_memory_max = lots\n", 2, "[infeedd] "
	    "image_memory_max = lots: expected a size from 16M to 64G such as "
	    "256M");
}
END_TEST

START_TEST(config_refuses_unknown_sections)
{
	load_fails("[infeedd]\nworkers = 1\n[server]\nport = 1\n", 4,
	    "unknown section [server]; expected [infeedd] or [dataset NAME]");
	load_fails("[dataset]\ntype = synthetic\n", 2,
	    "unknown section [dataset]; expected [infeedd] or [dataset NAME]");
	load_fails("[datasets x]\ntype = synthetic\n", 2,
	    "unknown section [datasets x]; expected [infeedd] or "
	    "[dataset NAME]");
	load_fails("[Infeedd]\nworkers = 1\n", 2,
	    "unknown section [Infeedd]; expected [infeedd] or [dataset NAME]");
	/* A key before any section. */
	load_fails("workers = 1\n", 1,
	    "unknown section []; expected [infeedd] or [dataset NAME]");
	/* A line that is neither. */
	load_fails("[infeedd]\nworkers\n", 2,
	    "syntax error; expected [section] or key = value");
	load_fails("[infeedd\nworkers = 1\n", 1,
	    "syntax error; expected [section] or key = value");
}
END_TEST

/* A dataset name is one word without quotes, slashes or spaces. */
START_TEST(config_refuses_bad_dataset_names)
{
	load_fails("[dataset a/b]\ntype = synthetic\n", 2,
	    "[dataset a/b]: a dataset name must be one word without quotes, "
	    "slashes or spaces");
	load_fails("[dataset two words]\ntype = synthetic\n", 2,
	    "[dataset two words]: a dataset name must be one word without "
	    "quotes, slashes or spaces");
	load_fails("[dataset \"quoted\"]\ntype = synthetic\n", 2,
	    "[dataset \"quoted\"]: a dataset name must be one word without "
	    "quotes, slashes or spaces");
	load_fails("[dataset \t]\ntype = synthetic\n", 2,
	    "[dataset \t]: a dataset name must be one word without quotes, "
	    "slashes or spaces");
}
END_TEST

/* A key twice in a dataset section, or the section twice, is refused. */
START_TEST(config_refuses_duplicate_dataset_keys_and_sections)
{
	load_fails("[dataset a]\ntype = synthetic\nsamples = 1\n"
	    "samples = 2\n", 4, "[dataset a]: key 'samples' is set twice (a "
	    "dataset section may appear only once)");
	/* Again after another section: the same key, or other keys. */
	load_fails("[dataset a]\ntype = synthetic\n[dataset b]\n"
	    "type = synthetic\n[dataset a]\ntype = raw\n", 6,
	    "[dataset a]: key 'type' is set twice (a dataset section may "
	    "appear only once)");
	load_fails("[dataset a]\ntype = synthetic\n[infeedd]\nworkers = 1\n"
	    "[dataset a]\nclasses = 3\n", 6,
	    "[dataset a] appears a second time; a dataset section may appear "
	    "only once");
}
END_TEST

/* Dataset sections are kept in file order, each with its keys in order. */
START_TEST(config_keeps_dataset_sections_in_order)
{
	struct config		*conf;
	struct dataset_conf	*dc;

	conf = load_ok("[dataset zeta]\ntype = synthetic\nsamples = 10\n"
	    "shape = 4\n\n[infeedd]\nworkers = 1\n\n[dataset alpha]\n"
	    "type = raw\npath = /data/a.bin\nshape = 3,2\n"
	    "clases = 10 ; a typo, kept for dataset_open to refuse\n"
	    "[dataset mid]\ntype = idx\n");
	ck_assert_uint_eq(conf->workers, 1);
	ck_assert_uint_eq(conf->ndatasets, 3);
	dc = &conf->datasets[0];
	ck_assert_str_eq(dc->name, "zeta");
	ck_assert_str_eq(dc->source, conf_file);
	ck_assert_uint_eq(dc->nkv, 3);
	ck_assert_str_eq(dc->kv[0].key, "type");
	ck_assert_str_eq(dc->kv[0].value, "synthetic");
	ck_assert_str_eq(dc->kv[2].key, "shape");
	ck_assert_str_eq(dc->kv[2].value, "4");
	dc = &conf->datasets[1];
	ck_assert_str_eq(dc->name, "alpha");
	ck_assert_uint_eq(dc->nkv, 4);
	ck_assert_str_eq(dc->kv[1].key, "path");
	ck_assert_str_eq(dc->kv[1].value, "/data/a.bin");
	ck_assert_str_eq(dc->kv[3].key, "clases");
	ck_assert_str_eq(dc->kv[3].value, "10");
	ck_assert_str_eq(dataset_conf_get(dc, "shape"), "3,2");
	ck_assert_ptr_null(dataset_conf_get(dc, "classes"));
	ck_assert_str_eq(conf->datasets[2].name, "mid");
	ck_assert_uint_eq(conf->datasets[2].nkv, 1);
	config_free(conf);
}
END_TEST

/* A file that cannot be read says so and why. */
START_TEST(config_refuses_a_missing_file)
{
	char	want[PATH_MAX + 64];
	int	n;

	ck_assert_ptr_null(config_load(conf_file, &cause));
	n = snprintf(want, sizeof want, "%s: cannot open: No such file or "
	    "directory", conf_file);
	ck_assert(n > 0 && (size_t)n < sizeof want);
	ck_assert_str_eq(cause, want);
}
END_TEST

static Suite *
config_suite(void)
{
	Suite	*s = suite_create("config");
	TCase	*tc;

	tc = tcase_create("load");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, config_gives_defaults_for_an_empty_file);
	tcase_add_test(tc, config_reads_every_daemon_key);
	tcase_add_test(tc, config_parses_sizes_with_binary_suffixes);
	tcase_add_test(tc, config_reads_job_timeout_durations);
	tcase_add_test(tc, config_reads_image_memory_max);
	tcase_add_test(tc, config_reads_metrics_listen);
	tcase_add_test(tc, config_refuses_a_bad_socket_path);
	tcase_add_test(tc, config_refuses_a_bad_workers_count);
	tcase_add_test(tc, config_reads_workers_auto);
	tcase_add_test(tc, config_parses_cgroup_cpu_max);
	tcase_add_test(tc, config_counts_the_cpus_it_may_use);
	tcase_add_test(tc, config_refuses_a_bad_max_clients);
	tcase_add_test(tc, config_refuses_a_bad_max_frame_size);
	tcase_add_test(tc, config_refuses_a_bad_memory_budget);
	tcase_add_test(tc, config_reads_read_ahead);
	tcase_add_test(tc, config_refuses_unknown_daemon_key);
	tcase_add_test(tc, config_reads_group_window);
	tcase_add_test(tc, config_reads_group_linger);
	tcase_add_test(tc, config_refuses_unknown_sections);
	tcase_add_test(tc, config_refuses_bad_dataset_names);
	tcase_add_test(tc, config_refuses_duplicate_dataset_keys_and_sections);
	tcase_add_test(tc, config_keeps_dataset_sections_in_order);
	tcase_add_test(tc, config_refuses_a_missing_file);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run every test in a directory of its own, then remove it. */
int
main(void)
{
	return (run_suite_in_dir(config_suite(), "test-config", rundir,
	    sizeof(rundir)));
}
