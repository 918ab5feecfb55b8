/*
 * Tests: an independent reference for `htr build`.  Decodes a raw Intel PT
 * trace with libipt's instruction-flow decoder (pt_insn_*) and applies the
 * README's "Tree rules" to it, literally and naively: the whole trace is
 * held in memory, the call stack is a plain array.  It uses no code from
 * lib/: only libipt, the C library and <elf.h>.
 */
#ifndef HTR_TEST_REF_TREE_H
#define HTR_TEST_REF_TREE_H

#include <stddef.h>
#include <stdint.h>

struct pt_image;

/* Block flags (the README's names). */
#define REF_LATE      0x01u
#define REF_TRUNCATED 0x02u
#define REF_GAP       0x04u
#define REF_IMPLICIT  0x08u   /* implicit-return */
#define REF_UNWOUND   0x10u

enum ref_gap_kind {
	REF_GAP_DISABLED = 1,
	REF_GAP_OVERFLOW = 2,
	REF_GAP_ERROR = 3,
};

struct ref_block {
	uint64_t first, last;   /* instruction IDs */
	int64_t parent;         /* index into ref_tree.blocks, -1: a root */
	uint64_t entry;         /* valid if has_entry */
	int has_entry;
	unsigned flags;         /* REF_* */
};

struct ref_gap {
	uint64_t id;            /* first instruction after the gap */
	enum ref_gap_kind kind;
	int code;               /* libipt's error code for REF_GAP_ERROR */
};

struct ref_tree {
	uint64_t insns;
	struct ref_block *blocks;  /* completion order (post-order) */
	size_t nblocks;
	struct ref_gap *gaps;      /* chronological */
	size_t ngaps;
};

/* The function holding an address (README, Tree rules: an ELF symbol with
 * a size; FUNC.cold and FUNC.part.N count as FUNC). */
struct ref_func {
	uint64_t id;      /* the same for every part of one function */
	uint64_t start;   /* the start of the symbol holding the address */
	int entry;        /* @start is an entry (not a FUNC.cold part) */
};

/* 0 and *@out for the function holding @addr, or -1 if none. */
typedef int (*ref_func_fn)(void *ctx, uint64_t addr, struct ref_func *out);

struct ref_config {
	int cpu_family, cpu_model, cpu_stepping;   /* family 0: none */
	uint32_t cpuid_0x15_eax, cpuid_0x15_ebx;
	uint8_t mtc_freq, nom_freq;
	ref_func_fn func_of;                       /* NULL: no symbols */
	void *func_ctx;
};

void ref_config_init(struct ref_config *cfg);

/*
 * Decode @trace (@size bytes) with @image and build the tree into @out.
 * Returns 0, or -1 with a message in @err (bad configuration, no memory).
 * Bad trace data is never a failure: it becomes gaps.  Free with
 * ref_tree_free() in either case.
 */
int ref_tree_build(const uint8_t *trace, size_t size, struct pt_image *image,
		   const struct ref_config *cfg, struct ref_tree *out,
		   char *err, size_t errlen);
void ref_tree_free(struct ref_tree *t);

/* Add an ELF64 file's PT_LOAD segments to @img: at their link address, or
 * (@has_base) with the lowest PT_LOAD at @base.  Returns 0 or -1 (@err). */
int ref_image_add_elf(struct pt_image *img, const char *path, int has_base,
		      uint64_t base, char *err, size_t errlen);

/* Function extents from an ELF64 file's symbol table (STT_FUNC symbols
 * with a size), relocated as ref_image_add_elf() would. */
struct ref_funcs {
	struct ref_extent {
		uint64_t start, end, id;
		int entry;
	} *f;
	size_t n;
};

int ref_funcs_from_elf(struct ref_funcs *fs, const char *path, int has_base,
		       uint64_t base, char *err, size_t errlen);
/* A ref_func_fn; @ctx is a struct ref_funcs. */
int ref_funcs_lookup(void *ctx, uint64_t addr, struct ref_func *out);
/* The link address of the symbol @name (any type) in an ELF64 file's
 * symbol table: 0, or -1 when there is none. */
int ref_elf_symbol(const char *path, const char *name, uint64_t *addr);
void ref_funcs_free(struct ref_funcs *fs);

#endif
