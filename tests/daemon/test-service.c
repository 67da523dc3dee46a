/* SPDX-License-Identifier: MIT */
/*
 * infeedd as a systemd service: sd_notify messages (READY, STATUS,
 * WATCHDOG, RELOADING, STOPPING) read from a NOTIFY_SOCKET this test owns,
 * socket activation through systemd-socket-activate, SIGHUP reload with a
 * good and a broken configuration, and access refusal by allow_groups.
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"

#define PRIVATE_SECTION \
	"\n[dataset private]\ntype = synthetic\nsamples = 100\nshape = 4\n" \
	"allow_groups = root\n"

/* Fresh directory and files, no daemon yet. */
static void
setup_files(void)
{
	make_files(PRIVATE_SECTION);
}

/* Stop the daemon, close the notify socket, clean up. */
static void
teardown_all(void)
{
	notify_close();
	unsetenv("WATCHDOG_USEC");
	teardown();
}

/* Is a dataset in the catalogue? */
static int
listed(struct infeed *f, const char *name)
{
	struct infeed_dataset	*list;
	size_t			 n, i;
	int			 found = 0;

	ck_assert_int_eq(infeed_list_datasets(f, &list, &n), INFEED_OK);
	for (i = 0; i < n; i++)
		found |= strcmp(list[i].name, name) == 0;
	infeed_datasets_free(list, n);
	return (found);
}

