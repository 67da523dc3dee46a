/* SPDX-License-Identifier: MIT */
/*
 * The listening socket.  Socket activation first: when systemd passes one
 * listening Unix stream socket, infeedd serves on it and leaves the file to
 * systemd.  Otherwise infeedd binds its own: a stale socket file is removed
 * (only if nothing answers on it), the new one gets mode 0660, and it is
 * unlinked at exit.
 *
 * Out of file descriptors, a spare one (kept open on /dev/null) is given
 * up to accept the waiting client, which the peers then refuse with a
 * clear error; accepting pauses for LISTEN_RETRY_MS and tries again, so
 * that every waiting client hears why instead of waiting for a Welcome
 * that never comes.
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "clock.h"
#include "listen.h"
#include "log.h"
#include "xmalloc.h"

struct listener {
	struct event_base	*base;
	struct peers		*peers;
	int			 fd;
	int			 spare;		/* given up to refuse a client */
	uint64_t		 logged_ms;	/* the last "out of descriptors" */
	char			*path;		/* ours to unlink at exit */
	struct event		*ev;
	struct event		*retry_ev;
};

#define LISTEN_LOG_EVERY_MS	10000	/* and say so at most this often */

static void	listen_accept_cb(evutil_socket_t, short, void *);
static void	listen_retry_cb(evutil_socket_t, short, void *);

/* True when something is already serving on @path. */
static int
listen_in_use(const struct sockaddr_un *sun)
{
	int	fd, r;

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return (0);
	r = connect(fd, (const struct sockaddr *)sun, sizeof(*sun));
	close(fd);
	return (r == 0);
}

/* Bind our own socket at @path. */
static int
listen_bind(const char *path)
{
	struct sockaddr_un	sun;
	mode_t			old;
	int			fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		log_warn("socket path %s", path);
		return (-1);
	}
	strcpy(sun.sun_path, path);
	if (listen_in_use(&sun)) {
		log_warnx("%s: another infeedd is already listening there; "
		    "stop it or choose another --socket", path);
		errno = EADDRINUSE;
		return (-1);
	}
	if (unlink(path) == -1 && errno != ENOENT) {
		log_warn("cannot remove stale socket %s", path);
		return (-1);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		log_warn("socket");
		return (-1);
	}
	old = umask(0117);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		umask(old);
		log_warn("cannot bind %s (does its directory exist and is it "
		    "writable?)", path);
		close(fd);
		return (-1);
	}
	umask(old);
	if (chmod(path, 0660) == -1)
		log_warn("chmod 0660 %s", path);
	if (listen(fd, 128) == -1) {
		log_warn("listen %s", path);
		close(fd);
		unlink(path);
		return (-1);
	}
	return (fd);
}

/* The socket systemd passed, or -1 (and *@fd) when there is none. */
static int
listen_activated(int *fd)
{
	int	n, flags;

	*fd = -1;
	n = sd_listen_fds(1);
	if (n < 0) {
		errno = -n;
		log_warn("sd_listen_fds");
		return (-1);
	}
	if (n > 1) {
		log_warnx("systemd passed %d sockets; infeedd.socket should "
		    "have exactly one ListenStream=", n);
		return (-1);
	}
	if (n == 0)
		return (0);
	if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <=
	    0) {
		log_warnx("the socket systemd passed is not a listening Unix "
		    "stream socket");
		return (-1);
	}
	flags = fcntl(SD_LISTEN_FDS_START, F_GETFL);
	if (flags == -1 || fcntl(SD_LISTEN_FDS_START, F_SETFL,
	    flags | O_NONBLOCK) == -1 || fcntl(SD_LISTEN_FDS_START, F_SETFD,
	    FD_CLOEXEC) == -1) {
		log_warn("fcntl on the activated socket");
		return (-1);
	}
	*fd = SD_LISTEN_FDS_START;
	return (0);
}

/* Take the socket systemd passed, or bind our own at @path; accept. */
struct listener *
listen_open(struct event_base *base, const char *path, struct peers *peers)
{
	struct listener	*l;
	int		 fd;

	if (listen_activated(&fd) == -1)
		return (NULL);
	l = xcalloc(1, sizeof(*l));
	l->base = base;
	l->peers = peers;
	if (fd != -1)
		log_info("listening on the socket passed by systemd");
	else {
		if ((fd = listen_bind(path)) == -1) {
			free(l);
			return (NULL);
		}
		l->path = xstrdup(path);
		log_info("listening on %s", path);
	}
	l->fd = fd;
	l->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	l->ev = event_new(base, fd, EV_READ | EV_PERSIST, listen_accept_cb, l);
	l->retry_ev = evtimer_new(base, listen_retry_cb, l);
	if (l->ev == NULL || l->retry_ev == NULL || event_add(l->ev, NULL))
		fatalx("event_new for the listener");
	return (l);
}

/* Accept again after a pause for fds. */
static void
listen_retry_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct listener	*l = arg;

	(void)fd;
	(void)ev;
	if (l->spare == -1)
		l->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	event_add(l->ev, NULL);
}

/*
 * No descriptor left: give up the spare to accept one waiting client and
 * have it refused; then pause accepting for LISTEN_RETRY_MS.
 */
static void
listen_exhausted(struct listener *l)
{
	struct timeval	tv = { 0, LISTEN_RETRY_MS * 1000 };
	uint64_t	now = clock_now_ms();
	int		fd;

	if (l->spare != -1) {
		close(l->spare);
		l->spare = -1;
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd != -1)
			peers_refuse(l->peers, fd, "infeedd has run out of file "
			    "descriptors (the open files limit, LimitNOFILE=); "
			    "try again later, or ask the operator to raise the "
			    "limit or lower max_clients");
		if (now - l->logged_ms >= LISTEN_LOG_EVERY_MS) {
			log_warnx("accept: out of file descriptors; refusing "
			    "new clients until some are free");
			l->logged_ms = now;
		}
	}
	event_del(l->ev);
	evtimer_add(l->retry_ev, &tv);
}

/* Accept every waiting connection. */
static void
listen_accept_cb(evutil_socket_t lfd, short ev, void *arg)
{
	struct listener	*l = arg;
	int		 fd;

	(void)ev;
	for (;;) {
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE)
				listen_exhausted(l);
			else if (errno != EAGAIN)
				log_warn("accept");
			return;
		}
		peers_accept(l->peers, fd);
	}
}

/* Stop listening and remove our socket file; NULL is a no-op. */
void
listen_free(struct listener *l)
{
	if (l == NULL)
		return;
	event_free(l->ev);
	event_free(l->retry_ev);
	close(l->fd);
	if (l->spare != -1)
		close(l->spare);
	if (l->path != NULL)
		unlink(l->path);
	free(l->path);
	free(l);
}

