/*
 * The "sym" analyzer: names, the symbol index and per-function figures.
 * Each block is named after the function at its entry address
 * (lib/symbols.h); a late block, whose entry was never traced, after the
 * function containing the first address it ran, marked as inferred:
 * "~name" (kept apart from name's complete invocations: its time is only
 * what the trace saw); blocks with neither are named "?".  One pre-order walk (chronological by first instruction)
 * builds, per distinct name, the list of its blocks, the number of calls,
 * the local ticks (from the "tsc" analyzer, its one dependency), the
 * inclusive ticks counting recursion once (only invocations with no
 * ancestor of the same name) and the slowest invocation.  Memory:
 * O(functions + depth), and for the lists either 4 bytes per block (in
 * memory) or, when the sidecar is written, what is not stored yet: each
 * list goes out in pieces as it grows, a piece when it is full and every
 * list's tail when all tails together reach HTR_SYM_BUFFERED blocks.
 *
 * Stored values (keys; layout in FORMAT.md, "Sidecar"): "r" the record,
 * "f" the function map, "n" + name key per name, "b" + name key + u32
 * big-endian piece number per piece of a block list, "a" + name key per
 * name that functions lead to (htr_syms__leads_to: their PLT stub's
 * target, tail jumps), with those functions: find NAME lists the blocks
 * entered through them too.
 */
#include "analyzer_int.h"
#include "descriptors.h"
#include "le.h"
#include "symbols.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The registered name, also the one looked up (the same pointer:
 * htr_analyzer__result() compares pointers first). */
static const char an_name[] = "sym";

#define LATE_NAME "?"

/* Name slots: one per function as an entry, one per function as an
 * address a late block ran ("~name"), one for "?". */
static uint64_t nslots(uint64_t nfuncs)
{
	return 2 * nfuncs + 1;
}

static uint32_t slot_of(const struct htr_block_info *b, uint64_t nfuncs)
{
	if ((b->flags & HTR_BLOCK_LATE) && b->anchor_func < nfuncs)
		return (uint32_t) (nfuncs + b->anchor_func);
	return b->func < nfuncs ? b->func : (uint32_t) (2 * nfuncs);
}

/* Version of the stored results; bump on any change of their meaning or
 * layout.  (A new "tsc" makes them stale by itself: a dependency.) */
#define HTR_SYM_VERSION 8u   /* 3: MODULE!name with several modules;
			      * 4: ~name for late blocks;
			      * 5: PLT stubs as NAME@plt;
			      * 6: the record counts images without a
			      *    debug file;
			      * 7: PLT stubs named after their target,
			      *    MODULE+0xOFFSET in the file's own
			      *    addresses;
			      * 8: pieces of 1..16384 blocks, stored
			      *    while computing */
/* Block lists are stored in pieces of at most this many entries. */
#define HTR_SYM_PIECE 16384u
/* Blocks held for the lists at most (about 4 bytes each) before every
 * list's tail is stored as a piece of its own. */
#define HTR_SYM_BUFFERED ((uint64_t) 1 << 21)
/* Longest name used as a key as is; longer ones are shortened. */
#define HTR_SYM_KEYMAX 480u
#define SYM_REC_SIZE 40u
#define FSTATS_SIZE 48u

/* Per-function figures. */
struct htr_fstats {
	uint64_t calls, inclusive, local, slowest_total;
	uint32_t slowest;
	uint32_t npieces;        /* stored pieces of the block list */
	uint64_t nblocks;        /* == calls */
};

/* One distinct function name. */
struct htr_an_name {
	const char *name;        /* NUL-terminated; stored value or heap */
	const uint8_t *key;      /* name key (stored key + 1, or heap) */
	size_t key_len;
	struct htr_fstats st;
	uint32_t *blocks;        /* computed: the list's last nbuf blocks
				  * (all of them in memory) */
	uint32_t nbuf, cap;
};

/* A name functions lead to: its stored value (u32 count, that many u32
 * function slots, the name and a NUL), heap or through ctx. */
struct htr_an_alias {
	const uint8_t *key;      /* name key */
	size_t key_len;
	const uint8_t *val;
	size_t val_len;
};

/* A result: computed (heap) or decoded (values through ctx). */
struct sym_res {
	struct htr_an_alias *alias;  /* sorted by key */
	size_t nalias;
	struct htr_analyzer_ctx *ctx;
	bool heap;
	struct htr_an_name *names;   /* sorted by key */
	size_t nnames;
	uint32_t *func_name;         /* nslots(nfuncs) entries */
	uint64_t nfuncs;
	uint64_t nblocks;
	const uint8_t *blk;          /* the block records (FORMAT.md) */
	uint32_t blk_size;           /* bytes per record */
	uint64_t bytes;              /* computed: stored in pieces so far */
	unsigned nskipped;
};

/* Where @r reads the block records in place: one htr_block_get() per
 * block (every field copied, every link checked) was most of a name's
 * cost in a dump.  0 or HTR_ERR_CORRUPT. */
static int find_records(struct sym_res *r, const struct htr_file *f)
{
	const void *p = NULL;
	uint64_t n = 0;

	if (!r->nblocks)
		return 0;
	if (htr_file_section(f, HTR_SECTION_BLOCKS, &p, &n, &r->blk_size) < 0 ||
	    !p || n != r->nblocks || r->blk_size < 32)
		return HTR_ERR_CORRUPT;
	r->blk = p;
	return 0;
}

/* Block @block's name slot (slot_of()) from bits 0-23 (the function) and
 * 24-31 (the flags) of its record's func_flags.  0, HTR_ERR_RANGE,
 * HTR_ERR_CORRUPT (a function index out of range). */
