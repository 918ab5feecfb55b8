/*
 * The analysis handle (include/htr/analyze.h): opens the sidecar or falls
 * back to memory, and answers queries from either.
 */
#include "analyze.h"
#include "abi.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANALYSIS_OPTS_SIZE0 HTR_ABI_SIZE0(struct htr_analysis_opts, no_sidecar)

void htr_analysis_opts_init_size(struct htr_analysis_opts *opts, size_t size)
{
	htr_abi__init(opts, size);
}

/* In-memory TSC: keep every chunk. */
static int mem_emit(void *ctx, uint64_t chunk, const uint8_t *buf, size_t len)
{
	struct htr_analysis *a = ctx;
	uint8_t *copy = malloc(len);

	if (!copy)
		return htr_err__set(&a->err, HTR_ERR_NOMEM, "out of memory");
	memcpy(copy, buf, len);
	a->mem_chunk[chunk] = copy;
	a->chunk_len[chunk] = (uint32_t) len;
	return 0;
}

static int compute_in_memory(struct htr_analysis *a)
{
	int rc;

	a->flags |= HTR_ANALYSIS_IN_MEMORY | HTR_ANALYSIS_COMPUTED;
	a->flags &= ~HTR_ANALYSIS_RELOADED;
	a->mem_chunk = calloc(a->nchunks ? a->nchunks : 1,
			      sizeof(*a->mem_chunk));
	if (!a->mem_chunk)
		return htr_err__set(&a->err, HTR_ERR_NOMEM, "out of memory");
	htr_tsc__forget(a);
	rc = htr_tsc__compute(a, mem_emit, a);
	if (rc < 0)
		return rc;
	if (a->want & HTR_ANALYZE_SYMS)
		return htr_sym__compute(a);
	return 0;
}

/* Open @a over @store (set by the caller), the options already read. */
static int open_over(struct htr_analysis *a, const struct htr_analysis_opts *o)
{
	const struct htr_file *file = a->store->file;
	int rc;

	a->file = file;
	a->sidecar = a->store->sidecar;
	a->want = o->analyzers ? o->analyzers & HTR_ANALYZE_ALL : HTR_ANALYZE_ALL;
	if (a->want & HTR_ANALYZE_SYMS)
		a->want |= HTR_ANALYZE_TSC;
	a->nblocks = htr_block_count(file);
	a->nchunks = (a->nblocks + HTR_TSC_CHUNK - 1) / HTR_TSC_CHUNK;
	a->chunk = calloc(a->nchunks ? a->nchunks : 1, sizeof(*a->chunk));
	a->chunk_len = calloc(a->nchunks ? a->nchunks : 1,
			      sizeof(*a->chunk_len));
	a->chunk_ok = calloc(a->nchunks ? a->nchunks : 1, 1);
	if (!a->chunk || !a->chunk_len || !a->chunk_ok)
		return htr_err__set(&a->err, HTR_ERR_NOMEM, "out of memory");
	rc = htr_sidecar__open(a);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		htr_sidecar__close(a);
		rc = compute_in_memory(a);
		if (rc < 0)
			return rc;
	}
	htr_err__clear(&a->err);
	return 0;
}

static int read_opts(struct htr_analysis *a, struct htr_analysis_opts *o,
		     const struct htr_analysis_opts *opts)
{
	if (htr_abi__in(o, sizeof(*o), opts, htr_abi__size_of(opts),
			ANALYSIS_OPTS_SIZE0) < 0)
		return htr_err__set(&a->err, HTR_ERR_INVALID, "bad options "
				    "size %zu", htr_abi__size_of(opts));
	return 0;
}

