/* CPU-wide builds: see cpuwide.h. */
#include "cpuwide.h"

#include "le.h"
#include "pipe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NONE UINT32_MAX
#define SPOOL_BUF 8192u           /* events per read or write */
#define MAX_LEAD 8u               /* gaps carried into the next piece */

/* A piece of one CPU's stream: from a resume to the next. */
struct piece {
	uint64_t start;          /* TSC when it began (ordering, owner) */
	uint64_t first, nev;     /* its events in the spool */
	uint64_t insns;
	uint64_t seq;            /* number among every CPU's pieces */
	uint64_t enable_ip;
	uint64_t off_ip, off_offset;
	uint32_t owner;          /* index into the threads, or NONE */
	uint32_t cpu;            /* index into pd->cpus */
	uint32_t nlead;          /* leading gaps: copies of the previous
				  * piece's trailing ones */
	uint8_t enabled;         /* began where tracing was enabled */
	uint8_t has_start;
	uint8_t off, async;      /* ended where tracing was disabled */
};

/* Where a CPU's switches say a thread runs from (in TSC). */
struct slot {
	uint64_t tsc;
	uint32_t tid;
};

struct cw {
	struct htr_builder *b;
	const struct htr_perfdata *pd;
	struct htr_cpuwide_thread *t;
	size_t n;
	struct htr_cpuwide_stats *cs;

	FILE *spool;
	uint64_t nev;            /* events written */
	struct htr_ev *buf;      /* SPOOL_BUF events */

	struct piece *pieces;
	size_t npieces, cap;

	/* The CPU being decoded. */
	uint32_t cpu;
	struct slot *slots;      /* its switches */
	size_t nslots;
	int open;
	struct piece cur;
	int have_time;
	uint64_t time;           /* the CPU's last reported time */
	int pend_enable, pend_has_tsc;
	uint64_t pend_ip, pend_tsc;
	struct htr_ev lead[MAX_LEAD];
	uint32_t nlead;          /* gaps since the last run */
	uint64_t done_bytes, total_bytes;
	int stop;                /* the progress callback's value */
};

static int spool_put(struct cw *w, const struct htr_ev *e)
{
	if (fwrite(e, sizeof(*e), 1, w->spool) != 1)
		return htr_err__sys(&w->b->err, "CPU-wide build: temporary "
				    "file");
	w->nev++;
	return 0;
}

/* The thread the switches say runs on the CPU at @tsc (an index into
 * w->t), NONE for another thread (*@tid), or NONE with *@unknown set. */
