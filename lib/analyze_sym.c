/*
 * Symbol index and per-function figures: each block is named after the
 * function at its entry address (lib/symbols.h); late blocks, whose entry
 * was never traced, are all named "?".  One pre-order walk (chronological
 * by first instruction) builds, per distinct name, the list of its blocks,
 * the number of calls, the local ticks, the inclusive ticks counting
 * recursion once (only invocations with no ancestor of the same name) and
 * the slowest invocation.  Memory: O(functions + depth) plus 4 bytes per
 * block for the lists.
 */
#include "analyze.h"
#include "le.h"
#include "symbols.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LATE_NAME "?"

size_t htr_sym__key(const char *name, uint8_t *key)
{
	size_t n = strlen(name);
	uint64_t h;

	if (n <= HTR_SYM_KEYMAX) {
		memcpy(key, name, n);
		return n;
	}
	/* Too long for an LMDB key: a prefix and the hash of the whole. */
	h = htr_hash__bytes(HTR_HASH_SEED, name, n);
	memcpy(key, name, HTR_SYM_KEYMAX - 17);
	snprintf((char *) key + HTR_SYM_KEYMAX - 17, 18, "#%016llx",
		 (unsigned long long) h);
	return HTR_SYM_KEYMAX;
}

/* LMDB's default key order: bytes, then length. */
static int key_cmp(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	int c = memcmp(a, b, na < nb ? na : nb);

	if (c)
		return c;
	return na < nb ? -1 : na > nb;
}

static int name_cmp(const void *x, const void *y)
{
	const struct htr_an_name *a = x, *b = y;

	return key_cmp(a->key, a->key_len, b->key, b->key_len);
}

void htr_sym__free(struct htr_analysis *a)
{
	size_t i;

	if (a->sym_heap)
		for (i = 0; i < a->nnames; i++) {
			free((void *) a->names[i].name);
			free((void *) a->names[i].key);
			free(a->names[i].blocks);
		}
	free(a->names);
	free(a->func_name);
	a->names = NULL;
	a->func_name = NULL;
	a->nnames = 0;
	a->sym_heap = false;
}

struct walk {
	struct htr_analysis *a;
	uint32_t *stack;        /* name index per level */
	uint32_t *active;       /* per name: open invocations */
	uint64_t *cap;          /* per name: room in blocks[] */
	size_t cap_levels;
	uint32_t sp;
	int rc;
};

static int visit(const struct htr_file *f, uint32_t block, uint32_t parent,
		 uint32_t level, void *payload)
{
	struct walk *w = payload;
	struct htr_analysis *a = w->a;
	struct htr_block_info b;
	struct htr_an_name *n;
	uint64_t total, local;
	uint32_t func, id;
	int rc;

	(void) parent;
	if (htr_block_get(f, block, &b, sizeof(b)) < 0 ||
	    level >= w->cap_levels) {
		w->rc = htr_err__set(&a->err, HTR_ERR_CORRUPT, "block %u: "
				     "nesting deeper than the header says",
				     block);
		return 1;
	}
	while (w->sp > level)
		w->active[w->stack[--w->sp]]--;
	func = b.func;
	id = func < a->nfuncs ? a->func_name[func] : a->func_name[a->nfuncs];
	rc = htr_tsc__get(a, block, &total, &local);
	if (rc < 0) {
		w->rc = rc;
		return 1;
	}
	n = &a->names[id];
	if (n->st.nblocks == w->cap[id]) {
		uint64_t nc = w->cap[id] ? 2 * w->cap[id] : 4;
		uint32_t *nb = realloc(n->blocks, nc * sizeof(*nb));

		if (!nb) {
			w->rc = htr_err__set(&a->err, HTR_ERR_NOMEM,
					     "out of memory");
			return 1;
		}
		n->blocks = nb;
		w->cap[id] = nc;
	}
	n->blocks[n->st.nblocks++] = block;
	n->st.calls++;
	n->st.local += local;
	if (!w->active[id])
		n->st.inclusive += total;
	if (n->st.calls == 1 || total > n->st.slowest_total) {
		n->st.slowest_total = total;
		n->st.slowest = block;
	}
	w->active[id]++;
	w->stack[w->sp++] = id;
	return 0;
}

