/*
 * libFuzzer target: the .htr reader (in memory, through
 * htr_file_open_buffer; files go through the same checks).  Whatever the
 * bytes, opening must either fail cleanly or give a file whose every
 * block, link, gap, time point and instruction lookup can be read without
 * a crash.
 */
#include "fuzz.h"

#include "htr/htr.h"

#include <stdlib.h>
#include <string.h>

static int visit(const struct htr_file *f, uint32_t block, uint32_t parent,
		 uint32_t level, void *payload)
{
	(void) f;
	(void) parent;
	(void) level;
	*(uint64_t *) payload += block;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct htr_open_opts oo;
	uint64_t *copy;
	struct htr_file *f = NULL;
	struct htr_file_info fi;
	uint64_t sum = 0, i, n;
	uint32_t b, nb;

	/* An .htr in memory must be 8-byte aligned, as a mapping is. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	htr_open_opts_init(&oo);
	oo.verify_body = size & 1;
	if (htr_file_open_buffer(&f, copy, size, &oo) < 0) {
		(void) htr_file_last_error(f);
		htr_file_close(f);
		free(copy);
		return 0;
	}
	fi.size = sizeof(fi);
	(void) htr_file_info(f, &fi, sizeof(fi));
	nb = htr_block_count(f);
	for (b = 0; b < nb; b++) {
		struct htr_block_info bi;

		bi.size = sizeof(bi);
		(void) htr_block_get(f, b, &bi, sizeof(bi));
		sum += htr_block_parent(f, b) + htr_block_first_child(f, b) +
		       htr_block_next_sibling(f, b) +
		       htr_block_child_count(f, b);
		(void) htr_block_depth(f, b);
	}
	(void) htr_tree_visit(f, HTR_NONE, HTR_PREORDER, visit, &sum);
	(void) htr_tree_visit(f, HTR_NONE, HTR_POSTORDER, visit, &sum);
	n = htr_gap_count(f);
	for (i = 0; i < n && i < 4096; i++) {
		struct htr_gap_info g;

		g.size = sizeof(g);
		if (htr_gap_get(f, i, &g, sizeof(g)) == 0)
			sum += (uint64_t) htr_gap_reason(&g)[0];
	}
	n = htr_tsc_count(f);
	for (i = 0; i < n && i < 4096; i++) {
		uint64_t id, tsc;

		(void) htr_tsc_point(f, i, &id, &tsc);
	}
	for (i = 0; i < fi.ninsns && i < 4096; i += 1 + i / 8) {
		uint64_t tsc;

		(void) htr_block_for_insn(f, i, &b);
		(void) htr_tsc_for_insn(f, i, &tsc);
	}
	htr_file_close(f);
	free(copy);
	return sum == 1 ? 1 : 0;
}
