/*
 * libhtr - building an .htr file from an Intel PT trace.
 *
 * Create a builder, add the code image (ELF files, raw dumps, bytes in
 * memory), run it once over a trace (a file or bytes in memory).  A
 * builder belongs to one thread at a time.
 *
 * Threads: htr_builder_run() and htr_builder_run_buffer() decode and
 * build the tree on the calling thread or, with opts.threads N >= 2, start
 * N - 1 helper threads that decode chunks of the trace while the calling
 * thread builds the tree from their events in order and decodes chunks
 * too whenever it has none to take.  A trace of more than 4 MiB is also
 * hashed on a helper thread while it decodes, and a large output's blocks
 * are hashed and its small sections copied on two more while the tree is
 * linked (with N >= 2, the blocks are linked and hashed in up to N ranges
 * at once, the calling thread and N - 1 helpers, beside the copy).  They
 * join them before they return, on success, failure or
 * cancel alike.  Callbacks never run on a helper thread.  No thread
 * outlives the call; nothing is left running in the background.
 *
 * Files: the output is written as "OUT.tmpPID" in OUT's directory and
 * renamed to OUT on success (nothing is left on failure).  By default the
 * result is fsync'ed (with the directory) before the call returns, and
 * leftover "OUT.tmpPID" files of processes that no longer exist are
 * removed first; opts.no_fsync and opts.no_sweep turn either off.
 *
 *   struct htr_build_opts opts;
 *   struct htr_builder *b;
 *   htr_build_opts_init(&opts);
 *   if (htr_builder_alloc(&b, &opts) < 0) ...;
 *   if (htr_builder_add_elf(b, "prog@0x555555554000") < 0 ||
 *       htr_builder_run(b, "trace.pt", "trace.htr", NULL, 0) < 0)
 *           fprintf(stderr, "%s\n", htr_builder_last_error(b));
 *   htr_builder_free(b);
 */
#ifndef HTR_BUILD_H
#define HTR_BUILD_H

#include "common.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct htr_builder;

struct htr_build_progress {
	uint64_t offset;           /* trace bytes consumed */
	uint64_t trace_size;
	uint64_t insns;            /* instructions so far */
	uint64_t blocks;           /* blocks completed so far */
};

/* An IP filter range: [start, end). */
#define HTR_ADDR_FILTERS_MAX 4     /* IA32_RTIT_ADDR0..3 */
enum htr_addr_filter_kind {
	HTR_FILTER_TRACE = 1,      /* traced inside (ADDRn_CFG 1) */
	HTR_FILTER_STOP = 2,       /* TraceStop region (ADDRn_CFG 2) */
};
struct htr_addr_filter {
	uint64_t start, end;
	int kind;                  /* enum htr_addr_filter_kind */
};

/* Options of htr_builder_alloc() (the size rule: htr/common.h; first
 * version: through payload). */