static int block_slot(const struct sym_res *r, uint32_t block, uint32_t *slot)
{
	uint32_t ff, fn;

	if (block >= r->nblocks || !r->blk)
		return HTR_ERR_RANGE;
	ff = (uint32_t) htr_disk__get_le(r->blk + (size_t) block * r->blk_size +
					 28, 4);
	fn = ff & 0xffffffu;
	if (fn == 0xffffffu) {
		*slot = (uint32_t) (2 * r->nfuncs);
		return 0;
	}
	if (fn >= r->nfuncs)
		return HTR_ERR_CORRUPT;
	*slot = ((ff >> 24) & HTR_BLOCK_LATE) ? (uint32_t) (r->nfuncs + fn) : fn;
	return 0;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t) (v >> 24);
	p[1] = (uint8_t) (v >> 16);
	p[2] = (uint8_t) (v >> 8);
	p[3] = (uint8_t) v;
}

/* Checksum of a block-list piece, bound to its key. */
static uint64_t piece_hash(const uint8_t *key, size_t klen, const uint8_t *p,
			   size_t n)
{
	return htr_hash__bytes(htr_hash__bytes(HTR_HASH_SEED, key, klen) ^ n,
			       p, n);
}

/* Checksum of the per-function table: every name key and value, then
 * the function map, chained. */
static uint64_t table_hash(uint64_t h, const void *k, size_t kl,
			   const void *v, size_t vl)
{
	h = htr_hash__bytes(h ^ kl, k, kl);
	return htr_hash__bytes(h ^ vl, v, vl);
}