/* READY with STATUS, WATCHDOG at half the interval, STOPPING at the end. */
START_TEST(sd_notify_ready_status_and_stopping)
{
	char	msg[1024];
	int	status;

	notify_open();
	setenv("WATCHDOG_USEC", "400000", 1);
	infeedd_start(NULL);
	ck_assert_msg(notify_wait("READY=1", 2000, msg, sizeof(msg)),
	    "no READY=1");
	ck_assert_ptr_nonnull(strstr(msg, "STATUS="));
	ck_assert_ptr_nonnull(strstr(msg, "datasets"));
	ck_assert_msg(notify_wait("WATCHDOG=1", 1000, NULL, 0),
	    "no WATCHDOG=1 within 1 s for a 400 ms watchdog");
	ck_assert_msg(notify_wait("WATCHDOG=1", 1000, NULL, 0),
	    "WATCHDOG=1 came only once");
	ck_assert_msg(notify_wait("sessions", 7000, msg, sizeof(msg)),
	    "no periodic STATUS= line");
	ck_assert_ptr_nonnull(strstr(msg, "items/s"));
	kill(infeedd_pid, SIGTERM);
	ck_assert_msg(notify_wait("STOPPING=1", 2000, NULL, 0),
	    "no STOPPING=1");
	waitpid(infeedd_pid, &status, 0);
	infeedd_pid = -1;
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* A listening socket passed by systemd-socket-activate is used as is. */
START_TEST(serves_on_the_socket_systemd_passes)
{
	const char	*bin = getenv("INFEEDD");
	struct infeed	*f;
	struct stat	 sb;
	char		 log[400];
	int		 i, logfd;

	snprintf(log, sizeof(log), "%s/infeedd.log", dir);
	/* No --socket: the passed socket must win over the default. */
	infeedd_spawn((char *const []){ (char *)"systemd-socket-activate",
	    (char *)"-l", sock_path, (char *)bin, (char *)"--config", conf_path,
	    NULL });
	for (i = 0; i < 200 && stat(sock_path, &sb) == -1; i++)
		usleep(10000);
	ck_assert_msg(stat(sock_path, &sb) == 0, "no socket from "
	    "systemd-socket-activate (installed?)");
	/* The first connection starts infeedd with the socket as fd 3. */
	f = client();
	ck_assert(listed(f, "raw"));
	infeed_free(f);
	infeedd_stop();
	/* The socket file belongs to the activator, not to infeedd. */
	logfd = open(log, O_RDONLY);
	ck_assert_int_ne(logfd, -1);
	{
		char	buf[8192];
		ssize_t	n = read(logfd, buf, sizeof(buf) - 1);

		ck_assert_int_gt(n, 0);
		buf[n] = '\0';
		ck_assert_ptr_nonnull(strstr(buf,
		    "listening on the socket passed by systemd"));
	}
	close(logfd);
}
END_TEST

/*
 * Reload: an unchanged dataset's session goes on, a new one appears and
 * is read by the new workers.
 */
START_TEST(sighup_reload_applies_a_good_config)
{
	struct infeed		*f, *g;
	struct infeed_options	 o;
	struct infeed_step	 st;
	char			 extra[1024], log[16384];
	int			 i;

	notify_open();
	infeedd_start(NULL);
	ck_assert(notify_wait("READY=1", 2000, NULL, 0));
	f = client();
	g = client();
	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_attach(g, "synthetic", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.step, 0);
	infeed_release(f, &st);

	/* Same raw section, synthetic changed, a new dataset added. */
	snprintf(extra, sizeof(extra), "%s\n[dataset raw-copy]\ntype = raw\n"
	    "path = %s/raw.bin\nshape = 1,4,4\ndtype = uint8\n"
	    "labels = %s/raw-labels.bin\n", PRIVATE_SECTION, dir, dir);
	make_config(extra);
	{
		char	cmd[700];

		snprintf(cmd, sizeof(cmd), "sed -i 's/^seed = 7/seed = 8/' %s",
		    conf_path);
		ck_assert_int_eq(system(cmd), 0);
	}
	kill(infeedd_pid, SIGHUP);
	ck_assert_msg(notify_wait("RELOADING=1", 2000, NULL, 0),
	    "no RELOADING=1");
	ck_assert_msg(notify_wait("READY=1", 2000, NULL, 0),
	    "no READY=1 after the reload");
	ck_assert(listed(f, "raw-copy"));
	/* The raw session carries on where it was, through new workers. */
	for (i = 1; i < 20; i++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		ck_assert_uint_eq(st.step, (uint64_t)i);
		ck_assert_uint_eq(st.indices[0], (uint64_t)i * 10);
		ck_assert_int_eq(((const uint8_t *)st.data)[1],
		    raw_byte(st.indices[0], 1));
		infeed_release(f, &st);
	}
	/* The synthetic session ended with a reason. */
	ck_assert_int_eq(infeed_next(g, &st), INFEED_ERR_DAEMON);
	ck_assert_ptr_nonnull(strstr(infeed_error(g), "reloaded"));
	ck_assert_int_eq(infeed_attach(g, "synthetic", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(g, &st), INFEED_OK);
	infeed_release(g, &st);
	/*
	 * The new dataset is read by workers the fork server forked after it
	 * opened the new configuration too: the right bytes, not an error.
	 */
	ck_assert_int_eq(infeed_detach(g), INFEED_OK);
	ck_assert_int_eq(infeed_attach(g, "raw-copy", &o, NULL), INFEED_OK);
	ck_assert_msg(infeed_next(g, &st) == INFEED_OK, "%s", infeed_error(g));
	for (i = 0; i < 10; i++)
		ck_assert_int_eq(((const uint8_t *)st.data)[i * RAW_BYTES + 1],
		    raw_byte(st.indices[i], 1));
	infeed_free(f);
	infeed_free(g);
	/* The socket came from --socket: the file's absent one is no change. */
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "changes only at restart") == NULL,
	    "a reload that changed no socket warned: %s", log);
}
END_TEST

/* A reload that changes the file's socket says it waits for a restart. */
START_TEST(sighup_reload_warns_of_a_new_socket)
{
	struct infeed	*f;
	char		 log[16384], extra[600];

	notify_open();
	infeedd_start(NULL);
	ck_assert(notify_wait("READY=1", 2000, NULL, 0));
	snprintf(extra, sizeof(extra), "socket = %s/elsewhere.sock", dir);
	make_config(extra);
	kill(infeedd_pid, SIGHUP);
	ck_assert(notify_wait("READY=1", 2000, NULL, 0));
	read_log(log, sizeof(log));
	ck_assert_msg(strstr(log, "elsewhere.sock) changes only at restart; "
	    "infeedd still listens on") != NULL, "no warning: %s", log);
	f = client();		/* still on the old socket */
	ck_assert(listed(f, "raw"));
	infeed_free(f);
}
END_TEST

/*
 * infeedd started with NOTIFY_SOCKET the test's, and a client attached to
 * "raw" (B 10) that took and released its first step.
 */
