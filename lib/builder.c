#include "builder.h"

#include "htr/tree.h"

#include <stdlib.h>
#include <string.h>

struct frame {
	uint64_t first;
	uint64_t ret_ip;        /* 0: unknown (the top-level frame) */
	uint32_t func;          /* HTR_FUNC_NONE until known */
	uint32_t first_child;
	uint32_t nchildren;
	uint8_t flags;
	uint8_t entry_pending;  /* the next run starts at its entry */
	uint8_t own;            /* ran instructions itself (top level) */
};

/* Open addressing, entry -> function index; grows at 1/2 load. */
struct funcmap {
	uint64_t *keys;         /* 0 = empty slot (0 is never an entry) */
	uint32_t *vals;
	size_t cap, n;
};

struct htr_tb {
	struct htr_writer *w;
	struct frame *st;       /* st[0] is the top-level frame */
	size_t depth, cap;      /* depth counts st[0] */
	uint64_t id;            /* next instruction ID */
	uint64_t gaps;
	uint64_t last_tsc;
	int have_tsc;
	int in_gap;             /* a gap was reported, no resume yet */
	struct funcmap funcs;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static int funcmap_grow(struct funcmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 1024, i;
	uint64_t *keys = calloc(ncap, sizeof(*keys));
	uint32_t *vals = calloc(ncap, sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return HTR_ERR_NOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->keys[i])
			continue;
		for (j = mix(m->keys[i]) & (ncap - 1); keys[j];
		     j = (j + 1) & (ncap - 1))
			;
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = ncap;
	return 0;
}

/* The function index of @entry, adding it to the table if new. */
static int func_index(struct htr_tb *t, uint64_t entry, uint32_t *out)
{
	struct funcmap *m = &t->funcs;
	size_t j;
	int rc;

	if (!entry) {
		*out = HTR_FUNC_NONE;
		return 0;
	}
	if ((m->n + 1) * 2 > m->cap && (rc = funcmap_grow(m)) < 0)
		return rc;
	for (j = mix(entry) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == entry) {
			*out = m->vals[j];
			return 0;
		}
	if (m->n >= HTR_FUNC_NONE)
		return HTR_ERR_LIMIT;
	rc = htr_writer__func(t->w, entry);
	if (rc < 0)
		return rc;
	m->keys[j] = entry;
	m->vals[j] = (uint32_t) m->n++;
	*out = m->vals[j];
	return 0;
}

int htr_tb__alloc(struct htr_tb **out, struct htr_writer *w)
{
	struct htr_tb *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return HTR_ERR_NOMEM;
	t->w = w;
	t->cap = 64;
	t->st = malloc(t->cap * sizeof(*t->st));
	if (!t->st) {
		free(t);
		return HTR_ERR_NOMEM;
	}
	memset(&t->st[0], 0, sizeof(t->st[0]));
	t->st[0].func = HTR_FUNC_NONE;
	t->st[0].first_child = HTR_NONE32;
	t->st[0].flags = HTR_BLOCK_LATE;
	t->depth = 1;
	*out = t;
	return 0;
}

void htr_tb__free(struct htr_tb *t)
{
	if (!t)
		return;
	free(t->st);
	free(t->funcs.keys);
	free(t->funcs.vals);
	free(t);
}

static int push(struct htr_tb *t, uint64_t ret_ip)
{
	struct frame *f;

	if (t->depth == t->cap) {
		size_t ncap = t->cap * 2;
		struct frame *n = realloc(t->st, ncap * sizeof(*n));

		if (!n)
			return HTR_ERR_NOMEM;
		t->st = n;
		t->cap = ncap;
	}
	f = &t->st[t->depth++];
	memset(f, 0, sizeof(*f));
	f->first = t->id;
	f->ret_ip = ret_ip;
	f->func = HTR_FUNC_NONE;
	f->first_child = HTR_NONE32;
	f->entry_pending = 1;
	return 0;
}

/* Write @f as a completed block ending at @last and make it the newest
 * child of the frame below it (or of the top-level frame). */
static int emit(struct htr_tb *t, const struct frame *f, uint64_t last,
		unsigned flags, struct frame *parent)
{
	struct htr_disk_block b;
	uint32_t idx;
	int rc;

	/* A call whose callee ran no traced instruction (the trace ends or
	 * stops right after it) is no block: it has nothing to span. */
	if (f->first > last)
		return 0;
	memset(&b, 0, sizeof(b));
	htr_disk__put48(b.first, f->first);
	htr_disk__put48(b.last, last);
	b.first_child = f->first_child;
	b.nchildren = f->nchildren;
	b.func_flags = f->func | (uint32_t) (f->flags | flags)
				 << HTR_DISK_FLAG_SHIFT;
	rc = htr_writer__block(t->w, &b, &idx);
	if (rc < 0)
		return rc;
	if (parent->first_child == HTR_NONE32)
		parent->first_child = idx;
	parent->nchildren++;
	return 0;
}

static int pop(struct htr_tb *t, uint64_t last, unsigned flags)
{
	t->depth--;
	return emit(t, &t->st[t->depth], last, flags, &t->st[t->depth - 1]);
}

/* A return with nothing open: the top-level frame was a callee all along.
 * It becomes a block adopting everything so far; its caller is the new
 * top-level frame, which starts where it did. */
static int late_return(struct htr_tb *t, uint64_t last)
{
	struct frame top = t->st[0];

	memset(&t->st[0], 0, sizeof(t->st[0]));
	t->st[0].first = top.first;
	t->st[0].func = HTR_FUNC_NONE;
	t->st[0].first_child = HTR_NONE32;
	t->st[0].flags = HTR_BLOCK_LATE;
	return emit(t, &top, last, 0, &t->st[0]);
}

int htr_tb__run(struct htr_tb *t, uint64_t ip, uint32_t ninsn,
		enum htr_icls cls, uint64_t ret_ip)
{
	struct frame *top = &t->st[t->depth - 1];
	uint64_t last;
	int rc;

