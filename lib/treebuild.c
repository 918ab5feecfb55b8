#include "treebuild.h"

#include "htr/tree.h"

#include <stdlib.h>
#include <string.h>

struct frame {
	uint64_t first;
	uint64_t ret_ip;        /* 0: unknown (the top-level frame, callbacks) */
	uint64_t entry;         /* 0: unknown */
	uint64_t held_at;       /* entry_pending, and an interrupt came
				 * before the callee's first instruction:
				 * the IP it stopped at, the entry (0: none) */
	uint64_t anchor;        /* its entry, else the first address it ran
				 * (0: none), and after a jump to a
				 * function's entry that entry: inside its
				 * function, for the extents */
	uint64_t fn;            /* the function of @anchor (fn_known) */
	uint32_t func;          /* HTR_FUNC_NONE until known */
	uint32_t first_child;
	uint32_t nchildren;
	uint8_t flags;
	uint8_t entry_pending;  /* the next run starts at its entry */
	uint8_t own;            /* ran instructions itself (top level) */
	uint8_t far;            /* opened by a far transfer or an interrupt */
	uint8_t callback;       /* entered from untraced code (push_at) */
	uint8_t fn_known;       /* @fn looked up (0 there: no symbol) */
};

/* Callers remembered per function, for resumes after errors. */
#define TB_CALLERS 4

/* The last lookups of func_of(): jumps land at few places (PLT targets,
 * switch tables), over and over. */
#define FN_CACHE 256
struct fn_slot {
	uint64_t addr;          /* 0: empty */
	uint64_t entry, fn;     /* fn 0: no symbol holds addr */
};

/* Open addressing, entry -> function index; grows at 1/2 load. */
struct funcmap {
	uint64_t *keys;         /* 0 = empty slot (0 is never an entry) */
	uint32_t *vals;
	size_t cap, n;
};

struct htr_tb {
	struct htr_writer *w;
	struct frame *st;       /* st[0] is the top-level frame */
	size_t depth, cap;      /* depth counts st[0] */
	uint64_t id;            /* next instruction ID */
	uint64_t gaps;
	uint64_t last_tsc;
	int have_tsc;
	int in_gap;             /* a gap was reported, no resume yet */
	struct htr_decode_gap gap;      /* the last one */
	struct htr_decode_gap first_error;
	uint64_t errors, runaways;
	int ret_pending;        /* a return waits to learn where it landed */
	uint64_t ret_last;      /* its ID */
	int err_tsc_pending;    /* the time where decoding resumed after an
				 * error, for the next run's first
				 * instruction */
	uint64_t err_tsc;
	int jmp_pending;        /* so does an indirect jump */
	uint64_t jmp_last, jmp_src;     /* its ID and address */
	uint64_t folded, nfolded;       /* calls past the depth limit: open,
					 * ever */
	htr_tb_extent_fn extent;
	void *extent_ctx;
	struct fn_slot fn_cache[FN_CACHE];
	struct funcmap funcs;   /* call targets */
	struct funcmap anchors; /* addresses late frames ran, not targets */
	uint32_t nentries;      /* in the writer's function table */
	uint64_t (*caller)[TB_CALLERS];  /* by function index: the
					  * functions traced calls to it came
					  * from, the first few (0: none) */
	size_t ncaller;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static int funcmap_grow(struct funcmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 1024, i;
	uint64_t *keys = calloc(ncap, sizeof(*keys));
	uint32_t *vals = calloc(ncap, sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return HTR_ERR_NOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->keys[i])
			continue;
		for (j = mix(m->keys[i]) & (ncap - 1); keys[j];
		     j = (j + 1) & (ncap - 1))
			;
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = ncap;
	return 0;
}

/* Whether @key is in @m; its value in *@val. */
static int func_lookup(const struct funcmap *m, uint64_t key, uint32_t *val)
{
	size_t j;

	if (!key || !m->cap)
		return 0;
	for (j = mix(key) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == key) {
			*val = m->vals[j];
			return 1;
		}
	return 0;
}

/* The function index of @entry, adding it to the table if new. */
static int func_index(struct htr_tb *t, uint64_t entry, uint32_t *out)
{
	struct funcmap *m = &t->funcs;
	size_t j;
	int rc;

	if (!entry) {
		*out = HTR_FUNC_NONE;
		return 0;
	}
	if ((m->n + 1) * 2 > m->cap && (rc = funcmap_grow(m)) < 0)
		return rc;
	for (j = mix(entry) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == entry) {
			*out = m->vals[j];
			return 0;
		}
	/* An address a late frame ran may turn out to be an entry: one
	 * index for both. */
	if (!func_lookup(&t->anchors, entry, out)) {
		if (t->nentries >= HTR_FUNC_NONE)
			return HTR_ERR_LIMIT;
		rc = htr_writer__func(t->w, entry);
		if (rc < 0)
			return rc;
		*out = t->nentries++;
	}
	m->keys[j] = entry;
	m->vals[j] = *out;
	m->n++;
	return 0;
}

/* The function-table index of @addr, an address a late frame ran (not
 * an entry): shared with a function whose entry it is, else added once
 * (kept apart from the call targets: func_known() must not see it). */
static int anchor_index(struct htr_tb *t, uint64_t addr, uint32_t *out)
{
	struct funcmap *m = &t->anchors;
	size_t j;
	int rc;

	*out = HTR_FUNC_NONE;
	if (!addr)
		return 0;
	if (func_lookup(&t->funcs, addr, out))
		return 0;
	if ((m->n + 1) * 2 > m->cap && (rc = funcmap_grow(m)) < 0)
		return rc;
	for (j = mix(addr) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1))
		if (m->keys[j] == addr) {
			*out = m->vals[j];
			return 0;
		}
	if (t->nentries >= HTR_FUNC_NONE)
		return HTR_ERR_LIMIT;
	rc = htr_writer__func(t->w, addr);
	if (rc < 0)
		return rc;
	m->keys[j] = addr;
	m->vals[j] = t->nentries++;
	m->n++;
	*out = m->vals[j];
	return 0;
}

