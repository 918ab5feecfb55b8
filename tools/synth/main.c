/* htr-synth: write a synthetic program, its Intel PT trace and the ground
 * truth.  See tools/synth/README.md. */
#include "synth.h"
#include "verify.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2

static void usage(FILE *fp)
{
	fprintf(fp,
"usage: htr-synth [options] PREFIX\n"
"       htr-synth --verify PREFIX\n"
"\n"
"Write PREFIX.elf (an x86-64 program), PREFIX.pt (the raw Intel PT trace of\n"
"one run of it), PREFIX.truth (what a decoder must find) and PREFIX.json\n"
"(an LLDB trace bundle).\n"
"\n"
"With --verify, write nothing: decode PREFIX.pt with plain libipt and check\n"
"it against PREFIX.truth (instruction count, calls, returns, gaps, TSC).\n"
"\n"
"options:\n"
"  -s, --seed N          seed of program and execution (default 1)\n"
"  -S, --scenario NAME   basic, nocomp, gap, overflow, late_start,\n"
"                        abrupt_end, mixed, untraced, callback,\n"
"                        overflow_pge, interrupt, unwind, late_gap, real,\n"
"                        sysenter, errors (calls into code the ELF lacks:\n"
"                        decode errors resumed shallower, deeper and in\n"
"                        the same frame) or unwind_loop (longjmp and\n"
"                        throw at every turn)\n"
"                        (default basic; see README.md)\n"
"  -n, --insns N         traced instructions to aim for: 20000, 20k, 2M,\n"
"                        1e8 or 2.5e6 (a whole number)\n"
"                        (default 100k)\n"
"  -f, --funcs N         functions in the program, 2..4096 (default 24)\n"
"  -d, --depth N         maximum call depth, 1..100000 (default 12)\n"
"  -b, --base ADDR       load address of the image in the trace\n"
"                        (default 0x400000, the link address)\n"
"      --psb-period N    bytes between PSB packets (default 4096)\n"
"      --mtc-freq N      MTC every 2^N CTC ticks, 3..8 (default 6)\n"
"      --ctc-ratio N     TSC ticks per CTC tick, 1..256 (default 2)\n"
"      --libs N          untraced library functions, 1..64 (default 6;\n"
"                        untraced, callback and real; in errors: the\n"
"                        missing ones)\n"
"      --no-mtc          no MTC packets\n"
"      --no-cyc          no CYC packets\n"
"      --no-truth        do not write PREFIX.truth (for benchmarks)\n"
"      --no-bundle       do not write PREFIX.json\n"
"  -V, --verify          check an existing PREFIX with libipt (see above)\n"
"  -q, --quiet           no progress and no summary\n"
"  -h, --help            show this help\n"
"\n"
"exit status: 0 ok, 1 failure, 2 usage error\n");
}

/* A count as users type it: 1000000, 0x100, 1M, 2.5k, 1e8, 1.5e6.  The
 * value must be a whole number: "1.5" or "1e-3" are refused. */
static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	int frac = -1, exp = 0, any = 0;
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return -1;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		errno = 0;
		v = strtoull(s, &end, 16);
		if (errno || *end || end == s + 2)
			return -1;
		*out = v;
		return 0;
	}
	for (; *s; s++) {
		if (*s == '.' && frac < 0) {
			frac = 0;
			continue;
		}
		if (*s < '0' || *s > '9')
			break;
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t) (*s - '0');
		any = 1;
		if (frac >= 0)
			frac++;
	}
	if (!any)
		return -1;
	if (*s == 'e' || *s == 'E') {
		char *e;
		long x;

		errno = 0;
		x = strtol(s + 1, &e, 10);
		if (errno || e == s + 1 || x < 0 || x > 19)
			return -1;
		exp = (int) x;
		s = e;
	} else if (*s == 'k' || *s == 'K') {
		exp = 3, s++;
	} else if (*s == 'M') {
		exp = 6, s++;
	} else if (*s == 'G') {
		exp = 9, s++;
	}
	if (*s)
		return -1;
	for (exp -= frac > 0 ? frac : 0; exp > 0; exp--) {
		if (v > UINT64_MAX / 10)
			return -1;
		v *= 10;
	}
	for (; exp < 0; exp++) {
		if (v % 10)
			return -1;      /* not a whole number */
		v /= 10;
	}
	*out = v;
	return 0;
}

struct progress {
	struct timespec start, last;
	int tty;
};

static double since(const struct timespec *a, const struct timespec *b)
{
	return (double) (b->tv_sec - a->tv_sec) +
	       (double) (b->tv_nsec - a->tv_nsec) / 1e9;
}

static int on_progress(uint64_t insns, uint64_t bytes, void *payload)
{
	struct progress *p = payload;
	struct timespec now;
	double dt;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (since(&p->last, &now) < (p->tty ? 0.5 : 5.0))
		return 0;
	p->last = now;
	dt = since(&p->start, &now);
	fprintf(stderr, "%shtr-synth: %" PRIu64 " insns, %.1f MiB, %.2f M insns/s%s",
		p->tty ? "\r" : "", insns, (double) bytes / 1048576.0,
		(double) insns / dt / 1e6, p->tty ? "   " : "\n");
	return 0;
}

