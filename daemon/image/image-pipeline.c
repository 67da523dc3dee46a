/* SPDX-License-Identifier: MIT */
/*
 * The pipeline parser: a pipeline written as torchvision code, with
 * torchvision 0.14's signatures, positional and keyword arguments, read
 * into a struct image_pipeline; whatever infeed cannot reproduce exactly
 * is refused by name.  image_pipeline_format() writes the canonical text
 * back.
 */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image-pipeline.h"

/* A value in the pipeline text. */
enum pval_kind { PV_NUM, PV_SEQ, PV_NAME, PV_STR };

#define PV_MAX_SEQ	4

struct pval {
	enum pval_kind	 kind;
	bool		 isint;		/* PV_NUM: an integer literal */
	double		 num;
	unsigned int	 len;		/* PV_SEQ */
	bool		 seqint[PV_MAX_SEQ];
	double		 seq[PV_MAX_SEQ];
	char		 name[64];	/* PV_NAME, PV_STR */
	char		 text[96];	/* as written, for messages */
};

#define MAX_ARGS	6

/* A call being parsed: its name and bound arguments. */
struct pcall {
	const char	*name;
	const char	*const *params;
	unsigned int	 nparams;
	bool		 set[MAX_ARGS];
	struct pval	 arg[MAX_ARGS];
};

struct parser {
	const char	*text;
	const char	*p;
	char		**cause;
};

static const char *const rrc_params[] = { "size", "scale", "ratio",
    "interpolation", "antialias" };
static const char *const resize_params[] = { "size", "interpolation",
    "max_size", "antialias" };
static const char *const ccrop_params[] = { "size" };
static const char *const flip_params[] = { "p" };
static const char *const normalize_params[] = { "mean", "std", "inplace" };

static const char known[] = "infeed runs RandomResizedCrop, Resize, "
    "CenterCrop, RandomHorizontalFlip, ToTensor, PILToTensor and Normalize";

static int	 perr(char **, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	 skip_space(struct parser *);
static int	 syntax(struct parser *, const char *);
static bool	 eat(struct parser *, char);
static int	 parse_ident(struct parser *, char *, size_t);
static int	 parse_number(struct parser *, struct pval *);
static int	 parse_value(struct parser *, struct pval *);
static int	 parse_call(struct parser *, struct pcall *, const char *);
static int	 get_size(const char *, const char *, const struct pval *,
		    uint32_t *, uint32_t *, bool *, char **);
static int	 get_pair(const char *, const char *, const struct pval *,
		    double *, char **);
static int	 get_interp(const char *, const struct pcall *, unsigned int,
		    char **);
static int	 get_antialias(const char *, const struct pcall *,
		    unsigned int, char **);
static int	 get_channels(const char *, const struct pval *, float *,
		    bool, char **);
static const char *fmt_float(char *, size_t, float);
static const char *fmt_double(char *, size_t, double);

/* Set *cause to a formatted message and return -1. */
static int
perr(char **cause, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	if (cause != NULL && vasprintf(cause, fmt, ap) == -1)
		*cause = NULL;
	va_end(ap);
	return (-1);
}

/* Skip blanks and newlines. */
static void
skip_space(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
	    *ps->p == '\r')
		ps->p++;
}

/* A syntax error at the current position: what was expected. */
static int
syntax(struct parser *ps, const char *expected)
{
	if (*ps->p == '\0')
		return (perr(ps->cause, "pipeline: expected %s at the end of "
		    "the text", expected));
	return (perr(ps->cause, "pipeline: expected %s at character %zu "
	    "('%.12s')", expected, (size_t)(ps->p - ps->text) + 1, ps->p));
}

/* Consume @c (after blanks) if it is next. */
static bool
eat(struct parser *ps, char c)
{
	skip_space(ps);
	if (*ps->p != c)
		return (false);
	ps->p++;
	return (true);
}

/* A dotted name (transforms.Resize, InterpolationMode.BILINEAR). */
static int
parse_ident(struct parser *ps, char *buf, size_t len)
{
	const char	*start;
	size_t		 n;

	skip_space(ps);
	start = ps->p;
	for (;;) {
		if (!(*ps->p == '_' || (*ps->p >= 'a' && *ps->p <= 'z') ||
		    (*ps->p >= 'A' && *ps->p <= 'Z')))
			return (syntax(ps, "a name"));
		while (*ps->p == '_' || (*ps->p >= 'a' && *ps->p <= 'z') ||
		    (*ps->p >= 'A' && *ps->p <= 'Z') ||
		    (*ps->p >= '0' && *ps->p <= '9'))
			ps->p++;
		if (*ps->p != '.')
			break;
		ps->p++;
	}
	n = ps->p - start;
	if (n >= len)
		return (perr(ps->cause, "pipeline: name '%.32s...' is too long",
		    start));
	memcpy(buf, start, n);
	buf[n] = '\0';
	return (0);
}

