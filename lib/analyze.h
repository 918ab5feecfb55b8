/*
 * Analyzers (internal view): the store, the reader handle and the context
 * descriptors' callbacks get.
 *
 *   analyze.c      readers (include/htr/analyze.h), GetOrCreate, the
 *                  registry, computing in memory
 *   sidecar.c      the store: the LMDB environment FILE.htr.lmdb/
 *                  (FORMAT.md), records keyed by analyzer name
 *   analyze_tsc.c  the "tsc" descriptor and its codec
 *   analyze_sym.c  the "sym" descriptor and its codec
 *
 * analyze.c and sidecar.c know analyzers only through their descriptors;
 * the two built-in ones are registered by name on every store.
 */
#ifndef HTR_LIB_ANALYZE_H
#define HTR_LIB_ANALYZE_H

#include "err.h"
#include "htr/analyze.h"
#include "htr/analyzer.h"

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTR_AN_MAX 32u   /* analyzers per store */

/* Named databases of the sidecar (FORMAT.md, "Sidecar"). */
enum htr_db {
	HTR_DB_META,     /* identity, analyzer records, counters */
	HTR_DB_VALS,     /* analyzer name + NUL + key -> value */
	HTR_DB_USED,
	/* room for dropping the databases of layout 1 ("tsc", "names",
	 * "blocks") when such a sidecar is reset */
	HTR_DB_N = HTR_DB_USED + 3
};

/*
 * One LMDB environment per sidecar per process (htr/store.h).  Shared by
 * threads: env, the dbis and the strings never change after open; @lock
 * guards the rest (the registry's count, @active, @mapsize) and @compute
 * serializes, within the process, computing and mdb_dbi_open.  Across
 * processes LMDB's write lock serializes computing.
 */
struct htr_store {
	struct htr_err err;          /* open errors only */
	const struct htr_file *file;
	char *sidecar;
	char note[512];              /* why in memory */
	unsigned flags;              /* HTR_STORE_* */
	MDB_env *env;                /* NULL in memory */
	MDB_dbi dbi[HTR_DB_USED];
	bool readonly;               /* env opened MDB_RDONLY */
	/* This store made the sidecar directory (created), and the first
	 * analysis over it failed (discard): closing removes the directory,
	 * so a failed command leaves nothing behind. */
	bool created, discard;
	pthread_mutex_t lock;
	pthread_mutex_t compute;     /* held by the one computing thread */
	bool lock_ok;
	size_t mapsize;              /* under lock */
	unsigned active;             /* open txns of this process (lock) */
	/* The registry: entries never move or change once counted. */
	struct htr_analyzer reg[HTR_AN_MAX];
	unsigned nreg;               /* under lock */
};

/* What a callback gets. */
enum htr_ctx_mode { HTR_CTX_COMPUTE, HTR_CTX_ENCODE, HTR_CTX_DECODE };

struct htr_analyzer_ctx {
	struct htr_analysis *a;      /* messages go to its err */
	struct htr_store *store;
	unsigned idx;                /* the analyzer, in store->reg */
	enum htr_ctx_mode mode;
	MDB_txn *txn;                /* values (NULL: memory) */
	const void *const *deps;     /* compute: results by registry index */
	int mrc;                     /* encode: the LMDB code of a failure */
};

/* A result a reader holds. */
struct htr_an_result {
	unsigned idx;
	void *result;
	struct htr_analyzer_ctx *ctx;  /* owned */
};

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

/* --- analyze.c --- */

/* Registry index of @name, or -1.  Any thread. */
int htr_store__find(struct htr_store *st, const char *name);
unsigned htr_store__count(struct htr_store *st);

/* The result of analyzer @name held by @a (NULL if none). */
void *htr_analysis__result(const struct htr_analysis *a, const char *name);

/* Flag @a's symbols as partial, with @msg as the note unless one is set. */
void htr_analysis__partial(struct htr_analyzer_ctx *ctx, const char *msg);

/* Free a reader's result entry (not the txn). */
void htr_an__free_result(struct htr_store *st, struct htr_an_result *r);

/* --- sidecar.c: the store's environment --- */

/* Begin a transaction counted in st->active (adopting a map another
 * process grew when nothing else of this process is open); end it with
 * htr_sidecar__done().  Returns an LMDB code. */
int htr_sidecar__begin(struct htr_store *st, unsigned flags, MDB_txn **txn);
void htr_sidecar__done(struct htr_store *st);

/* LMDB codes meaning a damaged file, or an unwritable sidecar. */
int htr_sidecar__corrupt(int mrc);
int htr_sidecar__unwritable(int mrc);
/* mdb_strerror(@mrc) of an LMDB call on @st's sidecar, but "No space left
 * on device" for the EIO LMDB makes of a short write when the sidecar's
 * file system is full.  Static or LMDB's; valid until the next call. */
const char *htr_sidecar__strerror(const struct htr_store *st, int mrc);

/* Register the built-in analyzers on a new store (analyze.c). */
int htr_store__builtins(struct htr_store *st);

/* --- results.c: analyzer records keyed by name --- */

/*
 * In a new read txn of @a: 1 if analyzers @idx[0..n) are all current,
 * then decoded into a->res (the txn stays open until close); 0 if not
 * (txn ended); negative on errors (message on a->err).
 */
int htr_sidecar__read(struct htr_analysis *a, const unsigned *idx,
		      unsigned n);

/*
 * Compute and store what of @idx[0..n) (and their dependencies) is not
 * current, once per sidecar.  Returns 0; 1 when the sidecar cannot be
 * written (a->note says why: the caller computes in memory); negative.
 */
int htr_sidecar__ensure(struct htr_analysis *a, const unsigned *idx,
			unsigned n);

/* End @a's read txns (the store stays open). */
void htr_sidecar__close(struct htr_analysis *a);

/* The built-in descriptors (analyze_tsc.c, analyze_sym.c). */
void htr_tsc__descriptor(struct htr_analyzer *d);
void htr_sym__descriptor(struct htr_analyzer *d);

/* TSC figures of @block from a "tsc" result (decoded or computed).
 * Returns 0, HTR_ERR_RANGE, HTR_ERR_CORRUPT, HTR_ERR_IO (message through
 * the result's ctx, or @ctx if the result has none). */
int htr_tsc__value(const void *tsc, struct htr_analyzer_ctx *ctx,
		   uint32_t block, uint64_t *total, uint64_t *local);

#endif
