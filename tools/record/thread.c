/*
 * One guest thread: its executed instructions in, its Intel PT and its
 * ground truth out.
 *
 * Every instruction is handled once its successor is known (the next
 * address qemu ran on the thread), which is what the packets depend on.
 * Tracing is user-only with optional IP filters:
 *  - a branch that stays traced gives TNT (conditional, compressed ret) or
 *    TIP (indirect, far, uncompressed ret) as a processor would;
 *  - a branch, or a fall-through, out of the traced ranges gives TIP.PGD
 *    with the target (--skl014: none for a direct jump or call, as that
 *    erratum may leave out); syscall/int gives TIP.PGD with the IP suppressed
 *    (the kernel is not traced); a signal delivered between instructions
 *    gives FUP + TIP.PGD (asynchronous);
 *  - the first traced instruction after any of these gives MODE.Exec +
 *    TIP.PGE.
 * A signal delivered right after a branch whose successor the log cannot
 * tell (conditional, indirect, ret) waits for sigreturn, which names the
 * interrupted IP; the thread's addresses are held meanwhile (a handler's
 * worth, bounded).
 *
 * The truth follows the frames of the real execution: a near call opens a
 * frame, a return closes the frame whose return address it lands at (and,
 * flagged U, the frames above it: longjmp and exceptions leave frames
 * without a return), and so does an indirect jump that lands at an outer
 * frame's return address or inside an outer frame's function (longjmp's
 * `jmp *%rdx`, an unwinder's jump to a landing pad: the recorder sees no
 * stack pointer, so it goes by the ELF symbols, FUNC.cold counting as
 * FUNC); a signal handler is a frame of its own.  A frame is a
 * block once it ran a traced instruction itself.
 */
#include "rec_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NO_RET UINT64_MAX
#define MAX_HELD (1u << 24)
#define MAX_MOVED (1u << 16)
#define MAX_DEPTH (1u << 20)

struct frame {
	uint64_t ret;           /* return address, NO_RET when not a call */
	uint64_t entry;
	uint64_t anchor;        /* inside its function: its entry, or the
				 * function a jump to an entry went to */
	int64_t pre, parent;
	uint64_t first, tsc_first;
	uint32_t func;
	uint8_t visible, late;
	uint8_t entered_off;    /* its first instruction was not traced */
	uint8_t traced_call;    /* opened by a traced call */
	uint64_t resume;        /* a handler's: where the code it interrupted
				 * resumes, 0 if not known */
};

struct held {
	uint64_t pc;
	int sig;
};

struct rec_thread {
	struct rec_ctx *c;
	unsigned idx;           /* creation order: the thread's number */
	FILE *truth;            /* NULL: no truth (rec_ctx.truth), none of
				 * its lines is even formatted */
	char truth_path[512];
	/* where packets go: own (per-thread mode) or the CPU the thread runs
	 * on (--cpus; NULL while it runs on none) */
	struct rec_stream own, *s;
	int tsc_due;            /* switched in: a TSC before the next PGE */
	int preempted;          /* switched out while tracing was on */
	/* the instruction waiting for its successor */
	struct rec_insn cur;
	int have_cur;
	int on;                 /* packets are generated */
	int started;            /* something was traced */
	uint64_t id;            /* next instruction ID */
	uint64_t last_id, last_tsc;
	uint64_t dtime;         /* the time a decoder reports now */
	uint64_t first_tsc;
	/* return compression, as the decoder's 64-entry stack */
	uint64_t comp[64];
	unsigned comp_n, comp_top;
	/* frames */
	struct frame *st;
	size_t depth, cap;
	/* Frames below this index and below the innermost are visible, or
	 * stay unseen until they are the innermost again: visible() starts
	 * here, so a recursion 10^5 deep costs no scan per instruction. */
	size_t vis_from;
	int64_t next_pre;
	/* functions named in the truth: entry -> index */
	uint64_t *fkeys;
	uint32_t *fvals;
	size_t fn, fcap;
	/* a signal after an ambiguous branch: 1 until sigreturn, 2 until
	 * the call a handler made the interrupted code make returns */
	int holding;
	uint64_t held_ret;      /* a held near ret: the innermost frame's
				 * return address, where it surely went
				 * unless a longjmp-like return; else 0 */
	uint64_t moved_pc;      /* 2: where sigreturn resumed */
	size_t moved_at;        /* 2: hq's length at sigreturn */
	struct rec_insn held_insn;
	struct held *hq;
	size_t hn, hcap;
	struct rec_insn hlast;  /* the last held instruction */
	uint64_t blocks, gaps;
	int header_done;
	int retracted;          /* cur did not run: a signal came first */
	uint64_t sig_resume;    /* a handler returned: where the code it
				 * interrupted resumes, 0 if not known */
	/* --ring with a truth: the truth goes to segment files beside the
	 * trace's (truth_path.K for trace segment K), made and removed with
	 * them; a window's truth is made from them (window_truth()). */
	int ring;
	uint64_t truth_k, truth_oldest;    /* the current and oldest kept */
	uint64_t win_insns, win_blocks, win_gaps;   /* the last window's */
};

/* ------------------------------------------------------------------ */
/* truth */

static void write_header(const struct rec_thread *t, FILE *fp)
{
	struct rec_mod *exe = NULL;
	size_t i;

	for (i = 0; i < t->c->im.nmods; i++)
		if (!strcmp(t->c->im.mods[i]->path, t->c->exe))
			exe = t->c->im.mods[i];
	fprintf(fp, "htr-synth-truth 1\nseed 0\nscenario record\n"
		"elf %s\ntrace t%u.pt\nbase %#llx\n"
		"decoder cpuid_0x15_eax 1 cpuid_0x15_ebx 1 mtc_freq 0 "
		"nom_freq 0\n", t->c->exe, t->idx,
		exe ? (unsigned long long) exe->base : 0ull);
}

static void header(struct rec_thread *t)
{
	if (t->header_done || !t->truth)
		return;
	t->header_done = 1;
	write_header(t, t->truth);
}

static void write_func(const struct rec_thread *t, FILE *fp, size_t idx,
		       uint64_t entry)
{
	struct rec_mod *m = rec_image_mod(&t->c->im, entry);
	const char *name = m ? strrchr(m->path, '/') + 1 : "?";

	fprintf(fp, "func %zu %#llx 0 %.40s+%#llx\n", idx,
		(unsigned long long) entry, name,
		(unsigned long long) (m ? entry - m->base : entry));
}

