/* htr dump: print the call tree. */
#include "cmd.h"

#include "htr/htr.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
"usage: htr dump [--tsc [--ticks]] [--lines] [--depth N]\n"
"                [--block N | --insn ID] [--json] FILE.htr\n"
"\n"
"Print the call tree, one line per block, indented by depth (two spaces a\n"
"level; from level 64 on, 128 spaces and the level in brackets, '[70] ',\n"
"so that deep recursion does not make the output quadratic):\n"
"  FIRST..LAST  ENTRY  FLAGS\n"
"FIRST and LAST are instruction IDs, ENTRY the function's entry address\n"
"('?' when it was never traced: the trace began inside the function, or\n"
"the call went into untraced code), FLAGS any of late, truncated, gap,\n"
"implicit-return, unwound (docs/tree-rules.md).  A file built from a\n"
"perf.data starts with a line '# thread TID (pid PID, COMM)'.\n"
"With --tsc, each line is instead, under a header line (starting with\n"
"'#') that names the columns and the time unit,\n"
"  NAME  LOCAL  TOTAL  PCT%\n"
"NAME the function: for a late block '~' and the function containing the\n"
"first address it ran (inferred), '?' where nothing is known; LOCAL and\n"
"TOTAL its local and\n"
"cumulative time, PCT its total as a share of the total of the\n"
"outermost block printed above it.  Times are in ns when the file knows\n"
"perf's clock (built from a perf.data), else TSC ticks.  The figures\n"
"come from the sidecar FILE.htr.lmdb/, computed on first use.  JSON\n"
"objects give ticks (local, children, total) and the TSC at the first\n"
"and last instruction (start, end; null before the first time point);\n"
"with perf's clock, ns too (local_ns, ..., start_ns and end_ns on\n"
"perf's clock, as perf script --ns prints it).\n"
"With --lines, text lines end in one more field, after two spaces: where\n"
"the block's entry (for a late block, the first address it ran) is in the\n"
"source, from the module's DWARF,\n"
"  at FILE:LINE [inlined: INNER <- ... <- FUNCTION at FILE:LINE]\n"
"the bracket only in inlined code, its frames innermost first, each after\n"
"the first with its call site (what addr2line -i -f -s prints).  No field\n"
"where nothing is known.\n"
"\n"
"  -t, --tsc       print names and times\n"
"      --ticks     times in TSC ticks even when ns are known\n"
"  -d, --depth N   print N levels at most (1: roots only)\n"
"  -b, --block N   print the subtree of block N (an index as find, top\n"
"                  and --json print it)\n"
"  -i, --insn ID   print the subtree of the deepest block containing\n"
"                  instruction ID (an ID as gaps and insns print it;\n"
"                  --from ID is the same)\n"
"  -l, --lines     append the source position of each block's entry\n"
"                  (needs a build with libdw; not with --json)\n"
"  -j, --json      one JSON object per block, in a JSON array\n"
"  -h, --help      show this help\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

/* Text lines are made by the library's htr_text_*() straight into a
 * large output buffer: with 10^7 blocks, stdio's per-field formatting
 * would be most of the time of a dump. */
struct line {
	char buf[1 << 16];
	size_t n;
};

static void l_flush(struct line *l)
{
	fwrite(l->buf, 1, l->n, stdout);
	l->n = 0;
}

static inline void l_mem(struct line *l, const char *s, size_t n)
{
	if (n > sizeof(l->buf) - l->n)
		l_flush(l);
	if (n > sizeof(l->buf)) {
		fwrite(s, 1, n, stdout);
		return;
	}
	memcpy(l->buf + l->n, s, n);
	l->n += n;
}

/* What one htr_text_*() call makes. */
struct text {
	int times;              /* htr_text_times(), else htr_text_block() */
	uint32_t level;
	const struct htr_block_info *bi;
	const char *name;
	uint64_t local, total, part, whole;
};

static size_t text(char *buf, size_t size, const struct text *t)
{
	return t->times ? htr_text_times(buf, size, t->level, t->name,
					 t->local, t->total, t->part, t->whole)
			: htr_text_block(buf, size, t->level, t->bi);
}

