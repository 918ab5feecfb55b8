/*
 * libhtr - exports: the call tree in formats trace viewers and flame graphs
 * read, exactly what `htr export` writes (the CLI is this API's first
 * user; docs/exports.md describes the formats, `htr export --help` the
 * times):
 *   chrome    Chrome trace event JSON (Perfetto's UI, chrome://tracing,
 *             speedscope): a begin and an end event per block;
 *   folded    folded stacks (flamegraph.pl, speedscope, inferno): one line
 *             per call stack, "outer;inner;innermost LOCAL";
 *   perfetto  Perfetto's protobuf trace (TrackEvent), only in builds with
 *             libprotobuf-c (htr_export_has()).
 *
 *   struct htr_export_opts eo;
 *   htr_export_opts_init(&eo);
 *   eo.format = HTR_EXPORT_FOLDED;
 *   eo.max_depth = 8;
 *   rc = htr_export(file, analysis, stdout, &eo);
 *
 * Times and names come from @analysis (opened with HTR_ANALYZE_ALL, or at
 * least the TSC and symbol analyzers): its errors are its own
 * (htr_analysis_last_error()).  Memory stays bounded: chrome and perfetto
 * stream, folded keeps one entry per distinct stack up to 2^20 of them.
 * Threads: the call uses @analysis, which belongs to one thread at a time
 * (htr/analyze.h); @file may be shared.  The library never prints: it
 * writes to the FILE it is given and nowhere else.
 */
#ifndef HTR_EXPORT_H
#define HTR_EXPORT_H

#include <stdio.h>

#include "common.h"
#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct htr_file;
struct htr_analysis;

/* Formats of struct htr_export_opts. */
enum htr_export_format {
	HTR_EXPORT_CHROME = 1,
	HTR_EXPORT_FOLDED = 2,
	HTR_EXPORT_PERFETTO = 3,
};

/* Flags of struct htr_export_opts. */
#define HTR_EXPORT_GAPS  0x1u   /* chrome, perfetto: an instant event at
				 * every gap */
#define HTR_EXPORT_TICKS 0x2u   /* times in TSC ticks even when ns are
				 * known (a file built from a perf.data) */
#define HTR_EXPORT_ARGS  0x4u   /* chrome: each block's details on its
				 * end event */

/* Options of htr_export() (the size rule: htr/common.h; first version:
 * through min_duration). */
struct htr_export_opts {
	size_t size;               /* sizeof(struct htr_export_opts) */
	int format;                /* enum htr_export_format */
	uint32_t flags;            /* HTR_EXPORT_* */
	/* Only the subtree of this block (HTR_NONE: the whole tree). */
	uint32_t block;
	/* Levels below the first at most (0: no limit); deeper time stays
	 * with the block at the last level. */
	uint64_t max_depth;
	/* Leave out blocks whose total is below this, in the output's unit
	 * (ns for a file built from a perf.data without HTR_EXPORT_TICKS,
	 * else TSC ticks); their time stays with their parent. */
	uint64_t min_duration;
};

/**
 * Set the @size bytes at @opts to the defaults (chrome, the whole tree,
 * no limits) and opts->size to @size.  Use htr_export_opts_init().
 */
HTR_API void htr_export_opts_init_size(struct htr_export_opts *opts,
				       size_t size);

/** Set @opts to the defaults, with the caller's sizeof. */
static inline void htr_export_opts_init(struct htr_export_opts *opts)
{
	htr_export_opts_init_size(opts, sizeof(*opts));
}

/**
 * Whether this libhtr writes @format (enum htr_export_format): 1 or 0
 * (perfetto needs libprotobuf-c at build time).
 */
HTR_API int htr_export_has(int format);

/**
 * The format named @name ("chrome", "folded" or "perfetto", as `htr
 * export --format` takes them): an enum htr_export_format, or
 * HTR_ERR_NOTFOUND for any other name (NULL too).  Whether this build
 * writes it is htr_export_has()'s to say.  Any thread.
 */
HTR_API int htr_export_format_of(const char *name);

/**
 * Write the tree of @file, with the times and names of @analysis (an
 * analysis of @file), in @opts->format to @fp, from its current position.
 * A failed call may have written part of the export: write to a
 * temporary file, or use htr_export_path().  Returns 0, HTR_ERR_INVALID
 * (NULL argument, opts->size below the first version's, an unknown
 * format or one this build lacks, opts->block past the end),
 * HTR_ERR_NOMEM, HTR_ERR_IO (writing to @fp failed: the FILE's error
 * indicator says more), or the analysis's error (its message on
 * @analysis).
 */
HTR_API int htr_export(const struct htr_file *file,
		       struct htr_analysis *analysis, FILE *fp,
		       const struct htr_export_opts *opts);

/**
 * htr_export() into the file @path, all or nothing: written as
 * PATH.tmpPID, renamed to @path when complete, removed on failure.
 * Returns what htr_export() does; on HTR_ERR_IO errno says why.
 */
HTR_API int htr_export_path(const struct htr_file *file,
			    struct htr_analysis *analysis, const char *path,
			    const struct htr_export_opts *opts);

#ifdef __cplusplus
}
#endif

#endif /* HTR_EXPORT_H */
