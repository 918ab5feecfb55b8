/*
 * The synthesizer's traces are real Intel PT and its ground truth is what an
 * independent decoder finds: every scenario is decoded with plain libipt
 * (tools/synth/verify.c, no libhtr code) and compared with PREFIX.truth.
 * The scenarios of real traces are checked to contain what they are for,
 * and a random sweep covers the knobs.
 */
#include "synth.h"
#include "truth.h"
#include "verify.h"

#include "tmpdir.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

HTR_TEST_TMPDIR(synth);

/* The truth's tree is well formed: post-order, spans nest in their
 * parent's (a parent it does not list is a frame entered before the trace
 * that a decoder cannot see), flags that exclude each other do.  Returns
 * the blocks with any of @flags. */
static size_t shape(const char *prefix, const char *tag, unsigned flags)
{
	char path[300], err[512];
	struct truth t;
	int64_t *post, npre = 0;
	size_t i, n = 0;

	snprintf(path, sizeof(path), "%s.truth", prefix);
	cr_assert_eq(truth_load(&t, path, err, sizeof(err)), 0, "%s", err);
	for (i = 0; i < t.nblocks; i++)
		if (t.blocks[i].pre + 1 > npre)
			npre = t.blocks[i].pre + 1;
	post = malloc(((size_t) npre + 1) * sizeof(*post));
	cr_assert_not_null(post);
	for (i = 0; i <= (size_t) npre; i++)
		post[i] = -1;
	for (i = 0; i < t.nblocks; i++) {
		const struct truth_block *b = &t.blocks[i];

		cr_assert_eq(post[b->pre], -1, "%s: pre %lld twice", tag,
			     (long long) b->pre);
		post[b->pre] = (int64_t) i;
	}
	for (i = 0; i < t.nblocks; i++) {
		const struct truth_block *b = &t.blocks[i], *p;

		cr_assert_leq(b->first, b->last, "%s: block %zu", tag, i);
		cr_assert_lt(b->last, t.insns + (t.insns == 0), "%s: block %zu",
			     tag, i);
		cr_assert(b->func < t.nfuncs || b->func == TRUTH_FUNC_NONE);
		if (b->flags & (TRUTH_CALLBACK | TRUTH_IRQ))
			cr_assert_not(b->flags & TRUTH_LATE, "%s: block %zu",
				      tag, i);
		if (b->flags & TRUTH_UNWOUND)
			cr_assert_not(b->flags & (TRUTH_LATE | TRUTH_TRUNC |
						  TRUTH_RETGAP),
				      "%s: block %zu", tag, i);
		/* The gap flag: some of its execution is missing.  That
		 * holds at least where a gap lies inside its span, where it
		 * returned in one, where the trace ends in one, and where it
		 * was entered in one (a late frame opened mid-trace). */
		cr_assert_eq(t.version, 2);
		if (!(b->flags & TRUTH_GAP)) {
			struct truth t1 = t;

			t1.version = 1;
			cr_assert_not(truth_gap_flag(&t1, b), "%s: block %zu: a "
				      "gap inside, no G", tag, i);
			cr_assert_not(b->flags & TRUTH_RETGAP, "%s: block %zu: "
				      "R without G", tag, i);
			cr_assert_not((b->flags & TRUTH_LATE) && b->first,
				      "%s: block %zu: late mid-trace without "
				      "G", tag, i);
			cr_assert_not((b->flags & TRUTH_TRUNC) && t.ngaps &&
				      t.gaps[t.ngaps - 1].id == t.insns,
				      "%s: block %zu: open at a trailing gap, "
				      "no G", tag, i);
		}
		n += (b->flags & flags) != 0;
		if (b->parent < 0 || b->parent >= npre || post[b->parent] < 0)
			continue;
		cr_assert_gt(post[b->parent], (int64_t) i,
			     "%s: block %zu: not post-order", tag, i);
		p = &t.blocks[post[b->parent]];
		cr_assert(b->first >= p->first && b->last <= p->last,
			  "%s: block %zu (%llu..%llu) outside its parent "
			  "(%llu..%llu)", tag, i, (unsigned long long) b->first,
			  (unsigned long long) b->last,
			  (unsigned long long) p->first,
			  (unsigned long long) p->last);
	}
	for (i = 1; i < t.ngaps; i++)
		cr_assert_geq(t.gaps[i].id, t.gaps[i - 1].id, "%s", tag);
	if (t.ngaps)
		cr_assert_leq(t.gaps[t.ngaps - 1].id, t.insns, "%s", tag);
	free(post);
	truth_free(&t);
	return n;
}

