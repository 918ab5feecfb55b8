/*
 * libhtr - reading a call tree.
 *
 * A struct htr_file is an opened .htr file: read-only, memory-mapped, fully
 * bounds-checked when opened and on every access.  All functions here only
 * read it, so one handle may be shared by any number of threads.  Blocks
 * are identified by a uint32_t index in [0, htr_block_count()); HTR_NONE
 * means "no block".  A block's function name and TSC ticks come from the
 * analyzers: htr_block_name() and htr_tsc_get() in htr/builtins.h.
 */
#ifndef HTR_TREE_H
#define HTR_TREE_H

#include "common.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct htr_file;

#define HTR_NONE UINT32_MAX

/* Block flags (struct htr_block_info.flags). */
#define HTR_BLOCK_LATE      0x01u /* entered before the trace began: no call
				   * was seen, entry address unknown */
#define HTR_BLOCK_TRUNCATED 0x02u /* still open when the trace ended */
#define HTR_BLOCK_GAP       0x04u /* some of its execution is missing: it
				   * was open when a gap began, or its first
				   * instructions were lost in one */
#define HTR_BLOCK_IMPLICIT  0x08u /* closed without a return: tracing
				   * resumed at an outer frame's return
				   * address or function, or after a far
				   * transfer (syscall, sysenter, ...) */
#define HTR_BLOCK_UNWOUND   0x10u /* abandoned without a return (longjmp,
				   * exception, stack switch): closed at the
				   * return or indirect jump that landed in
				   * an outer frame */

/**
 * @flags (HTR_BLOCK_*) as htr dump prints them: the names late,
 * truncated, gap, implicit-return and unwound, in that order, joined by
 * commas, or "-" for none, into @buf of @size bytes (cut to fit and
 * NUL-terminated when @size > 0; 64 bytes always fit).  Returns @buf.
 * Any thread.
 */
HTR_API const char *htr_block_flags_str(uint32_t flags, char *buf,
					size_t size);

/* Options of htr_file_open() (the size rule: htr/common.h). */
struct htr_open_opts {
	size_t size;            /* sizeof(struct htr_open_opts) */
	int verify_body;        /* also hash every section (reads the file) */
};

/**
 * Set the @size bytes at @opts to the defaults (all zero: no full-body
 * verification) and opts->size to @size.  Use htr_open_opts_init().
 */
HTR_API void htr_open_opts_init_size(struct htr_open_opts *opts, size_t size);

/** Set @opts to the defaults; compiled into the caller, so the size is
 * the caller's sizeof. */
static inline void htr_open_opts_init(struct htr_open_opts *opts)
{
	htr_open_opts_init_size(opts, sizeof(*opts));
}

/**
 * Open and validate an .htr file.
 *
 * On success *@out is a new handle.  On failure *@out is still set to a
 * handle in a failed state whenever memory allows, so htr_last_error() can
 * say what is wrong; the caller always calls htr_file_close(*out).
 * @opts may be NULL for the defaults.
 *
 * Returns 0, or HTR_ERR_IO (cannot open/map), HTR_ERR_FORMAT (not an .htr
 * file, or the other endianness), HTR_ERR_VERSION (other format version),
 * HTR_ERR_CORRUPT (inconsistent or truncated), HTR_ERR_NOMEM,
 * HTR_ERR_INVALID (@out or @path NULL, opts->size below the first
 * version's).
 */
HTR_API int htr_file_open(struct htr_file **out, const char *path,
			  const struct htr_open_opts *opts);

/**
 * Open and validate an .htr file held in memory: @size bytes at @data,
 * 8-byte aligned (malloc'ed memory is), read in place.  The bytes are
 * checked exactly as a file's (every bound, count and checksum
 * htr_file_open() checks; opts->verify_body as there), so any bytes are
 * safe to pass.  @data must stay valid and unchanged until
 * htr_file_close(), which does not free it.  The handle has no path
 * (htr_file_path() is NULL; messages say "(memory)"), so analyses of it
 * have no sidecar and are computed in memory.
 *
 * On failure *@out is set as for htr_file_open().  Returns as
 * htr_file_open(), with HTR_ERR_INVALID also for NULL @data or a
 * misaligned buffer, HTR_ERR_FORMAT for @size 0.
 */
