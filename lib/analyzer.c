/*
 * What descriptors' callbacks call (include/htr/analyzer.h): the file,
 * their dependencies, the values they store and read in the sidecar, and
 * their messages.  Below the store and the records: nothing here calls
 * them (lib/env.h has the file map).
 */
#include "analyzer_int.h"
#include "abi.h"
#include "env.h"
#include "store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void htr_analyzer_init_size(struct htr_analyzer *d, size_t size)
{
	htr_abi__init(d, size);
}

void htr_analyzer__ctx_init(struct htr_analyzer_ctx *c, struct htr_analysis *a,
			    unsigned idx, enum htr_ctx_mode mode, MDB_txn *txn)
{
	memset(c, 0, sizeof(*c));
	c->a = a;
	c->store = a->store;
	c->idx = idx;
	c->mode = mode;
	c->txn = txn;
}

size_t htr_analyzer__key(const struct htr_analyzer_ctx *ctx, const void *key,
			 size_t klen, uint8_t *buf)
{
	const char *name = ctx->store->reg[ctx->idx].name;
	size_t nl = strlen(name);

	memcpy(buf, name, nl + 1);
	if (klen)
		memcpy(buf + nl + 1, key, klen);
	return nl + 1 + klen;
}

void *htr_analyzer__result(const struct htr_analysis *a, const char *name)
{
	unsigned i;

	if (!a || !a->store)
		return NULL;
	/* Per block in a dump: the built-ins' callers pass the very string
	 * their descriptor registered, so the pointers match first. */
	for (i = 0; i < a->nres; i++)
		if (a->store->reg[a->res[i].idx].name == name)
			return a->res[i].result;
	for (i = 0; i < a->nres; i++)
		if (!strcmp(a->store->reg[a->res[i].idx].name, name))
			return a->res[i].result;
	return NULL;
}

void htr_analyzer__partial(struct htr_analyzer_ctx *ctx, const char *msg)
{
	struct htr_analysis *a = ctx->a;

	a->flags |= HTR_ANALYSIS_SYMS_PARTIAL;
	if (!a->note[0])
		snprintf(a->note, sizeof(a->note), "%s", msg);
}

const struct htr_file *htr_analyzer_file(const struct htr_analyzer_ctx *ctx)
{
	return ctx ? ctx->store->file : NULL;
}

