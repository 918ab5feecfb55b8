/*
 * `htr build` against an independent reference (ref_tree.c: libipt's
 * instruction-flow decoder plus the README's Tree rules, no code from
 * lib/), block by block: span, parent, entry, flags; gap IDs and kinds;
 * the instruction count.  Over every synthesizer scenario with several
 * seeds, every Intel corpus test libipt 2.0.5 supports, and a random sweep
 * of synthesizer configurations.  A disagreement prints the first
 * differing block of both sides with its neighbours.
 */
#include "corpus.h"
#include "ptw.h"
#include "ref_tree.h"
#include "synth.h"

#include "htr/htr.h"

#include "tmpdir.h"
#include "same_htr.h"
#include "slurp.h"

#include <criterion/criterion.h>
#include <intel-pt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

HTR_TEST_TMPDIR(reference);

/* ---- one side of a comparison, in pre-order --------------------------- */

struct cblk {
	uint64_t first, last, entry;
	int64_t parent;         /* pre-order index, -1 for a root */
	unsigned depth, flags;
	int has_entry;
};

struct cgap {
	uint64_t id;
	int kind;               /* REF_GAP_* (same numbers as HTR_GAP_*) */
};

struct cside {
	uint64_t insns;
	struct cblk *b;
	size_t n;
	struct cgap *g;
	size_t ng;
};

static void cside_free(struct cside *s)
{
	free(s->b);
	free(s->g);
	memset(s, 0, sizeof(*s));
}

static const struct cblk *sort_base;

static int cmp_pre(const void *a, const void *b)
{
	const struct cblk *x = &sort_base[*(const size_t *) a];
	const struct cblk *y = &sort_base[*(const size_t *) b];

	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->last != y->last)
		return x->last > y->last ? -1 : 1;
	return 0;
}

/* @raw[i].parent indexes @raw; put the blocks in pre-order (by first ID,
 * then depth) with parents as pre-order indices. */
static void canonicalize(struct cside *s, struct cblk *raw, size_t n)
{
	size_t *ord = malloc((n + 1) * sizeof(*ord));
	size_t *pos = malloc((n + 1) * sizeof(*pos));
	size_t i;

	cr_assert(ord && pos);
	for (i = 0; i < n; i++) {
		int64_t p = raw[i].parent;
		unsigned d = 0;

		while (p >= 0 && (size_t) p < n && d <= n) {
			d++;
			p = raw[p].parent;
		}
		raw[i].depth = d;
		ord[i] = i;
	}
	sort_base = raw;
	qsort(ord, n, sizeof(*ord), cmp_pre);
	for (i = 0; i < n; i++)
		pos[ord[i]] = i;
	s->b = malloc((n + 1) * sizeof(*s->b));
	cr_assert_not_null(s->b);
	for (i = 0; i < n; i++) {
		s->b[i] = raw[ord[i]];
		if (s->b[i].parent >= 0 && (size_t) s->b[i].parent < n)
			s->b[i].parent = (int64_t) pos[s->b[i].parent];
		else
			s->b[i].parent = -1;
	}
	s->n = n;
	free(ord);
	free(pos);
	free(raw);
}

static void side_from_ref(const struct ref_tree *t, struct cside *s)
{
	struct cblk *raw = calloc(t->nblocks + 1, sizeof(*raw));
	size_t i;

	cr_assert_not_null(raw);
	memset(s, 0, sizeof(*s));
	s->insns = t->insns;
	for (i = 0; i < t->nblocks; i++) {
		raw[i].first = t->blocks[i].first;
		raw[i].last = t->blocks[i].last;
		raw[i].parent = t->blocks[i].parent;
		raw[i].has_entry = t->blocks[i].has_entry;
		raw[i].entry = t->blocks[i].has_entry ? t->blocks[i].entry : 0;
		raw[i].flags = t->blocks[i].flags;
	}
	canonicalize(s, raw, t->nblocks);
	s->g = calloc(t->ngaps + 1, sizeof(*s->g));
	cr_assert_not_null(s->g);
	for (i = 0; i < t->ngaps; i++) {
		s->g[i].id = t->gaps[i].id;
		s->g[i].kind = (int) t->gaps[i].kind;
	}
	s->ng = t->ngaps;
}

static unsigned flags_from_htr(uint32_t f)
{
	return (f & HTR_BLOCK_LATE ? REF_LATE : 0) |
	       (f & HTR_BLOCK_TRUNCATED ? REF_TRUNCATED : 0) |
	       (f & HTR_BLOCK_GAP ? REF_GAP : 0) |
	       (f & HTR_BLOCK_IMPLICIT ? REF_IMPLICIT : 0) |
	       (f & HTR_BLOCK_UNWOUND ? REF_UNWOUND : 0) |
	       (f & ~(uint32_t) (HTR_BLOCK_LATE | HTR_BLOCK_TRUNCATED |
				 HTR_BLOCK_GAP | HTR_BLOCK_IMPLICIT |
				 HTR_BLOCK_UNWOUND) ? 0x100u : 0);
}

static int gap_kind_from_htr(enum htr_gap_kind k)
{
	switch (k) {
	case HTR_GAP_DISABLED: return REF_GAP_DISABLED;
	case HTR_GAP_OVERFLOW: return REF_GAP_OVERFLOW;
	case HTR_GAP_ERROR: return REF_GAP_ERROR;
	}
	return 0;
}

static void side_from_htr(const struct htr_file *f, struct cside *s)
{
	struct htr_file_info fi;
	uint32_t n = htr_block_count(f), i;
	struct cblk *raw = calloc((size_t) n + 1, sizeof(*raw));
	uint64_t g;

	cr_assert_not_null(raw);
	memset(s, 0, sizeof(*s));
	fi.size = sizeof(fi);
	cr_assert_eq(htr_file_info(f, &fi, sizeof(fi)), 0);
	s->insns = fi.ninsns;
	for (i = 0; i < n; i++) {
		struct htr_block_info bi;

		bi.size = sizeof(bi);
		cr_assert_eq(htr_block_get(f, i, &bi, sizeof(bi)), 0);
		raw[i].first = bi.first;
		raw[i].last = bi.last;
		raw[i].parent = bi.parent == HTR_NONE ? -1 : (int64_t) bi.parent;
		/* 0 is never an entry address: it means unknown. */
		raw[i].has_entry = bi.entry != 0;
		raw[i].entry = bi.entry;
		raw[i].flags = flags_from_htr(bi.flags);
	}
	canonicalize(s, raw, n);
	s->ng = (size_t) htr_gap_count(f);
	s->g = calloc(s->ng + 1, sizeof(*s->g));
	cr_assert_not_null(s->g);
	for (g = 0; g < s->ng; g++) {
		struct htr_gap_info gi;

		gi.size = sizeof(gi);
		cr_assert_eq(htr_gap_get(f, g, &gi, sizeof(gi)), 0);
		s->g[g].id = gi.id;
		s->g[g].kind = gap_kind_from_htr(gi.kind);
	}
}

/* ---- comparing and explaining ---------------------------------------- */

static const char *gap_name(int k)
{
	return k == REF_GAP_DISABLED ? "disabled" : k == REF_GAP_OVERFLOW ?
	       "overflow" : k == REF_GAP_ERROR ? "error" : "?";
}

static void flags_str(unsigned f, char *buf, size_t len)
{
	static const char *const names[] = {
		"late", "truncated", "gap", "implicit-return", "unwound"
	};
	size_t i, o = 0;

	buf[0] = 0;
	for (i = 0; i < 5; i++)
		if (f & (1u << i))
			o += (size_t) snprintf(buf + o, len - o, "%s%s",
					       o ? "," : "", names[i]);
	if (f & 0x100u)
		o += (size_t) snprintf(buf + o, len - o, "%sunknown-flag",
				       o ? "," : "");
	if (!o)
		snprintf(buf, len, "-");
}

