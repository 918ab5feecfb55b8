#include "pipe.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* 4 MiB of events in flight at most, made as the trace needs them.  A
 * ring that stays in the caches costs the decoding thread more than it
 * saves: each line it writes was last read on the builder's core and must
 * be taken back from there (a 1 MiB ring made the decoding thread ~15 %
 * slower on 10^8 instructions, a third slower on the recorded spin loop,
 * tools/bench/build_speed.sh). */
#define NBATCH 32
#define BATCH 4096
/* A thread waiting on the other is woken when WAKE batches are ready for
 * it, not at each: a wake-up is a futex call and a context switch on both
 * sides, and one per batch was ~8,000 of each on 10^8 instructions. */
#define WAKE 8

struct htr_pipe {
	struct htr_tb *tb;
	struct htr_writer *w;
	pthread_t thread;
	int started, finished;
	pthread_mutex_t lock;
	pthread_cond_t not_empty, not_full;
	struct htr_ev *batch[NBATCH];
	uint32_t len[NBATCH];
	unsigned head, tail, count;   /* full batches: [head, head + count) */
	int done;                     /* no more batches will come */
	int err;                      /* the builder's first error */
	struct htr_ev *cur;           /* the producer's batch (= batch[tail]) */
	uint32_t ncur;
	uint64_t insns;               /* producer side */
	int (*progress)(void *ctx, uint64_t offset);
	void *progress_ctx;
	struct htr_ev_sink ek;        /* the decoder's sink packs into it */
	_Atomic uint64_t blocks;
};

int htr_ev__apply(struct htr_tb *tb, const struct htr_ev *e)
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

		g.kind = (int) e->n;
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

static void *builder_main(void *arg)
{
	struct htr_pipe *p = arg;

	for (;;) {
		const struct htr_ev *evs;
		uint32_t n, i;
		int err;

		pthread_mutex_lock(&p->lock);
		while (!p->count && !p->done)
			pthread_cond_wait(&p->not_empty, &p->lock);
		if (!p->count) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		evs = p->batch[p->head];
		n = p->len[p->head];
		err = p->err;
		pthread_mutex_unlock(&p->lock);

		/* After an error, batches are drained unread so the decoding
		 * thread never waits for room that will not come. */
		for (i = 0; !err && i < n; i++)
			err = htr_ev__apply(p->tb, &evs[i]);
		atomic_store_explicit(&p->blocks, htr_writer__nblocks(p->w),
				      memory_order_relaxed);

		pthread_mutex_lock(&p->lock);
		if (err && !p->err)
			p->err = err;
		p->head = (p->head + 1) % NBATCH;
		p->count--;
		if (p->count <= NBATCH - WAKE)
			pthread_cond_signal(&p->not_full);
		pthread_mutex_unlock(&p->lock);
	}
}

/* Hand the current batch to the builder thread; take the next one if
 * @more are to come. */
static int publish(struct htr_pipe *p, int more)
{
	int err;

	pthread_mutex_lock(&p->lock);
	p->len[p->tail] = p->ncur;
	p->tail = (p->tail + 1) % NBATCH;
	p->count++;
	if (p->count >= WAKE)
		pthread_cond_signal(&p->not_empty);
	while (p->count == NBATCH)
		pthread_cond_wait(&p->not_full, &p->lock);
	err = p->err;
	pthread_mutex_unlock(&p->lock);
	/* Batches are made as the trace needs them: a small one, one. */
	if (!err && more && !p->batch[p->tail] &&
	    !(p->batch[p->tail] = malloc(BATCH * sizeof(struct htr_ev))))
		err = HTR_ERR_NOMEM;
	p->cur = p->batch[p->tail];
	p->ncur = 0;
	return err;
}

/* One packer per decoder callback, handing each event to k->put. */
static int pack(void *ctx, uint8_t type, uint8_t cls, uint32_t n, uint64_t a,
		uint64_t b, int32_t code, int timed, uint64_t t)
{
	const struct htr_ev_sink *k = ctx;
	struct htr_ev e;

	e.type = type;
	e.cls = cls;
	e.timed = (uint8_t) timed;
	e.n = n;
	e.a = a;
	e.b = b;
	e.code = code;
	e.t = timed ? t : 0;
	return k->put(k->ctx, &e);
}