static uint32_t func_of(struct rec_thread *t, uint64_t entry)
{
	size_t h;

	if (t->fn * 2 + 2 > t->fcap) {
		size_t n = t->fcap ? t->fcap * 2 : 1024, i;
		uint64_t *k = malloc(n * sizeof(*k));
		uint32_t *v = malloc(n * sizeof(*v));

		if (!k || !v) {
			free(k);
			free(v);
			rec_fail(t->c, "out of memory");
			return 0;
		}
		memset(k, 0xff, n * sizeof(*k));
		for (i = 0; i < t->fcap; i++) {
			if (t->fkeys[i] == UINT64_MAX)
				continue;
			h = (size_t) (t->fkeys[i] * 0x9e3779b97f4a7c15ull >> 24) &
			    (n - 1);
			while (k[h] != UINT64_MAX)
				h = (h + 1) & (n - 1);
			k[h] = t->fkeys[i];
			v[h] = t->fvals[i];
		}
		free(t->fkeys);
		free(t->fvals);
		t->fkeys = k;
		t->fvals = v;
		t->fcap = n;
	}
	h = (size_t) (entry * 0x9e3779b97f4a7c15ull >> 24) & (t->fcap - 1);
	while (t->fkeys[h] != UINT64_MAX) {
		if (t->fkeys[h] == entry)
			return t->fvals[h];
		h = (h + 1) & (t->fcap - 1);
	}
	t->fkeys[h] = entry;
	t->fvals[h] = (uint32_t) t->fn;
	write_func(t, t->truth, t->fn, entry);
	return (uint32_t) t->fn++;
}

/* Frame @i gets its place in the tree at the traced instruction at @pc. */
static void show(struct rec_thread *t, size_t i, uint64_t pc)
{
	struct frame *f = &t->st[i];
	size_t k;

	f->visible = 1;
	f->pre = t->next_pre++;
	f->parent = -1;
	for (k = i; k-- > 0;)
		if (t->st[k].visible) {
			f->parent = t->st[k].pre;
			break;
		}
	f->first = t->last_id;
	f->tsc_first = t->dtime;
	f->entered_off = !f->traced_call && pc != f->entry;
	f->func = t->truth ? func_of(t, f->entry) : 0;
}

/* A traced instruction at @pc ran in the innermost frame: that frame is a
 * block, and so is every open frame whose call was traced (a decoder saw
 * the call, and its target in the TIP.PGD that left the traced code). */
static void visible(struct rec_thread *t, uint64_t pc)
{
	size_t i;

	if (!t->depth)
		return;
	for (i = t->vis_from < t->depth - 1 ? t->vis_from : t->depth - 1;
	     i < t->depth; i++)
		if (!t->st[i].visible &&
		    (t->st[i].traced_call || i + 1 == t->depth))
			show(t, i, pc);
	t->vis_from = t->depth;
}

/* The block line of frame @f closed now with @flags (close_frame()). */
static void block_line(const struct rec_thread *t, const struct frame *f,
		       const char *flags, char *buf, size_t size)
{
	char fl[8];
	size_t n = 0;

	if (f->late)
		fl[n++] = 'L';
	/* E (an extension of TRUTH.md's flags): the call entered untraced
	 * code that later ran traced code; a decoder sees that code's
	 * address as the entry. */
	else if (f->entered_off)
		fl[n++] = 'E';
	for (; *flags && n < 6; flags++)
		fl[n++] = *flags;
	if (!n)
		fl[n++] = '-';
	fl[n] = 0;
	snprintf(buf, size, "block %lld %lld %u %llu %llu %llu %llu %s\n",
		 (long long) f->pre, (long long) f->parent, f->func,
		 (unsigned long long) f->first, (unsigned long long) t->last_id,
		 (unsigned long long) f->tsc_first,
		 (unsigned long long) t->last_tsc, fl);
}

static void close_frame(struct rec_thread *t, const struct frame *f,
			const char *flags)
{
	char line[256];

	if (!f->visible)
		return;
	t->blocks++;
	if (!t->truth)
		return;
	block_line(t, f, flags, line, sizeof(line));
	fputs(line, t->truth);
}

static void push_frame(struct rec_thread *t, uint64_t ret, uint64_t entry)
{
	struct frame *f;

	if (t->depth == t->cap) {
		size_t n = t->cap ? t->cap * 2 : 256;
		struct frame *s;

		if (n > MAX_DEPTH) {
			rec_fail(t->c, "thread %u: more than %u nested calls",
				 t->idx, MAX_DEPTH);
			return;
		}
		s = realloc(t->st, n * sizeof(*s));
		if (!s) {
			rec_fail(t->c, "out of memory");
			return;
		}
		t->st = s;
		t->cap = n;
	}
	if (t->vis_from > t->depth)
		t->vis_from = t->depth;
	f = &t->st[t->depth++];
	memset(f, 0, sizeof(*f));
	f->ret = ret;
	f->entry = entry;
	f->anchor = entry;
	f->pre = -1;
	/* Frames open before anything was traced were entered before the
	 * trace began. */
	f->late = !t->started;
}

/* A return past the outermost frame, landing at @to: that frame was a
 * callee all along.  Its caller, open since tracing began, adopts it (an
 * L block starts where its first child did: TRUTH.md) and goes on. */
static void past_outermost(struct rec_thread *t, uint64_t to, const char *fl)
{
	struct frame old = { 0 };
	int64_t pre = -1;

	if (t->depth && t->st[0].visible) {
		old = t->st[0];
		pre = t->next_pre++;
		old.parent = pre;
		close_frame(t, &old, fl);
	}
	t->depth = 0;
	push_frame(t, NO_RET, to);
	if (!t->depth)
		return;
	t->st[0].late = 1;
	if (pre >= 0) {
		struct frame *f = &t->st[0];

		f->visible = 1;
		f->pre = pre;
		f->parent = -1;
		f->first = old.first;
		f->tsc_first = old.tsc_first;
		f->func = t->truth ? func_of(t, to) : 0;
	}
}

/* A return from @in landing at @to. */
static void do_return(struct rec_thread *t, uint64_t to, int traced)
{
	const char *fl = traced ? "" : "R";
	const char *ufl = traced ? "U" : "UR";
	size_t i;

	for (i = t->depth; i-- > 0;)
		if (t->st[i].ret == to)
			break;
	if (i == (size_t) -1 || i >= t->depth) {
		/* Matches no open frame: the innermost one returns (a signal
		 * handler returning to its restorer, a retpoline). */
		if (t->depth <= 1) {
			past_outermost(t, to, fl);
			return;
		}
		close_frame(t, &t->st[t->depth - 1], fl);
		t->depth--;
		t->sig_resume = t->st[t->depth].resume;
		return;
	}
	while (t->depth > i + 1) {
		close_frame(t, &t->st[t->depth - 1], ufl);
		t->depth--;
	}
	close_frame(t, &t->st[i], fl);
	t->depth = i;
	if (!t->depth) {
		push_frame(t, NO_RET, to);
		t->st[0].late = 1;
	}
}