static void print_block(FILE *fp, const struct cside *s, size_t i, int mark)
{
	const struct cblk *b = &s->b[i];
	char fl[80], en[32], par[32];
	int ind = (int) (b->depth < 12 ? b->depth : 12) * 2;

	flags_str(b->flags, fl, sizeof(fl));
	if (b->has_entry)
		snprintf(en, sizeof(en), "%#" PRIx64, b->entry);
	else
		snprintf(en, sizeof(en), "?");
	if (b->parent < 0)
		snprintf(par, sizeof(par), "root");
	else
		snprintf(par, sizeof(par), "parent #%" PRId64, b->parent);
	fprintf(fp, "   %c #%-5zu d%-3u %*s%" PRIu64 "..%" PRIu64 "  %s  %s  %s\n",
		mark ? '>' : ' ', i, b->depth, ind, "", b->first, b->last, en,
		fl, par);
}

static void print_context(FILE *fp, const char *name, const struct cside *s,
			  size_t at, uint64_t lo, uint64_t hi)
{
	size_t i, from = at > 3 ? at - 3 : 0;
	int any = 0;

	fprintf(fp, "  %s (%zu blocks, %" PRIu64 " insns):\n", name, s->n,
		s->insns);
	for (i = from; i < s->n && i <= at + 3; i++)
		print_block(fp, s, i, i == at);
	if (at >= s->n)
		fprintf(fp, "   > (no block #%zu)\n", at);
	fprintf(fp, "    gaps in %" PRIu64 "..%" PRIu64 ":", lo, hi);
	for (i = 0; i < s->ng; i++)
		if (s->g[i].id >= lo && s->g[i].id <= hi) {
			fprintf(fp, " %s@%" PRIu64, gap_name(s->g[i].kind),
				s->g[i].id);
			any = 1;
		}
	fprintf(fp, "%s\n", any ? "" : " none");
}

/* The ID range around block @at of both sides (for listing gaps). */
static void window(const struct cside *a, const struct cside *b, size_t at,
		   uint64_t *lo, uint64_t *hi)
{
	const struct cside *s[2] = { a, b };
	int k;

	*lo = UINT64_MAX;
	*hi = 0;
	for (k = 0; k < 2; k++) {
		size_t i, from = at > 3 ? at - 3 : 0;

		for (i = from; i < s[k]->n && i <= at + 3; i++) {
			if (s[k]->b[i].first < *lo)
				*lo = s[k]->b[i].first;
			if (s[k]->b[i].last + 1 > *hi)
				*hi = s[k]->b[i].last + 1;
		}
	}
	if (*lo == UINT64_MAX)
		*lo = 0;
}

/*
 * Compare; 0 when both sides agree.  Otherwise a short reason in @why and,
 * if @fp, the details: the first differing block of both sides with its
 * neighbours and the gaps around them.
 */
static int compare(const struct cside *h, const struct cside *r, FILE *fp,
		   const char *tag, char *why, size_t wlen)
{
	size_t i, n = h->n < r->n ? h->n : r->n, ng = h->ng < r->ng ? h->ng : r->ng;
	const char *what = NULL;
	uint64_t lo, hi;

	why[0] = 0;
	for (i = 0; i < n && !what; i++) {
		const struct cblk *x = &h->b[i], *y = &r->b[i];

		if (x->first != y->first || x->last != y->last)
			what = "span";
		else if (x->parent != y->parent)
			what = "parent";
		else if (x->has_entry != y->has_entry ||
			 (x->has_entry && x->entry != y->entry))
			what = "entry";
		else if (x->flags != y->flags)
			what = "flags";
	}
	if (what || h->n != r->n) {
		if (what)
			i--;
		else
			what = "block count";
		snprintf(why, wlen, "block #%zu: %s (htr %zu blocks, "
			 "reference %zu)", i, what, h->n, r->n);
		if (fp) {
			window(h, r, i, &lo, &hi);
			fprintf(fp, "reference: %s: first disagreement at block "
				"#%zu (pre-order): %s\n", tag, i, what);
			print_context(fp, "htr build", h, i, lo, hi);
			print_context(fp, "reference", r, i, lo, hi);
		}
		return 1;
	}
	for (i = 0; i < ng; i++)
		if (h->g[i].id != r->g[i].id || h->g[i].kind != r->g[i].kind)
			break;
	if (i < ng || h->ng != r->ng) {
		snprintf(why, wlen, "gap #%zu: htr %s@%" PRIu64 ", reference "
			 "%s@%" PRIu64 " (htr %zu gaps, reference %zu)", i,
			 i < h->ng ? gap_name(h->g[i].kind) : "none",
			 i < h->ng ? h->g[i].id : 0,
			 i < r->ng ? gap_name(r->g[i].kind) : "none",
			 i < r->ng ? r->g[i].id : 0, h->ng, r->ng);
		if (fp)
			fprintf(fp, "reference: %s: %s\n", tag, why);
		return 1;
	}
	if (h->insns != r->insns) {
		snprintf(why, wlen, "htr %" PRIu64 " insns, reference %" PRIu64,
			 h->insns, r->insns);
		if (fp)
			fprintf(fp, "reference: %s: %s\n", tag, why);
		return 1;
	}
	return 0;
}

/* ---- building both sides ---------------------------------------------- */

static void ref_side(const char *trace, struct pt_image *img,
		     const struct ref_config *rc, struct cside *s)
{
	struct ref_tree t;
	char err[256];
	size_t size = 0;
	uint8_t *buf = htr_test_slurp(trace, &size);

	cr_assert_not_null(buf, "%s: cannot read", trace);
	cr_assert_eq(ref_tree_build(buf, size, img, rc, &t, err, sizeof(err)),
		     0, "%s: reference: %s", trace, err);
	side_from_ref(&t, s);
	ref_tree_free(&t);
	free(buf);
}

/* htr build into @out and read it back.  Returns 0, or htr's error code
 * (the build failed; @s is empty). */
static int htr_side(struct htr_builder *b, const char *trace, const char *out,
		    struct cside *s)
{
	struct htr_file *f = NULL;
	int rc = htr_builder_run(b, trace, out, NULL, 0);

	memset(s, 0, sizeof(*s));
	if (rc < 0)
		return rc;
	rc = htr_file_open(&f, out, NULL);
	cr_assert_eq(rc, 0, "%s: %s", out, f ? htr_file_last_error(f) : "");
	side_from_htr(f, s);
	htr_file_close(f);
	remove(out);
	return 0;
}

/* ---- the synthesizer -------------------------------------------------- */

/* The decoder parameters and the instruction count the truth lists
 * (TRUTH.md: "decoder ...", "insns N"). */
static void truth_facts(const char *prefix, struct htr_build_opts *bo,
			struct ref_config *rc, uint64_t *insns, uint64_t *base)
{
	char path[512], line[512];
	unsigned eax = 0, ebx = 0, mtc = 0, nom = 0;
	unsigned long long n = 0, b = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s.truth", prefix);
	fp = fopen(path, "r");
	cr_assert_not_null(fp, "%s", path);
	while (fgets(line, sizeof(line), fp)) {
		sscanf(line, "decoder cpuid_0x15_eax %u cpuid_0x15_ebx %u "
		       "mtc_freq %u nom_freq %u", &eax, &ebx, &mtc, &nom);
		sscanf(line, "insns %llu", &n);
		sscanf(line, "base %llx", &b);
	}
	fclose(fp);
	bo->cpuid_0x15_eax = rc->cpuid_0x15_eax = eax;
	bo->cpuid_0x15_ebx = rc->cpuid_0x15_ebx = ebx;
	bo->mtc_freq = rc->mtc_freq = (uint8_t) mtc;
	bo->nom_freq = rc->nom_freq = (uint8_t) nom;
	*insns = n;
	*base = b;
}

