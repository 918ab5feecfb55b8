/*
 * libhtr - reader handles: the analyses of an .htr, reloaded or computed.
 *
 * Results are computed once and kept in a sidecar beside the .htr file: an
 * LMDB environment, the directory FILE.htr.lmdb/ (FORMAT.md, "Sidecar").
 * htr_analysis_open() reloads them when the sidecar belongs to this very
 * .htr file and was written by the same analyzer versions; otherwise it
 * recomputes them and stores them.  When the sidecar cannot be written
 * (read-only directory, full disk, ...) the results are computed in memory
 * and the handle says so (HTR_ANALYSIS_IN_MEMORY); the library never prints.
 *
 * Processes: any number may open the same sidecar at once.  Two processes
 * that find the same analyzer missing compute it once between them: the
 * computation runs inside an LMDB write transaction, which serializes them,
 * and the second re-checks inside its transaction and finds it done.
 *
 * Threads: a struct htr_analysis belongs to one thread at a time (it caches
 * what it has read).  To read in parallel, open ONE struct htr_store per
 * sidecar in the process (htr/store.h) and one handle per thread over it
 * with htr_analysis_open_store().  htr_analysis_open() opens a private
 * store for the handle: fine for one handle per sidecar, wrong for two
 * (LMDB forbids opening an environment twice in a process).  Do not use a
 * handle in a child after fork(); open a new one there.
 *
 *   struct htr_analysis_opts ao;
 *   struct htr_analysis *a = NULL;
 *   htr_analysis_opts_init(&ao);
 *   if (htr_analysis_open(&a, file, &ao) < 0)
 *           fprintf(stderr, "%s\n", htr_analysis_last_error(a));
 *   htr_tsc_get(a, block, &total, &children, &local);
 *   htr_analysis_close(a);
 *
 * What the built-in analyzers answer (htr_tsc_get(), htr_block_name(),
 * htr_func_visit(), htr_symidx_find()) is in htr/builtins.h; the store
 * and GetOrCreate (htr_store_get()) in htr/store.h; writing an analyzer
 * in htr/analyzer.h.
 */
#ifndef HTR_ANALYZE_H
#define HTR_ANALYZE_H

#include "common.h"
#include "error.h"
#include "tree.h"
#include "store.h"
#include "analyzer.h"
#include "builtins.h"   /* what the analyzers answer, for older includers */

#ifdef __cplusplus
extern "C" {
#endif

struct htr_analysis;

/* Analyzers (struct htr_analysis_opts.analyzers). */
#define HTR_ANALYZE_TSC  0x1u   /* cumulative TSC ticks per block */
#define HTR_ANALYZE_SYMS 0x2u   /* names, symbol -> blocks index, per-function
				 * figures; implies HTR_ANALYZE_TSC */
#define HTR_ANALYZE_ALL  0x3u

/* Options of htr_analysis_open() (the size rule: htr/common.h; first
 * version: through no_sidecar). */
struct htr_analysis_opts {
	size_t size;            /* sizeof(struct htr_analysis_opts) */
	unsigned analyzers;     /* HTR_ANALYZE_*; 0 means HTR_ANALYZE_ALL */
	const char *sidecar;    /* sidecar directory; NULL: "FILE.htr.lmdb"
				 * (the path the file was opened with) */
	int no_sidecar;         /* compute in memory, do not touch a sidecar */
};

/**
 * Set the @size bytes at @opts to the defaults (all zero: every analyzer,
 * the default sidecar) and opts->size to @size.  Use
 * htr_analysis_opts_init().
 */
HTR_API void htr_analysis_opts_init_size(struct htr_analysis_opts *opts,
					 size_t size);

/** Set @opts to the defaults, with the caller's sizeof. */
static inline void htr_analysis_opts_init(struct htr_analysis_opts *opts)
{
	htr_analysis_opts_init_size(opts, sizeof(*opts));
}

/* Status bits (htr_analysis_flags()). */
#define HTR_ANALYSIS_COMPUTED   0x1u /* this open computed an analyzer */
#define HTR_ANALYSIS_RELOADED   0x2u /* this open reused stored results */
#define HTR_ANALYSIS_IN_MEMORY  0x4u /* the sidecar could not be used: the
				      * results live in memory and die with
				      * the handle; htr_analysis_note() says
				      * why */
#define HTR_ANALYSIS_SYMS_PARTIAL 0x8u /* some images could not be read for
				      * symbols; their code is named
				      * "MODULE+0xOFFSET" */

/**
 * Open the analyses of @file: reload them from the sidecar, or compute
 * (and store) those that are missing, stale or of another version.
 *
 * @file must stay open until htr_analysis_close().  @opts may be NULL.
 * Computing walks every block once (the symbol index twice) and may take
 * seconds on large files; reloading reads a few pages.
 *
 * On failure *@out is still set to a handle in a failed state whenever
 * memory allows, so htr_analysis_last_error() can explain; the caller always
 * calls htr_analysis_close(*@out).
 *
 * Returns 0, or HTR_ERR_INVALID (NULL @out or @file, a failed @file,
 * opts->size below the first version's), HTR_ERR_NOMEM, HTR_ERR_IO (the sidecar exists but cannot be
 * read), HTR_ERR_CORRUPT (the sidecar or @file is damaged; the message
 * names the sidecar: remove it to recompute).
 */
HTR_API int htr_analysis_open(struct htr_analysis **out,
			      const struct htr_file *file,
			      const struct htr_analysis_opts *opts);

/**
 * Open a handle over @store (shared by the process's threads, see
 * htr/store.h): reload the wanted analyzers or compute and store them
 * (once per sidecar, however many threads and processes ask).  The handle
 * belongs to the calling thread until closed; it takes one LMDB reader
 * slot.  opts->sidecar and opts->no_sidecar are ignored (the store
 * decides).  When the store works in memory, each handle computes its
 * own results.  @store must stay open until htr_analysis_close().
 *
 * On failure *@out is set as for htr_analysis_open(); returns as it does.
 */
HTR_API int htr_analysis_open_store(struct htr_analysis **out,
				    struct htr_store *store,
				    const struct htr_analysis_opts *opts);

/** The store @a reads through (its private one after
 * htr_analysis_open()), for htr_store_get() and htr_store_register();
 * NULL for NULL.  Owned by the store's opener. */
HTR_API struct htr_store *htr_analysis_store(const struct htr_analysis *a);

/** Close the handle and free everything it owns (and its private store,
 * if htr_analysis_open() opened one).  NULL is fine. */
HTR_API void htr_analysis_close(struct htr_analysis *a);

/**
 * The message of the last failure on @a ("" if none).  Owned by the handle;
 * valid until the next call on it.  NULL @a gives "".
 */
HTR_API const char *htr_analysis_last_error(const struct htr_analysis *a);

/** HTR_ANALYSIS_* bits describing how the open went (0 for NULL). */
HTR_API unsigned htr_analysis_flags(const struct htr_analysis *a);

/**
 * Why the sidecar was not used (HTR_ANALYSIS_IN_MEMORY) or why symbols are
 * partial, as one line without a newline; "" if there is nothing to say.
 * Owned by the handle; valid until htr_analysis_close().
 */
HTR_API const char *htr_analysis_note(const struct htr_analysis *a);

/**
 * The sidecar directory's path (also set for in-memory results: the path
 * that could not be used).  Owned by the handle; valid until close.
 */
HTR_API const char *htr_analysis_sidecar(const struct htr_analysis *a);

#ifdef __cplusplus
}
#endif

#endif /* HTR_ANALYZE_H */
