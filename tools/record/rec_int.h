/* Internals shared by the recorder's source files. */
#ifndef HTR_RECORD_INT_H
#define HTR_RECORD_INT_H

#include "ptw.h"
#include "record.h"

#include <intel-pt.h>
#include <stdio.h>
#include <sys/types.h>

/* The cycle model (README.md): one tick per instruction, plus fixed costs
 * for what the kernel does while user tracing is off. */
#define REC_TICKS_SYSCALL 200u
#define REC_TICKS_SIGNAL 1000u
#define REC_TSC_START 1000000u
/* --cpus: the kernel's time around a context switch (switch-out record at
 * +REC_SWITCH_OUT_AT, switch-in at +REC_SWITCH_IN_AT, the incoming thread's
 * TSC packet at +REC_TICKS_SWITCH), far enough apart that perf's inexact
 * conversion of perf time back to TSC cannot reorder them. */
#define REC_TICKS_SWITCH 50u
#define REC_SWITCH_OUT_AT 20u
#define REC_SWITCH_IN_AT 30u

/* ------------------------------------------------------------------ */
/* modules and instructions (image.c) */

struct rec_seg {
	uint64_t vaddr, memsz, offset, filesz;
	unsigned flags;         /* PF_* */
};

struct rec_mod {
	char *path;
	uint64_t bias;          /* runtime address - link address */
	uint64_t base;          /* runtime address of the lowest PT_LOAD */
	uint64_t lo, hi;        /* runtime range of the executable segments */
	uint64_t end;           /* runtime end of the highest PT_LOAD */
	const uint8_t *map;     /* the file, read-only */
	size_t mapsize;
	struct rec_seg segs[16];
	unsigned nsegs;
	int filtered;           /* inside a --filter MODULE */
	uint64_t seen_at;       /* global instruction count at discovery */
	struct rec_func *funcs; /* sized function symbols, by start (link
				 * addresses); read at the first lookup */
	size_t nfuncs;
	int funcs_read;
};

struct rec_func {
	uint64_t start, end;    /* [start, end), link addresses */
	uint64_t func;          /* FUNC's start for FUNC.cold, FUNC.part.N */
	uint64_t entry;         /* its start; FUNC's for FUNC.cold (only
				 * jumped to, never entered) */
};

enum rec_kind {
	RK_OTHER,       /* not a branch */
	RK_COND,        /* jcc, jrcxz, loop: TNT */
	RK_JMP,         /* direct near jmp */
	RK_CALL,        /* direct near call */
	RK_IJMP,        /* indirect near jmp: TIP */
	RK_ICALL,       /* indirect near call: TIP */
	RK_RET,         /* near ret: TNT (compressed) or TIP */
	RK_FAR,         /* far jmp/call/ret, iret: TIP */
	RK_SYSCALL,     /* syscall, sysenter, int n: leaves user mode */
};

struct rec_insn {
	uint64_t pc;
	uint64_t target;        /* direct branches */
	uint8_t len, kind, rep, traced;
};

struct rec_image {
	pid_t pid;              /* qemu, whose maps are the guest's */
	const char *exe;        /* PROG's path */
	struct rec_mod **mods;
	size_t nmods, last;
	const struct rec_filter *filters;
	size_t nfilters;
	struct rec_insn *cache; /* open addressing, keyed by pc */
	size_t ncache, capcache;
	void *zydis;            /* ZydisDecoder */
	char *err;
	size_t errlen;
};

int rec_image_init(struct rec_image *im, const struct rec_filter *f, size_t nf,
		   char *err, size_t errlen);
void rec_image_fini(struct rec_image *im);
/* Read /proc/PID/maps and register the ELF file mapped at @want, and
 * PROG's. */
int rec_image_scan(struct rec_image *im, uint64_t want, uint64_t now);
/* The instruction at @pc (classified once, then cached); NULL with the
 * reason in im->err when its code is in no module. */
const struct rec_insn *rec_image_insn(struct rec_image *im, uint64_t pc,
				      uint64_t now);
struct rec_mod *rec_image_mod(struct rec_image *im, uint64_t pc);
/* The sized function symbol holding runtime address @pc: returns 1 with
 * its runtime entry in *@start (its start; FUNC's for FUNC.cold) and the
 * runtime start of the function it is part of in *@func (FUNC for
 * FUNC.cold and FUNC.part.N), else 0. */
int rec_image_func(struct rec_image *im, uint64_t pc, uint64_t *start,
		   uint64_t *func);

/* ------------------------------------------------------------------ */
/* packet streams (sched.c) */

