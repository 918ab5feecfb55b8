/*
 * The synthesizer's executor: walks the generated program with a seeded
 * oracle deciding every branch, emits the Intel PT packets a processor
 * would, and writes the ground truth as it goes (see TRUTH.md).
 *
 * Timing is modelled on what libipt 2.0.5 reports (checked by
 * tests/test_synth.c against libipt itself):
 *  - MTC/CYC/TSC packets are emitted only right before a TNT or TIP packet,
 *    where the decoder applies them when it fetches that packet, so the time
 *    at an instruction is the time of the last TNT/TIP it consumed;
 *  - PSB+ is read ahead by the decoder, so its TSC repeats the decoder's
 *    current time and never moves it;
 *  - no timing packets go right before an event packet (FUP, TIP.PGD,
 *    TIP.PGE, OVF): libipt's instruction decoder fetches an event as soon
 *    as the TNT bits before it are used up, and reports the time at that
 *    event from the instruction that used the last bit on;
 *  - CYC counts exactly the ticks since the previous timing packet and CBR
 *    equals the nominal ratio, so a decoder configured with
 *    nom_freq = SYNTH_CBR converts cycles to ticks without rounding.
 */
#include "synth.h"
#include "synth_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NO_RET UINT32_MAX
/* Where main returns to: libc, outside the traced image.  TIP.PGD carries
 * it, as with an IP filter; libipt 2.0.5's instruction decoder drops a
 * return whose TIP.PGD has the IP suppressed (and fails on one that is not
 * the last), while its block decoder delivers it: the IP keeps them
 * agreeing. */
#define EXIT_IP 0x7ffff7829d90ull
#define FLAG_LATE  1u    /* entered before tracing started */
#define FLAG_TRUNC 2u    /* still open when the trace ended */
#define FLAG_RETGAP 4u   /* returned while tracing was off */
#define FLAG_UNWOUND 8u  /* abandoned (longjmp, exception), closed at the
			  * return that showed it */
#define FLAG_CALLBACK 16u /* entered from untraced code: no traced call */
#define FLAG_IRQ 32u     /* entered by an interrupt: no traced call */
#define FLAG_GAP 64u     /* some of its execution is missing: open when a
			  * gap began, or its start was lost in one */
#define FLAG_LMID 128u   /* (not written) a late frame opened mid-trace,
			  * where decoding resumed: not one the trace
			  * started in */

/* How a frame was entered, which decides what a decoder knows of it. */
enum fkind {
	FK_NORMAL,      /* a call in traced code to traced code (or a frame
			 * the trace started in) */
	FK_LIB,         /* a traced call into untraced code: the decoder
			 * knows its return address and (TIP.PGD) entry */
	FK_HIDDEN,      /* a call made while no packets flowed */
	FK_CALLBACK,    /* untraced code called traced code: entry known
			 * (TIP.PGE), return address not */
	FK_IRQ,         /* an interrupt entered a traced handler */
	FK_MISSING,     /* a traced call into code the image lacks (a
			 * library not at hand): a decode error follows */
};

struct frame {
	uint32_t ret;          /* insn index to return to, NO_RET: outside */
	uint32_t func;         /* function entered by the call */
	int64_t pre;           /* preorder index, -1 if never traced */
	int64_t parent;
	uint64_t first;
	uint64_t tsc_first;
	uint8_t flags;
	uint8_t comp;          /* its return may be compressed */
	uint8_t loop_n, loop_lim, tails;
	uint8_t own;           /* ran a traced instruction itself */
	uint8_t kind;          /* enum fkind */
	uint8_t no_tail;       /* a longjmp landed here: straight to ret */
	uint8_t cbs;           /* FK_LIB: callbacks made */
	uint8_t known;         /* a decoder has it open (it saw the call, or
				* opened it where tracing resumed) */
	uint8_t kret;          /* ... and knows its return address */
};

enum mode {
	M_TRACED, M_OFF_GAP, M_OFF_OVF, M_PRE, M_STOPPED,
	M_FILTERED,     /* running untraced code: no packets until traced
			 * code runs again (TIP.PGE) */
	M_OFF_ERR,      /* after a decode error: the processor traces on,
			 * a decoder sees nothing up to the next PSB */
};

/* What a scenario contains; see scenario(). */
struct scen {
	unsigned gaps, ovfs;    /* asynchronous disables, overflows */
	int late, abrupt;       /* late start, abrupt end */
	int ovf_pge;            /* overflows resolve with tracing off: 1 all,
				 * 2 every other one */
	int early;              /* gaps and overflows before the first return
				 * of a frame the trace started in */
	int irq;                /* interrupts (traced handlers) and in-place
				 * asynchronous disables */
	int strict_resume;      /* resume a disable only where the tree rules
				 * and the truth agree (not at an entry) */
	int missing;            /* the library functions are traced but not
				 * in the ELF: calls into them are decode
				 * errors ("no memory mapped") */
	int no_tail;            /* no tail calls */
	struct prog_feat feat;
};

/* Callers a builder keeps per function (lib/treebuild.c). */
#define SYNTH_CALLERS 4

struct run {
	const struct synth_opts *o;
	struct scen sc;
	struct prog prog;
	uint64_t text;          /* runtime address of .text */
	uint64_t rng;
	struct frame *st;
	unsigned depth, cap, ncomp;
	uint32_t pc;
	enum mode mode;
	uint64_t id;            /* next instruction ID */
	uint64_t pre;           /* next preorder index */
	uint64_t executed;      /* instructions run, traced or not */
	int winddown;
	int last_was_call;
	int last_was_ret;       /* for the counts only */
	/* off-trace bookkeeping */
	unsigned gap_depth, gap_floor;
	uint64_t gap_len, gap_min;
	uint32_t gap_pc;        /* where tracing was disabled */
	uint32_t *gap_rets;     /* return addresses of the frames open at
				 * the disable that returned since */
	unsigned ngap_rets;
	struct frame *gap_done; /* those frames; reported at the resume */
	unsigned ngap_done;
	uint64_t last_traced;   /* ID of the last traced instruction */
	uint64_t last_dtime;
	unsigned gaps_left, ovfs_left, ngap_events, novfs;
	/* special statements */
	uint32_t cb_target;     /* the function the next callback enters */
	unsigned in_irq;        /* traced interrupt handlers open */
	unsigned late_depth;    /* frames open when the trace started */
	int late_returned;      /* one of them returned in the trace */
	int unw_o;              /* the frame a longjmp or throw lands in */
	int unw_throw;
	int special_pending;    /* a guard let a special statement run */
	int landing_pending;    /* an unwinding return ran: a decoder must
				 * see where it landed (the next insn) */
	struct frame *unw;      /* frames a longjmp abandoned, innermost
				 * first: they close at the landing frame's
				 * return */
	unsigned nunw;
	const struct frame **bview;  /* a decoder's open frames (see
				      * err_resume_kind) */
	uint32_t (*callers)[SYNTH_CALLERS];  /* by function: the first
					      * functions a decoder saw call
					      * it, + 1 (0: none) */
	unsigned err_at;        /* index of the frame an error left */
	/* timing */
	uint64_t tsc;           /* the real clock */
	uint64_t ref;           /* time of the last emitted timing packet */
	uint64_t mref;          /* time of the last MTC edge or TSC value */
	uint64_t dtime;         /* the decoder's current time */
	uint64_t next_edge;     /* time of the next MTC edge */
	uint64_t wrap_ticks;
	uint64_t last_emit;     /* time of the last TNT/TIP timing point */
	/* output */
	struct ptw w;
	FILE *truth;
	uint64_t psb_last;
	struct synth_result res;
	char *err;
	size_t errlen;
	int failed;
};

static void fail(struct run *r, const char *fmt, ...)
{
	va_list ap;

	if (r->failed)
		return;
	r->failed = 1;
	va_start(ap, fmt);
	vsnprintf(r->err, r->errlen, fmt, ap);
	va_end(ap);
}

