/*
 * Analyzer results in the sidecar, keyed by analyzer name (layout in
 * FORMAT.md, "Sidecar"): the identity of the .htr, per analyzer a record
 * (version, generation, a stamp of its dependencies' records) and a
 * counter in "meta", its values under "NAME\0KEY" in "values".
 *
 * Reading: a read transaction checks the identity and every wanted
 * analyzer (and, recursively, its dependencies); if all are current the
 * reader keeps that transaction and decodes through it.  Otherwise a write
 * transaction (one writer at a time across processes, one computing
 * thread per process) re-checks, drops what is stale, computes what is
 * missing (dependencies first), encodes, commits.  A second process
 * waiting for the write lock finds the work done when it re-checks.
 *
 * Above the store (which it asks for the registry) and below the reader
 * handles (lib/analysis.c); the file map is in lib/env.h.
 */
#include "records.h"
#include "analyzer_int.h"
#include "env.h"
#include "le.h"
#include "store_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_MAGIC "HTRSIDE1"
#define ID_LAYOUT 2u      /* 2: records keyed by analyzer name */
#define ID_SIZE 72u
#define REC_SIZE 24u

/* An LMDB failure as an htr error on @a with the sidecar's name. */
static int mdb_fail(struct htr_analysis *a, int mrc, const char *what)
{
	return htr_env__fail(&a->store->env, &a->err, mrc, what);
}

static int meta_get(MDB_txn *txn, MDB_dbi dbi, const char *key, MDB_val *v)
{
	MDB_val k;

	k.mv_data = (void *) key;
	k.mv_size = strlen(key);
	return mdb_get(txn, dbi, &k, v);
}

static int meta_put(MDB_txn *txn, MDB_dbi dbi, const char *key,
		    const void *data, size_t len)
{
	MDB_val k, v;

	k.mv_data = (void *) key;
	k.mv_size = strlen(key);
	v.mv_data = (void *) data;
	v.mv_size = len;
	return mdb_put(txn, dbi, &k, &v, 0);
}

static void identity(const struct htr_file *f, uint8_t *p)
{
	struct htr_file_info fi, *h = &fi;

	memset(&fi, 0, sizeof(fi));
	htr_file_info(f, &fi, sizeof(fi));
	memset(p, 0, ID_SIZE);
	memcpy(p, ID_MAGIC, 8);
	htr_disk__put_le(p + 8, ID_LAYOUT, 4);
	htr_disk__put_le(p + 16, h->body_hash, 8);
	htr_disk__put_le(p + 24, h->trace_hash, 8);
	htr_disk__put_le(p + 32, h->file_size, 8);
	htr_disk__put_le(p + 40, h->build_time, 8);
	htr_disk__put_le(p + 48, h->nblocks, 8);
	htr_disk__put_le(p + 56, h->ninsns, 8);
	htr_disk__put_le(p + 64, h->image_hash, 8);
}

/* 1 if the stored identity is this file's (and layout's), 0 if not (or
 * absent, or of the wrong size), negative on LMDB errors. */
static int identity_ok(struct htr_analysis *a, MDB_txn *txn)
{
	uint8_t want[ID_SIZE];
	MDB_val v;
	int mrc;

	mrc = meta_get(txn, a->store->env.dbi[HTR_DB_META], "identity", &v);
	if (mrc == MDB_NOTFOUND)
		return 0;
	if (mrc)
		return mdb_fail(a, mrc, "reading the identity");
	identity(a->file, want);
	return v.mv_size == ID_SIZE && !memcmp(v.mv_data, want, ID_SIZE);
}

static void rec_key(const struct htr_analyzer *d, char *k, size_t size)
{
	snprintf(k, size, "a.%s", d->name);
}

static int find_dep(struct htr_analysis *a, unsigned idx, const char *dep,
		    unsigned *j)
{
	int i = htr_store__find(a->store, dep);

	if (i < 0)
		return htr_err__set(&a->err, HTR_ERR_NOTFOUND, "analyzer %s "
				    "needs %s, which is not registered",
				    a->store->reg[idx].name, dep);
	*j = (unsigned) i;
	return 0;
}

static int current(struct htr_analysis *a, MDB_txn *txn, unsigned idx,
		   unsigned depth);

/* The stamp of @idx's dependencies' records into *@stamp: 1, or 0 when
 * one is not current, or negative. */