/* Add @t's line to @l: in place when it fits, else after a flush, else
 * (a name of kilobytes) through a buffer of its own. */
static void l_text(struct line *l, const struct text *t)
{
	size_t need = text(l->buf + l->n, sizeof(l->buf) - l->n, t);
	char *big;

	if (need < sizeof(l->buf) - l->n) {
		l->n += need;
		return;
	}
	l_flush(l);
	need = text(l->buf, sizeof(l->buf), t);
	if (need < sizeof(l->buf)) {
		l->n = need;
		return;
	}
	big = malloc(need + 1);
	if (big) {
		text(big, need + 1, t);
		fwrite(big, 1, need, stdout);
		free(big);
	}
}

static void l_str(struct line *l, const char *s)
{
	l_mem(l, s, strlen(s));
}

/* A string literal, its length known at compile time. */
#define l_lit(l, s) l_mem((l), (s), sizeof(s) - 1)

static void l_u64(struct line *l, uint64_t v)
{
	char d[20], *p = d + sizeof(d);

	do
		*--p = (char) ('0' + v % 10);
	while (v /= 10);
	l_mem(l, p, (size_t) (d + sizeof(d) - p));
}

/* @part as a percentage of @whole (all of it when @whole is 0), two
 * decimals as printf's %.2f rounds them. */
static void l_pct(struct line *l, uint64_t part, uint64_t whole)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "%.2f", whole ? 100.0 * (double) part /
						      (double) whole : 100.0);

	l_mem(l, b, n > 0 ? (size_t) n : 0);
}

/* A JSON string: the library's writer where a character needs escaping
 * (rare in symbol names), straight into the buffer otherwise. */
static void l_json_str(struct line *l, const char *s)
{
	const unsigned char *p;

	for (p = (const unsigned char *) s; *p; p++)
		if (*p < 0x20 || *p == '"' || *p == '\\')
			break;
	if (*p) {
		l_flush(l);
		htr_json_string(stdout, s);
		return;
	}
	l_mem(l, "\"", 1);
	l_mem(l, s, (size_t) ((const char *) p - s));
	l_mem(l, "\"", 1);
}

/* ", KEY: " */
static void l_key(struct line *l, const char *key)
{
	l_lit(l, ", \"");
	l_str(l, key);
	l_lit(l, "\": ");
}

/* ", KEY: V", or ", KEY: null" when V is not @known. */
static void l_num(struct line *l, const char *key, int known, uint64_t v)
{
	l_key(l, key);
	if (known)
		l_u64(l, v);
	else
		l_lit(l, "null");
}

/* ", KEY: TSC" at instruction @id (null when no time is known yet), and
 * ", KEY_NS: NS" on perf's clock when @u is in ns. */
static void json_time(struct line *l, const struct htr_file *f,
		      const struct units *u, const char *key,
		      const char *key_ns, uint64_t id)
{
	uint64_t tsc, ns = 0;
	int known = htr_tsc_for_insn(f, id, &tsc) == 0;

	l_num(l, key, known, tsc);
	if (!u->ns || (known && htr_tsc_to_ns(f, tsc, &ns) < 0))
		return;
	l_num(l, key_ns, known, ns);
}

/* A block's JSON object up to its first field: "{"block": N". */
static void l_object(struct line *l, uint64_t n, uint32_t block)
{
	if (n)
		l_lit(l, ",");
	l_lit(l, "\n  {\"block\": ");
	l_u64(l, block);
}

struct dump {
	uint64_t max_level;   /* UINT64_MAX: no limit */
	int json;
	struct htr_analysis *an;   /* --tsc */
	struct units units;
	uint64_t top_total;        /* total of the level-0 block */
	int an_error;
	int err;              /* what stopped the walk (negative htr_error) */
	uint64_t n;
	int io_error;
	struct line line;     /* --tsc text output */
	struct htr_srclines *lines;     /* --lines */
};

/* "  LOCATION" of @bi with --lines, else "" (also when nothing is known). */
static const char *where_field(struct dump *d, const struct htr_block_info *bi,
			       char *buf, size_t size)
{
	uint64_t a = d->lines ? htr_block_where(bi) : 0;
	const char *at = a ? htr_srclines_at(d->lines, a) : "";

	if (!*at)
		return "";
	snprintf(buf, size, "  %s", at);
	return buf;
}

