/*
 * On-disk layout of .htr files (documented for users in FORMAT.md).
 * All integers are little-endian; every record has a fixed size.
 *
 *   [header 256 B][section table: nsections x 24 B] ... sections, each
 *   8-byte aligned, in any order the table says.
 */
#ifndef HTR_LIB_FORMAT_H
#define HTR_LIB_FORMAT_H

#include "le.h"
#include "htr/tree.h"   /* HTR_NONE: "no block", on disk too */

#include <stdint.h>

#define HTR_MAGIC "HTRTREE\0"          /* 8 bytes */
#define HTR_FORMAT_VERSION 3u         /* written; 1 and 2 are still read */
#define HTR_FORMAT_VERSION_MIN 1u
#define HTR_ENDIAN_TAG 0x01020304u     /* reads 0x04030201 on the wrong end */
#define HTR_FUNC_NONE 0xffffffu        /* no known entry (late start) */
#define HTR_MAX_BLOCKS 0xfffffffeu     /* 2^32 - 2: HTR_NONE is reserved */
#define HTR_MAX_ID ((1ull << 48) - 1)  /* instruction IDs are 48-bit */

enum htr_section_id {
	HTR_SEC_BLOCKS = 1,   /* struct htr_disk_block[nblocks], post-order */
	HTR_SEC_FUNCS = 2,    /* uint64_t entry[nfuncs] */
	HTR_SEC_GAPS = 3,     /* struct htr_disk_gap[], by id */
	HTR_SEC_TSC = 4,      /* struct htr_disk_tsc[], by id: time changes */
	HTR_SEC_SYNC = 5,     /* struct htr_disk_sync[], by offset: PSBs */
	HTR_SEC_IMAGES = 6,   /* struct htr_disk_image + path, repeated */
	HTR_SEC_THREAD = 7,   /* struct htr_disk_thread[0 or 1] (version 2) */
};

struct htr_disk_header {
	char magic[8];
	uint32_t version;
	uint32_t endian;
	uint32_t header_size;         /* sizeof(struct htr_disk_header) */
	uint32_t nsections;
	uint64_t section_table;       /* file offset of the section table */
	uint64_t file_size;           /* the whole file; catches truncation */
	uint64_t ninsns;              /* instruction IDs are 0..ninsns-1 */
	uint64_t nblocks;
	uint32_t first_root;          /* first root block, HTR_NONE if none */
	uint32_t max_depth;           /* deepest block nesting (root = 1) */
	uint64_t trace_size;          /* identity of the input trace */
	uint64_t trace_hash;          /* htr_hash__bytes over the trace */
	uint64_t image_hash;          /* over the image list (paths, addrs) */
	uint64_t body_hash;           /* over bytes [body_start, file_size) */
	uint64_t body_start;          /* first byte after the section table */
	uint32_t libipt_version[4];   /* major, minor, patch, build */
	uint64_t build_time;          /* seconds since the epoch */
	uint64_t nroots;              /* length of the root chain */
	uint8_t reserved[112];        /* zero */
	uint64_t header_hash;         /* over the header with this field zero,
				       * followed by the section table */
};

struct htr_disk_section {
	uint32_t id;                  /* enum htr_section_id */
	uint32_t entsize;             /* record size; 1 for HTR_SEC_IMAGES */
	uint64_t offset;
	uint64_t size;                /* bytes; a multiple of entsize */
};

/* One function invocation.  Blocks are stored in completion order
 * (post-order), so `last` never decreases along the array. */
struct htr_disk_block {
	uint8_t first[6];             /* 48-bit first instruction ID */
	uint8_t last[6];              /* 48-bit last instruction ID */
	uint32_t parent;              /* HTR_NONE for a root */
	uint32_t first_child;         /* HTR_NONE if none */
	uint32_t next_sibling;        /* chronological; roots are chained too */
	uint32_t nchildren;
	uint32_t func_flags;          /* bits 0-23: index into HTR_SEC_FUNCS or
				       * HTR_FUNC_NONE; bits 24-31: flags */
};

/* Block flags (bits 24-31 of func_flags); public values in htr/tree.h. */
#define HTR_DISK_FLAG_SHIFT 24

struct htr_disk_gap {
	uint64_t id;                  /* first instruction after the gap */
	uint64_t offset;              /* trace offset where it was noticed */
	int32_t kind;                 /* enum htr_gap_kind */
	int32_t code;                 /* libipt error code for decode errors */
};

struct htr_disk_tsc {
	uint64_t id;                  /* from this instruction on ... */
	uint64_t tsc;                 /* ... the decoder reports this time */
};

struct htr_disk_sync {
	uint64_t offset;              /* trace offset of a PSB */
	uint64_t id;                  /* first instruction decoded after it */
};

struct htr_disk_image {
	uint64_t vaddr;               /* where the bytes are loaded */
	uint64_t offset;              /* file offset of the bytes */
	uint64_t size;
	uint32_t kind;                /* 1 ELF segment, 2 raw */
	uint32_t path_len;            /* path bytes follow, padded to 8 */
};

/* The recorded thread and its clock (perf.data input). */
struct htr_disk_thread {
	uint32_t pid, tid;
	uint32_t flags;               /* HTR_THREAD_* of htr/tree.h */
	uint32_t time_shift;          /* perf's TSC -> ns conversion: */
	uint64_t time_mult, time_zero;
	uint64_t wall_ns, clock_ns;   /* wall clock at clock_ns (perf time) */
	char comm[32];                /* NUL-padded */
	uint8_t reserved[16];         /* zero */
};

_Static_assert(sizeof(struct htr_disk_header) == 256, "header size");
_Static_assert(sizeof(struct htr_disk_section) == 24, "section size");
_Static_assert(HTR_NONE == 0xffffffffu, "no block is 0xffffffff on disk");
_Static_assert(sizeof(struct htr_disk_block) == 32, "block size");
_Static_assert(sizeof(struct htr_disk_gap) == 24, "gap size");
_Static_assert(sizeof(struct htr_disk_thread) == 96, "thread size");

static inline uint64_t htr_disk__get48(const uint8_t b[6])
{
	return htr_disk__get_le(b, 6);
}

static inline void htr_disk__put48(uint8_t b[6], uint64_t v)
{
	htr_disk__put_le(b, v, 6);
}

#endif
