/*
 * libhtr - writing an analyzer: a versioned descriptor per analyzer,
 * registered on a store and obtained by name (htr_store_register() and
 * htr_store_get(), htr/store.h), and what its callbacks may call.
 *
 * An analyzer computes results over the public tree API (htr/tree.h),
 * stores them as key/value records in the sidecar through its own codec,
 * and reloads them from there.  The store keys everything by the
 * analyzer's name: its records, its version, the versions of what it
 * depends on, and a count of how often it was computed.  The library's
 * own analyzers are two descriptors like any other: "tsc" (cumulative TSC
 * ticks, htr_tsc_get()) and "sym" (names and the symbol index, depends on
 * "tsc"; htr_block_name(), htr_func_visit(), htr_symidx_find(); all in
 * htr/builtins.h); every store has them.
 *
 *   static int ipb_compute(struct htr_analyzer_ctx *c, void **res, void *p);
 *   static int ipb_encode(struct htr_analyzer_ctx *c, const void *res,
 *                         void *p);        // htr_analyzer_put() each value
 *   static int ipb_decode(struct htr_analyzer_ctx *c, void **res, void *p);
 *   static void ipb_free(void *res, void *p);
 *
 *   struct htr_analyzer d;
 *   htr_analyzer_init(&d);
 *   d.name = "ipb"; d.version = 1;
 *   d.compute = ipb_compute; d.encode = ipb_encode;
 *   d.decode = ipb_decode; d.free = ipb_free;
 *   htr_store_register(store, &d);
 *   ...
 *   const void *res;
 *   htr_store_get(store, "ipb", reader, &res);   // GetOrCreate
 *
 * Life of a result.  htr_store_get() finds the analyzer's records current
 * (same .htr identity, same version, dependencies current and unchanged,
 * the optional current() hook agrees) and calls decode(); or, once per
 * sidecar however many threads and processes ask, computes the
 * dependencies first, calls compute() (which may store values already,
 * htr_analyzer_storing()), encode() into LMDB write transactions, free()
 * and commits, then decodes.  When the sidecar cannot be written,
 * compute()'s result is handed to the reader as is (never encoded).  So
 * decode() and compute() must produce results the same accessors read.
 *
 * Callbacks (compute, encode, decode, current, free) run on the thread
 * that called htr_store_get() or htr_analysis_open*(), possibly while the
 * store's lock for computing and an LMDB write transaction are held: they
 * must not call htr_store_get(), htr_analysis_open*() or
 * htr_store_register() themselves, and the callback contract of
 * htr/common.h holds (they must return; a negative return is an error
 * code, HTR_ERR_* or the caller's own, and is returned to the caller of
 * htr_store_get(); set a message with htr_analyzer_fail()).
 */
#ifndef HTR_ANALYZER_H
#define HTR_ANALYZER_H

#include "common.h"
#include "error.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a callback of a descriptor gets: the file, and (depending on the
 * callback) its dependencies, a sink or a source of stored values. */
struct htr_analyzer_ctx;

/* Longest analyzer name (bytes, without the NUL). */
#define HTR_ANALYZER_NAME_MAX 16
/* Longest key an analyzer may use (bytes). */
#define HTR_ANALYZER_KEY_MAX 490

/* An analyzer (the size rule: htr/common.h; first version: through
 * payload).  The library copies the descriptor; the strings it points to
 * (name, deps) must stay valid while the store is open. */
struct htr_analyzer {
	size_t size;             /* sizeof(struct htr_analyzer) */
	const char *name;        /* 1..HTR_ANALYZER_NAME_MAX of [a-z0-9_];
				  * unique on a store */
	uint32_t version;        /* bump whenever the meaning or layout of
				  * the stored values changes: older records
				  * are then dropped and recomputed */
	const char *const *deps; /* names of analyzers computed first and
				  * readable in compute() (NULL-terminated
				  * array; NULL: none).  A dependency that
				  * is recomputed makes this one stale. */
	/* Compute the results over the tree API into *@result (owned by
	 * the analyzer until free()).  Returns 0 or a negative code. */
	int (*compute)(struct htr_analyzer_ctx *ctx, void **result,
		       void *payload);
	/* Store @result with htr_analyzer_put() (what compute() did not
	 * store itself).  Returns 0 or negative. */
	int (*encode)(struct htr_analyzer_ctx *ctx, const void *result,
		      void *payload);
	/* Build *@result from the stored values (htr_analyzer_value(),
	 * htr_analyzer_scan()); @ctx and every value it returns stay
	 * valid until free(@result), so decode may read lazily.  Check
	 * what it reads (sizes, checksums): damage is HTR_ERR_CORRUPT.
	 * Returns 0 or negative. */
	int (*decode)(struct htr_analyzer_ctx *ctx, void **result,
		      void *payload);
	/* Free a result of compute() or decode(); NULL must be fine. */
	void (*free)(void *result, void *payload);
	/* Optional: 1 if the stored values (readable through @ctx) are
	 * still current for the file beyond the version check, 0 if they
	 * must be recomputed, negative on errors.  NULL: always current. */
	int (*current)(struct htr_analyzer_ctx *ctx, void *payload);
	void *payload;           /* passed to every callback */
};

