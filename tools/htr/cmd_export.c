/* htr export: the call tree in formats trace viewers and flame graphs read
 * (the exporters are the library's: htr/export.h). */
#include "cmd.h"

#include "htr/htr.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
"usage: htr export --format chrome|folded|perfetto [-o OUT]\n"
"                  [--block N | --insn ID] [--depth N] [--min-duration T]\n"
"                  [--gaps] [--ticks] [--args] FILE.htr\n"
"\n"
"Write the call tree with each block's time for viewers:\n"
"  chrome    Chrome trace event JSON (Perfetto's UI, chrome://tracing and\n"
"            speedscope open it): a begin (\"B\") and an end (\"E\") event\n"
"            per block, both named after the function alone, so that a\n"
"            viewer groups the calls of a function (speedscope makes\n"
"            each event's args part of its frame's name).  With --args\n"
"            the end events carry the block index, parent, instruction\n"
"            span, flags, local and total: Perfetto's UI and\n"
"            chrome://tracing show them with the slice, speedscope keeps\n"
"            grouping by name (it logs a warning per call).\n"
"  folded    folded stacks (flamegraph.pl, speedscope, inferno): one line\n"
"            per call stack, \"outer;inner;innermost LOCAL\".\n"
"  perfetto  Perfetto's protobuf trace (TrackEvent; ui.perfetto.dev and\n"
"            trace_processor open it), half the JSON's size: a slice\n"
"            (begin and end) per block at chrome's times, the details of\n"
"            --args as debug annotations, names interned, on a thread\n"
"            track with the thread's pid, tid and name under a process\n"
"            track for a perf.data build; only in builds with\n"
"            libprotobuf-c (meson -Dperfetto).\n"
"Times count from the trace's first time point.  The trace tells the\n"
"time only at its time points; in between, chrome and perfetto spread it\n"
"over the instructions by their ID: a block runs from the time of its\n"
"first instruction to that of the one after its last, with instruction\n"
"I between time points A (at ID a) and B (at ID b) at A + (B - A) *\n"
"(I - a) / (b - a), rounded down to the output's unit.  Then each event\n"
"gets a time of its own, one unit after the one before where they would\n"
"meet: every block has a length, and a callee starts after and ends\n"
"before its caller in every viewer, whatever the viewer does with equal\n"
"times (the times run ahead of the trace's by at most that many units).\n"
"For a file built from a perf.data the unit is the ns (chrome: ts in\n"
"microseconds with three decimals, exact as a JSON number; perfetto and\n"
"folded: ns), the events on the thread's pid and tid with its name;\n"
"otherwise (or with --ticks) TSC ticks, which viewers show as\n"
"microseconds (the JSON's otherData says which) or as ns (perfetto: the\n"
"track's name says which).  Folded stacks carry the sidecar's local\n"
"times, uninterpolated.  Names and times come from the sidecar\n"
"FILE.htr.lmdb/, computed on first use.\n"
"\n"
"  -f, --format F       chrome, folded or perfetto\n"
"  -o, --output OUT     write OUT (all or nothing) instead of stdout\n"
"  -b, --block N        only the subtree of block N (an index as find,\n"
"                       top and dump --json print it)\n"
"  -i, --insn ID        only the subtree of the deepest block containing\n"
"                       instruction ID (--from ID: the same)\n"
"  -d, --depth N        N levels at most; deeper time stays with the\n"
"                       block at level N\n"
"  -m, --min-duration T leave out blocks whose total is below T: a\n"
"                       whole number in the output's unit (ns or\n"
"                       ticks), or with ns, us, ms or s (ns output\n"
"                       only); their time stays with their parent\n"
"      --gaps           chrome, perfetto: an instant event at every gap\n"
"      --ticks          times in TSC ticks even when ns are known\n"
"      --args           chrome: each block's details on its end event\n"
"  -h, --help           show this help\n"
"Memory stays bounded: chrome and perfetto stream (they keep the open\n"
"blocks, perfetto 4096 interned names); folded keeps one entry per\n"
"distinct stack up to 2^20 of them, then writes further stacks as they\n"
"come (consumers add up repeated lines).\n"
"perfetto does not write to a terminal.\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

