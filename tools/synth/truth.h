/*
 * Reader for PREFIX.truth (format in TRUTH.md), for tests.  Loads the whole
 * file into memory: meant for test-sized traces, not benchmarks.
 */
#ifndef HTR_SYNTH_TRUTH_H
#define HTR_SYNTH_TRUTH_H

#include <stddef.h>
#include <stdint.h>

#define TRUTH_LATE   1u  /* L: entered before tracing started */
#define TRUTH_TRUNC  2u  /* T: open when the trace ended */
#define TRUTH_RETGAP 4u  /* R: returned while tracing was off */
#define TRUTH_UNWOUND 8u /* U: abandoned (longjmp, exception), closed at the
			  * return that showed it */
#define TRUTH_CALLBACK 16u /* C: entered from untraced code (TIP.PGE at its
			    * entry): no call at FIRST - 1 */
#define TRUTH_IRQ 32u    /* I: entered by an interrupt: no call at FIRST - 1 */
#define TRUTH_GAP 64u    /* G: some of its execution is missing (format 2;
			  * format 1 does not say: see truth_gap_flag) */
#define TRUTH_FUNC_NONE UINT32_MAX /* FUNC -1: unknown */

struct truth_func {
	uint64_t entry;
	uint32_t size;
	char name[64];
};

struct truth_block {
	int64_t pre, parent;
	uint32_t func;
	unsigned flags;
	uint64_t first, last;
	uint64_t tsc_first, tsc_last;
};

struct truth_gap {
	uint64_t id;
	int overflow;           /* 0: tracing disabled, 1: overflow */
	int error;              /* 1: a decode error (overflow is 0) */
};

struct truth {
	int version;            /* the format: 1, or 2 with G letters */
	uint64_t seed, base, insns;
	char scenario[32], elf[256], trace[256];
	uint32_t cpuid_eax, cpuid_ebx, mtc_freq, nom_freq;
	struct truth_func *funcs;
	size_t nfuncs;
	struct truth_block *blocks;     /* completion (post-)order */
	size_t nblocks;
	struct truth_gap *gaps;
	size_t ngaps;
};

/* Returns 0, or -1 with a message in @err. */
int truth_load(struct truth *t, const char *path, char *err, size_t errlen);
void truth_free(struct truth *t);

/* Whether block @b has the gap flag.  Format 2 says (G); format 1 wrote
 * no letter and meant "a gap lies inside its span". */
int truth_gap_flag(const struct truth *t, const struct truth_block *b);

#endif