/* One literal: [+-]digits[.digits][e[+-]digits]. */
static int
parse_literal(struct parser *ps, double *v, bool *isint)
{
	char		 buf[64];
	const char	*start;
	bool		 neg = false, digits = false;

	skip_space(ps);
	if (*ps->p == '-' || *ps->p == '+') {
		neg = *ps->p == '-';
		ps->p++;
		skip_space(ps);
	}
	start = ps->p;
	*isint = true;
	while (*ps->p >= '0' && *ps->p <= '9') {
		ps->p++;
		digits = true;
	}
	if (*ps->p == '.') {
		*isint = false;
		ps->p++;
		while (*ps->p >= '0' && *ps->p <= '9') {
			ps->p++;
			digits = true;
		}
	}
	if (!digits) {
		ps->p = start;
		return (syntax(ps, "a number"));
	}
	if (*ps->p == 'e' || *ps->p == 'E') {
		*isint = false;
		ps->p++;
		if (*ps->p == '-' || *ps->p == '+')
			ps->p++;
		if (!(*ps->p >= '0' && *ps->p <= '9'))
			return (syntax(ps, "an exponent"));
		while (*ps->p >= '0' && *ps->p <= '9')
			ps->p++;
	}
	if ((size_t)(ps->p - start) >= sizeof buf)
		return (perr(ps->cause, "pipeline: number '%.32s...' is too "
		    "long", start));
	memcpy(buf, start, ps->p - start);
	buf[ps->p - start] = '\0';
	*v = strtod(buf, NULL);
	if (neg)
		*v = -*v;
	return (0);
}

/* A number, or a quotient of two as Python computes it (3/4, 4.0/3). */
static int
parse_number(struct parser *ps, struct pval *v)
{
	double	d;
	bool	isint;

	if (parse_literal(ps, &v->num, &v->isint) != 0)
		return (-1);
	v->kind = PV_NUM;
	if (eat(ps, '/')) {
		if (parse_literal(ps, &d, &isint) != 0)
			return (-1);
		if (d == 0)
			return (perr(ps->cause, "pipeline: division by zero at "
			    "character %zu", (size_t)(ps->p - ps->text)));
		v->num /= d;
		v->isint = false;
	}
	return (0);
}

/* A value: number, (tuple), [list], name or 'string'. */
static int
parse_value(struct parser *ps, struct pval *v)
{
	const char	*start, *q;
	char		 close;
	size_t		 n;
	bool		 comma = false;

	memset(v, 0, sizeof *v);
	skip_space(ps);
	start = ps->p;
	if (*ps->p == '(' || *ps->p == '[') {
		close = *ps->p == '(' ? ')' : ']';
		ps->p++;
		v->kind = PV_SEQ;
		while (!eat(ps, close)) {
			struct pval	e;

			if (parse_value(ps, &e) != 0)
				return (-1);
			if (e.kind == PV_SEQ && close == ')' && !comma &&
			    eat(ps, ')')) {
				*v = e;	/* ((a, b)) is (a, b) */
				goto done;
			}
			if (e.kind != PV_NUM)
				return (perr(ps->cause, "pipeline: '%s' in a "
				    "sequence: only numbers are expected there",
				    e.text));
			if (v->len == PV_MAX_SEQ)
				return (perr(ps->cause, "pipeline: a sequence "
				    "of more than %d numbers", PV_MAX_SEQ));
			v->seq[v->len] = e.num;
			v->seqint[v->len] = e.isint;
			v->len++;
			if (eat(ps, ','))
				comma = true;
			else if (!eat(ps, close))
				return (syntax(ps, close == ')' ? "',' or ')'" :
				    "',' or ']'"));
			else
				break;
		}
		if (close == ')' && v->len == 1 && !comma) {
			v->kind = PV_NUM;	/* (224) is 224 */
			v->num = v->seq[0];
			v->isint = v->seqint[0];
		}
	} else if (*ps->p == '\'' || *ps->p == '"') {
		close = *ps->p++;
		q = strchr(ps->p, close);
		if (q == NULL)
			return (syntax(ps, "the end of the string"));
		n = q - ps->p;
		if (n >= sizeof v->name)
			return (perr(ps->cause, "pipeline: string too long"));
		memcpy(v->name, ps->p, n);
		v->name[n] = '\0';
		v->kind = PV_STR;
		ps->p = q + 1;
	} else if (*ps->p == '_' || (*ps->p >= 'a' && *ps->p <= 'z') ||
	    (*ps->p >= 'A' && *ps->p <= 'Z')) {
		if (parse_ident(ps, v->name, sizeof v->name) != 0)
			return (-1);
		v->kind = PV_NAME;
	} else if (parse_number(ps, v) != 0)
		return (-1);
done:
	n = ps->p - start;
	if (n >= sizeof v->text)
		n = sizeof v->text - 1;
	memcpy(v->text, start, n);
	v->text[n] = '\0';
	return (0);
}

