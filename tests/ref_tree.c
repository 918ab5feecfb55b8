/*
 * The reference tree builder (see ref_tree.h).  Two passes:
 *
 *  1. decode: libipt's instruction-flow decoder turns the trace into a
 *     list of steps (instructions, the events that matter, decode errors);
 *     instruction IDs are the positions of the instruction steps;
 *  2. build: the README's Tree rules over that list.
 *
 * Where the rules leave a choice open, the choice made here is written
 * next to the code ("Choice:").
 */
#include "ref_tree.h"
#include "slurp.h"

#include <elf.h>
#include <intel-pt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable arrays ------------------------------------------------- */

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	void *p;
	size_t ncap;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 64;
	p = realloc(*arr, ncap * elem);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

#define GROW(arr, cap, n) grow((void **) &(arr), &(cap), (n), sizeof(*(arr)))

/* ---- pass 1: decode ------------------------------------------------- */

enum step_kind {
	S_INSN,           /* a = ip, size, cls, ijmp */
	S_ENABLED,        /* a = ip */
	S_DISABLED,       /* a = ip (if has_ip) */
	S_ASYNC_DISABLED, /* a = at, b = ip (if has_ip) */
	S_ASYNC_BRANCH,   /* a = from; abort: a transaction abort */
	S_OVERFLOW,       /* a = ip (if has_ip) */
	S_ERROR,          /* code; the decoder resynchronized */
};

struct step {
	uint64_t a, b;
	int code;
	uint8_t kind, cls, size, has_ip, abort;
	uint8_t ijmp;     /* an indirect near jump (FF /4) */
};

struct steps {
	struct step *s;
	size_t n, cap;
};

static int add_step(struct steps *st, const struct step *s)
{
	if (GROW(st->s, st->cap, st->n) < 0)
		return -1;
	st->s[st->n++] = *s;
	return 0;
}

/* Is @in an indirect near jump (FF /4)?  libipt's ptic_jump holds direct
 * ones too; the bytes tell them apart: prefixes (legacy, REX), then the
 * opcode and the ModRM's reg field. */
static int indirect_jump(const struct pt_insn *in)
{
	size_t i = 0;

	if (in->iclass != ptic_jump)
		return 0;
	while (i < in->size && i < sizeof(in->raw) &&
	       (in->raw[i] == 0x66 || in->raw[i] == 0x67 ||
		in->raw[i] == 0xf2 || in->raw[i] == 0xf3 ||
		in->raw[i] == 0x2e || in->raw[i] == 0x3e ||
		in->raw[i] == 0x26 || in->raw[i] == 0x36 ||
		in->raw[i] == 0x64 || in->raw[i] == 0x65 ||
		(in->mode == ptem_64bit && (in->raw[i] & 0xf0) == 0x40)))
		i++;
	return i + 1 < in->size && in->raw[i] == 0xff &&
	       ((in->raw[i + 1] >> 3) & 7) == 4;
}

static int add_insn(struct steps *st, const struct pt_insn *in)
{
	struct step s;

	memset(&s, 0, sizeof(s));
	s.kind = S_INSN;
	s.a = in->ip;
	s.size = in->size;
	s.cls = (uint8_t) in->iclass;
	s.ijmp = (uint8_t) indirect_jump(in);
	return add_step(st, &s);
}

/* The event as a step, if it is one the rules look at.  *@abort carries
 * "the previous event was a transaction abort" to the next event. */
static int add_event(struct steps *st, const struct pt_event *ev, int *abort)
{
	struct step s;
	int was_abort = *abort;

	*abort = 0;
	memset(&s, 0, sizeof(s));
	s.has_ip = !ev->ip_suppressed;
	switch (ev->type) {
	case ptev_enabled:
		s.kind = S_ENABLED;
		s.a = ev->variant.enabled.ip;
		s.has_ip = 1;
		break;
	case ptev_disabled:
		s.kind = S_DISABLED;
		s.a = ev->variant.disabled.ip;
		break;
	case ptev_async_disabled:
		s.kind = S_ASYNC_DISABLED;
		s.a = ev->variant.async_disabled.at;
		s.b = ev->variant.async_disabled.ip;
		break;
	case ptev_async_branch:
		s.kind = S_ASYNC_BRANCH;
		s.a = ev->variant.async_branch.from;
		s.abort = (uint8_t) was_abort;
		break;
	case ptev_overflow:
		s.kind = S_OVERFLOW;
		s.a = ev->variant.overflow.ip;
		break;
	case ptev_tsx:
		*abort = ev->variant.tsx.aborted;
		return 0;
	default:
		return 0;   /* paging, exec mode, timing, power, ...: no flow */
	}
	return add_step(st, &s);
}

static int add_error(struct steps *st, int code)
{
	struct step s;

	memset(&s, 0, sizeof(s));
	s.kind = S_ERROR;
	s.code = code;
	return add_step(st, &s);
}

/*
 * Decode from a synchronization point until an error or the end.  Returns
 * libipt's final status (-pte_eos at the end), or 1 when out of memory.
 *
 * IDs count what pt_insn_next delivers, with libipt's end-of-stream quirks
 * resolved as ptxed (the corpus expectations) and the synthesizer's truth
 * (tools/synth/verify.c) both count:
 *  - an instruction pt_insn_next returns together with an error counts if
 *    libipt classified it (iclass != ptic_error), as ptxed prints it;
 *  - once libipt reports pts_eos (no trace left), the instructions it still
 *    decodes (code up to the next branch that needs trace) count when
 *    decoding then stops for want of trace (-pte_eos), and are dropped when
 *    it stops for any other reason (the image ends: ptxed stops at
 *    pts_eos); the instruction that needed the missing trace never counts.
 */
