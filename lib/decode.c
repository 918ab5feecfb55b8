/*
 * Decoder: libipt's block decoder driven over a whole trace (see decode.h).
 *
 * One run is held back ("pending") until the decoder has moved on: events
 * that follow a block (an asynchronous branch in particular) may still change
 * the class of its last instruction.  Everything else is emitted in trace
 * order: a pending run and the time after it, then gaps, then the PSB the
 * next run follows, then resume, then the next run.
 */
#include "decode.h"
#include "walk.h"
#include "x86len.h"
#include "filter.h"
#include "image.h"
#include "htr/build.h"
#include "htr/tree.h"

#include <intel-pt.h>
#include <Zydis/Zydis.h>

#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define HOT inline __attribute__((always_inline))
#define NOINLINE __attribute__((noinline))
#else
#define HOT inline
#define NOINLINE
#endif

#define PROGRESS_STEP (1ull << 20)
#define PSB_SEARCH_MAX (1u << 16)   /* bytes to look back for a PSB */
#define TAIL_MAX (1u << 16)         /* blocks held after the trace ended */
#define LOOP_SPAN_MIN 64u           /* blocks the loop guard watches one */
#define LOOP_SPAN_MAX (1u << 16)
#define LOOP_HITS 64u               /* returns to it at one trace offset:
				     * more than a TNT packet's 47 bits */
#define SCAN_STEP (64u << 20)       /* bytes searched for a PSB between
				     * progress reports */

/* Direct-mapped cache of last-instruction classes that libipt left out. */
#define CLS_CACHE_BITS 12
#define CLS_CACHE_SIZE (1u << CLS_CACHE_BITS)

struct cls_slot {
	uint64_t ip;       /* end_ip + 1, 0 for an empty slot */
	uint8_t cls, len;
};

struct blk;

struct dec {
	struct pt_block_decoder *d;
	struct htr_walk *w;              /* instead of @d (walk.h) */
	struct pt_image *image;          /* this run's own (image.h) */
	struct pt_image_section_cache *isc;
	const struct htr_decode_sink *sink;
	const uint8_t *trace;
	uint64_t size;

	/* The run held back. */
	int pend;
	int entering;            /* the last run ended in a call */
	uint64_t pend_ip;
	uint32_t pend_n;
	enum htr_icls pend_cls;
	uint64_t pend_ret;
	int pend_has_tsc;
	uint64_t pend_tsc;

	int has_tsc;
	uint64_t tsc;            /* last time reported */

	int has_sync;
	uint64_t sync_off;       /* last sync offset libipt gave */
	int sync_pend;           /* sync_off not yet reported */

	int need_resume;
	int off, async_off;      /* tracing disabled (asynchronously) */
	uint64_t off_offset;
	uint64_t off_ip;         /* where it stopped (async) or went (0:
				  * unknown) */
	int off_kernel;          /* it went to a kernel address */
	uint64_t stall, stall_off;      /* runaway guard */
	uint64_t loop_ip, loop_off;     /* loop guard: the block start watched */
	uint32_t loop_hits, loop_left, loop_span;
	uint64_t psb_tried;      /* last PSB synced at (+ 1; 0: none) */
	int runaway;
	int tsx_abort;           /* the next async branch is an abort */

	uint64_t insns, next_progress;
	struct cls_slot *cache;

	int in_tail;             /* libipt reported pts_eos */
	struct blk *tail;
	size_t ntail, tail_cap;

	/* SKL014 with the block decoder, which is given no filters
	 * (fresh_decoder() says why): past a direct branch out of them it
	 * follows the untraced code, without trace, to the next branch that
	 * needs some, and only there reports the disable that has no IP.
	 * The blocks it decodes on the way are held with the tail and
	 * dropped when the disable comes (over_event()). */
	int skl014;
	struct pt_conf_addr_filter filter;
	ZydisDecoder zd64, zd32;
	int over;                /* blocks are held past such an exit */
};

static uint64_t cur_offset(const struct dec *s)
{
	uint64_t off = 0;

	if (s->w)
		return htr_walk__offset(s->w);
	if (pt_blk_get_offset(s->d, &off) < 0)
		return 0;
	return off;
}

/* Whether a run of class @c enters a callee (or a handler). */
static HOT int enters(enum htr_icls c)
{
	return c == HTR_IC_CALL || c == HTR_IC_FAR_CALL;
}

/* The bytes of @b's last instruction: its own if libipt gave them
 * (truncated), else read into @buf (pt_max_insn_size bytes).  Returns
 * how many there are at *@p, 0 or less if none could be read. */
static int last_insn(const struct dec *s, const struct pt_block *b,
		     uint8_t *buf, const uint8_t **p)
{
	if (b->truncated) {
		*p = b->raw;
		return b->size;
	}
	*p = buf;
	return b->isid > 0 ? pt_iscache_read(s->isc, buf, pt_max_insn_size,
					     b->isid, b->end_ip) : -1;
}

