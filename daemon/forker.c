/* SPDX-License-Identifier: MIT */
/*
 * The fork server (see forker.h): the daemon's side, which starts it,
 * asks and listens, and the fork server's own loop, which forks, reaps
 * and reports.  The fork server is single-threaded (but for a thread that
 * watches its socket while it opens a catalogue) and blocks in poll()
 * on its socket and a signalfd of SIGCHLD; the daemon never blocks on it
 * but at start-up and shutdown.
 */

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "clock.h"
#include "config.h"
#include "forker.h"
#include "log.h"
#include "reader.h"
#include "xmalloc.h"

struct forker {
	pid_t			 pid;
	struct transport	*t;
};

/* What the fork server knows of one worker it forked. */
struct forker_child {
	pid_t		pid;
	unsigned	idx;
};

/* The fork server's state, in its own process. */
struct forker_server {
	struct catalogue	*cat;		/* the daemon's, or as it sent */
	struct config		*conf;		/* its sections, or NULL */
	struct config		*pending;	/* DATASETs before a CATALOGUE */
	struct catalogue	*next;		/* prepared, until a SWITCH */
	struct config		*next_conf;
	struct worker_beat	*beats;
	size_t			 nbeats;
	pid_t			 daemon;	/* its workers die with it */
	struct transport	*t;		/* blocking: sends wait */
	int			 sigfd;
	sigset_t		 mask;		/* the daemon's, for workers */
	struct forker_child	*children;
	size_t			 nchildren;
};

static int	forker_catalogue_send(struct forker *,
		    const struct catalogue *, bool);

/* The daemon's and the fork server's transports: records, no marks. */
static const struct transport_conf forker_transport_conf = {
	.kind = TRANSPORT_PACKET,
};

/* Send message @m of @len bytes, with @fd (-1: none; still the caller's). */
static int
forker_send(struct transport *t, void *m, size_t len, uint32_t type, int fd)
{
	return (transport_send_typed(t, m, len, type, &fd, fd != -1));
}

/* Whether the @n bytes of @h are the payload its type has. */
static bool
forker_whole(const struct transport_hdr *h, size_t n)
{
	switch (h->type) {
	case FORKER_MSG_SPAWN:
		return (n == sizeof(struct forker_msg_spawn));
	case FORKER_MSG_DATASET:
		/* Strings, the last NUL-terminated (forker_dataset_take()). */
		return (n > sizeof(struct forker_msg_dataset) &&
		    ((const char *)h)[n - 1] == '\0');
	case FORKER_MSG_CATALOGUE:
		return (n == sizeof(struct forker_msg_catalogue));
	case FORKER_MSG_SWITCH:
	case FORKER_MSG_PREPARED:
		return (n == sizeof(struct forker_msg_switch));
	case FORKER_MSG_SPAWNED:
		return (n == sizeof(struct forker_msg_spawned));
	case FORKER_MSG_FAILED:
		return (n == sizeof(struct forker_msg_failed));
	case FORKER_MSG_EXITED:
		return (n == sizeof(struct forker_msg_exited));
	default:
		return (false);
	}
}

/*
 * Receive one message of at most @len bytes into @buf and at most one
 * descriptor, through the transport's receive (cut ancillary data, a
 * surplus descriptor or a cut record refused, what came closed).
 * Return: 1, 0 when nothing waits, -1 at EOF, on error or for a record
 * that is not a whole message of its type.
 */
static int
forker_recv_on(struct transport *t, void *buf, size_t len, int *fd)
{
	struct pollfd	pfd = { transport_fd(t), POLLIN, 0 };
	size_t		nfds;
	ssize_t		n;
	int		rc;

	*fd = -1;
	/* Never block: a record is there whole, or nothing is. */
	while ((rc = poll(&pfd, 1, 0)) == -1 && errno == EINTR)
		;
	if (rc == 0)
		return (0);
	n = transport_recv_typed(t, buf, len, fd, 1, &nfds);
	if (n == -1 && errno == EAGAIN)
		return (0);
	if (n <= 0 || !forker_whole(buf, (size_t)n)) {
		if (n > 0 && nfds > 0)
			close(*fd);
		*fd = -1;
		return (-1);
	}
	if (nfds == 0)
		*fd = -1;
	return (1);
}

