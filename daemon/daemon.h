/* SPDX-License-Identifier: MIT */
/*
 * infeedd's private declarations, grouped by the file that defines them.
 */
#ifndef INFEED_DAEMON_H
#define INFEED_DAEMON_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "sampler.h"
#include "wire.h"

#define INFEEDD_DEFAULT_CONFIG	"/etc/infeed/infeedd.conf"
#define INFEEDD_DEFAULT_SOCKET	"/run/infeed/infeedd.sock"

struct event_base;
struct event;

#define PRINTFLIKE(a, b) __attribute__((format(printf, a, b)))

/* log.c */
void	log_init(const char *ident, int verbose);
void	log_warn(const char *, ...) PRINTFLIKE(1, 2);
void	log_warnx(const char *, ...) PRINTFLIKE(1, 2);
void	log_info(const char *, ...) PRINTFLIKE(1, 2);
void	log_debug(const char *, ...) PRINTFLIKE(1, 2);
void	fatal(const char *, ...) PRINTFLIKE(1, 2) __attribute__((noreturn));
void	fatalx(const char *, ...) PRINTFLIKE(1, 2) __attribute__((noreturn));

/* xmalloc.c */
void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xreallocarray(void *, size_t, size_t);
char	*xstrdup(const char *);
char	*xasprintf(const char *, ...) PRINTFLIKE(1, 2);

/* config.c */
struct config {
	char			*path;
	char			*socket_path;
	unsigned		 workers;	/* worker processes */
	unsigned		 max_clients;
	uint32_t		 max_frame_size;
	uint64_t		 memory_budget;	/* bytes, all step rings */
	struct dataset_conf	*datasets;
	size_t			 ndatasets;
};
struct config	*config_load(const char *path, char **cause);
void		 config_free(struct config *);
int		 config_parse_size(const char *s, uint64_t *out);

/* catalogue.c */
struct catalogue_entry {
	const struct dataset_conf *conf;	/* borrowed from the config */
	bool			 restricted;	/* allow_groups was given */
	gid_t			*groups;
	size_t			 ngroups;
};
struct catalogue {
	struct dataset		**datasets;	/* the ones that opened */
	struct catalogue_entry	 *entries;	/* index-aligned */
	size_t			  ndatasets;
};
struct catalogue *catalogue_open(const struct config *, struct catalogue *old);
void		  catalogue_free(struct catalogue *);
struct dataset	 *catalogue_find(const struct catalogue *, const char *name,
		      size_t *index);
bool		  catalogue_allows(const struct catalogue *, size_t index,
		      uid_t uid, gid_t gid);

/* The daemon: one per process, owned by main.c. */
struct peer;
struct session;
struct pool;
TAILQ_HEAD(peer_list, peer);

struct daemon {
	struct event_base	*base;
	struct config		*conf;
	struct catalogue	*cat;
	struct pool		*pool;
	int			 listen_fd;
	bool			 own_socket;	/* unlink it at exit */
	struct event		*listen_ev;
	struct event		*accept_retry_ev;
	struct peer_list	 peers;
	unsigned		 npeers;
	uint64_t		 next_peer_id;
	uint64_t		 next_session_id;
	uint64_t		 memory_used;	/* bytes of step rings */
	uint64_t		 started_ms;	/* CLOCK_MONOTONIC */
	uint64_t		 status_ms;	/* last STATUS= line */
	uint64_t		 status_rows;
};

/* listen.c */
int	listen_open(struct daemon *, const char *path);
void	listen_start(struct daemon *);
void	listen_close(struct daemon *);

/* peer.c */
struct outframe {
	TAILQ_ENTRY(outframe)	 entry;
	uint8_t			*buf;
	size_t			 len;
	size_t			 off;
	int			 fd;	/* sent with byte 0, closed after */
};
TAILQ_HEAD(outframe_list, outframe);

struct peer {
	TAILQ_ENTRY(peer)	 entry;
	struct daemon		*d;
	uint64_t		 id;
	int			 fd;
	struct event		*rev;
	struct event		*wev;
	struct wire_in		 in;
	struct outframe_list	 outq;
	size_t			 outq_bytes;
	bool			 greeted;
	pid_t			 pid;
	uid_t			 uid;
	gid_t			 gid;
	char			*name;
	struct session		*session;
	char			*detached_why;	/* a reload ended the session */
};
void	peer_accept(struct daemon *, int fd);
void	peer_free(struct peer *);
void	peer_send(struct peer *, const Infeed__Frame *, int fd);
void	peer_send_error(struct peer *, Infeed__ErrorCode, const char *, ...)
	    PRINTFLIKE(3, 4);
void	peer_fail(struct peer *, Infeed__ErrorCode, const char *, ...)
	    PRINTFLIKE(3, 4);
void	peer_free_all(struct daemon *);

/* session.c */
struct session	*session_attach(struct peer *, const Infeed__Attach *,
		    Infeed__ErrorCode *, char **cause);
void		 session_free(struct session *);
void		 session_next(struct session *);
int		 session_release(struct session *, uint32_t slot, char **cause);
void		 session_job_done(struct session *, uint32_t slot,
		    uint32_t rows, int error, uint64_t bad);
void		 session_fill_stats(struct session *, Infeed__SessionStats *);
int		 session_reload(struct session *, const struct catalogue *);
uint64_t	 session_rows_delivered(const struct session *);
unsigned	 session_pending_next(const struct session *);
const char	*session_dataset_name(const struct session *);
struct session	*session_find(struct daemon *, uint64_t id);

/* pool.c */
#define INFEED_MAX_CHANNELS	16

/* What a worker needs to fill a session's slots; sent once per session. */
struct ring_desc {
	uint64_t	session_id;
	uint32_t	dataset_index;		/* in the catalogue */
	uint32_t	slots;
	uint64_t	ring_bytes;
	uint64_t	slot_bytes;
	uint64_t	data_offset;
	uint64_t	labels_offset;
	uint64_t	indices_offset;
	uint64_t	in_sample_bytes;	/* the dataset's */
	uint64_t	out_sample_bytes;	/* in the slot */
	/* uint8 or float32 -> float32: x * scale, then (x - mean) / std. */
	uint32_t	to_float32;
	uint32_t	in_dtype;
	float		scale;
	uint32_t	nchannels;		/* 0: no normalisation */
	uint64_t	channel_elems;		/* elements per channel */
	float		mean[INFEED_MAX_CHANNELS];
	float		std[INFEED_MAX_CHANNELS];
};

struct pool	*pool_new(struct daemon *, unsigned workers);
void		 pool_free(struct pool *);
void		 pool_map_session(struct pool *, const struct ring_desc *,
		    int memfd, unsigned max_jobs);
void		 pool_unmap_session(struct pool *, uint64_t session_id);
void		 pool_submit(struct pool *, uint64_t session_id, uint32_t slot,
		    uint64_t row_begin, uint64_t row_end);
unsigned	 pool_size(const struct pool *);
bool		 pool_idle(const struct pool *);
void		 pool_reload(struct pool *);
void		 pool_drop_jobs(struct pool *, uint64_t session_id);
void		 pool_set_dataset(struct pool *, uint64_t session_id,
		    uint32_t dataset_index);
void		 pool_fill_stats(struct pool *, Infeed__Stats *);

/* daemon.c */
uint64_t	 daemon_now_ms(void);
void		 daemon_reload(struct daemon *);

#endif /* INFEED_DAEMON_H */
