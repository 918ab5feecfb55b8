/*
 * Decoder and image tests against ground truth that libhtr did not produce:
 * the synthesizer's PREFIX.truth and Intel's libipt test corpus (expected
 * ptxed output).  See tools/synth/TRUTH.md and ../shared/corpus/README.md.
 */
#include "decode.h"
#include "image.h"
#include "htr/build.h"
#include "htr/tree.h"
#include "synth.h"
#include "truth.h"

#include "corpus.h"

#include "tmpdir.h"
#include "slurp.h"

#include <criterion/criterion.h>
#include <elf.h>
#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a sink that records everything ---------------------------------- */

struct rrun { uint64_t id, ip; uint32_t n; int cls; uint64_t ret; int after_gap; };
struct rgap { uint64_t id, offset; int kind, code; };
struct rtime { uint64_t id, tsc; };
struct rsync { uint64_t offset, id; };

struct rec {
	struct rrun *runs; size_t nruns;
	struct rgap *gaps; size_t ngaps;
	struct rtime *times; size_t ntimes;
	struct rsync *syncs; size_t nsyncs;
	uint64_t *resumes; size_t nresumes;   /* IDs */
	uint64_t insns;
	int gap_since_run, resumed, cancel_after;
	unsigned progress;
};

#define PUSH(arr, n, ...) do {                                          \
		if (((n) & ((n) - 1)) == 0) {                           \
			void *p_ = realloc((arr), ((n) ? (n) * 2 : 16) * \
					   sizeof(*(arr)));             \
			cr_assert_not_null(p_);                         \
			(arr) = p_;                                     \
		}                                                       \
		(arr)[(n)++] = (__typeof__(*(arr))) __VA_ARGS__;        \
	} while (0)

static int on_time(void *ctx, uint64_t tsc);

static int on_run(void *ctx, uint64_t ip, uint32_t n, enum htr_icls cls,
		  uint64_t ret, int timed, uint64_t tsc)
{
	struct rec *r = ctx;

	/* An empty run only carries an interrupt (decode.h). */
	if (!n) {
		cr_assert_eq(cls, HTR_IC_FAR_CALL);
		cr_assert_eq(ip, ret);
		return 0;
	}
	PUSH(r->runs, r->nruns, { r->insns, ip, n, (int) cls, ret,
				  r->gap_since_run });
	r->gap_since_run = 0;
	r->insns += n;
	return timed ? on_time(ctx, tsc) : 0;
}

static int on_resume(void *ctx, uint64_t ip)
{
	struct rec *r = ctx;

	(void) ip;
	PUSH(r->resumes, r->nresumes, r->insns);
	return 0;
}

static int on_gap(void *ctx, const struct htr_decode_gap *g)
{
	struct rec *r = ctx;

	PUSH(r->gaps, r->ngaps, { r->insns, g->offset, g->kind, g->code });
	r->gap_since_run = 1;
	return 0;
}

static int on_time(void *ctx, uint64_t tsc)
{
	struct rec *r = ctx;

	/* Before any run: the first PSB's time, from instruction 0 on. */
	cr_assert(r->insns > 0 || !r->ntimes, "second time before any run");
	PUSH(r->times, r->ntimes, { r->insns ? r->insns - 1 : 0, tsc });
	return 0;
}

static int on_sync(void *ctx, uint64_t offset)
{
	struct rec *r = ctx;

	PUSH(r->syncs, r->nsyncs, { offset, r->insns });
	return 0;
}

static int on_progress(void *ctx, uint64_t offset)
{
	struct rec *r = ctx;

	(void) offset;
	r->progress++;
	return r->cancel_after && r->progress >= (unsigned) r->cancel_after;
}

static void rec_free(struct rec *r)
{
	free(r->runs);
	free(r->gaps);
	free(r->times);
	free(r->syncs);
	free(r->resumes);
	memset(r, 0, sizeof(*r));
}

/* Decode @trace with @img into @r.  Returns htr_decode__run's value. */
static int decode(const char *trace, struct htr_image *img,
		  struct htr_decode_cfg *cfg, struct rec *r, struct htr_err *e)
{
	struct htr_decode_sink sink = {
		r, on_run, on_resume, on_gap, on_time, on_sync, on_progress,
		NULL
	};
	size_t size = 0;
	uint8_t *buf = htr_test_slurp(trace, &size);
	int rc;

