/* SPDX-License-Identifier: MIT */
/*
 * A FUSE file whose reads wait until released: see fuse-file.h.  The
 * server speaks the kernel's protocol (linux/fuse.h) itself, with no
 * libfuse: INIT, GETATTR, OPEN, READ, FLUSH and RELEASE.
 */

#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <linux/fuse.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "fuse-file.h"
#include "runner.h"

/* Answer FUSE request @unique with error @err and @len bytes of @body. */
static void
fuse_reply(int dev, uint64_t unique, int err, const void *body, size_t len)
{
	struct fuse_out_header	h;
	struct iovec		iov[2];

	h.len = (uint32_t)(sizeof(h) + len);
	h.error = -err;
	h.unique = unique;
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	iov[1].iov_base = (void *)(uintptr_t)body;
	iov[1].iov_len = len;
	(void)!writev(dev, iov, len > 0 ? 2 : 1);
}

/* Answer a READ of @size bytes at @off of @data (@dlen bytes). */
static void
fuse_read_reply(int dev, uint64_t unique, const uint8_t *data, size_t dlen,
    uint64_t off, uint32_t size)
{
	size_t	n = off >= dlen ? 0 : dlen - off < size ? dlen - off : size;

	fuse_reply(dev, unique, 0, data + (off < dlen ? off : 0), n);
}

/* The FUSE server's loop, in its own process. */
static void
fuse_serve(int dev, int ctl, const uint8_t *data, size_t dlen)
{
	static uint8_t			 buf[FUSE_MIN_READ_BUFFER + 131072];
	struct {
		uint64_t	unique, off;
		uint32_t	size;
	}				 held[512];
	struct pollfd			 pfd[2] = { { dev, POLLIN, 0 },
					    { ctl, POLLIN, 0 } };
	struct fuse_in_header		*in = (void *)buf;
	struct fuse_init_in		*ii;
	struct fuse_init_out		 io;
	struct fuse_attr_out		 ao;
	struct fuse_open_out		 oo;
	struct fuse_read_in		*ri;
	size_t				 nheld = 0, i;
	ssize_t				 n;
	bool				 hold = true;
	char				 c;

	for (;;) {
		if (poll(pfd, 2, -1) == -1)
			continue;
		if (pfd[1].revents != 0) {
			if (read(ctl, &c, 1) != 1)
				_exit(0);	/* the test is gone */
			hold = false;
			for (i = 0; i < nheld; i++)
				fuse_read_reply(dev, held[i].unique, data,
				    dlen, held[i].off, held[i].size);
			nheld = 0;
		}
		if (pfd[0].revents == 0)
			continue;
		if ((n = read(dev, buf, sizeof(buf))) == -1) {
			if (errno == ENODEV)
				_exit(0);	/* unmounted */
			continue;
		}
		if ((size_t)n < sizeof(*in))
			continue;
		switch (in->opcode) {
		case FUSE_INIT:
			ii = (void *)(in + 1);
			memset(&io, 0, sizeof(io));
			io.major = FUSE_KERNEL_VERSION;
			io.minor = ii->minor < FUSE_KERNEL_MINOR_VERSION ?
			    ii->minor : FUSE_KERNEL_MINOR_VERSION;
			io.max_readahead = ii->max_readahead;
			io.max_write = 65536;
			fuse_reply(dev, in->unique, 0, &io, sizeof(io));
			break;
		case FUSE_GETATTR:
			memset(&ao, 0, sizeof(ao));
			ao.attr.ino = 1;
			ao.attr.size = dlen;
			ao.attr.blocks = (dlen + 511) / 512;
			ao.attr.mode = S_IFREG | 0444;
			ao.attr.nlink = 1;
			ao.attr.blksize = 4096;
			fuse_reply(dev, in->unique, 0, &ao, sizeof(ao));
			break;
		case FUSE_OPEN:
			memset(&oo, 0, sizeof(oo));
			oo.fh = 1;
			oo.open_flags = FOPEN_DIRECT_IO;
			fuse_reply(dev, in->unique, 0, &oo, sizeof(oo));
			break;
		case FUSE_READ:
			ri = (void *)(in + 1);
			if (!hold)
				fuse_read_reply(dev, in->unique, data, dlen,
				    ri->offset, ri->size);
			else if (nheld < sizeof(held) / sizeof(held[0])) {
				held[nheld].unique = in->unique;
				held[nheld].off = ri->offset;
				held[nheld++].size = ri->size;
			}
			break;
		case FUSE_FLUSH:
		case FUSE_RELEASE:
			fuse_reply(dev, in->unique, 0, NULL, 0);
			break;
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
		case FUSE_INTERRUPT:
			break;
		default:
			fuse_reply(dev, in->unique, ENOSYS, NULL, 0);
			break;
		}
	}
}

/*
 * Mount a FUSE file serving @data at @dir/fuse-file; false (the test
 * passes) without root.
 */
bool
fuse_start(struct fusefs *fs, const char *dir, const uint8_t *data,
    size_t dlen)
{
	char	opts[256];
	int	dev, ctl[2];

	if (geteuid() != 0 || unshare(CLONE_NEWNS) == -1 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == -1 ||
	    (dev = open("/dev/fuse", O_RDWR | O_CLOEXEC)) == -1) {
		fprintf(stderr, "skipped: a FUSE mount needs root and "
		    "/dev/fuse (%s)\n", strerror(errno));
		return (false);
	}
	snprintf(fs->path, sizeof(fs->path), "%s/fuse-file", dir);
	write_file(fs->path, "", 0);
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=100444,user_id=0,"
	    "group_id=0,allow_other", dev);
	if (mount("infeed-test", fs->path, "fuse", MS_NOSUID | MS_NODEV,
	    opts) == -1) {
		fprintf(stderr, "skipped: cannot mount FUSE: %s\n",
		    strerror(errno));
		close(dev);
		return (false);
	}
	ck_assert_int_eq(pipe(ctl), 0);
	fs->pid = fork();
	ck_assert_int_ne(fs->pid, -1);
	if (fs->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(ctl[1]);
		fuse_serve(dev, ctl[0], data, dlen);
		_exit(0);
	}
	close(dev);
	close(ctl[0]);
	fs->ctl = ctl[1];
	return (true);
}

/* Answer the held reads, and every read from now on. */
void
fuse_release(struct fusefs *fs)
{
	ck_assert_int_eq(write(fs->ctl, "r", 1), 1);
}

/* Stop the server (reads still held fail) and unmount. */
void
fuse_stop(struct fusefs *fs)
{
	kill(fs->pid, SIGKILL);
	waitpid(fs->pid, NULL, 0);
	close(fs->ctl);
	umount2(fs->path, MNT_DETACH);
	unlink(fs->path);
}
