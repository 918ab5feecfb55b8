/*
 * Analyzers (internal view): the handle behind include/htr/analyze.h, the
 * TSC chunk codec, the two computations and the sidecar that stores them.
 *
 *   analyze.c      public API, in-memory results, reading
 *   analyze_tsc.c  cumulative TSC pass and the chunk codec
 *   analyze_sym.c  symbol index and per-function figures
 *   sidecar.c      the LMDB environment FILE.htr.lmdb/ (FORMAT.md)
 *
 * A handle reads its results either from the sidecar, through one read
 * transaction it keeps open until close (pointers into the LMDB map), or
 * from heap memory it owns (in-memory mode).
 */
#ifndef HTR_LIB_ANALYZE_H
#define HTR_LIB_ANALYZE_H

#include "err.h"
#include "htr/analyze.h"

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Versions of the stored results; bump on any change of their meaning or
 * layout (older results are then dropped and recomputed). */
#define HTR_TSC_VERSION 2u   /* 2: late blocks start at the first time point */
#define HTR_SYM_VERSION 2u   /* 2: figures from HTR_TSC_VERSION 2 */

/* TSC results: one value per chunk of HTR_TSC_CHUNK blocks. */
#define HTR_TSC_CHUNK 4096u
#define HTR_TSC_CHUNK_HDR 16u

/* Symbol index: block lists are stored in pieces of this many entries. */
#define HTR_SYM_PIECE 16384u
/* Longest name used as an LMDB key as is; longer ones are shortened. */
#define HTR_SYM_KEYMAX 480u

/* Named databases of the sidecar. */
enum htr_db {
	HTR_DB_META,     /* identity, analyzer records, counters */
	HTR_DB_TSC,      /* be32 chunk index -> TSC chunk */
	HTR_DB_NAMES,    /* name key -> struct htr_disk_fstats + name + NUL */
	HTR_DB_BLOCKS,   /* name key + be32 piece -> u32 LE block indices */
	HTR_DB_N
};

/* Per-function figures as stored (little-endian, 48 bytes) and in memory. */
struct htr_fstats {
	uint64_t calls, inclusive, local, slowest_total;
	uint32_t slowest;
	uint32_t npieces;        /* stored pieces of the block list */
	uint64_t nblocks;        /* == calls */
};

/* One distinct function name. */
struct htr_an_name {
	const char *name;        /* NUL-terminated; map or heap */
	const uint8_t *key;      /* LMDB key (map or heap) */
	size_t key_len;
	struct htr_fstats st;
	uint32_t *blocks;        /* in-memory mode: chronological list */
};

/*
 * One LMDB environment per sidecar per process (htr/store.h).  Shared by
 * threads: env, dbi[] and the strings never change after open; @lock
 * guards the rest and serializes, within the process, computing and
 * anything LMDB allows only without other transactions (map resizing).
 * Across processes LMDB's write lock serializes computing.
 */
struct htr_store {
	struct htr_err err;          /* open errors only */
	const struct htr_file *file;
	char *sidecar;
	char note[512];              /* why in memory */
	unsigned flags;              /* HTR_STORE_* */
	MDB_env *env;                /* NULL in memory */
	MDB_dbi dbi[HTR_DB_N];
	bool readonly;               /* env opened MDB_RDONLY */
	pthread_mutex_t lock;
	pthread_mutex_t compute;     /* held by the one computing thread */
	bool lock_ok;
	size_t mapsize;              /* under lock */
	unsigned active;             /* open txns of this process (lock) */
};

struct htr_analysis {
	struct htr_err err;
	const struct htr_file *file;   /* read through the tree API only */
	uint64_t nblocks;
	struct htr_store *store;
	bool own_store;          /* opened by htr_analysis_open() */
	unsigned want;           /* HTR_ANALYZE_* opened */
	unsigned flags;          /* HTR_ANALYSIS_* */
	const char *sidecar;     /* the store's */
	char note[512];

	/* Sidecar. */
	MDB_txn *txn;            /* txn results are read through (read txn
				  * after open; the write txn while computing) */
	bool counted;            /* txn is counted in store->active */

	/* TSC: per chunk, the value (map or heap) and whether it was checked. */
	uint64_t nchunks;
	const uint8_t **chunk;
	uint32_t *chunk_len;
	uint8_t *chunk_ok;
	uint8_t **mem_chunk;     /* in-memory mode: owned */

	/* Symbols. */
	struct htr_an_name *names;   /* sorted by key (LMDB order) */
	size_t nnames;
	uint32_t *func_name;         /* nfuncs + 1 entries (last: late) */
	uint64_t nfuncs;
	bool sym_heap;               /* names, keys, blocks are heap-owned */
	unsigned nskipped;
};

/* --- TSC (analyze_tsc.c) --- */

/* Receives each finished chunk; returns 0 or a negative htr_error. */
typedef int (*htr_tsc_emit_fn)(void *ctx, uint64_t chunk, const uint8_t *buf,
			       size_t len);

/* One post-order pass over @a->file: emits every chunk in order.
 * O(max depth) memory.  Returns 0 or a negative htr_error (message on
 * @a->err). */
int htr_tsc__compute(struct htr_analysis *a, htr_tsc_emit_fn emit, void *ctx);

/* Check chunk @c's value (size, header, checksum).  Returns 0 or
 * HTR_ERR_CORRUPT (message on @a->err). */
int htr_tsc__check_chunk(struct htr_analysis *a, uint64_t c,
			 const uint8_t *v, size_t len);

/* Decode entry @i of a checked chunk. */
void htr_tsc__decode(const uint8_t *v, uint32_t i, uint64_t *total,
		     uint64_t *local);

/* Figures of @block through the handle's current source (sidecar txn or
 * memory).  Returns 0, HTR_ERR_RANGE, HTR_ERR_CORRUPT, HTR_ERR_IO. */
int htr_tsc__get(struct htr_analysis *a, uint32_t block, uint64_t *total,
		 uint64_t *local);

/* Forget cached chunk pointers (the source txn changed). */
void htr_tsc__forget(struct htr_analysis *a);

/* --- Symbols (analyze_sym.c) --- */

/* The LMDB key of @name into @key (HTR_SYM_KEYMAX + 20 bytes). */
size_t htr_sym__key(const char *name, uint8_t *key);

/* Compute names and figures into @a (in memory: names, blocks lists,
 * func_name).  Needs the TSC results readable through htr_tsc__get. */
int htr_sym__compute(struct htr_analysis *a);

/* Free in-memory symbol results. */
void htr_sym__free(struct htr_analysis *a);

/* --- Sidecar (sidecar.c) --- */

/* Bring the wanted analyzers of @a->store up to date; on success the
 * handle reads through its own read txn.  Returns 0; 1 when the sidecar
 * cannot be used (the note says why: the caller computes in memory); or
 * a negative htr_error. */
int htr_sidecar__open(struct htr_analysis *a);

/* End the handle's read txn (the store stays open). */
void htr_sidecar__close(struct htr_analysis *a);

/* Fetch the stored TSC chunk @c through a->txn.  Returns 0,
 * HTR_ERR_CORRUPT (missing), HTR_ERR_IO. */
int htr_sidecar__tsc_chunk(struct htr_analysis *a, uint64_t c,
			   const uint8_t **v, size_t *len);

/* Visit piece after piece of @n's block list (sidecar mode). */
int htr_sidecar__blocks(struct htr_analysis *a, const struct htr_an_name *n,
			int (*fn)(const uint32_t *b, size_t nb, void *p),
			void *p);

#endif
