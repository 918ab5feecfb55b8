/* htr top: per-function calls and TSC ticks. */
#include "cmd.h"

#include "htr/htr.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
"usage: htr top [--sort local|inclusive|calls] [--limit N] [--ticks] [--json]\n"
"               FILE.htr\n"
"\n"
"Per function, one line, largest LOCAL first (where the program's own\n"
"time went; --sort inclusive puts the outer functions that only pass\n"
"time on, such as the loader's start-up chain and main, first):\n"
"  INCLUSIVE  LOCAL  CALLS  SLOWEST  NAME\n"
"INCLUSIVE: time of its invocations, recursion counted once (an\n"
"invocation inside another of the same function adds nothing); LOCAL:\n"
"time spent in the function itself; CALLS: invocations; SLOWEST: the\n"
"block index of its invocation with the largest total.  Times are in ns\n"
"when the file knows perf's clock (built from a perf.data; a first line\n"
"'# thread TID (pid PID, COMM), times in ns' says so), else TSC ticks;\n"
"JSON gives ticks, and ns too (inclusive_ns, local_ns, slowest_total_ns).\n"
"Reads only the per-function table of the sidecar FILE.htr.lmdb/\n"
"(computed on first use).\n"
"\n"
"  -s, --sort KEY  local (default), inclusive or calls\n"
"  -n, --limit N   print N functions at most (default 20; 0: all)\n"
"      --ticks     times in TSC ticks even when ns are known\n"
"  -j, --json      a JSON array of objects\n"
"  -h, --help      show this help\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

/* What prints the rows htr_top_visit() gives, in its order. */
struct out {
	const struct htr_file *f;
	struct units u;
	int json;
	uint64_t n;
};

static int row(const struct htr_func_stats *r, void *payload)
{
	struct out *o = payload;
	const struct units *u = &o->u;

	if (o->json) {
		printf("%s\n  {\"name\": ", o->n ? "," : "");
		htr_json_string(stdout, r->name);
		printf(", \"calls\": %" PRIu64 ", \"inclusive\": %" PRIu64
		       ", \"local\": %" PRIu64 ", \"slowest\": %u, "
		       "\"slowest_total\": %" PRIu64, r->calls, r->inclusive,
		       r->local, r->slowest, r->slowest_total);
		if (u->ns)
			printf(", \"inclusive_ns\": %" PRIu64 ", "
			       "\"local_ns\": %" PRIu64 ", "
			       "\"slowest_total_ns\": %" PRIu64,
			       units_of(u, r->inclusive), units_of(u, r->local),
			       units_of(u, r->slowest_total));
		putchar('}');
	} else {
		if (!o->n) {
			thread_line(o->f, u);
			printf("%14s %14s %10s %10s  %s\n", "INCLUSIVE", "LOCAL",
			       "CALLS", "SLOWEST", "NAME");
		}
		printf("%14" PRIu64 " %14" PRIu64 " %10" PRIu64 " %10u  %s\n",
		       units_of(u, r->inclusive), units_of(u, r->local),
		       r->calls, r->slowest, r->name);
	}
	o->n++;
	return ferror(stdout) ? 1 : 0;
}

int cmd_top(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "sort", required_argument, NULL, 's' },
		{ "limit", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "ticks", no_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_file *f = NULL;
	struct htr_analysis *an = NULL;
	struct out o;
	uint64_t limit = 20, v;
	int ch, json = 0, ticks = 0, rc = HTR_EXIT_FAIL;
	int got, key = HTR_TOP_LOCAL;
	const char *path;

	optind = 1;
	opterr = 0;     /* one error line, ours */
	while ((ch = getopt_long(argc, argv, ":s:n:jh", lopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (!strcmp(optarg, "inclusive"))
				key = HTR_TOP_INCLUSIVE;
			else if (!strcmp(optarg, "local"))
				key = HTR_TOP_LOCAL;
			else if (!strcmp(optarg, "calls"))
				key = HTR_TOP_CALLS;
			else
				return usage_error("top", "--sort: expected "
						   "local, inclusive or calls, "
						   "not '%s'", optarg);
			break;
		case 'n':
			if (parse_u64(optarg, &v) < 0)
				return usage_error("top", "--limit: bad value "
						   "'%s'", optarg);
			limit = v;      /* 0: all, as htr_top_visit() takes it */
			break;
		case 'j': json = 1; break;
		case 'T': ticks = 1; break;
		case 'h': fputs(usage_text, stdout); return HTR_EXIT_OK;
		default:
			return option_error("top", ch, argv);
		}
	}
	if (optind + 1 != argc)
		return usage_error("top", "expected one FILE.htr");
	path = argv[optind];
	if (open_htr("top", path, NULL, &f) < 0)
		goto out;
	if (open_analysis("top", f, HTR_ANALYZE_ALL, &an) < 0)
		goto out;
	memset(&o, 0, sizeof(o));
	o.f = f;
	o.json = json;
	units_init(&o.u, f, ticks);
	if (json)
		printf("[");
	got = htr_top_visit(an, NULL, HTR_MATCH_GLOB, key, limit, row, &o);
	if (got < 0 && got != HTR_ERR_NOTFOUND) {
		rc = analysis_fail("top", f, an, got);
		goto out;
	}
	if (json)
		printf("%s]\n", o.n ? "\n" : "");
	if (fflush(stdout) != 0 || ferror(stdout)) {
		rc = fail("top", "writing output failed");
		goto out;
	}
	rc = HTR_EXIT_OK;
out:
	htr_analysis_close(an);
	htr_file_close(f);
	return rc;
}
