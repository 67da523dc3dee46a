/* SPDX-License-Identifier: MIT */
/*
 * The test harness shared by the integration tests: a temporary directory
 * with small dataset files and a catalogue, the real infeedd started on a
 * private socket in it, raw-socket helpers for frames that libinfeed
 * would never send, infeedctl run against it, what a process of it holds,
 * and a bystander trainer.  $INFEEDD names the daemon binary (meson sets
 * it).
 * The programs' main() runs their suite with runner.c's run_suite().
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "options-schema.h"
#include "sampler.h"

char		 dir[256];
char		 sock_path[300];
char		 conf_path[300];
pid_t		 infeedd_pid = -1;

/* Byte j of raw sample i: anything a wrong row or offset would not match. */
uint8_t
raw_byte(uint64_t i, unsigned j)
{
	return ((uint8_t)(i * 7 + j * 13 + (i >> 8)));
}

/*
 * The sampler of a client of options @o over "raw": the order its steps
 * must come in (sampler_clear() it).
 */
void
raw_oracle(struct sampler *smp, const struct infeed_options *o)
{
	struct sampler_opts	so;
	char			*cause = NULL;

	memset(&so, 0, sizeof(so));
	so.samples = RAW_N;
#define RAW_ORACLE_OPTION(name, field, type, def, limit, kind, ...)	\
	INFEED_OPTION_SAMPLER_##kind(so.field = o->name;)
	INFEED_LOADER_OPTIONS(RAW_ORACLE_OPTION)
#undef RAW_ORACLE_OPTION
	ck_assert_msg(sampler_init(smp, &so, &cause) == 0, "%s", cause);
}

/* Make the raw dataset's files and a truncated copy. */
void
make_raw(void)
{
	static uint8_t	data[RAW_N * RAW_BYTES];
	static int64_t	labels[RAW_N];
	char		path[400];
	unsigned	i, j;

	for (i = 0; i < RAW_N; i++) {
		for (j = 0; j < RAW_BYTES; j++)
			data[i * RAW_BYTES + j] = raw_byte(i, j);
		labels[i] = (int64_t)((i * 3) % RAW_CLASSES);
	}
	snprintf(path, sizeof(path), "%s/raw.bin", dir);
	write_file(path, data, sizeof(data));
	snprintf(path, sizeof(path), "%s/raw-labels.bin", dir);
	write_file(path, labels, sizeof(labels));
	snprintf(path, sizeof(path), "%s/broken.bin", dir);
	write_file(path, data, sizeof(data) - 5);
}

/* Write the catalogue: raw, synthetic, and a broken one. */
void
make_config(const char *extra)
{
	char	buf[4096];

	snprintf(buf, sizeof(buf),
	    "[infeedd]\n"
	    "workers = 2\n"
	    "memory_budget = 256M\n"
	    "%s\n"
	    "[dataset raw]\n"
	    "type = raw\n"
	    "path = %s/raw.bin\n"
	    "shape = 1,%d,%d\n"
	    "dtype = uint8\n"
	    "labels = %s/raw-labels.bin\n"
	    "label_dtype = int64\n"
	    "classes = %d\n"
	    "\n"
	    "[dataset synthetic]\n"
	    "type = synthetic\n"
	    "samples = 500\n"
	    "shape = 1,8,8\n"
	    "dtype = float32\n"
	    "classes = 10\n"
	    "seed = 7\n"
	    "\n"
	    "[dataset broken]\n"
	    "type = raw\n"
	    "path = %s/broken.bin\n"
	    "shape = 1,%d,%d\n"
	    "dtype = uint8\n"
	    "labels = %s/raw-labels.bin\n"
	    "label_dtype = int64\n",
	    extra ? extra : "", dir, RAW_H, RAW_W, dir, RAW_CLASSES, dir,
	    RAW_H, RAW_W, dir);
	write_file(conf_path, buf, strlen(buf));
}

/* sd_notify's socket of the test (notify_open()), or -1. */
static int	notify_fd = -1;

/* Bind a datagram socket for sd_notify and point NOTIFY_SOCKET at it. */
void
notify_open(void)
{
	struct sockaddr_un	sun;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	ck_assert_uint_lt(strlen(dir) + 8, sizeof(sun.sun_path));
	memcpy(sun.sun_path, dir, strlen(dir));
	memcpy(sun.sun_path + strlen(dir), "/notify", 8);
	notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ne(notify_fd, -1);
	ck_assert_int_eq(bind(notify_fd, (struct sockaddr *)&sun,
	    sizeof(sun)), 0);
	setenv("NOTIFY_SOCKET", sun.sun_path, 1);
}

