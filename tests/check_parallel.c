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

void htr_check_parallel(const struct htr_build_opts *bo, const char *elf,
			const char *raw, const char *trace, const char *htr)
{
	struct htr_build_opts po;
	struct htr_build_stats st;
	struct htr_builder *b;
	char out[1024];
	int rc;

	if (bo)
		po = *bo;
	else
		htr_build_opts_init(&po);
	/* Three threads, a chunk boundary at every PSB. */
	po.threads = 3;
	po.chunk_size = 1;
	po.progress = NULL;
	snprintf(out, sizeof(out), "%s.j3", htr);
	cr_assert_eq(htr_builder_alloc(&b, &po), 0);
	rc = elf ? htr_builder_add_elf(b, elf) : htr_builder_add_raw(b, raw);
	cr_assert_eq(rc, 0, "%s", htr_builder_last_error(b));
	memset(&st, 0, sizeof(st));
	rc = htr_builder_run(b, trace, out, &st, sizeof(st));
	cr_assert_eq(rc, 0, "%s: -j3: %s", trace, htr_builder_last_error(b));
	htr_builder_free(b);
	cr_assert(htr_files_same(htr, out), "%s: -j3 built another file than "
		  "-j1", trace);
	/* Without decode errors the chunks always join up: no falling back
	 * to one thread. */
	cr_assert(st.threads == 3 || has_error_gap(out), "%s: -j3 fell back "
		  "to %u thread without a decode error", trace, st.threads);
	remove(out);
}