/* The arguments of call @name up to its ')': bound to @c's parameters. */
static int
parse_call(struct parser *ps, struct pcall *c, const char *name)
{
	char		 kw[64];
	const char	*save;
	unsigned int	 i, npos = 0;
	bool		 keyword = false;

	while (!eat(ps, ')')) {
		skip_space(ps);
		save = ps->p;
		i = c->nparams;
		if (parse_ident(ps, kw, sizeof kw) == 0 && eat(ps, '=')) {
			for (i = 0; i < c->nparams; i++)
				if (strcmp(kw, c->params[i]) == 0)
					break;
			if (i == c->nparams)
				return (perr(ps->cause, "%s: unexpected keyword "
				    "argument '%s'", name, kw));
			keyword = true;
		} else {
			if (ps->cause != NULL) {
				free(*ps->cause);
				*ps->cause = NULL;
			}
			ps->p = save;
			if (keyword)
				return (perr(ps->cause, "%s: a positional "
				    "argument follows a keyword argument",
				    name));
			if (npos >= c->nparams)
				return (perr(ps->cause, "%s: takes at most %u "
				    "argument%s", name, c->nparams,
				    c->nparams == 1 ? "" : "s"));
			i = npos++;
		}
		if (c->set[i])
			return (perr(ps->cause, "%s: got multiple values for "
			    "argument '%s'", name, c->params[i]));
		if (parse_value(ps, &c->arg[i]) != 0)
			return (-1);
		c->set[i] = true;
		if (!eat(ps, ',')) {
			if (!eat(ps, ')'))
				return (syntax(ps, "',' or ')'"));
			break;
		}
	}
	return (0);
}

/* A size: an int, [n] or (h, w), each 1..IMAGE_MAX_SIZE. */
static int
get_size(const char *t, const char *what, const struct pval *v, uint32_t *h,
    uint32_t *w, bool *single, char **cause)
{
	double		d[2];
	unsigned int	i, n;

	if (v->kind == PV_NUM) {
		d[0] = d[1] = v->num;
		n = 1;
		if (!v->isint)
			return (perr(cause, "%s: %s %s is not an integer", t,
			    what, v->text));
	} else if (v->kind == PV_SEQ && (v->len == 1 || v->len == 2)) {
		n = v->len;
		for (i = 0; i < n; i++) {
			if (!v->seqint[i])
				return (perr(cause, "%s: %s %s is not a "
				    "sequence of integers", t, what, v->text));
			d[i] = v->seq[i];
		}
		if (n == 1)
			d[1] = d[0];
	} else
		return (perr(cause, "%s: %s %s: expected an int, [n] or (h, w)",
		    t, what, v->text));
	for (i = 0; i < 2; i++)
		if (!(d[i] >= 1 && d[i] <= IMAGE_MAX_SIZE))
			return (perr(cause, "%s: %s %s is out of range: sizes go "
			    "from 1 to %d", t, what, v->text, IMAGE_MAX_SIZE));
	*h = (uint32_t)d[0];
	*w = (uint32_t)d[1];
	if (single != NULL)
		*single = n == 1;
	return (0);
}

/* A pair of finite numbers, (a, b) or [a, b]. */
static int
get_pair(const char *t, const char *what, const struct pval *v, double *d,
    char **cause)
{
	if (v->kind != PV_SEQ || v->len != 2)
		return (perr(cause, "%s: %s %s: expected a pair (min, max)", t,
		    what, v->text));
	d[0] = v->seq[0];
	d[1] = v->seq[1];
	if (!isfinite(d[0]) || !isfinite(d[1]))
		return (perr(cause, "%s: %s %s is not finite", t, what,
		    v->text));
	if (d[0] > d[1])
		return (perr(cause, "%s: %s %s is not increasing", t, what,
		    v->text));
	return (0);
}

