/* SPDX-License-Identifier: MIT */
/*
 * The "mix" reader: several datasets of the catalogue in set proportions.
 *
 *	[dataset blend]
 *	type = mix
 *	sources = web, code, books	sections of this catalogue, whose
 *					samples have one shape and dtype
 *	weights = 6, 3, 1		positive, up to 3 decimals
 *	samples = 1000000		rows of the mix (default: the sum of
 *					the sources'); set it to the rows of
 *					the whole run so that each source's
 *					epochs advance within one mix epoch
 *	seed = 0			the sources' shuffle (default 0)
 *
 * Row i of the mix is a row of one source, by a rule that depends on i
 * alone (so any worker reads any row, and the sampler's order, resume and
 * elastic resume hold as for any dataset):
 *
 *  - the weights, made whole (x 1000) and divided by their gcd, sum to a
 *    period W (at most MIX_PERIOD_MAX); position i % W of the period
 *    belongs to a source by smooth weighted round-robin (nginx's), which
 *    spreads each source evenly over the period: every W rows hold each
 *    source's exact share, and any window's count of a source is within
 *    about one row of its weight's share;
 *  - that source's k-th row is k = (i / W) * w + its rank among its
 *    positions in the period; k / N is the source's own epoch and k % N
 *    the position in its permutation of that epoch, the sampler's Feistel
 *    bijection keyed on (seed + source number, source epoch).  So a small
 *    source repeats, epoch after epoch, each a new order; a large one is
 *    sampled; within each source epoch every row of the source comes once.
 *
 * With shuffle = false on the client (the mix shuffles its sources) rows
 * come in this order and the proportions hold over every window; with
 * shuffle = true the sampler permutes the mix's rows and they hold over
 * the epoch only.
 *
 * The sources are opened here, again, from their sections (the catalogue
 * gives them, dataset_mix_sections()), so the mix owns what it reads.  A
 * source may not be a mix, nor an image dataset; a source restricted by
 * allow_groups needs the same allow_groups on the mix.  A sample's label
 * is its source's label.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "number.h"
#include "reader-mix.h"
#include "sampler.h"
#include "splitmix64.h"

/* dataset_mix_sections()'s, while the catalogue opens its sections. */
static const struct dataset_conf *mix_confs;
static size_t			  mix_nconfs;
static struct dataset		*(*mix_open_section)(const struct dataset_conf *,
				    uint64_t, char **);

struct mix {
	struct dataset	*src[MIX_SOURCES_MAX];
	uint64_t	 weight[MIX_SOURCES_MAX];	/* reduced */
	size_t		 nsrc;
	uint32_t	 period;			/* W */
	uint8_t		*slot_src;			/* W: the source */
	uint32_t	*slot_rank;			/* W: its rank */
	uint64_t	 seed;
};

static int	mix_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	mix_read(const struct dataset *, uint64_t, void *, int64_t *,
		    bool);
static int	mix_read_at(const struct dataset *, uint64_t, uint64_t,
		    uint64_t, void *, int64_t *, bool);
static void	mix_close(struct dataset *);

const struct dataset_ops dataset_mix_ops = {
	.type = "mix",
	.keys = (const char *const []){ "sources", "weights", "samples",
	    "seed", NULL },
	.open = mix_open,
	.read = mix_read,
	.read_at = mix_read_at,
	.close = mix_close,
};

/* Keep the sections a mix may name and the way to open one. */
void
dataset_mix_sections(const struct dataset_conf *confs, size_t n,
    struct dataset *(*open)(const struct dataset_conf *, uint64_t, char **))
{
	mix_confs = confs;
	mix_nconfs = n;
	mix_open_section = open;
}

/* A section by name, of those kept. */
static const struct dataset_conf *
mix_section(const char *name)
{
	size_t	i;

	for (i = 0; i < mix_nconfs; i++) {
		if (strcmp(mix_confs[i].name, name) == 0)
			return (&mix_confs[i]);
	}
	return (NULL);
}

/* Greatest common divisor. */
static uint64_t
mix_gcd(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return (a);
}

/* "2.5" as 2500: a positive decimal of at most 3 decimals, below 10^9. */
static int
mix_weight_parse(const char *s, uint64_t *out)
{
	uint64_t	v = 0;
	int		frac = -1;

	for (; *s == ' ' || *s == '\t'; s++)
		;
	for (; *s != '\0' && *s != ' ' && *s != '\t'; s++) {
		if (*s == '.' && frac == -1)
			frac = 0;
		else if (*s >= '0' && *s <= '9' && frac < 3 && v < 1000000000) {
			v = v * 10 + (uint64_t)(*s - '0');
			if (frac >= 0)
				frac++;
		} else
			return (-1);
	}
	for (; *s == ' ' || *s == '\t'; s++)
		;
	if (*s != '\0')
		return (-1);
	for (frac = frac < 0 ? 0 : frac; frac < 3; frac++)
		v *= 10;
	if (v == 0 || v > (uint64_t)1000000000 * 1000)
		return (-1);
	*out = v;
	return (0);
}

