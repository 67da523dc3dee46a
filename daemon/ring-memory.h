/* SPDX-License-Identifier: MIT */
/*
 * Ring memory: the sealed memfds that step rings live on, the one budget
 * (memory_budget in the configuration) they are all charged to (with the
 * rings' index tables and, ring_budget_charge(), the sessions' shuffle
 * tables), and what becomes of a ring's memory when its session ends.  It knows nothing of
 * slots or layouts (ring.h) and calls nobody back: who maps its memory
 * asks it (ring_budget_keeps()) whether that memory is still worth
 * mapping.
 *
 * Memory is charged when it is made and given back only once no process
 * can hold its pages any more.  Memory given up is punched out of its
 * memfd (FALLOC_FL_PUNCH_HOLE, by the scrubber thread, off the event
 * loop) before the budget forgets it (a ring that needs that room waits
 * for it), so a mapping that a client keeps of it holds no page of
 * infeedd's: it reads zeroes (the kernel fills what it reads with new
 * pages, charged to that client's memory cgroup).
 *
 * Held: memory whose client still holds steps when its session ends.
 * libinfeed keeps reading held steps after a session ends (a kept
 * tensor), so its pages stay as they are, charged to the budget and
 * attributed to that client's user and process, until the process exits
 * (a pidfd on the event loop; ring_budget_reap() checks them too).  A
 * ring that several processes read (a shared group's) is held for each
 * of those that ended holding steps of it (ring_mem_hold_for()), one
 * after the other: it stays charged until the last of them exits.
 *
 * Kept (warm start): when a session ends and no worker can write its
 * ring any more, ring_mem_release() keeps the memory (sealed memfd, its
 * pages, and the workers' mappings of them, which the pool leaves while
 * ring_budget_keeps() says so) for the next ring of the same user that
 * fits it.  Since the last client may still have it mapped, it only ever
 * goes to a client of the same user and group (SO_PEERCRED's: a setgid
 * program may read datasets its user may not).  Every byte in it was
 * written from one dataset (its content: that dataset's serial) or is
 * zero; the scrubber thread zeroes it in the background once it has been
 * idle RING_SCRUB_AFTER_MS, and a ring of
 * another content takes it only once that is done (new memory until
 * then: the main thread never zeroes more than a scrubber's chunk), so a
 * client never sees bytes of a dataset other than its own.  The next
 * ring of the same user and the same dataset (a trainer started again)
 * takes it at once, stopping the scrubber where it is: those bytes were
 * that user's to read anyway.  Kept memory is freed when a ring that
 * needs the budget would not fit otherwise, after keep_ms unused
 * (ring_budget_trim()), and at exit.
 */
#ifndef INFEED_RING_MEMORY_H
#define INFEED_RING_MEMORY_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ring_mem_state {
	RING_MEM_IN_USE,	/* a ring's */
	RING_MEM_DIRTY,		/* kept, waiting for the scrubber */
	RING_MEM_SCRUBBING,	/* kept, being zeroed */
	RING_MEM_CLAIMED,	/* being zeroed, wanted by a ring: stop */
	RING_MEM_CLEAN,		/* kept, all zeroes */
	RING_MEM_HELD,		/* an ended session's, its client holds steps */
	RING_MEM_FREEING,	/* given up, its pages being punched out */
	RING_MEM_FREED,		/* given up, punched: to uncharge */
};

/* Who memory is for, and what it will hold. */
struct ring_owner {
	uid_t		 uid;		/* the client's, from SO_PEERCRED */
	gid_t		 gid;
	uint64_t	 content;	/* the dataset's serial; 0: unshared */
	pid_t		 pid;		/* the client's process; 0: unknown */
};

/* The memory of a ring: a sealed memfd and the main process's mapping. */
struct ring_mem {
	TAILQ_ENTRY(ring_mem)	 entry;
	uint64_t		 id;	/* unique in the daemon, for workers */
	int			 memfd;
	uint8_t			*map;
	uint64_t		 bytes;
	struct ring_owner	 owner;	/* of the client it was handed to */
	enum ring_mem_state	 state;	/* under the budget's lock when kept */
	uint64_t		 idle_since_ms;
	int			 pidfd;	/* held: the client's process, or -1 */
	struct event		*ev;	/* held: its exit, or NULL */
	pid_t			*heirs;	/* held: who holds it after owner.pid */
	size_t			 nheirs;
	int			 punch_errno;	/* the scrubber's, or 0 */
	struct ring_budget	*budget;
};
TAILQ_HEAD(ring_mem_list, ring_mem);

