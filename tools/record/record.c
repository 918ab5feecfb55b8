/*
 * rec_run(): check PROG, start qemu-user with htr's TCG plugin (the tcg
 * engine: tcg.c reads its stream) or with its execution log (the log
 * engine, parsed here) on a pipe, hand every executed address to its
 * thread, then publish the outputs atomically (a temporary directory or
 * file renamed at the end).
 *
 * qemu 7.2's log: `-singlestep` makes every guest instruction a block of
 * its own, `-d exec,nochain` logs "Trace CPU: HOSTPTR [CSBASE/PC/FLAGS/
 * CFLAGS] SYM" before each one runs (CPU is the thread: qemu-user gives
 * every thread its own virtual CPU, until the thread exits: then the next
 * thread created may get the same index), `-d strace` adds every syscall
 * ("PID NAME(ARGS)", then " = RET" once it returned) and "--- SIGxxx {...}
 * ---" when a signal is delivered.  Lines of different threads interleave,
 * and a strace line may be split by another thread's lines.
 */
#include "rec_int.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void rec_opts_init(struct rec_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->out = "perf.data";
	o->psb_period = 4096;
	o->tsc_gran = 64;
	o->qemu = "qemu-x86_64";
	o->engine = REC_ENGINE_AUTO;
}

const char *rec_plugin_path(void)
{
	static char exe_rel[PATH_MAX + 64];
	const char *e = getenv("HTR_RECORD_PLUGIN");
	char self[PATH_MAX];
	ssize_t n;

	if (e && *e)
		return e;
#ifdef HTR_TCG_PLUGIN_BUILD
	if (access(HTR_TCG_PLUGIN_BUILD, R_OK) == 0)
		return HTR_TCG_PLUGIN_BUILD;
#endif
#ifdef HTR_TCG_PLUGIN_INSTALL
	if (access(HTR_TCG_PLUGIN_INSTALL, R_OK) == 0)
		return HTR_TCG_PLUGIN_INSTALL;
#endif
	/* Beside the program, as a relocated build or install has it. */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		char *slash;

		self[n] = 0;
		slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
#ifdef HTR_TCG_PLUGIN_REL
			snprintf(exe_rel, sizeof(exe_rel), "%s/../%s", self,
				 HTR_TCG_PLUGIN_REL);
#else
			snprintf(exe_rel, sizeof(exe_rel),
				 "%s/../lib/htr/htr-record-tcg.so", self);
#endif
			if (access(exe_rel, R_OK) == 0)
				return exe_rel;
		}
	}
	return NULL;
}

void rec_fail(struct rec_ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (c->failed)
		return;
	c->failed = 1;
	va_start(ap, fmt);
	vsnprintf(c->err, c->errlen, fmt, ap);
	va_end(ap);
}

static int errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* PROG as execvp would find it. */
static char *resolve(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(prog, '/'))
		return realpath(prog, NULL);
	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int) n,
			 n ? path : ".", prog);
		if (access(buf, X_OK) == 0)
			return realpath(buf, NULL);
		path += n;
		if (*path == ':')
			path++;
	}
	errno = ENOENT;
	return NULL;
}

