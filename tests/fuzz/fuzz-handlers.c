/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for infeedd's request handlers (peer.c, session.c and the
 * pool's side of them): the real daemon, in process, serves every input
 * on a fresh connection.
 *
 * One struct daemon is made on the first input, as main.c makes it: a
 * small catalogue of synthetic datasets and one forked worker process
 * (forking per input would be slow).  Each input gets a socketpair whose
 * daemon end goes through peer_accept(), as listen.c does; the fuzz bytes
 * go into the other end while the event loop runs until the daemon is
 * idle; then the client end closes and the daemon must be as it was: no
 * peer, no step ring counted against the budget, no job queued or running,
 * no worker restarted, no descriptor left open (and, now and then, no ring
 * still mapped in the worker).  The client checks what it gets, too: no
 * more replies than requests, every request answered once the daemon is
 * idle (a Next may wait only while the client holds every slot) and no
 * descriptor of ours kept, Attached with a ring that fits, and every Step
 * in a slot the client does not hold, with each row's index, label and
 * (uint8) bytes as the dataset has them.
 *
 * The first byte says how the rest is sent (low two bits) and how the
 * client behaves (high bits):
 *   0  a raw byte stream, in pieces whose sizes come from the data
 *   1  length-prefixed frames as they are, the daemon idle after each
 *   2, 3  a script: each op byte builds one well-formed request from the
 *      bytes after it (see script_op), the daemon idle after each unless
 *      the op asks to pipeline
 *   0x80  a descriptor travels with the first byte (clients never send one)
 *   0x40  the client never reads its replies
 *   0x20  the client hangs up without waiting for the daemon to be idle
 *
 * Built for libFuzzer with -Dfuzz=enabled (clang); without it, fuzz-main.c
 * runs it over tests/fuzz/corpus-handlers as a regression test.
 */

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "wire.h"

#define FUZZ_MAX_SLOTS		INFEED_MAX_SLOTS
#define FUZZ_IDLE_MS		10000	/* longer than this is a hang */
#define FUZZ_MAPS_EVERY		1024	/* inputs between worker map checks */

#define FUZZ_ASSERT(c, ...) do {					\
	if (!(c))							\
		fuzz_fail(__LINE__, #c, __VA_ARGS__);			\
} while (0)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* The catalogue: distinct sample shapes tell the datasets apart. */
static const char fuzz_config[] =
    "[infeedd]\n"
    "workers = 1\n"
    "max_clients = 4\n"
    "max_frame_size = 4K\n"
    "memory_budget = 512K\n"
    /* Every input must leave the daemon as it found it. */
    "keep_ring_memory = 0\n"
    "[dataset u8]\n"
    "type = synthetic\n"
    "samples = 37\n"
    "shape = 3,2,2\n"
    "dtype = uint8\n"
    "classes = 5\n"
    "seed = 1\n"
    "[dataset f32]\n"
    "type = synthetic\n"
    "samples = 100\n"
    "shape = 4\n"
    "dtype = float32\n"
    "[dataset tiny]\n"
    "type = synthetic\n"
    "samples = 1\n"
    "shape = 1\n"
    "dtype = uint8\n"
    "classes = 1\n"
    "[dataset private]\n"
    "type = synthetic\n"
    "samples = 10\n"
    "shape = 5\n"
    "dtype = uint8\n"
    "allow_groups = nogroup\n";

static const char *const fuzz_names[] = {
	"u8", "f32", "tiny", "private", "nosuch", "",
};

static const float fuzz_floats[] = {
	0.0f, 1.0f, -1.0f, 0.5f, 255.0f, 1.0f / 255.0f, 3.0f, 1e30f, -1e-30f,
	NAN, INFINITY, -INFINITY, 1e-45f, 65504.0f,
};

/* The one daemon, made on the first input and kept. */
static struct daemon	*d;
static struct event	*wake_ev;
static pid_t		 owner = -1;
static int		 devnull = -1;
static unsigned		 restarts;
static unsigned long	 inputs;
static bool		 verbose;	/* $FUZZ_VERBOSE: log and trace */

/* The trainer's end of one connection, and what it has seen. */
struct client {
	int		 fd;
	uint64_t	 peer_id;
	struct wire_in	 in;
	struct wire_in	 sent;		/* what we sent, cut as the daemon does */
	bool		 sent_bad;	/* the daemon will stop at a bad frame */
	bool		 reading;	/* drains replies */
	bool		 eof;		/* the daemon hung up */
	int		 sendfd;	/* goes with the next byte sent */
	pid_t		 proc;		/* the client's process, for the daemon */
	unsigned	 requests;
	unsigned	 replies;

