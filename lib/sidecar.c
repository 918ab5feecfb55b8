/*
 * The sidecar: an LMDB environment FILE.htr.lmdb/ holding analyzer results
 * for one .htr file (layout in FORMAT.md, "Sidecar").
 *
 * Opening: a read transaction checks the stored identity against the .htr
 * header and each wanted analyzer's record.  If everything is there, the
 * handle keeps that read transaction and reads through it.  Otherwise a
 * write transaction (one writer at a time across processes) re-checks,
 * drops whatever is stale, computes what is missing, commits; then the
 * handle opens its read transaction.  A second process waiting for the
 * write lock finds the work done when it re-checks.
 */
#include "analyze.h"
#include "abi.h"
#include "symbols.h"
#include "le.h"
#include "lmdbcheck.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ID_MAGIC "HTRSIDE1"
#define ID_LAYOUT 1u
#define ID_SIZE 72u
#define TSC_REC_SIZE 32u
#define SYM_REC_SIZE 40u
#define FSTATS_SIZE 48u

static const char *const db_names[HTR_DB_N] = {
	"meta", "tsc", "names", "blocks",
};

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

/* Checksum of the per-function table: every names key and value, then
 * the function map, chained. */
static uint64_t table_hash(uint64_t h, const void *k, size_t kl,
			   const void *v, size_t vl)
{
	h = htr_hash__bytes(h ^ kl, k, kl);
	return htr_hash__bytes(h ^ vl, v, vl);
}

static int is_corrupt(int mrc)
{
	return mrc == MDB_CORRUPTED || mrc == MDB_PAGE_NOTFOUND ||
	       mrc == MDB_INVALID || mrc == MDB_VERSION_MISMATCH ||
	       mrc == MDB_BAD_TXN || mrc == MDB_INCOMPATIBLE;
}

/* An LMDB failure as an htr error with the sidecar's name. */
static int mdb_fail(struct htr_analysis *a, int mrc, const char *what)
{
	if (mrc == ENOMEM)
		return htr_err__set(&a->err, HTR_ERR_NOMEM, "out of memory");
	if (is_corrupt(mrc))
		return htr_err__set(&a->err, HTR_ERR_CORRUPT, "%s: %s: corrupt "
				    "sidecar (%s); remove it to recompute",
				    a->sidecar, what, mdb_strerror(mrc));
	return htr_err__set(&a->err, HTR_ERR_IO, "%s: %s: %s", a->sidecar,
			    what, mdb_strerror(mrc));
}

/* Errors that mean "this sidecar cannot be written": fall back to memory. */
static int is_unwritable(int mrc)
{
	/* EIO: LMDB's word for a short write, a full disk too. */
	return mrc == EACCES || mrc == EROFS || mrc == ENOSPC ||
	       mrc == EPERM || mrc == EDQUOT || mrc == EFBIG || mrc == EIO;
}

/*
 * Begin a transaction on the store's environment, counted in st->active
 * (txn_done() uncounts it).  When another process grew the map, LMDB
 * wants the new size adopted while this process has no transaction open;
 * with other handles reading that must wait (the error is returned).
 */
static int txn_begin(struct htr_store *st, unsigned flags, MDB_txn **txn)
{
	int mrc;

	pthread_mutex_lock(&st->lock);
	mrc = mdb_txn_begin(st->env, NULL, flags, txn);
	if (mrc == MDB_MAP_RESIZED && !st->active) {
		mdb_env_set_mapsize(st->env, 0);
		mrc = mdb_txn_begin(st->env, NULL, flags, txn);
	}
	if (!mrc)
		st->active++;
	pthread_mutex_unlock(&st->lock);
	return mrc;
}

