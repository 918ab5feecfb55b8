/* htr export: the call tree in formats trace viewers and flame graphs read. */
#include "cmd.h"

#include "htr/htr.h"
#ifdef HTR_HAVE_PERFETTO
#include "perfetto.h"
#endif

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
"                  [--gaps] [--ticks] FILE.htr\n"
"\n"
"Write the call tree with each block's time for viewers:\n"
"  chrome    Chrome trace event JSON (Perfetto's UI, chrome://tracing and\n"
"            speedscope open it): one complete (\"X\") event per block, name\n"
"            the function, ts its start and dur its total, args the block\n"
"            index, instruction span, flags, local and total.\n"
"  folded    folded stacks (flamegraph.pl, speedscope, inferno): one line\n"
"            per call stack, \"outer;inner;innermost LOCAL\".\n"
"  perfetto  Perfetto's protobuf trace (TrackEvent; ui.perfetto.dev and\n"
"            trace_processor open it), half the JSON's size: a slice\n"
"            (begin and end) per block at chrome's times with chrome's\n"
"            args, names interned, on a thread track with the thread's\n"
"            pid, tid and name under a process track for a perf.data\n"
"            build; only in builds with libprotobuf-c (meson -Dperfetto).\n"
"Times count from the trace's first time point.  For a file built from a\n"
"perf.data they are real: chrome's ts and dur in microseconds (to the ns),\n"
"folded and perfetto in ns, the events on the thread's pid and tid with\n"
"its name; otherwise (or with --ticks) they are TSC ticks, which viewers\n"
"show as microseconds (the JSON's otherData says which) or as ns\n"
"(perfetto: the track's name says which).  Names and times come from the\n"
"sidecar FILE.htr.lmdb/, computed on first use.\n"
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
"  -h, --help           show this help\n"
"Memory stays bounded: chrome and perfetto stream (perfetto keeps the\n"
"open slices and 4096 interned names); folded keeps one entry per\n"
"distinct stack up to 2^20 of them, then writes further stacks as they\n"
"come (consumers add up repeated lines).\n"
"perfetto does not write to a terminal.\n"
"exit status: 0 ok, 1 failure, 2 usage error\n";

enum fmt { FMT_CHROME, FMT_FOLDED, FMT_PERFETTO };

/* folded: the distinct stacks as a tree, a stack being the node of its
 * innermost frame under the node of the stack that called it, so that a
 * block costs one lookup of its name under its caller's stack however deep
 * it is (a string of its whole stack made a recursion 10^4 deep cost 10^4
 * names a block).  2^20 stacks at most; further ones are written as they
 * come. */
#define STACKS_MAX (1u << 20)
#define NO_STACK UINT32_MAX

struct stack_node {
	const char *name;         /* the analysis's */
	uint32_t parent;          /* NO_STACK: an outermost frame */
	uint32_t next;            /* writing: the next sibling */
	uint64_t ticks;
};

/* perfetto: a slice begun whose end is not written yet. */
struct open_slice {
	uint64_t end;
	uint32_t level;
};

struct exp {
	const struct htr_file *f;
	struct htr_analysis *an;
	FILE *out;
	enum fmt fmt;
	uint64_t max_level, min_dur, t0;
	int have_t0;
	struct units units;
	uint32_t pid, tid;        /* chrome's track */
	int err;                  /* negative htr_error that stopped it */
	uint64_t nevents;
	/* The names of the blocks on the path from the walk's start, and
	 * their stacks (NO_STACK past the cap). */
	const char **path;
	uint32_t *path_stack;
	size_t path_cap;
	struct stack_node *nodes;
	size_t nnodes, nodes_cap;
	uint32_t *slots;          /* node + 1, 0 free; open addressing */
	size_t nslots;
#ifdef HTR_HAVE_PERFETTO
	struct pf_writer *pf;
#endif
	struct open_slice *open;
	size_t nopen, open_cap;
	uint64_t last_ts;         /* perfetto: the latest time written */
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (uint8_t) *s++) * 0x100000001b3ull;
	return h;
}

/* "a;b;c TICKS" for the frames @names[0..@n). */
static void write_stack(struct exp *e, const char *const *names, size_t n,
			uint64_t ticks)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const char *c;

		if (i)
			putc(';', e->out);
		/* The format's separators may not appear in a frame. */
		if (!strpbrk(names[i], ";\n"))
			fputs(names[i], e->out);
		else
			for (c = names[i]; *c; c++)
				putc(*c == ';' || *c == '\n' ? '_' : *c,
				     e->out);
	}
	fprintf(e->out, " %" PRIu64 "\n", units_of(&e->units, ticks));
}