static uint32_t owner_at(const struct cw *w, uint64_t tsc, int *unknown,
			 uint32_t *tid_out)
{
	size_t lo = 0, hi = w->nslots, i;
	uint32_t tid;

	/* The last slot with slot.tsc <= tsc. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->slots[mid].tsc <= tsc)
			lo = mid + 1;
		else
			hi = mid;
	}
	*unknown = !lo || w->slots[lo - 1].tid == NONE;
	if (*unknown)
		return NONE;
	tid = w->slots[lo - 1].tid;
	*tid_out = tid;
	for (i = 0; i < w->n; i++)
		if (w->t[i].tid == tid)
			return (uint32_t) i;
	return NONE;
}

/* Remember that thread @tid, not asked for, has instructions. */
static int note_other(struct cw *w, uint32_t tid)
{
	struct htr_cpuwide_stats *cs = w->cs;
	uint32_t *v;
	size_t i;

	for (i = 0; i < cs->nother; i++)
		if (cs->other[i] == tid)
			return 0;
	v = realloc(cs->other, (cs->nother + 1) * sizeof(*v));
	if (!v)
		return htr_err__set(&w->b->err, HTR_ERR_NOMEM, "out of memory");
	v[cs->nother++] = tid;
	cs->other = v;
	return 0;
}

static int close_piece(struct cw *w)
{
	struct piece *p;
	uint32_t tid = NONE;
	int unknown;

	if (!w->open)
		return 0;
	w->open = 0;
	if (!w->cur.has_start) {
		w->cur.start = w->time;
		w->cur.has_start = (uint8_t) w->have_time;
	}
	w->cur.nev = w->nev - w->cur.first;
	w->cur.owner = owner_at(w, w->cur.start, &unknown, &tid);
	w->cs->pieces++;
	if (w->cur.owner == NONE) {
		if (unknown) {
			w->cs->insns_unknown += w->cur.insns;
			return 0;
		}
		w->cs->insns_other += w->cur.insns;
		return w->cur.insns ? note_other(w, tid) : 0;
	}
	if (w->npieces == w->cap) {
		size_t nc = w->cap ? 2 * w->cap : 1024;

		p = realloc(w->pieces, nc * sizeof(*p));
		if (!p)
			return htr_err__set(&w->b->err, HTR_ERR_NOMEM,
					    "out of memory");
		w->pieces = p;
		w->cap = nc;
	}
	w->pieces[w->npieces++] = w->cur;
	return 0;
}

static int open_piece(struct cw *w, const struct htr_ev *resume)
{
	uint32_t i;
	int rc = close_piece(w);

	if (rc)
		return rc;
	memset(&w->cur, 0, sizeof(w->cur));
	w->open = 1;
	w->cur.seq = w->cs->pieces;
	w->cur.cpu = w->cpu;
	w->cur.first = w->nev;
	w->cur.enabled = (uint8_t) w->pend_enable;
	w->cur.enable_ip = w->pend_ip;
	if (w->pend_enable && w->pend_has_tsc) {
		w->cur.start = w->pend_tsc;
		w->cur.has_start = 1;
	}
	w->pend_enable = 0;
	/* What was lost before this piece may be this thread's too. */
	for (i = 0; i < w->nlead; i++)
		if ((rc = spool_put(w, &w->lead[i])) != 0)
			return rc;
	w->cur.nlead = w->nlead;
	w->nlead = 0;
	return spool_put(w, resume);
}

static int on_event(void *ctx, const struct htr_ev *e)
{
	struct cw *w = ctx;

	switch (e->type) {
	case HTR_EV_RESUME:
		return open_piece(w, e);
	case HTR_EV_SYNC:
		/* Trace offsets of one CPU mean nothing in a thread's file. */
		return 0;
	case HTR_EV_GAP:
		if (w->nlead < MAX_LEAD)
			w->lead[w->nlead++] = *e;
		break;
	case HTR_EV_TIME:
		w->have_time = 1;
		w->time = e->a;
		if (w->open && !w->cur.has_start) {
			w->cur.start = e->a;
			w->cur.has_start = 1;
		}
		break;
	case HTR_EV_RUN:
		w->nlead = 0;
		w->cur.insns += e->n;
		break;
	}
	return w->open ? spool_put(w, e) : 0;
}

static int on_onoff(void *ctx, int on, int async, uint64_t ip,
		    uint64_t offset, int has_tsc, uint64_t tsc)
{
	struct htr_ev_sink *k = ctx;
	struct cw *w = k->ctx;

	if (on) {
		w->pend_enable = 1;
		w->pend_ip = ip;
		w->pend_has_tsc = has_tsc;
		w->pend_tsc = tsc;
	} else if (w->open) {
		w->cur.off = 1;
		w->cur.async = (uint8_t) async;
		w->cur.off_ip = ip;
		w->cur.off_offset = offset;
	}
	return 0;
}

static int on_progress(void *ctx, uint64_t offset)
{
	struct htr_ev_sink *k = ctx;
	struct cw *w = k->ctx;
	const struct htr_build_opts *o = &w->b->opts;
	struct htr_build_progress p;

	if (!o->progress)
		return 0;
	memset(&p, 0, sizeof(p));
	p.offset = w->done_bytes + offset;
	p.trace_size = w->total_bytes;
	w->stop = o->progress(&p, o->payload);
	return w->stop ? HTR_ERR_CANCELED : 0;
}

/* The switches of CPU @cpu (a CPU number) as TSC slots. */
static int cpu_slots(struct cw *w, uint32_t cpu)
{
	const struct htr_perfdata *pd = w->pd;
	size_t i;

	w->nslots = 0;
	for (i = 0; i < pd->nswitches; i++) {
		const struct htr_perf_switch *s = &pd->switches[i];

		if (s->cpu != cpu)
			continue;
		w->slots[w->nslots].tsc = htr_perfdata__time_to_tsc(pd,
								    s->time);
		w->slots[w->nslots].tid = s->tid;
		w->nslots++;
	}
	return 0;
}

/* Decode CPU stream @c into the spool and the piece index. */
static int decode_cpu(struct cw *w, uint32_t c, uint64_t *hash)
{
	const struct htr_perf_cpu *pc = &w->pd->cpus[c];
	struct htr_decode_sink sink;
	struct htr_decode_cfg cfg;
	struct htr_ev_sink k;
	const uint8_t *data;
	uint8_t *buf = NULL;
	size_t i, at;
	int rc;

	if (!pc->pt_bytes)
		return 0;
	if (pc->nchunks == 1) {
		data = w->pd->data + pc->chunks[0].offset;
	} else {
		buf = malloc((size_t) pc->pt_bytes);
		if (!buf)
			return htr_err__set(&w->b->err, HTR_ERR_NOMEM,
					    "out of memory");
		for (i = 0, at = 0; i < pc->nchunks; i++) {
			memcpy(buf + at, w->pd->data + pc->chunks[i].offset,
			       (size_t) pc->chunks[i].size);
			at += (size_t) pc->chunks[i].size;
		}
		data = buf;
	}
	*hash = htr_hash__bytes(*hash, data, pc->pt_bytes);
	w->cpu = c;
	w->open = 0;
	w->have_time = 0;
	w->pend_enable = 0;
	w->nlead = 0;
	cpu_slots(w, pc->cpu);
	memset(&sink, 0, sizeof(sink));
	k.put = on_event;
	k.ctx = w;
	htr_ev__sink(&sink, &k);
	sink.onoff = on_onoff;
	sink.progress = on_progress;
	htr_build__decode_cfg(w->b, &cfg, data, pc->pt_bytes);
	rc = htr_decode__run(&cfg, w->b->img, &sink, &w->b->err);
	if (rc == 0)
		rc = close_piece(w);
	w->done_bytes += pc->pt_bytes;
	free(buf);
	if (rc == HTR_ERR_CANCELED && w->stop < 0)
		rc = htr_err__set(&w->b->err, htr_err__callback(w->stop),
				  "canceled by the progress callback (%d)",
				  w->stop);
	return rc;
}

/* Replay order of one thread's pieces: by start time, then stream. */
static int by_start(const void *x, const void *y)
{
	const struct piece *a = *(const struct piece *const *) x;
	const struct piece *b = *(const struct piece *const *) y;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int apply(struct cw *w, struct htr_build_out *o,
		 const struct htr_ev *e)
{
	int rc = htr_ev__apply(o->tb, e);

	return rc < 0 ? htr_build__out_fail(w->b, o, rc) : 0;
}

/* Feed events [@from, @to) of the spool to @o's tree builder. */
static int replay(struct cw *w, struct htr_build_out *o, uint64_t from,
		  uint64_t to)
{
	int rc;

	if (fseeko(w->spool, (off_t) (from * sizeof(struct htr_ev)),
		   SEEK_SET) < 0)
		return htr_err__sys(&w->b->err, "CPU-wide build: temporary "
				    "file");
	while (from < to) {
		size_t n = to - from > SPOOL_BUF ? SPOOL_BUF :
			   (size_t) (to - from), i;

		if (fread(w->buf, sizeof(*w->buf), n, w->spool) != n)
			return htr_err__set(&w->b->err, HTR_ERR_IO,
					    "CPU-wide build: temporary file "
					    "cut short");
		for (i = 0; i < n; i++)
			if ((rc = apply(w, o, &w->buf[i])) != 0)
				return rc;
		from += n;
	}
	return 0;
}

static int gap_ev(struct cw *w, struct htr_build_out *o, const struct piece *p)
{
	struct htr_ev e;

	memset(&e, 0, sizeof(e));
	e.type = HTR_EV_GAP;
	e.n = HTR_GAP_DISABLED;
	e.cls = p ? p->async : 0;
	e.a = p ? p->off_offset : 0;
	e.b = p ? p->off_ip : 0;
	return apply(w, o, &e);
}

/* Build thread @i from its pieces @v[0..@n) in replay order. */
static int build_thread(struct cw *w, size_t i, struct piece **v, size_t n,
			uint64_t trace_size, uint64_t trace_hash)
{
	struct htr_cpuwide_thread *t = &w->t[i];
	struct htr_build_out o;
	struct htr_ev e;
	size_t k;
	int rc;

	rc = htr_builder_set_thread(w->b, &t->info);
	if (rc == 0)
		rc = htr_build__out_open(w->b, t->out, &o);
	for (k = 0; rc == 0 && k < n; k++) {
		const struct piece *p = v[k], *prev = k ? v[k - 1] : NULL;
		/* Right after its previous piece in the same stream: the
		 * leading gaps were that piece's trailing ones. */
		int adjacent = prev && prev->seq + 1 == p->seq;

		if (!prev && p->has_start) {
			/* As the first PSB+ of a thread's own trace would. */
			memset(&e, 0, sizeof(e));
			e.type = HTR_EV_TIME;
			e.a = p->start;
			rc = apply(w, &o, &e);
		}
		/* Gaps right before the piece (in the stream). */
		int gapped = p->nlead > 0;
		uint64_t from = p->first + (adjacent ? p->nlead : 0);

		/* Whether the switch lost instructions of this thread: the
		 * decoder's rule, applied to the thread's own stops. */
		if (rc == 0 && prev && p->enabled && prev->off) {
			if (!(prev->async && prev->off_ip == p->enable_ip)) {
				rc = gap_ev(w, &o, prev);
				gapped = 1;
			}
		} else if (rc == 0 && prev && !adjacent && !gapped) {
			/* It moved with no stop in the trace: unknown loss. */
			rc = gap_ev(w, &o, NULL);
			gapped = 1;
		}
		/* Preempted and resumed where it stopped: nothing was lost,
		 * the thread's decode goes on (no resume, as the decoder
		 * reports none in one thread's trace). */
		if (prev && !gapped)
			from = p->first + p->nlead + 1;
		if (rc == 0)
			rc = replay(w, &o, from, p->first + p->nev);
	}
	/* Stopped asynchronously at the very end: the decoder's end rule. */
	if (rc == 0 && n && v[n - 1]->off && v[n - 1]->async)
		rc = gap_ev(w, &o, v[n - 1]);
	if (rc == 0)
		rc = htr_build__out_commit(w->b, &o, trace_size, trace_hash,
					   &t->stats);
	htr_build__out_free(&o);
	if (rc == 0) {
		t->built = 1;
		t->pieces = n;
	}
	return rc;
}

static FILE *spool_file(struct htr_builder *b)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "%s/htr-cpuwide-XXXXXX",
		 dir && dir[0] ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0) {
		htr_err__sys(&b->err, "%s", path);
		return NULL;
	}
	unlink(path);
	f = fdopen(fd, "w+b");
	if (!f) {
		htr_err__sys(&b->err, "%s", path);
		close(fd);
	}
	return f;
}

