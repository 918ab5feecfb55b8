/*
 * The tcg engine (`htr record --engine tcg`): qemu-user runs PROG with
 * htr's TCG plugin (tcg/plugin.c), which writes what each guest thread ran
 * as translation blocks and how far each execution of one got
 * (tcg/tcg_stream.h).  This file reads that stream and hands every
 * executed instruction to its thread (thread.c), as the log engine does
 * with qemu's exec log: the packets, the truth, the timing model and the
 * outputs are the same code.
 *
 * Threads are named by their tid (the plugin reads it in the thread), so
 * no guessing which vCPU index is whose.  A signal is seen where a thread
 * starts a block at the entry of a handler rt_sigaction installed and its
 * last instruction does not lead there (qemu delivers signals between
 * blocks, and right after a faulting instruction).
 */
#include "rec_int.h"
#include "tcg/tcg_stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tcg_tb {
	uint32_t n;             /* instructions; 0: no such block */
	uint32_t off;           /* their addresses: pcs[off .. off + n) */
	struct rec_insn *in;    /* decoded at the first run, or NULL */
};

struct tcg_thr {
	pid_t tid;
	unsigned slot;          /* its thread's index (creation order) */
	int live;
	int sigret;             /* its last syscall was rt_sigreturn */
	uint64_t stopped_at;    /* the block it ran last stopped at this
				 * instruction, which started; 0: ran all */
};

struct tcg {
	struct rec_ctx *c;
	struct rec_threads *ts;
	int reply;
	struct tcg_tb *tbs;     /* by id */
	size_t ntbs;
	uint64_t *pcs;
	size_t npcs, cappcs;
	struct tcg_thr *thr;    /* every thread so far, by slot */
	size_t nthr, capthr;
	size_t lastthr;
	uint64_t handlers[64];  /* signal handlers' entries */
	size_t nh;
	int ended;              /* the plugin's end record came */
	int execing;            /* an execve's, whose return has not */
};

static void *grow(struct rec_ctx *c, void *p, size_t *cap, size_t need,
		  size_t elt)
{
	size_t n = *cap ? *cap : 256;
	void *q;

	if (need <= *cap)
		return p;
	while (n < need)
		n *= 2;
	q = realloc(p, n * elt);
	if (!q) {
		rec_fail(c, "out of memory");
		return NULL;
	}
	memset((char *) q + *cap * elt, 0, (n - *cap) * elt);
	*cap = n;
	return q;
}

static uint64_t get64(const uint32_t *p)
{
	return (uint64_t) p[0] | (uint64_t) p[1] << 32;
}

static void trans(struct tcg *g, const uint32_t *p, size_t avail)
{
	uint32_t id = p[0] >> 2, n = p[1], i;
	uint64_t pc = get64(p + 2);
	const uint8_t *sz = (const uint8_t *) (p + 4);
	size_t cap = g->ntbs;

	if (avail < 4 + (n + 3) / 4 || !n || n > 512) {
		rec_fail(g->c, "tcg: a corrupt translation record");
		return;
	}
	g->tbs = grow(g->c, g->tbs, &cap, (size_t) id + 1, sizeof(*g->tbs));
	g->ntbs = cap;
	g->pcs = grow(g->c, g->pcs, &g->cappcs, g->npcs + n, sizeof(*g->pcs));
	if (!g->tbs || !g->pcs)
		return;
	g->tbs[id].n = n;
	g->tbs[id].off = (uint32_t) g->npcs;
	if (g->npcs + n > UINT32_MAX) {
		rec_fail(g->c, "tcg: more than 2^32 translated instructions");
		return;
	}
	for (i = 0; i < n; i++) {
		g->pcs[g->npcs++] = pc;
		pc += sz[i];
	}
}

/* qemu waits until the module holding @pc is known: read the maps now,
 * while it is surely mapped, and say where it is. */
static void sync_at(struct tcg *g, uint64_t pc)
{
	struct rec_image *im = &g->c->im;
	struct rec_mod *m = rec_image_mod(im, pc);
	uint64_t r[2] = { pc & ~(uint64_t) 4095, (pc & ~(uint64_t) 4095) +
			  4096 };
	const char *s;
	size_t left;

	if (!m && rec_image_scan(im, pc, g->c->executed) == 0)
		m = rec_image_mod(im, pc);
	if (m && m->hi > m->lo && pc >= m->lo && pc < m->hi) {
		r[0] = m->lo;
		r[1] = m->hi;
	}
	/* Code in no module fails when it runs (rec_image_insn says why). */
	s = (const char *) r;
	left = sizeof(r);
	while (left) {
		ssize_t w = write(g->reply, s, left);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rec_fail(g->c, "tcg: cannot answer qemu: %s",
				 strerror(errno));
			return;
		}
		s += w;
		left -= (size_t) w;
	}
}

