/*
 * libhtr - common definitions shared by every public header.
 *
 * Threading: libhtr keeps no global mutable state.  Every handle documents
 * which threads may use it; read-only handles may be shared.
 *
 * Structs with a size (one rule for all of them, libipt's).  Every public
 * struct that crosses the API starts with `size_t size`, and every version
 * of libhtr accepts any size from the end of the struct's first version
 * upward:
 *
 *  - options you pass in (struct htr_*_opts): set `size` to sizeof() of
 *    your struct (the htr_*_opts_init() functions do).  The library reads
 *    min(size, its sizeof) bytes and zero-fills the fields you did not
 *    pass; a field added in a later version always means "as before" when
 *    it is 0, so a program built against older headers keeps its
 *    behaviour.  Bytes past the library's struct are ignored.
 *  - facts the library fills (struct htr_*_info, htr_build_stats): pass
 *    the size of your struct; the library writes min(size, its sizeof)
 *    bytes, sets the copy's `size` to that count (so you can tell which
 *    fields are filled) and never touches your bytes beyond that.
 *  - structs the library hands to a callback (htr_build_progress,
 *    htr_func_stats) are the library's own, whole, and only grow at the
 *    end: read the fields your header declares.
 *
 * A size below the first version's end is HTR_ERR_INVALID and nothing is
 * read or written.  The first versions are the layouts of libhtr 0.1.
 *
 * Callbacks (progress reports, visitors, analyzers) are called on the
 * thread that made the call that takes them, unless their header says
 * otherwise, and follow one contract:
 *
 *  - they must return: no longjmp() out of them and no C++ exception
 *    through libhtr's frames (the library holds locks, LMDB transactions,
 *    threads and memory across the call; unwinding leaks or deadlocks
 *    them).  Catch exceptions inside the callback and return a value.
 *  - 0 goes on.
 *  - a positive value stops: the function that called back returns that
 *    value unchanged (htr_builder_run() returns HTR_ERR_CANCELED, see
 *    htr/build.h).  Functions that take a visitor never return a positive
 *    value of their own.
 *  - a negative value is the caller's own error code and comes back
 *    unchanged; it must be HTR_ERR_USER or below, so it can never be read
 *    as one of libhtr's HTR_ERR_* codes.  A negative value in libhtr's own
 *    range (HTR_ERR_USER < value < 0) breaks this contract and is returned
 *    as HTR_ERR_CALLBACK.
 */
#ifndef HTR_COMMON_H
#define HTR_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#  define HTR_API __attribute__((visibility("default")))
#else
#  define HTR_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The library version as "MAJOR.MINOR.PATCH".  Static; never free it. */
HTR_API const char *htr_version(void);

#ifdef __cplusplus
}
#endif

#endif /* HTR_COMMON_H */
