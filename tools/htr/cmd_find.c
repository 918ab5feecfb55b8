/* htr find: the invocations of matching functions with their ticks. */
#include "cmd.h"

#include "htr/htr.h"

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
"prints it.\n"
"\n"
"  -s, --sort KEY  time: chronological (default); cost: largest total first\n"
"  -n, --limit N   print the first N only\n"
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

struct hit {
	uint32_t block;
	const char *name;
	uint64_t first, last, total, local;
	uint64_t where;         /* block_where() */
};

struct collect {
	const struct htr_file *f;
	struct htr_analysis *an;
	struct hit *v;
	size_t n, cap;
	int err;
};

static int add(const char *name, uint32_t block, void *payload)
{
	struct collect *c = payload;
	struct htr_block_info bi;
	struct hit *h;
	int rc;

	if (c->n == c->cap) {
		size_t nc = c->cap ? 2 * c->cap : 256;
		struct hit *nv = realloc(c->v, nc * sizeof(*nv));

		if (!nv) {
			c->err = HTR_ERR_NOMEM;
			return 1;
		}
		c->v = nv;
		c->cap = nc;
	}
	h = &c->v[c->n];
	bi.size = sizeof(bi);
	rc = htr_block_get(c->f, block, &bi, sizeof(bi));
	if (rc == 0)
		rc = htr_tsc_get(c->an, block, &h->total, NULL, &h->local);
	if (rc < 0) {
		c->err = rc;
		return 1;
	}
	h->block = block;
	h->name = name;
	h->first = bi.first;
	h->last = bi.last;
	h->where = block_where(&bi);
	c->n++;
	return 0;
}

static int by_time(const void *x, const void *y)
{
	const struct hit *a = x, *b = y;

	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	/* Same first instruction: the outer block (ends later) first; same
	 * span (a call into untraced code and its one callback): the outer
	 * one comes later in post-order. */
	if (a->last != b->last)
		return a->last > b->last ? -1 : 1;
	return a->block > b->block ? -1 : a->block < b->block;
}

static int by_cost(const void *x, const void *y)
{
	const struct hit *a = x, *b = y;

	if (a->total != b->total)
		return a->total > b->total ? -1 : 1;
	return by_time(x, y);
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
	struct collect c;
	struct htr_srclines *sl = NULL;
	uint64_t limit = UINT64_MAX, v;
	size_t i, n;
	struct units u;
	int ch, json = 0, cost = 0, ticks = 0, lines = 0, rc = HTR_EXIT_FAIL;
	int mode;
	int got;
	const char *pattern, *path;

	memset(&c, 0, sizeof(c));
	optind = 1;
	opterr = 0;     /* one error line, ours */
	while ((ch = getopt_long(argc, argv, ":s:n:jlh", lopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (!strcmp(optarg, "time"))
				cost = 0;
			else if (!strcmp(optarg, "cost"))
				cost = 1;
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
	if (open_analysis("find", f, HTR_ANALYZE_ALL, &c.an) < 0)
		goto out;
	if (lines) {
		int e = htr_srclines_open(&sl, f);

		if (e < 0) {
			rc = fail("find", "--lines: %s", htr_errstr(e));
			goto out;
		}
	}
	c.f = f;
	mode = strpbrk(pattern, "*?[") ? HTR_MATCH_GLOB : HTR_MATCH_EXACT;
	got = htr_symidx_find(c.an, pattern, mode, add, &c);
	if (c.err) {
		rc = c.err == HTR_ERR_NOMEM ? fail("find", "out of memory") :
		     analysis_fail("find", f, c.an, c.err);
		goto out;
	}
	if (got < 0 && got != HTR_ERR_NOTFOUND) {
		rc = analysis_fail("find", f, c.an, got);
		goto out;
	}
	if (got == HTR_ERR_NOTFOUND)
		fprintf(stderr, "htr: find: %s: no function matches '%s'\n",
			path, pattern);
	if (c.n)
		qsort(c.v, c.n, sizeof(*c.v), cost ? by_cost : by_time);
	n = c.n < limit ? c.n : (size_t) limit;
	units_init(&u, f, ticks);
	if (json)
		printf("[");
	else if (n)
		thread_line(f, &u);
	for (i = 0; i < n; i++) {
		const struct hit *h = &c.v[i];

		if (json) {
			printf("%s\n  {\"block\": %u, \"name\": ", i ? "," : "",
			       h->block);
			json_string(stdout, h->name);
			printf(", \"first\": %" PRIu64 ", \"last\": %" PRIu64
			       ", \"total\": %" PRIu64 ", \"local\": %" PRIu64,
			       h->first, h->last, h->total, h->local);
			if (u.ns)
				printf(", \"total_ns\": %" PRIu64 ", "
				       "\"local_ns\": %" PRIu64,
				       units_of(&u, h->total),
				       units_of(&u, h->local));
			putchar('}');
		} else {
			const char *at = sl && h->where ?
					 htr_srclines_at(sl, h->where) : "";

			printf("%u  %s  %" PRIu64 "..%" PRIu64 "  %" PRIu64
			       "  %" PRIu64 "%s%s\n", h->block, h->name,
			       h->first, h->last, units_of(&u, h->total),
			       units_of(&u, h->local), *at ? "  " : "", at);
		}
	}
	if (json)
		printf("%s]\n", n ? "\n" : "");
	if (fflush(stdout) != 0 || ferror(stdout)) {
		rc = fail("find", "writing output failed");
		goto out;
	}
	rc = HTR_EXIT_OK;
out:
	htr_srclines_free(sl);
	free(c.v);
	htr_analysis_close(c.an);
	htr_file_close(f);
	return rc;
}
