/*
 * Readers (include/htr/analyze.h) and GetOrCreate (htr_store_get(),
 * include/htr/store.h): a reader holds the results it asked for, decoded
 * from the sidecar (lib/records.c) or computed in memory when the sidecar
 * cannot be used.  Analyzers are known only by their descriptors.  The
 * top of the store and analyzers (file map: lib/env.h); htr_store_get()
 * is here and not in store.c because it works through a reader.
 */
#include "analyzer_int.h"
#include "abi.h"
#include "records.h"
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANALYSIS_OPTS_SIZE0 HTR_ABI_SIZE0(struct htr_analysis_opts, no_sidecar)

void htr_analysis_opts_init_size(struct htr_analysis_opts *opts, size_t size)
{
	htr_abi__init(opts, size);
}

static struct htr_an_result *held(struct htr_analysis *a, unsigned idx)
{
	unsigned i;

	for (i = 0; i < a->nres; i++)
		if (a->res[i].idx == idx)
			return &a->res[i];
	return NULL;
}

/* Compute @idx (its dependencies first) in memory into @a. */
static int compute_mem(struct htr_analysis *a, unsigned idx, unsigned depth)
{
	struct htr_store *st = a->store;
	const struct htr_analyzer *d = &st->reg[idx];
	const void *deps[HTR_AN_MAX];
	struct htr_an_result *r;
	size_t i;
	int rc;

	if (held(a, idx))
		return 0;
	if (depth > HTR_AN_MAX)
		return htr_err__set(&a->err, HTR_ERR_NOTFOUND, "analyzer %s: "
				    "its dependencies form a cycle", d->name);
	memset(deps, 0, sizeof(deps));
	for (i = 0; d->deps && d->deps[i]; i++) {
		int j = htr_store__find(st, d->deps[i]);

		if (j < 0)
			return htr_err__set(&a->err, HTR_ERR_NOTFOUND,
					    "analyzer %s needs %s, which is "
					    "not registered", d->name,
					    d->deps[i]);
		rc = compute_mem(a, (unsigned) j, depth + 1);
		if (rc < 0)
			return rc;
		/* by place in d->deps (analyzer.c) */
		deps[i] = held(a, (unsigned) j)->result;
	}
	if (a->nres == HTR_AN_MAX)
		return htr_err__set(&a->err, HTR_ERR_LIMIT, "too many "
				    "analyzers on one handle");
	r = &a->res[a->nres];
	r->idx = idx;
	r->result = NULL;
	r->ctx = malloc(sizeof(*r->ctx));
	if (!r->ctx)
		return htr_err__set(&a->err, HTR_ERR_NOMEM, "out of memory");
	htr_analyzer__ctx_init(r->ctx, a, idx, HTR_CTX_COMPUTE, NULL);
	r->ctx->deps = deps;
	rc = d->compute(r->ctx, &r->result, d->payload);
	r->ctx->deps = NULL;
	if (rc) {
		d->free(r->result, d->payload);
		free(r->ctx);
		r->ctx = NULL;
		if (rc > 0)
			rc = htr_err__set(&a->err, HTR_ERR_CALLBACK, "analyzer "
					  "%s returned %d", d->name, rc);
		return rc;
	}
	a->nres++;
	return 0;
}

/* Make @a hold analyzers @want[0..n): reload, or compute (and store)
 * once, or compute in memory when the sidecar cannot be used. */