struct event_base;
struct ring_scrubber;

/* The memory that all rings together may take, and what is kept. */
/*
 * Kept memory is zeroed only once it has been idle this long: a trainer
 * started again (a sweep's next run) takes its last ring's memory as it
 * is, with no zeroing at all, and no trainer's CPUs zero a GiB it does
 * not need the moment another trainer ends.
 */
#define RING_SCRUB_AFTER_MS	10000

struct ring_budget {
	uint64_t		 limit;		/* bytes */
	uint64_t		 used;		/* rings, tables, kept, held */
	const char		*source;	/* the file that sets it */
	uint64_t		 keep_ms;	/* 0: nothing is kept */
	uint64_t		 scrub_after_ms; /* kept memory is zeroed
						   once idle this long
						   (RING_SCRUB_AFTER_MS) */
	struct ring_mem_list	 kept;		/* oldest first */
	uint64_t		 kept_bytes;
	struct ring_mem_list	 held;		/* RING_MEM_HELD, oldest first */
	uint64_t		 held_bytes;
	struct ring_mem_list	 freeing;	/* given up, not uncharged yet */
	uint64_t		 freeing_bytes;
	uint64_t		 next_mem_id;
	uint64_t		 reused;	/* rings made on kept memory */
	uint64_t		 made;		/* rings made on new memory */
	struct ring_scrubber	*scrubber;	/* started on first use */
	struct event_base	*base;		/* watches held memory; or NULL */
	int			 done_fd;	/* the scrubber's punches, or -1 */
	struct event		*done_ev;
	/*
	 * Memory charged here that is kept only while no ring needs it (a
	 * group's store of past steps, group-store.h): given back, for
	 * @need bytes free, before a ring is refused.  NULL: none.
	 */
	void			(*give_back)(struct ring_budget *, uint64_t);
};

/**
 * ring_mem_take() - @bytes of memory for @owner, a client of a user and
 * group that will hold bytes of a dataset (its serial; 0 for data that
 * no other ring may share), and @extra bytes more charged with it (a
 * ring's index tables): kept memory of the same user and group that fits,
 * as it is when it held the same dataset, else once zeroed; else a new
 * sealed memfd, freeing kept memory, oldest first, when the budget needs
 * it.
 * Return: the memory, or NULL with *@cause (malloc'd): when *@over, the
 * budget is short and *@cause says so as a clause ("only 1 MiB of the
 * daemon's memory budget (...) is free; ...held by your process 42..."),
 * for the caller to put after what it needed; else which system call
 * failed, a whole message.
 */
struct ring_mem	*ring_mem_take(struct ring_budget *b, uint64_t bytes,
		    uint64_t extra, const struct ring_owner *owner, bool *over,
		    char **cause);

/**
 * ring_budget_charge() - charge @bytes that are no ring's memory (a
 * session's shuffle table) for @owner, making room as ring_mem_take()
 * does.
 * Return: 0, or -1 with *@cause (malloc'd) the clause ring_mem_take()
 * gives when the budget is short.
 */
int		 ring_budget_charge(struct ring_budget *b, uint64_t bytes,
		    const struct ring_owner *owner, char **cause);

/**
 * ring_budget_uncharge() - give back @bytes of ring_budget_charge()'s.
 */
void		 ring_budget_uncharge(struct ring_budget *b, uint64_t bytes);

/**
 * ring_mem_release() - no worker writes @m any more and its @extra bytes
 * (ring_mem_take()'s) are uncharged: held, still charged, when @held (its
 * client holds steps in it) until the client's process (@owner.pid)
 * exits; else kept for the next ring of the same user when @keep and the
 * budget keeps memory; else given up: punched, then unmapped, closed and
 * uncharged (see ring_budget_collect()).  Held memory whose holder exits
 * passes to the next process of ring_mem_hold_for()'s, if any is left.
 */
