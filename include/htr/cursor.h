/*
 * libhtr - an instruction cursor over a built trace.
 *
 * The .htr file keeps blocks, not instructions.  A cursor gets any
 * instruction back by re-decoding the raw trace from the nearest sync
 * point (a PSB the build recorded) at or before it, with the code image
 * the file records: a seek costs at most one PSB period of decoding.  It
 * gives each instruction's ID (the tree's numbering), address, bytes,
 * class and the time the build recorded for it, and says where a gap lies.
 *
 * A cursor belongs to one thread; any number may share one struct
 * htr_file.  The file must stay open until the cursor is freed.
 *
 *   struct htr_cursor *c;
 *   struct htr_insn in;
 *   if (htr_cursor_alloc(&c, file, &opts) < 0) ...;
 *   htr_cursor_seek(c, block_first);
 *   while (htr_cursor_next(c, &in, sizeof in) == 0 && in.id <= block_last)
 *           printf("%#llx\n", (unsigned long long) in.ip);
 *   htr_cursor_free(c);
 */
#ifndef HTR_CURSOR_H
#define HTR_CURSOR_H

#include "common.h"
#include "error.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

struct htr_cursor;

/* Options (the size rule: htr/common.h; first version: through
 * cpu_stepping). */
struct htr_cursor_opts {
	size_t size;
	/* The raw trace the file was built from (its size and hash are
	 * checked against the file's identity), or for a file built from a
	 * per-thread perf.data that perf.data (the thread's trace is read
	 * from it; its CPU is used when cpu_family is 0).  Required: the
	 * .htr does not record where the trace was. */
	const char *trace;
	/* The CPU given to the build, for libipt's errata (0: none). */
	int cpu_family, cpu_model, cpu_stepping;
};

/**
 * Set the @size bytes at @opts to the defaults (no trace, no CPU) and
 * opts->size to @size.  Use htr_cursor_opts_init().  Any thread.
 */
HTR_API void htr_cursor_opts_init_size(struct htr_cursor_opts *opts,
				       size_t size);

/** Defaults, with the caller's sizeof. */
static inline void htr_cursor_opts_init(struct htr_cursor_opts *opts)
{
	htr_cursor_opts_init_size(opts, sizeof(*opts));
}

/* Instruction classes (struct htr_insn.cls). */
enum htr_insn_class {
	HTR_INSN_OTHER = 0,
	HTR_INSN_CALL,          /* near call */
	HTR_INSN_RET,           /* near return */
	HTR_INSN_JUMP,          /* unconditional jump */
	HTR_INSN_COND,          /* conditional jump */
	HTR_INSN_FAR_CALL,      /* far call, syscall, sysenter, int n */
	HTR_INSN_FAR_RET,       /* far return, iret, sysret, sysexit */
	HTR_INSN_FAR_JUMP,
};

/* One instruction (the size rule: htr/common.h; first version: through
 * gap). */
struct htr_insn {
	size_t size;            /* set by the library: bytes filled */
	uint64_t id;            /* the tree's instruction ID */
	uint64_t ip;            /* its address */
	uint8_t len;            /* its length, and its bytes in raw[] */
	uint8_t raw[15];
	uint8_t mode;           /* 16, 32 or 64 (bits) */
	enum htr_insn_class cls;
	int has_tsc;            /* the build knew the time here */
	uint64_t tsc;           /* the TSC the decoder reported at it */
	/* enum htr_gap_kind of a gap right before this instruction, 0 if
	 * none (the decoder lost instructions there). */
	int gap;
};

/**
 * A cursor over @file.  @opts->trace is required.
 * On failure *@out is still set to a cursor in a failed state whenever
 * memory allows, so htr_cursor_last_error() can say why; the caller
 * always calls htr_cursor_free(*@out).
 * Returns 0, HTR_ERR_INVALID (no trace given, NULL arguments, bad opts
 * size), HTR_ERR_IO (cannot read the trace), HTR_ERR_FORMAT (the trace is
 * not the one the file was built from; a CPU-wide perf.data, or one
 * without the file's thread), HTR_ERR_CORRUPT (a damaged perf.data),
 * HTR_ERR_DECODE (an image file cannot be loaded), HTR_ERR_NOMEM.
 */
HTR_API int htr_cursor_alloc(struct htr_cursor **out,
			     const struct htr_file *file,
			     const struct htr_cursor_opts *opts);

/** Free.  NULL is fine. */
HTR_API void htr_cursor_free(struct htr_cursor *c);

/** The message of the last failure ("" if none); owned by @c. */
HTR_API const char *htr_cursor_last_error(const struct htr_cursor *c);

/**
 * Position @c so that htr_cursor_next() returns instruction @id next.
 * Decodes from the last sync point at or before @id: at most one PSB
 * period of trace.
 * Returns 0, HTR_ERR_RANGE (@id >= the file's instruction count),
 * HTR_ERR_DECODE (the trace cannot be decoded up to @id; message on @c).
 */
HTR_API int htr_cursor_seek(struct htr_cursor *c, uint64_t id);

/**
 * The next instruction into @insn (the caller sets nothing; @size is
 * sizeof(*insn) of the caller's version).  A cursor starts before
 * instruction 0.
 * Returns 0, HTR_ERR_ITEROVER after the last instruction, HTR_ERR_DECODE
 * (the trace and the file disagree; message on @c), HTR_ERR_INVALID.
 */
HTR_API int htr_cursor_next(struct htr_cursor *c, struct htr_insn *insn,
			    size_t size);

#ifdef __cplusplus
}
#endif

#endif /* HTR_CURSOR_H */
