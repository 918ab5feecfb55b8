/*
 * Reports (htr/report.h): top's and find's rows in their order, dump's
 * text lines.  Over the public tree and analysis API only.
 */
#include "htr/report.h"

#include "err.h"
#include "report_int.h"
#include "tmpfile.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* What the sort needs of a hit; the rest (its source position) is read
 * again for the hits that are visited.  40 bytes where a whole
 * htr_find_hit is 72: `htr find '*'` on a 10^9-instruction build finds
 * tens of millions of them. */
struct slim {
	uint64_t first, last, total, local;
	uint32_t block, name;      /* name: its index in hits.names */
};

/* A sorted run spilled to the temporary file, as the merge reads it. */
struct run {
	uint64_t at, left;         /* file offset of the next hit, hits left */
	struct slim *buf;          /* buffered hits: [pos, n) not yet taken */
	size_t pos, n;
};

struct hits {
	struct htr_analysis *an;
	const struct htr_file *f;
	int (*cmp)(const void *, const void *);
	struct slim *v;
	size_t n, cap;
	size_t most;               /* a limit: keep the best @most only */
	size_t run;                /* hits held at most before a spill */
	const char **names;        /* one per matching function */
	size_t nnames, names_cap;
	int fd;                    /* the spilled runs, one after the other
				    * (-1: none yet) */
	uint64_t *runs;            /* hits in each run */
	size_t nruns, runs_cap;
	int err, errno_;           /* errno_: of a failed spill, for the caller */
};

/* @p grown to hold @n + 1 elements of @size bytes, doubling from @first. */
static int room(void **p, size_t *cap, size_t n, size_t size, size_t first)
{
	size_t nc;
	void *nv;

	if (n < *cap)
		return 0;
	nc = *cap ? 2 * *cap : first;
	if (nc > SIZE_MAX / size || !(nv = realloc(*p, nc * size)))
		return HTR_ERR_NOMEM;
	*p = nv;
	*cap = nc;
	return 0;
}

static int by_time(const void *x, const void *y)
{
	const struct slim *a = x, *b = y;

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
	const struct slim *a = x, *b = y;

	if (a->total != b->total)
		return a->total > b->total ? -1 : 1;
	return by_time(x, y);
}

/* With a limit, h->v is a heap of the best h->most so far, the worst on
 * top: a hit better than it takes its place. */
static void sift_down(struct hits *h, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, w = i;
		struct slim t;

		if (l < h->n && h->cmp(&h->v[l], &h->v[w]) > 0)
			w = l;
		if (l + 1 < h->n && h->cmp(&h->v[l + 1], &h->v[w]) > 0)
			w = l + 1;
		if (w == i)
			return;
		t = h->v[i];
		h->v[i] = h->v[w];
		h->v[w] = t;
		i = w;
	}
}