static uint64_t addr(const struct run *r, uint32_t insn)
{
	return r->text + r->prog.insns[insn].off;
}

static int chance(struct run *r, unsigned percent)
{
	return synth_below(&r->rng, 100) < percent;
}

static const struct sfunc *func_of(const struct run *r, uint32_t insn)
{
	return &r->prog.funcs[r->prog.insns[insn].func];
}

/* Code outside the IP filter. */
static int untraced_code(const struct run *r, uint32_t insn)
{
	uint8_t k = func_of(r, insn)->kind;

	return !r->sc.missing && (k == SF_LIB || k == SF_LIB_CB);
}

/* Code the processor traces but the ELF lacks. */
static int missing_code(const struct run *r, uint32_t insn)
{
	uint8_t k = func_of(r, insn)->kind;

	return r->sc.missing && (k == SF_LIB || k == SF_LIB_CB);
}

/* ------------------------------------------------------------------ */
/* timing */

static void put_cyc(struct run *r, uint64_t upto)
{
	struct pt_packet p;

	if (!r->o->cyc || upto <= r->ref)
		return;
	memset(&p, 0, sizeof(p));
	p.type = ppt_cyc;
	p.payload.cyc.value = upto - r->ref;
	ptw_put(&r->w, &p);
	r->ref = upto;
}

static void put_tsc_tma(struct run *r, uint64_t t)
{
	struct pt_packet p;
	uint64_t ctc = t / r->o->ctc_ratio;

	memset(&p, 0, sizeof(p));
	p.type = ppt_tsc;
	p.payload.tsc.tsc = t;
	ptw_put(&r->w, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_tma;
	p.payload.tma.ctc = (uint16_t) ctc;
	p.payload.tma.fc = (uint16_t) (t - ctc * r->o->ctc_ratio);
	ptw_put(&r->w, &p);
	r->ref = r->mref = t;
	/* The first MTC after TMA reports the next edge. */
	r->next_edge = (ctc / (1ull << r->o->mtc_freq) + 1) *
		       (1ull << r->o->mtc_freq) * r->o->ctc_ratio;
}

/* Timing packets for the TNT or TIP packet about to be emitted; the decoder
 * applies them when it fetches that packet (see the file comment). */
static void timing(struct run *r)
{
	const struct synth_opts *o = r->o;

	/* Past half a wrap a decoder would misplace the next MTC; the truth
	 * would be wrong, so refuse. */
	if (o->mtc && r->tsc - r->last_emit >= r->wrap_ticks / 2)
		fail(r, "internal: %llu ticks without timing packets",
		     (unsigned long long) (r->tsc - r->last_emit));
	if (o->mtc && r->next_edge <= r->tsc) {
		struct pt_packet p;
		uint64_t period = (1ull << o->mtc_freq) * o->ctc_ratio;
		uint64_t edge = r->tsc - (r->tsc % period);

		put_cyc(r, edge);
		memset(&p, 0, sizeof(p));
		p.type = ppt_mtc;
		p.payload.mtc.ctc = (uint8_t) ((edge / o->ctc_ratio) >> o->mtc_freq);
		ptw_put(&r->w, &p);
		r->ref = r->mref = edge;
		r->next_edge = edge + period;
	}
	put_cyc(r, r->tsc);
	if (!o->mtc && !o->cyc && r->tsc - r->mref >= 4096) {
		/* Neither MTC nor CYC: a plain TSC now and then. */
		put_tsc_tma(r, r->tsc);
	}
	r->dtime = o->cyc ? r->ref : r->mref;
	r->last_emit = r->tsc;
}

/* A conditional branch or compressed return outcome. */
static void tnt(struct run *r, int taken)
{
	if (r->w.tnt_n && r->tsc - r->last_emit > r->wrap_ticks / 4)
		ptw_tnt_flush(&r->w);   /* keep MTC deltas below one wrap */
	if (!r->w.tnt_n)
		timing(r);
	ptw_tnt(&r->w, taken, chance(r, 50) ? 47 : 6);
}

static void tip(struct run *r, enum pt_packet_type type, uint64_t ip)
{
	ptw_tnt_flush(&r->w);
	timing(r);
	ptw_ip(&r->w, type, ip);
}

static void mode_exec(struct run *r)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(r->prog.bits32 ?
						    ptem_32bit : ptem_64bit);
	ptw_put(&r->w, &p);
}

/* The hardware return-compression stack is conservatively forgotten at
 * every PSB, enable and overflow; a TIP for a return is always valid. */
static void forget_comp(struct run *r)
{
	unsigned i;

	for (i = 0; i < r->depth; i++)
		r->st[i].comp = 0;
	r->ncomp = 0;
}

/* PSB+ at the boundary before instruction @pc. */
static void psb(struct run *r, int enabled)
{
	struct pt_packet p;

	ptw_simple(&r->w, ppt_psb);
	put_tsc_tma(r, r->dtime);
	memset(&p, 0, sizeof(p));
	p.type = ppt_cbr;
	p.payload.cbr.ratio = SYNTH_CBR;
	ptw_put(&r->w, &p);
	if (enabled) {
		mode_exec(r);
		ptw_ip(&r->w, ppt_fup, addr(r, r->pc));
	}
	memset(&p, 0, sizeof(p));
	p.type = ppt_psbend;
	ptw_put(&r->w, &p);
	r->psb_last = ptw_offset(&r->w);
	forget_comp(r);
}

/* ------------------------------------------------------------------ */
/* ground truth */

static void truth_block(struct run *r, const struct frame *f, uint64_t last,
			uint64_t tsc_last, unsigned flags)
{
	static const char letter[] = "LTRUCIG";
	char fl[8];
	int n = 0;
	unsigned i;

	r->res.blocks++;
	if (!r->truth)
		return;
	flags |= f->flags;
	for (i = 0; i < sizeof(letter) - 1; i++)
		if (flags & (1u << i))
			fl[n++] = letter[i];
	if (!n)
		fl[n++] = '-';
	fl[n] = 0;
	/* A call into missing code: the next instruction a decoder gets is
	 * elsewhere, so it knows no entry (tree rules, 2). */
	fprintf(r->truth, "block %lld %lld %d %llu %llu %llu %llu %s\n",
		(long long) f->pre, (long long) f->parent,
		f->kind == FK_MISSING ? -1 : (int) f->func,
		(unsigned long long) f->first, (unsigned long long) last,
		(unsigned long long) f->tsc_first,
		(unsigned long long) tsc_last, fl);
}

static void truth_gap(struct run *r, const char *kind)
{
	r->res.gaps++;
	if (r->truth)
		fprintf(r->truth, "gap %llu %s\n", (unsigned long long) r->id,
			kind);
}

/* Give the frame at @i a place in the tree when it first contains a traced
 * instruction. */
static void make_visible(struct run *r, unsigned i, uint64_t first,
			 unsigned flags)
{
	struct frame *f = &r->st[i];

	f->pre = (int64_t) r->pre++;
	f->parent = i ? r->st[i - 1].pre : -1;
	f->first = first;
	f->tsc_first = r->dtime;
	f->flags = (uint8_t) (flags | (f->flags & FLAG_GAP));
}

/* A gap begins: every frame open now misses some of its execution. */
static void gap_begins(struct run *r)
{
	unsigned i;

	for (i = 0; i < r->depth; i++)
		r->st[i].flags |= FLAG_GAP;
}

/* ------------------------------------------------------------------ */
/* execution */

/* The function a decoder gives a frame (none for code it lacks). */
static uint32_t known_func(const struct frame *f)
{
	return f->kind == FK_MISSING ? UINT32_MAX : f->func;
}

/* A decoder saw @caller call @func (rule 4 uses the first few). */
static void note_caller(struct run *r, uint32_t func, uint32_t caller)
{
	uint32_t *c = r->callers[func];
	unsigned k;

	for (k = 0; caller != UINT32_MAX && k < SYNTH_CALLERS; k++) {
		if (c[k] == caller + 1)
			break;
		if (!c[k]) {
			c[k] = caller + 1;
			break;
		}
	}
}