HTR_API int htr_file_open_buffer(struct htr_file **out, const void *data,
				 size_t size, const struct htr_open_opts *opts);

/** Unmap and free.  NULL is fine. */
HTR_API void htr_file_close(struct htr_file *file);

/**
 * The message of the last failure on @file ("" if none), as every handle
 * has one: htr_<handle>_last_error().  Owned by the handle; valid until
 * the next call on it or htr_file_close().  Open errors are the only ones
 * that change it, so it is safe to read from any thread after a failed
 * open.
 */
HTR_API const char *htr_file_last_error(const struct htr_file *file);

/** htr_file_last_error()'s first name, kept for programs that use it. */
HTR_API const char *htr_last_error(const struct htr_file *file);

/* Header facts (the size rule: htr/common.h; first version: through
 * build_time). */
struct htr_file_info {
	size_t size;               /* set by the library: bytes filled */
	uint32_t version;
	uint64_t file_size;
	uint64_t ninsns;
	uint64_t nblocks;
	uint64_t nroots;
	uint64_t nfuncs, ngaps, ntsc, nsync, nimages;
	uint32_t max_depth;
	uint64_t trace_size, trace_hash, image_hash, body_hash;
	uint32_t libipt_version[4];
	uint64_t build_time;
};

/**
 * Header facts into @info, a struct of @size bytes (normally
 * sizeof(*info)).  Returns 0 or HTR_ERR_INVALID (NULL or failed @file,
 * NULL @info, @size below the first version's).
 */
HTR_API int htr_file_info(const struct htr_file *file,
			  struct htr_file_info *info, size_t size);

/** Number of blocks (0 for NULL). */
HTR_API uint32_t htr_block_count(const struct htr_file *file);

/* A block's facts (the size rule: htr/common.h; first version: through
 * flags). */
struct htr_block_info {
	size_t size;               /* set by the library: bytes filled */
	uint32_t index;
	uint64_t first, last;      /* instruction IDs; the span includes children */
	uint64_t entry;            /* entry address, 0 if HTR_BLOCK_LATE */
	uint32_t func;             /* index of the entry in the function table,
				    * HTR_NONE if unknown */
	uint32_t parent;           /* HTR_NONE for a root */
	uint32_t nchildren;
	uint32_t flags;            /* HTR_BLOCK_* */
	/* Added in format version 2 (0 / HTR_NONE in older files): an
	 * address inside the block's function - its entry, or for a late
	 * block the first address it ran itself (not its entry: the function
	 * containing it is inferred) - and its index in the function table
	 * (HTR_NONE if unknown). */
	uint64_t anchor;
	uint32_t anchor_func;
};

/**
 * Copy block @block's facts into @info, a struct of @size bytes (normally
 * sizeof(*info)).  Returns 0, HTR_ERR_RANGE (no such block),
 * HTR_ERR_CORRUPT (a link in the record points outside the file),
 * HTR_ERR_INVALID (NULL arguments, @size below the first version's).
 */
HTR_API int htr_block_get(const struct htr_file *file, uint32_t block,
			  struct htr_block_info *info, size_t size);

/* O(1) navigation.  Each returns HTR_NONE when there is no such block or
 * @block is out of range (corrupt links also give HTR_NONE). */
HTR_API uint32_t htr_block_parent(const struct htr_file *file, uint32_t block);
HTR_API uint32_t htr_block_first_child(const struct htr_file *file,
				       uint32_t block);
HTR_API uint32_t htr_block_next_sibling(const struct htr_file *file,
					uint32_t block);
/** Number of children (0 if out of range). */
HTR_API uint32_t htr_block_child_count(const struct htr_file *file,
				       uint32_t block);
/** The first root (roots are chained by htr_block_next_sibling). */
HTR_API uint32_t htr_tree_first_root(const struct htr_file *file);

/**
 * Depth of @block: 1 for a root.  O(depth).
 * Returns the depth, or HTR_ERR_RANGE / HTR_ERR_CORRUPT (a parent cycle).
 */
HTR_API int64_t htr_block_depth(const struct htr_file *file, uint32_t block);