/* interpolation: only bilinear, however it is written. */
static int
get_interp(const char *t, const struct pcall *c, unsigned int i, char **cause)
{
	const struct pval	*v = &c->arg[i];
	const char		*last;

	if (!c->set[i])
		return (0);
	if (v->kind == PV_NUM && v->isint && v->num == 2)
		return (0);
	if (v->kind == PV_STR && strcmp(v->name, "bilinear") == 0)
		return (0);
	if (v->kind == PV_NAME) {
		last = strrchr(v->name, '.');
		last = last == NULL ? v->name : last + 1;
		if (strcmp(last, "BILINEAR") == 0)
			return (0);
	}
	return (perr(cause, "%s: interpolation %s is not supported: infeed "
	    "resamples only with InterpolationMode.BILINEAR (as PIL)", t,
	    v->text));
}

/* antialias: True or None (PIL images are always antialiased). */
static int
get_antialias(const char *t, const struct pcall *c, unsigned int i,
    char **cause)
{
	const struct pval	*v = &c->arg[i];

	if (!c->set[i] || (v->kind == PV_NAME && (strcmp(v->name, "True") ==
	    0 || strcmp(v->name, "None") == 0)))
		return (0);
	return (perr(cause, "%s: antialias=%s is not supported: infeed "
	    "resamples PIL images, which are always antialiased (True or "
	    "None)", t, v->text));
}

/* Normalize's mean or std: one value (broadcast) or three, as float32. */
static int
get_channels(const char *what, const struct pval *v, float *out, bool isstd,
    char **cause)
{
	double		d[3];
	unsigned int	i, n;

	if (v->kind == PV_NUM) {
		n = 1;
		d[0] = v->num;
	} else if (v->kind == PV_SEQ && (v->len == 1 || v->len == 3)) {
		n = v->len;
		for (i = 0; i < n; i++)
			d[i] = v->seq[i];
	} else
		return (perr(cause, "Normalize: %s %s: expected one value or "
		    "three (one per channel of RGB)", what, v->text));
	for (i = 0; i < 3; i++) {
		if (!isfinite(d[n == 1 ? 0 : i]) ||
		    fabs(d[n == 1 ? 0 : i]) > 3.4e38)
			return (perr(cause, "Normalize: %s %s is not finite in "
			    "float32", what, v->text));
		out[i] = (float)d[n == 1 ? 0 : i];
		if (isstd && out[i] == 0)
			return (perr(cause, "Normalize: std %s evaluated to "
			    "zero after conversion to float32, leading to "
			    "division by zero", v->text));
	}
	return (0);
}

/* What the transforms read so far allow next, and how they read. */
struct seen {
	bool	geom, resize, ccrop, flip, tensor, norm;
	char	crop_name[64];	/* the last of RandomResizedCrop, Resize
				   and CenterCrop */
};

/* Read "Compose([" or "Compose(transforms=[", or "[", or neither. */
static int
parse_opening(struct parser *ps, bool *compose, bool *list)
{
	char		 name[64];
	const char	*dot, *save;

	*compose = *list = false;
	skip_space(ps);
	save = ps->p;
	if (parse_ident(ps, name, sizeof name) == 0 && eat(ps, '(')) {
		dot = strrchr(name, '.');
		*compose = strcmp(dot == NULL ? name : dot + 1, "Compose") == 0;
	}
	if (ps->cause != NULL) {
		free(*ps->cause);
		*ps->cause = NULL;
	}
	if (!*compose) {
		ps->p = save;
		if (eat(ps, '['))
			*list = true;
		return (0);
	}
	skip_space(ps);
	if (strncmp(ps->p, "transforms", 10) == 0 && (ps->p[10] == '=' ||
	    ps->p[10] == ' ')) {
		ps->p += 10;
		if (!eat(ps, '='))
			return (syntax(ps, "'='"));
	}
	if (!eat(ps, '['))
		return (syntax(ps, "'[' after Compose("));
	return (0);
}

/*
 * Read one transform, "Name(arguments)", into @c, with @t its name without
 * a module ("transforms.Resize" is Resize); an unknown name is refused.
 */