/* Whether a decoder saw @func called from one of its @n open frames @b or
 * the frame main runs in: rule 4 resumes there, not deeper. */
static int caller_open(const struct run *r, uint32_t func,
		       const struct frame **b, unsigned n)
{
	unsigned i, k;

	for (k = 0; k < SYNTH_CALLERS && r->callers[func][k]; k++) {
		if (r->callers[func][k] - 1 == known_func(&r->st[0]))
			return 1;
		for (i = 0; i < n; i++)
			if (r->callers[func][k] - 1 == known_func(b[i]))
				return 1;
	}
	return 0;
}

static void push(struct run *r, uint32_t ret, uint32_t func, int traced_call,
		 enum fkind kind)
{
	struct frame *f;

	if (r->depth == r->cap) {
		fail(r, "internal: call depth exceeded");
		return;
	}
	f = &r->st[r->depth++];
	memset(f, 0, sizeof(*f));
	f->ret = ret;
	f->func = func;
	f->pre = -1;
	f->kind = (uint8_t) kind;
	if (r->depth > r->res.max_depth)
		r->res.max_depth = r->depth;
	if (traced_call) {
		f->known = f->kret = 1;
		make_visible(r, r->depth - 1, r->id, 0);
		if (r->mode == M_TRACED) {
			note_caller(r, func, known_func(&r->st[r->depth - 2]));
			/* libipt keeps 64 return addresses; so do we. */
			if (r->ncomp == 64) {
				unsigned i;

				for (i = 0; i < r->depth - 1; i++)
					if (r->st[i].comp) {
						r->st[i].comp = 0;
						break;
					}
			} else {
				r->ncomp++;
			}
			f->comp = 1;
		}
	}
}

static int ret_addr_open(const struct run *r, uint32_t pc)
{
	unsigned i;

	for (i = 0; i < r->depth; i++)
		if (r->st[i].ret == pc)
			return 1;
	return 0;
}

/* Head for the end: at the end of the trace, and in a gap that is long
 * enough, so that it ends well within one MTC wrap. */
static int hurry(const struct run *r)
{
	return r->winddown || ((r->mode == M_OFF_GAP || r->mode == M_OFF_OVF ||
				r->mode == M_OFF_ERR) &&
			       r->gap_len >= r->gap_min);
}

static int want_call(struct run *r, int self)
{
	if (hurry(r) || r->depth >= r->o->max_depth)
		return 0;
	return chance(r, self ? 45 : 70);
}

/* The function frame @i runs now: where it called the frame above, or
 * for the innermost the current instruction's. */
static uint32_t cur_func(const struct run *r, unsigned i)
{
	return i + 1 < r->depth ? r->prog.insns[r->st[i + 1].ret].func :
	       r->prog.insns[r->pc].func;
}

/* The frame a longjmp or a throw from the innermost frame can land in,
 * or -1.  Every frame from there up must be an ordinary traced frame
 * whose call the decoder saw.  Both land inside the landing frame's
 * function (a jmp *%rax, or a ret to a rewritten return address: tree
 * rules 3a and 3), so the tree rules find the same frame if it is the
 * innermost running that function: no frame above may have entered it or
 * run it (a tail call), and the landing frame must still run its own
 * function (no tail call since its entry): the pad is in that function. */
static int unwind_target(struct run *r)
{
	int cand[16], n = 0;
	unsigned top = r->depth - 1, o, i;

	for (o = top + 1; o-- > 0;) {
		const struct frame *f = &r->st[o];

		if (f->kind != FK_NORMAL || f->pre < 0 ||
		    (f->flags & FLAG_LATE) || f->ret == NO_RET)
			break;
		if (o == top || !r->prog.funcs[f->func].land ||
		    cur_func(r, o) != f->func)
			continue;
		for (i = o + 1; i <= top; i++)
			if (r->st[i].func == f->func ||
			    cur_func(r, i) == f->func)
				break;
		if (i <= top)
			continue;
		cand[n++] = (int) o;
		if (n == 16)
			break;
	}
	return n ? cand[synth_below(&r->rng, (unsigned) n)] : -1;
}

/* The special statement a SR_SPECIAL guard at @pc protects: the kind of
 * its first control-flow instruction. */
static const struct sinsn *special_of(const struct run *r, uint32_t pc)
{
	const struct sinsn *in = &r->prog.insns[pc + 1];

	while (in->kind == SK_PLAIN)
		in++;
	return in;
}

/* Whether to run a special statement now (the guard falls through). */
static int want_special(struct run *r, uint32_t pc)
{
	const struct sinsn *in = special_of(r, pc);

	if (r->mode != M_TRACED || hurry(r) || r->in_irq || r->nunw ||
	    r->depth >= r->o->max_depth || !chance(r, 35))
		return 0;
	if (in->kind == SK_IJMP || in->kind == SK_RET) {
		r->unw_throw = in->kind == SK_RET;
		r->unw_o = unwind_target(r);
		if (r->unw_o < 0)
			return 0;
	}
	/* Nothing may stop tracing before it runs. */
	r->special_pending = 1;
	return 1;
}

/* In untraced code: whether to call back, and whom: a traced function
 * after the one that called the library (calls go to higher-numbered
 * functions, so depth stays under control). */
static int want_callback(struct run *r)
{
	struct frame *f = &r->st[r->depth - 1];
	unsigned caller, lo, span;

	if (!((r->mode == M_FILTERED && f->kind == FK_LIB) ||
	      (r->mode == M_OFF_ERR && f->kind == FK_MISSING)) || hurry(r) ||
	    f->cbs >= 3 || r->depth >= r->o->max_depth || !chance(r, 60))
		return 0;
	caller = r->prog.insns[f->ret].func;
	lo = caller + 1;
	if (lo >= r->prog.ntraced)
		return 0;
	span = r->prog.ntraced - lo < 4 ? r->prog.ntraced - lo : 4;
	r->cb_target = r->prog.funcs[lo + synth_below(&r->rng, span)].first;
	f->cbs++;
	return 1;
}

/* Decide a conditional branch. Returns 1 if taken. */
static int decide(struct run *r, const struct sinsn *in)
{
	struct frame *f = &r->st[r->depth - 1];
	const struct sinsn *next = &r->prog.insns[in->target];

	switch (in->role) {
	case SR_GUARD:
		/* taken skips the call that follows */
		return !want_call(r, r->prog.insns[r->pc + 1].self ||
				  (r->prog.insns[r->pc + 2].self &&
				   r->prog.insns[r->pc + 2].kind == SK_ICALL));
	case SR_IF:
		return chance(r, 50);
	case SR_LOOP:
		if (!f->loop_lim)
			f->loop_lim = (uint8_t) (1 + synth_below(&r->rng, 6));
		if (!hurry(r) && f->loop_n + 1 < f->loop_lim) {
			f->loop_n++;
			return 1;
		}
		f->loop_n = f->loop_lim = 0;
		return 0;
	case SR_TAIL:
		if (f->no_tail || r->sc.no_tail || hurry(r) || f->tails >= 2 ||
		    !chance(r, 35))
			return 1;
		f->tails++;
		return 0;
	case SR_MAIN:
		/* A decode error's stretch does not end the program. */
		return !(r->mode == M_OFF_ERR ? r->winddown : hurry(r));
	case SR_SPECIAL:
		return !want_special(r, r->pc);
	case SR_CBLOOP:
		return !want_callback(r);
	}
	(void) next;
	return chance(r, 50);
}

/* Frames that returned while tracing was off end at the last traced
 * instruction; the visible ones are reported after the gap. */
static void report_gap_done(struct run *r)
{
	unsigned i;

	for (i = 0; i < r->ngap_done; i++)
		if (r->gap_done[i].pre >= 0)
			truth_block(r, &r->gap_done[i], r->last_traced,
				    r->last_dtime, FLAG_RETGAP);
	r->ngap_done = 0;
}

