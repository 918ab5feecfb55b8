/*
 * An opened .htr file (internal view).  Other lib/ modules read sections
 * through these pointers; everything points into the read-only mapping and
 * stays valid until htr_file_close().  The handle never changes after a
 * successful open, so it may be shared between threads.
 *
 * Validated at open: the header, the section table, every section's bounds
 * and record size, the counts, the order of gaps/tsc/sync and the image
 * records.  NOT validated at open: the contents of block records; every
 * index read from a block must be range-checked before use.
 */
#ifndef HTR_LIB_FILE_H
#define HTR_LIB_FILE_H

#include "err.h"
#include "format.h"
#include "htr/tree.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct htr_file {
	struct htr_err err;
	bool ok;                                /* open succeeded */
	bool borrowed;                          /* map is the caller's buffer
						 * (htr_file_open_buffer) */
	char *path;                             /* "(memory)" if borrowed */

	const uint8_t *map;
	size_t map_size;
	const struct htr_disk_header *hdr;      /* NULL unless ok */

	const struct htr_disk_block *blocks;
	uint64_t nblocks;
	const uint64_t *funcs;
	uint64_t nfuncs;
	const struct htr_disk_gap *gaps;
	uint64_t ngaps;
	const struct htr_disk_tsc *tsc;
	uint64_t ntsc;
	const struct htr_disk_sync *sync;
	uint64_t nsync;
	const uint8_t *images;                  /* HTR_SEC_IMAGES bytes */
	uint64_t images_size;
	uint64_t nimages;
	const struct htr_disk_thread *thread;   /* NULL: none recorded */
};

/* Block @i's record, or NULL if @file failed or @i is out of range. */
static inline const struct htr_disk_block *
htr_file__block(const struct htr_file *file, uint32_t i)
{
	if (!file || !file->ok || i >= file->nblocks)
		return NULL;
	return &file->blocks[i];
}

/* The number of time points with id <= @id, searching from index @lo on
 * (every point before @lo must have id <= @id).  O(log n). */
uint64_t htr_file__tsc_upper(const struct htr_file *file, uint64_t id,
			     uint64_t lo);

/* One image record of HTR_SEC_IMAGES. */
struct htr_file_image {
	const struct htr_disk_image *rec;
	const char *path;                       /* NOT NUL-terminated */
	uint32_t path_len;
};

/*
 * Iterate over the image records: start with *@pos = 0; each call fills
 * @im and advances *@pos.  Returns 0, or HTR_ERR_ITEROVER at the end (the
 * records were validated at open, so nothing else can happen).
 */
int htr_file__image_next(const struct htr_file *file, uint64_t *pos,
			 struct htr_file_image *im);

/* The sections of the format, in id order (htr_file__sections[id - 1]):
 * id, record size (1: variable-size image records) and the name messages
 * use.  Version 1 files have all but the last.  The reader checks a file's table against it; the writer writes
 * the blocks and then its spools in this order. */
#define HTR_NSECTIONS 7
struct htr_file__section {
	uint32_t id, entsize;
	const char *name;
};
extern const struct htr_file__section htr_file__sections[HTR_NSECTIONS];

#endif
