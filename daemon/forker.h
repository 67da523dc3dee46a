/* SPDX-License-Identifier: MIT */
/*
 * The fork server: the one process that forks workers.  The pool starts
 * it before the daemon takes its first client (as bgpd forks its roles),
 * so it holds the catalogue and the workers' beats and nothing of any
 * client: no socket, no ring, no client's file.  Every worker it forks
 * inherits only that, with no clean-up after the fork.
 *
 * The daemon and the fork server talk over one SOCK_SEQPACKET socketpair,
 * through a transport (transport.h) on each side, one message a record:
 * a header (struct transport_hdr: its type, enum forker_msg_type, and
 * its length) and its type's payload.  SPAWN (start
 * worker @idx), DATASET (one dataset section of the daemon's catalogue)
 * and CATALOGUE (the @ndatasets DATASETs sent since the last one are the
 * catalogue now: open it, as the daemon did, so that later workers
 * inherit its datasets; with @prepare, open it beside the one workers are
 * forked from until a SWITCH, a reload's two steps) one way; SPAWNED
 * (worker @idx is @pid, the daemon's end of its socket comes with it,
 * SCM_RIGHTS), FAILED (it could not be forked: @error is errno), EXITED
 * (worker @pid ended, @status as waitpid() says) and PREPARED (the
 * prepared catalogue is open) the other.  A record that is not a whole message of its type is
 * refused as the fork server gone.  The
 * workers are the fork server's children, not the daemon's: it reaps them
 * and reports their ends; the daemon signals them by pid.
 *
 * The fork server dies with the daemon (PR_SET_PDEATHSIG, and EOF on its
 * socket: then it gives its workers FORKER_STOP_MS to go, kills those
 * left and exits).  Its workers do not die with it: they die with the
 * daemon (worker.h), which is a child subreaper, so that the workers of
 * a fork server that died become the daemon's children, serve on and are
 * reaped by the pool.  The daemon sees the fork server's death as EOF and
 * starts a new one with forker_exec(): infeedd's own binary run again as
 * "infeedd --fork-server", with its socket and the beats' memory as its
 * only descriptors beyond stdio, so that it holds nothing of any client
 * either; the daemon sends it its catalogue first.
 *
 * The catalogue travels as the dataset sections the daemon parsed (name,
 * source, keys and values), not as the configuration's path: the fork
 * server never reads the configuration, so a file edited since the last
 * reload changes nothing until infeedd reloads it.  The sections are all
 * catalogue_open() reads, and what a reload compares to keep a dataset
 * open; an open dataset (its mappings and descriptors) cannot cross an
 * exec, and the daemon's own order gives the same catalogue indices.
 */
#ifndef INFEED_FORKER_H
#define INFEED_FORKER_H

#include <sys/types.h>

#include <stdint.h>

#include "catalogue.h"
#include "transport.h"
#include "worker.h"

struct event_base;

/* At shutdown, workers told to stop have this long before SIGKILL. */
#define FORKER_STOP_MS		2000

/* Where forker_exec() puts the fork server's socket and beats memory. */
#define FORKER_SOCK_FD		3
#define FORKER_BEATS_FD		4

/* A message's bytes at most, header and payload (a DATASET's section). */
#define FORKER_MAX_MSG		65536

enum forker_msg_type {
	FORKER_MSG_SPAWN = 1,
	FORKER_MSG_DATASET,
	FORKER_MSG_CATALOGUE,
	FORKER_MSG_SPAWNED,
	FORKER_MSG_FAILED,
	FORKER_MSG_EXITED,
	FORKER_MSG_SWITCH,
	FORKER_MSG_PREPARED,
};

/* Fork worker @idx (its slot in the pool). */
struct forker_msg_spawn {
	struct transport_hdr hdr;
	uint32_t	idx;
	uint32_t	pad;
	uint64_t	image_memory_max;	/* bytes a decode may take */
};

/*
 * One dataset section: its name, source, then @nkv keys and values, each
 * a NUL-terminated string, one after the other.
 */
struct forker_msg_dataset {
	struct transport_hdr hdr;
	uint32_t	nkv;
	uint32_t	pad;
	char		strings[];
};

/*
 * The @ndatasets sections sent since the last CATALOGUE: open them; with
 * @prepare, beside the catalogue workers are forked from, until a SWITCH
 * (PREPARED says it is open).
 */
struct forker_msg_catalogue {
	struct transport_hdr hdr;
	uint32_t	ndatasets;
	uint32_t	prepare;
};