static int check_prog(const char *prog, char **out, char *err, size_t errlen)
{
	unsigned char h[sizeof(Elf64_Ehdr)];
	char *p = resolve(prog);
	ssize_t n;
	int fd;

	if (!p)
		return errf(err, errlen, "%s: %s", prog, strerror(errno));
	fd = open(p, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, h, sizeof(h));
	if (fd >= 0)
		close(fd);
	if (n < 0) {
		errf(err, errlen, "%s: %s", prog, strerror(errno));
		free(p);
		return -1;
	}
	if (n < (ssize_t) sizeof(h) || memcmp(h, ELFMAG, SELFMAG) ||
	    h[EI_CLASS] != ELFCLASS64 ||
	    ((const Elf64_Ehdr *) h)->e_machine != EM_X86_64) {
		errf(err, errlen, "%s: not an x86-64 ELF executable%s", prog,
		     n >= 2 && h[0] == '#' && h[1] == '!' ?
		     " (a script: record its interpreter)" : "");
		free(p);
		return -1;
	}
	*out = p;
	return 0;
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[PATH_MAX];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

/* A temporary directory beside @final, so that the last rename stays on
 * one file system. */
static char *tmp_beside(const char *final, char *err, size_t errlen)
{
	size_t n = strlen(final) + 32;
	char *t = malloc(n);

	if (!t)
		return NULL;
	snprintf(t, n, "%s.rec-XXXXXX", final);
	if (!mkdtemp(t)) {
		errf(err, errlen, "%s: cannot write here: %s", final,
		     strerror(errno));
		free(t);
		return NULL;
	}
	return t;
}

struct qemu {
	pid_t pid;
	int fd;
	int reply;              /* tcg: the plugin's questions' answers */
};

/* Start qemu: with -singlestep and its exec log on a pipe (the log
 * engine), or with htr's plugin writing its stream on one and reading
 * answers from another (tcg). */
static int spawn(struct qemu *q, const struct rec_opts *o, const char *exe,
		 char *const argv[], char *err, size_t errlen)
{
	const char *qemu = o->qemu;
	int lp[2], rp[2] = { -1, -1 }, ep[2], e = 0, k = 0;
	size_t n, i;
	char dpath[32], parg[PATH_MAX + 64];
	char **av;
	ssize_t r;

	for (n = 0; argv[n]; n++)
		;
	av = calloc(n + 10, sizeof(*av));
	if (!av)
		return errf(err, errlen, "out of memory");
	if (o->engine == REC_ENGINE_TCG) {
		const char *plugin = o->plugin ? o->plugin : rec_plugin_path();

		if (!plugin) {
			free(av);
			return errf(err, errlen, "the tcg engine's plugin "
				    "(htr-record-tcg.so) is not installed; "
				    "set HTR_RECORD_PLUGIN or use --engine "
				    "log");
		}
		if (access(plugin, R_OK) < 0) {
			free(av);
			return errf(err, errlen, "%s: %s", plugin,
				    strerror(errno));
		}
		if (pipe(rp) < 0) {
			free(av);
			return errf(err, errlen, "pipe: %s", strerror(errno));
		}
		snprintf(parg, sizeof(parg), "%s,out=%%d,in=%d", plugin,
			 rp[0]);
	}
	if (pipe(lp) < 0 || pipe(ep) < 0) {
		free(av);
		return errf(err, errlen, "pipe: %s", strerror(errno));
	}
	/* Only the log's write end (and the answers' read end) reach qemu;
	 * the error pipe closes on a successful exec. */
	fcntl(lp[0], F_SETFD, FD_CLOEXEC);
	fcntl(ep[0], F_SETFD, FD_CLOEXEC);
	fcntl(ep[1], F_SETFD, FD_CLOEXEC);
	if (rp[1] >= 0)
		fcntl(rp[1], F_SETFD, FD_CLOEXEC);
	av[k++] = (char *) qemu;
	if (o->engine == REC_ENGINE_TCG) {
		char tmp[sizeof(parg)];

		snprintf(tmp, sizeof(tmp), parg, lp[1]);
		memcpy(parg, tmp, sizeof(parg));
		av[k++] = "-plugin";
		av[k++] = parg;
	} else {
		snprintf(dpath, sizeof(dpath), "/dev/fd/%d", lp[1]);
		av[k++] = "-singlestep";
		av[k++] = "-d";
		av[k++] = "exec,nochain,strace";
		av[k++] = "-D";
		av[k++] = dpath;
	}
	/* qemu runs the real file (@exe, which the image and the perf.data
	 * name, as the kernel's d_path would) but PROG sees argv[0] as the
	 * user gave it: a multi-call program (xzcat -> xz, busybox) picks
	 * its behaviour from it. */
	av[k++] = "-0";
	av[k++] = argv[0];
	av[k++] = (char *) exe;
	for (i = 1; i < n; i++)
		av[k++] = argv[i];
	q->pid = fork();
	if (q->pid < 0) {
		free(av);
		return errf(err, errlen, "fork: %s", strerror(errno));
	}
	if (q->pid == 0) {
		close(lp[0]);
		execvp(qemu, av);
		e = errno;
		if (write(ep[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	free(av);
	close(lp[1]);
	close(ep[1]);
	if (rp[0] >= 0)
		close(rp[0]);
	q->reply = rp[1];
	r = read(ep[0], &e, sizeof(e));
	close(ep[0]);
	if (r == (ssize_t) sizeof(e)) {
		close(lp[0]);
		if (rp[1] >= 0)
			close(rp[1]);
		waitpid(q->pid, NULL, 0);
		if (e == ENOENT)
			return errf(err, errlen, "%s: not found (install "
				    "Debian's qemu-user)", qemu);
		return errf(err, errlen, "%s: %s", qemu, strerror(e));
	}
	q->fd = lp[0];
	return 0;
}

/* A few addresses, the oldest forgotten first. */
struct addrs {
	uint64_t v[16];
	size_t n;
};

/* The threads: the one qemu runs as each virtual CPU now, and a summary
 * of every thread created so far (in creation order: its index).  qemu
 * hands a CPU index that a thread exits with to the next thread it
 * creates, so an index names a thread only until that thread's exit. */
struct slot {
	struct rec_thread *t;   /* NULL: no thread on this CPU (yet, again) */
	uint64_t sys_seq;       /* it logged a syscall whose strace is due:
				 * when (ts->seq), else 0 */
	int sigreturn;          /* that syscall is rt_sigreturn */
	uint64_t sig_seen;      /* the ts->sig_gen it last logged at */
	uint64_t stop_pc;       /* it had logged this address last when
				 * qemu said a block there did not run */
};

struct rec_threads {
	struct slot *live;      /* by qemu's CPU index */
	size_t nlive;
	struct rec_thread_stats *done;  /* by thread index, once ended */
	size_t n, cap;          /* threads created */
	uint64_t seq;
	size_t nthreads;        /* live ones */
	/* Signals delivered ("--- SIG" lines) whose thread is not known yet,
	 * and how many such lines came: each thread's first Trace line after
	 * one tells whether it went to that thread (signalled()). */
	size_t nsig;
	uint64_t sig_gen;
	struct addrs handlers;  /* where signal handlers were seen to start */
	/* Where new threads start: the address after a clone syscall (the
	 * child resumes there, as the parent does).  Which thread's syscall
	 * a clone strace line belongs to is not certain when several wait
	 * for theirs, so each of those addresses goes in; they are few. */
	struct addrs starts;
};

static struct rec_thread *thread_of(struct rec_ctx *c, struct rec_threads *ts,
				    unsigned cpu)
{
	if (cpu >= ts->nlive) {
		size_t n = (size_t) cpu + 8;
		struct slot *p = realloc(ts->live, n * sizeof(*p));

		if (!p) {
			rec_fail(c, "out of memory");
			return NULL;
		}
		memset(p + ts->nlive, 0, (n - ts->nlive) * sizeof(*p));
		ts->live = p;
		ts->nlive = n;
	}
	if (!ts->live[cpu].t) {
		if (ts->n == ts->cap) {
			size_t n = ts->cap ? ts->cap * 2 : 16;
			struct rec_thread_stats *d = realloc(ts->done,
							     n * sizeof(*d));

			if (!d) {
				rec_fail(c, "out of memory");
				return NULL;
			}
			ts->done = d;
			ts->cap = n;
		}
		ts->live[cpu].t = rec_thread_new(c, (unsigned) ts->n);
		ts->live[cpu].sys_seq = 0;
		ts->live[cpu].sigreturn = 0;
		ts->live[cpu].sig_seen = ts->sig_gen;
		ts->live[cpu].stop_pc = 0;
		if (!ts->live[cpu].t)
			return NULL;
		ts->nthreads++;
		memset(&ts->done[ts->n], 0, sizeof(ts->done[ts->n]));
		ts->n++;
	}
	return ts->live[cpu].t;
}

/* The thread on CPU @cpu ended: close its files, keep its figures and
 * free the rest, so that a program creating threads without end costs a
 * summary per thread, not a thread's buffers and descriptors. */
static int end_thread(struct rec_threads *ts, size_t cpu)
{
	struct rec_thread *t = ts->live[cpu].t;
	struct rec_thread_stats s;
	int rc = rec_thread_end(t);

	rec_thread_stats(t, &s);
	ts->done[s.idx] = s;
	rec_thread_free(t);
	ts->live[cpu].t = NULL;
	ts->live[cpu].sys_seq = 0;
	ts->nthreads--;
	return rc;
}

struct rec_thread *rec_threads_at(struct rec_ctx *c, struct rec_threads *ts,
				  unsigned slot)
{
	return thread_of(c, ts, slot);
}

int rec_threads_end(struct rec_threads *ts, unsigned slot)
{
	if (slot >= ts->nlive || !ts->live[slot].t)
		return 0;
	return end_thread(ts, slot);
}

static uint64_t hex(const char *s, const char **end)
{
	uint64_t v = 0;

	for (;; s++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned) (*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned) (*s - 'a' + 10);
		else
			break;
		v = v << 4 | d;
	}
	*end = s;
	return v;
}

static int is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* Whether @v, a syscall's return printed while a clone awaits its own,
 * can be the new thread's tid.  Other threads' syscalls return between
 * (the new thread's own set_robust_list often does, before the clone
 * returns in the parent; getppid gives a process id), so a value counts
 * only if it is no task of another process: a task of the guest, or no
 * task at all any more (a thread that exited before the recorder read
 * this line; qemu is at most a pipe's worth ahead). */
static int may_be_tid(const struct rec_ctx *c, long v)
{
	char p[64];

	if (v <= 0 || v == (long) c->pid)
		return 0;
	snprintf(p, sizeof(p), "/proc/%d/task/%ld", (int) c->pid, v);
	if (access(p, F_OK) == 0)
		return 1;
	snprintf(p, sizeof(p), "/proc/%ld", v);
	return access(p, F_OK) != 0;
}

/* A syscall's return, " = VALUE" (@s after the " = "): the tid a waiting
 * clone returned if it is a plain positive number that may be one
 * (errors read "-1 errno=N (...)", pointers "0x..."). */
static void sys_return(struct rec_ctx *c, const char *s)
{
	const char *p = s;
	long v = 0;

	if (c->clone_wait >= c->nclones)
		return;
	while (is_digit(*p) && v < 1L << 30)
		v = v * 10 + (*p++ - '0');
	if (p == s || *p || !may_be_tid(c, v))
		return;
	c->clones[c->clone_wait++] = (pid_t) v;
}

static void add_clone(struct rec_ctx *c)
{
	if (c->nclones == c->capclones) {
		size_t n = c->capclones ? c->capclones * 2 : 16;
		pid_t *p = realloc(c->clones, n * sizeof(*p));

		if (!p) {
			rec_fail(c, "out of memory");
			return;
		}
		c->clones = p;
		c->capclones = n;
	}
	c->clones[c->nclones++] = 0;
}

static int addrs_has(const struct addrs *a, uint64_t pc)
{
	size_t i;

	for (i = 0; i < a->n; i++)
		if (a->v[i] == pc)
			return 1;
	return 0;
}

/* Adds @pc, forgetting the oldest when full. */
static void addrs_add(struct addrs *a, uint64_t pc)
{
	if (addrs_has(a, pc))
		return;
	if (a->n == sizeof(a->v) / sizeof(a->v[0]))
		memmove(a->v, a->v + 1, --a->n * sizeof(a->v[0]));
	a->v[a->n++] = pc;
}

/* Whether a signal pending in @ts went to @sl's thread, which runs @pc
 * next (its first line since the signal's).  qemu's "--- SIG" line names no thread,
 * and threads log at once: the signal's own thread runs its handler next,
 * which its last instruction does not lead to; the others go on.  Where
 * the last instruction allows any successor (an indirect branch, a
 * sigreturn), a known handler's start decides.  Once every live thread
 * went on, the signal was one whose action is to ignore it. */
static int signalled(struct rec_threads *ts, struct slot *sl, uint64_t pc)
{
	int v, sig;
	size_t i;

	if (sl->sig_seen == ts->sig_gen)
		return 0;
	sl->sig_seen = ts->sig_gen;
	v = rec_thread_expects(sl->t, pc, sl->sigreturn);
	if (ts->nthreads == 1)
		sig = v != 1;
	else
		sig = v == 0 || (v < 0 && addrs_has(&ts->handlers, pc));
	if (sig) {
		ts->nsig--;
		addrs_add(&ts->handlers, pc);
		return 1;
	}
	for (i = 0; i < ts->nlive; i++)
		if (ts->live[i].t && ts->live[i].sig_seen != ts->sig_gen)
			return 0;
	ts->nsig = 0;
	return 0;
}

/* "Stopped execution of TB chain before [PC]": the thread that logged PC
 * last did not run it, but several may have logged it (the same code),
 * and the line names none.  @sl, one of them, runs @pc next: it is the
 * one that did not run it if it logs it again, or a signal's handler. */
static void stopped(const struct rec_threads *ts, struct slot *sl, uint64_t pc)
{
	uint64_t at = sl->stop_pc;
	int v;

	sl->stop_pc = 0;
	if (!at)
		return;
	v = pc == at ? 0 : ts->nsig ? rec_thread_expects(sl->t, pc, 0) : 1;
	if (v == 0 || (v < 0 && addrs_has(&ts->handlers, pc)))
		rec_thread_retract(sl->t, at);
}

/* The start of a syscall's strace, "PID NAME(ARGS...)" (@name: NAME).
 * qemu prints it between the thread's Trace line of the syscall
 * instruction and anything else the thread logs, but other threads'
 * lines may come between: it most likely belongs to the thread whose
 * syscall has been waiting for its strace longest, and surely to one of
 * those waiting.  Returns the end of NAME. */
static const char *sys_call(struct rec_ctx *c, struct rec_threads *ts,
			    const char *name)
{
	const char *e = name, *close;
	size_t i, who = SIZE_MAX;
	int clone = 0;

	while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') ||
	       is_digit(*e) || *e == '_')
		e++;
	if (e - name == 5 && !strncmp(name, "clone", 5)) {
		/* clone's flags hold no parenthesis */
		const char *f = strstr(e, "CLONE_THREAD");

		close = strchr(e, ')');
		clone = f && close && f < close;
		if (clone)
			add_clone(c);
	}
	for (i = 0; i < ts->nlive; i++) {
		const struct slot *sl = &ts->live[i];
		uint64_t next;

		if (!sl->t || !sl->sys_seq || !rec_thread_in_syscall(sl->t, &next))
			continue;
		if (clone)
			addrs_add(&ts->starts, next);
		if (who == SIZE_MAX || sl->sys_seq < ts->live[who].sys_seq)
			who = i;
	}
	if (who != SIZE_MAX) {
		ts->live[who].sys_seq = 0;
		ts->live[who].sigreturn = e - name == 12 &&
					  !strncmp(name, "rt_sigreturn", 12);
	}
	return e;
}

pid_t rec_tid(const struct rec_ctx *c, unsigned idx, int *real)
{
	*real = 1;
	if (idx == 0)
		return c->pid;
	if (idx - 1 < c->nclones && c->clones[idx - 1])
		return c->clones[idx - 1];
	*real = 0;
	return (pid_t) (4194304 + idx);
}

/* "Trace CPU: HOSTPTR [CSBASE/PC/FLAGS/CFLAGS] SYM" from after "Trace ". */
static void trace(struct rec_ctx *c, struct rec_threads *ts, const char *p)
{
	const char *e;
	unsigned cpu = 0;
	uint64_t pc, next;
	struct rec_thread *t;
	struct slot *sl;

	while (is_digit(*p) && cpu < 1u << 20)
		cpu = cpu * 10 + (unsigned) (*p++ - '0');
	p = strchr(p, '[');
	if (!p || !(p = strchr(p, '/')))
		return;
	pc = hex(p + 1, &e);
	if (*e != '/')
		return;
	/* qemu gives the CPU index of a thread that exited to the next
	 * thread it creates.  A syscall returns to the next instruction, a
	 * sigreturn to the interrupted one; the thread's next address being
	 * where a clone child starts instead means that syscall was its exit
	 * and this is a new thread.  (qemu's strace names the process, not
	 * the thread, so an "exit(" line alone cannot say whose it is.) */
	if (cpu < ts->nlive && (t = ts->live[cpu].t) &&
	    rec_thread_in_syscall(t, &next) && pc != next &&
	    addrs_has(&ts->starts, pc) && end_thread(ts, cpu) < 0)
		return;
	t = thread_of(c, ts, cpu);
	if (!t)
		return;
	sl = &ts->live[cpu];
	stopped(ts, sl, pc);
	rec_thread_step(t, pc, ts->nsig && signalled(ts, sl, pc));
	sl->sys_seq = rec_thread_in_syscall(t, NULL) ? ++ts->seq : 0;
	sl->sigreturn = 0;
}

/* One line of the log.  Trace lines are nearly all of it and start the
 * line; the rest is strace, whose pieces (a call "PID NAME(ARGS)", its
 * return " = VALUE\n", a signal "--- SIG... ---\n") each come whole but
 * may share a line with other threads' pieces, in the order they were
 * logged: read in that order, up to a Trace line that ends the line. */
static void line(struct rec_ctx *c, struct rec_threads *ts, const char *s)
{
	const char *p, *e;
	size_t pidlen;
	char pid[16];
	uint64_t pc;

	if (!strncmp(s, "Trace ", 6)) {
		trace(c, ts, s + 6);
		return;
	}
	pidlen = (size_t) snprintf(pid, sizeof(pid), "%d ", (int) c->pid);
	for (p = s; *p && !c->failed; p++) {
		if (*p == 'T' && !strncmp(p, "Trace ", 6)) {
			trace(c, ts, p + 6);
			return;
		}
		if (*p == '-' && !strncmp(p, "--- SIG", 7)) {
			ts->nsig++;
			ts->sig_gen++;
			return;
		}
		/* "Stopped execution of TB chain before HOSTPTR [PC] SYM":
		 * the block logged last for PC did not run. */
		if (*p == 'S' && !strncmp(p, "Stopped execution of TB chain "
					  "before", 36)) {
			size_t i;

			p = strchr(p, '[');
			if (!p)
				return;
			pc = hex(p + 1, &e);
			for (i = 0; i < ts->nlive; i++)
				if (ts->live[i].t &&
				    rec_thread_may_retract(ts->live[i].t, pc))
					ts->live[i].stop_pc = pc;
			return;
		}
		if (*p == ' ' && !strncmp(p, " = ", 3) &&
		    (p == s || p[-1] == ')')) {
			sys_return(c, p + 3);
			p += 2;
			continue;
		}
		if ((p == s || !is_digit(p[-1])) && !strncmp(p, pid, pidlen) &&
		    ((p[pidlen] >= 'a' && p[pidlen] <= 'z') ||
		     (p[pidlen] >= 'A' && p[pidlen] <= 'Z')))
			p = sys_call(c, ts, p + pidlen) - 1;
	}
}

static int pump(struct rec_ctx *c, struct rec_threads *ts, int fd)
{
	size_t cap = 1u << 20, len = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		rec_fail(c, "out of memory");
		return -1;
	}
	for (;;) {
		ssize_t n;
		char *s, *nl;

		if (rec_service(c, ts))
			break;
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t) n;
		buf[len] = 0;
		s = buf;
		while (!c->failed && (nl = memchr(s, '\n', len - (size_t) (s - buf)))) {
			*nl = 0;
			line(c, ts, s);
			s = nl + 1;
		}
		if (c->failed)
			break;
		len -= (size_t) (s - buf);
		memmove(buf, s, len);
		if (len == cap) {
			/* A line longer than the buffer (strace of a huge
			 * write): drop it. */
			len = 0;
		}
	}
	free(buf);
	return c->failed ? -1 : 0;
}

/* The end of thread @s's truth: the ids perf.data uses for it (an
 * extension of TRUTH.md; readers skip unknown lines) and its counts. */
static int trailer_to(const struct rec_ctx *c, const struct rec_thread_stats *s,
		      FILE *fp)
{
	pid_t tid;
	int real;

	tid = rec_tid(c, s->idx, &real);
	/* --ring: the window's counts */
	fprintf(fp, "tid %d %d %s\ninsns %llu\nblocks %llu\ngaps %llu\nend\n",
		(int) c->pid, (int) tid, real ? "real" : "synthetic",
		(unsigned long long) (c->o->ring ? s->win_insns : s->insns),
		(unsigned long long) (c->o->ring ? s->win_blocks : s->blocks),
		(unsigned long long) (c->o->ring ? s->win_gaps : s->gaps));
	return ferror(fp) ? -1 : 0;
}

static int truth_trailer(const struct rec_ctx *c,
			 const struct rec_thread_stats *s)
{
	char p[PATH_MAX];
	FILE *fp;
	int rc;

	snprintf(p, sizeof(p), "%s/t%u.truth", c->tmpdir, s->idx);
	fp = fopen(p, "a");
	if (!fp)
		return -1;
	rc = trailer_to(c, s, fp);
	return fclose(fp) != 0 ? -1 : rc;
}

static int write_raw_extras(const struct rec_ctx *c, const struct rec_threads *ts,
			    const struct rec_result *res)
{
	char p[PATH_MAX];
	FILE *fp;
	size_t i;
	pid_t tid;
	int real;

	snprintf(p, sizeof(p), "%s/build.args", c->tmpdir);
	fp = fopen(p, "w");
	if (!fp)
		return -1;
	for (i = 0; i < c->im.nmods; i++)
		fprintf(fp, "--elf %s@%#llx\n", c->im.mods[i]->path,
			(unsigned long long) c->im.mods[i]->base);
	fprintf(fp, "--cpuid-0x15-eax 1\n--cpuid-0x15-ebx 1\n");
	/* What a decoder needs to place the disables SKL014 leaves without
	 * an IP: the CPU perf.data names and the ranges. */
	if (c->o->skl014)
		fprintf(fp, "--cpu 6/142\n");
	for (i = 0; c->o->skl014 && i < c->o->nfilters; i++)
		if (!c->o->filters[i].module)
			fprintf(fp, "--filter %#llx-%#llx\n",
				(unsigned long long) c->o->filters[i].start,
				(unsigned long long) c->o->filters[i].end);
	for (i = 0; c->o->skl014 && i < c->im.nmods; i++)
		if (c->im.mods[i]->filtered)
			fprintf(fp, "--filter %#llx-%#llx\n",
				(unsigned long long) c->im.mods[i]->lo,
				(unsigned long long) c->im.mods[i]->hi);
	if (fclose(fp) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/record.txt", c->tmpdir);
	fp = fopen(p, "w");
	if (!fp)
		return -1;
	fprintf(fp, "htr-record 1\nprog %s\n", c->exe);
	if (res->signal)
		fprintf(fp, "signal %d\n", res->signal);
	else
		fprintf(fp, "exit %d\n", res->exit_status);
	fprintf(fp, "psb_period %llu\nret_compression %d\n"
		"cycle_model 1/insn syscall %u signal %u\n"
		"tsc_granularity %llu\ntsc_start %u\n",
		(unsigned long long) c->o->psb_period,
		!c->o->no_ret_compression, REC_TICKS_SYSCALL, REC_TICKS_SIGNAL,
		(unsigned long long) c->o->tsc_gran, REC_TSC_START);
	for (i = 0; i < c->o->nfilters; i++) {
		if (c->o->filters[i].module)
			fprintf(fp, "filter %s\n", c->o->filters[i].module);
		else
			fprintf(fp, "filter %#llx-%#llx\n",
				(unsigned long long) c->o->filters[i].start,
				(unsigned long long) c->o->filters[i].end);
	}
	for (i = 0; i < c->im.nmods; i++)
		fprintf(fp, "module %s base %#llx text %#llx-%#llx%s\n",
			c->im.mods[i]->path,
			(unsigned long long) c->im.mods[i]->base,
			(unsigned long long) c->im.mods[i]->lo,
			(unsigned long long) c->im.mods[i]->hi,
			c->im.mods[i]->filtered ? " filtered" : "");
	for (i = 0; i < ts->n; i++) {
		const struct rec_thread_stats *s = &ts->done[i];

		tid = rec_tid(c, s->idx, &real);
		fprintf(fp, "thread %u tid %d%s insns %llu blocks %llu "
			"gaps %llu bytes %llu\n", s->idx, (int) tid,
			real ? "" : " synthetic",
			(unsigned long long) s->insns,
			(unsigned long long) s->blocks,
			(unsigned long long) s->gaps,
			(unsigned long long) s->bytes);
	}
	return fclose(fp) != 0 ? -1 : 0;
}

/* Remove the truths already moved beside OUT (threads below @upto). */
static void unlink_truths(const char *final, const struct rec_threads *ts,
			  size_t upto)
{
	char p[PATH_MAX];
	size_t i;

	for (i = 0; i < upto && i < ts->n; i++) {
		snprintf(p, sizeof(p), "%s.t%zu.truth", final, i);
		unlink(p);
	}
}

/* ------------------------------------------------------------------ */
/* --ring: heartbeat, snapshots, stop */

/* What the signal handlers say.  A handler can only set a flag that the
 * pumps read between reads (its read returns EINTR: the handlers are
 * installed without SA_RESTART); one recording runs at a time in a
 * process that asks for --ring, so these are the only state outside a
 * rec_run() call (restored at its end). */
static volatile sig_atomic_t sig_snapshot, sig_stop, sig_tick;

static void on_snapshot(int sig)
{
	(void) sig;
	sig_snapshot = 1;
}

static void on_stop(int sig)
{
	sig_stop = sig;
}

static void on_tick(int sig)
{
	(void) sig;
	sig_tick = 1;
}

struct rec_live {
	const char *final;      /* OUT */
	const char *comm;
	struct timespec t0;
	uint64_t next_every;    /* --snapshot-every: the next one at */
	unsigned nsnap;         /* snapshots written */
	int stop;               /* the signal that stopped the recording */
	/* --perf-snapshot: the snapshots so far (their data copied into
	 * the temporary directory) */
	struct rec_perf_snap *snaps;
	struct rec_perf_thread *sth;    /* nsnaps blocks of nth each */
	struct rec_perf_piece *spc;
	char (*spath)[PATH_MAX];
	size_t nsth, capsth;
	size_t *sfirst;         /* per snapshot: its first in sth */
	uint64_t *last_end;     /* per thread: stream offset at its last
				 * snapshot (no new data: no record) */
	size_t nlast;
	struct sigaction old_snap, old_term, old_int, old_alrm;
	int signo;
};

/* Every thread's figures now: a live thread's window (its packets so far
 * written to its files), an ended one's summary.  @st gets ts->n. */
static int windows(struct rec_threads *ts, struct rec_thread_stats *st)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < ts->n; i++)
		st[i] = ts->done[i];
	for (i = 0; i < ts->nlive; i++) {
		struct rec_thread_stats w;

		if (!ts->live[i].t)
			continue;
		if (rec_thread_window(ts->live[i].t, &w) < 0)
			rc = -1;
		st[w.idx] = w;
	}
	return rc;
}

static uint64_t kept(const struct rec_ring *r)
{
	uint64_t n = 0;
	unsigned i;

	for (i = 0; i < r->n; i++)
		n += r->seg[i].bytes;
	return n;
}

/* The pieces of thread @s's window, its last @most bytes at most (0:
 * all); @paths gets their file names.  Returns how many. */
static size_t pieces_of(const struct rec_ctx *c,
			const struct rec_thread_stats *s, uint64_t most,
			struct rec_perf_piece *pc, char (*paths)[PATH_MAX],
			uint64_t *first)
{
	uint64_t skip = 0, total = kept(&s->ring);
	size_t n = 0;
	unsigned i;
	char base[PATH_MAX];

	if (most && total > most)
		skip = total - most;
	*first = s->ring.n ? s->ring.seg[0].start + skip : 0;
	snprintf(base, sizeof(base), "%s/t%u.pt", c->tmpdir, s->idx);
	for (i = 0; i < s->ring.n; i++) {
		const struct rec_ring_seg *g = &s->ring.seg[i];

		if (skip >= g->bytes) {
			skip -= g->bytes;
			continue;
		}
		rec_ring_path(paths[n], PATH_MAX, base, g->k);
		pc[n].path = paths[n];
		pc[n].off = skip;
		pc[n].size = g->bytes - skip;
		skip = 0;
		n++;
	}
	if (s->tail) {
		/* a snapshot's end (rec_thread_window()) */
		snprintf(paths[n], PATH_MAX, "%s/t%u.tail", c->tmpdir,
			 s->idx);
		pc[n].path = paths[n];
		pc[n].off = 0;
		pc[n].size = s->tail;
		n++;
	}
	return n;
}

/* The perf.data of every thread's window at @pdata (in the temporary
 * directory), with @snaps before (--perf-snapshot).  @last: the end of
 * the recording (threads that ran to it are not running). */
static int write_windows(struct rec_ctx *c, struct rec_thread_stats *st,
			 size_t n, const char *pdata, const char *comm,
			 uint64_t most, const struct rec_perf_snap *snaps,
			 size_t nsnaps, const uint64_t *last_end, size_t nlast)
{
	struct rec_perf_thread *pt = calloc(n ? n : 1, sizeof(*pt));
	struct rec_perf_piece *pc = calloc(n * (REC_RING_SEGS + 1) + 1,
					   sizeof(*pc));
	char (*paths)[PATH_MAX] = calloc(n * (REC_RING_SEGS + 1) + 1,
					 sizeof(*paths));
	size_t i, k = 0;
	int real, rc = -1;

	if (!pt || !pc || !paths) {
		rec_fail(c, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		pt[i].idx = st[i].idx;
		pt[i].tid = rec_tid(c, st[i].idx, &real);
		pt[i].first_tsc = st[i].first_tsc;
		pt[i].last_tsc = st[i].last_tsc;
		pt[i].running = st[i].running;
		pt[i].pieces = pc + k;
		pt[i].npieces = pieces_of(c, &st[i], most, pc + k, paths + k,
					  &pt[i].aux_offset);
		/* --perf-snapshot: no new data since the last snapshot, no
		 * record (perf copies nothing when the head did not move) */
		if (last_end && st[i].idx < nlast && st[i].ring.n &&
		    st[i].ring.seg[st[i].ring.n - 1].start +
		    st[i].ring.seg[st[i].ring.n - 1].bytes <=
		    last_end[st[i].idx])
			pt[i].npieces = 0;
		k += pt[i].npieces;
	}
	rc = rec_perf_write(pdata, c, c->pid, comm, pt, n, snaps, nsnaps,
			    c->err, c->errlen);
out:
	free(pt);
	free(pc);
	free(paths);
	return rc;
}

static size_t *realloc_sz(size_t *p, size_t n)
{
	size_t *q = realloc(p, n * sizeof(*q));

	if (!q)
		free(p);
	return q;
}

/* --perf-snapshot: keep a copy of each thread's AUX area now (its last
 * ring / 2 bytes, if it wrote anything since the last snapshot). */
static int keep_snapshot(struct rec_ctx *c, struct rec_live *lv,
			 struct rec_thread_stats *st, size_t n)
{
	struct rec_perf_snap *sn;
	size_t i;

	sn = realloc(lv->snaps, (lv->nsnap + 1) * sizeof(*sn));
	if (!sn)
		goto oom;
	lv->snaps = sn;
	if (lv->nlast < n) {
		uint64_t *l = realloc(lv->last_end, n * sizeof(*l));

		if (!l)
			goto oom;
		memset(l + lv->nlast, 0, (n - lv->nlast) * sizeof(*l));
		lv->last_end = l;
		lv->nlast = n;
	}
	if (lv->nsth + n > lv->capsth) {
		size_t cap = (lv->nsth + n) * 2;
		struct rec_perf_thread *t = realloc(lv->sth, cap * sizeof(*t));
		struct rec_perf_piece *p;
		char (*ps)[PATH_MAX];

		if (!t)
			goto oom;
		lv->sth = t;
		p = realloc(lv->spc, cap * sizeof(*p));
		if (!p)
			goto oom;
		lv->spc = p;
		ps = realloc(lv->spath, cap * sizeof(*ps));
		if (!ps)
			goto oom;
		lv->spath = ps;
		lv->capsth = cap;
	}
	if (!(lv->sfirst = realloc_sz(lv->sfirst, lv->nsnap + 1)))
		goto oom;
	lv->sfirst[lv->nsnap] = lv->nsth;
	sn = &lv->snaps[lv->nsnap];
	sn->tsc = c->clock;
	sn->nth = 0;
	for (i = 0; i < n; i++) {
		uint64_t end = st[i].ring.n ?
			st[i].ring.seg[st[i].ring.n - 1].start +
			st[i].ring.seg[st[i].ring.n - 1].bytes : 0;
		struct rec_perf_piece pc[REC_RING_SEGS + 1];
		char paths[REC_RING_SEGS + 1][PATH_MAX];
		struct rec_perf_thread *t = &lv->sth[lv->nsth];
		size_t np, j;
		uint64_t first, size = 0;
		struct out_file {
			FILE *fp;
		} of;
		int real;

		if (end <= lv->last_end[i])
			continue;
		lv->last_end[i] = end;
		np = pieces_of(c, &st[i], c->o->ring / 2, pc, paths, &first);
		snprintf(lv->spath[lv->nsth], PATH_MAX, "%s/snap%u.t%u.pt",
			 c->tmpdir, lv->nsnap, st[i].idx);
		of.fp = fopen(lv->spath[lv->nsth], "wb");
		if (!of.fp) {
			rec_fail(c, "%s: %s", lv->spath[lv->nsth],
				 strerror(errno));
			return -1;
		}
		for (j = 0; j < np; j++) {
			FILE *in = fopen(pc[j].path, "rb");
			char buf[65536];
			uint64_t left = pc[j].size;

			if (!in || fseeko(in, (off_t) pc[j].off, SEEK_SET)) {
				if (in)
					fclose(in);
				fclose(of.fp);
				rec_fail(c, "%s: cannot read", pc[j].path);
				return -1;
			}
			while (left) {
				size_t w = left < sizeof(buf) ? (size_t) left :
					   sizeof(buf);

				if (fread(buf, 1, w, in) != w ||
				    fwrite(buf, 1, w, of.fp) != w)
					break;
				left -= w;
				size += w;
			}
			fclose(in);
		}
		if (fclose(of.fp) != 0 || size != end - first) {
			rec_fail(c, "%s: cannot write", lv->spath[lv->nsth]);
			return -1;
		}
		memset(t, 0, sizeof(*t));
		t->idx = st[i].idx;
		t->tid = rec_tid(c, st[i].idx, &real);
		t->first_tsc = st[i].first_tsc;
		t->last_tsc = st[i].last_tsc;
		lv->spc[lv->nsth].off = 0;
		lv->spc[lv->nsth].size = size;
		t->npieces = 1;
		t->aux_offset = first;
		sn->nth++;
		lv->nsth++;
	}
	return 0;
oom:
	rec_fail(c, "out of memory");
	return -1;
}

/* --ring: the window truths of @st (window_truth() in thread.c wrote
 * them into the temporary directory) beside @final, as @final.tN.truth,
 * with their trailers.  @snap: a snapshot (an ended thread's truth is
 * copied: the end needs it again).  Returns 0, or -1 with nothing
 * placed and the context's message set. */
static int place_truths(struct rec_ctx *c, const struct rec_thread_stats *st,
			size_t n, const char *final, int snap)
{
	char src[PATH_MAX], dst[PATH_MAX + 32];
	size_t i, j;

	for (i = 0; i < n; i++) {
		FILE *in = NULL, *fp;
		int rc = 0;

		if (!st[i].has_truth)
			continue;
		snprintf(src, sizeof(src), "%s/t%u.truth%s", c->tmpdir,
			 st[i].idx, st[i].running ? ".snap" : "");
		snprintf(dst, sizeof(dst), "%s.t%u.truth", final, st[i].idx);
		if (snap && !st[i].running) {
			char buf[65536];
			size_t k;

			in = fopen(src, "r");
			fp = in ? fopen(dst, "w") : NULL;
			while (fp && (k = fread(buf, 1, sizeof(buf), in)) > 0)
				if (fwrite(buf, 1, k, fp) != k)
					rc = -1;
			if (in && ferror(in))
				rc = -1;
			if (in)
				fclose(in);
		} else {
			fp = fopen(src, "a");
		}
		if (!fp || trailer_to(c, st + i, fp) < 0)
			rc = -1;
		if (fp && fclose(fp) != 0)
			rc = -1;
		if (rc == 0 && !(snap && !st[i].running) &&
		    rename(src, dst) < 0)
			rc = -1;
		if (rc < 0) {
			rec_fail(c, "%s: %s", dst, strerror(errno ? errno : EIO));
			for (j = 0; j <= i; j++) {
				if (!st[j].has_truth)
					continue;
				snprintf(dst, sizeof(dst), "%s.t%u.truth",
					 final, st[j].idx);
				unlink(dst);
			}
			return -1;
		}
	}
	return 0;
}

static void unplace_truths(const struct rec_thread_stats *st, size_t n,
			   const char *final)
{
	char dst[PATH_MAX + 32];
	size_t i;

	/* not another run's truths beside OUT */
	for (i = 0; i < n; i++) {
		if (!st[i].has_truth)
			continue;
		snprintf(dst, sizeof(dst), "%s.t%u.truth", final, st[i].idx);
		unlink(dst);
	}
}

static double since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double) (t1.tv_sec - t0->tv_sec) +
	       (double) (t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A snapshot now: OUT.snapshot.N.data (renamed into place once whole),
 * or with --perf-snapshot one more snapshot kept for OUT. */
static void snapshot(struct rec_ctx *c, struct rec_threads *ts)
{
	struct rec_live *lv = c->live;
	struct rec_thread_stats *st;
	char pdata[PATH_MAX], to[PATH_MAX];

	if (!ts->n)
		return;
	st = calloc(ts->n, sizeof(*st));
	if (!st) {
		rec_fail(c, "out of memory");
		return;
	}
	if (windows(ts, st) < 0) {
		rec_fail(c, "%s: cannot write the threads' traces", c->tmpdir);
	} else if (c->o->perf_snapshot) {
		if (keep_snapshot(c, lv, st, ts->n) == 0)
			lv->nsnap++;
	} else {
		snprintf(pdata, sizeof(pdata), "%s/snapshot.data", c->tmpdir);
		snprintf(to, sizeof(to), "%s.snapshot.%u.data", lv->final,
			 lv->nsnap + 1);
		if (write_windows(c, st, ts->n, pdata, lv->comm, 0, NULL,
				  0, NULL, 0) == 0 &&
		    place_truths(c, st, ts->n, to, 1) == 0) {
			/* the truths first, the perf.data last */
			if (rename(pdata, to) < 0) {
				rec_fail(c, "%s: %s", to, strerror(errno));
				unplace_truths(st, ts->n, to);
			} else {
				lv->nsnap++;
				if (!c->o->quiet)
					fprintf(stderr, "htr: record: snapshot "
						"%u -> %s (%.1f s, %llu insns "
						"run)\n", lv->nsnap, to,
						since(&lv->t0),
						(unsigned long long)
						c->executed);
			}
		}
	}
	free(st);
}

static void heartbeat(struct rec_ctx *c, struct rec_threads *ts)
{
	uint64_t bytes = 0;
	size_t i, live = 0;

	for (i = 0; i < ts->n; i++)
		bytes += kept(&ts->done[i].ring);
	for (i = 0; i < ts->nlive; i++) {
		struct rec_thread_stats w;

		if (!ts->live[i].t)
			continue;
		live++;
		rec_thread_stats(ts->live[i].t, &w);
		/* the current segment up to now (encoded, maybe not yet
		 * written) */
		bytes += kept(&w.ring) - (w.ring.n ?
			 w.ring.seg[w.ring.n - 1].bytes : 0) +
			 (w.ring.n ? w.bytes - w.ring.seg[w.ring.n - 1].start :
			  0);
	}
	fprintf(stderr, "htr: record: heartbeat: %.1f s, %llu insns run, "
		"%llu bytes of trace kept, %zu thread%s running, %u "
		"snapshot%s\n", since(&c->live->t0),
		(unsigned long long) c->executed, (unsigned long long) bytes,
		live, live == 1 ? "" : "s", c->live->nsnap,
		c->live->nsnap == 1 ? "" : "s");
}

int rec_service(struct rec_ctx *c, struct rec_threads *ts)
{
	struct rec_live *lv = c->live;

	if (!lv || c->failed)
		return 0;
	if (sig_tick) {
		sig_tick = 0;
		heartbeat(c, ts);
	}
	if (sig_snapshot) {
		sig_snapshot = 0;
		snapshot(c, ts);
	}
	while (c->o->snapshot_every && c->executed >= lv->next_every &&
	       !c->failed) {
		lv->next_every += c->o->snapshot_every;
		snapshot(c, ts);
	}
	if (sig_stop) {
		lv->stop = sig_stop;
		return 1;
	}
	return 0;
}

static int live_start(struct rec_ctx *c, struct rec_live *lv,
		      const char *final, const char *comm)
{
	const struct rec_opts *o = c->o;
	struct sigaction sa;

	memset(lv, 0, sizeof(*lv));
	lv->final = final;
	lv->comm = comm;
	lv->next_every = o->snapshot_every;
	clock_gettime(CLOCK_MONOTONIC, &lv->t0);
	sig_snapshot = sig_stop = sig_tick = 0;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	/* no SA_RESTART: a pump blocked in read() wakes up */
	lv->signo = o->snapshot_signal ? o->snapshot_signal : SIGUSR1;
	sa.sa_handler = on_snapshot;
	if (sigaction(lv->signo, &sa, &lv->old_snap) < 0)
		return -1;
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, &lv->old_term);
	sigaction(SIGINT, &sa, &lv->old_int);
	sa.sa_handler = on_tick;
	sigaction(SIGALRM, &sa, &lv->old_alrm);
	if (o->heartbeat) {
		struct itimerval it;

		memset(&it, 0, sizeof(it));
		it.it_interval.tv_sec = o->heartbeat;
		it.it_value.tv_sec = o->heartbeat;
		setitimer(ITIMER_REAL, &it, NULL);
	}
	c->live = lv;
	return 0;
}

/* The heartbeat stops with the recorder. */
static void live_stop(struct rec_ctx *c)
{
	struct rec_live *lv = c->live;
	struct itimerval it;

	if (!lv)
		return;
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	sigaction(lv->signo, &lv->old_snap, NULL);
	sigaction(SIGTERM, &lv->old_term, NULL);
	sigaction(SIGINT, &lv->old_int, NULL);
	sigaction(SIGALRM, &lv->old_alrm, NULL);
	sig_tick = 0;
}

/* --perf-snapshot: the snapshots' pointers, now that nothing moves. */
static void snaps_fix(struct rec_live *lv)
{
	size_t j;

	for (j = 0; j < lv->nsth; j++) {
		lv->spc[j].path = lv->spath[j];
		lv->sth[j].pieces = &lv->spc[j];
	}
	for (j = 0; j < lv->nsnap; j++)
		lv->snaps[j].th = lv->sth + lv->sfirst[j];
}

static void live_free(struct rec_live *lv)
{
	free(lv->sfirst);
	free(lv->snaps);
	free(lv->sth);
	free(lv->spc);
	free(lv->spath);
	free(lv->last_end);
}

/* Whether @a and @b name one directory (as given, or both existing). */
static int same_dir(const char *a, const char *b)
{
	struct stat sa, sb;
	size_t la = strlen(a), lb = strlen(b);

	while (la > 1 && a[la - 1] == '/')
		la--;
	while (lb > 1 && b[lb - 1] == '/')
		lb--;
	if (la == lb && !memcmp(a, b, la))
		return 1;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 &&
	       sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The LLDB bundle of the threads in @ts, their traces in @tmp, into the
 * new directory @ltmp.  0 or -1 with @err set. */
static int write_lldb(const struct rec_ctx *c, const struct rec_threads *ts,
		      const char *tmp, const char *ltmp, char *err,
		      size_t errlen)
{
	struct rec_perf_thread *pt = calloc(ts->n + 1, sizeof(*pt));
	char (*paths)[PATH_MAX] = calloc(ts->n + 1, sizeof(*paths));
	size_t i;
	int real, rc;

	if (!pt || !paths) {
		free(pt);
		free(paths);
		return errf(err, errlen, "out of memory");
	}
	for (i = 0; i < ts->n; i++) {
		snprintf(paths[i], PATH_MAX, "%s/t%u.pt", tmp,
			 ts->done[i].idx);
		pt[i].idx = ts->done[i].idx;
		pt[i].pt_path = paths[i];
		pt[i].tid = rec_tid(c, ts->done[i].idx, &real);
	}
	rc = rec_lldb_write(ltmp, c, c->pid, pt, ts->n, err, errlen);
	free(pt);
	free(paths);
	return rc;
}

/* --raw DIR may exist when it is empty. */
static int raw_target_ok(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int empty = 1;

	if (stat(dir, &st) < 0)
		return errno == ENOENT ? 0 :
		       errf(err, errlen, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return errf(err, errlen, "%s: exists and is not a directory",
			    dir);
	d = opendir(dir);
	if (!d)
		return errf(err, errlen, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = 0;
	closedir(d);
	if (!empty)
		return errf(err, errlen, "%s: exists and is not empty", dir);
	return 0;
}

/* Rename the finished bundle @ltmp to @dir (empty or absent, checked
 * before the run).  0 or -1 with @err set. */
static int place_lldb(const char *dir, const char *ltmp, char *err,
		      size_t errlen)
{
	rmdir(dir);
	if (rename(ltmp, dir) < 0)
		return errf(err, errlen, "%s: %s", dir, strerror(errno));
	return 0;
}

int rec_run(const struct rec_opts *o, char *const argv[],
	    struct rec_result *res, char *err, size_t errlen)
{
	struct rec_opts auto_o;
	struct rec_live lv;
	struct rec_ctx c;
	/* The kernel names the process after the file name execve was
	 * given, not the file it resolves to. */
	const char *comm = argv && argv[0] ? (strrchr(argv[0], '/') ?
			   strrchr(argv[0], '/') + 1 : argv[0]) : "";
	struct rec_threads ts;
	struct qemu q = { -1, -1, -1 };
	struct timespec t0, t1;
	char *exe = NULL, *tmp = NULL, *final = NULL, *ltmp = NULL;
	int status = 0, rc = -1, lldb_placed = 0;
	size_t i;

	memset(res, 0, sizeof(*res));
	memset(&c, 0, sizeof(c));
	memset(&lv, 0, sizeof(lv));
	if (o->engine == REC_ENGINE_AUTO) {
		/* A copy: the caller's options stay as given. */
		auto_o = *o;
		auto_o.engine = o->plugin || rec_plugin_path() ?
				REC_ENGINE_TCG : REC_ENGINE_LOG;
		o = &auto_o;
	}
	memset(&ts, 0, sizeof(ts));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!argv || !argv[0])
		return errf(err, errlen, "no program to record");
	if (check_prog(argv[0], &exe, err, errlen) < 0)
		return -1;
	if (o->raw_dir && o->cpus) {
		errf(err, errlen, "--cpus writes a perf.data, not --raw");
		goto out;
	}
	if (o->ring && (o->cpus || o->raw_dir || o->lldb_dir)) {
		errf(err, errlen, "--ring keeps a per-thread perf.data: not "
		     "with --cpus, --raw or --lldb");
		goto out;
	}
	if (o->ring && o->ring / REC_RING_SEGS < 2 * o->psb_period +
	    2 * REC_RING_SLACK) {
		errf(err, errlen, "--ring %llu: too small for --psb-period "
		     "%llu (at least %llu bytes)",
		     (unsigned long long) o->ring,
		     (unsigned long long) o->psb_period,
		     (unsigned long long) (REC_RING_SEGS * (2 * o->psb_period +
					   2 * REC_RING_SLACK)));
		goto out;
	}
	if (o->raw_dir && raw_target_ok(o->raw_dir, err, errlen) < 0)
		goto out;
	if (o->lldb_dir) {
		/* LLDB's per-CPU bundles need each CPU's context-switch
		 * trace, which the recorder does not write. */
		if (o->cpus) {
			errf(err, errlen, "--lldb writes a per-thread bundle: "
			     "not with --cpus");
			goto out;
		}
		if (o->raw_dir && same_dir(o->raw_dir, o->lldb_dir)) {
			errf(err, errlen, "--lldb %s: the --raw directory; "
			     "give another", o->lldb_dir);
			goto out;
		}
		if (raw_target_ok(o->lldb_dir, err, errlen) < 0)
			goto out;
		ltmp = tmp_beside(o->lldb_dir, err, errlen);
		if (!ltmp)
			goto out;
	}
	final = strdup(o->raw_dir ? o->raw_dir : o->out);
	if (!final) {
		errf(err, errlen, "out of memory");
		goto out;
	}
	tmp = tmp_beside(final, err, errlen);
	if (!tmp)
		goto out;
	c.o = o;
	c.truth = !o->no_truth && !o->perf_snapshot;
	c.tmpdir = tmp;
	c.exe = exe;
	c.clock = REC_TSC_START;
	{
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		c.wall_start_ns = (uint64_t) now.tv_sec * 1000000000u +
				  (uint64_t) now.tv_nsec;
	}
	c.err = err;
	c.errlen = errlen;
	if (rec_image_init(&c.im, o->filters, o->nfilters, err, errlen) < 0)
		goto out;
	if (o->cpus && rec_sched_init(&c, o->cpus) < 0)
		goto out;
	if (o->ring && live_start(&c, &lv, final, comm) < 0) {
		errf(err, errlen, "signal %d: %s", o->snapshot_signal,
		     strerror(errno));
		goto out;
	}
	if (spawn(&q, o, exe, argv, err, errlen) < 0)
		goto out;
	c.im.pid = q.pid;
	c.pid = q.pid;
	c.im.exe = exe;
	if (o->engine == REC_ENGINE_TCG)
		rec_tcg_pump(&c, &ts, q.fd, q.reply);
	else
		pump(&c, &ts, q.fd);
	/* The heartbeat stops with the recorder. */
	live_stop(&c);
	if (c.failed || lv.stop) {
		/* Stop PROG: the recording is lost anyway, or (--ring,
		 * SIGTERM) the window so far is what was asked for. */
		kill(q.pid, SIGKILL);
	}
	close(q.fd);
	if (q.reply >= 0)
		close(q.reply);
	while (waitpid(q.pid, &status, 0) < 0 && errno == EINTR)
		;
	if (c.failed)
		goto out;
	if (lv.stop) {
		res->stopped = lv.stop;
	} else if (WIFSIGNALED(status)) {
		res->signal = WTERMSIG(status);
		errf(err, errlen, "%s: killed by signal %d (%s); nothing "
		     "written", argv[0], res->signal,
		     strsignal(res->signal));
		goto out;
	}
	res->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
	if (c.tcg_cut && !lv.stop) {
		errf(err, errlen, "%s: the plugin's stream ended before qemu "
		     "exited (exit status %d; did the program close the "
		     "plugin's pipe?); nothing written", o->qemu,
		     res->exit_status);
		goto out;
	}
	/* The threads still on a CPU end with the log, in creation order. */
	for (;;) {
		size_t k = SIZE_MAX;

		for (i = 0; i < ts.nlive; i++)
			if (ts.live[i].t && (k == SIZE_MAX ||
			    rec_thread_idx(ts.live[i].t) <
			    rec_thread_idx(ts.live[k].t)))
				k = i;
		if (k == SIZE_MAX)
			break;
		if (end_thread(&ts, k) < 0)
			goto out;
	}
	for (i = 0; i < c.sched.n; i++) {
		if (rec_stream_close(&c.sched.cpus[i].s) < 0) {
			errf(err, errlen, "%s: cannot write: %s",
			     c.sched.cpus[i].s.path, strerror(errno));
			goto out;
		}
		res->bytes += rec_stream_bytes(&c.sched.cpus[i].s);
	}
	if (!ts.n) {
		if (o->engine == REC_ENGINE_TCG)
			errf(err, errlen, "%s: the plugin reported no "
			     "instruction (is it qemu-user 7.2 with plugins?)",
			     o->qemu);
		else
			errf(err, errlen, "%s: qemu logged no instruction (is "
			     "it qemu-user 7.2 with -singlestep and -d exec?)",
			     o->qemu);
		goto out;
	}
	for (i = 0; c.truth && !o->ring && i < ts.n; i++)
		if (truth_trailer(&c, &ts.done[i]) < 0) {
			errf(err, errlen, "%s: cannot write: %s", tmp,
			     strerror(errno));
			goto out;
		}
	res->executed = c.executed;
	res->oddities = c.oddities;
	res->modules = (unsigned) c.im.nmods;
	for (i = 0; i < ts.n; i++) {
		res->threads++;
		res->traced += ts.done[i].insns;
		res->bytes += ts.done[i].bytes;
		res->kept += o->ring ? kept(&ts.done[i].ring) :
			     ts.done[i].bytes;
	}
	res->snapshots = lv.nsnap;
	if (ltmp && write_lldb(&c, &ts, tmp, ltmp, err, errlen) < 0)
		goto out;
	if (o->raw_dir) {
		if (write_raw_extras(&c, &ts, res) < 0) {
			errf(err, errlen, "%s: cannot write: %s", tmp,
			     strerror(errno));
			goto out;
		}
		if (ltmp && place_lldb(o->lldb_dir, ltmp, err, errlen) < 0)
			goto out;
		lldb_placed = !!ltmp;
		rmdir(final);   /* empty, checked above */
		if (rename(tmp, final) < 0) {
			errf(err, errlen, "%s: %s", final, strerror(errno));
			goto out;
		}
		free(tmp);
		tmp = NULL;
	} else {
		struct rec_perf_thread *pt = calloc(ts.n, sizeof(*pt));
		char (*paths)[PATH_MAX] = calloc(ts.n, sizeof(*paths));
		size_t n = 0;
		char pdata[PATH_MAX];
		int real;

		if (!pt || !paths) {
			free(pt);
			free(paths);
			errf(err, errlen, "out of memory");
			goto out;
		}
		if (o->ring) {
			/* The last window (with --perf-snapshot the last
			 * snapshot, after the others). */
			snprintf(pdata, sizeof(pdata), "%s/perf.data", tmp);
			if (o->perf_snapshot)
				snaps_fix(&lv);
			rc = write_windows(&c, ts.done, ts.n, pdata, comm,
					   o->perf_snapshot ? o->ring / 2 : 0,
					   lv.snaps,
					   o->perf_snapshot ? lv.nsnap : 0,
					   o->perf_snapshot ? lv.last_end : NULL,
					   lv.nlast);
			free(pt);
			free(paths);
			if (rc < 0)
				goto out;
			rc = -1;
			if (place_truths(&c, ts.done, ts.n, final, 0) < 0)
				goto out;
			if (rename(pdata, final) < 0) {
				errf(err, errlen, "%s: %s", final,
				     strerror(errno));
				unplace_truths(ts.done, ts.n, final);
				goto out;
			}
			rc = 0;
			goto out;
		}
		for (i = 0; i < ts.n; i++) {
			const struct rec_thread_stats *s = &ts.done[i];

			snprintf(paths[n], PATH_MAX, "%s/t%u.pt", tmp, s->idx);
			pt[n].idx = s->idx;
			pt[n].pt_path = paths[n];
			pt[n].first_tsc = s->first_tsc;
			pt[n].last_tsc = s->last_tsc;
			pt[n].tid = rec_tid(&c, s->idx, &real);
			n++;
		}
		snprintf(pdata, sizeof(pdata), "%s/perf.data", tmp);
		rc = rec_perf_write(pdata, &c, q.pid, comm, pt, n, NULL, 0,
				    err, errlen);
		free(pt);
		free(paths);
		if (rc < 0)
			goto out;
		rc = -1;
		if (ltmp && place_lldb(o->lldb_dir, ltmp, err, errlen) < 0)
			goto out;
		lldb_placed = !!ltmp;
		/* The truth goes beside the perf.data (OUT.tN.truth), then
		 * the perf.data itself: it appears last, or not at all. */
		for (i = 0; c.truth && i < ts.n; i++) {
			char from[PATH_MAX], to[PATH_MAX];

			snprintf(from, sizeof(from), "%s/t%zu.truth", tmp, i);
			snprintf(to, sizeof(to), "%s.t%zu.truth", final, i);
			if (rename(from, to) < 0) {
				errf(err, errlen, "%s: %s", to, strerror(errno));
				unlink_truths(final, &ts, i);
				goto out;
			}
		}
		if (rename(pdata, final) < 0) {
			errf(err, errlen, "%s: %s", final, strerror(errno));
			unlink_truths(final, &ts, c.truth ? ts.n : 0);
			goto out;
		}
	}
	rc = 0;
out:
	live_stop(&c);
	live_free(&lv);
	/* The bundle went first: it goes again when the rest failed. */
	if (rc < 0 && lldb_placed)
		rec_lldb_remove(o->lldb_dir);
	if (ltmp && !lldb_placed)
		rec_lldb_remove(ltmp);
	free(ltmp);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	res->seconds = (double) (t1.tv_sec - t0.tv_sec) +
		       (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
	for (i = 0; i < ts.nlive; i++)
		rec_thread_free(ts.live[i].t);
	free(ts.live);
	free(ts.done);
	if (c.im.cache)
		rec_image_fini(&c.im);
	rec_sched_fini(&c.sched);
	if (tmp)
		rm_tree(tmp);
	free(tmp);
	free(final);
	free(exe);
	free(c.clones);
	return rc;
}
