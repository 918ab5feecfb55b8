/*
 * The tree API against ground truth the test builds itself: a random
 * "program" of calls, returns and plain instructions is simulated with a
 * call stack; it knows every block's span, parent and children, and which
 * frame executed every instruction.  The blocks go through the writer in
 * completion order (post-order), exactly as the builder emits them, and the
 * opened file must agree with the simulation on everything.
 */
#include "file.h"
#include "writer.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Deterministic PRNG (splitmix64), so a failing seed can be replayed. */
static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* Ground truth, indexed by creation (pre-order) number. */
struct gnode {
	uint64_t first, last;
	uint32_t parent;        /* creation number, UINT32_MAX for a root */
	uint32_t first_child, last_child, next_sibling;
	uint32_t nchildren;
	uint32_t depth;
	uint32_t post;          /* index in the file */
	uint32_t func_flags;
};

struct gtree {
	struct gnode *n;
	uint32_t count, cap;
	uint32_t *owner;        /* per instruction: creation number or NONE */
	uint64_t ninsns, cap_insns;
	uint32_t *by_post;      /* post index -> creation number */
	uint32_t first_root, last_root, nroots, max_depth;
	uint32_t nfuncs;
	struct htr_disk_tsc *tsc;
	uint64_t ntsc;
	struct htr_disk_gap *gaps;
	uint64_t ngaps;

	/* simulation */
	uint32_t *stack;
	uint32_t depth, stack_cap;
	struct htr_writer *w;
	unsigned ranges;        /* the commit linked in this many at once */
};

#define NONE UINT32_MAX

static void exec_insn(struct gtree *g)
{
	if (g->ninsns == g->cap_insns) {
		g->cap_insns = g->cap_insns ? g->cap_insns * 2 : 1024;
		g->owner = realloc(g->owner, g->cap_insns * sizeof(*g->owner));
		cr_assert(g->owner);
	}
	g->owner[g->ninsns++] = g->depth ? g->stack[g->depth - 1] : NONE;
}

static void call(struct gtree *g)
{
	struct gnode *n;
	uint32_t id = g->count;

	if (g->count == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 1024;
		g->n = realloc(g->n, g->cap * sizeof(*g->n));
		cr_assert(g->n);
	}
	if (g->depth == g->stack_cap) {
		g->stack_cap = g->stack_cap ? g->stack_cap * 2 : 64;
		g->stack = realloc(g->stack, g->stack_cap * sizeof(*g->stack));
		cr_assert(g->stack);
	}
	n = &g->n[g->count++];
	memset(n, 0, sizeof(*n));
	n->first = g->ninsns;
	n->first_child = n->last_child = n->next_sibling = NONE;
	n->parent = g->depth ? g->stack[g->depth - 1] : NONE;
	n->depth = g->depth + 1;
	if (n->depth > g->max_depth)
		g->max_depth = n->depth;
	if (g->nfuncs && below(4))
		n->func_flags = (uint32_t) below(g->nfuncs);
	else
		n->func_flags = HTR_FUNC_NONE;
	n->func_flags |= (uint32_t) below(16) << HTR_DISK_FLAG_SHIFT;
	if (n->parent != NONE) {
		struct gnode *p = &g->n[n->parent];

		if (p->last_child == NONE)
			p->first_child = id;
		else
			g->n[p->last_child].next_sibling = id;
		p->last_child = id;
		p->nchildren++;
	} else {
		if (g->last_root == NONE)
			g->first_root = id;
		else
			g->n[g->last_root].next_sibling = id;
		g->last_root = id;
		g->nroots++;
	}
	g->stack[g->depth++] = id;
}

/* Return from the current frame: the ret is its last instruction; the
 * block is complete and goes to the writer. */
static void ret(struct gtree *g)
{
	uint32_t id = g->stack[g->depth - 1];
	struct gnode *n = &g->n[id];
	struct htr_disk_block b;
	uint32_t idx;

	exec_insn(g);
	n->last = g->ninsns - 1;
	g->depth--;
	memset(&b, 0, sizeof(b));
	htr_disk__put48(b.first, n->first);
	htr_disk__put48(b.last, n->last);
	b.first_child = n->first_child == NONE ? HTR_NONE :
			g->n[n->first_child].post;
	b.nchildren = n->nchildren;
	b.func_flags = n->func_flags;
	/* The writer must not read these. */
	b.parent = 0xdeadbeef;
	b.next_sibling = 0xdeadbeef;
	cr_assert_eq(htr_writer__block(g->w, &b, &idx), 0, "%s",
		     htr_writer__err(g->w)->msg);
	n->post = idx;
}

