/*
 * libhtr - the sidecar store: one LMDB environment per sidecar per process.
 *
 * Analyzer results live in the sidecar FILE.htr.lmdb/ (htr/analyze.h).
 * LMDB forbids opening one environment twice in a process (its "Caveats":
 * the two handles share one lock file, and closing either releases the
 * other's reader protection), so the environment is owned by one struct
 * htr_store per sidecar per process, and threads read through their own
 * struct htr_analysis handles opened over it (htr_analysis_open_store()).
 *
 *   struct htr_store *s = NULL;
 *   if (htr_store_open(&s, file, NULL) < 0)
 *           fprintf(stderr, "%s\n", htr_store_last_error(s));
 *   // in each thread:
 *   struct htr_analysis *a = NULL;
 *   if (htr_analysis_open_store(&a, s, NULL) == 0)
 *           htr_tsc_get(a, block, &total, NULL, NULL);
 *   htr_analysis_close(a);
 *   // after every thread closed its handle:
 *   htr_store_close(s);
 *
 * Rules:
 *  - A process must use ONE store per sidecar: two stores on the same
 *    directory are two environments, exactly what LMDB forbids.  The
 *    library never opens the environment twice through one store, and
 *    htr_analysis_open() (which opens a private store) is meant for
 *    programs with one handle per sidecar.
 *  - Threads: every function here and htr_analysis_open_store() may be
 *    called from any thread at the same time (the store serializes what
 *    must be serialized).  Each struct htr_analysis belongs to one thread
 *    at a time; its reads run in its own LMDB read transaction (MDB_NOTLS:
 *    one reader slot per handle, never tied to the thread).
 *  - Processes: any number may use the same sidecar; an analyzer that is
 *    missing is computed once between them (LMDB's write lock).  Do not
 *    use a store in a child after fork(); open a new one there.
 *  - Lifetime: the store borrows @file, which must stay open until
 *    htr_store_close(); close every handle opened over the store first.
 */
#ifndef HTR_STORE_H
#define HTR_STORE_H

#include "common.h"
#include "error.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

struct htr_store;
struct htr_analyzer;   /* htr/analyzer.h */
struct htr_analysis;   /* htr/analyze.h */

/* Options of htr_store_open() (the size rule: htr/common.h; first
 * version: through no_sidecar). */
struct htr_store_opts {
	size_t size;            /* sizeof(struct htr_store_opts) */
	const char *sidecar;    /* sidecar directory; NULL: "FILE.htr.lmdb"
				 * (the path the file was opened with) */
	int no_sidecar;         /* compute in memory, do not touch a sidecar */
};

/**
 * Set the @size bytes at @opts to the defaults (all zero: the default
 * sidecar) and opts->size to @size.  Use htr_store_opts_init().
 */
HTR_API void htr_store_opts_init_size(struct htr_store_opts *opts,
				      size_t size);

/** Set @opts to the defaults, with the caller's sizeof. */
static inline void htr_store_opts_init(struct htr_store_opts *opts)
{
	htr_store_opts_init_size(opts, sizeof(*opts));
}

/**
 * Open the sidecar of @file: create the directory and the environment if
 * needed.  Computes nothing (the handles opened over the store do, once).
 * When the sidecar cannot be used (cannot be created, read-only and out
 * of date, ...) the store still opens and works in memory:
 * htr_store_flags() then has HTR_STORE_IN_MEMORY and htr_store_note()
 * says why.
 *
 * On failure *@out is still set to a handle in a failed state whenever
 * memory allows (htr_store_last_error() explains); the caller always
 * calls htr_store_close(*@out).
 *
 * Returns 0, HTR_ERR_INVALID (NULL @out, a failed @file, opts->size below
 * the first version's), HTR_ERR_NOMEM, HTR_ERR_IO, HTR_ERR_CORRUPT (the
 * sidecar is damaged; the message names it: remove it to recompute).
 */
HTR_API int htr_store_open(struct htr_store **out, const struct htr_file *file,
			   const struct htr_store_opts *opts);

