/* htr info: header fields and counts. */
#include "cmd.h"

#include "htr/htr.h"

#include <getopt.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

static const char usage_text[] =
"usage: htr info [--verify] FILE.htr\n"
"\n"
"Print the file's format version, the identity of the trace it was built\n"
"from, and its counts: instructions, blocks, roots, depth, functions, gaps,\n"
"time points, sync points, file size and bytes per block.  The time the\n"
"trace spans is given in TSC ticks and, for a file built from a perf.data,\n"
"as the thread it is, on perf's clock in ns, and on the wall clock when the\n"
"recording says how (perf record -k CLOCK writes that reference).\n"
"\n"
"  -v, --verify    also check the checksum of every section\n"
"  -h, --help      show this help\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

/* The time the trace spans: ticks, perf's clock, the wall clock. */
static void print_time(const struct htr_file *f)
{
	struct htr_thread_info ti;
	uint64_t n = htr_tsc_count(f), id, t0, t1, ns0, ns1;
	int thread = htr_file_thread(f, &ti, sizeof(ti)) == 0;

	if (thread)
		printf("thread:          %u (pid %u, %s)\n", ti.tid, ti.pid,
		       ti.comm[0] ? ti.comm : "?");
	if (!n || htr_tsc_point(f, 0, &id, &t0) < 0 ||
	    htr_tsc_point(f, n - 1, &id, &t1) < 0 || t1 < t0) {
		printf("time:            unknown (no time points)\n");
		return;
	}
	printf("time:            TSC %" PRIu64 "..%" PRIu64 " (%" PRIu64
	       " ticks)\n", t0, t1, t1 - t0);
	if (htr_tsc_to_ns(f, t0, &ns0) < 0 || htr_tsc_to_ns(f, t1, &ns1) < 0) {
		if (thread)
			printf("clock:           unknown (the recording has no "
			       "TSC conversion)\n");
		return;
	}
	printf("clock:           perf time %" PRIu64 ".%09" PRIu64 "..%" PRIu64
	       ".%09" PRIu64 " s, duration %.6f s\n", ns0 / 1000000000u,
	       ns0 % 1000000000u, ns1 / 1000000000u, ns1 % 1000000000u,
	       (double) (ns1 - ns0) / 1e9);
	if (ti.flags & HTR_THREAD_WALL) {
		/* The wall clock advanced as perf's clock did. */
		uint64_t w = ns0 >= ti.clock_ns ? ti.wall_ns + (ns0 - ti.clock_ns) :
			     ti.wall_ns - (ti.clock_ns - ns0);
		time_t sec = (time_t) (w / 1000000000u);
		char when[64];

		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime(&sec));
		printf("wall clock:      started %s.%06" PRIu64 " UTC\n", when,
		       (w % 1000000000u) / 1000u);
	} else {
		printf("wall clock:      unknown (perf record -k CLOCK records "
		       "it)\n");
	}
}

int cmd_info(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "verify", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_open_opts oo;
	struct htr_file *f = NULL;
	struct htr_file_info in;
	char when[64];
	time_t t;
	int c, err, rc = HTR_EXIT_FAIL;
	const char *path;

	htr_open_opts_init(&oo);
	optind = 1;
	opterr = 0;     /* one error line, ours */
	while ((c = getopt_long(argc, argv, ":vh", lopts, NULL)) != -1) {
		switch (c) {
		case 'v': oo.verify_body = 1; break;
		case 'h': fputs(usage_text, stdout); return HTR_EXIT_OK;
		default:
			/* Not argv[optind - 1]: inside "-x y.htr" getopt has
			 * not moved past the word, and that is "info". */
			return option_error("info", c, argv);
		}
	}
	if (optind + 1 != argc)
		return usage_error("info", "expected one FILE.htr");
	path = argv[optind];
	if (open_htr("info", path, &oo, &f) < 0)
		goto out;
	memset(&in, 0, sizeof(in));
	in.size = sizeof(in);
	err = htr_file_info(f, &in, sizeof(in));
	if (err < 0) {
		rc = fail("info", "%s: %s", path, htr_errstr(err));
		goto out;
	}
	t = (time_t) in.build_time;
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
	printf("file:            %s\n", path);
	printf("format version:  %u\n", in.version);
	printf("built:           %s with libipt %u.%u.%u\n", when,
	       in.libipt_version[0], in.libipt_version[1], in.libipt_version[2]);
	printf("trace:           %" PRIu64 " bytes, hash %016" PRIx64 "\n",
	       in.trace_size, in.trace_hash);
	printf("image:           %" PRIu64 " pieces, hash %016" PRIx64 "\n",
	       in.nimages, in.image_hash);
	printf("instructions:    %" PRIu64 "\n", in.ninsns);
	printf("blocks:          %" PRIu64 " (%" PRIu64 " roots, depth %u)\n",
	       in.nblocks, in.nroots, in.max_depth);
	printf("functions:       %" PRIu64 "\n", in.nfuncs);
	printf("gaps:            %" PRIu64 "\n", in.ngaps);
	printf("time points:     %" PRIu64 "\n", in.ntsc);
	printf("sync points:     %" PRIu64 "\n", in.nsync);
	print_time(f);
	printf("file size:       %" PRIu64 " bytes (%.1f per block)\n",
	       in.file_size, in.nblocks ? (double) in.file_size /
	       (double) in.nblocks : 0.0);
	printf("checksum:        %s\n", oo.verify_body ? "verified" :
	       "header only (use --verify for all sections)");
	rc = HTR_EXIT_OK;
out:
	htr_file_close(f);
	return rc;
}