static void knobs(const struct synth_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "htr-synth -S %s -s %" PRIu64 " -n %" PRIu64
		 " --funcs %u --depth %u --base %#" PRIx64 " --psb-period %u "
		 "--mtc-freq %u --ctc-ratio %u%s%s",
		 synth_scenario_name(o->scenario), o->seed, o->insns,
		 o->nfuncs, o->max_depth, o->base, o->psb_period, o->mtc_freq,
		 o->ctc_ratio, o->mtc ? "" : " --no-mtc",
		 o->cyc ? "" : " --no-cyc");
}

/* Build @trace (with PREFIX.elf at the truth's base) both ways into @h
 * and @r (free them with cside_free), the truth's instruction count into
 * *@truth_insns. */
static void trace_sides(const char *prefix, const char *trace,
			struct cside *h, struct cside *r,
			uint64_t *truth_insns)
{
	char elf[300], spec[340], out[300], err[512];
	struct htr_build_opts bo;
	struct htr_builder *b;
	struct ref_config rc;
	struct ref_funcs funcs;
	struct pt_image *img;
	uint64_t base;
	int res;

	snprintf(elf, sizeof(elf), "%s.elf", prefix);
	snprintf(out, sizeof(out), "%s/%s.htr", dir, strrchr(prefix, '/') ?
		 strrchr(prefix, '/') + 1 : prefix);
	htr_build_opts_init(&bo);
	ref_config_init(&rc);
	truth_facts(prefix, &bo, &rc, truth_insns, &base);
	snprintf(spec, sizeof(spec), "%s@%#" PRIx64, elf, base);

	cr_assert_eq(htr_builder_alloc(&b, &bo), 0);
	cr_assert_eq(htr_builder_add_elf(b, spec), 0, "%s: %s", spec,
		     htr_builder_last_error(b));
	res = htr_side(b, trace, out, h);
	cr_assert_eq(res, 0, "%s: htr build: %s", trace,
		     htr_builder_last_error(b));
	htr_builder_free(b);

	img = pt_image_alloc(NULL);
	cr_assert_not_null(img);
	cr_assert_eq(ref_image_add_elf(img, elf, 1, base, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(ref_funcs_from_elf(&funcs, elf, 1, base, err,
					sizeof(err)), 0, "%s", err);
	rc.func_of = ref_funcs_lookup;
	rc.func_ctx = &funcs;
	ref_side(trace, img, &rc, r);
	pt_image_free(img);
	ref_funcs_free(&funcs);
}

/* Build PREFIX.pt both ways and compare; the reference itself must count
 * what the truth counts.  0 agree, 1 disagree (@why; details on @fp if not
 * NULL). */
static int prefix_one(const char *prefix, const char *tag, FILE *fp,
		      char *why, size_t wlen)
{
	char trace[300];
	struct cside h, r;
	uint64_t ref_insns, truth_insns;
	int res;

	snprintf(trace, sizeof(trace), "%s.pt", prefix);
	trace_sides(prefix, trace, &h, &r, &truth_insns);
	res = compare(&h, &r, fp, tag, why, wlen);
	ref_insns = r.insns;
	cside_free(&h);
	cside_free(&r);
	if (ref_insns != truth_insns) {
		if (!res)
			snprintf(why, wlen, "the reference decodes %" PRIu64
				 " insns, the truth says %" PRIu64, ref_insns,
				 truth_insns);
		if (fp)
			fprintf(fp, "reference: %s: the reference decodes %"
				PRIu64 " insns, the truth says %" PRIu64 "\n",
				tag, ref_insns, truth_insns);
		res = 1;
	}
	return res;
}

/* Synthesize @o, build both sides, compare (as prefix_one). */
static int synth_one(const struct synth_opts *o, FILE *fp, char *why,
		     size_t wlen)
{
	char prefix[256], path[300], err[512], tag[400];
	static const char *const ext[] = { ".pt", ".elf", ".truth" };
	size_t i;
	int res;

	snprintf(prefix, sizeof(prefix), "%s/s-%s-%" PRIu64, dir,
		 synth_scenario_name(o->scenario), o->seed);
	cr_assert_eq(synth_run(o, prefix, NULL, err, sizeof(err)), 0, "%s", err);
	knobs(o, tag, sizeof(tag));
	res = prefix_one(prefix, tag, fp, why, wlen);
	for (i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", prefix, ext[i]);
		remove(path);
	}
	return res;
}

/* The shipped sample (tests/data, a mixed-scenario trace). */
Test(reference, sample)
{
	const char *root = getenv("HTR_SOURCE_ROOT");
	char prefix[1024], why[300];

	snprintf(prefix, sizeof(prefix), "%s/tests/data/sample",
		 root ? root : ".");
	cr_expect_eq(prefix_one(prefix, "tests/data/sample", stderr, why,
				sizeof(why)), 0, "sample: %s", why);
}

Test(reference, scenarios, .timeout = 300)
{
	static const uint64_t seeds[] = { 1, 2, 3, 7, 42 };
	const size_t nseeds = sizeof(seeds) / sizeof(seeds[0]);
	unsigned s, total = 0;

	for (s = 0; s < SYNTH_NSCENARIOS; s++) {
		char first[600] = "";
		unsigned bad = 0;
		size_t k;

		for (k = 0; k < nseeds; k++) {
			struct synth_opts o;
			char why[300];

			synth_opts_init(&o);
			o.scenario = (enum synth_scenario) s;
			o.seed = seeds[k];
			o.insns = 30000;
			o.bundle = 0;
			/* Details for the first disagreement per scenario. */
			if (synth_one(&o, bad ? NULL : stderr, why,
				      sizeof(why))) {
				if (!bad++)
					snprintf(first, sizeof(first), "seed %"
						 PRIu64 ": %s", o.seed, why);
			}
		}
		fprintf(stderr, "reference: scenario %-12s %u of %zu seeds "
			"disagree%s%s\n", synth_scenario_name(
				(enum synth_scenario) s), bad, nseeds,
			bad ? "; first: " : "", first);
		total += bad;
	}
	cr_expect_eq(total, 0, "%u scenario runs disagree with the reference "
		     "(details above)", total);
}

/* The offset of the first PSB at or after @from in @buf, else @size. */
static uint64_t psb_after(const uint8_t *buf, size_t size, uint64_t from)
{
	static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
					 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };

	for (; from + sizeof(psb) <= size; from++)
		if (!memcmp(buf + from, psb, sizeof(psb)))
			return from;
	return size;
}

/*
 * A PSB+ damaged in the middle of the trace (its header cannot be read):
 * the error is reported at that PSB, and synchronizing there fails again
 * at the same offset.  ptxed's rule (stop when a new sync makes no
 * progress) lost the rest of the trace there; decoding must go on at the
 * next PSB: all but about one PSB interval of the truth's instructions,
 * the same gaps on both sides and the same instructions after them.  (At
 * the error itself the two differ by the branch whose TNT bit the damage
 * hid: ptxed prints it, htr does not deliver an instruction whose trace
 * is missing, as at an abrupt end.)
 */
Test(reference, damaged_psb_header, .timeout = 120)
{
	char prefix[256], trace[300], err[512];
	struct synth_opts o;
	struct cside h, r;
	uint64_t truth_insns, at, next;
	uint8_t *buf;
	size_t size, i;
	FILE *fp;

	synth_opts_init(&o);
	o.scenario = SYNTH_BASIC;
	o.seed = 4;
	o.insns = 200000;
	o.psb_period = 512;
	o.bundle = 0;
	snprintf(prefix, sizeof(prefix), "%s/damaged", dir);
	cr_assert_eq(synth_run(&o, prefix, NULL, err, sizeof(err)), 0, "%s",
		     err);
	snprintf(trace, sizeof(trace), "%s.pt", prefix);
	buf = htr_test_slurp(trace, &size);
	cr_assert_not_null(buf);
	at = psb_after(buf, size, size / 2);
	next = psb_after(buf, size, at + 16);
	cr_assert_lt(next, size);
	/* Reserved opcodes right after the PSB, inside its header. */
	for (i = at + 16; i < at + 24 && i < next; i++)
		buf[i] = 0x55;
	snprintf(trace, sizeof(trace), "%s-damaged.pt", prefix);
	fp = fopen(trace, "wb");
	cr_assert_not_null(fp);
	cr_assert_eq(fwrite(buf, 1, size, fp), size);
	fclose(fp);
	free(buf);

	trace_sides(prefix, trace, &h, &r, &truth_insns);
	cr_assert_geq(r.ng, 1, "the damage made no error");
	cr_assert_eq(h.ng, r.ng, "htr %zu gaps, the reference %zu", h.ng,
		     r.ng);
	for (i = 0; i < h.ng; i++)
		cr_assert_eq(h.g[i].kind, r.g[i].kind, "gap %zu", i);
	cr_assert_eq(h.insns - h.g[h.ng - 1].id, r.insns - r.g[r.ng - 1].id,
		     "after the last gap: htr %" PRIu64 " insns, the "
		     "reference %" PRIu64, h.insns - h.g[h.ng - 1].id,
		     r.insns - r.g[r.ng - 1].id);
	cr_assert_gt(r.insns, truth_insns - truth_insns / 10,
		     "the reference decodes %" PRIu64 " of %" PRIu64 " insns",
		     r.insns, truth_insns);
	cr_assert_gt(h.insns, truth_insns - truth_insns / 10,
		     "htr decodes %" PRIu64 " of %" PRIu64 " insns", h.insns,
		     truth_insns);
	cside_free(&h);
	cside_free(&r);

	/* The walk ends its block at the error as the block decoder does
	 * and goes on: no fall back, the same file. */
	{
		static const int dec[2] = { HTR_DECODER_WALK,
					    HTR_DECODER_BLOCK };
		char out[2][320], spec[340];
		struct htr_build_opts bo;
		struct htr_build_stats st;
		struct ref_config rc;
		struct htr_builder *b;
		uint64_t base;
		int k;

		htr_build_opts_init(&bo);
		ref_config_init(&rc);
		truth_facts(prefix, &bo, &rc, &truth_insns, &base);
		bo.threads = 1;
		snprintf(spec, sizeof(spec), "%s.elf@%#" PRIx64, prefix, base);
		for (k = 0; k < 2; k++) {
			bo.decoder = dec[k];
			snprintf(out[k], sizeof(out[k]), "%s-%d.htr", prefix, k);
			cr_assert_eq(htr_builder_alloc(&b, &bo), 0);
			cr_assert_eq(htr_builder_add_elf(b, spec), 0);
			cr_assert_eq(htr_builder_run(b, trace, out[k], &st,
						     sizeof(st)), 0, "%s",
				     htr_builder_last_error(b));
			htr_builder_free(b);
			cr_assert_eq(st.decoder, dec[k], "the walk fell back "
				     "to the block decoder");
		}
		cr_assert(htr_files_same(out[0], out[1]), "the walk and the "
			  "block decoder made different files");
	}
}

static uint64_t mix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* >= 300 random configurations (seeded: the same every run). */
Test(reference, sweep, .timeout = 300)
{
	const unsigned nconf = 400;
	unsigned i, bad = 0, detailed = 0, per[SYNTH_NSCENARIOS] = { 0 };
	unsigned runs[SYNTH_NSCENARIOS] = { 0 };
	uint64_t rng = 0x5eed;

	for (i = 0; i < nconf; i++) {
		struct synth_opts o;
		char why[300], err[256], tag[400];
		uint64_t x = mix64(&rng);

		synth_opts_init(&o);
		o.bundle = 0;
		o.seed = 1000 + i;
		o.scenario = (enum synth_scenario) (x % SYNTH_NSCENARIOS);
		x /= SYNTH_NSCENARIOS;
		switch (x % 4) {
		case 0: o.insns = 1 + mix64(&rng) % 64; break;
		case 1: o.insns = 1 + mix64(&rng) % 2000; break;
		default: o.insns = 1 + mix64(&rng) % 16000; break;
		}
		x /= 4;
		o.nfuncs = 2 + (unsigned) (mix64(&rng) % 60);
		o.max_depth = 1 + (unsigned) (mix64(&rng) % 40);
		o.base = x % 3 == 0 ? 0x555555554000ull + (mix64(&rng) % 64) *
			 0x1000 : 0x400000;
		o.psb_period = 256 + (uint32_t) (mix64(&rng) % 8192);
		o.mtc_freq = 3 + (unsigned) (mix64(&rng) % 6);
		o.ctc_ratio = 1 + (unsigned) (mix64(&rng) % 8);
		o.mtc = (int) (mix64(&rng) & 1);
		o.cyc = (int) (mix64(&rng) & 1);
		if (synth_check_opts(&o, err, sizeof(err)) < 0) {
			knobs(&o, tag, sizeof(tag));
			cr_assert_fail("sweep made bad knobs: %s: %s", tag, err);
		}
		runs[o.scenario]++;
		if (synth_one(&o, detailed < 3 ? stderr : NULL, why,
			      sizeof(why))) {
			bad++;
			per[o.scenario]++;
			if (detailed++ >= 3 && detailed <= 20) {
				knobs(&o, tag, sizeof(tag));
				fprintf(stderr, "reference: %s: %s\n", tag, why);
			}
		}
	}
	for (i = 0; i < SYNTH_NSCENARIOS; i++)
		fprintf(stderr, "reference: sweep %-12s %u of %u disagree\n",
			synth_scenario_name((enum synth_scenario) i), per[i],
			runs[i]);
	cr_expect_eq(bad, 0, "%u of %u random configurations disagree with "
		     "the reference (details above)", bad, nconf);
}

/* ---- hand-built traces: the rules for holes ---------------------------- */

/*
 * A program assembled by the system's toolchain (symbols with sizes from
 * `.size`, as compilers write them) and traces written packet by packet
 * with libipt's encoder, each following one path through it that the
 * transfers' TIPs choose.  Labels named at_* mark addresses the traces
 * need; they are read from the linked file and stripped from the copy the
 * builds get, so only the functions are symbols there.  Every case checks
 * the reference's tree against the tree the path makes by construction
 * (below each case), then htr's against the reference's.
 */
static const char hand_asm[] =
	"	.text\n"
	/* 3a: longjmp out of three frames into the setjmp caller's
	 * function, a jump to a return address, a landing pad at the start
	 * of FUNC.cold, a switch, a PLT-like stub and a tail call. */
	"	.globl lj_main\n	.type lj_main,@function\n"
	"lj_main:	nop\n"
	"at_lj_loop:	call lj_f1\n"
	"	nop\n"
	"at_lj_land:	nop\n"
	"	jnz at_lj_loop\n"
	"at_lj_g1_call:	call lj_g1\n"
	"at_lj_g1_ret:	nop\n"
	"at_lj_h1_call:	call lj_h1\n"
	"	nop\n"
	"at_lj_back:	nop\n"
	"	jmp *%rax\n"
	"	nop\n"
	"at_lj_sw:	nop\n"
	"	call at_stub\n"
	"at_lj_end:	nop\n"
	"	jmp *%rax\n"
	"	.size lj_main,.-lj_main\n"
	"	.type lj_f1,@function\n"
	"lj_f1:	call lj_f2\n	ret\n	.size lj_f1,.-lj_f1\n"
	"	.type lj_f2,@function\n"
	"lj_f2:	call lj_f3\n	ret\n	.size lj_f2,.-lj_f2\n"
	"	.type lj_f3,@function\n"
	"lj_f3:	nop\n	jmp *%rdx\n	.size lj_f3,.-lj_f3\n"
	"	.type lj_g1,@function\n"
	"lj_g1:	call lj_g2\n	ret\n	.size lj_g1,.-lj_g1\n"
	"	.type lj_g2,@function\n"
	"lj_g2:	nop\n	jmp *%rdx\n	.size lj_g2,.-lj_g2\n"
	"	.type lj_h1,@function\n"
	"lj_h1:	call lj_h2\n	ret\n	.size lj_h1,.-lj_h1\n"
	"	.type lj_h2,@function\n"
	"lj_h2:	nop\n	jmp *%rcx\n	.size lj_h2,.-lj_h2\n"
	"	.type lj_main.cold,@function\n"
	"lj_main.cold:	nop\n	jmp at_lj_back\n"
	"	.size lj_main.cold,.-lj_main.cold\n"
	"at_stub:	jmp *%rax\n"
	"	.type lj_tgt,@function\n"
	"lj_tgt:	call lj_u\n"
	"	nop\n"
	"at_lj_tgt_mid:	nop\n"
	"	jmp lj_tail\n"
	"	.size lj_tgt,.-lj_tgt\n"
	"	.type lj_u,@function\n"
	"lj_u:	nop\n	jmp *%rax\n	.size lj_u,.-lj_u\n"
	"	.type lj_tail,@function\n"
	"lj_tail:	call lj_u2\n"
	"	nop\n"
	"at_lj_tail_in:	nop\n"
	"	ret\n"
	"	.size lj_tail,.-lj_tail\n"
	"	.type lj_u2,@function\n"
	"lj_u2:	nop\n	jmp *%rax\n	.size lj_u2,.-lj_u2\n"
	/* Rule 4: decode errors at calls and jumps into code the image does
	 * not have; every call and jump is indirect, so the TIPs choose. */
	"	.type de_main,@function\n"
	"de_main:	nop\n"
	"	call *%rbx\n"
	"at_de_main_r1:	nop\n"
	"at_de_main_mid:	nop\n"
	"	jmp *%rax\n"
	"	.size de_main,.-de_main\n"
	"	.type de_e,@function\n"
	"de_e:	nop\n"
	"	call *%rbx\n"
	"at_de_e_r1:	nop\n"
	"	jmp *%rax\n"
	"at_de_e_mid:	nop\n"
	"	ret\n"
	"	.size de_e,.-de_e\n"
	"	.type de_f,@function\n"
	"de_f:	nop\n"
	"	call *%rbx\n"
	"at_de_f_r:	nop\n"
	"at_de_f_mid:	nop\n"
	"	ret\n"
	"	.size de_f,.-de_f\n"
	"	.type de_mid,@function\n"
	"de_mid:	nop\n"
	"	call *%rbx\n"
	"	nop\n"
	"at_de_mid_in:	nop\n"
	"	ret\n"
	"	.size de_mid,.-de_mid\n"
	"	.type de_deep,@function\n"
	"de_deep:	nop\n"
	"at_de_deep_mid:	nop\n"
	"	ret\n"
	"	.size de_deep,.-de_deep\n"
	"	.type de_cb,@function\n"
	"de_cb:	nop\n	ret\n	.size de_cb,.-de_cb\n";

/* Names the traces and the expected trees use; "unmapped*" lie outside
 * the image (a missing library). */
static const char *const hand_names[] = {
	"lj_main", "at_lj_loop", "at_lj_land", "at_lj_g1_call", "at_lj_g1_ret",
	"at_lj_h1_call", "at_lj_back",
	"at_lj_sw", "at_lj_end", "lj_f1", "lj_f2", "lj_f3", "lj_g1", "lj_g2",
	"lj_h1", "lj_h2", "lj_main.cold", "at_stub", "lj_tgt",
	"at_lj_tgt_mid", "lj_u", "lj_tail", "at_lj_tail_in", "lj_u2",
	"de_main", "at_de_main_r1", "at_de_main_mid", "de_e", "at_de_e_r1",
	"at_de_e_mid", "de_f", "at_de_f_r", "at_de_f_mid", "de_mid",
	"at_de_mid_in", "de_deep", "at_de_deep_mid", "de_cb",
};
#define HAND_N (sizeof(hand_names) / sizeof(hand_names[0]))
#define HAND_UNMAPPED 0x7f0000001000ull

struct hand {
	char elf[300];          /* the stripped copy the builds get */
	uint64_t addr[HAND_N];
};

static uint64_t hand_addr(const struct hand *h, const char *name)
{
	size_t i;

	if (!strcmp(name, "unmapped"))
		return HAND_UNMAPPED;
	if (!strcmp(name, "unmapped2"))
		return HAND_UNMAPPED + 0x1000;
	for (i = 0; i < HAND_N; i++)
		if (!strcmp(hand_names[i], name))
			return h->addr[i];
	cr_assert_fail("hand-built trace: no address for %s", name);
	return 0;
}

/* Assemble and link the program once per run of the suite. */
static void hand_program(struct hand *h)
{
	char src[300], full[300], cmd[1400];
	size_t i;
	FILE *fp;

	snprintf(src, sizeof(src), "%s/hand.s", dir);
	snprintf(full, sizeof(full), "%s/hand-full.elf", dir);
	snprintf(h->elf, sizeof(h->elf), "%s/hand.elf", dir);
	fp = fopen(src, "w");
	cr_assert_not_null(fp);
	cr_assert_eq(fwrite(hand_asm, 1, sizeof(hand_asm) - 1, fp),
		     sizeof(hand_asm) - 1);
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "cc -nostdlib -static -no-pie "
		 "-Wl,-e,lj_main -Wl,--build-id=none -o %s %s && objcopy "
		 "--wildcard --strip-symbol='at_*' %s %s", full, src, full,
		 h->elf);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	for (i = 0; i < HAND_N; i++)
		cr_assert_eq(ref_elf_symbol(full, hand_names[i],
					    &h->addr[i]), 0,
			     "%s: no symbol %s", full, hand_names[i]);
	/* Only the functions are left. */
	cr_assert_neq(ref_elf_symbol(h->elf, "at_stub", &h->addr[0]), 0);
	cr_assert_eq(ref_elf_symbol(h->elf, "lj_main", &h->addr[0]), 0);
}

