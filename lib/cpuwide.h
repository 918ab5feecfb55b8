/*
 * CPU-wide builds (internal): a perf.data recorded with per-CPU buffers
 * (perf record without --per-thread) holds one Intel PT stream per CPU,
 * each interleaving the threads that ran there.  The context-switch
 * sideband says which thread ran on which CPU from when on; this module
 * cuts each CPU's stream where tracing was (re-)enabled, gives every piece
 * to the thread running on that CPU at that time, and builds one tree per
 * thread from its pieces in time order.
 *
 * How (and what it costs): every CPU's stream is decoded once with the
 * builder's image; the decoder's events go to a temporary file (unlinked,
 * in $TMPDIR or /tmp), and a small index of pieces is kept in memory
 * (about 80 bytes per piece: O(context switches), not O(trace)).  Each
 * thread's pieces are then replayed into its own tree builder.  Whether
 * a switch lost instructions is decided per thread, as the decoder does
 * in one thread's trace: tracing that stopped asynchronously (FUP +
 * TIP.PGD, the thread was preempted) and resumes at that very IP lost
 * nothing, wherever it resumes; any other stop is a gap in that thread.
 *
 * What needs care:
 *  - a piece is given to a thread by the time tracing was enabled (the
 *    TSC the decoder knows there): with timing packets after each enable
 *    (perf's default, TSC on) that is after the switch; with MTC only it
 *    may lag and give the piece to the thread that ran before;
 *  - one image per call: pieces of threads of other processes are decoded
 *    with it too and dropped; their decode errors can cost a few
 *    instructions of the next piece (the tree shows the gap);
 *  - pieces that no switch record explains (before the first switch on
 *    a CPU, or after a switch-out that does not name the next task) are
 *    dropped and counted;
 *  - files built this way have no sync points (the pieces come from
 *    several streams): htr_cursor cannot seek in them.
 */
#ifndef HTR_LIB_CPUWIDE_H
#define HTR_LIB_CPUWIDE_H

#include "build_int.h"
#include "perfdata.h"

#include "htr/tree.h"

struct htr_cpuwide_thread {
	uint32_t tid;
	const char *out;              /* the .htr to write */
	struct htr_thread_info info;  /* recorded in it */
	/* Filled: */
	int built;                    /* 1: @out was written; 0: no piece */
	uint64_t pieces;
	struct htr_build_stats stats;
};

struct htr_cpuwide_stats {
	uint64_t pieces;              /* pieces of every CPU */
	uint64_t insns_other;         /* in pieces of threads not asked for */
	uint64_t insns_unknown;       /* in pieces no switch record explains */
	uint64_t kernel_stretches;    /* user_only: kernel stretches */
	uint32_t *other;              /* the tids of those other threads */
	size_t nother;
};

/* One CPU's stream: @nchunks pieces of @base, in order. */
struct htr_cpuwide_stream {
	uint32_t cpu;
	const uint8_t *base;
	const struct htr_perf_chunk *chunks;
	size_t nchunks;
	uint64_t pt_bytes;            /* sum of the chunks' sizes */
};

/* From @tsc on, thread @tid runs on @cpu (UINT32_MAX: unknown). */
struct htr_cpuwide_switch {
	uint64_t tsc;
	uint32_t cpu, tid;
};

/* What a CPU-wide build reads, whoever parsed it (a perf.data, or the
 * public API's buffers and switches): the switches sorted by (cpu, tsc),
 * equal times in the order they happened. */
struct htr_cpuwide_input {
	const struct htr_cpuwide_stream *cpus;
	size_t ncpus;
	const struct htr_cpuwide_switch *switches;
	size_t nswitches;
	int user_only;                /* htr_perfdata__user_only() each CPU */
};

/*
 * Build the threads @t[0..@n) of the CPU-wide input @in with @b's options
 * and image (which must be the process of those threads); each thread's
 * file is written only if some piece is its.  @cs (zeroed or from an
 * earlier call) is refilled.  Progress goes to @b's callback (offsets
 * over all CPUs' bytes).  Returns 0, or an error with the message on @b
 * (files already written stay).
 */
int htr_cpuwide__run(struct htr_builder *b, const struct htr_cpuwide_input *in,
		     struct htr_cpuwide_thread *t, size_t n,
		     struct htr_cpuwide_stats *cs);

/*
 * Build the threads @t[0..@n) of the CPU-wide recording @pd with @b's
 * options and image (which must be the process of those threads); each
 * thread's file is written only if some piece is its.  @cs (zeroed or
 * from an earlier call) is refilled.  Progress goes to
 * @b's callback (offsets over all CPUs' bytes).  Returns 0, or an error
 * with the message on @b (files already written stay).
 */
int htr_cpuwide__build(struct htr_builder *b, const struct htr_perfdata *pd,
		       struct htr_cpuwide_thread *t, size_t n,
		       struct htr_cpuwide_stats *cs);

/* Free what @cs holds and zero it (it must be zeroed or filled before
 * the first call). */
void htr_cpuwide__stats_free(struct htr_cpuwide_stats *cs);

#endif