/* Class of @b's last instruction and, for calls, its return address. */
static NOINLINE enum htr_icls block_class_slow(struct dec *s,
						 const struct pt_block *b,
						 uint64_t *ret_ip)
{
	struct cls_slot *slot;
	uint8_t buf[pt_max_insn_size];
	const uint8_t *p;
	enum htr_icls cls;
	int n, len;

	if (b->truncated) {
		cls = htr_x86__classify(b->raw, b->size, b->mode == ptem_64bit, &len);
	} else {
		slot = &s->cache[(b->end_ip ^ (b->end_ip >> CLS_CACHE_BITS)) &
				 (CLS_CACHE_SIZE - 1)];
		if (slot->ip != b->end_ip + 1) {
			n = last_insn(s, b, buf, &p);
			cls = n > 0 ? htr_x86__classify(p, (size_t) n,
							 b->mode == ptem_64bit, &len) :
				HTR_IC_OTHER;
			if (n <= 0)
				len = 0;
			slot->ip = b->end_ip + 1;
			slot->cls = (uint8_t) cls;
			slot->len = (uint8_t) len;
		}
		cls = (enum htr_icls) slot->cls;
		len = slot->len;
	}
	/* libipt's class wins where it gave one. */
	if (b->iclass == ptic_call)
		cls = HTR_IC_CALL;
	else if (b->iclass == ptic_far_call)
		cls = HTR_IC_FAR_CALL;
	if (len && enters(cls))
		*ret_ip = b->end_ip + (uint64_t) len;
	else if (cls == HTR_IC_JUMP)
		*ret_ip = b->end_ip;
	return cls;
}

static HOT enum htr_icls block_class(struct dec *s, const struct pt_block *b,
				     uint64_t *ret_ip)
{
	*ret_ip = 0;
	switch (b->iclass) {
	case ptic_return:
		return HTR_IC_RET;
	case ptic_far_return:
		return HTR_IC_FAR_RET;
	case ptic_call:
	case ptic_far_call:
	case ptic_jump:
	case ptic_error:
		return block_class_slow(s, b, ret_ip);
	default:
		return HTR_IC_OTHER;
	}
}

/* Emit the pending run and the time after it. */
static HOT int flush(struct dec *s)
{
	const struct htr_decode_sink *k = s->sink;
	int rc, timed;

	if (!s->pend)
		return 0;
	s->pend = 0;
	s->entering = enters(s->pend_cls);
	timed = s->pend_has_tsc && (!s->has_tsc || s->pend_tsc != s->tsc);
	if (timed) {
		s->has_tsc = 1;
		s->tsc = s->pend_tsc;
	}
	rc = k->run(k->ctx, s->pend_ip, s->pend_n, s->pend_cls, s->pend_ret,
		    timed, s->tsc);
	if (rc)
		return rc;
	s->insns += s->pend_n;
	if (s->insns >= s->next_progress) {
		s->next_progress = s->insns + PROGRESS_STEP;
		if (k->progress && k->progress(k->ctx, cur_offset(s)))
			return HTR_ERR_CANCELED;
	}
	return 0;
}

static int emit_sync(struct dec *s)
{
	s->sync_pend = 0;
	return s->sink->sync ? s->sink->sync(s->sink->ctx, s->sync_off) : 0;
}

/* Note a PSB at @off; report an older one that no run followed yet. */
static int note_sync_at(struct dec *s, uint64_t off)
{
	int rc;

	if (s->has_sync && off == s->sync_off)
		return 0;
	if (s->sync_pend && ((rc = flush(s)) != 0 || (rc = emit_sync(s)) != 0))
		return rc;
	s->has_sync = 1;
	s->sync_off = off;
	s->sync_pend = 1;
	return 0;
}

/* The PSB libipt synchronized at. */
static int note_sync(struct dec *s)
{
	uint64_t off;

	if ((s->w ? htr_walk__sync_offset(s->w, &off)
		  : pt_blk_get_sync_offset(s->d, &off)) < 0)
		return 0;
	return note_sync_at(s, off);
}

static int is_psb(const uint8_t *p)
{
	int i;

	for (i = 0; i < 16; i += 2)
		if (p[i] != 0x02 || p[i + 1] != 0x82)
			return 0;
	return 1;
}

uint64_t htr_decode__psb_before(const uint8_t *trace, uint64_t size,
				uint64_t pos, uint64_t low)
{
	uint64_t i;

	if (pos > size)
		pos = size;
	if (pos < 16 || pos - 16 < low)
		return UINT64_MAX;
	if (pos - low > PSB_SEARCH_MAX)
		low = pos - PSB_SEARCH_MAX;
	for (i = pos - 16 + 1; i-- > low;)
		if (trace[i] == 0x02 && is_psb(trace + i))
			return i;
	return UINT64_MAX;
}

int htr_decode__error_is_local(int code)
{
	return code == -pte_nomap;
}

uint64_t htr_decode__psb_after(const uint8_t *trace, uint64_t size,
			       uint64_t from)
{
	const uint8_t *p = trace + from, *lim;

	if (from >= size || size - from < 16)
		return UINT64_MAX;
	lim = trace + size - 15;
	while (p < lim && (p = memchr(p, 0x02, (size_t) (lim - p)))) {
		if (is_psb(p))
			return (uint64_t) (p - trace);
		p++;
	}
	return UINT64_MAX;
}

