/*
 * Reading the call tree of an opened .htr file.  Block records are not
 * validated at open (that would be O(blocks)); every index read from a
 * record is range-checked here before use, and walks count their steps so
 * that a cycle in a corrupt file ends with HTR_ERR_CORRUPT.
 */
#include "file.h"

#include "abi.h"

#include <stdio.h>
#include <string.h>

static inline bool valid_link(const struct htr_file *f, uint32_t v)
{
	return v == HTR_NONE || v < f->nblocks;
}

uint32_t htr_block_count(const struct htr_file *file)
{
	return file && file->ok ? (uint32_t) file->nblocks : 0;
}

int htr_block_get(const struct htr_file *file, uint32_t block,
		  struct htr_block_info *info, size_t size)
{
	const struct htr_disk_block *b;
	struct htr_block_info bi;
	uint32_t func;

	if (!file || !file->ok || !info ||
	    size < HTR_ABI_SIZE0(struct htr_block_info, flags))
		return HTR_ERR_INVALID;
	b = htr_file__block(file, block);
	if (!b)
		return HTR_ERR_RANGE;
	memset(&bi, 0, sizeof(bi));
	bi.size = sizeof(bi);
	bi.index = block;
	bi.first = htr_disk__get48(b->first);
	bi.last = htr_disk__get48(b->last);
	bi.parent = b->parent;
	bi.nchildren = b->nchildren;
	bi.flags = b->func_flags >> HTR_DISK_FLAG_SHIFT;
	func = b->func_flags & HTR_FUNC_NONE;
	bi.func = bi.anchor_func = HTR_NONE;
	if (func != HTR_FUNC_NONE) {
		if (func >= file->nfuncs)
			return HTR_ERR_CORRUPT;
		bi.anchor_func = func;
		bi.anchor = file->funcs[func];
		/* A late block's index names an address it ran, not its
		 * entry (FORMAT.md, version 2). */
		if (!(bi.flags & HTR_BLOCK_LATE)) {
			bi.func = func;
			bi.entry = file->funcs[func];
		}
	}
	if (bi.first > bi.last || bi.last >= file->hdr->ninsns ||
	    !valid_link(file, b->parent) || !valid_link(file, b->first_child) ||
	    !valid_link(file, b->next_sibling) || b->nchildren > block ||
	    (b->nchildren == 0) != (b->first_child == HTR_NONE))
		return HTR_ERR_CORRUPT;
	return htr_abi__out(info, size, &bi, sizeof(bi),
			    HTR_ABI_SIZE0(struct htr_block_info, flags));
}

static uint32_t link_or_none(const struct htr_file *f, uint32_t v)
{
	return v < f->nblocks ? v : HTR_NONE;
}

uint32_t htr_block_parent(const struct htr_file *file, uint32_t block)
{
	const struct htr_disk_block *b = htr_file__block(file, block);

	return b ? link_or_none(file, b->parent) : HTR_NONE;
}

uint32_t htr_block_first_child(const struct htr_file *file, uint32_t block)
{
	const struct htr_disk_block *b = htr_file__block(file, block);

	return b ? link_or_none(file, b->first_child) : HTR_NONE;
}

uint32_t htr_block_next_sibling(const struct htr_file *file, uint32_t block)
{
	const struct htr_disk_block *b = htr_file__block(file, block);

	return b ? link_or_none(file, b->next_sibling) : HTR_NONE;
}

uint32_t htr_block_child_count(const struct htr_file *file, uint32_t block)
{
	const struct htr_disk_block *b = htr_file__block(file, block);

	return b ? b->nchildren : 0;
}

uint32_t htr_tree_first_root(const struct htr_file *file)
{
	return file && file->ok ? file->hdr->first_root : HTR_NONE;
}