static void txn_done(struct htr_store *st)
{
	pthread_mutex_lock(&st->lock);
	st->active--;
	pthread_mutex_unlock(&st->lock);
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

/* 1 if the stored identity is this file's, 0 if not (or absent, or of
 * the wrong size), negative on LMDB errors. */
static int identity_ok(struct htr_analysis *a, MDB_txn *txn)
{
	uint8_t want[ID_SIZE];
	MDB_val v;
	int mrc;

	mrc = meta_get(txn, a->store->dbi[HTR_DB_META], "identity", &v);
	if (mrc == MDB_NOTFOUND)
		return 0;
	if (mrc)
		return mdb_fail(a, mrc, "reading the identity");
	identity(a->file, want);
	return v.mv_size == ID_SIZE && !memcmp(v.mv_data, want, ID_SIZE);
}

static uint64_t nchunks_of(const struct htr_file *f)
{
	return ((uint64_t) htr_block_count(f) + HTR_TSC_CHUNK - 1) /
	       HTR_TSC_CHUNK;
}

/* 1 if the TSC analyzer's record is current, 0 if not, negative on errors. */
static int tsc_ok(struct htr_analysis *a, MDB_txn *txn)
{
	MDB_val v;
	const uint8_t *p;
	int mrc;

	mrc = meta_get(txn, a->store->dbi[HTR_DB_META], "tsc", &v);
	if (mrc == MDB_NOTFOUND)
		return 0;
	if (mrc)
		return mdb_fail(a, mrc, "reading the tsc record");
	p = v.mv_data;
	return v.mv_size == TSC_REC_SIZE &&
	       htr_disk__get_le(p, 4) == HTR_TSC_VERSION &&
	       htr_disk__get_le(p + 4, 4) == HTR_TSC_CHUNK &&
	       htr_disk__get_le(p + 8, 8) == nchunks_of(a->file);
}

static int sym_ok(struct htr_analysis *a, MDB_txn *txn)
{
	MDB_val v;
	const uint8_t *p;
	int mrc;

	mrc = meta_get(txn, a->store->dbi[HTR_DB_META], "sym", &v);
	if (mrc == MDB_NOTFOUND)
		return 0;
	if (mrc)
		return mdb_fail(a, mrc, "reading the sym record");
	p = v.mv_data;
	if (v.mv_size != SYM_REC_SIZE ||
	    htr_disk__get_le(p, 4) != (HTR_SYM_VERSION << 16 | HTR_TSC_VERSION) ||
	    htr_disk__get_le(p + 16, 8) != htr_func_count(a->file))
		return 0;
	/* Built while some images were unreadable: stale once one is
	 * back, so its names replace the MODULE+0xOFFSET ones. */
	return !htr_disk__get_le(p + 4, 4) ||
	       htr_syms__unreadable(a->file) >= htr_disk__get_le(p + 4, 4);
}

/* 1 if every wanted analyzer is current. */
static int all_ok(struct htr_analysis *a, MDB_txn *txn)
{
	int rc = identity_ok(a, txn);

	if (rc <= 0)
		return rc;
	if (a->want & HTR_ANALYZE_TSC) {
		rc = tsc_ok(a, txn);
		if (rc <= 0)
			return rc;
	}
	if (a->want & HTR_ANALYZE_SYMS) {
		rc = sym_ok(a, txn);
		if (rc <= 0)
			return rc;
	}
	return 1;
}

static int bump_counter(MDB_txn *txn, MDB_dbi dbi, const char *key)
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
	return meta_put(txn, dbi, key, buf, 8);
}

/* --- computing into a write txn --- */

struct tsc_sink {
	struct htr_analysis *a;
	MDB_txn *txn;
	int mrc;
	uint64_t bytes;
};

static int tsc_emit(void *ctx, uint64_t chunk, const uint8_t *buf, size_t len)
{
	struct tsc_sink *s = ctx;
	uint8_t kb[4];
	MDB_val k, v;

	put_be32(kb, (uint32_t) chunk);
	k.mv_data = kb;
	k.mv_size = 4;
	v.mv_data = (void *) buf;
	v.mv_size = len;
	s->mrc = mdb_put(s->txn, s->a->store->dbi[HTR_DB_TSC], &k, &v, MDB_APPEND);
	if (s->mrc)
		return mdb_fail(s->a, s->mrc, "storing TSC results");
	s->bytes += len;
	return 0;
}

static int drop_tsc(struct htr_analysis *a, MDB_txn *txn)
{
	MDB_val k;
	int mrc;

	mrc = mdb_drop(txn, a->store->dbi[HTR_DB_TSC], 0);
	k.mv_data = (void *) "tsc";
	k.mv_size = 3;
	if (!mrc)
		mrc = mdb_del(txn, a->store->dbi[HTR_DB_META], &k, NULL);
	return mrc == MDB_NOTFOUND ? 0 : mrc;
}

static int drop_sym(struct htr_analysis *a, MDB_txn *txn)
{
	static const char *const keys[] = { "sym", "sym.funcmap" };
	MDB_val k;
	size_t i;
	int mrc;

	mrc = mdb_drop(txn, a->store->dbi[HTR_DB_NAMES], 0);
	if (!mrc)
		mrc = mdb_drop(txn, a->store->dbi[HTR_DB_BLOCKS], 0);
	for (i = 0; !mrc && i < 2; i++) {
		k.mv_data = (void *) keys[i];
		k.mv_size = strlen(keys[i]);
		mrc = mdb_del(txn, a->store->dbi[HTR_DB_META], &k, NULL);
		if (mrc == MDB_NOTFOUND)
			mrc = 0;
	}
	return mrc;
}

struct blk_sink {
	struct htr_analysis *a;
	MDB_txn *txn;
	const struct htr_an_name *n;
	uint32_t piece;
	int mrc;
};