/* A status update: libipt read a PSB+ while decoding (2.0.5 has no other
 * sign of it; pt_blk_get_sync_offset changes only when it syncs).  The PSB
 * is the last one before the decoder's position, after the last known. */
static int psb_passed(struct dec *s)
{
	uint64_t i = htr_decode__psb_before(s->trace, s->size, cur_offset(s),
					    s->has_sync ? s->sync_off + 1 : 0);

	return i == UINT64_MAX ? 0 : note_sync_at(s, i);
}

static int gap(struct dec *s, int kind, uint64_t offset, int code)
{
	struct htr_decode_gap g;
	int rc = flush(s);

	if (rc)
		return rc;
	s->need_resume = 1;
	memset(&g, 0, sizeof(g));
	g.kind = kind;
	g.code = code;
	g.offset = offset;
	if (kind == HTR_GAP_DISABLED) {
		g.async = s->async_off;
		g.ip = s->off_ip;
	}
	return s->sink->gap ? s->sink->gap(s->sink->ctx, &g) : 0;
}

/* A block as the sink will see it. */
struct blk {
	uint64_t ip, ret, tsc;
	uint32_t n;
	enum htr_icls cls;
	int has_tsc;
	int lone_branch;   /* one jump that read trace: tsc is its time */
	int direct, exit;  /* SKL014: it ends in a direct jump or call (out
			    * of the filters) */
};

static int dec_time(struct dec *s, uint64_t *tsc)
{
	return s->w ? htr_walk__time(s->w, tsc) : pt_blk_time(s->d, tsc, NULL,
							     NULL);
}

/* Whether @b's last instruction, a jump, read trace to go on. */
static NOINLINE int jump_read_trace(struct dec *s, const struct pt_block *b)
{
	uint8_t buf[pt_max_insn_size];
	const uint8_t *p;
	int n;

	switch (b->iclass) {
	case ptic_cond_jump:
	case ptic_far_jump:
		return 1;
	case ptic_jump:
	case ptic_error:
		/* libipt gives direct and indirect jumps the same class, and
		 * none to an indirect one from its block cache. */
		n = last_insn(s, b, buf, &p);
		return n > 0 && htr_x86__jump_reads_trace(p, (size_t) n,
							  b->mode == ptem_64bit);
	default:
		return 0;
	}
}

/* With SKL014: whether @b ends in a direct jump or call (*@exit: one out
 * of the filters). */
static NOINLINE int direct_branch(struct dec *s, const struct pt_block *b,
				  int *exit)
{
	ZydisDecodedInstruction z;
	uint8_t buf[pt_max_insn_size];
	const uint8_t *p;
	uint64_t to;
	int n;

	*exit = 0;
	if (b->iclass != ptic_call && b->iclass != ptic_jump &&
	    b->iclass != ptic_error)
		return 0;
	n = last_insn(s, b, buf, &p);
	if (n <= 0 || (b->mode != ptem_64bit && b->mode != ptem_32bit) ||
	    ZYAN_FAILED(ZydisDecoderDecodeInstruction(b->mode == ptem_64bit ?
			&s->zd64 : &s->zd32, NULL, p, (ZyanUSize) n, &z)) ||
	    (z.mnemonic != ZYDIS_MNEMONIC_JMP &&
	     z.mnemonic != ZYDIS_MNEMONIC_CALL) ||
	    z.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR ||
	    !z.raw.imm[0].is_relative)
		return 0;
	to = b->end_ip + z.length + (uint64_t) z.raw.imm[0].value.s;
	if (b->mode == ptem_32bit)
		to &= 0xffffffffu;
	*exit = !htr_filter__passes(&s->filter, to);
	return 1;
}

/* The next block from the block decoder or the walk.  Returns libipt's
 * status. */
static HOT int next_block(struct dec *s, struct blk *o)
{
	struct pt_block b;
	int st;

	o->direct = o->exit = 0;
	if (s->w) {
		struct htr_walk_block wb;

		st = htr_walk__next(s->w, &wb);
		o->ip = wb.ip;
		o->n = wb.n;
		o->cls = wb.cls;
		o->ret = wb.ret;
		o->lone_branch = wb.n == 1 && wb.branch;
	} else {
		b.ninsn = 0;
		st = pt_blk_next(s->d, &b, sizeof(b));
		/* libipt returns the block it was building with the error.
		 * Unless the error is about decoding the next instruction,
		 * the trace for the last one was missing: its outcome is
		 * unknown and it is not delivered (as pt_insn_next does).
		 * The one before it did not end a block: HTR_IC_OTHER. */
		if (st < 0 && b.ninsn && st != -pte_nomap &&
		    st != -pte_bad_insn) {
			b.ninsn--;
			b.iclass = ptic_other;
		}
		o->ip = b.ip;
		o->n = b.ninsn;
		o->lone_branch = 0;
		if (o->n) {
			o->cls = block_class(s, &b, &o->ret);
			o->lone_branch = o->n == 1 &&
					 (o->cls == HTR_IC_OTHER ||
					  o->cls == HTR_IC_JUMP) &&
					 jump_read_trace(s, &b);
			if (s->skl014)
				o->direct = direct_branch(s, &b, &o->exit);
		}
	}
	/* A block an error cut short ends where libipt's cache says: no
	 * time of its own (the end of the trace is no error). */
	if (o->n)
		o->has_tsc = (st >= 0 || st == -pte_eos) &&
			     dec_time(s, &o->tsc) >= 0;
	return st;
}