/* Synthesize with @o, then decode with libipt and compare everything.
 * Adds what ran to @sum (may be NULL); returns the truth's blocks with
 * any of @flags.  Tiny random runs (@tiny) may hold no call and no return
 * at all. */
static size_t check_ex(struct synth_opts *o, const char *tag,
		       struct synth_counts *sum, unsigned flags, int tiny)
{
	char prefix[256], err[512];
	struct synth_result res;
	struct synth_verify v;
	size_t n = 0;

	snprintf(prefix, sizeof(prefix), "%s/%s", dir, tag);
	cr_assert_eq(synth_run(o, prefix, &res, err, sizeof(err)), 0,
		     "%s: %s", tag, err);
	cr_assert_eq(synth_verify(prefix, &v, err, sizeof(err)), 0, "%s: %s",
		     tag, err);
	cr_assert_eq(v.insns, res.insns);
	if (!tiny) {
		cr_assert_gt(v.times, 0, "%s: no block boundary was compared",
			     tag);
		if (o->max_depth > 1)
			cr_assert_gt(v.calls, 0, "%s: no calls", tag);
	}
	if (o->truth)
		n = shape(prefix, tag, flags);
	if (sum) {
		uint64_t *d = (uint64_t *) sum;
		const uint64_t *a = (const uint64_t *) &res.n;
		size_t k;

		for (k = 0; k < sizeof(*sum) / sizeof(uint64_t); k++)
			d[k] += a[k];
	}
	return n;
}

static void check(struct synth_opts *o, const char *tag)
{
	check_ex(o, tag, NULL, 0, 0);
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

/* A scenario of real traces over six seeds: libipt agrees with every
 * truth; returns the patterns' counts summed, and in *@nflags the truth's
 * blocks with any of @flags. */
static struct synth_counts real_scenario(enum synth_scenario s,
					 unsigned flags, size_t *nflags)
{
	struct synth_counts sum;
	uint64_t seed;

	memset(&sum, 0, sizeof(sum));
	*nflags = 0;
	for (seed = 1; seed <= 6; seed++) {
		struct synth_opts o;
		char tag[64];

		synth_opts_init(&o);
		o.scenario = s;
		o.seed = seed;
		o.insns = 20000;
		snprintf(tag, sizeof(tag), "%s-%llu", synth_scenario_name(s),
			 (unsigned long long) seed);
		*nflags += check_ex(&o, tag, &sum, flags, 0);
	}
	return sum;
}

Test(synth, untraced)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_UNTRACED, 0, &n);

	cr_expect_gt(c.lib_calls, 0);
	cr_expect_gt(c.syscalls, 0);
	cr_expect_eq(c.callbacks + c.irqs + c.longjmps + c.throws, 0);
}

Test(synth, callback)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_CALLBACK, TRUTH_CALLBACK,
					      &n);

	cr_expect_gt(c.lib_calls, 0);
	cr_expect_gt(c.callbacks, 0);
	cr_expect_eq(n, c.callbacks, "every callback is a C block");
}