/*
 * Write a trace: @script is a list of words, each one packet: "psb:NAME"
 * (PSB+ with tracing on at NAME: the start, and where decoding resumes
 * after an error), "NAME" (a TIP to NAME), "t" / "n" (a TNT bit, taken or
 * not), "lib" (branches in the missing library).
 */
static void hand_trace(const struct hand *h, const char *path,
		       const char *script)
{
	char *s = strdup(script), *tok, *save;
	struct ptw w;
	FILE *fp = fopen(path, "wb");

	cr_assert(fp && s);
	cr_assert_eq(ptw_init(&w, fp), 0);
	for (tok = strtok_r(s, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save)) {
		if (!strncmp(tok, "psb:", 4)) {
			ptw_simple(&w, ppt_psb);
			ptw_mode_exec(&w);
			ptw_ip(&w, ppt_fup, hand_addr(h, tok + 4));
			ptw_simple(&w, ppt_psbend);
		} else if (!strcmp(tok, "lib")) {
			/* What the library ran, beyond what libipt reads
			 * ahead before it reports the error. */
			ptw_tnt(&w, 1, 6);
			ptw_ip(&w, ppt_tip, HAND_UNMAPPED + 0x100);
			ptw_ip(&w, ppt_tip, HAND_UNMAPPED + 0x200);
			ptw_ip(&w, ppt_tip, HAND_UNMAPPED + 0x300);
		} else if (!strcmp(tok, "t") || !strcmp(tok, "n")) {
			ptw_tnt(&w, tok[0] == 't', 6);
		} else {
			ptw_ip(&w, ppt_tip, hand_addr(h, tok));
		}
	}
	cr_assert_eq(ptw_finish(&w), 0);
	ptw_fini(&w);
	fclose(fp);
	free(s);
}