static int store_sym(struct htr_analysis *a, MDB_txn *txn, int *mrcp)
{
	uint8_t rec[SYM_REC_SIZE], key[HTR_SYM_KEYMAX + 32];
	uint8_t *val = NULL, *map = NULL;
	size_t i, cap = 0;
	uint64_t bytes = 0, th = HTR_HASH_SEED;
	MDB_val k, v;
	int mrc = 0;

	for (i = 0; i < a->nnames && !mrc; i++) {
		const struct htr_an_name *n = &a->names[i];
		size_t nl = strlen(n->name), need = FSTATS_SIZE + nl + 1;
		uint64_t off;
		uint32_t piece;

		if (need > cap) {
			uint8_t *nv = realloc(val, need);

			if (!nv) {
				free(val);
				return htr_err__set(&a->err, HTR_ERR_NOMEM,
						    "out of memory");
			}
			val = nv;
			cap = need;
		}
		htr_disk__put_le(val, n->st.calls, 8);
		htr_disk__put_le(val + 8, n->st.inclusive, 8);
		htr_disk__put_le(val + 16, n->st.local, 8);
		htr_disk__put_le(val + 24, n->st.slowest_total, 8);
		htr_disk__put_le(val + 32, n->st.slowest, 4);
		htr_disk__put_le(val + 36, (n->st.nblocks + HTR_SYM_PIECE - 1) /
			       HTR_SYM_PIECE, 4);
		htr_disk__put_le(val + 40, n->st.nblocks, 8);
		memcpy(val + FSTATS_SIZE, n->name, nl + 1);
		k.mv_data = (void *) n->key;
		k.mv_size = n->key_len;
		v.mv_data = val;
		v.mv_size = need;
		mrc = mdb_put(txn, a->store->dbi[HTR_DB_NAMES], &k, &v, MDB_APPEND);
		th = table_hash(th, n->key, n->key_len, val, need);
		bytes += need;
		/* The block list, in pieces keyed by name key + be32 piece. */
		memcpy(key, n->key, n->key_len);
		for (off = 0, piece = 0; !mrc && off < n->st.nblocks;
		     off += HTR_SYM_PIECE, piece++) {
			uint64_t cnt = n->st.nblocks - off, j;
			uint8_t *p;

			if (cnt > HTR_SYM_PIECE)
				cnt = HTR_SYM_PIECE;
			put_be32(key + n->key_len, piece);
			k.mv_data = key;
			k.mv_size = n->key_len + 4;
			v.mv_data = NULL;
			v.mv_size = 8 + cnt * 4;
			mrc = mdb_put(txn, a->store->dbi[HTR_DB_BLOCKS], &k, &v,
				      MDB_RESERVE);
			if (mrc)
				break;
			p = v.mv_data;
			for (j = 0; j < cnt; j++)
				htr_disk__put_le(p + 8 + 4 * j, n->blocks[off + j], 4);
			htr_disk__put_le(p, piece_hash(key, n->key_len + 4, p + 8,
					     cnt * 4), 8);
			bytes += 8 + cnt * 4;
		}
	}
	free(val);
	if (!mrc) {
		map = malloc((a->nfuncs + 1) * 4);
		if (!map)
			return htr_err__set(&a->err, HTR_ERR_NOMEM,
					    "out of memory");
		for (i = 0; i <= a->nfuncs; i++)
			htr_disk__put_le(map + 4 * i, a->func_name[i], 4);
		mrc = meta_put(txn, a->store->dbi[HTR_DB_META], "sym.funcmap", map,
			       (a->nfuncs + 1) * 4);
		th = table_hash(th, "sym.funcmap", 11, map,
				(a->nfuncs + 1) * 4);
		free(map);
	}
	if (!mrc) {
		memset(rec, 0, sizeof(rec));
		htr_disk__put_le(rec, HTR_SYM_VERSION << 16 | HTR_TSC_VERSION, 4);
		/* What a later open compares with: images that could not be
		 * opened (not those without symbols, which stay so). */
		htr_disk__put_le(rec + 4, htr_syms__unreadable(a->file), 4);
		htr_disk__put_le(rec + 8, a->nnames, 8);
		htr_disk__put_le(rec + 16, a->nfuncs, 8);
		htr_disk__put_le(rec + 24, bytes, 8);
		htr_disk__put_le(rec + 32, th, 8);
		mrc = meta_put(txn, a->store->dbi[HTR_DB_META], "sym", rec,
			       sizeof(rec));
	}
	if (!mrc)
		mrc = bump_counter(txn, a->store->dbi[HTR_DB_META], "count.sym");
	*mrcp = mrc;
	return mrc ? mdb_fail(a, mrc, "storing the symbol index") : 0;
}

/*
 * One attempt at bringing the sidecar up to date in a write txn.
 * Returns 0 (committed or nothing to do), or negative; *@mrcp is the LMDB
 * code behind a failure (MDB_MAP_FULL: grow and retry).
 */