	/* The session, from Attached. */
	const struct dataset *ds;
	uint8_t		*ring;
	uint64_t	 ring_bytes;
	uint32_t	 slots;
	uint64_t	 slot_bytes;
	uint64_t	 data_offset;
	uint64_t	 labels_offset;
	uint64_t	 indices_offset;
	uint64_t	 cbs;
	uint64_t	 steps_per_epoch;
	uint64_t	 sample_bytes;
	Infeed__DType	 data_dtype;
	Infeed__DType	 label_dtype;	/* INT32 or INT64 */
	/* Per slot: Steps received, Releases sent, Released received. */
	uint32_t	 steps[FUZZ_MAX_SLOTS];
	uint32_t	 releases[FUZZ_MAX_SLOTS];
	uint32_t	 released[FUZZ_MAX_SLOTS];
};

/* The bytes a script reads its arguments from. */
struct script {
	const uint8_t	*p;
	size_t		 left;
};

static void	fuzz_fail(int, const char *, const char *, ...)
		    __attribute__((format(printf, 3, 4), noreturn));

/* Say which invariant broke and abort, so libFuzzer keeps the input. */
static void
fuzz_fail(int line, const char *cond, const char *fmt, ...)
{
	va_list	ap;

	fprintf(stderr, "fuzz-handlers.c:%d: %s: ", line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* Open descriptors of this process. */
static int
fuzz_count_fds(void)
{
	DIR		*dir;
	struct dirent	*de;
	int		 n = 0;

	if ((dir = opendir("/proc/self/fd")) == NULL)
		return (-1);
	while ((de = readdir(dir)) != NULL)
		n += de->d_name[0] != '.';
	closedir(dir);
	return (n);
}

/* Restarts of every worker together. */
static unsigned
fuzz_worker_restarts(void)
{
	struct pool_worker_info	wi;
	unsigned		n = 0, i;

	for (i = 0; i < pool_size(d->pool); i++) {
		pool_worker_info(d->pool, i, &wi);
		n += wi.restarts;
	}
	return (n);
}

/* Rings still mapped in the worker processes (UNMAP is not answered). */
static int
fuzz_worker_rings(void)
{
	struct pool_worker_info	 wi;
	char			 path[64], line[512];
	FILE			*fp;
	unsigned		 i;
	int			 n = 0;

	for (i = 0; i < pool_size(d->pool); i++) {
		pool_worker_info(d->pool, i, &wi);
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)wi.pid);
		if ((fp = fopen(path, "r")) != NULL) {
			while (fgets(line, sizeof(line), fp) != NULL)
				n += strstr(line, "infeed-ring") != NULL;
			fclose(fp);
		}
	}
	return (n);
}

/* At exit: stop the worker and free the daemon, in its process only. */
static void
fuzz_teardown(void)
{
	if (getpid() != owner)
		return;
	event_free(wake_ev);
	daemon_free(d);
	close(devnull);
}

/* Nothing to do: the timer only bounds a blocking loop pass. */
static void
fuzz_wake_cb(evutil_socket_t fd, short ev, void *arg)
{
	(void)fd;
	(void)ev;
	(void)arg;
}

/* Make the daemon as main.c does, minus the listening socket. */
static void
fuzz_init(void)
{
	const char	*tmp = getenv("TMPDIR");
	struct daemon_args	 args = { NULL, NULL, 0, false, false, false };
	char			 path[4096];
	int			 fd;

	if (tmp == NULL || *tmp == '\0')
		tmp = "/tmp";
	snprintf(path, sizeof(path), "%s/fuzz-handlers.XXXXXX", tmp);
	if ((fd = mkstemp(path)) == -1 ||
	    write(fd, fuzz_config, sizeof(fuzz_config) - 1) !=
	    (ssize_t)(sizeof(fuzz_config) - 1))
		fuzz_fail(__LINE__, "mkstemp", "%s: %s", path, strerror(errno));
	close(fd);

	verbose = getenv("FUZZ_VERBOSE") != NULL;
	log_init("fuzz-handlers", verbose ? 1 : -1);
	signal(SIGPIPE, SIG_IGN);
	args.config_path = path;
	d = daemon_start(&args);
	unlink(path);
	FUZZ_ASSERT(d->cat->ndatasets >= 3, "%zu datasets", d->cat->ndatasets);
	wake_ev = evtimer_new(d->base, fuzz_wake_cb, NULL);
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	FUZZ_ASSERT(wake_ev != NULL && devnull != -1, "setup");
	owner = getpid();
	restarts = fuzz_worker_restarts();
	atexit(fuzz_teardown);
}

/*
 * A socketpair made by a short-lived child, so that the daemon sees that
 * child as the client's process (SO_PEERCRED) and, when it ends at
 * client_close(), gives back ring memory an ended session still held, as
 * for a trainer's process that exits; the child waits to be killed.
 */