static int decode_synced(struct pt_insn_decoder *d, int status,
			 struct steps *st)
{
	size_t tail_at = 0;
	int in_tail = 0, abort = 0;

	for (;;) {
		struct pt_insn insn;

		while (status & pts_event_pending) {
			struct pt_event ev;

			status = pt_insn_event(d, &ev, sizeof(ev));
			if (status < 0)
				goto out;
			if (add_event(st, &ev, &abort) < 0)
				return 1;
		}
		if ((status & pts_eos) && !in_tail) {
			in_tail = 1;
			tail_at = st->n;
		}
		memset(&insn, 0, sizeof(insn));
		status = pt_insn_next(d, &insn, sizeof(insn));
		if (status < 0) {
			if (!in_tail && insn.iclass != ptic_error &&
			    add_insn(st, &insn) < 0)
				return 1;
			break;
		}
		abort = 0;
		if (add_insn(st, &insn) < 0)
			return 1;
	}
out:
	if (in_tail) {
		if (status != -pte_eos)
			st->n = tail_at;
		status = -pte_eos;
	}
	return status;
}

static int decode(const uint8_t *trace, size_t size, struct pt_image *image,
		  const struct ref_config *cfg, struct steps *st, char *err,
		  size_t errlen)
{
	struct pt_insn_decoder *d;
	struct pt_config c;
	uint64_t last_sync;
	int status;

	pt_config_init(&c);
	c.begin = (uint8_t *) (uintptr_t) trace;
	c.end = c.begin + size;
	if (cfg->cpu_family) {
		c.cpu.vendor = pcv_intel;
		c.cpu.family = (uint16_t) cfg->cpu_family;
		c.cpu.model = (uint8_t) cfg->cpu_model;
		c.cpu.stepping = (uint8_t) cfg->cpu_stepping;
		if (pt_cpu_errata(&c.errata, &c.cpu) < 0) {
			snprintf(err, errlen, "pt_cpu_errata failed");
			return -1;
		}
	}
	c.cpuid_0x15_eax = cfg->cpuid_0x15_eax;
	c.cpuid_0x15_ebx = cfg->cpuid_0x15_ebx;
	c.mtc_freq = cfg->mtc_freq;
	c.nom_freq = cfg->nom_freq;
	d = pt_insn_alloc_decoder(&c);
	if (!d) {
		snprintf(err, errlen, "pt_insn_alloc_decoder failed");
		return -1;
	}
	status = pt_insn_set_image(d, image);
	if (status < 0) {
		snprintf(err, errlen, "pt_insn_set_image: %s",
			 pt_errstr(pt_errcode(status)));
		pt_insn_free_decoder(d);
		return -1;
	}
	status = pt_insn_sync_forward(d);
	if (pt_insn_get_sync_offset(d, &last_sync) < 0)
		last_sync = 0;
	for (;;) {
		uint64_t off = 0;

		if (status >= 0) {
			status = decode_synced(d, status, st);
			if (status == 1) {
				snprintf(err, errlen, "out of memory");
				pt_insn_free_decoder(d);
				return -1;
			}
		}
		if (status == -pte_eos)
			break;
		/* A decode or synchronization error: a gap, then the next
		 * PSB.  libipt's search starts at the decoder's position, or
		 * past the PSB it synchronized at last if it is still there
		 * (that PSB's header failed), so each try is at a later PSB:
		 * stop if one is not. */
		if (add_error(st, status) < 0) {
			snprintf(err, errlen, "out of memory");
			pt_insn_free_decoder(d);
			return -1;
		}
		status = pt_insn_sync_forward(d);
		if (status != -pte_eos &&
		    (pt_insn_get_sync_offset(d, &off) < 0 || off <= last_sync))
			break;
		last_sync = off;
	}
	pt_insn_free_decoder(d);
	return 0;
}

/* ---- pass 2: the tree rules ------------------------------------------ */

struct frame {
	uint64_t first, ret, entry;
	uint64_t anchor;       /* an address in its function (README: its
				* entry, else the first address it ran, or
				* the function entry an indirect jump took
				* it to) */
	size_t child_base;     /* its children in b->open[child_base..] */
	unsigned flags;
	uint8_t has_first, has_ret, has_entry, entry_pending, far;
	uint8_t callback;      /* entered from untraced code */
};

#define REF_CALLERS 4
struct called {
	uint64_t entry;
	uint64_t from[REF_CALLERS];     /* 0: none */
};

struct builder {
	const struct ref_config *cfg;
	struct ref_tree *t;
	size_t bcap, gcap;
	struct frame *st;      /* st[0]: the top-level frame, never popped */
	size_t depth, scap;
	size_t *open;          /* blocks whose parent is not closed yet */
	size_t nopen, ocap;
	uint64_t n;            /* next instruction ID */
	int own;               /* the top level ran an instruction itself
				* since the last late block */
	int ret_pending;       /* a return waits for its landing address */
	uint64_t ret_id;
	int jmp_pending;       /* an indirect near jump waits for its
				* landing address */
	uint64_t jmp_id, jmp_src;
	int off, async_off;    /* tracing disabled (asynchronously) */
	uint64_t off_at;       /* where the asynchronous disable stopped */
	int gap_pending;       /* gaps whose resume address is not known */
	int gap_ovf;           /* ... one is an overflow */
	int gap_err;           /* ... one is a decode error */
	int gap_sync;          /* ... one is a synchronous disable */
	/* Every entry address a frame got so far ("a call went there"):
	 * open addressing, 0 = empty (0 is never an entry). */
	uint64_t *entries;
	size_t nentries, ecap;
	/* Traced calls seen: callee entry, then the first REF_CALLERS
	 * distinct functions (ref_func.id) calls to it came from. */
	struct called *called;
	size_t ncalled, ccap;
};

