/*
 * Cumulative TSC ticks per block: one post-order pass, O(max depth) memory,
 * results in chunks of HTR_TSC_CHUNK blocks (layout in FORMAT.md,
 * "Sidecar"): per chunk a 16-byte header and two arrays of fixed-width
 * little-endian integers (totals, then locals), each as wide as the
 * chunk's largest value needs.
 */
#include "analyze.h"
#include "le.h"

#include <stdlib.h>
#include <string.h>

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
static size_t encode(uint64_t c, const uint64_t *tot, const uint64_t *loc,
		     uint32_t n, uint8_t *buf)
{
	unsigned wt = 0, wl = 0, w;
	uint8_t *p;
	uint32_t i;
	size_t len;
	uint64_t h;

	for (i = 0; i < n; i++) {
		w = width_of(tot[i]);
		if (w > wt)
			wt = w;
		w = width_of(loc[i]);
		if (w > wl)
			wl = w;
	}
	memset(buf, 0, HTR_TSC_CHUNK_HDR);
	htr_disk__put_le(buf, n, 4);
	buf[4] = (uint8_t) wt;
	buf[5] = (uint8_t) wl;
	p = buf + HTR_TSC_CHUNK_HDR;
	for (i = 0; i < n; i++, p += wt)
		htr_disk__put_le(p, tot[i], wt);
	for (i = 0; i < n; i++, p += wl)
		htr_disk__put_le(p, loc[i], wl);
	len = (size_t) (p - buf);
	h = chunk_hash(c, buf, len);
	htr_disk__put_le(buf + 8, h, 8);
	return len;
}

int htr_tsc__check_chunk(struct htr_analysis *a, uint64_t c,
			 const uint8_t *v, size_t len)
{
	uint64_t nb = a->nblocks;
	uint64_t want_n = nb - c * HTR_TSC_CHUNK;
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
	return htr_err__set(&a->err, HTR_ERR_CORRUPT, "%s: TSC chunk %llu is "
			    "damaged (remove the sidecar to recompute)",
			    a->sidecar ? a->sidecar : "analysis",
			    (unsigned long long) c);
}

void htr_tsc__decode(const uint8_t *v, uint32_t i, uint64_t *total,
		     uint64_t *local)
{
	unsigned wt = v[4], wl = v[5];
	uint32_t n = (uint32_t) htr_disk__get_le(v, 4);
	const uint8_t *p = v + HTR_TSC_CHUNK_HDR;

	*total = htr_disk__get_le(p + (size_t) i * wt, wt);
	*local = htr_disk__get_le(p + (size_t) n * wt + (size_t) i * wl, wl);
}

void htr_tsc__forget(struct htr_analysis *a)
{
	if (a->chunk)
		memset(a->chunk, 0, a->nchunks * sizeof(*a->chunk));
	if (a->chunk_ok)
		memset(a->chunk_ok, 0, a->nchunks);
}

int htr_tsc__get(struct htr_analysis *a, uint32_t block, uint64_t *total,
		 uint64_t *local)
{
	uint64_t c = block / HTR_TSC_CHUNK;
	int rc;

	if (block >= a->nblocks || c >= a->nchunks)
		return htr_err__set(&a->err, HTR_ERR_RANGE, "block %u: no such "
				    "block", block);
	if (!a->chunk_ok[c]) {
		const uint8_t *v;
		size_t len;

		if (a->mem_chunk) {
			v = a->mem_chunk[c];
			len = a->chunk_len[c];
		} else {
			rc = htr_sidecar__tsc_chunk(a, c, &v, &len);
			if (rc < 0)
				return rc;
		}
		rc = htr_tsc__check_chunk(a, c, v, len);
		if (rc < 0)
			return rc;
		a->chunk[c] = v;
		a->chunk_ok[c] = 1;
	}
	htr_tsc__decode(a->chunk[c], block % HTR_TSC_CHUNK, total, local);
	return 0;
}

struct pending {
	uint32_t parent;   /* an open block ... */
	uint64_t sum;      /* ... and the totals of its children so far */
};

int htr_tsc__compute(struct htr_analysis *a, htr_tsc_emit_fn emit, void *ctx)
{
	const struct htr_file *f = a->file;
	struct htr_file_info fi;
	uint64_t n, i, t0 = 0, id0;
	uint64_t *tot = NULL, *loc = NULL;
	uint64_t hint_first = HTR_TSC_HINT_INIT, hint_last = HTR_TSC_HINT_INIT;
	struct pending *st = NULL;
	size_t sp = 0, cap;
	uint8_t *buf = NULL;
	uint32_t k = 0;
	int rc = 0, have_t0;

	if (htr_file_info(f, &fi, sizeof(fi)) < 0)
		return htr_err__set(&a->err, HTR_ERR_INVALID, "no open file");
	n = fi.nblocks;
	cap = (size_t) fi.max_depth + 2;
	have_t0 = htr_tsc_point(f, 0, &id0, &t0) == 0;
	tot = malloc(HTR_TSC_CHUNK * sizeof(*tot));
	loc = malloc(HTR_TSC_CHUNK * sizeof(*loc));
	st = malloc(cap * sizeof(*st));
	buf = malloc(HTR_TSC_CHUNK_HDR + HTR_TSC_CHUNK * 16);
	if (!tot || !loc || !st || !buf) {
		rc = htr_err__set(&a->err, HTR_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		struct htr_block_info b;
		uint64_t tf = 0, tl = 0, total = 0, csum = 0;
		int have_f, have_l;

		rc = htr_block_get(f, (uint32_t) i, &b, sizeof(b));
		if (rc < 0) {
			rc = htr_err__set(&a->err, HTR_ERR_CORRUPT, "block %llu: "
					  "%s", (unsigned long long) i,
					  htr_errstr(rc));
			goto out;
		}
		/* A late block began with the trace: at the first time point
		 * (the first PSB+, reported at instruction 0).  So does any
		 * block that began before the first time point. */
		have_f = !(b.flags & HTR_BLOCK_LATE) &&
			 htr_tsc_lookup(f, b.first, &hint_first, &tf) == 0;
		if (!have_f && have_t0) {
			tf = t0;
			have_f = 1;
		}
		have_l = htr_tsc_lookup(f, b.last, &hint_last, &tl) == 0;
		if (have_f && have_l && tl > tf)
			total = tl - tf;
		if (sp && st[sp - 1].parent == (uint32_t) i)
			csum = st[--sp].sum;
		tot[k] = total;
		loc[k] = total >= csum ? total - csum : 0;
		if (b.parent != HTR_NONE) {
			if (b.parent <= i) {
				rc = htr_err__set(&a->err, HTR_ERR_CORRUPT,
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
					rc = htr_err__set(&a->err,
						HTR_ERR_CORRUPT, "blocks nest "
						"deeper than the header's "
						"max_depth");
					goto out;
				}
				st[sp].parent = b.parent;
				st[sp].sum = total;
				sp++;
			}
		}
		if (++k == HTR_TSC_CHUNK || i + 1 == n) {
			uint64_t c = i / HTR_TSC_CHUNK;
			size_t len = encode(c, tot, loc, k, buf);

			rc = emit(ctx, c, buf, len);
			if (rc < 0)
				goto out;
			k = 0;
		}
	}
out:
	free(tot);
	free(loc);
	free(st);
	free(buf);
	return rc;
}
