/*
 * The "tsc" analyzer: cumulative TSC ticks per block.  One post-order pass
 * over the tree API, O(max depth) working memory plus the encoded results
 * (about 6 bytes per block), in chunks of HTR_TSC_CHUNK blocks (layout in FORMAT.md,
 * "Sidecar"): per chunk a 16-byte header and two arrays of fixed-width
 * little-endian integers (totals, then locals), each as wide as the
 * chunk's largest value needs.
 */
#include "analyzer_int.h"
#include "descriptors.h"
#include "le.h"

#include <stdlib.h>
#include <string.h>

/* The registered name, also the one looked up (the same pointer:
 * htr_analyzer__result() compares pointers first). */
static const char an_name[] = "tsc";

/* Keys: "h" the header (u32 blocks per chunk, u32 0, u64 chunks), "c" +
 * u32 big-endian chunk index for each chunk. */
#define TSC_HDR_SIZE 16u

/* Version of the stored results; bump on any change of their meaning or
 * layout (older results are then dropped and recomputed). */
#define HTR_TSC_VERSION 2u   /* 2: late blocks start at the first time point */

/* One value per chunk of HTR_TSC_CHUNK blocks. */
#define HTR_TSC_CHUNK 4096u
#define HTR_TSC_CHUNK_HDR 16u

/* A result: the chunks, computed (own) or read lazily through ctx. */
struct tsc_res {
	struct htr_analyzer_ctx *ctx;  /* messages; lazy reads if decoded */
	bool decoded;
	uint64_t nblocks, nchunks;
	const uint8_t **chunk;
	uint32_t *len;
	uint8_t *ok;
	uint8_t **own;                 /* computed: the chunks, owned */
};

static void chunk_key(uint64_t c, uint8_t *k)
{
	k[0] = 'c';
	k[1] = (uint8_t) (c >> 24);
	k[2] = (uint8_t) (c >> 16);
	k[3] = (uint8_t) (c >> 8);
	k[4] = (uint8_t) c;
}

static unsigned width_of(uint64_t v)
{
	unsigned w = 0;

	while (v) {
		w++;
		v >>= 8;
	}
	return w;
}

static uint64_t chunk_hash(uint64_t c, const uint8_t *v, size_t len)
{
	uint64_t h = HTR_HASH_SEED ^ (c * 0x9e3779b97f4a7c15ull);

	h = htr_hash__bytes(h, v, 8);
	return htr_hash__bytes(h, v + HTR_TSC_CHUNK_HDR,
			       len - HTR_TSC_CHUNK_HDR);
}

/* Encode @n entries into @buf (room for the widest chunk); returns the
 * length. */
/* @v's @w low bytes at @p, little-endian, as a store of 8 bytes: @p has
 * 8 bytes of room (encode()'s buffer), and what lies past @w is the next
 * entry's, written after. */
static inline void put_wide(uint8_t *p, uint64_t v, unsigned w)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	(void) w;
	memcpy(p, &v, 8);
#else
	htr_disk__put_le(p, v, w);
#endif
}

/* Encode @n entries into @buf (room for the widest chunk, and 8 bytes
 * more); returns the length. */
static size_t encode(uint64_t c, const uint64_t *tot, const uint64_t *loc,
		     uint32_t n, uint8_t *buf)
{
	uint64_t ot = 0, ol = 0, h;
	unsigned wt, wl;
	uint8_t *p;
	uint32_t i;
	size_t len;

	/* A width is the highest byte in use: that of all values or-ed. */
	for (i = 0; i < n; i++) {
		ot |= tot[i];
		ol |= loc[i];
	}
	wt = width_of(ot);
	wl = width_of(ol);
	memset(buf, 0, HTR_TSC_CHUNK_HDR);
	htr_disk__put_le(buf, n, 4);
	buf[4] = (uint8_t) wt;
	buf[5] = (uint8_t) wl;
	p = buf + HTR_TSC_CHUNK_HDR;
	if (wt)
		for (i = 0; i < n; i++, p += wt)
			put_wide(p, tot[i], wt);
	if (wl)
		for (i = 0; i < n; i++, p += wl)
			put_wide(p, loc[i], wl);
	len = (size_t) (p - buf);
	h = chunk_hash(c, buf, len);
	htr_disk__put_le(buf + 8, h, 8);
	return len;
}