enum htr_order {
	HTR_PREORDER,      /* parents before children */
	HTR_POSTORDER,     /* children before parents */
};

/**
 * Visitor: @level is 0 for the block the walk started from (or for roots).
 * Called on the caller's thread; it must return (no longjmp, no C++
 * exception through libhtr).  Return 0 to go on; a positive value stops
 * the walk and htr_tree_visit() returns it; a negative value must be the
 * caller's own code (HTR_ERR_USER or below) and comes back unchanged
 * (htr/common.h, "Callbacks").  In pre-order, returning HTR_VISIT_SKIP
 * skips the block's children and goes on (it does not stop).
 */
typedef int (*htr_visit_fn)(const struct htr_file *file, uint32_t block,
			    uint32_t parent, uint32_t level, void *payload);
#define HTR_VISIT_SKIP 0x7fffffff

/**
 * Walk the subtree of @from (HTR_NONE: every root in order), children in
 * chronological order, without allocating.  Returns 0 when the walk
 * completed, the visitor's positive value or own negative code if it
 * stopped, HTR_ERR_CALLBACK if it returned a value in libhtr's range,
 * HTR_ERR_RANGE for a bad @from, HTR_ERR_CORRUPT for inconsistent links,
 * HTR_ERR_INVALID.
 */
HTR_API int htr_tree_visit(const struct htr_file *file, uint32_t from,
			   enum htr_order order, htr_visit_fn fn, void *payload);

/**
 * The deepest block whose span contains instruction @id, in *@block.
 * O(log n) plus the depth between that block and the one that ends next.
 * Returns 0, HTR_ERR_NOTFOUND (@id lies outside every block: top-level
 * code) or HTR_ERR_RANGE (@id >= the instruction count).
 */
HTR_API int htr_block_for_insn(const struct htr_file *file, uint64_t id,
			       uint32_t *block);

/**
 * The TSC the decoder reported at instruction @id, in *@tsc.  O(log n).
 * Returns 0, HTR_ERR_NOTFOUND (no time known yet at @id), HTR_ERR_RANGE.
 */
HTR_API int htr_tsc_for_insn(const struct htr_file *file, uint64_t id,
			     uint64_t *tsc);

/** Number of time points: the ends of runs of instructions (calls,
 * returns, events, PSBs, a callee's first jump when it read trace) where
 * the decoder's TSC had changed. */
HTR_API uint64_t htr_tsc_count(const struct htr_file *file);

/**
 * Time point @i (chronological): from instruction *@id on, the decoder
 * reported *@tsc.  The first point is the time of the trace's first PSB+
 * (instruction 0).  Returns 0, HTR_ERR_RANGE (no such point),
 * HTR_ERR_INVALID.
 */
HTR_API int htr_tsc_point(const struct htr_file *file, uint64_t i,
			  uint64_t *id, uint64_t *tsc);

/* Start value of the hint of htr_tsc_lookup(). */
#define HTR_TSC_HINT_INIT UINT64_MAX

/**
 * The TSC at instruction @id, as htr_tsc_for_insn(), for callers that look
 * up times in (mostly) increasing order: *@hint (start with
 * HTR_TSC_HINT_INIT; any value is safe) remembers where the last lookup
 * landed, so a monotone sequence costs O(1) per lookup instead of O(log
 * n).  The hint belongs to the caller (one per sequence and thread).
 * Returns 0, HTR_ERR_NOTFOUND (no time known yet at @id), HTR_ERR_RANGE,
 * HTR_ERR_INVALID.
 */
HTR_API int htr_tsc_lookup(const struct htr_file *file, uint64_t id,
			   uint64_t *hint, uint64_t *tsc);

/* Flags of struct htr_thread_info. */
#define HTR_THREAD_NS    0x1u  /* time_shift/mult/zero convert TSC to ns */
#define HTR_THREAD_WALL  0x2u  /* wall_ns/clock_ns place it on the wall
				* clock */

/* The recorded thread a file was built from, and its clock (files built
 * from a perf.data; the size rule: htr/common.h; first version: through
 * clock_ns). */