/**
 * Set the @size bytes at @d to zero and d->size to @size.  Use
 * htr_analyzer_init().
 */
HTR_API void htr_analyzer_init_size(struct htr_analyzer *d, size_t size);

/** Set @d to zero, with the caller's sizeof. */
static inline void htr_analyzer_init(struct htr_analyzer *d)
{
	htr_analyzer_init_size(d, sizeof(*d));
}

/* --- for the callbacks of a descriptor --- */

/** The .htr file being analysed.  Any callback. */
HTR_API const struct htr_file *htr_analyzer_file(
	const struct htr_analyzer_ctx *ctx);

/**
 * The result of dependency @name (one of the descriptor's deps), valid
 * during compute() only.  Returns 0, HTR_ERR_NOTFOUND (not a declared
 * dependency), HTR_ERR_INVALID (not in compute()).
 */
HTR_API int htr_analyzer_dep(struct htr_analyzer_ctx *ctx, const char *name,
			     const void **result);

/**
 * 1 if values go to the sidecar through @ctx: in encode(), and in a
 * compute() whose results will be encoded (the sidecar is writable);
 * 0 when compute() works for memory only (no sidecar, or read-only:
 * encode() will not be called and the result is read as computed).
 * A compute() that stores its values as it goes (htr_analyzer_put())
 * keeps its memory bounded by what it has not stored yet.
 */
HTR_API int htr_analyzer_storing(const struct htr_analyzer_ctx *ctx);

/**
 * Store value @val (@vlen bytes) under @key (1..HTR_ANALYZER_KEY_MAX
 * bytes) of this analyzer; a key stored twice keeps the last value.
 * In encode(), and in compute() when htr_analyzer_storing() is 1: the
 * results of compute() and encode() are stored together.  Keys put in
 * increasing order (LMDB's: bytes, then length) are appended, the
 * cheapest way.  Values may be committed in batches before the analyzer
 * is done: no reader sees them until its record is written (FORMAT.md,
 * "Sidecar"), and dependencies' results stay readable.  Returns 0,
 * HTR_ERR_INVALID, HTR_ERR_NOMEM, HTR_ERR_IO (message set).
 */
HTR_API int htr_analyzer_put(struct htr_analyzer_ctx *ctx, const void *key,
			     size_t klen, const void *val, size_t vlen);

/**
 * The value stored under @key, in *@val (*@vlen bytes; not aligned, read
 * it byte-wise), valid until the result decoded with @ctx is freed.  In
 * decode(), current() and later through the ctx decode() got.  Returns 0,
 * HTR_ERR_NOTFOUND (no such key), HTR_ERR_INVALID, HTR_ERR_IO,
 * HTR_ERR_CORRUPT.
 */
HTR_API int htr_analyzer_value(struct htr_analyzer_ctx *ctx, const void *key,
			       size_t klen, const void **val, size_t *vlen);

/** Called by htr_analyzer_scan() per value; @key and @val stay valid as
 * for htr_analyzer_value().  The callback contract of htr/common.h. */
typedef int (*htr_analyzer_scan_fn)(const void *key, size_t klen,
				    const void *val, size_t vlen,
				    void *payload);

/**
 * Call @fn for every value of this analyzer whose key starts with
 * @prefix (@plen bytes; 0: all), in key order (bytes, then length).
 * Where htr_analyzer_value() may be called.  Returns 0, the callback's
 * value when it stopped, HTR_ERR_CALLBACK, HTR_ERR_INVALID, HTR_ERR_IO,
 * HTR_ERR_CORRUPT.
 */
HTR_API int htr_analyzer_scan(struct htr_analyzer_ctx *ctx,
			      const void *prefix, size_t plen,
			      htr_analyzer_scan_fn fn, void *payload);

/**
 * Record an error message (printf-style) for the caller of
 * htr_store_get() and return @code, so callbacks can
 * `return htr_analyzer_fail(ctx, HTR_ERR_CORRUPT, "...")`.  Any callback,
 * and later through the ctx decode() got (on the reader's thread).
 */
HTR_API int htr_analyzer_fail(struct htr_analyzer_ctx *ctx, int code,
			      const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

/** Where the values live, for messages: the sidecar directory, or
 * "memory".  Owned by the store. */
HTR_API const char *htr_analyzer_sidecar(const struct htr_analyzer_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* HTR_ANALYZER_H */