/* --ring: a stream kept as up to REC_RING_SEGS files (PATH.K, K from 0),
 * each starting with a PSB+ so that what is kept decodes on its own, each
 * at most size / REC_RING_SEGS bytes; when a new one starts and
 * REC_RING_SEGS are kept, the oldest is removed.  So the files never hold
 * more than @size bytes, and at least (REC_RING_SEGS - 1) / REC_RING_SEGS
 * of it once the stream has wrapped. */
#define REC_RING_SEGS 8u
/* What a segment may grow by past the PSB check that let it go on: a
 * PSB+ and the packets of one instruction step. */
#define REC_RING_SLACK 1024u

struct rec_ring_seg {
	uint64_t k;             /* file PATH.K */
	uint64_t start;         /* its first byte's offset in the stream */
	uint64_t bytes;         /* written to it (the last: when asked) */
};

struct rec_ring {
	uint64_t size;          /* bytes kept at most; 0: no ring */
	uint64_t seg_max;       /* size / REC_RING_SEGS */
	struct rec_ring_seg seg[REC_RING_SEGS];    /* kept, oldest first */
	unsigned n;
	uint64_t dropped;       /* bytes of the segments removed */
};

/* Where packets go: a thread's own trace (per-thread mode) or a modelled
 * CPU's (--cpus), which the threads that run on it share. */
struct rec_stream {
	FILE *fp;
	struct ptw w;
	uint64_t psb_last;      /* offset after the last PSB+ */
	int synced;             /* a PSB+ was written: decoders can start */
	uint64_t first_tsc;     /* the clock when the first packet was due */
	struct rec_ring ring;   /* --ring */
	char path[512];
};

/* Returns 0 or -1 (errno).  @ring: --ring's size, or 0 (one file). */
int rec_stream_open(struct rec_stream *s, const char *path, uint64_t now,
		    uint64_t ring);
/* Write what is pending and close.  Returns 0 or -1. */
int rec_stream_close(struct rec_stream *s);
uint64_t rec_stream_bytes(const struct rec_stream *s);
/* A PSB+ is due at the stream's current offset, and the next one about
 * @period bytes later: with a ring, start a new segment file here when
 * the current one could outgrow its share before then.  Pending TNT bits
 * must have been flushed.  Returns 0, or -1 (errno) when a file cannot
 * be made. */
int rec_stream_psb_due(struct rec_stream *s, uint64_t period);
/* The ring's segments as they are now, the packets encoded so far
 * written to the files (a snapshot of a running stream). */
int rec_stream_window(struct rec_stream *s, struct rec_ring *out);
/* Segment @k's file name. */
void rec_ring_path(char *buf, size_t size, const char *path, uint64_t k);

/* ------------------------------------------------------------------ */
/* the modelled scheduler (sched.c): --cpus N */

struct rec_ctx;
struct rec_thread;

/* A context switch as PERF_RECORD_SWITCH_CPU_WIDE says it.  Threads are
 * their index (creation order; perf.c maps it to a tid), -1 the idle
 * task. */
struct rec_switch {
	uint64_t tsc;
	uint32_t cpu;
	uint8_t out;            /* switch-out (else switch-in) */
	uint8_t preempt;        /* out while still runnable */
	uint8_t first;          /* the CPU's first switch-in: trace starts */
	int32_t task;           /* the task switched out or in (sample_id) */
	int32_t other;          /* next (out) or previous (in) task */
};

struct rec_cpu {
	struct rec_stream s;
	struct rec_thread *cur; /* NULL: idle */
	int32_t cur_idx;
	int used;               /* some thread ran here */
};

struct rec_sched {
	unsigned n;             /* 0: per-thread mode */
	struct rec_cpu *cpus;
	/* per thread index: its CPU or -1, the CPU it last ran on or -1 */
	int32_t *on, *last;
	size_t nth;
	struct rec_switch *sw;
	size_t nsw, capsw;
};

int rec_sched_init(struct rec_ctx *c, unsigned ncpus);
void rec_sched_fini(struct rec_sched *sc);
/* Thread @t (index @idx) runs now: put it on a CPU if it is on none,
 * preempting the thread there. */
void rec_sched_need(struct rec_ctx *c, struct rec_thread *t, unsigned idx);
/* Thread @t entered the kernel (a syscall, its exit): it leaves its CPU,
 * which goes idle. */
void rec_sched_release(struct rec_ctx *c, unsigned idx);
/* The CPU thread @idx ran on last, or -1. */
int rec_sched_last_cpu(const struct rec_sched *sc, unsigned idx);

