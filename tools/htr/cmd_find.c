/* htr find: the invocations of matching functions with their ticks. */
#include "cmd.h"

#include "htr/htr.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
"usage: htr find [--sort time|cost] [--limit N] [--ticks] [--lines] [--json]\n"
"                PATTERN FILE.htr\n"
"\n"
"List the invocations (blocks) of every function whose name is PATTERN,\n"
"or matches it when PATTERN is a glob (contains *, ? or [), one per line\n"
"(a PATTERN without '!' matches MODULE!NAME by its NAME too: memcpy finds\n"
"libc.so.6!memcpy; with '!', whole names only; one without '@' matches a\n"
"versioned name without its version: memcpy finds memcpy@@GLIBC_2.14,\n"
"and a PLT stub nothing bound, memcpy@plt).  Blocks entered through a\n"
"function that always leads to a matching one are listed too, under\n"
"their own name: another name of the same address, a PLT stub, a tail\n"
"jump its first instructions end in (qsort_r finds libc.so.6!qsort,\n"
"which jumps there):\n"
"  BLOCK  NAME  FIRST..LAST  TOTAL  LOCAL\n"
"BLOCK is the block index, FIRST..LAST its instruction IDs, TOTAL and\n"
"LOCAL its cumulative and local time: ns when the file knows perf's\n"
"clock (built from a perf.data; a first line '# thread TID (pid PID,\n"
"COMM), times in ns' says so), else TSC ticks; JSON gives ticks, and ns\n"
"too (total_ns, local_ns).  Names and times come from the sidecar\n"
"FILE.htr.lmdb/, computed on first use.  With --lines, each text line\n"
"ends in the source position of the block's entry, as htr dump --lines\n"
"prints it.  More than 2^20 invocations to sort (with no limit or a\n"
"larger one) go through an unlinked temporary file in $TMPDIR (or\n"
"/tmp), 40 bytes each, so that find holds about 80 MiB at most.\n"
"\n"
"  -s, --sort KEY  time: chronological (default); cost: largest total first\n"
"  -n, --limit N   print the first N only (0: all, the default)\n"
"      --ticks     times in TSC ticks even when ns are known\n"
"  -l, --lines     append the source position of each block's entry\n"
"                  (needs a build with libdw; not with --json)\n"
"  -j, --json      a JSON array of objects\n"
"  -h, --help      show this help\n"
"A PATTERN that matches no function is said in one line on stderr (exit\n"
"status 0); an empty PATTERN or a glob with an unclosed [ is a usage error.\n"
"exit status: 0 ok (also when nothing matches), 1 failure, 2 usage error\n";

/* Whether every [ of the glob @p has its ] (fnmatch would otherwise take
 * the bracket as a plain character and silently match nothing). */
static int glob_ok(const char *p)
{
	for (; *p; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			continue;
		}
		if (*p != '[')
			continue;
		p++;
		if (*p == '!' || *p == '^')
			p++;
		if (*p == ']')          /* a ] first is a member */
			p++;
		while (*p && *p != ']')
			p++;
		if (!*p)
			return 0;
	}
	return 1;
}

/* What prints the hits htr_find_visit() gives, in its order. */
struct out {
	const struct htr_file *f;
	struct htr_srclines *sl;        /* --lines */
	struct units u;
	int json;
	uint64_t n;
};

static int hit(const struct htr_find_hit *h, void *payload)
{
	struct out *o = payload;
	const struct units *u = &o->u;

	if (o->json) {
		printf("%s\n  {\"block\": %u, \"name\": ", o->n ? "," : "",
		       h->block);
		htr_json_string(stdout, h->name);
		printf(", \"first\": %" PRIu64 ", \"last\": %" PRIu64
		       ", \"total\": %" PRIu64 ", \"local\": %" PRIu64,
		       h->first, h->last, h->total, h->local);
		if (u->ns)
			printf(", \"total_ns\": %" PRIu64 ", \"local_ns\": %"
			       PRIu64, units_of(u, h->total),
			       units_of(u, h->local));
		putchar('}');
	} else {
		const char *at = o->sl && h->where ?
				 htr_srclines_at(o->sl, h->where) : "";

		if (!o->n)
			thread_line(o->f, u);
		printf("%u  %s  %" PRIu64 "..%" PRIu64 "  %" PRIu64 "  %" PRIu64
		       "%s%s\n", h->block, h->name, h->first, h->last,
		       units_of(u, h->total), units_of(u, h->local),
		       *at ? "  " : "", at);
	}
	o->n++;
	return ferror(stdout) ? 1 : 0;
}

