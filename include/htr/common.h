/*
 * libhtr - common definitions shared by every public header.
 *
 * Threading: libhtr keeps no global mutable state.  Every handle documents
 * which threads may use it; read-only handles may be shared.
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