/* The key of @name into @key (HTR_SYM_KEYMAX + 20 bytes). */
static size_t name_key(const char *name, uint8_t *key)
{
	size_t n = strlen(name);
	uint64_t h;

	if (n <= HTR_SYM_KEYMAX) {
		memcpy(key, name, n);
		return n;
	}
	/* Too long for a key: a prefix and the hash of the whole. */
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

static void sym_free(void *result, void *payload)
{
	struct sym_res *r = result;
	size_t i;

	(void) payload;
	if (!r)
		return;
	if (r->heap && r->names)
		for (i = 0; i < r->nnames; i++) {
			free((void *) r->names[i].name);
			free((void *) r->names[i].key);
			free(r->names[i].blocks);
		}
	if (r->heap && r->alias)
		for (i = 0; i < r->nalias; i++) {
			free((void *) r->alias[i].key);
			free((void *) r->alias[i].val);
		}
	free(r->alias);
	free(r->names);
	free(r->func_name);
	free(r);
}

struct walk {
	struct sym_res *a;
	struct htr_analyzer_ctx *ctx;
	const void *tsc;
	uint32_t *stack;        /* name index per level */
	uint32_t *active;       /* per name: open invocations */
	size_t cap_levels;
	uint32_t sp;
	bool storing;           /* lists go to the sidecar as they grow */
	uint64_t buffered;      /* blocks in the names' buffers */
	uint8_t *piece;         /* room for one piece */
	int rc;
};

/* Store @n's buffered blocks as its next piece (chronological: pieces
 * in number order). */
static int flush_list(struct walk *w, struct htr_an_name *n)
{
	uint8_t key[HTR_SYM_KEYMAX + 32];
	uint32_t j;
	size_t len;
	int rc;

	if (!n->nbuf)
		return 0;
	key[0] = 'b';
	memcpy(key + 1, n->key, n->key_len);
	put_be32(key + 1 + n->key_len, n->st.npieces);
	for (j = 0; j < n->nbuf; j++)
		htr_disk__put_le(w->piece + 8 + 4 * j, n->blocks[j], 4);
	len = 8 + (size_t) n->nbuf * 4;
	htr_disk__put_le(w->piece, piece_hash(key, n->key_len + 5,
					      w->piece + 8, len - 8), 8);
	rc = htr_analyzer_put(w->ctx, key, n->key_len + 5, w->piece, len);
	if (rc < 0)
		return rc;
	n->st.npieces++;
	w->a->bytes += len;
	w->buffered -= n->nbuf;
	n->nbuf = 0;
	return 0;
}

/* Every tail out, and the buffers freed: what they hold stays below
 * about twice HTR_SYM_BUFFERED whatever the number of functions. */
static int flush_all(struct walk *w)
{
	size_t i;
	int rc;

	for (i = 0; i < w->a->nnames; i++) {
		struct htr_an_name *n = &w->a->names[i];

		rc = flush_list(w, n);
		if (rc < 0)
			return rc;
		free(n->blocks);
		n->blocks = NULL;
		n->cap = 0;
	}
	return 0;
}

static int visit(const struct htr_file *f, uint32_t block, uint32_t parent,
		 uint32_t level, void *payload)
{
	struct walk *w = payload;
	struct sym_res *a = w->a;
	struct htr_an_name *n;
	uint64_t total, local;
	uint32_t id, slot = 0;
	int rc;

	(void) parent;
	(void) f;
	if (block_slot(a, block, &slot) < 0 || level >= w->cap_levels) {
		w->rc = htr_analyzer_fail(w->ctx, HTR_ERR_CORRUPT, "block %u: "
				     "nesting deeper than the header says",
				     block);
		return 1;
	}
	while (w->sp > level)
		w->active[w->stack[--w->sp]]--;
	id = a->func_name[slot];
	rc = htr_tsc__value(w->tsc, w->ctx, block, &total, &local);
	if (rc < 0) {
		w->rc = rc;
		return 1;
	}
	n = &a->names[id];
	if (n->nbuf == n->cap) {
		uint64_t nc = n->cap ? 2 * (uint64_t) n->cap : 4;
		uint32_t *nb;

		if (nc > UINT32_MAX) {
			w->rc = htr_analyzer_fail(w->ctx, HTR_ERR_LIMIT,
						  "too many blocks");
			return 1;
		}
		nb = realloc(n->blocks, nc * sizeof(*nb));
		if (!nb) {
			w->rc = htr_analyzer_fail(w->ctx, HTR_ERR_NOMEM,
					     "out of memory");
			return 1;
		}
		n->blocks = nb;
		n->cap = (uint32_t) nc;
	}
	n->blocks[n->nbuf++] = block;
	n->st.nblocks++;
	if (w->storing) {
		w->buffered++;
		rc = n->nbuf == HTR_SYM_PIECE ? flush_list(w, n) :
		     w->buffered >= HTR_SYM_BUFFERED ? flush_all(w) : 0;
		if (rc < 0) {
			w->rc = rc;
			return 1;
		}
	}
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

/* A function (slot) that leads to a name, while computing. */
struct lead {
	uint8_t *key;
	size_t key_len;
	char *name;
	uint32_t slot;
};

static int lead_cmp(const void *x, const void *y)
{
	const struct lead *a = x, *b = y;
	int c = key_cmp(a->key, a->key_len, b->key, b->key_len);

	if (c)
		return c;
	return a->slot < b->slot ? -1 : a->slot > b->slot;
}

#define LEADS_MAX 8u

/* Add function slot @slot leading to @name to *@v (*@n of *@cap). */
static int add_lead(struct lead **v, size_t *n, size_t *cap, uint32_t slot,
		    const char *name)
{
	uint8_t kb[HTR_SYM_KEYMAX + 32];
	struct lead *l;

	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		struct lead *q = realloc(*v, nc * sizeof(*q));

		if (!q)
			return HTR_ERR_NOMEM;
		*v = q;
		*cap = nc;
	}
	l = &(*v)[*n];
	l->slot = slot;
	l->key_len = name_key(name, kb);
	l->name = strdup(name);
	l->key = malloc(l->key_len ? l->key_len : 1);
	(*n)++;
	if (!l->name || !l->key)
		return HTR_ERR_NOMEM;
	memcpy(l->key, kb, l->key_len);
	return 0;
}

/* The names the functions of @f lead to (htr_syms__leads_to), other than
 * their own, into a->alias.  Returns 0 or HTR_ERR_NOMEM. */
static int compute_aliases(struct sym_res *a, const struct htr_file *f,
			   const struct htr_syms *syms)
{
	struct lead *v = NULL;
	size_t n = 0, cap = 0, i, j;
	char own[1024], buf[1024];
	uint64_t to[LEADS_MAX + 1], fi;
	int rc = 0;

	for (fi = 0; fi < a->nfuncs && !rc; fi++) {
		size_t nto, h, k;

		/* The entry, then where it leads; at each, every name (the
		 * entry's own name aside). */
		if (htr_func_entry(f, fi, &to[0]) != 0 ||
		    htr_syms__name(syms, to[0], own, sizeof(own)) != 1)
			continue;
		nto = 1 + htr_syms__leads_to(syms, to[0], to + 1, LEADS_MAX);
		for (h = 0; h < nto && !rc; h++)
			for (k = h ? 0 : 1; !rc; k++) {
				if (k ? !htr_syms__alias(syms, to[h], k - 1, buf,
							 sizeof(buf)) :
				    htr_syms__name(syms, to[h], buf,
						   sizeof(buf)) != 1)
					break;
				if (strcmp(buf, own))
					rc = add_lead(&v, &n, &cap,
						      (uint32_t) fi, buf);
			}
	}
	if (!rc && n)
		qsort(v, n, sizeof(*v), lead_cmp);
	if (!rc)
		a->alias = calloc(n ? n : 1, sizeof(*a->alias));
	if (!a->alias)
		rc = HTR_ERR_NOMEM;
	for (i = 0; !rc && i < n; i = j) {
		struct htr_an_alias *al = &a->alias[a->nalias];
		size_t m = 0, nl = strlen(v[i].name), k;
		uint8_t *val;

		for (j = i; j < n && !key_cmp(v[j].key, v[j].key_len, v[i].key,
					      v[i].key_len); j++)
			if (j == i || v[j].slot != v[j - 1].slot)
				m++;
		val = malloc(4 + 4 * m + nl + 1);
		if (!val) {
			rc = HTR_ERR_NOMEM;
			break;
		}
		htr_disk__put_le(val, m, 4);
		for (k = i, m = 0; k < j; k++)
			if (k == i || v[k].slot != v[k - 1].slot)
				htr_disk__put_le(val + 4 + 4 * m++, v[k].slot, 4);
		memcpy(val + 4 + 4 * m, v[i].name, nl + 1);
		al->key = v[i].key;
		al->key_len = v[i].key_len;
		al->val = val;
		al->val_len = 4 + 4 * m + nl + 1;
		v[i].key = NULL;
		a->nalias++;
	}
	for (i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].name);
	}
	free(v);
	return rc;
}

