/* Reading ../shared/corpus/libipt-ptt (see its README) for tests. */
#ifndef HTR_TEST_CORPUS_H
#define HTR_TEST_CORPUS_H

#include <stddef.h>

/* One manifest.tsv row split at tabs (in place). */
struct mrow { char *f[32]; int n; };

int split_tabs(char *line, struct mrow *m);

/* Count instructions and decode errors in a -ptxed.exp file.  0 or -1. */
int read_exp(const char *path, long *insns, long *errors);

/* The corpus directory (from $HTR_SOURCE_ROOT/../shared), or NULL if absent. */
const char *corpus_dir(char *buf, size_t len);

/* Whether libipt knows any erratum for cpu "F/M". */
int has_errata(const char *cpu);

#endif
