/* Internal to reports (report.c): what the tests reach beside the API. */
#ifndef HTR_LIB_REPORT_INT_H
#define HTR_LIB_REPORT_INT_H

#include "htr/report.h"

#include <stddef.h>

/* Hits htr_find_visit() holds before it spills them, sorted, to a
 * temporary file (40 bytes each: 40 MiB) and merges the runs. */
#define HTR_FIND_RUN ((size_t) 1 << 20)

/* htr_find_visit() with runs of @run hits (tests make them small). */
int htr_find__visit(const struct htr_file *file, struct htr_analysis *a,
		    const char *pattern, int mode, int order, uint64_t limit,
		    size_t run, htr_find_fn fn, void *payload);

#endif