static int deps_stamp(struct htr_analysis *a, MDB_txn *txn, unsigned idx,
		      unsigned depth, uint64_t *stamp)
{
	const struct htr_analyzer *d = &a->store->reg[idx];
	uint64_t h = HTR_HASH_SEED;
	size_t i;

	for (i = 0; d->deps && d->deps[i]; i++) {
		char k[HTR_ANALYZER_NAME_MAX + 8];
		unsigned j = 0;
		MDB_val v;
		int rc, mrc;

		rc = find_dep(a, idx, d->deps[i], &j);
		if (rc < 0)
			return rc;
		rc = current(a, txn, j, depth + 1);
		if (rc <= 0)
			return rc;
		rec_key(&a->store->reg[j], k, sizeof(k));
		mrc = meta_get(txn, a->store->env.dbi[HTR_DB_META], k, &v);
		if (mrc)
			return mdb_fail(a, mrc, "reading a record");
		h = htr_hash__bytes(h, d->deps[i], strlen(d->deps[i]) + 1);
		h = htr_hash__bytes(h, v.mv_data, 16);
	}
	*stamp = h;
	return 1;
}

/* 1 if @idx's stored values are current, 0 if not, negative on errors. */
static int current(struct htr_analysis *a, MDB_txn *txn, unsigned idx,
		   unsigned depth)
{
	const struct htr_analyzer *d = &a->store->reg[idx];
	struct htr_analyzer_ctx ctx;
	char k[HTR_ANALYZER_NAME_MAX + 8];
	const uint8_t *p;
	uint64_t stamp;
	MDB_val v;
	int mrc, rc;

	if (depth > HTR_AN_MAX)
		return htr_err__set(&a->err, HTR_ERR_NOTFOUND, "analyzer %s: "
				    "its dependencies form a cycle", d->name);
	rec_key(d, k, sizeof(k));
	mrc = meta_get(txn, a->store->env.dbi[HTR_DB_META], k, &v);
	if (mrc == MDB_NOTFOUND)
		return 0;
	if (mrc)
		return mdb_fail(a, mrc, "reading a record");
	p = v.mv_data;
	if (v.mv_size != REC_SIZE || htr_disk__get_le(p, 4) != d->version)
		return 0;
	rc = deps_stamp(a, txn, idx, depth, &stamp);
	if (rc <= 0)
		return rc;
	if (htr_disk__get_le(p + 16, 8) != stamp)
		return 0;
	if (!d->current)
		return 1;
	memset(&ctx, 0, sizeof(ctx));
	ctx.a = a;
	ctx.store = a->store;
	ctx.idx = idx;
	ctx.mode = HTR_CTX_DECODE;
	ctx.txn = txn;
	rc = d->current(&ctx, d->payload);
	return rc < 0 ? rc : rc > 0;
}

static int bump_counter(MDB_txn *txn, MDB_dbi dbi, const char *key,
			uint64_t *gen)
{
	uint8_t buf[8];
	uint64_t n = 0;
	MDB_val v;
	int mrc;

	mrc = meta_get(txn, dbi, key, &v);
	if (mrc == 0 && v.mv_size == 8)
		n = htr_disk__get_le(v.mv_data, 8);
	else if (mrc && mrc != MDB_NOTFOUND)
		return mrc;
	htr_disk__put_le(buf, n + 1, 8);
	*gen = n + 1;
	return meta_put(txn, dbi, key, buf, 8);
}

/* Delete every key of @dbi that starts with @prefix. */
static int drop_prefix(MDB_txn *txn, MDB_dbi dbi, const void *prefix,
		       size_t plen)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int mrc;

	mrc = mdb_cursor_open(txn, dbi, &cur);
	if (mrc)
		return mrc;
	for (;;) {
		k.mv_data = (void *) prefix;
		k.mv_size = plen;
		mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
		if (mrc || k.mv_size < plen || memcmp(k.mv_data, prefix, plen))
			break;
		mrc = mdb_cursor_del(cur, 0);
		if (mrc)
			break;
	}
	mdb_cursor_close(cur);
	return mrc == MDB_NOTFOUND ? 0 : mrc;
}

/* Another .htr (or layout, or none): drop every analyzer's results, and
 * the databases of layout 1. */