static struct tcg_thr *thread_by_tid(struct tcg *g, pid_t tid)
{
	struct tcg_thr *th;
	size_t i;

	if (g->lastthr < g->nthr && g->thr[g->lastthr].tid == tid &&
	    g->thr[g->lastthr].live)
		return &g->thr[g->lastthr];
	for (i = g->nthr; i-- > 0;)
		if (g->thr[i].live && g->thr[i].tid == tid) {
			g->lastthr = i;
			return &g->thr[i];
		}
	/* A new thread: the next index.  Its tid is real (rec_tid). */
	g->thr = grow(g->c, g->thr, &g->capthr, g->nthr + 1, sizeof(*g->thr));
	if (!g->thr)
		return NULL;
	if (g->nthr) {
		struct rec_ctx *c = g->c;

		c->clones = grow(c, c->clones, &c->capclones, g->nthr,
				 sizeof(*c->clones));
		if (!c->clones)
			return NULL;
		c->clones[g->nthr - 1] = tid;
		if (c->nclones < g->nthr)
			c->nclones = g->nthr;
	}
	th = &g->thr[g->nthr];
	th->tid = tid;
	th->slot = (unsigned) g->nthr;
	th->live = 1;
	th->sigret = 0;
	if (!rec_threads_at(g->c, g->ts, th->slot))
		return NULL;
	g->lastthr = g->nthr++;
	return th;
}

static int is_handler(const struct tcg *g, uint64_t pc)
{
	size_t i;

	for (i = 0; i < g->nh; i++)
		if (g->handlers[i] == pc)
			return 1;
	return 0;
}

static void add_handler(struct tcg *g, uint64_t pc)
{
	if (is_handler(g, pc))
		return;
	if (g->nh == sizeof(g->handlers) / sizeof(g->handlers[0]))
		memmove(g->handlers, g->handlers + 1,
			--g->nh * sizeof(g->handlers[0]));
	g->handlers[g->nh++] = pc;
}

/* Block @tb's instructions, decoded from the files once (as the log
 * engine does at each address), checked against qemu's sizes. */
static int decode(struct tcg *g, struct tcg_tb *tb)
{
	const uint64_t *pc = g->pcs + tb->off;
	struct rec_insn *in = malloc(tb->n * sizeof(*in));
	uint32_t i;

	if (!in) {
		rec_fail(g->c, "out of memory");
		return -1;
	}
	for (i = 0; i < tb->n; i++) {
		const struct rec_insn *d = rec_image_insn(&g->c->im, pc[i],
							  g->c->executed);

		if (!d) {
			char msg[512];

			snprintf(msg, sizeof(msg), "%s", g->c->im.err);
			rec_fail(g->c, "%s", msg);
			free(in);
			return -1;
		}
		in[i] = *d;
		if (i + 1 < tb->n && pc[i] + d->len != pc[i + 1]) {
			rec_fail(g->c, "tcg: qemu ran %llu bytes at %#llx, "
				 "the file holds a %u-byte instruction there "
				 "(code changed at run time?)",
				 (unsigned long long) (pc[i + 1] - pc[i]),
				 (unsigned long long) pc[i], d->len);
			free(in);
			return -1;
		}
	}
	tb->in = in;
	return 0;
}

/* Thread @th ran the first @count instructions of block @id. */
static void run(struct tcg *g, struct tcg_thr *th, uint32_t id,
		uint32_t count)
{
	struct rec_thread *t = rec_threads_at(g->c, g->ts, th->slot);
	const uint64_t *pc;
	struct tcg_tb *tb;
	int sig = 0, again;

	if (!t)
		return;
	if (id >= g->ntbs || !g->tbs[id].n || count > g->tbs[id].n ||
	    !count) {
		rec_fail(g->c, "tcg: a block that was never translated ran");
		return;
	}
	tb = &g->tbs[id];
	pc = g->pcs + tb->off;
	if (!tb->in && decode(g, tb) < 0)
		return;
	again = th->stopped_at && th->stopped_at == pc[0];
	th->stopped_at = count < tb->n ? pc[count - 1] : 0;
	if (again) {
		/* The block before stopped at this instruction, which
		 * qemu now runs again in a new block: it did not retire
		 * (an atomic operation qemu redoes alone, a store into
		 * code it translated), it runs once. */
		if (count > 1)
			rec_thread_run(t, tb->in + 1, count - 1, 0);
		return;
	}
	if (g->nh && is_handler(g, pc[0]))
		sig = rec_thread_expects(t, pc[0], th->sigret) != 1;
	th->sigret = 0;
	rec_thread_run(t, tb->in, count, sig);
}