/* Whether @entry is a call target seen so far. */
static int func_known(const struct htr_tb *t, uint64_t entry)
{
	uint32_t v;

	return func_lookup(&t->funcs, entry, &v);
}

int htr_tb__alloc(struct htr_tb **out, struct htr_writer *w)
{
	struct htr_tb *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return HTR_ERR_NOMEM;
	t->w = w;
	t->cap = 64;
	t->st = malloc(t->cap * sizeof(*t->st));
	if (!t->st) {
		free(t);
		return HTR_ERR_NOMEM;
	}
	memset(&t->st[0], 0, sizeof(t->st[0]));
	t->st[0].func = HTR_FUNC_NONE;
	t->st[0].first_child = HTR_NONE;
	t->st[0].flags = HTR_BLOCK_LATE;
	t->depth = 1;
	*out = t;
	return 0;
}

void htr_tb__set_extents(struct htr_tb *t, htr_tb_extent_fn fn, void *ctx)
{
	t->extent = fn;
	t->extent_ctx = ctx;
}

void htr_tb__free(struct htr_tb *t)
{
	if (!t)
		return;
	free(t->st);
	free(t->funcs.keys);
	free(t->funcs.vals);
	free(t->anchors.keys);
	free(t->anchors.vals);
	free(t->caller);
	free(t);
}

static int push(struct htr_tb *t, uint64_t ret_ip, int far)
{
	struct frame *f;

	if (t->folded || t->depth > HTR_TB_MAX_DEPTH) {
		/* Past the limit the deepest frame absorbs the callee; its
		 * returns are matched by count. */
		t->folded++;
		t->nfolded++;
		t->st[t->depth - 1].flags |= HTR_BLOCK_GAP;
		return 0;
	}
	if (t->depth == t->cap) {
		size_t ncap = t->cap * 2;
		struct frame *n = realloc(t->st, ncap * sizeof(*n));

		if (!n)
			return HTR_ERR_NOMEM;
		t->st = n;
		t->cap = ncap;
	}
	f = &t->st[t->depth++];
	memset(f, 0, sizeof(*f));
	f->first = t->id;
	f->ret_ip = ret_ip;
	f->func = HTR_FUNC_NONE;
	f->first_child = HTR_NONE;
	f->entry_pending = 1;
	f->far = (uint8_t) far;
	return 0;
}