static int sym_compute(struct htr_analyzer_ctx *ctx, void **result,
		       void *payload)
{
	const struct htr_file *f = htr_analyzer_file(ctx);
	struct sym_res *a = NULL;
	struct htr_err err;
	struct htr_file_info fi;
	struct htr_syms *syms = NULL;
	struct walk w;
	char buf[4096];
	uint32_t *remap = NULL;
	uint64_t i;
	size_t j, k;
	int rc;

	(void) payload;
	memset(&w, 0, sizeof(w));
	memset(&err, 0, sizeof(err));
	rc = htr_analyzer_dep(ctx, "tsc", &w.tsc);
	if (rc < 0)
		return rc;
	a = calloc(1, sizeof(*a));
	if (!a)
		return htr_analyzer_fail(ctx, HTR_ERR_NOMEM, "out of memory");
	a->ctx = ctx;
	a->heap = true;
	a->nblocks = htr_block_count(f);
	if (find_records(a, f) < 0) {
		rc = htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "no block records");
		goto out;
	}
	memset(&fi, 0, sizeof(fi));
	htr_file_info(f, &fi, sizeof(fi));
	a->nfuncs = htr_func_count(f);
	a->nskipped = 0;
	rc = htr_syms__load(&syms, f, &a->nskipped, &err);
	if (rc < 0) {
		rc = htr_analyzer_fail(ctx, rc, "%s", err.msg);
		goto out;
	}
	if (a->nskipped)
		htr_analyzer__partial(ctx, err.msg);
	a->names = calloc(nslots(a->nfuncs), sizeof(*a->names));
	a->func_name = malloc(nslots(a->nfuncs) * sizeof(*a->func_name));
	if (!a->names || !a->func_name)
		goto nomem;
	/* A name per slot; sort and merge equal names (unused ones go after
	 * the walk). */
	for (i = 0; i < nslots(a->nfuncs); i++) {
		struct htr_an_name *n = &a->names[i];
		uint8_t kb[HTR_SYM_KEYMAX + 32];
		uint64_t addr = 0;

		if (i < a->nfuncs && htr_func_entry(f, i, &addr) == 0) {
			htr_syms__name(syms, addr, buf, sizeof(buf));
		} else if (i < 2 * a->nfuncs &&
			   htr_func_entry(f, i - a->nfuncs, &addr) == 0) {
			buf[0] = '~';
			htr_syms__function(syms, addr, buf + 1,
					   sizeof(buf) - 1);
		} else {
			snprintf(buf, sizeof(buf), LATE_NAME);
		}
		n->name = strdup(buf);
		n->key_len = name_key(buf, kb);
		n->key = malloc(n->key_len ? n->key_len : 1);
		a->nnames = i + 1;
		if (!n->name || !n->key)
			goto nomem;
		memcpy((void *) n->key, kb, n->key_len);
		/* Remember the function: slowest is free until the walk. */
		n->st.slowest = (uint32_t) i;
	}
	if (a->nnames)
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
	if (compute_aliases(a, f, syms))
		goto nomem;
	htr_syms__free(syms);
	syms = NULL;

	w.a = a;
	w.ctx = ctx;
	w.storing = htr_analyzer_storing(ctx);
	w.cap_levels = (size_t) fi.max_depth + 1;
	w.stack = malloc(w.cap_levels * sizeof(*w.stack));
	w.active = calloc(a->nnames, sizeof(*w.active));
	w.piece = w.storing ? malloc(8 + (size_t) HTR_SYM_PIECE * 4) : NULL;
	if (!w.stack || !w.active || (w.storing && !w.piece))
		goto nomem;
	rc = htr_tree_visit(f, HTR_NONE, HTR_PREORDER, visit, &w);
	if (rc >= 0 && w.rc >= 0 && w.storing)
		w.rc = flush_all(&w);
	if (w.rc < 0) {
		rc = w.rc;
		goto out;
	}
	if (rc < 0) {
		rc = htr_analyzer_fail(ctx, rc, "walking the tree: %s",
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
	for (i = 0; i < nslots(a->nfuncs); i++)
		a->func_name[i] = remap[a->func_name[i]];
	rc = 0;
	goto out;
nomem:
	rc = htr_analyzer_fail(ctx, HTR_ERR_NOMEM, "out of memory");
out:
	htr_syms__free(syms);
	free(w.stack);
	free(w.active);
	free(w.piece);
	free(remap);
	if (rc < 0)
		sym_free(a, NULL);
	else
		*result = a;
	return rc;
}

/* --- the codec --- */

static int sym_encode(struct htr_analyzer_ctx *ctx, const void *result,
		      void *payload)
{
	const struct sym_res *a = result;
	uint8_t rec[SYM_REC_SIZE], key[HTR_SYM_KEYMAX + 32];
	uint8_t *val = NULL, *map = NULL;
	size_t i, cap = 0;
	uint64_t bytes = a->bytes, th = HTR_HASH_SEED;
	int rc = 0;

	(void) payload;
	/* The block lists were stored by compute() (the only one whose
	 * results are encoded is a storing one). */
	for (i = 0; i < a->nnames && !rc; i++) {
		const struct htr_an_name *n = &a->names[i];
		size_t nl = strlen(n->name), need = FSTATS_SIZE + nl + 1;

		if (need > cap) {
			uint8_t *nv = realloc(val, need);

			if (!nv) {
				rc = htr_analyzer_fail(ctx, HTR_ERR_NOMEM,
						       "out of memory");
				break;
			}
			val = nv;
			cap = need;
		}
		htr_disk__put_le(val, n->st.calls, 8);
		htr_disk__put_le(val + 8, n->st.inclusive, 8);
		htr_disk__put_le(val + 16, n->st.local, 8);
		htr_disk__put_le(val + 24, n->st.slowest_total, 8);
		htr_disk__put_le(val + 32, n->st.slowest, 4);
		htr_disk__put_le(val + 36, n->st.npieces, 4);
		htr_disk__put_le(val + 40, n->st.nblocks, 8);
		memcpy(val + FSTATS_SIZE, n->name, nl + 1);
		key[0] = 'n';
		memcpy(key + 1, n->key, n->key_len);
		rc = htr_analyzer_put(ctx, key, n->key_len + 1, val, need);
		th = table_hash(th, n->key, n->key_len, val, need);
		bytes += need;
	}
	free(val);
	if (!rc) {
		map = malloc(nslots(a->nfuncs) * 4);
		if (!map)
			return htr_analyzer_fail(ctx, HTR_ERR_NOMEM,
						 "out of memory");
		for (i = 0; i < nslots(a->nfuncs); i++)
			htr_disk__put_le(map + 4 * i, a->func_name[i], 4);
		rc = htr_analyzer_put(ctx, "f", 1, map, nslots(a->nfuncs) * 4);
		th = table_hash(th, "f", 1, map, nslots(a->nfuncs) * 4);
		free(map);
	}
	for (i = 0; !rc && i < a->nalias; i++) {
		const struct htr_an_alias *al = &a->alias[i];

		key[0] = 'a';
		memcpy(key + 1, al->key, al->key_len);
		rc = htr_analyzer_put(ctx, key, al->key_len + 1, al->val,
				      al->val_len);
		th = table_hash(th, al->key, al->key_len, al->val, al->val_len);
		bytes += al->val_len;
	}
	if (!rc) {
		unsigned unreadable, nodebug;

		/* What a later open compares with: images that could not be
		 * opened, stripped ones without a debug file (not those
		 * without symbols, which stay so). */
		unreadable = htr_syms__unreadable(htr_analyzer_file(ctx),
						  &nodebug);
		memset(rec, 0, sizeof(rec));
		htr_disk__put_le(rec, nodebug, 4);
		htr_disk__put_le(rec + 4, unreadable, 4);
		htr_disk__put_le(rec + 8, a->nnames, 8);
		htr_disk__put_le(rec + 16, a->nfuncs, 8);
		htr_disk__put_le(rec + 24, bytes, 8);
		htr_disk__put_le(rec + 32, th, 8);
		rc = htr_analyzer_put(ctx, "r", 1, rec, sizeof(rec));
	}
	return rc;
}

/* Stale when built while some images were unreadable and one is back
 * (its names replace the MODULE+0xOFFSET ones), or a stripped one had no
 * debug file and one is there now, or for another file. */
static int sym_current(struct htr_analyzer_ctx *ctx, void *payload)
{
	const struct htr_file *f = htr_analyzer_file(ctx);
	const uint8_t *p;
	const void *v;
	size_t len;
	unsigned unreadable, nodebug;
	int rc;

	(void) payload;
	rc = htr_analyzer_value(ctx, "r", 1, &v, &len);
	if (rc == HTR_ERR_NOTFOUND)
		return 0;
	if (rc < 0)
		return rc;
	p = v;
	if (len != SYM_REC_SIZE || htr_disk__get_le(p + 16, 8) !=
	    htr_func_count(f))
		return 0;
	if (!htr_disk__get_le(p, 4) && !htr_disk__get_le(p + 4, 4))
		return 1;
	unreadable = htr_syms__unreadable(f, &nodebug);
	return unreadable >= htr_disk__get_le(p + 4, 4) &&
	       nodebug >= htr_disk__get_le(p, 4);
}

struct load {
	struct sym_res *r;
	uint64_t nnames, i, th;
	size_t cap_alias;
};

/* An "a" value (1: damaged, 2: out of memory): u32 count, the slots (functions of the .htr), the name
 * (its key's) and a NUL. */
static int load_alias(const void *key, size_t klen, const void *val,
		      size_t vlen, void *payload)
{
	struct load *ld = payload;
	struct sym_res *r = ld->r;
	const uint8_t *p = val, *k = key;
	uint8_t kb[HTR_SYM_KEYMAX + 32];
	struct htr_an_alias *al;
	uint64_t m, i;
	const char *name;

	if (vlen < 6 || klen < 1 || p[vlen - 1])
		return 1;
	m = htr_disk__get_le(p, 4);
	if (!m || m > (vlen - 5) / 4)
		return 1;
	name = (const char *) p + 4 + 4 * m;
	if (strlen(name) + 1 != vlen - 4 - 4 * m ||
	    name_key(name, kb) != klen - 1 || memcmp(kb, k + 1, klen - 1))
		return 1;
	for (i = 0; i < m; i++)
		if (htr_disk__get_le(p + 4 + 4 * i, 4) >= r->nfuncs)
			return 1;
	if (r->nalias == ld->cap_alias) {
		size_t nc = ld->cap_alias ? 2 * ld->cap_alias : 16;
		struct htr_an_alias *q = realloc(r->alias, nc * sizeof(*q));

		if (!q)
			return 2;
		r->alias = q;
		ld->cap_alias = nc;
	}
	ld->th = table_hash(ld->th, k + 1, klen - 1, p, vlen);
	al = &r->alias[r->nalias++];
	al->key = k + 1;
	al->key_len = klen - 1;
	al->val = p;
	al->val_len = vlen;
	return 0;
}

static int load_name(const void *key, size_t klen, const void *val,
		     size_t vlen, void *payload)
{
	struct load *ld = payload;
	struct sym_res *r = ld->r;
	const uint8_t *p = val, *k = key;
	struct htr_an_name *n;
	uint8_t kb[HTR_SYM_KEYMAX + 32];
	const char *name;
	size_t nl;

	if (ld->i >= ld->nnames || vlen < FSTATS_SIZE + 1 || p[vlen - 1] ||
	    klen < 1)
		return 1;
	name = (const char *) p + FSTATS_SIZE;
	nl = strlen(name);
	if (nl + 1 != vlen - FSTATS_SIZE || name_key(name, kb) != klen - 1 ||
	    memcmp(kb, k + 1, klen - 1))
		return 1;
	ld->th = table_hash(ld->th, k + 1, klen - 1, p, vlen);
	n = &r->names[ld->i++];
	n->name = name;
	n->key = k + 1;
	n->key_len = klen - 1;
	n->st.calls = htr_disk__get_le(p, 8);
	n->st.inclusive = htr_disk__get_le(p + 8, 8);
	n->st.local = htr_disk__get_le(p + 16, 8);
	n->st.slowest_total = htr_disk__get_le(p + 24, 8);
	n->st.slowest = (uint32_t) htr_disk__get_le(p + 32, 4);
	n->st.npieces = (uint32_t) htr_disk__get_le(p + 36, 4);
	n->st.nblocks = htr_disk__get_le(p + 40, 8);
	if (n->st.nblocks != n->st.calls || n->st.nblocks > r->nblocks ||
	    n->st.npieces < (n->st.nblocks + HTR_SYM_PIECE - 1) /
			    HTR_SYM_PIECE || n->st.npieces > n->st.nblocks ||
	    (n->st.calls && n->st.slowest >= r->nblocks))
		return 1;
	return 0;
}

/* Read the per-function table (the block lists stay stored). */
static int sym_decode(struct htr_analyzer_ctx *ctx, void **result,
		      void *payload)
{
	const struct htr_file *f = htr_analyzer_file(ctx);
	struct sym_res *r;
	struct load ld;
	const uint8_t *p, *fmap;
	const void *v;
	size_t len;
	uint64_t i, want_h;
	int rc;

	(void) payload;
	r = calloc(1, sizeof(*r));
	if (!r)
		return htr_analyzer_fail(ctx, HTR_ERR_NOMEM, "out of memory");
	*result = r;
	r->ctx = ctx;
	r->nblocks = htr_block_count(f);
	r->nfuncs = htr_func_count(f);
	if (find_records(r, f) < 0)
		return htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "no block "
					 "records");
	rc = htr_analyzer_value(ctx, "r", 1, &v, &len);
	if (rc == HTR_ERR_NOTFOUND || (!rc && len != SYM_REC_SIZE))
		goto corrupt;
	if (rc < 0)
		return rc;
	p = v;
	memset(&ld, 0, sizeof(ld));
	ld.r = r;
	ld.nnames = htr_disk__get_le(p + 8, 8);
	ld.th = HTR_HASH_SEED;
	want_h = htr_disk__get_le(p + 32, 8);
	r->nskipped = (unsigned) htr_disk__get_le(p + 4, 4);
	if (ld.nnames > nslots(r->nfuncs))
		goto corrupt;
	rc = htr_analyzer_value(ctx, "f", 1, &v, &len);
	if (rc == HTR_ERR_NOTFOUND || (!rc && len != nslots(r->nfuncs) * 4))
		goto corrupt;
	if (rc < 0)
		return rc;
	fmap = v;
	r->func_name = malloc(nslots(r->nfuncs) * sizeof(*r->func_name));
	r->names = calloc(ld.nnames ? ld.nnames : 1, sizeof(*r->names));
	if (!r->func_name || !r->names)
		return htr_analyzer_fail(ctx, HTR_ERR_NOMEM, "out of memory");
	for (i = 0; i < nslots(r->nfuncs); i++) {
		r->func_name[i] = (uint32_t) htr_disk__get_le(fmap + 4 * i, 4);
		if (r->func_name[i] >= ld.nnames &&
		    r->func_name[i] != UINT32_MAX)
			goto corrupt;
	}
	rc = htr_analyzer_scan(ctx, "n", 1, load_name, &ld);
	if (rc > 0)
		goto corrupt;
	if (rc < 0)
		return rc;
	ld.th = table_hash(ld.th, "f", 1, fmap, nslots(r->nfuncs) * 4);
	rc = htr_analyzer_scan(ctx, "a", 1, load_alias, &ld);
	if (rc == 2)
		return htr_analyzer_fail(ctx, HTR_ERR_NOMEM, "out of memory");
	if (rc > 0)
		goto corrupt;
	if (rc < 0)
		return rc;
	if (ld.i != ld.nnames || ld.th != want_h)
		goto corrupt;
	r->nnames = (size_t) ld.nnames;
	return 0;
corrupt:
	return htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "%s: the symbol index "
				 "is damaged; remove the sidecar to recompute",
				 htr_analyzer_sidecar(ctx));
}

