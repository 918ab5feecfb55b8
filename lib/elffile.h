/*
 * ELF files for libelf: the one place lib/ opens them (image.c maps code
 * from them, symbols.c and srcline.c name it, perf.c matches the files a
 * perf.data names by build-id and load address).  One set of checks and
 * one set of messages for a file that is not what it should be.
 *
 * Named elffile, not elf: lib/ is on the tests' include path, and a
 * lib/elf.h would stand in for the system's <elf.h> there.
 */
#ifndef HTR_LIB_ELFFILE_H
#define HTR_LIB_ELFFILE_H

#include "err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct Elf Elf;

/* An ELF file open for reading: close it with htr_elf__close(). */
struct htr_elf {
	int fd;                 /* -1 for an image in memory */
	Elf *elf;
};

/* htr_elf__open() flags. */
enum {
	HTR_ELF_X86_64 = 1u << 0   /* also require e_machine EM_X86_64 */
};

/*
 * Open @path as a 64-bit little-endian ELF file.  @beside (may be NULL)
 * is the path of an .htr file: when @path is gone, the file of the same
 * base name next to it is opened instead (a bundle copied elsewhere; the
 * caller checks the segments it finds still match).  O_NONBLOCK: a FIFO
 * put in the file's place must not hang us.
 *
 * Returns 0 (close @e with htr_elf__close()), HTR_ERR_IO (cannot open,
 * not a regular file; errno kept), HTR_ERR_FORMAT (not an ELF file, not
 * 64-bit little-endian, not x86-64 with HTR_ELF_X86_64, unreadable
 * program headers), HTR_ERR_NOMEM; the message names @path.  @e is left
 * closed (fd -1, elf NULL) on errors.
 */
int htr_elf__open(struct htr_elf *e, const char *path, const char *beside,
		  unsigned flags, struct htr_err *err);

/* As htr_elf__open() for the @n bytes at @image (not copied: they must
 * outlive @e). */
int htr_elf__memory(struct htr_elf *e, void *image, size_t n,
		    struct htr_err *err);

/* End and close what htr_elf__open() opened.  A closed @e is fine. */
void htr_elf__close(struct htr_elf *e);

/*
 * The GNU build-id from @elf's PT_NOTE segments into @id (at most @max
 * bytes).  Returns the bytes copied; 0 when there is none (not an error:
 * many files carry none).
 */
size_t htr_elf__build_id(Elf *elf, uint8_t *id, size_t max);

#ifdef HTR_HAVE_LIBDW
/*
 * The separate debug file of @elf (Debian's *-dbg and *-dbgsym packages
 * put them there), found under /usr/lib/debug/.build-id/ by @elf's GNU
 * build-id and checked to carry the same one, as gdb and addr2line find
 * it; its addresses are @elf's.  Returns it (the caller ends it with
 * elf_end(), then closes *@fd), or NULL with *@fd -1.
 */
Elf *htr_elf__debug_file(Elf *elf, int *fd);
#endif

#endif