int htr_cpuwide__build(struct htr_builder *b, const struct htr_perfdata *pd,
		       struct htr_cpuwide_thread *t, size_t n,
		       struct htr_cpuwide_stats *cs)
{
	struct cw w;
	struct piece **v = NULL;
	uint64_t hash = HTR_HASH_SEED;
	size_t i, j, nv;
	uint32_t c;
	int rc = 0;

	memset(&w, 0, sizeof(w));
	htr_cpuwide__stats_free(cs);
	w.b = b;
	w.pd = pd;
	w.t = t;
	w.n = n;
	w.cs = cs;
	for (i = 0; i < n; i++)
		t[i].built = 0;
	for (c = 0; c < pd->ncpus; c++)
		w.total_bytes += pd->cpus[c].pt_bytes;
	w.slots = malloc((pd->nswitches ? pd->nswitches : 1) *
			 sizeof(*w.slots));
	w.buf = malloc(SPOOL_BUF * sizeof(*w.buf));
	if (!w.slots || !w.buf) {
		rc = htr_err__set(&b->err, HTR_ERR_NOMEM, "out of memory");
		goto out;
	}
	w.spool = spool_file(b);
	if (!w.spool) {
		rc = b->err.code;
		goto out;
	}
	for (c = 0; c < pd->ncpus && rc == 0; c++)
		rc = decode_cpu(&w, c, &hash);
	if (rc == 0 && fflush(w.spool) != 0)
		rc = htr_err__sys(&b->err, "CPU-wide build: temporary file");
	if (rc)
		goto out;
	v = malloc((w.npieces ? w.npieces : 1) * sizeof(*v));
	if (!v) {
		rc = htr_err__set(&b->err, HTR_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n && rc == 0; i++) {
		for (j = 0, nv = 0; j < w.npieces; j++)
			if (w.pieces[j].owner == i)
				v[nv++] = &w.pieces[j];
		if (!nv)
			continue;
		qsort(v, nv, sizeof(*v), by_start);
		rc = build_thread(&w, i, v, nv, w.total_bytes, hash);
	}
out:
	if (w.spool)
		fclose(w.spool);
	free(v);
	free(w.pieces);
	free(w.slots);
	free(w.buf);
	return rc;
}

void htr_cpuwide__stats_free(struct htr_cpuwide_stats *cs)
{
	free(cs->other);
	memset(cs, 0, sizeof(*cs));
}