/* In the fork server: fork worker @idx and hand its socket back. */
static void
forker_spawn_worker(struct forker_server *fs,
    const struct forker_msg_spawn *req)
{
	struct forker_msg_failed	 no;
	struct forker_msg_spawned	 m;
	struct worker_conf		 wc;
	sigset_t			 all, old;
	pid_t				 pid;
	int				 sv[2];

	memset(&no, 0, sizeof(no));
	no.idx = req->idx;
	/* No catalogue yet: the daemon sends it first, so never. */
	if (req->idx >= fs->nbeats || fs->cat == NULL) {
		no.error = EINVAL;
		(void)forker_send(fs->t, &no, sizeof(no), FORKER_MSG_FAILED,
		    -1);
		return;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
		no.error = errno;
		(void)forker_send(fs->t, &no, sizeof(no), FORKER_MSG_FAILED,
		    -1);
		return;
	}
	/* The child sets its own dispositions before it takes a signal. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	if ((pid = fork()) == 0) {
		close(sv[0]);
		transport_close_fds(fs->t);
		close(fs->sigfd);
		wc.parent = getppid();
		wc.daemon = fs->daemon;
		wc.beat = &fs->beats[req->idx];
		wc.image_memory_max = req->image_memory_max;
		worker_main(fs->cat, sv[1], &fs->mask, &wc);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(sv[1]);
	if (pid == -1) {
		no.error = errno;
		close(sv[0]);
		(void)forker_send(fs->t, &no, sizeof(no), FORKER_MSG_FAILED,
		    -1);
		return;
	}
	fs->children = xreallocarray(fs->children, fs->nchildren + 1,
	    sizeof(*fs->children));
	fs->children[fs->nchildren].pid = pid;
	fs->children[fs->nchildren++].idx = req->idx;
	memset(&m, 0, sizeof(m));
	m.idx = req->idx;
	m.pid = pid;
	(void)forker_send(fs->t, &m, sizeof(m), FORKER_MSG_SPAWNED, sv[0]);
	close(sv[0]);
}

/* In the fork server: forget child @i. */
static void
forker_child_gone(struct forker_server *fs, size_t i)
{
	fs->children[i] = fs->children[--fs->nchildren];
}

/* In the fork server: reap the workers that ended and report them. */
static void
forker_reap(struct forker_server *fs)
{
	struct forker_msg_exited	m;
	pid_t				pid;
	size_t				i;
	int				status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (i = 0; i < fs->nchildren; i++) {
			if (fs->children[i].pid == pid)
				break;
		}
		if (i == fs->nchildren)
			continue;
		memset(&m, 0, sizeof(m));
		m.idx = fs->children[i].idx;
		m.pid = pid;
		m.status = status;
		forker_child_gone(fs, i);
		(void)forker_send(fs->t, &m, sizeof(m), FORKER_MSG_EXITED, -1);
	}
}

/* Bytes of string @str in a DATASET (NULL: ""). */
static size_t
forker_str_len(const char *str)
{
	return ((str != NULL ? strlen(str) : 0) + 1);
}

/* Append string @str (NULL: "") at *@p. */
static void
forker_str_put(char **p, const char *str)
{
	size_t	n = forker_str_len(str);

	memcpy(*p, str != NULL ? str : "", n);
	*p += n;
}

/*
 * The DATASET message of section @dc, malloc'd, and its *@len; NULL
 * (errno EMSGSIZE) when it would be over FORKER_MAX_MSG.
 */
static struct forker_msg_dataset *
forker_dataset_msg(const struct dataset_conf *dc, size_t *len)
{
	struct forker_msg_dataset	*m;
	size_t				 i;
	char				*p;

	*len = sizeof(*m) + forker_str_len(dc->name) +
	    forker_str_len(dc->source);
	for (i = 0; i < dc->nkv; i++)
		*len += forker_str_len(dc->kv[i].key) +
		    forker_str_len(dc->kv[i].value);
	if (*len > FORKER_MAX_MSG) {
		errno = EMSGSIZE;
		return (NULL);
	}
	m = xcalloc(1, *len);
	m->nkv = (uint32_t)dc->nkv;
	p = m->strings;
	forker_str_put(&p, dc->name);
	forker_str_put(&p, dc->source);
	for (i = 0; i < dc->nkv; i++) {
		forker_str_put(&p, dc->kv[i].key);
		forker_str_put(&p, dc->kv[i].value);
	}
	return (m);
}