static int update(struct htr_analysis *a, int *mrcp)
{
	MDB_txn *txn = NULL;
	uint8_t id[ID_SIZE], rec[TSC_REC_SIZE];
	int mrc, rc = 0, ok;

	*mrcp = 0;
	mrc = txn_begin(a->store, 0, &txn);
	if (mrc) {
		*mrcp = mrc;
		return mdb_fail(a, mrc, "starting a write transaction");
	}
	/* Re-check inside the transaction: another process may have done
	 * the work while we waited for the write lock. */
	ok = identity_ok(a, txn);
	if (ok < 0) {
		rc = ok;
		goto fail;
	}
	if (!ok) {
		/* Another .htr (or none): drop every analyzer's results. */
		mrc = drop_tsc(a, txn);
		if (!mrc)
			mrc = drop_sym(a, txn);
		identity(a->file, id);
		if (!mrc)
			mrc = meta_put(txn, a->store->dbi[HTR_DB_META], "identity", id,
				       ID_SIZE);
		if (mrc) {
			rc = mdb_fail(a, mrc, "resetting");
			goto fail;
		}
	}
	a->txn = txn;
	htr_tsc__forget(a);
	ok = (a->want & HTR_ANALYZE_TSC) ? tsc_ok(a, txn) : 1;
	if (ok < 0) {
		rc = ok;
		goto fail;
	}
	if (!ok) {
		struct tsc_sink s = { a, txn, 0, 0 };

		mrc = drop_tsc(a, txn);
		/* A changed TSC invalidates the symbol figures too. */
		if (!mrc)
			mrc = drop_sym(a, txn);
		if (mrc) {
			rc = mdb_fail(a, mrc, "dropping old TSC results");
			goto fail;
		}
		rc = htr_tsc__compute(a, tsc_emit, &s);
		if (rc < 0) {
			mrc = s.mrc;
			goto fail;
		}
		memset(rec, 0, sizeof(rec));
		htr_disk__put_le(rec, HTR_TSC_VERSION, 4);
		htr_disk__put_le(rec + 4, HTR_TSC_CHUNK, 4);
		htr_disk__put_le(rec + 8, nchunks_of(a->file), 8);
		htr_disk__put_le(rec + 16, s.bytes, 8);
		mrc = meta_put(txn, a->store->dbi[HTR_DB_META], "tsc", rec,
			       sizeof(rec));
		if (!mrc)
			mrc = bump_counter(txn, a->store->dbi[HTR_DB_META],
					   "count.tsc");
		if (mrc) {
			rc = mdb_fail(a, mrc, "storing TSC results");
			goto fail;
		}
		a->flags |= HTR_ANALYSIS_COMPUTED;
	}
	ok = (a->want & HTR_ANALYZE_SYMS) ? sym_ok(a, txn) : 1;
	if (ok < 0) {
		rc = ok;
		goto fail;
	}
	if (!ok) {
		mrc = drop_sym(a, txn);
		if (mrc) {
			rc = mdb_fail(a, mrc, "dropping the old symbol index");
			goto fail;
		}
		rc = htr_sym__compute(a);
		htr_tsc__forget(a);
		if (rc < 0)
			goto fail;
		rc = store_sym(a, txn, &mrc);
		htr_sym__free(a);
		if (rc < 0)
			goto fail;
		a->flags |= HTR_ANALYSIS_COMPUTED;
	}
	a->txn = NULL;
	htr_tsc__forget(a);
	mrc = mdb_txn_commit(txn);
	txn_done(a->store);
	if (mrc) {
		*mrcp = mrc;
		return mdb_fail(a, mrc, "committing");
	}
	return 0;
fail:
	a->txn = NULL;
	htr_tsc__forget(a);
	htr_sym__free(a);
	mdb_txn_abort(txn);
	txn_done(a->store);
	*mrcp = mrc;
	return rc;
}