/* Fork workers from the catalogue prepared; PREPARED: it is open. */
struct forker_msg_switch {
	struct transport_hdr hdr;
	uint32_t	ndatasets;
	uint32_t	pad;
};

/* Worker @idx is @pid; the daemon's end of its socket comes with it. */
struct forker_msg_spawned {
	struct transport_hdr hdr;
	uint32_t	idx;
	int32_t		pid;
};

/* Worker @idx could not be forked. */
struct forker_msg_failed {
	struct transport_hdr hdr;
	uint32_t	idx;
	int32_t		error;		/* errno */
};

/* Worker @idx, @pid, ended. */
struct forker_msg_exited {
	struct transport_hdr hdr;
	uint32_t	idx;
	int32_t		pid;
	int32_t		status;		/* as waitpid() says */
};

/* What the fork server says to the daemon: its header says which. */
union forker_reply {
	struct transport_hdr		hdr;
	struct forker_msg_spawned	spawned;
	struct forker_msg_failed	failed;
	struct forker_msg_exited	exited;
	struct forker_msg_switch	prepared;
};

struct forker;

/**
 * forker_start() - fork the fork server, which forks workers from @cat
 * with the beats @beats[idx] (shared memory, mapped before).  With @base,
 * its messages are heard on that loop (@events->read, with @arg: call
 * forker_recv() until it says nothing waits); without, nothing calls
 * back and sends block (tests).  Fatal when it cannot be started.
 */
struct forker	*forker_start(struct event_base *base,
		    const struct catalogue *cat, struct worker_beat *beats,
		    const struct transport_events *events, void *arg);

/**
 * forker_exec() - start a fork server that holds nothing of the daemon's:
 * fork, and execute the binary open at @exe_fd (infeedd's, opened from
 * /proc/self/exe at start-up) as "infeedd --fork-server", with the beats'
 * shared memory @beats_fd (a memfd of whole struct worker_beat) and its
 * socket as its only other descriptors, and send it @cat.  It forks
 * workers once it has opened that catalogue; requests sent meanwhile
 * wait in its socket.
 * Its messages are heard as forker_start()'s.
 * Return: the fork server, or NULL (errno set) when it cannot be forked.
 */
struct forker	*forker_exec(struct event_base *base, int exe_fd,
		    const struct catalogue *cat, int beats_fd,
		    const struct transport_events *events, void *arg);

/**
 * forker_serve() - the fork server that forker_exec() started, in its
 * own process (infeedd's main() calls it for --fork-server): open the
 * catalogue the daemon sends first and serve the daemon.  Fatal when it
 * cannot.
 */
void		 forker_serve(void) __attribute__((noreturn));

/**
 * forker_fd() - the daemon's end of the socket (its transport's).
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
 * forker_reload() - workers forked from now on read the datasets of @cat,
 * the daemon's new catalogue, opened by the fork server from its sections
 * (datasets whose sections did not change stay as they were).
 * Return: 0, or -1 (errno set; EMSGSIZE: a section over FORKER_MAX_MSG).
 */
int		 forker_reload(struct forker *f, const struct catalogue *cat);

/**
 * forker_prepare() - forker_reload() in two steps: the fork server opens
 * @cat's datasets beside those it forks workers from, and says PREPARED
 * when they are open (which may take seconds: remote tar shards), then
 * forker_switch() makes workers forked from then on read them.
 * Return: 0, or -1 as forker_reload().
 */
int		 forker_prepare(struct forker *f, const struct catalogue *cat);
int		 forker_switch(struct forker *f);

/**
 * forker_recv() - the fork server's next message into @m (m->hdr.type
 * says which), and for SPAWNED the new worker's socket in *@fd (-1
 * otherwise; taken over).
 * Return: 1, 0 when nothing waits, -1 when the fork server is gone (or
 * said what is not a whole message of its type).
 */
int		 forker_recv(struct forker *f, union forker_reply *m, int *fd);

/**
 * forker_wait() - wait up to @ms for forker_recv() to have a message.
 * Return: 1 when it does, 0 at the time out.
 */
int		 forker_wait(struct forker *f, int ms);

/**
 * forker_stop() - close the socket and wait for the fork server, which
 * gives its workers FORKER_STOP_MS to exit and kills those left; one
 * still there a second after that (stopped, or busy opening a reload's
 * catalogue) is killed.  NULL is a no-op.
 */
void		 forker_stop(struct forker *f);

/**
 * forker_free() - close the socket of a fork server that is gone (or
 * going) without waiting for it: its caller reaps it; NULL is a no-op.
 */
void		 forker_free(struct forker *f);

#endif /* INFEED_FORKER_H */
