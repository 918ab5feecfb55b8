/* htr record: run a program under qemu-user and write its Intel PT. */
#include "cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
"usage: htr record [-o OUT] [--raw DIR] [--lldb DIR]\n"
"                  [--filter MODULE|START-END]...\n"
"                  [--cpus N] [--psb-period N] [--no-ret-compression]\n"
"                  [--skl014] [--engine tcg|log] [--no-truth]\n"
"                  [--ring SIZE [--snapshot-on SIGNAL] [--snapshot-every N]\n"
"                   [--perf-snapshot] [--heartbeat SECONDS]]\n"
"                  -- PROG [ARGS...]\n"
"\n"
"Runs PROG under qemu-user (qemu-x86_64 with htr's TCG plugin) and\n"
"writes the Intel PT a processor would have written for that execution:\n"
"user-only tracing, return compression, PSB+ every N bytes, TSC from a\n"
"cycle model (one tick per instruction, 200 per syscall, 1000 per signal).\n"
"One trace per thread, or with --cpus one per modelled CPU.  Also writes the\n"
"ground truth of each thread (every call and return, the call tree;\n"
"tools/synth/TRUTH.md).  The modelled TSC runs at 1.9 GHz; perf.data\n"
"converts it to perf time as a kernel would (time_shift 31, time_mult\n"
"1130254551, time_zero 3612345678901).  PROG is found on PATH as execvp\n"
"finds it and sees argv[0] as given (a multi-call program such as xzcat\n"
"behaves as it would outside); the recording names its real file, as the\n"
"kernel's mappings would.\n"
"\n"
"  -o, --out OUT            perf.data to write (default: perf.data), as\n"
"                           'perf record -e intel_pt//u --per-thread' lays\n"
"                           it out ('perf script --itrace=...' decodes it);\n"
"                           the truth of thread N goes to OUT.tN.truth\n"
"                           (but with --no-truth)\n"
"      --cpus N             a CPU-wide perf.data instead, as 'perf record -e\n"
"                           intel_pt//u -a' writes it on N CPUs: the threads\n"
"                           are scheduled on N modelled CPUs (a syscall frees\n"
"                           the CPU; a thread takes the CPU after the one it\n"
"                           last ran on, preempting the thread there), one\n"
"                           trace per CPU, context-switch records; not with\n"
"                           --raw\n"
"      --raw DIR            write DIR/tN.pt and DIR/tN.truth per thread N,\n"
"                           DIR/build.args (the modules as --elf FILE@BASE\n"
"                           and the timing options for 'htr build') and\n"
"                           DIR/record.txt (the parameters) instead\n"
"      --lldb DIR           also write DIR/trace.json, a trace bundle\n"
"                           lldb-22 loads with 'trace load DIR/trace.json'\n"
"                           (LLDB's Intel PT bundle: the CPU, the process,\n"
"                           each thread's raw trace as DIR/tN.pt, a copy of\n"
"                           each module under DIR/modules/ at its load\n"
"                           address; paths relative to DIR); DIR must not\n"
"                           exist or be empty; not with --cpus\n";

/* Apart: one string would pass the length C99 compilers must support. */
static const char usage_opts[] =
"      --filter MODULE      trace only this module's code (a path, a file\n"
"                           name or a glob on it); repeatable\n"
"      --filter START-END   trace only [START, END); repeatable\n"
"      --psb-period N       bytes between PSB+ (default 4096, >= 256)\n"
"      --no-ret-compression every return as a TIP\n"
"      --skl014             as a CPU with erratum SKL014 (the perf.data\n"
"                           names a Kaby Lake, which has it): a direct\n"
"                           jump or call out of the --filter ranges\n"
"                           disables tracing without its target\n"
"      --tsc-gran N         ticks between TSC packets at least (default 64)\n"
"      --qemu PATH          the qemu-x86_64 to run\n"
"      --engine tcg|log     how qemu says what ran: htr's TCG plugin (tcg,\n"
"                           the default when it is installed: tens of\n"
"                           millions of instructions a second;\n"
"                           $HTR_RECORD_PLUGIN names another) or its exec\n"
"                           log with -singlestep (log: under a million a\n"
"                           second)\n"
"      --no-truth           no truth at all (no OUT.tN.truth, DIR/tN.truth,\n"
"                           --ring truth segments nor snapshot truths):\n"
"                           only the trace, the perf.data and the other\n"
"                           files as without it\n"
"  -q, --quiet              no summary line (nor heartbeat by default)\n"
"  -h, --help               show this help\n";