static uint64_t frame_fn(struct htr_tb *t, struct frame *f);

/* The function of frame @f's caller, when a traced call (a frame with a
 * return address, below another) enters function @idx: the first few
 * are kept.  Where decoding resumes after an error they say who called
 * it (rule 4). */
static int note_caller(struct htr_tb *t, struct frame *f, uint32_t idx)
{
	uint64_t *c, fn;
	unsigned k;

	if (idx >= t->ncaller) {
		size_t n = idx + 1 > 2 * t->ncaller ? idx + 1 + 64 :
						      2 * t->ncaller;
		uint64_t (*a)[TB_CALLERS] = realloc(t->caller, n * sizeof(*a));

		if (!a)
			return HTR_ERR_NOMEM;
		memset(a + t->ncaller, 0, (n - t->ncaller) * sizeof(*a));
		t->caller = a;
		t->ncaller = n;
	}
	c = t->caller[idx];
	if (c[TB_CALLERS - 1])
		return 0;
	fn = frame_fn(t, f - 1);
	for (k = 0; fn && k < TB_CALLERS; k++) {
		if (c[k] == fn)
			break;
		if (!c[k]) {
			c[k] = fn;
			break;
		}
	}
	return 0;
}

/* The innermost open frame in a function a traced call to function
 * @idx came from; t->depth if none. */
static size_t caller_frame(struct htr_tb *t, uint32_t idx)
{
	size_t i;
	unsigned k;

	if (idx >= t->ncaller)
		return t->depth;
	for (i = t->depth; i-- > 0;)
		for (k = 0; k < TB_CALLERS && t->caller[idx][k]; k++)
			if (frame_fn(t, &t->st[i]) == t->caller[idx][k])
				return i;
	return t->depth;
}

static int set_entry(struct htr_tb *t, struct frame *f, uint64_t entry)
{
	int rc;

	f->entry_pending = 0;
	f->entry = entry;
	if (!f->anchor)
		f->anchor = entry;
	rc = func_index(t, entry, &f->func);
	if (rc < 0 || !f->ret_ip || f->far || f == t->st ||
	    f->func == HTR_FUNC_NONE)
		return rc;
	return note_caller(t, f, f->func);
}

/* Some of the execution of every frame open as a gap begins is missing
 * (README, "Tree rules" 4): those that ran before it, and a callee whose
 * first instructions it took (not one an interrupt delays: it starts
 * where the interrupt returns). */
static void flag_gap(struct htr_tb *t, int async)
{
	size_t i;

	for (i = 0; i < t->depth; i++)
		if (t->st[i].first < t->id || !async)
			t->st[i].flags |= HTR_BLOCK_GAP;
}

/* A frame entered at @ip by an unseen call (return address unknown). */
static int push_at(struct htr_tb *t, uint64_t ip)
{
	int rc = push(t, 0, 0);

	if (rc < 0 || t->folded)
		return rc;
	t->st[t->depth - 1].callback = 1;
	return set_entry(t, &t->st[t->depth - 1], ip);
}

/* Write @f as a completed block ending at @last and make it the newest
 * child of the frame below it (or of the top-level frame). */
