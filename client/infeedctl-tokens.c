/* SPDX-License-Identifier: MIT */
/*
 * infeedctl tokens: the files of a token dataset (docs/tokens.md), made
 * from what language-model corpora come as, with no daemon:
 *
 *   infeedctl tokens index --eot ID [--dtype T] FILE.bin [OUT.idx]
 *	the index of documents (N + 1 uint64 offsets) of a file whose
 *	documents each end with ID, as nanoGPT's train.bin (eot 50256);
 *	OUT defaults to FILE with .idx for .bin.  infeedd reads such a file
 *	with 'eot =' too, but scans it at every open: the index opens at
 *	once.
 *   infeedctl tokens convert [--dtype T] [--key NAME] IN.jsonl PREFIX
 *	PREFIX.bin and PREFIX.idx from a JSON-lines file, one document a
 *	line: a JSON array of token ids, or with --key an object whose NAME
 *	holds one ({"input_ids": [464, 2068]}); blank lines are skipped.
 *
 * T is uint16 (the default) or uint32; ids must fit it, and uint32 ids
 * stay below 2^31 (rows are int32).  Both read and write a buffer at a
 * time, so files of any size take little memory.  Python's side
 * (infeed.write_tokens_text()) tokenizes text with a given tokenizer.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infeedctl-tokens.h"
#include "number.h"

#define TOKENS_BUF	(1 << 16)	/* ids a read */

/* A token file being written: ids, then offsets. */
struct tokens_out {
	FILE		*bin;
	FILE		*idx;
	const char	*bin_path;
	const char	*idx_path;
	unsigned	 tsize;		/* 2 or 4 */
	uint64_t	 ntok;
	uint64_t	 ndocs;
};

/* Print the usage of the tokens commands to @fp. */
static void
tokens_usage(FILE *fp)
{
	fprintf(fp,
	    "usage: infeedctl tokens index --eot ID [--dtype uint16|uint32] "
	    "FILE.bin [OUT.idx]\n"
	    "       infeedctl tokens convert [--dtype uint16|uint32] "
	    "[--key NAME] IN.jsonl PREFIX\n");
}

/* Write @n bytes at @p to @fp, named @path; false (said why) on failure. */
static bool
tokens_write(FILE *fp, const char *path, const void *p, size_t n)
{
	if (fwrite(p, 1, n, fp) == n)
		return (true);
	fprintf(stderr, "infeedctl: writing %s: %s\n", path, strerror(errno));
	return (false);
}

/* Close @fp, named @path; false (said why) on a failed write. */
static bool
tokens_close(FILE *fp, const char *path)
{
	if (fp == NULL || fclose(fp) == 0)
		return (true);
	fprintf(stderr, "infeedctl: writing %s: %s\n", path, strerror(errno));
	return (false);
}

/* Open @path for writing, or say why not. */
static FILE *
tokens_create(const char *path)
{
	FILE	*fp = fopen(path, "wb");

	if (fp == NULL)
		fprintf(stderr, "infeedctl: cannot create %s: %s\n", path,
		    strerror(errno));
	return (fp);
}

/* The dtype's size from "uint16" or "uint32"; 0 (said why) otherwise. */
static unsigned
tokens_dtype(const char *v)
{
	if (strcmp(v, "uint16") == 0)
		return (2);
	if (strcmp(v, "uint32") == 0)
		return (4);
	fprintf(stderr, "infeedctl: --dtype %s: token ids are uint16 or "
	    "uint32\n", v);
	return (0);
}

/* The largest id of @tsize bytes that a row holds. */
static uint64_t
tokens_id_max(unsigned tsize)
{
	return (tsize == 2 ? UINT16_MAX : INT32_MAX);
}

/* The index of @bin_path's documents, each ended by @eot, into @idx_path. */
static int
tokens_index(const char *bin_path, const char *idx_path, unsigned tsize,
    uint64_t eot)
{
	static uint8_t	 buf[TOKENS_BUF * 4];
	FILE		*in, *out;
	uint64_t	 at = 0, zero = 0, docs = 0, last = 0, id;
	size_t		 n, i;
	bool		 ok;

	if ((in = fopen(bin_path, "rb")) == NULL) {
		fprintf(stderr, "infeedctl: cannot open %s: %s\n", bin_path,
		    strerror(errno));
		return (1);
	}
	if ((out = tokens_create(idx_path)) == NULL) {
		fclose(in);
		return (1);
	}
	ok = tokens_write(out, idx_path, &zero, sizeof zero);
	while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) {
		if (n % tsize != 0 && !feof(in)) {
			/* A short read mid-id: keep reading to a whole one. */
			n += fread(buf + n, 1, tsize - n % tsize, in);
		}
		if (n % tsize != 0) {
			fprintf(stderr, "infeedctl: %s: its size is not a whole "
			    "number of %s ids; check --dtype\n", bin_path,
			    tsize == 2 ? "uint16" : "uint32");
			ok = false;
			break;
		}
		for (i = 0; ok && i < n; i += tsize) {
			if (tsize == 2) {
				uint16_t v;

				memcpy(&v, buf + i, 2);
				id = v;
			} else {
				uint32_t v;

				memcpy(&v, buf + i, 4);
				id = v;
			}
			at++;
			if (id == eot) {
				ok = tokens_write(out, idx_path, &at,
				    sizeof at);
				docs++;
				last = at;
			}
		}
	}
	if (ok && ferror(in)) {
		fprintf(stderr, "infeedctl: reading %s: %s\n", bin_path,
		    strerror(errno));
		ok = false;
	}
	/* The last document may end with the file instead. */
	if (ok && at > last) {
		ok = tokens_write(out, idx_path, &at, sizeof at);
		docs++;
	}
	if (ok && docs == 0) {
		fprintf(stderr, "infeedctl: %s holds no token: nothing to "
		    "index\n", bin_path);
		ok = false;
	}
	fclose(in);
	ok = tokens_close(out, idx_path) && ok;
	if (!ok) {
		remove(idx_path);
		return (1);
	}
	printf("%s: %" PRIu64 " documents, %" PRIu64 " tokens\n", idx_path,
	    docs, at);
	return (0);
}

