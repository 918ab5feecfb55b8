/* Unlinked temporary files for data too big to keep in memory (spools,
 * joined traces): page cache the kernel can write out, gone when closed. */
#ifndef HTR_LIB_TMPFILE_H
#define HTR_LIB_TMPFILE_H

#include "err.h"

#include <stdint.h>

/* A new, already unlinked file in $TMPDIR (or /tmp) whose name starts
 * htr-@what-.  Returns its descriptor (the caller closes it), or -1 with
 * the message in @err. */
int htr_tmp__open(const char *what, struct htr_err *err);

/* Write all @n bytes at @p to @fd, retrying on EINTR.  Returns 0, or -1
 * with errno set. */
int htr_tmp__write(int fd, const void *p, uint64_t n);

#endif
