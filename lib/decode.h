/*
 * Decoder: runs libipt's block decoder over a trace and reports what the
 * builder needs, through a sink of callbacks.  It knows nothing about
 * trees; libipt's error codes never leave this module (they are stored as
 * plain ints in gap records only).
 */
#ifndef HTR_LIB_DECODE_H
#define HTR_LIB_DECODE_H

#include "err.h"

#include <stdint.h>

struct htr_image;   /* lib/image.h */

/* Class of the last instruction of a run. */
enum htr_icls {
	HTR_IC_OTHER = 0,     /* anything that neither enters nor leaves a frame */
	HTR_IC_CALL,          /* near call: the next run starts in the callee */
	HTR_IC_RET,           /* near return */
	HTR_IC_FAR_CALL,      /* far call, syscall, interrupt entry (async
			       * branches are reported with .far_call) */
	HTR_IC_FAR_RET,       /* far return, iret, sysret, sysexit */
};

struct htr_decode_sink {
	void *ctx;
	/* @ninsn (>= 1) instructions ran, the first at @ip; the last is of
	 * class @cls.  Every instruction the decoder delivers is in exactly
	 * one run, in order. */
	int (*run)(void *ctx, uint64_t ip, uint32_t ninsn, enum htr_icls cls);
	/* Decoding (re)starts: the next run begins at @ip.  Called once at
	 * the start and after every gap that the decoder could resume from. */
	int (*resume)(void *ctx, uint64_t ip);
	/* Instructions were lost before the next run (enum htr_gap_kind in
	 * htr/tree.h; @offset is the trace offset, @code libipt's error for
	 * HTR_GAP_ERROR).  A disable is reported as a gap only when tracing
	 * is re-enabled later, or when it was asynchronous (FUP + TIP.PGD). */
	int (*gap)(void *ctx, int kind, uint64_t offset, int code);
	/* The decoder's time changed; it applies from the last instruction
	 * of the previous run on. */
	int (*time)(void *ctx, uint64_t tsc);
	/* The decoder passed a PSB at @offset; the next run follows it. */
	int (*sync)(void *ctx, uint64_t offset);
	/* Roughly every 2^20 instructions: bytes of trace consumed; a
	 * non-zero return cancels (htr_decode__run returns HTR_ERR_CANCELED). */
	int (*progress)(void *ctx, uint64_t offset);
};

struct htr_decode_cfg {
	const uint8_t *trace;      /* the raw trace (mapped by the caller) */
	uint64_t size;
	int cpu_family, cpu_model, cpu_stepping;   /* 0: no errata */
	uint32_t cpuid_0x15_eax, cpuid_0x15_ebx;
	uint8_t mtc_freq, nom_freq;
};

/*
 * Decode the whole trace.  A callback returning non-zero stops decoding and
 * that value is returned.  Bad trace data never fails the run: it becomes an
 * HTR_GAP_ERROR gap and decoding resumes at the next PSB.
 * Returns 0, HTR_ERR_DECODE (no PSB anywhere / decoder cannot be set up),
 * HTR_ERR_NOMEM, HTR_ERR_CANCELED or a callback's value; message in @err.
 */
int htr_decode__run(const struct htr_decode_cfg *cfg, struct htr_image *img,
		    const struct htr_decode_sink *sink, struct htr_err *err);

#endif