/* Resume tracing before instruction r->pc after a gap or an overflow. */
static void resume(struct run *r)
{
	int pge = r->mode == M_OFF_GAP;

	/* The decoder forgets its last IP at an overflow. */
	if (!pge)
		r->w.have_ip = 0;
	if (r->mode == M_OFF_OVF && r->sc.ovf_pge &&
	    (r->sc.ovf_pge == 1 || r->novfs % 2 == 0)) {
		/* The overflow resolved while tracing was off (outside the
		 * filter): no FUP follows the OVF, TIP.PGE resumes.  The
		 * PSB+ restores the cycle calibration, as below. */
		mode_exec(r);
		ptw_ip(&r->w, ppt_tip_pge, addr(r, r->pc));
		psb(r, 1);
		r->res.n.ovf_pge++;
		r->res.n.ovf_pge_ret += r->depth < r->gap_depth;
	} else if (pge) {
		mode_exec(r);
		ptw_ip(&r->w, ppt_tip_pge, addr(r, r->pc));
	} else {
		ptw_ip(&r->w, ppt_fup, addr(r, r->pc));
		/* libipt drops its cycle calibration at an overflow; the CBR
		 * in a PSB+ right away restores it. */
		psb(r, 1);
	}
	truth_gap(r, pge ? "disabled" : "overflow");
	report_gap_done(r);
	forget_comp(r);
	r->mode = M_TRACED;
}

/* Execution re-enters traced code at r->pc from untraced code (a library
 * returned, or it calls back): TIP.PGE. */
static void filter_resume(struct run *r)
{
	mode_exec(r);
	ptw_ip(&r->w, ppt_tip_pge, addr(r, r->pc));
	truth_gap(r, "disabled");
	report_gap_done(r);
	forget_comp(r);
	r->mode = M_TRACED;
}

static int may_resume(struct run *r, int just_returned)
{
	unsigned i;

	/* Resuming where tracing stopped looks to a decoder as if nothing
	 * ran in between (libipt reports it as "resumed"): avoid it.  The
	 * new scenarios also resume right after a frame open at the disable
	 * returns, however short the gap: a return address is always a safe
	 * place, and a gap whose frame returns to one that was entered
	 * before the trace could never resume. */
	if (r->pc == r->gap_pc ||
	    (r->gap_len < r->gap_min &&
	     !(r->sc.strict_resume && just_returned) &&
	     !(r->sc.early && r->prog.insns[r->pc].kind == SK_RET &&
	       (r->st[r->depth - 1].flags & FLAG_LATE))))
		return 0;
	/* Tracing comes back in traced code only.  After a disable, a
	 * resume at a function's entry reads as a callback or a signal
	 * handler (tree rules, 4), even where a tail call got there while
	 * tracing was off: never resume there. */
	if (untraced_code(r, r->pc) ||
	    (r->mode == M_OFF_GAP && func_of(r, r->pc)->first == r->pc))
		return 0;
	if (r->depth == r->gap_depth && r->gap_floor == r->gap_depth)
		return !ret_addr_open(r, r->pc);
	/* Right after the return of a frame that was open when tracing
	 * stopped: a decoder knows that frame's return address.  (After
	 * the return of a call made while tracing was off it does not.)
	 * If a frame that returned earlier in the gap had the same return
	 * address (recursion), a decoder would stop at that one: wait. */
	if (!just_returned || r->depth != r->gap_floor ||
	    r->depth >= r->gap_depth)
		return 0;
	for (i = 0; i + 1 < r->ngap_rets; i++)
		if (r->gap_rets[i] == r->pc)
			return 0;
	return 1;
}

static void start_off(struct run *r, enum mode m)
{
	uint64_t cap = r->wrap_ticks / 16;

	r->mode = m;
	r->gap_depth = r->gap_floor = r->depth;
	r->gap_pc = r->pc;
	r->ngap_rets = 0;
	r->ngap_done = 0;
	r->gap_len = 0;
	r->gap_min = 10 + synth_below(&r->rng, 200);
	if (r->sc.early)
		/* short: resume before the frame the trace started in
		 * returns (it could not resume after that) */
		r->gap_min = 3 + synth_below(&r->rng, 12);
	if (r->gap_min > cap)
		r->gap_min = cap;
	r->ngap_events++;
	r->res.n.early_gaps += r->sc.late && !r->late_returned;
	gap_begins(r);
}

static void close_frame(struct run *r, uint64_t last_id, int traced_ret)
{
	struct frame *f = &r->st[r->depth - 1];

	if (f->flags & FLAG_LATE)
		r->late_returned = 1;
	if (f->pre >= 0 && traced_ret)
		truth_block(r, f, last_id, r->dtime, 0);
	else if (!traced_ret && (f->pre >= 0 || f->known))
		/* Whether it returned shows only if tracing resumes (a
		 * decoder still has it open till then). */
		r->gap_done[r->ngap_done++] = *f;
	if (f->comp)
		r->ncomp--;
	r->depth--;
}

/* Due points for gaps and overflows, spread over the trace. */
static int due(struct run *r, unsigned left, unsigned total)
{
	uint64_t at;

	if (!left)
		return 0;
	if (r->sc.early)
		/* Under the frames the trace started in, before any of
		 * them returns. */
		return r->id >= 2 && r->depth >= r->late_depth &&
		       !r->late_returned &&
		       r->prog.insns[r->pc].kind != SK_RET;
	at = r->o->insns * (total - left + 1) / (total + 1);
	return r->id >= at;
}

static int may_compress(const struct run *r, const struct frame *f)
{
	return f->comp && r->o->scenario != SYNTH_NOCOMP;
}

/* An interrupt at the boundary before r->pc enters a traced handler: FUP
 * at the interrupted IP, TIP to the handler (an asynchronous branch, no
 * timing packets: the decoder's time stays where it was). */
static void interrupt(struct run *r)
{
	const struct prog *p = &r->prog;
	uint32_t h = p->nfuncs - p->ntraced - r->sc.feat.libs;

	h = p->nfuncs - h + synth_below(&r->rng, h);
	r->res.n.irqs++;
	r->res.n.irqs_after_call += r->last_was_call != 0;
	r->res.n.irqs_after_ret += r->last_was_ret != 0;
	ptw_ip(&r->w, ppt_fup, addr(r, r->pc));
	ptw_ip(&r->w, ppt_tip, addr(r, p->funcs[h].first));
	push(r, r->pc, h, 0, FK_IRQ);
	make_visible(r, r->depth - 1, r->id, FLAG_IRQ);
	r->pc = p->funcs[h].first;
	r->in_irq++;
}

/* An interrupt handled in the untraced kernel: FUP + TIP.PGD, the kernel
 * runs, TIP.PGE at the very IP: nothing was lost, no gap. */
static void interrupt_in_place(struct run *r)
{
	r->res.n.irqs_in_place++;
	ptw_ip(&r->w, ppt_fup, addr(r, r->pc));
	ptw_ip_suppressed(&r->w, ppt_tip_pgd);
	r->tsc += 20 + synth_below(&r->rng, (unsigned) (r->wrap_ticks / 16));
	mode_exec(r);
	ptw_ip(&r->w, ppt_tip_pge, addr(r, r->pc));
	/* libipt may start over with its return stack at the enable. */
	forget_comp(r);
}

/* A call from traced code into untraced code: TIP.PGD names the callee
 * (an IP filter), nothing more until traced code runs again. */
static void lib_call(struct run *r, uint32_t target)
{
	r->special_pending = 0;
	r->res.n.lib_calls++;
	ptw_ip(&r->w, ppt_tip_pgd, addr(r, target));
	push(r, r->pc + 1, r->prog.insns[target].func, 0, FK_LIB);
	r->ngap_done = 0;
	r->mode = M_FILTERED;
	gap_begins(r);
}

/* Untraced code calls traced code back: tracing resumes at its entry.
 * The library frame becomes a block the moment it holds a traced one. */