int htr_analysis_open(struct htr_analysis **out, const struct htr_file *file,
		      const struct htr_analysis_opts *opts)
{
	struct htr_analysis_opts o;
	struct htr_store_opts so;
	struct htr_file_info fi;
	struct htr_analysis *a;
	int rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return HTR_ERR_NOMEM;
	*out = a;
	rc = read_opts(a, &o, opts);
	if (rc < 0)
		return rc;
	if (htr_file_info(file, &fi, sizeof(fi)) < 0)
		return htr_err__set(&a->err, HTR_ERR_INVALID, "no open .htr "
				    "file");
	/* A private store: right for one handle per sidecar (htr/store.h). */
	htr_store_opts_init(&so);
	so.sidecar = o.sidecar;
	so.no_sidecar = o.no_sidecar;
	rc = htr_store_open(&a->store, file, &so);
	a->own_store = a->store != NULL;
	if (rc < 0) {
		if (a->store)
			a->err = a->store->err;
		else
			htr_err__set(&a->err, rc, "%s", htr_errstr(rc));
		return rc;
	}
	return open_over(a, &o);
}

int htr_analysis_open_store(struct htr_analysis **out, struct htr_store *store,
			    const struct htr_analysis_opts *opts)
{
	struct htr_analysis_opts o;
	struct htr_analysis *a;
	int rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return HTR_ERR_NOMEM;
	*out = a;
	rc = read_opts(a, &o, opts);
	if (rc < 0)
		return rc;
	if (!store || !store->file)
		return htr_err__set(&a->err, HTR_ERR_INVALID, "no open store");
	a->store = store;
	return open_over(a, &o);
}

void htr_analysis_close(struct htr_analysis *a)
{
	uint64_t i;

	if (!a)
		return;
	htr_sym__free(a);
	if (a->store)
		htr_sidecar__close(a);
	if (a->mem_chunk)
		for (i = 0; i < a->nchunks; i++)
			free(a->mem_chunk[i]);
	free(a->mem_chunk);
	free(a->chunk);
	free(a->chunk_len);
	free(a->chunk_ok);
	if (a->own_store)
		htr_store_close(a->store);
	free(a);
}

const char *htr_analysis_last_error(const struct htr_analysis *a)
{
	return a ? a->err.msg : "";
}

unsigned htr_analysis_flags(const struct htr_analysis *a)
{
	return a ? a->flags : 0;
}

const char *htr_analysis_note(const struct htr_analysis *a)
{
	return a ? a->note : "";
}

const char *htr_analysis_sidecar(const struct htr_analysis *a)
{
	return a && a->sidecar ? a->sidecar : "";
}

static int usable(struct htr_analysis *a, unsigned what)
{
	if (!a)
		return HTR_ERR_INVALID;
	if (!a->file || (!a->txn && !a->mem_chunk) || !(a->want & what))
		return htr_err__set(&a->err, HTR_ERR_INVALID, "the %s analyzer "
				    "is not open", what == HTR_ANALYZE_TSC ?
				    "tsc" : "symbol");
	return 0;
}

int htr_tsc_get(struct htr_analysis *a, uint32_t block, uint64_t *total,
		uint64_t *children, uint64_t *local)
{
	uint64_t t, l;
	int rc = usable(a, HTR_ANALYZE_TSC);

	if (rc < 0)
		return rc;
	rc = htr_tsc__get(a, block, &t, &l);
	if (rc < 0)
		return rc;
	if (l > t)
		return htr_err__set(&a->err, HTR_ERR_CORRUPT, "%s: block %u: "
				    "local ticks exceed the total",
				    a->sidecar, block);
	if (total)
		*total = t;
	if (children)
		*children = t - l;
	if (local)
		*local = l;
	return 0;
}

int htr_block_name(struct htr_analysis *a, uint32_t block, const char **name)
{
	struct htr_block_info b;
	uint32_t func, id;
	int rc = usable(a, HTR_ANALYZE_SYMS);

	if (rc < 0)
		return rc;
	if (!name)
		return htr_err__set(&a->err, HTR_ERR_INVALID, "name is NULL");
	rc = htr_block_get(a->file, block, &b, sizeof(b));
	if (rc == HTR_ERR_RANGE)
		return htr_err__set(&a->err, HTR_ERR_RANGE, "block %u: no such "
				    "block", block);
	if (rc < 0)
		return htr_err__set(&a->err, rc, "block %u: %s", block,
				    htr_errstr(rc));
	func = b.func;
	id = func < a->nfuncs ? a->func_name[func] : a->func_name[a->nfuncs];
	if (id >= a->nnames)
		return htr_err__set(&a->err, HTR_ERR_CORRUPT, "block %u: its "
				    "function has no name in the index", block);
	*name = a->names[id].name;
	return 0;
}