static int emit(struct htr_tb *t, const struct frame *f, uint64_t last,
		unsigned flags, struct frame *parent)
{
	struct htr_disk_block b;
	uint32_t idx, func = f->func;
	int rc;

	/* A call whose callee ran no traced instruction (the trace ends or
	 * stops right after it) is no block: it has nothing to span. */
	if (f->first > last)
		return 0;
	/* A late block records an address it ran: readers infer its
	 * function from it. */
	if (((f->flags | flags) & HTR_BLOCK_LATE) && func == HTR_FUNC_NONE &&
	    (rc = anchor_index(t, f->anchor, &func)) < 0)
		return rc;
	memset(&b, 0, sizeof(b));
	htr_disk__put48(b.first, f->first);
	htr_disk__put48(b.last, last);
	b.first_child = f->first_child;
	b.nchildren = f->nchildren;
	b.func_flags = func | (uint32_t) (f->flags | flags)
				 << HTR_DISK_FLAG_SHIFT;
	rc = htr_writer__block(t->w, &b, &idx);
	if (rc < 0)
		return rc;
	if (parent->first_child == HTR_NONE)
		parent->first_child = idx;
	parent->nchildren++;
	return 0;
}

static int pop(struct htr_tb *t, uint64_t last, unsigned flags)
{
	const struct frame *f = &t->st[t->depth - 1];

	/* The kernel's side of a syscall or interrupt, never traced (its
	 * entry unknown), is no level of the tree: what ran traced inside it
	 * (a signal handler, the sigreturn trampoline) belongs to the
	 * interrupted frame. */
	if (f->far && f->func == HTR_FUNC_NONE && t->depth > 1) {
		struct frame *parent = &t->st[t->depth - 2];

		if (parent->first_child == HTR_NONE)
			parent->first_child = f->first_child;
		parent->nchildren += f->nchildren;
		t->depth--;
		return 0;
	}
	t->depth--;
	if (t->st[t->depth].entry_pending && t->st[t->depth].held_at) {
		int rc = set_entry(t, &t->st[t->depth],
				   t->st[t->depth].held_at);

		if (rc < 0)
			return rc;
	}
	return emit(t, &t->st[t->depth], last, flags, &t->st[t->depth - 1]);
}

/* A return with nothing open: the top-level frame was a callee all along.
 * It becomes a block adopting everything so far; its caller is the new
 * top-level frame, which starts where it did. */
static int late_return(struct htr_tb *t, uint64_t last)
{
	struct frame top = t->st[0];

	memset(&t->st[0], 0, sizeof(t->st[0]));
	t->st[0].first = top.first;
	t->st[0].func = HTR_FUNC_NONE;
	t->st[0].first_child = HTR_NONE;
	/* It spans what the old one spanned, gaps included. */
	t->st[0].flags = HTR_BLOCK_LATE | (top.flags & HTR_BLOCK_GAP);
	return emit(t, &top, last, 0, &t->st[0]);
}

/* Close every frame above index @keep at @last with @flags. */
static int pop_to(struct htr_tb *t, size_t keep, uint64_t last, unsigned flags)
{
	int rc;

	while (t->depth > keep + 1)
		if ((rc = pop(t, last, flags)) < 0)
			return rc;
	return 0;
}

/* The innermost open frame below the innermost whose return address is
 * @ip, or 0 (the top-level frame never matches). */
static size_t outer_ret_match(const struct htr_tb *t, uint64_t ip)
{
	size_t i;

	for (i = t->depth - 1; ip && i-- > 1;)
		if (t->st[i].ret_ip == ip)
			return i;
	return 0;
}

/* Whether a sized symbol holds @addr: its entry in *@entry (for
 * FUNC.cold, FUNC's), its function (FUNC for FUNC.cold) in *@fn. */
static int func_of(struct htr_tb *t, uint64_t addr, uint64_t *entry,
		   uint64_t *fn)
{
	struct fn_slot *c = &t->fn_cache[mix(addr) & (FN_CACHE - 1)];

	if (!t->extent || !addr)
		return 0;
	if (c->addr != addr) {
		c->addr = addr;
		if (!t->extent(t->extent_ctx, addr, &c->entry, &c->fn))
			c->fn = 0;
	}
	*entry = c->entry;
	*fn = c->fn;
	return c->fn != 0;
}

/* The function frame @f is in (0: none known), looked up once. */
static uint64_t frame_fn(struct htr_tb *t, struct frame *f)
{
	uint64_t entry;

	if (!f->fn_known) {
		f->fn_known = 1;
		if (!func_of(t, f->anchor, &entry, &f->fn))
			f->fn = 0;
	}
	return f->fn;
}