void		 ring_mem_release(struct ring_mem *m, uint64_t extra,
		    bool held, bool keep);

/**
 * ring_mem_hold_for() - the @n (at least 1) processes that may still
 * hold pages of @m when it is released held, in place of its owner's (a
 * shared group's ring: the members that ended holding steps of it): it
 * stays held, attributed to each in turn, until all of them have exited.
 */
void		 ring_mem_hold_for(struct ring_mem *m, const pid_t *pids,
		    size_t n);

/**
 * ring_mem_destroy() - free @m and uncharge it and its @extra bytes now,
 * without punching it (at exit, and in tests): pages that a client still
 * maps are left to it, as the daemon goes.
 */
void		 ring_mem_destroy(struct ring_mem *m, uint64_t extra);

/**
 * ring_mem_readonly_fd() - a new read-only descriptor of @m's memfd, for
 * the client, or -1 with errno set.
 */
int		 ring_mem_readonly_fd(const struct ring_mem *m);

/**
 * ring_budget_keeps() - whether memory @mem_id is kept for a next ring
 * (so a worker's mapping of it is worth keeping); false for memory in
 * use, held, given up or gone.
 */
bool		 ring_budget_keeps(struct ring_budget *b, uint64_t mem_id);

/**
 * ring_budget_trim() - free kept memory unused for keep_ms at @now_ms
 * (CLOCK_MONOTONIC), or all of it when keep_ms is 0.
 */
void		 ring_budget_trim(struct ring_budget *b, uint64_t now_ms);

/**
 * ring_budget_reap() - give up (see ring_budget_collect()) the held
 * memory of processes that exited.
 */
void		 ring_budget_reap(struct ring_budget *b);

/**
 * ring_budget_collect() - uncharge the memory given up whose pages the
 * scrubber has punched out (ring_mem_take() and ring_budget_trim() call
 * it).
 */
void		 ring_budget_collect(struct ring_budget *b);

/**
 * ring_budget_settle() - wait until all memory given up is punched out,
 * and uncharge it.
 */
void		 ring_budget_settle(struct ring_budget *b);

/**
 * ring_budget_watch() - watch the processes that hold memory on @base:
 * their exits free it at once; and uncharge memory given up as soon as
 * the scrubber has punched it out.  Without it, held memory is freed when
 * ring_budget_reap() (ring_mem_take() and ring_budget_trim() call it)
 * finds its process gone, and memory given up is uncharged by
 * ring_budget_collect().  Call it before any memory is taken.
 */
void		 ring_budget_watch(struct ring_budget *b,
		    struct event_base *base);

/**
 * ring_budget_held_by() - the bytes of held memory attributed to @uid,
 * and the first such process in *@pid (may be NULL); every user's with
 * @uid (uid_t)-1.
 */
uint64_t	 ring_budget_held_by(const struct ring_budget *b, uid_t uid,
		    pid_t *pid);

/**
 * ring_budget_clear() - free all kept and held memory (held memory left
 * to its clients, as the daemon goes) and stop the scrubber.
 */
void		 ring_budget_clear(struct ring_budget *b);

/**
 * ring_budget_init() - an empty budget of @limit bytes set in @source
 * that keeps ended sessions' memory @keep_ms.
 */
void		 ring_budget_init(struct ring_budget *b, uint64_t limit,
		    const char *source, uint64_t keep_ms);

/**
 * ring_mem_advise() - a mapping of ring memory (the main process's or a
 * worker's): ask for transparent huge pages, which the kernel gives where
 * the operator allows them (/sys/kernel/mm/transparent_hugepage/
 * shmem_enabled = advise), so a 2 MiB page costs one fault, not 512.
 */
void		 ring_mem_advise(void *map, uint64_t bytes);

/**
 * ring_mem_huge_pages() - the kernel's mode for huge pages of shared
 * memory, as shmem_enabled names it ("advise", "never", ...), or
 * "unknown".
 */
const char	*ring_mem_huge_pages(void);

/**
 * ring_mem_format_bytes() - "300 bytes", "512 KiB", "1.5 MiB" into @buf.
 */
const char	*ring_mem_format_bytes(uint64_t v, char *buf, size_t len);

#endif /* INFEED_RING_MEMORY_H */