/* The next string of a DATASET, from *@p before @end; NULL if none. */
static char *
forker_str_take(const char **p, const char *end)
{
	const char	*nul;
	char		*str;

	if (*p >= end || (nul = memchr(*p, '\0', (size_t)(end - *p))) == NULL)
		return (NULL);
	str = xstrdup(*p);
	*p = nul + 1;
	return (str);
}

/*
 * In the fork server: DATASET @m, a section, added to the catalogue to
 * come.  Return: 0, or -1 when its strings are not its name, source and
 * nkv keys and values exactly.
 */
static int
forker_dataset_take(struct forker_server *fs,
    const struct forker_msg_dataset *m)
{
	const char		*p = m->strings;
	const char		*end = (const char *)m + m->hdr.len;
	struct dataset_conf	*dc;
	struct config		*c;
	size_t			 i;

	if (m->nkv > FORKER_MAX_MSG / 2)
		return (-1);
	if (fs->pending == NULL)
		fs->pending = xcalloc(1, sizeof(*fs->pending));
	c = fs->pending;
	c->datasets = xreallocarray(c->datasets, c->ndatasets + 1,
	    sizeof(*c->datasets));
	dc = &c->datasets[c->ndatasets++];
	memset(dc, 0, sizeof(*dc));
	dc->name = forker_str_take(&p, end);
	dc->source = forker_str_take(&p, end);
	dc->kv = xcalloc(m->nkv, sizeof(*dc->kv));
	for (i = 0; i < m->nkv && dc->source != NULL; i++) {
		if ((dc->kv[i].key = forker_str_take(&p, end)) == NULL ||
		    (dc->kv[i].value = forker_str_take(&p, end)) == NULL) {
			free(dc->kv[i].key);
			break;
		}
		dc->nkv++;
	}
	/* Freed with fs->pending; every string came, and nothing more. */
	if (dc->name == NULL || dc->source == NULL || dc->nkv != m->nkv ||
	    p != end)
		return (-1);
	return (0);
}

/* In the fork server: drop a prepared catalogue (its own datasets only). */
static void
forker_next_free(struct forker_server *fs)
{
	if (fs->next == NULL)
		return;
	catalogue_disown(fs->next, fs->cat);
	catalogue_free(fs->next);
	config_free(fs->next_conf);
	fs->next = NULL;
	fs->next_conf = NULL;
}

/*
 * In the fork server, while it opens a catalogue: a thread that watches
 * the daemon's end of the socket, so that its close (the daemon stops)
 * makes the open give up at its next shard, scan chunk or folder
 * (dataset_open_tick()), and the daemon's stop waits for no open.
 */
struct forker_hangup {
	pthread_t	thread;
	int		fd;
	int		done[2];	/* the open ended */
};

static void *
forker_hangup_main(void *arg)
{
	struct forker_hangup	*w = arg;
	struct pollfd		 pfd[2];

	pfd[0].fd = w->fd;
	pfd[0].events = POLLRDHUP;	/* not POLLIN: messages may wait */
	pfd[1].fd = w->done[0];
	pfd[1].events = POLLIN;
	while (poll(pfd, 2, -1) == -1 && errno == EINTR)
		;
	if (pfd[1].revents == 0 && (pfd[0].revents & (POLLRDHUP | POLLHUP |
	    POLLERR)) != 0) {
		log_info("fork server: infeedd is gone; its catalogue's open "
		    "gives up");
		dataset_open_stop(true);
	}
	return (NULL);
}

/* Watch @fs's socket while it opens a catalogue (see above). */
static void
forker_hangup_start(struct forker_hangup *w, struct forker_server *fs)
{
	w->fd = transport_fd(fs->t);
	if (pipe2(w->done, O_CLOEXEC) == -1)
		fatal("fork server: pipe2");
	if ((errno = pthread_create(&w->thread, NULL, forker_hangup_main,
	    w)) != 0)
		fatal("fork server: the socket's watcher");
}

