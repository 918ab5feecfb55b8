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

/* ------------------------------------------------------------------ */
/* one guest thread (thread.c) */

struct rec_ctx;
struct rec_thread;

struct rec_thread *rec_thread_new(struct rec_ctx *c, unsigned cpu);
/* The next instruction qemu ran on this thread; @sig: a signal was
 * delivered just before it.  Returns 0 or -1 (message in the context). */
int rec_thread_step(struct rec_thread *t, uint64_t pc, int sig);
/* qemu says the instruction it logged last at @pc did not run (a signal
 * stopped it first).  Returns 1 if @pc is this thread's pending one. */
int rec_thread_retract(struct rec_thread *t, uint64_t pc);
/* The log ended: close the trace and the truth. */
int rec_thread_end(struct rec_thread *t);
void rec_thread_free(struct rec_thread *t);

struct rec_thread_stats {
	unsigned cpu;
	uint64_t insns, blocks, gaps, bytes;
	uint64_t first_tsc, last_tsc;
};
void rec_thread_stats(const struct rec_thread *t, struct rec_thread_stats *s);

/* The recorder's context, shared by its threads. */
struct rec_ctx {
	const struct rec_opts *o;
	struct rec_image im;
	const char *tmpdir;
	const char *exe;        /* PROG's resolved path */
	uint64_t clock;         /* the modelled TSC */
	uint64_t executed;
	uint64_t oddities;
	pid_t pid;              /* the guest's (qemu-user runs in-process) */
	/* tids of the threads PROG created, in order (clone's return values
	 * in the strace log); thread N (N >= 1) is the N-th */
	pid_t *clones;
	size_t nclones, capclones;
	int clone_open;         /* a clone(CLONE_THREAD) awaits its return */
	char *err;
	size_t errlen;
	int failed;
};

/* The tid of the guest thread qemu ran as virtual CPU @cpu: the real one
 * (the process id for CPU 0, clone's return for the others), or, when the
 * log did not say, a synthetic one above Linux's PID_MAX_LIMIT (4194304 +
 * cpu).  *@real says which. */
pid_t rec_tid(const struct rec_ctx *c, unsigned cpu, int *real);

void rec_fail(struct rec_ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 2, 3)))
#endif
	;

/* ------------------------------------------------------------------ */
/* perf.data (perf.c) */

struct rec_perf_thread {
	unsigned cpu;
	pid_t tid;              /* rec_tid() */
	const char *pt_path;    /* its trace */
	uint64_t first_tsc;     /* the clock when it started */
	uint64_t last_tsc;      /* the time a decoder reports at its end */
};

/* Write @out (a new file: the caller renames it into place; a failure
 * removes it) as a perf.data as `perf record -e intel_pt//u` lays it out)
 * from the threads' traces and the modules.  Returns 0 or -1. */
int rec_perf_write(const char *out, const struct rec_ctx *c, pid_t pid,
		   const char *comm, const struct rec_perf_thread *th,
		   size_t nth, char *err, size_t errlen);

#endif