static pid_t
fuzz_client_socketpair(int sv[2])
{
	char		 cbuf[CMSG_SPACE(2 * sizeof(int))], c;
	struct iovec	 iov = { &c, 1 };
	struct msghdr	 msg;
	struct cmsghdr	*cm;
	pid_t		 pid;
	int		 ch[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ch) == -1)
		fuzz_fail(__LINE__, "socketpair", "%s", strerror(errno));
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	if ((pid = fork()) == -1)
		fuzz_fail(__LINE__, "fork", "%s", strerror(errno));
	if (pid == 0) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0, sv) == -1)
			_exit(1);
		c = 0;
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
		memcpy(CMSG_DATA(cm), sv, 2 * sizeof(int));
		if (sendmsg(ch[1], &msg, 0) != 1)
			_exit(1);
		close(sv[0]);
		close(sv[1]);
		for (;;)
			pause();
	}
	close(ch[1]);
	if (recvmsg(ch[0], &msg, MSG_CMSG_CLOEXEC) != 1 ||
	    (cm = CMSG_FIRSTHDR(&msg)) == NULL ||
	    cm->cmsg_len != CMSG_LEN(2 * sizeof(int)))
		fuzz_fail(__LINE__, "recvmsg", "no socketpair from the child");
	memcpy(sv, CMSG_DATA(cm), 2 * sizeof(int));
	close(ch[0]);
	return (pid);
}

/* Whether the daemon still has this client's peer. */
static bool
fuzz_peer(const struct client *c)
{
	return (peers_has(d->peers, c->peer_id));
}

/* The dataset whose sample shape Attached gives. */
static const struct dataset *
fuzz_dataset_by_shape(const Infeed__Attached *at)
{
	struct dataset	*ds;
	size_t		 i;

	for (i = 0; i < d->cat->ndatasets; i++) {
		ds = d->cat->datasets[i];
		if (ds->ndim == at->n_sample_shape &&
		    memcmp(ds->shape, at->sample_shape,
		    ds->ndim * sizeof(*ds->shape)) == 0)
			return (ds);
	}
	return (NULL);
}

/* Forget the session's ring. */
static void
client_unmap(struct client *c)
{
	if (c->ring != NULL)
		munmap(c->ring, c->ring_bytes);
	c->ring = NULL;
	c->ds = NULL;
	memset(c->steps, 0, sizeof(c->steps));
	memset(c->releases, 0, sizeof(c->releases));
	memset(c->released, 0, sizeof(c->released));
}

/* Attached: the ring must come with it and hold what it says. */
static void
client_attached(struct client *c, const Infeed__Attached *at)
{
	struct stat	sb;
	uint64_t	cbs, end, lsize;
	int		fd;

	fd = wire_in_take_fd(&c->in);
	FUZZ_ASSERT(fd != -1, "Attached without the ring's descriptor");
	FUZZ_ASSERT(c->ring == NULL, "Attached while attached");
	FUZZ_ASSERT(at->slots >= 1 && at->slots <= FUZZ_MAX_SLOTS,
	    "%u slots", at->slots);
	FUZZ_ASSERT(at->slot_bytes != 0 && at->ring_bytes / at->slot_bytes ==
	    at->slots && at->ring_bytes % at->slot_bytes == 0,
	    "ring of %llu bytes for %u slots of %llu",
	    (unsigned long long)at->ring_bytes, at->slots,
	    (unsigned long long)at->slot_bytes);
	FUZZ_ASSERT(at->ring_bytes <= d->conf->memory_budget,
	    "ring of %llu bytes over the budget",
	    (unsigned long long)at->ring_bytes);
	cbs = at->combined_batch_size;
	FUZZ_ASSERT(at->has_label_dtype && (at->label_dtype ==
	    INFEED__DTYPE__DTYPE_INT32 || at->label_dtype ==
	    INFEED__DTYPE__DTYPE_INT64), "labels of dtype %d",
	    at->has_label_dtype ? (int)at->label_dtype : -1);
	lsize = at->label_dtype == INFEED__DTYPE__DTYPE_INT64 ? 8 : 4;
	FUZZ_ASSERT(cbs > 0 && !__builtin_mul_overflow(cbs, at->sample_bytes,
	    &end) && at->data_offset == 0 && end <= at->labels_offset &&
	    !__builtin_mul_overflow(cbs, lsize, &end) &&
	    !__builtin_add_overflow(at->labels_offset, end, &end) &&
	    end <= at->indices_offset &&
	    !__builtin_mul_overflow(cbs, 8, &end) &&
	    !__builtin_add_overflow(at->indices_offset, end, &end) &&
	    end <= at->slot_bytes,
	    "slot layout: %llu rows of %llu bytes, labels at %llu, indices "
	    "at %llu, slot of %llu", (unsigned long long)
	    at->combined_batch_size, (unsigned long long)at->sample_bytes,
	    (unsigned long long)at->labels_offset,
	    (unsigned long long)at->indices_offset,
	    (unsigned long long)at->slot_bytes);
	FUZZ_ASSERT(at->last_step_rows <= at->combined_batch_size &&
	    at->steps_per_epoch > 0, "%llu steps, last of %llu rows",
	    (unsigned long long)at->steps_per_epoch,
	    (unsigned long long)at->last_step_rows);
	FUZZ_ASSERT(fstat(fd, &sb) == 0 && (uint64_t)sb.st_size ==
	    at->ring_bytes, "ring file of %lld bytes", (long long)sb.st_size);
	c->ds = fuzz_dataset_by_shape(at);
	FUZZ_ASSERT(c->ds != NULL, "Attached to no dataset of the catalogue");
	c->ring = mmap(NULL, at->ring_bytes, PROT_READ, MAP_SHARED, fd, 0);
	FUZZ_ASSERT(c->ring != MAP_FAILED, "mmap: %s", strerror(errno));
	close(fd);
	c->ring_bytes = at->ring_bytes;
	c->slots = at->slots;
	c->slot_bytes = at->slot_bytes;
	c->data_offset = at->data_offset;
	c->labels_offset = at->labels_offset;
	c->indices_offset = at->indices_offset;
	c->cbs = at->combined_batch_size;
	c->steps_per_epoch = at->steps_per_epoch;
	c->sample_bytes = at->sample_bytes;
	c->data_dtype = at->data_dtype;
	c->label_dtype = at->label_dtype;
}