int64_t htr_block_depth(const struct htr_file *file, uint32_t block)
{
	const struct htr_disk_block *b = htr_file__block(file, block);
	int64_t depth = 1;

	if (!b)
		return HTR_ERR_RANGE;
	while (b->parent != HTR_NONE) {
		b = htr_file__block(file, b->parent);
		if (!b || (uint64_t) depth >= file->nblocks)
			return HTR_ERR_CORRUPT;
		depth++;
	}
	return depth;
}

/*
 * Non-allocating walk.  Each step moves along one link: down to the first
 * child, across to the next sibling, or up to the parent.  Every link is
 * checked against the one it must agree with (a child's parent is the
 * block we came from; a sibling has the same parent), so the way up is
 * the way we came down.  A consistent tree takes at most 2 * nblocks
 * steps; more means a cycle.
 */
struct walk {
	const struct htr_file *f;
	uint64_t steps, limit;
};

static int step(struct walk *w)
{
	return ++w->steps > w->limit ? HTR_ERR_CORRUPT : 0;
}

/* The first child of @b, checked; HTR_NONE if none; sets *@rc. */
static uint32_t down(struct walk *w, uint32_t b, int *rc)
{
	const struct htr_disk_block *r = &w->f->blocks[b], *c;

	if (r->first_child == HTR_NONE)
		return HTR_NONE;
	c = htr_file__block(w->f, r->first_child);
	if (!c || c->parent != b || (*rc = step(w))) {
		*rc = HTR_ERR_CORRUPT;
		return HTR_NONE;
	}
	return r->first_child;
}

static uint32_t across(struct walk *w, uint32_t b, int *rc)
{
	const struct htr_disk_block *r = &w->f->blocks[b], *s;

	if (r->next_sibling == HTR_NONE)
		return HTR_NONE;
	s = htr_file__block(w->f, r->next_sibling);
	if (!s || s->parent != r->parent || (*rc = step(w))) {
		*rc = HTR_ERR_CORRUPT;
		return HTR_NONE;
	}
	return r->next_sibling;
}

static uint32_t up(struct walk *w, uint32_t b, int *rc)
{
	uint32_t p = w->f->blocks[b].parent;

	if (!htr_file__block(w->f, p) || (*rc = step(w))) {
		*rc = HTR_ERR_CORRUPT;
		return HTR_NONE;
	}
	return p;
}

/* @cur's subtree is done: move to its next sibling (returns 1: a new
 * subtree to walk), or up to its parent, whose children are then all done
 * (returns 0).  Returns -1 when the walk is over - the start block or the
 * last root is done - or *@rc holds an error. */
static int advance(struct walk *w, uint32_t *cur, uint32_t *level,
		   bool subtree, int *rc)
{
	uint32_t next;

	if (subtree && *level == 0)
		return -1;
	next = across(w, *cur, rc);
	if (*rc)
		return -1;
	if (next != HTR_NONE) {
		*cur = next;
		return 1;
	}
	if (*level == 0)
		return -1;
	*cur = up(w, *cur, rc);
	if (*rc)
		return -1;
	(*level)--;
	return 0;
}

int htr_tree_visit(const struct htr_file *file, uint32_t from,
		   enum htr_order order, htr_visit_fn fn, void *payload)
{
	struct walk w;
	uint32_t cur, next, level = 0;
	bool subtree = from != HTR_NONE;
	int rc = 0, v, a;

	if (!file || !file->ok || !fn ||
	    (order != HTR_PREORDER && order != HTR_POSTORDER))
		return HTR_ERR_INVALID;
	if (subtree && from >= file->nblocks)
		return HTR_ERR_RANGE;
	cur = subtree ? from : file->hdr->first_root;
	if (cur == HTR_NONE)
		return 0;
	if (!htr_file__block(file, cur))
		return HTR_ERR_CORRUPT;
	w.f = file;
	w.steps = 0;
	w.limit = 2 * file->nblocks + 2;

