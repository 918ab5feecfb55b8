/* Error state kept on a handle (libhtr keeps no global or thread-local). */
#ifndef HTR_LIB_ERR_H
#define HTR_LIB_ERR_H

#include "htr/error.h"

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