static void callback(struct run *r, uint32_t target)
{
	unsigned lib = r->depth - 1;

	r->res.n.callbacks++;
	push(r, r->pc + 1, r->prog.insns[target].func, 0, FK_CALLBACK);
	r->pc = target;
	filter_resume(r);
	if (r->st[lib].pre < 0)
		make_visible(r, lib, r->id, 0);
	make_visible(r, r->depth - 1, r->id, FLAG_CALLBACK);
}

/* syscall: user-only tracing stops (TIP.PGD, no IP), the kernel runs,
 * sysret comes back to the next instruction (TIP.PGE) at @back; sysenter:
 * sysexit comes back to a fixed landing address instead.  Its frame runs
 * nothing traced: no block, just the gap. */
static void syscall_insn(struct run *r, uint32_t back)
{
	r->special_pending = 0;
	r->last_dtime = r->dtime;
	ptw_ip_suppressed(&r->w, ppt_tip_pgd);
	gap_begins(r);
	r->tsc += 20 + synth_below(&r->rng, (unsigned) (r->wrap_ticks / 16));
	r->pc = back;
	r->ngap_done = 0;
	filter_resume(r);
}

/* Frames above r->unw_o were abandoned: record them (innermost first) and
 * pop them.  The compressed-return stacks still hold their entries. */
static void abandon(struct run *r)
{
	r->special_pending = 0;
	while (r->depth > (unsigned) r->unw_o + 1) {
		struct frame *f = &r->st[r->depth - 1];

		if (f->comp)
			r->ncomp--;
		r->unw[r->nunw++] = *f;
		r->depth--;
	}
	forget_comp(r);
}

static void report_unwound(struct run *r, uint64_t last)
{
	unsigned i;

	for (i = 0; i < r->nunw; i++)
		truth_block(r, &r->unw[i], last, r->dtime, FLAG_UNWOUND);
	r->nunw = 0;
}

/* A decode error begins after the instruction just run: execution went
 * to code the image lacks (a call into a missing library, a callback
 * returning into it).  The processor traces on; a decoder sees nothing
 * up to the PSB where err_resume puts it back. */
static void start_err(struct run *r)
{
	r->res.n.errors++;
	/* the frame below the missing code's */
	r->err_at = r->depth >= 2 ? r->depth - 2 : 0;
	start_off(r, M_OFF_ERR);
	r->gap_min = 2 + synth_below(&r->rng, 30);
}

/*
 * Whether decoding may resume at r->pc after a decode error, and how the
 * tree rules (README, 4: "after a decode error") then read it; 0: not
 * here, they would get it wrong.  A decoder's open frames are the frames
 * whose call it saw that are still open, then those that returned in the
 * gap (innermost last); the frame main runs in is none of them (its call
 * is not in the trace).  The rules in their order:
 * 1: at the return address of one of them: it and the frames above it
 *    returned; right if exactly the frames below it are still open;
 * 2: inside the function of one of them (the innermost such): the frames
 *    above it returned; right if exactly it and the frames below are open;
 * 4: in a function none of them runs and that a decoder never saw called
 *    from one of them (or it would resume in that one): one deeper
 *    frame, opened in the gap under the innermost of them, all of which
 *    must still be open; the frame's return (to its caller's function, or
 *    into the missing code) is then a plain one as long as no open frame
 *    has its return address.
 * Never at a function's entry (that reads as a callback).
 */
static int err_resume_kind(struct run *r)
{
	const struct frame **b = r->bview;
	uint32_t pcf = r->prog.insns[r->pc].func;
	unsigned d = r->depth, p = 1, n = 0, i;
	int k;

	if (r->gap_len < r->gap_min || missing_code(r, r->pc) ||
	    r->prog.funcs[pcf].first == r->pc)
		return 0;
	while (p < d && r->st[p].known)
		b[n++] = &r->st[p++];
	for (i = r->ngap_done; i-- > 0;)
		b[n++] = &r->gap_done[i];
	for (k = (int) n - 1; k >= 0; k--)
		if (b[k]->kret && b[k]->ret == r->pc)
			break;
	if (k >= 0)
		return d == p && (unsigned) k + 1 == p ? 1 : 0;
	for (k = (int) n - 1; k >= 0; k--)
		if (known_func(b[k]) == pcf)
			break;
	if (k >= 0)
		return d == p && (unsigned) k + 2 == d ? 2 : 0;
	if (!n || n + 1 != p || d != p + 1 || r->st[p].func != pcf ||
	    caller_open(r, pcf, b, n))
		return 0;
	for (i = 0; i < n; i++)
		if (b[i]->kret && b[i]->ret == r->st[p].ret)
			return 0;
	return 4;
}

/* Resume after a decode error: PSB+ with a FUP at r->pc, where a decoder
 * syncs again.  @kind as err_resume_kind gives it. */
static void err_resume(struct run *r, int kind)
{
	unsigned d = r->depth;

	ptw_tnt_flush(&r->w);
	psb(r, 1);
	truth_gap(r, "error");
	report_gap_done(r);
	if (kind == 4) {
		/* The deeper frame's caller (the missing code) holds a
		 * traced instruction from now on. */
		if (r->st[d - 2].pre < 0)
			make_visible(r, d - 2, r->id, 0);
		make_visible(r, d - 1, r->id,
			     FLAG_LATE | FLAG_LMID | FLAG_GAP);
		r->st[d - 1].known = 1;
		r->res.n.err_deeper++;
	} else if (d - 1 < r->err_at) {
		r->res.n.err_shallower++;
	} else {
		r->res.n.err_same++;
	}
	r->mode = M_TRACED;
}

