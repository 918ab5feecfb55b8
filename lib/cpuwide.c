/* CPU-wide builds: see cpuwide.h. */
#include "cpuwide.h"

#include "abi.h"
#include "htr/cpuwide.h"

#include "le.h"
#include "ev.h"
#include "tmpfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
	uint32_t cpu;            /* index into in->cpus */
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
	const struct htr_cpuwide_input *in;
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

static void time_is(struct cw *w, uint64_t tsc)
{
	w->have_time = 1;
	w->time = tsc;
	if (w->open && !w->cur.has_start) {
		w->cur.start = tsc;
		w->cur.has_start = 1;
	}
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
		time_is(w, e->a);
		break;
	case HTR_EV_RUN:
		w->nlead = 0;
		w->cur.insns += e->n;
		if (e->timed)
			time_is(w, e->t);
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
	const struct htr_cpuwide_input *in = w->in;
	size_t i;

	w->nslots = 0;
	for (i = 0; i < in->nswitches; i++) {
		const struct htr_cpuwide_switch *s = &in->switches[i];

		if (s->cpu != cpu)
			continue;
		w->slots[w->nslots].tsc = s->tsc;
		w->slots[w->nslots].tid = s->tid;
		w->nslots++;
	}
	return 0;
}

/* Decode CPU stream @c into the spool and the piece index. */
static int decode_cpu(struct cw *w, uint32_t c, uint64_t *hash)
{
	const struct htr_cpuwide_stream *pc = &w->in->cpus[c];
	struct htr_decode_sink sink;
	struct htr_decode_cfg cfg;
	struct htr_ev_sink k;
	struct htr_perf_joined j;
	const uint8_t *data;
	struct {
		uint64_t nev, pieces, unknown, other;
		size_t npieces, nother;
	} save;
	int rc;

	if (!pc->pt_bytes)
		return 0;
	rc = htr_perfdata__join(pc->base, pc->chunks, pc->nchunks, &j,
				&w->b->err);
	if (rc)
		return rc;
	if (w->in->user_only) {
		struct htr_perf_kstats ks;

		rc = htr_perfdata__user_only(&j, &ks, &w->b->err);
		if (rc) {
			htr_perfdata__unjoin(&j);
			return rc;
		}
		w->cs->kernel_stretches += ks.stretches;
	}
	data = j.data;
	*hash = htr_hash__bytes(*hash, data, j.size);
	w->cpu = c;
	cpu_slots(w, pc->cpu);
	memset(&sink, 0, sizeof(sink));
	k.put = on_event;
	k.ctx = w;
	htr_ev__sink(&sink, &k);
	sink.onoff = on_onoff;
	sink.progress = on_progress;
	htr_build__decode_cfg(w->b, &cfg, data, j.size);
	save.nev = w->nev;
	save.npieces = w->npieces;
	save.pieces = w->cs->pieces;
	save.unknown = w->cs->insns_unknown;
	save.other = w->cs->insns_other;
	save.nother = w->cs->nother;
	for (;;) {
		w->open = 0;
		w->have_time = 0;
		w->pend_enable = 0;
		w->nlead = 0;
		rc = htr_decode__run(&cfg, w->b->img, &sink, &w->b->err);
		if (rc != HTR_DECODE_GAVE_UP)
			break;
		/* The walk gave up: forget what it said of this CPU and
		 * decode it again with the block decoder. */
		if (fseeko(w->spool, (off_t) (save.nev * sizeof(struct htr_ev)),
			   SEEK_SET) != 0) {
			rc = htr_err__sys(&w->b->err, "CPU-wide build: "
					  "temporary file");
			break;
		}
		htr_err__clear(&w->b->err);
		w->nev = save.nev;
		w->npieces = save.npieces;
		w->cs->pieces = save.pieces;
		w->cs->insns_unknown = save.unknown;
		w->cs->insns_other = save.other;
		w->cs->nother = save.nother;
		cfg.walk = 0;
	}
	if (rc == 0)
		rc = close_piece(w);
	w->done_bytes += pc->pt_bytes;
	htr_perfdata__unjoin(&j);
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
	e.kind = HTR_GAP_DISABLED;
	e.cls = p ? p->async : 0;
	e.a = p ? p->off_offset : 0;
	e.b = p ? p->off_ip : 0;
	/* A user+kernel trace made user-only: where tracing was off the
	 * kernel ran. */
	if (w->in->user_only)
		e.code = HTR_GAP_CODE_KERNEL;
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
		if (prev && !gapped) {
			from = p->first + p->nlead + 1;
			if (rc == 0 && p->has_start &&
			    (rc = htr_tb__time_entry(o.tb, p->start)) < 0)
				rc = htr_build__out_fail(w->b, &o, rc);
		}
		if (rc == 0)
			rc = replay(w, &o, from, p->first + p->nev);
	}
	/* Stopped asynchronously at the very end: the decoder's end rule. */
	if (rc == 0 && n && v[n - 1]->off && v[n - 1]->async)
		rc = gap_ev(w, &o, v[n - 1]);
	if (rc == 0)
		rc = htr_build__out_commit(w->b, &o, NULL, trace_size,
					   trace_hash, &t->stats);
	htr_build__out_free(&o);
	if (rc == 0) {
		t->built = 1;
		t->pieces = n;
	}
	return rc;
}