/* Wait up to @ms for a notification containing @what; return it. */
int
notify_wait(const char *what, int ms, char *out, size_t outlen)
{
	struct pollfd	pfd = { notify_fd, POLLIN, 0 };
	char		buf[1024];
	ssize_t		n;

	while (poll(&pfd, 1, ms) == 1) {
		n = recv(notify_fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			return (0);
		buf[n] = '\0';
		if (strstr(buf, what) != NULL) {
			if (out != NULL)
				snprintf(out, outlen, "%s", buf);
			return (1);
		}
	}
	return (0);
}

/* Close the socket and unset NOTIFY_SOCKET. */
void
notify_close(void)
{
	if (notify_fd != -1)
		close(notify_fd);
	notify_fd = -1;
	unsetenv("NOTIFY_SOCKET");
}

/* Fork and exec @argv as the daemon, its stderr going to DIR/infeedd.log. */
void
infeedd_spawn(char *const argv[])
{
	char	log[400];
	int	logfd;

	snprintf(log, sizeof(log), "%s/infeedd.log", dir);
	infeedd_pid = fork();
	ck_assert_int_ne(infeedd_pid, -1);
	if (infeedd_pid == 0) {
		logfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(logfd, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
}

/* Start infeedd and wait until its socket answers. */
void
infeedd_start(const char *workers)
{
	const char	*bin = getenv("INFEEDD");
	struct sockaddr_un sun;
	int		 i, fd;

	ck_assert_msg(bin != NULL, "set INFEEDD to the infeedd binary");
	/* "": the configuration's workers. */
	infeedd_spawn((char *const []){ (char *)bin, (char *)"--config",
	    conf_path, (char *)"--socket", sock_path, (char *)(workers &&
	    *workers == '\0' ? NULL : "--workers"),
	    (char *)(workers ? workers : "2"), NULL });
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, sock_path);
	/* 30 s: infeedd under valgrind on a loaded machine starts slowly. */
	for (i = 0; i < 3000; i++) {
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
			close(fd);
			return;
		}
		close(fd);
		if (waitpid(infeedd_pid, NULL, WNOHANG) == infeedd_pid) {
			infeedd_pid = -1;
			ck_abort_msg("infeedd exited while it started; see "
			    "%s/infeedd.log", dir);
		}
		usleep(10000);
	}
	ck_abort_msg("infeedd did not start in 30 s; see %s/infeedd.log",
	    dir);
}

/* Stop infeedd with SIGTERM and return its exit status. */
int
infeedd_stop(void)
{
	int	status = -1;

	if (infeedd_pid <= 0)
		return (-1);
	kill(infeedd_pid, SIGTERM);
	waitpid(infeedd_pid, &status, 0);
	infeedd_pid = -1;
	return (status);
}

/* Remove the temporary directory and everything in it. */
void
rm_dir(void)
{
	DIR		*d;
	struct dirent	*de;
	char		 path[600];

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/* Fresh directory with the dataset files and a config (plus @extra). */
void
make_files(const char *extra)
{
	const char	*tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/infeed-test-XXXXXX", tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/infeedd.sock", dir);
	snprintf(conf_path, sizeof(conf_path), "%s/infeedd.conf", dir);
	make_raw();
	make_config(extra);
}

/* Fresh directory, files, config and daemon for every test. */
void
setup(void)
{
	make_files(NULL);
	infeedd_start(NULL);
}

/*
 * The first line of the daemon's log that says one of its processes
 * crashed, into @buf: a mark of tests/crash-marks ($INFEED_CRASH_MARKS),
 * a worker killed by a signal that only a bug sends or a sanitizer's
 * report.  The daemon's exit status does not show its workers' deaths:
 * the pool replaces a crashed worker and runs its job again, so one crash
 * in a test that then passes would go unseen.
 * Return: whether there is one.
 */
bool
infeedd_log_crash(char *buf, size_t len)
{
	char		 marks[32][64], path[400], *line = NULL;
	const char	*file = getenv("INFEED_CRASH_MARKS");
	size_t		 cap = 0, i, n = 0;
	bool		 found = false;
	FILE		*fp;

	ck_assert_msg(file != NULL && (fp = fopen(file, "r")) != NULL,
	    "cannot read the crash marks ($INFEED_CRASH_MARKS: %s)",
	    file ? file : "unset");
	while (n < 32 && getline(&line, &cap, fp) != -1) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] != '#' && line[0] != '\0')
			snprintf(marks[n++], sizeof(marks[0]), "%s", line);
	}
	fclose(fp);
	snprintf(path, sizeof(path), "%s/infeedd.log", dir);
	if ((fp = fopen(path, "r")) == NULL) {
		free(line);
		return (false);
	}
	while (!found && getline(&line, &cap, fp) != -1) {
		for (i = 0; i < n; i++) {
			if (strstr(line, marks[i]) != NULL &&
			    (marks[i][0] != '(' ||
			    strstr(line, "killed by signal") != NULL)) {
				snprintf(buf, len, "%s", line);
				found = true;
				break;
			}
		}
	}
	free(line);
	fclose(fp);
	return (found);
}

