/*
 * The walk (walk.h): libipt's block decoder, as decode.c drives it, done
 * again over libipt's query decoder and a cache of the code's branches.
 *
 * What must come out the same is what decode.c sees: for every block the
 * instructions, the class of the last one, and the time after it; and the
 * events, in the same order.  The time is the query decoder's, so the
 * walk asks it the same questions in the same order as the block decoder
 * does: one conditional-branch query per conditional branch and per
 * return (then an indirect-branch query when the return is not
 * compressed), one indirect-branch query per indirect branch, and an
 * event fetched right after the query that announced it.  Where the block
 * decoder binds an event (pt_blk_proceed_event and
 * pt_blk_proceed_trailing_event in libipt 2.0.5), the walk binds it by
 * the same rules, but for one: a disable without an IP on a CPU with
 * SKL014 and IP filters binds to the first direct jump or call out of the
 * filtered code, or a branch that needs trace before it, as libipt's
 * instruction decoder binds it (decode.c has the block decoder's blocks
 * come out the same).  Blocks need not end where libipt's do: decode.c
 * joins blocks that end in an ordinary instruction, and takes the time
 * after the last one, so the walk hands over one block per call, return, far
 * transfer, event or end of trace.
 *
 * A query that fails (bad or missing trace) ends the block as it ends
 * libipt's: without the branch whose trace failed, with libipt's error.
 * Anything else and it gives up (HTR_WALK_UNSURE) rather than guess: an
 * event the code it walked does not explain, 16-bit code, a
 * switch between two known execution modes, an instruction Zydis cannot
 * decode within its piece of the image, the instructions libipt binds
 * events to (mov to CR3, ptwrite, VMX) and the events that bind to them,
 * and the errata workarounds that would rewrite an event (SKD022 at a VMX
 * instruction, BDM64 at a TSX abort).  decode.c
 * then decodes the trace again with the block decoder.
 */
#include "walk.h"
#include "image.h"
#include "x86len.h"
#include "filter.h"

#include <intel-pt.h>
#include <Zydis/Zydis.h>

#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RETSTACK 64              /* libipt's return-compression stack */
#define FOLD_MAX 4096u           /* instructions an entry may span */
#define BLOCK_MAX (1u << 20)     /* instructions a block may hold (the
				  * runaway guard checks between blocks) */
#define TAB_MIN 1024u
#define TAB_MAX (1u << 18)       /* entries (10 MiB) before it starts over */

/* What an instruction makes of the control flow, as libipt classes it. */
enum kind {
	K_OTHER,     /* falls through */
	K_JMP,       /* direct jump */
	K_COND,      /* conditional branch (jcc, jrcxz, loop) */
	K_CALL,      /* direct near call */
	K_ICALL,     /* indirect near call */
	K_RET,       /* near return */
	K_IJMP,      /* indirect near jump */
	K_FARCALL,   /* syscall, sysenter, int, far call */
	K_FARRET,    /* iret, sysret, sysexit, far return */
	K_FARJMP,    /* far jump */
	K_CONT,      /* cache entries only: go on at @target */
	K_UNSURE,    /* what the walk does not follow (see the top) */
};

struct insn {
	uint64_t ip, target, ret;   /* ret: decode.c's return address */
	uint8_t len, kind;
};

/* From @ip, @n instructions to the one at @end, which is of @kind (direct
 * jumps folded in); K_CONT: @n instructions, then on at @target. */
struct ent {
	uint64_t ip, end, target, ret;
	uint32_t n;
	uint8_t kind, len, mode;   /* mode: the same bytes are other
				    * instructions in another mode */
	/* Where the entry the walk went on to last time (after a branch
	 * not taken, taken) sits, + 1; checked before use. */
	uint32_t next[2];
};

struct code {
	uint64_t vaddr, size;
	const uint8_t *data;
	void *map;
	size_t maplen;
};

struct htr_walk {
	struct pt_query_decoder *q;
	ZydisDecoder zd64, zd32;
	struct code *code;          /* later pieces win, as in libipt */
	size_t ncode;
	struct ent *tab;
	size_t cap, used;
	uint32_t *hint;             /* the next[] to note the next entry in */
	int skd022, bdm64;
	int skl014;                 /* the erratum, and filters to apply */
	struct pt_conf_addr_filter filter;