static int
parse_transform(struct parser *ps, struct pcall *c, char *name, size_t len,
    const char **t)
{
	const char	*dot;

	if (parse_ident(ps, name, len) != 0)
		return (-1);
	dot = strrchr(name, '.');
	*t = dot == NULL ? name : dot + 1;
	memset(c, 0, sizeof *c);
	if (strcmp(*t, "RandomResizedCrop") == 0) {
		c->params = rrc_params;
		c->nparams = 5;
	} else if (strcmp(*t, "Resize") == 0) {
		c->params = resize_params;
		c->nparams = 4;
	} else if (strcmp(*t, "CenterCrop") == 0) {
		c->params = ccrop_params;
		c->nparams = 1;
	} else if (strcmp(*t, "RandomHorizontalFlip") == 0) {
		c->params = flip_params;
		c->nparams = 1;
	} else if (strcmp(*t, "Normalize") == 0) {
		c->params = normalize_params;
		c->nparams = 3;
	} else if (strcmp(*t, "ToTensor") != 0 &&
	    strcmp(*t, "PILToTensor") != 0)
		return (perr(ps->cause, "unknown transform '%s': %s", *t,
		    known));
	c->name = *t;
	if (!eat(ps, '('))
		return (syntax(ps, "'(' after the transform's name"));
	return (parse_call(ps, c, *t));
}

/* Is @c one of RandomResizedCrop, Resize and CenterCrop? */
static bool
is_geometry(const struct pcall *c)
{
	return (c->params == rrc_params || c->params == resize_params ||
	    c->params == ccrop_params);
}

/* Refuse transform @t where the ones seen so far do not allow it. */
static int
check_order(const struct seen *s, const struct image_pipeline *p,
    const struct pcall *c, const char *t, char **cause)
{
	if (s->tensor && strcmp(t, "Normalize") != 0 &&
	    strcmp(t, "RandomHorizontalFlip") != 0)
		return (perr(cause, "%s after %s: infeed runs the transforms "
		    "of PIL images first, then ToTensor or PILToTensor, then "
		    "Normalize", t, p->output == IMAGE_OUT_FLOAT32_CHW ?
		    "ToTensor" : "PILToTensor"));
	if (!is_geometry(c))
		return (0);
	if (s->flip)
		return (perr(cause, "%s after RandomHorizontalFlip: infeed "
		    "flips after cropping and resizing; put "
		    "RandomHorizontalFlip after %s", t, t));
	if (s->geom && !(s->resize && !s->ccrop &&
	    strcmp(t, "CenterCrop") == 0))
		return (perr(cause, "%s after %s: infeed runs one of "
		    "RandomResizedCrop, Resize, CenterCrop, or Resize then "
		    "CenterCrop", t, s->crop_name));
	return (0);
}

/* RandomResizedCrop(size, scale, ratio, interpolation, antialias). */
static int
set_random_resized_crop(struct seen *s, struct image_pipeline *p,
    const struct pcall *c, const char *t, char **cause)
{
	double	d[2];

	if (!c->set[0])
		return (perr(cause, "RandomResizedCrop: missing required "
		    "argument 'size'"));
	if (get_size(t, "size", &c->arg[0], &p->crop_h, &p->crop_w, NULL,
	    cause) != 0)
		return (-1);
	d[0] = 0.08;
	d[1] = 1.0;
	if (c->set[1] && get_pair(t, "scale", &c->arg[1], d, cause) != 0)
		return (-1);
	if (!(d[0] > 0 && d[1] <= 1))
		return (perr(cause, "RandomResizedCrop: scale %s is out of "
		    "range: scale values are fractions of the image's area, "
		    "in (0, 1]", c->arg[1].text));
	p->scale[0] = (float)d[0];
	p->scale[1] = (float)d[1];
	d[0] = 3.0 / 4.0;
	d[1] = 4.0 / 3.0;
	if (c->set[2] && get_pair(t, "ratio", &c->arg[2], d, cause) != 0)
		return (-1);
	if (!(d[0] >= 1e-3 && d[1] <= 1e3))
		return (perr(cause, "RandomResizedCrop: ratio %s is out of "
		    "range: aspect ratios (width / height) go from 0.001 to "
		    "1000", c->arg[2].text));
	p->ratio64[0] = d[0];
	p->ratio64[1] = d[1];
	p->ratio[0] = (float)d[0];
	p->ratio[1] = (float)d[1];
	if (get_interp(t, c, 3, cause) != 0 ||
	    get_antialias(t, c, 4, cause) != 0)
		return (-1);
	p->crop = IMAGE_CROP_RANDOM_RESIZED;
	s->geom = true;
	return (0);
}