Test(synth, overflow_pge)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_OVERFLOW_PGE, 0, &n);

	cr_expect_eq(c.ovf_pge, 6 * 3, "every overflow resolves off");
	cr_expect_gt(c.ovf_pge_ret, 0, "none resumes at a return address");
	cr_expect_lt(c.ovf_pge_ret, c.ovf_pge, "all resume at one");
}

Test(synth, interrupt)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_INTERRUPT, TRUTH_IRQ, &n);

	cr_expect_gt(c.irqs, 0);
	cr_expect_gt(c.irqs_after_call, 0);
	cr_expect_gt(c.irqs_after_ret, 0);
	cr_expect_gt(c.irqs_in_place, 0);
	cr_expect_eq(n, c.irqs, "every interrupt is an I block");
}

Test(synth, unwind)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_UNWIND, TRUTH_UNWOUND, &n);

	cr_expect_gt(c.longjmps, 0);
	cr_expect_gt(c.throws, 0);
	cr_expect_geq(n, c.longjmps + c.throws, "an unwinding abandons at "
		      "least one frame");
}

Test(synth, late_gap)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_LATE_GAP, 0, &n);

	cr_expect_gt(c.early_gaps, 6, "gaps before the first return of a "
		     "frame the trace started in");
}

Test(synth, real)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_REAL, TRUTH_UNWOUND |
					      TRUTH_CALLBACK | TRUTH_IRQ, &n);

	cr_expect_gt(c.lib_calls, 0);
	cr_expect_gt(c.syscalls, 0);
	cr_expect_gt(c.callbacks, 0);
	cr_expect_gt(c.irqs, 0);
	cr_expect_gt(c.irqs_in_place, 0);
	cr_expect_gt(c.longjmps + c.throws, 0);
	cr_expect_gt(c.ovf_pge, 0);
	cr_expect_gt(n, 0);
}

/* Decode errors: calls into library code the ELF lacks ("no memory
 * mapped"), decoding resumed at the next PSB in the frame the error left,
 * in an outer one, and deeper (in a callback of the missing code: a late
 * frame).  libipt hits exactly the truth's errors. */
Test(synth, errors)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_ERRORS, TRUTH_LATE, &n);

	cr_expect_geq(c.errors, 600, "%llu errors",
		      (unsigned long long) c.errors);
	cr_expect_gt(c.err_same, 0);
	cr_expect_gt(c.err_shallower, 0);
	cr_expect_gt(c.err_deeper, 0);
	/* main's own L block in each seed, one per deeper resume */
	cr_expect_eq(n, 6 + c.err_deeper);
	cr_expect_eq(c.lib_calls + c.callbacks + c.syscalls, 0, "the missing "
		     "libraries are traced: no disable");
}

/* longjmp and throw at most turns: many more than in unwind. */
Test(synth, unwind_loop)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_UNWIND_LOOP, TRUTH_UNWOUND,
					      &n);

	cr_expect_gt(c.longjmps, 100);
	cr_expect_gt(c.throws, 100);
	cr_expect_geq(n, c.longjmps + c.throws);
}

Test(synth, sysenter)
{
	size_t n;
	struct synth_counts c = real_scenario(SYNTH_SYSENTER, 0, &n);

	cr_expect_gt(c.sysenters, 0);
	cr_expect_eq(c.syscalls + c.lib_calls + c.irqs, 0);
}

