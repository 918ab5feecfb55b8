/* Unlinked temporary files for data too big to keep in memory (spools,
 * joined traces): page cache the kernel can write out, gone when closed. */
#ifndef HTR_LIB_TMPFILE_H
#define HTR_LIB_TMPFILE_H

#include "err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A new, already unlinked file in $TMPDIR (or /tmp) whose name starts
 * htr-@what-.  Returns its descriptor (the caller closes it), or -1 with
 * the message in @err. */
int htr_tmp__open(const char *what, struct htr_err *err);

/* Write all @n bytes at @p to @fd, retrying on EINTR.  Returns 0, or -1
 * with errno set. */
int htr_tmp__write(int fd, const void *p, uint64_t n);

/* Read (@wr false) or write all @n bytes at offset @off of @fd, retrying
 * on EINTR.  Returns 0, an errno value, or -1 (the file ended before @n
 * bytes were read).  Touches nothing but @fd and @p: any thread. */
int htr_tmp__io_at(int fd, void *p, size_t n, uint64_t off, bool wr);

#endif
