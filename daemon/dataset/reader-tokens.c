/* SPDX-License-Identifier: MIT */
/*
 * The "tokens" reader: documents of token ids, packed into rows.
 *
 *	[dataset web]
 *	type = tokens
 *	path = /data/web.bin		token ids, uint16 or uint32, host order
 *					(nanoGPT's .bin, Megatron's .bin)
 *	index = /data/web.idx		N + 1 uint64: document i is tokens
 *					[index[i], index[i + 1]); or a
 *					Megatron .idx (by its magic)
 *	eot = 50256			or, without an index: each document
 *					ends with this id (nanoGPT's files)
 *	dtype = uint16			uint16 (the default) or uint32
 *	seq_len = 2048			tokens a row
 *	window = 0			pieces packed at a time (0: all)
 *	repack = epoch			other documents in the rows each
 *					epoch (the default), or none
 *
 * At open both files are checked (sizes, the index starting at 0, rising
 * strictly and ending at the token file's end, uint32 ids below 2^31), or
 * without an index the documents' ends found by their eot id, and
 * the documents are packed into rows of seq_len (common/packing.c,
 * best-fit decreasing; a document longer than seq_len is cut into pieces
 * of seq_len and a remainder).  The packing depends on the files, seq_len
 * and window alone, so it is the same in every process that opens the
 * section; with repack = epoch a row read for (seed, epoch) holds the
 * pieces packing_piece() gives that epoch: the same count of rows, other
 * documents.  The rows are the dataset's samples, which the sampler
 * orders by (seed, epoch) as any other's, with resume and elastic resume
 * as they are.  The index is not kept: the packing holds what it said.
 * The pass over the ids (eot ends, uint32 range) reads the token file
 * with pread before it is mapped: it runs on the catalogue's thread at a
 * reload, and a read that waits on slow storage then holds that thread
 * alone.  The packing's bytes are ds->memory, which the catalogue
 * charges to memory_budget; a packing that ds->memory_room cannot hold
 * is refused before it (or the bounds it is made from) is allocated.
 *
 * A sample is int32 [3, seq_len]: row 0 the token ids, row 1 the position
 * ids (0 at each piece's first token), row 2 the segment ids (1, 2, ...
 * for the row's pieces, 0 for padding); the padding at a row's end has
 * token 0 and positions counting from 0.  A sample's label is the number
 * of pieces in its row.  A slot past the cache (dataset_read()'s
 * stream) is written a chunk at a time through buffers in cache, with
 * streaming stores.  docs/tokens.md has the format and the clients' side.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy.h"
#include "number.h"
#include "packing.h"
#include "reader-tokens.h"

/* What an open tokens dataset holds. */
struct tokens {
	struct dataset_map	data;
	struct packing		pk;
	uint32_t		tsize;	/* 2 or 4 */
	bool			per_epoch;	/* repack = epoch */
	uint64_t		documents;
};

static int	tokens_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	tokens_read(const struct dataset *, uint64_t, void *,
		    int64_t *, bool);
static int	tokens_read_at(const struct dataset *, uint64_t, uint64_t,
		    uint64_t, void *, int64_t *, bool);
static void	tokens_close(struct dataset *);

const struct dataset_ops dataset_tokens_ops = {
	.type = "tokens",
	.keys = (const char *const []){ "path", "index", "eot", "dtype",
	    "seq_len", "window", "repack", NULL },
	.data_key = "path",
	.open = tokens_open,
	.read = tokens_read,
	.read_at = tokens_read_at,
	.close = tokens_close,
};

/*
 * Whether ds->memory_room holds a packing of @pieces pieces (at least)
 * of @tokens tokens at @seq_len: checked before the packing, or the
 * bounds it is made from, are allocated, so that a packing too large for
 * memory_budget is refused without being made (making it takes 1.5 times
 * what it keeps, and a reload makes it beside the serving daemon).
 */