/** Close the environment and free.  Every handle opened over the store
 * must be closed before.  NULL is fine. */
HTR_API void htr_store_close(struct htr_store *store);

/** The message of a failed htr_store_open() ("" if none; NULL gives "").
 * Owned by the store; valid until close. */
HTR_API const char *htr_store_last_error(const struct htr_store *store);

#define HTR_STORE_IN_MEMORY 0x1u  /* the sidecar cannot be used: results
				   * are computed in memory by each handle */

/** HTR_STORE_* bits (0 for NULL). */
HTR_API unsigned htr_store_flags(const struct htr_store *store);

/** Why the store works in memory, one line; "" otherwise.  Owned by the
 * store; valid until close. */
HTR_API const char *htr_store_note(const struct htr_store *store);

/** The sidecar directory's path ("" for NULL).  Owned by the store. */
HTR_API const char *htr_store_sidecar(const struct htr_store *store);

/*
 * Figures, not settings: how many readers a sidecar holds at once (the
 * size rule: htr/common.h; first version: through process_readers).  A
 * sidecar serves a fixed number of readers across every process that
 * has it open (126); each reader handle takes one for each analyzer it
 * has read, until it is closed.  A server that keeps handles open reads
 * these to stay below the limit: past it, opening a handle fails with
 * HTR_ERR_LIMIT.
 */
struct htr_store_info {
	size_t size;               /* set by the library: bytes filled */
	uint32_t max_readers;      /* readers the sidecar can hold */
	uint32_t readers;          /* held now, by every process */
	uint32_t process_readers;  /* held now by this process */
};

/**
 * The reader figures now, into @info of @size bytes.  For a store in
 * memory everything is 0.  Returns 0, HTR_ERR_INVALID (NULL arguments,
 * @size below the first version's), HTR_ERR_IO.
 */
HTR_API int htr_store_info(const struct htr_store *store,
			   struct htr_store_info *info, size_t size);

/* --- analyzers on the store (writing one: htr/analyzer.h) --- */

/**
 * Register analyzer @d on @store (copied; see struct htr_analyzer for the
 * strings).  Any thread, any time; handles opened before see it too.
 *
 * Returns 0, HTR_ERR_INVALID (NULL arguments, @d->size below the first
 * version's, a bad name, a missing callback, a name already registered,
 * more than 31 dependencies, more than 32 analyzers), HTR_ERR_NOMEM.
 */
HTR_API int htr_store_register(struct htr_store *store,
			       const struct htr_analyzer *d);

/**
 * GetOrCreate: the results of analyzer @name for @reader, a handle opened
 * over @store (htr_analysis_open_store(), or htr_analysis_open()'s private
 * store: htr_analysis_store()).  Reloads them, or computes and stores
 * them (once per sidecar across threads and processes), and decodes them
 * into @reader; *@result is the analyzer's decoded result, owned by
 * @reader and valid until htr_analysis_close(@reader).  The second call
 * for the same name returns the same result at once.  An analyzer not
 * already read when @reader was opened takes one more LMDB reader slot.
 * When the sidecar cannot be written, the result is computed in memory
 * for @reader (HTR_ANALYSIS_IN_MEMORY, htr_analysis_note()).
 *
 * Threads: @reader's thread (see htr/analyze.h).  @reader NULL (and
 * @result NULL): only make sure the results are stored.
 *
 * Returns 0, HTR_ERR_INVALID (bad arguments, @reader not over @store),
 * HTR_ERR_NOTFOUND (no analyzer of that name, or a dependency missing;
 * also a dependency cycle), HTR_ERR_NOMEM, HTR_ERR_IO, HTR_ERR_CORRUPT
 * (the message names the sidecar), or an analyzer callback's negative
 * code.  The message is on @reader (htr_analysis_last_error()).
 */
HTR_API int htr_store_get(struct htr_store *store, const char *name,
			  struct htr_analysis *reader, const void **result);

#ifdef __cplusplus
}
#endif

#endif /* HTR_STORE_H */