static uint64_t hash64(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ull;
	x ^= x >> 27;
	return x;
}

static int entry_known(const struct builder *b, uint64_t addr)
{
	size_t j;

	if (!b->ecap || !addr)
		return 0;
	for (j = hash64(addr) & (b->ecap - 1); b->entries[j];
	     j = (j + 1) & (b->ecap - 1))
		if (b->entries[j] == addr)
			return 1;
	return 0;
}

static int entry_add(struct builder *b, uint64_t addr)
{
	size_t j;

	if (!addr || entry_known(b, addr))
		return 0;
	if ((b->nentries + 1) * 2 > b->ecap) {
		size_t ncap = b->ecap ? b->ecap * 2 : 256, i;
		uint64_t *n = calloc(ncap, sizeof(*n));

		if (!n)
			return -1;
		for (i = 0; i < b->ecap; i++) {
			if (!b->entries[i])
				continue;
			for (j = hash64(b->entries[i]) & (ncap - 1); n[j];
			     j = (j + 1) & (ncap - 1))
				;
			n[j] = b->entries[i];
		}
		free(b->entries);
		b->entries = n;
		b->ecap = ncap;
	}
	for (j = hash64(addr) & (b->ecap - 1); b->entries[j];
	     j = (j + 1) & (b->ecap - 1))
		;
	b->entries[j] = addr;
	b->nentries++;
	return 0;
}

/* The function holding @addr (ELF symbols): 0, or -1 when none or no
 * symbols. */
static int func(const struct builder *b, uint64_t addr, struct ref_func *f)
{
	if (!b->cfg->func_of || !addr)
		return -1;
	return b->cfg->func_of(b->cfg->func_ctx, addr, f) < 0 ? -1 : 0;
}

/* Is @addr a function's entry by the symbols (a FUNC.cold part's start is
 * none)? */
static int sym_entry(const struct builder *b, uint64_t addr)
{
	struct ref_func f;

	return func(b, addr, &f) == 0 && f.entry && f.start == addr;
}

/* The record of the traced calls to @entry, or NULL.  (A linear search:
 * the reference's traces are small.) */
static struct called *called_of(const struct builder *b, uint64_t entry)
{
	size_t i;

	for (i = 0; i < b->ncalled; i++)
		if (b->called[i].entry == entry)
			return &b->called[i];
	return NULL;
}

/* Frame @f's entry is @addr. */
static int set_entry(struct builder *b, struct frame *f, uint64_t addr)
{
	struct ref_func caller;
	struct called *c;
	unsigned k;

	f->entry_pending = 0;
	f->has_entry = 1;
	f->entry = addr;
	if (!f->anchor)
		f->anchor = addr;
	/* Rule 4: a traced call from the function of the frame below. */
	if (f->has_ret && !f->far && f != b->st &&
	    func(b, f[-1].anchor, &caller) == 0) {
		c = called_of(b, addr);
		if (!c) {
			if (GROW(b->called, b->ccap, b->ncalled) < 0)
				return -1;
			c = &b->called[b->ncalled++];
			memset(c, 0, sizeof(*c));
			c->entry = addr;
		}
		for (k = 0; k < REF_CALLERS && c->from[k] != caller.id; k++)
			if (!c->from[k]) {
				c->from[k] = caller.id;
				break;
			}
	}
	return entry_add(b, addr);
}

static int push(struct builder *b, int has_ret, uint64_t ret, int far)
{
	struct frame *f;

	if (GROW(b->st, b->scap, b->depth) < 0)
		return -1;
	f = &b->st[b->depth++];
	memset(f, 0, sizeof(*f));
	f->has_ret = (uint8_t) has_ret;
	f->ret = ret;
	f->far = (uint8_t) far;
	f->entry_pending = 1;
	f->child_base = b->nopen;
	return 0;
}

static int add_open(struct builder *b, size_t idx)
{
	if (GROW(b->open, b->ocap, b->nopen) < 0)
		return -1;
	b->open[b->nopen++] = idx;
	return 0;
}

/* Make a block of @f ending at @last; its children are the open blocks
 * from @child_base on.  The block itself becomes open. */
static int emit(struct builder *b, const struct frame *f, uint64_t last,
		unsigned flags, size_t child_base)
{
	struct ref_tree *t = b->t;
	struct ref_block *blk;
	size_t i, idx = t->nblocks;

	if (GROW(t->blocks, b->bcap, t->nblocks) < 0)
		return -1;
	blk = &t->blocks[t->nblocks++];
	blk->first = f->first;
	blk->last = last;
	blk->parent = -1;
	blk->entry = f->has_entry ? f->entry : 0;
	blk->has_entry = f->has_entry;
	blk->flags = f->flags | flags;
	for (i = child_base; i < b->nopen; i++)
		t->blocks[b->open[i]].parent = (int64_t) idx;
	b->nopen = child_base;
	return add_open(b, idx);
}

/* Close the innermost frame at @last.  A frame that never ran a traced
 * instruction is no block (it can have no children either). */
static int pop(struct builder *b, uint64_t last, unsigned flags)
{
	struct frame f = b->st[--b->depth];

	/* The kernel's side of a syscall or interrupt, its entry never
	 * seen, is no block: its blocks stay open for the frame below. */
	if (f.far && !f.has_entry && b->depth > 0)
		return 0;
	if (!f.has_first)
		return 0;
	return emit(b, &f, last, flags, f.child_base);
}

/* Close frames down to and including @i: the ones above @i with @above,
 * @i itself with @self. */
