/* Error state kept on a handle (libhtr keeps no global or thread-local). */
#ifndef HTR_LIB_ERR_H
#define HTR_LIB_ERR_H

#include "htr/error.h"

#include <stddef.h>

struct htr_err {
	int code;
	char msg[512];
};

/* Record @code and a printf-style message on @e; returns @code so callers
 * can `return htr_err__set(...)`.  A NULL @e only returns @code. */
int htr_err__set(struct htr_err *e, int code, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 3, 4)))
#endif
	;

/* As htr_err__set, with ": strerror(errno)" appended and HTR_ERR_IO. */
int htr_err__sys(struct htr_err *e, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

void htr_err__clear(struct htr_err *e);

/*
 * @src into @dst (@size bytes, always terminated, cut short to fit) with
 * each control character written as an escape: \n, \t, \r, \x1b ...
 * (C0, DEL, and the C1 controls as UTF-8 encodes them, which some
 * terminals obey too).  Text read from input files (perf.data strings,
 * comm, module paths) reaches messages through here: a newline would
 * split the one-line message, an escape sequence would drive the
 * reader's terminal.  Backslashes stay as they are, so a message that
 * quotes another one is not escaped twice.  Returns @dst.
 */
char *htr_err__escape(char *dst, size_t size, const char *src);

/*
 * What a function returns for callback value @v that is not 0 (the
 * contract in htr/common.h, "Callbacks"): positive values and the
 * caller's own codes (HTR_ERR_USER or below) unchanged, anything in
 * libhtr's range as HTR_ERR_CALLBACK.
 */
static inline int htr_err__callback(int v)
{
	return v < 0 && v > HTR_ERR_USER ? HTR_ERR_CALLBACK : v;
}

#endif