/* Append id @id to the token file. */
static bool
tokens_put(struct tokens_out *o, uint64_t id)
{
	uint16_t	s = (uint16_t)id;
	uint32_t	w = (uint32_t)id;

	o->ntok++;
	if (o->tsize == 2)
		return (tokens_write(o->bin, o->bin_path, &s, 2));
	return (tokens_write(o->bin, o->bin_path, &w, 4));
}

/*
 * One line's document: the JSON array at the line's start, or after
 * "@key": in an object, of ids that fit the dtype.  0, or -1 said why.
 */
static int
tokens_line(struct tokens_out *o, const char *in_path, uint64_t lineno,
    const char *line, const char *key)
{
	const char	*p = line, *k;
	uint64_t	 id, n = 0;
	char		 want[300];

	while (*p == ' ' || *p == '\t')
		p++;
	if (key != NULL) {
		snprintf(want, sizeof want, "\"%s\"", key);
		if ((k = strstr(p, want)) == NULL) {
			fprintf(stderr, "infeedctl: %s:%" PRIu64 ": no key "
			    "\"%s\"; expected an object such as {\"%s\": [464, "
			    "2068]} (--key names the key)\n", in_path, lineno,
			    key, key);
			return (-1);
		}
		p = k + strlen(want);
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == ':')
			p++;
		while (*p == ' ' || *p == '\t')
			p++;
	}
	if (*p != '[') {
		fprintf(stderr, "infeedctl: %s:%" PRIu64 ": column %zu: "
		    "expected a JSON array of token ids such as [464, 2068]%s\n",
		    in_path, lineno, (size_t)(p - line) + 1, key == NULL ?
		    " (an object's array: --key NAME)" : "");
		return (-1);
	}
	p++;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == ']' && n == 0)
			break;
		if (*p < '0' || *p > '9') {
			fprintf(stderr, "infeedctl: %s:%" PRIu64 ": column %zu: "
			    "expected a token id (a whole number from 0)\n",
			    in_path, lineno, (size_t)(p - line) + 1);
			return (-1);
		}
		for (id = 0; *p >= '0' && *p <= '9'; p++) {
			if (id > (UINT64_MAX - 9) / 10)
				id = UINT64_MAX;
			else
				id = id * 10 + (uint64_t)(*p - '0');
		}
		if (id > tokens_id_max(o->tsize)) {
			fprintf(stderr, "infeedctl: %s:%" PRIu64 ": id %" PRIu64
			    " does not fit %s (up to %" PRIu64 ")%s\n", in_path,
			    lineno, id, o->tsize == 2 ? "uint16" : "uint32",
			    tokens_id_max(o->tsize), o->tsize == 2 ?
			    "; use --dtype uint32" : "; rows are int32");
			return (-1);
		}
		if (!tokens_put(o, id))
			return (-1);
		n++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p == ']')
			break;
		fprintf(stderr, "infeedctl: %s:%" PRIu64 ": column %zu: "
		    "expected ',' or ']' after a token id\n", in_path, lineno,
		    (size_t)(p - line) + 1);
		return (-1);
	}
	if (n == 0) {
		fprintf(stderr, "infeedctl: %s:%" PRIu64 ": an empty "
		    "document; each holds a token at least (leave the line "
		    "out)\n", in_path, lineno);
		return (-1);
	}
	o->ndocs++;
	return (tokens_write(o->idx, o->idx_path, &o->ntok, sizeof o->ntok) ?
	    0 : -1);
}

