/*
 * libhtr - what the library's own analyzers answer: "tsc" (cumulative
 * TSC ticks per block) and "sym" (each block's function name, figures per
 * function, the symbol index).  Every store has both; a reader handle
 * (htr/analyze.h) opened with HTR_ANALYZE_TSC / HTR_ANALYZE_SYMS holds
 * their results, and these functions read them.  The tree itself (a
 * block's parent, children, instructions, flags) is htr/tree.h.
 *
 * Threads: a handle's (one thread at a time, see htr/analyze.h).  Errors:
 * the code is returned, the message is on the handle
 * (htr_analysis_last_error()).
 *
 * TSC rule (details in docs/analyzers.md, "What the ticks mean"): for a
 * block, total = the time the decoder reports at its last instruction -
 * the time at its first; children = the sum of its children's totals;
 * local = total - children.
 * Late blocks start with the trace, at the first time point (the first
 * PSB+'s time, at instruction 0); truncated blocks end at the last
 * instruction; time spent in a gap counts to every block whose span
 * contains the gap (the decoder's clock jumps across it), and is local to
 * the innermost such block.
 */
#ifndef HTR_BUILTINS_H
#define HTR_BUILTINS_H

#include "common.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct htr_analysis;

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

#endif /* HTR_BUILTINS_H */