/* Execute the instruction at r->pc. Returns 0 when the program ended. */
static int step(struct run *r)
{
	const struct sinsn *in = &r->prog.insns[r->pc];
	int traced = r->mode == M_TRACED || r->mode == M_STOPPED;
	int emit = r->mode == M_TRACED || r->mode == M_OFF_ERR;
	uint64_t my_id = r->id;
	uint32_t next = r->pc + 1;
	int ovf_here = 0, returned_open = 0, late;

	r->tsc += 1 + (synth_rand(&r->rng) & 3);
	r->executed++;
	if (traced) {
		r->id++;
		r->last_traced = my_id;
		r->st[r->depth - 1].own = 1;
	} else {
		r->gap_len++;
	}

	switch (in->kind) {
	case SK_PLAIN:
		break;
	case SK_JCC: {
		int taken = decide(r, in);

		if (emit)
			tnt(r, taken);
		if (taken)
			next = in->target;
		break;
	}
	case SK_JMP:
		next = in->target;
		break;
	case SK_ICALL:
	case SK_CALL: {
		uint32_t to = in->role == SR_CALLBACK ? r->cb_target :
			      in->target;
		int lib = untraced_code(r, to);

		if (emit && lib) {
			lib_call(r, to);
			next = to;
			break;
		}
		if (r->mode == M_FILTERED && !lib) {
			callback(r, to);
			r->last_was_call = 1;
			r->last_was_ret = 0;
			return 1;
		}
		/* No overflow right after a call: the callee would have no
		 * traced instruction yet might return unseen. */
		if (in->kind == SK_ICALL && emit)
			tip(r, ppt_tip, addr(r, to));
		if (r->mode == M_TRACED && missing_code(r, to)) {
			struct frame *m;

			push(r, r->pc + 1, r->prog.insns[to].func, 0,
			     FK_MISSING);
			m = &r->st[r->depth - 1];
			m->known = m->kret = 1;
			r->special_pending = 0;
			start_err(r);
			next = to;
			break;
		}
		push(r, r->pc + 1, r->prog.insns[to].func, traced,
		     lib || r->mode == M_FILTERED ? FK_HIDDEN : FK_NORMAL);
		next = to;
		break;
	}
	case SK_SYSCALL:
	case SK_SYSENTER:
		r->res.n.sysenters += in->kind == SK_SYSENTER;
		r->res.n.syscalls += in->kind == SK_SYSCALL;
		syscall_insn(r, in->kind == SK_SYSENTER ? in->target :
			     r->pc + 1);
		r->last_was_call = r->last_was_ret = 0;
		return 1;
	case SK_IJMP:
		if (in->role == SR_LONGJMP) {
			/* To a landing pad inside the landing frame's
			 * function: the frames above it end here, unwound
			 * (tree rules, 3a); it goes on (to its ret). */
			const struct frame *o = &r->st[r->unw_o];

			if (!emit || r->unw_o < 0)
				fail(r, "internal: longjmp with tracing off");
			next = r->prog.funcs[o->func].land;
			tip(r, ppt_tip, addr(r, next));
			r->st[r->unw_o].no_tail = 1;
			r->res.n.longjmps++;
			abandon(r);
			report_unwound(r, my_id);
			r->landing_pending = 1;
			break;
		}
		if (emit) {
			tip(r, ppt_tip, addr(r, in->target));
			ovf_here = !r->in_irq &&
				   due(r, r->ovfs_left, r->sc.ovfs);
		}
		next = in->target;
		break;
	case SK_IRET: {
		uint32_t to = r->st[r->depth - 1].ret;

		if (!emit)
			fail(r, "internal: iretq with tracing off");
		tip(r, ppt_tip, addr(r, to));
		close_frame(r, my_id, 1);
		r->in_irq--;
		next = to;
		break;
	}
	case SK_RET: {
		struct frame *f = &r->st[r->depth - 1];
		uint32_t to = f->ret;

		if (in->role == SR_THROW) {
			/* The rewritten return address: a landing pad in an
			 * outer frame's function.  The frames above that one
			 * end here, unwound; it goes on. */
			if (!emit || r->unw_o < 0)
				fail(r, "internal: throw with tracing off");
			next = r->prog.funcs[r->st[r->unw_o].func].land;
			tip(r, ppt_tip, addr(r, next));
			r->res.n.throws++;
			abandon(r);
			report_unwound(r, my_id);
			r->landing_pending = 1;
			break;
		}
		if (emit && f->kind == FK_CALLBACK) {
			/* back into the untraced caller: TIP.PGD names it */
			ptw_ip(&r->w, ppt_tip_pgd, addr(r, to));
			close_frame(r, my_id, 1);
			r->ngap_done = 0;
			r->mode = M_FILTERED;
			gap_begins(r);
			next = to;
			break;
		}
		if (r->mode == M_FILTERED) {
			/* untraced code returns, maybe into traced code */
			close_frame(r, my_id, 0);
			r->pc = to;
			if (!untraced_code(r, to))
				filter_resume(r);
			r->last_was_call = r->last_was_ret = 0;
			return 1;
		}
		if (emit) {
			ovf_here = !r->nunw && !r->in_irq &&
				   due(r, r->ovfs_left, r->sc.ovfs);
			if (to == NO_RET) {
				/* main returns into untraced code */
				ovf_here = 0;
				ptw_tnt_flush(&r->w);
				timing(r);
				ptw_ip(&r->w, ppt_tip_pgd, EXIT_IP);
			} else if (may_compress(r, f) && !ovf_here)
				tnt(r, 1);
			else
				tip(r, ppt_tip, addr(r, to));
		}
		late = f->flags & FLAG_LATE;
		/* Where a frame entered before the trace or called from
		 * untraced code returns to is unknown to a decoder: no
		 * resume can follow it. */
		returned_open = !late && f->kind != FK_CALLBACK &&
				f->kind != FK_HIDDEN;
		close_frame(r, my_id, traced);
		if (traced && to != NO_RET && missing_code(r, to)) {
			/* delivered; the code it returns to is not */
			start_err(r);
			returned_open = 0;
		} else if (!traced && r->depth < r->gap_floor) {
			r->gap_floor = r->depth;
			r->gap_rets[r->ngap_rets++] = to;
		} else {
			returned_open = 0;
		}
		if (to == NO_RET)
			return 0;
		next = to;
		break;
	}
	}
	if (traced)
		r->last_dtime = r->dtime;
	r->last_was_call = in->kind == SK_CALL || in->kind == SK_ICALL;
	r->last_was_ret = in->kind == SK_RET || in->kind == SK_IRET;
	r->pc = next;
	if (ovf_here && !r->failed) {
		struct pt_packet p;

		memset(&p, 0, sizeof(p));
		p.type = ppt_ovf;
		ptw_put(&r->w, &p);
		r->ovfs_left--;
		r->novfs++;
		start_off(r, M_OFF_OVF);
	}
	if ((r->mode == M_OFF_GAP || r->mode == M_OFF_OVF) &&
	    may_resume(r, returned_open))
		resume(r);
	if (r->mode == M_OFF_ERR) {
		int kind = err_resume_kind(r);

		if (kind)
			err_resume(r, kind);
	}
	return 1;
}

static int needs_trace(const struct run *r, const struct sinsn *in)
{
	return in->kind == SK_JCC || in->kind == SK_RET ||
	       in->kind == SK_ICALL || in->kind == SK_IJMP ||
	       in->kind == SK_SYSCALL || in->kind == SK_IRET ||
	       in->kind == SK_SYSENTER ||
	       (in->kind == SK_CALL && untraced_code(r, in->target));
}

/* Enable tracing before r->pc: PSB+, MODE.Exec, TIP.PGE.  Frames already on
 * the stack were entered untraced: the trace starts inside them. */
static void start_trace(struct run *r)
{
	unsigned i;

	/* The decoder knows no time before this PSB+: it starts at now. */
	r->dtime = r->ref = r->mref = r->last_emit = r->tsc;
	psb(r, 0);
	mode_exec(r);
	ptw_ip(&r->w, ppt_tip_pge, addr(r, r->pc));
	for (i = 0; i < r->depth; i++)
		make_visible(r, i, 0, FLAG_LATE);
	r->late_depth = r->depth;
	r->mode = M_TRACED;
}

static void finish_truth(struct run *r);

/* The innermost frame is about to return (early gaps need some room). */
static int near_ret(const struct run *r)
{
	return r->prog.insns[r->pc].kind == SK_RET ||
	       r->prog.insns[r->pc + 1].kind == SK_RET ||
	       r->prog.insns[r->pc + 2].kind == SK_RET;
}

/* Whether an interrupt may come at the boundary before r->pc: never while
 * frames wait for a landing frame's return or inside a handler; right
 * after a call or a return more often (the handler then nests in the
 * callee's frame, or in the caller's). */
static int irq_due(struct run *r, int *in_place)
{
	unsigned pct = r->last_was_call ? 60 : 6;

	if (!r->sc.irq || r->in_irq || r->nunw || r->special_pending ||
	    hurry(r) || r->depth >= r->o->max_depth)
		return 0;
	if (synth_below(&r->rng, 1000) >= pct)
		return 0;
	/* In place only where a decoder cannot mistake the IP for a return
	 * address. */
	*in_place = chance(r, 40) && !ret_addr_open(r, r->pc);
	return 1;
}