static struct infeed *
reload_case_start(void)
{
	struct infeed		*f;
	struct infeed_options	 o;
	struct infeed_step	 st;

	notify_open();
	infeedd_start(NULL);
	ck_assert(notify_wait("READY=1", 2000, NULL, 0));
	f = client();
	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	infeed_release(f, &st);
	return (f);
}

/* memory_budget = 1K in the file, SIGHUP, and the READY=1 that ends it. */
static void
reload_with_budget_1k(char *msg, size_t len)
{
	char	cmd[700];

	snprintf(cmd, sizeof(cmd), "sed -i 's/^memory_budget = 256M/"
	    "memory_budget = 1K/' %s", conf_path);
	ck_assert_int_eq(system(cmd), 0);
	kill(infeedd_pid, SIGHUP);
	ck_assert(notify_wait("RELOADING=1", 2000, NULL, 0));
	ck_assert(notify_wait("READY=1", 5000, msg, len));
}

/* A broken new configuration is refused; the old one stays in force. */
START_TEST(sighup_reload_keeps_the_config_when_the_new_one_is_bad)
{
	struct infeed		*f;
	struct infeed_step	 st;
	char			 msg[1024];

	f = reload_case_start();
	write_file(conf_path, "[infeedd]\nworkers = lots\n", 25);
	kill(infeedd_pid, SIGHUP);
	ck_assert(notify_wait("RELOADING=1", 2000, NULL, 0));
	ck_assert(notify_wait("READY=1", 2000, msg, sizeof(msg)));
	ck_assert_ptr_nonnull(strstr(msg, "reload refused"));
	ck_assert(listed(f, "raw"));
	ck_assert(listed(f, "synthetic"));
	ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
	ck_assert_uint_eq(st.step, 1);
	infeed_free(f);
}
END_TEST

/*
 * Ring memory kept from an ended session (keep_ring_memory) is a cache that
 * a ring takes back: a reload whose budget it alone passes is applied.
 */
START_TEST(sighup_reload_is_not_refused_for_kept_ring_memory)
{
	Infeed__Frame	*fr;
	char		 msg[1024];
	uint64_t	 kept = 0;
	int		 tries;

	infeed_free(reload_case_start());
	for (tries = 0; tries < 200 && kept == 0; tries++) {
		usleep(20000);
		fr = raw_stats();
		kept = fr->stats->memory_kept;
		infeed__frame__free_unpacked(fr, NULL);
	}
	ck_assert_msg(kept > 0, "the ended session's ring was not kept");
	reload_with_budget_1k(msg, sizeof(msg));
	printf("reload with %llu bytes of ring memory kept, budget 1K: %s\n",
	    (unsigned long long)kept, msg);
	ck_assert_msg(strstr(msg, "reloaded:") != NULL, "%s", msg);
}
END_TEST

/*
 * A reload whose datasets and the rings held now pass its memory_budget is
 * refused (issue 38, fixes item 3): the old catalogue and budget serve on,
 * and the log and STATUS say what was over and by how much.
 */
START_TEST(sighup_reload_over_the_memory_budget_is_refused)
{
	struct infeed		*f, *g;
	struct infeed_options	 o;
	struct infeed_step	 st;
	char			 msg[1024], log[16384], extra[1024];
	const char		*line;
	int			 i;

	f = reload_case_start();
	/* A dataset added, and a budget smaller than f's ring alone. */
	snprintf(extra, sizeof(extra), "%s\n[dataset raw-copy]\ntype = raw\n"
	    "path = %s/raw.bin\nshape = 1,4,4\ndtype = uint8\n"
	    "labels = %s/raw-labels.bin\n", PRIVATE_SECTION, dir, dir);
	make_config(extra);
	reload_with_budget_1k(msg, sizeof(msg));
	printf("reload over the budget: %s\n", msg);
	ck_assert_msg(strstr(msg, "reload refused") != NULL &&
	    strstr(msg, "in all: over memory_budget (1 KiB") != NULL &&
	    strstr(msg, ") by ") != NULL, "%s", msg);
	read_log(log, sizeof(log));
	ck_assert_msg((line = strstr(log, "reload refused")) != NULL &&
	    strstr(line, "over memory_budget") != NULL, "%s", log);
	ck_assert_msg(strstr(log, "reloaded:") == NULL, "%s", log);
	/* The old catalogue serves, the session goes on, the budget holds. */
	ck_assert(!listed(f, "raw-copy"));
	for (i = 1; i < 5; i++) {
		ck_assert_msg(infeed_next(f, &st) == INFEED_OK, "%s",
		    infeed_error(f));
		ck_assert_uint_eq(st.step, (uint64_t)i);
		infeed_release(f, &st);
	}
	g = client();
	infeed_options_init(&o);
	o.batch_size = 10;
	ck_assert_msg(infeed_attach(g, "synthetic", &o, NULL) == INFEED_OK,
	    "%s", infeed_error(g));
	ck_assert_int_eq(infeed_next(g, &st), INFEED_OK);
	infeed_release(g, &st);
	infeed_free(g);
	infeed_free(f);
}
END_TEST

