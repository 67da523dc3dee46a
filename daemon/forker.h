/* SPDX-License-Identifier: MIT */
/*
 * The fork server: the one process that forks workers.  The pool starts
 * it before the daemon takes its first client (as bgpd forks its roles),
 * so it holds the catalogue and the workers' beats and nothing of any
 * client: no socket, no ring, no client's file.  Every worker it forks
 * inherits only that, with no clean-up after the fork.
 *
 * The daemon and the fork server talk over one SOCK_SEQPACKET socketpair
 * of struct forker_msg: SPAWN (start worker @idx) and RELOAD (open the
 * catalogue of the configuration at @path again, as the daemon did, so
 * that later workers inherit the new datasets) one way; SPAWNED (worker
 * @idx is @pid, the daemon's end of its socket comes with it,
 * SCM_RIGHTS), FAILED (it could not be forked: @status is errno) and
 * EXITED (worker @pid ended, @status as waitpid() says) the other.  The
 * workers are the fork server's children, not the daemon's: it reaps them
 * and reports their ends; the daemon signals them by pid.
 *
 * The fork server dies with the daemon (PR_SET_PDEATHSIG, and EOF on its
 * socket: then it gives its workers FORKER_STOP_MS to go, kills those
 * left and exits); its workers die with it (theirs).  The daemon sees its
 * death as EOF, and cannot go on without it (fatal).
 */
#ifndef INFEED_FORKER_H
#define INFEED_FORKER_H

#include <sys/types.h>

#include <limits.h>
#include <stdint.h>

#include "catalogue.h"
#include "worker.h"

/* At shutdown, workers told to stop have this long before SIGKILL. */
#define FORKER_STOP_MS		2000

enum forker_msg_type {
	FORKER_MSG_SPAWN = 1,
	FORKER_MSG_RELOAD,
	FORKER_MSG_SPAWNED,
	FORKER_MSG_FAILED,
	FORKER_MSG_EXITED,
};

struct forker_msg {
	uint32_t	type;
	uint32_t	idx;			/* the worker's slot in the pool */
	int32_t		pid;			/* SPAWNED, EXITED */
	int32_t		status;			/* EXITED: waitpid's; FAILED: errno */
	uint64_t	image_memory_max;	/* SPAWN: bytes a decode may take */
	char		path[PATH_MAX];		/* RELOAD: the configuration */
};

struct forker;

/**
 * forker_start() - fork the fork server, which forks workers from @cat
 * with the beats @beats[idx] (shared memory, mapped before).  Fatal when
 * it cannot be started.
 */
struct forker	*forker_start(const struct catalogue *cat,
		    struct worker_beat *beats);

/**
 * forker_fd() - the daemon's end of the socket, non-blocking, to watch.
 */
int		 forker_fd(const struct forker *f);

/**
 * forker_pid() - the fork server's pid.
 */
pid_t		 forker_pid(const struct forker *f);

/**
 * forker_spawn() - ask for worker @idx, whose decodes may take
 * @image_memory_max bytes; SPAWNED or FAILED answers.
 * Return: 0, or -1 (errno set) when the request could not be sent.
 */
int		 forker_spawn(struct forker *f, unsigned idx,
		    uint64_t image_memory_max);

/**
 * forker_reload() - workers forked from now on read the catalogue of the
 * configuration at @path, opened again by the fork server (datasets whose
 * sections did not change stay as they were).  Return: 0, or -1.
 */
int		 forker_reload(struct forker *f, const char *path);

/**
 * forker_recv() - the fork server's next message into @m, and for
 * SPAWNED the new worker's socket in *@fd (-1 otherwise; taken over).
 * Return: 1, 0 when nothing waits, -1 when the fork server is gone.
 */
int		 forker_recv(struct forker *f, struct forker_msg *m, int *fd);

/**
 * forker_wait() - wait up to @ms for forker_recv() to have a message.
 * Return: 1 when it does, 0 at the time out.
 */
int		 forker_wait(struct forker *f, int ms);

/**
 * forker_stop() - close the socket and wait for the fork server, which
 * gives its workers FORKER_STOP_MS to exit and kills those left; NULL is
 * a no-op.
 */
void		 forker_stop(struct forker *f);

#endif /* INFEED_FORKER_H */
