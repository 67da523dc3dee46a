/* SPDX-License-Identifier: MIT */
/*
 * The catalogue: the datasets that infeedd serves, opened from the
 * configuration.  A dataset whose section or files are bad (a missing or
 * unknown key, a wrong magic) is refused with a log line naming the file
 * and the fault; the rest of the catalogue is served.
 *
 * On reload, a dataset whose section is unchanged keeps its open reader
 * (and so its sessions); a changed or new one is opened afresh.  While an
 * open runs, a watcher thread tells systemd how far it got (more time for
 * a start-up that progresses); once infeedd stops, the readers' long
 * loops give up (dataset_open_tick()) and the rest is not opened.
 *
 * Access: a section may say "allow_groups = g1 g2"; then only clients whose
 * primary or supplementary groups include one of them may attach to it
 * (root too: add it to a group if it should read the dataset).
 */

#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "catalogue.h"
#include "clock.h"
#include "log.h"
#include "s3.h"
#include "xmalloc.h"

#define CATALOGUE_MAX_GROUPS	64
/* A user's groups (Linux's NGROUPS_MAX), and getpwuid_r's buffer. */
#define CATALOGUE_MAX_USER_GROUPS	65536
#define CATALOGUE_MAX_PW_BUF		(1024 * 1024)

/*
 * While a catalogue opens, its watcher looks this often at how far the
 * open got, and where it moved on, gives systemd this much more time
 * (a start-up or a reload that indexes thousands of shards is not killed
 * by TimeoutStartSec= while it progresses; one that hangs still is) and
 * says where it is in STATUS=; the log hears it every fifth look.
 */
#define CATALOGUE_WATCH_MS		2000
#define CATALOGUE_EXTEND_US		(5ULL * CATALOGUE_WATCH_MS * 1000)
#define CATALOGUE_WATCH_LOG_EVERY	5

/* True when two sections say the same thing. */
static bool
catalogue_same_conf(const struct dataset_conf *a, const struct dataset_conf *b)
{
	size_t	i;

	if (strcmp(a->name, b->name) != 0 || a->nkv != b->nkv)
		return (false);
	for (i = 0; i < a->nkv; i++) {
		if (strcmp(a->kv[i].key, b->kv[i].key) != 0 ||
		    strcmp(a->kv[i].value, b->kv[i].value) != 0)
			return (false);
	}
	return (true);
}

/* @name's section among @confs' @n, or among @old's open entries. */
static const struct dataset_conf *
catalogue_section(const struct dataset_conf *confs, size_t n,
    const struct catalogue *old, const char *name)
{
	size_t	i;

	for (i = 0; confs != NULL && i < n; i++) {
		if (strcmp(confs[i].name, name) == 0)
			return (&confs[i]);
	}
	for (i = 0; old != NULL && i < old->ndatasets; i++) {
		if (old->datasets[i] != NULL &&
		    strcmp(old->entries[i].conf->name, name) == 0)
			return (old->entries[i].conf);
	}
	return (NULL);
}

/*
 * True unless @dc is a mix one of whose sources reads differently in
 * @conf than it did in @old: a mix opens its own copies of its sources,
 * so an edited source (its path, its allow_groups) must make a new mix,
 * not leave the old one serving what the operator took away.
 */
static bool
catalogue_same_sources(const struct config *conf, const struct catalogue *old,
    const struct dataset_conf *dc)
{
	const char			*type = dataset_conf_get(dc, "type");
	const char			*v = dataset_conf_get(dc, "sources");
	const struct dataset_conf	*a, *b;
	char				*copy, *tok, *save = NULL;
	bool				 same = true;

	if (type == NULL || strcmp(type, "mix") != 0 || v == NULL)
		return (true);
	copy = xstrdup(v);
	for (tok = strtok_r(copy, ", \t", &save); tok != NULL && same;
	    tok = strtok_r(NULL, ", \t", &save)) {
		a = catalogue_section(NULL, 0, old, tok);
		b = catalogue_section(conf->datasets, conf->ndatasets, NULL,
		    tok);
		same = a != NULL && b != NULL && catalogue_same_conf(a, b);
	}
	free(copy);
	return (same);
}