struct htr_thread_info {
	size_t size;               /* set by the library: bytes filled */
	uint32_t pid, tid;
	char comm[32];             /* NUL-terminated; "" if unknown */
	uint32_t flags;            /* HTR_THREAD_* */
	/* perf's conversion (perf_event_mmap_page): with quot = tsc >> shift
	 * and rem = tsc & ((1 << shift) - 1), the recording's clock in ns is
	 * time_zero + quot * time_mult + ((rem * time_mult) >> shift). */
	uint32_t time_shift;
	uint64_t time_mult, time_zero;
	/* With HTR_THREAD_WALL: when the recording's clock read clock_ns,
	 * the wall clock read wall_ns (ns since the Unix epoch). */
	uint64_t wall_ns, clock_ns;
};

/**
 * The thread @file was built from, into @info, a struct of @size bytes
 * (normally sizeof(*info)).  Returns 0, HTR_ERR_NOTFOUND (the file does
 * not say: built from a raw trace, or format version 1),
 * HTR_ERR_INVALID (NULL or failed @file, NULL @info, @size below the
 * first version's).  The builder records it with htr_builder_set_thread().
 */
HTR_API int htr_file_thread(const struct htr_file *file,
			    struct htr_thread_info *info, size_t size);

/**
 * The recording's clock (perf time, ns) at TSC value @tsc, in *@ns.
 * Returns 0, HTR_ERR_NOTFOUND (the file has no conversion), or
 * HTR_ERR_INVALID.  Values past 2^64 ns saturate.
 */
HTR_API int htr_tsc_to_ns(const struct htr_file *file, uint64_t tsc,
			  uint64_t *ns);

/**
 * A duration of @ticks TSC ticks in ns (the conversion without
 * time_zero), in *@ns.  Returns 0, HTR_ERR_NOTFOUND (no conversion), or
 * HTR_ERR_INVALID.  Saturates like htr_tsc_to_ns().
 */
HTR_API int htr_ticks_to_ns(const struct htr_file *file, uint64_t ticks,
			    uint64_t *ns);

/** Number of entries of the function table (entry addresses seen). */
HTR_API uint64_t htr_func_count(const struct htr_file *file);

/** Entry address of function @i (struct htr_block_info.func) in *@addr.
 * Returns 0, HTR_ERR_RANGE, HTR_ERR_INVALID. */
HTR_API int htr_func_entry(const struct htr_file *file, uint64_t i,
			   uint64_t *addr);

/**
 * The path @file was opened with (absolute or not, as given), or NULL for
 * a file opened from memory or a failed handle.  Owned by the handle;
 * valid until htr_file_close().
 */
HTR_API const char *htr_file_path(const struct htr_file *file);

/* One piece of the image the trace was decoded with (the size rule:
 * htr/common.h; first version: through kind). */
struct htr_image_info {
	size_t size;               /* set by the library: bytes filled */
	const char *path;          /* absolute path as recorded, NOT
				    * NUL-terminated: path_len bytes; points
				    * into the file, valid until close */
	uint32_t path_len;
	uint64_t vaddr;            /* where the bytes were loaded */
	uint64_t offset;           /* file offset of the bytes */
	uint64_t bytes;            /* how many */
	uint32_t kind;             /* HTR_IMAGE_ELF or HTR_IMAGE_RAW */
};

#define HTR_IMAGE_ELF 1u           /* an executable PT_LOAD of an ELF file */
#define HTR_IMAGE_RAW 2u           /* raw bytes (--raw) */

/** Number of image pieces. */
HTR_API uint64_t htr_image_count(const struct htr_file *file);

/**
 * Image piece @i (in the order the builder got them) into @info of @size
 * bytes.  O(i): the records have variable size; walk them in order.
 * Returns 0, HTR_ERR_RANGE, HTR_ERR_INVALID (NULL arguments, @size below
 * the first version's).
 */
HTR_API int htr_image_get(const struct htr_file *file, uint64_t i,
			  struct htr_image_info *info, size_t size);

/* A sync point: a PSB of the trace (the size rule: htr/common.h; first
 * version: through id). */
struct htr_sync_info {
	size_t size;               /* set by the library: bytes filled */
	uint64_t offset;           /* trace offset of the PSB */
	uint64_t id;               /* first instruction decoded after it */
};