static void execute(struct run *r)
{
	const struct synth_opts *o = r->o;
	int abrupt = r->sc.abrupt;
	unsigned deep = o->max_depth < 3 ? o->max_depth : 3;
	uint64_t next_report = 1u << 20;
	int in_place = 0;

	push(r, NO_RET, 0, 0, FK_NORMAL);
	r->pc = r->prog.funcs[0].first;
	if (r->sc.late) {
		r->mode = M_PRE;
		while (!r->failed && (r->depth < deep || r->executed < 50 ||
				      (r->sc.early && near_ret(r))) &&
		       r->executed < 100000)
			if (!step(r))
				return;     /* cannot happen: main loops */
	}
	start_trace(r);

	while (!r->failed) {
		const struct sinsn *in = &r->prog.insns[r->pc];

		if (r->mode == M_TRACED && r->landing_pending) {
			/* Nothing may hide where an unwinding return went:
			 * the tree rules read it off the next instruction. */
			if (ptw_offset(&r->w) - r->psb_last >= o->psb_period) {
				ptw_tnt_flush(&r->w);
				psb(r, 1);
			}
		} else if (r->mode == M_TRACED) {
			if (abrupt && r->id >= o->insns &&
			    (r->depth >= deep || r->id >= 2 * o->insns)) {
				ptw_tnt_flush(&r->w);
				r->mode = M_STOPPED;
			} else if (ptw_offset(&r->w) - r->psb_last >=
				   o->psb_period) {
				ptw_tnt_flush(&r->w);
				psb(r, 1);
			} else if (!r->last_was_call && r->id && !r->nunw &&
				   !r->in_irq && !r->special_pending &&
				   due(r, r->gaps_left, r->sc.gaps)) {
				ptw_ip(&r->w, ppt_fup, addr(r, r->pc));
				ptw_ip_suppressed(&r->w, ppt_tip_pgd);
				r->gaps_left--;
				start_off(r, M_OFF_GAP);
			} else if (r->id && irq_due(r, &in_place)) {
				if (in_place)
					interrupt_in_place(r);
				else
					interrupt(r);
				in = &r->prog.insns[r->pc];
			}
		}
		if (r->mode == M_STOPPED && needs_trace(r, in))
			break;
		r->winddown = !abrupt && r->id >= o->insns;
		r->landing_pending = 0;
		if (!step(r))
			break;
		if (r->executed >= next_report) {
			next_report += 1u << 20;
			if (o->progress &&
			    o->progress(r->id, ptw_offset(&r->w), o->payload))
				fail(r, "canceled");
		}
	}
	if (r->mode == M_OFF_GAP || r->mode == M_OFF_OVF ||
	    r->mode == M_OFF_ERR)
		truth_gap(r, r->mode == M_OFF_GAP ? "disabled" :
			  r->mode == M_OFF_ERR ? "error" : "overflow");
	finish_truth(r);
}

static void truncate_frame(struct run *r, struct frame *f, int *late_seen)
{
	if (f->pre < 0)
		return;
	if ((f->flags & FLAG_LATE) && !(f->flags & FLAG_LMID)) {
		/* Frames entered before the trace that never return in it
		 * nest with identical spans: a decoder sees only the
		 * innermost, which then has no parent. */
		if (*late_seen || !f->own)
			return;
		*late_seen = 1;
		f->parent = -1;
	}
	truth_block(r, f, r->last_traced, r->last_dtime, FLAG_TRUNC);
}

/* Whatever a decoder still sees open is cut off by the end of the trace:
 * frames that returned in a final gap (it cannot tell), frames a longjmp
 * abandoned (their landing frame did not return yet), then the stack. */
static void finish_truth(struct run *r)
{
	int late_seen = 0;
	unsigned i;

	for (i = 0; i < r->ngap_done; i++)
		truncate_frame(r, &r->gap_done[i], &late_seen);
	for (i = 0; i < r->nunw; i++)
		truncate_frame(r, &r->unw[i], &late_seen);
	r->nunw = 0;
	while (r->depth) {
		truncate_frame(r, &r->st[r->depth - 1], &late_seen);
		r->depth--;
	}
	r->ngap_done = 0;
}

/* ------------------------------------------------------------------ */
/* files */

struct out {
	char *path, *tmp;
	FILE *fp;
};

