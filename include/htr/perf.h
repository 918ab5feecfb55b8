/*
 * libhtr - building from a perf.data.
 *
 * A perf.data (`perf record -e intel_pt//u`, with or without
 * --per-thread, -a, -z; `htr record`) holds the Intel PT trace of every
 * thread it recorded and what a build needs besides: the executable
 * mappings of each process (paths and build-ids: the image), the timing
 * parameters, the CPU and perf's TSC conversion.  This API opens one,
 * lists its threads and writes one .htr per thread, exactly as
 * `htr build FILE.data` does (the CLI is this API's first user):
 *
 *   struct htr_perf *pf;
 *   struct htr_perf_build_opts po;
 *   if (htr_perf_open(&pf, "perf.data") < 0) {
 *           fprintf(stderr, "%s\n", htr_perf_last_error(pf));
 *           htr_perf_close(pf); ...
 *   }
 *   htr_perf_build_opts_init(&po);
 *   po.output = "out/%t.htr";               (one file per thread)
 *   po.thread_done = on_thread; po.warning = on_warning; po.payload = me;
 *   if (htr_perf_build(pf, &po) < 0)
 *           fprintf(stderr, "%s\n", htr_perf_last_error(pf));
 *   htr_perf_close(pf);
 *
 * Per-thread recordings (perf record --per-thread, htr record): each
 * thread's trace is built with htr_builder_run_buffer() on the image of
 * its process (htr/build.h: threads, files and the progress callback work
 * as documented there).  CPU-wide recordings (per-CPU trace buffers)
 * are split into threads by their context-switch records, one process at
 * a time, as htr/cpuwide.h describes (the workload's process first, then
 * every other process that has trace).
 *
 * The image: every executable mapping of the thread's process (after its
 * last exec, and those inherited from its parent), read from the path the
 * perf.data names (under opts.symfs if given).  A mapping with a recorded
 * build-id whose file has another one is taken from perf's build-id cache
 * (opts.buildid_dir); the vDSO, which has no file, from the cache or from
 * this process's own vDSO when its build-id is the recorded one.  A
 * module that cannot be found is not an error: its code becomes decode
 * gaps, and the build says so once at the end (HTR_PERF_WARN_NOT_DECODED).
 * A recording of user and kernel code (intel_pt// without u) takes the
 * kernel's code from opts.kcore or opts.vmlinux; without either, each
 * stretch in the kernel becomes a gap named [kernel] (HTR_GAP_CODE_KERNEL)
 * instead of costing the user code up to the next PSB.
 *
 * Ownership and threads: a struct htr_perf maps the file read-only and
 * keeps it mapped until htr_perf_close(); it belongs to one thread at a
 * time (htr_perf_build() records its error on it).  Every callback runs
 * on the thread that called htr_perf_build(), never on a helper thread,
 * and must return (htr/common.h, "Callbacks").  The library writes
 * nothing to stdout or stderr: everything a tool would print comes
 * through the callbacks.
 */
#ifndef HTR_PERF_H
#define HTR_PERF_H

#include "common.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct htr_perf;
struct htr_build_opts;
struct htr_build_stats;

/*
 * What the file at @path is, for a tool that takes a raw Intel PT trace
 * or a perf.data: returns 1 for a perf.data (its magic) or a directory
 * that `perf record --kcore` wrote (DIR/data is one; htr_perf_open()
 * opens such a directory), 0 for a file that may be a raw trace (it holds
 * a PSB packet, where every decode starts; or it is not a regular file;
 * or it is empty and @empty_ok is nonzero).  Otherwise one line saying
 * why it is neither (missing, empty, an ELF, an .htr, a text file, a
 * perf.data cut short, no PSB) is written to @why (@size bytes, always
 * terminated when @size > 0) and the return is HTR_ERR_IO (cannot open
 * it) or HTR_ERR_FORMAT.  Reads the file only; any thread may call it.
 */
HTR_API int htr_perf_probe(const char *path, int empty_ok, char *why,
			   size_t size);