static int close_to(struct builder *b, size_t i, uint64_t last,
		    unsigned above, unsigned self)
{
	while (b->depth > i + 1)
		if (pop(b, last, above) < 0)
			return -1;
	return pop(b, last, self);
}

/* Close the frames above @i (it goes on) at @last with @flags. */
static int close_above(struct builder *b, size_t i, uint64_t last,
		       unsigned flags)
{
	while (b->depth > i + 1)
		if (pop(b, last, flags) < 0)
			return -1;
	return 0;
}

/* Rule 3, "nothing open": the top-level frame was a callee all along.  It
 * becomes a late block closing at @last that adopts everything so far; its
 * caller is the new top-level frame, open since the trace began too (so
 * it keeps the gap flag).  Its function is where it goes on: the first
 * address it runs. */
static int late_return(struct builder *b, uint64_t last)
{
	struct frame top = b->st[0];

	top.first = 0;
	top.has_first = 1;
	top.has_entry = 0;
	b->own = 0;
	b->st[0].anchor = 0;
	return emit(b, &top, last, REF_LATE, 0);
}

/* The innermost frame below index @below whose function (ELF symbols)
 * holds @l, not at its entry; @below when none. */
static size_t holder(const struct builder *b, size_t below, uint64_t l)
{
	struct ref_func fl, fa;
	size_t i;

	if (func(b, l, &fl) < 0 || (fl.entry && l == fl.start))
		return below;
	for (i = below; i-- > 0;)
		if (func(b, b->st[i].anchor, &fa) == 0 && fa.id == fl.id)
			return i;
	return below;
}

/* Rule 3's exception: frame @i, which the innermost returned to, is an
 * interrupt's; the innermost was entered where tracing resumed and only
 * the kernel's side lies between: the kernel made it a call. */
static int kernel_call(const struct builder *b, size_t i)
{
	size_t k;

	if (!b->st[i].far || !b->st[b->depth - 1].callback)
		return 0;
	for (k = i + 1; k + 1 < b->depth; k++)
		if (!b->st[k].far || b->st[k].has_entry)
			return 0;
	return 1;
}

/* The frame whose start was lost where decoding resumed, or a caller
 * entered where the trace cannot show it: flags `late` and `gap`, entry
 * and return address unknown, its function @l's.  @child_base: the open
 * blocks it adopts. */
static int push_late(struct builder *b, uint64_t l, size_t child_base,
		     int has_first, uint64_t first)
{
	struct frame *f;

	if (push(b, 0, 0, 0) < 0)
		return -1;
	f = &b->st[b->depth - 1];
	f->entry_pending = 0;
	f->flags = REF_LATE | REF_GAP;
	f->anchor = l;
	f->child_base = child_base;
	f->has_first = (uint8_t) has_first;
	f->first = first;
	return 0;
}

/* Rule 3: the return at b->ret_id landed at @l (@known). */
static int resolve_return(struct builder *b, int known, uint64_t l)
{
	size_t k = b->depth - 1, i;
	uint64_t r = b->ret_id;
	struct ref_func fl;

	b->ret_pending = 0;
	if (!known || (b->st[k].has_ret && b->st[k].ret == l))
		return pop(b, r, 0);
	/* The return address of an outer frame: the frames above it were
	 * abandoned. */
	for (i = k; i-- > 1;)
		if (b->st[i].has_ret && b->st[i].ret == l)
			return close_to(b, i, r, kernel_call(b, i) ? 0 :
					REF_UNWOUND, 0);
	/* Inside (not at the entry of) the function of an outer frame (a
	 * catch block): the frames above it were abandoned, it goes on.  A
	 * return to a function's entry is a jump in disguise.  Back in its
	 * caller, a frame that does not know its return address returns
	 * plainly. */
	i = holder(b, k, l);
	if (i < k) {
		if (i + 1 == k && !b->st[k].has_ret)
			return pop(b, r, 0);
		return close_above(b, i, r, REF_UNWOUND);
	}
	/* Into a function no open frame is in, from a frame that does not
	 * know its return address: its caller was entered unseen.  A late
	 * caller takes its place and adopts it. */
	if (!b->st[k].has_ret && func(b, l, &fl) == 0 &&
	    !(fl.entry && fl.start == l) && holder(b, k + 1, l) > k) {
		struct frame f = b->st[k];

		if (pop(b, r, 0) < 0)
			return -1;
		return push_late(b, l, f.child_base, f.has_first, f.first);
	}
	return pop(b, r, 0);
}

/* Rule 3a: the indirect jump at b->jmp_id landed at @l (@known). */
static int resolve_jump(struct builder *b, int known, uint64_t l)
{
	size_t k = b->depth - 1, i;
	uint64_t j = b->jmp_id;
	struct ref_func fl, fs;

	b->jmp_pending = 0;
	if (!known)
		return 0;
	/* The innermost frame's return address: a return in disguise.  An
	 * outer frame's: the jump left it and the frames above it. */
	if (k > 0 && b->st[k].has_ret && b->st[k].ret == l)
		return pop(b, j, 0);
	for (i = k; i-- > 1;)
		if (b->st[i].has_ret && b->st[i].ret == l)
			return close_to(b, i, j, REF_UNWOUND, REF_UNWOUND);
	if (func(b, l, &fl) < 0)
		return 0;
	/* To a function's entry (a PLT stub's jump, a tail call through a
	 * pointer): the frame runs that function now.  (A direct tail call
	 * is not seen: README.) */
	if (fl.entry && fl.start == l) {
		b->st[k].anchor = l;
		return 0;
	}
	if (func(b, b->jmp_src, &fs) == 0 && fs.id == fl.id)
		return 0;
	/* Into an outer frame's function (longjmp, a landing pad): the
	 * frames above it were abandoned. */
	i = holder(b, k, l);
	return i < k ? close_above(b, i, j, REF_UNWOUND) : 0;
}