static size_t slot_of(const struct exp *e, uint32_t parent, const char *name)
{
	return (size_t) ((hash_str(name) ^ (parent * 0x9e3779b97f4a7c15ull)) &
			 (e->nslots - 1));
}

static int grow_slots(struct exp *e)
{
	size_t n = e->nslots ? e->nslots * 2 : 4096, i, j;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -1;
	free(e->slots);
	e->slots = s;
	e->nslots = n;
	for (i = 0; i < e->nnodes; i++) {
		for (j = slot_of(e, e->nodes[i].parent, e->nodes[i].name);
		     s[j]; j = (j + 1) & (n - 1))
			;
		s[j] = (uint32_t) i + 1;
	}
	return 0;
}

/* The stack of @name called from @parent into *@id (NO_STACK past the
 * cap).  Returns 0 or -1 (out of memory). */
static int stack_at(struct exp *e, uint32_t parent, const char *name,
		    uint32_t *id)
{
	struct stack_node *nd;
	size_t j;

	*id = NO_STACK;
	if ((e->nnodes + 1) * 2 > e->nslots && e->nnodes < STACKS_MAX &&
	    grow_slots(e) < 0)
		return -1;
	for (j = slot_of(e, parent, name); e->slots[j];
	     j = (j + 1) & (e->nslots - 1)) {
		nd = &e->nodes[e->slots[j] - 1];
		if (nd->parent == parent && !strcmp(nd->name, name)) {
			*id = e->slots[j] - 1;
			return 0;
		}
	}
	if (e->nnodes >= STACKS_MAX)
		return 0;
	if (e->nnodes == e->nodes_cap) {
		size_t cap = e->nodes_cap ? e->nodes_cap * 2 : 4096;

		nd = realloc(e->nodes, cap * sizeof(*nd));
		if (!nd)
			return -1;
		e->nodes = nd;
		e->nodes_cap = cap;
	}
	nd = &e->nodes[e->nnodes];
	nd->name = name;
	nd->parent = parent;
	nd->ticks = 0;
	*id = (uint32_t) e->nnodes++;
	e->slots[j] = *id + 1;
	return 0;
}

/* Add @ticks to the stack of the first @n path names. */
static void fold(struct exp *e, size_t n, uint64_t ticks)
{
	if (!n || !ticks)
		return;
	if (e->path_stack[n - 1] != NO_STACK)
		e->nodes[e->path_stack[n - 1]].ticks += ticks;
	else
		write_stack(e, e->path, n, ticks);   /* consumers sum repeats */
}