void htr_sym__descriptor(struct htr_analyzer *d)
{
	static const char *const deps[] = { "tsc", NULL };

	htr_analyzer_init(d);
	d->name = an_name;
	d->version = HTR_SYM_VERSION;
	d->deps = deps;
	d->compute = sym_compute;
	d->encode = sym_encode;
	d->decode = sym_decode;
	d->free = sym_free;
	d->current = sym_current;
}

/* --- the public queries (htr/analyze.h) --- */

static struct sym_res *usable(struct htr_analysis *a)
{
	struct sym_res *r;

	if (!a)
		return NULL;
	r = htr_analyzer__result(a, an_name);
	if (!r)
		htr_err__set(&a->err, HTR_ERR_INVALID, "the symbol analyzer "
			     "is not open");
	return r;
}

int htr_block_name(struct htr_analysis *a, uint32_t block, const char **name)
{
	struct sym_res *r = usable(a);
	uint32_t id, slot = 0;
	int rc;

	if (!r)
		return HTR_ERR_INVALID;
	if (!name)
		return htr_err__set(&a->err, HTR_ERR_INVALID, "name is NULL");
	rc = block_slot(r, block, &slot);
	if (rc == HTR_ERR_RANGE)
		return htr_err__set(&a->err, HTR_ERR_RANGE, "block %u: no such "
				    "block", block);
	if (rc < 0)
		return htr_err__set(&a->err, rc, "block %u: %s", block,
				    htr_errstr(rc));
	id = r->func_name[slot];
	if (id >= r->nnames)
		return htr_err__set(&a->err, HTR_ERR_CORRUPT, "block %u: its "
				    "function has no name in the index", block);
	*name = r->names[id].name;
	return 0;
}