int cmd_find(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "sort", required_argument, NULL, 's' },
		{ "limit", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "ticks", no_argument, NULL, 'T' },
		{ "lines", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_file *f = NULL;
	struct htr_analysis *an = NULL;
	struct out o;
	uint64_t limit = 0, v;
	int ch, json = 0, order = HTR_FIND_TIME, ticks = 0, lines = 0;
	int rc = HTR_EXIT_FAIL, mode, got;
	const char *pattern, *path;

	memset(&o, 0, sizeof(o));
	optind = 1;
	opterr = 0;     /* one error line, ours */
	while ((ch = getopt_long(argc, argv, ":s:n:jlh", lopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (!strcmp(optarg, "time"))
				order = HTR_FIND_TIME;
			else if (!strcmp(optarg, "cost"))
				order = HTR_FIND_COST;
			else
				return usage_error("find", "--sort: expected "
						   "time or cost, not '%s'",
						   optarg);
			break;
		case 'n':
			if (parse_u64(optarg, &v) < 0)
				return usage_error("find", "--limit: bad value "
						   "'%s'", optarg);
			limit = v;
			break;
		case 'j': json = 1; break;
		case 'T': ticks = 1; break;
		case 'l': lines = 1; break;
		case 'h': fputs(usage_text, stdout); return HTR_EXIT_OK;
		default:
			return option_error("find", ch, argv);
		}
	}
	if (optind + 2 != argc)
		return usage_error("find", "expected PATTERN and FILE.htr");
	pattern = argv[optind];
	path = argv[optind + 1];
	if (!pattern[0])
		return usage_error("find", "PATTERN is empty");
	if (lines && json)
		return usage_error("find", "--lines: not with --json");
	if (lines && !htr_srclines_supported())
		return fail("find", "--lines: this htr was built without libdw "
			    "(elfutils), so it reads no source lines");
	if (!glob_ok(pattern))
		return usage_error("find", "'%s': a [ without its ] in the glob",
				   pattern);
	if (open_htr("find", path, NULL, &f) < 0)
		goto out;
	if (open_analysis("find", f, HTR_ANALYZE_ALL, &an) < 0)
		goto out;
	if (lines) {
		int e = htr_srclines_open(&o.sl, f);

		if (e < 0) {
			rc = fail("find", "--lines: %s", htr_errstr(e));
			goto out;
		}
	}
	o.f = f;
	o.json = json;
	units_init(&o.u, f, ticks);
	mode = strpbrk(pattern, "*?[") ? HTR_MATCH_GLOB : HTR_MATCH_EXACT;
	if (json)
		printf("[");
	got = htr_find_visit(f, an, pattern, mode, order, limit, hit, &o);
	if (got == HTR_ERR_NOTFOUND)
		fprintf(stderr, "htr: find: %s: no function matches '%s'\n",
			path, pattern);
	else if (got == HTR_ERR_IO && errno) {
		const char *tmp = getenv("TMPDIR");

		rc = fail("find", "%s: sorting the hits in a temporary file "
			  "in %s: %s", path, tmp && *tmp ? tmp : "/tmp",
			  strerror(errno));
		goto out;
	} else if (got < 0) {
		rc = analysis_fail("find", f, an, got);
		goto out;
	}
	if (json)
		printf("%s]\n", o.n ? "\n" : "");
	if (fflush(stdout) != 0 || ferror(stdout)) {
		rc = fail("find", "writing output failed");
		goto out;
	}
	rc = HTR_EXIT_OK;
out:
	htr_srclines_free(o.sl);
	htr_analysis_close(an);
	htr_file_close(f);
	return rc;
}