/* Read the per-function table of a current symbol index (through a->txn). */
static int load_sym(struct htr_analysis *a)
{
	MDB_val k, v;
	MDB_cursor *cur = NULL;
	const uint8_t *p, *fmap;
	uint64_t nnames, i, want_h, th = HTR_HASH_SEED;
	int mrc;

	mrc = meta_get(a->txn, a->store->dbi[HTR_DB_META], "sym", &v);
	if (mrc)
		return mdb_fail(a, mrc, "reading the sym record");
	p = v.mv_data;
	nnames = htr_disk__get_le(p + 8, 8);
	want_h = htr_disk__get_le(p + 32, 8);
	a->nskipped = (unsigned) htr_disk__get_le(p + 4, 4);
	a->nfuncs = htr_func_count(a->file);
	if (nnames > a->nfuncs + 1)
		goto corrupt;
	mrc = meta_get(a->txn, a->store->dbi[HTR_DB_META], "sym.funcmap", &v);
	if (mrc == MDB_NOTFOUND || (!mrc && v.mv_size != (a->nfuncs + 1) * 4))
		goto corrupt;
	if (mrc)
		return mdb_fail(a, mrc, "reading the function map");
	fmap = v.mv_data;
	a->func_name = malloc((a->nfuncs + 1) * sizeof(*a->func_name));
	a->names = calloc(nnames ? nnames : 1, sizeof(*a->names));
	if (!a->func_name || !a->names)
		return htr_err__set(&a->err, HTR_ERR_NOMEM, "out of memory");
	for (i = 0; i <= a->nfuncs; i++) {
		a->func_name[i] = (uint32_t) htr_disk__get_le((const uint8_t *) v.mv_data +
						    4 * i, 4);
		if (a->func_name[i] >= nnames && a->func_name[i] != UINT32_MAX)
			goto corrupt;
	}
	mrc = mdb_cursor_open(a->txn, a->store->dbi[HTR_DB_NAMES], &cur);
	if (mrc)
		return mdb_fail(a, mrc, "reading the symbol index");
	i = 0;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); !mrc;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct htr_an_name *n;
		const char *name;
		uint8_t kb[HTR_SYM_KEYMAX + 32];
		size_t nl;

		p = v.mv_data;
		if (i >= nnames || v.mv_size < FSTATS_SIZE + 1 ||
		    p[v.mv_size - 1] != 0)
			goto corrupt_cur;
		name = (const char *) p + FSTATS_SIZE;
		nl = strlen(name);
		if (nl + 1 != v.mv_size - FSTATS_SIZE ||
		    htr_sym__key(name, kb) != k.mv_size ||
		    memcmp(kb, k.mv_data, k.mv_size))
			goto corrupt_cur;
		th = table_hash(th, k.mv_data, k.mv_size, p, v.mv_size);
		n = &a->names[i++];
		n->name = name;
		n->key = k.mv_data;
		n->key_len = k.mv_size;
		n->st.calls = htr_disk__get_le(p, 8);
		n->st.inclusive = htr_disk__get_le(p + 8, 8);
		n->st.local = htr_disk__get_le(p + 16, 8);
		n->st.slowest_total = htr_disk__get_le(p + 24, 8);
		n->st.slowest = (uint32_t) htr_disk__get_le(p + 32, 4);
		n->st.npieces = (uint32_t) htr_disk__get_le(p + 36, 4);
		n->st.nblocks = htr_disk__get_le(p + 40, 8);
		if (n->st.nblocks != n->st.calls ||
		    n->st.nblocks > a->nblocks ||
		    n->st.npieces != (n->st.nblocks + HTR_SYM_PIECE - 1) /
				     HTR_SYM_PIECE ||
		    (n->st.calls && n->st.slowest >= a->nblocks))
			goto corrupt_cur;
	}
	mdb_cursor_close(cur);
	if (mrc != MDB_NOTFOUND)
		return mdb_fail(a, mrc, "reading the symbol index");
	th = table_hash(th, "sym.funcmap", 11, fmap, (a->nfuncs + 1) * 4);
	if (i != nnames || th != want_h)
		goto corrupt;
	a->nnames = (size_t) nnames;
	return 0;
corrupt_cur:
	mdb_cursor_close(cur);
corrupt:
	return htr_err__set(&a->err, HTR_ERR_CORRUPT, "%s: the symbol index "
			    "is damaged; remove the sidecar to recompute",
			    a->sidecar);
}

/* Begin the handle's long read txn; 1 if everything wanted is current
 * (then loaded), 0 if not (txn ended), negative on errors. */
static int try_read(struct htr_analysis *a)
{
	MDB_txn *txn = NULL;
	int mrc, rc;

	mrc = txn_begin(a->store, MDB_RDONLY, &txn);
	if (mrc)
		return mdb_fail(a, mrc, "starting a read transaction");
	rc = all_ok(a, txn);
	if (rc <= 0) {
		mdb_txn_abort(txn);
		txn_done(a->store);
		return rc;
	}
	a->txn = txn;
	a->counted = true;
	htr_tsc__forget(a);
	if (a->want & HTR_ANALYZE_SYMS) {
		rc = load_sym(a);
		if (rc < 0) {
			htr_sidecar__close(a);
			return rc;
		}
	}
	return 1;
}

int htr_sidecar__open(struct htr_analysis *a)
{
	struct htr_store *st = a->store;
	int rc, mrc, tries;

	if (!st->env) {
		snprintf(a->note, sizeof(a->note), "%s", st->note);
		return 1;
	}
	rc = try_read(a);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		a->flags |= HTR_ANALYSIS_RELOADED;
		return 0;
	}
	if (st->readonly) {
		snprintf(a->note, sizeof(a->note), "%s: read-only and out of "
			 "date", a->sidecar);
		return 1;
	}
	/* One computing thread per process; the others wait here and then
	 * find the work done (update() re-checks in its transaction). */
	pthread_mutex_lock(&st->compute);
	for (tries = 0; ; tries++) {
		rc = update(a, &mrc);
		if (rc == 0)
			break;
		if (mrc == MDB_MAP_FULL && tries < 40) {
			/* Grow the map and redo the whole transaction; LMDB
			 * allows it only while this process has no other
			 * transaction open. */
			pthread_mutex_lock(&st->lock);
			mrc = st->active ? MDB_MAP_FULL :
			      mdb_env_set_mapsize(st->env, st->mapsize * 2);
			if (!mrc)
				st->mapsize *= 2;
			pthread_mutex_unlock(&st->lock);
			if (!mrc) {
				a->flags &= ~HTR_ANALYSIS_COMPUTED;
				continue;
			}
		}
		if (mrc == MDB_MAP_FULL) {
			rc = htr_err__set(&a->err, HTR_ERR_IO, "%s: the map is "
					  "full and other handles of this "
					  "process are reading; close them and "
					  "retry", a->sidecar);
			break;
		}
		if (is_unwritable(mrc)) {
			snprintf(a->note, sizeof(a->note), "%s: cannot write: "
				 "%s", a->sidecar, mdb_strerror(mrc));
			rc = 1;
		}
		break;
	}
	pthread_mutex_unlock(&st->compute);
	if (rc)
		return rc;
	rc = try_read(a);
	if (rc < 0)
		return rc;
	if (rc == 0)
		return htr_err__set(&a->err, HTR_ERR_IO, "%s: results vanished "
				    "after they were stored (another process "
				    "rebuilt it?)", a->sidecar);
	if (!(a->flags & HTR_ANALYSIS_COMPUTED))
		a->flags |= HTR_ANALYSIS_RELOADED;
	return 0;
}

