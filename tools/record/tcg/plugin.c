/*
 * htr record's QEMU TCG plugin (`htr record --engine tcg`): qemu-user
 * loads it with `-plugin PATH,out=FD,in=FD` and it tells the recorder,
 * through the pipe FD out, what the guest ran (tcg_stream.h): each
 * translation block once, when it is translated (its address and its
 * instructions' sizes), then one record per execution of a block on a
 * thread (how many of its instructions ran), the syscalls and the signal
 * handlers installed.  The recorder replies through FD in when it was
 * asked where a module is.
 *
 * How far a block got: every instruction has an exec callback that stores
 * (block, index) in its vCPU's state; the first instruction of a block
 * emits the record of the block that ran before on that vCPU.  A block
 * that a fault (SIGSEGV) stops midway is then counted up to the faulting
 * instruction, which started (as qemu's exec log counts it).  Asynchronous
 * signals come between blocks.
 *
 * QEMU ships no header for plugins in Debian 12: the few types and
 * functions used are declared below from QEMU's plugin API documentation
 * (API version 1, qemu 7.2), and the version is checked at load.
 */
#define _GNU_SOURCE
#include "tcg_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------ */
/* QEMU's plugin API, version 1 (the few parts used) */

typedef uint64_t qp_id;

/* What qemu tells qemu_plugin_install(). */
struct qp_info {
	const char *target_name;
	struct {
		int min;        /* the oldest API version qemu accepts */
		int cur;        /* its own */
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	} u;
};

struct qp_tb;           /* opaque: a block being translated */
struct qp_insn;         /* opaque: one of its instructions */

enum { QP_CB_NO_REGS = 0 };

typedef void (*qp_vcpu_simple_cb)(qp_id id, unsigned int vcpu);
typedef void (*qp_vcpu_udata_cb)(unsigned int vcpu, void *udata);
typedef void (*qp_udata_cb)(qp_id id, void *udata);
typedef void (*qp_tb_trans_cb)(qp_id id, struct qp_tb *tb);
typedef void (*qp_syscall_cb)(qp_id id, unsigned int vcpu, int64_t num,
			      uint64_t a1, uint64_t a2, uint64_t a3,
			      uint64_t a4, uint64_t a5, uint64_t a6,
			      uint64_t a7, uint64_t a8);
typedef void (*qp_syscall_ret_cb)(qp_id id, unsigned int vcpu, int64_t num,
				  int64_t ret);

void qemu_plugin_register_vcpu_init_cb(qp_id id, qp_vcpu_simple_cb cb);
void qemu_plugin_register_vcpu_tb_trans_cb(qp_id id, qp_tb_trans_cb cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qp_insn *insn,
					    qp_vcpu_udata_cb cb, int flags,
					    void *udata);
void qemu_plugin_register_vcpu_syscall_cb(qp_id id, qp_syscall_cb cb);
void qemu_plugin_register_vcpu_syscall_ret_cb(qp_id id,
					      qp_syscall_ret_cb cb);
void qemu_plugin_register_atexit_cb(qp_id id, qp_udata_cb cb, void *udata);
size_t qemu_plugin_tb_n_insns(const struct qp_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qp_tb *tb);
struct qp_insn *qemu_plugin_tb_get_insn(const struct qp_tb *tb, size_t idx);
size_t qemu_plugin_insn_size(const struct qp_insn *insn);
uint64_t qemu_plugin_insn_vaddr(const struct qp_insn *insn);
void *qemu_plugin_insn_haddr(const struct qp_insn *insn);

#define QP_API_VERSION 1

EXPORT int qemu_plugin_version = QP_API_VERSION;

/* ------------------------------------------------------------------ */
/* state */

#define MAX_VCPUS 4096
#define BUF_WORDS (1024u)       /* a vCPU's buffer: 4 KiB */
#define IDX_BITS 10u            /* TCG_MAX_INSNS is 512 */
#define IDX_MASK 0x1ffu
#define LAST_BIT 0x200u

/* One vCPU: the thread that runs it, what it ran not yet written. */
struct vst {
	uintptr_t cur;          /* the block running: tb << IDX_BITS |
				 * last? | index of its last instruction
				 * started; 0: none */
	pid_t tid;              /* 0: not known (yet, again) */
	uint32_t n;
	uint32_t buf[BUF_WORDS];
};

