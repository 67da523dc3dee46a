/* SPDX-License-Identifier: MIT */
/*
 * Shared groups (LoaderOptions.share): one producer (producer.h) read by
 * several consumers (consumer.h), the sessions of the same user and
 * group whose options fix the same bytes for every step (dataset,
 * transform, seed, shuffle, batch sizes, drop_last, distributed share,
 * label dtype, slots).  The producer fills the group's ring, each step
 * once; every member takes each step from its own position (its epoch
 * and step), and a slot is refilled once every member is past it and
 * none holds it, and not while the process of a member that held it when
 * its session ended lives (a kept step never changes: the ring counts
 * each slot's holders).
 *
 * The time the group is blocked (every slot taken, a member waiting) is
 * charged to the members it waits on; one charged INFEED_GROUP_SLACK_MS
 * within five times as long leaves: it gets a producer of its own and
 * goes on from its position (Step.new_ring), or, with no room in the
 * budget for one, is ended (its Nexts get why); so do members that wait
 * while only the slots those that left or ended hold block the group.
 * One that left rejoins at a Next whose step the group has ready (it
 * caught up), holding at most one step of its own ring, and gives up its
 * own ring once it holds none of it.
 *
 * The group's ring has buffer_size slots for its members, and a window
 * of its past steps: more slots (group_window's bytes), charged with the
 * ring, that keep the newest steps every member is past.  The producer
 * fills buffer_size steps ahead of the member furthest ahead, as a lone
 * session's ring has them, and frees the window's oldest for the next.
 * A late member joins at a step the group still has (in the window too)
 * or fills next, and reads the window's steps rather than have them
 * decoded again: the members ahead wait for it only once the ring is
 * full.  One that attaches behind the group by an epoch at most joins
 * too, and catches up: its first Next gives it a producer of its own,
 * from its position to the oldest step the group has then (its meeting
 * point, the window's oldest step, which the group keeps for it from
 * then on; before its first Next it keeps nothing, and holds no one
 * back), and at the meeting point it takes the group's steps (it
 * rejoins).  Its own steps are the group's earlier steps (the order is
 * the sampler's, of seed and epoch), and while the group waits for it
 * (its ring full up to the meeting point) the workers fill the late
 * member's steps alone.  A late member that stops asking while the group
 * waits for it is charged the slack as any member is, and then goes on
 * alone: the group keeps nothing more for it.  Elsewhere (ahead of the
 * group, or further behind) it starts its own group.
 *
 * A group that keeps one (group_window: auto, for images) also has a
 * store of its past steps (group-store.h), daemon memory beyond the
 * ring's 64 slot numbers, shared by every group of the same key (the
 * user, data and every option that decides a step's bytes) and kept
 * group_linger after the last of them ends: its producer adds each step
 * it fills, and a late member's own producer, or a later group's, copies
 * the steps the store has into its slots rather than decode them.
 *
 * A group calls its producer, its members' consumers and the ring, never
 * a session: session.c makes the group's source and its members.
 */
#ifndef INFEED_GROUP_H
#define INFEED_GROUP_H

#include <sys/queue.h>
#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>

#include "consumer.h"
#include "producer.h"
#include "session-check.h"

/* Why a member left its group (session.h's session_leave). */
enum group_leave {
	GROUP_LEAVE_HELD_BACK,	/* it held the group back past the slack */
	GROUP_LEAVE_WAITED,	/* it waited on slots that leavers hold */
	GROUP_LEAVE_REASONS
};

#define GROUP_BLAME_BUCKETS	10

/* Time a group was blocked on someone, over the last window. */
struct group_blame {
	uint64_t	bucket;		/* the newest: ms / BUCKET_MS */
	uint32_t	ms[GROUP_BLAME_BUCKETS];
};

struct group;

/* A session's seat in a group, kept in the session. */
struct group_member {
	struct group		*g;	/* NULL: none (any more) */
	struct consumer		*c;
	/* Its own producer's, should it leave. */
	const struct producer_spec *spec;
	pid_t			 pid;	/* its client's; 0: not known */
	struct group_blame	 blame;	/* the group blocked on it */
	bool			 blamed;	/* ... since charged_ms */
	/*
	 * Attached behind the group: it catches up from its first Next on
	 * (late), on its own ring up to the meeting point (catching).
	 */
	bool			 late;
	bool			 catching;
	uint64_t		 meet_seq;	/* in the group's sequence */
	uint64_t		 meet_epoch;
	uint64_t		 meet_step;
	TAILQ_ENTRY(group_member) entry;
};

