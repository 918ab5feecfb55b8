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
};

struct truth {
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

#endif
