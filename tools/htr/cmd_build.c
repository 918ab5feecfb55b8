/* htr build: decode a trace into an .htr file. */
#include "cmd.h"

#include "htr/htr.h"

#include <getopt.h>
#include <signal.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char usage_text[] =
"usage: htr build TRACE --elf FILE[@BASE]... [--raw FILE[:OFF[:SIZE]]@VADDR]...\n"
"                 [--cpu FAMILY/MODEL[/STEPPING]|auto] [-o OUT] [options]\n"
"\n"
"Decode the raw Intel PT trace TRACE with libipt and write its call tree to\n"
"OUT (default: TRACE with its extension replaced by .htr).\n"
"\n"
"  -e, --elf FILE[@BASE]   an ELF; at its link address, or with its lowest\n"
"                          PT_LOAD at BASE (position-independent code)\n"
"  -r, --raw FILE[:OFFSET[:SIZE]]@VADDR\n"
"                          raw code bytes loaded at VADDR\n"
"      --cpu F/M[/S]|auto  processor the trace was recorded on, for libipt's\n"
"                          errata workarounds (auto: none)\n"
"      --mtc-freq N        IA32_RTIT_CTL.MTCFreq of the recording\n"
"      --nom-freq N        nominal core:bus ratio (for CYC)\n"
"      --cpuid-0x15-eax N, --cpuid-0x15-ebx N\n"
"                          the TSC:CTC ratio CPUID leaf 0x15 reports\n"
"  -o, --output OUT        where to write the .htr file\n"
"  -q, --quiet             no progress, no summary\n"
"  -h, --help              show this help\n"
"\n"
"Progress goes to stderr: a live line on a terminal, a heartbeat line every\n"
"5 seconds otherwise.  Bad trace data does not stop a build: it becomes\n"
"gaps, counted in the summary.  OUT is written under a temporary name and\n"
"renamed when complete.\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

struct progress {
	struct timespec start, last;
	int tty, printed, quiet;
};

