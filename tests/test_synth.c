/*
 * The synthesizer's traces are real Intel PT and its ground truth is what an
 * independent decoder finds: every scenario is decoded with plain libipt
 * (tests/libipt_ref.c, no libhtr code) and compared with PREFIX.truth.
 */
#include "libipt_ref.h"
#include "synth.h"
#include "truth.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/htr-test-synth-XXXXXX";

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(synth, .init = setup, .fini = teardown);

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

	return x < y ? -1 : x > y;
}

static int cmp_call(const void *a, const void *b)
{
	return cmp_u64(&((const struct ref_call *) a)->id,
		       &((const struct ref_call *) b)->id);
}

static int cmp_time(const void *a, const void *b)
{
	return cmp_u64(&((const struct ref_time *) a)->id,
		       &((const struct ref_time *) b)->id);
}

static const struct ref_time *find_time(const struct ref *r, uint64_t id)
{
	struct ref_time key = { id, 0 };

	return bsearch(&key, r->times, r->ntimes, sizeof(key), cmp_time);
}

/* Synthesize with @o, decode with libipt, compare everything. */
static void check(struct synth_opts *o, const char *tag)
{
	char prefix[256], path[300], elf[300], err[512];
	struct synth_result res;
	struct truth t;
	struct ref r;
	struct ref_cfg cfg;
	struct ref_call *want_calls;
	uint64_t *want_rets;
	size_t nc = 0, nr = 0, i, ntime = 0;

	snprintf(prefix, sizeof(prefix), "%s/%s", dir, tag);
	cr_assert_eq(synth_run(o, prefix, &res, err, sizeof(err)), 0,
		     "%s: %s", tag, err);
	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(&t, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(t.insns, res.insns);
	cr_assert_eq(t.nblocks, res.blocks);

	snprintf(path, sizeof(path), "%s.pt", prefix);
	snprintf(elf, sizeof(elf), "%s.elf", prefix);
	memset(&cfg, 0, sizeof(cfg));
	cfg.trace = path;
	cfg.elf = elf;
	cfg.base = t.base;
	cfg.cpuid_eax = t.cpuid_eax;
	cfg.cpuid_ebx = t.cpuid_ebx;
	cfg.mtc_freq = t.mtc_freq;
	cfg.nom_freq = t.nom_freq;
	memset(&r, 0, sizeof(r));
	cr_assert_eq(ref_decode_insn(&cfg, &r), 0);
	cr_assert_eq(ref_decode_time(&cfg, &r), 0);

	cr_expect_eq(r.errors, 0, "%s: libipt hit %llu decode errors", tag,
		     (unsigned long long) r.errors);
	cr_assert_eq(r.insns, t.insns, "%s: libipt decodes %llu insns, truth "
		     "says %llu", tag, (unsigned long long) r.insns,
		     (unsigned long long) t.insns);

	/* Every invocation entered while tracing is a call at first-1 to its
	 * function's entry; every traced return is a return at last. */
	want_calls = calloc(t.nblocks + 1, sizeof(*want_calls));
	want_rets = calloc(t.nblocks + 1, sizeof(*want_rets));
	cr_assert(want_calls && want_rets);
	for (i = 0; i < t.nblocks; i++) {
		const struct truth_block *b = &t.blocks[i];

		if (!(b->flags & TRUTH_LATE)) {
			want_calls[nc].id = b->first - 1;
			want_calls[nc].target = t.funcs[b->func].entry;
			nc++;
		}
		if (!(b->flags & (TRUTH_TRUNC | TRUTH_RETGAP)))
			want_rets[nr++] = b->last;
	}
	qsort(want_calls, nc, sizeof(*want_calls), cmp_call);
	qsort(want_rets, nr, sizeof(*want_rets), cmp_u64);
	cr_assert_eq(r.ncalls, nc, "%s: %zu calls decoded, %zu in truth", tag,
		     r.ncalls, nc);
	for (i = 0; i < nc; i++) {
		cr_assert_eq(r.calls[i].id, want_calls[i].id,
			     "%s: call #%zu at %llu, truth %llu", tag, i,
			     (unsigned long long) r.calls[i].id,
			     (unsigned long long) want_calls[i].id);
		cr_assert_eq(r.calls[i].target, want_calls[i].target,
			     "%s: call at %llu", tag,
			     (unsigned long long) r.calls[i].id);
	}
	cr_assert_eq(r.nrets, nr, "%s: %zu returns decoded, %zu in truth", tag,
		     r.nrets, nr);
	for (i = 0; i < nr; i++)
		cr_assert_eq(r.rets[i], want_rets[i], "%s: return #%zu at %llu,"
			     " truth %llu", tag, i,
			     (unsigned long long) r.rets[i],
			     (unsigned long long) want_rets[i]);

	cr_assert_eq(r.ngaps, t.ngaps, "%s: %zu gaps decoded, %zu in truth",
		     tag, r.ngaps, t.ngaps);
	for (i = 0; i < t.ngaps; i++) {
		cr_assert_eq(r.gaps[i].id, t.gaps[i].id, "%s: gap #%zu", tag, i);
		cr_assert_eq(r.gaps[i].overflow, t.gaps[i].overflow);
	}

	/* The decoder's time at both ends of every block. */
	qsort(r.times, r.ntimes, sizeof(*r.times), cmp_time);
	for (i = 0; i < t.nblocks; i++) {
		const struct truth_block *b = &t.blocks[i];
		const struct ref_time *rt;

		if (!(b->flags & TRUTH_LATE)) {
			rt = find_time(&r, b->first);
			cr_assert_not_null(rt, "%s: no block ends at call %llu",
					   tag, (unsigned long long) b->first - 1);
			cr_assert_eq(rt->tsc, b->tsc_first, "%s: tsc at first "
				     "insn %llu of block %lld: libipt %llu, truth "
				     "%llu", tag, (unsigned long long) b->first,
				     (long long) b->pre,
				     (unsigned long long) rt->tsc,
				     (unsigned long long) b->tsc_first);
			ntime++;
		}
		if (!(b->flags & (TRUTH_TRUNC | TRUTH_RETGAP))) {
			rt = find_time(&r, b->last);
			cr_assert_not_null(rt);
			cr_assert_eq(rt->tsc, b->tsc_last, "%s: tsc at return %llu "
				     "of block %lld: libipt %llu, truth %llu", tag,
				     (unsigned long long) b->last,
				     (long long) b->pre,
				     (unsigned long long) rt->tsc,
				     (unsigned long long) b->tsc_last);
			ntime++;
		}
	}
	cr_assert_gt(ntime, 0);
	free(want_calls);
	free(want_rets);
	ref_free(&r);
	truth_free(&t);
}

static void scenario(enum synth_scenario s)
{
	uint64_t seed;

	for (seed = 1; seed <= 4; seed++) {
		struct synth_opts o;
		char tag[64];

		synth_opts_init(&o);
		o.scenario = s;
		o.seed = seed;
		o.insns = 30000;
		snprintf(tag, sizeof(tag), "%s-%llu", synth_scenario_name(s),
			 (unsigned long long) seed);
		check(&o, tag);
	}
}

Test(synth, basic) { scenario(SYNTH_BASIC); }
Test(synth, nocomp) { scenario(SYNTH_NOCOMP); }
Test(synth, gap) { scenario(SYNTH_GAP); }
Test(synth, overflow) { scenario(SYNTH_OVERFLOW); }
Test(synth, late_start) { scenario(SYNTH_LATE_START); }
Test(synth, abrupt_end) { scenario(SYNTH_ABRUPT_END); }
Test(synth, mixed) { scenario(SYNTH_MIXED); }

/* Knobs that change the packets or the shape of the program. */
Test(synth, knobs)
{
	static const struct {
		const char *tag;
		enum synth_scenario s;
		unsigned funcs, depth, mtc_freq, ratio, psb;
		int mtc, cyc;
		uint64_t base;
	} v[] = {
		{ "no-cyc",   SYNTH_MIXED, 24, 12, 6, 2, 4096, 1, 0, 0x400000 },
		{ "no-mtc",   SYNTH_MIXED, 24, 12, 6, 2, 4096, 0, 1, 0x400000 },
		{ "no-timing", SYNTH_MIXED, 24, 12, 6, 2, 4096, 0, 0, 0x400000 },
		{ "pie-base", SYNTH_MIXED, 24, 12, 6, 2, 4096, 1, 1, 0x555555554000ull },
		{ "high-base", SYNTH_NOCOMP, 24, 12, 6, 2, 4096, 1, 1, 0x7ffff7a00000ull },
		{ "depth-1",  SYNTH_BASIC, 24, 1, 6, 2, 4096, 1, 1, 0x400000 },
		{ "deep",     SYNTH_MIXED, 400, 300, 6, 2, 4096, 1, 1, 0x400000 },
		{ "deep-ret", SYNTH_BASIC, 400, 300, 6, 2, 4096, 1, 1, 0x400000 },
		{ "psb-256",  SYNTH_MIXED, 24, 12, 6, 2, 256, 1, 1, 0x400000 },
		{ "mtc-3",    SYNTH_MIXED, 24, 12, 3, 7, 4096, 1, 1, 0x400000 },
		{ "mtc-8",    SYNTH_MIXED, 24, 12, 8, 1, 4096, 1, 1, 0x400000 },
		{ "two-funcs", SYNTH_MIXED, 2, 12, 6, 2, 4096, 1, 1, 0x400000 },
	};
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct synth_opts o;

		synth_opts_init(&o);
		o.seed = 100 + i;
		o.scenario = v[i].s;
		o.insns = 40000;
		o.nfuncs = v[i].funcs;
		o.max_depth = v[i].depth;
		o.mtc_freq = v[i].mtc_freq;
		o.ctc_ratio = v[i].ratio;
		o.psb_period = v[i].psb;
		o.mtc = v[i].mtc;
		o.cyc = v[i].cyc;
		o.base = v[i].base;
		check(&o, v[i].tag);
	}
}