int cmd_export(int argc, char **argv)
{
	enum { O_FROM = 256, O_GAPS, O_TICKS, O_ARGS };
	static const struct option lopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "block", required_argument, NULL, 'b' },
		{ "insn", required_argument, NULL, 'i' },
		{ "from", required_argument, NULL, O_FROM },
		{ "depth", required_argument, NULL, 'd' },
		{ "min-duration", required_argument, NULL, 'm' },
		{ "gaps", no_argument, NULL, O_GAPS },
		{ "ticks", no_argument, NULL, O_TICKS },
		{ "args", no_argument, NULL, O_ARGS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_export_opts eo;
	struct htr_analysis *an = NULL;
	struct htr_file *f = NULL;
	const char *path, *out = NULL, *format = NULL, *dur_arg = NULL;
	char *tmp = NULL;
	FILE *fp = NULL;
	struct place at = { 0, 0 };
	struct units units;
	uint64_t v;
	int c, ticks = 0, rc = HTR_EXIT_FAIL, err;
	int dur_unit = 0;

	htr_export_opts_init(&eo);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":f:o:b:i:d:m:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'f': format = optarg; break;
		case 'o': out = optarg; break;
		case 'b':
			if (place_parse("export", &at, "block", optarg))
				return HTR_EXIT_USAGE;
			break;
		case 'i':
		case O_FROM:
			if (place_parse("export", &at, c == 'i' ? "insn" :
					"from", optarg))
				return HTR_EXIT_USAGE;
			break;
		case 'd':
			if (parse_u64(optarg, &v) < 0 || !v)
				return usage_error("export", "--depth: bad value "
						   "'%s'", optarg);
			eo.max_depth = v;
			break;
		case 'm':
			if (parse_duration(optarg, &eo.min_duration,
					   &dur_unit) < 0)
				return usage_error("export", "--min-duration: bad "
						   "value '%s' (a whole number, "
						   "with ns, us, ms or s)",
						   optarg);
			dur_arg = optarg;
			break;
		case O_GAPS: eo.flags |= HTR_EXPORT_GAPS; break;
		case O_TICKS: ticks = 1; eo.flags |= HTR_EXPORT_TICKS; break;
		case O_ARGS: eo.flags |= HTR_EXPORT_ARGS; break;
		case 'h': fputs(usage_text, stdout); return HTR_EXIT_OK;
		default:
			return option_error("export", c, argv);
		}
	}
	if (optind + 1 != argc)
		return usage_error("export", "expected one FILE.htr");
	if (!format)
		return usage_error("export", "--format is required (chrome, "
				   "folded or perfetto)");
	eo.format = htr_export_format_of(format);
	if (eo.format < 0)
		return usage_error("export", "--format: '%s' is not chrome, "
				   "folded or perfetto", format);
	if (!htr_export_has(eo.format))
		return fail("export", "--format perfetto: this htr was built "
			    "without Perfetto support (it needs libprotobuf-c "
			    "and protoc-c at build time: meson -Dperfetto="
			    "enabled)");
	/* Binary on a terminal helps nobody and can upset it. */
	if (eo.format == HTR_EXPORT_PERFETTO && !out && isatty(STDOUT_FILENO))
		return usage_error("export", "--format perfetto: stdout is a "
				   "terminal; use -o OUT or a redirection");
	path = argv[optind];
	if (open_htr("export", path, NULL, &f) < 0)
		goto out;
	if (open_analysis("export", f, HTR_ANALYZE_ALL, &an) < 0)
		goto out;
	if (place_block("export", path, f, &at, &eo.block))
		goto out;
	units_init(&units, f, ticks);
	/* A duration with a unit needs times in ns. */
	if (dur_unit && !units.ns) {
		rc = usage_error("export", "--min-duration %s: the times of %s "
				 "are TSC ticks (%s): give ticks", dur_arg,
				 path, ticks ? "--ticks" :
				 "no perf clock in the file");
		goto out;
	}
	if (out) {
		size_t n = strlen(out) + 32;

		tmp = malloc(n);
		if (!tmp) {
			rc = fail("export", "out of memory");
			goto out;
		}
		snprintf(tmp, n, "%s.tmp%ld", out, (long) getpid());
		fp = fopen(tmp, "w");
		if (!fp) {
			rc = fail("export", "%s: %s", out, strerror(errno));
			goto out;
		}
	}
	err = htr_export(f, an, out ? fp : stdout, &eo);
	if (err == HTR_ERR_NOMEM) {
		rc = fail("export", "out of memory");
		goto out;
	}
	if (err == HTR_ERR_IO && ferror(out ? fp : stdout)) {
		rc = fail("export", "%s: writing failed", out ? out : "stdout");
		goto out;
	}
	if (err < 0) {
		rc = analysis_fail("export", f, an, err);
		goto out;
	}
	if (out) {
		err = fclose(fp);
		fp = NULL;
		if (err != 0 || rename(tmp, out) < 0) {
			rc = fail("export", "%s: %s", out, strerror(errno));
			goto out;
		}
	}
	rc = HTR_EXIT_OK;
out:
	if (fp)
		fclose(fp);
	if (tmp && rc != HTR_EXIT_OK)
		unlink(tmp);
	free(tmp);
	htr_analysis_close(an);
	htr_file_close(f);
	return rc;
}