static FILE *spool_file(struct htr_builder *b)
{
	int fd = htr_tmp__open("cpuwide", &b->err);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w+b");

	if (fd >= 0 && !f) {
		htr_err__sys(&b->err, "temporary spool");
		close(fd);
	}
	return f;
}

int htr_cpuwide__run(struct htr_builder *b, const struct htr_cpuwide_input *in,
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
	w.in = in;
	w.t = t;
	w.n = n;
	w.cs = cs;
	for (i = 0; i < n; i++)
		t[i].built = 0;
	for (c = 0; c < in->ncpus; c++)
		w.total_bytes += in->cpus[c].pt_bytes;
	w.slots = malloc((in->nswitches ? in->nswitches : 1) *
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
	for (c = 0; c < in->ncpus && rc == 0; c++)
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

/* A perf.data's per-CPU streams and switches as the input (the switches
 * are already sorted by (cpu, time); perf time to TSC keeps that order). */
int htr_cpuwide__build(struct htr_builder *b, const struct htr_perfdata *pd,
		       struct htr_cpuwide_thread *t, size_t n,
		       struct htr_cpuwide_stats *cs)
{
	struct htr_cpuwide_input in;
	struct htr_cpuwide_stream *cpus;
	struct htr_cpuwide_switch *sw;
	size_t i;
	int rc;

	cpus = malloc((pd->ncpus ? pd->ncpus : 1) * sizeof(*cpus));
	sw = malloc((pd->nswitches ? pd->nswitches : 1) * sizeof(*sw));
	if (!cpus || !sw) {
		free(cpus);
		free(sw);
		return htr_err__set(&b->err, HTR_ERR_NOMEM, "out of memory");
	}
	for (i = 0; i < pd->ncpus; i++) {
		cpus[i].cpu = pd->cpus[i].cpu;
		cpus[i].base = pd->data;
		cpus[i].chunks = pd->cpus[i].chunks;
		cpus[i].nchunks = pd->cpus[i].nchunks;
		cpus[i].pt_bytes = pd->cpus[i].pt_bytes;
	}
	for (i = 0; i < pd->nswitches; i++) {
		sw[i].tsc = htr_perfdata__time_to_tsc(pd, pd->switches[i].time);
		sw[i].cpu = pd->switches[i].cpu;
		sw[i].tid = pd->switches[i].tid;
	}
	in.cpus = cpus;
	in.ncpus = pd->ncpus;
	in.switches = sw;
	in.nswitches = pd->nswitches;
	/* Pieces begin where tracing (of user code) is enabled: the
	 * kernel's code, even if loaded, would hide every switch. */
	in.user_only = pd->pt.kernel;
	rc = htr_cpuwide__run(b, &in, t, n, cs);
	free(cpus);
	free(sw);
	return rc;
}

void htr_cpuwide__stats_free(struct htr_cpuwide_stats *cs)
{
	free(cs->other);
	memset(cs, 0, sizeof(*cs));
}

/* ------------------------------------------------------------------ */
/* The public API (htr/cpuwide.h): buffers and switches from memory as
 * the same input a perf.data gives. */

#define SWITCH_SIZE0 HTR_ABI_SIZE0(struct htr_switch, next_tid)
#define CWINFO_SIZE0 HTR_ABI_SIZE0(struct htr_cpuwide_info, insns_unknown)
#define STATS_SIZE0 HTR_ABI_SIZE0(struct htr_build_stats, timing_unusable)
#define TINFO_SIZE0 HTR_ABI_SIZE0(struct htr_thread_info, clock_ns)

/* A CPU's trace as added: spooled to an unlinked temporary file and
 * mapped for the run, so the caller can stream a trace of any size
 * through a small buffer (and none of it stays in the process's own
 * memory). */
struct api_cpu {
	uint32_t cpu;
	int fd;                  /* -1 until the first bytes */
	uint64_t size;
	void *map;               /* during htr_cpuwide_run() */
	struct htr_perf_chunk chunk;
};

/* A switch as added, with its order (the tie-break of equal times). */
struct api_switch {
	struct htr_switch s;
	uint64_t tsc;
	size_t seq;
};

struct htr_cpuwide {
	struct htr_builder *b;
	struct api_cpu *cpus;
	size_t ncpus;
	struct api_switch *sw;
	size_t nsw, capsw;
	int have_clock;
	uint32_t shift;
	uint64_t mult, zero;
	struct htr_cpuwide_thread *t;
	size_t nt;
	struct htr_cpuwide_stats cs;
	int ran;                 /* the last run succeeded */
};

int htr_cpuwide_alloc(struct htr_cpuwide **out, struct htr_builder *b)
{
	if (!out)
		return HTR_ERR_INVALID;
	*out = NULL;
	if (!b)
		return HTR_ERR_INVALID;
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return HTR_ERR_NOMEM;
	(*out)->b = b;
	return 0;
}

void htr_cpuwide_free(struct htr_cpuwide *cw)
{
	size_t i;

	if (!cw)
		return;
	for (i = 0; i < cw->ncpus; i++)
		if (cw->cpus[i].fd >= 0)
			close(cw->cpus[i].fd);
	for (i = 0; i < cw->nt; i++)
		free((char *) cw->t[i].out);
	free(cw->cpus);
	free(cw->sw);
	free(cw->t);
	htr_cpuwide__stats_free(&cw->cs);
	free(cw);
}

int htr_cpuwide_set_clock(struct htr_cpuwide *cw, uint32_t time_shift,
			  uint64_t time_mult, uint64_t time_zero)
{
	if (!cw || !time_mult || time_shift > 63)
		return HTR_ERR_INVALID;
	cw->have_clock = 1;
	cw->shift = time_shift;
	cw->mult = time_mult;
	cw->zero = time_zero;
	return 0;
}

int htr_cpuwide_add_trace(struct htr_cpuwide *cw, uint32_t cpu,
			  const void *data, size_t size)
{
	struct api_cpu *c = NULL;
	size_t i;

	if (!cw || (!data && size))
		return HTR_ERR_INVALID;
	for (i = 0; i < cw->ncpus; i++)
		if (cw->cpus[i].cpu == cpu)
			c = &cw->cpus[i];
	if (!c) {
		c = realloc(cw->cpus, (cw->ncpus + 1) * sizeof(*c));
		if (!c)
			return htr_err__set(&cw->b->err, HTR_ERR_NOMEM,
					    "out of memory");
		cw->cpus = c;
		c = &cw->cpus[cw->ncpus++];
		memset(c, 0, sizeof(*c));
		c->cpu = cpu;
		c->fd = -1;
	}
	if (size && c->fd < 0 &&
	    (c->fd = htr_tmp__open("cpu", &cw->b->err)) < 0)
		return cw->b->err.code;
	if (htr_tmp__write(c->fd, data, size) < 0)
		return htr_err__sys(&cw->b->err, "cpu %u: spooling the trace "
				    "to a temporary file", cpu);
	c->size += size;
	return 0;
}

int htr_cpuwide_add_switch(struct htr_cpuwide *cw, const struct htr_switch *sw)
{
	struct api_switch *v;
	struct htr_switch s;

	if (!cw || !sw || htr_abi__in(&s, sizeof(s), sw, sw->size,
				      SWITCH_SIZE0) < 0 ||
	    s.flags & ~(HTR_SWITCH_OUT | HTR_SWITCH_TSC))
		return HTR_ERR_INVALID;
	if (cw->nsw == cw->capsw) {
		size_t nc = cw->capsw ? 2 * cw->capsw : 256;

		v = realloc(cw->sw, nc * sizeof(*v));
		if (!v)
			return htr_err__set(&cw->b->err, HTR_ERR_NOMEM,
					    "out of memory");
		cw->sw = v;
		cw->capsw = nc;
	}
	v = &cw->sw[cw->nsw];
	v->s = s;
	v->tsc = 0;
	v->seq = cw->nsw++;
	return 0;
}

int htr_cpuwide_add_thread(struct htr_cpuwide *cw,
			   const struct htr_thread_info *info, const char *out)
{
	struct htr_cpuwide_thread *v;
	struct htr_thread_info ti;
	size_t i;
	char *o;

	if (!cw || !info || !out || htr_abi__in(&ti, sizeof(ti), info,
						info->size, TINFO_SIZE0) < 0 ||
	    ti.flags & ~(HTR_THREAD_NS | HTR_THREAD_WALL) ||
	    ti.time_shift > 63 || !ti.tid)
		return HTR_ERR_INVALID;
	for (i = 0; i < cw->nt; i++)
		if (cw->t[i].tid == ti.tid)
			return htr_err__set(&cw->b->err, HTR_ERR_INVALID,
					    "thread %u added twice", ti.tid);
	o = strdup(out);
	v = realloc(cw->t, (cw->nt + 1) * sizeof(*v));
	if (!o || !v) {
		free(o);
		if (v)
			cw->t = v;
		return htr_err__set(&cw->b->err, HTR_ERR_NOMEM,
				    "out of memory");
	}
	cw->t = v;
	v = &cw->t[cw->nt++];
	memset(v, 0, sizeof(*v));
	v->tid = ti.tid;
	v->out = o;
	v->info = ti;
	return 0;
}

/* The order of the switches a CPU-wide build needs: (cpu, tsc), then as
 * they happened (perf time, then the order they were added). */
static int by_cpu_time(const void *x, const void *y)
{
	const struct api_switch *a = x, *b = y;

	if (a->s.cpu != b->s.cpu)
		return a->s.cpu < b->s.cpu ? -1 : 1;
	if (a->tsc != b->tsc)
		return a->tsc < b->tsc ? -1 : 1;
	if (a->s.time != b->s.time)
		return a->s.time < b->s.time ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int htr_cpuwide_run(struct htr_cpuwide *cw)
{
	struct htr_cpuwide_input in;
	struct htr_cpuwide_stream *cpus = NULL;
	struct htr_cpuwide_switch *sw = NULL;
	struct htr_err *err;
	size_t i;
	int rc;

	if (!cw)
		return HTR_ERR_INVALID;
	err = &cw->b->err;
	htr_err__clear(err);
	cw->ran = 0;
	for (i = 0; i < cw->nt; i++)
		cw->t[i].built = 0;
	if (!cw->ncpus || !cw->nt)
		return htr_err__set(err, HTR_ERR_INVALID, "CPU-wide build: "
				    "no %s added", cw->ncpus ? "thread" :
				    "trace");
	for (i = 0; i < cw->nsw; i++) {
		struct api_switch *s = &cw->sw[i];

		if (s->s.flags & HTR_SWITCH_TSC) {
			s->tsc = s->s.time;
		} else if (!cw->have_clock) {
			return htr_err__set(err, HTR_ERR_INVALID, "CPU-wide "
					    "build: a switch in perf time but "
					    "no TSC conversion "
					    "(htr_cpuwide_set_clock)");
		} else {
			s->tsc = htr_perfdata__ns_to_tsc(cw->shift, cw->mult,
							 cw->zero, s->s.time);
		}
	}
	if (cw->nsw)
		qsort(cw->sw, cw->nsw, sizeof(*cw->sw), by_cpu_time);
	cpus = malloc(cw->ncpus * sizeof(*cpus));
	sw = malloc((cw->nsw ? cw->nsw : 1) * sizeof(*sw));
	if (!cpus || !sw) {
		rc = htr_err__set(err, HTR_ERR_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < cw->ncpus; i++) {
		struct api_cpu *c = &cw->cpus[i];

		if (c->size) {
			c->map = mmap(NULL, (size_t) c->size, PROT_READ,
				      MAP_SHARED, c->fd, 0);
			if (c->map == MAP_FAILED) {
				c->map = NULL;
				rc = htr_err__sys(err, "cpu %u: mapping its "
						  "trace", c->cpu);
				goto out;
			}
		}
		c->chunk.offset = 0;
		c->chunk.size = c->size;
		cpus[i].cpu = c->cpu;
		cpus[i].base = c->map;
		cpus[i].chunks = &c->chunk;
		cpus[i].nchunks = c->size ? 1 : 0;
		cpus[i].pt_bytes = c->size;
	}
	for (i = 0; i < cw->nsw; i++) {
		const struct htr_switch *s = &cw->sw[i].s;

		sw[i].tsc = cw->sw[i].tsc;
		sw[i].cpu = s->cpu;
		/* Who runs from now on: the arriving thread, or the one a
		 * switch-out names. */
		sw[i].tid = s->flags & HTR_SWITCH_OUT ? s->next_tid : s->tid;
	}
	in.cpus = cpus;
	in.ncpus = cw->ncpus;
	in.switches = sw;
	in.nswitches = cw->nsw;
	in.user_only = 0;
	rc = htr_cpuwide__run(cw->b, &in, cw->t, cw->nt, &cw->cs);
	cw->ran = rc == 0;
out:
	for (i = 0; i < cw->ncpus; i++) {
		if (cw->cpus[i].map)
			munmap(cw->cpus[i].map, (size_t) cw->cpus[i].size);
		cw->cpus[i].map = NULL;
	}
	free(cpus);
	free(sw);
	return rc;
}

int htr_cpuwide_thread_stats(const struct htr_cpuwide *cw, uint32_t tid,
			     struct htr_build_stats *st, size_t size)
{
	size_t i;

	if (!cw || !st || size < STATS_SIZE0)
		return HTR_ERR_INVALID;
	for (i = 0; i < cw->nt; i++)
		if (cw->t[i].tid == tid && cw->t[i].built)
			return htr_abi__out(st, size, &cw->t[i].stats,
					    sizeof(cw->t[i].stats),
					    STATS_SIZE0);
	return HTR_ERR_NOTFOUND;
}

int htr_cpuwide_info(const struct htr_cpuwide *cw,
		     struct htr_cpuwide_info *info, size_t size)
{
	struct htr_cpuwide_info x;

	if (!cw || !info || size < CWINFO_SIZE0)
		return HTR_ERR_INVALID;
	if (!cw->ran)
		return HTR_ERR_NOTFOUND;
	memset(&x, 0, sizeof(x));
	x.size = sizeof(x);
	x.pieces = cw->cs.pieces;
	x.insns_other = cw->cs.insns_other;
	x.insns_unknown = cw->cs.insns_unknown;
	return htr_abi__out(info, size, &x, sizeof(x), CWINFO_SIZE0);
}