/* PREFIX.bin and PREFIX.idx from the JSON lines of @in_path. */
static int
tokens_convert(const char *in_path, const char *prefix, unsigned tsize,
    const char *key)
{
	struct tokens_out	 o;
	FILE			*in;
	char			*line = NULL, *bin_path, *idx_path;
	size_t			 cap = 0, plen = strlen(prefix);
	uint64_t		 lineno = 0, zero = 0;
	ssize_t			 len;
	int			 rc = 0;

	if ((in = fopen(in_path, "r")) == NULL) {
		fprintf(stderr, "infeedctl: cannot open %s: %s\n", in_path,
		    strerror(errno));
		return (1);
	}
	if ((bin_path = malloc(plen + 5)) == NULL ||
	    (idx_path = malloc(plen + 5)) == NULL) {
		fprintf(stderr, "infeedctl: out of memory\n");
		exit(1);
	}
	snprintf(bin_path, plen + 5, "%s.bin", prefix);
	snprintf(idx_path, plen + 5, "%s.idx", prefix);
	memset(&o, 0, sizeof o);
	o.tsize = tsize;
	o.bin_path = bin_path;
	o.idx_path = idx_path;
	if ((o.bin = tokens_create(bin_path)) == NULL ||
	    (o.idx = tokens_create(idx_path)) == NULL ||
	    !tokens_write(o.idx, idx_path, &zero, sizeof zero))
		rc = 1;
	while (rc == 0 && (len = getline(&line, &cap, in)) != -1) {
		lineno++;
		while (len > 0 && (line[len - 1] == '\n' ||
		    line[len - 1] == '\r' || line[len - 1] == ' '))
			line[--len] = '\0';
		if (len == 0)
			continue;
		if (tokens_line(&o, in_path, lineno, line, key) != 0)
			rc = 1;
	}
	if (rc == 0 && o.ndocs == 0) {
		fprintf(stderr, "infeedctl: %s holds no document\n", in_path);
		rc = 1;
	}
	free(line);
	fclose(in);
	if (!tokens_close(o.bin, bin_path) || !tokens_close(o.idx, idx_path))
		rc = 1;
	if (rc != 0) {
		remove(bin_path);
		remove(idx_path);
	} else
		printf("%s, %s: %" PRIu64 " documents, %" PRIu64 " tokens of "
		    "%s\n", bin_path, idx_path, o.ndocs, o.ntok,
		    tsize == 2 ? "uint16" : "uint32");
	free(bin_path);
	free(idx_path);
	return (rc);
}

/* infeedctl tokens index|convert ... */
int
infeedctl_tokens(int argc, char **argv)
{
	const char	*key = NULL, *pos[2] = { NULL, NULL }, *dot;
	unsigned	 tsize = 2, npos = 0;
	uint64_t	 eot = UINT64_MAX;
	char		*out;
	int		 i, rc;
	bool		 index;

	if (argc < 2 || (strcmp(argv[1], "index") != 0 &&
	    strcmp(argv[1], "convert") != 0)) {
		tokens_usage(stderr);
		return (2);
	}
	index = strcmp(argv[1], "index") == 0;
	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
			if ((tsize = tokens_dtype(argv[++i])) == 0)
				return (2);
		} else if (index && strcmp(argv[i], "--eot") == 0 &&
		    i + 1 < argc) {
			if (number_parse_u64(argv[++i], 0, UINT32_MAX, &eot,
			    NULL) != 0) {
				fprintf(stderr, "infeedctl: --eot %s: expected "
				    "a token id, such as GPT-2's 50256\n",
				    argv[i]);
				return (2);
			}
		} else if (!index && strcmp(argv[i], "--key") == 0 &&
		    i + 1 < argc)
			key = argv[++i];
		else if (argv[i][0] == '-' || npos == 2) {
			fprintf(stderr, "infeedctl: tokens %s: unexpected '%s'\n",
			    argv[1], argv[i]);
			tokens_usage(stderr);
			return (2);
		} else
			pos[npos++] = argv[i];
	}
	if (index && (eot == UINT64_MAX || npos < 1)) {
		fprintf(stderr, "infeedctl: tokens index: give --eot, the id "
		    "that ends each document, and the token file\n");
		return (2);
	}
	if (index && eot > tokens_id_max(tsize)) {
		fprintf(stderr, "infeedctl: --eot %" PRIu64 ": no %s id is "
		    "that large; check --dtype\n", eot, tsize == 2 ?
		    "uint16" : "uint32");
		return (2);
	}
	if (!index && npos != 2) {
		fprintf(stderr, "infeedctl: tokens convert: give the JSON "
		    "lines file and the prefix of the files to write\n");
		return (2);
	}
	if (!index)
		return (tokens_convert(pos[0], pos[1], tsize, key));
	if (pos[1] != NULL)
		return (tokens_index(pos[0], pos[1], tsize, eot));
	/* FILE.bin -> FILE.idx, else FILE.idx appended. */
	dot = strrchr(pos[0], '.');
	if (dot != NULL && strcmp(dot, ".bin") == 0 && strchr(dot, '/') == NULL)
		i = (int)(dot - pos[0]);
	else
		i = (int)strlen(pos[0]);
	if ((out = malloc((size_t)i + 5)) == NULL) {
		fprintf(stderr, "infeedctl: out of memory\n");
		return (1);
	}
	snprintf(out, (size_t)i + 5, "%.*s.idx", i, pos[0]);
	rc = tokens_index(pos[0], out, tsize, eot);
	free(out);
	return (rc);
}