/* The signal that asked the build to stop (SIGINT, SIGTERM), 0 if none.
 * A signal handler can only set a flag: the build checks it at its next
 * progress report, stops, and removes its temporary output itself. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static double seconds(const struct timespec *a, const struct timespec *b)
{
	return (double) (b->tv_sec - a->tv_sec) +
	       (double) (b->tv_nsec - a->tv_nsec) / 1e9;
}

static int on_progress(const struct htr_build_progress *p, void *payload)
{
	struct progress *pr = payload;
	struct timespec now;
	double t, frac, eta;

	if (stop_signal)
		return 1;
	if (pr->quiet)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (seconds(&pr->last, &now) < (pr->tty ? 0.25 : 5.0))
		return 0;
	pr->last = now;
	t = seconds(&pr->start, &now);
	frac = p->trace_size ? (double) p->offset / (double) p->trace_size : 0;
	eta = frac > 0 ? t / frac - t : 0;
	fprintf(stderr, "%shtr: build: %5.1f%% %.1f/%.1f MiB, %" PRIu64
		" insns, %.1f M insns/s, ETA %.0f s%s",
		pr->tty ? "\r" : "", 100.0 * frac,
		(double) p->offset / 1048576.0,
		(double) p->trace_size / 1048576.0, p->insns,
		t > 0 ? (double) p->insns / t / 1e6 : 0.0, eta,
		pr->tty ? "  " : "\n");
	pr->printed = 1;
	return 0;
}

static char *default_output(const char *trace)
{
	const char *slash = strrchr(trace, '/');
	const char *dot = strrchr(trace, '.');
	size_t stem = dot && (!slash || dot > slash + 1) ? (size_t) (dot - trace)
							 : strlen(trace);
	char *out = malloc(stem + 5);

	if (out) {
		memcpy(out, trace, stem);
		strcpy(out + stem, ".htr");
	}
	return out;
}

/* Whether writing @out would replace @in (the same file, by any name). */
static int same_file(const char *in, const char *out)
{
	struct stat a, b;

	return stat(in, &a) == 0 && stat(out, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The file of an image spec: what comes before its last '@' (an ELF may
 * have no '@'). */
static int spec_is(const char *spec, const char *out)
{
	const char *at = strrchr(spec, '@');
	char *path = at ? strndup(spec, (size_t) (at - spec)) : strdup(spec);
	int r;

	if (!path)
		return 0;
	/* A raw spec may also carry :OFFSET[:SIZE]. */
	r = same_file(path, out);
	if (!r && at) {
		char *colon = strchr(path, ':');

		if (colon) {
			*colon = 0;
			r = same_file(path, out);
		}
	}
	free(path);
	return r;
}

/* Warnings a build's result calls for: each one line, each a sign that
 * the tree is not what the user wants (wrong image, missing timing
 * options), none a failure. */
static void warn_result(const char *trace, const char *out,
			const struct htr_build_stats *st)
{
	struct htr_file *f = NULL;
	struct htr_gap_info g, first;
	uint64_t i, n, nerr = 0, nrun = 0;

	if (st->timing_unusable)
		fprintf(stderr, "htr: build: warning: %s has MTC/CYC timing "
			"packets but --cpuid-0x15-eax/--cpuid-0x15-ebx/"
			"--mtc-freq/--nom-freq do not describe them: time "
			"moves only at each PSB\n", trace);
	if (st->folded)
		fprintf(stderr, "htr: build: warning: %" PRIu64 " calls past "
			"the call-stack limit were folded into their caller\n",
			st->folded);
	memset(&first, 0, sizeof(first));
	if (htr_file_open(&f, out, NULL) == 0) {
		n = htr_gap_count(f);
		for (i = 0; i < n; i++) {
			g.size = sizeof(g);
			if (htr_gap_get(f, i, &g, sizeof(g)) < 0 ||
			    g.kind != HTR_GAP_ERROR)
				continue;
			if (!nerr++)
				first = g;
			nrun += g.code == HTR_GAP_CODE_RUNAWAY;
		}
	}
	htr_file_close(f);
	if (nerr)
		fprintf(stderr, "htr: build: warning: %" PRIu64 " decode "
			"error%s%s, the first at trace offset 0x%" PRIx64
			": %s; are the --elf/--raw files the recorded code at "
			"its load addresses? ('htr gaps %s' lists them)\n",
			nerr, nerr == 1 ? "" : "s",
			nrun ? " (the decoder ran away)" : "", first.offset,
			htr_gap_reason(&first), out);
	else if (!st->insns)
		fprintf(stderr, "htr: build: warning: %s: no instruction "
			"decoded\n", trace);
}

static int parse_cpu(const char *s, struct htr_build_opts *o)
{
	unsigned f, m, st = 0;
	char tail;
	int n;

	if (!strcmp(s, "auto") || !strcmp(s, "none"))
		return 0;
	n = sscanf(s, "%u/%u/%u%c", &f, &m, &st, &tail);
	if (n == 2 || n == 3) {
		if (!f || f > 255 || m > 255 || st > 255)
			return -1;
		o->cpu_family = (int) f;
		o->cpu_model = (int) m;
		o->cpu_stepping = (int) st;
		return 0;
	}
	return -1;
}

int cmd_build(int argc, char **argv)
{
	enum { O_CPU = 256, O_MTC, O_NOM, O_EAX, O_EBX };
	static const struct option lopts[] = {
		{ "elf", required_argument, NULL, 'e' },
		{ "raw", required_argument, NULL, 'r' },
		{ "cpu", required_argument, NULL, O_CPU },
		{ "mtc-freq", required_argument, NULL, O_MTC },
		{ "nom-freq", required_argument, NULL, O_NOM },
		{ "cpuid-0x15-eax", required_argument, NULL, O_EAX },
		{ "cpuid-0x15-ebx", required_argument, NULL, O_EBX },
		{ "output", required_argument, NULL, 'o' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_build_opts opts;
	struct htr_build_stats st;
	struct htr_builder *b = NULL;
	struct progress pr;
	struct timespec end;
	const char **elfs = NULL, **raws = NULL;
	char *out = NULL, *defout = NULL;
	size_t nelf = 0, nraw = 0, i;
	int c, quiet = 0, rc = HTR_EXIT_FAIL, err;
	uint64_t v;

	htr_build_opts_init(&opts);
	elfs = calloc((size_t) argc, sizeof(*elfs));
	raws = calloc((size_t) argc, sizeof(*raws));
	if (!elfs || !raws) {
		rc = fail("build", "out of memory");
		goto done;
	}
	optind = 1;
	opterr = 0;     /* one error line, ours */
	while ((c = getopt_long(argc, argv, "e:r:o:qh", lopts, NULL)) != -1) {
		switch (c) {
		case 'e': elfs[nelf++] = optarg; break;
		case 'r': raws[nraw++] = optarg; break;
		case 'o': out = optarg; break;
		case 'q': quiet = 1; break;
		case 'h':
			fputs(usage_text, stdout);
			rc = HTR_EXIT_OK;
			goto done;
		case O_CPU:
			if (parse_cpu(optarg, &opts) < 0) {
				rc = usage_error("build", "--cpu: bad value '%s'",
						 optarg);
				goto done;
			}
			break;
		case O_MTC: case O_NOM: case O_EAX: case O_EBX:
			if (parse_u64(optarg, &v) < 0 ||
			    ((c == O_MTC || c == O_NOM) && v > 255) ||
			    v > UINT32_MAX) {
				rc = usage_error("build", "--%s: bad value '%s'",
						 c == O_MTC ? "mtc-freq" :
						 c == O_NOM ? "nom-freq" :
						 c == O_EAX ? "cpuid-0x15-eax" :
						 "cpuid-0x15-ebx", optarg);
				goto done;
			}
			if (c == O_MTC)
				opts.mtc_freq = (uint8_t) v;
			else if (c == O_NOM)
				opts.nom_freq = (uint8_t) v;
			else if (c == O_EAX)
				opts.cpuid_0x15_eax = (uint32_t) v;
			else
				opts.cpuid_0x15_ebx = (uint32_t) v;
			break;
		default:
			rc = usage_error("build", "unknown option '%s'",
					    argv[optind - 1]);
			goto done;
		}
	}
	if (optind + 1 != argc) {
		rc = usage_error("build", optind == argc ? "no TRACE given"
				 : "more than one TRACE given");
		goto done;
	}
	if (!nelf && !nraw) {
		rc = usage_error("build", "no image: give --elf or --raw");
		goto done;
	}
	if (!out)
		out = defout = default_output(argv[optind]);
	if (!out) {
		rc = fail("build", "out of memory");
		goto done;
	}
	if (same_file(argv[optind], out)) {
		rc = usage_error("build", "%s: the output would overwrite the "
				 "trace; give another -o", out);
		goto done;
	}
	for (i = 0; i < nelf + nraw; i++)
		if (spec_is(i < nelf ? elfs[i] : raws[i - nelf], out)) {
			rc = usage_error("build", "%s: the output would "
					 "overwrite an image file; give "
					 "another -o", out);
			goto done;
		}

	memset(&pr, 0, sizeof(pr));
	clock_gettime(CLOCK_MONOTONIC, &pr.start);
	pr.last = pr.start;
	pr.tty = isatty(2);
	pr.quiet = quiet;
	opts.progress = on_progress;
	opts.payload = &pr;
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	err = htr_builder_alloc(&b, &opts);
	if (err < 0) {
		rc = fail("build", "%s", htr_errstr(err));
		goto done;
	}
	for (i = 0; i < nelf; i++)
		if (htr_builder_add_elf(b, elfs[i]) < 0) {
			rc = fail("build", "%s", htr_builder_last_error(b));
			goto done;
		}
	for (i = 0; i < nraw; i++)
		if (htr_builder_add_raw(b, raws[i]) < 0) {
			rc = fail("build", "%s", htr_builder_last_error(b));
			goto done;
		}
	memset(&st, 0, sizeof(st));
	err = htr_builder_run(b, argv[optind], out, &st, sizeof(st));
	if (pr.printed && pr.tty)
		fputc('\n', stderr);
	if (err == HTR_ERR_CANCELED && stop_signal) {
		fprintf(stderr, "htr: build: %s: interrupted, nothing written\n",
			out);
		htr_builder_free(b);
		b = NULL;
		/* Die of the signal, so the caller sees why. */
		signal(stop_signal, SIG_DFL);
		raise(stop_signal);
		goto done;
	}
	if (err < 0) {
		rc = fail("build", "%s", htr_builder_last_error(b)[0] ?
			  htr_builder_last_error(b) : htr_errstr(err));
		goto done;
	}
	clock_gettime(CLOCK_MONOTONIC, &end);
	if (!quiet) {
		struct stat sb;
		double t = seconds(&pr.start, &end);
		uint64_t fsize = stat(out, &sb) == 0 ? (uint64_t) sb.st_size : 0;

		fprintf(stderr, "htr: build: %s -> %s: %" PRIu64 " insns, %"
			PRIu64 " blocks, depth %u, %" PRIu64 " gaps, %" PRIu64
			" bytes (%.1f per block), %.2f s, %.1f M insns/s\n",
			argv[optind], out, st.insns, st.blocks, st.max_depth,
			st.gaps, fsize,
			st.blocks ? (double) fsize / (double) st.blocks : 0.0,
			t, t > 0 ? (double) st.insns / t / 1e6 : 0.0);
	}
	warn_result(argv[optind], out, &st);
	rc = HTR_EXIT_OK;
done:
	htr_builder_free(b);
	free(defout);
	free(elfs);
	free(raws);
	return rc;
}