/*
 * Open the perf.data at @path (a file, or a directory `perf record
 * --kcore` wrote: DIR/data, whose kernel copy DIR/kcore_dir/kcore is then
 * the default of opts.kcore).  Both perf's file and pipe layouts are
 * read; every size and offset is checked against the file.  *@out is set
 * even on failure, when memory allows, so that htr_perf_last_error()
 * can say why; close it with htr_perf_close() either way.  Returns 0,
 * HTR_ERR_INVALID (NULL argument), HTR_ERR_IO (cannot open or map),
 * HTR_ERR_FORMAT (not a perf.data, or a kind not read: big-endian,
 * compressed with an unknown codec), HTR_ERR_CORRUPT (a size or offset
 * outside the file), HTR_ERR_NOMEM.
 */
HTR_API int htr_perf_open(struct htr_perf **out, const char *path);

/** Unmap and free.  NULL is fine. */
HTR_API void htr_perf_close(struct htr_perf *pf);

/**
 * The message of @pf's last failure ("" if none; "out of memory" for a
 * NULL @pf), one line naming the file.  Owned by @pf: valid until its
 * next call or htr_perf_close().
 */
HTR_API const char *htr_perf_last_error(const struct htr_perf *pf);

/* Flags of struct htr_perf_info. */
#define HTR_PERF_CPUWIDE   0x1u  /* per-CPU trace buffers (perf record
				  * without --per-thread): threads are told
				  * apart by context switches */
#define HTR_PERF_KERNEL    0x2u  /* the trace holds kernel code too */
#define HTR_PERF_SNAPSHOT  0x4u  /* snapshot mode (perf record -S) */
#define HTR_PERF_PIPE      0x8u  /* perf's pipe layout (perf record -o -) */

/* What a perf.data holds (the size rule: htr/common.h; first version:
 * through name). */
struct htr_perf_info {
	size_t size;               /* set by the library: bytes filled */
	uint32_t flags;            /* HTR_PERF_* */
	uint32_t nthreads;         /* for htr_perf_thread() */
	uint32_t ncpus;            /* CPUs with trace (HTR_PERF_CPUWIDE) */
	uint64_t switches;         /* context-switch records */
	/* The recording's CPU (0: not an Intel CPU or not recorded). */
	int cpu_family, cpu_model, cpu_stepping;
	/* The name messages give it (DIR/data for a directory); owned by
	 * the struct htr_perf, valid until htr_perf_close(). */
	const char *name;
};

/**
 * What @pf holds, into @info, a struct of @size bytes (normally
 * sizeof(*info)).  Returns 0 or HTR_ERR_INVALID (NULL or failed @pf,
 * NULL @info, @size below the first version's).
 */
HTR_API int htr_perf_info(const struct htr_perf *pf,
			  struct htr_perf_info *info, size_t size);

/* Flags of struct htr_perf_thread_info. */
#define HTR_PERF_THREAD_TRACED 0x1u  /* htr_perf_build() builds it:
				      * per-thread, it has trace of its own;
				      * CPU-wide, it is a thread (tid != 0)
				      * and gets a file if any piece of a
				      * CPU's trace is its */
#define HTR_PERF_THREAD_EXITED 0x2u  /* its exit was recorded */

/* One thread the perf.data names (the size rule; first version: through
 * aux_lost). */
struct htr_perf_thread_info {
	size_t size;               /* set by the library: bytes filled */
	uint32_t pid, tid;
	char comm[32];             /* NUL-terminated, as recorded (may hold
				    * control characters: htr_escape()) */
	uint32_t flags;            /* HTR_PERF_THREAD_* */
	uint64_t pt_bytes;         /* its own trace (per-thread buffers) */
	/* perf's AUX records of its trace flagged truncated, and flagged
	 * partial or collided: the tree has gaps there. */
	uint64_t aux_truncated, aux_lost;
};

