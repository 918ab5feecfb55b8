/*
 * htr-synth engine: synthesizes an x86-64 ELF program, the raw Intel PT
 * stream of one execution of it (through libipt's packet encoder) and the
 * ground truth a decoder must recover (instruction count, gaps, call tree,
 * decoder-visible TSC at every block boundary).  See TRUTH.md.
 *
 * The engine streams: memory is bounded by the program size and the maximum
 * call depth, never by the trace length.  No global state; one run per call.
 */
#ifndef HTR_SYNTH_H
#define HTR_SYNTH_H

#include <stddef.h>
#include <stdint.h>

enum synth_scenario {
	SYNTH_BASIC,      /* enable at main, ret compression, runs to main's ret */
	SYNTH_NOCOMP,     /* as basic, every return as a TIP */
	SYNTH_GAP,        /* tracing disabled (FUP+TIP.PGD) and re-enabled (TIP.PGE) */
	SYNTH_OVERFLOW,   /* internal buffer overflow: OVF + FUP, instructions lost */
	SYNTH_LATE_START, /* tracing starts inside nested calls */
	SYNTH_ABRUPT_END, /* the trace stops inside nested calls */
	SYNTH_MIXED,      /* late start + gaps + overflows + abrupt end */
	/* What real user-only and IP-filtered traces contain: */
	SYNTH_UNTRACED,   /* calls and syscalls into untraced code */
	SYNTH_CALLBACK,   /* untraced code calling traced code back */
	SYNTH_OVERFLOW_PGE, /* overflows that resolve with tracing off */
	SYNTH_INTERRUPT,  /* interrupts: traced handlers, in-place disables */
	SYNTH_UNWIND,     /* longjmp and exceptions abandon frames */
	SYNTH_LATE_GAP,   /* late start with gaps before the first return */
	SYNTH_REAL,       /* all of the above, plus mixed */
	SYNTH_SYSENTER,   /* 32-bit code: sysenter, back at a fixed landing */
	SYNTH_ERRORS,     /* calls into code the ELF lacks: decode errors,
			   * resumed shallower, deeper, in the same frame */
	SYNTH_UNWIND_LOOP, /* longjmp and throw at every turn */
	SYNTH_NSCENARIOS
};

struct synth_opts {
	size_t size;               /* sizeof(struct synth_opts) */
	uint64_t seed;
	enum synth_scenario scenario;
	uint64_t insns;            /* traced instructions to aim for (>= 1) */
	unsigned nfuncs;           /* functions in the program, 2..4096 */
	unsigned max_depth;        /* maximum call depth, 1..100000 */
	uint64_t base;             /* runtime address of the lowest PT_LOAD */
	uint32_t psb_period;       /* bytes of trace between PSB+ (>= 256) */
	unsigned mtc_freq;         /* MTC every 2^mtc_freq CTC ticks, 0..8; */
	unsigned ctc_ratio;        /* TSC ticks per CTC tick (cpuid 0x15 ebx/eax) */
	int mtc;                   /* emit MTC packets */
	int cyc;                   /* emit CYC packets */
	int truth;                 /* write PREFIX.truth */
	int bundle;                /* write PREFIX.json (an LLDB trace bundle) */
	/* Called every ~2^20 instructions with the instructions executed so
	 * far; a non-zero return stops the run (result: error, no files). */
	int (*progress)(uint64_t insns, uint64_t bytes, void *payload);
	void *payload;
	/* Untraced library functions (1..64) in the scenarios that call
	 * untraced code (untraced, callback, real). */
	unsigned libs;
};

/* Fixed decoder parameters the truth depends on (also in PREFIX.truth). */
#define SYNTH_CBR 16u   /* CBR ratio; decoders must use nom_freq == SYNTH_CBR */

/* How often the patterns of real traces occur in one run. */
struct synth_counts {
	uint64_t lib_calls;     /* traced calls into untraced code */
	uint64_t syscalls;
	uint64_t callbacks;     /* untraced code calling traced code */
	uint64_t irqs;          /* interrupts entering a traced handler */
	uint64_t irqs_after_call, irqs_after_ret;
	uint64_t irqs_in_place; /* FUP + TIP.PGD, TIP.PGE at the same IP */
	uint64_t longjmps, throws;
	uint64_t ovf_pge;       /* overflows resolved with tracing off */
	uint64_t ovf_pge_ret;   /* ... resumed at an open frame's return
				 * address */
	uint64_t early_gaps;    /* gaps and overflows before the first
				 * return of a frame the trace started in */
	uint64_t sysenters;
	uint64_t errors;        /* decode errors ("no memory mapped") */
	uint64_t err_same;      /* ... resumed in the frame they left */
	uint64_t err_shallower; /* ... in an outer frame */
	uint64_t err_deeper;    /* ... in a frame entered in the gap */
};

struct synth_result {
	uint64_t insns;       /* instructions a decoder delivers */
	uint64_t blocks;      /* invocations in the ground truth */
	uint64_t gaps;
	uint64_t trace_bytes;
	unsigned max_depth;   /* deepest call stack seen */
	struct synth_counts n;
};

void synth_opts_init(struct synth_opts *opts);

/* Scenario by name ("basic", ...); returns -1 if unknown. */
int synth_scenario_parse(const char *name);
const char *synth_scenario_name(enum synth_scenario s);

/* Validate @opts.  Returns 0, or -1 with "knob: problem" in @err. */
int synth_check_opts(const struct synth_opts *opts, char *err, size_t errlen);

/*
 * Write PREFIX.elf, PREFIX.pt and, as asked, PREFIX.truth and PREFIX.json.
 * Files are written under temporary names and renamed only on success.
 * Returns 0 on success; on failure -1 with a one-line message in @err and no
 * output file left behind.
 */
int synth_run(const struct synth_opts *opts, const char *prefix,
	      struct synth_result *result, char *err, size_t errlen);

#endif /* HTR_SYNTH_H */