/* Step: a slot we do not hold, every row as the dataset has it. */
static void
client_step(struct client *c, const Infeed__Step *st)
{
	const uint8_t	*base;
	const uint64_t	*indices;
	const int32_t	*labels;
	const int64_t	*labels64;
	uint8_t		 sample[256];
	int64_t		 label, got;
	uint64_t	 r;

	FUZZ_ASSERT(c->ring != NULL, "Step without a session");
	FUZZ_ASSERT(st->slot < c->slots, "Step in slot %u of %u", st->slot,
	    c->slots);
	/* Each Step after the first in a slot needs a Release before it. */
	FUZZ_ASSERT(c->steps[st->slot] <= c->releases[st->slot],
	    "Step %u in slot %u after %u Releases of it: the client holds it",
	    c->steps[st->slot] + 1, st->slot, c->releases[st->slot]);
	FUZZ_ASSERT(st->rows <= c->cbs && st->step < c->steps_per_epoch,
	    "Step %llu of %llu rows", (unsigned long long)st->step,
	    (unsigned long long)st->rows);
	/* Released before it arrived: the daemon may be refilling it. */
	if (c->steps[st->slot]++ < c->releases[st->slot])
		return;
	base = c->ring + (uint64_t)st->slot * c->slot_bytes;
	indices = (const uint64_t *)(const void *)(base + c->indices_offset);
	labels = (const int32_t *)(const void *)(base + c->labels_offset);
	labels64 = (const int64_t *)(const void *)(base + c->labels_offset);
	FUZZ_ASSERT(c->ds->sample_bytes <= sizeof(sample), "sample size");
	for (r = 0; r < st->rows; r++) {
		FUZZ_ASSERT(indices[r] < c->ds->samples, "row %llu: index "
		    "%llu", (unsigned long long)r,
		    (unsigned long long)indices[r]);
		FUZZ_ASSERT(dataset_read(c->ds, indices[r], sample, &label, false) ==
		    0, "dataset_read");
		got = c->label_dtype == INFEED__DTYPE__DTYPE_INT64 ?
		    labels64[r] : labels[r];
		FUZZ_ASSERT(got == label, "row %llu: label %lld, not %lld",
		    (unsigned long long)r, (long long)got, (long long)label);
		/* Float data may have gone through a transform. */
		if (c->data_dtype == (Infeed__DType)INFEED_DTYPE_UINT8)
			FUZZ_ASSERT(memcmp(base + c->data_offset + r *
			    c->sample_bytes, sample, c->ds->sample_bytes) == 0,
			    "row %llu: wrong bytes", (unsigned long long)r);
	}
}

