/*
 * Packet streams and the modelled scheduler of `htr record --cpus N`.
 *
 * qemu-user runs every guest thread on a host thread of its own; the log
 * only says in which order their instructions ran.  A CPU-wide recording
 * needs CPUs, so threads are scheduled onto N modelled ones:
 *
 *  - a thread runs on a CPU from the log line that needs it until a
 *    syscall (it may block: the CPU goes idle) or until another thread
 *    takes the CPU (it is preempted, still runnable);
 *  - a thread that needs a CPU takes the one after the CPU it last ran on
 *    (a new thread: the first idle CPU, else CPU 0), preempting whatever
 *    runs there.  So with N > 1 every thread that makes syscalls migrates,
 *    and its trace spans several CPU buffers, as on a real machine.
 *
 * Every change of thread on a CPU is a switch-out record of the outgoing
 * task (the idle task, -1, included) and a switch-in record of the
 * incoming one, REC_SWITCH_OUT_AT and REC_SWITCH_IN_AT ticks after the
 * outgoing thread's TIP.PGD; the clock then moves on by REC_TICKS_SWITCH,
 * the time of the TSC packet before the incoming thread's TIP.PGE.  perf
 * decodes each CPU's buffer up to a sideband record's time and attributes
 * what follows to the task switched in, so these times must separate the
 * two threads' packets.  The clock is global and only grows, so every
 * CPU's timeline is monotonic.
 */
#include "rec_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* streams */

void rec_ring_path(char *buf, size_t size, const char *path, uint64_t k)
{
	snprintf(buf, size, "%s.%llu", path, (unsigned long long) k);
}