	cr_assert_not_null(buf, "%s: cannot read", trace);
	cfg->trace = buf;
	cfg->size = size;
	rc = htr_decode__run(cfg, img, &sink, e);
	free(buf);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

/* TSC in effect at instruction @id: the last time reported at or before it. */
static int tsc_at(const struct rec *r, uint64_t id, uint64_t *tsc)
{
	size_t lo = 0, hi = r->ntimes;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (r->times[mid].id <= id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -1;
	*tsc = r->times[lo - 1].tsc;
	return 0;
}

/* ---- (a) synthesized traces ------------------------------------------ */

HTR_TEST_TMPDIR(decode);

static void make_synth(struct synth_opts *o, const char *tag, char *prefix,
		       size_t len, struct truth *t)
{
	char err[512], path[300];
	struct synth_result res;

	snprintf(prefix, len, "%s/%s", dir, tag);
	cr_assert_eq(synth_run(o, prefix, &res, err, sizeof(err)), 0, "%s: %s",
		     tag, err);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(t, path, err, sizeof(err)), 0, "%s: %s", tag,
		     err);
}

static void synth_cfg(struct htr_decode_cfg *cfg, const struct truth *t)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->cpuid_0x15_eax = t->cpuid_eax;
	cfg->cpuid_0x15_ebx = t->cpuid_ebx;
	cfg->mtc_freq = (uint8_t) t->mtc_freq;
	cfg->nom_freq = (uint8_t) t->nom_freq;
}

/* First non-empty block a fresh libipt decoder finds at PSB @offset. */
static uint64_t first_ip_at(const uint8_t *buf, size_t size, uint64_t offset,
			    struct htr_image *img, const struct truth *t)
{
	struct pt_block_decoder *d;
	struct pt_config c;
	uint64_t ip = 0;
	int st;

	pt_config_init(&c);
	c.begin = (uint8_t *) buf;
	c.end = (uint8_t *) buf + size;
	c.cpuid_0x15_eax = t->cpuid_eax;
	c.cpuid_0x15_ebx = t->cpuid_ebx;
	c.mtc_freq = (uint8_t) t->mtc_freq;
	c.nom_freq = (uint8_t) t->nom_freq;
	c.flags.variant.block.end_on_call = 1;
	d = pt_blk_alloc_decoder(&c);
	cr_assert_not_null(d);
	pt_blk_set_image(d, htr_image__pt(img));
	st = pt_blk_sync_set(d, offset);
	while (st >= 0) {
		struct pt_block b;

		while (st >= 0 && (st & pts_event_pending)) {
			struct pt_event ev;

			st = pt_blk_event(d, &ev, sizeof(ev));
		}
		if (st < 0)
			break;
		b.ninsn = 0;
		st = pt_blk_next(d, &b, sizeof(b));
		if (b.ninsn) {
			ip = b.ip;
			break;
		}
	}
	pt_blk_free_decoder(d);
	return ip;
}

