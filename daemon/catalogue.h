/* SPDX-License-Identifier: MIT */
/*
 * The catalogue: the datasets that infeedd serves, opened from the
 * configuration, who may attach to each (allow_groups) and what a bad
 * image does (bad_samples).
 */
#ifndef INFEED_CATALOGUE_H
#define INFEED_CATALOGUE_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "dataset.h"

struct catalogue_entry {
	const struct dataset_conf *conf;	/* borrowed from the config */
	bool			 restricted;	/* allow_groups was given */
	bool			 bad_replace;	/* bad_samples = replace */
	gid_t			*groups;
	size_t			 ngroups;
};

struct catalogue {
	struct dataset		**datasets;	/* the ones that opened */
	struct catalogue_entry	 *entries;	/* index-aligned */
	size_t			  ndatasets;
	/*
	 * What its datasets keep in memory (a tokens packing), twice: the
	 * daemon's copy and the fork server's, which its workers share.  The
	 * daemon charges it to memory_budget.
	 */
	uint64_t		  memory;
	char			**refused;	/* name, why: a pair each */
	size_t			  nrefused;
};

/* The copies of a dataset's memory: the daemon's and the fork server's. */
#define CATALOGUE_COPIES	2

/**
 * catalogue_open() - open every dataset of @conf; one that fails is logged
 * and left out.  Datasets of @old whose sections did not change move over,
 * open, to the new catalogue (so their sessions go on); a mix moves over
 * only when its sources' sections did not change either.  A new dataset
 * that keeps memory (ds->memory, CATALOGUE_COPIES times) past @room with
 * the others is refused, saying so, by its reader before it is made
 * (dataset_open_within()) or after: @room is what memory_budget has for
 * the catalogue (UINT64_MAX in the fork server, which charges nothing).
 */
struct catalogue *catalogue_open(const struct config *conf,
		      struct catalogue *old, uint64_t room);

/**
 * catalogue_open_beside() - catalogue_open() that leaves @old as it is,
 * sharing its unchanged datasets with the new catalogue, for a thread
 * that opens the catalogue while the loop still serves @old (which it
 * only reads); catalogue_disown() then hands them over, on the loop.
 * catalogue_open() is the two together.  Not two at a time: opening a
 * mix uses dataset_sections().
 */
struct catalogue *catalogue_open_beside(const struct config *conf,
		      const struct catalogue *old, uint64_t room);

/**
 * catalogue_disown() - the datasets @old shares with @cat are @cat's.
 */
void		  catalogue_disown(struct catalogue *old,
		      const struct catalogue *cat);

/**
 * catalogue_free() - close the datasets still owned; NULL is a no-op.
 */
void		  catalogue_free(struct catalogue *cat);

/**
 * catalogue_refusal() - why the section called @name was refused when
 * @cat opened (what the log says after "refused: "), or NULL.
 */
const char	 *catalogue_refusal(const struct catalogue *cat,
		      const char *name);

/**
 * catalogue_find() - the dataset called @name and its *@index, or NULL.
 */
struct dataset	 *catalogue_find(const struct catalogue *cat, const char *name,
		      size_t *index);

/**
 * catalogue_allows() - whether a client of @uid and @gid may attach to
 * dataset @index.
 */
bool		  catalogue_allows(const struct catalogue *cat, size_t index,
		      uid_t uid, gid_t gid);

/**
 * catalogue_allows_gid() - whether dataset @index lets a client of primary
 * group @gid in without its supplementary groups (no allow_groups, or
 * @gid is listed).  catalogue_allows_groups() - or with one of its @n
 * supplementary @groups, from catalogue_user_groups().
 */
bool		  catalogue_allows_gid(const struct catalogue *cat,
		      size_t index, gid_t gid);
bool		  catalogue_allows_groups(const struct catalogue *cat,
		      size_t index, gid_t gid, const gid_t *groups, size_t n);

/**
 * catalogue_user_groups() - every group of @uid (primary @gid) in the
 * host's group database, however many, into *@groups (malloc'd) and *@n.
 * Thread-safe; it may block as long as the group database does (NSS), so
 * the daemon calls it on a helper thread.  Return: 0, or -1 for an unknown
 * user or no memory.
 */
int		  catalogue_user_groups(uid_t uid, gid_t gid, gid_t **groups,
		      size_t *n);

#endif /* INFEED_CATALOGUE_H */