/* A longer trace: PSBs, all TNT sizes and IP compressions many times over. */
Test(synth, long_trace, .timeout = 120)
{
	struct synth_opts o;

	synth_opts_init(&o);
	o.scenario = SYNTH_MIXED;
	o.seed = 7;
	o.insns = 2000000;
	o.nfuncs = 64;
	o.max_depth = 40;
	check(&o, "long");
}

/* Bad knobs: a one-line error, exit status 2, and no file left behind. */
static int run_cli(const char *args, char *out, size_t outlen)
{
	char cmd[1024];
	FILE *p;
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "%s/tools/synth/htr-synth %s 2>&1",
		 getenv("HTR_BUILD_ROOT"), args);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	n = fread(out, 1, outlen - 1, p);
	out[n] = 0;
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_files(const char *d)
{
	char cmd[300], buf[64];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A %s | wc -l", d);
	p = popen(cmd, "r");
	if (p && fgets(buf, sizeof(buf), p))
		n = atoi(buf);
	if (p)
		pclose(p);
	return n;
}

Test(synth, cli_errors)
{
	static const struct { const char *args; int status; const char *msg; } c[] = {
		{ "-S nosuch %s/t", 2, "scenario" },
		{ "-d 0 %s/t", 2, "depth" },
		{ "-f 1 %s/t", 2, "funcs" },
		{ "-n 0 %s/t", 2, "insns" },
		{ "-n banana %s/t", 2, "insns" },
		{ "--mtc-freq 9 %s/t", 2, "mtc-freq" },
		{ "-b 0x1234 %s/t", 2, "base" },
		{ "%s/no/such/dir/t", 1, "No such file" },
		{ "", 2, "PREFIX" },
	};
	size_t i;

	cr_assert_not_null(getenv("HTR_BUILD_ROOT"), "run through meson test");
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char args[512], out[2048];
		int st;

		snprintf(args, sizeof(args), c[i].args, dir);
		st = run_cli(args, out, sizeof(out));
		cr_expect_eq(st, c[i].status, "'%s' exited %d: %s", args, st, out);
		cr_expect_not_null(strstr(out, c[i].msg), "'%s': %s", args, out);
		cr_expect_eq(strchr(out, '\n'), out + strlen(out) - 1,
			     "'%s': not one line: %s", args, out);
		cr_expect_eq(count_files(dir), 0, "'%s' left files behind", args);
	}
}

/* An unwritable output leaves nothing, not even the files it could write. */
Test(synth, unwritable_output)
{
	char sub[300], args[400], out[1024];

	if (geteuid() == 0)
		cr_skip_test("running as root: permissions do not apply");
	snprintf(sub, sizeof(sub), "%s/ro", dir);
	cr_assert_eq(mkdir(sub, 0555), 0);
	snprintf(args, sizeof(args), "-q %s/t", sub);
	cr_expect_eq(run_cli(args, out, sizeof(out)), 1, "%s", out);
	cr_expect_eq(count_files(sub), 0);
}
