/*
 * The builder's parts for other lib/ modules (internal): the output side
 * of a build (writer + tree builder for one .htr) and the decoder
 * configuration, so CPU-wide builds (cpuwide.c) make their files exactly
 * as htr_builder_run() does.
 */
#ifndef HTR_LIB_BUILD_INT_H
#define HTR_LIB_BUILD_INT_H

#include "htr/build.h"

#include "decode.h"
#include "err.h"
#include "format.h"
#include "treebuild.h"
#include "writer.h"

#include <stdbool.h>

struct htr_image;

struct htr_builder {
	struct htr_build_opts opts;
	struct htr_image *img;
	struct htr_err err;
	bool have_thread;
	struct htr_disk_thread thread;
};

/* One output being built. */
struct htr_build_out {
	const char *path;
	struct htr_writer *w;
	struct htr_tb *tb;
};

/* Open @out's temporary with @b's image pieces and thread, and a tree
 * builder on it.  Returns 0 or an error (message on @b; call
 * htr_build__out_free() either way). */
int htr_build__out_open(struct htr_builder *b, const char *out,
			struct htr_build_out *o);

/* Finish the tree, commit the file and fill @s.  Returns 0 or an error
 * (message on @b).  With @trace (its path, for the message), a tree of
 * no instruction whose trace met decode errors is HTR_ERR_DECODE and no
 * file: the image is not the traced code.  CPU-wide builds pass NULL (a
 * thread of theirs may run only where no code is at hand). */
int htr_build__out_commit(struct htr_builder *b, struct htr_build_out *o,
			  const char *trace, uint64_t trace_size,
			  uint64_t trace_hash, struct htr_build_stats *s);

/* Put the writer's or builder's error @rc on @b; returns @rc. */
int htr_build__out_fail(struct htr_builder *b, struct htr_build_out *o,
			int rc);

/* Free; an uncommitted output is removed. */
void htr_build__out_free(struct htr_build_out *o);

/* The decoder configuration of @b's options over @size bytes at @data. */
void htr_build__decode_cfg(const struct htr_builder *b,
			   struct htr_decode_cfg *cfg, const uint8_t *data,
			   uint64_t size);

#endif
