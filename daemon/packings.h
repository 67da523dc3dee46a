/* SPDX-License-Identifier: MIT */
/*
 * Packings on demand: a tokens dataset packed at a seq_len that no
 * section of the configuration packs, for the trainers that ask for it.
 * See packings.c.
 */
#ifndef INFEED_PACKINGS_H
#define INFEED_PACKINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct catalogue;
struct config;
struct event_base;

struct packings;

/*
 * Reload the catalogue from the running configuration, not the file (the
 * daemon's daemon_reload_packings()).
 */
typedef void	packings_reload_cb(void *arg);

/**
 * packings_new() - no packing yet; @reload opens the catalogue again, on
 * a pass of @base's loop, when one is wanted or none uses one.
 */
struct packings	*packings_new(struct event_base *base,
		     packings_reload_cb *reload, void *arg);

/**
 * packings_free() - free @pk; NULL is a no-op.
 */
void		 packings_free(struct packings *pk);

/**
 * packings_want() - tokens dataset @cat->datasets[@index] at @seq_len,
 * which no section packs.  Return: 1 while its packing is under way (the
 * first call starts it), -1 with *@cause when it cannot be made (its
 * section's name too long, or refused at open: memory_budget, the files),
 * the refusal said once; 0 when it is open: a catalogue section over the
 * same files at @seq_len (session_check() finds it).
 */
int		 packings_want(struct packings *pk, const struct catalogue *cat,
		     size_t index, uint32_t seq_len, char **cause);

/**
 * packings_pending() - whether a packing wanted is still under way.
 */
bool		 packings_pending(const struct packings *pk);

/**
 * packings_sections() - add to @nconf (the file just loaded, or a copy
 * of the running configuration, whose packings' sections are taken out
 * first) a section for each packing that a session uses or that is
 * wanted, made from @nconf's own section of its dataset (one whose
 * dataset's section went is dropped).
 */
void		 packings_sections(struct packings *pk, struct config *nconf);

/**
 * packings_reloaded() - catalogue @cat (opened from what
 * packings_sections() made) serves now: the packings wanted that it was
 * made with are open, or refused with its reason; NULL @cat: the
 * configuration file did not load, every packing wanted is refused.
 */
void		 packings_reloaded(struct packings *pk,
		     const struct catalogue *cat);

/**
 * packings_use() - a session on dataset @name starts (@delta 1) or ends
 * (-1); the last to end a packing's use frees it (a reload without it).
 * Return: whether @name is a packing made on demand (NULL @pk: none is).
 */
bool		 packings_use(struct packings *pk, const char *name,
		     int delta);

#endif /* INFEED_PACKINGS_H */