/* The innermost open frame below index @below in function @fn; t->depth
 * if none. */
static size_t frame_in(struct htr_tb *t, size_t below, uint64_t fn)
{
	size_t i;

	for (i = below; i-- > 0;)
		if (frame_fn(t, &t->st[i]) == fn)
			return i;
	return t->depth;
}

/* The innermost open frame below index @below whose function holds @ip,
 * not at its entry; t->depth if none.  A function's entry is where
 * retpolines and other return-as-jump tricks go, and where callbacks
 * start: it never counts. */
static size_t inside_frame(struct htr_tb *t, size_t below, uint64_t ip)
{
	uint64_t ent, fn;

	if (!func_of(t, ip, &ent, &fn) || ip == ent)
		return t->depth;
	return frame_in(t, below, fn);
}

/* Whether @ip lies inside (not at the entry of) a function that no open
 * frame below index @below is in. */
static int inside_other(struct htr_tb *t, size_t below, uint64_t ip)
{
	uint64_t ent, fn;

	return func_of(t, ip, &ent, &fn) && ip != ent &&
	       frame_in(t, below, fn) == t->depth;
}

/* The innermost frame's caller was entered where the trace cannot show
 * it: a late frame, anchored at @at (inside its function), takes the
 * innermost's place and adopts it, closed at @last.  As a late start, in
 * the middle of the stack. */
static int late_caller(struct htr_tb *t, uint64_t last, uint64_t at)
{
	struct frame *slot = &t->st[t->depth - 1], child = *slot;

	memset(slot, 0, sizeof(*slot));
	slot->first = child.first;
	slot->func = HTR_FUNC_NONE;
	slot->first_child = HTR_NONE;
	slot->anchor = at;
	slot->callback = 1;
	slot->flags = HTR_BLOCK_LATE | HTR_BLOCK_GAP;
	return emit(t, &child, last, 0, slot);
}

/* Whether a return from the innermost frame landing at frame @i's return
 * address is the return of a call the kernel made: @i is an interrupt's
 * far frame, the innermost was entered where tracing resumed, and only
 * the kernel's side lies between (a handler that makes the interrupted
 * code call a function, as Go's asynchronous preemption does). */
static int kernel_call(const struct htr_tb *t, size_t i)
{
	size_t k;

	if (!t->st[i].far || !t->st[t->depth - 1].callback)
		return 0;
	for (k = i + 1; k + 1 < t->depth; k++)
		if (!t->st[k].far || t->st[k].func != HTR_FUNC_NONE)
			return 0;
	return 1;
}

/* The return held in ret_pending landed at @to (0: unknown). */
static int land_return(struct htr_tb *t, uint64_t to)
{
	uint64_t last = t->ret_last;
	size_t i;

	t->ret_pending = 0;
	if (t->depth == 1)
		return late_return(t, last);
	if (!to || t->st[t->depth - 1].ret_ip == to)
		return pop(t, last, 0);
	/* Landed at an outer frame's return address: the frames above it
	 * were abandoned (longjmp, exceptions, stack switches). */
	i = outer_ret_match(t, to);
	if (i) {
		int rc = pop_to(t, i, last,
				kernel_call(t, i) ? 0 : HTR_BLOCK_UNWOUND);

		return rc < 0 ? rc : pop(t, last, 0);
	}
	/* Landed inside an outer frame's function: an exception caught
	 * there; or, from a frame whose caller is unknown, a plain return
	 * to that caller. */
	i = inside_frame(t, t->depth - 1, to);
	if (i < t->depth)
		return pop_to(t, i, last, i == t->depth - 2 &&
				  !t->st[t->depth - 1].ret_ip ? 0 :
				  HTR_BLOCK_UNWOUND);
	/* A frame whose caller is unknown returned into a function no open
	 * frame is in: its caller was entered unseen (after a decode
	 * error). */
	if (!t->st[t->depth - 1].ret_ip && inside_other(t, t->depth - 1, to))
		return late_caller(t, last, to);
	/* Nothing matches (a retpoline): the innermost frame returned. */
	return pop(t, last, 0);
}