/* Split @list at commas and blanks into at most @max malloc'd words. */
static size_t
mix_words(const char *list, char **w, size_t max)
{
	const char	*p = list, *q;
	size_t		 n = 0;

	while (*p != '\0') {
		p += strspn(p, ", \t");
		if (*p == '\0')
			break;
		q = p + strcspn(p, ", \t");
		if (n == max)
			return (max + 1);
		if ((w[n] = strndup(p, (size_t)(q - p))) == NULL)
			return (max + 1);
		n++;
		p = q;
	}
	return (n);
}

/* Open source @name from its section; check it fits the mix. */
static int
mix_source(struct dataset *ds, const struct dataset_conf *conf,
    const char *name, struct dataset **out, char **cause)
{
	const struct dataset_conf *sc;
	const char	*g, *mg;
	char		*why = NULL;
	int		 rc;

	if (strcmp(name, conf->name) == 0 ||
	    (sc = mix_section(name)) == NULL || mix_open_section == NULL)
		return (dataset_error(cause, ds, "source '%s' is not another "
		    "[dataset %s] section of this configuration", name, name));
	if ((g = dataset_conf_get(sc, "type")) != NULL &&
	    strcmp(g, "mix") == 0)
		return (dataset_error(cause, ds, "source '%s' is a mix; a mix's "
		    "sources are tokens or array datasets", name));
	g = dataset_conf_get(sc, "allow_groups");
	mg = dataset_conf_get(conf, "allow_groups");
	if (g != NULL && (mg == NULL || strcmp(g, mg) != 0))
		return (dataset_error(cause, ds, "source '%s' has 'allow_groups "
		    "= %s'; give the mix the same, or it would serve the "
		    "source to anyone", name, g));
	/* The sources opened so far keep ds->memory of the mix's room. */
	if ((*out = mix_open_section(sc, ds->memory_room > ds->memory ?
	    ds->memory_room - ds->memory : 0, &why)) == NULL) {
		rc = dataset_error(cause, ds, "source '%s': %s", name,
		    why != NULL ? why : "cannot open");
		free(why);
		return (rc);
	}
	if ((*out)->encoded)
		return (dataset_error(cause, ds, "source '%s' is an image "
		    "dataset; a mix's sources are tokens or array datasets",
		    name));
	return (0);
}

/* The period's positions by smooth weighted round-robin. */
static int
mix_rule(struct dataset *ds, struct mix *m, char **cause)
{
	int64_t		cur[MIX_SOURCES_MAX];
	uint32_t	count[MIX_SOURCES_MAX];
	uint64_t	g = 0, w = 0;
	size_t		s, best;
	uint32_t	p;

	for (s = 0; s < m->nsrc; s++)
		g = mix_gcd(m->weight[s], g);
	for (s = 0; s < m->nsrc; s++) {
		m->weight[s] /= g;
		w += m->weight[s];
	}
	if (w > MIX_PERIOD_MAX)
		return (dataset_error(cause, ds, "the weights reduce to a period "
		    "of %" PRIu64 " rows, over %u: round them (fewer decimals, "
		    "smaller ratios)", w, MIX_PERIOD_MAX));
	m->period = (uint32_t)w;
	if ((m->slot_src = calloc(w, 1)) == NULL ||
	    (m->slot_rank = calloc(w, sizeof *m->slot_rank)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(ENOMEM)));
	memset(cur, 0, sizeof cur);
	memset(count, 0, sizeof count);
	for (p = 0; p < m->period; p++) {
		best = 0;
		for (s = 0; s < m->nsrc; s++) {
			cur[s] += (int64_t)m->weight[s];
			if (cur[s] > cur[best])
				best = s;
		}
		cur[best] -= (int64_t)w;
		m->slot_src[p] = (uint8_t)best;
		m->slot_rank[p] = count[best]++;
	}
	return (0);
}

