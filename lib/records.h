/*
 * Analyzer records in the sidecar (records.c): identity, reading,
 * computing and writing once per sidecar.  Used by the reader handles
 * (analysis.c); the file map of the store and analyzers is in lib/env.h.
 */
#ifndef HTR_LIB_RECORDS_H
#define HTR_LIB_RECORDS_H

#include "analyzer_int.h"

/*
 * In a new read txn of @a: 1 if analyzers @idx[0..n) are all current,
 * then decoded into a->res (the txn stays open until
 * htr_records__close()); 0 if not (txn ended); negative on errors
 * (message on a->err).
 */
int htr_records__read(struct htr_analysis *a, const unsigned *idx,
		      unsigned n);

/*
 * Compute and store what of @idx[0..n) (and their dependencies) is not
 * current, once per sidecar.  Returns 0; 1 when the sidecar cannot be
 * written (a->note says why: the caller computes in memory); negative.
 */
int htr_records__ensure(struct htr_analysis *a, const unsigned *idx,
			unsigned n);

/* End @a's read txns (the store stays open). */
void htr_records__close(struct htr_analysis *a);

#endif