/* A transfer waiting for its landing address lands at @l (@known). */
static int land(struct builder *b, int known, uint64_t l)
{
	if (b->ret_pending)
		return resolve_return(b, known, l);
	if (b->jmp_pending)
		return resolve_jump(b, known, l);
	return 0;
}

/* A frame whose entry is pending learns it is lost. */
static void entry_lost(struct builder *b)
{
	struct frame *f = &b->st[b->depth - 1];

	if (f->entry_pending) {
		f->entry_pending = 0;
		f->has_entry = 0;
	}
}

/* A gap begins: some of the execution of every open frame is missing
 * (also of those that close where tracing resumes, and of a frame whose
 * first instructions it swallows).  Choice: a gap before the first
 * instruction lies in no frame (the trace begins after it). */
static int add_gap(struct builder *b, enum ref_gap_kind kind, int code)
{
	struct ref_tree *t = b->t;
	size_t i;

	if (GROW(t->gaps, b->gcap, t->ngaps) < 0)
		return -1;
	t->gaps[t->ngaps].id = b->n;
	t->gaps[t->ngaps].kind = kind;
	t->gaps[t->ngaps].code = code;
	t->ngaps++;
	for (i = b->n ? 0 : 1; i < b->depth; i++)
		b->st[i].flags |= REF_GAP;
	b->gap_pending = 1;
	if (kind == REF_GAP_OVERFLOW)
		b->gap_ovf = 1;
	else if (kind == REF_GAP_ERROR)
		b->gap_err = 1;
	else if (!b->async_off)
		b->gap_sync = 1;
	return 0;
}

/* Is @r a function's entry: an ELF symbol starts there, or a frame was
 * entered there before?  Choice: "a call went there before" counts every
 * entry a frame got (calls, TIP.PGD targets, interrupt handlers,
 * callbacks), whether or not the frame became a block. */
static int is_entry(const struct builder *b, uint64_t r)
{
	return entry_known(b, r) || sym_entry(b, r);
}

/* A frame called from untraced code at @r. */
static int push_callback(struct builder *b, uint64_t r)
{
	if (push(b, 0, 0, 0) < 0)
		return -1;
	b->st[b->depth - 1].callback = 1;
	return set_entry(b, &b->st[b->depth - 1], r);
}

/* Rule 4 after a decode error, with symbols: resume at @r like after a
 * synchronous disable, matched against the open frames. */
static int resume_error(struct builder *b, uint64_t r, uint64_t last)
{
	struct ref_func f;
	struct called *c;
	size_t i;

	if (!b->cfg->func_of)
		return 0;       /* goes on in the current frame */
	/* Inside an open frame's function (the innermost included): it goes
	 * on, the frames above it returned unseen. */
	i = holder(b, b->depth, r);
	if (i < b->depth)
		return close_above(b, i, last, REF_IMPLICIT);
	if (is_entry(b, r))
		return push_callback(b, r);
	if (func(b, r, &f) < 0)
		return 0;
	/* Inside a function no open frame is in.  If traced calls to it
	 * came from the function of an open frame (the innermost such),
	 * that frame called it: the frames above it returned unseen.
	 * Either way a frame whose start was lost opens there; without such
	 * a call it is deeper, entered in the gap. */
	if (f.entry && (c = called_of(b, f.start)))
		for (i = b->depth; i-- > 0;) {
			struct ref_func fa;
			unsigned k;

			if (func(b, b->st[i].anchor, &fa) < 0)
				continue;
			for (k = 0; k < REF_CALLERS && c->from[k]; k++)
				if (c->from[k] == fa.id)
					break;
			if (k < REF_CALLERS && c->from[k]) {
				if (close_above(b, i, last, REF_IMPLICIT) < 0)
					return -1;
				break;
			}
		}
	return push_late(b, r, b->nopen, 0, 0);
}

/* Rule 4: tracing resumes at @r after the pending gaps; the first rule
 * that applies. */
static int resume(struct builder *b, uint64_t r)
{
	uint64_t last = b->n ? b->n - 1 : 0;
	size_t i;
	int rc = 0, done = 0;

	/* The return address of an open frame: it and the frames above it
	 * returned unseen. */
	for (i = b->depth - 1; i >= 1 && !done; i--)
		if (b->st[i].has_ret && b->st[i].ret == r) {
			rc = close_to(b, i, last, REF_IMPLICIT, REF_IMPLICIT);
			done = 1;
		}
	/* After an overflow: nothing else.  Choice: an overflow and a
	 * decode error both before the resume: the overflow's rule, the
	 * first in the README's order. */
	if (!done && b->gap_ovf)
		done = 1;
	if (!done && b->gap_err) {
		rc = resume_error(b, r, last);
		done = 1;
	}
	/* A callback that left by a jump returned through untraced code. */
	if (!done && b->gap_sync && b->depth > 1 &&
	    b->st[b->depth - 1].callback && pop(b, last, REF_IMPLICIT) < 0)
		return -1;
	/* Inside an open frame's function: it goes on, the frames above it
	 * were left unseen. */
	if (!done && (i = holder(b, b->depth, r)) < b->depth) {
		if (close_above(b, i, last, REF_UNWOUND) < 0)
			return -1;
		done = 1;
	}
	/* A function's entry: a callback; far frames stay open. */
	if (!done && is_entry(b, r)) {
		rc = push_callback(b, r);
		done = 1;
	}
	/* A far frame is open: the kernel returned (the outermost one and
	 * everything above it close). */
	for (i = 1; i < b->depth && !done; i++)
		if (b->st[i].far) {
			rc = close_to(b, i, last, REF_IMPLICIT, REF_IMPLICIT);
			done = 1;
		}
	/* A synchronous disable: a callback no symbol names. */
	if (!done && b->gap_sync)
		rc = push_callback(b, r);
	b->gap_pending = 0;
	b->gap_ovf = 0;
	b->gap_err = 0;
	b->gap_sync = 0;
	return rc;
}