int main(int argc, char **argv)
{
	enum { O_PSB = 256, O_MTCF, O_CTC, O_NOMTC, O_NOCYC, O_NOTRUTH,
	       O_NOBUNDLE, O_LIBS };
	static const struct option lopts[] = {
		{ "seed", required_argument, NULL, 's' },
		{ "scenario", required_argument, NULL, 'S' },
		{ "insns", required_argument, NULL, 'n' },
		{ "funcs", required_argument, NULL, 'f' },
		{ "depth", required_argument, NULL, 'd' },
		{ "base", required_argument, NULL, 'b' },
		{ "psb-period", required_argument, NULL, O_PSB },
		{ "mtc-freq", required_argument, NULL, O_MTCF },
		{ "ctc-ratio", required_argument, NULL, O_CTC },
		{ "libs", required_argument, NULL, O_LIBS },
		{ "no-mtc", no_argument, NULL, O_NOMTC },
		{ "no-cyc", no_argument, NULL, O_NOCYC },
		{ "no-truth", no_argument, NULL, O_NOTRUTH },
		{ "no-bundle", no_argument, NULL, O_NOBUNDLE },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verify", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct synth_opts o;
	struct synth_result res;
	struct progress prog;
	struct timespec end;
	char err[512];
	int c, quiet = 0, verify = 0;
	uint64_t v;
	double dt;

	synth_opts_init(&o);
	while ((c = getopt_long(argc, argv, "s:S:n:f:d:b:qVh", lopts, NULL)) != -1) {
		const char *what = NULL;

		switch (c) {
		case 's':
			if (parse_u64(optarg, &o.seed) < 0)
				what = "seed";
			break;
		case 'S':
			c = synth_scenario_parse(optarg);
			if (c < 0) {
				fprintf(stderr, "htr-synth: scenario: unknown "
					"scenario '%s' (try --help)\n", optarg);
				return EXIT_USAGE;
			}
			o.scenario = (enum synth_scenario) c;
			break;
		case 'n':
			if (parse_u64(optarg, &o.insns) < 0)
				what = "insns";
			break;
		case 'f':
			if (parse_u64(optarg, &v) < 0 || v > 4096)
				what = "funcs";
			o.nfuncs = (unsigned) v;
			break;
		case 'd':
			if (parse_u64(optarg, &v) < 0 || v > 100000)
				what = "depth";
			o.max_depth = (unsigned) v;
			break;
		case 'b':
			if (parse_u64(optarg, &o.base) < 0)
				what = "base";
			break;
		case O_PSB:
			if (parse_u64(optarg, &v) < 0 || v > UINT32_MAX)
				what = "psb-period";
			o.psb_period = (uint32_t) v;
			break;
		case O_MTCF:
			if (parse_u64(optarg, &v) < 0 || v > 8)
				what = "mtc-freq";
			o.mtc_freq = (unsigned) v;
			break;
		case O_CTC:
			if (parse_u64(optarg, &v) < 0 || v > 256)
				what = "ctc-ratio";
			o.ctc_ratio = (unsigned) v;
			break;
		case O_LIBS:
			if (parse_u64(optarg, &v) < 0 || v > 64)
				what = "libs";
			o.libs = (unsigned) v;
			break;
		case O_NOMTC: o.mtc = 0; break;
		case O_NOCYC: o.cyc = 0; break;
		case O_NOTRUTH: o.truth = 0; break;
		case O_NOBUNDLE: o.bundle = 0; break;
		case 'q': quiet = 1; break;
		case 'V': verify = 1; break;
		case 'h': usage(stdout); return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
		if (what) {
			fprintf(stderr, "htr-synth: %s: bad value '%s'\n", what,
				optarg);
			return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "htr-synth: expected one PREFIX (try --help)\n");
		return EXIT_USAGE;
	}
	if (verify) {
		struct synth_verify v;

		if (synth_verify(argv[optind], &v, err, sizeof(err)) < 0) {
			fprintf(stderr, "htr-synth: verify: %s: %s\n",
				argv[optind], err);
			return 1;
		}
		printf("htr-synth: verify: %s: libipt agrees with the truth: "
		       "%" PRIu64 " insns, %" PRIu64 " calls, %" PRIu64
		       " returns, %" PRIu64 " gaps, %" PRIu64 " block-boundary "
		       "TSCs\n", argv[optind], v.insns, v.calls, v.rets, v.gaps,
		       v.times);
		return 0;
	}
	memset(&prog, 0, sizeof(prog));
	clock_gettime(CLOCK_MONOTONIC, &prog.start);
	prog.last = prog.start;
	prog.tty = isatty(2);
	if (!quiet) {
		o.progress = on_progress;
		o.payload = &prog;
	}
	if (synth_check_opts(&o, err, sizeof(err)) < 0) {
		fprintf(stderr, "htr-synth: %s\n", err);
		return EXIT_USAGE;
	}
	if (synth_run(&o, argv[optind], &res, err, sizeof(err)) < 0) {
		fprintf(stderr, "htr-synth: %s\n", err);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	dt = since(&prog.start, &end);
	if (!quiet && res.n.errors)
		fprintf(stderr, "%shtr-synth: %s: %" PRIu64 " decode errors "
			"(resumed %" PRIu64 " in the same frame, %" PRIu64
			" shallower, %" PRIu64 " deeper)\n",
			prog.tty ? "\r" : "", argv[optind], res.n.errors,
			res.n.err_same, res.n.err_shallower, res.n.err_deeper);
	if (!quiet)
		fprintf(stderr, "%shtr-synth: %s: %" PRIu64 " insns, %" PRIu64
			" blocks, %" PRIu64 " gaps, %" PRIu64 " bytes of trace, "
			"depth %u, %.2f s (%.2f M insns/s)\n",
			prog.tty ? "\r" : "", argv[optind], res.insns,
			res.blocks, res.gaps, res.trace_bytes, res.max_depth,
			dt, dt > 0 ? (double) res.insns / dt / 1e6 : 0.0);
	return 0;
}