/* The indirect jump held in jmp_pending landed at @to (0: unknown): if it
 * left the innermost frames without returning (longjmp, an unwinder
 * reaching a landing pad), they close unwound (README, "Tree rules" 3a). */
static int land_jump(struct htr_tb *t, uint64_t to)
{
	uint64_t last = t->jmp_last, ent, fn, sentry, sfn;
	struct frame *top = &t->st[t->depth - 1];
	size_t i;

	t->jmp_pending = 0;
	if (!to || t->folded)
		return 0;
	/* At a return address: the innermost's is a return in disguise;
	 * an outer frame's means it and the frames above it were left. */
	if (top->ret_ip == to)
		return pop(t, last, 0);
	i = outer_ret_match(t, to);
	if (i)
		return pop_to(t, i - 1, last, HTR_BLOCK_UNWOUND);
	if (!func_of(t, to, &ent, &fn))
		return 0;
	/* A PLT stub's jump, a tail call: the frame runs that function
	 * now (a late frame's anchor stays: it names the block). */
	if (to == ent) {
		if (top->func != HTR_FUNC_NONE)
			top->anchor = to;
		top->fn = fn;
		top->fn_known = 1;
		return 0;
	}
	if (func_of(t, t->jmp_src, &sentry, &sfn) && sfn == fn)
		return 0;
	i = frame_in(t, t->depth - 1, fn);
	return i < t->depth ? pop_to(t, i, last, HTR_BLOCK_UNWOUND) : 0;
}

int htr_tb__run(struct htr_tb *t, uint64_t ip, uint32_t ninsn,
		enum htr_icls cls, uint64_t ret_ip)
{
	struct frame *top;
	uint64_t last;
	int rc;

	if (t->ret_pending && (rc = land_return(t, ip)) < 0)
		return rc;
	if (t->jmp_pending && (rc = land_jump(t, ip)) < 0)
		return rc;
	top = &t->st[t->depth - 1];
	if (!ninsn) {
		/* An interrupt after a call or a return: the handler nests
		 * in whatever frame is innermost now.  A callee interrupted
		 * before its first instruction is entered where the
		 * interrupt returns to. */
		if (cls != HTR_IC_FAR_CALL)
			return 0;
		if (top->entry_pending && !t->folded &&
		    (rc = set_entry(t, top, ret_ip)) < 0)
			return rc;
		return push(t, ret_ip, 1);
	}
	if (top->entry_pending && !t->folded &&
	    (rc = set_entry(t, top, ip)) < 0)
		return rc;
	if (t->depth == 1)
		top->own = 1;
	if (!top->anchor)
		top->anchor = ip;
	last = t->id + ninsn - 1;
	if (last > HTR_MAX_ID)
		return HTR_ERR_LIMIT;
	if (t->err_tsc_pending) {
		t->err_tsc_pending = 0;
		if ((rc = htr_writer__tsc(t->w, t->id, t->err_tsc)) < 0)
			return rc;
	}
	t->id += ninsn;
	switch (cls) {
	case HTR_IC_CALL:
		return push(t, ret_ip, 0);
	case HTR_IC_FAR_CALL:
		return push(t, ret_ip, 1);
	case HTR_IC_RET:
	case HTR_IC_FAR_RET:
		if (t->folded) {
			t->folded--;
			return 0;
		}
		if (t->depth == 1)
			return late_return(t, last);
		t->ret_pending = 1;
		t->ret_last = last;
		return 0;
	case HTR_IC_JUMP:
		t->jmp_pending = 1;
		t->jmp_last = last;
		t->jmp_src = ret_ip;
		return 0;
	case HTR_IC_OTHER:
		break;
	}
	return 0;
}

