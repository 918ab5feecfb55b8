/*
 * Image: the code the trace ran, as one libipt image backed by one shared
 * section cache.  ELF files are loaded segment by segment (PT_LOAD with
 * PF_X) at their link address or relocated so the lowest PT_LOAD sits at a
 * given base (ptxed's convention); raw files are FILE[:OFFSET[:SIZE]]@VADDR.
 */
#ifndef HTR_LIB_IMAGE_H
#define HTR_LIB_IMAGE_H

#include "err.h"

#include <stdint.h>

struct htr_image;
struct pt_image;
struct pt_image_section_cache;

/* Returns 0 or HTR_ERR_NOMEM. */
int htr_image__alloc(struct htr_image **out);
void htr_image__free(struct htr_image *img);

/* Add an ELF.  @has_base: relocate so the lowest PT_LOAD starts at @base.
 * Returns 0, HTR_ERR_IO (cannot read @path), HTR_ERR_INVALID (not an
 * x86-64 ELF or no loadable code) with a message naming @path. */
int htr_image__add_elf(struct htr_image *img, const char *path,
		       int has_base, uint64_t base, struct htr_err *err);

/* Add @size bytes (0: to the end) of @path from @offset at @vaddr. */
int htr_image__add_raw(struct htr_image *img, const char *path,
		       uint64_t offset, uint64_t size, uint64_t vaddr,
		       struct htr_err *err);

/* Add @size bytes at @data as code at @vaddr (copied into a memory
 * file; the image keeps it until freed).  @name (NULL: "[bytes]") is
 * what the .htr records as the piece's path. */
int htr_image__add_bytes(struct htr_image *img, const void *data,
			 uint64_t size, uint64_t vaddr, const char *name,
			 struct htr_err *err);

/* Parse "FILE[@BASE]" / "FILE[:OFFSET[:SIZE]]@VADDR" and add it. */
int htr_image__add_elf_spec(struct htr_image *img, const char *spec,
			    struct htr_err *err);
int htr_image__add_raw_spec(struct htr_image *img, const char *spec,
			    struct htr_err *err);

/* The libipt image (owned by @img). */
struct pt_image *htr_image__pt(struct htr_image *img);
/* The same image in a section cache of its own (*@isc, *@pt; free the
 * image first).  libipt's block cache lives in the sections: a decoder on
 * private sections decodes the same way whatever other decoders did
 * before or do alongside (where it cuts blocks, and so where it stops at
 * an error, depends on that cache).  block.isid indexes *@isc, so the
 * decoder can read the bytes of a block's last instruction.  Returns 0,
 * HTR_ERR_NOMEM or HTR_ERR_IO. */
int htr_image__private(const struct htr_image *img, struct pt_image **pt,
		       struct pt_image_section_cache **isc);

/* Walk the loaded pieces (for the .htr image list and identity). */
struct htr_image_piece {
	const char *path;
	const char *file;          /* what libipt maps (a memory file's
				    * /proc/self/fd/N) */
	uint32_t kind;             /* 1 ELF segment, 2 raw */
	uint64_t vaddr, offset, size;
};
size_t htr_image__count(const struct htr_image *img);

/* The sized function symbols of the ELF files, relocated like their code. */
struct htr_image_extent {
	uint64_t start, end;       /* [start, end) */
	uint64_t func;             /* the function it is part of: the start
				    * of FUNC for FUNC.cold, FUNC.part.N
				    * (GCC's split-off code), else @start */
	uint64_t entry;            /* where it is entered: @start, but
				    * @func for FUNC.cold (only jumped to) */
};

/* The function holding @addr: fills [*start, *end), *@func and *@entry
 * (see struct htr_image_extent) and returns 1, or returns 0 (no sized
 * symbol covers it).  Read-only; any thread. */
int htr_image__func_extent(const struct htr_image *img, uint64_t addr,
			   uint64_t *start, uint64_t *end, uint64_t *func,
			   uint64_t *entry);
const struct htr_image_piece *htr_image__piece(const struct htr_image *img,
					       size_t i);

#endif