/* The open ended: the watcher goes before anything is forked. */
static void
forker_hangup_stop(struct forker_hangup *w)
{
	char	c = 0;

	while (write(w->done[1], &c, 1) == -1 && errno == EINTR)
		;
	pthread_join(w->thread, NULL);
	close(w->done[0]);
	close(w->done[1]);
}

/*
 * In the fork server: CATALOGUE @m, the sections sent since the last one
 * are the daemon's catalogue; open it, taking over the datasets whose
 * sections did not change.  Return: 0, or -1 when @m counts other
 * sections than came.
 */
static int
forker_catalogue_take(struct forker_server *fs,
    const struct forker_msg_catalogue *m)
{
	struct config		*conf = fs->pending;
	struct catalogue	*cat;
	struct forker_msg_switch done;
	struct forker_hangup	 hangup;

	if (conf == NULL)
		conf = xcalloc(1, sizeof(*conf));
	fs->pending = NULL;
	if (conf->ndatasets != m->ndatasets) {
		config_free(conf);
		return (-1);
	}
	forker_next_free(fs);
	/*
	 * Its catalogues are the daemon's, whose opens asked the servers;
	 * its workers' own opens (a shard read first) ask again.
	 */
	cache_trust_meta(true);
	forker_hangup_start(&hangup, fs);
	if (m->prepare) {
		/* Workers go on being forked from fs->cat meanwhile. */
		fs->next = catalogue_open_beside(conf, fs->cat, UINT64_MAX);
		forker_hangup_stop(&hangup);
		cache_trust_meta(false);
		fs->next_conf = conf;
		memset(&done, 0, sizeof(done));
		done.ndatasets = m->ndatasets;
		(void)forker_send(fs->t, &done, sizeof(done),
		    FORKER_MSG_PREPARED, -1);
		return (0);
	}
	/* The old one is this process's copy: the daemon's is its own. */
	cat = catalogue_open(conf, fs->cat, UINT64_MAX);
	forker_hangup_stop(&hangup);
	cache_trust_meta(false);
	catalogue_free(fs->cat);
	config_free(fs->conf);
	fs->cat = cat;
	fs->conf = conf;
	return (0);
}

/* In the fork server: SWITCH, fork workers from the prepared catalogue. */
static int
forker_switch_take(struct forker_server *fs)
{
	if (fs->next == NULL)
		return (-1);
	catalogue_disown(fs->cat, fs->next);
	catalogue_free(fs->cat);
	config_free(fs->conf);
	fs->cat = fs->next;
	fs->conf = fs->next_conf;
	fs->next = NULL;
	fs->next_conf = NULL;
	return (0);
}

/*
 * In the fork server, the daemon gone: give the workers (told to stop by
 * the daemon, or left without it) FORKER_STOP_MS, then kill those left.
 */
static void __attribute__((noreturn))
forker_exit(struct forker_server *fs)
{
	struct timespec	 pause = { 0, 10 * 1000 * 1000 };
	unsigned	 ms;
	size_t		 i;
	pid_t		 pid;

	for (i = 0; i < fs->nchildren; i++)
		kill(fs->children[i].pid, SIGTERM);
	for (ms = 0; fs->nchildren > 0 && ms < FORKER_STOP_MS; ms += 10) {
		while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) {
			for (i = 0; i < fs->nchildren; i++) {
				if (fs->children[i].pid == pid) {
					forker_child_gone(fs, i);
					break;
				}
			}
		}
		if (fs->nchildren > 0)
			nanosleep(&pause, NULL);
	}
	for (i = 0; i < fs->nchildren; i++) {
		log_warnx("worker %u (pid %d) did not stop within %d ms of "
		    "SIGTERM; killing it", fs->children[i].idx,
		    (int)fs->children[i].pid, FORKER_STOP_MS);
		kill(fs->children[i].pid, SIGKILL);
		waitpid(fs->children[i].pid, NULL, 0);
	}
	_exit(0);
}