/* An indirect jump at @from landing at @to. */
static void do_jump(struct rec_thread *t, uint64_t from, uint64_t to,
		    int traced)
{
	struct rec_image *im = &t->c->im;
	uint64_t lo, fn, slo, sfn, elo, efn;
	size_t i, keep;

	if (!t->depth)
		return;
	/* A return in disguise. */
	if (t->st[t->depth - 1].ret == to) {
		do_return(t, to, traced);
		return;
	}
	for (i = t->depth - 1; i-- > 0;)
		if (t->st[i].ret == to) {
			keep = i;
			goto unwind;
		}
	if (!rec_image_func(im, to, &lo, &fn))
		return;
	if (to == lo) {
		/* A PLT stub's jump, a tail call. */
		t->st[t->depth - 1].anchor = to;
		return;
	}
	if (rec_image_func(im, from, &slo, &sfn) && sfn == fn)
		return;
	for (i = t->depth - 1; i-- > 0;)
		if (rec_image_func(im, t->st[i].anchor, &elo, &efn) &&
		    efn == fn) {
			keep = i + 1;
			goto unwind;
		}
	return;
unwind:
	while (t->depth > keep) {
		close_frame(t, &t->st[t->depth - 1], traced ? "U" : "UR");
		t->depth--;
	}
}

/* ------------------------------------------------------------------ */
/* --ring: the truth of a window */

/* A truth segment starts with what a decoder starting at its trace
 * segment's PSB+ lacks (an extension of TRUTH.md, only in these files):
 * "ring ID PRE TSC DEPTH", the ID of the PSB's instruction, the PRE the
 * next block gets, the time the PSB+ says and how many frames are open,
 * then "open PRE" for each open frame, outermost first (-1: not a block
 * yet). */
static void seg_header(struct rec_thread *t)
{
	size_t i;

	fprintf(t->truth, "ring %llu %lld %llu %zu\n",
		(unsigned long long) t->id, (long long) t->next_pre,
		(unsigned long long) t->dtime, t->depth);
	for (i = 0; i < t->depth; i++)
		fprintf(t->truth, "open %lld\n", t->st[i].visible ?
			(long long) t->st[i].pre : -1ll);
}

static void seg_path(const struct rec_thread *t, uint64_t k, char *buf,
		     size_t size)
{
	rec_ring_path(buf, size, t->truth_path, k);
}

/* The trace started segment t->s's newest segment: so does the truth;
 * the truth segments the trace dropped go too. */
static void truth_rotate(struct rec_thread *t)
{
	const struct rec_ring *r = &t->s->ring;
	char p[600];

	if (t->truth && fclose(t->truth) != 0)
		rec_fail(t->c, "%s: cannot write the thread's truth",
			 t->c->tmpdir);
	/* the old ones first: never more segments than the trace keeps */
	for (; t->truth_oldest < r->seg[0].k; t->truth_oldest++) {
		seg_path(t, t->truth_oldest, p, sizeof(p));
		unlink(p);
	}
	t->truth_k = r->seg[r->n - 1].k;
	seg_path(t, t->truth_k, p, sizeof(p));
	t->truth = fopen(p, "w");
	if (!t->truth) {
		rec_fail(t->c, "%s: %s", p, strerror(errno));
		/* what follows still has somewhere to go */
		t->truth = fopen("/dev/null", "w");
		return;
	}
	seg_header(t);
}

struct win_open {
	int64_t pre;
	size_t idx;
};

/* Turning the run's truth lines into a window's. */
struct win {
	uint64_t w0;            /* the window's first instruction */
	int64_t p0;             /* the first PRE given in the window */
	uint64_t tsc0;
	size_t depth;           /* frames open at w0 */
	struct win_open *byp;   /* those that were blocks, by PRE */
	size_t nbyp;
	uint8_t *closed;        /* per open frame: returned in the window */
	FILE *out;
	uint64_t blocks, gaps;
};

static int win_cmp(const void *a, const void *b)
{
	const struct win_open *x = a, *y = b;

	return x->pre < y->pre ? -1 : x->pre > y->pre;
}

/* The index of the open frame whose PRE is @pre, or -1. */
static int64_t win_index(const struct win *w, int64_t pre)
{
	size_t lo = 0, hi = w->nbyp;

	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;

		if (w->byp[m].pre == pre)
			return (int64_t) w->byp[m].idx;
		if (w->byp[m].pre < pre)
			lo = m + 1;
		else
			hi = m;
	}
	return -1;
}

/* PREs in the window: the open frames by depth (0..depth-1), then the
 * blocks shown in the window in the order the run showed them. */
static int64_t win_pre(const struct win *w, int64_t pre)
{
	int64_t i;

	if (pre < 0)
		return -1;
	i = win_index(w, pre);
	if (i >= 0)
		return i;
	return pre >= w->p0 ? pre - w->p0 + (int64_t) w->depth : -1;
}

/* One line of the run's truth, as the window's.  A decoder starting at
 * w0 knows only the innermost open frame (a late block from instruction
 * 0); a return out of the outermost frame it knows makes it adopt the
 * frame returned to (TRUTH.md's L blocks, "starts where its first child
 * did").  So an open frame is a block of the window if it is the
 * innermost or the frame above it returned in the window; a frame closed
 * only by the end of the trace (T) adopts nothing. */
static void win_line(struct win *w, const char *line)
{
	long long pre, parent;
	unsigned long long first, last, tf, tl, id;
	unsigned func;
	char fl[16], nf[16], kind[32];
	int64_t i;

	if (!strncmp(line, "gap ", 4)) {
		if (sscanf(line, "gap %llu %31s", &id, kind) == 2 && id >= w->w0) {
			fprintf(w->out, "gap %llu %s\n", id - w->w0, kind);
			w->gaps++;
		}
		return;
	}
	if (strncmp(line, "block ", 6) ||
	    sscanf(line, "block %lld %lld %u %llu %llu %llu %llu %15s", &pre,
		   &parent, &func, &first, &last, &tf, &tl, fl) != 8)
		return;
	i = win_index(w, pre);
	if (i >= 0 || first <= w->w0) {
		size_t idx = i >= 0 ? (size_t) i : w->depth - 1, n = 0;
		int trunc = strchr(fl, 'T') != NULL;
		const char *f;

		if (idx + 1 < w->depth && !w->closed[idx + 1])
			return;
		w->closed[idx] = !trunc;
		nf[n++] = 'L';
		for (f = fl; *f && n < sizeof(nf) - 1; f++)
			if (*f != 'L' && *f != 'E' && *f != '-')
				nf[n++] = *f;
		nf[n] = 0;
		fprintf(w->out, "block %lld %lld %u 0 %llu %llu %llu %s\n",
			(long long) win_pre(w, pre),
			trunc ? -1ll : (long long) win_pre(w, parent), func,
			last - w->w0, (unsigned long long) w->tsc0, tl, nf);
	} else {
		fprintf(w->out, "block %lld %lld %u %llu %llu %llu %llu %s\n",
			(long long) win_pre(w, pre),
			(long long) win_pre(w, parent), func, first - w->w0,
			last - w->w0, tf, tl, fl);
	}
	w->blocks++;
}

