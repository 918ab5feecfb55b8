/* Exports of the call tree (htr/export.h): chrome, folded and, in builds
 * with libprotobuf-c, perfetto.  `htr export` is a front end to this. */
#include "htr/htr.h"
#include "htr/export.h"
#ifdef HTR_HAVE_PERFETTO
#include "perfetto.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The unit durations are written in: ns when the file knows perf's clock
 * (built from a perf.data) unless ticks are asked for, else TSC ticks. */
struct units {
	const struct htr_file *f;
	int ns;
};

static void units_init(struct units *u, const struct htr_file *f, int ticks)
{
	uint64_t ns;

	u->f = f;
	u->ns = !ticks && htr_ticks_to_ns(f, 0, &ns) == 0;
}

static uint64_t units_of(const struct units *u, uint64_t ticks)
{
	uint64_t ns;

	return u->ns && htr_ticks_to_ns(u->f, ticks, &ns) == 0 ? ns : ticks;
}

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
	htr_json_string(e->out, o->name);
	fprintf(e->out, ",\"ph\":\"E\"");
	chrome_time(e, "ts", t);
	fprintf(e->out, ",\"pid\":%u,\"tid\":%u", e->pid, e->tid);
	if (e->args) {
		htr_block_flags_str(o->flags, flags, sizeof(flags));
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

		htr_block_flags_str(bi->flags, flags, sizeof(flags));
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
	htr_json_string(e->out, name);
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
		htr_json_string(e->out, htr_gap_reason(&g));
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


int htr_export_format_of(const char *name)
{
	static const struct { const char *name; int format; } fmts[] = {
		{ "chrome", HTR_EXPORT_CHROME },
		{ "folded", HTR_EXPORT_FOLDED },
		{ "perfetto", HTR_EXPORT_PERFETTO },
	};
	size_t i;

	for (i = 0; name && i < sizeof(fmts) / sizeof(fmts[0]); i++)
		if (!strcmp(name, fmts[i].name))
			return fmts[i].format;
	return HTR_ERR_NOTFOUND;
}

void htr_export_opts_init_size(struct htr_export_opts *opts, size_t size)
{
	if (!opts || size < sizeof(size_t))
		return;
	memset(opts, 0, size);
	opts->size = size;
	if (size >= offsetof(struct htr_export_opts, block) + sizeof(uint32_t))
		opts->block = HTR_NONE;
	if (size >= offsetof(struct htr_export_opts, format) + sizeof(int))
		opts->format = HTR_EXPORT_CHROME;
}

int htr_export_has(int format)
{
	switch (format) {
	case HTR_EXPORT_CHROME:
	case HTR_EXPORT_FOLDED:
		return 1;
	case HTR_EXPORT_PERFETTO:
#ifdef HTR_HAVE_PERFETTO
		return 1;
#else
		return 0;
#endif
	default:
		return 0;
	}
}

/* chrome: the header, with the thread's name where known. */
static void chrome_head(struct exp *e)
{
	struct htr_thread_info ti;

	fprintf(e->out, "{\"displayTimeUnit\":\"ns\",\"otherData\":"
		"{\"source\":\"htr export\",\"time_unit\":\"%s\"},"
		"\"traceEvents\":[", e->units.ns ? "microseconds from "
		"the first time point, interpolated by instruction ID "
		"(htr export --help)" : "TSC ticks from the first time "
		"point, interpolated by instruction ID (htr export "
		"--help), shown as microseconds");
	if (htr_file_thread(e->f, &ti, sizeof(ti)) == 0 && ti.comm[0]) {
		fprintf(e->out, "\n{\"name\":\"thread_name\",\"ph\":"
			"\"M\",\"pid\":%u,\"tid\":%u,\"args\":"
			"{\"name\":", e->pid, e->tid);
		htr_json_string(e->out, ti.comm);
		fprintf(e->out, "}}");
		e->comma = 1;
	}
}

#ifdef HTR_HAVE_PERFETTO
static int perfetto_head(struct exp *e)
{
	struct htr_thread_info ti;
	struct pf_track_opts po;
	char tname[128];
	int have_thread = htr_file_thread(e->f, &ti, sizeof(ti)) == 0;

	memset(&po, 0, sizeof(po));
	po.have_thread = have_thread;
	po.pid = e->pid;
	po.tid = e->tid;
	po.comm = have_thread ? ti.comm : NULL;
	/* Perfetto reads every timestamp as ns: say when they are not. */
	if (!e->units.ns) {
		snprintf(tname, sizeof(tname), "%s (TSC ticks from the "
			 "first time point, shown as ns)",
			 have_thread && ti.comm[0] ? ti.comm :
			 "htr call tree");
		po.name = tname;
	}
	return pf_writer_open(&e->pf, e->out, &po);
}
#endif

int htr_export(const struct htr_file *f, struct htr_analysis *an, FILE *fp,
	       const struct htr_export_opts *opts)
{
	struct htr_export_opts o;
	struct htr_thread_info ti;
	struct exp e;
	uint64_t id;
	int err;

	if (!f || !an || !fp || !opts ||
	    opts->size < offsetof(struct htr_export_opts, min_duration) +
			 sizeof(uint64_t))
		return HTR_ERR_INVALID;
	htr_export_opts_init(&o);
	memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	if (!htr_export_has(o.format) ||
	    (o.block != HTR_NONE && o.block >= htr_block_count(f)))
		return HTR_ERR_INVALID;
	memset(&e, 0, sizeof(e));
	e.fmt = o.format == HTR_EXPORT_CHROME ? FMT_CHROME :
		o.format == HTR_EXPORT_FOLDED ? FMT_FOLDED : FMT_PERFETTO;
	e.max_level = o.max_depth ? o.max_depth : UINT64_MAX;
	e.min_dur = o.min_duration;
	e.args = !!(o.flags & HTR_EXPORT_ARGS);
	e.f = f;
	e.an = an;
	e.out = fp;
	e.have_t0 = htr_tsc_point(f, 0, &id, &e.t0) == 0;
	units_init(&e.units, f, !!(o.flags & HTR_EXPORT_TICKS));
	timeline_init(&e.tl, f);
	e.pid = e.tid = 1;
	if (htr_file_thread(f, &ti, sizeof(ti)) == 0) {
		e.pid = ti.pid;
		e.tid = ti.tid;
	}
	if (e.fmt == FMT_CHROME)
		chrome_head(&e);
#ifdef HTR_HAVE_PERFETTO
	if (e.fmt == FMT_PERFETTO && perfetto_head(&e) < 0) {
		err = HTR_ERR_NOMEM;
		goto out;
	}
#endif
	err = htr_tree_visit(f, o.block, HTR_PREORDER, visit, &e);
	if (e.err == 0 && err == 0 && close_slices(&e, 0) < 0)
		e.err = HTR_ERR_NOMEM;
#ifdef HTR_HAVE_PERFETTO
	if (e.err == 0 && err == 0 && e.fmt == FMT_PERFETTO &&
	    (o.flags & HTR_EXPORT_GAPS) && perfetto_gaps(&e) < 0)
		e.err = HTR_ERR_NOMEM;
#endif
	if (e.err < 0 || err < 0) {
		err = e.err < 0 ? e.err : err;
		goto out;
	}
	if (e.fmt == FMT_CHROME) {
		if (o.flags & HTR_EXPORT_GAPS)
			chrome_gaps(&e);
		fprintf(e.out, "\n]}\n");
	} else if (e.fmt == FMT_FOLDED && write_stacks(&e) < 0) {
		err = HTR_ERR_NOMEM;
		goto out;
	}
	err = fflush(e.out) != 0 || ferror(e.out) ? HTR_ERR_IO : 0;
out:
	free_stacks(&e);
	return err;
}

int htr_export_path(const struct htr_file *f, struct htr_analysis *an,
		    const char *path, const struct htr_export_opts *opts)
{
	size_t n;
	char *tmp;
	FILE *fp;
	int rc, saved;

	if (!f || !an || !path || !opts)
		return HTR_ERR_INVALID;
	n = strlen(path) + 32;
	tmp = malloc(n);
	if (!tmp)
		return HTR_ERR_NOMEM;
	snprintf(tmp, n, "%s.tmp%ld", path, (long) getpid());
	fp = fopen(tmp, "w");
	if (!fp) {
		saved = errno;
		free(tmp);
		errno = saved;
		return HTR_ERR_IO;
	}
	rc = htr_export(f, an, fp, opts);
	saved = errno;
	if (fclose(fp) != 0 && rc == 0) {
		rc = HTR_ERR_IO;
		saved = errno;
	}
	if (rc == 0 && rename(tmp, path) < 0) {
		rc = HTR_ERR_IO;
		saved = errno;
	}
	if (rc < 0)
		unlink(tmp);
	free(tmp);
	errno = saved;
	return rc;
}
