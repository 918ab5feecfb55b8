/*
 * LMDB check: validates an LMDB 0.9 data file (data.mdb) before LMDB opens
 * it.  LMDB trusts its file: a damaged or planted page makes it abort on
 * assertions, divide by zero, allocate gigabytes, read or write out of
 * bounds, or loop for ever.  This reads what LMDB will rely on - both meta
 * pages, the page size, the map size against the file size, and every page
 * the free list, the main tree and each named tree can reach (header,
 * bounds, node offsets, key order, overflow runs, the counts the meta
 * records, the free list's page numbers) - in O(pages of the trees),
 * without following values (their own checksums cover those).
 *
 * Layout facts are those of LMDB 0.9 on a 64-bit little-endian machine
 * (FORMAT.md, "Sidecar"); databases with duplicate keys (MDB_DUPSORT) are
 * refused, libhtr never makes them.
 */
#ifndef HTR_LIB_LMDBCHECK_H
#define HTR_LIB_LMDBCHECK_H

#include "err.h"

/* Check the LMDB data file @path.  A missing or empty file is fine (LMDB
 * creates it).  Returns 0, HTR_ERR_CORRUPT with a message naming @path
 * and the first problem, HTR_ERR_IO (cannot read it) or HTR_ERR_NOMEM. */
int htr_lmdb__check(const char *path, struct htr_err *err);

#endif