/* The first segment's header (seg_header()). */
static int win_start(struct win *w, FILE *in)
{
	char line[256];
	unsigned long long id, tsc;
	long long p0, pre;
	size_t depth, i;

	if (!fgets(line, sizeof(line), in) ||
	    sscanf(line, "ring %llu %lld %llu %zu", &id, &p0, &tsc,
		   &depth) != 4 || !depth)
		return -1;
	w->w0 = id;
	w->p0 = p0;
	w->tsc0 = tsc;
	w->depth = depth;
	w->byp = malloc(depth * sizeof(*w->byp));
	w->closed = calloc(depth, 1);
	if (!w->byp || !w->closed)
		return -1;
	for (i = 0; i < depth; i++) {
		if (!fgets(line, sizeof(line), in) ||
		    sscanf(line, "open %lld", &pre) != 1)
			return -1;
		if (pre >= 0) {
			w->byp[w->nbyp].pre = pre;
			w->byp[w->nbyp++].idx = i;
		}
	}
	qsort(w->byp, w->nbyp, sizeof(*w->byp), win_cmp);
	return 0;
}

/* Write the truth of the window @r (the trace segments kept) to @out:
 * its instruction IDs from the window's first, the frames open there late
 * blocks; for a running thread (@running) the frames open now end it
 * (T), as the snapshot's trace ends here (rec_thread_window()).  The
 * counts go to t->win_*.  Returns 0 or -1 (a segment is unreadable). */
static int window_truth(struct rec_thread *t, const struct rec_ring *r,
			FILE *out, int running)
{
	struct win w;
	uint64_t *entries = NULL;
	char p[600], line[256];
	size_t i;
	int rc = -1;

	memset(&w, 0, sizeof(w));
	w.out = out;
	if (t->truth && fflush(t->truth) != 0)
		return -1;
	write_header(t, out);
	entries = malloc((t->fn ? t->fn : 1) * sizeof(*entries));
	if (!entries)
		return -1;
	for (i = 0; i < t->fcap; i++)
		if (t->fkeys[i] != UINT64_MAX)
			entries[t->fvals[i]] = t->fkeys[i];
	for (i = 0; i < t->fn; i++)
		write_func(t, out, i, entries[i]);
	for (i = 0; i < r->n; i++) {
		FILE *in;

		seg_path(t, r->seg[i].k, p, sizeof(p));
		in = fopen(p, "r");
		if (!in || (i == 0 && win_start(&w, in) < 0)) {
			if (in)
				fclose(in);
			goto out;
		}
		while (fgets(line, sizeof(line), in))
			win_line(&w, line);
		fclose(in);
	}
	if (!r->n)
		goto out;
	for (i = running ? t->depth : 0; i-- > 0;)
		if (t->st[i].visible) {
			block_line(t, &t->st[i], "T", line, sizeof(line));
			win_line(&w, line);
		}
	if (running && t->on) {
		/* the tail's disable (window_tail()), as rec_thread_end()
		 * has it */
		snprintf(line, sizeof(line), "gap %llu disabled\n",
			 (unsigned long long) t->id);
		win_line(&w, line);
	}
	t->win_insns = t->id - w.w0;
	t->win_blocks = w.blocks;
	t->win_gaps = w.gaps;
	rc = ferror(out) ? -1 : 0;
out:
	free(entries);
	free(w.byp);
	free(w.closed);
	return rc;
}

/* ------------------------------------------------------------------ */
/* packets */

static void comp_reset(struct rec_thread *t)
{
	t->comp_n = 0;
}

static void comp_push(struct rec_thread *t, uint64_t ret)
{
	t->comp_top = (t->comp_top + 1) % 64;
	t->comp[t->comp_top] = ret;
	if (t->comp_n < 64)
		t->comp_n++;
}

/* Timing: a TSC packet right before the TNT or TIP packet that a decoder
 * fetches at this instruction, when the clock moved on enough.  The time
 * a decoder reports at an instruction is then the last such value. */
static void timing(struct rec_thread *t)
{
	uint64_t now = t->c->clock;

	if (now - t->dtime >= t->c->o->tsc_gran) {
		ptw_tsc(&t->s->w, now);
		t->dtime = now;
	}
}

static void tnt(struct rec_thread *t, int taken)
{
	if (ptw_tnt_starts(&t->s->w))
		timing(t);
	ptw_tnt(&t->s->w, taken, 6);
}

static void tip(struct rec_thread *t, uint64_t ip)
{
	ptw_tnt_flush(&t->s->w);
	timing(t);
	ptw_ip(&t->s->w, ppt_tip, ip);
}

static void psb(struct rec_thread *t, uint64_t fup)
{
	/* --ring: a new segment starts with this PSB+ (the TNT bits before
	 * it belong to the old one). */
	ptw_tnt_flush(&t->s->w);
	if (rec_stream_psb_due(t->s, t->c->o->psb_period) < 0)
		rec_fail(t->c, "%s: cannot write the thread's trace",
			 t->c->tmpdir);
	if (t->ring && t->s->ring.n &&
	    t->s->ring.seg[t->s->ring.n - 1].k != t->truth_k)
		truth_rotate(t);
	ptw_simple(&t->s->w, ppt_psb);
	/* PSB+ repeats the decoder's time: it reads PSB+ ahead. */
	ptw_tsc(&t->s->w, t->dtime);
	if (fup) {
		ptw_mode_exec(&t->s->w);
		ptw_ip(&t->s->w, ppt_fup, fup);
	}
	ptw_simple(&t->s->w, ppt_psbend);
	t->s->psb_last = ptw_offset(&t->s->w);
	t->s->synced = 1;
	/* Conservatively, nothing before a PSB+ is compressed after it. */
	comp_reset(t);
}

static void disable(struct rec_thread *t, uint64_t ip, int suppressed)
{
	if (suppressed)
		ptw_ip_suppressed(&t->s->w, ppt_tip_pgd);
	else
		ptw_ip(&t->s->w, ppt_tip_pgd, ip);
	t->on = 0;
}

/* Tracing resumes at @pc: MODE.Exec + TIP.PGE, after the PSB+ a decoder
 * needs to start on this stream, and after a TSC when the thread was just
 * switched in (the decoder must see that time passed on this CPU). */
