/*
 * Symbols: names for code addresses, from the ELF symbol tables of the
 * image an .htr file was built with (its HTR_SEC_IMAGES list, relocated the
 * same way).  C++ names are demangled.  An address no symbol covers is
 * named "MODULE+0xOFFSET" (MODULE: the file's base name, OFFSET the
 * address in the file's own terms, what addr2line -e FILE takes; for an
 * ELF file that cannot be read its file offset, for other images the
 * distance from their lowest loaded address); one outside every module
 * "0xADDR".  A PLT stub is named after the function it leads to.
 *
 * Memory: one entry per function symbol of the image (not per block).
 * A loaded table is read-only; it may be shared between threads.
 */
#ifndef HTR_LIB_SYMBOLS_H
#define HTR_LIB_SYMBOLS_H

#include "err.h"

#include <stddef.h>
#include <stdint.h>

struct htr_file;
struct htr_syms;
typedef struct Elf Elf;

/* A function symbol of one ELF file; @name points into libelf's data. */
struct htr_elf_func {
	uint64_t value, size;
	const char *name;
	uint32_t rank;          /* 0 global, 1 weak, 2 local, 3 other */
};

/*
 * The function symbols of @elf's .symtab (or, without one, .dynsym) into
 * *@out (malloc'ed; the caller frees it).  Returns the count, 0 if there
 * is no usable table, or HTR_ERR_NOMEM.
 */
long htr_syms__elf_funcs(Elf *elf, struct htr_elf_func **out);

/*
 * Load the symbols of @file's ELF images.  Images that cannot be read any
 * more (moved, deleted, changed: checked against the recorded segment
 * size) or carry no symbols are skipped; their addresses get
 * "MODULE+0xOFFSET" names.  *@nskipped (may be NULL) counts them, and
 * @err then holds a message naming the first.
 * Returns 0 or HTR_ERR_NOMEM.
 */
int htr_syms__load(struct htr_syms **out, const struct htr_file *file,
		   unsigned *nskipped, struct htr_err *err);
void htr_syms__free(struct htr_syms *syms);

/* How many of @file's ELF images cannot be opened now, and in *@nodebug
 * (may be NULL) how many of the others have no .symtab and no debug file
 * under /usr/lib/debug/.build-id/ (a few opens and header reads per
 * image; lets a stored index built without them be refreshed once they
 * are back, or once a -dbg package is installed). */
unsigned htr_syms__unreadable(const struct htr_file *file, unsigned *nodebug);

/*
 * The name of the function at @addr into @buf (always NUL-terminated,
 * truncated to @size).  Exact symbol start: its (demangled) name; inside a
 * symbol: "name+0xOFF"; otherwise "MODULE+0xOFFSET" or "0xADDR".  When
 * the image has several modules, symbol names carry their module:
 * "MODULE!name", "MODULE!name+0xOFF".
 * Returns 1 if a symbol starts exactly at @addr, 0 otherwise.
 */
/*
 * As htr_syms__name() for an address inside a function rather than its
 * entry: the containing symbol's name without "+0xOFF" ("MODULE!name"
 * with several modules); outside every symbol "MODULE+0xOFFSET" or
 * "0xADDR".  Returns 1 if a symbol contains @addr, 0 otherwise.
 */
int htr_syms__function(const struct htr_syms *syms, uint64_t addr,
		       char *buf, size_t size);

int htr_syms__name(const struct htr_syms *syms, uint64_t addr, char *buf,
		   size_t size);

/*
 * Where entering the function at @addr always leads, into @out (up to
 * @max addresses, in order): a PLT stub's target, then the targets of
 * tail jumps that the first straight-line instructions (no branch, call
 * or return before it) of each end in ("qsort@plt" -> qsort -> qsort_r).
 * Each is a symbol's start.  Returns the count (0: nowhere known).
 */
size_t htr_syms__leads_to(const struct htr_syms *syms, uint64_t addr,
			  uint64_t *out, size_t max);

/*
 * The @k-th other name (0, 1, ...) of the symbol at @addr into @buf, as
 * htr_syms__name() would print it had it won: the aliases its module
 * gives the same address ("qsort_r", "__qsort_r").  Returns 1, or 0 when
 * there is no such name (@buf empty).
 */
int htr_syms__alias(const struct htr_syms *syms, uint64_t addr, size_t k,
		    char *buf, size_t size);

#endif