static int out_open(struct out *o, const char *prefix, const char *ext,
		    char *err, size_t errlen)
{
	size_t n = strlen(prefix) + strlen(ext) + 16;

	o->path = malloc(n);
	o->tmp = malloc(n);
	o->fp = NULL;
	if (!o->path || !o->tmp) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(o->path, n, "%s%s", prefix, ext);
	snprintf(o->tmp, n, "%s%s.tmp%ld", prefix, ext, (long) getpid());
	o->fp = fopen(o->tmp, "wb");
	if (!o->fp) {
		snprintf(err, errlen, "%s: %s", o->path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Close every output; if @ok, rename them all into place, otherwise (or if
 * any step fails) remove them all, so a run leaves all files or none.
 * Returns 0 if the outputs were committed. */
static int commit(struct out *outs, unsigned n, int ok, char *err,
		  size_t errlen)
{
	unsigned i, renamed = 0;

	for (i = 0; i < n; i++)
		if (outs[i].fp && fclose(outs[i].fp) != 0 && ok) {
			snprintf(err, errlen, "%s: %s", outs[i].path,
				 strerror(errno));
			ok = 0;
		}
	for (i = 0; ok && i < n; i++, renamed++)
		if (outs[i].fp && rename(outs[i].tmp, outs[i].path) != 0) {
			snprintf(err, errlen, "%s: %s", outs[i].path,
				 strerror(errno));
			ok = 0;
			break;
		}
	for (i = 0; i < n; i++) {
		if (!ok && outs[i].fp)
			unlink(i < renamed ? outs[i].path : outs[i].tmp);
		free(outs[i].path);
		free(outs[i].tmp);
	}
	memset(outs, 0, n * sizeof(*outs));
	return ok ? 0 : -1;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static void write_bundle(FILE *fp, const char *prefix, uint64_t base)
{
	fprintf(fp,
		"{\n"
		"  \"type\": \"intel-pt\",\n"
		"  \"cpuInfo\": { \"vendor\": \"GenuineIntel\", \"family\": 6, "
		"\"model\": 85, \"stepping\": 4 },\n"
		"  \"processes\": [\n"
		"    {\n"
		"      \"pid\": 1,\n"
		"      \"triple\": \"x86_64-unknown-linux-gnu\",\n"
		"      \"threads\": [ { \"tid\": 1, \"iptTrace\": \"%s.pt\" } ],\n"
		"      \"modules\": [ { \"systemPath\": \"%s.elf\", "
		"\"file\": \"%s.elf\", \"loadAddress\": \"0x%llx\" } ]\n"
		"    }\n"
		"  ]\n"
		"}\n",
		base_name(prefix), base_name(prefix), base_name(prefix),
		(unsigned long long) base);
}

static const char *const scenario_names[SYNTH_NSCENARIOS] = {
	"basic", "nocomp", "gap", "overflow", "late_start", "abrupt_end",
	"mixed", "untraced", "callback", "overflow_pge", "interrupt",
	"unwind", "late_gap", "real", "sysenter", "errors", "unwind_loop",
};

/* What each scenario contains. */
static void scenario(const struct synth_opts *o, struct scen *sc)
{
	enum synth_scenario s = o->scenario;
	struct prog_feat *ft = &sc->feat;

	memset(sc, 0, sizeof(*sc));
	sc->gaps = s == SYNTH_GAP ? 3 : s == SYNTH_MIXED ? 2 : 0;
	sc->ovfs = s == SYNTH_OVERFLOW ? 3 : s == SYNTH_MIXED ? 2 : 0;
	sc->late = s == SYNTH_LATE_START || s == SYNTH_MIXED;
	sc->abrupt = s == SYNTH_ABRUPT_END || s == SYNTH_MIXED;
	if (s < SYNTH_UNTRACED)
		return;
	/* The new scenarios resume a disable only where the tree rules
	 * recover the truth. */
	sc->strict_resume = 1;
	ft->special = 25;
	switch (s) {
	case SYNTH_UNTRACED:
		ft->libs = o->libs;
		ft->syscalls = 1;
		break;
	case SYNTH_CALLBACK:
		ft->libs = o->libs;
		ft->callbacks = 1;
		ft->special = 35;
		break;
	case SYNTH_OVERFLOW_PGE:
		sc->ovfs = 3;
		sc->ovf_pge = 1;
		break;
	case SYNTH_INTERRUPT:
		ft->irqs = 2;
		sc->irq = 1;
		break;
	case SYNTH_UNWIND:
		ft->unwind = 1;
		ft->special = 30;
		break;
	case SYNTH_LATE_GAP:
		sc->late = 1;
		sc->early = 1;
		sc->gaps = 1;
		sc->ovfs = 1;
		break;
	case SYNTH_ERRORS:
		/* The libraries are traced but missing from the ELF. */
		ft->libs = o->libs;
		ft->callbacks = 1;
		ft->special = 30;
		sc->missing = 1;
		/* A tail call in a gap would change the function a frame
		 * runs unseen; the rules could not match it. */
		sc->no_tail = 1;
		break;
	case SYNTH_UNWIND_LOOP:
		ft->unwind = 1;
		ft->special = 70;
		break;
	case SYNTH_SYSENTER:
		ft->sysenter = 1;
		/* Compatibility mode runs below 4 GiB only; loaded higher
		 * the same code runs in 64-bit mode (sysenter is legal
		 * there on Intel), which a decoder sees the same way. */
		ft->bits32 = o->base + SYNTH_TEXT_OFF < 0xf0000000ull;
		break;
	default:
		ft->libs = o->libs;
		ft->callbacks = 1;
		ft->syscalls = 1;
		ft->irqs = 2;
		ft->unwind = 1;
		ft->special = 20;
		sc->irq = 1;
		sc->late = sc->abrupt = 1;
		sc->gaps = sc->ovfs = 2;
		sc->ovf_pge = 2;
		break;
	}
}

const char *synth_scenario_name(enum synth_scenario s)
{
	return (unsigned) s < SYNTH_NSCENARIOS ? scenario_names[s] : "?";
}

int synth_scenario_parse(const char *name)
{
	int i;

	for (i = 0; i < SYNTH_NSCENARIOS; i++)
		if (!strcmp(name, scenario_names[i]))
			return i;
	return -1;
}

void synth_opts_init(struct synth_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->seed = 1;
	o->scenario = SYNTH_BASIC;
	o->insns = 100000;
	o->nfuncs = 24;
	o->max_depth = 12;
	o->base = 0x400000;
	o->psb_period = 4096;
	o->mtc_freq = 6;
	o->ctc_ratio = 2;
	o->mtc = 1;
	o->cyc = 1;
	o->truth = 1;
	o->bundle = 1;
	o->libs = 6;
}

int synth_check_opts(const struct synth_opts *o, char *err, size_t errlen)
{
	if (!o || o->size < sizeof(*o))
		snprintf(err, errlen, "options: bad size");
	else if ((unsigned) o->scenario >= SYNTH_NSCENARIOS)
		snprintf(err, errlen, "scenario: unknown");
	else if (!o->insns)
		snprintf(err, errlen, "insns: must be at least 1");
	else if (o->nfuncs < 2 || o->nfuncs > 4096)
		snprintf(err, errlen, "funcs: must be in 2..4096");
	else if (o->max_depth < 1 || o->max_depth > 100000)
		snprintf(err, errlen, "depth: must be in 1..100000");
	else if (o->psb_period < 256)
		snprintf(err, errlen, "psb-period: must be at least 256 bytes");
	else if (o->mtc_freq < 3 || o->mtc_freq > 8)
		snprintf(err, errlen, "mtc-freq: must be in 3..8");
	else if (o->ctc_ratio < 1 || o->ctc_ratio > 256)
		snprintf(err, errlen, "ctc-ratio: must be in 1..256");
	else if (o->base & 0xfff || o->base >> 47)
		snprintf(err, errlen,
			 "base: must be page aligned and below 2^47");
	else if (o->libs < 1 || o->libs > 64)
		snprintf(err, errlen, "libs: must be in 1..64");
	else
		return 0;
	return -1;
}

int synth_run(const struct synth_opts *o, const char *prefix,
	      struct synth_result *result, char *err, size_t errlen)
{
	struct run *r;
	struct out outs[4];
	struct out *elf = &outs[0], *pt = &outs[1], *truth = &outs[2],
		   *json = &outs[3];
	int ok = 0, rc;
	unsigned i;

	memset(outs, 0, sizeof(outs));
	if (synth_check_opts(o, err, errlen) < 0)
		return -1;
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r->o = o;
	r->err = err;
	r->errlen = errlen;
	r->rng = o->seed * 0x2545f4914f6cdd1dull + 7;
	r->text = o->base + SYNTH_TEXT_OFF;
	r->cap = o->max_depth + 1;
	r->st = calloc(r->cap, sizeof(*r->st));
	r->gap_rets = calloc(r->cap, sizeof(*r->gap_rets));
	r->gap_done = calloc(r->cap, sizeof(*r->gap_done));
	r->unw = calloc(r->cap, sizeof(*r->unw));
	r->bview = calloc(2 * (size_t) r->cap, sizeof(*r->bview));
	r->tsc = r->ref = r->mref = r->dtime = 0x100000;
	r->wrap_ticks = (1ull << (o->mtc_freq + 8)) * o->ctc_ratio;
	scenario(o, &r->sc);
	r->gaps_left = r->sc.gaps;
	r->ovfs_left = r->sc.ovfs;
	r->unw_o = -1;
	if (!r->st || !r->gap_rets || !r->gap_done || !r->unw || !r->bview ||
	    prog_generate(&r->prog, o->seed, o->nfuncs, &r->sc.feat) < 0 ||
	    !(r->callers = calloc(r->prog.nfuncs, sizeof(*r->callers)))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (r->prog.bits32 && r->text + r->prog.text_size > 0xffffffffull) {
		snprintf(err, errlen, "base: 32-bit code must end below 4 GiB");
		goto out;
	}
	prog_link(&r->prog, r->text);
	if (r->sc.missing) {
		/* The ELF ends before the libraries: no code mapped there. */
		r->prog.elf_text_size = r->prog.funcs[r->prog.ntraced].off;
		r->prog.elf_nfuncs = r->prog.ntraced;
	}
	if (out_open(elf, prefix, ".elf", err, errlen) < 0 ||
	    out_open(pt, prefix, ".pt", err, errlen) < 0 ||
	    (o->truth && out_open(truth, prefix, ".truth", err, errlen) < 0) ||
	    (o->bundle && out_open(json, prefix, ".json", err, errlen) < 0))
		goto out;
	if (synth_write_elf(elf->fp, &r->prog, o->base) < 0) {
		snprintf(err, errlen, "%s: write failed", elf->path);
		goto out;
	}
	if (ptw_init(&r->w, pt->fp) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	r->truth = truth->fp;
	if (r->truth) {
		fprintf(r->truth, "htr-synth-truth 2\nseed %llu\nscenario %s\n"
			"elf %s.elf\ntrace %s.pt\nbase 0x%llx\n"
			"decoder cpuid_0x15_eax 1 cpuid_0x15_ebx %u "
			"mtc_freq %u nom_freq %u\n",
			(unsigned long long) o->seed,
			synth_scenario_name(o->scenario), base_name(prefix),
			base_name(prefix), (unsigned long long) o->base,
			o->ctc_ratio, o->mtc_freq, SYNTH_CBR);
		for (i = 0; i < r->prog.nfuncs; i++)
			fprintf(r->truth, "func %u 0x%llx %u %s\n", i,
				(unsigned long long) (r->text +
						      r->prog.funcs[i].off),
				r->prog.funcs[i].size, r->prog.funcs[i].name);
	}
	execute(r);
	if (ptw_finish(&r->w) < 0 && !r->failed)
		fail(r, "%s: write failed", pt->path);
	ptw_fini(&r->w);
	if (r->failed)
		goto out;
	r->res.insns = r->id;
	r->res.trace_bytes = r->w.flushed;
	if (r->truth) {
		fprintf(r->truth, "insns %llu\nblocks %llu\ngaps %llu\nend\n",
			(unsigned long long) r->res.insns,
			(unsigned long long) r->res.blocks,
			(unsigned long long) r->res.gaps);
		if (ferror(r->truth)) {
			snprintf(err, errlen, "%s: write failed", truth->path);
			goto out;
		}
	}
	if (json->fp)
		write_bundle(json->fp, prefix, o->base);
	ok = 1;
out:
	rc = commit(outs, 4, ok, err, errlen);
	if (result && rc == 0)
		*result = r->res;
	prog_free(&r->prog);
	free(r->st);
	free(r->gap_rets);
	free(r->gap_done);
	free(r->unw);
	free(r->bview);
	free(r->callers);
	free(r);
	return rc;
}