static int visit(const struct htr_file *f, uint32_t block, uint32_t parent,
		 uint32_t level, void *payload)
{
	struct dump *d = payload;
	struct htr_block_info bi;
	char flags[64], entry[24], where[600];
	int rc;

	(void) parent;
	if (level >= d->max_level)
		return HTR_VISIT_SKIP;
	bi.size = sizeof(bi);
	rc = htr_block_get(f, block, &bi, sizeof(bi));
	if (rc < 0) {
		/* Callbacks stop a walk with a positive value. */
		d->err = rc;
		return 1;
	}
	if (d->an && !d->json) {
		struct text t = { 1, 0, NULL, NULL, 0, 0, 0, 0 };
		uint64_t total, children, local;
		const char *name;

		rc = htr_tsc_get(d->an, block, &total, &children, &local);
		if (rc == 0)
			rc = htr_block_name(d->an, block, &name);
		if (rc < 0) {
			d->an_error = 1;
			return 1;
		}
		if (level == 0)
			d->top_total = total;
		t.level = level;
		t.name = name;
		t.local = units_of(&d->units, local);
		t.total = units_of(&d->units, total);
		t.part = total;
		t.whole = d->top_total;
		l_text(&d->line, &t);
		l_str(&d->line, where_field(d, &bi, where, sizeof(where)));
		l_mem(&d->line, "\n", 1);
		d->n++;
		return 0;
	}
	htr_block_flags_str(bi.flags, flags, sizeof(flags));
	/* Late blocks and calls whose entry was never traced alike. */
	if (bi.func == HTR_NONE)
		snprintf(entry, sizeof(entry), "?");
	else
		snprintf(entry, sizeof(entry), "0x%" PRIx64, bi.entry);
	if (d->an) {
		uint64_t total, children, local;
		const char *name;

		rc = htr_tsc_get(d->an, block, &total, &children, &local);
		if (rc == 0)
			rc = htr_block_name(d->an, block, &name);
		if (rc < 0) {
			d->an_error = 1;
			return 1;
		}
		if (level == 0)
			d->top_total = total;
		l_object(&d->line, d->n, block);
		l_num(&d->line, "level", 1, level);
		l_key(&d->line, "name");
		l_json_str(&d->line, name);
		l_num(&d->line, "first", 1, bi.first);
		l_num(&d->line, "last", 1, bi.last);
		l_num(&d->line, "local", 1, local);
		l_num(&d->line, "children", 1, children);
		l_num(&d->line, "total", 1, total);
		l_key(&d->line, "pct");
		l_pct(&d->line, total, d->top_total);
		l_key(&d->line, "flags");
		l_json_str(&d->line, flags);
		if (d->units.ns) {
			l_num(&d->line, "local_ns", 1,
			      units_of(&d->units, local));
			l_num(&d->line, "children_ns", 1,
			      units_of(&d->units, children));
			l_num(&d->line, "total_ns", 1,
			      units_of(&d->units, total));
		}
		json_time(&d->line, f, &d->units, "start", "start_ns",
			  bi.first);
		json_time(&d->line, f, &d->units, "end", "end_ns", bi.last);
		l_lit(&d->line, "}");
	} else if (d->json) {
		l_object(&d->line, d->n, block);
		l_num(&d->line, "parent", bi.parent != HTR_NONE, bi.parent);
		l_num(&d->line, "level", 1, level);
		l_num(&d->line, "first", 1, bi.first);
		l_num(&d->line, "last", 1, bi.last);
		l_key(&d->line, "entry");
		if (bi.func == HTR_NONE)
			l_lit(&d->line, "null");
		else
			l_json_str(&d->line, entry);
		l_num(&d->line, "children", 1, bi.nchildren);
		l_key(&d->line, "flags");
		l_json_str(&d->line, flags);
		l_lit(&d->line, "}");
	}
	else {
		struct text t = { 0, level, &bi, NULL, 0, 0, 0, 0 };

		l_text(&d->line, &t);
		l_str(&d->line, where_field(d, &bi, where, sizeof(where)));
		l_mem(&d->line, "\n", 1);
	}
	d->n++;
	if (ferror(stdout)) {
		d->io_error = 1;
		return 1;
	}
	return 0;
}

