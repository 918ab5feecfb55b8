/*
 * Decoder: runs libipt's block decoder, or the walk that stands in for it
 * (walk.h), over a trace and reports what the builder needs, through a
 * sink of callbacks.  It knows nothing about trees; libipt's error codes
 * never leave this module (they are stored as plain ints in gap records
 * only).
 */
#ifndef HTR_LIB_DECODE_H
#define HTR_LIB_DECODE_H

#include "icls.h"
#include "err.h"

#include <stdint.h>

struct htr_addr_filter;
struct pt_conf_addr_filter;

struct htr_image;   /* lib/image.h */
struct htr_walk;    /* lib/walk.h */


/* A gap, as the decoder reports it. */
struct htr_decode_gap {
	int kind;                  /* enum htr_gap_kind (htr/tree.h) */
	int code;                  /* HTR_GAP_ERROR: libipt's status, or
				    * HTR_GAP_CODE_RUNAWAY */
	uint64_t offset;           /* trace offset where it was noticed */
	/* HTR_GAP_DISABLED only: @async is 1 when tracing stopped
	 * asynchronously (FUP + TIP.PGD: an interrupt) at @ip, 0 when a
	 * branch left the traced code (synchronous TIP.PGD) for @ip (0: the
	 * packet suppressed it). */
	int async;
	uint64_t ip;
};

struct htr_decode_sink {
	void *ctx;
	/* @ninsn instructions ran, the first at @ip; the last is of class
	 * @cls.  Every instruction the decoder delivers is in exactly one
	 * run, in order.  For calls, @ret_ip is the address of the
	 * instruction after the call (its return address), 0 if unknown;
	 * for HTR_IC_JUMP the jump's own address.
	 * @ninsn is 0 only for an interrupt that no run can carry (see the
	 * rules below): HTR_IC_FAR_CALL with @ip = @ret_ip = the interrupted
	 * IP.  @timed: the time after the run changed to @tsc, as @time
	 * would report it (in the same call: most runs have a time). */
	int (*run)(void *ctx, uint64_t ip, uint32_t ninsn, enum htr_icls cls,
		   uint64_t ret_ip, int timed, uint64_t tsc);
	/* Decoding (re)starts: the next run begins at @ip.  Called once at
	 * the start and after every gap that the decoder could resume from. */
	int (*resume)(void *ctx, uint64_t ip);
	/* Instructions were lost before the next run.  A disable is reported
	 * as a gap only when tracing is re-enabled later, or when it was
	 * asynchronous (FUP + TIP.PGD) at the end of the trace. */
	int (*gap)(void *ctx, const struct htr_decode_gap *gap);
	/* The decoder's time after the previous run, when it changed and
	 * @run did not carry it (the first PSB+'s, a preempted callee's:
	 * below); it applies from the last instruction of that run on (a
	 * report before the first run: from the first instruction on - the
	 * time of the first PSB+; one after an ERROR gap, before the next
	 * run: the time that run's first instruction starts at - the
	 * PSB+'s where decoding resumed).  Runs are not cut where only the time
	 * changes: the time inside a run is not sampled, but a run after a
	 * call or a resume whose first instruction is a jump that read trace
	 * (a PLT stub's) is cut after that jump, the time a callee starts
	 * at; and a thread stopped between a call and its callee's first
	 * instruction, nothing lost, has the time it ran again reported
	 * after the call's run.  A run an error cut short has no time of
	 * its own. */
	int (*time)(void *ctx, uint64_t tsc);
	/* The decoder passed a PSB at @offset; the next run follows it. */
	int (*sync)(void *ctx, uint64_t offset);
	/* Roughly every 2^20 instructions: bytes of trace consumed; a
	 * non-zero return cancels (htr_decode__run returns HTR_ERR_CANCELED). */
	int (*progress)(void *ctx, uint64_t offset);
	/* Optional, for traces that interleave threads (per-CPU buffers):
	 * tracing was disabled (@on 0: @async, at or towards @ip, 0 if
	 * unknown, noticed at trace @offset) or enabled (@on 1, at @ip, at
	 * time @tsc if @has_tsc), reported after the run before it.  With it
	 * set, every enable is followed by a resume, the time is reported
	 * again after the first run that follows a resume, and no DISABLED
	 * gap is reported: whether a disable lost instructions depends on
	 * which thread resumes, which only the sink knows. */
	int (*onoff)(void *ctx, int on, int async, uint64_t ip,
		     uint64_t offset, int has_tsc, uint64_t tsc);
};

#define HTR_DECODE_RUNAWAY (1u << 22)

/* The offset of the last PSB that starts in [@low, @pos - 16] of @trace
 * (@size bytes), looking back 64 KiB at most; UINT64_MAX if none.  libipt
 * 2.0.5 says it read a PSB+ while decoding only with a status update: this
 * is which one. */