static void enable(struct rec_thread *t, uint64_t pc)
{
	if (t->tsc_due) {
		t->tsc_due = 0;
		t->dtime = t->c->clock;
		if (t->s->synced)
			ptw_tsc(&t->s->w, t->dtime);
	}
	if (!t->s->synced)
		psb(t, 0);
	ptw_mode_exec(&t->s->w);
	ptw_ip(&t->s->w, ppt_tip_pge, pc);
	comp_reset(t);
	t->on = 1;
	t->started = 1;
}

/* The thread leaves its CPU (--cpus): it entered the kernel. */
static void leave_cpu(struct rec_thread *t)
{
	if (!t->c->sched.n)
		return;
	rec_sched_release(t->c, t->idx);
	t->s = NULL;
}

/* @in is about to run: enable tracing if it is traced, PSB+ if due. */
static void arrive(struct rec_thread *t, const struct rec_insn *in)
{
	/* After a syscall the thread needs a CPU again (--cpus). */
	rec_sched_need(t->c, t, t->idx);
	if (t->c->failed)
		return;
	if (!t->on && in->traced) {
		if (!t->started) {
			header(t);
		} else {
			if (t->truth)
				fprintf(t->truth, "gap %llu disabled\n",
					(unsigned long long) t->id);
			t->gaps++;
		}
		enable(t, in->pc);
	} else if (t->on && ptw_offset(&t->s->w) - t->s->psb_last >=
		   t->c->o->psb_period) {
		ptw_tnt_flush(&t->s->w);
		psb(t, in->pc);
	}
}

/* @in ran and @next (traced or not: @ntr) runs after it. */
static void flow(struct rec_thread *t, const struct rec_insn *in, uint64_t next,
		 int ntr)
{
	int traced = t->on;

	t->c->clock++;
	if (traced) {
		switch (in->kind) {
		case RK_OTHER:
			if (!ntr)
				disable(t, next, 0);
			break;
		case RK_CALL:
			comp_push(t, in->pc + in->len);
			/* fall through */
		case RK_JMP:
			if (!ntr)
				disable(t, next, t->c->o->skl014);
			break;
		case RK_COND:
			if (ntr)
				tnt(t, next != in->pc + in->len);
			else
				disable(t, next, 0);
			break;
		case RK_ICALL:
			comp_push(t, in->pc + in->len);
			/* fall through */
		case RK_IJMP:
		case RK_FAR:
			if (ntr)
				tip(t, next);
			else
				disable(t, next, 0);
			break;
		case RK_RET:
			if (!ntr) {
				disable(t, next, 0);
			} else if (!t->c->o->no_ret_compression && t->comp_n &&
				   t->comp[t->comp_top] == next) {
				t->comp_top = (t->comp_top + 63) % 64;
				t->comp_n--;
				tnt(t, 1);
			} else {
				tip(t, next);
			}
			break;
		case RK_SYSCALL:
			disable(t, 0, 1);
			break;
		}
		t->last_id = t->id++;
		t->last_tsc = t->dtime;
		visible(t, in->pc);
	}
	switch (in->kind) {
	case RK_CALL:
	case RK_ICALL:
		push_frame(t, in->pc + in->len, next);
		if (t->depth)
			t->st[t->depth - 1].traced_call = (uint8_t) traced;
		break;
	case RK_RET:
		do_return(t, next, traced);
		break;
	case RK_IJMP:
		do_jump(t, in->pc, next, traced);
		break;
	case RK_SYSCALL:
		/* In the kernel, which may block: the CPU is free. */
		leave_cpu(t);
		t->c->clock += REC_TICKS_SYSCALL;
		break;
	default:
		break;
	}
}

/* A signal interrupts the thread before @next: FUP + TIP.PGD. */
static void interrupt(struct rec_thread *t, uint64_t next)
{
	if (t->on) {
		ptw_ip(&t->s->w, ppt_fup, next);
		disable(t, 0, 1);
	}
}

/* A signal handler starts at @h (a frame the kernel made) for code that
 * resumes at @resume (0: not known yet). */
static void handler(struct rec_thread *t, uint64_t h, uint64_t resume)
{
	t->c->clock += REC_TICKS_SIGNAL;
	push_frame(t, NO_RET, h);
	if (t->depth)
		t->st[t->depth - 1].resume = resume;
}

static const struct rec_insn *insn(struct rec_thread *t, uint64_t pc)
{
	const struct rec_insn *in = rec_image_insn(&t->c->im, pc,
						   t->c->executed);

	if (!in) {
		/* The image wrote its message into the buffer rec_fail()
		 * writes: copy it out first. */
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", t->c->im.err);
		rec_fail(t->c, "%s", msg);
	}
	return in;
}

static int hold(struct rec_thread *t, uint64_t pc, int sig)
{
	if (t->hn == t->hcap) {
		size_t n = t->hcap ? t->hcap * 2 : 4096;
		struct held *q;

		if (n > MAX_HELD) {
			rec_fail(t->c, "thread %u: a signal handler ran more "
				 "than %u instructions after an ambiguous "
				 "branch", t->idx, MAX_HELD);
			return -1;
		}
		q = realloc(t->hq, n * sizeof(*q));
		if (!q) {
			rec_fail(t->c, "out of memory");
			return -1;
		}
		t->hq = q;
		t->hcap = n;
	}
	t->hq[t->hn].pc = pc;
	t->hq[t->hn].sig = sig;
	t->hn++;
	return 0;
}

static int ambiguous(const struct rec_insn *in)
{
	return in->kind == RK_COND || in->kind == RK_IJMP ||
	       in->kind == RK_ICALL || in->kind == RK_RET || in->kind == RK_FAR;
}

static int step(struct rec_thread *t, uint64_t pc, int sig,
		const struct rec_insn *given);

/* A syscall returned to @pc.  If it is the sigreturn of a handler that
 * moved the resume point of the code it interrupted, the code there runs
 * as if called from the interrupted instruction: Go's asynchronous
 * preemption pushes that address and makes the code call asyncPreempt,
 * which returns to it.  One instruction further is no call but a
 * skipped instruction (a SIGSEGV handler's). */
static int resumed(struct rec_thread *t, uint64_t pc, int traced)
{
	uint64_t r = t->sig_resume;
	const struct rec_insn *in;

	t->sig_resume = 0;
	if (!r || pc == r)
		return 0;
	/* The syscall before r, restarted: the signal interrupted it
	 * (SA_RESTART), and the kernel resumes at the syscall instruction
	 * itself to make it again.  No call. */
	if (pc < r && r - pc <= 15) {
		in = insn(t, pc);
		if (!in)
			return -1;
		if (in->kind == RK_SYSCALL && pc + in->len == r)
			return 0;
	}
	in = insn(t, r);
	if (!in)
		return -1;
	if (pc != r + in->len) {
		push_frame(t, r, pc);
		/* A decoder sees where it went when tracing resumes there,
		 * even if a signal comes before its first instruction (the
		 * handler then runs inside it, as in a traced call). */
		if (t->depth)
			t->st[t->depth - 1].traced_call = (uint8_t) traced;
	}
	return t->c->failed ? -1 : 0;
}