/* The tree in pre-order as NAME{FLAGS}(CHILDREN...): a block is named
 * after the symbol at its entry, `?` when the entry is unknown. */
static void tree_str(const struct hand *h, const struct cside *s, char *buf,
		     size_t len)
{
	size_t i, o = 0;
	unsigned d = 0;

	buf[0] = 0;
	for (i = 0; i < s->n && o + 200 < len; i++) {
		const struct cblk *b = &s->b[i];
		const char *name = "?";
		char fl[80];
		size_t k;

		if (i && b->depth > d)
			o += (size_t) snprintf(buf + o, len - o, "(");
		for (; i && d > b->depth; d--)
			o += (size_t) snprintf(buf + o, len - o, ")");
		if (i && b->depth <= d)
			o += (size_t) snprintf(buf + o, len - o, " ");
		d = b->depth;
		for (k = 0; b->has_entry && k < HAND_N; k++)
			if (h->addr[k] == b->entry)
				name = hand_names[k];
		if (b->has_entry && !strcmp(name, "?"))
			name = "?entry";
		flags_str(b->flags, fl, sizeof(fl));
		o += (size_t) snprintf(buf + o, len - o, "%s%s%s%s", name,
				       strcmp(fl, "-") ? "{" : "",
				       strcmp(fl, "-") ? fl : "",
				       strcmp(fl, "-") ? "}" : "");
	}
	for (; d > 0 && o + 2 < len; d--)
		o += (size_t) snprintf(buf + o, len - o, ")");
}

