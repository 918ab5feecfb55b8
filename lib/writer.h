/*
 * Streaming writer of .htr files.  Memory stays bounded: blocks go to the
 * output as they complete; the other sections are spooled to unlinked
 * temporary files next to the output and copied in at commit.  Everything
 * is written under "OUT.tmpPID" and renamed onto OUT only by a successful
 * commit, so a killed build never leaves a file that opens.
 */
#ifndef HTR_LIB_WRITER_H
#define HTR_LIB_WRITER_H

#include "err.h"
#include "format.h"

#include <stdint.h>

struct htr_writer;

struct htr_writer_meta {
	uint64_t ninsns;
	uint64_t trace_size, trace_hash;
	uint32_t libipt_version[4];
};

/* Create the temporary output for @path.  Returns 0 or a negative
 * htr_error with a message in @err; *out is NULL on failure. */
int htr_writer__open(struct htr_writer **out, const char *path,
		     struct htr_err *err);

/* Flags of htr_writer__open_flags(); 0 is htr_writer__open(). */
#define HTR_WRITER_NO_FSYNC 0x1u  /* commit without fsync (not durable
				   * across a crash, faster) */
#define HTR_WRITER_NO_SWEEP 0x2u  /* leave other processes' leftover
				   * "PATH.tmpPID" files alone */
#define HTR_WRITER_NO_MAP 0x4u    /* link through pread and pwrite, as on
				   * a file system that cannot map (the
				   * same file; for tests) */
int htr_writer__open_flags(struct htr_writer **out, const char *path,
			   unsigned flags, struct htr_err *err);

/* The threads commit may link the tree on (default 1: one, with a second
 * hashing beside it).  Set before the first block, 2 or more: the writer
 * notes where the linking pass may be cut as the blocks arrive (O(1) a
 * block), and commit links in up to @threads ranges at once where the
 * blocks allow (htr_writer__link_ranges()).  Later, it only lowers the
 * count. */
void htr_writer__threads(struct htr_writer *w, unsigned threads);

/* Append a completed block.  Only first, last, first_child, nchildren and
 * func_flags are read; parent and next_sibling are computed by commit.
 * Returns the new block's index through @index (may be NULL).
 * HTR_ERR_LIMIT past HTR_MAX_BLOCKS blocks; HTR_ERR_INVALID if first >
 * last, last is below the previous block's (not post-order), or
 * first_child/nchildren are impossible (first_child must be HTR_NONE
 * exactly when nchildren is 0).
 *
 * Every error is sticky: later calls return it and commit fails.  Gaps
 * and TSC changes must come by non-decreasing ID, sync points by
 * non-decreasing offset (HTR_ERR_INVALID otherwise); an ID above
 * HTR_MAX_ID + 1 is HTR_ERR_LIMIT. */
int htr_writer__block(struct htr_writer *w, const struct htr_disk_block *b,
		      uint32_t *index);
uint32_t htr_writer__nblocks(const struct htr_writer *w);

int htr_writer__func(struct htr_writer *w, uint64_t entry);  /* index = order */
int htr_writer__gap(struct htr_writer *w, uint64_t id, uint64_t offset,
		    int kind, int code);
int htr_writer__tsc(struct htr_writer *w, uint64_t id, uint64_t tsc);
int htr_writer__sync(struct htr_writer *w, uint64_t offset, uint64_t id);
int htr_writer__image(struct htr_writer *w, uint32_t kind, uint64_t vaddr,
		      uint64_t offset, uint64_t size, const char *path);
/* The recorded thread (at most once; none: the section stays empty). */
int htr_writer__thread(struct htr_writer *w, const struct htr_disk_thread *t);

/* Link the tree (parent, next_sibling, first_root: one backward pass with
 * O(depth) memory, in ranges at once: htr_writer__threads()), write every
 * section, the section table and the
 * header with its hashes, fsync and rename onto the final path.
 * Returns 0 or a negative htr_error (message in the writer's err):
 * HTR_ERR_CORRUPT when the blocks do not form a tree (a first_child or
 * child count that does not match, overlapping siblings, a child starting
 * before its parent), HTR_ERR_INVALID when a record names an ID at or
 * past m->ninsns, HTR_ERR_LIMIT for more than 2^48 instructions,
 * HTR_ERR_IO. */
int htr_writer__commit(struct htr_writer *w, const struct htr_writer_meta *m);

/* After a successful commit: the deepest nesting (a root has depth 1),
 * found by the linking pass. */
uint32_t htr_writer__max_depth(const struct htr_writer *w);

/* After a successful commit: the ranges the tree was linked in at once
 * (1: one pass; cuts sit on 1 MiB boundaries of the blocks, where
 * the ancestors of the block below are at most 1024 deep). */
unsigned htr_writer__link_ranges(const struct htr_writer *w);

/* Free; an uncommitted output is removed.  NULL is fine. */
void htr_writer__free(struct htr_writer *w);

/* The writer's error state (valid until free). */
const struct htr_err *htr_writer__err(const struct htr_writer *w);

#endif
