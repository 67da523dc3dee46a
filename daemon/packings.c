/* SPDX-License-Identifier: MIT */
/*
 * Packings on demand (see packings.h).  A trainer that asks a tokens
 * dataset for a seq_len that no section packs gets one made: a section
 * like the dataset's in every key but seq_len, named "NAME/SEQ_LEN" (no
 * section of a file can have a '/' in its name), is added to the
 * configuration and the catalogue is reloaded.  So the packing is made as
 * every section's is: on the reload's thread, off the event loop; in the
 * daemon and the workers' fork server, whose workers share it; charged to
 * memory_budget by the catalogue, which refuses it, saying why, when the
 * budget cannot hold it; and one for every session that asks the same
 * (dataset, seq_len), which session_check() finds as it finds a section
 * of that seq_len, so that they share a group too.  The Attach waits for
 * it on a timer (attach-check.c), other clients served meanwhile.  The
 * sessions on a packing are counted; when the last ends, a reload leaves
 * it out, which frees it.  Each reload re-makes the sections from its
 * configuration's section of their dataset, so an edit of that section
 * applies to them too, and one whose section went goes with it.  A
 * reload for a packing starts from the running configuration, not the
 * file: an edit of the file not yet sent with SIGHUP waits for it.
 * At most PACKINGS_MAX are kept or under way: each costs a reload, which
 * replaces the workers, so clients cannot ask for one after another.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "catalogue.h"
#include "config.h"
#include "infeed-limits.h"
#include "log.h"
#include "packings.h"
#include "xmalloc.h"

/* Packings on demand kept or under way, at most. */
#define PACKINGS_MAX	4

/* Where a packing is. */
enum packing_state {
	PACKING_WANTED,		/* a reload that makes it is under way */
	PACKING_OPEN,		/* in the catalogue */
	PACKING_REFUSED,	/* not made: cause; until the next reload */
};

struct packing_entry {
	char			*base;		/* the dataset's section */
	char			*name;		/* "base/seq_len" */
	uint32_t		 seq_len;
	enum packing_state	 state;
	char			*cause;		/* PACKING_REFUSED's */
	unsigned		 users;		/* sessions on it */
	bool			 sent;		/* in the reload under way */
};

struct packings {
	struct packing_entry	*v;
	size_t			 n;
	packings_reload_cb	*reload;
	void			*arg;
	struct event		*ev;	/* the reload, on the next loop pass */
};

/* The reload asked for. */
static void
packings_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct packings	*pk = arg;

	(void)fd;
	(void)ev;
	pk->reload(pk->arg);
}

/* No packing yet. */
struct packings *
packings_new(struct event_base *base, packings_reload_cb *reload, void *arg)
{
	struct packings	*pk = xcalloc(1, sizeof(*pk));

	pk->reload = reload;
	pk->arg = arg;
	if ((pk->ev = evtimer_new(base, packings_timer_cb, pk)) == NULL)
		fatalx("evtimer_new");
	return (pk);
}

/*
 * Reload on the next loop pass, not from the caller (a session being
 * freed, perhaps as infeedd stops): many asks, one reload.
 */
static void
packings_reload(struct packings *pk)
{
	struct timeval	zero = { 0, 0 };

	evtimer_add(pk->ev, &zero);
}

/* Forget entry @i. */
static void
packings_remove(struct packings *pk, size_t i)
{
	free(pk->v[i].base);
	free(pk->v[i].name);
	free(pk->v[i].cause);
	pk->v[i] = pk->v[--pk->n];
}

/* Free it all. */
void
packings_free(struct packings *pk)
{
	if (pk == NULL)
		return;
	while (pk->n > 0)
		packings_remove(pk, 0);
	event_free(pk->ev);
	free(pk->v);
	free(pk);
}

/* The entry named @name, or NULL. */
static struct packing_entry *
packings_find(const struct packings *pk, const char *name)
{
	size_t	i;

	for (i = 0; i < pk->n; i++) {
		if (strcmp(pk->v[i].name, name) == 0)
			return (&pk->v[i]);
	}
	return (NULL);
}

/* The packings' names, ", " between, in @buf of @len bytes. */
static const char *
packings_names(const struct packings *pk, char *buf, size_t len)
{
	size_t	i, at = 0;

	buf[0] = '\0';
	for (i = 0; i < pk->n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
		    i > 0 ? ", " : "", pk->v[i].name);
	return (buf);
}