static void check_synth(const char *tag, struct synth_opts *o)
{
	char prefix[256], path[300];
	struct htr_decode_cfg cfg;
	struct htr_image *img;
	struct htr_err e = { 0, "" };
	struct truth t;
	struct rec r;
	uint64_t *calls, *rets, *mycalls, *myrets;
	size_t nc = 0, nr = 0, mc = 0, mr = 0, i, ng = 0;
	uint8_t *buf;
	size_t size;

	memset(&r, 0, sizeof(r));
	make_synth(o, tag, prefix, sizeof(prefix), &t);
	cr_assert_eq(htr_image__alloc(&img), 0);
	snprintf(path, sizeof(path), "%s.elf", prefix);
	cr_assert_eq(htr_image__add_elf(img, path, 1, t.base, &e), 0, "%s",
		     e.msg);
	synth_cfg(&cfg, &t);
	snprintf(path, sizeof(path), "%s.pt", prefix);
	cr_assert_eq(decode(path, img, &cfg, &r, &e), 0, "%s: %s", tag, e.msg);

	cr_assert_eq(r.insns, t.insns, "%s: %llu instructions, truth %llu", tag,
		     (unsigned long long) r.insns, (unsigned long long) t.insns);
	calls = calloc(t.nblocks + 1, sizeof(*calls));
	rets = calloc(t.nblocks + 1, sizeof(*rets));
	mycalls = calloc(r.nruns + 1, sizeof(*mycalls));
	myrets = calloc(r.nruns + 1, sizeof(*myrets));
	cr_assert(calls && rets && mycalls && myrets);
	for (i = 0; i < t.nblocks; i++) {
		const struct truth_block *b = &t.blocks[i];

		if (!(b->flags & TRUTH_LATE))
			calls[nc++] = b->first - 1;
		if (!(b->flags & (TRUTH_TRUNC | TRUTH_RETGAP)))
			rets[nr++] = b->last;
	}
	for (i = 0; i < r.nruns; i++) {
		const struct rrun *u = &r.runs[i];
		uint64_t last = u->id + u->n - 1;

		cr_assert(u->cls != HTR_IC_FAR_CALL && u->cls != HTR_IC_FAR_RET,
			  "%s: far transfer at %llu", tag,
			  (unsigned long long) last);
		if (u->cls == HTR_IC_CALL) {
			mycalls[mc++] = last;
			/* The callee starts right after the call. */
			if (i + 1 < r.nruns && !r.runs[i + 1].after_gap) {
				const struct rrun *v = &r.runs[i + 1];
				size_t f;

				cr_assert_eq(v->id, last + 1);
				for (f = 0; f < t.nfuncs; f++)
					if (t.funcs[f].entry == v->ip)
						break;
				cr_assert_lt(f, t.nfuncs, "%s: call at %llu "
					     "goes to 0x%llx, no function", tag,
					     (unsigned long long) last,
					     (unsigned long long) v->ip);
			}
			cr_assert_neq(u->ret, 0, "%s: call at %llu without a "
				      "return address", tag,
				      (unsigned long long) last);
		} else if (u->cls == HTR_IC_RET) {
			myrets[mr++] = last;
		}
	}
	qsort(calls, nc, sizeof(*calls), cmp_u64);
	qsort(rets, nr, sizeof(*rets), cmp_u64);
	cr_assert_eq(mc, nc, "%s: %zu calls, truth %zu", tag, mc, nc);
	for (i = 0; i < nc; i++)
		cr_assert_eq(mycalls[i], calls[i], "%s: call #%zu at %llu, "
			     "truth %llu", tag, i,
			     (unsigned long long) mycalls[i],
			     (unsigned long long) calls[i]);
	cr_assert_eq(mr, nr, "%s: %zu returns, truth %zu", tag, mr, nr);
	for (i = 0; i < nr; i++)
		cr_assert_eq(myrets[i], rets[i], "%s: return #%zu at %llu, "
			     "truth %llu", tag, i,
			     (unsigned long long) myrets[i],
			     (unsigned long long) rets[i]);

	/* Gaps: same IDs and kinds, no decode errors. */
	for (i = 0; i < r.ngaps; i++) {
		cr_assert_neq(r.gaps[i].kind, HTR_GAP_ERROR, "%s: decode error "
			      "%d at offset 0x%llx", tag, r.gaps[i].code,
			      (unsigned long long) r.gaps[i].offset);
		cr_assert_lt(ng, t.ngaps, "%s: extra gap at %llu", tag,
			     (unsigned long long) r.gaps[i].id);
		cr_assert_eq(r.gaps[i].id, t.gaps[ng].id, "%s: gap #%zu at "
			     "%llu, truth %llu", tag, ng,
			     (unsigned long long) r.gaps[i].id,
			     (unsigned long long) t.gaps[ng].id);
		cr_assert_eq(r.gaps[i].kind, t.gaps[ng].overflow ?
			     HTR_GAP_OVERFLOW : HTR_GAP_DISABLED,
			     "%s: gap #%zu kind", tag, ng);
		ng++;
	}
	cr_assert_eq(ng, t.ngaps, "%s: %zu gaps, truth %zu", tag, ng, t.ngaps);
	/* One resume at the start and one after every gap followed by code. */
	cr_assert_geq(r.nresumes, 1);
	cr_assert_eq(r.resumes[0], 0);
	for (i = 0; i < r.ngaps; i++)
		if (r.gaps[i].id < r.insns) {
			size_t j;

			for (j = 0; j < r.nresumes; j++)
				if (r.resumes[j] == r.gaps[i].id)
					break;
			cr_assert_lt(j, r.nresumes, "%s: no resume after gap "
				     "#%zu", tag, i);
		}

	/* Time at every block boundary. */
	for (i = 0; i < t.nblocks; i++) {
		const struct truth_block *b = &t.blocks[i];
		uint64_t tsc = 0;

		if (!(b->flags & TRUTH_LATE)) {
			cr_assert_eq(tsc_at(&r, b->first, &tsc), 0);
			cr_assert_eq(tsc, b->tsc_first, "%s: tsc at %llu: %llu, "
				     "truth %llu", tag,
				     (unsigned long long) b->first,
				     (unsigned long long) tsc,
				     (unsigned long long) b->tsc_first);
		}
		if (!(b->flags & (TRUTH_TRUNC | TRUTH_RETGAP))) {
			cr_assert_eq(tsc_at(&r, b->last, &tsc), 0);
			cr_assert_eq(tsc, b->tsc_last, "%s: tsc at ret %llu: "
				     "%llu, truth %llu", tag,
				     (unsigned long long) b->last,
				     (unsigned long long) tsc,
				     (unsigned long long) b->tsc_last);
		}
	}

	/* Sync points: a fresh decoder started at each PSB delivers the run
	 * recorded after it first. */
	cr_assert_geq(r.nsyncs, 1, "%s: no sync point", tag);
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf);
	cr_assert_geq(r.nsyncs, size / o->psb_period / 2, "%s: %zu sync points "
		      "in %zu bytes", tag, r.nsyncs, size);
	for (i = 0; i < r.nsyncs; i++) {
		size_t j;

		if (i)
			cr_assert_gt(r.syncs[i].offset, r.syncs[i - 1].offset);
		if (r.syncs[i].id >= r.insns)
			continue;
		for (j = 0; j < r.nruns && r.runs[j].id != r.syncs[i].id; j++)
			;
		cr_assert_lt(j, r.nruns, "%s: sync #%zu not at a run", tag, i);
		cr_assert_eq(first_ip_at(buf, size, r.syncs[i].offset, img, &t),
			     r.runs[j].ip, "%s: sync #%zu at 0x%llx (id %llu)",
			     tag, i, (unsigned long long) r.syncs[i].offset,
			     (unsigned long long) r.syncs[i].id);
	}
	free(buf);
	free(calls);
	free(rets);
	free(mycalls);
	free(myrets);
	rec_free(&r);
	truth_free(&t);
	htr_image__free(img);
}

