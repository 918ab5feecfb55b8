/*
 * The sidecar's LMDB environment as the layers above it use it (env.c):
 * counted transactions, what an LMDB code means, its message.  Calls
 * nothing of the store or the analyzers; store.c opens and closes the
 * environment, records.c and analyzer.c read and write through it.
 *
 * The file map of the store and analyzers, bottom-up (no file calls one
 * above it; tools/check/layers.py checks there is no circle):
 *
 *   env.c          htr_env__*: counted txns, corrupt/unwritable, messages
 *   analyzer.c     htr_analyzer_*: what descriptors' callbacks call
 *                  (analyzer_int.h: ctx, result, struct htr_analysis)
 *   analyze_tsc.c  htr_tsc__*: the "tsc" descriptor, htr_tsc_get()
 *   analyze_sym.c  htr_sym__*: the "sym" descriptor, htr_block_name(),
 *                  htr_func_visit(), htr_symidx_find() (descriptors.h)
 *   store.c        htr_store_*: opening the environment, the registry
 *                  (store_int.h: struct htr_store)
 *   records.c      htr_records__*: identity, reading, computing and
 *                  writing analyzer records (FORMAT.md, "Sidecar")
 *   analysis.c     htr_analysis_*: reader handles, computing in memory,
 *                  GetOrCreate (htr_store_get())
 *
 * The store knows analyzers only through their descriptors (function
 * pointers, the seam the layering check does not see); the two built-in
 * ones are registered by name on every store.
 */
#ifndef HTR_LIB_ENV_H
#define HTR_LIB_ENV_H

#include "err.h"

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

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
 * One per store.  @mdb, the dbis and @dir never change after the store
 * opened; @lock guards @mapsize and @active; @compute serializes, within
 * the process, computing and mdb_dbi_open (across processes LMDB's write
 * lock does).
 */
struct htr_env {
	MDB_env *mdb;                /* NULL: the store works in memory */
	MDB_dbi dbi[HTR_DB_USED];
	bool readonly;               /* opened MDB_RDONLY */
	const char *dir;             /* the sidecar directory (the store's) */
	pthread_mutex_t lock;
	pthread_mutex_t compute;     /* held by the one computing thread */
	bool locks_ok;               /* the two mutexes exist */
	size_t mapsize;              /* under lock */
	unsigned active;             /* open txns of this process (lock) */
};

/* Create @e's mutexes (everything else zero).  0, or HTR_ERR_NOMEM. */
int htr_env__init(struct htr_env *e);

/* Close the environment if open, destroy the mutexes.  NULL-safe. */
void htr_env__fini(struct htr_env *e);

/* Begin a transaction counted in @e->active, adopting a map another
 * process grew when nothing else of this process is open; end it with
 * htr_env__done() after commit or abort.  Returns an LMDB code. */
int htr_env__begin(struct htr_env *e, unsigned flags, MDB_txn **txn);
void htr_env__done(struct htr_env *e);

/* Take (@on) or release the sidecar's computing lock across processes:
 * an flock() on data.mdb, held while values are written in several
 * transactions (records.c), so that another process waits for them
 * instead of computing the same results over them.  Taken before any
 * write transaction, never inside one.  Best effort: where flock() is
 * refused (some network file systems) nothing is locked. */
void htr_env__compute_lock(struct htr_env *e, bool on);

/* Commit @txn (counted) and begin the next write transaction in *@next,
 * for values written in batches.  Returns an LMDB code; *@next is NULL
 * unless it is 0. */
int htr_env__next(struct htr_env *e, MDB_txn *txn, MDB_txn **next);

/* Double the map after MDB_MAP_FULL.  LMDB allows it only while this
 * process has no transaction open: 0, or MDB_MAP_FULL when one is. */
int htr_env__grow(struct htr_env *e);

/* LMDB codes meaning a damaged file, or an unwritable sidecar. */
int htr_env__corrupt(int mrc);
int htr_env__unwritable(int mrc);

/* mdb_strerror(@mrc) of an LMDB call on @e's sidecar, but "No space left
 * on device" for the EIO LMDB makes of a short write when the sidecar's
 * file system is full.  Static or LMDB's; valid until the next call. */
const char *htr_env__strerror(const struct htr_env *e, int mrc);

/* An LMDB failure @mrc while doing @what, as an htr error on @err naming
 * the sidecar: HTR_ERR_NOMEM, HTR_ERR_CORRUPT ("remove it to
 * recompute") or HTR_ERR_IO.  Returns the code. */
int htr_env__fail(const struct htr_env *e, struct htr_err *err, int mrc,
		  const char *what);

#endif