static int by_name(const void *a, const void *b)
{
	const struct stack_node *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

/* Every stack with ticks, depth first, callees in name order: stable
 * output, and viewers that keep the file's order (speedscope's time
 * order) draw a flame graph.  Returns 0 or -1 (out of memory). */
static int write_stacks(struct exp *e)
{
	uint32_t *first = malloc((e->nnodes + 1) * sizeof(*first));
	struct stack_node **sib = malloc(e->nnodes * sizeof(*sib));
	const char **names = malloc(e->path_cap * sizeof(*names));
	uint32_t *at = malloc(e->path_cap * sizeof(*at));
	size_t i, k, depth;
	int rc = -1;

	if (!first || (e->nnodes && (!sib || !names || !at)))
		goto out;
	/* Children lists, outermost frames under index nnodes. */
	for (i = 0; i <= e->nnodes; i++)
		first[i] = NO_STACK;
	for (i = e->nnodes; i-- > 0;) {
		uint32_t *head = &first[e->nodes[i].parent == NO_STACK ?
				       e->nnodes : e->nodes[i].parent];

		e->nodes[i].next = *head;
		*head = (uint32_t) i;
	}
	for (i = 0; i <= e->nnodes; i++) {
		uint32_t c;

		for (k = 0, c = first[i]; c != NO_STACK; c = e->nodes[c].next)
			sib[k++] = &e->nodes[c];
		if (k < 2)
			continue;
		qsort(sib, k, sizeof(*sib), by_name);
		first[i] = (uint32_t) (sib[0] - e->nodes);
		for (c = 0; c + 1 < k; c++)
			sib[c]->next = (uint32_t) (sib[c + 1] - e->nodes);
		sib[k - 1]->next = NO_STACK;
	}
	/* A stack's frames are its node's ancestors: names[] holds them. */
	for (depth = 0, i = first[e->nnodes]; i != NO_STACK || depth;) {
		if (i == NO_STACK) {
			i = e->nodes[at[--depth]].next;
			continue;
		}
		names[depth] = e->nodes[i].name;
		if (e->nodes[i].ticks)
			write_stack(e, names, depth + 1, e->nodes[i].ticks);
		at[depth++] = (uint32_t) i;
		i = first[i];
	}
	rc = 0;
out:
	free(first);
	free(sib);
	free(names);
	free(at);
	return rc;
}

/* When the block began, in ticks from the first time point: late blocks
 * (and any that began before the first time point) at 0. */
static uint64_t start_of(const struct exp *e, const struct htr_block_info *bi)
{
	uint64_t tsc;

	if (!e->have_t0 || (bi->flags & HTR_BLOCK_LATE) ||
	    htr_tsc_for_insn(e->f, bi->first, &tsc) < 0 || tsc < e->t0)
		return 0;
	return tsc - e->t0;
}

/* Time point t0 + @ticks in the output's unit, from t0.  Monotonic in
 * @ticks, so events keep nesting exactly as the blocks do. */
static uint64_t since_t0(const struct exp *e, uint64_t ticks)
{
	uint64_t ns0, ns;

	if (!e->units.ns || htr_tsc_to_ns(e->f, e->t0, &ns0) < 0 ||
	    htr_tsc_to_ns(e->f, e->t0 + ticks, &ns) < 0)
		return ticks;
	return ns - ns0;
}

/* A chrome time: microseconds to the ns, or ticks shown as such. */
static void chrome_time(const struct exp *e, const char *key, uint64_t t)
{
	if (e->units.ns)
		fprintf(e->out, ",\"%s\":%" PRIu64 ".%03u", key, t / 1000,
			(unsigned) (t % 1000));
	else
		fprintf(e->out, ",\"%s\":%" PRIu64, key, t);
}

/* perfetto: end the open slices at @level and deeper, innermost first.
 * Slice times never go back in the file, so a viewer that orders events by
 * time keeps each END after its children's, even for a file whose times
 * do not nest; for a sound file the clamp changes nothing. */
static int close_slices(struct exp *e, uint32_t level)
{
#ifdef HTR_HAVE_PERFETTO
	while (e->nopen && e->open[e->nopen - 1].level >= level) {
		uint64_t t = e->open[--e->nopen].end;

		if (t < e->last_ts)
			t = e->last_ts;
		e->last_ts = t;
		if (pf_slice_end(e->pf, t) < 0)
			return -1;
	}
#else
	(void) e;
	(void) level;
#endif
	return 0;
}

#ifdef HTR_HAVE_PERFETTO
/* perfetto: @block's BEGIN now, its END once the walk leaves its
 * subtree (the next block at its level or above, or the walk's end). */
static int perfetto_block(struct exp *e, uint32_t block,
			  const struct htr_block_info *bi, uint32_t level,
			  const char *name, const char *flags, uint64_t local,
			  uint64_t total)
{
	struct pf_arg args[7];
	uint64_t start = start_of(e, bi), t;
	size_t n = 0;

	if (close_slices(e, level) < 0)
		return -1;
	if (e->nopen == e->open_cap) {
		size_t cap = e->open_cap ? e->open_cap * 2 : 64;
		struct open_slice *o = realloc(e->open, cap * sizeof(*o));

		if (!o)
			return -1;
		e->open = o;
		e->open_cap = cap;
	}
	t = since_t0(e, start);
	if (t < e->last_ts)
		t = e->last_ts;
	e->last_ts = t;
	e->open[e->nopen].end = since_t0(e, start + total);
	e->open[e->nopen++].level = level;
	args[n++] = (struct pf_arg) { PF_ARG_BLOCK, NULL, block };
	if (bi->parent != HTR_NONE)
		args[n++] = (struct pf_arg) { PF_ARG_PARENT, NULL, bi->parent };
	args[n++] = (struct pf_arg) { PF_ARG_FIRST, NULL, bi->first };
	args[n++] = (struct pf_arg) { PF_ARG_LAST, NULL, bi->last };
	args[n++] = (struct pf_arg) { PF_ARG_FLAGS, flags, 0 };
	args[n++] = (struct pf_arg) { PF_ARG_LOCAL, NULL, local };
	args[n++] = (struct pf_arg) { PF_ARG_TOTAL, NULL, total };
	e->nevents++;
	return pf_slice_begin(e->pf, t, "call", name, args, n);
}
#endif

static int visit(const struct htr_file *f, uint32_t block, uint32_t parent,
		 uint32_t level, void *payload)
{
	struct exp *e = payload;
	struct htr_block_info bi;
	uint64_t total, local, start;
	const char *name;
	char flags[64], par[16];
	int rc;

	(void) parent;
	bi.size = sizeof(bi);
	rc = htr_block_get(f, block, &bi, sizeof(bi));
	if (rc == 0)
		rc = htr_tsc_get(e->an, block, &total, NULL, &local);
	if (rc == 0)
		rc = htr_block_name(e->an, block, &name);
	if (rc < 0) {
		e->err = rc;
		return 1;       /* stop; callbacks stop with a positive value */
	}
	/* Cut: the block's time stays with its parent (folded), or is
	 * simply not drawn (chrome, where the parent spans it anyway). */
	if (level >= e->max_level || units_of(&e->units, total) < e->min_dur) {
		if (e->fmt == FMT_FOLDED)
			fold(e, level, total);
		return HTR_VISIT_SKIP;
	}
	if (e->fmt == FMT_FOLDED) {
		uint32_t up = level ? e->path_stack[level - 1] : NO_STACK;

		if (level >= e->path_cap) {
			size_t cap = e->path_cap ? e->path_cap * 2 : 64;
			const char **p = realloc(e->path, cap * sizeof(*p));
			uint32_t *ps;

			if (p)
				e->path = p;
			ps = realloc(e->path_stack, cap * sizeof(*ps));
			if (!p || !ps)
				goto nomem;
			e->path_stack = ps;
			e->path_cap = cap;
		}
		e->path[level] = name;
		e->path_stack[level] = NO_STACK;
		if ((!level || up != NO_STACK) &&
		    stack_at(e, up, name, &e->path_stack[level]) < 0)
			goto nomem;
		/* Children deeper than the cut fold into this block. */
		fold(e, level + 1, local);
		return 0;
	}
	block_flags_str(bi.flags, flags, sizeof(flags));
#ifdef HTR_HAVE_PERFETTO
	if (e->fmt == FMT_PERFETTO) {
		if (perfetto_block(e, block, &bi, level, name, flags, local,
				   total) < 0)
			goto nomem;
		return 0;
	}
#endif
	if (bi.parent == HTR_NONE)
		snprintf(par, sizeof(par), "null");
	else
		snprintf(par, sizeof(par), "%u", bi.parent);
	fprintf(e->out, "%s\n{\"name\":", e->nevents++ ? "," : "");
	json_string(e->out, name);
	fprintf(e->out, ",\"cat\":\"call\",\"ph\":\"X\"");
	start = start_of(e, &bi);
	chrome_time(e, "ts", since_t0(e, start));
	chrome_time(e, "dur", since_t0(e, start + total) - since_t0(e, start));
	fprintf(e->out, ",\"pid\":%u,\"tid\":%u,\"args\":{\"block\":%u,"
		"\"parent\":%s,\"first\":%" PRIu64 ",\"last\":%" PRIu64
		",\"flags\":\"%s\",\"local\":%" PRIu64 ",\"total\":%" PRIu64 "}}",
		e->pid, e->tid, block, par, bi.first, bi.last, flags, local,
		total);
	return 0;
nomem:
	e->err = HTR_ERR_NOMEM;
	return 1;
}

/* Gap @i into @g and the time of the instruction before it (the trace's
 * first time point when there is none) into @tsc.  Returns 0 or -1. */
static int gap_at(const struct exp *e, uint64_t i, struct htr_gap_info *g,
		  uint64_t *tsc)
{
	g->size = sizeof(*g);
	if (htr_gap_get(e->f, i, g, sizeof(*g)) < 0)
		return -1;
	*tsc = e->t0;
	if (g->id < UINT64_MAX && g->id > 0)
		(void) htr_tsc_for_insn(e->f, g->id - 1, tsc);
	return 0;
}

static void chrome_gaps(struct exp *e)
{
	uint64_t i, n = htr_gap_count(e->f), tsc;

	for (i = 0; i < n; i++) {
		struct htr_gap_info g;

		if (gap_at(e, i, &g, &tsc) < 0)
			continue;
		fprintf(e->out, "%s\n{\"name\":\"gap: %s\",\"cat\":\"gap\","
			"\"ph\":\"i\",\"s\":\"t\"", e->nevents++ ? "," : "",
			htr_gap_kind_str(g.kind));
		chrome_time(e, "ts", since_t0(e, tsc >= e->t0 ? tsc - e->t0 : 0));
		fprintf(e->out, ",\"pid\":%u,\"tid\":%u,\"args\":{\"id\":%"
			PRIu64 ",\"reason\":", e->pid, e->tid, g.id);
		json_string(e->out, htr_gap_reason(&g));
		fprintf(e->out, "}}");
	}
}

#ifdef HTR_HAVE_PERFETTO
/* After the walk, out of time order: Perfetto orders a trace's events by
 * time, and an instant needs no END to nest. */
static int perfetto_gaps(struct exp *e)
{
	uint64_t i, n = htr_gap_count(e->f), tsc;
	char name[64];

	for (i = 0; i < n; i++) {
		struct htr_gap_info g;
		struct pf_arg args[2];

		if (gap_at(e, i, &g, &tsc) < 0)
			continue;
		snprintf(name, sizeof(name), "gap: %s",
			 htr_gap_kind_str(g.kind));
		args[0] = (struct pf_arg) { PF_ARG_ID, NULL, g.id };
		args[1] = (struct pf_arg) { PF_ARG_REASON, htr_gap_reason(&g),
					    0 };
		e->nevents++;
		if (pf_instant(e->pf, since_t0(e, tsc >= e->t0 ? tsc - e->t0 :
					       0), "gap", name, args, 2) < 0)
			return -1;
	}
	return 0;
}
#endif

static void free_stacks(struct exp *e)
{
	free(e->nodes);
	free(e->slots);
	free(e->path);
	free(e->path_stack);
	free(e->open);
#ifdef HTR_HAVE_PERFETTO
	pf_writer_free(e->pf);
#endif
}

int cmd_export(int argc, char **argv)
{
	enum { O_FROM = 256, O_GAPS, O_TICKS };
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
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct exp e;
	struct htr_file *f = NULL;
	const char *path, *out = NULL, *format = NULL, *dur_arg = NULL;
	char *tmp = NULL;
	struct place at = { 0, 0 };
	uint64_t v, id;
	uint32_t from;
	struct htr_thread_info ti;
	int c, gaps = 0, ticks = 0, rc = HTR_EXIT_FAIL, err;
	int dur_unit = 0;

	memset(&e, 0, sizeof(e));
	e.max_level = UINT64_MAX;
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
			e.max_level = v;
			break;
		case 'm':
			if (parse_duration(optarg, &e.min_dur, &dur_unit) < 0)
				return usage_error("export", "--min-duration: bad "
						   "value '%s' (a whole number, "
						   "with ns, us, ms or s)",
						   optarg);
			dur_arg = optarg;
			break;
		case O_GAPS: gaps = 1; break;
		case O_TICKS: ticks = 1; break;
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
	if (!strcmp(format, "chrome"))
		e.fmt = FMT_CHROME;
	else if (!strcmp(format, "folded"))
		e.fmt = FMT_FOLDED;
	else if (!strcmp(format, "perfetto"))
		e.fmt = FMT_PERFETTO;
	else
		return usage_error("export", "--format: '%s' is not chrome, "
				   "folded or perfetto", format);
#ifndef HTR_HAVE_PERFETTO
	if (e.fmt == FMT_PERFETTO)
		return fail("export", "--format perfetto: this htr was built "
			    "without Perfetto support (it needs libprotobuf-c "
			    "and protoc-c at build time: meson -Dperfetto="
			    "enabled)");
#endif
	/* Binary on a terminal helps nobody and can upset it. */
	if (e.fmt == FMT_PERFETTO && !out && isatty(STDOUT_FILENO))
		return usage_error("export", "--format perfetto: stdout is a "
				   "terminal; use -o OUT or a redirection");
	path = argv[optind];
	if (open_htr("export", path, NULL, &f) < 0)
		goto out;
	if (open_analysis("export", f, HTR_ANALYZE_ALL, &e.an) < 0)
		goto out;
	if (place_block("export", path, f, &at, &from))
		goto out;
	e.f = f;
	e.have_t0 = htr_tsc_point(f, 0, &id, &e.t0) == 0;
	units_init(&e.units, f, ticks);
	/* A duration with a unit needs times in ns. */
	if (dur_unit && !e.units.ns) {
		rc = usage_error("export", "--min-duration %s: the times of %s "
				 "are TSC ticks (%s): give ticks", dur_arg,
				 path, ticks ? "--ticks" :
				 "no perf clock in the file");
		goto out;
	}
	e.pid = e.tid = 1;
	if (htr_file_thread(f, &ti, sizeof(ti)) == 0) {
		e.pid = ti.pid;
		e.tid = ti.tid;
	}
	if (out) {
		size_t n = strlen(out) + 32;

		tmp = malloc(n);
		if (!tmp) {
			rc = fail("export", "out of memory");
			goto out;
		}
		snprintf(tmp, n, "%s.tmp%ld", out, (long) getpid());
		e.out = fopen(tmp, "w");
		if (!e.out) {
			rc = fail("export", "%s: %s", out, strerror(errno));
			goto out;
		}
	} else {
		e.out = stdout;
	}
	if (e.fmt == FMT_CHROME) {
		fprintf(e.out, "{\"displayTimeUnit\":\"ns\",\"otherData\":"
			"{\"source\":\"htr export\",\"time_unit\":\"%s\"},"
			"\"traceEvents\":[", e.units.ns ? "microseconds from "
			"the first time point" : "TSC ticks from the first time "
			"point (shown as microseconds)");
		if (htr_file_thread(f, &ti, sizeof(ti)) == 0 && ti.comm[0]) {
			fprintf(e.out, "\n{\"name\":\"thread_name\",\"ph\":"
				"\"M\",\"pid\":%u,\"tid\":%u,\"args\":"
				"{\"name\":", e.pid, e.tid);
			json_string(e.out, ti.comm);
			fprintf(e.out, "}}");
			e.nevents++;
		}
	}
#ifdef HTR_HAVE_PERFETTO
	if (e.fmt == FMT_PERFETTO) {
		struct pf_track_opts po;
		char tname[128];
		int have_thread = htr_file_thread(f, &ti, sizeof(ti)) == 0;

		memset(&po, 0, sizeof(po));
		po.have_thread = have_thread;
		po.pid = e.pid;
		po.tid = e.tid;
		po.comm = have_thread ? ti.comm : NULL;
		/* Perfetto reads every timestamp as ns: say when they are not. */
		if (!e.units.ns) {
			snprintf(tname, sizeof(tname), "%s (TSC ticks from the "
				 "first time point, shown as ns)",
				 have_thread && ti.comm[0] ? ti.comm :
				 "htr call tree");
			po.name = tname;
		}
		if (pf_writer_open(&e.pf, e.out, &po) < 0) {
			rc = fail("export", "out of memory");
			goto out;
		}
	}
#endif
	err = htr_tree_visit(f, from, HTR_PREORDER, visit, &e);
	if (e.err == 0 && err == 0 && close_slices(&e, 0) < 0)
		e.err = HTR_ERR_NOMEM;
#ifdef HTR_HAVE_PERFETTO
	if (e.err == 0 && err == 0 && e.fmt == FMT_PERFETTO && gaps &&
	    perfetto_gaps(&e) < 0)
		e.err = HTR_ERR_NOMEM;
#endif
	if (e.err < 0 || err < 0) {
		rc = e.err == HTR_ERR_NOMEM ? fail("export", "out of memory") :
		     analysis_fail("export", f, e.an, e.err < 0 ? e.err : err);
		goto out;
	}
	if (e.fmt == FMT_CHROME) {
		if (gaps)
			chrome_gaps(&e);
		fprintf(e.out, "\n]}\n");
	} else if (e.fmt == FMT_FOLDED) {
		if (write_stacks(&e) < 0) {
			rc = fail("export", "out of memory");
			goto out;
		}
	}
	if (fflush(e.out) != 0 || ferror(e.out)) {
		rc = fail("export", "%s: writing failed", out ? out : "stdout");
		goto out;
	}
	if (out) {
		if (fclose(e.out) != 0 || rename(tmp, out) < 0) {
			e.out = NULL;
			rc = fail("export", "%s: %s", out, strerror(errno));
			goto out;
		}
		e.out = NULL;
	}
	rc = HTR_EXIT_OK;
out:
	if (out && e.out)
		fclose(e.out);
	if (tmp && rc != HTR_EXIT_OK)
		unlink(tmp);
	free(tmp);
	free_stacks(&e);
	htr_analysis_close(e.an);
	htr_file_close(f);
	return rc;
}