/* ------------------------------------------------------------------ */
/* one guest thread (thread.c) */

/* Thread number @idx (creation order, 0 = the main thread), which is also
 * its index for the scheduler and its files' tN. */
struct rec_thread *rec_thread_new(struct rec_ctx *c, unsigned idx);
/* The next instruction qemu ran on this thread; @sig: a signal was
 * delivered just before it.  Returns 0 or -1 (message in the context). */
int rec_thread_step(struct rec_thread *t, uint64_t pc, int sig);
/* The same with the instruction at hand (rec_image_insn()'s, copied). */
int rec_thread_step_insn(struct rec_thread *t, const struct rec_insn *in,
			 int sig);
/* rec_thread_step_insn() of @n instructions that ran one after the other
 * (a translation block: only the last may be a branch), the signal
 * before the first; faster. */
int rec_thread_run(struct rec_thread *t, const struct rec_insn *in,
		   uint32_t n, int sig);
/* qemu says the instruction it logged last at @pc did not run (a signal
 * stopped it first).  rec_thread_may_retract: 1 if @pc is this thread's
 * pending one; rec_thread_retract: then it did not run (returns 1). */
int rec_thread_may_retract(const struct rec_thread *t, uint64_t pc);
int rec_thread_retract(struct rec_thread *t, uint64_t pc);
/* Whether the thread can run @pc next without a signal coming first: 1
 * it can and nothing else (the instruction before allows only @pc), 0 it
 * cannot (a signal came), -1 either (an indirect branch, a sigreturn, a
 * thread's first line).
 * @sigreturn: the syscall it ran last is one (qemu's strace said so). */
int rec_thread_expects(const struct rec_thread *t, uint64_t pc,
		       int sigreturn);
/* 1 if the instruction logged last on this thread is a syscall that has
 * not been retracted: qemu's strace of it is due (or was just printed).
 * Then *@next (if not NULL) is the address after it, where the syscall
 * returns to unless it is a sigreturn or an exit. */
int rec_thread_in_syscall(const struct rec_thread *t, uint64_t *next);
/* The thread exited (or the log ended): close the trace, and the truth
 * but for its trailer (record.c writes it). */
int rec_thread_end(struct rec_thread *t);
void rec_thread_free(struct rec_thread *t);
unsigned rec_thread_idx(const struct rec_thread *t);

struct rec_thread_stats {
	unsigned idx;
	uint64_t insns, blocks, gaps, bytes;
	uint64_t first_tsc, last_tsc;
	struct rec_ring ring;   /* --ring: the segments kept */
	int running;            /* rec_thread_window(): still running */
	/* The thread has a truth (rec_ctx.truth).  --ring: the window's,
	 * in the thread's truth path (ended) or that path plus ".snap" (a
	 * snapshot), and its counts.  --ring (not --perf-snapshot): a
	 * snapshot's trace ends with @tail bytes in tN.tail in the
	 * temporary directory (rec_thread_window()) */
	int has_truth;
	uint64_t win_insns, win_blocks, win_gaps;
	uint64_t tail;
};
void rec_thread_stats(const struct rec_thread *t, struct rec_thread_stats *s);
/* rec_thread_stats() of a running thread, with its packets so far in
 * its files (--ring: a snapshot).  Returns 0 or -1 (a write failed). */
int rec_thread_window(struct rec_thread *t, struct rec_thread_stats *s);
/* The scheduler takes the thread off its CPU: an asynchronous disable
 * (FUP at the instruction it runs next + TIP.PGD) if tracing is on. */
void rec_thread_switch_out(struct rec_thread *t);
/* The scheduler puts the thread on a CPU whose packets go to @s: a TSC
 * packet before the next TIP.PGE, at once (MODE.Exec + TIP.PGE at the
 * instruction it runs next) if a switch-out disabled tracing. */
void rec_thread_switch_in(struct rec_thread *t, struct rec_stream *s);

/* The recorder's context, shared by its threads. */
struct rec_ctx {
	const struct rec_opts *o;
	/* Truths are written: not o->no_truth, nor o->perf_snapshot (its
	 * snapshots start anywhere in a segment, no truth describes them). */
	int truth;
	struct rec_image im;
	const char *tmpdir;
	const char *exe;        /* PROG's resolved path */
	uint64_t clock;         /* the modelled TSC */
	uint64_t wall_start_ns; /* the wall clock when it read REC_TSC_START */
	uint64_t executed;
	uint64_t oddities;
	pid_t pid;              /* the guest's (qemu-user runs in-process) */
	/* One entry per clone(CLONE_THREAD) in the strace log, in order: its
	 * return value, the new thread's tid, or 0 while (or if) the log has
	 * not said it.  Thread N (N >= 1, creation order) is the N-th. */
	pid_t *clones;
	size_t nclones, capclones;
	size_t clone_wait;      /* the first clone whose return is due */
	struct rec_sched sched; /* --cpus */
	int tcg_cut;            /* the tcg plugin's stream ended early */
	struct rec_live *live;  /* --ring: heartbeat, snapshots, stop */
	char *err;
	size_t errlen;
	int failed;
};