/* Stop the daemon and clean up. */
void
teardown(void)
{
	char	log[400], buf[4096];
	int	status, fd;
	ssize_t	n;

	/* A daemon that crashed or leaked (under ASan) fails the test. */
	status = infeedd_stop();
	/* So does a worker that crashed, whatever the test saw. */
	if (infeedd_log_crash(buf, sizeof(buf))) {
		rm_dir();
		ck_abort_msg("a process of infeedd crashed; its log says: %s",
		    buf);
	}
	if (status != -1 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
		snprintf(log, sizeof(log), "%s/infeedd.log", dir);
		buf[0] = '\0';
		if ((fd = open(log, O_RDONLY)) != -1) {
			n = read(fd, buf, sizeof(buf) - 1);
			buf[n > 0 ? n : 0] = '\0';
			close(fd);
		}
		rm_dir();
		ck_abort_msg("infeedd did not exit cleanly (status %d); its "
		    "log:\n%s", status, buf);
	}
	rm_dir();
}

/* A libinfeed client, connected. */
struct infeed *
client(void)
{
	struct infeed	*f = infeed_new();

	ck_assert_ptr_nonnull(f);
	ck_assert_msg(infeed_connect(f, sock_path, "test") == INFEED_OK,
	    "%s", infeed_error(f));
	return (f);
}

/* A raw socket to the daemon. */
int
raw_connect(void)
{
	struct sockaddr_un	sun;
	int			fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, sock_path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ne(fd, -1);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return (fd);
}

/* Send one frame on a raw socket. */
void
raw_send(int fd, const Infeed__Frame *f)
{
	uint8_t	*buf;
	size_t	 len;

	buf = wire_pack(f, INFEED_DEFAULT_MAX_FRAME, &len);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(wire_send_all(fd, buf, len, -1), 0);
	free(buf);
}

/* Read one frame within two seconds, or NULL at end of stream. */
Infeed__Frame *
raw_recv(int fd, struct wire_in *in)
{
	Infeed__Frame	*f;
	struct pollfd	 pfd = { fd, POLLIN, 0 };
	char		*cause = NULL;
	ssize_t		 n;

	for (;;) {
		if (wire_in_frame(in, &f, &cause) == WIRE_OK)
			return (f);
		ck_assert_msg(poll(&pfd, 1, 2000) == 1, "no reply in 2 s");
		n = wire_in_recv(in, fd);
		if (n <= 0)
			return (NULL);
	}
}

/* Say hello on a raw socket and check the Welcome. */
void
raw_hello(int fd, struct wire_in *in, uint32_t version)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	Infeed__Hello	 h = INFEED__HELLO__INIT;

	h.protocol_version = version;
	f.msg_case = INFEED__FRAME__MSG_HELLO;
	f.hello = &h;
	raw_send(fd, &f);
	r = raw_recv(fd, in);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_WELCOME);
	infeed__frame__free_unpacked(r, NULL);
}

/* GetStats on a new raw connection; the caller frees the frame. */
Infeed__Frame *
raw_stats(void)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT, *r;
	Infeed__GetStats gs = INFEED__GET_STATS__INIT;
	struct wire_in	 in;
	int		 fd = raw_connect();

	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(fd, &in, WIRE_PROTOCOL_VERSION);
	f.msg_case = INFEED__FRAME__MSG_GET_STATS;
	f.get_stats = &gs;
	raw_send(fd, &f);
	r = raw_recv(fd, &in);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_STATS);
	close(fd);
	wire_in_clear(&in);
	return (r);
}