/* A new non-empty block: emit the previous run, then hold this one. */
static HOT int on_block(struct dec *s, const struct blk *b)
{
	const struct htr_decode_sink *k = s->sink;
	int rc, entering;

	/* Most blocks end at a conditional branch and change nothing the
	 * builder sees: extend the pending run instead of reporting each
	 * (one callback per call, return or event, not per branch).  The
	 * time is the one after the run's last block: where libipt ends the
	 * blocks inside a run depends on its block cache, that is on what
	 * the decoder saw before (a parallel build's decoders see less),
	 * where a run ends does not. */
	if (s->pend && s->pend_cls == HTR_IC_OTHER && !s->sync_pend &&
	    !s->need_resume && s->pend_n < (1u << 30)) {
		s->pend_n += b->n;
		s->pend_cls = b->cls;
		s->pend_ret = b->ret;
		s->pend_has_tsc = b->has_tsc;
		s->pend_tsc = b->tsc;
		s->tsx_abort = 0;
		return 0;
	}
	if ((rc = flush(s)) != 0)
		return rc;
	entering = s->entering || s->need_resume;
	if (s->sync_pend && (rc = emit_sync(s)) != 0)
		return rc;
	if (s->need_resume) {
		s->need_resume = 0;
		if (k->resume && (rc = k->resume(k->ctx, b->ip)) != 0)
			return rc;
	}
	s->pend = 1;
	s->pend_ip = b->ip;
	s->pend_n = b->n;
	s->pend_cls = b->cls;
	s->pend_ret = b->ret;
	s->pend_has_tsc = b->has_tsc;
	s->pend_tsc = b->tsc;
	s->tsx_abort = 0;
	/* A callee (or a resumed run) whose first instruction is a jump
	 * that read trace (a PLT stub's jmp *GOT) starts at the time of
	 * that trace, not at the time the call before was reported: the
	 * jump ran then (libipt's time after it, perf's date for it).
	 * Both decoders end a block at such a jump whatever their caches
	 * hold (the walk where a callee may start), so both report it. */
	if (b->lone_branch && entering && b->has_tsc &&
	    (!s->has_tsc || b->tsc != s->tsc))
		return flush(s);
	return 0;
}

/* Blocks decoded after libipt said the trace is exhausted (pts_eos) are
 * held: they count if decoding then stops for want of trace (the code up to
 * the next branch ran), and are dropped with the error if it stops
 * because the image ends (as ptxed, which stops at pts_eos). */
static int tail_push(struct dec *s, const struct blk *b)
{
	if (s->ntail == s->tail_cap) {
		size_t cap = s->tail_cap ? s->tail_cap * 2 : 16;
		struct blk *p = realloc(s->tail, cap * sizeof(*p));

		if (!p)
			return HTR_ERR_NOMEM;
		s->tail = p;
		s->tail_cap = cap;
	}
	s->tail[s->ntail++] = *b;
	return 0;
}

static int tail_commit(struct dec *s)
{
	size_t i;
	int rc;

	for (i = 0; i < s->ntail; i++)
		if ((rc = on_block(s, &s->tail[i])) != 0)
			return rc;
	s->ntail = 0;
	return 0;
}

/* Report the resume now when the event says where decoding goes on: a
 * second gap may follow before any block (overflow, then a disable). */
static int resume_at(struct dec *s, uint64_t ip)
{
	if (!s->need_resume)
		return 0;
	s->need_resume = 0;
	return s->sink->resume ? s->sink->resume(s->sink->ctx, ip) : 0;
}

/* Tell an interleaving sink (onoff) that tracing stopped. */
static int disabled(struct dec *s)
{
	int rc;

	if (!s->sink->onoff)
		return 0;
	rc = flush(s);
	return rc ? rc : s->sink->onoff(s->sink->ctx, 0, s->async_off,
					s->off_ip, s->off_offset, 0, 0);
}

/* Stopped between a call and its callee's first instruction (preempted)
 * and running again at @tsc: the callee starts then, the time off the CPU
 * is the caller's (as htr_tb__time_entry() has it for CPU-wide builds). */
static int entry_time(struct dec *s, uint64_t tsc)
{
	int call = s->pend ? enters(s->pend_cls) : s->entering;
	int rc;

	if (!call)
		return 0;
	if ((rc = flush(s)) != 0 || (s->has_tsc && s->tsc == tsc))
		return rc;
	s->has_tsc = 1;
	s->tsc = tsc;
	return s->sink->time ? s->sink->time(s->sink->ctx, tsc) : 0;
}