	/* The block decoder's state, from @ip on: zero in a new walk. */
	uint64_t ip;
	int enabled, status, process_event;
	int entering;               /* after a call, an event or a sync */
	enum pt_exec_mode mode;
	struct pt_event ev;
	uint64_t rs[RETSTACK];
	unsigned rs_top, rs_n;
};

/* ------------------------------------------------------------------ */
/* code */

static void unmap_code(struct htr_walk *w)
{
	size_t i;

	for (i = 0; i < w->ncode; i++)
		munmap(w->code[i].map, w->code[i].maplen);
	free(w->code);
	w->code = NULL;
	w->ncode = 0;
}

/* Map the image's pieces as libipt maps them (size clipped to the file). */
static int map_code(struct htr_walk *w, const struct htr_image *img)
{
	size_t i, n = htr_image__count(img);
	long page = sysconf(_SC_PAGESIZE);

	w->code = calloc(n ? n : 1, sizeof(*w->code));
	if (!w->code)
		return HTR_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		const struct htr_image_piece *p = htr_image__piece(img, i);
		struct code *c = &w->code[w->ncode];
		uint64_t skew, size = p->size;
		struct stat st;
		int fd = open(p->file, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return HTR_ERR_IO;
		if (fstat(fd, &st) < 0 || (uint64_t) st.st_size < p->offset) {
			close(fd);
			return HTR_ERR_IO;
		}
		if (!size || size > (uint64_t) st.st_size - p->offset)
			size = (uint64_t) st.st_size - p->offset;
		if (!size) {
			close(fd);
			continue;
		}
		skew = p->offset % (uint64_t) page;
		c->maplen = (size_t) (size + skew);
		c->map = mmap(NULL, c->maplen, PROT_READ, MAP_PRIVATE, fd,
			      (off_t) (p->offset - skew));
		close(fd);
		if (c->map == MAP_FAILED)
			return HTR_ERR_IO;
		c->data = (const uint8_t *) c->map + skew;
		c->vaddr = p->vaddr;
		c->size = size;
		w->ncode++;
	}
	return 0;
}

/* The bytes at @ip up to the end of the piece holding it. */
static const uint8_t *code_at(const struct htr_walk *w, uint64_t ip,
			      size_t *n)
{
	size_t i;

	for (i = w->ncode; i-- > 0;) {
		const struct code *c = &w->code[i];

		if (ip - c->vaddr < c->size) {
			uint64_t left = c->size - (ip - c->vaddr);

			*n = left < 15 ? (size_t) left : 15;
			return c->data + (ip - c->vaddr);
		}
	}
	return NULL;
}