enum shape { RANDOM, CHAIN, WIDE, FOREST, EMPTY, COMB };

static char tmpdir[256];

static void mk_tmpdir(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/htr-tree-XXXXXX", t ? t : "/tmp");
	cr_assert(mkdtemp(tmpdir));
}

static void rm_tmpdir(const char *path)
{
	unlink(path);
	rmdir(tmpdir);
}

/*
 * Simulate a program of roughly @size blocks and write it to @path.
 * RANDOM: calls/returns with random depth drift; CHAIN: one chain of @size
 * nested calls; WIDE: one root with @size - 1 children; FOREST: several
 * roots separated by top-level code; EMPTY: instructions but no calls;
 * COMB: @size / 2 nested calls, each of which first calls a leaf.
 */
static void gen(struct gtree *g, const char *path, enum shape shape,
		uint32_t size, uint64_t seed, unsigned threads)
{
	struct htr_writer_meta meta;
	struct htr_err err;
	uint32_t i;
	uint64_t k, t;

	memset(g, 0, sizeof(*g));
	g->first_root = g->last_root = NONE;
	rng_state = seed;
	cr_assert_eq(htr_writer__open(&g->w, path, &err), 0, "%s", err.msg);
	htr_writer__threads(g->w, threads);
	g->nfuncs = (uint32_t) below(50) + 1;
	for (i = 0; i < g->nfuncs; i++)
		cr_assert_eq(htr_writer__func(g->w, 0x400000 + 16 * i), 0);

	switch (shape) {
	case RANDOM: {
		/* A target depth that wanders, so trees get both deep and
		 * bushy parts. */
		uint32_t target = 1 + (uint32_t) below(8);

		while (g->count < size) {
			uint64_t r = below(100);

			if (r < 5)
				target = 1 + (uint32_t) below(r < 1 ? 200 : 12);
			if (below(3) == 0)
				exec_insn(g);
			if (g->depth < target ? below(3) != 0 : below(4) == 0)
				call(g);
			else if (g->depth)
				ret(g);
			else
				exec_insn(g);
		}
		break;
	}
	case CHAIN:
		exec_insn(g);
		for (i = 0; i < size; i++) {
			call(g);
			if (i % 7 == 0)
				exec_insn(g);
		}
		break;
	case WIDE:
		call(g);
		for (i = 1; i < size; i++) {
			if (i % 3)
				exec_insn(g);
			call(g);
			if (i % 5)
				exec_insn(g);
			ret(g);
		}
		break;
	case FOREST:
		for (i = 0; i < size; i++) {
			for (k = below(3); k--;)
				exec_insn(g);
			if (g->depth < 1 || (g->depth < 5 && below(2)))
				call(g);
			else
				ret(g);
		}
		break;
	case EMPTY:
		for (i = 0; i < size; i++)
			exec_insn(g);
		break;
	case COMB:
		exec_insn(g);
		for (i = 0; i < size / 2; i++) {
			call(g);
			call(g);
			ret(g);
		}
		break;
	}
	while (g->depth)
		ret(g);
	for (k = below(3); k--;)
		exec_insn(g);

	/* Time: a few sorted change points, with repeats. */
	g->ntsc = below(40);
	g->tsc = calloc(g->ntsc + 1, sizeof(*g->tsc));
	for (k = 0, t = 1000; k < g->ntsc; k++) {
		g->tsc[k].id = below(g->ninsns + 1);
		g->tsc[k].tsc = t += below(1000);
	}
	for (k = 1; k < g->ntsc; k++)     /* insertion sort by id */
		for (i = (uint32_t) k; i > 0 && g->tsc[i].id < g->tsc[i - 1].id;
		     i--) {
			struct htr_disk_tsc x = g->tsc[i];

			g->tsc[i] = g->tsc[i - 1];
			g->tsc[i - 1] = x;
		}
	for (k = 0; k < g->ntsc; k++)
		cr_assert_eq(htr_writer__tsc(g->w, g->tsc[k].id,
					     g->tsc[k].tsc), 0);
	g->ngaps = below(10);
	g->gaps = calloc(g->ngaps + 1, sizeof(*g->gaps));
	for (k = 0; k < g->ngaps; k++) {
		g->gaps[k].id = (k ? g->gaps[k - 1].id : 0) +
				below(g->ninsns / (g->ngaps + 1) + 1);
		g->gaps[k].offset = rnd();
		g->gaps[k].kind = 1 + (int32_t) below(3);
		g->gaps[k].code = -(int32_t) below(30);
		cr_assert_eq(htr_writer__gap(g->w, g->gaps[k].id,
					     g->gaps[k].offset,
					     g->gaps[k].kind,
					     g->gaps[k].code), 0);
	}

	memset(&meta, 0, sizeof(meta));
	meta.ninsns = g->ninsns;
	meta.trace_size = 12345;
	meta.trace_hash = 0xabcdef;
	cr_assert_eq(htr_writer__commit(g->w, &meta), 0, "%s",
		     htr_writer__err(g->w)->msg);
	cr_assert_eq(htr_writer__max_depth(g->w), g->max_depth);
	g->ranges = htr_writer__link_ranges(g->w);
	cr_assert(g->ranges >= 1 && g->ranges <= (threads > 1 ? threads : 1));
	htr_writer__free(g->w);
	g->w = NULL;

	g->by_post = malloc((g->count + 1) * sizeof(*g->by_post));
	for (i = 0; i < g->count; i++)
		g->by_post[g->n[i].post] = i;
}