/**
 * Thread @index (0 to info.nthreads - 1, in the order the file names
 * them) into @info, a struct of @size bytes.  Returns 0, HTR_ERR_RANGE
 * (@index past the end), HTR_ERR_INVALID (NULL or failed @pf, NULL
 * @info, @size below the first version's).
 */
HTR_API int htr_perf_thread(const struct htr_perf *pf, size_t index,
			    struct htr_perf_thread_info *info, size_t size);

/* What htr_perf_build() tells opts.thread_done about one thread (the
 * library's struct, whole, valid during the call only: htr/common.h). */
struct htr_perf_result {
	size_t size;               /* sizeof(struct htr_perf_result) */
	uint32_t pid, tid;
	const char *comm;          /* as recorded, "" if unknown */
	const char *out;           /* the .htr it was written to */
	/* 0: @out was written and @stats are its figures; else the
	 * negative code of why this thread's build failed, @message says
	 * it in one line, and the build goes on with the next thread. */
	int error;
	const char *message;       /* "" when @error is 0 */
	const struct htr_build_stats *stats;
	/* 1: built by a CPU-wide build (@stats then say nothing of the
	 * decoding threads and decoder: it decodes on one thread, and falls
	 * back from the walk CPU by CPU). */
	int cpuwide;
	/* Wall-clock ns of the build (CPU-wide: of its whole process). */
	uint64_t ns;
	/* perf's AUX records of the thread's own trace flagged truncated,
	 * or partial or collided (per-thread recordings; CPU-wide ones say
	 * it once, HTR_PERF_WARN_AUX_LOST). */
	uint64_t aux_truncated, aux_lost;
};

/* Kinds of opts.warning's messages: warnings, then notes (from
 * HTR_PERF_NOTE on), neither a failure. */
enum htr_perf_warning {
	/* Snapshot mode: each thread's snapshots are decoded one after the
	 * other. */
	HTR_PERF_WARN_SNAPSHOT = 1,
	/* The recording's address filter could not be read or placed: with
	 * a CPU that has erratum SKL014, give opts.build->filters. */
	HTR_PERF_WARN_FILTER = 2,
	/* CPU-wide: instructions no context switch explains, left out. */
	HTR_PERF_WARN_UNEXPLAINED = 3,
	/* CPU-wide: perf lost trace data (AUX records truncated, partial or
	 * collided). */
	HTR_PERF_WARN_AUX_LOST = 4,
	/* The one line at the end of a successful build of what could not
	 * be decoded: modules without code (the first named), decode errors,
	 * kernel stretches without the kernel's code. */
	HTR_PERF_WARN_NOT_DECODED = 5,
	HTR_PERF_NOTE = 100,
	/* CPU-wide recording of user and kernel code: opts.kcore/vmlinux
	 * are not used. */
	HTR_PERF_NOTE_KERNEL_UNUSED = 100,
};

/* Flags of struct htr_perf_build_opts. */
#define HTR_PERF_BUILD_TID 0x1u    /* only thread opts.tid */

/* Options of htr_perf_build() (the size rule: htr/common.h; first
 * version: through payload).  Every pointer is borrowed for the call. */