static int on_insn(struct builder *b, const struct step *s)
{
	struct frame *f;
	size_t i;
	uint64_t id;

	if (b->gap_pending && resume(b, s->a) < 0)
		return -1;
	if (land(b, 1, s->a) < 0)
		return -1;
	f = &b->st[b->depth - 1];
	if (f->entry_pending && set_entry(b, f, s->a) < 0)
		return -1;
	if (!f->anchor)
		f->anchor = s->a;
	/* Frames opened since the last instruction start here. */
	for (i = b->depth; i-- > 1 && !b->st[i].has_first;) {
		b->st[i].has_first = 1;
		b->st[i].first = b->n;
	}
	if (b->depth == 1)
		b->own = 1;
	id = b->n++;
	switch (s->cls) {
	case ptic_call:
	case ptic_far_call:
		return push(b, 1, s->a + s->size, s->cls == ptic_far_call);
	case ptic_return:
	case ptic_far_return:
		if (b->depth == 1)
			return late_return(b, id);
		b->ret_pending = 1;
		b->ret_id = id;
		return 0;
	default:
		if (s->ijmp) {
			b->jmp_pending = 1;
			b->jmp_id = id;
			b->jmp_src = s->a;
		}
		return 0;
	}
}

static int on_step(struct builder *b, const struct step *s)
{
	switch (s->kind) {
	case S_INSN:
		return on_insn(b, s);
	case S_ASYNC_BRANCH:
		/* Choice: an interrupt right after a gap resumes at `from`. */
		if (b->gap_pending && resume(b, s->a) < 0)
			return -1;
		if (land(b, 1, s->a) < 0)
			return -1;
		if (s->abort)
			return 0;
		/* Choice: an interrupt right after a call (before its first
		 * instruction) gives the callee's entry: where it was
		 * interrupted. */
		if (b->st[b->depth - 1].entry_pending &&
		    set_entry(b, &b->st[b->depth - 1], s->a) < 0)
			return -1;
		return push(b, 1, s->a, 1);
	case S_DISABLED:
	case S_ASYNC_DISABLED:
		/* An asynchronous disable's IP is where a pending return or
		 * jump landed (the next instruction to run).  Choice: a
		 * synchronous one leaves the landing unknown, even a
		 * TIP.PGD that carries the target. */
		if (land(b, s->kind == S_ASYNC_DISABLED, s->a) < 0)
			return -1;
		if (s->kind == S_DISABLED) {
			struct frame *f = &b->st[b->depth - 1];

			/* A call into untraced code: TIP.PGD gives the
			 * callee's entry. */
			if (f->entry_pending && s->has_ip &&
			    set_entry(b, f, s->a) < 0)
				return -1;
			entry_lost(b);
		}
		b->off = 1;
		b->async_off = s->kind == S_ASYNC_DISABLED;
		b->off_at = s->a;
		return 0;
	case S_ENABLED:
		if (b->off) {
			b->off = 0;
			if (b->async_off && s->a == b->off_at)
				return 0;       /* nothing lost */
			entry_lost(b);
			if (add_gap(b, REF_GAP_DISABLED, 0) < 0)
				return -1;
			/* The kernel took over where tracing stopped: a far
			 * frame, its entry unknown (the kernel is not in the
			 * trace); it is not open across this gap. */
			if (b->async_off) {
				if (push(b, 1, b->off_at, 1) < 0)
					return -1;
				b->st[b->depth - 1].entry_pending = 0;
			}
		}
		return b->gap_pending ? resume(b, s->a) : 0;
	case S_OVERFLOW:
		if (land(b, 0, 0) < 0)
			return -1;
		entry_lost(b);
		/* Choice: an overflow ends a disabled stretch (libipt goes on
		 * at the overflow's IP or reports the enable itself). */
		b->off = 0;
		if (add_gap(b, REF_GAP_OVERFLOW, 0) < 0)
			return -1;
		return s->has_ip ? resume(b, s->a) : 0;
	case S_ERROR:
		if (land(b, 0, 0) < 0)
			return -1;
		entry_lost(b);
		b->off = 0;     /* the decoder resynchronizes */
		return add_gap(b, REF_GAP_ERROR, s->code);
	}
	return 0;
}

/* Rule 5 (and the end of a disable that never resumed). */
static int finish(struct builder *b)
{
	uint64_t last = b->n ? b->n - 1 : 0;

	if (land(b, 0, 0) < 0)
		return -1;
	/* Choice (as tools/synth/verify.c and TRUTH.md): an asynchronous
	 * disable that never resumes is a gap lasting to the end; a
	 * synchronous one (TIP.PGD at the end of the traced region) is not. */
	if (b->off && b->async_off && add_gap(b, REF_GAP_DISABLED, 0) < 0)
		return -1;
	while (b->depth > 1)
		if (pop(b, last, REF_TRUNCATED) < 0)
			return -1;
	if (b->own) {
		struct frame top = b->st[0];

		top.first = 0;
		top.has_first = 1;
		top.has_entry = 0;
		if (emit(b, &top, last, REF_LATE | REF_TRUNCATED, 0) < 0)
			return -1;
	}
	return 0;
}

void ref_config_init(struct ref_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
}