static void gfree(struct gtree *g)
{
	free(g->n);
	free(g->owner);
	free(g->by_post);
	free(g->stack);
	free(g->tsc);
	free(g->gaps);
}

static uint32_t P(const struct gtree *g, uint32_t c)
{
	return c == NONE ? HTR_NONE : g->n[c].post;
}

/* Links, counts, depth, spans and function data of every block. */
static void check_blocks(const struct gtree *g, const struct htr_file *f)
{
	struct htr_file_info fi;
	uint32_t i;

	cr_assert_eq(htr_block_count(f), g->count);
	cr_assert_eq(htr_tree_first_root(f), P(g, g->first_root));
	cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
	cr_assert_eq(fi.nblocks, g->count);
	cr_assert_eq(fi.nroots, g->nroots);
	cr_assert_eq(fi.ninsns, g->ninsns);
	cr_assert_eq(fi.max_depth, g->max_depth);
	cr_assert_eq(fi.nfuncs, g->nfuncs);
	cr_assert_eq(fi.ntsc, g->ntsc);
	cr_assert_eq(fi.ngaps, g->ngaps);
	cr_assert_eq(fi.trace_size, 12345);
	cr_assert_eq(fi.trace_hash, 0xabcdef);

	for (i = 0; i < g->count; i++) {
		const struct gnode *n = &g->n[i];
		struct htr_block_info bi;
		uint32_t func = n->func_flags & HTR_FUNC_NONE;

		cr_assert_eq(htr_block_get(f, n->post, &bi, sizeof(bi)), 0);
		cr_assert_eq(bi.index, n->post);
		cr_assert_eq(bi.first, n->first, "block %u", n->post);
		cr_assert_eq(bi.last, n->last);
		cr_assert_eq(bi.parent, P(g, n->parent));
		cr_assert_eq(bi.nchildren, n->nchildren);
		cr_assert_eq(bi.flags, n->func_flags >> 24);
		if (func == HTR_FUNC_NONE) {
			cr_assert_eq(bi.func, HTR_NONE);
			cr_assert_eq(bi.entry, 0);
			cr_assert_eq(bi.anchor_func, HTR_NONE);
			cr_assert_eq(bi.anchor, 0);
		} else if (bi.flags & HTR_BLOCK_LATE) {
			/* The index names an address it ran, not an entry. */
			cr_assert_eq(bi.func, HTR_NONE);
			cr_assert_eq(bi.entry, 0);
			cr_assert_eq(bi.anchor_func, func);
			cr_assert_eq(bi.anchor, 0x400000 + 16 * func);
		} else {
			cr_assert_eq(bi.func, func);
			cr_assert_eq(bi.entry, 0x400000 + 16 * func);
			cr_assert_eq(bi.anchor_func, func);
			cr_assert_eq(bi.anchor, bi.entry);
		}
		cr_assert_eq(htr_block_parent(f, n->post), P(g, n->parent));
		cr_assert_eq(htr_block_first_child(f, n->post),
			     P(g, n->first_child));
		cr_assert_eq(htr_block_next_sibling(f, n->post),
			     P(g, n->next_sibling));
		cr_assert_eq(htr_block_child_count(f, n->post), n->nchildren);
		/* Depth is O(depth): all of them unless that is quadratic. */
		if ((uint64_t) g->count * g->max_depth <= 100000000u ||
		    below(1000) == 0)
			cr_assert_eq(htr_block_depth(f, n->post),
				     (int64_t) n->depth);
	}
	cr_assert_eq(htr_block_parent(f, g->count), HTR_NONE);
	cr_assert_eq(htr_block_first_child(f, g->count), HTR_NONE);
	cr_assert_eq(htr_block_next_sibling(f, HTR_NONE), HTR_NONE);
	cr_assert_eq(htr_block_child_count(f, g->count), 0);
	cr_assert_eq(htr_block_depth(f, g->count), HTR_ERR_RANGE);
	{
		struct htr_block_info bi;

		cr_assert_eq(htr_block_get(f, g->count, &bi, sizeof(bi)),
			     HTR_ERR_RANGE);
		if (g->count)
			cr_assert_eq(htr_block_get(f, 0, &bi, 4),
				     HTR_ERR_INVALID);
	}
}

