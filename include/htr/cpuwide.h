/*
 * libhtr - one tree per thread from per-CPU Intel PT traces.
 *
 * A CPU-wide recording (perf record without --per-thread, LLDB's
 * `process trace start --per-cpu-tracing`) holds one Intel PT stream per
 * CPU, each interleaving whatever threads ran there, plus context-switch
 * events saying which thread ran on which CPU from when on.  This API
 * takes both from memory, cuts each CPU's stream where tracing was
 * (re-)enabled, gives every piece to the thread the switches say was on
 * that CPU at that time, and writes one .htr per thread asked for, made
 * exactly as `htr build FILE.data` makes it from a CPU-wide perf.data
 * (same module, same rules; see docs/perf.md, "CPU-wide recordings").
 *
 *   struct htr_cpuwide *cw;
 *   htr_builder_alloc(&b, &opts);  add the process's code to b;
 *   htr_cpuwide_alloc(&cw, b);
 *   htr_cpuwide_set_clock(cw, shift, mult, zero);   (perf-time switches)
 *   for each CPU:    htr_cpuwide_add_trace(cw, cpu, bytes, n);
 *   for each switch: htr_cpuwide_add_switch(cw, &sw);
 *   for each thread: htr_cpuwide_add_thread(cw, &info, "t-TID.htr");
 *   if (htr_cpuwide_run(cw) < 0) puts(htr_builder_last_error(b));
 *   htr_cpuwide_thread_stats(cw, tid, &st, sizeof(st));  (per thread)
 *   htr_cpuwide_free(cw); htr_builder_free(b);
 *
 * Ownership and threads: a struct htr_cpuwide borrows its builder (its
 * options, image and progress callback) and reports every failure's
 * message there (htr_builder_last_error()); the builder must outlive it
 * and must not be used by anyone else meanwhile.  Both belong to one
 * thread at a time.  htr_cpuwide_run() starts no thread; the progress
 * callback runs on the calling thread.  Everything added is copied:
 * switches and threads to memory (O(switches + threads)), trace bytes to
 * an unlinked temporary file per CPU in $TMPDIR (or /tmp), mapped only
 * while htr_cpuwide_run() decodes it, so a trace of any size costs no
 * memory of its own: stream a big one through a small buffer.
 *
 * Limits: the trace must carry TSC packets (perf's intel_pt/tsc/, LLDB's
 * default for per-CPU tracing): pieces are matched to switches by TSC.
 * The files have no sync points (their pieces come from several
 * streams), so htr_cursor cannot seek in them.  Pieces that no switch
 * explains (before a CPU's first switch, after a switch-out that does not
 * name the next thread) are left out and counted (htr_cpuwide_info()).
 */
#ifndef HTR_CPUWIDE_H
#define HTR_CPUWIDE_H

#include "common.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct htr_builder;
struct htr_build_stats;
struct htr_thread_info;
struct htr_cpuwide;

/* Flags of struct htr_switch. */
#define HTR_SWITCH_OUT  0x1u   /* @tid leaves the CPU (else: it arrives) */
#define HTR_SWITCH_TSC  0x2u   /* @time is a TSC value (else: perf time in
				* ns, converted with htr_cpuwide_set_clock) */

/* No thread: a switch-out whose next thread is not known. */
#define HTR_SWITCH_NO_TID UINT32_MAX

/* One context switch on one CPU (the size rule: htr/common.h; first
 * version: through next_tid).  perf's PERF_RECORD_SWITCH_CPU_WIDE maps to
 * it directly: pid/tid and time from the sample_id trailer,
 * next_pid/next_tid from next_prev_pid/tid, HTR_SWITCH_OUT from
 * PERF_RECORD_MISC_SWITCH_OUT. */
struct htr_switch {
	size_t size;               /* sizeof(struct htr_switch) */
	uint32_t cpu;              /* as given to htr_cpuwide_add_trace() */
	uint32_t flags;            /* HTR_SWITCH_* */
	uint64_t time;
	uint32_t pid, tid;         /* the thread switched in, or out */
	/* With HTR_SWITCH_OUT: the thread that runs next on the CPU
	 * (HTR_SWITCH_NO_TID: unknown; 0 is the idle task).  Ignored for a
	 * switch-in, which names the arriving thread in @tid. */
	uint32_t next_pid, next_tid;
};

/* Figures of the last htr_cpuwide_run() (the size rule: htr/common.h;
 * first version: through insns_unknown). */
struct htr_cpuwide_info {
	size_t size;               /* set by the library: bytes filled */
	uint64_t pieces;           /* pieces of every CPU's stream */
	uint64_t insns_other;      /* in pieces of threads not added */
	uint64_t insns_unknown;    /* in pieces no switch explains */
};