/* The held branch went to @to; the thread runs @n (a signal before it:
 * @sig) after what was held. */
static int release(struct rec_thread *t, uint64_t to, uint64_t n, int sig)
{
	struct held *q = t->hq;
	size_t i, hn = t->hn;
	const struct rec_insn *b = &t->held_insn, *in;
	struct rec_insn h;

	in = insn(t, to);
	if (!in)
		return -1;
	t->holding = 0;
	t->hq = NULL;
	t->hn = t->hcap = 0;
	flow(t, b, to, in->traced);
	interrupt(t, to);
	handler(t, q[0].pc, to);
	in = insn(t, q[0].pc);
	if (!in) {
		free(q);
		return -1;
	}
	h = *in;
	arrive(t, &h);
	t->cur = h;
	for (i = 1; i < hn && !t->c->failed; i++)
		step(t, q[i].pc, q[i].sig, NULL);
	free(q);
	return step(t, n, sig, NULL);
}

/* @given: the instruction at @pc if the caller has it, else NULL. */
static int step(struct rec_thread *t, uint64_t pc, int sig,
		const struct rec_insn *given)
{
	const struct rec_insn *pin;
	struct rec_insn in, prev;

	if (t->c->failed)
		return -1;
	if (t->holding) {
		const struct rec_insn *b = &t->held_insn;
		uint64_t fall = b->pc + b->len;

		/* A syscall resuming elsewhere without a signal is the
		 * sigreturn that ends the handler: at the held branch's
		 * successor.  Unless the handler moved the resume point (Go's
		 * asynchronous preemption makes the interrupted code call a
		 * function first): a conditional branch's successor is then
		 * where that call returns to. */
		if (t->holding == 1 && !sig && t->hlast.kind == RK_SYSCALL &&
		    pc != t->hlast.pc + t->hlast.len) {
			if (b->kind == RK_COND ? pc == fall || pc == b->target :
			    !t->held_ret || pc == t->held_ret)
				return release(t, pc, pc, 0);
			/* A near ret goes to the innermost frame's caller: a
			 * sigreturn elsewhere resumes code the handler made
			 * the interrupted code call, as for a conditional
			 * branch.  (qemu-user delivers signals between
			 * translation blocks, which end at branches: the tcg
			 * engine sees this after nearly every ret.) */
			t->holding = 2;
			t->moved_at = t->hn;
			t->moved_pc = pc;
		} else if (t->holding == 2 && !sig && t->hlast.kind == RK_RET &&
			   (b->kind == RK_COND ? pc == fall || pc == b->target :
			    pc == t->held_ret)) {
			return release(t, pc, pc, 0);
		} else if (t->holding == 2 &&
			   t->hn - t->moved_at >= MAX_MOVED) {
			/* It has not returned (it switched stacks): the
			 * branch's successor is lost, the trace says it fell
			 * through (a ret: went where sigreturn resumed). */
			t->c->oddities++;
			return release(t, b->kind == RK_COND ? fall :
				       t->moved_pc, pc, sig);
		}
		if (hold(t, pc, sig) < 0)
			return -1;
		pin = given ? given : insn(t, pc);
		if (!pin)
			return -1;
		t->hlast = *pin;
		return 0;
	}
	pin = given ? given : insn(t, pc);
	if (!pin)
		return -1;
	in = *pin;
	if (t->retracted) {
		/* qemu logged cur, then delivered a signal before running
		 * it: an interrupt at cur's address. */
		t->retracted = 0;
		if (sig) {
			interrupt(t, t->cur.pc);
			handler(t, pc, t->cur.pc);
			arrive(t, &in);
			t->cur = in;
			return t->c->failed ? -1 : 0;
		}
		if (pc == t->cur.pc)
			return 0;
	}
	if (!t->have_cur) {
		t->have_cur = 1;
		arrive(t, &in);
		t->cur = in;
		return 0;
	}
	prev = t->cur;
	if (!sig && prev.rep && pc == prev.pc)
		return 0;
	if (!sig) {
		uint64_t fall = prev.pc + prev.len;
		int odd = 0;

		switch (prev.kind) {
		case RK_OTHER:
			odd = pc != fall;
			break;
		case RK_JMP:
		case RK_CALL:
			odd = pc != prev.target;
			break;
		case RK_COND:
			odd = pc != fall && pc != prev.target;
			break;
		default:
			break;
		}
		if (odd) {
			/* No branch explains it (qemu restarted an
			 * instruction, code changed): an asynchronous
			 * disable and enable keeps the trace decodable. */
			t->c->oddities++;
			flow(t, &prev, prev.kind == RK_OTHER ? fall :
			     prev.target, 0);
			interrupt(t, pc);
		} else {
			flow(t, &prev, pc, in.traced);
			if (prev.kind == RK_SYSCALL &&
			    resumed(t, pc, in.traced) < 0)
				return -1;
		}
	} else if (prev.kind == RK_SYSCALL) {
		/* Right at a sigreturn: the code the first handler
		 * interrupted resumes when this one returns. */
		flow(t, &prev, pc, in.traced);
		handler(t, pc, t->sig_resume ? t->sig_resume :
				prev.pc + prev.len);
		t->sig_resume = 0;
	} else if (ambiguous(&prev)) {
		t->holding = 1;
		t->held_insn = prev;
		t->held_ret = prev.kind == RK_RET && t->depth &&
			      t->st[t->depth - 1].ret != NO_RET ?
			      t->st[t->depth - 1].ret : 0;
		t->hlast = in;
		return hold(t, pc, sig);
	} else {
		uint64_t n = prev.kind == RK_OTHER ? prev.pc + prev.len :
			     prev.target;
		const struct rec_insn *nin = insn(t, n);

		if (!nin)
			return -1;
		flow(t, &prev, n, nin->traced);
		interrupt(t, n);
		handler(t, pc, n);
	}
	arrive(t, &in);
	t->cur = in;
	return t->c->failed ? -1 : 0;
}

int rec_thread_may_retract(const struct rec_thread *t, uint64_t pc)
{
	return t->have_cur && !t->holding && !t->retracted && t->cur.pc == pc;
}

int rec_thread_retract(struct rec_thread *t, uint64_t pc)
{
	if (!rec_thread_may_retract(t, pc))
		return 0;
	t->retracted = 1;
	return 1;
}