/* Visits recorded by the visitor. */
struct rec {
	uint32_t *block, *level;
	uint32_t n, cap;
	uint32_t stop_after;            /* return 42 at this visit (1-based) */
	const struct gtree *g;
	int skip_mod;                   /* pre-order: skip when post % m == 0 */
	int bad_parent;
};

static int visitor(const struct htr_file *f, uint32_t block, uint32_t parent,
		   uint32_t level, void *payload)
{
	struct rec *r = payload;

	if (parent != htr_block_parent(f, block))
		r->bad_parent++;
	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 256;
		r->block = realloc(r->block, r->cap * sizeof(*r->block));
		r->level = realloc(r->level, r->cap * sizeof(*r->level));
	}
	r->block[r->n] = block;
	r->level[r->n] = level;
	r->n++;
	if (r->stop_after && r->n == r->stop_after)
		return 42;
	if (r->skip_mod && block % (uint32_t) r->skip_mod == 0)
		return HTR_VISIT_SKIP;
	return 0;
}

/* Expected pre-order from creation order: creation order IS pre-order. */
static uint32_t expect_pre(const struct gtree *g, uint32_t from, int skip_mod,
			   uint32_t *blk, uint32_t *lvl)
{
	uint32_t i, n = 0, lo, hi, base, skip_until = 0;

	if (from == NONE) {
		lo = 0;
		hi = g->count;
		base = 1;
	} else {
		/* The subtree of `from` is a contiguous run in creation
		 * order: up to the next block not deeper than it. */
		lo = from;
		base = g->n[from].depth;
		for (hi = from + 1; hi < g->count && g->n[hi].depth > base;
		     hi++)
			;
	}
	for (i = lo; i < hi; i++) {
		if (i < skip_until)
			continue;
		blk[n] = g->n[i].post;
		lvl[n] = g->n[i].depth - base;
		n++;
		if (skip_mod && g->n[i].post % (uint32_t) skip_mod == 0)
			for (skip_until = i + 1; skip_until < hi &&
			     g->n[skip_until].depth > g->n[i].depth;
			     skip_until++)
				;
	}
	return n;
}