static int decode_insn(const struct htr_walk *w, uint64_t ip, struct insn *in)
{
	ZydisDecodedInstruction z;
	const uint8_t *p;
	size_t n;
	int far, rel, len;

	if (w->mode != ptem_64bit && w->mode != ptem_32bit)
		return HTR_WALK_UNSURE;
	p = code_at(w, ip, &n);
	if (!p)
		return -pte_nomap;
	/* An instruction running past its piece: libipt reads on in the
	 * next one (a truncated block); the walk does not. */
	if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(w->mode == ptem_64bit ?
						      &w->zd64 : &w->zd32,
						      NULL, p, n, &z)))
		return HTR_WALK_UNSURE;
	memset(in, 0, sizeof(*in));
	in->ip = ip;
	in->len = z.length;
	far = z.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
	rel = z.raw.imm[0].is_relative;
	switch (z.mnemonic) {
	case ZYDIS_MNEMONIC_JMP:
		in->kind = far ? K_FARJMP : rel ? K_JMP : K_IJMP;
		break;
	case ZYDIS_MNEMONIC_CALL:
		in->kind = far ? K_FARCALL : rel ? K_CALL : K_ICALL;
		break;
	case ZYDIS_MNEMONIC_RET:
		in->kind = far ? K_FARRET : K_RET;
		break;
	case ZYDIS_MNEMONIC_SYSCALL:
	case ZYDIS_MNEMONIC_SYSENTER:
	case ZYDIS_MNEMONIC_INT:
	case ZYDIS_MNEMONIC_INT1:
	case ZYDIS_MNEMONIC_INT3:
	case ZYDIS_MNEMONIC_INTO:
		in->kind = K_FARCALL;
		break;
	case ZYDIS_MNEMONIC_SYSEXIT:
	case ZYDIS_MNEMONIC_SYSRET:
	case ZYDIS_MNEMONIC_IRET:
	case ZYDIS_MNEMONIC_IRETD:
	case ZYDIS_MNEMONIC_IRETQ:
		in->kind = K_FARRET;
		break;
	case ZYDIS_MNEMONIC_JCXZ:
	case ZYDIS_MNEMONIC_JECXZ:
	case ZYDIS_MNEMONIC_JRCXZ:
	case ZYDIS_MNEMONIC_LOOP:
	case ZYDIS_MNEMONIC_LOOPE:
	case ZYDIS_MNEMONIC_LOOPNE:
		in->kind = K_COND;
		break;
	/* What libipt binds paging, vmcs and ptwrite events to, and
	 * transfers it may class otherwise. */
	case ZYDIS_MNEMONIC_RSM:
	case ZYDIS_MNEMONIC_VMLAUNCH:
	case ZYDIS_MNEMONIC_VMRESUME:
	case ZYDIS_MNEMONIC_VMCALL:
	case ZYDIS_MNEMONIC_VMMCALL:
	case ZYDIS_MNEMONIC_VMPTRLD:
	case ZYDIS_MNEMONIC_PTWRITE:
		in->kind = K_UNSURE;
		break;
	default:
		if (z.meta.category == ZYDIS_CATEGORY_COND_BR)
			in->kind = K_COND;
		else if (z.mnemonic == ZYDIS_MNEMONIC_MOV &&
			 z.opcode_map == ZYDIS_OPCODE_MAP_0F && z.opcode == 0x22)
			in->kind = K_UNSURE;          /* mov to a control reg */
		else
			in->kind = K_OTHER;
		break;
	}
	if (rel && (in->kind == K_JMP || in->kind == K_CALL ||
		    in->kind == K_COND))
		in->target = ip + in->len + (uint64_t) z.raw.imm[0].value.s;
	/* The return address decode.c gives the block decoder's calls. */
	if (in->kind == K_CALL || in->kind == K_ICALL || in->kind == K_FARCALL) {
		(void) htr_x86__classify(p, n, w->mode == ptem_64bit, &len);
		in->ret = len ? ip + (uint64_t) len : 0;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* the cache of branches */

static size_t slot_of(const struct htr_walk *w, uint64_t ip, uint8_t mode)
{
	uint64_t key = ip ^ ((uint64_t) mode << 62);
	size_t h = (size_t) ((key * 0x9e3779b97f4a7c15ull) >> 17);

	h &= w->cap - 1;
	while (w->tab[h].n && (w->tab[h].ip != ip || w->tab[h].mode != mode))
		h = (h + 1) & (w->cap - 1);
	return h;
}

static int tab_grow(struct htr_walk *w)
{
	size_t cap = w->cap * 2, i, oldcap = w->cap;
	struct ent *old = w->tab;

	if (cap > TAB_MAX) {
		/* Full: start over (the code in use comes back quickly). */
		memset(w->tab, 0, w->cap * sizeof(*w->tab));
		w->used = 0;
		return 0;
	}
	w->tab = calloc(cap, sizeof(*w->tab));
	if (!w->tab) {
		w->tab = old;
		return HTR_ERR_NOMEM;
	}
	w->cap = cap;
	for (i = 0; i < oldcap; i++)
		if (old[i].n)
			w->tab[slot_of(w, old[i].ip, old[i].mode)] = old[i];
	free(old);
	return 0;
}

/* Fill *@e for @ip: follow the code to the next instruction that needs
 * trace or ends a block. */
static int fill(struct htr_walk *w, uint64_t ip, struct ent *e)
{
	uint64_t at = ip;
	uint32_t n = 0;
	struct insn in;
	int rc;

	for (;;) {
		rc = decode_insn(w, at, &in);
		if (rc < 0) {
			if (!n)
				return rc;
			/* Stop before it: it fails when it is reached. */
			e->kind = K_CONT;
			e->target = at;
			break;
		}
		n++;
		if (in.kind == K_OTHER || in.kind == K_JMP) {
			at = in.kind == K_JMP ? in.target : at + in.len;
			if (n < FOLD_MAX)
				continue;
			e->kind = K_CONT;
			e->target = at;
			break;
		}
		e->kind = in.kind;
		e->end = at;
		e->target = in.target;
		e->ret = in.ret;
		e->len = in.len;
		break;
	}
	e->ip = ip;
	e->n = n;
	return 0;
}

static inline int lookup(struct htr_walk *w, uint64_t ip,
			 const struct ent **out)
{
	uint32_t *hint = w->hint;
	size_t h;
	int rc;

	w->hint = NULL;
	/* Most branches go where they went before. */
	if (hint && *hint && w->tab[*hint - 1].ip == ip &&
	    w->tab[*hint - 1].n && w->tab[*hint - 1].mode == w->mode) {
		*out = &w->tab[*hint - 1];
		return 0;
	}
	h = slot_of(w, ip, (uint8_t) w->mode);
	if (!w->tab[h].n) {
		struct ent e;

		/* Filling may move the table: no hint to note then. */
		hint = NULL;
		memset(&e, 0, sizeof(e));
		if ((rc = fill(w, ip, &e)) < 0)
			return rc;
		e.mode = (uint8_t) w->mode;
		if (2 * (w->used + 1) > w->cap) {
			if ((rc = tab_grow(w)) < 0)
				return rc;
			h = slot_of(w, ip, e.mode);
		}
		w->tab[h] = e;
		w->used++;
	}
	if (hint)
		*hint = (uint32_t) h + 1;
	*out = &w->tab[h];
	return 0;
}

/* ------------------------------------------------------------------ */
/* libipt's block decoder, step for step where it matters */

static void push(struct htr_walk *w, uint64_t ip)
{
	w->rs[w->rs_top] = ip;
	w->rs_top = (w->rs_top + 1) % RETSTACK;
	if (w->rs_n < RETSTACK)
		w->rs_n++;
}

static int pop(struct htr_walk *w, uint64_t *ip)
{
	if (!w->rs_n)
		return -pte_retstack_empty;
	w->rs_top = (w->rs_top + RETSTACK - 1) % RETSTACK;
	w->rs_n--;
	*ip = w->rs[w->rs_top];
	return 0;
}

/* pt_blk_status */
static int flags(const struct htr_walk *w, int f)
{
	if (!w->enabled)
		f |= pts_ip_suppressed;
	if ((w->status & pts_eos) && !w->process_event)
		f |= pts_eos;
	return f;
}

/* pt_blk_fetch_event */
static int fetch_event(struct htr_walk *w)
{
	int st;

	if (w->process_event)
		return 1;
	if (!(w->status & pts_event_pending))
		return 0;
	st = pt_qry_event(w->q, &w->ev, sizeof(w->ev));
	if (st < 0)
		return st;
	w->process_event = 1;
	w->status = st;
	return 1;
}

/* Whether libipt's SKD022 workaround might turn the asynchronous disable
 * into a synchronous one (at VMLAUNCH or VMRESUME, which the walk counts
 * with what it does not follow): the walk does not. */
static int skd022(struct htr_walk *w)
{
	struct insn in;

	return w->skd022 &&
	       decode_insn(w, w->ev.variant.async_disabled.at, &in) == 0 &&
	       in.kind == K_UNSURE;
}

/* pt_blk_proceed_trailing_event, without postponed instructions (the
 * walk gives up on the events that postpone one). */
static int trailing_event(struct htr_walk *w);

static inline int trailing(struct htr_walk *w)
{
	if (!w->process_event && !(w->status & pts_event_pending))
		return flags(w, 0);
	return trailing_event(w);
}

static int trailing_event(struct htr_walk *w)
{
	const struct pt_event *ev = &w->ev;
	int st = fetch_event(w), supp;

	if (st <= 0)
		return st < 0 ? st : flags(w, 0);
	supp = ev->ip_suppressed;
	switch (ev->type) {
	case ptev_disabled:
		break;
	case ptev_enabled:
	case ptev_overflow:
	case ptev_stop:
	case ptev_pwre:
	case ptev_pwrx:
	case ptev_tick:
	case ptev_cbr:
	case ptev_mnt:
		return flags(w, pts_event_pending);
	case ptev_async_disabled:
		if (w->ip != ev->variant.async_disabled.at)
			break;
		if (skd022(w))
			return HTR_WALK_UNSURE;
		return flags(w, pts_event_pending);
	case ptev_async_branch:
		if (w->ip != ev->variant.async_branch.from)
			break;
		return flags(w, pts_event_pending);
	case ptev_paging:
	case ptev_vmcs:
	case ptev_ptwrite:
		if (!w->enabled)
			return flags(w, pts_event_pending);
		break;
	case ptev_async_paging:
		if (!supp && w->ip != ev->variant.async_paging.ip)
			break;
		return flags(w, pts_event_pending);
	case ptev_async_vmcs:
		if (!supp && w->ip != ev->variant.async_vmcs.ip)
			break;
		return flags(w, pts_event_pending);
	case ptev_exec_mode:
		if (!supp && w->ip != ev->variant.exec_mode.ip)
			break;
		return flags(w, pts_event_pending);
	case ptev_tsx:
		if (!supp && w->bdm64 && ev->variant.tsx.aborted)
			return HTR_WALK_UNSURE;
		if (!supp && w->ip != ev->variant.tsx.ip)
			break;
		return flags(w, pts_event_pending);
	case ptev_exstop:
		if (!supp && w->enabled && w->ip != ev->variant.exstop.ip)
			break;
		return flags(w, pts_event_pending);
	case ptev_mwait:
		if (!supp && w->enabled && w->ip != ev->variant.mwait.ip)
			break;
		return flags(w, pts_event_pending);
	default:
		return HTR_WALK_UNSURE;
	}
	return flags(w, 0);
}

/* The block as decode.c classes its last instruction, of kind @kind at
 * @end (tables: once per block, a switch cost 5 % of the walk). */
static inline void end_block(struct htr_walk_block *b, int kind,
			     uint64_t ret, uint64_t end)
{
	static const uint8_t cls[K_UNSURE + 1] = {
		[K_CALL] = HTR_IC_CALL, [K_ICALL] = HTR_IC_CALL,
		[K_FARCALL] = HTR_IC_FAR_CALL, [K_RET] = HTR_IC_RET,
		[K_FARRET] = HTR_IC_FAR_RET, [K_IJMP] = HTR_IC_JUMP,
	};
	const unsigned branch = 1u << K_COND | 1u << K_IJMP | 1u << K_FARJMP;
	const unsigned calls = 1u << K_CALL | 1u << K_ICALL | 1u << K_FARCALL;

	b->cls = (enum htr_icls) cls[kind];
	b->branch = (int) (branch >> kind & 1);
	b->ret = calls >> kind & 1 ? ret : kind == K_IJMP ? end : 0;
}

/* pt_blk_proceed_one_insn: add the instruction at the IP to @b. */
static int step(struct htr_walk *w, struct htr_walk_block *b, struct insn *in)
{
	int rc = decode_insn(w, w->ip, in);

	if (rc < 0)
		return rc;
	if (in->kind == K_UNSURE)
		return HTR_WALK_UNSURE;
	/* A call to the next instruction (position-independent code) is
	 * not a call to return from. */
	if ((in->kind == K_CALL && in->target != in->ip + in->len) ||
	    in->kind == K_ICALL)
		push(w, in->ip + in->len);
	b->n++;
	end_block(b, in->kind, in->ret, in->ip);
	return 0;
}

/* The trace answer for the branch at the IP (@in): sets the IP after it.
 * Calls were pushed already. */
static int with_trace(struct htr_walk *w, const struct insn *in)
{
	int st, taken;

	if (in->kind == K_COND || in->kind == K_RET) {
		st = pt_qry_cond_branch(w->q, &taken);
		if (st >= 0) {
			w->status = st;
			if (in->kind == K_COND) {
				w->ip = taken ? in->target : in->ip + in->len;
				return 0;
			}
			if (!taken)
				return -pte_bad_retcomp;
			return pop(w, &w->ip);
		}
		if (in->kind == K_COND || st != -pte_bad_query)
			return st;
	}
	st = pt_qry_indirect_branch(w->q, &w->ip);
	if (st < 0)
		return st;
	w->status = st;
	/* libipt's cached and uncached paths differ here; the walk does
	 * not choose. */
	if (st & pts_ip_suppressed)
		return HTR_WALK_UNSURE;
	return 0;
}

/* Where to_ip() goes. */
enum to {
	TO_IP,        /* to @ip */
	TO_BRANCH,    /* to the next branch that needs trace */
	TO_SKL014,    /* the same, or a direct jump or call that leaves the
		       * filtered code (pt_blk_proceed_skl014) */
};

/* pt_blk_proceed_to_ip (or _to_insn): 1 when there, 0 when a direct call
 * ends the block, -pte_bad_query at a branch that needs trace (the IP
 * stays on it, *@in is that branch).  A direct branch out of the filter
 * leaves the IP on it, as libipt does. */
static int to_ip(struct htr_walk *w, struct htr_walk_block *b, uint64_t ip,
		 enum to to, struct insn *in)
{
	int rc;

	for (;;) {
		if (to == TO_IP && w->ip == ip)
			return 1;
		if ((rc = step(w, b, in)) < 0)
			return rc;
		switch (in->kind) {
		case K_OTHER:
			w->ip += in->len;
			break;
		case K_JMP:
			if (to == TO_SKL014 &&
			    !htr_filter__passes(&w->filter, in->target))
				return 1;
			w->ip = in->target;
			break;
		case K_CALL:
			if (to == TO_SKL014 &&
			    !htr_filter__passes(&w->filter, in->target))
				return 1;
			w->ip = in->target;
			return to == TO_IP && w->ip == ip;
		default:
			return -pte_bad_query;
		}
		if (b->n >= BLOCK_MAX)
			return 0;
	}
}

/* pt_blk_proceed_event */
static int proceed_event(struct htr_walk *w, struct htr_walk_block *b)
{
	const struct pt_event *ev = &w->ev;
	struct insn in;
	uint64_t at = 0;
	int st, supp = ev->ip_suppressed;

	switch (ev->type) {
	case ptev_enabled:
	case ptev_overflow:
	case ptev_stop:
	case ptev_pwre:
	case ptev_pwrx:
	case ptev_tick:
	case ptev_cbr:
	case ptev_mnt:
		break;
	case ptev_disabled:
		/* Without an IP it binds to the next branch that needs trace
		 * (or changes CR3, which the walk gives up on), or with SKL014
		 * to a direct one out of the filter; with an IP, to that IP or
		 * a branch that needs trace before it. */
		st = to_ip(w, b, ev->variant.disabled.ip,
			   !supp ? TO_IP : w->skl014 ? TO_SKL014 : TO_BRANCH,
			   &in);
		if (st == -pte_bad_query) {
			/* Tracing should resume after a call. */
			w->ip = in.kind == K_ICALL || in.kind == K_FARCALL ?
				in.ip + in.len : 0;
			break;
		}
		if (st <= 0)
			return st;
		break;
	case ptev_async_disabled:
	case ptev_async_branch:
	case ptev_tsx:
	case ptev_exstop:
	case ptev_mwait:
		if (ev->type == ptev_tsx || ev->type == ptev_exstop ||
		    ev->type == ptev_mwait) {
			if (supp || (ev->type != ptev_tsx && !w->enabled))
				break;
			at = ev->type == ptev_tsx ? ev->variant.tsx.ip :
			     ev->type == ptev_exstop ? ev->variant.exstop.ip :
			     ev->variant.mwait.ip;
		} else {
			at = ev->type == ptev_async_branch ?
			     ev->variant.async_branch.from :
			     ev->variant.async_disabled.at;
		}
		st = to_ip(w, b, at, TO_IP, &in);
		if (st <= 0)
			return st;
		if (ev->type == ptev_async_disabled && skd022(w))
			return HTR_WALK_UNSURE;
		break;
	case ptev_paging:
	case ptev_vmcs:
	case ptev_ptwrite:
		if (!w->enabled)
			break;
		return HTR_WALK_UNSURE;
	case ptev_async_paging:
	case ptev_async_vmcs:
	case ptev_exec_mode:
		if (supp)
			break;
		at = ev->type == ptev_async_paging ? ev->variant.async_paging.ip :
		     ev->type == ptev_async_vmcs ? ev->variant.async_vmcs.ip :
		     ev->variant.exec_mode.ip;
		/* pt_blk_proceed_to_ip_with_trace */
		st = to_ip(w, b, at, TO_IP, &in);
		if (st == -pte_bad_query)
			st = with_trace(w, &in);
		if (st < 0)
			return st;
		if (w->ip != at)
			return 0;
		break;
	default:
		return HTR_WALK_UNSURE;
	}
	return flags(w, pts_event_pending);
}

/* pt_blk_proceed_no_event, over the cache: to the next instruction that
 * needs trace, or a direct call; and on past conditional branches as long
 * as htr_walk__next() would call it again (one call per branch cost ~5 %
 * of a build's instructions). */
static int proceed_no_event(struct htr_walk *w, struct htr_walk_block *b)
{
	const struct ent *e;
	int st, taken, rc;

	for (;;) {
		if ((rc = lookup(w, w->ip, &e)) < 0)
			return rc;
		b->n += e->n;
		if (e->kind == K_CONT) {
			w->ip = e->target;
			w->hint = (uint32_t *) &e->next[0];
		} else if (e->kind == K_COND) {
			st = pt_qry_cond_branch(w->q, &taken);
			if (st < 0) {
				end_block(b, K_COND, 0, 0);
				return st;
			}
			w->status = st;
			w->ip = taken ? e->target : e->end + e->len;
			w->hint = (uint32_t *) &e->next[!!taken];
			if ((st & (pts_event_pending | pts_eos)) ||
			    (w->entering && b->n == 1)) {
				end_block(b, K_COND, 0, 0);
				return 0;
			}
		} else {
			break;
		}
		if (b->n >= BLOCK_MAX) {
			end_block(b, e->kind, 0, 0);
			return 0;
		}
	}
	end_block(b, e->kind, e->ret, e->end);
	switch (e->kind) {
	case K_CALL:
		if (e->target != e->end + e->len)
			push(w, e->end + e->len);
		w->ip = e->target;
		w->hint = (uint32_t *) &e->next[0];
		return 0;
	case K_ICALL:
		push(w, e->end + e->len);
		/* fall through */
	case K_RET:
	case K_IJMP:
	case K_FARCALL:
	case K_FARRET:
	case K_FARJMP: {
		struct insn in;

		in.ip = e->end;
		in.len = e->len;
		in.kind = e->kind;
		w->hint = (uint32_t *) &e->next[0];
		return with_trace(w, &in);
	}
	default:
		return HTR_WALK_UNSURE;
	}
}

int htr_walk__next(struct htr_walk *w, struct htr_walk_block *b)
{
	int st;

	b->ip = w->ip;
	b->n = 0;
	b->cls = HTR_IC_OTHER;
	b->ret = 0;
	b->branch = 0;
	st = fetch_event(w);
	if (st > 0)
		st = proceed_event(w, b);
	else if (st == 0 && !w->enabled)
		st = w->status & pts_eos ? -pte_eos : -pte_no_enable;
	else if (st == 0) {
		/* One of libipt's blocks after the other, joined until one
		 * ends in what decode.c must see: a call, a return, an
		 * event, or, where a callee may start, a first block that is
		 * one jump that read trace (decode.c needs its time). */
		do {
			st = proceed_no_event(w, b);
			if (st >= 0)
				st = trailing(w);
		} while (st >= 0 && !(st & (pts_event_pending | pts_eos)) &&
			 !w->process_event && b->cls == HTR_IC_OTHER &&
			 b->n < BLOCK_MAX &&
			 !(w->entering && b->n == 1 && b->branch));
		w->entering = b->cls == HTR_IC_CALL ||
			      b->cls == HTR_IC_FAR_CALL;
	}
	if (st < 0) {
		/* No code at the IP: what ran up to it ran (decode.c drops it
		 * with the rest when the trace had ended before). */
		if (st == -pte_nomap || st == HTR_WALK_UNSURE)
			return st;
		/* As decode.c does with the block decoder's: the branch
		 * whose trace is missing or bad did not run. */
		if (b->n) {
			b->n--;
			b->cls = HTR_IC_OTHER;
			b->ret = 0;
			b->branch = 0;
		}
	}
	return st;
}

int htr_walk__event(struct htr_walk *w, struct pt_event *out)
{
	const struct pt_event *ev = &w->ev;
	int supp = ev->ip_suppressed, bad = 0;

	if (!w->process_event)
		return HTR_WALK_UNSURE;
	w->entering = 1;
	switch (ev->type) {
	case ptev_enabled:
		bad = ev->status_update || supp || w->enabled;
		w->ip = ev->variant.enabled.ip;
		w->enabled = 1;
		break;
	case ptev_async_disabled:
	case ptev_disabled:
		bad = ev->status_update || !w->enabled ||
		      (ev->type == ptev_async_disabled &&
		       w->ip != ev->variant.async_disabled.at);
		w->enabled = 0;
		break;
	case ptev_async_branch:
		bad = ev->status_update || !w->enabled ||
		      w->ip != ev->variant.async_branch.from;
		w->ip = ev->variant.async_branch.to;
		break;
	case ptev_overflow:
		bad = ev->status_update;
		w->enabled = !supp;
		w->ip = supp ? 0 : ev->variant.overflow.ip;
		break;
	case ptev_exec_mode:
		/* A switch between two known modes: on a fuzzed trace (64-bit
		 * code re-enabled after 32-bit code) the walk and libipt's block
		 * decoder went on in different modes.  User-space traces do
		 * not switch; the walk gives up rather than guess. */
		if (w->mode != ptem_unknown &&
		    w->mode != ev->variant.exec_mode.mode)
			return HTR_WALK_UNSURE;
		bad = !supp && w->ip != ev->variant.exec_mode.ip;
		w->mode = ev->variant.exec_mode.mode;
		break;
	case ptev_async_paging:
		bad = !supp && w->ip != ev->variant.async_paging.ip;
		break;
	case ptev_async_vmcs:
		bad = !supp && w->ip != ev->variant.async_vmcs.ip;
		break;
	case ptev_tsx:
		bad = !supp && w->ip != ev->variant.tsx.ip;
		break;
	case ptev_stop:
		bad = ev->status_update || w->enabled;
		break;
	case ptev_exstop:
		bad = !supp && w->enabled && w->ip != ev->variant.exstop.ip;
		break;
	case ptev_mwait:
		bad = !supp && w->enabled && w->ip != ev->variant.mwait.ip;
		break;
	case ptev_paging:
	case ptev_vmcs:
	case ptev_pwre:
	case ptev_pwrx:
	case ptev_ptwrite:
	case ptev_tick:
	case ptev_cbr:
	case ptev_mnt:
		break;
	default:
		bad = 1;
		break;
	}
	if (bad)
		return HTR_WALK_UNSURE;
	w->process_event = 0;
	*out = *ev;
	return trailing(w);
}

int htr_walk__sync_set(struct htr_walk *w, uint64_t offset)
{
	int st;

	w->mode = ptem_unknown;
	w->ip = 0;
	w->status = 0;
	w->enabled = 0;
	w->process_event = 0;
	w->entering = 1;
	w->rs_top = w->rs_n = 0;
	memset(&w->ev, 0, sizeof(w->ev));
	st = pt_qry_sync_set(w->q, &w->ip, offset);
	if (st < 0)
		return st;
	w->status = st;
	w->enabled = !(st & pts_ip_suppressed);
	return trailing(w);
}

uint64_t htr_walk__offset(const struct htr_walk *w)
{
	uint64_t off = 0;

	return pt_qry_get_offset(w->q, &off) < 0 ? 0 : off;
}

int htr_walk__sync_offset(const struct htr_walk *w, uint64_t *off)
{
	return pt_qry_get_sync_offset(w->q, off);
}

int htr_walk__time(struct htr_walk *w, uint64_t *tsc)
{
	return pt_qry_time(w->q, tsc, NULL, NULL);
}

static struct pt_query_decoder *query_decoder(const struct pt_config *c)
{
	struct pt_config qc = *c;

	/* The block decoder's own query decoder runs without flags. */
	memset(&qc.flags, 0, sizeof(qc.flags));
	return pt_qry_alloc_decoder(&qc);
}

int htr_walk__alloc(struct htr_walk **out, const struct pt_config *c,
		    const struct htr_image *img)
{
	struct htr_walk *w = calloc(1, sizeof(*w));
	int rc;

	*out = NULL;
	if (!w)
		return HTR_ERR_NOMEM;
	ZydisDecoderInit(&w->zd64, ZYDIS_MACHINE_MODE_LONG_64,
			 ZYDIS_STACK_WIDTH_64);
	ZydisDecoderInit(&w->zd32, ZYDIS_MACHINE_MODE_LONG_COMPAT_32,
			 ZYDIS_STACK_WIDTH_32);
	w->skd022 = c->errata.skd022;
	w->bdm64 = c->errata.bdm64;
	w->filter = c->addr_filter;
	w->skl014 = c->errata.skl014 && c->addr_filter.config.addr_cfg;
	w->cap = TAB_MIN;
	w->tab = calloc(w->cap, sizeof(*w->tab));
	w->q = query_decoder(c);
	if (!w->tab || !w->q)
		rc = w->q ? HTR_ERR_NOMEM : HTR_ERR_DECODE;
	else
		rc = map_code(w, img);
	if (rc < 0) {
		htr_walk__free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int htr_walk__restart(struct htr_walk *w, const struct pt_config *c)
{
	pt_qry_free_decoder(w->q);
	w->q = query_decoder(c);
	w->hint = NULL;
	memset(&w->ip, 0, sizeof(*w) - offsetof(struct htr_walk, ip));
	return w->q ? 0 : HTR_ERR_DECODE;
}

void htr_walk__free(struct htr_walk *w)
{
	if (!w)
		return;
	pt_qry_free_decoder(w->q);
	unmap_code(w);
	free(w->tab);
	free(w);
}