static int on_run(void *ctx, uint64_t ip, uint32_t ninsn, enum htr_icls cls,
		  uint64_t ret_ip, int timed, uint64_t tsc)
{
	return pack(ctx, HTR_EV_RUN, (uint8_t) cls, ninsn, ip, ret_ip, 0,
		    timed, tsc);
}

static int on_resume(void *ctx, uint64_t ip)
{
	return pack(ctx, HTR_EV_RESUME, 0, 0, ip, 0, 0, 0, 0);
}

static int on_gap(void *ctx, const struct htr_decode_gap *g)
{
	return pack(ctx, HTR_EV_GAP, (uint8_t) g->async, (uint32_t) g->kind,
		    g->offset, g->ip, g->code, 0, 0);
}

static int on_time(void *ctx, uint64_t tsc)
{
	return pack(ctx, HTR_EV_TIME, 0, 0, tsc, 0, 0, 0, 0);
}

static int on_sync(void *ctx, uint64_t offset)
{
	return pack(ctx, HTR_EV_SYNC, 0, 0, offset, 0, 0, 0, 0);
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

static int put(void *ctx, const struct htr_ev *e)
{
	struct htr_pipe *p = ctx;

	if (!p->cur)
		return HTR_ERR_NOMEM;   /* publish() could not make a batch */
	if (e->type == HTR_EV_RUN)
		p->insns += e->n;
	p->cur[p->ncur++] = *e;
	return p->ncur == BATCH ? publish(p, 1) : 0;
}

static int on_progress(void *ctx, uint64_t offset)
{
	const struct htr_ev_sink *k = ctx;
	struct htr_pipe *p = k->ctx;

	return p->progress ? p->progress(p->progress_ctx, offset) : 0;
}

uint64_t htr_pipe__insns(const struct htr_pipe *p)
{
	return p->insns;
}

void htr_pipe__sink(struct htr_pipe *p, struct htr_decode_sink *sink,
		    int (*progress)(void *ctx, uint64_t offset), void *ctx)
{
	p->progress = progress;
	p->progress_ctx = ctx;
	p->ek.put = put;
	p->ek.ctx = p;
	htr_ev__sink(sink, &p->ek);
	sink->progress = on_progress;
}

int htr_pipe__start(struct htr_pipe **out, struct htr_tb *tb,
		    struct htr_writer *w)
{
	struct htr_pipe *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return HTR_ERR_NOMEM;
	p->batch[0] = malloc(BATCH * sizeof(struct htr_ev));
	if (!p->batch[0]) {
		free(p);
		return HTR_ERR_NOMEM;
	}
	p->tb = tb;
	p->w = w;
	p->cur = p->batch[0];
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->not_empty, NULL);
	pthread_cond_init(&p->not_full, NULL);
	if (pthread_create(&p->thread, NULL, builder_main, p) != 0) {
		htr_pipe__free(p);
		return HTR_ERR_IO;
	}
	p->started = 1;
	*out = p;
	return 0;
}

uint64_t htr_pipe__blocks(const struct htr_pipe *p)
{
	return atomic_load_explicit(&((struct htr_pipe *) p)->blocks,
				    memory_order_relaxed);
}

int htr_pipe__finish(struct htr_pipe *p)
{
	int err = 0;

	if (p->finished)
		return p->err;
	if (p->ncur)
		err = publish(p, 0);
	pthread_mutex_lock(&p->lock);
	p->done = 1;
	pthread_cond_signal(&p->not_empty);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	p->finished = 1;
	return err ? err : p->err;
}

void htr_pipe__free(struct htr_pipe *p)
{
	int i;

	if (!p)
		return;
	if (p->started && !p->finished) {
		p->ncur = 0;            /* drop what was not handed over */
		htr_pipe__finish(p);
	}
	if (p->started) {
		pthread_mutex_destroy(&p->lock);
		pthread_cond_destroy(&p->not_empty);
		pthread_cond_destroy(&p->not_full);
	}
	for (i = 0; i < NBATCH; i++)
		free(p->batch[i]);
	free(p);
}