static int on_event(struct dec *s, const struct pt_event *ev)
{
	int rc = 0, abort = 0;

	switch (ev->type) {
	case ptev_enabled:
		if (s->sink->onoff) {
			rc = flush(s);
			if (!rc)
				rc = s->sink->onoff(s->sink->ctx, 1, 0,
						    ev->variant.enabled.ip,
						    cur_offset(s), ev->has_tsc,
						    ev->tsc);
			s->need_resume = 1;
			s->has_tsc = 0;
			if (!rc)
				rc = resume_at(s, ev->variant.enabled.ip);
			s->off = 0;
			s->async_off = 0;
			break;
		}
		/* Only an asynchronous disable that resumes at the very IP
		 * where it stopped loses nothing.  libipt also says "resumed"
		 * after a synchronous disable at a call or syscall whose
		 * return address tracing resumes at: the callee ran unseen. */
		if (s->off && !(s->async_off &&
				ev->variant.enabled.ip == s->off_ip)) {
			rc = gap(s, HTR_GAP_DISABLED, cur_offset(s),
				 s->off_kernel ? HTR_GAP_CODE_KERNEL : 0);
			if (!rc)
				rc = resume_at(s, ev->variant.enabled.ip);
		} else {
			/* An overflow that resolved while tracing was off
			 * resumes here (a disable may follow before any run
			 * says so). */
			rc = resume_at(s, ev->variant.enabled.ip);
			if (!rc && s->off && ev->has_tsc)
				rc = entry_time(s, ev->tsc);
		}
		s->off = 0;
		s->async_off = 0;
		break;
	case ptev_disabled:
		s->off = 1;
		s->async_off = 0;
		s->off_offset = cur_offset(s);
		s->off_ip = ev->ip_suppressed ? 0 : ev->variant.disabled.ip;
		/* Into the kernel (htr_perfdata__user_only): not a callee. */
		s->off_kernel = !ev->ip_suppressed && s->off_ip >> 63;
		if (s->off_kernel)
			s->off_ip = 0;
		rc = disabled(s);
		break;
	case ptev_async_disabled:
		s->off = 1;
		s->async_off = 1;
		s->off_offset = cur_offset(s);
		s->off_ip = ev->variant.async_disabled.at;
		s->off_kernel = !ev->ip_suppressed &&
				ev->variant.async_disabled.ip >> 63;
		rc = disabled(s);
		break;
	case ptev_async_branch:
		/* An interrupt or exception: the last instruction that ran
		 * enters the handler.  A transaction abort only jumps. */
		if (s->tsx_abort)
			break;
		if (s->pend && s->pend_cls == HTR_IC_OTHER) {
			s->pend_cls = HTR_IC_FAR_CALL;
			s->pend_ret = ev->variant.async_branch.from;
			break;
		}
		/* The interrupted run ends in a call or a return (or there
		 * is none): an empty run carries the interrupt. */
		rc = flush(s);
		if (!rc)
			rc = resume_at(s, ev->variant.async_branch.from);
		if (!rc)
			rc = s->sink->run(s->sink->ctx,
					  ev->variant.async_branch.from, 0,
					  HTR_IC_FAR_CALL,
					  ev->variant.async_branch.from, 0, 0);
		s->entering = 1;
		break;
	case ptev_overflow:
		rc = gap(s, HTR_GAP_OVERFLOW, cur_offset(s), 0);
		/* Without an IP the overflow resolved while tracing was off:
		 * the next run says where it resumed. */
		if (!rc && !ev->ip_suppressed)
			rc = resume_at(s, ev->variant.overflow.ip);
		break;
	case ptev_tsx:
		abort = ev->variant.tsx.aborted;
		break;
	case ptev_paging:
	case ptev_async_paging:
	case ptev_exec_mode:
	case ptev_stop:
	case ptev_vmcs:
	case ptev_async_vmcs:
	case ptev_exstop:
	case ptev_mwait:
	case ptev_pwre:
	case ptev_pwrx:
	case ptev_ptwrite:
	case ptev_tick:
	case ptev_cbr:
	case ptev_mnt:
	default:
		/* No instruction is lost or moved; time is read after each
		 * block. */
		break;
	}
	s->tsx_abort = abort;
	if (!rc && ev->status_update)
		rc = psb_passed(s);
	return rc;
}

/* The runaway guard, checked every HTR_DECODE_RUNAWAY instructions: sets
 * s->runaway if no trace was consumed since the last check. */
static void runaway(struct dec *s)
{
	uint64_t off = cur_offset(s);

	s->stall = 0;
	if (off == s->stall_off)
		s->runaway = 1;
	s->stall_off = off;
}

/* The loop guard.  Without consuming trace the decoder only follows
 * direct jumps and calls, so what it decodes next depends on the address
 * alone: code it comes back to without consuming trace it goes round for
 * ever, and waiting for the runaway guard's 2^22 instructions fills the
 * tree with them (a call loop: 2^22 blocks).  A block start is watched for
 * a while (Brent's cycle search: windows of doubling length); coming back
 * to it more often than one trace offset can pay for (the bits of the TNT
 * packet libipt holds) is a runaway. */