/*
 * Unknown keys: a typo in a dataset section refuses that dataset alone (at
 * start and on reload); one in [infeedd] stops a start and is refused by a
 * reload.  Each message names the file, the section, the key, the key
 * probably meant and the valid ones.
 */
START_TEST(unknown_keys_refuse_the_dataset_or_the_file)
{
	const char	*bin = getenv("INFEEDD");
	struct infeed	*f;
	char		 extra[1024], want[1024], msg[1024], log[16384];
	int		 status;

	make_config("workrs = 2");
	infeedd_spawn((char *const []){ (char *)bin, (char *)"--config",
	    conf_path, (char *)"--socket", sock_path, NULL });
	ck_assert_int_eq(waitpid(infeedd_pid, &status, 0), infeedd_pid);
	infeedd_pid = -1;
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
	read_log(log, sizeof(log));
	snprintf(want, sizeof(want), "%s:4: unknown key 'workrs' in section "
	    "[infeedd] (did you mean 'workers'?); it takes the keys socket, "
	    "workers, max_clients, max_frame_size, memory_budget, "
	    "group_window, group_linger, job_timeout, image_memory_max, "
	    "keep_ring_memory, metrics_listen, io_backend, read_ahead, "
	    "cache_dir and cache_max",
	    conf_path);
	ck_assert_msg(strstr(log, want) != NULL, "no '%s' in:\n%s", want,
	    log);

	snprintf(extra, sizeof(extra), "%s\n[dataset typo]\ntype = "
	    "synthetic\nsamples = 10\nshape = 4\nclases = 3\n",
	    PRIVATE_SECTION);
	make_config(extra);
	notify_open();
	infeedd_start(NULL);
	ck_assert(notify_wait("READY=1", 2000, NULL, 0));
	f = client();
	ck_assert(!listed(f, "typo"));
	ck_assert(listed(f, "raw"));
	ck_assert(listed(f, "synthetic"));
	read_log(log, sizeof(log));
	snprintf(want, sizeof(want), "dataset 'typo' refused: dataset 'typo': "
	    "unknown key 'clases' in section [dataset typo] of %s (did you "
	    "mean 'classes'?); type = synthetic takes the keys type, samples, "
	    "shape, dtype, classes, seed, sample_delay_us, cache and allow_groups",
	    conf_path);
	ck_assert_msg(strstr(log, want) != NULL, "no '%s' in:\n%s", want,
	    log);

	/* Spelt right, a reload serves it. */
	snprintf(extra, sizeof(extra), "%s\n[dataset typo]\ntype = "
	    "synthetic\nsamples = 10\nshape = 4\nclasses = 3\n",
	    PRIVATE_SECTION);
	make_config(extra);
	kill(infeedd_pid, SIGHUP);
	ck_assert(notify_wait("READY=1", 2000, msg, sizeof(msg)));
	ck_assert_msg(strstr(msg, "reloaded") != NULL, "%s", msg);
	ck_assert(listed(f, "typo"));

	/* A typo in [infeedd] on reload: refused, the old catalogue stays. */
	make_config("max_client = 10");
	kill(infeedd_pid, SIGHUP);
	ck_assert(notify_wait("READY=1", 2000, msg, sizeof(msg)));
	ck_assert_msg(strstr(msg, "reload refused") != NULL &&
	    strstr(msg, "unknown key 'max_client' in section [infeedd] (did "
	    "you mean 'max_clients'?)") != NULL, "%s", msg);
	ck_assert(listed(f, "typo"));
	infeed_free(f);
}
END_TEST