int cmd_dump(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "depth", required_argument, NULL, 'd' },
		{ "block", required_argument, NULL, 'b' },
		{ "insn", required_argument, NULL, 'i' },
		{ "from", required_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "tsc", no_argument, NULL, 't' },
		{ "ticks", no_argument, NULL, 'T' },
		{ "lines", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct htr_file *f = NULL;
	struct htr_open_opts oo;
	struct dump d;
	struct place at = { 0, 0 };
	uint64_t v;
	uint32_t from;
	int c, tsc = 0, ticks = 0, lines = 0;
	int rc = HTR_EXIT_FAIL, err;
	const char *path;

	memset(&d, 0, sizeof(d));
	d.max_level = UINT64_MAX;
	/* Big writes: a dump can be 10^7 lines. */
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	optind = 1;
	opterr = 0;     /* one error line, ours */
	while ((c = getopt_long(argc, argv, ":d:b:i:f:jtlh", lopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (parse_u64(optarg, &v) < 0 || !v)
				return usage_error("dump", "--depth: bad value '%s'",
						   optarg);
			d.max_level = v;
			break;
		case 'b':
			if (place_parse("dump", &at, "block", optarg))
				return HTR_EXIT_USAGE;
			break;
		case 'i':
		case 'f':
			if (place_parse("dump", &at, c == 'i' ? "insn" : "from",
					optarg))
				return HTR_EXIT_USAGE;
			break;
		case 'j': d.json = 1; break;
		case 't': tsc = 1; break;
		case 'T': ticks = 1; break;
		case 'l': lines = 1; break;
		case 'h': fputs(usage_text, stdout); return HTR_EXIT_OK;
		default:
			return option_error("dump", c, argv);
		}
	}
	if (optind + 1 != argc)
		return usage_error("dump", "expected one FILE.htr");
	if (lines && d.json)
		return usage_error("dump", "--lines: not with --json");
	if (lines && !htr_srclines_supported())
		return fail("dump", "--lines: this htr was built without libdw "
			    "(elfutils), so it reads no source lines");
	path = argv[optind];
	/* A whole dump reads every block anyway: check the body first, so
	 * a damaged file fails before any line is printed. */
	htr_open_opts_init(&oo);
	oo.verify_body = !at.kind && d.max_level == UINT64_MAX;
	if (open_htr("dump", path, &oo, &f) < 0)
		goto out;
	if (tsc && open_analysis("dump", f, HTR_ANALYZE_ALL, &d.an) < 0)
		goto out;
	if (lines) {
		int e = htr_srclines_open(&d.lines, f);

		if (e < 0) {
			rc = fail("dump", "--lines: %s", htr_errstr(e));
			goto out;
		}
	}
	units_init(&d.units, f, ticks);
	if (place_block("dump", path, f, &at, &from))
		goto out;
	if (d.json)
		printf("[");
	else
		thread_line(f, tsc ? &d.units : NULL);
	if (tsc && !d.json)
		printf("# NAME  LOCAL  TOTAL  PCT  (LOCAL and TOTAL in %s, PCT "
		       "of the outermost block above)\n", units_name(&d.units));
	err = htr_tree_visit(f, from, HTR_PREORDER, visit, &d);
	l_flush(&d.line);
	if (d.json)
		printf("%s]\n", d.n ? "\n" : "");
	if (fflush(stdout) != 0 || ferror(stdout) || d.io_error) {
		rc = fail("dump", "writing output failed");
		goto out;
	}
	if (d.an_error) {
		rc = analysis_fail("dump", f, d.an, HTR_ERR_CORRUPT);
		goto out;
	}
	if (d.err < 0 || err < 0) {
		rc = fail("dump", "%s: %s", path, htr_errstr(d.err < 0 ? d.err :
							     err));
		goto out;
	}
	rc = HTR_EXIT_OK;
out:
	htr_srclines_free(d.lines);
	htr_analysis_close(d.an);
	htr_file_close(f);
	return rc;
}