uint64_t htr_decode__psb_before(const uint8_t *trace, uint64_t size,
				uint64_t pos, uint64_t low);

/* Whether an HTR_GAP_ERROR gap with @code happened for want of code at
 * the IP (no image there), which any decoder meets at the same place,
 * rather than for what the decoder had seen before (bad packets, a return
 * its return stack does not hold, a runaway). */
int htr_decode__error_is_local(int code);


/* The offset of the first PSB at or after @from in @trace (@size bytes);
 * UINT64_MAX if none. */
uint64_t htr_decode__psb_after(const uint8_t *trace, uint64_t size,
			       uint64_t from);

struct htr_decode_cfg {
	const uint8_t *trace;      /* the raw trace (mapped by the caller) */
	uint64_t size;
	uint64_t begin;            /* where to look for the first PSB */
	int cpu_family, cpu_model, cpu_stepping;   /* 0: no errata */
	uint32_t cpuid_0x15_eax, cpuid_0x15_ebx;
	uint8_t mtc_freq, nom_freq;
	/* IP filter ranges of the recording (htr_build_opts.filters); only
	 * the walk applies them (SKL014). */
	const struct htr_addr_filter *filters;
	unsigned nfilters;
	int walk;                  /* 1: the walk (walk.h) decodes; where it
				    * gives up, htr_decode__run() returns
				    * HTR_DECODE_GAVE_UP */
	struct htr_walk **keep;    /* with @walk: a walk the caller keeps
				    * from one run to the next (same trace
				    * and image; NULL at first), so its code
				    * stays mapped and its cache filled; the
				    * caller frees it.  NULL: the run's own */
};

/* The walk met what it does not follow itself (walk.c): the events given
 * so far cannot be trusted; decode again with the block decoder. */
#define HTR_DECODE_GAVE_UP 2

/*
 * Rules the decoder follows (libipt 2.0.5 block decoder, end_on_call):
 *  - Order: run, then the time after it; gaps; the PSB the next run follows
 *    (sync); resume; the next run.
 *  - Asynchronous branch (interrupt, exception; FUP+TIP): the run that was
 *    interrupted is reported with HTR_IC_FAR_CALL and @ret_ip = the
 *    interrupted IP (where iret returns) when its last instruction is of
 *    class HTR_IC_OTHER; otherwise (it ends in a call or a return, or no
 *    instruction ran since the previous async branch or (re)start) an
 *    empty HTR_IC_FAR_CALL run follows it.  A transaction abort's branch
 *    is a plain jump.
 *  - Enabled after a disable: a DISABLED gap unless the disable was
 *    asynchronous and tracing resumes at the very IP where it stopped (no
 *    instruction lost).  libipt 2.0.5 also calls the enable "resumed"
 *    after a synchronous disable (TIP.PGD bound to a call or syscall into
 *    untraced code) that resumes at the next instruction: the callee ran
 *    unseen, so that is a gap.  Asynchronous disable at the end of the
 *    trace: a DISABLED gap at the end.
 *  - Overflow: an OVERFLOW gap; decoding resumes at the IP the overflow
 *    names or, when it resolved while tracing was off (no FUP), at the
 *    next run.  Paging, vmcs, exec mode, tsx, stop,
 *    exstop, mwait, pwre, pwrx, ptwrite, tick, cbr and mnt lose nothing.
 *  - End of trace: code libipt decodes after the trace is exhausted runs
 *    up to the first instruction that needs trace, which is not delivered
 *    (its outcome is unknown); if the image ends first, that code is
 *    dropped (ptxed stops at pts_eos) and no error is reported.
 *  - A decode error: the runs up to it, an ERROR gap (libipt's code), then
 *    decoding resumes at the next PSB.
 *  - Runaway guards: coming back to a block more often than the trace
 *    offset it is at can pay for (a loop), or more than
 *    HTR_DECODE_RUNAWAY instructions in a row, without the decoder
 *    consuming trace means the image does not match (libipt would follow
 *    direct branches through the wrong code for ever): an ERROR gap with
 *    code HTR_GAP_CODE_RUNAWAY, then the next PSB.
 *
 * Decode the whole trace.  A callback returning non-zero stops decoding and
 * that value is returned.  Bad trace data never fails the run: it becomes an
 * HTR_GAP_ERROR gap and decoding resumes at the next PSB.
 * Returns 0, HTR_ERR_DECODE (no PSB anywhere / decoder cannot be set up),
 * HTR_ERR_NOMEM, HTR_ERR_CANCELED, HTR_DECODE_GAVE_UP (cfg->walk only) or
 * a callback's value; message in @err.
 */
int htr_decode__run(const struct htr_decode_cfg *cfg, struct htr_image *img,
		    const struct htr_decode_sink *sink, struct htr_err *err);
/* Runs may decode over the same @img on several threads at once: each
 * decodes on sections of its own (htr_image__private()), so a trace
 * decodes the same way whatever ran before or alongside. */

#endif