/* Attach as @uid/@gid (root can switch): the code infeed_attach returns. */
static int
attach_as(uid_t uid, gid_t gid)
{
	struct infeed	*f;
	pid_t		 pid;
	int		 status, r;

	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		if (getuid() == 0 && uid != 0 && (setgroups(0, NULL) == -1 ||
		    setgid(gid) == -1 || setuid(uid) == -1))
			_exit(100);
		if ((f = infeed_new()) == NULL ||
		    infeed_connect(f, sock_path, "other-user") != INFEED_OK)
			_exit(101);
		r = infeed_attach(f, "private", NULL, NULL);
		if (r == INFEED_ERR_DAEMON &&
		    strstr(infeed_error(f), "permission denied") == NULL)
			_exit(102);
		infeed_free(f);
		_exit(r == INFEED_OK ? 0 : r == INFEED_ERR_DAEMON ? 3 : 104);
	}
	waitpid(pid, &status, 0);
	return (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* allow_groups refuses a client outside the groups, with a reason. */
/*
 * Without --config, infeedd reads the file under the sysconfdir that meson
 * was configured with ($INFEED_DEFAULT_CONFIG, set by meson), and --help
 * says which.
 */
START_TEST(test_default_config_follows_sysconfdir)
{
	const char	*bin = getenv("INFEEDD");
	const char	*want = getenv("INFEED_DEFAULT_CONFIG");
	char		 cmd[1024], out[4096];
	FILE		*fp;
	size_t		 n;

	ck_assert_msg(bin != NULL && want != NULL, "meson sets INFEEDD and "
	    "INFEED_DEFAULT_CONFIG");
	snprintf(cmd, sizeof(cmd), "'%s' --help", bin);
	ck_assert_ptr_nonnull(fp = popen(cmd, "r"));
	n = fread(out, 1, sizeof(out) - 1, fp);
	out[n] = '\0';
	ck_assert_int_eq(pclose(fp), 0);
	ck_assert_msg(strstr(out, want) != NULL, "--help names no %s:\n%s",
	    want, out);
}
END_TEST

START_TEST(allow_groups_refuses_other_groups)
{
	struct infeed	*f;

	infeedd_start(NULL);
	if (getuid() == 0) {
		/* Let an unprivileged user reach the socket at all. */
		ck_assert_int_eq(chmod(dir, 0755), 0);
		ck_assert_int_eq(chmod(sock_path, 0666), 0);
		ck_assert_int_eq(attach_as(0, 0), 0);
		ck_assert_int_eq(attach_as(65534, 65534), 3);
	} else if (getgid() != 0)
		ck_assert_int_eq(attach_as(getuid(), getgid()), 3);
	/* Everyone may use the datasets without allow_groups. */
	f = client();
	ck_assert_int_eq(infeed_attach(f, "raw", NULL, NULL), INFEED_OK);
	infeed_free(f);
}
END_TEST

static Suite *
service_suite(void)
{
	Suite	*s = suite_create("service");
	TCase	*tc = tcase_create("service");

	tcase_add_checked_fixture(tc, setup_files, teardown_all);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, sd_notify_ready_status_and_stopping);
	tcase_add_test(tc, serves_on_the_socket_systemd_passes);
	tcase_add_test(tc, sighup_reload_applies_a_good_config);
	tcase_add_test(tc, sighup_reload_warns_of_a_new_socket);
	tcase_add_test(tc, sighup_reload_keeps_the_config_when_the_new_one_is_bad);
	tcase_add_test(tc, sighup_reload_over_the_memory_budget_is_refused);
	tcase_add_test(tc, sighup_reload_is_not_refused_for_kept_ring_memory);
	tcase_add_test(tc, unknown_keys_refuse_the_dataset_or_the_file);
	tcase_add_test(tc, allow_groups_refuses_other_groups);
	tcase_add_test(tc, test_default_config_follows_sysconfdir);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(service_suite()));
}
