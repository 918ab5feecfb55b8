/* Parallel decoding across PSB segments (see pdecode.h). */
#define _GNU_SOURCE     /* sched_getcpu, pthread_attr_setaffinity_np */
#include "pdecode.h"

#include "htr/tree.h"
#include "le.h"
#include "walk.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define BATCH 4096u               /* events per batch (128 KiB) */
#define CHUNK_BATCHES 48u         /* full batches a chunk may hold before
				   * its decoder waits for the consumer
				   * (6 MiB; a default chunk makes at most
				   * 3/4 of it, CHUNK_EVENTS) */
/* The default chunk sizes.  Each chunk decodes a PSB interval or two
 * twice (the warm-up before its start, the seam past its end), so fewer,
 * larger chunks cost less; but a chunk's events wait in memory until the
 * tree builder reaches them (CHUNK_BATCHES batches, then its decoder
 * waits), and the last chunks must be small for the threads to finish
 * together.  So a chunk is 1/CHUNK_SHARE of what is left of the trace a
 * thread, at most what makes CHUNK_EVENTS events at the rate the chunks
 * decoded so far made them, within CHUNK_MIN and CHUNK_MAX; before any
 * rate is known, 1/CHUNK_FIRST of the trace a thread.  (10^7
 * instructions in 2.3 MB: 15 chunks, where 32 of 1/CHUNK_FIRST made -j2
 * do 5 % more work; a recording of call-dense code, 3.4 MB: without the
 * event bound its decoder waited for the builder a fifth of the time.) */
#define CHUNK_MAX (256u << 10)
#define CHUNK_MIN (64u << 10)
#define CHUNK_SHARE 2
#define CHUNK_FIRST 16
#define CHUNK_EVENTS (CHUNK_BATCHES * BATCH * 3 / 4)
#define STOP 1                    /* a chunk's decoder reached the next */
#define REPORT_BATCHES 8u         /* batches between progress reports */
#define NONE UINT64_MAX

struct batch {
	struct batch *next;
	uint32_t n;
	uint64_t sync;                /* its last sync's offset (NONE: none) */
	struct htr_ev ev[BATCH];
};

struct pdec;

/* The events of one PSB interval as a decoder saw them: from the first
 * sync at or after a chunk boundary up to the next sync. */
struct seam {
	uint64_t from, to;            /* the two syncs' offsets; NONE: none
				       * (from) or the end of the trace (to) */
	uint64_t hash, count;
	int done;
};

struct chunk {
	struct htr_ev_sink ek;        /* first: the decoder's sink context */
	struct pdec *p;
	uint64_t begin;               /* the decoder starts at this PSB */
	uint64_t start, end;          /* report from the PSB at start up to
				       * the one at end (NONE: the last) */
	int on;                       /* reporting (decoder thread only) */
	int past;                     /* past end: hashing the seam */
	int fast;                     /* on, not past, no seam to hash: a run
				       * goes straight into the batch */
	struct seam head, tail;       /* the interval at start (reported),
				       * the one at end (not reported) */
	struct batch *cur;            /* being filled (decoder thread only) */
	struct batch *full, *last;    /* full batches, oldest first */
	unsigned nfull;
	uint64_t nev;                 /* events queued so far */
	int done, rc;
	int mine;                     /* the consuming thread decodes it */
	_Atomic uint64_t at;          /* the decoder's last offset */
	struct htr_err err;
};

/* The calling thread: it takes the events in order and, when none are
 * ready, decodes a chunk itself. */
struct consumer {
	int (*apply)(void *ctx, const struct htr_ev *ev, size_t n);
	int (*progress)(void *ctx, uint64_t offset);
	void *ctx;
	uint64_t batches, offset;
	struct seam last;             /* the tail of the last chunk taken */
	int checked;                  /* the head chunk's start agrees */
	int rc;                       /* why a drain stopped everything */
	struct htr_walk *walk;        /* its decoder, chunk to chunk */
	struct htr_err *err;
};

