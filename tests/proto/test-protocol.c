/* SPDX-License-Identifier: MIT */
/*
 * docs/protocol.md is the contract, and this test keeps it true.  It reads
 * the document ($PROTOCOL_MD, set by meson) and checks:
 *
 *   document    the sample-order vectors against common/sampler.c, the
 *               error table against ErrorCode in the generated descriptor,
 *               the limits against common/infeed-limits.h, the loader
 *               options against proto/options-schema.h (a row each, with
 *               its default);
 *   errors      every error a client can provoke, against the real infeedd
 *               on a private socket: the code the table gives for the case,
 *               and the connection state its "connection after" column
 *               says (closed: end of file; open: the next request is
 *               answered);
 *   ring        the step ring's descriptor is read-only; a ring on kept
 *               memory shows nothing of the session that had it;
 *   max-clients the client past max_clients has its Hello answered with
 *               RESOURCE_EXHAUSTED, then the connection closes;
 *   pipelining  requests sent in one write, each with its request_id: each
 *               reply carries the id of its request, and replies keep the
 *               documented order.
 *
 * A number changed in the document and not in the code, or the other way
 * round, fails here.  Each case is a meson test of its own (CK_RUN_CASE).
 */

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "harness.h"
#include "infeed-limits.h"
#include "options-schema.h"
#include "sampler.h"
#include "splitmix64.h"

/* key(seed, epoch) of the document's generator section. */
#define DOC_SALT		0x6a09e667f3bcc909ULL
#define DOC_MIN_VECTORS		8
#define DOC_MAX_ROWS		64
#define RECV_MS			2000
#define DATA_MS			20000	/* valgrind restarts */

/* One row of the document's error table. */
struct doc_error {
	char	code[64];
	char	id[64];
	char	connection[16];
	char	session[16];
};

static char		*doc;
static struct doc_error	 doc_errors[64];
static size_t		 doc_nerrors;

/*
 * The table's cases, and whether this file provokes them.  Every row of
 * the table must be here, so a new row needs a test (or a reason).
 */
static const struct {
	const char	*id;
	int		 provoked;
} cases[] = {
	{ "unspecified", 0 },		/* never sent */
	{ "version-mismatch", 1 },
	{ "bad-frame-length", 1 },
	{ "bad-frame-body", 1 },
	{ "bad-frame-fds", 1 },
	{ "unexpected-before-hello", 1 },
	{ "unexpected-reply", 1 },
	{ "unexpected-hello-twice", 1 },
	{ "unexpected-too-many-waiting", 1 },
	{ "unexpected-no-session", 1 },
	{ "unexpected-attached", 1 },
	{ "unexpected-all-held", 1 },
	{ "unexpected-detached-waiting", 1 },
	{ "invalid-option", 1 },
	{ "invalid-dataset-name", 1 },
	{ "invalid-release", 1 },
	{ "invalid-files", 1 },
	{ "not-found-dataset", 1 },
	{ "not-found-reloaded", 1 },
	{ "memory-budget", 1 },
	{ "group-ended", 0 },		/* tests/daemon/test-groups.c */
	{ "reply-too-large", 1 },
	{ "attach-busy", 0 },		/* tests/daemon/test-attach.c (FUSE) */
	{ "max-clients", 1 },		/* the max-clients case */
	{ "permission-denied", 1 },
	{ "data", 1 },
	{ "data-files", 1 },
	{ "internal-workers", 0 },	/* test-session, test-pool */
	{ "data-files-timeout", 0 },	/* tests/daemon/test-attach.c (FUSE) */
	{ "internal", 0 },		/* a failing dup() in the daemon */
};

/* Read the whole document once. */
static void
doc_load(void)
{
	const char	*path = getenv("PROTOCOL_MD");
	struct stat	 sb;
	FILE		*fp;

	if (doc != NULL)
		return;
	ck_assert_msg(path != NULL, "set PROTOCOL_MD to docs/protocol.md");
	ck_assert_msg((fp = fopen(path, "r")) != NULL, "%s: %s", path,
	    strerror(errno));
	ck_assert_int_eq(fstat(fileno(fp), &sb), 0);
	doc = calloc(1, (size_t)sb.st_size + 1);
	ck_assert_ptr_nonnull(doc);
	ck_assert_uint_eq(fread(doc, 1, (size_t)sb.st_size, fp),
	    (size_t)sb.st_size);
	fclose(fp);
}

/* The text of section @title ("## Errors") up to the next "## ". */
static char *
doc_section(const char *title)
{
	char	*start, *end, *s;
	size_t	 len = strlen(title);

	doc_load();
	for (start = doc; (start = strstr(start, title)) != NULL; start++) {
		if ((start == doc || start[-1] == '\n') && start[len] == '\n')
			break;
	}
	ck_assert_msg(start != NULL, "docs/protocol.md has no '%s'", title);
	start += len;
	end = strstr(start, "\n## ");
	if (end == NULL)
		end = start + strlen(start);
	s = strndup(start, (size_t)(end - start));
	ck_assert_ptr_nonnull(s);
	return (s);
}

/* Copy table cell @i of @line (a "| a | b |" row), without backticks. */
static int
doc_cell(const char *line, int i, char *out, size_t outlen)
{
	const char	*p = line, *e;
	size_t		 n;

	if (*p++ != '|')
		return (-1);
	for (; i > 0; i--) {
		if ((p = strchr(p, '|')) == NULL)
			return (-1);
		p++;
	}
	if ((e = strchr(p, '|')) == NULL)
		return (-1);
	while (p < e && (*p == ' ' || *p == '`'))
		p++;
	while (e > p && (e[-1] == ' ' || e[-1] == '`'))
		e--;
	n = (size_t)(e - p);
	if (n >= outlen)
		return (-1);
	memcpy(out, p, n);
	out[n] = '\0';
	return (0);
}

/* Parse the error table: the rows whose first cell is `ERROR_...`. */
static void
doc_errors_load(void)
{
	char		*sec, *line, *save = NULL;
	struct doc_error *e;

	if (doc_nerrors != 0)
		return;
	sec = doc_section("## Errors");
	for (line = strtok_r(sec, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "| `ERROR_", 9) != 0)
			continue;
		ck_assert_uint_lt(doc_nerrors, sizeof(doc_errors) /
		    sizeof(doc_errors[0]));
		e = &doc_errors[doc_nerrors++];
		ck_assert_msg(
		    doc_cell(line, 0, e->code, sizeof(e->code)) == 0 &&
		    doc_cell(line, 1, e->id, sizeof(e->id)) == 0 &&
		    doc_cell(line, 3, e->connection,
		    sizeof(e->connection)) == 0 &&
		    doc_cell(line, 4, e->session, sizeof(e->session)) == 0,
		    "malformed error row: %s", line);
	}
	free(sec);
	ck_assert_msg(doc_nerrors > 0, "no error table in docs/protocol.md");
}

/* The row of case @id in the error table. */
static const struct doc_error *
doc_error_find(const char *id)
{
	size_t	i;

	doc_errors_load();
	for (i = 0; i < doc_nerrors; i++) {
		if (strcmp(doc_errors[i].id, id) == 0)
			return (&doc_errors[i]);
	}
	ck_abort_msg("docs/protocol.md's error table has no case '%s'", id);
	return (NULL);
}

/* A decimal (@base 10) or hexadecimal (16) number that is all of @tok. */
static uint64_t
doc_u64(const char *tok, int base, const char *line)
{
	char			*end;
	unsigned long long	 v;

	errno = 0;
	v = strtoull(tok, &end, base);
	ck_assert_msg(*tok != '\0' && *tok != '-' && *end == '\0' &&
	    errno == 0, "not a number: '%s' in: %s", tok, line);
	return ((uint64_t)v);
}

/* The value of "@key=" among the tokens of an options line. */
static const char *
doc_option(char **tok, int ntok, const char *key, const char *line)
{
	size_t	len = strlen(key);
	int	i;

	for (i = 0; i < ntok; i++) {
		if (strncmp(tok[i], key, len) == 0 && tok[i][len] == '=')
			return (tok[i] + len + 1);
	}
	ck_abort_msg("no %s= in: %s", key, line);
	return (NULL);
}

/* Split @line (modified) at blanks; the count. */
static int
doc_tokens(char *line, char **tok, int max)
{
	char	*save = NULL, *t;
	int	 n = 0;

	for (t = strtok_r(line, " \t", &save); t != NULL;
	    t = strtok_r(NULL, " \t", &save)) {
		ck_assert_msg(n < max, "too many numbers on a line");
		tok[n++] = t;
	}
	return (n);
}

/* What the vectors must cover between them. */
struct doc_cover {
	int	shuffle[2], drop_last[2];
	int	replicas, accumulation, iterations, uneven_split;
	int	short_step, empty_step;
	int	table_edge, feistel;	/* N = 2^22 and N > 2^22, shuffled */
	int	elastic[2][2];		/* [shuffle][drop_last], stages= */
	int	elastic_to[9];		/* the resumed P, from 4 */
	int	elastic_chain;		/* two stages or more */
};

/* One vector's state while its lines are read. */
struct doc_vector {
	char		name[64];
	int		has_options, has_steps, has_first, has_last;
	uint64_t	epoch;
	struct sampler	s;
};

/*
 * An optional "stages=PxC:K,PxC:K...": the epoch's finished stages of an
 * elastic resume, each P processes of combined batch size C that completed
 * K global steps.
 */