void htr_sidecar__close(struct htr_analysis *a)
{
	if (a->txn)
		mdb_txn_abort(a->txn);
	a->txn = NULL;
	if (a->counted)
		txn_done(a->store);
	a->counted = false;
}

/* --- the store: one environment per sidecar per process --- */

void htr_store_opts_init_size(struct htr_store_opts *opts, size_t size)
{
	htr_abi__init(opts, size);
}

static int store_fail(struct htr_store *st, int mrc, const char *what)
{
	if (mrc == ENOMEM)
		return htr_err__set(&st->err, HTR_ERR_NOMEM, "out of memory");
	if (is_corrupt(mrc))
		return htr_err__set(&st->err, HTR_ERR_CORRUPT, "%s: %s: corrupt "
				    "sidecar (%s); remove it to recompute",
				    st->sidecar, what, mdb_strerror(mrc));
	return htr_err__set(&st->err, HTR_ERR_IO, "%s: %s: %s", st->sidecar,
			    what, mdb_strerror(mrc));
}

/* Open or create the named databases once: LMDB wants dbi handles opened
 * by one transaction at a time per process, so readers never open them.
 * 1: they are missing in a read-only sidecar (it is out of date). */
static int open_dbs(struct htr_store *st)
{
	MDB_txn *txn = NULL;
	int mrc, i;

	mrc = txn_begin(st, st->readonly ? MDB_RDONLY : 0, &txn);
	if (mrc) {
		if (is_unwritable(mrc))
			goto unwritable;
		return store_fail(st, mrc, "starting a transaction");
	}
	for (i = 0; i < HTR_DB_N; i++) {
		mrc = mdb_dbi_open(txn, db_names[i],
				   st->readonly ? 0 : MDB_CREATE, &st->dbi[i]);
		if (mrc)
			break;
	}
	if (!mrc)
		mrc = mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
	txn_done(st);
	if (mrc == MDB_NOTFOUND && st->readonly) {
		snprintf(st->note, sizeof(st->note), "%s: read-only and out "
			 "of date", st->sidecar);
		return 1;
	}
	if (is_unwritable(mrc))
		goto unwritable;
	return mrc ? store_fail(st, mrc, "opening its databases") : 0;
unwritable:
	snprintf(st->note, sizeof(st->note), "%s: cannot write: %s",
		 st->sidecar, mdb_strerror(mrc));
	return 1;
}

/* Whether the sidecar directory and its files are the caller's own and
 * not writable by others (git's safe.directory rule): LMDB believes
 * whatever its files say, so someone else's are not opened.  Sets the
 * note when not. */
static int trusted(struct htr_store *st)
{
	static const char *const names[] = { "", "/data.mdb", "/lock.mdb" };
	char path[4200];
	struct stat sb;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", st->sidecar, names[i]);
		if (lstat(path, &sb) < 0)
			continue;
		if (sb.st_uid != geteuid() || (sb.st_mode & S_IWOTH) ||
		    (i && !S_ISREG(sb.st_mode))) {
			snprintf(st->note, sizeof(st->note), "%.400s: not trusted "
				 "(%s by another user, writable by others or "
				 "not a plain file)", path, i ? "owned" :
				 "a directory owned");
			return 0;
		}
	}
	return 1;
}

