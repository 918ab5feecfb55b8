/*
 * libhtr - analyzers: cumulative TSC ticks per block and a symbol index.
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
 * TSC rule (details in docs/analyzers.md, "What the ticks mean"): for a
 * block, total = the time the decoder reports at its last instruction -
 * the time at its first; children = the sum of its children's totals; local = total - children.
 * Late blocks start with the trace, at the first time point (the first
 * PSB+'s time, at instruction 0); truncated blocks end at the last
 * instruction; time spent in a gap counts to every block whose span
 * contains the gap (the decoder's clock jumps across it), and is local to
 * the innermost such block.
 */
#ifndef HTR_ANALYZE_H
#define HTR_ANALYZE_H

#include "common.h"
#include "error.h"
#include "tree.h"
#include "store.h"
#include "analyzer.h"

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

/**
 * Cumulative ticks of @block: *@total (whole subtree), *@children (sum of
 * its children's totals) and *@local (total - children).  Any output
 * pointer may be NULL.  O(1) after the first access to the block's chunk of
 * 4096 blocks (which checks the chunk's checksum).
 *
 * Returns 0, HTR_ERR_RANGE (no such block), HTR_ERR_INVALID (NULL @a, or
 * the TSC analyzer was not opened), HTR_ERR_CORRUPT (the stored chunk is
 * damaged; the message names the sidecar).
 */
HTR_API int htr_tsc_get(struct htr_analysis *a, uint32_t block,
			uint64_t *total, uint64_t *children, uint64_t *local);

/**
 * The function name of @block in *@name: the (demangled) symbol at its
 * entry address, "MODULE+0xOFFSET" where no symbol starts there, "?" for a
 * late block (its entry was never traced).  *@name is owned by the handle
 * and valid until htr_analysis_close().
 *
 * Returns 0, HTR_ERR_RANGE, HTR_ERR_INVALID (NULL arguments, or the symbol
 * analyzer was not opened), HTR_ERR_CORRUPT.
 */
HTR_API int htr_block_name(struct htr_analysis *a, uint32_t block,
			   const char **name);

/** Per-function figures (htr_func_visit()). */
struct htr_func_stats {
	size_t size;            /* set by the library: sizeof(its struct);
				 * grows only at the end */
	const char *name;       /* owned by the handle, valid until close */
	uint64_t calls;         /* blocks (invocations) of the function */
	uint64_t inclusive;     /* sum of the totals of its invocations that
				 * have no ancestor of the same function
				 * (recursion counted once) */
	uint64_t local;         /* sum of the local ticks of all invocations */
	uint32_t slowest;       /* the block with the largest total (the
				 * earliest one on ties) */
	uint64_t slowest_total;
};

/* Match modes for htr_func_visit() and htr_symidx_find().  A pattern
 * without '!' also matches a name of the form MODULE!NAME (or a late
 * block's ~MODULE!NAME) by its NAME alone, so "memcpy" finds
 * libc.so.6!memcpy; a pattern with '!' matches whole names only.  A
 * pattern without '@' also matches a name with a symbol version by the
 * name before it ("memcpy" finds memcpy@@GLIBC_2.14 and memcpy@GLIBC_2.2.5,
 * and "memcpy@plt", a PLT stub nothing bound). */
#define HTR_MATCH_EXACT 0   /* @pattern is a name */
#define HTR_MATCH_GLOB  1   /* @pattern is an fnmatch(3) glob (no flags) */

/**
 * Called once per matching function, on the caller's thread.  @st is
 * valid during the call only.  The callback contract of htr/common.h
 * holds: it must return (no longjmp, no C++ exception through libhtr);
 * 0 goes on; a positive value stops the walk and is returned; a negative
 * value must be the caller's own code (HTR_ERR_USER or below) and is
 * returned unchanged.
 */
typedef int (*htr_func_fn)(const struct htr_func_stats *st, void *payload);

/**
 * Call @fn for every function whose name matches @pattern (NULL: every
 * function), in byte order of the names.  Reads only the per-function
 * table, never the blocks.
 *
 * Returns 0 when every match was visited, the callback's positive value
 * or own negative code when it stopped, HTR_ERR_CALLBACK (it returned a
 * value in libhtr's range), HTR_ERR_NOTFOUND (nothing matched),
 * HTR_ERR_INVALID (bad arguments, or the symbol analyzer was not opened),
 * HTR_ERR_CORRUPT.
 */
HTR_API int htr_func_visit(struct htr_analysis *a, const char *pattern,
			   int mode, htr_func_fn fn, void *payload);

/**
 * Called once per invocation, on the caller's thread: @name (owned by the
 * handle, valid until close) and @block.  The callback contract of
 * htr/common.h holds (as for htr_func_fn).
 */
typedef int (*htr_sym_fn)(const char *name, uint32_t block, void *payload);

/**
 * Symbol index lookup: for every function whose name matches @pattern (in
 * byte order of the names), call @fn for each of its blocks in
 * chronological order (by first instruction).  Then the blocks entered
 * through a function that always leads to a matching name, whose own name
 * does not match, each once under its own name: another name of the same
 * address (puts finds _IO_puts), a PLT stub's target, a tail jump its
 * first straight-line instructions end in (qsort_r finds qsort).
 *
 * Returns 0 when every block was visited, the callback's positive value
 * or own negative code when it stopped, HTR_ERR_CALLBACK,
 * HTR_ERR_NOTFOUND (no name matched), HTR_ERR_INVALID (bad arguments, or
 * the symbol analyzer was not opened), HTR_ERR_CORRUPT.
 */
HTR_API int htr_symidx_find(struct htr_analysis *a, const char *pattern,
			    int mode, htr_sym_fn fn, void *payload);

#ifdef __cplusplus
}
#endif

#endif /* HTR_ANALYZE_H */