static int check_chunk(struct tsc_res *r, uint64_t c, const uint8_t *v,
		       size_t len)
{
	uint64_t want_n = r->nblocks - c * HTR_TSC_CHUNK;
	unsigned wt, wl;

	if (want_n > HTR_TSC_CHUNK)
		want_n = HTR_TSC_CHUNK;
	if (!v || len < HTR_TSC_CHUNK_HDR)
		goto bad;
	wt = v[4];
	wl = v[5];
	if (htr_disk__get_le(v, 4) != want_n || wt > 8 || wl > 8 || v[6] || v[7] ||
	    len != HTR_TSC_CHUNK_HDR + want_n * (wt + wl) ||
	    chunk_hash(c, v, len) != htr_disk__get_le(v + 8, 8))
		goto bad;
	return 0;
bad:
	return htr_analyzer_fail(r->ctx, HTR_ERR_CORRUPT, "%s: TSC chunk %llu "
				 "is damaged (remove the sidecar to "
				 "recompute)", htr_analyzer_sidecar(r->ctx),
				 (unsigned long long) c);
}

static void decode_entry(const uint8_t *v, uint32_t i, uint64_t *total,
			 uint64_t *local)
{
	unsigned wt = v[4], wl = v[5];
	uint32_t n = (uint32_t) htr_disk__get_le(v, 4);
	const uint8_t *p = v + HTR_TSC_CHUNK_HDR;

	*total = htr_disk__get_le(p + (size_t) i * wt, wt);
	*local = htr_disk__get_le(p + (size_t) n * wt + (size_t) i * wl, wl);
}

int htr_tsc__value(const void *tsc, struct htr_analyzer_ctx *ctx,
		   uint32_t block, uint64_t *total, uint64_t *local)
{
	struct tsc_res *r = (struct tsc_res *) tsc;
	uint64_t c = block / HTR_TSC_CHUNK;
	int rc;

	(void) ctx;
	if (block >= r->nblocks || c >= r->nchunks)
		return htr_analyzer_fail(r->ctx, HTR_ERR_RANGE, "block %u: no "
					 "such block", block);
	if (!r->ok[c]) {
		const void *v = NULL;
		size_t len = 0;

		if (r->decoded) {
			uint8_t k[5];

			chunk_key(c, k);
			rc = htr_analyzer_value(r->ctx, k, sizeof(k), &v, &len);
			if (rc == HTR_ERR_NOTFOUND)
				return htr_analyzer_fail(r->ctx,
					HTR_ERR_CORRUPT, "%s: TSC chunk %llu "
					"is missing; remove the sidecar to "
					"recompute",
					htr_analyzer_sidecar(r->ctx),
					(unsigned long long) c);
			if (rc < 0)
				return rc;
		} else {
			v = r->own[c];
			len = r->len[c];
		}
		rc = check_chunk(r, c, v, len);
		if (rc < 0)
			return rc;
		r->chunk[c] = v;
		r->ok[c] = 1;
	}
	decode_entry(r->chunk[c], block % HTR_TSC_CHUNK, total, local);
	return 0;
}

static void tsc_free(void *result, void *payload)
{
	struct tsc_res *r = result;
	uint64_t i;

	(void) payload;
	if (!r)
		return;
	if (r->own)
		for (i = 0; i < r->nchunks; i++)
			free(r->own[i]);
	free(r->own);
	free(r->chunk);
	free(r->len);
	free(r->ok);
	free(r);
}

static struct tsc_res *res_alloc(struct htr_analyzer_ctx *ctx, bool decoded)
{
	struct tsc_res *r = calloc(1, sizeof(*r));
	size_t n;

	if (!r)
		return NULL;
	r->ctx = ctx;
	r->decoded = decoded;
	r->nblocks = htr_block_count(htr_analyzer_file(ctx));
	r->nchunks = (r->nblocks + HTR_TSC_CHUNK - 1) / HTR_TSC_CHUNK;
	n = r->nchunks ? (size_t) r->nchunks : 1;
	r->chunk = calloc(n, sizeof(*r->chunk));
	r->len = calloc(n, sizeof(*r->len));
	r->ok = calloc(n, 1);
	if (!decoded)
		r->own = calloc(n, sizeof(*r->own));
	if (!r->chunk || !r->len || !r->ok || (!decoded && !r->own)) {
		tsc_free(r, NULL);
		return NULL;
	}
	return r;
}

static void put_header(uint8_t *h, uint64_t nchunks)
{
	memset(h, 0, TSC_HDR_SIZE);
	htr_disk__put_le(h, HTR_TSC_CHUNK, 4);
	htr_disk__put_le(h + 8, nchunks, 8);
}

