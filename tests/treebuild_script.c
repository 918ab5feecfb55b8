/* Event scripts for the tree builder: treebuild_script.h says the
 * notation. */
#include "treebuild_script.h"

#include "ev.h"
#include "treebuild.h"
#include "writer.h"
#include "htr/tree.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXSYM 32

struct sym {
	uint64_t start, end, entry, func;
};

struct script {
	struct sym sym[MAXSYM];
	unsigned nsym;
	struct htr_tb *tb;
	unsigned flags;
	struct htr_ev *ev;      /* TBS_VIA_EV: the events so far */
	size_t nev, cap;
	uint64_t offset;        /* the next gap's trace offset */
	struct tbs_result *r;
};

static int fail(struct tbs_result *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* The extents the image would give (htr_image__func_extent()). */
static int extent(void *ctx, uint64_t addr, uint64_t *entry, uint64_t *func)
{
	const struct script *s = ctx;
	unsigned i;

	for (i = 0; i < s->nsym; i++)
		if (addr >= s->sym[i].start && addr < s->sym[i].end) {
			*entry = s->sym[i].entry;
			*func = s->sym[i].func;
			return 1;
		}
	return 0;
}

/* Queue a packed event (TBS_VIA_EV). */
static int ev_put(void *ctx, const struct htr_ev *e)
{
	struct script *s = ctx;

	if (s->nev == s->cap) {
		size_t ncap = s->cap ? 2 * s->cap : 64;
		struct htr_ev *n = realloc(s->ev, ncap * sizeof(*n));

		if (!n)
			return fail(s->r, "out of memory");
		s->ev = n;
		s->cap = ncap;
	}
	s->ev[s->nev++] = *e;
	return 0;
}

/* Each event goes to the builder's own call, or (TBS_VIA_EV) through
 * the decoder's sink as ev.c packs it, to be replayed at the end. */
static int done(struct script *s, int rc)
{
	return rc ? fail(s->r, "builder: %s", htr_errstr(rc)) : 0;
}

static void sink_of(struct script *s, struct htr_decode_sink *sink,
		    struct htr_ev_sink *k)
{
	k->put = ev_put;
	k->ctx = s;
	memset(sink, 0, sizeof(*sink));
	htr_ev__sink(sink, k);
}

static int report_run(struct script *s, uint64_t ip, uint32_t n,
		      enum htr_icls cls, uint64_t ret_ip)
{
	struct htr_decode_sink sink;
	struct htr_ev_sink k;

	if (!(s->flags & TBS_VIA_EV))
		return done(s, htr_tb__run(s->tb, ip, n, cls, ret_ip));
	sink_of(s, &sink, &k);
	return sink.run(sink.ctx, ip, n, cls, ret_ip, 0, 0);
}

static int report_gap(struct script *s, int kind, int code, int async,
		      uint64_t ip)
{
	struct htr_decode_sink sink;
	struct htr_ev_sink k;
	struct htr_decode_gap g;

	memset(&g, 0, sizeof(g));
	g.kind = kind;
	g.code = code;
	g.async = async;
	g.ip = ip;
	g.offset = s->offset += 0x100;
	if (!(s->flags & TBS_VIA_EV))
		return done(s, htr_tb__gap(s->tb, &g));
	sink_of(s, &sink, &k);
	return sink.gap(sink.ctx, &g);
}

static int report(struct script *s, enum htr_ev_type type, uint64_t a)
{
	struct htr_decode_sink sink;
	struct htr_ev_sink k;
	int direct = !(s->flags & TBS_VIA_EV);

	sink_of(s, &sink, &k);
	switch (type) {
	case HTR_EV_RESUME:
		return direct ? done(s, htr_tb__resume(s->tb, a)) :
				sink.resume(sink.ctx, a);
	case HTR_EV_TIME:
		return direct ? done(s, htr_tb__time(s->tb, a)) :
				sink.time(sink.ctx, a);
	case HTR_EV_SYNC:
		return direct ? done(s, htr_tb__sync(s->tb, a)) :
				sink.sync(sink.ctx, a);
	default:
		return fail(s->r, "bad event type");
	}
}

static int num(const char *w, uint64_t *v)
{
	char *end;

	if (!w)
		return 0;
	*v = strtoull(w, &end, 0);
	return *end == '\0';
}

/* One statement, split into @w[0..@n). */
static int statement(struct script *s, char **w, int n)
{
	uint64_t a = 0, b = 0, c = 0;
	int has_c;
	static const struct {
		const char *name;
		enum htr_icls cls;
	} runs[] = {
		{ "run", HTR_IC_OTHER }, { "call", HTR_IC_CALL },
		{ "fcall", HTR_IC_FAR_CALL }, { "ret", HTR_IC_RET },
		{ "fret", HTR_IC_FAR_RET }, { "jmp", HTR_IC_JUMP },
	};
	unsigned i;

	for (i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		if (strcmp(w[0], runs[i].name))
			continue;
		if (n < 3 || n > 4 || !num(w[1], &a) || !num(w[2], &b) ||
		    !b || b > UINT32_MAX)
			return fail(s->r, "%s: want IP N [ADDR]", w[0]);
		has_c = n == 4 && num(w[3], &c);
		if (n == 4 && !has_c)
			return fail(s->r, "%s: bad address %s", w[0], w[3]);
		switch (runs[i].cls) {
		case HTR_IC_CALL:
		case HTR_IC_FAR_CALL:
			c = has_c ? c : a + b;  /* the return address */
			break;
		case HTR_IC_JUMP:
			c = has_c ? c : a + b - 1;      /* the jump */
			break;
		default:
			if (has_c)
				return fail(s->r, "%s: no address", w[0]);
			c = 0;
		}
		return report_run(s, a, (uint32_t) b, runs[i].cls, c);
	}
	if (!strcmp(w[0], "irq")) {
		if (n != 2 || !num(w[1], &a))
			return fail(s->r, "irq: want IP");
		return report_run(s, a, 0, HTR_IC_FAR_CALL, a);
	}
	if (!strcmp(w[0], "gap")) {
		int kind, code = 0, async = 0, k;

		if (n < 2)
			return fail(s->r, "gap: want a kind");
		if (!strcmp(w[1], "disabled"))
			kind = HTR_GAP_DISABLED;
		else if (!strcmp(w[1], "overflow"))
			kind = HTR_GAP_OVERFLOW;
		else if (!strcmp(w[1], "error"))
			kind = HTR_GAP_ERROR, code = -1;
		else if (!strcmp(w[1], "runaway"))
			kind = HTR_GAP_ERROR, code = HTR_GAP_CODE_RUNAWAY;
		else
			return fail(s->r, "gap: bad kind %s", w[1]);
		for (k = 2; k < n; k++)
			if (!strcmp(w[k], "async"))
				async = 1;
			else if (!num(w[k], &a))
				return fail(s->r, "gap: bad word %s", w[k]);
		return report_gap(s, kind, code, async, a);
	}
	if (!strcmp(w[0], "resume") || !strcmp(w[0], "time") ||
	    !strcmp(w[0], "sync")) {
		if (n != 2 || !num(w[1], &a))
			return fail(s->r, "%s: want a number", w[0]);
		return report(s, w[0][0] == 'r' ? HTR_EV_RESUME :
				 w[0][0] == 't' ? HTR_EV_TIME : HTR_EV_SYNC, a);
	}
	if (!strcmp(w[0], "entrytime")) {
		/* No packed form: cpuwide.c calls it directly. */
		if (n != 2 || !num(w[1], &a))
			return fail(s->r, "entrytime: want a number");
		if (s->flags & TBS_VIA_EV)
			return fail(s->r, "entrytime: not through ev.c");
		return htr_tb__time_entry(s->tb, a) ? fail(s->r, "entrytime")
						    : 0;
	}
	if (!strcmp(w[0], "fn") || !strcmp(w[0], "cold") ||
	    !strcmp(w[0], "part")) {
		struct sym *y;

		if (s->nsym == MAXSYM)
			return fail(s->r, "too many symbols");
		y = &s->sym[s->nsym++];
		if (n != (w[0][0] == 'f' ? 3 : 4) || !num(w[1], &a) ||
		    !num(w[2], &b) || (n == 4 && !num(w[3], &c)))
			return fail(s->r, "%s: want START SIZE [FUNC]", w[0]);
		y->start = a;
		y->end = a + b;
		y->func = w[0][0] == 'f' ? a : c;
		y->entry = w[0][0] == 'c' ? c : a;
		return 0;
	}
	if (!strcmp(w[0], "deep")) {
		if (n != 2 || !num(w[1], &a))
			return fail(s->r, "deep: want N");
		for (; a; a--)
			if (report_run(s, 0x100000, 1, HTR_IC_CALL, 0x100001))
				return -1;
		return 0;
	}
	return fail(s->r, "unknown statement %s", w[0]);
}

static int parse(struct script *s, const char *script)
{
	char *copy = strdup(script), *p, *stmt, *save = NULL;
	int rc = 0;

	if (!copy)
		return fail(s->r, "out of memory");
	for (p = copy; *p; p++)
		if (*p == '#')
			while (*p && *p != '\n')
				*p++ = ' ';
		else if (*p == '\n')
			*p = ';';
	for (stmt = strtok_r(copy, ";", &save); stmt && !rc;
	     stmt = strtok_r(NULL, ";", &save)) {
		char *w[8], *ws = NULL, *t;
		int n = 0;

		for (t = strtok_r(stmt, " \t", &ws); t;
		     t = strtok_r(NULL, " \t", &ws)) {
			if (n == 8) {
				rc = fail(s->r, "statement too long");
				break;
			}
			w[n++] = t;
		}
		if (!rc && n)
			rc = statement(s, w, n);
	}
	free(copy);
	return rc;
}

struct printer {
	struct tbs_result *r;
	size_t len;
	unsigned flags;
};

static int print_block(const struct htr_file *f, uint32_t block,
		       uint32_t parent, uint32_t level, void *payload)
{
	struct printer *p = payload;
	struct htr_block_info bi;
	static const char *const names[] = {
		"late", "truncated", "gap", "implicit", "unwound",
	};
	char *out = p->r->tree;
	size_t cap = sizeof(p->r->tree);
	unsigned k;

	(void) parent;
	if (htr_block_get(f, block, &bi, sizeof(bi)) < 0)
		return 1;
	if (!p->r->nvisited++ || level > p->r->deepest_level) {
		p->r->deepest_level = level;
		p->r->deepest_flags = bi.flags;
		p->r->deepest_first = bi.first;
		p->r->deepest_last = bi.last;
	}
	if (p->flags & TBS_QUIET)
		return 0;
#define OUT(...)                                                        \
	do {                                                            \
		int m_ = snprintf(out + p->len, cap - p->len, __VA_ARGS__); \
		if (m_ < 0 || (size_t) m_ >= cap - p->len)              \
			return 2;                                       \
		p->len += (size_t) m_;                                  \
	} while (0)
	OUT("%*s%llu-%llu", (int) (2 * level), "",
	    (unsigned long long) bi.first, (unsigned long long) bi.last);
	if (bi.entry)
		OUT(" @%#llx", (unsigned long long) bi.entry);
	else
		OUT(" @?");
	for (k = 0; k < 5; k++)
		if (bi.flags & (1u << k))
			OUT(" %s", names[k]);
	if ((p->flags & TBS_ANCHOR) && (bi.flags & HTR_BLOCK_LATE))
		OUT(" ~%#llx", (unsigned long long) bi.anchor);
	OUT("\n");
#undef OUT
	return 0;
}

static int read_back(const char *path, unsigned flags, struct tbs_result *r)
{
	struct htr_file *f = NULL;
	struct printer p = { r, 0, flags };
	uint64_t i;
	int rc;

	if (htr_file_open(&f, path, NULL) < 0) {
		fail(r, "open %s: %s", path, htr_file_last_error(f));
		htr_file_close(f);
		return -1;
	}
	r->nblocks = htr_block_count(f);
	r->tree[0] = '\0';
	rc = htr_tree_visit(f, HTR_NONE, HTR_PREORDER, print_block, &p);
	r->ntsc = htr_tsc_count(f);
	for (i = 0; i < r->ntsc && i < 16; i++)
		htr_tsc_point(f, i, &r->tsc_id[i], &r->tsc_val[i]);
	htr_file_close(f);
	return rc ? fail(r, "walking the tree: %d", rc) : 0;
}

int tbs_run(const char *script, const char *path, unsigned flags,
	    struct tbs_result *r)
{
	struct script s;
	struct htr_writer *w = NULL;
	struct htr_writer_meta m;
	struct htr_err err;
	const struct htr_decode_gap *first;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	memset(&s, 0, sizeof(s));
	s.flags = flags;
	s.r = r;
	if (htr_writer__open_flags(&w, path, HTR_WRITER_NO_FSYNC |
				   HTR_WRITER_NO_SWEEP, &err) < 0)
		return fail(r, "writer: %s", err.msg);
	if (htr_tb__alloc(&s.tb, w) < 0) {
		fail(r, "out of memory");
		goto out;
	}
	htr_tb__set_extents(s.tb, extent, &s);
	if (parse(&s, script) < 0)
		goto out;
	if (s.nev && htr_ev__apply_n(s.tb, s.ev, s.nev)) {
		fail(r, "builder (through ev.c): %s",
		     htr_writer__err(w)->msg);
		goto out;
	}
	if (htr_tb__finish(s.tb) < 0) {
		fail(r, "finish: %s", htr_writer__err(w)->msg);
		goto out;
	}
	memset(&m, 0, sizeof(m));
	m.ninsns = r->ninsns = htr_tb__insns(s.tb);
	r->gaps = htr_tb__gaps(s.tb);
	r->errors = htr_tb__errors(s.tb, &r->runaways, &first);
	r->folded = htr_tb__folded(s.tb);
	r->funcs = htr_tb__funcs(s.tb);
	if (htr_writer__commit(w, &m) < 0) {
		fail(r, "commit: %s", htr_writer__err(w)->msg);
		goto out;
	}
	r->max_depth = htr_writer__max_depth(w);
	rc = read_back(path, flags, r);
out:
	htr_tb__free(s.tb);
	htr_writer__free(w);
	free(s.ev);
	return rc;
}