int ref_tree_build(const uint8_t *trace, size_t size, struct pt_image *image,
		   const struct ref_config *cfg, struct ref_tree *out,
		   char *err, size_t errlen)
{
	struct steps st;
	struct builder b;
	size_t i;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	memset(&st, 0, sizeof(st));
	if (decode(trace, size, image, cfg, &st, err, errlen) < 0) {
		free(st.s);
		return -1;
	}
	memset(&b, 0, sizeof(b));
	b.cfg = cfg;
	b.t = out;
	if (push(&b, 0, 0, 0) < 0)
		rc = -1;
	if (!rc) {
		b.st[0].entry_pending = 0;
		for (i = 0; i < st.n && !rc; i++)
			rc = on_step(&b, &st.s[i]);
	}
	if (!rc)
		rc = finish(&b);
	out->insns = b.n;
	if (rc < 0)
		snprintf(err, errlen, "out of memory");
	free(b.st);
	free(b.open);
	free(b.entries);
	free(b.called);
	free(st.s);
	return rc;
}

void ref_tree_free(struct ref_tree *t)
{
	free(t->blocks);
	free(t->gaps);
	memset(t, 0, sizeof(*t));
}

/* ---- images and symbols from ELF files -------------------------------- */

/* The file's ELF64 header and program headers, checked.  The bias to add
 * to link addresses in *@bias. */
static const Elf64_Ehdr *elf_open(const uint8_t *buf, size_t size,
				  int has_base, uint64_t base, uint64_t *bias)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *) (const void *) buf;
	uint64_t low = UINT64_MAX;
	size_t i;

	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phoff > size ||
	    (size - eh->e_phoff) / sizeof(Elf64_Phdr) < eh->e_phnum)
		return NULL;
	for (i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *) (const void *)
			(buf + eh->e_phoff + i * sizeof(Elf64_Phdr));

		if (ph->p_type == PT_LOAD && ph->p_vaddr < low)
			low = ph->p_vaddr;
	}
	*bias = has_base && low != UINT64_MAX ? base - low : 0;
	return eh;
}

int ref_image_add_elf(struct pt_image *img, const char *path, int has_base,
		      uint64_t base, char *err, size_t errlen)
{
	size_t size = 0, i;
	uint8_t *buf = htr_test_slurp(path, &size);
	const Elf64_Ehdr *eh;
	uint64_t bias;
	int rc = 0;

	if (!buf) {
		snprintf(err, errlen, "%s: cannot read", path);
		return -1;
	}
	eh = elf_open(buf, size, has_base, base, &bias);
	if (!eh) {
		snprintf(err, errlen, "%s: not an ELF64 file", path);
		free(buf);
		return -1;
	}
	for (i = 0; i < eh->e_phnum && !rc; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *) (const void *)
			(buf + eh->e_phoff + i * sizeof(Elf64_Phdr));
		int st;

		if (ph->p_type != PT_LOAD || !ph->p_filesz)
			continue;
		st = pt_image_add_file(img, path, ph->p_offset, ph->p_filesz,
				       NULL, ph->p_vaddr + bias);
		if (st < 0) {
			snprintf(err, errlen, "%s: pt_image_add_file: %s", path,
				 pt_errstr(pt_errcode(st)));
			rc = -1;
		}
	}
	free(buf);
	return rc;
}

/* The length of @name without the suffixes GCC gives the code it splits
 * out of a function: FUNC.cold, FUNC.cold.N, FUNC.part.N (and nested:
 * FUNC.part.0.cold). */
static size_t base_len(const char *name)
{
	size_t n = strlen(name);

	for (;;) {
		size_t d = n;

		while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
			d--;
		if (d < n && d >= 6 && (!strncmp(name + d - 6, ".part.", 6) ||
					!strncmp(name + d - 6, ".cold.", 6))) {
			n = d - 6;
		} else if (n >= 5 && !strncmp(name + n - 5, ".cold", 5)) {
			n -= 5;
		} else {
			return n;
		}
	}
}

static int is_cold(const char *name)
{
	size_t n = strlen(name), d = n;

	while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
		d--;
	if (d < n && d >= 6 && !strncmp(name + d - 6, ".cold.", 6))
		return 1;
	return n >= 5 && !strncmp(name + n - 5, ".cold", 5);
}

struct fsym {
	uint64_t start, end;
	const char *name;
	size_t blen;           /* base_len(name) */
	size_t ext;            /* index in ref_funcs.f */
};