/* Check one reply. */
static void
client_reply(struct client *c, const Infeed__Frame *f)
{
	c->replies++;
	if (verbose)
		fprintf(stderr, "fuzz: <- %s\n", wire_case_name(f->msg_case));
	switch (f->msg_case) {
	case INFEED__FRAME__MSG_ATTACHED:
		client_attached(c, f->attached);
		break;
	case INFEED__FRAME__MSG_STEP:
		client_step(c, f->step);
		break;
	case INFEED__FRAME__MSG_DETACHED:
		client_unmap(c);
		break;
	case INFEED__FRAME__MSG_RELEASED:
		FUZZ_ASSERT(f->released->slot < FUZZ_MAX_SLOTS &&
		    c->released[f->released->slot] <
		    c->steps[f->released->slot], "Released slot %u, not "
		    "held", f->released->slot);
		c->released[f->released->slot]++;
		break;
	case INFEED__FRAME__MSG_WELCOME:
	case INFEED__FRAME__MSG_ERROR:
	case INFEED__FRAME__MSG_DATASET_LIST:
	case INFEED__FRAME__MSG_END_OF_DATA:
	case INFEED__FRAME__MSG_STATS:
		break;
	default:
		fuzz_fail(__LINE__, "reply", "the daemon sent %s",
		    wire_case_name(f->msg_case));
	}
	FUZZ_ASSERT(c->replies <= c->requests,
	    "%u replies to %u requests (the last: %s)", c->replies,
	    c->requests, wire_case_name(f->msg_case));
}

/* Read and check whatever replies arrived; returns bytes read. */
static size_t
client_read(struct client *c)
{
	Infeed__Frame	*f;
	char		*cause = NULL;
	size_t		 got = 0;
	ssize_t		 n;

	if (!c->reading || c->eof)
		return (0);
	for (;;) {
		n = wire_in_recv(&c->in, c->fd);
		if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
			FUZZ_ASSERT(n == 0 || errno == ECONNRESET,
			    "recv: %s", strerror(errno));
			c->eof = true;
			break;
		}
		if (n == -1)
			break;
		got += (size_t)n;
		for (;;) {
			switch (wire_in_frame(&c->in, &f, &cause)) {
			case WIRE_AGAIN:
				break;
			case WIRE_BAD:
				fuzz_fail(__LINE__, "frame", "the daemon sent a "
				    "bad frame: %s", cause);
			case WIRE_OK:
				client_reply(c, f);
				infeed__frame__free_unpacked(f, NULL);
				continue;
			}
			break;
		}
	}
	return (got);
}

/* One loop pass; blocking (for a worker, at most 20 ms) when @wait. */
static void
fuzz_pass(bool wait)
{
	struct timeval	tv = { 0, 20000 };

	if (wait) {
		evtimer_add(wake_ev, &tv);
		event_base_loop(d->base, EVLOOP_ONCE);
		evtimer_del(wake_ev);
	} else
		event_base_loop(d->base, EVLOOP_NONBLOCK);
}

/* Will the daemon read more of what the client sent? */
static bool
fuzz_unread(const struct client *c)
{
	struct peer_probe	pp;

	if (peers_probe(d->peers, c->peer_id, &pp) == -1 || !pp.reading)
		return (false);
	return (pp.unread > 0);
}

/* Run the loop until nothing moves: no job, no unread request, no reply. */
static void
fuzz_settle(struct client *c)
{
	uint64_t	deadline = clock_now_ms() + FUZZ_IDLE_MS;
	unsigned	quiet = 0;
	bool		idle;
	size_t		got;

	while (quiet < 2) {
		FUZZ_ASSERT(clock_now_ms() < deadline, "the daemon was not "
		    "idle after %d ms", FUZZ_IDLE_MS);
		/* An Attach may wait for a helper thread. */
		idle = pool_idle(d->pool) && peers_attaching(d->peers) == 0;
		fuzz_pass(!idle);
		got = client_read(c);
		if (idle && got == 0 && !fuzz_unread(c))
			quiet++;
		else
			quiet = 0;
	}
}

/*
 * Count the requests in what was sent, cutting it into frames as the
 * daemon will; a bad frame is the last one it answers.  A Release marks
 * its slot, which may then come back in a Step before the Released.
 */
static void
client_sent(struct client *c, const uint8_t *buf, size_t len)
{
	Infeed__Frame	*f;
	char		*cause = NULL;

	if (c->sent_bad)
		return;
	FUZZ_ASSERT(wire_in_feed(&c->sent, buf, len) == 0, "wire_in_feed");
	for (;;) {
		switch (wire_in_frame(&c->sent, &f, &cause)) {
		case WIRE_AGAIN:
			return;
		case WIRE_BAD:
			if (verbose)
				fprintf(stderr, "fuzz: -> bad frame: %s\n",
				    cause);
			free(cause);
			c->requests++;
			c->sent_bad = true;
			return;
		case WIRE_OK:
			break;
		}
		if (verbose)
			fprintf(stderr, "fuzz: -> %s\n",
			    wire_case_name(f->msg_case));
		c->requests++;
		if (f->msg_case == INFEED__FRAME__MSG_RELEASE &&
		    f->release->slot < FUZZ_MAX_SLOTS)
			c->releases[f->release->slot]++;
		infeed__frame__free_unpacked(f, NULL);
	}
}