	if (!ninsn)
		return 0;
	if (top->entry_pending) {
		top->entry_pending = 0;
		rc = func_index(t, ip, &top->func);
		if (rc < 0)
			return rc;
	}
	if (t->depth == 1)
		top->own = 1;
	last = t->id + ninsn - 1;
	if (last > HTR_MAX_ID)
		return HTR_ERR_LIMIT;
	t->id += ninsn;
	switch (cls) {
	case HTR_IC_CALL:
	case HTR_IC_FAR_CALL:
		return push(t, ret_ip);
	case HTR_IC_RET:
	case HTR_IC_FAR_RET:
		if (t->depth > 1)
			return pop(t, last, 0);
		return late_return(t, last);
	case HTR_IC_OTHER:
		break;
	}
	return 0;
}

int htr_tb__gap(struct htr_tb *t, int kind, uint64_t offset, int code)
{
	size_t i;

	t->gaps++;
	t->in_gap = 1;
	for (i = 0; i < t->depth; i++)
		t->st[i].flags |= HTR_BLOCK_GAP;
	return htr_writer__gap(t->w, t->id, offset, kind, code);
}

int htr_tb__resume(struct htr_tb *t, uint64_t ip)
{
	size_t i;
	int rc;

	if (!t->in_gap)
		return 0;
	t->in_gap = 0;
	/* A pending entry was lost in the gap: it stays unknown. */
	t->st[t->depth - 1].entry_pending = 0;
	for (i = t->depth - 1; i >= 1; i--) {
		if (t->st[i].ret_ip != ip)
			continue;
		/* Frames i.. returned while we could not see them. */
		while (t->depth > i) {
			rc = pop(t, t->id ? t->id - 1 : 0, HTR_BLOCK_IMPLICIT);
			if (rc < 0)
				return rc;
		}
		break;
	}
	return 0;
}

int htr_tb__time(struct htr_tb *t, uint64_t tsc)
{
	if (t->have_tsc && tsc == t->last_tsc)
		return 0;
	t->have_tsc = 1;
	t->last_tsc = tsc;
	return htr_writer__tsc(t->w, t->id ? t->id - 1 : 0, tsc);
}

int htr_tb__sync(struct htr_tb *t, uint64_t offset)
{
	return htr_writer__sync(t->w, offset, t->id);
}

int htr_tb__finish(struct htr_tb *t)
{
	uint64_t last = t->id ? t->id - 1 : 0;
	int rc;

	if (!t->id)
		return 0;
	while (t->depth > 1) {
		rc = pop(t, last, HTR_BLOCK_TRUNCATED);
		if (rc < 0)
			return rc;
	}
	if (t->st[0].own) {
		struct frame root;

		memset(&root, 0, sizeof(root));
		root.first_child = HTR_NONE32;
		rc = emit(t, &t->st[0], last, HTR_BLOCK_TRUNCATED, &root);
		if (rc < 0)
			return rc;
	}
	return 0;
}

uint64_t htr_tb__insns(const struct htr_tb *t) { return t->id; }
uint64_t htr_tb__gaps(const struct htr_tb *t) { return t->gaps; }
uint64_t htr_tb__funcs(const struct htr_tb *t) { return t->funcs.n; }