	/* (A record's HTR_NONE parent is the API's HTR_NONE.) */
	if (order == HTR_PREORDER) {
		for (;;) {
			v = fn(file, cur, file->blocks[cur].parent, level,
			       payload);
			if (v && v != HTR_VISIT_SKIP)
				return htr_err__callback(v);
			if (!v) {
				next = down(&w, cur, &rc);
				if (rc)
					return rc;
				if (next != HTR_NONE) {
					cur = next;
					level++;
					continue;
				}
			}
			do {
				a = advance(&w, &cur, &level, subtree, &rc);
				if (a < 0)
					return rc;
			} while (a == 0);
		}
	}

	/* Post-order: descend to the first leaf, then leave each block
	 * after its children. */
	for (;;) {
		while ((next = down(&w, cur, &rc)) != HTR_NONE) {
			cur = next;
			level++;
		}
		if (rc)
			return rc;
		do {
			v = fn(file, cur, file->blocks[cur].parent, level,
			       payload);
			if (v)
				return htr_err__callback(v);
			a = advance(&w, &cur, &level, subtree, &rc);
			if (a < 0)
				return rc;
		} while (a == 0);
	}
}

int htr_block_for_insn(const struct htr_file *file, uint64_t id,
		       uint32_t *block)
{
	const struct htr_disk_block *b;
	uint64_t lo = 0, hi, steps = 0;
	uint32_t i;

	if (!file || !file->ok || !block)
		return HTR_ERR_INVALID;
	if (id >= file->hdr->ninsns)
		return HTR_ERR_RANGE;
	/* Post-order: `last` never decreases; find the first block that
	 * ends at or after @id.  Any block containing @id is that block or
	 * one of its ancestors (a later, disjoint block starts after it). */
	hi = file->nblocks;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (htr_disk__get48(file->blocks[mid].last) < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == file->nblocks)
		return HTR_ERR_NOTFOUND;
	i = (uint32_t) lo;
	for (;;) {
		b = &file->blocks[i];
		if (htr_disk__get48(b->first) <= id &&
		    htr_disk__get48(b->last) >= id) {
			*block = i;
			return 0;
		}
		if (b->parent == HTR_NONE)
			return HTR_ERR_NOTFOUND;
		if (b->parent >= file->nblocks || ++steps > file->nblocks)
			return HTR_ERR_CORRUPT;
		i = b->parent;
	}
}

uint64_t htr_tsc_count(const struct htr_file *file)
{
	return file && file->ok ? file->ntsc : 0;
}

int htr_tsc_point(const struct htr_file *file, uint64_t i, uint64_t *id,
		  uint64_t *tsc)
{
	if (!file || !file->ok || !id || !tsc)
		return HTR_ERR_INVALID;
	if (i >= file->ntsc)
		return HTR_ERR_RANGE;
	*id = file->tsc[i].id;
	*tsc = file->tsc[i].tsc;
	return 0;
}

/* The first time point after @id in [lo, hi) (hi if none): the points
 * at or before lo are at or before @id. */
