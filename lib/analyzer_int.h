/*
 * What analyzer.c gives the descriptors and the layers above them: the
 * context a callback gets, a result a reader holds, the reader handle
 * (struct htr_analysis), and the context's helpers.  The file map of the
 * store and analyzers is in lib/env.h.
 *
 * The built-in descriptors (analyze_tsc.c, analyze_sym.c) see this header
 * and descriptors.h only: never the store's struct or LMDB's environment.
 */
#ifndef HTR_LIB_ANALYZER_INT_H
#define HTR_LIB_ANALYZER_INT_H

#include "err.h"
#include "htr/analyze.h"
#include "htr/analyzer.h"

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTR_AN_MAX 32u   /* analyzers per store, results per handle */

struct htr_store;

/* What a callback gets. */
enum htr_ctx_mode { HTR_CTX_COMPUTE, HTR_CTX_ENCODE, HTR_CTX_DECODE };

struct htr_analyzer_ctx {
	struct htr_analysis *a;      /* messages go to its err */
	struct htr_store *store;
	unsigned idx;                /* the analyzer, in store->reg */
	enum htr_ctx_mode mode;
	MDB_txn *txn;                /* values (NULL: memory) */
	/* compute: the results of the descriptor's deps[i], by i */
	const void *const *deps;
	int mrc;                     /* put: the LMDB code of a failure */
	/* Writing (compute or encode over a write txn): bytes put in the
	 * current txn (committed at HTR_AN_BATCH), the last full key put
	 * while each one followed the one before (MDB_APPEND), else 0. */
	size_t batch;
	size_t last_len;
	uint8_t last[HTR_ANALYZER_NAME_MAX + 1 + HTR_ANALYZER_KEY_MAX];
	bool no_append;
};

/* Bytes of values written before htr_analyzer_put() commits the write
 * txn and begins the next (records.c holds the computing lock): what
 * LMDB keeps of a txn in memory (its dirty pages) stays about this. */
#define HTR_AN_BATCH ((size_t) 32 << 20)

/* A result a reader holds. */
struct htr_an_result {
	unsigned idx;
	void *result;
	struct htr_analyzer_ctx *ctx;  /* owned */
};

/* A reader (htr/analyze.h); opened and closed by analysis.c, its read
 * transactions are records.c's. */
struct htr_analysis {
	struct htr_err err;
	const struct htr_file *file;   /* read through the tree API only */
	struct htr_store *store;
	bool own_store;          /* opened by htr_analysis_open() */
	unsigned flags;          /* HTR_ANALYSIS_* */
	char note[512];
	MDB_txn *txn[HTR_AN_MAX];  /* read txns, each counted in active */
	unsigned ntxn;
	struct htr_an_result res[HTR_AN_MAX];
	unsigned nres;
};

/* Longest key in the values database: name, NUL, the analyzer's key. */
#define HTR_ANALYZER__FULL_KEY_MAX \
	(HTR_ANALYZER_NAME_MAX + 1 + HTR_ANALYZER_KEY_MAX)

/* Set @c up for analyzer @idx of a->store, in @mode, over @txn. */
void htr_analyzer__ctx_init(struct htr_analyzer_ctx *c, struct htr_analysis *a,
			    unsigned idx, enum htr_ctx_mode mode, MDB_txn *txn);

/* The key of the values database for @ctx's analyzer's @key (@klen
 * bytes, 0: the analyzer's prefix) into @buf (room for the name, a
 * NUL and @klen bytes: at most HTR_ANALYZER__FULL_KEY_MAX).  Returns its
 * length. */
size_t htr_analyzer__key(const struct htr_analyzer_ctx *ctx, const void *key,
			 size_t klen, uint8_t *buf);

/* The result of analyzer @name held by @a (NULL if none). */
void *htr_analyzer__result(const struct htr_analysis *a, const char *name);

/* Flag @ctx's reader's symbols as partial, with @msg as the note unless
 * one is set. */
void htr_analyzer__partial(struct htr_analyzer_ctx *ctx, const char *msg);

#endif