/* The fork server: fork, reap and report until the daemon goes. */
static void __attribute__((noreturn))
forker_main(struct forker_server *fs)
{
	struct pollfd		 pfd[2];
	struct transport_hdr	*h;
	sigset_t		 chld;
	int			 fd, rc;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != fs->daemon)	/* gone before the line above */
		_exit(0);
	prctl(PR_SET_NAME, "infeedd-forker");
	/* Stopped by the daemon (EOF), not by a signal to the service's group. */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	log_init("infeedd-forker", 0);
	/* Its catalogue opens say nothing to systemd (NotifyAccess=main). */
	unsetenv("NOTIFY_SOCKET");
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if ((fs->sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) ==
	    -1)
		fatal("fork server: signalfd");
	/* Every signal was blocked across the fork; SIGCHLD stays so. */
	sigprocmask(SIG_SETMASK, &fs->mask, NULL);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	h = xmalloc(FORKER_MAX_MSG);
	for (;;) {
		pfd[0].fd = transport_fd(fs->t);
		pfd[0].events = POLLIN;
		pfd[1].fd = fs->sigfd;
		pfd[1].events = POLLIN;
		if (poll(pfd, 2, -1) == -1) {
			if (errno == EINTR)
				continue;
			fatal("fork server: poll");
		}
		if (pfd[1].revents != 0) {
			struct signalfd_siginfo	si;

			while (read(fs->sigfd, &si, sizeof(si)) > 0)
				;
			forker_reap(fs);
		}
		if (pfd[0].revents == 0)
			continue;
		while ((rc = forker_recv_on(fs->t, h, FORKER_MAX_MSG,
		    &fd)) == 1) {
			if (fd != -1)
				close(fd);
			if (h->type == FORKER_MSG_SPAWN)
				forker_spawn_worker(fs, (void *)h);
			else if (h->type == FORKER_MSG_DATASET)
				rc = forker_dataset_take(fs, (void *)h);
			else if (h->type == FORKER_MSG_CATALOGUE)
				rc = forker_catalogue_take(fs, (void *)h);
			else if (h->type == FORKER_MSG_SWITCH)
				rc = forker_switch_take(fs);
			else
				rc = -1;	/* one of its own */
			if (rc == -1) {
				log_warnx("fork server: a %s from the daemon "
				    "is not one; going", h->type ==
				    FORKER_MSG_DATASET ? "DATASET" :
				    h->type == FORKER_MSG_CATALOGUE ?
				    "CATALOGUE" : "message");
				break;
			}
		}
		if (rc == -1)
			forker_exit(fs);
	}
}

/* The daemon's side: a transport over @fd, heard on @base. */
static void
forker_listen(struct forker *f, struct event_base *base, int fd,
    const struct transport_events *events, void *arg)
{
	struct transport_conf	tc = forker_transport_conf;

	tc.events = events;
	tc.arg = arg;
	f->t = transport_new(base, fd, &tc);
	if (base != NULL)
		transport_read_on(f->t, NULL);
}

/* Fork the fork server, before any client. */
struct forker *
forker_start(struct event_base *base, const struct catalogue *cat,
    struct worker_beat *beats, const struct transport_events *events,
    void *arg)
{
	struct forker_server	 fs;
	struct forker		*f;
	sigset_t		 all, old;
	pid_t			 self = getpid();
	int			 sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		fatal("fork server: socketpair");
	/* No handler of the daemon's may run in it: signals wait. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	f = xcalloc(1, sizeof(*f));
	switch ((f->pid = fork())) {
	case -1:
		fatal("cannot fork the fork server");
	case 0:
		close(sv[0]);
		memset(&fs, 0, sizeof(fs));
		fs.cat = (struct catalogue *)(uintptr_t)cat;	/* a copy */
		fs.beats = beats;
		fs.nbeats = SIZE_MAX;	/* the pool asks for no other */
		fs.daemon = self;
		fs.t = transport_new(NULL, sv[1], &forker_transport_conf);
		fs.sigfd = -1;
		fs.mask = old;
		forker_main(&fs);
	default:
		break;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(sv[1]);
	forker_listen(f, base, sv[0], events, arg);
	log_debug("fork server started, pid %d", (int)f->pid);
	return (f);
}

/*
 * In forker_exec()'s child, which may call only what is safe after a
 * fork of a process with threads: @sock and @beats to FORKER_SOCK_FD and
 * FORKER_BEATS_FD, the binary @exe to the one after them (close-on-exec),
 * every other descriptor past stdio closed (they are close-on-exec too).
 * Return: the binary's new descriptor, or -1.
 */
