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

struct row {
	const char *name;
	uint64_t calls, inclusive, local, slowest_total;
	uint32_t slowest;
};

struct collect {
	struct row *v;
	size_t n, cap;
};

static int add(const struct htr_func_stats *st, void *payload)
{
	struct collect *c = payload;
	struct row *r;

	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 256;
		struct row *nv = realloc(c->v, nc * sizeof(*nv));

		if (!nv)
			return 1;       /* stop: out of memory */
		c->v = nv;
		c->cap = nc;
	}
	r = &c->v[c->n++];
	r->name = st->name;
	r->calls = st->calls;
	r->inclusive = st->inclusive;
	r->local = st->local;
	r->slowest = st->slowest;
	r->slowest_total = st->slowest_total;
	return 0;
}

/* Largest first, then by name: one comparator per --sort key (qsort
 * passes no context, and a global would hold the key). */
static int by_key(uint64_t ka, uint64_t kb, const struct row *a,
		  const struct row *b)
{
	if (ka != kb)
		return ka > kb ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int cmp_inclusive(const void *x, const void *y)
{
	const struct row *a = x, *b = y;

	return by_key(a->inclusive, b->inclusive, a, b);
}

static int cmp_local(const void *x, const void *y)
{
	const struct row *a = x, *b = y;

	return by_key(a->local, b->local, a, b);
}

static int cmp_calls(const void *x, const void *y)
{
	const struct row *a = x, *b = y;

	return by_key(a->calls, b->calls, a, b);
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
	struct collect c;
	uint64_t limit = 20, v;
	size_t i, n;
	struct units u;
	int ch, json = 0, ticks = 0, rc = HTR_EXIT_FAIL;
	int got;
	const char *path;
	int (*cmp)(const void *, const void *) = cmp_local;

	memset(&c, 0, sizeof(c));
	optind = 1;
	opterr = 0;     /* one error line, ours */
	while ((ch = getopt_long(argc, argv, ":s:n:jh", lopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (!strcmp(optarg, "inclusive"))
				cmp = cmp_inclusive;
			else if (!strcmp(optarg, "local"))
				cmp = cmp_local;
			else if (!strcmp(optarg, "calls"))
				cmp = cmp_calls;
			else
				return usage_error("top", "--sort: expected "
						   "local, inclusive or calls, "
						   "not '%s'", optarg);
			break;
		case 'n':
			if (parse_u64(optarg, &v) < 0)
				return usage_error("top", "--limit: bad value "
						   "'%s'", optarg);
			limit = v ? v : UINT64_MAX;
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
	got = htr_func_visit(an, NULL, HTR_MATCH_GLOB, add, &c);
	if (got == 1) {
		rc = fail("top", "out of memory");
		goto out;
	}
	if (got < 0 && got != HTR_ERR_NOTFOUND) {
		rc = analysis_fail("top", f, an, (int) got);
		goto out;
	}
	if (c.n)
		qsort(c.v, c.n, sizeof(*c.v), cmp);
	n = c.n < limit ? c.n : (size_t) limit;
	units_init(&u, f, ticks);
	if (json) {
		printf("[");
	} else if (n) {
		thread_line(f, &u);
		printf("%14s %14s %10s %10s  %s\n", "INCLUSIVE", "LOCAL",
		       "CALLS", "SLOWEST", "NAME");
	}
	for (i = 0; i < n; i++) {
		const struct row *r = &c.v[i];

		if (json) {
			printf("%s\n  {\"name\": ", i ? "," : "");
			json_string(stdout, r->name);
			printf(", \"calls\": %" PRIu64 ", \"inclusive\": %" PRIu64
			       ", \"local\": %" PRIu64 ", \"slowest\": %u, "
			       "\"slowest_total\": %" PRIu64, r->calls,
			       r->inclusive, r->local, r->slowest,
			       r->slowest_total);
			if (u.ns)
				printf(", \"inclusive_ns\": %" PRIu64 ", "
				       "\"local_ns\": %" PRIu64 ", "
				       "\"slowest_total_ns\": %" PRIu64,
				       units_of(&u, r->inclusive),
				       units_of(&u, r->local),
				       units_of(&u, r->slowest_total));
			putchar('}');
		} else {
			printf("%14" PRIu64 " %14" PRIu64 " %10" PRIu64
			       " %10u  %s\n", units_of(&u, r->inclusive),
			       units_of(&u, r->local), r->calls,
			       r->slowest, r->name);
		}
	}
	if (json)
		printf("%s]\n", n ? "\n" : "");
	if (fflush(stdout) != 0 || ferror(stdout)) {
		rc = fail("top", "writing output failed");
		goto out;
	}
	rc = HTR_EXIT_OK;
out:
	free(c.v);
	htr_analysis_close(an);
	htr_file_close(f);
	return rc;
}
