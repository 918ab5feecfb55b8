/*
 * The synthesizer's traces are real Intel PT and its ground truth is what an
 * independent decoder finds: every scenario is decoded with plain libipt
 * (tests/libipt_ref.c, no libhtr code) and compared with PREFIX.truth.
 */
#include "synth.h"
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

/* Synthesize with @o, then decode with libipt and compare everything. */
static void check(struct synth_opts *o, const char *tag)
{
	char prefix[256], err[512];
	struct synth_result res;
	struct synth_verify v;

	snprintf(prefix, sizeof(prefix), "%s/%s", dir, tag);
	cr_assert_eq(synth_run(o, prefix, &res, err, sizeof(err)), 0,
		     "%s: %s", tag, err);
	cr_assert_eq(synth_verify(prefix, &v, err, sizeof(err)), 0, "%s: %s",
		     tag, err);
	cr_assert_eq(v.insns, res.insns);
	cr_assert_gt(v.times, 0, "%s: no block boundary was compared", tag);
	if (o->max_depth > 1)
		cr_assert_gt(v.calls, 0, "%s: no calls", tag);
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