static void check_visits(const struct gtree *g, const struct htr_file *f)
{
	uint32_t *blk = malloc((g->count + 1) * sizeof(*blk));
	uint32_t *lvl = malloc((g->count + 1) * sizeof(*lvl));
	uint32_t n, i, t, from;
	struct rec r;

	/* Whole forest, pre-order. */
	memset(&r, 0, sizeof(r));
	cr_assert_eq(htr_tree_visit(f, HTR_NONE, HTR_PREORDER, visitor, &r), 0);
	n = expect_pre(g, NONE, 0, blk, lvl);
	cr_assert_eq(r.n, n);
	for (i = 0; i < n; i++) {
		cr_assert_eq(r.block[i], blk[i], "visit %u", i);
		cr_assert_eq(r.level[i], lvl[i]);
	}
	cr_assert_eq(r.bad_parent, 0);

	/* Whole forest, post-order: exactly the file order. */
	r.n = 0;
	cr_assert_eq(htr_tree_visit(f, HTR_NONE, HTR_POSTORDER, visitor, &r),
		     0);
	cr_assert_eq(r.n, g->count);
	for (i = 0; i < r.n; i++) {
		cr_assert_eq(r.block[i], i);
		cr_assert_eq(r.level[i], g->n[g->by_post[i]].depth - 1);
	}

	/* Pre-order with HTR_VISIT_SKIP. */
	for (t = 2; t < 6 && g->count; t++) {
		r.n = 0;
		r.skip_mod = (int) t;
		cr_assert_eq(htr_tree_visit(f, HTR_NONE, HTR_PREORDER, visitor,
					    &r), 0);
		n = expect_pre(g, NONE, (int) t, blk, lvl);
		cr_assert_eq(r.n, n);
		for (i = 0; i < n; i++)
			cr_assert_eq(r.block[i], blk[i]);
	}
	r.skip_mod = 0;

	/* Subtrees of random blocks, both orders. */
	for (t = 0; t < 50 && g->count; t++) {
		uint32_t lo;

		from = (uint32_t) below(g->count);
		r.n = 0;
		cr_assert_eq(htr_tree_visit(f, g->n[from].post, HTR_PREORDER,
					    visitor, &r), 0);
		n = expect_pre(g, from, 0, blk, lvl);
		cr_assert_eq(r.n, n);
		for (i = 0; i < n; i++) {
			cr_assert_eq(r.block[i], blk[i]);
			cr_assert_eq(r.level[i], lvl[i]);
		}
		/* Post-order of a subtree: the n blocks that end at it. */
		r.n = 0;
		cr_assert_eq(htr_tree_visit(f, g->n[from].post, HTR_POSTORDER,
					    visitor, &r), 0);
		cr_assert_eq(r.n, n);
		lo = g->n[from].post + 1 - n;
		for (i = 0; i < n; i++) {
			cr_assert_eq(r.block[i], lo + i);
			cr_assert_eq(r.level[i], g->n[g->by_post[lo + i]].depth -
						 g->n[from].depth);
		}
	}

	/* Early stop. */
	for (t = 0; t < 10 && g->count; t++) {
		uint32_t k = 1 + (uint32_t) below(g->count);

		r.n = 0;
		r.stop_after = k;
		cr_assert_eq(htr_tree_visit(f, HTR_NONE, HTR_PREORDER, visitor,
					    &r), 42);
		cr_assert_eq(r.n, k);
		r.n = 0;
		cr_assert_eq(htr_tree_visit(f, HTR_NONE, HTR_POSTORDER, visitor,
					    &r), 42);
		cr_assert_eq(r.n, k);
		cr_assert_eq(r.block[k - 1], k - 1);
	}
	r.stop_after = 0;

	cr_assert_eq(htr_tree_visit(f, g->count, HTR_PREORDER, visitor, &r),
		     HTR_ERR_RANGE);
	cr_assert_eq(htr_tree_visit(f, HTR_NONE, HTR_PREORDER, NULL, &r),
		     HTR_ERR_INVALID);
	free(r.block);
	free(r.level);
	free(blk);
	free(lvl);
}

/* block_for_insn against the simulation's owner of every instruction, and
 * (for small trees) against a brute-force scan of every block. */