static void
doc_vector_stages(struct sampler_opts *o, uint64_t epoch, char **tok, int n,
    const char *line)
{
	char	*p = NULL, *end;
	int	 i;

	for (i = 0; i < n; i++)
		if (strncmp(tok[i], "stages=", 7) == 0)
			p = tok[i] + 7;
	if (p == NULL)
		return;
	o->stages_epoch = epoch;
	while (*p != '\0') {
		struct sampler_stage	*st = &o->stages[o->nstages];

		ck_assert_msg(o->nstages < SAMPLER_MAX_STAGES, "%s", line);
		st->process_count = (uint32_t)strtoul(p, &end, 10);
		ck_assert_msg(*end == 'x', "expected stages=PxC:K,...: %s",
		    line);
		st->cbs = strtoull(end + 1, &end, 10);
		ck_assert_msg(*end == ':', "expected stages=PxC:K,...: %s",
		    line);
		st->steps_done = strtoull(end + 1, &end, 10);
		ck_assert_msg(*end == ',' || *end == '\0',
		    "expected stages=PxC:K,...: %s", line);
		o->nstages++;
		p = *end == ',' ? end + 1 : end;
	}
}

/* "options seed=.. epoch=.. N=.. B=.. DI=.. R=.. GA=.. shuffle=.. ..." */
static void
doc_vector_options(struct doc_vector *v, char **tok, int n, const char *line,
    struct doc_cover *c)
{
	struct sampler_opts	 o;
	const char		*pp;
	char			*cause = NULL, *slash;
	char			 procs[64];

	memset(&o, 0, sizeof(o));
	o.seed = doc_u64(doc_option(tok, n, "seed", line), 10, line);
	v->epoch = doc_u64(doc_option(tok, n, "epoch", line), 10, line);
	o.samples = doc_u64(doc_option(tok, n, "N", line), 10, line);
	o.batch_size = (uint32_t)doc_u64(doc_option(tok, n, "B", line), 10,
	    line);
	o.device_iterations = (uint32_t)doc_u64(doc_option(tok, n, "DI",
	    line), 10, line);
	o.replication_factor = (uint32_t)doc_u64(doc_option(tok, n, "R",
	    line), 10, line);
	o.gradient_accumulation = (uint32_t)doc_u64(doc_option(tok, n, "GA",
	    line), 10, line);
	o.shuffle = doc_u64(doc_option(tok, n, "shuffle", line), 10, line);
	o.drop_last = doc_u64(doc_option(tok, n, "drop_last", line), 10,
	    line);
	pp = doc_option(tok, n, "process", line);
	ck_assert_uint_lt(strlen(pp), sizeof(procs));
	strcpy(procs, pp);
	ck_assert_msg((slash = strchr(procs, '/')) != NULL,
	    "process=p/P expected in: %s", line);
	*slash = '\0';
	o.process_id = (uint32_t)doc_u64(procs, 10, line);
	o.process_count = (uint32_t)doc_u64(slash + 1, 10, line);
	doc_vector_stages(&o, v->epoch, tok, n, line);
	ck_assert_msg(sampler_init(&v->s, &o, &cause) == 0,
	    "vector %s: the sampler refuses it: %s", v->name, cause);
	v->has_options = 1;
	c->shuffle[o.shuffle]++;
	c->drop_last[o.drop_last]++;
	c->replicas += o.replication_factor > 1;
	c->accumulation += o.gradient_accumulation > 1;
	c->iterations += o.device_iterations > 1;
	c->uneven_split += o.process_count > 1 &&
	    o.samples % o.process_count != 0;
	c->table_edge += o.shuffle && o.samples == SAMPLER_TABLE_MAX;
	c->feistel += o.shuffle && o.samples > SAMPLER_TABLE_MAX;
	if (o.nstages > 0) {
		c->elastic[o.shuffle][o.drop_last]++;
		if (o.stages[0].process_count == 4 && o.process_count < 9)
			c->elastic_to[o.process_count]++;
		c->elastic_chain += o.nstages > 1;
	}
}

/* "step S rows R: i i i ...": rows and the first indices, in row order. */
static void
doc_vector_step(struct doc_vector *v, char **tok, int n, const char *line,
    struct doc_cover *c)
{
	uint64_t	 step, rows, got, listed, j, idx[DOC_MAX_ROWS + 1];
	uint64_t	*all;
	size_t		 len;
	int		 cut;

	ck_assert_msg(v->has_steps, "step before steps_per_epoch: %s", line);
	ck_assert_msg(n >= 4 && strcmp(tok[2], "rows") == 0 &&
	    (len = strlen(tok[3])) > 1 && tok[3][len - 1] == ':',
	    "expected 'step S rows R: indices': %s", line);
	tok[3][len - 1] = '\0';
	step = doc_u64(tok[1], 10, line);
	rows = doc_u64(tok[3], 10, line);
	ck_assert_msg(step < sampler_epoch_steps(&v->s, v->epoch), "vector "
	    "%s: step %" PRIu64 " of %" PRIu64, v->name, step,
	    sampler_epoch_steps(&v->s, v->epoch));
	ck_assert_msg(sampler_epoch_step_rows(&v->s, v->epoch, step) == rows,
	    "vector %s: step %" PRIu64 " has %" PRIu64 " rows, the document "
	    "says %" PRIu64, v->name, step, sampler_epoch_step_rows(&v->s,
	    v->epoch, step), rows);
	all = calloc(v->s.cbs, sizeof(*all));
	ck_assert_ptr_nonnull(all);
	got = sampler_step_indices(&v->s, v->epoch, step, all);
	ck_assert_uint_eq(got, rows);
	cut = n > 4 && strcmp(tok[n - 1], "...") == 0;
	listed = (uint64_t)(n - 4 - cut);
	ck_assert_msg(listed <= DOC_MAX_ROWS && listed <= rows, "vector %s: "
	    "step %" PRIu64 " lists %" PRIu64 " indices", v->name, step,
	    listed);
	ck_assert_msg(cut == (listed < rows), "vector %s: step %" PRIu64
	    ": list %" PRIu64 " of %" PRIu64 " indices, ending in '...' "
	    "exactly when cut", v->name, step, listed, rows);
	for (j = 0; j < listed; j++) {
		idx[j] = doc_u64(tok[4 + j], 10, line);
		ck_assert_msg(idx[j] == all[j], "vector %s: step %" PRIu64
		    " row %" PRIu64 " is index %" PRIu64 ", the document says "
		    "%" PRIu64, v->name, step, j, all[j], idx[j]);
	}
	free(all);
	v->has_first |= step == 0;
	v->has_last |= step == sampler_epoch_steps(&v->s, v->epoch) - 1;
	c->empty_step += rows == 0;
	c->short_step += rows > 0 && rows < v->s.cbs;
}

/* "permutation seed=S epoch=E N=N: p p p ...": a whole permutation. */
static void
doc_permutation(char **tok, int n, const char *line)
{
	uint64_t	seed, epoch, samples, perm[256], i;
	size_t		len;

	ck_assert_msg(n >= 4 && strncmp(tok[1], "seed=", 5) == 0 &&
	    strncmp(tok[2], "epoch=", 6) == 0 && strncmp(tok[3], "N=", 2) == 0
	    && (len = strlen(tok[3])) > 3 && tok[3][len - 1] == ':',
	    "expected 'permutation seed=S epoch=E N=N: ...': %s", line);
	tok[3][len - 1] = '\0';
	seed = doc_u64(tok[1] + 5, 10, line);
	epoch = doc_u64(tok[2] + 6, 10, line);
	samples = doc_u64(tok[3] + 2, 10, line);
	ck_assert_msg(samples <= 256 && (uint64_t)(n - 4) == samples,
	    "a permutation of N=%" PRIu64 " lists %d entries: %s", samples,
	    n - 4, line);
	sampler_permutation(samples, true, seed, epoch, perm);
	for (i = 0; i < samples; i++)
		ck_assert_msg(doc_u64(tok[4 + i], 10, line) == perm[i],
		    "permutation seed=%" PRIu64 " epoch=%" PRIu64 ": entry %"
		    PRIu64 " is %" PRIu64 ": %s", seed, epoch, i, perm[i],
		    line);
}

/* "feistel seed=S epoch=E N=N h=H: p p ...": perm[0 ..] above 2^22. */
static void
doc_feistel(char **tok, int n, const char *line)
{
	struct sampler_feistel	f;
	uint64_t		seed, epoch, samples, h, i;
	size_t			len;

	ck_assert_msg(n >= 6 && strncmp(tok[1], "seed=", 5) == 0 &&
	    strncmp(tok[2], "epoch=", 6) == 0 && strncmp(tok[3], "N=", 2) == 0
	    && strncmp(tok[4], "h=", 2) == 0 && (len = strlen(tok[4])) > 3 &&
	    tok[4][len - 1] == ':', "expected 'feistel seed=S epoch=E N=N "
	    "h=H: ...': %s", line);
	tok[4][len - 1] = '\0';
	seed = doc_u64(tok[1] + 5, 10, line);
	epoch = doc_u64(tok[2] + 6, 10, line);
	samples = doc_u64(tok[3] + 2, 10, line);
	h = doc_u64(tok[4] + 2, 10, line);
	ck_assert_msg(samples > SAMPLER_TABLE_MAX, "a feistel line is for N "
	    "above %" PRIu64 ": %s", (uint64_t)SAMPLER_TABLE_MAX, line);
	sampler_feistel_init(&f, samples, seed, epoch);
	ck_assert_msg(f.half_bits == h, "h is %u: %s", f.half_bits, line);
	for (i = 0; i < (uint64_t)(n - 5); i++)
		ck_assert_msg(doc_u64(tok[5 + i], 10, line) ==
		    sampler_feistel_index(&f, i), "feistel seed=%" PRIu64
		    " epoch=%" PRIu64 ": perm[%" PRIu64 "] is %" PRIu64 ": %s",
		    seed, epoch, i, sampler_feistel_index(&f, i), line);
}