static int reset(struct htr_analysis *a, MDB_txn *txn)
{
	struct htr_store *st = a->store;
	uint8_t id[ID_SIZE];
	unsigned i;
	int mrc;

	mrc = mdb_drop(txn, st->env.dbi[HTR_DB_VALS], 0);
	if (!mrc)
		mrc = drop_prefix(txn, st->env.dbi[HTR_DB_META], "a.", 2);
	for (i = 0; !mrc && i < HTR_DB_N - HTR_DB_USED; i++) {
		static const char *const old[] = { "tsc", "names", "blocks" };
		MDB_dbi dbi;

		mrc = mdb_dbi_open(txn, old[i], 0, &dbi);
		if (mrc == MDB_NOTFOUND || mrc == MDB_INCOMPATIBLE) {
			mrc = 0;
			continue;
		}
		if (!mrc)
			mrc = mdb_drop(txn, dbi, 1);
	}
	identity(a->file, id);
	if (!mrc)
		mrc = meta_put(txn, st->env.dbi[HTR_DB_META], "identity", id,
			       ID_SIZE);
	return mrc ? mdb_fail(a, mrc, "resetting") : 0;
}

struct update {
	struct htr_analysis *a;
	MDB_txn *txn;
	bool done[HTR_AN_MAX];
	int mrc;                 /* the LMDB code behind a failure */
};

/* Compute, encode and record @idx from u->txn on (its dependencies are
 * current).  The values may take several write txns (htr_analyzer_put()
 * commits in batches, u->txn follows): its record goes first and comes
 * back last, so until then it is not current for anyone, and the
 * computing lock keeps other processes from computing it meanwhile.
 * Dependencies are decoded in a read txn of their own, begun once what
 * came before is committed: values read in a write txn would not survive
 * its commit. */
static int compute_one(struct update *u, unsigned idx)
{
	struct htr_analysis *a = u->a;
	struct htr_store *st = a->store;
	const struct htr_analyzer *d = &st->reg[idx];
	struct htr_analyzer_ctx ctx, *dctx[HTR_AN_MAX];
	const void *deps[HTR_AN_MAX];
	void *dres[HTR_AN_MAX], *res = NULL;
	char k[HTR_ANALYZER_NAME_MAX + 16];
	uint8_t rec[REC_SIZE], prefix[HTR_ANALYZER_NAME_MAX + 1];
	uint64_t gen = 0, stamp = 0;
	MDB_txn *rtxn = NULL;
	MDB_val key;
	unsigned j = 0;
	size_t i;
	int rc = 0, mrc;

	memset(deps, 0, sizeof(deps));
	memset(dres, 0, sizeof(dres));
	memset(dctx, 0, sizeof(dctx));
	htr_analyzer__ctx_init(&ctx, a, idx, HTR_CTX_COMPUTE, u->txn);
	rec_key(d, k, sizeof(k));
	key.mv_data = k;
	key.mv_size = strlen(k);
	mrc = mdb_del(u->txn, st->env.dbi[HTR_DB_META], &key, NULL);
	if (mrc == MDB_NOTFOUND)
		mrc = 0;
	if (!mrc)
		mrc = drop_prefix(u->txn, st->env.dbi[HTR_DB_VALS], prefix,
				  htr_analyzer__key(&ctx, NULL, 0, prefix));
	if (!mrc && d->deps && d->deps[0]) {
		mrc = htr_env__next(&st->env, u->txn, &u->txn);
		if (!mrc) {
			mrc = htr_env__begin(&st->env, MDB_RDONLY, &rtxn);
			if (mrc)
				rtxn = NULL;
		}
		ctx.txn = u->txn;
	}
	if (mrc) {
		u->mrc = mrc;
		return mdb_fail(a, mrc, "dropping old results");
	}
	for (i = 0; d->deps && d->deps[i]; i++) {
		const struct htr_analyzer *dd;

		rc = find_dep(a, idx, d->deps[i], &j);
		if (rc < 0)
			goto out;
		if (!dctx[j]) {
			dd = &st->reg[j];
			dctx[j] = malloc(sizeof(*dctx[j]));
			if (!dctx[j]) {
				rc = htr_err__set(&a->err, HTR_ERR_NOMEM,
						  "out of memory");
				goto out;
			}
			htr_analyzer__ctx_init(dctx[j], a, j, HTR_CTX_DECODE,
					       rtxn);
			rc = dd->decode(dctx[j], &dres[j], dd->payload);
			if (rc)
				goto cb;
		}
		deps[i] = dres[j];      /* by place in d->deps (analyzer.c) */
	}
	ctx.deps = deps;
	rc = d->compute(&ctx, &res, d->payload);
	u->txn = ctx.txn;
	if (rc) {
		u->mrc = ctx.mrc;
		goto cb;
	}
	ctx.mode = HTR_CTX_ENCODE;
	ctx.deps = NULL;
	rc = d->encode(&ctx, res, d->payload);
	u->txn = ctx.txn;
	if (rc) {
		u->mrc = ctx.mrc;
		goto cb;
	}
	if (!u->txn) {
		/* A batch failed to commit and the analyzer went on. */
		u->mrc = ctx.mrc;
		rc = htr_err__set(&a->err, HTR_ERR_IO, "%s: analyzer %s: "
				  "storing results failed", st->sidecar,
				  d->name);
		goto out;
	}
	rc = deps_stamp(a, u->txn, idx, 0, &stamp);
	if (rc == 0)
		rc = htr_err__set(&a->err, HTR_ERR_IO, "%s: a dependency of "
				  "%s changed while it was computed",
				  st->sidecar, d->name);
	if (rc < 0)
		goto out;
	snprintf(k, sizeof(k), "count.%s", d->name);
	mrc = bump_counter(u->txn, st->env.dbi[HTR_DB_META], k, &gen);
	memset(rec, 0, sizeof(rec));
	htr_disk__put_le(rec, d->version, 4);
	htr_disk__put_le(rec + 8, gen, 8);
	htr_disk__put_le(rec + 16, stamp, 8);
	rec_key(d, k, sizeof(k));
	if (!mrc)
		mrc = meta_put(u->txn, st->env.dbi[HTR_DB_META], k, rec,
			       sizeof(rec));
	if (mrc) {
		u->mrc = mrc;
		rc = mdb_fail(a, mrc, "storing results");
		goto out;
	}
	a->flags |= HTR_ANALYSIS_COMPUTED;
	rc = 0;
	goto out;
cb:
	/* A callback's code: libhtr's own or the caller's, never 0 here. */
	if (rc > 0)
		rc = htr_err__set(&a->err, HTR_ERR_CALLBACK, "analyzer %s "
				  "returned %d", d->name, rc);
out:
	d->free(res, d->payload);
	for (j = 0; j < HTR_AN_MAX; j++)
		if (dctx[j]) {
			st->reg[j].free(dres[j], st->reg[j].payload);
			free(dctx[j]);
		}
	if (rtxn) {
		mdb_txn_abort(rtxn);
		htr_env__done(&st->env);
	}
	return rc;
}