static const char usage_ring[] =
"\nBounded recording (hangs, long runs):\n"
"      --ring SIZE[K|M|G]   per thread, only the last SIZE bytes of trace\n"
"                           are kept, in files that each start with a PSB+\n"
"                           (the window decodes on its own), so disk and\n"
"                           memory stay bounded whatever the run's length;\n"
"                           OUT holds the last window, OUT.tN.truth the\n"
"                           truth of that window (kept in segments cut with\n"
"                           the trace's, on disk about 40 bytes of text per\n"
"                           trace byte: an 8M ring keeps some 350 MB of\n"
"                           truth; --no-truth keeps only the trace); a\n"
"                           heartbeat line every 5 s on stderr; SIGTERM or\n"
"                           SIGINT to htr stops PROG and writes OUT; not\n"
"                           with --cpus, --raw, --lldb\n"
"      --snapshot-on SIGNAL with --ring: this signal to htr (default USR1:\n"
"                           kill -USR1 PID) writes OUT.snapshot.N.data, the\n"
"                           window at that moment, and its truths\n"
"                           OUT.snapshot.N.data.tN.truth; PROG goes on\n"
"      --snapshot-every N   with --ring: also a snapshot every N instructions\n"
"      --perf-snapshot      with --ring: the snapshots go into OUT as 'perf\n"
"                           record -S' writes them (snapshot mode: each the\n"
"                           last SIZE/2 bytes of the AUX area, overlapping\n"
"                           the one before), the end being the last one;\n"
"                           no truth\n"
"      --heartbeat SECONDS  seconds between heartbeat lines (0: none; with\n"
"                           --ring default 5, else 0): time, instructions\n"
"                           run, trace bytes kept, threads, snapshots\n"
"\n"
"PROG exiting non-zero still gives a complete trace (the summary says so);\n"
"PROG killed by a signal gives no output.\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";


#ifndef HTR_HAVE_RECORD

int cmd_record(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_text, stdout);
			fputs(usage_opts, stdout);
			fputs(usage_ring, stdout);
			return HTR_EXIT_OK;
		}
	return fail("record", "this htr was built without Zydis "
		    "(install libzydis-dev and rebuild)");
}

#else

#include "record.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <strings.h>
#include <sys/resource.h>

static int parse_filter(const char *s, struct rec_filter *f)
{
	uint64_t lo, hi;

	memset(f, 0, sizeof(f[0]));
	if (s[0] >= '0' && s[0] <= '9' && !strchr(s, '/') &&
	    parse_range(s, &lo, &hi) == 0) {
		if (hi <= lo)
			return -1;
		f->start = lo;
		f->end = hi;
		return 0;
	}
	f->module = s;
	return 0;
}

/* SIZE[K|M|G] (binary units).  Returns 0 or -1. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned sh = 0;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case 'k': case 'K': sh = 10; end++; break;
	case 'm': case 'M': sh = 20; end++; break;
	case 'g': case 'G': sh = 30; end++; break;
	default: break;
	}
	if ((*end == 'i' || *end == 'B') && sh)
		end += *end == 'i' ? 1 : 0;
	if (*end == 'B')
		end++;
	if (*end || v > (UINT64_MAX >> 34))
		return -1;
	*out = (uint64_t) v << sh;
	return 0;
}

/* A signal's name (USR1, SIGUSR1, any case) or number; -1 if none. */
static int parse_signal(const char *s)
{
	static const struct {
		const char *name;
		int sig;
	} sigs[] = {
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "HUP", SIGHUP },
		{ "QUIT", SIGQUIT }, { "WINCH", SIGWINCH }, { "URG", SIGURG },
		{ "PWR", SIGPWR },
	};
	size_t i;
	uint64_t v;

	if (!strncasecmp(s, "SIG", 3))
		s += 3;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcasecmp(s, sigs[i].name))
			return sigs[i].sig;
	/* Not the ones htr needs itself (TERM, INT stop; ALRM beats) nor
	 * those that cannot be caught. */
	if (parse_u64(s, &v) == 0 && v > 0 && v < 65 && v != SIGKILL &&
	    v != SIGSTOP && v != SIGTERM && v != SIGINT && v != SIGALRM &&
	    v != SIGCHLD && v != SIGPIPE)
		return (int) v;
	return -1;
}