int rec_thread_expects(const struct rec_thread *t, uint64_t pc,
		       int sigreturn)
{
	const struct rec_insn *in = t->holding ? &t->hlast : &t->cur;
	uint64_t fall = in->pc + in->len;
	size_t i;

	if (!t->have_cur)
		return -1;
	if (t->retracted)
		return pc == t->cur.pc;
	if (in->rep && pc == in->pc)
		return 1;
	switch (in->kind) {
	case RK_OTHER:
		return pc == fall;
	case RK_JMP:
	case RK_CALL:
		return pc == in->target;
	case RK_COND:
		return pc == fall || pc == in->target;
	case RK_RET:
		/* To an open frame's caller (a longjmp may have left the
		 * innermost ones); anywhere else is rare enough (a retpoline)
		 * for a signal to be the likelier.  A frame the kernel or
		 * the trace's start made (a signal handler's) returns
		 * anywhere (its restorer); held, the frames are not known. */
		if (t->holding || !t->depth ||
		    t->st[t->depth - 1].ret == NO_RET)
			return -1;
		for (i = t->depth; i-- > 0 && t->depth - i <= 64;)
			if (t->st[i].ret == pc)
				return 1;
		return 0;
	case RK_SYSCALL:
		/* A handler returned: this is its sigreturn, which resumes
		 * where the signal came or where the handler moved that. */
		if (pc == fall || (t->sig_resume && pc == t->sig_resume))
			return 1;
		return sigreturn || t->sig_resume || t->holding ? -1 : 0;
	default:
		return -1;
	}
}

int rec_thread_step(struct rec_thread *t, uint64_t pc, int sig)
{
	t->c->executed++;
	rec_sched_need(t->c, t, t->idx);
	return step(t, pc, sig, NULL);
}

int rec_thread_step_insn(struct rec_thread *t, const struct rec_insn *in,
			 int sig)
{
	t->c->executed++;
	if (t->c->sched.n)
		rec_sched_need(t->c, t, t->idx);
	return step(t, in->pc, sig, in);
}

int rec_thread_run(struct rec_thread *t, const struct rec_insn *in,
		   uint32_t n, int sig)
{
	struct rec_ctx *c = t->c;
	uint32_t i;

	if (!n || rec_thread_step_insn(t, &in[0], sig) < 0)
		return -1;
	for (i = 1; i < n; i++) {
		/* The common case, what step() does for it: a traced
		 * instruction that is no branch, followed by the next one,
		 * traced too, on a thread that holds nothing and runs on
		 * its own stream (no packet: the PSB+ that arrive() may
		 * write was not due at the one before, nor is it now). */
		if (t->holding || t->retracted || !t->have_cur ||
		    c->sched.n || t->cur.kind != RK_OTHER || t->cur.rep ||
		    !t->on || !in[i].traced ||
		    t->cur.pc + t->cur.len != in[i].pc) {
			if (rec_thread_step_insn(t, &in[i], 0) < 0)
				return -1;
			continue;
		}
		c->executed++;
		c->clock++;
		t->last_id = t->id++;
		t->last_tsc = t->dtime;
		visible(t, t->cur.pc);
		t->cur = in[i];
	}
	return c->failed ? -1 : 0;
}

/* The instruction the thread runs next, or 0 if none is known yet. */
static uint64_t pending_pc(const struct rec_thread *t)
{
	if (t->holding)
		return t->held_insn.pc;
	return t->have_cur ? t->cur.pc : 0;
}

void rec_thread_switch_out(struct rec_thread *t)
{
	if (t->on) {
		/* A timer interrupt: the pending instruction has not run. */
		ptw_ip(&t->s->w, ppt_fup, pending_pc(t));
		disable(t, 0, 1);
		t->preempted = 1;
	}
	t->s = NULL;
}

void rec_thread_switch_in(struct rec_thread *t, struct rec_stream *s)
{
	t->s = s;
	t->tsc_due = 1;
	if (t->preempted) {
		/* Resumes where it stopped: nothing was lost, no gap
		 * (TRUTH.md). */
		t->preempted = 0;
		enable(t, pending_pc(t));
	}
}

struct rec_thread *rec_thread_new(struct rec_ctx *c, unsigned idx)
{
	struct rec_thread *t = calloc(1, sizeof(*t));
	char p[512];

	if (!t) {
		rec_fail(c, "out of memory");
		return NULL;
	}
	t->c = c;
	t->idx = idx;
	t->dtime = c->clock;
	t->first_tsc = c->clock;
	snprintf(t->truth_path, sizeof(t->truth_path), "%s/t%u.truth",
		 c->tmpdir, idx);
	/* --ring: a truth of the whole run would grow without bound; it
	 * goes to segments cut with the trace's (truth_rotate()), the
	 * window's made from them. */
	t->ring = c->o->ring && c->truth;
	if (t->ring) {
		rec_ring_path(p, sizeof(p), t->truth_path, 0);
		t->truth = fopen(p, "w");
	} else if (c->truth) {
		t->truth = fopen(t->truth_path, "w");
	}
	if (!c->sched.n) {
		snprintf(p, sizeof(p), "%s/t%u.pt", c->tmpdir, idx);
		if (rec_stream_open(&t->own, p, c->clock, c->o->ring) < 0) {
			rec_thread_free(t);
			t = NULL;
		} else {
			t->s = &t->own;
		}
	}
	if (!t || (c->truth && !t->truth)) {
		rec_fail(c, "%s: cannot write the thread's trace", c->tmpdir);
		rec_thread_free(t);
		return NULL;
	}
	/* The thread's entry is a frame whose call nobody saw. */
	push_frame(t, NO_RET, 0);
	if (t->ring)
		seg_header(t);
	return t;
}

int rec_thread_in_syscall(const struct rec_thread *t, uint64_t *next)
{
	const struct rec_insn *in = t->holding ? &t->hlast : &t->cur;

	if (in->kind != RK_SYSCALL ||
	    (!t->holding && (!t->have_cur || t->retracted)))
		return 0;
	if (next)
		*next = in->pc + in->len;
	return 1;
}

/* The thread ended (its trace closed, its frames too): its last window's
 * truth into truth_path, the segments removed. */
static int ring_end(struct rec_thread *t)
{
	FILE *fp;
	char p[600];
	int rc = 0;

	if (fflush(t->truth) != 0)
		rc = -1;
	fp = fopen(t->truth_path, "w");
	if (!fp || window_truth(t, &t->own.ring, fp, 0) < 0)
		rc = -1;
	if (fp && fclose(fp) != 0)
		rc = -1;
	for (; t->truth_oldest <= t->truth_k; t->truth_oldest++) {
		seg_path(t, t->truth_oldest, p, sizeof(p));
		unlink(p);
	}
	return rc;
}

