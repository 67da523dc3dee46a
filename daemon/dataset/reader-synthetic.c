/* SPDX-License-Identifier: MIT */
/*
 * The "synthetic" reader: made-up samples, for benchmarks and tests.
 *
 *	[dataset noise]
 *	type = synthetic
 *	samples = 100000
 *	shape = 16,32,32
 *	dtype = float32			(the default; any dtype)
 *	classes = 10			(the default)
 *	seed = 0			(the default)
 *	sample_delay_us = 0		(the default)
 *	cache = false			(the default)
 *
 * sample_delay_us makes every read of a sample take that long (a sleep in
 * the worker), to stand for slow storage or decoding: a trainer on such a
 * set is input-bound, which the metrics and `infeedctl top` must show.
 * Sample i is a function of (seed, i) alone, so any process makes the same
 * bytes for it without coordination: a splitmix64 stream whose state
 * starts at a hash of (seed, i), 64 bits at a time.  Floats are uniform in
 * [0, 1) (float16 in steps of 2^-10, float32 of 2^-24, float64 of 2^-53);
 * integers of every width are uniform in [0, 256), like pixels.  The
 * label is a separate hash of (seed, i) modulo classes.  Values are in
 * host byte order.
 *
 * cache = true keeps every sample once made, in memory that the workers
 * share (samples x sample bytes of it, taken as samples are first read),
 * so that later epochs copy instead of computing: the daemon makes the
 * set once, as the tutorials' in-memory TensorDataset of random tensors
 * is made once.  Each sample has a state word there: 0 not made, 1 being
 * made by one worker (others make their own copy meanwhile), 2 made.
 */

#include <sys/mman.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy.h"
#include "number.h"
#include "reader-synthetic.h"
#include "splitmix64.h"


enum synthetic_made {
	SYNTHETIC_NOT_MADE,
	SYNTHETIC_MAKING,
	SYNTHETIC_MADE,
};

struct synthetic {
	uint64_t	 seed;
	uint64_t	 delay_us;	/* per sample read */
	uint8_t		*cache;		/* shared: samples, then states */
	size_t		 cache_bytes;
	uint8_t		*made;		/* enum synthetic_made per sample */
};

static int	synthetic_open(struct dataset *, const struct dataset_conf *,
		    char **);
static int	synthetic_read(const struct dataset *, uint64_t, void *,
		    int64_t *, bool);
static void	synthetic_close(struct dataset *);

const struct dataset_ops dataset_synthetic_ops = {
	.type = "synthetic",
	.keys = (const char *const []){ "samples", "shape", "dtype", "classes",
	    "seed", "sample_delay_us", "cache", NULL },
	.open = synthetic_open,
	.read = synthetic_read,
	.close = synthetic_close,
};

/*
 * Memory for every sample and its state, shared with the workers forked
 * later; pages are taken only as samples are made.
 */
static int
synthetic_cache_new(struct dataset *ds, struct synthetic *s, char **cause)
{
	uint64_t	ram = (uint64_t)sysconf(_SC_PHYS_PAGES) *
			    (uint64_t)sysconf(_SC_PAGESIZE);
	size_t		data;

	/* Nothing bounds it but this: it is not in memory_budget. */
	if (__builtin_mul_overflow(ds->samples, ds->sample_bytes, &data) ||
	    __builtin_add_overflow(data, ds->samples, &s->cache_bytes) ||
	    s->cache_bytes > ram / 2)
		return (dataset_error(cause, ds, "cache = true: %llu samples "
		    "of %zu bytes would take more than half of this host's "
		    "%llu MiB of memory; leave the cache out, or use fewer "
		    "samples", (unsigned long long)ds->samples,
		    ds->sample_bytes, (unsigned long long)(ram >> 20)));
	s->cache = mmap(NULL, s->cache_bytes, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s->cache == MAP_FAILED) {
		s->cache = NULL;
		return (dataset_error(cause, ds, "cache = true: cannot map "
		    "%zu bytes: %s", s->cache_bytes, strerror(errno)));
	}
	s->made = s->cache + data;
#ifdef MADV_HUGEPAGE
	/* Random reads of whole samples: fewer TLB misses where allowed. */
	(void)madvise(s->cache, s->cache_bytes, MADV_HUGEPAGE);
#endif
	return (0);
}