/* Resolve "allow_groups"; -1 with *cause for an unknown group. */
static int
catalogue_groups(const struct dataset_conf *dc, struct catalogue_entry *e,
    char **cause)
{
	const char	*v = dataset_conf_get(dc, "allow_groups");
	char		*copy, *tok, *save = NULL;
	struct group	*gr;

	e->ngroups = 0;
	e->restricted = v != NULL;
	if (v == NULL)
		return (0);
	copy = xstrdup(v);
	for (tok = strtok_r(copy, " ,\t", &save); tok != NULL;
	    tok = strtok_r(NULL, " ,\t", &save)) {
		if ((gr = getgrnam(tok)) == NULL) {
			*cause = xasprintf("allow_groups: no group '%s' on this "
			    "host", tok);
			free(copy);
			return (-1);
		}
		if (e->ngroups == CATALOGUE_MAX_GROUPS) {
			*cause = xasprintf("allow_groups: at most %d groups",
			    CATALOGUE_MAX_GROUPS);
			free(copy);
			return (-1);
		}
		e->groups = xreallocarray(e->groups, e->ngroups + 1,
		    sizeof(*e->groups));
		e->groups[e->ngroups++] = gr->gr_gid;
	}
	free(copy);
	return (0);
}

/*
 * Read "bad_samples": "error" (the default: a bad image fails the session
 * with ERROR_DATA naming it) or "replace" (a deterministic other sample
 * takes its place, counted and logged).  -1 with *cause for anything else.
 */
static int
catalogue_bad_samples(const struct dataset_conf *dc, struct catalogue_entry *e,
    char **cause)
{
	const char	*v = dataset_conf_get(dc, "bad_samples");

	e->bad_replace = v != NULL && strcmp(v, "replace") == 0;
	if (v == NULL || e->bad_replace || strcmp(v, "error") == 0)
		return (0);
	*cause = xasprintf("bad_samples = %s: expected 'error' (a bad image "
	    "fails the session, the default) or 'replace' (another sample "
	    "takes its place and is counted)", v);
	return (-1);
}

/* Log that @name is refused, for @cause (consumed), and keep why. */
static void
catalogue_refuse(struct catalogue *cat, const char *name, char *cause)
{
	log_warnx("dataset '%s' refused: %s", name, cause);
	cat->refused = xreallocarray(cat->refused, 2 * (cat->nrefused + 1),
	    sizeof(*cat->refused));
	cat->refused[2 * cat->nrefused] = xstrdup(name);
	cat->refused[2 * cat->nrefused + 1] = cause;
	cat->nrefused++;
}

/* Count @ds's memory in @cat's, if @room holds it; else say why not. */
static int
catalogue_charge(struct catalogue *cat, const struct dataset *ds,
    uint64_t room)
{
	uint64_t	need = CATALOGUE_COPIES * ds->memory;

	if (ds->memory > UINT64_MAX / CATALOGUE_COPIES ||
	    cat->memory > room || need > room - cat->memory) {
		catalogue_refuse(cat, ds->name, xasprintf("it keeps %llu bytes "
		    "in memory (its packing of rows, %llu bytes, in the daemon "
		    "and in the workers' fork server), and memory_budget has "
		    "%llu bytes left for it; raise memory_budget, or for a "
		    "tokens dataset set 'repack = none' (20 bytes a piece "
		    "less) or a larger seq_len", (unsigned long long)need,
		    (unsigned long long)ds->memory, (unsigned long long)(
		    cat->memory < room ? room - cat->memory : 0)));
		return (-1);
	}
	cat->memory += need;
	return (0);
}

/*
 * Before a dataset opens: if its files are remote, say so in the log (its
 * open asks each file's size, and a tar set without "index =" downloads
 * and indexes every shard, which for 1,000 shards takes seconds to
 * minutes: at start-up nothing is served meanwhile), and in systemd's
 * STATUS=.  Return: the time it starts, or 0 for local files.
 */
