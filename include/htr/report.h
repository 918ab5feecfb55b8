/*
 * libhtr - reports: the rows `htr top` and `htr find` print, in their
 * order, and the text lines of `htr dump`, made once in the library for
 * every front end (the htr command, the LLDB plugin, the Python module,
 * an embedder's own tool), so that they sort, cut and print alike.
 *
 * Threads: the functions taking an analysis run on that handle's thread
 * (htr/analyze.h); the text functions on any thread.  The visitors
 * follow the callback contract of htr/common.h: they must return (no
 * longjmp, no C++ exception through libhtr); 0 goes on; a positive value
 * stops and is returned; a negative value must be the caller's own code
 * (HTR_ERR_USER or below) and comes back unchanged.
 */
#ifndef HTR_REPORT_H
#define HTR_REPORT_H

#include "htr/analyze.h"
#include "htr/tree.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* htr_top_visit() keys: the figure of struct htr_func_stats to sort by,
 * largest first, ties by name (byte order). */
enum htr_top_key {
	HTR_TOP_LOCAL = 0,
	HTR_TOP_INCLUSIVE = 1,
	HTR_TOP_CALLS = 2,
};

/**
 * `htr top`: call @fn for the functions whose names match @pattern
 * (NULL: all; @mode as for htr_func_visit()) by @key, at most @limit of
 * them (0: all).  Memory: one row per function, never per block.
 *
 * Returns 0, the callback's value when it stopped, HTR_ERR_CALLBACK,
 * HTR_ERR_NOTFOUND (nothing matched), HTR_ERR_INVALID (bad arguments or
 * key, or the symbol analyzer was not opened), HTR_ERR_NOMEM,
 * HTR_ERR_CORRUPT (message on @a).
 */
HTR_API int htr_top_visit(struct htr_analysis *a, const char *pattern,
			  int mode, int key, uint64_t limit, htr_func_fn fn,
			  void *payload);

/* htr_find_visit() orders. */
enum htr_find_order {
	/* Chronological: by first instruction; an outer block before the
	 * blocks it holds that start with it. */
	HTR_FIND_TIME = 0,
	/* Largest total first, then chronological. */
	HTR_FIND_COST = 1,
};

/* One invocation htr_find_visit() found (the library's own struct, valid
 * during the call only; it grows only at the end). */
struct htr_find_hit {
	size_t size;            /* sizeof the library's struct */
	uint32_t block;
	const char *name;       /* the function's name, owned by the analysis */
	uint64_t first, last;   /* instruction IDs */
	uint64_t total, local;  /* TSC ticks (the "tsc" analyzer) */
	/* Where the block's source position is asked for (the entry; for a
	 * late block the first address it ran), 0 if neither is known. */
	uint64_t where;
};

/** Called by htr_find_visit() per hit. */
typedef int (*htr_find_fn)(const struct htr_find_hit *hit, void *payload);

/**
 * `htr find`: the invocations htr_symidx_find() finds for @pattern
 * (@mode), in @order (enum htr_find_order), at most @limit (0: all).
 * @a is an analysis of @file with the "sym" and "tsc" analyzers.
 * Memory, for the sort: 40 bytes per invocation found, up to 2^20 of
 * them (40 MiB); past that they are sorted in runs spilled to an unlinked
 * temporary file in $TMPDIR (or /tmp; 40 bytes per invocation there)
 * and merged, in about as much memory again.  With a @limit of 2^20 or
 * less, 40 bytes per invocation kept, @limit at most, and no file.
 *
 * Returns as htr_top_visit(), or HTR_ERR_IO: errno not 0 when the
 * temporary file could not be made, written or read (errno says why), 0
 * when reading the analysis failed (the message on @a).
 */
HTR_API int htr_find_visit(const struct htr_file *file,
			   struct htr_analysis *a, const char *pattern,
			   int mode, int order, uint64_t limit,
			   htr_find_fn fn, void *payload);

/**
 * Where `htr dump --lines` and `htr find --lines` place @bi: its entry;
 * for a late block the first address it ran (where its "~NAME" comes
 * from).  0 if neither is known.
 */
HTR_API uint64_t htr_block_where(const struct htr_block_info *bi);

/*
 * Text lines of `htr dump`, into @buf (@size bytes, always terminated
 * when @size is not 0), without a newline.  Each returns the length the
 * whole line needs, as snprintf() does: @buf holds all of it when that
 * is below @size.  Any thread.
 *
 * Every line starts with the indentation of @level: two spaces a level
 * below level 64, from there on 128 spaces and the level in brackets
 * ("[70] "), so that a deep recursion does not make a dump quadratic.
 */

/** "FIRST..LAST  ENTRY  FLAGS": ENTRY "0x..." or "?" when the function's
 * entry was never traced. */
HTR_API size_t htr_text_block(char *buf, size_t size, uint32_t level,
			      const struct htr_block_info *bi);

/**
 * "NAME  LOCAL  TOTAL  PCT%": @local and @total as given (the caller's
 * unit, ticks or ns), PCT @part as a share of @whole with one decimal
 * (0 @whole: 100.0%).  `htr dump --tsc` takes the share in ticks: the
 * block's total of the outermost block's printed above it.
 */
HTR_API size_t htr_text_times(char *buf, size_t size, uint32_t level,
			      const char *name, uint64_t local,
			      uint64_t total, uint64_t part, uint64_t whole);

/**
 * Write @s to @fp as a JSON string: quoted, '"' and the backslash
 * escaped, control characters as \u00XX (RFC 8259), other bytes as they
 * are (names are UTF-8, or bytes a JSON reader takes as such), as every
 * JSON the library and `htr` print.  Errors stay on @fp (ferror()).
 * Any thread; @fp is the caller's to lock.  NULL is written as "".
 */
HTR_API void htr_json_string(FILE *fp, const char *s);

#ifdef __cplusplus
}
#endif

#endif /* HTR_REPORT_H */