/* The truth's new letters and an unknown function read back. */
Test(synth, truth_letters)
{
	char path[300], err[512];
	struct truth t;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/letters.truth", dir);
	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	fprintf(fp, "htr-synth-truth 1\nfunc 0 0x401000 16 main\n"
		"block 1 0 -1 1 2 5 6 U\nblock 2 0 0 3 3 7 7 CI\n"
		"gap 4 disabled\n"
		"block 0 -1 0 0 4 1 8 LTR\ninsns 5\nend\n");
	fclose(fp);
	cr_assert_eq(truth_load(&t, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(t.version, 1);
	cr_assert_eq(t.nblocks, 3);
	cr_expect_eq(t.blocks[0].func, TRUTH_FUNC_NONE);
	cr_expect_eq(t.blocks[0].flags, TRUTH_UNWOUND);
	cr_expect_eq(t.blocks[1].flags, TRUTH_CALLBACK | TRUTH_IRQ);
	cr_expect_eq(t.blocks[2].flags, TRUTH_LATE | TRUTH_TRUNC |
		     TRUTH_RETGAP);
	/* format 1: "a gap lies inside its span" */
	cr_expect(truth_gap_flag(&t, &t.blocks[2]));
	cr_expect_not(truth_gap_flag(&t, &t.blocks[1]));
	truth_free(&t);

	/* format 2: the G letter says it; error gaps */
	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	fprintf(fp, "htr-synth-truth 2\nfunc 0 0x401000 16 main\n"
		"gap 1 error\nblock 1 0 -1 1 2 5 6 LG\n"
		"block 0 -1 0 0 2 1 8 LRG\nblock 2 -1 0 3 3 7 7 -\n"
		"insns 4\nend\n");
	fclose(fp);
	cr_assert_eq(truth_load(&t, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(t.version, 2);
	cr_assert_eq(t.ngaps, 1);
	cr_expect(t.gaps[0].error && !t.gaps[0].overflow);
	cr_expect_eq(t.blocks[0].flags, TRUTH_LATE | TRUTH_GAP);
	cr_expect(truth_gap_flag(&t, &t.blocks[0]));
	cr_expect(truth_gap_flag(&t, &t.blocks[1]));
	cr_expect_not(truth_gap_flag(&t, &t.blocks[2]));
	truth_free(&t);
	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	fprintf(fp, "htr-synth-truth 3\nend\n");
	fclose(fp);
	cr_expect_neq(truth_load(&t, path, err, sizeof(err)), 0);
}

/* xorshift64: a fixed sequence of configurations */
static unsigned next_below(uint64_t *x, unsigned n)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (unsigned) (*x % n);
}

/* Random configurations over every scenario and knob: libipt agrees, the
 * tree is well formed. */
Test(synth, sweep, .timeout = 120)
{
	static const uint64_t bases[] = { 0x400000, 0x555555554000ull,
		0x7ffff7a00000ull, 0x10000 };
	uint64_t x = 0x9e3779b97f4a7c15ull;
	unsigned i, runs[SYNTH_NSCENARIOS] = { 0 };

	for (i = 0; i < 20 * SYNTH_NSCENARIOS; i++) {
		struct synth_opts o;
		char tag[64];

#define NEXT(n) next_below(&x, (n))
		synth_opts_init(&o);
		o.scenario = (enum synth_scenario) (i % SYNTH_NSCENARIOS);
		o.seed = 1000 + i;
		o.insns = 300 + NEXT(3000);
		o.nfuncs = 2 + NEXT(60);
		o.max_depth = 1 + NEXT(30);
		o.psb_period = 256 + NEXT(8000);
		o.mtc_freq = 3 + NEXT(6);
		o.ctc_ratio = 1 + NEXT(8);
		o.mtc = NEXT(4) != 0;
		o.cyc = NEXT(4) != 0;
		o.base = bases[NEXT(4)] + 0x1000ull * NEXT(64);
		o.libs = 1 + NEXT(16);
		o.bundle = 0;
#undef NEXT
		snprintf(tag, sizeof(tag), "sweep-%u", i);
		check_ex(&o, tag, NULL, 0, 1);
		runs[o.scenario]++;
	}
	for (i = 0; i < SYNTH_NSCENARIOS; i++)
		cr_expect_geq(runs[i], 20, "%s", synth_scenario_name(
				      (enum synth_scenario) i));
}

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
	char cmd[320], buf[64];
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
		{ "--libs 0 %s/t", 2, "libs" },
		{ "--libs 65 %s/t", 2, "libs" },
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