static void sift_up(struct hits *h, size_t i)
{
	while (i > 0 && h->cmp(&h->v[i], &h->v[(i - 1) / 2]) > 0) {
		struct slim t = h->v[i];

		h->v[i] = h->v[(i - 1) / 2];
		h->v[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static int spill_failed(struct hits *h)
{
	h->errno_ = errno ? errno : EIO;
	return HTR_ERR_IO;
}

/* The hits held, sorted, appended to the temporary file as a run. */
static int spill(struct hits *h)
{
	struct htr_err e;

	if (h->fd < 0 && (h->fd = htr_tmp__open("find", &e)) < 0)
		return spill_failed(h);
	if (room((void **) &h->runs, &h->runs_cap, h->nruns,
		 sizeof(*h->runs), 16) < 0)
		return HTR_ERR_NOMEM;
	qsort(h->v, h->n, sizeof(*h->v), h->cmp);
	if (htr_tmp__write(h->fd, h->v, h->n * sizeof(*h->v)) < 0)
		return spill_failed(h);
	h->runs[h->nruns++] = h->n;
	h->n = 0;
	return 0;
}

static int hit_add(const char *name, uint32_t block, void *payload)
{
	struct hits *h = payload;
	struct htr_block_info bi;
	struct slim x;
	int rc;

	/* The index calls for one function's blocks in a row. */
	if (!h->nnames || h->names[h->nnames - 1] != name) {
		if ((rc = room((void **) &h->names, &h->names_cap, h->nnames,
			       sizeof(*h->names), 16)) < 0) {
			h->err = rc;
			return 1;
		}
		h->names[h->nnames++] = name;
	}
	bi.size = sizeof(bi);
	rc = htr_block_get(h->f, block, &bi, sizeof(bi));
	if (rc == 0)
		rc = htr_tsc_get(h->an, block, &x.total, NULL, &x.local);
	if (rc < 0) {
		h->err = rc;
		return 1;
	}
	x.first = bi.first;
	x.last = bi.last;
	x.block = block;
	x.name = (uint32_t) (h->nnames - 1);
	if (h->most && h->n == h->most) {
		if (h->cmp(&x, &h->v[0]) < 0) {
			h->v[0] = x;
			sift_down(h, 0);
		}
		return 0;
	}
	if (!h->most && h->n == h->run && (rc = spill(h)) < 0) {
		h->err = rc;
		return 1;
	}
	if ((rc = room((void **) &h->v, &h->cap, h->n, sizeof(*h->v),
		       h->most && h->most < 256 ? h->most : 256)) < 0) {
		h->err = rc;
		return 1;
	}
	h->v[h->n++] = x;
	if (h->most)
		sift_up(h, h->n - 1);
	return 0;
}

/* Hand @x to @fn as a whole hit. */
static int visit_hit(const struct hits *h, const struct slim *x,
		     htr_find_fn fn, void *payload)
{
	struct htr_block_info bi;
	struct htr_find_hit hit;
	int rc;

	bi.size = sizeof(bi);
	if ((rc = htr_block_get(h->f, x->block, &bi, sizeof(bi))) < 0)
		return rc;
	hit.size = sizeof(hit);
	hit.block = x->block;
	hit.name = h->names[x->name];
	hit.first = x->first;
	hit.last = x->last;
	hit.total = x->total;
	hit.local = x->local;
	hit.where = htr_block_where(&bi);
	return (rc = fn(&hit, payload)) != 0 ? htr_err__callback(rc) : 0;
}

/* The next hit of run @r into its buffer (@cap hits), if it has none
 * left there.  Returns 0, 1 when the run is done, or HTR_ERR_IO. */
static int run_fill(struct hits *h, struct run *r, size_t cap)
{
	size_t want;
	int e;

	if (r->pos < r->n)
		return 0;
	if (!r->left)
		return 1;
	want = r->left < cap ? (size_t) r->left : cap;
	if ((e = htr_tmp__io_at(h->fd, r->buf, want * sizeof(*r->buf), r->at,
				false))) {
		errno = e > 0 ? e : EIO;
		return spill_failed(h);
	}
	r->at += want * sizeof(*r->buf);
	r->left -= want;
	r->pos = 0;
	r->n = want;
	return 0;
}

/* Whether run @a's next hit comes before run @b's. */
static int head_before(const struct hits *h, const struct run *a,
		       const struct run *b)
{
	return h->cmp(&a->buf[a->pos], &b->buf[b->pos]) < 0;
}

/* The runs merged, each hit handed to @fn in order; the hits held last
 * are a run of their own, in memory.  A heap of runs by their next hit,
 * the first on top; every run reads through a buffer, together about as
 * much memory as one run. */
static int merge(struct hits *h, htr_find_fn fn, void *payload)
{
	size_t k = h->nruns + 1, per = h->run / k > 64 ? h->run / k : 64;
	struct run *r = calloc(k, sizeof(*r));
	struct run **heap = calloc(k, sizeof(*heap));
	uint64_t at = 0;
	size_t i, j, nh = 0;
	int rc = r && heap ? 0 : HTR_ERR_NOMEM;

	for (i = 0; !rc && i < k; i++) {
		if (i == h->nruns) {
			/* The last hits, sorted, where they are. */
			r[i].buf = h->v;
			r[i].n = h->n;
		} else {
			r[i].at = at;
			r[i].left = h->runs[i];
			at += h->runs[i] * sizeof(struct slim);
			if (!(r[i].buf = malloc(per * sizeof(struct slim))))
				rc = HTR_ERR_NOMEM;
			else if ((rc = run_fill(h, &r[i], per)) > 0)
				rc = 0;
		}
		if (rc || r[i].pos == r[i].n)
			continue;
		for (j = nh++; j > 0 && head_before(h, &r[i], heap[(j - 1) / 2]);
		     j = (j - 1) / 2)
			heap[j] = heap[(j - 1) / 2];
		heap[j] = &r[i];
	}
	while (!rc && nh) {
		struct run *top = heap[0];

		if ((rc = visit_hit(h, &top->buf[top->pos++], fn, payload)) ||
		    (h->most && !--h->most))
			break;
		if (top->pos == top->n && top->buf != h->v &&
		    (rc = run_fill(h, top, per)) < 0)
			break;
		rc = 0;
		if (top->pos == top->n)
			top = heap[--nh];
		/* sift @top down from the root */
		for (j = 0;;) {
			size_t l = 2 * j + 1, w = l;

			if (l >= nh)
				break;
			if (l + 1 < nh && head_before(h, heap[l + 1], heap[l]))
				w = l + 1;
			if (!head_before(h, heap[w], top))
				break;
			heap[j] = heap[w];
			j = w;
		}
		if (nh)
			heap[j] = top;
	}
	for (i = 0; r && i < h->nruns; i++)
		free(r[i].buf);
	free(r);
	free(heap);
	return rc;
}

int htr_find__visit(const struct htr_file *file, struct htr_analysis *a,
		    const char *pattern, int mode, int order, uint64_t limit,
		    size_t run, htr_find_fn fn, void *payload)
{
	struct hits h;
	size_t i;
	int rc;

	if (!file || !a || !pattern || !fn || !run ||
	    (order != HTR_FIND_TIME && order != HTR_FIND_COST))
		return HTR_ERR_INVALID;
	memset(&h, 0, sizeof(h));
	h.an = a;
	h.f = file;
	h.fd = -1;
	h.cmp = order == HTR_FIND_COST ? by_cost : by_time;
	h.run = run;
	/* A limit the memory of a run holds is kept in a heap; a larger
	 * one is where the merge stops. */
	h.most = limit && limit <= run ? (size_t) limit : 0;
	rc = htr_symidx_find(a, pattern, mode, hit_add, &h);
	if (h.err)
		rc = h.err;
	if (!rc && h.n)
		qsort(h.v, h.n, sizeof(*h.v), h.cmp);
	if (!rc && h.nruns) {
		h.most = limit < SIZE_MAX ? (size_t) limit : 0;
		rc = merge(&h, fn, payload);
	} else {
		for (i = 0; i < h.n && !rc; i++)
			rc = visit_hit(&h, &h.v[i], fn, payload);
	}
	if (h.fd >= 0)
		close(h.fd);
	free(h.v);
	free(h.runs);
	free(h.names);
	/* 0 when the sidecar failed, not the file: its message is on @a. */
	if (rc == HTR_ERR_IO)
		errno = h.errno_;
	return rc;
}

int htr_find_visit(const struct htr_file *file, struct htr_analysis *a,
		   const char *pattern, int mode, int order, uint64_t limit,
		   htr_find_fn fn, void *payload)
{
	return htr_find__visit(file, a, pattern, mode, order, limit,
			       HTR_FIND_RUN, fn, payload);
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
