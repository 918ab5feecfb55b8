/*
 * Reference decode with plain libipt (no libhtr code): what an independent
 * decoder sees in a synthesized trace.  Proves the synthesizer's traces are
 * real Intel PT and its ground truth is what a decoder finds.
 */
#ifndef HTR_SYNTH_VERIFY_H
#define HTR_SYNTH_VERIFY_H

#include <stddef.h>
#include <stdint.h>

struct ref_call {
	uint64_t id, target;
	int err;        /* a decode error came right after it: whether the
			 * callee ran a traced instruction depends on where
			 * decoding resumed (target: where the error was) */
};
struct ref_time { uint64_t id, tsc; };
struct ref_gap { uint64_t id; int overflow, error; };

struct ref {
	uint64_t insns;
	uint64_t errors;        /* decode errors (an "error" gap each) */
	/* Near calls whose callee ran a traced instruction, with the
	 * callee's entry: the next instruction, or where a TIP.PGD or an
	 * interrupt says the callee began.  A call into untraced code that
	 * comes straight back is no block, so it is left out. */
	struct ref_call *calls; size_t ncalls;
	uint64_t *rets; size_t nrets;   /* near and far returns */
	uint64_t *ijmps; size_t nijmps; /* indirect near jumps */
	struct ref_gap *gaps; size_t ngaps;
	/* Block decoder: the time after each block, keyed by the ID after
	 * it (times) and by its last ID (times_last). */
	uint64_t blk_insns;
	struct ref_time *times; size_t ntimes;
	struct ref_time *times_last; size_t ntimes_last;
};

struct ref_cfg {
	const char *trace, *elf;
	uint64_t base;
	uint32_t cpuid_eax, cpuid_ebx, mtc_freq, nom_freq;
};

/* Instruction-flow decode: count, calls, returns, gaps.  Returns 0/-1. */
int ref_decode_insn(const struct ref_cfg *cfg, struct ref *out);
/* Block decode: the count and the times.  Returns 0/-1. */
int ref_decode_time(const struct ref_cfg *cfg, struct ref *out);
void ref_free(struct ref *r);

struct synth_verify {
	uint64_t insns, calls, rets, gaps, times;  /* what was compared */
};

/*
 * Decode PREFIX.pt with plain libipt and compare it with PREFIX.truth:
 * instruction count, every call (ID and target), every return, every gap
 * and the decoder's TSC at both ends of every block.  Returns 0 if all
 * agree, -1 with the first disagreement (or I/O problem) in @err.
 */
int synth_verify(const char *prefix, struct synth_verify *res, char *err,
		 size_t errlen);

#endif
