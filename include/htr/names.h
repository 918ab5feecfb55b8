/*
 * libhtr - names and source lines of code addresses in an .htr's image.
 *
 * Tools that print instructions or places need what the analyzers'
 * names are made of, for any address, not only a block's entry:
 *
 *   struct htr_names *n;
 *   htr_names_open(&n, file);       symbols of the file's ELF images
 *   htr_names_at(n, ip, buf, sizeof(buf));   "FUNC+0x12", "prog+0x1040"
 *   htr_names_free(n);
 *
 *   struct htr_srclines *sl;
 *   if (htr_srclines_supported() && htr_srclines_open(&sl, file) == 0)
 *           puts(htr_srclines_at(sl, ip));   "at FILE:LINE [inlined: ...]"
 *   htr_srclines_free(sl);
 *
 * Both read the image files the .htr names (moved files are looked for
 * next to the .htr; a file that changed since the build is skipped).
 * @file must stay open while a handle is used (they point into it).  A
 * handle belongs to one thread at a time; any number may be open on one
 * file.
 */
#ifndef HTR_NAMES_H
#define HTR_NAMES_H

#include "common.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct htr_file;
struct htr_names;
struct htr_srclines;

/**
 * Load the symbols of @file's ELF images into *@out (freed with
 * htr_names_free()).  Images that cannot be read any more or carry no
 * symbols are skipped (htr_names_skipped()); their addresses get
 * "MODULE+0xOFFSET" names.  Returns 0, HTR_ERR_INVALID (NULL argument),
 * HTR_ERR_NOMEM.
 */
HTR_API int htr_names_open(struct htr_names **out,
			   const struct htr_file *file);

/** Free.  NULL is fine. */
HTR_API void htr_names_free(struct htr_names *n);

/**
 * How many images htr_names_open() skipped; *@why (may be NULL) is then a
 * message naming the first, owned by @n ("" when none was skipped).
 */
HTR_API unsigned htr_names_skipped(const struct htr_names *n,
				   const char **why);

/**
 * The name of @addr into @buf (@size bytes, always terminated, cut short
 * to fit): at a symbol's start its (demangled) name, inside one
 * "name+0xOFF", outside every symbol "MODULE+0xOFFSET" or "0xADDR"; when
 * the image has several modules, names carry theirs: "MODULE!name".
 * Returns 1 if a symbol starts exactly at @addr, 0 otherwise (also for a
 * NULL @n or @buf, or @size 0).
 */
HTR_API int htr_names_at(const struct htr_names *n, uint64_t addr, char *buf,
			 size_t size);

/** 1 if this libhtr reads DWARF source lines (built with libdw), else 0. */
HTR_API int htr_srclines_supported(void);

/**
 * A source-line handle for @file's image into *@out (freed with
 * htr_srclines_free(); one libdw handle per module asked about, opened
 * on first use, and a fixed-size cache).  Returns 0, HTR_ERR_NOMEM,
 * HTR_ERR_INVALID (NULL argument, or no libdw: htr_srclines_supported()
 * is 0).
 */
HTR_API int htr_srclines_open(struct htr_srclines **out,
			      const struct htr_file *file);

/** Free.  NULL is fine. */
HTR_API void htr_srclines_free(struct htr_srclines *sl);

/**
 * Where @addr is in the source: "at FILE:LINE", followed, in inlined
 * code, by " [inlined: INNER <- ... <- FUNCTION at FILE:LINE]" (the
 * frames `addr2line -i -f -s -C` prints; files are base names); "" where
 * nothing is known.  Never NULL; points into @sl: valid until the next
 * call on @sl.
 */
HTR_API const char *htr_srclines_at(struct htr_srclines *sl, uint64_t addr);

#ifdef __cplusplus
}
#endif

#endif /* HTR_NAMES_H */
