/*
 * Pipe: runs the tree builder on a second thread.  The decoding thread
 * packs each decoder event into a batch; full batches go to the builder
 * thread through a small ring (4 batches of 8192 events, 1 MiB), so
 * decoding and building/writing overlap on two cores and memory stays
 * bounded.  Only the builder thread touches the builder and its writer
 * until htr_pipe__finish() returns.
 */
#ifndef HTR_LIB_PIPE_H
#define HTR_LIB_PIPE_H

#include "treebuild.h"

#include <stdint.h>

struct htr_pipe;

/* A decoder event, packed: the pipe's batches hold them, CPU-wide builds
 * spool them to a file. */
enum htr_ev_type {
	HTR_EV_RUN, HTR_EV_RESUME, HTR_EV_GAP, HTR_EV_TIME, HTR_EV_SYNC,
};

struct htr_ev {
	uint8_t type;              /* enum htr_ev_type */
	uint8_t cls;               /* run: enum htr_icls; gap: async */
	uint8_t timed;             /* run: @t is the time after it */
	int32_t code;              /* gap: code */
	uint32_t n;                /* run: instructions; gap: kind */
	uint64_t a, b;             /* run: ip, ret_ip; resume: ip; gap:
				    * offset, ip; time: tsc; sync: offset */
	uint64_t t;                /* run: as a time event after it would
				    * say (most runs have one) */
};

/* Feed @e to @tb.  Returns the builder's result. */
int htr_ev__apply(struct htr_tb *tb, const struct htr_ev *e);

/* Where a packing sink hands its events. */
struct htr_ev_sink {
	int (*put)(void *ctx, const struct htr_ev *e);
	void *ctx;
};

/* Set @sink's run, resume, gap, time and sync callbacks to pack each
 * event and hand it to @k (ctx = @k, which must outlive the sink). */
void htr_ev__sink(struct htr_decode_sink *sink, struct htr_ev_sink *k);

/* Start the builder thread on @tb.  Returns 0, HTR_ERR_NOMEM or
 * HTR_ERR_IO (no thread). */
int htr_pipe__start(struct htr_pipe **out, struct htr_tb *tb,
		    struct htr_writer *w);

/* The decoder's sink, feeding @p (ctx = @p): the callbacks queue the event
 * and return the builder's first error, if any, to stop decoding.  The
 * decoder's progress reports go to @progress(@ctx, offset), on the
 * decoding thread. */
void htr_pipe__sink(struct htr_pipe *p, struct htr_decode_sink *sink,
		    int (*progress)(void *ctx, uint64_t offset), void *ctx);

/* Instructions queued so far (decoding thread only). */
uint64_t htr_pipe__insns(const struct htr_pipe *p);

/* Blocks written so far (read from any thread; approximate). */
uint64_t htr_pipe__blocks(const struct htr_pipe *p);

/* Hand over what is queued, wait for the builder thread and stop it.
 * Returns the builder's first error or 0. */
int htr_pipe__finish(struct htr_pipe *p);

/* Stop (if still running) and free.  NULL is fine. */
void htr_pipe__free(struct htr_pipe *p);

#endif