struct pdec {
	const struct htr_decode_cfg *cfg;
	struct consumer *k;
	struct htr_image *img;
	uint64_t chunk;               /* the caller's size; 0: see CHUNK_MAX */
	unsigned threads;
	uint64_t done_bytes, done_events;   /* of the chunks decoded */
	pthread_mutex_t lock;
	pthread_cond_t cond;          /* any change; waiters re-check */
	struct chunk *ring;           /* chunk k in ring[k % window] */
	unsigned window;
	uint64_t assigned;            /* chunks handed out */
	uint64_t head;                /* the chunk being consumed */
	uint64_t next_start;          /* where the next chunk starts (NONE:
				       * all handed out) */
	uint64_t prev_start;
	uint64_t first;               /* the trace's first PSB */
	atomic_int stop;
	atomic_int diverged;          /* a chunk cannot be trusted */
	void (*spare)(void *ctx);     /* the caller's work for an idle
				       * helper (NULL: none, or taken) */
	struct batch *free, *free_last;   /* oldest first: see put_batch */
	/* Room for as many batches as can be in use at once, allocated
	 * once: its pages are touched only as batches are first used, and
	 * freeing it is one munmap where a malloc per batch made ~100 at the
	 * end of a build (1-2 ms a build, with nothing else running). */
	struct batch *arena;
	size_t arena_n, arena_used;
};

/* An empty batch.  Only the taking is under the lock: the first touch of
 * an arena batch is a page fault, which zeroes a huge page (with the lock
 * held, the other thread waited for it, and on a VM was then woken late:
 * 0.1 to 4 ms at the start of a build). */
static struct batch *get_batch(struct pdec *p)
{
	struct batch *b;

	pthread_mutex_lock(&p->lock);
	b = p->free;
	if (b) {
		p->free = b->next;
		if (!p->free)
			p->free_last = NULL;
	} else if (p->arena_used < p->arena_n) {
		b = &p->arena[p->arena_used++];
	}
	pthread_mutex_unlock(&p->lock);
	if (!b && !(b = malloc(sizeof(*b))))
		return NULL;
	b->next = NULL;
	b->n = 0;
	b->sync = NONE;
	return b;
}

/* A consumed batch goes to the back of the free list (the lock held): the
 * one taken next is the one consumed longest ago, out of this core's
 * caches by then, so the decoding thread that fills it need not take its
 * lines back from here (when the two threads' batches were a small ring
 * that stayed in the caches, that made the decoding thread 15 % slower
 * on 10^8 instructions, a third slower on a recorded spin loop). */
static void put_batch(struct pdec *p, struct batch *b)
{
	b->next = NULL;
	if (p->free_last)
		p->free_last->next = b;
	else
		p->free = b;
	p->free_last = b;
}

static void free_batch(const struct pdec *p, struct batch *b)
{
	uintptr_t a = (uintptr_t) p->arena, x = (uintptr_t) b;

	if (x < a || x >= a + p->arena_n * sizeof(*b))
		free(b);
}

static void queue(struct chunk *c)
{
#if defined(__x86_64__)
	/* The batch's streamed runs (put_run()) land before the consumer
	 * may see it. */
	_mm_sfence();
#endif
	if (c->last)
		c->last->next = c->cur;
	else
		c->full = c->cur;
	c->last = c->cur;
	c->nfull++;
	c->nev += c->cur->n;
	c->cur = NULL;
}

static int consume_all(struct pdec *p, struct consumer *k,
		       const struct chunk *own);

/* Hand a full batch to the consumer; wait while the chunk holds too many
 * (the consumer drains only the chunk it is at, so only a batch of that
 * chunk is worth waking it for: the others were a futex call and two
 * context switches each for nothing).  The consumer's own chunk cannot
 * wait for it: it takes the events up to its own instead. */
