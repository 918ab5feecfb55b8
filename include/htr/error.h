/*
 * libhtr - error codes.
 *
 * Every fallible function returns an int: zero (or a non-negative count) on
 * success, a negative enum htr_error code on failure.  Every handle also
 * keeps a message about its last failure, read with one function named
 * after it: htr_file_last_error(), htr_builder_last_error(),
 * htr_store_last_error(), htr_analysis_last_error(),
 * htr_cursor_last_error(), htr_perf_last_error().  A CPU-wide build's
 * messages are its builder's.
 */
#ifndef HTR_ERROR_H
#define HTR_ERROR_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum htr_error {
	HTR_OK = 0,
	/** An argument was NULL, out of range or otherwise unusable. */
	HTR_ERR_INVALID = -1,
	/** Memory allocation failed. */
	HTR_ERR_NOMEM = -2,
	/** An operating-system call failed; the handle's message has errno's text. */
	HTR_ERR_IO = -3,
	/** The file is not an .htr file (bad magic or endianness). */
	HTR_ERR_FORMAT = -4,
	/** The .htr file was written by an incompatible format version. */
	HTR_ERR_VERSION = -5,
	/** The file claims to be .htr but its contents are inconsistent. */
	HTR_ERR_CORRUPT = -6,
	/** An index or instruction ID lies outside the valid range. */
	HTR_ERR_RANGE = -7,
	/** An expected outcome: nothing matches the query. */
	HTR_ERR_NOTFOUND = -8,
	/** An expected outcome: an iteration has no further element. */
	HTR_ERR_ITEROVER = -9,
	/** The trace or image could not be decoded at all. */
	HTR_ERR_DECODE = -10,
	/** A limit of the format was exceeded (e.g. more than 2^32-1 blocks). */
	HTR_ERR_LIMIT = -11,
	/** The operation was stopped by a callback. */
	HTR_ERR_CANCELED = -12,
	/** A callback returned a negative value in libhtr's own range
	 * (above HTR_ERR_USER), which would read as one of these codes. */
	HTR_ERR_CALLBACK = -13,
	/** Callbacks' own error codes are this value or below; libhtr never
	 * returns one of them unless a callback did (htr/common.h,
	 * "Callbacks"). */
	HTR_ERR_USER = -1000,
};

/**
 * Describe an error code.
 *
 * Returns a short static lowercase phrase for @code; an unknown code (and
 * any callback's own code, HTR_ERR_USER or below) gives "unknown error".
 * The string is never freed.
 */
HTR_API const char *htr_errstr(int code);

/**
 * @src into @dst (@size bytes, always terminated when @size > 0, cut
 * short to fit) with each control character written as an escape: \n,
 * \t, \r, \x1b ... (C0, DEL, and the C1 controls as UTF-8 encodes
 * them), as every message of the library is.  For text read from input
 * files (a thread's comm, a module's path) before a tool prints it.
 * Returns @dst.  Any thread may call it.
 */
HTR_API char *htr_escape(char *dst, size_t size, const char *src);

#ifdef __cplusplus
}
#endif

#endif /* HTR_ERROR_H */
