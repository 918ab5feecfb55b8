/*
 * Source lines: where a code address of an .htr's image is in the source,
 * from the DWARF of the module's file, or of its separate debug file
 * found by build-id (libdw; built without it, opening fails).  The text is what `htr dump --lines` prints:
 *
 *   at FILE:LINE [inlined: INNER <- ... <- FUNCTION at FILE:LINE]
 *
 * "at FILE:LINE" is the line table's row for the address; the bracket,
 * only when the address lies in inlined code, names the frames innermost
 * first, each after the first with the line it is at (the call site of
 * the one before), the last being the function itself: the frames and
 * lines `addr2line -i -f -s -C` prints.  Files are base names.  "" where
 * nothing is known (no module, no DWARF, DWARF libdw cannot read).
 *
 * Memory: one libdw handle per module asked about (opened on first use),
 * and a fixed-size cache of answers by address.  A handle belongs to one
 * thread.
 */
#ifndef HTR_LIB_SRCLINE_H
#define HTR_LIB_SRCLINE_H

#include "err.h"

#include <stdint.h>

struct htr_file;
struct htr_srclines;

/* Whether this build can read DWARF lines (libdw). */
int htr_srclines__supported(void);

/*
 * A handle for @file's image.  @file must stay open while it is used (the
 * module list points into it).  Returns 0, HTR_ERR_NOMEM, or
 * HTR_ERR_INVALID when the build has no libdw (@err says so).
 */
int htr_srclines__open(struct htr_srclines **out, const struct htr_file *file,
		       struct htr_err *err);
void htr_srclines__free(struct htr_srclines *sl);

/*
 * The position of runtime address @addr (see above), never NULL.  Points
 * into @sl's cache: valid until the next call on @sl.
 */
const char *htr_srclines__at(struct htr_srclines *sl, uint64_t addr);

#endif