static int publish(struct chunk *c)
{
	struct pdec *p = c->p;
	int stop, rc;

	pthread_mutex_lock(&p->lock);
	queue(c);
	if (c == &p->ring[p->head % p->window])
		pthread_cond_broadcast(&p->cond);
	if (c->mine && c->nfull >= CHUNK_BATCHES &&
	    (rc = consume_all(p, p->k, c)) != 0) {
		p->k->rc = rc;
		atomic_store(&p->stop, 1);
		pthread_cond_broadcast(&p->cond);
	}
	while (c->nfull >= CHUNK_BATCHES && !atomic_load(&p->stop))
		pthread_cond_wait(&p->cond, &p->lock);
	stop = atomic_load(&p->stop);
	pthread_mutex_unlock(&p->lock);
	return stop ? HTR_ERR_CANCELED : 0;
}

/* An event's first eight bytes as one word (as they lie in memory on a
 * little-endian machine): what a seam hashes, what put_run() streams. */
static inline uint64_t ev_head(uint8_t type, uint8_t cls, uint8_t timed,
			       uint8_t kind, uint32_t n)
{
	return type | (uint64_t) cls << 8 | (uint64_t) timed << 16 |
	       (uint64_t) kind << 24 | (uint64_t) n << 32;
}

/* Add @e to @sm: the fields, not the padding between them. */
static void seam_add(struct seam *sm, const struct htr_ev *e)
{
	uint64_t w[4];

	w[0] = ev_head(e->type, e->cls, e->timed, e->kind, e->n);
	w[1] = e->a;
	w[2] = e->b;
	w[3] = e->t;
	sm->hash = htr_hash__bytes(sm->hash, w, sizeof(w));
	sm->count++;
}

/* The seam is complete: wake a consumer waiting to compare it. */
static void seam_done(struct chunk *c, struct seam *sm, uint64_t to)
{
	pthread_mutex_lock(&c->p->lock);
	sm->to = to;
	sm->done = 1;
	pthread_cond_broadcast(&c->p->cond);
	pthread_mutex_unlock(&c->p->lock);
}

static int chunk_put(void *ctx, const struct htr_ev *e)
{
	struct chunk *c = ctx;

	/* A decoder that started at a PSB other than the first cannot know
	 * what came before (a fuzzed trace may return to a call made before
	 * the PSB): past an error that history may explain, its events are
	 * not the one-thread decoder's. */
	if (e->type == HTR_EV_GAP && e->kind == HTR_GAP_ERROR &&
	    c->begin > c->p->first && !htr_decode__error_is_local(e->code))
		atomic_store(&c->p->diverged, 1);
	if (e->type == HTR_EV_SYNC) {
		if (c->past) {
			/* The interval after the boundary is hashed: done. */
			seam_done(c, &c->tail, e->a);
			return STOP;
		}
		if (c->on && !c->head.done && c->head.from != NONE)
			seam_done(c, &c->head, e->a);
		if (e->a >= c->end) {
			c->past = 1;
			c->tail.from = e->a;
		} else if (!c->on && e->a >= c->start) {
			c->on = 1;
			c->head.from = e->a;
		}
		c->fast = c->on && !c->past &&
			  (c->head.done || c->head.from == NONE);
	}
	if (c->past) {
		seam_add(&c->tail, e);
		return 0;
	}
	if (!c->on)
		return 0;
	if (!c->head.done && c->head.from != NONE)
		seam_add(&c->head, e);
	if (!c->cur) {
		c->cur = get_batch(c->p);
		if (!c->cur)
			return HTR_ERR_NOMEM;
	}
	c->cur->ev[c->cur->n++] = *e;
	if (e->type == HTR_EV_SYNC)
		c->cur->sync = e->a;
	return c->cur->n == BATCH ? publish(c) : 0;
}

/* Write a run into @e, as htr_ev__fill() would.  On x86-64 the stores
 * stream past the caches: a batch is next touched by the consumer, most
 * often on another core, and ordinary stores first fetched each line of
 * it from where the consumer had left it (where the two processors share
 * no cache, -j2 on call-dense code waited on them: 14 % of its time). */