/* "stream seed=S epoch=E: key=0xK 0xW1 0xW2 0xW3": the generator. */
static void
doc_stream(char **tok, int n, const char *line)
{
	uint64_t	seed, epoch, key;
	size_t		len;
	int		i;

	ck_assert_msg(n == 7 && strncmp(tok[1], "seed=", 5) == 0 &&
	    strncmp(tok[2], "epoch=", 6) == 0 && (len = strlen(tok[2])) > 7 &&
	    tok[2][len - 1] == ':' && strncmp(tok[3], "key=0x", 6) == 0,
	    "expected 'stream seed=S epoch=E: key=0x.. 0x.. 0x.. 0x..': %s",
	    line);
	tok[2][len - 1] = '\0';
	seed = doc_u64(tok[1] + 5, 10, line);
	epoch = doc_u64(tok[2] + 6, 10, line);
	key = splitmix64_mix(seed ^ splitmix64_mix(epoch ^ DOC_SALT));
	ck_assert_msg(doc_u64(tok[3] + 6, 16, line) == key,
	    "stream key is 0x%016" PRIx64 ": %s", key, line);
	for (i = 1; i <= 3; i++) {
		ck_assert_msg(strncmp(tok[3 + i], "0x", 2) == 0, "%s", line);
		ck_assert_msg(doc_u64(tok[3 + i] + 2, 16, line) ==
		    splitmix64_mix(key + (uint64_t)i * SPLITMIX64_GAMMA),
		    "stream word %d: %s", i, line);
	}
}