static struct vst *vcpus[MAX_VCPUS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int out_fd = -1, in_fd = -1;
static pid_t pid0;
static int dead;                /* the recorder went away, or a forked
				 * child: nothing more is written */
static uint32_t ntb;            /* block ids given (under lock) */
static uint32_t *tbuf;          /* translations not yet written */
static size_t tn, tcap;
static intptr_t guest_base = -1;
/* Executable ranges of modules the recorder knows: no need to ask. */
static struct {
	uint64_t lo, hi;
} known[1024];
static size_t nknown;

static void die(const char *msg)
{
	char b[256];
	int n = snprintf(b, sizeof(b), "htr-record-tcg: %s\n", msg);

	if (n > 0 && write(2, b, (size_t) n) < 0)
		_exit(125);
	_exit(125);
}

static int write_all(const void *p, size_t len)
{
	const char *s = p;

	while (len) {
		ssize_t w = write(out_fd, s, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		s += w;
		len -= (size_t) w;
	}
	return 0;
}

/* Under lock. */
static void write_chunk(const uint32_t *w, size_t n, pid_t tid)
{
	struct ts_chunk h;

	if (dead || !n)
		return;
	if (getpid() != pid0) {
		/* A fork of the guest: its own process, not recorded. */
		dead = 1;
		return;
	}
	h.magic = TS_MAGIC;
	h.words = (uint32_t) n;
	h.pid = pid0;
	h.tid = tid;
	if (write_all(&h, sizeof(h)) < 0 ||
	    write_all(w, n * sizeof(*w)) < 0) {
		/* The recorder went away, or the guest closed the pipe:
		 * the recording is lost (it has no end record). */
		dead = 1;
	}
}

/* Under lock: the translations first, which the chunk may run. */
static void flush_trans(void)
{
	write_chunk(tbuf, tn, 0);
	tn = 0;
}

static void flush(struct vst *v)
{
	pthread_mutex_lock(&lock);
	flush_trans();
	write_chunk(v->buf, v->n, v->tid);
	v->n = 0;
	pthread_mutex_unlock(&lock);
}

static struct vst *vst_of(unsigned int vcpu)
{
	struct vst *v;

	if (vcpu >= MAX_VCPUS)
		die("more than 4096 threads at once");
	v = vcpus[vcpu];
	if (!v) {
		v = calloc(1, sizeof(*v));
		if (!v)
			die("out of memory");
		pthread_mutex_lock(&lock);
		vcpus[vcpu] = v;
		pthread_mutex_unlock(&lock);
	}
	return v;
}

/* Room for @k words in @v's buffer; the owning thread calls it. */
static uint32_t *room(struct vst *v, uint32_t k)
{
	uint32_t *p;

	if (!v->tid)
		v->tid = (pid_t) syscall(SYS_gettid);
	if (v->n + k > BUF_WORDS)
		flush(v);
	p = &v->buf[v->n];
	v->n += k;
	return p;
}

/* The block @v ran last is over: its record. */
static void put_exec(struct vst *v)
{
	uintptr_t u = v->cur;
	uint32_t tb = (uint32_t) (u >> IDX_BITS);
	uint32_t *p;

	if (!u)
		return;
	v->cur = 0;
	if (u & LAST_BIT) {
		p = room(v, 1);
		p[0] = tb << 2 | TS_EXEC;
	} else {
		p = room(v, 2);
		p[0] = tb << 2 | TS_PART;
		p[1] = (uint32_t) (u & IDX_MASK) + 1;
	}
}

static void put64(uint32_t *p, uint64_t v)
{
	p[0] = (uint32_t) v;
	p[1] = (uint32_t) (v >> 32);
}

static uint32_t *event(struct vst *v, uint32_t kind, uint32_t nwords)
{
	uint32_t *p = room(v, 1 + nwords);

	p[0] = kind << 2 | nwords << 10 | TS_EVENT;
	return p + 1;
}

/* ------------------------------------------------------------------ */
/* callbacks */

static void on_insn(unsigned int vcpu, void *udata)
{
	struct vst *v = vcpu < MAX_VCPUS ? vcpus[vcpu] : NULL;
	uintptr_t u = (uintptr_t) udata;

	if (!v)
		v = vst_of(vcpu);
	if (!(u & IDX_MASK))
		put_exec(v);
	v->cur = u;
}

static void on_vcpu_init(qp_id id, unsigned int vcpu)
{
	struct vst *v = vst_of(vcpu);

	(void) id;
	/* A new thread (qemu-user gives a thread that exited its index to
	 * the next one): its tid is read when it first runs. */
	v->tid = 0;
	v->cur = 0;
}

static uint32_t *tspace(size_t k)
{
	if (tn + k > tcap) {
		size_t n = tcap ? tcap * 2 : 1u << 16;
		uint32_t *p;

		while (n < tn + k)
			n *= 2;
		p = realloc(tbuf, n * sizeof(*p));
		if (!p)
			die("out of memory");
		tbuf = p;
		tcap = n;
	}
	tn += k;
	return tbuf + tn - k;
}

static int is_known(uint64_t pc)
{
	size_t i;

	for (i = 0; i < nknown; i++)
		if (pc >= known[i].lo && pc < known[i].hi)
			return 1;
	return 0;
}

static int read_all(void *p, size_t len)
{
	char *s = p;

	while (len) {
		ssize_t r = read(in_fd, s, len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		s += r;
		len -= (size_t) r;
	}
	return 0;
}

/* Under lock: the recorder reads the maps while @pc's module is mapped. */
static void sync_at(uint64_t pc)
{
	uint32_t *p = tspace(3);
	uint64_t r[2];

	p[0] = TE_SYNC << 2 | 2u << 10 | TS_EVENT;
	put64(p + 1, pc);
	flush_trans();
	if (dead)
		return;
	if (read_all(r, sizeof(r)) < 0) {
		dead = 1;
		return;
	}
	if (r[1] > r[0] && nknown < sizeof(known) / sizeof(known[0])) {
		known[nknown].lo = r[0];
		known[nknown].hi = r[1];
		nknown++;
	}
}

static void on_trans(qp_id id, struct qp_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb), i;
	uint64_t pc = qemu_plugin_tb_vaddr(tb), last = pc;
	uint32_t *p, t;
	uint8_t *sz;

	(void) id;
	if (!n)
		return;
	if (n > IDX_MASK + 1)
		die("a translation block of more than 512 instructions");
	pthread_mutex_lock(&lock);
	if (ntb == TS_MAX_TB) {
		pthread_mutex_unlock(&lock);
		die("more than 2^30 translation blocks");
	}
	t = ++ntb;
	p = tspace(4 + (n + 3) / 4);
	p[0] = t << 2 | TS_TRANS;
	p[1] = (uint32_t) n;
	put64(p + 2, pc);
	sz = (uint8_t *) (p + 4);
	memset(sz, 0, (n + 3) / 4 * 4);
	for (i = 0; i < n; i++) {
		struct qp_insn *in = qemu_plugin_tb_get_insn(tb, i);
		uintptr_t u = (uintptr_t) t << IDX_BITS | i;

		if (i + 1 == n)
			u |= LAST_BIT;
		sz[i] = (uint8_t) qemu_plugin_insn_size(in);
		last = qemu_plugin_insn_vaddr(in);
		if (guest_base == -1)
			guest_base = (intptr_t) qemu_plugin_insn_haddr(in) -
				     (intptr_t) last;
		qemu_plugin_register_vcpu_insn_exec_cb(in, on_insn,
						       QP_CB_NO_REGS,
						       (void *) u);
	}
	if (!is_known(pc))
		sync_at(pc);
	if (!is_known(last))
		sync_at(last);
	pthread_mutex_unlock(&lock);
}

/* Read @len bytes of guest memory at @addr; 0 or -1 (a bad pointer). */
static int guest_read(uint64_t addr, void *to, size_t len)
{
	struct iovec l = { to, len };
	struct iovec r = { (void *) (uintptr_t) (addr + (uint64_t)
			   (guest_base == -1 ? 0 : guest_base)), len };

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) ==
	       (ssize_t) len ? 0 : -1;
}

static void on_syscall(qp_id id, unsigned int vcpu, int64_t num,
		       uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
		       uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8)
{
	struct vst *v = vst_of(vcpu);
	uint32_t *p;
	uint64_t h;

	(void) id;
	(void) a7;
	(void) a8;
	/* The syscall ended its block. */
	put_exec(v);
	p = event(v, TE_SYSCALL, 14);
	put64(p, (uint64_t) num);
	put64(p + 2, a1);
	put64(p + 4, a2);
	put64(p + 6, a3);
	put64(p + 8, a4);
	put64(p + 10, a5);
	put64(p + 12, a6);
	/* rt_sigaction(sig, act, ...): act->sa_handler first */
	if (num == 13 && a2 && guest_read(a2, &h, sizeof(h)) == 0 && h > 1) {
		p = event(v, TE_SIGACT, 4);
		put64(p, a1);
		put64(p + 2, h);
	}
	/* execve, execveat: the stream may end here (the new program runs
	 * without qemu). */
	if (num == 59 || num == 322)
		event(v, TE_EXEC, 0);
	/* Written at every syscall: the threads' records interleave as
	 * they ran, to a syscall (--cpus schedules at syscalls). */
	flush(v);
	if (num == 60) {
		/* exit: the thread ends, its vCPU goes to the next. */
		v->tid = 0;
	}
}

static void on_syscall_ret(qp_id id, unsigned int vcpu, int64_t num,
			   int64_t ret)
{
	struct vst *v = vst_of(vcpu);
	uint32_t *p = event(v, TE_SYSRET, 4);

	(void) id;
	put64(p, (uint64_t) num);
	put64(p + 2, (uint64_t) ret);
}

static void at_exit(qp_id id, void *udata)
{
	size_t i;

	(void) id;
	(void) udata;
	/* Threads killed by another's exit_group: the block each was in
	 * ran up to its last instruction started. */
	for (i = 0; i < MAX_VCPUS; i++)
		if (vcpus[i] && vcpus[i]->tid) {
			put_exec(vcpus[i]);
			flush(vcpus[i]);
		}
	pthread_mutex_lock(&lock);
	flush_trans();
	{
		uint32_t end = TE_END << 2 | TS_EVENT;

		write_chunk(&end, 1, 0);
	}
	pthread_mutex_unlock(&lock);
}

/* A fork of the guest (qemu-user forks with it) is not recorded; the lock
 * may have been held by a thread that the child does not have. */
static void at_fork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	dead = 1;
}