/* Current if the header describes this file's chunking. */
static int tsc_current(struct htr_analyzer_ctx *ctx, void *payload)
{
	uint8_t want[TSC_HDR_SIZE];
	const void *v;
	size_t len;
	uint64_t n = htr_block_count(htr_analyzer_file(ctx));
	int rc;

	(void) payload;
	rc = htr_analyzer_value(ctx, "h", 1, &v, &len);
	if (rc == HTR_ERR_NOTFOUND)
		return 0;
	if (rc < 0)
		return rc;
	put_header(want, (n + HTR_TSC_CHUNK - 1) / HTR_TSC_CHUNK);
	return len == TSC_HDR_SIZE && !memcmp(v, want, TSC_HDR_SIZE);
}

static int tsc_decode(struct htr_analyzer_ctx *ctx, void **result,
		      void *payload)
{
	struct tsc_res *r = res_alloc(ctx, true);

	(void) payload;
	if (!r)
		return htr_analyzer_fail(ctx, HTR_ERR_NOMEM, "out of memory");
	*result = r;
	return 0;
}

static int tsc_encode(struct htr_analyzer_ctx *ctx, const void *result,
		      void *payload)
{
	const struct tsc_res *r = result;
	uint8_t h[TSC_HDR_SIZE], k[5];
	uint64_t c;
	int rc;

	(void) payload;
	put_header(h, r->nchunks);
	rc = htr_analyzer_put(ctx, "h", 1, h, sizeof(h));
	/* Chunks compute() did not store already. */
	for (c = 0; !rc && c < r->nchunks; c++) {
		if (!r->own[c])
			continue;
		chunk_key(c, k);
		rc = htr_analyzer_put(ctx, k, sizeof(k), r->own[c], r->len[c]);
	}
	return rc;
}

/* What of a block record (FORMAT.md, "Blocks") the pass reads. */
#define BLK_SIZE 32u
struct raw_block {
	uint64_t first, last;
	uint32_t parent;
	bool late;
};

struct pending {
	uint32_t parent;   /* an open block ... */
	uint64_t sum;      /* ... and the totals of its children so far */
	uint64_t hint;     /* where its first child's first instruction was
			    * looked up: its own is just before */
};