/* Send @len bytes (with c->sendfd, if set, on the first); false if cut. */
static bool
client_send(struct client *c, const uint8_t *buf, size_t len)
{
	size_t	off = 0;
	ssize_t	n;
	int	stuck = 0;

	while (off < len) {
		n = wire_send_some(c->fd, buf + off, len - off, c->sendfd);
		if (n > 0) {
			/*
			 * A descriptor belongs to a frame: an Attach answers
			 * for it, any other frame is refused and closes the
			 * connection.  Until its frame is whole, the daemon
			 * holds it.
			 */
			client_sent(c, buf + off, (size_t)n);
			off += (size_t)n;
			c->sendfd = -1;
			stuck = 0;
			continue;
		}
		if (n == -1 && errno != EAGAIN && errno != EINTR)
			return (false);	/* the daemon hung up */
		/* Full: let the daemon read, unless it stopped reading us. */
		fuzz_settle(c);
		if (++stuck > 2)
			return (false);
	}
	return (true);
}

/* Pack and send one request. */
static bool
client_request(struct client *c, const Infeed__Frame *f)
{
	uint8_t	*buf;
	size_t	 len;
	bool	 ok;

	buf = wire_pack(f, INFEED_DEFAULT_MAX_FRAME, &len);
	FUZZ_ASSERT(buf != NULL, "wire_pack");
	ok = client_send(c, buf, len);
	free(buf);
	return (ok);
}

/* The next script byte, or 0 past the end. */
static uint8_t
script_u8(struct script *s)
{
	if (s->left == 0)
		return (0);
	s->left--;
	return (*s->p++);
}

/* A 32-bit number: small ones from one byte, else from the extremes. */
static uint32_t
script_u32(struct script *s)
{
	uint8_t		b = script_u8(s);
	uint32_t	v = 0;
	int		i;

	if (b < 0xf0)
		return (b);
	if (b == 0xf0)
		return (UINT32_MAX - script_u8(s));
	for (i = 0; i < 4; i++)
		v |= (uint32_t)script_u8(s) << (8 * i);
	return (v);
}

/* A 64-bit number, the same way. */
static uint64_t
script_u64(struct script *s)
{
	uint8_t		b = script_u8(s);
	uint64_t	v = 0;
	int		i;

	if (b < 0xf0)
		return (b);
	if (b == 0xf0)
		return (UINT64_MAX - script_u8(s));
	for (i = 0; i < 8; i++)
		v |= (uint64_t)script_u8(s) << (8 * i);
	return (v);
}

/* A float from a table of ordinary and awkward values. */
static float
script_float(struct script *s)
{
	return (fuzz_floats[script_u8(s) % (sizeof(fuzz_floats) /
	    sizeof(fuzz_floats[0]))]);
}

/* Attach with options chosen field by field by a 24-bit mask. */
static bool
script_attach(struct client *c, struct script *s)
{
	Infeed__Frame		f = INFEED__FRAME__INIT;
	Infeed__Attach		a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	o = INFEED__LOADER_OPTIONS__INIT;
	Infeed__Transform	t = INFEED__TRANSFORM__INIT;
	float			mean[INFEED_MAX_CHANNELS + 2];
	float			std[INFEED_MAX_CHANNELS + 2];
	uint32_t		mask;
	size_t			i;

	a.dataset = (char *)fuzz_names[script_u8(s) % (sizeof(fuzz_names) /
	    sizeof(fuzz_names[0]))];
	mask = script_u8(s);
	mask |= (uint32_t)script_u8(s) << 8;
	mask |= (uint32_t)script_u8(s) << 16;
	if (mask != 0)
		a.options = &o;
#define OPT(bit, field, value) do {					\
	if (mask & (1U << (bit))) {					\
		o.has_##field = 1;					\
		o.field = (value);					\
	}								\
} while (0)
	OPT(0, batch_size, script_u32(s));
	OPT(1, device_iterations, script_u32(s));
	OPT(2, replication_factor, script_u32(s));
	OPT(3, gradient_accumulation, script_u32(s));
	OPT(4, shuffle, script_u8(s) & 1);
	OPT(5, seed, script_u64(s));
	OPT(6, drop_last, script_u8(s) & 1);
	OPT(7, num_workers, script_u32(s));
	OPT(8, persistent_workers, script_u8(s) & 1);
	OPT(9, buffer_size, script_u32(s));
	OPT(10, load_indefinitely, script_u8(s) & 1);
	OPT(11, early_preload, script_u8(s) & 1);
	OPT(12, distributed_process_id, script_u32(s));
	OPT(13, distributed_process_count, script_u32(s));
	OPT(14, start_epoch, script_u64(s));
	OPT(15, start_step, script_u64(s));
	/* INT32, INT64, and the ones refused (0, FLOAT32, no DType at all). */
	OPT(19, label_dtype, (Infeed__DType)(script_u8(s) % 8));