static int
tokens_room(struct dataset *ds, const struct tokens *t, uint64_t pieces,
    uint64_t tokens, uint32_t seq_len, char **cause)
{
	uint64_t	rows = tokens / seq_len + (tokens % seq_len != 0), need;

	need = packing_bytes(pieces > rows ? pieces : rows, rows,
	    t->per_epoch);
	if (need <= ds->memory_room)
		return (0);
	return (dataset_error(cause, ds, "it keeps at least %" PRIu64 " bytes "
	    "in memory (its packing of rows at seq_len %" PRIu32 ", %" PRIu64
	    " pieces or more in %" PRIu64 " rows or more) in the daemon and "
	    "as many in the workers' fork server, and memory_budget has %"
	    PRIu64 " bytes left for each; not packed: raise memory_budget, "
	    "or set 'repack = none' (20 bytes a piece less) or a larger "
	    "seq_len", need, seq_len, pieces > rows ? pieces : rows, rows,
	    ds->memory_room));
}

/* Pack the @n documents of bounds @b. */
static int
tokens_pack(struct dataset *ds, struct tokens *t, const uint64_t *b,
    uint64_t n, uint32_t seq_len, uint64_t window, char **cause)
{
	if (tokens_room(ds, t, packing_pieces(b, n, seq_len), b[n] - b[0],
	    seq_len, cause) != 0)
		return (-1);
	t->documents = n;
	if (packing_make(&t->pk, b, n, seq_len, PACKING_BFD, window,
	    t->per_epoch) != 0)
		return (dataset_error(cause, ds, "packing %" PRIu64 " documents: "
		    "%s", n, strerror(errno)));
	return (0);
}

/* The magic of Megatron's indexed datasets' .idx files. */
#define MEGATRON_MAGIC	"MMIDIDX\0\0"

/* A little-endian word of @m at @off (unaligned). */
static uint64_t
tokens_u64(const struct dataset_map *m, uint64_t off)
{
	uint64_t	v;

	memcpy(&v, m->base + off, sizeof v);
	return (v);
}

/*
 * Megatron's .idx: magic, version 1, a dtype code (8 uint16, 4 int32),
 * S sequences and D document bounds, then S int32 lengths, S int64 byte
 * offsets and D int64 first sequences of documents (0 first, S last).  A
 * document is its sequences together.
 */