/* Read the keys; no files to check. */
static int
synthetic_open(struct dataset *ds, const struct dataset_conf *conf,
    char **cause)
{
	struct synthetic	*s;
	const char		*v, *errstr;
	char			 shape[128];
	uint64_t		 n;

	if ((s = calloc(1, sizeof *s)) == NULL)
		return (dataset_error(cause, ds, "%s", strerror(errno)));
	ds->priv = s;

	if ((v = dataset_conf_need(ds, conf, "samples",
	    "how many samples to make", cause)) == NULL)
		goto fail;
	if (number_parse_u64(v, 1, UINT64_MAX, &ds->samples, &errstr) != 0) {
		dataset_error(cause, ds, "'samples = %s': %s", v, errstr);
		goto fail;
	}
	if ((v = dataset_conf_need(ds, conf, "shape",
	    "the shape of one sample, like 3,224,224", cause)) == NULL)
		goto fail;
	if (dataset_shape_parse(v, ds->shape, &ds->ndim, &errstr) != 0) {
		dataset_error(cause, ds, "'shape = %s': %s", v, errstr);
		goto fail;
	}
	ds->dtype = INFEED_DTYPE_FLOAT32;
	if ((v = dataset_conf_get(conf, "dtype")) != NULL &&
	    dtype_parse(v, &ds->dtype) != 0) {
		dataset_error(cause, ds, "'dtype = %s' is not a type; use "
		    "uint8, int32, int64, float16, float32 or float64", v);
		goto fail;
	}
	if (dataset_shape_bytes(ds->shape, ds->ndim, ds->dtype,
	    &ds->sample_bytes) != 0) {
		dataset_error(cause, ds, "a sample of %s %s is too large",
		    dtype_name(ds->dtype), dataset_shape_format(ds->shape,
		    ds->ndim, shape, sizeof shape));
		goto fail;
	}
	if (dataset_conf_classes(ds, conf, cause) != 0)
		goto fail;
	if (ds->classes == 0)
		ds->classes = 10;
	ds->label_dtype = INFEED_DTYPE_INT64;
	if ((v = dataset_conf_get(conf, "seed")) != NULL) {
		if (number_parse_u64(v, 0, UINT64_MAX, &n, &errstr) != 0) {
			dataset_error(cause, ds, "'seed = %s': %s", v, errstr);
			goto fail;
		}
		s->seed = n;
	}
	if ((v = dataset_conf_get(conf, "sample_delay_us")) != NULL) {
		if (number_parse_u64(v, 0, 10000000, &n, &errstr) != 0) {
			dataset_error(cause, ds, "'sample_delay_us = %s': %s "
			    "(microseconds, at most 10000000)", v, errstr);
			goto fail;
		}
		s->delay_us = n;
	}
	if ((v = dataset_conf_get(conf, "cache")) != NULL &&
	    strcmp(v, "false") != 0) {
		if (strcmp(v, "true") != 0) {
			dataset_error(cause, ds, "'cache = %s': expected true "
			    "or false", v);
			goto fail;
		}
		if (synthetic_cache_new(ds, s, cause) != 0)
			goto fail;
	}
	return (0);

fail:
	synthetic_close(ds);
	return (-1);
}

/* The stream's first state for sample @index. */
static uint64_t
synthetic_state(const struct synthetic *s, uint64_t index)
{
	/* Two mixing rounds, so nearby (seed, index) pairs diverge. */
	return (splitmix64_mix(splitmix64_mix(s->seed ^
	    0x243f6a8885a308d3ULL) + index));
}

/* The label of the sample whose stream starts at @st: a separate hash. */
static int64_t
synthetic_label(const struct dataset *ds, uint64_t st)
{
	return ((int64_t)(splitmix64_mix(st ^ 0x13198a2e03707344ULL) %
	    ds->classes));
}

/* Fill dst with n bytes; 8 per draw. */
static void
synthetic_fill_bytes(uint64_t *st, uint8_t *dst, size_t n)
{
	uint64_t	r;

	for (; n >= 8; n -= 8, dst += 8) {
		r = splitmix64_next(st);
		memcpy(dst, &r, 8);
	}
	if (n > 0) {
		r = splitmix64_next(st);
		memcpy(dst, &r, n);
	}
}