struct group_holder;

/* A shared group: its producer and its members. */
struct group {
	uint64_t		 id;
	struct session_host	 host;
	struct session_client	 client;	/* its first member's */
	struct session_options	 opts;		/* as that one asked */
	struct session_source	 src;		/* its own */
	uint64_t		 table_charged;	/* src's table's */
	struct producer_spec	 spec;
	struct producer		*p;
	uint32_t		 window;	/* its ring's slots of past steps */
	struct group_store	*store;		/* its past steps, or NULL */
	TAILQ_HEAD(, group_member) members;	/* and those that left */
	uint32_t		 nmembers;	/* not left */
	struct group_holder	**holders;	/* ended members' */
	size_t			 nholders;
	struct event		*ev_slack;
	uint64_t		 charged_ms;	/* blamed to; 0: free */
	uint64_t		 retry_ms;	/* one stayed: not before */
	struct group_blame	 orphan;	/* on others' slots */
	bool			 orphaned;	/* ... since charged_ms */
	uint64_t		 leaves[GROUP_LEAVE_REASONS];	/* the stats' */
	uint64_t		 stays;	/* fell behind but could not leave */
	uint64_t		 rejoins;
	TAILQ_ENTRY(group)	 entry;
};

/**
 * group_may_share() - whether a session of options @o on @src may share:
 * it asked, a catalogue dataset, no stages, a loop to time the slack.
 */
bool		 group_may_share(const struct session_host *host,
		    const struct session_options *o,
		    const struct session_source *src);

/**
 * group_find() - a group whose every step is a session's of @client, @src
 * and @o, and that still has, or fills next, step (@epoch, @step): its
 * position in the group's sequence in *@seq; else one that is ahead of
 * that step by an epoch at most (*@late: the session catches up to the
 * group's *@seq-th step).  Return: the group, or NULL.
 */
struct group	*group_find(const struct session_host *host,
		    const struct session_client *client,
		    const struct session_source *src,
		    const struct session_options *o, uint64_t epoch,
		    uint64_t step, uint64_t *seq, bool *late);

/**
 * group_new() - a group @id of @client's Attach options @o (copied), on
 * source @src, taken over (cleared, whatever is returned): its producer
 * loads from o's start, indefinitely if o says so, charged once.
 * Return: the group, or NULL with *@code and *@cause.
 */
struct group	*group_new(uint64_t id, const struct session_host *host,
		    const struct session_client *client,
		    const struct session_options *o, struct session_source *src,
		    enum errcode *code, char **cause);

/**
 * group_join() - @m (consumer @c, of process @pid, going alone by @spec
 * should it leave) joins @g at position @seq, or, @late, catches up to
 * it from its own position (group_find()).
 */
void		 group_join(struct group *g, struct group_member *m,
		    struct consumer *c, const struct producer_spec *spec,
		    pid_t pid, uint64_t seq, bool late);

/**
 * group_start() - a member asked for steps: the producer fills.
 */
void		 group_start(struct group *g);

/**
 * group_next() - a Next queued for member @m, in its group: fill, and
 * answer what is ready.
 */
void		 group_next(struct group_member *m);

/**
 * group_watch() - charge the time the group was blocked, and time the
 * slack; after any member's move.
 */
void		 group_watch(struct group *g);

/**
 * group_rejoin() - left member @m caught up (or a late one reached its
 * meeting point): it takes the group's steps again.  Return: whether it
 * did.
 */
bool		 group_rejoin(struct group_member *m);

/**
 * group_release() - member @m gives back slot @slot of the group's ring.
 * Return: 0, or -1 when it holds no such slot there.
 */
int		 group_release(struct group_member *m, uint32_t slot);

/**
 * group_quit() - member @m's session ends: the slots it holds are its
 * process's to read until it exits (not known: let go), and the group
 * goes once no member is left in it.
 */
void		 group_quit(struct group_member *m);

/**
 * group_reload() - after a reload: find the group's dataset in @cat.
 * Return: 0 to go on, -1 when it changed or went.
 */
int		 group_reload(struct group *g, const struct catalogue *cat);

#endif /* INFEED_GROUP_H */
