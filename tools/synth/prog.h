/* Program model of the synthesizer: machine code plus a per-instruction table
 * the executor walks.  Internal to tools/synth. */
#ifndef HTR_SYNTH_PROG_H
#define HTR_SYNTH_PROG_H

#include <stddef.h>
#include <stdint.h>

enum sk {               /* what an instruction does to control flow */
	SK_PLAIN,       /* falls through */
	SK_JCC,         /* conditional: target or fall through (TNT bit) */
	SK_JMP,         /* direct jump (within a function or a tail call) */
	SK_CALL,        /* direct call */
	SK_ICALL,       /* call *%rax (TIP) */
	SK_IJMP,        /* jmp *%rax (TIP) */
	SK_RET,
};

enum srole {            /* why a conditional branch exists: drives decisions */
	SR_NONE,
	SR_GUARD,       /* taken skips the following call */
	SR_IF,          /* taken skips a plain block */
	SR_LOOP,        /* taken repeats the loop body */
	SR_TAIL,        /* taken returns normally, not taken tail-jumps */
	SR_MAIN,        /* main's outer loop */
};

struct sinsn {
	uint32_t off;       /* offset in .text */
	uint32_t target;    /* insn index of the branch/call target */
	uint32_t func;      /* function containing it */
	uint8_t len;
	uint8_t kind;       /* enum sk */
	uint8_t role;       /* enum srole */
	uint8_t self;       /* SK_CALL to its own function (recursion) */
};

struct sfunc {
	char name[64];
	uint32_t first;     /* index of the entry instruction */
	uint32_t off;       /* offset of the entry in .text */
	uint32_t size;      /* bytes */
};

struct prog {
	uint8_t *text;
	size_t text_size;
	struct sinsn *insns;
	size_t ninsns;
	struct sfunc *funcs;
	unsigned nfuncs;
};

/* Generate a program of @nfuncs functions from @seed; function 0 is main.
 * Returns 0, or -1 on allocation failure. */
int prog_generate(struct prog *p, uint64_t seed, unsigned nfuncs);
void prog_free(struct prog *p);

/* Function containing text offset @off, or -1. */
int prog_func_at(const struct prog *p, uint32_t off);

/* splitmix64: the deterministic generator used throughout the synthesizer. */
static inline uint64_t synth_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline unsigned synth_below(uint64_t *state, unsigned n)
{
	return (unsigned) (synth_rand(state) % n);
}

#endif