#undef OPT
	if (mask & (1U << 16)) {
		o.transform = &t;
		t.has_to_float32 = 1;
		t.to_float32 = script_u8(s) & 1;
		if (mask & (1U << 17)) {
			t.has_scale = 1;
			t.scale = script_float(s);
		}
		t.n_mean = script_u8(s) % (INFEED_MAX_CHANNELS + 2);
		t.n_std = mask & (1U << 18) ? t.n_mean :
		    script_u8(s) % (INFEED_MAX_CHANNELS + 2);
		for (i = 0; i < t.n_mean; i++)
			mean[i] = script_float(s);
		for (i = 0; i < t.n_std; i++)
			std[i] = script_float(s);
		t.mean = mean;
		t.std = std;
	}
	f.msg_case = INFEED__FRAME__MSG_ATTACH;
	f.attach = &a;
	return (client_request(c, &f));
}

/*
 * One script op: the low three bits pick the request, bit 3 sends the next
 * one without waiting for the daemon to be idle.
 *   0 Hello (a wrong version or a long name now and then)
 *   1 ListDatasets  2 Attach  3 Next  4 Release (the oldest held slot, or
 *   any)  5 GetStats  6 Detach  7 raw bytes (the count becomes a guess)
 */
static bool
script_op(struct client *c, struct script *s)
{
	Infeed__Frame		f = INFEED__FRAME__INIT;
	Infeed__Hello		h = INFEED__HELLO__INIT;
	Infeed__ListDatasets	ld = INFEED__LIST_DATASETS__INIT;
	Infeed__Next		nx = INFEED__NEXT__INIT;
	Infeed__Release		rl = INFEED__RELEASE__INIT;
	Infeed__GetStats	gs = INFEED__GET_STATS__INIT;
	Infeed__Detach		dt = INFEED__DETACH__INIT;
	char			name[200];
	uint8_t			op = script_u8(s), b, raw[256];
	uint32_t		i;
	bool			ok;

	switch (op & 7) {
	case 0:
		b = script_u8(s);
		h.protocol_version = b == 0xff ? script_u32(s) :
		    WIRE_PROTOCOL_VERSION;
		if (b & 1) {
			memset(name, 'n', sizeof(name));
			name[(b >> 1) % sizeof(name)] = '\0';
			h.client_name = name;
		}
		f.msg_case = INFEED__FRAME__MSG_HELLO;
		f.hello = &h;
		ok = client_request(c, &f);
		break;
	case 1:
		f.msg_case = INFEED__FRAME__MSG_LIST_DATASETS;
		f.list_datasets = &ld;
		ok = client_request(c, &f);
		break;
	case 2:
		ok = script_attach(c, s);
		break;
	case 3:
		f.msg_case = INFEED__FRAME__MSG_NEXT;
		f.next = &nx;
		ok = client_request(c, &f);
		break;
	case 4:
		b = script_u8(s);
		rl.slot = b & 0x80 ? (uint32_t)(b & 0x7f) : 0;
		for (i = 0; !(b & 0x80) && i < FUZZ_MAX_SLOTS; i++) {
			if (c->steps[i] > c->releases[i]) {
				rl.slot = i;
				break;
			}
		}
		f.msg_case = INFEED__FRAME__MSG_RELEASE;
		f.release = &rl;
		ok = client_request(c, &f);
		break;
	case 5:
		f.msg_case = INFEED__FRAME__MSG_GET_STATS;
		f.get_stats = &gs;
		ok = client_request(c, &f);
		break;
	case 6:
		f.msg_case = INFEED__FRAME__MSG_DETACH;
		f.detach = &dt;
		ok = client_request(c, &f);
		break;
	default:
		b = script_u8(s);
		for (i = 0; i < b; i++)
			raw[i] = script_u8(s);
		ok = client_send(c, raw, b);
		break;
	}
	if (ok && !(op & 8))
		fuzz_settle(c);
	return (ok);
}

/*
 * With the daemon idle: it keeps no descriptor the client sent, and every
 * request has its answer, unless a Next waits while we hold every slot.
 */
static void
client_check_answered(struct client *c)
{
	struct peer_probe	pp;
	uint32_t		i, held = 0;

	FUZZ_ASSERT(peers_probe(d->peers, c->peer_id, &pp) == -1 ||
	    pp.fds_kept == 0 || (c->sent.len > 0 && !c->sent_bad), "the "
	    "daemon keeps %zu descriptors that the client sent, with no "
	    "frame of theirs still to come", pp.fds_kept);
	if (!c->reading || c->eof)
		return;
	/* Idle, every Release is answered: held is what the daemon thinks. */
	for (i = 0; i < c->slots && c->ring != NULL; i++)
		held += c->steps[i] > c->released[i];
	FUZZ_ASSERT(c->replies == c->requests || (c->ring != NULL &&
	    held == c->slots), "%u of %u requests answered with the daemon "
	    "idle (%u of %u slots held)", c->replies, c->requests, held,
	    c->slots);
}