static inline void put_run(struct htr_ev *e, uint8_t cls, uint32_t ninsn,
			   uint64_t ip, uint64_t ret_ip, int timed,
			   uint64_t tsc)
{
#if defined(__x86_64__)
	long long *w = (long long *) (void *) e;

	_Static_assert(offsetof(struct htr_ev, n) == 4 &&
		       offsetof(struct htr_ev, a) == 8 &&
		       offsetof(struct htr_ev, b) == 16 &&
		       offsetof(struct htr_ev, t) == 24,
		       "events are four words");
	_mm_stream_si64(w, (long long) ev_head(HTR_EV_RUN, cls,
					       (uint8_t) (timed != 0), 0,
					       ninsn));
	_mm_stream_si64(w + 1, (long long) ip);
	_mm_stream_si64(w + 2, (long long) ret_ip);
	_mm_stream_si64(w + 3, (long long) (timed ? tsc : 0));
#else
	htr_ev__fill(e, HTR_EV_RUN, cls, 0, ninsn, ip, ret_ip, timed, tsc);
#endif
}

/* Most events are runs inside the chunk: filled in place in the batch.
 * Made on the stack and copied there, each was read back before its
 * narrow stores had landed (a store-forwarding stall: chunk_put was 6 %
 * of a two-thread build on call-dense code). */
static int chunk_run(void *ctx, uint64_t ip, uint32_t ninsn,
		     enum htr_icls cls, uint64_t ret_ip, int timed,
		     uint64_t tsc)
{
	struct chunk *c = ctx;
	struct htr_ev e;

	if (c->fast && c->cur) {
		put_run(&c->cur->ev[c->cur->n++], (uint8_t) cls, ninsn, ip,
			ret_ip, timed, tsc);
		return c->cur->n == BATCH ? publish(c) : 0;
	}
	htr_ev__fill(&e, HTR_EV_RUN, (uint8_t) cls, 0, ninsn, ip, ret_ip,
		     timed, tsc);
	return chunk_put(c, &e);
}

static int chunk_progress(void *ctx, uint64_t offset)
{
	struct chunk *c = ctx;
	struct pdec *p = c->p;
	struct consumer *k = p->k;

	atomic_store_explicit(&c->at, offset, memory_order_relaxed);
	/* While the calling thread decodes (a long search for a PSB says
	 * nothing through the events), its caller still hears from it and
	 * may cancel: at the offset taken so far, not this chunk's, which is
	 * ahead of chunks still being decoded. */
	if (c->mine && k->progress && k->progress(k->ctx, k->offset)) {
		pthread_mutex_lock(&p->lock);
		k->rc = HTR_ERR_CANCELED;
		atomic_store(&p->stop, 1);
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
	}
	return atomic_load(&p->stop) ? HTR_ERR_CANCELED : 0;
}

static uint64_t psb_from(const struct htr_decode_cfg *cfg, uint64_t from)
{
	return from >= cfg->size ? NONE
				 : htr_decode__psb_after(cfg->trace, cfg->size,
							 from);
}

/* The size of the chunk at @start (lock held). */
static uint64_t chunk_len(const struct pdec *p, uint64_t start)
{
	uint64_t n, most = CHUNK_MAX;

	if (p->chunk)
		return p->chunk;
	if (!p->done_events) {
		n = p->cfg->size / (p->threads * CHUNK_FIRST);
	} else {
		n = (p->cfg->size - start) / (CHUNK_SHARE * p->threads);
		if (p->done_events > CHUNK_EVENTS * p->done_bytes / CHUNK_MAX)
			most = CHUNK_EVENTS * p->done_bytes / p->done_events;
	}
	if (n > most)
		n = most;
	return n < CHUNK_MIN ? CHUNK_MIN : n;
}