static int ensure_one(struct update *u, unsigned idx, unsigned depth)
{
	struct htr_analysis *a = u->a;
	const struct htr_analyzer *d = &a->store->reg[idx];
	unsigned j = 0;
	size_t i;
	int rc;

	if (u->done[idx])
		return 0;
	if (depth > HTR_AN_MAX)
		return htr_err__set(&a->err, HTR_ERR_NOTFOUND, "analyzer %s: "
				    "its dependencies form a cycle", d->name);
	for (i = 0; d->deps && d->deps[i]; i++) {
		rc = find_dep(a, idx, d->deps[i], &j);
		if (rc == 0)
			rc = ensure_one(u, j, depth + 1);
		if (rc < 0)
			return rc;
	}
	rc = current(a, u->txn, idx, 0);
	if (rc == 0)
		rc = compute_one(u, idx);
	if (rc < 0)
		return rc;
	u->done[idx] = true;
	return 0;
}

/* One attempt at bringing the sidecar up to date in a write txn.
 * Returns 0 (committed or nothing to do), or negative; *@mrcp is the LMDB
 * code behind a failure (MDB_MAP_FULL: grow and retry). */
static int update(struct htr_analysis *a, const unsigned *idx, unsigned n,
		  int *mrcp)
{
	struct update u;
	unsigned i;
	int mrc, rc = 0;

	memset(&u, 0, sizeof(u));
	u.a = a;
	*mrcp = 0;
	mrc = htr_env__begin(&a->store->env, 0, &u.txn);
	if (mrc) {
		*mrcp = mrc;
		return mdb_fail(a, mrc, "starting a write transaction");
	}
	/* Re-check inside the transaction: another process may have done
	 * the work while we waited for the write lock. */
	rc = identity_ok(a, u.txn);
	if (rc == 0)
		rc = reset(a, u.txn);
	for (i = 0; rc >= 0 && i < n; i++)
		rc = ensure_one(&u, idx[i], 0);
	if (rc < 0) {
		/* Batches committed before stay: without the analyzer's
		 * record they are not current (dropped when recomputed). */
		if (u.txn) {
			mdb_txn_abort(u.txn);
			htr_env__done(&a->store->env);
		}
		*mrcp = u.mrc;
		return rc;
	}
	mrc = mdb_txn_commit(u.txn);
	htr_env__done(&a->store->env);
	if (mrc) {
		*mrcp = mrc;
		return mdb_fail(a, mrc, "committing");
	}
	return 0;
}