/* @name in the test's directory (path_in()'s eight at once). */
const char *
tpath(const char *name)
{
	return (path_in(dir, name));
}

/* The daemon's log so far (DIR/infeedd.log), into @buf. */
void
read_log(char *buf, size_t len)
{
	char	path[400];
	ssize_t	n;
	int	fd;

	snprintf(path, sizeof(path), "%s/infeedd.log", dir);
	ck_assert_int_ne(fd = open(path, O_RDONLY), -1);
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
}

/* `infeedctl --socket SOCK @args` (it must exit 0), its output in @out. */
void
infeedctl_run(const char *args, char *out, size_t len)
{
	const char	*ctl = getenv("INFEEDCTL");
	char		 cmd[1024];
	FILE		*fp;
	size_t		 n;

	ck_assert_msg(ctl != NULL, "set INFEEDCTL to infeedctl");
	snprintf(cmd, sizeof(cmd), "'%s' --socket '%s' %s", ctl, sock_path,
	    args);
	ck_assert_ptr_nonnull(fp = popen(cmd, "r"));
	n = fread(out, 1, len - 1, fp);
	out[n] = '\0';
	ck_assert_int_eq(pclose(fp), 0);
}

/* The parent of process @pid, from /proc, or -1. */
pid_t
parent_of(pid_t pid)
{
	char	 path[64], buf[512], *p;
	FILE	*fp;
	int	 ppid = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return (-1);
	if (fgets(buf, sizeof(buf), fp) == NULL ||
	    (p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 2, "%*c %d", &ppid) != 1)
		ppid = -1;
	fclose(fp);
	return ((pid_t)ppid);
}

/*
 * The daemon's worker processes, at most @max of them: the children of
 * its fork server, the one child of the daemon's (whatever their names).
 */
int
daemon_worker_pids(pid_t *out, int max)
{
	DIR		*d;
	struct dirent	*de;
	int		 n = 0, pid, ppid;

	ck_assert_ptr_nonnull(d = opendir("/proc"));
	while ((de = readdir(d)) != NULL && n < max) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		pid = atoi(de->d_name);
		if ((ppid = parent_of(pid)) > 0 && ppid != infeedd_pid &&
		    parent_of(ppid) == infeedd_pid)
			out[n++] = (pid_t)pid;
	}
	closedir(d);
	return (n);
}

/* The sockets and the mappings of ring memory that process @pid holds. */
void
holds(pid_t pid, int *sockets, int *rings)
{
	DIR		*d;
	struct dirent	*de;
	FILE		*fp;
	char		 path[320], link[128], line[512];
	ssize_t		 n;

	*sockets = *rings = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	ck_assert_ptr_nonnull(d = opendir(path));
	while ((de = readdir(d)) != NULL) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)pid,
		    de->d_name);
		if ((n = readlink(path, link, sizeof(link) - 1)) <= 0)
			continue;
		link[n] = '\0';
		*sockets += strncmp(link, "socket:", 7) == 0;
		*rings += strstr(link, "infeed-ring") != NULL;
	}
	closedir(d);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	ck_assert_ptr_nonnull(fp = fopen(path, "r"));
	while (fgets(line, sizeof(line), fp) != NULL)
		*rings += strstr(line, "infeed-ring") != NULL;
	fclose(fp);
}

/* True when the daemon has closed @fd (EOF within two seconds). */
int
raw_closed(int fd)
{
	struct pollfd	pfd = { fd, POLLIN, 0 };
	char		buf[4096];
	ssize_t		n;

	for (;;) {
		if (poll(&pfd, 1, 2000) != 1)
			return (0);
		n = read(fd, buf, sizeof(buf));
		if (n == 0 || (n == -1 && errno == ECONNRESET))
			return (1);
		if (n == -1)
			return (0);
	}
}

/* Note a failed call: count it and keep the first message. */
static void
bystander_fail(struct bystander_report *r, struct infeed *f, const char *what)
{
	if (r->errors++ == 0)
		snprintf(r->error, sizeof(r->error), "%s: %s", what,
		    f != NULL ? infeed_error(f) : "cannot connect");
}

