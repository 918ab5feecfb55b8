/*
 * record-cmp [--tsc] TRUTH FILE.htr: does the tree htr built equal the
 * recorder's ground truth?  Prints one line and exits 0 (equal), 1
 * (different: the first differing block, both sides), 2 (cannot read an
 * input).
 *
 * Compared: instruction count, block count, every block in post-order
 * (first, last, parent, flags, entry of non-late blocks), the gaps.  The
 * TSC at block boundaries is compared too; differences are only counted
 * ("tsc:") unless --tsc makes them fail: where the truth's clock is not
 * the trace's (a CPU-wide recording's threads) they are expected.
 */
#include "htr/htr.h"
#include "truth.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRUTH_UNWOUND_CH 'U'

static unsigned want_flags(const struct truth *t, size_t i, const char *raw)
{
	unsigned f = t->blocks[i].flags;

	return (f & TRUTH_LATE ? HTR_BLOCK_LATE : 0) |
	       (f & TRUTH_TRUNC ? HTR_BLOCK_TRUNCATED : 0) |
	       (f & TRUTH_RETGAP ? HTR_BLOCK_IMPLICIT : 0) |
	       (strchr(raw, TRUTH_UNWOUND_CH) ? HTR_BLOCK_UNWOUND : 0);
}

/* truth.c drops flags it does not know (U): read them again. */
static char **raw_flags(const char *path, size_t n)
{
	char line[512], **v = calloc(n + 1, sizeof(*v));
	FILE *fp = fopen(path, "r");
	size_t i = 0;

	if (!v || !fp) {
		if (fp)
			fclose(fp);
		free(v);
		return NULL;
	}
	while (fgets(line, sizeof(line), fp) && i < n) {
		char fl[16];

		if (strncmp(line, "block ", 6))
			continue;
		if (sscanf(line, "block %*d %*d %*u %*u %*u %*u %*u %15s",
			   fl) != 1)
			fl[0] = 0;
		v[i++] = strdup(fl);
	}
	fclose(fp);
	return v;
}

static void show_truth(const struct truth *t, size_t i, const char *fl)
{
	const struct truth_block *b = &t->blocks[i];

	printf("truth block %zu: %" PRIu64 "..%" PRIu64 " entry %#" PRIx64
	       " (%s) flags %s", i, b->first, b->last, t->funcs[b->func].entry,
	       t->funcs[b->func].name, fl);
}

static void show_htr(const struct htr_block_info *bi)
{
	printf("htr block %u: %" PRIu64 "..%" PRIu64 " entry %#" PRIx64
	       " flags %#x parent %u", bi->index, bi->first, bi->last,
	       bi->entry, bi->flags, bi->parent);
}