/* Hand out the next chunk (lock held). */
static struct chunk *take_chunk(struct pdec *p)
{
	uint64_t k = p->assigned++, start = p->next_start, w;
	struct chunk *c = &p->ring[k % p->window];

	memset(c, 0, sizeof(*c));
	c->p = p;
	c->head.from = c->tail.from = c->head.to = c->tail.to = NONE;
	c->head.hash = c->tail.hash = HTR_HASH_SEED;
	c->start = start;
	c->end = psb_from(p->cfg, start + chunk_len(p, start));
	c->at = start;
	if (k == 0) {
		c->begin = 0;
		c->on = c->fast = 1;
	} else {
		/* The warm-up starts at the PSB before this chunk's; the
		 * previous chunk's start is one, if none is nearer. */
		w = htr_decode__psb_before(p->cfg->trace, p->cfg->size, start,
					   p->prev_start);
		c->begin = w != NONE ? w : p->prev_start;
	}
	p->prev_start = start;
	p->next_start = c->end;
	return c;
}

static int decode_chunk(struct pdec *p, struct chunk *c,
			struct htr_walk **walk)
{
	struct htr_decode_cfg cfg = *p->cfg;
	struct htr_decode_sink sink;

	cfg.begin = c->begin;
	cfg.keep = walk;
	c->ek.put = chunk_put;
	c->ek.ctx = c;
	memset(&sink, 0, sizeof(sink));
	htr_ev__sink(&sink, &c->ek);     /* sink.ctx = &c->ek = c */
	sink.run = chunk_run;
	sink.progress = chunk_progress;
	return htr_decode__run(&cfg, p->img, &sink, &c->err);
}

/* @c's decoder returned @rc (lock held). */
static void chunk_done(struct chunk *c, int rc)
{
	if (c->cur)
		queue(c);
	/* A seam the trace's end cut short ends there. */
	c->head.done = c->tail.done = 1;
	c->done = 1;
	c->rc = rc == STOP ? 0 : rc;
	if (!c->rc) {
		struct pdec *p = c->p;

		p->done_bytes += (c->end == NONE ? p->cfg->size : c->end) -
				 c->start;
		p->done_events += c->nev;
	}
	pthread_cond_broadcast(&c->p->cond);
}

/* Whether a chunk may be handed out (lock held). */
static int can_take(const struct pdec *p)
{
	return !atomic_load(&p->stop) && p->next_start != NONE &&
	       p->assigned < p->head + p->window;
}

static void *worker(void *arg)
{
	struct pdec *p = arg;
	struct htr_walk *walk = NULL;   /* this thread's, chunk to chunk */

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct chunk *c;
		int rc;

		while (!can_take(p) && !atomic_load(&p->stop) &&
		       p->next_start != NONE)
			pthread_cond_wait(&p->cond, &p->lock);
		if (atomic_load(&p->stop))
			break;
		if (p->next_start == NONE) {
			/* Nothing left to hand out: while the others finish
			 * (the consumer drains the last chunks alone), do
			 * what the caller would do after, on one core. */
			void (*spare)(void *ctx) = p->spare;

			if (!spare)
				break;
			p->spare = NULL;
			pthread_mutex_unlock(&p->lock);
			spare(p->k->ctx);
			pthread_mutex_lock(&p->lock);
			break;
		}
		c = take_chunk(p);
		pthread_mutex_unlock(&p->lock);
		rc = decode_chunk(p, c, &walk);
		pthread_mutex_lock(&p->lock);
		chunk_done(c, rc);
	}
	pthread_mutex_unlock(&p->lock);
	htr_walk__free(walk);
	return NULL;
}

/* The batches' arena is backed by huge pages where the system gives them
 * (transparent huge pages, on request): a two-thread build fills each
 * batch afresh once (they are taken oldest first) and then frees them;
 * in 4 KiB pages that was a page fault per 4 KiB and, at the end, the
 * unmapping of them all, serially, after the decoding (on a recorded
 * spin loop, 3.4 MB of trace: ~3000 faults and 1.5 ms at the end, where
 * its two-thread build takes ~110 ms). */