/* The NAME of "MODULE!NAME" (a late block's "~MODULE!NAME" too), or NULL
 * when @name has no module part.  A C++ name may hold a '!' of its own
 * (operator!=): a module part has no ':', '(' or ' '. */
static const char *bare_name(const char *name)
{
	size_t k = strcspn(name, "!:( ");

	return name[k] == '!' ? name + k + 1 : NULL;
}

/* The length of @name without its symbol version: names from a .symtab
 * keep theirs ("__libc_start_main@@GLIBC_2.34", "memcpy@GLIBC_2.2.5"), as
 * perf shows them, but nobody types one.  A PLT stub that nothing bound
 * keeps "@plt" ("puts@plt": the module defining puts was not traced);
 * it is still the way into puts, so "puts" finds it too. */
static size_t unversioned_len(const char *name)
{
	size_t n = strcspn(name, "@");

	return name[n] ? n : 0;
}

static int match_one(const char *name, const char *pattern, int mode)
{
	char buf[256], *p;
	size_t n;
	int rc;

	if (mode == HTR_MATCH_GLOB ? fnmatch(pattern, name, 0) == 0
				   : strcmp(pattern, name) == 0)
		return 1;
	if (strchr(pattern, '@') || !(n = unversioned_len(name)))
		return 0;
	if (mode != HTR_MATCH_GLOB)
		return strlen(pattern) == n && !strncmp(pattern, name, n);
	p = n < sizeof(buf) ? buf : malloc(n + 1);
	if (!p)
		return 0;
	memcpy(p, name, n);
	p[n] = 0;
	rc = fnmatch(pattern, p, 0) == 0;
	if (p != buf)
		free(p);
	return rc;
}