/* Make sample index of ds into dst. */
static int
synthetic_make(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label)
{
	const struct synthetic	*s = ds->priv;
	uint8_t			*out = dst;
	size_t			 i, n;
	uint64_t		 st, r = 0, lo;
	uint32_t		 u32;
	uint16_t		 u16;
	int32_t			 i32;
	int64_t			 i64;
	float			 f;
	double			 d;

	if (s->delay_us > 0)
		usleep((useconds_t)s->delay_us);
	st = synthetic_state(s, index);
	*label = synthetic_label(ds, st);

	n = ds->sample_bytes / dtype_size(ds->dtype);
	switch (ds->dtype) {
	case INFEED_DTYPE_UINT8:
		synthetic_fill_bytes(&st, out, n);
		break;
	case INFEED_DTYPE_INT32:
		for (i = 0; i < n; i++) {
			if (i % 8 == 0)
				r = splitmix64_next(&st);
			i32 = (int32_t)(r & 0xff);
			r >>= 8;
			memcpy(out + i * 4, &i32, 4);
		}
		break;
	case INFEED_DTYPE_INT64:
		for (i = 0; i < n; i++) {
			if (i % 8 == 0)
				r = splitmix64_next(&st);
			i64 = (int64_t)(r & 0xff);
			r >>= 8;
			memcpy(out + i * 8, &i64, 8);
		}
		break;
	case INFEED_DTYPE_FLOAT16:
		/* k/1024 is exact in binary16: 0x3c00 is 1.0, so build it. */
		for (i = 0; i < n; i++) {
			if (i % 6 == 0)
				r = splitmix64_next(&st);
			lo = r & 0x3ff;
			r >>= 10;
			if (lo == 0)
				u16 = 0;
			else {
				/* Normalise: shift k's top bit to bit 10. */
				u32 = (uint32_t)__builtin_clzll(lo) - 53;
				u16 = (uint16_t)((15 - u32) << 10 |
				    ((lo << u32) & 0x3ff));
			}
			memcpy(out + i * 2, &u16, 2);
		}
		break;
	case INFEED_DTYPE_FLOAT32:
		for (i = 0; i + 1 < n; i += 2) {
			r = splitmix64_next(&st);
			f = (float)(r >> 40) * 0x1.0p-24f;
			memcpy(out + i * 4, &f, 4);
			f = (float)(r & 0xffffff) * 0x1.0p-24f;
			memcpy(out + i * 4 + 4, &f, 4);
		}
		if (i < n) {
			r = splitmix64_next(&st);
			f = (float)(r >> 40) * 0x1.0p-24f;
			memcpy(out + i * 4, &f, 4);
		}
		break;
	case INFEED_DTYPE_FLOAT64:
		for (i = 0; i < n; i++) {
			d = (double)(splitmix64_next(&st) >> 11) * 0x1.0p-53;
			memcpy(out + i * 8, &d, 8);
		}
		break;
	default:
		return (-1);
	}
	return (0);
}

/* Sample index of ds into dst: from the cache when it is made there. */
static int
synthetic_read(const struct dataset *ds, uint64_t index, void *dst,
    int64_t *label, bool stream)
{
	const struct synthetic	*s = ds->priv;
	uint8_t			*at, expect = SYNTHETIC_NOT_MADE;
	uint8_t			 state;

	if (s->cache == NULL)
		return (synthetic_make(ds, index, dst, label));
	at = s->cache + index * ds->sample_bytes;
	state = __atomic_load_n(&s->made[index], __ATOMIC_ACQUIRE);
	if (state == SYNTHETIC_NOT_MADE &&
	    __atomic_compare_exchange_n(&s->made[index], &expect,
	    SYNTHETIC_MAKING, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		if (synthetic_make(ds, index, at, label) != 0)
			return (-1);
		__atomic_store_n(&s->made[index], SYNTHETIC_MADE,
		    __ATOMIC_RELEASE);
		state = SYNTHETIC_MADE;
	}
	/* Being made by another worker (or one that died at it). */
	if (state != SYNTHETIC_MADE)
		return (synthetic_make(ds, index, dst, label));
	copy_row(dst, at, ds->sample_bytes, stream);
	*label = synthetic_label(ds, synthetic_state(s, index));
	return (0);
}

/* Free the seed and the cache. */
static void
synthetic_close(struct dataset *ds)
{
	struct synthetic	*s = ds->priv;

	if (s != NULL && s->cache != NULL)
		munmap(s->cache, s->cache_bytes);
	free(s);
	ds->priv = NULL;
}
