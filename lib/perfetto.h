/* Perfetto's protobuf trace format (TrackEvent), written one packet at a
 * time: htr_export() in HTR_EXPORT_PERFETTO (export.c).  Only built with
 * libprotobuf-c and protoc-c (meson -Dperfetto); lib/perfetto_trace_min.proto
 * is the schema.  Internal: the pf_* names stay hidden (libhtr.map).
 *
 * A writer is one packet sequence with its own interning state, writing to
 * a FILE it does not own.  Memory stays bounded whatever the number of
 * events: one packet's buffer and a fixed-size cache of interned names.
 * Every call that writes returns 0, or -1 when out of memory; write errors
 * stay on the FILE (ferror) for the caller to check once at the end. */
#ifndef HTR_LIB_PERFETTO_H
#define HTR_LIB_PERFETTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct pf_writer;

/* What the tracks say about where the events ran. */
struct pf_track_opts {
	int have_thread;        /* pid, tid and comm are the recorded thread's */
	uint32_t pid, tid;
	const char *comm;       /* "" or NULL: unknown */
	const char *name;       /* NULL, or the event track's name (units) */
};

/* An event's argument, a debug annotation: the name is one of
 * pf_arg_names[] (interned once per trace), the value a number or a
 * string. */
enum pf_arg_name {
	PF_ARG_BLOCK, PF_ARG_PARENT, PF_ARG_FIRST, PF_ARG_LAST, PF_ARG_FLAGS,
	PF_ARG_LOCAL, PF_ARG_TOTAL, PF_ARG_ID, PF_ARG_REASON, PF_ARG_COUNT
};
struct pf_arg {
	enum pf_arg_name name;
	const char *str;        /* NULL: the value is u */
	uint64_t u;
};

/* Start a trace on @fp: the track descriptors and the interning reset.
 * *@out is NULL on failure. */
int pf_writer_open(struct pf_writer **out, FILE *fp,
		   const struct pf_track_opts *opts);
/* A slice begins at @ts (ns) on the event track, named @name in category
 * @cat; @args (may be NULL with @nargs 0) are its annotations. */
int pf_slice_begin(struct pf_writer *w, uint64_t ts, const char *cat,
		   const char *name, const struct pf_arg *args, size_t nargs);
/* The innermost open slice ends at @ts. */
int pf_slice_end(struct pf_writer *w, uint64_t ts);
/* An instant event at @ts. */
int pf_instant(struct pf_writer *w, uint64_t ts, const char *cat,
	       const char *name, const struct pf_arg *args, size_t nargs);
/* NULL-safe; writes nothing more. */
void pf_writer_free(struct pf_writer *w);

#endif