int rec_thread_end(struct rec_thread *t)
{
	int rc = 0;

	/* Its last instruction runs on a CPU too (--cpus). */
	rec_sched_need(t->c, t, t->idx);
	if (t->c->failed)
		return -1;
	if (t->holding) {
		/* The process ended inside a handler that interrupted an
		 * ambiguous branch: its held part is lost. */
		free(t->hq);
		t->hq = NULL;
		t->hn = t->hcap = 0;
		t->holding = 0;
		t->cur = t->held_insn;
	}
	if (t->have_cur) {
		if (t->cur.kind == RK_SYSCALL) {
			/* exit or exit_group: the last instruction. */
			flow(t, &t->cur, 0, 0);
		} else {
			/* Killed before this instruction retired. */
			if (t->ring && t->on) {
				/* --ring (SIGTERM): an asynchronous
				 * disable that lasts to the end is a gap
				 * for the tree rules (TRUTH.md: ID =
				 * insns); a decoder cannot tell it from an
				 * interrupt tracing resumes after. */
				fprintf(t->truth, "gap %llu disabled\n",
					(unsigned long long) t->id);
				t->gaps++;
			}
			interrupt(t, t->cur.pc);
		}
	}
	/* A disable that lasts to the end (exit) is no gap: the README's
	 * gaps are "disabled and re-enabled". */
	header(t);
	while (t->depth) {
		close_frame(t, &t->st[t->depth - 1], "T");
		t->depth--;
	}
	/* Exited (or killed): off its CPU.  The truth's trailer (tid and
	 * counts) waits for the end of the run: the clone's return that
	 * names the tid may come after the exit. */
	leave_cpu(t);
	if (t->s == &t->own && rec_stream_close(&t->own) < 0)
		rc = -1;
	if (t->ring && rc == 0)
		rc = ring_end(t);
	if (t->truth && fclose(t->truth) != 0)
		rc = -1;
	t->truth = NULL;
	if (rc < 0)
		rec_fail(t->c, "%s: cannot write the thread's trace",
			 t->c->tmpdir);
	return rc;
}

void rec_thread_stats(const struct rec_thread *t, struct rec_thread_stats *s)
{
	s->idx = t->idx;
	s->insns = t->id;
	s->blocks = t->blocks;
	s->gaps = t->gaps;
	/* --cpus: the CPUs' streams hold the bytes */
	s->bytes = rec_stream_bytes(&t->own);
	s->first_tsc = t->first_tsc;
	s->last_tsc = t->dtime;
	s->ring = t->own.ring;
	s->running = 0;
	s->tail = 0;
	s->win_insns = t->win_insns;
	s->win_blocks = t->win_blocks;
	s->win_gaps = t->win_gaps;
	s->has_truth = t->c->truth;
}

/* The packets a decoder of the window needs after those written: the
 * pending TNT bits, and, if tracing is on, an asynchronous disable at the
 * instruction the thread runs next (as if it were interrupted there,
 * which rec_thread_end() writes when it is killed), so that a decoder
 * stops where the recorder is instead of walking on through code that
 * has not run.  Returns the bytes written to @path, or -1. */
static int64_t window_tail(struct rec_thread *t, const char *path)
{
	struct ptw *pw = &t->own.w;
	uint8_t buf[64];
	struct pt_config cfg;
	struct pt_encoder *enc;
	struct pt_packet pk;
	int64_t n = -1;
	FILE *fp;

	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + sizeof(buf);
	enc = pt_alloc_encoder(&cfg);
	if (!enc)
		return -1;
	if (pw->tnt_n) {
		memset(&pk, 0, sizeof(pk));
		pk.type = pw->tnt_max > 6 ? ppt_tnt_64 : ppt_tnt_8;
		pk.payload.tnt.bit_size = (uint8_t) pw->tnt_n;
		pk.payload.tnt.payload = pw->tnt;
		if (pt_enc_next(enc, &pk) < 0)
			goto out;
	}
	if (t->on) {
		memset(&pk, 0, sizeof(pk));
		pk.type = ppt_fup;
		pk.payload.ip.ipc = pt_ipc_sext_48;
		pk.payload.ip.ip = pending_pc(t) & 0xffffffffffffull;
		if (pt_enc_next(enc, &pk) < 0)
			goto out;
		memset(&pk, 0, sizeof(pk));
		pk.type = ppt_tip_pgd;
		pk.payload.ip.ipc = pt_ipc_suppressed;
		if (pt_enc_next(enc, &pk) < 0)
			goto out;
	}
	{
		uint64_t off;

		if (pt_enc_get_offset(enc, &off) < 0)
			goto out;
		fp = fopen(path, "wb");
		if (!fp)
			goto out;
		if (fwrite(buf, 1, (size_t) off, fp) != off) {
			fclose(fp);
			goto out;
		}
		if (fclose(fp) != 0)
			goto out;
		n = (int64_t) off;
	}
out:
	pt_free_encoder(enc);
	return n;
}

int rec_thread_window(struct rec_thread *t, struct rec_thread_stats *s)
{
	struct rec_ring r;
	int rc = t->s == &t->own ? rec_stream_window(&t->own, &r) : 0;
	char p[600];

	rec_thread_stats(t, s);
	s->ring = t->own.ring;
	s->running = 1;
	/* --perf-snapshot takes the AUX area as it is: no tail */
	if (rc == 0 && t->c->o->ring && !t->c->o->perf_snapshot) {
		int64_t tail;

		snprintf(p, sizeof(p), "%s/t%u.tail", t->c->tmpdir, t->idx);
		tail = window_tail(t, p);
		if (tail < 0)
			rc = -1;
		s->tail = tail < 0 ? 0 : (uint64_t) tail;
	}
	if (rc == 0 && t->ring) {
		FILE *fp;

		snprintf(p, sizeof(p), "%s.snap", t->truth_path);
		fp = fopen(p, "w");
		if (!fp || window_truth(t, &s->ring, fp, 1) < 0)
			rc = -1;
		if (fp && fclose(fp) != 0)
			rc = -1;
		s->win_insns = t->win_insns;
		s->win_blocks = t->win_blocks;
		s->win_gaps = t->win_gaps;
	}
	s->has_truth = t->ring && rc == 0;
	return rc;
}

unsigned rec_thread_idx(const struct rec_thread *t)
{
	return t->idx;
}

void rec_thread_free(struct rec_thread *t)
{
	if (!t)
		return;
	if (t->truth)
		fclose(t->truth);
	rec_stream_close(&t->own);
	free(t->st);
	free(t->fkeys);
	free(t->fvals);
	free(t->hq);
	free(t);
}