static void loop_watch(struct dec *s, uint64_t ip)
{
	s->loop_ip = ip;
	s->loop_off = cur_offset(s);
	s->loop_hits = 0;
	if (s->loop_span < LOOP_SPAN_MAX)
		s->loop_span *= 2;
	s->loop_left = s->loop_span;
}

static void loop_hit(struct dec *s)
{
	uint64_t off = cur_offset(s);

	if (off != s->loop_off) {
		s->loop_off = off;
		s->loop_hits = 0;
	} else if (++s->loop_hits > LOOP_HITS) {
		s->runaway = 1;
	}
}

/* Whether @ev, while blocks are held past an SKL014 exit, is the disable
 * without an IP that drops them (any other event shows that they ran
 * traced: that disable was the event libipt had waiting at the exit). */
static int over_drops(const struct pt_event *ev)
{
	return ev->type == ptev_disabled && ev->ip_suppressed;
}

/* The blocks held past an SKL014 exit ran traced after all: they are
 * reported (unless the tail buffer holds them for its own reason). */
static int over_ran(struct dec *s)
{
	s->over = 0;
	return s->in_tail ? 0 : tail_commit(s);
}

/* A block while held past an SKL014 exit: one that ends where trace was
 * read (not a direct branch, no event waiting there) ran traced. */
static int over_block(struct dec *s, const struct blk *b, int st)
{
	if (b->direct || (st & pts_event_pending) || st < 0)
		return 0;
	return over_ran(s);
}

/* libipt stopped in the code it followed past an SKL014 exit (no code
 * there, or none it can decode) with the disable still waiting: once that
 * is taken, decoding goes on.  1 (*@st its status) if so; 0 if not, *@st
 * the error to report. */
static int over_error(struct dec *s, int *st, int *rc)
{
	struct pt_event ev;
	int est;

	if (*st != -pte_nomap && *st != -pte_bad_insn)
		return 0;
	ev.type = ptev_enabled;             /* unless filled */
	est = pt_blk_event(s->d, &ev, sizeof(ev));
	if (!over_drops(&ev))
		return 0;
	s->over = 0;
	s->ntail = 0;
	*st = est;
	if (est < 0)
		return 0;
	*rc = on_event(s, &ev);
	return 1;
}

/* Decode from a synchronization point until an error or the end.  Returns a
 * callback's value (or HTR_ERR_CANCELED); libipt's status in *@status. */
static int decode_synced(struct dec *s, int *status)
{
	struct blk o;
	int st = *status, rc;

	s->in_tail = 0;
	s->ntail = 0;
	s->over = 0;
	s->stall = 0;
	s->stall_off = cur_offset(s);
	s->loop_ip = UINT64_MAX;
	s->loop_span = LOOP_SPAN_MIN / 2;
	s->loop_left = 1;
	for (;;) {
		if (st & pts_eos)
			s->in_tail = 1;
		while (st & pts_event_pending) {
			struct pt_event ev;

			ev.type = ptev_enabled;     /* unless filled */
			st = s->w ? htr_walk__event(s->w, &ev)
				  : pt_blk_event(s->d, &ev, sizeof(ev));
			/* (An error may come after the event, as the next
			 * one is fetched: the disable still counts.) */
			if (s->over && over_drops(&ev)) {
				s->over = 0;
				s->ntail = 0;
			}
			if (st < 0)
				goto out;
			s->over = 0;
			if ((rc = tail_commit(s)) != 0 ||
			    (rc = on_event(s, &ev)) != 0)
				return rc;
			s->loop_hits = 0;
			if (st & pts_eos)
				s->in_tail = 1;
		}
		st = next_block(s, &o);
		if (o.n) {
			rc = s->in_tail || s->over ? tail_push(s, &o) :
						     on_block(s, &o);
			if (rc)
				return rc;
			if (o.exit)
				s->over = 1;
			else if (s->over && (rc = over_block(s, &o, st)) != 0)
				return rc;
			/* Held blocks are bounded too: none of them
			 * consumed trace. */
			s->stall += o.n;
			if (o.ip == s->loop_ip)
				loop_hit(s);
			if (--s->loop_left == 0)
				loop_watch(s, o.ip);
			if (s->ntail > TAIL_MAX)
				s->runaway = 1;
			else if (s->stall >= HTR_DECODE_RUNAWAY)
				runaway(s);
			if (s->runaway) {
				if (s->over && (rc = over_ran(s)) != 0)
					return rc;
				s->ntail = 0;
				s->in_tail = 0;
				*status = -pte_internal;
				return 0;
			}
		}
		if (st < 0 && s->over && over_error(s, &st, &rc)) {
			if (rc)
				return rc;
			continue;
		}
		if (st < 0)
			goto out;
	}
out:
	/* Any other error while blocks were held: they ran. */
	if (s->over && (rc = over_ran(s)) != 0)
		return rc;
	if (s->in_tail && st != HTR_WALK_UNSURE) {
		if (st == -pte_eos && (rc = tail_commit(s)) != 0)
			return rc;
		/* Out of trace: whatever stopped the tail is its end. */
		s->ntail = 0;
		st = -pte_eos;
	}
	*status = st;
	return 0;
}

