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
	SK_SYSCALL,     /* syscall: the kernel runs, back at the next insn */
	SK_IRET,        /* iretq: far return from an interrupt handler */
	SK_SYSENTER,    /* sysenter: the kernel runs, back at .target */
};

enum srole {            /* why a conditional branch exists: drives decisions */
	SR_NONE,
	SR_GUARD,       /* taken skips the following call */
	SR_IF,          /* taken skips a plain block */
	SR_LOOP,        /* taken repeats the loop body */
	SR_TAIL,        /* taken returns normally, not taken tail-jumps */
	SR_MAIN,        /* main's outer loop */
	/* Only in programs with features (struct prog_feat): */
	SR_SPECIAL,     /* taken skips a special statement (untraced call,
			 * syscall, longjmp, throw): the executor decides */
	SR_CBLOOP,      /* untraced code: taken ends the callback loop */
	SR_CALLBACK,    /* untraced code: call *%rax to a traced function
			 * the executor picks */
	SR_LONGJMP,     /* jmp *%rax to an outer frame's landing pad */
	SR_THROW,       /* ret with a rewritten return address: lands in an
			 * outer frame's landing pad */
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

enum sfkind {
	SF_NORMAL,          /* traced */
	SF_LIB,             /* untraced (outside the IP filter), a leaf */
	SF_LIB_CB,          /* untraced, calls traced functions back */
	SF_IRQ,             /* traced interrupt handler, ends in iretq */
	SF_VSYSCALL,        /* traced, enters the kernel with sysenter */
};

struct sfunc {
	char name[64];
	uint32_t first;     /* index of the entry instruction */
	uint32_t off;       /* offset of the entry in .text */
	uint32_t size;      /* bytes */
	uint8_t kind;       /* enum sfkind */
	uint32_t land;      /* landing pad (insn index), 0: none */
};

/* Extra material for the scenarios of real user-only and IP-filtered
 * traces; all zero gives the original programs, byte for byte. */
struct prog_feat {
	unsigned libs;      /* untraced functions after the traced ones */
	int callbacks;      /* some of them call traced functions back */
	int syscalls;       /* syscall statements */
	unsigned irqs;      /* traced interrupt handlers */
	int unwind;         /* landing pads, longjmp and throw statements */
	int sysenter;       /* __kernel_vsyscall and calls to it */
	int bits32;         /* 32-bit code (compatibility mode) */
	unsigned special;   /* percent of statements that are special */
};

struct prog {
	uint8_t *text;
	size_t text_size;
	struct sinsn *insns;
	size_t ninsns;
	struct sfunc *funcs;
	unsigned nfuncs;        /* all functions */
	unsigned ntraced;       /* 0..ntraced-1 are the ordinary traced ones */
	/* Function pointers for call *slot(%rip): nslots 8-byte slots at
	 * .text offset slot_off, slot i holding the address of function
	 * slot_func[i] (prog_fill_slots writes them). */
	uint32_t slot_off;
	uint32_t *slot_func;
	unsigned nslots;
	int bits32;             /* 32-bit code */
	/* 32-bit code loads addresses as immediates (mov $imm32,%eax):
	 * the instructions and what they load, for prog_link. */
	struct { uint32_t insn, target; } *abs;
	size_t nabs;
	/* What the ELF holds, 0: everything.  Code past elf_text_size
	 * runs and is traced, but a decoder has no code there (a library
	 * not at hand); only the first elf_nfuncs functions are named. */
	size_t elf_text_size;
	unsigned elf_nfuncs;
};

/* Generate a program of @nfuncs traced functions from @seed (function 0 is
 * main), plus what @feat asks for (NULL: nothing).  Returns 0, or -1 on
 * allocation failure. */
int prog_generate(struct prog *p, uint64_t seed, unsigned nfuncs,
		  const struct prog_feat *feat);
/* Write the addresses the code holds (function pointer slots, 32-bit
 * immediates) for .text at runtime address @text. */
void prog_link(struct prog *p, uint64_t text);
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