int cmd_record(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "raw", required_argument, NULL, 'r' },
		{ "lldb", required_argument, NULL, 'L' },
		{ "filter", required_argument, NULL, 'f' },
		{ "psb-period", required_argument, NULL, 'p' },
		{ "no-ret-compression", no_argument, NULL, 'n' },
		{ "tsc-gran", required_argument, NULL, 'g' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "skl014", no_argument, NULL, 'S' },
		{ "qemu", required_argument, NULL, 'Q' },
		{ "engine", required_argument, NULL, 'E' },
		{ "ring", required_argument, NULL, 'R' },
		{ "snapshot-on", required_argument, NULL, 'O' },
		{ "snapshot-every", required_argument, NULL, 'V' },
		{ "perf-snapshot", no_argument, NULL, 'P' },
		{ "heartbeat", required_argument, NULL, 'H' },
		{ "no-truth", no_argument, NULL, 'T' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rec_filter *filters;
	struct rec_result res;
	struct rec_opts o;
	char err[1024];
	size_t nf = 0;
	uint64_t v;
	int c, rc, heartbeat_set = 0;

	rec_opts_init(&o);
	filters = calloc((size_t) argc + 1, sizeof(*filters));
	if (!filters)
		return fail("record", "out of memory");
	optind = 1;
	/* '+': stop at PROG, whose options are its own. */
	while ((c = getopt_long(argc, argv, "+o:qh", lopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			o.out = optarg;
			break;
		case 'r':
			o.raw_dir = optarg;
			break;
		case 'L':
			if (!*optarg) {
				free(filters);
				return usage_error("record", "--lldb: an empty "
						   "directory name");
			}
			o.lldb_dir = optarg;
			break;
		case 'f':
			if (parse_filter(optarg, &filters[nf]) < 0) {
				free(filters);
				return usage_error("record", "--filter %s: "
						   "START-END needs START < END",
						   optarg);
			}
			nf++;
			break;
		case 'p':
			if (parse_u64(optarg, &v) < 0 || v < 256 ||
			    v > (1ull << 30)) {
				free(filters);
				return usage_error("record", "--psb-period: "
						   "a number of bytes from 256 "
						   "to 2^30");
			}
			o.psb_period = v;
			break;
		case 'n':
			o.no_ret_compression = 1;
			break;
		case 'g':
			if (parse_u64(optarg, &v) < 0 || !v) {
				free(filters);
				return usage_error("record", "--tsc-gran: a "
						   "positive number of ticks");
			}
			o.tsc_gran = v;
			break;
		case 'c':
			if (parse_u64(optarg, &v) < 0 || !v || v > 4096) {
				free(filters);
				return usage_error("record", "--cpus: a number "
						   "of CPUs from 1 to 4096");
			}
			o.cpus = (unsigned) v;
			break;
		case 'S':
			o.skl014 = 1;
			break;
		case 'Q':
			o.qemu = optarg;
			break;
		case 'E':
			if (!strcmp(optarg, "tcg")) {
				o.engine = REC_ENGINE_TCG;
			} else if (!strcmp(optarg, "log")) {
				o.engine = REC_ENGINE_LOG;
			} else {
				free(filters);
				return usage_error("record", "--engine: tcg "
						   "or log");
			}
			break;
		case 'R':
			if (parse_size(optarg, &v) < 0 || !v) {
				free(filters);
				return usage_error("record", "--ring %s: a "
						   "size, e.g. 8M", optarg);
			}
			o.ring = v;
			break;
		case 'O':
			if ((o.snapshot_signal = parse_signal(optarg)) <= 0) {
				free(filters);
				return usage_error("record", "--snapshot-on "
						   "%s: a signal (USR1, USR2, "
						   "HUP, ...)", optarg);
			}
			break;
		case 'V':
			if (parse_u64(optarg, &v) < 0 || !v) {
				free(filters);
				return usage_error("record", "--snapshot-every"
						   ": a positive number of "
						   "instructions");
			}
			o.snapshot_every = v;
			break;
		case 'P':
			o.perf_snapshot = 1;
			break;
		case 'H':
			if (parse_u64(optarg, &v) < 0 || v > 86400) {
				free(filters);
				return usage_error("record", "--heartbeat: "
						   "seconds, 0 to 86400");
			}
			o.heartbeat = (unsigned) v;
			heartbeat_set = 1;
			break;
		case 'T':
			o.no_truth = 1;
			break;
		case 'q':
			o.quiet = 1;
			break;
		case 'h':
			free(filters);
			fputs(usage_text, stdout);
			fputs(usage_opts, stdout);
			fputs(usage_ring, stdout);
			return HTR_EXIT_OK;
		default:
			free(filters);
			return usage_error("record", "bad option");
		}
	}
	if (optind >= argc) {
		free(filters);
		return usage_error("record", "no program to record");
	}
	if (o.skl014 && !nf) {
		free(filters);
		return usage_error("record", "--skl014 needs --filter");
	}
	if (o.cpus && o.raw_dir) {
		free(filters);
		return usage_error("record", "--cpus writes a perf.data: not "
				   "with --raw");
	}
	if (o.cpus && o.lldb_dir) {
		free(filters);
		return usage_error("record", "--lldb writes a per-thread "
				   "bundle: not with --cpus");
	}
	if (!o.ring && (o.snapshot_signal || o.snapshot_every ||
			o.perf_snapshot)) {
		free(filters);
		return usage_error("record", "--snapshot-on, --snapshot-every "
				   "and --perf-snapshot need --ring");
	}
	if (o.ring && (o.cpus || o.raw_dir || o.lldb_dir)) {
		free(filters);
		return usage_error("record", "--ring keeps a per-thread "
				   "perf.data: not with --cpus, --raw or "
				   "--lldb");
	}
	if (o.ring && !heartbeat_set && !o.quiet)
		o.heartbeat = 5;
	o.filters = filters;
	o.nfilters = nf;
	rc = rec_run(&o, argv + optind, &res, err, sizeof(err));
	free(filters);
	if (rc < 0)
		return fail("record", "%s", err);
	if (!o.quiet) {
		fprintf(stderr, "htr: record: %s -> %s%s%s%s: %llu insns run, "
			"%llu traced, %u thread%s, %u modules, %llu bytes of "
			"PT, %.2f s, %.2f M insns/s", argv[optind],
			o.raw_dir ? o.raw_dir : o.out,
			o.lldb_dir ? " and " : "",
			o.lldb_dir ? o.lldb_dir : "",
			o.lldb_dir ? "/trace.json" : "",
			(unsigned long long) res.executed,
			(unsigned long long) res.traced, res.threads,
			res.threads == 1 ? "" : "s", res.modules,
			(unsigned long long) res.bytes, res.seconds,
			res.seconds > 0 ? (double) res.executed / res.seconds /
			1e6 : 0.0);
		{
			struct rusage ru;

			/* The recorder's own memory; qemu's is apart. */
			if (getrusage(RUSAGE_SELF, &ru) == 0)
				fprintf(stderr, ", peak RSS %.1f MiB",
					(double) ru.ru_maxrss / 1024.0);
		}
		if (o.ring)
			fprintf(stderr, "; ring %llu bytes per thread: %llu "
				"bytes of trace kept, %u snapshot%s",
				(unsigned long long) o.ring,
				(unsigned long long) res.kept, res.snapshots,
				res.snapshots == 1 ? "" : "s");
		if (res.stopped)
			fprintf(stderr, "; stopped by signal %d (%s): %s "
				"killed, the last window written",
				res.stopped, strsignal(res.stopped),
				argv[optind]);
		else if (res.exit_status)
			fprintf(stderr, "; %s exited with status %d (the "
				"trace is complete)", argv[optind],
				res.exit_status);
		if (res.oddities)
			fprintf(stderr, "; %llu unexplained successors "
				"(recorded as asynchronous disables)",
				(unsigned long long) res.oddities);
		fputc('\n', stderr);
	}
	return HTR_EXIT_OK;
}

#endif