struct htr_build_opts {
	size_t size;               /* sizeof(struct htr_build_opts) */
	/* CPU for libipt's errata workarounds; family 0 = none ("auto"). */
	int cpu_family, cpu_model, cpu_stepping;
	/* Timing parameters of the recording (0 = unknown): CPUID leaf 0x15,
	 * IA32_RTIT_CTL.MTCFreq and the nominal frequency ratio. */
	uint32_t cpuid_0x15_eax, cpuid_0x15_ebx;
	uint8_t mtc_freq, nom_freq;
	/* Called about every 2^20 instructions (with threads >= 2, every
	 * 32768 events: from 2^18 instructions on call-dense code to a few
	 * times 2^20), and while searching for a PSB, on the thread that
	 * called htr_builder_run(), never on the builder's helper
	 * threads.  It must return (no longjmp, no C++
	 * exception through libhtr: the helper thread, the temporary output
	 * and the mapped trace would leak).  0 goes on; a positive value
	 * cancels the build: htr_builder_run() returns HTR_ERR_CANCELED and
	 * writes nothing; a negative value (the caller's own code,
	 * HTR_ERR_USER or below) cancels the same way and comes back
	 * unchanged; a negative value above HTR_ERR_USER is returned as
	 * HTR_ERR_CALLBACK.  @p is valid during the call only. */
	int (*progress)(const struct htr_build_progress *p, void *payload);
	void *payload;
	/* Past the first version (htr/common.h: each 0 keeps the behaviour
	 * of a caller that did not pass it): */
	int no_fsync;              /* do not fsync the output (faster; a
				    * crash may leave it empty or partial) */
	int no_sweep;              /* leave leftover "OUT.tmpPID" files of
				    * other processes alone */
	unsigned threads;          /* threads at work; 0 or 1: the calling
				    * thread alone (see Threads above);
				    * N >= 2: it and N - 1 helpers decode
				    * chunks of the trace cut at PSBs, it
				    * builds the tree.  The .htr is the same
				    * either way.  CPU-wide builds
				    * (htr/cpuwide.h) decode on the calling
				    * thread. */
	/* Tuning and diagnosis, not choices about the result: the file is
	 * the same whatever they are, and 0 is right for every use.  Tests
	 * set them to make small traces take the paths large ones take
	 * (many chunks; the other decoder), and `htr build --chunk-size`
	 * and `--decoder` pass them on for benchmarks and bug reports. */
	uint64_t chunk_size;       /* trace bytes per chunk with threads >= 2
				    * (0: half of what is left a thread,
				    * within 64 KiB to 256 KiB, less where
				    * events are dense) */
	int decoder;               /* enum htr_decoder (0: HTR_DECODER_WALK) */
	/* 0: none.  The IP filter ranges the trace was
	 * recorded with (IA32_RTIT_ADDRn; perf record --filter), for the
	 * SKL014 erratum of the CPU given above: on such a CPU a direct jump
	 * or call out of the filter ranges may disable tracing without
	 * saying where, and only the ranges tell which branch it was (with
	 * either decoder).  htr_builder_alloc() copies them; more than
	 * HTR_ADDR_FILTERS_MAX, an empty range or an unknown kind is
	 * HTR_ERR_INVALID. */
	unsigned nfilters;
	struct htr_addr_filter filters[HTR_ADDR_FILTERS_MAX];
};

/* How the trace is decoded; the .htr is the same either way. */
enum htr_decoder {
	HTR_DECODER_DEFAULT = 0,   /* HTR_DECODER_WALK */
	/* libipt's block decoder follows every instruction. */
	HTR_DECODER_BLOCK = 1,
	/* libipt's query decoder reads the packets and libhtr walks the
	 * code over a cache of its branches (faster); decode errors end its
	 * blocks where the block decoder's end.  A trace holding what the
	 * walk does not follow itself (16-bit code, VMX, ptwrite, an event
	 * the code does not explain, ...) is decoded again with the block
	 * decoder:
	 * htr_build_stats.decoder says which one made the file (CPU-wide
	 * builds, htr/cpuwide.h, fall back per CPU and do not say). */
	HTR_DECODER_WALK = 2,
};

/* Figures of a finished build (the size rule: htr/common.h; first
 * version: through timing_unusable). */
struct htr_build_stats {
	size_t size;               /* set by the library: bytes filled */
	uint64_t insns, blocks, gaps, funcs;
	uint64_t trace_size;
	uint32_t max_depth;
	/* Calls past the call-stack limit (2^18 open frames), folded into
	 * the deepest frame; 0 on any sane trace. */
	uint64_t folded;
	/* 1 if the trace carries MTC or CYC packets that the timing options
	 * (cpuid_0x15_*, mtc_freq, nom_freq) leave unusable: time then moves
	 * only at each PSB+ and per-block times are meaningless. */
	int timing_unusable;
	/* Past the first version (read them where the returned size
	 * covers them): the threads the build used:
	 * opts.threads (at least 1), or 1 when a parallel decode's chunks did
	 * not join up (a decode error sent their decoders different ways)
	 * and the trace was decoded again on one thread. */
	unsigned threads;
	/* The decoder whose events made the
	 * file: opts.decoder, or HTR_DECODER_BLOCK when the walk gave up. */
	int decoder;
	/* The decode errors among the gaps
	 * (HTR_GAP_ERROR), how many of them the runaway guard made, and the
	 * first one's trace offset and code (as in struct htr_gap_info; 0
	 * when there is none), so that a caller can report them without
	 * reading the file back. */
	uint64_t errors, runaways;
	uint64_t first_error_offset;
	int first_error_code;
	/* A figure, not a setting: the wall-clock nanoseconds of the
	 * commit, after the last instruction was decoded: linking the tree,
	 * writing and hashing the sections, fsync and rename (on one thread
	 * or several, whatever opts.threads; the rest of the build is
	 * decoding and building the tree). */
	uint64_t commit_ns;
};

/**
 * Set the @size bytes at @opts to the defaults (all zero: no CPU errata,
 * no timing parameters, no progress callback) and opts->size to @size.
 * Use htr_build_opts_init().
 */