int htr_tb__gap(struct htr_tb *t, const struct htr_decode_gap *g)
{
	struct frame *top;
	int async = g->kind == HTR_GAP_DISABLED && g->async;
	int rc;

	/* An interrupt right after a return came in where the return
	 * landed: its IP is the next instruction to run. */
	if (t->ret_pending && (rc = land_return(t, async ? g->ip : 0)) < 0)
		return rc;
	if (t->jmp_pending && (rc = land_jump(t, async ? g->ip : 0)) < 0)
		return rc;
	if (!t->in_gap)
		flag_gap(t, async);
	top = &t->st[t->depth - 1];
	/* A call straight into untraced code: the TIP.PGD names the callee. */
	if (g->kind == HTR_GAP_DISABLED && !g->async && g->ip &&
	    top->entry_pending && !t->folded &&
	    (rc = set_entry(t, top, g->ip)) < 0)
		return rc;
	/* An interrupt before the callee's first instruction stopped at its
	 * entry.  The entry stays pending (its time is where the callee
	 * starts, after the interrupt); held_at names it should the frame
	 * close before it runs (the trace ends in the handler). */
	if (async && top->entry_pending && !t->folded)
		top->held_at = g->ip;
	/* An interrupt took user code away: the kernel runs as a far frame
	 * that returns to the interrupted IP. */
	if (async && (rc = push(t, g->ip, 1)) < 0)
		return rc;
	t->gaps++;
	if (g->kind == HTR_GAP_ERROR) {
		if (!t->errors++)
			t->first_error = *g;
		t->runaways += g->code == HTR_GAP_CODE_RUNAWAY;
	}
	t->in_gap = 1;
	t->gap = *g;
	return htr_writer__gap(t->w, t->id, g->offset, g->kind, g->code);
}

/* Decoding resumes at @ip after a decode error: an unknown stretch ran,
 * as after a synchronous disable (README, "Tree rules" 4). */
static int resume_error(struct htr_tb *t, uint64_t ip, uint64_t last)
{
	uint64_t ent, fn;
	int sym = func_of(t, ip, &ent, &fn);
	struct frame *f;
	uint32_t idx;
	size_t i;
	int rc;

	if (func_known(t, ip) || (sym && ip == ent))
		return push_at(t, ip);
	if (!sym)
		return 0;
	i = frame_in(t, t->depth, fn);
	if (i < t->depth)
		return pop_to(t, i, last, HTR_BLOCK_IMPLICIT);
	/* A function a traced call from an open frame's function entered
	 * before: that frame called it again, the frames above it returned
	 * unseen.  Else a deeper frame entered in the gap (a callback from
	 * the code the error hid).  Either way its start was lost. */
	if (func_lookup(&t->funcs, ent, &idx) &&
	    (i = caller_frame(t, idx)) < t->depth &&
	    (rc = pop_to(t, i, last, HTR_BLOCK_IMPLICIT)) < 0)
		return rc;
	if ((rc = push(t, 0, 0)) < 0 || t->folded)
		return rc;
	f = &t->st[t->depth - 1];
	f->callback = 1;
	f->entry_pending = 0;
	f->anchor = ip;
	f->flags = HTR_BLOCK_LATE | HTR_BLOCK_GAP;
	return 0;
}

/* What tracing resuming at @ip says about the open frames (README, "Tree
 * rules" 4); @last is the last instruction before the gap. */