/* Every vector, permutation and stream of the sample-vectors block. */
START_TEST(test_doc_vectors)
{
	struct doc_vector	 v;
	struct doc_cover	 c;
	char			*start, *end, *block, *line, *save = NULL;
	char			*copy, *tok[DOC_MAX_ROWS + 8];
	int			 n, nvec = 0, nperm = 0, nstream = 0;
	int			 nfeistel = 0;
	int			 open = 0;

	doc_load();
	memset(&c, 0, sizeof(c));
	memset(&v, 0, sizeof(v));
	start = strstr(doc, "\n```sample-vectors\n");
	ck_assert_msg(start != NULL, "docs/protocol.md has no "
	    "```sample-vectors block");
	start += strlen("\n```sample-vectors\n");
	end = strstr(start, "\n```");
	ck_assert_ptr_nonnull(end);
	block = strndup(start, (size_t)(end - start));
	for (line = strtok_r(block, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		copy = strdup(line);
		n = doc_tokens(copy, tok, DOC_MAX_ROWS + 8);
		if (n == 0) {
			free(copy);
			continue;
		}
		if (strcmp(tok[0], "vector") == 0) {
			ck_assert_msg(!open && n == 2, "vector inside a "
			    "vector, or no name: %s", line);
			memset(&v, 0, sizeof(v));
			snprintf(v.name, sizeof(v.name), "%s", tok[1]);
			open = 1;
		} else if (strcmp(tok[0], "options") == 0) {
			ck_assert_msg(open && !v.has_options, "%s", line);
			doc_vector_options(&v, tok, n, line, &c);
		} else if (strcmp(tok[0], "steps_per_epoch") == 0) {
			ck_assert_msg(open && v.has_options && n == 2, "%s",
			    line);
			ck_assert_msg(doc_u64(tok[1], 10, line) ==
			    sampler_epoch_steps(&v.s, v.epoch), "vector %s: %"
			    PRIu64 " steps in the epoch, the document says %s",
			    v.name, sampler_epoch_steps(&v.s, v.epoch), tok[1]);
			v.has_steps = 1;
		} else if (strcmp(tok[0], "step") == 0) {
			ck_assert_msg(open, "%s", line);
			doc_vector_step(&v, tok, n, line, &c);
		} else if (strcmp(tok[0], "end") == 0) {
			ck_assert_msg(open && v.has_first && v.has_last,
			    "vector %s must list step 0 and its last step",
			    v.name);
			sampler_clear(&v.s);
			open = 0;
			nvec++;
		} else if (strcmp(tok[0], "permutation") == 0) {
			ck_assert_msg(!open, "%s", line);
			doc_permutation(tok, n, line);
			nperm++;
		} else if (strcmp(tok[0], "feistel") == 0) {
			ck_assert_msg(!open, "%s", line);
			doc_feistel(tok, n, line);
			nfeistel++;
		} else if (strcmp(tok[0], "stream") == 0) {
			ck_assert_msg(!open, "%s", line);
			doc_stream(tok, n, line);
			nstream++;
		} else
			ck_abort_msg("unknown line in sample-vectors: %s",
			    line);
		free(copy);
	}
	free(block);
	ck_assert_msg(!open, "vector %s has no 'end'", v.name);
	ck_assert_msg(nvec >= DOC_MIN_VECTORS, "%d vectors; expected at least "
	    "%d", nvec, DOC_MIN_VECTORS);
	ck_assert_msg(nperm > 0 && nstream > 0 && nfeistel > 0, "no "
	    "permutation, feistel or stream lines");
	ck_assert_msg(c.shuffle[0] && c.shuffle[1] && c.drop_last[0] &&
	    c.drop_last[1], "vectors must cover shuffle and drop_last on and "
	    "off");
	ck_assert_msg(c.replicas && c.accumulation && c.iterations,
	    "vectors must cover R > 1, GA > 1 and DI > 1");
	ck_assert_msg(c.uneven_split, "vectors must cover a distributed split "
	    "of N not divisible by P");
	ck_assert_msg(c.short_step && c.empty_step, "vectors must cover a "
	    "short and an empty step");
	ck_assert_msg(c.table_edge && c.feistel, "vectors must cover a "
	    "shuffle of N = 2^22 (the last table) and of N > 2^22 (Feistel)");
	ck_assert_msg(c.elastic[0][0] && c.elastic[0][1] && c.elastic[1][0] &&
	    c.elastic[1][1] && c.elastic_to[2] && c.elastic_to[3] &&
	    c.elastic_to[8] && c.elastic_chain, "elastic vectors must cover "
	    "4 processes resumed as 2, 3 and 8, shuffle and drop_last on and "
	    "off, and two changes in one epoch");
}
END_TEST

/* Each ErrorCode has a row; each row names a real code and a known case. */
START_TEST(test_doc_error_table)
{
	const ProtobufCEnumDescriptor	*ed;
	const struct doc_error		*e;
	size_t				 i, j, k;
	int				 found;

	ed = &infeed__error_code__descriptor;
	doc_errors_load();
	for (i = 0; i < ed->n_values; i++) {
		for (j = 0, found = 0; j < doc_nerrors; j++)
			found |= strcmp(doc_errors[j].code,
			    ed->values[i].name) == 0;
		ck_assert_msg(found, "%s has no row in docs/protocol.md's "
		    "error table", ed->values[i].name);
	}
	for (j = 0; j < doc_nerrors; j++) {
		e = &doc_errors[j];
		ck_assert_msg(protobuf_c_enum_descriptor_get_value_by_name(ed,
		    e->code) != NULL, "the error table names %s, which "
		    "infeed.proto's ErrorCode does not have", e->code);
		ck_assert_msg(strcmp(e->connection, "open") == 0 ||
		    strcmp(e->connection, "closed") == 0 ||
		    strcmp(e->connection, "-") == 0, "case %s: connection "
		    "after is '%s'; expected open, closed or -", e->id,
		    e->connection);
		ck_assert_msg(strcmp(e->session, "none") == 0 ||
		    strcmp(e->session, "kept") == 0 ||
		    strcmp(e->session, "ended") == 0 ||
		    strcmp(e->session, "failed") == 0 ||
		    strcmp(e->session, "gone") == 0 ||
		    strcmp(e->session, "-") == 0, "case %s: session after is "
		    "'%s'", e->id, e->session);
		for (k = 0; k < j; k++)
			ck_assert_msg(strcmp(doc_errors[k].id, e->id) != 0,
			    "case %s twice in the error table", e->id);
		for (k = 0, found = 0; k < sizeof(cases) / sizeof(cases[0]);
		    k++)
			found |= strcmp(cases[k].id, e->id) == 0;
		ck_assert_msg(found, "case %s of the error table has no test "
		    "in tests/proto/test-protocol.c", e->id);
	}
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		(void)doc_error_find(cases[k].id);
}
END_TEST

/* The limits table quotes common/infeed-limits.h exactly. */
START_TEST(test_doc_limits)
{
	static const struct {
		const char	*name;
		long long	 value;
	} limits[] = {
		{ "INFEED_MAX_DIMS", INFEED_MAX_DIMS },
		{ "INFEED_MAX_CHANNELS", INFEED_MAX_CHANNELS },
		{ "INFEED_MAX_SLOTS", INFEED_MAX_SLOTS },
		{ "INFEED_MAX_CLIENT_NAME", INFEED_MAX_CLIENT_NAME },
		{ "INFEED_MAX_DATASET_NAME", INFEED_MAX_DATASET_NAME },
		{ "INFEED_DEFAULT_MAX_FRAME", INFEED_DEFAULT_MAX_FRAME },
		{ "INFEED_MIN_MAX_FRAME", INFEED_MIN_MAX_FRAME },
		{ "INFEED_MAX_MAX_FRAME", INFEED_MAX_MAX_FRAME },
		{ "INFEED_MAX_ELASTIC_STAGES", INFEED_MAX_ELASTIC_STAGES },
		{ "INFEED_MAX_WORKERS", INFEED_MAX_WORKERS },
		{ "INFEED_MAX_CLIENTS", INFEED_MAX_CLIENTS },
		{ "INFEED_MAX_IMAGE_BYTES", INFEED_MAX_IMAGE_BYTES },
		{ "INFEED_ATTACH_CHECK_S", INFEED_ATTACH_CHECK_S },
		{ "INFEED_MAX_ATTACH_CHECKS", INFEED_MAX_ATTACH_CHECKS },
		{ "INFEED_MAX_ATTACH_QUEUE", INFEED_MAX_ATTACH_QUEUE },
		{ "INFEED_MAX_STUCK_CHECKS", INFEED_MAX_STUCK_CHECKS },
		{ "INFEED_MAX_ATTACH_THREADS", INFEED_MAX_ATTACH_THREADS },
		{ "INFEED_GROUP_SLACK_MS", INFEED_GROUP_SLACK_MS },
		{ "INFEED_MAX_GROUP_SLOTS", INFEED_MAX_GROUP_SLOTS },
	};
	char		*sec, *line, *save = NULL, name[64], value[64];
	size_t		 i;
	unsigned	 seen = 0;
	int		 found;

	sec = doc_section("## Limits");
	for (line = strtok_r(sec, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "| `INFEED_", 10) != 0)
			continue;
		ck_assert_msg(doc_cell(line, 0, name, sizeof(name)) == 0 &&
		    doc_cell(line, 1, value, sizeof(value)) == 0,
		    "malformed limit row: %s", line);
		for (i = 0, found = 0; i < sizeof(limits) / sizeof(limits[0]);
		    i++) {
			if (strcmp(limits[i].name, name) != 0)
				continue;
			found = 1;
			seen |= 1U << i;
			ck_assert_msg(doc_u64(value, 10, line) ==
			    (uint64_t)limits[i].value, "%s is %lld in "
			    "infeed-limits.h, the document says %s", name,
			    limits[i].value, value);
		}
		ck_assert_msg(found, "the limits table names %s, which this "
		    "test does not know; add it here", name);
	}
	free(sec);
	for (i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		ck_assert_msg(seen & (1U << i), "docs/protocol.md does not "
		    "quote %s", limits[i].name);
}
END_TEST

/*
 * Option @name has a row in "## Loader options" whose default is @def,
 * options-schema.h's ("true" for true, DTYPE_INT32 for INFEED_DTYPE_INT32).
 */
static void
doc_option_row(const char *name, const char *def)
{
	char		*sec, *line, *save = NULL, cell[64], *got;
	bool		 found = false;

	if (strncmp(def, "INFEED_", 7) == 0)
		def += 7;
	sec = doc_section("## Loader options");
	for (line = strtok_r(sec, "\n", &save); line != NULL && !found;
	    line = strtok_r(NULL, "\n", &save)) {
		if (doc_cell(line, 0, cell, sizeof(cell)) == -1 ||
		    strcmp(cell, name) != 0)
			continue;
		found = true;
		ck_assert_msg(doc_cell(line, 1, cell, sizeof(cell)) == 0,
		    "malformed option row: %s", line);
		got = cell;
		if (strncmp(got, "**", 2) == 0 && strlen(got) > 4) {
			got += 2;
			got[strlen(got) - 2] = '\0';
		}
		ck_assert_msg(strcmp(got, def) == 0, "docs/protocol.md gives "
		    "%s the default %s; options-schema.h, %s", name, got, def);
	}
	free(sec);
	ck_assert_msg(found, "docs/protocol.md's loader options have no row "
	    "for %s", name);
}

/* Every option of options-schema.h, with its default. */
START_TEST(test_doc_options)
{
#define DOC_OPTION(name, field, type, def, ...)				\
	doc_option_row(#name, #def);
	INFEED_LOADER_OPTIONS(DOC_OPTION)
#undef DOC_OPTION
}
END_TEST

/* Requests packed one after another, to be sent in one write. */
struct reqbuf {
	uint8_t	*buf;
	size_t	 len;
};

/* Append request @c (its message @msg) with @id, or none when @id is 0. */
static void
req_add(struct reqbuf *b, Infeed__Frame__MsgCase c, void *msg, uint64_t id)
{
	Infeed__Frame	 f = INFEED__FRAME__INIT;
	uint8_t		*one;
	size_t		 len;

	f.msg_case = c;
	f.hello = msg;		/* the oneof's members share one place */
	if (id != 0) {
		f.has_request_id = 1;
		f.request_id = id;
	}
	one = wire_pack(&f, INFEED_DEFAULT_MAX_FRAME, &len);
	ck_assert_ptr_nonnull(one);
	b->buf = realloc(b->buf, b->len + len);
	ck_assert_ptr_nonnull(b->buf);
	memcpy(b->buf + b->len, one, len);
	b->len += len;
	free(one);
}

/* Send what was packed in one write. */
static void
req_flush(int fd, struct reqbuf *b)
{
	ck_assert_int_eq(wire_send_all(fd, b->buf, b->len, -1), 0);
	free(b->buf);
	b->buf = NULL;
	b->len = 0;
}

/* Send one request. */
static void
req(int fd, Infeed__Frame__MsgCase c, void *msg, uint64_t id)
{
	struct reqbuf	b = { NULL, 0 };

	req_add(&b, c, msg, id);
	req_flush(fd, &b);
}

/* Read one frame within @ms, or NULL at end of stream. */
static Infeed__Frame *
recv_ms(int fd, struct wire_in *in, int ms)
{
	Infeed__Frame	*f;
	struct pollfd	 pfd = { fd, POLLIN, 0 };
	char		*cause = NULL;

	for (;;) {
		if (wire_in_frame(in, &f, &cause) == WIRE_OK)
			return (f);
		ck_assert_msg(poll(&pfd, 1, ms) == 1, "no reply in %d ms", ms);
		if (wire_in_recv(in, fd) <= 0)
			return (NULL);
	}
}

/* Read one frame and check that it is a @c. */
static Infeed__Frame *
recv_case(int fd, struct wire_in *in, Infeed__Frame__MsgCase c)
{
	Infeed__Frame	*r = recv_ms(fd, in, RECV_MS);

	ck_assert_msg(r != NULL, "connection closed; expected %s",
	    wire_case_name(c));
	ck_assert_msg(r->msg_case == c, "got %s (%s); expected %s",
	    wire_case_name(r->msg_case), r->msg_case ==
	    INFEED__FRAME__MSG_ERROR ? r->error->message : "",
	    wire_case_name(c));
	return (r);
}

/* A raw connection past Hello. */
static int
conn(struct wire_in *in)
{
	int	fd = raw_connect();

	wire_in_init(in, INFEED_DEFAULT_MAX_FRAME);
	raw_hello(fd, in, WIRE_PROTOCOL_VERSION);
	return (fd);
}

/* Attach to @dataset with batch_size @b and buffer_size @slots. */
static void
attach(int fd, struct wire_in *in, const char *dataset, uint32_t b,
    uint32_t slots)
{
	Infeed__Attach		a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	o = INFEED__LOADER_OPTIONS__INIT;

	o.has_batch_size = 1;
	o.batch_size = b;
	o.has_buffer_size = 1;
	o.buffer_size = slots;
	a.dataset = (char *)dataset;
	a.options = &o;
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	infeed__frame__free_unpacked(recv_case(fd, in,
	    INFEED__FRAME__MSG_ATTACHED), NULL);
}

/* Send a request with no fields. */
static void
req_empty(int fd, Infeed__Frame__MsgCase c, uint64_t id)
{
	/* Every empty message packs alike. */
	Infeed__Next	n = INFEED__NEXT__INIT;

	req(fd, c, &n, id);
}

/* Next, and the slot of the Step that answers it. */
static uint32_t
next_step(int fd, struct wire_in *in)
{
	Infeed__Frame	*r;
	uint32_t	 slot;

	req_empty(fd, INFEED__FRAME__MSG_NEXT, 0);
	r = recv_case(fd, in, INFEED__FRAME__MSG_STEP);
	slot = r->step->slot;
	infeed__frame__free_unpacked(r, NULL);
	return (slot);
}

/* Release @slot and read Released. */
static void
release(int fd, struct wire_in *in, uint32_t slot)
{
	Infeed__Release	rl = INFEED__RELEASE__INIT;

	rl.slot = slot;
	req(fd, INFEED__FRAME__MSG_RELEASE, &rl, 0);
	infeed__frame__free_unpacked(recv_case(fd, in,
	    INFEED__FRAME__MSG_RELEASED), NULL);
}

/*
 * @r must be the Error the table gives for case @id, and the connection
 * must be in the state its "connection after" column says.  Frees @r and,
 * when the connection is closed, the socket.
 */
static void
expect_case(const char *id, Infeed__Frame *r, int fd, struct wire_in *in)
{
	const ProtobufCEnumDescriptor	*ed;
	const ProtobufCEnumValue	*ev;
	const struct doc_error		*e = doc_error_find(id);
	struct reqbuf			 b = { NULL, 0 };
	int				 sent;

	ed = &infeed__error_code__descriptor;
	ck_assert_msg(r != NULL, "case %s: the connection closed without an "
	    "Error", id);
	ck_assert_msg(r->msg_case == INFEED__FRAME__MSG_ERROR, "case %s: got "
	    "%s, expected Error %s", id, wire_case_name(r->msg_case),
	    e->code);
	ev = protobuf_c_enum_descriptor_get_value(ed, (int)r->error->code);
	ck_assert_msg(ev != NULL && strcmp(ev->name, e->code) == 0,
	    "case %s: the daemon sent %s (%s); docs/protocol.md says %s", id,
	    ev ? ev->name : "an unknown code", r->error->message, e->code);
	ck_assert_msg(strlen(r->error->message) > 0, "case %s: no message",
	    id);
	infeed__frame__free_unpacked(r, NULL);
	if (strcmp(e->connection, "closed") == 0) {
		ck_assert_msg(raw_closed(fd), "case %s: the connection should "
		    "be closed after the Error", id);
		close(fd);
		wire_in_clear(in);
		return;
	}
	ck_assert_msg(strcmp(e->connection, "open") == 0, "case %s: the "
	    "table says the daemon never sends it", id);
	req_add(&b, INFEED__FRAME__MSG_LIST_DATASETS,
	    &(Infeed__ListDatasets)INFEED__LIST_DATASETS__INIT, 0);
	sent = wire_send_all(fd, b.buf, b.len, -1);
	free(b.buf);
	ck_assert_msg(sent == 0 && (r = recv_ms(fd, in, RECV_MS)) != NULL,
	    "case %s: the connection closed; docs/protocol.md says it stays "
	    "open", id);
	ck_assert_msg(r->msg_case == INFEED__FRAME__MSG_DATASET_LIST,
	    "case %s: ListDatasets after it got %s", id,
	    wire_case_name(r->msg_case));
	infeed__frame__free_unpacked(r, NULL);
}

/*
 * A raw connection past Hello when the daemon has just started: until it
 * has seen infeedd_start()'s probe hang up, that may count as a client.
 */
static int
conn_first(struct wire_in *in)
{
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	Infeed__Frame	*r;
	int		 fd, i;

	h.protocol_version = WIRE_PROTOCOL_VERSION;
	for (i = 0; i < 100; i++) {
		fd = raw_connect();
		wire_in_init(in, INFEED_DEFAULT_MAX_FRAME);
		req(fd, INFEED__FRAME__MSG_HELLO, &h, 0);
		r = recv_ms(fd, in, RECV_MS);
		if (r != NULL && r->msg_case == INFEED__FRAME__MSG_WELCOME) {
			infeed__frame__free_unpacked(r, NULL);
			return (fd);
		}
		if (r != NULL)
			infeed__frame__free_unpacked(r, NULL);
		close(fd);
		wire_in_clear(in);
		usleep(10000);
	}
	ck_abort_msg("no Welcome from a fresh daemon");
	return (-1);
}

/* Close a connection that stayed open. */
static void
conn_close(int fd, struct wire_in *in)
{
	close(fd);
	wire_in_clear(in);
}

/* Restart the daemon with @extra in the [infeedd] section. */
static void
restart_with(const char *extra)
{
	infeedd_stop();
	make_config(extra);
	infeedd_start(NULL);
}

START_TEST(test_version_mismatch)
{
	Infeed__Hello	h = INFEED__HELLO__INIT;
	struct wire_in	in;
	int		fd = raw_connect();

	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	h.protocol_version = WIRE_PROTOCOL_VERSION + 1;
	req(fd, INFEED__FRAME__MSG_HELLO, &h, 0);
	expect_case("version-mismatch", recv_ms(fd, &in, RECV_MS), fd, &in);
}
END_TEST

START_TEST(test_bad_frame)
{
	static const uint8_t	 huge[4] = { 0xff, 0xff, 0xff, 0x7f };
	static const uint8_t	 junk[7] = { 3, 0, 0, 0, 0xff, 0xff, 0xff };
	static const uint8_t	 empty[4] = { 0, 0, 0, 0 };
	struct wire_in		 in;
	struct reqbuf		 b = { NULL, 0 };
	int			 fd;

	fd = conn(&in);
	ck_assert_int_eq(write(fd, huge, sizeof(huge)), (ssize_t)sizeof(huge));
	expect_case("bad-frame-length", recv_ms(fd, &in, RECV_MS), fd, &in);

	fd = conn(&in);
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	expect_case("bad-frame-body", recv_ms(fd, &in, RECV_MS), fd, &in);

	fd = conn(&in);
	ck_assert_int_eq(write(fd, empty, sizeof(empty)),
	    (ssize_t)sizeof(empty));
	expect_case("bad-frame-body", recv_ms(fd, &in, RECV_MS), fd, &in);

	/* A descriptor with a good frame. */
	fd = conn(&in);
	req_add(&b, INFEED__FRAME__MSG_LIST_DATASETS,
	    &(Infeed__ListDatasets)INFEED__LIST_DATASETS__INIT, 0);
	ck_assert_int_eq(wire_send_all(fd, b.buf, b.len, 0), 0);
	free(b.buf);
	expect_case("bad-frame-fds", recv_ms(fd, &in, RECV_MS), fd, &in);
}
END_TEST

START_TEST(test_unexpected_closing)
{
	Infeed__Welcome	w = INFEED__WELCOME__INIT;
	struct wire_in	in;
	int		fd = raw_connect();

	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	req_empty(fd, INFEED__FRAME__MSG_LIST_DATASETS, 0);
	expect_case("unexpected-before-hello", recv_ms(fd, &in, RECV_MS), fd,
	    &in);

	fd = conn(&in);
	w.protocol_version = WIRE_PROTOCOL_VERSION;
	req(fd, INFEED__FRAME__MSG_WELCOME, &w, 0);
	expect_case("unexpected-reply", recv_ms(fd, &in, RECV_MS), fd, &in);
}
END_TEST

START_TEST(test_unexpected_open)
{
	Infeed__Attach	a = INFEED__ATTACH__INIT;
	struct reqbuf	b = { NULL, 0 };
	struct wire_in	in;
	Infeed__Frame	*r;
	uint32_t	 slot;
	int		 fd = conn(&in);

	req_empty(fd, INFEED__FRAME__MSG_NEXT, 0);
	expect_case("unexpected-no-session", recv_ms(fd, &in, RECV_MS), fd,
	    &in);
	req_empty(fd, INFEED__FRAME__MSG_DETACH, 0);
	expect_case("unexpected-no-session", recv_ms(fd, &in, RECV_MS), fd,
	    &in);

	/* One slot: a second Next while it is held. */
	attach(fd, &in, "raw", 10, 1);
	slot = next_step(fd, &in);
	req_empty(fd, INFEED__FRAME__MSG_NEXT, 0);
	expect_case("unexpected-all-held", recv_ms(fd, &in, RECV_MS), fd,
	    &in);
	release(fd, &in, slot);
	release(fd, &in, next_step(fd, &in));	/* the session was kept */

	a.dataset = (char *)"raw";
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	expect_case("unexpected-attached", recv_ms(fd, &in, RECV_MS), fd,
	    &in);
	release(fd, &in, next_step(fd, &in));

	/*
	 * A Next still waiting when Detach comes is answered before Detached.
	 * A fresh session has nothing filled before its first Next, and the
	 * workers cannot fill it before the Detach behind it is read.
	 */
	req_empty(fd, INFEED__FRAME__MSG_DETACH, 0);
	infeed__frame__free_unpacked(recv_case(fd, &in,
	    INFEED__FRAME__MSG_DETACHED), NULL);
	attach(fd, &in, "raw", 10, 1);
	req_add(&b, INFEED__FRAME__MSG_NEXT,
	    &(Infeed__Next)INFEED__NEXT__INIT, 0);
	req_add(&b, INFEED__FRAME__MSG_DETACH,
	    &(Infeed__Detach)INFEED__DETACH__INIT, 0);
	req_flush(fd, &b);
	r = recv_ms(fd, &in, RECV_MS);
	ck_assert_ptr_nonnull(r);
	if (r->msg_case == INFEED__FRAME__MSG_STEP) {
		/* The step was filled in time; nothing waited. */
		infeed__frame__free_unpacked(r, NULL);
		infeed__frame__free_unpacked(recv_case(fd, &in,
		    INFEED__FRAME__MSG_DETACHED), NULL);
		ck_abort_msg("the Next did not wait; cannot test the case");
	}
	infeed__frame__free_unpacked(recv_case(fd, &in,
	    INFEED__FRAME__MSG_DETACHED), NULL);
	expect_case("unexpected-detached-waiting", r, fd, &in);
	/* The session ended. */
	req_empty(fd, INFEED__FRAME__MSG_NEXT, 0);
	expect_case("unexpected-no-session", recv_ms(fd, &in, RECV_MS), fd,
	    &in);
	conn_close(fd, &in);
}
END_TEST

/* Hello twice, an overlong dataset name, too many waiting Next requests. */
START_TEST(test_unexpected_more)
{
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	Infeed__Attach	 a = INFEED__ATTACH__INIT;
	struct reqbuf	 b = { NULL, 0 };
	struct wire_in	 in;
	Infeed__Frame	*r, *last = NULL;
	char		 name[INFEED_MAX_DATASET_NAME + 2];
	int		 fd = conn(&in), i, steps = 0, refused = 0;

	h.protocol_version = WIRE_PROTOCOL_VERSION;
	req(fd, INFEED__FRAME__MSG_HELLO, &h, 0);
	expect_case("unexpected-hello-twice", recv_ms(fd, &in, RECV_MS), fd,
	    &in);

	memset(name, 'r', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	a.dataset = name;
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	expect_case("invalid-dataset-name", recv_ms(fd, &in, RECV_MS), fd,
	    &in);

	/*
	 * Two slots, and INFEED_MAX_SLOTS + 2 Next requests in one write: the
	 * daemon reads them all before any step can be filled (a row takes
	 * 10 ms), so 64 wait and the last two are refused; then the two slots
	 * are delivered.
	 */
	conn_close(fd, &in);
	restart_with("\n[dataset slow]\ntype = synthetic\nsamples = 100\n"
	    "shape = 4\nsample_delay_us = 10000\n");
	fd = conn(&in);
	attach(fd, &in, "slow", 10, 2);
	for (i = 0; i < INFEED_MAX_SLOTS + 2; i++)
		req_add(&b, INFEED__FRAME__MSG_NEXT,
		    &(Infeed__Next)INFEED__NEXT__INIT, 0);
	req_flush(fd, &b);
	for (i = 0; i < 4; i++) {
		ck_assert_ptr_nonnull(r = recv_ms(fd, &in, RECV_MS));
		if (r->msg_case == INFEED__FRAME__MSG_STEP) {
			steps++;
			infeed__frame__free_unpacked(r, NULL);
			continue;
		}
		ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_ERROR);
		ck_assert_msg(strstr(r->error->message, "already wait") !=
		    NULL, "%s", r->error->message);
		if (++refused == 1)
			infeed__frame__free_unpacked(r, NULL);
		else
			last = r;
	}
	ck_assert_ptr_nonnull(last);
	expect_case("unexpected-too-many-waiting", last, fd, &in);
	ck_assert_int_eq(steps, 2);
	ck_assert_int_eq(refused, 2);
	conn_close(fd, &in);
}
END_TEST

START_TEST(test_invalid_argument)
{
	static const int	bad_label_dtypes[] = { 0, 5, 1000 };
	Infeed__Attach		a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	o = INFEED__LOADER_OPTIONS__INIT;
	Infeed__Release		rl = INFEED__RELEASE__INIT;
	Infeed__Frame		*r;
	struct wire_in		in;
	int			fd = conn(&in), i;

	o.has_batch_size = 1;
	o.batch_size = 0;
	a.dataset = (char *)"raw";
	a.options = &o;
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	expect_case("invalid-option", recv_ms(fd, &in, RECV_MS), fd, &in);
	o.batch_size = 1;
	o.has_buffer_size = 1;
	o.buffer_size = INFEED_MAX_SLOTS + 1;
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	expect_case("invalid-option", recv_ms(fd, &in, RECV_MS), fd, &in);
	/* A label_dtype but INT32 or INT64: unset, FLOAT32, no DType. */
	o.buffer_size = 3;
	o.has_label_dtype = 1;
	for (i = 0; i < 3; i++) {
		o.label_dtype = (Infeed__DType)bad_label_dtypes[i];
		req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
		r = recv_ms(fd, &in, RECV_MS);
		ck_assert_msg(r != NULL && r->msg_case ==
		    INFEED__FRAME__MSG_ERROR && strstr(r->error->message,
		    "label_dtype is ") != NULL && strstr(r->error->message,
		    "expected DTYPE_INT32") != NULL, "label_dtype %d: %s",
		    (int)o.label_dtype, r != NULL && r->msg_case ==
		    INFEED__FRAME__MSG_ERROR ? r->error->message : "no Error");
		expect_case("invalid-option", r, fd, &in);
	}
	o.has_label_dtype = 0;

	attach(fd, &in, "raw", 10, 2);
	rl.slot = 1;
	req(fd, INFEED__FRAME__MSG_RELEASE, &rl, 0);
	expect_case("invalid-release", recv_ms(fd, &in, RECV_MS), fd, &in);
	release(fd, &in, next_step(fd, &in));	/* the session was kept */
	conn_close(fd, &in);
}
END_TEST

/* Attach with files: a Files message and @nfds descriptors with it. */
static void
attach_files(int fd, const Infeed__Files *fl, const int *fds, size_t nfds)
{
	Infeed__Attach	a = INFEED__ATTACH__INIT;
	struct reqbuf	b = { NULL, 0 };

	a.dataset = (char *)"mine";
	a.files = (Infeed__Files *)(uintptr_t)fl;
	req_add(&b, INFEED__FRAME__MSG_ATTACH, &a, 0);
	ck_assert_int_eq(wire_send_all_fds(fd, b.buf, b.len, fds, nfds), 0);
	free(b.buf);
}

/* Attach with files the daemon refuses: bad descriptors, bad content. */
START_TEST(test_files)
{
	static const char	 junk[] = "not a numpy file at all";
	Infeed__Files		 fl = INFEED__FILES__INIT;
	struct wire_in		 in;
	char			 path[400];
	int			 fd = conn(&in), dfd, p[2];

	/* A pipe is no regular file. */
	fl.has_data_format = 1;
	fl.data_format = INFEED__FILE_FORMAT__FILE_FORMAT_NPY;
	ck_assert_int_eq(pipe(p), 0);
	attach_files(fd, &fl, p, 1);
	expect_case("invalid-files", recv_ms(fd, &in, RECV_MS), fd, &in);
	/* Labels promised, no descriptor for them. */
	fl.has_labels_format = 1;
	fl.labels_format = INFEED__FILE_FORMAT__FILE_FORMAT_NPY;
	attach_files(fd, &fl, p, 1);
	expect_case("invalid-files", recv_ms(fd, &in, RECV_MS), fd, &in);
	close(p[0]);
	close(p[1]);

	/* A regular file that is no .npy. */
	snprintf(path, sizeof(path), "%s/junk.npy", dir);
	write_file(path, junk, sizeof(junk));
	ck_assert_int_ne(dfd = open(path, O_RDONLY), -1);
	fl.has_labels_format = 0;
	attach_files(fd, &fl, &dfd, 1);
	expect_case("data-files", recv_ms(fd, &in, RECV_MS), fd, &in);
	close(dfd);
	conn_close(fd, &in);
}
END_TEST

START_TEST(test_not_found_dataset)
{
	Infeed__Attach	a = INFEED__ATTACH__INIT;
	struct wire_in	in;
	int		fd = conn(&in);

	a.dataset = (char *)"no-such-dataset";
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	expect_case("not-found-dataset", recv_ms(fd, &in, RECV_MS), fd, &in);
	/* In the configuration, but it did not open. */
	a.dataset = (char *)"broken";
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	expect_case("not-found-dataset", recv_ms(fd, &in, RECV_MS), fd, &in);
	conn_close(fd, &in);
}
END_TEST

/* True when ListDatasets lists @name. */
static int
listed(int fd, struct wire_in *in, const char *name)
{
	Infeed__Frame	*r;
	size_t		 i;
	int		 found = 0;

	req_empty(fd, INFEED__FRAME__MSG_LIST_DATASETS, 0);
	r = recv_case(fd, in, INFEED__FRAME__MSG_DATASET_LIST);
	for (i = 0; i < r->dataset_list->n_datasets; i++)
		found |= strcmp(r->dataset_list->datasets[i]->name, name) == 0;
	infeed__frame__free_unpacked(r, NULL);
	return (found);
}

START_TEST(test_not_found_reloaded)
{
	Infeed__Release	rl = INFEED__RELEASE__INIT;
	struct wire_in	in;
	int		fd, i;

	restart_with("\n[dataset gone]\ntype = synthetic\nsamples = 100\n"
	    "shape = 4\n");
	fd = conn(&in);
	attach(fd, &in, "gone", 10, 2);
	release(fd, &in, next_step(fd, &in));
	make_config(NULL);
	kill(infeedd_pid, SIGHUP);
	for (i = 0; i < 300 && listed(fd, &in, "gone"); i++)
		usleep(10000);
	ck_assert_msg(!listed(fd, &in, "gone"), "the reload did not happen");
	req_empty(fd, INFEED__FRAME__MSG_NEXT, 0);
	expect_case("not-found-reloaded", recv_ms(fd, &in, RECV_MS), fd, &in);
	rl.slot = 0;
	req(fd, INFEED__FRAME__MSG_RELEASE, &rl, 0);
	expect_case("not-found-reloaded", recv_ms(fd, &in, RECV_MS), fd, &in);
	req_empty(fd, INFEED__FRAME__MSG_DETACH, 0);
	expect_case("not-found-reloaded", recv_ms(fd, &in, RECV_MS), fd, &in);
	attach(fd, &in, "raw", 10, 2);		/* and attach again */
	release(fd, &in, next_step(fd, &in));
	conn_close(fd, &in);
}
END_TEST

START_TEST(test_memory_budget)
{
	struct wire_in	in;
	Infeed__Attach	a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions o = INFEED__LOADER_OPTIONS__INIT;
	int		fd;

	/* synthetic: 256 B a sample; 500 rows x 64 slots is about 9 MiB. */
	restart_with("memory_budget = 1M");
	fd = conn(&in);
	o.has_batch_size = o.has_buffer_size = 1;
	o.batch_size = 500;
	o.buffer_size = 64;
	a.dataset = (char *)"synthetic";
	a.options = &o;
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	expect_case("memory-budget", recv_ms(fd, &in, RECV_MS), fd, &in);
	conn_close(fd, &in);
}
END_TEST

START_TEST(test_reply_too_large)
{
	struct infeed	*f[40];
	struct wire_in	 in;
	char		 name[INFEED_MAX_CLIENT_NAME + 1];
	int		 fd, i;

	/* 40 sessions with long client names: Stats takes over 4 KiB. */
	restart_with("max_frame_size = 4K");
	memset(name, 'n', INFEED_MAX_CLIENT_NAME);
	name[INFEED_MAX_CLIENT_NAME] = '\0';
	for (i = 0; i < 40; i++) {
		ck_assert_ptr_nonnull(f[i] = infeed_new());
		ck_assert_int_eq(infeed_connect(f[i], sock_path, name),
		    INFEED_OK);
		ck_assert_int_eq(infeed_attach(f[i], "raw", NULL, NULL),
		    INFEED_OK);
	}
	fd = conn(&in);
	req_empty(fd, INFEED__FRAME__MSG_GET_STATS, 0);
	expect_case("reply-too-large", recv_ms(fd, &in, RECV_MS), fd, &in);
	conn_close(fd, &in);
	for (i = 0; i < 40; i++)
		infeed_free(f[i]);
}
END_TEST

/* A group on this host that the test's user is not in, or NULL. */
static const char *
foreign_group(void)
{
	static char	 name[256];
	struct passwd	*pw = getpwuid(getuid());
	struct group	*gr;
	gid_t		 groups[256];
	int		 n = 256, k, mine;

	if (pw == NULL || getgrouplist(pw->pw_name, getgid(), groups, &n) ==
	    -1)
		return (NULL);
	setgrent();
	while ((gr = getgrent()) != NULL) {
		for (k = 0, mine = gr->gr_gid == getgid(); k < n; k++)
			mine |= gr->gr_gid == groups[k];
		if (!mine && strlen(gr->gr_name) < sizeof(name) &&
		    strspn(gr->gr_name, "abcdefghijklmnopqrstuvwxyz0123456789"
		    "_-") == strlen(gr->gr_name)) {
			strcpy(name, gr->gr_name);
			endgrent();
			return (name);
		}
	}
	endgrent();
	return (NULL);
}

START_TEST(test_permission_denied)
{
	Infeed__Attach	 a = INFEED__ATTACH__INIT;
	struct wire_in	 in;
	const char	*g = foreign_group();
	char		 extra[512];
	int		 fd;

	ck_assert_msg(g != NULL, "no group on this host that the test's user "
	    "is not in");
	snprintf(extra, sizeof(extra), "\n[dataset private]\ntype = synthetic"
	    "\nsamples = 100\nshape = 4\nallow_groups = %s\n", g);
	restart_with(extra);
	fd = conn(&in);
	a.dataset = (char *)"private";
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	expect_case("permission-denied", recv_ms(fd, &in, RECV_MS), fd, &in);
	conn_close(fd, &in);
}
END_TEST

START_TEST(test_data)
{
	struct wire_in	in;
	char		path[400];
	int		fd = conn(&in);

	attach(fd, &in, "raw", 10, 2);
	snprintf(path, sizeof(path), "%s/raw.bin", dir);
	ck_assert_int_eq(truncate(path, 0), 0);
	req_empty(fd, INFEED__FRAME__MSG_NEXT, 0);
	expect_case("data", recv_ms(fd, &in, DATA_MS), fd, &in);
	/* The session failed: every later Next gets the same error. */
	req_empty(fd, INFEED__FRAME__MSG_NEXT, 0);
	expect_case("data", recv_ms(fd, &in, RECV_MS), fd, &in);
	req_empty(fd, INFEED__FRAME__MSG_DETACH, 0);
	infeed__frame__free_unpacked(recv_case(fd, &in,
	    INFEED__FRAME__MSG_DETACHED), NULL);
	conn_close(fd, &in);
}
END_TEST

/*
 * Past max_clients the daemon reads the client's Hello and answers it with
 * RESOURCE_EXHAUSTED naming the limit, then closes: nothing comes before
 * the Hello, so a client's Hello never fails with EPIPE.
 */
START_TEST(test_max_clients)
{
	Infeed__Hello	 h = INFEED__HELLO__INIT;
	struct wire_in	 in, in2;
	struct pollfd	 pfd;
	Infeed__Frame	*r;
	int		 fd, fd2;

	restart_with("max_clients = 1");
	fd = conn_first(&in);
	fd2 = raw_connect();
	wire_in_init(&in2, INFEED_DEFAULT_MAX_FRAME);
	pfd.fd = fd2;
	pfd.events = POLLIN;
	ck_assert_msg(poll(&pfd, 1, 300) == 0, "the daemon answered a client "
	    "past max_clients before its Hello");
	h.protocol_version = WIRE_PROTOCOL_VERSION;
	req(fd2, INFEED__FRAME__MSG_HELLO, &h, 7);
	r = recv_ms(fd2, &in2, RECV_MS);
	ck_assert_msg(r != NULL && r->msg_case == INFEED__FRAME__MSG_ERROR &&
	    strstr(r->error->message, "max_clients") != NULL,
	    "the Error does not name max_clients");
	ck_assert_msg(r->has_request_id && r->request_id == 7,
	    "the Error does not carry the Hello's request_id");
	expect_case("max-clients", r, fd2, &in2);
	conn_close(fd, &in);
}
END_TEST

/*
 * A ring on memory kept from another session (another dataset, the same
 * user) shows its client nothing of that session: before its first step,
 * every byte it can map is zero.  The daemon's Stats say the memory was
 * reused, so the test cannot pass on new memory.
 */
START_TEST(test_reused_ring_shows_nothing_of_the_last_session)
{
	struct infeed_options	 o;
	struct infeed_step	 st;
	struct infeed_stats	*stats;
	struct infeed		*f = client();
	struct wire_in		 in;
	const uint8_t		*p;
	uint64_t		 len, reused, i, nonzero = 0, seen = 0;
	int			 fd, ring;

	/* raw, 100 rows of 16 bytes, and synthetic, 4 of 256: 3 x 4 KiB. */
	infeed_options_init(&o);
	o.batch_size = 100;
	ck_assert_int_eq(infeed_attach(f, "raw", &o, NULL), INFEED_OK);
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(infeed_next(f, &st), INFEED_OK);
		for (len = 0; len < st.rows * 16; len++)
			seen += st.data != NULL &&
			    ((const uint8_t *)st.data)[len] != 0;
		ck_assert_int_eq(infeed_release(f, &st), INFEED_OK);
	}
	ck_assert_msg(seen > 0, "the first session's rows were all zero");
	ck_assert_int_eq(infeed_detach(f), INFEED_OK);
	ck_assert_int_eq(infeed_get_stats(f, &stats), INFEED_OK);
	reused = stats->rings_reused;
	infeed_stats_free(stats);

	fd = conn(&in);
	attach(fd, &in, "synthetic", 4, 3);
	ck_assert_int_ne(ring = wire_in_take_fd(&in), -1);
	len = 3 * 4096;
	p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, ring, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	for (i = 0; i < len; i++)
		nonzero += p[i] != 0;
	ck_assert_msg(nonzero == 0, "%llu bytes of the ring were not zero "
	    "before the session's first step", (unsigned long long)nonzero);
	munmap((void *)(uintptr_t)p, (size_t)len);
	close(ring);
	ck_assert_int_eq(infeed_get_stats(f, &stats), INFEED_OK);
	ck_assert_msg(stats->rings_reused == reused + 1, "the ring was not "
	    "made on the kept memory (%llu reused before, %llu after)",
	    (unsigned long long)reused,
	    (unsigned long long)stats->rings_reused);
	infeed_stats_free(stats);
	conn_close(fd, &in);
	infeed_free(f);
}
END_TEST

/* The ring's descriptor is read-only, as the document says. */
START_TEST(test_ring_read_only)
{
	Infeed__Attach	 a = INFEED__ATTACH__INIT;
	struct wire_in	 in;
	Infeed__Frame	*r;
	void		*p;
	uint64_t	 len;
	int		 fd = conn(&in), ring;

	a.dataset = (char *)"raw";
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	r = recv_case(fd, &in, INFEED__FRAME__MSG_ATTACHED);
	len = r->attached->ring_bytes;
	infeed__frame__free_unpacked(r, NULL);
	ck_assert_int_ne(ring = wire_in_take_fd(&in), -1);
	ck_assert_int_eq(fcntl(ring, F_GETFL) & O_ACCMODE, O_RDONLY);
	p = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, ring,
	    0);
	ck_assert_msg(p == MAP_FAILED && errno == EACCES, "a writable shared "
	    "mapping of the ring did not fail with EACCES");
	ck_assert_int_eq(write(ring, "x", 1), -1);
	p = mmap(NULL, (size_t)len, PROT_READ, MAP_SHARED, ring, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(mprotect(p, (size_t)len, PROT_READ | PROT_WRITE), -1);
	ck_assert_int_eq(errno, EACCES);
	munmap(p, (size_t)len);
	close(ring);
	conn_close(fd, &in);
}
END_TEST

/* One pipelined request, and whether its reply came. */
struct pipe_req {
	uint64_t		id;		/* 0: sent without one */
	Infeed__Frame__MsgCase	c;
	int			answered;
};

/*
 * Read one reply and check it against the documented rules: it carries
 * the request_id of a request not yet answered (none for a request sent
 * without one), it is a reply that request can get, every earlier request
 * other than a Next is answered, and a Step or EndOfData comes after the
 * replies of every earlier Next.  Returns the reply; *@which is its request.
 */
static Infeed__Frame *
pipe_reply(int fd, struct wire_in *in, struct pipe_req *q, size_t nq,
    size_t *which)
{
	Infeed__Frame		*r = recv_ms(fd, in, RECV_MS);
	Infeed__Frame__MsgCase	 want;
	size_t			 i, j;

	ck_assert_msg(r != NULL, "the daemon closed the connection");
	for (j = 0; j < nq; j++) {
		if (q[j].answered)
			continue;
		if (r->has_request_id ? q[j].id == r->request_id : q[j].id == 0)
			break;
	}
	ck_assert_msg(j < nq, "a %s reply with request_id %" PRIu64 "%s "
	    "answers no request waiting for one", wire_case_name(r->msg_case),
	    r->request_id, r->has_request_id ? "" : " (not set)");
	switch (q[j].c) {
	case INFEED__FRAME__MSG_HELLO:
		want = INFEED__FRAME__MSG_WELCOME;
		break;
	case INFEED__FRAME__MSG_LIST_DATASETS:
		want = INFEED__FRAME__MSG_DATASET_LIST;
		break;
	case INFEED__FRAME__MSG_ATTACH:
		want = INFEED__FRAME__MSG_ATTACHED;
		break;
	case INFEED__FRAME__MSG_RELEASE:
		want = INFEED__FRAME__MSG_RELEASED;
		break;
	case INFEED__FRAME__MSG_GET_STATS:
		want = INFEED__FRAME__MSG_STATS;
		break;
	case INFEED__FRAME__MSG_DETACH:
		want = INFEED__FRAME__MSG_DETACHED;
		break;
	default:
		want = INFEED__FRAME__MSG_STEP;
		break;
	}
	ck_assert_msg(r->msg_case == want || r->msg_case ==
	    INFEED__FRAME__MSG_ERROR || (want == INFEED__FRAME__MSG_STEP &&
	    r->msg_case == INFEED__FRAME__MSG_END_OF_DATA), "%s answers a %s",
	    wire_case_name(r->msg_case), wire_case_name(q[j].c));
	for (i = 0; i < j; i++) {
		if (q[i].c != INFEED__FRAME__MSG_NEXT)
			ck_assert_msg(q[i].answered, "the reply to request %zu "
			    "(%s) came before the reply to request %zu (%s)",
			    j, wire_case_name(q[j].c), i,
			    wire_case_name(q[i].c));
		else if (r->msg_case == INFEED__FRAME__MSG_STEP ||
		    r->msg_case == INFEED__FRAME__MSG_END_OF_DATA)
			ck_assert_msg(q[i].answered, "the %s for Next %zu came "
			    "before the reply to Next %zu",
			    wire_case_name(r->msg_case), j, i);
	}
	q[j].answered = 1;
	*which = j;
	return (r);
}

/* Pipelined requests: ids are echoed, and replies keep the documented order. */
START_TEST(test_pipelining)
{
	Infeed__Hello		h = INFEED__HELLO__INIT;
	Infeed__Attach		a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	o = INFEED__LOADER_OPTIONS__INIT;
	Infeed__Release		rl0 = INFEED__RELEASE__INIT;
	Infeed__Release		rlbad = INFEED__RELEASE__INIT;
	Infeed__Release		rl1 = INFEED__RELEASE__INIT;
	Infeed__Next		n = INFEED__NEXT__INIT;
	struct pipe_req		q[16];
	struct reqbuf		b = { NULL, 0 };
	struct wire_in		in;
	Infeed__Frame		*r;
	uint64_t		 next_step_no = 1;
	size_t			 nq, i, j;
	int			 fd = raw_connect();

	wire_in_init(&in, INFEED_DEFAULT_MAX_FRAME);
	/* Hello, ListDatasets and Attach in one write. */
	h.protocol_version = WIRE_PROTOCOL_VERSION;
	o.has_batch_size = o.has_buffer_size = o.has_load_indefinitely = 1;
	o.batch_size = 250;		/* 4 steps of the 1000 raw samples */
	o.buffer_size = 4;
	o.load_indefinitely = 0;
	a.dataset = (char *)"raw";
	a.options = &o;
	memset(q, 0, sizeof(q));
	q[0] = (struct pipe_req){ 1000, INFEED__FRAME__MSG_HELLO, 0 };
	q[1] = (struct pipe_req){ 1001, INFEED__FRAME__MSG_LIST_DATASETS, 0 };
	q[2] = (struct pipe_req){ 1002, INFEED__FRAME__MSG_ATTACH, 0 };
	q[3] = (struct pipe_req){ 1, INFEED__FRAME__MSG_NEXT, 0 };
	req_add(&b, q[0].c, &h, q[0].id);
	req_add(&b, q[1].c, &n, q[1].id);
	req_add(&b, q[2].c, &a, q[2].id);
	req_add(&b, q[3].c, &n, q[3].id);
	req_flush(fd, &b);
	for (i = 0; i < 4; i++) {
		r = pipe_reply(fd, &in, q, 4, &j);
		ck_assert_uint_eq(j, i);
		if (j == 3) {
			ck_assert_int_eq(r->msg_case, INFEED__FRAME__MSG_STEP);
			ck_assert_uint_eq(r->step->step, 0);
			rl0.slot = r->step->slot;
		}
		infeed__frame__free_unpacked(r, NULL);
	}

	/* Steps 1 to 3, then EndOfData, around other requests. */
	rlbad.slot = INFEED_MAX_SLOTS - 1;
	q[0] = (struct pipe_req){ 2, INFEED__FRAME__MSG_RELEASE, 0 };
	q[1] = (struct pipe_req){ 3, INFEED__FRAME__MSG_NEXT, 0 };
	q[2] = (struct pipe_req){ 4, INFEED__FRAME__MSG_NEXT, 0 };
	q[3] = (struct pipe_req){ 5, INFEED__FRAME__MSG_GET_STATS, 0 };
	q[4] = (struct pipe_req){ 6, INFEED__FRAME__MSG_LIST_DATASETS, 0 };
	q[5] = (struct pipe_req){ 7, INFEED__FRAME__MSG_RELEASE, 0 };
	q[6] = (struct pipe_req){ 0, INFEED__FRAME__MSG_GET_STATS, 0 };
	q[7] = (struct pipe_req){ 9, INFEED__FRAME__MSG_NEXT, 0 };
	q[8] = (struct pipe_req){ 10, INFEED__FRAME__MSG_NEXT, 0 };
	q[9] = (struct pipe_req){ 11, INFEED__FRAME__MSG_GET_STATS, 0 };
	nq = 10;
	for (i = 0; i < nq; i++)
		req_add(&b, q[i].c, i == 0 ? (void *)&rl0 : i == 5 ?
		    (void *)&rlbad : (void *)&n, q[i].id);
	req_flush(fd, &b);
	for (i = 0; i < nq; i++) {
		r = pipe_reply(fd, &in, q, nq, &j);
		if (q[j].id == 7)
			ck_assert_int_eq(r->error->code,
			    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
		else
			ck_assert_msg(r->msg_case != INFEED__FRAME__MSG_ERROR,
			    "request %zu: %s", j, r->error->message);
		if (r->msg_case == INFEED__FRAME__MSG_STEP) {
			ck_assert_uint_eq(r->step->epoch, 0);
			ck_assert_uint_eq(r->step->step, next_step_no);
			if (next_step_no++ == 1)
				rl1.slot = r->step->slot;
		}
		if (r->msg_case == INFEED__FRAME__MSG_END_OF_DATA) {
			ck_assert_uint_eq(q[j].id, 10);
			ck_assert_uint_eq(r->end_of_data->epoch, 0);
		}
		infeed__frame__free_unpacked(r, NULL);
	}
	ck_assert_uint_eq(next_step_no, 4);

	/* Release, a Next (of epoch 1) and Detach. */
	q[0] = (struct pipe_req){ 12, INFEED__FRAME__MSG_RELEASE, 0 };
	q[1] = (struct pipe_req){ 13, INFEED__FRAME__MSG_NEXT, 0 };
	q[2] = (struct pipe_req){ 14, INFEED__FRAME__MSG_DETACH, 0 };
	nq = 3;
	req_add(&b, q[0].c, &rl1, q[0].id);
	req_add(&b, q[1].c, &n, q[1].id);
	req_add(&b, q[2].c, &n, q[2].id);
	req_flush(fd, &b);
	for (i = 0; i < nq; i++) {
		r = pipe_reply(fd, &in, q, nq, &j);
		if (r->msg_case == INFEED__FRAME__MSG_STEP)
			ck_assert_uint_eq(r->step->epoch, 1);
		infeed__frame__free_unpacked(r, NULL);
	}
	close(fd);
	wire_in_clear(&in);
}
END_TEST

/*
 * A quiet Release (issue 37): the daemon says it honours them in Attached;
 * one it accepts gets no Released (the Next after it is answered first),
 * one it refuses gets its Error, with the Release's request id.
 */
START_TEST(test_quiet_release)
{
	Infeed__Attach		a = INFEED__ATTACH__INIT;
	Infeed__LoaderOptions	o = INFEED__LOADER_OPTIONS__INIT;
	Infeed__Release		rl = INFEED__RELEASE__INIT;
	Infeed__Frame		*r;
	struct wire_in		in;
	int			fd = conn(&in);

	o.has_batch_size = o.has_buffer_size = 1;
	o.batch_size = 10;
	o.buffer_size = 2;
	a.dataset = (char *)"raw";
	a.options = &o;
	req(fd, INFEED__FRAME__MSG_ATTACH, &a, 0);
	r = recv_case(fd, &in, INFEED__FRAME__MSG_ATTACHED);
	ck_assert(r->attached->has_quiet_release && r->attached->quiet_release);
	infeed__frame__free_unpacked(r, NULL);

	rl.slot = next_step(fd, &in);
	rl.has_quiet = rl.quiet = 1;
	req(fd, INFEED__FRAME__MSG_RELEASE, &rl, 7);
	req_empty(fd, INFEED__FRAME__MSG_NEXT, 8);
	r = recv_ms(fd, &in, RECV_MS);
	ck_assert_msg(r != NULL && r->msg_case == INFEED__FRAME__MSG_STEP,
	    "after a quiet Release: %s, expected the Next's Step",
	    r != NULL ? wire_case_name(r->msg_case) : "nothing");
	ck_assert_uint_eq(r->request_id, 8);
	rl.slot = r->step->slot;
	infeed__frame__free_unpacked(r, NULL);

	/* The same slot twice: refused, by the Release's id. */
	req(fd, INFEED__FRAME__MSG_RELEASE, &rl, 9);
	req(fd, INFEED__FRAME__MSG_RELEASE, &rl, 10);
	r = recv_case(fd, &in, INFEED__FRAME__MSG_ERROR);
	ck_assert_uint_eq(r->request_id, 10);
	ck_assert_int_eq(r->error->code,
	    INFEED__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	infeed__frame__free_unpacked(r, NULL);
	req_empty(fd, INFEED__FRAME__MSG_DETACH, 11);
	infeed__frame__free_unpacked(recv_case(fd, &in,
	    INFEED__FRAME__MSG_DETACHED), NULL);
	conn_close(fd, &in);
}
END_TEST

static Suite *
protocol_suite(void)
{
	Suite	*s = suite_create("protocol");
	TCase	*tc;

	tc = tcase_create("document");
	tcase_add_test(tc, test_doc_vectors);
	tcase_add_test(tc, test_doc_error_table);
	tcase_add_test(tc, test_doc_limits);
	tcase_add_test(tc, test_doc_options);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_version_mismatch);
	tcase_add_test(tc, test_bad_frame);
	tcase_add_test(tc, test_unexpected_closing);
	tcase_add_test(tc, test_unexpected_open);
	tcase_add_test(tc, test_unexpected_more);
	tcase_add_test(tc, test_invalid_argument);
	tcase_add_test(tc, test_files);
	tcase_add_test(tc, test_not_found_dataset);
	tcase_add_test(tc, test_not_found_reloaded);
	tcase_add_test(tc, test_memory_budget);
	tcase_add_test(tc, test_reply_too_large);
	tcase_add_test(tc, test_permission_denied);
	tcase_add_test(tc, test_data);
	suite_add_tcase(s, tc);

	tc = tcase_create("ring");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_ring_read_only);
	tcase_add_test(tc, test_reused_ring_shows_nothing_of_the_last_session);
	suite_add_tcase(s, tc);

	tc = tcase_create("max-clients");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_max_clients);
	suite_add_tcase(s, tc);

	tc = tcase_create("pipelining");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_pipelining);
	tcase_add_test(tc, test_quiet_release);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(protocol_suite()));
}