static void event(struct tcg *g, struct tcg_thr *th, const uint32_t *p,
		  uint32_t kind, uint32_t nw)
{
	switch (kind) {
	case TE_SYSCALL:
		if (!th || nw < 2)
			break;
		th->sigret = get64(p) == 15;
		if (get64(p) == 60) {
			/* exit: this thread's last instruction */
			th->live = 0;
			rec_threads_end(g->ts, th->slot);
		}
		break;
	case TE_SIGACT:
		if (nw >= 4)
			add_handler(g, get64(p + 2));
		break;
	case TE_SYNC:
		if (nw >= 2)
			sync_at(g, get64(p));
		break;
	case TE_END:
		g->ended = 1;
		break;
	case TE_EXEC:
		g->execing = 1;
		break;
	case TE_SYSRET:
		/* An execve that returns failed: the program goes on. */
		if (nw >= 2 && (get64(p) == 59 || get64(p) == 322))
			g->execing = 0;
		break;
	default:
		break;
	}
}

/* One chunk's records. */
static void chunk(struct tcg *g, pid_t tid, const uint32_t *p, size_t n)
{
	struct tcg_thr *th = NULL;
	const uint32_t *e = p + n;

	if (tid) {
		th = thread_by_tid(g, tid);
		if (!th)
			return;
	}
	while (p < e && !g->c->failed) {
		uint32_t w = p[0];

		switch (w & 3) {
		case TS_EXEC:
			if (!th || !th->live)
				goto bad;
			run(g, th, w >> 2, w >> 2 < g->ntbs ?
			    g->tbs[w >> 2].n : 0);
			p++;
			break;
		case TS_PART:
			if (!th || !th->live || e - p < 2)
				goto bad;
			run(g, th, w >> 2, p[1]);
			p += 2;
			break;
		case TS_TRANS:
			if (e - p < 4)
				goto bad;
			trans(g, p, (size_t) (e - p));
			p += 4 + (p[1] + 3) / 4;
			break;
		default: {
			uint32_t nw = w >> 10;

			if ((size_t) (e - p) < 1 + (size_t) nw)
				goto bad;
			event(g, th, p + 1, (w >> 2) & 0xff, nw);
			p += 1 + nw;
			break;
		}
		}
	}
	return;
bad:
	rec_fail(g->c, "tcg: a corrupt record from the plugin");
}

int rec_tcg_pump(struct rec_ctx *c, struct rec_threads *ts, int fd,
		 int reply)
{
	struct tcg g;
	size_t cap = 1u << 20, len = 0, off;
	char *buf = malloc(cap);

	memset(&g, 0, sizeof(g));
	g.c = c;
	g.ts = ts;
	g.reply = reply;
	if (!buf) {
		rec_fail(c, "out of memory");
		return -1;
	}
	for (;;) {
		ssize_t r;

		if (rec_service(c, ts)) {
			g.ended = 1;    /* stopped on purpose: not cut */
			break;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t) r;
		off = 0;
		while (!c->failed && len - off >= sizeof(struct ts_chunk)) {
			struct ts_chunk h;
			size_t need;

			memcpy(&h, buf + off, sizeof(h));
			if (h.magic != TS_MAGIC) {
				rec_fail(c, "tcg: the plugin's stream is "
					 "corrupt");
				break;
			}
			need = sizeof(h) + (size_t) h.words * 4;
			if (len - off < need) {
				if (need > cap) {
					char *nb = realloc(buf, need * 2);

					if (!nb) {
						rec_fail(c, "out of memory");
						break;
					}
					buf = nb;
					cap = need * 2;
				}
				break;
			}
			if (h.pid == (int32_t) c->pid)
				chunk(&g, h.tid, (const uint32_t *)
				      (const void *) (buf + off + sizeof(h)),
				      h.words);
			off += need;
		}
		if (c->failed)
			break;
		memmove(buf, buf + off, len - off);
		len -= off;
	}
	free(buf);
	/* qemu died or the plugin could not write (the guest closed its
	 * pipe): what came is not the whole run.  (A guest killed by a
	 * signal fails anyway, with the signal named; one that replaced
	 * itself with execve is recorded up to there, as with the log.) */
	if (!c->failed && !g.ended && !g.execing && g.nthr)
		c->tcg_cut = 1;
	for (off = 0; off < g.ntbs; off++)
		free(g.tbs[off].in);
	free(g.tbs);
	free(g.pcs);
	free(g.thr);
	return c->failed ? -1 : 0;
}