static unsigned max_depth(const struct cside *s)
{
	unsigned d = 0;
	size_t i;

	for (i = 0; i < s->n; i++)
		if (s->b[i].depth > d)
			d = s->b[i].depth;
	return d;
}

/* Build the trace @script makes both ways on @elf (the program, or a copy
 * of it); the reference must build @want, htr what the reference builds.
 * Returns the reference's depth. */
static unsigned hand_case_elf(const struct hand *h, const char *elf,
			      const char *name, const char *script,
			      const char *want)
{
	char trace[400], out[400], err[512];
	static char got[65536];
	struct htr_builder *b;
	struct htr_build_opts bo;
	struct ref_config rc;
	struct ref_funcs funcs;
	struct pt_image *img;
	struct cside hs, rs;
	unsigned depth;
	int res;

	snprintf(trace, sizeof(trace), "%s/hand-%s.pt", dir, name);
	snprintf(out, sizeof(out), "%s/hand-%s.htr", dir, name);
	hand_trace(h, trace, script);

	img = pt_image_alloc(NULL);
	cr_assert_not_null(img);
	cr_assert_eq(ref_image_add_elf(img, elf, 0, 0, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(ref_funcs_from_elf(&funcs, elf, 0, 0, err,
					sizeof(err)), 0, "%s", err);
	ref_config_init(&rc);
	rc.func_of = ref_funcs_lookup;
	rc.func_ctx = &funcs;
	ref_side(trace, img, &rc, &rs);
	pt_image_free(img);
	ref_funcs_free(&funcs);
	tree_str(h, &rs, got, sizeof(got));
	cr_expect_str_eq(got, want, "hand-built %s: the reference builds\n"
			 "  %s\nthe path makes\n  %s", name, got, want);

	htr_build_opts_init(&bo);
	cr_assert_eq(htr_builder_alloc(&b, &bo), 0);
	cr_assert_eq(htr_builder_add_elf(b, elf), 0, "%s: %s", elf,
		     htr_builder_last_error(b));
	cr_assert_eq(htr_side(b, trace, out, &hs), 0, "%s: htr build: %s",
		     trace, htr_builder_last_error(b));
	htr_builder_free(b);
	res = compare(&hs, &rs, stderr, name, err, sizeof(err));
	if (res) {
		tree_str(h, &hs, got, sizeof(got));
		fprintf(stderr, "reference: hand-built %s: htr builds\n  %s\n",
			name, got);
	}
	cr_expect_eq(res, 0, "hand-built %s: htr and the reference differ: "
		     "%s", name, err);
	depth = max_depth(&rs);
	cside_free(&hs);
	cside_free(&rs);
	return depth;
}

static unsigned hand_case(const struct hand *h, const char *name,
			  const char *script, const char *want)
{
	return hand_case_elf(h, h->elf, name, script, want);
}

/* A longjmp by indirect jump, @n times in a loop: lj_f3 jumps to
 * at_lj_land in lj_main, the function of the frame that called lj_f1
 * (setjmp's caller): the three frames close unwound at the jump.  The trace
 * ends in lj_g2, at the jump the next case takes. */
static unsigned hand_longjmp(const struct hand *h, unsigned n)
{
	char name[32], *script = calloc(n + 4, 64), *want = calloc(n + 4, 96);
	size_t os = 0, ow = 0;
	unsigned i, depth;

	cr_assert(script && want);
	os += (size_t) sprintf(script + os, "psb:lj_main");
	ow += (size_t) sprintf(want + ow, "?{late,truncated}(");
	for (i = 0; i < n; i++) {
		os += (size_t) sprintf(script + os, " at_lj_land %s",
				       i + 1 < n ? "t" : "n");
		ow += (size_t) sprintf(want + ow, "lj_f1{unwound}(lj_f2{"
				       "unwound}(lj_f3{unwound})) ");
	}
	sprintf(want + ow, "lj_g1{truncated}(lj_g2{truncated}))");
	snprintf(name, sizeof(name), "longjmp-%u", n);
	depth = hand_case(h, name, script, want);
	free(script);
	free(want);
	return depth;
}

Test(reference, hand_longjmp, .timeout = 60)
{
	struct hand h;
	unsigned d3, d40;

	hand_program(&h);
	d3 = hand_longjmp(&h, 3);
	d40 = hand_longjmp(&h, 40);
	cr_expect_eq(d3, 3, "3 longjmps: depth %u", d3);
	cr_expect_eq(d40, d3, "40 longjmps: depth %u, 3: %u", d40, d3);
}

/* The other indirect jumps of rule 3a, a trace each (starting in
 * lj_main). */
Test(reference, hand_jumps, .timeout = 60)
{
	struct hand h;

	hand_program(&h);
	/* lj_g2 jumps to lj_g1's return address, an outer frame's: the
	 * jump left lj_g1 and lj_g2. */
	hand_case(&h, "to-return-address", "psb:at_lj_g1_call at_lj_g1_ret",
		  "?{late,truncated}(lj_g1{unwound}(lj_g2{unwound}) "
		  "lj_h1{truncated}(lj_h2{truncated}))");
	/* lj_h2 jumps to the start of lj_main.cold, part of lj_main, whose
	 * entry it is not (a landing pad: GCC puts cleanup pads first in
	 * FUNC.cold): both frames abandoned; lj_main goes on. */
	hand_case(&h, "cold-landing-pad", "psb:at_lj_h1_call lj_main.cold",
		  "?{late,truncated}(lj_h1{unwound}(lj_h2{unwound}))");
	/* A switch in lj_main (nothing), a call to a stub without a symbol
	 * whose jump goes to lj_tgt's entry: the stub's frame runs lj_tgt;
	 * lj_u jumps into lj_tgt: lj_u abandoned.  lj_tgt tail-jumps
	 * directly to lj_tail's entry, which the rules do not see (the
	 * frame stays in lj_tgt); lj_u2's jump into lj_tail changes
	 * nothing; lj_tail returns to lj_main at the stub's frame's return
	 * address: lj_u2 abandoned there (rule 3). */
	hand_case(&h, "stub-and-tail-call",
		  "psb:at_lj_back at_lj_sw lj_tgt at_lj_tgt_mid at_lj_tail_in "
		  "at_lj_end",
		  "?{late,truncated}(at_stub(lj_u{unwound} lj_u2{unwound}))");
}

/*
 * Decode errors (rule 4): a call or jump into `unmapped`, then the next
 * PSB resumes decoding somewhere; the path is what ran unseen.
 */
Test(reference, hand_decode_errors, .timeout = 60)
{
	struct hand h;

	hand_program(&h);
	/* The same frame: de_f calls the missing library, decoding resumes
	 * inside de_f (not at the call's return address): the callee's
	 * frame (no block) returned unseen, de_f goes on; de_e and de_main
	 * were open when the gap began.  At the end de_main jumps into the
	 * library: a trailing gap. */
	hand_case(&h, "same",
		  "psb:de_main de_e de_f unmapped lib psb:at_de_f_mid "
		  "at_de_e_r1 at_de_e_mid at_de_main_r1 unmapped",
		  "?{late,truncated,gap}(de_e{gap}(de_f{gap}))");
	/* Shallower: decoding resumes in de_main: de_f and de_e returned
	 * unseen. */
	hand_case(&h, "shallower",
		  "psb:de_main de_e de_f unmapped lib psb:at_de_main_mid",
		  "?{late,truncated,gap}(de_e{gap,implicit-return}("
		  "de_f{gap,implicit-return}))");
	/* Deeper: de_e jumps into the library, decoding resumes inside
	 * de_deep, which no open frame is in: a frame entered in the gap
	 * (late, gap).  It returns into de_mid, no open frame's function
	 * either: de_mid's frame was entered in the gap too (late, gap) and
	 * adopts it.  de_mid returns into de_e, its caller: a plain
	 * return.  de_cb ran before, called and returned in plain sight. */
	hand_case(&h, "deeper",
		  "psb:de_main de_e de_cb at_de_e_r1 unmapped lib "
		  "psb:at_de_deep_mid at_de_mid_in at_de_e_mid at_de_main_r1",
		  "?{late,truncated,gap}(de_e{gap}(de_cb "
		  "?{late,gap}(?{late,gap})))");
	/* A function's entry: the library called de_cb back; de_cb returns
	 * into the library (a second error), decoding resumes at the
	 * library call's return address: it returned unseen; de_f goes
	 * on.  The library's frame, its entry lost, holds the callback as
	 * an untraced callee's frame does (rule 2). */
	hand_case(&h, "callback",
		  "psb:de_main de_e de_f unmapped lib psb:de_cb unmapped2 lib "
		  "psb:at_de_f_r at_de_e_r1 at_de_e_mid at_de_main_r1",
		  "?{late,truncated,gap}(de_e{gap}(de_f{gap}("
		  "?{gap,implicit-return}(de_cb))))");
	/* Without symbols (the program stripped) nothing places the
	 * resume: de_e goes on there, and the two returns that follow
	 * each make a late caller (README: where these rules are wrong). */
	{
		char stripped[400], cmd[1000];

		snprintf(stripped, sizeof(stripped), "%s/hand-stripped.elf",
			 dir);
		snprintf(cmd, sizeof(cmd), "objcopy --strip-all %s %s", h.elf,
			 stripped);
		cr_assert_eq(system(cmd), 0, "%s", cmd);
		hand_case_elf(&h, stripped, "deeper-stripped",
			      "psb:de_main de_e de_cb at_de_e_r1 unmapped lib "
			      "psb:at_de_deep_mid at_de_mid_in at_de_e_mid "
			      "at_de_main_r1",
			      "?{late,truncated,gap}(?{late,gap}(?{late,gap}("
			      "de_e{gap}(de_cb))))");
	}
}

/* ---- Intel's corpus ---------------------------------------------------- */

/* Build one corpus test both ways: 0 agree, 1 disagree (@why), -1 skipped
 * (@why). */
static int corpus_one(const char *cdir, struct mrow *m, const char *cpu,
		      const char *exp, FILE *fp, char *why, size_t wlen)
{
	char path[2200], spec[2300], extra[2300], out[300], tag[300];
	char xfile[2200] = "", *opts = strdup(m->f[5]), *tok, *save;
	uint64_t xoff = 0, xaddr = 0;
	struct htr_build_opts bo;
	struct htr_builder *b = NULL;
	struct ref_config rc;
	struct pt_image *img;
	struct cside h, r;
	int res = 0, st;

	cr_assert_not_null(opts);
	htr_build_opts_init(&bo);
	ref_config_init(&rc);
	if (cpu) {
		sscanf(cpu, "%d/%d", &bo.cpu_family, &bo.cpu_model);
		rc.cpu_family = bo.cpu_family;
		rc.cpu_model = bo.cpu_model;
	}
	extra[0] = 0;
	for (tok = strtok_r(opts, " ", &save); tok && !res;
	     tok = strtok_r(NULL, " ", &save)) {
		char *arg = NULL;

		if (!strcmp(tok, "-") || !strcmp(tok, "--block-decoder") ||
		    !strcmp(tok, "--insn-decoder") ||
		    !strncmp(tok, "--event:", 8) ||
		    !strncmp(tok, "--block:", 8) || !strcmp(tok, "--quiet") ||
		    !strncmp(tok, "--stat", 6))
			continue;       /* how ptxed prints */
		if (!strncmp(tok, "--filter:", 9) || strncmp(tok, "--", 2) ||
		    !(arg = strtok_r(NULL, " ", &save))) {
			snprintf(why, wlen, "ptxed option %s", tok);
			res = -1;
		} else if (!strcmp(tok, "--raw")) {
			/* ptxed's FILE:OFFSET:VADDR or FILE:VADDR */
			char *c1 = strchr(arg, ':'), *c2;

			cr_assert_not_null(c1);
			*c1 = 0;
			c2 = strchr(c1 + 1, ':');
			if (c2)
				*c2 = 0;
			snprintf(extra, sizeof(extra), "%s/%s/%s%s%s@%s", cdir,
				 m->f[0], arg, c2 ? ":" : "", c2 ? c1 + 1 : "",
				 c2 ? c2 + 1 : c1 + 1);
			snprintf(xfile, sizeof(xfile), "%s/%s/%s", cdir,
				 m->f[0], arg);
			xoff = c2 ? strtoull(c1 + 1, NULL, 0) : 0;
			xaddr = strtoull(c2 ? c2 + 1 : c1 + 1, NULL, 0);
		} else if (!strcmp(tok, "--mtc-freq")) {
			bo.mtc_freq = rc.mtc_freq = (uint8_t) strtoul(arg, NULL, 0);
		} else if (!strcmp(tok, "--nom-freq")) {
			bo.nom_freq = rc.nom_freq = (uint8_t) strtoul(arg, NULL, 0);
		} else if (!strcmp(tok, "--cpuid-0x15.eax")) {
			bo.cpuid_0x15_eax = rc.cpuid_0x15_eax =
				(uint32_t) strtoul(arg, NULL, 0);
		} else if (!strcmp(tok, "--cpuid-0x15.ebx")) {
			bo.cpuid_0x15_ebx = rc.cpuid_0x15_ebx =
				(uint32_t) strtoul(arg, NULL, 0);
		} else if (strcmp(tok, "--cpu")) {
			snprintf(why, wlen, "ptxed option %s", tok);
			res = -1;
		}
	}
	free(opts);
	if (res < 0)
		return res;

	snprintf(spec, sizeof(spec), "%s/%s", cdir, m->f[2]);
	{
		struct stat sb;

		if (stat(spec, &sb) == 0 && sb.st_size == 0) {
			snprintf(why, wlen, "a packet-only test (empty image)");
			return -1;
		}
	}
	snprintf(spec, sizeof(spec), "%s/%s@%s", cdir, m->f[2], m->f[3]);
	snprintf(path, sizeof(path), "%s/%s", cdir, m->f[1]);
	snprintf(out, sizeof(out), "%s/c-%s.htr", dir, m->f[0]);
	snprintf(tag, sizeof(tag), "corpus %s (%s)", m->f[0],
		 cpu ? cpu : "no cpu");

	cr_assert_eq(htr_builder_alloc(&b, &bo), 0);
	cr_assert_eq(htr_builder_add_raw(b, spec), 0, "%s", spec);
	if (extra[0])
		cr_assert_eq(htr_builder_add_raw(b, extra), 0, "%s: %s", extra,
			     htr_builder_last_error(b));
	st = htr_side(b, path, out, &h);
	if (st < 0 && st != HTR_ERR_DECODE) {
		snprintf(why, wlen, "htr build failed: %s: %s", htr_errstr(st),
			 htr_builder_last_error(b));
		htr_builder_free(b);
		if (fp)
			fprintf(fp, "reference: %s: %s\n", tag, why);
		return 1;
	}
	htr_builder_free(b);

	img = pt_image_alloc(NULL);
	cr_assert_not_null(img);
	snprintf(spec, sizeof(spec), "%s/%s", cdir, m->f[2]);
	cr_assert_geq(pt_image_add_file(img, spec, 0, UINT64_MAX, NULL,
					strtoull(m->f[3], NULL, 0)), 0, "%s",
		      spec);
	/* ptxed's extra --raw goes over the test's image. */
	if (xfile[0])
		cr_assert_geq(pt_image_add_file(img, xfile, xoff, UINT64_MAX,
						NULL, xaddr), 0, "%s", xfile);
	ref_side(path, img, &rc, &r);
	pt_image_free(img);

	if (st == HTR_ERR_DECODE) {
		/* No usable trace for htr (no PSB): nothing for either. */
		if (r.insns || r.n) {
			snprintf(why, wlen, "htr build: no usable trace; the "
				 "reference decodes %" PRIu64 " insns, %zu "
				 "blocks", r.insns, r.n);
			res = 1;
			if (fp)
				fprintf(fp, "reference: %s: %s\n", tag, why);
		}
	} else {
		res = compare(&h, &r, fp, tag, why, wlen);
	}
	/* The reference itself must count what ptxed printed. */
	snprintf(path, sizeof(path), "%s/%s/%s", cdir, m->f[0], exp ? exp : "");
	if (exp) {
		long n = 0, nerr = 0;

		cr_assert_eq(read_exp(path, &n, &nerr), 0, "%s", path);
		if ((uint64_t) n != r.insns) {
			if (!res)
				snprintf(why, wlen, "the reference decodes %"
					 PRIu64 " insns, %s lists %ld", r.insns,
					 exp, n);
			if (fp)
				fprintf(fp, "reference: %s: the reference "
					"decodes %" PRIu64 " insns, %s lists "
					"%ld\n", tag, r.insns, exp, n);
			res = 1;
		}
	}
	cside_free(&h);
	cside_free(&r);
	return res;
}

/* Skipped corpus tests, counted per reason with a few names. */
#define MAX_SKIPS 16

struct skip {
	char why[128], names[160];
	unsigned n;
};

static void note_skip(struct skip *sk, int *n, const char *why,
		      const char *name)
{
	int i;
	size_t len;

	for (i = 0; i < *n && strcmp(sk[i].why, why); i++)
		;
	if (i == *n) {
		if (*n == MAX_SKIPS)
			i = MAX_SKIPS - 1;      /* lump the rest together */
		else
			(*n)++;
		if (!sk[i].n)
			snprintf(sk[i].why, sizeof(sk[i].why), "%s", why);
	}
	len = strlen(sk[i].names);
	if (sk[i].n < 3)
		snprintf(sk[i].names + len, sizeof(sk[i].names) - len, "%s%s",
			 len ? ", " : "", name);
	else if (sk[i].n == 3)
		snprintf(sk[i].names + len, sizeof(sk[i].names) - len, ", ...");
	sk[i].n++;
}

Test(reference, corpus, .timeout = 300)
{
	char cbuf[1024], path[1100], line[8192], why[512], last_skip[256] = "";
	const char *cdir = corpus_dir(cbuf, sizeof(cbuf));
	struct mcols mc = { -1, -1 };
	int k, nskips = 0;
	struct skip skips[MAX_SKIPS];
	unsigned agree = 0, bad = 0, skipped = 0, cpu_skipped = 0;
	unsigned unsupported = 0;
	FILE *fp;

	memset(skips, 0, sizeof(skips));

	if (!cdir) {
		fprintf(stderr, "reference: corpus: ../shared/corpus is absent, "
			"0 corpus tests compared (skipped)\n");
		return;
	}
	snprintf(path, sizeof(path), "%s/manifest.tsv", cdir);
	fp = fopen(path, "r");
	cr_assert_not_null(fp, "%s", path);
	while (fgets(line, sizeof(line), fp)) {
		struct mrow m;
		char files[4096], *fn, *save;
		int nexp;

		if (!manifest_row(line, &m, &mc)) {
			cr_assert(mc.v205 >= 0 && mc.files >= 0);
			continue;
		}
		if (!in_v205(&m, &mc)) {
			unsupported++;
			continue;
		}
		snprintf(files, sizeof(files), "%s", m.f[mc.files]);
		/* A test without a ptxed expectation (ptdump only) is still
		 * compared once, without a CPU. */
		nexp = 0;
		for (fn = strtok_r(files, ",", &save); fn || !nexp;
		     fn = fn ? strtok_r(NULL, ",", &save) : NULL) {
			char cpu[32] = "", *c = fn ? strstr(fn, "-ptxed") : NULL;
			int res, fam, mod;

			if (!fn) {
				nexp = -1;      /* the one run without */
			} else if (!c || strcmp(fn + strlen(fn) - 4, ".exp")) {
				/* NAME-ptxed[-cpu_F_M].exp: one per CPU. */
				continue;
			} else {
				nexp++;
			}
			if (!c) {
				/* no expectation, no CPU */
			} else if (sscanf(c, "-ptxed-cpu_%d_%d", &fam, &mod) == 2) {
				snprintf(cpu, sizeof(cpu), "%d/%d", fam, mod);
				/* Expectations for CPUs whose errata 2.0.5
				 * does not know come from a newer libipt. */
				if (strcmp(m.f[4], "-") && !has_errata(cpu) &&
				    has_errata(m.f[4])) {
					cpu_skipped++;
					continue;
				}
			} else if (strcmp(c, "-ptxed.exp")) {
				continue;
			}
			why[0] = 0;
			res = corpus_one(cdir, &m, cpu[0] ? cpu : NULL, c ? fn : NULL,
					 bad < 10 ? stderr : NULL, why,
					 sizeof(why));
			if (res < 0) {
				skipped++;
				if (strcmp(last_skip, m.f[0]))
					note_skip(skips, &nskips, why, m.f[0]);
				snprintf(last_skip, sizeof(last_skip), "%s",
					 m.f[0]);
			} else if (res) {
				if (bad++ >= 10)
					fprintf(stderr, "reference: corpus %s "
						"(%s): %s\n", m.f[0],
						cpu[0] ? cpu : "no cpu", why);
			} else {
				agree++;
			}
		}
	}
	fclose(fp);
	for (k = 0; k < nskips; k++)
		fprintf(stderr, "reference: corpus: skipped %u tests: %s (%s)\n",
			skips[k].n, skips[k].why, skips[k].names);
	fprintf(stderr, "reference: corpus: %u builds agree, %u disagree; "
		"skipped: %u builds as above, %u CPU variants whose errata "
		"libipt 2.0.5 does not know (expectations of a newer libipt), "
		"%u tests not in libipt 2.0.5\n", agree, bad, skipped,
		cpu_skipped, unsupported);
	cr_expect_gt(agree + bad, 100);
	cr_expect_eq(bad, 0, "%u corpus builds disagree with the reference "
		     "(details above)", bad);
}