/* The bystander's loop, in its own process. */
static void
bystander_run(int stop_fd, int report_fd, int ready_fd)
{
	struct bystander_report	 r;
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed_dataset	*list;
	struct infeed		*f = infeed_new();
	struct pollfd		 pfd = { stop_fd, POLLIN, 0 };
	uint64_t		 t0, ms;
	size_t			 n;
	char			 c = 1;

	memset(&r, 0, sizeof(r));
	infeed_options_init(&o);
	o.batch_size = 10;
	o.share = false;	/* beside the scenario, never in its group */
	if (f == NULL || infeed_connect(f, sock_path, "bystander") !=
	    INFEED_OK || infeed_attach(f, "raw", &o, NULL) != INFEED_OK ||
	    infeed_next(f, &st) != INFEED_OK ||
	    infeed_release(f, &st) != INFEED_OK)
		bystander_fail(&r, f, "attach");
	(void)write(ready_fd, &c, 1);
	close(ready_fd);
	while (r.errors == 0 && poll(&pfd, 1, 20) == 0) {
		t0 = now_ms();
		if (infeed_list_datasets(f, &list, &n) != INFEED_OK) {
			bystander_fail(&r, f, "ListDatasets");
			break;
		}
		infeed_datasets_free(list, n);
		ms = now_ms() - t0;
		r.worst_list_ms = ms > r.worst_list_ms ? ms : r.worst_list_ms;
		t0 = now_ms();
		if (infeed_next(f, &st) != INFEED_OK) {
			bystander_fail(&r, f, "Next");
			break;
		}
		ms = now_ms() - t0;
		r.worst_next_ms = ms > r.worst_next_ms ? ms : r.worst_next_ms;
		if (infeed_release(f, &st) != INFEED_OK) {
			bystander_fail(&r, f, "Release");
			break;
		}
		r.rounds++;
	}
	(void)write(report_fd, &r, sizeof(r));
	infeed_free(f);
	_exit(0);
}

/* Start a bystander; returns once it has its first step. */
void
bystander_start(struct bystander *b)
{
	int	stop[2], report[2], ready[2];
	char	c;

	ck_assert_int_eq(pipe(stop), 0);
	ck_assert_int_eq(pipe(report), 0);
	ck_assert_int_eq(pipe(ready), 0);
	b->pid = fork();
	ck_assert_int_ne(b->pid, -1);
	if (b->pid == 0) {
		close(stop[1]);
		close(report[0]);
		close(ready[0]);
		bystander_run(stop[0], report[1], ready[1]);
	}
	close(stop[0]);
	close(report[1]);
	close(ready[1]);
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	b->stop_fd = stop[1];
	b->report_fd = report[0];
}

/* Stop the bystander and collect its figures. */
void
bystander_stop(struct bystander *b, struct bystander_report *r)
{
	memset(r, 0, sizeof(*r));
	close(b->stop_fd);
	ck_assert_int_eq(read(b->report_fd, r, sizeof(*r)), (ssize_t)sizeof(*r));
	close(b->report_fd);
	waitpid(b->pid, NULL, 0);
}

/* The bystander was served throughout, every round trip within @limit_ms. */
void
bystander_assert_in(const char *test, const struct bystander_report *r,
    uint64_t limit_ms)
{
	size_t	n = strlen(test);

	/* Check names a test's function NAME_fn. */
	if (n > 3 && strcmp(test + n - 3, "_fn") == 0)
		n -= 3;
	fprintf(stderr, "bystander in %.*s: %llu rounds, worst ListDatasets "
	    "%llu ms, worst Next %llu ms\n", (int)n, test,
	    (unsigned long long)r->rounds,
	    (unsigned long long)r->worst_list_ms,
	    (unsigned long long)r->worst_next_ms);
	ck_assert_msg(r->errors == 0, "the bystander failed: %s", r->error);
	ck_assert_msg(r->rounds > 0, "the bystander got no round trip done");
	ck_assert_msg(r->worst_list_ms < limit_ms, "a bystander's "
	    "ListDatasets took %llu ms (limit %llu)",
	    (unsigned long long)r->worst_list_ms, (unsigned long long)limit_ms);
	ck_assert_msg(r->worst_next_ms < limit_ms, "a bystander's Next took "
	    "%llu ms (limit %llu)", (unsigned long long)r->worst_next_ms,
	    (unsigned long long)limit_ms);
}