int main(int argc, char **argv)
{
	struct truth t;
	struct htr_file *f = NULL;
	struct htr_file_info fi;
	char err[512], **fl;
	uint32_t *post_of_pre;
	uint64_t npre = 0, tsc_diffs = 0, first_tsc_diff = UINT64_MAX;
	uint64_t tsc_want = 0, tsc_got = 0;
	size_t i, n;
	int rc = 0, strict = argc == 4 && !strcmp(argv[1], "--tsc");

	argv += strict;
	argc -= strict;
	if (argc != 3) {
		fprintf(stderr, "usage: record-cmp [--tsc] TRUTH FILE.htr\n");
		return 2;
	}
	if (truth_load(&t, argv[1], err, sizeof(err)) < 0) {
		fprintf(stderr, "record-cmp: %s\n", err);
		return 2;
	}
	fl = raw_flags(argv[1], t.nblocks);
	if (htr_file_open(&f, argv[2], NULL) < 0 || !fl) {
		fprintf(stderr, "record-cmp: %s: %s\n", argv[2],
			f ? htr_file_last_error(f) : "out of memory");
		htr_file_close(f);
		return 2;
	}
	fi.size = sizeof(fi);
	htr_file_info(f, &fi, sizeof(fi));
	if (fi.ninsns != t.insns) {
		printf("DIFF insns: htr %" PRIu64 ", truth %" PRIu64 "\n",
		       fi.ninsns, t.insns);
		rc = 1;
		goto out;
	}
	for (i = 0; i < t.nblocks; i++)
		if ((uint64_t) t.blocks[i].pre + 1 > npre)
			npre = (uint64_t) t.blocks[i].pre + 1;
	post_of_pre = malloc((npre + 1) * sizeof(*post_of_pre));
	if (!post_of_pre)
		return 2;
	for (i = 0; i <= npre; i++)
		post_of_pre[i] = HTR_NONE;
	for (i = 0; i < t.nblocks; i++)
		post_of_pre[t.blocks[i].pre] = (uint32_t) i;
	n = htr_block_count(f) < t.nblocks ? htr_block_count(f) : t.nblocks;
	for (i = 0; i < n && !rc; i++) {
		const struct truth_block *tb = &t.blocks[i];
		struct htr_block_info bi;
		uint32_t want_parent = tb->parent < 0 ||
				       (uint64_t) tb->parent >= npre ? HTR_NONE :
				       post_of_pre[tb->parent];
		const char *what = NULL;
		uint64_t tsc;

		bi.size = sizeof(bi);
		htr_block_get(f, (uint32_t) i, &bi, sizeof(bi));
		if (bi.first != tb->first)
			what = "first";
		else if (bi.last != tb->last)
			what = "last";
		else if (bi.parent != want_parent)
			what = "parent";
		else if ((bi.flags & ~HTR_BLOCK_GAP) != want_flags(&t, i, fl[i]))
			what = "flags";
		else if (!(tb->flags & TRUTH_LATE) && !strchr(fl[i], 'E') &&
			 bi.entry != t.funcs[tb->func].entry)
			what = "entry";
		if (what) {
			printf("DIFF block %zu %s (of %zu truth, %u htr): ", i,
			       what, t.nblocks, htr_block_count(f));
			show_truth(&t, i, fl[i]);
			printf(" parent-post %u | ", want_parent);
			show_htr(&bi);
			printf("\n");
			rc = 1;
			break;
		}
		if (!(tb->flags & TRUTH_LATE) &&
		    htr_tsc_for_insn(f, tb->first, &tsc) == 0 &&
		    tsc != tb->tsc_first && !tsc_diffs++) {
			first_tsc_diff = i;
			tsc_want = tb->tsc_first;
			tsc_got = tsc;
		}
		if (!(tb->flags & (TRUTH_TRUNC | TRUTH_RETGAP)) &&
		    htr_tsc_for_insn(f, tb->last, &tsc) == 0 &&
		    tsc != tb->tsc_last && !tsc_diffs++) {
			first_tsc_diff = i;
			tsc_want = tb->tsc_last;
			tsc_got = tsc;
		}
	}
	free(post_of_pre);
	if (!rc && htr_block_count(f) != t.nblocks) {
		printf("DIFF blocks: htr %u, truth %zu (the first %zu agree)\n",
		       htr_block_count(f), t.nblocks, n);
		rc = 1;
	}
	if (!rc && htr_gap_count(f) != t.ngaps) {
		printf("DIFF gaps: htr %" PRIu64 ", truth %zu\n",
		       htr_gap_count(f), t.ngaps);
		rc = 1;
	}
	for (i = 0; !rc && i < t.ngaps; i++) {
		struct htr_gap_info g;

		g.size = sizeof(g);
		htr_gap_get(f, i, &g, sizeof(g));
		if (g.id != t.gaps[i].id) {
			printf("DIFF gap %zu: htr at %" PRIu64 ", truth at %"
			       PRIu64 "\n", i, g.id, t.gaps[i].id);
			rc = 1;
		}
	}
	if (!rc && strict && tsc_diffs) {
		printf("DIFF tsc: %" PRIu64 " block ends differ, first in block "
		       "%" PRIu64 " (truth %" PRIu64 ", htr %" PRIu64 ")\n",
		       tsc_diffs, first_tsc_diff, tsc_want, tsc_got);
		rc = 1;
	}
	if (!rc)
		printf("ok insns %" PRIu64 " blocks %zu gaps %zu", t.insns,
		       t.nblocks, t.ngaps);
	if (!rc && tsc_diffs)
		printf("; tsc: %" PRIu64 " block ends differ, first in block "
		       "%" PRIu64, tsc_diffs, first_tsc_diff);
	if (!rc)
		printf("\n");
out:
	for (i = 0; i < t.nblocks; i++)
		free(fl[i]);
	free(fl);
	htr_file_close(f);
	truth_free(&t);
	return rc;
}