static uint64_t tsc_upper_in(const struct htr_file *file, uint64_t id,
			     uint64_t lo, uint64_t hi)
{
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (file->tsc[mid].id <= id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t htr_file__tsc_upper(const struct htr_file *file, uint64_t id,
			     uint64_t lo)
{
	return tsc_upper_in(file, id, lo, file->ntsc);
}

int htr_tsc_for_insn(const struct htr_file *file, uint64_t id, uint64_t *tsc)
{
	uint64_t n;

	if (!file || !file->ok || !tsc)
		return HTR_ERR_INVALID;
	if (id >= file->hdr->ninsns)
		return HTR_ERR_RANGE;
	n = htr_file__tsc_upper(file, id, 0);
	if (n == 0)
		return HTR_ERR_NOTFOUND;
	*tsc = file->tsc[n - 1].tsc;
	return 0;
}


/* Galloping from the hint, forward or back: O(log d) for a lookup d time
 * points away from the last, so a post-order walk, whose blocks' first
 * instructions step back by a subtree's span now and then, stays cheap. */
int htr_tsc_lookup(const struct htr_file *file, uint64_t id, uint64_t *hint,
		   uint64_t *tsc)
{
	uint64_t lo, hi, h, step, n;

	if (!file || !file->ok || !hint || !tsc)
		return HTR_ERR_INVALID;
	if (id >= file->hdr->ninsns)
		return HTR_ERR_RANGE;
	n = file->ntsc;
	h = *hint;
	if (h >= n) {
		lo = htr_file__tsc_upper(file, id, 0);
	} else if (file->tsc[h].id <= id) {
		/* The answer is at or after h: [lo, hi) brackets the first
		 * point after id. */
		lo = h + 1;
		for (step = 1; ; step *= 2) {
			hi = lo + step - 1 < n ? lo + step - 1 : n;
			if (hi == n || file->tsc[hi].id > id)
				break;
			lo = hi + 1;
		}
		lo = tsc_upper_in(file, id, lo, hi);
	} else {
		/* Before h: back until a point at or before id. */
		hi = h;
		for (step = 1; ; step *= 2) {
			if (hi < step) {
				lo = 0;
				break;
			}
			lo = hi - step;
			if (file->tsc[lo].id <= id) {
				lo++;
				break;
			}
			hi = lo;
		}
		lo = tsc_upper_in(file, id, lo, hi);
	}
	if (lo == 0)
		return HTR_ERR_NOTFOUND;
	*hint = lo - 1;
	*tsc = file->tsc[lo - 1].tsc;
	return 0;
}

uint64_t htr_func_count(const struct htr_file *file)
{
	return file && file->ok ? file->nfuncs : 0;
}

int htr_func_entry(const struct htr_file *file, uint64_t i, uint64_t *addr)
{
	if (!file || !file->ok || !addr)
		return HTR_ERR_INVALID;
	if (i >= file->nfuncs)
		return HTR_ERR_RANGE;
	*addr = file->funcs[i];
	return 0;
}

int htr_file_section(const struct htr_file *file, uint32_t id,
		     const void **data, uint64_t *count, uint32_t *entsize)
{
	const void *p;
	uint64_t n;

	if (!file || !file->ok)
		return HTR_ERR_INVALID;
	switch (id) {
	case HTR_SECTION_BLOCKS: p = file->blocks; n = file->nblocks; break;
	case HTR_SECTION_FUNCS: p = file->funcs; n = file->nfuncs; break;
	case HTR_SECTION_GAPS: p = file->gaps; n = file->ngaps; break;
	case HTR_SECTION_TSC: p = file->tsc; n = file->ntsc; break;
	case HTR_SECTION_SYNC: p = file->sync; n = file->nsync; break;
	default: return HTR_ERR_RANGE;
	}
	if (data)
		*data = n ? p : NULL;
	if (count)
		*count = n;
	if (entsize)
		*entsize = htr_file__sections[id - 1].entsize;
	return 0;
}

const char *htr_block_flags_str(uint32_t flags, char *buf, size_t size)
{
	static const struct { uint32_t bit; const char *name; } names[] = {
		{ HTR_BLOCK_LATE, "late" },
		{ HTR_BLOCK_TRUNCATED, "truncated" },
		{ HTR_BLOCK_GAP, "gap" },
		{ HTR_BLOCK_IMPLICIT, "implicit-return" },
		{ HTR_BLOCK_UNWOUND, "unwound" },
	};
	size_t i, n = 0;

	if (!buf || !size)
		return buf;
	buf[0] = 0;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((flags & names[i].bit) && n < size)
			n += (size_t) snprintf(buf + n, size - n, "%s%s",
					       n ? "," : "", names[i].name);
	if (!buf[0])
		snprintf(buf, size, "-");
	return buf;
}