/* A pattern naming no module matches a module's function by its name
 * alone: "memcpy" is libc.so.6!memcpy when several modules ran. */
static int matches_name(const char *name, const char *pattern, int mode)
{
	const char *bare;

	if (!pattern || match_one(name, pattern, mode))
		return 1;
	bare = strchr(pattern, '!') ? NULL : bare_name(name);
	return bare && match_one(bare, pattern, mode);
}

static int matches(const struct htr_an_name *n, const char *pattern, int mode)
{
	return matches_name(n->name, pattern, mode);
}

/* The names to look at: all for globs, a binary search for exact names. */
static void name_range(const struct sym_res *r, const char *pattern, int mode,
		       size_t *lo, size_t *hi)
{
	uint8_t kb[HTR_SYM_KEYMAX + 32];
	size_t kl, l = 0, h = r->nnames;

	*lo = 0;
	*hi = r->nnames;
	/* A name without a module may be any module's: look at all. */
	if (!pattern || mode != HTR_MATCH_EXACT || !strchr(pattern, '!'))
		return;
	/* The name and its versioned forms (match_one) start with the
	 * pattern: they are together from the first key not below it, unless
	 * the pattern is too long to be a key's prefix. */
	kl = strlen(pattern);
	if (kl > HTR_SYM_KEYMAX - 17)
		return;
	kl = name_key(pattern, kb);
	while (l < h) {
		size_t m = l + (h - l) / 2;
		const struct htr_an_name *n = &r->names[m];

		if (key_cmp(n->key, n->key_len, kb, kl) < 0)
			l = m + 1;
		else
			h = m;
	}
	*lo = l;
	while (h < r->nnames && !strncmp(r->names[h].name, pattern, kl))
		h++;
	*hi = h;
}

int htr_func_visit(struct htr_analysis *a, const char *pattern, int mode,
		   htr_func_fn fn, void *payload)
{
	struct sym_res *r = usable(a);
	size_t i, lo, hi;
	uint64_t n = 0;
	int rc;

	if (!r)
		return HTR_ERR_INVALID;
	if (!fn || (mode != HTR_MATCH_EXACT && mode != HTR_MATCH_GLOB))
		return htr_err__set(&a->err, HTR_ERR_INVALID, "bad arguments");
	name_range(r, pattern, mode, &lo, &hi);
	for (i = lo; i < hi; i++) {
		const struct htr_an_name *nm = &r->names[i];
		struct htr_func_stats st;

		if (!matches(nm, pattern, mode))
			continue;
		memset(&st, 0, sizeof(st));
		st.size = sizeof(st);
		st.name = nm->name;
		st.calls = nm->st.calls;
		st.inclusive = nm->st.inclusive;
		st.local = nm->st.local;
		st.slowest = nm->st.slowest;
		st.slowest_total = nm->st.slowest_total;
		n++;
		rc = fn(&st, payload);
		if (rc)
			return htr_err__callback(rc);
	}
	return n ? 0 : htr_err__set(&a->err, HTR_ERR_NOTFOUND, "no function "
				    "matches '%s'", pattern ? pattern : "*");
}

/* Only the blocks of function slot @slot (UINT32_MAX: all). */
struct only {
	struct htr_analysis *a;
	uint64_t nfuncs;
	uint32_t slot;
	htr_sym_fn fn;
	void *payload;
};