/* Resize's max_size (argument 2), when given and not None. */
static int
set_max_size(struct image_pipeline *p, const struct pcall *c, bool single,
    uint32_t h, char **cause)
{
	const struct pval	*v = &c->arg[2];

	if (!c->set[2] || (v->kind == PV_NAME && strcmp(v->name, "None") ==
	    0))
		return (0);
	if (v->kind != PV_NUM || !v->isint)
		return (perr(cause, "Resize: max_size %s is not an integer",
		    v->text));
	if (!single)
		return (perr(cause, "Resize: max_size should only be passed "
		    "if size specifies the length of the smaller edge, i.e. "
		    "size should be an int"));
	if (!(v->num > h))
		return (perr(cause, "Resize: max_size = %s must be strictly "
		    "greater than the requested size for the smaller edge "
		    "size = %u", v->text, h));
	if (v->num > IMAGE_MAX_SIZE)
		return (perr(cause, "Resize: max_size %s is out of range: "
		    "sizes go from 1 to %d", v->text, IMAGE_MAX_SIZE));
	p->max_size = (uint32_t)v->num;
	return (0);
}

/* Resize(size, interpolation, max_size, antialias). */
static int
set_resize(struct seen *s, struct image_pipeline *p, const struct pcall *c,
    const char *t, char **cause)
{
	uint32_t	h, w;
	bool		single;

	if (!c->set[0])
		return (perr(cause, "Resize: missing required argument "
		    "'size'"));
	if (get_size(t, "size", &c->arg[0], &h, &w, &single, cause) != 0)
		return (-1);
	if (single)
		p->resize = h;
	else {
		p->resize_h = h;
		p->resize_w = w;
	}
	if (set_max_size(p, c, single, h, cause) != 0 ||
	    get_interp(t, c, 1, cause) != 0 ||
	    get_antialias(t, c, 3, cause) != 0)
		return (-1);
	s->geom = s->resize = true;
	return (0);
}

/* CenterCrop(size). */
static int
set_center_crop(struct seen *s, struct image_pipeline *p,
    const struct pcall *c, const char *t, char **cause)
{
	if (!c->set[0])
		return (perr(cause, "CenterCrop: missing required argument "
		    "'size'"));
	if (get_size(t, "size", &c->arg[0], &p->crop_h, &p->crop_w, NULL,
	    cause) != 0)
		return (-1);
	p->crop = IMAGE_CROP_CENTER;
	s->geom = s->ccrop = true;
	return (0);
}

/* RandomHorizontalFlip(p), once. */
static int
set_flip(struct seen *s, struct image_pipeline *p, const struct pcall *c,
    char **cause)
{
	double	prob = 0.5;

	if (s->flip)
		return (perr(cause, "RandomHorizontalFlip twice: infeed flips "
		    "at most once"));
	if (c->set[0]) {
		if (c->arg[0].kind != PV_NUM)
			return (perr(cause, "RandomHorizontalFlip: p %s is not "
			    "a number", c->arg[0].text));
		prob = c->arg[0].num;
	}
	if (!(prob >= 0 && prob <= 1))
		return (perr(cause, "RandomHorizontalFlip: p %s is out of "
		    "range: a probability, in [0, 1]", c->arg[0].text));
	p->flip_p = (float)prob;
	s->flip = true;
	return (0);
}

/* ToTensor() or PILToTensor(), once. */
static int
set_to_tensor(struct seen *s, struct image_pipeline *p, const char *t,
    char **cause)
{
	if (s->tensor)
		return (perr(cause, "%s after %s: a pipeline converts to a "
		    "tensor once", t, p->output == IMAGE_OUT_FLOAT32_CHW ?
		    "ToTensor" : "PILToTensor"));
	p->output = t[0] == 'T' ? IMAGE_OUT_FLOAT32_CHW : IMAGE_OUT_UINT8_CHW;
	s->tensor = true;
	return (0);
}