/* Hang up and wait for the daemon to reclaim everything of the peer. */
static void
client_close(struct client *c)
{
	uint64_t	deadline = clock_now_ms() + FUZZ_IDLE_MS;

	close(c->fd);
	while (fuzz_peer(c) || !pool_idle(d->pool) ||
	    peers_attaching(d->peers) > 0) {
		FUZZ_ASSERT(clock_now_ms() < deadline, "the daemon kept the "
		    "peer or its jobs for %d ms after the client left",
		    FUZZ_IDLE_MS);
		fuzz_pass(!pool_idle(d->pool) || peers_attaching(d->peers) > 0);
	}
	/* Once more, for anything the peer's end left queued. */
	fuzz_pass(false);
	client_unmap(c);
	/* The client's process ends: memory its session held goes back. */
	kill(c->proc, SIGKILL);
	waitpid(c->proc, NULL, 0);	/* unless the pool reaped it */
	deadline = clock_now_ms() + FUZZ_IDLE_MS;
	while (d->budget.held_bytes > 0) {
		FUZZ_ASSERT(clock_now_ms() < deadline, "the ring memory of an "
		    "ended session outlived its client's process by %d ms",
		    FUZZ_IDLE_MS);
		fuzz_pass(true);
	}
	wire_in_clear(&c->in);
	wire_in_clear(&c->sent);
}

/* Is the daemon back where it started? */
static void
fuzz_check_daemon(int fds)
{
	uint64_t	deadline;
	int		n;

	FUZZ_ASSERT(peers_count(d->peers) == 0, "%u peers left",
	    peers_count(d->peers));
	ring_budget_settle(&d->budget);		/* given-up memory punched */
	FUZZ_ASSERT(d->budget.used == 0, "%llu bytes of rings still counted",
	    (unsigned long long)d->budget.used);
	FUZZ_ASSERT(pool_idle(d->pool), "jobs left in the pool");
	FUZZ_ASSERT(fuzz_worker_restarts() == restarts, "a worker died");
	FUZZ_ASSERT((n = fuzz_count_fds()) == fds, "%d descriptors open, "
	    "%d before the input", n, fds);
	if (++inputs % FUZZ_MAPS_EVERY != 0)
		return;
	deadline = clock_now_ms() + 1000;
	while ((n = fuzz_worker_rings()) != 0 && clock_now_ms() < deadline)
		usleep(1000);
	FUZZ_ASSERT(n == 0, "%d rings still mapped in the worker", n);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct client	 c;
	struct script	 s;
	const uint8_t	*p;
	size_t		 off, chunk, left;
	uint32_t	 flen;
	uint8_t		 mode;
	int		 sv[2], fds;

	if (owner == -1)
		fuzz_init();
	if (size == 0)
		return (0);
	mode = data[0];
	data++;
	size--;
	fds = fuzz_count_fds();

	memset(&c, 0, sizeof(c));
	c.proc = fuzz_client_socketpair(sv);
	c.fd = sv[1];
	c.reading = !(mode & 0x40);
	wire_in_init(&c.in, d->conf->max_frame_size);
	wire_in_init(&c.sent, d->conf->max_frame_size);
	c.peer_id = peers_accept(d->peers, sv[0]);
	c.sendfd = mode & 0x80 ? devnull : -1;

	switch (mode & 3) {
	case 0:
		/* A stream, cut where the data says. */
		for (off = 0; off < size; off += chunk) {
			chunk = 1 + data[off] % 128;
			if (chunk > size - off)
				chunk = size - off;
			if (!client_send(&c, data + off, chunk))
				break;
			fuzz_pass(false);
			client_read(&c);
		}
		break;
	case 1:
		/* Frame by frame, as their length prefixes cut them. */
		for (off = 0; off < size; off += chunk) {
			p = data + off;
			left = size - off;
			chunk = left;
			if (left >= WIRE_HEADER_SIZE) {
				flen = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
				    (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
				if (flen <= left - WIRE_HEADER_SIZE)
					chunk = WIRE_HEADER_SIZE + flen;
			}
			if (!client_send(&c, p, chunk))
				break;
			fuzz_settle(&c);
		}
		break;
	default:
		s.p = data;
		s.left = size;
		while (s.left > 0 && script_op(&c, &s))
			;
		break;
	}
	if (!(mode & 0x20)) {
		fuzz_settle(&c);
		client_check_answered(&c);
	}
	client_close(&c);
	fuzz_check_daemon(fds);
	return (0);
}