static void scenario(enum synth_scenario s)
{
	uint64_t seed;

	for (seed = 1; seed <= 3; seed++) {
		struct synth_opts o;
		char tag[64];

		synth_opts_init(&o);
		o.scenario = s;
		o.seed = seed;
		o.insns = 40000;
		o.psb_period = seed == 2 ? 256 : o.psb_period;
		o.base = seed == 3 ? 0x7f0000400000ull : o.base;
		snprintf(tag, sizeof(tag), "%s-%llu", synth_scenario_name(s),
			 (unsigned long long) seed);
		check_synth(tag, &o);
	}
}

Test(decode, synth_basic) { scenario(SYNTH_BASIC); }
Test(decode, synth_nocomp) { scenario(SYNTH_NOCOMP); }
Test(decode, synth_gap) { scenario(SYNTH_GAP); }
Test(decode, synth_overflow) { scenario(SYNTH_OVERFLOW); }
Test(decode, synth_late_start) { scenario(SYNTH_LATE_START); }
Test(decode, synth_abrupt_end) { scenario(SYNTH_ABRUPT_END); }
Test(decode, synth_mixed) { scenario(SYNTH_MIXED); }

/* Progress comes every ~2^20 instructions and can cancel. */
Test(decode, progress_cancels)
{
	char prefix[256], path[300];
	struct htr_decode_cfg cfg;
	struct htr_image *img;
	struct htr_err e = { 0, "" };
	struct synth_opts o;
	struct truth t;
	struct rec r;

	synth_opts_init(&o);
	o.insns = 3u << 20;
	make_synth(&o, "progress", prefix, sizeof(prefix), &t);
	cr_assert_eq(htr_image__alloc(&img), 0);
	snprintf(path, sizeof(path), "%s.elf", prefix);
	cr_assert_eq(htr_image__add_elf(img, path, 1, t.base, &e), 0);
	synth_cfg(&cfg, &t);
	snprintf(path, sizeof(path), "%s.pt", prefix);
	memset(&r, 0, sizeof(r));
	cr_assert_eq(decode(path, img, &cfg, &r, &e), 0);
	cr_assert_geq(r.progress, 2);
	cr_assert_leq(r.progress, 4);
	rec_free(&r);
	r.cancel_after = 1;
	cr_assert_eq(decode(path, img, &cfg, &r, &e), HTR_ERR_CANCELED);
	cr_assert_lt(r.insns, t.insns);
	rec_free(&r);
	truth_free(&t);
	htr_image__free(img);
}

/* A trace without a PSB cannot be decoded at all; garbage between PSBs is
 * an error gap, never a failure. */
Test(decode, garbage)
{
	char prefix[256], path[300];
	struct htr_decode_cfg cfg;
	struct htr_image *img;
	struct htr_err e = { 0, "" };
	struct synth_opts o;
	struct truth t;
	struct rec r;
	uint8_t zeros[64] = { 0 };
	struct htr_decode_sink sink = { &r, on_run, on_resume, on_gap,
					on_time, on_sync, on_progress, NULL };
	uint8_t *buf;
	size_t size, i;

	synth_opts_init(&o);
	o.insns = 20000;
	o.psb_period = 512;
	make_synth(&o, "garbage", prefix, sizeof(prefix), &t);
	cr_assert_eq(htr_image__alloc(&img), 0);
	snprintf(path, sizeof(path), "%s.elf", prefix);
	cr_assert_eq(htr_image__add_elf(img, path, 1, t.base, &e), 0);
	synth_cfg(&cfg, &t);

	memset(&r, 0, sizeof(r));
	cfg.trace = zeros;
	cfg.size = sizeof(zeros);
	cr_assert_eq(htr_decode__run(&cfg, img, &sink, &e), HTR_ERR_DECODE);
	cr_assert_str_neq(e.msg, "");

	snprintf(path, sizeof(path), "%s.pt", prefix);
	buf = htr_test_slurp(path, &size);
	cr_assert_not_null(buf);
	/* Smash bytes in the middle of the trace. */
	for (i = size / 2; i < size / 2 + 40 && i < size; i++)
		buf[i] = (uint8_t) (i * 37);
	cfg.trace = buf;
	cfg.size = size;
	cr_assert_eq(htr_decode__run(&cfg, img, &sink, &e), 0, "%s", e.msg);
	cr_assert_gt(r.insns, t.insns / 4);
	for (i = 0; i < r.ngaps && r.gaps[i].kind != HTR_GAP_ERROR; i++)
		;
	cr_assert_lt(i, r.ngaps, "no error gap for smashed trace");
	cr_assert_lt(r.gaps[i].code, 0);
	free(buf);
	rec_free(&r);
	truth_free(&t);
	htr_image__free(img);
}

