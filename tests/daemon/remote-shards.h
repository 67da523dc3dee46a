/* SPDX-License-Identifier: MIT */
/*
 * nginx, tar shards of tiny PNGs and tar members for the remote tests,
 * and one epoch's check: see remote-shards.c.
 */
#ifndef INFEED_TEST_REMOTE_SHARDS_H
#define INFEED_TEST_REMOTE_SHARDS_H

#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define NGINX		"/usr/sbin/nginx"

/* A free port on loopback (bound and closed: a server takes it next), or -1. */
int	remote_free_port(void);

/* Wait for a listener on loopback @port (nginx's, as the failure says). */
void	remote_wait_port(int port);

/*
 * nginx run with @conf (written to nginx.conf in the test's folder) in the
 * foreground, once @port and @tls_port (unless 0) listen; its pid.
 */
pid_t	remote_nginx_run(const char *conf, int port, int tls_port);

/* Append a ustar member @name of @len bytes of @data to @fp. */
void	tar_member(FILE *fp, const char *name, const void *data, size_t len);

/* The grey level of sample @i's image. */
uint8_t	remote_grey_of(uint64_t i);

/*
 * Shards @prefix-NNNNNN.tar in folder @sub of the test's folder, @n of
 * @per samples each: sample i (over the set) a PNG of remote_grey_of(i),
 * label i % 10.  With @index, @sub/counts.txt has each shard's count.
 */
void	remote_make_shards(const char *sub, const char *prefix, int n,
	    int per, bool index);

/*
 * As remote_make_shards() with an index, each sample with a .txt member
 * of @pad bytes after its image, and counts.txt listing each sample's
 * image member ("+ OFFSET SIZE LABEL" after its shard's line).
 */
void	remote_make_member_shards(const char *sub, const char *prefix, int n,
	    int per, size_t pad);

/*
 * One shuffled epoch of dataset @name, @n samples: every index once, each
 * image its grey and its label the index's.
 */
void	remote_read_epoch(const char *name, uint64_t n, uint64_t seed);

/*
 * remote_belady_misses() - the fewest downloads for reading @seq (@n
 * blocks) through room for @cap (at most 64): Belady's policy.
 */
unsigned	remote_belady_misses(const uint64_t *seq, size_t n, size_t cap);

/* remote_nginx_stop() - stop nginx @pid (if > 0) and set it to -1. */
void		remote_nginx_stop(pid_t *pid);

#endif
