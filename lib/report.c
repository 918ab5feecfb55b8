/*
 * Reports (htr/report.h): top's and find's rows in their order, dump's
 * text lines.  Over the public tree and analysis API only.
 */
#include "htr/report.h"

#include "err.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ top */

struct rows {
	struct htr_func_stats *v;
	size_t n, cap;
	char failed;
};

/* Copies of the library's stats: their names are the analysis's, valid
 * until it closes. */
static int row_add(const struct htr_func_stats *st, void *payload)
{
	struct rows *r = payload;

	if (r->n == r->cap) {
		size_t nc = r->cap ? 2 * r->cap : 256;
		struct htr_func_stats *nv = realloc(r->v, nc * sizeof(*nv));

		if (!nv) {
			r->failed = 1;
			return 1;
		}
		r->v = nv;
		r->cap = nc;
	}
	r->v[r->n] = *st;
	r->v[r->n].size = sizeof(*st);
	r->n++;
	return 0;
}

/* Largest first, then by name; one comparator per key, as qsort()
 * passes no context. */
static int by_key(uint64_t ka, uint64_t kb, const struct htr_func_stats *a,
		  const struct htr_func_stats *b)
{
	if (ka != kb)
		return ka > kb ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int by_local(const void *x, const void *y)
{
	const struct htr_func_stats *a = x, *b = y;

	return by_key(a->local, b->local, a, b);
}

static int by_inclusive(const void *x, const void *y)
{
	const struct htr_func_stats *a = x, *b = y;

	return by_key(a->inclusive, b->inclusive, a, b);
}

static int by_calls(const void *x, const void *y)
{
	const struct htr_func_stats *a = x, *b = y;

	return by_key(a->calls, b->calls, a, b);
}

int htr_top_visit(struct htr_analysis *a, const char *pattern, int mode,
		  int key, uint64_t limit, htr_func_fn fn, void *payload)
{
	static int (*const cmp[])(const void *, const void *) = {
		[HTR_TOP_LOCAL] = by_local,
		[HTR_TOP_INCLUSIVE] = by_inclusive,
		[HTR_TOP_CALLS] = by_calls,
	};
	struct rows r = { NULL, 0, 0, 0 };
	size_t i, n;
	int rc;

	if (!a || !fn || key < 0 || key > HTR_TOP_CALLS)
		return HTR_ERR_INVALID;
	rc = htr_func_visit(a, pattern, mode, row_add, &r);
	if (r.failed)
		rc = HTR_ERR_NOMEM;
	if (rc < 0) {
		free(r.v);
		return rc;
	}
	if (r.n)
		qsort(r.v, r.n, sizeof(*r.v), cmp[key]);
	n = limit && limit < r.n ? (size_t) limit : r.n;
	for (i = 0, rc = 0; i < n && !rc; i++)
		rc = fn(&r.v[i], payload);
	free(r.v);
	return rc ? htr_err__callback(rc) : 0;
}

/* ----------------------------------------------------------- find */

struct hits {
	struct htr_analysis *an;
	const struct htr_file *f;
	struct htr_find_hit *v;
	size_t n, cap;
	int err;
};

static int hit_add(const char *name, uint32_t block, void *payload)
{
	struct hits *h = payload;
	struct htr_block_info bi;
	struct htr_find_hit *x;
	int rc;

	if (h->n == h->cap) {
		size_t nc = h->cap ? 2 * h->cap : 256;
		struct htr_find_hit *nv = realloc(h->v, nc * sizeof(*nv));

		if (!nv) {
			h->err = HTR_ERR_NOMEM;
			return 1;
		}
		h->v = nv;
		h->cap = nc;
	}
	x = &h->v[h->n];
	bi.size = sizeof(bi);
	rc = htr_block_get(h->f, block, &bi, sizeof(bi));
	if (rc == 0)
		rc = htr_tsc_get(h->an, block, &x->total, NULL, &x->local);
	if (rc < 0) {
		h->err = rc;
		return 1;
	}
	x->size = sizeof(*x);
	x->block = block;
	x->name = name;
	x->first = bi.first;
	x->last = bi.last;
	x->where = htr_block_where(&bi);
	h->n++;
	return 0;
}

static int by_time(const void *x, const void *y)
{
	const struct htr_find_hit *a = x, *b = y;

	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	/* Same first instruction: the outer block (ends later) first; same
	 * span (a call into untraced code and its one callback): the outer
	 * one comes later in post-order. */
	if (a->last != b->last)
		return a->last > b->last ? -1 : 1;
	return a->block > b->block ? -1 : a->block < b->block;
}

static int by_cost(const void *x, const void *y)
{
	const struct htr_find_hit *a = x, *b = y;

	if (a->total != b->total)
		return a->total > b->total ? -1 : 1;
	return by_time(x, y);
}

int htr_find_visit(const struct htr_file *file, struct htr_analysis *a,
		   const char *pattern, int mode, int order, uint64_t limit,
		   htr_find_fn fn, void *payload)
{
	struct hits h;
	size_t i, n;
	int rc;

	if (!file || !a || !pattern || !fn ||
	    (order != HTR_FIND_TIME && order != HTR_FIND_COST))
		return HTR_ERR_INVALID;
	memset(&h, 0, sizeof(h));
	h.an = a;
	h.f = file;
	rc = htr_symidx_find(a, pattern, mode, hit_add, &h);
	if (h.err)
		rc = h.err;
	if (rc < 0) {
		free(h.v);
		return rc;
	}
	if (h.n)
		qsort(h.v, h.n, sizeof(*h.v),
		      order == HTR_FIND_COST ? by_cost : by_time);
	n = limit && limit < h.n ? (size_t) limit : h.n;
	for (i = 0, rc = 0; i < n && !rc; i++)
		rc = fn(&h.v[i], payload);
	free(h.v);
	return rc ? htr_err__callback(rc) : 0;
}

uint64_t htr_block_where(const struct htr_block_info *bi)
{
	if (!bi)
		return 0;
	if (bi->func != HTR_NONE)
		return bi->entry;
	if ((bi->flags & HTR_BLOCK_LATE) && bi->anchor_func != HTR_NONE)
		return bi->anchor;
	return 0;
}

/* ----------------------------------------------------------- text */

#define INDENT_LEVELS 64u

/* A line being written into a caller's buffer: @len counts what the
 * whole line needs, what fits is copied. */
struct text {
	char *buf;
	size_t size, len;
};

static void t_mem(struct text *t, const char *s, size_t n)
{
	if (t->len < t->size) {
		size_t room = t->size - 1 - t->len;

		memcpy(t->buf + t->len, s, n < room ? n : room);
	}
	t->len += n;
}

static void t_str(struct text *t, const char *s)
{
	t_mem(t, s, strlen(s));
}

static void t_u64(struct text *t, uint64_t v)
{
	char d[24];
	size_t i = sizeof(d);

	do {
		d[--i] = (char) ('0' + v % 10);
		v /= 10;
	} while (v);
	t_mem(t, d + i, sizeof(d) - i);
}

static void t_hex(struct text *t, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char d[18];
	size_t i = sizeof(d);

	do {
		d[--i] = digits[v & 15];
		v >>= 4;
	} while (v);
	d[--i] = 'x';
	d[--i] = '0';
	t_mem(t, d + i, sizeof(d) - i);
}

static void t_indent(struct text *t, uint32_t level)
{
	static const char sp[64] = "                                "
				   "                                ";
	size_t n = 2 * (size_t) (level < INDENT_LEVELS ? level : INDENT_LEVELS);

	while (n) {
		size_t k = n < sizeof(sp) ? n : sizeof(sp);

		t_mem(t, sp, k);
		n -= k;
	}
	if (level >= INDENT_LEVELS) {
		t_mem(t, "[", 1);
		t_u64(t, level);
		t_mem(t, "] ", 2);
	}
}

static size_t t_end(struct text *t)
{
	if (t->size)
		t->buf[t->len < t->size ? t->len : t->size - 1] = 0;
	return t->len;
}

size_t htr_text_block(char *buf, size_t size, uint32_t level,
		      const struct htr_block_info *bi)
{
	struct text t = { buf, buf ? size : 0, 0 };
	char flags[64];

	if (!bi)
		return t_end(&t);
	t_indent(&t, level);
	t_u64(&t, bi->first);
	t_mem(&t, "..", 2);
	t_u64(&t, bi->last);
	t_mem(&t, "  ", 2);
	/* Late blocks and calls whose entry was never traced alike. */
	if (bi->func == HTR_NONE)
		t_mem(&t, "?", 1);
	else
		t_hex(&t, bi->entry);
	t_mem(&t, "  ", 2);
	t_str(&t, htr_block_flags_str(bi->flags, flags, sizeof(flags)));
	return t_end(&t);
}

size_t htr_text_times(char *buf, size_t size, uint32_t level,
		      const char *name, uint64_t local, uint64_t total,
		      uint64_t part, uint64_t whole)
{
	struct text t = { buf, buf ? size : 0, 0 };
	/* Integer tenths: printf's floating point would be most of the time
	 * of a dump of 10^7 blocks. */
	uint64_t tenths = whole ? (uint64_t) (1000.0 * (double) part /
					      (double) whole + 0.5) : 1000;

	t_indent(&t, level);
	t_str(&t, name ? name : "?");
	t_mem(&t, "  ", 2);
	t_u64(&t, local);
	t_mem(&t, "  ", 2);
	t_u64(&t, total);
	t_mem(&t, "  ", 2);
	t_u64(&t, tenths / 10);
	t_mem(&t, ".", 1);
	t_u64(&t, tenths % 10);
	t_mem(&t, "%", 1);
	return t_end(&t);
}

void htr_json_string(FILE *fp, const char *s)
{
	const unsigned char *p = (const unsigned char *) (s ? s : "");

	fputc('"', fp);
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(fp, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(fp, "\\u%04x", *p);
		else
			fputc(*p, fp);
	}
	fputc('"', fp);
}