/* Read the keys, open the sources, make the rule. */
static int
mix_open(struct dataset *ds, const struct dataset_conf *conf, char **cause)
{
	struct mix	*m;
	const char	*v, *errstr;
	char		*names[MIX_SOURCES_MAX + 1], *wv[MIX_SOURCES_MAX + 1];
	char		 a[128], b[128];
	size_t		 n = 0, nw = 0, s;
	uint64_t	 total = 0;
	int		 rc = -1;

	if ((m = calloc(1, sizeof *m)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	ds->priv = m;
	memset(names, 0, sizeof names);
	memset(wv, 0, sizeof wv);
	if ((v = dataset_conf_need(ds, conf, "sources", "the datasets "
	    "mixed, like 'web, code'", cause)) == NULL)
		goto out;
	n = mix_words(v, names, MIX_SOURCES_MAX);
	if (n == 0 || n > MIX_SOURCES_MAX) {
		dataset_error(cause, ds, "'sources = %s': 1 to %d dataset "
		    "names, separated by commas", v, MIX_SOURCES_MAX);
		goto out;
	}
	if ((v = dataset_conf_need(ds, conf, "weights", "one weight a "
	    "source, like '3, 1'", cause)) == NULL)
		goto out;
	nw = mix_words(v, wv, MIX_SOURCES_MAX);
	if (nw != n) {
		dataset_error(cause, ds, "'weights = %s': %zu weights for %zu "
		    "sources; one a source, in the same order", v,
		    nw > MIX_SOURCES_MAX ? (size_t)MIX_SOURCES_MAX + 1 : nw,
		    n);
		goto out;
	}
	for (s = 0; s < n; s++) {
		if (mix_weight_parse(wv[s], &m->weight[s]) != 0) {
			dataset_error(cause, ds, "weight '%s' of source '%s': a "
			    "positive number with at most 3 decimals, below "
			    "10^9", wv[s], names[s]);
			goto out;
		}
	}
	if ((v = dataset_conf_get(conf, "seed")) != NULL &&
	    number_parse_u64(v, 0, UINT64_MAX, &m->seed, &errstr) != 0) {
		dataset_error(cause, ds, "'seed = %s': %s", v, errstr);
		goto out;
	}
	m->nsrc = n;
	for (s = 0; s < n; s++) {
		if (mix_source(ds, conf, names[s], &m->src[s], cause) != 0)
			goto out;
		if (s > 0 && (m->src[s]->dtype != m->src[0]->dtype ||
		    m->src[s]->ndim != m->src[0]->ndim ||
		    memcmp(m->src[s]->shape, m->src[0]->shape,
		    sizeof m->src[0]->shape) != 0)) {
			dataset_error(cause, ds, "source '%s' has samples of %s "
			    "%s, source '%s' of %s %s; a mix's sources agree "
			    "(tokens: the same seq_len)", names[s],
			    dtype_name(m->src[s]->dtype),
			    dataset_shape_format(m->src[s]->shape,
			    m->src[s]->ndim, a, sizeof a), names[0],
			    dtype_name(m->src[0]->dtype),
			    dataset_shape_format(m->src[0]->shape,
			    m->src[0]->ndim, b, sizeof b));
			goto out;
		}
		total += m->src[s]->samples;
		ds->memory += m->src[s]->memory;
	}
	ds->samples = total;
	if ((v = dataset_conf_get(conf, "samples")) != NULL &&
	    number_parse_u64(v, 1, UINT64_MAX / 2, &ds->samples,
	    &errstr) != 0) {
		dataset_error(cause, ds, "'samples = %s': %s; the rows of the "
		    "mix", v, errstr);
		goto out;
	}
	if (mix_rule(ds, m, cause) != 0)
		goto out;
	ds->ndim = m->src[0]->ndim;
	memcpy(ds->shape, m->src[0]->shape, sizeof ds->shape);
	ds->dtype = m->src[0]->dtype;
	ds->label_dtype = m->src[0]->label_dtype;
	ds->sample_bytes = m->src[0]->sample_bytes;
	rc = 0;
out:
	for (s = 0; s <= MIX_SOURCES_MAX; s++) {
		free(names[s]);
		free(wv[s]);
	}
	if (rc != 0)
		mix_close(ds);
	return (rc);
}

/* Row @index as seed 0 has it. */
static int
mix_read(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label, bool stream)
{
	return (mix_read_at(ds, index, 0, 0, dst, label, stream));
}

/*
 * Row @index: its source's row by the rule, as that source's epoch packs
 * it (the mix's own @epoch does not enter: the rule is of @index alone).
 */
static int
mix_read_at(const struct dataset *ds, uint64_t index, uint64_t seed,
    uint64_t epoch, void *dst, int64_t *label, bool stream)
{
	const struct mix	*m = ds->priv;
	struct sampler_feistel	 f;
	const struct dataset	*src;
	uint32_t		 p = (uint32_t)(index % m->period);
	unsigned		 s = m->slot_src[p];
	uint64_t		 k, n;

	src = m->src[s];
	n = src->samples;
	k = index / m->period * m->weight[s] + m->slot_rank[p];
	(void)epoch;
	sampler_feistel_init(&f, n, m->seed + s, k / n);
	if (src->ops->read_at == NULL)
		return (src->ops->read(src, sampler_feistel_index(&f, k % n),
		    dst, label, stream));
	return (src->ops->read_at(src, sampler_feistel_index(&f, k % n),
	    seed + m->seed + s, k / n, dst, label, stream));
}

/* Close the sources and free the rule. */
static void
mix_close(struct dataset *ds)
{
	struct mix	*m = ds->priv;
	size_t		 s;

	if (m == NULL)
		return;
	for (s = 0; s < MIX_SOURCES_MAX; s++)
		dataset_free(m->src[s]);
	free(m->slot_src);
	free(m->slot_rank);
	free(m);
	ds->priv = NULL;
}
