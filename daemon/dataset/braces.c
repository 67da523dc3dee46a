/* SPDX-License-Identifier: MIT */
/*
 * Brace expansion of shard patterns with braceexpand 0.1.7's rules (see
 * braces.h), so a pattern names the same shards in infeed as in a
 * webdataset pipeline.
 *
 * The pattern is split into items: literal text, and a "{...}" group at
 * depth 0 that is a range, a comma list (whose alternatives are patterns
 * again) or, failing both, "{", the inside as a pattern, "}".  The names
 * are the items' Cartesian product.  Backslash escapes are kept through
 * the parse (a "\{" never opens a group) and removed from each finished
 * name, as braceexpand does.  Everything stays within the bounds given:
 * a pattern from a config file may be anything.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "braces.h"

/* A list of malloc'd strings. */
struct blist {
	char	**v;
	size_t	  n;
	size_t	  cap;
};

/* Where an expansion stands: the first error ends it. */
struct bctx {
	const char	*err;
};

/* braceexpand's letters, in the order its character ranges count. */
static const char	letters[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

static int	braces_pattern(struct bctx *, const char *, size_t,
		    struct blist *);

/* Free a list's strings and array. */
static void
blist_clear(struct blist *l)
{
	size_t	i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

/* Append a copy of the @len bytes at @s to @l. */
static int
blist_add(struct bctx *c, struct blist *l, const char *s, size_t len)
{
	char	**v, *copy;
	size_t	  cap;

	if (l->n >= BRACES_MAX_NAMES) {
		c->err = "expands to too many names (more than 1000000)";
		return (-1);
	}
	if (l->n == l->cap) {
		cap = l->cap == 0 ? 4 : l->cap * 2;
		if ((v = reallocarray(l->v, cap, sizeof *v)) == NULL)
			goto nomem;
		l->v = v;
		l->cap = cap;
	}
	if ((copy = malloc(len + 1)) == NULL)
		goto nomem;
	memcpy(copy, s, len);
	copy[len] = '\0';
	l->v[l->n++] = copy;
	return (0);
nomem:
	c->err = "out of memory";
	return (-1);
}

/* Move every string of @from to the end of @to. */
static int
blist_move(struct bctx *c, struct blist *to, struct blist *from)
{
	size_t	i;
	char	**v;

	if (to->n + from->n > BRACES_MAX_NAMES) {
		c->err = "expands to too many names (more than 1000000)";
		return (-1);
	}
	if (to->n + from->n > to->cap) {
		if ((v = reallocarray(to->v, to->n + from->n,
		    sizeof *v)) == NULL) {
			c->err = "out of memory";
			return (-1);
		}
		to->v = v;
		to->cap = to->n + from->n;
	}
	for (i = 0; i < from->n; i++)
		to->v[to->n++] = from->v[i];
	free(from->v);
	memset(from, 0, sizeof *from);
	return (0);
}

/* Parse an optionally negative decimal number of ASCII digits. */
static bool
braces_int(const char *s, size_t len, bool sign, int64_t *out)
{
	int64_t	v = 0;
	size_t	i = 0;
	bool	neg = false;

	if (sign && len > 0 && s[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i == len)
		return (false);
	for (; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return (false);
		if (v > (INT64_MAX / 4 - (s[i] - '0')) / 10)
			v = INT64_MAX / 4;	/* too large: caught later */
		else
			v = v * 10 + (s[i] - '0');
	}
	*out = neg ? -v : v;
	return (true);
}

/*
 * Split "A..B" or "A..B..C" at the dots into its parts; C may carry a
 * "-", which is dropped.  Return: whether it has that form.
 */
static bool
braces_range_parts(const char *s, size_t len, size_t part[3][2],
    bool *has_step)
{
	const char	*d1, *d2;
	size_t		 a_end, b_start, b_end;

	if ((d1 = memmem(s + (len > 0), len - (len > 0), "..", 2)) == NULL)
		return (false);
	a_end = (size_t)(d1 - s);
	b_start = a_end + 2;
	/* B must be non-empty: search for a second ".." past its first char. */
	d2 = b_start + 1 < len ? memmem(s + b_start + 1, len - b_start - 1,
	    "..", 2) : NULL;
	b_end = d2 != NULL ? (size_t)(d2 - s) : len;
	part[0][0] = 0;
	part[0][1] = a_end;
	part[1][0] = b_start;
	part[1][1] = b_end;
	*has_step = d2 != NULL;
	if (*has_step) {
		part[2][0] = b_end + 2;
		if (part[2][0] < len && s[part[2][0]] == '-')
			part[2][0]++;
		part[2][1] = len;
	}
	return (b_end > b_start);
}

/* The step of a range: its digits, 0 meaning 1. */
static bool
braces_step(const char *s, size_t part[2], bool has_step, int64_t *step)
{
	*step = 1;
	if (!has_step)
		return (true);
	if (!braces_int(s + part[0], part[1] - part[0], false, step))
		return (false);
	if (*step == 0)
		*step = 1;
	return (true);
}

/*
 * "{A..B}" of integers into @out, zero-padded as braceexpand pads.
 * Return: 1 when @s is such a range, 0 when not, -1 on error.
 */
static int
braces_int_range(struct bctx *c, const char *s, size_t len,
    struct blist *out)
{
	size_t		 part[3][2], i, alen, blen;
	bool		 has_step;
	int64_t		 a, b, step, v;
	unsigned	 width = 0;
	char		 buf[64];
	const char	*p;
	int		 n;

	if (!braces_range_parts(s, len, part, &has_step) ||
	    !braces_int(s + part[0][0], part[0][1] - part[0][0], true, &a) ||
	    !braces_int(s + part[1][0], part[1][1] - part[1][0], true, &b) ||
	    !braces_step(s, part[2], has_step, &step))
		return (0);
	for (i = 0; i < 2; i++) {
		p = s + part[i][0];
		alen = part[i][1] - part[i][0];
		if ((alen == 1 && p[0] == '0') ||
		    (alen == 2 && p[0] == '-' && p[1] == '0'))
			continue;
		if (p[0] == '0' || (alen > 1 && p[0] == '-' && p[1] == '0')) {
			alen = part[0][1] - part[0][0];
			blen = part[1][1] - part[1][0];
			width = (unsigned)(alen > blen ? alen : blen);
		}
	}
	if (width > 40 || a >= INT64_MAX / 4 || b >= INT64_MAX / 4 ||
	    a <= -INT64_MAX / 4 || b <= -INT64_MAX / 4 ||
	    step >= INT64_MAX / 4) {
		c->err = "has a number range with numbers too large";
		return (-1);
	}
	if ((a < b ? b - a : a - b) / step >= BRACES_MAX_NAMES) {
		c->err = "expands to too many names (more than 1000000)";
		return (-1);
	}
	for (v = a; a < b ? v <= b : v >= b; v += a < b ? step : -step) {
		n = snprintf(buf, sizeof buf, "%0*" PRId64, (int)width, v);
		if (blist_add(c, out, buf, (size_t)n) != 0)
			return (-1);
	}
	return (1);
}

/*
 * "{x..y}" of letters into @out, counting along A-Z then a-z.
 * Return: 1 when @s is such a range, 0 when not, -1 on error.
 */
static int
braces_char_range(struct bctx *c, const char *s, size_t len,
    struct blist *out)
{
	size_t		 part[3][2];
	bool		 has_step;
	int64_t		 step, v, a, b;
	const char	*pa, *pb;

	if (len < 4 || !braces_range_parts(s, len, part, &has_step) ||
	    part[0][1] != 1 || part[1][1] - part[1][0] != 1 ||
	    !braces_step(s, part[2], has_step, &step))
		return (0);
	if (s[0] == '\0' || s[part[1][0]] == '\0' ||
	    (pa = strchr(letters, s[0])) == NULL ||
	    (pb = strchr(letters, s[part[1][0]])) == NULL)
		return (0);
	a = pa - letters;
	b = pb - letters;
	for (v = a; a < b ? v <= b : v >= b; v += a < b ? step : -step) {
		if (blist_add(c, out, &letters[v], 1) != 0)
			return (-1);
		if (step > 52)
			break;
	}
	return (1);
}

/*
 * "x,y,..." at depth 0 of @s: each alternative's expansion in turn.
 * Return: 1 when @s has such a comma, 0 when not, -1 on error.
 */
static int
braces_sequence(struct bctx *c, const char *s, size_t len, struct blist *out)
{
	struct blist	 alt = { 0 };
	size_t		 pos, start = 0;
	int		 depth = 0, commas = 0;

	for (pos = 0; pos < len; pos++) {
		if (s[pos] == '\\') {
			pos++;
			continue;
		}
		if (s[pos] == '{')
			depth++;
		else if (s[pos] == '}')
			depth--;
		else if (s[pos] == ',' && depth == 0) {
			commas++;
			if (braces_pattern(c, s + start, pos - start,
			    &alt) != 0 || blist_move(c, out, &alt) != 0)
				goto fail;
			start = pos + 1;
		}
	}
	if (depth != 0) {
		c->err = "has unbalanced braces";
		goto fail;
	}
	if (commas == 0)
		return (0);
	if (braces_pattern(c, s + start, len - start, &alt) != 0 ||
	    blist_move(c, out, &alt) != 0)
		goto fail;
	return (1);
fail:
	blist_clear(&alt);
	return (-1);
}

/* What a group's inside expands to; 0 when it is none of the kinds. */
static int
braces_expression(struct bctx *c, const char *s, size_t len,
    struct blist *out)
{
	int	r;

	if ((r = braces_int_range(c, s, len, out)) != 0)
		return (r);
	if ((r = braces_char_range(c, s, len, out)) != 0)
		return (r);
	return (braces_sequence(c, s, len, out));
}

/* @acc becomes each of its strings followed by each of @item's. */
static int
braces_product(struct bctx *c, struct blist *acc, const struct blist *item)
{
	struct blist	 next = { 0 };
	size_t		 i, j, la, lb;
	char		*s;

	if (item->n != 0 && acc->n > BRACES_MAX_NAMES / item->n) {
		c->err = "expands to too many names (more than 1000000)";
		return (-1);
	}
	for (i = 0; i < acc->n; i++) {
		for (j = 0; j < item->n; j++) {
			la = strlen(acc->v[i]);
			lb = strlen(item->v[j]);
			if (la + lb > 65536) {
				c->err = "expands to a name that is too long";
				goto fail;
			}
			if ((s = malloc(la + lb + 1)) == NULL) {
				c->err = "out of memory";
				goto fail;
			}
			memcpy(s, acc->v[i], la);
			memcpy(s + la, item->v[j], lb + 1);
			if (blist_add(c, &next, "", 0) != 0) {
				free(s);
				goto fail;
			}
			free(next.v[next.n - 1]);
			next.v[next.n - 1] = s;
		}
	}
	blist_clear(acc);
	*acc = next;
	return (0);
fail:
	blist_clear(&next);
	return (-1);
}

/* Multiply @acc by the literal @s. */
static int
braces_literal(struct bctx *c, struct blist *acc, const char *s, size_t len)
{
	struct blist	item = { 0 };
	int		rc;

	if (blist_add(c, &item, s, len) != 0)
		return (-1);
	rc = braces_product(c, acc, &item);
	blist_clear(&item);
	return (rc);
}

/* Expand a pattern (escapes still in) into @out. */
static int
braces_pattern(struct bctx *c, const char *s, size_t len, struct blist *out)
{
	struct blist	 acc = { 0 }, item = { 0 };
	size_t		 pos = 0, start = 0;
	int		 depth = 0, r;

	if (blist_add(c, &acc, "", 0) != 0)
		return (-1);
	while (pos < len) {
		if (s[pos] == '\\') {
			pos += 2;
			continue;
		}
		if (s[pos] == '{') {
			if (depth == 0 && pos > start) {
				if (braces_literal(c, &acc, s + start,
				    pos - start) != 0)
					goto fail;
				start = pos;
			}
			depth++;
		} else if (s[pos] == '}') {
			if (--depth == 0) {
				r = braces_expression(c, s + start + 1,
				    pos - start - 1, &item);
				if (r == -1)
					goto fail;
				if (r == 1) {
					if (braces_product(c, &acc,
					    &item) != 0)
						goto fail;
				} else if (braces_literal(c, &acc, "{",
				    1) != 0 || braces_pattern(c, s + start + 1,
				    pos - start - 1, &item) != 0 ||
				    braces_product(c, &acc, &item) != 0 ||
				    braces_literal(c, &acc, "}", 1) != 0)
					goto fail;
				blist_clear(&item);
				start = pos + 1;
			}
		}
		pos++;
	}
	if (depth != 0) {
		c->err = "has unbalanced braces";
		goto fail;
	}
	if (start < len && braces_literal(c, &acc, s + start,
	    len - start) != 0)
		goto fail;
	*out = acc;
	return (0);
fail:
	blist_clear(&item);
	blist_clear(&acc);
	return (-1);
}

/* Remove the backslash of each "\c" in place. */
static void
braces_unescape(char *s)
{
	char	*w = s;

	for (; *s != '\0'; s++) {
		if (s[0] == '\\' && s[1] != '\0' && s[1] != '\n')
			s++;
		*w++ = *s;
	}
	*w = '\0';
}

/* Expand a shard pattern. */
int
braces_expand(const char *pattern, char ***out, size_t *n, const char **err)
{
	struct bctx	c = { NULL };
	struct blist	l = { 0 };
	size_t		i;

	*out = NULL;
	*n = 0;
	if (braces_pattern(&c, pattern, strlen(pattern), &l) != 0) {
		*err = c.err != NULL ? c.err : "cannot be expanded";
		return (-1);
	}
	for (i = 0; i < l.n; i++)
		braces_unescape(l.v[i]);
	*out = l.v;
	*n = l.n;
	return (0);
}

/* Free an expansion. */
void
braces_free(char **names, size_t n)
{
	size_t	i;

	if (names == NULL)
		return;
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}