static uint64_t
catalogue_remote_start(const struct dataset_conf *dc)
{
	const char	*v, *type = dataset_conf_get(dc, "type");
	bool		 tar = type != NULL && strcmp(type, "tar") == 0;

	if ((v = dataset_conf_get(dc, tar ? "shards" : "path")) == NULL ||
	    !s3_url(v))
		return (0);
	log_info("dataset '%s': opening its remote files%s", dc->name, tar &&
	    dataset_conf_get(dc, "index") == NULL ? " (tar shards without "
	    "index = are each downloaded and indexed now; an index = file "
	    "of their counts opens at once)" : "");
	sd_notifyf(0, "STATUS=opening dataset '%s' (remote files)", dc->name);
	return (clock_now_ms());
}

/* An open's watcher: which dataset it is at, and when to stop looking. */
struct catalogue_watch {
	pthread_t		 thread;
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;
	bool			 done;
	const struct config	*conf;
	size_t			 at;		/* the dataset opening (atomic) */
	uint64_t		 t0;
	uint64_t		 ticks;		/* at the start */
};

static void *
catalogue_watch_main(void *arg)
{
	struct catalogue_watch	*w = arg;
	struct timespec		 ts;
	uint64_t		 ticks, last = w->ticks;
	unsigned		 looks = 0;
	size_t			 at;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += CATALOGUE_WATCH_MS / 1000;
		while (!w->done && pthread_cond_timedwait(&w->cond, &w->lock,
		    &ts) != ETIMEDOUT)
			;
		if (w->done)
			break;
		ticks = dataset_open_ticks();
		if (ticks == last)
			continue;	/* no progress: no more time */
		last = ticks;
		at = __atomic_load_n(&w->at, __ATOMIC_RELAXED);
		sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%llu\nSTATUS=opening the "
		    "catalogue: dataset '%s' (%zu of %zu), %.0f s so far",
		    CATALOGUE_EXTEND_US, w->conf->datasets[at].name, at + 1,
		    w->conf->ndatasets, (double)(clock_now_ms() - w->t0) /
		    1000.0);
		if (++looks % CATALOGUE_WATCH_LOG_EVERY == 0)
			log_info("still opening the catalogue: dataset '%s' "
			    "(%zu of %zu), %.0f s so far", w->conf->datasets[
			    at].name, at + 1, w->conf->ndatasets, (double)(
			    clock_now_ms() - w->t0) / 1000.0);
	}
	pthread_mutex_unlock(&w->lock);
	return (NULL);
}

static void
catalogue_watch_start(struct catalogue_watch *w, const struct config *conf)
{
	memset(w, 0, sizeof(*w));
	w->conf = conf;
	w->t0 = clock_now_ms();
	w->ticks = dataset_open_ticks();
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	if (conf->ndatasets == 0 || pthread_create(&w->thread, NULL,
	    catalogue_watch_main, w) != 0)
		w->done = true;		/* no watcher: nothing to report */
}

static void
catalogue_watch_stop(struct catalogue_watch *w)
{
	bool	started;

	pthread_mutex_lock(&w->lock);
	started = !w->done;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (started)
		pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
}

/* Open every dataset the configuration names, reusing @old's unchanged ones. */
struct catalogue *
catalogue_open(const struct config *conf, struct catalogue *old,
    uint64_t room)
{
	struct catalogue	*cat = catalogue_open_beside(conf, old, room);

	catalogue_disown(old, cat);
	return (cat);
}

