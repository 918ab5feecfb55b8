/*
 * The built-in descriptors (analyze_tsc.c, analyze_sym.c), registered by
 * name on every store (store.c).  The file map of the store and
 * analyzers is in lib/env.h.
 */
#ifndef HTR_LIB_DESCRIPTORS_H
#define HTR_LIB_DESCRIPTORS_H

#include "analyzer_int.h"

#include <stdint.h>

void htr_tsc__descriptor(struct htr_analyzer *d);
void htr_sym__descriptor(struct htr_analyzer *d);

/* TSC figures of @block from a "tsc" result (decoded or computed).
 * Returns 0, HTR_ERR_RANGE, HTR_ERR_CORRUPT, HTR_ERR_IO (message through
 * the result's ctx, or @ctx if the result has none). */
int htr_tsc__value(const void *tsc, struct htr_analyzer_ctx *ctx,
		   uint32_t block, uint64_t *total, uint64_t *local);

#endif