const char *htr_analyzer_sidecar(const struct htr_analyzer_ctx *ctx)
{
	if (!ctx)
		return "";
	return ctx->store->env.mdb ? ctx->store->sidecar : "memory";
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

/* By the descriptor's own list: whoever computes fills ctx->deps in its
 * order, so no registry lookup is needed here. */
int htr_analyzer_dep(struct htr_analyzer_ctx *ctx, const char *name,
		     const void **result)
{
	const struct htr_analyzer *d;
	size_t i;

	if (!ctx || !name || !result)
		return HTR_ERR_INVALID;
	if (ctx->mode != HTR_CTX_COMPUTE || !ctx->deps)
		return htr_err__set(&ctx->a->err, HTR_ERR_INVALID, "a "
				    "dependency read outside compute()");
	d = &ctx->store->reg[ctx->idx];
	for (i = 0; d->deps && d->deps[i]; i++)
		if (!strcmp(d->deps[i], name))
			break;
	if (!d->deps || !d->deps[i] || !ctx->deps[i])
		return htr_err__set(&ctx->a->err, HTR_ERR_NOTFOUND, "analyzer "
				    "%s: %s is not one of its dependencies",
				    d->name, name);
	*result = ctx->deps[i];
	return 0;
}

int htr_analyzer_storing(const struct htr_analyzer_ctx *ctx)
{
	return ctx && ctx->txn && (ctx->mode == HTR_CTX_COMPUTE ||
				   ctx->mode == HTR_CTX_ENCODE);
}

/* LMDB's default key order: bytes, then length. */
static int full_key_cmp(const uint8_t *a, size_t na, const uint8_t *b,
			size_t nb)
{
	int c = memcmp(a, b, na < nb ? na : nb);

	if (c)
		return c;
	return na < nb ? -1 : na > nb;
}

int htr_analyzer_put(struct htr_analyzer_ctx *ctx, const void *key,
		     size_t klen, const void *val, size_t vlen)
{
	uint8_t kb[HTR_ANALYZER__FULL_KEY_MAX];
	struct htr_env *e;
	MDB_val k, v;
	int mrc = MDB_KEYEXIST;

	if (!ctx || !key || !klen || klen > HTR_ANALYZER_KEY_MAX ||
	    (!val && vlen))
		return HTR_ERR_INVALID;
	if (!htr_analyzer_storing(ctx))
		return htr_err__set(&ctx->a->err, HTR_ERR_INVALID, "analyzer "
				    "%s: a value stored outside encode() and "
				    "a storing compute()",
				    ctx->store->reg[ctx->idx].name);
	e = &ctx->store->env;
	k.mv_data = kb;
	k.mv_size = htr_analyzer__key(ctx, key, klen, kb);
	v.mv_data = (void *) val;
	v.mv_size = vlen;
	/* Keys in increasing order go to the end of the database without a
	 * search and fill its pages; LMDB refuses (MDB_KEYEXIST, nothing
	 * changed) when a greater key is stored already: then plain puts. */
	if (!ctx->no_append && (!ctx->last_len ||
	    full_key_cmp(ctx->last, ctx->last_len, kb, k.mv_size) < 0)) {
		mrc = mdb_put(ctx->txn, e->dbi[HTR_DB_VALS], &k, &v,
			      MDB_APPEND);
		if (mrc == MDB_KEYEXIST)
			ctx->no_append = true;
	}
	if (mrc == MDB_KEYEXIST) {
		ctx->no_append = true;
		mrc = mdb_put(ctx->txn, e->dbi[HTR_DB_VALS], &k, &v, 0);
	}
	if (!mrc && !ctx->no_append) {
		memcpy(ctx->last, kb, k.mv_size);
		ctx->last_len = k.mv_size;
	}
	ctx->batch += k.mv_size + vlen;
	if (!mrc && ctx->batch >= HTR_AN_BATCH) {
		/* The caller (records.c) holds the computing lock, so nobody
		 * reads or writes these values before the last batch. */
		ctx->batch = 0;
		mrc = htr_env__next(e, ctx->txn, &ctx->txn);
	}
	if (mrc) {
		ctx->mrc = mrc;
		return htr_env__fail(e, &ctx->a->err, mrc, "storing results");
	}
	return 0;
}

int htr_analyzer_value(struct htr_analyzer_ctx *ctx, const void *key,
		       size_t klen, const void **val, size_t *vlen)
{
	uint8_t kb[HTR_ANALYZER__FULL_KEY_MAX];
	MDB_val k, v;
	int mrc;

	if (!ctx || !key || !klen || klen > HTR_ANALYZER_KEY_MAX || !val ||
	    !vlen)
		return HTR_ERR_INVALID;
	if (ctx->mode != HTR_CTX_DECODE || !ctx->txn)
		return htr_err__set(&ctx->a->err, HTR_ERR_INVALID, "analyzer "
				    "%s: a value read outside decode()",
				    ctx->store->reg[ctx->idx].name);
	k.mv_data = kb;
	k.mv_size = htr_analyzer__key(ctx, key, klen, kb);
	mrc = mdb_get(ctx->txn, ctx->store->env.dbi[HTR_DB_VALS], &k, &v);
	if (mrc == MDB_NOTFOUND)
		return HTR_ERR_NOTFOUND;
	if (mrc)
		return htr_env__fail(&ctx->store->env, &ctx->a->err, mrc,
				     "reading results");
	*val = v.mv_data;
	*vlen = v.mv_size;
	return 0;
}

int htr_analyzer_scan(struct htr_analyzer_ctx *ctx, const void *prefix,
		      size_t plen, htr_analyzer_scan_fn fn, void *payload)
{
	uint8_t kb[HTR_ANALYZER__FULL_KEY_MAX];
	MDB_cursor *cur = NULL;
	MDB_val k, v;
	size_t fl, nl;
	int mrc, rc = 0;

	if (!ctx || !fn || (!prefix && plen) || plen > HTR_ANALYZER_KEY_MAX)
		return HTR_ERR_INVALID;
	if (ctx->mode != HTR_CTX_DECODE || !ctx->txn)
		return htr_err__set(&ctx->a->err, HTR_ERR_INVALID, "analyzer "
				    "%s: values scanned outside decode()",
				    ctx->store->reg[ctx->idx].name);
	fl = htr_analyzer__key(ctx, prefix, plen, kb);
	nl = fl - plen;
	mrc = mdb_cursor_open(ctx->txn, ctx->store->env.dbi[HTR_DB_VALS], &cur);
	if (mrc)
		return htr_env__fail(&ctx->store->env, &ctx->a->err, mrc,
				     "reading results");
	k.mv_data = kb;
	k.mv_size = fl;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); !mrc;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size < fl || memcmp(k.mv_data, kb, fl))
			break;
		rc = fn((const uint8_t *) k.mv_data + nl, k.mv_size - nl,
			v.mv_data, v.mv_size, payload);
		if (rc)
			break;
	}
	mdb_cursor_close(cur);
	if (rc)
		return htr_err__callback(rc);
	if (mrc && mrc != MDB_NOTFOUND)
		return htr_env__fail(&ctx->store->env, &ctx->a->err, mrc,
				     "reading results");
	return 0;
}