HTR_API void htr_build_opts_init_size(struct htr_build_opts *opts,
				      size_t size);

/** Set @opts to the defaults, with the caller's sizeof. */
static inline void htr_build_opts_init(struct htr_build_opts *opts)
{
	htr_build_opts_init_size(opts, sizeof(*opts));
}

/**
 * Create a builder.  @opts is copied (NULL: defaults).
 * Returns 0, HTR_ERR_NOMEM or HTR_ERR_INVALID (@out NULL, opts->size below
 * the first version's).  The builder is freed with htr_builder_free().
 */
HTR_API int htr_builder_alloc(struct htr_builder **out,
			      const struct htr_build_opts *opts);

/** Free.  NULL is fine. */
HTR_API void htr_builder_free(struct htr_builder *b);

/**
 * Add an ELF file: "FILE" at its link address or "FILE@BASE" with the
 * lowest PT_LOAD at BASE.  Returns 0, HTR_ERR_IO, HTR_ERR_INVALID; the
 * message (naming the file) is in htr_builder_last_error().
 */
HTR_API int htr_builder_add_elf(struct htr_builder *b, const char *spec);

/** Add raw code: "FILE[:OFFSET[:SIZE]]@VADDR".  Returns as add_elf. */
HTR_API int htr_builder_add_raw(struct htr_builder *b, const char *spec);

/**
 * Add the ELF file @path as is (no "@BASE" parsing, so any path works):
 * at its link address when @base is NULL, else with its lowest PT_LOAD at
 * *@base.  Returns as htr_builder_add_elf().
 */
HTR_API int htr_builder_add_elf_at(struct htr_builder *b, const char *path,
				   const uint64_t *base);

/**
 * Record in the output which thread the trace is and its clock (what
 * htr_file_thread() returns; info->size must be set, the size rule of
 * htr/common.h applies).  Copied; replaces an earlier call's.  Returns 0
 * or HTR_ERR_INVALID (NULL arguments, @info->size below the first
 * version's, an unknown flag, time_shift above 63).
 */
struct htr_thread_info;
HTR_API int htr_builder_set_thread(struct htr_builder *b,
				   const struct htr_thread_info *info);

/**
 * Add @size bytes at @data as code loaded at @vaddr (a raw dump in
 * memory).  The bytes are copied (into a memory file the builder keeps
 * until htr_builder_free()); @data may be freed on return.  @name (NULL:
 * "[bytes]") is what the .htr records as the piece's path (htr_image_get);
 * no symbols are read for it.  Returns 0, HTR_ERR_INVALID (NULL or empty,
 * wraps the address space), HTR_ERR_NOMEM, HTR_ERR_IO (no memory file).
 */
HTR_API int htr_builder_add_bytes(struct htr_builder *b, const void *data,
				  size_t size, uint64_t vaddr,
				  const char *name);

/**
 * Decode @trace and write the call tree to @out (written under a
 * temporary name and renamed on success; nothing is left on failure).
 * Bad trace data does not fail the build: it becomes gaps.  @stats (may
 * be NULL) is a struct of @size bytes, filled on success.  Returns 0,
 * HTR_ERR_INVALID (NULL arguments, @size below the first version's), HTR_ERR_IO (cannot read the trace or write @out),
 * HTR_ERR_DECODE (no usable trace), HTR_ERR_LIMIT, HTR_ERR_NOMEM,
 * HTR_ERR_CANCELED (the progress callback returned a positive value), the
 * callback's own negative code, HTR_ERR_CALLBACK (see opts.progress).
 */
HTR_API int htr_builder_run(struct htr_builder *b, const char *trace,
			    const char *out, struct htr_build_stats *stats,
			    size_t size);

/**
 * As htr_builder_run(), over @trace_size bytes of raw Intel PT at @trace
 * (a perf AUX buffer, bytes a debugger holds).  The bytes are only read,
 * never modified, and not needed after the call.  Messages name the trace
 * "(memory)".  Returns as htr_builder_run() (HTR_ERR_DECODE for 0 bytes).
 */
HTR_API int htr_builder_run_buffer(struct htr_builder *b, const void *trace,
				   size_t trace_size, const char *out,
				   struct htr_build_stats *stats, size_t size);

/** Message of the last failure ("" if none); owned by @b. */
HTR_API const char *htr_builder_last_error(const struct htr_builder *b);

#ifdef __cplusplus
}
#endif

#endif /* HTR_BUILD_H */