/** Number of sync points. */
HTR_API uint64_t htr_sync_count(const struct htr_file *file);

/** Sync point @i (by offset) into @info of @size bytes.  Returns 0,
 * HTR_ERR_RANGE, HTR_ERR_INVALID. */
HTR_API int htr_sync_get(const struct htr_file *file, uint64_t i,
			 struct htr_sync_info *info, size_t size);

enum htr_gap_kind {
	HTR_GAP_DISABLED = 1,   /* tracing was disabled, later re-enabled */
	HTR_GAP_OVERFLOW = 2,   /* the processor lost packets */
	HTR_GAP_ERROR = 3,      /* a decode error; the decoder resynced */
};

/* A gap (the size rule: htr/common.h; first version: through code). */
struct htr_gap_info {
	size_t size;               /* set by the library: bytes filled */
	uint64_t id;               /* first instruction after the gap */
	uint64_t offset;           /* trace offset where it was noticed */
	enum htr_gap_kind kind;
	int code;                  /* for HTR_GAP_ERROR: libipt's error code
				    * (negative), or HTR_GAP_CODE_RUNAWAY;
				    * for HTR_GAP_DISABLED: 0, or
				    * HTR_GAP_CODE_KERNEL */
};

/* Code of an error gap made by the runaway guards: the decoder went round
 * a loop, or ran more than 2^22 instructions, without consuming trace (the
 * image does not match the recording). */
#define HTR_GAP_CODE_RUNAWAY 1
/* Code of a disabled gap where the kernel ran: a trace of user and kernel
 * code whose kernel code was not at hand (`htr gaps` names it [kernel]). */
#define HTR_GAP_CODE_KERNEL 2

/** Number of gaps. */
HTR_API uint64_t htr_gap_count(const struct htr_file *file);
/**
 * Gap @i (chronological) into @info, a struct of @size bytes.  Returns 0,
 * HTR_ERR_RANGE, HTR_ERR_INVALID (NULL arguments, @size below the first
 * version's).
 */
HTR_API int htr_gap_get(const struct htr_file *file, uint64_t i,
			struct htr_gap_info *info, size_t size);

/** Short static name of a gap kind ("disabled", "overflow", "error"). */
HTR_API const char *htr_gap_kind_str(enum htr_gap_kind kind);

/**
 * Why gap @gap happened, as a static phrase: for decode errors libipt's
 * own message ("no memory mapped at this address", ...) or "runaway: ..."
 * for the runaway guard; for the other kinds what stopped the trace.
 * Never NULL.
 */
HTR_API const char *htr_gap_reason(const struct htr_gap_info *gap);

/* Sections of the format with fixed-size records (docs/FORMAT.md,
 * "Section table"; the ids are the on-disk ones), for
 * htr_file_section(). */
#define HTR_SECTION_BLOCKS 1u      /* 32-byte block records, post-order */
#define HTR_SECTION_FUNCS  2u      /* uint64 entry addresses */
#define HTR_SECTION_GAPS   3u      /* 24-byte gap records */
#define HTR_SECTION_TSC    4u      /* 16-byte time points (id, tsc) */
#define HTR_SECTION_SYNC   5u      /* 16-byte sync points (offset, id) */

/**
 * The records of section @id in place, for readers that take the records
 * as docs/FORMAT.md lays them out (little-endian, at the offsets given
 * there; numpy's structured arrays, bindings) instead of one call per
 * record.  *@data points into the mapping (8-byte aligned, read-only,
 * valid until htr_file_close(@file); NULL when the section is empty),
 * *@count is the number of records and *@entsize their size in bytes
 * (check it against the layout you read: a later format version may
 * grow a record).  Any output pointer may be NULL.  The bytes were
 * bounds-checked at open, their contents not: indices read from block
 * records must be range-checked before use, as the tree API does.
 * Returns 0, HTR_ERR_RANGE (@id is not one of HTR_SECTION_*),
 * HTR_ERR_INVALID (NULL or failed @file).
 */
HTR_API int htr_file_section(const struct htr_file *file, uint32_t id,
			     const void **data, uint64_t *count,
			     uint32_t *entsize);

#ifdef __cplusplus
}
#endif

#endif /* HTR_TREE_H */