static int get_many(struct htr_analysis *a, const unsigned *want, unsigned n)
{
	struct htr_store *st = a->store;
	unsigned idx[HTR_AN_MAX], m = 0, i;
	int rc;

	for (i = 0; i < n && m < HTR_AN_MAX; i++)
		if (!held(a, want[i]))
			idx[m++] = want[i];
	if (!m)
		return 0;
	if (!st->env.mdb) {
		if (!a->note[0])
			snprintf(a->note, sizeof(a->note), "%s", st->note);
		goto memory;
	}
	rc = htr_records__read(a, idx, m);
	if (rc < 0)
		return rc;
	if (rc > 0)
		goto reloaded;
	if (st->env.readonly) {
		snprintf(a->note, sizeof(a->note), "%s: read-only and out of "
			 "date", st->sidecar);
		goto memory;
	}
	rc = htr_records__ensure(a, idx, m);
	if (rc < 0)
		return rc;
	if (rc == 1)
		goto memory;
	rc = htr_records__read(a, idx, m);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return htr_err__set(&a->err, HTR_ERR_IO, "%s: results vanished "
				    "after they were stored (another process "
				    "rebuilt it?)", st->sidecar);
reloaded:
	if (!(a->flags & HTR_ANALYSIS_COMPUTED))
		a->flags |= HTR_ANALYSIS_RELOADED;
	return 0;
memory:
	a->flags |= HTR_ANALYSIS_IN_MEMORY | HTR_ANALYSIS_COMPUTED;
	a->flags &= ~HTR_ANALYSIS_RELOADED;
	for (i = 0; i < m; i++) {
		rc = compute_mem(a, idx[i], 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Open @a over a->store, the options already read. */
static int open_over(struct htr_analysis *a, const struct htr_analysis_opts *o)
{
	unsigned want = o->analyzers ? o->analyzers & HTR_ANALYZE_ALL :
				       HTR_ANALYZE_ALL;
	unsigned idx[2], n = 0;
	int rc;

	a->file = a->store->file;
	/* The symbol analyzer needs the TSC one, and its queries too. */
	if (want & (HTR_ANALYZE_TSC | HTR_ANALYZE_SYMS))
		idx[n++] = (unsigned) htr_store__find(a->store, "tsc");
	if (want & HTR_ANALYZE_SYMS)
		idx[n++] = (unsigned) htr_store__find(a->store, "sym");
	rc = get_many(a, idx, n);
	if (rc < 0)
		return rc;
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

/* A handle in *out, even when the options are refused: its error says
 * why (the caller closes it). */
static int new_analysis(struct htr_analysis **out,
			struct htr_analysis_opts *o,
			const struct htr_analysis_opts *opts)
{
	if (!out)
		return HTR_ERR_INVALID;
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return HTR_ERR_NOMEM;
	return read_opts(*out, o, opts);
}

int htr_analysis_open(struct htr_analysis **out, const struct htr_file *file,
		      const struct htr_analysis_opts *opts)
{
	struct htr_analysis_opts o;
	struct htr_store_opts so;
	struct htr_file_info fi;
	struct htr_analysis *a;
	int rc;

	rc = new_analysis(out, &o, opts);
	if (rc < 0)
		return rc;
	a = *out;
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
	rc = open_over(a, &o);
	if (rc < 0 && a->store->created)
		a->store->discard = true;
	return rc;
}

int htr_analysis_open_store(struct htr_analysis **out, struct htr_store *store,
			    const struct htr_analysis_opts *opts)
{
	struct htr_analysis_opts o;
	struct htr_analysis *a;
	int rc;

	rc = new_analysis(out, &o, opts);
	if (rc < 0)
		return rc;
	a = *out;
	if (!store || !store->file || !store->nreg)
		return htr_err__set(&a->err, HTR_ERR_INVALID, "no open store");
	a->store = store;
	return open_over(a, &o);
}

int htr_store_get(struct htr_store *store, const char *name,
		  struct htr_analysis *reader, const void **result)
{
	struct htr_an_result *r;
	unsigned u;
	int idx, rc;

	if (result)
		*result = NULL;
	if (!store || !store->file || !store->nreg || !name ||
	    (reader && reader->store != store) || (!reader && result) ||
	    (reader && !result))
		return reader ? htr_err__set(&reader->err, HTR_ERR_INVALID,
					     "bad arguments") : HTR_ERR_INVALID;
	idx = htr_store__find(store, name);
	if (idx < 0)
		return reader ? htr_err__set(&reader->err, HTR_ERR_NOTFOUND,
					     "no analyzer '%s'", name) :
				HTR_ERR_NOTFOUND;
	if (!reader) {
		struct htr_analysis *tmp;

		u = (unsigned) idx;
		if (!store->env.mdb || store->env.readonly)
			return 0;
		tmp = calloc(1, sizeof(*tmp));
		if (!tmp)
			return HTR_ERR_NOMEM;
		tmp->store = store;
		tmp->file = store->file;
		rc = htr_records__ensure(tmp, &u, 1);
		free(tmp);
		return rc < 0 ? rc : 0;
	}
	u = (unsigned) idx;
	rc = get_many(reader, &u, 1);
	if (rc < 0)
		return rc;
	r = held(reader, (unsigned) idx);
	if (!r)
		return htr_err__set(&reader->err, HTR_ERR_LIMIT, "too many "
				    "analyzers on one handle");
	*result = r->result;
	return 0;
}

struct htr_store *htr_analysis_store(const struct htr_analysis *a)
{
	return a ? a->store : NULL;
}

static void free_result(struct htr_store *st, struct htr_an_result *r)
{
	st->reg[r->idx].free(r->result, st->reg[r->idx].payload);
	free(r->ctx);
	r->result = NULL;
	r->ctx = NULL;
}

void htr_analysis_close(struct htr_analysis *a)
{
	unsigned i;

	if (!a)
		return;
	/* Results first: they may point into the read transactions. */
	for (i = a->nres; i-- > 0; )
		free_result(a->store, &a->res[i]);
	a->nres = 0;
	if (a->store)
		htr_records__close(a);
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
	return a && a->store && a->store->sidecar ? a->store->sidecar : "";
}
