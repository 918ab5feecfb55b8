/*
 * htr build against the synthesizer's ground truth: every scenario gives
 * exactly the truth's call tree (block for block, in post-order), its gaps
 * and its decoder-visible TSC at every block boundary; the same trace built
 * with the ELF at another base gives the same tree; random programs satisfy
 * the tree's structural properties.
 */
#include "build_truth.h"
#include "htr/htr.h"
#include "synth.h"
#include "truth.h"

#include "tmpdir.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

HTR_TEST_TMPDIR(build);

/* Synthesize, build with libhtr, open.  The caller closes *f. */
static void make(struct synth_opts *o, const char *tag, struct truth *t,
		 struct htr_file **f, const char *elf_spec_fmt)
{
	char prefix[256], path[300], spec[400], out[300], err[512];
	struct htr_build_stats st;
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/%s", dir, tag);
	cr_assert_eq(synth_run(o, prefix, NULL, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(t, path, err, sizeof(err)), 0, "%s", err);

	snprintf(spec, sizeof(spec), elf_spec_fmt, prefix,
		 (unsigned long long) t->base);
	snprintf(path, sizeof(path), "%s.pt", prefix);
	snprintf(out, sizeof(out), "%s.htr", prefix);
	build_with_truth(t, spec, path, out, &st);
	cr_assert_eq(st.insns, t->insns, "%s: built %" PRIu64 " insns, truth %"
		     PRIu64, tag, st.insns, t->insns);
	rc = htr_file_open(f, out, NULL);
	cr_assert_eq(rc, 0, "%s: %s", out, *f ? htr_file_last_error(*f) : "");
}

static unsigned truth_flags(unsigned f)
{
	return (f & TRUTH_LATE ? HTR_BLOCK_LATE : 0) |
	       (f & TRUTH_TRUNC ? HTR_BLOCK_TRUNCATED : 0) |
	       (f & TRUTH_RETGAP ? HTR_BLOCK_IMPLICIT : 0) |
	       (f & TRUTH_UNWOUND ? HTR_BLOCK_UNWOUND : 0);
}

/* Whether a decode error lies right before instruction @id. */
static int after_error(const struct truth *t, uint64_t id)
{
	size_t lo = 0, hi = t->ngaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->gaps[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < t->ngaps && t->gaps[lo].id == id; lo++)
		if (t->gaps[lo].error)
			return 1;
	return 0;
}

/* The time instruction @id starts at: the first time point at it, else
 * the last one before it. */
static int first_point_at(const struct htr_file *f, uint64_t id,
			  uint64_t *tsc)
{
	uint64_t lo = 0, hi = htr_tsc_count(f), at;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		cr_assert_eq(htr_tsc_point(f, mid, &at, tsc), 0);
		if (at < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* None there: the time before it goes on. */
	if (lo == htr_tsc_count(f) ||
	    (htr_tsc_point(f, lo, &at, tsc) == 0 && at != id))
		return lo ? htr_tsc_point(f, lo - 1, &at, tsc) : -1;
	return 0;
}

/* The file's tree is the truth's, block for block.  @gaps: also check the
 * gap flags: the truth's G ("some of its execution is missing"), or for a
 * format-1 truth (the shipped sample's) "a gap lies inside its span", as
 * the libhtr that built the shipped files flagged them. */
static void compare(const struct truth *t, const struct htr_file *f,
		    const char *tag, int gaps)
{
	uint32_t *post_of_pre;
	struct htr_file_info fi;
	uint64_t npre = 0;
	size_t i;

	fi.size = sizeof(fi);
	cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
	cr_assert_eq(fi.ninsns, t->insns);
	cr_assert_eq(htr_block_count(f), t->nblocks, "%s: %u blocks, truth %zu",
		     tag, htr_block_count(f), t->nblocks);
	/* A parent the truth does not list (an outer frame entered before
	 * the trace, invisible to a decoder) means a root. */
	for (i = 0; i < t->nblocks; i++)
		if ((uint64_t) t->blocks[i].pre + 1 > npre)
			npre = (uint64_t) t->blocks[i].pre + 1;
	post_of_pre = malloc((npre + 1) * sizeof(*post_of_pre));
	cr_assert_not_null(post_of_pre);
	for (i = 0; i <= npre; i++)
		post_of_pre[i] = HTR_NONE;
	for (i = 0; i < t->nblocks; i++)
		post_of_pre[t->blocks[i].pre] = (uint32_t) i;

	for (i = 0; i < t->nblocks; i++) {
		const struct truth_block *tb = &t->blocks[i];
		struct htr_block_info bi;
		unsigned want;
		uint32_t want_parent = tb->parent < 0 ||
				       (uint64_t) tb->parent >= npre ? HTR_NONE :
				       post_of_pre[tb->parent];
		uint64_t tsc;

		bi.size = sizeof(bi);
		cr_assert_eq(htr_block_get(f, (uint32_t) i, &bi, sizeof(bi)), 0);
		cr_assert_eq(bi.first, tb->first, "%s: block %zu first %" PRIu64
			     ", truth %" PRIu64, tag, i, bi.first, tb->first);
		cr_assert_eq(bi.last, tb->last, "%s: block %zu last %" PRIu64
			     ", truth %" PRIu64, tag, i, bi.last, tb->last);
		cr_assert_eq(bi.parent, want_parent, "%s: block %zu parent %u, "
			     "truth %u", tag, i, bi.parent, want_parent);
		want = truth_flags(tb->flags) |
		       (truth_gap_flag(t, tb) ? HTR_BLOCK_GAP : 0);
		if (!gaps) {
			want &= ~HTR_BLOCK_GAP;
			bi.flags &= ~HTR_BLOCK_GAP;
		}
		cr_assert_eq(bi.flags, want, "%s: block %zu flags %#x, truth "
			     "%#x", tag, i, bi.flags, want);
		if (tb->flags & TRUTH_LATE || tb->func == TRUTH_FUNC_NONE)
			cr_assert_eq(bi.func, HTR_NONE, "%s: block %zu has an "
				     "entry the truth does not know", tag, i);
		else
			cr_assert_eq(bi.entry, t->funcs[tb->func].entry,
				     "%s: block %zu entry %#" PRIx64 ", truth %s",
				     tag, i, bi.entry, t->funcs[tb->func].name);
		if ((tb->flags & TRUTH_LATE) && !tb->first) {
			/* Late blocks start with the trace: at the time of its
			 * first PSB+, the file's first time point.  (Those
			 * opened where decoding resumed start there.) */
			uint64_t at;

			cr_assert_eq(htr_tsc_point(f, 0, &at, &tsc), 0);
			cr_assert_eq(at, 0);
			cr_assert_eq(tsc, tb->tsc_first, "%s: late block %zu "
				     "starts at %" PRIu64 ", truth %" PRIu64, tag,
				     i, tsc, tb->tsc_first);
		} else if (after_error(t, tb->first)) {
			/* Starts where decoding resumed after an error: at
			 * the time of the PSB+ there, the first time point
			 * at its first instruction (a later one at the same
			 * ID is the time after it). */
			cr_assert_eq(first_point_at(f, tb->first, &tsc), 0,
				     "%s: block %zu: no time point at its "
				     "first instruction", tag, i);
			cr_assert_eq(tsc, tb->tsc_first, "%s: block %zu "
				     "starts at %" PRIu64 ", truth %" PRIu64, tag,
				     i, tsc, tb->tsc_first);
		} else {
			cr_assert_eq(htr_tsc_for_insn(f, tb->first, &tsc), 0);
			cr_assert_eq(tsc, tb->tsc_first, "%s: block %zu tsc at "
				     "first %" PRIu64 ", truth %" PRIu64, tag, i,
				     tsc, tb->tsc_first);
		}
		if (!(tb->flags & (TRUTH_TRUNC | TRUTH_RETGAP))) {
			cr_assert_eq(htr_tsc_for_insn(f, tb->last, &tsc), 0);
			cr_assert_eq(tsc, tb->tsc_last, "%s: block %zu tsc at "
				     "last %" PRIu64 ", truth %" PRIu64, tag, i,
				     tsc, tb->tsc_last);
		}
	}
	cr_assert_eq(htr_gap_count(f), t->ngaps, "%s: %" PRIu64 " gaps, truth "
		     "%zu", tag, htr_gap_count(f), t->ngaps);
	for (i = 0; i < t->ngaps; i++) {
		struct htr_gap_info g;

		g.size = sizeof(g);
		cr_assert_eq(htr_gap_get(f, i, &g, sizeof(g)), 0);
		cr_assert_eq(g.id, t->gaps[i].id, "%s: gap %zu", tag, i);
		cr_assert_eq(g.kind, t->gaps[i].overflow ? HTR_GAP_OVERFLOW :
			     t->gaps[i].error ? HTR_GAP_ERROR : HTR_GAP_DISABLED,
			     "%s: gap %zu kind %d", tag, i, (int) g.kind);
	}
	free(post_of_pre);
}

static void scenario(enum synth_scenario s)
{
	uint64_t seed;

	for (seed = 1; seed <= 4; seed++) {
		struct synth_opts o;
		struct truth t;
		struct htr_file *f = NULL;
		char tag[64];

		synth_opts_init(&o);
		o.scenario = s;
		o.seed = seed;
		o.insns = 30000;
		snprintf(tag, sizeof(tag), "%s-%" PRIu64, synth_scenario_name(s),
			 seed);
		make(&o, tag, &t, &f, "%s.elf");
		compare(&t, f, tag, 1);
		htr_file_close(f);
		truth_free(&t);
	}
}

Test(build, basic) { scenario(SYNTH_BASIC); }
Test(build, nocomp) { scenario(SYNTH_NOCOMP); }
Test(build, gap) { scenario(SYNTH_GAP); }
Test(build, overflow) { scenario(SYNTH_OVERFLOW); }
Test(build, late_start) { scenario(SYNTH_LATE_START); }
Test(build, abrupt_end) { scenario(SYNTH_ABRUPT_END); }
Test(build, mixed) { scenario(SYNTH_MIXED); }
Test(build, untraced) { scenario(SYNTH_UNTRACED); }
Test(build, callback) { scenario(SYNTH_CALLBACK); }
Test(build, overflow_pge) { scenario(SYNTH_OVERFLOW_PGE); }
Test(build, interrupt) { scenario(SYNTH_INTERRUPT); }
Test(build, unwind) { scenario(SYNTH_UNWIND); }
Test(build, late_gap) { scenario(SYNTH_LATE_GAP); }
Test(build, real) { scenario(SYNTH_REAL); }
Test(build, sysenter) { scenario(SYNTH_SYSENTER); }
Test(build, errors) { scenario(SYNTH_ERRORS); }
Test(build, unwind_loop) { scenario(SYNTH_UNWIND_LOOP); }

/* The truth's depth: the most blocks nested in one another. */
static uint32_t truth_depth(const struct truth *t)
{
	uint32_t best = 0, *depth_of_pre;
	int64_t npre = 0;
	size_t i;

	for (i = 0; i < t->nblocks; i++)
		if (t->blocks[i].pre + 1 > npre)
			npre = t->blocks[i].pre + 1;
	depth_of_pre = calloc((size_t) npre + 1, sizeof(*depth_of_pre));
	cr_assert_not_null(depth_of_pre);
	/* Post-order: a parent comes after its children; walk backwards. */
	for (i = t->nblocks; i-- > 0;) {
		const struct truth_block *b = &t->blocks[i];
		uint32_t d = b->parent >= 0 && b->parent < npre ?
			     depth_of_pre[b->parent] + 1 : 1;

		depth_of_pre[b->pre] = d;
		if (d > best)
			best = d;
	}
	free(depth_of_pre);
	return best;
}

/* @s at a small and a large size (@n1, @n2 instructions: more decode
 * errors, more longjmps and throws): the depth stays within the
 * program's nesting, equals the truth's at both sizes, and the trees are
 * the truth's.  Returns the larger build's count of error gaps. */
static uint64_t depth_flat(enum synth_scenario s, uint64_t n1, uint64_t n2)
{
	uint64_t sizes[2] = { n1, n2 }, errors = 0;
	struct truth t[2];
	struct htr_file *f[2] = { NULL, NULL };
	char tag[2][64];
	unsigned k;

	for (k = 0; k < 2; k++) {
		struct synth_opts o;
		struct htr_file_info fi;
		uint64_t i;

		synth_opts_init(&o);
		o.scenario = s;
		o.seed = 1;    /* errors: all three ways of resuming */
		o.insns = sizes[k];
		o.max_depth = 8;
		snprintf(tag[k], sizeof(tag[k]), "flat-%s-%" PRIu64,
			 synth_scenario_name(s), sizes[k]);
		make(&o, tag[k], &t[k], &f[k], "%s.elf");
		fi.size = sizeof(fi);
		cr_assert_eq(htr_file_info(f[k], &fi, sizeof(fi)), 0);
		errors = 0;
		for (i = 0; i < t[k].ngaps; i++)
			errors += t[k].gaps[i].error != 0;
		fprintf(stderr, "%s: %" PRIu64 " insns, %" PRIu64 " decode "
			"errors, depth %u, truth %u\n", tag[k], fi.ninsns,
			errors, fi.max_depth, truth_depth(&t[k]));
		/* main's frame and at most max_depth calls */
		cr_assert_leq(fi.max_depth, o.max_depth + 1, "%s: depth %u",
			      tag[k], fi.max_depth);
		cr_assert_eq(fi.max_depth, truth_depth(&t[k]), "%s: depth %u, "
			     "truth %u", tag[k], fi.max_depth,
			     truth_depth(&t[k]));
	}
	/* Then block for block (after the depths: they say more at a
	 * glance when a block differs). */
	for (k = 0; k < 2; k++) {
		compare(&t[k], f[k], tag[k], 1);
		htr_file_close(f[k]);
		truth_free(&t[k]);
	}
	return errors;
}

/* Decode errors that resume in the frame they left, shallower and deeper
 * (hundreds of them): the depth does not grow with their number. */
Test(build, errors_depth_flat, .timeout = 120)
{
	cr_assert_geq(depth_flat(SYNTH_ERRORS, 2000, 100000), 100);
}

/* longjmp and throw at most turns, 20 000 and 600 000 instructions (a
 * few hundred and some ten thousand unwindings): the depth stays flat. */
Test(build, unwind_loop_depth_flat, .timeout = 120)
{
	depth_flat(SYNTH_UNWIND_LOOP, 20000, 600000);
}

/* The same execution traced at the link address and at a PIE base (the
 * synthesizer's code is position independent): FILE and FILE@BASE give
 * the truth's tree each time, and the two trees are the same but for the
 * entry addresses, which differ by exactly the load bias. */
Test(build, two_bases)
{
	static const uint64_t pie = 0x555555554000ull, link = 0x400000;
	struct synth_opts o;
	struct truth t1, t2;
	struct htr_file *f1 = NULL, *f2 = NULL;
	uint32_t i;

	synth_opts_init(&o);
	o.scenario = SYNTH_MIXED;
	o.seed = 11;
	o.insns = 30000;
	make(&o, "link", &t1, &f1, "%s.elf");
	compare(&t1, f1, "link", 1);
	o.base = pie;
	make(&o, "pie", &t2, &f2, "%s.elf@0x%llx");
	compare(&t2, f2, "pie", 1);
	cr_assert_eq(htr_block_count(f1), htr_block_count(f2));
	for (i = 0; i < htr_block_count(f1); i++) {
		struct htr_block_info a, b;

		a.size = b.size = sizeof(a);
		cr_assert_eq(htr_block_get(f1, i, &a, sizeof(a)), 0);
		cr_assert_eq(htr_block_get(f2, i, &b, sizeof(b)), 0);
		cr_assert(a.first == b.first && a.last == b.last &&
			  a.parent == b.parent && a.flags == b.flags,
			  "block %u differs between the bases", i);
		if (!(a.flags & HTR_BLOCK_LATE))
			cr_assert_eq(b.entry - a.entry, pie - link);
	}
	htr_file_close(f1);
	htr_file_close(f2);
	truth_free(&t1);
	truth_free(&t2);
}

/* A trace larger than 4 MiB, whose sections spill more than 1 MiB: the
 * trace is hashed beside the decoding and the sections are copied beside
 * the linking (the threads a large build starts); the tree is still the
 * truth's and every section hashes as the header says. */
Test(build, large, .timeout = 240)
{
	struct htr_open_opts oo;
	struct synth_opts o;
	struct truth t;
	struct htr_file *f = NULL, *v = NULL;
	char path[300];

	synth_opts_init(&o);
	o.scenario = SYNTH_MIXED;
	o.seed = 2;
	o.insns = 12000000;
	make(&o, "large", &t, &f, "%s.elf");
	compare(&t, f, "large", 1);
	htr_open_opts_init(&oo);
	oo.verify_body = 1;
	snprintf(path, sizeof(path), "%s/large.htr", dir);
	cr_assert_eq(htr_file_open(&v, path, &oo), 0, "%s: %s", path,
		     v ? htr_file_last_error(v) : "");
	htr_file_close(v);
	htr_file_close(f);
	truth_free(&t);
}

/* A sweep over random knobs and every scenario: each build is exactly its
 * truth.  Small traces, so 320 of them stay within seconds. */
Test(build, sweep, .timeout = 240)
{
	uint64_t seed;

	for (seed = 1; seed <= 320; seed++) {
		struct synth_opts o;
		struct truth t;
		struct htr_file *f = NULL;
		char tag[64];

		synth_opts_init(&o);
		o.seed = 100003 * seed;
		o.scenario = (enum synth_scenario) (seed % SYNTH_NSCENARIOS);
		o.insns = 200 + (seed * 7907) % 6000;
		o.nfuncs = 4 + (unsigned) (seed * 13 % 60);
		o.max_depth = 2 + (unsigned) (seed * 5 % 40);
		o.psb_period = 256 + (uint32_t) (seed * 977 % 8192);
		o.mtc = seed % 3 != 0;
		o.cyc = seed % 5 != 0;
		if (seed % 4 == 0)
			o.base = 0x555555554000ull;
		snprintf(tag, sizeof(tag), "sweep-%s-%" PRIu64,
			 synth_scenario_name(o.scenario), seed);
		make(&o, tag, &t, &f, "%s.elf@%#llx");
		compare(&t, f, tag, 1);
		htr_file_close(f);
		truth_free(&t);
	}
}

/* The deepest block containing @id by brute force, HTR_NONE if none. */
static uint32_t scan_for_insn(const struct htr_file *f, uint64_t id)
{
	uint32_t i, best = HTR_NONE;
	int64_t best_depth = -1;

	for (i = 0; i < htr_block_count(f); i++) {
		struct htr_block_info bi;

		bi.size = sizeof(bi);
		cr_assert_eq(htr_block_get(f, i, &bi, sizeof(bi)), 0);
		if (bi.first <= id && id <= bi.last &&
		    htr_block_depth(f, i) > best_depth) {
			best = i;
			best_depth = htr_block_depth(f, i);
		}
	}
	return best;
}

/* Random programs and scenarios: whatever the shape, spans nest, children
 * are chronological, links agree both ways, and block_for_insn agrees with
 * a linear scan for every instruction. */
Test(build, properties, .timeout = 240)
{
	uint64_t seed;

	for (seed = 1; seed <= 24; seed++) {
		struct synth_opts o;
		struct truth t;
		struct htr_file *f = NULL;
		char tag[64];
		uint32_t i, n;
		uint64_t id;

		synth_opts_init(&o);
		o.seed = seed * 7919;
		o.scenario = (enum synth_scenario) (seed % SYNTH_NSCENARIOS);
		o.insns = 1500 + seed * 100;
		o.nfuncs = 2 + (unsigned) (seed * 13 % 60);
		o.max_depth = 1 + (unsigned) (seed * 5 % 30);
		snprintf(tag, sizeof(tag), "prop-%" PRIu64, seed);
		make(&o, tag, &t, &f, "%s.elf");
		n = htr_block_count(f);
		for (i = 0; i < n; i++) {
			struct htr_block_info bi, ci, prev;
			uint32_t c, k = 0;

			bi.size = ci.size = prev.size = sizeof(bi);
			cr_assert_eq(htr_block_get(f, i, &bi, sizeof(bi)), 0);
			cr_assert_leq(bi.first, bi.last, "%s: block %u", tag, i);
			cr_assert_lt(bi.last, t.insns);
			for (c = htr_block_first_child(f, i); c != HTR_NONE;
			     c = htr_block_next_sibling(f, c), k++) {
				cr_assert_eq(htr_block_get(f, c, &ci, sizeof(ci)), 0);
				cr_assert_eq(ci.parent, i, "%s: child %u of %u", tag,
					     c, i);
				cr_assert(ci.first >= bi.first && ci.last <= bi.last,
					  "%s: child %u outside block %u", tag, c, i);
				if (k)
					cr_assert_lt(prev.last, ci.first,
						     "%s: children of %u overlap",
						     tag, i);
				prev = ci;
			}
			cr_assert_eq(k, bi.nchildren, "%s: block %u", tag, i);
			if (bi.parent != HTR_NONE)
				cr_assert_lt(i, bi.parent, "%s: not post-order", tag);
		}
		for (id = 0; id < t.insns; id++) {
			uint32_t got = HTR_NONE;
			int rc = htr_block_for_insn(f, id, &got);

			cr_assert(rc == 0 || rc == HTR_ERR_NOTFOUND);
			cr_assert_eq(rc ? HTR_NONE : got, scan_for_insn(f, id),
				     "%s: block for insn %" PRIu64, tag, id);
		}
		cr_assert_eq(htr_block_for_insn(f, t.insns, &i), HTR_ERR_RANGE);
		htr_file_close(f);
		truth_free(&t);
	}
}

/* The shipped fixture tests/data/@name, opened with its body verified
 * and compared with the sample's truth (@gaps: whether its gap flags mean
 * "a gap lies inside the span"); asserts it is format @version. */
static void check_fixture(const char *name, uint32_t version, int gaps,
			  struct htr_file **f)
{
	const char *root = getenv("HTR_SOURCE_ROOT");
	char path[1024], err[512];
	struct truth t;
	struct htr_open_opts oo;
	struct htr_file_info fi;

	cr_assert_not_null(root, "run through meson test");
	snprintf(path, sizeof(path), "%s/tests/data/sample.truth", root);
	cr_assert_eq(truth_load(&t, path, err, sizeof(err)), 0, "%s", err);
	snprintf(path, sizeof(path), "%s/tests/data/%s", root, name);
	htr_open_opts_init(&oo);
	oo.verify_body = 1;
	*f = NULL;
	cr_assert_eq(htr_file_open(f, path, &oo), 0, "%s",
		     *f ? htr_file_last_error(*f) : "");
	compare(&t, *f, name, gaps);
	fi.size = sizeof(fi);
	cr_assert_eq(htr_file_info(*f, &fi, sizeof(fi)), 0);
	cr_assert_eq(fi.version, version);
	truth_free(&t);
}

/* The shipped sample: the checked-in .htr (format version 1 as released,
 * before gap flags meant "a gap lies inside the span") still opens and
 * reads as its truth says. */
Test(build, shipped_fixture)
{
	struct htr_file *f;
	struct htr_thread_info ti;
	uint64_t ns;

	check_fixture("sample.htr", 1, 0, &f);
	/* Version 1 has no thread section: no thread, no clock. */
	cr_assert_eq(htr_file_thread(f, &ti, sizeof(ti)), HTR_ERR_NOTFOUND);
	cr_assert_eq(htr_tsc_to_ns(f, 1, &ns), HTR_ERR_NOTFOUND);
	htr_file_close(f);
}

/* Format version 2 (one body hash over all its bytes) too. */
Test(build, shipped_fixture_v2)
{
	struct htr_file *f;

	check_fixture("sample-v2.htr", 2, 1, &f);
	htr_file_close(f);
}

/* Damaged traces (flipped bytes, garbage runs, truncation) never fail or
 * crash a build: the damage becomes gaps and the tree stays well formed. */
Test(build, corrupt_traces, .timeout = 120)
{
	struct synth_opts o;
	struct truth t;
	struct htr_file *f = NULL;
	char path[300], out[300];
	uint8_t *orig;
	size_t size;
	uint64_t rng = 12345;
	FILE *fp;
	int round;

	synth_opts_init(&o);
	o.scenario = SYNTH_MIXED;
	o.seed = 21;
	o.insns = 40000;
	make(&o, "damage", &t, &f, "%s.elf");
	htr_file_close(f);
	snprintf(path, sizeof(path), "%s/damage.pt", dir);
	fp = fopen(path, "rb");
	cr_assert_not_null(fp);
	fseek(fp, 0, SEEK_END);
	size = (size_t) ftell(fp);
	rewind(fp);
	orig = malloc(size);
	cr_assert_not_null(orig);
	cr_assert_eq(fread(orig, 1, size, fp), size);
	fclose(fp);

	for (round = 0; round < 40; round++) {
		struct htr_builder *b;
		uint8_t *buf = malloc(size);
		size_t n = size, k;
		uint32_t i;
		int rc;

		cr_assert_not_null(buf);
		memcpy(buf, orig, size);
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		if (round % 3 == 0) {            /* scattered flips */
			for (k = 0; k < 1 + (rng >> 60); k++) {
				rng = rng * 6364136223846793005ull + 1;
				buf[(rng >> 16) % size] ^= (uint8_t) (rng >> 8);
			}
		} else if (round % 3 == 1) {     /* a run of garbage */
			size_t at = (rng >> 16) % size;

			for (k = at; k < size && k < at + 512; k++) {
				rng = rng * 6364136223846793005ull + 1;
				buf[k] = (uint8_t) (rng >> 33);
			}
		} else {                         /* cut short */
			n = 1 + (rng >> 16) % size;
		}
		snprintf(path, sizeof(path), "%s/bad%d.pt", dir, round);
		snprintf(out, sizeof(out), "%s/bad%d.htr", dir, round);
		fp = fopen(path, "wb");
		cr_assert_not_null(fp);
		cr_assert_eq(fwrite(buf, 1, n, fp), n);
		fclose(fp);
		free(buf);

		cr_assert_eq(htr_builder_alloc(&b, NULL), 0);
		snprintf(path, sizeof(path), "%s/damage.elf", dir);
		cr_assert_eq(htr_builder_add_elf(b, path), 0);
		snprintf(path, sizeof(path), "%s/bad%d.pt", dir, round);
		rc = htr_builder_run(b, path, out, NULL, 0);
		/* Only a trace cut before its first PSB has nothing to decode. */
		cr_assert(rc == 0 || (rc == HTR_ERR_DECODE && n < 64),
			  "round %d: %s", round, htr_builder_last_error(b));
		htr_builder_free(b);
		if (rc)
			continue;
		cr_assert_eq(htr_file_open(&f, out, NULL), 0, "round %d", round);
		for (i = 0; i < htr_block_count(f); i++) {
			struct htr_block_info bi, pi;

			bi.size = pi.size = sizeof(bi);
			cr_assert_eq(htr_block_get(f, i, &bi, sizeof(bi)), 0);
			cr_assert_leq(bi.first, bi.last);
			if (bi.parent == HTR_NONE)
				continue;
			cr_assert_eq(htr_block_get(f, bi.parent, &pi, sizeof(pi)), 0);
			cr_assert(pi.first <= bi.first && bi.last <= pi.last,
				  "round %d: block %u outside its parent", round, i);
		}
		htr_file_close(f);
	}
	free(orig);
	truth_free(&t);
}