/* The recorder's threads (record.c): the live ones by slot, a summary of
 * every one ended.  The log engine's slot is qemu's CPU index; the tcg
 * engine's is the thread's index (slots are never reused there). */
struct rec_threads;

/* The thread in @slot, created (the next index) if the slot is empty. */
struct rec_thread *rec_threads_at(struct rec_ctx *c, struct rec_threads *ts,
				  unsigned slot);
/* The thread in @slot exited: close its files, keep its figures.  0 or
 * -1 (message in the context). */
int rec_threads_end(struct rec_threads *ts, unsigned slot);

/* Called by the pumps between reads (also after a read a signal
 * interrupted): a heartbeat or a snapshot that is due (--ring).  Returns
 * 1 when the recording must stop (SIGTERM or SIGINT with --ring), else
 * 0. */
int rec_service(struct rec_ctx *c, struct rec_threads *ts);

/* The tcg engine (tcg.c): read the plugin's stream from @fd to its end,
 * answering its questions on @reply.  0 or -1 (message in @c). */
int rec_tcg_pump(struct rec_ctx *c, struct rec_threads *ts, int fd,
		 int reply);

/* The tid of thread @idx (creation order): the real one (the process id
 * for thread 0, clone's return for the others), or, when the log did not
 * say, a synthetic one above Linux's PID_MAX_LIMIT (4194304 + idx).
 * *@real says which. */
pid_t rec_tid(const struct rec_ctx *c, unsigned idx, int *real);

void rec_fail(struct rec_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

/* ------------------------------------------------------------------ */
/* perf.data (perf.c) */

/* A stretch of a trace file. */
struct rec_perf_piece {
	const char *path;
	uint64_t off, size;
};

struct rec_perf_thread {
	unsigned idx;           /* creation order */
	pid_t tid;              /* rec_tid() */
	const char *pt_path;    /* its trace (when !pieces) */
	const struct rec_perf_piece *pieces;      /* --ring: its window, in
						   * order; NULL: pt_path */
	size_t npieces;
	uint64_t aux_offset;    /* the first byte's offset in its stream */
	uint64_t first_tsc;     /* the clock when it started */
	uint64_t last_tsc;      /* the time a decoder reports at its end */
	int running;            /* a snapshot of a running thread: no EXIT */
};

/* --perf-snapshot: one snapshot before the last, as perf record -S
 * writes it (an AUXTRACE record per thread with new data). */
struct rec_perf_snap {
	uint64_t tsc;           /* when it was taken */
	const struct rec_perf_thread *th;   /* threads with data (their idx
					     * is one of the file's) */
	size_t nth;
};

/* Write @out (a new file: the caller renames it into place; a failure
 * removes it) as a perf.data as `perf record -e intel_pt//u` lays it out)
 * from the threads' traces and the modules; with c->o->perf_snapshot, as
 * `perf record -S` lays it out: @snaps first, then @th as the last
 * snapshot.  Returns 0 or -1. */
int rec_perf_write(const char *out, const struct rec_ctx *c, pid_t pid,
		   const char *comm, const struct rec_perf_thread *th,
		   size_t nth, const struct rec_perf_snap *snaps,
		   size_t nsnaps, char *err, size_t errlen);

/* ------------------------------------------------------------------ */
/* LLDB trace bundle (lldb.c): --lldb DIR */

/* Write the bundle `trace load @dir/trace.json` loads into the existing
 * empty directory @dir (the caller renames it into place): each thread's
 * trace of @th, a copy of each module of @c, trace.json.  Returns 0, or
 * -1 with a one-line reason in @err (@dir then holds a part: remove it
 * with rec_lldb_remove()). */
int rec_lldb_write(const char *dir, const struct rec_ctx *c, pid_t pid,
		   const struct rec_perf_thread *th, size_t nth, char *err,
		   size_t errlen);
/* Remove @dir and everything under it (symbolic links not followed). */
void rec_lldb_remove(const char *dir);

#endif