static void check_insns(const struct gtree *g, const struct htr_file *f)
{
	uint64_t id, k;
	uint32_t b;
	int rc;

	for (id = 0; id < g->ninsns; id++) {
		uint32_t want = g->owner[id];

		rc = htr_block_for_insn(f, id, &b);
		if (want == NONE) {
			cr_assert_eq(rc, HTR_ERR_NOTFOUND, "id %llu",
				     (unsigned long long) id);
		} else {
			cr_assert_eq(rc, 0, "id %llu", (unsigned long long) id);
			cr_assert_eq(b, g->n[want].post, "id %llu",
				     (unsigned long long) id);
		}
		if (g->count <= 3000) {
			/* Deepest block containing id, by scanning all. */
			uint32_t best = NONE, i;

			for (i = 0; i < g->count; i++)
				if (g->n[i].first <= id && id <= g->n[i].last &&
				    (best == NONE ||
				     g->n[i].depth > g->n[best].depth))
					best = i;
			cr_assert_eq(best, want);
		}
	}
	cr_assert_eq(htr_block_for_insn(f, g->ninsns, &b), HTR_ERR_RANGE);
	cr_assert_eq(htr_block_for_insn(f, UINT64_MAX, &b), HTR_ERR_RANGE);

	for (id = 0; id < g->ninsns; id++) {
		uint64_t tsc = 0, want = 0;
		int found = 0;

		for (k = 0; k < g->ntsc; k++)
			if (g->tsc[k].id <= id) {
				want = g->tsc[k].tsc;
				found = 1;
			}
		rc = htr_tsc_for_insn(f, id, &tsc);
		if (found) {
			cr_assert_eq(rc, 0);
			cr_assert_eq(tsc, want, "id %llu",
				     (unsigned long long) id);
		} else {
			cr_assert_eq(rc, HTR_ERR_NOTFOUND);
		}
	}
	{
		uint64_t tsc;

		cr_assert_eq(htr_tsc_for_insn(f, g->ninsns, &tsc),
			     HTR_ERR_RANGE);
	}

	cr_assert_eq(htr_gap_count(f), g->ngaps);
	for (k = 0; k < g->ngaps; k++) {
		struct htr_gap_info gi;

		cr_assert_eq(htr_gap_get(f, k, &gi, sizeof(gi)), 0);
		cr_assert_eq(gi.id, g->gaps[k].id);
		cr_assert_eq(gi.offset, g->gaps[k].offset);
		cr_assert_eq((int) gi.kind, g->gaps[k].kind);
		cr_assert_eq(gi.code, g->gaps[k].code);
		cr_assert_str_neq(htr_gap_kind_str(gi.kind), "unknown");
	}
	{
		struct htr_gap_info gi;

		cr_assert_eq(htr_gap_get(f, g->ngaps, &gi, sizeof(gi)),
			     HTR_ERR_RANGE);
	}
}

/* Returns the ranges the commit linked in, on up to @threads. */
static unsigned roundtrip_on(enum shape shape, uint32_t size, uint64_t seed,
			     int full, unsigned threads)
{
	struct htr_open_opts o;
	struct htr_file *f;
	struct gtree g;
	char path[300];

	mk_tmpdir();
	snprintf(path, sizeof(path), "%s/t.htr", tmpdir);
	gen(&g, path, shape, size, seed, threads);
	htr_open_opts_init(&o);
	o.verify_body = 1;
	cr_assert_eq(htr_file_open(&f, path, &o), 0, "%s", htr_file_last_error(f));
	cr_assert_str_eq(htr_file_last_error(f), "");
	check_blocks(&g, f);
	if (full) {
		check_visits(&g, f);
		check_insns(&g, f);
	}
	htr_file_close(f);
	gfree(&g);
	rm_tmpdir(path);
	return g.ranges;
}

static void roundtrip(enum shape shape, uint32_t size, uint64_t seed,
		      int full)
{
	cr_assert_eq(roundtrip_on(shape, size, seed, full, 1), 1);
}

Test(tree, random_small_many_seeds)
{
	uint64_t seed;

	for (seed = 1; seed <= 60; seed++)
		roundtrip(RANDOM, 1 + (uint32_t) (seed * 37 % 900), seed, 1);
}

Test(tree, random_large, .timeout = 120)
{
	roundtrip(RANDOM, 200000, 0xfeed, 1);
}

Test(tree, deep_chain, .timeout = 120)
{
	roundtrip(CHAIN, 10000, 7, 1);
}

Test(tree, very_deep_chain, .timeout = 120)
{
	roundtrip(CHAIN, 1000000, 8, 0);
}

Test(tree, wide_node, .timeout = 120)
{
	roundtrip(WIDE, 100000, 9, 1);
}

