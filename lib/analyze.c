/*
 * Readers (include/htr/analyze.h), the registry and GetOrCreate
 * (include/htr/analyzer.h): a reader holds the results it asked for,
 * decoded from the sidecar (lib/results.c) or computed in memory when the
 * sidecar cannot be used.  Analyzers are known only by their descriptors.
 */
#include "analyze.h"
#include "abi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANALYSIS_OPTS_SIZE0 HTR_ABI_SIZE0(struct htr_analysis_opts, no_sidecar)
#define ANALYZER_SIZE0 HTR_ABI_SIZE0(struct htr_analyzer, payload)

void htr_analysis_opts_init_size(struct htr_analysis_opts *opts, size_t size)
{
	htr_abi__init(opts, size);
}

void htr_analyzer_init_size(struct htr_analyzer *d, size_t size)
{
	htr_abi__init(d, size);
}

/* --- the registry --- */

unsigned htr_store__count(struct htr_store *st)
{
	unsigned n;

	pthread_mutex_lock(&st->lock);
	n = st->nreg;
	pthread_mutex_unlock(&st->lock);
	return n;
}

int htr_store__find(struct htr_store *st, const char *name)
{
	unsigned i, n = htr_store__count(st);

	for (i = 0; i < n; i++)
		if (!strcmp(st->reg[i].name, name))
			return (int) i;
	return -1;
}

static int name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (!n || n > HTR_ANALYZER_NAME_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
			return 0;
	return 1;
}

int htr_store_register(struct htr_store *st, const struct htr_analyzer *d)
{
	struct htr_analyzer c;
	unsigned i;
	int rc = 0;

	if (!st || !d || !st->lock_ok)
		return HTR_ERR_INVALID;
	if (htr_abi__in(&c, sizeof(c), d, htr_abi__size_of(d),
			ANALYZER_SIZE0) < 0)
		return HTR_ERR_INVALID;
	if (!c.name || !name_ok(c.name) || !c.compute || !c.encode ||
	    !c.decode || !c.free)
		return HTR_ERR_INVALID;
	pthread_mutex_lock(&st->lock);
	for (i = 0; i < st->nreg; i++)
		if (!strcmp(st->reg[i].name, c.name))
			rc = HTR_ERR_INVALID;
	if (!rc && st->nreg == HTR_AN_MAX)
		rc = HTR_ERR_INVALID;
	if (!rc)
		st->reg[st->nreg++] = c;
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int htr_store__builtins(struct htr_store *st)
{
	struct htr_analyzer d;
	int rc;

	htr_tsc__descriptor(&d);
	rc = htr_store_register(st, &d);
	if (rc == 0) {
		htr_sym__descriptor(&d);
		rc = htr_store_register(st, &d);
	}
	return rc;
}

/* --- what callbacks call (the LMDB side is in results.c) --- */

const struct htr_file *htr_analyzer_file(const struct htr_analyzer_ctx *ctx)
{
	return ctx ? ctx->store->file : NULL;
}

const char *htr_analyzer_sidecar(const struct htr_analyzer_ctx *ctx)
{
	if (!ctx)
		return "";
	return ctx->store->env ? ctx->store->sidecar : "memory";
}

int htr_analyzer_fail(struct htr_analyzer_ctx *ctx, int code,
		      const char *fmt, ...)
{
	va_list ap;

	if (!ctx || !fmt)
		return code;
	ctx->a->err.code = code;
	va_start(ap, fmt);
	vsnprintf(ctx->a->err.msg, sizeof(ctx->a->err.msg), fmt, ap);
	va_end(ap);
	return code;
}

int htr_analyzer_dep(struct htr_analyzer_ctx *ctx, const char *name,
		     const void **result)
{
	const struct htr_analyzer *d;
	size_t i;
	int j;

	if (!ctx || !name || !result)
		return HTR_ERR_INVALID;
	if (ctx->mode != HTR_CTX_COMPUTE || !ctx->deps)
		return htr_err__set(&ctx->a->err, HTR_ERR_INVALID, "a "
				    "dependency read outside compute()");
	d = &ctx->store->reg[ctx->idx];
	for (i = 0; d->deps && d->deps[i]; i++)
		if (!strcmp(d->deps[i], name))
			break;
	j = htr_store__find(ctx->store, name);
	if (!d->deps || !d->deps[i] || j < 0 || !ctx->deps[j])
		return htr_err__set(&ctx->a->err, HTR_ERR_NOTFOUND, "analyzer "
				    "%s: %s is not one of its dependencies",
				    d->name, name);
	*result = ctx->deps[j];
	return 0;
}

/* --- readers --- */

void *htr_analysis__result(const struct htr_analysis *a, const char *name)
{
	unsigned i;

	if (!a || !a->store)
		return NULL;
	for (i = 0; i < a->nres; i++)
		if (!strcmp(a->store->reg[a->res[i].idx].name, name))
			return a->res[i].result;
	return NULL;
}

static struct htr_an_result *held(struct htr_analysis *a, unsigned idx)
{
	unsigned i;

	for (i = 0; i < a->nres; i++)
		if (a->res[i].idx == idx)
			return &a->res[i];
	return NULL;
}

void htr_analysis__partial(struct htr_analyzer_ctx *ctx, const char *msg)
{
	struct htr_analysis *a = ctx->a;

	a->flags |= HTR_ANALYSIS_SYMS_PARTIAL;
	if (!a->note[0])
		snprintf(a->note, sizeof(a->note), "%s", msg);
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
		deps[j] = held(a, (unsigned) j)->result;
	}
	if (a->nres == HTR_AN_MAX)
		return htr_err__set(&a->err, HTR_ERR_LIMIT, "too many "
				    "analyzers on one handle");
	r = &a->res[a->nres];
	r->idx = idx;
	r->result = NULL;
	r->ctx = calloc(1, sizeof(*r->ctx));
	if (!r->ctx)
		return htr_err__set(&a->err, HTR_ERR_NOMEM, "out of memory");
	r->ctx->a = a;
	r->ctx->store = st;
	r->ctx->idx = idx;
	r->ctx->mode = HTR_CTX_COMPUTE;
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
	if (!st->env) {
		if (!a->note[0])
			snprintf(a->note, sizeof(a->note), "%s", st->note);
		goto memory;
	}
	rc = htr_sidecar__read(a, idx, m);
	if (rc < 0)
		return rc;
	if (rc > 0)
		goto reloaded;
	if (st->readonly) {
		snprintf(a->note, sizeof(a->note), "%s: read-only and out of "
			 "date", st->sidecar);
		goto memory;
	}
	rc = htr_sidecar__ensure(a, idx, m);
	if (rc < 0)
		return rc;
	if (rc == 1)
		goto memory;
	rc = htr_sidecar__read(a, idx, m);
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
		if (!store->env || store->readonly)
			return 0;
		tmp = calloc(1, sizeof(*tmp));
		if (!tmp)
			return HTR_ERR_NOMEM;
		tmp->store = store;
		tmp->file = store->file;
		rc = htr_sidecar__ensure(tmp, &u, 1);
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

void htr_an__free_result(struct htr_store *st, struct htr_an_result *r)
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
		htr_an__free_result(a->store, &a->res[i]);
	a->nres = 0;
	if (a->store)
		htr_sidecar__close(a);
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