#define ARENA_ALIGN (2u << 20)

static size_t arena_len(size_t n)
{
	return (n * sizeof(struct batch) + ARENA_ALIGN - 1) / ARENA_ALIGN *
	       ARENA_ALIGN;
}

/* Room for @n batches, aligned to ARENA_ALIGN; NULL if none. */
static struct batch *arena_alloc(size_t n)
{
	size_t len = arena_len(n) + ARENA_ALIGN;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t a, end;

	if (m == MAP_FAILED)
		return NULL;
	a = ((uintptr_t) m + ARENA_ALIGN - 1) &
	    ~(uintptr_t) (ARENA_ALIGN - 1);
	end = a + arena_len(n);
	if (a > (uintptr_t) m)
		munmap(m, a - (uintptr_t) m);
	if ((uintptr_t) m + len > end)
		munmap((void *) end, (uintptr_t) m + len - end);
#ifdef MADV_HUGEPAGE
	(void) madvise((void *) a, end - a, MADV_HUGEPAGE);
#endif
	return (struct batch *) a;
}

static void arena_free(struct batch *a, size_t n)
{
	if (a)
		munmap(a, arena_len(n));
}

#ifdef __linux__
struct spawn {
	void *(*fn)(void *);
	void *arg;
	cpu_set_t cpus;               /* the process's, given back */
};

static void *spawned(void *arg)
{
	struct spawn s = *(struct spawn *) arg;

	free(arg);
	(void) pthread_setaffinity_np(pthread_self(), sizeof(s.cpus), &s.cpus);
	return s.fn(s.arg);
}
#endif

/* The lock is held for a few instructions at a time, but often: a thread
 * that finds it taken spins a little before it sleeps (a thread that
 * sleeps may be woken on the other's processor, behind it, while its own
 * stays idle: on a 2-processor VM, up to 4 ms). */