Test(tree, forest, .timeout = 120)
{
	uint64_t seed;

	for (seed = 100; seed < 110; seed++)
		roundtrip(FOREST, 2000, seed, 1);
}

Test(tree, single_block)
{
	roundtrip(WIDE, 1, 11, 1);
}

Test(tree, zero_blocks)
{
	roundtrip(EMPTY, 100, 12, 1);
	roundtrip(EMPTY, 0, 13, 1);
}

Test(tree, null_and_failed_handles)
{
	struct htr_block_info bi;
	struct htr_file_info fi;
	uint64_t tsc;
	uint32_t b;

	cr_assert_eq(htr_block_count(NULL), 0);
	cr_assert_eq(htr_tree_first_root(NULL), HTR_NONE);
	cr_assert_eq(htr_block_parent(NULL, 0), HTR_NONE);
	cr_assert_eq(htr_block_get(NULL, 0, &bi, sizeof(bi)), HTR_ERR_INVALID);
	cr_assert_eq(htr_file_info(NULL, &fi, sizeof(fi)), HTR_ERR_INVALID);
	cr_assert_eq(htr_block_for_insn(NULL, 0, &b), HTR_ERR_INVALID);
	cr_assert_eq(htr_tsc_for_insn(NULL, 0, &tsc), HTR_ERR_INVALID);
	cr_assert_eq(htr_gap_count(NULL), 0);
	cr_assert_eq(htr_tree_visit(NULL, HTR_NONE, HTR_PREORDER, visitor,
				    NULL), HTR_ERR_INVALID);
	cr_assert_str_eq(htr_file_last_error(NULL), "");
	htr_file_close(NULL);
}

/*
 * The commit links trees of over 2^15 blocks in ranges at once, one per
 * thread, cut at 1 MiB boundaries of the blocks (32,768 records, less 128
 * for the header) where the ancestors of the block below are at most 1024
 * deep.  The tree must be the generator's all the same: parents, next
 * siblings (across the cuts, and between roots), depth, roots.
 */
Test(tree, cut_random, .timeout = 120)
{
	unsigned t;

	/* 300,000 blocks: nine pieces, cuts to choose from */
	for (t = 2; t <= 4; t++)
		cr_assert_eq(roundtrip_on(RANDOM, 300000, 0xc0ffee + t, 0, t),
			     t);
	cr_assert_eq(roundtrip_on(RANDOM, 120000, 0xbeef, 1, 2), 2);
}

Test(tree, cut_wide_and_forest, .timeout = 120)
{
	/* every cut inside one parent's children; between roots */
	cr_assert_eq(roundtrip_on(WIDE, 200000, 21, 0, 3), 3);
	cr_assert_eq(roundtrip_on(FOREST, 600000, 22, 0, 4), 4);
}

Test(tree, cut_deep, .timeout = 120)
{
	/* 100,000 nested calls: the pass finds one open frame at a cut
	 * (the others have all their children above it), at its level */
	cr_assert_eq(roundtrip_on(CHAIN, 100000, 23, 0, 2), 2);
	/* 50,000 nested calls, each with a leaf before it: every level is
	 * open at every cut, too many to keep */
	cr_assert_eq(roundtrip_on(COMB, 100000, 24, 0, 2), 1);
	/* fewer blocks than a piece: nowhere to cut */
	cr_assert_eq(roundtrip_on(RANDOM, 30000, 25, 0, 4), 1);
}

/* The flags' names in the header's order, "-" for none, cut to fit. */
Test(tree, block_flags_str)
{
	char buf[64], small[8];

	cr_expect_str_eq(htr_block_flags_str(0, buf, sizeof(buf)), "-");
	cr_expect_str_eq(htr_block_flags_str(HTR_BLOCK_UNWOUND | HTR_BLOCK_LATE,
					     buf, sizeof(buf)),
			 "late,unwound");
	cr_expect_str_eq(htr_block_flags_str(0x1f, buf, sizeof(buf)),
			 "late,truncated,gap,implicit-return,unwound");
	cr_expect_str_eq(htr_block_flags_str(HTR_BLOCK_GAP | HTR_BLOCK_IMPLICIT,
					     small, sizeof(small)), "gap,imp");
	cr_expect_null(htr_block_flags_str(HTR_BLOCK_GAP, NULL, 0));
}