static int cmp_fsym_name(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;
	size_t n = x->blen < y->blen ? x->blen : y->blen;
	int c = memcmp(x->name, y->name, n);

	if (c)
		return c;
	if (x->blen != y->blen)
		return x->blen < y->blen ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_extent(const void *a, const void *b)
{
	const struct ref_extent *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	/* Aliases: the entry first, then the widest. */
	if (x->entry != y->entry)
		return x->entry ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;
}

/* The symbol table (SHT_SYMTAB) of an ELF64 image in @buf: its symbols and
 * string table, checked; -1 when there is none. */
static int symtab(const uint8_t *buf, size_t size, const Elf64_Ehdr *eh,
		  const Elf64_Sym **syms, size_t *nsym, const char **str,
		  size_t *strsize)
{
	size_t i;

	if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
	    (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
		return -1;
	for (i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *sh = (const Elf64_Shdr *) (const void *)
			(buf + eh->e_shoff + i * sizeof(Elf64_Shdr));
		const Elf64_Shdr *st;

		if (sh->sh_type != SHT_SYMTAB || sh->sh_offset > size ||
		    sh->sh_size > size - sh->sh_offset ||
		    sh->sh_link >= eh->e_shnum)
			continue;
		st = (const Elf64_Shdr *) (const void *)
			(buf + eh->e_shoff + sh->sh_link * sizeof(Elf64_Shdr));
		if (st->sh_offset > size ||
		    st->sh_size > size - st->sh_offset || !st->sh_size ||
		    buf[st->sh_offset + st->sh_size - 1])
			continue;
		*syms = (const Elf64_Sym *) (const void *)
			(buf + sh->sh_offset);
		*nsym = sh->sh_size / sizeof(Elf64_Sym);
		*str = (const char *) buf + st->sh_offset;
		*strsize = st->sh_size;
		return 0;
	}
	return -1;
}

/*
 * Every part of one function gets one ID: the address of the symbol named
 * FUNC (of several, the nearest to the part: static functions of one name
 * in different files), else the lowest part of that name.  Choice: a
 * FUNC.cold part's start is no entry (GCC reaches it by jumps only, and
 * landing pads sit there); FUNC.part.N is called, its start is one.
 */
static void assign_ids(struct ref_funcs *fs, struct fsym *sy, size_t n)
{
	size_t i = 0, j, k;

	qsort(sy, n, sizeof(*sy), cmp_fsym_name);
	while (i < n) {
		for (j = i + 1; j < n && sy[j].blen == sy[i].blen &&
		     !memcmp(sy[j].name, sy[i].name, sy[i].blen); j++)
			;
		for (k = i; k < j; k++) {
			uint64_t id = sy[i].start, best = UINT64_MAX;
			size_t m;

			for (m = i; m < j; m++) {
				uint64_t d;

				if (strlen(sy[m].name) != sy[m].blen)
					continue;       /* a part */
				d = sy[m].start > sy[k].start ?
				    sy[m].start - sy[k].start :
				    sy[k].start - sy[m].start;
				if (d < best) {
					best = d;
					id = sy[m].start;
				}
			}
			fs->f[sy[k].ext].id = id;
		}
		i = j;
	}
}

int ref_funcs_from_elf(struct ref_funcs *fs, const char *path, int has_base,
		       uint64_t base, char *err, size_t errlen)
{
	size_t size = 0, i, j, nsym = 0, strsize = 0;
	uint8_t *buf = htr_test_slurp(path, &size);
	const Elf64_Ehdr *eh;
	const Elf64_Sym *syms = NULL;
	const char *str = NULL;
	struct fsym *sy;
	uint64_t bias;

	memset(fs, 0, sizeof(*fs));
	if (!buf || !(eh = elf_open(buf, size, has_base, base, &bias))) {
		snprintf(err, errlen, "%s: not a readable ELF64 file", path);
		free(buf);
		return -1;
	}
	if (symtab(buf, size, eh, &syms, &nsym, &str, &strsize) < 0)
		nsym = 0;
	fs->f = calloc(nsym + 1, sizeof(*fs->f));
	sy = calloc(nsym + 1, sizeof(*sy));
	if (!fs->f || !sy) {
		snprintf(err, errlen, "out of memory");
		free(sy);
		free(buf);
		ref_funcs_free(fs);
		return -1;
	}
	for (i = 0; i < nsym; i++) {
		const Elf64_Sym *sym = &syms[i];
		const char *name = sym->st_name < strsize ? str + sym->st_name
							  : "";

		if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC ||
		    !sym->st_size || sym->st_shndx == SHN_UNDEF)
			continue;
		fs->f[fs->n].start = sym->st_value + bias;
		fs->f[fs->n].end = sym->st_value + bias + sym->st_size;
		fs->f[fs->n].entry = !is_cold(name);
		sy[fs->n].start = fs->f[fs->n].start;
		sy[fs->n].name = name;
		sy[fs->n].blen = base_len(name);
		sy[fs->n].ext = fs->n;
		fs->n++;
	}
	assign_ids(fs, sy, fs->n);
	free(sy);
	free(buf);
	if (fs->n)
		qsort(fs->f, fs->n, sizeof(*fs->f), cmp_extent);
	/* Aliases (one start, several names): the first sorted stays. */
	for (i = j = 0; i < fs->n; i++)
		if (!j || fs->f[i].start != fs->f[j - 1].start)
			fs->f[j++] = fs->f[i];
	fs->n = j;
	return 0;
}

int ref_funcs_lookup(void *ctx, uint64_t addr, struct ref_func *out)
{
	const struct ref_funcs *fs = ctx;
	size_t lo = 0, hi = fs->n;

	/* The last function starting at or below @addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (fs->f[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= fs->f[lo - 1].end)
		return -1;
	out->id = fs->f[lo - 1].id;
	out->start = fs->f[lo - 1].start;
	out->entry = fs->f[lo - 1].entry;
	return 0;
}

void ref_funcs_free(struct ref_funcs *fs)
{
	free(fs->f);
	memset(fs, 0, sizeof(*fs));
}

int ref_elf_symbol(const char *path, const char *name, uint64_t *addr)
{
	size_t size = 0, i, nsym = 0, strsize = 0;
	uint8_t *buf = htr_test_slurp(path, &size);
	const Elf64_Ehdr *eh;
	const Elf64_Sym *syms = NULL;
	const char *str = NULL;
	uint64_t bias;
	int rc = -1;

	if (!buf || !(eh = elf_open(buf, size, 0, 0, &bias)) ||
	    symtab(buf, size, eh, &syms, &nsym, &str, &strsize) < 0)
		nsym = 0;
	for (i = 0; i < nsym && rc; i++)
		if (syms[i].st_name < strsize &&
		    syms[i].st_shndx != SHN_UNDEF &&
		    !strcmp(str + syms[i].st_name, name)) {
			*addr = syms[i].st_value;
			rc = 0;
		}
	free(buf);
	return rc;
}