static int
forker_exec_fds(int sock, int beats, int exe)
{
	int	s, b, e, to = FORKER_BEATS_FD + 1;

	/* Above the targets first, so that no dup2() lands on another. */
	if ((s = fcntl(sock, F_DUPFD_CLOEXEC, to + 1)) == -1 ||
	    (b = fcntl(beats, F_DUPFD_CLOEXEC, to + 1)) == -1 ||
	    (e = fcntl(exe, F_DUPFD_CLOEXEC, to + 1)) == -1)
		return (-1);
	/* dup2() clears close-on-exec on the copies, and only on them. */
	if (dup2(s, FORKER_SOCK_FD) == -1 || dup2(b, FORKER_BEATS_FD) == -1 ||
	    dup3(e, to, O_CLOEXEC) == -1)
		return (-1);
	(void)close_range(to + 1, ~0U, 0);
	return (to);
}

/* Start a fork server from infeedd's own binary. */
struct forker *
forker_exec(struct event_base *base, int exe_fd, const struct catalogue *cat,
    int beats_fd, const struct transport_events *events, void *arg)
{
	extern char	**environ;
	static char	 name[] = "infeedd-forker", mode[] = "--fork-server";
	char		*argv[] = { name, mode, NULL };
	struct forker	*f;
	sigset_t	 all, old;
	pid_t		 self = getpid(), pid;
	int		 sv[2], saved;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		return (NULL);
	/* No handler of the daemon's may run in it; forker_serve() unblocks. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	if ((pid = fork()) == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);	/* kept by execve() */
		if (getppid() == self && (exe_fd = forker_exec_fds(sv[1],
		    beats_fd, exe_fd)) != -1)
			execveat(exe_fd, "", argv, environ, AT_EMPTY_PATH);
		_exit(127);
	}
	saved = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(sv[1]);
	if (pid == -1) {
		close(sv[0]);
		errno = saved;
		return (NULL);
	}
	f = xcalloc(1, sizeof(*f));
	f->pid = pid;
	forker_listen(f, base, sv[0], events, arg);
	/* Its catalogue first: it waits in the socket until it execs. */
	if (forker_reload(f, cat) == -1) {
		saved = errno;
		kill(pid, SIGKILL);
		forker_stop(f);
		errno = saved;
		return (NULL);
	}
	return (f);
}

/* The fork server forker_exec() started, in its own process. */
void
forker_serve(void)
{
	struct forker_server	 fs;
	struct stat		 sb;
	void			*beats;

	log_init("infeedd-forker", 0);
	memset(&fs, 0, sizeof(fs));
	fs.daemon = getppid();
	fs.t = transport_new(NULL, FORKER_SOCK_FD, &forker_transport_conf);
	fs.sigfd = -1;
	sigemptyset(&fs.mask);		/* the daemon blocks none */
	if (fstat(FORKER_BEATS_FD, &sb) == -1 ||
	    (size_t)sb.st_size < sizeof(*fs.beats))
		fatalx("fork server: descriptor %d is not the workers' beats "
		    "(infeedd runs itself with --fork-server; it is not for "
		    "operators)", FORKER_BEATS_FD);
	beats = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE,
	    MAP_SHARED, FORKER_BEATS_FD, 0);
	if (beats == MAP_FAILED)
		fatal("fork server: the workers' beats");
	close(FORKER_BEATS_FD);
	fs.beats = beats;
	fs.nbeats = (size_t)sb.st_size / sizeof(*fs.beats);
	/* The daemon's catalogue is the first thing it reads (forker_exec()). */
	forker_main(&fs);
}

/* The daemon's end of the socket. */
int
forker_fd(const struct forker *f)
{
	return (transport_fd(f->t));
}

/* The fork server's pid. */
pid_t
forker_pid(const struct forker *f)
{
	return (f->pid);
}

/* Ask for worker @idx. */
int
forker_spawn(struct forker *f, unsigned idx, uint64_t image_memory_max)
{
	struct forker_msg_spawn	m;

	memset(&m, 0, sizeof(m));
	m.idx = idx;
	m.image_memory_max = image_memory_max;
	return (forker_send(f->t, &m, sizeof(m), FORKER_MSG_SPAWN, -1));
}

/* New workers read the datasets of @cat. */
int
forker_reload(struct forker *f, const struct catalogue *cat)
{
	return (forker_catalogue_send(f, cat, false));
}