int rec_stream_open(struct rec_stream *s, const char *path, uint64_t now,
		    uint64_t ring)
{
	char p[600];

	memset(s, 0, sizeof(*s));
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->first_tsc = now;
	if (ring) {
		s->ring.size = ring;
		s->ring.seg_max = ring / REC_RING_SEGS;
		s->ring.n = 1;
		rec_ring_path(p, sizeof(p), path, 0);
		s->fp = fopen(p, "wb");
	} else {
		s->fp = fopen(path, "wb");
	}
	if (!s->fp)
		return -1;
	if (ptw_init(&s->w, s->fp) < 0) {
		fclose(s->fp);
		s->fp = NULL;
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int rec_stream_close(struct rec_stream *s)
{
	int rc = 0;

	if (s->w.enc) {
		rc = ptw_finish(&s->w);
		if (s->ring.n)
			s->ring.seg[s->ring.n - 1].bytes = ptw_offset(&s->w) -
				s->ring.seg[s->ring.n - 1].start;
		ptw_fini(&s->w);
	}
	if (s->fp && fclose(s->fp) != 0)
		rc = -1;
	s->fp = NULL;
	return rc;
}

uint64_t rec_stream_bytes(const struct rec_stream *s)
{
	return ptw_offset(&s->w);
}

int rec_stream_psb_due(struct rec_stream *s, uint64_t period)
{
	struct rec_ring *r = &s->ring;
	struct rec_ring_seg *cur;
	uint64_t off;
	char p[600];
	FILE *fp;

	if (!r->size || !s->fp)
		return 0;
	cur = &r->seg[r->n - 1];
	off = ptw_offset(&s->w);
	if (off == cur->start ||
	    off - cur->start + period + REC_RING_SLACK <= r->seg_max)
		return 0;
	rec_ring_path(p, sizeof(p), s->path, cur->k + 1);
	fp = fopen(p, "wb");
	if (!fp)
		return -1;
	ptw_set_file(&s->w, fp);
	cur->bytes = off - cur->start;
	if (fclose(s->fp) != 0)
		s->w.err = 1;
	s->fp = fp;
	if (r->n == REC_RING_SEGS) {
		rec_ring_path(p, sizeof(p), s->path, r->seg[0].k);
		unlink(p);
		r->dropped += r->seg[0].bytes;
		memmove(&r->seg[0], &r->seg[1], (r->n - 1) * sizeof(r->seg[0]));
		r->n--;
	}
	cur = &r->seg[r->n++];
	cur->k = r->seg[r->n - 2].k + 1;
	cur->start = off;
	cur->bytes = 0;
	return 0;
}

int rec_stream_window(struct rec_stream *s, struct rec_ring *out)
{
	int rc = 0;

	if (s->w.enc && s->fp) {
		rc = ptw_flush(&s->w);
		if (s->ring.n)
			s->ring.seg[s->ring.n - 1].bytes = s->w.flushed -
				s->ring.seg[s->ring.n - 1].start;
	}
	*out = s->ring;
	return rc;
}

/* ------------------------------------------------------------------ */
/* the scheduler */

int rec_sched_init(struct rec_ctx *c, unsigned ncpus)
{
	struct rec_sched *sc = &c->sched;
	char p[512];
	unsigned i;

	memset(sc, 0, sizeof(*sc));
	sc->cpus = calloc(ncpus, sizeof(*sc->cpus));
	if (!sc->cpus) {
		rec_fail(c, "out of memory");
		return -1;
	}
	sc->n = ncpus;
	for (i = 0; i < ncpus; i++) {
		sc->cpus[i].cur_idx = -1;
		snprintf(p, sizeof(p), "%s/cpu%u.pt", c->tmpdir, i);
		if (rec_stream_open(&sc->cpus[i].s, p, c->clock, 0) < 0) {
			rec_fail(c, "%s: %s", p, strerror(errno));
			return -1;
		}
	}
	return 0;
}

void rec_sched_fini(struct rec_sched *sc)
{
	unsigned i;

	for (i = 0; i < sc->n; i++)
		rec_stream_close(&sc->cpus[i].s);
	free(sc->cpus);
	free(sc->on);
	free(sc->last);
	free(sc->sw);
	memset(sc, 0, sizeof(*sc));
}

/* Room for thread index @idx in the per-thread arrays. */
static int room(struct rec_ctx *c, unsigned idx)
{
	struct rec_sched *sc = &c->sched;
	size_t n = sc->nth, i;
	int32_t *on, *last;

	if (idx < n)
		return 0;
	n = (size_t) idx + 16;
	on = realloc(sc->on, n * sizeof(*on));
	if (on)
		sc->on = on;
	last = on ? realloc(sc->last, n * sizeof(*last)) : NULL;
	if (!on || !last) {
		rec_fail(c, "out of memory");
		return -1;
	}
	sc->last = last;
	for (i = sc->nth; i < n; i++)
		sc->on[i] = sc->last[i] = -1;
	sc->nth = n;
	return 0;
}

static void log_switch(struct rec_ctx *c, uint64_t tsc, unsigned cpu, int out,
		       int preempt, int32_t task, int32_t other)
{
	struct rec_sched *sc = &c->sched;
	struct rec_switch *w;

	if (sc->nsw == sc->capsw) {
		size_t n = sc->capsw ? sc->capsw * 2 : 256;

		w = realloc(sc->sw, n * sizeof(*w));
		if (!w) {
			rec_fail(c, "out of memory");
			return;
		}
		sc->sw = w;
		sc->capsw = n;
	}
	w = &sc->sw[sc->nsw++];
	memset(w, 0, sizeof(*w));
	w->tsc = tsc;
	w->cpu = cpu;
	w->out = (uint8_t) out;
	w->preempt = (uint8_t) preempt;
	w->first = !out && !sc->cpus[cpu].used;
	w->task = task;
	w->other = other;
}

/* CPU @cpu changes from its task to @in (-1: idle); @preempt: the
 * outgoing thread stays runnable.  The kernel's time passes. */
static void change(struct rec_ctx *c, unsigned cpu, int32_t in, int preempt)
{
	struct rec_cpu *k = &c->sched.cpus[cpu];
	uint64_t now = c->clock;

	log_switch(c, now + REC_SWITCH_OUT_AT, cpu, 1, preempt, k->cur_idx,
		   in);
	log_switch(c, now + REC_SWITCH_IN_AT, cpu, 0, 0, in, k->cur_idx);
	if (in >= 0)
		k->used = 1;
	k->cur_idx = in;
	c->clock = now + REC_TICKS_SWITCH;
}

static unsigned pick(const struct rec_sched *sc, unsigned idx)
{
	unsigned i;

	if (sc->last[idx] >= 0)
		return ((unsigned) sc->last[idx] + 1) % sc->n;
	for (i = 0; i < sc->n; i++)
		if (!sc->cpus[i].cur)
			return i;
	return 0;
}

void rec_sched_need(struct rec_ctx *c, struct rec_thread *t, unsigned idx)
{
	struct rec_sched *sc = &c->sched;
	struct rec_cpu *k;
	unsigned cpu;

	if (!sc->n || c->failed || room(c, idx) < 0 || sc->on[idx] >= 0)
		return;
	cpu = pick(sc, idx);
	k = &sc->cpus[cpu];
	if (k->cur) {
		/* Preempted: it runs again when the log next says so. */
		unsigned v = (unsigned) k->cur_idx;

		rec_thread_switch_out(k->cur);
		sc->on[v] = -1;
		sc->last[v] = (int32_t) cpu;
	}
	change(c, cpu, (int32_t) idx, k->cur != NULL);
	k->cur = t;
	sc->on[idx] = (int32_t) cpu;
	sc->last[idx] = (int32_t) cpu;
	rec_thread_switch_in(t, &k->s);
}

void rec_sched_release(struct rec_ctx *c, unsigned idx)
{
	struct rec_sched *sc = &c->sched;
	unsigned cpu;

	if (!sc->n || idx >= sc->nth || sc->on[idx] < 0)
		return;
	cpu = (unsigned) sc->on[idx];
	change(c, cpu, -1, 0);
	sc->cpus[cpu].cur = NULL;
	sc->on[idx] = -1;
	sc->last[idx] = (int32_t) cpu;
}

int rec_sched_last_cpu(const struct rec_sched *sc, unsigned idx)
{
	return idx < sc->nth ? sc->last[idx] : -1;
}