/* Opening the environment; 1: unusable (note set), 0, or negative. */
static int open_env(struct htr_store *st, uint64_t nblocks)
{
	static const unsigned modes[] = { 0, MDB_RDONLY,
					  MDB_RDONLY | MDB_NOLOCK };
	char data[4200];
	struct stat sb;
	MDB_envinfo info;
	MDB_stat ms;
	size_t m;
	int mrc = 0;

	if (mkdir(st->sidecar, 0777) < 0 && errno != EEXIST) {
		snprintf(st->note, sizeof(st->note), "%s: cannot create: %s",
			 st->sidecar, strerror(errno));
		return 1;
	}
	if (!trusted(st))
		return 1;
	/* LMDB trusts its file: check every page it could reach first. */
	snprintf(data, sizeof(data), "%s/data.mdb", st->sidecar);
	mrc = htr_lmdb__check(data, &st->err);
	if (mrc < 0) {
		char why[sizeof(st->err.msg)];

		memcpy(why, st->err.msg, sizeof(why));
		return htr_err__set(&st->err, mrc, "%s; remove %s to "
				    "recompute", why, st->sidecar);
	}
	/* Room for the results.  The map is address space, not memory or
	 * disk, and growing it later needs every other transaction of the
	 * process closed, which a shared store cannot promise: be
	 * generous once. */
	st->mapsize = (size_t) 1 << 32;
	if ((size_t) nblocks * 64 > st->mapsize)
		st->mapsize = (size_t) nblocks * 64;
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		mrc = mdb_env_create(&st->env);
		if (mrc)
			return store_fail(st, mrc, "creating the environment");
		mdb_env_set_maxdbs(st->env, HTR_DB_N);
		mdb_env_set_mapsize(st->env, st->mapsize);
		/* MDB_NOTLS: read transactions belong to handles, not to
		 * threads, so one thread may hold several and a handle may
		 * move between threads. */
		mrc = mdb_env_open(st->env, st->sidecar, MDB_NOTLS | modes[m],
				   0666);
		if (!mrc)
			break;
		mdb_env_close(st->env);
		st->env = NULL;
		if (is_corrupt(mrc))
			return store_fail(st, mrc, "opening");
		if (!is_unwritable(mrc) && mrc != ENOENT)
			break;
	}
	if (!st->env) {
		snprintf(st->note, sizeof(st->note), "%s: cannot open: %s",
			 st->sidecar, mdb_strerror(mrc));
		return 1;
	}
	st->readonly = modes[m] & MDB_RDONLY;
	/* A truncated data file would fault when its pages are touched:
	 * compare the last page in use with the file's size first. */
	snprintf(data, sizeof(data), "%s/data.mdb", st->sidecar);
	if (mdb_env_info(st->env, &info) || mdb_env_stat(st->env, &ms) ||
	    stat(data, &sb) < 0)
		return htr_err__sys(&st->err, "%s: cannot inspect", st->sidecar);
	if (((uint64_t) info.me_last_pgno + 1) * ms.ms_psize >
	    (uint64_t) sb.st_size)
		return htr_err__set(&st->err, HTR_ERR_CORRUPT, "%s: data.mdb is "
				    "truncated (%llu bytes, %llu in use); "
				    "remove the sidecar to recompute",
				    st->sidecar, (unsigned long long) sb.st_size,
				    (unsigned long long) (info.me_last_pgno + 1) *
				    ms.ms_psize);
	if (info.me_mapsize > st->mapsize)
		st->mapsize = info.me_mapsize;
	return open_dbs(st);
}

int htr_store_open(struct htr_store **out, const struct htr_file *file,
		   const struct htr_store_opts *opts)
{
	struct htr_store_opts o;
	struct htr_file_info fi;
	struct htr_store *st;
	int rc;

	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return HTR_ERR_NOMEM;
	*out = st;
	if (pthread_mutex_init(&st->lock, NULL))
		return htr_err__set(&st->err, HTR_ERR_NOMEM, "cannot create "
				    "a mutex");
	if (pthread_mutex_init(&st->compute, NULL)) {
		pthread_mutex_destroy(&st->lock);
		return htr_err__set(&st->err, HTR_ERR_NOMEM, "cannot create "
				    "a mutex");
	}
	st->lock_ok = true;
	if (htr_abi__in(&o, sizeof(o), opts, htr_abi__size_of(opts),
			HTR_ABI_SIZE0(struct htr_store_opts, no_sidecar)) < 0)
		return htr_err__set(&st->err, HTR_ERR_INVALID, "bad options "
				    "size %zu", htr_abi__size_of(opts));
	memset(&fi, 0, sizeof(fi));
	if (htr_file_info(file, &fi, sizeof(fi)) < 0)
		return htr_err__set(&st->err, HTR_ERR_INVALID, "no open .htr "
				    "file");
	st->file = file;
	if (o.sidecar) {
		st->sidecar = strdup(o.sidecar);
	} else {
		const char *path = htr_file_path(file);
		size_t n;

		/* A file from memory has no place for a sidecar. */
		if (!path) {
			o.no_sidecar = 1;
			path = "";
		}
		n = strlen(path) + sizeof(".lmdb");

		st->sidecar = malloc(n);
		if (st->sidecar)
			snprintf(st->sidecar, n, "%s.lmdb", path);
	}
	if (!st->sidecar)
		return htr_err__set(&st->err, HTR_ERR_NOMEM, "out of memory");
	if (o.no_sidecar) {
		snprintf(st->note, sizeof(st->note), "no sidecar requested");
		rc = 1;
	} else {
		rc = open_env(st, fi.nblocks);
		if (rc < 0)
			return rc;
	}
	if (rc == 1) {
		if (st->env)
			mdb_env_close(st->env);
		st->env = NULL;
		st->flags |= HTR_STORE_IN_MEMORY;
	}
	htr_err__clear(&st->err);
	return 0;
}