/* Open the datasets, sharing @old's unchanged ones; @old stays as it was. */
struct catalogue *
catalogue_open_beside(const struct config *conf, const struct catalogue *old,
    uint64_t room)
{
	struct catalogue	*cat;
	struct catalogue_entry	*e;
	struct catalogue_watch	 watch;
	const struct dataset_conf *dc;
	struct dataset		*ds;
	char			*cause;
	uint64_t		 t0;
	size_t			 i, j;

	cat = xcalloc(1, sizeof(*cat));
	cat->datasets = xcalloc(conf->ndatasets + 1, sizeof(*cat->datasets));
	cat->entries = xcalloc(conf->ndatasets + 1, sizeof(*cat->entries));
	dataset_sections(conf->datasets, conf->ndatasets);	/* for mixes */
	catalogue_watch_start(&watch, conf);
	for (i = 0; i < conf->ndatasets; i++) {
		/* Stopping: the rest is not opened (its caller frees it). */
		if (!dataset_open_tick())
			break;
		__atomic_store_n(&watch.at, i, __ATOMIC_RELAXED);
		dc = &conf->datasets[i];
		e = &cat->entries[cat->ndatasets];
		cause = NULL;
		if (catalogue_groups(dc, e, &cause) == -1 ||
		    catalogue_bad_samples(dc, e, &cause) == -1) {
			catalogue_refuse(cat, dc->name, cause);
			free(e->groups);
			memset(e, 0, sizeof(*e));
			continue;
		}
		for (j = 0; old != NULL && j < old->ndatasets; j++) {
			if (old->datasets[j] != NULL &&
			    catalogue_same_conf(old->entries[j].conf, dc) &&
			    catalogue_same_sources(conf, old, dc))
				break;
		}
		if (old != NULL && j < old->ndatasets) {
			cat->datasets[cat->ndatasets] = old->datasets[j];
			cat->memory += CATALOGUE_COPIES *
			    old->datasets[j]->memory;
			e->conf = dc;
			cat->ndatasets++;
			continue;
		}
		t0 = catalogue_remote_start(dc);
		/* Each copy's share of the room, refused before it is made. */
		cat->datasets[cat->ndatasets] = dataset_open_within(dc,
		    room > cat->memory ? (room - cat->memory) /
		    CATALOGUE_COPIES : 0, &cause);
		if (cat->datasets[cat->ndatasets] == NULL) {
			catalogue_refuse(cat, dc->name, cause != NULL ? cause :
			    xstrdup("unknown error"));
			free(e->groups);
			memset(e, 0, sizeof(*e));
			continue;
		}
		ds = cat->datasets[cat->ndatasets];
		if (e->bad_replace && !ds->encoded) {
			catalogue_refuse(cat, dc->name, xstrdup("bad_samples = "
			    "replace is for image datasets (type imagefolder or "
			    "tar); an array file that cannot be read is an "
			    "error"));
			dataset_free(ds);
			cat->datasets[cat->ndatasets] = NULL;
			free(e->groups);
			memset(e, 0, sizeof(*e));
			continue;
		}
		if (catalogue_charge(cat, ds, room) == -1) {
			dataset_free(ds);
			cat->datasets[cat->ndatasets] = NULL;
			free(e->groups);
			memset(e, 0, sizeof(*e));
			continue;
		}
		e->conf = dc;
		if (t0 != 0)
			log_info("dataset '%s': its remote files opened in "
			    "%.1f s", dc->name, (double)(clock_now_ms() - t0) /
			    1000.0);
		if (ds->encoded)
			log_info("dataset '%s': %s, %llu images in %u classes",
			    dc->name, ds->type,
			    (unsigned long long)ds->samples, ds->classes);
		else
			log_info("dataset '%s': %s, %llu samples of %s[%llu "
			    "bytes]", dc->name, ds->type,
			    (unsigned long long)ds->samples,
			    dtype_name(ds->dtype),
			    (unsigned long long)ds->sample_bytes);
		cat->ndatasets++;
	}
	catalogue_watch_stop(&watch);
	dataset_sections(NULL, 0);
	return (cat);
}

/* @cat has @old's unchanged datasets now: @old no longer owns them. */
void
catalogue_disown(struct catalogue *old, const struct catalogue *cat)
{
	size_t	i, j;

	for (i = 0; old != NULL && i < old->ndatasets; i++) {
		for (j = 0; j < cat->ndatasets; j++) {
			if (old->datasets[i] != NULL &&
			    old->datasets[i] == cat->datasets[j])
				old->datasets[i] = NULL;
		}
	}
}

/* Close every dataset still owned; NULL is a no-op. */
void
catalogue_free(struct catalogue *cat)
{
	size_t	i;

	if (cat == NULL)
		return;
	for (i = 0; i < cat->ndatasets; i++) {
		dataset_free(cat->datasets[i]);
		free(cat->entries[i].groups);
	}
	for (i = 0; i < 2 * cat->nrefused; i++)
		free(cat->refused[i]);
	free(cat->refused);
	free(cat->entries);
	free(cat->datasets);
	free(cat);
}