/* Normalize(mean, std, inplace), once, after ToTensor. */
static int
set_normalize(struct seen *s, struct image_pipeline *p,
    const struct pcall *c, char **cause)
{
	if (!s->tensor)
		return (perr(cause, "Normalize before ToTensor: Normalize "
		    "needs a float tensor; put ToTensor() before it"));
	if (p->output != IMAGE_OUT_FLOAT32_CHW)
		return (perr(cause, "Normalize after PILToTensor: Normalize "
		    "needs a float tensor; use ToTensor() instead"));
	if (s->norm)
		return (perr(cause, "Normalize twice: infeed normalises "
		    "once"));
	if (!c->set[0] || !c->set[1])
		return (perr(cause, "Normalize: missing required argument "
		    "'%s'", c->set[0] ? "std" : "mean"));
	if (get_channels("mean", &c->arg[0], p->mean, false, cause) != 0 ||
	    get_channels("std", &c->arg[1], p->std, true, cause) != 0)
		return (-1);
	if (c->set[2] && !(c->arg[2].kind == PV_NAME &&
	    (strcmp(c->arg[2].name, "True") == 0 ||
	    strcmp(c->arg[2].name, "False") == 0)))
		return (perr(cause, "Normalize: inplace %s is not True or "
		    "False", c->arg[2].text));
	p->normalize = 1;
	s->norm = true;
	return (0);
}

/* Apply transform @t, read into @c, to @p. */
static int
set_transform(struct seen *s, struct image_pipeline *p,
    const struct pcall *c, const char *t, char **cause)
{
	int	rc;

	if (check_order(s, p, c, t, cause) != 0)
		return (-1);
	if (strcmp(t, "RandomResizedCrop") == 0)
		rc = set_random_resized_crop(s, p, c, t, cause);
	else if (strcmp(t, "Resize") == 0)
		rc = set_resize(s, p, c, t, cause);
	else if (strcmp(t, "CenterCrop") == 0)
		rc = set_center_crop(s, p, c, t, cause);
	else if (strcmp(t, "RandomHorizontalFlip") == 0)
		rc = set_flip(s, p, c, cause);
	else if (strcmp(t, "ToTensor") == 0 || strcmp(t, "PILToTensor") == 0)
		rc = set_to_tensor(s, p, t, cause);
	else
		rc = set_normalize(s, p, c, cause);
	if (rc == 0 && is_geometry(c))
		snprintf(s->crop_name, sizeof s->crop_name, "%s", t);
	return (rc);
}

/* Every sample's output size, which a pipeline must fix. */
static int
set_output_size(struct image_pipeline *p, char **cause)
{
	if (p->crop != IMAGE_CROP_NONE) {
		p->out_h = p->crop_h;
		p->out_w = p->crop_w;
	} else if (p->resize_h != 0) {
		p->out_h = p->resize_h;
		p->out_w = p->resize_w;
	} else if (p->resize != 0)
		return (perr(cause, "Resize(%u) alone gives images of "
		    "different sizes: add CenterCrop(%u) or use "
		    "RandomResizedCrop", p->resize, p->resize * 7 / 8 > 0 ?
		    p->resize * 7 / 8 : 1));
	else
		return (perr(cause, "pipeline: without RandomResizedCrop, "
		    "Resize or CenterCrop, images keep their own sizes: add "
		    "RandomResizedCrop(224), or Resize(256) and "
		    "CenterCrop(224)"));
	p->out_bytes = (uint64_t)p->out_h * p->out_w * 3 *
	    (p->output == IMAGE_OUT_FLOAT32_CHW ? 4 : 1);
	return (0);
}

/**
 * image_pipeline_parse() - parse a pipeline written as torchvision code
 * @text: e.g. "RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor()",
 *	optionally inside Compose([...])
 * @p: filled on success
 * @cause: on failure, a malloc'd message naming the transform and the fault
 *
 * Return: 0, or -1 with *@cause set.
 */
int
image_pipeline_parse(const char *text, struct image_pipeline *p, char **cause)
{
	struct parser	 ps = { text, text, cause };
	struct seen	 s = { 0 };
	struct pcall	 c;
	char		 name[64];
	const char	*t;
	bool		 compose, list;

	if (cause != NULL)
		*cause = NULL;
	memset(p, 0, sizeof *p);
	p->output = IMAGE_OUT_UINT8_HWC;
	p->std[0] = p->std[1] = p->std[2] = 1;

	if (parse_opening(&ps, &compose, &list) != 0)
		return (-1);
	for (;;) {
		skip_space(&ps);
		if (*ps.p == '\0' || *ps.p == ']')
			break;
		if (parse_transform(&ps, &c, name, sizeof name, &t) != 0 ||
		    set_transform(&s, p, &c, t, cause) != 0)
			return (-1);
		if (!eat(&ps, ','))
			break;
	}
	if ((compose || list) && !eat(&ps, ']'))
		return (syntax(&ps, "',' or ']'"));
	if (compose && !eat(&ps, ')'))
		return (syntax(&ps, "')' closing Compose("));
	skip_space(&ps);
	if (*ps.p != '\0')
		return (syntax(&ps, "',' between transforms"));
	return (set_output_size(p, cause));
}