static int
tokens_pack_megatron(struct dataset *ds, struct tokens *t,
    const char *ipath, const struct dataset_map *m, uint32_t seq_len,
    uint64_t window, char **cause)
{
	uint64_t	ntok = t->data.size / t->tsize, ns, nd, i, off, at, *b;
	uint64_t	lens, ptrs, docs, d, seq;
	uint8_t		code;
	int32_t		len;
	int		rc;

	if (m->size < 34)
		return (dataset_error(cause, ds, "%s: %" PRIu64 " bytes is "
		    "shorter than a Megatron index's header", ipath, m->size));
	code = m->base[17];
	ns = tokens_u64(m, 18);
	nd = tokens_u64(m, 26);
	if (tokens_u64(m, 9) != 1)
		return (dataset_error(cause, ds, "%s: a Megatron index of "
		    "version %" PRIu64 "; version 1 is read", ipath,
		    tokens_u64(m, 9)));
	if ((code == 8 && t->tsize != 2) || (code == 4 && t->tsize != 4) ||
	    (code != 8 && code != 4))
		return (dataset_error(cause, ds, "%s: token dtype code %u; "
		    "read are 8 (uint16: 'dtype = uint16') and 4 (int32: "
		    "'dtype = uint32')", ipath, code));
	lens = 34;
	ptrs = lens + 4 * ns;
	docs = ptrs + 8 * ns;
	if (ns > m->size || nd < 2 || nd > m->size ||
	    docs + 8 * nd > m->size)
		return (dataset_error(cause, ds, "%s: %" PRIu64 " bytes cannot "
		    "hold the %" PRIu64 " sequences and %" PRIu64 " document "
		    "bounds its header counts", ipath, m->size, ns, nd));
	for (i = 0, at = 0; i < ns; i++) {
		memcpy(&len, m->base + lens + 4 * i, sizeof len);
		off = tokens_u64(m, ptrs + 8 * i);
		if (len < 0 || off != at * t->tsize)
			return (dataset_error(cause, ds, "%s: sequence %" PRIu64
			    " starts at byte %" PRIu64 " with %" PRId32 " "
			    "tokens; expected byte %" PRIu64 " (sequences one "
			    "after another)", ipath, i, off, len,
			    at * t->tsize));
		at += (uint64_t)len;
	}
	if (at != ntok)
		return (dataset_error(cause, ds, "%s: its sequences hold %"
		    PRIu64 " tokens, the token file %" PRIu64 "; are they a "
		    "pair?", ipath, at, ntok));
	/* A document is a piece at least. */
	if (tokens_room(ds, t, nd - 1, ntok, seq_len, cause) != 0)
		return (-1);
	if ((b = malloc(nd * sizeof *b)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	/* Each document's first token: the sum of the lengths before. */
	for (d = 0, seq = 0, at = 0; d < nd; d++) {
		uint64_t first = tokens_u64(m, docs + 8 * d);

		if (first > ns || first < seq || (d == 0 && first != 0) ||
		    (d + 1 == nd && first != ns)) {
			free(b);
			return (dataset_error(cause, ds, "%s: document bound %"
			    PRIu64 " is sequence %" PRIu64 "; bounds rise from "
			    "0 to %" PRIu64, ipath, d, first, ns));
		}
		for (; seq < first; seq++) {
			memcpy(&len, m->base + lens + 4 * seq, sizeof len);
			at += (uint64_t)len;
		}
		b[d] = at;
		if (d > 0 && b[d] == b[d - 1]) {
			free(b);
			return (dataset_error(cause, ds, "%s: document %" PRIu64
			    " is empty; a document holds a token at least",
			    ipath, d - 1));
		}
	}
	rc = tokens_pack(ds, t, b, nd - 1, seq_len, window, cause);
	free(b);
	return (rc);
}

/* Check the index against the token file; pack its documents. */
static int
tokens_pack_index(struct dataset *ds, struct tokens *t, const char *path,
    const char *ipath, uint32_t seq_len, uint64_t window, char **cause)
{
	struct dataset_map	 idx;
	const uint64_t		*b;
	uint64_t		 ntok = t->data.size / t->tsize, n, i;
	int			 rc = -1;

	memset(&idx, 0, sizeof idx);
	idx.fd = -1;
	if (dataset_map_file(ds, ipath, &idx, cause) != 0)
		return (-1);
	if (idx.size >= sizeof MEGATRON_MAGIC - 1 && memcmp(idx.base,
	    MEGATRON_MAGIC, sizeof MEGATRON_MAGIC - 1) == 0) {
		rc = tokens_pack_megatron(ds, t, ipath, &idx, seq_len, window,
		    cause);
		goto out;
	}
	b = (const uint64_t *)(const void *)idx.base;
	if (idx.size % 8 != 0 || idx.size < 16) {
		dataset_error(cause, ds, "%s: %" PRIu64 " bytes is not an "
		    "index of documents: expected N + 1 uint64 offsets (8 "
		    "bytes each, at least 2), as infeed.write_tokens() "
		    "writes", ipath, idx.size);
		goto out;
	}
	n = idx.size / 8 - 1;
	if (b[0] != 0) {
		dataset_error(cause, ds, "%s: the first offset is %" PRIu64
		    "; the first document starts at token 0", ipath, b[0]);
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (b[i + 1] <= b[i]) {
			dataset_error(cause, ds, "%s: document %" PRIu64 " ends "
			    "at token %" PRIu64 ", not after its start %" PRIu64
			    "; offsets rise strictly (no empty document)",
			    ipath, i, b[i + 1], b[i]);
			goto out;
		}
	}
	if (b[n] != ntok) {
		dataset_error(cause, ds, "%s: the last document ends at token "
		    "%" PRIu64 ", but %s holds %" PRIu64 " tokens of %s; are "
		    "they a pair (and is 'dtype =' right)?", ipath, b[n], path,
		    ntok, t->tsize == 2 ? "uint16" : "uint32");
		goto out;
	}
	rc = tokens_pack(ds, t, b, n, seq_len, window, cause);
out:
	dataset_unmap(&idx);
	return (rc);
}

/* Ids read a system call by tokens_scan(). */
#define TOKENS_SCAN_IDS	(1 << 16)

/*
 * One pass over the token ids, read with pread rather than through the
 * mapping (a read that waits on slow storage is then a system call, where
 * a fault on the mapping would stall the whole process under valgrind):
 * uint32 ids must fit the samples' int32; with @eot (UINT64_MAX: none),
 * count in *@n the documents each ended by it (the last may end with the
 * file instead), and set @b[1..n] to their ends when @b is not NULL.
 */
static int
tokens_scan(struct dataset *ds, const struct tokens *t, const char *path,
    uint64_t eot, uint64_t *b, uint64_t *n, char **cause)
{
	uint64_t	 ntok = t->data.size / t->tsize, at = 0, id = 0;
	uint8_t		*buf;
	size_t		 want, k;
	ssize_t		 got;
	int		 rc = -1;

	*n = 0;
	if ((buf = malloc(TOKENS_SCAN_IDS * 4)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	while (at < ntok) {
		if (!dataset_open_tick()) {
			dataset_error(cause, ds, DATASET_OPEN_STOPPED);
			goto out;
		}
		want = ntok - at < TOKENS_SCAN_IDS ? (size_t)(ntok - at) :
		    TOKENS_SCAN_IDS;
		got = pread(t->data.fd, buf, want * t->tsize,
		    (off_t)(at * t->tsize));
		if (got == -1 && errno == EINTR)
			continue;
		if (got <= 0 || (size_t)got % t->tsize != 0) {
			dataset_error(cause, ds, "%s: reading token %" PRIu64
			    ": %s", path, at, got == -1 ? strerror(errno) :
			    "the file is shorter than when it was opened");
			goto out;
		}
		for (k = 0; k < (size_t)got / t->tsize; k++, at++) {
			if (t->tsize == 2) {
				uint16_t v;

				memcpy(&v, buf + 2 * k, 2);
				id = v;
			} else {
				uint32_t v;

				memcpy(&v, buf + 4 * k, 4);
				id = v;
				if (v > INT32_MAX) {
					dataset_error(cause, ds, "%s: token %"
					    PRIu64 " is %" PRIu32 "; ids go up "
					    "to 2^31 - 1 (rows are int32)",
					    path, at, v);
					goto out;
				}
			}
			if (id == eot) {
				if (b != NULL)
					b[*n + 1] = at + 1;
				(*n)++;
			}
		}
	}
	if (eot != UINT64_MAX && ntok > 0 && id != eot) {
		if (b != NULL)
			b[*n + 1] = ntok;
		(*n)++;
	}
	rc = 0;
out:
	free(buf);
	return (rc);
}

/*
 * No index: each document ends with the id @eot (the last one may end
 * with the file instead), as nanoGPT's files are written.
 */
static int
tokens_pack_eot(struct dataset *ds, struct tokens *t, const char *path,
    uint32_t eot, uint32_t seq_len, uint64_t window, char **cause)
{
	uint64_t	n, *b;
	int		rc;

	if (tokens_scan(ds, t, path, eot, NULL, &n, cause) != 0 ||
	    tokens_room(ds, t, n, t->data.size / t->tsize, seq_len,
	    cause) != 0)
		return (-1);
	if ((b = malloc((n + 1) * sizeof *b)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	b[0] = 0;
	rc = tokens_scan(ds, t, path, eot, b, &n, cause);
	if (rc == 0)
		rc = tokens_pack(ds, t, b, n, seq_len, window, cause);
	free(b);
	return (rc);
}

/* Read the keys, map the tokens, check the index and pack. */
static int
tokens_open(struct dataset *ds, const struct dataset_conf *conf,
    char **cause)
{
	struct tokens	*t;
	const char	*path, *ipath, *v, *errstr;
	uint64_t	 seq_len, window = 0, eot = 0, n, size;
	int		 fd;

	if ((t = calloc(1, sizeof *t)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	t->data.fd = -1;
	ds->priv = t;

	ipath = dataset_conf_get(conf, "index");
	v = dataset_conf_get(conf, "eot");
	if ((ipath == NULL) == (v == NULL)) {
		dataset_error(cause, ds, "%s: give 'index =', the path of the "
		    "index of documents (N + 1 uint64 offsets), or 'eot =', "
		    "the id that ends each document", ipath == NULL ?
		    "no document bounds" : "both 'index =' and 'eot ='");
		goto fail;
	}
	if (v != NULL && number_parse_u64(v, 0, UINT32_MAX, &eot,
	    &errstr) != 0) {
		dataset_error(cause, ds, "'eot = %s': %s", v, errstr);
		goto fail;
	}
	if ((path = dataset_conf_need(ds, conf, "path",
	    "the path of the file of token ids", cause)) == NULL ||
	    (v = dataset_conf_need(ds, conf, "seq_len",
	    "the tokens of a packed row, like 2048", cause)) == NULL)
		goto fail;
	if (number_parse_u64(v, 1, PACKING_SEQ_LEN_MAX, &seq_len,
	    &errstr) != 0) {
		dataset_error(cause, ds, "'seq_len = %s': %s; 1 to %u", v,
		    errstr, PACKING_SEQ_LEN_MAX);
		goto fail;
	}
	if ((v = dataset_conf_get(conf, "window")) != NULL &&
	    number_parse_u64(v, 0, UINT64_MAX, &window, &errstr) != 0) {
		dataset_error(cause, ds, "'window = %s': %s; the pieces packed "
		    "at a time, 0 for all", v, errstr);
		goto fail;
	}
	t->per_epoch = true;
	if ((v = dataset_conf_get(conf, "repack")) != NULL) {
		if (strcmp(v, "none") == 0)
			t->per_epoch = false;
		else if (strcmp(v, "epoch") != 0) {
			dataset_error(cause, ds, "'repack = %s': 'epoch' (the "
			    "default: other documents share a row each epoch) "
			    "or 'none' (the same rows every epoch)", v);
			goto fail;
		}
	}
	t->tsize = 2;
	if ((v = dataset_conf_get(conf, "dtype")) != NULL) {
		if (strcmp(v, "uint32") == 0)
			t->tsize = 4;
		else if (strcmp(v, "uint16") != 0) {
			dataset_error(cause, ds, "'dtype = %s': token ids are "
			    "uint16 or uint32", v);
			goto fail;
		}
	}

	if (t->tsize == 2 && eot > UINT16_MAX) {
		dataset_error(cause, ds, "'eot = %" PRIu64 "': no uint16 token "
		    "id is that large, so no document would end; give the "
		    "id of the end-of-text token, or 'dtype = uint32'", eot);
		goto fail;
	}
	/*
	 * Checked and scanned first, mapped after: valgrind reads a file's
	 * first page when it is mapped, holding every thread, where a read
	 * of ours on slow storage holds only this one.
	 */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		dataset_error(cause, ds, "%s: cannot open: %s", path,
		    strerror(errno));
		goto fail;
	}
	if (dataset_map_fd(ds, path, fd, DATASET_MAP_READ, 0, &t->data,
	    cause) != 0)
		goto fail;
	if (t->data.size % t->tsize != 0) {
		dataset_error(cause, ds, "%s: %" PRIu64 " bytes is not a whole "
		    "number of %s token ids; check 'dtype ='", path,
		    t->data.size, t->tsize == 2 ? "uint16" : "uint32");
		goto fail;
	}
	/* With an index, uint32 ids are checked here; else in the eot pass. */
	if (ipath != NULL && t->tsize == 4 && tokens_scan(ds, t, path,
	    UINT64_MAX, NULL, &n, cause) != 0)
		goto fail;
	if (ipath != NULL ? tokens_pack_index(ds, t, path, ipath,
	    (uint32_t)seq_len, window, cause) != 0 : tokens_pack_eot(ds, t,
	    path, (uint32_t)eot, (uint32_t)seq_len, window, cause) != 0)
		goto fail;
	/*
	 * Map the descriptor that was scanned, not the path again: a file
	 * put in its place meanwhile would be served unchecked.
	 */
	size = t->data.size;
	if ((fd = fcntl(t->data.fd, F_DUPFD_CLOEXEC, 0)) == -1) {
		dataset_error(cause, ds, "%s: %s", path, strerror(errno));
		goto fail;
	}
	dataset_unmap(&t->data);
	if (dataset_map_fd(ds, path, fd, DATASET_MAP_READ, DATASET_MAP_ALL,
	    &t->data, cause) != 0)
		goto fail;
	if (t->data.size != size) {
		dataset_error(cause, ds, "%s: %" PRIu64 " bytes, %" PRIu64 " a "
		    "moment ago: the file changed while infeedd opened it; "
		    "reload once it is written", path, t->data.size, size);
		goto fail;
	}

	ds->ndim = 2;
	ds->shape[0] = 3;
	ds->shape[1] = seq_len;
	ds->dtype = INFEED_DTYPE_INT32;
	ds->label_dtype = INFEED_DTYPE_INT32;
	ds->sample_bytes = 3 * 4 * (size_t)seq_len;
	ds->samples = t->pk.rows;
	ds->memory = packing_bytes(t->pk.npieces, t->pk.rows, t->per_epoch);
	ds->documents = t->documents;
	ds->tokens = t->pk.tokens;
	return (0);

fail:
	tokens_close(ds);
	return (-1);
}

/* Row @index as epoch 0 of seed 0 has it. */
static int
tokens_read(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label, bool stream)
{
	return (tokens_read_at(ds, index, 0, 0, dst, label, stream));
}

/* Tokens a row is written in, at a time, with streaming stores. */
#define TOKENS_CHUNK	1024

/*
 * Where a row's three arrays go: straight into the slot, or (@stream) a
 * chunk at a time into buffers in cache, streamed out to the slot
 * (copy_row()), so that a slot past the cache is not read to be written.
 */
struct tokens_row {
	int32_t		*ids, *pos, *seg;	/* the slot's arrays */
	uint32_t	 base, fill, cap;
	bool		 stream;
	int32_t		*wi, *wp, *ws;		/* token base's */
	int32_t		 bi[TOKENS_CHUNK], bp[TOKENS_CHUNK],
			 bs[TOKENS_CHUNK];
};

/* The tokens written so far are out: go on after them. */
static void
tokens_row_flush(struct tokens_row *w)
{
	if (w->stream) {
		copy_row(w->ids + w->base, w->bi, w->fill * 4, true);
		copy_row(w->pos + w->base, w->bp, w->fill * 4, true);
		copy_row(w->seg + w->base, w->bs, w->fill * 4, true);
	}
	w->base += w->fill;
	w->fill = 0;
	if (!w->stream) {
		w->wi = w->ids + w->base;
		w->wp = w->pos + w->base;
		w->ws = w->seg + w->base;
	}
}

/*
 * @len tokens of segment @k: ids from @s (uint16 or, @wide, uint32; NULL:
 * padding, 0), positions from 0.
 */
static void
tokens_row_put(struct tokens_row *w, const void *s, bool wide, uint32_t len,
    int32_t k)
{
	uint32_t	j = 0, n;

	while (j < len) {
		n = len - j < w->cap - w->fill ? len - j : w->cap - w->fill;
		packing_row_put(w->wi + w->fill, w->wp + w->fill,
		    w->ws + w->fill, s == NULL ? NULL : (const uint8_t *)s +
		    (size_t)j * (wide ? 4 : 2), wide, n, j, k);
		w->fill += n;
		j += n;
		if (w->fill == w->cap)
			tokens_row_flush(w);
	}
}

/* Write row @index of (@seed, @epoch): ids, position ids, segment ids. */
static int
tokens_read_at(const struct dataset *ds, uint64_t index, uint64_t seed,
    uint64_t epoch, void *dst, int64_t *label, bool stream)
{
	const struct tokens		*t = ds->priv;
	const struct packing_piece	*pc;
	struct tokens_row		 w;
	uint32_t			 seq = t->pk.seq_len, k, at = 0;
	uint64_t			 i, first, last;

	w.ids = dst;
	w.pos = w.ids + seq;
	w.seg = w.pos + seq;
	w.base = w.fill = 0;
	w.stream = stream;
	w.cap = stream ? TOKENS_CHUNK : seq;
	w.wi = stream ? w.bi : w.ids;
	w.wp = stream ? w.bp : w.pos;
	w.ws = stream ? w.bs : w.seg;
	first = t->pk.row_first[index];
	last = t->pk.row_first[index + 1];
	for (i = first, k = 1; i < last; i++, k++) {
		pc = packing_piece(&t->pk, i, seed, epoch);
		if (!dataset_map_holds(&t->data, (pc->start + pc->len) *
		    t->tsize))
			return (-1);
		tokens_row_put(&w, t->data.base + pc->start * t->tsize,
		    t->tsize == 4, pc->len, (int32_t)k);
		at += pc->len;
	}
	tokens_row_put(&w, NULL, false, seq - at, 0);
	tokens_row_flush(&w);
	*label = (int64_t)(last - first);
	return (0);
}

/* Unmap the tokens and free the packing. */
static void
tokens_close(struct dataset *ds)
{
	struct tokens	*t = ds->priv;

	if (t == NULL)
		return;
	dataset_unmap(&t->data);
	packing_clear(&t->pk);
	free(t);
	ds->priv = NULL;
}