static int tsc_compute(struct htr_analyzer_ctx *ctx, void **result,
		       void *payload)
{
	const struct htr_file *f = htr_analyzer_file(ctx);
	struct tsc_res *r;
	struct htr_file_info fi;
	uint64_t n, i, t0 = 0, id0;
	uint64_t *tot = NULL, *loc = NULL;
	uint64_t hint_first, hint_last = HTR_TSC_HINT_INIT;
	struct pending *st = NULL;
	size_t sp = 0, cap;
	uint8_t *buf = NULL;
	uint32_t k = 0, es = 0;
	const void *sec = NULL;
	uint64_t nsec = 0;
	int rc = 0, have_t0, storing = htr_analyzer_storing(ctx);

	(void) payload;
	if (htr_file_info(f, &fi, sizeof(fi)) < 0)
		return htr_analyzer_fail(ctx, HTR_ERR_INVALID, "no open file");
	r = res_alloc(ctx, false);
	if (!r)
		return htr_analyzer_fail(ctx, HTR_ERR_NOMEM, "out of memory");
	n = fi.nblocks;
	cap = (size_t) fi.max_depth + 2;
	have_t0 = htr_tsc_point(f, 0, &id0, &t0) == 0;
	tot = malloc(HTR_TSC_CHUNK * sizeof(*tot));
	loc = malloc(HTR_TSC_CHUNK * sizeof(*loc));
	st = malloc(cap * sizeof(*st));
	buf = malloc(HTR_TSC_CHUNK_HDR + HTR_TSC_CHUNK * 16 + 8);
	if (!tot || !loc || !st || !buf) {
		rc = htr_analyzer_fail(ctx, HTR_ERR_NOMEM, "out of memory");
		goto out;
	}
	/* The records as FORMAT.md lays them out, read in place: one
	 * htr_block_get() per block (a copy of every field, every link
	 * checked) was a tenth of the time.  What is used is checked. */
	if (n && (htr_file_section(f, HTR_SECTION_BLOCKS, &sec, &nsec, &es) < 0 ||
		  !sec || nsec != n || es < BLK_SIZE)) {
		rc = htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "no block records");
		goto out;
	}
	for (i = 0; i < n; i++) {
		const uint8_t *p = (const uint8_t *) sec + i * es;
		struct raw_block b;
		uint64_t tf = 0, tl = 0, total = 0, csum = 0;
		int have_f, have_l, open = sp && st[sp - 1].parent == (uint32_t) i;

		b.first = htr_disk__get_le(p, 6);
		b.last = htr_disk__get_le(p + 6, 6);
		b.parent = (uint32_t) htr_disk__get_le(p + 12, 4);
		b.late = (p[31] & HTR_BLOCK_LATE) != 0;
		if (b.first > b.last || b.last >= fi.ninsns ||
		    (b.parent != HTR_NONE && b.parent >= n)) {
			rc = htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "block %llu: "
					  "%s", (unsigned long long) i,
					  htr_errstr(HTR_ERR_CORRUPT));
			goto out;
		}
		/* Lookups start near the answer (the time points are 16 bytes
		 * each, a lookup far away is cache misses): a block's last
		 * instruction after the last one's (post-order), a leaf's
		 * first too, a parent's first just before its first child's.
		 * A late block began with the trace: at the first time point
		 * (the first PSB+, reported at instruction 0).  So does any
		 * block that began before the first time point. */
		hint_first = open ? st[sp - 1].hint : hint_last;
		have_f = !b.late &&
			 htr_tsc_lookup(f, b.first, &hint_first, &tf) == 0;
		if (!have_f && have_t0) {
			tf = t0;
			have_f = 1;
		}
		have_l = htr_tsc_lookup(f, b.last, &hint_last, &tl) == 0;
		if (have_f && have_l && tl > tf)
			total = tl - tf;
		if (open)
			csum = st[--sp].sum;
		tot[k] = total;
		loc[k] = total >= csum ? total - csum : 0;
		if (b.parent != HTR_NONE) {
			if (b.parent <= i) {
				rc = htr_analyzer_fail(ctx, HTR_ERR_CORRUPT,
						  "block %llu: bad parent %u",
						  (unsigned long long) i,
						  b.parent);
				goto out;
			}
			if (sp && st[sp - 1].parent == b.parent) {
				uint64_t s = st[sp - 1].sum + total;

				st[sp - 1].sum = s < total ? UINT64_MAX : s;
			} else {
				if (sp == cap) {
					rc = htr_analyzer_fail(ctx,
						HTR_ERR_CORRUPT, "blocks nest "
						"deeper than the header's "
						"max_depth");
					goto out;
				}
				st[sp].parent = b.parent;
				st[sp].sum = total;
				st[sp].hint = hint_first;
				sp++;
			}
		}
		if (++k == HTR_TSC_CHUNK || i + 1 == n) {
			uint64_t c = i / HTR_TSC_CHUNK;
			size_t len = encode(c, tot, loc, k, buf);

			k = 0;
			if (storing) {
				uint8_t key[5];

				/* Stored as computed: chunk keys increase. */
				chunk_key(c, key);
				rc = htr_analyzer_put(ctx, key, sizeof(key),
						      buf, len);
				if (rc < 0)
					goto out;
				continue;
			}
			r->own[c] = malloc(len);
			if (!r->own[c]) {
				rc = htr_analyzer_fail(ctx, HTR_ERR_NOMEM,
						       "out of memory");
				goto out;
			}
			memcpy(r->own[c], buf, len);
			r->len[c] = (uint32_t) len;
		}
	}
out:
	if (rc < 0)
		tsc_free(r, NULL);
	else
		*result = r;
	free(tot);
	free(loc);
	free(st);
	free(buf);
	return rc;
}

void htr_tsc__descriptor(struct htr_analyzer *d)
{
	htr_analyzer_init(d);
	d->name = an_name;
	d->version = HTR_TSC_VERSION;
	d->compute = tsc_compute;
	d->encode = tsc_encode;
	d->decode = tsc_decode;
	d->free = tsc_free;
	d->current = tsc_current;
}

int htr_tsc_get(struct htr_analysis *a, uint32_t block, uint64_t *total,
		uint64_t *children, uint64_t *local)
{
	struct tsc_res *r;
	uint64_t t = 0, l = 0;
	int rc;

	if (!a)
		return HTR_ERR_INVALID;
	r = htr_analyzer__result(a, an_name);
	if (!r)
		return htr_err__set(&a->err, HTR_ERR_INVALID, "the tsc "
				    "analyzer is not open");
	rc = htr_tsc__value(r, NULL, block, &t, &l);
	if (rc < 0)
		return rc;
	if (l > t)
		return htr_err__set(&a->err, HTR_ERR_CORRUPT, "%s: block %u: "
				    "local ticks exceed the total",
				    htr_analyzer_sidecar(r->ctx), block);
	if (total)
		*total = t;
	if (children)
		*children = t - l;
	if (local)
		*local = l;
	return 0;
}