/* The shortest decimal that reads back as @v (Python's repr of float32). */
static const char *
fmt_float(char *buf, size_t len, float v)
{
	int	prec;

	for (prec = 1; prec < 10; prec++) {
		snprintf(buf, len, "%.*g", prec, (double)v);
		if ((float)strtod(buf, NULL) == v)
			break;
	}
	if (strpbrk(buf, ".en") == NULL && strlen(buf) + 3 <= len)
		strcat(buf, ".0");
	return (buf);
}

/* The shortest decimal that reads back as @v (Python's repr). */
static const char *
fmt_double(char *buf, size_t len, double v)
{
	int	prec;

	for (prec = 1; prec < 18; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	if (strpbrk(buf, ".en") == NULL && strlen(buf) + 3 <= len)
		strcat(buf, ".0");
	return (buf);
}

/* Append to @buf as snprintf would, keeping what fits. */
static void
append(char *buf, size_t len, const char *fmt, ...)
{
	va_list	ap;
	size_t	used = strlen(buf);

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* Append a size: an int when square, else (h, w). */
static void
append_size(char *buf, size_t len, uint32_t h, uint32_t w)
{
	if (h == w)
		append(buf, len, "%u", h);
	else
		append(buf, len, "(%u, %u)", h, w);
}

/**
 * image_pipeline_format() - the canonical text of a pipeline
 * @p: a pipeline image_pipeline_parse() accepted
 * @buf: where to write it, NUL-terminated and cut to fit
 * @len: size of @buf
 *
 * Parsing the text gives @p again.
 *
 * Return: @buf.
 */
char *
image_pipeline_format(const struct image_pipeline *p, char *buf, size_t len)
{
	char		 a[40], b[40], m[3][40], s[3][40];
	const char	*sep = "";
	int		 i;

	if (len == 0)
		return (buf);
	buf[0] = '\0';
	if (p->crop == IMAGE_CROP_RANDOM_RESIZED) {
		append(buf, len, "RandomResizedCrop(size=");
		append_size(buf, len, p->crop_h, p->crop_w);
		append(buf, len, ", scale=(%s, ", fmt_float(a, sizeof a,
		    p->scale[0]));
		append(buf, len, "%s), ratio=(", fmt_float(a, sizeof a,
		    p->scale[1]));
		append(buf, len, "%s, %s))", fmt_double(a, sizeof a,
		    p->ratio64[0]), fmt_double(b, sizeof b, p->ratio64[1]));
		sep = ", ";
	}
	if (p->resize != 0 || p->resize_h != 0) {
		append(buf, len, "Resize(size=");
		if (p->resize != 0)
			append(buf, len, "%u", p->resize);
		else
			append(buf, len, "(%u, %u)", p->resize_h, p->resize_w);
		if (p->max_size != 0)
			append(buf, len, ", max_size=%u", p->max_size);
		append(buf, len, ")");
		sep = ", ";
	}
	if (p->crop == IMAGE_CROP_CENTER) {
		append(buf, len, "%sCenterCrop(size=", sep);
		append_size(buf, len, p->crop_h, p->crop_w);
		append(buf, len, ")");
		sep = ", ";
	}
	if (p->flip_p > 0) {
		append(buf, len, "%sRandomHorizontalFlip(p=%s)", sep,
		    fmt_float(a, sizeof a, p->flip_p));
		sep = ", ";
	}
	if (p->output == IMAGE_OUT_FLOAT32_CHW)
		append(buf, len, "%sToTensor()", sep);
	else if (p->output == IMAGE_OUT_UINT8_CHW)
		append(buf, len, "%sPILToTensor()", sep);
	if (p->normalize) {
		for (i = 0; i < 3; i++) {
			fmt_float(m[i], sizeof m[i], p->mean[i]);
			fmt_float(s[i], sizeof s[i], p->std[i]);
		}
		append(buf, len, ", Normalize(mean=[%s, %s, %s], std=[%s, %s, "
		    "%s])", m[0], m[1], m[2], s[0], s[1], s[2]);
	}
	return (buf);
}