int htr_records__ensure(struct htr_analysis *a, const unsigned *idx,
			unsigned n)
{
	struct htr_store *st = a->store;
	int rc, mrc, tries;

	/* One computing thread per process; the others wait here and then
	 * find the work done (update() re-checks in its transaction). */
	pthread_mutex_lock(&st->env.compute);
	htr_env__compute_lock(&st->env, true);
	for (tries = 0; ; tries++) {
		rc = update(a, idx, n, &mrc);
		if (rc == 0)
			break;
		if (mrc == MDB_MAP_FULL && tries < 40) {
			/* Grow the map and redo the whole transaction; LMDB
			 * allows it only while this process has no other
			 * transaction open. */
			mrc = htr_env__grow(&st->env);
			if (!mrc) {
				a->flags &= ~HTR_ANALYSIS_COMPUTED;
				continue;
			}
		}
		if (mrc == MDB_MAP_FULL) {
			rc = htr_err__set(&a->err, HTR_ERR_IO, "%s: the map is "
					  "full and other handles of this "
					  "process are reading; close them and "
					  "retry", st->sidecar);
			break;
		}
		if (htr_env__unwritable(mrc)) {
			snprintf(a->note, sizeof(a->note), "%s: cannot write: "
				 "%s", st->sidecar,
				 htr_env__strerror(&st->env, mrc));
			rc = 1;
		}
		break;
	}
	htr_env__compute_lock(&st->env, false);
	pthread_mutex_unlock(&st->env.compute);
	return rc;
}

int htr_records__read(struct htr_analysis *a, const unsigned *idx,
		      unsigned n)
{
	struct htr_store *st = a->store;
	MDB_txn *txn = NULL;
	unsigned i;
	int mrc, rc;

	if (a->ntxn == HTR_AN_MAX || a->nres + n > HTR_AN_MAX)
		return htr_err__set(&a->err, HTR_ERR_LIMIT, "too many reads "
				    "on one handle");
	mrc = htr_env__begin(&st->env, MDB_RDONLY, &txn);
	if (mrc)
		return mdb_fail(a, mrc, "starting a read transaction");
	rc = identity_ok(a, txn);
	for (i = 0; rc > 0 && i < n; i++)
		rc = current(a, txn, idx[i], 0);
	if (rc <= 0) {
		mdb_txn_abort(txn);
		htr_env__done(&st->env);
		return rc;
	}
	a->txn[a->ntxn++] = txn;
	for (i = 0; i < n; i++) {
		const struct htr_analyzer *d = &st->reg[idx[i]];
		struct htr_an_result *r = &a->res[a->nres];

		r->idx = idx[i];
		r->result = NULL;
		r->ctx = malloc(sizeof(*r->ctx));
		if (!r->ctx)
			return htr_err__set(&a->err, HTR_ERR_NOMEM, "out of "
					    "memory");
		htr_analyzer__ctx_init(r->ctx, a, idx[i], HTR_CTX_DECODE, txn);
		rc = d->decode(r->ctx, &r->result, d->payload);
		if (rc) {
			d->free(r->result, d->payload);
			free(r->ctx);
			r->ctx = NULL;
			if (rc > 0)
				rc = htr_err__set(&a->err, HTR_ERR_CALLBACK,
						  "analyzer %s returned %d",
						  d->name, rc);
			return rc;
		}
		a->nres++;
	}
	return 1;
}

void htr_records__close(struct htr_analysis *a)
{
	unsigned i;

	for (i = 0; i < a->ntxn; i++) {
		mdb_txn_abort(a->txn[i]);
		htr_env__done(&a->store->env);
	}
	a->ntxn = 0;
}
