#include "ev.h"

static inline int apply_one(struct htr_tb *tb, const struct htr_ev *e)
{
	switch (e->type) {
	case HTR_EV_RUN: {
		int rc = htr_tb__run(tb, e->a, e->n, (enum htr_icls) e->cls,
				     e->b);

		return rc || !e->timed ? rc : htr_tb__time(tb, e->t);
	}
	case HTR_EV_RESUME:
		return htr_tb__resume(tb, e->a);
	case HTR_EV_GAP: {
		struct htr_decode_gap g;

		g.kind = e->kind;
		g.code = e->code;
		g.offset = e->a;
		g.ip = e->b;
		g.async = e->cls;
		return htr_tb__gap(tb, &g);
	}
	case HTR_EV_TIME:
		return htr_tb__time(tb, e->a);
	case HTR_EV_SYNC:
		return htr_tb__sync(tb, e->a);
	}
	return HTR_ERR_INVALID;
}

int htr_ev__apply(struct htr_tb *tb, const struct htr_ev *e)
{
	return apply_one(tb, e);
}

/* A batch at a time: a call and a switch an event in one loop (one call
 * through a pointer and two more an event, with the counting around
 * them, made a two-thread build of call-dense code 3 % longer). */
int htr_ev__apply_n(struct htr_tb *tb, const struct htr_ev *ev, size_t n)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++)
		if ((rc = apply_one(tb, &ev[i])) != 0)
			return rc;
	return 0;
}

/* One packer per decoder callback, handing each event to k->put. */
static int pack(void *ctx, uint8_t type, uint8_t cls, uint8_t kind,
		uint32_t n, uint64_t a, uint64_t b, int timed, uint64_t t)
{
	const struct htr_ev_sink *k = ctx;
	struct htr_ev e;

	htr_ev__fill(&e, type, cls, kind, n, a, b, timed, t);
	return k->put(k->ctx, &e);
}

static int on_run(void *ctx, uint64_t ip, uint32_t ninsn, enum htr_icls cls,
		  uint64_t ret_ip, int timed, uint64_t tsc)
{
	return pack(ctx, HTR_EV_RUN, (uint8_t) cls, 0, ninsn, ip, ret_ip,
		    timed, tsc);
}

static int on_resume(void *ctx, uint64_t ip)
{
	return pack(ctx, HTR_EV_RESUME, 0, 0, 0, ip, 0, 0, 0);
}

static int on_gap(void *ctx, const struct htr_decode_gap *g)
{
	return pack(ctx, HTR_EV_GAP, (uint8_t) g->async, (uint8_t) g->kind,
		    (uint32_t) g->code, g->offset, g->ip, 0, 0);
}

static int on_time(void *ctx, uint64_t tsc)
{
	return pack(ctx, HTR_EV_TIME, 0, 0, 0, tsc, 0, 0, 0);
}

static int on_sync(void *ctx, uint64_t offset)
{
	return pack(ctx, HTR_EV_SYNC, 0, 0, 0, offset, 0, 0, 0);
}

void htr_ev__sink(struct htr_decode_sink *sink, struct htr_ev_sink *k)
{
	sink->ctx = k;
	sink->run = on_run;
	sink->resume = on_resume;
	sink->gap = on_gap;
	sink->time = on_time;
	sink->sync = on_sync;
}
