/* Reading a whole file, for the tests. */
#ifndef HTR_TEST_SLURP_H
#define HTR_TEST_SLURP_H

#include <stddef.h>
#include <stdint.h>

/* The whole of @path into a malloc'ed buffer with one spare byte (the
 * caller frees it), its size into *@len; NULL if unreadable. */
uint8_t *htr_test_slurp(const char *path, size_t *len);

#endif
