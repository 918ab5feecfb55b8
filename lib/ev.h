/*
 * Decoder events, packed: parallel decoding queues them in batches from
 * the decoding threads to the one that builds the tree, CPU-wide builds
 * spool them to a file.
 */
#ifndef HTR_LIB_EV_H
#define HTR_LIB_EV_H

#include "treebuild.h"

#include <stdint.h>

/* A decoder event, packed. */
enum htr_ev_type {
	HTR_EV_RUN, HTR_EV_RESUME, HTR_EV_GAP, HTR_EV_TIME, HTR_EV_SYNC,
};

struct htr_ev {
	uint8_t type;              /* enum htr_ev_type */
	uint8_t cls;               /* run: enum htr_icls; gap: async */
	uint8_t timed;             /* run: @t is the time after it */
	uint8_t kind;              /* gap: enum htr_gap_kind */
	union {
		uint32_t n;        /* run: instructions */
		int32_t code;      /* gap: code */
	};
	uint64_t a, b;             /* run: ip, ret_ip; resume: ip; gap:
				    * offset, ip; time: tsc; sync: offset */
	uint64_t t;                /* run: as a time event after it would
				    * say (most runs have one) */
};

/* Half a cache line: the events of call-dense code cross between cores
 * at a few hundred MB/s. */
_Static_assert(sizeof(struct htr_ev) == 32, "events are 32 bytes");

/* Fill @e (@n: a gap's code, as a 32-bit pattern). */
static inline void htr_ev__fill(struct htr_ev *e, uint8_t type, uint8_t cls,
				uint8_t kind, uint32_t n, uint64_t a,
				uint64_t b, int timed, uint64_t t)
{
	e->type = type;
	e->cls = cls;
	e->timed = (uint8_t) timed;
	e->kind = kind;
	e->n = n;
	e->a = a;
	e->b = b;
	e->t = timed ? t : 0;
}

/* Feed @e to @tb.  Returns the builder's result. */
int htr_ev__apply(struct htr_tb *tb, const struct htr_ev *e);

/* Feed @ev[0..@n) to @tb in order, up to the first that fails.  Returns
 * 0 or that one's result. */
int htr_ev__apply_n(struct htr_tb *tb, const struct htr_ev *ev, size_t n);

/* Where a packing sink hands its events. */
struct htr_ev_sink {
	int (*put)(void *ctx, const struct htr_ev *e);
	void *ctx;
};

/* Set @sink's run, resume, gap, time and sync callbacks to pack each
 * event and hand it to @k (ctx = @k, which must outlive the sink). */
void htr_ev__sink(struct htr_decode_sink *sink, struct htr_ev_sink *k);

#endif