/* The fork server opens @cat's datasets beside its own, until a SWITCH. */
int
forker_prepare(struct forker *f, const struct catalogue *cat)
{
	return (forker_catalogue_send(f, cat, true));
}

/* New workers read the datasets the fork server prepared. */
int
forker_switch(struct forker *f)
{
	struct forker_msg_switch	m;

	memset(&m, 0, sizeof(m));
	return (forker_send(f->t, &m, sizeof(m), FORKER_MSG_SWITCH, -1));
}

/* @cat's sections, then a CATALOGUE (with @prepare, to be prepared). */
static int
forker_catalogue_send(struct forker *f, const struct catalogue *cat,
    bool prepare)
{
	struct forker_msg_catalogue	  end;
	struct forker_msg_dataset	**m;
	size_t				 *len, i;
	int				  rc = 0;

	/* Every section fits, or none is sent. */
	m = xcalloc(cat->ndatasets + 1, sizeof(*m));
	len = xcalloc(cat->ndatasets + 1, sizeof(*len));
	for (i = 0; i < cat->ndatasets; i++) {
		if ((m[i] = forker_dataset_msg(cat->entries[i].conf,
		    &len[i])) == NULL) {
			rc = -1;
			break;
		}
	}
	for (i = 0; rc == 0 && i < cat->ndatasets; i++)
		rc = forker_send(f->t, m[i], len[i], FORKER_MSG_DATASET, -1);
	if (rc == 0) {
		memset(&end, 0, sizeof(end));
		end.ndatasets = (uint32_t)cat->ndatasets;
		end.prepare = prepare;
		rc = forker_send(f->t, &end, sizeof(end),
		    FORKER_MSG_CATALOGUE, -1);
	}
	for (i = 0; i < cat->ndatasets; i++)
		free(m[i]);
	free(m);
	free(len);
	return (rc);
}

/* The fork server's next message. */
int
forker_recv(struct forker *f, union forker_reply *m, int *fd)
{
	int	rc;

	rc = forker_recv_on(f->t, m, sizeof(*m), fd);
	/* Only the fork server's messages come this way. */
	if (rc == 1 && m->hdr.type != FORKER_MSG_SPAWNED &&
	    m->hdr.type != FORKER_MSG_FAILED &&
	    m->hdr.type != FORKER_MSG_EXITED &&
	    m->hdr.type != FORKER_MSG_PREPARED) {
		if (*fd != -1)
			close(*fd);
		*fd = -1;
		return (-1);
	}
	return (rc);
}

/* Wait for a message. */
int
forker_wait(struct forker *f, int ms)
{
	struct pollfd	pfd = { transport_fd(f->t), POLLIN, 0 };
	int		rc;

	do {
		rc = poll(&pfd, 1, ms);
	} while (rc == -1 && errno == EINTR);
	return (rc > 0);
}

/* Close the socket of a fork server that is gone; the caller reaps it. */
void
forker_free(struct forker *f)
{
	if (f == NULL)
		return;
	transport_free(f->t);
	free(f);
}

/*
 * Close the socket and wait for the fork server to go: it gives its
 * workers FORKER_STOP_MS, so one still there a second after that is not
 * reading its socket (stopped by SIGSTOP, or in the middle of a reload's
 * catalogue open) and is killed, its workers with it (PDEATHSIG).
 */
void
forker_stop(struct forker *f)
{
	struct timespec	 pause = { 0, 10 * 1000 * 1000 };
	uint64_t	 deadline;
	pid_t		 pid;

	if (f == NULL)
		return;
	transport_free(f->t);
	deadline = clock_now_ms() + FORKER_STOP_MS + 1000;
	while ((pid = waitpid(f->pid, NULL, WNOHANG)) == 0 ||
	    (pid == -1 && errno == EINTR)) {
		if (clock_now_ms() >= deadline) {
			log_warnx("the fork server (pid %d) did not go within "
			    "%d ms of infeedd's stop; killing it",
			    (int)f->pid, FORKER_STOP_MS + 1000);
			kill(f->pid, SIGKILL);
			while (waitpid(f->pid, NULL, 0) == -1 &&
			    errno == EINTR)
				;
			break;
		}
		nanosleep(&pause, NULL);
	}
	free(f);
}