static int close_unseen(struct htr_tb *t, uint64_t ip, uint64_t last)
{
	uint64_t ent, fn;
	size_t i;

	/* At an open frame's return address: it and the frames above it
	 * returned unseen. */
	for (i = t->depth - 1; i >= 1; i--)
		if (t->st[i].ret_ip == ip)
			return pop_to(t, i - 1, last, HTR_BLOCK_IMPLICIT);
	if (t->gap.kind == HTR_GAP_ERROR)
		return resume_error(t, ip, last);
	if (t->gap.kind != HTR_GAP_DISABLED)
		return 0;
	/* A callback that left by a jump (a tail call into untraced code)
	 * returns through that code: whatever comes back next is not its. */
	if (!t->gap.async && t->depth > 1 && t->st[t->depth - 1].callback) {
		int rc = pop(t, last, HTR_BLOCK_IMPLICIT);

		if (rc < 0)
			return rc;
	}
	/* Inside an open frame's function: that frame goes on; the frames
	 * above it were left unseen (an exception caught after an untraced
	 * unwinder, a jump back into the traced code). */
	i = inside_frame(t, t->depth, ip);
	if (i < t->depth)
		return pop_to(t, i, last, HTR_BLOCK_UNWOUND);
	/* At a function's entry: called from untraced code or by the kernel
	 * (a callback, a signal handler). */
	if (func_known(t, ip) ||
	    (func_of(t, ip, &ent, &fn) && ip == ent))
		return push_at(t, ip);
	/* The kernel returned, wherever it landed (sysenter). */
	for (i = 1; i < t->depth; i++)
		if (t->st[i].far)
			return pop_to(t, i - 1, last, HTR_BLOCK_IMPLICIT);
	/* A branch left the traced code and something else came back: a
	 * callback from untraced code whose entry no symbol names. */
	if (!t->gap.async)
		return push_at(t, ip);
	return 0;
}

int htr_tb__resume(struct htr_tb *t, uint64_t ip)
{
	int rc = 0;

	if (!t->in_gap)
		return 0;
	t->in_gap = 0;
	/* A pending entry was lost in the gap: it stays unknown. */
	t->st[t->depth - 1].entry_pending = 0;
	if (!t->folded)
		rc = close_unseen(t, ip, t->id ? t->id - 1 : 0);
	return rc;
}

int htr_tb__time(struct htr_tb *t, uint64_t tsc)
{
	/* After an error it is the time the next instruction starts at,
	 * not the time after the last one before the gap: kept even when
	 * it did not change, as the next run's first instruction may
	 * change it. */
	if (t->in_gap && t->gap.kind == HTR_GAP_ERROR) {
		t->have_tsc = 1;
		t->last_tsc = tsc;
		t->err_tsc_pending = 1;
		t->err_tsc = tsc;
		return 0;
	}
	if (t->have_tsc && tsc == t->last_tsc)
		return 0;
	t->have_tsc = 1;
	t->last_tsc = tsc;
	return htr_writer__tsc(t->w, t->id ? t->id - 1 : 0, tsc);
}

int htr_tb__time_entry(struct htr_tb *t, uint64_t tsc)
{
	const struct frame *top = &t->st[t->depth - 1];

	/* The time after the call is the time the callee began. */
	if (t->depth > 1 && top->entry_pending && top->first == t->id)
		return htr_tb__time(t, tsc);
	return 0;
}

int htr_tb__sync(struct htr_tb *t, uint64_t offset)
{
	return htr_writer__sync(t->w, offset, t->id);
}

int htr_tb__finish(struct htr_tb *t)
{
	uint64_t last = t->id ? t->id - 1 : 0;
	int rc;

	if (t->ret_pending && (rc = land_return(t, 0)) < 0)
		return rc;
	t->jmp_pending = 0;
	if (!t->id)
		return 0;
	t->folded = 0;
	while (t->depth > 1) {
		rc = pop(t, last, HTR_BLOCK_TRUNCATED);
		if (rc < 0)
			return rc;
	}
	if (t->st[0].own) {
		struct frame root;

		memset(&root, 0, sizeof(root));
		root.first_child = HTR_NONE;
		rc = emit(t, &t->st[0], last, HTR_BLOCK_TRUNCATED, &root);
		if (rc < 0)
			return rc;
	}
	return 0;
}

uint64_t htr_tb__insns(const struct htr_tb *t) { return t->id; }
uint64_t htr_tb__gaps(const struct htr_tb *t) { return t->gaps; }
uint64_t htr_tb__funcs(const struct htr_tb *t) { return t->funcs.n; }
uint64_t htr_tb__folded(const struct htr_tb *t) { return t->nfolded; }

uint64_t htr_tb__errors(const struct htr_tb *t, uint64_t *runaways,
			const struct htr_decode_gap **first)
{
	*runaways = t->runaways;
	*first = t->errors ? &t->first_error : NULL;
	return t->errors;
}
