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

/* chrome, perfetto: a block begun whose end is not written yet. */
struct open_slice {
	uint64_t end;             /* the position of its end: last + 1 */
	uint32_t level;
	const char *name;         /* the analysis's */
	uint32_t block, parent, flags;
	uint64_t first, last, local, total;
};

/* Where the time points are, for times interpolated by instruction ID:
 * the segment between points k and k + 1, which a walk in time order
 * only ever moves forward. */
struct timeline {
	uint64_t n;               /* time points */
	uint64_t k;               /* UINT64_MAX: not placed yet */
	uint64_t id0, id1;        /* the IDs of points k and k + 1 */
	uint64_t u0, u1;          /* their times in the output's unit */
	uint64_t pos;             /* the latest position asked for */
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
	int args;                 /* chrome --args */
	struct timeline tl;       /* the events' */
	uint64_t last_ts;         /* the latest event time written */
	int any_ts;               /* one was */
	int comma;                /* chrome: an event was written */
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

/* Time point t0 + @ticks in the output's unit, from t0.  Monotonic in
 * @ticks. */
static uint64_t since_t0(const struct exp *e, uint64_t ticks)
{
	uint64_t ns0, ns;

	if (!e->units.ns || htr_tsc_to_ns(e->f, e->t0, &ns0) < 0 ||
	    htr_tsc_to_ns(e->f, e->t0 + ticks, &ns) < 0)
		return ticks;
	return ns - ns0;
}

/* Time point @i: its ID into *@id, its time from t0 in the output's unit
 * into *@u (0 for any before t0). */
static void point_at(const struct exp *e, uint64_t i, uint64_t *id,
		     uint64_t *u)
{
	uint64_t tsc;

	if (htr_tsc_point(e->f, i, id, &tsc) < 0) {
		*id = UINT64_MAX;
		*u = 0;
		return;
	}
	*u = tsc > e->t0 ? since_t0(e, tsc - e->t0) : 0;
}

static void timeline_init(struct timeline *tl, const struct htr_file *f)
{
	memset(tl, 0, sizeof(*tl));
	tl->n = htr_tsc_count(f);
	tl->k = UINT64_MAX;
}

/* @a * @b / @c, @c > 0, @b <= @c: never more than @a. */
static uint64_t scale(uint64_t a, uint64_t b, uint64_t c)
{
#ifdef __SIZEOF_INT128__
	__extension__ typedef unsigned __int128 u128;

	return (uint64_t) ((u128) a * b / c);
#else
	long double v = (long double) a * b / c;

	return v >= a ? a : (uint64_t) v;
#endif
}

/* The time of position @pos (an instruction ID; the end of a block is
 * the position after its last instruction) in the output's unit from t0:
 * interpolated between the time points around it by ID, the last point's
 * time past it, 0 without any.  Positions before the latest one asked for
 * count as it, so that the segment only moves forward: O(1) amortized
 * along a walk, O(log n) for the first position. */
static uint64_t time_at(const struct exp *e, struct timeline *tl,
			uint64_t pos)
{
	if (!tl->n)
		return 0;
	if (tl->k == UINT64_MAX) {
		/* The last point at or before @pos (point 0 is at ID 0). */
		uint64_t lo = 0, hi = tl->n, id, u;

		while (hi - lo > 1) {
			uint64_t mid = lo + (hi - lo) / 2;

			point_at(e, mid, &id, &u);
			if (id <= pos)
				lo = mid;
			else
				hi = mid;
		}
		tl->k = lo;
		tl->pos = pos;
		point_at(e, lo, &tl->id0, &tl->u0);
		if (lo + 1 < tl->n)
			point_at(e, lo + 1, &tl->id1, &tl->u1);
	}
	if (pos < tl->pos)
		pos = tl->pos;
	tl->pos = pos;
	while (tl->k + 1 < tl->n && tl->id1 <= pos) {
		tl->k++;
		tl->id0 = tl->id1;
		tl->u0 = tl->u1;
		if (tl->k + 1 < tl->n)
			point_at(e, tl->k + 1, &tl->id1, &tl->u1);
	}
	if (tl->k + 1 >= tl->n || tl->u1 <= tl->u0 || pos <= tl->id0)
		return tl->u0;
	return tl->u0 + scale(tl->u1 - tl->u0, pos - tl->id0,
			      tl->id1 - tl->id0);
}

/* The time of the next event, at position @pos: time_at(), but one unit
 * after the event before where it would not be later.  Events come in the
 * order of the tree's brackets (a block's begin, its callees' begins and
 * ends, its end), so strictly increasing times make every viewer nest
 * them as the tree, however it orders equal times. */
static uint64_t event_time(struct exp *e, uint64_t pos)
{
	uint64_t t = time_at(e, &e->tl, pos);

	if (e->any_ts && t <= e->last_ts)
		t = e->last_ts + 1;
	e->last_ts = t;
	e->any_ts = 1;
	return t;
}

/* A chrome time: microseconds to the ns, or ticks shown as such.  Three
 * decimals keep distinct ns distinct as doubles up to 2^53 / 10^3 us. */
static void chrome_time(const struct exp *e, const char *key, uint64_t t)
{
	if (e->units.ns)
		fprintf(e->out, ",\"%s\":%" PRIu64 ".%03u", key, t / 1000,
			(unsigned) (t % 1000));
	else
		fprintf(e->out, ",\"%s\":%" PRIu64, key, t);
}

/* chrome: the end event of @o at @t; with --args, its details.  They go
 * on the end only: speedscope names a frame after its begin event's name
 * and args, and merges nothing from the end. */
static void chrome_end(struct exp *e, const struct open_slice *o, uint64_t t)
{
	char flags[64];

	fprintf(e->out, ",\n{\"name\":");
	json_string(e->out, o->name);
	fprintf(e->out, ",\"ph\":\"E\"");
	chrome_time(e, "ts", t);
	fprintf(e->out, ",\"pid\":%u,\"tid\":%u", e->pid, e->tid);
	if (e->args) {
		block_flags_str(o->flags, flags, sizeof(flags));
		fprintf(e->out, ",\"args\":{\"block\":%u,\"parent\":", o->block);
		if (o->parent == HTR_NONE)
			fprintf(e->out, "null");
		else
			fprintf(e->out, "%u", o->parent);
		fprintf(e->out, ",\"first\":%" PRIu64 ",\"last\":%" PRIu64
			",\"flags\":\"%s\",\"local\":%" PRIu64 ",\"total\":%"
			PRIu64 "}", o->first, o->last, flags, o->local,
			o->total);
	}
	fprintf(e->out, "}");
}

/* chrome, perfetto: end the open blocks at @level and deeper, innermost
 * first. */
static int close_slices(struct exp *e, uint32_t level)
{
	while (e->nopen && e->open[e->nopen - 1].level >= level) {
		const struct open_slice *o = &e->open[--e->nopen];
		uint64_t t = event_time(e, o->end);

		if (e->fmt == FMT_CHROME)
			chrome_end(e, o, t);
#ifdef HTR_HAVE_PERFETTO
		else if (pf_slice_end(e->pf, t) < 0)
			return -1;
#endif
	}
	return 0;
}

/* chrome, perfetto: @block's begin now, its end once the walk leaves its
 * subtree (the next block at its level or above, or the walk's end).
 * Returns 0 or -1 (out of memory). */
static int slice_block(struct exp *e, uint32_t block,
		       const struct htr_block_info *bi, uint32_t level,
		       const char *name, uint64_t local, uint64_t total)
{
	struct open_slice *o;
	uint64_t t;

	if (close_slices(e, level) < 0)
		return -1;
	if (e->nopen == e->open_cap) {
		size_t cap = e->open_cap ? e->open_cap * 2 : 64;

		o = realloc(e->open, cap * sizeof(*o));
		if (!o)
			return -1;
		e->open = o;
		e->open_cap = cap;
	}
	o = &e->open[e->nopen++];
	o->end = bi->last + 1;
	o->level = level;
	o->name = name;
	o->block = block;
	o->parent = bi->parent;
	o->flags = bi->flags;
	o->first = bi->first;
	o->last = bi->last;
	o->local = local;
	o->total = total;
	t = event_time(e, bi->first);
	e->nevents++;
#ifdef HTR_HAVE_PERFETTO
	if (e->fmt == FMT_PERFETTO) {
		struct pf_arg args[7];
		char flags[64];
		size_t n = 0;

		block_flags_str(bi->flags, flags, sizeof(flags));
		args[n++] = (struct pf_arg) { PF_ARG_BLOCK, NULL, block };
		if (bi->parent != HTR_NONE)
			args[n++] = (struct pf_arg) { PF_ARG_PARENT, NULL,
						      bi->parent };
		args[n++] = (struct pf_arg) { PF_ARG_FIRST, NULL, bi->first };
		args[n++] = (struct pf_arg) { PF_ARG_LAST, NULL, bi->last };
		args[n++] = (struct pf_arg) { PF_ARG_FLAGS, flags, 0 };
		args[n++] = (struct pf_arg) { PF_ARG_LOCAL, NULL, local };
		args[n++] = (struct pf_arg) { PF_ARG_TOTAL, NULL, total };
		return pf_slice_begin(e->pf, t, "call", name, args, n);
	}
#endif
	fprintf(e->out, "%s\n{\"name\":", e->comma ? "," : "");
	e->comma = 1;
	json_string(e->out, name);
	fprintf(e->out, ",\"cat\":\"call\",\"ph\":\"B\"");
	chrome_time(e, "ts", t);
	fprintf(e->out, ",\"pid\":%u,\"tid\":%u}", e->pid, e->tid);
	return 0;
}

static int visit(const struct htr_file *f, uint32_t block, uint32_t parent,
		 uint32_t level, void *payload)
{
	struct exp *e = payload;
	struct htr_block_info bi;
	uint64_t total, local;
	const char *name;
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
	 * simply not drawn (chrome, perfetto: the parent spans it). */
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
	if (slice_block(e, block, &bi, level, name, local, total) < 0)
		goto nomem;
	return 0;
nomem:
	e->err = HTR_ERR_NOMEM;
	return 1;
}

/* Gap @i into @g and its time (where it sits between instructions, as
 * the blocks' times: uninterpolated events do not move it) into *@t.
 * Gaps come in ID order, so @tl moves forward.  Returns 0 or -1. */
static int gap_at(const struct exp *e, struct timeline *tl, uint64_t i,
		  struct htr_gap_info *g, uint64_t *t)
{
	g->size = sizeof(*g);
	if (htr_gap_get(e->f, i, g, sizeof(*g)) < 0)
		return -1;
	*t = time_at(e, tl, g->id);
	return 0;
}

static void chrome_gaps(struct exp *e)
{
	uint64_t i, n = htr_gap_count(e->f), t;
	struct timeline tl;

	timeline_init(&tl, e->f);
	for (i = 0; i < n; i++) {
		struct htr_gap_info g;

		if (gap_at(e, &tl, i, &g, &t) < 0)
			continue;
		fprintf(e->out, "%s\n{\"name\":\"gap: %s\",\"cat\":\"gap\","
			"\"ph\":\"i\",\"s\":\"t\"", e->comma ? "," : "",
			htr_gap_kind_str(g.kind));
		e->comma = 1;
		e->nevents++;
		chrome_time(e, "ts", t);
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
	uint64_t i, n = htr_gap_count(e->f), t;
	char name[64];
	struct timeline tl;

	timeline_init(&tl, e->f);
	for (i = 0; i < n; i++) {
		struct htr_gap_info g;
		struct pf_arg args[2];

		if (gap_at(e, &tl, i, &g, &t) < 0)
			continue;
		snprintf(name, sizeof(name), "gap: %s",
			 htr_gap_kind_str(g.kind));
		args[0] = (struct pf_arg) { PF_ARG_ID, NULL, g.id };
		args[1] = (struct pf_arg) { PF_ARG_REASON, htr_gap_reason(&g),
					    0 };
		e->nevents++;
		if (pf_instant(e->pf, t, "gap", name, args, 2) < 0)
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
		case O_ARGS: e.args = 1; break;
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
	timeline_init(&e.tl, f);
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
			"the first time point, interpolated by instruction ID "
			"(htr export --help)" : "TSC ticks from the first time "
			"point, interpolated by instruction ID (htr export "
			"--help), shown as microseconds");
		if (htr_file_thread(f, &ti, sizeof(ti)) == 0 && ti.comm[0]) {
			fprintf(e.out, "\n{\"name\":\"thread_name\",\"ph\":"
				"\"M\",\"pid\":%u,\"tid\":%u,\"args\":"
				"{\"name\":", e.pid, e.tid);
			json_string(e.out, ti.comm);
			fprintf(e.out, "}}");
			e.comma = 1;
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