/* pt_blk_sync_forward, reporting progress: the way to the next PSB may be
 * gigabytes of damaged or sparse trace, and libipt's own search says
 * nothing until it is done.  Sets *@status as pt_blk_sync_forward would
 * (-pte_eos: no PSB left).  Returns 0 or HTR_ERR_CANCELED. */
static int sync_next(struct dec *s, uint64_t from, int *status)
{
	const struct htr_decode_sink *k = s->sink;

	while (from + 16 <= s->size) {
		uint64_t end = s->size - from > SCAN_STEP ? from + SCAN_STEP
							  : s->size;
		uint64_t at = htr_decode__psb_after(s->trace, end, from);

		if (at != UINT64_MAX) {
			s->psb_tried = at + 1;
			*status = s->w ? htr_walk__sync_set(s->w, at)
				       : pt_blk_sync_set(s->d, at);
			return 0;
		}
		if (end == s->size)
			break;
		/* A PSB may straddle the step's end. */
		from = end - 15;
		if (k->progress && k->progress(k->ctx, end))
			return HTR_ERR_CANCELED;
	}
	*status = -pte_eos;
	return 0;
}

/* A new block decoder on new sections of its own, for a decoding that
 * starts at a PSB: the same trace decodes the same way on whichever thread,
 * after whatever other decoders (or this one, before an error) did.  (The
 * walk keeps its code and cache: they hold what the code is, not what the
 * trace did.)  Returns 0 or an error (message in @err). */
static int fresh_decoder(struct dec *s, const struct pt_config *c,
			 struct htr_image *img, int walk, struct htr_err *err)
{
	struct pt_config nofilter;
	int status;

	if (walk) {
		status = s->w ? htr_walk__restart(s->w, c) :
			 htr_walk__alloc(&s->w, c, img);
		return status < 0 ? htr_err__set(err, status, "cannot set up "
						 "the walk") : 0;
	}
	pt_blk_free_decoder(s->d);
	pt_image_free(s->image);
	pt_iscache_free(s->isc);
	s->image = NULL;
	s->isc = NULL;
	/* With end_on_call libipt 2.0.5's SKL014 workaround binds a disable
	 * without an IP to the first direct call, even one that stays in the
	 * filtered code (and every user-only syscall's disable has no IP):
	 * without filters it binds where it would on any other CPU, and
	 * decode_synced() drops what it decodes past an exit (struct dec). */
	nofilter = *c;
	memset(&nofilter.addr_filter, 0, sizeof(nofilter.addr_filter));
	s->d = pt_blk_alloc_decoder(&nofilter);
	if (!s->d)
		return htr_err__set(err, HTR_ERR_DECODE, "cannot set up the "
				    "Intel PT decoder (bad configuration)");
	if (htr_image__private(img, &s->image, &s->isc) < 0)
		return htr_err__set(err, HTR_ERR_NOMEM, "cannot set up the "
				    "image");
	status = pt_blk_set_image(s->d, s->image);
	if (status < 0)
		return htr_err__set(err, HTR_ERR_DECODE, "cannot set the "
				    "image: %s", pt_errstr(pt_errcode(status)));
	return 0;
}


/* Range @n of @f, as IA32_RTIT_ADDRn (its end inclusive). */
static void set_filter(struct pt_conf_addr_filter *f, unsigned n,
		       const struct htr_addr_filter *r)
{
	uint64_t *a[4] = { &f->addr0_a, &f->addr1_a, &f->addr2_a,
			   &f->addr3_a };
	uint64_t *b[4] = { &f->addr0_b, &f->addr1_b, &f->addr2_b,
			   &f->addr3_b };

	f->config.addr_cfg |= (uint64_t) (r->kind & 15) << (4 * n);
	*a[n] = r->start;
	*b[n] = r->end - 1;
}

static void setup_config(struct pt_config *c, const struct htr_decode_cfg *cfg)
{
	unsigned i;

	pt_config_init(c);
	c->begin = (uint8_t *) (uintptr_t) cfg->trace;
	c->end = c->begin + cfg->size;
	if (cfg->cpu_family) {
		c->cpu.vendor = pcv_intel;
		c->cpu.family = (uint16_t) cfg->cpu_family;
		c->cpu.model = (uint8_t) cfg->cpu_model;
		c->cpu.stepping = (uint8_t) cfg->cpu_stepping;
		(void) pt_cpu_errata(&c->errata, &c->cpu);
	}
	for (i = 0; i < cfg->nfilters && i < HTR_ADDR_FILTERS_MAX; i++)
		set_filter(&c->addr_filter, i, &cfg->filters[i]);
	c->cpuid_0x15_eax = cfg->cpuid_0x15_eax;
	c->cpuid_0x15_ebx = cfg->cpuid_0x15_ebx;
	c->mtc_freq = cfg->mtc_freq;
	c->nom_freq = cfg->nom_freq;
	c->flags.variant.block.end_on_call = 1;
	/* libipt 2.0.5 follows direct jumps within a block by recursing,
	 * once per jump: a jump to itself (code that is not the recorded
	 * one) recursed 2^16 deep and overflowed the stack.  Blocks that end
	 * at direct jumps bound it; runs join them again. */
	c->flags.variant.block.end_on_jump = 1;
}