void htr_store_close(struct htr_store *st)
{
	if (!st)
		return;
	if (st->env)
		mdb_env_close(st->env);
	if (st->lock_ok) {
		pthread_mutex_destroy(&st->lock);
		pthread_mutex_destroy(&st->compute);
	}
	free(st->sidecar);
	free(st);
}

const char *htr_store_last_error(const struct htr_store *st)
{
	return st ? st->err.msg : "";
}

unsigned htr_store_flags(const struct htr_store *st)
{
	return st ? st->flags : 0;
}

const char *htr_store_note(const struct htr_store *st)
{
	return st ? st->note : "";
}

const char *htr_store_sidecar(const struct htr_store *st)
{
	return st && st->sidecar ? st->sidecar : "";
}

struct reader_count {
	char pid[32];
	uint32_t all, mine;
};

/* One line per reader slot in use (after a header line). */
static int count_reader(const char *msg, void *ctx)
{
	struct reader_count *c = ctx;
	const char *p = msg;

	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return 0;
	c->all++;
	if (!strncmp(p, c->pid, strlen(c->pid)) &&
	    p[strlen(c->pid)] == ' ')
		c->mine++;
	return 0;
}

int htr_store_info(const struct htr_store *st, struct htr_store_info *info,
		   size_t size)
{
	struct htr_store_info si;
	struct reader_count c;
	unsigned maxr = 0;

	if (!st || !info)
		return HTR_ERR_INVALID;
	memset(&si, 0, sizeof(si));
	if (st->env) {
		memset(&c, 0, sizeof(c));
		snprintf(c.pid, sizeof(c.pid), "%ld", (long) getpid());
		if (mdb_reader_list(st->env, count_reader, &c) < 0 ||
		    mdb_env_get_maxreaders(st->env, &maxr))
			return HTR_ERR_IO;
		si.max_readers = maxr;
		si.readers = c.all;
		si.process_readers = c.mine;
	}
	return htr_abi__out(info, size, &si, sizeof(si),
			    HTR_ABI_SIZE0(struct htr_store_info,
					  process_readers));
}

int htr_sidecar__tsc_chunk(struct htr_analysis *a, uint64_t c,
			   const uint8_t **v, size_t *len)
{
	uint8_t kb[4];
	MDB_val k, val;
	int mrc;

	put_be32(kb, (uint32_t) c);
	k.mv_data = kb;
	k.mv_size = 4;
	mrc = mdb_get(a->txn, a->store->dbi[HTR_DB_TSC], &k, &val);
	if (mrc == MDB_NOTFOUND)
		return htr_err__set(&a->err, HTR_ERR_CORRUPT, "%s: TSC chunk "
				    "%llu is missing; remove the sidecar to "
				    "recompute", a->sidecar,
				    (unsigned long long) c);
	if (mrc)
		return mdb_fail(a, mrc, "reading TSC results");
	*v = val.mv_data;
	*len = val.mv_size;
	return 0;
}

int htr_sidecar__blocks(struct htr_analysis *a, const struct htr_an_name *n,
			int (*fn)(const uint32_t *b, size_t nb, void *p),
			void *p)
{
	uint8_t key[HTR_SYM_KEYMAX + 32];
	uint32_t buf[256];
	uint64_t left = n->st.nblocks;
	uint32_t piece;
	MDB_val k, v;
	int mrc, rc;

	memcpy(key, n->key, n->key_len);
	for (piece = 0; piece < n->st.npieces; piece++) {
		uint64_t cnt = left > HTR_SYM_PIECE ? HTR_SYM_PIECE : left, j;
		const uint8_t *q;

		put_be32(key + n->key_len, piece);
		k.mv_data = key;
		k.mv_size = n->key_len + 4;
		mrc = mdb_get(a->txn, a->store->dbi[HTR_DB_BLOCKS], &k, &v);
		if (mrc == MDB_NOTFOUND || (!mrc && (v.mv_size != 8 + cnt * 4 ||
		    htr_disk__get_le(v.mv_data, 8) != piece_hash(key, k.mv_size,
				(const uint8_t *) v.mv_data + 8, cnt * 4))))
			return htr_err__set(&a->err, HTR_ERR_CORRUPT, "%s: the "
					    "block list of '%s' is damaged; "
					    "remove the sidecar to recompute",
					    a->sidecar, n->name);
		if (mrc)
			return mdb_fail(a, mrc, "reading the symbol index");
		q = (const uint8_t *) v.mv_data + 8;
		for (j = 0; j < cnt; ) {
			size_t m = 0;

			while (m < 256 && j < cnt) {
				buf[m] = (uint32_t) htr_disk__get_le(q + 4 * j, 4);
				if (buf[m] >= a->nblocks)
					return htr_err__set(&a->err,
						HTR_ERR_CORRUPT, "%s: the block "
						"list of '%s' is damaged; remove "
						"the sidecar to recompute",
						a->sidecar, n->name);
				m++;
				j++;
			}
			rc = fn(buf, m, p);
			if (rc)
				return rc;
		}
		left -= cnt;
	}
	return 0;
}