struct htr_perf_build_opts {
	size_t size;               /* sizeof(struct htr_perf_build_opts) */
	/* The builder's options (NULL: defaults).  Those left 0 take the
	 * recording's: CPU, cpuid_0x15_eax/ebx, mtc_freq, nom_freq and the
	 * address filters (placed in each thread's address space).  Its
	 * progress callback is called as htr/build.h says, per thread (or
	 * per process, CPU-wide). */
	const struct htr_build_opts *build;
	/* Where the files go; %t is the tid, %p the pid, %% a %:
	 *   NULL            STEM.%t.htr (STEM: the file's name without its
	 *                   extension; a directory's name for one)
	 *   DIR/, or a directory   DIR/BASENAME-OF-STEM.%t.htr
	 *   with a %        itself (several threads need %t)
	 *   NAME.htr        itself for one thread, NAME.%t.htr for several
	 *   anything else   a prefix: OUTPUT.%t.htr */
	const char *output;
	uint32_t flags;            /* HTR_PERF_BUILD_* */
	uint32_t tid;              /* with HTR_PERF_BUILD_TID */
	/* Look for the modules under this directory (NULL: where the
	 * perf.data says). */
	const char *symfs;
	/* perf's build-id cache (NULL: $HOME/.debug; "": none). */
	const char *buildid_dir;
	/* Kernel code of a per-thread user+kernel recording: a directory
	 * `perf record --kcore` wrote (DIR/kcore_dir/kcore or DIR/kcore), or
	 * the kernel's ELF (NULL: none, or a --kcore directory's own). */
	const char *kcore, *vmlinux;
	/* More code for every thread: htr_builder_add_elf() and
	 * htr_builder_add_raw() specs. */
	const char *const *elfs;
	size_t nelfs;
	const char *const *raws;
	size_t nraws;
	/* Each thread built, or failed (may be NULL).  0 goes on; a
	 * positive value stops the build after this thread
	 * (htr_perf_build() returns HTR_ERR_CANCELED); a negative one as
	 * htr/common.h says. */
	int (*thread_done)(const struct htr_perf_result *r, void *payload);
	/* A warning or note (may be NULL): @kind is enum htr_perf_warning,
	 * @text one line without a newline, naming the file, valid during
	 * the call. */
	void (*warning)(int kind, const char *text, void *payload);
	void *payload;
};

/**
 * Set the @size bytes at @opts to the defaults (all zero: every thread,
 * STEM.TID.htr, no callbacks) and opts->size to @size.  Use
 * htr_perf_build_opts_init().
 */
HTR_API void htr_perf_build_opts_init_size(struct htr_perf_build_opts *opts,
					   size_t size);

/** Set @opts to the defaults, with the caller's sizeof. */
static inline void htr_perf_build_opts_init(struct htr_perf_build_opts *opts)
{
	htr_perf_build_opts_init_size(opts, sizeof(*opts));
}

/**
 * Check what htr_perf_build() with @opts would write before anything
 * is: the output names (opts.output) of the threads it builds, none of
 * them the perf.data itself.  Returns 0, HTR_ERR_INVALID (NULL or failed
 * @pf, opts->size below the first version's, an empty opts.output, a %
 * not followed by t, p or %, several threads without %t, an output that
 * would overwrite the perf.data: mistakes in the request), HTR_ERR_IO
 * (opts.output names a directory that is none or cannot be read),
 * HTR_ERR_NOMEM; the message is on @pf.
 */
HTR_API int htr_perf_check(struct htr_perf *pf,
			   const struct htr_perf_build_opts *opts);

/**
 * Build the threads of @pf that have trace (HTR_PERF_THREAD_TRACED; with
 * HTR_PERF_BUILD_TID, opts.tid alone), one .htr each (written under a
 * temporary name and renamed when complete, as htr_builder_run() does),
 * reporting each through opts.thread_done.  Bad trace data and missing
 * modules do not fail a build: they become gaps and warnings.  In a
 * per-thread recording a thread that fails is reported and the others
 * are still built; a CPU-wide build stops at its first failure.
 * Returns 0 (every thread built), HTR_ERR_NOTFOUND (no thread has trace,
 * or not opts.tid), what htr_perf_check() returns, HTR_ERR_FORMAT (a
 * CPU-wide recording without context switches or TSC packets), the
 * last failed thread's code (each one reported already), HTR_ERR_IO,
 * HTR_ERR_NOMEM, or HTR_ERR_CANCELED and the callbacks' codes (the
 * progress callback of opts.build, which ends the build at once and
 * leaves the current thread's file unwritten, or opts.thread_done).
 * The message is on @pf.  Files already written on failure stay.
 */
HTR_API int htr_perf_build(struct htr_perf *pf,
			   const struct htr_perf_build_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* HTR_PERF_H */