static void init_lock(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	if (pthread_mutexattr_init(&a) != 0) {
		pthread_mutex_init(m, NULL);
		return;
	}
#ifdef PTHREAD_MUTEX_ADAPTIVE_NP
	(void) pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

int htr_pdecode__spawn(pthread_t *t, void *(*fn)(void *), void *arg,
		       unsigned nth)
{
#ifdef __linux__
	pthread_attr_t attr;
	struct spawn *s;
	cpu_set_t one;
	int here = sched_getcpu(), cpu, n, rc;

	/* The nth processor after this one that the process may use, on
	 * which the thread starts; then it may run on any of them. */
	if (here < 0 || !(s = malloc(sizeof(*s))))
		return pthread_create(t, NULL, fn, arg);
	s->fn = fn;
	s->arg = arg;
	n = sched_getaffinity(0, sizeof(s->cpus), &s->cpus) == 0 ?
	    CPU_COUNT(&s->cpus) : 0;
	if (n < 2 || nth % (unsigned) n == 0 || pthread_attr_init(&attr)) {
		free(s);
		return pthread_create(t, NULL, fn, arg);
	}
	for (cpu = here, nth %= (unsigned) n; nth; nth--)
		do
			cpu = (cpu + 1) % CPU_SETSIZE;
		while (!CPU_ISSET(cpu, &s->cpus));
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	rc = pthread_attr_setaffinity_np(&attr, sizeof(one), &one) ? -1 :
	     pthread_create(t, &attr, spawned, s);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		return 0;
	free(s);
#else
	(void) nth;
#endif
	return pthread_create(t, NULL, fn, arg);
}

static int consume(struct consumer *k, const struct batch *b)
{
	int rc = k->apply(k->ctx, b->ev, b->n);

	if (rc)
		return rc;
	if (b->sync != NONE)
		k->offset = b->sync;
	if (++k->batches % REPORT_BATCHES == 0 && k->progress &&
	    k->progress(k->ctx, k->offset))
		return HTR_ERR_CANCELED;
	return 0;
}

static int seam_eq(const struct seam *a, const struct seam *b)
{
	return a->from == b->from && a->to == b->to && a->hash == b->hash &&
	       a->count == b->count;
}

/* Take the events chunk by chunk, in order (lock held on entry and exit).
 * Before a chunk's events are taken, the interval they begin with is
 * compared with the same interval as the previous chunk's decoder saw it
 * (past its end): they must agree, or the chunks do not join up.  With
 * nothing ready, decode the next chunk here.  With @own (this thread's
 * chunk, its queue full), return once @own's queue has room.
 * Returns 0, HTR_PDECODE_DIVERGED, the first error of a chunk's decoder
 * (its message in k->err) or of @k. */
static int consume_all(struct pdec *p, struct consumer *k,
		       const struct chunk *own)
{
	for (;;) {
		struct chunk *c = &p->ring[p->head % p->window];
		int rc, have = p->head < p->assigned;

		if (own && own->nfull < CHUNK_BATCHES)
			return 0;
		if (k->rc)
			return k->rc;
		if (atomic_load(&p->diverged))
			return HTR_PDECODE_DIVERGED;
		if (!have && p->next_start == NONE)
			return k->last.from == NONE ? 0 : HTR_PDECODE_DIVERGED;
		if (have && !k->checked) {
			if (!c->head.done && !c->done) {
				/* Its decoder is stuck on a full queue before
				 * it reached its second PSB: no way to tell. */
				if (c->nfull >= CHUNK_BATCHES)
					return HTR_PDECODE_DIVERGED;
			} else if (c->head.from == NONE && c->done &&
				   !c->rc) {
				/* Nothing to report: the previous chunk's
				 * decoder went past this one. */
				p->head++;
				pthread_cond_broadcast(&p->cond);
				continue;
			} else if (c->head.from != NONE) {
				if (!seam_eq(&k->last, &c->head))
					return HTR_PDECODE_DIVERGED;
				k->checked = 1;
				continue;
			}
		}
		if (have && k->checked && c->full) {
			struct batch *b = c->full;

			c->full = b->next;
			if (!c->full)
				c->last = NULL;
			/* Its decoder waits only on a full queue. */
			if (c->nfull-- == CHUNK_BATCHES)
				pthread_cond_broadcast(&p->cond);
			pthread_mutex_unlock(&p->lock);
			rc = consume(k, b);
			pthread_mutex_lock(&p->lock);
			put_batch(p, b);
			if (rc)
				return rc;
		} else if (have && c->done && (k->checked || c->rc)) {
			if (c->rc) {
				*k->err = c->err;
				return c->rc;
			}
			k->last = c->tail;
			p->head++;
			k->checked = 0;
			pthread_cond_broadcast(&p->cond);
		} else if (!own && can_take(p)) {
			/* The building is behind nobody: decode too, so that
			 * N threads are N threads at work. */
			struct chunk *m = take_chunk(p);

			m->mine = 1;
			pthread_mutex_unlock(&p->lock);
			rc = decode_chunk(p, m, &k->walk);
			pthread_mutex_lock(&p->lock);
			chunk_done(m, rc);
		} else {
			/* A long search for a PSB reports nothing through
			 * the events: keep the heartbeat going. */
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			if (pthread_cond_timedwait(&p->cond, &p->lock, &ts) &&
			    have && k->progress) {
				uint64_t at = atomic_load(&c->at);

				pthread_mutex_unlock(&p->lock);
				rc = k->progress(k->ctx, at);
				pthread_mutex_lock(&p->lock);
				if (rc)
					return HTR_ERR_CANCELED;
			}
		}
	}
}

/* One thread: the events go straight to the caller. */
struct solo {
	struct htr_ev_sink ek;        /* first: the decoder's sink context */
	int (*apply)(void *ctx, const struct htr_ev *ev, size_t n);
	int (*progress)(void *ctx, uint64_t offset);
	void *ctx;
};

static int solo_put(void *ctx, const struct htr_ev *e)
{
	const struct solo *s = ctx;

	return s->apply(s->ctx, e, 1);
}

static int solo_progress(void *ctx, uint64_t offset)
{
	const struct solo *s = ctx;

	return s->progress ? s->progress(s->ctx, offset) : 0;
}

int htr_pdecode__run(const struct htr_decode_cfg *cfg, struct htr_image *img,
		     unsigned threads, uint64_t chunk,
		     int (*apply)(void *ctx, const struct htr_ev *ev, size_t n),
		     int (*progress)(void *ctx, uint64_t offset),
		     void (*spare)(void *ctx), void *ctx, struct htr_err *err)
{
	struct consumer k;
	struct pdec p;
	pthread_t *tid;
	unsigned i, started = 0;
	int rc;

	memset(&p, 0, sizeof(p));
	p.cfg = cfg;
	p.img = img;
	p.next_start = p.first = psb_from(cfg, cfg->begin);
	if (p.next_start == NONE || threads < 2) {
		/* One thread, or no PSB (the one-thread decoder says so, as
		 * it would). */
		struct solo so = { { solo_put, NULL }, apply, progress, ctx };
		struct htr_decode_sink sink;

		so.ek.ctx = &so;
		memset(&sink, 0, sizeof(sink));
		htr_ev__sink(&sink, &so.ek);     /* sink.ctx = &so */
		sink.progress = solo_progress;
		return htr_decode__run(cfg, img, &sink, err);
	}
	p.chunk = chunk;
	p.threads = threads;
	p.spare = spare;
	memset(&k, 0, sizeof(k));
	k.apply = apply;
	k.progress = progress;
	k.ctx = ctx;
	k.last.from = k.last.to = NONE;
	k.checked = 1;
	k.err = err;
	p.k = &k;
	/* Room for each thread's chunk and two more, so that the helpers
	 * go on while this thread decodes one of its own. */
	p.window = threads + 2;
	/* Every batch that can be in use at once: each chunk's full ones and
	 * the one it fills, and the one being consumed. */
	p.arena_n = p.window * (CHUNK_BATCHES + 1) + 1;
	p.arena = arena_alloc(p.arena_n);
	if (!p.arena)
		p.arena_n = 0;
	p.ring = calloc(p.window, sizeof(*p.ring));
	tid = calloc(threads - 1, sizeof(*tid));
	if (!p.ring || !tid) {
		arena_free(p.arena, p.arena_n);
		free(p.ring);
		free(tid);
		return htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
	}
	init_lock(&p.lock);
	pthread_cond_init(&p.cond, NULL);
	/* This thread is one of @threads; it decodes alone if no other
	 * starts. */
	for (i = 0; i + 1 < threads; i++)
		if (htr_pdecode__spawn(&tid[i], worker, &p, i + 1) == 0)
			started++;
	pthread_mutex_lock(&p.lock);
	rc = consume_all(&p, &k, NULL);
	atomic_store(&p.stop, 1);
	pthread_cond_broadcast(&p.cond);
	pthread_mutex_unlock(&p.lock);
	for (i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	for (i = 0; i < p.window; i++) {
		struct chunk *c = &p.ring[i];

		if (c->cur) {
			c->cur->next = c->full;
			c->full = c->cur;
		}
		while (c->full) {
			struct batch *b = c->full;

			c->full = b->next;
			free_batch(&p, b);
		}
	}
	while (p.free) {
		struct batch *b = p.free;

		p.free = b->next;
		free_batch(&p, b);
	}
	arena_free(p.arena, p.arena_n);
	if (rc == HTR_ERR_CANCELED && !err->msg[0])
		htr_err__set(err, rc, "decode canceled");
	htr_walk__free(k.walk);
	pthread_cond_destroy(&p.cond);
	pthread_mutex_destroy(&p.lock);
	free(p.ring);
	free(tid);
	return rc;
}