/* Want @index's dataset at @seq_len: see packings.h. */
int
packings_want(struct packings *pk, const struct catalogue *cat, size_t index,
    uint32_t seq_len, char **cause)
{
	const char		*base = cat->datasets[index]->name;
	struct packing_entry	*e;
	char			*name, list[PACKINGS_MAX *
				    (INFEED_MAX_DATASET_NAME + 2)];

	name = xasprintf("%s/%" PRIu32, base, seq_len);
	if (strlen(name) > INFEED_MAX_DATASET_NAME) {
		*cause = xasprintf("seq_len = %" PRIu32 ": '%s' would be packed "
		    "as '%s', longer than a dataset's name can be (%d); add a "
		    "section over the same files with that seq_len, or leave "
		    "seq_len unset", seq_len, base, name,
		    INFEED_MAX_DATASET_NAME);
		free(name);
		return (-1);
	}
	if ((e = packings_find(pk, name)) != NULL) {
		free(name);
		if (e->state == PACKING_REFUSED) {
			*cause = xstrdup(e->cause);
			return (-1);
		}
		/* Open but not found: a reload took it away; want it again. */
		if (e->state == PACKING_WANTED)
			return (1);
		e->state = PACKING_WANTED;
		e->sent = false;
	} else if (pk->n >= PACKINGS_MAX) {
		*cause = xasprintf("seq_len = %" PRIu32 ": infeedd already "
		    "holds the %d packings it makes for trainers' seq_len (%s); "
		    "ask for one of those, or add a section over the same files "
		    "with seq_len = %" PRIu32 " to the configuration", seq_len,
		    PACKINGS_MAX, packings_names(pk, list, sizeof(list)),
		    seq_len);
		free(name);
		return (-1);
	} else {
		pk->v = xreallocarray(pk->v, pk->n + 1, sizeof(*pk->v));
		e = &pk->v[pk->n++];
		memset(e, 0, sizeof(*e));
		e->base = xstrdup(base);
		e->name = name;
		e->seq_len = seq_len;
		e->state = PACKING_WANTED;
	}
	log_info("dataset '%s': packing it at seq_len %" PRIu32 " as '%s', "
	    "asked for by a trainer", base, seq_len, e->name);
	packings_reload(pk);
	return (1);
}

/* Whether any packing is under way. */
bool
packings_pending(const struct packings *pk)
{
	size_t	i;

	for (i = 0; pk != NULL && i < pk->n; i++) {
		if (pk->v[i].state == PACKING_WANTED)
			return (true);
	}
	return (false);
}

/*
 * @nconf's section @j with seq_len = @seq_len and name @name, added to
 * @nconf's sections.
 */
static void
packings_section(struct config *nconf, size_t j, const char *name,
    uint32_t seq_len)
{
	struct dataset_conf		*c;
	size_t				 i;

	nconf->datasets = xreallocarray(nconf->datasets, nconf->ndatasets + 1,
	    sizeof(*nconf->datasets));
	c = &nconf->datasets[nconf->ndatasets++];
	config_dataset_copy(c, &nconf->datasets[j]);
	free(c->name);
	c->name = xstrdup(name);
	free(c->source);
	c->source = xasprintf("%s, packed for a trainer at seq_len %" PRIu32,
	    nconf->datasets[j].source, seq_len);
	for (i = 0; i < c->nkv; i++) {
		if (strcmp(c->kv[i].key, "seq_len") == 0) {
			free(c->kv[i].value);
			c->kv[i].value = xasprintf("%" PRIu32, seq_len);
		}
	}
}

/*
 * Take out of @nconf the sections of packings (a '/' in the name): those
 * of a running configuration's copy, made again below as they are wanted.
 */
static void
packings_strip(struct config *nconf)
{
	size_t	i;

	for (i = 0; i < nconf->ndatasets; i++) {
		if (strchr(nconf->datasets[i].name, '/') == NULL)
			continue;
		config_dataset_clear(&nconf->datasets[i]);
		memmove(&nconf->datasets[i], &nconf->datasets[i + 1],
		    (nconf->ndatasets - i - 1) * sizeof(*nconf->datasets));
		nconf->ndatasets--;
		i--;
	}
}

/* The sections of the packings wanted or used, into @nconf. */
void
packings_sections(struct packings *pk, struct config *nconf)
{
	struct packing_entry		*e;
	size_t				 i, j, n;

	packings_strip(nconf);
	n = nconf->ndatasets;
	for (i = 0; i < pk->n; i++) {
		e = &pk->v[i];
		for (j = 0; j < n; j++) {
			if (strcmp(nconf->datasets[j].name, e->base) == 0)
				break;
		}
		if (e->state == PACKING_REFUSED ||
		    (e->state == PACKING_OPEN && e->users == 0) || j == n ||
		    dataset_conf_get(&nconf->datasets[j], "seq_len") == NULL) {
			if (e->state == PACKING_OPEN)
				log_info("dataset '%s': no session uses it; "
				    "freed", e->name);
			packings_remove(pk, i--);
			continue;
		}
		packings_section(nconf, j, e->name, e->seq_len);
		e->sent = true;
	}
}

/*
 * @cat serves: the packings wanted that its reload was sent are open, or
 * refused (NULL @cat: the configuration did not load; every one wanted).
 */
void
packings_reloaded(struct packings *pk, const struct catalogue *cat)
{
	struct packing_entry	*e;
	const char		*why;
	size_t			 i, k;

	for (i = 0; i < pk->n; i++) {
		e = &pk->v[i];
		if (e->state != PACKING_WANTED || (cat != NULL && !e->sent))
			continue;
		if (cat != NULL && catalogue_find(cat, e->name, &k) != NULL) {
			e->state = PACKING_OPEN;
			continue;
		}
		why = cat != NULL ? catalogue_refusal(cat, e->name) : NULL;
		e->state = PACKING_REFUSED;
		e->cause = xasprintf("seq_len = %" PRIu32 ": '%s' could not be "
		    "packed at that seq_len: %s", e->seq_len, e->base,
		    why != NULL ? why : cat == NULL ? "the configuration "
		    "file does not load now (infeedd's log says why)" :
		    "its section is gone");
	}
}

/* A session on @name starts or ends. */
bool
packings_use(struct packings *pk, const char *name, int delta)
{
	struct packing_entry	*e;

	if (pk == NULL || (e = packings_find(pk, name)) == NULL)
		return (false);
	if (delta > 0)
		e->users++;
	else if (e->users > 0 && --e->users == 0 &&
	    e->state == PACKING_OPEN)
		packings_reload(pk);
	return (true);
}