/* ---- (b) Intel's libipt corpus --------------------------------------- */

struct corpus_res { int pass, fail, skip; };

/* Decode one test for one cpu ("F/M" or NULL); 1 pass, 0 fail, -1 skip. */
static int corpus_one(const char *cdir, struct mrow *m, const char *cpu,
		      const char *expfile, char *why, size_t wlen)
{
	const char *name = m->f[0];
	char path[2200], raw[256] = "", *opts = strdup(m->f[5]), *tok, *save;
	struct htr_decode_cfg cfg;
	struct htr_addr_filter filters[HTR_ADDR_FILTERS_MAX];
	struct htr_image *img;
	struct htr_err e = { 0, "" };
	struct rec r;
	long exp_insn, exp_err, ncall = 0, nret = 0, nerr = 0;
	uint64_t addr = strtoull(m->f[3], NULL, 0);
	size_t i;
	int rc, res = 1;

	cr_assert_not_null(opts);
	/* The test is about an erratum of the cpus it lists; libipt 2.0.5
	 * predates some of them and knows no errata for those. */
	if (cpu && strcmp(m->f[4], "-") && !has_errata(cpu) &&
	    has_errata(m->f[4])) {
		snprintf(why, wlen, "libipt %d.%d.%d knows no errata for the "
			 "cpu (%s)",
			 pt_library_version().major, pt_library_version().minor,
			 pt_library_version().patch, cpu);
		free(opts);
		return -1;
	}
	memset(&cfg, 0, sizeof(cfg));
	memset(&r, 0, sizeof(r));
	memset(filters, 0, sizeof(filters));
	if (cpu && sscanf(cpu, "%d/%d", &cfg.cpu_family, &cfg.cpu_model) < 2)
		cfg.cpu_family = 0;
	for (tok = strtok_r(opts, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save)) {
		char *arg = NULL;

		if (!strcmp(tok, "--raw") || !strcmp(tok, "--cpu") ||
		    !strcmp(tok, "--mtc-freq") || !strcmp(tok, "--nom-freq") ||
		    !strcmp(tok, "--cpuid-0x15.eax") ||
		    !strcmp(tok, "--cpuid-0x15.ebx") ||
		    !strncmp(tok, "--filter:", 9))
			arg = strtok_r(NULL, " ", &save);
		if (!strcmp(tok, "--raw") && arg)
			snprintf(raw, sizeof(raw), "%s", arg);
		else if (!strcmp(tok, "--mtc-freq") && arg)
			cfg.mtc_freq = (uint8_t) strtoul(arg, NULL, 0);
		else if (!strcmp(tok, "--nom-freq") && arg)
			cfg.nom_freq = (uint8_t) strtoul(arg, NULL, 0);
		else if (!strcmp(tok, "--cpuid-0x15.eax") && arg)
			cfg.cpuid_0x15_eax = (uint32_t) strtoul(arg, NULL, 0);
		else if (!strcmp(tok, "--cpuid-0x15.ebx") && arg)
			cfg.cpuid_0x15_ebx = (uint32_t) strtoul(arg, NULL, 0);
		else if (ptxed_filter(tok, arg, filters, &cfg.nfilters))
			cfg.filters = filters;
	}
	free(opts);
	if (res < 0)
		return res;
	snprintf(path, sizeof(path), "%s/%s/%s", cdir, name, expfile);
	if (read_exp(path, &exp_insn, &exp_err) < 0) {
		snprintf(why, wlen, "cannot read %s", expfile);
		return 0;
	}
	cr_assert_eq(htr_image__alloc(&img), 0);
	snprintf(path, sizeof(path), "%s/%s@0x%llx", cdir, m->f[2],
		 (unsigned long long) addr);
	rc = htr_image__add_raw_spec(img, path, &e);
	if (!rc && raw[0]) {
		/* ptxed's extra --raw FILE:OFFSET:VADDR, over the image. */
		char *c1 = strchr(raw, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		uint64_t off = 0;

		if (c1)
			*c1 = 0;
		if (c2) {
			off = strtoull(c1 + 1, NULL, 0);
			addr = strtoull(c2 + 1, NULL, 0);
		} else if (c1) {
			addr = strtoull(c1 + 1, NULL, 0);
		}
		snprintf(path, sizeof(path), "%s/%s/%s", cdir, name, raw);
		rc = htr_image__add_raw(img, path, off, 0, addr, &e);
	}
	cr_assert_eq(rc, 0, "%s: %s", name, e.msg);
	snprintf(path, sizeof(path), "%s/%s", cdir, m->f[1]);
	rc = decode(path, img, &cfg, &r, &e);
	htr_image__free(img);
	if (rc == HTR_ERR_DECODE && exp_insn == 0) {
		rec_free(&r);
		return 1;       /* nothing to decode, nothing expected */
	}
	if (rc) {
		snprintf(why, wlen, "decode failed: %s", e.msg);
		rec_free(&r);
		return 0;
	}
	for (i = 0; i < r.nruns; i++) {
		ncall += r.runs[i].cls == HTR_IC_CALL;
		nret += r.runs[i].cls == HTR_IC_RET;
	}
	for (i = 0; i < r.ngaps; i++)
		nerr += r.gaps[i].kind == HTR_GAP_ERROR;
	if ((long) r.insns != exp_insn || nerr != exp_err ||
	    (strcmp(m->f[8], "-") && ncall != atol(m->f[8])) ||
	    (strcmp(m->f[9], "-") && nret != atol(m->f[9]))) {
		snprintf(why, wlen, "insns %llu/%ld errors %ld/%ld calls %ld/%s "
			 "rets %ld/%s (got/expected)",
			 (unsigned long long) r.insns, exp_insn, nerr, exp_err,
			 ncall, m->f[8], nret, m->f[9]);
		res = 0;
	}
	rec_free(&r);
	return res;
}

Test(decode, corpus, .timeout = 120)
{
	char cbuf[1024], path[1100], line[8192], why[512];
	const char *cdir = corpus_dir(cbuf, sizeof(cbuf));
	struct mcols mc = { -1, -1 };
	int tested = 0, failed = 0, skipped = 0;
	int skip_variants = 0, passed_tests = 0;
	struct skips sk;
	FILE *fp;

	memset(&sk, 0, sizeof(sk));
	if (!cdir) {
		cr_skip_test("../shared/corpus is absent");
	}
	snprintf(path, sizeof(path), "%s/manifest.tsv", cdir);
	fp = fopen(path, "r");
	cr_assert_not_null(fp);
	while (fgets(line, sizeof(line), fp)) {
		struct mrow m;
		char files[4096], *f, *save;
		int any = 0, bad = 0;

		if (!manifest_row(line, &m, &mc)) {
			cr_assert(mc.v205 >= 0 && mc.files >= 0);
			continue;
		}
		if (!in_v205(&m, &mc) || !strcmp(m.f[7], "-")) {
			skipped++;
			skips_add(&sk, !in_v205(&m, &mc) ?
				  "test is newer than libipt 2.0.5" :
				  "no ptxed expectation");
			continue;
		}
		snprintf(files, sizeof(files), "%s", m.f[mc.files]);
		for (f = strtok_r(files, ",", &save); f;
		     f = strtok_r(NULL, ",", &save)) {
			char cpu[32] = "", *c;
			int res;

			c = strstr(f, "-ptxed");
			if (!c || strcmp(f + strlen(f) - 4, ".exp"))
				continue;
			if (!strncmp(c, "-ptxed-cpu_", 11)) {
				int fam, mod;

				if (sscanf(c + 11, "%d_%d", &fam, &mod) != 2)
					continue;
				snprintf(cpu, sizeof(cpu), "%d/%d", fam, mod);
			} else if (strcmp(c, "-ptxed.exp")) {
				continue;
			}
			any = 1;
			why[0] = 0;
			res = corpus_one(cdir, &m, cpu[0] ? cpu : NULL, f, why,
					 sizeof(why));
			if (res < 0) {
				fprintf(stderr, "corpus: skip %s (%s): %s\n",
					m.f[0], cpu[0] ? cpu : "no cpu", why);
				skip_variants++;
				skips_add(&sk, why);
				continue;
			}
			tested++;
			if (!res) {
				bad = 1;
				failed++;
				fprintf(stderr, "corpus: FAIL %s (%s): %s\n", m.f[0],
					cpu[0] ? cpu : "no cpu", why);
			}
		}
		if (!any) {
			skipped++;
			skips_add(&sk, "no usable ptxed expectation");
		}
		else if (!bad)
			passed_tests++;
	}
	fclose(fp);
	fprintf(stderr, "corpus: %d tests fully pass; %d decodes (test x cpu) "
		"checked, %d failed, %d cpu variants skipped; %d tests skipped "
		"(not in libipt 2.0.5 or no ptxed expectation)\n",
		passed_tests, tested, failed, skip_variants,
		skipped);
	skips_print(&sk, "decode: corpus");
	cr_assert_gt(tested, 100);
	cr_assert_eq(failed, 0);
}

/* An interrupt (async branch) is a far call from the interrupted run; the
 * handler's iret is a far return (corpus int-iret). */
Test(decode, corpus_interrupt)
{
	char cbuf[1024], path[1200];
	const char *cdir = corpus_dir(cbuf, sizeof(cbuf));
	struct htr_decode_cfg cfg;
	struct htr_image *img;
	struct htr_err e = { 0, "" };
	struct rec r;

	if (!cdir) {
		cr_skip_test("../shared/corpus is absent");
	}
	memset(&cfg, 0, sizeof(cfg));
	memset(&r, 0, sizeof(r));
	cr_assert_eq(htr_image__alloc(&img), 0);
	snprintf(path, sizeof(path), "%s/int-iret/int-iret.bin@0x100000", cdir);
	cr_assert_eq(htr_image__add_raw_spec(img, path, &e), 0, "%s", e.msg);
	snprintf(path, sizeof(path), "%s/int-iret/int-iret.pt", cdir);
	cr_assert_eq(decode(path, img, &cfg, &r, &e), 0, "%s", e.msg);
	cr_assert_eq(r.insns, 4);
	cr_assert_geq(r.nruns, 2);
	cr_assert_eq(r.runs[0].n, 1);
	cr_assert_eq(r.runs[0].cls, HTR_IC_FAR_CALL);
	cr_assert_neq(r.runs[0].ret, 0);
	cr_assert_eq(r.runs[1].ip, 0x100006);
	cr_assert_eq(r.runs[1].cls, HTR_IC_FAR_RET);
	rec_free(&r);
	htr_image__free(img);
}

/* ---- (c) images -------------------------------------------------------- */

Test(decode, image_elf_bases)
{
	char prefix[256], path[300], spec[320];
	struct htr_image *img;
	struct htr_err e = { 0, "" };
	struct synth_opts o;
	struct truth t;
	const struct htr_image_piece *p;

	synth_opts_init(&o);
	o.insns = 1000;
	o.base = 0x555555554000ull;
	make_synth(&o, "img", prefix, sizeof(prefix), &t);
	snprintf(path, sizeof(path), "%s.elf", prefix);

	/* At its link address. */
	cr_assert_eq(htr_image__alloc(&img), 0);
	cr_assert_eq(htr_image__add_elf_spec(img, path, &e), 0, "%s", e.msg);
	cr_assert_eq(htr_image__count(img), 1);
	p = htr_image__piece(img, 0);
	cr_assert_not_null(p);
	cr_assert_str_eq(p->path, path);
	cr_assert_eq(p->kind, 1);
	cr_assert_gt(p->size, 0);
	cr_assert_null(htr_image__piece(img, 1));
	htr_image__free(img);

	/* Relocated to the runtime base (hex and decimal specs agree). */
	cr_assert_eq(htr_image__alloc(&img), 0);
	snprintf(spec, sizeof(spec), "%s@0x%llx", path,
		 (unsigned long long) t.base);
	cr_assert_eq(htr_image__add_elf_spec(img, spec, &e), 0, "%s", e.msg);
	snprintf(spec, sizeof(spec), "%s@%llu", path,
		 (unsigned long long) t.base + 0x100000);
	cr_assert_eq(htr_image__add_elf_spec(img, spec, &e), 0, "%s", e.msg);
	cr_assert_eq(htr_image__count(img), 2);
	cr_assert_eq(htr_image__piece(img, 0)->vaddr, t.base);
	cr_assert_eq(htr_image__piece(img, 1)->vaddr, t.base + 0x100000);
	cr_assert_not_null(htr_image__pt(img));
	htr_image__free(img);
	truth_free(&t);
}

static void expect_fail(int add_elf, const char *spec, int code,
			const char *msg)
{
	struct htr_image *img;
	struct htr_err e = { 0, "" };
	int rc;

	cr_assert_eq(htr_image__alloc(&img), 0);
	rc = add_elf ? htr_image__add_elf_spec(img, spec, &e) :
		htr_image__add_raw_spec(img, spec, &e);
	cr_assert_eq(rc, code, "%s: rc %d (%s)", spec, rc, e.msg);
	cr_assert_eq(e.code, code);
	cr_assert(strstr(e.msg, msg), "%s: message '%s' lacks '%s'", spec,
		  e.msg, msg);
	cr_assert_null(strchr(e.msg, '\n'));
	cr_assert_eq(htr_image__count(img), 0);
	htr_image__free(img);
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *fp = fopen(path, "wb");

	cr_assert_not_null(fp);
	cr_assert_eq(fwrite(data, 1, len, fp), len);
	fclose(fp);
}

Test(decode, image_errors)
{
	char path[300], spec[400], prefix[256], elf[300];
	uint8_t junk[256];
	struct synth_opts o;
	struct truth t;
	size_t i, size, cut;
	uint8_t *buf;

	snprintf(path, sizeof(path), "%s/missing.bin", dir);
	snprintf(spec, sizeof(spec), "%s@0x1000", path);
	expect_fail(0, spec, HTR_ERR_IO, "missing.bin: No such file or directory");
	expect_fail(1, path, HTR_ERR_IO, "missing.bin: No such file or directory");

	for (i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t) (i * 7 + 1);
	snprintf(path, sizeof(path), "%s/a.bin", dir);
	write_file(path, junk, sizeof(junk));
	snprintf(spec, sizeof(spec), "%s@zz", path);
	expect_fail(0, spec, HTR_ERR_INVALID, "bad address");
	expect_fail(1, spec, HTR_ERR_INVALID, "bad address");
	expect_fail(0, path, HTR_ERR_INVALID, "missing @VADDR");
	expect_fail(1, path, HTR_ERR_INVALID, "a.bin: not an ELF file");
	snprintf(spec, sizeof(spec), "%s:0x200@0x1000", path);
	expect_fail(0, spec, HTR_ERR_INVALID, "past the end");
	snprintf(spec, sizeof(spec), "%s:0x10:0x100@0x1000", path);
	expect_fail(0, spec, HTR_ERR_INVALID, "past the end");
	expect_fail(0, "@0x1000", HTR_ERR_INVALID, "no file");

	/* Good raw specs: offset and size. */
	{
		struct htr_image *img;
		struct htr_err e = { 0, "" };
		const struct htr_image_piece *p;

		cr_assert_eq(htr_image__alloc(&img), 0);
		snprintf(spec, sizeof(spec), "%s:0x10:32@0x401000", path);
		cr_assert_eq(htr_image__add_raw_spec(img, spec, &e), 0, "%s",
			     e.msg);
		snprintf(spec, sizeof(spec), "%s:16@4096", path);
		cr_assert_eq(htr_image__add_raw_spec(img, spec, &e), 0, "%s",
			     e.msg);
		p = htr_image__piece(img, 0);
		cr_assert(p->kind == 2 && p->offset == 0x10 && p->size == 32 &&
			  p->vaddr == 0x401000);
		p = htr_image__piece(img, 1);
		cr_assert(p->offset == 16 && p->size == sizeof(junk) - 16 &&
			  p->vaddr == 4096);
		htr_image__free(img);
	}

	/* Truncated and corrupted copies of a real ELF never crash. */
	synth_opts_init(&o);
	o.insns = 1000;
	make_synth(&o, "trunc", prefix, sizeof(prefix), &t);
	truth_free(&t);
	snprintf(elf, sizeof(elf), "%s.elf", prefix);
	buf = htr_test_slurp(elf, &size);
	cr_assert_not_null(buf);
	snprintf(path, sizeof(path), "%s/bad.elf", dir);
	for (cut = 0; cut < size; cut += cut < 128 ? 7 : size / 16 + 1) {
		struct htr_image *img;
		struct htr_err e = { 0, "" };
		int rc;

		write_file(path, buf, cut);
		cr_assert_eq(htr_image__alloc(&img), 0);
		rc = htr_image__add_elf(img, path, 0, 0, &e);
		cr_assert(rc == 0 || rc == HTR_ERR_INVALID || rc == HTR_ERR_IO,
			  "cut %zu: rc %d", cut, rc);
		if (rc)
			cr_assert(strstr(e.msg, "bad.elf: "), "%s", e.msg);
		htr_image__free(img);
	}
	/* Program headers pointing past the file. */
	for (i = 0; i < 64; i++) {
		struct htr_image *img;
		struct htr_err e = { 0, "" };
		uint8_t *copy = malloc(size);
		size_t k;
		int rc;

		cr_assert_not_null(copy);
		memcpy(copy, buf, size);
		srand((unsigned) i);
		for (k = 0; k < 8; k++)
			copy[32 + (size_t) rand() % 128] = (uint8_t) rand();
		write_file(path, copy, size);
		cr_assert_eq(htr_image__alloc(&img), 0);
		rc = htr_image__add_elf(img, path, 1, 0x1000, &e);
		cr_assert(rc == 0 || rc == HTR_ERR_INVALID || rc == HTR_ERR_IO,
			  "corrupt %zu: rc %d", i, rc);
		htr_image__free(img);
		free(copy);
	}
	/* An ELF with no executable PT_LOAD. */
	{
		Elf64_Ehdr *eh = (Elf64_Ehdr *) buf;
		Elf64_Phdr *ph;

		cr_assert_leq(eh->e_phoff + eh->e_phnum * sizeof(*ph), size);
		ph = (Elf64_Phdr *) (buf + eh->e_phoff);
		for (i = 0; i < eh->e_phnum; i++)
			ph[i].p_flags &= ~(uint32_t) PF_X;
		write_file(path, buf, size);
		expect_fail(1, path, HTR_ERR_INVALID,
			    "bad.elf: no executable PT_LOAD segment");
		eh->e_machine = EM_386;
		write_file(path, buf, size);
		expect_fail(1, path, HTR_ERR_INVALID, "not an x86-64");
	}
	free(buf);
}