/* Why the section called @name was refused at open, or NULL. */
const char *
catalogue_refusal(const struct catalogue *cat, const char *name)
{
	size_t	i;

	for (i = 0; i < cat->nrefused; i++) {
		if (strcmp(cat->refused[2 * i], name) == 0)
			return (cat->refused[2 * i + 1]);
	}
	return (NULL);
}

/* Look a dataset up by name. */
struct dataset *
catalogue_find(const struct catalogue *cat, const char *name, size_t *index)
{
	size_t	i;

	for (i = 0; i < cat->ndatasets; i++) {
		if (cat->datasets[i] != NULL &&
		    strcmp(cat->datasets[i]->name, name) == 0) {
			if (index != NULL)
				*index = i;
			return (cat->datasets[i]);
		}
	}
	return (NULL);
}

/*
 * Whether entry @index lets in a client of primary group @gid without
 * asking the group database: it has no allow_groups, or lists @gid.
 */
bool
catalogue_allows_gid(const struct catalogue *cat, size_t index, gid_t gid)
{
	const struct catalogue_entry	*e = &cat->entries[index];
	size_t				 i;

	if (!e->restricted)
		return (true);
	for (i = 0; i < e->ngroups; i++) {
		if (e->groups[i] == gid)
			return (true);
	}
	return (false);
}

/* Whether one of the client's @n @groups is allowed into entry @index. */
bool
catalogue_allows_groups(const struct catalogue *cat, size_t index, gid_t gid,
    const gid_t *groups, size_t n)
{
	const struct catalogue_entry	*e = &cat->entries[index];
	size_t				 i, k;

	if (catalogue_allows_gid(cat, index, gid))
		return (true);
	for (k = 0; k < n; k++) {
		for (i = 0; i < e->ngroups; i++) {
			if (e->groups[i] == groups[k])
				return (true);
		}
	}
	return (false);
}

/*
 * The groups of @uid (primary @gid) in the group database, all of them:
 * getgrouplist(3) says how many it needs when the array is short.  Safe on
 * any thread, and slow when the group database is (LDAP, NIS): never on
 * the event loop.
 */
int
catalogue_user_groups(uid_t uid, gid_t gid, gid_t **groups, size_t *n)
{
	struct passwd	 pw, *pwp = NULL;
	char		*buf = NULL;
	size_t		 buflen = 16384;
	gid_t		*g = NULL;
	int		 ng = 64, want, rc;

	*groups = NULL;
	*n = 0;
	for (;;) {
		if ((buf = realloc(buf, buflen)) == NULL)
			return (-1);
		rc = getpwuid_r(uid, &pw, buf, buflen, &pwp);
		if (rc != ERANGE || buflen >= CATALOGUE_MAX_PW_BUF)
			break;
		buflen *= 2;
	}
	if (rc != 0 || pwp == NULL) {
		free(buf);
		return (-1);
	}
	for (;;) {
		if ((g = reallocarray(g, (size_t)ng, sizeof(*g))) == NULL)
			break;
		want = ng;
		if (getgrouplist(pw.pw_name, gid, g, &want) != -1) {
			free(buf);
			*groups = g;
			*n = (size_t)want;
			return (0);
		}
		/* -1 sets want to the count it needs. */
		if (want <= ng || want > CATALOGUE_MAX_USER_GROUPS)
			break;
		ng = want;
	}
	free(g);
	free(buf);
	return (-1);
}

/* May a client with @uid and primary @gid attach to entry @index? */
bool
catalogue_allows(const struct catalogue *cat, size_t index, uid_t uid,
    gid_t gid)
{
	gid_t	*groups;
	size_t	 n;
	bool	 ok;

	if (catalogue_allows_gid(cat, index, gid))
		return (true);
	/* Supplementary groups come from the group database, not the socket. */
	if (catalogue_user_groups(uid, gid, &groups, &n) == -1)
		return (false);
	ok = catalogue_allows_groups(cat, index, gid, groups, n);
	free(groups);
	return (ok);
}