static int matches(const struct htr_an_name *n, const char *pattern, int mode)
{
	if (!pattern)
		return 1;
	if (mode == HTR_MATCH_GLOB)
		return fnmatch(pattern, n->name, 0) == 0;
	return strcmp(pattern, n->name) == 0;
}

/* The names to look at: all for globs, a binary search for exact names. */
static void name_range(struct htr_analysis *a, const char *pattern, int mode,
		       size_t *lo, size_t *hi)
{
	uint8_t kb[HTR_SYM_KEYMAX + 32];
	size_t kl, l = 0, h = a->nnames;

	*lo = 0;
	*hi = a->nnames;
	if (!pattern || mode != HTR_MATCH_EXACT)
		return;
	kl = htr_sym__key(pattern, kb);
	while (l < h) {
		size_t m = l + (h - l) / 2;
		const struct htr_an_name *n = &a->names[m];
		int c = memcmp(n->key, kb, n->key_len < kl ? n->key_len : kl);

		if (!c)
			c = n->key_len < kl ? -1 : n->key_len > kl;
		if (c < 0)
			l = m + 1;
		else
			h = m;
	}
	*lo = l;
	*hi = l < a->nnames ? l + 1 : l;
}

int htr_func_visit(struct htr_analysis *a, const char *pattern, int mode,
		   htr_func_fn fn, void *payload)
{
	size_t i, lo, hi;
	uint64_t n = 0;
	int rc = usable(a, HTR_ANALYZE_SYMS);

	if (rc < 0)
		return rc;
	if (!fn || (mode != HTR_MATCH_EXACT && mode != HTR_MATCH_GLOB))
		return htr_err__set(&a->err, HTR_ERR_INVALID, "bad arguments");
	name_range(a, pattern, mode, &lo, &hi);
	for (i = lo; i < hi; i++) {
		const struct htr_an_name *nm = &a->names[i];
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

struct find {
	htr_sym_fn fn;
	void *payload;
	const char *name;
};

static int find_piece(const uint32_t *b, size_t nb, void *p)
{
	struct find *fd = p;
	size_t i;
	int rc;

	for (i = 0; i < nb; i++) {
		rc = fd->fn(fd->name, b[i], fd->payload);
		if (rc)
			return htr_err__callback(rc);
	}
	return 0;
}

int htr_symidx_find(struct htr_analysis *a, const char *pattern, int mode,
		    htr_sym_fn fn, void *payload)
{
	struct find fd;
	size_t i, lo, hi;
	int matched = 0;
	int rc = usable(a, HTR_ANALYZE_SYMS);

	if (rc < 0)
		return rc;
	if (!pattern || !fn ||
	    (mode != HTR_MATCH_EXACT && mode != HTR_MATCH_GLOB))
		return htr_err__set(&a->err, HTR_ERR_INVALID, "bad arguments");
	fd.fn = fn;
	fd.payload = payload;
	name_range(a, pattern, mode, &lo, &hi);
	for (i = lo; i < hi; i++) {
		const struct htr_an_name *nm = &a->names[i];

		if (!matches(nm, pattern, mode))
			continue;
		matched = 1;
		fd.name = nm->name;
		if (a->sym_heap)
			rc = find_piece(nm->blocks, (size_t) nm->st.nblocks,
					&fd);
		else
			rc = htr_sidecar__blocks(a, nm, find_piece, &fd);
		if (rc)
			return rc;
	}
	if (!matched)
		return htr_err__set(&a->err, HTR_ERR_NOTFOUND, "no function "
				    "matches '%s'", pattern);
	return 0;
}