/**
 * Create a CPU-wide build on builder @b (borrowed: it must outlive the
 * result; add the code image to it before htr_cpuwide_run()).  *@out is
 * freed with htr_cpuwide_free().  Returns 0, HTR_ERR_INVALID (NULL
 * argument), HTR_ERR_NOMEM.
 */
HTR_API int htr_cpuwide_alloc(struct htr_cpuwide **out, struct htr_builder *b);

/** Free (the builder stays the caller's).  NULL is fine. */
HTR_API void htr_cpuwide_free(struct htr_cpuwide *cw);

/**
 * Convert perf times (switches without HTR_SWITCH_TSC) to TSC with perf's
 * conversion (perf_event_mmap_page time_shift/mult/zero; LLDB's
 * "tscPerfZeroConversion"), the inverse of the one struct
 * htr_thread_info documents.  Replaces an earlier call's.  Returns 0 or
 * HTR_ERR_INVALID (NULL @cw, @time_mult 0, @time_shift above 63).
 */
HTR_API int htr_cpuwide_set_clock(struct htr_cpuwide *cw, uint32_t time_shift,
				  uint64_t time_mult, uint64_t time_zero);

/**
 * Add @size bytes at @data of raw Intel PT recorded on CPU @cpu (copied
 * to the CPU's temporary file; a second call for the same CPU appends, as
 * perf's successive AUX buffers).  CPUs are decoded in the order first
 * added.  Returns 0, HTR_ERR_INVALID (NULL @cw, NULL @data with a nonzero
 * @size), HTR_ERR_IO (the temporary file: the message is in
 * htr_builder_last_error()), HTR_ERR_NOMEM.
 */
HTR_API int htr_cpuwide_add_trace(struct htr_cpuwide *cw, uint32_t cpu,
				  const void *data, size_t size);

/**
 * Add a context switch (copied).  Switches may come in any order: they
 * are sorted by CPU and time (keeping the order of equal times) when the
 * build runs.  Returns 0, HTR_ERR_INVALID (NULL arguments, @sw->size below
 * the first version's, an unknown flag), HTR_ERR_NOMEM.
 */
HTR_API int htr_cpuwide_add_switch(struct htr_cpuwide *cw,
				   const struct htr_switch *sw);

/**
 * Ask for thread @info->tid, written to @out (copied, as @info: recorded
 * in the file as htr_builder_set_thread() would; the size rule applies).
 * Returns 0, HTR_ERR_INVALID (NULL arguments, @info->size below the first
 * version's, an unknown flag, time_shift above 63, tid 0 or already
 * added), HTR_ERR_NOMEM.
 */
HTR_API int htr_cpuwide_add_thread(struct htr_cpuwide *cw,
				   const struct htr_thread_info *info,
				   const char *out);

/**
 * Decode every CPU's trace with the builder's options and image and
 * write each added thread's .htr (under a temporary name, renamed on
 * success, as htr_builder_run() does) if some piece of the trace is
 * that thread's; threads without any are not written
 * (htr_cpuwide_thread_stats() says HTR_ERR_NOTFOUND).  Bad trace data
 * becomes gaps.  The builder's thread record is replaced by each
 * thread's.  May be called again (everything is redone).  Returns 0,
 * HTR_ERR_INVALID (no trace or no thread added; a perf-time switch
 * without htr_cpuwide_set_clock()), HTR_ERR_IO (the temporary spool file
 * in $TMPDIR or /tmp, or an output), HTR_ERR_LIMIT, HTR_ERR_NOMEM,
 * HTR_ERR_CANCELED or the callback's code (the progress callback of the
 * builder's options, offsets over all CPUs' bytes); the message is in
 * htr_builder_last_error().  Files already written on failure stay.
 */
HTR_API int htr_cpuwide_run(struct htr_cpuwide *cw);

/**
 * The figures of thread @tid's file after htr_cpuwide_run(), into @st, a
 * struct of @size bytes (normally sizeof(*st)).  Returns 0 (the file was
 * written), HTR_ERR_NOTFOUND (no run yet, @tid not added, or no piece
 * was its: no file), HTR_ERR_INVALID (NULL arguments, @size below the
 * first version's).
 */
HTR_API int htr_cpuwide_thread_stats(const struct htr_cpuwide *cw,
				     uint32_t tid, struct htr_build_stats *st,
				     size_t size);

/**
 * What the last htr_cpuwide_run() left out, into @info, a struct of
 * @size bytes.  Returns 0, HTR_ERR_NOTFOUND (no successful run yet),
 * HTR_ERR_INVALID (NULL arguments, @size below the first version's).
 */
HTR_API int htr_cpuwide_info(const struct htr_cpuwide *cw,
			     struct htr_cpuwide_info *info, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* HTR_CPUWIDE_H */