static int fd_arg(const char *a, const char *name, int *fd)
{
	size_t n = strlen(name);
	char *e;
	long v;

	if (strncmp(a, name, n) || a[n] != '=')
		return 0;
	v = strtol(a + n + 1, &e, 10);
	if (*e || v < 0 || v > 65535)
		die("bad plugin argument");
	*fd = (int) v;
	return 1;
}

EXPORT int qemu_plugin_install(qp_id id, const struct qp_info *info,
			       int argc, char **argv)
{
	int i;

	if (info->version.min > QP_API_VERSION ||
	    info->version.cur < QP_API_VERSION) {
		fprintf(stderr, "htr-record-tcg: qemu's plugin API is version "
			"%d (oldest accepted %d), this plugin speaks %d\n",
			info->version.cur, info->version.min, QP_API_VERSION);
		return -1;
	}
	if (info->system_emulation || strcmp(info->target_name, "x86_64")) {
		fprintf(stderr, "htr-record-tcg: qemu-user for x86_64 only "
			"(this is %s%s)\n", info->target_name,
			info->system_emulation ? ", system emulation" : "");
		return -1;
	}
	for (i = 0; i < argc; i++)
		if (!fd_arg(argv[i], "out", &out_fd) &&
		    !fd_arg(argv[i], "in", &in_fd)) {
			fprintf(stderr, "htr-record-tcg: unknown argument %s\n",
				argv[i]);
			return -1;
		}
	if (out_fd < 0 || in_fd < 0) {
		fprintf(stderr, "htr-record-tcg: needs out=FD,in=FD\n");
		return -1;
	}
	/* Programs the guest executes do not inherit them. */
	fcntl(out_fd, F_SETFD, FD_CLOEXEC);
	fcntl(in_fd, F_SETFD, FD_CLOEXEC);
	pid0 = getpid();
	pthread_atfork(NULL, NULL, at_fork_child);
	qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
	qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
	qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_ret);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
