#include "same_htr.h"

#include "htr/htr.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static int has_error_gap(const char *path)
{
	struct htr_file *f = NULL;
	uint64_t i;
	int found = 0;

	cr_assert_eq(htr_file_open(&f, path, NULL), 0, "%s", path);
	for (i = 0; i < htr_gap_count(f) && !found; i++) {
		struct htr_gap_info g;

		g.size = sizeof(g);
		cr_assert_eq(htr_gap_get(f, i, &g, sizeof(g)), 0);
		found = g.kind == HTR_GAP_ERROR;
	}
	htr_file_close(f);
	return found;
}

int htr_walk_fell_back(const struct htr_build_stats *st)
{
	return st->decoder == HTR_DECODER_BLOCK;
}

void htr_check_walk_kept(const struct htr_build_stats *st, const char *trace,
			 const char *out)
{
	/* Of what the walk does not follow, the synthesized traces hold
	 * only decode errors (Intel's corpus, with VMX, ptwrite and 16-bit
	 * code, does not come here). */
	cr_assert(!htr_walk_fell_back(st) || has_error_gap(out), "%s: the "
		  "walk fell back to the block decoder without a decode error",
		  trace);
}

void htr_check_parallel(const struct htr_build_opts *bo, const char *elf,
			const char *raw, const char *trace, const char *htr)
{
	/* The callers build @htr with the default decoder (the walk), so
	 * naming each decoder also checks that the default is the walk. */
	static const struct {
		int decoder;
		unsigned threads;
		const char *name;
	} runs[] = {
		{ HTR_DECODER_BLOCK, 1, "--decoder block -j1" },
		{ HTR_DECODER_BLOCK, 3, "--decoder block -j3" },
		{ HTR_DECODER_WALK, 1, "--decoder walk -j1" },
		{ HTR_DECODER_WALK, 3, "--decoder walk -j3" },
	};
	struct htr_build_opts po;
	struct htr_build_stats st;
	struct htr_builder *b;
	char out[1024];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		if (bo)
			po = *bo;
		else
			htr_build_opts_init(&po);
		po.decoder = runs[i].decoder;
		po.threads = runs[i].threads;
		po.chunk_size = 1;
		po.progress = NULL;
		snprintf(out, sizeof(out), "%s.%zu", htr, i);
		cr_assert_eq(htr_builder_alloc(&b, &po), 0);
		rc = elf ? htr_builder_add_elf(b, elf) :
			   htr_builder_add_raw(b, raw);
		cr_assert_eq(rc, 0, "%s", htr_builder_last_error(b));
		memset(&st, 0, sizeof(st));
		rc = htr_builder_run(b, trace, out, &st, sizeof(st));
		cr_assert_eq(rc, 0, "%s: %s: %s", trace, runs[i].name,
			     htr_builder_last_error(b));
		htr_builder_free(b);
		cr_assert(htr_files_same(htr, out), "%s: %s built another file "
			  "than the default on one thread", trace, runs[i].name);
		/* Without decode errors the chunks always join up: no
		 * falling back to one thread. */
		cr_assert(st.threads == runs[i].threads || has_error_gap(out),
			  "%s: %s fell back to %u thread without a decode "
			  "error", trace, runs[i].name, st.threads);
		if (po.decoder == HTR_DECODER_BLOCK) {
			cr_assert_eq(st.decoder, HTR_DECODER_BLOCK, "%s: %s",
				     trace, runs[i].name);
		} else {
			cr_assert(st.decoder == HTR_DECODER_WALK ||
				  htr_walk_fell_back(&st), "%s: %s: decoder %d",
				  trace, runs[i].name, st.decoder);
			htr_check_walk_kept(&st, trace, out);
		}
		remove(out);
	}
}