int htr_decode__run(const struct htr_decode_cfg *cfg, struct htr_image *img,
		    const struct htr_decode_sink *sink, struct htr_err *err)
{
	struct pt_config c;
	struct dec s;
	int status, rc = 0, synced = 0, have_err = 0, resynced = 0;

	if (!cfg || !img || !sink || !sink->run || (!cfg->trace && cfg->size))
		return htr_err__set(err, HTR_ERR_INVALID, "decode: bad arguments");
	memset(&s, 0, sizeof(s));
	s.sink = sink;
	s.trace = cfg->trace;
	s.size = cfg->size;
	s.need_resume = 1;
	s.next_progress = PROGRESS_STEP;
	s.w = cfg->walk && cfg->keep ? *cfg->keep : NULL;
	s.cache = calloc(CLS_CACHE_SIZE, sizeof(*s.cache));
	if (!s.cache)
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	setup_config(&c, cfg);
	s.skl014 = !cfg->walk && c.errata.skl014 &&
		   c.addr_filter.config.addr_cfg;
	s.filter = c.addr_filter;
	ZydisDecoderInit(&s.zd64, ZYDIS_MACHINE_MODE_LONG_64,
			 ZYDIS_STACK_WIDTH_64);
	ZydisDecoderInit(&s.zd32, ZYDIS_MACHINE_MODE_LONG_COMPAT_32,
			 ZYDIS_STACK_WIDTH_32);
	if ((rc = fresh_decoder(&s, &c, img, cfg->walk, err)) != 0)
		goto out;
	if ((rc = sync_next(&s, cfg->begin, &status)) != 0)
		goto out;
	for (;;) {
		if (status >= 0) {
			uint64_t tsc;

			/* The time the first PSB+ gave holds from the first
			 * instruction on, before any block reports one; so
			 * does the time of the PSB+ decoding resumes at after
			 * an error (the builder holds it for the next run). */
			if ((synced ? resynced : !s.has_tsc) && sink->time &&
			    dec_time(&s, &tsc) >= 0) {
				s.has_tsc = 1;
				s.tsc = tsc;
				if ((rc = sink->time(sink->ctx, tsc)) != 0)
					goto out;
			}
			synced = 1;
			resynced = 0;
			if ((rc = note_sync(&s)) != 0 ||
			    (rc = decode_synced(&s, &status)) != 0)
				goto out;
		}
		if (status == -pte_eos)
			break;
		/* The walk reports no error it could not be sure of. */
		if (s.w && status == HTR_WALK_UNSURE) {
			rc = HTR_DECODE_GAVE_UP;
			goto out;
		}
		/* Bad trace: record it, resume at the next PSB. */
		{
			uint64_t off = cur_offset(&s);

			s.sync_pend = 0;
			s.off = s.async_off = 0;
			/* Where libipt stops before an error depends on its
			 * block cache, and with it the time it read last: a
			 * run the error may have cut short has none.  One
			 * that ended at a branch (a call into missing code)
			 * ended there whatever the cache. */
			if (s.pend_cls == HTR_IC_OTHER)
				s.pend_has_tsc = 0;
			rc = gap(&s, HTR_GAP_ERROR, off, s.runaway ?
				 HTR_GAP_CODE_RUNAWAY : status);
			s.runaway = 0;
			if (rc)
				goto out;
			have_err = 1;
			/* What libipt makes of the trace after an error
			 * depends on what it kept from before (a parallel
			 * build's decoders each saw less): go on with a new
			 * one, as any decoder that syncs here would. */
			if ((rc = fresh_decoder(&s, &c, img, cfg->walk, err)) != 0)
				goto out;
			/* Past the PSB last tried (its PSB+ may be what
			 * failed), or it would be found again: each try
			 * is at a later PSB, so this ends.  An error at a
			 * PSB is tried there once more (the packet before
			 * it may be what failed); if the PSB+ is what is
			 * damaged, that fails at the same offset and the
			 * next try is past it, where ptxed would stop and
			 * lose the rest of the trace. */
			if ((rc = sync_next(&s, off > s.psb_tried ? off :
					    s.psb_tried, &status)) != 0)
				goto out;
			resynced = 1;
		}
	}
	if ((rc = flush(&s)) != 0)
		goto out;
	if (s.off && s.async_off && !sink->onoff &&
	    (rc = gap(&s, HTR_GAP_DISABLED, s.off_offset, 0)) != 0)
		goto out;
	if (!synced && !have_err)
		rc = htr_err__set(err, HTR_ERR_DECODE, "no PSB in the trace "
				  "(%llu bytes)", (unsigned long long) cfg->size);
out:
	if (rc == HTR_ERR_CANCELED)
		htr_err__set(err, rc, "decode canceled");
	if (cfg->walk && cfg->keep)
		*cfg->keep = s.w;
	else
		htr_walk__free(s.w);
	pt_blk_free_decoder(s.d);
	pt_image_free(s.image);
	pt_iscache_free(s.isc);
	free(s.cache);
	free(s.tail);
	return rc;
}