static int only_slot(const char *name, uint32_t block, void *payload)
{
	struct only *o = payload;
	struct htr_block_info b;

	if (htr_block_get(o->a->file, block, &b, sizeof(b)) < 0 ||
	    slot_of(&b, o->nfuncs) != o->slot)
		return 0;
	return o->fn(name, block, o->payload);
}

static int find_blocks(struct htr_analysis *a, const struct sym_res *r,
		       const struct htr_an_name *n, htr_sym_fn fn,
		       void *payload)
{
	uint8_t key[HTR_SYM_KEYMAX + 32];
	uint64_t left = n->st.nblocks, j;
	uint32_t piece;
	int rc;

	if (r->heap) {
		for (j = 0; j < n->st.nblocks; j++) {
			rc = fn(n->name, n->blocks[j], payload);
			if (rc)
				return htr_err__callback(rc);
		}
		return 0;
	}
	key[0] = 'b';
	memcpy(key + 1, n->key, n->key_len);
	for (piece = 0; piece < n->st.npieces; piece++) {
		uint64_t cnt;
		const uint8_t *q;
		const void *v;
		size_t len;

		put_be32(key + 1 + n->key_len, piece);
		rc = htr_analyzer_value(r->ctx, key, n->key_len + 5, &v, &len);
		if (rc == HTR_ERR_NOTFOUND)
			goto damaged;
		if (rc < 0)
			return rc;
		/* 1..HTR_SYM_PIECE blocks, no more than the list has left */
		cnt = len >= 12 ? (len - 8) / 4 : 0;
		if (!cnt || (len - 8) % 4 || cnt > HTR_SYM_PIECE || cnt > left ||
		    htr_disk__get_le(v, 8) != piece_hash(key, n->key_len + 5,
				(const uint8_t *) v + 8, cnt * 4))
			goto damaged;
		q = (const uint8_t *) v + 8;
		for (j = 0; j < cnt; j++) {
			uint32_t b = (uint32_t) htr_disk__get_le(q + 4 * j, 4);

			if (b >= r->nblocks)
				goto damaged;
			rc = fn(n->name, b, payload);
			if (rc)
				return htr_err__callback(rc);
		}
		left -= cnt;
	}
	if (left)
		goto damaged;
	return 0;
damaged:
	return htr_err__set(&a->err, HTR_ERR_CORRUPT, "%s: the block list of "
			    "'%s' is damaged; remove the sidecar to recompute",
			    htr_analyzer_sidecar(r->ctx), n->name);
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *) x, b = *(const uint32_t *) y;

	return a < b ? -1 : a > b;
}

/* The blocks of functions that lead to a name matching @pattern (entered
 * through its PLT stub, or a function that tail-jumps to it), unless
 * their own name matches too (listed already); each block once, under
 * its own name.  Sets *@matched if a name matched. */
static int find_leading(struct htr_analysis *a, const struct sym_res *r,
			const char *pattern, int mode, htr_sym_fn fn,
			void *payload, int *matched)
{
	uint32_t *slots = NULL;
	size_t n = 0, cap = 0, i, k;
	int rc = 0;

	for (i = 0; i < r->nalias; i++) {
		const struct htr_an_alias *al = &r->alias[i];
		uint64_t m = htr_disk__get_le(al->val, 4), j;

		if (!matches_name((const char *) al->val + 4 + 4 * m, pattern,
				  mode))
			continue;
		*matched = 1;
		for (j = 0; j < m; j++) {
			uint32_t slot = (uint32_t) htr_disk__get_le(al->val + 4 +
								    4 * j, 4);
			uint32_t id = r->func_name[slot];

			if (id >= r->nnames || matches(&r->names[id], pattern,
						       mode))
				continue;
			if (n == cap) {
				size_t nc = cap ? 2 * cap : 16;
				uint32_t *q = realloc(slots, nc * sizeof(*q));

				if (!q) {
					free(slots);
					return htr_err__set(&a->err,
							    HTR_ERR_NOMEM,
							    "out of memory");
				}
				slots = q;
				cap = nc;
			}
			slots[n++] = slot;
		}
	}
	if (n)
		qsort(slots, n, sizeof(*slots), cmp_u32);
	for (i = 0; i < n && !rc; i++) {
		struct only o;

		if (i && slots[i] == slots[i - 1])
			continue;
		o.a = a;
		o.nfuncs = r->nfuncs;
		o.slot = slots[i];
		o.fn = fn;
		o.payload = payload;
		k = r->func_name[slots[i]];
		rc = find_blocks(a, r, &r->names[k], only_slot, &o);
	}
	free(slots);
	return rc;
}

int htr_symidx_find(struct htr_analysis *a, const char *pattern, int mode,
		    htr_sym_fn fn, void *payload)
{
	struct sym_res *r = usable(a);
	size_t i, lo, hi;
	int matched = 0, rc;

	if (!r)
		return HTR_ERR_INVALID;
	if (!pattern || !fn ||
	    (mode != HTR_MATCH_EXACT && mode != HTR_MATCH_GLOB))
		return htr_err__set(&a->err, HTR_ERR_INVALID, "bad arguments");
	name_range(r, pattern, mode, &lo, &hi);
	for (i = lo; i < hi; i++) {
		const struct htr_an_name *nm = &r->names[i];

		if (!matches(nm, pattern, mode))
			continue;
		matched = 1;
		rc = find_blocks(a, r, nm, fn, payload);
		if (rc)
			return rc;
	}
	rc = find_leading(a, r, pattern, mode, fn, payload, &matched);
	if (rc)
		return rc;
	if (!matched)
		return htr_err__set(&a->err, HTR_ERR_NOTFOUND, "no function "
				    "matches '%s'", pattern);
	return 0;
}