int htr_sym__compute(struct htr_analysis *a)
{
	const struct htr_file *f = a->file;
	struct htr_file_info fi;
	struct htr_syms *syms = NULL;
	struct walk w;
	char buf[4096];
	uint32_t *remap = NULL;
	uint64_t i;
	size_t j, k;
	int rc;

	memset(&w, 0, sizeof(w));
	htr_sym__free(a);
	a->sym_heap = true;
	memset(&fi, 0, sizeof(fi));
	htr_file_info(f, &fi, sizeof(fi));
	a->nfuncs = htr_func_count(f);
	a->nskipped = 0;
	rc = htr_syms__load(&syms, f, &a->nskipped, &a->err);
	if (rc < 0)
		return rc;
	if (a->nskipped) {
		a->flags |= HTR_ANALYSIS_SYMS_PARTIAL;
		if (!a->note[0])
			snprintf(a->note, sizeof(a->note), "%s", a->err.msg);
	}
	htr_err__clear(&a->err);
	a->names = calloc(a->nfuncs + 1, sizeof(*a->names));
	a->func_name = malloc((a->nfuncs + 1) * sizeof(*a->func_name));
	if (!a->names || !a->func_name)
		goto nomem;
	/* One entry per function, then "?"; sort and merge equal names. */
	for (i = 0; i <= a->nfuncs; i++) {
		struct htr_an_name *n = &a->names[i];
		uint8_t kb[HTR_SYM_KEYMAX + 32];
		uint64_t entry = 0;

		if (i < a->nfuncs && htr_func_entry(f, i, &entry) == 0)
			htr_syms__name(syms, entry, buf, sizeof(buf));
		else
			snprintf(buf, sizeof(buf), LATE_NAME);
		n->name = strdup(buf);
		n->key_len = htr_sym__key(buf, kb);
		n->key = malloc(n->key_len ? n->key_len : 1);
		a->nnames = i + 1;
		if (!n->name || !n->key)
			goto nomem;
		memcpy((void *) n->key, kb, n->key_len);
		/* Remember the function: slowest is free until the walk. */
		n->st.slowest = (uint32_t) i;
	}
	qsort(a->names, a->nnames, sizeof(*a->names), name_cmp);
	for (j = 0, k = 0; j < a->nnames; j++) {
		struct htr_an_name *n = &a->names[j];

		if (k && !name_cmp(&a->names[k - 1], n)) {
			free((void *) n->name);
			free((void *) n->key);
		} else {
			a->names[k++] = *n;
		}
		a->func_name[n->st.slowest] = (uint32_t) (k - 1);
	}
	a->nnames = k;
	for (j = 0; j < k; j++)
		a->names[j].st.slowest = 0;
	htr_syms__free(syms);
	syms = NULL;

	w.a = a;
	w.cap_levels = (size_t) fi.max_depth + 1;
	w.stack = malloc(w.cap_levels * sizeof(*w.stack));
	w.active = calloc(a->nnames, sizeof(*w.active));
	w.cap = calloc(a->nnames, sizeof(*w.cap));
	if (!w.stack || !w.active || !w.cap)
		goto nomem;
	rc = htr_tree_visit(f, HTR_NONE, HTR_PREORDER, visit, &w);
	if (w.rc < 0) {
		rc = w.rc;
		goto out;
	}
	if (rc < 0) {
		rc = htr_err__set(&a->err, rc, "walking the tree: %s",
				  htr_errstr(rc));
		goto out;
	}
	/* Drop names without blocks (typically "?" in a trace without a
	 * late start). */
	remap = malloc(a->nnames * sizeof(*remap));
	if (!remap)
		goto nomem;
	for (j = 0, k = 0; j < a->nnames; j++) {
		struct htr_an_name *n = &a->names[j];

		if (!n->st.calls) {
			remap[j] = UINT32_MAX;
			free((void *) n->name);
			free((void *) n->key);
			free(n->blocks);
			continue;
		}
		remap[j] = (uint32_t) k;
		a->names[k++] = *n;
	}
	a->nnames = k;
	for (i = 0; i <= a->nfuncs; i++)
		a->func_name[i] = remap[a->func_name[i]];
	rc = 0;
	goto out;
nomem:
	rc = htr_err__set(&a->err, HTR_ERR_NOMEM, "out of memory");
out:
	htr_syms__free(syms);
	free(w.stack);
	free(w.active);
	free(w.cap);
	free(remap);
	if (rc < 0)
		htr_sym__free(a);
	return rc;
}
