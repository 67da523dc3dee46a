/* SPDX-License-Identifier: MIT */
/*
 * The integration-test harness: see harness.c.
 */
#ifndef INFEED_TEST_HARNESS_H
#define INFEED_TEST_HARNESS_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <check.h>

#include "infeed.h"
#include "runner.h"
#include "wire.h"

#define RAW_N		1000
#define RAW_H		4
#define RAW_W		4
#define RAW_BYTES	(RAW_H * RAW_W)
#define RAW_CLASSES	10

extern char	dir[256];		/* the test's temporary directory */
extern char	sock_path[300];		/* infeedd's socket in it */
extern char	conf_path[300];		/* its configuration */
extern pid_t	infeedd_pid;

struct sampler;

uint8_t		 raw_byte(uint64_t i, unsigned j);
void		 raw_oracle(struct sampler *smp,
		    const struct infeed_options *o);
void		 make_raw(void);
void		 make_config(const char *extra);
/* sd_notify's messages to the test: NOTIFY_SOCKET, each one, and none. */
void		 notify_open(void);
int		 notify_wait(const char *what, int ms, char *out,
		    size_t outlen);
void		 notify_close(void);
void		 infeedd_spawn(char *const argv[]);
void		 infeedd_start(const char *workers);
int		 infeedd_stop(void);
void		 rm_dir(void);
void		 make_files(const char *extra);
void		 setup(void);
void		 teardown(void);
struct infeed	*client(void);
int		 raw_connect(void);
void		 raw_send(int fd, const Infeed__Frame *f);
Infeed__Frame	*raw_recv(int fd, struct wire_in *in);
void		 raw_hello(int fd, struct wire_in *in, uint32_t version);
int		 raw_closed(int fd);
Infeed__Frame	*raw_stats(void);
const char	*tpath(const char *name);
void		 read_log(char *buf, size_t len);
void		 infeedctl_run(const char *args, char *out, size_t len);
pid_t		 parent_of(pid_t pid);
/* infeedd's workers (its fork server's children), at most @max. */
int		 daemon_worker_pids(pid_t *out, int max);
/* The sockets, and descriptors and mappings of ring memory, @pid holds. */
void		 holds(pid_t pid, int *sockets, int *rings);
bool		 infeedd_log_crash(char *buf, size_t len);

/*
 * A well-behaved trainer beside a hostile scenario: a child process on its
 * own connection that loops ListDatasets, then Next and Release of a small
 * step of "raw" (ready by then: it sleeps between steps; share off, so it
 * never joins a group under test), timing each round trip, until
 * bystander_stop().
 */
struct bystander {
	pid_t		pid;
	int		stop_fd;	/* closed to stop it */
	int		report_fd;	/* its figures come back on it */
};
struct bystander_report {
	uint64_t	rounds;		/* ListDatasets + Next pairs done */
	uint64_t	worst_list_ms;
	uint64_t	worst_next_ms;
	uint64_t	errors;		/* calls that failed */
	char		error[256];	/* the first failure's message */
};
void		 bystander_start(struct bystander *b);
void		 bystander_stop(struct bystander *b, struct bystander_report *r);
/* Print the figures (naming the test), then assert them. */
#define bystander_assert(r, limit_ms)					\
	bystander_assert_in(__func__, (r), (limit_ms))
void		 bystander_assert_in(const char *test,
		    const struct bystander_report *r, uint64_t limit_ms);

#endif /* INFEED_TEST_HARNESS_H */
